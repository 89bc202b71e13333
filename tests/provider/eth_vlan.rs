//! Software VLAN insertion against libmlx5, which has none of its own:
//! random raw packet SENDs and TSOs written by rrddmma's
//! `SqRing::send_eth_vlan` / `send_tso_vlan` from the untagged packet and a
//! tag must be the WQEs libmlx5's `mlx5_post_send` writes for the same
//! packet with the tag already in it. The tagged packet lies in a second
//! buffer: a copy of the payload at the same offsets, and per request a
//! header area holding the MAC addresses and the tag (a SEND's first
//! gather entry, the untagged entries following from byte 12 of the
//! packet on) or the tagged TSO headers. Data segment addresses are mapped
//! from the copy back to the payload before comparing. The queues' minimum
//! inline headers are 18 bytes (`MLX5_ETH_L2_INLINE_HEADER_SIZE`): with
//! none, libmlx5 inlines nothing, where the software tag must be inline.

use std::ffi::c_int;
use std::fmt::Write as _;

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::eth::Vlan;
use rrddmma::mlx5dv::mmio::Recorder;
use rrddmma::prim::Sge;

use super::build::{fill, SEED};
use super::eth::{
    csum_flags, ctrl_flags, cut, finish_ours, layout, lib, retire, tso_wrap, verbs_wr, Queue, Req, Rng, L2, L2_MIN,
    PAYLOAD,
};
use super::send::first_diff;
use super::{Mismatch, Mutation};

/// Queues and request lists per queue of the run.
const QUEUES: usize = 40;
const LISTS_PER_QUEUE: usize = 100;
/// Bytes of each request's header area in the tagged buffer.
const AREA: usize = 128;
/// The untagged headers a SEND inlines: 18 tagged bytes less the tag.
const UNTAGGED: usize = L2 - 4;

/// A random untagged request for `q`: a SEND of at most `max_gs - 1`
/// entries (the tagged one adds the header entry) or a TSO whose tagged
/// headers fit `max_tso_header`.
fn vlan_req(q: &Queue, rng: &mut Rng) -> Req {
    let tso = rng.chance(4);
    let n = if tso { 1 + rng.below(u64::from(q.max_gs)) } else { 1 + rng.below(u64::from(q.max_gs - 1)) } as usize;
    let mut sges: Vec<(u32, u32, usize)> = (0..n)
        .map(|i| {
            let len = match (i, rng.below(4)) {
                (0, 0) => rng.below(UNTAGGED as u64) as u32,
                (0, 1) => UNTAGGED as u32,
                (0, _) => UNTAGGED as u32 + 1 + rng.below(180) as u32,
                _ if rng.chance(8) => 0,
                _ => 1 + rng.below(100) as u32,
            };
            (len, rng.next() as u32, 0)
        })
        .collect();
    let mut r = Req {
        sges: Vec::new(),
        tso: None,
        signaled: rng.chance(2),
        solicited: rng.chance(4),
        fence: rng.chance(8),
        csum: rng.chance(2),
        inline: false,
    };
    if tso {
        let hdr = L2_MIN + rng.below((q.max_tso_header - 4 - L2_MIN + 1) as u64) as usize;
        r.tso = Some((rng.below((PAYLOAD - hdr) as u64) as usize, hdr, 64 + rng.below(9000) as u16));
    } else {
        let total: usize = sges.iter().map(|s| s.0 as usize).sum();
        if total < UNTAGGED {
            sges.last_mut().unwrap().0 += (UNTAGGED - total) as u32;
        }
        let rest: usize = sges.iter().map(|s| s.0 as usize).sum::<usize>() - UNTAGGED;
        r.inline = rest as u32 <= q.max_inline && rng.chance(3);
    }
    for s in &mut sges {
        s.2 = rng.below((PAYLOAD - s.0 as usize) as u64) as usize;
    }
    r.sges = sges;
    r
}

/// The packet's first `n` bytes, gathered from `r`'s entries in `base`.
fn gathered(r: &Req, base: *const u8, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for &(len, _, off) in &r.sges {
        let take = (n - out.len()).min(len as usize);
        // SAFETY: the entry lies inside the buffer.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(base.add(off), take) });
    }
    out
}

/// The tagged request for libmlx5 over the tagged buffer `t` (offsets as
/// in the payload), its header area at `area`, written here.
fn tagged(r: &Req, p: *const u8, t: &mut [u8], area: usize, vlan: Vlan) -> Req {
    let mut out = r.clone();
    if let Some((off, len, mss)) = r.tso {
        // SAFETY: the headers lie inside the payload.
        let hdr = unsafe { std::slice::from_raw_parts(p.add(off), len) };
        t[area..area + 12].copy_from_slice(&hdr[..12]);
        t[area + 12..area + 16].copy_from_slice(&vlan.bytes());
        t[area + 16..area + len + 4].copy_from_slice(&hdr[12..]);
        out.tso = Some((area, len + 4, mss));
        return out;
    }
    t[area..area + 12].copy_from_slice(&gathered(r, p, 12));
    t[area + 12..area + 16].copy_from_slice(&vlan.bytes());
    // The header entry, then the untagged entries from packet byte 12 on.
    out.sges = vec![(16, 0x4a6, area)];
    let mut skip = 12u32;
    for &(len, lkey, off) in &r.sges {
        if skip > 0 && skip >= len {
            skip -= len;
            continue;
        }
        out.sges.push((len - skip, lkey, off + skip as usize));
        skip = 0;
    }
    out
}

