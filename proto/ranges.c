/* SPDX-License-Identifier: BSD-3-Clause */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* What a packed text's faults are called, per kind of record. */
struct records_words {
	size_t size;          /* bytes a record */
	const char *too_many; /* -E2BIG */
	const char *partial;  /* -EBADMSG */
	const char *none;     /* -ENODATA */
};

static const struct records_words range_words = {
	RANGES_RECORD,
	"holds more ranges than one call takes",
	"is not whole ranges (24 bytes each)",
	"holds no range",
};

static const struct records_words index_words = {
	RANGES_INDEX,
	"holds more indices than one call takes",
	"is not whole indices (4 bytes each)",
	"holds no index",
};

/* Both packed forms: text[0..len) decoded into a new array of 1 to max
 * records of w->size bytes, in wire (little-endian) order. */
static int records_decode(const struct records_words *w, const char *text, size_t len, size_t max,
			  void **ret, size_t *ret_n, const char **ret_why)
{
	ssize_t bytes;
	void *out;
	size_t n;

	/* The count first, from the length alone: a huge text is refused
	 * before a byte of it is read. */
	if (len / 4 * 3 / w->size > max + 1) {
		*ret_why = w->too_many;
		return -E2BIG;
	}
	bytes = base64_decoded_len(text, len);
	if (bytes < 0) {
		*ret_why = "is not valid base64 (standard alphabet, padded)";
		return -EINVAL;
	}
	if ((size_t)bytes % w->size) {
		*ret_why = w->partial;
		return -EBADMSG;
	}
	n = (size_t)bytes / w->size;
	if (n == 0) {
		*ret_why = w->none;
		return -ENODATA;
	}
	if (n > max) {
		*ret_why = w->too_many;
		return -E2BIG;
	}
	out = malloc((size_t)bytes);
	if (!out)
		return -ENOMEM;
	base64_decode(text, len, out);
	*ret = out;
	*ret_n = n;
	return 0;
}

int ranges_decode(const char *text, size_t len, size_t max, struct ranges_item **ret, size_t *ret_n,
		  const char **ret_why)
{
	void *r;
	int err = records_decode(&range_words, text, len, max, &r, ret_n, ret_why);

	if (err < 0)
		return err;
	swap_le(r, *ret_n);
	*ret = r;
	return 0;
}

ssize_t ranges_count_text(const char *text, size_t len)
{
	size_t bytes;

	if (len == 0 || len % 4)
		return -1;
	bytes = len / 4 * 3 - (text[len - 1] == '=') - (text[len - 2] == '=');
	return bytes % RANGES_RECORD ? -1 : (ssize_t)(bytes / RANGES_RECORD);
}

void ranges_indices_encode(const uint64_t *idx, size_t n, char *out)
{
	/* Three indices (12 bytes) make 16 characters: the text is written
	 * a group at a time, no copy of the list. */
	size_t i = 0;

	for (; i + 3 <= n; i += 3, out += 16) {
		uint32_t le[3] = { htole32((uint32_t)idx[i]), htole32((uint32_t)idx[i + 1]),
				   htole32((uint32_t)idx[i + 2]) };

		base64_encode(le, sizeof(le), out);
	}
	if (i < n) {
		uint32_t le[2] = { htole32((uint32_t)idx[i]),
				   i + 1 < n ? htole32((uint32_t)idx[i + 1]) : 0 };

		base64_encode(le, (n - i) * RANGES_INDEX, out);
	} else {
		*out = '\0';
	}
}

int ranges_indices_decode(const char *text, size_t len, size_t max, uint32_t **ret, size_t *ret_n,
			  const char **ret_why)
{
	void *idx;
	int err = records_decode(&index_words, text, len, max, &idx, ret_n, ret_why);

	if (err < 0)
		return err;
#if __BYTE_ORDER == __BIG_ENDIAN
	for (size_t i = 0; i < *ret_n; i++)
		((uint32_t *)idx)[i] = le32toh(((uint32_t *)idx)[i]);
#endif
	*ret = idx;
	return 0;
}

