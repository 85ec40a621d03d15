/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A verbs backend without hardware for the fuzzers and the unit suites: one
 * device "fake0" with one active RoCE port. Protection domains, MRs and QPs
 * are heap objects with made-up keys, so the daemon's registration
 * bookkeeping, drop order and error paths run; fake_verbs_fail_mr makes every
 * registration fail, fake_verbs_hold_* keeps (de)registrations on their pool
 * thread until released. Registrations run on pool threads: counters are
 * atomic, and the list of MRs is under a mutex.
 *
 * rdmacm and posting run in process: an active connection (conn_*) reaches
 * a listener of this process bound to its address, whose accept pairs the
 * two QPs; a posted READ or WRITE is a memcpy between the MRs' memory,
 * checked like a device checks it (lkey and rkey in the QP's PD, bounds,
 * access), else the WR completes in error and its QP goes to error, which
 * flushes the rest as a device does. Events and completions arrive on
 * eventfds, so they reach the loop as the real ones do. The tests can hold
 * completions, fail the n-th WR, cap a CQ so that it overflows, make
 * connections unreachable or silent, and drop every connection.
 * Everything but registration is loop-thread only.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/list.h"
#include "util/macro.h"
#include "daemon/rdma/verbs.h"
#include "fake.h"

struct vb_device {
	int async_fd;
	unsigned index; /* fake<index> */
};
struct vb_pd {
	struct vb_device *dev;
};
struct vb_mr {
	struct list_head node; /* in mrs, under mr_lock */
	uint32_t key;
	struct vb_pd *pd;
	uint8_t *addr;
	size_t len;
	unsigned access;
};
struct vb_qp {
	struct list_head node; /* in qps */
	uint32_t qpn;
	struct vb_pd *pd;
	struct vb_cq *cq;   /* NULL: completions go nowhere (the passive side) */
	struct vb_qp *peer; /* connected: where READ/WRITE/SEND land */
	/* VB_ACCESS_REMOTE_*: what the peer may do through it, checked with
	 * each MR's own access as a device does. */
	unsigned access;
	bool error;
	unsigned max_send;
	struct vb_send_wr *held; /* posted while completions are held */
	size_t n_held;
	struct vb_recv_wr *recvs;
	size_t n_recvs, cap_recvs;
	bool dead; /* destroyed: in dead_qps */
};
struct vb_cq {
	int fd;
	unsigned cap;
	struct vb_wc *ring;
	unsigned head, n;
	bool armed, overflowed;
};

/* An event queue behind an eventfd, readable while it holds events. */
struct evq {
	int fd;
	struct list_head items; /* struct ev */
};
struct ev {
	struct list_head node;
	union {
		struct vb_conn_event conn;
		struct vb_cm_event cm;
	};
};
struct vb_listener {
	struct list_head node; /* in listeners */
	struct evq q;
	struct sockaddr_storage addr;
};
/* The passive side of a connection request. */
struct vb_cm_conn {
	struct list_head node; /* in cm_conns */
	struct vb_listener *l;
	struct vb_conn *active; /* NULL once the active side went */
	struct vb_qp *qp;       /* accepted */
	bool established;
};
struct vb_conn {
	struct evq q;
	struct sockaddr_storage src, dst;
	struct vb_qp qp;
	bool has_qp;
	struct vb_cm_conn *cm;
	bool route_held; /* in held_routes */
	struct list_head held_node;
};

atomic_bool fake_verbs_fail_mr;
atomic_int fake_verbs_live; /* PDs, MRs, QPs, CQs, connections, listeners not yet freed */
atomic_int fake_verbs_mrs;
static atomic_uint next_key = 1;

static pthread_mutex_t mr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct list_head mrs = LIST_HEAD_INIT(mrs);
/* Loop thread only. */
static struct list_head qps = LIST_HEAD_INIT(qps);
static struct list_head listeners = LIST_HEAD_INIT(listeners);
static struct list_head cm_conns = LIST_HEAD_INIT(cm_conns);
/* Active connections whose route resolution waits (hold_routes). */
static struct list_head held_routes = LIST_HEAD_INIT(held_routes);
static struct vb_device *fake_device; /* the first: rdmacm's passive side */
static struct vb_device **fake_devices;
static size_t n_fake_devices;
static struct {
	bool hold;
	unsigned fail_countdown; /* 0: none; n: the n-th WR run from now fails */
	enum vb_wc_status fail_status;
	unsigned cq_cap;    /* 0: as asked */
	unsigned n_devices; /* 0: one */
	enum fake_cm_fault cm_fault;
	bool hold_routes;
	uint64_t wrs_run;
	bool fail_recv;
	unsigned dead_posts;
	struct {
		struct vb_qp *qp; /* the receiving side */
		uint8_t data[256];
		uint32_t len;
		unsigned left;
	} flood;
	struct vb_conn_param connect; /* the last connect's, private data left out */
	unsigned n_connects;
} ctl;
/* Destroyed QPs, kept until fake_verbs_reset(): a post on one is counted
 * (the daemon's bug), not a write into freed memory. */
static struct list_head dead_qps = LIST_HEAD_INIT(dead_qps);

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static bool hold_reg, hold_dereg;

static void set_hold(bool *which, bool hold)
{
	pthread_mutex_lock(&hold_lock);
	*which = hold;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
}

void fake_verbs_hold_reg(bool hold)
{
	set_hold(&hold_reg, hold);
}

void fake_verbs_hold_dereg(bool hold)
{
	set_hold(&hold_dereg, hold);
}

