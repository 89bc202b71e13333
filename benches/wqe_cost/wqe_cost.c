/*
 * The C side of `cargo xtask bench-wqe`: `wqe_cost_c ROW N` builds N WQEs of
 * one kind into a send queue ring with the mlx5dv.h helpers, following
 * libmlx5's sequence (mlx5_post_send / the ibv_wr_* entries: overflow check,
 * segments, control segment, the ring's per-WQE record, doorbell record,
 * BlueFlame decision, plain 8-byte doorbell here, offset toggle).
 *
 * The work around it is the Rust side's (examples/wqe_cost.rs): a CQ of
 * plain memory where this program writes the CQE the device would, for the
 * last WQE, whenever half the ring is outstanding; it is polled as
 * libmlx5's mlx5_poll_one polls a requester CQE (owner bit, opcode, QP
 * number, WQE counter, the work completion's fields, consumer record) and
 * the ring is freed up to the end of the WQE it names.
 *
 * The zip row expands compressed sessions as the Linux kernel's mlx5e driver
 * does (libmlx5 does not expand them) and reads each CQE as libmlx5 reads a
 * receive CQE.
 *
 * `wqe_cost_c --rows` lists the rows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/mlx5dv.h>

#define BBS 64
#define CQES 4
#define BATCH 32
#define QPN 0x1234

#define barrier() asm volatile("" ::: "memory")
/* libmlx5's x86-64 udma_to_device_barrier / mmio_flush_writes. */
#define wc_fence() asm volatile("sfence" ::: "memory")

static const char *rows[] = { "write",	      "write_inline32", "send",	    "read",    "cas",  "fetch_add",
			      "masked_cas8", "masked_cas16",   "dc_write", "batch32", "umr_klm4", "tag_add", "eth42",	"tso", "mprq", "poll", "zip", NULL };

static uint8_t ring[BBS * 64] __attribute__((aligned(64)));
static __be32 sq_dbrec[2];
static uint64_t reg[8] __attribute__((aligned(64)));
static struct mlx5_cqe64 cqes[CQES] __attribute__((aligned(64)));
static __be32 cq_dbrec[2];

/* A store the device reads (a doorbell record): libmlx5 stores through a
 * pointer into memory the device shares, which the compiler must keep;
 * these records are statics nothing reads back, so without volatile gcc
 * would drop the stores. */
#define DEVICE_STORE(lv, v) (*(volatile __be32 *)&(lv) = (v))

/* The state libmlx5 keeps for this: producer index, the index freed up to,
 * each WQE's end (wqe_head), the BlueFlame register with its toggling
 * offset (size 0: plain doorbell). */
struct sq {
	uint8_t *start, *qend;
	uint32_t cur_post, tail, wqe_cnt, qpn;
	uint32_t bf_offset, bf_size;
	int prefer_bf;
	/* the fence the next WQE takes (after a UMR: libmlx5's fm_cache) */
	uint8_t fm_cache;
	uint32_t wqe_end[BBS];
};

struct cq {
	struct mlx5_cqe64 *buf;
	uint32_t ci, cnt;
	__be32 *dbrec;
};

/* What ibv_wc carries for a requester completion. */
struct wc {
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, qp_num, wc_flags;
};

static struct sq q = { .start = ring, .qend = ring + sizeof(ring), .wqe_cnt = BBS, .qpn = QPN, .prefer_bf = 1 };
static struct cq c = { .buf = cqes, .cnt = CQES, .dbrec = cq_dbrec };
static uint32_t produced;

/* mlx5_wq_overflow, then the WQE's first block. */
static inline uint8_t *begin(struct sq *s, unsigned bbs)
{
	if (__builtin_expect(s->cur_post - s->tail + bbs > s->wqe_cnt, 0))
		abort();
	return s->start + ((s->cur_post & (s->wqe_cnt - 1)) << 6);
}

/* The segment after `p`, wrapping at the ring's end (libmlx5's
 * `if (unlikely(seg == qend)) seg = mlx5_get_send_wqe(qp, 0)`). */
static inline void *wrap(struct sq *s, void *p)
{
	return __builtin_expect((uint8_t *)p == s->qend, 0) ? s->start : p;
}

/* The control segment, the ring's record of the WQE, the producer index. */
static inline void finish(struct sq *s, uint8_t *wqe, unsigned ds, uint8_t opcode, uint8_t opmod, uint8_t fm_ce_se,
			  uint32_t imm)
{
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
	mlx5dv_set_ctrl_seg(ctrl, s->cur_post & 0xffff, opcode, opmod, s->qpn, fm_ce_se | s->fm_cache, ds, 0, imm);
	s->fm_cache = 0;
	unsigned bbs = (ds * 16 + 63) / 64;
	s->wqe_end[s->cur_post & (s->wqe_cnt - 1)] = s->cur_post + bbs;
	s->cur_post += bbs;
}

/* libmlx5's post_send_db (x86-64 barriers). */
static inline void doorbell(struct sq *s, uint8_t *ctrl, unsigned ds, int nreq, int inl)
{
	barrier();
	DEVICE_STORE(sq_dbrec[MLX5_SND_DBR], htobe32(s->cur_post & 0xffff));
	wc_fence();
	if (nreq == 1 && s->bf_size && (inl || s->prefer_bf) && ds > 1 && ds <= s->bf_size / 16) {
		for (unsigned i = 0; i < ((ds * 16 + 63) & ~63u) / 8; i++)
			((volatile uint64_t *)((uint8_t *)reg + s->bf_offset))[i] = ((uint64_t *)ctrl)[i];
	} else {
		*(volatile uint64_t *)((uint8_t *)reg + s->bf_offset) = *(uint64_t *)ctrl;
	}
	wc_fence();
	s->bf_offset ^= s->bf_size;
}

