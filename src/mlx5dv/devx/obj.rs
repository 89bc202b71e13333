//! DEVX objects, UMEM registrations and UARs.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use super::cmd;
use super::context::DevxContext;
use crate::bindings as ffi;
use crate::prim::{Error, Mr, Result};

/// Something a DEVX object references and keeps alive until it is
/// destroyed (another object, a UMEM, a UAR, a PD, a CQ, ...).
pub type Held = Arc<dyn Any + Send + Sync>;

struct ObjInner {
    raw: NonNull<ffi::mlx5dv_devx_obj>,
    opcode: u16,
    /// Dropped after the object (fields drop after `Drop::drop`).
    _held: Vec<Held>,
    /// Regions a UMR layout of the object (a memory key) was posted over,
    /// added after creation ([`DevxObj::hold_region`]); dropped after the
    /// object, as `_held`.
    regions: Mutex<Vec<Mr>>,
    _ctx: DevxContext,
}

// SAFETY: the object is a kernel handle; libmlx5's calls on it are
// thread-safe (one ioctl each), and it is destroyed once, in `Drop`.
unsafe impl Send for ObjInner {}
// SAFETY: as above; `&DevxObj` only issues query/modify ioctls.
unsafe impl Sync for ObjInner {}

impl Drop for ObjInner {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_devx_obj_create`, destroyed only here.
        let rc = unsafe { ffi::mlx5dv_devx_obj_destroy(self.raw.as_ptr()) };
        if rc != 0 {
            crate::prim::count_destroy_failure("mlx5dv_devx_obj_destroy", rc);
            // The device may still reach what the object references.
            std::mem::forget(std::mem::take(&mut self._held));
            let regions = self.regions.get_mut().unwrap_or_else(|p| p.into_inner());
            std::mem::forget(std::mem::take(regions));
        }
    }
}

/// A firmware object made by a `CREATE_*` command (`mlx5dv_devx_obj_create`).
/// Cloning shares it; destroyed when the last clone drops, before what it
/// holds. A failed destroy is counted ([`crate::prim::destroy_failures`])
/// and what it held stays alive.
#[derive(Clone)]
pub struct DevxObj(Arc<ObjInner>);

impl std::fmt::Debug for DevxObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevxObj").field("opcode", &format_args!("{:#x}", self.0.opcode)).finish()
    }
}

impl DevxObj {
    /// Sends the create command `cmd_in` and keeps the object, which holds
    /// `held` (what the command references) until it is destroyed. The
    /// answer (its `*_out` layout, e.g. the new object's id) is in `out`,
    /// its status checked ([`Error::Firmware`]).
    ///
    /// # Panics
    /// If `out` is shorter than the 16-byte output header.
    ///
    /// # References
    /// `mlx5dv_devx_obj_create(3)`
    pub fn create(ctx: &DevxContext, cmd_in: &[u8], out: &mut [u8], held: Vec<Held>) -> Result<DevxObj> {
        const OP: &str = "mlx5dv_devx_obj_create";
        assert!(out.len() >= cmd::OUT_HDR_BYTES, "DevxObj::create: out is shorter than the 16-byte output header");
        // SAFETY: a live DEVX context; buffers valid for their lengths.
        let raw = unsafe {
            ffi::mlx5dv_devx_obj_create(
                ctx.as_ptr(),
                cmd_in.as_ptr().cast(),
                cmd_in.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        let Some(raw) = NonNull::new(raw) else {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            return Err(cmd::failed(OP, cmd_in, errno, out));
        };
        let opcode = cmd::opcode_of(cmd_in);
        let obj = DevxObj(Arc::new(ObjInner {
            raw,
            opcode,
            _held: held,
            regions: Mutex::new(Vec::new()),
            _ctx: ctx.clone(),
        }));
        cmd::check_out(OP, opcode, out)?;
        Ok(obj)
    }

    /// Sends the query command `cmd_in` about this object; the answer in `out`.
    pub fn query(&self, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
        // SAFETY: a live object; buffers valid for their lengths (`call`).
        self.call(
            "mlx5dv_devx_obj_query",
            |o, i, il, p, pl| unsafe { ffi::mlx5dv_devx_obj_query(o, i, il, p, pl) },
            cmd_in,
            out,
        )
    }

    /// Sends the modify command `cmd_in` for this object; the answer in `out`.
    pub fn modify(&self, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
        // SAFETY: a live object; buffers valid for their lengths (`call`).
        self.call(
            "mlx5dv_devx_obj_modify",
            |o, i, il, p, pl| unsafe { ffi::mlx5dv_devx_obj_modify(o, i, il, p, pl) },
            cmd_in,
            out,
        )
    }

    fn call(
        &self,
        op: &'static str,
        f: impl FnOnce(*mut ffi::mlx5dv_devx_obj, *const std::ffi::c_void, usize, *mut std::ffi::c_void, usize) -> i32,
        cmd_in: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        assert!(out.len() >= cmd::OUT_HDR_BYTES, "{op}: out is shorter than the 16-byte output header");
        // A live object; buffers valid for their lengths.
        let rc = f(self.as_ptr(), cmd_in.as_ptr().cast(), cmd_in.len(), out.as_mut_ptr().cast(), out.len());
        if rc != 0 {
            return Err(cmd::failed(op, cmd_in, rc, out));
        }
        cmd::check_out(op, cmd::opcode_of(cmd_in), out)
    }

    /// Keeps `mr` registered until the object is destroyed (after the last
    /// clone drops), as what it was created with: for a memory key a UMR
    /// layout was posted over `mr`. A region held already is held once.
    pub fn hold_region(&self, mr: &Mr) {
        // A poisoned lock still holds the list: keep using it.
        let mut regions = self.0.regions.lock().unwrap_or_else(|p| p.into_inner());
        crate::mlx5dv::keys::mkey::hold_once(&mut regions, mr)
    }

    /// How many regions the object holds through [`DevxObj::hold_region`].
    pub fn held_regions(&self) -> usize {
        self.0.regions.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The raw object.
    pub fn as_ptr(&self) -> *mut ffi::mlx5dv_devx_obj {
        self.0.raw.as_ptr()
    }
}

/// Page-aligned memory a UMEM registers, freed after the deregistration.
struct PageMem {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
}

/// A UMEM: memory of its own, registered for the device's use by DEVX
/// objects (queues, doorbells, direct mkeys) through its id. It owns the
/// memory: deregistered, then freed, when dropped; a failed deregistration
/// is counted and the memory never freed (the device may still reach it).
pub struct Umem {
    raw: NonNull<ffi::mlx5dv_devx_umem>,
    mem: Option<PageMem>,
    _ctx: DevxContext,
}

// SAFETY: a kernel registration and memory owned by it; `&Umem` hands out
// only the id and raw pointer.
unsafe impl Send for Umem {}
// SAFETY: as above.
unsafe impl Sync for Umem {}

impl std::fmt::Debug for Umem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Umem").field("id", &self.id()).field("len", &self.len()).finish()
    }
}

impl Umem {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two, at
    /// least the 4 KiB page) and registers them with `access`
    /// (`IBV_ACCESS_*` bits, e.g. `AccessFlags::LOCAL_WRITE.bits()`).
    ///
    /// # Panics
    /// If `len` is 0 or `align` is not a power of two of at least 4096.
    ///
    /// # References
    /// `mlx5dv_devx_umem_reg(3)`
    pub fn alloc(ctx: &DevxContext, len: usize, align: usize, access: u32) -> Result<Umem> {
        assert!(len > 0, "Umem::alloc: len is 0");
        assert!(
            align.is_power_of_two() && align >= 4096,
            "Umem::alloc: align {align} is not a power of two of at least 4096"
        );
        let layout = std::alloc::Layout::from_size_align(len, align).expect("Umem::alloc: size overflows");
        // SAFETY: a non-zero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or(Error::Verbs { op: "Umem::alloc", errno: libc::ENOMEM })?;
        let mem = PageMem { ptr, layout };
        // SAFETY: a live DEVX context; `len` bytes at `ptr` owned by `mem`,
        // which the registration keeps until it is deregistered.
        let raw = unsafe { ffi::mlx5dv_devx_umem_reg(ctx.as_ptr(), ptr.as_ptr().cast(), len, access) };
        let Some(raw) = NonNull::new(raw) else {
            let e = Error::last("mlx5dv_devx_umem_reg");
            // SAFETY: allocated above with this layout; never registered.
            unsafe { std::alloc::dealloc(mem.ptr.as_ptr(), mem.layout) };
            return Err(e);
        };
        Ok(Umem { raw, mem: Some(mem), _ctx: ctx.clone() })
    }

    /// The UMEM id DEVX commands name.
    pub fn id(&self) -> u32 {
        // SAFETY: a live registration; the id is written once.
        unsafe { (*self.raw.as_ptr()).umem_id }
    }

    /// The registered bytes.
    pub fn len(&self) -> usize {
        self.mem.as_ref().map_or(0, |m| m.layout.size())
    }

    /// Whether the registration is empty (never: [`Umem::alloc`] refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory's address (for the device's view of it, e.g. a direct mkey's `start_addr`).
    pub fn addr(&self) -> *mut u8 {
        self.mem.as_ref().map_or(std::ptr::null_mut(), |m| m.ptr.as_ptr())
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_devx_umem_reg`, deregistered only here.
        let rc = unsafe { ffi::mlx5dv_devx_umem_dereg(self.raw.as_ptr()) };
        if rc != 0 {
            crate::prim::count_destroy_failure("mlx5dv_devx_umem_dereg", rc);
            return; // the memory stays: the device may still reach it
        }
        if let Some(m) = self.mem.take() {
            // SAFETY: allocated in `alloc` with this layout; no longer registered.
            unsafe { std::alloc::dealloc(m.ptr.as_ptr(), m.layout) };
        }
    }
}

