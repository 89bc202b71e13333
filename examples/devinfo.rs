//! Prints RDMA devices' attributes in the layout of rdma-core's
//! `ibv_devinfo`, read through rrddmma's device and port queries.
//!
//! ```text
//! cargo run --example devinfo -- [-d DEVICE] [-i PORT] [-v] [-l]
//! ```
//!
//! `-v` adds the device limits, the extended attributes, the port details and
//! the GID table. A bad flag prints the usage and exits with code 2; a device
//! that cannot be read exits with code 1.

use std::process::ExitCode;

use rrddmma::bindings as ffi;
use rrddmma::prim::{device_names, Context, GidType};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "Usage: devinfo             print the ca attributes\n\n\
Options:\n  \
  -d, --ib-dev=<dev>     use IB device <dev> (default all devices)\n  \
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n  \
  -l, --list             print only the IB devices names\n  \
  -v, --verbose          print all the attributes of the IB device(s)\n";

#[derive(Debug, Default)]
struct Opts {
    dev: Option<String>,
    port: Option<u8>,
    list: bool,
    verbose: bool,
}

/// The flags, getopt-style (`lexopt`): `-i1`, `-i 1`, `--ib-port=1`,
/// `--ib-port 1`, `-vl`. `None`: help was asked for.
fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Option<Opts>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut o = Opts::default();
    let mut p = lexopt::Parser::from_args(args);
    while let Some(arg) = p.next()? {
        match arg {
            Short('d') | Long("ib-dev") => o.dev = Some(p.value()?.string()?),
            Short('i') | Long("ib-port") => {
                let v = p.value()?.string()?;
                o.port = Some(v.parse::<u8>().ok().filter(|&p| p >= 1).ok_or(format!("invalid port {v:?}"))?);
            }
            Short('l') | Long("list") => o.list = true,
            Short('v') | Long("verbose") => o.verbose = true,
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Some(o))
}

fn cstr(b: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn guid_str(be: u64) -> String {
    let g = u64::from_be(be);
    format!("{:04x}:{:04x}:{:04x}:{:04x}", (g >> 48) & 0xffff, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff)
}

fn transport_str(t: ffi::ibv_transport_type) -> &'static str {
    match t.0 {
        0 => "InfiniBand",
        1 => "iWARP",
        2 => "usNIC",
        3 => "usNIC UDP",
        4 => "unspecified",
        _ => "invalid transport",
    }
}

fn port_state_str(s: ffi::ibv_port_state) -> &'static str {
    match s.0 {
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        _ => "invalid state",
    }
}

fn phys_state_str(s: u8) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION TRAINNING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY TEST",
        _ => "invalid physical state",
    }
}

fn mtu_str(m: ffi::ibv_mtu) -> String {
    match m.0 {
        1..=5 => (128u32 << m.0).to_string(),
        _ => "invalid MTU".into(),
    }
}

