//! The mlx5dv encoders and decoders against the installed `mlx5dv.h`: a C
//! program (tests/oracle/mlx5_oracle.c) applies the header's own helpers to
//! pseudo-random inputs and prints inputs and bytes; the Rust side encodes
//! the same inputs and must produce the same bytes. Needs a C compiler and
//! the rdma-core headers (Debian: gcc, libibverbs-dev).

use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use rrddmma::mlx5dv::clock::{ts_to_ns, ClockInfo};
use rrddmma::mlx5dv::cqe::{self, Cqe64};
use rrddmma::mlx5dv::seg::{AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, EthSeg, InlineSeg, RaddrSeg};

const N: usize = 10_000;

/// The oracle's output, built and run once per test binary.
fn oracle() -> &'static str {
    static OUT: OnceLock<String> = OnceLock::new();
    OUT.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/mlx5_oracle.c");
        let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mlx5_oracle");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let st = Command::new(&cc)
            .args(["-O2", "-mssse3", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {cc} to build the mlx5dv.h oracle: {e}"));
        assert!(st.success(), "building the mlx5dv.h oracle failed (needs rdma-core headers)");
        let out = Command::new(&exe).arg(N.to_string()).output().expect("run the oracle");
        assert!(out.status.success());
        String::from_utf8(out.stdout).expect("ASCII output")
    })
}

fn lines(kind: &str) -> impl Iterator<Item = Vec<&'static str>> + '_ {
    let prefix = format!("{kind} ");
    oracle().lines().filter(move |l| l.starts_with(&prefix)).map(|l| l.split(' ').skip(1).collect())
}

fn bytes<T>(v: &T) -> Vec<u8> {
    // SAFETY: reading the bytes of a plain `#[repr(C)]` value without padding.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

fn num<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().unwrap()
}

