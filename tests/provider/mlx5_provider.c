/*
 * The mlx5 provider's own data path on ordinary memory: the differential
 * harness's C half (tests/mlx5_provider.rs is the Rust half).
 *
 * Compiled against the provider's internal headers (providers/mlx5/mlx5.h of
 * the pinned rdma-core tree, after cmake configure) and linked with the
 * provider's static archive, so that mlx5_post_send and mlx5_poll_cq below
 * are libmlx5's real functions. Provider objects (mlx5_context, mlx5_qp,
 * mlx5_cq, mlx5_bf) are built by hand with every field those functions read;
 * their SQ buffer, doorbell record, BlueFlame page and CQ buffer are malloc'd.
 *
 * Output: one line per event, read by the Rust half, which replays the same
 * inputs through rrddmma's writer and decoder on a second set of buffers:
 *
 *   Q qpn wqe_cnt max_gs max_inline bf_size uuarn prefer_bf sig_all seed rc|ud|dc|dcs
 *       a send queue; its ring starts filled with fill(seed) bytes
 *   U remote_qpn remote_qkey av_hex
 *       UD: the address of the next request (the AH's address vector)
 *   D dctn dc_key stream av_hex
 *       DC: the address of the next request (mlx5dv_wr_set_dc_addr's
 *       arguments; with DCI streams, mlx5dv_wr_set_dc_addr_stream's)
 *   R opcode flags imm raddr rkey swap compare_add nsge {len lkey addr}* inl_hex|-
 *       one request of the next list (flags: the IBV_SEND_* bits)
 *   P rc cur_post dbrec bf_offset_before bf_offset_after db_off db_len db_hex
 *       the list was posted (one ibv_post_send call with the R lines above):
 *       what the provider returned, its producer index, the doorbell record,
 *       the BlueFlame half it wrote and every byte written there
 *   W first_bb nbb hex
 *       the ring's basic blocks from the list's first to its producer index
 *   I rc sq_buf_off wqe_cnt stride dbrec_off bf_reg_off bf_size cur_post
 *       mlx5dv_init_obj(MLX5DV_OBJ_QP) on the queue after that list: its
 *       return value, the pointers it gave as offsets into the queue's
 *       buffer, doorbell records and BlueFlame page, and libmlx5's producer
 *       index; the lists after it are posted through the view on our side
 *   J rc buf_off cqe_cnt cqe_size dbrec_off uar_off cqn cons_index
 *       mlx5dv_init_obj(MLX5DV_OBJ_CQ) on the CQ after its first round, as
 *       offsets into its buffer, records and UAR page, and libmlx5's
 *       consumer index; our side polls through a ring made from it after
 *   K, S, X, Y     CQE compression (run_zip below)
 *   M, F           masked CAS / masked fetch-and-add reference WQEs
 *                  (run_masked, run_masked_fa below)
 *   Z              masked and extended atomics on RC and DCI queues
 *                  (run_dc_typed below)
 *   C cqn cqe_cnt cqe_sz
 *       a completion queue (its buffer starts invalid: opcode 0xf, owner 1)
 *   E idx hex      an entry written into the CQ as hardware would
 *   O ne n dbrec   one mlx5_poll_cq(ne) call returned n; the consumer record
 *   V              mlx5_cq_event: a completion event was taken (arm_sn++)
 *   A solicited arm_record uar_hex
 *                  mlx5_arm_cq: the arm record and the 8 bytes at UAR + 0x20
 *   w|x wr_id status opcode vendor_err byte_len imm qp_num src_qp wc_flags
 *     pkey_index slid sl dlid_path_bits scatter_hex|-|~
 *       one ibv_wc of that call (byte_len/opcode/imm as left by the provider;
 *       fields it does not set hold the sentinel 0x5a5a...); for a
 *       successful receive of at most 64 bytes, the bytes the provider left
 *       in its receive buffer ('~' when a later receive of the same call
 *       used that buffer too); 'x' lines come from the extended poller
 *       (ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_*
 *       readers) and end with the completion timestamp
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stddef.h>

#include "mlx5.h"
#include "wqe.h"

static uint64_t rng_state;
/* The quick mode's divisor of every count (argv[4]; 1 in the standard run). */
static unsigned scale = 1;

/* splitmix64: the same generator as the Rust half's `fill`. */
static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(void) { return splitmix(&rng_state); }
static unsigned below(unsigned n) { return (unsigned)(rnd() % n); }

/* Bytes of fill(seed): 8 bytes (little-endian) per splitmix64 output. */
static void fill(void *p, size_t n, uint64_t seed)
{
	uint8_t *b = p;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = splitmix(&seed);
		for (size_t j = 0; j < 8 && i + j < n; j++)
			b[i + j] = (uint8_t)(v >> (8 * j));
	}
}

static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	static const char d[] = "0123456789abcdef";
	if (!n) {
		putchar('-');
		return;
	}
	for (size_t i = 0; i < n; i++) {
		putchar(d[b[i] >> 4]);
		putchar(d[b[i] & 15]);
	}
}

static void *zalloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 64))
		abort();
	memset(p, 0, n);
	return p;
}

static struct mlx5_context *ctx;
/* The transport of the queues being made: IBV_QPT_RC, IBV_QPT_UD, or
 * IBV_QPT_DRIVER for DCIs (posted through the ibv_wr_* / mlx5dv_wr_* entries
 * the provider installs with mlx5_qp_fill_wr_pfns). */
static enum ibv_qp_type transport = IBV_QPT_RC;
/* UD: a pool of address handles per queue, as mlx5_create_ah fills their AVs. */
#define AHS 4
static struct mlx5_ah ahs[AHS];

#define MAX_LIST 16
#define MAX_SGE 32

/* DC: each request's address, beside the list's work requests. */
struct dc_addr {
	struct mlx5_ah *ah;
	uint32_t dctn;
	uint64_t key;
	uint16_t stream;
	unsigned setters_order;
};
/* DCI streams: the DC address set with mlx5dv_wr_set_dc_addr_stream. The
 * DCIs have 2^LOG_DCI_STREAMS streams (DciStreams::log_num_concurrent on the
 * Rust side, tests/provider/build.rs): stream ids are drawn below that, as a
 * caller of libmlx5 must keep them (it does not check). */
#define LOG_DCI_STREAMS 6
#define DCI_STREAM_MASK ((1u << LOG_DCI_STREAMS) - 1)
static int dci_streams;
static struct ibv_send_wr dc_wrs[MAX_LIST];
static struct dc_addr dc_addrs[MAX_LIST];
static struct ibv_pd pd;

static uint8_t *cq_uar;

/* mlx5dv_init_obj asks the context for the provider's direct-verbs entries
 * (mlx5_get_dv_ops): the context's device must be an mlx5 one (its
 * verbs_device ops libmlx5's own, whose static-build alias is
 * verbs_provider_mlx5) and the context must carry libmlx5's entry table
 * mlx5_dv_ctx_ops, a static of mlx5.c that the harness's copy of the archive
 * makes global (objcopy --globalize-symbol, tests/provider/build.rs); the
 * provider code is unchanged. */
extern const struct verbs_device_ops verbs_provider_mlx5;
extern struct mlx5_dv_context_ops mlx5_dv_ctx_ops;
static struct verbs_device mlx5_vdev;

static void make_context(void)
{
	ctx = zalloc(sizeof(*ctx));
	mlx5_vdev.ops = &verbs_provider_mlx5;
	ctx->ibv_ctx.context.device = &mlx5_vdev.device;
	ctx->dv_ctx_ops = &mlx5_dv_ctx_ops;
	/* The CQ doorbell page mlx5_arm_cq writes to (UAR + MLX5_CQ_DOORBELL). */
	cq_uar = zalloc(4096);
	ctx->cq_uar_reg = cq_uar;
	/* mlx5_err/mlx5_dbg print to dbg_fp (error CQEs are reported there). */
	ctx->dbg_fp = fopen("/dev/null", "w");
	ctx->prefer_bf = 1;
	ctx->shut_up_bf = 0;
	/* No NULL-MR lkey: scatter-to-CQE copies into every receive buffer. */
	ctx->dump_fill_mkey_be = htobe32(0xffffffff);
	pd.context = &ctx->ibv_ctx.context;
}

/* ---- send side ---------------------------------------------------------- */

#define BF_PAGE 4096
#define SENTINEL 0xa5

