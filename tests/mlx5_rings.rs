//! Ring models for the direct-verbs queues, without hardware: a software CQE
//! producer drives the direct poller across many laps; a send queue of the
//! smallest size is forced to wrap and parsed back with the C structs; the
//! recorded doorbell sequence is libmlx5's.

mod mlx5_support;

use mlx5_support::SoftCq;
use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::be::{Be16, Be32, Be64};
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::{Completion, Cqe64, CqeOpcode};
use rrddmma::mlx5dv::mmio::{Op, Recorder};
use rrddmma::mlx5dv::seg::{CtrlFlags, WqeOpcode, INLINE_SEG};
use rrddmma::mlx5dv::sq::SqRing;
use rrddmma::mlx5dv::wqe::Wqe;
use rrddmma::prim::{RemoteAddr, WcStatus};

/// Data segments in the ring models.
trait Data<'s> {
    fn d(self, len: u32, lkey: u32, addr: u64) -> Wqe<'s, false>;
}

impl<'s, const I: bool> Data<'s> for Wqe<'s, I> {
    fn d(self, len: u32, lkey: u32, addr: u64) -> Wqe<'s, false> {
        // SAFETY: ring models: no device ever reads these rings, so the
        // addresses are only bytes to check.
        unsafe { self.data(len, lkey, addr) }
    }
}

/// A remote address.
fn at(addr: u64, rkey: u32) -> RemoteAddr {
    RemoteAddr { addr, rkey }
}

/// A CQ bound to `sq`.
fn bound_cq(sq: &mut SqRing) -> SoftCq {
    let cq = SoftCq::new(16);
    sq.bind_cq(&cq.ring);
    cq
}

/// Retires the WQE at `counter` with its requester completion, polled from `cq`.
fn retire(sq: &mut SqRing, cq: &mut SoftCq, counter: u16) -> bool {
    let c = cq.req(sq.qpn(), counter);
    sq.retire(&c)
}

/// A 64-byte-aligned zeroed buffer.
fn aligned(len: usize) -> Vec<u64> {
    vec![0u64; len.div_ceil(8)]
}

/// Tiny deterministic generator for test inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn cq_laps(cqe_size: u32) {
    const CNT: u32 = 16;
    let mut buf = aligned((CNT * cqe_size) as usize);
    let base = buf.as_mut_ptr().cast::<u8>();
    // Fresh CQ buffers hold op_own = 0xF0 (INVALID, owner 0).
    for i in 0..CNT {
        let off = (i * cqe_size) as usize + if cqe_size == 128 { 64 } else { 0 };
        // SAFETY: inside `buf`.
        unsafe { *base.add(off + 63) = 0xf0 };
    }
    let mut dbrec = [Be32::default(); 2];
    let mut uar = aligned(64);
    // SAFETY: buffers live until the end of the function; nothing else consumes.
    let mut cq = unsafe { CqRing::from_raw(base, CNT, cqe_size, dbrec.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x77) };
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let (mut produced, mut consumed) = (0u32, 0u32);
    let total = CNT * 60;
    let mut out = [Completion::default(); 8];
    while consumed < total {
        // The "hardware" writes a few CQEs, never overrunning the consumer.
        let burst = (rng.next() % 6) as u32;
        for _ in 0..burst {
            if produced == total || produced - consumed == CNT {
                break;
            }
            let slot = produced & (CNT - 1);
            let off = (slot * cqe_size) as usize + if cqe_size == 128 { 64 } else { 0 };
            let err = produced % 97 == 5;
            let op = if err { CqeOpcode::REQ_ERR } else { CqeOpcode::RESP_SEND }.to_raw();
            let owner = u8::from(produced & CNT != 0);
            let mut c = Cqe64 {
                byte_cnt: Be32::new(produced),
                timestamp: Be64::new(if err { 0x2015 } else { u64::from(produced) << 20 }),
                sop_drop_qpn: Be32::new((u32::from(op) << 24) | 0x00ab_cdef),
                wqe_counter: Be16::new(produced as u16),
                op_own: 0xf0,
                ..Cqe64::default()
            };
            // SAFETY: the entry is inside `buf`; the body first, the owner byte last.
            unsafe {
                std::ptr::write(base.add(off).cast::<Cqe64>(), c);
                c.op_own = (op << 4) | owner;
                std::ptr::write_volatile(base.add(off + 63), c.op_own);
            }
            produced += 1;
        }
        let want = 1 + (rng.next() % 8) as usize;
        let n = cq.poll(&mut out[..want]);
        for c in &out[..n] {
            assert_eq!(c.wqe_counter(), consumed as u16, "in order, none skipped");
            assert_eq!(c.qpn(), 0x00ab_cdef);
            if consumed % 97 == 5 {
                assert_eq!(
                    (c.opcode(), c.status(), c.vendor_err()),
                    (CqeOpcode::REQ_ERR, WcStatus::RETRY_EXC_ERR, 0x20)
                );
            } else {
                assert_eq!((c.opcode(), c.status(), c.byte_len()), (CqeOpcode::RESP_SEND, WcStatus::SUCCESS, consumed));
                assert_eq!(c.timestamp(), u64::from(consumed) << 20);
            }
            consumed += 1;
        }
        assert!(n <= (produced - (consumed - n as u32)) as usize);
        assert_eq!(cq.consumer_index(), consumed);
        if n > 0 {
            assert_eq!(dbrec[0].get(), consumed & 0xff_ffff, "consumer record");
        }
    }
    assert!(total / CNT >= 50, "many laps, owner bit flipping each");
    // Nothing new: the stale entries of the last lap are not valid.
    assert_eq!(cq.poll(&mut out), 0);
}

