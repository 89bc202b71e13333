//! CM events, copied out of librdmacm and acknowledged at once.

use std::fmt;
use std::ptr::NonNull;

use crate::bindings::cm as cmffi;
use crate::prim::{AhAttr, Error, Result};

use super::kind::CmEventType;
use super::{CmId, PortSpace};

/// The UD parameters of an event (`rdma_ud_param`): how to address the peer
/// (`ESTABLISHED` on a UD id) or the group (`MULTICAST_JOIN`).
#[derive(Clone, Copy, Debug)]
pub struct UdParam {
    /// The address vector (for [`crate::prim::Ah::create`]).
    pub ah_attr: AhAttr,
    /// The remote QPN (`0xffffff` for a multicast group).
    pub qpn: u32,
    /// The Q_Key to send with.
    pub qkey: u32,
}

/// An event as read from the channel: copied out of librdmacm and
/// acknowledged. A connect request's new id is owned here until the event
/// is handed out; dropping the event destroys that id, which rejects the
/// request.
pub(super) struct RawEvent {
    kind: CmEventType,
    status: i32,
    id: *mut cmffi::rdma_cm_id,
    listen_id: *mut cmffi::rdma_cm_id,
    private_data: Vec<u8>,
    ud: Option<UdParam>,
    new_id: Option<(NonNull<cmffi::rdma_cm_id>, PortSpace)>,
}

// SAFETY: the raw id pointers are only compared, never dereferenced, except
// `new_id`, which the event owns alone (librdmacm ids may be used and
// destroyed from any thread).
unsafe impl Send for RawEvent {}

impl RawEvent {
    /// Copies `ev` out and acknowledges it.
    ///
    /// # Safety
    /// `ev` is a live event just read from a channel, not yet acknowledged,
    /// read under the channel's lock.
    pub(super) unsafe fn read(ev: *mut cmffi::rdma_cm_event) -> RawEvent {
        // SAFETY: caller: `ev` is live until acked below.
        let e = unsafe { &*ev };
        let kind = CmEventType::from(e.event);
        // SAFETY: the event's id is live while the event is.
        let ps = (!e.id.is_null()).then(|| unsafe { PortSpace::of(e.id) });
        let ud_ps = ps == Some(PortSpace::Ud);
        // SAFETY: the union member in use follows the id's port space
        // (`ud` for UDP/IPoIB, `conn` otherwise), as librdmacm fills it.
        let (pd, len, ud) = unsafe {
            if ud_ps {
                let u = e.param.ud.as_ref();
                let ud = matches!(kind, CmEventType::ESTABLISHED | CmEventType::MULTICAST_JOIN).then(|| UdParam {
                    ah_attr: AhAttr::from_raw(u.ah_attr),
                    qpn: u.qp_num,
                    qkey: u.qkey,
                });
                (u.private_data, u.private_data_len, ud)
            } else {
                {
                    let c = e.param.conn.as_ref();
                    (c.private_data, c.private_data_len, None)
                }
            }
        };
        let private_data = if pd.is_null() || len == 0 {
            Vec::new()
        } else {
            // SAFETY: librdmacm: `private_data` holds `private_data_len` bytes while the event lives.
            unsafe { std::slice::from_raw_parts(pd.cast::<u8>(), usize::from(len)) }.to_vec()
        };
        // A connect request's id is new and ours to own.
        let new_id = match (kind, NonNull::new(e.id)) {
            (CmEventType::CONNECT_REQUEST, Some(id)) => Some((id, ps.unwrap_or(PortSpace::Rc))),
            _ => None,
        };
        let out = RawEvent { kind, status: e.status, id: e.id, listen_id: e.listen_id, private_data, ud, new_id };
        // SAFETY: acked exactly once; nothing above keeps a pointer into it.
        let _ = unsafe { cmffi::rdma_ack_cm_event(ev) };
        out
    }

    /// Whether the event is for `id`: as the id, or as the listening id of
    /// a connect request.
    pub(super) fn is_for(&self, id: *mut cmffi::rdma_cm_id) -> bool {
        self.id == id || (self.kind == CmEventType::CONNECT_REQUEST && self.listen_id == id)
    }

