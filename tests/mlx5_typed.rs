//! The typed WQE builders of `mlx5dv::wqe`: each writes the segments its
//! opcode defines, in the device's order (parsed back with the C structs of
//! the bindings, and equal byte for byte to the raw writer given the same
//! segments), and payloads beyond the QP's caps panic before anything is
//! published.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::seg::{ext_atomic_opmod, CtrlFlags, DatagramSeg, WqeOpcode, INLINE_SEG};
use rrddmma::mlx5dv::sq::{SqLimits, SqRing, SqTransport, WqeWriter};
use rrddmma::mlx5dv::wqe::{ExtAtomics, Wqe};

/// The extended-atomic proof, assumed: these rings are test memory.
fn ext<const N: usize, const DC: bool>() -> ExtAtomics<N, DC> {
    // SAFETY: no device reads these rings.
    unsafe { ExtAtomics::assume() }
}
use rrddmma::prim::RemoteAddr;

const QPN: u32 = 0x2a;
const BBS: u32 = 8;

/// A ring over test memory.
struct Ring {
    buf: Vec<u64>,
    _dbrec: Box<[Be32; 2]>,
    _bf: Vec<u64>,
    sq: SqRing,
}

impl Ring {
    fn new() -> Ring {
        let mut buf = vec![0u64; BBS as usize * 8];
        let mut dbrec = Box::new([Be32::default(); 2]);
        let mut bf = vec![0u64; 1];
        // SAFETY: the buffers live beside the ring (heap memory that never
        // moves) and no device reads them.
        let sq = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), BBS, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, QPN)
        };
        Ring { buf, _dbrec: dbrec, _bf: bf, sq }
    }

    /// The first WQE's bytes (the ring starts at 0 and does not wrap here).
    fn wqe(&self) -> Vec<u8> {
        let all: Vec<u8> = self.buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let ds = usize::from(all[7]);
        all[..ds * 16].to_vec()
    }
}

