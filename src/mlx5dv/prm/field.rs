//! The field accessor and the layout description every PRM structure
//! shares, and the macro that writes one structure from its table.

use std::fmt;

/// One field of a PRM structure: `bits` wide at `bit_off` bits from the
/// structure's start, as `u8 name[bits]` at `__mlx5_bit_off(typ, name)` in
/// `mlx5_ifc.h`.
///
/// The byte convention is `MLX5_SET` / `MLX5_GET`'s: the structure is a
/// sequence of big-endian 32-bit dwords; bit offset 0 is the most significant
/// bit of dword 0, so a field of `bits` bits at `bit_off` occupies bits
/// `32 - bits - bit_off % 32 ..` (counted from the least significant) of
/// dword `bit_off / 32`. A field of at most 32 bits lies inside one dword; a
/// 64-bit field (`MLX5_SET64`) is two whole dwords, the high half first.
/// [`Field::new`] refuses anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// The field's name in `mlx5_ifc.h` (`udp_sport`).
    pub name: &'static str,
    /// Offset of the field's most significant bit from the structure's start.
    pub bit_off: u32,
    /// Width in bits: 1 to 32, or 64.
    pub bits: u32,
}

impl Field {
    /// A field; panics (at compile time in a `const`) unless it lies inside
    /// one dword, or is 64 bits on a dword boundary.
    pub const fn new(name: &'static str, bit_off: u32, bits: u32) -> Self {
        assert!(
            (bits >= 1 && bits <= 32 && bit_off % 32 + bits <= 32) || (bits == 64 && bit_off % 32 == 0),
            "a PRM field is 1..=32 bits inside one dword, or 64 bits on a dword boundary"
        );
        Field { name, bit_off, bits }
    }

    /// The largest value the field holds.
    pub const fn max(&self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// Whether `v` fits the field's width.
    pub const fn fits(&self, v: u64) -> bool {
        v <= self.max()
    }

    /// The same field `base` bits further: the field as seen from a
    /// structure that embeds this one's at bit `base`.
    pub const fn at(self, base: u32) -> Self {
        Field { name: self.name, bit_off: self.bit_off + base, bits: self.bits }
    }

    /// The byte index of the first dword the field touches; panics naming
    /// the field when `len` bytes do not hold it.
    fn dword(&self, len: usize) -> usize {
        let at = (self.bit_off / 32) as usize * 4;
        let need = at + if self.bits == 64 { 8 } else { 4 };
        assert!(
            need <= len,
            "PRM field {} (bits {:#x}..+{}) lies past the end of a {len}-byte buffer",
            self.name,
            self.bit_off,
            self.bits
        );
        at
    }

    /// `MLX5_GET` (`MLX5_GET64` for a 64-bit field) on `buf`; panics when
    /// `buf` is too short to hold the field.
    pub fn get(&self, buf: &[u8]) -> u64 {
        let at = self.dword(buf.len());
        let dw = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if self.bits == 64 {
            (u64::from(dw(at)) << 32) | u64::from(dw(at + 4))
        } else {
            let shift = 32 - self.bits - self.bit_off % 32;
            (u64::from(dw(at)) >> shift) & self.max()
        }
    }

    /// `MLX5_SET` (`MLX5_SET64`) on `buf`, leaving the other bits of the
    /// dword as they are. A value wider than the field is a programming
    /// error: this panics naming the field, the value and the width (where
    /// `MLX5_SET` silently drops the high bits); check with [`fits`](Self::fits)
    /// first when the value comes from outside.
    pub fn set(&self, buf: &mut [u8], v: u64) {
        self.set_in("", buf, v);
    }

    /// [`set`](Self::set), with the panic naming the structure `layout` too.
    pub fn set_in(&self, layout: &str, buf: &mut [u8], v: u64) {
        if !self.fits(v) {
            overflow(layout, self, v);
        }
        let at = self.dword(buf.len());
        if self.bits == 64 {
            buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
            return;
        }
        let shift = 32 - self.bits - self.bit_off % 32;
        let mask = (self.max() as u32) << shift;
        let old = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        let new = (old & !mask) | ((v as u32) << shift);
        buf[at..at + 4].copy_from_slice(&new.to_be_bytes());
    }
}

#[cold]
#[track_caller]
fn overflow(layout: &str, f: &Field, v: u64) -> ! {
    let dot = if layout.is_empty() { "" } else { "." };
    panic!(
        "PRM {layout}{dot}{}: value {v:#x} does not fit the field's {} bits (at most {:#x}); \
         mask or check the value (`Field::fits`) before setting it",
        f.name,
        f.bits,
        f.max()
    )
}

/// A structure embedded in another (`struct mlx5_ifc_ads_bits
/// primary_address_path;` in `qpc`): its member path in `mlx5_ifc.h`, its
/// offset, and its own description.
#[derive(Clone, Copy, Debug)]
pub struct Sub {
    /// The member's path from the outer structure (`primary_address_path`,
    /// or `capability.cmd_hca_cap` through a union).
    pub name: &'static str,
    /// The member's offset in bits from the outer structure's start.
    pub bit_off: u32,
    /// The embedded structure.
    pub layout: &'static Info,
}

/// What a PRM structure is: its name, size, fields and embedded structures.
#[derive(Clone, Copy, Debug)]
pub struct Info {
    /// The name in `mlx5_ifc.h` (`qpc` for `struct mlx5_ifc_qpc_bits`).
    pub name: &'static str,
    /// Size in bytes (`MLX5_ST_SZ_BYTES`).
    pub bytes: usize,
    /// The size the Linux 6.1 header gives, when it differs from `bytes`
    /// because rdma-core v59's header has a longer structure; 0 when the
    /// kernel header has no such structure.
    pub kernel_bytes: usize,
    /// Every field exposed, in offset order.
    pub fields: &'static [Field],
    /// The embedded structures exposed.
    pub subs: &'static [Sub],
    /// The fields and embedded structures whose layout comes from rdma-core
    /// v59's `providers/mlx5/mlx5_ifc.h` because Linux 6.1's header does not
    /// have them (all of them when `kernel_bytes` is 0, for the structures of
    /// [`LAYOUTS`](crate::mlx5dv::prm::LAYOUTS); the translation entries of
    /// [`ENTRIES`](crate::mlx5dv::prm::ENTRIES) are the kernel's `qp.h`
    /// structures).
    pub rdma_core: &'static [&'static str],
    /// The fields neither Linux 6.1's nor rdma-core v59's header has, whose
    /// layout comes from the newest Debian kernel's `mlx5_ifc.h` (Linux 7.3:
    /// `qpc.dp_ordering_force`, `qpc.dp_ordering_1`); checked against that
    /// header's structure walk (`tests/mlx5_prm_oracle.rs`).
    pub newest_kernel: &'static [&'static str],
}

