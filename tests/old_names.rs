//! A program written against the names removed since the last release
//! (docs/upgrading.md): it builds, each old name a deprecated stand-in for
//! its replacement; and, built with `-D deprecated`, every use is an error
//! whose note names the replacement.
//!
//! The functions that need a device are built, not run; the values are
//! compared with their replacements.

#![allow(deprecated)]

use rrddmma::prim::{AccessFlags, AhAttr, AttrMask, Context, Cq, QpCaps, QpType, Result, WcStatus};
use rrddmma::prim::{Ah, CompChannel, CqBuilder, ParentDomain, Pd, Qp, QpBuilder, Srq};
use rrddmma::prim::{DmMr, Mr, Mw, RemoteMr, SendFlags, WrBatch};

/// The old constructor names (the API sweep).
#[allow(dead_code)]
fn constructors(ctx: &Context, attr: &AhAttr) -> Result<()> {
    let pd = Pd::new(ctx)?;
    let _parent = ParentDomain::new(&pd)?;
    let cq = Cq::new(ctx, 16)?;
    let _ex = CqBuilder::new(ctx, 16).build()?;
    let _qp = QpBuilder::new(&pd, QpType::RC, &cq, &cq).build()?;
    let _rc = Qp::new_rc(&pd, &cq, &cq, QpCaps::default())?;
    let _srq = Srq::new(&pd, 64, 1)?;
    let _ah = Ah::new(&pd, attr)?;
    let _channel = CompChannel::new(ctx)?;
    Ok(())
}

/// The memory APIs' old integer forms (one convention now: `usize` offsets
/// and lengths).
#[allow(dead_code)]
fn memory_ranges(qp: &Qp, batch: &mut WrBatch<'_>, mr: &Mr, dm: &DmMr, mw: &mut Mw) -> Result<()> {
    let _ = mr.sge(0, 64);
    let _ = dm.sge(0, 8);
    let _ = qp.bind_mw(mw, mr, 0, 64, AccessFlags::REMOTE_READ, 1)?;
    let _ = batch.bind_mw(2, SendFlags::SIGNALED, mw, mr, (0, 64), AccessFlags::REMOTE_READ)?;
    Ok(())
}

/// The RDMA CM's old constructor names.
#[cfg(feature = "cm")]
#[allow(dead_code)]
fn cm_constructors() -> Result<()> {
    use rrddmma::prim::cm::{CmId, EventChannel, PortSpace};
    let ch = EventChannel::new()?;
    let _id = CmId::new(&ch, PortSpace::Rc)?;
    Ok(())
}

/// The mlx5dv names of rdma-core builds.
#[cfg(not(rrddmma_mlnx_ofed4))]
mod mlx5dv_names {
    use rrddmma::mlx5dv::comp::{self, CompressedCq};
    use rrddmma::mlx5dv::cqe::{self, CqeOpcode};
    use rrddmma::mlx5dv::dc::{self, Dci};
    use rrddmma::mlx5dv::mini::CqeResFormat;
    use rrddmma::mlx5dv::seg::{self, CtrlFlags, TmFlags, TmOpcode, TmSeg, WqeOpcode};
    use rrddmma::prim::{Context, Cq, Pd, QpCaps, Result, SendOps, Srq};

    /// `comp::create_cq`, `CompressedCq` and its readers; the old DC constructors.
    #[allow(dead_code)]
    fn device(ctx: &Context, pd: &Pd, srq: &Srq, mkey: &rrddmma::mlx5dv::mkey::Mkey) -> Result<()> {
        let _ = mkey.at(0);
        let compressed: CompressedCq = comp::create_cq(ctx, 64, CqeResFormat::Csum)?;
        let cq: &Cq = compressed.cq();
        let _format: CqeResFormat = compressed.format();
        let _dct = dc::create_dct(pd, cq, srq, 0x1234)?;
        let _dci = Dci::new(pd, cq, cq, QpCaps::default(), SendOps::BASIC)?;
        Ok(())
    }

    #[test]
    fn old_value_names_are_the_typed_values() {
        assert_eq!(seg::opcode::RDMA_WRITE, WqeOpcode::RDMA_WRITE);
        assert_eq!(seg::opcode::ATOMIC_MASKED_FA, WqeOpcode::ATOMIC_MASKED_FA);
        assert_eq!(seg::opcode::NOP.to_raw(), 0);
        assert_eq!(seg::fm_ce_se::CQ_UPDATE, CtrlFlags::CQ_UPDATE);
        assert_eq!(seg::fm_ce_se::SMALL_FENCE, CtrlFlags::INITIATOR_SMALL_FENCE);
        assert_eq!(cqe::opcode::REQ, CqeOpcode::REQ);
        assert_eq!(cqe::opcode::RESP_ERR, CqeOpcode::RESP_ERR);
        assert_eq!(TmSeg::APPEND, TmOpcode::APPEND);
        assert_eq!(TmSeg::with_op(TmSeg::REMOVE).op(), TmOpcode::REMOVE);
        assert_eq!(TmSeg::FLAG_CQE_REQ | TmSeg::FLAG_SW_CNT, TmFlags::CQE_REQ | TmFlags::SW_CNT);
        assert_eq!(TmSeg::NOP, TmOpcode::NOP);
        // An old opcode constant still feeds the raw writer's argument type.
        let _: WqeOpcode = seg::opcode::SEND;
    }
}

