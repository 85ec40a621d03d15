/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "account.h"
#include "daemon.h"
#include "errinfo.h"
#include "gpu.h"
#include "idmap.h"
#include "lease.h"
#include "log.h"
#include "mreg.h"
#include "proto/errors.h"
#include "region.h"
#include "session.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
/* Mappings up to this size are unmapped on the loop, larger ones on the pool. */
#define REGION_UNMAP_INLINE_MAX (1U << 20)
#define MPOL_F_NODE (1 << 0)
#define MPOL_F_ADDR (1 << 1)

/* The owner's session closed: as if it had unregistered. */
static void region_session_drop(struct session_link *link)
{
	region_drop_owner(container_of(link, struct region, owner_link));
}

void region_registry_init(struct daemon *d)
{
	session_kind_register(SESSION_REGION, region_session_drop);
	idmap_init(&d->regions);
	idseq_init(&d->region_order);
	d->next_region_id = 1;
}

void region_registry_done(struct daemon *d)
{
	idmap_done(&d->regions);
	idseq_done(&d->region_order);
}

static const char *file_kind(mode_t m)
{
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISFIFO(m))
		return "a pipe";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a regular file";
}

static int numa_node_of(void *addr)
{
	int node = -1;

	/* Looks at (and if need be faults in) the first page only: a hint
	 * for placement, not a guarantee for the whole range. */
	if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) < 0)
		return -1;
	return node;
}

/* Refuses the import if it would take the owner over a quota. */
static int charge_quota(struct daemon *d, struct account *a, uint64_t length, struct errinfo *e)
{
	const struct daemon_config *cfg = &d->cfg;

	if (a->n_regions + 1 > cfg->max_regions_per_uid)
		return errinfo_quota(e, "regions", cfg->max_regions_per_uid, a->n_regions, 1,
				     "uid %u has %" PRIu64 " regions, the limit is %" PRIu64
				     "; unregister some first",
				     (unsigned)a->uid, a->n_regions, cfg->max_regions_per_uid);
	if (length > cfg->max_pinned_bytes_per_uid ||
	    a->pinned_bytes > cfg->max_pinned_bytes_per_uid - length)
		return errinfo_quota(e, "pinned_bytes", cfg->max_pinned_bytes_per_uid,
				     a->pinned_bytes, length,
				     "uid %u keeps %" PRIu64 " bytes in regions; %" PRIu64
				     " more would pass the limit of %" PRIu64 " bytes",
				     (unsigned)a->uid, a->pinned_bytes, length,
				     cfg->max_pinned_bytes_per_uid);
	a->n_regions++;
	a->pinned_bytes += length;
	d->n_regions++;
	d->pinned_bytes += length;
	d->stats.pinned_peak = MAX(d->stats.pinned_peak, d->pinned_bytes);
	return 0;
}

static void uncharge_quota(struct daemon *d, struct account *a, uint64_t length)
{
	a->n_regions--;
	a->pinned_bytes -= length;
	d->n_regions--;
	d->pinned_bytes -= length;
}

/* Checks the fd and the range; fills st and seals. */
static int validate_memfd(struct memfd_import *imp, struct stat *st, int *ret_seals,
			  struct errinfo *e)
{
	int seals;

	if (fstat(imp->fd, st) < 0)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -errno,
				   "cannot inspect the file descriptor: %s", strerror(errno));
	if (!S_ISREG(st->st_mode))
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -EBADFD,
				   "the file descriptor is %s, not a memfd; create the buffer with "
				   "memfd_create(2) (rdmamem_memfd_create() does it)",
				   file_kind(st->st_mode));

	seals = fcntl(imp->fd, F_GET_SEALS);
	if (seals < 0)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -EBADFD,
				   "the file descriptor is a regular file that cannot be sealed, not a "
				   "memfd; create the buffer with memfd_create(2) and "
				   "MFD_ALLOW_SEALING");
	if (!(seals & F_SEAL_SHRINK))
		return errinfo_set(e, RDMAMEM_ERROR_MISSING_SEAL, -EPERM,
				   "the memfd is not sealed against shrinking, so truncating it would "
				   "crash whoever maps it; seal it with fcntl(fd, F_ADD_SEALS, "
				   "F_SEAL_SHRINK) before registering");

	if (imp->offset > (uint64_t)st->st_size)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "offset %" PRIu64 " is beyond the end of the memfd (%" PRIu64
				   " bytes)",
				   imp->offset, (uint64_t)st->st_size);
	/* The handler refused an explicit length 0: 0 here means "to the end". */
	if (imp->length == 0)
		imp->length = (uint64_t)st->st_size - imp->offset;
	if (imp->length == 0)
		return errinfo_invalid_param(e, imp->offset ? "offset" : "fd", -EINVAL,
					     "the range is empty: the memfd has %" PRIu64
					     " bytes and offset %" PRIu64
					     " is its end; ftruncate it first or pass a smaller offset",
					     (uint64_t)st->st_size, imp->offset);
	if (imp->offset + imp->length < imp->offset)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -EOVERFLOW,
				   "offset %" PRIu64 " + length %" PRIu64 " overflows 64 bits",
				   imp->offset, imp->length);
	if (imp->offset + imp->length > (uint64_t)st->st_size)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "range [%" PRIu64 ", %" PRIu64 ") extends beyond the end of the "
				   "memfd (%" PRIu64 " bytes)",
				   imp->offset, imp->offset + imp->length, (uint64_t)st->st_size);
	*ret_seals = seals;
	return 0;
}

