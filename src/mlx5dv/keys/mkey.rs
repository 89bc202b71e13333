//! Indirect memory keys (`mlx5dv_create_mkey`): one key over a layout of
//! ranges in other regions, configured through the send queue (UMR).
//!
//! This module creates and destroys the key. The key keeps its protection
//! domain and every region a layout was posted over, so the memory it may
//! reach stays registered until the key is destroyed. Signature, crypto and
//! tag-update keys are not offered.
//!
//! [`UmrKey`] is what the typed UMR builders
//! ([`SqRing::mkey_configure`](crate::mlx5dv::sq::SqRing::mkey_configure))
//! and the remote-address helper take: an [`Mkey`], or a key made through
//! DEVX ([`DevxMkey`](crate::mlx5dv::devx::DevxMkey)).

use std::fmt;
use std::ptr::NonNull;

use crate::bindings as ffi;
use crate::prim::{Error, Mr, Pd, RemoteAddr, Result};

/// A memory key the typed UMR builders configure and remote addresses are
/// taken under: [`Mkey`] (libmlx5's `mlx5dv_create_mkey`) or
/// [`DevxMkey`](crate::mlx5dv::devx::DevxMkey) (`CREATE_MKEY` through
/// DEVX). Sealed: the builders trust what it answers.
///
/// Both keep their protection domain and every region a layout was posted
/// over ([`UmrKey::hold`]) until the key is destroyed, so the memory a
/// configured key reaches stays registered while the key lives. The key's
/// tag (`lkey & 0xff`) is 0 for both.
pub trait UmrKey: sealed::Sealed {
    /// The local key (for scatter/gather entries, and the key a UMR WQE names).
    fn lkey(&self) -> u32;

    /// The remote key (for RDMA targets).
    fn rkey(&self) -> u32;

    /// The most ranges a layout of this key may hold: 0 for a key no UMR
    /// may lay out (a DEVX key that is not an indirect KLM key with
    /// `umr_en`), so every layout is refused for it before anything is written.
    fn max_entries(&self) -> u16;

    /// The protection domain of the key (a layout's regions must be of it).
    fn pd(&self) -> &Pd;

    /// Keeps `mr` registered for as long as the key lives (the builders
    /// call it once a layout over `mr` is written; a region held already is
    /// held once).
    fn hold(&mut self, mr: &Mr);

    /// The remote address `offset` bytes into what the key covers, for RDMA
    /// targets: an indirect key is zero-based (its first byte is address 0
    /// under [`UmrKey::rkey`]), a direct DEVX key starts at its `start_addr`.
    fn addr_at(&self, offset: usize) -> RemoteAddr;
}

pub(crate) mod sealed {
    /// Only this crate's keys are [`super::UmrKey`]s.
    pub trait Sealed {}
}

/// Adds `mr` to the regions a key holds, once: what [`UmrKey::hold`] does
/// for every key (`Mkey`'s list, a DEVX key's object).
pub(crate) fn hold_once(regions: &mut Vec<Mr>, mr: &Mr) {
    if !regions.iter().any(|r| r.as_ptr() == mr.as_ptr()) {
        regions.push(mr.clone());
    }
}

impl sealed::Sealed for Mkey {}

impl UmrKey for Mkey {
    fn lkey(&self) -> u32 {
        Mkey::lkey(self)
    }
    fn rkey(&self) -> u32 {
        Mkey::rkey(self)
    }
    fn max_entries(&self) -> u16 {
        Mkey::max_entries(self)
    }
    fn pd(&self) -> &Pd {
        Mkey::pd(self)
    }
    fn hold(&mut self, mr: &Mr) {
        Mkey::hold(self, mr)
    }
    fn addr_at(&self, offset: usize) -> RemoteAddr {
        Mkey::addr_at(self, offset)
    }
}

/// The feature an `Unsupported` from [`Mkey::new_indirect`] names
/// ([`MKEY_NOT_MLX5`](crate::prim::unsupported::MKEY_NOT_MLX5)'s).
pub const INDIRECT_FEATURE: &str = crate::prim::unsupported::MKEY_NOT_MLX5.feature;

/// An indirect memory key (`struct mlx5dv_mkey`). Destroyed on drop.
///
/// # References
/// `mlx5dv_create_mkey(3)`
pub struct Mkey {
    raw: NonNull<ffi::mlx5dv_mkey>,
    max_entries: u16,
    /// Regions a layout of this key was posted over: kept registered until
    /// the key is destroyed, as the key may reach into them.
    regions: Vec<Mr>,
    // Drops after the key (fields drop in order, after `Drop::drop`).
    pd: Pd,
}

