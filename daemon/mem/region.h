/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Regions: client memory the daemon has imported and keeps alive.
 *
 * A region is reference counted. Its owner's registration, every in-flight
 * read/write/copy, every lease and every RDMA registration (MR) hold a
 * reference. Unregister or the owner's disconnect drops the owner's, makes
 * the region invisible to new users and deregisters its MRs at once: the
 * registrations live as long as the owner's hold, the memory as long as
 * anything local uses it. The memory goes with the last reference, which is
 * after the last MR (drop order: the hooks — registrations first —, then the
 * memory, then the fd; struct region_hook).
 *
 * The registry maps ids to weak references: a weak reference upgrades to a
 * strong one only while the region lives and still covers the address range
 * it was taken for.
 *
 * Threads. Everything here runs on the loop, with three exceptions, each
 * for work that holds a reference (so the region cannot go meanwhile): a
 * registration (mreg) and a transfer (xfer) on the pool read the fields
 * fixed before region_publish() and call the kind's pool-safe ops
 * (mr_source, copy); a copy may attach a hook (a host region page-locked by
 * CUDA) under hooks_lock; and the release of the memory runs the hooks'
 * release and the kind's release on the pool once no reference is left.
 * Counters, rights, shares, leases, the lock and the registry are the
 * loop's alone.
 */
#ifndef RDMAMEMD_REGION_H
#define RDMAMEMD_REGION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <pthread.h>
#include <uv.h>

#include "daemon/mem/membw.h"
#include "util/idmap.h"
#include "util/idseq.h"
#include "daemon/mem/lock.h"
#include "util/list.h"
#include "daemon/core/session.h"
#include "util/loop_poll.h"
#include "util/timeout.h"

struct core;
struct errinfo;
struct json_out;
struct keep_ctx;
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
	REGION_ADMIN, /* Unregister, Share: the owner (or root) only */
};

struct region;
struct region_hook;

/*
 * Where the bytes of a copy are (region_mem_ops.copy): a region's, offset
 * bytes into it, or the daemon's own host buffer (region NULL).
 */
struct region_span {
	struct region *region;
	uint64_t offset;
	void *buf;
};

/* What an RDMA registration of the region pins (region_mem_ops.mr_source). */
struct region_mr_source {
	void *addr;             /* for ibv_reg_mr: the host mapping, or the device address */
	bool device;            /* addr is device memory, registrable with peer memory */
	int dmabuf_fd;          /* >= 0: a dma-buf to try first; the caller closes it */
	uint64_t dmabuf_offset; /* of the region's first byte in the dma-buf */
	uint64_t iova;          /* the address peers use for the first byte */
	char dmabuf_error[256]; /* device memory without a dma-buf: why */
};

/*
 * What the fd store holds of a kept region (region_mem_ops.keep): the files
 * behind it — the region's own, not taken — and where the region starts
 * in them; and for a kind that needs more than a file to come back (GPU
 * memory: the allocation's size, an IPC handle), a line of text that its
 * restore reads (keep.h's struct keep_kind_ops). A memfd has one file and
 * no text.
 */
#define REGION_KEEP_FDS_MAX 64
#define REGION_KEEP_TEXT_MAX 256
struct region_keep {
	int fds[REGION_KEEP_FDS_MAX];
	unsigned n_fds;
	uint64_t offset;
	char text[REGION_KEEP_TEXT_MAX];
};

/*
 * A kind of memory behind regions: memfds (region_memfd.c), CUDA VMM
 * allocations and legacy CUDA IPC handles (gpu_region.c). Only the kind's
 * own file knows its state (it allocates the region with room for it and
 * reaches it with container_of) and its driver.
 *
 * Threads: release, mr_source and copy may run on a pool thread, and touch
 * only the region's immutable fields (set before it was published) and the
 * kind's own state; everything else runs on the loop.
 */
