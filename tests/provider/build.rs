//! Builds the provider (libmlx5 of the pinned rdma-core tree) and the C half
//! of the harness, runs it once, and hands its output to the checks.
//!
//! The build: `RRDDMMA_MLX5_PROVIDER_BUILD`, a configured rdma-core build
//! folder (`cargo xtask test` passes the source build's, so the provider is
//! compiled once), else one of our own: the tree `RRDDMMA_RDMA_CORE_SRC` (a
//! directory or the `.tar.gz`, as for the source build), else the tarball
//! `cargo xtask test` caches at `target/xtask/rdma-core-src/pyverbs-59.0.tar.gz`,
//! unpacked and configured once under `CARGO_TARGET_TMPDIR/mlx5-provider/`.
//! ninja then builds only `libmlx5.a`, `libibverbs.a` and rdma-core's two
//! helper archives (a no-op when they are current).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Requests, CQEs per format and the generator seed of the run.
pub const LISTS: usize = 10_000;
pub const CQES: usize = 10_000;
pub const SEED: u64 = 0x6d6c_7835;
/// log2 of the streams of the C half's DCIs with streams (its `LOG_DCI_STREAMS`):
/// stream ids are drawn below 2^6, and our rings and batches are told so.
pub const LOG_DCI_STREAMS: u8 = 6;

/// How much smaller the quick mode makes every count ([`scaled`]).
pub const QUICK_DIVISOR: usize = 10;

/// Whether the harness runs in its quick mode: `RRDDMMA_HARNESS_QUICK=1`
/// (`cargo xtask mutants` sets it, so that a mutant costs seconds).
pub fn quick() -> bool {
    static QUICK: OnceLock<bool> = OnceLock::new();
    *QUICK.get_or_init(|| std::env::var("RRDDMMA_HARNESS_QUICK").is_ok_and(|v| v == "1"))
}

/// A section's count (lists, CQEs, cases per queue) or the coverage bound
/// that follows from it, `n` as it is or, in the quick mode, divided by
/// [`QUICK_DIVISOR`] (rounded up, never below 1). The one place the quick
/// mode changes: every section runs the same generator, comparisons and
/// mutation checks on fewer cases.
pub fn scaled(n: usize) -> usize {
    if quick() {
        n.div_ceil(QUICK_DIVISOR).max(1)
    } else {
        n
    }
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run {:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The folder with rdma-core's top `CMakeLists.txt` beside `providers/mlx5`.
fn find_root(dir: &Path) -> Option<PathBuf> {
    let mut queue = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = queue.pop() {
        if d.join("CMakeLists.txt").is_file() && d.join("providers/mlx5/qp.c").is_file() {
            return Some(d);
        }
        if depth < 2 {
            if let Ok(rd) = std::fs::read_dir(&d) {
                queue.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).map(|p| (p, depth + 1)));
            }
        }
    }
    None
}

/// The rdma-core tree, unpacked from the tarball when needed.
fn source_tree(work: &Path) -> PathBuf {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let given = std::env::var_os("RRDDMMA_RDMA_CORE_SRC").map(PathBuf::from);
    let src = given.unwrap_or_else(|| ws.join("target/xtask/rdma-core-src/pyverbs-59.0.tar.gz"));
    if src.is_dir() {
        return find_root(&src).unwrap_or_else(|| panic!("{} holds no rdma-core tree", src.display()));
    }
    assert!(
        src.is_file(),
        "the libmlx5 differential harness needs the rdma-core v59 source: {} does not exist; run \
         `cargo xtask test` (which downloads it) or set RRDDMMA_RDMA_CORE_SRC to an rdma-core tree or .tar.gz",
        src.display()
    );
    let dest = work.join("src");
    if let Some(root) = find_root(&dest) {
        return root;
    }
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(&dest).expect("create the source folder");
    run(Command::new("tar").arg("-xzf").arg(&src).arg("-C").arg(&dest), "tar (unpack rdma-core)");
    find_root(&dest).unwrap_or_else(|| panic!("{} holds no rdma-core tree", src.display()))
}

