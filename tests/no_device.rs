//! Opening a device on a machine without one gives the promised typed
//! errors (`DeviceNotFound`, `NoSupportedDevice`), never a raw errno from
//! `ibv_get_device_list`.

use rrddmma::prim::{device_names, Context, Error};

/// Whether the kernel has any RDMA device.
fn kernel_has_devices() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn a_name_no_device_has_is_device_not_found() {
    match Context::open("no_such_device_9") {
        Err(e @ Error::DeviceNotFound { .. }) => {
            let Error::DeviceNotFound { name, available } = &e else { unreachable!() };
            assert_eq!(name, "no_such_device_9");
            let msg = e.to_string();
            assert!(msg.contains("no_such_device_9"), "{msg}");
            if available.is_empty() {
                assert!(msg.contains("no RDMA device on this machine") && msg.contains("rdma link add"), "{msg}");
            }
        }
        other => panic!("expected DeviceNotFound, got {other:?}"),
    }
}

#[test]
fn without_any_device_open_first_is_no_supported_device() {
    if kernel_has_devices() {
        eprintln!("this host has RDMA devices: the no-device branch is checked on hosts without them (CI)");
        return;
    }
    assert_eq!(device_names().expect("an empty list, not an error"), Vec::<String>::new());
    match Context::open_first() {
        Err(e @ Error::NoSupportedDevice { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("the kernel has no RDMA device"), "{msg}");
        }
        other => panic!("expected NoSupportedDevice, got {other:?}"),
    }
    assert!(matches!(Context::open("mlx5_0"), Err(Error::DeviceNotFound { .. })));
    assert!(matches!(Context::open_guid(0x1234), Err(Error::DeviceNotFound { .. } | Error::NoSupportedDevice { .. })));
}
