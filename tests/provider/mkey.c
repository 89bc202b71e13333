/*
 * Memory keys (UMR): libmlx5's own mlx5dv_wr_mr_list, mlx5dv_wr_mr_interleaved,
 * mlx5dv_wr_mkey_configure with its access and layout setters, and
 * ibv_wr_local_inv, driven on a send queue of the library build whose
 * mlx5dv_wr_* memory-key entries are installed (mlx5_qp_fill_wr_pfns with
 * MLX5DV_QP_EX_WITH_MR_LIST | MR_INTERLEAVED | MKEY_CONFIGURE), over keys
 * fabricated in ordinary memory (struct mlx5_mkey: the key, num_desc; no
 * signature or crypto context). tests/provider/mkey.rs replays the same
 * inputs through rrddmma's typed UMR builders and compares.
 */
#ifdef HARNESS_LIB
#include "mlx5.h"
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* An RC send queue (h_make_sq) with the memory-key entries installed. */
H_API struct mlx5_qp *h_mkey_sq(uint32_t qpn, unsigned wqe_cnt, int max_inline, unsigned bf_size, int sig_all,
				uint64_t seed)
{
	struct mlx5_qp *qp = h_make_sq(0, qpn, wqe_cnt, 1, max_inline, bf_size, 1, sig_all, seed);
	struct ibv_qp_init_attr_ex attr = { .qp_type = IBV_QPT_RC };
	attr.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_LOCAL_INV;
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS };
	dv.send_ops_flags = MLX5DV_QP_EX_WITH_MR_LIST | MLX5DV_QP_EX_WITH_MR_INTERLEAVED |
			    MLX5DV_QP_EX_WITH_MKEY_CONFIGURE;
	if (mlx5_qp_fill_wr_pfns(qp, &attr, &dv))
		abort();
	return qp;
}

/* One request in a batch of its own; returns ibv_wr_complete's value.
 * op: 0 ibv_wr_local_inv(key); 1 mlx5dv_wr_mkey_configure with the access
 * setter (has_access) and the layout setter (layout 1 list, 2 interleaved;
 * order 1: layout first); 2 mlx5dv_wr_mr_list; 3 mlx5dv_wr_mr_interleaved. */
H_API int h_mkey_post(struct mlx5_qp *qp, int op, uint32_t wr_flags, uint32_t key, uint16_t num_desc,
		      int has_access, uint32_t access, int layout, uint32_t repeat, uint16_t n,
		      const struct ibv_sge *sge, const struct mlx5dv_mr_interleaved *il, int order)
{
	static struct mlx5_mkey mk;
	struct ibv_qp_ex *ex = &qp->verbs_qp.qp_ex;
	struct mlx5dv_qp_ex *dv = &qp->dv_qp;
	struct mlx5dv_mkey_conf_attr attr = { 0 };

	memset(&mk, 0, sizeof(mk));
	mk.dv_mkey.lkey = key;
	mk.dv_mkey.rkey = key;
	mk.num_desc = num_desc;
	ibv_wr_start(ex);
	ex->wr_id = 1;
	ex->wr_flags = wr_flags;
	switch (op) {
	case 0:
		ibv_wr_local_inv(ex, key);
		break;
	case 1:
		mlx5dv_wr_mkey_configure(dv, &mk.dv_mkey, (uint8_t)(!!has_access + !!layout), &attr);
		for (int step = 0; step < 2; step++) {
			if ((step == 0) == (order == 0)) {
				if (has_access)
					mlx5dv_wr_set_mkey_access_flags(dv, access);
			} else if (layout == 1) {
				mlx5dv_wr_set_mkey_layout_list(dv, n, sge);
			} else if (layout == 2) {
				mlx5dv_wr_set_mkey_layout_interleaved(dv, repeat, n, il);
			}
		}
		break;
	case 2:
		mlx5dv_wr_mr_list(dv, &mk.dv_mkey, access, n, (struct ibv_sge *)sge);
		break;
	default:
		mlx5dv_wr_mr_interleaved(dv, &mk.dv_mkey, access, repeat, n, (struct mlx5dv_mr_interleaved *)il);
		break;
	}
	return ibv_wr_complete(ex);
}
#endif

#ifdef HARNESS_LIB
/* A key fabricated in ordinary memory for the Rust side's MkeyWr calls
 * (tests/provider/mkey.rs): libmlx5 reads the key and num_desc of the
 * struct mlx5_mkey around it. */
H_API struct mlx5dv_mkey *h_mkey(uint32_t key, uint16_t num_desc)
{
	static struct mlx5_mkey mk;
	memset(&mk, 0, sizeof(mk));
	mk.dv_mkey.lkey = key;
	mk.dv_mkey.rkey = key;
	mk.num_desc = num_desc;
	return &mk.dv_mkey;
}
#endif

#ifdef HARNESS_LIB
/* Moves an idle queue's producer index to `pi` (to cross the 16-bit WQE
 * index within a run). */
H_API void h_mkey_start_at(struct mlx5_qp *qp, uint32_t pi)
{
	qp->sq.cur_post = pi;
}
#endif
