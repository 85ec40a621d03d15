/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "util/macro.h"
#include "daemon/rdma/verbs.h"

/* The endpoint's queue pairs: peers post on them, the daemon never does;
 * one entry each is what the verbs require. */
#define QP_DEPTH 1

struct vb_device {
	struct ibv_context *ctx;
};

struct vb_pd {
	struct ibv_pd *pd;
};

struct vb_mr {
	struct ibv_mr *mr;
};

struct vb_qp {
	struct ibv_qp *qp;
	struct ibv_cq *cq; /* owned (qp_create), or NULL: the conn's QP */
	uint8_t port;
};

struct vb_cq {
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
};

/*
 * An active connection. Its QP is ours, not the id's (ibv_create_qp, never
 * rdma_create_qp): with a QP on the id, librdmacm moves it INIT → INIT with
 * the CM's attributes when the reply comes, and the kernel's CM always puts
 * IBV_ACCESS_REMOTE_WRITE in them (READ and atomics too when responder
 * resources were offered), so whatever answered at the endpoint could WRITE
 * into every MR of the PD that allows it. Without one, librdmacm reports
 * CONNECT_RESPONSE and leaves the transitions to us: INIT with access 0
 * before the connect, RTR and RTS on the response with the CM's path
 * attributes (access still 0), then rdma_establish().
 */
struct vb_conn {
	struct rdma_event_channel *channel;
	struct rdma_cm_id *id;
	struct vb_qp qp;
	bool has_qp;
	/* The RC transport's parameters for RTS (struct vb_conn_param). */
	uint8_t ack_timeout, retry_count, rnr_retry;
};

struct vb_listener {
	struct rdma_event_channel *channel;
	struct rdma_cm_id *id;
};

struct vb_cm_conn {
	struct rdma_cm_id *id;
	struct ibv_cq *cq; /* its own, when cm_accept made the QP */
	struct vb_qp qp;
	bool has_qp;
};

/* rdma_get_devices() hands out one array for the whole process. */
static struct ibv_context **cm_contexts;
static struct vb_device *devices;
static size_t n_devices;

/* libibverbs returns NULL with errno set, or a positive errno: one place
 * turns both into -errno. */
static int fail(int e)
{
	return e > 0 ? -e : -EIO;
}

static int real_devices_open(struct vb_device ***ret, size_t *ret_n)
{
	struct vb_device **list;
	int n = 0;

	if (!cm_contexts) {
		cm_contexts = rdma_get_devices(&n);
		if (!cm_contexts)
			return errno == ENODEV || errno == ENOENT ? (*ret_n = 0, *ret = NULL, 0) :
								    fail(errno);
		devices = calloc(n ? n : 1, sizeof(*devices));
		if (!devices) {
			rdma_free_devices(cm_contexts);
			cm_contexts = NULL;
			return -ENOMEM;
		}
		n_devices = n;
		for (int i = 0; i < n; i++)
			devices[i].ctx = cm_contexts[i];
	}
	list = calloc(n_devices ? n_devices : 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (size_t i = 0; i < n_devices; i++) {
		int flags = fcntl(devices[i].ctx->async_fd, F_GETFL);

		/* Events are read from the loop: never block on them. */
		if (flags >= 0)
			fcntl(devices[i].ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
		list[i] = &devices[i];
	}
	*ret = list;
	*ret_n = n_devices;
	return 0;
}

static void real_devices_close(struct vb_device **devs, size_t n)
{
	(void)n;
	free(devs);
	if (cm_contexts)
		rdma_free_devices(cm_contexts);
	cm_contexts = NULL;
	free(devices);
	devices = NULL;
	n_devices = 0;
}

static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "NOP";
	}
}

static const char *gid_type_name(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCEv1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCEv2";
	default:
		return "unknown";
	}
}

