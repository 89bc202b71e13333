//! [`WcError`]: an error completion as a Rust error, with the usual cause.

use std::fmt;

use super::Wc;
use crate::prim::{WcOpcode, WcStatus};

/// A completion whose status is not `SUCCESS`, from [`Wc::ok`].
///
/// Its message names the request, the QP, the status by name and, for the
/// statuses with a usual cause, what to check:
///
/// ```
/// use rrddmma::prim::{WcError, WcStatus};
/// let e = WcError { wr_id: 7, qp_num: 0x11, status: WcStatus::REM_ACCESS_ERR, opcode: None, vendor_err: 0x88 };
/// let msg = e.to_string();
/// assert!(msg.starts_with("work request 0x7 on QP 0x11 failed: REM_ACCESS_ERR (vendor error 0x88)"));
/// assert!(msg.contains("REMOTE_READ"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcError {
    /// The request's `wr_id`.
    pub wr_id: u64,
    /// The local QP number.
    pub qp_num: u32,
    /// The status.
    pub status: WcStatus,
    /// The opcode, when the device reported one (error completions of some
    /// providers leave it undefined: `None` then).
    pub opcode: Option<WcOpcode>,
    /// The vendor's error syndrome.
    pub vendor_err: u32,
}

impl WcError {
    /// What usually causes this status, and what to check; `None` for
    /// statuses without a usual cause.
    pub fn hint(&self) -> Option<&'static str> {
        use WcStatus as S;
        Some(match self.status {
            S::LOC_LEN_ERR => {
                "a local entry is shorter than the message: post a larger receive buffer \
                 (UD receives need 40 extra bytes for the GRH), or check the request's length"
            }
            S::LOC_QP_OP_ERR => {
                "the QP could not run the request: inline data above max_inline_data, more \
                 entries than max_send_sge, or an operation the QP type does not have"
            }
            S::LOC_PROT_ERR => {
                "a local entry is outside its memory region or names the wrong lkey: build \
                 entries with Mr::sge or RegisteredMem::sge"
            }
            S::WR_FLUSH_ERR => {
                "the QP was in the error state: an earlier request failed (its completion \
                 carries the cause), or the QP was moved to ERR or RESET"
            }
            S::LOC_ACCESS_ERR => {
                "a local region lacks LOCAL_WRITE, which receive buffers and the targets of \
                 READs and atomics need"
            }
            S::REM_INV_REQ_ERR => {
                "the peer found the request invalid: most often the peer's QP was not granted \
                 the remote access this operation needs (REMOTE_WRITE, REMOTE_READ or \
                 REMOTE_ATOMIC in its QP's access flags: ConnectOpts::access on the peer); else \
                 the message is longer than its receive buffer, or its QP takes no READs or \
                 atomics (max_dest_rd_atomic 0)"
            }
            S::REM_ACCESS_ERR => {
                "the peer refused the access: its region lacks the REMOTE_READ, REMOTE_WRITE or \
                 REMOTE_ATOMIC access this operation needs, the rkey or address range is not \
                 the region's, or the peer's QP was not granted that access (ConnectOpts::access)"
            }
            S::REM_OP_ERR => "the peer could not complete the operation (its QP or receive queue is in error)",
            S::RETRY_EXC_ERR => {
                "no acknowledgement within timeout x retry_cnt: the peer is gone or its QP is \
                 not in RTR/RTS, or the address is wrong (destination QPN, LID, GID or GID index)"
            }
            S::RNR_RETRY_EXC_ERR => {
                "the peer had no receive posted when the SEND arrived: post receives before \
                 the peer sends, or raise rnr_retry (7 retries forever)"
            }
            S::MW_BIND_ERR => {
                "the memory window bind was refused: the region lacks MW_BIND access, or the range is outside it"
            }
            S::BAD_RESP_ERR => "the peer's response was not what the request expected",
            S::REM_INV_RD_REQ_ERR => "the peer refused the READ or atomic: its QP allows none (max_dest_rd_atomic)",
            _ => return None,
        })
    }
}

impl fmt::Display for WcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "work request {:#x} on QP {:#x} failed: {}", self.wr_id, self.qp_num, self.status)?;
        if self.vendor_err != 0 {
            write!(f, " (vendor error {:#x})", self.vendor_err)?;
        }
        if let Some(h) = self.hint() {
            write!(f, ": {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for WcError {}

impl Wc {
    /// `Ok(self)` for a successful completion, else the [`WcError`] naming
    /// the status and its usual cause.
    ///
    /// ```
    /// # fn f(wc: &rrddmma::prim::Wc) -> Result<(), rrddmma::prim::WcError> {
    /// let done = wc.ok()?;
    /// println!("{} bytes", done.byte_len());
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn ok(&self) -> Result<&Wc, WcError> {
        if self.is_success() {
            return Ok(self);
        }
        Err(WcError {
            wr_id: self.wr_id(),
            qp_num: self.qp_num(),
            status: self.status(),
            opcode: None,
            vendor_err: self.vendor_err(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(wr_id: u64, status: WcStatus) -> String {
        WcError { wr_id, qp_num: 0x2a, status, opcode: None, vendor_err: 0 }.to_string()
    }

    /// A tagged id (generation in the high bits) reads as its parts in hex.
    #[test]
    fn hint_wr_id_is_printed_in_hex() {
        let msg = error(0x8000_0001_0000_002a, WcStatus::WR_FLUSH_ERR);
        assert!(msg.starts_with("work request 0x800000010000002a on QP 0x2a failed: WR_FLUSH_ERR"), "{msg}");
    }

    /// On mlx5 a WRITE to a QP without REMOTE_WRITE completes with
    /// REM_INV_REQ_ERR: the hint names the peer's QP access first.
    #[test]
    fn hint_rem_inv_req_err_names_the_peers_qp_access_first() {
        let msg = error(1, WcStatus::REM_INV_REQ_ERR);
        let access = msg.find("ConnectOpts::access").expect(&msg);
        let length = msg.find("longer than its receive buffer").expect(&msg);
        assert!(access < length, "{msg}");
        assert!(msg.contains("REMOTE_WRITE, REMOTE_READ or REMOTE_ATOMIC"), "{msg}");
    }
}
