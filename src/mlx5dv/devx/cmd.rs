//! The firmware commands this module sends, built as the bytes the device
//! reads (big-endian PRM layouts, `mlx5_ifc.h`), and the checks of what it
//! answers. Each builder is the one [`super`]'s typed operations use; the
//! libmlx5 harness compares them with the bytes libmlx5 v59 hands to the
//! kernel for the same request (`tests/provider/devx.rs`).

use super::layout::{self, hdr, mkey, op, qpc, query_lag, query_qp, rts2rts};
use crate::prim::{Error, Result};

/// A capability group of `QUERY_HCA_CAP` (`MLX5_CAP_*`, the op_mod's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CapGroup {
    /// General device capabilities (`cmd_hca_cap`).
    General,
    /// Ethernet offloads (`per_protocol_networking_offload_caps`).
    EthernetOffloads,
    /// On-demand paging (`odp_cap`).
    Odp,
    /// Atomic operations (`atomic_caps`).
    Atomic,
    /// RoCE (`roce_cap`).
    Roce,
}

impl CapGroup {
    /// The `MLX5_CAP_*` value.
    pub const fn to_raw(self) -> u16 {
        match self {
            CapGroup::General => 0,
            CapGroup::EthernetOffloads => 1,
            CapGroup::Odp => 2,
            CapGroup::Atomic => 3,
            CapGroup::Roce => 4,
        }
    }

    /// The group's name in the PRM.
    pub const fn name(self) -> &'static str {
        match self {
            CapGroup::General => "general (cmd_hca_cap)",
            CapGroup::EthernetOffloads => "Ethernet offloads",
            CapGroup::Odp => "ODP",
            CapGroup::Atomic => "atomic",
            CapGroup::Roce => "RoCE",
        }
    }
}

/// Which values `QUERY_HCA_CAP` reports: what the device can do at most,
/// or what is set now (`HCA_CAP_OPMOD_GET_MAX` / `_CUR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapWhich {
    /// The device's maximum.
    Max,
    /// The current setting.
    Current,
}

/// `QUERY_HCA_CAP` of `group` (16 bytes; the answer is 4112).
pub fn query_hca_cap(group: CapGroup, which: CapWhich) -> [u8; 16] {
    let mut b = [0u8; 16];
    hdr::OPCODE.set(&mut b, op::QUERY_HCA_CAP.into());
    hdr::OP_MOD.set(&mut b, u64::from(group.to_raw()) << 1 | u64::from(which == CapWhich::Current));
    b
}

/// `QUERY_QP` of `qpn` (16 bytes; the answer is 272).
pub fn query_qp(qpn: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    hdr::OPCODE.set(&mut b, op::QUERY_QP.into());
    query_qp::QPN.set(&mut b, qpn.into());
    b
}

/// `QUERY_LAG` (16 bytes; the answer is 16).
pub fn query_lag() -> [u8; 16] {
    let mut b = [0u8; 16];
    hdr::OPCODE.set(&mut b, op::QUERY_LAG.into());
    b
}

/// The bytes of a `QUERY_QP` answer.
pub const QUERY_QP_OUT_BYTES: usize = query_qp::OUT_BYTES;
/// The bytes of an `RTS2RTS_QP` command.
pub const RTS2RTS_IN_BYTES: usize = rts2rts::IN_BYTES;
/// The bytes of a `CREATE_MKEY` command without translation entries.
pub const CREATE_MKEY_IN_BYTES: usize = mkey::IN_BYTES;
/// The bytes of a command's smallest answer (the output header and 8 bytes).
pub const OUT_HDR_BYTES: usize = hdr::BYTES;

fn rts2rts(qpn: u32) -> Vec<u8> {
    let mut b = vec![0u8; rts2rts::IN_BYTES];
    hdr::OPCODE.set(&mut b, op::RTS2RTS_QP.into());
    rts2rts::QPN.set(&mut b, qpn.into());
    b
}

