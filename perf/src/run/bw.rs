//! The bandwidth loops: one thread's stream of requests over its QPs, the
//! client, the bidirectional run, the SEND receiver and the payload check.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rrddmma::prim::{Cq, RemoteAddr, SendList, SendWr, Sge, Wc};

use crate::alloc;
use crate::args::{Opts, Verb};
use crate::pace::{Pacer, RateKind};
use crate::payload;

use super::completion::*;
use super::session::{inc, Session};
use super::{err, Outcome, Res};

/// perftest's address cycling: sizes up to half a cycle buffer walk through
/// it in cache-line steps; larger ones use one place.
fn offsets(size: usize, cycle: usize, line: usize) -> Vec<usize> {
    if size <= cycle / 2 {
        let step = inc(size, line);
        (0..cycle / step).map(|k| k * step).collect()
    } else {
        vec![0]
    }
}

/// Per-QP posting state of a bandwidth run.
struct Stream {
    qp: usize,
    sges: Vec<[Sge; 1]>,
    remotes: Vec<RemoteAddr>,
}

/// Requests posted and completed on one stream.
#[derive(Clone, Copy, Default)]
struct Counts {
    posted: u64,
    done: u64,
}

/// The request of a bandwidth test on QP `qp` for one slot (unsignaled).
fn request<'a>(
    o: &Opts,
    s: &'a Session,
    qp: usize,
    sge: &'a [Sge; 1],
    r: RemoteAddr,
    g: u64,
    inline: bool,
) -> SendWr<'a> {
    let wr = match o.verb {
        Verb::Write if s.imm => SendWr::write_imm(sge, r, super::session::IMM_BASE + qp as u32),
        Verb::Write => SendWr::write(sge, r),
        Verb::Read => SendWr::read(sge, r),
        Verb::Send => s.send_wr(qp, sge),
        Verb::Atomic if o.cas => SendWr::compare_swap(sge, r, 0, g),
        Verb::Atomic => SendWr::fetch_add(sge, r, 1),
    };
    let wr = if s.xrc { wr.xrc_srqn(s.rem[qp].srqn) } else { wr };
    if inline {
        wr.inline()
    } else {
        wr
    }
}

/// The peer's addresses for QP `qp`'s messages at `offs` past the peer's
/// `vaddr`: a peer whose address wraps past 2^64 is refused, not added.
fn remote_addrs(qp: usize, vaddr: u64, rkey: u32, offs: &[usize]) -> Res<Vec<RemoteAddr>> {
    offs.iter()
        .map(|&k| {
            let addr = vaddr.checked_add(k as u64).ok_or_else(|| {
                format!("the peer's QP {qp} message gave address {vaddr:#x}, past which offset {k} wraps 2^64")
            })?;
            Ok(RemoteAddr { addr, rkey })
        })
        .collect()
}

