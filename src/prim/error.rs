//! Errors of the verbs layer.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "cm")]
use super::cm::kind::CmEventType;

static DESTROY_FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many times a `Drop` of this crate saw a destroy verb fail
/// (`ibv_dereg_mr`, `ibv_destroy_qp`, `ibv_dealloc_pd`, ...) in this process.
///
/// A `Drop` cannot return the error. The object's resources are then left as
/// they are: memory under a region whose deregistration failed is never freed
/// (the device may still reach it). Each failure is also reported: with the
/// `log` feature as a `warn` record (target `rrddmma::prim::error`) naming the
/// verb, the object and the errno; without it, debug builds print the same
/// line to standard error. A test or a long-running program can check that
/// this stays 0.
pub fn destroy_failures() -> u64 {
    DESTROY_FAILURES.load(Ordering::Relaxed)
}

/// The kind of object a destroy verb frees, for the report of its failure.
fn destroyed_object(op: &str) -> &'static str {
    match op {
        "ibv_dealloc_pd" => "protection domain",
        "ibv_destroy_comp_channel" => "completion channel",
        "ibv_destroy_cq" => "completion queue",
        "ibv_destroy_qp" => "queue pair",
        "ibv_destroy_srq" => "shared receive queue",
        "ibv_destroy_ah" => "address handle",
        "ibv_dereg_mr" => "memory region",
        "ibv_dealloc_dmah" => "DMA handle",
        "ibv_dealloc_mw" => "memory window",
        "ibv_dealloc_td" => "thread domain",
        "ibv_free_dm" => "device memory",
        "ibv_close_xrcd" => "XRC domain",
        "ibv_close_device" => "device context",
        "ibv_exp_destroy_dct" => "DC target",
        "rdma_destroy_id" => "CM id",
        "munmap" => "RegisteredMem mapping",
        "mlx5dv_devx_obj_destroy" => "DEVX object",
        "mlx5dv_devx_umem_dereg" => "DEVX UMEM",
        _ => "object",
    }
}

/// The report of a failed destroy: verb, object, errno, consequence.
fn destroy_failure_message(op: &'static str, rc: i32) -> String {
    let errno = i32::try_from(rc.unsigned_abs()).unwrap_or(libc::EIO);
    format!(
        "{op} failed in drop of a {}: {} (errno {errno}); its resources are left in place",
        destroyed_object(op),
        io::Error::from_raw_os_error(errno)
    )
}

/// Records a failed destroy verb (see [`destroy_failures`]): counted, then
/// reported through `log` (feature `log`) or, in debug builds, on standard error.
pub(crate) fn count_destroy_failure(op: &'static str, rc: i32) {
    DESTROY_FAILURES.fetch_add(1, Ordering::Relaxed);
    if cfg!(feature = "log") {
        event!(warn, "{}", destroy_failure_message(op, rc));
    } else if cfg!(debug_assertions) {
        eprintln!("rrddmma: {}", destroy_failure_message(op, rc));
    }
}

/// The name of a firmware command status (`MLX5_CMD_STAT_*`).
fn firmware_status_name(status: u8) -> &'static str {
    match status {
        0x00 => "OK",
        0x01 => "internal error",
        0x02 => "bad operation",
        0x03 => "bad parameter",
        0x04 => "bad system state",
        0x05 => "bad resource",
        0x06 => "resource busy",
        0x08 => "limits exceeded",
        0x09 => "bad resource state",
        0x0a => "bad index",
        0x0f => "no resources",
        0x50 => "bad input length",
        0x51 => "bad output length",
        0x10 => "bad QP state",
        0x30 => "bad packet",
        0x40 => "bad size",
        _ => "unknown status",
    }
}

/// Result of a verbs operation.
pub type Result<T> = std::result::Result<T, Error>;

