/* SPDX-License-Identifier: BSD-3-Clause */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>

#include "proto/ranges.h"

/* The array in wire byte order, in place: a no-op on little-endian hosts. */
static void swap_le(struct ranges_item *r, size_t n)
{
#if __BYTE_ORDER == __BIG_ENDIAN
	for (size_t i = 0; i < n; i++) {
		r[i].local_offset = le64toh(r[i].local_offset);
		r[i].remote_offset = le64toh(r[i].remote_offset);
		r[i].length = le64toh(r[i].length);
	}
#else
	(void)r;
	(void)n;
#endif
}

void ranges_encode(const struct ranges_item *r, size_t n, char *out)
{
#if __BYTE_ORDER == __BIG_ENDIAN
	struct ranges_item *le = malloc(n * sizeof(*le));

	/* A client library call: on the rare big-endian host, a copy. */
	if (!le) {
		*out = '\0';
		return;
	}
	for (size_t i = 0; i < n; i++)
		le[i] = (struct ranges_item){ htole64(r[i].local_offset),
					      htole64(r[i].remote_offset), htole64(r[i].length) };
	base64_encode(le, n * RANGES_RECORD, out);
	free(le);
#else
	_Static_assert(sizeof(struct ranges_item) == RANGES_RECORD, "packed as on the wire");
	base64_encode(r, n * RANGES_RECORD, out);
#endif
}

int ranges_decode(const char *text, size_t len, size_t max, struct ranges_item **ret, size_t *ret_n,
		  const char **ret_why)
{
	struct ranges_item *r;
	ssize_t bytes;
	size_t n;

	/* The count first, from the length alone: a huge text is refused
	 * before a byte of it is read. */
	if (len / 4 * 3 / RANGES_RECORD > max + 1) {
		*ret_why = "holds more ranges than one call takes";
		return -E2BIG;
	}
	bytes = base64_decoded_len(text, len);
	if (bytes < 0) {
		*ret_why = "is not valid base64 (standard alphabet, padded)";
		return -EINVAL;
	}
	if (bytes % RANGES_RECORD) {
		*ret_why = "is not whole ranges (24 bytes each)";
		return -EBADMSG;
	}
	n = (size_t)bytes / RANGES_RECORD;
	if (n == 0) {
		*ret_why = "holds no range";
		return -ENODATA;
	}
	if (n > max) {
		*ret_why = "holds more ranges than one call takes";
		return -E2BIG;
	}
	r = malloc(n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	base64_decode(text, len, r);
	swap_le(r, n);
	*ret = r;
	*ret_n = n;
	return 0;
}
