//! DEVX on verbs objects: query and modify of QPs, CQs, SRQs and WQs, and
//! the typed operations researchers use them for (RoCE UDP source port,
//! LAG port, DCI stream reset), DEVX memory keys and packet pacing entries.

use std::ptr::NonNull;

use super::cmd::{self, KlmEntry, MkeyAccessMode, MkeySpec};
use super::context::{raw_name, require_raw, DevxContext, OPEN_OP};
use super::obj::{DevxObj, Held};
use crate::bindings as ffi;
use crate::mlx5dv::keys::mkey::UmrKey;
use crate::prim::{Cq, Error, Mr, Pd, Qp, RemoteAddr, Result, Srq, Wq};

/// A libmlx5 DEVX entry on a verbs object, as a closure (the `dlopen`
/// linkage's entries are Rust functions, the others C ones).
macro_rules! raw {
    ($f:path) => {
        |o, i: *const std::ffi::c_void, il, p: *mut std::ffi::c_void, pl| {
            // SAFETY: `call`'s contract: a live object of an mlx5 context and
            // buffers valid for their lengths.
            unsafe { $f(o, i, il, p, pl) }
        }
    };
}

fn call<T>(
    op: &'static str,
    f: impl FnOnce(*mut T, *const std::ffi::c_void, usize, *mut std::ffi::c_void, usize) -> i32,
    obj: *mut T,
    cmd_in: &[u8],
    out: &mut [u8],
) -> Result<()> {
    assert!(out.len() >= cmd::OUT_HDR_BYTES, "{op}: out is shorter than the 16-byte output header");
    // `obj` is a live verbs object of an mlx5 context (checked by the
    // callers); the buffers are valid for their lengths.
    let rc = f(obj, cmd_in.as_ptr().cast(), cmd_in.len(), out.as_mut_ptr().cast(), out.len());
    if rc != 0 {
        return Err(cmd::failed(op, cmd_in, rc, out));
    }
    cmd::check_out(op, cmd::opcode_of(cmd_in), out)
}

fn qp_ctx(qp: &Qp, op: &'static str) -> Result<*mut ffi::ibv_qp> {
    let raw = qp.as_ptr();
    // SAFETY: a live QP points to its context.
    let ctx = unsafe { (*raw).context };
    require_raw(ctx, || raw_name(ctx), op)?;
    Ok(raw)
}

/// Sends the QP command `cmd_in` (e.g. `QUERY_QP`) about `qp`; the answer in `out`.
///
/// Every function here: on a device that is not mlx5, [`Error::Unsupported`]
/// naming DEVX, before any command is sent; a QP of a context not opened
/// with DEVX ([`DevxContext::open`]) is refused by the kernel (`EINVAL`).
///
/// # References
/// `mlx5dv_devx_qp_query(3)`
pub fn qp_query(qp: &Qp, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_qp_query";
    call(OP, raw!(ffi::mlx5dv_devx_qp_query), qp_ctx(qp, OP)?, cmd_in, out)
}

/// Sends the QP modify command `cmd_in` (e.g. `RTS2RTS_QP`); as [`qp_query`].
///
/// # References
/// `mlx5dv_devx_qp_modify(3)`
pub fn qp_modify(qp: &Qp, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_qp_modify";
    call(OP, raw!(ffi::mlx5dv_devx_qp_modify), qp_ctx(qp, OP)?, cmd_in, out)
}

fn cq_ctx(cq: &Cq, op: &'static str) -> Result<*mut ffi::ibv_cq> {
    require_raw(cq.context().as_ptr(), || cq.context().name().to_string(), op)?;
    Ok(cq.as_ptr())
}

/// Sends a CQ query command (`QUERY_CQ`); as [`qp_query`].
pub fn cq_query(cq: &Cq, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_cq_query";
    call(OP, raw!(ffi::mlx5dv_devx_cq_query), cq_ctx(cq, OP)?, cmd_in, out)
}

