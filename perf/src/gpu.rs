//! GPU memory for the test buffer (perftest's `--use_cuda`,
//! `--use_cuda_dmabuf`, `--use_rocm`, `--use_rocm_dmabuf`,
//! `--use_data_direct`), and the hidden `--dmabuf_exporter vgem` that runs
//! the dma-buf path on a machine without a GPU.
//!
//! The vendor runtime is loaded at run time (`dlopen` of `libcuda.so.1` or
//! `libamdhip64.so`), never linked: a machine without it builds and runs
//! the tool, and a run that asks for it is refused naming what is missing
//! (the library, or a device). The buffer is registered through its
//! dma-buf where asked (`Mr::register_dmabuf`, or `Mr::register_ex` with
//! data-direct), else through the peer-memory path (`ibv_reg_mr` on the
//! device pointer, which nvidia-peermem or amdgpu's peer-direct serve).

use std::ffi::{c_int, c_uint, c_void, CStr, CString};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use rrddmma::prim::{AccessFlags, Mr, MrExOptions, MrMemory, Pd};

use crate::knobs::{Gpu, GpuKind};

type Res<T> = Result<T, String>;

/// A library opened with `dlopen`, never closed (the process keeps it, as
/// a linked library would be kept).
pub struct Lib {
    handle: *mut c_void,
    name: &'static str,
}

impl Lib {
    /// Opens `name`, or says what is missing and the way out.
    fn open(name: &'static str, flag: &str, what: &str) -> Res<Lib> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated name; dlopen runs the library's
        // initialisers, which is what loading a vendor runtime means.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!(
                "{flag}: cannot load {name} ({what}): {}; install it (the GPU's driver), or run without {flag}",
                dl_error()
            ));
        }
        Ok(Lib { handle, name })
    }

    /// The address of the function `sym`.
    fn sym(&self, sym: &str) -> Res<*mut c_void> {
        let c = CString::new(sym).map_err(|e| e.to_string())?;
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            return Err(format!("{} has no {sym} (a runtime too old for this use): {}", self.name, dl_error()));
        }
        Ok(p)
    }
}

/// `dlerror`'s text.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl call on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Declares typed function pointers read from a [`Lib`].
macro_rules! entries {
    ($name:ident { $($f:ident: fn($($a:ty),*) -> $r:ty;)* }) => {
        #[allow(non_snake_case)]
        pub struct $name { $($f: unsafe extern "C" fn($($a),*) -> $r,)* }
        impl $name {
            fn load(lib: &Lib) -> Res<$name> {
                // SAFETY: each symbol is the vendor's function of this
                // C signature (the runtime's public API, declared here as
                // its headers declare it).
                Ok($name { $($f: unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($a),*) -> $r>(lib.sym(stringify!($f))?) },)* })
            }
        }
    };
}

entries!(Cuda {
    cuInit: fn(c_uint) -> c_int;
    cuDeviceGetCount: fn(*mut c_int) -> c_int;
    cuDeviceGet: fn(*mut c_int, c_int) -> c_int;
    cuDevicePrimaryCtxRetain: fn(*mut *mut c_void, c_int) -> c_int;
    cuCtxSetCurrent: fn(*mut c_void) -> c_int;
    cuMemAlloc_v2: fn(*mut u64, usize) -> c_int;
    cuMemFree_v2: fn(u64) -> c_int;
    cuMemGetHandleForAddressRange: fn(*mut c_void, u64, usize, c_int, u64) -> c_int;
});

entries!(Hip {
    hipInit: fn(c_uint) -> c_int;
    hipGetDeviceCount: fn(*mut c_int) -> c_int;
    hipSetDevice: fn(c_int) -> c_int;
    hipMalloc: fn(*mut *mut c_void, usize) -> c_int;
    hipFree: fn(*mut c_void) -> c_int;
    hipMemGetHandleForAddressRange: fn(*mut c_void, *mut c_void, usize, c_int, u64) -> c_int;
});