/// A bandwidth run of one thread over its QPs; returns (ops, start, end).
fn bw_thread(s: &Session, o: &Opts, cq: &Cq, mine: &[usize], size: usize) -> Res<(u64, Instant, Instant)> {
    let offs = offsets(size, s.cycle, s.line);
    let streams: Vec<Stream> = mine
        .iter()
        .map(|&qp| -> Res<Stream> {
            Ok(Stream {
                qp,
                sges: offs.iter().map(|&k| [s.mem.data(qp).sge_at(s.local(qp) + k, size)]).collect(),
                remotes: remote_addrs(qp, s.rem[s.peer(qp)].vaddr, s.rem[s.peer(qp)].rkey, &offs)?,
            })
        })
        .collect::<Res<_>>()?;
    let mut counts = vec![Counts::default(); streams.len()];
    // -c DC: per stream of requests, the DCI stream its next request takes.
    let mut dci_streams = vec![0u16; streams.len()];
    let inline = size <= o.inline as usize && matches!(o.verb, Verb::Write | Verb::Send);
    let mut lists: Vec<Vec<SendList<'_>>> = streams
        .iter()
        .map(|st| {
            (0..st.sges.len())
                .map(|k| SendList::new(vec![request(o, s, st.qp, &st.sges[k], st.remotes[k], 0, inline)]))
                .collect()
        })
        .collect();
    let pl = o.post_list as u64;
    let depth = u64::from(o.tx_depth);
    let cq_mod = u64::from(o.cq_mod);
    let mut limit = if o.duration.is_some() { u64::MAX } else { o.iters };
    let deadline = o.duration.map(Duration::from_secs_f64);
    let mut wrs: Vec<SendWr<'_>> = Vec::with_capacity(o.post_list as usize);
    let mut wcs = [Wc::default(); POLL_BATCH];
    let mask = (1u64 << COUNT_BITS) - 1;
    // -e: a full batch may have left completions behind that raise no
    // event (they came before the re-arm): poll again before sleeping.
    let mut full = false;
    // --rate_limit_type SW: bursts spaced by the limit (perftest's `run_iter_bw`).
    let mut pace = o.rate.filter(|r| r.kind == RateKind::Sw).map(|r| Pacer::new(&r, size, o.threads));

    alloc::measuring(true);
    let start = Instant::now();
    let result = (|| -> Res<()> {
        let mut polls = 0u32;
        loop {
            let mut all_done = true;
            for (si, (st, c)) in streams.iter().zip(counts.iter_mut()).enumerate() {
                while c.posted < limit && c.posted - c.done + pl <= depth && pace.as_mut().is_none_or(Pacer::may_post) {
                    let n = pl.min(limit - c.posted);
                    let make = |g: u64| {
                        let k = (g as usize) % st.sges.len();
                        let mut wr = request(o, s, st.qp, &st.sges[k], st.remotes[k], g, inline);
                        if (g + 1) % cq_mod == 0 || g + 1 == limit {
                            wr = wr.signaled().wr_id(((si as u64) << COUNT_BITS) | (g + 1));
                        }
                        wr
                    };
                    let g = c.posted;
                    let unsignaled = (g + 1) % cq_mod != 0 && g + 1 != limit;
                    if let Some(dc) = &s.dc {
                        wrs.clear();
                        wrs.extend((0..n).map(|j| make(g + j)));
                        // SAFETY: as below; one doorbell for the list, each
                        // request on the next active DCI stream.
                        unsafe { dc.post(st.qp, &wrs, &mut dci_streams[si]) }?;
                    } else if n == 1 && unsignaled && !o.cas {
                        // The prebuilt request of this slot (perftest's
                        // prebuilt WRs); signaled ones carry their count.
                        let k = (g as usize) % st.sges.len();
                        // SAFETY: every entry lies in the session's MR, which
                        // outlives the run; the run waits for all completions.
                        unsafe { s.qps[st.qp].post_send_list(&mut lists[si][k]) }.map_err(err("ibv_post_send"))?;
                    } else {
                        wrs.clear();
                        wrs.extend((0..n).map(|j| make(g + j)));
                        // SAFETY: as above.
                        unsafe { s.qps[st.qp].post_send(&mut wrs) }.map_err(err("ibv_post_send"))?;
                    }
                    c.posted += n;
                    if let Some(p) = pace.as_mut() {
                        p.posted(n);
                    }
                }
                all_done &= c.done >= limit;
            }
            if all_done {
                return Ok(());
            }
            // Nothing more can be posted until something completes: with
            // -e, sleep on the CQ's channel (perftest's `run_iter_bw`).
            let n = if o.events && !full {
                event_poll(cq, &mut wcs, None)?
            } else {
                cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?
            };
            full = n == POLL_BATCH;
            for wc in &wcs[..n] {
                check(wc)?;
                let c = &mut counts[(wc.wr_id() >> COUNT_BITS) as usize];
                c.done = c.done.max(wc.wr_id() & mask);
            }
            if let Some(d) = deadline {
                polls = polls.wrapping_add(1);
                if limit == u64::MAX && polls % 64 == 0 && start.elapsed() >= d {
                    // One more request each, signaled, so that all complete.
                    let most = counts.iter().map(|c| c.posted).max().unwrap_or(0);
                    limit = most + 1;
                }
            }
        }
    })();
    let end = Instant::now();
    alloc::measuring(false);
    result?;
    let ops = counts.iter().map(|c| c.posted).sum();
    Ok((ops, start, end))
}

