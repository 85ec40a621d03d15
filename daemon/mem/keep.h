/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Regions kept across a restart of the daemon (systemd's file-descriptor
 * store).
 *
 * Under systemd, a region whose kind can be kept (region_mem_ops.keep) is
 * handed to the service manager's store as it is published. A memfd goes
 * in as one file, under a name that says everything fixed about it: id,
 * owner uid and gid, offset in the file, length, access and its reclaim
 * token (KEEP_REGION_PREFIX, keep_name_parse()). GPU memory goes in as
 * parts (KEEP_KIND_PREFIX): a sealed record with the same facts and the
 * kind's own line (a VMM allocation's size, an IPC handle), and the files
 * behind it (the client's fd of each VMM allocation, each held in flight
 * by a socket of its own, util/fdhold.h; none for an IPC handle, which
 * the exporting client keeps open). It is taken out of
 * the store when its owner lets go. What can change later — its shares and the
 * devices it is registered on — goes into one sealed memfd, the state
 * (KEEP_STATE_PREFIX plus a generation), rewritten KEEP_STATE_DELAY_MSEC
 * after a change (longer with many regions: state_flush()) and once more
 * at shutdown. A process that ends in any
 * way, SIGKILL included, leaves systemd holding every region an owner still
 * held; a change in the last KEEP_STATE_DELAY_MSEC before a crash may be
 * missing from the state (the client library asks for its devices again
 * when it reclaims).
 *
 * The next process gets them back with its sockets (LISTEN_FDS):
 * keep_restore() imports each as the region it was (same id, same owner
 * uid, charged to that uid's quota) — a GPU region through struct
 * keep_kind_ops, on the pool, so it comes back a little later —, applies
 * the state, registers it again
 * on the devices it had — new rkeys: the MRs and queue pairs died with the
 * process — and holds it in a holder session of its uid for
 * reclaim-grace-sec seconds. The owner's client reconnects and calls
 * Reclaim with the token Register gave it: the region moves into its
 * session. What nobody reclaims is dropped when the grace ends.
 *
 * From the shutdown on (keep_freeze()) nothing is taken out of the store:
 * the owners' disconnects that a shutdown causes are not theirs.
 *
 * The store itself (sd_pid_notify_with_fds) is the process's business and
 * comes from daemon.c (struct keep_store_ops); device names and
 * registrations are the rdma layer's and come from rpc (struct
 * keep_device_ops). Loop thread only.
 */
#ifndef RDMAMEMD_KEEP_H
#define RDMAMEMD_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "daemon/mem/region.h"
#include "util/list.h"

struct errinfo;
struct region;
struct region_registry;
struct session;

#define KEEP_REGION_PREFIX "rdmamem-r1."
/* A region of a kind that comes back from its files and a line of text
 * (GPU memory): its parts are KEEP_KIND_PREFIX "ID.PART", part 0 a sealed
 * memfd with its record (keep.c, record_format()), parts 1 to N its files. */
#define KEEP_KIND_PREFIX "rdmamem-k1."
#define KEEP_STATE_PREFIX "rdmamem-state1."
#define KEEP_NAME_MAX 256 /* systemd's FDNAME limit, with the NUL */
#define KEEP_TOKEN_BYTES 16
#define KEEP_TOKEN_HEX (2 * KEEP_TOKEN_BYTES)
#define KEEP_STATE_DELAY_MSEC 100
/* The longest the daemon waits for restored GPU regions before it takes
 * clients (the driver's first load and context: a few hundred ms). */
#define KEEP_RESTORE_WAIT_MSEC 10000
/* Region ids the state reserves past the last one given (on_publish() in keep.c),
 * and the largest id a restore takes (ids stay far from wrapping). */
#define KEEP_ID_HEADROOM (UINT64_C(1) << 16)
#define KEEP_ID_MAX (UINT64_C(1) << 62)

/* The service manager's store: both return 0 or a negative errno. */
struct keep_store_ops {
	/* Stores fd (the store keeps a duplicate) under name. */
	int (*put)(void *userdata, const char *name, int fd);
	/* Drops every fd the store holds under name. */
	int (*remove)(void *userdata, const char *name);
};

/* The devices a region is registered on (rpc, over rdma's registrations). */
struct keep_device_ops {
	/* Calls fn with the name of each device r is registered on, or being
	 * registered on. */
	void (*each)(void *userdata, struct region *r, void (*fn)(void *ctx, const char *device),
		     void *ctx);
	/* Starts r's registration on the device named so, if it is open. */
	void (*register_on)(void *userdata, struct region *r, const char *device);
};

/* A kept region of a kind that comes back from text, as the next process
 * reads it from the store (KEEP_KIND_PREFIX). */
struct keep_record {
	uint64_t id;
	uid_t uid;
	gid_t gid;
	uint64_t offset, length;
	unsigned access;
	const char *text;             /* the kind's line (struct region_keep's text) */
	int fds[REGION_KEEP_FDS_MAX]; /* its files, in order */
	unsigned n_fds;
};

/*
 * How a restored region of such a kind ends, on the loop: r, published
 * under the record's id for the holder session, with the holder's
 * reference; or r NULL and e saying why.
 */
typedef void (*keep_restored_fn)(void *ctx, struct region *r, struct errinfo *e);

/* Regions of kinds that come back from text (GPU memory: gpu/gpu_keep.c). */
struct keep_kind_ops {
	/*
	 * Starts bringing back the region rec describes, for holder; takes
	 * rec->fds. Returns 0 with *ret_job set: done runs once, on the loop,
	 * unless cancel came first — perhaps before this returns (keep.c
	 * waits for the return then). A negative errno with e filled in when
	 * refused at once (a record it cannot read); done does not run then.
	 */
	int (*restore)(void *userdata, struct session *holder, struct keep_record *rec,
		       keep_restored_fn done, void *ctx, void **ret_job, struct errinfo *e);
	/* done will not run (the grace ended, or a shutdown began). */
	void (*cancel)(void *userdata, void *job);
};

