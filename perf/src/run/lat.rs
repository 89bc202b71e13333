//! The latency loops: ping-pong, READ and atomic round trips, `-D`
//! durations and the samples they keep.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rrddmma::prim::{Cq, RecvList, RecvWr, RemoteAddr, SendList, SendWr, Wc};

use crate::alloc;
use crate::args::{Opts, Verb};
use crate::clock::Clock;
use crate::payload;

use super::completion::*;
use super::session::Session;
use super::{err, Outcome, Res};

/// Latency samples in nanoseconds from post timestamps (perftest: intervals
/// between consecutive posts, halved for ping-pong tests), `ns_per_tick`
/// apart: sorted, and with `unsorted` also in the order taken. The
/// intervals are sorted as integers, before the conversion, which keeps
/// their order (`ns_per_tick` is positive).
fn samples(stamps: &[u64], halve: bool, ns_per_tick: f64, unsorted: bool) -> (Vec<f64>, Vec<f64>) {
    let scale = if halve { ns_per_tick / 2.0 } else { ns_per_tick };
    let mut ticks: Vec<u64> = stamps.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    let ns = |t: &[u64]| t.iter().map(|&v| v as f64 * scale).collect::<Vec<f64>>();
    let taken = if unsorted { ns(&ticks) } else { Vec::new() };
    ticks.sort_unstable();
    (ns(&ticks), taken)
}

/// Samples a `-D` latency run keeps (preallocated: the loop must not
/// allocate): the first ones of its sampling phase; the run goes on to its
/// deadline without recording more.
const DURATION_SAMPLES: usize = 1 << 21;

/// The phases of a `-D` latency run, as perftest's alarm moves them
/// (`catch_alarm`): warm-up, sampling, cool-down, end.
const WARM_UP: u8 = 0;

const SAMPLING: u8 = 1;

const COOL_DOWN: u8 = 2;

const ENDED: u8 = 3;

/// The warm-up and the cool-down of a `-D` latency run, in seconds:
/// perftest's default margin, a quarter of the duration in whole seconds
/// (`-D 2`: none; `-D 8`: 2 s each).
fn margin(duration: f64) -> f64 {
    (duration / 4.0).floor()
}

/// Moves `phase` through a `-D` run of `duration` seconds from now: sampling
/// after the margin, cool-down at `duration - margin`, the end at `duration`.
/// Returns early when `stop`'s sender goes (the run ended first).
fn duration_timer(phase: &AtomicU8, duration: f64, stop: &mpsc::Receiver<()>) {
    let m = margin(duration);
    let t0 = Instant::now();
    for (at, next) in [(m, SAMPLING), (duration - m, COOL_DOWN), (duration, ENDED)] {
        let left = (t0 + Duration::from_secs_f64(at)).saturating_duration_since(Instant::now());
        if let Err(mpsc::RecvTimeoutError::Disconnected) = stop.recv_timeout(left) {
            return;
        }
        phase.store(next, Ordering::Release);
    }
}

