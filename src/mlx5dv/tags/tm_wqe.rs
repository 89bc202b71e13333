//! Tag-list operations as direct WQEs on a tag-matching SRQ's command QP,
//! and the software half of the tag list they keep.
//!
//! A tag-matching SRQ has a send queue of its own, the command QP: tag add,
//! remove and sync are WQEs of opcode [`WqeOpcode::TAG_MATCHING`] (a
//! control segment, a [`TmSeg`] and, for an add, the data segment of the
//! tagged receive's buffer). The device keeps the list as a chain of
//! entries; software keeps which entries are free, in the order libmlx5
//! keeps them (`mlx5_srq::tm_head` / `tm_tail`): an add takes the first free
//! entry and tells the device the entry after it, and entries come back at
//! the end when their last completion is seen. [`TmRing`] holds both: the
//! command QP's [`SqRing`] and that list, and writes the bytes libmlx5's
//! `mlx5_post_srq_ops` writes, but for one difference: a remove always
//! asks for a completion, and its entry stays taken until that completion
//! ([`TmRing::remove`]; libmlx5 frees an unsignaled remove's entry at
//! once). [`TmRing::complete`] does what libmlx5's extended poller does
//! with a tag-matching CQE (entries freed, the command queue's WQEs
//! retired) and reports what it reports.
//!
//! The libmlx5 harness (tests/provider/tm.rs) checks both against
//! libmlx5 v59 on ordinary memory; neither has run on hardware. rdma-core
//! gives no view of the command QP (`mlx5dv_init_obj` has none), so a ring
//! comes from raw parts ([`TmRing::from_raw`]), for example of an SRQ and
//! command QP created through DEVX.

use std::fmt;

use crate::mlx5dv::completion::cqe::{cqe_opcode, Cqe64, CqeOpcode};
use crate::mlx5dv::queue::be::{Be16, Be64};
use crate::mlx5dv::queue::mmio::{HwMmio, Mmio};
use crate::mlx5dv::queue::seg::{DataSeg, TmFlags, TmOpcode, TmSeg, WqeOpcode, INVALID_LKEY};
use crate::mlx5dv::queue::sq::SqRing;
use crate::mlx5dv::tags::tm::{TmCqe, TmCqeOp};
use crate::prim::{Sge, TmInfo, WcFlags, WcOpcode, WcStatus};

/// No entry (the end of the free chain, or an operation without a tag).
const NONE: u32 = u32::MAX;

/// `MLX5_TM_MAX_SYNC_DIFF`: unexpected messages past the last sync after
/// which libmlx5 asks software for a sync.
const MAX_SYNC_DIFF: i32 = 0x3fff;

/// How a tag operation is posted: with a completion of its own, and with a
/// sync of the unexpected-message count (`IBV_OPS_SIGNALED`, `IBV_OPS_TM_SYNC`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TmOpts {
    /// A completion carrying this id (`TmFlags::CQE_REQ`). A remove asks
    /// for a completion even without it ([`TmRing::remove`]).
    pub signaled: Option<u64>,
    /// Unexpected messages software has handled (`TmFlags::SW_CNT`; the
    /// segment carries the low 16 bits).
    pub sync: Option<u32>,
}

impl TmOpts {
    /// Unsignaled, no sync.
    pub const fn new() -> TmOpts {
        TmOpts { signaled: None, sync: None }
    }

    /// Completes with a CQE carrying `wr_id`.
    pub const fn signaled(mut self, wr_id: u64) -> TmOpts {
        self.signaled = Some(wr_id);
        self
    }

    /// Syncs: software has handled `unexpected_cnt` unexpected messages.
    pub const fn sync(mut self, unexpected_cnt: u32) -> TmOpts {
        self.sync = Some(unexpected_cnt);
        self
    }

    fn seg(&self, op: TmOpcode) -> TmSeg {
        let mut s = TmSeg::with_op(op);
        if self.signaled.is_some() {
            s.flags |= TmFlags::CQE_REQ.bits();
        }
        if let Some(n) = self.sync {
            s.flags |= TmFlags::SW_CNT.bits();
            s.sw_cnt = Be16::new(n as u16);
        }
        s
    }
}

/// A tag operation [`TmRing`] refused; nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmError {
    /// Every entry of the tag list is in the device (libmlx5: `ENOMEM`,
    /// "tag matching list is full").
    ListFull {
        /// The list's size.
        max_num_tags: u32,
    },
    /// The command queue holds as many operations as it has room for
    /// (libmlx5: `ENOMEM`, "work queue overflow").
    QueueFull {
        /// The command queue's size in WQEs.
        wqe_cnt: u32,
    },
    /// A remove names no entry of the list.
    BadHandle {
        /// The handle given.
        handle: u32,
        /// Entries of the list (handles `0..entries`).
        entries: u32,
    },
    /// A remove names an entry that is not in the device (never added, or
    /// consumed or removed since).
    NotPosted {
        /// The handle given.
        handle: u32,
    },
}

impl fmt::Display for TmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TmError::ListFull { max_num_tags } => write!(
                f,
                "tag add on a tag-matching SRQ: all {max_num_tags} entries of the tag list are in the device; \
                 remove a tag or wait for matches, or create the SRQ with a larger max_num_tags"
            ),
            TmError::QueueFull { wqe_cnt } => write!(
                f,
                "tag operation on a tag-matching SRQ: the command queue's {wqe_cnt} WQEs are all outstanding; \
                 signal an operation and take its completion (TmRing::complete) first"
            ),
            TmError::BadHandle { handle, entries } => write!(
                f,
                "tag remove on a tag-matching SRQ: handle {handle} names no entry (the list has handles \
                 0..{entries}); pass the handle the add returned"
            ),
            TmError::NotPosted { handle } => write!(
                f,
                "tag remove on a tag-matching SRQ: entry {handle} is not in the device (never added, or \
                 consumed or removed since); remove only tags whose add returned that handle and that have \
                 not completed"
            ),
        }
    }
}