static int real_device_query(struct vb_device *dev, struct vb_device_info *ret)
{
	struct ibv_context *ctx = dev->ctx;
	struct ibv_device_attr attr;
	struct ibv_gid_entry gids[VB_GIDS_MAX * VB_PORTS_MAX];
	ssize_t n_gids;
	int r;

	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", ibv_get_device_name(ctx->device));
	r = ibv_query_device(ctx, &attr);
	if (r)
		return fail(r);
	snprintf(ret->node_guid, sizeof(ret->node_guid), "%016llx",
		 (unsigned long long)be64toh(attr.node_guid));
	ret->mlx5 = mlx5dv_is_supported(ctx->device);
	ret->max_mr_size = attr.max_mr_size;
	ret->max_mr = attr.max_mr;
	ret->max_qp = attr.max_qp;
	ret->max_qp_rd_atom = attr.max_qp_rd_atom;
	ret->max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
	ret->max_qp_wr = attr.max_qp_wr;
	ret->max_cqe = attr.max_cqe;
	ret->n_ports = MIN((size_t)attr.phys_port_cnt, (size_t)VB_PORTS_MAX);

	n_gids = ibv_query_gid_table(ctx, gids, ELEMENTSOF(gids), 0);
	for (size_t p = 0; p < ret->n_ports; p++) {
		struct vb_port *port = &ret->ports[p];
		struct ibv_port_attr pa;

		port->num = (uint8_t)(p + 1);
		r = ibv_query_port(ctx, port->num, &pa);
		if (r)
			return fail(r);
		port->state = port_state_name(pa.state);
		port->active = pa.state == IBV_PORT_ACTIVE;
		port->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" :
									      "InfiniBand";
		port->mtu = 128U << pa.active_mtu;
		port->max_msg_sz = pa.max_msg_sz;
		port->lid = pa.lid;
		for (ssize_t g = 0; g < n_gids && port->n_gids < VB_GIDS_MAX; g++) {
			struct vb_gid *out = &port->gids[port->n_gids];

			if (gids[g].port_num != port->num)
				continue;
			out->index = gids[g].gid_index;
			memcpy(out->raw, gids[g].gid.raw, 16);
			inet_ntop(AF_INET6, out->raw, out->text, sizeof(out->text));
			out->type = gid_type_name(gids[g].gid_type);
			port->n_gids++;
		}
	}
	return 0;
}

static int real_device_async_fd(struct vb_device *dev)
{
	return dev->ctx->async_fd;
}

static int real_device_next_event(struct vb_device *dev, struct vb_event *ret)
{
	struct ibv_async_event ev;

	if (ibv_get_async_event(dev->ctx, &ev) < 0)
		return errno == EAGAIN ? -EAGAIN : fail(errno);
	ret->name = ibv_event_type_str(ev.event_type);
	ret->port = 0;
	switch (ev.event_type) {
	case IBV_EVENT_PORT_ACTIVE:
		ret->kind = VB_EVENT_PORT_ACTIVE;
		ret->port = (uint8_t)ev.element.port_num;
		break;
	case IBV_EVENT_PORT_ERR:
		ret->kind = VB_EVENT_PORT_DOWN;
		ret->port = (uint8_t)ev.element.port_num;
		break;
	case IBV_EVENT_DEVICE_FATAL:
		ret->kind = VB_EVENT_DEVICE_FATAL;
		break;
	default:
		ret->kind = VB_EVENT_OTHER;
		break;
	}
	ibv_ack_async_event(&ev);
	return 0;
}

static int real_pd_alloc(struct vb_device *dev, struct vb_pd **ret)
{
	struct vb_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return -ENOMEM;
	pd->pd = ibv_alloc_pd(dev->ctx);
	if (!pd->pd) {
		int r = fail(errno);

		free(pd);
		return r;
	}
	*ret = pd;
	return 0;
}

static int real_pd_free(struct vb_pd *pd)
{
	int r;

	if (!pd)
		return 0;
	r = ibv_dealloc_pd(pd->pd);
	if (r)
		return fail(r);
	free(pd);
	return 0;
}

static int ibv_access(unsigned a)
{
	return (a & VB_ACCESS_LOCAL_WRITE ? IBV_ACCESS_LOCAL_WRITE : 0) |
	       (a & VB_ACCESS_REMOTE_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0) |
	       (a & VB_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ : 0) |
	       (a & VB_ACCESS_REMOTE_ATOMIC ? IBV_ACCESS_REMOTE_ATOMIC : 0);
}

static int wrap_mr(struct ibv_mr *m, struct vb_mr **ret)
{
	struct vb_mr *mr;

	if (!m)
		return fail(errno);
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		ibv_dereg_mr(m);
		return -ENOMEM;
	}
	mr->mr = m;
	*ret = mr;
	return 0;
}

static int real_mr_reg(struct vb_pd *pd, void *addr, size_t len, unsigned access,
		       struct vb_mr **ret)
{
	return wrap_mr(ibv_reg_mr(pd->pd, addr, len, ibv_access(access)), ret);
}

