//! QPs and memory per rank of the cluster mode's two transports, as this
//! process asks for them: the RC mesh (`-q` QPs to every other rank) and
//! DC (one DC target and a pool of `--dci` initiators).
//!
//! How it counts (an estimate of what the provider allocates for the sizes
//! asked, not a reading of the driver): a send queue holds its depth
//! rounded up to a power of two of WQEs, each a whole number of 64-byte
//! basic blocks (an RC WRITE/READ: control, remote-address and data
//! segments, 48 bytes, one block; a DC one adds a 48-byte address vector,
//! 96 bytes, two blocks); a receive queue or SRQ its entries rounded up to
//! a power of two, 16 bytes per scatter entry (one each here); a CQ its
//! entries rounded up to a power of two, 64 bytes each; a memory region its
//! registered bytes. Not counted: doorbell records, UAR pages, the DC
//! target's firmware context, address handles, the kernel's and the NIC's
//! own state (ICM: QP and MPT contexts), which grow with the QP count too.

use rrddmma::prim::{RemoteAddr, RemoteMr};
use serde::Serialize;

type Res<T> = Result<T, String>;

/// Bytes of one send WQE basic block.
const WQEBB: u64 = 64;
/// Bytes of one CQE.
const CQE: u64 = 64;
/// Bytes of one receive scatter entry.
const RSGE: u64 = 16;

/// One rank's queues and memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// QPs of the rank for the mesh: RC QPs, or the DCIs and the DCT.
    pub qps: u64,
    /// Send WQE slots (after rounding) over all send queues.
    pub send_wqes: u64,
    /// Bytes of the send queues.
    pub send_queue_bytes: u64,
    /// Receive entries (after rounding) of the receive queues or the SRQ.
    pub recv_entries: u64,
    /// Bytes of the receive queues or the SRQ.
    pub recv_queue_bytes: u64,
    /// CQ entries (after rounding).
    pub cqes: u64,
    /// Bytes of the CQs.
    pub cq_bytes: u64,
    /// Bytes registered.
    pub mr_bytes: u64,
}

impl Resources {
    /// Queues and memory together.
    pub fn total_bytes(&self) -> u64 {
        self.send_queue_bytes + self.recv_queue_bytes + self.cq_bytes + self.mr_bytes
    }

    fn send(&mut self, qps: u64, depth: u32, blocks: u64) {
        let slots = u64::from(depth.max(1)).next_power_of_two();
        self.send_wqes += qps * slots;
        self.send_queue_bytes += qps * slots * blocks * WQEBB;
    }

    fn recv(&mut self, queues: u64, entries: u32) {
        if entries == 0 {
            return;
        }
        let e = u64::from(entries.max(1)).next_power_of_two();
        self.recv_entries += queues * e;
        self.recv_queue_bytes += queues * e * RSGE;
    }

    fn cq(&mut self, entries: u32) {
        let e = u64::from(entries.max(1)).next_power_of_two();
        self.cqes += e;
        self.cq_bytes += e * CQE;
    }

    /// One rank of an RC mesh of `ranks` ranks: `q` QPs to each other rank,
    /// each `depth` sends and `rx` receives deep, completing on `send_cqs`
    /// (their sizes) and one receive CQ of `recv_cq` entries, with `mr`
    /// bytes registered.
    pub fn rc_mesh(ranks: u32, q: u32, (depth, rx): (u32, u32), send_cqs: &[u32], recv_cq: u32, mr: u64) -> Resources {
        let qps = u64::from(ranks.saturating_sub(1)) * u64::from(q);
        let mut r = Resources { qps, mr_bytes: mr, ..Resources::default() };
        r.send(qps, depth, 1);
        r.recv(qps, rx);
        for &c in send_cqs {
            r.cq(c);
        }
        r.cq(recv_cq);
        r
    }

    /// With a shared receive queue of `entries` (a DC mesh's RC fallback:
    /// its QPs receive on the SRQ of the DC target).
    pub fn with_srq(mut self, entries: u32) -> Resources {
        self.recv(1, entries);
        self
    }

