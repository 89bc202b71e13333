/* RC ping-pong with libibverbs: a loopback pair, 10 rounds of a 64-byte
 * message each way, every payload checked.  pingpong-c DEVICE [GID_INDEX] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int die(const char *what)
{
	fprintf(stderr, "%s failed\n", what);
	exit(1);
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid gid, int gid_index)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
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
	a.timeout = 14;
	a.retry_cnt = 6;
	a.rnr_retry = 7;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return fprintf(stderr, "usage: pingpong-c DEVICE [GID_INDEX]\n"), 2;
	int gid_index = argc > 2 ? atoi(argv[2]) : 1, n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	struct ibv_context *ctx = dev ? ibv_open_device(dev) : NULL;
	ibv_free_device_list(list);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	static char buf[256];
	struct ibv_mr *mr = cq ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		die("device, PD, CQ or MR");
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp[2] = { ibv_create_qp(pd, &init), ibv_create_qp(pd, &init) };
	union ibv_gid gid;
	if (!qp[0] || !qp[1] || ibv_query_gid(ctx, 1, gid_index, &gid))
		die("QP or GID");
	connect_qp(qp[0], qp[1]->qp_num, gid, gid_index);
	connect_qp(qp[1], qp[0]->qp_num, gid, gid_index);
	for (int round = 0; round < 10; round++) {
		for (int dir = 0; dir < 2; dir++) {
			int at = dir * 128;
			memset(buf + at, round, 64);
			struct ibv_sge src = { (uintptr_t)buf + at, 64, mr->lkey }, dst = { (uintptr_t)buf + at + 64, 64, mr->lkey };
			struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &dst, .num_sge = 1 }, *rbad;
			struct ibv_send_wr sw = { .wr_id = 0, .sg_list = &src, .num_sge = 1, .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED }, *sbad;
			if (ibv_post_recv(qp[1 - dir], &rw, &rbad) || ibv_post_send(qp[dir], &sw, &sbad))
				die("post");
			struct ibv_wc wc[2];
			for (int got = 0, k; got < 2; got += k) {
				if ((k = ibv_poll_cq(cq, 2, wc)) < 0)
					die("ibv_poll_cq");
				for (int i = 0; i < k; i++)
					if (wc[i].status != IBV_WC_SUCCESS)
						die(ibv_wc_status_str(wc[i].status));
			}
			for (int i = 0; i < 64; i++)
				if (buf[at + 64 + i] != round)
					die("payload check");
		}
	}
	printf("pingpong ok: 10 rounds\n");
	ibv_destroy_qp(qp[0]);
	ibv_destroy_qp(qp[1]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
