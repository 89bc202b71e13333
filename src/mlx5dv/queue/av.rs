//! Address vectors: the 48 bytes libmlx5 keeps in an address handle
//! (`struct mlx5_wqe_av`), and the datagram segment a UD or DC WQE carries,
//! made from them as libmlx5 makes it.
//!
//! A direct UD or DC poster gets the vector of an [`Ah`](crate::prim::Ah)
//! with [`AddressVector::of`] (`mlx5dv_init_obj` with `MLX5DV_OBJ_AH`) once,
//! then builds each destination's segment with [`AddressVector::ud`] or
//! [`AddressVector::dc`], with no call into libmlx5 on the data path.

use crate::mlx5dv::queue::seg::DatagramSeg;

/// `MLX5_EXTENDED_UD_AV`: the extended-AV bit of `dqp_dct`, which libmlx5
/// sets in every UD and DC datagram segment it writes.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;

/// The address vector of an address handle (`struct mlx5_wqe_av`, the same
/// 48 bytes as [`DatagramSeg`]): path fields (rate, SL, LIDs, MAC, traffic
/// class, hop limit, GRH, GID), without a destination QP or key yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector(DatagramSeg);

impl AddressVector {
    /// A vector from its 48 bytes, as the device reads them (for example
    /// those `mlx5dv_init_obj` points to).
    pub fn from_bytes(bytes: &[u8; 48]) -> AddressVector {
        // SAFETY: `DatagramSeg` is `#[repr(C)]`, 48 bytes, made of integers
        // and byte arrays only (sizes asserted in `seg`), so any 48 bytes are
        // a valid value; the read is unaligned.
        AddressVector(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<DatagramSeg>()) })
    }

    /// The vector's 48 bytes.
    pub fn to_bytes(&self) -> [u8; 48] {
        // SAFETY: as in `from_bytes`: a padding-free 48-byte `#[repr(C)]` value.
        unsafe { std::mem::transmute::<DatagramSeg, [u8; 48]>(self.0) }
    }

    /// The vector's fields as a datagram segment (key and destination as the
    /// handle holds them).
    pub fn segment(&self) -> &DatagramSeg {
        &self.0
    }

    /// The datagram segment of a UD SEND to QP `qpn` with Q_Key `qkey`, as
    /// libmlx5's `set_datagram_seg` writes it: the vector, `dqp_dct` =
    /// `qpn` with the extended-AV bit, the Q_Key in the key's first 4 bytes
    /// (the next 4 as the handle holds them).
    #[inline(always)]
    pub fn ud(&self, qpn: u32, qkey: u32) -> DatagramSeg {
        let mut s = self.0;
        s.dqp_dct = crate::mlx5dv::queue::be::Be32::new((qpn & 0xff_ffff) | EXTENDED_UD_AV);
        let mut key = s.key.raw().to_ne_bytes();
        key[..4].copy_from_slice(&qkey.to_be_bytes());
        s.key = crate::mlx5dv::queue::be::Be64::from_raw(u64::from_ne_bytes(key));
        s
    }

    /// The datagram segment of a DCI WQE to DCT `dctn` with access key
    /// `dc_key`, as `mlx5dv_wr_set_dc_addr` writes it: the vector, its
    /// `dqp_dct` ORed with `dctn` and the extended-AV bit, the key.
    #[inline(always)]
    pub fn dc(&self, dctn: u32, dc_key: u64) -> DatagramSeg {
        let mut s = self.0;
        s.dqp_dct = crate::mlx5dv::queue::be::Be32::new(s.dqp_dct.get() | (dctn & 0xff_ffff) | EXTENDED_UD_AV);
        s.key = crate::mlx5dv::queue::be::Be64::new(dc_key);
        s
    }

    /// The vector libmlx5 built for `ah` (`mlx5dv_init_obj`,
    /// `MLX5DV_OBJ_AH`), copied. [`Error::Unsupported`](crate::prim::Error)
    /// on a device that is not mlx5.
    #[cfg(not(rrddmma_mlnx_ofed4))]
    #[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
    pub fn of(ah: &crate::prim::Ah) -> crate::prim::Result<AddressVector> {
        use crate::bindings as ffi;
        use crate::prim::Error;
        crate::mlx5dv::require(ah.pd().context(), "mlx5dv_init_obj(MLX5DV_OBJ_AH)")?;
        let raw = ah.as_ptr();
        let mut out = ffi::mlx5dv_ah::default();
        let mut obj = ffi::mlx5dv_obj::default();
        obj.ah.in_ = raw;
        obj.ah.out = &mut out;
        // SAFETY: an mlx5 AH (checked above); `obj` and `out` are valid for the call.
        let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_AH.0)) };
        if rc != 0 {
            return Err(Error::code("mlx5dv_init_obj(MLX5DV_OBJ_AH)", rc));
        }
        if out.av.is_null() {
            return Err(Error::unsupported(
                "mlx5dv_init_obj(MLX5DV_OBJ_AH)",
                &crate::prim::unsupported::AV_NONE,
                ah.pd().context().name(),
                "null",
            ));
        }
        let mut bytes = [0u8; 48];
        // SAFETY: libmlx5 points `av` at the AH's 48-byte `mlx5_wqe_av`,
        // alive as long as the AH, which `ah` borrows.
        unsafe { std::ptr::copy_nonoverlapping(out.av.cast::<u8>(), bytes.as_mut_ptr(), 48) };
        Ok(AddressVector::from_bytes(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ud` and `dc` write what libmlx5 writes: UD replaces `dqp_dct` and the
    /// key's first half; DC ORs the DCT number into `dqp_dct` and replaces
    /// the whole key; the path bytes stay the handle's.
    #[test]
    fn ud_and_dc_segments_keep_the_path_and_set_destination_and_key() {
        let mut b = [0u8; 48];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8 + 1;
        }
        b[8..12].copy_from_slice(&0x0000_0100u32.to_be_bytes());
        let av = AddressVector::from_bytes(&b);
        assert_eq!(av.to_bytes(), b);
        let ud: [u8; 48] = AddressVector(av.ud(0x12_3456, 0xdead_beef)).to_bytes();
        assert_eq!(&ud[0..4], &0xdead_beefu32.to_be_bytes());
        assert_eq!(&ud[4..8], &b[4..8]);
        assert_eq!(&ud[8..12], &0x8012_3456u32.to_be_bytes());
        assert_eq!(&ud[12..], &b[12..]);
        let dc: [u8; 48] = AddressVector(av.dc(0x00_0042, 0x0102_0304_0506_0708)).to_bytes();
        assert_eq!(&dc[0..8], &0x0102_0304_0506_0708u64.to_be_bytes());
        assert_eq!(&dc[8..12], &0x8000_0142u32.to_be_bytes());
        assert_eq!(&dc[12..], &b[12..]);
    }
}
