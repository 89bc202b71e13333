//! DEVX commands against libmlx5: libmlx5 v59's own
//! `mlx5dv_modify_qp_udp_sport`, `mlx5dv_modify_qp_lag_port`,
//! `mlx5dv_dci_stream_id_reset`, `mlx5dv_create_mkey`, and the scheduling
//! entries (`mlx5dv_sched_node_create`, `_leaf_create`, `_node_modify`,
//! `_leaf_modify`, `mlx5dv_modify_qp_sched_elem`), called on
//! provider objects fabricated in ordinary memory (tests/provider/devx.c),
//! hand their commands to a fake kernel at the ioctl boundary (the harness
//! is linked with `-Wl,--wrap=ioctl`), which records the bytes of every
//! command (`MLX5_IB_ATTR_DEVX_OTHER_CMD_IN`, `_OBJ_MODIFY_CMD_IN`,
//! `_OBJ_QUERY_CMD_IN`, `_OBJ_CREATE_CMD_IN`) and the method carrying it,
//! and answers as a device would. rrddmma's `mlx5dv::devx::cmd` builds the
//! same requests (`mlx5dv::devx::sched` the scheduling ones); compared:
//! the sequence of commands, each one's carrying method, length and every byte.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::OnceLock;

use std::ffi::c_void;

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::devx::cmd::{self, MkeySpec};
use rrddmma::mlx5dv::devx::sched::{self, SchedAttr, SchedKind};
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::sq::SqLimits;
use rrddmma::mlx5dv::umr::{KlmEntry, RawLayout};
use rrddmma::prim::AccessFlags;

use super::send::OurRing;

use super::build::{library_fn, scaled, Rng, SEED};
use super::{Mismatch, Mutation};

#[repr(C)]
struct VQp {
    _opaque: [u8; 0],
}

struct Lib {
    arm: unsafe extern "C" fn(c_int),
    count: unsafe extern "C" fn() -> u32,
    get: unsafe extern "C" fn(u32, *mut u16, *mut u16, *mut u8, u32) -> u32,
    qp: unsafe extern "C" fn(c_int, u32) -> *mut VQp,
    udp_sport: unsafe extern "C" fn(*mut VQp, u16) -> c_int,
    lag_port: unsafe extern "C" fn(*mut VQp, u8) -> c_int,
    dci_reset: unsafe extern "C" fn(*mut VQp, u16) -> c_int,
    create_mkey: unsafe extern "C" fn(u32, u16, u32, *mut u32, *mut u16) -> c_int,
    sched_create: unsafe extern "C" fn(c_int, *mut c_void, u32, u32, u32, *mut u32, *mut c_int) -> *mut c_void,
    sched_modify: unsafe extern "C" fn(c_int, *mut c_void, *mut c_void, u32, u32, u32) -> c_int,
    qp_sched: unsafe extern "C" fn(*mut VQp, *mut c_void, *mut c_void) -> c_int,
    last_out: unsafe extern "C" fn(*mut u8, u32) -> u32,
    umr: unsafe extern "C" fn(*mut c_void, u32, u32, u16, *const ffi::ibv_sge) -> c_int,
    mkey_sq: unsafe extern "C" fn(u32, u32, c_int, u32, c_int, u64) -> *mut c_void,
    sq_buf: unsafe extern "C" fn(*mut c_void) -> *mut u8,
    after: unsafe extern "C" fn(*mut c_void, *mut u32),
}

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    // SAFETY: each entry is the devx.c function of the signature its field gives.
    LIB.get_or_init(|| unsafe {
        Lib {
            arm: library_fn("h_devx_arm"),
            count: library_fn("h_devx_count"),
            get: library_fn("h_devx_get"),
            qp: library_fn("h_devx_qp"),
            udp_sport: library_fn("h_devx_udp_sport"),
            lag_port: library_fn("h_devx_lag_port"),
            dci_reset: library_fn("h_devx_dci_reset"),
            create_mkey: library_fn("h_devx_create_mkey"),
            sched_create: library_fn("h_devx_sched_create"),
            sched_modify: library_fn("h_devx_sched_modify"),
            qp_sched: library_fn("h_devx_qp_sched"),
            last_out: library_fn("h_devx_last_out"),
            umr: library_fn("h_devx_umr"),
            mkey_sq: library_fn("h_mkey_sq"),
            sq_buf: library_fn("h_sq_buf"),
            after: library_fn("h_after"),
        }
    })
}

