//! Which rdma-core userspace the tests run on, and what the harness says it
//! is. `RRDDMMA_EXPECT_USERSPACE=44|59` (set by the kernel matrix, the
//! second pointing the `dlopen` build at the v59 libraries with
//! `RRDDMMA_LIB*`) names the rdma-core release whose libibverbs must be
//! loaded; the rows that depend on it (FLUSH, ODP prefetch) take their
//! expected path from it.

use crate::common::open_device;

/// The rdma-core release of the libibverbs mapped into this process, read
/// off its file name in `/proc/self/maps` (`libibverbs.so.1.15.59.0` → 59);
/// `None` when none is mapped (a static build).
pub fn loaded_rdma_core() -> Option<u32> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find_map(|path| {
        let name = path.rsplit('/').next()?;
        let version = name.strip_prefix("libibverbs.so.")?;
        version.split('.').nth(2)?.parse().ok()
    })
}

/// The rdma-core release the tests run on: the harness's word
/// (`RRDDMMA_EXPECT_USERSPACE`), checked against the library loaded; else
/// the loaded library's, or the static build's (`build_info()`).
pub fn userspace() -> u32 {
    open_device();
    let loaded = loaded_rdma_core();
    let built = rrddmma::build_info().rdma_core.split('.').next().and_then(|m| m.parse().ok());
    let actual = loaded.or(built).expect("neither a mapped libibverbs nor a static build names the rdma-core release");
    if let Ok(want) = std::env::var("RRDDMMA_EXPECT_USERSPACE") {
        let want: u32 = want.parse().expect("RRDDMMA_EXPECT_USERSPACE is a release number (44, 59)");
        assert_eq!(actual, want, "the harness promised rdma-core {want}, the process runs {actual}");
    }
    actual
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn the_userspace_is_the_one_the_harness_names() {
    let v = userspace();
    eprintln!("userspace: rdma-core {v} (libibverbs mapped: {:?}), {}", loaded_rdma_core(), rrddmma::build_info());
}
