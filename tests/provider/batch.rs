//! `WrBatch` and `DciBatch` against libmlx5: the same request lists that the
//! C half posts through `mlx5_post_send` (RC, UD) or libmlx5's `ibv_wr_*` /
//! `mlx5dv_wr_set_dc_addr(_stream)` entries (DC), posted again through
//! rrddmma's batch glue (opcode mapping, argument order, flags, one-entry or
//! list setter, inline, UD and DC addressing) onto libmlx5's own entries of a
//! second provider QP, made alike by the harness's library build
//! (tests/provider/mlx5_provider.c, `HARNESS_LIB`). Compared: every WQE's
//! bytes (masked fields as in send.rs, with the reason beside each), the
//! producer index, the doorbell record, the BlueFlame offset and every byte
//! written to the BlueFlame page.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::fmt::Write as _;
use std::ptr::NonNull;
use std::sync::OnceLock;

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::dc::DciBatch;
use rrddmma::prim::{BatchQp, Error, QpCaps, QpType, RemoteAddr, SendFlags, SendWr, Sge, WrBatch};

use super::build::{library_fn, unhex};
use super::send::{events, first_diff, layout, op_name, transport, Event, Request};
use super::send::{
    CAS, FAA, F_FENCE, F_INLINE, F_SIGNALED, F_SOLICITED, READ, SEND, SEND_IMM, SEND_INV, WRITE, WRITE_IMM,
};
use super::{Mismatch, Mutation};

/// An opaque `struct mlx5_qp` of the library.
#[repr(C)]
struct MQp {
    _opaque: [u8; 0],
}

/// The library's entry points (tests/provider/mlx5_provider.c, `HARNESS_LIB`).
struct Lib {
    make_sq: unsafe extern "C" fn(c_int, u32, u32, c_int, c_int, u32, u32, c_int, u64) -> *mut MQp,
    qp_ex: unsafe extern "C" fn(*mut MQp) -> *mut ffi::ibv_qp_ex,
    dv_qp: unsafe extern "C" fn(*mut MQp) -> *mut ffi::mlx5dv_qp_ex,
    sq_buf: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    bf_page: unsafe extern "C" fn(*mut MQp) -> *mut u8,
    set_prefer_bf: unsafe extern "C" fn(c_int),
    before: unsafe extern "C" fn(*mut MQp),
    after: unsafe extern "C" fn(*mut MQp, *mut u32),
    ah: unsafe extern "C" fn(u32, *const u8) -> *mut ffi::ibv_ah,
}

/// The library's provider objects share state (the context's BlueFlame
/// preference, AH slots, the queue maker's globals): the tests that drive
/// it run one at a time under this lock.
static LIB_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    LIB_LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    // SAFETY: each entry is the mlx5_provider.c function of the signature
    // its field gives.
    LIB.get_or_init(|| unsafe {
        Lib {
            make_sq: library_fn("h_make_sq"),
            qp_ex: library_fn("h_qp_ex"),
            dv_qp: library_fn("h_dv_qp"),
            sq_buf: library_fn("h_sq_buf"),
            bf_page: library_fn("h_bf_page"),
            set_prefer_bf: library_fn("h_set_prefer_bf"),
            before: library_fn("h_before"),
            after: library_fn("h_after"),
            ah: library_fn("h_ah"),
        }
    })
}

/// The BlueFlame sentinel of the C half (`SENTINEL`) and its page size.
const SENTINEL: u8 = 0xa5;
pub const BF_PAGE: usize = 4096;

/// One provider QP on our side, driven through rrddmma's batches.
struct Queue {
    qp: *mut MQp,
    batch: BatchQp,
    wqe_cnt: u32,
    prefer_bf: bool,
    transport: &'static str,
    /// Producer index and BlueFlame offset before the next list.
    cur_post: u32,
    bf_offset: u32,
}

