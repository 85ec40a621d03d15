/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "daemon/core/core.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/endpoint.h"
#include "daemon/core/errinfo.h"
#include "daemon/core/log.h"
#include "daemon/rdma/mreg.h"
#include "proto/errors.h"
#include "proto/json_out.h"
#include "daemon/rdma/rdma.h"
#include "daemon/mem/region.h"

static unsigned vb_access_of(const struct region *r)
{
	unsigned a = 0;

	if (r->access & REGION_ACCESS_REMOTE_READ)
		a |= VB_ACCESS_REMOTE_READ;
	/* Writes need a writable mapping, and the verbs require local write
	 * with remote write or atomics. */
	if (r->writable) {
		if (r->access & REGION_ACCESS_LOCAL_WRITE)
			a |= VB_ACCESS_LOCAL_WRITE;
		if (r->access & REGION_ACCESS_REMOTE_WRITE)
			a |= VB_ACCESS_REMOTE_WRITE | VB_ACCESS_LOCAL_WRITE;
		if (r->access & REGION_ACCESS_REMOTE_ATOMIC)
			a |= VB_ACCESS_REMOTE_ATOMIC | VB_ACCESS_LOCAL_WRITE;
	}
	return a;
}

static int access_text(unsigned a, char *buf, size_t size)
{
	return snprintf(buf, size, "%s%s%s%s", a & VB_ACCESS_LOCAL_WRITE ? " local_write" : "",
			a & VB_ACCESS_REMOTE_READ ? " remote_read" : "",
			a & VB_ACCESS_REMOTE_WRITE ? " remote_write" : "",
			a & VB_ACCESS_REMOTE_ATOMIC ? " remote_atomic" : "");
}

static void mreg_fail(struct mreg *m, int err, const char *fmt, ...) _printf_(3, 4);
static void mreg_revoke(struct mreg *m);

static void mreg_fail(struct mreg *m, int err, const char *fmt, ...)
{
	va_list ap;

	m->state = MREG_FAILED;
	m->err = err;
	m->dev->rdma->core->stats.mr_failures++;
	free(m->error);
	m->error = NULL;
	va_start(ap, fmt);
	if (vasprintf(&m->error, fmt, ap) < 0)
		m->error = NULL;
	va_end(ap);
	m->settled_msec = uv_now(m->dev->rdma->core->loop);
	log_full_fields(LOG_WARNING, err,
			(&(const struct log_fields){ .region = m->region->id,
						     .client_pid = m->region->owner_pid,
						     .client_uid = m->region->owner_uid,
						     .has_client = true,
						     .device = m->device }),
			"Region %" PRIu64 " on RDMA device %s: %s", m->region->id, m->device,
			m->error ?: strerror(-err));
}

static void mreg_settle(struct mreg *m)
{
	struct list_head settled;
	struct mreg_waiter *w, *n;

	/* Waiters may cancel others or start new requests from settled(). */
	list_init(&settled);
	while (!list_empty(&m->waiters)) {
		w = list_first_entry(&m->waiters, struct mreg_waiter, link);
		list_del(&w->link);
		list_add_tail(&w->link, &settled);
	}
	list_for_each_entry_safe(w, n, &settled, link) {
		list_del(&w->link);
		w->settled(w);
	}
}

/*
 * Device memory: the dma-buf the kind gives (NICs register whole
 * allocations; a sub-range of a page may not export), offset to the region,
 * with the device address as iova so peers use the same addresses as for
 * host memory; else the device address through ibv_reg_mr, which works when
 * nvidia_peermem is loaded. Both causes are kept when neither works.
 */
static void register_device(struct mreg *m, struct region_mr_source *src)
{
	struct region *r = m->region;
	char dmabuf_err[256];
	int err;

	if (src->dmabuf_fd >= 0) {
		err = vb->mr_reg_dmabuf(m->pd, src->dmabuf_fd, src->dmabuf_offset, r->size,
					src->iova, m->access, &m->mr);
		/* The MR holds its own reference to the dma-buf. */
		src->dmabuf_fd = safe_close(src->dmabuf_fd);
		if (err == 0) {
			m->how = "dma-buf";
			m->err = 0;
			return;
		}
		snprintf(dmabuf_err, sizeof(dmabuf_err), "ibv_reg_dmabuf_mr: %s", strerror(-err));
	} else {
		snprintf(dmabuf_err, sizeof(dmabuf_err), "%s", src->dmabuf_error);
	}
	m->err = vb->mr_reg(m->pd, src->addr, r->size, m->access, &m->mr);
	if (m->err == 0) {
		m->how = "peer-memory";
		return;
	}
	snprintf(m->gpu_error, sizeof(m->gpu_error),
		 "%s; ibv_reg_mr on the device address (needs nvidia_peermem): %s", dmabuf_err,
		 strerror(-m->err));
}

