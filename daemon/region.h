/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Regions: client memory the daemon has imported and keeps alive.
 *
 * A region is reference counted. Its owner's registration, every in-flight
 * read/write/copy, every lease and every RDMA registration (MR) hold a
 * reference. Unregister or the owner's disconnect drops the owner's, makes
 * the region invisible to new users and deregisters its MRs at once: the
 * registrations live as long as the owner's hold, the memory as long as
 * anything local uses it. The mapping (the keepalive) goes with the last
 * reference, which is after the last MR (drop order: registrations, memory,
 * fd).
 *
 * The registry maps ids to weak references: a weak reference upgrades to a
 * strong one only while the region lives and still covers the address range
 * it was taken for.
 */
#ifndef RDMAMEMD_REGION_H
#define RDMAMEMD_REGION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <pthread.h>
#include <uv.h>

#include "cuda.h"
#include "idseq.h"
#include "lock.h"
#include "proto/list.h"
#include "session.h"

struct daemon;
struct errinfo;
struct account;

/* RDMA access the owner asked for (RegisterOn uses it once devices exist). */
#define REGION_ACCESS_LOCAL_WRITE (1U << 0)
#define REGION_ACCESS_REMOTE_READ (1U << 1)
#define REGION_ACCESS_REMOTE_WRITE (1U << 2)
#define REGION_ACCESS_REMOTE_ATOMIC (1U << 3)

/* What a caller wants to do with a region. */
enum region_right {
	REGION_READ,
	REGION_WRITE,
	REGION_ADMIN,		/* Unregister, Share: the owner (or root) only */
};

/* Where a region's memory comes from. */
enum region_memory {
	REGION_MEMFD,		/* host memory: a sealed memfd, mapped here */
	REGION_CUDA_VMM,	/* a CUDA VMM allocation exported as a POSIX fd */
	REGION_CUDA_IPC,	/* a legacy CUDA IPC handle */
};

struct gpu_ipc;

struct region_share {
	bool is_group;
	uint32_t id;		/* uid or gid */
	bool readonly;
};

struct region {
	uint64_t id;
	unsigned n_ref;
	struct daemon *daemon;
	bool dead;		/* unregistered: no new users, no registrations */
	struct idseq_node order;	/* in daemon->region_order while published */

	/* The owner: a client's session until Unregister or disconnect
	 * (owner_link.session, NULL since). */
	struct session_link owner_link;	/* SESSION_REGION */
	uint64_t owner_conn_id;
	uid_t owner_uid;
	gid_t owner_gid;
	pid_t owner_pid;
	struct account *account;	/* charged for size and count */

	enum region_memory memory;
	void *addr;		/* host regions: first byte, in the daemon's mapping */
	uint64_t dptr;		/* GPU regions: device address of the first byte */
	uint64_t size;
	void *map_base;		/* the keepalive mapping, page aligned */
	size_t map_len;
	int fd;
	uint64_t file_offset;
	uint64_t file_size;	/* st_size at import */
	/* The memfd's file, so that a copy can tell two regions over one
	 * memfd (different mappings of the same pages) from two pieces of
	 * memory: region_same_memory(). */
	dev_t file_dev;
	ino_t file_ino;
	unsigned seals;
	bool writable;		/* mapped PROT_WRITE */
	int numa_node;		/* -1 when unknown */
	unsigned access;	/* REGION_ACCESS_* */
	uint64_t created_msec;	/* uv_now() at import */

	struct access_lock lock;
	struct list_head leases;	/* struct lease on this region */
	unsigned n_leases_held, n_leases_waiting;

	struct region_share *shares;
	size_t n_shares;

	struct list_head mregs;		/* struct mreg, one per device */
	struct list_head revoke_waiters;	/* struct mreg_waiter: Unregister calls */
	uv_work_t release;		/* the memory, off the loop */

	/* GPU regions. */
	int gpu;			/* device ordinal, -1 for host memory */
	char pci_bus_id[32];
	struct cu_vmm_map vmm;		/* REGION_CUDA_VMM: the import */
	struct gpu_ipc *ipc;		/* REGION_CUDA_IPC: the shared open */

	/* Host regions that copies to or from a GPU touched: their mapping
	 * is page-locked with CUDA once, so such copies run at DMA speed. */
	pthread_mutex_t cuda_lock;
	int cuda_registered;		/* device it was registered through, or -1 */
};

