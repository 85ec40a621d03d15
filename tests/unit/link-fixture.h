/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Links for the unit suites, over whichever verbs are in force (the fake on
 * the build machine, rxe in the VM): the mem fixture, an rdma_ctx with its
 * devices and an endpoint listening on one address, a token of f.owner
 * (uid 1000), and three registered buffers: "local" in uid 2000's PD (the
 * initiator's), "remote" (read-write) and "ro" (remote read only) in uid
 * 1000's. The key links uid 2000 on the first device to the endpoint.
 */
#ifndef RDMAMEMD_TESTS_LINK_FIXTURE_H
#define RDMAMEMD_TESTS_LINK_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "daemon/core/netaddr.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/token.h"
#include "daemon/rdma/verbs.h"
#include "daemon/remote/link.h"
#include "tests/fakes/fake.h"
#include "tests/unit/mem-fixture.h"

#define LINK_FIXTURE_SIZE 65536U
#define LINK_FIXTURE_WAIT_MS 20000U

struct link_fixture {
	struct mem_fixture f;
	struct rdma_ctx rdma;
	struct device *dev;
	struct link_pool pool;
	struct token *token; /* f.owner's; NULL once a test revoked it */
	struct link_key key;
	uv_timer_t tick; /* wakes the loop while a test waits */
	char *listen[2];
	struct {
		uint8_t *buf;
		struct vb_mr *mr;
		uint32_t lkey, rkey;
	} local, remote, ro;
};

/* One test's completions. */
struct link_rec {
	struct link_user u;
	unsigned n;
	struct link_completion c[16];
	char reason[192]; /* the last final's */
};

static inline void link_rec_complete(struct link_user *u, const struct link_completion *c)
{
	struct link_rec *r = container_of(u, struct link_rec, u);

	ck_assert_uint_lt(r->n, ELEMENTSOF(r->c));
	r->c[r->n++] = *c;
	if (c->final)
		snprintf(r->reason, sizeof(r->reason), "%s", c->reason);
}

static inline void link_rec_init(struct link_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->u.complete = link_rec_complete;
}

struct link_wait {
	struct link_waiter w;
	bool done;
	struct link *l;
	int error;
	char reason[192];
};

static inline void link_wait_ready(struct link_waiter *w, struct link *l, int error,
				   const char *reason)
{
	struct link_wait *lw = container_of(w, struct link_wait, w);

	lw->done = true;
	lw->l = l;
	lw->error = error;
	snprintf(lw->reason, sizeof(lw->reason), "%s", reason ?: "");
}

static inline void link_wait_init(struct link_wait *w)
{
	memset(w, 0, sizeof(*w));
	w->w.ready = link_wait_ready;
}

static inline void link_fixture_tick(uv_timer_t *t)
{
	(void)t;
}

