//! What rdma-core 54 to 59 added to memory registration: DMA handles with
//! TPH hints ([`DmaHandle`], `ibv_alloc_dmah`), registration through
//! `ibv_reg_mr_ex` ([`Mr::register_ex`]), and mlx5 data-direct
//! ([`data_direct_sysfs_path`](super::mlx5::data_direct_sysfs_path), a dma-buf region with
//! `MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT`).
//!
//! Every function here is newer than the rdma-core 44 the bindings are
//! generated from and is looked up at run time (`bindings::newer::v59`):
//! when the loaded rdma-core lacks it the call is [`Error::Unsupported`]
//! naming the function and the release that added it, decided before
//! anything else; when the provider lacks it (rdma-core 59 implements DMA
//! handles and `ibv_reg_mr_ex` in mlx5 only) it is the provider's
//! `EOPNOTSUPP`, also [`Error::Unsupported`].

use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::mr::{Mr, RangeError, RangeErrorKind};
use super::pd::Pd;
use super::unsupported as U;
use super::values::AccessFlags;
use crate::bindings as ffi;
use crate::bindings::newer::v59 as newer;

/// The memory a TPH steering tag targets (`enum ibv_tph_mem_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "ibv_tph_mem_type")]
pub enum TphMemType {
    /// `IBV_TPH_MEM_TYPE_VM`: volatile memory.
    Volatile,
    /// `IBV_TPH_MEM_TYPE_PM`: persistent memory.
    Persistent,
}

impl TphMemType {
    /// The C value.
    pub const fn to_raw(self) -> ffi::ibv_tph_mem_type {
        match self {
            TphMemType::Volatile => ffi::ibv_tph_mem_type::IBV_TPH_MEM_TYPE_VM,
            TphMemType::Persistent => ffi::ibv_tph_mem_type::IBV_TPH_MEM_TYPE_PM,
        }
    }
}

/// A DMA handle (`struct ibv_dmah`): DMA attributes (PCIe TLP processing
/// hints: the CPU to steer to, the processing hint, the memory type) that a
/// region registered with it ([`Mr::register_ex`]) carries. Cloning shares
/// it; freed when the last clone and the last region using it are gone.
///
/// # References
/// `ibv_alloc_dmah(3)`
#[derive(Clone)]
pub struct DmaHandle(Arc<Owned<DmahInner>>);

struct DmahInner {
    ctx: Context,
}

// SAFETY: `ibv_dealloc_dmah` releases what `ibv_alloc_dmah` made, once, when
// the last clone (and every region holding one) is gone; the handle is
// immutable once allocated.
unsafe impl Destroy for DmahInner {
    type Raw = ffi::ibv_dmah;
    const VERB: &'static str = "ibv_dealloc_dmah";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_dmah>) -> i32 {
        // SAFETY: the caller's contract; the symbol was present at allocation.
        unsafe { ffi::newer::v59::ibv_dealloc_dmah(raw.as_ptr()) }
    }
}

impl fmt::Debug for DmaHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaHandle").field("device", &self.0.ctx.name()).finish()
    }
}

impl DmaHandle {
    /// Allocates a DMA handle on `ctx` with the attributes given (each
    /// `None` is left out of `comp_mask`): `cpu_id` the CPU whose cache the
    /// device's writes are steered to, `ph` the TPH processing hint,
    /// `mem_type` the target memory.
    ///
    /// [`Error::Unsupported`] naming rdma-core 58 when the loaded libibverbs
    /// has no `ibv_alloc_dmah`; the provider's or kernel's `EOPNOTSUPP`
    /// (every provider but mlx5 in rdma-core 59) as [`Error::Unsupported`]
    /// with feature `DMA handles`.
    #[doc(alias = "ibv_alloc_dmah")]
    pub fn alloc(
        ctx: &Context,
        cpu_id: Option<u32>,
        ph: Option<u8>,
        mem_type: Option<TphMemType>,
    ) -> Result<DmaHandle> {
        for sym in [&newer::IBV_ALLOC_DMAH, &newer::IBV_DEALLOC_DMAH] {
            if !sym.present() {
                return Err(Error::unsupported("ibv_alloc_dmah", &U::DMAH_SYMBOL, ctx.name(), absent(sym)));
            }
        }
        use ffi::ibv_dmah_init_attr_mask as M;
        let mut attr = ffi::ibv_dmah_init_attr::default();
        if let Some(cpu) = cpu_id {
            attr.comp_mask |= M::IBV_DMAH_INIT_ATTR_MASK_CPU_ID.0;
            attr.cpu_id = cpu;
        }
        if let Some(ph) = ph {
            attr.comp_mask |= M::IBV_DMAH_INIT_ATTR_MASK_PH.0;
            attr.ph = ph;
        }
        if let Some(t) = mem_type {
            attr.comp_mask |= M::IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE.0;
            attr.tph_mem_type = t.to_raw().0 as u8;
        }
        // SAFETY: a live context; `attr` is valid for the call.
        let raw = unsafe { newer::ibv_alloc_dmah(ctx.as_ptr(), &mut attr) };
        let raw =
            NonNull::new(raw).ok_or_else(|| Error::last("ibv_alloc_dmah").lacking(&U::DMAH_PROVIDER, ctx.name()))?;
        // SAFETY: just made by its create verb, owned by nothing else.
        Ok(DmaHandle(Arc::new(unsafe { Owned::new(raw, DmahInner { ctx: ctx.clone() }) })))
    }

