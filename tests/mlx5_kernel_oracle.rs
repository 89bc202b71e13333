//! CQE compression against a decompressor that is not ours: the Linux
//! kernel's mlx5e receive path (drivers/net/ethernet/mellanox/mlx5/core/en_rx.c),
//! which runs against real ConnectX.
//!
//! At test time the functions and structs it needs are cut out of Debian's
//! `linux-source-6.1` tree by name (tests/kernel_oracle/extract.rs):
//! `mlx5e_poll_rx_cq`, `mlx5e_decompress_cqes_start` / `_cont`,
//! `mlx5e_decompress_cqe` / `_no_hash`, `mlx5e_read_title_slot`,
//! `mlx5e_read_mini_arr_slot`, `mlx5e_read_cqe_slot`,
//! `mlx5e_cqes_update_owner`; `struct mlx5_cqe64`, `struct mlx5_mini_cqe8`,
//! `struct mlx5e_cq_decomp`, `struct mlx5_cqwq` and the `mlx5_cqwq_*` /
//! `mlx5_frag_buf_*` inlines of wq.h and driver.h; the enums they read. They
//! are compiled with kernel plumbing written here (tests/kernel_oracle/plumbing.h:
//! types, byte order, `likely`, `min_t`, `test_bit`, ...), the few receive
//! queue fields the functions touch (tests/kernel_oracle/rq.h) and a driver
//! (tests/kernel_oracle/driver.c) whose receive handler prints each CQE the
//! kernel hands it. The same ring contents go through `CqRing` with
//! `set_compression`; every CQE is compared byte for byte, with the
//! differences each side documents masked beside their reason ([`compare`]).
//!
//! The tree comes from `RRDDMMA_LINUX_SRC` (`cargo xtask test` downloads the
//! package once and unpacks the files for this test and for siw in one pass,
//! xtask/src/kernel_src.rs); `RRDDMMA_LINUX_SRC_VERSION` names its version.

#[path = "kernel_oracle/extract.rs"]
mod extract;

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::Cqe64;
use rrddmma::mlx5dv::mini::{CqeFormat, CqeResFormat, PER_ARRAY};

/// CQEs per format.
const CQES_PER_FORMAT: usize = 10_000;
const SEED: u64 = 0x6b65_726e;

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn below(s: &mut u64, n: u64) -> u64 {
    splitmix(s) % n
}

/// The kernel tree and its package version.
fn linux_source() -> (PathBuf, String) {
    let tree = std::env::var_os("RRDDMMA_LINUX_SRC").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/xtask/linux-source/6.1/linux-source-6.1")
    });
    assert!(
        tree.join("drivers/net/ethernet/mellanox/mlx5/core/en_rx.c").is_file(),
        "the kernel mlx5e oracle needs Debian's linux-source-6.1 tree: {} has no \
         drivers/net/ethernet/mellanox/mlx5/core/en_rx.c; run `cargo xtask test` (which downloads and \
         unpacks it) or set RRDDMMA_LINUX_SRC to a kernel tree",
        tree.display()
    );
    let version = std::env::var("RRDDMMA_LINUX_SRC_VERSION").unwrap_or_else(|_| "(version not given)".into());
    (tree, version)
}

/// A mutation, for the checks that the oracle can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    None,
    /// The kernel source: `mlx5e_decompress_cqe` reads the mini-CQE next to
    /// the one it should (`mini_arr_idx ^ 1`).
    KernelMiniIndex,
    /// Ours: the first expanded CQE past a session's first has check_sum's
    /// low bit flipped.
    OursCheckSum,
}

/// The C file: plumbing, the kernel's definitions in dependency order, the
/// receive queue written here, the kernel's functions, the driver.
fn oracle_source(tree: &Path, mutation: Mutation) -> String {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernel_oracle");
    let mut parts = extract::mlx5e_rx(tree, &here, |f, text| {
        if f == "mlx5e_decompress_cqe" && mutation == Mutation::KernelMiniIndex {
            let from = "&cqd->mini_arr[cqd->mini_arr_idx]";
            assert!(text.contains(from), "mlx5e_decompress_cqe no longer reads `{from}`");
            return text.replace(from, "&cqd->mini_arr[cqd->mini_arr_idx ^ 1]");
        }
        text
    });
    parts.push(std::fs::read_to_string(here.join("driver.c")).unwrap_or_else(|e| panic!("read driver.c: {e}")));
    parts.join("\n\n")
}

