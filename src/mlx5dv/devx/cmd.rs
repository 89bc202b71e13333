//! The firmware commands this module sends, built as the bytes the device
//! reads (big-endian PRM layouts, `mlx5_ifc.h`), and the checks of what it
//! answers. Each builder is the one [`super`]'s typed operations use; the
//! libmlx5 harness compares them with the bytes libmlx5 v59 hands to the
//! kernel for the same request (`tests/provider/devx.rs`).

use crate::mlx5dv::prm::{self, Field, Opcode, QpcOptMask, QpcOptMask32};
use crate::prim::{Error, Result};

/// The output header every command answer starts with (`status`, `syndrome`).
const STATUS: Field = Field::new("status", 0x0, 8);
const SYNDROME: Field = Field::new("syndrome", 0x20, 32);
/// The input header's opcode.
const OPCODE: Field = Field::new("opcode", 0x0, 16);
/// `query_lag_out`: the LAG context (`lagc`) at bit 0x40.
const QUERY_LAG_CTX: u32 = 0x40;
/// Not in rdma-core v59's or Linux 6.1's `create_mkey_in` (reserved
/// there): DPDK's `mlx5_prm.h` places the UMEM of a UMEM-backed key here.
/// Not checked against libmlx5 or the kernel.
const MKEY_UMEM_ID: Field = Field::new("mkey_umem_id", 0x320, 32);
const MKEY_UMEM_OFFSET: Field = Field::new("mkey_umem_offset", 0x340, 64);

/// `QUERY_HCA_CAP` of `group` (16 bytes; the answer is [`prm::QueryHcaCapOut`]).
pub fn query_hca_cap(group: prm::CapType, which: prm::CapMode) -> [u8; 16] {
    let mut c = prm::QueryHcaCapIn::new();
    c.set_opcode(Opcode::QUERY_HCA_CAP.0.into()).set_op_mod(group.op_mod(which).into());
    c.0
}

/// `QUERY_QP` of `qpn` (16 bytes; the answer is [`prm::QueryQpOut`]).
///
/// # Panics
/// If `qpn` is wider than 24 bits (a programming error).
pub fn query_qp(qpn: u32) -> [u8; 16] {
    let mut c = prm::QueryQpIn::new();
    c.set_opcode(Opcode::QUERY_QP.0.into()).set_qpn(qpn);
    c.0
}

/// `QUERY_LAG` (16 bytes; the answer is 16).
pub fn query_lag() -> [u8; 16] {
    let mut b = [0u8; 16];
    OPCODE.set(&mut b, Opcode::QUERY_LAG.0.into());
    b
}

/// The bytes of a `QUERY_QP` answer.
pub const QUERY_QP_OUT_BYTES: usize = prm::QueryQpOut::BYTES;
/// The bytes of an `RTS2RTS_QP` command (rdma-core v59's size, with the QP
/// context extension).
pub const RTS2RTS_IN_BYTES: usize = prm::Rts2rtsQpIn::BYTES;
/// The bytes of a `CREATE_MKEY` command without translation entries.
pub const CREATE_MKEY_IN_BYTES: usize = prm::CreateMkeyIn::BYTES;
/// The bytes of a command's smallest answer (the output header and 8 bytes).
pub const OUT_HDR_BYTES: usize = 16;

fn rts2rts(qpn: u32) -> Box<prm::Rts2rtsQpIn> {
    let mut c = Box::new(prm::Rts2rtsQpIn::new());
    c.set_opcode(Opcode::RTS2RTS_QP.0.into()).set_qpn(qpn);
    c
}

/// `RTS2RTS_QP` that sets the RoCE UDP source port of `qpn`'s primary
/// path (`opt_param_mask_95_32` UDP_SPORT): what
/// `mlx5dv_modify_qp_udp_sport` sends.
pub fn rts2rts_udp_sport(qpn: u32, udp_sport: u16) -> Vec<u8> {
    let mut c = rts2rts(qpn);
    c.set_opt_param_mask_95_32(QpcOptMask32::UDP_SPORT.0);
    c.qpc_mut().primary_address_path_mut().set_udp_sport(udp_sport.into());
    c.0.to_vec()
}