/* A file the previous process left in the store (LISTEN_FDNAMES). */
struct keep_passed {
	char *name;
	int fd;
};

/* What one region's store name says (keep_name_parse()). */
struct keep_name {
	uint64_t id;
	uid_t uid;
	gid_t gid;
	uint64_t offset, length;
	unsigned access; /* REGION_ACCESS_* */
	char token[KEEP_TOKEN_HEX + 1];
};

struct keep_ctx {
	struct region_registry *regions;
	const struct keep_store_ops *store; /* NULL: regions are not kept */
	void *store_data;
	const struct keep_device_ops *devices;
	void *devices_data;
	unsigned max;          /* fds the store may hold ($FDSTORE); 0: none are put */
	struct list_head kept; /* their hooks (keep.c), the state's lines */
	unsigned n_kept;       /* regions in the store now */
	unsigned n_files;      /* their files in the store (a GPU region's parts) */
	const struct keep_kind_ops *kinds;
	void *kinds_data;
	struct list_head pending; /* restores of such kinds under way (keep.c) */
	bool warned_full;         /* said once that the store is full */
	bool frozen;              /* shutting down: the store is left as it is */
	uint64_t state_gen;       /* of the state in the store; 0: none */
	uint64_t stated_next;     /* the region id that state names as next */
	bool state_dirty;
	uint64_t state_delay_msec; /* after a change: 20 times the last write's time */
	uv_timer_t state_timer;
	/* Restored regions not reclaimed yet, each in its uid's holder. */
	struct list_head holders; /* struct keep_holder */
	unsigned n_awaiting;
	uint64_t grace_end_msec; /* uv_now() when they are dropped */
	uv_timer_t grace_timer;
	uint64_t n_restored, n_reclaimed, n_expired; /* since start: GetStatus, metrics */
	/* Told once, after keep_restore(), when the GPU restores it started
	 * are done, or KEEP_RESTORE_WAIT_MSEC later, whichever comes first:
	 * the daemon takes clients from then on (server_hold()). */
	void (*on_restored)(void *userdata);
	void *on_restored_data;
	uv_timer_t restore_timer;
};

/* At start; store NULL when there is no service manager to keep regions. */
void keep_init(struct keep_ctx *k, struct region_registry *regions,
	       const struct keep_store_ops *store, void *store_data, unsigned max);
/* rpc gives the device side before anything is restored. */
void keep_set_devices(struct keep_ctx *k, const struct keep_device_ops *ops, void *userdata);
/* The GPU side gives its restore before anything is restored. */
void keep_set_kinds(struct keep_ctx *k, const struct keep_kind_ops *ops, void *userdata);
/* Whether a region registered now would be kept (a store, not shutting
 * down, room): imports that do extra work for the store (a GPU region
 * keeping its fds open) ask first. */
bool keep_accepting(const struct keep_ctx *k);

/*
 * Hands the previous process's files (those whose names start with
 * KEEP_REGION_PREFIX, KEEP_KIND_PREFIX or KEEP_STATE_PREFIX; takes their
 * fds) back as
 * regions, held for reclaim for grace_sec seconds. What cannot be restored
 * is logged, taken out of the store and closed. Returns how many regions
 * came back or are coming (GPU memory is imported on the pool).
 */
unsigned keep_restore(struct keep_ctx *k, struct keep_passed *passed, size_t n, unsigned grace_sec);
/* Whether GPU restores that keep_restore() started are still under way
 * (on_restored comes when they are not). */
bool keep_restoring(const struct keep_ctx *k);

/*
 * Hands a just published region to the store, if its kind can be kept
 * and the store has room, and gives it a reclaim token. Returns whether it
 * is kept.
 */
bool keep_region(struct keep_ctx *k, struct region *r);
/* The reclaim token of a kept region, or NULL. */
const char *keep_token(const struct region *r);
/* Whether r is a restored region waiting for Reclaim; *ret_msec: how long
 * it still waits. */
bool keep_awaiting(const struct region *r, uint64_t *ret_msec);

/*
 * Reclaim: moves r, restored and waiting, into caller's session when
 * token is its token. -ENOENT (NoSuchRegion: not waiting) or -EACCES
 * (PermissionDenied: another uid, or the wrong token) with *e filled in.
 */
int keep_reclaim(struct keep_ctx *k, struct region *r, struct session *caller, const char *token,
		 struct errinfo *e);

/* Shares or devices of a kept region changed: the state is written soon. */
void keep_changed(struct keep_ctx *k);

/* Shutdown begins: writes the state if it changed, then leaves the store
 * alone, and drops the regions nobody reclaimed (they stay in the store). */
void keep_freeze(struct keep_ctx *k);
/* Closes the timers (the loop then ends); after keep_freeze(). */
void keep_stop(struct keep_ctx *k);

/* Whether name is one this daemon gives the store's files: a region's, a
 * part of one, or the state's (its form is then checked by
 * keep_restore()). */
bool keep_is_store_name(const char *name);

/* Parses a region's store name; -EINVAL when it is not one. */
int keep_name_parse(const char *name, struct keep_name *ret);
/* Formats it; -ENAMETOOLONG cannot happen with KEEP_NAME_MAX. */
int keep_name_format(const struct keep_name *n, char *buf, size_t size);

#endif
