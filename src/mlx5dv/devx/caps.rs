//! The device's capabilities (`QUERY_HCA_CAP`), typed, and the proofs
//! other paths take from them.

use super::cmd;
use super::context::DevxContext;
use crate::mlx5dv::prm::{self, CapMode, CapType};
pub use crate::mlx5dv::raw::eth::HwVlanInsert;
use crate::prim::{Error, Result};

/// One capability group as the device reported it: the whole
/// `QUERY_HCA_CAP` answer ([`prm::QueryHcaCapOut`], whose capability union
/// is read through the group's view: `cmd_hca_cap()`, `atomic_caps()`, ...).
#[derive(Clone)]
pub struct CapBlock(Box<prm::QueryHcaCapOut>);

impl std::fmt::Debug for CapBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapBlock({} bytes)", prm::QueryHcaCapOut::BYTES)
    }
}

impl CapBlock {
    /// The answer, as the PRM type.
    pub fn out(&self) -> &prm::QueryHcaCapOut {
        &self.0
    }

    /// A block from a capability's raw bytes (a recorded answer without
    /// its 16-byte header; shorter input is padded with zeros).
    pub fn from_bytes(b: &[u8]) -> CapBlock {
        let mut out = Box::new(prm::QueryHcaCapOut::new());
        let body = &mut out.as_bytes_mut()[CAPABILITY_BYTE..];
        let n = b.len().min(body.len());
        body[..n].copy_from_slice(&b[..n]);
        CapBlock(out)
    }
}

/// Where the capability union starts in the answer (bit 0x80).
const CAPABILITY_BYTE: usize = 16;

/// `QUERY_HCA_CAP` of one group: its block.
pub fn query_hca_cap(ctx: &DevxContext, group: CapType, which: CapMode) -> Result<CapBlock> {
    let mut out = Box::new(prm::QueryHcaCapOut::new());
    ctx.general_cmd(&cmd::query_hca_cap(group, which), out.as_bytes_mut())?;
    Ok(CapBlock(out))
}

/// The capabilities researchers look at first, typed: the general group
/// and, where the general group says the device has them, the atomic,
/// Ethernet-offload, ODP and RoCE groups, as the device's maximum or its
/// current setting ([`HcaCaps::query`]).
#[derive(Clone, Debug)]
pub struct HcaCaps {
    which: CapMode,
    general: CapBlock,
    atomic: Option<CapBlock>,
    eth: Option<CapBlock>,
    odp: Option<CapBlock>,
    roce: Option<CapBlock>,
}

/// `wqe_inline_mode`: no header need be inline (`MLX5_CAP_INLINE_MODE_NOT_REQUIRED`).
const INLINE_MODE_NOT_REQUIRED: u32 = 2;

