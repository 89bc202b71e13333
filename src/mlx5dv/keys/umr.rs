//! Typed UMR WQE builders: configuring an indirect memory key
//! ([`Mkey`]) through the send queue, and local invalidation.
//!
//! The bytes are libmlx5's (rdma-core v59 `mlx5_send_wr_mkey_configure`
//! with its access and layout setters, which `mlx5dv_wr_mr_list` and
//! `mlx5dv_wr_mr_interleaved` also call, and `mlx5_send_wr_local_inv`),
//! compared byte for byte by the libmlx5 differential harness
//! (`tests/provider/mkey.rs`). A WQE after a UMR WQE carries the small
//! fence unless it asks for the strong one, as libmlx5 sets it.
//!
//! The safe [`SqRing::mkey_configure`] takes the regions ([`Mr`]) the key
//! is laid over, checks every range against its region and makes the key
//! hold them, so the key never reaches memory that is not registered; the
//! raw [`SqRing::mkey_configure_raw`] takes keys and addresses and is
//! `unsafe`. Signature and crypto keys (their BSF segments and SET_PSV
//! WQEs) are not built here.

#[cfg(doc)]
use crate::mlx5dv::keys::mkey::Mkey;
use crate::mlx5dv::keys::mkey::UmrKey;
use crate::mlx5dv::queue::mmio::Mmio;
use crate::mlx5dv::queue::seg::{CtrlFlags, WqeOpcode};
use crate::mlx5dv::queue::sq::{SqRing, SqTransport, WqeWriter};
use crate::prim::{AccessFlags, Error, Mr, Result};

/// `MLX5_WQE_UMR_CTRL_FLAG_*`.
const FLAG_INLINE: u8 = 1 << 7;
const FLAG_TRANSLATION_OFFSET: u8 = 1 << 4;
const FLAG_CHECK_QPN: u8 = 1 << 3;
/// `MLX5_WQE_UMR_CTRL_MKEY_MASK_*`.
const MASK_LEN: u64 = 1 << 0;
const MASK_MKEY: u64 = 1 << 13;
const MASK_QPN: u64 = 1 << 14;
const MASK_ACCESS: u64 = (1 << 18) | (1 << 19) | (1 << 20) | (1 << 21);
const MASK_FREE: u64 = 1 << 29;
/// `MLX5_WQE_MKEY_CONTEXT_FREE`.
const CONTEXT_FREE: u8 = 1 << 6;
/// The repeat block's `op` (`umr_strided_seg_create`).
const REPEAT_OP: u32 = 0x400;

/// One range of a list layout, by raw key and address (a KLM entry,
/// `struct ibv_sge` of `mlx5dv_wr_mr_list`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KlmEntry {
    /// The local key of the region the range lies in.
    pub lkey: u32,
    /// The first byte.
    pub addr: u64,
    /// Bytes.
    pub len: u32,
}

/// One entry of an interleaved layout, by raw key and address
/// (`struct mlx5dv_mr_interleaved`): each repetition takes `bytes_count`
/// bytes at `addr`, and the next repetition starts `bytes_count +
/// bytes_skip` bytes further.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StrideEntry {
    /// The local key of the region the entry lies in.
    pub lkey: u32,
    /// The first byte of the first repetition.
    pub addr: u64,
    /// Bytes per repetition (at most 65535: the WQE field is 16 bits).
    pub bytes_count: u32,
    /// Bytes skipped between repetitions (`bytes_count + bytes_skip` at most 65535).
    pub bytes_skip: u32,
}

/// A layout by raw keys and addresses, for [`SqRing::mkey_configure_raw`].
#[derive(Clone, Copy, Debug)]
pub enum RawLayout<'a> {
    /// The ranges one after the other (`mlx5dv_wr_set_mkey_layout_list`).
    List(&'a [KlmEntry]),
    /// The entries' blocks in turn, `repeat_count` times
    /// (`mlx5dv_wr_set_mkey_layout_interleaved`).
    Interleaved {
        /// How many times the entries repeat.
        repeat_count: u32,
        /// The entries of one repetition.
        entries: &'a [StrideEntry],
    },
}