/* On a pool thread: waits while the test holds this kind of call. */
static void wait_released(const bool *which)
{
	pthread_mutex_lock(&hold_lock);
	while (*which)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
}

static void sa_copy(struct sockaddr_storage *dst, const struct sockaddr *src)
{
	memcpy(dst, src,
	       src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					    sizeof(struct sockaddr_in));
}

static void fd_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* The counter cannot overflow with this few writes. */
	}
}

static bool fd_drain(int fd)
{
	uint64_t v;

	return read(fd, &v, sizeof(v)) == sizeof(v);
}

static int evq_init(struct evq *q)
{
	q->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	list_init(&q->items);
	return q->fd < 0 ? -errno : 0;
}

static struct ev *evq_push(struct evq *q)
{
	struct ev *e = calloc(1, sizeof(*e));

	if (!e)
		abort(); /* a test double: nowhere to report it */
	list_add_tail(&e->node, &q->items);
	fd_signal(q->fd);
	return e;
}

static struct ev *evq_pop(struct evq *q)
{
	struct ev *e;

	if (list_empty(&q->items)) {
		fd_drain(q->fd);
		return NULL;
	}
	e = list_first_entry(&q->items, struct ev, node);
	list_del(&e->node);
	return e;
}

static void evq_done(struct evq *q)
{
	struct ev *e;

	while ((e = evq_pop(q)))
		free(e);
	close(q->fd);
}

static void conn_event(struct vb_conn *c, enum vb_conn_event_kind kind, const char *name,
		       int status)
{
	struct ev *e = evq_push(&c->q);

	e->conn.kind = kind;
	e->conn.name = name;
	e->conn.status = status;
}

static void cm_event(struct vb_cm_conn *cm, enum vb_cm_event_kind kind, const char *name)
{
	struct ev *e;

	if (!cm->l)
		return;
	e = evq_push(&cm->l->q);
	e->cm.kind = kind;
	e->cm.name = name;
	e->cm.conn = cm;
	e->cm.device = fake_device;
}

/* Knobs (fake.h). */
void fake_verbs_fail_wr(unsigned n, enum vb_wc_status status)
{
	ctl.fail_countdown = n;
	ctl.fail_status = status;
}

void fake_verbs_cq_cap(unsigned cap)
{
	ctl.cq_cap = cap;
}

void fake_verbs_cm_fault(enum fake_cm_fault f)
{
	ctl.cm_fault = f;
}

uint64_t fake_verbs_wrs_run(void)
{
	return ctl.wrs_run;
}

void fake_verbs_hold_routes(bool hold)
{
	ctl.hold_routes = hold;
	while (!hold && !list_empty(&held_routes)) {
		struct vb_conn *c = list_first_entry(&held_routes, struct vb_conn, held_node);

		list_del(&c->held_node);
		c->route_held = false;
		conn_event(c, VB_CONN_ROUTE_RESOLVED, "RDMA_CM_EVENT_ROUTE_RESOLVED", 0);
	}
}

void fake_verbs_devices(unsigned n)
{
	ctl.n_devices = n;
}

unsigned fake_verbs_last_connect(struct vb_conn_param *ret)
{
	*ret = ctl.connect;
	return ctl.n_connects;
}

static int f_devices_open(struct vb_device ***ret, size_t *ret_n)
{
	size_t n = ctl.n_devices ?: 1;
	struct vb_device **list = calloc(n, sizeof(*list));

	if (!list)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		list[i] = calloc(1, sizeof(**list));
		if (!list[i]) {
			while (i-- > 0)
				free(list[i]);
			free(list);
			return -ENOMEM;
		}
		list[i]->index = (unsigned)i;
		/* Pollable and never readable: the device has no events to tell. */
		list[i]->async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	fake_device = list[0];
	fake_devices = list;
	n_fake_devices = n;
	*ret = list;
	*ret_n = n;
	return 0;
}

static void f_devices_close(struct vb_device **devs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (devs[i] == fake_device)
			fake_device = NULL;
		if (devs == fake_devices) {
			fake_devices = NULL;
			n_fake_devices = 0;
		}
		close(devs[i]->async_fd);
		free(devs[i]);
	}
	free(devs);
}

static int f_device_query(struct vb_device *dev, struct vb_device_info *ret)
{
	*ret = (struct vb_device_info){
		.node_guid = "0000:0000:0000:0001",
		.max_mr_size = UINT64_C(1) << 40,
		.max_mr = 1 << 20,
		.max_qp = 1 << 10,
		.max_qp_rd_atom = 16,
		.max_qp_init_rd_atom = 16,
		.max_qp_wr = 1 << 14,
		.max_cqe = 1 << 16,
		.n_ports = 1,
	};
	ret->ports[0] = (struct vb_port){
		.num = 1,
		.state = "ACTIVE",
		.active = true,
		.link_layer = "Ethernet",
		.mtu = 1024,
		.max_msg_sz = UINT32_C(1) << 31,
		.n_gids = 1,
	};
	ret->ports[0].gids[0] = (struct vb_gid){ .index = 0, .text = "fe80::1", .type = "RoCEv2" };
	ret->ports[0].gids[0].raw[0] = 0xfe;
	ret->ports[0].gids[0].raw[1] = 0x80;
	ret->ports[0].gids[0].raw[15] = 1;
	snprintf(ret->name, sizeof(ret->name), "fake%u", dev->index);
	/* Several devices: each on a network of its own, as NICs are. */
	if (ctl.n_devices > 1) {
		struct vb_gid *g = &ret->ports[0].gids[1];

		*g = (struct vb_gid){ .index = 1, .text = "::ffff:10.0.x.1", .type = "RoCEv2" };
		g->raw[10] = g->raw[11] = 0xff;
		g->raw[12] = 10;
		g->raw[14] = (uint8_t)dev->index;
		g->raw[15] = 1;
		ret->ports[0].n_gids = 2;
	}
	return 0;
}

