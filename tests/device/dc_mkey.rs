//! `wrap::dc::indirect_mkey`: an indirect key laid out in one call, with no
//! QP of the caller's (the UMR on a loopback pair private to the call).
//! Off mlx5 the typed refusal of its row; on ConnectX a DCI WRITEs through
//! the key into three regions of a DC target's process, in order.

use std::time::{Duration, Instant};

use rrddmma::mlx5dv::dc::{Dci, DciOpts, Dct, DctAddr, DctOpts};
use rrddmma::mlx5dv::umr::{MkeyConf, MkeyLayout, MrRange};
use rrddmma::mlx5dv::{self, mkey::INDIRECT_FEATURE};
use rrddmma::prim::unsupported::{ALL, MKEY_NOT_MLX5};
use rrddmma::prim::{AccessFlags, Ah, AhAttr, ConnectOpts, Cq, Error, Mr, Pd, QpCaps, SendWr, Srq, WcStatus};
use rrddmma::wrap::dc::{indirect_mkey, MkeyError};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn indirect_mkey_in_one_call_refused_off_mlx5_written_through_by_a_dci_on_mlx5() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mut parts = [vec![0u8; 64], vec![0u8; 64], vec![0u8; 64]];
    // SAFETY: the buffers outlive their regions, the key and every request.
    let mrs: Vec<Mr> =
        parts.iter_mut().map(|p| unsafe { Mr::register(&pd, p.as_mut_ptr(), p.len(), access) }.unwrap()).collect();
    let ranges: Vec<MrRange<'_>> = mrs.iter().map(|mr| MrRange { mr, offset: 8, len: 16 }).collect();
    let conf = MkeyConf { access: Some(access), layout: Some(MkeyLayout::List(&ranges)) };
    let key = match indirect_mkey(&pd, 4, conf, &ConnectOpts::default()) {
        Err(MkeyError::Verbs(ref e @ Error::Unsupported { op, feature, ref lack, .. }))
            if !mlx5dv::is_supported(&ctx) =>
        {
            assert_eq!(op, "mlx5dv_create_mkey", "{e}");
            assert_eq!((feature, feature), (INDIRECT_FEATURE, MKEY_NOT_MLX5.feature), "{e}");
            assert!(ALL.iter().any(|r| r.feature == feature), "not a row of prim::unsupported::ALL: {e}");
            assert_eq!(lack.device, ctx.name(), "{e}");
            assert_eq!(lack.value, "mlx5dv_is_supported = false", "{e}");
            eprintln!("indirect_mkey refused: {e}");
            return;
        }
        Err(e) => panic!("indirect_mkey on {}: {e}", ctx.name()),
        Ok(_) if !mlx5dv::is_supported(&ctx) => panic!("indirect_mkey on {}, not mlx5: must be refused", ctx.name()),
        Ok(k) => k,
    };
    assert_eq!(key.held_regions(), 3, "the key holds its layout's regions");
    // The layout stays after the call's private QPs are gone: a DCI
    // WRITEs 48 bytes through the key to this process's DC target.
    let cq = Cq::create(&ctx, 16).unwrap();
    let srq = Srq::builder(&pd).max_wr(4).build().unwrap();
    let dct = Dct::create(&pd, &cq, &srq, 0x5a, &DctOpts::default().access(access)).unwrap();
    let dci = Dci::create(&pd, &cq, &cq, QpCaps::default()).unwrap();
    dci.connect(&DciOpts::default()).unwrap();
    let port = 1;
    let attr = match ctx.roce_v2_gid_index(port) {
        Ok(i) => AhAttr::global(port, i, ctx.query_gid(port, u32::from(i)).unwrap()),
        Err(_) => AhAttr::lid(port, ctx.query_port(port).unwrap().lid()),
    };
    let ah = Ah::create(&pd, &attr).unwrap();
    let mut src: Vec<u8> = (1..=48).collect();
    // SAFETY: `src` outlives the region and the request.
    let mr_src = unsafe { Mr::register(&pd, src.as_mut_ptr(), src.len(), access) }.unwrap();
    let sges = [mr_src.sge_at(0, 48)];
    // SAFETY: `src` is registered and untouched until the completion below.
    unsafe {
        dci.post(&SendWr::write(&sges, key.addr_at(0)).wr_id(9).signaled(), &DctAddr::new(&ah, dct.dctn(), 0x5a))
    }
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut wc = [rrddmma::prim::Wc::default()];
    while cq.poll(&mut wc).unwrap() == 0 {
        assert!(Instant::now() < deadline, "no completion of the WRITE through the key");
    }
    assert_eq!((wc[0].wr_id(), wc[0].status()), (9, WcStatus::SUCCESS));
    drop(mrs);
    drop(key);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(&p[8..24], &src[i * 16..i * 16 + 16], "region {i}");
        assert!(p[..8].iter().chain(&p[24..]).all(|&b| b == 0), "region {i}: only its range is written");
    }
}
