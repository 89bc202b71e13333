//! Hostile-peer tests against the ud victim.
