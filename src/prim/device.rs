//! Devices, device contexts, ports and GIDs.

use std::ffi::CStr;
use std::fmt;
use std::fs;
use std::mem::size_of;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

use super::error::{Error, Result};
use super::gid::{Gid, GidEntry, GidType};
use super::handle::{Destroy, Owned};
use super::port::PortAttr;
use super::quirks::{runtime_rdma_core_major, Quirks};
use crate::bindings as ffi;

/// Names of the RDMA devices in the kernel (`/sys/class/infiniband`).
fn kernel_devices() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir("/sys/class/infiniband")
        .map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// The device list from libibverbs, freed on drop.
struct DeviceList {
    /// `None`: libibverbs found no RDMA support at all (an empty list).
    list: Option<NonNull<*mut ffi::ibv_device>>,
    len: usize,
}

/// Whether `errno` from `ibv_get_device_list` means "no RDMA here" rather
/// than a failure: libibverbs reports a machine without the kernel's
/// InfiniBand support (no `/sys/class/infiniband_verbs`) as `ENOSYS`,
/// and some releases as `EOPNOTSUPP`; `ENODEV` and `ENOENT` mean no device.
fn means_no_device(errno: i32) -> bool {
    matches!(errno, libc::ENOSYS | libc::EOPNOTSUPP | libc::ENODEV | libc::ENOENT)
}

impl DeviceList {
    fn get() -> Result<DeviceList> {
        #[cfg(feature = "dlopen")]
        ffi::dl::check_verbs().map_err(|error| Error::Load { op: "ibv_get_device_list", error: Box::new(error) })?;
        ffi::register_static_providers();
        let mut n = 0;
        // SAFETY: `n` is valid for writes; the list is freed in `drop`.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        match NonNull::new(list) {
            Some(list) => Ok(DeviceList { list: Some(list), len: usize::try_from(n).unwrap_or(0) }),
            None => {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if means_no_device(errno) {
                    Ok(DeviceList { list: None, len: 0 })
                } else {
                    Err(Error::from_errno("ibv_get_device_list", errno))
                }
            }
        }
    }

    fn devices(&self) -> &[*mut ffi::ibv_device] {
        match self.list {
            // SAFETY: libibverbs returned `len` device pointers at `list`.
            Some(list) => unsafe { std::slice::from_raw_parts(list.as_ptr(), self.len) },
            None => &[],
        }
    }

    /// The name of `dev`, a device of this list (empty when it has none).
    fn name(&self, dev: *mut ffi::ibv_device) -> String {
        self.name_bytes(dev).map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned())
    }

    /// The name of `dev`, a device of this list, as the library keeps it
    /// (no copy; borrowed for as long as the list); `None` when it has none.
    fn name_bytes(&self, dev: *mut ffi::ibv_device) -> Option<&[u8]> {
        // SAFETY: `dev` comes from this live list; the name is a
        // NUL-terminated string owned by the device, which the list keeps.
        let p = unsafe { ffi::ibv_get_device_name(dev) };
        // SAFETY: non-null and NUL-terminated, as above; the borrow ends
        // with the list's.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
    }

    /// The error for an empty list or a missing name.
    /// The device called `name`, else the error naming what is there.
    fn named(&self, name: &str) -> Result<*mut ffi::ibv_device> {
        self.devices()
            .iter()
            .copied()
            .find(|d| self.name_bytes(*d) == Some(name.as_bytes()))
            .ok_or_else(|| self.not_found(Some(name)))
    }

    fn not_found(&self, name: Option<&str>) -> Error {
        let available: Vec<String> = self.devices().iter().map(|d| self.name(*d)).collect();
        match name {
            Some(n) if !available.is_empty() || !kernel_devices().iter().any(|k| k == n) => {
                Error::DeviceNotFound { name: n.to_string(), available }
            }
            _ => Error::NoSupportedDevice { kernel_devices: kernel_devices(), static_providers: ffi::STATIC_PROVIDERS },
        }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if let Some(list) = self.list {
            // SAFETY: the list came from `ibv_get_device_list` and is freed once.
            unsafe { ffi::ibv_free_device_list(list.as_ptr()) }
        }
    }
}