struct sq_case {
	struct mlx5_qp *qp;
	struct mlx5_cq *scq;
	struct mlx5_bf *bf;
	uint8_t *bfpage;
};

static struct sq_case make_sq(uint32_t qpn, unsigned wqe_cnt, int max_gs, int max_inline, unsigned bf_size,
			      unsigned uuarn, int sig_all, uint64_t seed)
{
	struct sq_case c;
	struct mlx5_qp *qp = zalloc(sizeof(*qp));
	size_t bytes = (size_t)wqe_cnt * MLX5_SEND_WQE_BB;

	c.scq = zalloc(sizeof(*c.scq));
	c.bf = zalloc(sizeof(*c.bf));
	c.bfpage = zalloc(BF_PAGE);
	c.bf->reg = c.bfpage;
	c.bf->buf_size = bf_size;
	c.bf->uuarn = uuarn;
	c.bf->offset = 0;
	c.bf->need_lock = 0;

	qp->ibv_qp = &qp->verbs_qp.qp;
	qp->verbs_qp.qp.context = &ctx->ibv_ctx.context;
	qp->verbs_qp.qp.pd = &pd;
	qp->verbs_qp.qp.qp_num = qpn;
	qp->verbs_qp.qp.qp_type = transport;
	qp->verbs_qp.qp.send_cq = &c.scq->verbs_cq.cq;
	qp->verbs_qp.qp.recv_cq = &c.scq->verbs_cq.cq;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = qpn;

	qp->buf.buf = zalloc(bytes);
	fill(qp->buf.buf, bytes, seed);
	qp->sq_start = qp->buf.buf;
	qp->sq.qend = (uint8_t *)qp->buf.buf + bytes;
	qp->sq.wqe_cnt = wqe_cnt;
	qp->sq.max_post = wqe_cnt;
	qp->sq.max_gs = max_gs;
	qp->sq.qp_state_max_gs = max_gs;
	qp->sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	qp->sq.wrid = calloc(wqe_cnt, sizeof(uint64_t));
	qp->sq.wqe_head = calloc(wqe_cnt, sizeof(unsigned));
	qp->sq.wr_data = calloc(wqe_cnt, sizeof(uint32_t));
	qp->max_inline_data = max_inline;
	qp->sq_signal_bits = sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	qp->fm_cache = 0;
	qp->wq_sig = 0;
	qp->atomics_enabled = 1;
	qp->flags = 0;
	qp->db = zalloc(64);
	qp->bf = c.bf;
	if (transport == IBV_QPT_DRIVER) {
		/* A DCI: the provider installs its ibv_wr_* and mlx5dv_wr_* entries. */
		struct ibv_qp_init_attr_ex attr = { .qp_type = IBV_QPT_DRIVER };
		attr.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				      IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				      IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
		dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
		if (mlx5_qp_fill_wr_pfns(qp, &attr, &dv))
			abort();
	}
	c.qp = qp;
	return c;
}

static const enum ibv_wr_opcode rc_ops[] = {
	IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_SEND,
	IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP,
};

/* Basic blocks a request takes, as mlx5_post_send sizes it. */
static unsigned request_bbs(const struct ibv_send_wr *wr)
{
	unsigned ds = 1;
	if (transport == IBV_QPT_UD || transport == IBV_QPT_DRIVER)
		ds += 3; /* the 48-byte datagram segment */
	if (transport != IBV_QPT_UD) switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		ds += 1;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		ds += 2;
		break;
	default:
		break;
	}
	if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge) {
		unsigned inl = 0;
		for (int i = 0; i < wr->num_sge; i++)
			inl += wr->sg_list[i].length;
		if (inl)
			ds += (inl + 4 + 15) / 16;
	} else {
		for (int i = 0; i < wr->num_sge; i++)
			ds += wr->sg_list[i].length ? 1 : 0;
	}
	return (ds * 16 + 63) / 64;
}

static uint8_t payload[1 << 16];

static void random_request(struct ibv_send_wr *wr, struct ibv_sge *sg, int max_gs, int max_inline)
{
	memset(wr, 0, sizeof(*wr));
	if (transport == IBV_QPT_UD) {
		wr->opcode = below(2) ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM;
		wr->wr.ud.ah = &ahs[below(AHS)].ibv_ah;
		wr->wr.ud.remote_qpn = (uint32_t)rnd() & 0xffffff;
		wr->wr.ud.remote_qkey = (uint32_t)rnd();
	} else {
		wr->opcode = rc_ops[below(sizeof(rc_ops) / sizeof(rc_ops[0]))];
	}
	if (transport == IBV_QPT_DRIVER) {
		/* The DCT this request goes to: its AH, DCT number and access key. */
		struct dc_addr *d = &dc_addrs[wr - dc_wrs];
		d->ah = &ahs[below(AHS)];
		d->dctn = (uint32_t)rnd() & 0xffffff;
		d->key = rnd();
		d->setters_order = below(2);
		d->stream = dci_streams ? (uint16_t)(rnd() & DCI_STREAM_MASK) : 0;
	}
	wr->wr_id = rnd();
	wr->sg_list = sg;
	unsigned f = (unsigned)rnd();
	wr->send_flags = (f & 1 ? IBV_SEND_SIGNALED : 0) | (f & 2 ? IBV_SEND_FENCE : 0) |
			 (f & 4 ? IBV_SEND_SOLICITED : 0);
	wr->imm_data = (uint32_t)rnd();
	if (wr->opcode == IBV_WR_SEND_WITH_INV)
		wr->invalidate_rkey = (uint32_t)rnd();
	if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr->wr.atomic.remote_addr = rnd() & ~7ULL;
		wr->wr.atomic.rkey = (uint32_t)rnd();
		wr->wr.atomic.swap = rnd();
		wr->wr.atomic.compare_add = rnd();
		/* One 8-byte local target (the provider writes byte_count 8 whatever the SGE says). */
		wr->num_sge = 1;
		sg[0].addr = rnd() & ~7ULL;
		sg[0].length = 8;
		sg[0].lkey = (uint32_t)rnd();
		return;
	}
	if (transport != IBV_QPT_UD) {
		wr->wr.rdma.remote_addr = rnd();
		wr->wr.rdma.rkey = (uint32_t)rnd();
	}
	int inlinable = wr->opcode != IBV_WR_RDMA_READ;
	if (inlinable && below(3) == 0) {
		/* Inline: 0..max_inline bytes spread over 1..4 SGEs of this process's memory. */
		wr->send_flags |= IBV_SEND_INLINE;
		unsigned total = below(8) == 0 ? (unsigned)max_inline : below((unsigned)max_inline + 1);
		if (total == 0 && below(2) == 0) {
			/* No bytes, no entries: the provider writes no inline segment. */
			wr->num_sge = 0;
			return;
		}
		/* (With total 0, 1..4 zero-length entries: no segment either, but
		 * mlx5_post_send still counts the WQE as inline.) */
		int n = 1 + (int)below(max_gs < 4 ? (unsigned)max_gs : 4);
		unsigned left = total;
		size_t off = below(4096);
		for (int i = 0; i < n; i++) {
			unsigned len = i == n - 1 ? left : below(left + 1);
			sg[i].addr = (uintptr_t)(payload + off);
			sg[i].length = len;
			sg[i].lkey = (uint32_t)rnd();
			off += len;
			left -= len;
		}
		wr->num_sge = n;
		return;
	}
	int n = below(8) == 0 ? max_gs : (int)below((unsigned)max_gs + 1);
	for (int i = 0; i < n; i++) {
		sg[i].addr = rnd();
		/* Zero-length entries now and then: the provider leaves them out. */
		sg[i].length = below(10) == 0 ? 0 : (uint32_t)rnd() & 0x7fffffff;
		sg[i].lkey = (uint32_t)rnd();
	}
	wr->num_sge = n;
}

/* Address vectors as mlx5_create_ah leaves them: key and dqp_dct zero (set
 * per request), reserved bytes zero, the rest the route's. */
static void make_ahs(void)
{
	for (int i = 0; i < AHS; i++) {
		struct mlx5_wqe_av *av = &ahs[i].av;
		memset(av, 0, sizeof(*av));
		av->stat_rate_sl = (uint8_t)rnd();
		av->fl_mlid = (uint8_t)rnd();
		av->rlid = htobe16((uint16_t)rnd());
		uint64_t mac = rnd();
		memcpy(av->rmac, &mac, 6);
		av->tclass = (uint8_t)rnd();
		av->hop_limit = (uint8_t)rnd();
		av->grh_gid_fl = htobe32((uint32_t)rnd());
		uint64_t g[2] = { rnd(), rnd() };
		memcpy(av->rgid, g, 16);
	}
}