int region_prepare(struct daemon *d, struct session *owner, uint64_t size, struct region **ret,
		   struct errinfo *e)
{
	struct region *reg;
	int r;

	r = charge_quota(d, owner->account, size, e);
	if (r < 0)
		return r;
	reg = calloc(1, sizeof(*reg));
	if (!reg) {
		uncharge_quota(d, owner->account, size);
		return -ENOMEM;
	}
	reg->n_ref = 1;
	reg->daemon = d;
	reg->fd = -EBADF;
	reg->gpu = -1;
	reg->numa_node = -1;
	reg->cuda_registered = -1;
	pthread_mutex_init(&reg->cuda_lock, NULL);
	reg->account = account_ref(owner->account);
	reg->size = size;
	reg->created_msec = uv_now(d->loop);
	idseq_node_init(&reg->order);
	session_link_init(&reg->owner_link);
	list_init(&reg->leases);
	list_init(&reg->mregs);
	list_init(&reg->revoke_waiters);
	lock_init(&reg->lock);
	*ret = reg;
	return 0;
}

int region_publish(struct region *reg, struct session *owner)
{
	struct daemon *d = reg->daemon;

	reg->owner_conn_id = owner->id;
	reg->owner_uid = owner->cred.uid;
	reg->owner_gid = owner->cred.gid;
	reg->owner_pid = owner->cred.pid;
	reg->id = d->next_region_id++;
	d->stats.regions_registered++;
	if (idmap_put(&d->regions, reg->id, reg) < 0)
		return -ENOMEM;
	if (idseq_add(&d->region_order, reg->id, &reg->order) < 0) {
		idmap_remove(&d->regions, reg->id);
		return -ENOMEM;
	}
	session_add(owner, SESSION_REGION, &reg->owner_link);
	if (reg->gpu >= 0 && reg->gpu < GPU_LIST_MAX)
		d->gpu_regions[reg->gpu]++;
	log_full_fields(LOG_DEBUG, 0, LOG_REGION(reg),
			"Region %" PRIu64 ": %" PRIu64 " bytes of %s for pid %d uid %u%s", reg->id,
			reg->size, region_is_gpu(reg) ? "GPU memory" : "a memfd",
			(int)reg->owner_pid, (unsigned)reg->owner_uid,
			reg->writable ? "" : " (read-only)");
	return 0;
}

long long hugetlb_pages(uint64_t page, const char *what)
{
	char path[160];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), HUGETLB_SYSFS "-%" PRIu64 "kB/%s", page >> 10, what);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * A hugetlb mapping reserves its huge pages when it is made, so a host
 * without enough free ones of the memfd's size refuses it (ENOMEM): the
 * client chose memory this host cannot give. Says how many there are.
 */
static int hugetlb_unavailable(uint64_t page, uint64_t len, struct errinfo *e)
{
	long long free_pages = hugetlb_pages(page, "free_hugepages");
	long long resv = hugetlb_pages(page, "resv_hugepages");
	char size[32];

	if (page >= (1ULL << 30))
		snprintf(size, sizeof(size), "%" PRIu64 " GiB", page >> 30);
	else
		snprintf(size, sizeof(size), "%" PRIu64 " MiB", page >> 20);
	if (free_pages < 0 || resv < 0)
		return errinfo_set(e, RDMAMEM_ERROR_MEMORY_UNAVAILABLE, -ENOMEM,
				   "the memfd is backed by %s huge pages and the host has none free "
				   "to map its %" PRIu64 " pages; reserve huge pages of that size or "
				   "register memory of normal pages",
				   size, len / page);
	return errinfo_set(e, RDMAMEM_ERROR_MEMORY_UNAVAILABLE, -ENOMEM,
			   "the memfd is backed by %s huge pages: mapping it needs up to %" PRIu64
			   " of them, and the host has %lld free, %lld of those reserved by others; "
			   "reserve more (" HUGETLB_SYSFS "-%" PRIu64 "kB/nr_hugepages, or "
			   "hugepages= at boot) or register memory of normal pages",
			   size, len / page, free_pages, resv, page >> 10);
}

