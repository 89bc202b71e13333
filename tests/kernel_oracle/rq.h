/* Written here, not extracted: the parts of the mlx5e receive queue and CQ
 * that the extracted functions touch (the kernel's struct mlx5e_rq and
 * struct mlx5e_cq have scores of fields for XDP, page pools, NAPI, ...), and
 * no-op stand-ins for the calls mlx5e_poll_rx_cq makes after its loop (XDP
 * and SHAMPO flushes, both off here). The field names are the kernel's. */
struct mlx5e_rq_stats {
	u64 cqe_compress_blks;
	u64 cqe_compress_pkts;
};

struct mlx5e_cq {
	struct mlx5_cqwq wq;
};

struct mlx5e_shampo_stub {
	void *skb;
};

struct mlx5e_rq {
	struct {
		struct mlx5_wq_cyc wq;
	} wqe;
	struct mlx5e_cq_decomp cqd;
	struct mlx5e_cq cq;
	unsigned long state;
	u8 wq_type;
	struct mlx5e_rq_stats *stats;
	mlx5e_fp_handle_rx_cqe handle_rx_cqe;
	void *xdp_prog;
	struct mlx5e_shampo_stub *hw_gro_data;
};

static void mlx5e_xdp_rx_poll_complete(struct mlx5e_rq *rq) { (void)rq; }
static void mlx5e_shampo_flush_skb(struct mlx5e_rq *rq, struct mlx5_cqe64 *cqe, bool match)
{
	(void)rq;
	(void)cqe;
	(void)match;
}