static void print_request(const struct ibv_send_wr *wr)
{
	if (transport == IBV_QPT_DRIVER) {
		/* D dctn dc_key stream av_hex: the DC address of the next request. */
		const struct dc_addr *d = &dc_addrs[wr - dc_wrs];
		printf("D %u %llu %u ", d->dctn, (unsigned long long)d->key, d->stream);
		hex(&d->ah->av, sizeof(d->ah->av));
		putchar('\n');
	}
	if (transport == IBV_QPT_UD) {
		/* U remote_qpn remote_qkey av_hex: the AV as the AH holds it. */
		struct mlx5_ah *ah = container_of(wr->wr.ud.ah, struct mlx5_ah, ibv_ah);
		printf("U %u %u ", wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
		hex(&ah->av, sizeof(ah->av));
		putchar('\n');
	}
	uint64_t raddr = wr->wr.rdma.remote_addr, swap = 0, cmp = 0;
	uint32_t rkey = wr->wr.rdma.rkey, imm = wr->imm_data;
	if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		raddr = wr->wr.atomic.remote_addr;
		rkey = wr->wr.atomic.rkey;
		swap = wr->wr.atomic.swap;
		cmp = wr->wr.atomic.compare_add;
	}
	if (wr->opcode == IBV_WR_SEND_WITH_INV)
		imm = wr->invalidate_rkey;
	printf("R %d %u %u %llu %u %llu %llu %d", wr->opcode, wr->send_flags, imm, (unsigned long long)raddr, rkey,
	       (unsigned long long)swap, (unsigned long long)cmp, wr->num_sge);
	for (int i = 0; i < wr->num_sge; i++)
		printf(" %u %u %llu", wr->sg_list[i].length, wr->sg_list[i].lkey,
		       (unsigned long long)wr->sg_list[i].addr);
	putchar(' ');
	if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge) {
		/* The inline bytes, all SGEs' concatenated (none when every entry is empty). */
		for (int i = 0; i < wr->num_sge; i++)
			if (wr->sg_list[i].length)
				hex((void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
	} else {
		putchar('-');
	}
	putchar('\n');
}

/* Posts a list on a DCI through the entries the provider installed, in
 * libibverbs' order: start, per request a builder, the DC address and the
 * data setters (in either order), complete. */
static int post_dc(struct mlx5_qp *qp, struct ibv_send_wr *wrs, unsigned k)
{
	struct ibv_qp_ex *qx = &qp->verbs_qp.qp_ex;
	struct mlx5dv_qp_ex *dv = &qp->dv_qp;
	ibv_wr_start(qx);
	for (unsigned i = 0; i < k; i++) {
		struct ibv_send_wr *wr = &wrs[i];
		struct dc_addr *d = &dc_addrs[i];
		qx->wr_id = wr->wr_id;
		qx->wr_flags = wr->send_flags;
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
			ibv_wr_rdma_write(qx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
			break;
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			ibv_wr_rdma_write_imm(qx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, wr->imm_data);
			break;
		case IBV_WR_RDMA_READ:
			ibv_wr_rdma_read(qx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
			break;
		case IBV_WR_SEND:
			ibv_wr_send(qx);
			break;
		case IBV_WR_SEND_WITH_IMM:
			ibv_wr_send_imm(qx, wr->imm_data);
			break;
		case IBV_WR_SEND_WITH_INV:
			ibv_wr_send_inv(qx, wr->invalidate_rkey);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
			ibv_wr_atomic_cmp_swp(qx, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
					      wr->wr.atomic.compare_add, wr->wr.atomic.swap);
			break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			ibv_wr_atomic_fetch_add(qx, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
						wr->wr.atomic.compare_add);
			break;
		default:
			abort();
		}
		for (unsigned step = 0; step < 2; step++) {
			if (step == d->setters_order) {
				if (dci_streams)
					mlx5dv_wr_set_dc_addr_stream(dv, &d->ah->ibv_ah, d->dctn, d->key, d->stream);
				else
					mlx5dv_wr_set_dc_addr(dv, &d->ah->ibv_ah, d->dctn, d->key);
			} else if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge) {
				struct ibv_data_buf bufs[MAX_SGE];
				for (int j = 0; j < wr->num_sge; j++) {
					bufs[j].addr = (void *)(uintptr_t)wr->sg_list[j].addr;
					bufs[j].length = wr->sg_list[j].length;
				}
				ibv_wr_set_inline_data_list(qx, (size_t)wr->num_sge, bufs);
			} else {
				ibv_wr_set_sge_list(qx, (size_t)wr->num_sge, wr->sg_list);
			}
		}
	}
	return ibv_wr_complete(qx);
}

static unsigned send_lists, views;

static void run_send(unsigned lists, uint32_t qpn_base)
{
	struct ibv_send_wr *wrs = dc_wrs;
	static struct ibv_sge sges[MAX_LIST][MAX_SGE];
	fill(payload, sizeof(payload), 7);

	unsigned done = 0;
	for (unsigned q = 0; done < lists; q++) {
		/* A queue: 8..256 basic blocks, up to 16 SGEs, up to 256 inline bytes. */
		unsigned wqe_cnt = 8u << below(6);
		/* The first queue is long-lived: its producer index passes 65536 (the WQE index wraps). */
		int long_lived = q == 0 && transport == IBV_QPT_RC;
		if (long_lived)
			wqe_cnt = 256;
		int max_gs = 1 + (int)below(30);
		int max_inline = (int)below(513);
		/* The largest request must fit the ring: 2 DS + max(max_gs, inline DS). */
		while ((2 + (unsigned)max_gs) * 16 > wqe_cnt * 64)
			max_gs /= 2;
		while ((2 + (max_inline + 4 + 15) / 16) * 16 > (int)wqe_cnt * 64)
			max_inline /= 2;
		/* BlueFlame: none (uuarn 0: a doorbell-only register, whose buf_size may
		 * still be set, as for libmlx5's shared register 0), 256 or 512 bytes. */
		unsigned bf_choice = below(4);
		unsigned bf_size = bf_choice == 0 ? 0 : (bf_choice == 3 ? 512 : 256);
		unsigned uuarn = bf_choice >= 2 ? 1 + below(8) : 0;
		int prefer_bf = (int)below(2);
		int sig_all = below(4) == 0;
		uint64_t seed = rnd();
		uint32_t qpn = (qpn_base + q) & 0xffffff;
		struct sq_case c = make_sq(qpn, wqe_cnt, max_gs, max_inline, bf_size, uuarn, sig_all, seed);
		ctx->prefer_bf = prefer_bf;
		printf("Q %u %u %d %d %u %u %d %d %llu %s\n", qpn, wqe_cnt, max_gs, max_inline, bf_size, uuarn, prefer_bf,
		       sig_all, (unsigned long long)seed,
		       transport == IBV_QPT_UD ? "ud" : transport == IBV_QPT_DRIVER ? (dci_streams ? "dcs" : "dc") : "rc");
		if (transport != IBV_QPT_RC)
			make_ahs();
		/* Enough lists on this queue to wrap it a few times. */
		unsigned per_queue = 20 + below(60);
		/* After this list, the queue's view is taken and posting goes on through it. */
		unsigned view_at = below(per_queue);
		/* In the quick mode the long-lived queue still wraps its index, its lists on top of the count. */
		int whole = long_lived && scale > 1;
		for (unsigned l = 0; (long_lived ? c.qp->sq.cur_post < 66000 : l < per_queue) && (done < lists || whole);
		     l++, done += !whole) {
			unsigned n = long_lived ? MAX_LIST : 1 + below(below(4) == 0 ? MAX_LIST : 3);
			unsigned bbs = 0, k = 0;
			for (; k < n; k++) {
				random_request(&wrs[k], sges[k], max_gs, max_inline);
				unsigned b = request_bbs(&wrs[k]);
				if (bbs + b > wqe_cnt)
					break;
				bbs += b;
				wrs[k].next = NULL;
				if (k)
					wrs[k - 1].next = &wrs[k];
			}
			if (k == 0) {
				done--; /* nothing posted: this list does not count */
				continue;
			}
			for (unsigned i = 0; i < k; i++)
				print_request(&wrs[i]);
			unsigned first = c.qp->sq.cur_post;
			unsigned off_before = c.bf->offset;
			memset(c.bfpage, SENTINEL, BF_PAGE);
			struct ibv_send_wr *bad = NULL;
			int rc = transport == IBV_QPT_DRIVER ? post_dc(c.qp, wrs, k)
							     : mlx5_post_send(c.qp->ibv_qp, &wrs[0], &bad);
			/* What the provider stored in the BlueFlame page: whole 8-byte words from off_before. */
			size_t len = 0;
			for (size_t w = 0; off_before + w + 8 <= BF_PAGE; w += 8) {
				int written = 0;
				for (int j = 0; j < 8; j++)
					written |= c.bfpage[off_before + w + j] != SENTINEL;
				if (written)
					len = w + 8;
			}
			printf("P %d %u %u %u %u %u %zu ", rc, c.qp->sq.cur_post, be32toh(c.qp->db[MLX5_SND_DBR]), off_before,
			       c.bf->offset, off_before, len);
			hex(c.bfpage + off_before, len);
			putchar('\n');
			unsigned nbb = c.qp->sq.cur_post - first;
			printf("W %u %u ", first & (wqe_cnt - 1), nbb);
			for (unsigned b = 0; b < nbb; b++)
				hex((uint8_t *)c.qp->sq_start + (((first + b) & (wqe_cnt - 1)) * 64), 64);
			if (!nbb)
				putchar('-');
			putchar('\n');
			/* Everything posted completes: the queue is empty again. */
			c.qp->sq.tail = c.qp->sq.head;
			send_lists++;
			if (l == view_at && !long_lived) {
				/* The view: what mlx5dv_init_obj reports, as offsets into the
				 * queue's buffer, its doorbell records and its BlueFlame page. */
				struct mlx5dv_qp dq;
				struct mlx5dv_obj o;
				memset(&dq, 0, sizeof(dq));
				memset(&o, 0, sizeof(o));
				o.qp.in = c.qp->ibv_qp;
				o.qp.out = &dq;
				int rc = mlx5dv_init_obj(&o, MLX5DV_OBJ_QP);
				printf("I %d %ld %u %u %ld %ld %u %u\n", rc, (long)((uint8_t *)dq.sq.buf - (uint8_t *)c.qp->buf.buf),
				       dq.sq.wqe_cnt, dq.sq.stride, (long)((uint8_t *)dq.dbrec - (uint8_t *)c.qp->db),
				       (long)((uint8_t *)dq.bf.reg - c.bfpage), dq.bf.size, c.qp->sq.cur_post);
				views++;
			}
		}
	}
}

/* ---- receive side ------------------------------------------------------- */

#define RQ_CNT 64
#define RQ_BUF 128

struct cq_case {
	struct mlx5_cq *cq;
	struct mlx5_qp *qps[3];
	uint8_t *rbuf; /* RQ_CNT receive buffers per QP */
};

static struct mlx5_qp *make_rq_qp(uint32_t qpn, uint8_t *rbuf)
{
	struct mlx5_qp *qp = zalloc(sizeof(*qp));
	qp->ibv_qp = &qp->verbs_qp.qp;
	qp->verbs_qp.qp.context = &ctx->ibv_ctx.context;
	qp->verbs_qp.qp.pd = &pd;
	qp->verbs_qp.qp.qp_num = qpn;
	qp->verbs_qp.qp.qp_type = IBV_QPT_RC;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = qpn;
	/* SQ: 64 WQEs, wr_id 0x5100 << 48 | qpn << 16 | index; the RQ the same with tag 0x5200. */
	qp->sq.wqe_cnt = 64;
	qp->sq.wrid = calloc(64, sizeof(uint64_t));
	qp->sq.wqe_head = calloc(64, sizeof(unsigned));
	qp->sq.wr_data = calloc(64, sizeof(uint32_t));
	for (unsigned i = 0; i < 64; i++)
		qp->sq.wrid[i] = ((uint64_t)0x5100 << 48) | ((uint64_t)qpn << 16) | i;
	/* RQ: RQ_CNT WQEs of one data segment (wqe_shift 4) pointing at RQ_BUF-byte buffers. */
	qp->rq.wqe_cnt = RQ_CNT;
	qp->rq.wqe_shift = 4;
	qp->rq.offset = 0;
	qp->rq.wrid = calloc(RQ_CNT, sizeof(uint64_t));
	qp->buf.buf = zalloc(RQ_CNT * 16);
	for (unsigned i = 0; i < RQ_CNT; i++) {
		struct mlx5_wqe_data_seg *d = (void *)((uint8_t *)qp->buf.buf + i * 16);
		d->byte_count = htobe32(RQ_BUF);
		d->lkey = htobe32(0x1234);
		d->addr = htobe64((uintptr_t)(rbuf + i * RQ_BUF));
		qp->rq.wrid[i] = ((uint64_t)0x5200 << 48) | ((uint64_t)qpn << 16) | i;
	}
	if (mlx5_store_qp(ctx, qpn, qp))
		abort();
	return qp;
}

static const uint8_t resp_ops[] = { MLX5_CQE_RESP_WR_IMM, MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND_IMM,
				    MLX5_CQE_RESP_SEND_INV };
static const uint8_t req_wqe_ops[] = { MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_SEND,
				       MLX5_OPCODE_SEND_IMM, MLX5_OPCODE_SEND_INVAL, MLX5_OPCODE_RDMA_READ,
				       MLX5_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_FA };
static const uint8_t syndromes[] = {
	MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
	MLX5_CQE_SYNDROME_WR_FLUSH_ERR, MLX5_CQE_SYNDROME_MW_BIND_ERR, MLX5_CQE_SYNDROME_BAD_RESP_ERR,
	MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR,
	MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
	MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
	MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, 0x00, 0x7f, 0xff /* unknown ones too */
};

static void random_cqe(uint8_t *entry, unsigned sz, uint32_t qpn, unsigned owner)
{
	struct mlx5_cqe64 *c = (void *)(entry + sz - 64);
	/* Hardware writes every byte; the random ones stand for fields the decoders ignore. */
	for (unsigned i = 0; i < sz; i += 8) {
		uint64_t v = rnd();
		memcpy(entry + i, &v, 8);
	}
	unsigned kind = below(10);
	uint8_t op;
	uint8_t fmt = 0;
	c->srqn_uidx = 0; /* no SRQ */
	c->wqe_counter = htobe16((uint16_t)rnd());
	if (kind < 3) {
		op = MLX5_CQE_REQ;
		uint8_t wop = req_wqe_ops[below(sizeof(req_wqe_ops))];
		c->sop_drop_qpn = htobe32(((uint32_t)wop << 24) | qpn);
	} else if (kind < 7) {
		op = resp_ops[below(sizeof(resp_ops))];
		c->app = 0; /* not tag matching */
		c->sop_drop_qpn = htobe32(((uint32_t)below(256) << 24) | qpn);
		unsigned s = below(4);
		if (s == 1) {
			fmt = 1; /* scatter 32 */
			c->byte_cnt = htobe32(below(33));
		} else if (s == 2 && sz == 128) {
			fmt = 2; /* scatter 64: the first half of a 128-byte CQE */
			c->byte_cnt = htobe32(below(65));
		} else {
			c->byte_cnt = htobe32((uint32_t)rnd());
		}
	} else {
		op = kind < 9 ? MLX5_CQE_REQ_ERR : MLX5_CQE_RESP_ERR;
		struct mlx5_err_cqe *e = (void *)c;
		e->syndrome = syndromes[below(sizeof(syndromes))];
		c->sop_drop_qpn = htobe32(((uint32_t)below(256) << 24) | qpn);
	}
	c->op_own = (uint8_t)(op << 4 | fmt << 2 | (below(2) << 1) | (owner & 1));
}

static unsigned cqes_done[2];

/* Up to ne completions through the extended poller, read into ibv_wc
 * fields (src_qp and the other fields not asked for stay 0) and ts. */
static int poll_ex(struct mlx5_cq *cq, int ne, struct ibv_wc *wc, uint64_t *ts)
{
	struct ibv_cq_ex *cx = &cq->verbs_cq.cq_ex;
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	int n = 0;
	if (ibv_start_poll(cx, &attr))
		return 0;
	for (;;) {
		struct ibv_wc *w = &wc[n];
		memset(w, 0, sizeof(*w));
		w->wr_id = cx->wr_id;
		w->status = cx->status;
		w->opcode = ibv_wc_read_opcode(cx);
		w->vendor_err = ibv_wc_read_vendor_err(cx);
		w->byte_len = ibv_wc_read_byte_len(cx);
		w->imm_data = ibv_wc_read_imm_data(cx);
		w->qp_num = ibv_wc_read_qp_num(cx);
		w->wc_flags = ibv_wc_read_wc_flags(cx);
		ts[n] = ibv_wc_read_completion_ts(cx);
		n++;
		if (n == ne || ibv_next_poll(cx))
			break;
	}
	ibv_end_poll(cx);
	return n;
}

static void run_cq(unsigned cqes, unsigned sz, uint32_t cqn_base)
{
	unsigned done = 0;
	for (unsigned q = 0; done < cqes; q++) {
		unsigned cnt = 4u << below(6); /* 4..128 entries */
		struct cq_case c;
		c.cq = zalloc(sizeof(*c.cq));
		c.rbuf = zalloc(3 * RQ_CNT * RQ_BUF);
		uint32_t cqn = cqn_base + q;
		c.cq->cqn = cqn;
		c.cq->cqe_sz = sz;
		c.cq->verbs_cq.cq.cqe = cnt - 1;
		c.cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
		c.cq->buf_a.buf = zalloc(cnt * sz);
		c.cq->active_buf = &c.cq->buf_a;
		c.cq->dbrec = zalloc(64);
		c.cq->cons_index = 0;
		/* The extended poller's entries, as ibv_create_cq_ex installs them. */
		struct ibv_cq_init_attr_ex cq_attr = {
			.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
				    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		};
		if (mlx5_cq_fill_pfns(c.cq, &cq_attr, ctx))
			abort();
		/* Fresh CQ: every entry invalid, owner 1 (as libmlx5's init does). */
		for (unsigned i = 0; i < cnt; i++)
			((uint8_t *)c.cq->buf_a.buf)[i * sz + sz - 1] = MLX5_CQE_INVALID << 4 | 1;
		uint32_t qpns[3];
		for (int i = 0; i < 3; i++) {
			qpns[i] = (uint32_t)(0x1000 + q * 4 + i + (sz == 128 ? 0x80000 : 0)) & 0xffffff;
			c.qps[i] = make_rq_qp(qpns[i], c.rbuf + i * RQ_CNT * RQ_BUF);
		}
		printf("C %u %u %u\n", cqn, cnt, sz);
		unsigned rounds = 6 + below(10);
		unsigned produced = 0;
		for (unsigned r = 0; r < rounds && done < cqes; r++) {
			unsigned k = below(cnt + 1);
			for (unsigned i = 0; i < k; i++, produced++) {
				unsigned idx = produced & (cnt - 1);
				uint8_t *entry = (uint8_t *)c.cq->buf_a.buf + idx * sz;
				random_cqe(entry, sz, qpns[below(3)], (produced / cnt) & 1);
				printf("E %u ", idx);
				hex(entry, sz);
				putchar('\n');
			}
			for (;;) {
				struct ibv_wc wc[16];
				int ne = 1 + (int)below(16);
				memset(wc, 0x5a, sizeof(wc));
				memset(c.rbuf, 0, 3 * RQ_CNT * RQ_BUF);
				uint64_t ts[16];
				/* Half the calls go through the extended path (ibv_start_poll and its readers). */
				int ex = (int)below(2);
				int n = ex ? poll_ex(c.cq, ne, wc, ts) : mlx5_poll_cq(&c.cq->verbs_cq.cq, ne, wc);
				printf("O %d %d %u\n", ne, n, be32toh(c.cq->dbrec[MLX5_CQ_SET_CI]));
				for (int i = 0; i < n; i++) {
					struct ibv_wc *w = &wc[i];
					printf("%c %llu %d %d %u %u %u %u %u %u %u %u %u %u ", ex ? 'x' : 'w', (unsigned long long)w->wr_id,
					       w->status, w->opcode, w->vendor_err, w->byte_len, w->imm_data, w->qp_num,
					       w->src_qp, w->wc_flags, w->pkey_index, w->slid, w->sl, w->dlid_path_bits);
					/* A receive's scattered bytes, as the provider copied them to the buffer. */
					uint16_t tag = (uint16_t)(w->wr_id >> 48);
					/* A later receive of this call into the same buffer overwrote it: '~'. */
					int overwritten = 0;
					for (int j = i + 1; j < n; j++)
						overwritten |= wc[j].wr_id == w->wr_id && wc[j].status == IBV_WC_SUCCESS;
					if (overwritten && tag == 0x5200) {
						putchar('~');
					} else if (tag == 0x5200 && w->status == IBV_WC_SUCCESS && w->byte_len <= 64) {
						uint32_t qpn = (uint32_t)(w->wr_id >> 16) & 0xffffff;
						unsigned slot = (unsigned)(w->wr_id & 0xffff);
						int qi = qpn == qpns[0] ? 0 : qpn == qpns[1] ? 1 : 2;
						hex(c.rbuf + (qi * RQ_CNT + slot) * RQ_BUF, w->byte_len);
					} else {
						putchar('-');
					}
					if (ex)
						printf(" %llu", (unsigned long long)ts[i]);
					putchar('\n');
				}
				if (n < ne)
					break;
			}
			if (r == 0) {
				/* The CQ's view after the first round (before any event:
				 * mlx5dv_cq carries no arm sequence number, a view starts
				 * at 0): what mlx5dv_init_obj reports, as offsets into the
				 * CQ's buffer, its doorbell records and the UAR page, and
				 * libmlx5's consumer index; our side polls through a ring
				 * made from it from here on. */
				struct mlx5dv_cq dc;
				struct mlx5dv_obj o;
				memset(&dc, 0, sizeof(dc));
				memset(&o, 0, sizeof(o));
				o.cq.in = &c.cq->verbs_cq.cq;
				o.cq.out = &dc;
				int rc = mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ);
				printf("J %d %ld %u %u %ld %ld %u %u\n", rc, (long)((uint8_t *)dc.buf - (uint8_t *)c.cq->buf_a.buf),
				       dc.cqe_cnt, dc.cqe_size, (long)((uint8_t *)dc.dbrec - (uint8_t *)c.cq->dbrec),
				       (long)((uint8_t *)dc.cq_uar - cq_uar), dc.cqn, c.cq->cons_index);
				views++;
			}
			/* Now and then a completion event (arm_sn++) and an arm. */
			if (below(3) == 0) {
				mlx5_cq_event(&c.cq->verbs_cq.cq);
				puts("V");
			}
			if (below(2) == 0) {
				int solicited = (int)below(2);
				memset(cq_uar, 0, 4096);
				mlx5_arm_cq(&c.cq->verbs_cq.cq, solicited);
				printf("A %d %u ", solicited, be32toh(c.cq->dbrec[MLX5_CQ_ARM_DB]));
				hex(cq_uar + MLX5_CQ_DOORBELL, 8);
				putchar('\n');
			}
			done += k;
			cqes_done[sz == 128] += k;
		}
	}
}