/*
 * Maps [map_off, map_off + reg->map_len) of fd, writable when the open mode
 * and the seals allow. Failures the client's fd causes get their own error.
 */
static int map_memfd(struct region *reg, int fd, int flags, int *seals, uint64_t map_off,
		     struct errinfo *e)
{
	struct statfs sfs;
	int prot;

	for (;;) {
		/* Write seals forbid a writable shared mapping: map read-only. */
		reg->writable = (flags & O_ACCMODE) == O_RDWR &&
				!(*seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE));
		prot = PROT_READ | (reg->writable ? PROT_WRITE : 0);
		reg->map_base = mmap(NULL, reg->map_len, prot, MAP_SHARED, fd, (off_t)map_off);
		if (reg->map_base != MAP_FAILED)
			return 0;
		reg->map_base = NULL;
		/* The client may add a write seal after validate_memfd() read
		 * the seals: then map read-only, as if it had been there. */
		if (errno == EPERM && reg->writable) {
			int now = fcntl(fd, F_GET_SEALS);

			if (now >= 0 && (now & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) {
				*seals = now;
				continue;
			}
			errno = EPERM;
		}
		break;
	}
	if (errno == ENOMEM && fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC)
		return hugetlb_unavailable((uint64_t)sfs.f_bsize, reg->map_len, e);
	return errinfo_set(e, RDMAMEM_ERROR_INTERNAL, -errno,
			   "cannot map %" PRIu64 " bytes of the memfd: %s", reg->map_len,
			   strerror(errno));
}

int region_import_memfd(struct daemon *d, struct session *owner, struct memfd_import *imp,
			struct region **ret, struct errinfo *e)
{
	struct region *reg;
	struct stat st;
	uint64_t page, map_off;
	int seals = 0, flags, r;

	r = validate_memfd(imp, &st, &seals, e);
	if (r < 0)
		return r;

	flags = fcntl(imp->fd, F_GETFL);
	if (flags < 0 || (flags & O_ACCMODE) == O_WRONLY)
		return errinfo_set(e, RDMAMEM_ERROR_NOT_A_MEMFD, -EACCES,
				   "the memfd must be open for reading");

	r = region_prepare(d, owner, imp->length, &reg, e);
	if (r < 0)
		return r;
	reg->memory = REGION_MEMFD;

	/* hugetlbfs reports its page size as the block size. */
	page = MAX((uint64_t)st.st_blksize, (uint64_t)sysconf(_SC_PAGESIZE));
	if (page & (page - 1))
		page = (uint64_t)sysconf(_SC_PAGESIZE);
	map_off = imp->offset & ~(page - 1);
	/* Whole pages: munmap() of a hugetlb mapping refuses a length that
	 * is not a multiple of its page size (and hugetlbfs files are). */
	reg->map_len = (imp->offset - map_off + imp->length + page - 1) & ~(page - 1);
	r = map_memfd(reg, imp->fd, flags, &seals, map_off, e);
	if (r < 0) {
		/* The client's doing is logged at debug with the answer; what
		 * is left is the daemon's own trouble. */
		if (strcmp(e->name, RDMAMEM_ERROR_INTERNAL) == 0)
			log_full_fields(LOG_WARNING, r, LOG_CLIENT(&owner->cred), "Register: %s",
					e->message);
		region_unref(reg);
		return r;
	}
	reg->addr = (char *)reg->map_base + (imp->offset - map_off);
	reg->fd = TAKE_FD(imp->fd);
	reg->file_offset = imp->offset;
	reg->file_size = st.st_size;
	reg->file_dev = st.st_dev;
	reg->file_ino = st.st_ino;
	reg->seals = seals;
	reg->access = imp->access;
	reg->numa_node = numa_node_of(reg->addr);

	r = region_publish(reg, owner);
	if (r < 0) {
		region_unref(reg);
		return r;
	}
	*ret = reg;
	return 0;
}

int region_cuda_host_register(struct region *r, int ordinal)
{
	int res = 0;

	/* Two copies may touch a fresh region at once: one registers. */
	pthread_mutex_lock(&r->cuda_lock);
	if (r->cuda_registered < 0) {
		res = cu_host_register(r->map_base, r->map_len, ordinal, !r->writable);
		if (res == 0)
			r->cuda_registered = ordinal;
	}
	pthread_mutex_unlock(&r->cuda_lock);
	return res;
}