/// A range of a registered region: `len` bytes from `offset` bytes into
/// `mr`. Offsets and lengths are `usize`, as everywhere in the memory APIs
/// ([`RangeError`](crate::prim::RangeError) says why).
#[derive(Clone, Copy, Debug)]
pub struct MrRange<'a> {
    /// The region.
    pub mr: &'a Mr,
    /// Bytes from the region's start.
    pub offset: usize,
    /// Bytes (1 to 4 GiB - 1: a KLM entry's length is 32 bits).
    pub len: usize,
}

/// An interleaved entry inside a registered region: `bytes_count` bytes
/// from `offset`, then every `bytes_count + bytes_skip` bytes, once per
/// repetition; every repetition must lie in `mr`.
#[derive(Clone, Copy, Debug)]
pub struct MrStride<'a> {
    /// The region.
    pub mr: &'a Mr,
    /// Bytes from the region's start to the first repetition.
    pub offset: usize,
    /// Bytes per repetition (1 to 65535).
    pub bytes_count: u32,
    /// Bytes skipped between repetitions (`bytes_count + bytes_skip` at most 65535).
    pub bytes_skip: u32,
}

/// A layout over registered regions, for [`SqRing::mkey_configure`].
#[derive(Clone, Copy, Debug)]
pub enum MkeyLayout<'a> {
    /// The ranges one after the other (a KLM list).
    List(&'a [MrRange<'a>]),
    /// The entries' blocks in turn, `repeat_count` times (a repeat block).
    Interleaved {
        /// How many times the entries repeat (at least 1).
        repeat_count: u32,
        /// The entries of one repetition.
        entries: &'a [MrStride<'a>],
    },
}

/// What [`SqRing::mkey_configure`] sets; a field left `None` is left as
/// the key has it.
#[derive(Clone, Copy, Debug, Default)]
pub struct MkeyConf<'a> {
    /// The key's access rights (`mlx5dv_wr_set_mkey_access_flags`).
    pub access: Option<AccessFlags>,
    /// The ranges the key covers (`mlx5dv_wr_set_mkey_layout_list` /
    /// `_interleaved`).
    pub layout: Option<MkeyLayout<'a>>,
}

/// A UMR request refused before anything was written (the argument and
/// why), as [`SqRing::mkey_configure_raw_post`] returns it: a plain value
/// the posting path builds without a call. It converts into the crate's
/// [`Error::BadArgument`] (`?` does it), which the other UMR builders return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmrRefused {
    what: &'static str,
    why: &'static str,
}

impl UmrRefused {
    #[inline(always)]
    const fn new(what: &'static str, why: &'static str) -> UmrRefused {
        UmrRefused { what, why }
    }

    /// The argument refused.
    pub const fn what(&self) -> &'static str {
        self.what
    }

    /// Why, and the usual fix.
    pub const fn why(&self) -> &'static str {
        self.why
    }
}

impl std::fmt::Display for UmrRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&bad(self.what, self.why), f)
    }
}

impl std::error::Error for UmrRefused {}

impl From<UmrRefused> for Error {
    #[cold]
    fn from(r: UmrRefused) -> Error {
        bad(r.what, r.why)
    }
}

#[cold]
#[inline(never)]
fn bad(what: &'static str, why: &'static str) -> Error {
    Error::BadArgument { op: "SqRing::mkey_configure", what, why }
}

/// Checks a range against its region: `offset + extent` within `mr`, the
/// region in the key's protection domain, and registered with local write
/// when the key may write (`writes`).
fn inside<K: UmrKey + ?Sized>(mr: &Mr, key: &K, writes: bool, offset: u64, extent: u128) -> Result<u64> {
    if mr.pd().as_ptr() != key.pd().as_ptr() {
        return Err(bad(
            "layout entry",
            "names a region of another protection domain than the key's; register it in the key's PD",
        ));
    }
    if writes && !mr.access().contains(AccessFlags::LOCAL_WRITE) {
        return Err(bad(
            "layout entry",
            "names a region registered without LOCAL_WRITE, but the key may write (its access has LOCAL_WRITE, \
             REMOTE_WRITE or REMOTE_ATOMIC, or is left as it was); register the region with LOCAL_WRITE or give \
             read-only access",
        ));
    }
    if u128::from(offset) + extent > mr.len() as u128 {
        return Err(bad(
            "layout entry",
            "reaches beyond its region (offset plus the bytes it covers exceed Mr::len); shorten the entry or \
             register a larger region",
        ));
    }
    Ok(mr.addr() + offset)
}

