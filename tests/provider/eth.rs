//! Raw packet sends against libmlx5: random request lists posted as the
//! crate's verbs requests (`SendWr::send` with `SendFlags::IP_CSUM`,
//! `INLINE`, gathers) through libmlx5's `mlx5_post_send` on a raw packet
//! send queue of the harness's library build (tests/provider/eth.c), and
//! replayed as a direct-verbs user writes them through
//! `SqRing::send_eth` on a second ring: the packet's first bytes (the
//! device's minimum inline headers: 18, or none) in the Ethernet segment,
//! the rest of the packet as data segments or inline. Compared: every
//! WQE's bytes (masks with their reasons in `layout`), the producer index,
//! the doorbell record, the BlueFlame offset and every byte written to the
//! BlueFlame page. Requests libmlx5 refuses (inline data past
//! `max_inline_data`, more entries than `max_send_sge`) must be refused by
//! our writer at the same request, with the requests before it posted.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void, CString};
use std::fmt::Write as _;
use std::sync::OnceLock;

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::eth::{CsumFlags, EthWqe};
use rrddmma::mlx5dv::mmio::Recorder;
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::sq::{SqLimits, SqRing, SqTransport};
use rrddmma::prim::{SendFlags, SendWr, Sge};

use super::batch::bf_written;
use super::build::{fill, splitmix, Aligned, SEED};
use super::send::{doorbell_writes, first_diff, OurRing};
use super::{Mismatch, Mutation};

/// An opaque `struct mlx5_qp` of the library.
#[repr(C)]
pub(super) struct MQp {
    _opaque: [u8; 0],
}

type EthSq = unsafe extern "C" fn(u32, u32, c_int, c_int, u32, u32, c_int, u64, c_int, u32) -> *mut MQp;
type EthTso = unsafe extern "C" fn(*mut MQp, c_int, u32);
type EthPost = unsafe extern "C" fn(*mut MQp, u32, *mut ffi::ibv_send_wr, *mut c_int) -> c_int;

/// The library's entry points this check uses (tests/provider/eth.c and
/// the shared ones of mlx5_provider.c).
pub(super) struct Lib {
    eth_sq: EthSq,
    pub(super) eth_post: EthPost,
    eth_tso: EthTso,
    sq_buf: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    bf_page: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    pub(super) set_prefer_bf: unsafe extern "C" fn(c_int),
    pub(super) before: unsafe extern "C" fn(*mut MQp),
    pub(super) after: unsafe extern "C" fn(*mut MQp, *mut u32),
}

pub(super) fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    LIB.get_or_init(|| {
        let path = CString::new(super::build::library().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: the library built for this test (as batch.rs loads it; a
        // second dlopen returns the same handle).
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null(), "dlopen {path:?} failed");
        let sym = |name: &str| -> *mut c_void {
            let n = CString::new(name).unwrap();
            // SAFETY: a live handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(h, n.as_ptr()) };
            assert!(!p.is_null(), "the harness library has no {name}");
            p
        };
        type Qf<R> = unsafe extern "C" fn(*mut MQp) -> R;
        // SAFETY: each symbol is the C function of the signature given here
        // (tests/provider/eth.c, mlx5_provider.c); the library stays loaded.
        unsafe {
            Lib {
                eth_sq: std::mem::transmute::<*mut c_void, EthSq>(sym("h_eth_sq")),
                eth_post: std::mem::transmute::<*mut c_void, EthPost>(sym("h_eth_post")),
                eth_tso: std::mem::transmute::<*mut c_void, EthTso>(sym("h_eth_tso")),
                sq_buf: std::mem::transmute::<*mut c_void, Qf<*mut u8>>(sym("h_sq_buf")),
                bf_page: std::mem::transmute::<*mut c_void, Qf<*mut u8>>(sym("h_bf_page")),
                set_prefer_bf: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int)>(sym("h_set_prefer_bf")),
                before: std::mem::transmute::<*mut c_void, Qf<()>>(sym("h_before")),
                after: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut MQp, *mut u32)>(sym("h_after")),
            }
        }
    })
}

/// The BlueFlame page's size.
const BF_PAGE: usize = 4096;
/// `MLX5_ETH_L2_INLINE_HEADER_SIZE`.
pub(super) const L2: usize = 18;
/// `MLX5_ETH_L2_MIN_HEADER_SIZE`: the shortest TSO headers.
pub(super) const L2_MIN: usize = 14;
/// Bytes of the payload buffer the requests' entries and TSO headers lie in.
pub(super) const PAYLOAD: usize = 1 << 16;

/// Queues and request lists per queue of the run.
pub const QUEUES: usize = 64;
pub const LISTS_PER_QUEUE: usize = 100;

