//! Hostile-peer tests against the perf victim.
