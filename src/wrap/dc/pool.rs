//! The DCI pool on a device: N DCIs over one CQ, driven by [`DcSched`].

use std::fmt;

use super::sched::{Busy, Channel, DcPolicy, DcSched, Done, Outcome, Recovery, SchedShape, Ticket};
use crate::mlx5dv::dc::{Dci, DciOpts, DciStreams, DctAddr};
use crate::prim::{Cq, Pd, QpAttr, QpCaps, QpState, SendWr, Wc, WcStatus};

/// Settings of [`DciPool::create`]: start from [`DciPoolOpts::default`] and
/// chain the setters.
///
/// | field | default | |
/// |---|---|---|
/// | `dcis` | 4 | DCIs in the pool |
/// | `streams` | `None` | DCI streams ([`Dci::create_with_streams`]); `None`: one stream per DCI |
/// | `policy` | [`DcPolicy::Dcs`] | |
/// | `caps` | [`QpCaps::default`] | each DCI's; `max_send_wr` is the depth of a DCI in the policy |
/// | `connect` | [`DciOpts::default`] | how each DCI is brought up (and brought up again after an error) |
/// | `wait_cap` | 64 | targets that may wait for a channel at once ([`Busy::WaitQueueFull`] beyond) |
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct DciPoolOpts {
    pub(crate) dcis: u16,
    pub(crate) streams: Option<DciStreams>,
    pub(crate) policy: DcPolicy,
    pub(crate) caps: QpCaps,
    pub(crate) connect: DciOpts,
    pub(crate) wait_cap: u32,
}

impl Default for DciPoolOpts {
    fn default() -> DciPoolOpts {
        DciPoolOpts {
            dcis: 4,
            streams: None,
            policy: DcPolicy::Dcs,
            caps: QpCaps::default(),
            connect: DciOpts::default(),
            wait_cap: 64,
        }
    }
}

impl DciPoolOpts {
    setters! {
        /// DCIs in the pool (at least 1). Default 4.
        const dcis: u16, get_dcis;
        /// DCI streams of every DCI; `None` (default): none.
        const streams: Option<DciStreams>, get_streams;
        /// The policy. Default [`DcPolicy::Dcs`].
        const policy: DcPolicy, get_policy;
        /// Capacities of each DCI. Default [`QpCaps::default`].
        const caps: QpCaps, get_caps;
        /// How each DCI is connected. Default [`DciOpts::default`].
        const connect: DciOpts, get_connect;
        /// Bound of the wait queue. Default 64.
        const wait_cap: u32, get_wait_cap;
    }
}

/// Why [`DciPool::post`] did not post.
#[derive(Debug)]
#[non_exhaustive]
pub enum PostError {
    /// Back-pressure from the policy: poll, then post again.
    Busy(Busy),
    /// The device refused the request (the pool's bookkeeping undone).
    Verbs(crate::prim::Error),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Busy(b) => b.fmt(f),
            PostError::Verbs(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PostError::Busy(_) => None,
            PostError::Verbs(e) => e.source(),
        }
    }
}

impl From<Busy> for PostError {
    fn from(b: Busy) -> PostError {
        PostError::Busy(b)
    }
}

/// A completion of the pool: the request's target and the caller's
/// `wr_id`, with the device's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcCompletion {
    /// The target.
    pub target: u32,
    /// The caller's `wr_id` given to [`DciPool::post`].
    pub wr_id: u64,
    /// Where it was posted (`None`: on an RC QP of a [`DcMesh`](super::DcMesh) fallback).
    pub channel: Option<Channel>,
    /// The device's status.
    pub status: WcStatus,
    /// [`Outcome::Flushed`]: never executed, post it again.
    pub outcome: Outcome,
}