impl Queue {
    fn new(f: &[&str]) -> Queue {
        let num = |i: usize| -> u64 { f[i].parse().unwrap() };
        let transport = transport(f);
        let (kind, qp_type) = match transport {
            "UD" => (1, QpType::UD),
            "DC" => (2, QpType::DRIVER),
            "DC streams" => (3, QpType::DRIVER),
            _ => (0, QpType::RC),
        };
        let wqe_cnt = num(1) as u32;
        let (max_gs, max_inline) = (num(2) as u32, num(3) as u32);
        let l = lib();
        // SAFETY: the library's constructor, with a Q line's values.
        let qp = unsafe {
            (l.make_sq)(
                kind,
                num(0) as u32,
                wqe_cnt,
                max_gs as c_int,
                max_inline as c_int,
                num(4) as u32,
                num(5) as u32,
                c_int::from(f[7] == "1"),
                num(8),
            )
        };
        // SAFETY: a live provider QP of the library, never freed.
        let ex = NonNull::new(unsafe { (l.qp_ex)(qp) }).unwrap();
        let caps = QpCaps::default().max_send_sge(max_gs).max_inline_data(max_inline);
        // SAFETY: `ex` is the provider's `ibv_qp_ex`, its entries installed by
        // `mlx5_qp_fill_wr_pfns` for every operation the lists use; it is
        // never freed and nothing else posts to it.
        let batch = unsafe { BatchQp::from_raw(ex, qp_type, caps) };
        Queue { qp, batch, wqe_cnt, prefer_bf: f[6] == "1", transport, cur_post: 0, bf_offset: 0 }
    }

    fn ring(&self) -> &[u8] {
        // SAFETY: the provider's send queue, `wqe_cnt` basic blocks, not
        // written while the slice lives.
        unsafe { std::slice::from_raw_parts((lib().sq_buf)(self.qp), self.wqe_cnt as usize * 64) }
    }

    fn bf_page(&self) -> &[u8] {
        // SAFETY: the QP's BlueFlame page, `BF_PAGE` bytes, as above.
        unsafe { std::slice::from_raw_parts((lib().bf_page)(self.qp), BF_PAGE) }
    }
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct BatchStats {
    pub queues: usize,
    pub lists: BTreeMap<&'static str, usize>,
    pub wqes: BTreeMap<String, usize>,
    pub inline_wqes: usize,
    pub list_setters: usize,
    /// Requests through the one-entry methods (`WrBatch::rdma_write` and the others).
    pub one_entry: usize,
    pub wrapped_lists: usize,
    /// Lists whose producer index passed a multiple of 65536.
    pub index_wraps: usize,
    pub blueflame: usize,
    pub doorbells: usize,
}

impl BatchStats {
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (i, (k, n)) in self.lists.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(s, " request lists on {} queues, {} WQEs (", self.queues, self.wqes.values().sum::<usize>());
        for (i, (k, n)) in self.wqes.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(
            s,
            "); {} inline, {} through a list setter, {} through the one-entry methods, {} lists across the \
             ring's end, {} across the 16-bit WQE index, {} BlueFlame copies, {} 8-byte doorbells",
            self.inline_wqes,
            self.list_setters,
            self.one_entry,
            self.wrapped_lists,
            self.index_wraps,
            self.blueflame,
            self.doorbells
        );
        s
    }
}

/// Replays the C half's lists of the queues whose transport is in `only`
/// through `WrBatch` (RC, UD) or `DciBatch` (DC); the first mismatch ends
/// the check.
pub fn check(out: &str, only: &[&str], mutation: Mutation) -> Result<BatchStats, Box<Mismatch>> {
    let _one_at_a_time = exclusive();
    let mut stats = BatchStats::default();
    let mut q: Option<Queue> = None;
    let mut list = 0usize;
    for event in events(out) {
        match event {
            Event::Queue(f) => {
                q = only.contains(&transport(&f)).then(|| Queue::new(&f));
                stats.queues += usize::from(q.is_some());
            }
            // Views are the direct writer's (send.rs); the provider's queue goes on.
            Event::View(_) => {}
            Event::List(reqs, p, w) => {
                if let Some(q) = q.as_mut() {
                    check_list(q, &reqs, &p, &w, list, mutation, &mut stats)?;
                    *stats.lists.entry(q.transport).or_default() += 1;
                    list += 1;
                }
            }
        }
    }
    Ok(stats)
}