/* The device's side: a requester CQE for the WQE at `pi`. */
static inline void device_cqe(uint16_t pi)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.sop_drop_qpn = htobe32((MLX5_CQE_REQ << 24) | QPN);
	cqe.wqe_counter = htobe16(pi);
	cqe.op_own = (MLX5_CQE_REQ << 4) | !!(produced & CQES);
	*(volatile struct mlx5_cqe64 *)&cqes[produced % CQES] = cqe;
	produced++;
}

/* mlx5_poll_one for a requester CQE, and the consumer record
 * (update_cons_index) when one was taken. */
static inline int poll_one(struct cq *cq, struct wc *wc, uint32_t *freed_to)
{
	struct mlx5_cqe64 *cqe = cq->buf + (cq->ci & (cq->cnt - 1));
	uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
	if ((op_own >> 4) == MLX5_CQE_INVALID || ((op_own & 1) ^ !!(cq->ci & cq->cnt)))
		return 0;
	cq->ci++;
	barrier(); /* udma_from_device_barrier */
	uint32_t qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
	wc->wc_flags = 0;
	wc->qp_num = qpn;
	switch (op_own >> 4) {
	case MLX5_CQE_REQ: {
		if (qpn != q.qpn)
			abort(); /* mlx5_find_qp */
		uint16_t ctr = be16toh(cqe->wqe_counter);
		uint32_t idx = ctr & (q.wqe_cnt - 1);
		switch (be32toh(cqe->sop_drop_qpn) >> 24) {
		case MLX5_OPCODE_RDMA_WRITE:
			wc->opcode = 1; /* IBV_WC_RDMA_WRITE */
			break;
		case MLX5_OPCODE_RDMA_READ:
			wc->opcode = 2;
			wc->byte_len = be32toh(cqe->byte_cnt);
			break;
		case MLX5_OPCODE_ATOMIC_CS:
			wc->opcode = 3;
			wc->byte_len = 8;
			break;
		default:
			wc->opcode = 0; /* IBV_WC_SEND */
			break;
		}
		wc->wr_id = idx;
		wc->status = 0;
		*freed_to = q.wqe_end[idx];
		break;
	}
	default:
		abort();
	}
	DEVICE_STORE(cq->dbrec[0] /* MLX5_CQ_SET_CI */, htobe32(cq->ci & 0xffffff));
	return 1;
}

/* After a post: at half a ring outstanding, the device completes the last
 * WQE; its completion is polled and frees the ring. */
static inline void account(uint16_t pi)
{
	if (q.cur_post - q.tail >= BBS / 2) {
		struct wc wc;
		uint32_t to;
		device_cqe(pi);
		if (poll_one(&c, &wc, &to))
			q.tail = to;
	}
}

#define F MLX5_WQE_CTRL_CQ_UPDATE

static inline void raddr_seg(void *p, uint64_t raddr, uint32_t rkey)
{
	struct mlx5_wqe_raddr_seg *r = p;
	r->raddr = htobe64(raddr);
	r->rkey = htobe32(rkey);
	r->reserved = 0;
}

/* A WQE with a remote address and one data segment (WRITE, READ). */
static inline uint16_t rdma(uint8_t opcode, uint64_t i, uint8_t fm_ce_se, int ring_db)
{
	uint8_t *wqe = begin(&q, 1);
	uint16_t pi = q.cur_post;
	raddr_seg(wqe + 16, 0x10000 + i * 64, 0x55);
	mlx5dv_set_data_seg(wrap(&q, wqe + 32), 64, 0x66, 0x20000 + i * 64);
	finish(&q, wqe, 3, opcode, 0, fm_ce_se, 0);
	if (ring_db)
		doorbell(&q, wqe, 3, 1, 0);
	return pi;
}

__attribute__((noinline)) static uint16_t post_write(uint64_t i)
{
	return rdma(MLX5_OPCODE_RDMA_WRITE, i, F, 1);
}

__attribute__((noinline)) static uint16_t post_read(uint64_t i)
{
	return rdma(MLX5_OPCODE_RDMA_READ, i, F, 1);
}

/* set_data_inl_seg: the bytes after a 4-byte header, padded to 16. */
__attribute__((noinline)) static uint16_t post_write_inline32(uint64_t i, const uint8_t *payload)
{
	uint8_t *wqe = begin(&q, 2);
	uint16_t pi = q.cur_post;
	raddr_seg(wqe + 16, 0x10000 + i * 64, 0x55);
	struct mlx5_wqe_inl_data_seg *inl = (void *)(wqe + 32);
	uint8_t *dst = (uint8_t *)(inl + 1);
	unsigned len = 32, copy = len;
	/* the bytes up to the ring's end, then the rest from its start */
	if (__builtin_expect(dst + len > q.qend, 0)) {
		copy = q.qend - dst;
		memcpy(q.start, payload + copy, len - copy);
	}
	memcpy(dst, payload, copy);
	inl->byte_count = htobe32(len | MLX5_INLINE_SEG);
	unsigned ds = 2 + (len + 4 + 15) / 16;
	finish(&q, wqe, ds, MLX5_OPCODE_RDMA_WRITE, 0, F, 0);
	doorbell(&q, wqe, ds, 1, 1);
	return pi;
}