/// Sends a CQ modify command (`MODIFY_CQ`); as [`qp_query`].
pub fn cq_modify(cq: &Cq, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_cq_modify";
    call(OP, raw!(ffi::mlx5dv_devx_cq_modify), cq_ctx(cq, OP)?, cmd_in, out)
}

fn srq_ctx(srq: &Srq, op: &'static str) -> Result<*mut ffi::ibv_srq> {
    let ctx = srq.pd().context();
    require_raw(ctx.as_ptr(), || ctx.name().to_string(), op)?;
    Ok(srq.as_ptr())
}

/// Sends an SRQ query command (`QUERY_SRQ`, `QUERY_XRC_SRQ`); as [`qp_query`].
pub fn srq_query(srq: &Srq, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_srq_query";
    call(OP, raw!(ffi::mlx5dv_devx_srq_query), srq_ctx(srq, OP)?, cmd_in, out)
}

/// Sends an SRQ modify command (`ARM_RQ`, `MODIFY_XRC_SRQ`); as [`qp_query`].
pub fn srq_modify(srq: &Srq, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_srq_modify";
    call(OP, raw!(ffi::mlx5dv_devx_srq_modify), srq_ctx(srq, OP)?, cmd_in, out)
}

fn wq_ctx(wq: &Wq, op: &'static str) -> Result<*mut ffi::ibv_wq> {
    let raw = wq.as_ptr();
    // SAFETY: a live WQ points to its context.
    let ctx = unsafe { (*raw).context };
    require_raw(ctx, || raw_name(ctx), op)?;
    Ok(raw)
}

/// Sends a WQ query command (`QUERY_RQ`); as [`qp_query`].
pub fn wq_query(wq: &Wq, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_wq_query";
    call(OP, raw!(ffi::mlx5dv_devx_wq_query), wq_ctx(wq, OP)?, cmd_in, out)
}

/// Sends a WQ modify command (`MODIFY_RQ`); as [`qp_query`].
pub fn wq_modify(wq: &Wq, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_wq_modify";
    call(OP, raw!(ffi::mlx5dv_devx_wq_modify), wq_ctx(wq, OP)?, cmd_in, out)
}

/// Sets the RoCE v2 UDP source port of an RC or UC QP in RTS
/// ([`cmd::rts2rts_udp_sport`], the command `mlx5dv_modify_qp_udp_sport`
/// sends); read it back with [`udp_sport`]. The device's
/// `rts2rts_qp_udp_sport` capability ([`super::HcaCaps::rts2rts_qp_udp_sport`])
/// says whether it may; without it the firmware refuses ([`Error::Firmware`]).
pub fn set_udp_sport(qp: &Qp, udp_sport: u16) -> Result<()> {
    let mut out = [0u8; cmd::OUT_HDR_BYTES];
    qp_modify(qp, &cmd::rts2rts_udp_sport(qp.qpn(), udp_sport), &mut out)
}

/// The QP's RoCE UDP source port, read from its context (`QUERY_QP`).
pub fn udp_sport(qp: &Qp) -> Result<u16> {
    let mut out = vec![0u8; cmd::QUERY_QP_OUT_BYTES];
    qp_query(qp, &cmd::query_qp(qp.qpn()), &mut out)?;
    Ok(cmd::qp_udp_sport(&out))
}

/// The QP context's data-placement ordering (`QUERY_QP`; the bits of
/// Linux 7.3's `mlx5_ifc.h`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DpOrdering {
    /// `dp_ordering_1`: out-of-order data placement.
    pub dp_ordering_1: bool,
    /// `dp_ordering_force`: the ordering is the QP's, not the device's default.
    pub dp_ordering_force: bool,
}

