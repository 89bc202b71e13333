/*
 * The C side of `cargo xtask bench-verbs`: the same run as
 * examples/verbs_cost.rs with plain libibverbs calls. A loopback RC pair;
 * each iteration arms the CQ, posts BATCH requests of one KIND as one
 * prebuilt linked list (only the last signaled) with ibv_post_send, waits for
 * the completion event and takes the completion with one ibv_poll_cq.
 * KIND: write, read, send (BATCH receives posted first as one list; both CQs
 * polled), faa, cas (8-byte atomics); wr (RDMA WRITEs through ibv_wr_start /
 * ibv_wr_rdma_write / ibv_wr_set_sge / ibv_wr_complete); cqex (RDMA WRITEs,
 * the completion taken from an extended CQ with ibv_start_poll).
 * callgrind counts only the functions named verbs_cost_*.
 *
 *   verbs_cost DEVICE KIND BATCH ITERATIONS
 */
#include <errno.h>
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

__attribute__((noinline)) void verbs_cost_post_wr(struct ibv_qp_ex *qx, struct ibv_send_wr *wr, int n)
{
	ibv_wr_start(qx);
	for (int i = 0; i < n; i++) {
		qx->wr_id = wr[i].wr_id;
		qx->wr_flags = wr[i].send_flags;
		ibv_wr_rdma_write(qx, wr[i].wr.rdma.rkey, wr[i].wr.rdma.remote_addr);
		ibv_wr_set_sge(qx, wr[i].sg_list->lkey, wr[i].sg_list->addr, wr[i].sg_list->length);
	}
	if (ibv_wr_complete(qx))
		die("ibv_wr_complete");
}

__attribute__((noinline)) void verbs_cost_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *head)
{
	struct ibv_recv_wr *bad;
	if (ibv_post_recv(qp, head, &bad))
		die("ibv_post_recv");
}

/* On rxe before rdma-core 55, ibv_next_poll returning ENOENT has already
 * ended the pass, and ibv_end_poll must then be skipped; on other providers
 * and later rdma-core it must be called. A program that runs on any of them
 * decides when it opens the device, as rrddmma does per CQ; set in main. */
static int next_poll_ends;

