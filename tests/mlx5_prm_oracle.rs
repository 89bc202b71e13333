//! The PRM layouts of `rrddmma::mlx5dv::prm` against the headers they were
//! written from, through those headers' own macros.
//!
//! At test time a C program is generated that includes the Linux kernel's
//! `include/linux/mlx5/mlx5_ifc.h` (Debian's `linux-source-6.1`, from
//! `RRDDMMA_LINUX_SRC`) with `MLX5_SET`, `MLX5_GET`, `MLX5_SET64`,
//! `MLX5_GET64`, `MLX5_ST_SZ_BYTES`, `__mlx5_bit_off`, `__mlx5_bit_sz` and
//! the helpers they use cut out of `include/linux/mlx5/device.h` by name
//! (tests/prm_oracle/cut.rs), the enums of `device.h` the constants come from
//! (tests/kernel_oracle/extract.rs), kernel plumbing written here
//! (tests/prm_oracle/plumbing.h) and a stand-in for `mlx5_ifc_fpga.h`, which
//! the tree does not hold (tests/prm_oracle/fpga_stub.h). For every exposed
//! field of every structure, and every field reached through an embedded
//! structure (`qpc.primary_address_path.udp_sport`), the program sets random
//! values with `MLX5_SET` into a zeroed buffer and reads them with `MLX5_GET`
//! from a random buffer (tests/prm_oracle/driver.c); the same cases run here
//! on the `Field` table and are compared (the set buffer by its FNV-1a, the
//! value read exactly). It also prints each size, offset and width as the
//! header's macros give them, and the value of each constant.
//!
//! The members whose layout comes from rdma-core v59's own
//! `providers/mlx5/mlx5_ifc.h` (`Info::rdma_core`) are checked the same way
//! against that header, from the pinned rdma-core tree or tarball in
//! `RRDDMMA_RDMA_CORE_SRC` (the harness sets it).
//!
//! The KLM and KSM entries, which no `mlx5_ifc.h` defines, are checked the
//! same way against the kernel's `struct mlx5_klm` / `struct mlx5_ksm`
//! (`include/linux/mlx5/qp.h`, cut out by name) through their big-endian
//! members (tests/prm_oracle/entries.h).
//!
//! Then the mutation: per structure, one field's bit offset moved by one (by
//! a dword in the entries, whose fields are whole dwords) on a copy of its
//! table; each must be caught.

#[path = "prm_oracle/cut.rs"]
mod cut;
#[path = "kernel_oracle/extract.rs"]
mod extract;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use rrddmma::mlx5dv::prm::{self, CapMode, CapType, EventType, Field, Info, ObjType, Opcode, QpcOptMask, QpcOptMask32};

const SEED: u64 = 0x7072_6d5f_6966_6321;
/// At least this many cases per structure, and at least `PER_FIELD` per field.
const CASES: u64 = 10_000;
const PER_FIELD: u64 = 20;

/// The header a program checks against.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Header {
    Kernel,
    RdmaCore,
    /// The kernel's `include/linux/mlx5/qp.h`, for the KLM and KSM entries.
    QpH,
    /// The newest Debian kernel's `mlx5_ifc.h` (`Info::newest_kernel`),
    /// walked here ([`newest_kernel_check`]), not compiled.
    NewestKernel,
}

/// One field to check: the C path from the structure, our field as the
/// table gives it (`ours`, set and read) and as both sides draw the random
/// dwords from (`window`, never mutated).
#[derive(Clone, Debug)]
struct Check {
    path: String,
    ours: Field,
    window: Field,
}

/// One structure's checks.
struct Lay {
    info: &'static Info,
    fields: Vec<Check>,
    /// Own fields (not reached through an embedded structure).
    own: usize,
    subs: Vec<(String, u32, usize)>,
    bytes: usize,
    cases: u64,
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3))
}