impl SqRing {
    /// Configures `mkey` ([`Mkey`], or a DEVX key: any [`UmrKey`]; a UMR
    /// WQE, `mlx5dv_wr_mkey_configure` with up to two setters):
    /// `conf.access` sets the key's access rights
    /// (`mlx5dv_wr_set_mkey_access_flags`: local write, remote read, write
    /// and atomic), `conf.layout` the ranges it covers (a KLM list, or an
    /// interleaved repeat block). Both given is `mlx5dv_wr_mr_list` or
    /// `mlx5dv_wr_mr_interleaved`. Returns the WQE index; ring the doorbell
    /// with [`SqRing::ring`]. The key holds every region of `layout` until
    /// it is destroyed.
    ///
    /// # Errors
    /// [`Error::BadArgument`] when a range reaches beyond its region, is
    /// empty, or an interleaved entry's counts do not fit 16 bits; when a
    /// region is of another protection domain than the key, or lacks
    /// `LOCAL_WRITE` while the key may write (its `access` has a write
    /// right, or is left as it was); when
    /// `access` has other rights than the four above; when the layout holds
    /// more entries than the key was created for or the QP's inline size
    /// takes (libmlx5's `ENOMEM`). Nothing is written then.
    ///
    /// # Panics
    /// If the ring is not a connected QP's ([`SqTransport::Connected`]), or
    /// is full (checked after the arguments: a refused request returns its
    /// error and writes nothing).
    #[doc(alias = "mlx5dv_wr_mkey_configure")]
    #[doc(alias = "mlx5dv_wr_mr_list")]
    #[doc(alias = "mlx5dv_wr_mr_interleaved")]
    pub fn mkey_configure<K: UmrKey + ?Sized>(
        &mut self,
        flags: CtrlFlags,
        mkey: &mut K,
        conf: MkeyConf<'_>,
    ) -> Result<u16> {
        let MkeyConf { access, layout } = conf;
        let write = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        let writes = access.is_none_or(|a| a.intersects(write));
        let mut klm = Vec::new();
        let mut strides = Vec::new();
        let raw = match layout {
            None => None,
            Some(MkeyLayout::List(ranges)) => {
                for r in ranges {
                    if r.len == 0 {
                        return Err(bad("list entry", "is empty (0 bytes); leave it out"));
                    }
                    let Ok(len) = u32::try_from(r.len) else {
                        return Err(bad(
                            "list entry",
                            "is longer than 4 GiB - 1 (a KLM entry's length is 32 bits); split it into several entries",
                        ));
                    };
                    let addr = inside(r.mr, mkey, writes, r.offset as u64, r.len as u128)?;
                    klm.push(KlmEntry { lkey: r.mr.lkey(), addr, len });
                }
                Some(RawLayout::List(&klm))
            }
            Some(MkeyLayout::Interleaved { repeat_count, entries }) => {
                if repeat_count == 0 {
                    return Err(bad("repeat_count", "is 0; give at least one repetition"));
                }
                for e in entries {
                    if e.bytes_count == 0 {
                        return Err(bad("interleaved entry", "has bytes_count 0; leave it out"));
                    }
                    let stride = u128::from(e.bytes_count) + u128::from(e.bytes_skip);
                    let extent = (u128::from(repeat_count) - 1) * stride + u128::from(e.bytes_count);
                    let addr = inside(e.mr, mkey, writes, e.offset as u64, extent)?;
                    strides.push(StrideEntry {
                        lkey: e.mr.lkey(),
                        addr,
                        bytes_count: e.bytes_count,
                        bytes_skip: e.bytes_skip,
                    });
                }
                Some(RawLayout::Interleaved { repeat_count, entries: &strides })
            }
        };
        // SAFETY: `mkey_configure_raw`'s contract: every range was checked
        // above (`inside`) to lie in its region, which is registered with the
        // lkey written for it, so the key reaches only registered memory;
        // the key holds each region (below, once the WQE is written) for as
        // long as it lives, so none is deregistered or freed while the key
        // may be used; `lkey` and `max_entries` are the key's own.
        let pi = unsafe { self.mkey_configure_raw(flags, mkey.lkey(), mkey.max_entries(), access, raw) }?;
        match layout {
            Some(MkeyLayout::List(ranges)) => ranges.iter().for_each(|r| mkey.hold(r.mr)),
            Some(MkeyLayout::Interleaved { entries, .. }) => entries.iter().for_each(|e| mkey.hold(e.mr)),
            None => {}
        }
        Ok(pi)
    }