/* Pool: what to register comes from the region's memory kind. */
static void on_reg_work(uv_work_t *work)
{
	struct mreg *m = container_of(work, struct mreg, work);
	struct region *r = m->region;
	struct region_mr_source src;

	m->err = r->mem->mr_source(r, &src);
	if (m->err < 0)
		return;
	if (src.device) {
		register_device(m, &src);
		return;
	}
	m->how = "host-memory";
	m->err = vb->mr_reg(m->pd, src.addr, r->size, m->access, &m->mr);
}

/* What to tell the client about the locked-memory limit behind a failure. */
static void memlock_hint(char *buf, size_t size)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		buf[0] = '\0';
		return;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(buf, size, "; RLIMIT_MEMLOCK of rdmamemd is unlimited");
	else
		snprintf(
			buf, size,
			"; RLIMIT_MEMLOCK of rdmamemd is %llu bytes (hard %llu)%s: give the service "
			"LimitMEMLOCK=infinity",
			(unsigned long long)rl.rlim_cur,
			rl.rlim_max == RLIM_INFINITY ? ~0ULL : (unsigned long long)rl.rlim_max,
			geteuid() == 0 ? ", which root's CAP_IPC_LOCK normally lifts" : "");
}

static void on_reg_done(uv_work_t *work, int status)
{
	struct mreg *m = container_of(work, struct mreg, work);
	struct region *r = m->region;

	(void)status;
	histogram_observe(&m->dev->rdma->core->stats.registration_latency,
			  uv_hrtime() - m->queued_ns);
	if (m->err == 0) {
		vb->mr_keys(m->mr, &m->lkey, &m->rkey);
		m->state = MREG_REGISTERED;
		m->settled_msec = uv_now(m->dev->rdma->core->loop);
		m->dev->n_mrs++;
		m->dev->mr_bytes += r->size;
		m->dev->rdma->core->stats.mrs_registered++;
		log_debug("Region %" PRIu64 " registered on %s: lkey 0x%x rkey 0x%x", r->id,
			  m->device, m->lkey, m->rkey);
	} else {
		char access[96], hint[256] = "";

		access_text(m->access, access, sizeof(access));
		if (m->err == -ENOMEM || m->err == -EPERM || m->err == -EAGAIN)
			memlock_hint(hint, sizeof(hint));
		if (region_is_gpu(r))
			mreg_fail(m, m->err,
				  "registering %" PRIu64 " bytes of GPU %d memory at 0x%" PRIx64
				  " on %s failed (access%s): %s%s",
				  r->size, r->gpu, r->dptr, m->device, access, m->gpu_error, hint);
		else
			mreg_fail(m, m->err,
				  "ibv_reg_mr on %s failed for %" PRIu64 " bytes at 0x%" PRIxPTR
				  " (access%s): %s%s",
				  m->device, r->size, (uintptr_t)r->addr, access, strerror(-m->err),
				  hint);
	}
	mreg_settle(m);
	/* The owner let go while this was under way: the MR goes at once. */
	if (r->dead)
		mreg_revoke(m);
	region_unref(r);
}

static void open_devices_text(struct rdma_ctx *rdma, char *buf, size_t size)
{
	struct device *dev;
	size_t n = 0;

	buf[0] = '\0';
	list_for_each_entry(dev, &rdma->devices, link)
		n += snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? ", " : "",
			      dev->info.name);
	if (n == 0)
		snprintf(buf, size, "none");
}

/*
 * Whether the kernel pins the pages of a read-only MR for reading only.
 * Before Linux 6.2 ib_umem_get() pinned every MR with FOLL_WRITE, adding
 * FOLL_FORCE for read-only ones, and GUP refuses a forced write to a shared
 * mapping that is not writable: EFAULT for every read-only memfd
 * (docs/kernel.md). A release that does not parse is given the benefit of
 * the doubt: the attempt's own error then tells.
 */
