//! Work requests: scatter/gather entries, send and receive requests.
//!
//! Requests are plain values built by safe `const` constructors; what makes
//! posting `unsafe` is only the memory the entries name (it must stay
//! registered and alive until the completion), which no type can track once
//! the device holds it. The lifetime `'a` ties a request to the entry list it
//! points at, so a request, or a batch of them, cannot outlive that list.

use std::marker::PhantomData;
use std::ptr::NonNull;

use super::values::SendFlags;
use crate::bindings as ffi;
use crate::prim::WrOpcode;

/// A scatter/gather entry: `len` bytes at `addr` in the region of `lkey`.
/// Made by [`super::Mr::sge`], which checks the range.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Sge(pub(crate) ffi::ibv_sge);

impl PartialEq for Sge {
    fn eq(&self, o: &Sge) -> bool {
        (self.0.addr, self.0.length, self.0.lkey) == (o.0.addr, o.0.length, o.0.lkey)
    }
}

impl Eq for Sge {}

impl Sge {
    /// From raw parts, for memory the caller registered by other means.
    pub const fn from_raw(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge(ffi::ibv_sge { addr, length, lkey })
    }

    /// Start address.
    pub const fn addr(&self) -> u64 {
        self.0.addr
    }

    /// Length in bytes.
    pub const fn len(&self) -> u32 {
        self.0.length
    }

    /// Whether the entry is empty.
    pub const fn is_empty(&self) -> bool {
        self.0.length == 0
    }

    /// Local key.
    pub const fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

/// A remote location: address and rkey, as a peer's [`super::RemoteMr`] gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key of the region holding it.
    pub rkey: u32,
}

/// A send work request (`struct ibv_send_wr`) over entries borrowed for `'a`.
///
/// ```
/// use rrddmma::prim::{RemoteAddr, SendWr, Sge};
/// let sges = [Sge::from_raw(0x1000, 64, 7)];
/// let wr = SendWr::write(&sges, RemoteAddr { addr: 0x2000, rkey: 9 }).wr_id(1).signaled();
/// assert_eq!(wr.as_raw().num_sge, 1);
/// ```
///
/// A request cannot outlive its entries:
///
/// ```compile_fail
/// use rrddmma::prim::{RemoteAddr, SendWr, Sge};
/// let wr = {
///     let sges = [Sge::from_raw(0x1000, 64, 7)];
///     SendWr::write(&sges, RemoteAddr { addr: 0x2000, rkey: 9 })
/// };
/// drop(wr);
/// ```
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct SendWr<'a> {
    raw: ffi::ibv_send_wr,
    _sges: PhantomData<&'a [Sge]>,
}

// SAFETY: the raw pointers only name the borrowed `[Sge]` (and, for UD, an
// address handle that is itself `Sync`); nothing is owned.
unsafe impl Send for SendWr<'_> {}
// SAFETY: as above; a shared `SendWr` is never written through.
unsafe impl Sync for SendWr<'_> {}

impl std::fmt::Debug for SendWr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendWr")
            .field("wr_id", &self.raw.wr_id)
            .field("opcode", &WrOpcode::from(self.raw.opcode))
            .field("num_sge", &self.raw.num_sge)
            .field("send_flags", &self.raw.send_flags)
            .finish()
    }
}