/// `RTS2RTS_QP` that sets the LAG port `qpn` sends on (1 or 2;
/// `opt_param_mask` LAG_TX_PORT_AFFINITY): what `mlx5dv_modify_qp_lag_port`
/// sends for an RC, UC, UD QP or a DCI.
///
/// # Panics
/// If `port` is wider than the field's 4 bits.
pub fn rts2rts_lag_port(qpn: u32, port: u8) -> Vec<u8> {
    let mut c = rts2rts(qpn);
    c.set_opt_param_mask(QpcOptMask::RTS2RTS_LAG_TX_PORT_AFFINITY.0);
    c.qpc_mut().set_lag_tx_port_affinity(port.into());
    c.0.to_vec()
}

/// `RTS2RTS_QP` that brings stream `stream` of DCI `qpn` out of error
/// (the QP context extension's `dci_stream_channel_id`): what
/// `mlx5dv_dci_stream_id_reset` sends.
pub fn rts2rts_dci_stream_reset(qpn: u32, stream: u16) -> Vec<u8> {
    let mut c = rts2rts(qpn);
    c.set_qpc_ext(1).set_opt_param_mask_95_32(QpcOptMask32::DCI_STREAM_CHANNEL_ID.0);
    c.qpc_data_ext_mut().set_dci_stream_channel_id(stream.into());
    c.0.to_vec()
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

/// `CREATE_MKEY` for `spec` (272 bytes; the answer is [`prm::CreateMkeyOut`]).
///
/// # Panics
/// If `spec.pdn` is wider than 24 bits or `log_page_size` than 5 (programming errors).
pub fn create_mkey(spec: &MkeySpec) -> Vec<u8> {
    create_mkey_in(spec).0.to_vec()
}

fn create_mkey_in(spec: &MkeySpec) -> Box<prm::CreateMkeyIn> {
    let mut c = Box::new(prm::CreateMkeyIn::new());
    c.set_opcode(Opcode::CREATE_MKEY.0.into());
    let mode = spec.access_mode.to_raw() as u32;
    let m = c.memory_key_mkey_entry_mut();
    m.set_access_mode_1_0(mode & 3)
        .set_access_mode_4_2(mode >> 2)
        .set_free(spec.free.into())
        .set_umr_en(spec.umr_en.into())
        .set_pd(spec.pdn)
        .set_translations_octword_size(spec.translations)
        .set_lr(spec.lr.into())
        .set_lw(spec.lw.into())
        .set_rr(spec.rr.into())
        .set_rw(spec.rw.into())
        .set_a(spec.atomic.into())
        .set_qpn(0xff_ffff)
        .set_mkey_7_0(0)
        .set_en_rinval(spec.remote_invalidate.into())
        .set_start_addr(spec.start_addr)
        .set_len(spec.len)
        .set_log_page_size(spec.log_page_size.into());
    if let Some((id, offset)) = spec.umem {
        c.set_mkey_umem_valid(1);
        MKEY_UMEM_ID.set(c.as_bytes_mut(), id.into());
        MKEY_UMEM_OFFSET.set(c.as_bytes_mut(), offset);
    }
    c
}

/// One translation entry of an indirect key written at creation
/// ([`create_mkey_with`]): `bcount` bytes of the key `key` from its address
/// `va` (a KSM entry has no byte count: its ranges are 2^`log_page_size`
/// bytes each, from the indirect key's spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KlmEntry {
    /// The key the range is under (its lkey).
    pub key: u32,
    /// The range's first address, in the key's address space.
    pub va: u64,
    /// The range's length in bytes (KLM only).
    pub bcount: u32,
}

