/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A connection's queue of outgoing messages. Bytes are coalesced so that a
 * burst of replies leaves in one sendmsg; a message that carries fds leaves
 * in a sendmsg of its own, so the fds ride on its first byte and the peer's
 * read that returns them ends inside that message (see PROTOCOL.md).
 */
#ifndef RDMAMEMD_OUTQ_H
#define RDMAMEMD_OUTQ_H

#include <stddef.h>

#include "proto/varlink.h"

struct outq_mark {
	size_t offset;		/* where the message carrying the fds starts */
	size_t end;		/* and where it ends, terminator included */
	size_t n_fds;
	int fds[VARLINK_FDS_MAX];
};

struct outq {
	char *buf;
	size_t start, len, cap;
	struct outq_mark *marks;
	size_t marks_start, n_marks, marks_cap;
};

void outq_init(struct outq *q);
/* Closes fds that were never sent. */
void outq_done(struct outq *q);

/*
 * Appends text[0..len) and a NUL. On success takes ownership of fds (which
 * then leave with the message); on failure they stay the caller's.
 */
int outq_push(struct outq *q, const char *text, size_t len, int *fds, size_t n_fds);

/* Reserves len+1 bytes at the tail for in-place formatting. */
int outq_reserve(struct outq *q, size_t len, char **ret);
/* Commits len bytes written into reserved space and terminates them. */
void outq_commit(struct outq *q, size_t len);

static inline size_t outq_pending(const struct outq *q)
{
	return q->len - q->start;
}

/*
 * Sends as much as the socket takes. Returns 1 when the queue is empty,
 * 0 when the socket is full, -errno on a broken connection.
 */
int outq_flush(struct outq *q, int fd);

#endif
