//! Big-endian integers as stored in WQEs and CQEs.

use std::fmt;

macro_rules! be {
    ($name:ident, $t:ty, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name($t);

        impl $name {
            /// From a host-order value.
            #[inline(always)]
            pub const fn new(v: $t) -> $name {
                $name(v.to_be())
            }

            /// The host-order value.
            #[inline(always)]
            pub const fn get(self) -> $t {
                <$t>::from_be(self.0)
            }

            /// The value exactly as stored (network order).
            #[inline(always)]
            pub const fn raw(self) -> $t {
                self.0
            }

            /// From a value exactly as stored (network order).
            #[inline(always)]
            pub const fn from_raw(raw: $t) -> $name {
                $name(raw)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.get())
            }
        }
    };
}

be!(Be16, u16, "A big-endian `u16` (`__be16`).");
be!(Be32, u32, "A big-endian `u32` (`__be32`).");
be!(Be64, u64, "A big-endian `u64` (`__be64`).");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_big_endian() {
        let v = Be32::new(0x0102_0304);
        assert_eq!(v.raw().to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!(v.get(), 0x0102_0304);
        assert_eq!(Be64::new(1).raw().to_ne_bytes(), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(Be16::from_raw(Be16::new(0xabcd).raw()).get(), 0xabcd);
    }
}
