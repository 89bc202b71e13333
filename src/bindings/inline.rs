//! The `static inline` functions of `verbs.h`, in Rust.
//!
//! C callers get these from the header; a binding generator cannot, because
//! there is no symbol to link. Each one here does what the header's body does
//! (a call through the provider's function table, or through the extended
//! `verbs_context`), marked `#[inline(always)]` so that no call layer remains.
//! A null provider entry, which C would call and crash on, panics here with
//! the entry's name instead.
//!
//! `cargo xtask bindings --check` fails if the installed header gains an
//! inline that this file neither mirrors nor lists as deliberately absent.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use core::ffi::{c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;

#[cfg(feature = "dlopen")]
use super::dl_sys::*;
#[cfg(not(feature = "dlopen"))]
use super::sys::*;

#[cold]
#[inline(never)]
#[track_caller]
fn missing_op(name: &str) -> ! {
    panic!("the RDMA provider leaves `{name}` unset: this object does not support the operation")
}

/// Calls a provider function-table entry, panicking with its name when null.
macro_rules! call_op {
    ($f:expr, $name:expr, ( $($arg:expr),* )) => {
        match $f {
            Some(f) => f($($arg),*),
            None => missing_op($name),
        }
    };
}

/// `verbs_get_ctx`: the extended context around `ctx`, or null for a legacy provider.
///
/// # Safety
/// `ctx` must point to a live `ibv_context` from `ibv_open_device`.
#[inline(always)]
pub unsafe fn verbs_get_ctx(ctx: *mut ibv_context) -> *mut verbs_context {
    // SAFETY: the caller passes a live context.
    if unsafe { (*ctx).abi_compat } != usize::MAX as *mut c_void {
        return ptr::null_mut();
    }
    // SAFETY: an extended context embeds `ibv_context` as the last field of
    // `verbs_context`; stepping back by its offset stays inside that allocation.
    unsafe { ctx.cast::<u8>().sub(offset_of!(verbs_context, context)).cast() }
}

/// `verbs_get_ctx_op`: the extended context if the provider's table reaches
/// `op` (its size covers the field) and sets it; else null.
macro_rules! verbs_get_ctx_op {
    ($ctx:expr, $op:ident) => {{
        // SAFETY: forwarded from the enclosing function's contract.
        let vctx = unsafe { verbs_get_ctx($ctx) };
        if vctx.is_null() {
            ptr::null_mut()
        } else {
            // SAFETY: `vctx` is non-null only for an extended context, whose
            // `sz` says how many bytes before `context` the provider filled in;
            // the op is read only when `sz` covers it.
            let has_op = unsafe {
                (*vctx).sz >= size_of::<verbs_context>() - offset_of!(verbs_context, $op) && (*vctx).$op.is_some()
            };
            if has_op {
                vctx
            } else {
                ptr::null_mut()
            }
        }
    }};
}

#[cfg(not(feature = "dlopen"))]
unsafe extern "C" {
    /// The exported `ibv_query_port` symbol, which takes the old, shorter
    /// `struct _compat_ibv_port_attr`. Use [`ibv_query_port`] instead.
    #[link_name = "ibv_query_port"]
    pub fn ibv_query_port_compat(
        context: *mut ibv_context,
        port_num: u8,
        port_attr: *mut _compat_ibv_port_attr,
    ) -> c_int;
}

fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// `ibv_query_port` (the header macro, `___ibv_query_port`).
///
/// # Safety
/// `context` must be live; `port_attr` must be valid for writes.
#[inline]
pub unsafe fn ibv_query_port(context: *mut ibv_context, port_num: u8, port_attr: *mut ibv_port_attr) -> c_int {
    // SAFETY: forwarded contract, with the bound struct's size.
    unsafe { ibv_query_port_sized(context, port_num, port_attr, size_of::<ibv_port_attr>()) }
}

/// `ibv_query_port` telling libibverbs that `port_attr` holds `size` bytes,
/// so that a newer libibverbs fills fields these bindings do not have (it
/// copies through a buffer of its own when `size` is smaller than its struct).
///
/// # Safety
/// `context` must be live; `port_attr` valid for writes of `size` bytes, at
/// least `size_of::<ibv_port_attr>()`.
#[inline]
pub unsafe fn ibv_query_port_sized(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    size: usize,
) -> c_int {
    let vctx = verbs_get_ctx_op!(context, query_port);
    if vctx.is_null() {
        // SAFETY: `port_attr` is valid for writes of `size` bytes; the compat
        // struct is a prefix of it.
        unsafe {
            ptr::write_bytes(port_attr.cast::<u8>(), 0, size);
            return ibv_query_port_compat(context, port_num, port_attr.cast());
        }
    }
    // SAFETY: `vctx` is non-null and `query_port` is set (checked above).
    unsafe { call_op!((*vctx).query_port, "query_port", (context, port_num, port_attr, size)) }
}

/// `ibv_query_device_ex`.
///
/// # Safety
/// `context` must be live; `input` null or valid; `attr` valid for writes.
#[inline]
pub unsafe fn ibv_query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
) -> c_int {
    // SAFETY: `input` is null or valid, per the contract.
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return libc::EINVAL;
    }
    let vctx = verbs_get_ctx_op!(context, query_device_ex);
    if !vctx.is_null() {
        // SAFETY: `vctx` is non-null with `query_device_ex` set.
        let ret = unsafe {
            call_op!(
                (*vctx).query_device_ex,
                "query_device_ex",
                (context, input, attr, size_of::<ibv_device_attr_ex>())
            )
        };
        if ret != libc::EOPNOTSUPP && ret != libc::ENOSYS {
            return ret;
        }
    }
    // SAFETY: `attr` is valid for writes; `orig_attr` is its first member.
    unsafe {
        ptr::write_bytes(attr, 0, 1);
        ibv_query_device(context, ptr::addr_of_mut!((*attr).orig_attr))
    }
}