/// The client side of a bandwidth test for one size.
pub fn bw_client(s: &Session, o: &Opts, size: usize) -> Res<Outcome> {
    let threads = o.threads as usize;
    let before = alloc::in_loop_allocations();
    let barrier = std::sync::Barrier::new(threads);
    let run = |t: usize| {
        let mine: Vec<usize> = (0..s.n_qps()).filter(|i| i % threads == t).collect();
        // Warm-up (as perftest's): one queue's worth of requests, so
        // first-touch costs stay out of the measurement. Not for SEND,
        // whose receiver counts every message.
        if o.verb != Verb::Send && !s.imm {
            let warm = Opts { iters: u64::from(o.tx_depth), duration: None, ..o.clone() };
            let warmed = bw_thread(s, &warm, &s.cqs[t], &mine, size);
            barrier.wait();
            warmed?;
        }
        bw_thread(s, o, &s.cqs[t], &mine, size)
    };
    // One thread runs on the calling one, as perftest's loop does: a
    // process that never started a thread keeps glibc's single-threaded
    // system-call wrappers (rxe's doorbell is a `write`: some 7
    // instructions a post instead of some 50).
    let results: Vec<Res<(u64, Instant, Instant)>> = if threads == 1 {
        vec![run(0)]
    } else {
        std::thread::scope(|scope| {
            let run = &run;
            let handles: Vec<_> = (0..threads).map(|t| scope.spawn(move || run(t))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a benchmark thread panicked".into())))
                .collect()
        })
    };
    let mut ops = 0;
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for r in results {
        let (n, a, b) = r?;
        ops += n;
        first = Some(first.map_or(a, |f| f.min(a)));
        last = Some(last.map_or(b, |l| l.max(b)));
    }
    let secs = match (first, last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64().max(1e-9),
        _ => 1e-9,
    };
    Ok(Outcome {
        size,
        // Per QP, as perftest reports it; the rates cover all QPs.
        iters: ops / u64::from(o.qps),
        bytes_per_sec: (ops * size as u64) as f64 / secs,
        ops_per_sec: ops as f64 / secs,
        allocs: alloc::in_loop_allocations() - before,
        ..Outcome::default()
    })
}

/// Checks the regions a WRITE (`incoming`: what the peer wrote here) or
/// READ (this side's own local regions) bandwidth run of `iters` requests
/// per QP of `size` bytes left, against the positional pattern.
pub fn verify_bw(s: &Session, verb: Verb, size: usize, iters: u64) -> Res<()> {
    let offs = offsets(size, s.cycle, s.line);
    let used = offs.len().min(iters.max(1) as usize);
    for i in 0..s.n_qps() {
        let base = if verb == Verb::Write { s.target(s.peer(i)) } else { s.local(i) };
        for &k in &offs[..used] {
            let what = format!("{} bw, QP {i}, {size}-byte message at offset {k}", verb.name());
            // SAFETY: the region lies in the buffer and the run is over.
            unsafe { payload::verify(s.ptr(base + k), size, 0, k, &what) }?;
        }
    }
    Ok(())
}

/// One side of a bidirectional (`-b`) bandwidth run for one size: this side
/// streams as a client does and, for SEND, receives the peer's stream at the
/// same time on a second thread. Returns what this side sent.
pub fn bw_bidir(s: &Session, o: &Opts, size: usize) -> Res<Outcome> {
    if o.verb != Verb::Send {
        return bw_client(s, o, size);
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let rx = scope.spawn(|| send_bw_receiver(s, o, size, Some(&stop)));
        let tx = bw_client(s, o, size);
        if tx.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let rx = rx.join().unwrap_or_else(|_| Err("the receiving thread panicked".into()));
        let tx = tx?;
        let rx = rx.map_err(|e| format!("receiving: {e}"))?;
        // Both counts are of every thread's measured loops over overlapping
        // windows: the larger covers both.
        Ok(Outcome { allocs: tx.allocs.max(rx.allocs), ..tx })
    })
}

