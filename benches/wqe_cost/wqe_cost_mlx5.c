/*
 * The libmlx5 column of `cargo xtask bench-wqe`: `wqe_cost_mlx5 ROW N` posts
 * N requests of one kind through libmlx5 v59's own entries (mlx5_post_send,
 * or ibv_wr_* with the mlx5dv_wr_* entries on a DCI), on the send queue and
 * CQ the libmlx5 harness fabricates in ordinary memory
 * (tests/provider/mlx5_provider.c and cq64.c, library build; linked with the
 * pinned rdma-core build's libmlx5.a: xtask/src/bench_wqe/mlx5.rs).
 *
 * The work around it is the other columns' (benches/wqe_cost/wqe_cost.c,
 * examples/wqe_cost.rs): plain 8-byte doorbell (no BlueFlame register), a
 * CQ of plain memory where this program writes the CQE the device would, for
 * the last WQE, whenever half the ring is outstanding, polled with
 * mlx5_poll_cq (which frees the ring: sq.tail).
 *
 * `wqe_cost_mlx5 --rows` lists the rows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlx5.h"
#include "harness.h"

#define BBS 64
#define CQES 4
#define BATCH 32
#define QPN 0x1234
#define CQN 0x77

/* mlx5_provider.c's library build: an address handle holding a 48-byte AV. */
struct ibv_ah *h_ah(unsigned slot, const uint8_t *av);
/* eth.c: a raw packet send queue, and its TSO limits. */
struct mlx5_qp *h_eth_sq(uint32_t qpn, unsigned wqe_cnt, int max_gs, int max_inline, unsigned bf_size, unsigned uuarn,
			 int sig_all, uint64_t seed, int csum, uint32_t start);
void h_eth_tso(struct mlx5_qp *qp, int max_tso_header, uint32_t max_tso);
/* mkey.c: a send queue with the memory-key entries, and a key. */
struct mlx5_qp *h_mkey_sq(uint32_t qpn, unsigned wqe_cnt, int max_inline, unsigned bf_size, int sig_all,
			  uint64_t seed);
struct mlx5dv_mkey *h_mkey(uint32_t key, uint16_t num_desc);

/* tm.c: a tag-matching SRQ with its command QP and CQ (tm.c's struct h_tm). */
struct h_tm {
	struct mlx5_srq *srq;
	struct mlx5_qp *cmd;
	struct mlx5_cq *cq;
	uint32_t produced;
};
struct h_tm *h_tm_make(uint32_t srqn, uint32_t cmd_qpn, unsigned max_num_tags, unsigned cmd_wqe_cnt,
		       unsigned srq_wqes, unsigned bf_size, unsigned uuarn, uint64_t seed, uint32_t cqn,
		       unsigned cqe_cnt);
/* mprq.c: a striding receive WQ and its CQ (mprq.c's struct h_mprq). */
struct h_mprq {
	struct mlx5_rwq *rwq;
	struct mlx5_cq *cq;
	uint32_t produced;
};
struct h_mprq *h_mprq_make(uint32_t wqn, unsigned max_wr, unsigned max_sge, uint32_t cqn, unsigned cqe_cnt);

static const char *rows[] = { "write", "write_inline32", "send", "read", "cas", "fetch_add", "dc_write", "batch32",
			      "umr_klm4", "tag_add", "eth42", "tso", "mprq", "poll", NULL };

static struct mlx5_qp *qp;
static struct mlx5_cq *cq;
static uint32_t produced;
/* The producer index when the last completion freed the ring. */
static uint32_t freed_pi;

/* The device's side: a requester CQE for the WQE at `pi` (opcode `op`). */
static inline void device_cqe(uint16_t pi, uint8_t op)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.sop_drop_qpn = htobe32(((uint32_t)op << 24) | QPN);
	cqe.wqe_counter = htobe16(pi);
	cqe.byte_cnt = htobe32(64);
	cqe.op_own = (MLX5_CQE_REQ << 4) | !!(produced & CQES);
	*(volatile struct mlx5_cqe64 *)((uint8_t *)cq->active_buf->buf + (produced % CQES) * 64) = cqe;
	produced++;
}

/* After a post: at half a ring outstanding, the device completes the last
 * WQE; mlx5_poll_cq takes it and frees the ring. */
