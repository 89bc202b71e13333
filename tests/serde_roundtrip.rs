//! Every serde type round-trips through JSON (`cargo test --features serde`).
#![cfg(feature = "serde")]

use std::fmt::Debug;
use std::time::Duration;

use rrddmma::ctrl::{ClusterConfig, QpInfo, RankSource, Resolved};
use rrddmma::prim::{AccessFlags, Endpoint, Gid, Mtu, QpCaps, RemoteMr};
use serde::{de::DeserializeOwned, Serialize};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(v: &T) -> String {
    let text = serde_json::to_string(v).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, v, "{text}");
    text
}

fn gid() -> Gid {
    Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55])
}

#[test]
fn wire_values_round_trip() {
    let e = Endpoint { qpn: 0x11, psn: 0xab_cdef, lid: 7, gid: gid() };
    let text = round_trip(&e);
    assert!(text.contains("\"psn\":11259375"), "{text}");
    round_trip(&QpInfo::new(&e, 3, 1, Mtu::MTU_4096));
    round_trip(&RemoteMr { addr: 0x7f00_0000_1000, len: 1 << 20, rkey: 0xdead });
    round_trip(&gid());
    round_trip(&Mtu::MTU_1024);
    round_trip(&(AccessFlags::REMOTE_WRITE | AccessFlags::LOCAL_WRITE));
    round_trip(&QpCaps::default().max_send_wr(64).max_recv_wr(32).max_send_sge(2).max_recv_sge(1).max_inline_data(64));
}

#[test]
fn config_values_round_trip() {
    let mut c = ClusterConfig::default();
    c.hosts = vec!["10.0.0.1:18650".into(), "10.0.0.2:18650".into()];
    c.secret = Some(b"k".to_vec());
    c.rank = Some(1);
    c.devices = vec!["mlx5_0".into(), "mlx5_1".into()];
    c.op_timeout = Duration::from_millis(250);
    round_trip(&c);
    round_trip(&ClusterConfig::default());
    round_trip(&Resolved {
        rank: 1,
        size: 2,
        coordinator: "10.0.0.1:18650".parse().unwrap(),
        rank_source: RankSource::Slurm,
        device: Some("mlx5_0".into()),
    });
}
