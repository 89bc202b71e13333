//! A context opened with DEVX, and its general commands.

use std::ptr::NonNull;

use super::cmd;
use crate::bindings as ffi;
use crate::prim::{Context, Error, Result};

/// The operation a refused DEVX open names.
pub const OPEN_OP: &str = "mlx5dv_open_device (DEVX)";

/// What a DEVX context was refused with by the kernel: DEVX needs the
/// kernel's DEVX support and the right to use it. The refusal itself is the
/// row [`DEVX_KERNEL`](crate::prim::unsupported::DEVX_KERNEL) (its way out
/// says the same).
#[deprecated(
    note = "the kernel's refusal is the row `prim::unsupported::DEVX_KERNEL`: match `lack.missing.name == \"DEVX_KERNEL\"`"
)]
pub const KERNEL_REFUSED: &str = "DEVX (the kernel refused a DEVX context: it needs an mlx5_ib with \
    CONFIG_MLX5_INFINIBAND user access (DEVX) and, on most kernels, CAP_NET_RAW; run as a user with \
    it, or use the mlx5dv paths that do not need DEVX)";

/// `Err(Unsupported)` naming DEVX unless `ctx` (a raw context) is an mlx5 device.
pub(crate) fn require_raw(ctx: *mut ffi::ibv_context, name: impl FnOnce() -> String, op: &'static str) -> Result<()> {
    // SAFETY: a live context points to its device.
    if unsafe { ffi::mlx5dv_is_supported((*ctx).device) } {
        Ok(())
    } else {
        Err(Error::unsupported(op, &crate::prim::unsupported::DEVX_NOT_MLX5, &name(), "false"))
    }
}

/// The name of a raw context's device.
pub(crate) fn raw_name(ctx: *mut ffi::ibv_context) -> String {
    // SAFETY: a live context points to its device, whose name is a C string.
    unsafe {
        let dev = (*ctx).device;
        std::ffi::CStr::from_ptr(ffi::ibv_get_device_name(dev)).to_string_lossy().into_owned()
    }
}

/// An mlx5 device opened with DEVX (`mlx5dv_open_device` with
/// `MLX5DV_CONTEXT_FLAGS_DEVX`): the verbs [`Context`] it is, and the
/// right to send firmware commands. Cloning shares the context.
///
/// Every object of this module keeps its `DevxContext` (through its
/// [`Context`]) alive.
#[derive(Clone, Debug)]
pub struct DevxContext {
    ctx: Context,
}

impl DevxContext {
    /// Opens the device `name` with DEVX.
    ///
    /// On a device that is not mlx5, [`Error::Unsupported`] naming DEVX,
    /// the device and the way out (the row
    /// [`DEVX_NOT_MLX5`](crate::prim::unsupported::DEVX_NOT_MLX5)), decided
    /// from `mlx5dv_is_supported` before libmlx5 is asked to open anything.
    /// Where the kernel refuses DEVX (no DEVX support, no permission) the
    /// same kind, the row [`DEVX_KERNEL`](crate::prim::unsupported::DEVX_KERNEL).
    ///
    /// # References
    /// `mlx5dv_open_device(3)`
    pub fn open(name: &str) -> Result<DevxContext> {
        let ctx = Context::open_with(name, |dev| {
            // SAFETY: `dev` is from a live device list.
            if !unsafe { ffi::mlx5dv_is_supported(dev) } {
                return Err(Error::unsupported(OPEN_OP, &crate::prim::unsupported::DEVX_NOT_MLX5, name, "false"));
            }
            let mut attr = ffi::mlx5dv_context_attr {
                flags: ffi::mlx5dv_context_attr_flags::MLX5DV_CONTEXT_FLAGS_DEVX.0,
                comp_mask: 0,
            };
            // SAFETY: an mlx5 device of the live list; `attr` valid.
            let raw = unsafe { ffi::mlx5dv_open_device(dev, &mut attr) };
            NonNull::new(raw).ok_or_else(|| match Error::last("mlx5dv_open_device") {
                Error::Verbs { errno: e @ (libc::EOPNOTSUPP | libc::ENOSYS | libc::EPERM | libc::EACCES), .. } => {
                    let e = std::io::Error::from_raw_os_error(e);
                    Error::unsupported(
                        OPEN_OP,
                        &crate::prim::unsupported::DEVX_KERNEL,
                        name,
                        format_args!("refused: {e}"),
                    )
                }
                e => e,
            })
        })?;
        Ok(DevxContext { ctx })
    }

    /// The verbs context (for PDs, CQs, QPs of this device).
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw context.
    pub fn as_ptr(&self) -> *mut ffi::ibv_context {
        self.ctx.as_ptr()
    }

    /// Sends the firmware command `cmd_in` (a PRM `*_in` layout, e.g. from
    /// [`cmd`]) and writes the answer to `out` (its size the command's
    /// `*_out` layout). The answer's status is checked: a status other
    /// than 0 is [`Error::Firmware`] with the status and syndrome.
    ///
    /// # Panics
    /// If `out` is shorter than the 16-byte output header (a programming error).
    ///
    /// # References
    /// `mlx5dv_devx_general_cmd(3)`
    pub fn general_cmd(&self, cmd_in: &[u8], out: &mut [u8]) -> Result<()> {
        const OP: &str = "mlx5dv_devx_general_cmd";
        assert!(
            out.len() >= cmd::OUT_HDR_BYTES,
            "DevxContext::general_cmd: out holds {} bytes, fewer than a 16-byte output header",
            out.len()
        );
        // SAFETY: a live DEVX context; `cmd_in` and `out` valid for their lengths.
        let rc = unsafe {
            ffi::mlx5dv_devx_general_cmd(
                self.as_ptr(),
                cmd_in.as_ptr().cast(),
                cmd_in.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        if rc != 0 {
            return Err(cmd::failed(OP, cmd_in, rc, out));
        }
        cmd::check_out(OP, cmd::opcode_of(cmd_in), out)
    }

    /// The LAG state: `(lag_state, tx_remap_affinity_1, tx_remap_affinity_2)`
    /// (`QUERY_LAG`; `lag_state` 0 when the ports are not bonded).
    pub fn query_lag(&self) -> Result<(u8, u8, u8)> {
        let mut out = [0u8; cmd::OUT_HDR_BYTES];
        self.general_cmd(&cmd::query_lag(), &mut out)?;
        Ok(cmd::lag_state(&out))
    }
}