#[test]
fn cq_poller_across_laps_64_byte_cqes() {
    cq_laps(64);
}

#[test]
fn cq_poller_across_laps_128_byte_cqes() {
    cq_laps(128);
}

/// Reads `len` bytes of the ring starting `off` bytes into the WQE at BB `start`.
fn ring_bytes(ring: &[u8], start: u32, off: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ring[(start as usize * 64 + off + i) % ring.len()]).collect()
}

fn cast<T: Copy>(b: &[u8]) -> T {
    assert!(b.len() >= size_of::<T>());
    // SAFETY: `T` is a plain C struct; unaligned read of enough bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

#[test]
fn smallest_sq_wraps_and_parses_back_with_c_structs() {
    const BBS: u32 = 4; // 256 bytes: every WQE below crosses or touches the end sometime
    let mut buf = aligned((BBS * 64) as usize);
    let mut dbrec = [Be32::default(); 2];
    let mut bf = aligned(512);
    // SAFETY: buffers live until the end; the ring is their only user.
    let mut sq = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), BBS, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 256, 0x1234)
    };
    let mut cq = bound_cq(&mut sq);
    let mut rec = Recorder::default();
    let mut rng = Rng(42);
    let mut expected_post = 0u32;
    for i in 0..200u32 {
        let kind = i % 4;
        let inline_len = (rng.next() % 60) as usize + 1;
        let payload: Vec<u8> = (0..inline_len).map(|j| (i as usize * 7 + j) as u8).collect();
        let before = sq.cur_post();
        let w = match kind {
            0 => sq.write(CtrlFlags::CQ_UPDATE, at(0x1000 + u64::from(i), 77)).inline(&payload).finish(),
            1 => sq
                .send_imm(CtrlFlags::CQ_UPDATE | CtrlFlags::SOLICITED, 0xaabb_ccdd)
                .d(64, 5, 0x5000)
                .d(32, 6, 0x6000)
                .finish(),
            2 => sq.fetch_add(CtrlFlags::CQ_UPDATE, at(0x2000, 8), 3).d(8, 9, 0x7000).finish(),
            _ => sq.write(CtrlFlags::empty(), at(0x3000, 10)).d(4096, 11, 0x8000).finish(),
        };
        let pi = w;
        let ring: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let ctrl = ring_bytes(&ring, before, 0, 16);
        let opmod_idx_opcode = u32::from_be_bytes(ctrl[0..4].try_into().unwrap());
        let qpn_ds = u32::from_be_bytes(ctrl[4..8].try_into().unwrap());
        let ds = (qpn_ds & 0xff) as usize;
        assert_eq!(pi, before as u16);
        assert_eq!((opmod_idx_opcode >> 8) & 0xffff, u32::from(pi), "WQE index in the control segment");
        assert_eq!(qpn_ds >> 8, 0x1234);
        let raddr: ffi::mlx5_wqe_raddr_seg = cast(&ring_bytes(&ring, before, 16, 16));
        match kind {
            0 => {
                assert_eq!(opmod_idx_opcode & 0xff, u32::from(WqeOpcode::RDMA_WRITE.to_raw()));
                assert_eq!((u64::from_be(raddr.raddr), u32::from_be(raddr.rkey)), (0x1000 + u64::from(i), 77));
                let inl: ffi::mlx5_wqe_inl_data_seg = cast(&ring_bytes(&ring, before, 32, 4));
                assert_eq!(u32::from_be(inl.byte_count), inline_len as u32 | INLINE_SEG);
                assert_eq!(ring_bytes(&ring, before, 36, inline_len), payload, "inline bytes across the wrap");
                assert_eq!(ds, 2 + (inline_len + 4).div_ceil(16), "DS counts the padded inline data");
            }
            1 => {
                assert_eq!(ctrl[11], (CtrlFlags::CQ_UPDATE | CtrlFlags::SOLICITED).bits());
                assert_eq!(
                    u32::from_be_bytes(ctrl[12..16].try_into().unwrap()),
                    0xaabb_ccdd,
                    "immediate stored big-endian"
                );
                let d0: ffi::mlx5_wqe_data_seg = cast(&ring_bytes(&ring, before, 16, 16));
                let d1: ffi::mlx5_wqe_data_seg = cast(&ring_bytes(&ring, before, 32, 16));
                assert_eq!(
                    (u32::from_be(d0.byte_count), u32::from_be(d0.lkey), u64::from_be(d0.addr)),
                    (64, 5, 0x5000)
                );
                assert_eq!(
                    (u32::from_be(d1.byte_count), u32::from_be(d1.lkey), u64::from_be(d1.addr)),
                    (32, 6, 0x6000)
                );
                assert_eq!(ds, 3);
            }
            2 => {
                let a: ffi::mlx5_wqe_atomic_seg = cast(&ring_bytes(&ring, before, 32, 16));
                assert_eq!((u64::from_be(a.swap_add), u64::from_be(a.compare)), (3, 0));
                let d: ffi::mlx5_wqe_data_seg = cast(&ring_bytes(&ring, before, 48, 16));
                assert_eq!(u64::from_be(d.addr), 0x7000);
                assert_eq!(ds, 4);
            }
            _ => assert_eq!(ds, 3),
        }
        expected_post += (ds * 16).div_ceil(64) as u32;
        assert_eq!(sq.cur_post(), expected_post, "producer index advances by whole basic blocks");
        sq.ring(&mut rec);
        assert_eq!(dbrec[1].get(), expected_post & 0xffff, "doorbell record");
        // The "hardware" completes it at once.
        retire(&mut sq, &mut cq, pi);
        assert_eq!(sq.available(), BBS);
    }
    assert!(expected_post / BBS >= 50, "the ring wrapped many times");
}