static int real_mr_reg_dmabuf(struct vb_pd *pd, int fd, uint64_t offset, size_t len, uint64_t iova,
			      unsigned access, struct vb_mr **ret)
{
	return wrap_mr(ibv_reg_dmabuf_mr(pd->pd, offset, len, iova, fd, ibv_access(access)), ret);
}

static int real_mr_dereg(struct vb_mr *mr)
{
	int r;

	if (!mr)
		return 0;
	r = ibv_dereg_mr(mr->mr);
	if (r)
		return fail(r);
	free(mr);
	return 0;
}

static void real_mr_keys(const struct vb_mr *mr, uint32_t *lkey, uint32_t *rkey)
{
	*lkey = mr->mr->lkey;
	*rkey = mr->mr->rkey;
}

static int real_qp_create(struct vb_pd *pd, uint8_t port, struct vb_qp **ret)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = QP_DEPTH,
			 .max_recv_wr = QP_DEPTH,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = port,
		/* What remote peers may do through this QP; each MR's own
		 * access still applies. */
		.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	struct vb_qp *qp;
	int r;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->port = port;
	qp->cq = ibv_create_cq(pd->pd->context, QP_DEPTH * 2, NULL, NULL, 0);
	if (!qp->cq) {
		r = fail(errno);
		goto fail_free;
	}
	init.send_cq = init.recv_cq = qp->cq;
	qp->qp = ibv_create_qp(pd->pd, &init);
	if (!qp->qp) {
		r = fail(errno);
		goto fail_cq;
	}
	r = ibv_modify_qp(qp->qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r) {
		r = fail(r);
		ibv_destroy_qp(qp->qp);
		goto fail_cq;
	}
	*ret = qp;
	return 0;

fail_cq:
	ibv_destroy_cq(qp->cq);
fail_free:
	free(qp);
	return r;
}