/// One request: its gather list (length, lkey, offset into the payload)
/// and flags; a TSO carries its headers (offset into the payload, length)
/// and MSS.
#[derive(Debug, Clone)]
pub(super) struct Req {
    pub(super) sges: Vec<(u32, u32, usize)>,
    pub(super) tso: Option<(usize, usize, u16)>,
    pub(super) signaled: bool,
    pub(super) solicited: bool,
    pub(super) fence: bool,
    pub(super) csum: bool,
    pub(super) inline: bool,
}

/// Why a request is made to be refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    InlineTooLong,
    TooManySges,
    /// TSO headers shorter than an Ethernet header.
    TsoShortHeader,
}

pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        splitmix(&mut self.0)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(super) fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// The buffers behind our ring (`OurRing`'s, kept beside the ring).
pub(super) struct OurRingBuffers {
    pub(super) ring: Aligned,
    pub(super) dbrec: Aligned,
    _bf: Aligned,
}

/// One queue on both sides.
pub(super) struct Queue {
    pub(super) qp: *mut MQp,
    pub(super) sq: SqRing,
    cq: crate::mlx5_support::SoftCq,
    pub(super) ours: OurRingBuffers,
    pub(super) wqe_cnt: u32,
    pub(super) max_gs: u32,
    pub(super) max_inline: u32,
    pub(super) sig_all: bool,
    pub(super) prefer_bf: bool,
    db_only: bool,
    min_inline: usize,
    pub(super) max_tso_header: usize,
    /// libmlx5's BlueFlame offset before the next list.
    bf_offset: u32,
}

impl Queue {
    pub(super) fn new(i: usize, rng: &mut Rng) -> Queue {
        let qpn = 0x80_0000 + i as u32;
        // At least 32 blocks: a list of four TSOs with 64-byte headers and
        // 200 inline bytes takes 20.
        let wqe_cnt = [32u32, 64, 128, 256][rng.below(4) as usize];
        let max_gs = 1 + rng.below(6) as u32;
        let max_inline = [0u32, 32, 64, 128, 200][rng.below(5) as usize];
        let bf_size = [256u32, 512][rng.below(2) as usize];
        let uuarn = if rng.chance(4) { 0 } else { 1 + rng.below(15) as u32 };
        let prefer_bf = !rng.chance(3);
        let sig_all = rng.chance(4);
        let min_inline = if rng.chance(4) { 0 } else { L2 };
        let max_tso_header = [18usize, 32, 64][rng.below(3) as usize];
        // A quarter of the queues start just below the 16-bit WQE index's wrap.
        let start = if i % 4 == 0 { 0x1_0000 - rng.below(300) as u32 } else { rng.below(0x1_0000) as u32 };
        let seed = rng.next();
        // SAFETY: the library's constructor.
        let qp = unsafe {
            (lib().eth_sq)(
                qpn,
                wqe_cnt,
                max_gs as c_int,
                max_inline as c_int,
                bf_size,
                uuarn,
                c_int::from(sig_all),
                seed,
                1,
                start,
            )
        };
        // SAFETY: the library's QP, just made.
        unsafe { (lib().eth_tso)(qp, max_tso_header as c_int, 1 << 18) };
        let OurRing { mut sq, ring, dbrec, bf } = OurRing::new(qpn, wqe_cnt, bf_size, uuarn, seed);
        sq.set_prefer_bf(prefer_bf);
        sq.set_limits(SqLimits::new(max_inline, max_gs, 255 * 16));
        // SAFETY: the ring is read as a raw packet QP's.
        unsafe { sq.set_transport(SqTransport::RawPacket) };
        let cq = crate::mlx5_support::SoftCq::new(16);
        // SAFETY: test memory that no device reads: the ring starts where
        // libmlx5's queue was made to start.
        unsafe { sq.restart_after_reset(start, &cq.ring) };
        Queue {
            qp,
            sq,
            cq,
            ours: OurRingBuffers { ring, dbrec, _bf: bf },
            wqe_cnt,
            max_gs,
            max_inline,
            sig_all,
            prefer_bf,
            db_only: uuarn == 0,
            min_inline,
            max_tso_header,
            bf_offset: 0,
        }
    }

    pub(super) fn their_ring(&self) -> &[u8] {
        // SAFETY: the provider's send queue, `wqe_cnt` basic blocks, not
        // written while the slice lives.
        unsafe { std::slice::from_raw_parts((lib().sq_buf)(self.qp), self.wqe_cnt as usize * 64) }
    }

    fn bf_page(&self) -> &[u8] {
        // SAFETY: the QP's BlueFlame page, `BF_PAGE` bytes, as above.
        unsafe { std::slice::from_raw_parts((lib().bf_page)(self.qp), BF_PAGE) }
    }

    pub(super) fn blocks(ring: &[u8], wqe_cnt: u32, start: u32, bbs: usize) -> Vec<u8> {
        (0..bbs)
            .flat_map(|b| {
                let slot = (start as usize + b) & (wqe_cnt as usize - 1);
                ring[slot * 64..slot * 64 + 64].iter().copied()
            })
            .collect()
    }
}