/// The data-placement ordering of `qp`, read back from its context
/// (`QUERY_QP`). A QP created with
/// [`Mlx5QpFlags::OOO_DP`](crate::prim::Mlx5QpFlags::OOO_DP) has both bits
/// set once in RTR: libmlx5 passes `MLX5_IB_MODIFY_QP_OOO_DP` with the
/// modify to INIT and the kernel writes them into `INIT2RTR_QP` (Linux
/// 7.3's `__mlx5_ib_modify_qp`); that flag is how they are set.
pub fn dp_ordering(qp: &Qp) -> Result<DpOrdering> {
    let mut out = vec![0u8; cmd::QUERY_QP_OUT_BYTES];
    qp_query(qp, &cmd::query_qp(qp.qpn()), &mut out)?;
    let (dp_ordering_1, dp_ordering_force) = cmd::qp_dp_ordering(&out);
    Ok(DpOrdering { dp_ordering_1, dp_ordering_force })
}

/// The LAG port the QP is set to send on and the port that carries it now
/// (`QUERY_LAG`, then `QUERY_QP`'s `lag_tx_port_affinity`), as
/// `mlx5dv_query_qp_lag_port`. [`Error::Unsupported`] when the ports are
/// not bonded (LAG state 0) or the QP has no port set.
pub fn lag_port(qp: &Qp) -> Result<(u8, u8)> {
    const OP: &str = "mlx5dv_query_qp_lag_port (DEVX)";
    let raw = qp_ctx(qp, OP)?;
    let mut lag = [0u8; cmd::OUT_HDR_BYTES];
    // SAFETY: a live QP points to its context.
    let ctx = unsafe { (*raw).context };
    general_cmd_raw(ctx, &cmd::query_lag(), &mut lag)?;
    let (state, a1, a2) = cmd::lag_state(&lag);
    if state == 0 {
        return Err(Error::unsupported(
            OP,
            &crate::prim::unsupported::LAG_PORT,
            &raw_name(ctx),
            "LAG state 0 (not bonded)",
        ));
    }
    let mut out = vec![0u8; cmd::QUERY_QP_OUT_BYTES];
    qp_query(qp, &cmd::query_qp(qp.qpn()), &mut out)?;
    match cmd::qp_lag_port(&out) {
        1 => Ok((1, a1)),
        2 => Ok((2, a2)),
        n => Err(Error::unsupported(
            OP,
            &crate::prim::unsupported::LAG_PORT,
            &raw_name(ctx),
            format_args!("lag_tx_port_affinity {n} (no port set)"),
        )),
    }
}

/// Sets the LAG port (1 or 2) an RC, UC or UD QP or a DCI in RTS sends on
/// ([`cmd::rts2rts_lag_port`]), after checking as `mlx5dv_modify_qp_lag_port`
/// does that the ports are bonded ([`lag_port`]).
///
/// # Panics
/// If `port` is not 1 or 2.
pub fn set_lag_port(qp: &Qp, port: u8) -> Result<()> {
    assert!(matches!(port, 1 | 2), "devx::set_lag_port: port {port}; a LAG has ports 1 and 2");
    lag_port(qp)?;
    let mut out = [0u8; cmd::OUT_HDR_BYTES];
    qp_modify(qp, &cmd::rts2rts_lag_port(qp.qpn(), port), &mut out)
}

/// Brings stream `stream` of a DCI in RTS back from error
/// ([`cmd::rts2rts_dci_stream_reset`], the command
/// `mlx5dv_dci_stream_id_reset` and so [`Dci::reset_stream`](crate::mlx5dv::dc::Dci::reset_stream) send).
pub fn reset_dci_stream(dci: &Qp, stream: u16) -> Result<()> {
    let mut out = [0u8; cmd::OUT_HDR_BYTES];
    qp_modify(dci, &cmd::rts2rts_dci_stream_reset(dci.qpn(), stream), &mut out)
}

