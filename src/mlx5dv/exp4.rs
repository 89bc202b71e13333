//! MLNX_OFED 4.x: DC, masked atomics and completion timestamps through the
//! experimental verbs (`ibv_exp_*`, bound in [`crate::bindings::exp4`]).
//!
//! Built only for MLNX_OFED 4.x (cfg `rrddmma_mlnx_ofed4`). DC itself is
//! not here: [`super::dc`] has the same API in both builds. What only 4.x
//! offers through its own verbs is:
//!
//! | rdma-core path | here |
//! |---|---|
//! | [`super::clock_info`] + [`crate::mlx5dv::completion::clock::ts_to_ns`] | the same two functions ([`clock_info`] via `ibv_exp_query_values`) |
//! | masked atomics as hand-built WQE segments (`seg`) | [`ExpSendWr::masked_cas`] / [`ExpSendWr::masked_faa`] posted with `ibv_exp_post_send`: [`ExpQp::post`] on an RC QP from [`ExpQp::create`], or `dc::Dci::post_masked` to a DC target |
//! | extended CQ with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` | [`ExpCq`] (`IBV_EXP_CQ_TIMESTAMP`) polled into [`ExpWc`], whose [`ExpWc::opcode`] is a [`WcOpcode`] and [`ExpWc::to_wc`] a [`Wc`] |
//!
//! Checked against the public 4.x headers by hand and type-checked; never
//! linked against a 4.x library nor run (`docs/mlnx-ofed-4.md`).

use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::{self, NonNull};

use crate::bindings as ffi;
use crate::bindings::exp4 as x;
use crate::mlx5dv::completion::clock::ClockInfo;
use crate::prim::{Context, Cq, Error, Pd, Qp, QpCaps, QpType, Result, Sge, Wc, WcFlags, WcOpcode, WcStatus};

/// Whether `ctx` has the experimental verbs context (every mlx5 and mlx4
/// context of MLNX_OFED 4.x libibverbs does).
pub fn is_supported(ctx: &Context) -> bool {
    // SAFETY: a live context of this (4.x) build.
    !unsafe { x::verbs_get_exp_ctx(ctx.as_ptr()) }.is_null()
}

pub(crate) fn require(ctx: &Context, op: &'static str) -> Result<()> {
    if is_supported(ctx) {
        Ok(())
    } else {
        Err(Error::unsupported(op, &crate::prim::unsupported::OFED4_EXP, ctx.name(), "absent"))
    }
}

/// Maps a verb's return value (0, a positive or a negated error number).
pub(crate) fn rc(op: &'static str, rc: i32) -> Result<()> {
    match rc.unsigned_abs() as i32 {
        0 => Ok(()),
        e => Err(Error::Verbs { op, errno: e }),
    }
}

pub(crate) fn last(op: &'static str) -> Error {
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    Error::Verbs { op, errno: e }
}

/// What the device reports for the three experimental features.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpCaps {
    /// `IBV_EXP_DEVICE_DC_TRANSPORT`.
    pub dc: bool,
    /// Maximum DC targets (`max_dct`).
    pub max_dct: u32,
    /// `IBV_EXP_DEVICE_EXT_MASKED_ATOMICS`.
    pub masked_atomics: bool,
    /// Bit `n` set: masked atomics on `2^n`-byte operands
    /// (`masked_atomic.masked_log_atomic_arg_sizes`).
    pub masked_log_arg_sizes: u64,
    /// Largest field boundary of a masked fetch-and-add, in bits.
    pub max_fa_bit_boundary: u32,
    /// log2 of the largest inline atomic operand.
    pub log_max_atomic_inline: u32,
    /// Valid bits of a completion timestamp (0: no timestamps).
    pub timestamp_mask: u64,
    /// Device clock frequency in kHz.
    pub hca_core_clock_khz: u64,
}

/// The device's experimental attributes (`ibv_exp_query_device`), asking for
/// the fields [`ExpCaps`] reads.
pub fn query_device(ctx: &Context) -> Result<x::ibv_exp_device_attr> {
    use x::ibv_exp_device_attr_comp_mask as M;
    require(ctx, "ibv_exp_query_device")?;
    let mut attr = x::ibv_exp_device_attr {
        comp_mask: M::IBV_EXP_DEVICE_ATTR_WITH_TIMESTAMP_MASK
            | M::IBV_EXP_DEVICE_ATTR_WITH_HCA_CORE_CLOCK
            | M::IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS
            | M::IBV_EXP_DEVICE_ATTR_EXT_ATOMIC_ARGS
            | M::IBV_EXP_DEVICE_ATTR_MAX_DCT
            | M::IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS,
        ..Default::default()
    };
    // SAFETY: a live 4.x context; `attr` is valid and as large as the C struct.
    rc("ibv_exp_query_device", unsafe { x::ibv_exp_query_device(ctx.as_ptr(), &mut attr) })?;
    Ok(attr)
}