static int f_device_async_fd(struct vb_device *dev)
{
	return dev->async_fd;
}

static int f_device_next_event(struct vb_device *dev, struct vb_event *ret)
{
	(void)dev;
	(void)ret;
	return -EAGAIN;
}

static int f_pd_alloc(struct vb_device *dev, struct vb_pd **ret)
{
	struct vb_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return -ENOMEM;
	pd->dev = dev;
	atomic_fetch_add(&fake_verbs_live, 1);
	*ret = pd;
	return 0;
}

static int f_pd_free(struct vb_pd *pd)
{
	atomic_fetch_sub(&fake_verbs_live, 1);
	free(pd);
	return 0;
}

static int f_mr_reg(struct vb_pd *pd, void *addr, size_t len, unsigned access, struct vb_mr **ret)
{
	struct vb_mr *mr;

	wait_released(&hold_reg);
	if (atomic_load(&fake_verbs_fail_mr))
		return -ENOMEM;
	/* The device reads the pages it pins: touch the first and last. */
	if (len) {
		volatile const char *p = addr;

		(void)p[0];
		(void)p[len - 1];
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	mr->key = atomic_fetch_add(&next_key, 1) & 0x7fffffff;
	mr->pd = pd;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	pthread_mutex_lock(&mr_lock);
	list_add_tail(&mr->node, &mrs);
	pthread_mutex_unlock(&mr_lock);
	atomic_fetch_add(&fake_verbs_live, 1);
	atomic_fetch_add(&fake_verbs_mrs, 1);
	*ret = mr;
	return 0;
}

atomic_bool fake_verbs_dmabuf_at_iova;
struct fake_dmabuf_call fake_verbs_last_dmabuf;

static int f_mr_reg_dmabuf(struct vb_pd *pd, int fd, uint64_t offset, size_t len, uint64_t iova,
			   unsigned access, struct vb_mr **ret)
{
	struct stat st;

	pthread_mutex_lock(&mr_lock);
	fake_verbs_last_dmabuf = (struct fake_dmabuf_call){
		.n = fake_verbs_last_dmabuf.n + 1,
		.fd_open = fstat(fd, &st) == 0,
		.offset = offset,
		.len = len,
		.iova = iova,
	};
	pthread_mutex_unlock(&mr_lock);
	if (fd < 0)
		return -EBADF;
	/* The fake CUDA's device memory is host memory at its device address:
	 * there the MR reaches its bytes at iova, as a NIC reaches the GPU's
	 * through the dma-buf. Else (a real GPU) nothing here may touch it. */
	if (atomic_load(&fake_verbs_dmabuf_at_iova))
		return f_mr_reg(pd, (void *)(uintptr_t)iova, len, access, ret);
	return f_mr_reg(pd, NULL, 0, access, ret);
}

static int f_mr_dereg(struct vb_mr *mr)
{
	wait_released(&hold_dereg);
	pthread_mutex_lock(&mr_lock);
	list_del(&mr->node);
	pthread_mutex_unlock(&mr_lock);
	atomic_fetch_sub(&fake_verbs_mrs, 1);
	atomic_fetch_sub(&fake_verbs_live, 1);
	free(mr);
	return 0;
}

static void f_mr_keys(const struct vb_mr *mr, uint32_t *lkey, uint32_t *rkey)
{
	*lkey = mr->key;
	*rkey = mr->key | 0x80000000u;
}

/*
 * The memory a key names in pd for [addr, addr + len), if access allows it;
 * NULL is what the device would refuse. A length of 0 touches nothing.
 */
/*
 * A post holds mr_lock across its WRs (post_locked: this thread holds it),
 * so that a WR costs no lock of its own, and remembers the MR each side's
 * key found last (mr_hit: valid while the lock is held, since no MR can be
 * deregistered then): the posts of a transfer name one local and one
 * remote key, and the fake's lookups stay out of what a benchmark times.
 */
static __thread bool post_locked;
static __thread struct vb_mr *mr_hit[2];

static uint8_t *mr_reach(uint32_t key, bool remote, struct vb_pd *pd, uint64_t addr, size_t len,
			 unsigned need)
{
	struct vb_mr *mr, *found = NULL;
	uint8_t *p = NULL;

	if (!post_locked)
		pthread_mutex_lock(&mr_lock);
	if (post_locked && mr_hit[remote] &&
	    (remote ? (mr_hit[remote]->key | 0x80000000u) : mr_hit[remote]->key) == key) {
		found = mr_hit[remote];
	} else {
		list_for_each_entry(mr, &mrs, node)
			if ((remote ? (mr->key | 0x80000000u) : mr->key) == key) {
				found = mr;
				break;
			}
		if (post_locked)
			mr_hit[remote] = found;
	}
	if (found) {
		uint64_t start = (uint64_t)(uintptr_t)found->addr;

		if (found->pd == pd && (found->access & need) == need && addr >= start &&
		    len <= found->len && addr - start <= found->len - len)
			p = (uint8_t *)(uintptr_t)addr;
	}
	if (!post_locked)
		pthread_mutex_unlock(&mr_lock);
	return p;
}

/* The passive side's, and ConnectQueuePair's: what the CM gives (REMOTE_WRITE
 * always, READ and atomics with responder resources). The active side's: 0. */
#define QP_ACCESS_ALL (VB_ACCESS_REMOTE_WRITE | VB_ACCESS_REMOTE_READ | VB_ACCESS_REMOTE_ATOMIC)

static void qp_init(struct vb_qp *qp, struct vb_pd *pd, struct vb_cq *cq, unsigned max_send)
{
	qp->qpn = atomic_fetch_add(&next_key, 1) & 0xffffff;
	qp->access = QP_ACCESS_ALL;
	qp->pd = pd;
	qp->cq = cq;
	qp->max_send = max_send ?: 1;
	list_add_tail(&qp->node, &qps);
	atomic_fetch_add(&fake_verbs_live, 1);
}

static void qp_done(struct vb_qp *qp)
{
	if (qp->peer)
		qp->peer->peer = NULL;
	list_del(&qp->node);
	free(qp->held);
	free(qp->recvs);
	atomic_fetch_sub(&fake_verbs_live, 1);
}

static int f_qp_create(struct vb_pd *pd, uint8_t port, struct vb_qp **ret)
{
	struct vb_qp *qp = calloc(1, sizeof(*qp));

	(void)port;
	if (!qp)
		return -ENOMEM;
	qp_init(qp, pd, NULL, 1);
	*ret = qp;
	return 0;
}

static int f_qp_connect(struct vb_qp *qp, const struct vb_qp_endpoint *peer, uint32_t gid_index,
			struct vb_qp_endpoint *ret_local)
{
	unsigned mtu = 256;

	if (gid_index > 0)
		return -EINVAL;
	/* As the verbs do: an IB MTU, at most the port's (1024 here). */
	while (mtu < 1024 && mtu * 2 <= (peer->mtu ?: 1024))
		mtu *= 2;
	*ret_local = (struct vb_qp_endpoint){ .qpn = qp->qpn, .psn = 1, .port = 1, .mtu = mtu };
	return 0;
}

static void qp_bury(struct vb_qp *qp)
{
	qp_done(qp);
	qp->dead = true;
	list_add_tail(&qp->node, &dead_qps);
}

static void f_qp_destroy(struct vb_qp *qp)
{
	qp_bury(qp);
}

/* Completion queues. */

static int f_cq_create(struct vb_device *dev, unsigned depth, struct vb_cq **ret)
{
	struct vb_cq *cq = calloc(1, sizeof(*cq));

	(void)dev;
	if (!cq)
		return -ENOMEM;
	cq->cap = ctl.cq_cap ? MIN(ctl.cq_cap, depth) : depth;
	cq->ring = calloc(cq->cap ?: 1, sizeof(*cq->ring));
	cq->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!cq->ring || cq->fd < 0) {
		if (cq->fd >= 0)
			close(cq->fd);
		free(cq->ring);
		free(cq);
		return -ENOMEM;
	}
	cq->armed = true;
	atomic_fetch_add(&fake_verbs_live, 1);
	*ret = cq;
	return 0;
}