impl std::error::Error for TmError {}

/// One entry of the tag list (`struct mlx5_tag_entry`).
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The next free entry (free entries only).
    next: u32,
    /// The tagged receive's id.
    wr_id: u64,
    /// The unexpected count software had synced when the entry was added.
    phase_cnt: i32,
    /// The tagged receive's buffer size (0 for an empty one).
    size: u32,
    /// Completions still due on the entry (its match, and each operation
    /// on it still pending): 0 when it is free.
    expect_cqe: i32,
    /// A remove of the entry was posted (refused again until it is free).
    removing: bool,
}

/// A data segment (`mlx5dv_set_data_seg`).
#[inline(always)]
fn data_seg(len: u32, lkey: u32, addr: u64) -> DataSeg {
    let mut d = DataSeg::default();
    d.set(len, lkey, addr);
    d
}

/// An operation waiting for its CQE (`struct mlx5_srq_op`).
#[derive(Clone, Copy, Debug)]
struct Pending {
    tag: u32,
    /// The caller's id; `None` for a remove posted without one, whose
    /// completion the ring asked for itself ([`TmRing::remove`]).
    wr_id: Option<u64>,
    /// The operation's WQE index.
    wqe: u16,
}

/// What a tag-matching CQE reports ([`TmRing::complete`]), as libmlx5's
/// extended poller reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmCompletion {
    /// The CQE's tag-matching fields.
    pub cqe: TmCqe,
    /// `ibv_wc_read_opcode`.
    pub opcode: WcOpcode,
    /// The status: success; `TM_ERR` for a remove that found its tag
    /// consumed; `TM_RNDV_INCOMPLETE` for a rendezvous left to software;
    /// `LOC_LEN_ERR` for a match scattered into the CQE that is longer than
    /// the entry's buffer; `GENERAL_ERR` for a CQE naming an entry not in
    /// the device or a list operation that was not posted.
    pub status: WcStatus,
    /// The id: of the tagged receive (a match), or of the operation (a
    /// list-operation CQE); `None` for an unexpected or untagged message
    /// (the SRQ receive at [`TmCompletion::srq_wqe`]), for errors, and for
    /// the completion of a remove posted without [`TmOpts::signaled`]
    /// (opcode `TM_DEL`; the ring asked for it, see [`TmRing::remove`]).
    pub wr_id: Option<u64>,
    /// The SRQ receive (its WQE index) an unexpected or untagged message
    /// went to.
    pub srq_wqe: Option<u16>,
    /// `ibv_wc_read_wc_flags`: `TM_MATCH`, `TM_DATA_VALID`, `TM_SYNC_REQ`,
    /// and `WITH_IMM` / `WITH_INV` / `GRH` as for any receive.
    pub flags: WcFlags,
    /// Whether the data of a match sits in the 64 bytes before this CQE
    /// (a 128-byte CQE), to be copied to the entry's buffer by the poller
    /// (libmlx5 copies it; this ring does not).
    pub scattered: bool,
}

impl TmCompletion {
    /// The tag-matching information, as [`ExWc::tm_info`](crate::prim::ExWc::tm_info)
    /// reports it for the same completion on the verbs path ([`TmInfo::of`]).
    pub fn tm_info(&self) -> Option<TmInfo> {
        TmInfo::of(self.opcode, self.flags.bits(), self.cqe.tag, self.cqe.app_ctx)
    }
}

/// A tag-matching SRQ's command QP and its tag list: writes tag add,
/// remove and sync WQEs and takes the SRQ's tag-matching CQEs.
///
/// ```
/// use rrddmma::mlx5dv::{be::Be32, mmio::Recorder, sq::SqRing, tm_wqe::{TmOpts, TmRing}};
/// let mut buf = vec![0u64; 8 * 8]; // 8 basic blocks
/// let mut dbrec = Be32::default();
/// let mut bf = [0u64; 1];
/// // SAFETY: test memory that no device reads; the ring is fresh.
/// let mut tm = unsafe {
///     let sq = SqRing::from_raw(buf.as_mut_ptr().cast(), 8, &mut dbrec, bf.as_mut_ptr().cast(), 0, 0x42);
///     TmRing::from_raw(sq, 4)
/// };
/// // An empty tagged receive (no buffer: the safe form) and its removal.
/// let h = tm.add(0x7 << 32, !0 << 32, 1, TmOpts::new().signaled(10)).unwrap();
/// tm.remove(h, TmOpts::new().signaled(11)).unwrap();
/// tm.ring(&mut Recorder::default());
/// assert_eq!(tm.sq().cur_post(), 2);
/// ```
pub struct TmRing {
    sq: SqRing,
    /// `max_num_tags + 1` entries, as libmlx5 allocates them: one is always
    /// free, the end of the chain the device appends after.
    tags: Box<[Entry]>,
    /// The free chain's first and last entries.
    head: u32,
    tail: u32,
    /// Signaled operations in posting order, one slot per command WQE.
    ops: Box<[Pending]>,
    op_head: u32,
    op_tail: u32,
    /// Unexpected messages seen, and the count software last synced.
    unexp_in: i32,
    unexp_out: i32,
}

impl fmt::Debug for TmRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TmRing")
            .field("sq", &self.sq)
            .field("max_num_tags", &self.max_num_tags())
            .field("pending_ops", &self.op_tail.wrapping_sub(self.op_head))
            .finish()
    }
}

