/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A connection's queue of outgoing messages. Bytes are coalesced so that a
 * burst of replies leaves in one sendmsg; a message that carries fds leaves
 * in a sendmsg of its own, so the fds ride on its first byte and the peer's
 * read that returns them ends inside that message (see PROTOCOL.md). A large
 * message made elsewhere (a Read's reply, megabytes of base64 made on the
 * pool) is queued as it is, in a buffer of its own, and never copied.
 *
 * What a queue holds (outq_held()) counts against its client's output budget
 * (budget.h), so a queue that empties gives back what it grew to: a
 * connection that once queued megabytes of small replies keeps no megabytes.
 */
#ifndef RDMAMEMD_OUTQ_H
#define RDMAMEMD_OUTQ_H

#include <stddef.h>

#include "proto/varlink.h"

/* A buffer or mark array larger than this is freed when the queue empties. */
#define OUTQ_KEEP_MAX (64U * 1024U)

/* A message that does not leave with the bytes around it. */
struct outq_mark {
	size_t offset; /* where in buf the message starts (ext: goes before) */
	size_t end;    /* fds: and where it ends, terminator included */
	size_t n_fds;
	int fds[VARLINK_FDS_MAX];
	char *ext; /* or the message is here, terminator included (owned) */
	size_t ext_len, ext_sent;
};

struct outq {
	char *buf;
	size_t start, len, cap;
	struct outq_mark *marks;
	size_t marks_start, n_marks, marks_cap;
	size_t ext_pending; /* bytes of ext messages not yet sent */
	size_t ext_held;    /* bytes of ext buffers not yet freed */
};

void outq_init(struct outq *q);
/* Closes fds that were never sent. */
void outq_done(struct outq *q);

/*
 * Appends text[0..len) and a NUL. On success takes ownership of fds (which
 * then leave with the message); on failure they stay the caller's.
 */
int outq_push(struct outq *q, const char *text, size_t len, int *fds, size_t n_fds);

/*
 * Queues the message text[0..len), which must be followed by its NUL, in
 * text's own buffer: takes text (frees it once sent) on success.
 */
int outq_push_buffer(struct outq *q, char *text, size_t len);

/* Reserves len+1 bytes at the tail for in-place formatting. */
int outq_reserve(struct outq *q, size_t len, char **ret);
/* Commits len bytes written into reserved space and terminates them. */
void outq_commit(struct outq *q, size_t len);

static inline size_t outq_pending(const struct outq *q)
{
	return q->len - q->start + q->ext_pending;
}

/* Bytes of memory the queue holds: its buffer, its marks and the messages
 * in buffers of their own not yet sent in full. */
static inline size_t outq_held(const struct outq *q)
{
	return q->cap + q->marks_cap * sizeof(struct outq_mark) + q->ext_held;
}

/*
 * Sends as much as the socket takes. Returns 1 when the queue is empty,
 * 0 when the socket is full, -errno on a broken connection.
 */
int outq_flush(struct outq *q, int fd);

#endif