/// A configured rdma-core build folder given by `RRDDMMA_MLX5_PROVIDER_BUILD`
/// (the source build's, which `cargo xtask test` has just made) and the tree
/// it was configured from.
fn given_build() -> Option<(PathBuf, PathBuf)> {
    let bdir = PathBuf::from(std::env::var_os("RRDDMMA_MLX5_PROVIDER_BUILD")?);
    let cache = std::fs::read_to_string(bdir.join("CMakeCache.txt"))
        .unwrap_or_else(|e| panic!("RRDDMMA_MLX5_PROVIDER_BUILD={}: no CMakeCache.txt ({e})", bdir.display()));
    let tree = cache
        .lines()
        .find_map(|l| l.strip_prefix("CMAKE_HOME_DIRECTORY:INTERNAL="))
        .unwrap_or_else(|| panic!("{}/CMakeCache.txt names no source tree", bdir.display()));
    Some((PathBuf::from(tree), bdir))
}

/// Builds the provider and the harness; returns the harness executable and
/// its library build (`-DHARNESS_LIB`, tests/provider/batch.rs).
fn build() -> (PathBuf, PathBuf) {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mlx5-provider");
    std::fs::create_dir_all(&work).expect("create the harness folder");
    let (tree, bdir) = given_build().unwrap_or_else(|| (source_tree(&work), work.join("build")));
    std::fs::create_dir_all(&bdir).expect("create the build folder");
    if !bdir.join("build.ninja").exists() {
        // The source build's configuration (build/source.rs).
        run(
            Command::new("cmake")
                .current_dir(&bdir)
                .args([
                    "-GNinja",
                    "-DENABLE_STATIC=1",
                    "-DNO_MAN_PAGES=1",
                    "-DNO_PYVERBS=1",
                    "-DENABLE_RESOLVE_NEIGH=0",
                    "-DCMAKE_BUILD_TYPE=Release",
                    "-DIN_PLACE=1",
                    "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
                ])
                .arg(&tree),
            "cmake (configure rdma-core)",
        );
    }
    let archives =
        ["lib/statics/libmlx5.a", "lib/statics/libibverbs.a", "util/librdma_util_pic.a", "ccan/libccan_pic.a"];
    let jobs = std::env::var("NUM_JOBS").unwrap_or_else(|_| "2".into());
    run(Command::new("ninja").current_dir(&bdir).arg("-j").arg(jobs).args(archives), "ninja (build libmlx5)");

    let exe = work.join("mlx5_provider");
    let lib = work.join("libmlx5_provider_harness.so");
    // mlx5_provider.c and the sections in files of their own beside it
    // (each reached through harness.h's entries; sorted, so the build is stable).
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/provider");
    let mut c: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    c.sort();
    // libmlx5's direct-verbs entry table (`mlx5_dv_ctx_ops`, static in
    // mlx5.c) made global in a copy of the archive, so that the harness can
    // hand it to its context as libmlx5's context set-up does.
    let mlx5 = work.join("libmlx5_harness.a");
    run(
        Command::new("objcopy")
            .arg("--globalize-symbol=mlx5_dv_ctx_ops")
            .arg(bdir.join("lib/statics/libmlx5.a"))
            .arg(&mlx5),
        "objcopy (libmlx5's mlx5_dv_ctx_ops made global)",
    );
    for (out, shared) in [(&exe, false), (&lib, true)] {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let mut cmd = Command::new(&cc);
        // The provider's own compile definitions, its headers and the generated ones.
        cmd.args(["-O1", "-std=gnu11", "-D_STATIC_LIBRARY_BUILD_=1", "-Wall", "-Werror", "-Wno-unused-function"])
            .arg(format!("-I{}", bdir.join("include").display()))
            .arg(format!("-I{}", tree.join("providers/mlx5").display()))
            .arg(format!("-I{}", tree.display()));
        if shared {
            // The library build: only the h_* functions exported; libmlx5's and
            // libibverbs' symbols kept inside (bound there, hidden), so that
            // the test binary's own libibverbs is never mixed with them.
            cmd.args([
                "-DHARNESS_LIB",
                "-shared",
                "-fPIC",
                "-fvisibility=hidden",
                "-Wl,-Bsymbolic",
                "-Wl,--exclude-libs,ALL",
            ]);
        }
        cmd.arg("-o").arg(out).args(&c).arg(&mlx5);
        for a in &archives[1..] {
            cmd.arg(bdir.join(a));
        }
        // The DEVX section's fake kernel (tests/provider/devx.c): every
        // `ioctl` of libibverbs reaches its `__wrap_ioctl`, which answers
        // the commands it records and passes anything else to the real one.
        cmd.arg("-Wl,--wrap=ioctl");
        cmd.arg("-lpthread");
        run(&mut cmd, "cc (build the harness against libmlx5)");
    }
    (exe, lib)
}

