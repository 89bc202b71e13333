//! The regions the data path uses: the session buffer's own registration,
//! or one region per QP over it (`--mr_per_qp`), or a region registered
//! through a DMA handle with TPH hints (`--ph`, `--tph_mem`, `--cpu_id`),
//! or the GPU buffer (`gpu`); and the QP attributes the flags set, read
//! back from the device.
//!
//! The extra regions cover the buffer of a `wrap::RegisteredMem`, which
//! must outlive them and must never be unmapped while the device may reach
//! it: [`Memory`] deregisters them first, and when a deregistration fails
//! it keeps the buffer (never unmaps it), as `prim::Mr` keeps a backing it
//! could not deregister.

use std::mem::ManuallyDrop;

use rrddmma::prim::{AccessFlags, DmaHandle, Mr, MrExOptions, MrMemory, Pd, Qp};
use rrddmma::wrap::RegisteredMem;

use crate::gpu::GpuMem;

type Res<T> = Result<T, String>;

/// The session's buffer and the regions the data path uses.
pub struct Memory {
    /// `--mr_per_qp` (one per QP) or TPH (one): regions over `host`.
    extra: Vec<Mr>,
    gpu: Option<GpuMem>,
    host: ManuallyDrop<RegisteredMem>,
    /// The DMA handle of the TPH regions (they hold it too).
    _dmah: Option<DmaHandle>,
}

impl std::ops::Deref for Memory {
    type Target = RegisteredMem;
    fn deref(&self) -> &RegisteredMem {
        &self.host
    }
}

impl Memory {
    /// The data regions of `qps` QPs over `host` (or the GPU buffer `gpu`):
    /// `per_qp` one each; `dmah`: registered through `ibv_reg_mr_ex` with it.
    pub fn new(
        host: RegisteredMem,
        pd: &Pd,
        qps: usize,
        per_qp: bool,
        dmah: Option<DmaHandle>,
        gpu: Option<GpuMem>,
    ) -> Res<Memory> {
        let mut m = Memory { extra: Vec::new(), gpu, host: ManuallyDrop::new(host), _dmah: dmah };
        let count = if per_qp { qps } else { usize::from(m._dmah.is_some()) };
        let access = m.host.mr().access();
        for i in 0..count {
            let r = m.register(pd, access).map_err(|e| {
                let flag = if m._dmah.is_some() { "--ph" } else { "--mr_per_qp" };
                format!("{flag}: registering region {i} of {count}: {e}")
            })?;
            m.extra.push(r);
        }
        Ok(m)
    }

    /// One more region over the whole host buffer.
    fn register(&self, pd: &Pd, access: AccessFlags) -> rrddmma::prim::Result<Mr> {
        let (ptr, len) = (self.host.as_ptr(), self.host.len());
        match &self._dmah {
            Some(d) => {
                let opts = MrExOptions { dmah: Some(d), ..MrExOptions::default() };
                // SAFETY: the host buffer stays mapped while this region
                // exists (dropped first in `Drop`, and kept when a
                // deregistration fails).
                unsafe { Mr::register_ex(pd, MrMemory::Addr(ptr), len, access, opts) }
            }
            // SAFETY: as above.
            None => unsafe { Mr::register(pd, ptr, len, access) },
        }
    }

    /// The region QP `i`'s requests and receives use.
    #[inline]
    pub fn data(&self, i: usize) -> &Mr {
        if let Some(g) = &self.gpu {
            return g.mr();
        }
        match self.extra.len() {
            0 => self.host.mr(),
            1 => &self.extra[0],
            n => &self.extra[i % n],
        }
    }