fn general_cmd_raw(ctx: *mut ffi::ibv_context, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
    const OP: &str = "mlx5dv_devx_general_cmd";
    // SAFETY: a live mlx5 context (checked by the caller); buffers valid.
    let rc = unsafe {
        ffi::mlx5dv_devx_general_cmd(ctx, cmd_in.as_ptr().cast(), cmd_in.len(), out.as_mut_ptr().cast(), out.len())
    };
    if rc != 0 {
        return Err(cmd::failed(OP, cmd_in, rc, out));
    }
    cmd::check_out(OP, cmd::opcode_of(cmd_in), out)
}

/// The protection domain number of `pd` (`mlx5dv_init_obj`), which
/// commands such as `CREATE_MKEY` name.
pub fn pdn(pd: &Pd) -> Result<u32> {
    const OP: &str = "mlx5dv_init_obj (PD)";
    let ctx = pd.context();
    require_raw(ctx.as_ptr(), || ctx.name().to_string(), OP)?;
    let mut out = ffi::mlx5dv_pd { pdn: 0, comp_mask: 0 };
    // SAFETY: all-zero is a valid `mlx5dv_obj` (null pointers).
    let mut obj: ffi::mlx5dv_obj = unsafe { std::mem::zeroed() };
    obj.pd.in_ = pd.as_ptr();
    obj.pd.out = &mut out;
    // SAFETY: a live PD of an mlx5 context; `out` valid for writes.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_PD.0)) };
    if rc != 0 {
        return Err(Error::code(OP, rc));
    }
    Ok(out.pdn)
}

/// The checks both key constructors make before any command: `pd` of the
/// DEVX context, `spec.pdn` its number, `umr_en` only on an indirect KLM key.
fn check_key_pd(op: &'static str, ctx: &DevxContext, pd: &Pd, spec: &MkeySpec) -> Result<()> {
    if pd.context().as_ptr() != ctx.as_ptr() {
        return Err(Error::BadArgument {
            op,
            what: "pd",
            why: "is of another context than the DEVX one; allocate it on DevxContext::context()",
        });
    }
    if spec.pdn != pdn(pd)? {
        return Err(Error::BadArgument {
            op,
            what: "spec.pdn",
            why: "is not the number of the PD given; take it from devx::verbs::pdn(&pd)",
        });
    }
    check_umr_en(op, spec)
}

/// A memory key made by `CREATE_MKEY` through DEVX ([`MkeySpec`]: an
/// indirect KLM or KSM key, or a direct key over a UMEM). It holds its PD,
/// whatever was given at creation (the UMEM, the keys a layout names) and
/// every region a UMR layout was posted over until it is destroyed (after
/// its last clone drops).
///
/// It is a [`UmrKey`]: the typed UMR builders
/// ([`SqRing::mkey_configure`](crate::mlx5dv::sq::SqRing::mkey_configure))
/// configure an indirect KLM key made with `umr_en` ([`MkeySpec::indirect`])
/// as they do an [`Mkey`](crate::mlx5dv::mkey::Mkey), and
/// [`UmrKey::addr_at`] gives remote addresses under it.
#[derive(Clone, Debug)]
pub struct DevxMkey {
    obj: DevxObj,
    key: u32,
    spec: MkeySpec,
    pd: Pd,
}

impl DevxMkey {
    /// Creates the key of `spec` in `pd`, holding `pd` and `held`.
    ///
    /// # Errors
    /// [`Error::BadArgument`] before any command is sent when `pd` is of
    /// another context than `ctx`, when `spec.pdn` is not `pd`'s number
    /// ([`pdn`]), or when `spec.umr_en` is set on a key that is not an
    /// indirect KLM key (the typed UMR builders write KLM layouts; a KSM or
    /// MTT key read them otherwise). [`Error::Firmware`] when the device
    /// refuses.
    pub fn create(ctx: &DevxContext, pd: &Pd, spec: &MkeySpec, mut held: Vec<Held>) -> Result<DevxMkey> {
        const OP: &str = "DevxMkey::create";
        check_key_pd(OP, ctx, pd, spec)?;
        let mut out = [0u8; cmd::OUT_HDR_BYTES];
        held.push(std::sync::Arc::new(pd.clone()));
        let obj = DevxObj::create(ctx, &cmd::create_mkey(spec), &mut out, held)?;
        Ok(DevxMkey { obj, key: cmd::mkey_of(&out), spec: *spec, pd: pd.clone() })
    }