struct region_mem_ops {
	const char *type; /* "memfd", "cuda-vmm", "cuda-ipc": GetRegion's source.type */
	/* Pool-safe: unmaps the memory, releases the driver's handle, closes
	 * the fd. Runs once, after every hook's release. NULL: nothing. */
	void (*release)(struct region *r);
	/* Loop: drops what the kind shares between regions (an IPC open),
	 * after release. NULL: nothing. */
	void (*finish)(struct region *r);
	/* Pool-safe: what to register; 0, or a negative errno. */
	int (*mr_source)(struct region *r, struct region_mr_source *ret);
	/*
	 * Pool-safe: moves n bytes from src to dst, one of which is memory of
	 * this kind, the other of any kind or a host buffer; through bounce
	 * (n bytes) when given, for two views of one allocation whose ranges
	 * overlap. 0, or a negative errno with *e saying why. NULL for host
	 * memory the daemon maps at addr: memcpy() moves its bytes.
	 */
	int (*copy)(const struct region_span *dst, const struct region_span *src, uint64_t n,
		    void *bounce, struct errinfo *e);
	/*
	 * Loop: how long copy() of n bytes from src to dst would take now, in
	 * microseconds, when it may run on the loop: UINT64_MAX when it must
	 * go to the pool (the kind cannot tell, or the copy could wait behind
	 * other work). NULL: always the pool.
	 */
	uint64_t (*copy_usec)(const struct region_span *dst, const struct region_span *src,
			      uint64_t n);
	/*
	 * Loop: starts copy() of n bytes without waiting for it, when the kind
	 * can queue it in a few microseconds now (where copy_usec() could say
	 * how long it takes, whatever that is): 1 with *ret_pending set, for
	 * copy_poll() and copy_finish(); 0 when it cannot, and copy() runs on
	 * the pool instead; a negative errno with *e saying why. Both regions
	 * stay until copy_finish() returned. NULL: never.
	 */
	int (*copy_start)(const struct region_span *dst, const struct region_span *src, uint64_t n,
			  void **ret_pending, struct errinfo *e);
	/*
	 * Loop: whether the bytes of a copy_start() have landed, without
	 * waiting: 1 when they have (copy_finish() then returns at once); 0
	 * while they move; -EBUSY when the pool must wait for them instead:
	 * asking now could wait behind other work of the kind there, or the
	 * kind could not tell (copy_finish() says why). NULL: the pool waits.
	 */
	int (*copy_poll)(void *pending);
	/* Pool, or the loop once copy_poll() said 1: waits for the bytes of a
	 * copy_start() and frees pending: 0, or a negative errno with *e saying
	 * why. */
	int (*copy_finish)(void *pending, struct errinfo *e);
	/*
	 * Loop: what the fd store needs to bring the region back after a
	 * restart (keep.h). 0, or a negative errno when this region cannot be
	 * kept. NULL: this kind is never kept.
	 */
	int (*keep)(const struct region *r, struct region_keep *ret);
	/* Loop: GetRegion's source fields beyond type, into the object open
	 * in source. */
	void (*describe)(const struct region *r, struct json_out *source);
	/* Whether a and b, two regions of this kind, are views of one piece
	 * of memory, and where b's first byte lies from a's in it (see
	 * region_same_memory()). NULL: never. */
	bool (*same_memory)(const struct region *a, const struct region *b, int64_t *ret_delta);
};

/*
 * Something attached to a region that has to end with it: its RDMA
 * registrations (mreg.c), a host region's page-locking by CUDA
 * (gpu_region.c), a GPU region's place in the per-GPU counts.
 *
 * The order is fixed: when the owner lets go (region_drop_owner()), every
 * hook's revoke, in list order; when the last reference goes, every hook's
 * release (on the pool when the region releases there), then the memory
 * (ops->release: unmap, then the fd), then, on the loop, every hook's
 * finish and then ops->finish. Hooks are kept by rank, so that the
 * registrations come first: an MR does not keep pages mapped, one that
 * outlived the mapping would let a peer's DMA land in freed memory.
 */
enum region_hook_rank {
	REGION_HOOK_REGISTRATIONS,
	REGION_HOOK_OTHER,
};

struct region_hook_ops {
	enum region_hook_rank rank;
	void (*revoke)(struct region_hook *h);  /* loop: the owner let go; may be NULL */
	void (*release)(struct region_hook *h); /* pool-safe, before the memory; may be NULL */
	void (*finish)(struct region_hook *h);  /* loop: last; may free h; may be NULL */
};

struct region_hook {
	struct list_head link; /* in region->hooks, by rank */
	const struct region_hook_ops *ops;
	struct region *region;
};

/*
 * The mem subsystem's context: every region and lease of the daemon, the
 * counters GetStatus shows and the lock-wait deadlines. Loop only.
 */
struct region_registry {
	struct core *core;         /* the loop, the limits, the counters */
	struct idmap regions;      /* id → struct region, weak */
	struct idseq region_order; /* the same regions by id, for ListRegions */
	uint64_t next_region_id;
	uint64_t n_regions; /* charged: published or not, until freed */
	uint64_t pinned_bytes;
	struct idmap leases; /* id → struct lease (lease.c) */
	uint64_t next_lease_id;
	struct timeouts timeouts; /* lock-wait deadlines: leases, transfers */
	struct loop_poll started; /* copies started on the loop, looked at each turn (xfer.c) */
	struct membw membw;       /* host memory bandwidth per NUMA node */
	struct keep_ctx *keep;    /* regions kept across a restart (keep.h); NULL: none */
	/* Told each id given (keep.c: the state reserves ids ahead). */
	void (*on_publish)(void *userdata, uint64_t id);
	void *on_publish_data;
};

/* At daemon start: the maps, the timeouts on core's loop, the drop hook of
 * SESSION_REGION (lease_registry_init() does the leases' part). */
void region_registry_init(struct region_registry *reg, struct core *core);
/* Shutdown: stops the lock-wait timer (its handle closes with the loop),
 * and the looks at started copies once the last has landed. */
void region_registry_stop(struct region_registry *reg);
/* After every region and lease is gone. */
void region_registry_done(struct region_registry *reg);

struct region_share {
	bool is_group;
	uint32_t id; /* uid or gid */
	bool readonly;
};