/* ---- CQE compression ---------------------------------------------------- */

/* libmlx5 does not expand compressed CQEs (a direct user does), so there is
 * no provider code to drive: this is an encoder written from the documented
 * layout instead, independent of rrddmma's decoder. The facts it uses, from
 * the mlx5 device definitions (Linux include/linux/mlx5/device.h):
 *   - struct mlx5_mini_cqe8: 4 bytes (rx_hash_result; or checksum, stridx),
 *     then byte_cnt; 8 of them (MLX5_MINI_CQE_ARRAY_SIZE) fill one entry;
 *   - MLX5_COMPRESSED (3) in the format bits of op_own marks a title CQE,
 *     whose byte_cnt is the number of CQEs of the session;
 *   - struct mlx5_cqe64 names bytes 12-15 rss_hash_result and 20-21
 *     check_sum (rdma-core's mlx5dv.h keeps them reserved);
 *   - the title is the session's first entry, the first mini-CQE array the
 *     entry after it, array k >= 1 the entry of CQE 8k; the device writes no
 *     other entry of the session (the mlx5 Ethernet drivers' decompression);
 *   - CQE i of a receive session is the title with byte_cnt, the format's
 *     field and the WQE counter (title's + i; the stride index for
 *     CSUM_STRIDX) from mini-CQE i;
 *   - in a requester session (title opcode MLX5_CQE_REQ) every mini-CQE is
 *     s_wqe_info, whatever the format: the WQE counter (be16) and the WQE
 *     opcode of the WQE it completes, then byte_cnt; CQE i is the title
 *     with byte_cnt, wqe_counter and the opcode byte of sop_drop_qpn
 *     (byte 56) from mini-CQE i (MLNX_OFED 4.x's libmlx5 expanded them so).
 *     With unsignalled WQEs between them the counters are not consecutive.
 *
 *   K cqn cqe_cnt cqe_sz format     a compressing CQ, entries op_own 0xf1
 *   S idx hex                        an entry the device writes (whole entry)
 *   X n i hex                        the next CQE the consumer must get:
 *                                    CQE i of a session of n (n 0: a CQE
 *                                    written as it is)
 *   Y                                the consumer takes everything now */