/// A runtime failure: what failed and why.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A verbs call returned an error.
    Verbs {
        /// The C function that failed, e.g. `ibv_create_qp`.
        op: &'static str,
        /// The errno it reported.
        errno: i32,
    },
    /// The device lacks what was asked, or the crate's build does: a
    /// capability the device reports absent, or the provider's `EOPNOTSUPP`
    /// for something the crate can name. Every one has the same three parts
    /// ([`Lack`](super::unsupported::Lack)): the device, the capability it
    /// lacks with its value, and the way out; [`super::unsupported::ALL`]
    /// lists every one the crate can return. `Display`: `{op}: {feature} is
    /// not supported by {device} ({cap} = {value}); {way out}`.
    #[non_exhaustive]
    Unsupported {
        /// The C function, e.g. `ibv_create_cq_ex`.
        op: &'static str,
        /// What is missing (e.g. `on-demand paging`): `lack.missing.feature`.
        feature: &'static str,
        /// The device, its value of the capability, and the way out (boxed:
        /// a rare error keeps [`Error`] small).
        lack: Box<super::unsupported::Lack>,
    },
    /// No RDMA device has this name.
    DeviceNotFound {
        /// The name asked for.
        name: String,
        /// The devices libibverbs can open.
        available: Vec<String>,
    },
    /// The provider refused a posted work request.
    Post {
        /// `ibv_post_send`, `ibv_post_recv` or `ibv_post_srq_recv`.
        op: &'static str,
        /// The errno it reported.
        errno: i32,
        /// Index of the refused request in the batch (those before it were
        /// posted); `None` if the provider did not say.
        index: Option<usize>,
        /// The operation the device lacks, when that is why the request was
        /// refused: an atomic on a device whose `atomic_cap` is
        /// `IBV_ATOMIC_NONE` (iWARP's), with the device and the way out, as
        /// every refusal ([`Lack`](super::unsupported::Lack), a row of
        /// [`super::unsupported::ALL`]). `errno` is then `EOPNOTSUPP`, and
        /// [`Error::is_unsupported`] is true. `None` for any other refusal.
        unsupported: Option<Box<super::unsupported::Lack>>,
    },
    /// A QP capacity asked for is above the device's limit.
    CapExceeded {
        /// The capacity, e.g. `max_send_wr`.
        what: &'static str,
        /// The value asked for.
        asked: u64,
        /// The device's limit.
        limit: u64,
    },
    /// A QP modify that the state machine forbids, refused before the system call.
    QpTransition {
        /// The QP's transport.
        qp_type: crate::prim::QpType,
        /// The state the QP is in (as last moved, or as the caller asserted).
        from: crate::prim::QpState,
        /// The state asked for.
        to: crate::prim::QpState,
        /// What is wrong.
        refusal: crate::prim::Refusal,
    },
    /// A QP transition of [`Qp::connect`](crate::prim::Qp::connect) was
    /// refused by the device: which QP, which transition, where to, and the
    /// usual cause when it is one.
    Connect {
        /// The local QP number.
        qpn: u32,
        /// The state asked for (`INIT`, `RTR` or `RTS`).
        to: crate::prim::QpState,
        /// The errno of `ibv_modify_qp`.
        errno: i32,
        /// The peer's address.
        remote: crate::prim::Endpoint,
        /// The local GID index used.
        gid_index: u8,
        /// The path MTU asked for.
        mtu: crate::prim::Mtu,
        /// What usually causes this refusal, from the port and its GID table.
        hint: Option<String>,
    },
    /// A wait ended at its deadline. The same shape in every layer
    /// (`wrap::aio::Error::Timeout`, `ctrl::Error::Timeout`); `Display`:
    /// `{op}: timed out after {after:?}`.
    Timeout {
        /// What was being awaited, as a phrase (`waiting for the connect
        /// response (rdma_connect)`).
        op: &'static str,
        /// How long was allowed: from the start of the wait to its deadline.
        after: std::time::Duration,
    },
    /// A CM event other than the one waited for (a rejection, an
    /// unreachable peer, an address or route error, a disconnect).
    #[cfg(feature = "cm")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
    CmEvent {
        /// What was being waited for.
        op: &'static str,
        /// The event kind waited for.
        expected: CmEventType,
        /// The event kind that arrived.
        got: CmEventType,
        /// Its status: a negative errno, or for `REJECTED` the IB CM reason
        /// (8: no listener at that address and port; 28: the peer's application rejected).
        status: i32,
        /// The private data it carried (a reject's data from the peer).
        private_data: Vec<u8>,
    },
    /// A range of memory that cannot be made a region: a length of 0, or
    /// an end past 2^64 (the crate's `usize` range convention, see
    /// [`RangeError`](super::RangeError); `Mr::register_ex` returns it).
    Range(super::RangeError),
    /// An argument that only the device, the kernel or the environment can
    /// judge is unusable (see the crate's error policy: an argument the
    /// program wrote and can check alone panics instead).
    BadArgument {
        /// The operation.
        op: &'static str,
        /// The argument.
        what: &'static str,
        /// Its range.
        why: &'static str,
    },
    /// The `dlopen` linkage could not open an rdma-core library, or the
    /// library lacks a function (an rdma-core older than it). A missing
    /// function only of an optional verb counts as unsupported
    /// ([`Error::is_unsupported`]).
    #[cfg(feature = "dlopen")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dlopen")))]
    Load {
        /// The C function that was called (or checked).
        op: &'static str,
        /// The library, the symbol and why (boxed: a rare error keeps
        /// [`Error`] small).
        error: Box<crate::bindings::dl::LoadError>,
    },
    /// A device firmware command (mlx5 DEVX, `mlx5dv::devx`) came back with
    /// a status other than 0 in its output header.
    Firmware {
        /// The C function that carried the command, e.g. `mlx5dv_devx_general_cmd`.
        op: &'static str,
        /// The command's opcode (`MLX5_CMD_OP_*`, e.g. 0x100 QUERY_HCA_CAP).
        opcode: u16,
        /// The output header's `status` (e.g. 0x3 bad parameter, 0x5 bad resource state).
        status: u8,
        /// The output header's `syndrome`: the firmware's reason code.
        syndrome: u32,
    },
    /// The kernel has RDMA devices, but this build has no provider for any of them.
    NoSupportedDevice {
        /// Devices present in `/sys/class/infiniband`.
        kernel_devices: Vec<String>,
        /// Providers registered by a static build (empty for shared linkage).
        static_providers: &'static [&'static str],
    },
}