    /// Creates the indirect key of `spec` (KLM or KSM) in `pd` with its
    /// translation list written at creation: one entry per range, in order,
    /// each naming a DEVX key (a direct key over a UMEM, or another
    /// indirect one). The new key holds `pd` and every key named (and so,
    /// through them, their UMEMs) until it is destroyed.
    ///
    /// # Errors
    /// As [`DevxMkey::create`], and [`Error::BadArgument`] before any
    /// command is sent when `spec` is not a KLM or KSM key, when there are
    /// more ranges than `spec.translations`, when a named key is of another
    /// context or another PD than `pd`, when a range reaches outside its
    /// key's `start_addr..start_addr + len`, when a KLM range is empty, or
    /// when a KSM range is not 2^`spec.log_page_size` bytes (a KSM entry's
    /// fixed size).
    pub fn create_over(ctx: &DevxContext, pd: &Pd, spec: &MkeySpec, ranges: &[KeyRange<'_>]) -> Result<DevxMkey> {
        const OP: &str = "DevxMkey::create_over";
        let views: Vec<RangeView> = ranges
            .iter()
            .map(|r| RangeView {
                key: r.key.key,
                start: r.key.spec.start_addr,
                len: r.key.spec.len,
                ctx: r.key.pd.context().as_ptr() as usize,
                pd: r.key.pd.as_ptr() as usize,
                addr: r.addr,
                bytes: r.len,
            })
            .collect();
        let entries = check_ranges(spec, ctx.as_ptr() as usize, pd.as_ptr() as usize, &views)?;
        check_key_pd(OP, ctx, pd, spec)?;
        let mut held: Vec<Held> = ranges.iter().map(|r| std::sync::Arc::new(r.key.clone()) as Held).collect();
        held.push(std::sync::Arc::new(pd.clone()));
        let mut out = [0u8; cmd::OUT_HDR_BYTES];
        let obj = DevxObj::create(ctx, &cmd::create_mkey_with(spec, &entries), &mut out, held)?;
        Ok(DevxMkey { obj, key: cmd::mkey_of(&out), spec: *spec, pd: pd.clone() })
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.key
    }

    /// The remote key (the same as the local one; its low byte is 0).
    pub fn rkey(&self) -> u32 {
        self.key
    }

    /// The request the key was made from.
    pub fn spec(&self) -> &MkeySpec {
        &self.spec
    }

    /// The protection domain of the key.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The DEVX object (cloning it keeps the key, and what it holds, alive).
    pub fn obj(&self) -> &DevxObj {
        &self.obj
    }
}

/// A range of a DEVX key for [`DevxMkey::create_over`]: `len` bytes of
/// `key` from address `addr` (in the key's address space, within
/// `key.spec().start_addr .. start_addr + len`).
#[derive(Clone, Copy, Debug)]
pub struct KeyRange<'a> {
    /// The key the range is under.
    pub key: &'a DevxMkey,
    /// The range's first address.
    pub addr: u64,
    /// The range's length in bytes.
    pub len: u32,
}

/// What [`check_ranges`] reads of a range and its key (the context and
/// PD as addresses, to compare).
#[derive(Clone, Copy, Debug)]
struct RangeView {
    key: u32,
    start: u64,
    len: u64,
    ctx: usize,
    pd: usize,
    addr: u64,
    bytes: u32,
}

