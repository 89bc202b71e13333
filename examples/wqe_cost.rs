//! The Rust side of `cargo xtask bench-wqe`: builds RDMA WRITE WQEs with
//! `mlx5dv::sq::SqRing` and rings the plain (non-BlueFlame) doorbell, N
//! times, over memory of its own (no device). See benches/wqe_cost/wqe_cost.c.

use rrddmma::mlx5dv::be::{Be16, Be32};
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::{Completion, Cqe64, CqeOpcode};
use rrddmma::mlx5dv::mmio::HwMmio;
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::sq::SqRing;
use rrddmma::prim::RemoteAddr;

const BBS: u32 = 64;

#[repr(C, align(64))]
struct Ring([u8; BBS as usize * 64]);

#[inline(never)]
fn post_write(sq: &mut SqRing, mmio: &mut HwMmio, raddr: u64, rkey: u32, len: u32, lkey: u32, addr: u64) -> u16 {
    let w = sq.write(CtrlFlags::CQ_UPDATE, RemoteAddr { addr: raddr, rkey });
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
    // A CQ of plain memory too, where this program writes the CQEs the
    // device would; `retire` takes only completions polled from a ring.
    const CQES: u32 = 4;
    // Invalid, owner 0: a fresh CQ.
    let mut cqes = vec![Cqe64 { op_own: 0xf0, ..Cqe64::default() }; CQES as usize];
    let base = cqes.as_mut_ptr();
    let mut cq_db = [Be32::default(); 2];
    let mut uar = Box::new([0u64; 8]);
    // SAFETY: plain memory standing in for the CQ, alive until the end of
    // `main`; this loop is its only producer.
    let mut cq = unsafe {
        CqRing::from_raw(base.cast_const().cast(), CQES, 64, cq_db.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x77)
    };
    sq.bind_cq(&cq);
    let mut out = [Completion::default()];
    let mut produced = 0u32;
    let mut mmio = HwMmio;
    for i in 0..n {
        let pi = post_write(&mut sq, &mut mmio, 0x10000 + i * 64, 0x55, 64, 0x66, 0x20000 + i * 64);
        // A completion every half ring frees the slots, as a selectively
        // signalled sender would see (the C side does no bookkeeping).
        if sq.available() <= BBS / 2 {
            let op = CqeOpcode::REQ.to_raw();
            let owner = u8::from(produced & CQES != 0);
            let cqe = Cqe64 {
                sop_drop_qpn: Be32::new((u32::from(op) << 24) | sq.qpn()),
                wqe_counter: Be16::new(pi),
                op_own: (op << 4) | owner,
                ..Cqe64::default()
            };
            // SAFETY: a CQE slot of the buffer above, written through the
            // pointer the ring reads it by.
            unsafe { std::ptr::write_volatile(base.add((produced % CQES) as usize), cqe) };
            produced += 1;
            if cq.poll(&mut out) == 1 {
                sq.retire(&out[0]);
            }
        }
    }
    println!("{} {}", sq.cur_post(), dbrec[1].get());
}