/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD` / `hipMemRangeHandleTypeDmaBufFd`.
const DMA_BUF_FD: c_int = 1;

/// The loaded runtime and the chosen device, checked before the run's
/// exchange starts (so both sides stop at once when one is missing).
pub enum Runtime {
    Cuda(Lib, Cuda),
    Hip(Lib, Hip),
    /// The vgem DRM device.
    Vgem(File),
}

/// The flag that asked for `g`, for messages.
pub fn flag(g: &Gpu) -> &'static str {
    match (g.kind, g.dmabuf) {
        (GpuKind::Cuda, false) => "--use_cuda",
        (GpuKind::Cuda, true) => "--use_cuda_dmabuf",
        (GpuKind::Rocm, false) => "--use_rocm",
        (GpuKind::Rocm, true) => "--use_rocm_dmabuf",
        (GpuKind::Vgem, _) => "--dmabuf_exporter vgem",
    }
}

impl Runtime {
    /// Loads the runtime `g` names and checks that its device exists.
    pub fn load(g: &Gpu) -> Res<Runtime> {
        let fl = flag(g);
        let count = |n: c_int, what: &str| -> Res<()> {
            if n <= 0 {
                return Err(format!("{fl}: no {what} device on this machine (the runtime found none); run without it"));
            }
            if g.device >= n as u32 {
                return Err(format!("{fl}: {what} device {} does not exist ({n} found: 0 to {})", g.device, n - 1));
            }
            Ok(())
        };
        match g.kind {
            GpuKind::Cuda => {
                let lib = Lib::open("libcuda.so.1", fl, "the NVIDIA CUDA driver library")?;
                let f = Cuda::load(&lib)?;
                // SAFETY: the driver API's entry points, called as documented.
                let rc = unsafe { (f.cuInit)(0) };
                if rc == 100 {
                    // CUDA_ERROR_NO_DEVICE
                    count(0, "CUDA")?;
                }
                cu(rc, fl, "cuInit")?;
                let mut n = 0;
                // SAFETY: `n` is valid for writes.
                cu(unsafe { (f.cuDeviceGetCount)(&mut n) }, fl, "cuDeviceGetCount")?;
                count(n, "CUDA")?;
                Ok(Runtime::Cuda(lib, f))
            }
            GpuKind::Rocm => {
                let lib = Lib::open("libamdhip64.so", fl, "the AMD ROCm HIP runtime")?;
                let f = Hip::load(&lib)?;
                // SAFETY: the HIP runtime's entry points, called as documented.
                let rc = unsafe { (f.hipInit)(0) };
                if rc == 100 {
                    // hipErrorNoDevice
                    count(0, "ROCm")?;
                }
                cu(rc, fl, "hipInit")?;
                let mut n = 0;
                // SAFETY: `n` is valid for writes.
                cu(unsafe { (f.hipGetDeviceCount)(&mut n) }, fl, "hipGetDeviceCount")?;
                count(n, "ROCm")?;
                Ok(Runtime::Hip(lib, f))
            }
            GpuKind::Vgem => Ok(Runtime::Vgem(vgem_card()?)),
        }
    }
}

/// A runtime's status code as a result.
fn cu(rc: c_int, flag: &str, call: &str) -> Res<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{flag}: {call} failed with status {rc}"))
    }
}

/// The buffer, on the device, and its registration. The region is
/// deregistered before the memory is freed; when deregistration fails the
/// memory is kept (the device may still reach it), as `prim::Mr` keeps a
/// backing it could not deregister.
pub struct GpuMem {
    mr: Option<Mr>,
    alloc: Alloc,
    /// How the buffer was registered, for the run's notes.
    pub how: String,
}

enum Alloc {
    Cuda(Cuda, u64),
    Hip(Hip, *mut c_void),
    /// The vgem device (its buffer lives as long as the registration holds the dma-buf).
    Vgem(#[allow(dead_code)] File),
}

// SAFETY: the device pointer is an address in the GPU's space, not memory
// this process dereferences; the functions are the runtime's, callable
// from any thread.
unsafe impl Send for GpuMem {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for GpuMem {}

impl GpuMem {
    /// Allocates `len` bytes on the device and registers them on `pd` with
    /// `access`; `data_direct`: through mlx5 data-direct.
    pub fn new(rt: Runtime, g: &Gpu, pd: &Pd, len: usize, access: AccessFlags, data_direct: bool) -> Res<GpuMem> {
        let fl = flag(g);
        // GPU pages are 64 KiB; the dma-buf export takes whole pages.
        let len = len.div_ceil(1 << 16) << 16;
        let (alloc, ptr, fd) = match rt {
            Runtime::Cuda(lib, f) => {
                let mut dev = 0;
                let mut ctx = std::ptr::null_mut();
                let mut ptr = 0u64;
                // SAFETY: the driver API's calls with valid out-pointers, in order.
                unsafe {
                    cu((f.cuDeviceGet)(&mut dev, g.device as c_int), fl, "cuDeviceGet")?;
                    cu((f.cuDevicePrimaryCtxRetain)(&mut ctx, dev), fl, "cuDevicePrimaryCtxRetain")?;
                    cu((f.cuCtxSetCurrent)(ctx), fl, "cuCtxSetCurrent")?;
                    cu((f.cuMemAlloc_v2)(&mut ptr, len), fl, "cuMemAlloc")?;
                }
                let mut fd: c_int = -1;
                if g.dmabuf {
                    // SAFETY: `ptr..ptr+len` is the allocation just made; `fd` is valid for writes.
                    let rc =
                        unsafe { (f.cuMemGetHandleForAddressRange)((&raw mut fd).cast(), ptr, len, DMA_BUF_FD, 0) };
                    if rc != 0 {
                        // SAFETY: the allocation is not registered.
                        unsafe { (f.cuMemFree_v2)(ptr) };
                        return Err(format!(
                            "{fl}: cuMemGetHandleForAddressRange (dma-buf export) failed with status {rc}; the \
                             driver or GPU has no dma-buf export: use --use_cuda without --use_cuda_dmabuf"
                        ));
                    }
                }
                // The library stays loaded (never closed): the entry points stay valid.
                let _ = lib;
                (Alloc::Cuda(f, ptr), ptr, fd)
            }
            Runtime::Hip(lib, f) => {
                let mut ptr = std::ptr::null_mut();
                // SAFETY: the runtime's calls with valid out-pointers, in order.
                unsafe {
                    cu((f.hipSetDevice)(g.device as c_int), fl, "hipSetDevice")?;
                    cu((f.hipMalloc)(&mut ptr, len), fl, "hipMalloc")?;
                }
                let mut fd: c_int = -1;
                if g.dmabuf {
                    // SAFETY: as for CUDA.
                    let rc =
                        unsafe { (f.hipMemGetHandleForAddressRange)((&raw mut fd).cast(), ptr, len, DMA_BUF_FD, 0) };
                    if rc != 0 {
                        // SAFETY: the allocation is not registered.
                        unsafe { (f.hipFree)(ptr) };
                        return Err(format!(
                            "{fl}: hipMemGetHandleForAddressRange (dma-buf export) failed with status {rc}; use \
                             --use_rocm without --use_rocm_dmabuf"
                        ));
                    }
                }
                // The library stays loaded (never closed): the entry points stay valid.
                let _ = lib;
                (Alloc::Hip(f, ptr), ptr as u64, fd)
            }
            Runtime::Vgem(card) => {
                let fd = vgem_buffer(&card, len)?;
                (Alloc::Vgem(card), 0, std::os::fd::IntoRawFd::into_raw_fd(fd))
            }
        };
        let mut mem = GpuMem { mr: None, alloc, how: String::new() };
        let reg = if fd >= 0 {
            // SAFETY: the exporter gave a new descriptor, owned by nothing else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            mem.how = format!(
                "{len} bytes of {} memory registered through its dma-buf{}",
                name(g.kind),
                if data_direct { " with mlx5 data-direct" } else { "" }
            );
            if data_direct {
                let opts = MrExOptions { iova: Some(ptr), data_direct: true, ..MrExOptions::default() };
                // SAFETY: a dma-buf's memory belongs to its exporter; the
                // kernel holds the buffer for the region's life.
                unsafe { Mr::register_ex(pd, MrMemory::DmaBuf { fd: fd.as_fd(), offset: 0 }, len, access, opts) }
            } else {
                Mr::register_dmabuf(pd, fd.as_fd(), 0, len, ptr, access)
            }
        } else {
            mem.how = format!("{len} bytes of {} memory registered through peer memory", name(g.kind));
            // SAFETY: device memory the runtime allocated above, freed only
            // after the region is deregistered (kept when that fails).
            unsafe { Mr::register(pd, ptr as *mut u8, len, access) }
        };
        mem.mr = Some(reg.map_err(|e| {
            let hint = if g.dmabuf {
                ""
            } else {
                " (the peer-memory path needs nvidia-peermem or amdgpu's peer-direct loaded; try the dma-buf flag)"
            };
            format!("{fl}: registering the buffer: {e}{hint}")
        })?);
        Ok(mem)
    }

    /// The registration.
    pub fn mr(&self) -> &Mr {
        self.mr.as_ref().expect("registered in GpuMem::new")
    }
}

fn name(k: GpuKind) -> &'static str {
    match k {
        GpuKind::Cuda => "CUDA",
        GpuKind::Rocm => "ROCm",
        GpuKind::Vgem => "vgem",
    }
}

impl Drop for GpuMem {
    fn drop(&mut self) {
        let failures = rrddmma::prim::destroy_failures();
        drop(self.mr.take());
        if rrddmma::prim::destroy_failures() != failures {
            // The device may still reach the memory: keep it.
            return;
        }
        match &self.alloc {
            // SAFETY: the allocation made in `new`, no longer registered.
            Alloc::Cuda(f, p) => unsafe {
                (f.cuMemFree_v2)(*p);
            },
            // SAFETY: as above.
            Alloc::Hip(f, p) => unsafe {
                (f.hipFree)(*p);
            },
            Alloc::Vgem(_) => {}
        }
    }
}

/// The vgem DRM device (`modprobe vgem` makes it).
fn vgem_card() -> Res<File> {
    let none =
        || "--dmabuf_exporter vgem: no vgem device (load the kernel's virtual GEM driver: modprobe vgem)".to_string();
    let card = std::fs::read_dir("/sys/class/drm")
        .map_err(|_| none())?
        .filter_map(Result::ok)
        .find(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("card")
                && !n.contains('-')
                && std::fs::read_link(e.path().join("device")).is_ok_and(|l| l.ends_with("vgem"))
        })
        .ok_or_else(none)?;
    let path = format!("/dev/dri/{}", card.file_name().to_string_lossy());
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("--dmabuf_exporter vgem: {path}: {e}"))
}

/// A dma-buf of `len` bytes from vgem: a dumb buffer, exported through PRIME.
fn vgem_buffer(card: &File, len: usize) -> Res<OwnedFd> {
    let width = u32::try_from(len / 4).map_err(|_| format!("--dmabuf_exporter vgem: {len} bytes is too large"))?;
    // struct drm_mode_create_dumb: height, width, bpp, flags, handle, pitch (u32); size (u64).
    let mut dumb = [0u32; 8];
    dumb[..3].copy_from_slice(&[1, width, 32]);
    const DRM_IOCTL_MODE_CREATE_DUMB: libc::c_ulong = 0xC020_64B2;
    // SAFETY: the ioctl reads and writes the 32-byte struct in `dumb`.
    let rc = unsafe { libc::ioctl(card.as_raw_fd(), DRM_IOCTL_MODE_CREATE_DUMB, dumb.as_mut_ptr()) };
    if rc != 0 {
        return Err(format!("--dmabuf_exporter vgem: DRM_IOCTL_MODE_CREATE_DUMB: {}", std::io::Error::last_os_error()));
    }
    // struct drm_prime_handle: handle, flags (u32); fd (i32).
    let mut prime = [dumb[4], (libc::O_CLOEXEC | libc::O_RDWR) as u32, u32::MAX];
    const DRM_IOCTL_PRIME_HANDLE_TO_FD: libc::c_ulong = 0xC00C_642D;
    // SAFETY: the ioctl reads and writes the 12-byte struct in `prime`.
    let rc = unsafe { libc::ioctl(card.as_raw_fd(), DRM_IOCTL_PRIME_HANDLE_TO_FD, prime.as_mut_ptr()) };
    if rc != 0 {
        return Err(format!(
            "--dmabuf_exporter vgem: DRM_IOCTL_PRIME_HANDLE_TO_FD: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the kernel returned a new descriptor, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(prime[2] as c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime that is not there is a refusal naming the library, the
    /// flag and the way out (this machine has no libcuda.so.1 nor
    /// libamdhip64.so; where it has, the device count decides).
    #[test]
    fn a_missing_runtime_is_named() {
        for (kind, lib) in [(GpuKind::Cuda, "libcuda.so.1"), (GpuKind::Rocm, "libamdhip64.so")] {
            let g = Gpu { kind, device: 0, dmabuf: false };
            match Runtime::load(&g) {
                Err(e) if e.contains("cannot load") => {
                    assert!(e.starts_with(&format!("{}: cannot load {lib} (", flag(&g))), "{e}");
                    assert!(e.contains(&format!("or run without {}", flag(&g))), "{e}");
                }
                Err(e) => assert!(e.contains("device"), "{e}"),
                Ok(_) => {}
            }
        }
        let l = Lib::open("libc.so.6", "--x", "libc").unwrap();
        assert!(l.sym("rrddmma_no_such_symbol").unwrap_err().contains("has no rrddmma_no_such_symbol"));
    }
}
