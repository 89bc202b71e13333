//! [`UdEndpoint`]: a UD QP ready to send and receive, with a bounded cache
//! of address handles.

use std::collections::HashMap;

use crate::ctrl::QpInfo;
use crate::prim::{Ah, AhAttr, Cq, Pd, Qp, QpCaps, QpType, Srq, Wc, GRH_LEN};

/// Everything an address handle is made from: every field of
/// `ibv_ah_attr` (destination GID, flow label, source GID index, hop limit,
/// traffic class, destination LID, service level, source path bits, static
/// rate, whether it is global, port). Two attributes with the same key make
/// the same handle; any difference, however small, is another handle. (The
/// sender's QPN is not part of an address handle: a send names it beside
/// the handle.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct AhKey {
    dgid: [u8; 16],
    flow_label: u32,
    sgid_index: u8,
    hop_limit: u8,
    traffic_class: u8,
    dlid: u16,
    sl: u8,
    src_path_bits: u8,
    static_rate: u8,
    is_global: u8,
    port: u8,
}

impl AhKey {
    fn of(attr: &AhAttr) -> AhKey {
        let r = attr.as_raw();
        AhKey {
            dgid: attr.dgid().0,
            flow_label: r.grh.flow_label,
            sgid_index: r.grh.sgid_index,
            hop_limit: r.grh.hop_limit,
            traffic_class: r.grh.traffic_class,
            dlid: r.dlid,
            sl: r.sl,
            src_path_bits: r.src_path_bits,
            static_rate: r.static_rate,
            is_global: r.is_global,
            port: r.port_num,
        }
    }
}

/// A cache of at most `cap` values, which lets the least recently used
/// one go to make room for a new one. Lookups and hits allocate nothing;
/// an eviction scans the entries (it comes with the creation of a new
/// address handle, a system call, anyway).
#[derive(Debug)]
struct Lru<K, V> {
    map: HashMap<K, (V, u64)>,
    cap: usize,
    clock: u64,
}

impl<K: Copy + Eq + std::hash::Hash, V> Lru<K, V> {
    fn new(cap: usize) -> Lru<K, V> {
        assert!(cap >= 1, "UdOpts::ah_cache must be at least 1 (the handle just made is cached until the next one)");
        Lru { map: HashMap::new(), cap, clock: 0 }
    }

    /// The value for `key`, made by `make` on a miss (after evicting the
    /// least recently used entry when the cache is full). A failed `make`
    /// changes nothing.
    fn get_or_try_insert<E>(&mut self, key: K, make: impl FnOnce() -> Result<V, E>) -> Result<&V, E> {
        self.clock += 1;
        let now = self.clock;
        if !self.map.contains_key(&key) {
            let v = make()?;
            if self.map.len() >= self.cap {
                let oldest = self.map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.map.remove(&k);
                }
            }
            self.map.insert(key, (v, now));
        }
        let e = self.map.get_mut(&key).expect("present: found or just inserted");
        e.1 = now;
        Ok(&e.0)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn clear(&mut self) {
        self.map.clear();
    }
}

/// Settings of a [`UdEndpoint`]: start from [`UdOpts::default`] and chain
/// the setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UdOpts {
    pub(crate) caps: QpCaps,
    pub(crate) port: u8,
    pub(crate) gid_index: Option<u8>,
    pub(crate) qkey: u32,
    pub(crate) srq: Option<Srq>,
    pub(crate) ah_cache: usize,
}

impl Default for UdOpts {
    fn default() -> UdOpts {
        UdOpts {
            caps: QpCaps::default(),
            port: 1,
            gid_index: None,
            qkey: 0x1111_1111,
            srq: None,
            ah_cache: UdOpts::DEFAULT_AH_CACHE,
        }
    }
}

impl UdOpts {
    /// Default bound of the address-handle cache: 1024 handles.
    pub const DEFAULT_AH_CACHE: usize = 1024;

    setters! {
        /// Queue sizes (receive sizes are ignored with an SRQ). Default
        /// [`QpCaps::default`].
        const caps: QpCaps;
        /// Local port (`ibv_qp_attr::port_num`). Default 1.
        const port: u8;
        /// Source GID index of the address handles this endpoint creates
        /// (`ibv_global_route::sgid_index`). Default `None`: the port's RoCE
        /// v2 GID ([`crate::prim::Context::roce_v2_gid_index`]), 0 on InfiniBand.
        const gid_index: Option<u8>;
        /// The Q_Key peers send with (`ibv_qp_attr::qkey`). Default `0x1111_1111`.
        const qkey: u32;
        /// Take receives from this shared receive queue (`ibv_qp_init_attr::srq`).
        /// Default `None`: the QP has a receive queue of its own.
        srq: Option<Srq>;
        /// Most address handles the endpoint keeps ([`UdEndpoint::route`],
        /// [`UdEndpoint::reply_route`]); when one more is made, the least
        /// recently used goes. Anyone who knows the QPN and Q_Key can send
        /// to a UD QP from any source address, so a server that answers
        /// whoever sent would otherwise keep one handle per forged source.
        /// At least 1 (a programming error otherwise). Default
        /// [`UdOpts::DEFAULT_AH_CACHE`].
        const ah_cache: usize, ah_cache_capacity;
    }
}

