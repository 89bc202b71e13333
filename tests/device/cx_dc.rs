//! DC on a ConnectX: a DC initiator (DCI) and a DC target (DCT) on the same
//! device and port; WRITE, READ, compare-and-swap and fetch-and-add through
//! the DCI's direct view and the typed DC builders, each checked in the
//! target's memory; the same on every stream of a DCI with streams; and one
//! stream driven into error (a WRITE under an rkey without remote write)
//! and reset while requests on another stream go on completing.
//!
//! Off mlx5 (SoftRoCE) every test here skips through `mlx5_test_skips`
//! (and so fails under `--expect mlx5`). Written for hardware, never run on
//! it here.

use std::time::{Duration, Instant};

use rrddmma::mlx5dv;
use rrddmma::mlx5dv::av::AddressVector;
use rrddmma::mlx5dv::cqe::{Completion, CqeOpcode};
use rrddmma::mlx5dv::dc::{dci_stream_caps, Dci, DciOpts, DciStreams, Dct, DctOpts};
use rrddmma::mlx5dv::mmio::HwMmio;
use rrddmma::mlx5dv::obj::{self, DirectCq, DirectSq};
use rrddmma::mlx5dv::seg::{CtrlFlags, DatagramSeg};
use rrddmma::prim::{AccessFlags, Ah, AhAttr, Context, Cq, Mr, Pd, QpCaps, QpState, RemoteAddr, Srq, WcStatus};

use crate::common::{mlx5_test_skips, open_device, Buf};

const KEY: u64 = 0x0dc0_ffee_1234;

/// Skips (a failure under `--expect mlx5`) unless `ctx` is an mlx5 device.
fn skips_off_mlx5(ctx: &Context) -> bool {
    !mlx5dv::is_supported(ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device (DC is ConnectX's)", ctx.name()))
}

/// A DC target on port 1 of `ctx` with its memory, and the address vector
/// of the port, from which each test builds the DC address of its WQEs.
struct Target {
    pd: Pd,
    cq: Cq,
    _dct_cq: Cq,
    _srq: Srq,
    dct: Dct,
    ah: Ah,
    /// The target's memory: remote write, read and atomics.
    mem: Buf,
}

impl Target {
    fn new(ctx: &Context) -> Target {
        let pd = Pd::alloc(ctx).unwrap();
        let cq = Cq::create(ctx, 64).unwrap();
        let dct_cq = Cq::create(ctx, 16).unwrap();
        let srq = Srq::builder(&pd).max_wr(4).build().unwrap();
        let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        let dct = Dct::create(&pd, &dct_cq, &srq, KEY, &DctOpts::default().access(access)).unwrap();
        let port = ctx.query_port(1).unwrap();
        let path = if port.is_ethernet() {
            let index = ctx.roce_v2_gid_index(1).unwrap();
            AhAttr::global(1, index, ctx.query_gid(1, index.into()).unwrap())
        } else {
            AhAttr::lid(1, port.lid())
        };
        let ah = Ah::create(&pd, &path).unwrap();
        let mem = Buf::new(&pd, 4096);
        Target { pd, cq, _dct_cq: dct_cq, _srq: srq, dct, ah, mem }
    }

    /// The DC address of every WQE towards this target.
    fn seg(&self) -> DatagramSeg {
        AddressVector::of(&self.ah).unwrap().dc(self.dct.dctn(), self.dct.key())
    }

    fn remote(&self, offset: usize) -> RemoteAddr {
        self.mem.mr.remote().addr_at(offset)
    }
}

/// The next completion of `dcq`, or a panic after 5 s naming `what`.
fn next(dcq: &mut DirectCq<'_>, what: &str) -> Completion {
    let mut out = [Completion::default()];
    let t = Instant::now();
    while dcq.poll(&mut out) == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "no completion of the DC {what} within 5 s");
        std::hint::spin_loop();
    }
    out[0]
}

/// Waits for the completion of the WQE just posted: successful, a
/// requester CQE of the DCI, on stream `stream`, and retired.
fn done(sq: &mut DirectSq<'_>, dcq: &mut DirectCq<'_>, dci: &Dci, stream: u16, what: &str) {
    let c = next(dcq, what);
    assert_eq!(c.status(), WcStatus::SUCCESS, "the DC {what} on stream {stream} failed: {c:?}");
    assert_eq!((c.opcode(), c.qpn()), (CqeOpcode::REQ, dci.qpn()), "{what}: {c:?}");
    assert_eq!(sq.stream_of(&c), Some(stream), "{what}: the completion names the WQE's stream");
    assert!(sq.retire(&c), "{what}: the completion frees its WQE");
}

/// A fill pattern for `len` bytes, distinct per `tag`.
fn pattern(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13) ^ tag).collect()
}

