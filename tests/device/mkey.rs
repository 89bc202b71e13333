//! Indirect memory keys: refused off mlx5 with the capability named, before
//! any libmlx5 call; created, read and destroyed on ConnectX.

use rrddmma::mlx5dv::{self, mkey::Mkey, mkey::INDIRECT_FEATURE};
use rrddmma::prim::{AccessFlags, Error, Mr, Pd};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn indirect_mkey_unsupported_off_mlx5_created_on_mlx5() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    if !mlx5dv::is_supported(&ctx) {
        match Mkey::new_indirect(&pd, 4) {
            Err(Error::Unsupported { op, feature }) => {
                assert_eq!(op, "mlx5dv_create_mkey");
                assert_eq!(feature, INDIRECT_FEATURE);
            }
            other => panic!("Mkey::new_indirect off mlx5: expected Unsupported, got {other:?}"),
        }
        return;
    }
    // ConnectX: the key exists, its keys are distinct from a region's, and
    // it keeps a held region registered past the caller's handle.
    let mut key = Mkey::new_indirect(&pd, 4).unwrap();
    assert_eq!(key.max_entries(), 4);
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the region and the key, which drop first.
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    assert_ne!(key.lkey(), mr.lkey());
    key.hold(&mr);
    drop(mr);
    assert_eq!(key.held_regions(), 1);
    drop(key);
}