/// [`query_device`] summarised.
pub fn caps(ctx: &Context) -> Result<ExpCaps> {
    use x::ibv_exp_device_attr_comp_mask as M;
    use x::ibv_exp_device_cap_flags as F;
    let a = query_device(ctx)?;
    let has = |m: u32| a.comp_mask & m != 0;
    let flags = if has(M::IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS) { a.exp_device_cap_flags } else { 0 };
    let masked = flags & F::IBV_EXP_DEVICE_EXT_MASKED_ATOMICS != 0 && has(M::IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS);
    Ok(ExpCaps {
        dc: flags & F::IBV_EXP_DEVICE_DC_TRANSPORT != 0,
        max_dct: if has(M::IBV_EXP_DEVICE_ATTR_MAX_DCT) { u32::try_from(a.max_dct).unwrap_or(0) } else { 0 },
        masked_atomics: masked,
        masked_log_arg_sizes: if masked { a.masked_atomic.masked_log_atomic_arg_sizes } else { 0 },
        max_fa_bit_boundary: if masked { a.masked_atomic.max_fa_bit_boundary } else { 0 },
        log_max_atomic_inline: if masked { a.masked_atomic.log_max_atomic_inline } else { 0 },
        timestamp_mask: if has(M::IBV_EXP_DEVICE_ATTR_WITH_TIMESTAMP_MASK) { a.timestamp_mask } else { 0 },
        hca_core_clock_khz: if has(M::IBV_EXP_DEVICE_ATTR_WITH_HCA_CORE_CLOCK) { a.hca_core_clock } else { 0 },
    })
}

/// The device clock parameters for [`crate::mlx5dv::completion::clock::ts_to_ns`], from
/// `ibv_exp_query_values(IBV_EXP_VALUES_CLOCK_INFO)`: the same parameters,
/// under the same name, as the rdma-core path's `mlx5dv_get_clock_info`.
pub fn clock_info(ctx: &Context) -> Result<ClockInfo> {
    use x::ibv_exp_values_comp_mask as V;
    require(ctx, "ibv_exp_query_values")?;
    let mut v = x::ibv_exp_values { comp_mask: V::IBV_EXP_VALUES_CLOCK_INFO, ..Default::default() };
    // SAFETY: a live 4.x context; `v` is valid.
    let r = unsafe { x::ibv_exp_query_values(ctx.as_ptr(), V::IBV_EXP_VALUES_CLOCK_INFO as i32, &mut v) };
    rc("ibv_exp_query_values", r)?;
    if v.comp_mask & V::IBV_EXP_VALUES_CLOCK_INFO == 0 {
        return Err(Error::unsupported(
            "ibv_exp_query_values",
            &crate::prim::unsupported::CLOCK,
            ctx.name(),
            "no clock info",
        ));
    }
    Ok(to_clock_info(&v.clock_info))
}

/// The 4.x clock parameters under the rdma-core names (the conversion
/// formulas of `ibv_exp_cqe_ts_to_ns` and `mlx5dv_ts_to_ns` are the same).
pub fn to_clock_info(c: &x::ibv_exp_clock_info) -> ClockInfo {
    ClockInfo { nsec: c.nsec, last_cycles: c.cycles, frac: c.frac, mult: c.mult, shift: c.shift, mask: c.mask }
}

// ------------------------------------------------------------ timestamps

/// A CQ created with `ibv_exp_create_cq`, polled with `ibv_exp_poll_cq`.
/// [`ExpCq::cq`] is the same CQ as a [`Cq`], to hand to QP and DC creation.
#[derive(Clone, Debug)]
pub struct ExpCq {
    cq: Cq,
}