/// `RTS2RTS_QP` that sets the RoCE UDP source port of `qpn`'s primary
/// path (`opt_param_mask_95_32` UDP_SPORT): what
/// `mlx5dv_modify_qp_udp_sport` sends.
pub fn rts2rts_udp_sport(qpn: u32, udp_sport: u16) -> Vec<u8> {
    let mut b = rts2rts(qpn);
    rts2rts::OPT_PARAM_MASK_95_32.set(&mut b, qpc::OPT32_UDP_SPORT);
    qpc::UDP_SPORT.at(rts2rts::QPC).set(&mut b, udp_sport.into());
    b
}

/// `RTS2RTS_QP` that sets the LAG port `qpn` sends on (1 or 2;
/// `opt_param_mask` LAG_TX_PORT_AFFINITY): what `mlx5dv_modify_qp_lag_port`
/// sends for an RC, UC, UD QP or a DCI.
pub fn rts2rts_lag_port(qpn: u32, port: u8) -> Vec<u8> {
    let mut b = rts2rts(qpn);
    rts2rts::OPT_PARAM_MASK.set(&mut b, qpc::OPT_LAG_TX_PORT_AFFINITY);
    qpc::LAG_TX_PORT_AFFINITY.at(rts2rts::QPC).set(&mut b, port.into());
    b
}

/// `RTS2RTS_QP` that brings stream `stream` of DCI `qpn` out of error
/// (the QP context extension's `dci_stream_channel_id`): what
/// `mlx5dv_dci_stream_id_reset` sends.
pub fn rts2rts_dci_stream_reset(qpn: u32, stream: u16) -> Vec<u8> {
    let mut b = rts2rts(qpn);
    rts2rts::QPC_EXT.set(&mut b, 1);
    rts2rts::OPT_PARAM_MASK_95_32.set(&mut b, qpc::OPT32_DCI_STREAM_CHANNEL_ID);
    qpc::EXT_DCI_STREAM_CHANNEL_ID.at(rts2rts::QPC_EXT_DATA).set(&mut b, stream.into());
    b
}

/// How a memory key translates addresses (`MLX5_MKC_ACCESS_MODE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MkeyAccessMode {
    /// Physical-address translation table of its own (MTT): a direct key.
    Mtt,
    /// Key, length, address entries (KLM): an indirect key of ranges of
    /// any length.
    Klm,
    /// Key, address entries of one fixed size (KSM).
    Ksm,
}

impl MkeyAccessMode {
    const fn to_raw(self) -> u64 {
        match self {
            MkeyAccessMode::Mtt => 1,
            MkeyAccessMode::Klm => 2,
            MkeyAccessMode::Ksm => 3,
        }
    }
}

/// A `CREATE_MKEY` request (the memory key context, `mkc`). Built with
/// [`MkeySpec::indirect`] (what `mlx5dv_create_mkey` sends) or
/// [`MkeySpec::umem`] (a direct key over a UMEM); the fields are public to
/// be read and adjusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MkeySpec {
    /// The translation mode.
    pub access_mode: MkeyAccessMode,
    /// The protection domain number (`mlx5dv_pd::pdn`).
    pub pdn: u32,
    /// `free`: the key starts free, to be configured by a UMR WQE.
    pub free: bool,
    /// `umr_en`: UMR WQEs may configure it.
    pub umr_en: bool,
    /// Local read, local write, remote read, remote write, atomic.
    pub lr: bool,
    /// Local write.
    pub lw: bool,
    /// Remote read.
    pub rr: bool,
    /// Remote write.
    pub rw: bool,
    /// Atomics.
    pub atomic: bool,
    /// `en_rinval`: a SEND_WITH_INV may invalidate it.
    pub remote_invalidate: bool,
    /// `translations_octword_size`: room for this many entries (16 bytes each).
    pub translations: u32,
    /// The first address (`start_addr`) and length (`len`) of the key.
    pub start_addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// log2 of the page size of a direct (MTT) key.
    pub log_page_size: u8,
    /// A UMEM the key's pages come from: its id and byte offset
    /// (`mkey_umem_valid`, `mkey_umem_id`, `mkey_umem_offset`).
    pub umem: Option<(u32, u64)>,
}

