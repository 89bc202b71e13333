//! The DCI pool's policy as a pure state machine: which DCI and stream a
//! request to a target takes, what happens on a completion, when a channel
//! in error is recovered. No device: [`DciPool`](super::DciPool) drives it
//! with real completions, tests/dc_pool.rs with a model of them.

use std::collections::VecDeque;
use std::fmt;

/// Which DCI (and stream) a request to a target takes; UCX's names
/// (`UCX_DC_MLX5_TX_POLICY`).
///
/// | policy | a target's channel | ordering per target | fit |
/// |---|---|---|---|
/// | `Dcs` | a free channel, held while the target has requests in flight, released at the last completion | one channel at a time | few active targets at once, each bursty |
/// | `DcsQuota` | as `Dcs`; after `quota` posts on one hold, while other targets wait, the holder stops posting until it drains and lets the channel go | as `Dcs` | many targets competing for few DCIs (no target starves) |
/// | `HwDcs` | fixed by a hash of the target: DCI `h % dcis`, stream `(h / dcis) % streams` | its one channel | DCIs with streams: many targets share few DCIs without holding |
/// | `Rand` | drawn at random (seeded, reproducible) on first use, kept | its one channel | no streams, many targets, uniform load |
///
/// A channel is a (DCI, stream) pair; a DCI without streams has stream 0
/// alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DcPolicy {
    /// `dcs`: a channel held by a target while it has requests in flight.
    Dcs,
    /// `dcs_quota`: `dcs`, with a holder stopped after `quota` posts while
    /// other targets wait (UCX's `UCX_DC_MLX5_QUOTA`).
    DcsQuota {
        /// Posts of one hold after which a waiting target takes precedence (at least 1).
        quota: u32,
    },
    /// `hw_dcs`: a channel per target by hash, DCI streams shared.
    HwDcs,
    /// `rand`: a channel per target drawn from a generator seeded with `seed`.
    Rand {
        /// The generator's seed: the same seed, the same choices.
        seed: u64,
    },
}

impl DcPolicy {
    /// UCX's name of the policy.
    pub const fn name(&self) -> &'static str {
        match self {
            DcPolicy::Dcs => "dcs",
            DcPolicy::DcsQuota { .. } => "dcs_quota",
            DcPolicy::HwDcs => "hw_dcs",
            DcPolicy::Rand { .. } => "rand",
        }
    }

    fn holds(&self) -> bool {
        matches!(self, DcPolicy::Dcs | DcPolicy::DcsQuota { .. })
    }
}

/// A DCI and one of its streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Channel {
    /// The DCI's index in the pool.
    pub dci: u16,
    /// The stream (0 on a DCI without streams).
    pub stream: u16,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DCI {} stream {}", self.dci, self.stream)
    }
}

/// The shape of a pool: [`DcSched::new`]'s sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedShape {
    /// DCIs (at least 1).
    pub dcis: u16,
    /// Streams per DCI: `2^log_num_concurrent`, 1 without streams.
    pub streams: u16,
    /// Requests in flight per DCI at most: its send queue's depth.
    pub depth: u32,
    /// Targets: ids `0..targets` (ranks, say).
    pub targets: u32,
    /// Targets that may wait for a channel at once (`Dcs`, `DcsQuota`); one
    /// more is [`Busy::WaitQueueFull`].
    pub wait_cap: u32,
}

