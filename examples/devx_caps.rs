//! Prints the device capabilities researchers look at first, read through
//! DEVX (`QUERY_HCA_CAP`): `cargo run --example devx_caps -- [DEVICE]`
//! (default: the first device).
//!
//! On a device that is not mlx5 (SoftRoCE, siw) DEVX is refused before any
//! command is sent, and the example prints the refusal and exits with 0:
//! the refusal is the answer. Other failures exit with 1.

use std::process::ExitCode;

use rrddmma::mlx5dv::devx::{DevxContext, HcaCaps};
use rrddmma::mlx5dv::prm::CapMode;
use rrddmma::prim::{device_names, Error};

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn print(name: &str, cur: &HcaCaps, max: &HcaCaps) {
    println!("{name}: DEVX capabilities (current / maximum where they differ)");
    println!("  port type            {}", if cur.is_ethernet() { "Ethernet" } else { "InfiniBand" });
    println!("  log max QP / CQ / SRQ {} / {} / {}", cur.log_max_qp(), cur.log_max_cq(), cur.log_max_srq());
    println!("  log max mkey / PD    {} / {}", cur.log_max_mkey(), cur.log_max_pd());
    println!("  log max KLM list     {}", cur.log_max_klm_list_size());
    println!("  log max message      {}", cur.log_max_msg());
    println!("  RoCE / atomic / DCT  {} / {} / {}", yes(cur.roce()), yes(cur.atomic()), yes(cur.dct()));
    println!("  QoS                  {} (max {})", yes(cur.qos()), yes(max.qos()));
    println!("  UDP sport by RTS2RTS {}", yes(cur.rts2rts_qp_udp_sport()));
    let (lag, ports) = cur.lag();
    println!(
        "  LAG port affinity    {} ({} LAG ports; by RTS2RTS {})",
        yes(lag),
        ports,
        yes(cur.rts2rts_lag_tx_port_affinity())
    );
    println!("  QPC extension        {}", yes(cur.qpc_extension()));
    let (chan, err) = cur.log_max_dci_streams();
    println!("  DCI streams          log max channels {chan}, log max errored {err}");
    let (tm, tm_sz) = cur.tag_matching();
    println!("  tag matching         {} (log list size {tm_sz})", yes(tm));
    println!("  device clock         {} kHz", cur.device_frequency_khz());
    match cur.atomic_caps() {
        Some(a) => println!(
            "  atomics              operations {:#06x}, sizes on QPs {:#06x}, on DCIs {:#06x} (16 B on QPs: {}, 32 B: {})",
            a.operations,
            a.size_qp,
            a.size_dc,
            yes(cur.check_atomic_size(16, false).is_ok()),
            yes(cur.check_atomic_size(32, false).is_ok())
        ),
        None => println!("  atomics              (no atomic group)"),
    }
    match cur.eth_offloads() {
        Some(e) => println!(
            "  Ethernet offloads    csum {}, VLAN strip {}, LRO {}, VLAN insert {}, inline mode {}, log max LSO {}, SWP {}; \
             send_eth_hw_vlan allowed: {}",
            yes(e.csum),
            yes(e.vlan),
            yes(e.lro),
            yes(e.wqe_vlan_insert),
            e.wqe_inline_mode,
            e.max_lso_log,
            yes(e.swp),
            yes(cur.hw_vlan_insert().is_some())
        ),
        None => println!("  Ethernet offloads    (InfiniBand, or no group)"),
    }
    if let Some(odp) = cur.odp() {
        for (t, o) in ["RC", "UC", "UD", "XRC", "DC"].iter().zip(odp) {
            println!(
                "  ODP {t:<4}             send {}, recv {}, write {}, read {}, atomic {}, SRQ recv {}",
                yes(o.send),
                yes(o.receive),
                yes(o.write),
                yes(o.read),
                yes(o.atomic),
                yes(o.srq_receive)
            );
        }
    }
    if let Some(r) = cur.roce_caps() {
        println!(
            "  RoCE                 APM {}, software source port {}, source ports {}..={}",
            yes(r.apm),
            yes(r.sw_src_udp_port),
            r.min_src_udp_port,
            r.max_src_udp_port
        );
    }
}

fn main() -> ExitCode {
    let name = match std::env::args().nth(1) {
        Some(n) => n,
        None => match device_names().map(|v| v.into_iter().next()) {
            Ok(Some(n)) => n,
            Ok(None) => {
                eprintln!("devx_caps: no RDMA device");
                return ExitCode::from(1);
            }
            Err(e) => {
                eprintln!("devx_caps: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let ctx = match DevxContext::open(&name) {
        Ok(c) => c,
        Err(e @ Error::Unsupported { .. }) => {
            println!("{name}: {e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("devx_caps: {e}");
            return ExitCode::from(1);
        }
    };
    match (HcaCaps::query(&ctx, CapMode::CUR), HcaCaps::query(&ctx, CapMode::MAX)) {
        (Ok(cur), Ok(max)) => {
            print(&name, &cur, &max);
            ExitCode::SUCCESS
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("devx_caps: {e}");
            ExitCode::from(1)
        }
    }
}
