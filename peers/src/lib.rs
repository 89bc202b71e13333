//! Shared parts of the peer benchmarks.