/// Compiles the oracle (once per mutation) and returns the executable.
fn build(tree: &Path, mutation: Mutation) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kernel-oracle");
    std::fs::create_dir_all(&dir).expect("create the oracle's build folder");
    let name = format!("oracle-{mutation:?}").to_lowercase();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, oracle_source(tree, mutation)).expect("write the oracle's C file");
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-O1", "-Wall", "-Wno-unused-function", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(out.status.success(), "compiling {} failed:\n{}", c.display(), String::from_utf8_lossy(&out.stderr));
    exe
}

/// What a CQE of the script is.
#[derive(Clone, Copy, Debug)]
struct Meta {
    /// Session length (0: a CQE written whole).
    n: u32,
    /// Index in the session.
    i: u32,
    /// The session crosses the ring's end.
    wraps: bool,
}

struct Ring {
    log_cnt: u32,
    size: usize,
    format: CqeResFormat,
    log_rq: u32,
}

enum Op {
    Ring(Ring),
    Entry(u32, Vec<u8>),
    Drain(u32, Vec<Meta>),
}

/// Responder opcodes a receive CQ holds (RESP_WR_IMM .. RESP_SEND_INV).
const RESP_OPS: [u8; 4] = [1, 2, 3, 4];

/// Rings of every format and both CQE sizes, filled round after round
/// with compressed sessions (title, mini-CQE arrays after it and at every
/// eighth CQE) and whole CQEs, as the device writes them.
fn script(seed: u64) -> Vec<Op> {
    let mut s = seed;
    let mut ops = Vec::new();
    let formats = [CqeResFormat::Hash, CqeResFormat::Csum, CqeResFormat::CsumStridx];
    let mut done = [0usize; 3];
    let mut q = 0usize;
    while done.iter().any(|&d| d < CQES_PER_FORMAT) {
        let f = q % 3;
        let (format, size) = (formats[f], if (q / 3) % 2 == 0 { 64 } else { 128 });
        q += 1;
        if done[f] >= CQES_PER_FORMAT {
            continue;
        }
        let log_cnt = 4 + below(&mut s, 5) as u32; // 16..256 entries
        let cnt = 1u32 << log_cnt;
        let log_rq = 4 + below(&mut s, 13) as u32; // 16..65536 receive WQEs
        ops.push(Op::Ring(Ring { log_cnt, size, format, log_rq }));
        let mut pos = 0u32;
        for _ in 0..10 + below(&mut s, 20) {
            let room = below(&mut s, u64::from(cnt) + 1) as u32;
            let mut metas = Vec::new();
            let mut k = 0;
            while k < room {
                let left = room - k;
                let n = if left < 2 || below(&mut s, 4) == 0 {
                    1
                } else {
                    2 + below(&mut s, u64::from((left - 1).min(64))) as u32
                };
                let owner = |p: u32| ((p >> log_cnt) & 1) as u8;
                let mut e: Vec<u8> = (0..size / 8).flat_map(|_| splitmix(&mut s).to_le_bytes()).collect();
                let op = RESP_OPS[below(&mut s, 4) as usize];
                let se = below(&mut s, 2) as u8;
                if n == 1 {
                    e[size - 1] = op << 4 | se << 1 | owner(pos);
                    ops.push(Op::Entry(pos & (cnt - 1), e));
                    metas.push(Meta { n: 0, i: 0, wraps: false });
                } else {
                    e[size - 20..size - 16].copy_from_slice(&n.to_be_bytes());
                    e[size - 1] = op << 4 | CqeFormat::COMPRESSED.to_raw() << 2 | se << 1 | owner(pos);
                    ops.push(Op::Entry(pos & (cnt - 1), e));
                    for a in 0..n.div_ceil(PER_ARRAY) {
                        let at = pos + if a == 0 { 1 } else { a * PER_ARRAY };
                        let arr: Vec<u8> = (0..size / 8).flat_map(|_| splitmix(&mut s).to_le_bytes()).collect();
                        ops.push(Op::Entry(at & (cnt - 1), arr));
                    }
                    let wraps = (pos & (cnt - 1)) + n > cnt;
                    metas.extend((0..n).map(|i| Meta { n, i, wraps }));
                }
                pos += n;
                k += n;
            }
            let budget = [1u32, 2, 3, 5, 8, 16, 64, 256][below(&mut s, 8) as usize];
            done[f] += metas.len();
            ops.push(Op::Drain(budget, metas));
        }
    }
    ops
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex from the oracle")).collect()
}