fn cast<T: Copy>(b: &[u8]) -> T {
    assert!(b.len() >= size_of::<T>());
    // SAFETY: `T` is a plain C struct; unaligned read of enough bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

fn at(addr: u64, rkey: u32) -> RemoteAddr {
    RemoteAddr { addr, rkey }
}

/// The control segment: opcode, opmod, DS, fm_ce_se and imm as stored.
fn ctrl(w: &[u8]) -> (u8, u8, u8, u8, [u8; 4]) {
    // `struct mlx5_wqe_ctrl_seg`: opmod_idx_opcode, qpn_ds (big-endian),
    // signature, two DCI stream bytes, fm_ce_se, imm.
    let oio = u32::from_be_bytes(w[0..4].try_into().unwrap());
    let qpn_ds = u32::from_be_bytes(w[4..8].try_into().unwrap());
    assert_eq!(qpn_ds >> 8, QPN);
    (oio as u8, (oio >> 24) as u8, qpn_ds as u8, w[11], w[12..16].try_into().unwrap())
}

fn raddr(w: &[u8], off: usize) -> (u64, u32) {
    let r: ffi::mlx5_wqe_raddr_seg = cast(&w[off..]);
    (u64::from_be(r.raddr), u32::from_be(r.rkey))
}

fn data(w: &[u8], off: usize) -> (u32, u32, u64) {
    let d: ffi::mlx5_wqe_data_seg = cast(&w[off..]);
    (u32::from_be(d.byte_count), u32::from_be(d.lkey), u64::from_be(d.addr))
}

fn be64(w: &[u8], off: usize) -> u64 {
    u64::from_be_bytes(w[off..off + 8].try_into().unwrap())
}

/// Builds one WQE with `typed` on one ring and with `raw` on another and
/// returns the bytes, checked equal.
fn both(
    typed: impl FnOnce(&mut SqRing) -> u16,
    raw: impl FnOnce(WqeWriter<'_>) -> WqeWriter<'_>,
    raw_op: (WqeOpcode, u8, u32),
) -> Vec<u8> {
    both_on(SqTransport::Connected, typed, raw, raw_op)
}

fn both_on(
    t: SqTransport,
    typed: impl FnOnce(&mut SqRing) -> u16,
    raw: impl FnOnce(WqeWriter<'_>) -> WqeWriter<'_>,
    raw_op: (WqeOpcode, u8, u32),
) -> Vec<u8> {
    let mut a = Ring::new();
    // SAFETY: a model ring: the family is what the test says; a DCI's with
    // every stream id (the tests name streams up to 0x0102).
    unsafe { a.sq.set_transport(t) };
    a.sq.set_dci_streams(16);
    assert_eq!(typed(&mut a.sq), 0);
    let mut b = Ring::new();
    // SAFETY: as above.
    unsafe { b.sq.set_transport(t) };
    b.sq.set_dci_streams(16);
    // SAFETY: no device reads this ring; the bytes are only compared.
    let w = unsafe { b.sq.wqe(raw_op.0, raw_op.1, CtrlFlags::CQ_UPDATE, raw_op.2) };
    raw(w).finish();
    assert_eq!(a.wqe(), b.wqe(), "typed and raw writers differ for {:?}", raw_op.0);
    assert_eq!(a.sq.cur_post(), b.sq.cur_post());
    a.wqe()
}

trait Data<'s> {
    fn d(self, len: u32, lkey: u32, addr: u64) -> Wqe<'s, false>;
}
impl<'s, const I: bool> Data<'s> for Wqe<'s, I> {
    fn d(self, len: u32, lkey: u32, addr: u64) -> Wqe<'s, false> {
        // SAFETY: no device reads these rings.
        unsafe { self.data(len, lkey, addr) }
    }
}
trait RawData {
    fn d(self, len: u32, lkey: u32, addr: u64) -> Self;
}
impl RawData for WqeWriter<'_> {
    fn d(self, len: u32, lkey: u32, addr: u64) -> Self {
        // SAFETY: no device reads these rings.
        unsafe { self.data(len, lkey, addr) }
    }
}