/// A random request for `q`; `refuse` makes it one libmlx5 refuses.
fn random_req(q: &Queue, rng: &mut Rng, payload: usize, refuse: Option<Refusal>) -> Req {
    let n = match refuse {
        Some(Refusal::TooManySges) => q.max_gs + 1,
        _ => 1 + rng.below(u64::from(q.max_gs)) as u32,
    };
    let mut sges: Vec<(u32, u32, usize)> = (0..n)
        .map(|i| {
            let len = match refuse {
                // Every entry past the headers still holds bytes: our writer
                // sees max_send_sge + 1 data segments.
                Some(Refusal::TooManySges) => 19 + rng.below(60) as u32,
                _ if i == 0 => match rng.below(4) {
                    0 => rng.below(L2 as u64) as u32,
                    1 => L2 as u32,
                    _ => 19 + rng.below(180) as u32,
                },
                _ if rng.chance(8) => 0,
                _ => 1 + rng.below(100) as u32,
            };
            (len, rng.next() as u32, 0)
        })
        .collect();
    let tso = match refuse {
        Some(Refusal::TsoShortHeader) => Some(1 + rng.below(L2_MIN as u64 - 1) as usize),
        Some(_) => None,
        None => rng.chance(5).then(|| L2_MIN + rng.below((q.max_tso_header - L2_MIN + 1) as u64) as usize),
    };
    if let Some(hdr) = tso {
        let mss = 64 + rng.below(9000) as u16;
        // No inline payload on TSOs: where the headers end exactly at the
        // ring's end, libmlx5 starts the inline segment at the ring's end
        // itself (the misplacement in `check_list`) and writes past its
        // buffer, which would corrupt this process.
        let inline = false;
        for s in &mut sges {
            s.2 = rng.below((payload - s.0 as usize) as u64) as usize;
        }
        let hdr_off = rng.below((payload - hdr) as u64) as usize;
        return Req {
            sges,
            tso: Some((hdr_off, hdr, mss)),
            signaled: rng.chance(2),
            solicited: rng.chance(4),
            fence: rng.chance(8),
            csum: rng.chance(2),
            inline,
        };
    }
    let total: usize = sges.iter().map(|s| s.0 as usize).sum();
    if total < L2 {
        // The device's minimum inline headers must be in the packet.
        let last = sges.last_mut().unwrap();
        last.0 += (L2 - total) as u32;
    }
    let total: usize = sges.iter().map(|s| s.0 as usize).sum();
    let rest = (total - q.min_inline) as u32;
    let inline = match refuse {
        Some(Refusal::InlineTooLong) => {
            // Grow the last entry past max_inline_data.
            if rest <= q.max_inline {
                sges.last_mut().unwrap().0 += q.max_inline - rest + 1 + rng.below(40) as u32;
            }
            true
        }
        Some(Refusal::TooManySges) | Some(Refusal::TsoShortHeader) => false,
        None => rest <= q.max_inline && rng.chance(3),
    };
    // Where each entry lies in the payload (which libmlx5 reads: headers, inline data).
    for s in &mut sges {
        s.2 = rng.below((payload - s.0 as usize) as u64) as usize;
    }
    Req {
        sges,
        tso: None,
        signaled: rng.chance(2),
        solicited: rng.chance(4),
        fence: rng.chance(8),
        csum: rng.chance(2),
        inline,
    }
}

/// The request as the crate's verbs request (what `Qp::post_send` hands
/// to `ibv_post_send`); its TSO headers from `payload`.
pub(super) fn verbs_wr<'a>(r: &Req, sges: &'a [Sge], payload: &'a [u8]) -> SendWr<'a> {
    let mut flags = SendFlags::empty();
    for (on, f) in [
        (r.signaled, SendFlags::SIGNALED),
        (r.solicited, SendFlags::SOLICITED),
        (r.fence, SendFlags::FENCE),
        (r.csum, SendFlags::IP_CSUM),
        (r.inline, SendFlags::INLINE),
    ] {
        if on {
            flags = flags.union(f);
        }
    }
    match r.tso {
        Some((off, len, mss)) => SendWr::tso(sges, &payload[off..off + len], mss).flags(flags),
        None => SendWr::send(sges).flags(flags),
    }
}