impl TmRing {
    /// The command QP's ring `sq` with a fresh tag list of `max_num_tags`
    /// entries (handles `0..=max_num_tags`, as libmlx5 numbers them).
    ///
    /// # Safety
    /// For as long as the ring lives:
    /// - `sq` is the ring of the send queue of the command QP of one
    ///   tag-matching SRQ (its buffer, doorbell record and BlueFlame
    ///   register, as [`SqRing::from_raw`] asks), with no WQE posted on it
    ///   before (the device's producer index is the ring's), and nothing
    ///   else posts on that queue;
    /// - the SRQ was created for `max_num_tags` tags (`ibv_tm_cap::max_num_tags`),
    ///   so that its tag list has the `max_num_tags + 1` entries the ring
    ///   numbers, none of them added yet, and nothing else adds or removes
    ///   tags on it (libmlx5's `ibv_post_srq_ops` on the same SRQ, a second
    ///   ring);
    /// - every CQE of the SRQ's CQ that belongs to this SRQ (its `srqn`) and
    ///   carries tag matching (`app` 1) is given to [`TmRing::complete`]
    ///   exactly once, in the order the device wrote them, and no other
    ///   CQE is: a CQE of another SRQ sharing the CQ, a made-up or repeated
    ///   one would free entries, and with them buffers of
    ///   [`TmRing::add_buf`], that the device still owns.
    ///
    /// # Panics
    /// If `max_num_tags` is 0 or above 65535 (the segment's index is 16
    /// bits), or the queue holds fewer than 2 WQEs (programming errors).
    pub unsafe fn from_raw(sq: SqRing, max_num_tags: u32) -> TmRing {
        assert!(
            (1..=u32::from(u16::MAX)).contains(&max_num_tags),
            "TmRing: max_num_tags {max_num_tags} is outside 1..=65535"
        );
        assert!(sq.wqe_cnt() >= 2, "TmRing: a command queue of {} WQEs; it needs 2 at least", sq.wqe_cnt());
        let n = max_num_tags as usize + 1;
        let tags = (0..n)
            .map(|i| Entry {
                next: if i + 1 < n { i as u32 + 1 } else { NONE },
                wr_id: 0,
                phase_cnt: 0,
                size: 0,
                expect_cqe: 0,
                removing: false,
            })
            .collect();
        let ops = vec![Pending { tag: NONE, wr_id: None, wqe: 0 }; sq.wqe_cnt() as usize].into_boxed_slice();
        TmRing { sq, tags, head: 0, tail: max_num_tags, ops, op_head: 0, op_tail: 0, unexp_in: 0, unexp_out: 0 }
    }

    /// The command QP's ring (producer index, room).
    pub fn sq(&self) -> &SqRing {
        &self.sq
    }

    /// Tags the device list holds.
    pub fn max_num_tags(&self) -> u32 {
        self.tags.len() as u32 - 1
    }

    /// Whether entry `handle` is taken: added, and not yet consumed or
    /// removed as far as the completions taken tell (a posted remove
    /// leaves it taken until its completion). While it is, the device may
    /// write the buffer of [`TmRing::add_buf`].
    pub fn is_posted(&self, handle: u32) -> bool {
        self.tags.get(handle as usize).is_some_and(|e| e.expect_cqe > 0)
    }

    /// Adds an empty tagged receive: a message whose tag equals `tag` on
    /// the bits of `mask` matches it with no buffer (the device writes no
    /// memory for it; a message with data completes in error). Returns the
    /// entry's handle, for [`TmRing::remove`]; `recv_wr_id` is the id its
    /// match completes with.
    #[inline]
    pub fn add(&mut self, tag: u64, mask: u64, recv_wr_id: u64, opts: TmOpts) -> Result<u32, TmError> {
        // SAFETY: no buffer: the WQE ends with the terminating data segment.
        unsafe { self.add_inner(tag, mask, None, recv_wr_id, opts, None::<&mut HwMmio>) }
    }

    /// [`TmRing::add`] and [`TmRing::ring`] at once: the add is written
    /// and the doorbell rung for it (and any operations written before it
    /// without one), as `ibv_post_srq_ops` with a one-operation list does.
    #[inline]
    pub fn add_post<M: Mmio>(
        &mut self,
        tag: u64,
        mask: u64,
        recv_wr_id: u64,
        opts: TmOpts,
        mmio: &mut M,
    ) -> Result<u32, TmError> {
        // SAFETY: as in `add`.
        unsafe { self.add_inner(tag, mask, None, recv_wr_id, opts, Some(mmio)) }
    }

    /// Adds a tagged receive into the buffer `buf` (its address, length
    /// and lkey, as [`Mr::sge`](crate::prim::Mr::sge) gives them; an empty
    /// one is an empty receive, as [`TmRing::add`]).
    ///
    /// # Safety
    /// The device writes a matching message, up to `buf.len()` bytes, to
    /// `buf` at any time from the doorbell ([`TmRing::ring`]) on. So:
    /// - `buf.addr()..buf.addr() + buf.len()` lies in memory of this
    ///   process inside a memory region registered on the SRQ's PD with
    ///   local write access, whose lkey is `buf.lkey()`, and the region stays
    ///   registered while the entry is taken;
    /// - the range stays allocated, and the program neither reads nor
    ///   writes it (nor hands it to other code that does), while the entry
    ///   is taken: until [`TmRing::is_posted`] returns false for the handle
    ///   this call returns, which happens when [`TmRing::complete`] takes
    ///   the entry's last completion (a match that completes it, or its
    ///   remove's completion reporting success). After a refusal (`Err`)
    ///   nothing was posted and the range is the caller's at once.
    #[inline]
    pub unsafe fn add_buf(
        &mut self,
        tag: u64,
        mask: u64,
        buf: Sge,
        recv_wr_id: u64,
        opts: TmOpts,
    ) -> Result<u32, TmError> {
        // SAFETY: forwarded contract.
        unsafe {
            self.add_inner(tag, mask, Some((buf.len(), buf.lkey(), buf.addr())), recv_wr_id, opts, None::<&mut HwMmio>)
        }
    }

