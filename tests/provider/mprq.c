/*
 * Striding receive WQs through libmlx5's own code, on ordinary memory: the
 * library build's section for tests/provider/mprq.rs.
 *
 * h_mprq_make builds a receive WQ (struct mlx5_rwq) as create_wq in verbs.c
 * leaves one for mlx5dv_create_wq with MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ:
 * its geometry as mlx5_calc_rwq_size computes it for a striding WQ (one
 * 16-byte mlx5_wqe_srq_next_seg plus max_sge data segments per WQE, rounded
 * up to a power of two; max_gs the data segments past the next segment),
 * the buffer and doorbell record malloc'd, the receive ids, rsc type
 * MLX5_RSC_TYPE_RWQ, wq.post_recv = mlx5_post_wq_recv. The WQ is stored in
 * the context's QP table under its number (the table holds resources: an
 * mlx5_rwq begins with its mlx5_resource as an mlx5_qp does), which is where
 * the poller looks a responder CQE's QPN up with CQE version 0. Its CQ has
 * 64-byte CQEs and the extended poller's entries as ibv_create_cq_ex
 * installs them.
 *
 * h_mprq_post posts a receive list through ibv_post_wq_recv (what reaches
 * mlx5_post_wq_recv); h_mprq_poll writes CQEs into the CQ as the device
 * would and reads them back through ibv_start_poll / ibv_next_poll and the
 * ibv_wc_read_* readers.
 */
#ifdef HARNESS_LIB
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "harness.h"

/* rrddmma's mprq::MprqWqe and NextSeg (mlx5dv.h's layout). */
_Static_assert(sizeof(struct mlx5_wqe_srq_next_seg) == 16, "mlx5_wqe_srq_next_seg is 16 bytes");
_Static_assert(offsetof(struct mlx5_wqe_srq_next_seg, next_wqe_index) == 2, "next_wqe_index at 2");
_Static_assert(offsetof(struct mlx5_wqe_srq_next_seg, signature) == 4, "signature at 4");
_Static_assert(sizeof(struct mlx5_mprq_wqe) == 32, "mlx5_mprq_wqe is 32 bytes");
_Static_assert(offsetof(struct mlx5_mprq_wqe, dseg) == 16, "the data segment at 16");
_Static_assert(offsetof(struct mlx5_cqe64, wqe_id) == 2, "wqe_id at 2");
_Static_assert(offsetof(struct mlx5_cqe64, byte_cnt) == 44, "byte_cnt at 44");
_Static_assert(offsetof(struct mlx5_cqe64, wqe_counter) == 60, "wqe_counter at 60");

#define MPRQ_TAG 0x5400ull

struct h_mprq {
	struct mlx5_rwq *rwq;
	struct mlx5_cq *cq;
	uint32_t produced;
};

/* One receive request, as tests/provider/mprq.rs lays it out (MprqWrC). */
struct h_mprq_wr {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct {
		uint64_t addr;
		uint32_t length;
		uint32_t lkey;
	} sge[4];
};