/// The packet cut as a direct-verbs user cuts it: the first `min_inline`
/// bytes (the Ethernet segment's headers), then the rest as pieces
/// (length, lkey, address) of the gather list, zero-length ones included.
pub(super) fn cut(r: &Req, base: *const u8, min_inline: usize) -> (Vec<u8>, Vec<(u32, u32, u64)>) {
    if let Some((off, len, _)) = r.tso {
        // TSO: the headers are their own; every entry is payload.
        // SAFETY: inside the payload buffer.
        let hdr = unsafe { std::slice::from_raw_parts(base.add(off), len) }.to_vec();
        return (hdr, r.sges.iter().map(|&(l, k, o)| (l, k, base as u64 + o as u64)).collect());
    }
    let mut hdr = Vec::new();
    let mut rest = Vec::new();
    for &(len, lkey, off) in &r.sges {
        let take = (min_inline - hdr.len()).min(len as usize);
        // SAFETY: the entry lies inside the payload buffer.
        hdr.extend_from_slice(unsafe { std::slice::from_raw_parts(base.add(off), take) });
        if take < len as usize || take == 0 {
            rest.push((len - take as u32, lkey, base as u64 + (off + take) as u64));
        }
    }
    (hdr, rest)
}

/// The control flags of request `r` on `q`.
pub(super) fn ctrl_flags(q: &Queue, r: &Req) -> CtrlFlags {
    let mut flags = CtrlFlags::empty();
    if r.signaled || q.sig_all {
        flags = flags.union(CtrlFlags::CQ_UPDATE);
    }
    if r.solicited {
        flags = flags.union(CtrlFlags::SOLICITED);
    }
    if r.fence {
        flags = flags.union(CtrlFlags::FENCE);
    }
    flags
}

/// The checksum requests of `r`.
pub(super) fn csum_flags(r: &Req) -> CsumFlags {
    if r.csum {
        CsumFlags::L3.union(CsumFlags::L4)
    } else {
        CsumFlags::NONE
    }
}

/// Adds the packet's pieces after the headers (inline when `r` asks) and
/// finishes the WQE; `post` rings the doorbell with it.
pub(super) fn finish_ours(mut w: EthWqe<'_>, r: &Req, rest: &[(u32, u32, u64)], post: Option<&mut Recorder>) {
    if r.inline {
        let mut bytes = Vec::new();
        for &(len, _, addr) in rest {
            // SAFETY: inside the payload buffer.
            bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) });
        }
        w = w.inline(&bytes);
    } else {
        for &(len, lkey, addr) in rest {
            // SAFETY: the ring is never handed to a device: the address is
            // only compared.
            w = unsafe { w.data(len, lkey, addr) };
        }
    }
    match post {
        Some(rec) => w.post(rec),
        None => w.finish(),
    };
}

/// Writes one request through `send_eth`; `post` rings the doorbell with it.
fn write_ours(q: &mut Queue, r: &Req, base: *const u8, mutate: bool, post: Option<&mut Recorder>) {
    let flags = ctrl_flags(q, r);
    let mut csum = csum_flags(r);
    if mutate {
        // The mutation check: the L4 checksum request flipped.
        csum = if r.csum { CsumFlags::L3 } else { CsumFlags::L4 };
    }
    let (hdr, rest) = cut(r, base, q.min_inline);
    let w = match r.tso {
        Some((_, _, mss)) => q.sq.send_tso(flags, csum, mss, &hdr),
        None => q.sq.send_eth(flags, csum, &hdr),
    };
    finish_ours(w, r, &rest, post);
}

