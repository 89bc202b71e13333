/* For the translation entries, which no mlx5_ifc.h defines: the kernel's
 * struct mlx5_klm / struct mlx5_ksm (include/linux/mlx5/qp.h, cut out by
 * name after this) read and written through their big-endian members, under
 * the names the generated code uses for the mlx5_ifc.h macros. */
#define __mlx5_fld(typ, p, fld) (((struct mlx5_##typ *)(p))->fld)
#define __mlx5_bit_off(typ, fld) (offsetof(struct mlx5_##typ, fld) * 8)
#define __mlx5_bit_sz(typ, fld) (sizeof(__mlx5_fld(typ, 0, fld)) * 8)
#define MLX5_ST_SZ_BYTES(typ) sizeof(struct mlx5_##typ)
#define MLX5_SET(typ, p, fld, v) \
	(__mlx5_fld(typ, p, fld) = sizeof(__mlx5_fld(typ, 0, fld)) == 8 ? cpu_to_be64(v) : cpu_to_be32(v))
#define MLX5_GET(typ, p, fld) \
	(sizeof(__mlx5_fld(typ, 0, fld)) == 8 ? be64_to_cpu(__mlx5_fld(typ, p, fld)) : be32_to_cpu(__mlx5_fld(typ, p, fld)))
#define MLX5_SET64 MLX5_SET
#define MLX5_GET64 MLX5_GET