/// The raw writer's segments (`raddr`, `inline`) across the ring's end:
/// every byte lands at its place modulo the ring, whichever block the
/// WQE starts in, and the inline header's count and the DS count say so.
#[test]
fn raw_writer_segments_across_the_ring_end_parse_back() {
    const BBS: u32 = 4;
    let mut buf = aligned((BBS * 64) as usize);
    let mut dbrec = [Be32::default(); 2];
    let mut bf = aligned(512);
    // SAFETY: buffers live until the end; the ring is their only user.
    let mut sq = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), BBS, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 256, 0x55)
    };
    let mut cq = bound_cq(&mut sq);
    let mut rec = Recorder::default();
    let mut rng = Rng(7);
    let mut crossed = 0;
    for i in 0..300u32 {
        let inline_len = (rng.next() % 150) as usize + 1;
        let payload: Vec<u8> = (0..inline_len).map(|j| (i as usize * 13 + j * 3) as u8).collect();
        let before = sq.cur_post();
        // SAFETY: a remote address and inline data: no local memory is named.
        let pi = unsafe { sq.wqe(WqeOpcode::RDMA_WRITE, 0, CtrlFlags::CQ_UPDATE, 0) }
            .raddr(0x9000 + u64::from(i), 0x77)
            .inline(&payload)
            .finish();
        let ring: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let start = (before % BBS) as usize * 64;
        if start + 36 + inline_len > ring.len() {
            crossed += 1;
        }
        let raddr: ffi::mlx5_wqe_raddr_seg = cast(&ring_bytes(&ring, before, 16, 16));
        assert_eq!((u64::from_be(raddr.raddr), u32::from_be(raddr.rkey)), (0x9000 + u64::from(i), 0x77));
        let inl: ffi::mlx5_wqe_inl_data_seg = cast(&ring_bytes(&ring, before, 32, 4));
        assert_eq!(u32::from_be(inl.byte_count), inline_len as u32 | INLINE_SEG, "WQE {i}");
        assert_eq!(ring_bytes(&ring, before, 36, inline_len), payload, "WQE {i}: inline bytes across the end");
        let qpn_ds = u32::from_be_bytes(ring_bytes(&ring, before, 4, 4).try_into().unwrap());
        assert_eq!(qpn_ds & 0xff, 2 + (inline_len as u32 + 4).div_ceil(16), "WQE {i}: DS count");
        sq.ring(&mut rec);
        assert!(retire(&mut sq, &mut cq, pi), "WQE {i} retires");
    }
    assert!(crossed > 50, "only {crossed} WQEs had inline bytes across the ring's end");
}