__attribute__((noinline)) static uint16_t post_send(uint64_t i)
{
	uint8_t *wqe = begin(&q, 1);
	uint16_t pi = q.cur_post;
	mlx5dv_set_data_seg((void *)(wqe + 16), 64, 0x66, 0x20000 + i * 64);
	finish(&q, wqe, 2, MLX5_OPCODE_SEND, 0, F, 0);
	doorbell(&q, wqe, 2, 1, 0);
	return pi;
}

/* ctrl, raddr, atomic (16 bytes), data: 4 DS. */
static inline uint16_t atomic(uint8_t opcode, uint8_t opmod, uint64_t i, uint64_t swap_add, uint64_t compare)
{
	uint8_t *wqe = begin(&q, 1);
	uint16_t pi = q.cur_post;
	raddr_seg(wqe + 16, 0x10000 + i * 64, 0x55);
	struct mlx5_wqe_atomic_seg *a = (void *)(wqe + 32);
	a->swap_add = htobe64(swap_add);
	a->compare = htobe64(compare);
	mlx5dv_set_data_seg((void *)(wqe + 48), 8, 0x66, 0x20000 + i * 8);
	finish(&q, wqe, 4, opcode, opmod, F, 0);
	doorbell(&q, wqe, 4, 1, 0);
	return pi;
}

__attribute__((noinline)) static uint16_t post_cas(uint64_t i)
{
	return atomic(MLX5_OPCODE_ATOMIC_CS, 0, i, i + 1, i);
}

__attribute__((noinline)) static uint16_t post_fetch_add(uint64_t i)
{
	return atomic(MLX5_OPCODE_ATOMIC_FA, 0, i, 1, 0);
}

/* Masked 8-byte CAS (opmod 0x09): swap, compare, swap mask, compare mask;
 * ctrl, raddr, 32 bytes of operands, data: 5 DS, two blocks. */
__attribute__((noinline)) static uint16_t post_masked_cas8(uint64_t i)
{
	uint8_t *wqe = begin(&q, 2);
	uint16_t pi = q.cur_post;
	raddr_seg(wqe + 16, 0x10000 + i * 64, 0x55);
	__be64 *ops = (void *)(wqe + 32);
	ops[0] = htobe64(i + 1);
	ops[1] = htobe64(i);
	ops[2] = htobe64(0xff);
	ops[3] = htobe64(0xff);
	mlx5dv_set_data_seg(wrap(&q, wqe + 64), 8, 0x66, 0x20000 + i * 8);
	finish(&q, wqe, 5, MLX5_OPCODE_ATOMIC_MASKED_CS, 0x09, F, 0);
	doorbell(&q, wqe, 5, 1, 0);
	return pi;
}

/* Masked 16-byte CAS (opmod 0x0a): four 16-byte operands; 7 DS. */
__attribute__((noinline)) static uint16_t post_masked_cas16(uint64_t i, const uint8_t ops[4][16])
{
	uint8_t *wqe = begin(&q, 2);
	uint16_t pi = q.cur_post;
	raddr_seg(wqe + 16, 0x10000 + i * 64, 0x55);
	/* swap, compare, swap mask, compare mask (compare, compare mask, swap, swap mask given) */
	memcpy(wqe + 32, ops[2], 16);
	memcpy(wrap(&q, wqe + 48), ops[0], 16);
	uint8_t *second = wrap(&q, wqe + 64);
	memcpy(second, ops[3], 16);
	memcpy(second + 16, ops[1], 16);
	mlx5dv_set_data_seg((void *)(second + 32), 16, 0x66, 0x20000 + i * 16);
	finish(&q, wqe, 7, MLX5_OPCODE_ATOMIC_MASKED_CS, 0x0a, F, 0);
	doorbell(&q, wqe, 7, 1, 0);
	return pi;
}

/* DC WRITE on a stream (mlx5dv_wr_set_dc_addr_stream): ctrl with the
 * stream id, the 48-byte address copied from the target's AV (as libmlx5
 * copies the AH's), raddr, data: 7 DS, two blocks. */
__attribute__((noinline)) static uint16_t post_dc_write(uint64_t i, const struct mlx5_wqe_av *av)
{
	uint8_t *wqe = begin(&q, 2);
	uint16_t pi = q.cur_post;
	memcpy(wqe + 16, av, sizeof(*av));
	raddr_seg(wrap(&q, wqe + 64), 0x10000 + i * 64, 0x55);
	mlx5dv_set_data_seg((void *)(wrap(&q, wqe + 64) + 16), 64, 0x66, 0x20000 + i * 64);
	((struct mlx5_wqe_ctrl_seg *)wqe)->dci_stream_channel_id = htobe16(i & 63);
	finish(&q, wqe, 6, MLX5_OPCODE_RDMA_WRITE, 0, F, 0);
	doorbell(&q, wqe, 6, 1, 0);
	return pi;
}

/* 32 WRITEs, only the last signalled, one doorbell (mlx5_post_send with a
 * list of 32). */
__attribute__((noinline)) static uint16_t post_batch32(uint64_t i)
{
	uint16_t pi = 0;
	uint8_t *wqe = NULL;
	for (unsigned k = 0; k < BATCH; k++) {
		wqe = begin(&q, 1);
		pi = q.cur_post;
		raddr_seg(wqe + 16, 0x10000 + (i + k) * 64, 0x55);
		mlx5dv_set_data_seg(wrap(&q, wqe + 32), 64, 0x66, 0x20000 + (i + k) * 64);
		finish(&q, wqe, 3, MLX5_OPCODE_RDMA_WRITE, 0, k == BATCH - 1 ? F : 0, 0);
	}
	doorbell(&q, wqe, 3, BATCH, 0);
	return pi;
}