/// `ibv_create_cq_ex`; null with errno `EOPNOTSUPP` when the provider lacks it.
///
/// # Safety
/// `context` must be live; `cq_attr` valid.
#[inline]
pub unsafe fn ibv_create_cq_ex(context: *mut ibv_context, cq_attr: *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex {
    let vctx = verbs_get_ctx_op!(context, create_cq_ex);
    if vctx.is_null() {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    // SAFETY: `vctx` is non-null with `create_cq_ex` set.
    unsafe { call_op!((*vctx).create_cq_ex, "create_cq_ex", (context, cq_attr)) }
}

/// `ibv_create_qp_ex`; null with errno `EOPNOTSUPP` when the provider lacks it.
///
/// # Safety
/// `context` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_create_qp_ex(context: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    // SAFETY: `attr` is valid per the contract.
    if unsafe { (*attr).comp_mask } == ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0 {
        // SAFETY: `ibv_qp_init_attr` is the prefix of `ibv_qp_init_attr_ex`.
        return unsafe { ibv_create_qp((*attr).pd, attr.cast()) };
    }
    let vctx = verbs_get_ctx_op!(context, create_qp_ex);
    if vctx.is_null() {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    // SAFETY: `vctx` is non-null with `create_qp_ex` set.
    unsafe { call_op!((*vctx).create_qp_ex, "create_qp_ex", (context, attr)) }
}

/// `ibv_post_send`: posts a linked list of send work requests.
///
/// # Safety
/// `qp` must be live; `wr` a valid list whose buffers stay registered and
/// alive until their completions; `bad_wr` valid for writes.
#[inline(always)]
pub unsafe fn ibv_post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int {
    // SAFETY: a live QP points to its live context.
    unsafe { call_op!((*(*qp).context).ops.post_send, "post_send", (qp, wr, bad_wr)) }
}

/// `ibv_post_recv`: posts a linked list of receive work requests.
///
/// # Safety
/// As [`ibv_post_send`].
#[inline(always)]
pub unsafe fn ibv_post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: a live QP points to its live context.
    unsafe { call_op!((*(*qp).context).ops.post_recv, "post_recv", (qp, wr, bad_wr)) }
}

/// `ibv_post_srq_recv`: posts receive work requests to a shared receive queue.
///
/// # Safety
/// As [`ibv_post_send`], for an SRQ.
#[inline(always)]
pub unsafe fn ibv_post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: a live SRQ points to its live context.
    unsafe { call_op!((*(*srq).context).ops.post_srq_recv, "post_srq_recv", (srq, wr, bad_wr)) }
}

/// `ibv_poll_cq`: polls up to `num_entries` completions into `wc`.
///
/// # Safety
/// `cq` must be live; `wc` valid for `num_entries` writes.
#[inline(always)]
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: a live CQ points to its live context.
    unsafe { call_op!((*(*cq).context).ops.poll_cq, "poll_cq", (cq, num_entries, wc)) }
}

/// `ibv_req_notify_cq`: arms the CQ's completion channel.
///
/// # Safety
/// `cq` must be live.
#[inline(always)]
pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: a live CQ points to its live context.
    unsafe { call_op!((*(*cq).context).ops.req_notify_cq, "req_notify_cq", (cq, solicited_only)) }
}

/// `ibv_cq_ex_to_cq`: an extended CQ begins with its `ibv_cq`.
#[inline(always)]
pub fn ibv_cq_ex_to_cq(cq: *mut ibv_cq_ex) -> *mut ibv_cq {
    cq.cast()
}

/// Calls an extended-context entry, or returns `EOPNOTSUPP` / sets errno and
/// returns null when the provider lacks it, as the header's inlines do.
macro_rules! vctx_call {
    ($ctx:expr, $op:ident, int ($($arg:expr),*)) => {{
        let vctx = verbs_get_ctx_op!($ctx, $op);
        if vctx.is_null() {
            return libc::EOPNOTSUPP;
        }
        // SAFETY: `vctx` is non-null with the entry set (checked above).
        unsafe { call_op!((*vctx).$op, stringify!($op), ($($arg),*)) }
    }};
    ($ctx:expr, $op:ident, ptr ($($arg:expr),*)) => {{
        let vctx = verbs_get_ctx_op!($ctx, $op);
        if vctx.is_null() {
            set_errno(libc::EOPNOTSUPP);
            return ptr::null_mut();
        }
        // SAFETY: `vctx` is non-null with the entry set (checked above).
        unsafe { call_op!((*vctx).$op, stringify!($op), ($($arg),*)) }
    }};
}

/// `ibv_modify_cq`: CQ moderation; `EOPNOTSUPP` when the provider has none.
///
/// # Safety
/// `cq` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_modify_cq(cq: *mut ibv_cq, attr: *mut ibv_modify_cq_attr) -> c_int {
    // SAFETY: a live CQ points to its live context.
    let ctx = unsafe { (*cq).context };
    vctx_call!(ctx, modify_cq, int(cq, attr))
}

/// `ibv_query_rt_values_ex`: the device's real-time clock values.
///
/// # Safety
/// `context` must be live; `values` valid.
#[inline]
pub unsafe fn ibv_query_rt_values_ex(context: *mut ibv_context, values: *mut ibv_values_ex) -> c_int {
    vctx_call!(context, query_rt_values, int(context, values))
}