/// The 8 bytes at `off` as a value, and whether the device's atomics read
/// memory in host order: ConnectX-5 and later run 8-byte atomics in host
/// order when the kernel selects it (`atomic_req_8B_endianness_mode`);
/// older parts treat memory as big-endian. `before` and `after` are the
/// target's bytes around one FETCH_ADD of `add`: exactly one of the two
/// readings must show the sum.
fn atomic_order(before: [u8; 8], after: [u8; 8], add: u64) -> bool {
    let host = u64::from_ne_bytes(after) == u64::from_ne_bytes(before).wrapping_add(add);
    let big = u64::from_be_bytes(after) == u64::from_be_bytes(before).wrapping_add(add);
    assert!(host != big, "FETCH_ADD of {add}: memory {before:02x?} -> {after:02x?} is the sum in neither byte order");
    host
}

/// WRITE, READ, CAS and FETCH_ADD on `stream` of the DCI behind `sq`,
/// each checked in the target's memory and the local buffer; `tag`
/// makes the data of each call distinct, `base` the target's offset used.
#[allow(clippy::too_many_arguments)]
fn four_ops(
    sq: &mut DirectSq<'_>,
    dcq: &mut DirectCq<'_>,
    dci: &Dci,
    t: &mut Target,
    seg: &DatagramSeg,
    local: &mut Buf,
    stream: u16,
    tag: u8,
    base: usize,
) {
    let mut mmio = HwMmio;
    let (lkey, laddr) = (local.mr.lkey(), local.mr.addr());
    let len = 64usize;
    let data = pattern(tag, len);
    local.bytes()[..len].copy_from_slice(&data);
    local.bytes()[len..2 * len].fill(0);

    // WRITE 64 bytes at `base`.
    let w = sq.dc(seg).stream(stream).write(CtrlFlags::CQ_UPDATE, t.remote(base));
    // SAFETY: `local` is registered with `lkey` and outlives the completion.
    unsafe { w.data(len as u32, lkey, laddr) }.post(&mut mmio);
    done(sq, dcq, dci, stream, "WRITE");
    let at = base;
    assert_eq!(&t.mem.bytes()[at..at + len], &data[..], "stream {stream}: the WRITE landed in the DCT's memory");

    // READ them back into local[64..128].
    let w = sq.dc(seg).stream(stream).read(CtrlFlags::CQ_UPDATE, t.remote(base));
    // SAFETY: as above; `local` has local write.
    unsafe { w.data(len as u32, lkey, laddr + len as u64) }.post(&mut mmio);
    done(sq, dcq, dci, stream, "READ");
    assert_eq!(&local.bytes()[len..2 * len], &data[..], "stream {stream}: the READ brought the bytes back");

    // CAS on an 8-byte word at base + 64: byte-symmetric values, so the
    // outcome is the same in either atomic byte order.
    let word = at + 64;
    let (old, new) = (0x1111_1111_1111_1111u64 * u64::from(tag % 7 + 1), 0x2323_2323_2323_2323u64);
    t.mem.bytes()[word..word + 8].copy_from_slice(&old.to_ne_bytes());
    local.bytes()[128..136].fill(0xee);
    let w = sq.dc(seg).stream(stream).cas(CtrlFlags::CQ_UPDATE, t.remote(word), old, new);
    // SAFETY: as above: the fetched value lands in local[128..136].
    unsafe { w.data(8, lkey, laddr + 128) }.post(&mut mmio);
    done(sq, dcq, dci, stream, "CAS");
    assert_eq!(&t.mem.bytes()[word..word + 8], &new.to_ne_bytes(), "stream {stream}: CAS swapped (compare matched)");
    assert_eq!(&local.bytes()[128..136], &old.to_ne_bytes(), "stream {stream}: CAS returned the old value");
    // A CAS whose compare does not match leaves memory alone.
    let w = sq.dc(seg).stream(stream).cas(CtrlFlags::CQ_UPDATE, t.remote(word), old, 0);
    // SAFETY: as above.
    unsafe { w.data(8, lkey, laddr + 128) }.post(&mut mmio);
    done(sq, dcq, dci, stream, "CAS (no match)");
    assert_eq!(&t.mem.bytes()[word..word + 8], &new.to_ne_bytes(), "stream {stream}: a failed CAS wrote nothing");
    assert_eq!(&local.bytes()[128..136], &new.to_ne_bytes(), "stream {stream}: a failed CAS returned the value");

    // FETCH_ADD of 5 on the word at base + 72.
    let word = at + 72;
    let before = (0x0102_0304_0506_0700u64 | u64::from(tag)).to_ne_bytes();
    t.mem.bytes()[word..word + 8].copy_from_slice(&before);
    let w = sq.dc(seg).stream(stream).fetch_add(CtrlFlags::CQ_UPDATE, t.remote(word), 5);
    // SAFETY: as above: the fetched value lands in local[136..144].
    unsafe { w.data(8, lkey, laddr + 136) }.post(&mut mmio);
    done(sq, dcq, dci, stream, "FETCH_ADD");
    let after: [u8; 8] = t.mem.bytes()[word..word + 8].try_into().unwrap();
    atomic_order(before, after, 5);
    assert_eq!(&local.bytes()[136..144], &before, "stream {stream}: FETCH_ADD returned the value before the add");
}

