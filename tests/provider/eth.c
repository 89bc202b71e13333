/*
 * Raw packet send queues (IBV_QPT_RAW_PACKET) for the library build: the
 * Rust half (tests/provider/eth.rs) posts its request lists here through
 * libmlx5's mlx5_post_send, whose raw-packet path writes the Ethernet
 * segment (checksum flags, the device's minimum inline headers copied out
 * of the gather list by copy_eth_inline_headers) before the data or inline
 * segments, and replays them through rrddmma's SqRing::send_eth.
 */
#include <stdint.h>

#ifdef HARNESS_LIB
#include "mlx5.h"
#include "harness.h"

/*
 * A raw packet send queue made as h_make_sq makes an RC one (malloc'd ring
 * filled with fill(seed), doorbell record, BlueFlame page), then turned into
 * what mlx5_create_qp leaves for a raw packet QP on an Ethernet port:
 * qp_type IBV_QPT_RAW_PACKET; the checksum capability mlx5_create_qp caches
 * from the device's raw_packet_caps (MLX5_CSUM_SUPPORT_RAW_OVER_ETH) when
 * csum is set; the producer index at start. min_inline is the context's
 * eth_min_inline_size (18, MLX5_ETH_L2_INLINE_HEADER_SIZE, or 0 when the
 * kernel reports the inline mode none); it is the context's, so it is set
 * again before each list (h_eth_post).
 */
H_API struct mlx5_qp *h_eth_sq(uint32_t qpn, unsigned wqe_cnt, int max_gs, int max_inline, unsigned bf_size,
			       unsigned uuarn, int sig_all, uint64_t seed, int csum, uint32_t start)
{
	struct mlx5_qp *qp = h_make_sq(0, qpn, wqe_cnt, max_gs, max_inline, bf_size, uuarn, sig_all, seed);
	qp->verbs_qp.qp.qp_type = IBV_QPT_RAW_PACKET;
	qp->qp_cap_cache = csum ? MLX5_CSUM_SUPPORT_RAW_OVER_ETH : 0;
	qp->sq.cur_post = start;
	return qp;
}

/*
 * TSO on the queue: the largest headers it takes (qp->max_tso_header, the
 * QP's requested max_tso_header that mlx5_create_qp keeps) and the most
 * payload bytes of one TSO WQE (qp->max_tso, the device's tso_caps.max_tso
 * cached at creation).
 */
H_API void h_eth_tso(struct mlx5_qp *qp, int max_tso_header, uint32_t max_tso)
{
	qp->max_tso_header = max_tso_header;
	qp->max_tso = max_tso;
}

/*
 * One ibv_post_send of the linked list at wr through libmlx5's
 * mlx5_post_send, with the context's minimum inline header size set to
 * min_inline first. Returns what it returned; *bad_index is the position
 * of the refused request in the list (-1 when none).
 */
H_API int h_eth_post(struct mlx5_qp *qp, unsigned min_inline, struct ibv_send_wr *wr, int *bad_index)
{
	struct ibv_send_wr *bad = NULL;
	h_context()->eth_min_inline_size = min_inline;
	int rc = mlx5_post_send(qp->ibv_qp, wr, &bad);
	*bad_index = -1;
	if (rc) {
		int i = 0;
		for (struct ibv_send_wr *w = wr; w; w = w->next, i++)
			if (w == bad)
				*bad_index = i;
	}
	return rc;
}
#else
/* The executable build has no raw packet section (it is library-driven). */
typedef int rrddmma_eth_section_is_library_only;
#endif