static enum ibv_mtu mtu_enum(unsigned bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

static int real_qp_connect(struct vb_qp *qp, const struct vb_qp_endpoint *peer, uint32_t gid_index,
			   struct vb_qp_endpoint *ret_local)
{
	struct ibv_context *ctx = qp->qp->context;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	struct ibv_qp_attr attr;
	enum ibv_mtu path_mtu;
	uint32_t psn;
	int r;

	r = ibv_query_port(ctx, qp->port, &pa);
	if (r)
		return fail(r);
	r = ibv_query_gid(ctx, qp->port, (int)gid_index, &gid);
	if (r)
		return fail(r);
	/* A random first packet sequence number, as the verbs advise. */
	if (getrandom(&psn, sizeof(psn), GRND_NONBLOCK) != sizeof(psn))
		psn = (uint32_t)random();
	psn &= 0xffffff;

	/* What the peer asked for, never more than the port does. Kept: the
	 * attributes are cleared for RTS, and the answer must say the MTU
	 * the queue pair is really in. */
	path_mtu = MIN(mtu_enum(peer->mtu ?: 1024), pa.active_mtu);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = path_mtu;
	attr.dest_qp_num = peer->qpn;
	attr.rq_psn = peer->psn & 0xffffff;
	attr.max_dest_rd_atomic = 16;
	attr.min_rnr_timer = 12;
	attr.ah_attr.port_num = qp->port;
	attr.ah_attr.dlid = peer->lid;
	attr.ah_attr.is_global = 1;
	memcpy(attr.ah_attr.grh.dgid.raw, peer->gid, 16);
	attr.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	attr.ah_attr.grh.hop_limit = 64;
	r = ibv_modify_qp(qp->qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r)
		return fail(r);

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = psn;
	attr.max_rd_atomic = 1;
	r = ibv_modify_qp(qp->qp, &attr,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (r)
		return fail(r);

	*ret_local = (struct vb_qp_endpoint){
		.qpn = qp->qp->qp_num,
		.psn = psn,
		.lid = pa.lid,
		.gid_index = gid_index,
		.port = qp->port,
		.mtu = 128U << path_mtu,
	};
	memcpy(ret_local->gid, gid.raw, 16);
	return 0;
}

static void real_qp_destroy(struct vb_qp *qp)
{
	if (!qp)
		return;
	ibv_destroy_qp(qp->qp);
	ibv_destroy_cq(qp->cq);
	free(qp);
}

static int real_cm_listen(const struct sockaddr *addr, struct vb_listener **ret)
{
	struct vb_listener *l;
	int r, flags;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->channel = rdma_create_event_channel();
	if (!l->channel) {
		r = fail(errno);
		free(l);
		return r;
	}
	flags = fcntl(l->channel->fd, F_GETFL);
	if (flags < 0 || fcntl(l->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    rdma_create_id(l->channel, &l->id, NULL, RDMA_PS_TCP) < 0) {
		r = fail(errno);
		rdma_destroy_event_channel(l->channel);
		free(l);
		return r;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)addr) < 0 || rdma_listen(l->id, 64) < 0) {
		r = fail(errno);
		rdma_destroy_id(l->id);
		rdma_destroy_event_channel(l->channel);
		free(l);
		return r;
	}
	*ret = l;
	return 0;
}

static int real_cm_fd(struct vb_listener *l)
{
	return l->channel->fd;
}

/*
 * Disconnect first, so that the peer learns at once instead of by timeout;
 * then the QP goes to error and away: the device touches no memory through
 * it after this returns.
 */
static void cm_id_hangup(struct rdma_cm_id *id, bool has_qp)
{
	rdma_disconnect(id);
	if (has_qp)
		rdma_destroy_qp(id);
}

/* What a request or a reject carried, as much as fits. */
static size_t cm_private_data(const struct rdma_cm_event *ev, uint8_t *buf)
{
	size_t len = MIN((size_t)ev->param.conn.private_data_len, (size_t)VB_PRIVATE_DATA_MAX);

	if (!ev->param.conn.private_data)
		return 0;
	memcpy(buf, ev->param.conn.private_data, len);
	return len;
}

static struct vb_device *device_of(struct ibv_context *ctx)
{
	for (size_t i = 0; i < n_devices; i++)
		if (devices[i].ctx == ctx)
			return &devices[i];
	return NULL;
}

static int real_cm_next_event(struct vb_listener *l, struct vb_cm_event *ret)
{
	struct rdma_cm_event *ev;
	struct vb_cm_conn *c;

	if (rdma_get_cm_event(l->channel, &ev) < 0)
		return errno == EAGAIN ? -EAGAIN : fail(errno);

	memset(ret, 0, sizeof(*ret));
	ret->name = rdma_event_str(ev->event);
	ret->status = ev->status;
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		ret->kind = VB_CM_REQUEST;
		c = calloc(1, sizeof(*c));
		if (!c) {
			rdma_reject(ev->id, NULL, 0);
			rdma_ack_cm_event(ev);
			return -ENOMEM;
		}
		c->id = ev->id;
		ev->id->context = c;
		ret->conn = c;
		ret->device = device_of(ev->id->verbs);
		memcpy(&ret->peer, rdma_get_peer_addr(ev->id), sizeof(struct sockaddr_in6));
		ret->private_len = cm_private_data(ev, ret->private_data);
		ret->initiator_depth = ev->param.conn.initiator_depth;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		ret->kind = VB_CM_ESTABLISHED;
		ret->conn = ev->id->context;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		ret->kind = VB_CM_DISCONNECTED;
		ret->conn = ev->id == l->id ? NULL : ev->id->context;
		break;
	default:
		ret->kind = VB_CM_OTHER;
		ret->conn = ev->id == l->id ? NULL : ev->id->context;
		break;
	}
	/* Everything needed is copied: ack now, so that destroying the id
	 * later never waits for an unacked event. */
	rdma_ack_cm_event(ev);
	return 0;
}

/* c's QP in pd on cq (the caller's, or NULL: one of c's own). */
static int cm_create_qp(struct vb_cm_conn *c, struct vb_pd *pd, struct ibv_cq *cq,
			uint32_t max_send, uint32_t max_recv)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = max_send ?: 1,
			 .max_recv_wr = max_recv ?: 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	if (c->has_qp)
		return -EEXIST;
	if (pd->pd->context != c->id->verbs)
		return -EXDEV;
	if (!cq) {
		c->cq = ibv_create_cq(c->id->verbs, QP_DEPTH * 2, NULL, NULL, 0);
		if (!c->cq)
			return fail(errno);
		cq = c->cq;
	}
	init.send_cq = init.recv_cq = cq;
	if (rdma_create_qp(c->id, pd->pd, &init) < 0)
		return fail(errno);
	c->has_qp = true;
	c->qp = (struct vb_qp){ .qp = c->id->qp, .port = c->id->port_num };
	return 0;
}

