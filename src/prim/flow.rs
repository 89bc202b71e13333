//! Flow steering rules (`ibv_create_flow`): packets matching Ethernet,
//! IPv4, IPv6, UDP and TCP specs (values under masks) are steered to a QP,
//! counted by [`Counters`] when given.
//!
//! ConnectX Ethernet ports steer to raw packet QPs; a device without flow
//! steering (`IBV_DEVICE_MANAGED_FLOW_STEERING` unset: rxe, siw) refuses
//! with [`Error::Unsupported`] before the system call.

use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ptr::NonNull;

use super::counters::Counters;
use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::qp::Qp;
use super::rss::RssQp;
use crate::bindings as ffi;

/// Ethernet match fields (`struct ibv_flow_eth_filter`), host order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthFilter {
    /// Destination MAC address.
    pub dst_mac: [u8; 6],
    /// Source MAC address.
    pub src_mac: [u8; 6],
    /// EtherType.
    pub ether_type: u16,
    /// VLAN tag (TCI).
    pub vlan_tag: u16,
}

/// IPv4 match fields (`struct ibv_flow_ipv4_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Filter {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
}

impl Default for Ipv4Filter {
    fn default() -> Ipv4Filter {
        Ipv4Filter { src: Ipv4Addr::UNSPECIFIED, dst: Ipv4Addr::UNSPECIFIED }
    }
}

/// IPv6 match fields (`struct ibv_flow_ipv6_filter`), host order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Filter {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Next header (the L4 protocol).
    pub next_hdr: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Default for Ipv6Filter {
    fn default() -> Ipv6Filter {
        Ipv6Filter {
            src: Ipv6Addr::UNSPECIFIED,
            dst: Ipv6Addr::UNSPECIFIED,
            flow_label: 0,
            next_hdr: 0,
            traffic_class: 0,
            hop_limit: 0,
        }
    }
}

/// UDP or TCP port match fields (`struct ibv_flow_tcp_udp_filter`), host order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortFilter {
    /// Destination port.
    pub dst_port: u16,
    /// Source port.
    pub src_port: u16,
}

/// What a rule steers to: a raw packet [`Qp`] or an [`RssQp`].
pub trait FlowTarget: sealed::Target {}

mod sealed {
    use super::*;

    pub trait Target {
        fn raw_qp(&self) -> *mut ffi::ibv_qp;
        fn pd_context(&self) -> &Context;
    }

    impl Target for Qp {
        fn raw_qp(&self) -> *mut ffi::ibv_qp {
            self.as_ptr()
        }
        fn pd_context(&self) -> &Context {
            self.pd().context()
        }
    }

    impl Target for RssQp {
        fn raw_qp(&self) -> *mut ffi::ibv_qp {
            self.as_ptr()
        }
        fn pd_context(&self) -> &Context {
            self.pd().context()
        }
    }
}

impl FlowTarget for Qp {}
impl FlowTarget for RssQp {}

/// A steering rule on a QP. Destroyed on drop, before the QP it borrows
/// and before the counters it holds.
///
/// # References
/// `ibv_create_flow(3)`
pub struct Flow<'q> {
    flow: Owned<FlowData>,
    _qp: PhantomData<&'q ()>,
}

pub(crate) struct FlowData {
    counters: Option<Counters>,
}

// SAFETY: `ibv_destroy_flow` releases what `ibv_create_flow` made; the
// counters it counts into drop after it (a field of the data).
unsafe impl Destroy for FlowData {
    type Raw = ffi::ibv_flow;
    const VERB: &'static str = "ibv_destroy_flow";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_flow>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_flow(raw.as_ptr()) }
    }
}

impl fmt::Debug for Flow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flow").field("counted", &self.flow.counters.is_some()).finish()
    }
}