    /// [`SqRing::mkey_configure`] by raw key and addresses: the key `lkey`
    /// made with room for `max_entries` entries (`mlx5dv_mkey_init_attr`'s
    /// value after creation, [`Mkey::max_entries`]).
    ///
    /// # Errors
    /// As [`SqRing::mkey_configure`], and when `lkey`'s low byte (the key's
    /// tag) is not 0 (libmlx5's `EOPNOTSUPP` without tag update). Interleaved
    /// counts above 16 bits are refused where libmlx5 cuts them.
    ///
    /// # Safety
    /// Once the doorbell is rung, the key reaches every range of `layout`
    /// with `access`: each must lie in memory registered with its `lkey`,
    /// and stay registered (and, for local use, alive) while the key may be
    /// used, as for [`WqeWriter::data`](crate::mlx5dv::queue::sq::WqeWriter::data). `lkey`
    /// names an indirect key of this QP's protection domain with room for
    /// `max_entries` entries.
    ///
    /// # Panics
    /// As [`SqRing::mkey_configure`].
    #[inline]
    pub unsafe fn mkey_configure_raw(
        &mut self,
        flags: CtrlFlags,
        lkey: u32,
        max_entries: u16,
        access: Option<AccessFlags>,
        layout: Option<RawLayout<'_>>,
    ) -> Result<u16> {
        // SAFETY: forwarded contract.
        unsafe { self.configure_raw(flags, lkey, max_entries, access, layout, |w| w.finish()) }.map_err(Error::from)
    }

    /// [`SqRing::mkey_configure_raw`], then the doorbell for it and any
    /// WQEs finished before without one, at once ([`WqeWriter::post`](crate::mlx5dv::queue::sq::WqeWriter::post),
    /// as `ibv_wr_complete` rings it after `mlx5dv_wr_mkey_configure`):
    /// cheaper than [`SqRing::ring`] after it, which finds the last WQE again.
    ///
    /// # Errors
    /// As [`SqRing::mkey_configure_raw`], as an [`UmrRefused`] (which
    /// converts into [`Error::BadArgument`], the same error, with `?`);
    /// nothing is written or rung then.
    ///
    /// # Safety
    /// As [`SqRing::mkey_configure_raw`].
    ///
    /// # Panics
    /// As [`SqRing::mkey_configure`].
    #[inline]
    pub unsafe fn mkey_configure_raw_post<M: Mmio>(
        &mut self,
        mmio: &mut M,
        flags: CtrlFlags,
        lkey: u32,
        max_entries: u16,
        access: Option<AccessFlags>,
        layout: Option<RawLayout<'_>>,
    ) -> std::result::Result<u16, UmrRefused> {
        // SAFETY: forwarded contract.
        unsafe { self.configure_raw(flags, lkey, max_entries, access, layout, |w| w.post(mmio)) }
    }

