//! Regression tests for what the libmlx5 differential harness
//! (tests/mlx5_provider.rs) found in `mlx5dv`, on the host, without the
//! rdma-core source: each checks the fixed behaviour against the layouts of
//! `mlx5dv.h` (and what libmlx5 writes), independently of the harness.

use rrddmma::mlx5dv::av::AddressVector;
use rrddmma::mlx5dv::be::{Be16, Be32};
use rrddmma::mlx5dv::cqe::{Completion, Cqe64, CqeOpcode};
use rrddmma::mlx5dv::seg::{CtrlFlags, WqeOpcode, INLINE_SEG};
use rrddmma::mlx5dv::sq::{SqRing, SqTransport};
use rrddmma::prim::RemoteAddr;

const QPN: u32 = 0x2a;

struct Ring {
    buf: Vec<u64>,
    _dbrec: Box<[Be32; 2]>,
    _bf: Vec<u64>,
    sq: SqRing,
}

impl Ring {
    fn new() -> Ring {
        let mut buf = vec![0x5a5a_5a5a_5a5a_5a5au64; 8 * 8];
        let mut dbrec = Box::new([Be32::default(); 2]);
        let mut bf = vec![0u64; 1];
        // SAFETY: the buffers live beside the ring (heap memory that never
        // moves) and no device reads them.
        let sq = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, QPN)
        };
        Ring { buf, _dbrec: dbrec, _bf: bf, sq }
    }

    fn bytes(&self) -> Vec<u8> {
        self.buf.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// The first WQE's DS count (byte 7 of the control segment).
    fn ds(&self) -> u8 {
        self.bytes()[7] & 0x3f
    }
}

/// Finding 1a: `mlx5dv_wr_set_dc_addr_stream` stores the stream id in the
/// control segment's `dci_stream_channel_id` (bytes 9-10, big endian); the
/// writer wrote 0 whatever the stream.
#[test]
fn regression_dci_stream_id_lands_in_ctrl_bytes_9_and_10() {
    let mut r = Ring::new();
    // SAFETY: the test ring stands for a DCI's queue.
    unsafe { r.sq.set_transport(SqTransport::DcInitiator) };
    r.sq.set_dci_streams(16);
    let av = AddressVector::default().dc(0x1234, 7);
    r.sq.dc(&av).send(CtrlFlags::CQ_UPDATE).dci_stream(0xbeef).inline(&[1, 2, 3]).finish();
    let b = r.bytes();
    assert_eq!(&b[9..11], &[0xbe, 0xef], "dci_stream_channel_id");
    assert_eq!(b[11], CtrlFlags::CQ_UPDATE.bits(), "fm_ce_se next to it is untouched");
    assert_eq!(b[8], 0, "signature");
}

/// A stream the DCI does not have is refused before any byte is written
/// (libmlx5 passes any id to the device): without streams only 0, with
/// `2^log_num_concurrent` streams ids below that; each builder that takes
/// a stream panics naming the id, the range and the fix.
#[test]
fn stream_id_outside_the_dcis_streams_panics_naming_the_range() {
    let panics = |log: Option<u8>, id: u16, raw: bool| {
        let mut r = Ring::new();
        // SAFETY: the test ring stands for a DCI's queue.
        unsafe { r.sq.set_transport(SqTransport::DcInitiator) };
        if let Some(l) = log {
            r.sq.set_dci_streams(l);
        }
        let av = AddressVector::default().dc(0x1234, 7);
        let before = r.bytes().to_vec();
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if raw {
                r.sq.dc(&av).send(CtrlFlags::empty()).dci_stream(id).inline(&[1]).finish();
            } else {
                r.sq.dc(&av).stream(id).send(CtrlFlags::empty()).inline(&[1]).finish();
            }
        }));
        let msg = e.err().map(|p| p.downcast_ref::<String>().cloned().unwrap_or_default());
        (msg, r.bytes() == before[..])
    };
    // In range: no panic, with and without streams.
    assert_eq!(panics(None, 0, false).0, None);
    assert_eq!(panics(Some(3), 7, false).0, None);
    assert_eq!(panics(Some(3), 7, true).0, None);
    // Without streams, stream 1 is refused, naming the fix.
    let (m, untouched) = panics(None, 1, false);
    let m = m.expect("stream 1 without streams panics");
    assert!(m.contains("stream 1") && m.contains("one stream, 0") && m.contains("create_with_streams"), "{m}");
    assert!(untouched, "nothing written before the panic");
    // With 8 streams, 8 is one too many, through both builders.
    for raw in [false, true] {
        let (m, untouched) = panics(Some(3), 8, raw);
        let m = m.expect("stream 8 of 8 panics");
        assert!(m.contains("stream 8") && m.contains("0..8") && m.contains("log_num_concurrent 3"), "{m}");
        assert!(untouched || raw, "the typed builder writes nothing before the panic");
    }
}

/// The stream id is a DCI's: on a connected QP's ring it is a programming error.
#[test]
#[should_panic(expected = "dci_stream")]
fn regression_dci_stream_on_a_connected_ring_panics() {
    let mut r = Ring::new();
    let _ = r.sq.write(CtrlFlags::empty(), RemoteAddr { addr: 0, rkey: 1 }).dci_stream(1);
}