/// The ioctl method that carried a command, as our layer names it: the
/// general command (`mlx5dv_devx_general_cmd`), or a query / modify /
/// create of an object (`mlx5dv_devx_qp_query`, `_qp_modify`, `_obj_create`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Carrier {
    General,
    ObjCreate,
    ObjModify,
    ObjQuery,
}

/// `MLX5_IB_OBJECT_DEVX`, `MLX5_IB_OBJECT_DEVX_OBJ` and their methods
/// (`rdma/mlx5_user_ioctl_cmds.h`: each the namespace bit 1 << 12, plus its index).
fn carrier(object: u16, method: u16) -> Option<Carrier> {
    const NS: u16 = 1 << 12;
    match (object, method) {
        (o, m) if o == NS && m == NS => Some(Carrier::General),
        (o, m) if o == NS + 1 && m == NS => Some(Carrier::ObjCreate),
        (o, m) if o == NS + 1 && m == NS + 2 => Some(Carrier::ObjModify),
        (o, m) if o == NS + 1 && m == NS + 3 => Some(Carrier::ObjQuery),
        _ => None,
    }
}

/// The commands libmlx5 handed to the fake kernel since it was armed.
fn recorded() -> Vec<(Option<Carrier>, Vec<u8>)> {
    let l = lib();
    // SAFETY: the library's entries, called one at a time (`exclusive`).
    let n = unsafe { (l.count)() };
    (0..n)
        .map(|i| {
            let (mut o, mut m) = (0u16, 0u16);
            let mut buf = vec![0u8; 4096];
            // SAFETY: `buf` holds 4096 bytes; `o`, `m` valid for writes.
            let len = unsafe { (l.get)(i, &mut o, &mut m, buf.as_mut_ptr(), 4096) };
            buf.truncate(len as usize);
            (carrier(o, m), buf)
        })
        .collect()
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct DevxStats {
    /// Requests compared, by kind.
    pub cases: BTreeMap<&'static str, usize>,
    /// Commands compared, by opcode name.
    pub commands: BTreeMap<&'static str, usize>,
    pub remote_invalidate: usize,
}

impl DevxStats {
    pub fn summary(&self) -> String {
        let cases: Vec<String> = self.cases.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let cmds: Vec<String> = self.commands.iter().map(|(k, n)| format!("{n} {k}")).collect();
        format!(
            "{} (commands: {}; {} mkeys with remote invalidation), bytes, lengths and carrying methods",
            cases.join(", "),
            cmds.join(", "),
            self.remote_invalidate
        )
    }
}

fn opname(op: u16) -> &'static str {
    match op {
        0x505 => "RTS2RTS_QP",
        0x50b => "QUERY_QP",
        0x842 => "QUERY_LAG",
        0x200 => "CREATE_MKEY",
        0xa00 => "CREATE_GENERAL_OBJECT",
        0xa01 => "MODIFY_GENERAL_OBJECT",
        _ => "other",
    }
}

/// Compares what libmlx5 sent for one request (`kind`, case `i`) with ours.
fn compare(
    kind: &'static str,
    i: usize,
    ours: &[(Carrier, Vec<u8>)],
    stats: &mut DevxStats,
) -> Result<(), Box<Mismatch>> {
    let theirs = recorded();
    let at = format!("case {i}");
    if theirs.len() != ours.len() {
        return Err(Mismatch::value(kind, &at, "commands sent", theirs.len(), ours.len()).into());
    }
    for (j, ((tc, tb), (oc, ob))) in theirs.iter().zip(ours).enumerate() {
        let op = opname(cmd::opcode_of(ob));
        let field = |f: &str| format!("command {j} ({op}) {f}");
        if *tc != Some(*oc) {
            return Err(Mismatch::value(kind, &at, &field("method"), format!("{tc:?}"), format!("{oc:?}")).into());
        }
        if tb.len() != ob.len() {
            return Err(Mismatch::value(kind, &at, &field("length"), tb.len(), ob.len()).into());
        }
        if let Some(b) = tb.iter().zip(ob).position(|(t, o)| t != o) {
            return Err(Mismatch::at_byte(kind.into(), at, field("bytes"), b, tb[b], ob[b]));
        }
        *stats.commands.entry(op).or_default() += 1;
    }
    *stats.cases.entry(kind).or_default() += 1;
    Ok(())
}

