//! The DCI pool's policies (`rrddmma::wrap::dc::DcSched`) against a
//! deterministic model of completions: each channel (DCI, stream) completes
//! its requests in the order posted, as a send queue does; an injected
//! error fails a channel's oldest request and flushes the rest of it. The
//! checks: ordering per target (a target's completions in the order of its
//! posts), no request lost (each posted request has exactly one outcome;
//! flushed ones are posted again and complete), other targets' requests
//! untouched by a channel's error, the starving target of `dcs` served by
//! `dcs_quota`, `hw_dcs` keeping a target on one stream, the wait queue
//! bounded.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rrddmma::wrap::dc::{Busy, Channel, DcPolicy, DcSched, Outcome, Recovery, SchedShape};

/// A reproducible generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A request of the model: the target and its post number for that target.
#[derive(Clone, Copy, Debug)]
struct Req {
    tag: u64,
    target: u32,
    seq: u64,
}

/// The policy under a model of the device.
struct Model {
    sched: DcSched,
    /// In flight per channel, oldest first (a channel completes in order).
    hw: BTreeMap<Channel, VecDeque<Req>>,
    /// Channels told to fail their next completion.
    failing: BTreeSet<Channel>,
    /// Requests to post again (flushed, or never posted), per target in order.
    backlog: Vec<VecDeque<u64>>,
    next_seq: Vec<u64>,
    /// The last post number completed per target.
    last_done: Vec<Option<u64>>,
    ok: Vec<u64>,
    flushed: u64,
    failed: u64,
    recoveries: u64,
    channels_seen: Vec<BTreeSet<Channel>>,
}

impl Model {
    fn new(policy: DcPolicy, shape: SchedShape) -> Model {
        let n = shape.targets as usize;
        Model {
            sched: DcSched::new(policy, shape),
            hw: BTreeMap::new(),
            failing: BTreeSet::new(),
            backlog: vec![VecDeque::new(); n],
            next_seq: vec![0; n],
            last_done: vec![None; n],
            ok: vec![0; n],
            flushed: 0,
            failed: 0,
            recoveries: 0,
            channels_seen: vec![BTreeSet::new(); n],
        }
    }

    /// Posts the target's next request (its oldest one to post again first).
    fn post(&mut self, target: u32) -> Result<Channel, Busy> {
        let t = target as usize;
        let seq = self.backlog[t].front().copied().unwrap_or(self.next_seq[t]);
        let ticket = self.sched.acquire(target, seq)?;
        if self.backlog[t].pop_front().is_none() {
            self.next_seq[t] += 1;
        }
        // Ordering: every request of the target in flight is on this channel.
        for (ch, q) in &self.hw {
            if *ch != ticket.channel {
                assert!(
                    q.iter().all(|r| r.target != target),
                    "target {target} posted on {} while it has requests in flight on {ch}",
                    ticket.channel
                );
            }
        }
        self.hw.entry(ticket.channel).or_default().push_back(Req { tag: ticket.tag, target, seq });
        self.channels_seen[t].insert(ticket.channel);
        Ok(ticket.channel)
    }

    /// Completes the oldest request of `ch`.
    fn complete(&mut self, ch: Channel) {
        let r = self.hw.get_mut(&ch).and_then(VecDeque::pop_front).expect("a request in flight");
        let outcome = if self.failing.remove(&ch) {
            Outcome::Failed
        } else if self.sched.is_errored(ch) {
            Outcome::Flushed
        } else {
            Outcome::Ok
        };
        let d = self.sched.complete(r.tag, outcome).expect("the tag of a request in flight");
        assert_eq!((d.target, d.wr_id, d.channel, d.outcome), (r.target, r.seq, ch, outcome));
        let t = r.target as usize;
        match outcome {
            Outcome::Ok => {
                assert!(
                    self.last_done[t].is_none_or(|l| l < r.seq),
                    "target {}: request {} completed after {:?}",
                    r.target,
                    r.seq,
                    self.last_done[t]
                );
                self.last_done[t] = Some(r.seq);
                self.ok[t] += 1;
            }
            // Failed or flushed: posted again later, before the target's newer ones.
            _ => {
                if outcome == Outcome::Failed {
                    self.failed += 1;
                } else {
                    self.flushed += 1;
                }
                let pos = self.backlog[t].iter().position(|&s| s > r.seq).unwrap_or(self.backlog[t].len());
                self.backlog[t].insert(pos, r.seq);
            }
        }
        if let Some(rc) = d.recover {
            self.recover(rc);
        }
    }

