//! The verbs of rdma-core 54 to 59 (issue 50): DMA handles and
//! `ibv_reg_mr_ex` (rdma-core 58), data-direct (libmlx5 54), out-of-order
//! data placement (libmlx5 55). Looked up at run time: under rdma-core 44
//! each is the exact `Unsupported` naming the release that has it; under
//! v59 (the kernel matrix's `dlopen` build pointed at it) rxe and siw reach
//! the provider, which has no DMA handles nor `ibv_reg_mr_ex` (mlx5 only),
//! and the mlx5 functions refuse a device that is not mlx5, naming it.
//! Each refusal is checked by its row of `prim::unsupported`, its device and value.

use std::fs::File;
use std::os::fd::AsFd;

use rrddmma::prim::mlx5::{data_direct_sysfs_path, ooo_recv_wrs_caps};
use rrddmma::prim::{
    AccessFlags, Context, Cq, DmaHandle, Error, Mlx5QpFlags, Mr, MrExOptions, MrMemory, Pd, Qp, QpType, TphMemType,
};

use crate::common::{open_device, panic_message};
use crate::userspace::userspace;

/// A device whose provider is not mlx5 (rxe, siw): the ones these tests
/// know the outcome of.
fn is_software(ctx: &Context) -> bool {
    ctx.query_device().unwrap().vendor_id == 0xff_ffff || ctx.name().starts_with("siw")
}

/// `e` is the refusal of `op` from the row `row` on `ctx`'s device, whose
/// value of the row's capability ends with `value`.
fn assert_refusal(e: &Error, ctx: &Context, op: &str, row: &str, value: &str) {
    let lack = e.lack().unwrap_or_else(|| panic!("expected the refusal {row} of {op}, got {e:?}"));
    assert!(matches!(e, Error::Unsupported { op: o, .. } if *o == op), "expected op {op}: {e:?}");
    assert_eq!(lack.missing.name, row, "{e}");
    assert_eq!(lack.device, ctx.name(), "{e}");
    assert!(lack.value.ends_with(&format!(" = {value}")), "expected value {value:?}: {e}");
    assert!(e.is_unsupported() && e.errno() == Some(libc::EOPNOTSUPP), "{e:?}");
}

/// The value a `*_SYMBOL` refusal gives: absent from the library, or a static build.
fn absent() -> &'static str {
    if matches!(rrddmma::build_info().linkage, "static" | "source") {
        "absent (static build)"
    } else {
        "absent"
    }
}