fn speed_str(code: u8) -> &'static str {
    match code {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

fn link_layer_str(l: u8) -> &'static str {
    match l {
        0 => "Unspecified",
        1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

fn atomic_str(a: ffi::ibv_atomic_cap) -> &'static str {
    match a.0 {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    }
}

fn show(name: &str, o: &Opts) -> Res<()> {
    let ctx = Context::open(name)?;
    let x = ctx.query_device_ex()?;
    let d = &x.orig_attr;
    if let Some(p) = o.port.filter(|&p| p > d.phys_port_cnt) {
        return Err(format!("Invalid port {p} requested for device {name} ({} port(s))", d.phys_port_cnt).into());
    }
    // SAFETY: a live context points at its device, which lives as long.
    let (transport, ibdev_path, comp_vectors) = unsafe {
        let raw = &*ctx.as_ptr();
        ((*raw.device).transport_type, cstr(&(*raw.device).ibdev_path), raw.num_comp_vectors)
    };
    println!("hca_id:\t{name}");
    println!("\ttransport:\t\t\t{} ({})", transport_str(transport), transport.0);
    let fw = cstr(&d.fw_ver);
    if !fw.is_empty() {
        println!("\tfw_ver:\t\t\t\t{fw}");
    }
    println!("\tnode_guid:\t\t\t{}", guid_str(d.node_guid));
    println!("\tsys_image_guid:\t\t\t{}", guid_str(d.sys_image_guid));
    println!("\tvendor_id:\t\t\t{:#06x}", d.vendor_id);
    println!("\tvendor_part_id:\t\t\t{}", d.vendor_part_id);
    println!("\thw_ver:\t\t\t\t{:#X}", d.hw_ver);
    if let Ok(board) = std::fs::read_to_string(format!("{ibdev_path}/board_id")) {
        println!("\tboard_id:\t\t\t{}", board.trim_end());
    }
    println!("\tphys_port_cnt:\t\t\t{}", d.phys_port_cnt);
    if o.verbose {
        println!("\tmax_mr_size:\t\t\t{:#x}", d.max_mr_size);
        println!("\tpage_size_cap:\t\t\t{:#x}", d.page_size_cap);
        println!("\tmax_qp:\t\t\t\t{}", d.max_qp);
        println!("\tmax_qp_wr:\t\t\t{}", d.max_qp_wr);
        println!("\tdevice_cap_flags:\t\t{:#010x}", d.device_cap_flags);
        println!("\tmax_sge:\t\t\t{}", d.max_sge);
        println!("\tmax_sge_rd:\t\t\t{}", d.max_sge_rd);
        println!("\tmax_cq:\t\t\t\t{}", d.max_cq);
        println!("\tmax_cqe:\t\t\t{}", d.max_cqe);
        println!("\tmax_mr:\t\t\t\t{}", d.max_mr);
        println!("\tmax_pd:\t\t\t\t{}", d.max_pd);
        println!("\tmax_qp_rd_atom:\t\t\t{}", d.max_qp_rd_atom);
        println!("\tmax_res_rd_atom:\t\t{}", d.max_res_rd_atom);
        println!("\tmax_qp_init_rd_atom:\t\t{}", d.max_qp_init_rd_atom);
        println!("\tatomic_cap:\t\t\t{} ({})", atomic_str(d.atomic_cap), d.atomic_cap.0);
        println!("\tmax_mw:\t\t\t\t{}", d.max_mw);
        println!("\tmax_mcast_grp:\t\t\t{}", d.max_mcast_grp);
        println!("\tmax_ah:\t\t\t\t{}", d.max_ah);
        println!("\tmax_srq:\t\t\t{}", d.max_srq);
        if d.max_srq != 0 {
            println!("\tmax_srq_wr:\t\t\t{}", d.max_srq_wr);
            println!("\tmax_srq_sge:\t\t\t{}", d.max_srq_sge);
        }
        println!("\tmax_pkeys:\t\t\t{}", d.max_pkeys);
        println!("\tlocal_ca_ack_delay:\t\t{}", d.local_ca_ack_delay);
        println!("\tgeneral_odp_caps:\t\t{:#x}", x.odp_caps.general_caps);
        println!("\trc_odp_caps:\t\t\t{:#x}", x.odp_caps.per_transport_caps.rc_odp_caps);
        if x.completion_timestamp_mask != 0 {
            println!("\tcompletion timestamp_mask:\t\t\t{:#018x}", x.completion_timestamp_mask);
        } else {
            println!("\tcompletion_timestamp_mask not supported");
        }
        if x.hca_core_clock != 0 {
            println!("\thca_core_clock:\t\t\t{}kHZ", x.hca_core_clock);
        } else {
            println!("\tcore clock not supported");
        }
        println!("\tdevice_cap_flags_ex:\t\t{:#X}", x.device_cap_flags_ex);
        if x.max_dm_size != 0 {
            println!("\tmaximum available device memory:\t{}Bytes", x.max_dm_size);
        }
        println!("\tnum_comp_vectors:\t\t{comp_vectors}");
    }
    for port in (1..=d.phys_port_cnt).filter(|p| o.port.is_none_or(|want| want == *p)) {
        let pa = ctx.query_port(port).map_err(|e| format!("Failed to query port {port} props: {e}"))?;
        let a = &pa.raw;
        println!("\t\tport:\t{port}");
        println!("\t\t\tstate:\t\t\t{} ({})", port_state_str(a.state), a.state.0);
        println!("\t\t\tmax_mtu:\t\t{} ({})", mtu_str(a.max_mtu), a.max_mtu.0);
        println!("\t\t\tactive_mtu:\t\t{} ({})", mtu_str(a.active_mtu), a.active_mtu.0);
        println!("\t\t\tsm_lid:\t\t\t{}", a.sm_lid);
        println!("\t\t\tport_lid:\t\t{}", a.lid);
        println!("\t\t\tport_lmc:\t\t{:#04x}", a.lmc);
        println!("\t\t\tlink_layer:\t\t{}", link_layer_str(a.link_layer));
        if o.verbose {
            println!("\t\t\tmax_msg_sz:\t\t{:#x}", a.max_msg_sz);
            println!("\t\t\tport_cap_flags:\t\t{:#010x}", a.port_cap_flags);
            println!("\t\t\tport_cap_flags2:\t{:#06x}", a.port_cap_flags2);
            println!("\t\t\tbad_pkey_cntr:\t\t{:#x}", a.bad_pkey_cntr);
            println!("\t\t\tqkey_viol_cntr:\t\t{:#x}", a.qkey_viol_cntr);
            println!("\t\t\tsm_sl:\t\t\t{}", a.sm_sl);
            println!("\t\t\tpkey_tbl_len:\t\t{}", a.pkey_tbl_len);
            println!("\t\t\tgid_tbl_len:\t\t{}", a.gid_tbl_len);
            println!("\t\t\tsubnet_timeout:\t\t{}", a.subnet_timeout);
            let lanes = pa.width().lanes().map_or("invalid width".to_string(), |l| l.to_string());
            println!("\t\t\tactive_width:\t\t{lanes}X ({})", a.active_width);
            println!("\t\t\tactive_speed:\t\t{} ({})", speed_str(a.active_speed), a.active_speed);
            if transport.0 == 0 {
                println!("\t\t\tphys_state:\t\t{} ({})", phys_state_str(a.phys_state), a.phys_state);
            }
            let ethernet = pa.is_ethernet();
            for e in ctx.gid_table(port)? {
                let kind = if ethernet {
                    match e.gid_type {
                        GidType::ROCE_V2 => ", RoCE v2",
                        _ => ", RoCE v1",
                    }
                } else {
                    ""
                };
                let text = if e.gid_type == GidType::ROCE_V2 {
                    std::net::Ipv6Addr::from(e.gid.0).to_string()
                } else {
                    e.gid.0.chunks(2).map(|p| format!("{:02x}{:02x}", p[0], p[1])).collect::<Vec<_>>().join(":")
                };
                println!("\t\t\tGID[{:3}]:\t\t{text}{kind}", e.index);
            }
        }
        println!();
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse(std::env::args_os().skip(1)) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("devinfo: {msg}");
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let names = match device_names() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("devinfo: {e}");
            return ExitCode::from(1);
        }
    };
    if o.list {
        println!("{} HCA{} found:", names.len(), if names.len() == 1 { "" } else { "s" });
        for n in &names {
            println!("\t{n}");
        }
        println!();
        return ExitCode::SUCCESS;
    }
    let wanted = match &o.dev {
        Some(d) => vec![d.clone()],
        None if names.is_empty() => {
            eprintln!("devinfo: No IB devices found");
            return ExitCode::from(1);
        }
        None => names,
    };
    for name in &wanted {
        if let Err(e) = show(name, &o) {
            eprintln!("devinfo: {name}: {e}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