/// Finding 1c: a data segment with byte count 0 means 2 GiB to the device;
/// libmlx5 leaves zero-length entries out, and so does the writer now.
#[test]
fn regression_zero_length_data_segment_is_left_out_not_a_2gib_sge() {
    let mut r = Ring::new();
    // SAFETY: the ring is test memory no device reads; the addresses are
    // only stored.
    unsafe {
        r.sq.write(CtrlFlags::empty(), RemoteAddr { addr: 0x1000, rkey: 9 })
            .data(0, 1, 0xdead_0000)
            .data(64, 2, 0x2000)
            .data(0, 3, 0xdead_1000)
            .finish()
    };
    // Control, remote address, one data segment.
    assert_eq!(r.ds(), 3);
    let b = r.bytes();
    assert_eq!(&b[32..36], &64u32.to_be_bytes(), "the 64-byte entry is the only data segment");
    assert_eq!(&b[36..40], &2u32.to_be_bytes());
    assert_eq!(&b[48..56], &[0x5a; 8], "nothing written past the WQE");
}

/// Finding 1c: empty inline data wrote a 16-byte segment of byte count
/// `0 | INLINE_SEG`; libmlx5's `set_data_inl_seg` writes none.
#[test]
fn regression_empty_inline_writes_no_segment() {
    let mut r = Ring::new();
    r.sq.send(CtrlFlags::empty()).inline(&[]).finish();
    assert_eq!(r.ds(), 1, "the control segment alone");
    assert_eq!(&r.bytes()[16..20], &[0x5a; 4], "no inline header written");
    let mut r = Ring::new();
    r.sq.send(CtrlFlags::empty()).inline(&[7; 5]).finish();
    assert_eq!(r.ds(), 2);
    assert_eq!(&r.bytes()[16..20], &(5 | INLINE_SEG).to_be_bytes());
}

/// Finding 1b: `Completion` lacked the sender's fields (src_qp, slid, sl,
/// path bits, P_Key index, GRH flag), which a UD responder needs to answer,
/// and the requester's WQE opcode (byte 56). Decoded as libmlx5's
/// `handle_responder` / `handle_good_req` read them from `mlx5_cqe64`.
#[test]
fn regression_completion_decodes_sender_fields_grh_and_wqe_opcode() {
    let mut rsvd0 = [0u8; 32];
    rsvd0[17] = 0x80 | 0x25; // ml_path: bit 7 is not a path bit
    rsvd0[22..24].copy_from_slice(&0x1357u16.to_be_bytes()); // slid
                                                             // flags_rqpn: GRH bits 28-29 = 2, SL 0xb, source QP 0xabcdef.
    rsvd0[24..28].copy_from_slice(&(2u32 << 28 | 0xb << 24 | 0xab_cdef).to_be_bytes());
    let cqe = Cqe64 {
        rsvd0,
        imm_inval_pkey: Be32::new(0x1111_0007),
        sop_drop_qpn: Be32::new(u32::from(WqeOpcode::SEND.to_raw()) << 24 | 0x77),
        wqe_counter: Be16::new(3),
        op_own: CqeOpcode::RESP_SEND.to_raw() << 4,
        ..Cqe64::default()
    };
    let c: Completion = cqe.decode();
    assert_eq!((c.src_qp(), c.slid(), c.sl(), c.dlid_path_bits(), c.pkey_index()), (0xab_cdef, 0x1357, 0xb, 0x25, 7));
    assert!(c.grh());
    assert_eq!(c.qpn(), 0x77);
    let mut no_grh = cqe;
    no_grh.rsvd0[24] = 0x0b;
    assert!(!no_grh.decode().grh());
    let req = Cqe64 {
        sop_drop_qpn: Be32::new(u32::from(WqeOpcode::RDMA_READ.to_raw()) << 24 | 0x77),
        op_own: CqeOpcode::REQ.to_raw() << 4,
        ..Cqe64::default()
    };
    assert_eq!(req.decode().wqe_opcode(), WqeOpcode::RDMA_READ);
}

/// Finding 1d: a direct UD/DC poster had no way from an AH to the address
/// vector; the datagram segments made from it are what libmlx5 writes
/// (`set_datagram_seg`: dqp_dct assigned, Q_Key in the first 4 bytes;
/// `mlx5dv_wr_set_dc_addr`: dqp_dct ORed, the whole key replaced).
#[test]
fn regression_address_vector_makes_the_ud_and_dc_segments_libmlx5_writes() {
    let mut b = [0u8; 48];
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(7) | 1;
    }
    let av = AddressVector::from_bytes(&b);
    let seg = |s: rrddmma::mlx5dv::seg::DatagramSeg| AddressVector::from_bytes(&cast48(&s)).to_bytes();
    let ud = seg(av.ud(0x12_3456, 0x1111_2222));
    assert_eq!(&ud[..4], &0x1111_2222u32.to_be_bytes());
    assert_eq!(&ud[4..8], &b[4..8]);
    assert_eq!(&ud[8..12], &0x8012_3456u32.to_be_bytes());
    assert_eq!(&ud[12..], &b[12..]);
    let dc = seg(av.dc(0x42, 0x0102_0304_0506_0708));
    assert_eq!(&dc[..8], &0x0102_0304_0506_0708u64.to_be_bytes());
    let ored = u32::from_be_bytes(b[8..12].try_into().unwrap()) | 0x8000_0042;
    assert_eq!(&dc[8..12], &ored.to_be_bytes());
    assert_eq!(&dc[12..], &b[12..]);
}

fn cast48(s: &rrddmma::mlx5dv::seg::DatagramSeg) -> [u8; 48] {
    // SAFETY: `DatagramSeg` is 48 bytes of `#[repr(C)]` integers and arrays.
    unsafe { std::ptr::read_unaligned((s as *const rrddmma::mlx5dv::seg::DatagramSeg).cast::<[u8; 48]>()) }
}
