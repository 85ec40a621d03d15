/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/ipc/outq.h"
#include "util/macro.h"
#include "util/sockio.h"

void outq_init(struct outq *q)
{
	*q = (struct outq){};
}

void outq_done(struct outq *q)
{
	for (size_t i = q->marks_start; i < q->n_marks; i++) {
		close_many(q->marks[i].fds, q->marks[i].n_fds);
		free(q->marks[i].ext);
	}
	free(q->marks);
	free(q->buf);
	*q = (struct outq){};
}

/* Nothing is left to send: start over at the beginning, and give back a
 * buffer or mark array that grew large. */
static void outq_reset(struct outq *q)
{
	q->start = q->len = 0;
	q->marks_start = q->n_marks = 0;
	if (q->cap > OUTQ_KEEP_MAX) {
		q->buf = (free(q->buf), NULL);
		q->cap = 0;
	}
	if (q->marks_cap * sizeof(*q->marks) > OUTQ_KEEP_MAX) {
		q->marks = (free(q->marks), NULL);
		q->marks_cap = 0;
	}
}

int outq_reserve(struct outq *q, size_t len, char **ret)
{
	size_t need = len + 1;

	if (q->start == q->len && q->marks_start == q->n_marks)
		outq_reset(q);
	if (q->cap - q->len < need && q->start > 0) {
		/* Sent bytes are dead: slide the rest down, marks with it. */
		memmove(q->buf, q->buf + q->start, q->len - q->start);
		for (size_t i = q->marks_start; i < q->n_marks; i++) {
			q->marks[i].offset -= q->start;
			q->marks[i].end -= q->start;
		}
		q->len -= q->start;
		q->start = 0;
	}
	if (q->cap - q->len < need) {
		size_t ncap = MAX(q->cap * 2, (size_t)4096);
		char *nbuf;

		while (ncap - q->len < need)
			ncap *= 2;
		nbuf = realloc(q->buf, ncap);
		if (!nbuf)
			return -ENOMEM;
		q->buf = nbuf;
		q->cap = ncap;
	}
	*ret = q->buf + q->len;
	return 0;
}

void outq_commit(struct outq *q, size_t len)
{
	q->buf[q->len + len] = '\0';
	q->len += len + 1;
}

static struct outq_mark *outq_add_mark(struct outq *q)
{
	if (q->n_marks == q->marks_cap) {
		size_t ncap = MAX(q->marks_cap * 2, (size_t)4);
		struct outq_mark *nm = reallocarray(q->marks, ncap, sizeof(*nm));

		if (!nm)
			return NULL;
		q->marks = nm;
		q->marks_cap = ncap;
	}
	q->marks[q->n_marks] = (struct outq_mark){ .offset = q->len };
	return &q->marks[q->n_marks++];
}

int outq_push_buffer(struct outq *q, char *text, size_t len)
{
	struct outq_mark *m = outq_add_mark(q);

	if (!m)
		return -ENOMEM;
	m->end = m->offset;
	m->ext = text;
	m->ext_len = len + 1;
	q->ext_pending += len + 1;
	q->ext_held += len + 1;
	return 0;
}

int outq_push(struct outq *q, const char *text, size_t len, int *fds, size_t n_fds)
{
	char *p;
	int r;

	if (n_fds > VARLINK_FDS_MAX)
		return -E2BIG;
	r = outq_reserve(q, len, &p);
	if (r < 0)
		return r;

	if (n_fds > 0) {
		struct outq_mark *m = outq_add_mark(q);

		if (!m)
			return -ENOMEM;
		m->end = q->len + len + 1;
		m->n_fds = n_fds;
		memcpy(m->fds, fds, n_fds * sizeof(int));
	}

	memcpy(p, text, len);
	outq_commit(q, len);
	return 0;
}

int outq_flush(struct outq *q, int fd)
{
	while (q->start < q->len || q->marks_start < q->n_marks) {
		bool marked = q->marks_start < q->n_marks;
		struct outq_mark *m = marked ? &q->marks[q->marks_start] : NULL;
		size_t end = q->len;
		bool with_fds = m && !m->ext && m->offset == q->start;
		ssize_t n;

		/* A message in a buffer of its own, whose turn it is. */
		if (m && m->ext && m->offset == q->start) {
			n = sockio_send(fd, m->ext + m->ext_sent, m->ext_len - m->ext_sent, NULL, 0,
					MSG_DONTWAIT);
			if (n == -EAGAIN || n == -EINTR)
				return 0;
			if (n < 0)
				return (int)n;
			m->ext_sent += n;
			q->ext_pending -= n;
			if (m->ext_sent == m->ext_len) {
				m->ext = (free(m->ext), NULL);
				q->ext_held -= m->ext_len;
				q->marks_start++;
			}
			continue;
		}

		/* A message with fds leaves alone: its fds must not arrive
		 * with the bytes of another message. */
		if (with_fds)
			end = m->end;
		else if (m)
			end = m->offset;

		n = sockio_send(fd, q->buf + q->start, end - q->start, with_fds ? m->fds : NULL,
				with_fds ? m->n_fds : 0, MSG_DONTWAIT);
		if (n == -EAGAIN || n == -EINTR)
			return 0;
		if (n < 0)
			return (int)n;
		if (with_fds) {
			close_many(m->fds, m->n_fds);
			m->n_fds = 0;
			q->marks_start++;
		}
		q->start += n;
	}
	outq_reset(q);
	return 1;
}
