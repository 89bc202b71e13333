//! The harness every Rust peer benchmark includes (`#[path]`): the command
//! line, a counting global allocator, the measured region and the result line.
//!
//! ```text
//! BIN DEVICE WORKLOAD ITERATIONS [settle]
//! ```
//! WORKLOAD: `setup` (context to a connected RC loopback pair and a
//! registered buffer, ITERATIONS times), `write1`, `write32` (64 B RDMA WRITEs,
//! 32 per post with the last signaled), `read`, `send` (64 B SEND and its
//! RECV), `faa` (8 B fetch-and-add). Each operation posts and polls until its
//! completion arrives. With `settle` (callgrind runs), the program sleeps
//! after each post outside the counted region ([`peers_settle`]) so that the
//! count holds no empty polls of a completion still on its way.
//!
//! The result is one line:
//! `RESULT crate=C workload=W iters=N ns_per_op=T allocs_per_op=A empty_polls_per_op=E`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The system allocator, counting allocations (and reallocations).
pub struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(p, l) }
    }
}

/// The workloads.
pub const WORKLOADS: [&str; 6] = ["setup", "write1", "write32", "read", "send", "faa"];

/// The workloads of the async comparison (`rrddmma event|aio|aio-nospin`,
/// `peers-async-rdma`): `OP-SIZE-INFLIGHT`, each request signaled and
/// awaited, and `frontpage`, async-rdma's README exchange per iteration.
pub const AIO_WORKLOADS: [&str; 9] = [
    "write-64-1",
    "write-64-32",
    "write-65536-1",
    "write-65536-32",
    "read-64-1",
    "read-64-32",
    "read-65536-1",
    "read-65536-32",
    "frontpage",
];

/// The parsed command line.
#[derive(Clone)]
pub struct Args {
    /// RDMA device name.
    pub device: String,
    /// One of [`WORKLOADS`].
    pub workload: String,
    /// Operations (or set-ups) to run.
    pub iters: u64,
    /// Sleep after each post, outside the count (the async programs run
    /// without it).
    #[allow(dead_code)]
    pub settle: bool,
}

#[allow(dead_code)]
/// Reads the command line; exits with a usage line when it is wrong.
pub fn args(name: &str) -> Args {
    let a: Vec<String> = std::env::args().skip(1).collect();
    args_from(&a, name)
}

/// As [`args`], from the operands given.
pub fn args_from(a: &[String], name: &str) -> Args {
    let usage = || -> ! {
        eprintln!(
            "usage: {name} DEVICE setup|write1|write32|read|send|faa|OP-SIZE-INFLIGHT|frontpage ITERATIONS [settle]"
        );
        std::process::exit(2)
    };
    if a.len() < 3
        || a.len() > 4
        || !(WORKLOADS.contains(&a[1].as_str()) || AIO_WORKLOADS.contains(&a[1].as_str()))
        || (a.len() == 4 && a[3] != "settle")
    {
        usage()
    }
    let iters = a[2].parse().unwrap_or_else(|_| usage());
    Args { device: a[0].clone(), workload: a[1].clone(), iters, settle: a.len() == 4 }
}

/// The region callgrind counts (`--toggle-collect=peers_measured`).
#[no_mangle]
#[inline(never)]
pub fn peers_measured(f: &mut dyn FnMut()) {
    f()
}

/// Waits for the device to finish the operation just posted; callgrind's
/// count stops inside (`--toggle-collect=peers_settle` toggles it off).
#[no_mangle]
#[inline(never)]
pub fn peers_settle(on: bool) {
    if on {
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// Runs `f` (the whole timed loop) inside the measured region and prints the
/// result line; `empty` is how many polls found nothing.
pub fn report(krate: &str, a: &Args, empty: &AtomicU64, mut f: impl FnMut()) {
    let before = ALLOCS.load(Relaxed);
    let t = Instant::now();
    peers_measured(&mut f);
    let ns = t.elapsed().as_nanos() as f64;
    let allocs = ALLOCS.load(Relaxed) - before;
    let n = a.iters.max(1) as f64;
    println!(
        "RESULT crate={krate} workload={} iters={} ns_per_op={:.1} allocs_per_op={:.3} empty_polls_per_op={:.3}",
        a.workload,
        a.iters,
        ns / n,
        allocs as f64 / n,
        empty.load(Relaxed) as f64 / n
    );
}

/// Ends the program on a failed call.
#[cold]
pub fn die(what: &str, e: impl std::fmt::Debug) -> ! {
    eprintln!("{what}: {e:?}");
    std::process::exit(1)
}