    /// [`TmRing::add_buf`] and [`TmRing::ring`] at once, as
    /// [`TmRing::add_post`].
    ///
    /// # Safety
    /// As [`TmRing::add_buf`]; the device may write `buf` from this call on.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn add_buf_post<M: Mmio>(
        &mut self,
        tag: u64,
        mask: u64,
        buf: Sge,
        recv_wr_id: u64,
        opts: TmOpts,
        mmio: &mut M,
    ) -> Result<u32, TmError> {
        // SAFETY: forwarded contract.
        unsafe { self.add_inner(tag, mask, Some((buf.len(), buf.lkey(), buf.addr())), recv_wr_id, opts, Some(mmio)) }
    }

    /// The add, rung at once when `mmio` is given.
    ///
    /// # Safety
    /// As [`TmRing::add_buf`] when `buf` is given.
    #[inline(always)]
    unsafe fn add_inner<M: Mmio>(
        &mut self,
        tag: u64,
        mask: u64,
        buf: Option<(u32, u32, u64)>,
        recv_wr_id: u64,
        opts: TmOpts,
        mmio: Option<&mut M>,
    ) -> Result<u32, TmError> {
        self.check_room()?;
        let idx = self.head;
        // SAFETY: `head` always names an entry of the list: it starts at 0
        // and only ever takes an entry's `next` that is not `NONE` (below),
        // and `next` holds `NONE` or an index below the list's length
        // (`from_raw`, `release`).
        let next = unsafe { self.tags.get_unchecked(idx as usize) }.next;
        if next == NONE {
            return Err(TmError::ListFull { max_num_tags: self.max_num_tags() });
        }
        let (data, size) = match buf {
            Some((len, lkey, addr)) if len != 0 => (data_seg(len, lkey, addr), len),
            // The data segment that ends a list without entries
            // (`set_data_ptr_seg_end`): the device reads no memory through it.
            _ => (data_seg(0, INVALID_LKEY, 0), 0),
        };
        // The list's bookkeeping first, the WQE last: nothing is refused
        // past the checks above, and the WQE's values are then the only
        // ones live across its stores.
        let pi = self.sq.cur_post() as u16;
        self.head = next;
        if let Some(n) = opts.sync {
            self.unexp_out = n as i32;
        }
        // SAFETY: as above (`idx` was `head`).
        let e = unsafe { self.tags.get_unchecked_mut(idx as usize) };
        // A free entry is never being removed (`release` clears the mark
        // when it frees one).
        debug_assert!(!e.removing && e.expect_cqe == 0, "the list's free entry {idx} is taken");
        e.next = NONE;
        e.wr_id = recv_wr_id;
        e.phase_cnt = self.unexp_out;
        e.size = size;
        // The add's match, and the add's own completion when signaled.
        e.expect_cqe += 1 + i32::from(opts.signaled.is_some());
        if let Some(wr_id) = opts.signaled {
            // The entry's count was raised above.
            self.push_op_counted(idx, Some(wr_id), pi);
        }
        let mut seg = opts.seg(TmOpcode::APPEND);
        seg.index = Be16::new(next as u16);
        seg.append_tag = Be64::new(tag);
        seg.append_mask = Be64::new(mask);
        // SAFETY: room was checked above; a TAG_MATCHING add is the
        // tag-matching segment then one data segment, which names the
        // buffer under `add_buf`'s contract (the caller vouches that it is
        // registered memory, alive until the entry's last completion) or
        // no memory at all.
        unsafe { self.sq.put_block(WqeOpcode::TAG_MATCHING, seg.units(), Some(data), mmio) };
        Ok(idx)
    }

    /// Removes the tagged receive `handle` (an add's result). Refused when
    /// the handle names no entry, one not in the device, or one whose
    /// remove is already posted ([`TmError::NotPosted`]).
    ///
    /// The remove always asks for a completion, with or without
    /// [`TmOpts::signaled`] (without, the completion's
    /// [`wr_id`](TmCompletion::wr_id) is `None`): only its CQE says whether
    /// the tag left the device (success) or a message matched it first
    /// (`TM_ERR`; the match's completions, before or after it, then end
    /// the entry). Until [`TmRing::complete`] has taken that CQE the entry
    /// stays taken: [`TmRing::is_posted`] is true and [`TmRing::add`] does
    /// not hand it out, so a match the device made before the remove ran
    /// is credited to this entry's receive, never to a later add's.
    /// (libmlx5's `mlx5_post_srq_ops` frees the entry of an unsignaled
    /// remove at once, without a completion; this ring costs one CQE per
    /// remove instead.)
    pub fn remove(&mut self, handle: u32, opts: TmOpts) -> Result<(), TmError> {
        self.check_room()?;
        let entries = self.tags.len() as u32;
        if handle >= entries {
            return Err(TmError::BadHandle { handle, entries });
        }
        let e = &self.tags[handle as usize];
        if e.expect_cqe == 0 || e.removing {
            return Err(TmError::NotPosted { handle });
        }
        let mut seg = opts.seg(TmOpcode::REMOVE);
        // Always with a completion: only the remove's own CQE says whether
        // the tag left the device (success) or was matched first (the
        // match's completions then free the entry).
        seg.flags |= TmFlags::CQE_REQ.bits();
        seg.index = Be16::new(handle as u16);
        // SAFETY: room was checked above; a TAG_MATCHING remove is the
        // control and tag-matching segments only (48 bytes), so the device
        // reads no data segment and reaches no memory.
        let pi = unsafe { self.sq.put_block(WqeOpcode::TAG_MATCHING, seg.units(), None, None::<&mut HwMmio>) } as u16;
        self.tags[handle as usize].removing = true;
        // Signaled or not, the entry stays taken until the remove's
        // completion (libmlx5 frees it here when unsignaled, and a match the
        // device made before the remove ran is then credited to the entry's
        // next owner).
        self.push_op(handle, opts.signaled, pi);
        Ok(())
    }

    /// A sync (a no-op on the list): with [`TmOpts::sync`] it tells the
    /// device how many unexpected messages software has handled.
    pub fn sync(&mut self, opts: TmOpts) -> Result<(), TmError> {
        self.check_room()?;
        let seg = opts.seg(TmOpcode::NOP);
        // SAFETY: room was checked above; a TAG_MATCHING sync (NOP) is the
        // control and tag-matching segments only, so the device reads no
        // data segment and reaches no memory.
        let pi = unsafe { self.sq.put_block(WqeOpcode::TAG_MATCHING, seg.units(), None, None::<&mut HwMmio>) } as u16;
        if let Some(wr_id) = opts.signaled {
            self.push_op(NONE, Some(wr_id), pi);
        }
        Ok(())
    }

    /// Rings the command QP's doorbell for the operations written since the
    /// last one ([`SqRing::ring`]), as `mlx5_post_srq_ops` does at the end of
    /// a list.
    pub fn ring<M: Mmio>(&mut self, mmio: &mut M) {
        self.sq.ring(mmio);
    }

    /// Takes a CQE of the SRQ's CQ: `None` unless it carries tag matching
    /// (`app` 1, a responder or no-packet CQE). Frees the entries and
    /// command WQEs it completes and reports it as libmlx5's extended
    /// poller does (`handle_tag_matching`, `ibv_wc_read_opcode`,
    /// `ibv_wc_read_wc_flags`).
    pub fn complete(&mut self, cqe: &Cqe64) -> Option<TmCompletion> {
        let t = TmCqe::of(cqe)?;
        let op = CqeOpcode::from_raw(cqe_opcode(cqe.op_own));
        let resp = [CqeOpcode::RESP_WR_IMM, CqeOpcode::RESP_SEND, CqeOpcode::RESP_SEND_IMM, CqeOpcode::RESP_SEND_INV];
        if op != CqeOpcode::NO_PACKET && !resp.contains(&op) {
            return None;
        }
        let mut c = TmCompletion {
            cqe: t,
            opcode: opcode_of(op, t.op),
            status: WcStatus::SUCCESS,
            wr_id: None,
            srq_wqe: None,
            flags: flags_of(op, t.op, cqe),
            scattered: false,
        };
        let sync_req = match t.op {
            TmCqeOp::ConsumedMsgSwRndv
            | TmCqeOp::ConsumedSwRndv
            | TmCqeOp::MsgCompletionCanceled
            | TmCqeOp::ConsumedMsg
            | TmCqeOp::Consumed
            | TmCqeOp::Expected => {
                if t.op.is_rndv_incomplete() {
                    c.status = WcStatus::TM_RNDV_INCOMPLETE;
                }
                self.matched(&mut c, cqe);
                false
            }
            TmCqeOp::Remove | TmCqeOp::Append | TmCqeOp::Noop => self.list_op(&mut c),
            TmCqeOp::Unexpected | TmCqeOp::NoTag => {
                let mut sync_req = false;
                if t.op == TmCqeOp::Unexpected {
                    self.unexp_in = self.unexp_in.wrapping_add(1);
                    sync_req = self.unexp_in.wrapping_sub(self.unexp_out) > MAX_SYNC_DIFF;
                }
                c.srq_wqe = Some(cqe.wqe_counter.get());
                sync_req
            }
            TmCqeOp::Other(_) => false,
        };
        if sync_req {
            c.flags |= WcFlags::TM_SYNC_REQ;
        }
        Some(c)
    }

    /// A match on the entry `app_info` names.
    fn matched(&mut self, c: &mut TmCompletion, cqe: &Cqe64) {
        let idx = c.cqe.list_index as usize;
        if self.tags.get(idx).is_none_or(|e| e.expect_cqe <= 0) {
            c.status = WcStatus::GENERAL_ERR;
            return;
        }
        c.wr_id = Some(self.tags[idx].wr_id);
        if c.cqe.op.is_complete() {
            self.release(idx as u32);
        }
        // libmlx5 checks the 64-byte scatter bit alone (`MLX5_INLINE_SCATTER_64`).
        if cqe.op_own & 0x8 != 0 {
            c.scattered = true;
            if cqe.byte_cnt.get() > self.tags[idx].size {
                c.status = WcStatus::LOC_LEN_ERR;
            }
        }
    }

    /// A list operation's CQE: the oldest signaled operation completes.
    /// Returns whether software should sync.
    fn list_op(&mut self, c: &mut TmCompletion) -> bool {
        if c.cqe.op == TmCqeOp::Remove && !c.cqe.success {
            c.status = WcStatus::TM_ERR;
        }
        if self.op_head == self.op_tail {
            c.status = WcStatus::GENERAL_ERR;
            return false;
        }
        let mask = self.ops.len() as u32 - 1;
        let p = self.ops[(self.op_head & mask) as usize];
        self.op_head = self.op_head.wrapping_add(1);
        let mut sync_req = false;
        if p.tag != NONE {
            self.release(p.tag);
            if c.cqe.op == TmCqeOp::Remove && c.status == WcStatus::SUCCESS {
                // Removed: no consumption completion is due any more.
                self.release(p.tag);
            }
            sync_req = i32::from(c.cqe.hw_phase_cnt) != self.tags[p.tag as usize].phase_cnt;
        }
        self.sq.retire_block(p.wqe);
        c.wr_id = p.wr_id;
        sync_req
    }

    /// Room for one more command WQE (libmlx5's `mlx5_wq_overflow`).
    fn check_room(&self) -> Result<(), TmError> {
        if self.sq.available() == 0 {
            return Err(TmError::QueueFull { wqe_cnt: self.sq.wqe_cnt() });
        }
        Ok(())
    }

    fn push_op(&mut self, tag: u32, wr_id: Option<u64>, wqe: u16) {
        self.push_op_counted(tag, wr_id, wqe);
        if tag != NONE {
            self.tags[tag as usize].expect_cqe += 1;
        }
    }

    /// [`TmRing::push_op`] for an entry whose count the caller raised.
    #[inline(always)]
    fn push_op_counted(&mut self, tag: u32, wr_id: Option<u64>, wqe: u16) {
        let mask = self.ops.len() as u32 - 1;
        self.ops[(self.op_tail & mask) as usize] = Pending { tag, wr_id, wqe };
        self.op_tail = self.op_tail.wrapping_add(1);
    }

    /// One completion due on the entry seen; the last puts it at the end
    /// of the free chain (`mlx5_tm_release_tag`).
    fn release(&mut self, idx: u32) {
        let e = &mut self.tags[idx as usize];
        if e.expect_cqe <= 0 {
            // Free already (a device reporting more than was due).
            return;
        }
        e.expect_cqe -= 1;
        if e.expect_cqe == 0 {
            e.removing = false;
            e.next = NONE;
            self.tags[self.tail as usize].next = idx;
            self.tail = idx;
        }
    }
}

