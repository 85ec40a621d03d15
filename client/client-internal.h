/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared between the files of librdmamem; nothing here is exported. */
#ifndef RDMAMEM_CLIENT_INTERNAL_H
#define RDMAMEM_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "proto/frame.h"
#include "proto/varlink.h"
#include "util/list.h"
#include "util/macro.h"
#include "rdmamem.h"

/* A received fd, tagged with the message it came with (frame ordinal). */
struct rdmamem__in_fd {
	uint64_t ordinal;
	int fd;
};

/* A region the daemon keeps across its restarts, to reclaim (reclaim.c). */
struct rdmamem__kept {
	uint64_t region;
	char token[64];
	char **devices; /* named to rdmamem_register_on() */
	size_t n_devices;
};

/* The connection's staging region for Read and Write (staging.h). */
struct rdmamem__staging {
	void *map;       /* STAGING_SIZE bytes, shared with the daemon; NULL: none yet */
	uint64_t region; /* its region, while map is set */
	bool refused;    /* the daemon would not take it: base64 from now on */
};

/*
 * One connection. Everything here belongs to the one thread that uses the
 * client at a time (rdmamem.h); nothing is locked.
 */
struct rdmamem_client {
	int fd;
	int timeout_ms;
	/* 0 while the connection is in step with the daemon; else the
	 * -errno that ended it (every call then gets -ENOTCONN) and
	 * dead_message, the line that said why. dead_untold: no call has
	 * failed with it (it ended while none was pending, or right after
	 * the last one's answer): the next call gets dead and its line
	 * instead, so that the first failure says what happened. */
	int dead;
	bool dead_untold;
	char *dead_message;
	/*
	 * Calls sent or to send, in the order they go out, which is the order
	 * their replies come back in (Varlink answers one call at a time).
	 * A cancelled or timed-out call stays until its last reply comes, so
	 * that the replies after it still find their calls. send_next: the
	 * first call whose message is not fully written (NULL: none).
	 */
	struct list_head calls;
	struct rdmamem_call *send_next;
	size_t n_calls;
	struct frame_reader in;
	/* Fds received and not yet handed to their reply's call. */
	struct rdmamem__in_fd *in_fds;
	size_t n_in_fds, cap_in_fds;
	/* How deep rdmamem_client_process() is on the stack: callbacks run
	 * inside it, and blocking calls are refused there. */
	unsigned dispatching;
	char *path;
	char *error_name;
	char *error_message;
	struct rdmamem__staging staging; /* for Read and Write: staging.c */
	/* Regions to reclaim after the daemon restarted (reclaim.c). */
	struct rdmamem__kept *kept;
	size_t n_kept, cap_kept;
	rdmamem_reclaim_fn on_reclaim;
	void *on_reclaim_userdata;
	bool reconnecting; /* rdmamem_client_reconnect() runs: no second one */
	/* A public call of several calls runs (a chunked Read or Write): it
	 * holds ids of this connection, so no reconnect under it. */
	unsigned op_depth;
};

/* What the library's own reply callbacks see: the parsed message. */
struct rdmamem__reply {
	int error;                 /* 0, or a negative errno */
	const char *error_name;    /* Varlink error, NULL for success or a local failure */
	const char *error_message; /* NULL on success */
	cJSON *root;               /* the message (NULL for a local failure); may be taken */
	cJSON *parameters;         /* points into root; may be NULL */
	int *fds;                  /* received with it; an fd taken is set to -1 */
	size_t n_fds;
	bool continues;
};

typedef void (*rdmamem__reply_fn)(struct rdmamem_client *c, struct rdmamem_call *call,
				  struct rdmamem__reply *reply, void *userdata);

/*
 * Queues a call (params may be NULL; not consumed). fds are duplicated:
 * the caller keeps its own. flags: RDMAMEM_CALL_*. timeout_ms: how long
 * the call (and each of its replies after the last) may take, -1 without
 * limit. fn (NULL with RDMAMEM_CALL_ONEWAY) runs for each reply, from
 * rdmamem_client_process(). On failure the client's error says why.
 */
int rdmamem__call_start(struct rdmamem_client *c, const char *method, const cJSON *params,
			const int *fds, size_t n_fds, unsigned flags, int timeout_ms,
			rdmamem__reply_fn fn, void *userdata, struct rdmamem_call **ret_call);

