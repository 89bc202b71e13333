//! Memory keys (UMR) against libmlx5: random requests posted through
//! libmlx5's own `mlx5dv_wr_mr_list`, `mlx5dv_wr_mr_interleaved`,
//! `mlx5dv_wr_mkey_configure` (+ `set_mkey_access_flags`,
//! `set_mkey_layout_list` / `_interleaved`, in either order) and
//! `ibv_wr_local_inv` on a provider QP of the library build
//! (tests/provider/mkey.c), each in a batch of its own, and the same inputs
//! through rrddmma's typed builders (`SqRing::mkey_configure_raw`,
//! `SqRing::local_inv`) on a second ring. Compared: whether the request is
//! refused, every WQE byte (one mask, reason beside it), the producer
//! index, the doorbell record, the BlueFlame offsets and every byte written
//! to the BlueFlame page or doorbell.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::fmt::Write as _;
use std::ptr::NonNull;
use std::sync::OnceLock;

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::mkey_wr::MkeyWr;
use rrddmma::mlx5dv::mmio::{Op, Recorder};
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::sq::SqLimits;
use rrddmma::mlx5dv::umr::{KlmEntry, RawLayout, StrideEntry};
use rrddmma::prim::{AccessFlags, SendFlags};

use super::batch::{bf_written, BF_PAGE};
use super::build::{library_fn, Rng};
use super::send::OurRing;
use super::{Mismatch, Mutation};

#[repr(C)]
struct MQp {
    _opaque: [u8; 0],
}

type PostFn = unsafe extern "C" fn(
    *mut MQp,
    c_int,
    u32,
    u32,
    u16,
    c_int,
    u32,
    c_int,
    u32,
    u16,
    *const ffi::ibv_sge,
    *const ffi::mlx5dv_mr_interleaved,
    c_int,
) -> c_int;

/// The library's entries this check uses (tests/provider/mkey.c and the
/// shared ones of mlx5_provider.c).
struct Lib {
    make: unsafe extern "C" fn(u32, u32, c_int, u32, c_int, u64) -> *mut MQp,
    post: PostFn,
    sq_buf: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    bf_page: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    set_prefer_bf: unsafe extern "C" fn(c_int),
    before: unsafe extern "C" fn(*mut MQp),
    after: unsafe extern "C" fn(*mut MQp, *mut u32),
    qp_ex: unsafe extern "C" fn(*mut MQp) -> *mut ffi::ibv_qp_ex,
    dv_qp: unsafe extern "C" fn(*mut MQp) -> *mut ffi::mlx5dv_qp_ex,
    mkey: unsafe extern "C" fn(u32, u16) -> *mut ffi::mlx5dv_mkey,
    start_at: unsafe extern "C" fn(*mut MQp, u32),
}

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    // SAFETY: each entry is the mkey.c (or mlx5_provider.c) function of the
    // signature its field gives.
    LIB.get_or_init(|| unsafe {
        Lib {
            make: library_fn("h_mkey_sq"),
            post: library_fn("h_mkey_post"),
            sq_buf: library_fn("h_sq_buf"),
            bf_page: library_fn("h_bf_page"),
            set_prefer_bf: library_fn("h_set_prefer_bf"),
            before: library_fn("h_before"),
            after: library_fn("h_after"),
            qp_ex: library_fn("h_qp_ex"),
            dv_qp: library_fn("h_dv_qp"),
            mkey: library_fn("h_mkey"),
            start_at: library_fn("h_mkey_start_at"),
        }
    })
}

/// `enum ibv_send_flags`.
const F_FENCE: u32 = 1;
const F_SIGNALED: u32 = 2;
const F_SOLICITED: u32 = 4;
const F_INLINE: u32 = 8;
/// An access bit the UMR setters refuse (`IBV_ACCESS_MW_BIND`).
const BAD_ACCESS: u32 = 16;