impl<'a> SendWr<'a> {
    #[inline]
    fn new(opcode: WrOpcode, sges: &'a [Sge]) -> SendWr<'a> {
        let num_sge = i32::try_from(sges.len()).expect("more than i32::MAX scatter/gather entries");
        SendWr {
            raw: ffi::ibv_send_wr {
                wr_id: 0,
                next: std::ptr::null_mut(),
                // Providers only read the list; the C type is not const.
                sg_list: sges.as_ptr().cast_mut().cast(),
                num_sge,
                opcode: opcode.into(),
                send_flags: 0,
                ..Default::default()
            },
            _sges: PhantomData,
        }
    }

    #[inline]
    fn rdma(mut self, remote: RemoteAddr) -> SendWr<'a> {
        self.raw.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: remote.addr, rkey: remote.rkey };
        self
    }

    /// SEND of the entries' bytes.
    #[inline]
    pub fn send(sges: &'a [Sge]) -> SendWr<'a> {
        SendWr::new(WrOpcode::SEND, sges)
    }

    /// TSO on a raw packet QP: the device cuts the entries' bytes into
    /// segments of `mss` bytes, each sent behind a copy of `hdr` (the
    /// packet's headers, at most the QP's `max_tso_header` bytes), with
    /// lengths and checksums fixed per segment (`SendFlags::IP_CSUM`).
    ///
    /// # Panics
    /// If `hdr` is longer than 65,535 bytes (a programming error).
    #[inline]
    pub fn tso(sges: &'a [Sge], hdr: &'a [u8], mss: u16) -> SendWr<'a> {
        let hdr_sz = u16::try_from(hdr.len()).expect("SendWr::tso: headers longer than 65,535 bytes");
        let mut wr = SendWr::new(WrOpcode::TSO, sges);
        // Providers only read the headers; the C type is not const.
        wr.raw.__bindgen_anon_2.tso =
            ffi::ibv_send_wr__bindgen_ty_4__bindgen_ty_2 { hdr: hdr.as_ptr().cast_mut().cast(), hdr_sz, mss };
        wr
    }

    /// SEND with 32-bit immediate data (given in host order).
    #[inline]
    pub fn send_imm(sges: &'a [Sge], imm: u32) -> SendWr<'a> {
        let mut wr = SendWr::new(WrOpcode::SEND_WITH_IMM, sges);
        wr.raw.__bindgen_anon_1.imm_data = imm.to_be();
        wr
    }

    /// SEND that also invalidates the peer's key `rkey`
    /// (`IBV_WR_SEND_WITH_INV`): the peer's receive completion carries
    /// [`WcFlags::WITH_INV`](super::WcFlags::WITH_INV) and the key.
    #[inline]
    pub fn send_inv(sges: &'a [Sge], rkey: u32) -> SendWr<'a> {
        let mut wr = SendWr::new(WrOpcode::SEND_WITH_INV, sges);
        wr.raw.__bindgen_anon_1.invalidate_rkey = rkey;
        wr
    }

    /// RDMA WRITE of the entries' bytes to `remote`.
    #[inline]
    pub fn write(sges: &'a [Sge], remote: RemoteAddr) -> SendWr<'a> {
        SendWr::new(WrOpcode::RDMA_WRITE, sges).rdma(remote)
    }

    /// RDMA WRITE with immediate data (host order), consuming a receive at the peer.
    #[inline]
    pub fn write_imm(sges: &'a [Sge], remote: RemoteAddr, imm: u32) -> SendWr<'a> {
        let mut wr = SendWr::new(WrOpcode::RDMA_WRITE_WITH_IMM, sges).rdma(remote);
        wr.raw.__bindgen_anon_1.imm_data = imm.to_be();
        wr
    }

    /// RDMA READ from `remote` into the entries.
    #[inline]
    pub fn read(sges: &'a [Sge], remote: RemoteAddr) -> SendWr<'a> {
        SendWr::new(WrOpcode::RDMA_READ, sges).rdma(remote)
    }

    /// 8-byte compare-and-swap at `remote` (8-byte aligned); the old value
    /// lands in `old` (one 8-byte entry).
    #[inline]
    pub fn compare_swap(old: &'a [Sge; 1], remote: RemoteAddr, compare: u64, swap: u64) -> SendWr<'a> {
        let mut wr = SendWr::new(WrOpcode::ATOMIC_CMP_AND_SWP, old);
        wr.raw.wr.atomic = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: remote.addr,
            compare_add: compare,
            swap,
            rkey: remote.rkey,
        };
        wr
    }

    /// 8-byte fetch-and-add at `remote` (8-byte aligned); the old value lands
    /// in `old` (one 8-byte entry).
    #[inline]
    pub fn fetch_add(old: &'a [Sge; 1], remote: RemoteAddr, add: u64) -> SendWr<'a> {
        let mut wr = SendWr::new(WrOpcode::ATOMIC_FETCH_AND_ADD, old);
        wr.raw.wr.atomic = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: remote.addr,
            compare_add: add,
            swap: 0,
            rkey: remote.rkey,
        };
        wr
    }

    /// UD destination: address handle, remote QP number and Q_Key.
    #[inline]
    pub fn ud(self, ah: &'a super::Ah, remote_qpn: u32, remote_qkey: u32) -> SendWr<'a> {
        // SAFETY: `Ah` holds a live, non-null handle, borrowed as long as the request.
        unsafe { self.ud_raw(NonNull::new_unchecked(ah.as_ptr()), remote_qpn, remote_qkey) }
    }

    /// [`SendWr::ud`] with a raw address handle that no [`Ah`](super::Ah)
    /// owns (the libmlx5 differential harness posts to the provider's own).
    ///
    /// # Safety
    /// `ah` is a live `ibv_ah` of the QP's provider, alive until the
    /// request is posted.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn ud_raw(mut self, ah: NonNull<ffi::ibv_ah>, remote_qpn: u32, remote_qkey: u32) -> SendWr<'a> {
        self.raw.wr.ud = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 { ah: ah.as_ptr(), remote_qpn, remote_qkey };
        self
    }

    /// XRC destination: the number of the receiving side's XRC SRQ
    /// ([`Srq::srq_num`](super::Srq::srq_num)), for a request on an
    /// `XRC_SEND` QP.
    #[inline]
    pub const fn xrc_srqn(mut self, remote_srqn: u32) -> SendWr<'a> {
        self.raw.qp_type.xrc.remote_srqn = remote_srqn;
        self
    }

    /// Sets the caller's identifier, returned in the completion.
    #[inline]
    pub const fn wr_id(mut self, wr_id: u64) -> SendWr<'a> {
        self.raw.wr_id = wr_id;
        self
    }

    /// Adds send flags.
    #[inline]
    pub const fn flags(mut self, flags: SendFlags) -> SendWr<'a> {
        self.raw.send_flags |= flags.bits();
        self
    }

    /// Asks for a completion (`IBV_SEND_SIGNALED`).
    #[inline]
    pub const fn signaled(self) -> SendWr<'a> {
        self.flags(SendFlags::SIGNALED)
    }

    /// Sends the payload inline (`IBV_SEND_INLINE`): copied at post time, up
    /// to the QP's `max_inline_data`.
    #[inline]
    pub const fn inline(self) -> SendWr<'a> {
        self.flags(SendFlags::INLINE)
    }

    /// Fences behind earlier READs and atomics (`IBV_SEND_FENCE`).
    #[inline]
    pub const fn fence(self) -> SendWr<'a> {
        self.flags(SendFlags::FENCE)
    }

    /// Sets the solicited-event bit (`IBV_SEND_SOLICITED`).
    #[inline]
    pub const fn solicited(self) -> SendWr<'a> {
        self.flags(SendFlags::SOLICITED)
    }

    /// The raw request.
    pub const fn as_raw(&self) -> &ffi::ibv_send_wr {
        &self.raw
    }

    pub(crate) fn raw_mut(&mut self) -> &mut ffi::ibv_send_wr {
        &mut self.raw
    }
}