/// Writes the untagged `r` with `vlan` through `send_eth_vlan` / `send_tso_vlan`.
fn write_ours(q: &mut Queue, r: &Req, p: *const u8, vlan: Vlan, post: Option<&mut Recorder>) {
    let flags = ctrl_flags(q, r);
    let csum = csum_flags(r);
    match r.tso {
        Some((off, len, mss)) => {
            // SAFETY: the headers lie inside the payload.
            let hdr = unsafe { std::slice::from_raw_parts(p.add(off), len) };
            let rest: Vec<(u32, u32, u64)> = r.sges.iter().map(|&(l, k, o)| (l, k, p as u64 + o as u64)).collect();
            let w = q.sq.send_tso_vlan(flags, csum, mss, vlan, hdr);
            finish_ours(w, r, &rest, post);
        }
        None => {
            let (hdr, rest) = cut(r, p, UNTAGGED);
            let w = q.sq.send_eth_vlan(flags, csum, vlan, &hdr);
            finish_ours(w, r, &rest, post);
        }
    }
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct VlanStats {
    pub queues: usize,
    pub lists: usize,
    pub requests: usize,
    pub tso: usize,
    pub csum: usize,
    pub inline: usize,
    pub split_headers: usize,
    pub short_first: usize,
    pub wrapped_lists: usize,
    pub tso_wrap_findings: usize,
    pub pcp_dei: usize,
    pub mutated: bool,
}

impl VlanStats {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} untagged requests with a tag (send_eth_vlan, send_tso_vlan) against libmlx5's WQEs for the tagged \
             packets, in {} lists on {} raw packet queues; {} TSO, {} with IP_CSUM, {} inline, {} with the \
             untagged headers split across entries ({} with a first entry shorter than the MACs), {} tags with \
             PCP or DEI set, {} lists across the ring's end",
            self.requests,
            self.lists,
            self.queues,
            self.tso,
            self.csum,
            self.inline,
            self.split_headers,
            self.short_first,
            self.pcp_dei,
            self.wrapped_lists
        );
        let _ = write!(
            s,
            "; {} TSOs with headers across the ring's end compared up to the headers",
            self.tso_wrap_findings
        );
        s
    }
}

/// Runs the comparison; the first mismatch ends it. `Mutation::EthVlan`
/// gives our writer the first tag with its VID's bit 0 flipped.
pub fn check(mutation: Mutation) -> Result<VlanStats, Box<Mismatch>> {
    let _one_at_a_time = super::batch::exclusive();
    let mut rng = Rng(SEED ^ 0x81_00);
    let mut payload = vec![0u8; PAYLOAD];
    fill(&mut payload, rng.next());
    let mut t = payload.clone();
    t.resize(PAYLOAD + 4 * AREA, 0);
    let mut stats = VlanStats::default();
    let mut made = 0;
    while stats.queues < QUEUES {
        let mut q = Queue::new(made, &mut rng);
        made += 1;
        if q.max_gs < 2 {
            // A SEND's tagged list adds the header entry.
            continue;
        }
        stats.queues += 1;
        for _ in 0..super::build::scaled(LISTS_PER_QUEUE) {
            let n = 1 + rng.below(4) as usize;
            let mut reqs: Vec<Req> = (0..n).map(|_| vlan_req(&q, &mut rng)).collect();
            // TSOs first (the libmlx5 finding of eth.rs).
            reqs.sort_by_key(|r| r.tso.is_none());
            let tags: Vec<Vlan> =
                reqs.iter().map(|_| Vlan::new(rng.below(4095) as u16, rng.below(8) as u8, rng.chance(4))).collect();
            let mutate = mutation == Mutation::EthVlan && !stats.mutated;
            check_list(&mut q, &reqs, &tags, payload.as_ptr(), &mut t, mutate, &mut stats)?;
            stats.lists += 1;
        }
    }
    Ok(stats)
}