/* UMR (libmlx5's mlx5dv_wr_mkey_configure with the access and list
 * setters): ctrl (the key in imm), the UMR control segment (inline, four
 * octowords, the mask), the mkey context (access, key, length), four KLM
 * entries; 12 DS, three blocks, each reached through the wrap check. */
__attribute__((noinline)) static uint16_t post_umr_klm4(uint32_t lkey, const struct mlx5_wqe_umr_klm_seg *klm,
							 uint8_t access)
{
	uint8_t *wqe = begin(&q, 3);
	uint16_t pi = q.cur_post;
	struct mlx5_wqe_umr_ctrl_seg *umr = (void *)(wqe + 16);
	memset(umr, 0, sizeof(*umr));
	umr->flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE;
	umr->klm_octowords = htobe16(4);
	umr->mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY |
				 MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
				 MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
				 MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE |
				 MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC);
	struct mlx5_wqe_mkey_context_seg *mk = wrap(&q, wqe + 64);
	memset(mk, 0, sizeof(*mk));
	mk->access_flags = access;
	mk->qpn_mkey = htobe32(0xffffff00 | (lkey & 0xff));
	uint64_t len = 0;
	struct mlx5_wqe_umr_klm_seg *k = wrap(&q, (uint8_t *)mk + 64);
	for (int e = 0; e < 4; e++) {
		k[e] = klm[e];
		len += be32toh(klm[e].byte_count);
	}
	mk->len = htobe64(len);
	finish(&q, wqe, 12, MLX5_OPCODE_UMR, 0, F, htobe32(lkey));
	q.fm_cache = MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE;
	doorbell(&q, wqe, 12, 1, 0);
	return pi;
}

/* A 42-byte packet all inline (libmlx5's raw packet SEND with
 * IBV_SEND_INLINE): the first 18 bytes in the Ethernet segment
 * (mlx5dv_set_eth_seg), the other 24 in an inline segment; 5 DS. */
__attribute__((noinline)) static uint16_t post_eth42(const uint8_t *pkt)
{
	uint8_t *wqe = begin(&q, 2);
	uint16_t pi = q.cur_post;
	struct mlx5_wqe_eth_seg *eth = (void *)(wqe + 16);
	memset(eth, 0, 12);
	mlx5dv_set_eth_seg(eth, MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM, 0, 18, (uint8_t *)pkt);
	struct mlx5_wqe_inl_data_seg *inl = wrap(&q, wqe + 48);
	uint8_t *dst = (uint8_t *)(inl + 1);
	unsigned len = 24, copy = len;
	if (__builtin_expect(dst + len > q.qend, 0)) {
		copy = q.qend - dst;
		memcpy(q.start, pkt + 18 + copy, len - copy);
	}
	memcpy(dst, pkt + 18, copy);
	inl->byte_count = htobe32(len | MLX5_INLINE_SEG);
	finish(&q, wqe, 5, MLX5_OPCODE_SEND, 0, F, 0);
	doorbell(&q, wqe, 5, 1, 1);
	return pi;
}

/* A TSO: 54 bytes of headers inline (2 in the Ethernet segment's first 16
 * bytes, the other 52 in 16-byte units after it, the last padded), MSS
 * 1448, the payload by one data segment; 7 DS. */
__attribute__((noinline)) static uint16_t post_tso(uint64_t i, const uint8_t *hdr)
{
	uint8_t *wqe = begin(&q, 2);
	uint16_t pi = q.cur_post;
	struct mlx5_wqe_eth_seg *eth = (void *)(wqe + 16);
	memset(eth, 0, 12);
	mlx5dv_set_eth_seg(eth, MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM, 1448, 54, (uint8_t *)hdr);
	/* mlx5dv_set_eth_seg copied all 54 bytes from inline_hdr_start on: the
	 * units after the segment's first 16 bytes; pad the last */
	memset(wqe + 16 + 14 + 54, 0, 16 - (52 % 16));
	mlx5dv_set_data_seg(wrap(&q, wqe + 96), 65536 - 54, 0x66, 0x20000 + i * 64);
	finish(&q, wqe, 7, MLX5_OPCODE_TSO, 0, F, 0);
	doorbell(&q, wqe, 7, 1, 0);
	return pi;
}

/* Tag matching (the tag_add row): a tag-matching SRQ's command QP (the
 * ring `q`) and its tag list, as libmlx5 keeps them (struct mlx5_srq's
 * tm_list, tm_head, tm_tail, op, unexp_out; struct mlx5_tag_entry; struct
 * mlx5_srq_op). The list holds more tags than a run adds: an entry comes
 * back only with a match, which this row does not make. mlx5dv.h has the
 * segment (struct mlx5_wqe_tm_seg), not its opcodes and flags. */
#define TM_TAGS 65535
#define TM_SIGNAL_EVERY 32
#define SRQN 0x99
#define TM_OPCODE_APPEND 0x01
#define TM_FLAG_CQE_REQ 0x80
#define CQE_APP_TAG_MATCHING 1
#define CQE_APP_OP_TM_APPEND 0x5
#define WC_TM_ADD 130 /* IBV_WC_TM_ADD */
#define WC_TM_SYNC_REQ (1 << 6) /* IBV_WC_TM_SYNC_REQ */
struct tm_entry {
	struct tm_entry *next;
	void *ptr;
	uint64_t wr_id;
	int expect_cqe;
	uint32_t phase_cnt;
	uint32_t size;
};
struct srq_op {
	struct tm_entry *tag;
	uint64_t wr_id;
	uint32_t wqe_head;
};
static struct tm_entry tm_list[TM_TAGS + 1];
static struct tm_entry *tm_head, *tm_tail;
static struct srq_op tm_ops[BBS];
static uint32_t tm_op_head, tm_op_tail, tm_sq_head, tm_unexp_out;