struct mini_cqe8 {
	union {
		__be32 rx_hash_result;
		struct {
			__be16 checksum;
			__be16 stridx;
		};
		struct {
			__be16 wqe_counter;
			uint8_t s_wqe_opcode;
			uint8_t reserved;
		} s_wqe_info;
	};
	__be32 byte_cnt;
};
#define MINI_CQE_ARRAY_SIZE 8
#define CQE_SOP 56
#define CQE_FORMAT_COMPRESSED 3
#define CQE_RSS_HASH_RESULT 12
#define CQE_CHECK_SUM 20
#define CQE_RSS_HASH_TYPE 16
_Static_assert(sizeof(struct mini_cqe8) == 8, "mini-CQE is 8 bytes");
_Static_assert(offsetof(struct mlx5_cqe64, byte_cnt) == 44, "byte_cnt at 44");
_Static_assert(offsetof(struct mlx5_cqe64, wqe_counter) == 60, "wqe_counter at 60");
_Static_assert(offsetof(struct mlx5_cqe64, op_own) == 63, "op_own at 63");
_Static_assert(offsetof(struct mlx5_cqe64, sop_drop_qpn) == CQE_SOP, "sop_drop_qpn at 56");

static unsigned zip_done;

static void print_entry(uint8_t *buf, unsigned cnt, unsigned sz, uint32_t pos)
{
	unsigned idx = pos & (cnt - 1);
	printf("S %u ", idx);
	hex(buf + idx * sz, sz);
	putchar('\n');
}