#[test]
fn doorbell_sequence_matches_libmlx5() {
    const BBS: u32 = 8;
    let mut buf = aligned((BBS * 64) as usize);
    let mut dbrec = [Be32::default(); 2];
    let mut bf = aligned(512);
    // SAFETY: as above.
    let mut sq = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), BBS, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 256, 7)
    };
    let mut cq = bound_cq(&mut sq);
    let mut rec = Recorder::default();
    let first8 = |buf: &[u64], bb: usize| buf[bb * 8].to_ne_bytes();

    // One WQE with more than one DS that fits: BlueFlame copy of align(ds*16, 64) bytes.
    sq.write(CtrlFlags::CQ_UPDATE, at(1, 2)).d(3, 4, 5).finish();
    sq.ring(&mut rec);
    let mut want = vec![Op::Barrier, Op::DbRec(1), Op::WcStart];
    want.extend((0..8).map(|i| Op::Write64(i * 8, buf[i].to_ne_bytes())));
    want.push(Op::Flush);
    assert_eq!(rec.ops, want);
    assert_eq!(sq.bf_offset(), 256, "the BlueFlame offset toggles");
    retire(&mut sq, &mut cq, 0);

    // Two WQEs in one doorbell: only the first 8 bytes of the last control segment.
    rec.ops.clear();
    sq.send(CtrlFlags::empty()).d(1, 1, 1).finish();
    sq.send(CtrlFlags::CQ_UPDATE).d(1, 1, 1).finish();
    sq.ring(&mut rec);
    assert_eq!(rec.ops, vec![Op::Barrier, Op::DbRec(3), Op::WcStart, Op::Write64(256, first8(&buf, 2)), Op::Flush]);
    assert_eq!(sq.bf_offset(), 0);
    retire(&mut sq, &mut cq, 2);

    // A control-only WQE (one DS) is not sent by BlueFlame.
    rec.ops.clear();
    sq.nop(CtrlFlags::CQ_UPDATE).finish();
    sq.ring(&mut rec);
    assert_eq!(rec.ops, vec![Op::Barrier, Op::DbRec(4), Op::WcStart, Op::Write64(0, first8(&buf, 3)), Op::Flush]);
    retire(&mut sq, &mut cq, 3);

    // No doorbell without new WQEs.
    rec.ops.clear();
    sq.ring(&mut rec);
    assert!(rec.ops.is_empty());

    // Without BlueFlame (bf.size 0): the 8-byte doorbell, offset stays 0.
    let mut buf2 = aligned((BBS * 64) as usize);
    let mut db2 = [Be32::default(); 2];
    let mut reg = aligned(8);
    // SAFETY: as above.
    let mut plain = unsafe {
        SqRing::from_raw(buf2.as_mut_ptr().cast(), BBS, db2.as_mut_ptr().add(1), reg.as_mut_ptr().cast(), 0, 7)
    };
    plain.write(CtrlFlags::CQ_UPDATE, at(1, 2)).d(3, 4, 5).finish();
    plain.ring(&mut rec);
    assert_eq!(rec.ops, vec![Op::Barrier, Op::DbRec(1), Op::WcStart, Op::Write64(0, first8(&buf2, 0)), Op::Flush]);
    assert_eq!(plain.bf_offset(), 0);
}