/* The tag list chained free, as mlx5_create_srq_ex leaves it. */
static void tm_init(void)
{
	for (unsigned k = 0; k < TM_TAGS; k++)
		tm_list[k].next = &tm_list[k + 1];
	tm_head = &tm_list[0];
	tm_tail = &tm_list[TM_TAGS];
}

/* mlx5_tm_release_tag */
static inline void tm_release(struct tm_entry *tag)
{
	if (!--tag->expect_cqe) {
		tag->next = NULL;
		tm_tail->next = tag;
		tm_tail = tag;
	}
}

/* One IBV_WR_TAG_ADD through libmlx5's mlx5_post_srq_ops sequence: the
 * overflow check, the control segment's words, the list's first free entry
 * (refused when it is the last), the TM segment (APPEND, the next entry's
 * index, tag, mask), the entry's fields, the operation recorded when
 * signaled, the data segment (wrapping at the ring's end), the control
 * segment's index and DS, then post_send_db. Returns the handle. */
__attribute__((noinline)) static uint32_t post_tag_add(uint64_t i, int signaled)
{
	uint8_t *wqe = begin(&q, 1);
	if (__builtin_expect(!tm_head->next, 0))
		abort(); /* tag matching list is full */
	struct tm_entry *tag = tm_head;
	tm_head = tag->next;
	struct mlx5_wqe_tm_seg *tm = (void *)(wqe + 16);
	tm->flags = signaled ? TM_FLAG_CQE_REQ : 0;
	tm->opcode = TM_OPCODE_APPEND << 4;
	tm->index = htobe16(tag->next - tm_list);
	tm->append_tag = htobe64(i);
	tm->append_mask = htobe64(~0ull);
	tag->next = NULL;
	tag->wr_id = i;
	tag->phase_cnt = tm_unexp_out;
	tag->expect_cqe++;
	if (signaled) {
		struct srq_op *op = &tm_ops[tm_op_tail++ & (q.wqe_cnt - 1)];
		op->tag = tag;
		op->wr_id = i;
		op->wqe_head = tm_sq_head;
		tag->expect_cqe++;
	}
	uint32_t handle = tag - tm_list;
	uint64_t addr = 0x20000 + i * 64;
	mlx5dv_set_data_seg(wrap(&q, wqe + 48), 64, 0x66, addr);
	tag->ptr = (void *)(uintptr_t)addr;
	tag->size = 64;
	mlx5dv_set_ctrl_seg((void *)wqe, q.cur_post & 0xffff, MLX5_OPCODE_TAG_MATCHING, 0, q.qpn, 0, 4, 0, 0);
	q.cur_post += 1;
	q.fm_cache = 0;
	tm_sq_head += 1;
	doorbell(&q, wqe, 4, 1, 0);
	return handle;
}

/* The device's side: the completion of a signaled add (no packet, tag
 * matching, APPEND, success). */
static inline void device_tm_cqe(uint16_t pi)
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
	*(volatile struct mlx5_cqe64 *)&cqes[produced % CQES] = cqe;
	produced++;
}

/* libmlx5's poller on a tag-matching list operation's CQE (mlx5_parse_cqe's
 * MLX5_CQE_NO_PACKET case, the SRQ found by its number, then
 * handle_tag_matching's APPEND case: the oldest operation taken, its entry
 * released, the phase compared, the command ring freed through it) and what
 * ibv_wc_read_opcode / _wc_flags report, then the consumer record. */
static inline int poll_tm(struct cq *cq, struct wc *wc)
{
	struct mlx5_cqe64 *cqe = cq->buf + (cq->ci & (cq->cnt - 1));
	uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
	if ((op_own >> 4) == MLX5_CQE_INVALID || ((op_own & 1) ^ !!(cq->ci & cq->cnt)))
		return 0;
	cq->ci++;
	barrier();
	if ((op_own >> 4) != MLX5_CQE_NO_PACKET || cqe->app != CQE_APP_TAG_MATCHING)
		abort();
	if ((be32toh(cqe->srqn_uidx) & 0xffffff) != SRQN)
		abort(); /* get_srq_ctx */
	wc->status = 0;
	wc->wc_flags = 0;
	switch (cqe->app_op) {
	case CQE_APP_OP_TM_APPEND: {
		if (tm_op_tail == tm_op_head)
			abort(); /* an unexpected list op CQE */
		struct srq_op *op = &tm_ops[tm_op_head++ & (q.wqe_cnt - 1)];
		if (op->tag) {
			tm_release(op->tag);
			if (be16toh(cqe->tm_cqe.hw_phase_cnt) != op->tag->phase_cnt)
				wc->wc_flags |= WC_TM_SYNC_REQ;
		}
		q.tail = op->wqe_head + 1;
		wc->wr_id = op->wr_id;
		wc->opcode = WC_TM_ADD;
		break;
	}
	default:
		abort(); /* this row writes APPEND completions only */
	}
	DEVICE_STORE(cq->dbrec[0], htobe32(cq->ci & 0xffffff));
	return 1;
}

/* The striding WQ of the mprq row (libmlx5's struct mlx5_rwq: head, tail,
 * the WQE shift, max_gs, the ids), in the ring's place: 64 WQEs of 32 bytes
 * (mlx5dv.h's struct mlx5_mprq_wqe: a next segment, zero on a cyclic queue,
 * and one data segment), 8 strides of 64 bytes each; and its CQ, where the
 * device writes one packet per WQE taking all its strides. */
