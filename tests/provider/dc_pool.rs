//! The DCI pool's posts against libmlx5: the policy state machine of
//! `rrddmma::wrap::dc` (`DcSched`) picks the DCI and stream of each request
//! to one of 32 targets, under each policy, with completions from a model
//! (each channel completes in order; injected errors flush a channel,
//! which is then recovered). Each request is written twice, on the DCI the
//! policy picked:
//! - by libmlx5, on one of four provider DCIs with streams of the library
//!   build (`h_make_sq`, kind 3): `ibv_wr_*` + `mlx5dv_wr_set_dc_addr_stream`
//!   with the target's AH, DCT number and key and the policy's stream
//!   (through `DciBatch::post_raw`, which calls those entries);
//! - by rrddmma's typed DC builders (`SqRing::dc(&target).stream(s)`) on a
//!   ring of ordinary memory per DCI, as the direct path of a pool posts.
//!
//! Compared: every WQE's bytes (fields and masks as send.rs's `layout`)
//! and the producer index of the DCI's ring. `Mutation::PoolStream`: our
//! side's first request goes on the policy's stream XOR 1.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::c_int;
use std::ptr::NonNull;

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::dc::DciBatch;
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::sq::{SqRing, SqTransport};
use rrddmma::prim::{BatchQp, QpCaps, QpType, RemoteAddr, SendWr, Sge, WrBatch};
use rrddmma::wrap::dc::{Channel, DcPolicy, DcSched, Outcome, SchedShape};

use super::build::{library_fn, splitmix, Aligned, LOG_DCI_STREAMS};
use super::send::{first_diff, layout, op_name, Request, F_SIGNALED, READ, SEND, WRITE};
use super::{Mismatch, Mutation};

#[repr(C)]
struct MQp {
    _opaque: [u8; 0],
}

struct Lib {
    make_sq: unsafe extern "C" fn(c_int, u32, u32, c_int, c_int, u32, u32, c_int, u64) -> *mut MQp,
    qp_ex: unsafe extern "C" fn(*mut MQp) -> *mut ffi::ibv_qp_ex,
    dv_qp: unsafe extern "C" fn(*mut MQp) -> *mut ffi::mlx5dv_qp_ex,
    sq_buf: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    after: unsafe extern "C" fn(*mut MQp, *mut u32),
    ah: unsafe extern "C" fn(u32, *const u8) -> *mut ffi::ibv_ah,
}

fn lib() -> Lib {
    // SAFETY: each entry is the mlx5_provider.c function of the signature
    // its field gives (as batch.rs's).
    unsafe {
        Lib {
            make_sq: library_fn("h_make_sq"),
            qp_ex: library_fn("h_qp_ex"),
            dv_qp: library_fn("h_dv_qp"),
            sq_buf: library_fn("h_sq_buf"),
            after: library_fn("h_after"),
            ah: library_fn("h_ah"),
        }
    }
}

const DCIS: u16 = 4;
const WQE_CNT: u32 = 64;
const TARGETS: u32 = 32;

/// A target: its AH's address vector (as `mlx5_create_ah` leaves one: key,
/// DCT number and reserved bytes zero), DCT number and key.
struct Target {
    av: [u8; 48],
    dctn: u32,
    key: u64,
}

/// One DCI on both sides.
struct Dci {
    theirs: *mut MQp,
    batch: BatchQp,
    sq: SqRing,
    cq: crate::mlx5_support::SoftCq,
    buf: Aligned,
    _dbrec: Aligned,
    _bf: Aligned,
}

impl Dci {
    fn new(l: &Lib, qpn: u32, seed: u64) -> Dci {
        // SAFETY: the library's constructor: a DCI with streams (kind 3),
        // no BlueFlame, the ring filled from `seed`.
        let theirs = unsafe { (l.make_sq)(3, qpn, WQE_CNT, 4, 64, 0, 0, 0, seed) };
        // SAFETY: a live provider QP of the library, never freed.
        let ex = NonNull::new(unsafe { (l.qp_ex)(theirs) }).unwrap();
        let caps = QpCaps::default().max_send_sge(4).max_inline_data(64);
        // SAFETY: the provider's `ibv_qp_ex` with its DC entries; never freed, posted through here alone.
        let batch = unsafe { BatchQp::from_raw(ex, QpType::DRIVER, caps) };
        let mut buf = Aligned::new(WQE_CNT as usize * 64);
        let mut dbrec = Aligned::new(64);
        let mut bf = Aligned::new(64);
        // SAFETY: aligned buffers of the sizes asked, alive as long as the
        // ring (fields of the same struct); no device sees them.
        let mut sq = unsafe {
            SqRing::from_raw(buf.as_mut_ptr(), WQE_CNT, dbrec.as_mut_ptr().cast::<Be32>(), bf.as_mut_ptr(), 0, qpn)
        };
        // SAFETY: a DC initiator's queue, as the provider's.
        unsafe { sq.set_transport(SqTransport::DcInitiator) };
        sq.set_dci_streams(LOG_DCI_STREAMS);
        let cq = crate::mlx5_support::SoftCq::new(16);
        sq.bind_cq(&cq.ring);
        Dci { theirs, batch, sq, cq, buf, _dbrec: dbrec, _bf: bf }
    }
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// WQEs compared per policy.
    pub wqes: BTreeMap<&'static str, usize>,
    /// Distinct (DCI, stream) pairs posted on per policy.
    pub channels: BTreeMap<&'static str, usize>,
    /// Requests failed by an injected error, flushed after one, channels recovered.
    pub failed: usize,
    pub flushed: usize,
    pub recovered: usize,
    /// Times a policy said "busy" (held, quota, depth, recovering).
    pub busy: usize,
}

