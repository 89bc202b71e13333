//! Create and drop 1,000 of each object; the kernel's resource counts
//! (`rdma resource show`) come back to where they started.

use std::collections::BTreeMap;
use std::process::Command;

use rrddmma::prim::{Ah, AhAttr, CompChannel, Context, Cq, Pd, Qp, QpCaps, Srq};

use crate::common::{open_device, Buf};
use rrddmma::prim::QpType;

const N: usize = 1000;

/// `rdma resource show` for one device: `pd 1 cq 2 qp 0 ...` as a map.
fn counts(dev: &str) -> BTreeMap<String, u64> {
    let out = Command::new("rdma").args(["resource", "show"]).output().expect("run `rdma resource show` (iproute2)");
    assert!(out.status.success(), "rdma resource show: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(&format!("{dev}:")))
        .unwrap_or_else(|| panic!("no line for {dev} in:\n{text}"));
    let words: Vec<&str> = line.split_whitespace().skip(2).collect();
    words.chunks(2).filter_map(|kv| Some((kv[0].to_string(), kv.get(1)?.parse().ok()?))).collect()
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn thousand_of_each_object_and_back() {
    let ctx = open_device();
    let dev = ctx.name().to_string();
    let start = counts(&dev);
    eprintln!("resources before: {start:?}");

    for _ in 0..N {
        drop(Context::open(&dev).unwrap());
    }
    {
        let pds: Vec<Pd> = (0..N).map(|_| Pd::alloc(&ctx).unwrap()).collect();
        let cqs: Vec<Cq> = (0..N).map(|_| Cq::create(&ctx, 4).unwrap()).collect();
        let mid = counts(&dev);
        assert_eq!(mid["pd"], start["pd"] + N as u64, "{mid:?}");
        assert_eq!(mid["cq"], start["cq"] + N as u64, "{mid:?}");
        let pd = &pds[0];
        let mrs: Vec<Buf> = (0..N).map(|_| Buf::new(pd, 64)).collect();
        let srqs: Vec<Srq> = (0..N).map(|_| Srq::builder(pd).max_wr(4).build().unwrap()).collect();
        let caps = QpCaps::default().max_send_wr(4).max_recv_wr(4);
        let qps: Vec<_> =
            (0..N).map(|i| Qp::builder(pd, QpType::RC, &cqs[i], &cqs[i]).caps(caps).build().unwrap()).collect();
        let gid_index = ctx.roce_v2_gid_index(1).unwrap();
        let dgid = ctx.query_gid(1, u32::from(gid_index)).unwrap();
        let ahs: Vec<Ah> = (0..N).map(|_| Ah::create(pd, &AhAttr::global(1, gid_index, dgid)).unwrap()).collect();
        let channels: Vec<CompChannel> = (0..N).map(|_| CompChannel::create(&ctx).unwrap()).collect();
        let chan_cqs: Vec<Cq> = channels.iter().map(|ch| Cq::builder(&ctx, 4).channel(ch).build().unwrap()).collect();
        let full = counts(&dev);
        eprintln!("resources with {N} of each: {full:?}");
        assert_eq!(full["qp"], start["qp"] + N as u64);
        assert_eq!(full["mr"], start["mr"] + N as u64);
        assert_eq!(full["srq"], start["srq"] + N as u64);
        assert_eq!(full["cq"], start["cq"] + 2 * N as u64);
        drop((chan_cqs, channels, ahs, qps, srqs, mrs, cqs, pds));
    }
    let end = counts(&dev);
    eprintln!("resources after: {end:?}");
    assert_eq!(end, start, "every object was released");
}