/// Cases per command kind.
pub const CASES: usize = 2_000;

/// Runs the comparison; the first mismatch ends it. `mutation` gives our
/// builder the first case's input with bit 0 flipped: the UDP port
/// (`DevxUdpSport`), the LAG port (`DevxLagPort`, 1 and 2 swapped), the
/// stream (`DevxDciStream`), the PD number (`DevxMkey`) or the leaf's
/// weight (`DevxSched`).
pub fn check(mutation: Mutation) -> Result<DevxStats, Box<Mismatch>> {
    let _one_at_a_time = super::batch::exclusive();
    let l = lib();
    let mut rng = Rng(SEED ^ 0xde_7c);
    let mut stats = DevxStats::default();
    let n = scaled(CASES);
    let mut umr = UmrQueues::new(l);
    // A stream of its own: the other families' cases stay as they were.
    let mut umr_rng = Rng(SEED ^ 0x0075_6d72);
    let result = (|| {
        for i in 0..n {
            let first = i == 0;
            let qpn = (rng.next() & 0xff_ffff) as u32;

            // UDP source port of an RC QP.
            let sport = rng.next() as u16;
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let qp = unsafe { (l.qp)(0, qpn) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            unsafe { (l.arm)(1) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let rc = unsafe { (l.udp_sport)(qp, sport) };
            assert_eq!(rc, 0, "libmlx5's mlx5dv_modify_qp_udp_sport failed");
            let s = if first && mutation == Mutation::DevxUdpSport { sport ^ 1 } else { sport };
            compare("UDP source port", i, &[(Carrier::ObjModify, cmd::rts2rts_udp_sport(qpn, s))], &mut stats)?;

            // LAG port of an RC QP or a DCI.
            let kind = if rng.chance(50) { 0 } else { 2 };
            let port = 1 + rng.below(2) as u8;
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let qp = unsafe { (l.qp)(kind, qpn) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            unsafe { (l.arm)(1) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let rc = unsafe { (l.lag_port)(qp, port) };
            assert_eq!(rc, 0, "libmlx5's mlx5dv_modify_qp_lag_port failed");
            let p = if first && mutation == Mutation::DevxLagPort { port ^ 3 } else { port };
            let ours = [
                (Carrier::General, cmd::query_lag().to_vec()),
                (Carrier::ObjQuery, cmd::query_qp(qpn).to_vec()),
                (Carrier::ObjModify, cmd::rts2rts_lag_port(qpn, p)),
            ];
            compare("LAG port", i, &ours, &mut stats)?;

            // DCI stream reset.
            let stream = rng.next() as u16;
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let qp = unsafe { (l.qp)(2, qpn) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            unsafe { (l.arm)(1) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let rc = unsafe { (l.dci_reset)(qp, stream) };
            assert_eq!(rc, 0, "libmlx5's mlx5dv_dci_stream_id_reset failed");
            let st = if first && mutation == Mutation::DevxDciStream { stream ^ 1 } else { stream };
            compare(
                "DCI stream reset",
                i,
                &[(Carrier::ObjModify, cmd::rts2rts_dci_stream_reset(qpn, st))],
                &mut stats,
            )?;

            // Indirect mkey, with or without remote invalidation.
            let pdn = (rng.next() & 0xff_ffff) as u32;
            let entries = 1 + rng.below(0xfff0) as u16;
            let rinval = rng.chance(30);
            // MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT, _REMOTE_INVALIDATE.
            let flags = 1 | if rinval { 1 << 4 } else { 0 };
            let (mut key, mut got) = (0u32, 0u16);
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            unsafe { (l.arm)(1) };
            // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
            let rc = unsafe { (l.create_mkey)(pdn, entries, flags, &mut key, &mut got) };
            assert_eq!(rc, 0, "libmlx5's mlx5dv_create_mkey failed");
            let mut spec =
                MkeySpec::indirect(if first && mutation == Mutation::DevxMkey { pdn ^ 1 } else { pdn }, entries);
            spec.remote_invalidate = rinval;
            compare("mkey creation", i, &[(Carrier::ObjCreate, cmd::create_mkey(&spec))], &mut stats)?;
            if u32::from(got) != spec.translations {
                return Err(Mismatch::value(
                    "mkey creation",
                    &format!("case {i}"),
                    "max_entries written back",
                    got,
                    spec.translations,
                )
                .into());
            }
            stats.remote_invalidate += usize::from(rinval);

            // The key just made, configured by a UMR WQE: libmlx5's own key
            // against the key and room a DevxMkey takes from the answer.
            umr.case(l, &mut umr_rng, i, &spec, key, got, first && mutation == Mutation::DevxUmr, &mut stats)?;

            sched_case(l, &mut rng, i, first && mutation == Mutation::DevxSched, &mut stats)?;
        }
        Ok(())
    })();
    // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
    unsafe { (l.arm)(0) };
    result.map(|()| stats)
}

/// The queues of the UMR case: a provider RC send queue with the
/// memory-key entries (tests/provider/mkey.c's `h_mkey_sq`) and ours.
struct UmrQueues {
    qp: *mut c_void,
    ours: OurRing,
    cq: crate::mlx5_support::SoftCq,
}

const UMR_QPN: u32 = 0x4d4b;
const UMR_WQES: u32 = 64;
/// (60 + 4) / 16 = 4 list entries fit.
const UMR_INLINE: u32 = 60;

impl UmrQueues {
    fn new(l: &Lib) -> UmrQueues {
        // SAFETY: the library's constructor.
        let qp = unsafe { (l.mkey_sq)(UMR_QPN, UMR_WQES, UMR_INLINE as c_int, 256, 0, 0x756d) };
        let mut ours = OurRing::new(UMR_QPN, UMR_WQES, 256, 1, 0x756d);
        ours.sq.set_limits(SqLimits::new(UMR_INLINE, 1, 255 * 16));
        let cq = crate::mlx5_support::SoftCq::new(16);
        ours.sq.bind_cq(&cq.ring);
        UmrQueues { qp, ours, cq }
    }

    /// libmlx5's `mlx5dv_wr_mkey_configure` (access and list setters) on
    /// the key its `mlx5dv_create_mkey` just made (lkey `key`, room
    /// `got`), against `SqRing::mkey_configure_raw` with the key
    /// `cmd::mkey_of` reads from the same answer and the room
    /// `cmd::umr_entries(spec)` gives: what `DevxMkey`'s `UmrKey` answers,
    /// so what the typed `SqRing::mkey_configure(&mut DevxMkey, ..)` passes
    /// on. Compared: the key and room, the outcome, every WQE byte and the
    /// producer index. `mutate`: our access's remote-write right flipped.
    #[allow(clippy::too_many_arguments)]
    fn case(
        &mut self,
        l: &Lib,
        rng: &mut Rng,
        i: usize,
        spec: &MkeySpec,
        key: u32,
        got: u16,
        mutate: bool,
        stats: &mut DevxStats,
    ) -> Result<(), Box<Mismatch>> {
        const KIND: &str = "UMR on a DEVX key";
        let at = format!("case {i}");
        let mut out = [0u8; 16];
        // SAFETY: `out` holds 16 bytes.
        unsafe { (l.last_out)(out.as_mut_ptr(), 16) };
        let (our_key, room) = (cmd::mkey_of(&out), cmd::umr_entries(spec));
        if our_key != key || room != got {
            return Err(Mismatch::value(
                KIND,
                &at,
                "key and room (lkey, max_entries)",
                format!("{key:#x}, {got}"),
                format!("{our_key:#x}, {room}"),
            )
            .into());
        }
        let n = 1 + rng.below(4) as usize;
        let sges: Vec<ffi::ibv_sge> = (0..n)
            .map(|_| ffi::ibv_sge {
                addr: rng.next(),
                // Under 2^24 bytes each, as tests/provider/mkey.rs: libmlx5
                // sums the lengths in an `int` (`umr_sg_list_create`), so a
                // list of 2 GiB or more gets a sign-extended mkey length;
                // ours is the sum.
                length: 1 + rng.below((1 << 24) - 1) as u32,
                lkey: (rng.next() as u32) & !0xff,
            })
            .collect();
        // Rights the access setter takes: local write, remote read, write, atomic.
        let rights = [1u32, 2, 4, 8];
        let access = rights.iter().filter(|_| rng.chance(50)).fold(0, |a, r| a | r);
        let signaled = rng.chance(50);
        // IBV_SEND_INLINE, and IBV_SEND_SIGNALED.
        let wr_flags = 8 | if signaled { 2 } else { 0 };
        let first = self.ours.sq.cur_post();
        // SAFETY: the library's QP and entries; `sges` lives for the call.
        let rc = unsafe { (l.umr)(self.qp, wr_flags, access, n as u16, sges.as_ptr()) };
        let mut after = [0u32; 3];
        // SAFETY: the library's QP; three words out.
        unsafe { (l.after)(self.qp, after.as_mut_ptr()) };
        let klm: Vec<KlmEntry> = sges.iter().map(|s| KlmEntry { lkey: s.lkey, addr: s.addr, len: s.length }).collect();
        let ours_access = if mutate { access ^ 4 } else { access };
        let flags = if signaled { CtrlFlags::CQ_UPDATE } else { CtrlFlags::empty() };
        // SAFETY: the ring is ordinary memory no device reads; the ranges
        // are never dereferenced.
        let ours = unsafe {
            self.ours.sq.mkey_configure_raw(
                flags,
                our_key,
                room,
                Some(AccessFlags::from_bits_retain(ours_access)),
                Some(RawLayout::List(&klm)),
            )
        };
        let pi = match (ours, rc) {
            (Ok(pi), 0) => pi,
            (o, rc) => {
                return Err(Mismatch::value(
                    KIND,
                    &at,
                    "outcome (ours, libmlx5's errno)",
                    format!("{rc}"),
                    format!("{o:?}"),
                )
                .into())
            }
        };
        let bbs = self.ours.sq.cur_post().wrapping_sub(first) as usize;
        // SAFETY: the provider's ring, `UMR_WQES` blocks, not written while read.
        let theirs = unsafe { std::slice::from_raw_parts((l.sq_buf)(self.qp), UMR_WQES as usize * 64) };
        let mask = UMR_WQES as usize * 64 - 1;
        for b in 0..bbs * 64 {
            let pos = (first as usize * 64 + b) & mask;
            let (t, o) = (theirs[pos], self.ours.ring.bytes()[pos]);
            if t != o {
                return Err(Mismatch::at_byte(KIND.to_string(), at, "WQE bytes".into(), b, t, o));
            }
        }
        if after[0] != self.ours.sq.cur_post() {
            return Err(Mismatch::value(KIND, &at, "producer index", after[0], self.ours.sq.cur_post()).into());
        }
        let done = self.cq.req(UMR_QPN, pi);
        assert!(self.ours.sq.retire(&done), "{at}: our UMR WQE retires");
        *stats.cases.entry(KIND).or_default() += 1;
        Ok(())
    }
}

/// Random attributes: the flags libmlx5 takes and values for both fields
/// (set in C whatever the flags, so a builder that writes an unselected
/// field is caught), and the same as ours.
fn sched_attr(rng: &mut Rng) -> (u32, u32, u32, SchedAttr) {
    let flags = rng.below(4) as u32;
    let (bw, rate) = (rng.next() as u32, rng.next() as u32);
    let attr = SchedAttr { bw_share: (flags & 1 != 0).then_some(bw), max_avg_bw: (flags & 2 != 0).then_some(rate) };
    (flags, bw, rate, attr)
}

/// One scheduling case: a root node, a node under it, a leaf under that,
/// each created; the leaf and the node modified; an RC QP in RTS attached
/// to the leaf (its responses to the leaf or to none).
fn sched_case(l: &Lib, rng: &mut Rng, i: usize, mutate: bool, stats: &mut DevxStats) -> Result<(), Box<Mismatch>> {
    let create = |leaf: bool, parent: *mut c_void, flags, bw, rate| {
        let (mut id, mut rc) = (0u32, 0 as c_int);
        // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
        unsafe { (l.arm)(1) };
        // SAFETY: as above; `id` and `rc` valid for writes.
        let e = unsafe { (l.sched_create)(c_int::from(leaf), parent, flags, bw, rate, &mut id, &mut rc) };
        assert!(
            !e.is_null() && rc == 0,
            "libmlx5's mlx5dv_sched_{}_create failed: {rc}",
            ["node", "leaf"][leaf as usize]
        );
        (e, id)
    };
    let (root, root_id) = create(false, std::ptr::null_mut(), 0, 0, 0);
    compare(
        "scheduling node creation",
        i,
        &[(Carrier::ObjCreate, sched::create_cmd(SchedKind::Node, 0, &SchedAttr::default()))],
        stats,
    )?;
    let (flags, bw, rate, attr) = sched_attr(rng);
    let (node, node_id) = create(false, root, flags, bw, rate);
    compare(
        "scheduling node creation",
        i,
        &[(Carrier::ObjCreate, sched::create_cmd(SchedKind::Node, root_id, &attr))],
        stats,
    )?;
    let (flags, bw, rate, mut attr) = sched_attr(rng);
    let (leaf, leaf_id) = create(true, node, flags, bw, rate);
    if mutate {
        attr.bw_share = Some(attr.bw_share.unwrap_or(0) ^ 1);
    }
    compare(
        "scheduling leaf creation",
        i,
        &[(Carrier::ObjCreate, sched::create_cmd(SchedKind::Leaf, node_id, &attr))],
        stats,
    )?;
    for (leaf_kind, elem, parent, id) in [(true, leaf, node, leaf_id), (false, node, root, node_id)] {
        let (mut flags, bw, rate, mut attr) = sched_attr(rng);
        if flags == 0 {
            // A modify that sets nothing is refused on both sides.
            flags = 1;
            attr.bw_share = Some(bw);
        }
        // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
        unsafe { (l.arm)(1) };
        // SAFETY: as above.
        let rc = unsafe { (l.sched_modify)(c_int::from(leaf_kind), elem, parent, flags, bw, rate) };
        assert_eq!(rc, 0, "libmlx5's mlx5dv_sched_*_modify failed");
        let kind = if leaf_kind { SchedKind::Leaf } else { SchedKind::Node };
        compare("scheduling element modify", i, &[(Carrier::ObjModify, sched::modify_cmd(kind, id, &attr))], stats)?;
    }
    let qpn = (rng.next() & 0xff_ffff) as u32;
    // SAFETY: the library's entries with the objects it made; one caller at a time (`exclusive`).
    let qp = unsafe { (l.qp)(0, qpn) };
    let responder = rng.chance(50);
    // SAFETY: as above.
    unsafe { (l.arm)(1) };
    // SAFETY: as above; `leaf` is a leaf libmlx5 made.
    let rc = unsafe { (l.qp_sched)(qp, leaf, if responder { leaf } else { std::ptr::null_mut() }) };
    assert_eq!(rc, 0, "libmlx5's mlx5dv_modify_qp_sched_elem failed");
    let ours = sched::qp_cmd(qpn, leaf_id, if responder { leaf_id } else { 0 });
    compare("QP on a scheduling leaf", i, &[(Carrier::ObjModify, ours)], stats)
}
