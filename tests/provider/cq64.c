/*
 * What the library build's sections with a CQ of their own share (tm.c,
 * mprq.c): a CQ of 64-byte CQEs in ordinary memory with the extended
 * poller's entries, CQEs written into it as the device would, a polling
 * pass read through a section's reader; and a send queue's state around a
 * post (harness.h).
 */
#include <stdint.h>

#ifdef HARNESS_LIB
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "harness.h"

H_API struct mlx5_cq *h_cq64(uint32_t cqn, unsigned cqe_cnt, uint64_t wc_flags)
{
	struct mlx5_context *ctx = h_context();
	struct mlx5_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		abort();
	cq->cqn = cqn;
	cq->cqe_sz = 64;
	cq->verbs_cq.cq.cqe = (int)cqe_cnt - 1;
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	if (posix_memalign(&cq->buf_a.buf, 4096, cqe_cnt * 64) || posix_memalign((void **)&cq->dbrec, 64, 64))
		abort();
	memset(cq->dbrec, 0, 64);
	for (unsigned i = 0; i < cqe_cnt; i++) {
		memset((uint8_t *)cq->buf_a.buf + i * 64, 0, 64);
		((uint8_t *)cq->buf_a.buf)[i * 64 + 63] = MLX5_CQE_INVALID << 4 | 1;
	}
	cq->active_buf = &cq->buf_a;
	struct ibv_cq_init_attr_ex attr = { .wc_flags = wc_flags };
	if (mlx5_cq_fill_pfns(cq, &attr, ctx))
		abort();
	return cq;
}

H_API int h_cq64_poll(struct mlx5_cq *cq, uint32_t *produced, const uint8_t *cqes, unsigned k,
		      void (*read)(struct ibv_cq_ex *cx, void *out, unsigned i), void *out)
{
	struct ibv_cq_ex *cx = &cq->verbs_cq.cq_ex;
	unsigned cqe_cnt = (unsigned)cq->verbs_cq.cq.cqe + 1;
	for (unsigned i = 0; i < k; i++) {
		unsigned idx = (*produced + i) & (cqe_cnt - 1);
		memcpy((uint8_t *)cq->buf_a.buf + idx * 64, cqes + i * 64, 64);
	}
	*produced += k;
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	unsigned n = 0;
	if (ibv_start_poll(cx, &attr))
		return 0;
	for (;;) {
		read(cx, out, n);
		n++;
		if (n == k || ibv_next_poll(cx))
			break;
	}
	ibv_end_poll(cx);
	return (int)n;
}

H_API void h_wc_base_read(struct ibv_cq_ex *cx, struct h_wc_base *w)
{
	w->wr_id = cx->wr_id;
	w->status = cx->status;
	w->opcode = ibv_wc_read_opcode(cx);
	w->wc_flags = ibv_wc_read_wc_flags(cx);
	w->byte_len = ibv_wc_read_byte_len(cx);
	w->qp_num = ibv_wc_read_qp_num(cx);
}

H_API void h_sq_state(struct mlx5_qp *qp, uint32_t out[3])
{
	out[0] = qp->sq.cur_post;
	out[1] = be32toh(qp->db[MLX5_SND_DBR]);
	out[2] = qp->bf->offset;
}
#else
/* The executable build has none of it (it is for library-driven sections). */
typedef int rrddmma_cq64_is_library_only;
#endif