static int real_cm_qp_create(struct vb_cm_conn *c, struct vb_pd *pd, struct vb_cq *cq,
			     const struct vb_qp_caps *caps, struct vb_qp **ret)
{
	int r = cm_create_qp(c, pd, cq->cq, caps->max_send_wr, caps->max_recv_wr);

	if (r < 0)
		return r;
	*ret = &c->qp;
	return 0;
}

static int real_cm_accept(struct vb_cm_conn *c, struct vb_pd *pd, uint8_t responder_resources,
			  uint32_t *ret_qpn)
{
	struct rdma_conn_param param = {
		.responder_resources = responder_resources,
		.initiator_depth = 0,
		.rnr_retry_count = 7,
	};
	int r;

	if (!c->has_qp) {
		r = cm_create_qp(c, pd, NULL, QP_DEPTH, QP_DEPTH);
		if (r < 0)
			return r;
	}
	if (rdma_accept(c->id, &param) < 0)
		return fail(errno);
	*ret_qpn = c->id->qp->qp_num;
	return 0;
}

static int real_cm_reject(struct vb_cm_conn *c, const void *data, size_t len)
{
	if (rdma_reject(c->id, data, (uint8_t)MIN(len, (size_t)VB_PRIVATE_DATA_MAX)) < 0)
		return fail(errno);
	return 0;
}

static void real_cm_conn_destroy(struct vb_cm_conn *c)
{
	if (!c)
		return;
	cm_id_hangup(c->id, c->has_qp);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	c->id->context = NULL;
	rdma_destroy_id(c->id);
	free(c);
}

static void real_cm_listener_close(struct vb_listener *l)
{
	if (!l)
		return;
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->channel);
	free(l);
}

static int set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int real_cq_create(struct vb_device *dev, unsigned depth, struct vb_cq **ret)
{
	struct vb_cq *cq = calloc(1, sizeof(*cq));
	int r;

	if (!cq)
		return -ENOMEM;
	cq->channel = ibv_create_comp_channel(dev->ctx);
	if (!cq->channel) {
		r = fail(errno);
		goto fail_free;
	}
	r = set_nonblock(cq->channel->fd);
	if (r < 0)
		goto fail_channel;
	cq->cq = ibv_create_cq(dev->ctx, (int)depth, cq, cq->channel, 0);
	if (!cq->cq) {
		r = fail(errno);
		goto fail_channel;
	}
	r = ibv_req_notify_cq(cq->cq, 0);
	if (r) {
		r = fail(r);
		ibv_destroy_cq(cq->cq);
		goto fail_channel;
	}
	*ret = cq;
	return 0;

fail_channel:
	ibv_destroy_comp_channel(cq->channel);
fail_free:
	free(cq);
	return r;
}

static int real_cq_fd(struct vb_cq *cq)
{
	return cq->channel->fd;
}

static int real_cq_event(struct vb_cq *cq)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int r;

	if (ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx) < 0)
		return errno == EAGAIN ? -EAGAIN : fail(errno);
	/* One at a time: acking costs a mutex, and events are rare next to
	 * completions (one per arming). */
	ibv_ack_cq_events(ev_cq, 1);
	r = ibv_req_notify_cq(cq->cq, 0);
	return r ? fail(r) : 0;
}

static enum vb_wc_status wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return VB_WC_SUCCESS;
	case IBV_WC_WR_FLUSH_ERR:
		return VB_WC_FLUSH_ERR;
	case IBV_WC_REM_ACCESS_ERR:
		return VB_WC_REM_ACCESS_ERR;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_LOC_LEN_ERR:
		return VB_WC_LOC_ACCESS_ERR;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return VB_WC_RETRY_EXC_ERR;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
		return VB_WC_REM_OP_ERR;
	default:
		return VB_WC_OTHER_ERR;
	}
}

static int real_cq_poll(struct vb_cq *cq, struct vb_wc *out, unsigned n)
{
	struct ibv_wc wc[32];
	int got;

	got = ibv_poll_cq(cq->cq, (int)MIN(n, (unsigned)ELEMENTSOF(wc)), wc);
	if (got < 0)
		return -EIO;
	for (int i = 0; i < got; i++) {
		out[i] = (struct vb_wc){
			.wr_id = wc[i].wr_id,
			.status = wc_status(wc[i].status),
			.status_name = ibv_wc_status_str(wc[i].status),
			.vendor_err = wc[i].vendor_err,
			.byte_len = wc[i].byte_len,
			.recv = (wc[i].opcode & IBV_WC_RECV) != 0,
			.has_imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0,
			.imm = be32toh(wc[i].imm_data),
		};
	}
	return got;
}