/// The receiving side of a SEND bandwidth test for one size: receives and
/// re-posts `-n` messages per QP (as perftest's server counts them), or with
/// `-D` until the sender's next exchange message arrives. `stop`, when given,
/// ends the wait early (set by a bidirectional run whose sending half failed).
/// With `-n`, no message for [`stall_limit`] is an error.
pub fn send_bw_receiver(s: &Session, o: &Opts, size: usize, stop: Option<&AtomicBool>) -> Res<Outcome> {
    let stall = stall_limit();
    let mut wcs = [Wc::default(); POLL_BATCH];
    let want = if o.duration.is_some() { u64::MAX } else { o.iters * s.n_qps() as u64 };
    let mut got = 0u64;
    let mut idle = 0u32;
    let mut first = None;
    let mut last = Instant::now();
    // -e: sleep on the channel once a poll comes back empty (perftest's
    // server drains the CQ after each event); a bidirectional run wakes every
    // 100 ms to see whether its sending half failed, a run of -n iterations
    // when the stall limit is up (perftest's server: its 60 s alarm).
    let wake = |last: Instant| match stop {
        Some(_) => Some(Duration::from_millis(100)),
        None if want != u64::MAX => Some(stall.saturating_sub(last.elapsed()).max(Duration::from_millis(1))),
        None => None,
    };
    let mut drained = true;
    let before = alloc::in_loop_allocations();
    alloc::measuring(true);
    let result = (|| -> Res<()> {
        while got < want {
            let n = if o.events && drained {
                event_poll(&s.recv_cq, &mut wcs, wake(last))?
            } else {
                s.recv_cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?
            };
            drained = n == 0;
            for wc in &wcs[..n] {
                check_recv(wc, s.imm)?;
                s.post_recv(wc.wr_id() as usize)?;
            }
            if n == 0 {
                idle = idle.wrapping_add(1);
                if o.events || idle % 1024 == 0 {
                    if stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
                        return Err("the sending half of the run failed".into());
                    }
                    if want == u64::MAX && s.oob.peer_spoke() {
                        break;
                    }
                    if want != u64::MAX && last.elapsed() >= stall {
                        return Err(stalled(got, want, stall, o.conn));
                    }
                }
                continue;
            }
            idle = 0;
            last = Instant::now();
            first.get_or_insert(last);
            got += n as u64;
        }
        Ok(())
    })();
    alloc::measuring(false);
    result?;
    let secs = first.map_or(1e-9, |f| (last - f).as_secs_f64().max(1e-9));
    Ok(Outcome {
        size,
        iters: got / s.n_qps() as u64,
        bytes_per_sec: (got * size as u64) as f64 / secs,
        ops_per_sec: got as f64 / secs,
        allocs: alloc::in_loop_allocations() - before,
        ..Outcome::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_cycling_follows_perftest() {
        assert_eq!(offsets(2, 4096, 64).len(), 64);
        assert_eq!(offsets(100, 4096, 64)[1], 128);
        assert_eq!(offsets(4096, 4096, 64), vec![0]);
        assert_eq!(inc(65536, 64), 65536);
    }

    /// C-N8: a peer's address near 2^64 is refused, not added (which
    /// panics in a debug build and wraps in a release one).
    #[test]
    fn c_n8_peer_address_past_2_64_is_refused() {
        let offs = offsets(100, 4096, 64);
        let ok = remote_addrs(3, 0x1000, 7, &offs).unwrap();
        assert_eq!((ok[1].addr, ok[1].rkey), (0x1000 + 128, 7));
        let e = remote_addrs(3, u64::MAX - 64, 7, &offs).unwrap_err();
        assert!(e.contains("QP 3") && e.contains("offset 128") && e.contains("0xffffffffffffffbf"), "{e}");
    }
}