    fn recover(&mut self, rc: Recovery) {
        let idle = |q: &VecDeque<Req>| q.is_empty();
        match rc {
            Recovery::Channel(ch) => {
                assert!(self.hw.get(&ch).is_none_or(idle), "{ch} recovered with requests in flight")
            }
            Recovery::Dci(d) => assert!(
                self.hw.iter().filter(|(c, _)| c.dci == d).all(|(_, q)| idle(q)),
                "DCI {d} recovered with requests in flight"
            ),
        }
        self.sched.recovered(rc);
        self.recoveries += 1;
    }

    /// Completes the oldest request of a channel drawn at random.
    fn complete_any(&mut self, rng: &mut Rng) -> bool {
        let busy: Vec<Channel> = self.hw.iter().filter(|(_, q)| !q.is_empty()).map(|(c, _)| *c).collect();
        if busy.is_empty() {
            return false;
        }
        let ch = busy[rng.below(busy.len() as u64) as usize];
        self.complete(ch);
        true
    }

    fn drain(&mut self, rng: &mut Rng) {
        while self.complete_any(rng) {}
    }

    fn inflight(&self) -> usize {
        self.hw.values().map(VecDeque::len).sum()
    }
}

fn shape(dcis: u16, streams: u16, depth: u32, targets: u32) -> SchedShape {
    SchedShape { dcis, streams, depth, targets, wait_cap: targets }
}

const POLICIES: [DcPolicy; 4] =
    [DcPolicy::Dcs, DcPolicy::DcsQuota { quota: 4 }, DcPolicy::HwDcs, DcPolicy::Rand { seed: 7 }];

/// A random workload on `m`: `want` requests per target, posted to random
/// targets between completions of random channels, an error injected every
/// `fail_every` steps (0: none), flushed and failed requests posted again,
/// until everything has completed (at least `steps` steps). Returns the
/// requests that completed successfully.
fn run(m: &mut Model, rng: &mut Rng, steps: usize, fail_every: usize, want: u64) -> u64 {
    let targets = m.sched.shape().targets;
    let pending = |m: &Model, t: u32| m.next_seq[t as usize] < want || !m.backlog[t as usize].is_empty();
    for step in 1..50_000_000usize {
        if fail_every > 0 && step % fail_every == 0 {
            let busy: Vec<Channel> = m.hw.iter().filter(|(_, q)| !q.is_empty()).map(|(c, _)| *c).collect();
            if !busy.is_empty() {
                m.failing.insert(busy[rng.below(busy.len() as u64) as usize]);
            }
        }
        let t = rng.below(u64::from(targets)) as u32;
        if rng.below(3) < 2 && pending(m, t) {
            if m.post(t).is_err() {
                m.complete_any(rng);
            }
        } else if !m.complete_any(rng) && step > steps && (0..targets).all(|t| !pending(m, t)) {
            break;
        }
    }
    assert_eq!(m.inflight(), 0, "the workload did not finish");
    m.ok.iter().sum()
}