static bool kernel_pins_read_only(const char **ret_release)
{
	static struct utsname u;
	static int known = -1; /* loop thread only */
	unsigned major, minor;

	if (known < 0)
		known = uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2 ||
			major > 6 || (major == 6 && minor >= 2);
	*ret_release = u.release;
	return known;
}

int mreg_check_region(const struct region *r, struct errinfo *e)
{
	const char *release;

	if (!region_is_host(r) || r->writable || kernel_pins_read_only(&release))
		return 0;
	return errinfo_set(
		e, RDMAMEM_ERROR_READ_ONLY, -EROFS,
		"region %" PRIu64 " is read-only (its memfd was opened read-only or "
		"sealed against writing), and this kernel (Linux %s) pins the memory of "
		"every RDMA registration for writing, which a read-only mapping refuses; "
		"registering read-only memory needs Linux 6.2 or later. Register a "
		"writable memfd with access [\"remote_read\"] instead: peers can then "
		"only read it",
		r->id, release);
}

/*
 * A region's registrations, attached to it as its first hook (the
 * registrations go before anything else of the region): made with the
 * first, revoked when the owner lets go, freed with the region.
 */
struct mreg_set {
	struct region_hook hook;
	struct list_head mregs;          /* struct mreg, one per device */
	struct list_head revoke_waiters; /* struct mreg_waiter: Unregister calls */
};

static void mreg_set_revoke(struct region_hook *h);
static void mreg_set_finish(struct region_hook *h);

static const struct region_hook_ops mreg_hook_ops = {
	.rank = REGION_HOOK_REGISTRATIONS,
	.revoke = mreg_set_revoke,
	.finish = mreg_set_finish,
};

static struct region_hook *mreg_set_make(struct region *r, void *userdata)
{
	struct mreg_set *set = calloc(1, sizeof(*set));

	(void)r;
	(void)userdata;
	if (!set)
		return NULL;
	list_init(&set->mregs);
	list_init(&set->revoke_waiters);
	return &set->hook;
}

/* r's registrations; NULL when it never had one. */
static struct mreg_set *set_of(const struct region *r)
{
	struct region_hook *h = region_hook_find(r, &mreg_hook_ops);

	return h ? container_of(h, struct mreg_set, hook) : NULL;
}

struct mreg *mreg_find(struct region *r, const char *device)
{
	struct mreg_set *set = set_of(r);
	struct mreg *m;

	if (!set)
		return NULL;
	list_for_each_entry(m, &set->mregs, link)
		if (strcmp(m->device, device) == 0)
			return m;
	return NULL;
}

bool mreg_any(const struct region *r)
{
	struct mreg_set *set = set_of(r);

	return set && !list_empty(&set->mregs);
}

void mreg_list_write(struct json_out *o, const struct region *r)
{
	struct mreg_set *set = set_of(r);
	const struct mreg *m;

	if (!set)
		return;
	list_for_each_entry(m, &set->mregs, link)
		mreg_write(o, m, false);
}

void mreg_each_device(const struct region *r, void (*fn)(void *ctx, const char *device), void *ctx)
{
	struct mreg_set *set = set_of(r);
	const struct mreg *m;

	if (!set)
		return;
	list_for_each_entry(m, &set->mregs, link)
		if (m->state == MREG_PENDING || m->state == MREG_REGISTERED)
			fn(ctx, m->device);
}

struct mreg *mreg_ensure(struct region *r, struct device *dev, struct mreg_waiter *w)
{
	const char *device = dev->info.name;
	struct mreg *m = mreg_find(r, device);
	struct region_hook *h;
	int err;

	if (m) {
		if (m->state == MREG_PENDING && w)
			list_add_tail(&w->link, &m->waiters);
		return m;
	}
	h = region_hook_get(r, &mreg_hook_ops, mreg_set_make, NULL);
	if (!h)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->region = r;
	snprintf(m->device, sizeof(m->device), "%s", device);
	list_init(&m->waiters);
	list_add_tail(&m->link, &container_of(h, struct mreg_set, hook)->mregs);
	m->access = vb_access_of(r);
	m->dev = dev;