/// What the check covered.
#[derive(Debug, Default)]
pub struct MkeyStats {
    pub queues: usize,
    pub cases: usize,
    /// Posted WQEs by entry point.
    pub wqes: BTreeMap<&'static str, usize>,
    /// Requests both sides refused, by reason.
    pub refused: BTreeMap<&'static str, usize>,
    /// Configures without IBV_SEND_INLINE, which libmlx5 refuses (the typed
    /// builders have no such flag: nothing to compare on our side).
    pub no_inline_refused: usize,
    pub max_len_lists: usize,
    pub wrapped: usize,
    pub index_wraps: usize,
    /// Requests posted through rrddmma's `MkeyWr` onto a second provider
    /// QP, matching libmlx5's own call (outcome and WQE bytes).
    pub mkey_wr: usize,
    pub signaled: usize,
    pub fenced: usize,
    pub small_fenced: usize,
    pub blueflame: usize,
    pub doorbells: usize,
}

impl MkeyStats {
    pub fn summary(&self) -> String {
        let mut s = format!("{} cases on {} queues: ", self.cases, self.queues);
        for (i, (k, n)) in self.wqes.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(s, " WQEs; refused by both (");
        for (i, (k, n)) in self.refused.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(
            s,
            "); {} through rrddmma's MkeyWr as through libmlx5's inline calls; {} configures without \
             IBV_SEND_INLINE refused by libmlx5 (and through MkeyWr); {} layouts at the largest length; {} \
             WQEs across the ring's end, {} across the 16-bit index; {} signaled, {} fenced, {} with the small \
             fence after a UMR; {} BlueFlame copies, {} 8-byte doorbells",
            self.mkey_wr,
            self.no_inline_refused,
            self.max_len_lists,
            self.wrapped,
            self.index_wraps,
            self.signaled,
            self.fenced,
            self.small_fenced,
            self.blueflame,
            self.doorbells
        );
        s
    }
}

/// One random request.
#[derive(Clone)]
struct Case {
    /// 0 local_inv, 1 configure + setters, 2 mr_list, 3 mr_interleaved.
    op: i32,
    wr_flags: u32,
    key: u32,
    num_desc: u16,
    access: Option<u32>,
    /// 0 none, 1 list, 2 interleaved.
    layout: i32,
    repeat: u32,
    sges: Vec<ffi::ibv_sge>,
    il: Vec<ffi::mlx5dv_mr_interleaved>,
    order: i32,
}

fn random_case(r: &mut Rng, max_inline: u32) -> Case {
    let op = match r.below(100) {
        0..=14 => 0,
        15..=44 => 1,
        45..=72 => 2,
        _ => 3,
    };
    let mut wr_flags = 0;
    for (bit, pct) in [(F_FENCE, 20), (F_SIGNALED, 50), (F_SOLICITED, 20)] {
        if r.chance(pct) {
            wr_flags |= bit;
        }
    }
    // Configures need IBV_SEND_INLINE in libmlx5; a few go without it.
    if op == 0 { r.chance(50) } else { !r.chance(2) }.then(|| wr_flags |= F_INLINE);
    let key = if r.chance(4) { r.next() as u32 } else { (r.next() as u32) & !0xff };
    let num_desc = (r.below(80) as u16 + 1).next_multiple_of(4);
    let layout = match op {
        2 => 1,
        3 => 2,
        1 => r.below(3) as i32,
        _ => 0,
    };
    let access = match op {
        0 => None,
        1 if r.chance(30) => None,
        _ => Some(if r.chance(4) { BAD_ACCESS | r.below(16) as u32 } else { r.below(16) as u32 }),
    };
    let inl = (u64::from(max_inline) + 4) / 16;
    let cap = if layout == 2 { inl.wrapping_sub(1) } else { inl }.min(u64::from(num_desc));
    let n = if r.chance(5) {
        cap + 1 + r.below(3)
    } else if r.chance(20) {
        cap
    } else {
        r.below(cap + 1)
    } as usize;
    let mut sges = Vec::new();
    let mut il = Vec::new();
    let mut repeat = 0;
    if layout == 1 {
        // Lengths below 2^24: libmlx5 sums them into an `int`, which these
        // (at most 64) never overflow.
        sges = (0..n)
            .map(|_| ffi::ibv_sge { addr: r.next(), length: r.below(1 << 24) as u32, lkey: r.next() as u32 })
            .collect();
    } else if layout == 2 {
        repeat = if r.chance(50) { r.below(16) as u32 } else { r.next() as u32 };
        il = (0..n)
            .map(|_| {
                let count = r.below(0x8000) as u32;
                let skip = r.below(u64::from(0xffff - count) + 1) as u32;
                ffi::mlx5dv_mr_interleaved {
                    addr: r.next(),
                    bytes_count: count,
                    bytes_skip: skip,
                    lkey: r.next() as u32,
                }
            })
            .collect();
    }
    Case { op, wr_flags, key, num_desc, access, layout, repeat, sges, il, order: r.below(2) as i32 }
}