/// A pool of DC initiators over one CQ, a request to a target posted on
/// the DCI and stream its [`DcPolicy`] picks; the target's requests stay
/// ordered (all of a target's requests in flight are on one channel).
///
/// Every request is posted signalled, with the pool's own `wr_id`
/// ([`Ticket::tag`]); [`DciPool::poll`] maps completions back to the
/// target and the caller's `wr_id`. A channel in error is recovered in
/// [`DciPool::poll`] once its requests have all come back (flushed): its
/// stream reset ([`Dci::reset_stream`]) where the DCI has streams, else the
/// DCI reset and connected again; other channels go on meanwhile. A DCI
/// with streams found in ERR after an error completion (more streams in
/// error than `log_num_errored` allows) stops all its streams and is reset
/// and connected again once all of its requests have come back.
///
/// ```no_run
/// use rrddmma::mlx5dv::dc::DctAddr;
/// use rrddmma::prim::{Ah, Context, Cq, Pd, RemoteAddr, SendWr, Sge};
/// use rrddmma::wrap::dc::{DcPolicy, DciPool, DciPoolOpts, PostError};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = Context::open_first()?;
/// let (pd, cq) = (Pd::alloc(&ctx)?, Cq::create(&ctx, 256)?);
/// let mut pool = DciPool::create(&pd, &cq, 16, &DciPoolOpts::default().policy(DcPolicy::DcsQuota { quota: 8 }))?;
/// # let (ah, dctn, key): (Ah, u32, u64) = todo!();
/// # let (sges, remote) = ([Sge::from_raw(0, 0, 0)], RemoteAddr { addr: 0, rkey: 0 });
/// let to = DctAddr::new(&ah, dctn, key);
/// // SAFETY: the SGEs' memory is registered and outlives the completion.
/// match unsafe { pool.post(3, &to, &SendWr::write(&sges, remote), 42) } {
///     Ok(_) | Err(PostError::Busy(_)) => {} // Busy: poll, then post again
///     Err(e) => return Err(e.into()),
/// }
/// let mut done = [None; 16];
/// let n = pool.poll(&mut done)?;
/// # let _ = n; Ok(()) }
/// ```
pub struct DciPool {
    dcis: Vec<Dci>,
    /// The DCIs' QP numbers, by index: the guard of a shared CQ.
    qpns: Vec<u32>,
    cq: Cq,
    sched: DcSched,
    connect: DciOpts,
    foreign: u64,
}

impl fmt::Debug for DciPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DciPool")
            .field("dcis", &self.dcis)
            .field("policy", &self.sched.policy())
            .field("shape", &self.sched.shape())
            .finish()
    }
}

impl DciPool {
    /// Creates `opts.dcis` DCIs on `pd` completing on `cq`, connects them,
    /// for targets `0..targets`.
    ///
    /// The device's refusals as [`Dci::create`] /
    /// [`Dci::create_with_streams`] ([`Error::Unsupported`](crate::prim::Error::Unsupported)
    /// on a device that is not mlx5, such as rxe).
    ///
    /// # Panics
    /// `opts.dcis` 0, `opts.caps.max_send_wr` 0, or [`DcPolicy::DcsQuota`]
    /// with a quota of 0 (as [`DcSched::new`]).
    pub fn create(pd: &Pd, cq: &Cq, targets: u32, opts: &DciPoolOpts) -> crate::prim::Result<DciPool> {
        let streams = opts.streams.map_or(1u16, |s| 1u16 << s.log_num_concurrent.min(15));
        let shape =
            SchedShape { dcis: opts.dcis, streams, depth: opts.caps.max_send_wr, targets, wait_cap: opts.wait_cap };
        let sched = DcSched::new(opts.policy, shape);
        let mut dcis = Vec::with_capacity(usize::from(opts.dcis));
        for _ in 0..opts.dcis {
            let dci = match opts.streams {
                Some(s) => Dci::create_with_streams(pd, cq, cq, opts.caps, s)?,
                None => Dci::create(pd, cq, cq, opts.caps)?,
            };
            dci.connect(&opts.connect)?;
            dcis.push(dci);
        }
        let qpns = dcis.iter().map(Dci::qpn).collect();
        Ok(DciPool { dcis, qpns, cq: cq.clone(), sched, connect: opts.connect, foreign: 0 })
    }