impl PoolStats {
    pub fn total(&self) -> usize {
        self.wqes.values().sum()
    }

    pub fn summary(&self) -> String {
        let per: Vec<String> = self
            .wqes
            .iter()
            .map(|(p, n)| format!("{p} {n} on {} channels", self.channels.get(p).copied().unwrap_or(0)))
            .collect();
        format!(
            "{} WQEs ({}); {} failed, {} flushed, {} channels recovered, {} busy answers",
            self.total(),
            per.join(", "),
            self.failed,
            self.flushed,
            self.recovered,
            self.busy
        )
    }
}

/// Runs `per_policy` requests under each policy; the first mismatch ends the check.
pub fn check(per_policy: usize, mutation: Mutation) -> Result<PoolStats, Box<Mismatch>> {
    let _one_at_a_time = super::batch::exclusive();
    let l = lib();
    let mut seed = 0xdc_9001u64;
    let targets: Vec<Target> = (0..TARGETS)
        .map(|_| {
            let mut av = [0u8; 48];
            // stat_rate_sl .. grh_gid_fl and rgid from the generator; key,
            // dqp_dct and reserved0 stay zero.
            for b in &mut av[12..] {
                *b = splitmix(&mut seed) as u8;
            }
            av[16..20].fill(0);
            Target { av, dctn: splitmix(&mut seed) as u32 & 0xff_ffff, key: splitmix(&mut seed) }
        })
        .collect();
    let policies = [DcPolicy::Dcs, DcPolicy::DcsQuota { quota: 3 }, DcPolicy::HwDcs, DcPolicy::Rand { seed: 0x5eed }];
    let mut stats = PoolStats::default();
    let mut first = true;
    for (pi, policy) in policies.into_iter().enumerate() {
        let streams: u16 = match policy {
            DcPolicy::HwDcs => 1 << LOG_DCI_STREAMS,
            DcPolicy::Rand { .. } => 8,
            _ => 2,
        };
        let shape = SchedShape { dcis: DCIS, streams, depth: 16, targets: TARGETS, wait_cap: TARGETS };
        let mut sched = DcSched::new(policy, shape);
        let mut dcis: Vec<Dci> =
            (0..DCIS).map(|i| Dci::new(&l, 0x70_0000 + (pi as u32) * 16 + u32::from(i), splitmix(&mut seed))).collect();
        let mut hw: BTreeMap<Channel, VecDeque<u64>> = BTreeMap::new();
        let mut failing: BTreeSet<Channel> = BTreeSet::new();
        let mut used: BTreeSet<Channel> = BTreeSet::new();
        let mut posted = 0usize;
        let mut step = 0u64;
        while posted < per_policy {
            step += 1;
            let r = splitmix(&mut seed);
            if step % 211 == 0 {
                let busy: Vec<Channel> = hw.iter().filter(|(_, q)| !q.is_empty()).map(|(c, _)| *c).collect();
                if !busy.is_empty() {
                    failing.insert(busy[(r >> 8) as usize % busy.len()]);
                }
            }
            if r % 3 < 2 {
                let target = ((r >> 2) % u64::from(TARGETS)) as u32;
                match sched.acquire(target, posted as u64) {
                    Ok(ticket) => {
                        hw.entry(ticket.channel).or_default().push_back(ticket.tag);
                        used.insert(ticket.channel);
                        let mutate = mutation == Mutation::PoolStream && first;
                        first = false;
                        let d = &mut dcis[usize::from(ticket.channel.dci)];
                        post_both(
                            &l,
                            d,
                            &targets[target as usize],
                            ticket.channel.stream,
                            ticket.tag,
                            &mut seed,
                            mutate,
                        )
                        .map_err(|mut m| {
                            m.kind = format!("DC pool ({}) {}", policy.name(), m.kind);
                            m.at = format!("request {posted} to target {target} on {}: {}", ticket.channel, m.at);
                            m
                        })?;
                        posted += 1;
                        *stats.wqes.entry(policy.name()).or_default() += 1;
                        continue;
                    }
                    Err(_) => stats.busy += 1,
                }
            }
            // A completion: the oldest request of a channel drawn at random.
            let busy: Vec<Channel> = hw.iter().filter(|(_, q)| !q.is_empty()).map(|(c, _)| *c).collect();
            if busy.is_empty() {
                continue;
            }
            let ch = busy[(r >> 16) as usize % busy.len()];
            let tag = hw.get_mut(&ch).and_then(VecDeque::pop_front).unwrap();
            let outcome = if failing.remove(&ch) {
                stats.failed += 1;
                Outcome::Failed
            } else if sched.is_errored(ch) {
                stats.flushed += 1;
                Outcome::Flushed
            } else {
                Outcome::Ok
            };
            let done = sched.complete(tag, outcome).expect("a tag in flight");
            if let Some(rc) = done.recover {
                sched.recovered(rc);
                stats.recovered += 1;
            }
        }
        stats.channels.insert(policy.name(), used.len());
    }
    Ok(stats)
}

