/*
 * The C floor of `cargo xtask bench-peers`: the workloads of the Rust peers
 * (peers/common.rs) with plain libibverbs calls, busy polling with
 * ibv_poll_cq. callgrind counts the function peers_measured and what it
 * calls, minus peers_settle (the sleep after each post in `settle` runs).
 *
 *   peers_c DEVICE setup|write1|write32|read|send|faa ITERATIONS [settle]
 *
 * Prints the same RESULT line as the Rust peers (allocations: n/a).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define LEN (64 * 64)
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static void die(const char *what)
{
	perror(what);
	exit(1);
}

struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	char *buf;
};

static const char *dev_name;
static const char *kind;
static long iters;
static int settle, gid_index = 1;
static long empty;

static void modify(struct ibv_qp *qp, uint32_t dest, union ibv_gid gid, uint32_t psn, uint32_t rpsn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = ACCESS };
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

static void setup(struct pair *p)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev)
		die("no such device");
	p->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!p->ctx || !(p->pd = ibv_alloc_pd(p->ctx)) || !(p->cq = ibv_create_cq(p->ctx, 128, NULL, NULL, 0)))
		die("context, PD or CQ");
	struct ibv_qp_init_attr qa = { .send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!(p->a = ibv_create_qp(p->pd, &qa)) || !(p->b = ibv_create_qp(p->pd, &qa)))
		die("ibv_create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(p->ctx, 1, gid_index, &gid))
		die("ibv_query_gid");
	modify(p->a, p->b->qp_num, gid, 1, 2);
	modify(p->b, p->a->qp_num, gid, 2, 1);
	if (!(p->buf = calloc(1, LEN)) || !(p->mr = ibv_reg_mr(p->pd, p->buf, LEN, ACCESS)))
		die("ibv_reg_mr");
}

static void teardown(struct pair *p)
{
	ibv_dereg_mr(p->mr);
	free(p->buf);
	ibv_destroy_qp(p->a);
	ibv_destroy_qp(p->b);
	ibv_destroy_cq(p->cq);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
}

__attribute__((noinline)) void peers_settle(void)
{
	if (settle)
		usleep(300);
}

static void poll_n(struct pair *p, int want)
{
	struct ibv_wc wc[4];
	int got = 0;
	while (got < want) {
		int n = ibv_poll_cq(p->cq, 4, wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 0)
			empty++;
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "completion: %s\n", ibv_wc_status_str(wc[i].status));
				exit(1);
			}
		got += n;
	}
}

__attribute__((noinline)) void peers_measured(struct pair *p)
{
	if (!strcmp(kind, "setup")) {
		for (long i = 0; i < iters; i++) {
			struct pair q;
			setup(&q);
			teardown(&q);
		}
		return;
	}
	uint64_t base = (uintptr_t)p->buf, remote = base + 32 * 64;
	for (long it = 0; it < iters; it++) {
		struct ibv_sge sge[32];
		struct ibv_send_wr wr[32], *bad;
		int n = !strcmp(kind, "write32") ? 32 : 1;
		memset(wr, 0, sizeof(wr[0]) * n);
		for (int i = 0; i < n; i++) {
			sge[i] = (struct ibv_sge){ .addr = base + i * 64, .length = 64, .lkey = p->mr->lkey };
			wr[i].wr_id = i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			wr[i].send_flags = i + 1 == n ? IBV_SEND_SIGNALED : 0;
			wr[i].opcode = IBV_WR_RDMA_WRITE;
			wr[i].wr.rdma.remote_addr = remote + i * 64;
			wr[i].wr.rdma.rkey = p->mr->rkey;
		}
		int want = 1;
		if (!strcmp(kind, "read")) {
			wr[0].opcode = IBV_WR_RDMA_READ;
		} else if (!strcmp(kind, "faa")) {
			sge[0].length = 8;
			wr[0].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr[0].wr.atomic.remote_addr = remote;
			wr[0].wr.atomic.rkey = p->mr->rkey;
			wr[0].wr.atomic.compare_add = 1;
		} else if (!strcmp(kind, "send")) {
			struct ibv_sge rs = { .addr = remote, .length = 64, .lkey = p->mr->lkey };
			struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
			if (ibv_post_recv(p->b, &rw, &rbad))
				die("ibv_post_recv");
			wr[0].opcode = IBV_WR_SEND;
			want = 2;
		}
		if (ibv_post_send(p->a, wr, &bad))
			die("ibv_post_send");
		peers_settle();
		poll_n(p, want);
	}
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "settle"))) {
		fprintf(stderr, "usage: peers_c DEVICE setup|write1|write32|read|send|faa ITERATIONS [settle]\n");
		return 2;
	}
	dev_name = argv[1];
	kind = argv[2];
	iters = atol(argv[3]);
	settle = argc == 5;
	if (getenv("PEERS_GID_INDEX"))
		gid_index = atoi(getenv("PEERS_GID_INDEX"));
	struct pair p = { 0 };
	if (strcmp(kind, "setup"))
		setup(&p);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	peers_measured(&p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec), n = iters > 0 ? iters : 1;
	printf("RESULT crate=C workload=%s iters=%ld ns_per_op=%.1f allocs_per_op=n/a empty_polls_per_op=%.3f\n", kind,
	       iters, ns / n, empty / n);
	return 0;
}