impl ExpCq {
    /// A CQ with room for at least `cqe` completions; with `timestamps`, the
    /// device stamps each completion (`IBV_EXP_CQ_TIMESTAMP`; read with
    /// [`ExpWc::timestamp`]).
    ///
    /// # References
    /// MLNX_OFED 4.x `ibv_exp_create_cq(3)`.
    pub fn create(ctx: &Context, cqe: u32, timestamps: bool) -> Result<ExpCq> {
        use x::ibv_exp_cq_create_flags as C;
        use x::ibv_exp_cq_init_attr_mask as A;
        require(ctx, "ibv_exp_create_cq")?;
        let mut attr = x::ibv_exp_cq_init_attr::default();
        if timestamps {
            attr.comp_mask = A::IBV_EXP_CQ_INIT_ATTR_FLAGS;
            attr.flags = C::IBV_EXP_CQ_TIMESTAMP;
        }
        let n = i32::try_from(cqe).unwrap_or(i32::MAX);
        // SAFETY: a live 4.x context, no channel, a valid attribute struct.
        let raw = unsafe { x::ibv_exp_create_cq(ctx.as_ptr(), n, ptr::null_mut(), ptr::null_mut(), 0, &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| last("ibv_exp_create_cq"))?;
        // SAFETY: created just now on `ctx`, without a channel, owned here.
        Ok(ExpCq { cq: unsafe { Cq::from_exp(ctx, raw) }? })
    }

    /// The CQ as a [`Cq`] (for QP, DCI and DCT creation, or classic polling).
    pub fn cq(&self) -> &Cq {
        &self.cq
    }

    /// Polls completions into `wc`; returns how many were written.
    #[inline]
    pub fn poll(&self, wc: &mut [ExpWc]) -> Result<usize> {
        let n = i32::try_from(wc.len()).unwrap_or(i32::MAX);
        // SAFETY: a live CQ of a 4.x context; `wc` holds `n` writable
        // `ibv_exp_wc` (transparent wrapper), whose size is passed.
        let r = unsafe {
            x::ibv_exp_poll_cq(self.cq.as_ptr(), n, wc.as_mut_ptr().cast(), size_of::<x::ibv_exp_wc>() as u32)
        };
        if r == -libc::ENOSYS {
            return Err(Error::Verbs { op: "ibv_exp_poll_cq", errno: libc::ENOSYS });
        }
        usize::try_from(r).map_err(|_| Error::Verbs { op: "ibv_exp_poll_cq", errno: libc::EIO })
    }
}

/// One experimental completion (`struct ibv_exp_wc`).
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct ExpWc(pub x::ibv_exp_wc);

impl ExpWc {
    /// The request's `wr_id`.
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// The completion status.
    pub fn status(&self) -> WcStatus {
        WcStatus::from_raw(self.0.status)
    }

    /// Whether the request succeeded (as [`Wc::is_success`]).
    pub fn is_success(&self) -> bool {
        self.status() == WcStatus::SUCCESS
    }

    /// The operation that completed, as the crate's [`WcOpcode`]: the
    /// values `enum ibv_exp_wc_opcode` shares with `enum ibv_wc_opcode`
    /// (SEND, RDMA_WRITE, RDMA_READ, COMP_SWAP, FETCH_ADD, RECV,
    /// RECV_RDMA_WITH_IMM) as they are; a masked compare-and-swap as
    /// `COMP_SWAP` and a masked fetch-and-add as `FETCH_ADD` (tell them
    /// apart with [`ExpWc::is_masked_atomic`]); any other value as
    /// `WcOpcode(value)` ([`ExpWc::raw_opcode`]). Valid when successful.
    pub fn opcode(&self) -> WcOpcode {
        wc_opcode(self.0.exp_opcode)
    }

    /// Whether the completion is of a masked atomic
    /// (`IBV_EXP_WC_MASKED_COMP_SWAP`, `IBV_EXP_WC_MASKED_FETCH_ADD`).
    pub fn is_masked_atomic(&self) -> bool {
        use x::ibv_exp_wc_opcode as O;
        matches!(self.0.exp_opcode, O::IBV_EXP_WC_MASKED_COMP_SWAP | O::IBV_EXP_WC_MASKED_FETCH_ADD)
    }

    /// The C value of `enum ibv_exp_wc_opcode`.
    pub fn raw_opcode(&self) -> u32 {
        self.0.exp_opcode
    }

