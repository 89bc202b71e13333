//! The Rust side of `cargo xtask bench-wqe`: builds RDMA WRITE WQEs with
//! `mlx5dv::sq::SqRing` and rings the plain (non-BlueFlame) doorbell, N
//! times, over memory of its own (no device). See benches/wqe_cost/wqe_cost.c.

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cqe::{Completion, CqeOpcode};
use rrddmma::mlx5dv::mmio::HwMmio;
use rrddmma::mlx5dv::seg::{CtrlFlags, WqeOpcode};
use rrddmma::mlx5dv::sq::SqRing;

const BBS: u32 = 64;

#[repr(C, align(64))]
struct Ring([u8; BBS as usize * 64]);

#[inline(never)]
fn post_write(sq: &mut SqRing, mmio: &mut HwMmio, raddr: u64, rkey: u32, len: u32, lkey: u32, addr: u64) -> u16 {
    let w = sq.wqe(WqeOpcode::RDMA_WRITE, 0, CtrlFlags::CQ_UPDATE, 0).raddr(raddr, rkey);
    // SAFETY: no device reads this ring (plain memory, see `main`).
    unsafe { w.data(len, lkey, addr) }.post(mmio)
}

fn usage(e: lexopt::Error) -> ! {
    eprintln!("wqe_cost: {e}\nusage: wqe_cost [ITERATIONS]");
    std::process::exit(2)
}

fn main() {
    let mut p = lexopt::Parser::from_env();
    let n: u64 = match p.next() {
        Ok(Some(lexopt::Arg::Value(v))) => lexopt::ValueExt::parse(&v).unwrap_or_else(|e| usage(e)),
        Ok(None) => 0,
        Ok(Some(other)) => usage(other.unexpected()),
        Err(e) => usage(e),
    };
    let mut ring = Box::new(Ring([0; BBS as usize * 64]));
    let mut dbrec = [Be32::default(); 2];
    let mut reg = Box::new([0u64; 8]);
    // SAFETY: plain memory standing in for the queue, record and register,
    // alive until the end of `main`.
    let mut sq = unsafe {
        SqRing::from_raw(ring.0.as_mut_ptr(), BBS, dbrec.as_mut_ptr().add(1), reg.as_mut_ptr().cast(), 0, 0x1234)
    };
    let mut mmio = HwMmio;
    for i in 0..n {
        let pi = post_write(&mut sq, &mut mmio, 0x10000 + i * 64, 0x55, 64, 0x66, 0x20000 + i * 64);
        // A completion every half ring frees the slots, as a selectively
        // signalled sender would see (the C side does no bookkeeping).
        if sq.available() <= BBS / 2 {
            let done = Completion { opcode: CqeOpcode::REQ, qpn: sq.qpn(), wqe_counter: pi, ..Completion::default() };
            sq.retire(&done);
        }
    }
    println!("{} {}", sq.cur_post(), dbrec[1].get());
}