static int f_cq_fd(struct vb_cq *cq)
{
	return cq->fd;
}

static int f_cq_event(struct vb_cq *cq)
{
	if (!fd_drain(cq->fd))
		return -EAGAIN;
	cq->armed = true;
	return 0;
}

static void cq_push(struct vb_cq *cq, const struct vb_wc *wc)
{
	if (!cq || cq->overflowed)
		return;
	if (cq->n == cq->cap) {
		/* What a device reports as a CQ error: the consumer must
		 * learn, armed or not. */
		cq->overflowed = true;
		fd_signal(cq->fd);
		return;
	}
	cq->ring[(cq->head + cq->n) % cq->cap] = *wc;
	cq->n++;
	if (cq->armed) {
		cq->armed = false;
		fd_signal(cq->fd);
	}
}

static int f_cq_poll(struct vb_cq *cq, struct vb_wc *wc, unsigned n)
{
	unsigned got = 0;

	if (cq->overflowed)
		return -EOVERFLOW;
	while (got < n && cq->n) {
		wc[got++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->n--;
	}
	return (int)got;
}

static void f_cq_destroy(struct vb_cq *cq)
{
	if (!cq)
		return;
	close(cq->fd);
	free(cq->ring);
	free(cq);
	atomic_fetch_sub(&fake_verbs_live, 1);
}

/* Posting. */

static const char *status_name(enum vb_wc_status s)
{
	static const char *const names[] = {
		[VB_WC_SUCCESS] = "success",
		[VB_WC_FLUSH_ERR] = "Work Request Flushed Error",
		[VB_WC_REM_ACCESS_ERR] = "remote access error",
		[VB_WC_LOC_ACCESS_ERR] = "local protection error",
		[VB_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[VB_WC_REM_OP_ERR] = "remote operation error",
		[VB_WC_OTHER_ERR] = "general error",
	};

	return names[s];
}

static void complete(struct vb_qp *qp, uint64_t wr_id, bool recv, bool signaled,
		     enum vb_wc_status st, uint32_t byte_len, bool has_imm, uint32_t imm)
{
	struct vb_wc wc = {
		.wr_id = wr_id,
		.status = st,
		.status_name = status_name(st),
		.vendor_err = st == VB_WC_SUCCESS || st == VB_WC_FLUSH_ERR ? 0 : 0x42,
		.byte_len = byte_len,
		.recv = recv,
		.has_imm = has_imm,
		.imm = imm,
	};

	/* Errors always make a completion, as on a device. */
	if (signaled || st != VB_WC_SUCCESS)
		cq_push(qp->cq, &wc);
}

/* The QP went to error: what was waiting is flushed, each with a completion. */
static void qp_error(struct vb_qp *qp)
{
	qp->error = true;
	for (size_t i = 0; i < qp->n_held; i++)
		complete(qp, qp->held[i].wr_id, false, true, VB_WC_FLUSH_ERR, 0, false, 0);
	qp->n_held = 0;
	for (size_t i = 0; i < qp->n_recvs; i++)
		complete(qp, qp->recvs[i].wr_id, true, true, VB_WC_FLUSH_ERR, 0, false, 0);
	qp->n_recvs = 0;
}

/* A SEND or WRITE_IMM lands in the peer's first receive. */
static enum vb_wc_status deliver(struct vb_qp *peer, const uint8_t *data, uint32_t len,
				 bool has_imm, uint32_t imm)
{
	struct vb_recv_wr r;
	uint8_t *buf;

	if (peer->n_recvs == 0)
		return VB_WC_RETRY_EXC_ERR; /* RNR retries exhausted */
	r = peer->recvs[0];
	memmove(peer->recvs, peer->recvs + 1, --peer->n_recvs * sizeof(*peer->recvs));
	buf = data && len ? mr_reach(r.lkey, false, peer->pd, r.addr, len, VB_ACCESS_LOCAL_WRITE) :
			    NULL;
	if (data && len && (len > r.length || !buf)) {
		complete(peer, r.wr_id, true, true, VB_WC_LOC_ACCESS_ERR, 0, false, 0);
		qp_error(peer);
		return VB_WC_REM_OP_ERR;
	}
	if (buf)
		memcpy(buf, data, len);
	complete(peer, r.wr_id, true, true, VB_WC_SUCCESS, len, has_imm, imm);
	return VB_WC_SUCCESS;
}

static enum vb_wc_status execute(struct vb_qp *qp, const struct vb_send_wr *w)
{
	struct vb_qp *peer = qp->peer;
	uint8_t *local, *remote;

	if (!peer || qp->error)
		return VB_WC_FLUSH_ERR;
	if (ctl.fail_countdown && --ctl.fail_countdown == 0)
		return ctl.fail_status;
	local = w->length ? mr_reach(w->lkey, false, qp->pd, w->local_addr, w->length,
				     w->opcode == VB_WR_RDMA_READ ? VB_ACCESS_LOCAL_WRITE : 0) :
			    NULL;
	if (w->length && !local)
		return VB_WC_LOC_ACCESS_ERR;
	if (w->opcode == VB_WR_SEND)
		return deliver(peer, local, w->length, false, 0);
	if (!(peer->access &
	      (w->opcode == VB_WR_RDMA_READ ? VB_ACCESS_REMOTE_READ : VB_ACCESS_REMOTE_WRITE)))
		return VB_WC_REM_ACCESS_ERR; /* the responder QP's access, before any MR's */
	remote = w->length ? mr_reach(w->rkey, true, peer->pd, w->remote_addr, w->length,
				      w->opcode == VB_WR_RDMA_READ ? VB_ACCESS_REMOTE_READ :
								     VB_ACCESS_REMOTE_WRITE) :
			     NULL;
	if (w->length && !remote)
		return VB_WC_REM_ACCESS_ERR;
	if (w->length && w->opcode == VB_WR_RDMA_READ)
		memcpy(local, remote, w->length);
	else if (w->length)
		memcpy(remote, local, w->length);
	if (w->opcode == VB_WR_RDMA_WRITE_IMM)
		return deliver(peer, NULL, w->length, true, w->imm);
	return VB_WC_SUCCESS;
}

static void run_wr(struct vb_qp *qp, const struct vb_send_wr *w)
{
	enum vb_wc_status st = execute(qp, w);

	ctl.wrs_run++;
	complete(qp, w->wr_id, false, w->signaled, st,
		 st == VB_WC_SUCCESS && w->opcode == VB_WR_RDMA_READ ? w->length : 0, false, 0);
	if (st != VB_WC_SUCCESS && st != VB_WC_FLUSH_ERR)
		qp_error(qp);
}

/* A flooding peer: every receive posted on qp is filled at once. */
static void flood(struct vb_qp *qp)
{
	while (ctl.flood.left > 0 && ctl.flood.qp == qp && qp->n_recvs > 0 && !qp->error) {
		ctl.flood.left--;
		deliver(qp, ctl.flood.data, ctl.flood.len, false, 0);
	}
}

struct fake_verbs_clock *fake_verbs_clock;

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int post_send(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n, size_t *ret_posted);

/* Posting, timed when a benchmark asks (fake_verbs_clock). */
static int f_qp_post_send(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n,
			  size_t *ret_posted)
{
	struct fake_verbs_clock *c = fake_verbs_clock;
	uint64_t t0, t1;
	int r;

	if (!c)
		return post_send(qp, wrs, n, ret_posted);
	t0 = clock_ns();
	r = post_send(qp, wrs, n, ret_posted);
	t1 = clock_ns();
	atomic_fetch_add(&c->nic_ns, t1 - t0);
	atomic_fetch_add(&c->wrs, *ret_posted);
	atomic_store(&c->last_post_ns, t1);
	return r;
}

static int post_send_locked(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n,
			    size_t *ret_posted);

static int post_send(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n, size_t *ret_posted)
{
	int r;

	pthread_mutex_lock(&mr_lock);
	post_locked = true;
	r = post_send_locked(qp, wrs, n, ret_posted);
	post_locked = false;
	mr_hit[0] = mr_hit[1] = NULL;
	pthread_mutex_unlock(&mr_lock);
	return r;
}

static int post_send_locked(struct vb_qp *qp, const struct vb_send_wr *wrs, size_t n,
			    size_t *ret_posted)
{
	*ret_posted = 0;
	if (qp->dead) {
		ctl.dead_posts++;
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!qp->peer && !qp->error) {
			*ret_posted = i;
			return -EINVAL; /* not connected: RESET or INIT */
		}
		if (ctl.hold && !qp->error) {
			if (qp->n_held == qp->max_send) {
				*ret_posted = i;
				return -ENOMEM; /* the send queue is full */
			}
			if (!qp->held)
				qp->held = calloc(qp->max_send, sizeof(*qp->held));
			if (!qp->held) {
				*ret_posted = i;
				return -ENOMEM;
			}
			qp->held[qp->n_held++] = wrs[i];
			continue;
		}
		run_wr(qp, &wrs[i]);
	}
	*ret_posted = n;
	return 0;
}

static int f_qp_post_recv(struct vb_qp *qp, const struct vb_recv_wr *wrs, size_t n,
			  size_t *ret_posted)
{
	*ret_posted = 0;
	if (qp->dead) {
		ctl.dead_posts++;
		return -EINVAL;
	}
	if (ctl.fail_recv)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (qp->error) {
			complete(qp, wrs[i].wr_id, true, true, VB_WC_FLUSH_ERR, 0, false, 0);
			continue;
		}
		if (qp->n_recvs == qp->cap_recvs) {
			size_t cap = qp->cap_recvs ? qp->cap_recvs * 2 : 16;
			void *p = reallocarray(qp->recvs, cap, sizeof(*qp->recvs));

			if (!p) {
				*ret_posted = i;
				return -ENOMEM;
			}
			qp->recvs = p;
			qp->cap_recvs = cap;
		}
		qp->recvs[qp->n_recvs++] = wrs[i];
	}
	*ret_posted = n;
	flood(qp);
	return 0;
}