#[test]
fn dcs_quota_releases_to_a_starving_target() {
    // One DCI. Target 0 always keeps requests in flight (posts before its
    // oldest completes); target 1 asks for a channel at every step.
    let steps_until_served = |policy: DcPolicy| -> Option<usize> {
        let mut m = Model::new(policy, shape(1, 1, 64, 2));
        m.post(0).unwrap();
        for step in 0..2_000 {
            let _ = m.post(0);
            if m.post(1).is_ok() {
                return Some(step);
            }
            m.complete(Channel { dci: 0, stream: 0 });
        }
        None
    };
    // Under dcs the holder never drains, and target 1 never gets the DCI:
    // the starvation dcs_quota is for.
    assert_eq!(steps_until_served(DcPolicy::Dcs), None, "dcs: the holder keeps the DCI");
    let served = steps_until_served(DcPolicy::DcsQuota { quota: 4 }).expect("dcs_quota serves target 1");
    assert!(served <= 8, "dcs_quota: target 1 waited {served} steps (quota 4, so at most 4 posts + drain)");
}

#[test]
fn dcs_quota_goes_round_robin_among_waiting_targets() {
    // Three targets compete for one DCI, each posting whenever it can:
    // each gets the DCI in turn, none posts more than the quota per hold
    // while others wait.
    let mut m = Model::new(DcPolicy::DcsQuota { quota: 3 }, shape(1, 1, 64, 3));
    let mut rng = Rng(5);
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for _ in 0..3_000 {
        for t in 0..3 {
            if m.post(t).is_ok() {
                match runs.last_mut() {
                    Some((last, n)) if *last == t => *n += 1,
                    _ => runs.push((t, 1)),
                }
            }
        }
        m.complete_any(&mut rng);
    }
    assert!(runs.len() > 100, "the DCI changed hands {} times", runs.len());
    assert!(runs.iter().all(|&(_, n)| n <= 3), "a hold posted beyond the quota: {runs:?}");
    for w in runs.windows(2) {
        assert_ne!(w[0].0, w[1].0);
    }
    let served: BTreeSet<u32> = runs.iter().map(|r| r.0).collect();
    assert_eq!(served.len(), 3);
}

#[test]
fn hw_dcs_keeps_a_target_on_one_stream() {
    let mut m = Model::new(DcPolicy::HwDcs, shape(2, 8, 64, 48));
    let mut rng = Rng(11);
    let ok = run(&mut m, &mut rng, 20_000, 0, 200);
    assert_eq!(ok, 48 * 200);
    let mut used = BTreeSet::new();
    for (t, seen) in m.channels_seen.iter().enumerate() {
        assert_eq!(seen.len(), 1, "hw_dcs: target {t} posted on {seen:?}");
        used.extend(seen.iter().copied());
        assert_eq!(m.sched.channel_of(t as u32), seen.first().copied());
    }
    // The hash spreads the targets over both DCIs and many streams.
    let dcis: BTreeSet<u16> = used.iter().map(|c| c.dci).collect();
    assert_eq!(dcis.len(), 2);
    assert!(used.len() >= 12, "hw_dcs used only {} of 16 channels for 48 targets", used.len());
    // And the same target maps to the same channel in another pool.
    let other = DcSched::new(DcPolicy::HwDcs, shape(2, 8, 64, 48));
    let mut other = other;
    for t in 0..48 {
        other.acquire(t, 0).unwrap();
        assert_eq!(other.channel_of(t), m.sched.channel_of(t));
    }
}

#[test]
fn hw_dcs_stream_error_recovers_only_that_stream() {
    let mut m = Model::new(DcPolicy::HwDcs, shape(1, 4, 64, 16));
    for t in 0..16 {
        m.post(t).unwrap();
        m.post(t).unwrap();
    }
    let bad = m.sched.channel_of(0).unwrap();
    m.failing.insert(bad);
    m.complete(bad);
    // The failed stream refuses posts; the others go on.
    for t in 0..16 {
        let ch = m.sched.channel_of(t).unwrap();
        let r = m.post(t);
        if ch == bad {
            assert_eq!(r, Err(Busy::Recovering { channel: bad }));
        } else {
            assert_eq!(r, Ok(ch));
        }
    }
    let mut rng = Rng(3);
    m.drain(&mut rng);
    assert_eq!(m.recoveries, 1);
    assert!(!m.sched.is_errored(bad));
    assert_eq!(m.post(0), Ok(bad));
}

