//! `SqRing::retire` against the device's view of the send queue: only a
//! requester completion of this QP, polled from the bound CQ ring after the
//! last one taken, naming the first block of an outstanding WQE frees
//! anything, and no outstanding WQE is ever overwritten.

mod mlx5_support;

use mlx5_support::SoftCq;
use proptest::prelude::*;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cqe::{Completion, CqeOpcode};
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::sq::SqRing;
use rrddmma::prim::RemoteAddr;

const QPN: u32 = 0x42;

/// A ring over test memory, and the memory.
struct Model {
    buf: Vec<u64>,
    _dbrec: Box<[Be32; 2]>,
    _bf: Vec<u64>,
    sq: SqRing,
    cq: SoftCq,
    /// Outstanding WQEs in posting order: free-running start, blocks, bytes.
    outstanding: Vec<(u32, u32, Vec<u8>)>,
}

impl Model {
    fn new(bbs: u32) -> Model {
        let mut buf = vec![0u64; bbs as usize * 8];
        let mut dbrec = Box::new([Be32::default(); 2]);
        let mut bf = vec![0u64; 1];
        // SAFETY: the buffers live in the model beside the ring (their heap
        // memory never moves) and no device reads them.
        let sq = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), bbs, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, QPN)
        };
        let mut sq = sq;
        let cq = SoftCq::new(16);
        sq.bind_cq(&cq.ring);
        Model { buf, _dbrec: dbrec, _bf: bf, sq, cq, outstanding: Vec::new() }
    }

    fn ring_bytes(&self, start: u32, blocks: u32) -> Vec<u8> {
        let all: Vec<u8> = self.buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let n = all.len();
        (0..blocks as usize * 64).map(|i| all[(start as usize * 64 + i) % n]).collect()
    }

    /// Posts a WQE of control + remote address + `data` data segments
    /// (1 to 5 blocks) if it fits; returns its start.
    fn post(&mut self, data: u32, tag: u64) -> Option<u32> {
        let blocks = (16 * (2 + data)).div_ceil(64);
        if self.sq.available() < blocks {
            return None;
        }
        let start = self.sq.cur_post();
        // An RDMA READ: control, remote address, `data` data segments.
        let mut w = self.sq.read(CtrlFlags::CQ_UPDATE, RemoteAddr { addr: tag, rkey: 1 });
        for i in 0..data {
            // SAFETY: no device reads this ring.
            w = unsafe { w.data(8, 2, tag + u64::from(i)) };
        }
        w.finish();
        assert_eq!(self.sq.cur_post().wrapping_sub(start), blocks);
        let bytes = self.ring_bytes(start, blocks);
        self.outstanding.push((start, blocks, bytes));
        Some(start)
    }

    /// A CQE the "device" writes, polled from the CQ ring.
    fn completion(&mut self, qpn: u32, op: CqeOpcode, counter: u32) -> Completion {
        self.cq.produce(qpn, op, counter as u16);
        self.cq.poll()
    }

    /// Retires a fresh CQE of `qpn`/`op`/`counter`.
    fn retire(&mut self, qpn: u32, op: CqeOpcode, counter: u32) -> bool {
        let c = self.completion(qpn, op, counter);
        self.sq.retire(&c)
    }

    /// The device completes the `k`-th outstanding WQE (and those before it).
    fn complete(&mut self, k: usize) {
        let (start, _, _) = self.outstanding[k];
        assert!(self.retire(QPN, CqeOpcode::REQ, start), "a genuine completion of WQE {start} is taken");
        self.outstanding.drain(..=k);
    }

    /// Every outstanding WQE still holds what was written; the free count
    /// matches the model.
    fn check(&self) {
        for (start, blocks, bytes) in &self.outstanding {
            assert_eq!(&self.ring_bytes(*start, *blocks), bytes, "outstanding WQE at {start} was overwritten");
        }
        let used: u32 = self.outstanding.iter().map(|w| w.1).sum();
        assert_eq!(self.sq.available(), self.sq.wqe_cnt() - used);
    }
}

