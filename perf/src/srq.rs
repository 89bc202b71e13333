//! Receive queues shared by a test's QPs: perftest's `--use-srq` (one SRQ
//! for every QP's receives) and the receiving half of `-c XRC` (an XRC
//! domain and an XRC SRQ, whose number the requester names in each
//! request).

use rrddmma::prim::{Context, Cq, Pd, QpBuilder, QpCaps, QpType, RecvWr, Sge, Srq, Xrcd};

use crate::args::{Conn, Opts};

/// The SRQ of a run, if it has one, and with XRC its domain.
pub(crate) struct Shared {
    srq: Option<Srq>,
    xrcd: Option<Xrcd>,
}

impl Shared {
    /// What the options ask for: with `--use-srq` one SRQ of `max_wr`
    /// receives; with `-c XRC` an XRC domain and an XRC SRQ of `max_wr`
    /// receives completing on `recv_cq`, on each side as perftest makes
    /// them (the numbers travel in the exchange); otherwise nothing.
    pub(crate) fn create(
        o: &Opts,
        ctx: &Context,
        pd: &Pd,
        recv_cq: &Cq,
        max_wr: u32,
        requester: bool,
    ) -> Result<Shared, String> {
        if o.conn == Conn::Xrc {
            let xrc = |what: &'static str| {
                move |e: rrddmma::prim::Error| {
                    format!(
                        "-c XRC: {what}: {e} (XRC needs a device with XRC domains, as ConnectX (mlx5) has; \
                         rxe and siw have none: use -c RC)"
                    )
                }
            };
            let xrcd = Xrcd::open(ctx).map_err(xrc("opening an XRC domain"))?;
            let srq = Srq::create_xrc(pd, &xrcd, recv_cq, max_wr, 1).map_err(xrc("creating the XRC SRQ"))?;
            return Ok(Shared { srq: Some(srq), xrcd: Some(xrcd) });
        }
        // -c DC: the DC targets (the responder's, or each side's in a
        // latency test or -b) receive on one SRQ.
        if o.use_srq || (o.conn == Conn::Dc && crate::dc_dual::kinds(o, requester).1) {
            let srq = Srq::builder(pd)
                .max_wr(max_wr)
                .max_sge(1)
                .build()
                .map_err(|e| format!("creating the shared receive queue of -r {max_wr} receives: {e}"))?;
            return Ok(Shared { srq: Some(srq), xrcd: None });
        }
        Ok(Shared { srq: None, xrcd: None })
    }

    /// The QP type of a run over `conn`: with XRC, `XRC_SEND` on the
    /// requester (the client of a one-way test) and `XRC_RECV` on the
    /// responder.
    pub(crate) fn qp_type(conn: Conn, requester: bool) -> QpType {
        match conn {
            Conn::Rc => QpType::RC,
            Conn::Uc => QpType::UC,
            Conn::Ud => QpType::UD,
            Conn::Xrc if requester => QpType::XRC_SEND,
            Conn::Xrc => QpType::XRC_RECV,
            // DCIs and DCTs are made by `crate::dc`, not by the QP builder.
            Conn::Dc => QpType::DRIVER,
        }
    }

    /// `b` with what the QP takes from here: the SRQ (`--use-srq`), or
    /// the XRC domain (an `XRC_RECV` QP), with queue sizes to match: an
    /// `XRC_SEND` QP has no receive queue, an `XRC_RECV` QP no send queue.
    pub(crate) fn attach<'a>(&'a self, b: QpBuilder<'a>, qp_type: QpType, caps: QpCaps) -> QpBuilder<'a> {
        match (&self.xrcd, &self.srq) {
            (Some(x), _) if qp_type == QpType::XRC_RECV => b.xrcd(x).caps(caps.max_send_wr(0).max_send_sge(0)),
            (Some(_), _) => b.caps(caps.max_recv_wr(0).max_recv_sge(0)),
            (None, Some(srq)) => b.srq(srq).caps(caps),
            (None, None) => b.caps(caps),
        }
    }

    /// The SRQ number this side announces: its XRC SRQ's, else 0 (as
    /// perftest sends for a basic SRQ).
    pub(crate) fn srqn(&self) -> Result<u32, String> {
        match (&self.xrcd, &self.srq) {
            (Some(_), Some(srq)) => srq.srq_num().map_err(|e| format!("-c XRC: reading the SRQ number: {e}")),
            _ => Ok(0),
        }
    }

    /// The shared receive queue, if the run has one.
    pub(crate) fn srq(&self) -> Option<&Srq> {
        self.srq.as_ref()
    }

    /// Whether receives go to a shared queue.
    pub(crate) fn has_srq(&self) -> bool {
        self.srq.is_some()
    }

    /// Posts one receive of `sge` to the shared queue, `Ok(false)` when
    /// there is none (the QP's own receive queue takes it).
    ///
    /// # Safety
    /// `sge` must lie in memory registered on the SRQ's PD with local write
    /// access, alive and untouched until the receive completes.
    #[inline]
    pub(crate) unsafe fn post(&self, sge: &[Sge; 1], wr_id: u64) -> Result<bool, String> {
        let Some(srq) = &self.srq else { return Ok(false) };
        // SAFETY: the caller's contract.
        unsafe { srq.post_recv(&mut [RecvWr::new(sge, wr_id)]) }.map_err(|e| format!("ibv_post_srq_recv: {e}"))?;
        Ok(true)
    }
}