/// The fields of a raw packet SEND (byte ranges) and whether each is
/// compared, from `mlx5dv.h`'s segment layouts and the request alone.
pub(super) fn layout(r: &Req, base: *const u8, min_inline: usize) -> Vec<(String, usize, usize, bool)> {
    let mut v: Vec<(String, usize, usize, bool)> = Vec::new();
    let mut f = |name: &str, len: usize, compared: bool| {
        let at = v.last().map_or(0, |l| l.2);
        v.push((name.to_string(), at, at + len, compared));
    };
    for (name, len) in [
        ("ctrl.opmod_idx_opcode", 4),
        ("ctrl.qpn_ds", 4),
        ("ctrl.signature", 1),
        ("ctrl.dci_stream_channel_id", 2),
        ("ctrl.fm_ce_se", 1),
        ("ctrl.imm", 4),
        ("eth.rsvd0", 4),
        ("eth.cs_flags", 1),
        ("eth.rsvd1", 1),
        ("eth.mss", 2),
        ("eth.rsvd2", 4),
        ("eth.inline_hdr_sz", 2),
    ] {
        f(name, len, true);
    }
    // Two header bytes in the first 16 of the segment; 16 more after it
    // when the minimum is L2 (the segment is then 32 bytes).
    f("eth.inline_hdr_start", 2, true);
    if let Some((_, len, _)) = r.tso {
        // TSO headers from byte 14 of the segment on, in whole units.
        f("eth.inline_hdr (TSO)", len - 2, true);
        let pad = (len - 2).next_multiple_of(16) - (len - 2);
        // The segment's first 32 bytes are zeroed by libmlx5 (memset);
        // MASK beyond: libmlx5 (`set_tso_eth_seg`) copies the headers only,
        // the rest of their last unit keeps what the ring held; the device
        // reads inline_hdr_sz bytes. rrddmma writes zeros.
        let in_seg = 32usize.saturating_sub(14 + len).min(pad);
        f("eth.inline_hdr padding", in_seg, true);
        f("eth.inline_hdr padding (past the segment's 32 bytes)", pad - in_seg, false);
    } else if min_inline == L2 {
        f("eth.inline_hdr", 16, true);
    }
    let (_, rest) = cut(r, base, min_inline);
    if r.inline {
        let len: usize = rest.iter().map(|p| p.0 as usize).sum();
        if len > 0 {
            f("inline.byte_count", 4, true);
            f("inline.data", len, true);
            // MASK: libmlx5 (`set_data_inl_seg`) does not pad inline data:
            // the bytes up to the next 16-byte boundary keep what the ring
            // held; the device reads byte_count bytes only. rrddmma writes zeros.
            let pad = (4 + len).next_multiple_of(16) - (4 + len);
            f("inline.padding", pad, false);
        }
    } else {
        for (i, _) in rest.iter().filter(|p| p.0 != 0).enumerate() {
            f(&format!("data[{i}].byte_count"), 4, true);
            f(&format!("data[{i}].lkey"), 4, true);
            f(&format!("data[{i}].addr"), 8, true);
        }
    }
    v
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct EthStats {
    pub queues: usize,
    pub no_min_inline_queues: usize,
    pub lists: usize,
    pub requests: usize,
    pub csum: usize,
    pub tso: usize,
    pub inline: usize,
    pub gathers: usize,
    pub split_headers: usize,
    pub refused: BTreeMap<&'static str, usize>,
    pub wrapped_lists: usize,
    pub index_wraps: usize,
    pub blueflame: usize,
    pub doorbells: usize,
    /// Lists whose refused inline request made libmlx5 ring with that
    /// request's stale control bytes (the finding masked in `check_list`).
    pub stale_doorbells: usize,
    /// TSOs whose headers wrapped the ring, where libmlx5 misplaces the
    /// segments after them (the finding masked in `check_list`).
    pub tso_wrap_findings: usize,
    /// The mutation (if asked for) was applied.
    pub mutated: bool,
}

impl EthStats {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} requests in {} lists on {} raw packet queues ({} with no minimum inline headers); {} TSO, {} with \
             IP_CSUM, {} inline, {} gathering several entries, {} with the headers split across entries; {} \
             lists across the ring's end, {} across the 16-bit WQE index, {} BlueFlame copies, {} 8-byte \
             doorbells; refused by both at the same request: ",
            self.requests,
            self.lists,
            self.queues,
            self.no_min_inline_queues,
            self.tso,
            self.csum,
            self.inline,
            self.gathers,
            self.split_headers,
            self.wrapped_lists,
            self.index_wraps,
            self.blueflame,
            self.doorbells
        );
        for (i, (k, n)) in self.refused.iter().enumerate() {
            let _ = write!(s, "{}{n} {k}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(
            s,
            " ({} of them after posted requests, where libmlx5 rang the doorbell with the refused WQE's \
             unwritten control bytes: masked, ours checked against the last posted WQE)",
            self.stale_doorbells
        );
        let _ = write!(
            s,
            "; {} TSOs with headers across the ring's end, where libmlx5 puts the payload's segments 32 bytes \
             past where the WQE's DS count ends them (compared up to the headers)",
            self.tso_wrap_findings
        );
        s
    }
}

/// Runs the comparison; the first mismatch ends it.
pub fn check(mutation: Mutation) -> Result<EthStats, Box<Mismatch>> {
    let _one_at_a_time = super::batch::exclusive();
    let mut rng = Rng(SEED ^ 0xe7_4e72);
    let mut payload = vec![0u8; PAYLOAD];
    fill(&mut payload, rng.next());
    let base = payload.as_ptr();
    let mut stats = EthStats::default();
    // Our writer's refusals are panics (programming errors): kept quiet here.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut result = Ok(());
    'queues: for qi in 0..QUEUES {
        let mut q = Queue::new(qi, &mut rng);
        stats.queues += 1;
        stats.no_min_inline_queues += usize::from(q.min_inline == 0);
        for _ in 0..super::build::scaled(LISTS_PER_QUEUE) {
            let n = 1 + rng.below(4) as usize;
            let bad = rng.chance(30).then(|| rng.below(n as u64) as usize);
            let mut reqs: Vec<Req> = (0..n)
                .map(|i| {
                    let refuse = (bad == Some(i)).then(|| match rng.below(3) {
                        0 if q.max_inline < 200 => Refusal::InlineTooLong,
                        1 => Refusal::TsoShortHeader,
                        _ => Refusal::TooManySges,
                    });
                    random_req(&q, &mut rng, payload.len(), refuse)
                })
                .collect();
            // TSOs ahead of SENDs in a list: libmlx5 carries the gather
            // position a SEND's inline headers ended at into a TSO after it
            // in the same call (`sg_copy_ptr`, set only by
            // `copy_eth_inline_headers`) and drops or cuts that TSO's
            // first entries (`tso_after_send_in_one_call_loses_entries`).
            reqs.sort_by_key(|r| r.tso.is_none());
            let mutate = mutation == Mutation::EthCsum && !stats.mutated;
            if let Err(m) = check_list(&mut q, &reqs, base, stats.lists, mutate, &mut stats) {
                result = Err(m);
                break 'queues;
            }
            stats.lists += 1;
        }
    }
    std::panic::set_hook(hook);
    drop(payload);
    result.map(|()| stats)
}

