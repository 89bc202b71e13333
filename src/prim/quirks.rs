//! Known provider bugs that the library works around, detected per device.
//!
//! rdma-core's rxe provider before v55 ends the polling pass inside
//! `ibv_next_poll` when the CQ runs empty (so a following `ibv_end_poll`
//! would advance the consumer index a second time and unlock twice); before
//! v64 its `ibv_wr_set_sge_list` computes the length from the first entry only
//! and `ibv_wr_set_inline_data_list` posts length 0. siw's provider (every
//! release to date) returns 0 from a `post_send` that refused a request
//! after queueing earlier ones of its list: the doorbell's result replaces
//! the refusal, while `bad_wr` names the refused request.

use std::path::Path;

use crate::bindings as ffi;

/// rxe's vendor id.
const RXE_VENDOR_ID: u32 = 0xff_ffff;
/// siw's vendor id (ASCII `bmt`).
const SIW_VENDOR_ID: u32 = 0x62_6d74;

/// Which workarounds a device needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Quirks {
    /// `ibv_next_poll` returning `ENOENT` already ended the pass.
    pub rxe_next_poll_ends: bool,
    /// `ibv_wr_set_sge_list` and `ibv_wr_set_inline_data_list` get lengths wrong.
    pub rxe_list_lengths: bool,
    /// rxe under an rdma-core whose release could not be read: extended CQs
    /// are refused (see [`Quirks::for_device`]).
    pub rxe_release_unknown: bool,
    /// `post_send` may return 0 with `bad_wr` set (siw): QPs post through
    /// [`siw_post_send`].
    pub siw_post_send_hides_refusal: bool,
}

impl Quirks {
    /// For a device with `vendor_id`, under rdma-core `major`.
    ///
    /// An unknown release (`None`: a renamed or relinked library whose
    /// version cannot be read) is taken as an old, buggy one: a list
    /// workaround applied to a fixed provider costs a little speed at worst,
    /// while a missing one lets the provider post wrong lengths. The end of
    /// an extended polling pass has no such safe guess (skipping `end_poll`
    /// on a fixed provider leaves the pass open, and the next `start_poll`
    /// waits on it forever; calling it on an old one unlocks twice, which is
    /// undefined behaviour in the provider), so on such an rxe extended CQs
    /// are refused with [`Error::Unsupported`](super::Error::Unsupported)
    /// and classic CQs, which have no pass, are used instead.
    pub fn for_device(vendor_id: u32, major: Option<u32>) -> Quirks {
        let rxe = vendor_id == RXE_VENDOR_ID;
        let before = |v| rxe && major.is_none_or(|m| m < v);
        Quirks {
            rxe_next_poll_ends: before(55),
            rxe_list_lengths: before(64),
            rxe_release_unknown: rxe && major.is_none(),
            siw_post_send_hides_refusal: vendor_id == SIW_VENDOR_ID,
        }
    }
}

/// The post entry of a QP on a device with
/// [`Quirks::siw_post_send_hides_refusal`]: the provider's own, except that
/// a call that named a refused request in `bad` returns `EINVAL` (siw's
/// errno for refusing one request; a full send queue, its `ENOMEM`, reads
/// as `EINVAL` too) instead of 0. Costs nothing on other devices, whose QPs
/// keep the provider's entry.
///
/// # Safety
/// As the provider's `post_send`: `qp` a live QP whose context has that
/// entry, `wr` a valid list, `bad` valid for writes.
pub(crate) unsafe extern "C" fn siw_post_send(
    qp: *mut ffi::ibv_qp,
    wr: *mut ffi::ibv_send_wr,
    bad: *mut *mut ffi::ibv_send_wr,
) -> i32 {
    // SAFETY: a live QP points to its live context; its function table is
    // fixed when the context is opened.
    let Some(post) = (unsafe { (*(*qp).context).ops.post_send }) else { return libc::ENOSYS };
    // SAFETY: the caller's contract, passed on unchanged.
    let rc = unsafe { post(qp, wr, bad) };
    // SAFETY: `bad` is valid (the caller's contract); the provider cleared
    // or set it.
    if rc == 0 && !unsafe { *bad }.is_null() {
        libc::EINVAL
    } else {
        rc
    }
}

/// The rdma-core release of the libibverbs in use: the built-in one for a
/// static build, else read off the loaded shared object's file name
/// (`libibverbs.so.1.14.44.0` → 44). Read once per process: the library
/// loaded stays loaded.
pub(crate) fn runtime_rdma_core_major() -> Option<u32> {
    static MAJOR: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *MAJOR.get_or_init(read_rdma_core_major)
}

fn read_rdma_core_major() -> Option<u32> {
    let info = crate::build_info();
    if info.is_static() {
        return info.rdma_core.split('.').next()?.parse().ok();
    }
    let mut dl = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let addr = ffi::libibverbs_anchor();
    if addr.is_null() {
        return None;
    }
    // SAFETY: `addr` is a function of a loaded object; `dl` is valid for writes.
    if unsafe { libc::dladdr(addr, dl.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded and filled the struct.
    let dl = unsafe { dl.assume_init() };
    if dl.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the dynamic loader.
    let path = unsafe { std::ffi::CStr::from_ptr(dl.dli_fname) }.to_str().ok()?;
    let real = std::fs::canonicalize(Path::new(path)).ok()?;
    major_from_soname(real.file_name()?.to_str()?)
}

/// `libibverbs.so.1.14.44.0` → 44.
fn major_from_soname(name: &str) -> Option<u32> {
    let (_, version) = name.split_once(".so.")?;
    version.split('.').nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_file_names() {
        assert_eq!(major_from_soname("libibverbs.so.1.14.44.0"), Some(44));
        assert_eq!(major_from_soname("libibverbs.so.1.15.59.0"), Some(59));
        assert_eq!(major_from_soname("libibverbs.so.1"), None);
        assert_eq!(major_from_soname("libibverbs.so.1.0.0"), Some(0));
        assert_eq!(major_from_soname("libibverbs.a"), None);
    }

    #[test]
    fn only_old_rxe_needs_workarounds() {
        let q = |poll, lists| Quirks { rxe_next_poll_ends: poll, rxe_list_lengths: lists, ..Quirks::default() };
        assert_eq!(Quirks::for_device(RXE_VENDOR_ID, Some(44)), q(true, true));
        assert_eq!(Quirks::for_device(RXE_VENDOR_ID, Some(59)), q(false, true));
        assert_eq!(Quirks::for_device(RXE_VENDOR_ID, Some(64)), Quirks::default());
        assert_eq!(
            Quirks::for_device(RXE_VENDOR_ID, None),
            Quirks { rxe_next_poll_ends: true, rxe_list_lengths: true, rxe_release_unknown: true, ..Quirks::default() },
            "an unknown release is taken as the buggy one, and flagged for the CQ builder"
        );
        assert_eq!(Quirks::for_device(0x02c9, Some(44)), Quirks::default(), "Mellanox");
        assert_eq!(Quirks::for_device(0x02c9, None), Quirks::default(), "Mellanox, release unknown");
        let siw = Quirks { siw_post_send_hides_refusal: true, ..Quirks::default() };
        assert_eq!(Quirks::for_device(SIW_VENDOR_ID, Some(44)), siw, "siw, any release");
        assert_eq!(Quirks::for_device(SIW_VENDOR_ID, None), siw);
    }

    #[test]
    fn the_linked_library_has_a_version() {
        assert!(runtime_rdma_core_major().is_some_and(|m| m >= 17));
    }
}