/// `CREATE_MKEY` for `spec` with `entries` written after the fixed
/// structure (`klm_pas_mtt`, 16 bytes each: the kernel's `struct mlx5_klm`
/// for a KLM key, `struct mlx5_ksm` for a KSM one) and
/// `translations_octword_actual_size` set to their number. Nothing here
/// checks a range against its key: [`DevxMkey::create_over`](super::DevxMkey::create_over) does.
///
/// # Panics
/// As [`create_mkey`]; and if `spec` is not a KLM or KSM key or `entries`
/// outnumber `spec.translations` (programming errors).
pub fn create_mkey_with(spec: &MkeySpec, entries: &[KlmEntry]) -> Vec<u8> {
    assert!(
        matches!(spec.access_mode, MkeyAccessMode::Klm | MkeyAccessMode::Ksm),
        "create_mkey_with: entries need a KLM or KSM key, not {:?}",
        spec.access_mode
    );
    assert!(
        entries.len() as u64 <= u64::from(spec.translations),
        "create_mkey_with: {} entries exceed spec.translations {}",
        entries.len(),
        spec.translations
    );
    let mut c = create_mkey_in(spec);
    c.set_translations_octword_actual_size(entries.len() as u32);
    let mut c = c.0.to_vec();
    for e in entries {
        let mut k = prm::Klm::new();
        if spec.access_mode == MkeyAccessMode::Klm {
            k.set_bcount(e.bcount);
        }
        k.set_key(e.key).set_va(e.va);
        c.extend_from_slice(&k.0);
    }
    c
}

/// The opcode of a command (its first two bytes), 0 for a buffer shorter than that.
pub fn opcode_of(cmd_in: &[u8]) -> u16 {
    if cmd_in.len() < 4 {
        return 0;
    }
    OPCODE.get(cmd_in) as u16
}

/// `Ok` when the answer's `status` is 0, else [`Error::Firmware`] with the
/// status and syndrome (`op` names the carrying call, `opcode` the
/// command). An answer shorter than its 8-byte header is an
/// [`Error::Verbs`] (`EPROTO`): nothing from the device panics.
pub fn check_out(op: &'static str, opcode: u16, out: &[u8]) -> Result<()> {
    if out.len() < 8 {
        return Err(Error::Verbs { op, errno: libc::EPROTO });
    }
    let status = STATUS.get(out) as u8;
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Firmware { op, opcode, status, syndrome: SYNDROME.get(out) as u32 })
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

/// A `QUERY_QP` answer's LAG port (`qpc.lag_tx_port_affinity`); 0 for a
/// short answer.
pub fn qp_lag_port(out: &[u8]) -> u8 {
    prm::QueryQpOut::from_slice(out).map_or(0, |o| o.qpc().lag_tx_port_affinity() as u8)
}

/// A `QUERY_QP` answer's RoCE UDP source port
/// (`qpc.primary_address_path.udp_sport`); 0 for a short answer.
pub fn qp_udp_sport(out: &[u8]) -> u16 {
    prm::QueryQpOut::from_slice(out).map_or(0, |o| o.qpc().primary_address_path().udp_sport() as u16)
}

/// A `QUERY_QP` answer's data-placement ordering bits
/// (`qpc.dp_ordering_1`, `qpc.dp_ordering_force`, Linux 7.3's header);
/// zeros for a short answer.
pub fn qp_dp_ordering(out: &[u8]) -> (bool, bool) {
    prm::QueryQpOut::from_slice(out)
        .map_or((false, false), |o| (o.qpc().dp_ordering_1() != 0, o.qpc().dp_ordering_force() != 0))
}

/// A `QUERY_LAG` answer: `(lag_state, tx_remap_affinity_1,
/// tx_remap_affinity_2)`; zeros for a short answer.
pub fn lag_state(out: &[u8]) -> (u8, u8, u8) {
    let Some(l) = out.get(QUERY_LAG_CTX as usize / 8..).and_then(prm::Lagc::from_slice) else { return (0, 0, 0) };
    (l.lag_state() as u8, l.tx_remap_affinity_1() as u8, l.tx_remap_affinity_2() as u8)
}

/// A `CREATE_MKEY` answer's key index (the key is `index << 8`); 0 for a short answer.
pub fn mkey_index(out: &[u8]) -> u32 {
    prm::CreateMkeyOut::from_slice(out).map_or(0, |o| o.mkey_index())
}

/// A `CREATE_MKEY` answer's key: its index shifted past the tag byte,
/// which is 0 (`mkey_7_0` of [`create_mkey`]), as libmlx5 makes the key
/// of `mlx5dv_create_mkey`.
pub fn mkey_of(out: &[u8]) -> u32 {
    mkey_index(out) << 8
}