#[test]
fn foreign_qpn_and_receive_completions_retire_nothing() {
    let mut m = Model::new(8);
    let a = m.post(1, 1).unwrap();
    for c in [
        m.completion(QPN + 1, CqeOpcode::REQ, a),
        m.completion(QPN, CqeOpcode::RESP_SEND, a),
        m.completion(QPN, CqeOpcode::RESP_ERR, a),
        m.completion(QPN, CqeOpcode::RESP_WR_IMM, a),
    ] {
        assert!(!m.sq.retire(&c), "{c:?} must not retire WQE {a}");
        m.check();
    }
    // An error completion of the requester does retire it.
    assert!(m.retire(QPN, CqeOpcode::REQ_ERR, a));
    m.outstanding.clear();
    m.check();
}

/// On a 4-block ring, a counter inside a 2-block WQE once made `available()`
/// underflow; it is refused now.
#[test]
fn a_counter_inside_a_multi_block_wqe_is_refused() {
    let mut m = Model::new(4);
    let a = m.post(5, 1).unwrap(); // 7 DS: 2 blocks
    let b = m.post(1, 2).unwrap(); // 1 block
    assert_eq!((a, b), (0, 2));
    assert!(!m.retire(QPN, CqeOpcode::REQ, a + 1), "block 1 is inside WQE 0");
    m.check();
    assert_eq!(m.sq.available(), 1);
    m.complete(0);
    m.check();
    assert_eq!(m.sq.available(), 3);
    m.complete(0);
    m.check();
}

#[test]
fn counters_wrap_with_the_ring_and_the_16_bit_index() {
    let mut m = Model::new(4);
    let mut retired = None;
    for i in 0..70_000u32 {
        let data = if i % 3 == 0 { 4 } else { 1 };
        m.post(data, u64::from(i)).expect("room after every completion");
        if i % 2 == 1 || m.sq.available() < 2 {
            let last = m.outstanding.len() - 1;
            retired = Some(m.outstanding[last].0);
            m.complete(last);
        }
        // Stale: the first block of a WQE already retired.
        if let Some(old) = retired {
            assert!(!m.retire(QPN, CqeOpcode::REQ, old), "WQE {old} was retired already");
        }
    }
    assert!(m.sq.cur_post() > 1 << 16, "the 16-bit WQE counter wrapped");
    m.check();
}