/// One drain as the kernel did it: the CQEs handed to the receive handler,
/// each poll's count, the consumer counter and the doorbell record.
#[derive(Default)]
struct KernelDrain {
    cqes: Vec<Vec<u8>>,
    polls: Vec<u32>,
    cc: u32,
    dbrec: u32,
}

fn run_kernel(exe: &Path, ops: &[Op]) -> Vec<KernelDrain> {
    let mut input = String::new();
    for op in ops {
        match op {
            Op::Ring(r) => {
                input += &format!(
                    "K {} {} {} {}\n",
                    r.log_cnt,
                    r.size.trailing_zeros(),
                    u8::from(r.format == CqeResFormat::CsumStridx),
                    r.log_rq
                )
            }
            Op::Entry(idx, e) => input += &format!("E {idx} {}\n", hex(e)),
            Op::Drain(budget, _) => input += &format!("Y {budget}\n"),
        }
    }
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("the oracle's output");
    writer.join().expect("the writer thread").expect("write the script");
    assert!(out.status.success(), "the oracle failed: {}", out.status);
    let mut drains = Vec::new();
    let mut cur = KernelDrain::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
        match tag {
            "Q" => cur.cqes.push(unhex(rest)),
            "P" => cur.polls.push(rest.parse().expect("a poll count")),
            "Z" => {
                let (cc, db) = rest.split_once(' ').expect("Z cc dbrec");
                cur.cc = cc.parse().expect("cc");
                cur.dbrec = db.parse().expect("dbrec");
                drains.push(std::mem::take(&mut cur));
            }
            _ => panic!("the oracle printed {line:?}"),
        }
    }
    drains
}

/// The first disagreement between the kernel and rrddmma.
#[derive(Debug)]
struct Mismatch {
    kind: String,
    at: String,
    field: String,
    byte: Option<usize>,
    kernel: String,
    ours: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mismatch: {}, {}: field {}", self.kind, self.at, self.field)?;
        if let Some(b) = self.byte {
            write!(f, ", first differing byte {b}")?;
        }
        write!(f, ": kernel {}, rrddmma {}", self.kernel, self.ours)
    }
}

/// The field of a 64-byte CQE (`struct mlx5_cqe64`) that byte `b` belongs to.
fn field(b: usize) -> &'static str {
    match b {
        0 => "tls_outer_l3_tunneled",
        2..=3 => "wqe_id",
        4..=11 => "lro / shampo",
        12..=15 => "rss_hash_result",
        16 => "rss_hash_type",
        20..=21 => "check_sum",
        22..=23 => "slid",
        24..=27 => "flags_rqpn",
        28..=31 => "hds_ip_ext, l4_l3_hdr_type, vlan_info",
        32..=35 => "srqn",
        36..=39 => "immediate",
        44..=47 => "byte_cnt",
        48..=55 => "timestamp",
        56..=59 => "sop_drop_qpn",
        60..=61 => "wqe_counter",
        62 => "signature",
        63 => "op_own",
        _ => "reserved",
    }
}