/// Defines a prebuilt, linked-once list of `$wr` (raw `$raw`): the list type
/// and its methods, shared by [`SendList`] and [`RecvList`].
macro_rules! wr_list {
    ($(#[$doc:meta])* $name:ident, $wr:ident, $raw:ty, $post:literal) => {
        $(#[$doc])*
        // `bad` first: the post passes the list's address itself as the
        // `bad_wr` slot and loads only the head.
        #[repr(C)]
        pub struct $name<'a> {
            /// The provider's `bad_wr` output of the last failed post (null before).
            bad: *mut $raw,
            wrs: Box<[$wr<'a>]>,
        }

        // SAFETY: as for the requests; `bad` only ever points into `wrs`.
        unsafe impl Send for $name<'_> {}
        // SAFETY: as above; a shared list is never written through.
        unsafe impl Sync for $name<'_> {}

        impl std::fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_list().entries(self.wrs.iter()).finish()
            }
        }

        impl<'a> $name<'a> {
            /// Links `wrs` into a list.
            ///
            /// # Panics
            /// If `wrs` is empty: a list holds at least one request.
            pub fn new(wrs: Vec<$wr<'a>>) -> $name<'a> {
                assert!(!wrs.is_empty(), concat!(stringify!($name), "::new: a list needs at least one request"));
                let mut wrs = wrs.into_boxed_slice();
                link_in_place!(&mut wrs[..]);
                $name { wrs, bad: std::ptr::null_mut() }
            }

            /// Number of requests.
            pub fn len(&self) -> usize {
                self.wrs.len()
            }

            /// Always false: a list holds at least one request.
            pub fn is_empty(&self) -> bool {
                false
            }

            /// Request `i`.
            ///
            /// # Panics
            /// If `i` is out of range.
            pub fn get(&self, i: usize) -> &$wr<'a> {
                &self.wrs[i]
            }

            /// Replaces request `i`, keeping the links.
            ///
            /// # Panics
            /// If `i` is out of range.
            #[inline]
            pub fn set(&mut self, i: usize, wr: $wr<'a>) {
                let next = self.wrs[i].raw.next;
                self.wrs[i] = wr;
                self.wrs[i].raw.next = next;
            }

            /// The head of the list and the `bad_wr` slot, for the provider call.
            #[inline(always)]
            pub(crate) fn parts(&mut self) -> (*mut $raw, *mut *mut $raw) {
                // The request is a transparent raw request, and the list is never empty.
                let bad: *mut *mut $raw = &mut self.bad;
                (self.wrs.as_mut_ptr().cast(), bad)
            }

            #[doc = concat!("After a failed [`super::Qp::", $post, "`]: the index of the")]
            /// request the provider refused (the ones before it were posted), when
            /// it said. Meaningful only right after a failed post, until the next.
            pub fn refused(&self) -> Option<usize> {
                let size = std::mem::size_of::<$wr<'_>>();
                let offset = (self.bad as usize).wrapping_sub(self.wrs.as_ptr() as usize);
                (!self.bad.is_null() && offset % size == 0 && offset / size < self.wrs.len()).then_some(offset / size)
            }
        }
    };
}