#[test]
fn post_rings_like_finish_then_ring() {
    let run = |use_post: bool| {
        let mut buf = aligned(64 * 8);
        let mut dbrec = [Be32::default(); 2];
        let mut bf = aligned(512);
        // SAFETY: as above.
        let mut sq = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 256, 9)
        };
        let mut rec = Recorder::default();
        for (i, bf_size_fits) in [(0u64, true), (1, false)] {
            let w = sq.write(CtrlFlags::CQ_UPDATE, at(i, 1));
            match (bf_size_fits, use_post) {
                (true, true) => _ = w.d(8, 2, 3).post(&mut rec),
                (true, false) => _ = w.d(8, 2, 3).finish(),
                (false, true) => _ = w.inline(&[7u8; 200]).post(&mut rec),
                (false, false) => _ = w.inline(&[7u8; 200]).finish(),
            }
            if !use_post {
                sq.ring(&mut rec);
            }
        }
        // Two WQEs finished before one doorbell, then one posted with it.
        sq.send(CtrlFlags::empty()).d(1, 1, 1).finish();
        sq.send(CtrlFlags::CQ_UPDATE).d(1, 1, 1).post(&mut rec);
        (rec.ops, buf, dbrec[1].get())
    };
    let (a, ring_a, db_a) = run(true);
    let (b, ring_b, db_b) = run(false);
    assert_eq!(a.len(), b.len());
    assert_eq!(&a[..a.len() - 5], &b[..b.len() - 5], "post == finish + ring");
    assert_eq!(ring_a, ring_b);
    assert_eq!(db_a, db_b);
    // The last doorbell covered two WQEs: no BlueFlame, the 8-byte doorbell only.
    assert!(matches!(a[a.len() - 2], Op::Write64(_, _)) && matches!(a[a.len() - 3], Op::WcStart));
}