#define MPRQ_CQES 64
#define MPRQ_STRIDES 8
#define MPRQ_WQE_BYTES 512
#define MPRQ_BATCH (BBS / 2)
#define WQN QPN
struct rwq {
	uint8_t *buf;
	uint32_t head, tail, wqe_cnt, wqe_shift;
	int max_gs;
	uint64_t wrid[BBS];
	/* the strides consumed per WQE (the kernel's and DPDK's stride count) */
	uint32_t consumed[BBS];
	uint64_t addr[BBS];
	uint64_t stray;
	__be32 *recv_db;
};
static __be32 rq_dbrec[2];
static struct rwq rq = { .buf = ring, .wqe_cnt = BBS, .wqe_shift = 5, .max_gs = 1, .recv_db = &rq_dbrec[0] };
static struct mlx5_cqe64 mcqes[MPRQ_CQES] __attribute__((aligned(64)));
static __be32 mcq_dbrec[2];
static struct cq mc = { .buf = mcqes, .cnt = MPRQ_CQES, .dbrec = mcq_dbrec };
static uint32_t mproduced;

/* One receive request through libmlx5's mlx5_post_wq_recv sequence: the
 * overflow check, the request's segments against max_gs, the data segment
 * (a zero length skipped), the list's end when room is left, the id, the
 * head, the barrier, the doorbell record; the data segment where
 * struct mlx5_mprq_wqe has it (libmlx5 writes it at the WQE's first
 * byte), and the WQE's stride count and address reset, as ours does at
 * posting. */
__attribute__((noinline)) static uint16_t post_mprq(uint64_t i, const struct ibv_sge *sg, int num_sge)
{
	if (__builtin_expect(rq.head - rq.tail >= rq.wqe_cnt, 0))
		abort(); /* mlx5_wq_overflow */
	if (__builtin_expect(num_sge > rq.max_gs, 0))
		abort();
	uint32_t ind = rq.head & (rq.wqe_cnt - 1);
	struct mlx5_mprq_wqe *w = (void *)(rq.buf + (ind << rq.wqe_shift));
	struct mlx5_wqe_data_seg *scat = &w->dseg;
	int j = 0;
	for (int k = 0; k < num_sge; k++) {
		if (__builtin_expect(!sg[k].length, 0))
			continue;
		mlx5dv_set_data_seg(scat + j++, sg[k].length, sg[k].lkey, sg[k].addr);
	}
	if (j < rq.max_gs) {
		scat[j].byte_count = 0;
		scat[j].lkey = htobe32(MLX5_INVALID_LKEY);
		scat[j].addr = 0;
	}
	rq.wrid[ind] = i;
	rq.consumed[ind] = 0;
	rq.addr[ind] = sg[0].addr;
	rq.head += 1;
	barrier();
	DEVICE_STORE(*rq.recv_db, htobe32(rq.head & 0xffff));
	return ind;
}

/* The device's side: a packet filling WQE `wqe` (its strides from 0). */
static inline void device_mprq_cqe(uint16_t wqe)
{
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.wqe_id = htobe16(wqe);
	cqe.byte_cnt = htobe32(MPRQ_STRIDES << 16 | MPRQ_WQE_BYTES);
	cqe.sop_drop_qpn = htobe32((MLX5_CQE_RESP_SEND << 24) | WQN);
	cqe.op_own = (MLX5_CQE_RESP_SEND << 4) | !!(mproduced & MPRQ_CQES);
	*(volatile struct mlx5_cqe64 *)&mcqes[mproduced % MPRQ_CQES] = cqe;
	mproduced++;
}

/* What a striding completion carries. */
struct swc {
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, qp_num, wc_flags;
	uint16_t wqe, stride, strides;
	uint8_t filler;
};
static struct swc swcs[MPRQ_BATCH];

/* Polls up to ne receive CQEs as libmlx5's poller reads a responder CQE
 * (owner bit and opcode, the WQ found by its number, byte count, flags)
 * and the striding fields (WQE, stride, strides, filler), then the
 * consumer record; each is then taken as the kernel's mlx5e and DPDK take
 * one (mlx5e_handle_rx_cqe_mpwrq: the WQE's strides summed, the WQE handed
 * back at its last), a WQE not outstanding ignored. */
__attribute__((noinline)) static int poll_mprq(int ne)
{
	int n = 0;
	for (; n < ne; n++) {
		struct mlx5_cqe64 *cqe = mc.buf + (mc.ci & (mc.cnt - 1));
		uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
		if ((op_own >> 4) == MLX5_CQE_INVALID || ((op_own & 1) ^ !!(mc.ci & mc.cnt)))
			break;
		mc.ci++;
		barrier();
		struct swc *wc = &swcs[n];
		uint32_t qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
		if ((op_own >> 4) != MLX5_CQE_RESP_SEND || qpn != WQN)
			abort(); /* this row writes its WQ's SEND completions only */
		uint32_t bc = be32toh(cqe->byte_cnt);
		wc->qp_num = qpn;
		wc->opcode = 128; /* IBV_WC_RECV */
		wc->status = 0;
		wc->wc_flags = 0;
		wc->wqe = be16toh(cqe->wqe_id);
		wc->stride = be16toh(cqe->wqe_counter);
		wc->strides = (bc >> 16) & 0x7fff;
		wc->byte_len = bc & 0xffff;
		wc->filler = bc >> 31;
		wc->wr_id = rq.wrid[wc->wqe & (rq.wqe_cnt - 1)];
	}
	if (n)
		DEVICE_STORE(mc.dbrec[0], htobe32(mc.ci & 0xffffff));
	for (int k = 0; k < n; k++) {
		uint32_t mask = rq.wqe_cnt - 1, slot = swcs[k].wqe & mask;
		if (((slot - rq.tail) & mask) >= rq.head - rq.tail) {
			rq.stray++;
			continue;
		}
		uint32_t *c = &rq.consumed[slot];
		*c += swcs[k].strides;
		if (*c >= MPRQ_STRIDES)
			rq.tail += ((slot - rq.tail) & mask) + 1;
	}
	return n;
}

