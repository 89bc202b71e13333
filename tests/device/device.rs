//! Devices, ports and GID tables as the device reports them.

use rrddmma::prim::{Context, GidType};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn port_speed_width_and_gid_table() {
    let ctx = open_device();
    let port = ctx.query_port(1).unwrap();
    assert!(port.is_active());
    // Speed and width print whatever the code (rxe reports its netdev's).
    eprintln!("port 1: {port:?}, {} {}", port.speed(), port.width());
    assert!(port.gid_table_len() > 0);

    let table = ctx.gid_table(1).unwrap();
    assert!(!table.is_empty(), "GID table of port 1 is empty");
    for e in &table {
        assert_eq!(e.port, 1);
        eprintln!("gid {} {} {} {:?} {:?}", e.index, e.gid, e.gid_type, e.netdev(), e.ipv4());
    }
    // The one-call table (ibv_query_gid_table) is what the entries say one
    // at a time (ibv_query_gid_ex), every valid index, in order.
    let one_by_one: Vec<_> = (0..port.gid_table_len())
        .filter_map(|i| ctx.query_gid_entry(1, i).ok())
        .filter(|e| !e.gid.is_zero())
        .map(|e| (e.index, e.gid, e.gid_type, e.netdev()))
        .collect();
    let whole: Vec<_> = table.iter().map(|e| (e.index, e.gid, e.gid_type, e.netdev())).collect();
    assert_eq!(whole, one_by_one, "ibv_query_gid_table and ibv_query_gid_ex disagree");
    let idx = ctx.roce_v2_gid_index(1).unwrap();
    // The documented rule, applied to the table in index order: the first
    // RoCE v2 entry mapping IPv4, else the first RoCE v2 entry, else 0.
    let v2 = || table.iter().filter(|e| e.gid_type == GidType::ROCE_V2 && e.index <= 255);
    let rule = v2().find(|e| e.ipv4().is_some()).or_else(|| v2().next()).map_or(0, |e| e.index);
    assert_eq!(u32::from(idx), rule, "roce_v2_gid_index against its rule over {table:?}");
    let chosen = ctx.query_gid_entry(1, u32::from(idx)).unwrap();
    if port.is_ethernet() {
        assert_eq!(chosen.gid_type, GidType::ROCE_V2, "{chosen:?}");
        assert!(chosen.ipv4().is_some(), "recommended RoCE v2 GID maps an IPv4 address: {chosen:?}");
        assert!(chosen.netdev().is_some(), "a RoCE GID names its netdev: {chosen:?}");
        assert_eq!(ctx.query_gid(1, u32::from(idx)).unwrap(), chosen.gid, "ibv_query_gid agrees with ibv_query_gid_ex");
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn open_by_guid_and_extended_attributes() {
    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    assert!(attr.orig_attr.max_qp > 0 && attr.orig_attr.max_cqe > 0);
    assert_eq!(attr.orig_attr.max_qp_wr, ctx.query_device().unwrap().max_qp_wr);
    let guid = u64::from_be(attr.orig_attr.node_guid);
    let again = Context::open_guid(guid).unwrap();
    assert_eq!(again.name(), ctx.name());
    assert!(matches!(
        Context::open_guid(guid ^ 0xdead_0000_0000_beef),
        Err(rrddmma::prim::Error::DeviceNotFound { .. })
    ));
}