#[test]
fn regression_typed_builders_write_the_segments_each_opcode_defines() {
    let f = CtrlFlags::CQ_UPDATE;

    let w = both(|s| s.nop(f).finish(), |w| w, (WqeOpcode::NOP, 0, 0));
    assert_eq!(ctrl(&w), (0x00, 0, 1, f.bits(), [0; 4]), "NOP: the control segment alone");

    let w = both(|s| s.send(f).d(64, 5, 0x5000).finish(), |w| w.d(64, 5, 0x5000), (WqeOpcode::SEND, 0, 0));
    assert_eq!(ctrl(&w), (0x0a, 0, 2, f.bits(), [0; 4]));
    assert_eq!(data(&w, 16), (64, 5, 0x5000), "SEND: the data segment right after the control segment");

    let w = both(
        |s| s.send_imm(f, 0x0102_0304).inline(b"abc").finish(),
        |w| w.inline(b"abc"),
        (WqeOpcode::SEND_IMM, 0, 0x0102_0304u32.to_be()),
    );
    assert_eq!(ctrl(&w), (0x0b, 0, 2, f.bits(), [1, 2, 3, 4]), "immediate stored big-endian");
    assert_eq!(u32::from_be_bytes(w[16..20].try_into().unwrap()), 3 | INLINE_SEG);
    assert_eq!(&w[20..23], b"abc");

    let mut av = DatagramSeg::default();
    av.set(0x1111_0000_0000, 0x77, 0, 0, 0, 0, &[1, 2, 3, 4, 5, 6], 0, 64, 0, &[9; 16]);
    let w = both_on(
        SqTransport::Datagram,
        |s| s.send_ud(f, &av).d(8, 1, 0x10).finish(),
        |w| w.datagram(&av).d(8, 1, 0x10),
        (WqeOpcode::SEND, 0, 0),
    );
    assert_eq!(ctrl(&w).2, 5, "control + 48-byte address vector + data");
    // SAFETY: `DatagramSeg` is 48 plain bytes (`struct mlx5_wqe_av`, sizes checked by the oracle test).
    let av_bytes = unsafe { std::slice::from_raw_parts((&av as *const DatagramSeg).cast::<u8>(), 48) };
    assert_eq!(size_of::<ffi::mlx5_wqe_av>(), 48);
    assert_eq!(&w[16..64], av_bytes, "the address vector right after the control segment");
    assert_eq!(data(&w, 64), (8, 1, 0x10));

    let w = both(
        |s| s.write(f, at(0xa000, 7)).inline(&[0x5a; 20]).finish(),
        |w| w.raddr(0xa000, 7).inline(&[0x5a; 20]),
        (WqeOpcode::RDMA_WRITE, 0, 0),
    );
    assert_eq!(ctrl(&w), (0x08, 0, 4, f.bits(), [0; 4]), "control + raddr + 24 padded inline bytes");
    assert_eq!(raddr(&w, 16), (0xa000, 7));
    assert_eq!(u32::from_be_bytes(w[32..36].try_into().unwrap()), 20 | INLINE_SEG);

    let w = both(
        |s| s.write_imm(f, at(0xa000, 7), 9).d(4, 2, 0x20).finish(),
        |w| w.raddr(0xa000, 7).d(4, 2, 0x20),
        (WqeOpcode::RDMA_WRITE_IMM, 0, 9u32.to_be()),
    );
    assert_eq!(ctrl(&w), (0x09, 0, 3, f.bits(), [0, 0, 0, 9]));
    assert_eq!((raddr(&w, 16), data(&w, 32)), ((0xa000, 7), (4, 2, 0x20)));

    let w = both(
        |s| s.read(f, at(0xb000, 8)).d(128, 3, 0x30).finish(),
        |w| w.raddr(0xb000, 8).d(128, 3, 0x30),
        (WqeOpcode::RDMA_READ, 0, 0),
    );
    assert_eq!(ctrl(&w), (0x10, 0, 3, f.bits(), [0; 4]));
    assert_eq!((raddr(&w, 16), data(&w, 32)), ((0xb000, 8), (128, 3, 0x30)));

    let w = both(
        |s| s.cas(f, at(0xc000, 9), 5, 6).d(8, 4, 0x40).finish(),
        |w| w.raddr(0xc000, 9).atomic(6, 5).d(8, 4, 0x40),
        (WqeOpcode::ATOMIC_CS, 0, 0),
    );
    assert_eq!(ctrl(&w), (0x11, 0, 4, f.bits(), [0; 4]));
    assert_eq!(raddr(&w, 16), (0xc000, 9));
    let a: ffi::mlx5_wqe_atomic_seg = cast(&w[32..]);
    assert_eq!((u64::from_be(a.swap_add), u64::from_be(a.compare)), (6, 5), "swap, then compare");
    assert_eq!(data(&w, 48), (8, 4, 0x40), "the local target last");

    let w = both(
        |s| s.fetch_add(f, at(0xc000, 9), 3).d(8, 4, 0x40).finish(),
        |w| w.raddr(0xc000, 9).atomic(3, 0).d(8, 4, 0x40),
        (WqeOpcode::ATOMIC_FA, 0, 0),
    );
    assert_eq!(ctrl(&w), (0x12, 0, 4, f.bits(), [0; 4]));
    assert_eq!((be64(&w, 32), be64(&w, 40)), (3, 0));

    let w = both(
        |s| s.masked_cas(f, at(0xd000, 1), 2, 4, 1, 3).d(8, 5, 0x50).finish(),
        |w| w.raddr(0xd000, 1).masked_cas(1, 2, 3, 4).d(8, 5, 0x50),
        (WqeOpcode::ATOMIC_MASKED_CS, ext_atomic_opmod(3), 0),
    );
    assert_eq!(ctrl(&w), (0x14, 0x09, 5, f.bits(), [0; 4]));
    assert_eq!([be64(&w, 32), be64(&w, 40), be64(&w, 48), be64(&w, 56)], [1, 2, 3, 4], "swap, compare, masks");
    assert_eq!(data(&w, 64), (8, 5, 0x50));

    let w = both(
        |s| s.masked_fa(f, at(0xd000, 1), 7, 0xff00).d(8, 5, 0x50).finish(),
        |w| w.raddr(0xd000, 1).masked_fa(7, 0xff00).d(8, 5, 0x50),
        (WqeOpcode::ATOMIC_MASKED_FA, ext_atomic_opmod(3), 0),
    );
    assert_eq!(ctrl(&w), (0x15, 0x09, 4, f.bits(), [0; 4]));
    assert_eq!((be64(&w, 32), be64(&w, 40)), (7, 0xff00));
}