/* The caller's work-completion array, as libmlx5's poll writes it: memory
 * the caller reads afterwards, so the stores stay (a local nothing reads
 * would let gcc drop them). */
static struct wc wcs[1];

/* One requester completion written by the device and polled into the
 * caller's array. */
__attribute__((noinline)) static int poll(uint64_t i)
{
	uint32_t to;
	device_cqe(i);
	return poll_one(&c, &wcs[0], &to);
}

/* Compressed sessions (the zip row): a CQ of 16 entries, sessions of eight
 * receive CQEs (a title with byte_cnt = 8, one array of eight mini-CQEs in
 * the next entry), hash format. The mini-CQE layout (struct
 * mlx5_mini_cqe8, which this mlx5dv.h does not carry): four bytes of
 * format-specific data (rx_hash_result here), the byte count. */
#define ZIP_CQES 16
#define SESSION 8
struct mini_cqe8 {
	uint8_t info[4];
	__be32 byte_cnt;
};
static struct mlx5_cqe64 zcqes[ZIP_CQES] __attribute__((aligned(64)));
static __be32 zdbrec[2];
static uint32_t zci, zproduced;

/* The device's side: the array first, then the title. */
static inline void device_session(const struct mlx5_cqe64 *title, const struct mini_cqe8 *minis)
{
	unsigned idx = zproduced % ZIP_CQES;
	struct mlx5_cqe64 t = *title;
	t.byte_cnt = htobe32(SESSION);
	t.op_own |= !!(zproduced & ZIP_CQES);
	*(volatile struct mlx5_cqe64 *)&zcqes[idx + 1] = *(const struct mlx5_cqe64 *)minis;
	*(volatile struct mlx5_cqe64 *)&zcqes[idx] = t;
	zproduced += SESSION;
}

/* Polls up to ne completions, expanding a session as the kernel's mlx5e
 * does (mlx5e_decompress_cqes_start / _cont: the title copied once, then per
 * mini-CQE its byte count and hash, the WQE counter the title's plus its
 * index, the owner bit of the entry; the session's entries handed back with
 * the owner they would carry, so that none reads valid a lap later), each
 * expanded CQE read as libmlx5's poller reads a receive CQE (byte count, QP,
 * WQE counter, flags, the RSS hash), then the consumer record. */
__attribute__((noinline)) static int poll_zip(struct wc *wc, uint32_t *hash, int ne)
{
	struct mlx5_cqe64 *cqe = &zcqes[zci & (ZIP_CQES - 1)];
	uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
	if ((op_own >> 4) == MLX5_CQE_INVALID || ((op_own & 1) ^ !!(zci & ZIP_CQES)))
		return 0;
	barrier();
	int n = 0;
	if (((op_own >> 2) & 3) == 3) {
		struct mlx5_cqe64 title = *cqe;
		unsigned count = be32toh(title.byte_cnt);
		uint16_t ctr = be16toh(title.wqe_counter);
		const struct mini_cqe8 *arr = (const void *)&zcqes[(zci + 1) & (ZIP_CQES - 1)];
		for (unsigned i = 0; i < count && n < ne; i++, n++) {
			if (i && !(i % SESSION))
				arr = (const void *)&zcqes[(zci + i) & (ZIP_CQES - 1)];
			const struct mini_cqe8 *m = &arr[i % SESSION];
			title.byte_cnt = m->byte_cnt;
			memcpy((uint8_t *)&title + 12, m->info, 4); /* rx_hash_result */
			title.wqe_counter = htobe16(ctr + i);
			title.op_own = (op_own & 0xf2) | !!((zci + i) & ZIP_CQES);
			/* the receive CQE, read */
			wc[n].wc_flags = 0;
			wc[n].qp_num = be32toh(title.sop_drop_qpn) & 0xffffff;
			wc[n].opcode = 128; /* IBV_WC_RECV */
			wc[n].byte_len = be32toh(title.byte_cnt);
			wc[n].wr_id = be16toh(title.wqe_counter);
			wc[n].status = 0;
			hash[n] = be32toh(*(__be32 *)((uint8_t *)&title + 12));
		}
		for (unsigned i = 0; i < count; i++)
			zcqes[(zci + i) & (ZIP_CQES - 1)].op_own = 0xf0 | !!((zci + i) & ZIP_CQES);
		zci += count;
	} else {
		abort(); /* this row writes sessions only */
	}
	DEVICE_STORE(zdbrec[0], htobe32(zci & 0xffffff));
	return n;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--rows")) {
		for (int k = 0; rows[k]; k++)
			puts(rows[k]);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: wqe_cost_c ROW [ITERATIONS] | wqe_cost_c --rows\n");
		return 2;
	}
	const char *row = argv[1];
	long n = argc > 2 ? atol(argv[2]) : 0;
	static const uint8_t payload[32] = { [0 ... 31] = 0x41 };
	static const uint8_t ops[4][16] = { { [0 ... 15] = 0x11 }, { [0 ... 15] = 0x22 }, { [0 ... 15] = 0x33 },
					    { [0 ... 15] = 0x44 } };
	uint8_t hdr[54];
	for (unsigned k = 0; k < sizeof(hdr); k++)
		hdr[k] = k;
	struct mlx5_wqe_av av;
	memset(&av, 0, sizeof(av));
	av.key.dc_key = htobe64(0x12345678);
	av.dqp_dct = htobe32(0x80000000 | 0x4242);
	for (unsigned k = 0; k < CQES; k++)
		cqes[k].op_own = 0xf0; /* invalid, owner 0: a fresh CQ */
	for (unsigned k = 0; k < MPRQ_CQES; k++)
		mcqes[k].op_own = 0xf0;
	long sum = 0;
