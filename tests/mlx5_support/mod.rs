//! A software CQ for the ring tests: a producer that writes CQEs as the
//! device would (owner bit per lap) into a `CqRing`, so that the tests
//! retire WQEs with completions really polled from a ring.

#![allow(dead_code)]

use rrddmma::mlx5dv::be::{Be16, Be32};
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::{Completion, Cqe64, CqeOpcode};

/// A CQ ring over test memory and its software producer.
pub struct SoftCq {
    buf: Vec<u64>,
    _dbrec: Box<[Be32; 2]>,
    _uar: Vec<u64>,
    /// The poller under test.
    pub ring: CqRing,
    cnt: u32,
    produced: u32,
}

impl SoftCq {
    /// A CQ of `cnt` 64-byte entries (a power of two), all invalid.
    pub fn new(cnt: u32) -> SoftCq {
        let mut buf = vec![0u64; cnt as usize * 8];
        for i in 0..cnt as usize {
            // op_own = INVALID, owner 0, as a fresh CQ holds.
            buf[i * 8 + 7] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 0xf0]);
        }
        let mut dbrec = Box::new([Be32::default(); 2]);
        let mut uar = vec![0u64; 8];
        // SAFETY: the buffers live beside the ring in this struct (heap
        // memory that never moves) and only this producer writes them.
        let ring = unsafe {
            CqRing::from_raw(buf.as_ptr().cast(), cnt, 64, dbrec.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x99)
        };
        SoftCq { buf, _dbrec: dbrec, _uar: uar, ring, cnt, produced: 0 }
    }

    /// Writes one CQE of `qpn` with `opcode` and `counter`, as the device would.
    pub fn produce(&mut self, qpn: u32, opcode: CqeOpcode, counter: u16) {
        let slot = (self.produced & (self.cnt - 1)) as usize;
        let owner = u8::from(self.produced & self.cnt != 0);
        let c = Cqe64 {
            sop_drop_qpn: Be32::new((u32::from(opcode.to_raw()) << 24) | qpn),
            wqe_counter: Be16::new(counter),
            op_own: (opcode.to_raw() << 4) | owner,
            ..Cqe64::default()
        };
        // SAFETY: `Cqe64` is 64 plain bytes; the slot is inside `buf`.
        unsafe { std::ptr::write(self.buf.as_mut_ptr().add(slot * 8).cast::<Cqe64>(), c) };
        self.produced += 1;
    }

    /// Polls one completion (panics if none is there).
    pub fn poll(&mut self) -> Completion {
        let mut out = [Completion::default()];
        assert_eq!(self.ring.poll(&mut out), 1, "a CQE was produced");
        out[0]
    }

    /// The requester completion of `qpn`'s WQE at `counter`, produced and polled.
    pub fn req(&mut self, qpn: u32, counter: u16) -> Completion {
        self.produce(qpn, CqeOpcode::REQ, counter);
        self.poll()
    }
}