/// The entry point's name in the report.
fn name(c: &Case) -> &'static str {
    match (c.op, c.layout, c.access.is_some()) {
        (0, ..) => "local_inv",
        (2, ..) => "mr_list",
        (3, ..) => "mr_interleaved",
        (_, 0, false) => "mkey_configure",
        (_, 0, true) => "mkey_configure+access",
        (_, 1, false) => "mkey_configure+list",
        (_, 1, true) => "mkey_configure+access+list",
        (_, _, false) => "mkey_configure+interleaved",
        (_, _, true) => "mkey_configure+access+interleaved",
    }
}

/// The WQE's fields by byte range, for the report.
fn field(b: usize) -> &'static str {
    match b {
        0..=3 => "ctrl.opmod_idx_opcode",
        4..=7 => "ctrl.qpn_ds",
        8..=10 => "ctrl.signature/stream",
        11 => "ctrl.fm_ce_se",
        12..=15 => "ctrl.imm (the key)",
        16 => "umr_ctrl.flags",
        20..=21 => "umr_ctrl.klm_octowords",
        24..=31 => "umr_ctrl.mkey_mask",
        17..=63 => "umr_ctrl.reserved",
        64 => "mkey_ctx.free",
        66 => "mkey_ctx.access_flags",
        68..=71 => "mkey_ctx.qpn_mkey",
        88..=95 => "mkey_ctx.len",
        65..=127 => "mkey_ctx.other",
        _ => "translation entries",
    }
}

/// MASK (local_inv only): libmlx5's `set_umr_mkey_seg` writes only `free`
/// and `qpn_mkey` of the mkey context when it frees a key, leaving the other
/// 59 bytes as the ring held them (stale bytes of earlier WQEs); the mask
/// selects only free, mkey and qpn, so the device ignores them. Ours are 0.
fn masked(op: i32, b: usize) -> bool {
    op == 0 && ((65..68).contains(&b) || (72..128).contains(&b))
}

/// Posts `c` on the second provider QP through rrddmma's `MkeyWr` (and
/// `ibv_wr_local_inv` through the QP's own entry); returns
/// `ibv_wr_complete`'s value.
fn post_mkey_wr(qp: *mut MQp, c: &Case) -> i32 {
    let l = lib();
    // SAFETY: the library's QP and its two views, alive for the run.
    let (ex, dv) = unsafe { ((l.qp_ex)(qp), (l.dv_qp)(qp)) };
    let (ex, dv) = (NonNull::new(ex).unwrap(), NonNull::new(dv).unwrap());
    // SAFETY: the views of one provider QP; every call below is inside the
    // batch opened here; the key is the library's fabricated one.
    let wr = unsafe { MkeyWr::from_raw(ex, dv) };
    let e = ex.as_ptr();
    let flags = SendFlags::from_bits_retain(c.wr_flags);
    let access = AccessFlags::from_bits_retain(c.access.unwrap_or(0));
    // SAFETY: as above; the ring is ordinary memory no device reads, so no
    // entry is ever dereferenced.
    unsafe {
        let key = (l.mkey)(c.key, c.num_desc);
        ((*e).wr_start.unwrap())(e);
        match c.op {
            0 => {
                (*e).wr_id = 1;
                (*e).wr_flags = c.wr_flags;
                ((*e).wr_local_inv.unwrap())(e, c.key);
            }
            1 => {
                wr.mkey_configure(1, flags, key, u8::from(c.access.is_some()) + u8::from(c.layout != 0));
                for step in 0..2 {
                    if (step == 0) == (c.order == 0) {
                        if c.access.is_some() {
                            wr.set_access_flags(access);
                        }
                    } else if c.layout == 1 {
                        wr.set_layout_list(&c.sges);
                    } else if c.layout == 2 {
                        wr.set_layout_interleaved(c.repeat, &c.il);
                    }
                }
            }
            2 => wr.mr_list(1, flags, key, access, &c.sges),
            _ => wr.mr_interleaved(1, flags, key, access, c.repeat, &c.il),
        }
        ((*e).wr_complete.unwrap())(e)
    }
}