/// The header member `name` of `info` is checked against: rdma-core's when
/// the member or a structure it is reached through comes from there.
fn header_of(info: &Info, name: &str, via_rc: bool) -> Header {
    if info.from_newest_kernel(name) {
        Header::NewestKernel
    } else if via_rc || info.from_rdma_core(name) {
        Header::RdmaCore
    } else {
        Header::Kernel
    }
}

/// The fields of `info` checked against `h`, with those of its embedded
/// structures (recursively), their paths prefixed and offsets moved.
fn collect(info: &'static Info, h: Header, via_rc: bool, prefix: &str, base: u32, out: &mut Vec<Check>) {
    for f in info.fields.iter().filter(|f| header_of(info, f.name, via_rc) == h) {
        let ours = Field { name: f.name, bit_off: f.bit_off + base, bits: f.bits };
        out.push(Check { path: format!("{prefix}{}", f.name), ours, window: ours });
    }
    for s in info.subs {
        let rc = header_of(info, s.name, via_rc) == Header::RdmaCore;
        collect(s.layout, h, rc, &format!("{prefix}{}.", s.name), base + s.bit_off, out);
    }
}

fn layouts(h: Header) -> Vec<Lay> {
    let mut v = Vec::new();
    for &info in if h == Header::QpH { prm::ENTRIES } else { prm::LAYOUTS } {
        let checked_here = match h {
            Header::Kernel => info.kernel_bytes != 0,
            Header::RdmaCore => info.kernel_bytes == 0 || !info.rdma_core.is_empty(),
            Header::QpH => true,
            Header::NewestKernel => false,
        };
        if !checked_here {
            continue;
        }
        let mut fields = Vec::new();
        if h == Header::QpH {
            fields.extend(info.fields.iter().map(|&f| Check { path: f.name.to_string(), ours: f, window: f }));
        } else {
            collect(info, h, false, "", 0, &mut fields);
        }
        let own = fields.iter().filter(|c| !c.path.contains('.')).count();
        let subs = info
            .subs
            .iter()
            .filter(|s| header_of(info, s.name, false) == h)
            .map(|s| {
                let b = if h == Header::Kernel { s.layout.kernel_bytes } else { s.layout.bytes };
                (s.name.to_string(), s.bit_off, b * 8)
            })
            .collect();
        let bytes = if h == Header::Kernel { info.kernel_bytes } else { info.bytes };
        let subs = if h == Header::QpH { Vec::new() } else { subs };
        let n = fields.len() as u64;
        if n == 0 {
            continue;
        }
        let cases = CASES.max(PER_FIELD * n).div_ceil(n) * n;
        v.push(Lay { info, fields, own, subs, bytes, cases });
    }
    v
}

/// Every typed constant: C name, value, whether it comes from rdma-core.
fn constants() -> Vec<(&'static str, u64, bool)> {
    let mut v = Vec::new();
    v.extend(Opcode::ALL.iter().map(|&(n, c, r)| (n, u64::from(c.0), r)));
    v.extend(CapType::ALL.iter().map(|&(n, c, r)| (n, u64::from(c.0), r)));
    v.extend(CapMode::ALL.iter().map(|&(n, c, r)| (n, u64::from(c.0), r)));
    v.extend(EventType::ALL.iter().map(|&(n, c, r)| (n, u64::from(c.0), r)));
    v.extend(ObjType::ALL.iter().map(|&(n, c, r)| (n, u64::from(c.0), r)));
    v.extend(QpcOptMask::ALL.iter().map(|&(n, c, r)| (n, u64::from(c.0), r)));
    v.extend(QpcOptMask32::ALL.iter().map(|&(n, c, r)| (n, c.0, r)));
    v
}

/// The kernel tree.
fn linux_source() -> PathBuf {
    let tree = std::env::var_os("RRDDMMA_LINUX_SRC").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/xtask/linux-source/6.1/linux-source-6.1")
    });
    assert!(
        tree.join("include/linux/mlx5/mlx5_ifc.h").is_file(),
        "the PRM oracle needs Debian's linux-source-6.1 tree: {} has no include/linux/mlx5/mlx5_ifc.h; run \
         `cargo xtask mlx5-harness` (which downloads and unpacks it) or set RRDDMMA_LINUX_SRC to a kernel tree",
        tree.display()
    );
    tree
}

