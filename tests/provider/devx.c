/*
 * DEVX commands: libmlx5's own mlx5dv_modify_qp_udp_sport,
 * mlx5dv_modify_qp_lag_port, mlx5dv_dci_stream_id_reset and
 * mlx5dv_create_mkey, driven on provider objects fabricated in ordinary
 * memory, with a fake kernel at the ioctl boundary: the harness is linked
 * with -Wl,--wrap=ioctl (tests/provider/build.rs), so libibverbs'
 * execute_ioctl reaches __wrap_ioctl below. While a capture is armed it
 * decodes the ib_uverbs_ioctl_hdr, records every command a method carries
 * (MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, _OBJ_CREATE/_MODIFY/_QUERY_CMD_IN) and
 * answers as a device would: status 0, a LAG in state 1 with ports 1 and 2,
 * a QP on LAG port 1, a new mkey index, a new general object id (the
 * scheduling elements of mlx5dv_sched_node_create / _leaf_create), an
 * object handle. Otherwise it is
 * the real ioctl. tests/provider/devx.rs builds the same requests with
 * rrddmma's mlx5dv::devx::cmd and compares the bytes.
 */
#include "mlx5.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_cmds.h>

int __real_ioctl(int fd, unsigned long req, ...);

#define DEVX_MAX_CMDS 8
#define DEVX_MAX_IN 4096

/* One recorded command: the method that carried it and its bytes. */
struct devx_rec {
	uint16_t object_id;
	uint16_t method_id;
	uint32_t len;
	uint8_t in[DEVX_MAX_IN];
};

static int devx_armed;
static unsigned devx_n;
static struct devx_rec devx_log[DEVX_MAX_CMDS];
static uint32_t devx_next_mkey_index = 0x1234;
/* The last answer written (its first bytes), for the Rust side to read the
 * created key through its own decoder. */
static uint8_t devx_last_out[64];
static uint32_t devx_last_outlen;
static uint32_t devx_next_obj_id = 0x100;

static void be32_put(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* The device's answer to the command `in` in `out` (outlen bytes). */
static void devx_answer(const uint8_t *in, uint32_t inlen, uint8_t *out, uint32_t outlen)
{
	uint16_t opcode = inlen >= 2 ? (uint16_t)(in[0] << 8 | in[1]) : 0;

	memset(out, 0, outlen);
	switch (opcode) {
	case 0x842: /* QUERY_LAG: lag_state 1 (bit 93), affinity 1 (bit 124) and 2 (bit 116) */
		if (outlen >= 16) {
			out[11] = 1;
			out[15] = 0x21;
		}
		break;
	case 0x50b: /* QUERY_QP: qpc.lag_tx_port_affinity (bit 196) 1 */
		if (outlen >= 25)
			out[24] = 0x01;
		break;
	case 0x200: /* CREATE_MKEY: mkey_index (bits 72..95) */
		if (outlen >= 12)
			be32_put(out + 8, devx_next_mkey_index++ & 0xffffff);
		break;
	case 0xa00: /* CREATE_GENERAL_OBJECT: obj_id (bits 64..95) */
		if (outlen >= 12)
			be32_put(out + 8, devx_next_obj_id++);
		break;
	default:
		break;
	}
	devx_last_outlen = outlen < sizeof(devx_last_out) ? outlen : sizeof(devx_last_out);
	memcpy(devx_last_out, out, devx_last_outlen);
}

static int devx_fake(struct ib_uverbs_ioctl_hdr *hdr)
{
	uint16_t in_id, out_id, handle_id = 0xffff;
	const uint8_t *in = NULL;
	uint32_t inlen = 0;

	if (hdr->object_id == MLX5_IB_OBJECT_DEVX && hdr->method_id == MLX5_IB_METHOD_DEVX_OTHER) {
		in_id = MLX5_IB_ATTR_DEVX_OTHER_CMD_IN;
		out_id = MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT;
	} else if (hdr->object_id == MLX5_IB_OBJECT_DEVX_OBJ && hdr->method_id == MLX5_IB_METHOD_DEVX_OBJ_CREATE) {
		in_id = MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN;
		out_id = MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT;
		handle_id = MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE;
	} else if (hdr->object_id == MLX5_IB_OBJECT_DEVX_OBJ && hdr->method_id == MLX5_IB_METHOD_DEVX_OBJ_MODIFY) {
		in_id = MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN;
		out_id = MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT;
	} else if (hdr->object_id == MLX5_IB_OBJECT_DEVX_OBJ && hdr->method_id == MLX5_IB_METHOD_DEVX_OBJ_QUERY) {
		in_id = MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN;
		out_id = MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT;
	} else {
		/* A method this fake kernel does not know (destroy and the rest): success. */
		return 0;
	}
	for (unsigned i = 0; i < hdr->num_attrs; i++) {
		struct ib_uverbs_attr *a = &hdr->attrs[i];
		if (a->attr_id == in_id) {
			/* Inputs of up to 8 bytes are inline in .data. */
			in = a->len <= 8 ? (const uint8_t *)&a->data : (const uint8_t *)(uintptr_t)a->data;
			inlen = a->len;
		}
	}
	if (devx_n < DEVX_MAX_CMDS && in) {
		struct devx_rec *r = &devx_log[devx_n++];
		r->object_id = hdr->object_id;
		r->method_id = hdr->method_id;
		r->len = inlen > DEVX_MAX_IN ? DEVX_MAX_IN : inlen;
		memcpy(r->in, in, r->len);
	}
	for (unsigned i = 0; i < hdr->num_attrs; i++) {
		struct ib_uverbs_attr *a = &hdr->attrs[i];
		if (a->attr_id == out_id)
			devx_answer(in, inlen, (uint8_t *)(uintptr_t)a->data, a->len);
		else if (a->attr_id == handle_id)
			a->data = 0x77;
	}
	return 0;
}

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (devx_armed && req == RDMA_VERBS_IOCTL)
		return devx_fake(arg);
	return __real_ioctl(fd, req, arg);
}