/* Runs the loop until cond, for at most LINK_FIXTURE_WAIT_MS. */
#define LINK_RUN_UNTIL(lf, cond)                                                            \
	do {                                                                                \
		uint64_t until_ = uv_now(&(lf)->f.loop) + LINK_FIXTURE_WAIT_MS;             \
		uv_timer_start(&(lf)->tick, link_fixture_tick, 5, 5);                       \
		while (!(cond) && uv_now(&(lf)->f.loop) < until_)                           \
			uv_run(&(lf)->f.loop, UV_RUN_ONCE);                                 \
		uv_timer_stop(&(lf)->tick);                                                 \
		ck_assert_msg(cond, "still not true after %u ms: %s", LINK_FIXTURE_WAIT_MS, \
			      #cond);                                                       \
	} while (0)

static inline void link_fixture_reg(struct link_fixture *lf, uid_t uid, unsigned access,
				    uint8_t **ret_buf, struct vb_mr **ret_mr, uint32_t *lkey,
				    uint32_t *rkey)
{
	struct vb_pd *pd;

	*ret_buf = aligned_alloc(4096, LINK_FIXTURE_SIZE);
	ck_assert_ptr_nonnull(*ret_buf);
	memset(*ret_buf, 0, LINK_FIXTURE_SIZE);
	ck_assert_int_eq(device_pd(lf->dev, uid, &pd), 0);
	ck_assert_int_eq(vb->mr_reg(pd, *ret_buf, LINK_FIXTURE_SIZE, access, ret_mr), 0);
	vb->mr_keys(*ret_mr, lkey, rkey);
}

/* Local and remote bytes that differ at every equal offset. */
static inline void link_fixture_fill(struct link_fixture *lf, unsigned seed)
{
	for (size_t i = 0; i < LINK_FIXTURE_SIZE; i++) {
		lf->local.buf[i] = (uint8_t)(seed + i * 7);
		lf->remote.buf[i] = (uint8_t)(seed * 3 + 1 + i * 13);
	}
}

/* link_fixture_init(), with the devices' topology read from sysfs root
 * (a test's own tree; NULL: /sys). */
static inline void link_fixture_init_at(struct link_fixture *lf, const char *listen,
					const struct link_pool_config *cfg, const char *sysfs)
{
	struct errinfo e = {};

	memset(lf, 0, sizeof(*lf));
	mem_fixture_init(&lf->f);
	uv_timer_init(&lf->f.loop, &lf->tick);
	lf->rdma.core = &lf->f.core;
	lf->rdma.sysfs = sysfs;
	lf->listen[0] = (char *)listen;
	lf->f.core.cfg.rdmacm_listen = lf->listen;
	endpoint_init(&lf->rdma);
	token_registry_init(&lf->rdma);
	ck_assert_int_eq(devices_open(&lf->rdma), 0);
	ck_assert_msg(!list_empty(&lf->rdma.devices), "no RDMA device");
	lf->dev = list_first_entry(&lf->rdma.devices, struct device, link);
	ck_assert_int_eq(endpoint_start(&lf->rdma), 0);
	ck_assert_int_eq(token_create(&lf->rdma, lf->f.owner, &lf->token, &e), 0);

	link_fixture_reg(lf, 2000, VB_ACCESS_LOCAL_WRITE, &lf->local.buf, &lf->local.mr,
			 &lf->local.lkey, &lf->local.rkey);
	link_fixture_reg(lf, 1000,
			 VB_ACCESS_LOCAL_WRITE | VB_ACCESS_REMOTE_READ | VB_ACCESS_REMOTE_WRITE,
			 &lf->remote.buf, &lf->remote.mr, &lf->remote.lkey, &lf->remote.rkey);
	link_fixture_reg(lf, 1000, VB_ACCESS_REMOTE_READ, &lf->ro.buf, &lf->ro.mr, &lf->ro.lkey,
			 &lf->ro.rkey);
	link_fixture_fill(lf, 0);

	link_pool_init(&lf->pool, &lf->f.loop, cfg);
	lf->key.dev = lf->dev;
	lf->key.uid = 2000;
	ck_assert_int_eq(netaddr_parse_address(listen, &lf->key.endpoint), 0);
	memcpy(lf->key.token, lf->token->raw, TOKEN_BYTES);
}

static inline void link_fixture_init(struct link_fixture *lf, const char *listen,
				     const struct link_pool_config *cfg)
{
	link_fixture_init_at(lf, listen, cfg, NULL);
}

/* Every link must be unreferenced by now: a test that fails leaves the
 * rest to the process's end. */
static inline void link_fixture_done(struct link_fixture *lf)
{
	link_pool_stop(&lf->pool);
	LINK_RUN_UNTIL(lf, lf->pool.n_links == 0);
	ck_assert_int_eq(link_pool_done(&lf->pool), 0);
	lf->f.core.cfg.rdma_allow = NULL;
	endpoint_stop(&lf->rdma);
	ck_assert_uint_eq(lf->rdma.n_rconns, 0);
	ck_assert_int_eq(vb->mr_dereg(lf->local.mr), 0);
	ck_assert_int_eq(vb->mr_dereg(lf->remote.mr), 0);
	ck_assert_int_eq(vb->mr_dereg(lf->ro.mr), 0);
	free(lf->local.buf);
	free(lf->remote.buf);
	free(lf->ro.buf);
	session_close(lf->f.owner);
	session_close(lf->f.other);
	devices_stop(&lf->rdma);
	uv_close((uv_handle_t *)&lf->tick, NULL);
	uv_run(&lf->f.loop, UV_RUN_DEFAULT);
	devices_free(&lf->rdma);
	token_registry_done(&lf->rdma);
	mem_fixture_done(&lf->f);
}

/* The verbs in force before link_fixture_start(): its teardown puts them
 * back. */
static inline const struct vb_ops **link_fixture_saved_vb(void)
{
	static const struct vb_ops *saved;

	return &saved;
}

/*
 * A case's fixture over the fake verbs (real false: the build machine; the
 * fake's knobs reset) or the real ones (rxe in the Soft-RoCE VM, tag
 * rdma), the endpoint listening on listen.
 */
static inline void link_fixture_start(struct link_fixture *lf, const char *listen, bool real)
{
	*link_fixture_saved_vb() = vb;
	vb = real ? &vb_real_ops : &fake_vb_ops;
	if (!real)
		fake_verbs_reset();
	link_fixture_init(lf, listen, NULL);
}

/* Its teardown: over the fake, nothing it allocated is left. */
static inline void link_fixture_stop(struct link_fixture *lf)
{
	link_fixture_done(lf);
	if (vb == &fake_vb_ops) {
		fake_verbs_reset();
		ck_assert_int_eq(atomic_load(&fake_verbs_live), 0);
	}
	vb = *link_fixture_saved_vb();
}

/* A WR between local[loff] and remote[roff]. */
static inline struct vb_send_wr link_fixture_wr(struct link_fixture *lf, enum vb_wr_opcode op,
						uint64_t wr_id, size_t loff, size_t roff,
						uint32_t len, bool signaled)
{
	return (struct vb_send_wr){
		.wr_id = wr_id,
		.opcode = op,
		.signaled = signaled,
		.local_addr = (uint64_t)(uintptr_t)(lf->local.buf + loff),
		.lkey = lf->local.lkey,
		.length = len,
		.remote_addr = (uint64_t)(uintptr_t)(lf->remote.buf + roff),
		.rkey = lf->remote.rkey,
	};
}

/* Whether w's two ranges hold the same bytes (it ran, or nothing moved). */
static inline bool link_fixture_same(struct link_fixture *lf, const struct vb_send_wr *w)
{
	(void)lf;
	return memcmp((void *)(uintptr_t)w->local_addr, (void *)(uintptr_t)w->remote_addr,
		      w->length) == 0;
}

static inline void link_fixture_check(struct link_fixture *lf, const struct vb_send_wr *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(link_fixture_same(lf, &w[i]), "WR %zu (wr_id %llu) not byte-exact", i,
			      (unsigned long long)w[i].wr_id);
}

static inline struct link *link_fixture_connect(struct link_fixture *lf, struct link_key key)
{
	struct link_wait w;
	struct link *l = NULL;
	int r;

	link_wait_init(&w);
	r = link_get(&lf->pool, &key, &w.w, &l);
	if (r == 0)
		return l;
	ck_assert_int_eq(r, -EINPROGRESS);
	LINK_RUN_UNTIL(lf, w.done);
	ck_assert_msg(w.l, "no link: %s", w.reason);
	ck_assert_int_eq(w.l->state, LINK_READY);
	return w.l;
}

/* A connect that must fail: its -errno, reason in w. */
static inline int link_fixture_connect_error(struct link_fixture *lf, struct link_key key,
					     struct link_wait *w)
{
	struct link *l = NULL;

	link_wait_init(w);
	ck_assert_int_eq(link_get(&lf->pool, &key, &w->w, &l), -EINPROGRESS);
	LINK_RUN_UNTIL(lf, w->done);
	ck_assert_ptr_null(w->l);
	ck_assert_int_lt(w->error, 0);
	LINK_RUN_UNTIL(lf, lf->pool.n_links == 0);
	return w->error;
}

#endif