/// rdma-core v59's `providers/mlx5/mlx5_ifc.h`: from the tree or tarball in
/// `RRDDMMA_RDMA_CORE_SRC`, else the harness's cached tarball.
fn rdma_core_ifc(dir: &Path) -> PathBuf {
    let src = std::env::var_os("RRDDMMA_RDMA_CORE_SRC").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/xtask/rdma-core-src/pyverbs-59.0.tar.gz")
    });
    if src.is_dir() {
        for rel in ["providers/mlx5/mlx5_ifc.h", "rdma-core/providers/mlx5/mlx5_ifc.h"] {
            if src.join(rel).is_file() {
                return src.join(rel);
            }
        }
        panic!("{} holds no providers/mlx5/mlx5_ifc.h", src.display());
    }
    assert!(
        src.is_file(),
        "the PRM oracle needs rdma-core v59 for the members Linux 6.1 lacks: set RRDDMMA_RDMA_CORE_SRC to the \
         pinned tree or tarball (`cargo xtask mlx5-harness` does), none at {}",
        src.display()
    );
    let out = dir.join("rdma_core_mlx5_ifc.h");
    let tar = Command::new("tar")
        .arg("-xzOf")
        .arg(&src)
        .arg("--wildcards")
        .arg("*/providers/mlx5/mlx5_ifc.h")
        .output()
        .expect("run tar");
    assert!(tar.status.success() && !tar.stdout.is_empty(), "no providers/mlx5/mlx5_ifc.h in {}", src.display());
    std::fs::write(&out, tar.stdout).expect("write rdma-core's mlx5_ifc.h");
    out
}