fn check_list(
    q: &mut Queue,
    reqs: &[Req],
    tags: &[Vlan],
    p: *const u8,
    t: &mut [u8],
    mutate: bool,
    stats: &mut VlanStats,
) -> Result<(), Box<Mismatch>> {
    let kind = |r: &Req| {
        let op = if r.tso.is_some() { "TSO" } else { "SEND" };
        format!("raw packet VLAN {op}{}{}", if r.csum { " IP_CSUM" } else { "" }, if r.inline { " INLINE" } else { "" })
    };
    let list = stats.lists;
    let at = |i: usize| format!("list {list} request {i}");
    let l = lib();
    let tagged_reqs: Vec<Req> =
        reqs.iter().zip(tags).enumerate().map(|(i, (r, &v))| tagged(r, p, t, PAYLOAD + i * AREA, v)).collect();
    let tb = t.as_ptr();
    let sges: Vec<Vec<Sge>> = tagged_reqs
        .iter()
        .map(|r| r.sges.iter().map(|&(len, lkey, off)| Sge::from_raw(tb as u64 + off as u64, len, lkey)).collect())
        .collect();
    let mut raw: Vec<ffi::ibv_send_wr> =
        tagged_reqs.iter().zip(&sges).map(|(r, s)| *verbs_wr(r, s, t).as_raw()).collect();
    for i in 1..raw.len() {
        let next: *mut ffi::ibv_send_wr = &mut raw[i];
        raw[i - 1].next = next;
    }
    let first = q.sq.cur_post();
    let mut bad: c_int = -1;
    // SAFETY: the library's QP between lists; the entries and headers lie
    // in the live tagged buffer, which libmlx5 reads.
    let rc = unsafe {
        (l.set_prefer_bf)(c_int::from(q.prefer_bf));
        (l.before)(q.qp);
        (l.eth_post)(q.qp, L2 as u32, raw.as_mut_ptr(), &mut bad)
    };
    if rc != 0 {
        return Err(Mismatch::value(&kind(&reqs[0]), &at(bad.max(0) as usize), "post", "refused", "accepted").into());
    }
    let mut after = [0u32; 3];
    // SAFETY: the library's QP; three words out.
    unsafe { (l.after)(q.qp, after.as_mut_ptr()) };

    let mut rec = Recorder::default();
    let mut starts = Vec::new();
    for (i, (r, &v)) in reqs.iter().zip(tags).enumerate() {
        starts.push(q.sq.cur_post());
        let m = mutate && i == 0;
        stats.mutated |= m;
        let v = if m { Vlan::from_tci(v.tci() ^ 1) } else { v };
        let last = i + 1 == reqs.len();
        write_ours(q, r, p, v, if last { Some(&mut rec) } else { None });
        stats.requests += 1;
        stats.tso += usize::from(r.tso.is_some());
        stats.csum += usize::from(r.csum);
        stats.inline += usize::from(r.inline);
        stats.pcp_dei += usize::from(v.pcp() != 0 || v.dei());
        if r.tso.is_none() {
            stats.split_headers += usize::from((r.sges[0].0 as usize) < UNTAGGED);
            stats.short_first += usize::from(r.sges[0].0 < 12);
        }
    }
    let ours_pi = q.sq.cur_post();
    if (first & (q.wqe_cnt - 1)) + ours_pi.wrapping_sub(first) > q.wqe_cnt {
        stats.wrapped_lists += 1;
    }
    let delta = tb as u64 - p as u64;
    for (i, (r, tr)) in reqs.iter().zip(&tagged_reqs).enumerate() {
        let mut lay = layout(tr, tb, L2);
        let bbs = lay.last().map_or(0, |x| x.2).div_ceil(64);
        let mut theirs = Queue::blocks(q.their_ring(), q.wqe_cnt, starts[i], bbs);
        if let Some(w) = tso_wrap(q, tr, starts[i]) {
            // MASK: libmlx5's misplaced segments after wrapping TSO headers (eth.rs).
            lay.retain(|f| f.2 <= w);
            stats.tso_wrap_findings += 1;
        }
        // Their data segments point into the tagged copy: map them back.
        for (name, a, b, _) in &lay {
            if name.starts_with("data[") && name.ends_with("].addr") {
                let addr = u64::from_be_bytes(theirs[*a..*b].try_into().unwrap());
                if (tb as u64..tb as u64 + PAYLOAD as u64).contains(&addr) {
                    theirs[*a..*b].copy_from_slice(&(addr - delta).to_be_bytes());
                }
            }
        }
        let ours = Queue::blocks(q.ours.ring.bytes(), q.wqe_cnt, starts[i], bbs);
        if let Some((field, byte, th, o)) = first_diff(&lay, &theirs, &ours) {
            return Err(Mismatch::at_byte(kind(r), at(i), field, byte, th, o));
        }
    }
    let last_kind = kind(reqs.last().unwrap());
    let last_at = at(reqs.len() - 1);
    Mismatch::same(&last_kind, &last_at, "producer index (sq.cur_post)", after[0], ours_pi)?;
    // SAFETY: the record is 4 aligned bytes of `dbrec`.
    let ours_dbrec = unsafe { q.ours.dbrec.as_mut_ptr().add(4).cast::<Be32>().read() }.get();
    Mismatch::same(&last_kind, &last_at, "doorbell record", after[1], ours_dbrec)?;
    retire(q, &starts)
}