struct region *region_ref(struct region *r)
{
	if (r)
		r->n_ref++;
	return r;
}

/* Pool-safe: drop order is registrations, then memory, then the fd. An MR
 * does not keep pages mapped: one that outlived the mapping would let a
 * peer's DMA land in freed memory. Every MR held a reference until it was
 * deregistered, so none is left here. */
static void region_release_memory(struct region *r)
{
	int err;

	if (r->cuda_registered >= 0 &&
	    (err = cu_host_unregister(r->map_base, r->cuda_registered)) < 0)
		log_full_fields(LOG_WARNING, err, LOG_REGION(r), "Region %" PRIu64 ": %s", r->id,
				cu_last_error());
	if (r->memory == REGION_CUDA_VMM && (err = cu_vmm_release(&r->vmm)) < 0)
		log_full_fields(LOG_WARNING, err, LOG_REGION(r), "Region %" PRIu64 ": %s", r->id,
				cu_last_error());
	if (r->map_base && munmap(r->map_base, r->map_len) < 0)
		log_full_fields(LOG_WARNING, -errno, LOG_REGION(r),
				"Region %" PRIu64 ": munmap failed: %m", r->id);
	r->map_base = NULL;
	r->fd = safe_close(r->fd);
}

static void region_finish(struct region *r)
{
	mreg_free_all(r);
	gpu_ipc_unref(r->ipc);
	pthread_mutex_destroy(&r->cuda_lock);
	account_unref(r->account);
	free(r->shares);
	log_full_fields(LOG_DEBUG, 0, LOG_REGION(r), "Region %" PRIu64 " released", r->id);
	free(r);
}

static void on_release(uv_work_t *w)
{
	region_release_memory(container_of(w, struct region, release));
}

static void on_release_done(uv_work_t *w, int status)
{
	(void)status;
	region_finish(container_of(w, struct region, release));
}

static void region_free(struct region *r)
{
	struct daemon *d = r->daemon;

	/* Leases, attempts and in-flight work hold references: none is left. */
	if (idmap_get(&d->regions, r->id) == r)
		idmap_remove(&d->regions, r->id);
	idseq_remove(&d->region_order, &r->order);
	/* The owner's quota is free again now, whether or not the memory goes
	 * on the pool: a client that unregistered may register at once. */
	uncharge_quota(d, r->account, r->size);
	/* Unmapping a large mapping drops every page the daemon touched (25 ms
	 * a GiB here), and CUDA calls can take long: not on the loop. (The
	 * registrations went with the owner's hold, each on the pool.) */
	if ((region_is_gpu(r) || r->cuda_registered >= 0 ||
	     r->map_len >= REGION_UNMAP_INLINE_MAX) &&
	    uv_queue_work(d->loop, &r->release, on_release, on_release_done) == 0)
		return;
	region_release_memory(r);
	region_finish(r);
}

struct region *region_unref(struct region *r)
{
	if (r && --r->n_ref == 0)
		region_free(r);
	return NULL;
}

void region_drop_owner(struct region *r)
{
	struct daemon *d = r->daemon;

	if (r->dead)
		return;
	r->dead = true;
	idmap_remove(&d->regions, r->id);
	idseq_remove(&d->region_order, &r->order);
	session_remove(&r->owner_link);
	if (r->gpu >= 0 && r->gpu < GPU_LIST_MAX)
		d->gpu_regions[r->gpu]--;
	/* No uid keeps the owner's rkeys alive: leases and operations in
	 * flight keep only the memory. */
	mreg_revoke_all(r);
	region_unref(r);
}

/* 0 none, 1 read, 2 read-write, 3 owner. */
static int rights_of(const struct region *r, const struct session *c)
{
	int best = 0;

	if (c->cred.uid == 0 || c->cred.uid == r->owner_uid)
		return 3;
	for (size_t i = 0; i < r->n_shares; i++) {
		const struct region_share *s = &r->shares[i];
		bool match = s->is_group ? session_in_group(c, s->id) : c->cred.uid == s->id;

		if (match)
			best = MAX(best, s->readonly ? 1 : 2);
	}
	return best;
}

/* The rights_of() level a right needs. */
static int level_of(enum region_right right)
{
	switch (right) {
	case REGION_READ:
		return 1;
	case REGION_WRITE:
		return 2;
	case REGION_ADMIN:
		break;
	}
	return 3;
}

bool region_visible_to(const struct region *r, const struct session *caller)
{
	return rights_of(r, caller) > 0;
}

