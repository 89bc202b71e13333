/*
 * The library build's shared entries (-DHARNESS_LIB): what a harness section
 * in a file of its own beside mlx5_provider.c needs of the provider objects
 * that file makes. A section's own file wraps its code in #ifdef HARNESS_LIB,
 * includes this header after mlx5.h and exports its functions with H_API.
 */
#ifndef RRDDMMA_HARNESS_H
#define RRDDMMA_HARNESS_H

#include "mlx5.h"

#define H_API __attribute__((visibility("default")))

/* The hand-built mlx5 context (made at the first call) and its PD. */
struct mlx5_context *h_context(void);
struct ibv_pd *h_pd(void);

/* A send queue in malloc'd memory, libmlx5's ibv_wr_* entries installed.
 * kind: 0 RC, 1 UD, 2 DCI, 3 DCI with streams. */
struct mlx5_qp *h_make_sq(int kind, uint32_t qpn, unsigned wqe_cnt, int max_gs, int max_inline, unsigned bf_size,
			  unsigned uuarn, int sig_all, uint64_t seed);
struct ibv_qp_ex *h_qp_ex(struct mlx5_qp *qp);
struct mlx5dv_qp_ex *h_dv_qp(struct mlx5_qp *qp);
uint8_t *h_sq_buf(struct mlx5_qp *qp);
uint8_t *h_bf_page(struct mlx5_qp *qp);
void h_before(struct mlx5_qp *qp);
void h_after(struct mlx5_qp *qp, uint32_t out[3]);

#endif