/// One spec of a rule, written after the attribute in [`FlowBuilder::build`].
#[derive(Clone, Copy)]
enum Spec {
    Eth(ffi::ibv_flow_spec_eth),
    Ipv4(ffi::ibv_flow_spec_ipv4),
    Ipv6(ffi::ibv_flow_spec_ipv6),
    TcpUdp(ffi::ibv_flow_spec_tcp_udp),
}

/// Builds a [`Flow`]: [`Flow::builder`].
#[must_use = "a builder does nothing until build"]
pub struct FlowBuilder<'q> {
    qp: *mut ffi::ibv_qp,
    ctx: &'q Context,
    port: u8,
    priority: u16,
    specs: Vec<Spec>,
    counters: Option<Counters>,
}

impl fmt::Debug for FlowBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowBuilder")
            // SAFETY: the target is borrowed for 'q: a live QP.
            .field("qpn", &unsafe { (*self.qp).qp_num })
            .field("port", &self.port)
            .field("priority", &self.priority)
            .field("specs", &self.specs.len())
            .finish()
    }
}

fn spec_len<T>() -> u16 {
    u16::try_from(size_of::<T>()).expect("flow specs are small")
}

impl<'q> Flow<'q> {
    /// A rule steering what arrives on `port` to `target` (a raw packet
    /// QP on ConnectX Ethernet ports, or an RSS QP): add match specs, then
    /// [`FlowBuilder::build`]. Priority 0 (the highest) unless told.
    pub fn builder<T: FlowTarget>(target: &'q T, port: u8) -> FlowBuilder<'q> {
        FlowBuilder {
            qp: target.raw_qp(),
            ctx: target.pd_context(),
            port,
            priority: 0,
            specs: Vec::new(),
            counters: None,
        }
    }

    /// The counters the rule counts into, if given ([`FlowBuilder::count`]).
    pub fn counters(&self) -> Option<&Counters> {
        self.flow.counters.as_ref()
    }

    /// The raw flow.
    pub fn as_ptr(&self) -> *mut ffi::ibv_flow {
        self.flow.as_ptr()
    }
}

impl<'q> FlowBuilder<'q> {
    /// The rule's priority (lower is matched first).
    pub fn priority(mut self, priority: u16) -> Self {
        self.priority = priority;
        self
    }

    /// Matches Ethernet fields: `val` where `mask` has bits set.
    pub fn eth(mut self, val: EthFilter, mask: EthFilter) -> Self {
        self.specs.push(eth_spec(val, mask));
        self
    }

    /// Matches IPv4 addresses: `val` where `mask` has bits set.
    pub fn ipv4(mut self, val: Ipv4Filter, mask: Ipv4Filter) -> Self {
        self.specs.push(ipv4_spec(val, mask));
        self
    }

    /// Matches IPv6 fields: `val` where `mask` has bits set.
    pub fn ipv6(mut self, val: Ipv6Filter, mask: Ipv6Filter) -> Self {
        self.specs.push(ipv6_spec(val, mask));
        self
    }

    /// Matches UDP ports: `val` where `mask` has bits set.
    pub fn udp(mut self, val: PortFilter, mask: PortFilter) -> Self {
        self.specs.push(port_spec(ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_UDP, val, mask));
        self
    }

    /// Matches TCP ports: `val` where `mask` has bits set.
    pub fn tcp(mut self, val: PortFilter, mask: PortFilter) -> Self {
        self.specs.push(port_spec(ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_TCP, val, mask));
        self
    }

    /// Counts what the rule matches into `counters` (attach its values
    /// first, [`Counters::attach`]); the flow holds them.
    pub fn count(mut self, counters: Counters) -> Self {
        self.counters = Some(counters);
        self
    }

