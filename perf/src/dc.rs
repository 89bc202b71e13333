//! `-c DC`: the requester's DC initiators (one per QP, with DCI streams
//! under `--log_dci_streams`) and the responder's DC targets (one per QP,
//! all receiving on one SRQ), as perftest makes them. ConnectX only: on
//! any other device the run ends before the exchange, naming the device.

use rrddmma::mlx5dv::dc::{Dci, DciOpts, DciStreams, Dct, DctAddr, DctOpts};
use rrddmma::prim::{AccessFlags, Ah, AhAttr, Context, Cq, Gid, Mtu, Pd, QpCaps, SendWr, Srq};

use crate::args::Opts;
use crate::oob::Dest;

/// perftest's DC access key (`DC_KEY`), the same on every DCT.
pub(crate) const DC_KEY: u64 = 0xffee_ddcc;

/// The DC objects of one side.
pub(crate) struct DcSide {
    /// The requester's initiators (empty on the responder).
    dcis: Vec<Dci>,
    /// The responder's targets (empty on the requester).
    dcts: Vec<Dct>,
    /// The requester's way to each peer target: its address handle and DCT number.
    peers: Vec<(Ah, u32)>,
    /// Requests go round-robin over streams `0..active`.
    active: u16,
}

/// Refuses `-c DC` on a device that is not mlx5, naming it and what to run instead.
pub(crate) fn require_mlx5(ctx: &Context) -> Result<(), String> {
    if rrddmma::mlx5dv::is_supported(ctx) {
        return Ok(());
    }
    Err(format!(
        "-c DC needs an mlx5 (ConnectX) device: DC initiators and targets are created through mlx5dv; {} is not \
         one (run -c RC, UC, UD or XRC on it)",
        ctx.name()
    ))
}

/// Where each side's DC objects live and how they reach the path.
pub(crate) struct Place<'a> {
    pub pd: &'a Pd,
    pub port: u8,
    pub gid_index: Option<u8>,
    pub mtu: Mtu,
}

impl DcSide {
    /// `q` initiators (on `send_cqs[i]`) where `kinds.0` (the requester's),
    /// and `q` targets on `srq` (completing on `recv_cq`) granting `access`
    /// where `kinds.1` (the responder's); both on each side of a latency
    /// test or `-b` (`crate::dc_dual`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        o: &Opts,
        at: &Place<'_>,
        kinds: (bool, bool),
        send_cqs: &[&Cq],
        recv_cq: &Cq,
        srq: Option<&Srq>,
        caps: QpCaps,
        access: AccessFlags,
    ) -> Result<DcSide, String> {
        let mut side = DcSide { dcis: Vec::new(), dcts: Vec::new(), peers: Vec::new(), active: 1 };
        if kinds.0 {
            side.active = 1 << o.log_active_dci_streams;
            let opts =
                DciOpts::default().port(at.port).gid_index(at.gid_index).mtu(at.mtu).max_rd_atomic(16).key(DC_KEY);
            for cq in send_cqs {
                let dci = if o.log_dci_streams == 0 {
                    Dci::create(at.pd, cq, recv_cq, caps)
                } else {
                    // As perftest: the concurrent streams only (none may be in error alone).
                    let streams = DciStreams { log_num_concurrent: o.log_dci_streams, log_num_errored: 0 };
                    Dci::create_with_streams(at.pd, cq, recv_cq, caps, streams)
                }
                .map_err(|e| format!("-c DC: creating a DC initiator: {e}"))?;
                dci.connect(&opts).map_err(|e| format!("-c DC: bringing the DC initiator to RTS: {e}"))?;
                side.dcis.push(dci);
            }
        }
        if kinds.1 {
            let srq = srq.ok_or("-c DC: the responder's targets need its SRQ")?;
            let opts =
                DctOpts::default().port(at.port).gid_index(at.gid_index).mtu(at.mtu).access(access).min_rnr_timer(12);
            for _ in send_cqs {
                let dct = Dct::create(at.pd, recv_cq, srq, DC_KEY, &opts)
                    .map_err(|e| format!("-c DC: creating a DC target: {e}"))?;
                side.dcts.push(dct);
            }
        }
        Ok(side)
    }

    /// What this side announces for destination `i`: its initiators' QP
    /// numbers first, then its targets' DCT numbers (which the peer
    /// addresses).
    pub(crate) fn number(&self, i: usize) -> u32 {
        self.dcis.get(i).map_or_else(|| self.dcts[i - self.dcis.len()].dctn(), Dci::qpn)
    }

    /// The streams of the run: initiators, or (on a one-way responder) targets.
    pub(crate) fn streams(&self) -> usize {
        self.dcis.len().max(self.dcts.len())
    }

    /// The requester's address handles to the peer's targets: the last
    /// `dcis` destinations of `rem` (after the peer's initiators, if it
    /// announced any).
    pub(crate) fn reach(&mut self, at: &Place<'_>, rem: &[Dest]) -> Result<(), String> {
        if self.dcis.is_empty() {
            return Ok(());
        }
        let rem = &rem[rem.len().saturating_sub(self.dcis.len())..];
        for r in rem {
            let gid = Gid(r.gid.unwrap_or([0; 16]));
            let av = match at.gid_index {
                Some(i) if !gid.is_zero() => AhAttr::global(at.port, i, gid).dlid(r.lid).hop_limit(255),
                _ => AhAttr::lid(at.port, r.lid),
            };
            let ah = Ah::create(at.pd, &av).map_err(|e| format!("-c DC: the address handle to the peer: {e}"))?;
            self.peers.push((ah, r.qpn));
        }
        Ok(())
    }

    /// The peer's DCT numbers from a later exchange (`rem`, as for
    /// [`DcSide::reach`]): perftest sends its targets' numbers again after
    /// bringing them up ("to send qpn properly for DC"), and those count.
    pub(crate) fn renumber(&mut self, rem: &[Dest]) {
        let rem = &rem[rem.len().saturating_sub(self.peers.len())..];
        for (p, r) in self.peers.iter_mut().zip(rem) {
            p.1 = r.qpn;
        }
    }

    /// Posts `wrs` on initiator `i` to the peer's target `i` with one
    /// doorbell, each on the next of the active streams (`stream` carries
    /// the round-robin from call to call, as perftest's `dci_stream_id`).
    ///
    /// # Safety
    /// As `Qp::post_send`: every entry names registered memory, alive and
    /// untouched until its completion.
    pub(crate) unsafe fn post(&self, i: usize, wrs: &[SendWr<'_>], stream: &mut u16) -> Result<(), String> {
        let (ah, dctn) = &self.peers[i];
        let to = DctAddr::new(ah, *dctn, DC_KEY);
        // SAFETY: the caller's memory contract, forwarded.
        let mut batch = unsafe { self.dcis[i].batch() };
        for wr in wrs {
            // SAFETY: as above.
            unsafe { batch.post_stream(wr, &to, *stream) }.map_err(|e| format!("posting on a DCI: {e}"))?;
            *stream = (*stream + 1) % self.active;
        }
        batch.complete().map_err(|e| format!("posting on a DCI: {e}"))
    }
}