    /// The UMR WQE of `mkey_configure_raw`, published by `publish`.
    ///
    /// # Safety
    /// As [`SqRing::mkey_configure_raw`].
    #[inline(always)]
    unsafe fn configure_raw(
        &mut self,
        flags: CtrlFlags,
        lkey: u32,
        max_entries: u16,
        access: Option<AccessFlags>,
        layout: Option<RawLayout<'_>>,
        publish: impl FnOnce(WqeWriter<'_>) -> u16,
    ) -> std::result::Result<u16, UmrRefused> {
        if lkey & 0xff != 0 {
            return Err(UmrRefused::new(
                "the key's tag (lkey & 0xff)",
                "is not 0: keys with tag update are not configured here",
            ));
        }
        let allowed = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        if access.is_some_and(|a| !allowed.contains(a)) {
            return Err(UmrRefused::new(
                "access",
                "has rights other than LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC",
            ));
        }
        // libmlx5: the entries that fit the QP's inline size, and the key's;
        // and those the QP's largest WQE holds after the 128 bytes of
        // control, UMR control and key context, in groups of four (the
        // smaller of the two is the ring's, computed once by `set_limits`).
        // Within it the WQE's size needs no check.
        let inl = u64::from(self.umr_entries());
        let mut mask = MASK_FREE | MASK_MKEY;
        // Translation units (entries, the repeat block, padding to 64 bytes).
        let mut xlat = 0usize;
        let mut len = 0u64;
        if let Some(l) = layout {
            let (n, max) = match l {
                RawLayout::List(e) => (e.len(), inl),
                RawLayout::Interleaved { entries, .. } => (entries.len(), inl.wrapping_sub(1)),
            };
            if n as u64 > max.min(u64::from(max_entries)) {
                return Err(UmrRefused::new(
                    "layout",
                    "holds more entries than the key was created for (Mkey::new_indirect's max_entries) or than the \
                     QP's max_inline_data takes ((max_inline_data + 4) / 16 for a list, one less for an interleaved \
                     layout) or its largest WQE holds ((max_wqe_bytes - 128) / 16, in groups of four)",
                ));
            }
            xlat = match l {
                // The length is summed while the entries are written.
                RawLayout::List(e) => e.len(),
                RawLayout::Interleaved { repeat_count, entries } => {
                    for e in entries {
                        if e.bytes_count > 0xffff || u64::from(e.bytes_count) + u64::from(e.bytes_skip) > 0xffff {
                            return Err(UmrRefused::new(
                                "interleaved entry",
                                "has bytes_count or bytes_count + bytes_skip above 65535 (16-bit WQE fields)",
                            ));
                        }
                    }
                    let block: u64 = entries.iter().map(|e| u64::from(e.bytes_count)).sum();
                    len = block.wrapping_mul(u64::from(repeat_count));
                    entries.len() + 1
                }
            }
            .next_multiple_of(4);
            mask |= MASK_LEN;
        }
        let mut acc = 0u8;
        if let Some(a) = access {
            mask |= MASK_ACCESS;
            acc = access_bits(a);
        }
        // The UMR control segment (48 bytes): flags at 0, the translation
        // octowords at 4 (big endian), the mkey mask at 8.
        let oct = (xlat as u16).to_be_bytes();
        let ctrl0 = [join([FLAG_INLINE, 0, 0, 0], [oct[0], oct[1], 0, 0]), u64::from_ne_bytes(mask.to_be_bytes())];
        // The mkey context (64 bytes): access at 2, the key at 4, the length at 24.
        let ctx0 = [join([0, 0, acc, 0], (0xffff_ff00 | (lkey & 0xff)).to_be_bytes()), 0];
        let header = 16 + 48 + 64 + xlat * 16;
        // SAFETY: `typed_wqe`'s contract: what follows is the layout the
        // device defines for UMR on a connected QP (the UMR control segment,
        // the mkey context, then the translation entries, all inline), so no
        // 16-byte unit is read as a data segment; the memory the entries
        // reach is this function's own contract, passed on to its caller.
        let w = unsafe {
            self.typed_wqe(SqTransport::Connected, "mkey_configure", header, WqeOpcode::UMR, 0, flags, lkey.to_be())
        }
        .units_with(3, |i| if i == 0 { ctrl0 } else { [0; 2] })
        .units_with(4, |i| if i == 0 { ctx0 } else { [0; 2] })
        .inline_wqe();
        let mut w = match layout {
            None => w,
            Some(RawLayout::List(entries)) => w.units_with(xlat, |i| match entries.get(i) {
                Some(e) => {
                    len += u64::from(e.len);
                    entry(e.len.to_be_bytes(), e.lkey, e.addr)
                }
                None => [0; 2],
            }),
            Some(RawLayout::Interleaved { repeat_count, entries }) => {
                let block: u64 = entries.iter().map(|e| u64::from(e.bytes_count)).sum();
                // The repeat block: its bytes, the op, the count, the entries (at 14).
                let n = (entries.len() as u16).to_be_bytes();
                let rb = [
                    join((block as u32).to_be_bytes(), REPEAT_OP.to_be_bytes()),
                    join(repeat_count.to_be_bytes(), [0, 0, n[0], n[1]]),
                ];
                w.units_with(xlat, |i| match i.checked_sub(1) {
                    None => rb,
                    Some(k) => match entries.get(k) {
                        Some(e) => {
                            let stride = ((e.bytes_count + e.bytes_skip) as u16).to_be_bytes();
                            let count = (e.bytes_count as u16).to_be_bytes();
                            entry([stride[0], stride[1], count[0], count[1]], e.lkey, e.addr)
                        }
                        None => [0; 2],
                    },
                })
            }
        };
        // The mkey context's length at 24 (bytes 88 to 96 of the WQE: the
        // context starts at byte 64), its unit written (as 0) above.
        // SAFETY: bytes 80..96 of the WQE, written above (the context).
        unsafe { w.store_word_at(88, u64::from_ne_bytes(len.to_be_bytes())) };
        // The entries were counted against what the WQE's size allows.
        let pi = publish(w.size_checked());
        self.set_small_fence();
        Ok(pi)
    }

    /// Invalidates the key `rkey` locally (a UMR WQE, `ibv_wr_local_inv`):
    /// the key reaches nothing afterwards. Returns the WQE index.
    ///
    /// Invalidation only takes access away, so it is safe for any key; an
    /// [`Mkey`] keeps holding its regions until it is destroyed.
    ///
    /// # Panics
    /// If the ring is not a connected QP's ([`SqTransport::Connected`]), or
    /// is full.
    #[doc(alias = "ibv_wr_local_inv")]
    pub fn local_inv(&mut self, flags: CtrlFlags, rkey: u32) -> u16 {
        // The UMR control segment: flags, and the mkey mask at 8.
        let ctrl0 = [
            join([FLAG_TRANSLATION_OFFSET | FLAG_INLINE | FLAG_CHECK_QPN, 0, 0, 0], [0; 4]),
            u64::from_ne_bytes((MASK_FREE | MASK_MKEY | MASK_QPN).to_be_bytes()),
        ];
        // The mkey context: `free` at 0, the key's tag 0 at 4.
        let ctx0 = [join([CONTEXT_FREE, 0, 0, 0], 0xffff_ff00u32.to_be_bytes()), 0];
        // SAFETY: `typed_wqe`'s contract: the UMR layout that frees a key on
        // a connected QP (the UMR control segment and the mkey context with
        // `free` set, no translation entries), so no unit is read as a data
        // segment and the WQE reaches no memory.
        let pi =
            unsafe { self.typed_wqe(SqTransport::Connected, "local_inv", 128, WqeOpcode::UMR, 0, flags, rkey.to_be()) }
                .units_with(3, |i| if i == 0 { ctrl0 } else { [0; 2] })
                .units_with(4, |i| if i == 0 { ctx0 } else { [0; 2] })
                .finish();
        self.set_small_fence();
        pi
    }
}

/// A 16-byte translation entry as two words in memory order: `head` (KLM
/// byte count, or stride and byte count), the key, the address.
#[inline(always)]
fn entry(head: [u8; 4], lkey: u32, addr: u64) -> [u64; 2] {
    [join(head, lkey.to_be_bytes()), u64::from_ne_bytes(addr.to_be_bytes())]
}

/// The word whose memory bytes are `a` then `b`.
#[inline(always)]
fn join(a: [u8; 4], b: [u8; 4]) -> u64 {
    let mut w = [0u8; 8];
    w[..4].copy_from_slice(&a);
    w[4..].copy_from_slice(&b);
    u64::from_ne_bytes(w)
}

/// The mkey context's access bits (`get_umr_mr_flags`).
fn access_bits(a: AccessFlags) -> u8 {
    let mut b = 0;
    if a.contains(AccessFlags::REMOTE_ATOMIC) {
        b |= 1 << 6;
    }
    if a.contains(AccessFlags::REMOTE_WRITE) {
        b |= 1 << 5;
    }
    if a.contains(AccessFlags::REMOTE_READ) {
        b |= 1 << 4;
    }
    if a.contains(AccessFlags::LOCAL_WRITE) {
        b |= 1 << 3;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5dv::queue::test_ring::host_ring as ring;

    /// Refusals write nothing and leave the fence state alone.
    #[test]
    fn refusals_write_nothing() {
        let mut r = ring();
        let five = [KlmEntry { lkey: 1, addr: 0, len: 8 }; 5];
        let wide = [StrideEntry { lkey: 1, addr: 0, bytes_count: 0x1_0000, bytes_skip: 0 }];
        let skip = [StrideEntry { lkey: 1, addr: 0, bytes_count: 0x8000, bytes_skip: 0x8000 }];
        let cases: [(u32, Option<AccessFlags>, Option<RawLayout<'_>>); 5] = [
            // (60 + 4) / 16 = 4 list entries fit the QP's inline size.
            (0x100, None, Some(RawLayout::List(&five))),
            (0x100, None, Some(RawLayout::Interleaved { repeat_count: 1, entries: &wide })),
            (0x100, None, Some(RawLayout::Interleaved { repeat_count: 1, entries: &skip })),
            (0x101, None, None),
            (0x100, Some(AccessFlags::MW_BIND), None),
        ];
        for (key, access, layout) in cases {
            // SAFETY: test memory; nothing is written on refusal.
            let e = unsafe { r.sq.mkey_configure_raw(CtrlFlags::empty(), key, 8, access, layout) };
            assert!(matches!(e, Err(Error::BadArgument { .. })), "{e:?}");
            assert_eq!(r.sq.cur_post(), 0);
            assert!(!r.sq.pending_small_fence());
        }
    }

    /// A UMR WQE of three blocks on a ring with two free panics before its
    /// third block (the translation entries, wrapping onto an unretired
    /// WQE) is written.
    #[test]
    fn umr_past_the_free_blocks_panics_before_writing_them() {
        let mut r = ring();
        for _ in 0..14 {
            r.sq.nop(CtrlFlags::empty()).finish();
        }
        let four = [KlmEntry { lkey: 1, addr: 0, len: 8 }; 4];
        let before = r.buf[..8].to_vec();
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: test memory no device reads.
            unsafe { r.sq.mkey_configure_raw(CtrlFlags::empty(), 0x100, 4, None, Some(RawLayout::List(&four))) }
        }));
        let msg = e.expect_err("a full ring").downcast::<String>().map(|s| *s).unwrap_or_default();
        assert!(msg.contains("send queue full"), "{msg}");
        assert_eq!(r.buf[..8], before[..], "block 0 (unretired) untouched");
        assert_eq!(r.sq.cur_post(), 14);
    }

