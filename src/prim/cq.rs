//! Completion queues: classic polling into a caller buffer, the extended
//! poller, completion channels.

mod poller;
mod wc_error;

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use poller::{ExWc, Poller, TmInfo, WcFlagsEx};
pub use wc_error::WcError;

use super::channel::{wait_readable, CompChannel};
use super::device::Context;
use super::domain::ParentDomain;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::mlx5::{self, CqOptions, CqeResFormat, CqeSize};
use super::pd::Pd;
use crate::bindings as ffi;
use crate::prim::{WcFlags, WcOpcode, WcStatus};

/// The error of a negative `poll_cq` answer; the panic of a CQ that
/// refuses the classic poll (one that compresses, one built for tag
/// matching), whose entry is a [`refuse`].
#[cold]
#[inline(never)]
fn poll_error(rc: std::ffi::c_int) -> Error {
    if rc == REFUSED + std::ffi::c_int::from(TAG_MATCHING) {
        panic!(
            "Cq::poll on a CQ built for tag matching (CqBuilder::tag_matching): libibverbs' polling (libmlx5's \
             mlx5_poll_cq) reports a tag match as an ordinary SRQ receive, frees an SRQ receive still posted and \
             leaves tag-list operation completions unwritten; poll it with the extended poller (Cq::start_poll, \
             ExWc::tm_info with WcFlagsEx::TM_INFO) or through mlx5dv::tm_wqe::TmRing::complete on its direct view"
        );
    }
    let format = [CqeResFormat::Hash, CqeResFormat::Csum, CqeResFormat::CsumStridx]
        .into_iter()
        .find(|f| rc == REFUSED + std::ffi::c_int::from(f.to_raw()));
    if let Some(f) = format {
        panic!(
            "Cq::poll on a CQ that compresses its CQEs in {}: libibverbs' polling (libmlx5's mlx5_poll_cq) does not \
             expand compressed sessions; poll it through mlx5dv::obj::cq_ring, which does",
            f.name()
        );
    }
    Error::poll_failed("ibv_poll_cq")
}

/// Events acknowledged in one `ibv_ack_cq_events` call (acks take a lock).
const ACK_BATCH: u32 = 64;

pub(crate) struct CqInner {
    /// The extended view, when created with `ibv_create_cq_ex`; else
    /// [`poller::ExCq::classic`].
    ex: poller::ExCq,
    wc_flags: WcFlagsEx,
    channel: Option<CompChannel>,
    unacked: AtomicU32,
    /// rdma-core < 55 rxe: `next_poll` at the end of the queue already does
    /// `end_poll`'s work, which must then be skipped.
    next_poll_ends: bool,
    ctx: Context,
    /// The parent domain the CQ was created on, kept until after its destruction.
    _pd: Option<Pd>,
    /// The mini-CQE format of a CQ that compresses its CQEs
    /// ([`CqBuilder::mlx5_compression`]); its `poll_fn` is a [`refuse`].
    compression: Option<CqeResFormat>,
    /// Built for a tag-matching SRQ ([`CqBuilder::tag_matching`]); its
    /// `poll_fn` is a [`refuse`].
    tag_matching: bool,
}

// SAFETY: the extended view is the same CQ (the provider serialises its
// polling passes like `ibv_poll_cq`); the rest is plain data and handles.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

// SAFETY: `ibv_destroy_cq` releases what the matching create verb made; polling a CQ is thread-safe in libibverbs providers.
unsafe impl Destroy for CqInner {
    type Raw = ffi::ibv_cq;
    const VERB: &'static str = "ibv_destroy_cq";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_cq>) -> i32 {
        let n = *self.unacked.get_mut();
        // SAFETY: the caller's contract; events read from its channel are
        // acknowledged before destruction, which waits for them; QPs using
        // it hold an `Arc` to this.
        unsafe {
            if n > 0 {
                ffi::ibv_ack_cq_events(raw.as_ptr(), n);
            }
            let rc = ffi::ibv_destroy_cq(raw.as_ptr());
            if rc == 0 {
                if let Some(ch) = &self.channel {
                    ch.detach();
                }
            }
            rc
        }
    }
}

/// A completion queue. Cloning shares it.
///
/// # References
/// `ibv_create_cq(3)`, `ibv_create_cq_ex(3)`, `ibv_poll_cq(3)`, `ibv_req_notify_cq(3)`
#[derive(Clone)]
pub struct Cq {
    /// The raw CQ and its provider's `poll_cq` entry (checked when the CQ
    /// is made), kept beside the shared state so that polling loads no more
    /// than C's inline `ibv_poll_cq` does.
    raw: NonNull<ffi::ibv_cq>,
    poll_fn: PollFn,
    inner: Arc<Owned<CqInner>>,
}

/// A provider's `poll_cq` entry.
type PollFn = unsafe extern "C" fn(*mut ffi::ibv_cq, std::ffi::c_int, *mut ffi::ibv_wc) -> std::ffi::c_int;

/// What a [`refuse`] entry returns, plus the reason (a format's C value,
/// or [`TAG_MATCHING`]): not a count nor a provider's error (providers
/// return -1 or a negative errno).
const REFUSED: std::ffi::c_int = std::ffi::c_int::MIN;

/// The reason of a CQ built for tag matching, beside the mini-CQE formats'
/// C values (1, 2, 4).
const TAG_MATCHING: u8 = u8::MAX;

/// The `poll_fn` of a CQ that libmlx5's `mlx5_poll_cq` misreads, so that
/// the CQ is never handed to it: one that compresses its CQEs in format
/// `WHY` ([`CqeResFormat::to_raw`]; `mlx5_poll_cq` does not expand
/// compressed sessions, it reads a session's mini-CQE arrays as CQEs,
/// reporting receives that have not completed and writing scattered bytes
/// where no receive was), or one built for tag matching (`WHY` =
/// [`TAG_MATCHING`]; `mlx5_poll_cq` reports a tag match as an ordinary SRQ
/// receive, freeing an SRQ WQE still posted, and leaves a tag-list
/// operation's completion unwritten). [`Cq::poll`] turns the answer
/// ([`REFUSED`] + `WHY`) into a panic on its error path, which an ordinary
/// CQ never takes, from the answer alone: polling costs what it did (the
/// inlined poll keeps nothing across the call).
extern "C" fn refuse<const WHY: u8>(_: *mut ffi::ibv_cq, _: std::ffi::c_int, _: *mut ffi::ibv_wc) -> std::ffi::c_int {
    REFUSED + std::ffi::c_int::from(WHY)
}