/*
 * Threads: a region lives on the loop. A pool thread working for a
 * reference it holds (a transfer, a registration, the release) may read the
 * fields set before region_publish() — addr, size, map_base, map_len,
 * writable, dptr, gpu, mem and the kind's state — and attach hooks
 * (region_hook_get(), under hooks_lock); nothing else.
 */
struct region {
	uint64_t id;
	unsigned n_ref;
	struct region_registry *registry;
	bool dead;               /* unregistered: no new users, no registrations */
	struct idseq_node order; /* in registry->region_order while published */

	/* The owner: a client's session until Unregister or disconnect
	 * (owner_link.session, NULL since). */
	struct session_link owner_link; /* SESSION_REGION */
	uint64_t owner_conn_id;
	uid_t owner_uid;
	gid_t owner_gid;
	pid_t owner_pid;
	struct account *account; /* charged for size and count */

	const struct region_mem_ops *mem; /* the kind; its state follows the region */
	bool release_on_pool;             /* the kind's release may block (CUDA, a large munmap) */
	void *addr;                       /* host memory: first byte, in the daemon's mapping */
	uint64_t dptr;                    /* device memory: device address of the first byte */
	uint64_t size;
	void *map_base; /* host memory: the keepalive mapping, page aligned */
	size_t map_len;
	bool writable; /* the memory may be written (a host mapping PROT_WRITE) */
	int numa_node; /* -1 when unknown */
	int gpu;       /* device memory: the GPU's ordinal; -1 for host memory */
	char pci_bus_id[32];
	unsigned access;       /* REGION_ACCESS_* */
	uint64_t created_msec; /* uv_now() at import */
	uint64_t prepared_ns;  /* uv_hrtime() at region_prepare(): the import latency */

	struct access_lock lock;
	struct list_head leases; /* struct lease on this region */
	unsigned n_leases_held, n_leases_waiting;

	struct region_share *shares;
	size_t n_shares;

	pthread_mutex_t hooks_lock; /* hooks may be attached from the pool */
	struct list_head hooks;     /* struct region_hook, by rank */
	uv_work_t release;          /* the memory, off the loop */
};

struct region_weak {
	uint64_t id;
	uint64_t addr; /* region_address() */
	uint64_t size;
};

struct region *region_ref(struct region *r);
struct region *region_unref(struct region *r);

/*
 * The first steps of every import: checks and charges the owner's quota for
 * size bytes, then makes an unpublished region of kind mem that holds that
 * charge, alloc bytes large (at least sizeof(struct region), the region
 * first: the kind's state follows it) and zeroed.
 */
int region_prepare(struct region_registry *reg, struct session *owner, uint64_t size,
		   const struct region_mem_ops *mem, size_t alloc, struct region **ret,
		   struct errinfo *e);
/* Gives the region its id and its owner: from here on clients see it. */
int region_publish(struct region *r, struct session *owner);
/* The same under id, when not 0: a region restored after a restart keeps
 * the id it had (keep.h; every id given since is above it). -EEXIST when
 * a region has it, -ENOMEM. */
int region_publish_as(struct region *r, struct session *owner, uint64_t id);

/* Host memory, mapped at addr: its bytes move with memcpy(), not ops->copy. */
static inline bool region_is_host(const struct region *r)
{
	return !r->mem->copy;
}

static inline bool region_is_gpu(const struct region *r)
{
	return !region_is_host(r);
}

/* The address peers and weak references know it by: host pointer or dptr. */
static inline uint64_t region_address(const struct region *r)
{
	return region_is_host(r) ? (uint64_t)(uintptr_t)r->addr : r->dptr;
}

/*
 * r's hook of kind ops. When it has none, make(r, userdata) makes one
 * (NULL: cannot, and nothing is attached), which is attached: all under r's
 * hooks_lock, so that two threads asking at once make one. Any thread that
 * holds a reference. The hook lives as long as the region.
 */
struct region_hook *region_hook_get(struct region *r, const struct region_hook_ops *ops,
				    struct region_hook *(*make)(struct region *r, void *userdata),
				    void *userdata);
/* r's hook of kind ops, or NULL. (hooks_lock is taken: r is const to the
 * caller, not to the lock.) */
struct region_hook *region_hook_find(const struct region *r, const struct region_hook_ops *ops);

/*
 * Unregister or disconnect: hides the region, revokes what its hooks hold
 * for the owner — its MRs start deregistering (mreg_wait_revoked() tells
 * when they are gone) — and drops the owner's reference.
 */
void region_drop_owner(struct region *r);

/*
 * Looks a region up for caller with the right it needs. Returns a new
 * reference, or -ENOENT (NoSuchRegion) / -EACCES (PermissionDenied) with *e
 * filled in.
 */
int region_lookup(struct region_registry *reg, uint64_t id, const struct session *caller,
		  enum region_right right, struct region **ret, struct errinfo *e);

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

/* Checks [offset, offset + length) against the region, overflow-safe. */
int region_check_range(const struct region *r, uint64_t offset, uint64_t length, const char *what,
		       struct errinfo *e);

struct region_weak region_weak(const struct region *r);
/* A new reference if the region of w lives and still covers w's range. */
struct region *region_weak_upgrade(struct region_registry *reg, const struct region_weak *w);

#endif