/// Runs `f` on a ring limited to `limits`; returns its panic message and
/// checks that nothing was published.
fn refused(limits: SqLimits, f: impl FnOnce(&mut SqRing)) -> String {
    let mut r = Ring::new();
    r.sq.set_limits(limits);
    let before = (r.sq.cur_post(), r.sq.available());
    let err = catch_unwind(AssertUnwindSafe(|| f(&mut r.sq))).expect_err("the WQE must be refused");
    assert_eq!((r.sq.cur_post(), r.sq.available()), before, "nothing published");
    err.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn regression_inline_beyond_max_inline_data_panics() {
    let limits = SqLimits::new(16, 2, 512);
    let msg = refused(limits, |sq| {
        sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[0; 17]).finish();
    });
    assert!(msg.contains("17 bytes of inline data") && msg.contains("max_inline_data of 16"), "{msg}");
    // The raw writer adds up the inline bytes of all its inline segments.
    let msg = refused(limits, |sq| {
        // SAFETY: no device reads this ring.
        unsafe { sq.wqe(WqeOpcode::SEND, 0, CtrlFlags::empty(), 0) }.inline(&[0; 10]).inline(&[0; 10]).finish();
    });
    assert!(msg.contains("20 bytes of inline data"), "inline bytes add up over segments: {msg}");
    // At the limit it is taken.
    let mut r = Ring::new();
    r.sq.set_limits(limits);
    r.sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[0; 16]).finish();
    assert_eq!(r.sq.cur_post(), 1);
}

#[test]
fn regression_data_segments_beyond_max_send_sge_panic() {
    let msg = refused(SqLimits::new(0, 2, 512), |sq| {
        sq.send(CtrlFlags::empty()).d(1, 1, 1).d(1, 1, 2).d(1, 1, 3).finish();
    });
    assert!(msg.contains("more than 2 data segments") && msg.contains("max_send_sge"), "{msg}");
}

#[test]
fn regression_wqe_beyond_the_largest_size_panics() {
    // Eight data segments are allowed, but the WQE may be 128 bytes only:
    // the seventh segment would end it at 144.
    let msg = refused(SqLimits::new(0, 8, 128), |sq| {
        let w = sq.write(CtrlFlags::empty(), at(1, 2)).d(1, 1, 1).d(1, 1, 2).d(1, 1, 3);
        w.d(1, 1, 4).d(1, 1, 5).d(1, 1, 6).d(1, 1, 7).finish();
    });
    assert!(msg.contains("144-byte WQE") && msg.contains("largest WQE of 128 bytes"), "{msg}");
    // The raw writer's WQE is checked at `finish`.
    let msg = refused(SqLimits::new(0, 8, 128), |sq| {
        // SAFETY: no device reads this ring.
        let w = unsafe { sq.wqe(WqeOpcode::RDMA_WRITE, 0, CtrlFlags::empty(), 0) }.raddr(1, 2);
        w.d(1, 1, 1).d(1, 1, 2).d(1, 1, 3).d(1, 1, 4).d(1, 1, 5).d(1, 1, 6).raddr(3, 4).finish();
    });
    assert!(msg.contains("144-byte WQE"), "a segment after the payload: {msg}");
}