fn check_list(
    q: &mut Queue,
    reqs: &[Req],
    base: *const u8,
    list: usize,
    mutate: bool,
    stats: &mut EthStats,
) -> Result<(), Box<Mismatch>> {
    let kind = |r: &Req| {
        let op = if r.tso.is_some() { "TSO" } else { "SEND" };
        format!("raw packet {op}{}{}", if r.csum { " IP_CSUM" } else { "" }, if r.inline { " INLINE" } else { "" })
    };
    let at = |i: usize| format!("list {list} request {i}");
    let l = lib();

    // SAFETY: `base` is the payload buffer of `check`, `PAYLOAD` bytes,
    // alive and unwritten during the list.
    let payload = unsafe { std::slice::from_raw_parts(base, PAYLOAD) };
    // libmlx5: the crate's verbs requests, linked, through mlx5_post_send.
    let sges: Vec<Vec<Sge>> = reqs
        .iter()
        .map(|r| r.sges.iter().map(|&(len, lkey, off)| Sge::from_raw(base as u64 + off as u64, len, lkey)).collect())
        .collect();
    let mut raw: Vec<ffi::ibv_send_wr> =
        reqs.iter().zip(&sges).map(|(r, s)| *verbs_wr(r, s, payload).as_raw()).collect();
    for i in 1..raw.len() {
        let next: *mut ffi::ibv_send_wr = &mut raw[i];
        raw[i - 1].next = next;
    }
    let first = q.sq.cur_post();
    let off_before = q.bf_offset as usize;
    let mut bad_index: c_int = -1;
    // SAFETY: the library's QP between lists; the requests' entries point
    // into the live payload buffer, which libmlx5 reads (headers, inline).
    let rc = unsafe {
        (l.set_prefer_bf)(c_int::from(q.prefer_bf));
        (l.before)(q.qp);
        (l.eth_post)(q.qp, q.min_inline as u32, raw.as_mut_ptr(), &mut bad_index)
    };
    let mut after = [0u32; 3];
    // SAFETY: the library's QP; three words out.
    unsafe { (l.after)(q.qp, after.as_mut_ptr()) };
    let [their_pi, their_dbrec, their_off_after] = after;
    q.bf_offset = their_off_after;

    // Ours: as a direct-verbs user writes the same packets.
    let posted = if rc == 0 { reqs.len() } else { bad_index as usize };
    let by_post = rc == 0 && list % 2 == 1;
    let mut rec = Recorder::default();
    let mut starts = Vec::new();
    for (i, r) in reqs.iter().enumerate().take(posted) {
        starts.push(q.sq.cur_post());
        let last = i + 1 == reqs.len();
        let m = mutate && !stats.mutated;
        stats.mutated |= m;
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            write_ours(q, r, base, m, if last && by_post { Some(&mut rec) } else { None })
        }));
        if ok.is_err() {
            return Err(Mismatch::value(&kind(r), &at(i), "post", "accepted", "refused (panic)").into());
        }
        stats.requests += 1;
        stats.csum += usize::from(r.csum);
        stats.tso += usize::from(r.tso.is_some());
        stats.inline += usize::from(r.inline);
        let (_, rest) = cut(r, base, q.min_inline);
        stats.gathers += usize::from(rest.iter().filter(|p| p.0 != 0).count() > 1);
        stats.split_headers += usize::from(q.min_inline == L2 && (r.sges[0].0 as usize) < L2);
    }
    if rc != 0 {
        let r = &reqs[posted];
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write_ours(q, r, base, false, None)));
        if refused.is_ok() {
            return Err(Mismatch::value(
                &kind(r),
                &at(posted),
                "post",
                format!("refused ({})", std::io::Error::from_raw_os_error(rc)),
                "accepted",
            )
            .into());
        }
        let what = if r.tso.is_some() {
            "TSO headers shorter than an Ethernet header"
        } else if r.sges.len() as u32 > q.max_gs {
            "past max_send_sge"
        } else {
            "inline past max_inline_data"
        };
        *stats.refused.entry(what).or_default() += 1;
    }
    if !by_post {
        q.sq.ring(&mut rec);
    }
    let ours_pi = q.sq.cur_post();
    if (first & (q.wqe_cnt - 1)) + ours_pi.wrapping_sub(first) > q.wqe_cnt {
        stats.wrapped_lists += 1;
    }
    if ours_pi >> 16 != first >> 16 {
        stats.index_wraps += 1;
    }

    // Each WQE, byte for byte (masked fields aside).
    let theirs_ring = q.their_ring();
    let ours_ring = q.ours.ring.bytes();
    for (i, r) in reqs.iter().enumerate().take(posted) {
        let mut lay = layout(r, base, q.min_inline);
        let bbs = lay.last().map_or(0, |x| x.2).div_ceil(64);
        let theirs = Queue::blocks(theirs_ring, q.wqe_cnt, starts[i], bbs);
        if let Some(p) = tso_wrap(q, r, starts[i]) {
            // MASK (libmlx5 finding): when a TSO's headers wrap the ring's
            // end, `set_tso_eth_seg` leaves its segment pointer at the
            // headers' end and `mlx5_post_send` then adds the Ethernet
            // segment's 32 bytes again: the data or inline segments land 32
            // bytes past where the WQE's DS count (which is right) ends
            // them, partly in the next WQE's blocks, which overwrites them,
            // and the WQE's last 32 bytes keep what the ring held: the device
            // would read stale bytes as the payload's segments. Compared:
            // control, Ethernet segment and headers; ours places the
            // segments after them (`tso_wrap` below).
            lay.retain(|f| f.2 <= p);
            stats.tso_wrap_findings += 1;
        }
        let ours = Queue::blocks(ours_ring, q.wqe_cnt, starts[i], bbs);
        if let Some((field, byte, t, o)) = first_diff(&lay, &theirs, &ours) {
            return Err(Mismatch::at_byte(kind(r), at(i), field, byte, t, o));
        }
    }
    let last_at = at(posted.saturating_sub(1));
    let last_kind = kind(&reqs[posted.saturating_sub(1)]);
    let value = |field: &str, t: u32, o: u32| Mismatch::same(&last_kind, &last_at, field, t, o);
    value("producer index (sq.cur_post)", their_pi, ours_pi)?;
    // SAFETY: the record is 4 aligned bytes of `dbrec`.
    let ours_dbrec = unsafe { q.ours.dbrec.as_mut_ptr().add(4).cast::<Be32>().read() }.get();
    value("doorbell record", their_dbrec, ours_dbrec)?;

    // What libmlx5 stored in the BlueFlame page: whole 8-byte words from the offset.
    let their_db = bf_written(q.bf_page(), off_before);
    let len = their_db.len();
    // Ours: barrier, record, wc_start, 8-byte stores, flush (nothing when
    // no request was posted).
    let ops = &rec.ops;
    if posted == 0 {
        value("bytes written to the BlueFlame page (nothing posted)", len as u32, 0)?;
        if !ops.is_empty() {
            return Err(Mismatch::value(&last_kind, &last_at, "doorbell sequence", "none", format!("{ops:?}")).into());
        }
        return Ok(());
    }
    let (ours_off, ours_db) = doorbell_writes(ops, their_dbrec)
        .map_err(|(theirs, ours)| Box::new(Mismatch::value(&last_kind, &last_at, "doorbell sequence", theirs, ours)))?;
    // MASK (doorbell-only registers, uuarn 0): libmlx5 alternates the two
    // halves even without BlueFlame, rrddmma stores at the first (send.rs).
    if !q.db_only {
        value("BlueFlame offset written", off_before as u32, ours_off as u32)?;
        value("BlueFlame offset after the doorbell", their_off_after, q.sq.bf_offset())?;
    }
    if rc != 0 && reqs[posted].sges.len() as u32 <= q.max_gs {
        // MASK (libmlx5 finding): `mlx5_post_send` checks the entry count
        // before it moves its control-segment pointer to the next WQE, and
        // everything else after: inline data past max_inline_data
        // (`set_data_inl_seg`), TSO headers shorter than an Ethernet header
        // (`set_tso_eth_seg`). For those it rings the doorbell for the
        // requests before the refused one (`post_send_db(.., ctrl)`) with the
        // refused WQE's first 8 bytes: ring contents it never wrote
        // (opmod_idx_opcode, qpn_ds), and chooses BlueFlame by its partial
        // size. rrddmma rings with the last posted WQE, which must be what
        // libmlx5 wrote there.
        let lay = layout(&reqs[posted - 1], base, q.min_inline);
        let bbs = lay.last().map_or(0, |x| x.2).div_ceil(64);
        let wqe = Queue::blocks(q.their_ring(), q.wqe_cnt, starts[posted - 1], bbs);
        if let Some((field, byte, t, o)) = first_diff(&lay[..2], &wqe[..8], &ours_db[..8]) {
            return Err(Mismatch::at_byte(last_kind, last_at, format!("doorbell write: {field}"), byte, t, o));
        }
        stats.stale_doorbells += 1;
        return retire(q, &starts);
    }
    value("doorbell kind (bytes written to the BlueFlame page)", their_db.len() as u32, ours_db.len() as u32)?;
    if ours_db.len() == 8 {
        stats.doorbells += 1;
    } else {
        stats.blueflame += 1;
    }
    let last = &reqs[posted - 1];
    let mut lay = layout(last, base, q.min_inline);
    if let Some(p) = tso_wrap(q, last, *starts.last().unwrap()) {
        // MASK: the BlueFlame copy of such a WQE (the finding above) holds
        // libmlx5's misplaced segments; compared up to them.
        lay.retain(|f| f.2 <= p);
    }
    if let Some((field, byte, t, o)) = first_diff(&lay, their_db, &ours_db) {
        return Err(Mismatch::at_byte(last_kind, last_at, format!("BlueFlame/doorbell write: {field}"), byte, t, o));
    }
    retire(q, &starts)
}