/// `ibv_advise_mr`: prefetch hints for ODP regions.
///
/// # Safety
/// `pd` must be live; `sg_list` valid for `num_sge` entries.
#[inline]
pub unsafe fn ibv_advise_mr(
    pd: *mut ibv_pd,
    advice: ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    // SAFETY: a live PD points to its live context.
    let ctx = unsafe { (*pd).context };
    vctx_call!(ctx, advise_mr, int(pd, advice, flags, sg_list, num_sge))
}

/// `ibv_query_gid_ex`: one GID table entry with its type and netdev.
/// (Absent with MLNX_OFED 4.x, whose libibverbs lacks `_ibv_query_gid_ex`.)
///
/// # Safety
/// `context` must be live; `entry` valid for writes.
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
#[inline]
pub unsafe fn ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
) -> c_int {
    // SAFETY: forwarded contract; the size is the bound struct's.
    unsafe { _ibv_query_gid_ex(context, port_num, gid_index, entry, flags, size_of::<ibv_gid_entry>()) }
}

/// `ibv_open_xrcd`: null with errno `EOPNOTSUPP` when the provider has no XRC.
///
/// # Safety
/// `context` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_open_xrcd(context: *mut ibv_context, attr: *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd {
    vctx_call!(context, open_xrcd, ptr(context, attr))
}

/// `ibv_close_xrcd`.
///
/// # Safety
/// `xrcd` must come from [`ibv_open_xrcd`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    // SAFETY: an XRCD exists only on an extended context that opened it.
    unsafe {
        let vctx = verbs_get_ctx((*xrcd).context);
        call_op!((*vctx).close_xrcd, "close_xrcd", (xrcd))
    }
}

/// `ibv_alloc_dm`: device memory; null with errno `EOPNOTSUPP` when there is none.
///
/// # Safety
/// `context` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_alloc_dm(context: *mut ibv_context, attr: *mut ibv_alloc_dm_attr) -> *mut ibv_dm {
    vctx_call!(context, alloc_dm, ptr(context, attr))
}

/// `ibv_free_dm`.
///
/// # Safety
/// `dm` must come from [`ibv_alloc_dm`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_free_dm(dm: *mut ibv_dm) -> c_int {
    // SAFETY: a live DM points to its live context.
    let ctx = unsafe { (*dm).context };
    vctx_call!(ctx, free_dm, int(dm))
}

/// `ibv_alloc_td`: a thread domain; null with errno `EOPNOTSUPP` when the
/// provider has none.
///
/// # Safety
/// `context` must be live; `init_attr` valid.
#[inline]
pub unsafe fn ibv_alloc_td(context: *mut ibv_context, init_attr: *mut ibv_td_init_attr) -> *mut ibv_td {
    vctx_call!(context, alloc_td, ptr(context, init_attr))
}

/// `ibv_dealloc_td`; `EOPNOTSUPP` when the provider has no entry for it.
///
/// # Safety
/// `td` must come from [`ibv_alloc_td`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_dealloc_td(td: *mut ibv_td) -> c_int {
    // SAFETY: a live TD points to its live context.
    let ctx = unsafe { (*td).context };
    vctx_call!(ctx, dealloc_td, int(td))
}

/// `ibv_modify_wq`: a WQ's state; `EOPNOTSUPP` when the provider has no entry.
///
/// # Safety
/// `wq` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_modify_wq(wq: *mut ibv_wq, attr: *mut ibv_wq_attr) -> c_int {
    // SAFETY: a live WQ points to its live context.
    let ctx = unsafe { (*wq).context };
    vctx_call!(ctx, modify_wq, int(wq, attr))
}

/// `ibv_destroy_wq`; `EOPNOTSUPP` when the provider has no entry.
///
/// # Safety
/// `wq` must come from `ibv_create_wq` / `mlx5dv_create_wq` and not be used afterwards.
#[inline]
pub unsafe fn ibv_destroy_wq(wq: *mut ibv_wq) -> c_int {
    // SAFETY: a live WQ points to its live context.
    let ctx = unsafe { (*wq).context };
    vctx_call!(ctx, destroy_wq, int(wq))
}

/// `ibv_alloc_parent_domain`: a PD-like object over `attr.pd` (and
/// `attr.td`); null with errno `EOPNOTSUPP` when the provider has none.
/// Freed with `ibv_dealloc_pd`.
///
/// # Safety
/// `context` must be live; `attr` valid, its PD (and TD, if any) live objects
/// of `context`.
#[inline]
pub unsafe fn ibv_alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    vctx_call!(context, alloc_parent_domain, ptr(context, attr))
}