wr_list! {
    /// A prebuilt list of send requests, linked once when built, for posting the
    /// same shape again and again with [`super::Qp::post_send_list`] (as C code
    /// posts a prebuilt `ibv_send_wr` chain). The requests live in one heap
    /// block that never moves, so moving the list keeps the links; requests are
    /// replaced with [`SendList::set`], which keeps them too.
    ///
    /// ```
    /// use rrddmma::prim::{RemoteAddr, SendList, SendWr, Sge};
    /// let sges = [Sge::from_raw(0x1000, 64, 7), Sge::from_raw(0x1040, 64, 7)];
    /// let r = RemoteAddr { addr: 0x2000, rkey: 9 };
    /// let mut list = SendList::new(vec![SendWr::write(&sges[..1], r), SendWr::write(&sges[1..], r).signaled()]);
    /// list.set(0, SendWr::write(&sges[..1], RemoteAddr { addr: 0x3000, rkey: 9 }));
    /// assert_eq!(list.len(), 2);
    /// assert_eq!(list.get(0).as_raw().next, list.get(1).as_raw() as *const _ as *mut _);
    /// ```
    SendList, SendWr, ffi::ibv_send_wr, "post_send_list"
}

wr_list! {
    /// A prebuilt list of receive requests, linked once when built, for
    /// re-posting the same receives with [`super::Qp::post_recv_list`] (as C
    /// code re-posts a prebuilt `ibv_recv_wr` chain): no linking at post time.
    /// Moving the list keeps the links; [`RecvList::set`] replaces a request
    /// and keeps them too.
    ///
    /// ```
    /// use rrddmma::prim::{RecvList, RecvWr, Sge};
    /// let sges = [Sge::from_raw(0x1000, 64, 7), Sge::from_raw(0x1040, 64, 7)];
    /// let mut list = RecvList::new(vec![RecvWr::new(&sges[..1], 0), RecvWr::new(&sges[1..], 1)]);
    /// list.set(1, RecvWr::new(&sges[1..], 5));
    /// assert_eq!(list.get(1).as_raw().wr_id, 5);
    /// assert_eq!(list.get(0).as_raw().next, list.get(1).as_raw() as *const _ as *mut _);
    /// ```
    RecvList, RecvWr, ffi::ibv_recv_wr, "post_recv_list"
}

/// A receive work request (`struct ibv_recv_wr`) over entries borrowed for `'a`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct RecvWr<'a> {
    raw: ffi::ibv_recv_wr,
    _sges: PhantomData<&'a [Sge]>,
}

// SAFETY: as for `SendWr`.
unsafe impl Send for RecvWr<'_> {}
// SAFETY: as for `SendWr`.
unsafe impl Sync for RecvWr<'_> {}

impl std::fmt::Debug for RecvWr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvWr").field("wr_id", &self.raw.wr_id).field("num_sge", &self.raw.num_sge).finish()
    }
}