#[derive(Clone, Debug)]
enum Step {
    Post { data: u32 },
    Complete { pick: usize },
    ForeignQpn { pick: usize },
    Receive { pick: usize },
    MidWqe { pick: usize },
    Random { counter: u16 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u32..=8).prop_map(|data| Step::Post { data }),
        2 => any::<usize>().prop_map(|pick| Step::Complete { pick }),
        1 => any::<usize>().prop_map(|pick| Step::ForeignQpn { pick }),
        1 => any::<usize>().prop_map(|pick| Step::Receive { pick }),
        1 => any::<usize>().prop_map(|pick| Step::MidWqe { pick }),
        1 => any::<u16>().prop_map(|counter| Step::Random { counter }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random posts and random genuine and bogus completions: no outstanding
    /// WQE is ever overwritten, bogus completions change nothing, and the
    /// free count always matches the device's view.
    #[test]
    fn no_outstanding_wqe_is_ever_overwritten(log2 in 2u32..=4, steps in prop::collection::vec(step(), 1..400)) {
        let mut m = Model::new(1 << log2);
        for (i, s) in steps.into_iter().enumerate() {
            let before = m.sq.available();
            match s {
                Step::Post { data } => { m.post(data, i as u64); }
                Step::Complete { pick } if !m.outstanding.is_empty() => {
                    let k = pick % m.outstanding.len();
                    m.complete(k);
                }
                Step::ForeignQpn { pick } if !m.outstanding.is_empty() => {
                    let start = m.outstanding[pick % m.outstanding.len()].0;
                    prop_assert!(!m.retire(QPN ^ 1, CqeOpcode::REQ, start));
                    prop_assert_eq!(m.sq.available(), before);
                }
                Step::Receive { pick } if !m.outstanding.is_empty() => {
                    let start = m.outstanding[pick % m.outstanding.len()].0;
                    prop_assert!(!m.retire(QPN, CqeOpcode::RESP_SEND, start));
                    prop_assert_eq!(m.sq.available(), before);
                }
                Step::MidWqe { pick } if !m.outstanding.is_empty() => {
                    let (start, blocks, _) = m.outstanding[pick % m.outstanding.len()];
                    for off in 1..blocks {
                        prop_assert!(!m.retire(QPN, CqeOpcode::REQ, start + off));
                    }
                    prop_assert_eq!(m.sq.available(), before);
                }
                Step::Random { counter } => {
                    let genuine = m.outstanding.iter().position(|w| w.0 as u16 == counter);
                    let took = m.retire(QPN, CqeOpcode::REQ, u32::from(counter));
                    prop_assert_eq!(took, genuine.is_some(), "counter {} taken iff it starts an outstanding WQE", counter);
                    if let Some(k) = genuine {
                        m.outstanding.drain(..=k);
                    }
                }
                _ => {}
            }
            m.check();
        }
    }
}

/// A genuine completion, already retired, offered again once the ring has
/// gone 65,536 blocks further: its 16-bit counter now names a live WQE. It
/// once freed that WQE; the ring now refuses it (it was polled before the
/// last completion the ring took).
#[test]
fn regression_stale_completion_after_the_16_bit_counter_wraps_frees_nothing() {
    let mut m = Model::new(4);
    let first = m.post(1, 0).unwrap();
    assert_eq!(first, 0);
    let old = m.completion(QPN, CqeOpcode::REQ, first);
    assert!(m.sq.retire(&old), "the genuine completion is taken once");
    m.outstanding.clear();
    // One-block WQEs, each completed, until the counter comes back to 0.
    while m.sq.cur_post() < 1 << 16 {
        m.post(1, 1).unwrap();
        m.complete(0);
    }
    let live = m.post(1, 2).unwrap();
    assert_eq!(live as u16, old.wqe_counter(), "the live WQE has the stale completion's counter");
    let before = m.sq.available();
    assert!(!m.sq.retire(&old), "a stale completion after the wrap must not free the live WQE");
    assert_eq!(m.sq.available(), before, "nothing freed");
    m.check();
    m.complete(0);
    m.check();
}

/// Completions written before a reset (polled before it and kept, or still
/// in the CQ, which libmlx5 does not clean under a direct view) name
/// counters the restarted ring hands out again. They once freed the new
/// WQEs; now they are refused and the new WQEs' own completions are taken.
#[test]
fn regression_completion_from_before_a_reset_frees_nothing() {
    let mut m = Model::new(8);
    let a = m.post(1, 1).unwrap();
    let b = m.post(1, 2).unwrap();
    let polled_before = m.completion(QPN, CqeOpcode::REQ, a);
    // The device wrote b's CQE too; nobody has polled it yet.
    m.cq.produce(QPN, CqeOpcode::REQ, b as u16);
    // The QP is reset: the device starts again at WQE 0.
    // SAFETY: the model's "device" restarts at 0; no device reads the ring.
    unsafe { m.sq.restart_after_reset(0, &m.cq.ring) };
    m.outstanding.clear();
    assert_eq!(m.sq.available(), 8, "outstanding WQEs forgotten");
    let n0 = m.post(1, 3).unwrap();
    let n1 = m.post(1, 4).unwrap();
    assert_eq!((n0, n1), (a, b), "the new WQEs reuse the old counters");
    assert!(!m.sq.retire(&polled_before), "a completion polled before the reset");
    let in_cq = m.cq.poll();
    assert_eq!(in_cq.wqe_counter(), b as u16);
    assert!(!m.sq.retire(&in_cq), "a completion written before the reset, polled after it");
    assert_eq!(m.sq.available(), 6, "nothing freed");
    m.check();
    m.complete(1);
    m.check();
}

/// A completion made up by hand, decoded from a CQE with `Cqe64::decode`,
/// or edited after polling frees nothing it did not name when polled.
#[test]
fn regression_made_up_or_edited_completion_frees_nothing() {
    use rrddmma::mlx5dv::be::Be16;
    use rrddmma::mlx5dv::cqe::Cqe64;
    let mut m = Model::new(8);
    let a = m.post(1, 1).unwrap();
    let b = m.post(1, 2).unwrap();
    assert!(!m.sq.retire(&Completion::default()), "made up by hand");
    let op = CqeOpcode::REQ.to_raw();
    let cqe = Cqe64 {
        sop_drop_qpn: Be32::new((u32::from(op) << 24) | QPN),
        wqe_counter: Be16::new(b as u16),
        op_own: op << 4,
        ..Cqe64::default()
    };
    let decoded = cqe.decode();
    assert_eq!((decoded.qpn(), decoded.wqe_counter()), (QPN, b as u16));
    assert!(!m.sq.retire(&decoded), "decoded, not polled");
    assert_eq!(m.sq.available(), 6);
    // A genuine completion of `a` (its fields cannot be edited: they are
    // read through accessors): it frees `a` only.
    let polled = m.completion(QPN, CqeOpcode::REQ, a);
    assert!(m.sq.retire(&polled));
    assert_eq!(m.sq.available(), 7, "only WQE a, which the CQE named, is freed");
    m.outstanding.remove(0);
    m.check();
}

/// Completions of a ring the SQ is not bound to, and any completion on a
/// ring never bound, free nothing.
#[test]
fn completions_of_another_or_no_bound_cq_free_nothing() {
    let mut m = Model::new(8);
    let a = m.post(1, 1).unwrap();
    let mut other = SoftCq::new(4);
    let foreign = other.req(QPN, a as u16);
    assert!(!m.sq.retire(&foreign), "another CQ ring");
    let mut buf = vec![0u64; 8 * 4];
    let mut dbrec = [Be32::default(); 2];
    let mut bf = vec![0u64; 1];
    // SAFETY: the buffers outlive the ring; no device reads them.
    let mut unbound = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), 4, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, QPN)
    };
    let pi = unbound.nop(CtrlFlags::CQ_UPDATE).finish();
    let c = other.req(QPN, pi);
    assert!(!unbound.retire(&c), "a ring never bound takes nothing");
    unbound.bind_cq(&other.ring);
    let c = other.req(QPN, pi);
    assert!(unbound.retire(&c), "bound, a fresh completion is taken");
    m.check();
}