struct region_weak {
	uint64_t id;
	uint64_t addr;		/* region_address() */
	uint64_t size;
};

struct memfd_import {
	int fd;			/* taken on success */
	uint64_t offset;
	uint64_t length;	/* 0: to the end of the file */
	unsigned access;
};

/*
 * Imports a memfd range for owner. Validates the fd (memfd or shmem file,
 * F_SEAL_SHRINK, range within st_size), maps it once MAP_SHARED, charges the
 * owner's quota and publishes the region in the registry. Returns 0 with a
 * reference for the owner in *ret, or a negative errno with *e filled in.
 */
int region_import_memfd(struct daemon *d, struct session *owner, struct memfd_import *imp,
			struct region **ret, struct errinfo *e);

struct region *region_ref(struct region *r);
struct region *region_unref(struct region *r);

/*
 * The first steps of every import: checks and charges the owner's quota for
 * size bytes, then makes an unpublished region that holds that charge.
 */
int region_prepare(struct daemon *d, struct session *owner, uint64_t size, struct region **ret,
		   struct errinfo *e);
/* Gives the region its id and its owner: from here on clients see it. */
int region_publish(struct region *r, struct session *owner);

/* The address peers and weak references know it by: host pointer or dptr. */
static inline uint64_t region_address(const struct region *r)
{
	return r->memory == REGION_MEMFD ? (uint64_t)(uintptr_t)r->addr : r->dptr;
}

static inline bool region_is_gpu(const struct region *r)
{
	return r->memory != REGION_MEMFD;
}

/*
 * Pool-safe: page-locks a host region's mapping with CUDA through device
 * ordinal, once. Returns 0 or a negative errno (cu_last_error() says why).
 */
int region_cuda_host_register(struct region *r, int ordinal);

/*
 * Unregister or disconnect: hides the region, starts deregistering its MRs
 * (mreg_wait_revoked() tells when they are gone) and drops the owner's
 * reference.
 */
void region_drop_owner(struct region *r);

/*
 * Looks a region up for caller with the right it needs. Returns a new
 * reference, or -ENOENT (NoSuchRegion) / -EACCES (PermissionDenied) with *e
 * filled in.
 */
int region_lookup(struct daemon *d, uint64_t id, const struct session *caller, enum region_right right,
		  struct region **ret, struct errinfo *e);

/* Whether caller may see the region in listings. */
bool region_visible_to(const struct region *r, const struct session *caller);

/* Whether s has right on r now (owner, root, or through a share). */
bool region_allows(const struct region *r, const struct session *s, enum region_right right);

/* Grants uid or gid access. -EEXIST when already shared the same way;
 * QuotaExceeded ("shares") in *e when the region has its limit of them. */
int region_share(struct region *r, bool is_group, uint32_t id, bool readonly, struct errinfo *e);
/*
 * Takes back the share of uid or gid (-ENOENT when there is none). Rights
 * are looked up on every use, so new operations see it at once; leases
 * already granted are the caller's business (lease_revoke_lost()).
 */
int region_unshare(struct region *r, bool is_group, uint32_t id);

/*
 * Whether a and b are views of one piece of memory — the same region, two
 * regions over one memfd (found by st_dev/st_ino: their mappings are
 * different addresses of the same pages), two regions over one CUDA IPC
 * open — and if so where b's first byte lies relative to a's in it. Regions
 * this cannot relate (two VMM imports of one allocation) are taken to be
 * separate memory.
 */
bool region_same_memory(const struct region *a, const struct region *b, int64_t *ret_delta);

/*
 * The host's huge pages of page bytes: what is one of "nr_hugepages",
 * "free_hugepages", "resv_hugepages" (free ones include those reserved by
 * mappings). -1 when the host has no such page size.
 */
#define HUGETLB_SYSFS "/sys/kernel/mm/hugepages/hugepages"
long long hugetlb_pages(uint64_t page, const char *what);

/* Checks [offset, offset + length) against the region, overflow-safe. */
int region_check_range(const struct region *r, uint64_t offset, uint64_t length, const char *what,
		       struct errinfo *e);

struct region_weak region_weak(const struct region *r);
/* A new reference if the region of w lives and still covers w's range. */
struct region *region_weak_upgrade(struct daemon *d, const struct region_weak *w);

/* Registry bookkeeping for the daemon. */
void region_registry_init(struct daemon *d);
void region_registry_done(struct daemon *d);

#endif