static void real_cq_destroy(struct vb_cq *cq)
{
	if (!cq)
		return;
	ibv_destroy_cq(cq->cq);
	ibv_destroy_comp_channel(cq->channel);
	free(cq);
}

static int real_conn_create(struct vb_conn **ret)
{
	struct vb_conn *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->channel = rdma_create_event_channel();
	if (!c->channel) {
		r = fail(errno);
		free(c);
		return r;
	}
	r = set_nonblock(c->channel->fd);
	if (r == 0 && rdma_create_id(c->channel, &c->id, c, RDMA_PS_TCP) < 0)
		r = fail(errno);
	if (r < 0) {
		rdma_destroy_event_channel(c->channel);
		free(c);
		return r;
	}
	*ret = c;
	return 0;
}

static int real_conn_fd(struct vb_conn *c)
{
	return c->channel->fd;
}

static int real_conn_resolve_addr(struct vb_conn *c, const struct sockaddr *src,
				  const struct sockaddr *dst, int timeout_ms)
{
	if (rdma_resolve_addr(c->id, (struct sockaddr *)src, (struct sockaddr *)dst, timeout_ms) <
	    0)
		return fail(errno);
	return 0;
}

static int real_conn_resolve_route(struct vb_conn *c, int timeout_ms)
{
	if (rdma_resolve_route(c->id, timeout_ms) < 0)
		return fail(errno);
	return 0;
}

static struct vb_device *real_conn_device(struct vb_conn *c)
{
	return c->id->verbs ? device_of(c->id->verbs) : NULL;
}

/* Our QP to INIT: the CM's port and pkey, no remote access whatever the CM
 * says (its INIT attributes carry none before the connect; it is set here
 * all the same, so that no later answer can widen it). */
static int conn_qp_init(struct vb_conn *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT };
	int mask, r;

	if (rdma_init_qp_attr(c->id, &attr, &mask) < 0)
		return fail(errno);
	attr.qp_access_flags = 0;
	r = ibv_modify_qp(qp, &attr, mask | IBV_QP_ACCESS_FLAGS);
	return r ? fail(r) : 0;
}

static int real_conn_qp_create(struct vb_conn *c, struct vb_pd *pd, struct vb_cq *cq,
			       const struct vb_qp_caps *caps, struct vb_qp **ret)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.send_cq = cq->cq,
		.recv_cq = cq->cq,
		.cap = { .max_send_wr = caps->max_send_wr,
			 .max_recv_wr = caps->max_recv_wr ?: 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		/* Only what is asked for makes a completion: the window
		 * signals selectively. */
		.sq_sig_all = 0,
	};
	struct ibv_qp *qp;
	int r;

	if (c->has_qp)
		return -EEXIST;
	if (pd->pd->context != c->id->verbs)
		return -EXDEV;
	qp = ibv_create_qp(pd->pd, &init);
	if (!qp)
		return fail(errno);
	r = conn_qp_init(c, qp);
	if (r < 0) {
		ibv_destroy_qp(qp);
		return r;
	}
	c->has_qp = true;
	c->qp = (struct vb_qp){ .qp = qp, .port = c->id->port_num };
	*ret = &c->qp;
	return 0;
}

static int real_conn_connect(struct vb_conn *c, const struct vb_conn_param *p)
{
	struct rdma_conn_param param = {
		.private_data = p->private_data,
		.private_data_len = (uint8_t)MIN(p->private_len, (size_t)VB_PRIVATE_DATA_MAX),
		.initiator_depth = p->initiator_depth,
		.responder_resources = 0, /* the peer never READs from us on it */
		.retry_count = MIN(p->retry_count, 6),
		.rnr_retry_count = MIN(p->rnr_retry, 7),
	};

	if (!c->has_qp)
		return -EINVAL;
	param.qp_num = c->qp.qp->qp_num;
	c->ack_timeout = p->ack_timeout;
	c->retry_count = param.retry_count;
	c->rnr_retry = param.rnr_retry_count;
	if (rdma_connect(c->id, &param) < 0)
		return fail(errno);
	return 0;
}

/*
 * The connect response: RTR and RTS by hand with the CM's attributes, then
 * the RTU. Access stays 0 (neither mask the CM gives for RTR or RTS
 * carries it; it is forced all the same). The RC timeouts are ours: the CM
 * would take the RNR retry count from the peer's reply (each side's comes
 * from the other), and the peer is not ours to trust.
 */