impl Error {
    /// The last `errno` as a failure of `op`.
    pub(crate) fn last(op: &'static str) -> Error {
        Error::from_errno(op, io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// A failure of `op` with a returned error code (verbs return errno values).
    pub(crate) fn code(op: &'static str, rc: i32) -> Error {
        // Some verbs return -errno, others errno: take the magnitude.
        Error::from_errno(op, i32::try_from(rc.unsigned_abs()).unwrap_or(libc::EIO))
    }

    /// A failed poll: providers return a negative value of their own (mlx5:
    /// -2), not an errno, so it is reported as `EIO`.
    pub(crate) fn poll_failed(op: &'static str) -> Error {
        Error::Verbs { op, errno: libc::EIO }
    }

    pub(crate) fn from_errno(op: &'static str, errno: i32) -> Error {
        #[cfg(feature = "dlopen")]
        if errno == libc::EOPNOTSUPP {
            // A function absent from the loaded library answers EOPNOTSUPP
            // and leaves a record naming it.
            if let Some(error) = crate::bindings::dl::take_absent(op) {
                return Error::Load { op, error: Box::new(error) };
            }
        }
        Error::Verbs { op, errno }
    }

    /// The refusal of `op` on `device`: `missing` (a row of
    /// [`super::unsupported::ALL`]) with the device's value of its
    /// capability. The one way the crate builds an [`Error::Unsupported`].
    #[cold]
    #[inline(never)]
    pub(crate) fn unsupported(
        op: &'static str,
        missing: &'static super::unsupported::Missing,
        device: &str,
        value: impl fmt::Display,
    ) -> Error {
        Error::Unsupported {
            op,
            feature: missing.feature,
            lack: Box::new(super::unsupported::Lack {
                device: device.to_string(),
                value: format!("{} = {value}", missing.cap),
                missing,
            }),
        }
    }

    /// A provider's "not supported" (`EOPNOTSUPP` / `ENOSYS` of a verb) as
    /// the refusal `missing` on `device`; any other error unchanged.
    #[cold]
    #[inline(never)]
    pub(crate) fn lacking(self, missing: &'static super::unsupported::Missing, device: &str) -> Error {
        match self {
            Error::Verbs { op, errno: e @ (libc::EOPNOTSUPP | libc::ENOSYS) } => {
                Error::unsupported(op, missing, device, if e == libc::ENOSYS { "ENOSYS" } else { "EOPNOTSUPP" })
            }
            e => e,
        }
    }

    /// The parts of a refusal: the device, its value, the way out.
    pub fn lack(&self) -> Option<&super::unsupported::Lack> {
        match self {
            Error::Unsupported { lack, .. } | Error::Post { unsupported: Some(lack), .. } => Some(lack),
            _ => None,
        }
    }

    /// Whether the failure means "not supported here": a refusal
    /// ([`Error::Unsupported`]), a provider's `EOPNOTSUPP` / `ENOSYS`, a
    /// refused post of an operation the device lacks.
    pub fn is_unsupported(&self) -> bool {
        match self {
            Error::Unsupported { .. } | Error::Post { unsupported: Some(_), .. } => true,
            Error::Verbs { errno: libc::EOPNOTSUPP | libc::ENOSYS, .. } => true,
            #[cfg(feature = "dlopen")]
            Error::Load { error, .. } => error.is_missing_symbol(),
            _ => false,
        }
    }

    /// A refused post: which request of the list at `head` the provider
    /// named in `bad` (the requests are contiguous in the caller's slice).
    pub(crate) fn post<T>(op: &'static str, rc: i32, head: *mut T, bad: *mut T) -> Error {
        let offset = (bad as usize).wrapping_sub(head as usize);
        let index =
            (!bad.is_null() && offset % std::mem::size_of::<T>() == 0).then(|| offset / std::mem::size_of::<T>());
        Error::Post { op, errno: i32::try_from(rc.unsigned_abs()).unwrap_or(libc::EIO), index, unsupported: None }
    }

    /// A failed post of a [`super::SendList`] (which keeps the refused index).
    #[cold]
    #[inline(never)]
    pub(crate) fn post_list(op: &'static str, rc: i32) -> Error {
        Error::Post { op, errno: i32::try_from(rc.unsigned_abs()).unwrap_or(libc::EIO), index: None, unsupported: None }
    }

    /// This refused post, as the refusal `missing` (a row of
    /// [`super::unsupported::ALL`]) on `device` with its `value` (see
    /// [`Error::Post`]'s `unsupported`); other errors unchanged.
    #[cold]
    #[inline(never)]
    pub(crate) fn unsupported_post(
        self,
        missing: &'static super::unsupported::Missing,
        device: &str,
        value: impl fmt::Display,
    ) -> Error {
        match (self, Error::unsupported("", missing, device, value)) {
            (Error::Post { op, index, .. }, Error::Unsupported { lack, .. }) => {
                Error::Post { op, errno: libc::EOPNOTSUPP, index, unsupported: Some(lack) }
            }
            (e, _) => e,
        }
    }

    /// Whether a non-blocking call found nothing to do (`EAGAIN`), e.g.
    /// `prim::cm::EventChannel::get` with no event queued.
    pub fn is_would_block(&self) -> bool {
        matches!(self, Error::Verbs { errno, .. } if *errno == libc::EAGAIN)
    }

    /// The errno, for failures that carry one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Verbs { errno, .. } | Error::Post { errno, .. } | Error::Connect { errno, .. } => Some(*errno),
            Error::Unsupported { .. } => Some(libc::EOPNOTSUPP),
            #[cfg(feature = "dlopen")]
            Error::Load { error, .. } if error.is_missing_symbol() => Some(libc::EOPNOTSUPP),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Verbs { op, errno } => {
                write!(f, "{op} failed: {} (errno {errno})", io::Error::from_raw_os_error(*errno))
            }
            Error::Post { op, errno, index, unsupported } => {
                match unsupported {
                    Some(lack) => write!(f, "{op} failed (EOPNOTSUPP): {lack}")?,
                    None => write!(f, "{op} failed: {} (errno {errno})", io::Error::from_raw_os_error(*errno))?,
                }
                match index {
                    Some(0) => write!(f, " at work request 0 of the batch; none was posted"),
                    Some(i) => write!(f, " at work request {i} of the batch; the ones before it were posted"),
                    None => Ok(()),
                }
            }
            Error::Unsupported { op, lack, .. } => write!(f, "{op}: {lack}"),
            Error::Range(e) => write!(f, "{e}"),
            Error::Firmware { op, opcode, status, syndrome } => write!(
                f,
                "{op}: firmware command {opcode:#06x} failed with status {status:#04x} ({}), syndrome {syndrome:#010x}; \
                 the syndrome names the field the firmware refused (see the PRM or `dmesg` on the host)",
                firmware_status_name(*status)
            ),
            #[cfg(feature = "dlopen")]
            Error::Load { op, error } if error.symbol == Some(*op) => write!(f, "{error}"),
            #[cfg(feature = "dlopen")]
            Error::Load { op, error } => write!(f, "{op}: {error}"),
            Error::CapExceeded { what, asked, limit } => {
                write!(
                    f,
                    "QP capacity {what} = {asked} is above the device's limit of {limit}; ask for at most {limit}"
                )
            }
            Error::Connect { qpn, to, errno, remote, gid_index, mtu, hint } => {
                let from = match *to {
                    crate::prim::QpState::INIT => "RESET",
                    crate::prim::QpState::RTR => "INIT",
                    _ => "RTR",
                };
                write!(
                    f,
                    "connecting QP {qpn:#x}: {from} -> {to} refused by ibv_modify_qp: {} \
                     (peer QPN {:#x}, LID {}, GID {}; local GID index {gid_index}, path MTU {})",
                    io::Error::from_raw_os_error(*errno),
                    remote.qpn,
                    remote.lid,
                    remote.gid,
                    mtu.bytes()
                )?;
                if let Some(h) = hint {
                    write!(f, ": {h}")?;
                }
                Ok(())
            }
            Error::QpTransition { qp_type, from, to, refusal } => {
                write!(f, "{qp_type} QP {from} -> {to}: ")?;
                match refusal {
                    crate::prim::Refusal::NoTransition => write!(f, "no such transition"),
                    crate::prim::Refusal::Attributes { missing, forbidden } => {
                        if !missing.is_empty() {
                            write!(f, "missing attributes [{}]", missing.field_names())?;
                        }
                        if !forbidden.is_empty() {
                            let sep = if missing.is_empty() { "" } else { "; " };
                            write!(f, "{sep}attributes not allowed here [{}]", forbidden.field_names())?;
                        }
                        Ok(())
                    }
                }
            }
            Error::Timeout { op, after } => write!(f, "{op}: timed out after {after:?}"),
            #[cfg(feature = "cm")]
            Error::CmEvent { op, expected, got, status, private_data } => {
                write!(f, "{op}: got {got} (status {status}) instead of {expected}")?;
                let hint = match (*got, *status) {
                    (CmEventType::REJECTED, 8) => {
                        ": no one listens at that address and port (IB CM reject reason 8, invalid service ID)"
                    }
                    (CmEventType::REJECTED, 28) => ": the peer's application rejected the connection",
                    (CmEventType::ADDR_ERROR, _) => {
                        ": the address does not resolve (no route or no neighbour answering ARP/ND on an RDMA netdev)"
                    }
                    (CmEventType::ROUTE_ERROR, _) => ": no route to the peer on an RDMA device",
                    (CmEventType::UNREACHABLE, _) => ": the peer did not answer the CM request",
                    _ => "",
                };
                f.write_str(hint)?;
                let used = private_data.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
                if used > 0 {
                    write!(f, " (peer's private data: {} bytes)", used)?;
                }
                Ok(())
            }
            Error::BadArgument { op, what, why } => write!(f, "{op}: {what} {why}"),
            Error::DeviceNotFound { name, available } if available.is_empty() => write!(
                f,
                "no RDMA device named {name:?}: libibverbs finds no RDMA device on this machine \
                 (load the NIC's driver, or add SoftRoCE with `rdma link add rxe0 type rxe netdev IFACE`)"
            ),
            Error::DeviceNotFound { name, available } => {
                write!(f, "no RDMA device named {name:?}; available: {available:?}")
            }
            Error::NoSupportedDevice { kernel_devices, static_providers } => {
                write!(f, "no supported RDMA device: ")?;
                if kernel_devices.is_empty() {
                    write!(f, "the kernel has no RDMA device (/sys/class/infiniband is empty)")?;
                } else {
                    write!(f, "the kernel has {kernel_devices:?} but no provider of this build drives them")?;
                }
                if !static_providers.is_empty() {
                    write!(
                        f,
                        "; this static build registers only the providers {static_providers:?} \
                         (rebuild with RRDDMMA_STATIC_PROVIDERS, e.g. mlx5,rxe)"
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match &e {
            Error::Verbs { errno, .. } => io::Error::new(io::Error::from_raw_os_error(*errno).kind(), e),
            Error::Post { errno, .. } | Error::Connect { errno, .. } => {
                io::Error::new(io::Error::from_raw_os_error(*errno).kind(), e)
            }
            Error::DeviceNotFound { .. } | Error::NoSupportedDevice { .. } => {
                io::Error::new(io::ErrorKind::NotFound, e)
            }
            Error::CapExceeded { .. } | Error::QpTransition { .. } => io::Error::new(io::ErrorKind::InvalidInput, e),
            Error::Unsupported { .. } => io::Error::new(io::ErrorKind::Unsupported, e),
            #[cfg(feature = "dlopen")]
            Error::Load { .. } if e.is_unsupported() => io::Error::new(io::ErrorKind::Unsupported, e),
            #[cfg(feature = "dlopen")]
            Error::Load { .. } => io::Error::new(io::ErrorKind::NotFound, e),
            Error::Timeout { .. } => io::Error::new(io::ErrorKind::TimedOut, e),
            Error::BadArgument { .. } | Error::Range(_) => io::Error::new(io::ErrorKind::InvalidInput, e),
            Error::Firmware { .. } => io::Error::other(e),
            #[cfg(feature = "cm")]
            Error::CmEvent { got, .. } => {
                let kind = match *got {
                    CmEventType::REJECTED => io::ErrorKind::ConnectionRefused,
                    CmEventType::DISCONNECTED => io::ErrorKind::ConnectionReset,
                    CmEventType::ADDR_ERROR | CmEventType::ROUTE_ERROR => io::ErrorKind::NotFound,
                    _ => io::ErrorKind::Other,
                };
                io::Error::new(kind, e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_and_why() {
        let e = Error::Verbs { op: "ibv_create_qp", errno: libc::ENOMEM };
        assert_eq!(e.errno(), Some(libc::ENOMEM));
        assert!(e.to_string().starts_with("ibv_create_qp failed: "), "{e}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::OutOfMemory);

        let e = Error::DeviceNotFound { name: "mlx5_9".into(), available: vec!["rxe0".into()] };
        assert_eq!(e.to_string(), "no RDMA device named \"mlx5_9\"; available: [\"rxe0\"]");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::NotFound);

        let e = Error::NoSupportedDevice { kernel_devices: vec!["rxe0".into()], static_providers: &["mlx5"] };
        let s = e.to_string();
        assert!(s.starts_with("no supported RDMA device: the kernel has [\"rxe0\"]"), "{s}");
        assert!(s.contains("registers only the providers [\"mlx5\"]"), "{s}");
        let e = Error::code("ibv_create_cq_ex", -libc::EOPNOTSUPP);
        assert!(e.is_unsupported(), "{e:?}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::Unsupported);
        let e = Error::unsupported("ibv_reg_mr", &super::super::unsupported::ODP, "rxe0", 0);
        assert!(
            e.to_string().starts_with(
                "ibv_reg_mr: on-demand paging is not supported by rxe0 (odp_caps.general_caps = 0); register"
            ),
            "{e}"
        );
        let e = Error::NoSupportedDevice { kernel_devices: vec![], static_providers: &[] };
        assert!(e.to_string().contains("the kernel has no RDMA device"), "{e}");
    }

    #[test]
    fn a_refused_post_names_its_request_and_a_missing_operation() {
        let list = [0u64; 4];
        let head = list.as_ptr().cast_mut();
        let e = Error::post("ibv_post_send", -libc::EINVAL, head, head.wrapping_add(2));
        assert!(matches!(e, Error::Post { index: Some(2), unsupported: None, errno: libc::EINVAL, .. }), "{e:?}");
        assert!(!e.is_unsupported());
        assert!(e.to_string().ends_with("at work request 2 of the batch; the ones before it were posted"), "{e}");
        let u = &super::super::unsupported::ATOMIC_POST_FETCH_ADD;
        let e = e.unsupported_post(u, "siw0", "IBV_ATOMIC_NONE");
        assert!(e.is_unsupported() && e.errno() == Some(libc::EOPNOTSUPP), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "ibv_post_send failed (EOPNOTSUPP): IBV_WR_ATOMIC_FETCH_AND_ADD is not supported by siw0 \
                 (atomic_cap = IBV_ATOMIC_NONE); {} at work request 2 of the batch; the ones before it were posted",
                u.instead
            )
        );
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::Unsupported);
        let u = &super::super::unsupported::ATOMIC_POST_CMP_SWAP;
        let e = Error::post_list("ibv_post_send", -libc::EINVAL).unsupported_post(u, "siw0", "IBV_ATOMIC_NONE");
        assert!(matches!(&e, Error::Post { index: None, unsupported: Some(l), .. } if l.device == "siw0"), "{e:?}");
        assert!(e.to_string().ends_with(u.instead), "{e}");
        let e = Error::post("ibv_post_send", libc::ENOMEM, head, head);
        assert!(e.to_string().ends_with("(errno 12) at work request 0 of the batch; none was posted"), "{e}");
    }
}

/// A failed destroy is reported through `log` when the feature is on
/// (`cargo test --features log --lib destroy`). The only test of the library
/// that installs a logger.
#[cfg(all(test, feature = "log"))]
mod destroy_log {
    use std::sync::Mutex;

    static RECORDS: Mutex<Vec<(log::Level, String, String)>> = Mutex::new(Vec::new());

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, r: &log::Record<'_>) {
            RECORDS.lock().unwrap().push((r.level(), r.target().to_string(), r.args().to_string()));
        }
        fn flush(&self) {}
    }

    #[test]
    fn a_failed_destroy_is_a_warning_naming_verb_object_and_errno() {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
        let before = super::destroy_failures();
        // What `Drop for Pd` does when `ibv_dealloc_pd` says EBUSY.
        super::count_destroy_failure("ibv_dealloc_pd", libc::EBUSY);
        assert!(super::destroy_failures() > before);
        let records = RECORDS.lock().unwrap();
        let (level, target, msg) =
            records.iter().find(|r| r.2.contains("ibv_dealloc_pd")).unwrap_or_else(|| panic!("{records:#?}"));
        assert_eq!(*level, log::Level::Warn);
        assert_eq!(target, "rrddmma::prim::error");
        assert!(msg.starts_with("ibv_dealloc_pd failed in drop of a protection domain: "), "{msg}");
        assert!(msg.contains(&format!("(errno {})", libc::EBUSY)), "{msg}");
        assert!(msg.ends_with("its resources are left in place"), "{msg}");
    }
}