static void run_zip(unsigned cqes, uint32_t cqn_base)
{
	static const uint8_t fmts[] = { MLX5DV_CQE_RES_FORMAT_HASH, MLX5DV_CQE_RES_FORMAT_CSUM,
					MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX };
	unsigned done = 0;
	for (unsigned q = 0; done < cqes; q++) {
		unsigned cnt = 16u << below(4); /* 16..128 entries */
		unsigned sz = below(4) == 0 ? 128 : 64;
		uint8_t fmt = fmts[q % 3];
		uint8_t *buf = zalloc(cnt * sz);
		for (unsigned i = 0; i < cnt; i++)
			buf[i * sz + sz - 1] = MLX5_CQE_INVALID << 4 | 1;
		printf("K %u %u %u %u\n", cqn_base + q, cnt, sz, fmt);
		uint32_t pos = 0;
		unsigned rounds = (10 + below(20) + scale - 1) / scale;
		for (unsigned r = 0; r < rounds && done < cqes; r++) {
			unsigned room = below(cnt + 1), k = 0;
			while (k < room) {
				unsigned left = room - k;
				/* 1, or a session of 2..64 (orig[] below holds 64). */
				unsigned n = left < 2 || below(4) == 0 ? 1 : 2 + below(left - 1 < 63 ? left - 1 : 63);
				uint8_t *e = buf + (pos & (cnt - 1)) * sz;
				struct mlx5_cqe64 *t = (void *)(e + sz - 64);
				/* Every byte random, then the fields the CQEs share. */
				for (unsigned i = 0; i < sz; i += 8) {
					uint64_t v = rnd();
					memcpy(e + i, &v, 8);
				}
				/* One in four a requester CQE or session (a CQ shared by
				 * send and receive queues). */
				int req = below(4) == 0;
				uint8_t op = req ? MLX5_CQE_REQ : resp_ops[below(sizeof(resp_ops))];
				uint8_t se = (uint8_t)below(2);
				if (n == 1) {
					t->op_own = (uint8_t)(op << 4 | se << 1 | ((pos / cnt) & 1));
					print_entry(buf, cnt, sz, pos);
					printf("X 0 0 ");
					hex(t, 64);
					putchar('\n');
					pos++;
					k++;
					continue;
				}
				struct mlx5_cqe64 title = *t;
				uint16_t counter = (uint16_t)rnd();
				title.wqe_counter = htobe16(counter);
				struct mlx5_cqe64 orig[64];
				struct mini_cqe8 minis[64 + MINI_CQE_ARRAY_SIZE];
				for (unsigned i = 0; i < 64 + MINI_CQE_ARRAY_SIZE; i++) {
					uint64_t v = rnd();
					memcpy(&minis[i], &v, 8); /* unused slots hold anything */
				}
				if (req) {
					/* The signalled WQEs: from the title's counter on,
					 * 1-4 apart (the WQEs between unsignalled; one in
					 * four sessions is fully signalled, 1 apart). */
					unsigned spread = below(4) == 0 ? 1 : 4;
					uint16_t w = counter;
					for (unsigned i = 0; i < n; i++) {
						minis[i].s_wqe_info.wqe_counter = htobe16(w);
						minis[i].s_wqe_info.s_wqe_opcode = req_wqe_ops[below(sizeof(req_wqe_ops))];
						w = (uint16_t)(w + 1 + below(spread));
					}
				}
				for (unsigned i = 0; i < n; i++) {
					struct mlx5_cqe64 *o = &orig[i];
					struct mini_cqe8 *m = &minis[i];
					*o = title;
					o->byte_cnt = m->byte_cnt;
					if (req) {
						o->wqe_counter = m->s_wqe_info.wqe_counter;
						((uint8_t *)o)[CQE_SOP] = m->s_wqe_info.s_wqe_opcode;
					} else if (fmt == MLX5DV_CQE_RES_FORMAT_HASH) {
						memcpy((uint8_t *)o + CQE_RSS_HASH_RESULT, &m->rx_hash_result, 4);
						o->wqe_counter = htobe16((uint16_t)(counter + i));
					} else if (fmt == MLX5DV_CQE_RES_FORMAT_CSUM) {
						memcpy((uint8_t *)o + CQE_CHECK_SUM, &m->checksum, 2);
						o->wqe_counter = htobe16((uint16_t)(counter + i));
					} else {
						memcpy((uint8_t *)o + CQE_CHECK_SUM, &m->checksum, 2);
						o->wqe_counter = m->stridx;
					}
					/* Past the first CQE the session carries no RSS hash
					 * unless the format is HASH: result and type 0, as
					 * the kernel's mlx5e reports them. */
					if (!req && i > 0 && fmt != MLX5DV_CQE_RES_FORMAT_HASH)
						memset((uint8_t *)o + CQE_RSS_HASH_RESULT, 0,
						       CQE_RSS_HASH_TYPE + 1 - CQE_RSS_HASH_RESULT);
					o->op_own = (uint8_t)(op << 4 | se << 1 | (((pos + i) / cnt) & 1));
				}
				/* The title: the shared fields, the count, format 3, the owner of its entry. */
				title.byte_cnt = htobe32(n);
				title.op_own = (uint8_t)(op << 4 | CQE_FORMAT_COMPRESSED << 2 | se << 1 | ((pos / cnt) & 1));
				*t = title;
				print_entry(buf, cnt, sz, pos);
				/* The arrays: after the title, then at the entry of every eighth CQE. */
				for (unsigned a = 0; a * MINI_CQE_ARRAY_SIZE < n; a++) {
					uint32_t at = pos + (a == 0 ? 1 : a * MINI_CQE_ARRAY_SIZE);
					uint8_t *ae = buf + (at & (cnt - 1)) * sz;
					memcpy(ae + sz - 64, &minis[a * MINI_CQE_ARRAY_SIZE], 64);
					print_entry(buf, cnt, sz, at);
				}
				for (unsigned i = 0; i < n; i++) {
					printf("X %u %u ", n, i);
					hex(&orig[i], 64);
					putchar('\n');
				}
				pos += n;
				k += n;
			}
			puts("Y");
			done += room;
		}
		zip_done = done;
	}
}