    /// What the run's notes say of the regions, if anything.
    pub fn describe(&self) -> Option<String> {
        if let Some(g) = &self.gpu {
            return Some(format!(" memory: {}", g.how));
        }
        if self._dmah.is_some() {
            return Some(format!(
                " memory: {} region(s) registered through ibv_reg_mr_ex with a DMA handle (TPH)",
                self.extra.len()
            ));
        }
        (self.extra.len() > 1).then(|| {
            let keys: Vec<String> = self.extra.iter().map(|m| format!("{:#x}", m.rkey())).collect();
            format!(" memory: one region per QP (--mr_per_qp), rkeys {}", keys.join(" "))
        })
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let failures = rrddmma::prim::destroy_failures();
        self.extra.clear();
        drop(self.gpu.take());
        if rrddmma::prim::destroy_failures() == failures {
            // SAFETY: dropped once, here; nothing registered over it remains.
            unsafe { ManuallyDrop::drop(&mut self.host) };
        }
        // Otherwise the device may still reach the buffer: it stays mapped.
    }
}

/// The attributes the QP flags set, as the device reports them
/// (`ibv_query_qp`): SL, traffic class, flow label, ACK timeout, retry count.
pub fn qp_attrs(qp: &Qp) -> Res<String> {
    use rrddmma::bindings as ffi;
    let mut attr = std::mem::MaybeUninit::<ffi::ibv_qp_attr>::zeroed();
    let mut init = std::mem::MaybeUninit::<ffi::ibv_qp_init_attr>::zeroed();
    let m = ffi::ibv_qp_attr_mask::IBV_QP_AV
        | ffi::ibv_qp_attr_mask::IBV_QP_TIMEOUT
        | ffi::ibv_qp_attr_mask::IBV_QP_RETRY_CNT;
    // SAFETY: a live QP; both outputs are valid for writes.
    let rc = unsafe { ffi::ibv_query_qp(qp.as_ptr(), attr.as_mut_ptr(), m.0 as i32, init.as_mut_ptr()) };
    if rc != 0 {
        return Err(format!("ibv_query_qp: {}", std::io::Error::from_raw_os_error(rc.abs())));
    }
    // SAFETY: zero-initialised, then filled by the provider; zero is valid.
    let a = unsafe { attr.assume_init() };
    let g = a.ah_attr.grh;
    Ok(format!(
        "sl {}, traffic class {}, flow label {:#x}, timeout {}, retry count {}",
        a.ah_attr.sl, g.traffic_class, g.flow_label, a.timeout, a.retry_cnt
    ))
}

/// perftest's `--report-counters`: port counters read before the run and
/// after each report, their change printed as perftest prints it
/// (`\tNAME=DELTA` per counter, then a blank line).
pub struct Counters {
    list: Vec<(String, std::path::PathBuf, std::sync::atomic::AtomicU64)>,
}

impl Counters {
    /// Opens `names` under `/sys/class/infiniband/DEV/ports/PORT/`.
    pub fn open(dev: &str, port: u8, names: &[String]) -> Res<Option<Counters>> {
        if names.is_empty() {
            return Ok(None);
        }
        let dir = std::path::PathBuf::from(format!("/sys/class/infiniband/{dev}/ports/{port}"));
        let mut list = Vec::new();
        for n in names {
            let path = dir.join(n);
            let v = read(&path).map_err(|e| {
                format!(
                    "--report-counters: {}: {e}; the port's counters are the files under {} (counters/, hw_counters/)",
                    path.display(),
                    dir.display()
                )
            })?;
            list.push((n.clone(), path, v.into()));
        }
        Ok(Some(Counters { list }))
    }

    /// The change since the last read, as perftest prints it.
    pub fn print(&self) -> Res<()> {
        let mut out = String::new();
        for (name, path, last) in &self.list {
            let v = read(path).map_err(|e| format!("--report-counters: {}: {e}", path.display()))?;
            let was = last.swap(v, std::sync::atomic::Ordering::Relaxed);
            out.push_str(&format!("\t{name}={}\n", v.wrapping_sub(was)));
        }
        println!("{out}");
        Ok(())
    }
}

fn read(path: &std::path::Path) -> Res<u64> {
    let t = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    t.trim().parse().map_err(|_| format!("{:?} is not a counter value", t.trim()))
}
