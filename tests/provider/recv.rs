//! Receive side: CQEs written into a CQ buffer as hardware would, polled by
//! libmlx5's `mlx5_poll_cq` (the C half) and by rrddmma's `CqRing` on a
//! copy of the same buffer, compared completion by completion.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cq::{CqRing, CQ_DOORBELL};
use rrddmma::mlx5dv::cqe::{Completion, CqeOpcode};
use rrddmma::mlx5dv::mmio::{Op, Recorder};
use rrddmma::mlx5dv::seg::WqeOpcode;

use super::build::{unhex, Aligned};
use super::{Mismatch, Mutation};

/// `enum ibv_wc_opcode` and `enum ibv_wc_flags` values.
const WC_RECV: u32 = 128;
const WC_RECV_RDMA_WITH_IMM: u32 = 129;
const WC_WITH_IMM: u32 = 2;
const WC_WITH_INV: u32 = 8;
const WC_GRH: u32 = 1;
/// `enum ibv_wc_opcode` of requester completions.
const WC_SEND: u32 = 0;
const WC_RDMA_WRITE: u32 = 1;
const WC_RDMA_READ: u32 = 2;
const WC_COMP_SWAP: u32 = 3;
const WC_FETCH_ADD: u32 = 4;
/// The C half's wr_id tags: send queue and receive queue entries.
const SQ_TAG: u64 = 0x5100;
const RQ_TAG: u64 = 0x5200;

/// What the check covered, per CQE size.
#[derive(Debug, Default)]
pub struct RecvStats {
    pub cqs: usize,
    pub cqes: usize,
    pub polls: usize,
    pub wraps: usize,
    pub by_kind: BTreeMap<String, usize>,
    pub scatter: usize,
    /// Of those, payloads copied by `CqRing::poll_scattered`.
    pub scatter_copied: usize,
    /// Completions read through the extended poller (with timestamps).
    pub extended: usize,
    /// Arms compared with `mlx5_arm_cq`.
    pub arms: usize,
    /// Views made from `mlx5dv_init_obj` mid-run, polled through after.
    pub views: usize,
}

impl RecvStats {
    pub fn summary(&self, size: u32) -> String {
        let mut s = format!(
            "CQE {size} B: {} CQEs on {} CQs, {} poll calls, {} ring wraps; ",
            self.cqes, self.cqs, self.polls, self.wraps
        );
        for (i, (k, n)) in self.by_kind.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(
            s,
            "; {} scattered to the CQE ({} copied by poll_scattered); {} read through the extended poller (timestamps compared); {} arms \
             against mlx5_arm_cq; {} views from mlx5dv_init_obj polled through",
            self.scatter, self.scatter_copied, self.extended, self.arms, self.views
        );
        s
    }
}

struct Cq {
    ring: CqRing,
    buf: Aligned,
    dbrec: Aligned,
    _uar: Aligned,
    cnt: u32,
    size: u32,
    /// Free-running index of the next entry the producer writes.
    produced: u32,
}

impl Cq {
    fn new(f: &[&str]) -> Cq {
        let cqn: u32 = f[0].parse().unwrap();
        let cnt: u32 = f[1].parse().unwrap();
        let size: u32 = f[2].parse().unwrap();
        let mut buf = Aligned::new((cnt * size) as usize);
        // A fresh CQ, as the C half's (and libmlx5's) init leaves it: every
        // entry invalid with owner 1.
        for i in 0..cnt as usize {
            buf.bytes_mut()[i * size as usize + size as usize - 1] = 0xf1;
        }
        let mut dbrec = Aligned::new(64);
        let mut uar = Aligned::new(64);
        // SAFETY: aligned buffers of the sizes `from_raw` asks for, alive as
        // long as the ring (fields of the same `Cq`); no one else consumes it.
        let ring = unsafe {
            CqRing::from_raw(buf.as_mut_ptr(), cnt, size, dbrec.as_mut_ptr().cast::<Be32>(), uar.as_mut_ptr(), cqn)
        };
        Cq { ring, buf, dbrec, _uar: uar, cnt, size, produced: 0 }
    }

    /// The 64-byte CQE of entry `ci` (the second half of a 128-byte entry).
    fn cqe64(&self, ci: u32) -> &[u8] {
        let at = (ci & (self.cnt - 1)) as usize * self.size as usize + self.size as usize - 64;
        &self.buf.bytes()[at..at + 64]
    }