impl HcaCaps {
    /// Queries the groups (`which`: the maximum or the current values).
    /// The general group is required; a further group that the general one
    /// says the device lacks is `None`, as is one whose query the firmware
    /// refuses.
    pub fn query(ctx: &DevxContext, which: CapMode) -> Result<HcaCaps> {
        let general = query_hca_cap(ctx, CapType::GENERAL, which)?;
        let g = general.0.cmd_hca_cap();
        let opt = |present: bool, group| -> Result<Option<CapBlock>> {
            if !present {
                return Ok(None);
            }
            match query_hca_cap(ctx, group, which) {
                Ok(b) => Ok(Some(b)),
                Err(Error::Firmware { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        };
        let atomic = opt(g.atomic() != 0, CapType::ATOMIC)?;
        let eth = opt(g.port_type() == 1, CapType::ETHERNET_OFFLOADS)?;
        let odp = opt(true, CapType::ODP)?;
        let roce = opt(g.roce() != 0, CapType::ROCE)?;
        Ok(HcaCaps { which, general, atomic, eth, odp, roce })
    }

    /// Capabilities from recorded blocks (e.g. a saved answer, or a test).
    pub fn from_blocks(
        which: CapMode,
        general: CapBlock,
        atomic: Option<CapBlock>,
        eth: Option<CapBlock>,
        odp: Option<CapBlock>,
        roce: Option<CapBlock>,
    ) -> HcaCaps {
        HcaCaps { which, general, atomic, eth, odp, roce }
    }

    /// Maximum or current.
    pub fn which(&self) -> CapMode {
        self.which
    }

    /// The general group's block.
    pub fn general(&self) -> &CapBlock {
        &self.general
    }

    /// A group's block, if queried.
    pub fn block(&self, group: CapType) -> Option<&CapBlock> {
        match group {
            CapType::GENERAL => Some(&self.general),
            CapType::ATOMIC => self.atomic.as_ref(),
            CapType::ETHERNET_OFFLOADS => self.eth.as_ref(),
            CapType::ODP => self.odp.as_ref(),
            CapType::ROCE => self.roce.as_ref(),
            _ => None,
        }
    }

    fn gen(&self) -> &prm::CmdHcaCap {
        self.general.0.cmd_hca_cap()
    }

    /// This function's id (`vhca_id`).
    pub fn vhca_id(&self) -> u16 {
        self.gen().vhca_id() as u16
    }
    /// log2 of the most QPs.
    pub fn log_max_qp(&self) -> u8 {
        self.gen().log_max_qp() as u8
    }
    /// log2 of the most CQs.
    pub fn log_max_cq(&self) -> u8 {
        self.gen().log_max_cq() as u8
    }
    /// log2 of the most SRQs.
    pub fn log_max_srq(&self) -> u8 {
        self.gen().log_max_srq() as u8
    }
    /// log2 of the most memory keys.
    pub fn log_max_mkey(&self) -> u8 {
        self.gen().log_max_mkey() as u8
    }
    /// log2 of the most PDs.
    pub fn log_max_pd(&self) -> u8 {
        self.gen().log_max_pd() as u8
    }
    /// log2 of the longest KLM list of an indirect key.
    pub fn log_max_klm_list_size(&self) -> u8 {
        self.gen().log_max_klm_list_size() as u8
    }
    /// log2 of the largest message.
    pub fn log_max_msg(&self) -> u8 {
        self.gen().log_max_msg() as u8
    }
    /// log2 of the most outstanding RDMA READ / atomic requests per QP (initiator, responder).
    pub fn log_max_ra_qp(&self) -> (u8, u8) {
        (self.gen().log_max_ra_req_qp() as u8, self.gen().log_max_ra_res_qp() as u8)
    }
    /// Whether the port is Ethernet (`port_type` 1) rather than InfiniBand (0).
    pub fn is_ethernet(&self) -> bool {
        self.gen().port_type() == 1
    }
    /// RoCE, atomics, DC targets, QoS.
    pub fn roce(&self) -> bool {
        self.gen().roce() != 0
    }
    /// Whether the device executes atomics at all.
    pub fn atomic(&self) -> bool {
        self.gen().atomic() != 0
    }
    /// Whether the device has DC targets.
    pub fn dct(&self) -> bool {
        self.gen().dct() != 0
    }
    /// Whether the device has QoS (scheduling elements, packet pacing).
    pub fn qos(&self) -> bool {
        self.gen().qos() != 0
    }
    /// Whether the QP context extension exists (DCI stream reset needs it).
    pub fn qpc_extension(&self) -> bool {
        self.gen().qpc_extension() != 0
    }
    /// Whether RTS2RTS may set the UDP source port.
    pub fn rts2rts_qp_udp_sport(&self) -> bool {
        self.gen().rts2rts_qp_udp_sport() != 0
    }
    /// Whether RTS2RTS may set the LAG port.
    pub fn rts2rts_lag_tx_port_affinity(&self) -> bool {
        self.gen().rts2rts_lag_tx_port_affinity() != 0
    }
    /// Whether QPs may be given a LAG port, and how many LAG ports there are.
    pub fn lag(&self) -> (bool, u8) {
        (self.gen().lag_tx_port_affinity() != 0, self.gen().num_lag_ports() as u8)
    }
    /// The device clock in kHz.
    pub fn device_frequency_khz(&self) -> u32 {
        self.gen().device_frequency_khz()
    }
    /// log2 of DCI stream channels and of errored streams (Linux 6.1's layout).
    pub fn log_max_dci_streams(&self) -> (u8, u8) {
        (self.gen().log_max_dci_stream_channels() as u8, self.gen().log_max_dci_errored_streams() as u8)
    }
    /// Tag matching, and log2 of its list size.
    pub fn tag_matching(&self) -> (bool, u8) {
        (self.gen().tag_matching() != 0, self.gen().log_tag_matching_list_sz() as u8)
    }

    /// `atomic_operations`, `atomic_size_qp`, `atomic_size_dc` (each size a
    /// bit mask: bit n set for 2^n-byte atomics), `atomic_req_8B_endianness_mode`;
    /// `None` without the atomic group.
    pub fn atomic_caps(&self) -> Option<AtomicCaps> {
        let b = self.atomic.as_ref()?.0.atomic_caps();
        Some(AtomicCaps {
            operations: b.atomic_operations() as u16,
            size_qp: b.atomic_size_qp() as u16,
            size_dc: b.atomic_size_dc() as u16,
            req_8b_endianness_mode: b.atomic_req_8B_endianness_mode() as u8,
        })
    }

    /// `Ok` when the device executes `bytes`-byte atomics (8, 16 or 32;
    /// extended and masked atomics) on RC QPs (`dc` false) or DCIs (`dc`
    /// true): `atomic_size_qp` / `atomic_size_dc` has bit log2(`bytes`).
    /// Else [`Error::Unsupported`] naming the size: check this when setting
    /// up a ring for 16- or 32-byte atomics, before anything is posted.
    pub fn check_atomic_size(&self, bytes: u32, dc: bool) -> Result<()> {
        let ok = bytes.is_power_of_two()
            && self.atomic_caps().is_some_and(|a| {
                let mask = if dc { a.size_dc } else { a.size_qp };
                u32::from(mask) & bytes != 0
            });
        if ok {
            return Ok(());
        }
        let (qp, dc_sizes) = self.atomic_caps().map_or((0, 0), |a| (a.size_qp, a.size_dc));
        let on = if dc { "DCIs" } else { "RC QPs" };
        Err(Error::unsupported(
            "QUERY_HCA_CAP (atomic)",
            &crate::prim::unsupported::ATOMIC_SIZE,
            &format!("the device of vhca_id {}", self.vhca_id()),
            format_args!("{qp:#x} / {dc_sizes:#x}, without {bytes}-byte atomics on {on}"),
        ))
    }

    /// The Ethernet offloads; `None` on InfiniBand or without the group.
    pub fn eth_offloads(&self) -> Option<EthOffloads> {
        let b = self.eth.as_ref()?.0.per_protocol_networking_offload_caps();
        Some(EthOffloads {
            csum: b.csum_cap() != 0,
            vlan: b.vlan_cap() != 0,
            lro: b.lro_cap() != 0,
            wqe_vlan_insert: b.wqe_vlan_insert() != 0,
            max_lso_log: b.max_lso_cap() as u8,
            wqe_inline_mode: b.wqe_inline_mode() as u8,
            swp: b.swp() != 0,
        })
    }

    /// The proof [`SqRing::send_eth_hw_vlan`](crate::mlx5dv::queue::sq::SqRing::send_eth_hw_vlan)
    /// takes: `Some` where the current capabilities have `wqe_vlan_insert`
    /// and an inline mode of "not required"; `None` elsewhere, and for the
    /// maximum values (what is possible, not what is set).
    pub fn hw_vlan_insert(&self) -> Option<HwVlanInsert> {
        let e = self.eth_offloads()?;
        (self.which == CapMode::CUR && e.wqe_vlan_insert && u32::from(e.wqe_inline_mode) == INLINE_MODE_NOT_REQUIRED)
            .then(HwVlanInsert::from_caps)
    }

    /// ODP operations per transport (RC, UC, UD, XRC, DC); `None` without the group.
    pub fn odp(&self) -> Option<[OdpOps; 5]> {
        let b = self.odp.as_ref()?.0.odp_cap();
        let ops = |t: &prm::OdpPerTransportServiceCap| OdpOps {
            send: t.send() != 0,
            receive: t.receive() != 0,
            write: t.write() != 0,
            read: t.read() != 0,
            atomic: t.atomic() != 0,
            srq_receive: t.srq_receive() != 0,
        };
        Some([
            ops(b.rc_odp_caps()),
            ops(b.uc_odp_caps()),
            ops(b.ud_odp_caps()),
            ops(b.xrc_odp_caps()),
            ops(b.dc_odp_caps()),
        ])
    }

    /// RoCE: `(roce_apm, sw_r_roce_src_udp_port, qp_ts_format, min, max source UDP port)`;
    /// `None` without the group.
    pub fn roce_caps(&self) -> Option<RoceCaps> {
        let b = self.roce.as_ref()?.0.roce_cap();
        Some(RoceCaps {
            apm: b.roce_apm() != 0,
            sw_src_udp_port: b.sw_r_roce_src_udp_port() != 0,
            qp_ts_format: b.qp_ts_format() as u8,
            min_src_udp_port: b.r_roce_min_src_udp_port() as u16,
            max_src_udp_port: b.r_roce_max_src_udp_port() as u16,
        })
    }
}

/// What the verbs report of the capabilities [`HcaCaps`] also reads: the
/// DCI stream caps of `mlx5dv_query_device` and the tag-matching caps of
/// `ibv_query_device_ex`, both of which the kernel derives from the
/// general group ([`HcaCaps::disagreements`] compares them).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReportedCaps {
    /// `dci_streams_caps` (`max_log_num_concurent`, `max_log_num_errored`);
    /// `None` when libmlx5 did not report them (`MLX5DV_CONTEXT_MASK_DCI_STREAMS` unset).
    pub dci_streams: Option<(u8, u8)>,
    /// `tm_caps`.
    pub tm: crate::bindings::ibv_tm_caps,
}

impl ReportedCaps {
    /// Takes them from `mlx5dv_query_device`'s answer and
    /// `ibv_query_device_ex`'s `tm_caps`.
    pub fn new(dv: &crate::bindings::mlx5dv_context, tm: crate::bindings::ibv_tm_caps) -> ReportedCaps {
        let mask = u64::from(crate::bindings::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_DCI_STREAMS.0);
        let dci = (dv.comp_mask & mask != 0)
            .then_some((dv.dci_streams_caps.max_log_num_concurent, dv.dci_streams_caps.max_log_num_errored));
        ReportedCaps { dci_streams: dci, tm }
    }
}

/// One capability the verbs report otherwise than the HCA caps imply
/// ([`HcaCaps::disagreements`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapDisagreement {
    /// The reported field (`dci_streams_caps.max_log_num_errored`, `tm_caps.max_num_tags`, ...).
    pub field: &'static str,
    /// What the HCA caps imply for it, as the kernel derives it.
    pub from_hca_caps: u64,
    /// What the verbs reported.
    pub reported: u64,
}

impl std::fmt::Display for CapDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: the HCA caps imply {}, the verbs report {}", self.field, self.from_hca_caps, self.reported)
    }
}