    /// The raw handle.
    pub fn as_ptr(&self) -> *mut ffi::ibv_dmah {
        self.0.as_ptr()
    }

    /// The context it was allocated on.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }
}

/// What [`Mr::register_ex`] registers.
#[derive(Clone, Copy, Debug)]
pub enum MrMemory<'a> {
    /// Process memory at this address (`IBV_REG_MR_MASK_ADDR`).
    Addr(*mut u8),
    /// A dma-buf, from `offset` into it (`IBV_REG_MR_MASK_FD`,
    /// `IBV_REG_MR_MASK_FD_OFFSET`).
    DmaBuf {
        /// The dma-buf; the kernel takes its own reference.
        fd: BorrowedFd<'a>,
        /// Where the region starts in the buffer.
        offset: u64,
    },
}

/// The options of [`Mr::register_ex`]; `Default` asks for none.
#[derive(Clone, Copy, Debug, Default)]
pub struct MrExOptions<'a> {
    /// The region's device address (`IBV_REG_MR_MASK_IOVA`); without it,
    /// the address (process memory) or the offset (dma-buf).
    pub iova: Option<u64>,
    /// A DMA handle of the PD's context (`IBV_REG_MR_MASK_DMAH`); the region
    /// keeps it alive.
    pub dmah: Option<&'a DmaHandle>,
    /// mlx5 data-direct: a dma-buf region reached through the data-direct
    /// engine bonded with the device (`mlx5dv_reg_dmabuf_mr` with
    /// `MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT`; see
    /// [`data_direct_sysfs_path`](super::mlx5::data_direct_sysfs_path)).
    /// Only with [`MrMemory::DmaBuf`] and no `dmah`.
    pub data_direct: bool,
}

