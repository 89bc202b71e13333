//! Masked atomics: libmlx5 has no path for them, so the C half builds each
//! reference WQE independently of rrddmma's writer, which must write the
//! same bytes:
//! - masked compare-and-swap (`M` lines, 80 bytes) from the provider's own
//!   definitions (`mlx5dv_set_ctrl_seg`, `struct mlx5_wqe_raddr_seg`,
//!   wqe.h's `struct mlx5_wqe_masked_atomic_seg`, `mlx5dv_set_data_seg`);
//! - masked fetch-and-add (`F` lines, 64 bytes), which rdma-core does not
//!   describe at all, from UCX's public layout (ib_mlx5.h: the 64-bit
//!   segment `{add, field_boundary}` and the extended-atomic opmod
//!   `8 | (log2(bytes) - 2)`) with rdma-core's other segments.
//!
//! The opmod is part of the reference (0x09, written by the C half as the
//! documented formula): WQEs alternate between the general writer given
//! `ext_atomic_opmod(3)` and `SqRing::masked_cas` / `SqRing::masked_fa`,
//! which choose the opmod themselves.

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::seg::{ext_atomic_opmod, CtrlFlags, WqeOpcode};
use rrddmma::mlx5dv::sq::SqRing;
use rrddmma::prim::RemoteAddr;

use super::build::{unhex, Aligned};
use super::{Mismatch, Mutation};

/// The fields both masked WQEs start with: name, first byte, end.
const HEAD: &[(&str, usize, usize)] = &[
    ("ctrl.opmod_idx_opcode", 0, 4),
    ("ctrl.qpn_ds", 4, 8),
    ("ctrl.signature", 8, 9),
    ("ctrl.dci_stream_channel_id", 9, 11),
    ("ctrl.fm_ce_se", 11, 12),
    ("ctrl.imm", 12, 16),
    ("raddr.raddr", 16, 24),
    ("raddr.rkey", 24, 28),
    ("raddr.reserved", 28, 32),
];

/// The rest of the 80-byte masked CAS WQE.
const CAS_FIELDS: &[(&str, usize, usize)] = &[
    ("masked_atomic.swap_add", 32, 40),
    ("masked_atomic.compare", 40, 48),
    ("masked_atomic.swap_add_mask", 48, 56),
    ("masked_atomic.compare_mask", 56, 64),
    ("data.byte_count", 64, 68),
    ("data.lkey", 68, 72),
    ("data.addr", 72, 80),
];

/// The rest of the 64-byte masked fetch-and-add WQE.
const FA_FIELDS: &[(&str, usize, usize)] = &[
    ("masked_fa.add", 32, 40),
    ("masked_fa.field_boundary", 40, 48),
    ("data.byte_count", 48, 52),
    ("data.lkey", 52, 56),
    ("data.addr", 56, 64),
];

/// Which masked atomic: `M` (CAS) or `F` (fetch-and-add) lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Masked {
    Cas,
    Fa,
}

/// Checks every line of `which` (one queue of two basic blocks); returns how
/// many WQEs were compared. `Mutation::MaskedBoundary` flips bit 0 of the
/// first fetch-and-add's field boundary on our side.
pub fn check(out: &str, which: Masked, mutation: Mutation) -> Result<usize, Box<Mismatch>> {
    let (tag, len, fields, kind) = match which {
        Masked::Cas => ("M ", 80, CAS_FIELDS, "masked CAS (reference from wqe.h)"),
        Masked::Fa => ("F ", 64, FA_FIELDS, "masked FA (reference from UCX's documented layout)"),
    };
    let lines: Vec<Vec<&str>> =
        out.lines().filter(|l| l.starts_with(tag)).map(|l| l.split(' ').skip(1).collect()).collect();
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
        let remote = RemoteAddr { addr: num(2), rkey: num(3) as u32 };
        // Even WQEs: the general writer, given the opcode and opmod; odd
        // ones: the typed method, which picks both.
        let general = i % 2 == 0;
        let start = sq.cur_post();
        let pi = match which {
            Masked::Cas => {
                let (swap, compare, swap_mask, compare_mask) = (num(4), num(5), num(6), num(7));
                let (lkey, laddr) = (num(8) as u32, num(9));
                if general {
                    // SAFETY: a masked CAS's layout: remote address, the masked
                    // atomic segment, then one data segment; the ring is
                    // never handed to a device.
                    let w = unsafe { sq.wqe(WqeOpcode::ATOMIC_MASKED_CS, ext_atomic_opmod(3), fm, 0) }
                        .raddr(remote.addr, remote.rkey)
                        .masked_cas(swap, compare, swap_mask, compare_mask);
                    // SAFETY: never handed to a device; the address is only compared.
                    unsafe { w.data(8, lkey, laddr) }.finish()
                } else {
                    let w = sq.masked_cas(fm, remote, compare, compare_mask, swap, swap_mask);
                    // SAFETY: as above.
                    unsafe { w.data(8, lkey, laddr) }.finish()
                }
            }
            Masked::Fa => {
                let (add, mut boundary) = (num(4), num(5));
                let (lkey, laddr) = (num(6) as u32, num(7));
                if mutation == Mutation::MaskedBoundary && i == 0 {
                    boundary ^= 1;
                }
                if general {
                    // SAFETY: a masked FA's layout: remote address, the masked
                    // fetch-add segment, then one data segment; the ring is
                    // never handed to a device.
                    let w = unsafe { sq.wqe(WqeOpcode::ATOMIC_MASKED_FA, ext_atomic_opmod(3), fm, 0) }
                        .raddr(remote.addr, remote.rkey)
                        .masked_fa(add, boundary);
                    // SAFETY: never handed to a device; the address is only compared.
                    unsafe { w.data(8, lkey, laddr) }.finish()
                } else {
                    let w = sq.masked_fa(fm, remote, add, boundary);
                    // SAFETY: as above.
                    unsafe { w.data(8, lkey, laddr) }.finish()
                }
            }
        };
        let reference = unhex(f[f.len() - 1]);
        assert_eq!(reference.len(), len, "the C half's {tag}line {i} holds a {len}-byte WQE");
        let at = (start as usize & 1) * 64;
        let ours: Vec<u8> = (0..len).map(|b| ring.bytes()[(at + b) % 128]).collect();
        if let Some(b) = (0..len).find(|&b| ours[b] != reference[b]) {
            let field = HEAD.iter().chain(fields).find(|x| (x.1..x.2).contains(&b)).map_or("?", |x| x.0);
            return Err(Box::new(Mismatch {
                kind: kind.into(),
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