impl MkeySpec {
    /// An indirect key with room for `max_entries` ranges (rounded up to a
    /// multiple of 4, as libmlx5 sizes it), free, configurable by UMR,
    /// local read only, any QP (`qpn` 0xffffff): `mlx5dv_create_mkey` with
    /// `MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT`.
    pub fn indirect(pdn: u32, max_entries: u16) -> MkeySpec {
        MkeySpec {
            access_mode: MkeyAccessMode::Klm,
            pdn,
            free: true,
            umr_en: true,
            lr: true,
            lw: false,
            rr: false,
            rw: false,
            atomic: false,
            remote_invalidate: false,
            translations: u32::from(max_entries).next_multiple_of(4),
            start_addr: 0,
            len: 0,
            log_page_size: 0,
            umem: None,
        }
    }

    /// A direct (MTT) key over `len` bytes of the UMEM `umem_id` from byte
    /// `offset`, at address `start_addr`, in pages of 2^`log_page_size`
    /// bytes, with every access granted (narrow with the fields).
    pub fn umem(pdn: u32, umem_id: u32, offset: u64, start_addr: u64, len: u64, log_page_size: u8) -> MkeySpec {
        MkeySpec {
            access_mode: MkeyAccessMode::Mtt,
            pdn,
            free: false,
            umr_en: false,
            lr: true,
            lw: true,
            rr: true,
            rw: true,
            atomic: true,
            remote_invalidate: false,
            translations: 0,
            start_addr,
            len,
            log_page_size,
            umem: Some((umem_id, offset)),
        }
    }
}

/// `CREATE_MKEY` for `spec` (272 bytes; the answer is 16).
pub fn create_mkey(spec: &MkeySpec) -> Vec<u8> {
    let mut b = vec![0u8; mkey::IN_BYTES];
    hdr::OPCODE.set(&mut b, op::CREATE_MKEY.into());
    let c = mkey::MKC;
    let mode = spec.access_mode.to_raw();
    mkey::ACCESS_MODE_1_0.at(c).set(&mut b, mode & 3);
    mkey::ACCESS_MODE_4_2.at(c).set(&mut b, mode >> 2);
    mkey::FREE.at(c).set(&mut b, spec.free.into());
    mkey::UMR_EN.at(c).set(&mut b, spec.umr_en.into());
    mkey::PD.at(c).set(&mut b, spec.pdn.into());
    mkey::TRANSLATIONS_OCTWORD_SIZE.at(c).set(&mut b, spec.translations.into());
    mkey::LR.at(c).set(&mut b, spec.lr.into());
    mkey::LW.at(c).set(&mut b, spec.lw.into());
    mkey::RR.at(c).set(&mut b, spec.rr.into());
    mkey::RW.at(c).set(&mut b, spec.rw.into());
    mkey::A.at(c).set(&mut b, spec.atomic.into());
    mkey::QPN.at(c).set(&mut b, 0xff_ffff);
    mkey::MKEY_7_0.at(c).set(&mut b, 0);
    mkey::EN_RINVAL.at(c).set(&mut b, spec.remote_invalidate.into());
    if spec.start_addr != 0 {
        mkey::START_ADDR.at(c).set(&mut b, spec.start_addr);
    }
    if spec.len != 0 {
        mkey::LEN.at(c).set(&mut b, spec.len);
    }
    if spec.log_page_size != 0 {
        mkey::LOG_PAGE_SIZE.at(c).set(&mut b, spec.log_page_size.into());
    }
    if let Some((id, offset)) = spec.umem {
        mkey::MKEY_UMEM_VALID.set(&mut b, 1);
        mkey::MKEY_UMEM_ID.set(&mut b, id.into());
        mkey::MKEY_UMEM_OFFSET.set(&mut b, offset);
    }
    let _ = (mkey::PG_ACCESS, mkey::TRANSLATIONS_OCTWORD_ACTUAL_SIZE, mkey::LENGTH64);
    b
}

/// The opcode of a command (its first two bytes), 0 for a buffer shorter than that.
pub fn opcode_of(cmd_in: &[u8]) -> u16 {
    hdr::OPCODE.get(cmd_in) as u16
}

/// `Ok` when the answer's `status` is 0, else [`Error::Firmware`] with the
/// status and syndrome (`op` names the carrying call, `opcode` the
/// command). An answer shorter than its 8-byte header is an
/// [`Error::Verbs`] (`EPROTO`): nothing from the device panics.
pub fn check_out(op: &'static str, opcode: u16, out: &[u8]) -> Result<()> {
    if out.len() < 8 {
        return Err(Error::Verbs { op, errno: libc::EPROTO });
    }
    let status = hdr::STATUS.get(out) as u8;
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Firmware { op, opcode, status, syndrome: hdr::SYNDROME.get(out) as u32 })
    }
}