impl Info {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Whether the member `name` comes from rdma-core v59's header.
    pub fn from_rdma_core(&self, name: &str) -> bool {
        self.kernel_bytes == 0 || self.rdma_core.contains(&name)
    }

    /// Whether the member `name` comes from the newest kernel's header only.
    pub fn from_newest_kernel(&self, name: &str) -> bool {
        self.newest_kernel.contains(&name)
    }
}

/// Formats the non-zero fields of `buf` as `name: value` pairs.
pub(crate) fn debug_fields(f: &mut fmt::Formatter<'_>, info: &Info, buf: &[u8]) -> fmt::Result {
    let mut s = f.debug_struct(info.name);
    for fld in info.fields {
        let v = fld.get(buf);
        if v != 0 {
            s.field(fld.name, &format_args!("{v:#x}"));
        }
    }
    s.finish_non_exhaustive()
}

/// Writes one PRM structure type from its table: a `#[repr(transparent)]`
/// byte array with `NAME`, `BYTES`, `FIELDS`, `SUBS`, `INFO`, a getter and
/// a `set_` setter per field, and `name()` / `name_mut()` per embedded
/// structure.
macro_rules! layout {
    (
        $(#[$meta:meta])*
        $ty:ident = $cname:literal, bits $bits:literal, kernel_bits $kbits:literal;
        fields { $($fname:literal $get:ident $set:ident $off:literal $w:literal $fty:ty;)* }
        subs { $($sname:literal $sget:ident $smut:ident $sty:ident $soff:literal;)* }
        rdma_core [ $($rc:literal),* ]
        $(newest_kernel [ $($nk:literal),* ])?
    ) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $ty(pub [u8; $ty::BYTES]);

        // Field names are `mlx5_ifc.h`'s, `atomic_req_8B_endianness_mode` included.
        // `mkc.len` is a field, not a collection's length.
        #[allow(non_snake_case, clippy::len_without_is_empty)]
        impl $ty {
            #[doc = concat!("The name: `", $cname, "` (`struct mlx5_ifc_", $cname,
                "_bits` in `mlx5_ifc.h`, for the structures of `LAYOUTS`).")]
            pub const NAME: &'static str = $cname;
            /// Size in bytes (`MLX5_ST_SZ_BYTES`).
            pub const BYTES: usize = $bits / 8;
            /// Every field exposed, in offset order.
            pub const FIELDS: &'static [$crate::mlx5dv::prm::field::Field] =
                &[$($crate::mlx5dv::prm::field::Field::new($fname, $off, $w)),*];
            /// The embedded structures exposed.
            pub const SUBS: &'static [$crate::mlx5dv::prm::field::Sub] = &[$(
                $crate::mlx5dv::prm::field::Sub { name: $sname, bit_off: $soff, layout: &$sty::INFO }
            ),*];
            /// The structure's description.
            pub const INFO: $crate::mlx5dv::prm::field::Info = $crate::mlx5dv::prm::field::Info {
                name: $cname,
                bytes: $bits / 8,
                kernel_bytes: $kbits / 8,
                fields: Self::FIELDS,
                subs: Self::SUBS,
                rdma_core: &[$($rc),*],
                newest_kernel: &[$($($nk),*)?],
            };

            /// All zeroes (a command or context to fill).
            pub const fn new() -> Self {
                $ty([0; $ty::BYTES])
            }

            /// The structure in the first [`BYTES`](Self::BYTES) bytes of
            /// `b` (a command's output, a context read back); `None` when `b`
            /// is shorter.
            pub fn from_slice(b: &[u8]) -> Option<Self> {
                Some($ty(b.get(..Self::BYTES)?.try_into().ok()?))
            }

            /// A view of `b` as this structure.
            pub fn from_ref(b: &[u8; $ty::BYTES]) -> &Self {
                // SAFETY: `Self` is `repr(transparent)` over `[u8; BYTES]`:
                // same size, alignment 1, every byte pattern valid.
                unsafe { &*(b as *const [u8; $ty::BYTES]).cast::<Self>() }
            }

            /// A mutable view of `b` as this structure.
            pub fn from_mut(b: &mut [u8; $ty::BYTES]) -> &mut Self {
                // SAFETY: as in `from_ref`; the borrow of `b` is handed on.
                unsafe { &mut *(b as *mut [u8; $ty::BYTES]).cast::<Self>() }
            }

            /// The bytes, as the device reads them.
            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            /// The bytes, mutable.
            pub fn as_bytes_mut(&mut self) -> &mut [u8] {
                &mut self.0
            }

            $(
                #[doc = concat!("`", $fname, "`: ", stringify!($w), " bits at bit ", stringify!($off),
                    " of `", $cname, "` (`MLX5_GET(", $cname, ", p, ", $fname, ")`).")]
                pub fn $get(&self) -> $fty {
                    const F: $crate::mlx5dv::prm::field::Field = $crate::mlx5dv::prm::field::Field::new($fname, $off, $w);
                    F.get(&self.0) as $fty
                }

                #[doc = concat!("Sets `", $fname, "` (", stringify!($w), " bits at bit ", stringify!($off),
                    "; `MLX5_SET(", $cname, ", p, ", $fname, ", v)`). Panics when `v` does not fit ",
                    stringify!($w), " bits, naming the field.")]
                pub fn $set(&mut self, v: $fty) -> &mut Self {
                    const F: $crate::mlx5dv::prm::field::Field = $crate::mlx5dv::prm::field::Field::new($fname, $off, $w);
                    F.set_in($cname, &mut self.0, u64::from(v));
                    self
                }
            )*

            $(
                #[doc = concat!("The embedded `", stringify!($sty), "` `", $sname, "` (at bit ", stringify!($soff), ").")]
                pub fn $sget(&self) -> &$sty {
                    const AT: usize = $soff / 8;
                    let b: &[u8; $sty::BYTES] = self.0[AT..AT + $sty::BYTES].try_into().expect("an embedded structure fits");
                    $sty::from_ref(b)
                }

                #[doc = concat!("The embedded `", stringify!($sty), "` `", $sname, "`, mutable.")]
                pub fn $smut(&mut self) -> &mut $sty {
                    const AT: usize = $soff / 8;
                    let b: &mut [u8; $sty::BYTES] =
                        (&mut self.0[AT..AT + $sty::BYTES]).try_into().expect("an embedded structure fits");
                    $sty::from_mut(b)
                }
            )*
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        impl ::std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                $crate::mlx5dv::prm::field::debug_fields(f, &Self::INFO, &self.0)
            }
        }
    };
}
pub(crate) use layout;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5dv::prm::{
        CapMode, CapType, CmdHcaCap, Opcode, Qpc, QueryHcaCapIn, QueryHcaCapOut, Rts2rtsQpIn, LAYOUTS,
    };

    #[test]
    fn one_bit_fields_at_both_ends_of_a_dword() {
        let mut b = [0u8; 8];
        Field::new("msb", 0, 1).set(&mut b, 1);
        assert_eq!(b, [0x80, 0, 0, 0, 0, 0, 0, 0]);
        Field::new("lsb", 63, 1).set(&mut b, 1);
        assert_eq!(b, [0x80, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(Field::new("x", 31, 1).get(&b), 0);
        assert_eq!(Field::new("x", 63, 1).get(&b), 1);
    }

    #[test]
    fn set_keeps_the_rest_of_the_dword_and_get_masks_it() {
        let mut b = [0xffu8; 4];
        let f = Field::new("mid", 4, 8); // bits 4..12: 0x0ff0_0000 of the dword
        f.set(&mut b, 0x5a);
        assert_eq!(u32::from_be_bytes(b), 0xf5af_ffff);
        assert_eq!(f.get(&b), 0x5a);
        assert_eq!(Field::new("w", 0, 32).get(&b), 0xf5af_ffff);
    }

    #[test]
    fn sixty_four_bit_fields_are_two_dwords_high_first() {
        let mut b = [0u8; 16];
        let f = Field::new("va", 32, 64);
        f.set(&mut b, 0x0102_0304_0506_0708);
        assert_eq!(b, [0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0]);
        assert_eq!(f.get(&b), 0x0102_0304_0506_0708);
        assert!(f.fits(u64::MAX));
    }

    #[test]
    #[should_panic(expected = "PRM qpc.state: value 0x10 does not fit the field's 4 bits (at most 0xf)")]
    fn a_value_wider_than_the_field_panics_naming_structure_field_value_and_width() {
        Qpc::new().set_state(0x10);
    }

    #[test]
    #[should_panic(expected = "PRM field f (bits 0x40..+32) lies past the end of a 8-byte buffer")]
    fn a_buffer_too_short_panics_naming_the_field() {
        Field::new("f", 64, 32).get(&[0; 8]);
    }

    #[test]
    #[should_panic(expected = "1..=32 bits inside one dword")]
    fn a_field_across_two_dwords_is_refused() {
        Field::new("across", 28, 8);
    }

    #[test]
    fn typed_setters_chain_and_embedded_structures_are_views() {
        let mut cmd = Rts2rtsQpIn::new();
        cmd.set_opcode(u32::from(Opcode::RTS2RTS_QP.0)).set_qpn(0x12_3456).set_qpc_ext(1);
        cmd.qpc_mut().set_lag_tx_port_affinity(2).primary_address_path_mut().set_udp_sport(0xc000);
        assert_eq!(cmd.qpc().primary_address_path().udp_sport(), 0xc000);
        assert_eq!(cmd.qpc().lag_tx_port_affinity(), 2);
        // opcode, then qpn behind qpc_ext, both big-endian
        assert_eq!(&cmd.as_bytes()[..12], &[0x05, 0x05, 0, 0, 0, 0, 0, 0, 0x80, 0x12, 0x34, 0x56]);
        let dbg = format!("{:?}", cmd);
        assert!(dbg.contains("qpn: 0x123456"), "{dbg}");
        assert!(Rts2rtsQpIn::from_slice(&[0; 10]).is_none());
    }

    #[test]
    fn query_hca_cap_op_mod_and_the_general_caps_through_the_union() {
        let mut q = QueryHcaCapIn::new();
        q.set_op_mod(u32::from(CapType::ATOMIC.op_mod(CapMode::CUR)));
        assert_eq!(q.op_mod(), (3 << 1) | 1);
        let mut out = QueryHcaCapOut::new();
        out.cmd_hca_cap_mut().set_log_max_qp(17);
        let caps = CmdHcaCap::from_slice(&out.as_bytes()[16..]).expect("the union follows the 16-byte header");
        assert_eq!(caps.log_max_qp(), 17);
    }

    #[test]
    fn every_table_fits_its_structure_in_offset_order() {
        let mut names = std::collections::BTreeSet::new();
        for info in LAYOUTS {
            assert!(names.insert(info.name), "{} twice", info.name);
            assert!(info.kernel_bytes <= info.bytes, "{}", info.name);
            let mut last = 0;
            for f in info.fields {
                assert!(
                    f.bit_off >= last && (f.bit_off + f.bits) as usize <= info.bytes * 8,
                    "{}.{}",
                    info.name,
                    f.name
                );
                last = f.bit_off + f.bits;
                assert_eq!(info.field(f.name), Some(f));
            }
            for s in info.subs {
                assert!(
                    s.bit_off % 32 == 0 && s.bit_off as usize / 8 + s.layout.bytes <= info.bytes,
                    "{}.{}",
                    info.name,
                    s.name
                );
            }
        }
    }
}