// SAFETY: the key is a plain pair of numbers behind a pointer that only
// `mlx5dv_destroy_mkey` (in `Drop`, with `&mut self`) uses.
unsafe impl Send for Mkey {}
// SAFETY: `&Mkey` only reads the two keys, which never change.
unsafe impl Sync for Mkey {}

impl fmt::Debug for Mkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mkey")
            .field("lkey", &self.lkey())
            .field("rkey", &self.rkey())
            .field("max_entries", &self.max_entries)
            .finish()
    }
}

impl Mkey {
    /// Creates an indirect key in `pd` whose layouts hold up to
    /// `max_entries` ranges. [`Error::Unsupported`] off mlx5, decided
    /// before any libmlx5 call.
    ///
    /// # Panics
    /// If `max_entries` is 0 (a key with no room for a range).
    pub fn new_indirect(pd: &Pd, max_entries: u16) -> Result<Mkey> {
        assert!(max_entries > 0, "Mkey::new_indirect: max_entries is 0; give room for at least one range");
        if !crate::mlx5dv::is_supported(pd.context()) {
            return Err(Error::unsupported(
                "mlx5dv_create_mkey",
                &crate::prim::unsupported::MKEY_NOT_MLX5,
                pd.context().name(),
                "false",
            ));
        }
        let mut attr = ffi::mlx5dv_mkey_init_attr {
            pd: pd.as_ptr(),
            create_flags: ffi::mlx5dv_mkey_init_attr_flags::MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT.0,
            max_entries,
        };
        // SAFETY: `attr` names a live PD of an mlx5 device.
        let raw = unsafe { ffi::mlx5dv_create_mkey(&mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("mlx5dv_create_mkey"))?;
        // libmlx5 rounds the room up to a multiple of 4 and writes it back.
        Ok(Mkey { raw, max_entries: attr.max_entries, regions: Vec::new(), pd: pd.clone() })
    }

    /// The local key (for scatter/gather entries).
    pub fn lkey(&self) -> u32 {
        // SAFETY: live key; the field is written once, at creation.
        unsafe { (*self.raw.as_ptr()).lkey }
    }

    /// The remote key (for RDMA targets).
    pub fn rkey(&self) -> u32 {
        // SAFETY: as in `lkey`.
        unsafe { (*self.raw.as_ptr()).rkey }
    }

    /// The remote address `offset` bytes into the range the key's layout
    /// covers, for RDMA targets: the key is zero-based (created with start
    /// address 0, which configuring it does not change), so its first byte
    /// is address 0 under [`Mkey::rkey`].
    ///
    /// The offset is a `usize`, as every offset of the memory APIs
    /// ([`RangeError`](crate::prim::RangeError) says why).
    pub fn addr_at(&self, offset: usize) -> RemoteAddr {
        RemoteAddr { addr: offset as u64, rkey: self.rkey() }
    }

    /// Old form of [`Mkey::addr_at`], with a `u64` offset.
    #[deprecated(
        note = "offsets and lengths are usize across the memory APIs: use `key.addr_at(offset)`; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn at(&self, offset: u64) -> RemoteAddr {
        RemoteAddr { addr: offset, rkey: self.rkey() }
    }

    /// The most ranges a layout of this key may hold: the `max_entries`
    /// asked for, rounded up to a multiple of 4 as libmlx5 sizes the key.
    pub fn max_entries(&self) -> u16 {
        self.max_entries
    }

    /// The protection domain of the key.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// How many regions the key keeps registered.
    pub fn held_regions(&self) -> usize {
        self.regions.len()
    }

    /// Keeps `mr` registered for as long as the key lives (called when a
    /// layout over `mr` is posted; a region held already is held once).
    pub fn hold(&mut self, mr: &Mr) {
        hold_once(&mut self.regions, mr)
    }

    /// The raw key.
    pub fn as_ptr(&self) -> *mut ffi::mlx5dv_mkey {
        self.raw.as_ptr()
    }
}

