/*
 * The C side of `cargo xtask bench-wqe`: builds RDMA WRITE WQEs into a send
 * queue ring with the mlx5dv.h helpers and rings the doorbell as libmlx5's
 * post_send does (overflow check, doorbell record, BlueFlame decision, plain
 * 8-byte doorbell here, offset toggle), N times. The Rust side is
 * examples/wqe_cost.rs; callgrind counts instructions of both.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/mlx5dv.h>

#define BBS 64

static uint8_t ring[BBS * 64] __attribute__((aligned(64)));
static __be32 dbrec[2];
static uint64_t reg[64] __attribute__((aligned(64)));

/* The state libmlx5 keeps for this: producer and consumer indices, and the
 * BlueFlame register with its toggling offset (size 0: plain doorbell). */
struct sq {
	uint32_t cur_post, head, wqe_cnt, qpn;
	uint32_t bf_offset, bf_size;
	int prefer_bf;
};

__attribute__((noinline)) static void post_write(struct sq *q, uint64_t raddr, uint32_t rkey,
						 uint32_t len, uint32_t lkey, uint64_t addr)
{
	/* mlx5_wq_overflow */
	if (q->cur_post - q->head + 1 > q->wqe_cnt)
		abort();
	uint32_t idx = q->cur_post & (q->wqe_cnt - 1);
	uint8_t *wqe = ring + idx * 64;
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
	struct mlx5_wqe_raddr_seg *rseg = (void *)(wqe + 16);
	struct mlx5_wqe_data_seg *dseg = (void *)(wqe + 32);
	int size = 3, nreq = 1, inl = 0;

	rseg->raddr = htobe64(raddr);
	rseg->rkey = htobe32(rkey);
	rseg->reserved = 0;
	mlx5dv_set_data_seg(dseg, len, lkey, addr);
	mlx5dv_set_ctrl_seg(ctrl, q->cur_post & 0xffff, MLX5_OPCODE_RDMA_WRITE, 0, q->qpn, MLX5_WQE_CTRL_CQ_UPDATE,
			    size, 0, 0);
	q->cur_post += (size * 16 + 63) / 64;

	/* libmlx5 post_send_db, x86-64 barriers */
	asm volatile("" ::: "memory");
	dbrec[1] = htobe32(q->cur_post & 0xffff);
	asm volatile("sfence" ::: "memory");
	if (nreq == 1 && q->bf_size && (inl || q->prefer_bf) && size > 1 && size <= (int)q->bf_size / 16) {
		for (int i = 0; i < ((size * 16 + 63) & ~63) / 8; i++)
			((volatile uint64_t *)((uint8_t *)reg + q->bf_offset))[i] = ((uint64_t *)ctrl)[i];
	} else {
		*(volatile uint64_t *)((uint8_t *)reg + q->bf_offset) = *(uint64_t *)ctrl;
	}
	asm volatile("sfence" ::: "memory");
	q->bf_offset ^= q->bf_size;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	struct sq q = { .wqe_cnt = BBS, .qpn = 0x1234, .bf_size = 0, .prefer_bf = 1 };
	for (long i = 0; i < n; i++) {
		post_write(&q, 0x10000 + i * 64, 0x55, 64, 0x66, 0x20000 + i * 64);
		/* a completion every half ring, as the Rust side does */
		if (q.cur_post - q.head >= BBS / 2)
			q.head = q.cur_post;
	}
	printf("%u %u\n", q.cur_post, be32toh(dbrec[1]));
	return 0;
}