void ranges_release(struct ranges_buf *b)
{
	if (b->map_len)
		munmap(b->base, b->map_len);
	else
		free(b->base);
	*b = (struct ranges_buf){};
}

int ranges_decode_buf(const char *text, size_t len, size_t max, struct ranges_buf *b,
		      const char **ret_why)
{
	struct ranges_item *r;
	size_t n;
	int res = ranges_decode(text, len, max, &r, &n, ret_why);

	if (res < 0)
		return res;
	*b = (struct ranges_buf){ .r = r, .n = n, .base = r };
	return 0;
}

int ranges_map_fd(int fd, size_t max, struct ranges_buf *b, const char **ret_why)
{
	struct stat st;
	void *p;
	size_t size;
	int seals;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (seals = fcntl(fd, F_GET_SEALS)) < 0) {
		*ret_why = "is not a memfd (a sealable file)";
		return -EBADF;
	}
	if ((seals & RANGES_FD_SEALS) != RANGES_FD_SEALS) {
		*ret_why = "lacks the seals F_SEAL_SHRINK and F_SEAL_WRITE";
		return -EPERM;
	}
	size = (size_t)st.st_size;
	if (size == 0) {
		*ret_why = "holds no range";
		return -ENODATA;
	}
	if (size % RANGES_RECORD) {
		*ret_why = "is not whole ranges (24 bytes each)";
		return -EBADMSG;
	}
	if (size / RANGES_RECORD > max) {
		*ret_why = "holds more ranges than one call takes";
		return -E2BIG;
	}
	/* Not populated here: the caller maps on its event loop and may read
	 * a large batch on another thread, where its page faults belong. */
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		if (errno == ENOMEM)
			return -ENOMEM;
		*ret_why = "cannot be mapped for reading";
		return -EACCES;
	}
	*b = (struct ranges_buf){ .r = p, .n = size / RANGES_RECORD, .base = p, .map_len = size };
#if __BYTE_ORDER == __BIG_ENDIAN
	{
		/* The records are little-endian: here, a swapped copy. */
		struct ranges_item *c = malloc(size);

		if (!c) {
			ranges_release(b);
			return -ENOMEM;
		}
		memcpy(c, p, size);
		swap_le(c, b->n);
		ranges_release(b);
		*b = (struct ranges_buf){ .r = c, .n = size / RANGES_RECORD, .base = c };
	}
#endif
	return 0;
}

int ranges_memfd(const struct ranges_item *r, size_t n, int *ret_fd)
{
	const uint8_t *p = (const uint8_t *)r;
	size_t len = n * RANGES_RECORD, off = 0;
	int fd, err;

#if __BYTE_ORDER == __BIG_ENDIAN
	struct ranges_item *le = malloc(len);

	if (!le)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		le[i] = (struct ranges_item){ htole64(r[i].local_offset),
					      htole64(r[i].remote_offset), htole64(r[i].length) };
	p = (const uint8_t *)le;
#endif
	fd = memfd_create("rdmamem-ranges", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	err = fd < 0 ? -errno : 0;
	/* write(), not a mapping: F_SEAL_WRITE needs no writable mapping left. */
	while (err == 0 && off < len) {
		ssize_t k = write(fd, p + off, len - off);

		if (k < 0 && errno != EINTR)
			err = -errno;
		else if (k > 0)
			off += (size_t)k;
	}
	if (err == 0 && fcntl(fd, F_ADD_SEALS, RANGES_FD_SEALS | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		err = -errno;
#if __BYTE_ORDER == __BIG_ENDIAN
	free(le);
#endif
	if (err < 0) {
		if (fd >= 0)
			close(fd);
		return err;
	}
	*ret_fd = fd;
	return 0;
}
