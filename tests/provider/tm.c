/*
 * Tag matching through libmlx5's own code, on ordinary memory: the library
 * build's section for tests/provider/tm.rs.
 *
 * h_tm_make builds a tag-matching SRQ (struct mlx5_srq) as mlx5_create_srq_ex
 * leaves one for IBV_SRQT_TM: its command QP (a send queue from h_make_sq,
 * malloc'd ring, doorbell record and BlueFlame page), the tag list of
 * max_num_tags + 1 entries chained free, the operation array of one slot
 * per command WQE, the receive ids (srq->wrid[i] = 0x5300 << 48 | i) and the
 * free-WQE bitmap; it stores the SRQ in the context's table under srqn, and
 * makes a 64-byte-CQE CQ with the extended poller's entries (TM info
 * included) as ibv_create_cq_ex installs them.
 *
 * h_tm_post turns an op list into ibv_ops_wr and calls mlx5_post_srq_ops
 * (what ibv_post_srq_ops reaches); h_tm_poll writes CQEs into the CQ as the
 * device would and reads them back through ibv_start_poll / ibv_next_poll
 * and the ibv_wc_read_* readers, ibv_wc_read_tm_info included.
 */
#ifdef HARNESS_LIB
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "harness.h"

/* rrddmma's seg::TmSeg and its WQE offsets (tm.rs's masks and field names). */
_Static_assert(sizeof(struct mlx5_wqe_tm_seg) == 32, "mlx5_wqe_tm_seg is 32 bytes");
_Static_assert(offsetof(struct mlx5_wqe_tm_seg, index) == 2, "index at 2");
_Static_assert(offsetof(struct mlx5_wqe_tm_seg, sw_cnt) == 6, "sw_cnt at 6");
_Static_assert(offsetof(struct mlx5_wqe_tm_seg, append_tag) == 16, "append_tag at 16");
_Static_assert(offsetof(struct mlx5_wqe_tm_seg, append_mask) == 24, "append_mask at 24");

struct h_tm {
	struct mlx5_srq *srq;
	struct mlx5_qp *cmd;
	struct mlx5_cq *cq;
	uint32_t produced;
};

/* One operation, as tests/provider/tm.rs lays it out (TmOpC). */
struct h_tm_op {
	uint32_t kind; /* 0 add, 1 remove, 2 sync */
	uint32_t flags; /* IBV_OPS_SIGNALED, IBV_OPS_TM_SYNC */
	uint64_t wr_id;
	uint32_t unexpected_cnt;
	uint32_t handle;
	uint64_t recv_wr_id;
	uint64_t tag;
	uint64_t mask;
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
	uint32_t num_sge;
	uint32_t pad;
};

/* One completion read through the extended poller (TmWcC). */
struct h_tm_wc {
	struct h_wc_base base;
	uint64_t tag;
	uint32_t priv;
};

H_API struct h_tm *h_tm_make(uint32_t srqn, uint32_t cmd_qpn, unsigned max_num_tags, unsigned cmd_wqe_cnt,
			     unsigned srq_wqes, unsigned bf_size, unsigned uuarn, uint64_t seed, uint32_t cqn,
			     unsigned cqe_cnt)
{
	struct mlx5_context *ctx = h_context();
	struct h_tm *t = calloc(1, sizeof(*t));
	struct mlx5_srq *srq = calloc(1, sizeof(*srq));
	if (!t || !srq)
		abort();
	t->cmd = h_make_sq(0, cmd_qpn, cmd_wqe_cnt, 1, 0, bf_size, uuarn, 0, seed);

	srq->vsrq.srq.context = &ctx->ibv_ctx.context;
	srq->vsrq.srq.pd = h_pd();
	srq->vsrq.srq_type = IBV_SRQT_TM;
	srq->rsc.type = MLX5_RSC_TYPE_SRQ;
	srq->rsc.rsn = srqn;
	srq->srqn = srqn;
	srq->max = (int)srq_wqes;
	srq->max_gs = 1;
	srq->wrid = calloc(srq_wqes, sizeof(uint64_t));
	for (unsigned i = 0; i < srq_wqes; i++)
		srq->wrid[i] = ((uint64_t)0x5300 << 48) | i;
	srq->free_wqe_bitmap = calloc((srq_wqes + 63) / 64 + 1, sizeof(unsigned long));
	srq->nwqes = srq_wqes;
	srq->cmd_qp = &t->cmd->verbs_qp.qp;
	/* The tag list as mlx5_create_srq_ex chains it. */
	srq->tm_list = calloc(max_num_tags + 1, sizeof(struct mlx5_tag_entry));
	for (unsigned i = 0; i < max_num_tags; i++)
		srq->tm_list[i].next = &srq->tm_list[i + 1];
	srq->tm_head = &srq->tm_list[0];
	srq->tm_tail = &srq->tm_list[max_num_tags];
	srq->op = calloc(t->cmd->sq.wqe_cnt, sizeof(struct mlx5_srq_op));
	if (!srq->wrid || !srq->free_wqe_bitmap || !srq->tm_list || !srq->op)
		abort();
	if (mlx5_store_srq(ctx, srqn, srq))
		abort();
	t->srq = srq;

	/* The SRQ's CQ. */
	t->cq = h_cq64(cqn, cqe_cnt,
		       IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_TM_INFO);
	return t;
}