    /// Creates the rule.
    ///
    /// [`Error::Unsupported`] before any system call where the device has
    /// no flow steering (`IBV_DEVICE_MANAGED_FLOW_STEERING` unset: rxe, siw).
    ///
    /// # Panics
    /// With more than 255 specs (a programming error).
    ///
    /// # References
    /// `ibv_create_flow(3)`
    #[doc(alias = "ibv_create_flow")]
    pub fn build(self) -> Result<Flow<'q>> {
        const OP: &str = "ibv_create_flow";
        let ctx = self.ctx;
        let caps = u64::from(ctx.query_device_ex()?.orig_attr.device_cap_flags);
        if caps & u64::from(ffi::ibv_device_cap_flags::IBV_DEVICE_MANAGED_FLOW_STEERING.0) == 0 {
            return Err(Error::unsupported(OP, &crate::prim::unsupported::RAW_FLOW, ctx.name(), "absent"));
        }
        let counters = self.counters.as_ref().map(Counters::as_ptr);
        let mut buf = assemble(self.port, self.priority, &self.specs, counters);
        // SAFETY: a live QP; the attribute is followed by its specs.
        let raw = unsafe { ffi::ibv_create_flow(self.qp, buf.as_mut_ptr().cast()) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last(OP).lacking(&crate::prim::unsupported::RAW_FLOW, ctx.name()))?;
        // SAFETY: made just now, owned by nothing else.
        let flow = unsafe { Owned::new(raw, FlowData { counters: self.counters }) };
        Ok(Flow { flow, _qp: PhantomData })
    }
}

fn eth_spec(val: EthFilter, mask: EthFilter) -> Spec {
    let f = |e: EthFilter| ffi::ibv_flow_eth_filter {
        dst_mac: e.dst_mac,
        src_mac: e.src_mac,
        ether_type: e.ether_type.to_be(),
        vlan_tag: e.vlan_tag.to_be(),
    };
    Spec::Eth(ffi::ibv_flow_spec_eth {
        type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_ETH,
        size: spec_len::<ffi::ibv_flow_spec_eth>(),
        val: f(val),
        mask: f(mask),
    })
}

fn ipv4_spec(val: Ipv4Filter, mask: Ipv4Filter) -> Spec {
    // Addresses in network order: the octets as they stand in memory.
    let f = |i: Ipv4Filter| ffi::ibv_flow_ipv4_filter {
        src_ip: u32::from_ne_bytes(i.src.octets()),
        dst_ip: u32::from_ne_bytes(i.dst.octets()),
    };
    Spec::Ipv4(ffi::ibv_flow_spec_ipv4 {
        type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_IPV4,
        size: spec_len::<ffi::ibv_flow_spec_ipv4>(),
        val: f(val),
        mask: f(mask),
    })
}

fn ipv6_spec(val: Ipv6Filter, mask: Ipv6Filter) -> Spec {
    let f = |i: Ipv6Filter| ffi::ibv_flow_ipv6_filter {
        src_ip: i.src.octets(),
        dst_ip: i.dst.octets(),
        flow_label: i.flow_label.to_be(),
        next_hdr: i.next_hdr,
        traffic_class: i.traffic_class,
        hop_limit: i.hop_limit,
    };
    Spec::Ipv6(ffi::ibv_flow_spec_ipv6 {
        type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_IPV6,
        size: spec_len::<ffi::ibv_flow_spec_ipv6>(),
        val: f(val),
        mask: f(mask),
    })
}

fn port_spec(kind: ffi::ibv_flow_spec_type, val: PortFilter, mask: PortFilter) -> Spec {
    let f = |p: PortFilter| ffi::ibv_flow_tcp_udp_filter { dst_port: p.dst_port.to_be(), src_port: p.src_port.to_be() };
    Spec::TcpUdp(ffi::ibv_flow_spec_tcp_udp {
        type_: kind,
        size: spec_len::<ffi::ibv_flow_spec_tcp_udp>(),
        val: f(val),
        mask: f(mask),
    })
}