static int conn_establish(struct vb_conn *c)
{
	struct ibv_qp *qp = c->qp.qp;
	struct ibv_port_attr pa;
	struct ibv_qp_attr attr;
	int mask, r;

	if (!c->has_qp)
		return -EINVAL;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(c->id, &attr, &mask) < 0)
		return fail(errno);
	/* As librdmacm does: on InfiniBand the kernel may set bits 21-23,
	 * meant for RoCE. */
	r = ibv_query_port(c->id->verbs, c->id->port_num, &pa);
	if (r)
		return fail(r);
	if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND)
		mask &= ~0xe00000;
	attr.qp_access_flags = 0;
	r = ibv_modify_qp(qp, &attr, mask);
	if (r)
		return fail(r);

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(c->id, &attr, &mask) < 0)
		return fail(errno);
	if (c->ack_timeout)
		attr.timeout = c->ack_timeout;
	attr.retry_cnt = c->retry_count;
	attr.rnr_retry = c->rnr_retry;
	attr.qp_access_flags = 0;
	r = ibv_modify_qp(qp, &attr, mask | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
	if (r)
		return fail(r);
	if (rdma_establish(c->id) < 0)
		return fail(errno);
	return 0;
}

static int real_conn_next_event(struct vb_conn *c, struct vb_conn_event *ret)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(c->channel, &ev) < 0)
		return errno == EAGAIN ? -EAGAIN : fail(errno);
	memset(ret, 0, sizeof(*ret));
	ret->name = rdma_event_str(ev->event);
	ret->status = ev->status;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret->kind = VB_CONN_ADDR_RESOLVED;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret->kind = VB_CONN_ROUTE_RESOLVED;
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* Our own QP (no QP on the id): the last steps are ours. */
		ret->status = conn_establish(c);
		ret->kind = ret->status < 0 ? VB_CONN_UNREACHABLE : VB_CONN_ESTABLISHED;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		ret->kind = VB_CONN_ESTABLISHED;
		break;
	case RDMA_CM_EVENT_REJECTED:
		ret->kind = VB_CONN_REJECTED;
		ret->private_len = cm_private_data(ev, ret->private_data);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		ret->kind = VB_CONN_UNREACHABLE;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		ret->kind = VB_CONN_DISCONNECTED;
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		ret->kind = VB_CONN_TIMEWAIT_EXIT;
		break;
	default:
		ret->kind = VB_CONN_OTHER;
		break;
	}
	rdma_ack_cm_event(ev);
	return 0;
}

static void real_conn_destroy(struct vb_conn *c)
{
	if (!c)
		return;
	cm_id_hangup(c->id, false);
	if (c->has_qp)
		ibv_destroy_qp(c->qp.qp);
	rdma_destroy_id(c->id);
	rdma_destroy_event_channel(c->channel);
	free(c);
}

static enum ibv_wr_opcode wr_opcode(enum vb_wr_opcode op)
{
	switch (op) {
	case VB_WR_RDMA_READ:
		return IBV_WR_RDMA_READ;
	case VB_WR_SEND:
		return IBV_WR_SEND;
	case VB_WR_RDMA_WRITE_IMM:
		return IBV_WR_RDMA_WRITE_WITH_IMM;
	case VB_WR_RDMA_WRITE:
	default:
		return IBV_WR_RDMA_WRITE;
	}
}

/* Chained in chunks on the stack: one doorbell per chunk, no allocation. */
#define POST_CHUNK 32

/*
 * Posts n work requests, POST_CHUNK at a time: chunk(qp, wrs, first, k,
 * &ok) chains and posts k of them from first and says how many the device
 * took. *ret_posted: how many went in all.
 */
typedef int (*post_chunk_fn)(struct ibv_qp *qp, const void *wrs, size_t first, size_t k,
			     size_t *ret_ok);

static int post_chunked(struct ibv_qp *qp, const void *wrs, size_t n, post_chunk_fn chunk,
			size_t *ret_posted)
{
	size_t done = 0;

	while (done < n) {
		size_t k = MIN(n - done, (size_t)POST_CHUNK), ok = 0;
		int r = chunk(qp, wrs, done, k, &ok);

		if (r) {
			*ret_posted = done + ok;
			return fail(r);
		}
		done += k;
	}
	*ret_posted = done;
	return 0;
}

