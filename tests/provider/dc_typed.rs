//! Typed DC builders (`SqRing::dc(&target)`, with `Dc::stream`) and the
//! typed RC builders, on the harness's inputs:
//! - the C half's request lists (`Q`/`D`/`R` lines), which libmlx5 posted
//!   through `ibv_wr_*` + `mlx5dv_wr_set_dc_addr(_stream)` on its DCIs and
//!   through `mlx5_post_send` on RC queues, are replayed here through the
//!   typed builders instead of the raw writer (send.rs compares the WQEs,
//!   producer index, doorbell record and doorbell write as for the raw one);
//! - masked and extended (16- and 32-byte) atomics, which libmlx5 cannot
//!   post, against the reference WQEs of the C half's `run_dc_typed` (`Z`
//!   lines; the reference's sources are listed there), on an RC ring and a
//!   DCI ring, each WQE's error completion naming its stream
//!   (`SqRing::stream_of`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rrddmma::mlx5dv::av::AddressVector;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cqe::CqeOpcode;
use rrddmma::mlx5dv::mmio::Recorder;
use rrddmma::mlx5dv::seg::{CtrlFlags, DatagramSeg};
use rrddmma::mlx5dv::sq::{SqRing, SqTransport};
use rrddmma::mlx5dv::wqe::{ExtAtomics, Wqe};

/// The extended-atomic proof, assumed: these rings are test memory.
fn ext<const N: usize, const DC: bool>() -> ExtAtomics<N, DC> {
    // SAFETY: no device reads these rings.
    unsafe { ExtAtomics::assume() }
}
use rrddmma::prim::RemoteAddr;

use super::build::{unhex, Aligned};
use super::send::{Request, CAS, FAA, F_INLINE, READ, SEND, SEND_IMM, SEND_INV, WRITE, WRITE_IMM};
use super::{Mismatch, Mutation};

/// Ends a typed WQE: `post` when given the recorder, else `finish`.
macro_rules! done {
    ($w:expr, $post:expr) => {
        match $post {
            Some(rec) => $w.post(rec),
            None => $w.finish(),
        }
    };
}

/// The request's data segments, as `send.rs`'s raw replay adds them (an
/// atomic's target is 8 bytes, whatever its SGE says).
fn gather<'s>(mut w: Wqe<'s, false>, r: &Request) -> Wqe<'s, false> {
    for &(len, lkey, addr) in &r.sges {
        let len = if r.op == CAS || r.op == FAA { 8 } else { len };
        // SAFETY: the ring is never handed to a device: the segment's
        // address is only compared, never dereferenced.
        w = unsafe { w.data(len, lkey, addr) };
    }
    w
}

/// A payload-taking WQE (SEND, WRITE): one inline segment, or the gather list.
fn payload(w: Wqe<'_, true>, r: &Request, post: Option<&mut Recorder>) -> u16 {
    if r.flags & F_INLINE != 0 && !r.sges.is_empty() {
        return done!(w.inline(&r.inline), post);
    }
    let mut it = r.sges.iter();
    let Some(&(len, lkey, addr)) = it.next() else {
        return done!(w, post);
    };
    // SAFETY: as in `gather`.
    let mut w = unsafe { w.data(len, lkey, addr) };
    for &(len, lkey, addr) in it {
        // SAFETY: as above.
        w = unsafe { w.data(len, lkey, addr) };
    }
    done!(w, post)
}

/// Writes request `r` with the typed builders: on a DCI ring through
/// `sq.dc(&target)` (with its stream when `streams`), on an RC ring through
/// the connected builders. `stream_flip` XORs the stream given (the mutation
/// check). `imm` of the C half's lines is as libmlx5 stores it (big endian)
/// for the immediates and in host order for SEND_WITH_INV's key; the typed
/// builders take host order.
pub(super) fn write_typed(
    sq: &mut SqRing,
    r: &Request,
    flags: CtrlFlags,
    streams: bool,
    stream_flip: u16,
    post: Option<&mut Recorder>,
) -> u16 {
    let remote = RemoteAddr { addr: r.raddr, rkey: r.rkey };
    let imm = u32::from_be(r.imm);
    let Some((dctn, key, stream, av)) = &r.dc else {
        return match r.op {
            WRITE => payload(sq.write(flags, remote), r, post),
            WRITE_IMM => payload(sq.write_imm(flags, remote, imm), r, post),
            SEND => payload(sq.send(flags), r, post),
            SEND_IMM => payload(sq.send_imm(flags, imm), r, post),
            SEND_INV => payload(sq.send_inv(flags, r.imm), r, post),
            READ => done!(gather(sq.read(flags, remote), r), post),
            CAS => done!(gather(sq.cas(flags, remote, r.compare_add, r.swap), r), post),
            FAA => done!(gather(sq.fetch_add(flags, remote, r.compare_add), r), post),
            op => panic!("the harness posted RC opcode {op}, which has no typed builder here"),
        };
    };
    let target = AddressVector::from_bytes(av[..48].try_into().unwrap()).dc(*dctn, *key);
    let mut d = sq.dc(&target);
    if streams {
        d = d.stream(*stream ^ stream_flip);
    }
    match r.op {
        WRITE => payload(d.write(flags, remote), r, post),
        WRITE_IMM => payload(d.write_imm(flags, remote, imm), r, post),
        SEND => payload(d.send(flags), r, post),
        SEND_IMM => payload(d.send_imm(flags, imm), r, post),
        SEND_INV => payload(d.send_inv(flags, r.imm), r, post),
        READ => done!(gather(d.read(flags, remote), r), post),
        CAS => done!(gather(d.cas(flags, remote, r.compare_add, r.swap), r), post),
        FAA => done!(gather(d.fetch_add(flags, remote, r.compare_add), r), post),
        op => panic!("the harness posted DC opcode {op}, which has no typed builder here"),
    }
}