void fake_verbs_hold_completions(bool hold)
{
	struct vb_qp *qp;

	ctl.hold = hold;
	if (hold)
		return;
	list_for_each_entry(qp, &qps, node) {
		/* run_wr() may flush the rest (qp_error()): take each from
		 * the front while any are left. */
		size_t i = 0;

		while (i < qp->n_held) {
			struct vb_send_wr w = qp->held[i++];

			run_wr(qp, &w);
		}
		qp->n_held = 0;
	}
}

size_t fake_verbs_held(void)
{
	struct vb_qp *qp;
	size_t n = 0;

	list_for_each_entry(qp, &qps, node)
		n += qp->n_held;
	return n;
}

/* rdmacm: listeners and the connections that reach them. */

/* A zeroed object of size whose event queue is at offset q; counted live. */
static void *evq_owner_new(size_t size, size_t q)
{
	void *p = calloc(1, size);

	if (!p)
		return NULL;
	if (evq_init((struct evq *)((char *)p + q)) < 0) {
		free(p);
		return NULL;
	}
	atomic_fetch_add(&fake_verbs_live, 1);
	return p;
}

static int f_cm_listen(const struct sockaddr *addr, struct vb_listener **ret)
{
	struct vb_listener *l = evq_owner_new(sizeof(*l), offsetof(struct vb_listener, q));

	if (!l)
		return -ENOMEM;
	sa_copy(&l->addr, addr);
	list_add_tail(&l->node, &listeners);
	*ret = l;
	return 0;
}

