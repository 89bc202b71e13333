//! Hostile-peer tests against the aio victim.