static int send_chunk(struct ibv_qp *qp, const void *wrs, size_t first, size_t k, size_t *ret_ok)
{
	struct ibv_send_wr wr[POST_CHUNK], *bad = NULL;
	struct ibv_sge sge[POST_CHUNK];
	int r;

	for (size_t i = 0; i < k; i++) {
		const struct vb_send_wr *w = (const struct vb_send_wr *)wrs + first + i;

		sge[i] = (struct ibv_sge){ .addr = w->local_addr,
					   .length = w->length,
					   .lkey = w->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = w->wr_id,
			.next = i + 1 < k ? &wr[i + 1] : NULL,
			.sg_list = &sge[i],
			.num_sge = 1,
			.opcode = wr_opcode(w->opcode),
			.send_flags = w->signaled ? IBV_SEND_SIGNALED : 0,
		};
		if (w->opcode == VB_WR_RDMA_WRITE_IMM)
			wr[i].imm_data = htobe32(w->imm);
		if (w->opcode != VB_WR_SEND) {
			wr[i].wr.rdma.remote_addr = w->remote_addr;
			wr[i].wr.rdma.rkey = w->rkey;
		}
	}
	r = ibv_post_send(qp, wr, &bad);
	*ret_ok = r && bad ? (size_t)(bad - wr) : k;
	return r;
}

static int recv_chunk(struct ibv_qp *qp, const void *wrs, size_t first, size_t k, size_t *ret_ok)
{
	struct ibv_recv_wr wr[POST_CHUNK], *bad = NULL;
	struct ibv_sge sge[POST_CHUNK];
	int r;

	for (size_t i = 0; i < k; i++) {
		const struct vb_recv_wr *w = (const struct vb_recv_wr *)wrs + first + i;

		sge[i] = (struct ibv_sge){ .addr = w->addr, .length = w->length, .lkey = w->lkey };
		wr[i] = (struct ibv_recv_wr){ .wr_id = w->wr_id,
					      .next = i + 1 < k ? &wr[i + 1] : NULL,
					      .sg_list = &sge[i],
					      .num_sge = 1 };
	}
	r = ibv_post_recv(qp, wr, &bad);
	*ret_ok = r && bad ? (size_t)(bad - wr) : k;
	return r;
}

static int real_qp_post_send(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n,
			     size_t *ret_posted)
{
	return post_chunked(qp->qp, wrs, n, send_chunk, ret_posted);
}

static int real_qp_post_recv(struct vb_qp *qp, const struct vb_recv_wr *wrs, size_t n,
			     size_t *ret_posted)
{
	return post_chunked(qp->qp, wrs, n, recv_chunk, ret_posted);
}

const struct vb_ops vb_real_ops = {
	.devices_open = real_devices_open,
	.devices_close = real_devices_close,
	.device_query = real_device_query,
	.device_async_fd = real_device_async_fd,
	.device_next_event = real_device_next_event,
	.pd_alloc = real_pd_alloc,
	.pd_free = real_pd_free,
	.mr_reg = real_mr_reg,
	.mr_reg_dmabuf = real_mr_reg_dmabuf,
	.mr_dereg = real_mr_dereg,
	.mr_keys = real_mr_keys,
	.qp_create = real_qp_create,
	.qp_connect = real_qp_connect,
	.qp_destroy = real_qp_destroy,
	.cm_listen = real_cm_listen,
	.cm_fd = real_cm_fd,
	.cm_next_event = real_cm_next_event,
	.cm_qp_create = real_cm_qp_create,
	.cm_accept = real_cm_accept,
	.cm_reject = real_cm_reject,
	.cm_conn_destroy = real_cm_conn_destroy,
	.cm_listener_close = real_cm_listener_close,
	.cq_create = real_cq_create,
	.cq_fd = real_cq_fd,
	.cq_event = real_cq_event,
	.cq_poll = real_cq_poll,
	.cq_destroy = real_cq_destroy,
	.conn_create = real_conn_create,
	.conn_fd = real_conn_fd,
	.conn_resolve_addr = real_conn_resolve_addr,
	.conn_resolve_route = real_conn_resolve_route,
	.conn_device = real_conn_device,
	.conn_qp_create = real_conn_qp_create,
	.conn_connect = real_conn_connect,
	.conn_next_event = real_conn_next_event,
	.conn_destroy = real_conn_destroy,
	.qp_post_send = real_qp_post_send,
	.qp_post_recv = real_qp_post_recv,
};

const struct vb_ops *vb = &vb_real_ops;