/* Writes what is queued, as far as the socket takes it, and reads nothing:
 * 0, or the error that ended the connection (rdmamem_client_process() reads
 * what a closed socket's peer said last). */
int rdmamem__client_send(struct rdmamem_client *c);

/* rdmamem_client_process(), reading no further once *done (when not NULL)
 * is true: a blocking call that has its answer leaves the rest for later,
 * rather than paying a read that finds nothing. The socket stays readable
 * for whatever is left. */
int rdmamem__client_process_until(struct rdmamem_client *c, const bool *done);

/* Ends the connection with error r (each pending call's callback sees it
 * once); later calls return -ENOTCONN. Returns r, EPIPE as ECONNRESET. */
int rdmamem__client_fail(struct rdmamem_client *c, int r);

/* Frees every pending call without a callback, and the fds received (the
 * client closes). */
void rdmamem__drop_calls(struct rdmamem_client *c);

/* The one-line message of a Varlink error from the daemon (malloc()ed). */
char *rdmamem__remote_error_message(const char *name, const cJSON *params);

/* The one-line message for a connection that failed with r (malloc()ed). */
char *rdmamem__connection_error(const struct rdmamem_client *c, int r);

/* Parses params_json (NULL: none, *ret NULL) as the parameters of a call:
 * a JSON object, else -EINVAL with the client's error saying why. */
int rdmamem__parse_params(struct rdmamem_client *c, const char *params_json, cJSON **ret);

/* Records the failure of the current call; name NULL for local failures. */
void rdmamem__set_error(struct rdmamem_client *c, const char *name, const char *fmt, ...)
	_printf_(3, 4);

/* Hands over the last error's name and message (NULL when none) and clears
 * them; rdmamem__put_error() puts such a pair back, taking ownership. */
void rdmamem__take_error(struct rdmamem_client *c, char **ret_name, char **ret_message);
void rdmamem__put_error(struct rdmamem_client *c, char *name, char *message);

/*
 * The call behind every helper: params (may be NULL) is not consumed. On
 * return (also for Varlink errors) *ret_root owns the reply and *ret_params
 * points into it (may be NULL). extra_wait_ms lengthens the deadline for
 * calls that wait in the daemon (-1: no deadline).
 */
int rdmamem__call(struct rdmamem_client *c, const char *method, const cJSON *params, const int *fds,
		  size_t n_fds, int extra_wait_ms, cJSON **ret_root, cJSON **ret_params,
		  int *ret_fds, size_t *ret_n_fds);
/* The same with "more": on_continues sees each progress reply's parameters
 * before the final reply comes back as rdmamem__call()'s does. */
int rdmamem__call_more(struct rdmamem_client *c, const char *method, const cJSON *params,
		       const int *fds, size_t n_fds, int extra_wait_ms,
		       void (*on_continues)(void *userdata, const cJSON *params), void *userdata,
		       cJSON **ret_root, cJSON **ret_params, int *ret_fds, size_t *ret_n_fds);

/* Register of a memfd; keep false: not kept across the daemon's restarts. */
int rdmamem__register_memfd(struct rdmamem_client *c, int fd, uint64_t offset, uint64_t length,
			    bool keep, uint64_t *ret_region);

/* A registration object of the daemon's answers: -EPROTO without keys. */
int rdmamem__registration_parse(const cJSON *o, struct rdmamem_registration *ret);

/* The kept regions (reclaim.c): Register's token, RegisterOn's devices,
 * Unregister; freed at close. */
int rdmamem__kept_add(struct rdmamem_client *c, uint64_t region, const char *token);
void rdmamem__kept_device(struct rdmamem_client *c, uint64_t region, const char *device);
void rdmamem__kept_forget(struct rdmamem_client *c, uint64_t region);
void rdmamem__kept_done(struct rdmamem_client *c);

/* Connects a new socket to path: 0 and the fd (CLOEXEC, non-blocking). */
int rdmamem__connect_fd(const char *path, int *ret_fd);

/* Before a blocking call: reconnects and reclaims when the daemon closed a
 * connection that held kept regions, unless a public call of several calls
 * runs (op_depth: those call it once, first). 0, or the error the call
 * returns. */
int rdmamem__reclaim_if_needed(struct rdmamem_client *c);

#endif