/// Names of the RDMA devices libibverbs can open.
///
/// # References
/// `ibv_get_device_list(3)`
pub fn device_names() -> Result<Vec<String>> {
    let list = DeviceList::get()?;
    Ok(list.devices().iter().map(|d| list.name(*d)).collect())
}

pub(crate) struct ContextInner {
    name: String,
    quirks: Quirks,
    /// The device's `atomic_cap` is not `IBV_ATOMIC_NONE` (iWARP's is).
    atomics: bool,
    /// The limits `QpBuilder::build` checks and the port count, read once
    /// at open: a device's attributes do not change while it is open.
    limits: Limits,
}

/// Device attributes read once when the context is opened.
#[derive(Clone, Copy, Default)]
pub(crate) struct Limits {
    /// `ibv_device_attr::max_qp_wr`.
    pub(crate) max_qp_wr: i32,
    /// `ibv_device_attr::max_sge`.
    pub(crate) max_sge: i32,
    /// `ibv_device_attr::phys_port_cnt`.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) ports: u8,
}

// SAFETY: `ibv_close_device` releases what the matching create verb made; a context may be used from any thread (verbs are thread-safe); shared use goes through thread-safe verbs calls.
unsafe impl Destroy for ContextInner {
    type Raw = ffi::ibv_context;
    const VERB: &'static str = "ibv_close_device";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_context>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_close_device(raw.as_ptr()) }
    }
}

/// An open RDMA device. Cloning shares the same context.
///
/// # References
/// `ibv_open_device(3)`
#[derive(Clone)]
pub struct Context(Arc<Owned<ContextInner>>);

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("name", &self.0.name).finish()
    }
}

#[cfg(test)]
impl Context {
    /// A context over `raw` for host tests of objects that need one; it
    /// must be leaked (`mem::forget`), never closed.
    ///
    /// # Safety
    /// `raw` is valid for as long as the context and its objects are used.
    pub(crate) unsafe fn for_host_tests(raw: NonNull<ffi::ibv_context>) -> Context {
        let inner =
            ContextInner { name: "host".into(), quirks: Quirks::default(), atomics: false, limits: Limits::default() };
        // SAFETY: the caller's contract; the context is never destroyed.
        Context(Arc::new(unsafe { Owned::new(raw, inner) }))
    }
}

/// Whether the environment turns off libmlx5's locks (`MLX5_SINGLE_THREADED`
/// set to a number other than 0, read as libmlx5 reads it with `atoi`).
fn single_threaded_provider(var: impl Fn(&str) -> Option<String>) -> bool {
    var("MLX5_SINGLE_THREADED").is_some_and(|v| {
        let digits: String = v.trim_start().chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse::<u64>().is_ok_and(|n| n != 0)
    })
}

impl Context {
    /// Opens the device called `name` (as `ibv_devices` lists it).
    ///
    /// Fails with [`Error::DeviceNotFound`] when no device has the name, or
    /// [`Error::NoSupportedDevice`] when the kernel has devices that no
    /// provider of this build drives.
    ///
    /// With `MLX5_SINGLE_THREADED` set (to a nonzero number) in the
    /// environment, every open fails with [`Error::Unsupported`]: libmlx5
    /// then drops the locks that make this crate's `Send + Sync` QPs, CQs
    /// and SRQs sound to share between threads.
    pub fn open(name: &str) -> Result<Context> {
        let list = DeviceList::get()?;
        Self::open_device(list.named(name)?, name.to_string())
    }

    /// Opens the device with node GUID `guid` (host order, as `ibv_devinfo` prints it).
    pub fn open_guid(guid: u64) -> Result<Context> {
        let list = DeviceList::get()?;
        let dev = list
            .devices()
            .iter()
            .copied()
            // SAFETY: `d` is from the live list.
            .find(|d| u64::from_be(unsafe { ffi::ibv_get_device_guid(*d) }) == guid)
            .ok_or_else(|| list.not_found(Some(&format!("guid {guid:#018x}"))))?;
        Self::open_device(dev, list.name(dev))
    }

