//! The `dlopen` linkage: libibverbs, libmlx5 and librdmacm loaded at run time.
//!
//! Each library is opened once, on first use, by its soname (or the path in
//! its environment variable, see [`Library`], ignored in a setuid, setgid or
//! file-capability process), and never closed, so the
//! function pointers taken from it stay valid for the life of the process.
//! The tables of those pointers (`dl_sys.rs`, `dl_cm.rs`) are generated from
//! the committed bindings by `cargo xtask bindings`; each entry is resolved
//! once. A call through a present entry costs one indirect call.
//!
//! A library that cannot be opened, or a symbol it lacks, never crashes: the
//! function of that name sets `errno` to `EOPNOTSUPP`, returns its failure
//! value (null, `-EOPNOTSUPP`, `false` or 0) and records which symbol of which
//! library was absent, which the verbs layer reports as a typed error
//! ([`crate::prim::Error::Load`]). [`check_verbs`] answers up front whether
//! libibverbs is usable; the device list calls it.

use std::cell::Cell;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::sync::OnceLock;

/// A shared library opened at run time.
#[derive(Debug)]
pub struct Library {
    /// The soname opened when the environment variable is unset.
    soname: &'static str,
    /// The environment variable naming another file (a soname or a path).
    env: &'static str,
    opened: OnceLock<Opened>,
}

/// The outcome of opening a library.
#[derive(Debug)]
struct Opened {
    /// The name passed to `dlopen`.
    name: String,
    /// The handle, or why `dlopen` refused.
    handle: Result<Handle, String>,
}

/// A `dlopen` handle, never closed.
#[derive(Debug, Clone, Copy)]
struct Handle(*mut c_void);

// SAFETY: a dlopen handle is an opaque token that the dynamic loader accepts
// from any thread; it is never closed, so it cannot dangle.
unsafe impl Send for Handle {}
// SAFETY: as above; `dlsym` on one handle is thread-safe.
unsafe impl Sync for Handle {}

/// libibverbs (`RRDDMMA_LIBIBVERBS` overrides the soname).
pub static LIBIBVERBS: Library = Library::new("libibverbs.so.1", "RRDDMMA_LIBIBVERBS");
/// libmlx5, for the `mlx5dv_*` functions (`RRDDMMA_LIBMLX5` overrides the soname).
pub static LIBMLX5: Library = Library::new("libmlx5.so.1", "RRDDMMA_LIBMLX5");
/// librdmacm, for the `rdma_*` functions (`RRDDMMA_LIBRDMACM` overrides the soname).
pub static LIBRDMACM: Library = Library::new("librdmacm.so.1", "RRDDMMA_LIBRDMACM");

impl Library {
    const fn new(soname: &'static str, env: &'static str) -> Library {
        Library { soname, env, opened: OnceLock::new() }
    }

    fn opened(&self) -> &Opened {
        self.opened.get_or_init(|| {
            let name = self.override_name().unwrap_or_else(|| self.soname.into());
            let handle = match CString::new(name.clone()) {
                Err(_) => Err(format!("{} holds a NUL byte", self.env)),
                Ok(c) => {
                    // SAFETY: `c` is NUL-terminated. Running the library's
                    // constructors is what linking it would do too.
                    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
                    if h.is_null() {
                        Err(dlerror().unwrap_or_else(|| "dlopen failed".into()))
                    } else {
                        Ok(Handle(h))
                    }
                }
            };
            Opened { name, handle }
        })
    }

    /// The file named by the environment variable, if set, non-empty and
    /// honoured: a process started with more privileges than its caller's
    /// (setuid, setgid, file capabilities: `AT_SECURE`) ignores it, as the C
    /// library ignores its own `LD_*` variables there, so that whoever
    /// starts it cannot have it load a library of their choosing.
    fn override_name(&self) -> Option<String> {
        if secure_execution() {
            return None;
        }
        std::env::var(self.env).ok().filter(|s| !s.is_empty())
    }

    /// The file name asked of `dlopen`: the soname, or the override.
    pub fn name(&self) -> &str {
        &self.opened().name
    }

    /// Whether the library could be opened; the error names it and says why.
    pub fn check(&self) -> Result<(), LoadError> {
        match &self.opened().handle {
            Ok(_) => Ok(()),
            Err(why) => Err(LoadError {
                library: self.name().into(),
                symbol: None,
                opened: false,
                reason: why.clone(),
                env: self.env,
            }),
        }
    }

