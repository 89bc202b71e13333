//! CQE compression: sessions written by the C half's encoder (built from the
//! documented layout, not from our decoder) expand in `CqRing` to exactly
//! the CQEs they were made from, lap after lap: receive sessions, and
//! requester sessions whose mini-CQEs name non-consecutive WQEs (unsignalled
//! WQEs between them).

use std::collections::BTreeMap;

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::Cqe64;
use rrddmma::mlx5dv::mini::CqeResFormat;

use super::build::{splitmix, unhex, Aligned};
use super::{Mismatch, Mutation};

/// The field of a 64-byte CQE that byte `b` belongs to.
fn cqe_field(b: usize) -> &'static str {
    match b {
        2..=3 => "wqe_id",
        12..=15 => "rss_hash_result",
        20..=21 => "check_sum",
        22..=23 => "slid",
        24..=27 => "flags_rqpn",
        32..=35 => "srqn_uidx",
        36..=39 => "imm_inval_pkey",
        44..=47 => "byte_cnt",
        48..=55 => "timestamp",
        56..=59 => "sop_drop_qpn",
        60..=61 => "wqe_counter",
        62 => "signature",
        63 => "op_own",
        _ => "receive fields (bytes 0-43)",
    }
}

fn bytes(c: &Cqe64) -> [u8; 64] {
    // SAFETY: `Cqe64` is 64 plain bytes without padding.
    unsafe { std::mem::transmute(*c) }
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct ZipStats {
    pub cqs: usize,
    pub cqes: usize,
    pub sessions: usize,
    pub compressed: usize,
    pub plain: usize,
    pub longest: usize,
    /// Sessions whose entries cross the ring's end.
    pub wrapped: usize,
    pub laps: u64,
    /// Receive sessions by the CQ's format.
    pub by_format: BTreeMap<&'static str, usize>,
    /// Requester sessions (title opcode REQ), and those whose WQE counters
    /// are not the title's + i (unsignalled WQEs between them).
    pub requester: usize,
    pub requester_gapped: usize,
    /// Expanded requester CQEs, and requester CQEs written whole.
    pub requester_cqes: usize,
    pub requester_plain: usize,
}

impl ZipStats {
    pub fn summary(&self) -> String {
        let f: Vec<String> = self.by_format.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(
            "CQE compression: {} CQEs on {} CQs ({} in {} compressed sessions of up to {}, {} written whole; \
             receive sessions by format {}; {} requester sessions of {} CQEs, {} of them with unsignalled WQEs \
             between their CQEs' WQEs, {} requester CQEs written whole), {} sessions across the ring's end, {} laps",
            self.cqes,
            self.cqs,
            self.compressed,
            self.sessions,
            self.longest,
            self.plain,
            f.join(", "),
            self.requester,
            self.requester_cqes,
            self.requester_gapped,
            self.requester_plain,
            self.wrapped,
            self.laps
        )
    }
}

struct Ring {
    cq: CqRing,
    buf: Aligned,
    dbrec: Aligned,
    _uar: Aligned,
    cnt: u32,
    sz: usize,
    format: &'static str,
    /// CQEs taken.
    taken: u32,
}

/// Replays the encoder's lines: entries into a ring of ours, then polls it
/// dry and compares each CQE with the one the session was made from.
pub fn check(out: &str, mutation: Mutation) -> Result<ZipStats, Box<Mismatch>> {
    let mut stats = ZipStats::default();
    let mut ring: Option<Ring> = None;
    let mut want: Vec<(u32, u32, Vec<u8>)> = Vec::new();
    let mut seed = 0x7a69_7000u64;
    let mut mutated = false;
    // Whether the session under way was counted in `requester_gapped`.
    let mut gapped = false;
    for line in out.lines() {
        let mut it = line.split(' ');
        let tag = it.next().unwrap_or("");
        let f: Vec<&str> = it.collect();
        match tag {
            "K" => {
                let (cqn, cnt, sz, fmt): (u32, u32, u32, u32) =
                    (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap());
                let format = [CqeResFormat::Hash, CqeResFormat::Csum, CqeResFormat::CsumStridx]
                    .into_iter()
                    .find(|x| u32::from(x.to_raw()) == fmt)
                    .unwrap_or_else(|| panic!("the encoder used format {fmt}"));
                let mut buf = Aligned::new((cnt * sz) as usize);
                for i in 0..cnt as usize {
                    buf.bytes_mut()[i * sz as usize + sz as usize - 1] = 0xf1;
                }
                let mut dbrec = Aligned::new(64);
                let mut uar = Aligned::new(64);
                // SAFETY: the buffers are aligned, sized as `from_raw` asks,
                // and live beside the ring; only this replay writes them, as
                // the device would, between polls.
                let mut cq = unsafe {
                    CqRing::from_raw(
                        buf.as_mut_ptr(),
                        cnt,
                        sz,
                        dbrec.as_mut_ptr().cast::<Be32>(),
                        uar.as_mut_ptr(),
                        cqn,
                    )
                };
                // SAFETY: `buf` comes from a mutable pointer; nothing else writes it while polled.
                unsafe { cq.set_compression(Some(format)) };
                if let Some(r) = ring.take() {
                    stats.laps += u64::from(r.taken / r.cnt);
                }
                ring = Some(Ring { cq, buf, dbrec, _uar: uar, cnt, sz: sz as usize, format: format.name(), taken: 0 });
                stats.cqs += 1;
            }
            "S" => {
                let r = ring.as_mut().expect("an S line before any K line");
                let idx: usize = f[0].parse().unwrap();
                let e = unhex(f[1]);
                r.buf.bytes_mut()[idx * r.sz..idx * r.sz + r.sz].copy_from_slice(&e);
            }
            "X" => want.push((f[0].parse().unwrap(), f[1].parse().unwrap(), unhex(f[2]))),
            "Y" => {
                let r = ring.as_mut().expect("a Y line before any K line");
                let short = r.format.trim_start_matches("MLX5DV_CQE_RES_FORMAT_");
                let size = r.sz;
                let kind = |n: u32, req: bool| {
                    let what = if req { "requester " } else { "" };
                    if n == 0 {
                        format!("compressing CQ ({size} B, {short}; libmlx5 = the encoder): {what}CQE written whole")
                    } else {
                        format!("compressing CQ ({size} B, {short}; libmlx5 = the encoder): {what}session of {n}")
                    }
                };
                // Poll in batches of 1..16 until the ring is dry.
                let mut got: Vec<Cqe64> = Vec::new();
                loop {
                    let mut batch = [Cqe64::default(); 16];
                    let k = 1 + (splitmix(&mut seed) % 16) as usize;
                    let n = r.cq.poll_cqes(&mut batch[..k]);
                    got.extend_from_slice(&batch[..n]);
                    if n < k {
                        break;
                    }
                }
                // The first CQE's WQE counter of the session under way.
                let mut first_counter = 0u16;
                for (j, (n, i, theirs)) in want.iter().enumerate() {
                    let at = format!("CQE {} (entry {})", r.taken, r.taken & (r.cnt - 1));
                    // Opcode REQ (0) in op_own's high nibble.
                    let req = theirs[63] >> 4 == 0;
                    let counter = u16::from_be_bytes([theirs[60], theirs[61]]);
                    if *i == 0 {
                        first_counter = counter;
                    }
                    let Some(c) = got.get(j) else {
                        return Err(Mismatch::value(&kind(*n, req), &at, "CQE count", want.len(), got.len()).into());
                    };
                    let mut ours = bytes(c);
                    if mutation == Mutation::MiniByteCnt && !mutated && *i > 0 {
                        // The mutation check: one expanded field changed.
                        ours[47] ^= 1;
                        mutated = true;
                    }
                    let title_plus_i = first_counter.wrapping_add(*i as u16);
                    if mutation == Mutation::MiniReqCounter && !mutated && req && *n > 0 && counter != title_plus_i {
                        // The expansion before B-3: the title's counter + i.
                        ours[60..62].copy_from_slice(&title_plus_i.to_be_bytes());
                        mutated = true;
                    }
                    if req && *n > 0 && *i > 0 && counter != title_plus_i && !gapped {
                        stats.requester_gapped += 1;
                        gapped = true;
                    }
                    if let Some(b) = (0..64).find(|&b| theirs[b] != ours[b]) {
                        return Err(Mismatch {
                            kind: kind(*n, req),
                            at: format!("{at}, CQE {i} of its session"),
                            field: cqe_field(b).into(),
                            byte: Some(b),
                            theirs: format!("{:#04x}", theirs[b]),
                            ours: format!("{:#04x}", ours[b]),
                        }
                        .into());
                    }
                    if *n == 0 {
                        stats.plain += 1;
                        stats.requester_plain += usize::from(req);
                    } else {
                        stats.compressed += 1;
                        stats.requester_cqes += usize::from(req);
                        if *i == 0 {
                            gapped = false;
                            stats.sessions += 1;
                            stats.longest = stats.longest.max(*n as usize);
                            let first = r.taken & (r.cnt - 1);
                            stats.wrapped += usize::from(first + n > r.cnt);
                            if req {
                                stats.requester += 1;
                            } else {
                                *stats.by_format.entry(short_name(r.format)).or_default() += 1;
                            }
                        }
                    }
                    r.taken = r.taken.wrapping_add(1);
                }
                if got.len() != want.len() {
                    let at = format!("after CQE {}", r.taken);
                    return Err(Mismatch::value(
                        &kind(0, false),
                        &at,
                        "CQE count (an entry read as valid)",
                        want.len(),
                        got.len(),
                    )
                    .into());
                }
                // The consumer record: every CQE of the sessions counted.
                // SAFETY: the record is 4 aligned bytes of `dbrec`.
                let rec = unsafe { r.dbrec.as_mut_ptr().cast::<Be32>().read() }.get();
                if rec != r.taken & 0xff_ffff {
                    return Err(Mismatch::value(
                        &kind(0, false),
                        &format!("after CQE {}", r.taken),
                        "consumer record",
                        r.taken,
                        rec,
                    )
                    .into());
                }
                stats.cqes += want.len();
                want.clear();
            }
            _ => {}
        }
    }
    if let Some(r) = ring {
        stats.laps += u64::from(r.taken / r.cnt);
    }
    Ok(stats)
}

fn short_name(f: &str) -> &'static str {
    match f {
        "MLX5DV_CQE_RES_FORMAT_HASH" => "HASH",
        "MLX5DV_CQE_RES_FORMAT_CSUM" => "CSUM",
        _ => "CSUM_STRIDX",
    }
}