/// A UD QP brought up to RTS, with a bounded cache of address handles keyed
/// by everything a handle is made from (every field of `ibv_ah_attr`): the
/// first send to a path creates its AH (a system call), later ones reuse it.
/// The cache holds at most [`UdOpts::ah_cache`] handles and lets the least
/// recently used go first, so a flood of datagrams from forged sources
/// cannot grow it.
///
/// An evicted handle is destroyed when its last clone goes: a send posted
/// with a handle from [`route`](Self::route) or
/// [`reply_route`](Self::reply_route) must keep a clone of it (cloning an
/// [`Ah`] is cheap) until the send completes, as
/// [`Qp::post_send`]'s contract requires, when other routes may be made
/// meanwhile.
///
/// Receive buffers of a UD QP hold the 40-byte Global Route Header before
/// each message ([`GRH_LEN`]): post `GRH_LEN + n` bytes to receive `n`.
/// Anyone who knows the QPN and Q_Key can send, and a datagram larger than
/// its receive completes that receive in error; on some devices (SoftRoCE)
/// it also moves the QP to the error state, which [`UdEndpoint::recover`]
/// undoes. A server should post `GRH_LEN` plus the path MTU, the most a UD
/// message may carry: a larger one is refused at its sender or dropped at
/// the receiver (SoftRoCE sends it and drops it on arrival; the QP stays
/// in RTS), so no datagram overflows such a receive. A
/// server answers whoever sent a request with [`UdEndpoint::reply_route`],
/// which builds (and caches) the address handle from the completion and
/// that header.
#[derive(Debug)]
pub struct UdEndpoint {
    qp: Qp,
    pd: Pd,
    port: u8,
    gid_index: u8,
    qkey: u32,
    ahs: Lru<AhKey, Ah>,
    srq: Option<Srq>,
}

impl UdEndpoint {
    /// Creates the UD QP on `pd` and brings it to RTS on `port` with `qkey`;
    /// `gid_index` is the source GID of address handles it creates.
    pub fn new(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        port: u8,
        gid_index: u8,
        qkey: u32,
    ) -> crate::prim::Result<UdEndpoint> {
        let opts = UdOpts { caps, port, gid_index: Some(gid_index), qkey, ..UdOpts::default() };
        UdEndpoint::with_opts(pd, send_cq, recv_cq, &opts)
    }

    /// Creates the UD QP as `opts` says (an SRQ, the automatic GID, ...)
    /// and brings it to RTS.
    pub fn with_opts(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, opts: &UdOpts) -> crate::prim::Result<UdEndpoint> {
        let gid_index = match opts.gid_index {
            Some(i) => i,
            None => pd.context().roce_v2_gid_index(opts.port)?,
        };
        let mut b = Qp::builder(pd, QpType::UD, send_cq, recv_cq).caps(opts.caps);
        if let Some(srq) = &opts.srq {
            b = b.srq(srq);
        }
        let qp = b.build()?;
        qp.bring_up_ud(opts.port, 0, opts.qkey, 0)?;
        Ok(UdEndpoint {
            qp,
            pd: pd.clone(),
            port: opts.port,
            gid_index,
            qkey: opts.qkey,
            ahs: Lru::new(opts.ah_cache),
            srq: opts.srq.clone(),
        })
    }

    /// The shared receive queue, when the endpoint takes receives from one.
    pub fn srq(&self) -> Option<&Srq> {
        self.srq.as_ref()
    }

    /// The source GID index of the address handles this endpoint creates.
    pub fn gid_index(&self) -> u8 {
        self.gid_index
    }

    /// The QP, for posting.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// The Q_Key peers must send with.
    pub fn qkey(&self) -> u32 {
        self.qkey
    }

    /// What peers need to reach this endpoint (the PSN field is unused by UD).
    pub fn info(&self, mtu: crate::prim::Mtu) -> crate::prim::Result<QpInfo> {
        let e = self.qp.endpoint(self.port, self.gid_index, 0)?;
        Ok(QpInfo::new(&e, self.gid_index, self.port, mtu))
    }

    /// The QP and the address handle for `peer` at service level `sl` (the
    /// handle created on first use), ready for
    /// [`SendWr::ud`](crate::prim::SendWr::ud).
    pub fn route(&mut self, peer: &QpInfo, sl: u8) -> crate::prim::Result<(&Qp, &Ah)> {
        let attr = peer.ah_attr(self.port, self.gid_index).sl(sl);
        let pd = &self.pd;
        let ah = self.ahs.get_or_try_insert(AhKey::of(&attr), || Ah::create(pd, &attr))?;
        Ok((&self.qp, ah))
    }