static int f_cm_fd(struct vb_listener *l)
{
	return l->q.fd;
}

static int f_cm_next_event(struct vb_listener *l, struct vb_cm_event *ret)
{
	struct ev *e = evq_pop(&l->q);

	if (!e)
		return -EAGAIN;
	*ret = e->cm;
	free(e);
	return 0;
}

static int f_cm_qp_create(struct vb_cm_conn *cm, struct vb_pd *pd, struct vb_cq *cq,
			  const struct vb_qp_caps *caps, struct vb_qp **ret)
{
	if (cm->qp)
		return -EEXIST;
	cm->qp = calloc(1, sizeof(*cm->qp));
	if (!cm->qp)
		return -ENOMEM;
	qp_init(cm->qp, pd, cq, caps->max_send_wr);
	*ret = cm->qp;
	return 0;
}

static int f_cm_accept(struct vb_cm_conn *cm, struct vb_pd *pd, uint8_t responder_resources,
		       uint32_t *ret_qpn)
{
	struct vb_conn *c = cm->active;

	if (!c || !c->has_qp)
		return -ECONNRESET; /* the active side gave up meanwhile */
	if (!cm->qp) {
		cm->qp = calloc(1, sizeof(*cm->qp));
		if (!cm->qp)
			return -ENOMEM;
		qp_init(cm->qp, pd, NULL, 1);
	}
	cm->qp->access = VB_ACCESS_REMOTE_WRITE | (responder_resources ? QP_ACCESS_ALL : 0);
	cm->qp->peer = &c->qp;
	c->qp.peer = cm->qp;
	cm->established = true;
	conn_event(c, VB_CONN_ESTABLISHED, "RDMA_CM_EVENT_ESTABLISHED", 0);
	cm_event(cm, VB_CM_ESTABLISHED, "RDMA_CM_EVENT_ESTABLISHED");
	*ret_qpn = cm->qp->qpn;
	return 0;
}