/* One completion read through the extended poller (MprqWcC). */
struct h_mprq_wc {
	struct h_wc_base base;
	uint32_t src_qp;
	uint32_t imm;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

static unsigned pow2_at_least(unsigned n)
{
	unsigned p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

H_API struct h_mprq *h_mprq_make(uint32_t wqn, unsigned max_wr, unsigned max_sge, uint32_t cqn, unsigned cqe_cnt)
{
	struct mlx5_context *ctx = h_context();
	struct h_mprq *m = calloc(1, sizeof(*m));
	struct mlx5_rwq *rwq = calloc(1, sizeof(*rwq));
	if (!m || !rwq)
		abort();
	/* mlx5_calc_rwq_size with is_mprq = 1 and no signature. */
	unsigned num_scatter = max_sge ? max_sge : 1;
	unsigned wqe_size = pow2_at_least(sizeof(struct mlx5_wqe_data_seg) * num_scatter +
					  sizeof(struct mlx5_wqe_srq_next_seg));
	unsigned wq_size = pow2_at_least(max_wr) * wqe_size;
	if (wq_size < MLX5_SEND_WQE_BB)
		wq_size = MLX5_SEND_WQE_BB;
	rwq->rq.wqe_cnt = wq_size / wqe_size;
	rwq->rq.wqe_shift = __builtin_ctz(wqe_size);
	rwq->rq.max_post = rwq->rq.wqe_cnt;
	rwq->rq.max_gs = (int)((wqe_size - sizeof(struct mlx5_wqe_srq_next_seg)) / sizeof(struct mlx5_wqe_data_seg));
	rwq->buf_size = (int)wq_size;
	if (posix_memalign(&rwq->pbuff, 4096, wq_size) || posix_memalign((void **)&rwq->db, 64, 64))
		abort();
	memset(rwq->pbuff, 0, wq_size);
	memset(rwq->db, 0, 64);
	rwq->recv_db = &rwq->db[MLX5_RCV_DBR];
	rwq->rq.wrid = calloc(rwq->rq.wqe_cnt, sizeof(uint64_t));
	if (!rwq->rq.wrid)
		abort();
	for (unsigned i = 0; i < rwq->rq.wqe_cnt; i++)
		rwq->rq.wrid[i] = (MPRQ_TAG << 48) | i;
	rwq->rsc.type = MLX5_RSC_TYPE_RWQ;
	rwq->rsc.rsn = wqn;
	rwq->wq.context = &ctx->ibv_ctx.context;
	rwq->wq.pd = h_pd();
	rwq->wq.wq_num = wqn;
	rwq->wq.wq_type = IBV_WQT_RQ;
	rwq->wq.state = IBV_WQS_RDY;
	rwq->wq.post_recv = mlx5_post_wq_recv;
	if (mlx5_store_qp(ctx, wqn, (struct mlx5_qp *)rwq))
		abort();
	m->rwq = rwq;

	/* The WQ's CQ. */
	m->cq = h_cq64(cqn, cqe_cnt,
		       IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			       IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS);
	rwq->wq.cq = &m->cq->verbs_cq.cq;
	return m;
}

/* out: wqe_cnt, wqe_shift, max_gs. */
H_API void h_mprq_geometry(struct h_mprq *m, uint32_t out[3])
{
	out[0] = m->rwq->rq.wqe_cnt;
	out[1] = (uint32_t)m->rwq->rq.wqe_shift;
	out[2] = (uint32_t)m->rwq->rq.max_gs;
}

H_API uint8_t *h_mprq_buf(struct h_mprq *m) { return m->rwq->pbuff; }
H_API uint32_t h_mprq_dbrec(struct h_mprq *m) { return be32toh(*m->rwq->recv_db); }
H_API uint32_t h_mprq_head(struct h_mprq *m) { return m->rwq->rq.head; }

/* Posts the n requests as one list through ibv_post_wq_recv. libmlx5's
 * overflow check counts one receive per CQE (its tail moves per CQE, not per
 * WQE), which a striding WQ does not keep: the tail is put at the head
 * first, and the Rust side posts only what its ring has room for. Out: the
 * refused request's index, or -1. */
H_API int h_mprq_post(struct h_mprq *m, const struct h_mprq_wr *wrs, unsigned n, int *bad)
{
	struct ibv_recv_wr w[16];
	struct ibv_sge s[16][4];
	if (n == 0 || n > 16)
		abort();
	for (unsigned i = 0; i < n; i++) {
		w[i].wr_id = wrs[i].wr_id;
		w[i].next = i + 1 < n ? &w[i + 1] : NULL;
		w[i].num_sge = (int)wrs[i].num_sge;
		w[i].sg_list = s[i];
		for (unsigned j = 0; j < wrs[i].num_sge && j < 4; j++) {
			s[i][j].addr = wrs[i].sge[j].addr;
			s[i][j].length = wrs[i].sge[j].length;
			s[i][j].lkey = wrs[i].sge[j].lkey;
		}
	}
	m->rwq->rq.tail = m->rwq->rq.head;
	struct ibv_recv_wr *bw = NULL;
	int rc = ibv_post_wq_recv(&m->rwq->wq, w, &bw);
	*bad = bw ? (int)(bw - w) : -1;
	return rc;
}

/* The i-th completion of a polling pass, into out[i]. */
static void mprq_read(struct ibv_cq_ex *cx, void *out, unsigned i)
{
	struct h_mprq_wc *w = (struct h_mprq_wc *)out + i;
	h_wc_base_read(cx, &w->base);
	w->src_qp = ibv_wc_read_src_qp(cx);
	w->imm = ibv_wc_read_imm_data(cx);
	w->slid = (uint16_t)ibv_wc_read_slid(cx);
	w->sl = ibv_wc_read_sl(cx);
	w->dlid_path_bits = ibv_wc_read_dlid_path_bits(cx);
}

/* Writes k CQEs (64 bytes each, owner bits as given) at the CQ's next
 * entries and reads up to k completions through the extended poller. */
H_API int h_mprq_poll(struct h_mprq *m, const uint8_t *cqes, unsigned k, struct h_mprq_wc *out)
{
	return h_cq64_poll(m->cq, &m->produced, cqes, k, mprq_read, out);
}
#endif
