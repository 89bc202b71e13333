//! RSS QPs: receive-only raw packet QPs that spread packets over the WQs of
//! an indirection table by a Toeplitz hash of chosen header fields
//! (`ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_IND_TABLE` and
//! `IBV_QP_INIT_ATTR_RX_HASH`). ConnectX Ethernet ports have them; the
//! creation checks the device's `rss_caps` first.

use std::fmt;
use std::ptr::NonNull;

use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::pd::Pd;
use super::wq::RwqIndTable;
use crate::bindings as ffi;

/// Header fields the hash covers (`enum ibv_rx_hash_fields`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxHashFields(u64);

impl RxHashFields {
    /// IPv4 source address.
    pub const SRC_IPV4: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_SRC_IPV4.0 as u64);
    /// IPv4 destination address.
    pub const DST_IPV4: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_DST_IPV4.0 as u64);
    /// IPv6 source address.
    pub const SRC_IPV6: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_SRC_IPV6.0 as u64);
    /// IPv6 destination address.
    pub const DST_IPV6: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_DST_IPV6.0 as u64);
    /// TCP source port.
    pub const SRC_PORT_TCP: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_SRC_PORT_TCP.0 as u64);
    /// TCP destination port.
    pub const DST_PORT_TCP: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_DST_PORT_TCP.0 as u64);
    /// UDP source port.
    pub const SRC_PORT_UDP: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_SRC_PORT_UDP.0 as u64);
    /// UDP destination port.
    pub const DST_PORT_UDP: RxHashFields = RxHashFields(ffi::ibv_rx_hash_fields::IBV_RX_HASH_DST_PORT_UDP.0 as u64);

    /// Both sets of fields.
    pub const fn union(self, other: RxHashFields) -> RxHashFields {
        RxHashFields(self.0 | other.0)
    }

    /// The `rx_hash_fields_mask` bits.
    pub const fn bits(self) -> u64 {
        self.0
    }
}

pub(crate) struct RssQpData {
    _table: RwqIndTable,
    _pd: Pd,
}

// SAFETY: `ibv_destroy_qp` releases what `ibv_create_qp_ex` made; the table
// and PD drop after it (fields).
unsafe impl Destroy for RssQpData {
    type Raw = ffi::ibv_qp;
    const VERB: &'static str = "ibv_destroy_qp";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_qp>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_qp(raw.as_ptr()) }
    }
}

/// A receive-only raw packet QP spreading packets over an indirection
/// table's WQs by a Toeplitz hash; steer flows to it with
/// [`Flow::builder`](super::Flow::builder). Holds its table. Destroyed on drop.
///
/// # References
/// `ibv_create_qp_ex(3)` (`rwq_ind_tbl`, `rx_hash_conf`)
pub struct RssQp {
    qp: Owned<RssQpData>,
    pd: Pd,
}

impl fmt::Debug for RssQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RssQp").field("qpn", &self.qpn()).finish()
    }
}

impl RssQp {
    /// An RSS QP on `pd` over `table`, hashing `fields` with the Toeplitz
    /// `key` (40 bytes on ConnectX).
    ///
    /// [`Error::Unsupported`] before any system call where the device's
    /// `rss_caps` has no raw packet QPs, no Toeplitz hash or not all of
    /// `fields`.
    ///
    /// # Panics
    /// If `key` is longer than 255 bytes (a programming error).
    ///
    /// # References
    /// `ibv_create_qp_ex(3)`
    #[doc(alias = "ibv_create_qp_ex")]
    pub fn create(pd: &Pd, table: &RwqIndTable, fields: RxHashFields, key: &[u8]) -> Result<RssQp> {
        const OP: &str = "ibv_create_qp_ex";
        let ctx = pd.context();
        let rss = ctx.query_device_ex()?.rss_caps;
        let toeplitz = ffi::ibv_rx_hash_function_flags::IBV_RX_HASH_FUNC_TOEPLITZ.0 as u8;
        if rss.supported_qpts & (1 << ffi::ibv_qp_type::IBV_QPT_RAW_PACKET.0) == 0
            || rss.rx_hash_function & toeplitz == 0
        {
            return Err(Error::unsupported(
                OP,
                &crate::prim::unsupported::RAW_RSS_QP,
                ctx.name(),
                format_args!("({:#x}, {:#x})", rss.supported_qpts, rss.rx_hash_function),
            ));
        }
        if fields.bits() & !rss.rx_hash_fields_mask != 0 {
            return Err(Error::unsupported(
                OP,
                &crate::prim::unsupported::RAW_RSS_FIELDS,
                ctx.name(),
                format_args!("{:#x}", rss.rx_hash_fields_mask),
            ));
        }
        let key_len = u8::try_from(key.len()).expect("RssQp::create: a hash key of more than 255 bytes");
        let mut attr = ffi::ibv_qp_init_attr_ex {
            qp_type: ffi::ibv_qp_type::IBV_QPT_RAW_PACKET,
            comp_mask: ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0
                | ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_IND_TABLE.0
                | ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_RX_HASH.0,
            pd: pd.as_ptr(),
            rwq_ind_tbl: table.as_ptr(),
            rx_hash_conf: ffi::ibv_rx_hash_conf {
                rx_hash_function: toeplitz,
                rx_hash_key_len: key_len,
                // The provider only reads the key; the C type is not const.
                rx_hash_key: key.as_ptr().cast_mut(),
                rx_hash_fields_mask: fields.bits(),
            },
            ..Default::default()
        };
        // SAFETY: live context, PD and table of it; `attr` and the key valid for the call.
        let raw = unsafe { ffi::ibv_create_qp_ex(ctx.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last(OP).lacking(&crate::prim::unsupported::RAW_RSS_QP, ctx.name()))?;
        let data = RssQpData { _table: table.clone(), _pd: pd.clone() };
        // SAFETY: made just now, owned by nothing else.
        Ok(RssQp { qp: unsafe { Owned::new(raw, data) }, pd: pd.clone() })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// The protection domain.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The raw QP.
    pub fn as_ptr(&self) -> *mut ffi::ibv_qp {
        self.qp.as_ptr()
    }
}