#ifdef HARNESS_LIB
#include "harness.h"
#include "mlx5_ifc.h"

static struct mlx5_pd devx_pd;
/* The last key mlx5dv_create_mkey made (kept, never destroyed). */
static struct mlx5dv_mkey *devx_last_mkey;

/* The context libmlx5's DEVX entries need: the private part execute_ioctl
 * reads the driver id from, and the capabilities the entries check. */
static void devx_context(void)
{
	struct mlx5_context *ctx = h_context();
	static int done;

	if (done)
		return;
	done = 1;
	if (!ctx->ibv_ctx.priv)
		ctx->ibv_ctx.priv = calloc(1, 4096);
	ctx->ibv_ctx.context.cmd_fd = -1;
	/* The DEVX entries (devx_qp_modify, devx_obj_create, ...) of the table,
	 * as libmlx5's context set-up installs them. */
	mlx5_set_dv_ctx_ops(ctx->dv_ctx_ops);
	ctx->entropy_caps.num_lag_ports = 2;
	ctx->entropy_caps.lag_tx_port_affinity = 1;
	ctx->entropy_caps.rts2rts_qp_udp_sport = 1;
	ctx->entropy_caps.rts2rts_lag_tx_port_affinity = 1;
	ctx->qpc_extension_cap = 1;
	ctx->dci_streams_caps.max_log_num_errored = 4;
	ctx->dci_streams_caps.max_log_num_concurent = 6;
	/* NIC scheduling: TSARs with DWRR, queue groups, both attributes, QPs. */
	ctx->qos_caps.qos = 1;
	ctx->qos_caps.nic_bw_share = 1;
	ctx->qos_caps.nic_rate_limit = 1;
	ctx->qos_caps.nic_qp_scheduling = 1;
	ctx->qos_caps.nic_element_type = ELEMENT_TYPE_CAP_MASK_TASR | ELEMENT_TYPE_CAP_MASK_QUEUE_GROUP;
	ctx->qos_caps.nic_tsar_type = TSAR_TYPE_CAP_MASK_DWRR;
	devx_pd.ibv_pd.context = &ctx->ibv_ctx.context;
}

/* Arms the fake kernel and forgets what it recorded. While armed the
 * context is marked extended (execute_ioctl reaches its private part through
 * verbs_get_ctx, which answers NULL otherwise); disarmed, it is as the other
 * sections made it. */
H_API void h_devx_arm(int on)
{
	static void *saved_abi;
	struct mlx5_context *ctx = h_context();

	devx_context();
	if (on && !devx_armed) {
		saved_abi = ctx->ibv_ctx.context.abi_compat;
		ctx->ibv_ctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	} else if (!on && devx_armed) {
		ctx->ibv_ctx.context.abi_compat = saved_abi;
	}
	devx_armed = on;
	devx_n = 0;
}

/* How many commands were recorded; the i-th one's method and bytes
 * (at most cap of them copied; returns its length). */
H_API unsigned h_devx_count(void)
{
	return devx_n;
}
H_API uint32_t h_devx_get(unsigned i, uint16_t *object_id, uint16_t *method_id, uint8_t *buf, uint32_t cap)
{
	if (i >= devx_n)
		return 0;
	*object_id = devx_log[i].object_id;
	*method_id = devx_log[i].method_id;
	memcpy(buf, devx_log[i].in, devx_log[i].len < cap ? devx_log[i].len : cap);
	return devx_log[i].len;
}

/* A QP in RTS with number qpn: kind 0 RC, 2 DCI. */
H_API struct ibv_qp *h_devx_qp(int kind, uint32_t qpn)
{
	devx_context();
	struct mlx5_qp *qp = h_make_sq(kind, qpn, 64, 1, 0, 0, 1, 0, qpn);
	qp->verbs_qp.qp.state = IBV_QPS_RTS;
	qp->verbs_qp.qp.handle = qpn ^ 0x5a5a;
	if (kind == 2)
		qp->dc_type = MLX5DV_DCTYPE_DCI;
	return &qp->verbs_qp.qp;
}

