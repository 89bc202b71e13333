//! Stand-ins for the mlx5dv names removed since the last release
//! (docs/upgrading.md): each compiles, deprecated, with a note naming its
//! replacement, and does what the replacement does. Hidden from the
//! documentation, which shows the one way; removed in a later release.
//! (The modules `seg::opcode`, `seg::fm_ce_se`, `cqe::opcode`,
//! `comp::create_cq` and `comp::CompressedCq` live in their own modules,
//! whose paths they keep.)

use crate::mlx5dv::completion::mini::CqeResFormat;
use crate::mlx5dv::dc::Dci;
use crate::mlx5dv::queue::seg::{TmFlags, TmOpcode, TmSeg};
use crate::prim::{Cq, Pd, QpCaps, Result, SendOps};

impl TmSeg {
    /// Old name of [`TmOpcode::NOP`].
    #[deprecated(note = "typed now: use `TmOpcode::NOP` with `TmSeg::with_op`; see docs/upgrading.md")]
    #[doc(hidden)]
    pub const NOP: TmOpcode = TmOpcode::NOP;
    /// Old name of [`TmOpcode::APPEND`].
    #[deprecated(note = "typed now: use `TmOpcode::APPEND` with `TmSeg::with_op`; see docs/upgrading.md")]
    #[doc(hidden)]
    pub const APPEND: TmOpcode = TmOpcode::APPEND;
    /// Old name of [`TmOpcode::REMOVE`].
    #[deprecated(note = "typed now: use `TmOpcode::REMOVE` with `TmSeg::with_op`; see docs/upgrading.md")]
    #[doc(hidden)]
    pub const REMOVE: TmOpcode = TmOpcode::REMOVE;
    /// Old name of [`TmFlags::SW_CNT`].
    #[deprecated(note = "typed now: use `TmFlags::SW_CNT` (`.bits()` for the field); see docs/upgrading.md")]
    #[doc(hidden)]
    pub const FLAG_SW_CNT: TmFlags = TmFlags::SW_CNT;
    /// Old name of [`TmFlags::CQE_REQ`].
    #[deprecated(note = "typed now: use `TmFlags::CQE_REQ` (`.bits()` for the field); see docs/upgrading.md")]
    #[doc(hidden)]
    pub const FLAG_CQE_REQ: TmFlags = TmFlags::CQE_REQ;
}

impl Cq {
    /// What `CompressedCq::cq` gave: the CQ itself.
    #[deprecated(note = "a compressing CQ is a plain Cq now: use the `Cq` itself; see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn cq(&self) -> &Cq {
        self
    }

    /// What `CompressedCq::format` gave.
    ///
    /// # Panics
    /// On a CQ that does not compress (a `CompressedCq` always did).
    #[deprecated(note = "use `Cq::compression()` (an `Option<CqeResFormat>`); see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn format(&self) -> CqeResFormat {
        self.compression().expect("Cq::format (deprecated): the CQ does not compress; use Cq::compression()")
    }
}

impl Dci {
    /// Old constructor of a DCI with send ops.
    #[deprecated(
        note = "use `Dci::create(pd, send_cq, recv_cq, caps)`: the send ops are always SendOps::BASIC; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps, ops: SendOps) -> Result<Dci> {
        let _ = ops;
        Dci::create(pd, send_cq, recv_cq, caps)
    }
}