	if (m->dev->fatal) {
		mreg_fail(m, -EIO,
			  "RDMA device %s reported a fatal error (IBV_EVENT_DEVICE_FATAL) and "
			  "takes no new registrations; restart the daemon once it is repaired",
			  device);
		return m;
	}
	err = device_pd(m->dev, r->owner_uid, &m->pd);
	if (err < 0) {
		mreg_fail(m, err, "cannot allocate a protection domain on %s: %s", device,
			  strerror(-err));
		return m;
	}

	m->state = MREG_PENDING;
	if (w)
		list_add_tail(&w->link, &m->waiters);
	/* The attempt keeps the region (and so the memory) until it is done. */
	region_ref(r);
	m->queued_ns = uv_hrtime();
	err = uv_queue_work(dev->rdma->core->loop, &m->work, on_reg_work, on_reg_done);
	if (err < 0) {
		region_unref(r);
		mreg_fail(m, -ENOMEM, "cannot queue the registration: %s", uv_strerror(err));
		if (w)
			list_del(&w->link);
	}
	return m;
}

void mreg_waiter_cancel(struct mreg_waiter *w)
{
	if (list_linked(&w->link))
		list_del(&w->link);
}

int mreg_forget_failure(struct region *r, const char *device)
{
	struct mreg_set *set = set_of(r);
	struct mreg *m;

	if (!set)
		return -ENOENT;
	list_for_each_entry(m, &set->mregs, link)
		if (strcmp(m->device, device) == 0 && m->state == MREG_FAILED) {
			list_del(&m->link);
			free(m->error);
			free(m);
			return 0;
		}
	return -ENOENT;
}

static void mreg_free(struct mreg *m)
{
	list_del(&m->link);
	free(m->error);
	free(m);
}

/* Unregister calls waiting for the last MR to go are answered. */
static void revoke_settle(struct region *r)
{
	struct mreg_set *set = set_of(r);
	struct mreg_waiter *w;

	if (!list_empty(&set->mregs))
		return;
	while (!list_empty(&set->revoke_waiters)) {
		w = list_first_entry(&set->revoke_waiters, struct mreg_waiter, link);
		list_del(&w->link);
		w->settled(w);
	}
}

/* Pool: ibv_dereg_mr unpins every page of the MR. */
static void on_dereg_work(uv_work_t *work)
{
	struct mreg *m = container_of(work, struct mreg, work);

	m->err = vb->mr_dereg(m->mr);
}

static void on_dereg_done(uv_work_t *work, int status)
{
	struct mreg *m = container_of(work, struct mreg, work);
	struct region *r = m->region;

	(void)status;
	/* The device refused: nothing is left to try (the MR goes with the
	 * protection domain at the latest), the memory still goes after. */
	if (m->err < 0)
		log_warning_errno(m->err, "Region %" PRIu64 " on %s: ibv_dereg_mr failed: %m",
				  r->id, m->device);
	else
		log_debug("Region %" PRIu64 " deregistered from %s (rkey 0x%x)", r->id, m->device,
			  m->rkey);
	if (m->dev) {
		m->dev->n_mrs--;
		m->dev->mr_bytes -= r->size;
	}
	mreg_free(m);
	revoke_settle(r);
	/* The MR's own reference: the memory may go now, never before. */
	region_unref(r);
}

static void dereg_start(struct mreg *m)
{
	if (uv_queue_work(m->dev->rdma->core->loop, &m->work, on_dereg_work, on_dereg_done) < 0) {
		/* Never left in force: on the loop, then. */
		on_dereg_work(&m->work);
		on_dereg_done(&m->work, 0);
	}
}

/* The MR stays for the daemon's own WRs: its rkey ends now another way,
 * with the queue pairs of every remote peer in the owner's PD on that
 * device (the only ones that can name it). */
static void revoke_peers(struct mreg *m)
{
	struct rdma_ctx *rdma = m->dev->rdma;
	struct rconn *c, *n;

	list_for_each_entry_safe(c, n, &rdma->rconns, link)
		if (c->dev == m->dev && c->uid == m->region->owner_uid)
			rconn_destroy(c, "the owner unregistered a region in its protection "
					 "domain while the daemon's own transfers held it");
}

struct mreg *mreg_hold(struct mreg *m)
{
	m->n_hold++;
	return m;
}

