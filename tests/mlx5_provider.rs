//! rrddmma's mlx5 data path against libmlx5's own code, on ordinary memory.
//!
//! The C half (tests/provider/mlx5_provider.c) is compiled against the mlx5
//! provider's internal headers of the pinned rdma-core v59 tree and linked
//! with the provider's static archive: it builds provider objects by hand
//! (`mlx5_context`, `mlx5_qp`, `mlx5_cq`, `mlx5_bf`) whose queues, doorbell
//! records and BlueFlame page are malloc'd memory, drives random request
//! lists through `mlx5_post_send` and random CQEs through `mlx5_poll_cq`, and
//! prints inputs and results. This side replays the same inputs through
//! `SqRing` and `CqRing` on a second set of buffers and compares: WQE bytes,
//! producer index, doorbell record, the doorbell or BlueFlame write and the
//! BlueFlame offset; every `ibv_wc` field our decoder reports. Masked bytes
//! have their reason beside the mask (tests/provider/send.rs).
//!
//! The tests need the rdma-core v59 source, cmake, ninja and a C compiler;
//! `cargo xtask test` provides the source and runs them (`--ignored`).
//! docs/testing.md ("The libmlx5 differential harness") explains the build.

#[path = "provider/build.rs"]
mod build;
#[path = "provider/masked.rs"]
mod masked;
mod mlx5_support;
#[path = "provider/recv.rs"]
mod recv;
#[path = "provider/send.rs"]
mod send;
#[path = "provider/zip.rs"]
mod zip;

use std::fmt;

/// A mutation of our side, for the checks that the harness can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Ours as it is.
    None,
    /// The first WQE of the first list is given the SOLICITED flag flipped.
    WriterFlag,
    /// The first successful SEND receive decodes with byte_len's low bit flipped.
    DecoderByteLen,
    /// The first expanded CQE past a session's first has byte_cnt's low bit flipped.
    MiniByteCnt,
}

/// The first disagreement between libmlx5 and rrddmma.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// What was compared: `RC send WRITE`, `CQE 64 B RESP_SEND`, ...
    pub kind: String,
    /// Where: list and request, or CQ entry.
    pub at: String,
    /// The field that differs.
    pub field: String,
    /// The first differing byte: of the WQE, the doorbell write, the CQE
    /// (where the field lives) or the scattered payload.
    pub byte: Option<usize>,
    /// libmlx5's value.
    pub theirs: String,
    /// Ours.
    pub ours: String,
}