#define LOOP(call)                                   \
	for (long i = 0; i < n; i++) {               \
		uint16_t pi = call;                  \
		account(pi);                         \
	}
	if (!strcmp(row, "write"))
		LOOP(post_write(i))
	else if (!strcmp(row, "write_inline32"))
		LOOP(post_write_inline32(i, payload))
	else if (!strcmp(row, "send"))
		LOOP(post_send(i))
	else if (!strcmp(row, "read"))
		LOOP(post_read(i))
	else if (!strcmp(row, "cas"))
		LOOP(post_cas(i))
	else if (!strcmp(row, "fetch_add"))
		LOOP(post_fetch_add(i))
	else if (!strcmp(row, "masked_cas8"))
		LOOP(post_masked_cas8(i))
	else if (!strcmp(row, "masked_cas16"))
		LOOP(post_masked_cas16(i, ops))
	else if (!strcmp(row, "dc_write"))
		LOOP(post_dc_write(i, &av))
	else if (!strcmp(row, "batch32")) {
		for (long j = 0; j < n / BATCH; j++)
			account(post_batch32(j * BATCH));
	} else if (!strcmp(row, "umr_klm4")) {
		struct mlx5_wqe_umr_klm_seg klm[4];
		for (int k = 0; k < 4; k++) {
			klm[k].byte_count = htobe32(4096);
			klm[k].mkey = htobe32(0x66 + k);
			klm[k].address = htobe64(0x20000 + k * 4096);
		}
		/* local write, remote read, remote write (get_umr_mr_flags) */
		LOOP(post_umr_klm4(0x4200, klm, 1 << 3 | 1 << 4 | 1 << 5))
	} else if (!strcmp(row, "eth42")) {
		LOOP(post_eth42(hdr))
	} else if (!strcmp(row, "tso")) {
		LOOP(post_tso(i, hdr))
	} else if (!strcmp(row, "zip")) {
		struct mlx5_cqe64 title;
		memset(&title, 0, sizeof(title));
		title.sop_drop_qpn = htobe32(QPN);
		title.wqe_counter = htobe16(0x10);
		title.op_own = MLX5_CQE_RESP_SEND << 4 | 3 << 2;
		struct mini_cqe8 minis[SESSION];
		for (unsigned k = 0; k < SESSION; k++) {
			minis[k].info[0] = k;
			minis[k].info[1] = 1;
			minis[k].info[2] = 2;
			minis[k].info[3] = 3;
			minis[k].byte_cnt = htobe32(64 + k);
		}
		for (unsigned k = 0; k < ZIP_CQES; k++)
			zcqes[k].op_own = 0xf0;
		struct wc wc[SESSION];
		uint32_t hash[SESSION];
		for (long j = 0; j < n / SESSION; j++) {
			device_session(&title, minis);
			int got = poll_zip(wc, hash, SESSION);
			for (int k = 0; k < got; k++)
				sum += wc[k].byte_len;
		}
	} else if (!strcmp(row, "tag_add")) {
		tm_init();
		for (long i = 0; i < n; i++) {
			int signaled = i % TM_SIGNAL_EVERY == TM_SIGNAL_EVERY - 1;
			post_tag_add(i, signaled);
			if (signaled) {
				device_tm_cqe((uint16_t)(q.cur_post - 1));
				if (poll_tm(&c, &wcs[0]) != 1)
					abort();
			}
		}
		sum = q.cur_post;
	} else if (!strcmp(row, "mprq")) {
		for (long i = 0; i < n; i++) {
			struct ibv_sge sg = { .addr = 0x20000 + i * MPRQ_WQE_BYTES, .length = MPRQ_WQE_BYTES, .lkey = 0x66 };
			sum += post_mprq(i, &sg, 1);
			if (rq.head - rq.tail >= BBS / 2) {
				uint32_t first = rq.tail, out = rq.head - rq.tail;
				for (uint32_t k = 0; k < out; k++)
					device_mprq_cqe((uint16_t)(first + k));
				poll_mprq(MPRQ_BATCH);
			}
		}
	} else if (!strcmp(row, "poll")) {
		for (long i = 0; i < n; i++)
			sum += poll(i);
	} else {
		fprintf(stderr, "wqe_cost_c: unknown row %s\n", row);
		return 2;
	}
	printf("%s %u %ld\n", row, q.cur_post, sum);
	/* WQE_COST_DUMP=1: the ring's bytes, to compare with the Rust side's. */
	if (getenv("WQE_COST_DUMP"))
		for (unsigned b = 0; b < BBS; b++) {
			for (unsigned k = 0; k < 64; k++)
				printf("%02x", ring[b * 64 + k]);
			printf("\n");
		}
	return 0;
}
