//! Shared set-up of the device tests.

use std::time::{Duration, Instant};

use rrddmma::prim::{Context, Cq, Wc};

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
