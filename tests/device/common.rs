//! Shared set-up of the device tests.

use std::time::{Duration, Instant};

use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Mr, Pd, Qp, QpCaps, Wc};
use rrddmma::wrap::connected_rc_pair;

/// Size of each side's buffer in [`Loopback`].
pub const LEN: usize = 4096;

/// The device the harness promised; panics (fails the test) when it is absent.
pub fn open_device() -> Context {
    let name = std::env::var("RRDDMMA_TEST_DEVICE").expect(
        "RRDDMMA_TEST_DEVICE is not set: device tests need an RDMA device. \
         Run `cargo xtask test`, or set it to a name from `ibv_devices`",
    );
    let ctx = Context::open(&name).unwrap_or_else(|e| panic!("device {name:?} promised by RRDDMMA_TEST_DEVICE: {e}"));
    eprintln!("device test on {name} ({})", rrddmma::build_info());
    ctx
}

/// A test written for ConnectX (mlx5) cannot run its body on this device:
/// logs `reason` and returns `true`, and the caller returns. Under
/// `cargo xtask test --device NAME --expect mlx5` (`RRDDMMA_EXPECT_DRIVER=mlx5`) it panics
/// instead, naming the test and the reason: there a skip means the run did
/// not test what it promises.
pub fn mlx5_test_skips(reason: &str) -> bool {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    if std::env::var("RRDDMMA_EXPECT_DRIVER").is_ok_and(|d| d == "mlx5") {
        panic!("{test} skipped under --expect mlx5: {reason} (run it on a ConnectX device, or drop --expect mlx5)");
    }
    log_skip(&test, reason);
    true
}

/// A test of a refusal has nothing to refuse on this device (it has the
/// feature; the positive tests cover it there): logs `reason`, returns
/// `true`, and the caller returns. Never a failure.
pub fn refusal_test_skips(reason: &str) -> bool {
    log_skip(std::thread::current().name().unwrap_or("?"), reason);
    true
}

/// A test cannot run its body here for a reason outside what it promises
/// on this device (a software device lacking an optional feature, a
/// missing helper module): logs `reason`, returns `true`, and the caller
/// returns. Never a failure; the report lists it with its reason.
pub fn test_skips(reason: &str) -> bool {
    log_skip(std::thread::current().name().unwrap_or("?"), reason);
    true
}

/// Prints the skip and, when `RRDDMMA_SKIP_LOG` names a file (set by
/// `cargo xtask test` for its report), appends `test<TAB>reason` to it.
fn log_skip(test: &str, reason: &str) {
    eprintln!("skipped: {reason}");
    if let Ok(path) = std::env::var("RRDDMMA_SKIP_LOG") {
        use std::io::Write;
        let line = format!("{test}\t{}\n", reason.replace(['\t', '\n'], " "));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
        if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
            panic!("RRDDMMA_SKIP_LOG={path}: cannot append the skip of {test}: {e}");
        }
    }
}

/// Polls `cq` until one completion arrives, or panics after 10 s.
pub fn poll_one(cq: &Cq) -> Wc {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wc = [Wc::default()];
    loop {
        if cq.poll(&mut wc).expect("ibv_poll_cq") == 1 {
            return wc[0];
        }
        assert!(Instant::now() < deadline, "no completion within 10 s");
        std::hint::spin_loop();
    }
}

/// Polls two completions, returned in the order of the given `wr_id`s.
pub fn poll_pair(cq: &Cq, first: u64, second: u64) -> (Wc, Wc) {
    let (mut x, mut y) = (None, None);
    for _ in 0..2 {
        let wc = poll_one(cq);
        match wc.wr_id() {
            id if id == first => x = Some(wc),
            id if id == second => y = Some(wc),
            other => panic!("unexpected completion {other}: {wc:?}"),
        }
    }
    (x.expect("first completion"), y.expect("second completion"))
}