    /// One rank of a DC mesh: `dcis` DCIs of `depth` sends, one DCT on an
    /// SRQ of `srq` entries, a send CQ of `send_cq` and a receive CQ of
    /// `recv_cq` entries, with `mr` bytes registered. The rank count does
    /// not enter.
    pub fn dc(dcis: u16, depth: u32, srq: u32, (send_cq, recv_cq): (u32, u32), mr: u64) -> Resources {
        let mut r = Resources { qps: u64::from(dcis) + 1, mr_bytes: mr, ..Resources::default() };
        r.send(u64::from(dcis), depth, 2);
        r.recv(1, srq);
        r.cq(send_cq);
        r.cq(recv_cq);
        r
    }

    /// One line of the text report.
    pub fn line(&self) -> String {
        format!(
            "{} QP(s); send queues {} WQEs = {}; receive {} entries = {}; CQs {} entries = {}; MR {}; total {}",
            self.qps,
            self.send_wqes,
            bytes(self.send_queue_bytes),
            self.recv_entries,
            bytes(self.recv_queue_bytes),
            self.cqes,
            bytes(self.cq_bytes),
            bytes(self.mr_bytes),
            bytes(self.total_bytes())
        )
    }
}

/// Bytes in B, KiB or MiB.
fn bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// How [`Resources`] counts, for the reports.
pub const HOW: &str = "queues and memory per rank as asked of the provider: send queues = depth rounded up to a \
                       power of two x 64-byte blocks per WQE (RC 1, DC 2 for its address vector), receive queues \
                       / SRQ = entries rounded up x 16 B, CQs = entries rounded up x 64 B, MR = bytes registered; \
                       doorbells, UARs, address handles and the NIC's QP contexts not counted";

/// The cluster report's JSON `json` with `resources` (rank 0's: every rank
/// of an RC mesh asks for the same, bar the thread count's CQs) and how they
/// are counted.
pub fn with_resources(json: &str, r: &Resources) -> Result<String, String> {
    // Checked to parse as an object, then extended as text: the report's
    // keys keep their order (`"tool"` first, as readers of it look for).
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("the cluster report's JSON does not parse: {e}"))?;
    let o = v.as_object().ok_or("the cluster report's JSON is not an object")?;
    let end = json.rfind('}').ok_or("the cluster report's JSON has no closing brace")?;
    let res = serde_json::to_string(r).map_err(|e| e.to_string())?;
    let how = serde_json::to_string(HOW).map_err(|e| e.to_string())?;
    let sep = if o.is_empty() { "" } else { "," };
    Ok(format!(
        "{}{sep}\n  \"transport\": \"rc\",\n  \"resources\": {res},\n  \"resources_counted\": {how}\n}}{}",
        json[..end].trim_end(),
        &json[end + 1..]
    ))
}