    /// The QP and the address handle back to the sender of a received
    /// completion `wc`, whose receive buffer starts with `grh` (the first
    /// [`GRH_LEN`] bytes); send to QPN `wc.src_qp()` with [`UdEndpoint::qkey`].
    ///
    /// The sender's address is whatever the datagram says (its GRH, or on
    /// RoCE its IP header): UD does not authenticate it, so a reply may go
    /// to a forged source. Handles are cached by everything
    /// `ibv_init_ah_from_wc` derives from the datagram (source GID and LID,
    /// service level, flow label, traffic class, hop limit, ...), at most
    /// [`UdOpts::ah_cache`] of them (least recently used first out). A GRH
    /// the library cannot turn into a path gives `Err` and caches nothing.
    pub fn reply_route(&mut self, wc: &Wc, grh: &[u8; GRH_LEN]) -> crate::prim::Result<(&Qp, &Ah)> {
        let attr = AhAttr::from_wc(self.pd.context(), self.port, wc, grh)?;
        let pd = &self.pd;
        let ah = self.ahs.get_or_try_insert(AhKey::of(&attr), || Ah::create(pd, &attr))?;
        Ok((&self.qp, ah))
    }

    /// Number of cached address handles (at most [`UdEndpoint::cache_capacity`]).
    pub fn cached(&self) -> usize {
        self.ahs.len()
    }

    /// Most address handles the cache keeps ([`UdOpts::ah_cache`]).
    pub fn cache_capacity(&self) -> usize {
        self.ahs.cap
    }

    /// Brings the QP back to RTS through RESET, as [`UdEndpoint::with_opts`]
    /// brought it up, after the device stopped it: some devices move a UD QP
    /// to the error state, or stop receiving, when a datagram is larger than
    /// its receive buffer (SoftRoCE does both, and any sender can cause it
    /// there: see [`UdEndpoint`] on receive sizes). Every
    /// posted receive and send is discarded: no completion comes for them,
    /// and the device no longer touches their buffers. Post receives again.
    pub fn recover(&mut self) -> crate::prim::Result<()> {
        self.qp.modify(&crate::prim::QpAttr::new(crate::prim::QpState::RESET))?;
        self.qp.bring_up_ud(self.port, 0, self.qkey, 0)
    }

    /// Drops every cached address handle (they are recreated on demand).
    pub fn clear_cache(&mut self) {
        self.ahs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prim::Gid;

    fn global(last: u8) -> AhAttr {
        let mut g = [0u8; 16];
        g[..2].copy_from_slice(&[0xfe, 0x80]);
        g[15] = last;
        AhAttr::global(1, 1, Gid(g))
    }

    #[test]
    fn regression_ud_reply_route_ah_cache_key_covers_every_field_the_ah_is_made_from() {
        let base = global(1);
        let k = AhKey::of(&base);
        assert_eq!(k, AhKey::of(&global(1)), "the same attributes, the same handle");
        // Two forged sources with the same GID, LID and SL that differ in one
        // field each: the old key (GID, LID, SL) gave them one handle.
        let variants = [
            ("traffic class", base.traffic_class(0x20)),
            ("flow label", base.flow_label(0x12345)),
            ("hop limit", base.hop_limit(7)),
            ("static rate", base.static_rate(3)),
            ("another GID", global(2)),
            ("service level", base.sl(3)),
            ("LID", base.dlid(9)),
        ];
        for (what, v) in variants {
            assert_ne!(AhKey::of(&v), k, "{what} makes another address handle");
        }
        let other_port = AhAttr::global(2, 1, global(1).dgid());
        assert_ne!(AhKey::of(&other_port), k, "another port");
        let other_sgid = AhAttr::global(1, 3, global(1).dgid());
        assert_ne!(AhKey::of(&other_sgid), k, "another source GID index");
    }

    #[test]
    fn regression_ud_reply_route_ah_cache_is_bounded_under_a_flood_of_sources() {
        let mut c: Lru<u32, u32> = Lru::new(64);
        let mut made = 0;
        for src in 0..10_000u32 {
            let v = *c
                .get_or_try_insert(src, || {
                    made += 1;
                    Ok::<_, ()>(src * 2)
                })
                .unwrap();
            assert_eq!(v, src * 2);
            assert!(c.len() <= 64, "after {src} sources the cache holds {}", c.len());
        }
        assert_eq!(c.len(), 64);
        assert_eq!(made, 10_000);
        // Least recently used goes first: a source used between the others stays.
        let mut c: Lru<u32, u32> = Lru::new(4);
        for k in 0..4 {
            c.get_or_try_insert(k, || Ok::<_, ()>(k)).unwrap();
        }
        c.get_or_try_insert(0, || -> Result<u32, ()> { panic!("0 is cached") }).unwrap();
        c.get_or_try_insert(4, || Ok::<_, ()>(4)).unwrap();
        assert!(c.map.contains_key(&0), "recently used: kept");
        assert!(!c.map.contains_key(&1), "least recently used: evicted");
        // A failed creation caches nothing and evicts nothing.
        assert_eq!(c.get_or_try_insert(9, || Err("no")), Err("no"));
        assert_eq!(c.len(), 4);
        assert!(!c.map.contains_key(&9));
    }

    #[test]
    #[should_panic(expected = "UdOpts::ah_cache must be at least 1")]
    fn an_empty_ah_cache_is_a_programming_error() {
        let _: Lru<u8, u8> = Lru::new(0);
    }
}