H_API uint8_t *h_tm_sq_buf(struct h_tm *t) { return t->cmd->sq_start; }
H_API uint8_t *h_tm_bf_page(struct h_tm *t) { return t->cmd->bf->reg; }
H_API int h_tm_expect(struct h_tm *t, unsigned idx) { return t->srq->tm_list[idx].expect_cqe; }

/* Posts the n operations as one list through mlx5_post_srq_ops. Out: the
 * provider's return value; bad (the refused operation's index, or -1);
 * handles[i] (wr->tm.handle after the call); st = producer index, doorbell
 * record, BlueFlame offset before the call. */
H_API int h_tm_post(struct h_tm *t, const struct h_tm_op *ops, unsigned n, int *bad, uint32_t *handles,
		    uint32_t st[3])
{
	struct ibv_ops_wr wrs[16];
	struct ibv_sge sges[16];
	if (n == 0 || n > 16)
		abort();
	memset(wrs, 0, sizeof(wrs));
	for (unsigned i = 0; i < n; i++) {
		const struct h_tm_op *o = &ops[i];
		struct ibv_ops_wr *w = &wrs[i];
		w->wr_id = o->wr_id;
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		w->opcode = o->kind == 0 ? IBV_WR_TAG_ADD : o->kind == 1 ? IBV_WR_TAG_DEL : IBV_WR_TAG_SYNC;
		w->flags = (int)o->flags;
		w->tm.unexpected_cnt = o->unexpected_cnt;
		w->tm.handle = o->handle;
		w->tm.add.recv_wr_id = o->recv_wr_id;
		w->tm.add.tag = o->tag;
		w->tm.add.mask = o->mask;
		sges[i].addr = o->addr;
		sges[i].length = o->length;
		sges[i].lkey = o->lkey;
		w->tm.add.sg_list = &sges[i];
		w->tm.add.num_sge = (int)o->num_sge;
	}
	h_sq_state(t->cmd, st);
	h_before(t->cmd);
	struct ibv_ops_wr *bw = NULL;
	int rc = mlx5_post_srq_ops(&t->srq->vsrq.srq, wrs, &bw);
	*bad = bw ? (int)(bw - wrs) : -1;
	for (unsigned i = 0; i < n; i++)
		handles[i] = wrs[i].tm.handle;
	return rc;
}

/* After a post: producer index, doorbell record, BlueFlame offset. */
H_API void h_tm_state(struct h_tm *t, uint32_t out[3]) { h_sq_state(t->cmd, out); }

/* The i-th completion of a polling pass, into out[i]. */
static void tm_read(struct ibv_cq_ex *cx, void *out, unsigned i)
{
	struct h_tm_wc *w = (struct h_tm_wc *)out + i;
	struct ibv_wc_tm_info tm = { 0, 0 };
	h_wc_base_read(cx, &w->base);
	ibv_wc_read_tm_info(cx, &tm);
	w->tag = tm.tag;
	w->priv = tm.priv;
}

/* Writes k CQEs (64 bytes each, owner bits as given) at the CQ's next
 * entries and reads up to k completions through the extended poller. */
H_API int h_tm_poll(struct h_tm *t, const uint8_t *cqes, unsigned k, struct h_tm_wc *out)
{
	return h_cq64_poll(t->cq, &t->produced, cqes, k, tm_read, out);
}
#endif