void mreg_release(struct mreg *m)
{
	if (--m->n_hold > 0 || !m->dereg_waits)
		return;
	m->dereg_waits = false;
	dereg_start(m);
}

static void mreg_revoke(struct mreg *m)
{
	struct region *r = m->region;

	switch (m->state) {
	case MREG_PENDING:
		/* on_reg_done() comes back here. */
	case MREG_DEREGISTERING:
		return;
	case MREG_FAILED:
		mreg_free(m);
		revoke_settle(r);
		return;
	case MREG_REGISTERED:
		break;
	}
	m->state = MREG_DEREGISTERING;
	region_ref(r);
	if (m->n_hold > 0) {
		m->dereg_waits = true;
		revoke_peers(m);
		return;
	}
	dereg_start(m);
}

/* The owner let go of the region (r->dead): its MRs go, now or once their
 * registration is done, and recorded failures are forgotten. */
static void mreg_set_revoke(struct region_hook *h)
{
	struct mreg_set *set = container_of(h, struct mreg_set, hook);
	struct mreg *m, *n;

	list_for_each_entry_safe(m, n, &set->mregs, link)
		mreg_revoke(m);
}

bool mreg_wait_revoked(struct region *r, struct mreg_waiter *w)
{
	struct mreg_set *set = set_of(r);

	if (!set || list_empty(&set->mregs))
		return false;
	list_add_tail(&w->link, &set->revoke_waiters);
	return true;
}

/* The region goes: frees what is left of its entries (none is in force). */
static void mreg_set_finish(struct region_hook *h)
{
	struct mreg_set *set = container_of(h, struct mreg_set, hook);

	/* Every MR held a reference until it was deregistered: what is left
	 * are entries of a region that was never dropped by an owner. */
	while (!list_empty(&set->mregs))
		mreg_free(list_first_entry(&set->mregs, struct mreg, link));
	free(set);
}

void mreg_missing_write(struct json_out *o, struct rdma_ctx *rdma, const char *device)
{
	char open[256], text[512];
	struct mreg m = {
		.state = MREG_FAILED,
		.err = -ENODEV,
		.error = text,
	};

	open_devices_text(rdma, open, sizeof(open));
	snprintf(m.device, sizeof(m.device), "%s", device);
	snprintf(text, sizeof(text), "no RDMA device '%s' is open (open: %s)%s", device, open,
		 device_allowed(rdma, device) ? "" : "; the configuration excludes it");
	mreg_write(o, &m, false);
}

void mreg_write(struct json_out *o, const struct mreg *m, bool recorded)
{
	static const char *const states[] = { "pending", "registered", "failed", "deregistering" };

	json_out_object(o, NULL);
	json_out_string(o, "device", m->device);
	json_out_string(o, "state", states[m->state]);
	if (m->dev)
		json_out_string(o, "backend", m->dev->backend);
	if (m->state == MREG_REGISTERED) {
		static const struct {
			unsigned bit;
			const char *name;
		} names[] = {
			{ VB_ACCESS_LOCAL_WRITE, "local_write" },
			{ VB_ACCESS_REMOTE_READ, "remote_read" },
			{ VB_ACCESS_REMOTE_WRITE, "remote_write" },
			{ VB_ACCESS_REMOTE_ATOMIC, "remote_atomic" },
		};

		json_out_u64(o, "lkey", m->lkey);
		json_out_u64(o, "rkey", m->rkey);
		json_out_u64(o, "addr", region_address(m->region));
		if (m->how)
			json_out_string(o, "via", m->how);
		json_out_u64(o, "length", m->region->size);
		json_out_array(o, "access");
		for (size_t i = 0; i < ELEMENTSOF(names); i++)
			if (m->access & names[i].bit)
				json_out_string(o, NULL, names[i].name);
		json_out_end(o);
	} else if (m->state == MREG_FAILED) {
		char text[1024];

		static const char recorded_note[] = " (recorded when first tried and not "
						    "retried; RetryRegistration clears it)";

		snprintf(text, sizeof(text), "%s%s", m->error ?: strerror(-m->err),
			 recorded ? recorded_note : "");
		json_out_string(o, "error", text);
		json_out_int(o, "errno", -m->err);
		json_out_bool(o, "recorded", recorded);
	}
	json_out_end(o);
}
