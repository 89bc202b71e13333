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
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::qp::Qp;
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

/// A steering rule on a QP. Destroyed on drop, before the QP it borrows
/// and before the counters it holds.
///
/// # References
/// `ibv_create_flow(3)`
pub struct Flow<'q> {
    flow: Owned<FlowData>,
    _qp: PhantomData<&'q Qp>,
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
    qp: &'q Qp,
    port: u8,
    priority: u16,
    specs: Vec<Spec>,
    counters: Option<Counters>,
}

impl fmt::Debug for FlowBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowBuilder")
            .field("qpn", &self.qp.qpn())
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
    /// A rule steering what arrives on `port` to `qp` (a raw packet QP on
    /// ConnectX Ethernet ports): add match specs, then
    /// [`FlowBuilder::build`]. Priority 0 (the highest) unless told.
    pub fn builder(qp: &'q Qp, port: u8) -> FlowBuilder<'q> {
        FlowBuilder { qp, port, priority: 0, specs: Vec::new(), counters: None }
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
        let f = |e: EthFilter| ffi::ibv_flow_eth_filter {
            dst_mac: e.dst_mac,
            src_mac: e.src_mac,
            ether_type: e.ether_type.to_be(),
            vlan_tag: e.vlan_tag.to_be(),
        };
        self.specs.push(Spec::Eth(ffi::ibv_flow_spec_eth {
            type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_ETH,
            size: spec_len::<ffi::ibv_flow_spec_eth>(),
            val: f(val),
            mask: f(mask),
        }));
        self
    }

    /// Matches IPv4 addresses: `val` where `mask` has bits set.
    pub fn ipv4(mut self, val: Ipv4Filter, mask: Ipv4Filter) -> Self {
        let f = |i: Ipv4Filter| ffi::ibv_flow_ipv4_filter {
            src_ip: u32::from_ne_bytes(i.src.octets()),
            dst_ip: u32::from_ne_bytes(i.dst.octets()),
        };
        self.specs.push(Spec::Ipv4(ffi::ibv_flow_spec_ipv4 {
            type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_IPV4,
            size: spec_len::<ffi::ibv_flow_spec_ipv4>(),
            val: f(val),
            mask: f(mask),
        }));
        self
    }

    /// Matches IPv6 fields: `val` where `mask` has bits set.
    pub fn ipv6(mut self, val: Ipv6Filter, mask: Ipv6Filter) -> Self {
        let f = |i: Ipv6Filter| ffi::ibv_flow_ipv6_filter {
            src_ip: i.src.octets(),
            dst_ip: i.dst.octets(),
            flow_label: i.flow_label.to_be(),
            next_hdr: i.next_hdr,
            traffic_class: i.traffic_class,
            hop_limit: i.hop_limit,
        };
        self.specs.push(Spec::Ipv6(ffi::ibv_flow_spec_ipv6 {
            type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_IPV6,
            size: spec_len::<ffi::ibv_flow_spec_ipv6>(),
            val: f(val),
            mask: f(mask),
        }));
        self
    }

    fn ports(mut self, kind: ffi::ibv_flow_spec_type, val: PortFilter, mask: PortFilter) -> Self {
        let f =
            |p: PortFilter| ffi::ibv_flow_tcp_udp_filter { dst_port: p.dst_port.to_be(), src_port: p.src_port.to_be() };
        self.specs.push(Spec::TcpUdp(ffi::ibv_flow_spec_tcp_udp {
            type_: kind,
            size: spec_len::<ffi::ibv_flow_spec_tcp_udp>(),
            val: f(val),
            mask: f(mask),
        }));
        self
    }

    /// Matches UDP ports: `val` where `mask` has bits set.
    pub fn udp(self, val: PortFilter, mask: PortFilter) -> Self {
        self.ports(ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_UDP, val, mask)
    }

    /// Matches TCP ports: `val` where `mask` has bits set.
    pub fn tcp(self, val: PortFilter, mask: PortFilter) -> Self {
        self.ports(ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_TCP, val, mask)
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
        let ctx = self.qp.pd().context();
        let caps = u64::from(ctx.query_device_ex()?.orig_attr.device_cap_flags);
        if caps & u64::from(ffi::ibv_device_cap_flags::IBV_DEVICE_MANAGED_FLOW_STEERING.0) == 0 {
            return Err(Error::Unsupported {
                op: OP,
                feature: "flow steering (ibv_create_flow): the device reports no IBV_DEVICE_MANAGED_FLOW_STEERING",
            });
        }
        let count = self.counters.as_ref().map(|c| ffi::ibv_flow_spec_counter_action {
            type_: ffi::ibv_flow_spec_type::IBV_FLOW_SPEC_ACTION_COUNT,
            size: spec_len::<ffi::ibv_flow_spec_counter_action>(),
            counters: c.as_ptr(),
        });
        let num = self.specs.len() + usize::from(count.is_some());
        let num_of_specs = u8::try_from(num).expect("Flow::builder: more than 255 specs in one rule");
        let spec_bytes = |s: &Spec| match s {
            Spec::Eth(_) => size_of::<ffi::ibv_flow_spec_eth>(),
            Spec::Ipv4(_) => size_of::<ffi::ibv_flow_spec_ipv4>(),
            Spec::Ipv6(_) => size_of::<ffi::ibv_flow_spec_ipv6>(),
            Spec::TcpUdp(_) => size_of::<ffi::ibv_flow_spec_tcp_udp>(),
        };
        let total = size_of::<ffi::ibv_flow_attr>()
            + self.specs.iter().map(spec_bytes).sum::<usize>()
            + count.map_or(0, |_| size_of::<ffi::ibv_flow_spec_counter_action>());
        // The attribute, then each spec right after the one before (the
        // provider walks them by their sizes); 8-byte words, zeroed.
        let mut buf = vec![0u64; total.div_ceil(8)];
        let base = buf.as_mut_ptr().cast::<u8>();
        let attr = ffi::ibv_flow_attr {
            comp_mask: 0,
            type_: ffi::ibv_flow_attr_type::IBV_FLOW_ATTR_NORMAL,
            size: u16::try_from(total).expect("a flow rule of at most 255 small specs"),
            priority: self.priority,
            num_of_specs,
            port: self.port,
            flags: 0,
        };
        // SAFETY: `buf` holds `total` bytes: the attribute at 0 and each
        // spec at the running offset, all inside; unaligned writes.
        unsafe {
            std::ptr::write_unaligned(base.cast::<ffi::ibv_flow_attr>(), attr);
            let mut at = size_of::<ffi::ibv_flow_attr>();
            for s in &self.specs {
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
        // SAFETY: a live QP; the attribute is followed by its specs.
        let raw = unsafe { ffi::ibv_create_flow(self.qp.as_ptr(), base.cast()) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last(OP).lacking("flow steering"))?;
        // SAFETY: made just now, owned by nothing else.
        let flow = unsafe { Owned::new(raw, FlowData { counters: self.counters }) };
        Ok(Flow { flow, _qp: PhantomData })
    }
}
