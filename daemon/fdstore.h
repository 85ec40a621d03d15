/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * systemd's file-descriptor store and the fds it passes: the process's side
 * of keeping regions across a restart (mem/keep.h has the model's).
 *
 * At start, fdstore_take() reads every fd systemd passed (LISTEN_FDS, with
 * LISTEN_FDNAMES) once, and unsets the variables: the listening socket
 * goes to the server, the files of the fd store to keep_restore(), and a
 * file of any other name is taken out of the store and closed.
 *
 * While running, struct keep_store_ops puts a region's memfd into the store
 * (FDSTORE=1 with FDNAME=, FDPOLL=0: a memfd never hangs up) and takes it
 * out (FDSTOREREMOVE=1), as sd_notify(3) says them, on a socket of its own
 * connected to $NOTIFY_SOCKET and never blocking the loop: when PID 1's
 * queue is full the messages wait, in order, until the socket is writable
 * (a connected datagram socket is writable when its peer has room). At
 * exit, fdstore_free() sends what still waits, waiting up to a second for
 * room. Loop thread only.
 */
#ifndef RDMAMEMD_FDSTORE_H
#define RDMAMEMD_FDSTORE_H

#include <stddef.h>

#include <uv.h>

#include "daemon/mem/keep.h"

struct fdstore;

struct fdstore_passed {
	int socket;                 /* the listening socket; -1: none */
	struct keep_passed *stored; /* the store's files, for keep_restore() */
	size_t n_stored;
};

extern const struct keep_store_ops fdstore_ops; /* userdata: struct fdstore */

/* The sender to $NOTIFY_SOCKET; -ENXIO when it is not set (or names no
 * Unix socket). */
int fdstore_new(uv_loop_t *loop, struct fdstore **ret);
/* Sends what waits (bounded), then closes. Accepts NULL. */
struct fdstore *fdstore_free(struct fdstore *s);

/* Takes what systemd passed; a file of another name is taken out of the
 * store through s (when there is one). -EINVAL when it passed more than
 * one socket. */
int fdstore_take(struct fdstore *s, struct fdstore_passed *ret);
/* Closes what is left and frees the names. */
void fdstore_passed_done(struct fdstore_passed *p);

/*
 * How many fds the store may hold: $FDSTORE, which systemd sets from
 * FileDescriptorStoreMax= from v254 on (the shipped unit sets it too, for
 * older ones); 0 without it. Keeping regions is off then: an fd sent to a
 * notify socket that does not keep it (a test's, a unit without a store)
 * would only pile up there.
 */
unsigned fdstore_max(void);

#endif