static int f_cm_reject(struct vb_cm_conn *cm, const void *data, size_t len)
{
	struct vb_conn *c = cm->active;
	struct ev *e;

	if (!c)
		return 0;
	e = evq_push(&c->q);
	e->conn.kind = VB_CONN_REJECTED;
	e->conn.name = "RDMA_CM_EVENT_REJECTED";
	e->conn.status = 28; /* IB_CM_REJ_CONSUMER_DEFINED */
	e->conn.private_len = MIN(len, (size_t)VB_PRIVATE_DATA_MAX);
	memcpy(e->conn.private_data, data, e->conn.private_len);
	c->cm = NULL;
	cm->active = NULL;
	return 0;
}

/* Events still queued for cm are dropped with it, as rdma_destroy_id does. */
static void cm_purge(struct vb_cm_conn *cm)
{
	struct ev *e, *n;

	if (!cm->l)
		return;
	list_for_each_entry_safe(e, n, &cm->l->q.items, node)
		if (e->cm.conn == cm) {
			list_del(&e->node);
			free(e);
		}
}

static void f_cm_conn_destroy(struct vb_cm_conn *cm)
{
	struct vb_conn *c;

	if (!cm)
		return;
	c = cm->active;
	if (c) {
		if (cm->established)
			conn_event(c, VB_CONN_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED", 0);
		else
			conn_event(c, VB_CONN_REJECTED, "RDMA_CM_EVENT_REJECTED", 28);
		qp_error(&c->qp);
		c->cm = NULL;
	}
	if (cm->qp)
		qp_bury(cm->qp);
	cm_purge(cm);
	list_del(&cm->node);
	atomic_fetch_sub(&fake_verbs_live, 1);
	free(cm);
}

static void f_cm_listener_close(struct vb_listener *l)
{
	struct vb_cm_conn *cm;

	if (!l)
		return;
	list_for_each_entry(cm, &cm_conns, node)
		if (cm->l == l)
			cm->l = NULL;
	list_del(&l->node);
	evq_done(&l->q);
	atomic_fetch_sub(&fake_verbs_live, 1);
	free(l);
}

/* Active connections. */

static int f_conn_create(struct vb_conn **ret)
{
	struct vb_conn *c = evq_owner_new(sizeof(*c), offsetof(struct vb_conn, q));

	if (!c)
		return -ENOMEM;
	*ret = c;
	return 0;
}

static int f_conn_fd(struct vb_conn *c)
{
	return c->q.fd;
}

static int f_conn_resolve_addr(struct vb_conn *c, const struct sockaddr *src,
			       const struct sockaddr *dst, int timeout_ms)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&c->src;

	(void)timeout_ms;
	sa_copy(&c->dst, dst);
	if (src)
		sa_copy(&c->src, src);
	else {
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	if (ctl.cm_fault == FAKE_CM_SILENT)
		return 0;
	if (ctl.cm_fault == FAKE_CM_UNREACHABLE || !fake_device)
		conn_event(c, VB_CONN_UNREACHABLE, "RDMA_CM_EVENT_ADDR_ERROR", -EHOSTUNREACH);
	else
		conn_event(c, VB_CONN_ADDR_RESOLVED, "RDMA_CM_EVENT_ADDR_RESOLVED", 0);
	return 0;
}

static int f_conn_resolve_route(struct vb_conn *c, int timeout_ms)
{
	(void)timeout_ms;
	if (ctl.hold_routes) {
		c->route_held = true;
		list_add_tail(&c->held_node, &held_routes);
		return 0;
	}
	conn_event(c, VB_CONN_ROUTE_RESOLVED, "RDMA_CM_EVENT_ROUTE_RESOLVED", 0);
	return 0;
}

/* The route: to 10.0.<i>.x through device i (fake_verbs_devices()), else
 * through the first. */
static struct vb_device *f_conn_device(struct vb_conn *c)
{
	const struct sockaddr_in *in = (const void *)&c->dst;
	uint32_t a = ntohl(in->sin_addr.s_addr);

	if (fake_devices && in->sin_family == AF_INET && (a >> 24) == 10 &&
	    ((a >> 8) & 0xff) < n_fake_devices)
		return fake_devices[(a >> 8) & 0xff];
	return fake_device;
}

static int f_conn_qp_create(struct vb_conn *c, struct vb_pd *pd, struct vb_cq *cq,
			    const struct vb_qp_caps *caps, struct vb_qp **ret)
{
	if (c->has_qp)
		return -EEXIST;
	qp_init(&c->qp, pd, cq, caps->max_send_wr);
	c->qp.access = 0; /* it only initiates (verbs.h) */
	c->has_qp = true;
	*ret = &c->qp;
	return 0;
}

static bool same_endpoint(const struct sockaddr_storage *listen, const struct sockaddr *dst)
{
	if (listen->ss_family != dst->sa_family)
		return false;
	if (dst->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)listen, *b = (const void *)dst;

		return a->sin_port == b->sin_port && (a->sin_addr.s_addr == htonl(INADDR_ANY) ||
						      a->sin_addr.s_addr == b->sin_addr.s_addr);
	}
	if (dst->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)listen, *b = (const void *)dst;

		return a->sin6_port == b->sin6_port &&
		       (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) ||
			IN6_ARE_ADDR_EQUAL(&a->sin6_addr, &b->sin6_addr));
	}
	return false;
}

