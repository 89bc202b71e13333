/*
 * The C side of `cargo xtask bench-wqe`: builds RDMA WRITE WQEs into a send
 * queue ring with the mlx5dv.h helpers and rings the plain (non-BlueFlame)
 * doorbell in libmlx5's order, N times. The Rust side is
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
static uint64_t reg[8] __attribute__((aligned(64)));

__attribute__((noinline)) static void post_write(uint32_t *cur_post, uint32_t qpn, uint64_t raddr, uint32_t rkey,
						 uint32_t len, uint32_t lkey, uint64_t addr)
{
	uint32_t idx = *cur_post & (BBS - 1);
	uint8_t *wqe = ring + idx * 64;
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
	struct mlx5_wqe_raddr_seg *rseg = (void *)(wqe + 16);
	struct mlx5_wqe_data_seg *dseg = (void *)(wqe + 32);

	rseg->raddr = htobe64(raddr);
	rseg->rkey = htobe32(rkey);
	rseg->reserved = 0;
	mlx5dv_set_data_seg(dseg, len, lkey, addr);
	mlx5dv_set_ctrl_seg(ctrl, *cur_post & 0xffff, MLX5_OPCODE_RDMA_WRITE, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	*cur_post += 1;

	/* libmlx5 post_send_db without BlueFlame, x86-64 barriers */
	asm volatile("" ::: "memory");
	dbrec[1] = htobe32(*cur_post & 0xffff);
	asm volatile("sfence" ::: "memory");
	*(volatile uint64_t *)reg = *(uint64_t *)ctrl;
	asm volatile("sfence" ::: "memory");
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	uint32_t cur_post = 0;
	for (long i = 0; i < n; i++)
		post_write(&cur_post, 0x1234, 0x10000 + i * 64, 0x55, 64, 0x66, 0x20000 + i * 64);
	printf("%u %u\n", cur_post, be32toh(dbrec[1]));
	return 0;
}