    /// The function `name` of this library, as the pointer type `F`; `None`
    /// when the library did not open or lacks the symbol.
    ///
    /// # Safety
    /// `F` must be the `unsafe extern "C" fn` type of the C function `name`.
    pub(crate) unsafe fn sym<F: Copy>(&self, name: &CStr) -> Option<F> {
        const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
        let Ok(Handle(h)) = self.opened().handle else { return None };
        // SAFETY: `h` is a live handle and `name` NUL-terminated.
        let p = unsafe { libc::dlsym(h, name.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: `F` is a function pointer type of the same size (checked
        // above) and, by the caller's contract, the symbol's C type.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// Whether the library holds `symbol`; the error names both.
    pub fn check_symbol(&self, symbol: &'static str) -> Result<(), LoadError> {
        self.check()?;
        let c = CString::new(symbol).map_err(|_| self.absent(symbol))?;
        // SAFETY: `*mut c_void` has a pointer's size; it is only compared with null.
        match unsafe { self.sym::<*mut c_void>(&c) } {
            Some(_) => Ok(()),
            None => Err(self.absent(symbol)),
        }
    }

    /// The error for `symbol` missing from this library (or the library missing).
    fn absent(&self, symbol: &'static str) -> LoadError {
        match self.check() {
            Err(mut e) => {
                e.symbol = Some(symbol);
                e
            }
            Ok(()) => LoadError {
                library: self.name().into(),
                symbol: Some(symbol),
                opened: true,
                reason: "no such symbol".into(),
                env: self.env,
            },
        }
    }
}

/// Whether this process runs in secure-execution mode (`AT_SECURE` in its
/// auxiliary vector: set-user-ID, set-group-ID or file capabilities).
pub fn secure_execution() -> bool {
    // SAFETY: getauxval reads the process's auxiliary vector; any type is
    // a valid argument (0 for one absent).
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// `dlerror()`'s message, if any.
fn dlerror() -> Option<String> {
    // SAFETY: dlerror returns null or a NUL-terminated, thread-local message.
    let p = unsafe { libc::dlerror() };
    // SAFETY: non-null: a NUL-terminated string valid until the next dl call.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A library that could not be opened, or a symbol absent from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The file name given to `dlopen` (`libibverbs.so.1`, or the override).
    pub library: String,
    /// The symbol asked for, if a function was being called or checked.
    pub symbol: Option<&'static str>,
    /// Whether the library opened (then only the symbol is missing).
    pub opened: bool,
    /// `dlerror()`'s words, or why the symbol is missing.
    pub reason: String,
    /// The environment variable that names another file for this library.
    pub env: &'static str,
}

impl LoadError {
    /// Whether the library opened and only the symbol is missing (a function
    /// newer than the installed rdma-core).
    pub fn is_missing_symbol(&self) -> bool {
        self.opened && self.symbol.is_some()
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.symbol {
            Some(s) if self.is_missing_symbol() => {
                write!(
                    f,
                    "{s} is not in {} (an rdma-core older than the function, or not rdma-core's); \
                     install a newer rdma-core or set {} to one",
                    self.library, self.env
                )
            }
            Some(s) => write!(
                f,
                "{s}: cannot load {}: {}; install rdma-core's libraries (Debian/Ubuntu: \
                 apt-get install ibverbs-providers librdmacm1; RHEL/Fedora: dnf install \
                 libibverbs librdmacm) or set {} to the library's path",
                self.library, self.reason, self.env
            ),
            None => write!(
                f,
                "cannot load {}: {}; install rdma-core's libraries (Debian/Ubuntu: \
                 apt-get install ibverbs-providers librdmacm1; RHEL/Fedora: dnf install \
                 libibverbs librdmacm) or set {} to the library's path",
                self.library, self.reason, self.env
            ),
        }
    }
}

impl std::error::Error for LoadError {}

thread_local! {
    /// The last function of this thread found absent: (library, symbol).
    static LAST_ABSENT: Cell<Option<(&'static Library, &'static str)>> = const { Cell::new(None) };
}

/// What a call to an absent function returns.
pub trait Absent {
    /// The C function's failure value.
    fn absent() -> Self;
}

impl Absent for () {
    fn absent() -> Self {}
}
impl Absent for core::ffi::c_int {
    fn absent() -> Self {
        -libc::EOPNOTSUPP
    }
}
impl Absent for isize {
    fn absent() -> Self {
        -(libc::EOPNOTSUPP as isize)
    }
}
impl Absent for bool {
    fn absent() -> Self {
        false
    }
}
impl Absent for u16 {
    fn absent() -> Self {
        0
    }
}
impl Absent for u64 {
    fn absent() -> Self {
        0
    }
}
impl<T> Absent for *mut T {
    fn absent() -> Self {
        std::ptr::null_mut()
    }
}
impl<T> Absent for *const T {
    fn absent() -> Self {
        std::ptr::null()
    }
}
/// No known status: `ibv_is_fork_initialized` itself is absent.
impl Absent for super::sys::ibv_fork_status {
    fn absent() -> Self {
        super::sys::ibv_fork_status(core::ffi::c_uint::MAX)
    }
}

/// The call of `symbol`, absent from `lib` (or `lib` absent): records it for
/// [`take_absent`], sets `errno` to `EOPNOTSUPP` and returns the failure value.
#[cold]
#[inline(never)]
pub(crate) fn absent<R: Absent>(lib: &'static Library, symbol: &'static str) -> R {
    LAST_ABSENT.with(|c| c.set(Some((lib, symbol))));
    // SAFETY: `__errno_location` returns this thread's errno slot.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
    R::absent()
}

/// The error for the last absent function this thread called, if it was
/// `symbol`; clears the record either way.
pub fn take_absent(symbol: &str) -> Option<LoadError> {
    let (lib, s) = LAST_ABSENT.with(Cell::take)?;
    (s == symbol).then(|| lib.absent(s))
}

/// Whether libibverbs opens and has what listing and opening devices needs;
/// the error names the library and the first missing symbol.
pub fn check_verbs() -> Result<(), LoadError> {
    for s in ["ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name", "ibv_open_device"] {
        LIBIBVERBS.check_symbol(s)?;
    }
    Ok(())
}