/// `stream_of` names the stream of the WQE an error completion of the bound
/// ring reports (the stream `Dc::stream` gave it), and nothing for a
/// completion the ring would not take: another QP's, a receive, one that
/// points inside a multi-block WQE, a made-up one.
#[test]
fn stream_of_names_the_stream_of_an_error_completion() {
    use rrddmma::mlx5dv::seg::DatagramSeg;
    use rrddmma::mlx5dv::sq::SqTransport;
    let mut m = Model::new(8);
    // SAFETY: a model ring standing for a DCI's.
    unsafe { m.sq.set_transport(SqTransport::DcInitiator) };
    m.sq.set_dci_streams(16);
    let target = DatagramSeg::default();
    let mut at = Vec::new();
    for stream in [3u16, 0, 0xbeef] {
        at.push(m.sq.cur_post() as u16);
        // Control, DC address, remote address and two data segments: 2 blocks.
        let w = m.sq.dc(&target).stream(stream).read(CtrlFlags::CQ_UPDATE, RemoteAddr { addr: 0, rkey: 1 });
        // SAFETY: no device reads the model ring.
        unsafe { w.data(8, 1, 0x1000).data(8, 1, 0x2000) }.finish();
    }
    m.cq.produce(QPN, CqeOpcode::REQ_ERR, at[2]);
    let err = m.cq.poll();
    assert_eq!(m.sq.stream_of(&err), Some(0xbeef), "the error completion's WQE went on stream 0xbeef");
    m.cq.produce(QPN, CqeOpcode::REQ_ERR, at[0]);
    assert_eq!(m.sq.stream_of(&m.cq.poll()), Some(3));
    m.cq.produce(QPN + 1, CqeOpcode::REQ_ERR, at[0]);
    assert_eq!(m.sq.stream_of(&m.cq.poll()), None, "another QP's completion");
    m.cq.produce(QPN, CqeOpcode::RESP_SEND, at[0]);
    assert_eq!(m.sq.stream_of(&m.cq.poll()), None, "a receive completion");
    m.cq.produce(QPN, CqeOpcode::REQ_ERR, at[0] + 1);
    assert_eq!(m.sq.stream_of(&m.cq.poll()), None, "a counter inside a two-block WQE");
    assert_eq!(m.sq.stream_of(&Completion::default()), None, "a made-up completion");
}