impl Mr {
    /// Registers `len` bytes of `mem` with `access` through `ibv_reg_mr_ex`
    /// (the one registration verb that takes a [`DmaHandle`]), or, with
    /// [`MrExOptions::data_direct`], through `mlx5dv_reg_dmabuf_mr` with
    /// data-direct access.
    ///
    /// [`Error::Unsupported`] naming the function and the rdma-core release
    /// that added it (58 for `ibv_reg_mr_ex`, 54 for `mlx5dv_reg_dmabuf_mr`)
    /// when the loaded rdma-core lacks it; data-direct off mlx5 names the
    /// device; the provider's `EOPNOTSUPP` (every provider but mlx5 in
    /// rdma-core 59 for `ibv_reg_mr_ex`) is [`Error::Unsupported`] too.
    ///
    /// [`Error::Range`] (a [`RangeError`] of kind
    /// [`RangeErrorKind::Empty`] or [`RangeErrorKind::PastEnd`], the crate's
    /// `usize` range convention) when `len` is 0 or the range's end, from
    /// the address, the dma-buf offset or the `iova`, passes 2^64; decided
    /// before any call.
    ///
    /// # Panics
    /// When `data_direct` is asked for process memory or with a `dmah`, or
    /// when `dmah` belongs to another context than `pd`.
    ///
    /// # Safety
    /// With [`MrMemory::Addr`], as [`Mr::register`]: `addr..addr+len` is
    /// memory of this process that stays allocated while the region exists.
    /// A dma-buf's memory belongs to its exporter (see
    /// [`Mr::register_dmabuf`]), which needs nothing more of the caller.
    #[doc(alias = "ibv_reg_mr_ex")]
    #[doc(alias = "mlx5dv_reg_dmabuf_mr")]
    pub unsafe fn register_ex(
        pd: &Pd,
        mem: MrMemory<'_>,
        len: usize,
        access: AccessFlags,
        opts: MrExOptions<'_>,
    ) -> Result<Mr> {
        check_range(mem, len, opts.iova).map_err(Error::Range)?;
        if let Some(d) = opts.dmah {
            assert!(
                d.context().as_ptr() == pd.context().as_ptr(),
                "Mr::register_ex: the DMA handle belongs to another context than the PD"
            );
        }
        let flags = access;
        let access = i32::try_from(access.bits()).expect("access flags are a 32-bit mask");
        if opts.data_direct {
            let MrMemory::DmaBuf { fd, offset } = mem else {
                panic!("Mr::register_ex: data-direct registers a dma-buf (MrMemory::DmaBuf), not process memory");
            };
            assert!(
                opts.dmah.is_none(),
                "Mr::register_ex: data-direct takes no DMA handle (mlx5dv_reg_dmabuf_mr has no such argument)"
            );
            let sym = &newer::MLX5DV_REG_DMABUF_MR;
            if !sym.present() {
                let device = pd.context().name();
                return Err(Error::unsupported(
                    "mlx5dv_reg_dmabuf_mr",
                    &U::DATA_DIRECT_REG_SYMBOL,
                    device,
                    absent(sym),
                ));
            }
            require_mlx5(pd.context(), "mlx5dv_reg_dmabuf_mr")?;
            let iova = opts.iova.unwrap_or(offset);
            // SAFETY: a live PD of an mlx5 context; `fd` is open for the call
            // (the kernel takes its own reference to the dma-buf).
            let mr = unsafe {
                newer::mlx5dv_reg_dmabuf_mr(
                    pd.as_ptr(),
                    offset,
                    len,
                    iova,
                    fd.as_raw_fd(),
                    access,
                    ffi::MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT,
                )
            };
            let mr = NonNull::new(mr)
                .ok_or_else(|| Error::last("mlx5dv_reg_dmabuf_mr").lacking(&U::DATA_DIRECT, pd.context().name()))?;
            // SAFETY: just made by its create verb, owned by nothing else.
            return Ok(unsafe { Mr::from_registered(mr, pd, flags, None) });
        }
        if !newer::IBV_REG_MR_EX.present() {
            let device = pd.context().name();
            return Err(Error::unsupported(
                "ibv_reg_mr_ex",
                &U::REG_MR_EX_SYMBOL,
                device,
                absent(&newer::IBV_REG_MR_EX),
            ));
        }
        use ffi::ibv_mr_init_attr_mask as M;
        let mut attr = ffi::ibv_mr_init_attr { length: len, access, ..Default::default() };
        let mut mask = 0;
        match mem {
            MrMemory::Addr(a) => {
                mask |= M::IBV_REG_MR_MASK_ADDR.0;
                attr.addr = a.cast();
            }
            MrMemory::DmaBuf { fd, offset } => {
                mask |= M::IBV_REG_MR_MASK_FD.0 | M::IBV_REG_MR_MASK_FD_OFFSET.0;
                attr.fd = fd.as_raw_fd();
                attr.fd_offset = offset;
            }
        }
        if let Some(iova) = opts.iova {
            mask |= M::IBV_REG_MR_MASK_IOVA.0;
            attr.iova = iova;
        }
        if let Some(d) = opts.dmah {
            mask |= M::IBV_REG_MR_MASK_DMAH.0;
            attr.dmah = d.as_ptr();
        }
        attr.comp_mask = u64::from(mask);
        // SAFETY: a live PD; `attr` is valid for the call and names the
        // caller's memory (its contract) or a dma-buf open for the call;
        // a handle of the same context.
        let mr = unsafe { newer::ibv_reg_mr_ex(pd.as_ptr(), &mut attr) };
        let mr = NonNull::new(mr)
            .ok_or_else(|| Error::last("ibv_reg_mr_ex").lacking(&U::REG_MR_EX_PROVIDER, pd.context().name()))?;
        let backing: Option<Box<dyn Send + Sync>> = opts.dmah.map(|d| Box::new(d.clone()) as Box<dyn Send + Sync>);
        // SAFETY: just made by its create verb, owned by nothing else.
        Ok(unsafe { Mr::from_registered(mr, pd, flags, backing) })
    }
}