/* Masked compare-and-swap: libmlx5 has no path for it, so the reference is
 * built here from the provider's own definitions, independently of
 * rrddmma's writer: mlx5dv_set_ctrl_seg, struct mlx5_wqe_raddr_seg, the
 * provider's struct mlx5_wqe_masked_atomic_seg (wqe.h) and
 * mlx5dv_set_data_seg. The opmod (0x09: 8-byte arguments) is the one value
 * taken as rrddmma states it.
 *   M qpn fm_ce_se raddr rkey swap compare swap_mask compare_mask lkey laddr wqe_hex
 * (WQE i of one queue of 2 basic blocks: WQE index 2 * i). */
static void run_masked(unsigned n)
{
	uint32_t qpn = (uint32_t)rnd() & 0xffffff;
	for (unsigned i = 0; i < n; i++) {
		uint8_t wqe[80];
		memset(wqe, 0, sizeof(wqe));
		uint8_t fm = (uint8_t)(rnd() & (MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED | MLX5_WQE_CTRL_FENCE));
		uint64_t raddr = rnd() & ~7ULL, swap = rnd(), cmp = rnd(), smask = rnd(), cmask = rnd(), laddr = rnd();
		uint32_t rkey = (uint32_t)rnd(), lkey = (uint32_t)rnd();
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)wqe, (uint16_t)(2 * i), MLX5_OPCODE_ATOMIC_MASKED_CS, 0x09,
				    qpn, fm, sizeof(wqe) / 16, 0, 0);
		struct mlx5_wqe_raddr_seg *r = (void *)(wqe + 16);
		r->raddr = htobe64(raddr);
		r->rkey = htobe32(rkey);
		r->reserved = 0;
		struct mlx5_wqe_masked_atomic_seg *m = (void *)(wqe + 32);
		m->swap_add = htobe64(swap);
		m->compare = htobe64(cmp);
		m->swap_add_mask = htobe64(smask);
		m->compare_mask = htobe64(cmask);
		mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(wqe + 64), 8, lkey, laddr);
		printf("M %u %u %llu %u %llu %llu %llu %llu %u %llu ", qpn, fm, (unsigned long long)raddr, rkey,
		       (unsigned long long)swap, (unsigned long long)cmp, (unsigned long long)smask,
		       (unsigned long long)cmask, lkey, (unsigned long long)laddr);
		hex(wqe, sizeof(wqe));
		putchar('\n');
	}
}

/* Masked fetch-and-add: libmlx5 and its headers have neither a path nor a
 * segment for it, so its reference is built from a public layout that is
 * independent of rrddmma's writer: UCX's src/uct/ib/mlx5/ib_mlx5.h
 * (struct uct_ib_mlx5_atomic_masked_fadd64_seg: a 64-bit addend, then the
 * 64-bit field-boundary mask, both big endian; UCT_IB_MLX5_OPMOD_EXT_ATOMIC:
 * the extended-atomic opmod is 8 | (log2(argument bytes) - 2), so 0x09 for
 * 8 bytes). The control, remote-address and data segments are the
 * provider's (mlx5dv.h). One line per WQE:
 *   F qpn fm raddr rkey add boundary lkey laddr wqe_hex   (64 bytes, 4 DS) */
struct masked_fa64_ref {
	__be64 add;
	__be64 field_boundary;
};

static void run_masked_fa(unsigned n)
{
	uint32_t qpn = (uint32_t)rnd() & 0xffffff;
	for (unsigned i = 0; i < n; i++) {
		uint8_t wqe[64];
		memset(wqe, 0, sizeof(wqe));
		uint8_t fm = (uint8_t)(rnd() & (MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED | MLX5_WQE_CTRL_FENCE));
		uint64_t raddr = rnd() & ~7ULL, add = rnd(), boundary = rnd(), laddr = rnd();
		uint32_t rkey = (uint32_t)rnd(), lkey = (uint32_t)rnd();
		/* One WQE per basic block of a one-block ring: index i. */
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)wqe, (uint16_t)i, MLX5_OPCODE_ATOMIC_MASKED_FA,
				    8 | (3 - 2), qpn, fm, sizeof(wqe) / 16, 0, 0);
		struct mlx5_wqe_raddr_seg *r = (void *)(wqe + 16);
		r->raddr = htobe64(raddr);
		r->rkey = htobe32(rkey);
		r->reserved = 0;
		struct masked_fa64_ref *m = (void *)(wqe + 32);
		m->add = htobe64(add);
		m->field_boundary = htobe64(boundary);
		mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(wqe + 48), 8, lkey, laddr);
		printf("F %u %u %llu %u %llu %llu %u %llu ", qpn, fm, (unsigned long long)raddr, rkey,
		       (unsigned long long)add, (unsigned long long)boundary, lkey, (unsigned long long)laddr);
		hex(wqe, sizeof(wqe));
		putchar('\n');
	}
}

/* ---- typed DC builders: masked and extended atomics ----------------------
 *
 * Masked atomics of 8 bytes and the extended (16- and 32-byte) masked
 * atomics have no libmlx5 path (no ibv_wr_* builder, no mlx5_post_send
 * opcode), on RC or on a DCI, so each reference WQE is built here from
 * public definitions, independently of rrddmma's writer:
 * - the control segment: mlx5dv_set_ctrl_seg, and for a DCI the stream in
 *   the provider's ctrl field dci_stream_channel_id (htobe16), as
 *   mlx5_send_wr_set_dc_addr_stream stores it;
 * - the DC address: struct mlx5_wqe_datagram_seg as
 *   mlx5_send_wr_set_dc_addr fills it (the AH's vector, dqp_dct ORed with
 *   the DCT number and MLX5_EXTENDED_UD_AV, dc_key big endian);
 * - the remote address and data segments: mlx5dv.h's;
 * - the operands: 8-byte masked CAS in wqe.h's struct
 *   mlx5_wqe_masked_atomic_seg, 8-byte masked FA as UCX's documented
 *   {add, field_boundary} (run_masked_fa); 16 and 32 bytes in the same
 *   order (swap, compare, swap mask, compare mask / add, field boundary),
 *   each operand as wide as the word and given as its big-endian bytes,
 *   as MLNX_OFED 4.x's verbs_exp.h describes the extended masked atomics
 *   (log_arg_sz, operands of 2^log_arg_sz bytes); the data segment reads
 *   back a word of that size;
 * - the opmod: 8 | (log2(bytes) - 2), UCX's UCT_IB_MLX5_OPMOD_EXT_ATOMIC.
 * Two queues of 8 basic blocks, one RC and one DCI; each WQE completes
 * before the next (its index: the queue's producer index).
 *   Z dc kind qpn pi fm raddr rkey lkey laddr dctn dc_key stream av_hex ops_hex wqe_hex
 * kind: 0 masked CAS 8, 1 masked FA 8, 2 CAS 16, 3 FA 16, 4 CAS 32, 5 FA 32. */