/// The size and count limits are one table lookup per data segment
/// (`set_limits`): both stay exact with zero-length segments, which count
/// towards `max_send_sge` but take no room.
#[test]
fn data_segment_limits_count_and_size_at_once() {
    let limits = SqLimits::new(0, 8, 128);
    // Control and remote address (2 units), a zero-length segment and six
    // of 16 bytes: 128 bytes, seven segments. Taken.
    let mut r = Ring::new();
    r.sq.set_limits(limits);
    let w = r.sq.write(CtrlFlags::empty(), at(1, 2)).d(0, 1, 0).d(1, 1, 1).d(1, 1, 2);
    w.d(1, 1, 3).d(1, 1, 4).d(1, 1, 5).d(1, 1, 6).finish();
    assert_eq!(r.sq.cur_post(), 2, "a 128-byte WQE");
    // An eighth (within max_send_sge) would end the WQE at 144 bytes.
    let msg = refused(limits, |sq| {
        let w = sq.write(CtrlFlags::empty(), at(1, 2)).d(0, 1, 0).d(1, 1, 1).d(1, 1, 2);
        w.d(1, 1, 3).d(1, 1, 4).d(1, 1, 5).d(1, 1, 6).d(1, 1, 7).finish();
    });
    assert!(msg.contains("144-byte WQE") && msg.contains("largest WQE of 128 bytes"), "{msg}");
    // Zero-length segments still count: nine on an eight-segment QP.
    let msg = refused(SqLimits::new(0, 8, 4080), |sq| {
        let w = sq.send(CtrlFlags::empty()).d(0, 1, 0).d(0, 1, 0).d(0, 1, 0).d(0, 1, 0);
        w.d(0, 1, 0).d(0, 1, 0).d(0, 1, 0).d(0, 1, 0).d(0, 1, 0).finish();
    });
    assert!(msg.contains("more than 8 data segments"), "{msg}");
}

/// An inline payload is checked against `max_inline_data` and the
/// largest WQE in one comparison; each refusal names its own limit.
#[test]
fn inline_payload_beyond_the_largest_wqe_panics() {
    // 100 bytes are allowed inline, but 32 + 4 + 100 (padded to 112) is
    // above a 128-byte WQE.
    let msg = refused(SqLimits::new(100, 1, 128), |sq| {
        sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[7; 100]).finish();
    });
    assert!(msg.contains("144-byte WQE") && msg.contains("largest WQE of 128 bytes"), "{msg}");
    let msg = refused(SqLimits::new(60, 1, 4080), |sq| {
        sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[7; 61]).finish();
    });
    assert!(msg.contains("61 bytes of inline data"), "{msg}");
    // At both limits it is taken: 32 + 4 + 92 = 128.
    let mut r = Ring::new();
    r.sq.set_limits(SqLimits::new(100, 1, 128));
    r.sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[7; 92]).finish();
    assert_eq!(r.sq.cur_post(), 2);
}

