//! Shared by `rdma_server` and `rdma_client`: one 16-byte message each way
//! on an RC connection made through librdmacm, as librdmacm's examples of
//! the same names do.

use std::time::{Duration, Instant};

use rrddmma::prim::{QpCaps, RecvWr, SendWr, Wc, WcStatus};
use rrddmma::wrap::{CmConn, CmOpts, RegisteredMem};

/// Bytes of each message.
pub const MSG_LEN: usize = 16;

/// A QP of one send and one receive slot with 16 bytes of inline data.
pub fn opts() -> CmOpts {
    CmOpts::default()
        .caps(QpCaps::default().max_send_wr(1).max_recv_wr(1).max_send_sge(1).max_recv_sge(1).max_inline_data(16))
        .cq_depth(4)
        .timeout(Duration::from_secs(10))
}

/// Posts the receive of one message into `mem`.
pub fn post_recv(c: &CmConn, mem: &RegisteredMem) -> Result<(), rrddmma::prim::Error> {
    let sge = [mem.sge(0..MSG_LEN)];
    // SAFETY: `mem` is registered on the QP's PD and outlives the completion (`wait`).
    unsafe { c.qp.post_recv(&mut [RecvWr::new(&sge, 1)]) }
}

/// Sends `mem`'s first 16 bytes and waits for the completion.
pub fn send(c: &CmConn, mem: &RegisteredMem) -> Result<Wc, String> {
    let sge = [mem.sge(0..MSG_LEN)];
    // SAFETY: `mem` is registered on the QP's PD; the completion is awaited below.
    unsafe { c.qp.post_send(&mut [SendWr::send(&sge).signaled()]) }.map_err(|e| e.to_string())?;
    wait(c, true)
}

/// One completion of the send (or receive) CQ, successful, within 10 s.
pub fn wait(c: &CmConn, send: bool) -> Result<Wc, String> {
    let cq = if send { &c.send_cq } else { &c.recv_cq };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wc = [Wc::default()];
    loop {
        if cq.poll(&mut wc).map_err(|e| e.to_string())? == 1 {
            if wc[0].status() != WcStatus::SUCCESS {
                return Err(format!("completion status {}", wc[0].status()));
            }
            if !send && wc[0].byte_len() as usize != MSG_LEN {
                return Err(format!("received {} bytes, not {MSG_LEN}", wc[0].byte_len()));
            }
            return Ok(wc[0]);
        }
        if Instant::now() > deadline {
            return Err("no completion within 10 s".into());
        }
        std::thread::yield_now();
    }
}