    /// The first half of a 128-byte entry.
    fn first_half(&self, ci: u32) -> &[u8] {
        let at = (ci & (self.cnt - 1)) as usize * self.size as usize;
        &self.buf.bytes()[at..at + 64]
    }
}

fn kind_name(c: &Completion) -> String {
    c.opcode()
        .name()
        .map_or_else(|| format!("opcode {:#x}", c.opcode().to_raw()), |n| n.trim_start_matches("MLX5_CQE_").into())
}

/// Replays the C half's CQ lines of CQEs of `size` bytes through `CqRing`.
pub fn check(out: &str, size: u32, mutation: Mutation) -> Result<RecvStats, Box<Mismatch>> {
    let mut stats = RecvStats::default();
    let mut cq: Option<Cq> = None;
    let mut pending: Vec<Completion> = Vec::new();
    let mut payloads: Vec<Option<Vec<u8>>> = Vec::new();
    let mut next = 0usize;
    let mut ci_before = 0u32;
    let mut mutated = false;
    for line in out.lines() {
        let mut it = line.split(' ');
        let tag = it.next().unwrap_or("");
        let f: Vec<&str> = it.collect();
        match tag {
            "C" => {
                let this = f[2].parse::<u32>().unwrap() == size;
                cq = this.then(|| Cq::new(&f));
                stats.cqs += usize::from(this);
            }
            "E" => {
                let Some(cq) = cq.as_mut() else { continue };
                let idx: usize = f[0].parse().unwrap();
                let bytes = unhex(f[1]);
                let sz = cq.size as usize;
                cq.buf.bytes_mut()[idx * sz..idx * sz + sz].copy_from_slice(&bytes);
                cq.produced += 1;
                if cq.produced % cq.cnt == 0 {
                    stats.wraps += 1;
                }
                stats.cqes += 1;
            }
            "O" => {
                let Some(cq) = cq.as_mut() else { continue };
                let ne: usize = f[0].parse().unwrap();
                let n: usize = f[1].parse().unwrap();
                let their_dbrec: u32 = f[2].parse().unwrap();
                stats.polls += 1;
                ci_before = cq.ring.consumer_index();
                // Half the calls through `poll`, half through
                // `poll_scattered` one by one, which copies the payload
                // scattered to the CQE (compared below).
                pending.clear();
                payloads.clear();
                if stats.polls % 2 == 0 {
                    let mut out = vec![Completion::default(); ne];
                    let got = cq.ring.poll(&mut out);
                    pending.extend_from_slice(&out[..got]);
                } else {
                    let mut buf = [0u8; 64];
                    while pending.len() < ne {
                        let Some((c, n)) = cq.ring.poll_scattered(&mut buf) else { break };
                        pending.push(c);
                        payloads.push(Some(buf[..n].to_vec()));
                    }
                }
                let got = pending.len();
                next = 0;
                let at = format!("CQ poll {} (ne {ne}, consumer index {ci_before})", stats.polls);
                if got != n {
                    return Err(Mismatch::value(&format!("CQE {size} B"), &at, "completions returned", n, got).into());
                }
                // SAFETY: the consumer record is the first 4 aligned bytes of `dbrec`.
                let ours = unsafe { cq.dbrec.as_mut_ptr().cast::<Be32>().read() }.get();
                if ours != their_dbrec {
                    return Err(
                        Mismatch::value(&format!("CQE {size} B"), &at, "consumer record", their_dbrec, ours).into()
                    );
                }
            }
            "J" => {
                let Some(cq) = cq.as_mut() else { continue };
                cq_view(cq, &f)?;
                stats.views += 1;
            }
            "V" => {
                if let Some(cq) = cq.as_mut() {
                    cq.ring.event_received();
                }
            }
            "A" => {
                let Some(cq) = cq.as_mut() else { continue };
                let solicited = f[0] == "1";
                let their_rec: u32 = f[1].parse().unwrap();
                let their_db = unhex(f[2]);
                let mut rec = Recorder::default();
                cq.ring.arm(&mut rec, solicited);
                stats.arms += 1;
                // SAFETY: the arm record is the second 4 aligned bytes of `dbrec`.
                let ours_rec = unsafe { cq.dbrec.as_mut_ptr().cast::<Be32>().add(1).read() }.get();
                let at = format!("arm {} (solicited {solicited})", stats.arms);
                let kind = format!("CQ {size} B arm");
                if ours_rec != their_rec {
                    return Err(Mismatch::value(&kind, &at, "arm record (dbrec[1])", their_rec, ours_rec).into());
                }
                let expected = [
                    Op::DbRec(their_rec),
                    Op::WcStart,
                    Op::Write64(CQ_DOORBELL, their_db.clone().try_into().expect("8 doorbell bytes")),
                    Op::Flush,
                ];
                if rec.ops != expected {
                    return Err(Mismatch::value(
                        &kind,
                        &at,
                        "arm sequence (record, wc_start, doorbell at UAR + 0x20, flush)",
                        format!("{expected:?}"),
                        format!("{:?}", rec.ops),
                    )
                    .into());
                }
            }
            "w" | "x" => {
                let Some(cq) = cq.as_ref() else { continue };
                let mut c = pending[next];
                let ci = ci_before.wrapping_add(next as u32);
                next += 1;
                let mutate = mutation == Mutation::DecoderByteLen
                    && !mutated
                    && c.opcode() == CqeOpcode::RESP_SEND
                    && c.status().to_raw() == 0;
                if mutate {
                    // The mutation check: one decoded field off by one bit
                    // (the entry decoded with its byte count's low bit flipped).
                    let mut raw = [0u8; 64];
                    raw.copy_from_slice(cq.cqe64(ci));
                    raw[47] ^= 1;
                    // SAFETY: `Cqe64` is 64 bytes of plain integers; any 64
                    // bytes are one (read unaligned from the array).
                    c = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast::<rrddmma::mlx5dv::cqe::Cqe64>()) }
                        .decode();
                    mutated = true;
                }
                let payload = payloads.get(next - 1).cloned().flatten();
                compare(cq, ci, &f, &c, payload, size, tag == "x", &mut stats)?;
            }
            _ => {}
        }
    }
    Ok(stats)
}