impl Mismatch {
    fn value(kind: &str, at: &str, field: &str, theirs: impl fmt::Display, ours: impl fmt::Display) -> Mismatch {
        Mismatch {
            kind: kind.into(),
            at: at.into(),
            field: field.into(),
            byte: None,
            theirs: theirs.to_string(),
            ours: ours.to_string(),
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mismatch: {}, {}: field {}", self.kind, self.at, self.field)?;
        if let Some(b) = self.byte {
            write!(f, ", first differing byte {b}")?;
        }
        write!(f, ": libmlx5 {}, rrddmma {}", self.theirs, self.ours)
    }
}

fn report(line: &str) {
    // `cargo xtask test` prints these lines (prefix `mlx5-provider:`).
    println!("mlx5-provider: {line}");
}

#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn send_rc_ud_and_dc_request_lists_match_libmlx5() {
    let out = build::output();
    match send::check(out, &["RC", "UD", "DC"], Mutation::None) {
        Ok(stats) => {
            // LISTS on RC queues, LISTS on UD queues, LISTS on DCIs.
            assert!(stats.lists >= 3 * build::LISTS, "only {} lists were compared", stats.lists);
            assert!(stats.wrapped_lists > 100 && stats.blueflame > 100 && stats.doorbells > 100, "{stats:?}");
            assert!(stats.index_wraps >= 1, "no list crossed the 16-bit WQE index: {stats:?}");
            assert!(stats.views > 100, "too few views from mlx5dv_init_obj: {stats:?}");
            let rc = ["WRITE", "WRITE_WITH_IMM", "READ", "SEND", "SEND_WITH_IMM", "SEND_WITH_INV", "FAA", "CAS"];
            let dc = rc.map(|op| format!("DC {op}"));
            for op in rc.into_iter().chain(["UD SEND", "UD SEND_WITH_IMM"]).chain(dc.iter().map(|s| s.as_str())) {
                assert!(stats.wqes.get(op).copied().unwrap_or(0) > 500, "too few {op} WQEs: {stats:?}");
            }
            report(&format!("RC, UD and DC send: {}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// Masked atomics have no libmlx5 path: the reference is built from the
/// provider's definitions (tests/provider/masked.rs says which).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn masked_cas_wqes_match_the_reference_from_the_provider_headers() {
    match masked::check(build::output()) {
        Ok(n) => {
            assert!(n >= 2000, "only {n} masked CAS WQEs were compared");
            report(&format!(
                "masked CAS: {n} WQEs against a reference from the provider's headers (no libmlx5 path); 0 mismatches"
            ));
        }
        Err(m) => panic!("{m}"),
    }
}

#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn cqes_of_64_bytes_match_libmlx5_poll_cq() {
    recv_case(64);
}

#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn cqes_of_128_bytes_match_libmlx5_poll_cq() {
    recv_case(128);
}

fn recv_case(size: u32) {
    let out = build::output();
    match recv::check(out, size, Mutation::None) {
        Ok(stats) => {
            assert!(stats.cqes >= build::CQES, "only {} CQEs were compared", stats.cqes);
            assert!(stats.wraps > 50 && stats.scatter > 100 && stats.extended > 2000 && stats.arms > 100, "{stats:?}");
            assert!(stats.scatter_copied > 50, "too few payloads through poll_scattered: {stats:?}");
            assert!(stats.views >= stats.cqs, "a view of every CQ: {stats:?}");
            for k in ["REQ", "REQ_ERR", "RESP_ERR", "RESP_SEND", "RESP_SEND_IMM", "RESP_SEND_INV", "RESP_WR_IMM"] {
                assert!(stats.by_kind.get(k).copied().unwrap_or(0) > 100, "too few {k} CQEs: {stats:?}");
            }
            report(&format!("{}; 0 mismatches", stats.summary(size)));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The harness can fail: a flag flipped in what our writer is given is
/// reported with its kind, its field and the first differing byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_our_writer_is_reported() {
    let m = send::check(build::output(), &["RC"], Mutation::WriterFlag).expect_err("a mutated writer must be caught");
    assert!(m.kind.starts_with("RC send "), "{m}");
    assert_eq!(m.at, "list 0 request 0", "{m}");
    assert_eq!(m.field, "ctrl.fm_ce_se", "{m}");
    assert_eq!(m.byte, Some(11), "{m}");
    report(&format!("mutation check (writer: SOLICITED flipped) caught as it must: {m}"));
}

/// The harness can fail: one decoded field changed is reported with its
/// kind, its field and the CQE byte where the field lives.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_our_decoder_is_reported() {
    let m = recv::check(build::output(), 64, Mutation::DecoderByteLen).expect_err("a mutated decoder must be caught");
    assert_eq!(m.kind, "CQE 64 B RESP_SEND", "{m}");
    assert_eq!(m.field, "byte_len", "{m}");
    assert_eq!(m.byte, Some(44), "{m}");
    report(&format!("mutation check (decoder: byte_len bit 0 flipped) caught as it must: {m}"));
}

/// Finding 1a of the harness: `SqRing` wrote DCI stream id 0 whatever the
/// stream (it had no setter), where `mlx5dv_wr_set_dc_addr_stream` stores
/// the id in the control segment's `dci_stream_channel_id` (bytes 9-10).
/// `WqeWriter::dci_stream` / `Wqe::dci_stream` now write it.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn regression_dci_stream_id_is_written_by_sq_ring() {
    match send::check(build::output(), &["DC streams"], Mutation::None) {
        Ok(stats) => {
            assert!(stats.lists >= build::LISTS / 5, "only {} lists were compared", stats.lists);
            for op in ["DC WRITE", "DC SEND", "DC READ"] {
                assert!(stats.wqes.get(op).copied().unwrap_or(0) > 100, "too few {op} WQEs: {stats:?}");
            }
            report(&format!("DC send on DCI streams: {}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// CQE compression: sessions made by an encoder written from the documented
/// layout (tests/provider/mlx5_provider.c, `run_zip`; libmlx5 has no
/// expansion to compare with) expand in `CqRing` to exactly the CQEs they
/// were made from, across the ring's end and lap after lap.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn compressed_sessions_expand_to_the_cqes_they_came_from() {
    match zip::check(build::output(), Mutation::None) {
        Ok(stats) => {
            assert!(stats.cqes >= build::CQES, "only {} CQEs were compared", stats.cqes);
            assert!(stats.sessions > 300 && stats.plain > 300 && stats.longest >= 40, "{stats:?}");
            assert!(stats.wrapped > 30 && stats.laps > 50, "{stats:?}");
            for f in ["HASH", "CSUM", "CSUM_STRIDX"] {
                assert!(stats.by_format.get(f).copied().unwrap_or(0) > 100, "too few {f} sessions: {stats:?}");
            }
            report(&format!("{}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The harness can fail: one expanded field changed is reported with its
/// kind, its field and the CQE byte where the field lives.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_our_expansion_is_reported() {
    let m = zip::check(build::output(), Mutation::MiniByteCnt).expect_err("a mutated expansion must be caught");
    assert!(m.kind.contains("session of"), "{m}");
    assert_eq!(m.field, "byte_cnt", "{m}");
    assert_eq!(m.byte, Some(47), "{m}");
    report(&format!("mutation check (expansion: byte_cnt bit 0 flipped) caught as it must: {m}"));
}
