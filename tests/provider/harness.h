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

/* cq64.c. The fields every section's completion record starts with
 * (tests/provider/build.rs's WcBaseC), and their reader: of the completion
 * the extended poller stands on. */
struct h_wc_base {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t wc_flags;
	uint32_t byte_len;
	uint32_t qp_num;
};
void h_wc_base_read(struct ibv_cq_ex *cx, struct h_wc_base *w);
/* A CQ of cqe_cnt (a power of two) 64-byte CQEs in ordinary memory,
 * every entry invalid (owner 1), with the extended poller's entries for
 * wc_flags as ibv_create_cq_ex installs them. */
struct mlx5_cq *h_cq64(uint32_t cqn, unsigned cqe_cnt, uint64_t wc_flags);
/* Writes the k CQEs at cqes (64 bytes each, owner bits as given) into the
 * CQ's entries from *produced on, as the device would, and advances
 * *produced; then reads up to k completions through ibv_start_poll /
 * ibv_next_poll, read(cx, out, i) taking the i-th. Returns how many. */
int h_cq64_poll(struct mlx5_cq *cq, uint32_t *produced, const uint8_t *cqes, unsigned k,
		void (*read)(struct ibv_cq_ex *cx, void *out, unsigned i), void *out);
/* A send queue's producer index, doorbell record and BlueFlame offset (as
 * h_after reads them, leaving the queue's tail alone). */
void h_sq_state(struct mlx5_qp *qp, uint32_t out[3]);

#endif