#[test]
fn dci_error_recovers_without_losing_other_targets() {
    for policy in POLICIES {
        for streams in [1, 4] {
            let mut m = Model::new(policy, shape(3, streams, 16, 24));
            let mut rng = Rng(0x5eed + u64::from(streams));
            let ok = run(&mut m, &mut rng, 40_000, 97, 1000);
            let name = format!("{} with {streams} stream(s)", policy.name());
            // Nothing lost: every target's 1000 requests completed, each once.
            assert_eq!(ok, 24 * 1000, "{name}: {:?}", m.ok);
            assert!(m.ok.iter().all(|&n| n == 1000), "{name}: {:?}", m.ok);
            assert!(m.failed > 100, "{name}: only {} injected errors", m.failed);
            assert!(m.recoveries >= m.failed.min(1), "{name}: {} recoveries", m.recoveries);
            assert_eq!(m.sched.waiting(), 0, "{name}");
        }
    }
}

#[test]
fn dci_error_of_a_whole_dci_with_streams_waits_for_every_stream() {
    // hw_dcs over two DCIs of 4 streams: DCI 0 goes to error as a whole
    // (more streams in error than it allows). Its streams stop; it is
    // recovered once every stream's requests are back; DCI 1 goes on.
    let mut m = Model::new(DcPolicy::HwDcs, shape(2, 4, 64, 32));
    for t in 0..32 {
        m.post(t).unwrap();
        m.post(t).unwrap();
    }
    let on0: Vec<u32> = (0..32).filter(|&t| m.sched.channel_of(t).unwrap().dci == 0).collect();
    let on1: Vec<u32> = (0..32).filter(|&t| m.sched.channel_of(t).unwrap().dci == 1).collect();
    assert!(!on0.is_empty() && !on1.is_empty());
    let first = m.sched.channel_of(on0[0]).unwrap();
    m.failing.insert(first);
    m.complete(first);
    // The pool found the DCI in ERR: the whole DCI.
    assert_eq!(m.sched.fail_dci(0), None, "requests are still in flight on DCI 0");
    assert!(m.sched.is_dci_failed(0));
    for &t in &on0 {
        assert!(matches!(m.post(t), Err(Busy::Recovering { .. })), "target {t} on the failed DCI");
    }
    for &t in &on1 {
        m.post(t).unwrap();
    }
    let mut rng = Rng(4);
    m.drain(&mut rng);
    assert_eq!(m.recoveries, 1, "one recovery: the DCI's, the stream's folded into it");
    assert!(!m.sched.is_dci_failed(0));
    assert!((0..4).all(|s| !m.sched.is_errored(Channel { dci: 0, stream: s })));
    for &t in &on1 {
        assert_eq!(m.ok[t as usize], 3, "target {t} on DCI 1 lost nothing");
    }
    // Everything flushed on DCI 0 posts again and completes.
    let ok = run(&mut m, &mut rng, 0, 0, 3);
    assert_eq!(ok, 32 * 3);
    // A DCI with nothing in flight is handed out at once.
    assert_eq!(m.sched.fail_dci(1), Some(Recovery::Dci(1)));
    m.recover(Recovery::Dci(1));
}

#[test]
fn dci_error_flushes_only_its_channel() {
    // Two DCIs without streams under dcs: target 0 on one, target 1 on the
    // other; the error of target 0's DCI leaves target 1's requests alone.
    let mut m = Model::new(DcPolicy::Dcs, shape(2, 1, 16, 2));
    for _ in 0..4 {
        m.post(0).unwrap();
        m.post(1).unwrap();
    }
    let (c0, c1) = (m.sched.channel_of(0).unwrap(), m.sched.channel_of(1).unwrap());
    assert_ne!(c0, c1);
    m.failing.insert(c0);
    for _ in 0..4 {
        m.complete(c0);
        m.complete(c1);
    }
    assert_eq!((m.failed, m.flushed, m.ok[1], m.ok[0]), (1, 3, 4, 0));
    assert_eq!(m.recoveries, 1);
    // Target 0 posts its four again, in order, and they complete.
    let mut rng = Rng(9);
    for _ in 0..4 {
        m.post(0).unwrap();
    }
    m.drain(&mut rng);
    assert_eq!(m.ok[0], 4);
}

