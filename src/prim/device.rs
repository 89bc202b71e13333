//! Devices, device contexts, ports and GIDs.

use std::ffi::CStr;
use std::fmt;
use std::fs;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

use super::error::{Error, Result};
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
    list: NonNull<*mut ffi::ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<DeviceList> {
        ffi::register_static_providers();
        let mut n = 0;
        // SAFETY: `n` is valid for writes; the list is freed in `drop`.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        let list = NonNull::new(list).ok_or_else(|| Error::last("ibv_get_device_list"))?;
        Ok(DeviceList { list, len: usize::try_from(n).unwrap_or(0) })
    }

    fn devices(&self) -> &[*mut ffi::ibv_device] {
        // SAFETY: libibverbs returned `len` device pointers at `list`.
        unsafe { std::slice::from_raw_parts(self.list.as_ptr(), self.len) }
    }

    fn name(dev: *mut ffi::ibv_device) -> String {
        // SAFETY: `dev` comes from the live list; the name is a NUL-terminated
        // string owned by the device.
        let p = unsafe { ffi::ibv_get_device_name(dev) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null and NUL-terminated, as above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The error for an empty list or a missing name.
    fn not_found(&self, name: Option<&str>) -> Error {
        let available: Vec<String> = self.devices().iter().map(|d| Self::name(*d)).collect();
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
        // SAFETY: the list came from `ibv_get_device_list` and is freed once.
        unsafe { ffi::ibv_free_device_list(self.list.as_ptr()) }
    }
}

/// Names of the RDMA devices libibverbs can open.
///
/// # References
/// `ibv_get_device_list(3)`
pub fn device_names() -> Result<Vec<String>> {
    let list = DeviceList::get()?;
    Ok(list.devices().iter().map(|d| DeviceList::name(*d)).collect())
}

struct ContextInner {
    ctx: NonNull<ffi::ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread (verbs are thread-safe).
unsafe impl Send for ContextInner {}
// SAFETY: as above; shared use goes through thread-safe verbs calls.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: opened by `ibv_open_device`; every child holds an `Arc` to
        // this, so none is alive any more.
        unsafe { ffi::ibv_close_device(self.ctx.as_ptr()) };
    }
}

/// An open RDMA device. Cloning shares the same context.
///
/// # References
/// `ibv_open_device(3)`
#[derive(Clone)]
pub struct Context(Arc<ContextInner>);

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("name", &self.0.name).finish()
    }
}

impl Context {
    /// Opens the device called `name` (as `ibv_devices` lists it).
    ///
    /// Fails with [`Error::DeviceNotFound`] when no device has the name, or
    /// [`Error::NoSupportedDevice`] when the kernel has devices that no
    /// provider of this build drives.
    pub fn open(name: &str) -> Result<Context> {
        let list = DeviceList::get()?;
        let dev = list
            .devices()
            .iter()
            .copied()
            .find(|d| DeviceList::name(*d) == name)
            .ok_or_else(|| list.not_found(Some(name)))?;
        Self::open_device(dev, name.to_string())
    }

    /// Opens the first device libibverbs lists.
    pub fn open_first() -> Result<Context> {
        let list = DeviceList::get()?;
        let dev = *list.devices().first().ok_or_else(|| list.not_found(None))?;
        Self::open_device(dev, DeviceList::name(dev))
    }

    fn open_device(dev: *mut ffi::ibv_device, name: String) -> Result<Context> {
        // SAFETY: `dev` is from a live device list.
        let ctx = unsafe { ffi::ibv_open_device(dev) };
        let ctx = NonNull::new(ctx).ok_or_else(|| Error::last("ibv_open_device"))?;
        Ok(Context(Arc::new(ContextInner { ctx, name })))
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The raw context, for calls into [`crate::bindings`].
    pub fn as_ptr(&self) -> *mut ffi::ibv_context {
        self.0.ctx.as_ptr()
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

    /// Port attributes, as the device reports them now.
    ///
    /// # References
    /// `ibv_query_port(3)`
    pub fn query_port(&self, port: u8) -> Result<ffi::ibv_port_attr> {
        let mut attr = MaybeUninit::<ffi::ibv_port_attr>::zeroed();
        // SAFETY: live context; `attr` is valid for writes.
        let rc = unsafe { ffi::ibv_query_port(self.as_ptr(), port, attr.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::code("ibv_query_port", rc));
        }
        // SAFETY: zero-initialised and filled in by the provider; all-zero is
        // a valid value of this plain C struct.
        Ok(unsafe { attr.assume_init() })
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
    /// (InfiniBand, or a kernel that does not say GID types).
    pub fn roce_v2_gid_index(&self, port: u8) -> Result<u32> {
        let attr = self.query_port(port)?;
        let len = u32::try_from(attr.gid_tbl_len).unwrap_or(0);
        let dir = format!("/sys/class/infiniband/{}/ports/{port}/gid_attrs/types", self.name());
        let mut first_v2 = None;
        for i in 0..len {
            let Ok(kind) = fs::read_to_string(format!("{dir}/{i}")) else {
                continue;
            };
            if !kind.trim().eq_ignore_ascii_case("RoCE v2") {
                continue;
            }
            let Ok(gid) = self.query_gid(port, i) else {
                continue;
            };
            if gid.is_zero() {
                continue;
            }
            if gid.ipv4().is_some() {
                return Ok(i);
            }
            first_v2.get_or_insert(i);
        }
        Ok(first_v2.unwrap_or(0))
    }
}

/// A 128-bit global identifier (IPv6 format).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Whether every byte is zero (an unused table entry).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<std::net::Ipv4Addr> {
        std::net::Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// As the C union.
    pub fn to_raw(self) -> ffi::ibv_gid {
        ffi::ibv_gid { raw: self.0 }
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&std::net::Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_formats_and_maps_ipv4() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[127, 0, 0, 1]);
        let gid = Gid(raw);
        assert_eq!(gid.to_string(), "::ffff:127.0.0.1");
        assert_eq!(gid.ipv4(), Some(std::net::Ipv4Addr::LOCALHOST));
        assert!(!gid.is_zero() && Gid::default().is_zero());
        let link_local = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]);
        assert_eq!(link_local.to_string(), "fe80::200:ff:fe00:1");
        assert_eq!(link_local.ipv4(), None);
        // SAFETY: reading the plain byte array of a union built from it.
        assert_eq!(unsafe { gid.to_raw().raw }, raw);
    }
}
