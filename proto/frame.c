/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"
#include "util/macro.h"

/* Reads are offered at least this much space so that small messages do
 * not cost one recvmsg each. */
#define FRAME_READ_MIN (FRAME_BUFFER_INITIAL / 2)
/* And at most this much: the bytes one read brings past a terminator are
 * what compaction and frame_reader_detach() move, and what one read costs
 * the caller's thread, so they stay small whatever the socket holds. A read
 * into a buffer that has just grown faults in every page it fills, and a
 * daemon serves every other connection between two reads: at 256 KiB a
 * read cost the loop 1 ms on the build machine (a VM whose page faults take
 * some 11 us), and a bystander's Pings queued behind a stream of 16 MiB
 * messages (p99 16-22 ms); at 64 KiB, 2-6 ms. A large message costs a few
 * more loop turns, which its parsing on the pool outlasts. */
#define FRAME_READ_MAX (64U * 1024U)

void frame_reader_init(struct frame_reader *fr, size_t max_body)
{
	*fr = (struct frame_reader){ .max_body = max_body };
}

void frame_reader_done(struct frame_reader *fr)
{
	free(fr->buf);
	*fr = (struct frame_reader){ .max_body = fr->max_body };
}

/* The pending bytes move to the front when the space after them runs short:
 * handed-out frames are dead by contract. */
static bool frame_reader_compacts(const struct frame_reader *fr)
{
	return fr->start > 0 && fr->cap - fr->len < FRAME_READ_MIN;
}

size_t frame_reader_growth(const struct frame_reader *fr)
{
	size_t pending = fr->len - fr->start;
	/* A full-size message, its terminator, and room for one more read:
	 * the most a sane peer can need at once. */
	size_t limit = fr->max_body + 1 + FRAME_READ_MIN;
	size_t len = frame_reader_compacts(fr) ? pending : fr->len;

	if (pending > fr->max_body || fr->cap - len >= FRAME_READ_MIN || fr->cap >= limit)
		return 0;
	return MIN(MAX(fr->cap * 2, (size_t)FRAME_BUFFER_INITIAL), limit) - fr->cap;
}

int frame_reader_reserve(struct frame_reader *fr, void **ret_ptr, size_t *ret_space)
{
	size_t pending = fr->len - fr->start, grow;

	if (pending > fr->max_body)
		return -ENOBUFS;

	if (frame_reader_compacts(fr)) {
		memmove(fr->buf, fr->buf + fr->start, pending);
		fr->scanned -= fr->start;
		fr->len = pending;
		fr->start = 0;
	}

	grow = frame_reader_growth(fr);
	if (grow > 0) {
		char *nbuf = realloc(fr->buf, fr->cap + grow);

		if (!nbuf)
			return -ENOMEM;
		fr->buf = nbuf;
		fr->cap += grow;
	}

	if (fr->cap == fr->len)
		return -ENOBUFS;

	*ret_ptr = fr->buf + fr->len;
	*ret_space = MIN(fr->cap - fr->len, (size_t)FRAME_READ_MAX);
	return 0;
}

uint64_t frame_reader_commit(struct frame_reader *fr, size_t n)
{
	const char *p = fr->buf + fr->len, *end = p + n;
	/* A message starts at the first byte unless one was in progress. */
	uint64_t last_start = n > 0 && !fr->mid_message ? fr->n_terminated : FRAME_NO_START;

	while (p < end) {
		const char *nul = memchr(p, 0, end - p);

		if (!nul)
			break;
		fr->n_terminated++;
		p = nul + 1;
		/* The next one starts after the terminator, if any byte of it
		 * is here. */
		if (p < end)
			last_start = fr->n_terminated;
	}
	if (n > 0)
		fr->mid_message = end[-1] != '\0';
	fr->len += n;
	return last_start;
}

int frame_reader_next(struct frame_reader *fr, struct frame *ret)
{
	char *nul;

	if (fr->scanned < fr->start)
		fr->scanned = fr->start;

	nul = NULL;
	if (fr->len > fr->scanned)
		nul = memchr(fr->buf + fr->scanned, 0, fr->len - fr->scanned);
	if (!nul) {
		fr->scanned = fr->len;
		if (fr->len - fr->start > fr->max_body)
			return -EMSGSIZE;
		return 0;
	}

	if ((size_t)(nul - (fr->buf + fr->start)) > fr->max_body)
		return -EMSGSIZE;

	*ret = (struct frame){
		.data = fr->buf + fr->start,
		.len = nul - (fr->buf + fr->start),
		.ordinal = fr->n_taken++,
	};
	fr->start = nul + 1 - fr->buf;
	fr->scanned = fr->start;
	if (fr->start == fr->len) {
		/* Empty buffer: restart at offset 0 without a memmove. */
		fr->start = fr->len = fr->scanned = 0;
	}
	return 1;
}

int frame_reader_detach(struct frame_reader *fr, const struct frame *f, char **ret_buf)
{
	/* frame_reader_next() restarts an emptied buffer at 0, so the frame's
	 * buffer may already hold nothing else: then start is 0 and len 0. */
	size_t tail = fr->len - fr->start;
	size_t cap = MAX(tail, (size_t)FRAME_BUFFER_INITIAL);
	char *nbuf = malloc(cap);

	/* The frame lies in the buffer handed out, before start. */
	if (f->data < fr->buf || f->data + f->len >= fr->buf + fr->cap) {
		free(nbuf);
		return -EINVAL;
	}
	if (!nbuf)
		return -ENOMEM;
	memcpy(nbuf, fr->buf + fr->start, tail);
	*ret_buf = fr->buf;
	fr->buf = nbuf;
	fr->cap = cap;
	fr->scanned -= MIN(fr->scanned, fr->start);
	fr->len = tail;
	fr->start = 0;
	return 0;
}