/// `ibv_wc_read_opcode` of a tag-matching CQE.
fn opcode_of(op: CqeOpcode, tm: TmCqeOp) -> WcOpcode {
    use TmCqeOp as T;
    match op {
        CqeOpcode::RESP_WR_IMM => WcOpcode::RECV_RDMA_WITH_IMM,
        CqeOpcode::NO_PACKET => match tm {
            T::Remove => WcOpcode::TM_DEL,
            T::Append => WcOpcode::TM_ADD,
            T::Noop => WcOpcode::TM_SYNC,
            T::Consumed => WcOpcode::TM_RECV,
            // libmlx5 returns 0 for the others.
            _ => WcOpcode::SEND,
        },
        _ => match tm {
            T::ConsumedMsgSwRndv | T::ConsumedMsg | T::ConsumedSwRndv | T::Expected | T::Unexpected => {
                WcOpcode::TM_RECV
            }
            T::NoTag => WcOpcode::TM_NO_TAG,
            _ => WcOpcode::RECV,
        },
    }
}

/// `ibv_wc_read_wc_flags` of a tag-matching CQE, but the sync request
/// (which depends on the list's state).
fn flags_of(op: CqeOpcode, tm: TmCqeOp, cqe: &Cqe64) -> WcFlags {
    use TmCqeOp as T;
    let mut f = match op {
        CqeOpcode::RESP_WR_IMM | CqeOpcode::RESP_SEND_IMM => WcFlags::WITH_IMM,
        CqeOpcode::RESP_SEND_INV => WcFlags::WITH_INV,
        _ => WcFlags::empty(),
    };
    f |= match tm {
        T::ConsumedMsgSwRndv | T::ConsumedMsg | T::MsgCompletionCanceled => WcFlags::TM_MATCH | WcFlags::TM_DATA_VALID,
        T::ConsumedSwRndv | T::Consumed => WcFlags::TM_MATCH,
        T::Expected => WcFlags::TM_DATA_VALID,
        _ => WcFlags::empty(),
    };
    // `flags_rqpn` bits 28-29 (bytes 24-27), as for any receive.
    if cqe.rsvd0[24] >> 4 & 3 != 0 {
        f |= WcFlags::GRH;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5dv::queue::be::Be32;
    use crate::mlx5dv::queue::mmio::{Op, Recorder};

    struct Fixture {
        buf: Vec<u64>,
        _dbrec: Box<Be32>,
        _bf: Box<[u64; 16]>,
        tm: TmRing,
    }

    fn ring(wqe_cnt: u32, tags: u32) -> Fixture {
        let mut buf = vec![0u64; wqe_cnt as usize * 8];
        let mut dbrec = Box::new(Be32::default());
        let mut bf = Box::new([0u64; 16]);
        // SAFETY: test memory, alive in the fixture; a fresh ring.
        let tm = unsafe {
            let sq = SqRing::from_raw(buf.as_mut_ptr().cast(), wqe_cnt, &mut *dbrec, bf.as_mut_ptr().cast(), 64, 0x42);
            TmRing::from_raw(sq, tags)
        };
        Fixture { buf, _dbrec: dbrec, _bf: bf, tm }
    }

    fn wqe(f: &Fixture, i: usize) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (k, w) in f.buf[i * 8..i * 8 + 8].iter().enumerate() {
            b[k * 8..k * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }

    fn op_cqe(app_op: u8, success: bool, phase: u16) -> Cqe64 {
        let mut c = Cqe64 { app: [1, app_op, 0, 0], op_own: CqeOpcode::NO_PACKET.to_raw() << 4, ..Cqe64::default() };
        c.rsvd0[0] = if success { 0x80 } else { 0 };
        c.rsvd0[4..6].copy_from_slice(&phase.to_be_bytes());
        c
    }

    #[test]
    fn add_remove_sync_write_libmlx5_s_segments() {
        let mut f = ring(8, 2);
        // SAFETY: test memory that no device reads.
        let h =
            unsafe { f.tm.add_buf(0x1122, 0xff00, Sge::from_raw(0x1000, 64, 7), 5, TmOpts::new().signaled(9).sync(3)) }
                .unwrap();
        assert_eq!(h, 0);
        let w = wqe(&f, 0);
        // Control: index 0, opcode 0x28, qpn 0x42, 4 DS; no completion flag there.
        assert_eq!(&w[..12], &[0, 0, 0, 0x28, 0, 0, 0x42, 4, 0, 0, 0, 0]);
        // The segment: APPEND, CQE_REQ | SW_CNT, next entry 1, sw_cnt 3, tag, mask.
        assert_eq!(&w[16..24], &[0x10, 0xc0, 0, 1, 0, 0, 0, 3]);
        assert_eq!(&w[32..48], &[0, 0, 0, 0, 0, 0, 0x11, 0x22, 0, 0, 0, 0, 0, 0, 0xff, 0]);
        assert_eq!(&w[48..64], &[0, 0, 0, 64, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x10, 0]);
        let h2 = f.tm.add(1, !0, 6, TmOpts::new()).unwrap();
        assert_eq!(h2, 1);
        assert_eq!(&wqe(&f, 1)[48..64], &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], "terminator");
        assert_eq!(f.tm.add(2, !0, 7, TmOpts::new()), Err(TmError::ListFull { max_num_tags: 2 }));
        f.tm.remove(h2, TmOpts::new()).unwrap();
        let w = wqe(&f, 2);
        assert_eq!((w[7], &w[16..20]), (3, &[0x20, 0x80, 0, 1][..]), "3 DS, REMOVE of entry 1, CQE_REQ");
        f.tm.sync(TmOpts::new().sync(0x1_0005)).unwrap();
        assert_eq!(&wqe(&f, 3)[16..24], &[0, 0x40, 0, 0, 0, 0, 0, 5]);
        assert_eq!(f.tm.remove(9, TmOpts::new()), Err(TmError::BadHandle { handle: 9, entries: 3 }));
        assert_eq!(f.tm.remove(1, TmOpts::new()), Err(TmError::NotPosted { handle: 1 }));
        let mut m = Recorder::default();
        f.tm.ring(&mut m);
        assert!(m.ops.contains(&Op::DbRec(4)), "{:?}", m.ops);
    }

    #[test]
    fn completions_free_entries_in_libmlx5_s_order() {
        let mut f = ring(4, 2);
        let a = f.tm.add(1, !0, 100, TmOpts::new().signaled(1)).unwrap();
        let b = f.tm.add(2, !0, 200, TmOpts::new()).unwrap();
        assert_eq!((a, b), (0, 1));
        // The add's CQE: entry 0 still in the device.
        let c = f.tm.complete(&op_cqe(0x5, true, 0)).unwrap();
        assert_eq!((c.opcode, c.status, c.wr_id), (WcOpcode::TM_ADD, WcStatus::SUCCESS, Some(1)));
        assert!(f.tm.is_posted(a));
        // A match on entry 1 (expected, complete): freed, and the next add takes entry 2.
        let mut m = Cqe64 { app: [1, 0x2, 0, 1], op_own: CqeOpcode::RESP_SEND.to_raw() << 4, ..Cqe64::default() };
        m.rsvd0[8..16].copy_from_slice(&2u64.to_be_bytes());
        let c = f.tm.complete(&m).unwrap();
        assert_eq!((c.opcode, c.wr_id, c.cqe.tag), (WcOpcode::TM_RECV, Some(200), 2));
        assert_eq!(c.flags, WcFlags::TM_DATA_VALID);
        assert!(!f.tm.is_posted(b));
        assert_eq!(f.tm.add(3, !0, 300, TmOpts::new()).unwrap(), 2);
        // Entry 1 again after that; a second match on it is an error.
        assert_eq!(f.tm.complete(&m).unwrap().status, WcStatus::GENERAL_ERR);
        // A failed remove: TM_ERR, and the entry waits for its match.
        f.tm.remove(a, TmOpts::new().signaled(7)).unwrap();
        let c = f.tm.complete(&op_cqe(0x6, false, 1)).unwrap();
        assert_eq!((c.status, c.wr_id, c.flags), (WcStatus::TM_ERR, Some(7), WcFlags::TM_SYNC_REQ));
        assert!(f.tm.is_posted(a));
        // Unexpected: the SRQ receive at the WQE counter.
        let mut u = Cqe64 { app: [1, 0x3, 0, 0], op_own: CqeOpcode::RESP_SEND_IMM.to_raw() << 4, ..Cqe64::default() };
        u.wqe_counter = crate::mlx5dv::queue::be::Be16::new(12);
        let c = f.tm.complete(&u).unwrap();
        assert_eq!((c.opcode, c.srq_wqe, c.wr_id, c.flags), (WcOpcode::TM_RECV, Some(12), None, WcFlags::WITH_IMM));
        assert_eq!(f.tm.complete(&Cqe64::default()), None, "not tag matching");
    }

    fn match_cqe(app_op: u8, idx: u8) -> Cqe64 {
        Cqe64 { app: [1, app_op, 0, idx], op_own: CqeOpcode::RESP_SEND.to_raw() << 4, ..Cqe64::default() }
    }

    /// B-5: a remove posted without a completion id still asks for its
    /// CQE, and its entry stays taken until that CQE: a match the device
    /// made before the remove ran is credited to the entry's own receive,
    /// never to an add that reused the entry.
    #[test]
    fn b5_an_unsignaled_remove_keeps_its_entry_until_its_completion() {
        let mut f = ring(8, 2);
        let a = f.tm.add(0xa, !0, 100, TmOpts::new()).unwrap();
        assert_eq!(a, 0);
        f.tm.remove(a, TmOpts::new()).unwrap();
        assert_eq!(wqe(&f, 1)[16..20], [0x20, TmFlags::CQE_REQ.bits(), 0, 0], "REMOVE of entry 0, with a completion");
        assert!(f.tm.is_posted(a), "taken until the remove's completion");
        assert_eq!(f.tm.remove(a, TmOpts::new()), Err(TmError::NotPosted { handle: a }), "a second remove");
        // B takes entry 1, and its match frees it; C takes entry 2; entry 0
        // is not handed out again.
        assert_eq!(f.tm.add(0xb, !0, 200, TmOpts::new()), Ok(1));
        assert_eq!(f.tm.complete(&match_cqe(0x2, 1)).unwrap().wr_id, Some(200));
        assert_eq!(f.tm.add(0xc, !0, 300, TmOpts::new()), Ok(2));
        assert_eq!(f.tm.add(0xd, !0, 400, TmOpts::new()), Err(TmError::ListFull { max_num_tags: 2 }));
        // A's tag matched before the remove ran: credited to A.
        let c = f.tm.complete(&match_cqe(0x2, 0)).unwrap();
        assert_eq!((c.status, c.wr_id), (WcStatus::SUCCESS, Some(100)));
        assert!(f.tm.is_posted(a), "the remove's completion is due");
        // The remove failed (the tag was matched): its completion frees entry 0.
        let c = f.tm.complete(&op_cqe(0x6, false, 0)).unwrap();
        assert_eq!((c.opcode, c.wr_id, c.status), (WcOpcode::TM_DEL, None, WcStatus::TM_ERR));
        assert!(!f.tm.is_posted(a));
        // Entry 0 went to the end of the free chain, behind entry 1.
        assert_eq!(f.tm.add(0xd, !0, 400, TmOpts::new()), Ok(1));
        assert_eq!(f.tm.add(0xe, !0, 500, TmOpts::new()), Err(TmError::ListFull { max_num_tags: 2 }));
        assert_eq!(f.tm.sq().available(), 8 - 3, "the remove's completion retired A's add and itself");
    }

    /// B-5: a successful remove frees its entry with its completion, and a
    /// later match on it is an error, not a receive; after a match's first
    /// completion a failed remove leaves the entry to the match's last one.
    #[test]
    fn b5_a_remove_frees_its_entry_only_as_its_completion_says() {
        let mut f = ring(8, 4);
        let a = f.tm.add(0xa, !0, 100, TmOpts::new()).unwrap();
        let b = f.tm.add(0xb, !0, 200, TmOpts::new()).unwrap();
        f.tm.remove(a, TmOpts::new()).unwrap();
        f.tm.remove(b, TmOpts::new().signaled(9)).unwrap();
        // B's match had started (its first completion) before its remove ran.
        assert_eq!(f.tm.complete(&match_cqe(0x1, b as u8)).unwrap().wr_id, Some(200));
        let c = f.tm.complete(&op_cqe(0x6, true, 0)).unwrap();
        assert_eq!((c.wr_id, c.status), (None, WcStatus::SUCCESS));
        assert!(!f.tm.is_posted(a), "A: removed");
        assert_eq!(f.tm.complete(&match_cqe(0x2, a as u8)).unwrap().status, WcStatus::GENERAL_ERR);
        let c = f.tm.complete(&op_cqe(0x6, false, 0)).unwrap();
        assert_eq!((c.wr_id, c.status), (Some(9), WcStatus::TM_ERR));
        assert!(f.tm.is_posted(b), "B: its match's last completion is due");
        assert_eq!(f.tm.complete(&match_cqe(0x2, b as u8)).unwrap().wr_id, Some(200));
        assert!(!f.tm.is_posted(b));
    }

    /// `add_post` and `add_buf_post` write what `add` and `add_buf` write
    /// and ring the doorbell at once, as `add` then `ring` does (for the
    /// operations written before them without one too); the handles and
    /// the entries' state are the same.
    #[test]
    fn add_post_writes_what_add_writes_and_rings_as_ring_does() {
        let (mut a, mut b) = (ring(8, 4), ring(8, 4));
        a.tm.sync(TmOpts::new()).unwrap();
        b.tm.sync(TmOpts::new()).unwrap();
        let ha = a.tm.add(0x33, !0, 7, TmOpts::new().signaled(1)).unwrap();
        let mut ma = Recorder::default();
        a.tm.ring(&mut ma);
        let mut mb = Recorder::default();
        let hb = b.tm.add_post(0x33, !0, 7, TmOpts::new().signaled(1), &mut mb).unwrap();
        assert_eq!(ha, hb);
        assert_eq!((wqe(&a, 0), wqe(&a, 1)), (wqe(&b, 0), wqe(&b, 1)));
        assert_eq!(ma.ops, mb.ops);
        assert!(mb.ops.contains(&Op::DbRec(2)), "{:?}", mb.ops);
        let buf = Sge::from_raw(0x1000, 64, 7);
        // SAFETY: test memory that no device reads.
        let h = unsafe { a.tm.add_buf(0x44, !0, buf, 8, TmOpts::new().sync(2)) }.unwrap();
        let mut ma = Recorder::default();
        a.tm.ring(&mut ma);
        let mut mb = Recorder::default();
        // SAFETY: as above.
        let h2 = unsafe { b.tm.add_buf_post(0x44, !0, buf, 8, TmOpts::new().sync(2), &mut mb) }.unwrap();
        assert_eq!((h, wqe(&a, 2), &ma.ops), (h2, wqe(&b, 2), &mb.ops));
        assert_eq!(&wqe(&b, 2)[48..64], &[0, 0, 0, 64, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x10, 0]);
        assert!(b.tm.is_posted(h2) && b.tm.is_posted(hb));
        // The signaled add's completion retires the sync and itself, and
        // leaves its entry to its match.
        let c = b.tm.complete(&op_cqe(0x5, true, 0)).unwrap();
        assert_eq!((c.opcode, c.wr_id), (WcOpcode::TM_ADD, Some(1)));
        assert!(b.tm.is_posted(hb));
        assert_eq!(b.tm.sq().available(), 8 - 1);
        assert_eq!(b.tm.add_post(1, 1, 1, TmOpts::new(), &mut mb), Ok(2));
        assert_eq!(b.tm.add_post(1, 1, 1, TmOpts::new(), &mut mb), Ok(3));
        assert_eq!(b.tm.add_post(1, 1, 1, TmOpts::new(), &mut mb), Err(TmError::ListFull { max_num_tags: 4 }));
    }

    #[test]
    fn a_full_command_queue_is_refused_until_a_completion() {
        let mut f = ring(2, 8);
        f.tm.sync(TmOpts::new()).unwrap();
        f.tm.sync(TmOpts::new().signaled(4)).unwrap();
        assert_eq!(f.tm.sync(TmOpts::new()), Err(TmError::QueueFull { wqe_cnt: 2 }));
        let e = f.tm.add(1, 1, 1, TmOpts::new()).unwrap_err();
        assert!(e.to_string().contains("command queue's 2 WQEs"), "{e}");
        assert_eq!(f.tm.complete(&op_cqe(0x7, true, 0)).unwrap().opcode, WcOpcode::TM_SYNC);
        f.tm.sync(TmOpts::new()).unwrap();
        assert_eq!(f.tm.sq().cur_post(), 3);
    }
}