#[test]
fn struct_sizes_and_offsets_match_the_header() {
    let sizes: HashMap<&str, usize> = lines("S").map(|f| (f[0], num(f[1]))).collect();
    let offs: HashMap<(&str, &str), usize> = lines("L").map(|f| ((f[0], f[1]), num(f[2]))).collect();
    let check_size = |c: &str, rust: usize| assert_eq!(sizes[c], rust, "sizeof(struct {c})");
    let off = |c: &str, f: &str| offs[&(c, f)];
    check_size("mlx5_wqe_ctrl_seg", size_of::<CtrlSeg>());
    assert_eq!(off("mlx5_wqe_ctrl_seg", "opmod_idx_opcode"), offset_of!(CtrlSeg, opmod_idx_opcode));
    assert_eq!(off("mlx5_wqe_ctrl_seg", "qpn_ds"), offset_of!(CtrlSeg, qpn_ds));
    assert_eq!(off("mlx5_wqe_ctrl_seg", "signature"), offset_of!(CtrlSeg, signature));
    assert_eq!(off("mlx5_wqe_ctrl_seg", "dci_stream_channel_id"), offset_of!(CtrlSeg, dci_stream_channel_id));
    assert_eq!(off("mlx5_wqe_ctrl_seg", "fm_ce_se"), offset_of!(CtrlSeg, fm_ce_se));
    assert_eq!(off("mlx5_wqe_ctrl_seg", "imm"), offset_of!(CtrlSeg, imm));
    check_size("mlx5_wqe_raddr_seg", size_of::<RaddrSeg>());
    assert_eq!(off("mlx5_wqe_raddr_seg", "raddr"), offset_of!(RaddrSeg, raddr));
    assert_eq!(off("mlx5_wqe_raddr_seg", "rkey"), offset_of!(RaddrSeg, rkey));
    assert_eq!(off("mlx5_wqe_raddr_seg", "reserved"), offset_of!(RaddrSeg, reserved));
    check_size("mlx5_wqe_data_seg", size_of::<DataSeg>());
    assert_eq!(off("mlx5_wqe_data_seg", "byte_count"), offset_of!(DataSeg, byte_count));
    assert_eq!(off("mlx5_wqe_data_seg", "lkey"), offset_of!(DataSeg, lkey));
    assert_eq!(off("mlx5_wqe_data_seg", "addr"), offset_of!(DataSeg, addr));
    check_size("mlx5_wqe_atomic_seg", size_of::<AtomicSeg>());
    assert_eq!(off("mlx5_wqe_atomic_seg", "swap_add"), offset_of!(AtomicSeg, swap_add));
    assert_eq!(off("mlx5_wqe_atomic_seg", "compare"), offset_of!(AtomicSeg, compare));
    check_size("mlx5_wqe_inl_data_seg", size_of::<InlineSeg>());
    check_size("mlx5_wqe_av", size_of::<DatagramSeg>());
    for (f, o) in [
        ("key", offset_of!(DatagramSeg, key)),
        ("dqp_dct", offset_of!(DatagramSeg, dqp_dct)),
        ("stat_rate_sl", offset_of!(DatagramSeg, stat_rate_sl)),
        ("fl_mlid", offset_of!(DatagramSeg, fl_mlid)),
        ("rlid", offset_of!(DatagramSeg, rlid)),
        ("reserved0", offset_of!(DatagramSeg, reserved0)),
        ("rmac", offset_of!(DatagramSeg, rmac)),
        ("tclass", offset_of!(DatagramSeg, tclass)),
        ("hop_limit", offset_of!(DatagramSeg, hop_limit)),
        ("grh_gid_fl", offset_of!(DatagramSeg, grh_gid_fl)),
        ("rgid", offset_of!(DatagramSeg, rgid)),
    ] {
        assert_eq!(off("mlx5_wqe_av", f), o, "mlx5_wqe_av.{f}");
    }
    check_size("mlx5_wqe_eth_seg", size_of::<EthSeg>());
    for (f, o) in [
        ("rsvd0", offset_of!(EthSeg, rsvd0)),
        ("cs_flags", offset_of!(EthSeg, cs_flags)),
        ("rsvd1", offset_of!(EthSeg, rsvd1)),
        ("mss", offset_of!(EthSeg, mss)),
        ("rsvd2", offset_of!(EthSeg, rsvd2)),
        ("inline_hdr_sz", offset_of!(EthSeg, inline_hdr_sz)),
        ("inline_hdr_start", offset_of!(EthSeg, inline_hdr_start)),
        ("inline_hdr", offset_of!(EthSeg, inline_hdr)),
    ] {
        assert_eq!(off("mlx5_wqe_eth_seg", f), o, "mlx5_wqe_eth_seg.{f}");
    }
    check_size("mlx5_cqe64", size_of::<Cqe64>());
    check_size("mlx5_err_cqe", size_of::<Cqe64>());
    for (f, o) in [
        ("srqn_uidx", offset_of!(Cqe64, srqn_uidx)),
        ("imm_inval_pkey", offset_of!(Cqe64, imm_inval_pkey)),
        ("app", offset_of!(Cqe64, app)),
        ("byte_cnt", offset_of!(Cqe64, byte_cnt)),
        ("timestamp", offset_of!(Cqe64, timestamp)),
        ("sop_drop_qpn", offset_of!(Cqe64, sop_drop_qpn)),
        ("wqe_counter", offset_of!(Cqe64, wqe_counter)),
        ("signature", offset_of!(Cqe64, signature)),
        ("op_own", offset_of!(Cqe64, op_own)),
    ] {
        assert_eq!(off("mlx5_cqe64", f), o, "mlx5_cqe64.{f}");
    }
    // The error CQE's fields, as the decoder reads them from the same bytes.
    assert_eq!(off("mlx5_err_cqe", "vendor_err_synd"), offset_of!(Cqe64, timestamp) + 6);
    assert_eq!(off("mlx5_err_cqe", "syndrome"), offset_of!(Cqe64, timestamp) + 7);
    assert_eq!(off("mlx5_err_cqe", "s_wqe_opcode_qpn"), offset_of!(Cqe64, sop_drop_qpn));
    assert_eq!(off("mlx5_err_cqe", "wqe_counter"), offset_of!(Cqe64, wqe_counter));
    check_size("mlx5dv_clock_info", size_of::<ClockInfo>());
    for (f, o) in [
        ("nsec", offset_of!(ClockInfo, nsec)),
        ("last_cycles", offset_of!(ClockInfo, last_cycles)),
        ("frac", offset_of!(ClockInfo, frac)),
        ("mult", offset_of!(ClockInfo, mult)),
        ("shift", offset_of!(ClockInfo, shift)),
        ("mask", offset_of!(ClockInfo, mask)),
    ] {
        assert_eq!(off("mlx5dv_clock_info", f), o, "mlx5dv_clock_info.{f}");
    }
}