/// `ibv_alloc_mw`: a memory window; null with errno `EOPNOTSUPP` when the
/// provider has none.
///
/// # Safety
/// `pd` must be live.
#[inline]
pub unsafe fn ibv_alloc_mw(pd: *mut ibv_pd, mw_type: ibv_mw_type) -> *mut ibv_mw {
    // SAFETY: a live PD points to its live context.
    match unsafe { (*(*pd).context).ops.alloc_mw } {
        // SAFETY: the provider's entry, called as the header does.
        Some(f) => unsafe { f(pd, mw_type) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_mw`.
///
/// # Safety
/// `mw` must come from [`ibv_alloc_mw`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: a live MW points to its live context.
    unsafe { call_op!((*(*mw).context).ops.dealloc_mw, "dealloc_mw", (mw)) }
}

/// `ibv_inc_rkey`: the next rkey tag (low 8 bits) for rebinding a window.
#[inline]
pub fn ibv_inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ibv_bind_mw`: binds a type 1 window through the send queue.
///
/// # Safety
/// `qp` and `mw` must be live; `mw_bind` valid.
#[inline]
pub unsafe fn ibv_bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut ibv_mw_bind) -> c_int {
    // SAFETY: the caller passes live objects.
    unsafe {
        let info = &(*mw_bind).bind_info;
        if (*mw).type_ != ibv_mw_type::IBV_MW_TYPE_1 {
            return libc::EINVAL;
        }
        if info.mr.is_null() && (info.addr != 0 || info.length != 0) {
            return libc::EINVAL;
        }
        if !info.mr.is_null() && (*mw).pd != (*info.mr).pd {
            return libc::EPERM;
        }
        call_op!((*(*mw).context).ops.bind_mw, "bind_mw", (qp, mw, mw_bind))
    }
}

/// `ibv_create_srq_ex`: a basic SRQ through `ibv_create_srq` when only the PD
/// (and type `BASIC`) is asked for, as the header does; otherwise the
/// extended entry (XRC and tag-matching SRQs), null with errno `EOPNOTSUPP`
/// when the provider lacks it.
///
/// # Safety
/// `context` must be live; `attr` valid, naming live objects of `context`.
#[inline]
pub unsafe fn ibv_create_srq_ex(context: *mut ibv_context, attr: *mut ibv_srq_init_attr_ex) -> *mut ibv_srq {
    use ibv_srq_init_attr_mask as M;
    // SAFETY: the caller passes a valid `attr`.
    let (mask, basic, pd) =
        unsafe { ((*attr).comp_mask, (*attr).srq_type == ibv_srq_type::IBV_SRQT_BASIC, (*attr).pd) };
    let pd_only = mask & !(M::IBV_SRQ_INIT_ATTR_PD.0 | M::IBV_SRQ_INIT_ATTR_TYPE.0) == 0;
    if pd_only && mask & M::IBV_SRQ_INIT_ATTR_PD.0 != 0 && (mask & M::IBV_SRQ_INIT_ATTR_TYPE.0 == 0 || basic) {
        // SAFETY: `ibv_srq_init_attr` is the leading part of the extended struct.
        return unsafe { ibv_create_srq(pd, attr.cast()) };
    }
    vctx_call!(context, create_srq_ex, ptr(context, attr))
}

/// `ibv_get_srq_num`: the number of an XRC SRQ (what a sender names as its
/// remote SRQN); `EOPNOTSUPP` when the provider has no XRC.
///
/// # Safety
/// `srq` must be live; `srq_num` valid for writes.
#[inline]
pub unsafe fn ibv_get_srq_num(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    // SAFETY: a live SRQ points to its live context.
    let ctx = unsafe { (*srq).context };
    vctx_call!(ctx, get_srq_num, int(srq, srq_num))
}

/// `ibv_open_qp`: opens a shareable (XRC receive) QP by number; null with
/// errno `EOPNOTSUPP` when the provider has no XRC.
///
/// # Safety
/// `context` must be live; `attr` valid, its XRCD a live one of `context`.
#[inline]
pub unsafe fn ibv_open_qp(context: *mut ibv_context, attr: *mut ibv_qp_open_attr) -> *mut ibv_qp {
    vctx_call!(context, open_qp, ptr(context, attr))
}

/// `ibv_reg_dm_mr`: registers a range of device memory; null with errno
/// `EOPNOTSUPP` when the provider cannot.
///
/// # Safety
/// `pd` and `dm` must be live objects of one context.
#[inline]
pub unsafe fn ibv_reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: usize,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: a live PD points to its live context.
    let ctx = unsafe { (*pd).context };
    vctx_call!(ctx, reg_dm_mr, ptr(pd, dm, dm_offset, length, access))
}

/// `ibv_modify_qp_rate_limit`: packet pacing; `EOPNOTSUPP` when the provider has none.
///
/// # Safety
/// `qp` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_modify_qp_rate_limit(qp: *mut ibv_qp, attr: *mut ibv_qp_rate_limit_attr) -> c_int {
    // SAFETY: a live QP points to its live context.
    let ctx = unsafe { (*qp).context };
    vctx_call!(ctx, modify_qp_rate_limit, int(qp, attr))
}

/// `ibv_create_counters`: a counters object; null with errno `EOPNOTSUPP`
/// when the provider has none.
///
/// # Safety
/// `context` must be live; `attr` valid.
#[inline]
pub unsafe fn ibv_create_counters(context: *mut ibv_context, attr: *mut ibv_counters_init_attr) -> *mut ibv_counters {
    vctx_call!(context, create_counters, ptr(context, attr))
}

/// `ibv_destroy_counters`.
///
/// # Safety
/// `counters` must come from [`ibv_create_counters`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_destroy_counters(counters: *mut ibv_counters) -> c_int {
    // SAFETY: live counters point to their live context.
    let ctx = unsafe { (*counters).context };
    vctx_call!(ctx, destroy_counters, int(counters))
}

/// `ibv_attach_counters_point_flow`: binds a counter of `counters` to what a
/// flow counts (the flow is null: the attach precedes the flow's creation).
///
/// # Safety
/// `counters` must be live; `attr` valid; `flow` null or live.
#[inline]
pub unsafe fn ibv_attach_counters_point_flow(
    counters: *mut ibv_counters,
    attr: *mut ibv_counter_attach_attr,
    flow: *mut ibv_flow,
) -> c_int {
    // SAFETY: live counters point to their live context.
    let ctx = unsafe { (*counters).context };
    vctx_call!(ctx, attach_counters_point_flow, int(counters, attr, flow))
}

/// `ibv_read_counters`: reads `ncounters` values.
///
/// # Safety
/// `counters` must be live; `values` valid for `ncounters` writes.
#[inline]
pub unsafe fn ibv_read_counters(counters: *mut ibv_counters, values: *mut u64, ncounters: u32, flags: u32) -> c_int {
    // SAFETY: live counters point to their live context.
    let ctx = unsafe { (*counters).context };
    vctx_call!(ctx, read_counters, int(counters, values, ncounters, flags))
}

