/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Packed ranges: the compact wire form of many (local offset, remote
 * offset, length) triples between one local region and one remote, as
 * Transfer's batch and PrepareTransfer carry them. The text is the
 * standard, padded base64 (base64.h) of the triples packed as
 * little-endian unsigned 64-bit integers, 24 bytes a range, in order:
 *
 *	local_offset (8) | remote_offset (8) | length (8) | local_offset ...
 *
 * 32 characters a range against about 110 for a listed range and 9 JSON
 * values (a message bounds those at 65,536): one 16 MiB message holds half
 * a million ranges, the daemon decodes them in one pass into one array (on
 * a little-endian host the decoded bytes are the array), and checks them
 * in one loop. What the ranges mean (bounds against both lengths) is the
 * receiver's to check: this is the form only.
 */
#ifndef RDMAMEM_RANGES_H
#define RDMAMEM_RANGES_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/base64.h"

/* Bytes [local_offset, +length) of a region, [remote_offset, +length) of a remote. */
struct ranges_item {
	uint64_t local_offset, remote_offset, length;
};

/* Bytes of one packed range. */
#define RANGES_RECORD 24U

/* Characters of the text of n ranges, without the terminator. */
static inline size_t ranges_encoded_len(size_t n)
{
	return base64_encoded_len(n * RANGES_RECORD);
}

/* Writes ranges_encoded_len(n) characters and a NUL to out. */
void ranges_encode(const struct ranges_item *r, size_t n, char *out);

/*
 * Decodes text[0..len) into a new array of 1 to max ranges (*ret, to free).
 * Returns 0, or -ENOMEM, or with *ret_why (static English, to follow the
 * parameter's name) set: -EINVAL not strict base64, -EBADMSG a length that
 * is not whole ranges, -ENODATA no range, -E2BIG more than max (counted
 * from the length, before anything is decoded).
 */
int ranges_decode(const char *text, size_t len, size_t max, struct ranges_item **ret, size_t *ret_n,
		  const char **ret_why);

/*
 * The number of ranges text[0..len) holds, from its length alone (O(1)):
 * -1 unless it is whole, padded base64 groups of whole ranges. Whether the
 * characters are base64 is ranges_decode()'s to say.
 */
ssize_t ranges_count_text(const char *text, size_t len);

/*
 * Packed indices: a plan post's entries (Transfer's packed_indices), the
 * standard, padded base64 of little-endian unsigned 32-bit integers, 4
 * bytes an index, in order: about 5.3 characters and no JSON value an
 * index, against 8 or more and a value each listed. A plan holds at most
 * 2^17 ranges, so 32 bits always suffice.
 */
#define RANGES_INDEX 4U

/* Characters of the text of n indices, without the terminator. */
static inline size_t ranges_indices_encoded_len(size_t n)
{
	return base64_encoded_len(n * RANGES_INDEX);
}

/* Writes ranges_indices_encoded_len(n) characters and a NUL to out; each
 * index is taken modulo 2^32 (the caller's to check). */
void ranges_indices_encode(const uint64_t *idx, size_t n, char *out);

/* Decodes text[0..len) into a new array of 1 to max indices (*ret, to
 * free); returns as ranges_decode() does (-EBADMSG: not whole indices). */
int ranges_indices_decode(const char *text, size_t len, size_t max, uint32_t **ret, size_t *ret_n,
			  const char **ret_why);

/*
 * The fd form: the same records, not base64, in a memfd sent with the
 * message (PROTOCOL.md, "Packed ranges"). Sealed at least RANGES_FD_SEALS:
 * no write (so the receiver reads the records in place, checking each once,
 * and nobody changes one between its check and its use) and no shrink (so
 * the mapping can never SIGBUS); the file is the records, st_size bytes.
 */
#define RANGES_FD_SEALS (F_SEAL_SHRINK | F_SEAL_WRITE)

/*
 * Ranges as the receiver holds them while a call runs: r[0..n), either
 * mapped from a memfd (map_len > 0) or decoded into a heap array. Released
 * with ranges_release(), which unmaps or frees; zeroed, it holds nothing.
 */
struct ranges_buf {
	const struct ranges_item *r;
	size_t n;
	void *base;
	size_t map_len;
};

void ranges_release(struct ranges_buf *b);

/*
 * Maps the memfd fd, read-only, into b: 1 to max ranges, counted from
 * fstat before anything is mapped. Does not keep fd (the mapping holds the
 * file). Returns 0, or -ENOMEM, or with *ret_why set: -EBADF not a sealable
 * file, -EPERM seals missing, -EBADMSG not whole ranges, -ENODATA empty,
 * -E2BIG more than max, -EACCES not mappable for reading.
 */
int ranges_map_fd(int fd, size_t max, struct ranges_buf *b, const char **ret_why);

/* The base64 form into b (ranges_decode()). */
int ranges_decode_buf(const char *text, size_t len, size_t max, struct ranges_buf *b,
		      const char **ret_why);

/* A new memfd (close-on-exec) holding r[0..n) packed, sealed for the fd form. */
int ranges_memfd(const struct ranges_item *r, size_t n, int *ret_fd);

#endif