/// The entry [`Cq::poll`] calls for the live CQ `cq`: its provider's
/// `poll_cq`, or a [`refuse`] for a CQ that compresses or is built for
/// tag matching.
///
/// # Safety
/// `cq` is a live CQ.
unsafe fn poll_entry(
    cq: NonNull<ffi::ibv_cq>,
    compression: Option<CqeResFormat>,
    tag_matching: bool,
) -> Result<PollFn> {
    const HASH: u8 = CqeResFormat::Hash.to_raw();
    const CSUM: u8 = CqeResFormat::Csum.to_raw();
    const CSUM_STRIDX: u8 = CqeResFormat::CsumStridx.to_raw();
    const _: () = assert!(TAG_MATCHING != HASH && TAG_MATCHING != CSUM && TAG_MATCHING != CSUM_STRIDX);
    match compression {
        Some(CqeResFormat::Hash) => return Ok(refuse::<HASH>),
        Some(CqeResFormat::Csum) => return Ok(refuse::<CSUM>),
        Some(CqeResFormat::CsumStridx) => return Ok(refuse::<CSUM_STRIDX>),
        None if tag_matching => return Ok(refuse::<TAG_MATCHING>),
        None => {}
    }
    // SAFETY: a live CQ points to its live context.
    unsafe { (*(*cq.as_ptr()).context).ops.poll_cq }.ok_or_else(|| {
        Error::unsupported(
            "ibv_poll_cq",
            &crate::prim::unsupported::CQ_POLL_ENTRY,
            &{
                // SAFETY: a live CQ (the caller's contract) points to its live context.
                unsafe { crate::prim::unsupported::device_name((*cq.as_ptr()).context) }
            },
            "none",
        )
    })
}

// SAFETY: `raw` and `poll_fn` are copies out of the shared, thread-safe
// `CqInner` (see there); the CQ lives as long as `inner`.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl fmt::Debug for Cq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cq")
            .field("device", &self.inner.ctx.name())
            .field("cqe", &self.capacity())
            .field("extended", &!self.inner.ex.is_classic())
            .field("compression", &self.inner.compression)
            .field("tag_matching", &self.inner.tag_matching)
            .finish()
    }
}

/// Creates a CQ: [`Cq::builder`] with what is required, setters, [`CqBuilder::build`].
#[derive(Debug)]
pub struct CqBuilder<'a> {
    ctx: &'a Context,
    cqe: u32,
    channel: Option<&'a CompChannel>,
    comp_vector: u32,
    wc_flags: Option<WcFlagsEx>,
    single_threaded: bool,
    parent_domain: Option<&'a ParentDomain>,
    mlx5: CqOptions,
    tag_matching: bool,
}

impl<'a> CqBuilder<'a> {
    fn start(ctx: &'a Context, cqe: u32) -> CqBuilder<'a> {
        CqBuilder {
            ctx,
            cqe,
            channel: None,
            comp_vector: 0,
            wc_flags: None,
            single_threaded: false,
            parent_domain: None,
            mlx5: CqOptions::default(),
            tag_matching: false,
        }
    }

    /// Reports completions on `channel` once armed ([`Cq::req_notify`]).
    pub fn channel(mut self, channel: &'a CompChannel) -> CqBuilder<'a> {
        self.channel = Some(channel);
        self
    }

    /// Completion vector (interrupt) to use.
    pub fn comp_vector(mut self, v: u32) -> CqBuilder<'a> {
        self.comp_vector = v;
        self
    }

    /// Creates an extended CQ (`ibv_create_cq_ex`) whose completions carry
    /// the fields in `flags`, read through [`Cq::start_poll`].
    pub fn extended(mut self, flags: WcFlagsEx) -> CqBuilder<'a> {
        self.wc_flags = Some(flags);
        self
    }