fn built() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(build)
}

/// The harness's library build (built once per test binary).
pub fn library() -> &'static Path {
    &built().1
}

/// A function of the library build, by name (the library is opened once,
/// RTLD_LOCAL: its few exported symbols stay out of the test binary's
/// namespace). Transmute it to its C signature.
pub fn library_symbol(name: &str) -> *mut std::ffi::c_void {
    struct Handle(*mut std::ffi::c_void);
    // SAFETY: a `dlopen` handle may be used from any thread.
    unsafe impl Send for Handle {}
    // SAFETY: as above; dlsym is thread-safe.
    unsafe impl Sync for Handle {}
    static H: OnceLock<Handle> = OnceLock::new();
    let h = H.get_or_init(|| {
        let path = std::ffi::CString::new(library().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: the library built for this test binary.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null(), "dlopen {path:?} failed");
        Handle(h)
    });
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: a live handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(h.0, n.as_ptr()) };
    assert!(!p.is_null(), "the harness library has no {name}");
    p
}

/// [`library_symbol`] as the function pointer type `F`, for a section's
/// table of the library's entries (`Lib { make: library_fn("h_tm_make"), .. }`).
///
/// # Safety
/// `F` is an `unsafe extern "C" fn` type of the C function's own signature
/// (tests/provider/*.c).
pub unsafe fn library_fn<F: Copy>(name: &str) -> F {
    assert_eq!(size_of::<F>(), size_of::<*mut std::ffi::c_void>(), "{name}: not a function pointer type");
    let p = library_symbol(name);
    // SAFETY: `p` is the function `name` of the library, which stays loaded;
    // `F` is its signature (the caller's contract) and pointer-sized.
    unsafe { std::mem::transmute_copy::<*mut std::ffi::c_void, F>(&p) }
}

/// The harness's output for the standard run (built and run once per test binary).
pub fn output() -> &'static str {
    static OUT: OnceLock<String> = OnceLock::new();
    OUT.get_or_init(|| {
        let exe = &built().0;
        let out = Command::new(exe)
            .args([scaled(LISTS), scaled(CQES), SEED as usize, LISTS / scaled(LISTS)].map(|n| n.to_string()))
            .output()
            .expect("run the libmlx5 harness");
        assert!(
            out.status.success(),
            "the libmlx5 harness failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("ASCII output")
    })
}

/// splitmix64, as the C half's `fill`.
pub fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `struct h_wc_base` (harness.h): the fields every section's completion
/// record starts with, as libmlx5's extended poller reports them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WcBaseC {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub wc_flags: u32,
    pub byte_len: u32,
    pub qp_num: u32,
}

/// The sections' random source: [`splitmix`] from a seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        splitmix(&mut self.0)
    }

    /// Below `n` (not 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `pct` times in 100.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// `fill(seed)` bytes, as the C half fills a fresh send queue.
pub fn fill(buf: &mut [u8], mut seed: u64) {
    for chunk in buf.chunks_mut(8) {
        let v = splitmix(&mut seed).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

pub fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    let b = s.as_bytes();
    let nib = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("bad hex digit {c}"),
    };
    (0..b.len() / 2).map(|i| nib(b[2 * i]) << 4 | nib(b[2 * i + 1])).collect()
}

/// A 64-byte-aligned, zeroed buffer (ring memory), reached only through its
/// raw pointer so that the ring under test and the checks share one provenance.
pub struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    pub fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len.max(64), 64).expect("ring layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory for a {len}-byte ring");
        Aligned { ptr, layout }
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised bytes; no ring writes while the slice lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}