/// One completion: libmlx5's (`w`: an `ibv_wc` of `mlx5_poll_cq`; `x`, with
/// `ex`: the extended poller's readers and the timestamp) against ours.
#[allow(clippy::too_many_arguments)]
fn compare(
    cq: &Cq,
    ci: u32,
    w: &[&str],
    c: &Completion,
    payload: Option<Vec<u8>>,
    size: u32,
    ex: bool,
    stats: &mut RecvStats,
) -> Result<(), Box<Mismatch>> {
    let num = |i: usize| -> u64 { w[i].parse().unwrap() };
    let (wr_id, status, opcode, vendor_err, byte_len, imm, qp_num) =
        (num(0), num(1) as u32, num(2) as u32, num(3) as u32, num(4) as u32, num(5) as u32, num(6) as u32);
    let wc_flags = num(8) as u32;
    let scatter = w[13];
    let cqe = cq.cqe64(ci);
    let kind = format!("CQE {size} B {}", kind_name(c));
    let at = format!("entry {} (consumer index {ci})", ci & (cq.cnt - 1));
    *stats.by_kind.entry(kind_name(c)).or_default() += 1;
    // Field, its first byte in the 64-byte CQE, libmlx5's value, ours.
    let mut checks: Vec<(&str, usize, u64, u64)> = vec![("qp_num", 57, qp_num.into(), c.qpn().into())];
    let req = c.opcode() == CqeOpcode::REQ || c.opcode() == CqeOpcode::REQ_ERR;
    let error = c.opcode() == CqeOpcode::REQ_ERR || c.opcode() == CqeOpcode::RESP_ERR;
    // wr_id through the queue's table, indexed by the decoded wqe_counter.
    let tag = if req { SQ_TAG } else { RQ_TAG };
    let ours_wr_id = tag << 48 | u64::from(c.qpn()) << 16 | u64::from(c.wqe_counter() & 63);
    checks.push(("wr_id (via wqe_counter)", 60, wr_id, ours_wr_id));
    checks.push(("status", 55, status.into(), c.status().to_raw().into()));
    if error {
        checks.push(("vendor_err", 54, vendor_err.into(), c.vendor_err().into()));
    }
    let resp_ok = !req && !error;
    if resp_ok {
        let with_imm = c.opcode() == CqeOpcode::RESP_WR_IMM || c.opcode() == CqeOpcode::RESP_SEND_IMM;
        let with_inv = c.opcode() == CqeOpcode::RESP_SEND_INV;
        let ours_op = if c.opcode() == CqeOpcode::RESP_WR_IMM { WC_RECV_RDMA_WITH_IMM } else { WC_RECV };
        checks.push(("opcode", 63, opcode.into(), ours_op.into()));
        checks.push(("byte_len", 44, byte_len.into(), c.byte_len().into()));
        let ours_flags = if with_imm { WC_WITH_IMM } else { 0 } | if with_inv { WC_WITH_INV } else { 0 };
        checks.push((
            "wc_flags (WITH_IMM, WITH_INV)",
            63,
            (wc_flags & (WC_WITH_IMM | WC_WITH_INV)).into(),
            ours_flags.into(),
        ));
        if with_imm {
            checks.push(("imm_data", 36, imm.into(), c.imm().into()));
        }
        if with_inv {
            checks.push(("invalidated_rkey", 36, imm.into(), u32::from_be(c.imm()).into()));
        }
        if !ex {
            // mlx5_poll_cq's handle_responder fills the sender's address for
            // every successful receive (the extended poller's line leaves
            // them 0: they were not asked for).
            checks.push(("src_qp", 25, num(7), c.src_qp().into()));
            checks.push(("pkey_index", 38, num(9), c.pkey_index().into()));
            checks.push(("slid", 22, num(10), c.slid().into()));
            checks.push(("sl", 24, num(11), c.sl().into()));
            checks.push(("dlid_path_bits", 17, num(12), c.dlid_path_bits().into()));
            checks.push(("wc_flags (GRH)", 24, (wc_flags & WC_GRH).into(), u64::from(c.grh())));
        }
    }
    if c.opcode() == CqeOpcode::REQ {
        // The requester's WQE opcode (byte 56) decides ibv_wc's opcode and
        // WITH_IMM, as handle_good_req maps it (WQE opcodes of mlx5dv.h).
        let (op, with_imm) = match c.wqe_opcode() {
            WqeOpcode::RDMA_WRITE => (Some(WC_RDMA_WRITE), false),
            WqeOpcode::RDMA_WRITE_IMM => (Some(WC_RDMA_WRITE), true),
            WqeOpcode::SEND | WqeOpcode::SEND_INVAL => (Some(WC_SEND), false),
            WqeOpcode::SEND_IMM => (Some(WC_SEND), true),
            WqeOpcode::RDMA_READ => (Some(WC_RDMA_READ), false),
            WqeOpcode::ATOMIC_CS => (Some(WC_COMP_SWAP), false),
            WqeOpcode::ATOMIC_FA => (Some(WC_FETCH_ADD), false),
            _ => (None, false),
        };
        if let Some(op) = op {
            checks.push(("opcode (from the WQE opcode)", 56, opcode.into(), op.into()));
        }
        // The extended poller's `ibv_wc_read_wc_flags` sets WITH_IMM for
        // responder CQEs only (a libmlx5 difference between its pollers):
        // compared on `mlx5_poll_cq`'s line.
        if !ex {
            checks.push(("wc_flags (WITH_IMM)", 56, (wc_flags & WC_WITH_IMM).into(), u64::from(with_imm) * 2));
        }
    }
    if ex {
        // The extended poller's readers take these from the CQE for every
        // completion: byte_cnt, imm_inval_pkey (host order for SEND_INV),
        // the timestamp.
        stats.extended += 1;
        checks.push(("completion timestamp (ibv_wc_read_completion_ts)", 48, num(14), c.timestamp()));
        checks.push(("byte_len (ibv_wc_read_byte_len)", 44, byte_len.into(), c.byte_len().into()));
        if !error {
            let ours = if c.opcode() == CqeOpcode::RESP_SEND_INV { u32::from_be(c.imm()) } else { c.imm() };
            checks.push(("imm_data (ibv_wc_read_imm_data)", 36, imm.into(), ours.into()));
        }
    } else if c.opcode() == CqeOpcode::REQ && c.wqe_opcode() == WqeOpcode::RDMA_READ {
        checks.push(("byte_len", 44, byte_len.into(), c.byte_len().into()));
    }
    for (field, byte, theirs, ours) in checks {
        if theirs != ours {
            return Err(Mismatch {
                kind,
                at,
                field: field.into(),
                byte: Some(byte),
                theirs: format!("{theirs:#x}"),
                ours: format!("{ours:#x}"),
            }
            .into());
        }
    }
    // Scatter-to-CQE: the bytes libmlx5 copied to the receive buffer, against
    // where the decoded format says they are (32: the 64-byte CQE; 64: the
    // first half of a 128-byte entry); without scatter the buffer stays zero.
    let copied = payload.is_some();
    if resp_ok && (scatter != "~" && scatter != "-" || scatter == "-" && c.byte_len() == 0) {
        let theirs = unhex(scatter);
        let n = c.byte_len() as usize;
        // Through `poll_scattered` when that call took it, else read where
        // the decoded format says the payload is.
        let ours: Vec<u8> = match (payload, c.inline_scatter()) {
            (Some(p), 32 | 64) => p,
            (_, 32) => cqe[..n.min(64)].to_vec(),
            (_, 64) => cq.first_half(ci)[..n.min(64)].to_vec(),
            _ => vec![0; n],
        };
        stats.scatter += usize::from(c.inline_scatter() != 0);
        stats.scatter_copied += usize::from(c.inline_scatter() != 0 && copied);
        if let Some(i) = (0..theirs.len().max(ours.len())).find(|&i| theirs.get(i) != ours.get(i)) {
            return Err(Mismatch {
                kind,
                at,
                field: format!("scattered payload ({} bytes in the CQE)", c.inline_scatter()),
                byte: Some(i),
                theirs: format!("{:?}", theirs.get(i)),
                ours: format!("{:?}", ours.get(i)),
            }
            .into());
        }
    }
    Ok(())
}