/// Two RC QPs of the test device connected to each other, one CQ, and a
/// registered buffer on each side.
pub struct Loopback {
    pub ctx: Context,
    pub pd: Pd,
    pub cq: Cq,
    pub qa: Qp,
    pub qb: Qp,
    // Declared before the buffers: dropped (deregistered) first.
    pub mr_a: Mr,
    pub mr_b: Mr,
    buf_a: Box<[u8]>,
    buf_b: Box<[u8]>,
}

impl Loopback {
    pub fn new(caps: QpCaps) -> Loopback {
        let ctx = open_device();
        let pd = Pd::alloc(&ctx).expect("ibv_alloc_pd");
        let cq = Cq::create(&ctx, 256).expect("ibv_create_cq");
        let opts = ConnectOpts::default()
            .access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC);
        let (qa, qb) = connected_rc_pair(&pd, &cq, &cq, caps, 0x1234, &opts).expect("connect RC pair");
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mut buf_a = vec![0u8; LEN].into_boxed_slice();
        let mut buf_b = vec![0u8; LEN].into_boxed_slice();
        // SAFETY: the boxes are owned by the same struct and dropped after the
        // MRs (field order); their heap memory never moves.
        let (mr_a, mr_b) = unsafe {
            (
                Mr::register(&pd, buf_a.as_mut_ptr(), LEN, access).expect("ibv_reg_mr a"),
                Mr::register(&pd, buf_b.as_mut_ptr(), LEN, access).expect("ibv_reg_mr b"),
            )
        };
        Loopback { ctx, pd, cq, qa, qb, mr_a, mr_b, buf_a, buf_b }
    }

    /// Side a's buffer (only between operations: the device may write it).
    pub fn a(&mut self) -> &mut [u8] {
        &mut self.buf_a
    }

    /// Side b's buffer (only between operations).
    pub fn b(&mut self) -> &mut [u8] {
        &mut self.buf_b
    }
}

/// A registered heap buffer; the region is deregistered before the memory is freed.
pub struct Buf {
    pub mr: Mr,
    mem: Box<[u8]>,
}

impl Buf {
    pub fn new(pd: &Pd, len: usize) -> Buf {
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mut mem = vec![0u8; len].into_boxed_slice();
        // SAFETY: `mem` lives in the same struct and is dropped after `mr`.
        let mr = unsafe { Mr::register(pd, mem.as_mut_ptr(), len, access) }.expect("ibv_reg_mr");
        Buf { mr, mem }
    }

    /// The bytes (only between operations: the device may write them).
    pub fn bytes(&mut self) -> &mut [u8] {
        &mut self.mem
    }
}

/// Connect options with remote access allowed; the GID is the default's
/// automatic choice (the device's RoCE v2 GID).
pub fn opts(_ctx: &Context) -> ConnectOpts {
    ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC)
}

/// Connects `qa` and `qb` to each other through `o` (port, GID, access),
/// with start PSNs `psn_a` and `psn_b`.
pub fn connect_pair(qa: &Qp, qb: &Qp, o: &ConnectOpts, (psn_a, psn_b): (u32, u32)) {
    let gi = o.gid_index_on(qa.pd().context()).expect("the GID index of the connect options");
    let port = o.get_port();
    let ea = qa.endpoint(port, gi, psn_a).expect("endpoint a");
    let eb = qb.endpoint(port, gi, psn_b).expect("endpoint b");
    qa.connect(&eb, ea.psn, o).expect("connect a to b");
    qb.connect(&ea, eb.psn, o).expect("connect b to a");
}

/// The running kernel's release (`uname -r`).
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string()
}

/// The running kernel's (major, minor).
pub fn kernel_version() -> (u32, u32) {
    let r = kernel();
    let mut it = r.split(['.', '-', '+']).map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The message of the panic `f` must raise (a programming error the
/// library refuses before any call).
pub fn panic_message<R>(f: impl FnOnce() -> R) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err().expect("the call must panic");
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}
