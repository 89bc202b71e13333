//! The hostile-peer suite: each test plays a peer we do not control against
//! one of our servers (an aio endpoint, a `ctrl` coordinator, the
//! `rrddmma-perf` server, a `UdEndpoint`), tries one attack, and asserts what
//! the victim does. Every test prints its row of the table `cargo xtask
//! test` shows (attack, victim, outcome); the aio fault table is printed the
//! same way. Ignored unless run with `--ignored` on the device
//! `RRDDMMA_TEST_DEVICE` names; run with `--nocapture` to see the rows.

mod table;

mod aio;
mod ctrl;
mod perf;
mod ud;
