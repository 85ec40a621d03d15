/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Regions kept across a restart of the daemon (systemd's file-descriptor
 * store).
 *
 * Under systemd, a region whose memory is a file the daemon holds (a memfd:
 * region_mem_ops.keep) is handed to the service manager's store as it is
 * published, under a name that says everything fixed about it: id, owner
 * uid and gid, offset in the file, length, access and its reclaim token
 * (KEEP_REGION_PREFIX, keep_name_parse()). It is taken out of the store
 * when its owner lets go. What can change later — its shares and the
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
 * uid, charged to that uid's quota), applies the state, registers it again
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

#include "util/list.h"

struct errinfo;
struct region;
struct region_registry;
struct session;

#define KEEP_REGION_PREFIX "rdmamem-r1."
#define KEEP_STATE_PREFIX "rdmamem-state1."
#define KEEP_NAME_MAX 256 /* systemd's FDNAME limit, with the NUL */
#define KEEP_TOKEN_BYTES 16
#define KEEP_TOKEN_HEX (2 * KEEP_TOKEN_BYTES)
#define KEEP_STATE_DELAY_MSEC 100
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
	bool warned_full;      /* said once that the store is full */
	bool frozen;           /* shutting down: the store is left as it is */
	uint64_t state_gen;    /* of the state in the store; 0: none */
	uint64_t stated_next;  /* the region id that state names as next */
	bool state_dirty;
	uint64_t state_delay_msec; /* after a change: 20 times the last write's time */
	uv_timer_t state_timer;
	/* Restored regions not reclaimed yet, each in its uid's holder. */
	struct list_head holders; /* struct keep_holder */
	unsigned n_awaiting;
	uint64_t grace_end_msec; /* uv_now() when they are dropped */
	uv_timer_t grace_timer;
	uint64_t n_restored, n_reclaimed, n_expired; /* since start: GetStatus, metrics */
};

/* At start; store NULL when there is no service manager to keep regions. */
void keep_init(struct keep_ctx *k, struct region_registry *regions,
	       const struct keep_store_ops *store, void *store_data, unsigned max);
/* rpc gives the device side before anything is restored. */
void keep_set_devices(struct keep_ctx *k, const struct keep_device_ops *ops, void *userdata);

/*
 * Hands the previous process's files (those whose names start with
 * KEEP_REGION_PREFIX or KEEP_STATE_PREFIX; takes their fds) back as
 * regions, held for reclaim for grace_sec seconds. What cannot be restored
 * is logged, taken out of the store and closed. Returns how many regions
 * came back.
 */
unsigned keep_restore(struct keep_ctx *k, struct keep_passed *passed, size_t n, unsigned grace_sec);

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

/* Whether name is one this daemon gives the store's files: a region's or
 * the state's (its form is then checked by keep_restore()). */
bool keep_is_store_name(const char *name);

/* Parses a region's store name; -EINVAL when it is not one. */
int keep_name_parse(const char *name, struct keep_name *ret);
/* Formats it; -ENAMETOOLONG cannot happen with KEEP_NAME_MAX. */
int keep_name_format(const struct keep_name *n, char *buf, size_t size);

#endif