/// The entries of an indirect key over `ranges`, each checked: the key of
/// `ctx` and `pd`, the range inside the key, no more than `spec.translations`.
fn check_ranges(spec: &MkeySpec, ctx: usize, pd: usize, ranges: &[RangeView]) -> Result<Vec<KlmEntry>> {
    const OP: &str = "DevxMkey::create_over";
    let bad = |what, why| Err(Error::BadArgument { op: OP, what, why });
    if !matches!(spec.access_mode, MkeyAccessMode::Klm | MkeyAccessMode::Ksm) {
        return bad("spec.access_mode", "is not KLM or KSM; ranges need an indirect key (MkeySpec::indirect)");
    }
    if ranges.len() as u64 > u64::from(spec.translations) {
        return bad("ranges", "outnumber spec.translations; raise spec.translations (a multiple of 4) or pass fewer");
    }
    let ksm_bytes = (spec.access_mode == MkeyAccessMode::Ksm).then(|| 1u64.checked_shl(spec.log_page_size.into()));
    let mut entries = Vec::with_capacity(ranges.len());
    for r in ranges {
        if r.ctx != ctx {
            return bad("ranges[..].key", "is of another context than the DEVX one; make it on the same DevxContext");
        }
        if r.pd != pd {
            return bad("ranges[..].key", "is of another PD than the new key's; make both in one PD");
        }
        let bytes = u64::from(r.bytes);
        match ksm_bytes {
            Some(k) if k != Some(bytes) => {
                return bad("ranges[..].len", "is not 2^spec.log_page_size bytes, a KSM entry's fixed size");
            }
            None if bytes == 0 => return bad("ranges[..].len", "is 0; a KLM range covers at least one byte"),
            _ => {}
        }
        let within = r.addr >= r.start
            && r.addr.checked_add(bytes).is_some_and(|end| r.start.checked_add(r.len).is_some_and(|kend| end <= kend));
        if !within {
            return bad(
                "ranges[..]",
                "reaches outside its key's start_addr..start_addr + len; take the range from the key's spec()",
            );
        }
        entries.push(KlmEntry { key: r.key, va: r.addr, bcount: r.bytes });
    }
    Ok(entries)
}

/// `umr_en` only on an indirect KLM key: the typed UMR builders write KLM
/// layouts, which a KSM or MTT key would read as its own entries (reaching
/// memory no check saw).
fn check_umr_en(op: &'static str, spec: &MkeySpec) -> Result<()> {
    if spec.umr_en && spec.access_mode != MkeyAccessMode::Klm {
        return Err(Error::BadArgument {
            op,
            what: "spec.umr_en",
            why: "is set on a KSM or MTT key; UMR here writes KLM layouts only: clear umr_en, or make an indirect \
                  KLM key (MkeySpec::indirect)",
        });
    }
    Ok(())
}

impl crate::mlx5dv::keys::mkey::sealed::Sealed for DevxMkey {}

impl UmrKey for DevxMkey {
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn max_entries(&self) -> u16 {
        cmd::umr_entries(&self.spec)
    }
    fn pd(&self) -> &Pd {
        &self.pd
    }
    fn hold(&mut self, mr: &Mr) {
        // In the object every clone shares: the regions live as long as the key.
        self.obj.hold_region(mr)
    }
    fn addr_at(&self, offset: usize) -> RemoteAddr {
        RemoteAddr { addr: self.spec.start_addr.wrapping_add(offset as u64), rkey: self.key }
    }
}

/// A packet pacing entry's rate (`set_pp_rate_limit_context`, Linux 6.1's
/// layout; libmlx5 passes the context through unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PpRate {
    /// The rate limit in kbit/s.
    pub rate_limit_kbps: u32,
    /// The burst's upper bound in bytes (0: the device's default).
    pub burst_upper_bound: u32,
    /// The typical packet size in bytes (0: not given).
    pub typical_packet_size: u16,
}

