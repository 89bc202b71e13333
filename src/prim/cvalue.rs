//! The one mechanism for C values and flag sets: [`c_type!`].
//!
//! Every C enum and flag set the library exposes (in `prim`, `prim::cm` and
//! `mlx5dv`) is made by this macro, so they all share one API:
//!
//! - a **value** (`pub value Name: u32, from enum ffi::c_enum { .. }`) is a
//!   `#[repr(transparent)]` newtype with private field; `from_raw`, `to_raw`,
//!   `name`; any integer is representable (a value this build does not know
//!   is kept and printed as `Name(99)`, never a panic);
//! - a **flag set** (`pub flags Name: u32, ..`) adds `empty`, `all`,
//!   `is_empty`, `contains`, `intersects`, `bits`, `from_bits_retain`,
//!   `union`/`intersection`/`difference` (`const fn`) and the operators `|`,
//!   `&`, `-` with their `*Assign` forms; it prints as `A | B`, unknown bits
//!   as hex, the empty set as `(empty)`.
//!
//! `from enum path::to::c_enum` takes each constant from the bindings' C enum
//! type (`ffi::ibv_wc_status::IBV_WC_SUCCESS`) and adds `From` both ways;
//! `from consts path` takes module-level constants (`ffi::MLX5_OPCODE_SEND`,
//! for C enums that bindgen leaves anonymous). Each constant names its C
//! enumerator twice, once as an identifier (the value) and once as a string
//! (the `#[doc(alias)]`, which takes only a literal); a compile-time check
//! keeps the two equal. Values are never typed by hand.
//!
//! The C name of each constant (`WcStatus::IBV_WC_SUCCESS`) is there too,
//! hidden and deprecated with a note naming the Rust constant, so code
//! written against the C names compiles with a hint instead of an error.
//!
//! Everything is `#[inline(always)] const fn` except the name look-ups used
//! by `Debug`/`Display`.

use std::fmt;