static void run_dc_typed(unsigned n)
{
	uint32_t qpn[2] = { (uint32_t)rnd() & 0xffffff, (uint32_t)rnd() & 0xffffff };
	unsigned pi[2] = { 0, 0 };
	for (unsigned i = 0; i < n; i++) {
		unsigned dc = i % 2, kind = (i / 2) % 6;
		unsigned cas = kind % 2 == 0, sz = 8u << (kind / 2);
		unsigned log = kind / 2 + 3;
		uint8_t wqe[256], ops[128], av[48];
		memset(wqe, 0, sizeof(wqe));
		unsigned nops = cas ? 4 : 2;
		for (unsigned b = 0; b < nops * sz; b += 8) {
			uint64_t v = rnd();
			memcpy(ops + b, &v, 8);
		}
		uint8_t fm = (uint8_t)(rnd() & (MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED | MLX5_WQE_CTRL_FENCE));
		uint64_t raddr = rnd() & ~(uint64_t)(sz - 1), laddr = rnd(), key = rnd();
		uint32_t rkey = (uint32_t)rnd(), lkey = (uint32_t)rnd(), dctn = (uint32_t)rnd() & 0xffffff;
		uint16_t stream = dc ? (uint16_t)(rnd() & DCI_STREAM_MASK) : 0;
		struct mlx5_wqe_av *a = (void *)av;
		memset(a, 0, sizeof(*a));
		a->stat_rate_sl = (uint8_t)rnd();
		a->fl_mlid = (uint8_t)rnd();
		a->rlid = htobe16((uint16_t)rnd());
		uint64_t mac = rnd(), g[2] = { rnd(), rnd() };
		memcpy(a->rmac, &mac, 6);
		a->tclass = (uint8_t)rnd();
		a->hop_limit = (uint8_t)rnd();
		a->grh_gid_fl = htobe32((uint32_t)rnd());
		memcpy(a->rgid, g, 16);
		unsigned off = 16;
		if (dc) {
			struct mlx5_wqe_datagram_seg *d = (void *)(wqe + off);
			memcpy(&d->av, a, sizeof(d->av));
			d->av.dqp_dct |= htobe32(dctn | MLX5_EXTENDED_UD_AV);
			d->av.key.dc_key = htobe64(key);
			off += sizeof(*d);
		}
		struct mlx5_wqe_raddr_seg *r = (void *)(wqe + off);
		r->raddr = htobe64(raddr);
		r->rkey = htobe32(rkey);
		r->reserved = 0;
		off += 16;
		if (sz == 8 && cas) {
			struct mlx5_wqe_masked_atomic_seg *m = (void *)(wqe + off);
			uint64_t v[4];
			memcpy(v, ops, 32);
			/* ops holds the operands as big-endian bytes: the values are be64toh of them. */
			m->swap_add = htobe64(be64toh(v[0]));
			m->compare = htobe64(be64toh(v[1]));
			m->swap_add_mask = htobe64(be64toh(v[2]));
			m->compare_mask = htobe64(be64toh(v[3]));
		} else if (sz == 8) {
			struct masked_fa64_ref *m = (void *)(wqe + off);
			uint64_t v[2];
			memcpy(v, ops, 16);
			m->add = htobe64(be64toh(v[0]));
			m->field_boundary = htobe64(be64toh(v[1]));
		} else {
			memcpy(wqe + off, ops, nops * sz);
		}
		off += nops * sz;
		mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(wqe + off), sz, lkey, laddr);
		off += 16;
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)wqe, (uint16_t)pi[dc],
				    cas ? MLX5_OPCODE_ATOMIC_MASKED_CS : MLX5_OPCODE_ATOMIC_MASKED_FA,
				    (uint8_t)(8 | (log - 2)), qpn[dc], fm, (uint8_t)(off / 16), 0, 0);
		((struct mlx5_wqe_ctrl_seg *)wqe)->dci_stream_channel_id = htobe16(stream);
		printf("Z %u %u %u %u %u %llu %u %u %llu %u %llu %u ", dc, kind, qpn[dc], pi[dc], fm,
		       (unsigned long long)raddr, rkey, lkey, (unsigned long long)laddr, dctn, (unsigned long long)key,
		       stream);
		hex(av, 48);
		putchar(' ');
		hex(ops, nops * sz);
		putchar(' ');
		hex(wqe, off);
		putchar('\n');
		pi[dc] += (off + 63) / 64;
	}
}
/* ---- end of typed DC builders ------------------------------------------- */

#ifdef HARNESS_LIB
#include "harness.h"
/* ---- library build (-DHARNESS_LIB) ---------------------------------------
 *
 * The same provider objects, built as a shared library that the Rust half
 * loads (dlopen, RTLD_LOCAL; libmlx5 and libibverbs linked in, none of their
 * symbols exported): it makes a send queue exactly as run_send does from a
 * Q line, with libmlx5's ibv_wr_* / mlx5dv_wr_* entries installed
 * (mlx5_qp_fill_wr_pfns), and rrddmma's WrBatch and DciBatch drive those
 * entries; the results are compared with the P and W lines of the
 * executable's mlx5_post_send (RC, UD) or ibv_wr_* (DC) run. */

/* The context and protection domain the provider objects hang off, for the
 * sections in files of their own (harness.h). */
H_API struct mlx5_context *h_context(void)
{
	if (!ctx)
		make_context();
	return ctx;
}
H_API struct ibv_pd *h_pd(void)
{
	h_context();
	return &pd;
}

/* kind: 0 RC, 1 UD, 2 DCI, 3 DCI with streams (the Q line's last field). */
H_API struct mlx5_qp *h_make_sq(int kind, uint32_t qpn, unsigned wqe_cnt, int max_gs, int max_inline,
				unsigned bf_size, unsigned uuarn, int sig_all, uint64_t seed)
{
	if (!ctx)
		make_context();
	transport = kind == 0 ? IBV_QPT_RC : kind == 1 ? IBV_QPT_UD : IBV_QPT_DRIVER;
	struct sq_case c = make_sq(qpn, wqe_cnt, max_gs, max_inline, bf_size, uuarn, sig_all, seed);
	if (transport != IBV_QPT_DRIVER) {
		struct ibv_qp_init_attr_ex attr = { .qp_type = transport };
		attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		if (transport == IBV_QPT_RC)
			attr.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
					       IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND_WITH_INV |
					       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		if (mlx5_qp_fill_wr_pfns(c.qp, &attr, NULL))
			abort();
	}
	return c.qp;
}

H_API struct ibv_qp_ex *h_qp_ex(struct mlx5_qp *qp) { return &qp->verbs_qp.qp_ex; }
H_API struct mlx5dv_qp_ex *h_dv_qp(struct mlx5_qp *qp) { return &qp->dv_qp; }
H_API uint8_t *h_sq_buf(struct mlx5_qp *qp) { return qp->sq_start; }
H_API uint8_t *h_bf_page(struct mlx5_qp *qp) { return qp->bf->reg; }
H_API void h_set_prefer_bf(int prefer) { ctx->prefer_bf = prefer; }

/* Before a list: the BlueFlame page filled with the sentinel, as run_send does. */
H_API void h_before(struct mlx5_qp *qp) { memset(qp->bf->reg, SENTINEL, BF_PAGE); }

/* After a list: producer index, doorbell record and BlueFlame offset; then
 * everything posted completes (tail = head), as in run_send. */
H_API void h_after(struct mlx5_qp *qp, uint32_t out[3])
{
	out[0] = qp->sq.cur_post;
	out[1] = be32toh(qp->db[MLX5_SND_DBR]);
	out[2] = qp->bf->offset;
	qp->sq.tail = qp->sq.head;
}

/* An address handle holding `av` (48 bytes, as a U or D line prints it). */
static struct mlx5_ah h_ahs[MAX_LIST];
H_API struct ibv_ah *h_ah(unsigned slot, const uint8_t *av)
{
	struct mlx5_ah *ah = &h_ahs[slot % MAX_LIST];
	memcpy(&ah->av, av, sizeof(ah->av));
	ah->ibv_ah.context = &ctx->ibv_ctx.context;
	ah->ibv_ah.pd = &pd;
	return &ah->ibv_ah;
}
#else
int main(int argc, char **argv)
{
	unsigned lists = argc > 1 ? (unsigned)atoi(argv[1]) : 10000;
	unsigned cqes = argc > 2 ? (unsigned)atoi(argv[2]) : 10000;
	rng_state = argc > 3 ? strtoull(argv[3], NULL, 0) : 0x6d6c7835;
	scale = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
	make_context();
	run_send(lists, 0x100);
	transport = IBV_QPT_UD;
	run_send(lists, 0x200000);
	transport = IBV_QPT_DRIVER;
	run_send(lists, 0x400000);
	/* DCI streams: a smaller run. */
	dci_streams = 1;
	run_send(lists / 5, 0x600000);
	dci_streams = 0;
	transport = IBV_QPT_RC;
	run_masked(2000 / scale);
	run_masked_fa(2000 / scale);
	run_cq(cqes, 64, 0x10);
	run_cq(cqes, 128, 0x8000);
	run_zip(cqes, 0x9000);
	run_dc_typed(6000 / scale);
	printf("T send_lists=%u cqe64=%u cqe128=%u views=%u zip=%u\n", send_lists, cqes_done[0], cqes_done[1], views,
	       zip_done);
	return 0;
}
#endif