#[test]
fn limits_clamp_to_the_wqe_format() {
    assert_eq!(SqLimits::new(1, 1, u32::MAX).max_wqe_bytes(), 255 * 16);
    assert_eq!(SqLimits::NONE.max_wqe_bytes(), 255 * 16);
    // The floors every ring has: two blocks, one data segment (what lets
    // the first data segment after a typed header skip its check).
    let l = SqLimits::new(0, 0, 64);
    assert_eq!((l.max_send_sge(), l.max_wqe_bytes()), (1, SqLimits::MIN_WQE_BYTES));
    assert_eq!(SqLimits::MIN_WQE_BYTES, 128);
    let mut r = Ring::new();
    r.sq.set_limits(l);
    // The longest typed header whose first data segment needs no check,
    // 16-byte masked CAS (96 bytes) and its segment: taken.
    let w = r.sq.masked_cas_ext(ext(), CtrlFlags::empty(), at(1, 2), &[1; 16], &[2; 16], &[3; 16], &[4; 16]);
    w.d(16, 1, 0x1000).finish();
    assert_eq!(r.sq.cur_post(), 2);
    // A second segment is checked: refused (count).
    let msg = refused(l, |sq| {
        sq.write(CtrlFlags::empty(), at(1, 2)).d(1, 1, 1).d(1, 1, 2).finish();
    });
    assert!(msg.contains("more than 1 data segments"), "{msg}");
}

/// A connected builder on a UD QP's ring would put an inline payload where
/// the device reads data segments (after the 48-byte address vector), and
/// `send_ud` on an RC ring would put the address vector there: both panic,
/// and nothing is published.
#[test]
fn regression_typed_builders_refuse_a_ring_of_another_layout() {
    let on = |t: SqTransport, f: &dyn Fn(&mut SqRing)| {
        let mut r = Ring::new();
        // SAFETY: a model ring: the family is what the test says.
        unsafe { r.sq.set_transport(t) };
        let err = catch_unwind(AssertUnwindSafe(|| f(&mut r.sq))).expect_err("a builder of another layout");
        assert_eq!(r.sq.cur_post(), 0, "nothing published");
        err.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let msg = on(SqTransport::Datagram, &|sq| {
        sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[0x41; 60]).finish();
    });
    assert!(msg.contains("`write`") && msg.contains("Datagram"), "{msg}");
    let msg = on(SqTransport::Connected, &|sq| {
        sq.send_ud(CtrlFlags::empty(), &DatagramSeg::default()).finish();
    });
    assert!(msg.contains("`send_ud`") && msg.contains("Connected"), "{msg}");
    let msg = on(SqTransport::Other, &|sq| {
        sq.send(CtrlFlags::empty()).finish();
    });
    assert!(msg.contains("`send`") && msg.contains("Other"), "{msg}");
    // A DCI's ring takes the DC builders only; a UD ring does not take them.
    let msg = on(SqTransport::DcInitiator, &|sq| {
        sq.write(CtrlFlags::empty(), at(1, 2)).inline(&[0x41; 8]).finish();
    });
    assert!(msg.contains("`write`") && msg.contains("DcInitiator") && msg.contains("Dci::sq_ring"), "{msg}");
    let msg = on(SqTransport::DcInitiator, &|sq| {
        sq.send_ud(CtrlFlags::empty(), &DatagramSeg::default()).finish();
    });
    assert!(msg.contains("`send_ud`") && msg.contains("DcInitiator"), "{msg}");
    let msg = on(SqTransport::Datagram, &|sq| {
        sq.dc(&DatagramSeg::default()).write(CtrlFlags::empty(), at(1, 2)).inline(&[0x41; 8]).finish();
    });
    assert!(msg.contains("`dc`") && msg.contains("Datagram"), "{msg}");
    // A NOP fits every layout.
    let mut r = Ring::new();
    // SAFETY: as above.
    unsafe { r.sq.set_transport(SqTransport::Other) };
    r.sq.nop(CtrlFlags::empty()).finish();
    assert_eq!(r.sq.cur_post(), 1);
}

