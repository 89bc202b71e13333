//! The claim a direct send-queue view (`mlx5dv::obj::DirectSq`) holds on
//! its QP. While it is held, [`Qp::modify`](super::Qp::modify) to RESET
//! panics: after a reset the device restarts at WQE 0 while the view would
//! keep its own producer index, and the device would re-execute the stale
//! WQEs between. The view resets the QP itself (`DirectSq::reset`).

use std::sync::atomic::{AtomicU32, Ordering};

/// Set while a view holds the claim.
const VIEW: u32 = 1 << 31;
/// Set by the first view and never cleared: libibverbs' indices of the
/// send queue are stale from then on, so nothing posts through it again.
const VIEWED: u32 = 1 << 30;
/// The bits that count resets under way.
const RESETS: u32 = VIEWED - 1;

/// A view's claim on a QP's send queue, and the resets under way.
#[derive(Debug, Default)]
pub(crate) struct DirectClaim(AtomicU32);

impl DirectClaim {
    /// Takes the claim for a view: `false` if a view holds it or a reset is
    /// under way.
    // Used by the `mlx5dv::obj` views, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn take(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                (c & (VIEW | RESETS) == 0).then_some(c | VIEW | VIEWED)
            })
            .is_ok()
    }

    /// Whether a view holds, or ever held, the claim: the send queue is
    /// then driven (or was) without libibverbs, whose producer index no
    /// longer matches the device's, and must not be posted to through it.
    pub(crate) fn ever_viewed(&self) -> bool {
        self.0.load(Ordering::Acquire) & (VIEW | VIEWED) != 0
    }

    /// Gives back a claim [`take`](Self::take) returned `true` for.
    // Used by the `mlx5dv::obj` views, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn release(&self) {
        self.0.fetch_and(!VIEW, Ordering::Release);
    }

    /// Starts a reset through `Qp::modify`: `None` while a view holds the
    /// claim; otherwise a guard that ends it, during which no view is made.
    pub(crate) fn enter_reset(&self) -> Option<ResetGuard<'_>> {
        let prev = self.0.fetch_add(1, Ordering::AcqRel);
        if prev & VIEW != 0 {
            self.0.fetch_sub(1, Ordering::Release);
            return None;
        }
        Some(ResetGuard(self))
    }
}

/// A reset under way ([`DirectClaim::enter_reset`]).
pub(crate) struct ResetGuard<'a>(&'a DirectClaim);

impl Drop for ResetGuard<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_and_a_reset_exclude_each_other() {
        let c = DirectClaim::default();
        assert!(c.take());
        assert!(!c.take(), "a second view");
        assert!(c.enter_reset().is_none(), "a reset under a view");
        c.release();
        let g = c.enter_reset().expect("no view: the reset goes ahead");
        assert!(c.enter_reset().is_some(), "two resets may overlap");
        assert!(!c.take(), "no view while a reset is under way");
        drop(g);
        assert!(c.take());
    }

    #[test]
    fn a_view_marks_the_queue_for_good() {
        let c = DirectClaim::default();
        assert!(!c.ever_viewed());
        assert!(c.enter_reset().is_some(), "a reset alone marks nothing");
        assert!(!c.ever_viewed());
        assert!(c.take());
        assert!(c.ever_viewed());
        c.release();
        assert!(c.ever_viewed(), "still marked after the view is gone");
        let g = c.enter_reset().expect("no view: the reset goes ahead");
        assert!(!c.take(), "no view while a reset is under way");
        drop(g);
        assert!(c.take(), "a new view after the first is gone");
        assert!(c.enter_reset().is_none());
    }

    /// A QP in RTS whose send queue a direct view holds (the claim taken as
    /// `mlx5dv::obj::sq_ring` takes it: no mlx5 device here, the claim is
    /// the same): `Qp::modify` to RESET once went ahead and the device
    /// restarted at WQE 0 under the view. Now it panics, naming the fix,
    /// and the QP is left as it was; without the claim the reset works.
    #[test]
    #[ignore = "device test: needs RRDDMMA_TEST_DEVICE (run the lib tests with --ignored in the VM)"]
    fn regression_qp_modify_to_reset_under_a_direct_sq_panics_and_leaves_the_qp() {
        use crate::prim::{Context, Cq, Pd, Qp, QpAttr, QpState, QpType};
        let name = std::env::var("RRDDMMA_TEST_DEVICE").expect("RRDDMMA_TEST_DEVICE names the device");
        let ctx = Context::open(&name).expect("the promised device opens");
        let pd = Pd::alloc(&ctx).unwrap();
        let cq = Cq::create(&ctx, 8).unwrap();
        let qp = Qp::builder(&pd, QpType::UD, &cq, &cq).build().unwrap();
        qp.bring_up_ud(1, 0, 0x1111, 0).unwrap();
        assert!(qp.direct.take(), "the view's claim");
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| qp.modify(&QpAttr::new(QpState::RESET))))
            .expect_err("RESET under a direct view must be refused");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("DirectSq") && msg.contains("DirectSq::reset"), "{msg}");
        assert_eq!(qp.query_state().unwrap(), QpState::RTS, "the QP was not reset");
        assert!(qp.modify(&QpAttr::new(QpState::ERR)).is_ok(), "other transitions go ahead under the view");
        qp.direct.release();
        qp.modify(&QpAttr::new(QpState::RESET)).unwrap();
        assert_eq!(qp.query_state().unwrap(), QpState::RESET);
    }
}