/// The DCI, connected with remote atomics in flight allowed.
fn connect(dci: &Dci) {
    dci.connect(&DciOpts::default().key(KEY)).unwrap();
    assert_eq!(dci.query_state().unwrap(), QpState::RTS);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dc_write_read_cas_and_fetch_add_land_in_the_dct_on_mlx5() {
    let ctx = open_device();
    if skips_off_mlx5(&ctx) {
        return;
    }
    assert!(ctx.atomics(), "{}: a ConnectX has RDMA atomics", ctx.name());
    let mut t = Target::new(&ctx);
    let dci = Dci::create(&t.pd, &t.cq, &t.cq, QpCaps::default()).unwrap();
    assert_eq!(dci.streams(), None);
    connect(&dci);
    let seg = t.seg();
    let mut local = Buf::new(&t.pd, 4096);
    let cq = t.cq.clone();
    // SAFETY: the DCI's send CQ is polled through this view alone; the DCT
    // completes nothing into it (its own CQ is another).
    let mut dcq = unsafe { obj::cq_ring(&cq) }.unwrap();
    // SAFETY: nothing was posted on the DCI; from here it is posted to
    // through this view alone, and each WQE's memory outlives its completion.
    let mut sq = unsafe { dci.sq_ring(&dcq) }.unwrap();
    for (round, base) in [(1u8, 0usize), (2, 512), (3, 1024)] {
        four_ops(&mut sq, &mut dcq, &dci, &mut t, &seg, &mut local, 0, round, base);
    }
    drop(sq);
    assert_eq!(dci.query_state().unwrap(), QpState::RTS, "the DCI is still up after twelve requests");
}

/// Streams this test asks for: up to 4 at once (the device's maximum if
/// lower, at least 2), and room for one stream in error without the DCI
/// going to error. `None` after a skip.
fn streams_or_skip(ctx: &Context) -> Option<DciStreams> {
    let caps = match dci_stream_caps(ctx) {
        Ok(c) => c,
        Err(e) => {
            mlx5_test_skips(&format!("{}: no DCI streams here: {e}", ctx.name()));
            return None;
        }
    };
    if caps.max_log_num_concurrent < 1 || caps.max_log_num_errored < 1 {
        mlx5_test_skips(&format!("{}: DCI stream caps {caps:?} (2 streams, 2 errored needed)", ctx.name()));
        return None;
    }
    Some(DciStreams { log_num_concurrent: caps.max_log_num_concurrent.min(2), log_num_errored: 1 })
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dc_requests_on_every_stream_of_a_dci_land_on_mlx5() {
    let ctx = open_device();
    if skips_off_mlx5(&ctx) {
        return;
    }
    let Some(streams) = streams_or_skip(&ctx) else { return };
    let mut t = Target::new(&ctx);
    let dci = Dci::create_with_streams(&t.pd, &t.cq, &t.cq, QpCaps::default(), streams).unwrap();
    assert_eq!(dci.streams(), Some(streams));
    connect(&dci);
    let seg = t.seg();
    let mut local = Buf::new(&t.pd, 4096);
    let cq = t.cq.clone();
    // SAFETY: as in `dc_write_read_cas_and_fetch_add_land_in_the_dct_on_mlx5`.
    let mut dcq = unsafe { obj::cq_ring(&cq) }.unwrap();
    // SAFETY: as above.
    let mut sq = unsafe { dci.sq_ring(&dcq) }.unwrap();
    let n = 1u16 << streams.log_num_concurrent;
    assert_eq!(sq.dci_streams(), u32::from(n), "the view knows the DCI's streams");
    for s in 0..n {
        four_ops(&mut sq, &mut dcq, &dci, &mut t, &seg, &mut local, s, 0x40 + s as u8, usize::from(s) * 256);
    }
    drop(sq);
    assert_eq!(dci.query_state().unwrap(), QpState::RTS);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dc_stream_in_error_is_reset_while_another_goes_on_on_mlx5() {
    let ctx = open_device();
    if skips_off_mlx5(&ctx) {
        return;
    }
    let Some(streams) = streams_or_skip(&ctx) else { return };
    let mut t = Target::new(&ctx);
    let dci = Dci::create_with_streams(&t.pd, &t.cq, &t.cq, QpCaps::default(), streams).unwrap();
    connect(&dci);
    let seg = t.seg();
    let mut local = Buf::new(&t.pd, 4096);
    // A region of the target's PD without remote access: a WRITE under its
    // rkey is refused by the responder (remote access error), a data error
    // that mlx5dv_dci_stream_id_reset(3) says puts only the WQE's stream in
    // error, the DCI staying in RTS.
    let mut closed_mem = vec![0u8; 256];
    // SAFETY: `closed_mem` outlives the region (dropped at the end, after it).
    let closed = unsafe { Mr::register(&t.pd, closed_mem.as_mut_ptr(), 256, AccessFlags::LOCAL_WRITE) }.unwrap();
    let cq = t.cq.clone();
    // SAFETY: as in `dc_write_read_cas_and_fetch_add_land_in_the_dct_on_mlx5`.
    let mut dcq = unsafe { obj::cq_ring(&cq) }.unwrap();
    // SAFETY: as above.
    let mut sq = unsafe { dci.sq_ring(&dcq) }.unwrap();
    let mut mmio = HwMmio;
    let (lkey, laddr) = (local.mr.lkey(), local.mr.addr());
    local.bytes()[..64].copy_from_slice(&pattern(0x77, 64));

    // Both streams work.
    for s in [0u16, 1] {
        let w = sq.dc(&seg).stream(s).write(CtrlFlags::CQ_UPDATE, t.remote(usize::from(s) * 64));
        // SAFETY: `local` is registered with `lkey` and outlives the completion.
        unsafe { w.data(64, lkey, laddr) }.post(&mut mmio);
        done(&mut sq, &mut dcq, &dci, s, "WRITE before the error");
    }

    // Stream 1 into error.
    let bad = RemoteAddr { addr: closed.addr(), rkey: closed.rkey() };
    let w = sq.dc(&seg).stream(1).write(CtrlFlags::CQ_UPDATE, bad);
    // SAFETY: as above.
    unsafe { w.data(64, lkey, laddr) }.post(&mut mmio);
    let c = next(&mut dcq, "WRITE under an rkey without remote write");
    assert_eq!(c.status(), WcStatus::REM_ACCESS_ERR, "the responder refused the WRITE: {c:?}");
    assert_eq!(c.opcode(), CqeOpcode::REQ_ERR, "{c:?}");
    assert_eq!(sq.stream_of(&c), Some(1), "the error completion names stream 1");
    assert!(sq.retire(&c), "the error completion frees its WQE");
    assert!(closed_mem.iter().all(|&b| b == 0), "nothing was written under the refused rkey");
    assert_eq!(dci.query_state().unwrap(), QpState::RTS, "a data error puts the stream in error, not the DCI");

    // Stream 0 goes on while stream 1 is in error.
    let data = pattern(0x99, 64);
    local.bytes()[..64].copy_from_slice(&data);
    let w = sq.dc(&seg).stream(0).write(CtrlFlags::CQ_UPDATE, t.remote(1024));
    // SAFETY: as above.
    unsafe { w.data(64, lkey, laddr) }.post(&mut mmio);
    done(&mut sq, &mut dcq, &dci, 0, "WRITE on stream 0 with stream 1 in error");
    assert_eq!(&t.mem.bytes()[1024..1088], &data[..], "stream 0's WRITE landed while stream 1 was in error");

    // Stream 1 reset, and working again.
    dci.reset_stream(1).unwrap();
    let data = pattern(0xaa, 64);
    local.bytes()[..64].copy_from_slice(&data);
    let w = sq.dc(&seg).stream(1).write(CtrlFlags::CQ_UPDATE, t.remote(2048));
    // SAFETY: as above.
    unsafe { w.data(64, lkey, laddr) }.post(&mut mmio);
    done(&mut sq, &mut dcq, &dci, 1, "WRITE on stream 1 after its reset");
    assert_eq!(&t.mem.bytes()[2048..2112], &data[..], "stream 1 works again after Dci::reset_stream");
    let w = sq.dc(&seg).stream(0).read(CtrlFlags::CQ_UPDATE, t.remote(2048));
    // SAFETY: as above; `local` has local write.
    unsafe { w.data(64, lkey, laddr + 64) }.post(&mut mmio);
    done(&mut sq, &mut dcq, &dci, 0, "READ on stream 0 after the reset");
    assert_eq!(&local.bytes()[64..128], &data[..]);
    drop(sq);
    assert_eq!(dci.query_state().unwrap(), QpState::RTS);
    drop(closed);
    drop(closed_mem);
}