/// The most ranges a UMR layout of the key of `spec` may hold, as libmlx5
/// keeps it (`num_desc`, 16 bits, saturated): its translation entries for
/// an indirect KLM key made with `umr_en`, 0 (every layout refused) otherwise.
pub fn umr_entries(spec: &MkeySpec) -> u16 {
    if spec.access_mode == MkeyAccessMode::Klm && spec.umr_en {
        u16::try_from(spec.translations).unwrap_or(u16::MAX)
    } else {
        0
    }
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
        let mut q = prm::QueryQpOut::new();
        assert_eq!(qp_dp_ordering(&q.0), (false, false));
        q.qpc_mut().set_dp_ordering_1(1);
        assert_eq!(q.0[24 + 0x49c / 8] & 0x08, 0x08, "qpc.dp_ordering_1 at bit 0x49c of the context at byte 24");
        assert_eq!(qp_dp_ordering(&q.0), (true, false));
        q.qpc_mut().set_dp_ordering_force(1);
        assert_eq!(q.0[24 + 4] & 0x01, 0x01, "qpc.dp_ordering_force at bit 0x27");
        assert_eq!(qp_dp_ordering(&q.0), (true, true));
        assert_eq!(qp_dp_ordering(&q.0[..100]), (false, false), "a short answer");
        let m = create_mkey(&MkeySpec::indirect(0xabc, 5));
        assert_eq!(m[16], 0x40, "free");
        assert_eq!(m[18], 0x86, "umr_en, lr, access mode KLM");
        assert_eq!(&m[16 + 52..16 + 56], &8u32.to_be_bytes(), "8 translations");
    }

    /// The translation list after `CREATE_MKEY`'s 272 fixed bytes
    /// (`klm_pas_mtt`, bit 0x880 of `mlx5_ifc.h`'s `create_mkey_in`): each
    /// KLM entry big-endian `bcount`, `key`, `va` (the kernel's `struct
    /// mlx5_klm`); a KSM entry's first dword reserved; the actual size the
    /// number of entries.
    #[test]
    fn create_mkey_with_writes_the_entries_after_the_fixed_structure() {
        let spec = MkeySpec::indirect(0xabc, 3);
        let e = [
            KlmEntry { key: 0x0012_3400, va: 0x1111_2222_3333_4444, bcount: 0x1_0000 },
            KlmEntry { key: 0x00ab_cd00, va: 0x7000, bcount: 0x200 },
        ];
        let m = create_mkey_with(&spec, &e);
        assert_eq!(m.len(), 272 + 32);
        let fixed = create_mkey(&spec);
        assert_eq!(&m[..96], &fixed[..96], "the fixed part as create_mkey's");
        assert_eq!(&m[100..272], &fixed[100..272]);
        assert_eq!(&m[0x300 / 8..0x300 / 8 + 4], &2u32.to_be_bytes(), "translations_octword_actual_size");
        assert_eq!(&m[16 + 52..16 + 56], &4u32.to_be_bytes(), "translations_octword_size stays the room");
        assert_eq!(&m[272..276], &0x1_0000u32.to_be_bytes(), "bcount");
        assert_eq!(&m[276..280], &0x0012_3400u32.to_be_bytes(), "key");
        assert_eq!(&m[280..288], &0x1111_2222_3333_4444u64.to_be_bytes(), "va");
        assert_eq!(&m[288..292], &0x200u32.to_be_bytes());
        assert_eq!(&m[292..296], &0x00ab_cd00u32.to_be_bytes());
        assert_eq!(&m[296..304], &0x7000u64.to_be_bytes());
        let mut ksm = spec;
        ksm.access_mode = MkeyAccessMode::Ksm;
        let k = create_mkey_with(&ksm, &e[..1]);
        assert_eq!(&k[272..276], &[0; 4], "a KSM entry has no byte count");
        assert_eq!(&k[276..288], &m[276..288]);
        assert_eq!(k[16 + 2] & 3, 3, "access mode KSM");
    }

    #[test]
    #[should_panic(expected = "exceed spec.translations")]
    fn create_mkey_with_refuses_more_entries_than_room() {
        let mut spec = MkeySpec::indirect(1, 1);
        spec.translations = 1;
        create_mkey_with(&spec, &[KlmEntry { key: 0, va: 0, bcount: 1 }; 2]);
    }
}