impl PpRate {
    /// The 48-byte context `mlx5dv_pp_alloc` takes
    /// ([`prm::SetPpRateLimitContext`](crate::mlx5dv::prm::SetPpRateLimitContext)).
    pub fn context(&self) -> [u8; 48] {
        let mut c = crate::mlx5dv::prm::SetPpRateLimitContext::new();
        c.set_rate_limit(self.rate_limit_kbps)
            .set_burst_upper_bound(self.burst_upper_bound)
            .set_typical_packet_size(self.typical_packet_size.into());
        c.0
    }
}

/// A packet pacing entry (`mlx5dv_pp_alloc`): its index goes into a send
/// queue's context (`packet_pacing_rate_limit_index`). Freed on drop.
pub struct PacketPacing {
    raw: NonNull<ffi::mlx5dv_pp>,
    _ctx: DevxContext,
}

// SAFETY: an entry owned by this value, freed once in `Drop`; `&PacketPacing` reads its index.
unsafe impl Send for PacketPacing {}
// SAFETY: as above.
unsafe impl Sync for PacketPacing {}

impl std::fmt::Debug for PacketPacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketPacing").field("index", &self.index()).finish()
    }
}

impl PacketPacing {
    /// Allocates an entry of `rate`; `dedicated`: an index of its own even
    /// when another entry has the same rate.
    ///
    /// # References
    /// `mlx5dv_pp_alloc(3)`
    pub fn alloc(ctx: &DevxContext, rate: PpRate, dedicated: bool) -> Result<PacketPacing> {
        let c = rate.context();
        let flags =
            if dedicated { ffi::mlx5_ib_uapi_pp_alloc_flags::MLX5_IB_UAPI_PP_ALLOC_FLAGS_DEDICATED_INDEX.0 } else { 0 };
        // SAFETY: a live DEVX context; `c` valid for its length.
        let raw = unsafe { ffi::mlx5dv_pp_alloc(ctx.as_ptr(), c.len(), c.as_ptr().cast(), flags) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("mlx5dv_pp_alloc"))?;
        Ok(PacketPacing { raw, _ctx: ctx.clone() })
    }

    /// The entry's index.
    pub fn index(&self) -> u16 {
        // SAFETY: a live entry.
        unsafe { (*self.raw.as_ptr()).index }
    }
}