    /// Opens the first device libibverbs lists.
    pub fn open_first() -> Result<Context> {
        let list = DeviceList::get()?;
        let dev = *list.devices().first().ok_or_else(|| list.not_found(None))?;
        Self::open_device(dev, list.name(dev))
    }

    fn open_device(dev: *mut ffi::ibv_device, name: String) -> Result<Context> {
        Self::open_device_with(dev, name, |d| {
            // SAFETY: `d` is `dev`, from a live device list.
            let raw = unsafe { ffi::ibv_open_device(d) };
            NonNull::new(raw).ok_or_else(|| Error::last("ibv_open_device"))
        })
    }

    /// Opens the device called `name` through `open` (given the device;
    /// it may refuse before opening): `mlx5dv::devx` opens with
    /// `mlx5dv_open_device`. The context is set up as [`Context::open`]'s.
    #[cfg(not(rrddmma_mlnx_ofed4))]
    pub(crate) fn open_with(
        name: &str,
        open: impl FnOnce(*mut ffi::ibv_device) -> Result<NonNull<ffi::ibv_context>>,
    ) -> Result<Context> {
        let list = DeviceList::get()?;
        Self::open_device_with(list.named(name)?, name.to_string(), open)
    }

    fn open_device_with(
        dev: *mut ffi::ibv_device,
        name: String,
        open: impl FnOnce(*mut ffi::ibv_device) -> Result<NonNull<ffi::ibv_context>>,
    ) -> Result<Context> {
        if single_threaded_provider(|k| std::env::var(k).ok()) {
            return Err(Error::unsupported("ibv_open_device", &crate::prim::unsupported::SINGLE_THREADED, &name, 1));
        }
        let ctx = open(dev)?;
        let mut c = Context(Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe {
                Owned::new(
                    ctx,
                    ContextInner { name, quirks: Quirks::default(), atomics: false, limits: Limits::default() },
                )
            },
        ));
        let attr = c.query_device()?;
        let inner = Arc::get_mut(&mut c.0).expect("no clone yet").data_mut();
        inner.quirks = Quirks::for_device(attr.vendor_id, runtime_rdma_core_major());
        inner.atomics = attr.atomic_cap != ffi::ibv_atomic_cap::IBV_ATOMIC_NONE;
        inner.limits = Limits { max_qp_wr: attr.max_qp_wr, max_sge: attr.max_sge, ports: attr.phys_port_cnt };
        Ok(c)
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Provider bugs this device needs worked around.
    pub(crate) fn quirks(&self) -> Quirks {
        self.0.quirks
    }

    /// Whether the device executes atomics (FETCH_AND_ADD, CMP_AND_SWP):
    /// its `atomic_cap` is not `IBV_ATOMIC_NONE`. iWARP devices have none;
    /// on them [`QpBuilder::build`](super::QpBuilder::build) refuses atomic
    /// send ops ([`Error::Unsupported`]), and a posted atomic the provider
    /// refuses is an [`Error::Post`] naming its index, the operation and the
    /// cap (`REMOTE_ATOMIC` access is granted as asked: the device accepts it).
    pub fn atomics(&self) -> bool {
        self.0.atomics
    }

    /// The device's limits and port count, as read when it was opened.
    pub(crate) fn limits(&self) -> Limits {
        self.0.limits
    }

    /// The raw context, for calls into [`crate::bindings`].
    pub fn as_ptr(&self) -> *mut ffi::ibv_context {
        self.0.as_ptr()
    }

    /// Device attributes (limits and capabilities).
    ///
    /// # References
    /// `ibv_query_device(3)`
    pub fn query_device(&self) -> Result<ffi::ibv_device_attr> {
        let mut attr = MaybeUninit::<ffi::ibv_device_attr>::zeroed();
        // SAFETY: live context; `attr` is valid for writes.
        let rc = unsafe { ffi::ibv_query_device(self.as_ptr(), attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::code("ibv_query_device", rc));
        }
        // SAFETY: zero-initialised and filled in; all-zero is valid for this C struct.
        Ok(unsafe { attr.assume_init() })
    }