/// Why a request cannot be posted now: back-pressure, not failure. Retry
/// after completions have been handled ([`DcSched::complete`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Busy {
    /// Every channel is held (`Dcs`, `DcsQuota`): the target waits in the
    /// queue, `ahead` targets before it; the first channel freed goes to
    /// the queue's head.
    Waiting {
        /// The target.
        target: u32,
        /// Targets ahead of it.
        ahead: u32,
    },
    /// The wait queue holds `cap` targets already ([`SchedShape::wait_cap`]).
    WaitQueueFull {
        /// The target refused.
        target: u32,
        /// The queue's bound.
        cap: u32,
    },
    /// The target's DCI has `depth` requests in flight (its send queue is full).
    SqFull {
        /// The DCI.
        dci: u16,
        /// Its depth.
        depth: u32,
    },
    /// `DcsQuota`: the target posted `quota` requests on this hold while
    /// others wait; it posts again once its requests have completed and
    /// its turn comes.
    QuotaSpent {
        /// The target.
        target: u32,
        /// The quota.
        quota: u32,
    },
    /// The target's channel is in error: its requests in flight complete
    /// (flushed), the pool recovers it, then the target posts again.
    Recovering {
        /// The channel in error.
        channel: Channel,
    },
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Busy::Waiting { target, ahead } => write!(
                f,
                "DCI pool: every channel is held; target {target} waits with {ahead} ahead (poll completions, then post again)"
            ),
            Busy::WaitQueueFull { target, cap } => write!(
                f,
                "DCI pool: target {target} refused: {cap} targets already wait for a channel (poll completions, or raise the wait queue or the DCI count)"
            ),
            Busy::SqFull { dci, depth } => {
                write!(f, "DCI pool: DCI {dci} has {depth} requests in flight, its send queue's depth (poll completions)")
            }
            Busy::QuotaSpent { target, quota } => write!(
                f,
                "DCI pool (dcs_quota): target {target} posted its quota of {quota} while others wait (poll completions; it posts again at its turn)"
            ),
            Busy::Recovering { channel } => {
                write!(f, "DCI pool: {channel} is in error and being recovered (poll completions, then post again)")
            }
        }
    }
}

impl std::error::Error for Busy {}

/// A request's place: where to post it and the `wr_id` to post it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The DCI and stream to post on.
    pub channel: Channel,
    /// The `wr_id` the request must carry (the pool's, not the caller's:
    /// [`DcSched::complete`] maps it back): the DCI, a generation that
    /// makes a stale tag name nothing, and the slot.
    pub tag: u64,
}

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Completed successfully.
    Ok,
    /// Completed in error: its channel goes to error and is recovered.
    Failed,
    /// Flushed because its channel was in error: never executed, post it
    /// again (a channel's later requests are flushed after a failure).
    Flushed,
}

/// What to bring back to work, handed out once its requests in flight have
/// all come back ([`Done::recover`], [`DcSched::fail_dci`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// One channel: on a DCI with streams, reset its stream
    /// (`mlx5dv_dci_stream_id_reset`); on a DCI without (its one channel),
    /// reset the DCI and connect it again.
    Channel(Channel),
    /// A whole DCI ([`DcSched::fail_dci`]): reset it and connect it again;
    /// every stream of it works again after.
    Dci(u16),
}