/// Adds `r` to the open batch as a user of rrddmma's API would: through
/// `post` with a `SendWr`, or, when `direct` and the request is one
/// registered entry on RC, through the one-entry method of its opcode.
/// Returns whether a one-entry method took it.
fn post_one(q: &Queue, b: &mut Batch<'_>, r: &Request, slot: u32, mutate: bool, direct: bool) -> Result<bool, Error> {
    let sges: Vec<Sge> = r.sges.iter().map(|&(len, lkey, addr)| Sge::from_raw(addr, len, lkey)).collect();
    let remote = RemoteAddr { addr: r.raddr, rkey: r.rkey };
    // The C half prints imm_data as stored (big endian); rrddmma takes host order.
    let imm = u32::from_be(r.imm);
    let mut wr = match r.op {
        WRITE => SendWr::write(&sges, remote),
        WRITE_IMM => SendWr::write_imm(&sges, remote, imm),
        READ => SendWr::read(&sges, remote),
        SEND => SendWr::send(&sges),
        SEND_IMM => SendWr::send_imm(&sges, imm),
        // The invalidated key, host order as `ibv_send_wr::invalidate_rkey`.
        SEND_INV => SendWr::send_inv(&sges, r.imm),
        // (the generator's atomics carry one 8-byte target)
        CAS => SendWr::compare_swap(sges[..1].try_into().unwrap(), remote, r.compare_add, r.swap),
        FAA => SendWr::fetch_add(sges[..1].try_into().unwrap(), remote, r.compare_add),
        op => panic!("unknown opcode {op}"),
    };
    let mut flags = SendFlags::empty();
    for (bit, flag) in [
        (F_SIGNALED, SendFlags::SIGNALED),
        (F_FENCE, SendFlags::FENCE),
        (F_SOLICITED, SendFlags::SOLICITED),
        (F_INLINE, SendFlags::INLINE),
    ] {
        if r.flags & bit != 0 {
            flags = flags.union(flag);
        }
    }
    if mutate {
        // The mutation check: SOLICITED flipped in what our batch is given.
        flags = if flags.contains(SendFlags::SOLICITED) {
            flags.difference(SendFlags::SOLICITED)
        } else {
            flags.union(SendFlags::SOLICITED)
        };
    }
    if let (Batch::Wr(b), true, [sge]) = (&mut *b, direct && r.flags & F_INLINE == 0, &sges[..]) {
        let id = 0;
        // SAFETY: the QP has every operation's entry; the entry is never
        // dereferenced by a device (the ring is ordinary memory).
        unsafe {
            match r.op {
                WRITE => b.rdma_write(id, flags, sge, remote),
                READ => b.rdma_read(id, flags, sge, remote),
                SEND => b.send(id, flags, sge),
                SEND_INV => b.send_inv(id, flags, sge, r.imm),
                FAA => b.fetch_add(id, flags, sge, remote, r.compare_add),
                CAS => b.compare_swap(id, flags, sge, remote, r.compare_add, r.swap),
                _ => return b.post(&wr.flags(flags)).map(|()| false),
            }
        }
        return Ok(true);
    }
    wr = wr.flags(flags);
    let l = lib();
    if let Some((qpn, qkey, av)) = &r.ud {
        // SAFETY: an AH of the library, holding the C half's address vector.
        let ah = NonNull::new(unsafe { (l.ah)(slot, av.as_ptr()) }).unwrap();
        // SAFETY: the library's AH, alive for the whole run.
        wr = unsafe { wr.ud_raw(ah, *qpn, *qkey) };
    }
    match (b, &r.dc) {
        // SAFETY: the entries are never dereferenced by a device (the ring
        // is ordinary memory); inline entries point at our copies of the
        // printed bytes (`check_list`), alive until the batch completes.
        (Batch::Wr(b), None) => unsafe { b.post(&wr) }.map(|()| false),
        (Batch::Dc(b), Some((dctn, key, stream, av))) => {
            // SAFETY: an AH of the library, holding the C half's address vector.
            let ah = NonNull::new(unsafe { (l.ah)(slot, av.as_ptr()) }).unwrap();
            let stream = if q.transport == "DC streams" { *stream } else { 0 };
            // SAFETY: the library's AH and DCI, alive for the whole run;
            // the entries as for WrBatch above.
            unsafe { b.post_raw(&wr, ah, *dctn, *key, stream) }.map(|()| false)
        }
        _ => panic!("a DC request outside a DCI, or the reverse"),
    }
}