/// What the masked / extended atomics check covered.
#[derive(Debug, Default)]
pub struct ExtStats {
    /// WQEs per `RC|DC` and kind.
    pub wqes: BTreeMap<String, usize>,
    /// DCI WQEs on a stream other than 0.
    pub streams: usize,
    /// Error completions whose stream `stream_of` named.
    pub error_streams: usize,
    /// WQEs that crossed the ring's end.
    pub wrapped: usize,
}

impl ExtStats {
    pub fn total(&self) -> usize {
        self.wqes.values().sum()
    }

    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (i, (k, n)) in self.wqes.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        s
    }
}

const KINDS: [&str; 6] =
    ["masked CAS 8", "masked FA 8", "masked CAS 16", "masked FA 16", "masked CAS 32", "masked FA 32"];

/// Field names of a `Z` WQE by byte: control, DC address (DCI), remote
/// address, operands, data.
fn field(dc: bool, cas: bool, sz: usize, b: usize) -> String {
    let av = if dc { 48 } else { 0 };
    let ops =
        if cas { ["swap", "compare", "swap_mask", "compare_mask"].as_slice() } else { &["add", "field_boundary"] };
    let ops_at = 32 + av;
    match b {
        0..=3 => "ctrl.opmod_idx_opcode".into(),
        4..=7 => "ctrl.qpn_ds".into(),
        8 => "ctrl.signature".into(),
        9 | 10 => "ctrl.dci_stream_channel_id".into(),
        11 => "ctrl.fm_ce_se".into(),
        12..=15 => "ctrl.imm".into(),
        _ if b < 16 + av => "datagram (DC address)".into(),
        _ if b < ops_at => "raddr".into(),
        _ if b < ops_at + ops.len() * sz => format!("operand.{}", ops[(b - ops_at) / sz]),
        _ => "data".into(),
    }
}

/// One ring of 8 basic blocks for the `Z` lines of one family.
struct Ring {
    sq: SqRing,
    cq: crate::mlx5_support::SoftCq,
    buf: Aligned,
    _dbrec: Aligned,
    _bf: Aligned,
}

impl Ring {
    fn new(qpn: u32, transport: SqTransport) -> Ring {
        let mut buf = Aligned::new(8 * 64);
        let mut dbrec = Aligned::new(64);
        let mut bf = Aligned::new(64);
        // SAFETY: aligned buffers of the sizes `from_raw` asks for, alive as
        // long as the ring (fields of the same struct); no device sees them.
        let mut sq = unsafe {
            SqRing::from_raw(buf.as_mut_ptr(), 8, dbrec.as_mut_ptr().cast::<Be32>(), bf.as_mut_ptr(), 0, qpn)
        };
        // SAFETY: the family the C half built this queue's WQEs for.
        unsafe { sq.set_transport(transport) };
        if transport == SqTransport::DcInitiator {
            sq.set_dci_streams(crate::build::LOG_DCI_STREAMS);
        }
        let cq = crate::mlx5_support::SoftCq::new(16);
        sq.bind_cq(&cq.ring);
        Ring { sq, cq, buf, _dbrec: dbrec, _bf: bf }
    }
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    b.try_into().unwrap()
}