static inline void account(uint8_t op, unsigned bbs)
{
	if (qp->sq.cur_post - freed_pi >= BBS / 2) {
		struct ibv_wc wc;
		/* the last WQE's first block (it takes bbs blocks) */
		device_cqe((uint16_t)(qp->sq.cur_post - bbs), op);
		if (mlx5_poll_cq(&cq->verbs_cq.cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			abort();
		freed_pi = qp->sq.cur_post;
	}
}

static struct ibv_sge sge;
static struct ibv_send_wr wr;

__attribute__((noinline)) static void post(void)
{
	struct ibv_send_wr *bad;
	if (mlx5_post_send(qp->ibv_qp, &wr, &bad))
		abort();
}

static void rdma(enum ibv_wr_opcode op, uint64_t i, unsigned len, unsigned flags)
{
	sge.addr = 0x20000 + i * 64;
	sge.length = len;
	sge.lkey = 0x66;
	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED | flags;
	wr.wr.rdma.remote_addr = 0x10000 + i * 64;
	wr.wr.rdma.rkey = 0x55;
	post();
}

static void atomic(enum ibv_wr_opcode op, uint64_t i, uint64_t compare_add, uint64_t swap)
{
	sge.addr = 0x20000 + i * 8;
	sge.length = 8;
	sge.lkey = 0x66;
	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = 0x10000 + i * 64;
	wr.wr.atomic.rkey = 0x55;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	post();
}

/* 32 WRITEs in one list, the last signalled: one mlx5_post_send, one doorbell. */
static struct ibv_send_wr list[BATCH];
static struct ibv_sge sges[BATCH];
__attribute__((noinline)) static void post_batch32(uint64_t i)
{
	for (unsigned k = 0; k < BATCH; k++) {
		sges[k].addr = 0x20000 + (i + k) * 64;
		sges[k].length = 64;
		sges[k].lkey = 0x66;
		list[k].wr_id = i + k;
		list[k].sg_list = &sges[k];
		list[k].num_sge = 1;
		list[k].opcode = IBV_WR_RDMA_WRITE;
		list[k].send_flags = k == BATCH - 1 ? IBV_SEND_SIGNALED : 0;
		list[k].wr.rdma.remote_addr = 0x10000 + (i + k) * 64;
		list[k].wr.rdma.rkey = 0x55;
		list[k].next = k == BATCH - 1 ? NULL : &list[k + 1];
	}
	struct ibv_send_wr *bad;
	if (mlx5_post_send(qp->ibv_qp, list, &bad))
		abort();
}

/* DC WRITE on a stream through ibv_wr_* and mlx5dv_wr_set_dc_addr_stream. */
__attribute__((noinline)) static void post_dc_write(uint64_t i, struct ibv_ah *ah)
{
	struct ibv_qp_ex *qpx = h_qp_ex(qp);
	struct mlx5dv_qp_ex *dv = h_dv_qp(qp);
	ibv_wr_start(qpx);
	qpx->wr_id = i;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, 0x55, 0x10000 + i * 64);
	mlx5dv_wr_set_dc_addr_stream(dv, ah, 0x4242, 0x12345678, i & 63);
	ibv_wr_set_sge(qpx, 0x66, 0x20000 + i * 64, 64);
	if (ibv_wr_complete(qpx))
		abort();
}

/* UMR: mlx5dv_wr_mkey_configure with the access and list setters. */
__attribute__((noinline)) static void post_umr_klm4(uint64_t i, struct mlx5dv_mkey *mkey, const struct ibv_sge *klm)
{
	struct ibv_qp_ex *qpx = h_qp_ex(qp);
	struct mlx5dv_qp_ex *dv = h_dv_qp(qp);
	struct mlx5dv_mkey_conf_attr attr = { 0 };
	ibv_wr_start(qpx);
	qpx->wr_id = i;
	/* libmlx5 configures keys inline only */
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	mlx5dv_wr_mkey_configure(dv, mkey, 2, &attr);
	mlx5dv_wr_set_mkey_access_flags(dv, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	mlx5dv_wr_set_mkey_layout_list(dv, 4, klm);
	if (ibv_wr_complete(qpx))
		abort();
}

/* A 42-byte packet all inline (IBV_SEND_INLINE; the minimum inline
 * headers, 18 bytes, in the Ethernet segment), checksums offloaded. */
__attribute__((noinline)) static void post_eth42(uint64_t i, uint8_t *pkt)
{
	sge.addr = (uintptr_t)pkt;
	sge.length = 42;
	sge.lkey = 0x66;
	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_IP_CSUM;
	post();
}

/* A TSO of 64 KiB: 54 bytes of headers, MSS 1448, the payload by one SGE. */
__attribute__((noinline)) static void post_tso(uint64_t i, uint8_t *hdr)
{
	sge.addr = 0x20000 + i * 64;
	sge.length = 65536 - 54;
	sge.lkey = 0x66;
	wr.wr_id = i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_TSO;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM;
	wr.tso.hdr = hdr;
	wr.tso.hdr_sz = 54;
	wr.tso.mss = 1448;
	post();
}

/* Tag matching (the tag_add row): one IBV_WR_TAG_ADD with a 64-byte buffer
 * through mlx5_post_srq_ops (what ibv_post_srq_ops reaches), signaled every
 * 32nd; the signaled one's completion (no packet, tag matching, APPEND) is
 * written by the device and taken through the extended poller
 * (ibv_start_poll, the opcode and flags read, ibv_end_poll), which frees
 * the command ring. The list holds 65535 tags, more than a run adds. */
#define TM_TAGS 65535
#define TM_SIGNAL_EVERY 32
#define SRQN 0x99
/* cq.c's enums (no header has them) */
#define CQE_APP_TAG_MATCHING 1
#define CQE_APP_OP_TM_APPEND 0x5
static struct h_tm *tm;
static struct ibv_ops_wr owr;
static struct ibv_sge tsge;

__attribute__((noinline)) static void post_tag_add(uint64_t i, int signaled)
{
	tsge.addr = 0x20000 + i * 64;
	tsge.length = 64;
	tsge.lkey = 0x66;
	owr.wr_id = i;
	owr.next = NULL;
	owr.opcode = IBV_WR_TAG_ADD;
	owr.flags = signaled ? IBV_OPS_SIGNALED : 0;
	owr.tm.add.recv_wr_id = i;
	owr.tm.add.tag = i;
	owr.tm.add.mask = ~0ull;
	owr.tm.add.sg_list = &tsge;
	owr.tm.add.num_sge = 1;
	struct ibv_ops_wr *bad;
	if (mlx5_post_srq_ops(&tm->srq->vsrq.srq, &owr, &bad))
		abort();
}

static void device_tm_cqe(uint16_t pi)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.tm_cqe.success = htobe32(MLX5_TMC_SUCCESS);
	cqe.srqn_uidx = htobe32(SRQN);
	cqe.app = CQE_APP_TAG_MATCHING;
	cqe.app_op = CQE_APP_OP_TM_APPEND;
	cqe.sop_drop_qpn = htobe32(QPN);
	cqe.wqe_counter = htobe16(pi);
	cqe.op_own = (MLX5_CQE_NO_PACKET << 4) | !!(produced & CQES);
	*(volatile struct mlx5_cqe64 *)((uint8_t *)tm->cq->active_buf->buf + (produced % CQES) * 64) = cqe;
	produced++;
}

static uint64_t poll_tm(void)
{
	struct ibv_cq_ex *cx = &tm->cq->verbs_cq.cq_ex;
	struct ibv_poll_cq_attr attr = { 0 };
	if (ibv_start_poll(cx, &attr))
		abort();
	if (cx->status != IBV_WC_SUCCESS || ibv_wc_read_opcode(cx) != IBV_WC_TM_ADD)
		abort();
	uint64_t r = cx->wr_id + ibv_wc_read_wc_flags(cx);
	ibv_end_poll(cx);
	return r;
}

/* The striding WQ (the mprq row): one request (a 512-byte buffer, the
 * WQE's 8 strides of 64 bytes) through ibv_post_wq_recv; at half the WQ
 * outstanding the device writes a packet per outstanding WQE taking all its
 * strides, polled with mlx5_poll_cq into an array of 32. */
#define MPRQ_CQES 64
#define MPRQ_BATCH (BBS / 2)
static struct h_mprq *mp;
static uint32_t mproduced;
static struct ibv_recv_wr rwr;
static struct ibv_sge rsge;
static struct ibv_wc mwcs[MPRQ_BATCH];

__attribute__((noinline)) static void post_mprq(uint64_t i)
{
	rsge.addr = 0x20000 + i * 512;
	rsge.length = 512;
	rsge.lkey = 0x66;
	rwr.wr_id = i;
	rwr.next = NULL;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	struct ibv_recv_wr *bad;
	if (ibv_post_wq_recv(&mp->rwq->wq, &rwr, &bad))
		abort();
}

static void device_mprq_cqe(uint16_t wqe)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.wqe_id = htobe16(wqe);
	cqe.byte_cnt = htobe32(8 << 16 | 512);
	cqe.sop_drop_qpn = htobe32((MLX5_CQE_RESP_SEND << 24) | QPN);
	cqe.op_own = (MLX5_CQE_RESP_SEND << 4) | !!(mproduced & MPRQ_CQES);
	*(volatile struct mlx5_cqe64 *)((uint8_t *)mp->cq->active_buf->buf + (mproduced % MPRQ_CQES) * 64) = cqe;
	mproduced++;
}