/* One polling pass; -1 on a failed completion. */
__attribute__((noinline)) int verbs_cost_poll_ex(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int rc = ibv_start_poll(cq, &attr), n = 0;
	if (rc == ENOENT)
		return 0;
	if (rc)
		die("ibv_start_poll");
	for (;;) {
		if (cq->status != IBV_WC_SUCCESS) {
			ibv_end_poll(cq);
			return -1;
		}
		n++;
		rc = ibv_next_poll(cq);
		if (rc == ENOENT) {
			if (!next_poll_ends)
				ibv_end_poll(cq);
			return n;
		}
		if (rc)
			die("ibv_next_poll");
	}
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
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
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
	a.retry_cnt = 6;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: verbs_cost DEVICE write|read|send|faa|cas|wr|cqex BATCH ITERATIONS\n");
		return 2;
	}
	const char *kind = argv[2];
	int batch = atoi(argv[3]);
	long iters = atol(argv[4]);
	int k_send = !strcmp(kind, "send"), k_wr = !strcmp(kind, "wr"), k_cqex = !strcmp(kind, "cqex");
	int k_atomic = !strcmp(kind, "faa") || !strcmp(kind, "cas");
	if (batch < 1 || batch > MAXB ||
	    !(k_send || k_wr || k_cqex || k_atomic || !strcmp(kind, "write") || !strcmp(kind, "read")))
		return 2;
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev)
		die("no such device");
	/* The rdma-core here is 44: rxe's next_poll ends the pass. */
	next_poll_ends = !strncmp(ibv_get_device_name(dev), "rxe", 3);
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_port_attr pa;
	if (!ctx || ibv_query_port(ctx, 1, &pa))
		die("open");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx = NULL;
	if (k_cqex) {
		struct ibv_cq_init_attr_ex ca = { .cqe = 64, .channel = ch, .wc_flags = 0 };
		cqx = ibv_create_cq_ex(ctx, &ca);
		cq = cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
	} else {
		cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	}
	struct ibv_cq *rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !ch || !cq || !rcq)
		die("resources");
	struct ibv_qp_init_attr_ex ia = { .send_cq = cq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
					  .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 },
					  .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd };
	if (k_wr) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	}
	struct ibv_qp *qa = ibv_create_qp_ex(ctx, &ia);
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	struct ibv_qp *qb = ibv_create_qp_ex(ctx, &ia);
	if (!qa || !qb)
		die("ibv_create_qp");
	struct ibv_qp_ex *qx = k_wr ? ibv_qp_to_qp_ex(qa) : NULL;
	int gi = roce_v2_index(ctx, pa.gid_tbl_len);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gi, &gid))
		die("ibv_query_gid");
	connect_qp(qa, qb->qp_num, gid, gi, 1, 2);
	connect_qp(qb, qa->qp_num, gid, gi, 2, 1);
	/* Per request 64 bytes at i * 64 (local) and (batch + i) * 64 (remote). */
	char *buf = calloc(2 * 64, batch);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * 64 * batch,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_REMOTE_ATOMIC);
	if (!buf || !mr)
		die("ibv_reg_mr");
	struct ibv_sge sge[MAXB], rsge[MAXB];
	struct ibv_send_wr wr[MAXB];
	struct ibv_recv_wr rwr[MAXB];
	memset(wr, 0, sizeof wr);
	memset(rwr, 0, sizeof rwr);
	for (int i = 0; i < batch; i++) {
		uint64_t remote = (uintptr_t)buf + (batch + i) * 64;
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)buf + i * 64, .length = k_atomic ? 8 : 64, .lkey = mr->lkey };
		rsge[i] = (struct ibv_sge){ .addr = remote, .length = 64, .lkey = mr->lkey };
		wr[i].wr_id = i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = i + 1 == batch ? IBV_SEND_SIGNALED : 0;
		wr[i].next = i + 1 < batch ? &wr[i + 1] : NULL;
		if (!strcmp(kind, "read")) {
			wr[i].opcode = IBV_WR_RDMA_READ;
		} else if (k_send) {
			wr[i].opcode = IBV_WR_SEND;
		} else if (!strcmp(kind, "faa")) {
			wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr[i].wr.atomic.compare_add = 1;
		} else if (!strcmp(kind, "cas")) {
			wr[i].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		} else {
			wr[i].opcode = IBV_WR_RDMA_WRITE;
		}
		if (k_atomic) {
			wr[i].wr.atomic.remote_addr = remote;
			wr[i].wr.atomic.rkey = mr->rkey;
		} else if (!k_send) {
			wr[i].wr.rdma.remote_addr = remote;
			wr[i].wr.rdma.rkey = mr->rkey;
		}
		rwr[i].wr_id = i;
		rwr[i].sg_list = &rsge[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i + 1 < batch ? &rwr[i + 1] : NULL;
	}
	struct ibv_wc wc[32];
	for (long i = 0; i < iters; i++) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		if (k_send)
			verbs_cost_post_recv(qb, rwr);
		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq");
		if (k_wr)
			verbs_cost_post_wr(qx, wr, batch);
		else
			verbs_cost_post(qa, wr);
		if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
		int got, ok;
		if (k_cqex) {
			got = verbs_cost_poll_ex(cqx);
			ok = got >= 0;
		} else {
			got = verbs_cost_poll(cq, wc, 32);
			ok = got > 0 && wc[0].status == IBV_WC_SUCCESS;
		}
		if (got != 1 || !ok) {
			fprintf(stderr, "iteration %ld: %d completions\n", i, got);
			return 1;
		}
		if (k_send) {
			/* The receives completed before the send's acknowledgement; one
			 * measured poll takes them, a short one is topped up unmeasured. */
			int r = verbs_cost_poll(rcq, wc, 32);
			while (r < batch) {
				int more = ibv_poll_cq(rcq, 32 - r, wc + r);
				if (more < 0)
					die("ibv_poll_cq");
				r += more;
			}
			for (int j = 0; j < r; j++)
				if (wc[j].status != IBV_WC_SUCCESS) {
					fprintf(stderr, "iteration %ld: receive status %d\n", i, wc[j].status);
					return 1;
				}
		}
	}
	printf("%ld x %d %s requests posted and completed\n", iters, batch, kind);
	return 0;
}