/// The failure of a DEVX call that returned `rc` (an errno) with the
/// answer `out`: the firmware's status and syndrome when the answer
/// carries one (the kernel copies it back on a failed command), else the errno.
pub(crate) fn failed(op: &'static str, cmd_in: &[u8], rc: i32, out: &[u8]) -> Error {
    match check_out(op, opcode_of(cmd_in), out) {
        Err(e @ Error::Firmware { .. }) => e,
        _ => Error::code(op, rc),
    }
}

/// A `QUERY_QP` answer's LAG port (`qpc.lag_tx_port_affinity`).
pub fn qp_lag_port(out: &[u8]) -> u8 {
    qpc::LAG_TX_PORT_AFFINITY.at(query_qp::OUT_QPC).get(out) as u8
}

/// A `QUERY_QP` answer's RoCE UDP source port (`qpc.primary_address_path.udp_sport`).
pub fn qp_udp_sport(out: &[u8]) -> u16 {
    qpc::UDP_SPORT.at(query_qp::OUT_QPC).get(out) as u16
}

/// A `QUERY_LAG` answer: `(lag_state, tx_remap_affinity_1, tx_remap_affinity_2)`.
pub fn lag_state(out: &[u8]) -> (u8, u8, u8) {
    (
        query_lag::LAG_STATE.get(out) as u8,
        query_lag::TX_REMAP_AFFINITY_1.get(out) as u8,
        query_lag::TX_REMAP_AFFINITY_2.get(out) as u8,
    )
}

/// A `CREATE_MKEY` answer's key index (the key is `index << 8`).
pub fn mkey_index(out: &[u8]) -> u32 {
    mkey::OUT_MKEY_INDEX.get(out) as u32
}

/// Sets a field of a command by its place (for the tests' and the
/// harness's fake kernel answers): `bit_off` bits in, `bits` wide.
#[doc(hidden)]
pub fn set_bits(buf: &mut [u8], bit_off: usize, bits: usize, v: u64) {
    layout::Field { bit_off, bits }.set(buf, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_status_becomes_a_typed_error() {
        let mut out = [0u8; 16];
        assert!(check_out("x", 0x100, &out).is_ok());
        out[0] = 0x03;
        out[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        match check_out("mlx5dv_devx_general_cmd", 0x100, &out) {
            Err(Error::Firmware { status: 3, syndrome: 0x1234_5678, opcode: 0x100, .. }) => {}
            e => panic!("{e:?}"),
        }
        assert!(matches!(check_out("x", 1, &out[..4]), Err(Error::Verbs { .. })));
    }

    #[test]
    fn builders_put_their_fields_where_mlx5_ifc_says() {
        let b = rts2rts_udp_sport(0x12345, 0xc001);
        assert_eq!(b.len(), 464);
        assert_eq!(&b[..2], &[0x05, 0x05]);
        assert_eq!(&b[8..12], &[0, 0x01, 0x23, 0x45]);
        assert_eq!(&b[264..272], &4u64.to_be_bytes(), "opt_param_mask_95_32 UDP_SPORT");
        assert_eq!(&b[82..84], &[0xc0, 0x01], "qpc.primary_address_path.udp_sport");
        let l = rts2rts_lag_port(7, 2);
        assert_eq!(&l[16..20], &0x8000u32.to_be_bytes());
        assert_eq!(l[24], 0x02);
        let d = rts2rts_dci_stream_reset(7, 0x2a);
        assert_eq!(d[8] & 0x80, 0x80, "qpc_ext");
        assert_eq!(&d[274..276], &[0, 0x2a], "qpc_ext.dci_stream_channel_id");
        let m = create_mkey(&MkeySpec::indirect(0xabc, 5));
        assert_eq!(m[16], 0x40, "free");
        assert_eq!(m[18], 0x86, "umr_en, lr, access mode KLM");
        assert_eq!(&m[16 + 52..16 + 56], &8u32.to_be_bytes(), "8 translations");
    }
}