#[test]
fn control_segments_match_both_c_helpers() {
    let mut n = 0;
    for f in lines("C") {
        let mut seg = CtrlSeg::default();
        seg.set(num(f[0]), num(f[1]), num(f[2]), num(f[3]), num(f[4]), num(f[5]), num(f[6]), num(f[7]));
        assert_eq!(bytes(&seg), unhex(f[8]), "mlx5dv_set_ctrl_seg{f:?}");
        assert_eq!(bytes(&seg), unhex(f[9]), "mlx5dv_x86_set_ctrl_seg{f:?}");
        assert_eq!((seg.opcode(), seg.ds(), seg.qpn()), (num(f[1]), num(f[5]), num(f[3])));
        n += 1;
    }
    assert_eq!(n, N);
}

#[test]
fn data_segments_match_both_c_helpers() {
    let mut n = 0;
    for f in lines("D") {
        let mut seg = DataSeg::default();
        seg.set(num(f[0]), num(f[1]), num(f[2]));
        assert_eq!(bytes(&seg), unhex(f[3]), "mlx5dv_set_data_seg{f:?}");
        assert_eq!(bytes(&seg), unhex(f[4]), "mlx5dv_x86_set_data_seg{f:?}");
        n += 1;
    }
    assert_eq!(n, N);
}

#[test]
fn datagram_segments_match_the_c_helper() {
    let mut n = 0;
    for f in lines("G") {
        let mut seg = DatagramSeg::default();
        let rmac: [u8; 6] = unhex(f[6]).try_into().unwrap();
        let rgid: [u8; 16] = unhex(f[10]).try_into().unwrap();
        seg.set(
            num(f[0]),
            num(f[1]),
            num(f[2]),
            num(f[3]),
            num(f[4]),
            num(f[5]),
            &rmac,
            num(f[7]),
            num(f[8]),
            num(f[9]),
            &rgid,
        );
        assert_eq!(bytes(&seg), unhex(f[11]), "mlx5dv_set_dgram_seg{f:?}");
        n += 1;
    }
    assert_eq!(n, N);
}

#[test]
fn eth_segments_match_the_c_helper() {
    let mut n = 0;
    for f in lines("E") {
        let mut seg = EthSeg::default();
        let hdr = if f[3] == "-" { Vec::new() } else { unhex(f[3]) };
        assert_eq!(hdr.len(), num::<usize>(f[2]));
        seg.set(num(f[0]), num(f[1]), &hdr);
        assert_eq!(bytes(&seg), unhex(f[4]), "mlx5dv_set_eth_seg{f:?}");
        n += 1;
    }
    assert_eq!(n, N);
}

#[test]
fn cqe_helpers_agree_for_every_op_own() {
    let mut n = 0;
    for f in lines("Q") {
        let v: u8 = num(f[0]);
        let got = [cqe::owner(v), cqe::se(v), cqe::format(v), cqe::cqe_opcode(v)];
        let want: [u8; 4] = [num(f[1]), num(f[2]), num(f[3]), num(f[4])];
        assert_eq!(got, want, "op_own {v:#04x}");
        n += 1;
    }
    assert_eq!(n, 256);
}

#[test]
fn timestamps_convert_like_mlx5dv_ts_to_ns() {
    let mut n = 0;
    for f in lines("T") {
        let ci = ClockInfo {
            nsec: num(f[0]),
            last_cycles: num(f[1]),
            frac: num(f[2]),
            mult: num(f[3]),
            shift: num(f[4]),
            mask: num(f[5]),
        };
        assert_eq!(ts_to_ns(&ci, num(f[6])), num::<u64>(f[7]), "mlx5dv_ts_to_ns{f:?}");
        n += 1;
    }
    assert_eq!(n, N);
}