/// The generated C program for `h`.
fn program(h: Header, lays: &[Lay], tree: &Path, ifc: &Path) -> String {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mine = |f: &str| std::fs::read_to_string(here.join(f)).unwrap_or_else(|e| panic!("read {f}: {e}"));
    let dev_f = "include/linux/mlx5/device.h";
    let dev = std::fs::read_to_string(tree.join(dev_f)).expect("read device.h");
    let mut c = mine("prm_oracle/plumbing.h");
    if h == Header::QpH {
        c.push_str(&mine("prm_oracle/entries.h"));
        let qp = std::fs::read_to_string(ifc).expect("read qp.h");
        for s in ["mlx5_klm", "mlx5_ksm"] {
            writeln!(c, "{}", extract::structure(&qp, "include/linux/mlx5/qp.h", s)).unwrap();
        }
    }
    let macros: &[&str] = if h == Header::QpH {
        &[]
    } else {
        &[
            "__mlx5_nullp",
            "__mlx5_bit_sz",
            "__mlx5_bit_off",
            "__mlx5_dw_off",
            "__mlx5_64_off",
            "__mlx5_dw_bit_off",
            "__mlx5_mask",
            "__mlx5_dw_mask",
            "__mlx5_st_sz_bits",
            "MLX5_ST_SZ_BYTES",
            "MLX5_SET",
            "MLX5_GET",
            "__MLX5_SET64",
            "MLX5_SET64",
            "MLX5_GET64",
        ]
    };
    for m in macros {
        writeln!(c, "{}", cut::define(&dev, dev_f, m)).unwrap();
    }
    if h != Header::QpH {
        writeln!(c, "#include \"{}\"", ifc.display()).unwrap();
    }
    if h == Header::Kernel {
        for k in ["MLX5_CAP_GENERAL", "HCA_CAP_OPMOD_GET_MAX", "MLX5_EVENT_TYPE_COMP"] {
            writeln!(c, "{}", extract::enum_with(&dev, dev_f, k)).unwrap();
        }
    }
    c.push_str(
        "struct fld { u32 lay, off, bits, c_off, c_bits; const char *path; \
         void (*set)(void *, u64); u64 (*get)(const void *); };\n\
         struct lay { const char *name; u32 bytes, c_bytes; u32 first, n; u64 cases; };\n",
    );
    let mut table = String::new();
    let mut n = 0;
    for (li, l) in lays.iter().enumerate() {
        let name = l.info.name;
        for f in &l.fields {
            let (set, get) = if f.window.bits == 64 { ("MLX5_SET64", "MLX5_GET64") } else { ("MLX5_SET", "MLX5_GET") };
            writeln!(
                c,
                "static void s{n}(void *p, u64 v) {{ {set}({name}, p, {p}, v); }}\n\
                 static u64 g{n}(const void *p) {{ return {get}({name}, p, {p}); }}",
                p = f.path
            )
            .unwrap();
            writeln!(
                table,
                "\t{{ {li}, {}, {}, __mlx5_bit_off({name}, {p}), __mlx5_bit_sz({name}, {p}), \"{p}\", s{n}, g{n} }},",
                f.window.bit_off,
                f.window.bits,
                p = f.path
            )
            .unwrap();
            n += 1;
        }
    }
    writeln!(c, "static const struct fld F[] = {{\n{table}}};\nstatic const size_t NF = {n};").unwrap();
    c.push_str("static const struct lay L[] = {\n");
    let mut first = 0;
    for l in lays {
        writeln!(
            c,
            "\t{{ \"{0}\", {1}, MLX5_ST_SZ_BYTES({0}), {first}, {2}, {3} }},",
            l.info.name,
            l.bytes,
            l.fields.len(),
            l.cases
        )
        .unwrap();
        first += l.fields.len();
    }
    writeln!(c, "}};\nstatic const size_t NL = {};", lays.len()).unwrap();
    c.push_str("static void subs(void)\n{\n");
    for l in lays {
        for (p, _, _) in &l.subs {
            writeln!(
                c,
                "\tprintf(\"U {0} {p} %zu %zu\\n\", (size_t)__mlx5_bit_off({0}, {p}), (size_t)__mlx5_bit_sz({0}, {p}));",
                l.info.name
            )
            .unwrap();
        }
    }
    c.push_str("}\nstatic void consts(void)\n{\n");
    for (name, _, rc) in constants() {
        if h != Header::QpH && rc == (h == Header::RdmaCore) {
            writeln!(c, "\tprintf(\"C {name} %llu\\n\", (unsigned long long)({name}));").unwrap();
        }
    }
    c.push_str("}\n");
    c.push_str(&mine("prm_oracle/driver.c"));
    c
}

/// What the C program said.
struct Said {
    sizes: BTreeMap<String, u64>,
    fields: BTreeMap<(String, String), (u64, u64)>,
    subs: BTreeMap<(String, String), (u64, u64)>,
    consts: BTreeMap<String, u64>,
    results: Vec<[u64; 2]>,
}