fn static_build() -> bool {
    absent() != "absent"
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dmah_alloc_and_reg_mr_ex_or_the_exact_refusal() {
    let ctx = open_device();
    let release = userspace();
    let new = release >= 58 && !static_build();
    let pd = Pd::alloc(&ctx).unwrap();
    let handle = DmaHandle::alloc(&ctx, Some(0), Some(0), Some(TphMemType::Volatile));
    let mut buf = vec![0u8; 8192].into_boxed_slice();
    let addr = buf.as_mut_ptr();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let reg = |dmah: Option<&DmaHandle>| {
        let opts = MrExOptions { dmah, ..MrExOptions::default() };
        // SAFETY: `buf` outlives every region made here (each is dropped before it).
        unsafe { Mr::register_ex(&pd, MrMemory::Addr(addr), 4096, access, opts) }
    };
    if !is_software(&ctx) {
        // mlx5 under v59: the positive path where the kernel offers TPH.
        match &handle {
            Ok(h) => {
                let mr = reg(Some(h)).expect("ibv_reg_mr_ex with a DMA handle the device allocated");
                assert_eq!(mr.len(), 4096);
                eprintln!("dmah: {} allocated {h:?} and registered {mr:?} with it", ctx.name());
            }
            Err(e) => eprintln!("dmah: {} under rdma-core {release}: {e}", ctx.name()),
        }
        return;
    }
    if !new {
        // rdma-core 44: the symbol is absent; nothing reaches the provider.
        assert_refusal(handle.as_ref().unwrap_err(), &ctx, "ibv_alloc_dmah", "DMAH_SYMBOL", absent());
        let e = reg(None).unwrap_err();
        assert_refusal(&e, &ctx, "ibv_reg_mr_ex", "REG_MR_EX_SYMBOL", absent());
        eprintln!("dmah: {} under rdma-core {release}: {}; {e}", ctx.name(), handle.unwrap_err());
        return;
    }
    // rdma-core 59: rxe and siw have neither op (libibverbs' default answers EOPNOTSUPP).
    let e = handle.unwrap_err();
    assert_refusal(&e, &ctx, "ibv_alloc_dmah", "DMAH_PROVIDER", "EOPNOTSUPP");
    assert!(e.to_string().starts_with(&format!("ibv_alloc_dmah: DMA handles is not supported by {}", ctx.name())));
    let r = reg(None).unwrap_err();
    assert_refusal(&r, &ctx, "ibv_reg_mr_ex", "REG_MR_EX_PROVIDER", "EOPNOTSUPP");
    // A dma-buf source asks the same verb: the same refusal.
    let file = File::open("/proc/self/exe").unwrap();
    let src = MrMemory::DmaBuf { fd: file.as_fd(), offset: 0 };
    // SAFETY: a dma-buf source needs nothing of the caller.
    let d = unsafe { Mr::register_ex(&pd, src, 4096, access, MrExOptions::default()) }.unwrap_err();
    assert_refusal(&d, &ctx, "ibv_reg_mr_ex", "REG_MR_EX_PROVIDER", "EOPNOTSUPP");
    eprintln!("dmah: {} under rdma-core {release}: {e}; {r}", ctx.name());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn data_direct_sysfs_path_and_dmabuf_mr_or_the_exact_refusal() {
    let ctx = open_device();
    let release = userspace();
    let new = release >= 54 && !static_build();
    let pd = Pd::alloc(&ctx).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let file = File::open("/proc/self/exe").unwrap();
    let dd = MrExOptions { data_direct: true, ..MrExOptions::default() };
    // Data-direct is for dma-bufs: asking it for process memory is the program's error.
    let mut mem = [0u8; 64];
    let m = panic_message(|| {
        // SAFETY: never registered (the call panics first).
        unsafe { Mr::register_ex(&pd, MrMemory::Addr(mem.as_mut_ptr()), 64, access, dd) }
    });
    assert!(m.starts_with("Mr::register_ex: data-direct registers a dma-buf"), "{m}");
    let path = data_direct_sysfs_path(&ctx);
    let src = MrMemory::DmaBuf { fd: file.as_fd(), offset: 0 };
    // SAFETY: a dma-buf source needs nothing of the caller.
    let mr = unsafe { Mr::register_ex(&pd, src, 4096, access, dd) };
    if !is_software(&ctx) {
        eprintln!(
            "data_direct: {} under rdma-core {release}: path {path:?}; a non-dma-buf descriptor: {mr:?}",
            ctx.name()
        );
        return;
    }
    let (pe, me) = (path.unwrap_err(), mr.unwrap_err());
    if new {
        // The symbols are there; the device is not mlx5, and the refusal names it.
        let path_op = "mlx5dv_get_data_direct_sysfs_path";
        assert_refusal(&pe, &ctx, path_op, "NOT_MLX5", &format!("false (asked for {path_op})"));
        let reg_op = "mlx5dv_reg_dmabuf_mr";
        assert_refusal(&me, &ctx, reg_op, "NOT_MLX5", &format!("false (asked for {reg_op})"));
    } else {
        assert_refusal(&pe, &ctx, "mlx5dv_get_data_direct_sysfs_path", "DATA_DIRECT_PATH_SYMBOL", absent());
        assert_refusal(&me, &ctx, "mlx5dv_reg_dmabuf_mr", "DATA_DIRECT_REG_SYMBOL", absent());
    }
    eprintln!("data_direct: {} under rdma-core {release}: {pe}; {me}", ctx.name());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn ooo_dp_is_refused_from_the_device_caps() {
    let ctx = open_device();
    let release = userspace();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let caps = ooo_recv_wrs_caps(&ctx);
    let built = Qp::builder(&pd, QpType::RC, &cq, &cq).mlx5_create_flags(Mlx5QpFlags::OOO_DP).build();
    if !is_software(&ctx) {
        eprintln!("ooo: {} under rdma-core {release}: caps {caps:?}, RC QP {:?}", ctx.name(), built.map(|q| q.qpn()));
        return;
    }
    // Off mlx5, on either release: the refusal names the flag's operation and the device.
    let op = "mlx5dv_create_qp (MLX5DV_QP_CREATE_OOO_DP)";
    let asked = "false (asked for Mlx5QpFlags::OOO_DP)";
    assert_refusal(caps.as_ref().unwrap_err(), &ctx, op, "MLX5_OPTION", asked);
    let e = built.unwrap_err();
    assert_refusal(&e, &ctx, op, "MLX5_OPTION", asked);
    // Without the flag, the other mlx5 flags keep their own refusal.
    let other = Qp::builder(&pd, QpType::RC, &cq, &cq).mlx5_create_flags(Mlx5QpFlags::ALLOW_SCATTER_TO_CQE).build();
    let other = other.unwrap_err();
    assert!(matches!(other, Error::Unsupported { op: "mlx5dv_create_qp", .. }), "{other:?}");
    eprintln!("ooo: {} under rdma-core {release}: {e}", ctx.name());
}