static int f_conn_connect(struct vb_conn *c, const struct vb_conn_param *p)
{
	struct vb_listener *l, *found = NULL;
	struct vb_cm_conn *cm;
	struct ev *e;

	if (!c->has_qp)
		return -EINVAL;
	ctl.connect = *p;
	ctl.connect.private_data = NULL;
	ctl.n_connects++;
	list_for_each_entry(l, &listeners, node)
		if (same_endpoint(&l->addr, (struct sockaddr *)&c->dst)) {
			found = l;
			break;
		}
	if (!found) {
		/* Nobody listens there: the peer's CM answers "invalid
		 * service id". */
		conn_event(c, VB_CONN_REJECTED, "RDMA_CM_EVENT_REJECTED", 8);
		return 0;
	}
	cm = calloc(1, sizeof(*cm));
	if (!cm)
		return -ENOMEM;
	cm->l = found;
	cm->active = c;
	c->cm = cm;
	list_add_tail(&cm->node, &cm_conns);
	atomic_fetch_add(&fake_verbs_live, 1);
	e = evq_push(&found->q);
	e->cm.kind = VB_CM_REQUEST;
	e->cm.name = "RDMA_CM_EVENT_CONNECT_REQUEST";
	e->cm.conn = cm;
	e->cm.device = fake_device;
	e->cm.peer = c->src;
	e->cm.private_len = MIN(p->private_len, (size_t)VB_PRIVATE_DATA_MAX);
	memcpy(e->cm.private_data, p->private_data, e->cm.private_len);
	e->cm.initiator_depth = p->initiator_depth;
	return 0;
}

static int f_conn_next_event(struct vb_conn *c, struct vb_conn_event *ret)
{
	struct ev *e = evq_pop(&c->q);

	if (!e)
		return -EAGAIN;
	*ret = e->conn;
	free(e);
	return 0;
}

static void f_conn_destroy(struct vb_conn *c)
{
	struct vb_cm_conn *cm;

	if (!c)
		return;
	cm = c->cm;
	if (cm) {
		cm->active = NULL;
		if (cm->established) {
			cm_event(cm, VB_CM_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED");
			if (cm->qp)
				qp_error(cm->qp);
		}
	}
	if (c->route_held)
		list_del(&c->held_node);
	if (c->has_qp)
		qp_done(&c->qp);
	evq_done(&c->q);
	atomic_fetch_sub(&fake_verbs_live, 1);
	free(c);
}

unsigned fake_verbs_qp_access(const struct vb_qp *qp)
{
	return qp->access;
}

void fake_verbs_disconnect_all(void)
{
	struct vb_cm_conn *cm;

	list_for_each_entry(cm, &cm_conns, node) {
		if (!cm->established || !cm->active)
			continue;
		conn_event(cm->active, VB_CONN_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED", 0);
		qp_error(&cm->active->qp);
		cm_event(cm, VB_CM_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED");
		if (cm->qp)
			qp_error(cm->qp);
	}
}

void fake_verbs_fail_recv(bool fail)
{
	ctl.fail_recv = fail;
}

unsigned fake_verbs_dead_posts(void)
{
	return ctl.dead_posts;
}

void fake_verbs_flood(struct vb_qp *qp, const void *data, size_t len, unsigned n)
{
	struct vb_qp *peer = qp->peer;

	if (!peer || len > sizeof(ctl.flood.data))
		return;
	memcpy(ctl.flood.data, data, len);
	ctl.flood.len = (uint32_t)len;
	ctl.flood.left = n;
	ctl.flood.qp = peer;
	flood(peer);
}

unsigned fake_verbs_flood_left(void)
{
	return ctl.flood.left;
}

void fake_verbs_reset(void)
{
	struct vb_qp *qp, *tmp;

	memset(&ctl, 0, sizeof(ctl));
	atomic_store(&fake_verbs_dmabuf_at_iova, false);
	list_for_each_entry_safe(qp, tmp, &dead_qps, node) {
		list_del(&qp->node);
		free(qp);
	}
}

const struct vb_ops fake_vb_ops = {
	.devices_open = f_devices_open,
	.devices_close = f_devices_close,
	.device_query = f_device_query,
	.device_async_fd = f_device_async_fd,
	.device_next_event = f_device_next_event,
	.pd_alloc = f_pd_alloc,
	.pd_free = f_pd_free,
	.mr_reg = f_mr_reg,
	.mr_reg_dmabuf = f_mr_reg_dmabuf,
	.mr_dereg = f_mr_dereg,
	.mr_keys = f_mr_keys,
	.qp_create = f_qp_create,
	.qp_connect = f_qp_connect,
	.qp_destroy = f_qp_destroy,
	.cm_listen = f_cm_listen,
	.cm_fd = f_cm_fd,
	.cm_next_event = f_cm_next_event,
	.cm_qp_create = f_cm_qp_create,
	.cm_accept = f_cm_accept,
	.cm_reject = f_cm_reject,
	.cm_conn_destroy = f_cm_conn_destroy,
	.cm_listener_close = f_cm_listener_close,
	.cq_create = f_cq_create,
	.cq_fd = f_cq_fd,
	.cq_event = f_cq_event,
	.cq_poll = f_cq_poll,
	.cq_destroy = f_cq_destroy,
	.conn_create = f_conn_create,
	.conn_fd = f_conn_fd,
	.conn_resolve_addr = f_conn_resolve_addr,
	.conn_resolve_route = f_conn_resolve_route,
	.conn_device = f_conn_device,
	.conn_qp_create = f_conn_qp_create,
	.conn_connect = f_conn_connect,
	.conn_next_event = f_conn_next_event,
	.conn_destroy = f_conn_destroy,
	.qp_post_send = f_qp_post_send,
	.qp_post_recv = f_qp_post_recv,
};