/* libmlx5's entries, each returning its errno value (0: sent and answered). */
H_API int h_devx_udp_sport(struct ibv_qp *qp, uint16_t sport)
{
	return mlx5dv_modify_qp_udp_sport(qp, sport);
}
H_API int h_devx_lag_port(struct ibv_qp *qp, uint8_t port)
{
	return mlx5dv_modify_qp_lag_port(qp, port);
}
H_API int h_devx_dci_reset(struct ibv_qp *qp, uint16_t stream)
{
	return mlx5dv_dci_stream_id_reset(qp, stream);
}
/* mlx5dv_create_mkey in a PD of number pdn; the key made is not destroyed
 * (its destroy would be one more ioctl; the harness keeps it). Returns
 * errno, 0 on success, and the key and its max_entries. */
H_API int h_devx_create_mkey(uint32_t pdn, uint16_t max_entries, uint32_t flags, uint32_t *key, uint16_t *entries)
{
	devx_context();
	devx_pd.pdn = pdn;
	struct mlx5dv_mkey_init_attr attr = { .pd = &devx_pd.ibv_pd, .create_flags = flags,
					      .max_entries = max_entries };
	struct mlx5dv_mkey *mk = mlx5dv_create_mkey(&attr);
	if (!mk)
		return errno ? errno : -1;
	*key = mk->lkey;
	*entries = attr.max_entries;
	devx_last_mkey = mk;
	return 0;
}

/* The last answer the fake kernel wrote: up to cap bytes copied; returns its length. */
H_API uint32_t h_devx_last_out(uint8_t *buf, uint32_t cap)
{
	memcpy(buf, devx_last_out, devx_last_outlen < cap ? devx_last_outlen : cap);
	return devx_last_outlen;
}

/* Configures the last key mlx5dv_create_mkey made (libmlx5's own struct
 * mlx5_mkey, not a fabricated one) on qp (h_mkey_sq): one batch of
 * mlx5dv_wr_mkey_configure with the access setter and the list setter.
 * Returns ibv_wr_complete's value. */
H_API int h_devx_umr(struct mlx5_qp *qp, uint32_t wr_flags, uint32_t access, uint16_t n, const struct ibv_sge *sge)
{
	struct ibv_qp_ex *ex = &qp->verbs_qp.qp_ex;
	struct mlx5dv_qp_ex *dv = &qp->dv_qp;
	struct mlx5dv_mkey_conf_attr attr = { 0 };

	if (!devx_last_mkey)
		abort();
	ibv_wr_start(ex);
	ex->wr_id = 1;
	ex->wr_flags = wr_flags;
	mlx5dv_wr_mkey_configure(dv, devx_last_mkey, 2, &attr);
	mlx5dv_wr_set_mkey_access_flags(dv, access);
	mlx5dv_wr_set_mkey_layout_list(dv, n, sge);
	return ibv_wr_complete(ex);
}

/* The scheduling entries: a node (leaf = 0) or a leaf under parent (NULL:
 * a root node) with flags and attributes; the element made (NULL on
 * failure, *rc its errno) and its object id. Elements are kept (their
 * destroy would be one more ioctl). */
H_API void *h_devx_sched_create(int leaf, void *parent, uint32_t flags, uint32_t bw_share, uint32_t max_avg_bw,
				uint32_t *id, int *rc)
{
	devx_context();
	struct mlx5dv_sched_attr attr = { .parent = parent, .flags = flags, .bw_share = bw_share,
					  .max_avg_bw = max_avg_bw };
	errno = 0;
	if (leaf) {
		struct mlx5dv_sched_leaf *l = mlx5dv_sched_leaf_create(&h_context()->ibv_ctx.context, &attr);
		*rc = l ? 0 : (errno ? errno : -1);
		*id = l ? l->obj->object_id : 0;
		return l;
	}
	struct mlx5dv_sched_node *n = mlx5dv_sched_node_create(&h_context()->ibv_ctx.context, &attr);
	*rc = n ? 0 : (errno ? errno : -1);
	*id = n ? n->obj->object_id : 0;
	return n;
}
H_API int h_devx_sched_modify(int leaf, void *elem, void *parent, uint32_t flags, uint32_t bw_share,
			      uint32_t max_avg_bw)
{
	struct mlx5dv_sched_attr attr = { .parent = parent, .flags = flags, .bw_share = bw_share,
					  .max_avg_bw = max_avg_bw };
	return leaf ? mlx5dv_sched_leaf_modify(elem, &attr) : mlx5dv_sched_node_modify(elem, &attr);
}
H_API int h_devx_qp_sched(struct ibv_qp *qp, void *requester, void *responder)
{
	return mlx5dv_modify_qp_sched_elem(qp, requester, responder);
}
#endif