impl Drop for Mkey {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_create_mkey`, destroyed only here.
        let rc = unsafe { ffi::mlx5dv_destroy_mkey(self.raw.as_ptr()) };
        if rc != 0 {
            // The key may still reach its regions: keep them registered.
            std::mem::forget(std::mem::take(&mut self.regions));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ptr::NonNull;

    use super::*;
    use crate::mlx5dv::keys::umr::{MkeyConf, MkeyLayout, MrRange};
    use crate::mlx5dv::queue::seg::CtrlFlags;
    use crate::prim::{AccessFlags, Context};

    /// A key of this crate for host tests, holding as every key does
    /// (`hold_once`), over a list of its own.
    struct HostKey {
        pd: Pd,
        regions: Vec<Mr>,
    }

    impl sealed::Sealed for HostKey {}

    impl UmrKey for HostKey {
        fn lkey(&self) -> u32 {
            0x4200
        }
        fn rkey(&self) -> u32 {
            0x4200
        }
        fn max_entries(&self) -> u16 {
            4
        }
        fn pd(&self) -> &Pd {
            &self.pd
        }
        fn hold(&mut self, mr: &Mr) {
            hold_once(&mut self.regions, mr)
        }
        fn addr_at(&self, offset: usize) -> RemoteAddr {
            RemoteAddr { addr: offset as u64, rkey: self.rkey() }
        }
    }

    fn host_pd() -> &'static Pd {
        let raw: &'static mut ffi::ibv_context = Box::leak(Box::default());
        // SAFETY: the host context lives for the test run; it is never closed.
        let ctx: &'static Context = Box::leak(Box::new(unsafe { Context::for_host_tests(NonNull::from(raw)) }));
        Pd::for_host_tests(ctx)
    }

    /// A region over host memory of `len` bytes; the returned one is leaked
    /// (never deregistered through libibverbs), clones of it drop freely.
    fn host_mr(pd: &Pd, lkey: u32, len: usize) -> &'static Mr {
        let raw: &'static mut ffi::ibv_mr = Box::leak(Box::default());
        raw.addr = Box::leak(vec![0u8; len].into_boxed_slice()).as_mut_ptr().cast();
        raw.length = len;
        raw.lkey = lkey;
        // SAFETY: the host region is never deregistered (leaked below).
        let mr = unsafe { Mr::from_registered(NonNull::from(raw), pd, AccessFlags::LOCAL_WRITE, None) };
        Box::leak(Box::new(mr))
    }

    use crate::mlx5dv::queue::test_ring::host_ring as ring;

    /// The typed builder makes any `UmrKey` hold the regions of a layout
    /// it wrote, each once however often it is named or configured, and
    /// nothing of a layout it refused (past a region's end, a region of
    /// another PD): what `Mkey` and `DevxMkey` rely on to keep their
    /// memory registered.
    #[test]
    fn a_key_holds_the_regions_of_the_layouts_written_and_only_those() {
        let pd = host_pd();
        let (a, b) = (host_mr(pd, 0x100, 4096), host_mr(pd, 0x200, 4096));
        let other = host_mr(host_pd(), 0x300, 4096);
        let mut key = HostKey { pd: pd.clone(), regions: Vec::new() };
        let mut r = ring();
        let conf = |ranges: &'static [MrRange<'static>]| MkeyConf {
            access: Some(AccessFlags::REMOTE_READ),
            layout: Some(MkeyLayout::List(ranges)),
        };
        let ab: &'static [MrRange<'static>] = Box::leak(Box::new([
            MrRange { mr: a, offset: 0, len: 64 },
            MrRange { mr: b, offset: 8, len: 64 },
            MrRange { mr: a, offset: 128, len: 64 },
        ]));
        r.sq.mkey_configure(CtrlFlags::empty(), &mut key, conf(ab)).unwrap();
        let held: Vec<u32> = key.regions.iter().map(Mr::lkey).collect();
        assert_eq!(held, [0x100, 0x200], "each region of the layout, once");
        r.sq.mkey_configure(CtrlFlags::empty(), &mut key, conf(ab)).unwrap();
        assert_eq!(key.regions.len(), 2, "configured again: still once each");
        let past: &'static [MrRange<'static>] = Box::leak(Box::new([MrRange { mr: other, offset: 0, len: 8 }]));
        let pi = r.sq.cur_post();
        assert!(matches!(
            r.sq.mkey_configure(CtrlFlags::empty(), &mut key, conf(past)),
            Err(Error::BadArgument { .. })
        ));
        let end: &'static [MrRange<'static>] = Box::leak(Box::new([MrRange { mr: b, offset: 4090, len: 7 }]));
        assert!(matches!(r.sq.mkey_configure(CtrlFlags::empty(), &mut key, conf(end)), Err(Error::BadArgument { .. })));
        assert_eq!((r.sq.cur_post(), key.regions.len()), (pi, 2), "a refused layout writes and holds nothing");
        assert_eq!(key.addr_at(24), RemoteAddr { addr: 24, rkey: 0x4200 });
    }
}
