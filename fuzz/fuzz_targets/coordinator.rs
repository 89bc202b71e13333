//! A coordinator fed arbitrary bytes on several connections (strangers and a
//! real member interleaved): it must never panic, and a stranger alone can
//! never make it fail the session or admit a rank without the secret.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rrddmma::ctrl::proto::{Coordinator, Event, Params};

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let p = Params::new(3)
        .secret(Some(b"fuzz".to_vec()))
        .max_frame(1 << 12)
        .handshake_timeout(Duration::from_secs(1))
        .max_pending(3);
    let mut c = Coordinator::new(p);
    c.expect_joins(t0, Duration::from_secs(60));
    // Chunks: first byte picks the connection (0..4) and an action.
    let mut accepted = [false; 4];
    // At most 1000 steps of 10 ms: well inside the join deadline.
    for (i, chunk) in data.chunks(17).take(1000).enumerate() {
        let conn = u64::from(chunk[0] % 4);
        let now = t0 + Duration::from_millis(i as u64 * 10);
        if !accepted[conn as usize] {
            accepted[conn as usize] = true;
            c.accept(conn, [chunk[0]; 16], now);
        }
        match chunk[0] >> 6 {
            0 => c.closed(conn),
            _ => c.receive(conn, &chunk[1..], now),
        }
        c.tick(now);
        while c.poll_output().is_some() {}
        while let Some(e) = c.poll_event() {
            // Without the secret nobody can join, so nothing can fail the session.
            assert!(!matches!(e, Event::Joined { .. } | Event::Failed(_)), "{e:?}");
        }
    }
});
