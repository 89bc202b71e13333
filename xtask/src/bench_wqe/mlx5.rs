//! The libmlx5 column: benches/wqe_cost/wqe_cost_mlx5.c linked with the
//! pinned rdma-core v59 build's `libmlx5.a` and the libmlx5 harness's
//! fabricated objects (tests/provider/mlx5_provider.c and cq64.c, their
//! library build `-DHARNESS_LIB`), as tests/provider/build.rs links the
//! harness.
//!
//! The rdma-core build folder is the first that exists of:
//! `RRDDMMA_MLX5_PROVIDER_BUILD`; the static source build `cargo xtask test`
//! makes (target/static-rxe/debug/build/rrddmma-*/out/rdma-core-build); the
//! harness's own (target/tmp/mlx5-provider/build); else one configured here
//! (target/xtask/wqe-mlx5/build) from the pinned tarball, once (minutes).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, run, Result};

/// A configured rdma-core build folder, and its source tree.
fn build_dir() -> Result<(PathBuf, PathBuf)> {
    let mut candidates: Vec<PathBuf> =
        std::env::var_os("RRDDMMA_MLX5_PROVIDER_BUILD").map(PathBuf::from).into_iter().collect();
    if let Ok(rd) = std::fs::read_dir(root().join("target/static-rxe/debug/build")) {
        let mut found: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path().join("out/rdma-core-build"))
            .filter(|p| p.join("CMakeCache.txt").is_file())
            .collect();
        found.sort();
        candidates.extend(found);
    }
    candidates.push(root().join("target/tmp/mlx5-provider/build"));
    for b in &candidates {
        if let Ok(cache) = std::fs::read_to_string(b.join("CMakeCache.txt")) {
            if let Some(tree) = cache.lines().find_map(|l| l.strip_prefix("CMAKE_HOME_DIRECTORY:INTERNAL=")) {
                if Path::new(tree).join("providers/mlx5/qp.c").is_file() {
                    return Ok((b.clone(), PathBuf::from(tree)));
                }
            }
        }
    }
    // Our own: unpack the pinned tarball and configure as the source build does.
    let work = root().join("target/xtask/wqe-mlx5");
    let src = work.join("src");
    let tree = src.join("pyverbs-59.0/rdma-core");
    if !tree.join("providers/mlx5/qp.c").is_file() {
        let tarball = crate::rdma_core_src::tarball()?;
        std::fs::create_dir_all(&src)?;
        run(Command::new("tar").arg("-xzf").arg(&tarball).arg("-C").arg(&src))?;
    }
    if !tree.join("providers/mlx5/qp.c").is_file() {
        return Err(format!("{} holds no rdma-core tree", src.display()).into());
    }
    let bdir = work.join("build");
    std::fs::create_dir_all(&bdir)?;
    if !bdir.join("build.ninja").exists() {
        run(Command::new("cmake")
            .current_dir(&bdir)
            .args([
                "-GNinja",
                "-DENABLE_STATIC=1",
                "-DNO_MAN_PAGES=1",
                "-DNO_PYVERBS=1",
                "-DENABLE_RESOLVE_NEIGH=0",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DIN_PLACE=1",
                "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
            ])
            .arg(&tree))?;
    }
    Ok((bdir, tree))
}

/// Builds the libmlx5 program; an error says why there is none.
pub fn build() -> Result<PathBuf> {
    let (bdir, tree) = build_dir()?;
    let archives =
        ["lib/statics/libmlx5.a", "lib/statics/libibverbs.a", "util/librdma_util_pic.a", "ccan/libccan_pic.a"];
    run(Command::new("ninja").current_dir(&bdir).args(["-j", "2"]).args(archives))?;
    let out = root().join("target/xtask/wqe-mlx5");
    std::fs::create_dir_all(&out)?;
    // libmlx5's direct-verbs entry table made global, as the harness does.
    let mlx5 = out.join("libmlx5_harness.a");
    run(Command::new("objcopy").arg("--globalize-symbol=mlx5_dv_ctx_ops").arg(bdir.join(archives[0])).arg(&mlx5))?;
    let exe = out.join("wqe_cost_mlx5");
    let provider = root().join("tests/provider");
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args([
        "-O2",
        "-std=gnu11",
        "-D_STATIC_LIBRARY_BUILD_=1",
        "-DHARNESS_LIB",
        "-Wall",
        "-Werror",
        "-Wno-unused-function",
    ])
    .arg(format!("-I{}", bdir.join("include").display()))
    .arg(format!("-I{}", tree.join("providers/mlx5").display()))
    .arg(format!("-I{}", tree.display()))
    .arg(format!("-I{}", provider.display()))
    .arg("-o")
    .arg(&exe)
    .arg(root().join("benches/wqe_cost/wqe_cost_mlx5.c"))
    .arg(provider.join("mlx5_provider.c"))
    .arg(provider.join("cq64.c"))
    .arg(provider.join("eth.c"))
    .arg(provider.join("mkey.c"))
    .arg(provider.join("tm.c"))
    .arg(provider.join("mprq.c"))
    .arg(&mlx5);
    for a in &archives[1..] {
        cc.arg(bdir.join(a));
    }
    cc.arg("-lpthread");
    run(&mut cc)?;
    Ok(exe)
}