/// `ibv_create_flow`: a steering rule on `qp`; null with errno `EOPNOTSUPP`
/// when the provider has none.
///
/// # Safety
/// `qp` must be live; `flow` an attribute followed by its `num_of_specs` specs.
#[inline]
pub unsafe fn ibv_create_flow(qp: *mut ibv_qp, flow: *mut ibv_flow_attr) -> *mut ibv_flow {
    // SAFETY: a live QP points to its live context.
    let ctx = unsafe { (*qp).context };
    vctx_call!(ctx, ibv_create_flow, ptr(qp, flow))
}

/// `ibv_destroy_flow`.
///
/// # Safety
/// `flow` must come from [`ibv_create_flow`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_destroy_flow(flow: *mut ibv_flow) -> c_int {
    // SAFETY: a live flow points to its live context.
    let ctx = unsafe { (*flow).context };
    vctx_call!(ctx, ibv_destroy_flow, int(flow))
}

/// Functions that forward to a function pointer of the object itself.
macro_rules! forward {
    ($( $(#[$m:meta])* pub unsafe fn $name:ident($obj:ident: *mut $ty:ty $(, $arg:ident: $at:ty)*) $(-> $ret:ty)? => $field:ident; )*) => {$(
        $(#[$m])*
        ///
        /// # Safety
        /// The object must be live and support the operation; pointer
        /// arguments must be valid as the C function documents.
        #[inline(always)]
        pub unsafe fn $name($obj: *mut $ty $(, $arg: $at)*) $(-> $ret)? {
            // SAFETY: the caller passes a live object; the entry is checked for null.
            unsafe { call_op!((*$obj).$field, stringify!($field), ($obj $(, $arg)*)) }
        }
    )*};
}

forward! {
    /// `ibv_wr_atomic_cmp_swp`: 8-byte compare-and-swap at `remote_addr`.
    pub unsafe fn ibv_wr_atomic_cmp_swp(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, compare: u64, swap: u64) => wr_atomic_cmp_swp;
    /// `ibv_wr_atomic_fetch_add`: 8-byte fetch-and-add at `remote_addr`.
    pub unsafe fn ibv_wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) => wr_atomic_fetch_add;
    /// `ibv_wr_local_inv`: invalidates a local rkey.
    pub unsafe fn ibv_wr_local_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) => wr_local_inv;
    /// `ibv_wr_rdma_read`: RDMA READ from `remote_addr`.
    pub unsafe fn ibv_wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) => wr_rdma_read;
    /// `ibv_wr_rdma_write`: RDMA WRITE to `remote_addr`.
    pub unsafe fn ibv_wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) => wr_rdma_write;
    /// `ibv_wr_rdma_write_imm`: RDMA WRITE with immediate data (big-endian).
    pub unsafe fn ibv_wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: u32) => wr_rdma_write_imm;
    /// `ibv_wr_send`: SEND.
    pub unsafe fn ibv_wr_send(qp: *mut ibv_qp_ex) => wr_send;
    /// `ibv_wr_send_imm`: SEND with immediate data (big-endian).
    pub unsafe fn ibv_wr_send_imm(qp: *mut ibv_qp_ex, imm_data: u32) => wr_send_imm;
    /// `ibv_wr_send_inv`: SEND with invalidate.
    pub unsafe fn ibv_wr_send_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) => wr_send_inv;
    /// `ibv_wr_set_ud_addr`: destination of a UD work request.
    pub unsafe fn ibv_wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) => wr_set_ud_addr;
    /// `ibv_wr_set_xrc_srqn`: remote SRQ of an XRC work request.
    pub unsafe fn ibv_wr_set_xrc_srqn(qp: *mut ibv_qp_ex, remote_srqn: u32) => wr_set_xrc_srqn;
    /// `ibv_wr_set_inline_data`: inline payload (copied at the call).
    pub unsafe fn ibv_wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) => wr_set_inline_data;
    /// `ibv_wr_set_inline_data_list`: inline payload gathered from a list.
    pub unsafe fn ibv_wr_set_inline_data_list(qp: *mut ibv_qp_ex, num_buf: usize, buf_list: *const ibv_data_buf) => wr_set_inline_data_list;
    /// `ibv_wr_set_sge`: one scatter/gather element.
    pub unsafe fn ibv_wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) => wr_set_sge;
    /// `ibv_wr_set_sge_list`: a scatter/gather list.
    pub unsafe fn ibv_wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) => wr_set_sge_list;
    /// `ibv_wr_start`: opens a batch of work requests.
    pub unsafe fn ibv_wr_start(qp: *mut ibv_qp_ex) => wr_start;
    /// `ibv_wr_complete`: posts the batch with one doorbell; 0 or an errno.
    pub unsafe fn ibv_wr_complete(qp: *mut ibv_qp_ex) -> c_int => wr_complete;
    /// `ibv_wr_abort`: drops the open batch.
    pub unsafe fn ibv_wr_abort(qp: *mut ibv_qp_ex) => wr_abort;
    /// `ibv_wr_atomic_write`: 8-byte atomic write of `*atomic_wr`.
    pub unsafe fn ibv_wr_atomic_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, atomic_wr: *const c_void) => wr_atomic_write;

    /// `mlx5dv_wr_set_dc_addr`: DC destination of the current request.
    pub unsafe fn mlx5dv_wr_set_dc_addr(mqp: *mut mlx5dv_qp_ex, ah: *mut ibv_ah, remote_dctn: u32, remote_dc_key: u64) => wr_set_dc_addr;
    /// `mlx5dv_wr_set_dc_addr_stream`: DC destination and DCI stream of the current request.
    pub unsafe fn mlx5dv_wr_set_dc_addr_stream(mqp: *mut mlx5dv_qp_ex, ah: *mut ibv_ah, remote_dctn: u32, remote_dc_key: u64, stream_id: u16) => wr_set_dc_addr_stream;

    /// `ibv_start_poll`: begins a polling pass; 0, `ENOENT` when empty, or an errno.
    pub unsafe fn ibv_start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int => start_poll;
    /// `ibv_next_poll`: advances to the next completion; 0, `ENOENT`, or an errno.
    pub unsafe fn ibv_next_poll(cq: *mut ibv_cq_ex) -> c_int => next_poll;
    /// `ibv_end_poll`: ends the polling pass.
    pub unsafe fn ibv_end_poll(cq: *mut ibv_cq_ex) => end_poll;
    /// `ibv_wc_read_opcode`: opcode of the current completion.
    pub unsafe fn ibv_wc_read_opcode(cq: *mut ibv_cq_ex) -> ibv_wc_opcode => read_opcode;
    /// `ibv_wc_read_vendor_err`: vendor syndrome of the current completion.
    pub unsafe fn ibv_wc_read_vendor_err(cq: *mut ibv_cq_ex) -> u32 => read_vendor_err;
    /// `ibv_wc_read_byte_len`: bytes received.
    pub unsafe fn ibv_wc_read_byte_len(cq: *mut ibv_cq_ex) -> u32 => read_byte_len;
    /// `ibv_wc_read_imm_data`: immediate data (big-endian).
    pub unsafe fn ibv_wc_read_imm_data(cq: *mut ibv_cq_ex) -> u32 => read_imm_data;
    /// `ibv_wc_read_invalidated_rkey`: rkey invalidated by a SEND_WITH_INV.
    pub unsafe fn ibv_wc_read_invalidated_rkey(cq: *mut ibv_cq_ex) -> u32 => read_imm_data;
    /// `ibv_wc_read_qp_num`: local QP number.
    pub unsafe fn ibv_wc_read_qp_num(cq: *mut ibv_cq_ex) -> u32 => read_qp_num;
    /// `ibv_wc_read_src_qp`: remote QP number (UD).
    pub unsafe fn ibv_wc_read_src_qp(cq: *mut ibv_cq_ex) -> u32 => read_src_qp;
    /// `ibv_wc_read_wc_flags`: `IBV_WC_*` flags.
    pub unsafe fn ibv_wc_read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint => read_wc_flags;
    /// `ibv_wc_read_slid`: source LID.
    pub unsafe fn ibv_wc_read_slid(cq: *mut ibv_cq_ex) -> u32 => read_slid;
    /// `ibv_wc_read_sl`: service level.
    pub unsafe fn ibv_wc_read_sl(cq: *mut ibv_cq_ex) -> u8 => read_sl;
    /// `ibv_wc_read_dlid_path_bits`: destination LID path bits.
    pub unsafe fn ibv_wc_read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 => read_dlid_path_bits;
    /// `ibv_wc_read_completion_ts`: raw hardware completion timestamp.
    pub unsafe fn ibv_wc_read_completion_ts(cq: *mut ibv_cq_ex) -> u64 => read_completion_ts;
    /// `ibv_wc_read_completion_wallclock_ns`: completion time in nanoseconds.
    pub unsafe fn ibv_wc_read_completion_wallclock_ns(cq: *mut ibv_cq_ex) -> u64 => read_completion_wallclock_ns;
    /// `ibv_wc_read_cvlan`: customer VLAN.
    pub unsafe fn ibv_wc_read_cvlan(cq: *mut ibv_cq_ex) -> u16 => read_cvlan;
    /// `ibv_wc_read_flow_tag`: flow tag.
    pub unsafe fn ibv_wc_read_flow_tag(cq: *mut ibv_cq_ex) -> u32 => read_flow_tag;
    /// `ibv_wc_read_tm_info`: tag-matching tag and application context.
    pub unsafe fn ibv_wc_read_tm_info(cq: *mut ibv_cq_ex, tm_info: *mut ibv_wc_tm_info) => read_tm_info;
}