fn run_c(h: Header, lays: &[Lay], dir: &Path, tree: &Path, ifc: &Path) -> Said {
    let tag = format!("{h:?}").to_lowercase();
    let src = dir.join(format!("prm_{tag}.c"));
    let exe = dir.join(format!("prm_{tag}"));
    let res = dir.join(format!("prm_{tag}.bin"));
    std::fs::write(&src, program(h, lays, tree, ifc)).expect("write the oracle program");
    // `#include "mlx5_ifc_fpga.h"` finds the stand-in when the tree has none.
    let stub = dir.join("stub");
    std::fs::create_dir_all(&stub).expect("create the stub directory");
    let fpga = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prm_oracle/fpga_stub.h");
    std::fs::copy(&fpga, stub.join("mlx5_ifc_fpga.h")).expect("copy the fpga stand-in");
    let cc =
        Command::new("cc").args(["-O1", "-w", "-I"]).arg(&stub).arg("-o").arg(&exe).arg(&src).output().expect("run cc");
    assert!(cc.status.success(), "compiling {}:\n{}", src.display(), String::from_utf8_lossy(&cc.stderr));
    let out = Command::new(&exe).arg(&res).arg(format!("{SEED:#x}")).output().expect("run the oracle program");
    assert!(out.status.success(), "{} failed: {}", exe.display(), String::from_utf8_lossy(&out.stderr));
    let mut said = Said {
        sizes: BTreeMap::new(),
        fields: BTreeMap::new(),
        subs: BTreeMap::new(),
        consts: BTreeMap::new(),
        results: Vec::new(),
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("a number in {line:?}"));
        match w[0] {
            "S" => {
                said.sizes.insert(w[1].into(), num(w[2]));
            }
            "F" => {
                said.fields.insert((w[1].into(), w[2].into()), (num(w[3]), num(w[4])));
            }
            "U" => {
                said.subs.insert((w[1].into(), w[2].into()), (num(w[3]), num(w[4])));
            }
            "C" => {
                said.consts.insert(w[1].into(), num(w[2]));
            }
            _ => panic!("unexpected line {line:?}"),
        }
    }
    let bin = std::fs::read(&res).expect("read the results");
    said.results = bin
        .chunks_exact(16)
        .map(|c| [u64::from_le_bytes(c[..8].try_into().unwrap()), u64::from_le_bytes(c[8..].try_into().unwrap())])
        .collect();
    said
}