/// The bytes compared for CQE `m` of a session in `format` on an RQ of
/// `2^log_rq` WQEs: `(kernel, ours)` with what each side documents as its
/// own choice masked. A CQE written whole is compared as it is.
///
/// - `op_own` bit 1 (solicited event): the kernel clears it with `&= 0xf0`
///   (mlx5e never reads it); ours keeps the bit the device wrote in the
///   title.
/// - `wqe_counter` (HASH, CSUM): the kernel counts its own cyclic RQ's index,
///   masked by the RQ's size after the first CQE; ours the 16-bit counter
///   (the title's plus `i`), which consumers mask as they do for every CQE.
///   Compared modulo the RQ size. With CSUM_STRIDX both take the mini-CQE's
///   stride index: compared whole.
/// - HASH: the kernel never configures it and reads the mini-CQE's first two
///   bytes as `check_sum`; ours takes the four as `rss_hash_result` (and keeps
///   the title's `rss_hash_type`, which the kernel zeroes past the first
///   CQE). So the kernel's `check_sum` is compared with ours' first two hash
///   bytes, and neither side's other reading of bytes 12-16 is compared.
fn compare(kernel: &[u8], ours: &[u8; 64], m: Meta, format: CqeResFormat, log_rq: u32) -> (Vec<u8>, Vec<u8>) {
    let (mut k, mut o) = (kernel.to_vec(), ours.to_vec());
    if m.n == 0 {
        return (k, o);
    }
    k[63] &= !2;
    o[63] &= !2;
    if format != CqeResFormat::CsumStridx {
        let mask = ((1u32 << log_rq) - 1) as u16;
        for v in [&mut k, &mut o] {
            let c = u16::from_be_bytes([v[60], v[61]]) & mask;
            v[60..62].copy_from_slice(&c.to_be_bytes());
        }
    }
    if format == CqeResFormat::Hash {
        // Ours' hash bytes 0-1 stand where the kernel put them.
        o[20..22].copy_from_slice(&ours[12..14]);
        k[12..17].fill(0);
        o[12..17].fill(0);
    }
    (k, o)
}

#[derive(Debug, Default)]
struct Stats {
    cqes: usize,
    plain: usize,
    sessions: usize,
    longest: u32,
    wrapped: usize,
    /// Polls whose budget ended inside a session (the kernel resumed it
    /// with `mlx5e_decompress_cqes_cont`).
    cut: usize,
    laps: u64,
    rings: usize,
    by_format: BTreeMap<&'static str, usize>,
    by_size: BTreeMap<usize, usize>,
}

/// A 64-byte, 64-aligned line of a ring buffer.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// Our ring over its buffers, for the script's ring `r`.
struct Ours<'a> {
    cq: CqRing,
    buf: Vec<Line>,
    dbrec: Vec<Line>,
    _uar: Vec<Line>,
    r: &'a Ring,
    /// CQEs taken.
    taken: u32,
}

fn short(f: CqeResFormat) -> &'static str {
    f.name().trim_start_matches("MLX5DV_CQE_RES_FORMAT_")
}