/// `ibv_post_srq_ops`: tag-matching operations (tag add, remove, sync) on a
/// tag-matching SRQ; `EOPNOTSUPP` with `*bad_op = op` when the provider has
/// none.
///
/// # Safety
/// `srq` must be live; `op` a valid, null-terminated list; `bad_op` valid
/// for a write.
#[inline]
pub unsafe fn ibv_post_srq_ops(srq: *mut ibv_srq, op: *mut ibv_ops_wr, bad_op: *mut *mut ibv_ops_wr) -> c_int {
    // SAFETY: a live SRQ points to its live context.
    let ctx = unsafe { (*srq).context };
    if verbs_get_ctx_op!(ctx, post_srq_ops).is_null() {
        // SAFETY: `bad_op` is valid for a write (the caller's contract).
        unsafe { *bad_op = op };
        return libc::EOPNOTSUPP;
    }
    vctx_call!(ctx, post_srq_ops, int(srq, op, bad_op))
}

/// `ibv_create_wq`: a work queue (a receive WQ for RSS); null with errno
/// `EOPNOTSUPP` when the provider has none. As the header's inline, it sets
/// the WQ's context, event count, mutex and condition variable.
///
/// # Safety
/// `context` must be live; `attr` valid, its PD and CQ live objects of `context`.
#[inline]
pub unsafe fn ibv_create_wq(context: *mut ibv_context, attr: *mut ibv_wq_init_attr) -> *mut ibv_wq {
    let vctx = verbs_get_ctx_op!(context, create_wq);
    if vctx.is_null() {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    // SAFETY: `vctx` is non-null with the entry set (checked above).
    let wq: *mut ibv_wq = unsafe { call_op!((*vctx).create_wq, "create_wq", (context, attr)) };
    if !wq.is_null() {
        // SAFETY: the provider's new WQ, not yet shared; `attr` is valid.
        unsafe {
            (*wq).wq_context = (*attr).wq_context;
            (*wq).events_completed = 0;
            libc::pthread_mutex_init(ptr::addr_of_mut!((*wq).mutex).cast(), ptr::null());
            libc::pthread_cond_init(ptr::addr_of_mut!((*wq).cond).cast(), ptr::null());
        }
    }
    wq
}

/// `ibv_create_rwq_ind_table`: a receive WQ indirection table; null with
/// errno `EOPNOTSUPP` when the provider has none.
///
/// # Safety
/// `context` must be live; `attr` valid, its table `2^log_ind_tbl_size` live WQs.
#[inline]
pub unsafe fn ibv_create_rwq_ind_table(
    context: *mut ibv_context,
    attr: *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table {
    vctx_call!(context, create_rwq_ind_table, ptr(context, attr))
}

/// `ibv_destroy_rwq_ind_table`.
///
/// # Safety
/// `table` must come from [`ibv_create_rwq_ind_table`] and not be used afterwards.
#[inline]
pub unsafe fn ibv_destroy_rwq_ind_table(table: *mut ibv_rwq_ind_table) -> c_int {
    // SAFETY: a live table points to its live context.
    let ctx = unsafe { (*table).context };
    vctx_call!(ctx, destroy_rwq_ind_table, int(table))
}

#[cfg(test)]
mod tests {
    //! Dispatch checks on hand-built provider tables: no device needed.

    use super::*;

    /// A provider's `create_cq_ex` that hands back its attribute pointer
    /// (it reads no pointer: a safe function).
    extern "C" fn fake_create_cq_ex(_: *mut ibv_context, attr: *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex {
        // Returns the attr pointer, so the test can see the call went through.
        attr.cast()
    }

    /// A provider's `post_send` that accepts everything and returns 42.
    ///
    /// # Safety
    /// `bad` is valid for a write, as `ibv_post_send` passes it.
    unsafe extern "C" fn fake_post_send(_: *mut ibv_qp, _: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
        // SAFETY: `bad` is valid for a write (the contract above).
        unsafe { *bad = ptr::null_mut() };
        42
    }

    fn extended() -> Box<verbs_context> {
        let mut v: Box<verbs_context> = Box::default();
        v.context.abi_compat = usize::MAX as *mut c_void;
        v.sz = size_of::<verbs_context>();
        v
    }

    #[test]
    fn legacy_context_has_no_extension() {
        let mut ctx = ibv_context::default();
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { verbs_get_ctx(&mut ctx) }.is_null());
        let mut attr = ibv_cq_init_attr_ex::default();
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_create_cq_ex(&mut ctx, &mut attr) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
    }

    #[test]
    fn extended_context_dispatches_when_the_table_reaches_the_op() {
        let mut v = extended();
        let vp: *mut verbs_context = &mut *v;
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        let ctx = unsafe { ptr::addr_of_mut!((*vp).context) };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { verbs_get_ctx(ctx) }, vp);
        let mut attr = ibv_cq_init_attr_ex::default();
        let attr_p: *mut ibv_cq_init_attr_ex = &mut attr;
        // Entry unset: not supported.
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_create_cq_ex(ctx, attr_p) }.is_null());
        // Entry set: called.
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).create_cq_ex = Some(fake_create_cq_ex) };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_create_cq_ex(ctx, attr_p) }, attr_p.cast());
        // Entry set but the provider's table is too short to contain it.
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).sz = size_of::<verbs_context>() - offset_of!(verbs_context, create_cq_ex) - 1 };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_create_cq_ex(ctx, attr_p) }.is_null());
    }

    /// A provider's `alloc_td` that hands out a dangling domain (it reads
    /// no pointer: a safe function).
    extern "C" fn fake_alloc_td(_: *mut ibv_context, _: *mut ibv_td_init_attr) -> *mut ibv_td {
        ptr::dangling_mut()
    }

    #[test]
    fn domain_verbs_need_the_providers_entries() {
        let mut ctx = ibv_context::default();
        let mut td_attr = ibv_td_init_attr::default();
        let mut pd_attr = ibv_parent_domain_init_attr::default();
        // A legacy context has neither entry.
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_alloc_td(&mut ctx, &mut td_attr) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_alloc_parent_domain(&mut ctx, &mut pd_attr) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
        // An extended context: unset entries are unsupported, set ones called.
        let mut v = extended();
        let vp: *mut verbs_context = &mut *v;
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        let ctx = unsafe { ptr::addr_of_mut!((*vp).context) };
        let mut td = ibv_td { context: ctx };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_dealloc_td(&mut td) }, libc::EOPNOTSUPP);
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_alloc_parent_domain(ctx, &mut pd_attr) }.is_null());
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).alloc_td = Some(fake_alloc_td) };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_alloc_td(ctx, &mut td_attr) }, ptr::dangling_mut());
    }

    /// A provider's `create_srq_ex` that hands out a dangling SRQ (it reads
    /// no pointer: a safe function).
    extern "C" fn fake_create_srq_ex(_: *mut ibv_context, _: *mut ibv_srq_init_attr_ex) -> *mut ibv_srq {
        ptr::dangling_mut()
    }

    /// A provider's `modify_wq` that answers 40 plus the state asked for.
    ///
    /// # Safety
    /// `attr` is valid for reads, as `ibv_modify_wq` passes it.
    unsafe extern "C" fn fake_modify_wq(_: *mut ibv_wq, attr: *mut ibv_wq_attr) -> c_int {
        // SAFETY: `attr` is valid for reads (the contract above).
        unsafe { (*attr).wq_state.0 as c_int + 40 }
    }

    /// A provider's `destroy_wq` that answers the WQ's number.
    ///
    /// # Safety
    /// `wq` is valid for reads, as `ibv_destroy_wq` passes it.
    unsafe extern "C" fn fake_destroy_wq(wq: *mut ibv_wq) -> c_int {
        // SAFETY: `wq` is valid for reads (the contract above).
        unsafe { (*wq).wq_num as c_int }
    }

    #[test]
    fn wq_verbs_need_the_providers_entries() {
        let mut v = extended();
        let vp: *mut verbs_context = &mut *v;
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        let ctx = unsafe { ptr::addr_of_mut!((*vp).context) };
        // SAFETY: a plain C struct, all-zero valid.
        let mut wq: ibv_wq = unsafe { core::mem::zeroed() };
        wq.context = ctx;
        wq.wq_num = 7;
        let mut attr = ibv_wq_attr {
            attr_mask: 1,
            wq_state: ibv_wq_state::IBV_WQS_RDY,
            curr_wq_state: ibv_wq_state::IBV_WQS_RESET,
            flags: 0,
            flags_mask: 0,
        };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_modify_wq(&mut wq, &mut attr) }, libc::EOPNOTSUPP);
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_destroy_wq(&mut wq) }, libc::EOPNOTSUPP);
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).modify_wq = Some(fake_modify_wq) };
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).destroy_wq = Some(fake_destroy_wq) };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_modify_wq(&mut wq, &mut attr) }, 41, "the provider's entry is called");
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_destroy_wq(&mut wq) }, 7, "the provider's entry is called");
    }

    /// A provider's `modify_qp_rate_limit` that answers the rate asked for.
    ///
    /// # Safety
    /// `attr` is valid for reads, as `ibv_modify_qp_rate_limit` passes it.
    unsafe extern "C" fn fake_rate_limit(_: *mut ibv_qp, attr: *mut ibv_qp_rate_limit_attr) -> c_int {
        // SAFETY: `attr` is valid for reads (the contract above).
        unsafe { (*attr).rate_limit as c_int }
    }

    #[test]
    fn xrc_dm_pacing_and_counter_verbs_need_the_providers_entries() {
        let mut v = extended();
        let vp: *mut verbs_context = &mut *v;
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        let ctx = unsafe { ptr::addr_of_mut!((*vp).context) };
        let mut pd = ibv_pd { context: ctx, handle: 0 };
        let mut qp = ibv_qp { context: ctx, ..Default::default() };
        // SAFETY: plain C structs, all-zero valid.
        let mut srq: ibv_srq = unsafe { core::mem::zeroed() };
        srq.context = ctx;
        // An XRC SRQ goes to the extended entry (never to `ibv_create_srq`).
        let mut attr = ibv_srq_init_attr_ex {
            comp_mask: ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_TYPE.0
                | ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_PD.0
                | ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_XRCD.0
                | ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_CQ.0,
            srq_type: ibv_srq_type::IBV_SRQT_XRC,
            pd: &mut pd,
            ..Default::default()
        };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_create_srq_ex(ctx, &mut attr) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).create_srq_ex = Some(fake_create_srq_ex) };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_create_srq_ex(ctx, &mut attr) }, ptr::dangling_mut());
        // Entries the provider leaves unset: EOPNOTSUPP, as the header's inlines say.
        let mut n = 0;
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_get_srq_num(&mut srq, &mut n) }, libc::EOPNOTSUPP);
        // SAFETY: a plain C struct, all-zero valid.
        let mut dm: ibv_dm = unsafe { core::mem::zeroed() };
        dm.context = ctx;
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_reg_dm_mr(&mut pd, &mut dm, 0, 64, 0) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
        let mut c_attr = ibv_counters_init_attr { comp_mask: 0 };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert!(unsafe { ibv_create_counters(ctx, &mut c_attr) }.is_null());
        let mut rl = ibv_qp_rate_limit_attr { rate_limit: 1000, ..Default::default() };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_modify_qp_rate_limit(&mut qp, &mut rl) }, libc::EOPNOTSUPP);
        // SAFETY: `vp` points into the boxed `v`, alive for the test; no reference to it is held.
        unsafe { (*vp).modify_qp_rate_limit = Some(fake_rate_limit) };
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_modify_qp_rate_limit(&mut qp, &mut rl) }, 1000, "the provider's entry is called");
    }

    #[test]
    fn post_send_goes_through_the_context_ops() {
        let mut ctx = ibv_context::default();
        ctx.ops.post_send = Some(fake_post_send);
        let mut qp = ibv_qp { context: &mut ctx, ..Default::default() };
        let mut wr = ibv_send_wr::default();
        let mut bad = ptr::dangling_mut();
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        assert_eq!(unsafe { ibv_post_send(&mut qp, &mut wr, &mut bad) }, 42);
        assert!(bad.is_null());
    }

    #[test]
    #[should_panic(expected = "the RDMA provider leaves `post_recv` unset")]
    fn null_provider_entry_panics_with_its_name() {
        let mut ctx = ibv_context::default();
        let mut qp = ibv_qp { context: &mut ctx, ..Default::default() };
        let mut wr = ibv_recv_wr::default();
        let mut bad = ptr::null_mut();
        // SAFETY: the context, object and attributes are live locals (or in the
        // boxed `v`); the wrapper reads the context's tables, calls only fakes.
        unsafe { ibv_post_recv(&mut qp, &mut wr, &mut bad) };
    }
}