impl<'a> RecvWr<'a> {
    /// A receive into the entries, identified by `wr_id`.
    #[inline]
    pub fn new(sges: &'a [Sge], wr_id: u64) -> RecvWr<'a> {
        let num_sge = i32::try_from(sges.len()).expect("more than i32::MAX scatter/gather entries");
        RecvWr {
            raw: ffi::ibv_recv_wr {
                wr_id,
                next: std::ptr::null_mut(),
                sg_list: sges.as_ptr().cast_mut().cast(),
                num_sge,
            },
            _sges: PhantomData,
        }
    }

    /// A receive with no entries, identified by `wr_id`: what a WRITE with
    /// immediate consumes (it delivers its immediate, and its data goes to
    /// the WRITE's remote address, not to a receive buffer). A SEND that
    /// meets it completes with `LOC_LEN_ERR` unless its payload is empty.
    ///
    /// ```
    /// use rrddmma::prim::RecvWr;
    /// let wr = RecvWr::empty(9);
    /// assert_eq!((wr.as_raw().wr_id, wr.as_raw().num_sge), (9, 0));
    /// assert!(wr.as_raw().sg_list.is_null());
    /// ```
    #[inline]
    pub const fn empty(wr_id: u64) -> RecvWr<'static> {
        RecvWr {
            raw: ffi::ibv_recv_wr { wr_id, next: std::ptr::null_mut(), sg_list: std::ptr::null_mut(), num_sge: 0 },
            _sges: PhantomData,
        }
    }

    /// The raw request.
    pub const fn as_raw(&self) -> &ffi::ibv_recv_wr {
        &self.raw
    }

    pub(crate) fn raw_mut(&mut self) -> &mut ffi::ibv_recv_wr {
        &mut self.raw
    }
}

/// Links `wrs` into one list in place (no allocation) and returns its head.
macro_rules! link_in_place {
    ($wrs:expr) => {{
        let wrs = $wrs;
        let n = wrs.len();
        for i in 1..n {
            let next: *mut _ = wrs[i].raw_mut();
            wrs[i - 1].raw_mut().next = next;
        }
        if let Some(last) = wrs.last_mut() {
            last.raw_mut().next = std::ptr::null_mut();
        }
        wrs.first_mut().map(|w| w.raw_mut() as *mut _)
    }};
}
pub(crate) use link_in_place;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_list_stays_linked_when_moved_and_set() {
        let sges = [Sge::from_raw(0x1000, 8, 1); 3];
        let r = RemoteAddr { addr: 0x2000, rkey: 2 };
        let list = SendList::new(sges.iter().map(|s| SendWr::write(std::slice::from_ref(s), r)).collect());
        let mut moved = Box::new(list);
        moved.set(1, SendWr::read(&sges[..1], r).wr_id(7));
        let raw: Vec<*const ffi::ibv_send_wr> = (0..3).map(|i| moved.get(i).as_raw() as *const _).collect();
        assert_eq!(moved.get(0).as_raw().next as *const _, raw[1]);
        assert_eq!(moved.get(1).as_raw().next as *const _, raw[2]);
        assert!(moved.get(2).as_raw().next.is_null());
        assert_eq!(moved.get(1).as_raw().wr_id, 7);
        let (head, bad) = moved.parts();
        assert_eq!(head as *const _, raw[0]);
        assert_eq!(moved.refused(), None, "no failed post yet");
        // What a provider does when it refuses the third request.
        // SAFETY: `bad` points at the list's own slot.
        unsafe { *bad = raw[2].cast_mut() };
        assert_eq!(moved.refused(), Some(2));
    }

    #[test]
    fn recv_list_links_once_and_reports_the_refused_request() {
        let sges = [Sge::from_raw(0x1000, 8, 1); 2];
        let mut list = Box::new(RecvList::new(vec![RecvWr::new(&sges[..1], 1), RecvWr::new(&sges[1..], 2)]));
        list.set(0, RecvWr::new(&sges[..1], 9));
        let second: *const ffi::ibv_recv_wr = list.get(1).as_raw();
        assert_eq!((list.get(0).as_raw().next as *const _, list.get(0).as_raw().wr_id), (second, 9));
        assert!(list.get(1).as_raw().next.is_null());
        let (_, bad) = list.parts();
        // SAFETY: `bad` points at the list's own slot.
        unsafe { *bad = second.cast_mut() };
        assert_eq!(list.refused(), Some(1));
    }

    #[test]
    #[should_panic(expected = "RecvList::new: a list needs at least one request")]
    fn empty_recv_list_is_refused() {
        let _ = RecvList::new(Vec::new());
    }

    #[test]
    #[should_panic(expected = "at least one request")]
    fn empty_send_list_is_refused() {
        let _ = SendList::new(Vec::new());
    }
}
