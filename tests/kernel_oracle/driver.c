/* The oracle's driver (written here): rings of CQEs fed from stdin, drained
 * by the kernel's own mlx5e_poll_rx_cq, every CQE the kernel hands its
 * receive handler printed. Input lines:
 *   K log_cnt log_stride hw_stridx log_rq   a fresh CQ (every entry invalid,
 *                                           owner 1) and RQ
 *   E idx hex                               an entry written as the device would
 *   Y budget                                mlx5e_poll_rx_cq(budget) until it
 *                                           returns 0
 * Output: "Q hex" per CQE handed to rq->handle_rx_cqe (its 64 bytes), "P n"
 * per poll, "Z cc dbrec" after a drain. */

static void record(struct mlx5e_rq *rq, struct mlx5_cqe64 *cqe)
{
	const u8 *b = (const u8 *)cqe;
	(void)rq;
	putchar('Q');
	putchar(' ');
	for (int i = 0; i < 64; i++)
		printf("%02x", b[i]);
	putchar('\n');
}

static int unhex(int c)
{
	return c <= '9' ? c - '0' : c - 'a' + 10;
}

int main(void)
{
	static char line[1 << 12];
	struct mlx5e_rq_stats stats = { 0 };
	struct mlx5e_shampo_stub gro = { 0 };
	struct mlx5e_rq rq;
	struct mlx5_buf_list *frags = NULL;
	u8 *buf = NULL;
	__be32 dbrec = 0;
	unsigned stride = 64;

	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'K') {
			unsigned log_cnt, log_stride, hw_stridx, log_rq;
			if (sscanf(line + 2, "%u %u %u %u", &log_cnt, &log_stride, &hw_stridx, &log_rq) != 4)
				abort();
			free(buf);
			free(frags);
			stride = 1u << log_stride;
			size_t len = (size_t)stride << log_cnt;
			size_t pages = (len + 4095) / 4096;
			if (posix_memalign((void **)&buf, 4096, pages * 4096))
				abort();
			memset(buf, 0, pages * 4096);
			for (unsigned i = 0; i < 1u << log_cnt; i++)
				buf[(size_t)i * stride + stride - 1] = MLX5_CQE_INVALID << 4 | 1;
			frags = calloc(pages, sizeof(*frags));
			for (size_t p = 0; p < pages; p++)
				frags[p].buf = buf + p * 4096;
			memset(&rq, 0, sizeof(rq));
			mlx5_init_fbc(frags, (u8)log_stride, (u8)log_cnt, &rq.cq.wq.fbc);
			rq.cq.wq.db = &dbrec;
			dbrec = 0;
			rq.wqe.wq.fbc.sz_m1 = (1u << log_rq) - 1;
			rq.wqe.wq.sz = (u16)(1u << log_rq);
			rq.stats = &stats;
			rq.hw_gro_data = &gro;
			rq.handle_rx_cqe = record;
			rq.state = 1UL << MLX5E_RQ_STATE_ENABLED;
			if (hw_stridx) {
				rq.state |= 1UL << MLX5E_RQ_STATE_MINI_CQE_HW_STRIDX;
				rq.wq_type = MLX5_WQ_TYPE_LINKED_LIST_STRIDING_RQ;
			} else {
				rq.wq_type = MLX5_WQ_TYPE_CYCLIC;
			}
		} else if (line[0] == 'E') {
			unsigned idx;
			int at;
			if (sscanf(line + 2, "%u %n", &idx, &at) != 1)
				abort();
			const char *h = line + 2 + at;
			u8 *e = buf + (size_t)idx * stride;
			for (unsigned i = 0; i < stride; i++)
				e[i] = (u8)(unhex(h[2 * i]) << 4 | unhex(h[2 * i + 1]));
		} else if (line[0] == 'Y') {
			int budget = atoi(line + 2);
			int n;
			do {
				n = mlx5e_poll_rx_cq(&rq.cq, budget);
				printf("P %d\n", n);
			} while (n > 0);
			printf("Z %u %u\n", rq.cq.wq.cc, be32_to_cpu(dbrec));
		}
	}
	return 0;
}