/// For a TSO whose headers cross the ring's end, where libmlx5 misplaces
/// the segments after them: the WQE offset of those segments.
pub(super) fn tso_wrap(q: &Queue, r: &Req, start: u32) -> Option<usize> {
    let (_, len, _) = r.tso?;
    let slot_off = (start & (q.wqe_cnt - 1)) as usize * 64;
    // The headers start at byte 14 of the Ethernet segment, 16 into the WQE.
    let wraps = slot_off + 30 + len > q.wqe_cnt as usize * 64;
    wraps.then(|| 32 + (len - 2).next_multiple_of(16))
}

/// Everything completes: retire up to the list's last posted WQE.
pub(super) fn retire(q: &mut Queue, starts: &[u32]) -> Result<(), Box<Mismatch>> {
    let done = q.cq.req(q.sq.qpn(), *starts.last().unwrap() as u16);
    assert!(q.sq.retire(&done), "the list's last WQE retires");
    assert_eq!(q.sq.available(), q.wqe_cnt, "the ring is empty again");
    Ok(())
}

/// The finding behind the TSO ordering in `check`, shown on one queue: a
/// SEND whose first entry is exactly the 18 inline header bytes, then a TSO
/// of two entries, in one `ibv_post_send`. Returns libmlx5's and our DS
/// count of the TSO WQE and the byte count of its first data segment on
/// each side.
pub fn tso_after_send() -> ((u8, u32), (u8, u32)) {
    let _one_at_a_time = super::batch::exclusive();
    let mut rng = Rng(SEED ^ 0x75_0a);
    // A queue of two entries or more, 64-byte TSO headers, away from the ring's end.
    let mut q = (1..)
        .map(|i| Queue::new(i, &mut rng))
        .find(|q| q.max_gs >= 2 && q.max_tso_header == 64 && (q.sq.cur_post() & (q.wqe_cnt - 1)) + 8 < q.wqe_cnt)
        .expect("some queue fits");
    q.min_inline = L2;
    let payload = vec![0x5au8; 256];
    let base = payload.as_ptr();
    let send = Req {
        sges: vec![(L2 as u32, 1, 0), (40, 2, 32)],
        tso: None,
        signaled: false,
        solicited: false,
        fence: false,
        csum: false,
        inline: false,
    };
    let tso = Req { sges: vec![(100, 3, 64), (50, 4, 200)], tso: Some((0, 54, 1000)), ..send.clone() };
    let l = lib();
    let sges: Vec<Vec<Sge>> = [&send, &tso]
        .iter()
        .map(|r| r.sges.iter().map(|&(len, lkey, off)| Sge::from_raw(base as u64 + off as u64, len, lkey)).collect())
        .collect();
    let mut raw: Vec<ffi::ibv_send_wr> =
        [&send, &tso].iter().zip(&sges).map(|(r, s)| *verbs_wr(r, s, &payload).as_raw()).collect();
    let next: *mut ffi::ibv_send_wr = &mut raw[1];
    raw[0].next = next;
    let first = q.sq.cur_post();
    let mut bad: c_int = -1;
    // SAFETY: the library's QP; the entries and headers lie in `payload`.
    let rc = unsafe { (l.eth_post)(q.qp, L2 as u32, raw.as_mut_ptr(), &mut bad) };
    assert_eq!(rc, 0, "libmlx5 posts both");
    write_ours(&mut q, &send, base, false, None);
    let at = q.sq.cur_post();
    write_ours(&mut q, &tso, base, false, None);
    assert_eq!(at, first + 1, "the SEND takes one block");
    let theirs = Queue::blocks(q.their_ring(), q.wqe_cnt, at, 2);
    let ours = Queue::blocks(q.ours.ring.bytes(), q.wqe_cnt, at, 2);
    // The first data segment follows control (16), Ethernet segment and
    // headers (16 + 64 for 54 header bytes).
    let seg = |w: &[u8]| (w[7] & 0x3f, u32::from_be_bytes(w[96..100].try_into().unwrap()));
    (seg(&theirs), seg(&ours))
}