/// The range [`Mr::register_ex`] registers, by the crate's `usize`
/// convention: at least one byte, and an end (from the address, or the
/// dma-buf offset, and from the `iova`) inside 2^64.
fn check_range(mem: MrMemory<'_>, len: usize, iova: Option<u64>) -> std::result::Result<(), RangeError> {
    let start = match mem {
        MrMemory::Addr(a) => a as u64,
        MrMemory::DmaBuf { offset, .. } => offset,
    };
    let err = |kind, at: u64| RangeError {
        kind,
        op: "Mr::register_ex",
        offset: usize::try_from(at).unwrap_or(usize::MAX),
        len,
        region_addr: at,
        region_len: len as u64,
    };
    if len == 0 {
        return Err(err(RangeErrorKind::Empty, start));
    }
    for at in [Some(start), iova].into_iter().flatten() {
        if at.checked_add(len as u64).is_none() {
            return Err(err(RangeErrorKind::PastEnd, at));
        }
    }
    Ok(())
}

/// The device's value of a `*_SYMBOL` row's capability.
fn absent(sym: &newer::NewerSymbol) -> &'static str {
    if sym.static_build() {
        "absent (static build)"
    } else {
        "absent"
    }
}

/// [`Error::Unsupported`] naming the device unless `ctx` is mlx5.
pub(crate) fn require_mlx5(ctx: &Context, op: &'static str) -> Result<()> {
    #[cfg(not(rrddmma_mlnx_ofed4))]
    {
        super::mlx5::require(ctx, op, &U::NOT_MLX5, op)
    }
    #[cfg(rrddmma_mlnx_ofed4)]
    {
        let _ = ctx;
        Err(Error::unsupported(op, &U::OFED4, ctx.name(), "MLNX_OFED 4.x"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zero length, and an end past 2^64 from the address, the dma-buf
    /// offset or the iova, are [`RangeError`]s (returned, as `checked_sge_at`
    /// returns them), each naming the operation and the fix; a one-byte
    /// range at the top of the address space is fine.
    #[test]
    fn register_ex_ranges_follow_the_usize_convention() {
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        let fd = std::os::fd::AsFd::as_fd(&file);
        let buf = MrMemory::DmaBuf { fd, offset: 64 };
        let e = check_range(MrMemory::Addr(std::ptr::null_mut::<u8>().wrapping_add(4096)), 0, None).unwrap_err();
        assert_eq!((e.kind, e.op, e.len, e.region_addr), (RangeErrorKind::Empty, "Mr::register_ex", 0, 4096));
        assert_eq!(
            Error::Range(e).to_string(),
            "Mr::register_ex: length 0 at offset 4096; a region holds at least one byte: give a length of 1 or more"
        );
        assert_eq!(check_range(buf, 0, Some(0)).unwrap_err().kind, RangeErrorKind::Empty);
        let past = check_range(MrMemory::DmaBuf { fd, offset: u64::MAX - 7 }, 16, None).unwrap_err();
        assert_eq!((past.kind, past.region_addr), (RangeErrorKind::PastEnd, u64::MAX - 7));
        assert!(Error::Range(past).to_string().contains("pass the end"), "{past}");
        let iova = check_range(buf, 16, Some(u64::MAX)).unwrap_err();
        assert_eq!((iova.kind, iova.region_addr), (RangeErrorKind::PastEnd, u64::MAX));
        assert_eq!(check_range(buf, 1, Some(u64::MAX - 1)), Ok(()));
        assert_eq!(check_range(MrMemory::Addr(std::ptr::null_mut()), 1 << 20, None), Ok(()));
        assert!(!Error::Range(iova).is_unsupported());
    }

    #[test]
    fn tph_mem_types_have_the_header_values() {
        assert_eq!(TphMemType::Volatile.to_raw().0, 0);
        assert_eq!(TphMemType::Persistent.to_raw().0, 1);
        let o = MrExOptions::default();
        assert!(o.iova.is_none() && o.dmah.is_none() && !o.data_direct);
    }
}