/// Writes one request to `t` on stream `stream` of `d`, by libmlx5 and by
/// the typed builders, and compares the WQE and the producer index.
fn post_both(
    l: &Lib,
    d: &mut Dci,
    t: &Target,
    stream: u16,
    tag: u64,
    seed: &mut u64,
    mutate: bool,
) -> Result<(), Box<Mismatch>> {
    let r0 = splitmix(seed);
    let op = [WRITE, READ, SEND][(r0 % 3) as usize];
    let sge = ((r0 >> 8) as u32 % 4096 + 1, splitmix(seed) as u32, splitmix(seed));
    let remote = RemoteAddr { addr: splitmix(seed), rkey: splitmix(seed) as u32 };
    let req = Request {
        op,
        flags: F_SIGNALED,
        imm: 0,
        raddr: remote.addr,
        rkey: remote.rkey,
        swap: 0,
        compare_add: 0,
        sges: vec![sge],
        inline: Vec::new(),
        ud: None,
        dc: Some((t.dctn, t.key, stream, t.av.to_vec())),
    };
    let start = d.sq.cur_post();
    // libmlx5: ibv_wr_* + mlx5dv_wr_set_dc_addr_stream on the provider's DCI.
    let sges = [Sge::from_raw(sge.2, sge.0, sge.1)];
    let wr = match op {
        WRITE => SendWr::write(&sges, remote),
        READ => SendWr::read(&sges, remote),
        _ => SendWr::send(&sges),
    }
    .wr_id(tag)
    .signaled();
    // SAFETY: an AH slot of the library holding the target's address vector.
    let ah = NonNull::new(unsafe { (l.ah)(0, t.av.as_ptr()) }).unwrap();
    // SAFETY: the DCI's mlx5 view, of the same provider QP.
    let dv = NonNull::new(unsafe { (l.dv_qp)(d.theirs) }).unwrap();
    // SAFETY: the library's DCI (2^LOG_DCI_STREAMS streams) and AH, alive for
    // the whole run; nothing is ever read at the request's addresses.
    unsafe {
        let mut b = DciBatch::from_raw(WrBatch::from_raw(&d.batch), dv, Some(LOG_DCI_STREAMS));
        b.post_raw(&wr, ah, t.dctn, t.key, stream).expect("libmlx5 takes the request");
        b.complete().expect("libmlx5 completes the batch");
    }
    let mut after = [0u32; 3];
    // SAFETY: the library's QP; `after` has the three words it writes.
    unsafe { (l.after)(d.theirs, after.as_mut_ptr()) };
    // rrddmma: the typed DC builder on our ring of the same DCI.
    let flags = CtrlFlags::CQ_UPDATE;
    let index = super::dc_typed::write_typed(&mut d.sq, &req, flags, true, u16::from(mutate), None);
    let kind = format!("typed {} vs mlx5dv_wr_set_dc_addr_stream", op_name(op));
    let at = format!("WQE {start}");
    super::Mismatch::same(&kind, &at, "producer index", after[0], d.sq.cur_post())?;
    let lay = layout(&req, true);
    let len = lay.last().map_or(0, |f| f.2);
    let ring = WQE_CNT as usize * 64;
    let first = (start as usize % WQE_CNT as usize) * 64;
    // SAFETY: the provider's ring, `WQE_CNT` basic blocks, not written while read here.
    let their_ring = unsafe { std::slice::from_raw_parts((l.sq_buf)(d.theirs), ring) };
    let our_ring = d.buf.bytes();
    let theirs: Vec<u8> = (0..len).map(|b| their_ring[(first + b) % ring]).collect();
    let ours: Vec<u8> = (0..len).map(|b| our_ring[(first + b) % ring]).collect();
    if let Some((field, byte, t, o)) = first_diff(&lay, &theirs, &ours) {
        return Err(Mismatch::at_byte(kind, at, field, byte, t, o));
    }
    // Our ring: the WQE completes at once (the model's order is the policy's
    // business; the ring only needs its space back).
    d.cq.produce(d.sq.qpn(), rrddmma::mlx5dv::cqe::CqeOpcode::REQ, index);
    let c = d.cq.poll();
    assert!(d.sq.retire(&c), "our ring retires WQE {index}");
    Ok(())
}