/// Where this rank's requests land at every rank: `slot` bytes at offset
/// (`n` + `me`) × `slot` of the rank's region. A token that does not cover
/// them (or a list of the wrong length) is an error naming the rank and
/// its token, never a panic in the measured loop.
pub(crate) fn landing(tokens: &[RemoteMr], me: u32, n: u32, slot: usize) -> Res<Vec<RemoteAddr>> {
    if tokens.len() != n as usize {
        return Err(format!("the token exchange gave {} memory tokens for {n} ranks", tokens.len()));
    }
    let off = (n as usize + me as usize) * slot;
    tokens
        .iter()
        .enumerate()
        .map(|(r, t)| {
            if r == me as usize {
                return Ok(RemoteAddr { addr: 0, rkey: 0 });
            }
            t.checked_addr_at(off, slot).map_err(|e| {
                format!(
                    "rank {r}'s memory token (address {:#x}, {} bytes, rkey {:#x}) does not cover this rank's slot, \
                     bytes {off}..{} (each rank registers 2 x slot x ranks bytes; do all ranks run the same -s \
                     and the same number of ranks?): {e}",
                    t.addr,
                    t.len,
                    t.rkey,
                    off + slot
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_mesh_grows_with_the_ranks_and_dc_does_not() {
        // 3 ranks, 1 QP per pair, depth 16, 64 receives, one send CQ of 32, a receive CQ of 192.
        let r = Resources::rc_mesh(3, 1, (16, 64), &[32], 192, 3 * 8192);
        assert_eq!(r.qps, 2);
        assert_eq!((r.send_wqes, r.send_queue_bytes), (32, 32 * 64));
        assert_eq!((r.recv_entries, r.recv_queue_bytes), (128, 128 * 16));
        assert_eq!((r.cqes, r.cq_bytes), (32 + 256, (32 + 256) * 64));
        assert_eq!(r.mr_bytes, 24576);
        assert_eq!(r.total_bytes(), 2048 + 2048 + 288 * 64 + 24576);
        // Depths round up to powers of two.
        assert_eq!(Resources::rc_mesh(2, 1, (17, 1), &[1], 1, 0).send_wqes, 32);
        // -q multiplies, the rank count multiplies.
        assert_eq!(Resources::rc_mesh(101, 2, (16, 64), &[], 1, 0).qps, 200);
        let big = Resources::rc_mesh(101, 1, (16, 64), &[], 1, 0);
        assert_eq!(big.send_queue_bytes, 100 * 16 * 64);
        // DC: k DCIs and one DCT, two blocks per WQE, whatever the ranks.
        let d = Resources::dc(4, 16, 64, (96, 64), 0);
        assert_eq!(d.qps, 5);
        assert_eq!((d.send_wqes, d.send_queue_bytes), (64, 64 * 128));
        assert_eq!((d.recv_entries, d.recv_queue_bytes), (64, 1024));
        assert_eq!(d.cqes, 128 + 64);
        assert!(d.send_queue_bytes < big.send_queue_bytes);
        assert_eq!(Resources::dc(1, 1, 1, (1, 1), 0).qps, 2);
        // The fallback's RC QPs receive on the SRQ: no receive queue of their own.
        let f = Resources::rc_mesh(3, 1, (16, 0), &[64], 64, 0).with_srq(64);
        assert_eq!((f.qps, f.recv_entries, f.recv_queue_bytes), (2, 64, 1024));
    }

    #[test]
    fn the_line_names_every_figure() {
        let l = Resources::dc(2, 16, 64, (64, 64), 3 << 20).line();
        assert!(l.starts_with("3 QP(s); send queues 32 WQEs = 4.0 KiB; receive 64 entries = 1.0 KiB;"), "{l}");
        assert!(l.contains("CQs 128 entries = 8.0 KiB; MR 3.0 MiB; total 3.0 MiB"), "{l}");
        assert_eq!(bytes(512), "512 B");
    }

    #[test]
    fn the_rc_report_json_gains_the_resources() {
        let r = Resources::rc_mesh(3, 2, (16, 64), &[64, 64], 384, 4096);
        let text = with_resources("{\n  \"tool\": \"x\",\n  \"ranks\": 3\n}", &r).unwrap();
        assert!(text.starts_with("{\n  \"tool\": \"x\","), "the keys keep their order: {text}");
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["tool"], "x");
        assert_eq!((j["ranks"].as_u64(), j["resources"]["qps"].as_u64()), (Some(3), Some(4)));
        assert_eq!(j["transport"], "rc");
        assert_eq!(j["resources"]["mr_bytes"], 4096);
        assert!(with_resources("[]", &r).unwrap_err().contains("not an object"));
        let empty: serde_json::Value = serde_json::from_str(&with_resources("{}", &r).unwrap()).unwrap();
        assert_eq!(empty["resources"]["qps"], 4);
    }

    #[test]
    fn regression_short_or_bogus_token_of_another_rank_is_an_error_not_a_panic() {
        let (n, slot) = (3u32, 4096usize);
        let good = RemoteMr { addr: 0x10_0000, len: (2 * slot * n as usize) as u64, rkey: 7 };
        let at = landing(&[good, good, good], 1, n, slot).unwrap();
        assert_eq!(at[2], RemoteAddr { addr: 0x10_0000 + 4 * 4096, rkey: 7 }, "slot n + me of rank 2's region");
        // Rank 2's token is one byte short of this rank's slot.
        let short = RemoteMr { len: good.len - 4096 - 1, ..good };
        let e = landing(&[good, good, short], 1, n, slot).unwrap_err();
        assert!(e.contains("rank 2's memory token") && e.contains(&format!("{} bytes", short.len)), "{e}");
        assert!(e.contains("bytes 16384..20480"), "names the range it must cover: {e}");
        // An address range that wraps, and a list of the wrong length.
        let wraps = RemoteMr { addr: u64::MAX - 8, ..good };
        assert!(landing(&[wraps, good, good], 1, n, slot).unwrap_err().contains("rank 0's memory token"));
        assert!(landing(&[good, good], 1, n, slot).unwrap_err().contains("2 memory tokens for 3 ranks"));
        // This rank's own token is never used, so it is not checked.
        assert!(landing(&[good, short, good], 1, n, slot).is_ok());
    }
}
