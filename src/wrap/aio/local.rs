//! [`LocalEndpoint`]: the per-thread async path. One thread owns the QP,
//! its CQ and the requests in flight: no lock, no atomic, no driver task,
//! no tokio type. Whichever operation is polled drains the CQ and wakes
//! the operation whose `wr_id` arrived.

use std::alloc::Layout;
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Range;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::error::{Error, Result};
use super::pool::{LocalMr, MrPool};
use crate::prim::{Cq, Qp, RecvWr, RemoteAddr, SendWr, Sge, Wc};

/// Where one request in flight stands.
enum Slot {
    /// Not in use.
    Free,
    /// Posted; the waker of the operation awaiting it.
    Waiting(Option<Waker>),
    /// Completed, not yet collected by its operation.
    Done(Wc),
    /// Posted, its operation dropped: the buffer stays here until the
    /// completion arrives (or the QP is destroyed).
    Abandoned(Option<LocalMr>),
}

/// The requests in flight of one thread's endpoint.
struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    wcs: Vec<Wc>,
}

/// An async RC endpoint that lives on one thread (`!Send`, `!Sync`).
///
/// Built over a connected QP whose send and receive queues complete to
/// `cq`, which nothing else polls. Its operations are futures as
/// [`RcEndpoint`](super::RcEndpoint)'s are, with the same cancellation
/// guarantee: a future dropped before its completion leaves its buffer to
/// the endpoint, which frees it when the completion arrives or after the
/// QP is destroyed. Any executor that polls futures on one thread runs it
/// (tokio's current-thread runtime with a `LocalSet`, or a plain
/// `block_on`): it needs no runtime, no timer and no I/O reactor, as its
/// operations drain the CQ each time they are polled and wake themselves
/// while they wait (a busy-polling design: one thread per core).
///
/// Field order is drop order: the QP goes first, then the slots that hold
/// abandoned buffers.
pub struct LocalEndpoint {
    qp: Qp,
    cq: Cq,
    slots: RefCell<Slots>,
    pool: MrPool,
    _not_send: PhantomData<Rc<()>>,
}

impl std::fmt::Debug for LocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEndpoint").field("qpn", &self.qp.qpn()).finish_non_exhaustive()
    }
}

impl LocalEndpoint {
    /// An endpoint over `qp` (connected, RC), which completes to `cq`
    /// alone, with buffers from `pool` (registered on `qp`'s protection
    /// domain). Completions another poller of `cq` takes are lost to this
    /// endpoint: their operations never resolve and their buffers are
    /// never reused.
    pub fn new(qp: Qp, cq: Cq, pool: MrPool) -> LocalEndpoint {
        let slots = Slots { slots: Vec::new(), free: Vec::new(), wcs: vec![Wc::default(); 32] };
        LocalEndpoint { qp, cq, slots: RefCell::new(slots), pool, _not_send: PhantomData }
    }

    /// The pool this endpoint's buffers come from.
    pub fn pool(&self) -> &MrPool {
        &self.pool
    }

    /// A buffer of `layout` from the pool.
    pub fn alloc_local_mr(&self, layout: Layout) -> Result<LocalMr> {
        self.pool.alloc(layout).ok_or(Error::PoolExhausted { size: layout.size(), free: self.pool.free_bytes() })
    }

    /// Requests posted whose completion has not arrived.
    pub fn in_flight(&self) -> usize {
        let s = self.slots.borrow();
        s.slots.iter().filter(|s| matches!(s, Slot::Waiting(_) | Slot::Abandoned(_))).count()
    }

    /// Drains the CQ: each completion goes to its slot, waking its
    /// operation; an abandoned request's buffer is freed.
    fn drain(&self) -> Result<()> {
        let mut s = self.slots.borrow_mut();
        let Slots { slots, free, wcs } = &mut *s;
        loop {
            let n = self.cq.poll(wcs)?;
            for wc in &wcs[..n] {
                let i = wc.wr_id() as usize;
                let Some(slot) = slots.get_mut(i) else { continue };
                match std::mem::replace(slot, Slot::Done(*wc)) {
                    // Waking schedules the operation; a waker that drops
                    // operations instead finds the slots borrowed, and
                    // their buffers are never reused (see `Drop`).
                    Slot::Waiting(w) => w.into_iter().for_each(Waker::wake),
                    Slot::Abandoned(buf) => {
                        *slot = Slot::Free;
                        free.push(i as u32);
                        drop(buf);
                    }
                    // A `wr_id` this endpoint did not post: left as it was.
                    old @ (Slot::Free | Slot::Done(_)) => *slot = old,
                }
            }
            if n < wcs.len() {
                return Ok(());
            }
        }
    }

    fn take_slot(&self) -> u32 {
        let mut s = self.slots.borrow_mut();
        match s.free.pop() {
            Some(i) => {
                s.slots[i as usize] = Slot::Waiting(None);
                i
            }
            None => {
                s.slots.push(Slot::Waiting(None));
                u32::try_from(s.slots.len() - 1).expect("LocalEndpoint: fewer than 2^32 requests in flight")
            }
        }
    }

    fn op<P, F, T>(&self, buf: LocalMr, post: P, output: F) -> LocalOp<'_, P, F>
    where
        P: Fn(&Qp, u64) -> crate::prim::Result<()>,
        F: Fn(&Wc, LocalMr) -> T,
    {
        LocalOp { ep: self, post, output, id: None, buf: Some(buf) }
    }