    /// The CQ the DCIs complete to.
    #[cfg(feature = "tokio")]
    pub(crate) fn cq(&self) -> &Cq {
        &self.cq
    }

    /// The policy's state.
    pub fn sched(&self) -> &DcSched {
        &self.sched
    }

    /// Gives up `target`'s place in the policy's wait queue
    /// ([`DcSched::cancel_wait`]): for a target that got
    /// [`Busy::Waiting`] and will not post again soon (while it heads the
    /// queue, freed channels wait for it).
    pub fn cancel_wait(&mut self, target: u32) {
        self.sched.cancel_wait(target);
    }

    /// DCI `i` of the pool.
    pub fn dci(&self, i: u16) -> &Dci {
        &self.dcis[usize::from(i)]
    }

    /// Completions on the pool's CQ that named no request of the pool.
    pub fn foreign_completions(&self) -> u64 {
        self.foreign
    }

    /// Posts `wr` to `target` at `to` on the channel the policy picks,
    /// signalled, the completion carrying `wr_id` back ([`DciPool::poll`]).
    ///
    /// [`PostError::Busy`]: the policy's back-pressure (poll, then post
    /// again); [`PostError::Verbs`]: the post failed.
    ///
    /// # Safety
    /// As [`DciBatch::post`](crate::mlx5dv::dc::DciBatch::post): the memory
    /// `wr` names is registered, alive and untouched until its completion.
    pub unsafe fn post(
        &mut self,
        target: u32,
        to: &DctAddr<'_>,
        wr: &SendWr<'_>,
        wr_id: u64,
    ) -> Result<Ticket, PostError> {
        let t = self.sched.acquire(target, wr_id)?;
        let wr = wr.wr_id(t.tag).signaled();
        let dci = &self.dcis[usize::from(t.channel.dci)];
        // SAFETY: the caller's contract.
        let mut b = unsafe { dci.batch() };
        // SAFETY: as above.
        let r = unsafe { b.post_stream(&wr, to, t.channel.stream) }.and_then(|()| b.complete());
        if let Err(e) = r {
            // Not posted: undo (the request never reached the queue).
            let _ = self.sched.complete(t.tag, Outcome::Ok);
            return Err(PostError::Verbs(e));
        }
        Ok(t)
    }

    /// Polls the CQ, maps each completion back to its target and `wr_id`
    /// into `out`, and recovers the channels whose last request in flight
    /// came back in error; returns how many entries of `out` were filled.
    ///
    /// The recovery's failure (the stream reset or the DCI's reconnect) as
    /// `Err`; the channel stays out of use.
    ///
    /// Completions of other QPs on the CQ (a CQ shared with another
    /// consumer) are never taken as the pool's, whatever their `wr_id`:
    /// they are counted ([`DciPool::foreign_completions`]) and dropped; use
    /// [`DciPool::poll_shared`] to hand them to their owner.
    pub fn poll(&mut self, out: &mut [Option<DcCompletion>]) -> crate::prim::Result<usize> {
        self.poll_shared(out, |_| {})
    }

    /// [`DciPool::poll`], each completion of a QP that is not one of the
    /// pool's DCIs given to `on_foreign` (in CQ order) instead of dropped.
    pub fn poll_shared(
        &mut self,
        out: &mut [Option<DcCompletion>],
        mut on_foreign: impl FnMut(&Wc),
    ) -> crate::prim::Result<usize> {
        let mut wc = [Wc::default(); 16];
        let want = out.len().min(wc.len());
        let n = self.cq.poll(&mut wc[..want])?;
        let mut filled = 0;
        for w in &wc[..n] {
            let outcome = match w.status() {
                s if s.is_success() => Outcome::Ok,
                WcStatus::WR_FLUSH_ERR => Outcome::Flushed,
                _ => Outcome::Failed,
            };
            let Some(d) = claim(&mut self.sched, &self.qpns, w.qp_num(), w.wr_id(), outcome) else {
                self.foreign += 1;
                on_foreign(w);
                continue;
            };
            out[filled] = Some(completion(&d, w.status()));
            filled += 1;
            let dci = d.channel.dci;
            let mut recover = d.recover;
            if d.outcome != Outcome::Ok
                && self.dcis[usize::from(dci)].streams().is_some()
                && !self.sched.is_dci_failed(dci)
                && self.dcis[usize::from(dci)].query_state()? == QpState::ERR
            {
                // More streams in error than the DCI allows: the DCI itself.
                recover = self.sched.fail_dci(dci);
            }
            if let Some(r) = recover {
                self.recover(r)?;
            }
        }
        Ok(filled)
    }

