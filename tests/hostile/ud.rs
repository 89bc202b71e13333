//! Hostile-peer tests against the ud victim: a [`UdEndpoint`] server that
//! answers whoever sent (`reply_route`). Anyone who knows its QPN and Q_Key
//! can send to it, from any source address (on RoCE the GRH is the IP
//! header, which the sender writes).

use std::time::{Duration, Instant};

use rrddmma::prim::{Context, Cq, Mtu, Pd, RecvWr, SendWr, Wc, WcOpcode, WcStatus, GRH_LEN};
use rrddmma::wrap::{RegisteredMem, UdEndpoint, UdOpts};

use crate::table;

/// Bytes of payload per datagram; a receive slot is `GRH_LEN + MSG`.
const MSG: usize = 64;
const SLOT: usize = GRH_LEN + MSG;

fn poll(cq: &Cq, deadline: Duration) -> Option<Wc> {
    let end = Instant::now() + deadline;
    let mut wc = [Wc::default()];
    while Instant::now() < end {
        if cq.poll(&mut wc).expect("ibv_poll_cq") == 1 {
            return Some(wc[0]);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    None
}

/// A victim endpoint (cache bounded at `cap`) and an attacker endpoint on
/// its own PD, with memory for each.
struct Pair {
    victim: UdEndpoint,
    vcq: Cq,
    vmem: RegisteredMem,
    attacker: UdEndpoint,
    acq: Cq,
    amem: RegisteredMem,
}

impl Pair {
    fn new(ctx: &Context, cap: usize) -> Pair {
        let (vpd, apd) = (Pd::alloc(ctx).unwrap(), Pd::alloc(ctx).unwrap());
        let (vcq, acq) = (Cq::create(ctx, 256).unwrap(), Cq::create(ctx, 256).unwrap());
        let victim = UdEndpoint::with_opts(&vpd, &vcq, &vcq, &UdOpts::default().ah_cache(cap)).unwrap();
        let attacker = UdEndpoint::with_opts(&apd, &acq, &acq, &UdOpts::default()).unwrap();
        let vmem = RegisteredMem::new(&vpd, 64 * SLOT + 4096).unwrap();
        let amem = RegisteredMem::new(&apd, 4096).unwrap();
        Pair { victim, vcq, vmem, attacker, acq, amem }
    }

    /// Posts the victim's receive into slot `i`.
    fn post_recv(&self, i: usize) {
        let s = [self.vmem.sge(i * SLOT..(i + 1) * SLOT)];
        // SAFETY: `vmem` outlives every completion polled from `vcq`.
        unsafe { self.victim.qp().post_recv(&mut [RecvWr::new(&s, i as u64)]) }.unwrap();
    }

    /// The attacker sends `MSG` bytes of `fill` to the victim with traffic
    /// class `tc`; returns the victim's receive completion and the GRH.
    fn datagram(&mut self, slot: usize, fill: u8, tc: u8) -> (Wc, [u8; GRH_LEN]) {
        self.post_recv(slot);
        let to = self.victim.info(Mtu::MTU_1024).unwrap();
        let attr = to.ah_attr(1, self.attacker.gid_index()).traffic_class(tc);
        let ah = rrddmma::prim::Ah::create(self.attacker.qp().pd(), &attr).unwrap();
        self.amem.write(0, &[fill; MSG]);
        let s = [self.amem.sge(0..MSG)];
        // SAFETY: `amem` and `ah` outlive the send's completion, polled below.
        unsafe { self.attacker.qp().post_send(&mut [SendWr::send(&s).ud(&ah, to.qpn, self.victim.qkey()).signaled()]) }
            .unwrap();
        let sent = poll(&self.acq, Duration::from_secs(10)).expect("the attacker's send completes");
        assert_eq!(sent.status(), WcStatus::SUCCESS, "{sent:?}");
        let wc = poll(&self.vcq, Duration::from_secs(10)).expect("the victim receives the datagram");
        assert_eq!((wc.status(), wc.opcode()), (WcStatus::SUCCESS, WcOpcode::RECV), "{wc:?}");
        let mut grh = [0u8; GRH_LEN];
        self.vmem.read(slot * SLOT, &mut grh);
        (wc, grh)
    }

    /// Whether a genuine datagram posted to slot `slot` arrives within 3 s
    /// (the attacker's send completes either way).
    fn try_datagram(&mut self, slot: usize, fill: u8) -> bool {
        self.post_recv(slot);
        let to = self.victim.info(Mtu::MTU_1024).unwrap();
        let ah = rrddmma::prim::Ah::create(self.attacker.qp().pd(), &to.ah_attr(1, self.attacker.gid_index())).unwrap();
        self.amem.write(0, &[fill; MSG]);
        let s = [self.amem.sge(0..MSG)];
        // SAFETY: `amem` and `ah` outlive the send's completion, polled below.
        unsafe { self.attacker.qp().post_send(&mut [SendWr::send(&s).ud(&ah, to.qpn, self.victim.qkey()).signaled()]) }
            .unwrap();
        poll(&self.acq, Duration::from_secs(10)).expect("the attacker's send completes");
        matches!(poll(&self.vcq, Duration::from_secs(3)), Some(wc) if wc.status() == WcStatus::SUCCESS)
    }

    /// The victim answers `wc`'s sender through `reply_route` with `fill`;
    /// returns whether the attacker (the real sender) got it.
    fn reply(&mut self, wc: &Wc, grh: &[u8; GRH_LEN], fill: u8) -> bool {
        let a = [self.amem.sge(1024..1024 + SLOT)];
        // SAFETY: `amem` outlives the completion polled below.
        unsafe { self.attacker.qp().post_recv(&mut [RecvWr::new(&a, 7)]) }.unwrap();
        let base = 40 * SLOT;
        self.vmem.write(base, &[fill; MSG]);
        let s = [self.vmem.sge(base..base + MSG)];
        let qkey = self.victim.qkey();
        let (qp, ah) = self.victim.reply_route(wc, grh).expect("a route back to a genuine sender");
        let ah = ah.clone();
        // SAFETY: `vmem` and the clone of the handle outlive the completion.
        unsafe { qp.post_send(&mut [SendWr::send(&s).ud(&ah, wc.src_qp(), qkey).signaled()]) }.unwrap();
        let sent = poll(&self.vcq, Duration::from_secs(10)).expect("the reply's send completes");
        assert_eq!(sent.status(), WcStatus::SUCCESS, "{sent:?}");
        let Some(got) = poll(&self.acq, Duration::from_secs(5)) else { return false };
        let mut body = [0u8; MSG];
        self.amem.read(1024 + GRH_LEN, &mut body);
        got.status() == WcStatus::SUCCESS && body == [fill; MSG]
    }
}

fn device() -> Context {
    let name = table::device();
    Context::open(&name).unwrap_or_else(|e| panic!("device {name:?} promised by RRDDMMA_TEST_DEVICE: {e}"))
}

/// The IPv4 header of a RoCE v2 GRH (bytes 20..40), or `None` for an IPv6 one.
fn is_ipv4(grh: &[u8; GRH_LEN]) -> bool {
    grh[0] >> 4 != 6 && grh[20] >> 4 == 4
}

/// `grh` as if sent with traffic class `tc`: the IPv4 TOS (checksum
/// recomputed) or the IPv6 traffic class.
fn with_tc(grh: &[u8; GRH_LEN], tc: u8) -> [u8; GRH_LEN] {
    let mut g = *grh;
    if is_ipv4(&g) {
        g[21] = tc;
        g[30] = 0;
        g[31] = 0;
        let sum: u32 = g[20..40].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        let c = !(((folded & 0xffff) + (folded >> 16)) as u16);
        g[30..32].copy_from_slice(&c.to_be_bytes());
    } else {
        let w = u32::from_be_bytes([g[0], g[1], g[2], g[3]]);
        let w = (w & !(0xff << 20)) | (u32::from(tc) << 20);
        g[0..4].copy_from_slice(&w.to_be_bytes());
    }
    g
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_ud_reply_route_cache_stays_bounded_under_a_flood_of_sources() {
    let ctx = device();
    let before = table::own_kernel_objects();
    let cap = 16;
    let mut p = Pair::new(&ctx, cap);
    // 64 sources that the old key (GID, LID, SL) took for one: every DSCP
    // value, sent for real with that traffic class.
    let mut distinct = std::collections::HashSet::new();
    let mut first = None;
    for (i, dscp) in (0..64u8).enumerate() {
        let (wc, grh) = p.datagram(i % 32, dscp, dscp << 2);
        distinct.insert(if is_ipv4(&grh) {
            grh[21]
        } else {
            (u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]) >> 20) as u8
        });
        p.victim.reply_route(&wc, &grh).unwrap();
        assert!(p.victim.cached() <= cap, "after {} sources the cache holds {}", i + 1, p.victim.cached());
        first.get_or_insert((wc, grh));
    }
    assert_eq!(distinct.len(), 64, "the device carried each traffic class in the header");
    assert_eq!(p.victim.cached(), cap, "full, not larger");
    // The legitimate sender is still answered, with its own traffic class.
    let (wc, grh) = first.unwrap();
    assert!(p.reply(&wc, &grh, 0x5a), "the reply reaches the genuine sender");
    drop(p);
    assert_eq!(table::own_kernel_objects(), before, "qp, cq, mr, pd of this process after the endpoints are gone");
    table::hostile(
        "64 sources differing only in traffic class (cache bound 16)",
        "UdEndpoint::reply_route",
        "cache held at 16 handles (least recently used out); the genuine sender still answered; 0 kernel objects left",
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_ud_reply_route_two_sources_differing_only_in_traffic_class_get_their_own_handles() {
    let ctx = device();
    let mut p = Pair::new(&ctx, 8);
    let (wc, grh) = p.datagram(0, 1, 0);
    let (wc2, grh2) = p.datagram(1, 2, 0x20 << 2);
    assert_eq!(wc.src_qp(), wc2.src_qp());
    let a = p.victim.reply_route(&wc, &grh).unwrap().1.as_ptr();
    let b = p.victim.reply_route(&wc2, &grh2).unwrap().1.as_ptr();
    assert_ne!(a, b, "another traffic class, another address handle (the old key gave the first one's)");
    assert_eq!(p.victim.cached(), 2);
    let again = p.victim.reply_route(&wc, &grh).unwrap().1.as_ptr();
    assert_eq!(again, a, "the same source hits its cached handle");
    // The same, from a GRH forged offline from the genuine one.
    p.victim.clear_cache();
    let c = p.victim.reply_route(&wc, &with_tc(&grh, 0x40)).unwrap().1.as_ptr();
    let d = p.victim.reply_route(&wc, &grh).unwrap().1.as_ptr();
    assert_ne!(c, d);
    assert_eq!(p.victim.cached(), 2);
    table::hostile(
        "two sources with one GID, LID and SL, other traffic class",
        "UdEndpoint::reply_route",
        "two address handles, each with its own traffic class (the old key answered both with the first)",
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn ud_bad_grh_and_forged_source_get_an_error_or_their_own_route() {
    let ctx = device();
    let mut p = Pair::new(&ctx, 8);
    let (wc, grh) = p.datagram(0, 3, 0);
    // Headers that are neither IPv6 nor a checksummed IPv4 header.
    for bad in [[0u8; GRH_LEN], [0xffu8; GRH_LEN]] {
        let r = p.victim.reply_route(&wc, &bad).map(|_| ());
        let e = r.expect_err("a GRH that is no IP header gives no route");
        assert!(e.to_string().contains("ibv_init_ah_from_wc"), "names the call: {e}");
        assert_eq!(p.victim.cached(), 0, "nothing cached for a bad header");
    }
    // A forged source (another host's address in the header): the victim
    // answers the forged address, in a handle of its own, and the genuine
    // sender keeps its own route.
    let mut forged = grh;
    if is_ipv4(&forged) {
        forged[20 + 12..20 + 16].copy_from_slice(&[10, 77, 0, 2]);
        forged = with_tc(&forged, 0);
    } else {
        forged[8 + 15] ^= 1;
    }
    let f = p.victim.reply_route(&wc, &forged).map(|(_, ah)| ah.as_ptr());
    assert!(p.reply(&wc, &grh, 0x33), "the genuine sender is still answered");
    let genuine = p.victim.reply_route(&wc, &grh).unwrap().1.as_ptr();
    if let Ok(f) = f {
        assert_ne!(f, genuine, "a forged source never shares the genuine sender's handle");
    }
    assert!(p.victim.cached() <= 2);
    let forged_outcome = match f {
        Ok(_) => "a forged source gets a handle of its own (UD does not authenticate sources)",
        Err(_) => "a forged source that does not resolve gives Err",
    };
    table::hostile(
        "bad GRH (zeros, 0xff) and a forged source address",
        "UdEndpoint::reply_route",
        &format!(
            "typed Err naming ibv_init_ah_from_wc, nothing cached; {forged_outcome}; the genuine sender still answered"
        ),
    );
}

/// The attacker sends `send` bytes against a victim receive of `GRH_LEN +
/// room` bytes at `at` (canaries around it); asserts nothing outside the
/// receive changed and that the genuine sender is served afterwards
/// (through [`UdEndpoint::recover`] when the device stopped the QP).
/// Returns the outcome text.
fn overflow(p: &mut Pair, at: usize, room: usize, send: usize) -> String {
    let len = GRH_LEN + room;
    let canary = vec![0xc5u8; len + 512];
    p.vmem.write(at, &canary);
    let r = [p.vmem.sge(at..at + len)];
    // SAFETY: `vmem` outlives the completion (or the reset that discards it).
    unsafe { p.victim.qp().post_recv(&mut [RecvWr::new(&r, 99)]) }.unwrap();
    let to = p.victim.info(Mtu::MTU_1024).unwrap();
    let ah = rrddmma::prim::Ah::create(p.attacker.qp().pd(), &to.ah_attr(1, p.attacker.gid_index())).unwrap();
    let mut amem = RegisteredMem::new(p.attacker.qp().pd(), send).unwrap();
    amem.write(0, &vec![0x77; send]);
    let s = [amem.sge(0..send)];
    // SAFETY: `amem` and `ah` outlive the completion polled below.
    let posted =
        unsafe { p.attacker.qp().post_send(&mut [SendWr::send(&s).ud(&ah, to.qpn, p.victim.qkey()).signaled()]) };
    let at_sender = match posted {
        Err(e) => Some(format!("refused at the sender's post ({e})")),
        Ok(()) => match poll(&p.acq, Duration::from_secs(10)).expect("the attacker's send completes") {
            wc if wc.status() == WcStatus::SUCCESS => None,
            wc => Some(format!("failed at the sender ({:?})", wc.status())),
        },
    };
    let got = poll(&p.vcq, Duration::from_secs(2));
    if let Some(wc) = &got {
        assert_ne!(wc.status(), WcStatus::SUCCESS, "{send} bytes do not fit {room}: {wc:?}");
    }
    let mut after = vec![0u8; len + 512];
    p.vmem.read(at, &mut after);
    assert_eq!(&after[len..], &canary[len..], "no byte past the posted receive changed");
    // Does the endpoint still receive? Some devices stop the QP here.
    let state = p.victim.qp().query_state().unwrap();
    let still = p.try_datagram(2, 0x42);
    let after = if still {
        format!("QP still {state:?}, next sender served")
    } else {
        // Drain what the stopped QP left, then bring it back.
        while poll(&p.vcq, Duration::from_millis(200)).is_some() {}
        p.victim.recover().expect("UdEndpoint::recover brings the QP back to RTS");
        format!("the device stopped the QP ({state:?}); UdEndpoint::recover brought it back")
    };
    let (wc, grh) = p.datagram(3, 0x44, 0);
    assert!(p.reply(&wc, &grh, 0x43), "the genuine sender is answered afterwards");
    let seen = match (at_sender, got) {
        (Some(why), None) => why,
        (Some(why), Some(wc)) => format!("{why}, yet the receive completed with {:?}", wc.status()),
        (None, Some(wc)) => format!("sent; the receive completed with {:?}", wc.status()),
        (None, None) => "sent; dropped at the victim".to_string(),
    };
    format!("{seen}; 0 bytes past the receive changed; {after}")
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_ud_datagram_larger_than_the_receive_stops_the_qp_until_recover() {
    let ctx = device();
    let mut p = Pair::new(&ctx, 8);
    let outcome = overflow(&mut p, 0, 16, 512);
    table::hostile("512-byte datagram against a 16-byte receive", "UdEndpoint", &outcome);
    // Receives of GRH_LEN + the path MTU: a UD message is at most one MTU
    // where the sender's device enforces it.
    let mtu = (ctx.query_port(1).unwrap().active_mtu().bytes() as usize).min(4096);
    let outcome = overflow(&mut p, 48 * SLOT, mtu, mtu + 1);
    table::hostile(
        &format!("{}-byte datagram against a GRH_LEN + MTU ({mtu}) receive", mtu + 1),
        "UdEndpoint",
        &outcome,
    );
}
