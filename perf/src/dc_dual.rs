//! `-c DC` where each side both sends and receives: the latency tests and
//! `-b`. As perftest does for `-c DC` with a latency test or `--bidirectional`
//! (its QP count doubled), each side makes `q` DC initiators *and* `q` DC
//! targets and announces `2q` destinations: the initiators' QP numbers
//! first, then the targets' DCT numbers, each with a region of its own.
//! Initiator `i` sends to the peer's target `i` (destination `q + i`), at
//! that destination's address; what the peer sends lands in this side's
//! region `q + i`.

use crate::args::{Conn, Opts, Test};

/// Whether a `-c DC` run makes both kinds on each side.
pub(crate) fn dual(o: &Opts) -> bool {
    o.conn == Conn::Dc && (o.test == Test::Lat || o.bidir)
}

/// Which kinds this side makes: (initiators, targets).
pub(crate) fn kinds(o: &Opts, requester: bool) -> (bool, bool) {
    if dual(o) {
        (true, true)
    } else {
        (requester, !requester)
    }
}

/// The destination (and region) index of stream `i`'s peer side: with
/// `regions` destinations announced for `streams` streams, the peer's
/// target `i` sits after the `regions - streams` initiators.
pub(crate) const fn peer_of(i: usize, regions: usize, streams: usize) -> usize {
    i + (regions - streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dual_runs_are_latency_and_bidirectional_dc_only() {
        let p = |s: &str| crate::args::parse(s.split_whitespace()).unwrap();
        assert!(dual(&p("write lat -c DC")));
        assert!(dual(&p("send lat -c DC")));
        assert!(dual(&p("write bw -c DC -b")));
        assert!(!dual(&p("write bw -c DC")));
        assert!(!dual(&p("write lat")));
        assert_eq!(kinds(&p("write bw -c DC"), true), (true, false));
        assert_eq!(kinds(&p("write bw -c DC"), false), (false, true));
        assert_eq!(kinds(&p("read lat -c DC"), false), (true, true));
    }

    /// perftest's layout: destination `q + i` is the peer's target `i`
    /// (its `xrc_offset`), region `q + i` where the peer's initiator `i`
    /// writes (its write latency polls the region after its first:
    /// `poll_buf_offset` 1 with one QP).
    #[test]
    fn initiator_i_addresses_destination_q_plus_i() {
        assert_eq!(peer_of(0, 2, 1), 1);
        assert_eq!((0..3).map(|i| peer_of(i, 6, 3)).collect::<Vec<_>>(), [3, 4, 5]);
        // One role per side: the same index.
        assert_eq!(peer_of(2, 4, 4), 2);
    }
}
