/* The oracle's stand-in for include/linux/mlx5/mlx5_ifc_fpga.h, which the
 * unpacked tree does not hold: the three structures mlx5_ifc.h embeds, as
 * opaque blocks. None of them is part of a structure the oracle checks (the
 * hca_cap_union's size is fixed by its own reserved member); a structure that
 * embedded one would show a size mismatch, not pass silently. */
struct mlx5_ifc_fpga_cap_bits { u8 reserved_at_0[0x800]; };
struct mlx5_ifc_fpga_ctrl_bits { u8 reserved_at_0[0x20]; };
struct mlx5_ifc_fpga_access_reg_bits { u8 reserved_at_0[0x20]; };