    /// The completion as the crate's [`Wc`] (what `ibv_poll_cq` would have
    /// written): [`ExpWc::opcode`] for the opcode, `IBV_WC_GRH` and
    /// `IBV_WC_WITH_IMM` for the flags; the timestamp is left behind.
    pub fn to_wc(&self) -> Wc {
        use x::ibv_exp_wc_flags as F;
        let e = &self.0;
        let mut flags = 0;
        if e.exp_wc_flags & F::IBV_EXP_WC_GRH != 0 {
            flags |= WcFlags::GRH.bits();
        }
        if e.exp_wc_flags & F::IBV_EXP_WC_WITH_IMM != 0 {
            flags |= WcFlags::WITH_IMM.bits();
        }
        Wc(ffi::ibv_wc {
            wr_id: e.wr_id,
            status: ffi::ibv_wc_status(e.status),
            opcode: self.opcode().into(),
            vendor_err: e.vendor_err,
            byte_len: e.byte_len,
            __bindgen_anon_1: ffi::ibv_wc__bindgen_ty_1 { imm_data: e.imm_data },
            qp_num: e.qp_num,
            src_qp: e.src_qp,
            wc_flags: flags,
            pkey_index: e.pkey_index,
            slid: e.slid,
            sl: e.sl,
            dlid_path_bits: e.dlid_path_bits,
        })
    }

    /// Bytes received (receive completions).
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// The device timestamp, when the CQ stamps completions
    /// (`IBV_EXP_WC_WITH_TIMESTAMP`); nanoseconds through
    /// [`crate::mlx5dv::completion::clock::ts_to_ns`] with [`clock_info`].
    pub fn timestamp(&self) -> Option<u64> {
        (self.0.exp_wc_flags & x::ibv_exp_wc_flags::IBV_EXP_WC_WITH_TIMESTAMP != 0).then_some(self.0.timestamp)
    }
}

/// `enum ibv_exp_wc_opcode` as [`WcOpcode`] (see [`ExpWc::opcode`]).
fn wc_opcode(exp: u32) -> WcOpcode {
    use x::ibv_exp_wc_opcode as O;
    match exp {
        O::IBV_EXP_WC_SEND => WcOpcode::SEND,
        O::IBV_EXP_WC_RDMA_WRITE => WcOpcode::RDMA_WRITE,
        O::IBV_EXP_WC_RDMA_READ => WcOpcode::RDMA_READ,
        O::IBV_EXP_WC_COMP_SWAP | O::IBV_EXP_WC_MASKED_COMP_SWAP => WcOpcode::COMP_SWAP,
        O::IBV_EXP_WC_FETCH_ADD | O::IBV_EXP_WC_MASKED_FETCH_ADD => WcOpcode::FETCH_ADD,
        O::IBV_EXP_WC_RECV => WcOpcode::RECV,
        O::IBV_EXP_WC_RECV_RDMA_WITH_IMM => WcOpcode::RECV_RDMA_WITH_IMM,
        other => WcOpcode::from_raw(other),
    }
}

impl fmt::Debug for ExpWc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpWc")
            .field("wr_id", &self.0.wr_id)
            .field("status", &self.0.status)
            .field("opcode", &self.opcode())
            .field("masked", &self.is_masked_atomic())
            .field("timestamp", &self.timestamp())
            .finish()
    }
}

// ------------------------------------------------------------ work requests

/// An experimental send request (`struct ibv_exp_send_wr`) over entries
/// borrowed for `'a`.
#[derive(Clone, Copy)]
pub struct ExpSendWr<'a> {
    raw: x::ibv_exp_send_wr,
    _sges: PhantomData<&'a [Sge]>,
}

impl fmt::Debug for ExpSendWr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpSendWr")
            .field("wr_id", &self.raw.wr_id)
            .field("exp_opcode", &self.raw.exp_opcode)
            .field("exp_send_flags", &self.raw.exp_send_flags)
            .finish()
    }
}

/// `Sge` is a transparent `ibv_sge`; the provider only reads the list.
fn sg(sges: &[Sge]) -> (*mut ffi::ibv_sge, i32) {
    (sges.as_ptr().cast_mut().cast(), i32::try_from(sges.len()).expect("more than i32::MAX entries"))
}

fn masked_checks(local: &Sge, remote_addr: u64, log_arg_sz: u32) {
    assert!(
        log_arg_sz == 2 || log_arg_sz == 3,
        "masked atomics take 4- or 8-byte operands here (log_arg_sz 2 or 3), not 2^{log_arg_sz}"
    );
    let bytes = 1u64 << log_arg_sz;
    assert!(remote_addr % bytes == 0, "masked atomic remote address {remote_addr:#x} is not {bytes}-byte aligned");
    assert!(
        u64::from(local.0.length) == bytes,
        "masked atomic result entry holds {} bytes; it must hold the operand's {bytes}",
        local.0.length
    );
}