/// A completion mapped back to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// The target the request was for.
    pub target: u32,
    /// The caller's `wr_id` given to [`DcSched::acquire`].
    pub wr_id: u64,
    /// Where it was posted.
    pub channel: Channel,
    /// What became of it.
    pub outcome: Outcome,
    /// A channel (or DCI) in error whose last request in flight this was:
    /// recover it now and call [`DcSched::recovered`].
    pub recover: Option<Recovery>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    target: u32,
    /// Bumped at each use: a stale tag names no request.
    gen: u16,
    stream: u16,
    live: bool,
    wr_id: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct ChanState {
    inflight: u32,
    errored: bool,
    /// Handed out with `Done::recover`, `recovered` not yet called.
    recovering: bool,
    held: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct TargetState {
    chan: Option<u32>,
    inflight: u32,
    /// Posts on the current hold (`DcsQuota`).
    posted: u32,
    waiting: bool,
}

/// The policy's state: channels held, requests in flight by DCI slot,
/// the targets waiting. Sized at creation; nothing grows afterwards (the
/// wait queue is bounded by [`SchedShape::wait_cap`]).
#[derive(Clone, Debug)]
pub struct DcSched {
    policy: DcPolicy,
    shape: SchedShape,
    chans: Vec<ChanState>,
    /// Requests in flight per DCI.
    dci_inflight: Vec<u32>,
    /// DCIs in error as a whole ([`DcSched::fail_dci`]), and whether their
    /// recovery was handed out.
    dci_failed: Vec<bool>,
    dci_recovering: Vec<bool>,
    /// Free slot numbers per DCI (a stack of `depth`).
    free_slots: Vec<Vec<u32>>,
    slots: Vec<Slot>,
    targets: Vec<TargetState>,
    /// Channels neither held nor in error (`Dcs`, `DcsQuota`).
    free_chans: VecDeque<u32>,
    waitq: VecDeque<u32>,
    rng: u64,
}

/// A 64-bit mix (splitmix64's finaliser): the hash of `HwDcs`, the step of `Rand`.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl DcSched {
    /// A pool's policy state, every channel free.
    ///
    /// # Panics
    /// On a shape that cannot work (no DCI, no stream, depth 0, more than
    /// 2^32 slots) or a `DcsQuota` of 0: programming errors.
    pub fn new(policy: DcPolicy, shape: SchedShape) -> DcSched {
        assert!(
            shape.dcis > 0 && shape.streams > 0 && shape.depth > 0,
            "DcSched::new: a pool needs at least one DCI, one stream and a depth of 1 (got {shape:?})"
        );
        if let DcPolicy::DcsQuota { quota } = policy {
            assert!(quota > 0, "DcSched::new: DcsQuota {{ quota: 0 }} would never post; give a quota of at least 1");
        }
        let nchan = usize::from(shape.dcis) * usize::from(shape.streams);
        let depth = shape.depth as usize;
        DcSched {
            policy,
            shape,
            chans: vec![ChanState::default(); nchan],
            dci_inflight: vec![0; usize::from(shape.dcis)],
            dci_failed: vec![false; usize::from(shape.dcis)],
            dci_recovering: vec![false; usize::from(shape.dcis)],
            free_slots: (0..shape.dcis).map(|_| (0..shape.depth).rev().collect()).collect(),
            slots: vec![Slot::default(); usize::from(shape.dcis) * depth],
            targets: vec![TargetState::default(); shape.targets as usize],
            free_chans: if policy.holds() { (0..nchan as u32).collect() } else { VecDeque::new() },
            waitq: VecDeque::with_capacity(shape.wait_cap as usize),
            rng: match policy {
                DcPolicy::Rand { seed } => seed,
                _ => 0,
            },
        }
    }

    /// The policy.
    pub fn policy(&self) -> DcPolicy {
        self.policy
    }

    /// The shape given to [`DcSched::new`].
    pub fn shape(&self) -> SchedShape {
        self.shape
    }

    fn channel(&self, c: u32) -> Channel {
        let s = u32::from(self.shape.streams);
        Channel { dci: (c / s) as u16, stream: (c % s) as u16 }
    }

    fn index(&self, ch: Channel) -> u32 {
        u32::from(ch.dci) * u32::from(self.shape.streams) + u32::from(ch.stream)
    }

    /// The channel `target` posts on now, if it has one (held, or fixed by
    /// `HwDcs` / `Rand`).
    pub fn channel_of(&self, target: u32) -> Option<Channel> {
        self.targets.get(target as usize)?.chan.map(|c| self.channel(c))
    }

    /// Requests of `target` in flight.
    pub fn inflight(&self, target: u32) -> u32 {
        self.targets.get(target as usize).map_or(0, |t| t.inflight)
    }

    /// Targets waiting for a channel.
    pub fn waiting(&self) -> usize {
        self.waitq.len()
    }

    /// Whether `ch` is in error (its requests being flushed, or its
    /// recovery pending).
    pub fn is_errored(&self, ch: Channel) -> bool {
        self.chans[self.index(ch) as usize].errored
    }

    /// Takes a place for one request to `target` carrying the caller's
    /// `wr_id`: on `Ok` the request counts as in flight and must be posted
    /// on the ticket's channel with the ticket's tag as its `wr_id`.
    ///
    /// # Panics
    /// For a target outside `0..targets`.
    pub fn acquire(&mut self, target: u32, wr_id: u64) -> Result<Ticket, Busy> {
        assert!(
            target < self.shape.targets,
            "DcSched::acquire: target {target} is outside the pool's 0..{} (size the pool for every target)",
            self.shape.targets
        );
        let c = match self.policy {
            DcPolicy::Dcs | DcPolicy::DcsQuota { .. } => self.held(target)?,
            DcPolicy::HwDcs | DcPolicy::Rand { .. } => self.fixed(target),
        };
        let cs = self.chans[c as usize];
        if cs.errored {
            return Err(Busy::Recovering { channel: self.channel(c) });
        }
        let ch = self.channel(c);
        let d = usize::from(ch.dci);
        if self.dci_inflight[d] >= self.shape.depth {
            let t = &mut self.targets[target as usize];
            if self.policy.holds() && t.inflight == 0 {
                // Taken just now: let it go again, at the front.
                t.chan = None;
                t.posted = 0;
                self.chans[c as usize].held = false;
                self.free_chans.push_front(c);
            }
            return Err(Busy::SqFull { dci: ch.dci, depth: self.shape.depth });
        }
        let Some(slot) = self.free_slots[d].pop() else {
            unreachable!("DcSched: DCI {d} has {} in flight below its depth but no free slot", self.dci_inflight[d])
        };
        let at = d * self.shape.depth as usize + slot as usize;
        let gen = self.slots[at].gen.wrapping_add(1);
        self.slots[at] = Slot { target, gen, stream: ch.stream, live: true, wr_id };
        self.dci_inflight[d] += 1;
        self.chans[c as usize].inflight += 1;
        let t = &mut self.targets[target as usize];
        t.inflight += 1;
        t.posted += 1;
        Ok(Ticket { channel: ch, tag: (u64::from(ch.dci) << 48) | (u64::from(gen) << 32) | u64::from(slot) })
    }

    /// `Dcs` / `DcsQuota`: the channel `target` holds, or the one it takes now.
    fn held(&mut self, target: u32) -> Result<u32, Busy> {
        let t = self.targets[target as usize];
        if let Some(c) = t.chan {
            if let DcPolicy::DcsQuota { quota } = self.policy {
                if t.posted >= quota && !self.waitq.is_empty() && !self.chans[c as usize].errored {
                    return Err(Busy::QuotaSpent { target, quota });
                }
            }
            return Ok(c);
        }
        let head = self.waitq.front().copied();
        if head.is_none() || head == Some(target) {
            if let Some(c) = self.free_chans.pop_front() {
                if head.is_some() {
                    self.waitq.pop_front();
                }
                let t = &mut self.targets[target as usize];
                t.waiting = false;
                t.chan = Some(c);
                t.posted = 0;
                self.chans[c as usize].held = true;
                return Ok(c);
            }
        }
        if !t.waiting {
            if self.waitq.len() >= self.shape.wait_cap as usize {
                return Err(Busy::WaitQueueFull { target, cap: self.shape.wait_cap });
            }
            self.waitq.push_back(target);
            self.targets[target as usize].waiting = true;
        }
        let ahead = self.waitq.iter().position(|&w| w == target).unwrap_or(0) as u32;
        Err(Busy::Waiting { target, ahead })
    }

    /// `HwDcs` / `Rand`: the target's fixed channel, chosen on first use.
    fn fixed(&mut self, target: u32) -> u32 {
        if let Some(c) = self.targets[target as usize].chan {
            return c;
        }
        let n = u64::from(self.shape.dcis) * u64::from(self.shape.streams);
        let c = match self.policy {
            DcPolicy::HwDcs => {
                let h = mix(u64::from(target));
                let (dcis, streams) = (u64::from(self.shape.dcis), u64::from(self.shape.streams));
                let (dci, stream) = (h % dcis, (h / dcis) % streams);
                (dci * streams + stream) as u32
            }
            _ => {
                self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
                (mix(self.rng) % n) as u32
            }
        };
        self.targets[target as usize].chan = Some(c);
        c
    }

    /// Gives up `target`'s place in the wait queue (a target that got
    /// [`Busy::Waiting`] and will not post again soon: while it heads the
    /// queue, freed channels wait for it).
    pub fn cancel_wait(&mut self, target: u32) {
        if let Some(t) = self.targets.get_mut(target as usize) {
            if t.waiting {
                t.waiting = false;
                self.waitq.retain(|&w| w != target);
            }
        }
    }

    /// The completion of the request posted with `tag`, reported by DCI
    /// `dci` (the completion's QP is the pool's DCI `dci`): `None`, nothing
    /// changed, when the tag names another DCI. A pool on a CQ shared with
    /// other QPs calls this, never [`DcSched::complete`], with the DCI its
    /// completion's QP number names: a foreign completion whose `wr_id`
    /// happens to equal a live tag is then never taken as the pool's.
    pub fn complete_on(&mut self, dci: u16, tag: u64, outcome: Outcome) -> Option<Done> {
        if (tag >> 48) != u64::from(dci) {
            return None;
        }
        self.complete(tag, outcome)
    }

    /// The completion of the request posted with `tag`: `None` for a tag
    /// that names no request in flight (not this pool's, or completed
    /// already). The tag alone: where completions of other QPs may arrive,
    /// use [`DcSched::complete_on`].
    pub fn complete(&mut self, tag: u64, outcome: Outcome) -> Option<Done> {
        let (dci, gen, slot) = ((tag >> 48) as usize, (tag >> 32) as u16, (tag & 0xffff_ffff) as usize);
        if dci >= usize::from(self.shape.dcis) || slot >= self.shape.depth as usize {
            return None;
        }
        let at = dci * self.shape.depth as usize + slot;
        let s = self.slots[at];
        if !s.live || s.gen != gen {
            return None;
        }
        self.slots[at].live = false;
        self.free_slots[dci].push(slot as u32);
        self.dci_inflight[dci] -= 1;
        let ch = Channel { dci: dci as u16, stream: s.stream };
        let c = self.index(ch);
        let cs = &mut self.chans[c as usize];
        cs.inflight -= 1;
        if outcome != Outcome::Ok {
            cs.errored = true;
        }
        let recover = if self.dci_failed[dci] {
            (self.dci_inflight[dci] == 0 && !self.dci_recovering[dci]).then(|| {
                self.dci_recovering[dci] = true;
                Recovery::Dci(dci as u16)
            })
        } else {
            (cs.errored && cs.inflight == 0 && !cs.recovering).then(|| {
                cs.recovering = true;
                Recovery::Channel(ch)
            })
        };
        let errored = cs.errored;
        let t = &mut self.targets[s.target as usize];
        t.inflight -= 1;
        if self.policy.holds() && t.inflight == 0 && t.chan == Some(c) {
            t.chan = None;
            t.posted = 0;
            self.chans[c as usize].held = false;
            if !errored {
                self.free_chans.push_back(c);
            }
        }
        Some(Done { target: s.target, wr_id: s.wr_id, channel: ch, outcome, recover })
    }

    /// Whether DCI `dci` is in error as a whole ([`DcSched::fail_dci`]).
    pub fn is_dci_failed(&self, dci: u16) -> bool {
        self.dci_failed[usize::from(dci)]
    }

    /// DCI `dci` went to error as a whole (a DCI with streams whose
    /// errored streams passed `2^log_num_errored`: its state is ERR): every
    /// stream of it stops taking requests, and it is handed out for
    /// recovery ([`Recovery::Dci`]) once all its requests have come back;
    /// here already when none is in flight. A stream recovery of it not yet
    /// done is folded into the DCI's.
    pub fn fail_dci(&mut self, dci: u16) -> Option<Recovery> {
        let d = usize::from(dci);
        let streams = u32::from(self.shape.streams);
        if !self.dci_failed[d] {
            self.dci_failed[d] = true;
            for c in u32::from(dci) * streams..(u32::from(dci) + 1) * streams {
                let cs = &mut self.chans[c as usize];
                cs.errored = true;
                cs.recovering = false;
            }
            self.free_chans.retain(|&c| c / streams != u32::from(dci));
        }
        (self.dci_inflight[d] == 0 && !self.dci_recovering[d]).then(|| {
            self.dci_recovering[d] = true;
            Recovery::Dci(dci)
        })
    }

    /// `r`, handed out by [`Done::recover`] or [`DcSched::fail_dci`], works
    /// again (the stream reset, or the DCI reset and reconnected).
    ///
    /// # Panics
    /// For a recovery that was not handed out.
    pub fn recovered(&mut self, r: Recovery) {
        match r {
            Recovery::Channel(ch) => {
                let c = self.index(ch);
                let cs = &mut self.chans[c as usize];
                assert!(cs.recovering, "DcSched::recovered: {ch} was not handed out by Done::recover");
                *cs = ChanState { held: cs.held, ..ChanState::default() };
                if self.policy.holds() && !cs.held {
                    self.free_chans.push_back(c);
                }
            }
            Recovery::Dci(dci) => {
                let d = usize::from(dci);
                assert!(self.dci_recovering[d], "DcSched::recovered: DCI {dci} was not handed out for recovery");
                self.dci_failed[d] = false;
                self.dci_recovering[d] = false;
                let streams = u32::from(self.shape.streams);
                for c in u32::from(dci) * streams..(u32::from(dci) + 1) * streams {
                    // Nothing is in flight on the DCI: no channel of it is held.
                    self.chans[c as usize] = ChanState::default();
                    if self.policy.holds() {
                        self.free_chans.push_back(c);
                    }
                }
            }
        }
    }
}
