//! Masked compare-and-swap: libmlx5 has no path for it, so the C half builds
//! the reference WQE from the provider's own definitions (`mlx5dv_set_ctrl_seg`,
//! `struct mlx5_wqe_raddr_seg`, wqe.h's `struct mlx5_wqe_masked_atomic_seg`,
//! `mlx5dv_set_data_seg`), independently of rrddmma's writer, which must
//! write the same 80 bytes.

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::seg::{ext_atomic_opmod, CtrlFlags, WqeOpcode};
use rrddmma::mlx5dv::sq::SqRing;

use super::build::{unhex, Aligned};
use super::Mismatch;

/// The fields of the 80-byte WQE: name, first byte, end.
const FIELDS: &[(&str, usize, usize)] = &[
    ("ctrl.opmod_idx_opcode", 0, 4),
    ("ctrl.qpn_ds", 4, 8),
    ("ctrl.signature", 8, 9),
    ("ctrl.dci_stream_channel_id", 9, 11),
    ("ctrl.fm_ce_se", 11, 12),
    ("ctrl.imm", 12, 16),
    ("raddr.raddr", 16, 24),
    ("raddr.rkey", 24, 28),
    ("raddr.reserved", 28, 32),
    ("masked_atomic.swap_add", 32, 40),
    ("masked_atomic.compare", 40, 48),
    ("masked_atomic.swap_add_mask", 48, 56),
    ("masked_atomic.compare_mask", 56, 64),
    ("data.byte_count", 64, 68),
    ("data.lkey", 68, 72),
    ("data.addr", 72, 80),
];

/// Checks every `M` line (one queue of two basic blocks, one WQE after the
/// other); returns how many WQEs were compared.
pub fn check(out: &str) -> Result<usize, Box<Mismatch>> {
    let lines: Vec<Vec<&str>> =
        out.lines().filter(|l| l.starts_with("M ")).map(|l| l.split(' ').skip(1).collect()).collect();
    let Some(first) = lines.first() else { return Ok(0) };
    let qpn: u32 = first[0].parse().unwrap();
    let mut ring = Aligned::new(128);
    let mut dbrec = Aligned::new(64);
    let mut bf = Aligned::new(64);
    // SAFETY: aligned buffers of the sizes `from_raw` asks for, alive as long
    // as `sq` (dropped at the end of this function); no device sees them.
    let mut sq =
        unsafe { SqRing::from_raw(ring.as_mut_ptr(), 2, dbrec.as_mut_ptr().cast::<Be32>(), bf.as_mut_ptr(), 0, qpn) };
    let mut cq = crate::mlx5_support::SoftCq::new(16);
    sq.bind_cq(&cq.ring);
    for (i, f) in lines.iter().enumerate() {
        let num = |i: usize| -> u64 { f[i].parse().unwrap() };
        let fm = CtrlFlags::from_bits_retain(num(1) as u8);
        // SAFETY: a masked CAS's layout: remote address, the masked atomic
        // segment, then one data segment; the ring is never handed to a device.
        let w = unsafe { sq.wqe(WqeOpcode::ATOMIC_MASKED_CS, ext_atomic_opmod(3), fm, 0) }
            .raddr(num(2), num(3) as u32)
            .masked_cas(num(4), num(5), num(6), num(7));
        // SAFETY: the ring is never handed to a device; the address is only compared.
        let pi = unsafe { w.data(8, num(8) as u32, num(9)) }.finish();
        let reference = unhex(f[10]);
        let ours = &ring.bytes()[..80];
        if let Some(b) = (0..80).find(|&b| ours[b] != reference[b]) {
            let field = FIELDS.iter().find(|x| (x.1..x.2).contains(&b)).map_or("?", |x| x.0);
            return Err(Box::new(Mismatch {
                kind: "masked CAS (reference from wqe.h)".into(),
                at: format!("WQE {i}"),
                field: field.into(),
                byte: Some(b),
                theirs: format!("{:#04x}", reference[b]),
                ours: format!("{:#04x}", ours[b]),
            }));
        }
        let done = cq.req(qpn, pi);
        assert!(sq.retire(&done), "WQE {i} retires");
    }
    Ok(lines.len())
}