    /// Whether the event holds a connect request's new id.
    pub(super) fn is_request(&self) -> bool {
        self.new_id.is_some()
    }

    /// The new id of a connect request still owned by the event.
    pub(super) fn new_id_ptr(&self) -> Option<*mut cmffi::rdma_cm_id> {
        self.new_id.map(|(id, _)| id.as_ptr())
    }

    /// The new id of a connect request, now the caller's to own.
    pub(super) fn take_new_id(&mut self) -> Option<(NonNull<cmffi::rdma_cm_id>, PortSpace)> {
        self.new_id.take()
    }
}

impl Drop for RawEvent {
    fn drop(&mut self) {
        if let Some((id, _)) = self.new_id.take() {
            // SAFETY: the request's id is owned by this event alone; its
            // events were acked when read. Destroying it rejects the request.
            let _ = unsafe { cmffi::rdma_destroy_id(id.as_ptr()) };
        }
    }
}

/// One CM event. Reading it acknowledged it (`rdma_ack_cm_event`); what it
/// carried is copied here. A `CONNECT_REQUEST` brings the new [`CmId`]
/// ([`take_request`](Self::take_request)); dropping the event without taking
/// it destroys that id, which rejects the request.
pub struct CmEvent {
    kind: CmEventType,
    status: i32,
    id: *mut cmffi::rdma_cm_id,
    listen_id: *mut cmffi::rdma_cm_id,
    private_data: Vec<u8>,
    ud: Option<UdParam>,
    request: Option<CmId>,
}

// SAFETY: the raw id pointers are only compared, never dereferenced.
unsafe impl Send for CmEvent {}
// SAFETY: as above.
unsafe impl Sync for CmEvent {}

impl fmt::Debug for CmEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CmEvent")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("private_data_len", &self.private_data.len())
            .field("ud", &self.ud)
            .finish()
    }
}

impl CmEvent {
    /// The event handed out, with the request's id already made a [`CmId`].
    pub(super) fn new(mut raw: RawEvent, request: Option<CmId>) -> CmEvent {
        CmEvent {
            kind: raw.kind,
            status: raw.status,
            id: raw.id,
            listen_id: raw.listen_id,
            private_data: std::mem::take(&mut raw.private_data),
            ud: raw.ud,
            request,
        }
    }

    /// The kind.
    pub fn kind(&self) -> CmEventType {
        self.kind
    }

    /// The status: 0, a negative errno, or (for `REJECTED`) the IB CM reject
    /// reason (8: no listener at that port; 28: rejected by the peer's application).
    pub fn status(&self) -> i32 {
        self.status
    }

    /// The private data the peer sent, as the CM delivers it (padded to the
    /// message's full field with zeros on IB CM transports).
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// UD parameters (`ESTABLISHED` on a UD id, `MULTICAST_JOIN`).
    pub fn ud_param(&self) -> Option<&UdParam> {
        self.ud.as_ref()
    }

    /// The id the event is for (compare with [`CmId::as_ptr`]).
    pub fn id_ptr(&self) -> *mut cmffi::rdma_cm_id {
        self.id
    }

    /// The listening id, for a `CONNECT_REQUEST`.
    pub fn listen_id_ptr(&self) -> *mut cmffi::rdma_cm_id {
        self.listen_id
    }

    /// The new id of a `CONNECT_REQUEST` (once).
    pub fn take_request(&mut self) -> Option<CmId> {
        self.request.take()
    }

    /// `Ok(self)` when the event is of kind `want` with status 0; otherwise
    /// [`Error::CmEvent`] with what arrived, its status and private data
    /// (e.g. a `REJECTED` with the peer's reject data).
    pub fn expect(self, want: CmEventType) -> Result<CmEvent> {
        if self.kind == want && self.status == 0 {
            return Ok(self);
        }
        Err(Error::CmEvent {
            op: want.waiting_for(),
            expected: want,
            got: self.kind,
            status: self.status,
            private_data: self.private_data,
        })
    }
}