bool region_allows(const struct region *r, const struct session *s, enum region_right right)
{
	return rights_of(r, s) >= level_of(right);
}

int region_lookup(struct daemon *d, uint64_t id, const struct session *caller, enum region_right right,
		  struct region **ret, struct errinfo *e)
{
	struct region *r = idmap_get(&d->regions, id);
	int have;

	if (!r || r->dead)
		return errinfo_set(e, RDMAMEM_ERROR_NO_SUCH_REGION, -ENOENT,
				   "there is no region %" PRIu64
				   " (never registered, or unregistered since)",
				   id);
	have = rights_of(r, caller);
	/* Say nothing about the region itself to those who may not use it. */
	if (have == 0)
		return errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
				   "uid %u may not use region %" PRIu64
				   ": only its owner and those it is shared with may",
				   (unsigned)caller->cred.uid, id);
	if (have < level_of(right))
		return right == REGION_ADMIN ?
			       errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					   "only the owner of region %" PRIu64 " may do that", id) :
			       errinfo_set(e, RDMAMEM_ERROR_PERMISSION_DENIED, -EACCES,
					   "region %" PRIu64 " is shared with uid %u read-only", id,
					   (unsigned)caller->cred.uid);
	*ret = region_ref(r);
	return 0;
}

int region_share(struct region *r, bool is_group, uint32_t id, bool readonly, struct errinfo *e)
{
	unsigned max = r->daemon->cfg.max_shares_per_region;
	struct region_share *n;

	for (size_t i = 0; i < r->n_shares; i++) {
		struct region_share *s = &r->shares[i];

		if (s->is_group == is_group && s->id == id) {
			if (s->readonly == readonly)
				return -EEXIST;
			s->readonly = readonly;
			return 0;
		}
	}
	/* Every access check of another uid walks the list: keep it short. */
	if (r->n_shares >= max)
		return errinfo_quota(e, "shares", max, r->n_shares, 1,
				     "region %" PRIu64 " is shared with %zu uids and gids, the "
				     "limit is %u; share with a group to reach many users",
				     r->id, r->n_shares, max);
	n = reallocarray(r->shares, r->n_shares + 1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	r->shares = n;
	r->shares[r->n_shares++] = (struct region_share){ is_group, id, readonly };
	return 0;
}

int region_unshare(struct region *r, bool is_group, uint32_t id)
{
	for (size_t i = 0; i < r->n_shares; i++) {
		struct region_share *s = &r->shares[i];

		if (s->is_group != is_group || s->id != id)
			continue;
		/* Keep the order GetRegion shows them in. */
		memmove(s, s + 1, (r->n_shares - i - 1) * sizeof(*s));
		r->n_shares--;
		return 0;
	}
	return -ENOENT;
}

bool region_same_memory(const struct region *a, const struct region *b, int64_t *ret_delta)
{
	if (a == b) {
		*ret_delta = 0;
		return true;
	}
	if (a->memory != b->memory)
		return false;
	switch (a->memory) {
	case REGION_MEMFD:
		if (a->file_dev != b->file_dev || a->file_ino != b->file_ino)
			return false;
		*ret_delta = (int64_t)(b->file_offset - a->file_offset);
		return true;
	case REGION_CUDA_IPC:
		/* One open per allocation: one address range. */
		if (a->ipc != b->ipc)
			return false;
		*ret_delta = (int64_t)(b->dptr - a->dptr);
		return true;
	case REGION_CUDA_VMM:
		/* Each import maps the allocation anew, and nothing tells two
		 * imports of one allocation apart from two allocations: every
		 * exported fd is /dev/nvidiactl, and the handle, buffer id and
		 * memory block id differ per import (seen on an H200, driver
		 * 580). */
		break;
	}
	return false;
}

int region_check_range(const struct region *r, uint64_t offset, uint64_t length, const char *what,
		       struct errinfo *e)
{
	if (offset > r->size || length > r->size - offset)
		return errinfo_set(e, RDMAMEM_ERROR_OUT_OF_RANGE, -ERANGE,
				   "%s range [%" PRIu64 ", +%" PRIu64 ") is outside region %" PRIu64
				   " (%" PRIu64 " bytes)",
				   what, offset, length, r->id, r->size);
	return 0;
}

struct region_weak region_weak(const struct region *r)
{
	return (struct region_weak){ .id = r->id, .addr = region_address(r), .size = r->size };
}

struct region *region_weak_upgrade(struct daemon *d, const struct region_weak *w)
{
	struct region *r = idmap_get(&d->regions, w->id);

	if (!r || r->dead || region_address(r) != w->addr || r->size != w->size)
		return NULL;
	return region_ref(r);
}