/// Writes the masked / extended atomic of a `Z` line with the typed
/// builder of its size (through `dc` when `target` is given).
#[allow(clippy::too_many_arguments)]
fn write_ext(
    sq: &mut SqRing,
    target: Option<(&DatagramSeg, u16)>,
    kind: usize,
    fm: CtrlFlags,
    remote: RemoteAddr,
    ops: &[u8],
    lkey: u32,
    laddr: u64,
) -> u16 {
    let sz = 8usize << (kind / 2);
    let op = |i: usize| &ops[i * sz..(i + 1) * sz];
    let u = |i: usize| u64::from_be_bytes(arr(op(i)));
    // The builders take compare before swap: the lines hold swap, compare,
    // swap mask, compare mask (the WQE's order).
    macro_rules! build {
        ($b:expr) => {{
            let w = match kind {
                0 => $b.masked_cas(fm, remote, u(1), u(3), u(0), u(2)),
                1 => $b.masked_fa(fm, remote, u(0), u(1)),
                2 => $b.masked_cas_ext::<16>(ext(), fm, remote, &arr(op(1)), &arr(op(3)), &arr(op(0)), &arr(op(2))),
                3 => $b.masked_fa_ext::<16>(ext(), fm, remote, &arr(op(0)), &arr(op(1))),
                4 => $b.masked_cas_ext::<32>(ext(), fm, remote, &arr(op(1)), &arr(op(3)), &arr(op(0)), &arr(op(2))),
                5 => $b.masked_fa_ext::<32>(ext(), fm, remote, &arr(op(0)), &arr(op(1))),
                k => panic!("the C half printed kind {k}"),
            };
            // SAFETY: the ring is never handed to a device; the address is only compared.
            unsafe { w.data(sz as u32, lkey, laddr) }.finish()
        }};
    }
    match target {
        Some((t, stream)) => build!(sq.dc(t).stream(stream)),
        None => build!(sq),
    }
}

/// Replays the `Z` lines through the typed builders and compares each WQE
/// with the reference; every DCI WQE then completes in error and
/// `stream_of` must name its stream. `Mutation::ExtOperand` flips bit 0 of
/// the first 32-byte masked CAS's compare mask on our side.
pub fn check_ext(out: &str, mutation: Mutation) -> Result<ExtStats, Box<Mismatch>> {
    let mut stats = ExtStats::default();
    let mut rings: [Option<Ring>; 2] = [None, None];
    let mut mutated = false;
    for (i, line) in out.lines().filter(|l| l.starts_with("Z ")).enumerate() {
        let f: Vec<&str> = line.split(' ').skip(1).collect();
        let n = |i: usize| -> u64 { f[i].parse().unwrap() };
        let (dc, kind, qpn, pi) = (n(0) == 1, n(1) as usize, n(2) as u32, n(3) as u32);
        let fm = CtrlFlags::from_bits_retain(n(4) as u8);
        let remote = RemoteAddr { addr: n(5), rkey: n(6) as u32 };
        let (lkey, laddr, dctn, key, stream) = (n(7) as u32, n(8), n(9) as u32, n(10), n(11) as u16);
        let av = unhex(f[12]);
        let mut ops = unhex(f[13]);
        let reference = unhex(f[14]);
        if mutation == Mutation::ExtOperand && kind == 4 && !mutated {
            // compare mask: the fourth 32-byte operand; its last byte holds bit 0.
            ops[4 * 32 - 1] ^= 1;
            mutated = true;
        }
        let family = if dc { SqTransport::DcInitiator } else { SqTransport::Connected };
        let ring = rings[usize::from(dc)].get_or_insert_with(|| Ring::new(qpn, family));
        assert_eq!(ring.sq.cur_post(), pi, "Z line {i}: the rings stay in step with the C half's");
        let target = AddressVector::from_bytes(av[..48].try_into().unwrap()).dc(dctn, key);
        let start = ring.sq.cur_post();
        let wqe_index = write_ext(&mut ring.sq, dc.then_some((&target, stream)), kind, fm, remote, &ops, lkey, laddr);
        let bytes = ring.buf.bytes();
        let at = (start as usize & 7) * 64;
        let ours: Vec<u8> = (0..reference.len()).map(|b| bytes[(at + b) % 512]).collect();
        let (sz, cas) = (8usize << (kind / 2), kind % 2 == 0);
        let name = format!("{} {}", if dc { "DC" } else { "RC" }, KINDS[kind]);
        if let Some(b) = (0..reference.len()).find(|&b| ours[b] != reference[b]) {
            return Err(Mismatch::at_byte(
                format!("typed {name} (reference from the documented layout)"),
                format!("WQE {i}"),
                field(dc, cas, sz, b),
                b,
                reference[b],
                ours[b],
            ));
        }
        stats.wrapped += usize::from(at + reference.len() > 512);
        stats.streams += usize::from(dc && stream != 0);
        *stats.wqes.entry(name.clone()).or_default() += 1;
        // Every DCI WQE completes in error: the completion names its stream.
        let opcode = if dc { CqeOpcode::REQ_ERR } else { CqeOpcode::REQ };
        ring.cq.produce(qpn, opcode, wqe_index);
        let done = ring.cq.poll();
        if dc {
            let named = ring.sq.stream_of(&done);
            if named != Some(stream) {
                return Err(Box::new(Mismatch::value(
                    &format!("typed {name}: error completion"),
                    &format!("WQE {i}"),
                    "SqRing::stream_of",
                    format!("{:?}", Some(stream)),
                    format!("{named:?}"),
                )));
            }
            stats.error_streams += 1;
        }
        assert!(ring.sq.retire(&done), "Z line {i}: the WQE retires");
    }
    Ok(stats)
}