    /// Extended device attributes: ODP, timestamp and clock, device memory,
    /// moderation and the rest, with the classic ones in `orig_attr`.
    ///
    /// # References
    /// `ibv_query_device_ex(3)`
    pub fn query_device_ex(&self) -> Result<ffi::ibv_device_attr_ex> {
        let mut attr = MaybeUninit::<ffi::ibv_device_attr_ex>::zeroed();
        // SAFETY: live context; no input; `attr` is valid for writes.
        let rc = unsafe { ffi::ibv_query_device_ex(self.as_ptr(), std::ptr::null(), attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::code("ibv_query_device_ex", rc));
        }
        // SAFETY: zero-initialised and filled in; all-zero is valid for this C struct.
        Ok(unsafe { attr.assume_init() })
    }

    /// Port attributes, as the device reports them now; speed and width are
    /// values safe for any code (XDR included when libibverbs reports it).
    ///
    /// # References
    /// `ibv_query_port(3)`
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let mut attr = PortAttr::default();
        let p: *mut PortAttr = &mut attr;
        // SAFETY: live context. A provider table without `query_port` gets the
        // compat call on the leading `ibv_port_attr`; otherwise libibverbs is
        // told the full size of `PortAttr`, which is at least what any
        // provider writes (it copies through a buffer of its own when smaller).
        let rc = unsafe { ffi::ibv_query_port_sized(self.as_ptr(), port, p.cast(), size_of::<PortAttr>()) };
        if rc != 0 {
            return Err(Error::code("ibv_query_port", rc));
        }
        Ok(attr)
    }

    /// The GID table entry at `index` of `port`: GID, type, network device.
    ///
    /// # References
    /// `ibv_query_gid_ex(3)`
    pub fn query_gid_entry(&self, port: u8, index: u32) -> Result<GidEntry> {
        // MLNX_OFED 4.x libibverbs has no `ibv_query_gid_ex`.
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            let _ = (port, index);
            Err(Error::unsupported(
                "ibv_query_gid_ex",
                &crate::prim::unsupported::OFED4,
                self.name(),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let mut e = ffi::ibv_gid_entry::default();
            // SAFETY: live context; `e` is valid for writes of its size.
            let rc = unsafe {
                ffi::_ibv_query_gid_ex(
                    self.as_ptr(),
                    u32::from(port),
                    index,
                    &mut e,
                    0,
                    size_of::<ffi::ibv_gid_entry>(),
                )
            };
            if rc != 0 {
                return Err(Error::code("ibv_query_gid_ex", rc));
            }
            Ok(GidEntry::from_raw(&e))
        }
    }

    /// Every valid entry of `port`'s GID table, in index order.
    ///
    /// # References
    /// `ibv_query_gid_table(3)` (one call for the whole table; MLNX_OFED
    /// 4.x, which lacks it, gets an empty table)
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let mut table = Vec::new();
        self.each_gid(port, |e| table.push(e))?;
        table.sort_by_key(|e| e.index);
        Ok(table)
    }

    /// Calls `f` with each valid entry of `port`'s GID table, in the order
    /// the library returns them (one buffer, one `ibv_query_gid_table` call).
    fn each_gid(&self, port: u8, mut f: impl FnMut(GidEntry)) -> Result<()> {
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            let _ = (port, &mut f);
            Ok(())
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            // The call returns every port's valid entries: room for all.
            let room = gid_room(self.query_port(port)?.gid_table_len(), self.limits().ports);
            // Room, not values: the library writes the first `n` entries.
            let mut raw = Vec::<ffi::ibv_gid_entry>::with_capacity(room);
            // SAFETY: live context; `raw` has room for `capacity()` entries
            // of the size passed, valid for writes.
            let n = unsafe {
                ffi::_ibv_query_gid_table(
                    self.as_ptr(),
                    raw.as_mut_ptr(),
                    raw.capacity(),
                    0,
                    size_of::<ffi::ibv_gid_entry>(),
                )
            };
            let Ok(n) = usize::try_from(n) else {
                return Err(Error::code("ibv_query_gid_table", i32::try_from(n).unwrap_or(-libc::EIO)));
            };
            // SAFETY: the call wrote `n` whole entries (at most the room it
            // was given, bounded again here); `ibv_gid_entry` is plain data.
            unsafe { raw.set_len(n.min(raw.capacity())) };
            raw.iter()
                .filter(|e| e.port_num == u32::from(port))
                .map(GidEntry::from_raw)
                .filter(|e| !e.gid.is_zero())
                .for_each(&mut f);
            Ok(())
        }
    }

    /// The GID at `index` of `port`'s table.
    ///
    /// # References
    /// `ibv_query_gid(3)`
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        let mut gid = ffi::ibv_gid::default();
        let idx = i32::try_from(index).map_err(|_| Error::Verbs { op: "ibv_query_gid", errno: libc::EINVAL })?;
        // SAFETY: live context; `gid` is valid for writes.
        let rc = unsafe { ffi::ibv_query_gid(self.as_ptr(), port, idx, &mut gid) };
        if rc != 0 {
            return Err(Error::code("ibv_query_gid", rc));
        }
        // SAFETY: every bit pattern of the 16-byte union is a valid `raw`.
        Ok(Gid(unsafe { gid.raw }))
    }

    /// The GID index to use for RoCE v2 on `port`: the first RoCE v2 entry
    /// mapping an IPv4 address, else the first RoCE v2 entry, else index 0
    /// (InfiniBand).
    ///
    /// Address handles and QP attributes take the index as a `u8`; a RoCE v2
    /// entry past index 255 is passed over.
    pub fn roce_v2_gid_index(&self, port: u8) -> Result<u8> {
        // The lowest index of a usable RoCE v2 entry mapping IPv4, and of any
        // usable RoCE v2 entry (the table is not asked for in index order).
        let (mut ipv4, mut any) = (None::<u32>, None::<u32>);
        self.each_gid(port, |e| {
            if e.gid_type == GidType::ROCE_V2 && e.index <= u32::from(u8::MAX) {
                let lower = |best: Option<u32>| Some(best.map_or(e.index, |b| b.min(e.index)));
                any = lower(any);
                if e.ipv4().is_some() {
                    ipv4 = lower(ipv4);
                }
            }
        })?;
        Ok(u8::try_from(ipv4.or(any).unwrap_or(0)).unwrap_or(0))
    }
}