    /// Promises single-threaded use, letting the provider skip its lock
    /// (`IBV_CREATE_CQ_ATTR_SINGLE_THREADED`; extended CQs only).
    ///
    /// # Safety
    /// The CQ (all its clones) must then be polled by one thread at a time;
    /// the provider no longer serialises polling passes.
    pub unsafe fn single_threaded(mut self, yes: bool) -> CqBuilder<'a> {
        self.single_threaded = yes;
        self
    }

    /// Creates the CQ on a parent domain (`ibv_create_cq_ex` with
    /// `IBV_CQ_INIT_ATTR_MASK_PD`), which it keeps alive (a CQ on a parent
    /// domain with a thread domain comes from
    /// [`TdParentDomain::cq`](super::TdParentDomain::cq)). Without
    /// [`CqBuilder::extended`] the CQ is still made by `ibv_create_cq_ex`
    /// (no extra completion fields) and polled the classic way.
    ///
    /// [`CqBuilder::build`] gives [`Error::Unsupported`] (feature `a CQ on a
    /// parent domain`) when the provider has no extended CQs or refuses the
    /// attribute as unsupported.
    pub fn parent_domain(mut self, pd: &'a ParentDomain) -> CqBuilder<'a> {
        self.parent_domain = Some(pd);
        self
    }

    /// mlx5: CQEs of `size` bytes (`mlx5dv_create_cq` with
    /// `MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE`; without it libmlx5 reads
    /// `MLX5_CQE_SIZE` from the environment, else takes 64).
    /// [`CqBuilder::build`] says [`Error::Unsupported`] naming the option
    /// off mlx5.
    #[doc(alias = "MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE")]
    pub fn mlx5_cqe_size(mut self, size: CqeSize) -> CqBuilder<'a> {
        self.mlx5.size = Some(size);
        self
    }

    /// mlx5: pads each CQE to 128 bytes (`MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`),
    /// which needs [`CqeSize::B128`] and the device's
    /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD`; [`CqBuilder::build`] says
    /// [`Error::Unsupported`] naming what is missing, or off mlx5.
    #[doc(alias = "MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD")]
    pub fn mlx5_cqe_pad(mut self, yes: bool) -> CqBuilder<'a> {
        self.mlx5.pad = yes;
        self
    }

    /// mlx5: lets the device compress CQEs in `format`
    /// (`MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`): it may write a session
    /// of mini-CQEs in place of CQEs that differ in a few fields.
    ///
    /// Only a direct view expands sessions, so such a CQ is polled through
    /// `mlx5dv::obj::cq_ring` alone, which expands them by itself:
    /// [`Cq::poll`] (and everything built on it: [`Cq::poll_one`],
    /// [`Cq::spin_one`], [`Cq::wait_one`], the async layer) panics on it,
    /// and it has no extended poller. [`CqBuilder::build`] says
    /// [`Error::Unsupported`] naming the format where the device does not
    /// compress in it, or off mlx5.
    ///
    /// # Panics
    /// [`CqBuilder::build`] panics if the CQ is also
    /// [extended](CqBuilder::extended) (a programming error: its extended
    /// poller would read sessions through libmlx5).
    #[doc(alias = "MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE")]
    pub fn mlx5_compression(mut self, format: CqeResFormat) -> CqBuilder<'a> {
        self.mlx5.compression = Some(format);
        self
    }

    /// Builds the CQ for a tag-matching SRQ
    /// ([`SrqBuilder::tag_matching`](super::SrqBuilder::tag_matching)) and
    /// the QPs or DCTs receiving through one: extended (libmlx5 takes no
    /// other CQ for such an SRQ), with the fields of [`CqBuilder::extended`]
    /// if given, else none. Give it [`WcFlagsEx::TM_INFO`] there to read
    /// [`ExWc::tm_info`] (rxe, which has no tag matching, refuses that
    /// flag).
    ///
    /// Such a CQ is polled with its extended poller ([`Cq::start_poll`],
    /// [`ExWc::tm_info`]) or through `mlx5dv::tm_wqe::TmRing::complete` on
    /// its direct view: [`Cq::poll`] (and everything built on it:
    /// [`Cq::poll_one`], [`Cq::spin_one`], [`Cq::wait_one`]) panics on it,
    /// since libmlx5's classic poller reports a tag match as an ordinary SRQ
    /// receive (freeing an SRQ receive still posted) and leaves the
    /// completions of tag-list operations unwritten.
    ///
    /// # Panics
    /// [`CqBuilder::build`] panics if the CQ also compresses
    /// ([`CqBuilder::mlx5_compression`]; a programming error: only a direct
    /// view expands sessions, and libmlx5 requires an extended CQ here).
    pub fn tag_matching(mut self) -> CqBuilder<'a> {
        self.tag_matching = true;
        self
    }

    /// Creates the CQ. Fields or flags the device cannot provide give
    /// [`Error::Unsupported`]; so does an extended CQ on rxe when the
    /// rdma-core release in use cannot be read (its polling pass ends
    /// differently across releases, and neither guess is safe).
    ///
    /// # Panics
    /// If the [parent domain](CqBuilder::parent_domain) belongs to another
    /// device context, or if the [channel](CqBuilder::channel) already
    /// serves a CQ (programming errors; checked before anything is created).
    /// A channel serves one CQ at a time: it is free again once that CQ is
    /// destroyed, or when its creation fails.
    pub fn build(mut self) -> Result<Cq> {
        if let (Some(f), true) = (self.mlx5.compression, self.tag_matching) {
            panic!(
                "CqBuilder::build: a CQ built for tag matching cannot compress (in {}): libmlx5 takes only an \
                 extended CQ for a tag-matching SRQ, and its extended poller does not expand compressed sessions \
                 (drop CqBuilder::mlx5_compression)",
                f.name()
            );
        }
        if self.tag_matching {
            self.wc_flags = Some(self.wc_flags.unwrap_or_default());
        }
        if let (Some(f), Some(_)) = (self.mlx5.compression, self.wc_flags) {
            panic!(
                "CqBuilder::build: a CQ compressing in {} cannot be extended: libmlx5's extended poller does not \
                 expand compressed sessions (drop CqBuilder::extended and poll through mlx5dv::obj::cq_ring)",
                f.name()
            );
        }
        if self.mlx5.any() {
            mlx5::require(self.ctx, "mlx5dv_create_cq", &super::unsupported::MLX5_OPTION, self.mlx5.first_name())?;
        }
        if self.parent_domain.is_some_and(|pd| pd.context().as_ptr() != self.ctx.as_ptr()) {
            panic!(
                "CqBuilder::build: the parent domain belongs to another device context than the CQ \
                 (open the device once and create both from that Context)"
            );
        }
        // Taken before the CQ exists: a channel that already serves a CQ
        // panics here with nothing created, and one whose CQ cannot be made
        // is given back below.
        if let Some(ch) = self.channel {
            ch.attach();
        }
        let created = self.create_raw();
        if created.is_err() {
            if let Some(ch) = self.channel {
                ch.detach();
            }
        }
        let (cq, ex, flags) = created?;
        self.finish(cq, ex, flags)
    }

    /// Creates the CQ itself: its pointer, its extended view and its flags.
    #[allow(clippy::type_complexity)]
    fn create_raw(&self) -> Result<(NonNull<ffi::ibv_cq>, Option<NonNull<ffi::ibv_cq_ex>>, WcFlagsEx)> {
        let channel = self.channel.map_or(ptr::null_mut(), CompChannel::as_ptr);
        Ok(match self.wc_flags {
            None if self.parent_domain.is_none() && !self.mlx5.any() => {
                let cqe =
                    i32::try_from(self.cqe).map_err(|_| Error::Verbs { op: "ibv_create_cq", errno: libc::EINVAL })?;
                let comp_vector = i32::try_from(self.comp_vector).unwrap_or(i32::MAX);
                // SAFETY: live context and channel.
                let cq = unsafe { ffi::ibv_create_cq(self.ctx.as_ptr(), cqe, ptr::null_mut(), channel, comp_vector) };
                (NonNull::new(cq).ok_or_else(|| Error::last("ibv_create_cq"))?, None, WcFlagsEx::empty())
            }
            Some(_) if self.ctx.quirks().rxe_release_unknown => {
                return Err(Error::unsupported(
                    "ibv_create_cq_ex",
                    &crate::prim::unsupported::CQ_EX_RXE,
                    self.ctx.name(),
                    "unknown",
                ));
            }
            wc_flags => {
                let flags = wc_flags.unwrap_or_else(WcFlagsEx::empty);
                let mut attr = ffi::ibv_cq_init_attr_ex {
                    cqe: self.cqe,
                    channel,
                    comp_vector: self.comp_vector,
                    wc_flags: flags.bits(),
                    ..Default::default()
                };
                if let Some(pd) = self.parent_domain {
                    attr.comp_mask |= ffi::ibv_cq_init_attr_mask::IBV_CQ_INIT_ATTR_MASK_PD.0;
                    attr.parent_domain = pd.as_ptr();
                }
                if self.single_threaded {
                    attr.comp_mask |= ffi::ibv_cq_init_attr_mask::IBV_CQ_INIT_ATTR_MASK_FLAGS.0;
                    attr.flags |= ffi::ibv_create_cq_attr_flags::IBV_CREATE_CQ_ATTR_SINGLE_THREADED.0;
                }
                let (ex, op) = if self.mlx5.any() {
                    (self.create_mlx5(&mut attr)?, "mlx5dv_create_cq")
                } else {
                    // SAFETY: live context; `attr` is valid for the call.
                    (unsafe { ffi::ibv_create_cq_ex(self.ctx.as_ptr(), &mut attr) }, "ibv_create_cq_ex")
                };
                let ex = NonNull::new(ex).ok_or_else(|| {
                    let e = Error::last(op);
                    if self.parent_domain.is_some() {
                        e.lacking(&crate::prim::unsupported::CQ_PARENT_DOMAIN, self.ctx.name())
                    } else {
                        e
                    }
                })?;
                // A CQ made here only for its parent domain is polled the classic way.
                (ex.cast(), wc_flags.map(|_| ex), flags)
            }
        })
    }

    /// `mlx5dv_create_cq` with the mlx5 options, on an mlx5 context
    /// (checked by `build`), after the device's caps are checked for
    /// compression and padding.
    #[cfg(not(rrddmma_mlnx_ofed4))]
    fn create_mlx5(&self, attr: &mut ffi::ibv_cq_init_attr_ex) -> Result<*mut ffi::ibv_cq_ex> {
        if self.mlx5.compression.is_some() || self.mlx5.pad {
            let dev = mlx5::query_device_unchecked(self.ctx)?;
            if let Some(f) = self.mlx5.compression {
                mlx5::check_compression(self.ctx.name(), &dev, f)?;
            }
            mlx5::check_padding(self.ctx.name(), &dev, &self.mlx5)?;
        }
        let mut dv = self.mlx5.to_raw();
        // SAFETY: an mlx5 context (checked by `build`); `attr` and `dv` are valid for the call.
        Ok(unsafe { ffi::mlx5dv_create_cq(self.ctx.as_ptr(), attr, &mut dv) })
    }

    /// MLNX_OFED 4.x has no `mlx5dv_create_cq` (`build` refused already).
    #[cfg(rrddmma_mlnx_ofed4)]
    fn create_mlx5(&self, _: &mut ffi::ibv_cq_init_attr_ex) -> Result<*mut ffi::ibv_cq_ex> {
        Err(Error::unsupported(
            "mlx5dv_create_cq",
            &crate::prim::unsupported::OFED4,
            self.ctx.name(),
            self.mlx5.first_name(),
        ))
    }

    /// The continuation of `build` after the CQ exists.
    fn finish(self, cq: NonNull<ffi::ibv_cq>, ex: Option<NonNull<ffi::ibv_cq_ex>>, flags: WcFlagsEx) -> Result<Cq> {
        // SAFETY: `ex` is the live extended CQ just created.
        let ex_cq = ex.map(|p| unsafe { poller::ExCq::new(p) });
        let inner = Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe {
                Owned::new(
                    cq,
                    CqInner {
                        ex: ex_cq.flatten().unwrap_or_else(poller::ExCq::classic),
                        wc_flags: flags,
                        channel: self.channel.cloned(),
                        unacked: AtomicU32::new(0),
                        next_poll_ends: self.ctx.quirks().rxe_next_poll_ends,
                        ctx: self.ctx.clone(),
                        _pd: self.parent_domain.map(|pd| pd.as_pd().clone()),
                        compression: self.mlx5.compression,
                        tag_matching: self.tag_matching,
                    },
                )
            },
        );
        if matches!(ex_cq, Some(None)) {
            // Dropping `inner` destroys the CQ.
            return Err(Error::unsupported(
                "ibv_create_cq_ex",
                &crate::prim::unsupported::CQ_EX_ENTRIES,
                self.ctx.name(),
                "unset",
            ));
        }
        // SAFETY: the live CQ just made.
        let poll_fn = unsafe { poll_entry(cq, self.mlx5.compression, self.tag_matching) }?;
        Ok(Cq { raw: cq, poll_fn, inner })
    }
}

impl Cq {
    /// Takes ownership of a CQ created outside [`CqBuilder`] (MLNX_OFED 4.x
    /// `ibv_exp_create_cq`); destroyed with `ibv_destroy_cq` like any
    /// other. The CQ must not compress its CQEs (it is polled through the
    /// provider).
    ///
    /// # Safety
    /// `cq` must be a live CQ of `ctx` without a completion channel, owned
    /// by nothing else. On error it has been destroyed.
    #[cfg_attr(not(rrddmma_mlnx_ofed4), allow(dead_code))]
    pub(crate) unsafe fn from_exp(ctx: &Context, cq: NonNull<ffi::ibv_cq>) -> Result<Cq> {
        let inner = Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe {
                Owned::new(
                    cq,
                    CqInner {
                        ex: poller::ExCq::classic(),
                        wc_flags: WcFlagsEx::default(),
                        channel: None,
                        unacked: AtomicU32::new(0),
                        next_poll_ends: false,
                        ctx: ctx.clone(),
                        _pd: None,
                        compression: None,
                        tag_matching: false,
                    },
                )
            },
        );
        // SAFETY: the live CQ given.
        let poll_fn = unsafe { poll_entry(cq, None, false) }?;
        Ok(Cq { raw: cq, poll_fn, inner })
    }
}

impl Cq {
    /// A CQ on `ctx` with room for at least `cqe` completions: set what
    /// differs from a classic CQ (a channel, a completion vector, extended
    /// fields, a parent domain, the mlx5 options `mlx5_cqe_size`,
    /// `mlx5_cqe_pad` and `mlx5_compression`), then [`CqBuilder::build`].
    ///
    /// # References
    /// `ibv_create_cq(3)`, `ibv_create_cq_ex(3)`, `mlx5dv_create_cq(3)`
    #[doc(alias = "ibv_create_cq_ex")]
    #[doc(alias = "mlx5dv_create_cq")]
    pub fn builder(ctx: &Context, cqe: u32) -> CqBuilder<'_> {
        CqBuilder::start(ctx, cqe)
    }

    /// Creates a classic CQ with room for at least `cqe` completions.
    ///
    /// # References
    /// `ibv_create_cq(3)`
    #[doc(alias = "ibv_create_cq")]
    pub fn create(ctx: &Context, cqe: u32) -> Result<Cq> {
        Cq::builder(ctx, cqe).build()
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The raw CQ.
    pub fn as_ptr(&self) -> *mut ffi::ibv_cq {
        self.inner.as_ptr()
    }

    /// The mini-CQE format of a CQ that compresses its CQEs
    /// ([`CqBuilder::mlx5_compression`]), polled through its direct view only.
    pub fn compression(&self) -> Option<CqeResFormat> {
        self.inner.compression
    }

    /// Whether the CQ was built for tag matching
    /// ([`CqBuilder::tag_matching`]), polled through its extended poller or
    /// its direct view only.
    pub fn is_tag_matching(&self) -> bool {
        self.inner.tag_matching
    }

    /// The capacity the provider granted.
    pub fn capacity(&self) -> u32 {
        // SAFETY: the CQ is live while `self` is.
        u32::try_from(unsafe { self.inner.raw().as_ref() }.cqe).unwrap_or(0)
    }

    /// Polls completions into `wc`; returns how many were written. No
    /// allocation, no lock of ours.
    ///
    /// The provider takes a C `int` count, so a buffer is used up to
    /// `i32::MAX` entries: the length is passed as C passes it, truncated to
    /// 32 bits (debug builds assert it fits), which never exceeds the buffer
    /// (a negative count polls nothing).
    ///
    /// # Panics
    /// On a CQ that compresses its CQEs ([`CqBuilder::mlx5_compression`],
    /// a programming error): libmlx5 would read its compressed sessions as
    /// CQEs. Poll it through `mlx5dv::obj::cq_ring`. On a CQ built for tag
    /// matching ([`CqBuilder::tag_matching`], a programming error): libmlx5
    /// would report a tag match as an ordinary SRQ receive. Poll it with
    /// [`Cq::start_poll`] or through `mlx5dv::tm_wqe::TmRing::complete`.
    /// The provider is not called.
    #[inline]
    pub fn poll(&self, wc: &mut [Wc]) -> Result<usize> {
        debug_assert!(wc.len() <= i32::MAX as usize, "Cq::poll: at most i32::MAX completions per call");
        #[allow(clippy::cast_possible_truncation)]
        let n = wc.len() as i32;
        // SAFETY: live CQ and its provider's entry (what `ibv_poll_cq`
        // calls); `wc` holds at least `n` writable `ibv_wc` (same layout)
        // when `n` is positive, and none are written otherwise.
        let rc = unsafe { (self.poll_fn)(self.raw.as_ptr(), n, wc.as_mut_ptr().cast()) };
        usize::try_from(rc).map_err(|_| poll_error(rc))
    }

    /// Polls one completion, if there is one. No allocation.
    #[inline]
    pub fn poll_one(&self) -> Result<Option<Wc>> {
        let mut wc = [Wc::default()];
        Ok((self.poll(&mut wc)? == 1).then_some(wc[0]))
    }

    /// Busy-polls until one completion arrives or `timeout` passes
    /// (`Ok(None)`). The lowest latency, at the cost of a core. No allocation,
    /// no system call (the clock is read from the vDSO every 64 polls).
    pub fn spin_one(&self, timeout: Duration) -> Result<Option<Wc>> {
        let start = std::time::Instant::now();
        loop {
            for _ in 0..64 {
                if let Some(wc) = self.poll_one()? {
                    return Ok(Some(wc));
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= timeout {
                return self.poll_one();
            }
        }
    }

    /// Waits for one completion without spinning, up to `timeout`
    /// (`Ok(None)` when it passes): polls, and when the CQ is empty arms it
    /// and sleeps on its completion channel until the event, then polls
    /// again. A CQ without a channel ([`CqBuilder::channel`]) is busy-polled
    /// instead, as [`Cq::spin_one`] does.
    ///
    /// Only one thread at a time should wait on a CQ's channel.
    pub fn wait_one(&self, timeout: Duration) -> Result<Option<Wc>> {
        if self.inner.channel.is_none() {
            return self.spin_one(timeout);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(wc) = self.poll_one()? {
                return Ok(Some(wc));
            }
            self.req_notify(false)?;
            // A completion between the poll and the arm raises no event: poll again.
            if let Some(wc) = self.poll_one()? {
                return Ok(Some(wc));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || !self.wait(Some(left))? {
                return self.poll_one();
            }
        }
    }

    /// Arms the CQ: the next completion (or the next solicited one) raises an
    /// event on its channel.
    ///
    /// # Panics
    /// If the CQ was created without a channel (a programming error).
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        assert!(
            self.inner.channel.is_some(),
            "req_notify on a CQ without a CompChannel: create it with CqBuilder::channel"
        );
        // SAFETY: live CQ.
        let rc = unsafe { ffi::ibv_req_notify_cq(self.as_ptr(), i32::from(solicited_only)) };
        if rc != 0 {
            return Err(Error::code("ibv_req_notify_cq", rc));
        }
        Ok(())
    }

    /// Waits up to `timeout` (`None`: forever) for an event on the CQ's
    /// channel; `Ok(false)` on timeout. Events are acknowledged in batches,
    /// and at drop. Re-arm with [`Cq::req_notify`] and poll after a wake-up.
    ///
    /// Without a timeout, on a channel left blocking, this is one
    /// `ibv_get_cq_event` (it blocks in its `read`), as a C program waits;
    /// with a timeout, or on a non-blocking channel, `poll(2)` waits first.
    ///
    /// # Panics
    /// If the CQ was created without a channel (a programming error).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        use std::os::fd::AsRawFd;
        let ch =
            self.inner.channel.as_ref().expect("wait on a CQ without a CompChannel: create it with CqBuilder::channel");
        let mut direct = timeout.is_none() && !ch.is_nonblocking();
        let mut cq = ptr::null_mut();
        let mut cq_ctx = ptr::null_mut();
        loop {
            if !direct && !wait_readable(ch.as_raw_fd(), timeout)? {
                return Ok(false);
            }
            // SAFETY: live channel; the outputs are valid for writes.
            if unsafe { ffi::ibv_get_cq_event(ch.as_ptr(), &mut cq, &mut cq_ctx) } == 0 {
                break;
            }
            let e = Error::last("ibv_get_cq_event");
            match e.errno() {
                Some(libc::EINTR) if direct => {}
                // Made non-blocking behind this CQ's back (through its
                // descriptor): wait for readability first from now on.
                Some(libc::EAGAIN) if direct => direct = false,
                // A non-blocking channel whose event another waiter took.
                Some(libc::EAGAIN) => return Ok(false),
                _ => return Err(e),
            }
        }
        debug_assert_eq!(cq, self.as_ptr(), "a channel serves one CQ");
        if self.inner.unacked.fetch_add(1, Ordering::AcqRel) + 1 >= ACK_BATCH {
            self.ack_events();
        }
        Ok(true)
    }

    /// Takes one pending event from the CQ's channel without blocking:
    /// `Ok(())` when one was there (acknowledged in batches, as with
    /// [`Cq::wait`]), else `Err` of kind [`std::io::ErrorKind::WouldBlock`].
    /// The channel is switched to non-blocking mode. With the channel's
    /// descriptor ([`CompChannel`]'s `AsFd`) this is all a reactor needs:
    /// wait for readability, `try_event`, re-arm with [`Cq::req_notify`],
    /// poll.
    ///
    /// # Panics
    /// If the CQ was created without a channel (a programming error).
    pub fn try_event(&self) -> std::io::Result<()> {
        let ch = self
            .inner
            .channel
            .as_ref()
            .expect("try_event on a CQ without a CompChannel: create it with CqBuilder::channel");
        ch.ensure_nonblocking()?;
        let mut cq = ptr::null_mut();
        let mut cq_ctx = ptr::null_mut();
        // SAFETY: live channel; the outputs are valid for writes.
        let rc = unsafe { ffi::ibv_get_cq_event(ch.as_ptr(), &mut cq, &mut cq_ctx) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EAGAIN) { std::io::ErrorKind::WouldBlock.into() } else { e });
        }
        debug_assert_eq!(cq, self.as_ptr(), "a channel serves one CQ");
        if self.inner.unacked.fetch_add(1, Ordering::AcqRel) + 1 >= ACK_BATCH {
            self.ack_events();
        }
        Ok(())
    }

    /// The CQ's completion channel, if it has one.
    pub fn channel(&self) -> Option<&CompChannel> {
        self.inner.channel.as_ref()
    }

    /// Acknowledges the events taken so far (also done in batches and at drop).
    pub fn ack_events(&self) {
        let n = self.inner.unacked.swap(0, Ordering::AcqRel);
        if n > 0 {
            // SAFETY: live CQ; `n` events were taken from its channel.
            unsafe { ffi::ibv_ack_cq_events(self.as_ptr(), n) };
        }
    }

    /// Events taken from the channel and not yet acknowledged.
    pub fn unacked_events(&self) -> u32 {
        self.inner.unacked.load(Ordering::Acquire)
    }

    /// Sets CQ moderation: an event after `count` completions or `period_us`
    /// microseconds. [`Error::Unsupported`] where the device has none.
    ///
    /// # References
    /// `ibv_modify_cq(3)`
    pub fn set_moderation(&self, count: u16, period_us: u16) -> Result<()> {
        let mut attr = ffi::ibv_modify_cq_attr {
            attr_mask: ffi::ibv_cq_attr_mask::IBV_CQ_ATTR_MODERATE.0,
            moderate: ffi::ibv_moderate_cq { cq_count: count, cq_period: period_us },
        };
        // SAFETY: live CQ; `attr` is valid for the call.
        let rc = unsafe { ffi::ibv_modify_cq(self.as_ptr(), &mut attr) };
        if rc != 0 {
            return Err(Error::code("ibv_modify_cq", rc));
        }
        Ok(())
    }

    /// How many handles to this CQ live: `Cq` values, each QP, SRQ, WQ or
    /// view that holds one counting as its own (nothing holds a weak one).
    /// A count that includes every handle the caller knows of means no
    /// other exists; the last handle dropped elsewhere is ordered before
    /// the caller's next use of the CQ.
    #[cfg(feature = "tokio")]
    pub(crate) fn handles(&self) -> usize {
        let n = Arc::strong_count(&self.inner);
        // Pairs with the release of a handle dropped on another thread.
        std::sync::atomic::fence(Ordering::Acquire);
        n
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct Wc(pub ffi::ibv_wc);

impl Wc {
    /// The caller's `wr_id` of the work request.
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// Completion status; any value the device reports is representable.
    pub fn status(&self) -> WcStatus {
        self.0.status.into()
    }

    /// Whether the status is success.
    pub fn is_success(&self) -> bool {
        self.status().is_success()
    }

    /// The operation that completed (valid when successful).
    pub fn opcode(&self) -> WcOpcode {
        self.0.opcode.into()
    }

    /// Bytes received (receive completions).
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// Immediate data in host order, if the completion carries it.
    pub fn imm(&self) -> Option<u32> {
        let with_imm = ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0;
        // SAFETY: the union's `imm_data` and `invalidated_rkey` are both plain u32.
        (self.0.wc_flags & with_imm != 0).then(|| u32::from_be(unsafe { self.0.__bindgen_anon_1.imm_data }))
    }

    /// The key a SEND with invalidate made invalid here, if the completion
    /// says so ([`WcFlags::WITH_INV`](super::WcFlags::WITH_INV)).
    ///
    /// rxe (seen under Linux 6.1 and 7.3.4) flags such a completion with the kernel's
    /// bit for it, which rdma-core names `IP_CSUM_OK`, so this is `None`
    /// there although the key was invalidated and stands in the
    /// completion's `invalidated_rkey` member.
    pub fn invalidated_rkey(&self) -> Option<u32> {
        let with_inv = ffi::ibv_wc_flags::IBV_WC_WITH_INV.0;
        // SAFETY: the union's `imm_data` and `invalidated_rkey` are both plain u32.
        (self.0.wc_flags & with_inv != 0).then_some(unsafe { self.0.__bindgen_anon_1.invalidated_rkey })
    }

    /// Completion flags (GRH present, immediate, ...).
    pub fn flags(&self) -> WcFlags {
        WcFlags::from_bits_retain(self.0.wc_flags)
    }

    /// Local QP number.
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    /// Remote QP number (UD).
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }

    /// Source LID (UD receives on InfiniBand).
    pub fn slid(&self) -> u16 {
        self.0.slid
    }

    /// Service level of the received packet (UD).
    pub fn sl(&self) -> u8 {
        self.0.sl
    }

    /// Vendor error syndrome (on errors).
    pub fn vendor_err(&self) -> u32 {
        self.0.vendor_err
    }
}

/// Only the fields the verbs define for the status: a failed completion
/// shows `wr_id`, `status`, `qp_num` and `vendor_err` (its opcode, length,
/// flags and immediate are undefined, see `ibv_poll_cq(3)`); a successful
/// one shows `opcode`, `byte_len`, `flags` and `imm` instead of `vendor_err`.
impl fmt::Debug for Wc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Wc");
        d.field("wr_id", &self.wr_id()).field("status", &self.status()).field("qp_num", &self.qp_num());
        if self.is_success() {
            d.field("opcode", &self.opcode())
                .field("byte_len", &self.byte_len())
                .field("flags", &self.flags())
                .field("imm", &self.imm());
        } else {
            d.field("vendor_err", &self.vendor_err());
        }
        d.finish()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Calls of [`counting_poll`], the stand-in for the provider's `poll_cq`.
    static PROVIDER_POLLS: AtomicU32 = AtomicU32::new(0);

    /// A provider's `poll_cq` that reports one completion per call, counted.
    ///
    /// # Safety
    /// `wc` has room for `n` completions, as `ibv_poll_cq` passes it.
    unsafe extern "C" fn counting_poll(
        _: *mut ffi::ibv_cq,
        n: std::ffi::c_int,
        wc: *mut ffi::ibv_wc,
    ) -> std::ffi::c_int {
        PROVIDER_POLLS.fetch_add(1, Ordering::SeqCst);
        if n < 1 {
            return 0;
        }
        // SAFETY: `Cq::poll` passes room for `n` completions.
        unsafe { wc.write(ffi::ibv_wc { wr_id: 48, ..Default::default() }) };
        1
    }

    /// A host-made context whose `poll_cq` is [`counting_poll`]; leaked
    /// (nothing here can be closed through libibverbs).
    pub(in crate::prim) fn host_context() -> &'static Context {
        let ctx: &'static mut ffi::ibv_context = Box::leak(Box::default());
        ctx.ops.poll_cq = Some(counting_poll);
        // SAFETY: the host context lives for the test run; it is never closed.
        Box::leak(Box::new(unsafe { Context::for_host_tests(NonNull::from(ctx)) }))
    }

    /// A `Cq` over a host-made CQ on its own [`host_context`].
    fn host_cq(compression: Option<CqeResFormat>, tag_matching: bool) -> &'static Cq {
        host_cq_on(host_context(), compression, tag_matching)
    }

    /// A `Cq` over a host-made CQ of `context` (a [`host_context`]), made
    /// as `CqBuilder::finish` makes one; leaked (nothing here can be
    /// destroyed through libibverbs).
    pub(in crate::prim) fn host_cq_on(
        context: &'static Context,
        compression: Option<CqeResFormat>,
        tag_matching: bool,
    ) -> &'static Cq {
        let cq: &'static mut ffi::ibv_cq = Box::leak(Box::default());
        cq.context = context.as_ptr();
        let raw = NonNull::from(cq);
        let context = context.clone();
        // SAFETY: the host CQ is never destroyed (the `Cq` is leaked).
        let inner = Arc::new(unsafe {
            Owned::new(
                raw,
                CqInner {
                    ex: poller::ExCq::classic(),
                    wc_flags: WcFlagsEx::empty(),
                    channel: None,
                    unacked: AtomicU32::new(0),
                    next_poll_ends: false,
                    ctx: context,
                    _pd: None,
                    compression,
                    tag_matching,
                },
            )
        });
        // SAFETY: a live (host) CQ.
        let poll_fn = unsafe { poll_entry(raw, compression, tag_matching) }.unwrap();
        Box::leak(Box::new(Cq { raw, poll_fn, inner }))
    }

    /// The hole: libmlx5's `mlx5_poll_cq` reads a compressed session's
    /// mini-CQE arrays as CQEs (a review saw receive 48 reported complete
    /// when only 0-7 were). A CQ that compresses never reaches the
    /// provider's `poll_cq` from `Cq::poll`, nor from anything built on it:
    /// each panics naming the fix; an ordinary CQ on the same provider polls
    /// as before.
    #[test]
    fn compressed_cq_is_never_polled_through_the_provider() {
        let plain = host_cq(None, false);
        let mut wc = [Wc::default(); 4];
        let before = PROVIDER_POLLS.load(Ordering::SeqCst);
        assert_eq!(plain.poll(&mut wc).unwrap(), 1);
        assert_eq!(wc[0].wr_id(), 48);
        assert_eq!(PROVIDER_POLLS.load(Ordering::SeqCst), before + 1);

        for format in [CqeResFormat::Hash, CqeResFormat::Csum, CqeResFormat::CsumStridx] {
            let zipped = host_cq(Some(format), false);
            assert_eq!(zipped.compression(), Some(format));
            let polls = PROVIDER_POLLS.load(Ordering::SeqCst);
            type Call<'a> = (&'static str, Box<dyn Fn() + 'a>);
            let calls: [Call<'_>; 5] = [
                ("poll", Box::new(|| drop(zipped.poll(&mut [Wc::default(); 4])))),
                ("poll_one", Box::new(|| drop(zipped.poll_one()))),
                ("spin_one", Box::new(|| drop(zipped.spin_one(Duration::from_millis(1))))),
                ("wait_one", Box::new(|| drop(zipped.wait_one(Duration::from_millis(1))))),
                ("start_poll", Box::new(|| drop(zipped.start_poll()))),
            ];
            for (what, call) in calls {
                let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).expect_err(what);
                let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
                assert!(msg.contains("mlx5dv::obj::cq_ring"), "{what}: {msg}");
                assert!(msg.contains(&format!("{}:", format.name())), "{what}: {msg}");
            }
            assert_eq!(PROVIDER_POLLS.load(Ordering::SeqCst), polls, "the provider's poll_cq was called");
        }
    }

    /// B-1′: libmlx5's `mlx5_poll_cq` reports a tag match as an ordinary
    /// SRQ receive (freeing an SRQ WQE still posted) and leaves tag-list
    /// operation completions unwritten. A CQ built for tag matching never
    /// reaches the provider's `poll_cq` from `Cq::poll`, nor from anything
    /// built on it, nor through a clone: each panics naming the fix.
    #[test]
    fn b1_prime_tag_matching_cq_is_never_polled_through_the_provider() {
        let tm = host_cq(None, true);
        assert!(tm.is_tag_matching());
        assert!(!host_cq(None, false).is_tag_matching());
        let clone = tm.clone();
        type Call<'a> = (&'static str, Box<dyn Fn() + 'a>);
        let calls: [Call<'_>; 5] = [
            ("poll", Box::new(|| drop(tm.poll(&mut [Wc::default(); 4])))),
            ("clone poll", Box::new(|| drop(clone.poll(&mut [Wc::default(); 4])))),
            ("poll_one", Box::new(|| drop(tm.poll_one()))),
            ("spin_one", Box::new(|| drop(tm.spin_one(Duration::from_millis(1))))),
            ("wait_one", Box::new(|| drop(tm.wait_one(Duration::from_millis(1))))),
        ];
        for (what, call) in calls {
            let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).expect_err(what);
            let msg = err.downcast_ref::<&str>().copied().unwrap_or_default();
            assert!(msg.contains("CQ built for tag matching"), "{what}: {msg}");
            assert!(msg.contains("Cq::start_poll") && msg.contains("TmRing::complete"), "{what}: {msg}");
        }
        // The provider's `poll_cq` ([`counting_poll`]) never panics: each
        // panic above is the refusal's, so it was not called (its counter is
        // shared with the test beside, run in parallel).
    }

    #[test]
    fn completion_fields_decode_any_value() {
        let mut raw = ffi::ibv_wc { wr_id: 9, byte_len: 100, ..Default::default() };
        raw.status = ffi::ibv_wc_status(0xdead);
        raw.opcode = ffi::ibv_wc_opcode(0xbeef);
        raw.__bindgen_anon_1.imm_data = 0x0102_0304u32.to_be();
        let wc = Wc(raw);
        assert!(!wc.is_success());
        assert_eq!(wc.status().to_raw(), 0xdead);
        assert_eq!(wc.opcode().to_raw(), 0xbeef);
        assert_eq!(wc.imm(), None, "no IBV_WC_WITH_IMM flag: no immediate");
        raw.wc_flags = ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0;
        assert_eq!(Wc(raw).imm(), Some(0x0102_0304));
        assert!(format!("{:?}", Wc(raw)).contains("wr_id: 9"));
    }

    #[test]
    fn debug_prints_only_the_fields_defined_for_the_status() {
        // A failed READ: the provider leaves opcode (here SEND = 0), length and flags undefined.
        let failed = Wc(ffi::ibv_wc {
            wr_id: 3,
            status: WcStatus::REM_INV_REQ_ERR.into(),
            qp_num: 0x2a,
            vendor_err: 0x81,
            byte_len: 77,
            ..Default::default()
        });
        assert_eq!(format!("{failed:?}"), "Wc { wr_id: 3, status: REM_INV_REQ_ERR, qp_num: 42, vendor_err: 129 }");
        let mut raw = ffi::ibv_wc {
            wr_id: 4,
            opcode: WcOpcode::RECV_RDMA_WITH_IMM.into(),
            qp_num: 7,
            byte_len: 64,
            wc_flags: (WcFlags::WITH_IMM | WcFlags::GRH).bits(),
            ..Default::default()
        };
        raw.__bindgen_anon_1.imm_data = 5u32.to_be();
        assert_eq!(
            format!("{:?}", Wc(raw)),
            "Wc { wr_id: 4, status: SUCCESS, qp_num: 7, opcode: RECV_RDMA_WITH_IMM, byte_len: 64, \
             flags: GRH | WITH_IMM, imm: Some(5) }"
        );
    }

    #[test]
    fn debug_prints_the_status_by_name_and_ok_names_the_cause() {
        let raw = ffi::ibv_wc {
            wr_id: 5,
            status: WcStatus::REM_ACCESS_ERR.into(),
            qp_num: 0x11,
            vendor_err: 0x88,
            ..Default::default()
        };
        let wc = Wc(raw);
        let dbg = format!("{wc:?}");
        assert!(dbg.contains("status: REM_ACCESS_ERR"), "{dbg}");
        let e = wc.ok().unwrap_err();
        assert_eq!((e.wr_id, e.qp_num, e.status, e.vendor_err), (5, 0x11, WcStatus::REM_ACCESS_ERR, 0x88));
        let msg = e.to_string();
        assert!(msg.contains("work request 0x5 on QP 0x11 failed: REM_ACCESS_ERR"), "{msg}");
        assert!(msg.contains("REMOTE_READ") && msg.contains("ConnectOpts::access"), "{msg}");
        let ok = Wc(ffi::ibv_wc { wr_id: 6, ..Default::default() });
        assert_eq!(ok.ok().map(Wc::wr_id), Ok(6));
        let unknown = Wc(ffi::ibv_wc { status: ffi::ibv_wc_status(77), ..Default::default() });
        assert_eq!(unknown.ok().unwrap_err().to_string(), "work request 0x0 on QP 0x0 failed: WcStatus(77)");
    }
}