enum Batch<'q> {
    Wr(WrBatch<'q>),
    Dc(DciBatch<'q>),
}

fn check_list(
    q: &mut Queue,
    reqs: &[Request],
    p: &[&str],
    w: &[&str],
    list: usize,
    mutation: Mutation,
    stats: &mut BatchStats,
) -> Result<(), Box<Mismatch>> {
    assert_eq!(p[0], "0", "libmlx5 refused list {list}: the generator must post valid lists");
    let their_pi: u32 = p[1].parse().unwrap();
    let their_dbrec: u32 = p[2].parse().unwrap();
    let their_off_after: u32 = p[4].parse().unwrap();
    let their_db_off: usize = p[5].parse().unwrap();
    let their_db = unhex(p[7]);
    let their_blocks = unhex(w[2]);
    let transport = q.transport;
    let kind = |r: &Request| {
        let dc = if r.dc.is_some() { "DciBatch" } else { "WrBatch" };
        format!("{transport} {dc} {}", op_name(r.op))
    };
    let at = |i: usize| format!("list {list} request {i}");

    // Inline payloads: the C half's entries point into its own memory; ours
    // carry the printed bytes, cut as the C half cut them.
    let mut inline_bufs: Vec<Vec<u8>> = Vec::new();
    let mut reqs: Vec<Request> = reqs.to_vec();
    for r in &mut reqs {
        if r.flags & F_INLINE != 0 {
            let mut at = 0;
            for s in &mut r.sges {
                let bytes = r.inline[at..at + s.0 as usize].to_vec();
                at += s.0 as usize;
                s.2 = bytes.as_ptr() as u64;
                inline_bufs.push(bytes);
            }
        }
    }

    let l = lib();
    // SAFETY: the library's QP, between lists.
    unsafe {
        (l.set_prefer_bf)(c_int::from(q.prefer_bf));
        (l.before)(q.qp);
    }
    let first = q.cur_post;
    let off_before = q.bf_offset as usize;
    // SAFETY: the library's QP: its entries are libmlx5's; the requests'
    // memory is never touched by a device.
    let wr_batch = unsafe { WrBatch::from_raw(&q.batch) };
    let mut batch = if transport.starts_with("DC") {
        // SAFETY: the DCI's mlx5 view, of the same provider QP.
        let dv = NonNull::new(unsafe { (l.dv_qp)(q.qp) }).unwrap();
        // SAFETY: as above.
        let streams = (transport == "DC streams").then_some(crate::build::LOG_DCI_STREAMS);
        // SAFETY: as above; the C half's DCIs with streams have 2^LOG_DCI_STREAMS.
        Batch::Dc(unsafe { DciBatch::from_raw(wr_batch, dv, streams) })
    } else {
        Batch::Wr(wr_batch)
    };
    for (i, r) in reqs.iter().enumerate() {
        let mutate = mutation == Mutation::BatchFlag && list == 0 && i == 0;
        // Odd RC lists: one-entry requests through the one-entry methods.
        let direct = transport == "RC" && list % 2 == 1;
        match post_one(q, &mut batch, r, i as u32, mutate, direct) {
            Ok(one) => stats.one_entry += usize::from(one),
            Err(e) => return Err(Mismatch::value(&kind(r), &at(i), "post", "accepted", e).into()),
        }
        let name = format!("{}{}", if transport == "RC" { "" } else { "DC " }, op_name(r.op));
        let name = if transport == "UD" { format!("UD {}", op_name(r.op)) } else { name };
        *stats.wqes.entry(name).or_default() += 1;
        stats.inline_wqes += usize::from(r.is_inline());
        stats.list_setters += usize::from(r.sges.len() > 1);
    }
    let done = match batch {
        Batch::Wr(b) => b.complete(),
        Batch::Dc(b) => b.complete(),
    };
    if let Err(e) = done {
        let last = reqs.last().unwrap();
        return Err(Mismatch::value(&kind(last), &at(reqs.len() - 1), "complete", "0", e).into());
    }
    let mut after = [0u32; 3];
    // SAFETY: the library's QP; three words out.
    unsafe { (l.after)(q.qp, after.as_mut_ptr()) };
    let [ours_pi, ours_dbrec, ours_off_after] = after;
    q.cur_post = ours_pi;
    q.bf_offset = ours_off_after;
    if (first & (q.wqe_cnt - 1)) + ours_pi.wrapping_sub(first) > q.wqe_cnt {
        stats.wrapped_lists += 1;
    }
    if ours_pi >> 16 != first >> 16 {
        stats.index_wraps += 1;
    }

    // Each WQE, byte for byte, masked fields aside (send.rs, `layout`).
    let ring = q.ring();
    let mut start = first;
    for (i, r) in reqs.iter().enumerate() {
        let lay = layout(r, true);
        let ds_bytes = lay.last().map_or(0, |x| x.2);
        let bbs = ds_bytes.div_ceil(64);
        let from = (start - first) as usize * 64;
        let theirs = their_blocks.get(from..from + bbs * 64).unwrap_or(&[]);
        let ours: Vec<u8> = (0..bbs)
            .flat_map(|b| {
                let slot = (start as usize + b) & (q.wqe_cnt as usize - 1);
                ring[slot * 64..slot * 64 + 64].iter().copied()
            })
            .collect();
        if let Some((field, byte, t, o)) = first_diff(&lay, theirs, &ours) {
            return Err(Mismatch::at_byte(kind(r), at(i), field, byte, t, o));
        }
        start += bbs as u32;
    }
    let last = reqs.last().expect("lists hold at least one request");
    let (last_kind, last_at) = (kind(last), at(reqs.len() - 1));
    let value = |field: &str, t: u32, o: u32| Mismatch::same(&last_kind, &last_at, field, t, o);
    value("producer index (sq.cur_post)", their_pi, ours_pi)?;
    value("doorbell record", their_dbrec, ours_dbrec)?;
    value("BlueFlame offset written", their_db_off as u32, off_before as u32)?;
    value("BlueFlame offset after the doorbell", their_off_after, ours_off_after)?;
    // What was stored in the BlueFlame page: whole 8-byte words from the
    // offset, as the C half measures it.
    let ours_db = bf_written(q.bf_page(), off_before);
    let len = ours_db.len();
    value("doorbell kind (bytes written to the BlueFlame page)", their_db.len() as u32, len as u32)?;
    if len == 8 {
        stats.doorbells += 1;
    } else {
        stats.blueflame += 1;
    }
    if let Some((field, byte, t, o)) = first_diff(&layout(last, true), &their_db, ours_db) {
        return Err(Mismatch::at_byte(last_kind, last_at, format!("BlueFlame/doorbell write: {field}"), byte, t, o));
    }
    drop(inline_bufs);
    Ok(())
}

/// What a doorbell stored in a BlueFlame page filled with the sentinel
/// (`h_before`): the whole 8-byte words from `off` to the last one written.
pub fn bf_written(page: &[u8], off: usize) -> &[u8] {
    let mut len = 0;
    let mut w8 = 0;
    while off + w8 + 8 <= BF_PAGE {
        if page[off + w8..off + w8 + 8].iter().any(|&b| b != SENTINEL) {
            len = w8 + 8;
        }
        w8 += 8;
    }
    &page[off..off + len]
}

/// Findings 2a and 2b of the batch comparison, replayed on one RC queue:
/// what `WrBatch::post` did with a request without entries. Returns the
/// producer index, the first WQE's opcode byte and DS count, the second
/// WQE's opcode byte, and the bytes the lone inline request wrote to the
/// BlueFlame page.
pub fn empty_requests() -> (u32, u8, u8, u8, usize) {
    let _one_at_a_time = exclusive();
    // An RC queue of 8 basic blocks, BlueFlame register 1 of 256 bytes,
    // BlueFlame not preferred: a one-WQE list goes by BlueFlame only inline.
    let q = Queue::new(&["5", "8", "4", "64", "256", "1", "0", "0", "1", "rc"]);
    let l = lib();
    let sge = [Sge::from_raw(0x1000, 64, 7)];
    // SAFETY: the library's QP; nothing is ever read at the addresses.
    unsafe {
        (l.set_prefer_bf)(0);
        let mut b = WrBatch::from_raw(&q.batch);
        b.post(&SendWr::send_imm(&[], 9)).unwrap();
        b.post(&SendWr::send(&sge)).unwrap();
        b.complete().unwrap();
        (l.before)(q.qp);
        let mut b = WrBatch::from_raw(&q.batch);
        b.post(&SendWr::send(&[]).inline()).unwrap();
        b.complete().unwrap();
    }
    let mut after = [0u32; 3];
    // SAFETY: the library's QP; three words out.
    unsafe { (l.after)(q.qp, after.as_mut_ptr()) };
    let ring = q.ring();
    let page = q.bf_page();
    let written = 8 * page.chunks(8).filter(|w| w.iter().any(|&b| b != SENTINEL)).count();
    (after[0], ring[3], ring[7] & 0x3f, ring[64 + 3], written)
}

/// `DciBatch::post_stream`'s range check on one of the library's DCIs with
/// streams: `stream` posted on a batch told the DCI has
/// `2^log_num_concurrent` streams (`None`: one). Returns the panic message
/// (`None` when it posted) and whether the producer index stayed put.
pub fn stream_refusal(log_num_concurrent: Option<u8>, stream: u16) -> (Option<String>, bool) {
    let _one_at_a_time = exclusive();
    let q = Queue::new(&["9", "8", "4", "64", "0", "0", "0", "0", "3", "dcs"]);
    let l = lib();
    // An all-zero stand-in for the provider's `mlx5_ah` (its `ibv_ah` first,
    // then the address vector, well inside 256 bytes): libmlx5 only copies
    // the vector out of it. The library's own AH slots are left to the
    // comparisons running beside this.
    #[repr(C, align(64))]
    struct FakeAh([u8; 256]);
    let mut fake = FakeAh([0; 256]);
    let ah = NonNull::new(fake.0.as_mut_ptr().cast::<ffi::ibv_ah>()).unwrap();
    // SAFETY: the DCI's mlx5 view, of the library's provider QP.
    let dv = NonNull::new(unsafe { (l.dv_qp)(q.qp) }).unwrap();
    let sge = [Sge::from_raw(0x1000, 64, 7)];
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the library's QP and AH; nothing is ever read at the addresses.
        unsafe {
            let mut b = DciBatch::from_raw(WrBatch::from_raw(&q.batch), dv, log_num_concurrent);
            b.post_raw(&SendWr::send(&sge), ah, 0x55, 7, stream).unwrap();
            b.complete().unwrap();
        }
    }));
    let mut after = [0u32; 3];
    // SAFETY: the library's QP; three words out.
    unsafe { (l.after)(q.qp, after.as_mut_ptr()) };
    let msg = caught.err().map(|p| p.downcast_ref::<String>().cloned().unwrap_or_default());
    (msg, after[0] == 0)
}