/// Most GID entries read at once, all ports together (a ConnectX port has
/// 256 at most): a device or kernel reporting more gets an error from the
/// call (`EINVAL`, too little room), not an allocation of its size.
#[cfg(not(rrddmma_mlnx_ofed4))]
const GID_ROOM_MAX: usize = 1 << 16;

/// Room for the GID table of `ports` ports of `len` entries each, as the
/// device reports them, bounded by [`GID_ROOM_MAX`].
#[cfg(not(rrddmma_mlnx_ofed4))]
fn gid_room(len: u32, ports: u8) -> usize {
    usize::try_from(len.max(1)).unwrap_or(GID_ROOM_MAX).saturating_mul(usize::from(ports.max(1))).min(GID_ROOM_MAX)
}

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod gid_room_tests {
    use super::{gid_room, GID_ROOM_MAX};

    #[test]
    fn gid_table_room_is_what_the_device_reports_within_a_bound() {
        assert_eq!(gid_room(256, 2), 512);
        assert_eq!(gid_room(0, 0), 1, "no entries reported: room for one");
        assert_eq!(gid_room(u32::MAX, 255), GID_ROOM_MAX, "an absurd report is bounded, not multiplied");
        assert_eq!(gid_room(1 << 31, 1), GID_ROOM_MAX);
    }
}

#[cfg(test)]
mod single_threaded_tests {
    use super::single_threaded_provider;

    #[test]
    fn mlx5_single_threaded_is_read_as_libmlx5_reads_it() {
        let env = |v: &'static str| move |k: &str| (k == "MLX5_SINGLE_THREADED").then(|| v.to_string());
        assert!(single_threaded_provider(env("1")));
        assert!(single_threaded_provider(env(" 2x")));
        assert!(!single_threaded_provider(env("0")));
        assert!(!single_threaded_provider(env("")));
        assert!(!single_threaded_provider(env("yes")));
        assert!(!single_threaded_provider(|_| None));
    }
}