#[test]
fn old_names_are_their_replacements() {
    assert_eq!(QpType::IBV_QPT_UD, QpType::UD);
    assert_eq!(AccessFlags::IBV_ACCESS_REMOTE_WRITE, AccessFlags::REMOTE_WRITE);
    assert_eq!(WcStatus::IBV_WC_SUCCESS, WcStatus::SUCCESS);
    assert_eq!(AttrMask::EMPTY, AttrMask::empty());
    let m = AttrMask::STATE.or(AttrMask::PORT);
    assert_eq!(m, AttrMask::STATE | AttrMask::PORT);
    assert_eq!(m.minus(AttrMask::PORT), AttrMask::STATE);
    assert_eq!(m.names(), ["state", "port"]);
    assert!(AttrMask::EMPTY.names().is_empty());
    let remote = RemoteMr { addr: 0x1000, len: 64, rkey: 7 };
    assert_eq!(remote.at(8), remote.addr_at(8));
    assert_eq!(remote.checked_at(8, 56), remote.checked_addr_at(8, 56).ok());
    assert_eq!(remote.checked_at(8, 57), None);
}

/// Built with `-D deprecated`, this file fails at every old name, each
/// error's note naming the replacement (rustc prints all of them: no old
/// name hides the next). Compiled against the library this test was built
/// with (the newest `librrddmma-*.rlib` beside this executable).
#[test]
fn without_the_allow_every_old_name_warns_naming_its_replacement() {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let rlib = std::fs::read_dir(deps)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("librrddmma-") && n.ends_with(".rlib")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .expect("librrddmma-*.rlib beside the test executable")
        .path();
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/old_names.rs")).unwrap();
    // The same program, with the allow taken out.
    let strict = src.replacen("#![allow(deprecated)]", "#![deny(deprecated)]", 1);
    let dir = std::env::temp_dir().join(format!("rrddmma-old-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("old_names.rs");
    std::fs::write(&file, strict).unwrap();
    let mut cmd = std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
    cmd.args(["--edition", "2021", "--crate-type", "lib", "--test", "--emit", "metadata", "-o"])
        .arg(dir.join("out.rmeta"))
        .arg("-L")
        .arg(deps)
        .arg("--extern")
        .arg(format!("rrddmma={}", rlib.display()))
        .arg(&file);
    cmd.env("CARGO_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"));
    if cfg!(feature = "cm") {
        cmd.args(["--cfg", "feature=\"cm\""]);
    }
    let out = cmd.output().expect("run rustc");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = impl_paths_by_type(&String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "the old names build without a deprecation: {stderr}");
    // Every error is a deprecation (the program is otherwise sound), and
    // each names what to use; `deprecated` holds the paths they name.
    let mut deprecated = Vec::new();
    for e in stderr.split("\nerror").skip(1) {
        let head = e.lines().next().unwrap_or("");
        if head.starts_with(": aborting") || head.starts_with(": could not compile") {
            continue;
        }
        assert!(head.contains("use of deprecated"), "not a deprecation: error{head}\n{stderr}");
        assert!(
            head.contains(": use ")
                || head.contains(" use `")
                || head.contains("renamed")
                || head.contains("typed now"),
            "a deprecation that names no replacement: error{head}"
        );
        deprecated.push(head.split('`').nth(1).unwrap_or("").to_string());
    }
    let warned = |old: &str| deprecated.iter().any(|p| p.ends_with(old) || p.contains(&format!("{old}::")));
    for old in [
        "Pd::new",
        "ParentDomain::new",
        "Cq::new",
        "CqBuilder::new",
        "QpBuilder::new",
        "Qp::new_rc",
        "Srq::new",
        "Ah::new",
        "CompChannel::new",
        "IBV_QPT_UD",
        "IBV_ACCESS_REMOTE_WRITE",
        "IBV_WC_SUCCESS",
        "AttrMask::EMPTY",
        "AttrMask::or",
        "AttrMask::minus",
        "AttrMask::names",
        "Mr::sge",
        "DmMr::sge",
        "Qp::bind_mw",
        "WrBatch::<'_>::bind_mw",
        "RemoteMr::at",
        "RemoteMr::checked_at",
    ] {
        assert!(warned(old), "no deprecation for {old}: {deprecated:#?}");
    }
    #[cfg(not(rrddmma_mlnx_ofed4))]
    for old in [
        "comp::create_cq",
        "comp::CompressedCq",
        "Cq::cq",
        "Cq::format",
        "dc::create_dct",
        "Dci::new",
        "Mkey::at",
        "seg::opcode",
        "seg::fm_ce_se",
        "cqe::opcode",
        "TmSeg::APPEND",
        "TmSeg::REMOVE",
        "TmSeg::NOP",
        "TmSeg::FLAG_CQE_REQ",
        "TmSeg::FLAG_SW_CNT",
    ] {
        assert!(warned(old), "no deprecation for {old}: {deprecated:#?}");
    }
}

/// rustc names an item of an inherent impl `path::<impl rrddmma::prim::Cq>::new`:
/// written `Cq::new` here, as a program names it.
fn impl_paths_by_type(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("<impl ") {
        out.push_str(&rest[..i]);
        let inner = &rest[i + "<impl ".len()..];
        let mut depth = 1;
        let end = inner
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '<' => 1,
                    '>' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(inner.len(), |(j, _)| j);
        let ty = inner[..end].split('<').next().unwrap_or("");
        out.push_str(ty.rsplit("::").next().unwrap_or(ty));
        rest = inner.get(end + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}
