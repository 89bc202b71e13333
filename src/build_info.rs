//! What the linkage probe chose when this binary was built.

use std::fmt;

/// How this build of rrddmma reaches libibverbs, from the build-time probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    /// `mlnx4`, `mlnx5`, `pkg-config`, `static`, `source` or `dlopen`.
    pub linkage: &'static str,
    /// The rdma-core release linked against (e.g. `44.0`), or `MLNX_OFED
    /// <version>`; `loaded at run time` for `dlopen`.
    pub rdma_core: &'static str,
    /// Providers registered by a static build (`mlx5`, `rxe`, ...); empty when
    /// shared libibverbs loads its providers itself.
    pub static_providers: &'static [&'static str],
}

impl BuildInfo {
    /// Whether providers are linked in statically.
    pub fn is_static(&self) -> bool {
        !self.static_providers.is_empty()
    }
}

impl fmt::Display for BuildInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "linkage {}, rdma-core {}", self.linkage, self.rdma_core)?;
        if self.is_static() {
            write!(f, ", static providers {}", self.static_providers.join(","))?;
        }
        Ok(())
    }
}

/// The linkage this binary was built with.
///
/// ```
/// let info = rrddmma::build_info();
/// assert!(["mlnx4", "mlnx5", "pkg-config", "static", "source", "dlopen"].contains(&info.linkage));
/// println!("{info}");
/// ```
pub fn build_info() -> BuildInfo {
    BuildInfo {
        linkage: env!("RRDDMMA_BUILD_LINKAGE"),
        rdma_core: env!("RRDDMMA_BUILD_RDMA_CORE"),
        static_providers: crate::bindings::STATIC_PROVIDERS,
    }
}
