/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Incremental reader for NUL-terminated Varlink messages. No I/O: the caller
 * asks for space, fills it (recvmsg, a fuzzer, a test) and commits what it
 * wrote; complete messages are then taken out one by one.
 */
#ifndef RDMAMEM_FRAME_H
#define RDMAMEM_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct frame_reader {
	char *buf;
	size_t cap;
	size_t start;   /* first byte not yet handed out */
	size_t scanned; /* bytes before this offset hold no NUL after start */
	size_t len;     /* bytes committed */
	size_t max_body;
	uint64_t n_terminated; /* NUL bytes committed so far */
	uint64_t n_taken;      /* messages handed out so far */
	bool mid_message;      /* the last byte committed was not a terminator */
};

struct frame {
	const char *data; /* NUL-terminated JSON text */
	size_t len;       /* without the NUL */
	uint64_t ordinal; /* 0 for the first message on the stream */
};

/*
 * A reader's buffer starts at this size, and starts again at it when a
 * message is detached (see frame_reader_detach()); it grows beyond only for
 * a message longer than half of it, doubling up to the message size limit.
 */
#define FRAME_BUFFER_INITIAL (128U * 1024U)

/* max_body: largest message accepted, terminator not counted. */
void frame_reader_init(struct frame_reader *fr, size_t max_body);
void frame_reader_done(struct frame_reader *fr);

/*
 * Returns in *ret_ptr and *ret_space the writable space after the committed bytes.
 * Frames handed out by frame_reader_next() are invalid after this call.
 * Returns -ENOBUFS when the buffer holds a full-size partial message (the
 * caller then gets -EMSGSIZE from frame_reader_next()), -ENOMEM on OOM.
 */
int frame_reader_reserve(struct frame_reader *fr, void **ret_ptr, size_t *ret_space);

/*
 * How many bytes frame_reader_reserve() would add to the buffer now (0: the
 * buffer has room, or holds a full-size partial message). The caller can
 * decide whether it may grow before it does.
 */
size_t frame_reader_growth(const struct frame_reader *fr);

/* frame_reader_commit() found no message starting in the bytes committed. */
#define FRAME_NO_START UINT64_MAX

/*
 * Commits n bytes written into the reserved space. Returns the ordinal of the
 * last message that starts within them, or FRAME_NO_START when they only
 * continue a message that started before. That is the message fds received
 * with these bytes belong to: a sender that writes each message with one
 * sendmsg puts its fds on the socket buffer that holds the message's first
 * byte, and the kernel ends a read after the buffer that carried fds, so a
 * read's fds came with the last message that starts in it (a read that ends
 * exactly at a terminator did not start the next one).
 */
uint64_t frame_reader_commit(struct frame_reader *fr, size_t n);

/*
 * Takes the next complete message. Returns 1 and fills *ret, 0 when more
 * bytes are needed, -EMSGSIZE when the pending message exceeds max_body
 * (the stream cannot be resynchronised: close it).
 */
int frame_reader_next(struct frame_reader *fr, struct frame *ret);

/*
 * Hands the buffer that holds f, the frame frame_reader_next() just returned,
 * to the caller (who frees it once done with f->data), and goes on with a new
 * one into which the bytes after f are moved. A message of megabytes thus
 * leaves without being copied, and the reader does not keep a buffer of its
 * size. Returns -ENOMEM, with nothing changed, when the new buffer cannot be
 * had.
 */
int frame_reader_detach(struct frame_reader *fr, const struct frame *f, char **ret_buf);

/* Bytes committed but not yet handed out (complete or partial messages). */
static inline size_t frame_reader_pending(const struct frame_reader *fr)
{
	return fr->len - fr->start;
}

#endif