    fn send_op<'s, T>(
        &'s self,
        buf: LocalMr,
        range: Range<usize>,
        wr: impl for<'a> Fn(&'a [Sge; 1]) -> SendWr<'a> + 's,
        output: impl Fn(&Wc, LocalMr) -> T + 's,
    ) -> LocalOp<'s, impl Fn(&Qp, u64) -> crate::prim::Result<()> + 's, impl Fn(&Wc, LocalMr) -> T + 's> {
        let sge = [buf.sge(range)];
        // SAFETY: every entry lies in `buf`, which the operation holds from
        // before the post until the completion; dropped before, it leaves
        // the buffer in its slot until the completion or the QP's
        // destruction (the QP is dropped before the slots).
        let post = move |qp: &Qp, id| unsafe { qp.post_send(&mut [wr(&sge).wr_id(id).signaled()]) };
        self.op(buf, post, output)
    }

    /// RDMA WRITE of `range` of `src` to `dst`; gives `src` back.
    pub fn write(
        &self,
        src: LocalMr,
        range: Range<usize>,
        dst: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.send_op(src, range, move |s| SendWr::write(s, dst), |_, b| b)
    }

    /// RDMA READ from `src` into `range` of `dst`; gives `dst` back.
    pub fn read(
        &self,
        dst: LocalMr,
        range: Range<usize>,
        src: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.send_op(dst, range, move |s| SendWr::read(s, src), |_, b| b)
    }

    /// SEND of `range` of `src` (consumes a receive at the peer).
    pub fn send(&self, src: LocalMr, range: Range<usize>) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.send_op(src, range, |s| SendWr::send(s), |_, b| b)
    }

    /// 8-byte fetch-and-add at `dst` (8-byte aligned); the old value.
    pub async fn fetch_add(&self, dst: RemoteAddr, add: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.send_op(old, 0..8, move |s| SendWr::fetch_add(s, dst, add), |_, old| read_u64(&old)).await
    }

    /// Receives one message into `dst`; its length and `dst`.
    pub fn recv(&self, dst: LocalMr) -> impl Future<Output = Result<(usize, LocalMr)>> + '_ {
        let sge = [dst.sge(0..dst.len())];
        // SAFETY: as in `send_op`.
        let post = move |qp: &Qp, id| unsafe { qp.post_recv(&mut [RecvWr::new(&sge, id)]) };
        self.op(dst, post, |wc, b| (wc.byte_len() as usize, b))
    }
}

fn read_u64(mr: &LocalMr) -> u64 {
    let mut b = [0u8; 8];
    mr.read(0, &mut b);
    u64::from_ne_bytes(b)
}

/// The future of one request of a [`LocalEndpoint`]: posted at its first
/// poll; each poll drains the CQ.
struct LocalOp<'a, P, F> {
    ep: &'a LocalEndpoint,
    post: P,
    output: F,
    id: Option<u32>,
    buf: Option<LocalMr>,
}

impl<P, F> Unpin for LocalOp<'_, P, F> {}

impl<P, F, T> Future for LocalOp<'_, P, F>
where
    P: Fn(&Qp, u64) -> crate::prim::Result<()>,
    F: Fn(&Wc, LocalMr) -> T,
{
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let ep = self.ep;
        let id = match self.id {
            Some(id) => id,
            None => {
                assert!(self.buf.is_some(), "LocalEndpoint: an operation polled after it resolved");
                let id = ep.take_slot();
                if let Err(e) = (self.post)(&ep.qp, u64::from(id)) {
                    // Never posted: the slot is free, the buffer goes back with the future.
                    let mut s = ep.slots.borrow_mut();
                    s.slots[id as usize] = Slot::Free;
                    s.free.push(id);
                    return Poll::Ready(Err(e.into()));
                }
                self.id = Some(id);
                id
            }
        };
        let drained = ep.drain();
        let mut s = ep.slots.borrow_mut();
        let Slots { slots, free, .. } = &mut *s;
        let slot = &mut slots[id as usize];
        match slot {
            Slot::Done(wc) => {
                let wc = *wc;
                *slot = Slot::Free;
                free.push(id);
                drop(s);
                self.id = None;
                let buf = self.buf.take().expect("an unresolved operation holds its buffer");
                Poll::Ready(if wc.is_success() { Ok((self.output)(&wc, buf)) } else { Err(failed(&wc)) })
            }
            Slot::Waiting(w) => {
                if let Err(e) = drained {
                    // The CQ failed: the completion will not come; the
                    // buffer stays in the slot (the device may own it).
                    *slot = Slot::Abandoned(self.buf.take());
                    self.id = None;
                    return Poll::Ready(Err(e));
                }
                if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *w = Some(cx.waker().clone());
                }
                drop(s);
                // Busy polling: the next poll drains the CQ again.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Slot::Free | Slot::Abandoned(_) => unreachable!("only this future frees or abandons its slot"),
        }
    }
}

impl<P, F> Drop for LocalOp<'_, P, F> {
    /// A dropped operation: a completed request's slot is freed and its
    /// buffer goes back to the pool; a pending one's buffer stays in the
    /// slot until its completion arrives.
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let Ok(mut s) = self.ep.slots.try_borrow_mut() else {
            // Dropped from inside a drain (a waker that drops futures):
            // the buffer is never reused.
            std::mem::forget(self.buf.take());
            return;
        };
        let Slots { slots, free, .. } = &mut *s;
        match &slots[id as usize] {
            Slot::Done(_) => {
                slots[id as usize] = Slot::Free;
                free.push(id);
            }
            _ => slots[id as usize] = Slot::Abandoned(self.buf.take()),
        }
    }
}

#[cold]
fn failed(wc: &Wc) -> Error {
    match wc.ok() {
        Ok(_) => unreachable!("a failed completion's status is not success"),
        Err(e) => e.into(),
    }
}