__attribute__((noinline)) static int poll(uint64_t i)
{
	struct ibv_wc wc;
	/* a requester CQE naming a posted WRITE's first block */
	device_cqe((uint16_t)i & (BBS - 1), MLX5_OPCODE_RDMA_WRITE);
	return mlx5_poll_cq(&cq->verbs_cq.cq, 1, &wc);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--rows")) {
		for (int k = 0; rows[k]; k++)
			puts(rows[k]);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: wqe_cost_mlx5 ROW [ITERATIONS] | wqe_cost_mlx5 --rows\n");
		return 2;
	}
	const char *row = argv[1];
	long n = argc > 2 ? atol(argv[2]) : 0;
	int dc = !strcmp(row, "dc_write"), eth = !strcmp(row, "eth42") || !strcmp(row, "tso");
	if (!strcmp(row, "tag_add")) {
		/* no BlueFlame (bf_size 0, uuarn 0): the plain doorbell */
		tm = h_tm_make(SRQN, QPN, TM_TAGS, BBS, 64, 0, 0, 1, CQN, CQES);
		tm->cmd->verbs_qp.qp.send_cq = &tm->cq->verbs_cq.cq;
		long sum = 0;
		for (long i = 0; i < n; i++) {
			int signaled = i % TM_SIGNAL_EVERY == TM_SIGNAL_EVERY - 1;
			post_tag_add(i, signaled);
			if (signaled) {
				device_tm_cqe((uint16_t)(tm->cmd->sq.cur_post - 1));
				sum += poll_tm();
			}
		}
		printf("%s %u %ld\n", row, tm->cmd->sq.cur_post, sum);
		return 0;
	}
	if (!strcmp(row, "mprq")) {
		mp = h_mprq_make(QPN, BBS, 1, CQN, MPRQ_CQES);
		if (mp->rwq->rq.wqe_cnt != BBS || mp->rwq->rq.wqe_shift != 5 || mp->rwq->rq.max_gs != 1)
			abort();
		long sum = 0;
		for (long i = 0; i < n; i++) {
			post_mprq(i);
			struct mlx5_rwq *w = mp->rwq;
			if (w->rq.head - w->rq.tail >= BBS / 2) {
				uint32_t first = w->rq.tail, out = w->rq.head - w->rq.tail;
				for (uint32_t k = 0; k < out; k++)
					device_mprq_cqe((uint16_t)(first + k));
				int got = mlx5_poll_cq(&mp->cq->verbs_cq.cq, MPRQ_BATCH, mwcs);
				if (got != (int)out)
					abort();
				sum += got;
			}
		}
		printf("%s %u %ld\n", row, mp->rwq->rq.head, sum);
		return 0;
	}
	/* kind 0 RC, 3 DCI with streams; no BlueFlame (bf_size 0, uuarn 0): the plain doorbell */
	if (eth) {
		/* a raw packet QP with checksum offload, TSO headers up to 128 bytes */
		qp = h_eth_sq(QPN, BBS, 4, 64, 0, 0, 0, 1, 1, 0);
		h_eth_tso(qp, 128, 1 << 18);
		h_context()->eth_min_inline_size = 18;
	} else if (!strcmp(row, "umr_klm4")) {
		/* uuarn 1 in h_mkey_sq; no BlueFlame still: bf_size 0 */
		qp = h_mkey_sq(QPN, BBS, 128, 0, 0, 1);
	} else {
		qp = h_make_sq(dc ? 3 : 0, QPN, BBS, 4, 64, 0, 0, 0, 1);
	}
	memset(h_sq_buf(qp), 0, BBS * 64);
	if (mlx5_store_qp(h_context(), QPN, qp))
		abort();
	cq = h_cq64(CQN, CQES, 0);
	/* the QP's send CQ is this one (mlx5_wq_overflow's lock; the poller's lookup is by QPN) */
	qp->verbs_qp.qp.send_cq = &cq->verbs_cq.cq;
	uint8_t av[48];
	memset(av, 0, sizeof(av));
	struct ibv_ah *ah = h_ah(0, av);
	long sum = 0;
	if (!strcmp(row, "write"))
		for (long i = 0; i < n; i++) {
			rdma(IBV_WR_RDMA_WRITE, i, 64, 0);
			account(MLX5_OPCODE_RDMA_WRITE, 1);
		}
	else if (!strcmp(row, "write_inline32"))
		for (long i = 0; i < n; i++) {
			static uint8_t payload[32] = { [0 ... 31] = 0x41 };
			sge.addr = (uintptr_t)payload;
			sge.length = 32;
			wr.wr_id = i;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
			wr.wr.rdma.remote_addr = 0x10000 + i * 64;
			wr.wr.rdma.rkey = 0x55;
			post();
			account(MLX5_OPCODE_RDMA_WRITE, 2);
		}
	else if (!strcmp(row, "send"))
		for (long i = 0; i < n; i++) {
			rdma(IBV_WR_SEND, i, 64, 0);
			account(MLX5_OPCODE_SEND, 1);
		}
	else if (!strcmp(row, "read"))
		for (long i = 0; i < n; i++) {
			rdma(IBV_WR_RDMA_READ, i, 64, 0);
			account(MLX5_OPCODE_RDMA_READ, 1);
		}
	else if (!strcmp(row, "cas"))
		for (long i = 0; i < n; i++) {
			atomic(IBV_WR_ATOMIC_CMP_AND_SWP, i, i, i + 1);
			account(MLX5_OPCODE_ATOMIC_CS, 1);
		}
	else if (!strcmp(row, "fetch_add"))
		for (long i = 0; i < n; i++) {
			atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, i, 1, 0);
			account(MLX5_OPCODE_ATOMIC_FA, 1);
		}
	else if (dc)
		for (long i = 0; i < n; i++) {
			post_dc_write(i, ah);
			account(MLX5_OPCODE_RDMA_WRITE, 2);
		}
	else if (!strcmp(row, "batch32"))
		for (long j = 0; j < n / BATCH; j++) {
			post_batch32(j * BATCH);
			account(MLX5_OPCODE_RDMA_WRITE, 1);
		}
	else if (!strcmp(row, "umr_klm4")) {
		struct mlx5dv_mkey *mkey = h_mkey(0x4200, 4);
		struct ibv_sge klm[4];
		for (int k = 0; k < 4; k++) {
			klm[k].addr = 0x20000 + k * 4096;
			klm[k].length = 4096;
			klm[k].lkey = 0x66 + k;
		}
		for (long i = 0; i < n; i++) {
			post_umr_klm4(i, mkey, klm);
			account(MLX5_OPCODE_UMR, 3);
		}
	} else if (!strcmp(row, "eth42") || !strcmp(row, "tso")) {
		uint8_t hdr[54];
		for (unsigned k = 0; k < sizeof(hdr); k++)
			hdr[k] = k;
		int tso = !strcmp(row, "tso");
		for (long i = 0; i < n; i++) {
			if (tso)
				post_tso(i, hdr);
			else
				post_eth42(i, hdr);
			account(MLX5_OPCODE_SEND, 2);
		}
	} else if (!strcmp(row, "poll")) {
		/* a full ring of posted WRITEs for the CQEs to name (the poller looks up wrid/wqe_head) */
		for (long i = 0; i < BBS; i++) {
			rdma(IBV_WR_RDMA_WRITE, i, 64, 0);
			qp->sq.tail = qp->sq.head; /* keep the ring free */
		}
		for (long i = 0; i < n; i++)
			sum += poll(i);
	} else {
		fprintf(stderr, "wqe_cost_mlx5: unknown row %s\n", row);
		return 2;
	}
	printf("%s %u %ld\n", row, qp->sq.cur_post, sum);
	return 0;
}