/// Replays the script through `CqRing` and compares each drain with the
/// kernel's.
fn check(ops: &[Op], kernel: &[KernelDrain], mutation: Mutation) -> Result<Stats, Box<Mismatch>> {
    let mut stats = Stats::default();
    let mut seed = SEED ^ 0x5a5a;
    let mut mutated = false;
    let mut drains = kernel.iter();
    let mut ring: Option<Ours> = None;
    for op in ops {
        match op {
            Op::Ring(r) => {
                if let Some(prev) = ring.take() {
                    stats.laps += u64::from(prev.taken >> prev.r.log_cnt);
                }
                let cnt = 1u32 << r.log_cnt;
                let mut buf = vec![Line([0; 64]); (cnt as usize) * r.size / 64];
                for i in 0..cnt as usize {
                    buf[(i * r.size + r.size - 1) / 64].0[63] = 0xf1;
                }
                let mut dbrec = vec![Line([0; 64])];
                let mut uar = vec![Line([0; 64])];
                // SAFETY: the buffers are 64-aligned, sized as `from_raw`
                // asks, and live beside the ring (moved with it, their heap
                // memory stays put); only this replay writes them, as the
                // device would, between polls.
                let mut cq = unsafe {
                    CqRing::from_raw(
                        buf.as_mut_ptr().cast(),
                        cnt,
                        r.size as u32,
                        dbrec.as_mut_ptr().cast::<Be32>(),
                        uar.as_mut_ptr().cast(),
                        0x4b00 + stats.rings as u32,
                    )
                };
                // SAFETY: `buf` comes from a mutable pointer; nothing else writes it while polled.
                unsafe { cq.set_compression(Some(r.format)) };
                stats.rings += 1;
                ring = Some(Ours { cq, buf, dbrec, _uar: uar, r, taken: 0 });
            }
            Op::Entry(idx, e) => {
                let Ours { buf, r, .. } = ring.as_mut().expect("an entry before any ring");
                let at = *idx as usize * r.size;
                for (j, b) in e.iter().enumerate() {
                    buf[(at + j) / 64].0[(at + j) % 64] = *b;
                }
            }
            Op::Drain(_, metas) => {
                let Ours { cq, dbrec, r, taken, .. } = ring.as_mut().expect("a drain before any ring");
                let theirs = drains.next().expect("the oracle drained every round");
                let kind = |m: &Meta| {
                    let what = if m.n == 0 { "CQE written whole".to_string() } else { format!("session of {}", m.n) };
                    format!("{} B CQ, {}: {what}", r.size, short(r.format))
                };
                let mut got = Vec::new();
                loop {
                    let mut batch = [Cqe64::default(); 16];
                    let k = 1 + (splitmix(&mut seed) % 16) as usize;
                    let n = cq.poll_cqes(&mut batch[..k]);
                    got.extend_from_slice(&batch[..n]);
                    if n < k {
                        break;
                    }
                }
                let count = |what: &str, k: usize, o: usize, at: u32| {
                    Box::new(Mismatch {
                        kind: format!("{} B CQ, {}", r.size, short(r.format)),
                        at: format!("after CQE {at}"),
                        field: what.into(),
                        byte: None,
                        kernel: k.to_string(),
                        ours: o.to_string(),
                    })
                };
                if theirs.cqes.len() != metas.len() || got.len() != metas.len() {
                    return Err(count("CQE count", theirs.cqes.len(), got.len(), *taken));
                }
                for ((m, k), c) in metas.iter().zip(&theirs.cqes).zip(&got) {
                    // SAFETY: `Cqe64` is 64 plain bytes without padding.
                    let mut ours: [u8; 64] = unsafe { std::mem::transmute(*c) };
                    if mutation == Mutation::OursCheckSum && !mutated && m.i > 0 && r.format != CqeResFormat::Hash {
                        ours[21] ^= 1;
                        mutated = true;
                    }
                    let (kb, ob) = compare(k, &ours, *m, r.format, r.log_rq);
                    if let Some(b) = (0..64).find(|&b| kb[b] != ob[b]) {
                        let entry = *taken & ((1 << r.log_cnt) - 1);
                        return Err(Box::new(Mismatch {
                            kind: kind(m),
                            at: format!("CQE {taken} (entry {entry}), CQE {} of its session", m.i),
                            field: field(b).into(),
                            byte: Some(b),
                            kernel: format!("{:#04x}", kb[b]),
                            ours: format!("{:#04x}", ob[b]),
                        }));
                    }
                    if m.n == 0 {
                        stats.plain += 1;
                    } else if m.i == 0 {
                        stats.sessions += 1;
                        stats.longest = stats.longest.max(m.n);
                        stats.wrapped += usize::from(m.wraps);
                        *stats.by_format.entry(short(r.format)).or_default() += 1;
                    }
                    *stats.by_size.entry(r.size).or_default() += 1;
                    *taken = taken.wrapping_add(1);
                }
                // Polls that ended inside a session.
                let mut end = 0usize;
                for p in &theirs.polls {
                    end += *p as usize;
                    if let Some(m) = metas.get(end) {
                        stats.cut += usize::from(m.i > 0);
                    }
                }
                // SAFETY: the record is 4 aligned bytes of `dbrec`.
                let rec = unsafe { dbrec.as_mut_ptr().cast::<Be32>().read() }.get();
                if theirs.cc != *taken || theirs.dbrec != rec {
                    return Err(Box::new(Mismatch {
                        kind: format!("{} B CQ, {}", r.size, short(r.format)),
                        at: format!("after CQE {taken}"),
                        field: "consumer counter / record".into(),
                        byte: None,
                        kernel: format!("{} / {:#x}", theirs.cc, theirs.dbrec),
                        ours: format!("{taken} / {rec:#x}"),
                    }));
                }
                stats.cqes += metas.len();
            }
        }
    }
    if let Some(last) = ring {
        stats.laps += u64::from(last.taken >> last.r.log_cnt);
    }
    Ok(stats)
}