#[test]
fn cq_arm_sequence_matches_libmlx5() {
    let mut buf = aligned(64 * 4);
    let mut dbrec = [Be32::default(); 2];
    let mut uar = aligned(64);
    // SAFETY: as above.
    let mut cq =
        unsafe { CqRing::from_raw(buf.as_mut_ptr().cast(), 4, 64, dbrec.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x55) };
    let mut rec = Recorder::default();
    cq.arm(&mut rec, false);
    let word = 0u32; // sn 0, REQ_NOT, ci 0
    assert_eq!(
        rec.ops,
        vec![
            Op::DbRec(word),
            Op::WcStart,
            Op::Write64(0x20, ((u64::from(word) << 32) | 0x55).to_be_bytes()),
            Op::Flush
        ]
    );
    assert_eq!(dbrec[1].get(), word, "arm record");
    cq.event_received();
    rec.ops.clear();
    cq.arm(&mut rec, true);
    let word = (1 << 28) | (1 << 24);
    assert_eq!(rec.ops[0], Op::DbRec(word), "sequence number and solicited command");
    assert_eq!(rec.ops[2], Op::Write64(0x20, ((u64::from(word) << 32) | 0x55).to_be_bytes()));
}

#[test]
fn masked_atomic_wqes() {
    use rrddmma::mlx5dv::seg::ext_atomic_opmod;
    let mut buf = aligned(64 * 4);
    let mut dbrec = [Be32::default(); 2];
    let mut bf = aligned(8);
    // SAFETY: as above.
    let mut sq = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), 4, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, 3)
    };
    // swap 1, compare 2, swap mask 3, compare mask 4.
    sq.masked_cas(CtrlFlags::CQ_UPDATE, at(0x100, 1), 2, 4, 1, 3).d(8, 5, 0x200).finish();
    let ring: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    assert_eq!(u32::from_be_bytes(ring[0..4].try_into().unwrap()), (0x09 << 24) | 0x14, "opmod 0x09, masked CS");
    assert_eq!(ring[7], 5, "ctrl + raddr + 32-byte masked CAS + data = 5 DS");
    let words: Vec<u64> =
        (0..4).map(|i| u64::from_be_bytes(ring[32 + 8 * i..40 + 8 * i].try_into().unwrap())).collect();
    assert_eq!(words, [1, 2, 3, 4]);
    assert_eq!(sq.cur_post(), 2, "80 bytes take two basic blocks");
    sq.masked_fa(CtrlFlags::empty(), at(0x100, 1), 7, 0xff00).finish();
    let ring: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    assert_eq!(ring[128 + 3], 0x15);
    assert_eq!(u64::from_be_bytes(ring[160..168].try_into().unwrap()), 7);
    assert_eq!(u64::from_be_bytes(ring[168..176].try_into().unwrap()), 0xff00);
    assert_eq!(ext_atomic_opmod(2), 0x08);
}

#[test]
fn stale_or_foreign_wqe_counters_retire_nothing() {
    let mut buf = aligned(64 * 4);
    let mut dbrec = [Be32::default(); 2];
    let mut bf = aligned(8);
    // SAFETY: as above.
    let mut sq = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), 4, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, 1)
    };
    let mut cq = bound_cq(&mut sq);
    let a = sq.send(CtrlFlags::empty()).d(1, 1, 1).finish();
    let b = sq.send(CtrlFlags::empty()).d(1, 1, 1).finish();
    assert_eq!(sq.available(), 2);
    assert!(!retire(&mut sq, &mut cq, b.wrapping_add(1)), "a WQE not posted yet");
    assert!(!retire(&mut sq, &mut cq, 0x8000), "a counter from elsewhere");
    assert_eq!(sq.available(), 2, "nothing freed");
    assert!(retire(&mut sq, &mut cq, a));
    assert_eq!(sq.available(), 3);
    assert!(!retire(&mut sq, &mut cq, a), "already retired");
    assert!(retire(&mut sq, &mut cq, b));
    assert_eq!(sq.available(), 4);
}

#[test]
#[should_panic(expected = "send queue full")]
fn overrunning_unretired_wqes_panics() {
    let mut buf = aligned(64 * 2);
    let mut dbrec = [Be32::default(); 2];
    let mut bf = aligned(8);
    // SAFETY: as above.
    let mut sq = unsafe {
        SqRing::from_raw(buf.as_mut_ptr().cast(), 2, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, 1)
    };
    for _ in 0..3 {
        sq.send(CtrlFlags::empty()).d(1, 1, 1).finish();
    }
}