/// `MLX5_TM_MAX_SGE`, `MLX5_TM_MAX_RNDV_MSG_SIZE` (the kernel's mlx5_ib.h)
/// and `IB_TM_CAP_RNDV_RC` (`IBV_TM_CAP_RC`).
const TM_MAX_SGE: u64 = 1;
const TM_MAX_RNDV_HDR: u64 = 64;
const TM_CAP_RC: u64 = 1;

impl HcaCaps {
    /// The DCI stream and tag-matching caps the verbs reported (`r`) that
    /// differ from what these caps imply, each derived as the kernel's
    /// `mlx5_ib_query_device` does from the general group
    /// (`log_max_dci_stream_channels`, `log_max_dci_errored_streams`;
    /// with `tag_matching`: `max_num_tags` `2^log_tag_matching_list_sz - 1`,
    /// `max_ops` `2^log_max_qp_sz`, `max_sge` 1, and with `rndv_offload_rc`
    /// the RC rendezvous flag and a 64-byte header; all 0 without). Empty
    /// when they agree. Compare current caps ([`CapMode::CUR`]): the kernel
    /// reads those. DCI stream caps libmlx5 did not report are not compared.
    pub fn disagreements(&self, r: &ReportedCaps) -> Vec<CapDisagreement> {
        let g = self.gen();
        let mut out = Vec::new();
        let mut cmp = |field: &'static str, from_hca_caps: u64, reported: u64| {
            if from_hca_caps != reported {
                out.push(CapDisagreement { field, from_hca_caps, reported });
            }
        };
        if let Some((concurrent, errored)) = r.dci_streams {
            cmp("dci_streams_caps.max_log_num_concurent", g.log_max_dci_stream_channels().into(), concurrent.into());
            cmp("dci_streams_caps.max_log_num_errored", g.log_max_dci_errored_streams().into(), errored.into());
        }
        let tm = g.tag_matching() != 0;
        let rndv = tm && g.rndv_offload_rc() != 0;
        let tags = if tm { (1u64 << g.log_tag_matching_list_sz()) - 1 } else { 0 };
        let ops = if tm { 1u64 << g.log_max_qp_sz().min(63) } else { 0 };
        cmp("tm_caps.max_num_tags", tags, r.tm.max_num_tags.into());
        cmp("tm_caps.max_ops", ops, r.tm.max_ops.into());
        cmp("tm_caps.max_sge", if tm { TM_MAX_SGE } else { 0 }, r.tm.max_sge.into());
        cmp("tm_caps.flags", if rndv { TM_CAP_RC } else { 0 }, r.tm.flags.into());
        cmp("tm_caps.max_rndv_hdr_size", if rndv { TM_MAX_RNDV_HDR } else { 0 }, r.tm.max_rndv_hdr_size.into());
        out
    }
}

