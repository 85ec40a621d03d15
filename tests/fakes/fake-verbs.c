/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A verbs backend without hardware for the fuzzers and the unit suites: one
 * device "fake0" with one active RoCE port. Protection domains, MRs and QPs
 * are heap objects with made-up keys, so the daemon's registration
 * bookkeeping, drop order and error paths run; fake_verbs_fail_mr makes every
 * registration fail, fake_verbs_hold_* keeps (de)registrations on their pool
 * thread until released. Registrations run on pool threads: counters are
 * atomic.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/rdma/verbs.h"
#include "fake.h"

struct vb_device {
	int async_fd;
};
struct vb_pd {
	struct vb_device *dev;
};
struct vb_mr {
	uint32_t key;
};
struct vb_qp {
	uint32_t qpn;
};

atomic_bool fake_verbs_fail_mr;
atomic_int fake_verbs_live; /* PDs, MRs and QPs not yet freed */
atomic_int fake_verbs_mrs;
static atomic_uint next_key = 1;

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

static int f_devices_open(struct vb_device ***ret, size_t *ret_n)
{
	struct vb_device **list = calloc(1, sizeof(*list));

	if (!list)
		return -ENOMEM;
	list[0] = calloc(1, sizeof(**list));
	if (!list[0]) {
		free(list);
		return -ENOMEM;
	}
	/* Pollable and never readable: the device has no events to tell. */
	list[0]->async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	*ret = list;
	*ret_n = 1;
	return 0;
}

static void f_devices_close(struct vb_device **devs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		close(devs[i]->async_fd);
		free(devs[i]);
	}
	free(devs);
}

static int f_device_query(struct vb_device *dev, struct vb_device_info *ret)
{
	(void)dev;
	*ret = (struct vb_device_info){
		.name = "fake0",
		.node_guid = "0000:0000:0000:0001",
		.max_mr_size = UINT64_C(1) << 40,
		.max_mr = 1 << 20,
		.max_qp = 1 << 10,
		.max_qp_rd_atom = 16,
		.n_ports = 1,
	};
	ret->ports[0] = (struct vb_port){
		.num = 1,
		.state = "ACTIVE",
		.active = true,
		.link_layer = "Ethernet",
		.mtu = 1024,
		.n_gids = 1,
	};
	ret->ports[0].gids[0] = (struct vb_gid){ .index = 0, .text = "fe80::1", .type = "RoCEv2" };
	ret->ports[0].gids[0].raw[0] = 0xfe;
	ret->ports[0].gids[0].raw[1] = 0x80;
	ret->ports[0].gids[0].raw[15] = 1;
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

	(void)pd;
	(void)access;
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
	mr->key = atomic_fetch_add(&next_key, 1);
	atomic_fetch_add(&fake_verbs_live, 1);
	atomic_fetch_add(&fake_verbs_mrs, 1);
	*ret = mr;
	return 0;
}

static int f_mr_reg_dmabuf(struct vb_pd *pd, int fd, uint64_t offset, size_t len, uint64_t iova,
			   unsigned access, struct vb_mr **ret)
{
	(void)fd;
	(void)offset;
	(void)len;
	(void)iova;
	/* GPU memory: nothing here to touch. */
	return f_mr_reg(pd, NULL, 0, access, ret);
}

static int f_mr_dereg(struct vb_mr *mr)
{
	wait_released(&hold_dereg);
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

static int f_qp_create(struct vb_pd *pd, uint8_t port, struct vb_qp **ret)
{
	struct vb_qp *qp = calloc(1, sizeof(*qp));

	(void)pd;
	(void)port;
	if (!qp)
		return -ENOMEM;
	qp->qpn = atomic_fetch_add(&next_key, 1) & 0xffffff;
	atomic_fetch_add(&fake_verbs_live, 1);
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

static void f_qp_destroy(struct vb_qp *qp)
{
	atomic_fetch_sub(&fake_verbs_live, 1);
	free(qp);
}

/* No rdmacm: the harness does not configure listeners. */
static int f_cm_listen(const struct sockaddr *addr, struct vb_listener **ret)
{
	(void)addr;
	(void)ret;
	return -EOPNOTSUPP;
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
};