/// The size of a spec.
fn spec_bytes(s: &Spec) -> usize {
    match s {
        Spec::Eth(_) => size_of::<ffi::ibv_flow_spec_eth>(),
        Spec::Ipv4(_) => size_of::<ffi::ibv_flow_spec_ipv4>(),
        Spec::Ipv6(_) => size_of::<ffi::ibv_flow_spec_ipv6>(),
        Spec::TcpUdp(_) => size_of::<ffi::ibv_flow_spec_tcp_udp>(),
    }
}

/// `struct ibv_flow_attr` followed by each spec right after the one before
/// (the provider walks them by their sizes), then the count action when
/// `counters` is given; in zeroed 8-byte words.
///
/// # Panics
/// With more than 255 specs (a programming error).
fn assemble(port: u8, priority: u16, specs: &[Spec], counters: Option<*mut ffi::ibv_counters>) -> Vec<u64> {
    let count = counters.map(|c| ffi::ibv_flow_spec_counter_action {
        type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_ACTION_COUNT,
        size: spec_len::<ffi::ibv_flow_spec_counter_action>(),
        counters: c,
    });
    let num = specs.len() + usize::from(count.is_some());
    let num_of_specs = u8::try_from(num).expect("Flow::builder: more than 255 specs in one rule");
    let total = size_of::<ffi::ibv_flow_attr>()
        + specs.iter().map(spec_bytes).sum::<usize>()
        + count.map_or(0, |_| size_of::<ffi::ibv_flow_spec_counter_action>());
    let mut buf = vec![0u64; total.div_ceil(8)];
    let base = buf.as_mut_ptr().cast::<u8>();
    let attr = ffi::ibv_flow_attr {
        comp_mask: 0,
        type_: ffi::ibv_flow_attr_type::IBV_FLOW_ATTR_NORMAL,
        size: u16::try_from(total).expect("a flow rule of at most 255 small specs"),
        priority,
        num_of_specs,
        port,
        flags: 0,
    };
    // SAFETY: `buf` holds `total` bytes: the attribute at 0 and each spec
    // at the running offset, all inside; unaligned writes.
    unsafe {
        std::ptr::write_unaligned(base.cast::<ffi::ibv_flow_attr>(), attr);
        let mut at = size_of::<ffi::ibv_flow_attr>();
        for s in specs {
            match *s {
                Spec::Eth(e) => std::ptr::write_unaligned(base.add(at).cast(), e),
                Spec::Ipv4(i) => std::ptr::write_unaligned(base.add(at).cast(), i),
                Spec::Ipv6(i) => std::ptr::write_unaligned(base.add(at).cast(), i),
                Spec::TcpUdp(p) => std::ptr::write_unaligned(base.add(at).cast(), p),
            }
            at += spec_bytes(s);
        }
        if let Some(c) = count {
            std::ptr::write_unaligned(base.add(at).cast(), c);
        }
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a `T` at byte `at` of the assembled words.
    fn at<T: Copy>(buf: &[u64], at: usize) -> T {
        assert!(at + size_of::<T>() <= buf.len() * 8);
        // SAFETY: inside `buf`, and every `T` read here is plain integers
        // (or a pointer) for which any bytes are a value.
        unsafe { std::ptr::read_unaligned(buf.as_ptr().cast::<u8>().add(at).cast::<T>()) }
    }

    #[test]
    fn rule_is_the_attribute_then_each_spec_then_the_count() {
        let specs = [
            eth_spec(
                EthFilter { dst_mac: [2, 0, 0, 0, 0, 1], ether_type: 0x0800, ..Default::default() },
                EthFilter { dst_mac: [0xff; 6], ether_type: 0xffff, ..Default::default() },
            ),
            ipv4_spec(
                Ipv4Filter { dst: Ipv4Addr::new(10, 0, 0, 1), ..Default::default() },
                Ipv4Filter { dst: Ipv4Addr::BROADCAST, ..Default::default() },
            ),
            port_spec(
                ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_UDP,
                PortFilter { dst_port: 4791, src_port: 0 },
                PortFilter { dst_port: 0xffff, src_port: 0 },
            ),
        ];
        let counters = 0x1000 as *mut ffi::ibv_counters;
        let buf = assemble(1, 3, &specs, Some(counters));
        let a: ffi::ibv_flow_attr = at(&buf, 0);
        let (eth, ip, udp, cnt) = (
            size_of::<ffi::ibv_flow_spec_eth>(),
            size_of::<ffi::ibv_flow_spec_ipv4>(),
            size_of::<ffi::ibv_flow_spec_tcp_udp>(),
            size_of::<ffi::ibv_flow_spec_counter_action>(),
        );
        let hdr = size_of::<ffi::ibv_flow_attr>();
        assert_eq!(usize::from(a.size), hdr + eth + ip + udp + cnt);
        assert_eq!((a.num_of_specs, a.port, a.priority), (4, 1, 3));
        assert_eq!(a.type_, ffi::ibv_flow_attr_type::IBV_FLOW_ATTR_NORMAL);
        let e: ffi::ibv_flow_spec_eth = at(&buf, hdr);
        assert_eq!((e.type_, usize::from(e.size)), (ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_ETH, eth));
        assert_eq!(e.val.dst_mac, [2, 0, 0, 0, 0, 1]);
        // EtherType big-endian in memory.
        assert_eq!(e.val.ether_type.to_ne_bytes(), [0x08, 0x00]);
        assert_eq!(e.mask.ether_type, 0xffff);
        let i: ffi::ibv_flow_spec_ipv4 = at(&buf, hdr + eth);
        assert_eq!((i.type_, usize::from(i.size)), (ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_IPV4, ip));
        assert_eq!(i.val.dst_ip.to_ne_bytes(), [10, 0, 0, 1]);
        assert_eq!((i.val.src_ip, i.mask.src_ip, i.mask.dst_ip), (0, 0, u32::MAX));
        let u: ffi::ibv_flow_spec_tcp_udp = at(&buf, hdr + eth + ip);
        assert_eq!((u.type_, usize::from(u.size)), (ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_UDP, udp));
        assert_eq!(u.val.dst_port.to_ne_bytes(), 4791u16.to_be_bytes());
        let c: ffi::ibv_flow_spec_counter_action = at(&buf, hdr + eth + ip + udp);
        assert_eq!((c.type_, usize::from(c.size)), (ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_ACTION_COUNT, cnt));
        assert_eq!(c.counters, counters);
    }

    #[test]
    fn ipv6_and_tcp_specs_keep_network_order() {
        let v = Ipv6Filter { dst: Ipv6Addr::LOCALHOST, flow_label: 0x12345, next_hdr: 6, ..Default::default() };
        let buf = assemble(
            2,
            0,
            &[
                ipv6_spec(v, v),
                port_spec(
                    ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_TCP,
                    PortFilter { dst_port: 80, src_port: 1234 },
                    PortFilter { dst_port: 0xffff, src_port: 0xffff },
                ),
            ],
            None,
        );
        let hdr = size_of::<ffi::ibv_flow_attr>();
        let a: ffi::ibv_flow_attr = at(&buf, 0);
        assert_eq!(a.num_of_specs, 2);
        let s: ffi::ibv_flow_spec_ipv6 = at(&buf, hdr);
        assert_eq!(s.type_, ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_IPV6);
        assert_eq!(s.val.dst_ip, Ipv6Addr::LOCALHOST.octets());
        assert_eq!(s.val.flow_label.to_ne_bytes(), 0x12345u32.to_be_bytes());
        assert_eq!(s.val.next_hdr, 6);
        let t: ffi::ibv_flow_spec_tcp_udp = at(&buf, hdr + size_of::<ffi::ibv_flow_spec_ipv6>());
        assert_eq!(t.type_, ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_TCP);
        assert_eq!(t.val.src_port.to_ne_bytes(), 1234u16.to_be_bytes());
    }
}
