//! Hostile-peer tests against the ctrl victim.