/// One queue of each shape, `per_queue` cases each.
pub fn check(per_queue: usize, mutation: Mutation) -> Result<MkeyStats, Box<Mismatch>> {
    let _one_at_a_time = super::batch::exclusive();
    let mut stats = MkeyStats::default();
    let mut rng = Rng(0x756d_7231);
    let l = lib();
    let shapes: &[(u32, u32, u32, bool, bool)] = &[
        // wqe_cnt, max_inline, bf_size, sig_all, prefer_bf
        (32, 1020, 256, false, true),
        (32, 508, 512, false, true),
        (64, 252, 256, true, false),
        (128, 124, 0, false, true),
        (32, 60, 256, false, false),
        (64, 28, 512, true, true),
        (32, 188, 256, false, true),
        (64, 92, 256, false, true),
        (32, 12, 256, false, true),
        (128, 764, 512, false, false),
    ];
    for (qi, &(wqe_cnt, max_inline, bf_size, sig_all, prefer_bf)) in shapes.iter().enumerate() {
        let qpn = 0x300 + qi as u32;
        let seed = rng.next();
        // SAFETY: the library's constructor.
        let qp = unsafe { (l.make)(qpn, wqe_cnt, max_inline as c_int, bf_size, c_int::from(sig_all), seed) };
        // The same queue again, posted to through rrddmma's MkeyWr.
        // SAFETY: as above.
        let qp2 = unsafe { (l.make)(qpn, wqe_cnt, max_inline as c_int, bf_size, c_int::from(sig_all), rng.next()) };
        stats.queues += 1;
        // The provider's queue has BlueFlame register 1 (h_mkey_sq); the
        // buffers stay beside `sq` until the end of this iteration.
        let OurRing { mut sq, ring, dbrec: _dbrec, bf: _bf } = OurRing::new(qpn, wqe_cnt, bf_size, 1, seed);
        sq.set_prefer_bf(prefer_bf);
        sq.set_limits(SqLimits::new(max_inline, 1, 255 * 16));
        let mut cq = crate::mlx5_support::SoftCq::new(16);
        sq.bind_cq(&cq.ring);
        // Odd queues start 200 blocks before the 16-bit WQE index wraps.
        if qi % 2 == 1 {
            let pi = 0x1_0000 - 200;
            // SAFETY: the library's idle QPs; our ring is ordinary memory,
            // restarted at the same index (no device to reset).
            unsafe {
                (l.start_at)(qp, pi);
                (l.start_at)(qp2, pi);
                sq.restart_after_reset(pi, &cq.ring);
            }
        }
        // SAFETY: the library's context, between requests.
        unsafe { (l.set_prefer_bf)(c_int::from(prefer_bf)) };
        let mut bf_off = 0u32;
        for i in 0..per_queue {
            let c = random_case(&mut rng, max_inline);
            let at = format!("queue {qi} case {i}");
            let kind = format!("mkey {}", name(&c));
            stats.cases += 1;
            // SAFETY: the library's QP.
            unsafe { (l.before)(qp) };
            let first = sq.cur_post();
            // SAFETY: the library's QP and entries; the arrays live for the call.
            let rc = unsafe {
                (l.post)(
                    qp,
                    c.op,
                    c.wr_flags,
                    c.key,
                    c.num_desc,
                    c_int::from(c.access.is_some()),
                    c.access.unwrap_or(0),
                    c.layout,
                    c.repeat,
                    (c.sges.len() + c.il.len()) as u16,
                    c.sges.as_ptr(),
                    c.il.as_ptr(),
                    c.order,
                )
            };
            let mut after = [0u32; 3];
            // SAFETY: the library's QP; three words out.
            unsafe { (l.after)(qp, after.as_mut_ptr()) };
            // MkeyWr on the second provider QP: the same outcome and WQE.
            let rc2 = if mutation == Mutation::MkeyWrAccess && i == 4 && qi == 0 {
                // The mutation check: one access bit flipped in what MkeyWr is given.
                let mut m = c.clone();
                m.access = c.access.map(|a| a ^ 1);
                post_mkey_wr(qp2, &m)
            } else {
                post_mkey_wr(qp2, &c)
            };
            let mut after2 = [0u32; 3];
            // SAFETY: the library's QP; three words out.
            unsafe { (l.after)(qp2, after2.as_mut_ptr()) };
            if (rc == 0) != (rc2 == 0) || after2[0] != after[0] {
                return Err(Mismatch::value(
                    &format!("MkeyWr {}", name(&c)),
                    &at,
                    "outcome (ibv_wr_complete, producer index)",
                    format!("{rc}, {}", after[0]),
                    format!("{rc2}, {}", after2[0]),
                )
                .into());
            }
            if rc == 0 {
                stats.mkey_wr += 1;
                // SAFETY: the two provider rings, `wqe_cnt` blocks each, not written while read.
                let (r1, r2) = unsafe {
                    (
                        std::slice::from_raw_parts((l.sq_buf)(qp), wqe_cnt as usize * 64),
                        std::slice::from_raw_parts((l.sq_buf)(qp2), wqe_cnt as usize * 64),
                    )
                };
                let bytes = after[0].wrapping_sub(first) as usize * 64;
                for b in 0..bytes {
                    let pos = (first as usize * 64 + b) & (wqe_cnt as usize * 64 - 1);
                    if r1[pos] != r2[pos] && !masked(c.op, b) {
                        return Err(Mismatch::at_byte(
                            format!("MkeyWr {}", name(&c)),
                            at,
                            field(b).into(),
                            b,
                            r1[pos],
                            r2[pos],
                        ));
                    }
                }
            }
            if c.op != 0 && c.wr_flags & F_INLINE == 0 {
                assert_ne!(rc, 0, "{at}: libmlx5 took a configure without IBV_SEND_INLINE");
                assert_eq!(after[0], first, "{at}: libmlx5 rolled back");
                stats.no_inline_refused += 1;
                continue;
            }
            let mut flags = CtrlFlags::empty();
            if c.wr_flags & F_FENCE != 0 {
                flags |= CtrlFlags::FENCE;
            }
            if c.wr_flags & F_SIGNALED != 0 || sig_all {
                flags |= CtrlFlags::CQ_UPDATE;
            }
            if c.wr_flags & F_SOLICITED != 0 {
                flags |= CtrlFlags::SOLICITED;
            }
            if mutation == Mutation::MkeyFlag && i == 3 && qi == 0 {
                // The mutation check: one bit of the WQE's flags flipped on our side.
                flags = CtrlFlags::from_bits_retain(flags.bits() ^ CtrlFlags::SOLICITED.bits());
            }
            let small_fence = sq.pending_small_fence();
            let ours = if c.op == 0 {
                Ok(sq.local_inv(flags, c.key))
            } else {
                let klm: Vec<KlmEntry> =
                    c.sges.iter().map(|s| KlmEntry { lkey: s.lkey, addr: s.addr, len: s.length }).collect();
                let st: Vec<StrideEntry> =
                    c.il.iter()
                        .map(|e| StrideEntry {
                            lkey: e.lkey,
                            addr: e.addr,
                            bytes_count: e.bytes_count,
                            bytes_skip: e.bytes_skip,
                        })
                        .collect();
                let layout = match c.layout {
                    1 => Some(RawLayout::List(&klm)),
                    2 => Some(RawLayout::Interleaved { repeat_count: c.repeat, entries: &st }),
                    _ => None,
                };
                let access = c.access.map(AccessFlags::from_bits_retain);
                // SAFETY: the ring is ordinary memory no device reads; the
                // ranges are never dereferenced.
                unsafe { sq.mkey_configure_raw(flags, c.key, c.num_desc, access, layout) }
            };
            let refusal = match (&ours, rc) {
                (Ok(_), 0) => None,
                (Err(_), rc) if rc != 0 => Some(if c.key & 0xff != 0 {
                    "tagged key"
                } else if c.access.is_some_and(|a| a & BAD_ACCESS != 0) {
                    "bad access"
                } else {
                    "too many entries"
                }),
                (Ok(_), rc) => return Err(Mismatch::value(&kind, &at, "refused", format!("yes ({rc})"), "no").into()),
                (Err(e), _) => return Err(Mismatch::value(&kind, &at, "refused", "no", format!("yes ({e})")).into()),
            };
            if let Some(why) = refusal {
                *stats.refused.entry(why).or_default() += 1;
                if after[0] != first {
                    return Err(Mismatch::value(&kind, &at, "producer index after a refusal", after[0], first).into());
                }
                continue;
            }
            let pi = ours.unwrap();
            *stats.wqes.entry(name(&c)).or_default() += 1;
            let cap = {
                let inl = (u64::from(max_inline) + 4) / 16;
                if c.layout == 2 { inl.wrapping_sub(1) } else { inl }.min(u64::from(c.num_desc))
            };
            stats.max_len_lists += usize::from(c.layout != 0 && (c.sges.len() + c.il.len()) as u64 == cap);
            stats.signaled += usize::from(flags.contains(CtrlFlags::CQ_UPDATE));
            stats.fenced += usize::from(flags.contains(CtrlFlags::FENCE));
            stats.small_fenced += usize::from(small_fence && !flags.contains(CtrlFlags::FENCE));
            let mut rec = Recorder::default();
            sq.ring(&mut rec);
            let bbs = sq.cur_post().wrapping_sub(first) as usize;
            if (first as usize & (wqe_cnt as usize - 1)) + bbs > wqe_cnt as usize {
                stats.wrapped += 1;
            }
            if sq.cur_post() >> 16 != first >> 16 {
                stats.index_wraps += 1;
            }
            // SAFETY: the provider's ring, `wqe_cnt` blocks, not written while read.
            let theirs_ring = unsafe { std::slice::from_raw_parts((l.sq_buf)(qp), wqe_cnt as usize * 64) };
            let ours_ring = ring.bytes();
            let at_b = |r: &[u8], b: usize| r[(first as usize * 64 + b) & (wqe_cnt as usize * 64 - 1)];
            for b in 0..bbs * 64 {
                let (t, o) = (at_b(theirs_ring, b), at_b(ours_ring, b));
                if t != o && !masked(c.op, b) {
                    return Err(Mismatch::at_byte(kind, at, field(b).into(), b, t, o));
                }
            }
            let value = |f: &str, t: u32, o: u32| -> Result<(), Box<Mismatch>> {
                if t == o {
                    Ok(())
                } else {
                    Err(Mismatch::value(&kind, &at, f, t, o).into())
                }
            };
            value("producer index (sq.cur_post)", after[0], sq.cur_post())?;
            let ours_db = rec.ops.iter().find_map(|o| if let Op::DbRec(v) = o { Some(*v) } else { None });
            value("doorbell record", after[1], ours_db.unwrap_or(u32::MAX))?;
            value("BlueFlame offset after the doorbell", after[2], sq.bf_offset())?;
            let mut ours_bytes = Vec::new();
            for o in &rec.ops {
                if let Op::Write64(off, b) = o {
                    if ours_bytes.is_empty() {
                        value("BlueFlame offset written", bf_off, *off as u32)?;
                    }
                    ours_bytes.extend_from_slice(b);
                }
            }
            bf_off = sq.bf_offset();
            // SAFETY: the QP's BlueFlame page, not written while read.
            let page = unsafe { std::slice::from_raw_parts((l.bf_page)(qp), BF_PAGE) };
            let from =
                *rec.ops.iter().find_map(|o| if let Op::Write64(off, _) = o { Some(off) } else { None }).unwrap();
            let len = bf_written(page, from).len();
            value("doorbell kind (bytes written to the BlueFlame page)", len as u32, ours_bytes.len() as u32)?;
            if len == 8 {
                stats.doorbells += 1;
            } else {
                stats.blueflame += 1;
            }
            for (b, (&t, &o)) in page[from..from + len].iter().zip(&ours_bytes).enumerate() {
                // The same mask as the ring's: the copy is of the WQE.
                if t != o && !masked(c.op, b) {
                    return Err(Mismatch::at_byte(
                        kind,
                        at,
                        format!("BlueFlame/doorbell write: {}", field(b)),
                        b,
                        t,
                        o,
                    ));
                }
            }
            let done = cq.req(qpn, pi);
            assert!(sq.retire(&done), "{at}: our WQE retires");
        }
    }
    Ok(stats)
}