/// The script, and the kernel's drains of it by the unmutated oracle or the
/// mutated one: built and run once for the tests that share them (tests run
/// in parallel).
fn kernel_run(mutation: Mutation) -> (&'static [Op], &'static [KernelDrain]) {
    static OPS: OnceLock<Vec<Op>> = OnceLock::new();
    static PLAIN: OnceLock<Vec<KernelDrain>> = OnceLock::new();
    static MUTATED: OnceLock<Vec<KernelDrain>> = OnceLock::new();
    let ops = OPS.get_or_init(|| script(SEED));
    let cell = if mutation == Mutation::KernelMiniIndex { &MUTATED } else { &PLAIN };
    let drains = cell.get_or_init(|| {
        let (tree, _) = linux_source();
        run_kernel(&build(&tree, mutation), ops)
    });
    (ops, drains)
}

fn report(line: &str) {
    // `cargo xtask test` prints these lines in the harness section.
    println!("mlx5-provider: {line}");
}

/// Our ring expands the same sessions into the same CQEs as the kernel's
/// mlx5e receive path, over every format, both CQE sizes, sessions across
/// the ring's end and polls ending inside a session, lap after lap.
#[test]
#[ignore = "needs Debian's linux-source-6.1 tree; cargo xtask test runs it"]
fn compressed_cqes_expand_as_the_kernel_mlx5e_decompresses_them() {
    let (_, version) = linux_source();
    let (ops, kernel) = kernel_run(Mutation::None);
    match check(ops, kernel, Mutation::None) {
        Ok(s) => {
            assert!(s.cqes >= 3 * CQES_PER_FORMAT, "only {} CQEs were compared", s.cqes);
            assert!(s.sessions > 1000 && s.plain > 1000 && s.longest >= 60, "{s:?}");
            assert!(s.wrapped > 100 && s.cut > 100 && s.laps > 100, "{s:?}");
            for f in ["HASH", "CSUM", "CSUM_STRIDX"] {
                assert!(s.by_format.get(f).copied().unwrap_or(0) > 300, "too few {f} sessions: {s:?}");
            }
            assert!(s.by_size.len() == 2 && s.by_size.values().all(|&n| n > 5000), "{s:?}");
            let formats: Vec<String> = s.by_format.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let sizes: Vec<String> = s.by_size.iter().map(|(k, n)| format!("{n} of {k} B")).collect();
            report(&format!(
                "CQE compression vs kernel mlx5e (linux-source-6.1 {version}): en_rx.c's mlx5e_poll_rx_cq and its \
                 decompression, {} CQEs on {} CQs ({} in {} sessions of up to {}, {} written whole; sessions by \
                 format {}; CQEs {}), {} sessions across the ring's end, {} polls ending inside a session, {} laps; \
                 0 mismatches",
                s.cqes,
                s.rings,
                s.cqes - s.plain,
                s.sessions,
                s.longest,
                s.plain,
                formats.join(", "),
                sizes.join(", "),
                s.wrapped,
                s.cut,
                s.laps
            ));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The oracle can fail: the kernel's source changed to read the
/// neighbouring mini-CQE is caught at the first session's first CQE.
#[test]
#[ignore = "needs Debian's linux-source-6.1 tree; cargo xtask test runs it"]
fn mutation_in_the_kernel_source_is_reported() {
    let (ops, kernel) = kernel_run(Mutation::KernelMiniIndex);
    let m = check(ops, kernel, Mutation::None).expect_err("a mutated kernel must be caught");
    assert!(m.kind.contains("session of"), "{m}");
    assert!(m.at.ends_with("CQE 0 of its session"), "{m}");
    assert!(["check_sum", "byte_cnt"].contains(&m.field.as_str()), "{m}");
    report(&format!("mutation check (kernel mlx5e_decompress_cqe: mini_arr_idx ^ 1) caught as it must: {m}"));
}

/// The oracle can fail on our side: one expanded field changed is reported
/// with its field and byte.
#[test]
#[ignore = "needs Debian's linux-source-6.1 tree; cargo xtask test runs it"]
fn mutation_in_our_expansion_is_reported_by_the_kernel_oracle() {
    let (ops, kernel) = kernel_run(Mutation::None);
    let m = check(ops, kernel, Mutation::OursCheckSum).expect_err("a mutated expansion");
    assert!(m.kind.contains("session of"), "{m}");
    assert_eq!((m.field.as_str(), m.byte), ("check_sum", Some(21)), "{m}");
    report(&format!("mutation check (expansion vs kernel: check_sum bit 0 flipped) caught as it must: {m}"));
}