impl<'a> ExpSendWr<'a> {
    fn new(wr_id: u64, opcode: u32, sges: &'a [Sge]) -> ExpSendWr<'a> {
        let mut raw = x::ibv_exp_send_wr { wr_id, exp_opcode: opcode, ..Default::default() };
        (raw.sg_list, raw.num_sge) = sg(sges);
        ExpSendWr { raw, _sges: PhantomData }
    }

    /// RDMA WRITE of `local` to `remote_addr` in the region of `rkey`.
    pub fn write(wr_id: u64, local: &'a [Sge], remote_addr: u64, rkey: u32) -> ExpSendWr<'a> {
        let mut w = Self::new(wr_id, x::ibv_exp_wr_opcode::IBV_EXP_WR_RDMA_WRITE, local);
        w.raw.wr.rdma = x::ibv_exp_wr_rdma { remote_addr, rkey };
        w
    }

    /// RDMA READ from `remote_addr` into `local`.
    pub fn read(wr_id: u64, local: &'a [Sge], remote_addr: u64, rkey: u32) -> ExpSendWr<'a> {
        let mut w = Self::new(wr_id, x::ibv_exp_wr_opcode::IBV_EXP_WR_RDMA_READ, local);
        w.raw.wr.rdma = x::ibv_exp_wr_rdma { remote_addr, rkey };
        w
    }

    /// SEND of `local`.
    pub fn send(wr_id: u64, local: &'a [Sge]) -> ExpSendWr<'a> {
        Self::new(wr_id, x::ibv_exp_wr_opcode::IBV_EXP_WR_SEND, local)
    }

    /// Masked compare-and-swap on the `2^log_arg_sz`-byte word at
    /// `remote_addr`: where `(word & compare_mask) == (compare & compare_mask)`,
    /// the bits of `swap_mask` take `swap`'s; the old word lands in `result`.
    /// Operands are inline (`IBV_EXP_SEND_EXT_ATOMIC_INLINE`).
    ///
    /// # Panics
    /// If `log_arg_sz` is not 2 or 3, `remote_addr` is not aligned to the
    /// operand, or `result` does not hold exactly one operand.
    #[allow(clippy::too_many_arguments)]
    pub fn masked_cas(
        wr_id: u64,
        result: &'a Sge,
        remote_addr: u64,
        rkey: u32,
        log_arg_sz: u32,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> ExpSendWr<'a> {
        let op = x::ibv_exp_masked_atomic_op {
            cmp_swap: x::ibv_exp_cmp_swap { compare_mask, compare_val: compare, swap_val: swap, swap_mask },
        };
        let opcode = x::ibv_exp_wr_opcode::IBV_EXP_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP;
        Self::masked(wr_id, result, remote_addr, rkey, log_arg_sz, opcode, op)
    }

    /// A masked atomic of `opcode` with its operands.
    #[allow(clippy::too_many_arguments)]
    fn masked(
        wr_id: u64,
        result: &'a Sge,
        remote_addr: u64,
        rkey: u32,
        log_arg_sz: u32,
        opcode: u32,
        op: x::ibv_exp_masked_atomic_op,
    ) -> ExpSendWr<'a> {
        masked_checks(result, remote_addr, log_arg_sz);
        let mut w = Self::new(wr_id, opcode, std::slice::from_ref(result));
        w.raw.exp_send_flags |= x::ibv_exp_send_flags::IBV_EXP_SEND_EXT_ATOMIC_INLINE;
        w.raw.ext_op.masked_atomics = x::ibv_exp_masked_atomics { log_arg_sz, remote_addr, rkey, op };
        w
    }

    /// Masked fetch-and-add: adds `add` to the `2^log_arg_sz`-byte word at
    /// `remote_addr` as independent fields whose top bits are set in
    /// `field_boundary` (carries stop there; 0 for one field); the old word
    /// lands in `result`.
    ///
    /// # Panics
    /// As [`ExpSendWr::masked_cas`].
    pub fn masked_faa(
        wr_id: u64,
        result: &'a Sge,
        remote_addr: u64,
        rkey: u32,
        log_arg_sz: u32,
        add: u64,
        field_boundary: u64,
    ) -> ExpSendWr<'a> {
        let op = x::ibv_exp_masked_atomic_op { fetch_add: x::ibv_exp_fetch_add { add_val: add, field_boundary } };
        let opcode = x::ibv_exp_wr_opcode::IBV_EXP_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;
        Self::masked(wr_id, result, remote_addr, rkey, log_arg_sz, opcode, op)
    }

    /// Asks for a completion (`IBV_EXP_SEND_SIGNALED`).
    pub fn signaled(mut self) -> Self {
        self.raw.exp_send_flags |= x::ibv_exp_send_flags::IBV_EXP_SEND_SIGNALED;
        self
    }

    /// Waits for earlier READs and atomics first (`IBV_EXP_SEND_FENCE`).
    pub fn fence(mut self) -> Self {
        self.raw.exp_send_flags |= x::ibv_exp_send_flags::IBV_EXP_SEND_FENCE;
        self
    }

    /// Copies the data into the request (`IBV_EXP_SEND_INLINE`).
    pub fn inline(mut self) -> Self {
        self.raw.exp_send_flags |= x::ibv_exp_send_flags::IBV_EXP_SEND_INLINE;
        self
    }

    /// The raw request, addressed to a DC target (for `dc::Dci::post_masked`).
    pub(crate) fn raw_to_dct(&self, ah: *mut ffi::ibv_ah, dctn: u32, key: u64) -> x::ibv_exp_send_wr {
        let mut raw = self.raw;
        raw.dc = x::ibv_exp_wr_dc { ah, dct_access_key: key, dct_number: dctn };
        raw
    }

    /// The raw request.
    pub fn as_raw(&self) -> &x::ibv_exp_send_wr {
        &self.raw
    }
}

/// `ibv_exp_post_send` of one request.
///
/// # Safety
/// `qp` is a live QP of a 4.x context; the memory `wr` names stays valid and
/// untouched until the request completes.
pub(crate) unsafe fn post_raw(qp: &Qp, wr: &mut x::ibv_exp_send_wr) -> Result<()> {
    wr.next = ptr::null_mut();
    let mut bad = ptr::null_mut();
    // SAFETY: forwarded contract.
    let r = unsafe { x::ibv_exp_post_send(qp.as_ptr(), wr, &mut bad) };
    match r {
        0 => Ok(()),
        r if r == -libc::ENOSYS => Err(Error::Verbs { op: "ibv_exp_post_send", errno: libc::ENOSYS }),
        r => Err(Error::Post { op: "ibv_exp_post_send", errno: r.abs(), index: Some(0), unsupported: None }),
    }
}

/// An RC QP created with `ibv_exp_create_qp`, accepting masked atomics
/// ([`ExpSendWr::masked_cas`], [`ExpSendWr::masked_faa`]) posted with
/// [`ExpQp::post`]. Bring it up as any RC QP through [`ExpQp::qp`]
/// ([`Qp::connect`] or `modify`).
#[derive(Debug)]
pub struct ExpQp {
    qp: Qp,
}

impl ExpQp {
    /// Creates an RC QP whose masked atomics take operands up to
    /// `max_atomic_arg` bytes (`IBV_EXP_QP_INIT_ATTR_ATOMICS_ARG`).
    ///
    /// # References
    /// MLNX_OFED 4.x `ibv_exp_create_qp(3)`.
    pub fn create(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps, max_atomic_arg: u32) -> Result<ExpQp> {
        use x::ibv_exp_qp_init_attr_comp_mask as M;
        let ctx = pd.context();
        require(ctx, "ibv_exp_create_qp")?;
        let mut attr = x::ibv_exp_qp_init_attr {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap: caps.to_raw(true),
            qp_type: QpType::RC.to_raw(),
            comp_mask: M::IBV_EXP_QP_INIT_ATTR_PD | M::IBV_EXP_QP_INIT_ATTR_ATOMICS_ARG,
            pd: pd.as_ptr(),
            max_atomic_arg,
            ..Default::default()
        };
        // SAFETY: a live 4.x context; PD and CQs of it; `attr` valid.
        let qp = unsafe { x::ibv_exp_create_qp(ctx.as_ptr(), &mut attr) };
        let qp = NonNull::new(qp).ok_or_else(|| last("ibv_exp_create_qp"))?;
        let caps = QpCaps { max_inline_data: attr.cap.max_inline_data, ..caps };
        let rc = QpType::RC;
        // SAFETY: created just now on `pd` with these CQs.
        let qp = unsafe { Qp::from_parts("ibv_exp_create_qp", qp, None, rc, caps, pd, send_cq, recv_cq, None) }?;
        Ok(ExpQp { qp })
    }

    /// The QP, to connect and to post ordinary requests on.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// Posts `wr` with `ibv_exp_post_send`.
    ///
    /// # Safety
    /// As `ibv_post_send`: the memory named by `wr` stays valid and
    /// untouched by the program until the request completes.
    pub unsafe fn post(&self, wr: &ExpSendWr<'_>) -> Result<()> {
        let mut raw = wr.raw;
        // SAFETY: a live QP of a 4.x context; forwarded contract.
        unsafe { post_raw(&self.qp, &mut raw) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use x::ibv_exp_wc_flags as F;
    use x::ibv_exp_wc_opcode as O;

    /// Experimental completions read as the crate's `WcOpcode` and `Wc`.
    #[test]
    fn completions_read_as_the_crate_types() {
        let wc =
            |op: u32, flags: u64| ExpWc(x::ibv_exp_wc { exp_opcode: op, exp_wc_flags: flags, ..Default::default() });
        let cases = [
            (O::IBV_EXP_WC_SEND, WcOpcode::SEND, false),
            (O::IBV_EXP_WC_RDMA_WRITE, WcOpcode::RDMA_WRITE, false),
            (O::IBV_EXP_WC_RDMA_READ, WcOpcode::RDMA_READ, false),
            (O::IBV_EXP_WC_COMP_SWAP, WcOpcode::COMP_SWAP, false),
            (O::IBV_EXP_WC_FETCH_ADD, WcOpcode::FETCH_ADD, false),
            (O::IBV_EXP_WC_MASKED_COMP_SWAP, WcOpcode::COMP_SWAP, true),
            (O::IBV_EXP_WC_MASKED_FETCH_ADD, WcOpcode::FETCH_ADD, true),
            (O::IBV_EXP_WC_RECV, WcOpcode::RECV, false),
            (O::IBV_EXP_WC_RECV_RDMA_WITH_IMM, WcOpcode::RECV_RDMA_WITH_IMM, false),
            (0x1234, WcOpcode::from_raw(0x1234), false),
        ];
        for (raw, op, masked) in cases {
            let w = wc(raw, 0);
            assert_eq!((w.opcode(), w.is_masked_atomic(), w.raw_opcode()), (op, masked, raw), "exp opcode {raw}");
            assert_eq!(w.to_wc().opcode(), op);
        }
        // Never read as rdma-core's IBV_WC_ATOMIC_WRITE, which shares the value 9.
        assert_ne!(wc(O::IBV_EXP_WC_MASKED_COMP_SWAP, 0).opcode(), WcOpcode::ATOMIC_WRITE);

        let mut e = wc(
            O::IBV_EXP_WC_RECV_RDMA_WITH_IMM,
            F::IBV_EXP_WC_GRH | F::IBV_EXP_WC_WITH_IMM | F::IBV_EXP_WC_WITH_TIMESTAMP,
        );
        (e.0.wr_id, e.0.status, e.0.byte_len, e.0.imm_data, e.0.qp_num, e.0.src_qp) = (7, 0, 64, 5u32.to_be(), 9, 10);
        (e.0.vendor_err, e.0.pkey_index, e.0.slid, e.0.sl, e.0.dlid_path_bits, e.0.timestamp) = (3, 1, 2, 4, 6, 99);
        let w = e.to_wc();
        assert_eq!(
            (w.wr_id(), w.status(), w.byte_len(), w.imm(), w.qp_num(), w.src_qp()),
            (7, WcStatus::SUCCESS, 64, Some(5), 9, 10)
        );
        assert_eq!((w.vendor_err(), w.0.pkey_index, w.slid(), w.sl(), w.0.dlid_path_bits), (3, 1, 2, 4, 6));
        assert_eq!(w.flags(), WcFlags::GRH | WcFlags::WITH_IMM);
        assert_eq!(e.timestamp(), Some(99));
        assert!(e.is_success() && w.is_success());
        assert_eq!(wc(0, 0).to_wc().flags(), WcFlags::empty());
        assert_eq!(wc(0, 0).timestamp(), None);
    }
}