    /// The UMR builders' family check, folded into the full check.
    #[test]
    #[should_panic(expected = "mkey_configure")]
    fn mkey_configure_on_a_datagram_ring_panics() {
        let mut r = ring();
        // SAFETY: test memory no device reads.
        unsafe { r.sq.set_transport(SqTransport::Datagram) };
        // SAFETY: as above.
        let _ = unsafe { r.sq.mkey_configure_raw(CtrlFlags::empty(), 0x100, 4, None, None) };
    }

    #[test]
    #[should_panic(expected = "local_inv")]
    fn local_inv_on_a_dc_initiator_ring_panics() {
        let mut r = ring();
        // SAFETY: test memory no device reads.
        unsafe { r.sq.set_transport(SqTransport::DcInitiator) };
        r.sq.local_inv(CtrlFlags::empty(), 7);
    }

    /// The WQE after a UMR WQE takes the small fence unless it asks for the
    /// strong one; a UMR's own size is 8 DS plus its entries.
    #[test]
    fn small_fence_after_umr() {
        let mut r = ring();
        r.sq.local_inv(CtrlFlags::empty(), 7);
        assert_eq!(r.sq.cur_post(), 2, "local_inv: control, UMR control and mkey context: 8 DS");
        assert!(r.sq.pending_small_fence());
        let four = [KlmEntry { lkey: 1, addr: 0, len: 8 }; 4];
        // SAFETY: test memory no device reads.
        unsafe { r.sq.mkey_configure_raw(CtrlFlags::FENCE, 0x100, 4, None, Some(RawLayout::List(&four))) }.unwrap();
        assert_eq!(r.sq.cur_post(), 5, "8 DS and four 16-byte entries: 3 blocks");
        r.sq.nop(CtrlFlags::empty()).finish();
        assert!(!r.sq.pending_small_fence());
    }
}