/// `mlx5dv_init_obj`'s report on the provider's CQ, mapped onto ours and
/// made into a ring by `obj::cq_ring_of` (the view code of `obj::cq_ring`):
/// it must start at libmlx5's consumer index, and the rest of the run polls
/// and arms through it.
fn cq_view(cq: &mut Cq, f: &[&str]) -> Result<(), Box<Mismatch>> {
    let rc: i32 = f[0].parse().unwrap();
    let buf_off: i64 = f[1].parse().unwrap();
    let cqe_cnt: u32 = f[2].parse().unwrap();
    let cqe_size: u32 = f[3].parse().unwrap();
    let db_off: i64 = f[4].parse().unwrap();
    let uar_off: i64 = f[5].parse().unwrap();
    let cqn: u32 = f[6].parse().unwrap();
    let their_ci: u32 = f[7].parse().unwrap();
    let kind = format!("CQ {} B view (mlx5dv_init_obj)", cq.size);
    let at = format!("CQ {cqn:#x}");
    let bad = |field: &str, theirs: String, ours: String| -> Box<Mismatch> {
        Mismatch::value(&kind, &at, field, theirs, ours).into()
    };
    if rc != 0 {
        return Err(bad("mlx5dv_init_obj return", rc.to_string(), "0".into()));
    }
    let inside = |off: i64, size: usize, len: usize| usize::try_from(off).ok().filter(|o| o + len <= size);
    let len = cq.buf.bytes().len();
    let b = inside(buf_off, len, (cqe_cnt * cqe_size) as usize)
        .ok_or_else(|| bad("buf", format!("offset {buf_off}"), "outside the CQ buffer".into()))?;
    let d =
        inside(db_off, 64, 8).ok_or_else(|| bad("dbrec", format!("offset {db_off}"), "outside the records".into()))?;
    // The UAR page stands in as 64 bytes here: the doorbell is at 0x20.
    let u = inside(uar_off, 64, 0x28)
        .ok_or_else(|| bad("cq_uar", format!("offset {uar_off}"), "outside the UAR".into()))?;
    let dv = rrddmma::bindings::mlx5dv_cq {
        buf: cq.buf.as_mut_ptr().wrapping_add(b).cast(),
        dbrec: cq.dbrec.as_mut_ptr().wrapping_add(d).cast(),
        cqe_cnt,
        cqe_size,
        cq_uar: cq._uar.as_mut_ptr().wrapping_add(u).cast(),
        cqn,
        comp_mask: 0,
    };
    // SAFETY: `dv` points into this CQ's buffers as libmlx5 reported them
    // (checked inside above), alive as long as `cq`; the old ring is
    // replaced below and nothing else consumes the CQ.
    let ring = unsafe { rrddmma::mlx5dv::obj::cq_ring_of(&dv) };
    if ring.consumer_index() != their_ci & 0xff_ffff {
        return Err(bad(
            "start consumer index (from dbrec[0])",
            their_ci.to_string(),
            ring.consumer_index().to_string(),
        ));
    }
    if ring.cqn() != cqn || cqe_cnt != cq.cnt || cqe_size != cq.size {
        return Err(bad(
            "cqn, cqe_cnt, cqe_size",
            format!("{cqn} {cqe_cnt} {cqe_size}"),
            format!("{} {} {}", ring.cqn(), cq.cnt, cq.size),
        ));
    }
    cq.ring = ring;
    Ok(())
}