/// A latency test for one size, on either side. With `-D` both sides of a
/// ping-pong run until their own deadline (perftest's duration mode): a side
/// waiting for a message or a completion that will not come stops there,
/// and a request posted last is not waited for.
pub fn lat(s: &Session, o: &Opts, size: usize) -> Res<Outcome> {
    let timed = o.duration.is_some();
    let n = if timed { DURATION_SAMPLES } else { o.iters as usize };
    let mut stamps = vec![0u64; n];
    // Samples taken (iterations: every post; -D: posts while sampling).
    let mut taken = 0usize;
    let phase = Arc::new(AtomicU8::new(if timed { WARM_UP } else { SAMPLING }));
    let (stop, stopped) = mpsc::channel::<()>();
    let server = !s.oob.is_client();
    // -c DC: none (the DCI and DCT of crate::dc_dual instead).
    let qp = s.qps.first();
    let cq = &s.cqs[0];
    let sge = [s.mem.data(0).sge_at(s.local(0), size)];
    // The peer's destination: its QP, or with -c DC its DC target.
    let peer = s.peer(0);
    let remote = RemoteAddr { addr: s.rem[peer].vaddr, rkey: s.rem[peer].rkey };
    let inline = size <= o.inline as usize && matches!(o.verb, Verb::Write | Verb::Send);
    let mut wcs = [Wc::default(); 1];
    let before = alloc::in_loop_allocations();
    let poll_byte = s.ptr(s.target(peer) + size - 1);
    let post_byte = s.ptr(s.local(0) + size - 1);
    // WRITE: where the peer writes; SEND: where the receive (index 0) lands.
    let recv_at = s.ptr(s.received(if o.verb == Verb::Write { peer } else { 0 })).cast_const();
    let send_at = s.ptr(s.local(0));
    let checking = o.check_payload;
    let corrupt = checking && payload::corrupt_requested();

    // The one request, built before the loop (perftest's prebuilt WR).
    let wr = match o.verb {
        Verb::Write if s.imm => SendWr::write_imm(&sge, remote, super::session::IMM_BASE),
        Verb::Write => SendWr::write(&sge, remote),
        Verb::Send => s.send_wr(0, &sge),
        Verb::Read => SendWr::read(&sge, remote),
        Verb::Atomic if o.cas => SendWr::compare_swap(&sge, remote, 0, 0),
        Verb::Atomic => SendWr::fetch_add(&sge, remote, 1),
    }
    .signaled();
    let mut list = SendList::new(vec![if inline { wr.inline() } else { wr }]);
    // Receives consumed and not posted again (SEND latency with -n: the
    // last `rx_per_qp` messages); posted after the run, before the next size.
    let mut unposted = 0usize;
    // The SEND tests' receive, built once too (perftest's prebuilt one);
    // with --use-srq it goes to the shared queue instead.
    let srq = s.shared.has_srq();
    let rsge = [s.recv_sge(0)];
    let mut rlist = RecvList::new(vec![RecvWr::new(&rsge, 0)]);
    let mut dci_stream = 0u16;
    let mut post = |list: &mut SendList<'_>| -> Res<()> {
        match (&s.dc, qp) {
            // SAFETY: as below; one request on the DCI to the peer's target.
            (Some(dc), _) => unsafe { dc.post(0, std::slice::from_ref(list.get(0)), &mut dci_stream) },
            // SAFETY: the entry lies in the session's MR; each request is
            // completed before the next is posted (or, at a -D deadline, left
            // in flight until the QP goes).
            (None, Some(qp)) => unsafe { qp.post_send_list(list) }.map_err(err("ibv_post_send")),
            (None, None) => Err("a latency test without a QP".into()),
        }
    };
    let ended = || timed && phase.load(Ordering::Relaxed) == ENDED;
    // One completion. With -e (perftest's `run_iter_lat`/`run_iter_lat_send`):
    // sleep on the CQ's channel, re-arm, poll; otherwise busy-poll, and with
    // -D give up at the deadline (`Ok(false)`).
    // Without -D, a busy wait that sees nothing for `stall_limit` fails
    // (a lost UC/UD message, a vanished peer) instead of spinning forever.
    let events = o.events;
    let (stall, conn) = (stall_limit(), o.conn);
    let wait = |cq: &Cq, wcs: &mut [Wc; 1]| -> Res<bool> {
        let mut spin = Spin::new();
        loop {
            let got = if events { event_poll(cq, wcs, None)? } else { cq.poll(wcs).map_err(err("ibv_poll_cq"))? };
            if got > 0 {
                check(&wcs[0])?;
                return Ok(true);
            }
            if ended() {
                return Ok(false);
            }
            if !timed {
                spin.spun(stall, conn, "completion")?;
            }
        }
    };

    let clock = s.clock;
    let t0 = Instant::now();
    let c0 = clock.ticks(t0);
    // -D: a timer thread moves the phase, as perftest's alarm does.
    let timer = o.duration.map(|d| {
        let phase = Arc::clone(&phase);
        std::thread::spawn(move || duration_timer(&phase, d, &stopped))
    });
    // A post's time stamp, when it is a sample.
    let mut stamp = |taken: &mut usize| {
        if !timed || phase.load(Ordering::Relaxed) == SAMPLING {
            if let Some(st) = stamps.get_mut(*taken) {
                *st = clock.ticks(t0);
                *taken += 1;
            }
        }
    };
    alloc::measuring(true);
    let result = (|| -> Res<()> {
        match o.verb {
            // --write_with_imm: the receive completion, not the buffer, says
            // the message arrived (the SEND ping-pong below).
            Verb::Write if !s.imm => {
                let (mut sc, mut rc, mut cc) = (0usize, 0usize, 0usize);
                'run: while if timed { !ended() } else { sc < n || cc < n || rc < n } {
                    if (timed || rc < n) && !(sc == 0 && server) {
                        rc += 1;
                        let mut spin = Spin::new();
                        // SAFETY: the byte lies in the registered buffer; the
                        // peer's RDMA WRITE changes it, hence volatile.
                        while unsafe { poll_byte.read_volatile() } != rc as u8 {
                            if ended() {
                                break 'run;
                            }
                            if !timed {
                                spin.spun(stall, conn, "RDMA WRITE from the peer")?;
                            }
                        }
                        if checking {
                            // SAFETY: the message lies in the buffer; the peer
                            // writes again only after this side's next post.
                            unsafe { payload::verify(recv_at, size - 1, rc as u64, 0, "write lat") }?;
                        }
                    }
                    if timed || sc < n {
                        stamp(&mut taken);
                        sc += 1;
                        if checking {
                            // SAFETY: nothing is in flight from this region.
                            unsafe { payload::fill(send_at, size - 1, sc as u64, 0) };
                            if corrupt && sc == 3 {
                                // SAFETY: as above.
                                unsafe { payload::flip(send_at) };
                            }
                        }
                        // SAFETY: as above; the device reads it at post time
                        // or later, and nothing is in flight here.
                        unsafe { post_byte.write_volatile(sc as u8) };
                        post(&mut list)?;
                    }
                    if timed || cc < n {
                        if !wait(cq, &mut wcs)? {
                            break;
                        }
                        cc += 1;
                    }
                }
            }
            Verb::Send | Verb::Write => {
                // Who posts first: SEND's client, as perftest's send lat;
                // WRITE with immediate data's server, as perftest's write lat
                // (with and without `--write_with_imm`; 25.01 read).
                let sends_first = if o.verb == Verb::Send { !server } else { server };
                let (mut sc, mut rc) = (0usize, 0usize);
                while if timed { !ended() } else { sc < n || rc < n } {
                    if (timed || rc < n) && !(sc == 0 && sends_first) {
                        if !wait(&s.recv_cq, &mut wcs)? {
                            break;
                        }
                        check_recv(&wcs[0], s.imm)?;
                        rc += 1;
                        if checking {
                            // SAFETY: the message arrived (completion seen) and
                            // its receive is not re-posted yet.
                            unsafe { payload::verify(recv_at, size, rc as u64, 0, "send lat") }?;
                        }
                        // perftest's `run_iter_lat_send`: a receive goes back
                        // up only while the run still needs one (the last
                        // `rx_per_qp` messages land in receives posted before
                        // the run), so both tools time the same loop.
                        let needed = timed || rc + s.rx_per_qp <= n;
                        if needed && srq {
                            s.post_recv(0)?;
                        } else if needed {
                            // SAFETY: the entry lies in the session's MR, alive
                            // as long as the QP; its message was read above.
                            unsafe { qp.ok_or("no QP to receive on")?.post_recv_list(&mut rlist) }
                                .map_err(err("ibv_post_recv"))?;
                        } else {
                            unposted += 1;
                        }
                    }
                    if timed || sc < n {
                        stamp(&mut taken);
                        sc += 1;
                        if checking {
                            // SAFETY: the previous send has completed.
                            unsafe { payload::fill(send_at, size, sc as u64, 0) };
                            if corrupt && sc == 3 {
                                // SAFETY: as above.
                                unsafe { payload::flip(send_at) };
                            }
                        }
                        post(&mut list)?;
                        if !wait(cq, &mut wcs)? {
                            break;
                        }
                    }
                }
            }
            Verb::Read | Verb::Atomic => {
                let mut i = 0usize;
                while if timed { !ended() } else { i < n } {
                    if o.cas {
                        list.set(0, SendWr::compare_swap(&sge, remote, 0, i as u64).signaled());
                    }
                    stamp(&mut taken);
                    post(&mut list)?;
                    if !wait(cq, &mut wcs)? {
                        break;
                    }
                    if checking && o.verb == Verb::Read {
                        // SAFETY: the READ has completed into this region.
                        unsafe { payload::verify(send_at, size, 0, 0, "read lat") }?;
                    } else if checking {
                        // SAFETY: the fetch-and-add has completed; its old
                        // value (8 bytes) is in this region.
                        let old = unsafe { send_at.cast::<u64>().read_volatile() };
                        if old != i as u64 {
                            return Err(format!(
                                "payload check failed: atomic lat, iteration {i}: fetch-and-add returned {old}, \
                                 expected {i} (each iteration adds 1 to a counter that starts at 0)"
                            ));
                        }
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    })();
    let (t1, c1) = (Instant::now(), clock.ticks(t0));
    alloc::measuring(false);
    // The timer thread, if any, ends with the channel.
    drop(stop);
    if let Some(t) = timer {
        let _ = t.join();
    }
    result?;
    // The receive queue full again for the next size of a sweep, as
    // perftest's `ctx_set_recv_wqes` before each size.
    for _ in 0..unposted {
        if srq {
            s.post_recv(0)?;
        } else {
            // SAFETY: as in the loop; every message has been read.
            unsafe { qp.ok_or("no QP to receive on")?.post_recv_list(&mut rlist) }.map_err(err("ibv_post_recv"))?;
        }
    }
    // TSC ticks to nanoseconds, calibrated over the run itself.
    let ns_per_tick = match clock {
        Clock::Tsc => (t1 - t0).as_nanos() as f64 / c1.wrapping_sub(c0).max(1) as f64,
        Clock::Monotonic => 1.0,
    };
    let halve = matches!(o.verb, Verb::Write | Verb::Send);
    let (lat_ns, unsorted_ns) = samples(&stamps[..taken], halve, ns_per_tick, o.unsorted);
    Ok(Outcome {
        size,
        iters: taken as u64,
        lat_ns,
        unsorted_ns,
        allocs: alloc::in_loop_allocations() - before,
        ..Outcome::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `duration_timer` for `secs` on a thread; `early`: the run ends
    /// at once (the channel goes). Returns the last phase and the time taken.
    fn timer_run(secs: f64, early: bool) -> (u8, Duration) {
        let phase = AtomicU8::new(WARM_UP);
        let (stop, stopped) = mpsc::channel::<()>();
        let mut stop = Some(stop);
        let t = Instant::now();
        std::thread::scope(|s| {
            let phase = &phase;
            s.spawn(move || duration_timer(phase, secs, &stopped));
            if early {
                stop.take();
            }
        });
        drop(stop);
        (phase.load(Ordering::Acquire), t.elapsed())
    }

    #[test]
    fn duration_phases_follow_perftest() {
        assert_eq!((margin(2.0), margin(5.0), margin(8.0)), (0.0, 1.0, 2.0));
        // Without a margin: sampling at once, then the end at the deadline.
        let (last, took) = timer_run(0.05, false);
        assert_eq!(last, ENDED);
        assert!(took >= Duration::from_millis(50));
        // A run that ends first stops the timer: no waiting for the deadline.
        let (last, took) = timer_run(60.0, true);
        assert!(last != ENDED && took < Duration::from_secs(10));
    }

    #[test]
    fn duration_margins_bound_the_sampling_phase() {
        // -D 4: a 1 s warm-up, sampling from 1 s to 3 s, a 1 s cool-down.
        let phase = AtomicU8::new(WARM_UP);
        let (_keep, stopped) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let phase = &phase;
            s.spawn(move || duration_timer(phase, 4.0, &stopped));
            let t0 = Instant::now();
            let at = |secs: f64| {
                std::thread::sleep((t0 + Duration::from_secs_f64(secs)).saturating_duration_since(Instant::now()));
                phase.load(Ordering::Acquire)
            };
            assert_eq!(at(0.5), WARM_UP, "warm-up until 1 s");
            assert_eq!(at(2.0), SAMPLING, "sampling from 1 s to 3 s");
            assert_eq!(at(3.5), COOL_DOWN, "cool-down from 3 s to 4 s");
            assert_eq!(at(4.5), ENDED, "the end at 4 s");
        });
    }

    #[test]
    fn latency_samples_are_intervals() {
        // Halved for ping-pong, sorted; in the order taken only when asked.
        assert_eq!(samples(&[0, 10, 30, 33], true, 1.0, false), (vec![1.5, 5.0, 10.0], vec![]));
        assert_eq!(samples(&[0, 10, 30, 33], true, 1.0, true), (vec![1.5, 5.0, 10.0], vec![5.0, 10.0, 1.5]));
        // Ticks to nanoseconds after sorting.
        assert_eq!(samples(&[0, 20, 30], false, 0.5, true), (vec![5.0, 10.0], vec![10.0, 5.0]));
        // A counter that wrapped between two posts still gives its interval.
        assert_eq!(samples(&[u64::MAX - 1, 2], false, 1.0, false), (vec![4.0], vec![]));
    }
}
