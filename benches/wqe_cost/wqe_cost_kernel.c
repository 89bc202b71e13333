/*
 * The kernel column of `cargo xtask bench-wqe`'s zip row: the Linux kernel's
 * own mlx5e CQE decompression (mlx5e_poll_rx_cq and the functions it calls,
 * cut from the kernel's source and pasted before this file by
 * xtask/src/bench_wqe/kernel.rs, with the user-space plumbing of
 * tests/kernel_oracle/), draining the zip row's sessions.
 *
 * `wqe_cost_kernel zip N` writes N / 8 sessions as benches/wqe_cost/wqe_cost.c
 * does (a 16-entry CQ of 64-byte CQEs, a title of eight receive CQEs and one
 * array of eight mini-CQEs, the array stored first) and drains each with
 * mlx5e_poll_rx_cq(cq, 8); the receive handler reads each expanded CQE as the
 * C side reads one (byte count, QP, WQE counter, flags, the RSS hash) into
 * the caller's array. The kernel reads the mini-CQEs in the format mlx5e
 * configures (checksum), the work per CQE the same.
 *
 * `wqe_cost_kernel --rows` lists the rows (zip only).
 */
#define ZIP_CQES 16
#define SESSION 8
#define QPN 0x1234

/* What ibv_wc carries for a receive completion (the C side's struct wc). */
struct wc {
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, qp_num, wc_flags;
};
static struct wc wcs[SESSION];
static uint32_t hashes[SESSION];
static unsigned taken;

/* rq->handle_rx_cqe: the expanded CQE read into the caller's array. */
static void read_cqe(struct mlx5e_rq *rq, struct mlx5_cqe64 *cqe)
{
	struct wc *wc = &wcs[taken & (SESSION - 1)];
	(void)rq;
	wc->wc_flags = 0;
	wc->qp_num = be32_to_cpu(cqe->sop_drop_qpn) & 0xffffff;
	wc->opcode = 128; /* IBV_WC_RECV */
	wc->byte_len = be32_to_cpu(cqe->byte_cnt);
	wc->wr_id = be16_to_cpu(cqe->wqe_counter);
	wc->status = 0;
	hashes[taken & (SESSION - 1)] = be32_to_cpu(cqe->rss_hash_result);
	taken++;
}

static struct mlx5_cqe64 zcqes[ZIP_CQES] __attribute__((aligned(4096)));
static uint32_t zproduced;

/* The device's side: the array first, then the title (the C side's
 * device_session). */
static inline void device_session(const struct mlx5_cqe64 *title, const struct mlx5_mini_cqe8 *minis)
{
	unsigned idx = zproduced % ZIP_CQES;
	struct mlx5_cqe64 t = *title;
	t.byte_cnt = cpu_to_be32(SESSION);
	t.op_own |= !!(zproduced & ZIP_CQES);
	*(volatile struct mlx5_cqe64 *)&zcqes[idx + 1] = *(const struct mlx5_cqe64 *)minis;
	*(volatile struct mlx5_cqe64 *)&zcqes[idx] = t;
	zproduced += SESSION;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--rows")) {
		puts("zip");
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "zip")) {
		fprintf(stderr, "usage: wqe_cost_kernel zip [ITERATIONS] | wqe_cost_kernel --rows\n");
		return 2;
	}
	long n = argc > 2 ? atol(argv[2]) : 0;
	static struct mlx5_buf_list frag = { .buf = zcqes };
	static struct mlx5e_rq_stats stats;
	static struct mlx5e_shampo_stub gro;
	static struct mlx5e_rq rq;
	static __be32 dbrec;
	for (unsigned k = 0; k < ZIP_CQES; k++)
		zcqes[k].op_own = MLX5_CQE_INVALID << 4 | 1; /* a fresh CQ, as the oracle's */
	mlx5_init_fbc(&frag, 6, 4, &rq.cq.wq.fbc);
	rq.cq.wq.db = &dbrec;
	rq.wqe.wq.fbc.sz_m1 = (1u << 10) - 1;
	rq.wqe.wq.sz = 1u << 10;
	rq.stats = &stats;
	rq.hw_gro_data = &gro;
	rq.handle_rx_cqe = read_cqe;
	rq.state = 1UL << MLX5E_RQ_STATE_ENABLED;
	rq.wq_type = MLX5_WQ_TYPE_CYCLIC;

	struct mlx5_cqe64 title;
	memset(&title, 0, sizeof(title));
	title.sop_drop_qpn = cpu_to_be32(QPN);
	title.wqe_counter = cpu_to_be16(0x10);
	title.op_own = MLX5_CQE_RESP_SEND << 4 | MLX5_COMPRESSED << 2;
	struct mlx5_mini_cqe8 minis[SESSION];
	memset(minis, 0, sizeof(minis));
	for (unsigned k = 0; k < SESSION; k++) {
		uint8_t info[4] = { (uint8_t)k, 1, 2, 3 };
		memcpy(&minis[k], info, 4);
		minis[k].byte_cnt = cpu_to_be32(64 + k);
	}
	long sum = 0;
	for (long j = 0; j < n / SESSION; j++) {
		device_session(&title, minis);
		taken = 0;
		int got = mlx5e_poll_rx_cq(&rq.cq, SESSION);
		for (int k = 0; k < got; k++)
			sum += wcs[k].byte_len;
	}
	/* Every CQE expanded: the byte counts of n / 8 whole sessions. */
	if (sum != (n / SESSION) * (SESSION * 64 + SESSION * (SESSION - 1) / 2))
		abort();
	printf("zip %u %ld\n", rq.cq.wq.cc, sum);
	return 0;
}
