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
