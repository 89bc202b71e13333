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

#[path = "provider/batch.rs"]
mod batch;
#[path = "provider/build.rs"]
mod build;
#[path = "provider/dc_pool.rs"]
mod dc_pool;
#[path = "provider/dc_typed.rs"]
mod dc_typed;
#[path = "provider/devx.rs"]
mod devx;
#[path = "provider/eth.rs"]
mod eth;
#[path = "provider/eth_vlan.rs"]
mod eth_vlan;
#[path = "provider/masked.rs"]
mod masked;
#[path = "provider/mkey.rs"]
mod mkey;
mod mlx5_support;
#[path = "provider/mprq.rs"]
mod mprq;
#[path = "provider/recv.rs"]
mod recv;
#[path = "provider/send.rs"]
mod send;
#[path = "provider/tm.rs"]
mod tm;
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
    /// The first request of the first list given to `WrBatch` has SOLICITED flipped.
    BatchFlag,
    /// The first successful SEND receive decodes with byte_len's low bit flipped.
    DecoderByteLen,
    /// The first expanded CQE past a session's first has byte_cnt's low bit flipped.
    MiniByteCnt,
    /// The first expanded requester CQE whose WQE counter is not its
    /// session's first + i is given that (the expansion before B-3).
    MiniReqCounter,
    /// The first masked fetch-and-add is given its field boundary's bit 0 flipped.
    MaskedBoundary,
    /// The typed builders put the first request of the first list on its stream XOR 1.
    TypedStream,
    /// The first 32-byte extended masked CAS is given its compare mask's bit 0 flipped.
    ExtOperand,
    /// The first tag add given to `TmRing` has its tag's bit 0 flipped.
    TmTag,
    /// The first matched TM CQE decodes with its application context's bit 0 flipped.
    TmAppCtx,
    /// The first striding-RQ packet decodes with its consumed-strides count's bit 0 flipped.
    MprqStrides,
    /// The first striding WQE is given its lkey's bit 0 flipped.
    MprqLkey,
    /// The fourth UMR request of the first queue is given SOLICITED flipped.
    MkeyFlag,
    /// The fifth request of the first queue is given to `MkeyWr` with
    /// LOCAL_WRITE flipped.
    MkeyWrAccess,
    /// The first raw packet SEND is given its L4 checksum request flipped.
    EthCsum,
    /// The first VLAN-tagged raw packet request is given its VID's bit 0 flipped.
    EthVlan,
    /// The first DEVX UDP source port request is given to our builder with the port's bit 0 flipped.
    DevxUdpSport,
    /// The first DEVX LAG port request is given to our builder with ports 1 and 2 swapped.
    DevxLagPort,
    /// The first DEVX DCI stream reset is given to our builder with the stream's bit 0 flipped.
    DevxDciStream,
    /// The DC pool's first request is written by our typed builder on the policy's stream XOR 1.
    PoolStream,
    /// The first DEVX mkey creation is given to our builder with the PD number's bit 0 flipped.
    DevxMkey,
    /// The first scheduling leaf is given to our builder with its weight's bit 0 flipped.
    DevxSched,
    /// The first UMR on a DEVX-created key is given to our builder with the remote-write right flipped.
    DevxUmr,
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
    /// A byte that differs: `byte` of the compared bytes (in `field`), libmlx5's `t`, ours `o`.
    fn at_byte(kind: String, at: String, field: String, byte: usize, t: u8, o: u8) -> Box<Mismatch> {
        Box::new(Mismatch { kind, at, field, byte: Some(byte), theirs: format!("{t:#04x}"), ours: format!("{o:#04x}") })
    }

    /// `Ok` when libmlx5's value and ours agree, else their mismatch.
    fn same(kind: &str, at: &str, field: &str, theirs: u32, ours: u32) -> Result<(), Box<Mismatch>> {
        if theirs == ours {
            Ok(())
        } else {
            Err(Mismatch::value(kind, at, field, theirs, ours).into())
        }
    }

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
            assert!(stats.lists >= 3 * build::scaled(build::LISTS), "only {} lists were compared", stats.lists);
            assert!(
                stats.wrapped_lists > build::scaled(100)
                    && stats.blueflame > build::scaled(100)
                    && stats.doorbells > build::scaled(100),
                "{stats:?}"
            );
            assert!(stats.index_wraps >= 1, "no list crossed the 16-bit WQE index: {stats:?}");
            assert!(stats.views > build::scaled(100), "too few views from mlx5dv_init_obj: {stats:?}");
            let rc = ["WRITE", "WRITE_WITH_IMM", "READ", "SEND", "SEND_WITH_IMM", "SEND_WITH_INV", "FAA", "CAS"];
            let dc = rc.map(|op| format!("DC {op}"));
            for op in rc.into_iter().chain(["UD SEND", "UD SEND_WITH_IMM"]).chain(dc.iter().map(|s| s.as_str())) {
                assert!(stats.wqes.get(op).copied().unwrap_or(0) > build::scaled(500), "too few {op} WQEs: {stats:?}");
            }
            report(&format!("RC, UD and DC send: {}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// rrddmma's `WrBatch` (RC, UD) and `DciBatch` (DC) on libmlx5's own
/// `ibv_wr_*` entries give the WQEs, producer index, doorbell record and
/// doorbell/BlueFlame write that libmlx5 gives for the same lists
/// (tests/provider/batch.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn wr_batch_and_dci_batch_match_libmlx5() {
    match batch::check(build::output(), &["RC", "UD", "DC", "DC streams"], Mutation::None) {
        Ok(stats) => {
            for t in ["RC", "UD", "DC"] {
                let n = stats.lists.get(t).copied().unwrap_or(0);
                assert!(n >= build::scaled(build::LISTS), "only {n} {t} lists went through the batches: {stats:?}");
            }
            assert!(
                stats.lists.get("DC streams").copied().unwrap_or(0) >= build::scaled(build::LISTS) / 5,
                "{stats:?}"
            );
            assert!(
                stats.wrapped_lists > build::scaled(100)
                    && stats.blueflame > build::scaled(100)
                    && stats.doorbells > build::scaled(100),
                "{stats:?}"
            );
            assert!(
                stats.inline_wqes > build::scaled(1000)
                    && stats.list_setters > build::scaled(1000)
                    && stats.one_entry > build::scaled(1000),
                "{stats:?}"
            );
            assert!(stats.index_wraps >= 1, "no list crossed the 16-bit WQE index: {stats:?}");
            let rc = ["WRITE", "WRITE_WITH_IMM", "READ", "SEND", "SEND_WITH_IMM", "SEND_WITH_INV", "FAA", "CAS"];
            let dc = rc.map(|op| format!("DC {op}"));
            for op in rc.into_iter().chain(["UD SEND", "UD SEND_WITH_IMM"]).chain(dc.iter().map(|s| s.as_str())) {
                assert!(stats.wqes.get(op).copied().unwrap_or(0) > build::scaled(500), "too few {op} WQEs: {stats:?}");
            }
            report(&format!("WrBatch / DciBatch: {}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The batch comparison can fail: a flag flipped in what `WrBatch` is
/// given is reported with its kind, its field and the first differing byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_wr_batch_is_reported() {
    let m = batch::check(build::output(), &["RC"], Mutation::BatchFlag).expect_err("a mutated batch must be caught");
    assert!(m.kind.starts_with("RC WrBatch "), "{m}");
    assert_eq!(m.at, "list 0 request 0", "{m}");
    assert_eq!(m.field, "ctrl.fm_ce_se", "{m}");
    assert_eq!(m.byte, Some(11), "{m}");
    report(&format!("mutation check (WrBatch: SOLICITED flipped) caught as it must: {m}"));
}

/// Findings of the batch comparison (tests/provider/batch.rs):
/// 2a: `WrBatch::post` of a request without entries called no data setter,
/// and libmlx5 finishes a WQE only there: the request was never finished and
/// the next one overwrote it. It now ends with an empty list setter.
/// 2b: an INLINE request without entries must stay a plain one, as
/// `ibv_post_send` makes it (libmlx5 chooses BlueFlame by "inline"): an
/// empty inline list would have made a 64-byte BlueFlame copy where
/// libmlx5 rings an 8-byte doorbell.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn regression_wr_batch_requests_without_entries() {
    let (pi, op0, ds0, op1, bf) = batch::empty_requests();
    assert_eq!((op0, ds0), (0x0b, 1), "the entry-less SEND_WITH_IMM is a finished one-DS WQE");
    assert_eq!(op1, 0x0a, "the SEND after it has its own WQE");
    assert_eq!(pi, 3, "three WQEs posted");
    assert_eq!(bf, 8, "an entry-less INLINE request rings an 8-byte doorbell, as through ibv_post_send");
}

/// Masked atomics have no libmlx5 path: the reference is built from the
/// provider's definitions (tests/provider/masked.rs says which).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn masked_cas_wqes_match_the_reference_from_the_provider_headers() {
    match masked::check(build::output(), masked::Masked::Cas, Mutation::None) {
        Ok(n) => {
            assert!(n >= build::scaled(2000), "only {n} masked CAS WQEs were compared");
            report(&format!(
                "masked CAS: {n} WQEs against a reference from the provider's headers (no libmlx5 path), \
                 opmod included; 0 mismatches"
            ));
        }
        Err(m) => panic!("{m}"),
    }
}

/// Masked fetch-and-add has no libmlx5 path and no rdma-core definition:
/// the reference is built from UCX's documented segment layout and opmod
/// (tests/provider/masked.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn masked_fa_wqes_match_the_reference_from_the_documented_layout() {
    match masked::check(build::output(), masked::Masked::Fa, Mutation::None) {
        Ok(n) => {
            assert!(n >= build::scaled(2000), "only {n} masked FA WQEs were compared");
            report(&format!(
                "masked FA: {n} WQEs against a reference from UCX's documented layout (no libmlx5 path), \
                 opmod included; 0 mismatches"
            ));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The masked reference can fail: one argument changed on our side is
/// reported with its field and byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_masked_fa_is_reported() {
    let m = masked::check(build::output(), masked::Masked::Fa, Mutation::MaskedBoundary)
        .expect_err("a mutated masked FA must be caught");
    assert_eq!(m.at, "WQE 0", "{m}");
    assert_eq!(m.field, "masked_fa.field_boundary", "{m}");
    assert_eq!(m.byte, Some(47), "{m}");
    report(&format!("mutation check (masked FA: field boundary bit 0 flipped) caught as it must: {m}"));
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
            assert!(stats.cqes >= build::scaled(build::CQES), "only {} CQEs were compared", stats.cqes);
            assert!(
                stats.wraps > build::scaled(50)
                    && stats.scatter > build::scaled(100)
                    && stats.extended > build::scaled(2000)
                    && stats.arms > build::scaled(100),
                "{stats:?}"
            );
            assert!(stats.scatter_copied > build::scaled(50), "too few payloads through poll_scattered: {stats:?}");
            assert!(stats.views >= stats.cqs, "a view of every CQ: {stats:?}");
            for k in ["REQ", "REQ_ERR", "RESP_ERR", "RESP_SEND", "RESP_SEND_IMM", "RESP_SEND_INV", "RESP_WR_IMM"] {
                assert!(stats.by_kind.get(k).copied().unwrap_or(0) > build::scaled(100), "too few {k} CQEs: {stats:?}");
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
            assert!(stats.lists >= build::scaled(build::LISTS) / 5, "only {} lists were compared", stats.lists);
            for op in ["DC WRITE", "DC SEND", "DC READ"] {
                assert!(stats.wqes.get(op).copied().unwrap_or(0) > build::scaled(100), "too few {op} WQEs: {stats:?}");
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
            assert!(stats.cqes >= build::scaled(build::CQES), "only {} CQEs were compared", stats.cqes);
            assert!(
                stats.sessions > build::scaled(300) && stats.plain > build::scaled(300) && stats.longest >= 40,
                "{stats:?}"
            );
            assert!(stats.wrapped > build::scaled(30) && stats.laps > build::scaled(50) as u64, "{stats:?}");
            for f in ["HASH", "CSUM", "CSUM_STRIDX"] {
                assert!(
                    stats.by_format.get(f).copied().unwrap_or(0) > build::scaled(100),
                    "too few {f} sessions: {stats:?}"
                );
            }
            report(&format!("{}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// B-3: requester sessions, many with unsignalled WQEs between the WQEs
/// their CQEs complete, expand to each mini-CQE's own WQE counter and
/// opcode (the encoder's reading of `s_wqe_info`), beside CQEs written
/// whole and receive sessions on the same CQs.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn b3_requester_sessions_with_unsignalled_wqes_expand_to_their_own_wqes() {
    match zip::check(build::output(), Mutation::None) {
        Ok(stats) => {
            assert!(stats.requester > build::scaled(100) && stats.requester_gapped > build::scaled(50), "{stats:?}");
            assert!(
                stats.requester_cqes > build::scaled(1_000) && stats.requester_plain >= build::scaled(40),
                "{stats:?}"
            );
            report(&format!(
                "B-3: {} requester sessions ({} CQEs), {} with unsignalled WQEs between their CQEs' WQEs, expand to \
                 each mini-CQE's WQE counter and opcode; 0 mismatches",
                stats.requester, stats.requester_cqes, stats.requester_gapped
            ));
        }
        Err(m) => panic!("{m}"),
    }
}

/// B-3's mutation: the requester expansion as it was (the title's counter
/// + i) is caught on the WQE counter.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn b3_mutation_requester_counter_as_title_plus_index_is_caught() {
    let m = zip::check(build::output(), Mutation::MiniReqCounter).expect_err("title + i must be caught");
    assert!(m.kind.contains("requester session of"), "{m}");
    assert_eq!(m.field, "wqe_counter", "{m}");
    assert!(matches!(m.byte, Some(60 | 61)), "{m}");
    report(&format!("mutation check (requester expansion: WQE counter as title + i) caught as it must: {m}"));
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

/// The typed DC builders (`SqRing::dc(&target)`, `Dc::stream`) and the
/// typed RC builders (`send_inv` among them) write, for the same request
/// lists, the WQEs, producer index, doorbell record and doorbell write that
/// libmlx5's `ibv_wr_*` + `mlx5dv_wr_set_dc_addr(_stream)` (DCIs) and
/// `mlx5_post_send` (RC) write; masked and extended atomics, which libmlx5
/// cannot post, match the C half's reference from the documented layout
/// (tests/provider/dc_typed.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn typed_dc_builders_match_libmlx5_and_the_documented_layout() {
    let out = build::output();
    let dc = send::check_with(out, &["DC", "DC streams"], Mutation::None, true).unwrap_or_else(|m| panic!("{m}"));
    let rc = send::check_with(out, &["RC"], Mutation::None, true).unwrap_or_else(|m| panic!("{m}"));
    let ext = dc_typed::check_ext(out, Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    let ops = ["WRITE", "WRITE_WITH_IMM", "READ", "SEND", "SEND_WITH_IMM", "SEND_WITH_INV", "FAA", "CAS"];
    for op in ops {
        let n = dc.wqes.get(format!("DC {op}").as_str()).copied().unwrap_or(0);
        assert!(n > build::scaled(500), "too few typed DC {op} WQEs: {dc:?}");
    }
    let n = rc.wqes.get("SEND_WITH_INV").copied().unwrap_or(0);
    assert!(n > build::scaled(500), "too few typed RC SEND_WITH_INV WQEs: {rc:?}");
    for kind in ["masked CAS 8", "masked FA 8", "masked CAS 16", "masked FA 16", "masked CAS 32", "masked FA 32"] {
        for t in ["RC", "DC"] {
            let n = ext.wqes.get(&format!("{t} {kind}")).copied().unwrap_or(0);
            assert!(n >= build::scaled(400), "too few {t} {kind} WQEs: {ext:?}");
        }
    }
    let dc_total = dc.wqes.values().sum::<usize>()
        + ext.wqes.iter().filter(|(k, _)| k.starts_with("DC")).map(|(_, n)| n).sum::<usize>();
    assert!(dc_total >= build::scaled(10_000), "only {dc_total} typed DC WQEs were compared");
    assert!(ext.wrapped > build::scaled(100), "too few reference WQEs across the ring's end: {ext:?}");
    report(&format!(
        "typed DC builders: {dc_total} DC WQEs, 0 mismatches; against libmlx5's ibv_wr_* + \
         mlx5dv_wr_set_dc_addr(_stream): {}; against the documented layout (no libmlx5 path): {} WQEs ({}), \
         {} across the ring's end; typed RC builders against mlx5_post_send: {} WQEs (SEND_WITH_INV {}); \
         0 mismatches",
        dc.summary(),
        ext.total(),
        ext.summary(),
        ext.wrapped,
        rc.wqes.values().sum::<usize>(),
        rc.wqes.get("SEND_WITH_INV").copied().unwrap_or(0),
    ));
}

/// DCI streams: requests on streams through the typed builders
/// (`Dc::stream`) and through `DciBatch` (its stream entry, the body of
/// `DciBatch::post_stream`) against libmlx5's `mlx5dv_wr_set_dc_addr_stream`
/// lists; masked and extended atomics on streams against the reference,
/// each error completion naming its stream (`SqRing::stream_of`).
/// `mlx5dv_dci_stream_id_reset` issues a firmware command
/// (`MLX5_CMD_OP_MODIFY_QP` through DEVX), which host memory cannot answer:
/// it is not part of this check.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn dci_streams_match_libmlx5() {
    let out = build::output();
    let typed = send::check_with(out, &["DC streams"], Mutation::None, true).unwrap_or_else(|m| panic!("{m}"));
    let batch = batch::check(out, &["DC streams"], Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    let ext = dc_typed::check_ext(out, Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    let lists = batch.lists.get("DC streams").copied().unwrap_or(0);
    assert!(
        typed.lists >= build::scaled(build::LISTS) / 5 && lists >= build::scaled(build::LISTS) / 5,
        "{typed:?} {batch:?}"
    );
    assert!(ext.streams > build::scaled(1000) && ext.error_streams > build::scaled(1000), "{ext:?}");
    let batch_wqes: usize = batch.wqes.values().sum();
    report(&format!(
        "DCI streams: {} lists through the typed builders ({} WQEs) and {lists} through DciBatch ({batch_wqes} WQEs) \
         against mlx5dv_wr_set_dc_addr_stream, stream ids below 2^{} (the DCIs' log_num_concurrent; \
         one past it refused); {} masked/extended atomics on streams against the reference, \
         {} error completions named their stream (SqRing::stream_of); stream reset not driven (a firmware \
         command); 0 mismatches",
        typed.lists,
        typed.wqes.values().sum::<usize>(),
        build::LOG_DCI_STREAMS,
        ext.streams,
        ext.error_streams,
    ));
}

/// A stream the DCI does not have is refused by `DciBatch` before libmlx5
/// sees it (libmlx5's `mlx5dv_wr_set_dc_addr_stream` writes any id): on
/// one of the provider's DCIs, with 64 streams 63 posts and 64 panics
/// naming the range, without one stream only 0 posts; nothing is posted
/// on a refusal.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn dci_batch_refuses_a_stream_the_dci_does_not_have() {
    let (m, _) = batch::stream_refusal(Some(6), 63);
    assert_eq!(m, None, "stream 63 of 64 posts");
    let (m, untouched) = batch::stream_refusal(Some(6), 64);
    let m = m.expect("stream 64 of 64 is refused");
    assert!(m.contains("stream 64") && m.contains("0..64") && m.contains("log_num_concurrent 6"), "{m}");
    assert!(untouched, "nothing posted");
    let (m, untouched) = batch::stream_refusal(None, 1);
    let m = m.expect("stream 1 without streams is refused");
    assert!(m.contains("one stream, 0") && m.contains("create_with_streams"), "{m}");
    assert!(untouched, "nothing posted");
}

/// The typed DC comparison can fail: the stream given to the first request
/// flipped is reported at the control segment's stream bytes.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_typed_dc_stream_is_reported() {
    let m = send::check_with(build::output(), &["DC streams"], Mutation::TypedStream, true)
        .expect_err("a mutated stream must be caught");
    assert!(m.kind.starts_with("typed DC streams send "), "{m}");
    assert_eq!(m.at, "list 0 request 0", "{m}");
    assert_eq!(m.field, "ctrl.dci_stream_channel_id", "{m}");
    assert_eq!(m.byte, Some(10), "{m}");
    report(&format!("mutation check (typed DC builder: stream bit 0 flipped) caught as it must: {m}"));
}

/// The extended-atomic reference can fail: one operand bit changed on our
/// side is reported with its operand and byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_an_extended_atomic_is_reported() {
    let m = dc_typed::check_ext(build::output(), Mutation::ExtOperand).expect_err("a mutated operand must be caught");
    assert!(m.kind.contains("masked CAS 32"), "{m}");
    assert_eq!(m.field, "operand.compare_mask", "{m}");
    assert_eq!(m.byte, Some(159), "{m}");
    report(&format!("mutation check (32-byte masked CAS: compare mask bit 0 flipped) caught as it must: {m}"));
}

/// Tag matching: rrddmma's direct tag operations (`TmRing::add`,
/// `add_buf`, `remove`, `sync`, `ring`) write, for the same op lists, the
/// WQEs, handles, producer index, doorbell record and doorbell write that
/// libmlx5's `mlx5_post_srq_ops` writes on a fabricated tag-matching SRQ,
/// refusing the same operations; its CQE handling (`TmRing::complete`,
/// `TmCqe`, `Cqe64::decode`) reports what libmlx5's extended poller and
/// `ibv_wc_read_tm_info` report, the tag list kept alike across both
/// (tests/provider/tm.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn tag_matching_matches_libmlx5() {
    let stats = tm::check(build::scaled(600), build::SEED, Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    let (wqes, cqes) = (stats.wqe_total(), stats.cqe_total());
    assert!(wqes >= build::scaled(10_000) && cqes >= build::scaled(10_000), "{stats:?}");
    for k in ["add", "add (no buffer)", "remove", "sync"] {
        assert!(stats.wqes.get(k).copied().unwrap_or(0) > build::scaled(300), "too few {k} WQEs: {stats:?}");
    }
    for k in [
        "Expected",
        "Consumed",
        "ConsumedMsg",
        "ConsumedSwRndv",
        "ConsumedMsgSwRndv",
        "MsgCompletionCanceled",
        "Unexpected",
        "NoTag",
        "Append",
        "Remove",
        "Noop",
    ] {
        assert!(stats.cqes.get(k).copied().unwrap_or(0) > build::scaled(50), "too few {k} CQEs: {stats:?}");
    }
    for s in ["TM_ERR", "TM_RNDV_INCOMPLETE", "LOC_LEN_ERR", "GENERAL_ERR"] {
        assert!(stats.statuses.get(s).copied().unwrap_or(0) > build::scaled(20), "too few {s} completions: {stats:?}");
    }
    assert!(
        stats.refused.len() == 2 && stats.blueflame > build::scaled(100) && stats.doorbells > build::scaled(100),
        "{stats:?}"
    );
    assert!(
        stats.stale_doorbells > 10 && stats.sync_req > build::scaled(50) && stats.our_refusals > build::scaled(100),
        "{stats:?}"
    );
    // 0x4000 unexpected messages without a sync: the request from the 0x4000th on.
    let (run, asked) = tm::check_unexpected_run(0x4000 + 100, build::SEED ^ 1).unwrap_or_else(|m| panic!("{m}"));
    assert!(run >= 0x4000 + 100 && asked >= 100 && asked <= run - 0x3fff, "{run} CQEs, {asked} sync requests");
    report(&format!(
        "tag matching: {} cases ({wqes} WQEs + {} CQEs): {}; and one SRQ given {run} unexpected messages without a \
         sync, the sync requested on the last {asked} (MLX5_TM_MAX_SYNC_DIFF); 0 mismatches",
        wqes + cqes + run,
        cqes + run,
        stats.summary()
    ));
}

/// The tag-matching comparison can fail: one bit of ours flipped, in a
/// WQE and in a decoded CQE, is reported with its field and byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_tag_matching_is_reported() {
    let m = tm::check(build::scaled(600), build::SEED, Mutation::TmTag).expect_err("a mutated tag add must be caught");
    assert!(m.kind.starts_with("tag matching op list add"), "{m}");
    assert_eq!(m.field, "tm.append_tag", "{m}");
    assert_eq!(m.byte, Some(39), "{m}");
    report(&format!("mutation check (tag matching: the first add's tag bit 0 flipped) caught as it must: {m}"));
    let m = tm::check(build::scaled(600), build::SEED, Mutation::TmAppCtx)
        .expect_err("a mutated TM CQE decode must be caught");
    assert_eq!(m.field, "tm_info.priv (app_ctx)", "{m}");
    report(&format!(
        "mutation check (tag matching: the first match's app context bit 0 flipped) caught as it must: {m}"
    ));
}

/// Striding receive WQs: `MprqRing` writes the data segments and doorbell
/// record that libmlx5's `mlx5_post_wq_recv` writes for the same receive
/// lists (16 bytes further into the WQE, past the next segment of
/// `struct mlx5_mprq_wqe`), and `StrideCompletion` (over `CqRing`, which
/// expands `CSUM_STRIDX` sessions) reports what libmlx5's extended poller
/// reports for the same CQEs; the stride fields libmlx5 does not read and
/// the consumed-stride tracker are held to the generator
/// (tests/provider/mprq.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn striding_rq_matches_libmlx5() {
    let stats = mprq::check(build::scaled(400), build::SEED, Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    assert!(
        stats.cases() >= build::scaled(10_000)
            && stats.wqes >= build::scaled(2_000)
            && stats.cqes >= build::scaled(8_000),
        "{stats:?}"
    );
    assert!(
        stats.fillers > build::scaled(100)
            && stats.compressed > build::scaled(1_000)
            && stats.sessions > build::scaled(100),
        "{stats:?}"
    );
    assert!(
        stats.handed_back > build::scaled(500)
            && stats.skipped_sge > build::scaled(50)
            && stats.cq_wraps > build::scaled(100),
        "{stats:?}"
    );
    assert!(stats.wqe_sizes.len() >= 2 && stats.with_imm > build::scaled(100), "{stats:?}");
    report(&format!("striding RQ: {} cases: {}; 0 mismatches", stats.cases(), stats.summary()));
}

/// B-2 on the harness's striding stream: the ring takes only what
/// `CqRing::poll_strides` stamped, for its own WQ, once and in order:
/// every CQE decoded from its bytes, offered again, or offered after a
/// later one, and every CQE of the other WQ sharing the CQ, is refused and
/// changes nothing (the checks run inside `mprq::check`; here their counts).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn b2_striding_completions_are_taken_once_by_their_wqs_ring() {
    let stats = mprq::check(100, build::SEED ^ 0xb2, Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    assert!(stats.refused_decoded >= 2_000 && stats.refused_replays >= 2_000, "{stats:?}");
    assert!(stats.refused_out_of_order >= 1_000 && stats.refused_other_wq >= 100, "{stats:?}");
    report(&format!(
        "striding RQ refusals (B-2): {} CQEs decoded from bytes, {} replays, {} out of order, {} of another WQ on \
         the shared CQ refused, each changing nothing",
        stats.refused_decoded, stats.refused_replays, stats.refused_out_of_order, stats.refused_other_wq
    ));
}

/// The striding-RQ comparison can fail: one bit of a decoded stride count
/// flipped is reported with its field.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_striding_rq_is_reported() {
    let m = mprq::check(build::scaled(400), build::SEED, Mutation::MprqStrides)
        .expect_err("a mutated stride count must be caught");
    assert_eq!(m.field, "byte_len (byte_cnt: filler, strides, length)", "{m}");
    report(&format!(
        "mutation check (striding RQ: the first packet's consumed-strides count bit 0 flipped) caught as it must: {m}"
    ));
    let m = mprq::check(build::scaled(400), build::SEED, Mutation::MprqLkey)
        .expect_err("a mutated striding WQE must be caught");
    assert!(m.kind == "striding RQ post" && m.field == "data segment lkey" && m.byte == Some(23), "{m}");
    report(&format!("mutation check (striding RQ: the first WQE's lkey bit 0 flipped) caught as it must: {m}"));
}

/// Memory keys: libmlx5's mlx5dv_wr_mr_list / mr_interleaved /
/// mkey_configure (+ access, + layout) and ibv_wr_local_inv against the
/// typed UMR builders (tests/provider/mkey.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mkeys_match_libmlx5() {
    match mkey::check(build::scaled(1_100), Mutation::None) {
        Ok(s) => {
            assert!(s.cases >= build::scaled(10_000), "{}", s.summary());
            assert!(
                s.wrapped > 0 && s.index_wraps > 0 && s.max_len_lists > 0 && s.blueflame > 0 && s.doorbells > 0,
                "{}",
                s.summary()
            );
            assert!(s.refused.len() == 3 && s.small_fenced > 0 && s.mkey_wr > 0, "{}", s.summary());
            report(&format!("mkeys: {}; 0 mismatches", s.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// Raw packet SENDs: the crate's verbs requests (IP_CSUM, INLINE, gathers)
/// through libmlx5's `mlx5_post_send` on a raw packet queue, and the same
/// packets through `SqRing::send_eth`, give the same WQEs, producer index,
/// doorbell record and doorbell/BlueFlame write; what libmlx5 refuses our
/// writer refuses at the same request (tests/provider/eth.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn raw_packet_sends_match_libmlx5() {
    match eth::check(Mutation::None) {
        Ok(stats) => {
            assert!(
                stats.requests >= build::scaled(10_000),
                "only {} requests were compared: {stats:?}",
                stats.requests
            );
            assert!(
                stats.wrapped_lists > build::scaled(100)
                    && stats.blueflame > build::scaled(100)
                    && stats.doorbells > build::scaled(100),
                "{stats:?}"
            );
            assert!(stats.index_wraps >= 1 && stats.no_min_inline_queues >= 1, "{stats:?}");
            assert!(
                stats.csum > build::scaled(1000)
                    && stats.inline > build::scaled(1000)
                    && stats.gathers > build::scaled(1000),
                "{stats:?}"
            );
            assert!(
                stats.split_headers > build::scaled(1000)
                    && stats.tso > build::scaled(1000)
                    && stats.tso_wrap_findings > 0,
                "{stats:?}"
            );
            assert!(stats.refused.len() == 3 && stats.refused.values().all(|&n| n >= build::scaled(20)), "{stats:?}");
            report(&format!("raw packet send: {}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// Software VLAN insertion: untagged packets and a tag through
/// `SqRing::send_eth_vlan` / `send_tso_vlan` give the WQEs libmlx5's
/// `mlx5_post_send` writes for the tagged packets (tests/provider/eth_vlan.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn raw_packet_vlan_insertion_matches_libmlx5() {
    match eth_vlan::check(Mutation::None) {
        Ok(s) => {
            assert!(s.requests >= build::scaled(5_000), "only {} requests were compared: {s:?}", s.requests);
            assert!(
                s.tso > build::scaled(500)
                    && s.csum > build::scaled(1000)
                    && s.inline > build::scaled(500)
                    && s.split_headers > build::scaled(500),
                "{s:?}"
            );
            assert!(
                s.short_first > build::scaled(100)
                    && s.pcp_dei > build::scaled(1000)
                    && s.wrapped_lists > build::scaled(100),
                "{s:?}"
            );
            report(&format!("raw packet VLAN: {}; 0 mismatches", s.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The VLAN comparison can fail: the tag's VID bit 0 flipped in what our
/// writer is given is reported in the inline headers.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_vlan_tag_is_reported() {
    let m = eth_vlan::check(Mutation::EthVlan).expect_err("a mutated VLAN tag must be caught");
    assert!(m.kind.starts_with("raw packet VLAN "), "{m}");
    assert_eq!(m.at, "list 0 request 0", "{m}");
    assert!(m.field.starts_with("eth.inline_hdr"), "{m}");
    assert_eq!(m.byte, Some(45), "{m}");
    report(&format!("mutation check (raw packet VLAN: the tag's VID bit 0 flipped) caught as it must: {m}"));
}

/// The UMR comparison can fail: one flag changed on our side is reported
/// with its field and byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_umr_wqe_is_reported() {
    let m = mkey::check(20, Mutation::MkeyFlag).expect_err("a mutated UMR WQE must be caught");
    assert_eq!(m.at, "queue 0 case 3", "{m}");
    assert_eq!(m.field, "ctrl.fm_ce_se", "{m}");
    assert_eq!(m.byte, Some(11), "{m}");
    report(&format!("mutation check (mkeys: SOLICITED flipped in one UMR WQE) caught as it must: {m}"));
}

/// The `MkeyWr` comparison can fail too: one access bit changed in what our
/// wrapper is given is reported.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_mkey_wr_is_reported() {
    let m = mkey::check(20, Mutation::MkeyWrAccess).expect_err("a mutated MkeyWr call must be caught");
    assert_eq!(m.at, "queue 0 case 4", "{m}");
    assert!(m.kind.starts_with("MkeyWr"), "{m}");
    report(&format!("mutation check (mkeys: MkeyWr given LOCAL_WRITE flipped) caught as it must: {m}"));
}

/// The raw packet comparison can fail: an L4 checksum request flipped in
/// what `send_eth` is given is reported at the Ethernet segment's cs_flags.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_raw_packet_send_is_reported() {
    let m = eth::check(Mutation::EthCsum).expect_err("a mutated raw packet SEND must be caught");
    assert!(m.kind.starts_with("raw packet "), "{m}");
    assert!(m.at.ends_with(" request 0"), "{m}");
    assert_eq!(m.field, "eth.cs_flags", "{m}");
    assert_eq!(m.byte, Some(20), "{m}");
    report(&format!("mutation check (raw packet send: L4 checksum flag flipped) caught as it must: {m}"));
}

/// libmlx5 finding (tests/provider/eth.rs): a TSO after a SEND in one
/// `ibv_post_send` on a raw packet QP starts its gather list where the
/// SEND's inline headers ended (`sg_copy_ptr`, which only
/// `copy_eth_inline_headers` sets): here the SEND's 18-byte first entry was
/// all headers, so libmlx5 drops the TSO's first entry (one DS fewer, its
/// first data segment the second entry's 50 bytes). `send_tso` writes
/// both. The random comparison orders TSOs first for this reason.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn tso_after_send_in_one_call_loses_entries() {
    let (theirs, ours) = eth::tso_after_send();
    // Control 1, Ethernet segment and 54 header bytes 5, two data segments.
    assert_eq!(ours, (8, 100), "ours: both entries");
    assert_eq!(theirs, (7, 50), "libmlx5: the first entry dropped");
    report(&format!(
        "finding (raw packet TSO after a SEND in one ibv_post_send): libmlx5 writes DS {} with a first data \
         segment of {} bytes, the TSO's first entry dropped; rrddmma DS {} with its {} bytes",
        theirs.0, theirs.1, ours.0, ours.1
    ));
}

/// DEVX commands: libmlx5 v59's `mlx5dv_modify_qp_udp_sport`,
/// `mlx5dv_modify_qp_lag_port`, `mlx5dv_dci_stream_id_reset` and
/// `mlx5dv_create_mkey`, caught at the ioctl boundary by the harness's fake
/// kernel, against `mlx5dv::devx::cmd` (tests/provider/devx.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn devx_commands_match_libmlx5() {
    let _ = build::output();
    match devx::check(Mutation::None) {
        Ok(stats) => {
            for k in [
                "UDP source port",
                "LAG port",
                "DCI stream reset",
                "mkey creation",
                "scheduling leaf creation",
                "QP on a scheduling leaf",
                "UMR on a DEVX key",
            ] {
                let n = stats.cases.get(k).copied().unwrap_or(0);
                assert!(n >= build::scaled(devx::CASES), "only {n} {k} cases: {stats:?}");
            }
            assert!(stats.remote_invalidate > build::scaled(100), "{stats:?}");
            report(&format!("DEVX commands vs libmlx5: {}; 0 mismatches", stats.summary()));
        }
        Err(m) => panic!("{m}"),
    }
}

/// The DEVX comparison can fail: one input bit changed on our side, per
/// command family, is reported with its command, field and byte.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_devx_command_is_reported() {
    let _ = build::output();
    let cases = [
        (Mutation::DevxUdpSport, "UDP source port", "command 0 (RTS2RTS_QP) bytes", 83),
        (Mutation::DevxLagPort, "LAG port", "command 2 (RTS2RTS_QP) bytes", 24),
        (Mutation::DevxDciStream, "DCI stream reset", "command 0 (RTS2RTS_QP) bytes", 275),
        (Mutation::DevxMkey, "mkey creation", "command 0 (CREATE_MKEY) bytes", 31),
        (Mutation::DevxSched, "scheduling leaf creation", "command 0 (CREATE_GENERAL_OBJECT) bytes", 0x47),
        // The mkey context's access byte (64 + 2): remote write is bit 5.
        (Mutation::DevxUmr, "UMR on a DEVX key", "WQE bytes", 66),
    ];
    let mut seen = Vec::new();
    for (mutation, kind, field, byte) in cases {
        let m = devx::check(mutation).expect_err("a mutated DEVX command must be caught");
        assert_eq!(m.kind, kind, "{m}");
        assert_eq!(m.at, "case 0", "{m}");
        assert_eq!(m.field, field, "{m}");
        assert_eq!(m.byte, Some(byte), "{m}");
        seen.push(format!("{kind}: byte {byte}"));
    }
    report(&format!(
        "mutation check (DEVX: bit 0 of the UDP port, the LAG port, the DCI stream, the PD number, a scheduling leaf's \
         weight, a UMR's remote-write right on a DEVX-created key flipped) caught as it must, each at its field: {}",
        seen.join("; ")
    ));
}

/// The DCI pool's posts (`wrap::dc`'s policy picking DCI and stream per
/// target, under `dcs`, `dcs_quota`, `hw_dcs` and `rand`, with errors and
/// recoveries from a model of completions) through the typed DC builders
/// against libmlx5's `ibv_wr_*` + `mlx5dv_wr_set_dc_addr_stream` for the
/// same DCI, stream and target (tests/provider/dc_pool.rs).
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn dc_pool_posts_match_libmlx5() {
    let per_policy = build::scaled(3_000);
    let stats = dc_pool::check(per_policy, Mutation::None).unwrap_or_else(|m| panic!("{m}"));
    assert!(stats.total() >= build::scaled(10_000), "only {} DC pool WQEs: {stats:?}", stats.total());
    assert!(stats.recovered > 0 && stats.flushed > 0, "no error was recovered: {stats:?}");
    assert!(stats.channels.get("hw_dcs").copied().unwrap_or(0) > 16, "hw_dcs used few streams: {stats:?}");
    report(&format!(
        "DC pool vs libmlx5: {}; 0 mismatches; the policy's DCI and stream per target written by the typed DC \
         builders and by ibv_wr_* + mlx5dv_wr_set_dc_addr_stream",
        stats.summary()
    ));
}

/// The DC pool comparison can fail: our side's first request on the
/// policy's stream XOR 1.
#[test]
#[ignore = "needs the rdma-core v59 source; cargo xtask test runs it"]
fn mutation_in_a_dc_pool_stream_is_reported() {
    let m = dc_pool::check(100, Mutation::PoolStream).expect_err("a mutated stream must be caught");
    assert!(m.kind.starts_with("DC pool (dcs) "), "{m}");
    assert_eq!(m.field, "ctrl.dci_stream_channel_id", "{m}");
    report(&format!("mutation check (DC pool: the policy's stream bit 0 flipped) caught as it must: {m}"));
}