/// A user access region (doorbell page) of the device (`mlx5dv_devx_alloc_uar`).
pub struct Uar {
    raw: NonNull<ffi::mlx5dv_devx_uar>,
    _ctx: DevxContext,
}

// SAFETY: a mapping owned by this value, freed once in `Drop`; `&Uar`
// hands out only numbers and the mapped address.
unsafe impl Send for Uar {}
// SAFETY: as above.
unsafe impl Sync for Uar {}

impl std::fmt::Debug for Uar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uar").field("page_id", &self.page_id()).finish()
    }
}

impl Uar {
    /// Allocates a UAR (`flags`: `MLX5DV_UAR_ALLOC_TYPE_BF` 0 or `_NC` 1).
    ///
    /// # References
    /// `mlx5dv_devx_alloc_uar(3)`
    pub fn alloc(ctx: &DevxContext, flags: u32) -> Result<Uar> {
        // SAFETY: a live DEVX context.
        let raw = unsafe { ffi::mlx5dv_devx_alloc_uar(ctx.as_ptr(), flags) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("mlx5dv_devx_alloc_uar"))?;
        Ok(Uar { raw, _ctx: ctx.clone() })
    }

    /// The UAR page id commands name.
    pub fn page_id(&self) -> u32 {
        // SAFETY: a live UAR.
        unsafe { (*self.raw.as_ptr()).page_id }
    }

    /// The mapped doorbell register and page base (for MMIO writes).
    pub fn reg_addr(&self) -> (*mut std::ffi::c_void, *mut std::ffi::c_void) {
        // SAFETY: a live UAR.
        unsafe { ((*self.raw.as_ptr()).reg_addr, (*self.raw.as_ptr()).base_addr) }
    }

    /// The raw UAR.
    pub fn as_ptr(&self) -> *mut ffi::mlx5dv_devx_uar {
        self.raw.as_ptr()
    }
}

impl Drop for Uar {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_devx_alloc_uar`, freed only here.
        unsafe { ffi::mlx5dv_devx_free_uar(self.raw.as_ptr()) }
    }
}
