//! Indirect memory keys for a DC-only process: the key created and laid
//! out in one call, the UMR posted on a private loopback RC pair that lives
//! for the call alone.
//!
//! libmlx5 (rdma-core v59) takes the UMR send ops
//! (`MLX5DV_QP_EX_WITH_MKEY_CONFIGURE`, `_MR_LIST`, `_MR_INTERLEAVED`) on RC
//! QPs only: a DCI's QP accepts just `MLX5DV_QP_EX_WITH_RAW_WQE` and
//! `_MEMCPY`. A layout written by UMR stays with the key after the QP that
//! posted it is gone (the key's context names no QP: its QP number is
//! `0xffffff`, any QP), so a process whose data path is DC alone builds the
//! pair here, posts, waits, and drops it.

use std::fmt;
use std::time::{Duration, Instant};

use crate::mlx5dv::cqe::Completion;
use crate::mlx5dv::mkey::Mkey;
use crate::mlx5dv::mmio::HwMmio;
use crate::mlx5dv::obj;
use crate::mlx5dv::seg::CtrlFlags;
use crate::mlx5dv::umr::{MkeyConf, MkeyLayout};
use crate::prim::{ConnectOpts, Cq, Error, Pd, QpCaps, WcStatus};
use crate::wrap::connected_rc_pair;

/// How long [`configure_mkey`] waits for its UMR's completion.
pub const UMR_TIMEOUT: Duration = Duration::from_secs(5);

/// Why [`configure_mkey`] / [`indirect_mkey`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum MkeyError {
    /// A verbs call (or a check before posting) failed: transparent.
    Verbs(Error),
    /// The UMR was posted and completed in error: the layout was not applied.
    Completion {
        /// The key's local key.
        lkey: u32,
        /// The completion's status.
        status: WcStatus,
        /// The device's syndrome (`vendor_err`).
        vendor_err: u8,
    },
}

impl fmt::Display for MkeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MkeyError::Verbs(e) => e.fmt(f),
            MkeyError::Completion { lkey, status, vendor_err } => write!(
                f,
                "indirect key {lkey:#x}: the UMR laying it out completed with {status} (vendor_err {vendor_err:#x}); \
                 check the key's access against its regions' (a key that may write needs LOCAL_WRITE regions) and \
                 the device's UMR capabilities"
            ),
        }
    }
}

impl std::error::Error for MkeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MkeyError::Verbs(e) => e.source(),
            MkeyError::Completion { .. } => None,
        }
    }
}

impl From<Error> for MkeyError {
    fn from(e: Error) -> MkeyError {
        MkeyError::Verbs(e)
    }
}

/// Creates an indirect key in `pd` with room for `max_entries` ranges and
/// lays it out as `conf` says ([`configure_mkey`]): one call, no QP of the
/// caller's. Its `rkey` ([`Mkey::rkey`]) and [`Mkey::addr_at`] are what a
/// peer's DCI (or any QP) writes through; send them with the process's DCT
/// ([`DctInfo`](crate::ctrl::DctInfo)) through the control plane.
///
/// `opts` picks the port and GID index of the private loopback pair
/// ([`ConnectOpts::default`] fits most devices).
///
/// # Errors
/// [`Error::Unsupported`] (in [`MkeyError::Verbs`]) off mlx5 (row
/// [`MKEY_NOT_MLX5`](crate::prim::unsupported::MKEY_NOT_MLX5), before any
/// libmlx5 call); the refusals of [`configure_mkey`].
///
/// # Panics
/// As [`Mkey::new_indirect`] (`max_entries` 0).
pub fn indirect_mkey(pd: &Pd, max_entries: u16, conf: MkeyConf<'_>, opts: &ConnectOpts) -> Result<Mkey, MkeyError> {
    let mut key = Mkey::new_indirect(pd, max_entries)?;
    configure_mkey(&mut key, conf, opts)?;
    Ok(key)
}

/// Lays `key` out as `conf` says (its access and layout; a field left
/// `None` stays as the key has it), through a UMR posted on a loopback RC
/// pair made for this call in the key's protection domain, and waits for
/// its completion (at most [`UMR_TIMEOUT`]). The key holds every region of
/// the layout ([`Mkey::held_regions`]).
///
/// # Errors
/// The checks of [`SqRing::mkey_configure`](crate::mlx5dv::sq::SqRing::mkey_configure)
/// (a range outside its region, a region of another PD, more entries than
/// the key has room for: nothing posted); the pair's creation or
/// connection; a completion in error ([`MkeyError::Completion`]); no completion
/// within [`UMR_TIMEOUT`] ([`Error::Timeout`]).
pub fn configure_mkey(key: &mut Mkey, conf: MkeyConf<'_>, opts: &ConnectOpts) -> Result<(), MkeyError> {
    let pd = key.pd().clone();
    let ctx = pd.context();
    if !crate::mlx5dv::is_supported(ctx) {
        return Err(Error::unsupported(
            "mlx5dv_wr_mkey_configure",
            &crate::prim::unsupported::MKEY_NOT_MLX5,
            ctx.name(),
            "false",
        )
        .into());
    }
    let entries = match conf.layout {
        Some(MkeyLayout::List(r)) => r.len(),
        Some(MkeyLayout::Interleaved { entries, .. }) => entries.len() + 1,
        None => 0,
    };
    // The UMR is inline: its control, key context and translation entries
    // (16 bytes each, in 64-byte blocks) fit the send queue's inline room.
    let inline = (entries.div_ceil(4) * 64 + 128).min(u32::MAX as usize) as u32;
    let caps = QpCaps::default().max_send_wr(2).max_recv_wr(1).max_inline_data(inline);
    let cq = Cq::create(ctx, 4)?;
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, caps, 0, opts)?;
    // SAFETY: the CQ and the QP are this call's own: nothing else polls
    // the CQ or posts on the QP while the views live, and neither is used
    // through libibverbs afterwards (both are dropped at return).
    let mut dcq = unsafe { obj::cq_ring(&cq) }?;
    // SAFETY: as above; the only WQE written is the UMR, whose ranges
    // `mkey_configure` checks against their regions and makes the key hold.
    let mut sq = unsafe { obj::sq_ring(&qa, &dcq) }?;
    sq.mkey_configure(CtrlFlags::CQ_UPDATE, key, conf)?;
    sq.ring(&mut HwMmio);
    let mut out = [Completion::default()];
    let start = Instant::now();
    while dcq.poll(&mut out) == 0 {
        if start.elapsed() > UMR_TIMEOUT {
            return Err(Error::Timeout {
                op: "waiting for the UMR completion of an indirect key's layout (mlx5dv_wr_mkey_configure)",
                after: UMR_TIMEOUT,
            }
            .into());
        }
        std::hint::spin_loop();
    }
    sq.retire(&out[0]);
    let status = out[0].status();
    if !status.is_success() {
        return Err(MkeyError::Completion { lkey: key.lkey(), status, vendor_err: out[0].vendor_err() });
    }
    Ok(())
}