/// The DC builders write the control segment (with the stream), the DC
/// address and then what the connected builder of the same name writes;
/// `send_inv` stores the key big endian; the extended masked atomics carry
/// their operands in the 8-byte segment's order with opmod 0x0a / 0x0b.
#[test]
fn dc_send_inv_and_extended_builders_write_the_segments_each_opcode_defines() {
    let f = CtrlFlags::CQ_UPDATE;
    let mut av = DatagramSeg::default();
    av.set(0x1111_0000_0000, 0x77, 0, 0, 0, 0, &[1, 2, 3, 4, 5, 6], 0, 64, 0, &[9; 16]);
    // SAFETY: `DatagramSeg` is 48 plain bytes (`struct mlx5_wqe_av`).
    let av_bytes = unsafe { std::slice::from_raw_parts((&av as *const DatagramSeg).cast::<u8>(), 48) }.to_vec();

    let w = both_on(
        SqTransport::DcInitiator,
        |s| s.dc(&av).stream(0x0102).write(f, at(0xdead_0000, 0x55)).d(64, 7, 0x1000).finish(),
        |w| w.dci_stream(0x0102).datagram(&av).raddr(0xdead_0000, 0x55).d(64, 7, 0x1000),
        (WqeOpcode::RDMA_WRITE, 0, 0),
    );
    assert_eq!(ctrl(&w), (0x08, 0, 6, f.bits(), [0; 4]), "DC WRITE: control, DC address, raddr, data");
    assert_eq!(&w[9..11], &[0x01, 0x02], "the stream, big endian");
    assert_eq!(&w[16..64], &av_bytes[..], "the DC address after the control segment");
    assert_eq!(raddr(&w, 64), (0xdead_0000, 0x55));
    assert_eq!(data(&w, 80), (64, 7, 0x1000));

    let w = both_on(
        SqTransport::DcInitiator,
        |s| s.dc(&av).fetch_add(f, at(0x40, 9), 5).d(8, 3, 0x2000).finish(),
        |w| w.datagram(&av).raddr(0x40, 9).atomic(5, 0).d(8, 3, 0x2000),
        (WqeOpcode::ATOMIC_FA, 0, 0),
    );
    assert_eq!(ctrl(&w).2, 7, "DC FAA: control, DC address, raddr, atomic, data");
    assert_eq!(&w[9..11], &[0, 0], "stream 0 by default");

    let w = both(
        |s| s.send_inv(f, 0x0a0b_0c0d).inline(b"xyz").finish(),
        |w| w.inline(b"xyz"),
        (WqeOpcode::SEND_INVAL, 0, 0x0a0b_0c0du32.to_be()),
    );
    assert_eq!(ctrl(&w), (0x01, 0, 2, f.bits(), [0x0a, 0x0b, 0x0c, 0x0d]), "SEND_WITH_INV: the key big endian");

    let op = |b: u8| [b; 32];
    let mut r = Ring::new();
    r.sq.masked_cas_ext(ext(), f, at(0x80, 2), &op(2), &op(4), &op(1), &op(3)).d(32, 6, 0x3000).finish();
    let w = r.wqe();
    assert_eq!(
        ctrl(&w),
        (0x14, ext_atomic_opmod(5), 11, f.bits(), [0; 4]),
        "32-byte masked CAS: 16 + 16 + 128 + 16 bytes"
    );
    assert_eq!(ext_atomic_opmod(5), 0x0b);
    for (i, b) in [1u8, 2, 3, 4].into_iter().enumerate() {
        assert!(
            w[32 + 32 * i..64 + 32 * i].iter().all(|&x| x == b),
            "operand {i}: swap, compare, swap mask, compare mask"
        );
    }
    assert_eq!(data(&w, 160), (32, 6, 0x3000));
    let mut r = Ring::new();
    // SAFETY: a model ring standing for a DCI's.
    unsafe { r.sq.set_transport(SqTransport::DcInitiator) };
    let (add, boundary) = ([7u8; 16], [8u8; 16]);
    r.sq.dc(&av).masked_fa_ext(ext(), f, at(0x80, 2), &add, &boundary).d(16, 6, 0x3000).finish();
    let w = r.wqe();
    assert_eq!(ctrl(&w), (0x15, 0x0a, 8, f.bits(), [0; 4]), "16-byte masked FA to a DCT");
    assert_eq!((&w[80..96], &w[96..112]), (&add[..], &boundary[..]), "add, then the field boundary");
}