#[test]
fn dcs_wait_queue_is_bounded_and_first_come_first_served() {
    let mut s = DcSched::new(DcPolicy::Dcs, SchedShape { dcis: 1, streams: 1, depth: 8, targets: 5, wait_cap: 2 });
    let t0 = s.acquire(0, 0).unwrap();
    assert_eq!(s.acquire(1, 0), Err(Busy::Waiting { target: 1, ahead: 0 }));
    assert_eq!(s.acquire(2, 0), Err(Busy::Waiting { target: 2, ahead: 1 }));
    assert_eq!(s.acquire(3, 0), Err(Busy::WaitQueueFull { target: 3, cap: 2 }));
    assert_eq!(s.acquire(2, 0), Err(Busy::Waiting { target: 2, ahead: 1 }), "asking again keeps the place");
    assert_eq!(s.waiting(), 2);
    s.complete(t0.tag, Outcome::Ok).unwrap();
    // The freed DCI is target 1's, not target 2's nor the former holder's
    // (which finds the queue full).
    assert_eq!(s.acquire(0, 0), Err(Busy::WaitQueueFull { target: 0, cap: 2 }));
    assert!(matches!(s.acquire(2, 0), Err(Busy::Waiting { .. })));
    assert!(s.acquire(1, 0).is_ok());
    assert_eq!(s.acquire(0, 0), Err(Busy::Waiting { target: 0, ahead: 1 }));
    // A waiting target may give up its place.
    s.cancel_wait(2);
    assert_eq!(s.acquire(0, 0), Err(Busy::Waiting { target: 0, ahead: 0 }));
    assert_eq!(s.waiting(), 1);
}

#[test]
fn send_queue_depth_is_back_pressure() {
    for policy in POLICIES {
        let mut s = DcSched::new(policy, SchedShape { dcis: 1, streams: 1, depth: 3, targets: 1, wait_cap: 1 });
        let tags: Vec<u64> = (0..3).map(|i| s.acquire(0, i).unwrap().tag).collect();
        assert_eq!(s.acquire(0, 3), Err(Busy::SqFull { dci: 0, depth: 3 }), "{}", policy.name());
        s.complete(tags[1], Outcome::Ok).unwrap();
        assert!(s.acquire(0, 3).is_ok());
        // A tag completed already, or never handed out, names nothing.
        assert_eq!(s.complete(tags[1], Outcome::Ok), None);
        assert_eq!(s.complete(u64::MAX, Outcome::Ok), None);
    }
}

#[test]
fn rand_is_reproducible_and_keeps_a_target() {
    let channels = |seed: u64| -> Vec<Channel> {
        let mut m = Model::new(DcPolicy::Rand { seed }, shape(4, 1, 64, 32));
        let mut rng = Rng(21);
        assert_eq!(run(&mut m, &mut rng, 5_000, 0, 50), 32 * 50);
        for (t, seen) in m.channels_seen.iter().enumerate() {
            assert_eq!(seen.len(), 1, "rand: target {t} on {seen:?}");
        }
        (0..32).map(|t| m.sched.channel_of(t).unwrap()).collect()
    };
    let a = channels(1);
    assert_eq!(a, channels(1));
    assert_ne!(a, channels(2));
    assert_eq!(a.iter().map(|c| c.dci).collect::<BTreeSet<_>>().len(), 4);
}

#[test]
fn every_policy_keeps_order_per_target() {
    for policy in POLICIES {
        let mut m = Model::new(policy, shape(2, 2, 8, 12));
        let mut rng = Rng(77);
        assert_eq!(run(&mut m, &mut rng, 20_000, 0, 400), 12 * 400, "{}", policy.name());
    }
}