/// Runs the cases of layout `li` on our side, `fields` in place of its
/// checks; the mismatching cases (at most `keep` described).
fn ours(li: usize, l: &Lay, fields: &[Check], results: &[[u64; 2]], keep: usize) -> (u64, Vec<String>) {
    let mut bs = vec![0u8; l.bytes];
    let mut bg = vec![0u8; l.bytes];
    let mut st = SEED ^ ((li as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for k in (0..l.bytes.saturating_sub(7)).step_by(8) {
        bg[k..k + 8].copy_from_slice(&splitmix(&mut st).to_le_bytes());
    }
    let n = fields.len() as u64;
    let (mut bad, mut notes) = (0, Vec::new());
    for c in 0..l.cases {
        let f = &fields[(c % n) as usize];
        let max = f.window.max();
        let r = splitmix(&mut st);
        let v = match c / n {
            0 => max,
            1 => 1,
            _ => r & max,
        };
        bs.fill(0);
        f.ours.set(&mut bs, v);
        let h = fnv(&bs);
        let d0 = f.window.bit_off / 32;
        for d in d0..d0 + if f.window.bits == 64 { 2 } else { 1 } {
            let w = splitmix(&mut st) as u32;
            let at = d as usize * 4;
            if at + 4 <= l.bytes {
                bg[at..at + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
        let g = f.ours.get(&bg);
        let [kh, kg] = results[c as usize];
        if kh != h || kg != g {
            bad += 1;
            if notes.len() < keep {
                notes.push(format!(
                    "{}.{} value {v:#x}: set {} ; get: header {kg:#x}, ours {g:#x}",
                    l.info.name,
                    f.path,
                    if kh == h { "equal" } else { "differs" }
                ));
            }
        }
    }
    (bad, notes)
}

struct Outcome {
    structures: Vec<&'static str>,
    own: usize,
    through: usize,
    cases: u64,
    mismatches: u64,
    consts: usize,
    caught: usize,
    mutated: usize,
    notes: Vec<String>,
}

fn check(h: Header, dir: &Path, tree: &Path, ifc: &Path) -> Outcome {
    let lays = layouts(h);
    let said = run_c(h, &lays, dir, tree, ifc);
    let mut o = Outcome {
        structures: Vec::new(),
        own: 0,
        through: 0,
        cases: 0,
        mismatches: 0,
        consts: 0,
        caught: 0,
        mutated: 0,
        notes: Vec::new(),
    };
    let miss = |o: &mut Outcome, note: String| {
        o.mismatches += 1;
        if o.notes.len() < 20 {
            o.notes.push(note);
        }
    };
    let mut at = 0usize;
    for (li, l) in lays.iter().enumerate() {
        let name = l.info.name;
        o.structures.push(name);
        o.own += l.own;
        o.through += l.fields.len() - l.own;
        let size = said.sizes.get(name).copied();
        if size != Some(l.bytes as u64) {
            miss(&mut o, format!("{name}: {} bytes here, {size:?} in the header", l.bytes));
        }
        for f in &l.fields {
            let got = said.fields.get(&(name.to_string(), f.path.clone())).copied();
            if got != Some((u64::from(f.ours.bit_off), u64::from(f.ours.bits))) {
                miss(
                    &mut o,
                    format!(
                        "{name}.{}: bits {:#x}+{} here, {got:?} in the header",
                        f.path, f.ours.bit_off, f.ours.bits
                    ),
                );
            }
        }
        for (p, off, bits) in &l.subs {
            let got = said.subs.get(&(name.to_string(), p.clone())).copied();
            if got != Some((u64::from(*off), *bits as u64)) {
                miss(&mut o, format!("{name}.{p}: embedded at {off:#x}, {bits} bits here, {got:?} in the header"));
            }
        }
        let results = &said.results[at..at + l.cases as usize];
        at += l.cases as usize;
        o.cases += l.cases;
        let (bad, notes) = ours(li, l, &l.fields, results, 5);
        o.mismatches += bad;
        o.notes.extend(notes);
        // The mutation: the first own field that can move by one bit inside
        // its dword moved by one on a copy of the table; in a structure of
        // whole dwords only (the entries), a 32-bit field moved by a dword.
        let own = &l.fields[..l.own];
        let by_bit =
            |c: &Check| c.ours.bits < 32 && (c.ours.bit_off % 32 + c.ours.bits < 32 || c.ours.bit_off % 32 > 0);
        let by_dword = |c: &Check| c.ours.bits == 32 && (c.ours.bit_off + 64) as usize <= l.bytes * 8;
        let pick = own.iter().position(by_bit).or_else(|| own.iter().position(by_dword));
        if let Some(i) = pick {
            let mut mutated = l.fields.clone();
            let m = &mut mutated[i].ours;
            m.bit_off = if m.bits == 32 {
                m.bit_off + 32
            } else if m.bit_off % 32 + m.bits < 32 {
                m.bit_off + 1
            } else {
                m.bit_off - 1
            };
            o.mutated += 1;
            if ours(li, l, &mutated, results, 0).0 > 0 {
                o.caught += 1;
            } else {
                o.notes.push(format!("mutation of {name}.{} not caught", mutated[i].path));
            }
        }
    }
    for (name, v, rc) in constants() {
        if h == Header::QpH || rc != (h == Header::RdmaCore) {
            continue;
        }
        o.consts += 1;
        let got = said.consts.get(name).copied();
        if got != Some(v) {
            miss(&mut o, format!("{name}: {v:#x} here, {got:?} in the header"));
        }
    }
    assert_eq!(at, said.results.len(), "the C program ran a different number of cases");
    o
}

/// The newest kernel's tree (`RRDDMMA_LINUX_NEWEST_SRC`, set by the harness).
fn newest_linux_source() -> PathBuf {
    let tree = std::env::var_os("RRDDMMA_LINUX_NEWEST_SRC").map(PathBuf::from).unwrap_or_default();
    assert!(
        tree.join("include/linux/mlx5/mlx5_ifc.h").is_file(),
        "the PRM oracle needs the newest Debian kernel's source for the members Linux 6.1 and rdma-core v59 lack \
         (RRDDMMA_LINUX_NEWEST_SRC = {:?}); run `cargo xtask mlx5-harness`, which fetches linux-source-<series> \
         from trixie-backports",
        tree.display()
    );
    tree
}

/// The members of `struct mlx5_ifc_<st>_bits` in `header`, in order: name,
/// bit offset, width (a nested structure or union by its size).
fn walk(header: &str, st: &str) -> Vec<(String, u32, u32)> {
    let body = |kind: &str, name: &str| -> Vec<String> {
        let open = format!("{kind} mlx5_ifc_{name}_bits {{");
        let at = header.find(&open).unwrap_or_else(|| panic!("no `{open}` in the header"));
        let rest = &header[at + open.len()..];
        let end = rest.find("\n};").unwrap_or_else(|| panic!("`{open}` never closes"));
        rest[..end].lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
    };
    fn member(line: &str, size_of: &dyn Fn(&str, &str) -> u32) -> Option<(String, u32)> {
        let line = line.split("/*").next()?.split("//").next()?.trim().strip_suffix(';')?;
        if let Some(decl) = line.strip_prefix("u8") {
            let decl = decl.trim();
            let name = &decl[..decl.find('[')?];
            let mut width = 1;
            // `rgid_rip[16][0x8]`: a count in decimal, a width in hex.
            for dim in decl[name.len()..].split(']').map(|d| d.trim_start_matches('[')).filter(|d| !d.is_empty()) {
                width *= match dim.strip_prefix("0x") {
                    Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                    None => dim.parse().ok()?,
                };
            }
            return Some((name.to_string(), width));
        }
        for kind in ["struct", "union"] {
            if let Some(decl) = line.strip_prefix(kind).and_then(|d| d.trim().strip_prefix("mlx5_ifc_")) {
                let (ty, name) = decl.split_once(' ')?;
                return Some((name.trim().to_string(), size_of(kind, ty.strip_suffix("_bits")?)));
            }
        }
        None
    }
    fn size(header: &str, kind: &str, name: &str) -> u32 {
        let sizes = |k: &str, n: &str| size(header, k, n);
        let open = format!("{kind} mlx5_ifc_{name}_bits {{");
        let at = header.find(&open).unwrap_or_else(|| panic!("no `{open}` in the header"));
        let rest = &header[at + open.len()..];
        let body = &rest[..rest.find("\n};").unwrap()];
        let widths = body.lines().filter_map(|l| member(l.trim(), &sizes)).map(|(_, w)| w);
        if kind == "union" {
            widths.max().unwrap_or(0)
        } else {
            widths.sum()
        }
    }
    let sizes = |k: &str, n: &str| size(header, k, n);
    let mut off = 0;
    let mut out = Vec::new();
    for line in body("struct", st) {
        if let Some((name, w)) = member(&line, &sizes) {
            out.push((name, off, w));
            off += w;
        }
    }
    out
}

/// What the newest-kernel check found.
struct NewestKernel {
    version: String,
    /// `qpc.dp_ordering_1` ...: the members taken from that header.
    members: Vec<String>,
    /// The other own fields of the same structures, compared too (the walk's own check).
    others: usize,
    mismatches: Vec<String>,
    caught: usize,
}

/// Every member of `Info::newest_kernel` against the structure walk of the
/// newest kernel's header (bit offset and width), with the other own kernel
/// fields of the same structures (so a walk that drifts is seen); then each
/// such member's offset moved by one must mismatch.
fn newest_kernel_check() -> NewestKernel {
    let tree = newest_linux_source();
    let header = std::fs::read_to_string(tree.join("include/linux/mlx5/mlx5_ifc.h")).expect("read mlx5_ifc.h");
    let version = std::env::var("RRDDMMA_LINUX_NEWEST_SRC_VERSION").unwrap_or_else(|_| "?".into());
    let mut r = NewestKernel { version, members: Vec::new(), others: 0, mismatches: Vec::new(), caught: 0 };
    for &info in prm::LAYOUTS.iter().filter(|i| !i.newest_kernel.is_empty()) {
        let walked = walk(&header, info.name);
        let find = |f: &Field| walked.iter().find(|(n, ..)| n == f.name).map(|&(_, o, w)| (o, w));
        // rdma-core's members are not the kernel's: checked against rdma-core.
        for f in info.fields.iter().filter(|f| !info.from_rdma_core(f.name)) {
            let ours = (f.bit_off, f.bits);
            let theirs = find(f);
            if theirs != Some(ours) {
                r.mismatches.push(format!("{}.{}: ours {ours:?}, the header's {theirs:?}", info.name, f.name));
            }
            if info.from_newest_kernel(f.name) {
                r.members.push(format!("{}.{}", info.name, f.name));
                let moved = Field { name: f.name, bit_off: f.bit_off + 1, bits: f.bits };
                r.caught += usize::from(find(&moved) != Some((moved.bit_off, moved.bits)));
            } else {
                r.others += 1;
            }
        }
    }
    r
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[test]
#[ignore = "needs the kernel source tree and rdma-core v59 (cargo xtask mlx5-harness)"]
fn prm_layouts_match_mlx5_ifc_h() {
    let tree = linux_source();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prm_oracle");
    std::fs::create_dir_all(&dir).expect("create the oracle's directory");
    let k = check(Header::Kernel, &dir, &tree, &tree.join("include/linux/mlx5/mlx5_ifc.h"));
    let rc_ifc = rdma_core_ifc(&dir);
    let r = check(Header::RdmaCore, &dir, &tree, &rc_ifc);
    let e = check(Header::QpH, &dir, &tree, &tree.join("include/linux/mlx5/qp.h"));
    for n in k.notes.iter().chain(&r.notes).chain(&e.notes) {
        eprintln!("PRM oracle: {n}");
    }
    println!(
        "mlx5-provider: PRM layouts vs kernel mlx5_ifc.h: {} structures ({}), {} fields (+{} through embedded \
         structures), {} cases, {} mismatches; {} constants",
        k.structures.len(),
        k.structures.join(", "),
        k.own,
        k.through,
        thousands(k.cases),
        k.mismatches,
        k.consts
    );
    println!(
        "mlx5-provider: PRM layouts vs rdma-core v59 mlx5_ifc.h (members Linux 6.1 lacks): {} structures ({}), {} \
         fields (+{} through embedded structures), {} cases, {} mismatches; {} constants",
        r.structures.len(),
        r.structures.join(", "),
        r.own,
        r.through,
        thousands(r.cases),
        r.mismatches,
        r.consts
    );
    println!(
        "mlx5-provider: PRM translation entries vs kernel qp.h (struct mlx5_klm, mlx5_ksm): {} structures ({}), {} \
         fields, {} cases, {} mismatches",
        e.structures.len(),
        e.structures.join(", "),
        e.own,
        thousands(e.cases),
        e.mismatches
    );
    println!(
        "mlx5-provider: PRM mutation caught: one field's bit offset moved by one (by a dword in the entries) in each \
         structure's table, \
         {}/{} caught against the kernel, {}/{} against rdma-core, {}/{} against qp.h",
        k.caught, k.mutated, r.caught, r.mutated, e.caught, e.mutated
    );
    let n = newest_kernel_check();
    println!(
        "mlx5-provider: PRM members only the newest kernel's mlx5_ifc.h has (linux-source {}, its structure walked): \
         {} ({} other fields of the same structures alongside), {} mismatches{}; mutation (offset moved by one) \
         caught {}/{}",
        n.version,
        n.members.join(", "),
        n.others,
        n.mismatches.len(),
        if n.mismatches.is_empty() { String::new() } else { format!(" ({})", n.mismatches.join("; ")) },
        n.caught,
        n.members.len()
    );
    assert!(n.mismatches.is_empty() && !n.members.is_empty() && n.caught == n.members.len(), "newest-kernel members");
    assert_eq!(k.mismatches + r.mismatches + e.mismatches, 0, "PRM layouts differ from the headers (notes above)");
    assert_eq!((k.caught, r.caught, e.caught), (k.mutated, r.mutated, e.mutated), "a mutation was not caught");
    assert!(k.structures.len() >= 10 && k.mutated > 0);
}