impl Drop for PacketPacing {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_pp_alloc`, freed only here.
        unsafe { ffi::mlx5dv_pp_free(self.raw.as_ptr()) }
    }
}

/// The refusal text of the DEVX entries that take a verbs object, for a
/// device called `name` (the tests assert on it): what is missing, the
/// device, and the way out.
pub fn refusal_text(name: &str) -> String {
    Error::unsupported(OPEN_OP, &crate::prim::unsupported::DEVX_NOT_MLX5, name, "false")
        .lack()
        .map_or_else(String::new, ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a `DevxMkey` answers as a `UmrKey`, from the spec and the
    /// answer alone: the key from `CREATE_MKEY`'s index (tag 0), room for a
    /// layout only on an indirect KLM key with `umr_en`, and `umr_en`
    /// refused on KSM and MTT keys before any command.
    #[test]
    fn devx_keys_take_umr_layouts_only_as_indirect_klm_keys() {
        let mut out = [0u8; 16];
        out[8..12].copy_from_slice(&0x00ab_cdefu32.to_be_bytes());
        assert_eq!(cmd::mkey_of(&out), 0xab_cdef00);
        assert_eq!(cmd::mkey_of(&out[..8]), 0, "a short answer");
        let klm = MkeySpec::indirect(7, 5);
        assert_eq!(cmd::umr_entries(&klm), 8, "rounded up to 4 as libmlx5's num_desc");
        assert!(check_umr_en("DevxMkey::create", &klm).is_ok());
        let mut off = klm;
        off.umr_en = false;
        assert_eq!(cmd::umr_entries(&off), 0, "no umr_en: every layout refused");
        let mut big = klm;
        big.translations = 1 << 16;
        assert_eq!(cmd::umr_entries(&big), u16::MAX, "saturated, never wrapped to 0");
        let mut ksm = klm;
        ksm.access_mode = MkeyAccessMode::Ksm;
        assert_eq!(cmd::umr_entries(&ksm), 0);
        assert!(matches!(check_umr_en("DevxMkey::create", &ksm), Err(Error::BadArgument { what: "spec.umr_en", .. })));
        let mut mtt = MkeySpec::umem(7, 1, 0, 0x1000, 1 << 16, 16);
        assert!(check_umr_en("DevxMkey::create", &mtt).is_ok(), "MkeySpec::umem leaves umr_en off");
        assert_eq!(cmd::umr_entries(&mtt), 0);
        mtt.umr_en = true;
        let e = check_umr_en("DevxMkey::create", &mtt).unwrap_err();
        assert!(e.to_string().contains("MkeySpec::indirect"), "{e}");
    }

    /// A range of a direct key: key 0x500 over `0x10000..0x20000` of
    /// context 1 and PD 2.
    fn view(addr: u64, bytes: u32) -> RangeView {
        RangeView { key: 0x500, start: 0x10000, len: 0x10000, ctx: 1, pd: 2, addr, bytes }
    }

    /// Ranges over DEVX keys become entries naming the key, the address and
    /// the byte count, in order; a range past its key's end or before its
    /// start, a key of another context or PD, more ranges than
    /// `translations`, an empty KLM range, a KSM range of another size than
    /// the entry size, and a direct spec are refused.
    #[test]
    fn ranges_over_devx_keys_are_checked_against_their_keys() {
        let spec = MkeySpec::indirect(7, 2);
        let other = RangeView { key: 0x600, start: 0, len: 0x1000, ..view(0, 0) };
        let ok = [view(0x10000, 0x10000), RangeView { addr: 0xff0, bytes: 0x10, ..other }];
        let e = check_ranges(&spec, 1, 2, &ok).unwrap();
        assert_eq!(
            e,
            [KlmEntry { key: 0x500, va: 0x10000, bcount: 0x10000 }, KlmEntry { key: 0x600, va: 0xff0, bcount: 0x10 }]
        );
        let what = |r: Result<Vec<KlmEntry>>| match r {
            Err(Error::BadArgument { what, why, .. }) => (what, why),
            r => panic!("{r:?}"),
        };
        assert_eq!(what(check_ranges(&spec, 1, 2, &[view(0x10001, 0x10000)])).0, "ranges[..]", "one byte past the end");
        assert_eq!(what(check_ranges(&spec, 1, 2, &[view(0xffff, 1)])).0, "ranges[..]", "before the start");
        assert_eq!(what(check_ranges(&spec, 1, 2, &[view(u64::MAX, 1)])).0, "ranges[..]", "wrapping");
        assert!(what(check_ranges(&spec, 9, 2, &ok)).1.contains("another context"));
        assert!(what(check_ranges(&spec, 1, 9, &ok)).1.contains("another PD"));
        let mut one = spec;
        one.translations = 1;
        assert_eq!(what(check_ranges(&one, 1, 2, &ok)).0, "ranges");
        assert_eq!(what(check_ranges(&spec, 1, 2, &[view(0x10000, 0)])).0, "ranges[..].len");
        let direct = MkeySpec::umem(7, 1, 0, 0x1000, 1 << 16, 16);
        assert_eq!(what(check_ranges(&direct, 1, 2, &ok)).0, "spec.access_mode");
        let mut ksm = spec;
        ksm.access_mode = MkeyAccessMode::Ksm;
        ksm.log_page_size = 12;
        assert_eq!(check_ranges(&ksm, 1, 2, &[view(0x1f000, 0x1000)]).unwrap().len(), 1);
        assert_eq!(what(check_ranges(&ksm, 1, 2, &[view(0x10000, 0x800)])).0, "ranges[..].len");
        assert_eq!(what(check_ranges(&ksm, 1, 2, &[view(0x1f001, 0x1000)])).0, "ranges[..]");
    }
}