/// Makes a C value newtype or a C flag set; see the [module docs](self).
macro_rules! c_type {
    // The entry points: a value or a flag set, from a C enum type or from
    // module-level constants; normalised to `@value`/`@flags`.
    (
        $(#[$m:meta])*
        pub $kind:ident $name:ident: $int:ty, from enum $cty:path { $($body:tt)* }
    ) => {
        $crate::prim::cvalue::c_type!(@$kind $(#[$m])* $name $int, enum ($cty) { $($body)* });
    };
    (
        $(#[$m:meta])*
        pub $kind:ident $name:ident: $int:ty, from consts $module:ident { $($body:tt)* }
    ) => {
        $crate::prim::cvalue::c_type!(@$kind $(#[$m])* $name $int, consts $module { $($body)* });
    };

    (
        @value $(#[$m:meta])* $name:ident $int:ty, $how:ident $src:tt {
            $( $(#[$cm:meta])* $c:ident = $cc:ident $alias:literal, )*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[repr(transparent)]
        pub struct $name($int);

        $crate::prim::cvalue::c_type!(@common $name $int, $how $src { $( $(#[$cm])* $c = $cc $alias, )* });

        impl $name {
            /// The Rust name of the value (`REM_ACCESS_ERR`); `None` for a
            /// value this build does not know.
            pub fn name(self) -> Option<&'static str> {
                Self::NAMED.iter().find(|&&(_, v)| v == self.0).map(|&(n, _)| n)
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::fmt::Debug::fmt(self, f)
            }
        }
    };

    (
        @flags $(#[$m:meta])* $name:ident $int:ty, $how:ident $src:tt {
            $( $(#[$cm:meta])* $c:ident = $cc:ident $alias:literal, )*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[repr(transparent)]
        pub struct $name($int);

        $crate::prim::cvalue::c_type!(@common $name $int, $how $src { $( $(#[$cm])* $c = $cc $alias, )* });

        impl $name {
            /// No flag.
            #[inline(always)]
            pub const fn empty() -> $name {
                $name(0)
            }

            /// Every flag this build names.
            #[inline(always)]
            pub const fn all() -> $name {
                $name(0 $(| $name::$c.0)*)
            }

            /// The bits.
            #[inline(always)]
            pub const fn bits(self) -> $int {
                self.0
            }

            /// From bits; unknown ones are kept.
            #[inline(always)]
            pub const fn from_bits_retain(bits: $int) -> $name {
                $name(bits)
            }

            /// Whether no flag is set.
            #[inline(always)]
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// Whether every flag of `other` is set.
            #[inline(always)]
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any flag of `other` is set.
            #[inline(always)]
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// The flags of either (`|`, usable in `const`).
            #[inline(always)]
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            /// The flags of both (`&`, usable in `const`).
            #[inline(always)]
            pub const fn intersection(self, other: $name) -> $name {
                $name(self.0 & other.0)
            }

            /// The flags of `self` not in `other` (`-`, usable in `const`).
            #[inline(always)]
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }
        }

        impl ::core::ops::BitOr for $name {
            type Output = $name;
            #[inline(always)]
            fn bitor(self, rhs: $name) -> $name {
                self.union(rhs)
            }
        }

        impl ::core::ops::BitOrAssign for $name {
            #[inline(always)]
            fn bitor_assign(&mut self, rhs: $name) {
                *self = self.union(rhs);
            }
        }

        impl ::core::ops::BitAnd for $name {
            type Output = $name;
            #[inline(always)]
            fn bitand(self, rhs: $name) -> $name {
                self.intersection(rhs)
            }
        }

        impl ::core::ops::BitAndAssign for $name {
            #[inline(always)]
            fn bitand_assign(&mut self, rhs: $name) {
                *self = self.intersection(rhs);
            }
        }

        impl ::core::ops::Sub for $name {
            type Output = $name;
            #[inline(always)]
            fn sub(self, rhs: $name) -> $name {
                self.difference(rhs)
            }
        }

        impl ::core::ops::SubAssign for $name {
            #[inline(always)]
            fn sub_assign(&mut self, rhs: $name) {
                *self = self.difference(rhs);
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                $crate::prim::cvalue::write_flags(f, self.0 as u64, Self::NAMED.iter().map(|&(n, v)| (n, v as u64)))
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::fmt::Debug::fmt(self, f)
            }
        }
    };

    // What values and flag sets share: the constants, the name table,
    // `from_raw`/`to_raw`, `From` with the C type, the test metadata.
    (@common $name:ident $int:ty, $how:ident $src:tt {
        $( $(#[$cm:meta])* $c:ident = $cc:ident $alias:literal, )*
    }) => {
        impl $name {
            $(
                $(#[$cm])*
                #[doc = concat!("\n\n`", $alias, "`")]
                #[doc(alias = $alias)]
                pub const $c: $name = $name($crate::prim::cvalue::c_type!(@c $how $src $cc) as $int);
            )*

            $(
                #[doc(hidden)]
                #[deprecated(note = "a C name: use the Rust constant, the C name without its prefix (QpType::UD for IBV_QPT_UD; docs/upgrading.md)")]
                #[allow(non_upper_case_globals)]
                pub const $cc: $name = $name::$c;
            )*

            /// Each named constant: its Rust name and value.
            const NAMED: &'static [(&'static str, $int)] = &[$((stringify!($c), $name::$c.0)),*];

            /// From the C integer (any value, known or not).
            #[inline(always)]
            pub const fn from_raw(raw: $int) -> $name {
                $name(raw)
            }

            /// The C integer.
            #[inline(always)]
            pub const fn to_raw(self) -> $int {
                self.0
            }

            /// What the bindings comparison test checks.
            #[cfg(test)]
            #[allow(dead_code)]
            pub(crate) const C_INFO: $crate::prim::cvalue::CInfo = $crate::prim::cvalue::CInfo {
                rust: stringify!($name),
                source: stringify!($how $src),
                consts: &[$((stringify!($c), stringify!($cc), $name::$c.0 as i128)),*],
            };
        }

        $(
            const _: () = assert!(
                $crate::prim::cvalue::str_eq($alias, stringify!($cc)),
                concat!("doc alias ", $alias, " is not the C name ", stringify!($cc)),
            );
        )*

        $crate::prim::cvalue::c_type!(@from $how $src $name $int);
    };

    // One C constant's integer.
    (@c enum ($cty:path) $cc:ident) => { <$cty>::$cc.0 };
    (@c consts $module:ident $cc:ident) => { $module::$cc.0 };

    (@from enum ($cty:path) $name:ident $int:ty) => {
        impl From<$cty> for $name {
            #[inline(always)]
            fn from(raw: $cty) -> $name {
                $name(raw.0 as $int)
            }
        }

        impl From<$name> for $cty {
            #[inline(always)]
            fn from(v: $name) -> $cty {
                $cty(v.0 as _)
            }
        }
    };
    (@from consts $module:ident $name:ident $int:ty) => {};
}

pub(crate) use c_type;

/// Byte-wise string equality, usable in `const`.
pub(crate) const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `A | B | 0x100`, or `(empty)`.
pub(crate) fn write_flags(
    f: &mut fmt::Formatter<'_>,
    bits: u64,
    named: impl Iterator<Item = (&'static str, u64)>,
) -> fmt::Result {
    if bits == 0 {
        return f.write_str("(empty)");
    }
    let mut rest = bits;
    let mut first = true;
    for (name, bit) in named {
        if bit != 0 && rest & bit == bit {
            if !first {
                f.write_str(" | ")?;
            }
            f.write_str(name)?;
            rest &= !bit;
            first = false;
        }
    }
    if rest != 0 {
        if !first {
            f.write_str(" | ")?;
        }
        write!(f, "{rest:#x}")?;
    }
    Ok(())
}

/// A macro-made type as the bindings comparison test sees it.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct CInfo {
    /// The Rust type name.
    pub rust: &'static str,
    /// `enum ffi :: c_enum` or `consts ffi`.
    pub source: &'static str,
    /// (Rust name, C name, value) of each constant.
    pub consts: &'static [(&'static str, &'static str, i128)],
}

/// The bindings comparison: every macro-made type against the committed
/// bindings, so that regenerated bindings with a new enumerator fail here
/// until it is named (or listed below with the reason).
#[cfg(test)]
mod tests {
    use super::CInfo;

    /// Code written against the C names still compiles (with a deprecation
    /// note naming the Rust constant) and means the same value.
    #[test]
    #[allow(deprecated)]
    fn the_c_names_are_deprecated_aliases_of_the_rust_constants() {
        use crate::prim::{AccessFlags, QpType, WcStatus};
        assert_eq!(QpType::IBV_QPT_UD, QpType::UD);
        assert_eq!(WcStatus::IBV_WC_REM_ACCESS_ERR, WcStatus::REM_ACCESS_ERR);
        assert_eq!(
            AccessFlags::IBV_ACCESS_LOCAL_WRITE | AccessFlags::IBV_ACCESS_REMOTE_WRITE,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE
        );
        assert_eq!(crate::mlx5dv::seg::WqeOpcode::MLX5_OPCODE_RDMA_WRITE, crate::mlx5dv::seg::WqeOpcode::RDMA_WRITE);
    }

    /// Enumerators deliberately without a Rust constant, with the reason.
    const EXCEPTIONS: &[(&str, &str)] =
        &[("MLX5_CQE_OWNER_MASK", "the owner bit's mask in op_own, not a CQE opcode (see cqe::owner)")];

    /// Every macro-made type and the prefix its C names carry.
    fn types() -> Vec<(CInfo, &'static str)> {
        use crate::mlx5dv::{cqe, mini, seg};
        use crate::prim::*;
        #[allow(unused_mut)]
        let mut v = vec![
            (WcStatus::C_INFO, "IBV_WC_"),
            (WcOpcode::C_INFO, "IBV_WC_"),
            (WrOpcode::C_INFO, "IBV_WR_"),
            (QpType::C_INFO, "IBV_QPT_"),
            (QpState::C_INFO, "IBV_QPS_"),
            (Mtu::C_INFO, "IBV_"),
            (PortState::C_INFO, "IBV_PORT_"),
            (EventType::C_INFO, "IBV_EVENT_"),
            (MwType::C_INFO, "IBV_MW_"),
            (MigState::C_INFO, "IBV_MIG_"),
            (AccessFlags::C_INFO, "IBV_ACCESS_"),
            (SendFlags::C_INFO, "IBV_SEND_"),
            (WcFlags::C_INFO, "IBV_WC_"),
            (AttrMask::C_INFO, "IBV_QP_"),
            (SendOps::C_INFO, "IBV_QP_EX_WITH_"),
            (WcFlagsEx::C_INFO, "IBV_WC_EX_WITH_"),
            (GidType::C_INFO, "IBV_GID_TYPE_"),
            (seg::CtrlFlags::C_INFO, "MLX5_WQE_CTRL_"),
            (seg::WqeOpcode::C_INFO, "MLX5_OPCODE_"),
            (cqe::CqeOpcode::C_INFO, "MLX5_CQE_"),
            (cqe::Syndrome::C_INFO, "MLX5_CQE_SYNDROME_"),
            (seg::TmOpcode::C_INFO, "MLX5_TM_OPCODE_"),
            (seg::TmFlags::C_INFO, "MLX5_SRQ_FLAG_TM_"),
            (mini::CqeFormat::C_INFO, "MLX5_"),
        ];
        #[cfg(feature = "cm")]
        v.push((crate::prim::cm::CmEventType::C_INFO, "RDMA_CM_EVENT_"));
        v
    }

    /// `(name, type, value)` of every `pub const NAME: TYPE = TYPE(VALUE);`;
    /// bindgen's anonymous types are numbered per file, so `file` tags them.
    fn consts(file: &str, src: &str) -> Vec<(String, String, i128)> {
        let mut out = Vec::new();
        for item in src.split("pub const ").skip(1) {
            let item: String = item.split(';').next().unwrap().split_whitespace().collect();
            let Some((name, rest)) = item.split_once(':') else { continue };
            let Some((ty, expr)) = rest.split_once('=') else { continue };
            let inner = expr.strip_prefix(ty).and_then(|e| e.strip_prefix('(')).and_then(|e| e.strip_suffix(')'));
            let Some(Ok(value)) = inner.map(|e| e.trim_end_matches(',').parse::<i128>()) else { continue };
            let ty = if ty.starts_with("_bindgen_ty_") { format!("{file}::{ty}") } else { ty.to_string() };
            out.push((name.to_string(), ty, value));
        }
        out
    }

    /// The mismatches between the types and the bindings' constants.
    fn mismatches(types: &[(CInfo, &str)], bindings: &[(String, String, i128)]) -> Vec<String> {
        let mut bad = Vec::new();
        for (info, prefix) in types {
            // The C type: named by the source (`enum (ffi :: ibv_wc_status)`), or
            // for `consts` the (anonymous) type of the first constant.
            let c_type = if info.source.starts_with("enum") {
                info.source.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).find(|s| !s.is_empty()).unwrap()
            } else {
                let first = info.consts[0].1;
                &bindings.iter().find(|b| b.0 == first).expect("a constant the bindings define").1
            };
            for &(rust, c, value) in info.consts {
                if c.strip_prefix(prefix) != Some(rust) {
                    bad.push(format!("{}::{rust}: C name {c} is not {prefix}{rust}", info.rust));
                }
                if !bindings.iter().any(|b| b.0 == c && b.2 == value) {
                    bad.push(format!("{}::{rust} = {value}: the bindings have no {c} of that value", info.rust));
                }
            }
            let members: Vec<_> = bindings.iter().filter(|b| b.1 == c_type).collect();
            if members.is_empty() {
                bad.push(format!("{}: no constants of type {c_type} in the bindings", info.rust));
            }
            for (c, _, value) in members {
                if EXCEPTIONS.iter().any(|e| e.0 == c) {
                    continue;
                }
                let want = c.strip_prefix(prefix).unwrap_or(c);
                if !info.consts.iter().any(|&(r, _, v)| r == want && v == *value) {
                    bad.push(format!("{c} = {value} ({c_type}) has no constant {}::{want}", info.rust));
                }
            }
        }
        bad
    }

    fn bindings() -> Vec<(String, String, i128)> {
        #[allow(unused_mut)]
        let mut b = consts("sys", include_str!("../bindings/sys.rs"));
        b.extend(consts("newer", include_str!("../bindings/newer.rs")));
        // libmlx5's tag-matching constants, which no installed header has
        // (the harness checks the WQEs they make against libmlx5's).
        b.extend(consts("seg", include_str!("../mlx5dv/queue/seg.rs")));
        // The compressed-session format (libmlx5's mlx5.h, the kernel's device.h).
        b.extend(consts("mini", include_str!("../mlx5dv/completion/mini.rs")));
        #[cfg(feature = "cm")]
        b.extend(consts("cm", include_str!("../bindings/cm.rs")));
        b
    }

    #[test]
    fn every_c_enumerator_has_a_rust_constant_of_the_same_value() {
        let bad = mismatches(&types(), &bindings());
        assert!(bad.is_empty(), "the bindings and the Rust constants differ:\n{}", bad.join("\n"));
    }

    #[test]
    fn a_new_or_changed_enumerator_is_caught() {
        let mut b = bindings();
        b.push(("IBV_WC_NEW_ERR".into(), "ibv_wc_status".into(), 99));
        b.iter_mut().find(|x| x.0 == "MLX5_OPCODE_SEND").unwrap().2 = 0x7f;
        let bad = mismatches(&types(), &b);
        assert!(bad.iter().any(|m| m.contains("IBV_WC_NEW_ERR = 99") && m.contains("WcStatus::NEW_ERR")), "{bad:?}");
        assert!(bad.iter().any(|m| m.contains("WqeOpcode::SEND = 10")), "{bad:?}");
        assert!(bad.iter().any(|m| m.starts_with("MLX5_OPCODE_SEND = 127")), "{bad:?}");
    }

    #[test]
    fn every_macro_invocation_is_compared() {
        let files = [
            include_str!("values.rs"),
            include_str!("qp/attr.rs"),
            include_str!("qp/ex.rs"),
            include_str!("cq/poller.rs"),
            include_str!("cm/kind.rs"),
            include_str!("gid.rs"),
            include_str!("../mlx5dv/queue/seg.rs"),
            include_str!("../mlx5dv/completion/cqe.rs"),
            include_str!("../mlx5dv/completion/mini.rs"),
        ];
        let made: usize = files.iter().map(|f| f.matches("\nc_type! {").count()).sum();
        let cm_off = usize::from(!cfg!(feature = "cm"));
        assert_eq!(made, types().len() + cm_off, "add the new type to `types()`");
    }
}
