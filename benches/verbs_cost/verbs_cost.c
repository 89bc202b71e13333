/*
 * The C side of `cargo xtask bench-verbs`: the same run as
 * examples/verbs_cost.rs with plain libibverbs calls. A loopback RC pair;
 * each iteration arms the CQ, posts BATCH RDMA WRITEs of 64 bytes as one
 * prebuilt linked list (only the last signaled) with ibv_post_send, waits for
 * the completion event and takes the completion with one ibv_poll_cq.
 * callgrind counts only verbs_cost_post and verbs_cost_poll.
 *
 *   verbs_cost DEVICE BATCH ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define MAXB 32

static void die(const char *what)
{
	perror(what);
	exit(1);
}

__attribute__((noinline)) void verbs_cost_post(struct ibv_qp *qp, struct ibv_send_wr *head)
{
	struct ibv_send_wr *bad;
	if (ibv_post_send(qp, head, &bad))
		die("ibv_post_send");
}

__attribute__((noinline)) int verbs_cost_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	int got = ibv_poll_cq(cq, n, wc);
	if (got < 0)
		die("ibv_poll_cq");
	return got;
}

/* The RoCE v2 GID mapping an IPv4 address, else the first RoCE v2 GID, else 0. */
static int roce_v2_index(struct ibv_context *ctx, int len)
{
	int first = -1;
	for (int i = 0; i < len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, 1, i, &e, 0) || e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		static const unsigned char v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (!memcmp(e.gid.raw, v4, 12))
			return i;
		if (first < 0)
			first = i;
	}
	return first < 0 ? 0 : first;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid gid, int gid_index, uint32_t psn, uint32_t rpsn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = rpsn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: verbs_cost DEVICE BATCH ITERATIONS\n");
		return 2;
	}
	int batch = atoi(argv[2]);
	long iters = atol(argv[3]);
	if (batch < 1 || batch > MAXB)
		return 2;
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev)
		die("no such device");
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_port_attr pa;
	if (!ctx || ibv_query_port(ctx, 1, &pa))
		die("open");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !ch || !cq || !rcq)
		die("resources");
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qa = ibv_create_qp(pd, &ia), *qb = ibv_create_qp(pd, &ia);
	if (!qa || !qb)
		die("ibv_create_qp");
	int gi = roce_v2_index(ctx, pa.gid_tbl_len);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gi, &gid))
		die("ibv_query_gid");
	connect_qp(qa, qb->qp_num, gid, gi, 1, 2);
	connect_qp(qb, qa->qp_num, gid, gi, 2, 1);
	char *buf = calloc(2 * 64, batch);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * 64 * batch, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!buf || !mr)
		die("ibv_reg_mr");
	struct ibv_sge sge[MAXB];
	struct ibv_send_wr wr[MAXB];
	memset(wr, 0, sizeof wr);
	for (int i = 0; i < batch; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)buf + i * 64, .length = 64, .lkey = mr->lkey };
		wr[i].wr_id = i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = i + 1 == batch ? IBV_SEND_SIGNALED : 0;
		wr[i].wr.rdma.remote_addr = (uintptr_t)buf + (batch + i) * 64;
		wr[i].wr.rdma.rkey = mr->rkey;
		wr[i].next = i + 1 < batch ? &wr[i + 1] : NULL;
	}
	struct ibv_wc wc[32];
	for (long i = 0; i < iters; i++) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq");
		verbs_cost_post(qa, wr);
		if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
		int got = verbs_cost_poll(cq, wc, 32);
		if (got != 1 || wc[0].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "iteration %ld: %d completions, status %d\n", i, got, got > 0 ? wc[0].status : -1);
			return 1;
		}
	}
	printf("%ld x %d RDMA WRITEs posted and completed\n", iters, batch);
	return 0;
}