    fn recover(&mut self, r: Recovery) -> crate::prim::Result<()> {
        match r {
            Recovery::Channel(ch) if self.dcis[usize::from(ch.dci)].streams().is_some() => {
                self.dcis[usize::from(ch.dci)].reset_stream(ch.stream)?;
            }
            Recovery::Channel(Channel { dci, .. }) | Recovery::Dci(dci) => {
                let dci = &self.dcis[usize::from(dci)];
                dci.modify(&QpAttr::new(QpState::RESET))?;
                dci.connect(&self.connect)?;
            }
        }
        self.sched.recovered(r);
        Ok(())
    }
}

fn completion(d: &Done, status: WcStatus) -> DcCompletion {
    DcCompletion { target: d.target, wr_id: d.wr_id, channel: Some(d.channel), status, outcome: d.outcome }
}

/// The pool's request a completion of QP `qp_num` carrying `wr_id` names:
/// `None` for a QP that is not one of the pool's DCIs (`qpns`, by index),
/// whatever its `wr_id`, and for a tag of another DCI.
fn claim(sched: &mut DcSched, qpns: &[u32], qp_num: u32, wr_id: u64, outcome: Outcome) -> Option<Done> {
    let dci = qpns.iter().position(|&q| q == qp_num)?;
    sched.complete_on(dci as u16, wr_id, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched() -> DcSched {
        let shape = SchedShape { dcis: 2, streams: 1, depth: 4, targets: 4, wait_cap: 4 };
        DcSched::new(DcPolicy::Dcs, shape)
    }

    #[test]
    fn a_foreign_qp_with_a_live_tag_is_not_the_pools() {
        let mut s = sched();
        let qpns = [0x100, 0x101];
        let t = s.acquire(2, 77).unwrap();
        assert_eq!(t.channel.dci, 0);
        // Another consumer's QP on the shared CQ, its wr_id equal to the live tag.
        assert_eq!(claim(&mut s, &qpns, 0x555, t.tag, Outcome::Ok), None);
        // The other DCI of the pool cannot complete DCI 0's request either.
        assert_eq!(claim(&mut s, &qpns, 0x101, t.tag, Outcome::Failed), None);
        assert_eq!(s.inflight(2), 1, "the request is still in flight");
        assert!(!s.is_errored(t.channel));
        let d = claim(&mut s, &qpns, 0x100, t.tag, Outcome::Ok).expect("the pool's own completion");
        assert_eq!((d.target, d.wr_id, d.outcome), (2, 77, Outcome::Ok));
        assert_eq!(s.inflight(2), 0);
        // Completed once: the same completion again names nothing.
        assert_eq!(claim(&mut s, &qpns, 0x100, t.tag, Outcome::Ok), None);
    }

    #[test]
    fn complete_on_checks_the_tags_dci() {
        let mut s = sched();
        let a = s.acquire(0, 1).unwrap();
        let b = s.acquire(1, 2).unwrap();
        assert_ne!(a.channel.dci, b.channel.dci);
        assert_eq!(s.complete_on(b.channel.dci, a.tag, Outcome::Ok), None);
        assert_eq!(s.complete_on(a.channel.dci, b.tag, Outcome::Ok), None);
        assert_eq!(s.complete_on(a.channel.dci, a.tag, Outcome::Ok).map(|d| d.wr_id), Some(1));
        assert_eq!(s.complete_on(b.channel.dci, b.tag, Outcome::Ok).map(|d| d.wr_id), Some(2));
    }
}