/// The atomic group's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicCaps {
    /// `atomic_operations` (bit mask of CAS, FAA, masked CAS, masked FAA, ...).
    pub operations: u16,
    /// `atomic_size_qp`: bit n set for 2^n-byte atomics on RC QPs.
    pub size_qp: u16,
    /// `atomic_size_dc`: the same on DCIs.
    pub size_dc: u16,
    /// `atomic_req_8B_endianness_mode`.
    pub req_8b_endianness_mode: u8,
}

/// The Ethernet offload group's fields researchers look at first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthOffloads {
    /// L3/L4 checksum offload.
    pub csum: bool,
    /// VLAN stripping.
    pub vlan: bool,
    /// Large receive offload.
    pub lro: bool,
    /// VLAN insertion from the WQE.
    pub wqe_vlan_insert: bool,
    /// log2 of the largest LSO.
    pub max_lso_log: u8,
    /// 0: L2 headers inline; 1: as the vport context says; 2: none required.
    pub wqe_inline_mode: u8,
    /// Software parser offsets.
    pub swp: bool,
}

/// ODP operations of one transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct OdpOps {
    pub send: bool,
    pub receive: bool,
    pub write: bool,
    pub read: bool,
    pub atomic: bool,
    pub srq_receive: bool,
}

/// The RoCE group's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceCaps {
    /// Automatic path migration.
    pub apm: bool,
    /// Software may choose the RoCE v2 UDP source port.
    pub sw_src_udp_port: bool,
    /// QP timestamp formats.
    pub qp_ts_format: u8,
    /// Lowest source port the device picks.
    pub min_src_udp_port: u16,
    /// Highest.
    pub max_src_udp_port: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(which: CapMode, vlan: bool, inline_mode: u32, size_qp: u32) -> HcaCaps {
        let mut g = prm::QueryHcaCapOut::new();
        g.cmd_hca_cap_mut().set_port_type(1).set_atomic(1).set_log_max_qp(17);
        let mut e = prm::QueryHcaCapOut::new();
        e.per_protocol_networking_offload_caps_mut().set_wqe_vlan_insert(vlan.into()).set_wqe_inline_mode(inline_mode);
        let mut a = prm::QueryHcaCapOut::new();
        a.atomic_caps_mut().set_atomic_size_qp(size_qp).set_atomic_size_dc(0x8);
        let blk = |o: prm::QueryHcaCapOut| CapBlock(Box::new(o));
        HcaCaps::from_blocks(which, blk(g), Some(blk(a)), Some(blk(e)), None, None)
    }

    #[test]
    fn vlan_proof_needs_the_current_cap_and_no_inline_header() {
        assert!(caps(CapMode::CUR, true, 2, 8).hw_vlan_insert().is_some());
        assert!(caps(CapMode::CUR, false, 2, 8).hw_vlan_insert().is_none());
        assert!(caps(CapMode::CUR, true, 0, 8).hw_vlan_insert().is_none());
        assert!(caps(CapMode::MAX, true, 2, 8).hw_vlan_insert().is_none());
        assert_eq!(caps(CapMode::MAX, true, 2, 8).log_max_qp(), 17);
    }

    /// A ConnectX-like general group: DCI streams 2^4 / 2^3, tag matching
    /// with 2^6 tags and rendezvous on RC, 2^15 QP entries.
    fn tm_dci_caps() -> HcaCaps {
        let mut g = prm::QueryHcaCapOut::new();
        g.cmd_hca_cap_mut()
            .set_log_max_dci_stream_channels(4)
            .set_log_max_dci_errored_streams(3)
            .set_tag_matching(1)
            .set_rndv_offload_rc(1)
            .set_log_tag_matching_list_sz(6)
            .set_log_max_qp_sz(15);
        HcaCaps::from_blocks(CapMode::CUR, CapBlock(Box::new(g)), None, None, None, None)
    }

    fn tm(
        max_num_tags: u32,
        max_ops: u32,
        max_sge: u32,
        flags: u32,
        max_rndv_hdr_size: u32,
    ) -> crate::bindings::ibv_tm_caps {
        crate::bindings::ibv_tm_caps { max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge }
    }

    /// What the kernel would report from these caps agrees; each field
    /// changed on the reported side is named with both values; DCI stream
    /// caps not reported are not compared; a device without tag matching
    /// must report all-zero `tm_caps`.
    #[test]
    fn reported_dci_stream_and_tm_caps_are_cross_checked() {
        let c = tm_dci_caps();
        let agree = ReportedCaps { dci_streams: Some((4, 3)), tm: tm(63, 1 << 15, 1, 1, 64) };
        assert_eq!(c.disagreements(&agree), vec![]);
        let mut r = agree;
        r.dci_streams = Some((4, 2));
        assert_eq!(
            c.disagreements(&r),
            vec![CapDisagreement { field: "dci_streams_caps.max_log_num_errored", from_hca_caps: 3, reported: 2 }]
        );
        assert_eq!(
            c.disagreements(&r)[0].to_string(),
            "dci_streams_caps.max_log_num_errored: the HCA caps imply 3, the verbs report 2"
        );
        r = agree;
        r.tm.max_num_tags = 64;
        r.tm.flags = 0;
        let d: Vec<_> = c.disagreements(&r).into_iter().map(|d| d.field).collect();
        assert_eq!(d, ["tm_caps.max_num_tags", "tm_caps.flags"]);
        r = agree;
        r.dci_streams = None;
        assert!(c.disagreements(&r).is_empty(), "unreported stream caps are not compared");
        // No tag matching in the caps: every tm field must be 0.
        let mut g = prm::QueryHcaCapOut::new();
        g.cmd_hca_cap_mut().set_log_max_qp_sz(15).set_log_tag_matching_list_sz(6);
        let none = HcaCaps::from_blocks(CapMode::CUR, CapBlock(Box::new(g)), None, None, None, None);
        let d: Vec<_> = none.disagreements(&agree).into_iter().map(|d| d.field).collect();
        assert_eq!(
            d,
            [
                "dci_streams_caps.max_log_num_concurent",
                "dci_streams_caps.max_log_num_errored",
                "tm_caps.max_num_tags",
                "tm_caps.max_ops",
                "tm_caps.max_sge",
                "tm_caps.flags",
                "tm_caps.max_rndv_hdr_size"
            ]
        );
        assert!(none.disagreements(&ReportedCaps { dci_streams: Some((0, 0)), tm: tm(0, 0, 0, 0, 0) }).is_empty());
    }

    #[test]
    fn atomic_sizes_are_refused_by_name() {
        let c = caps(CapMode::CUR, false, 0, 0x8 | 0x10);
        assert!(c.check_atomic_size(8, false).is_ok());
        assert!(c.check_atomic_size(16, false).is_ok());
        match c.check_atomic_size(32, false) {
            Err(e @ Error::Unsupported { .. }) => assert!(e.to_string().contains("32-byte"), "{e}"),
            e => panic!("{e:?}"),
        }
        assert!(c.check_atomic_size(16, true).is_err());
    }
}
