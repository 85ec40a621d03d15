/* SPDX-License-Identifier: BSD-3-Clause */
/* base64, packed ranges and the id map. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/idmap.h"
#include "proto/base64.h"
#include "proto/ranges.h"
#include "tests/testlib.h"

static const struct {
	const char *raw, *b64;
} vectors[] = {
	/* RFC 4648 section 10 */
	{ "", "" },
	{ "f", "Zg==" },
	{ "fo", "Zm8=" },
	{ "foo", "Zm9v" },
	{ "foob", "Zm9vYg==" },
	{ "fooba", "Zm9vYmE=" },
	{ "foobar", "Zm9vYmFy" },
};

START_TEST(test_base64_vectors)
{
	char out[64], back[64];
	size_t n = strlen(vectors[_i].raw);

	ck_assert_uint_eq(base64_encoded_len(n), strlen(vectors[_i].b64));
	base64_encode(vectors[_i].raw, n, out);
	ck_assert_str_eq(out, vectors[_i].b64);
	ck_assert_int_eq(base64_decoded_len(out, strlen(out)), (ssize_t)n);
	base64_decode(out, strlen(out), back);
	ck_assert_int_eq(memcmp(back, vectors[_i].raw, n), 0);
}
END_TEST

START_TEST(test_base64_roundtrip_binary)
{
	unsigned char raw[1000], back[1000];
	char *text = malloc(base64_encoded_len(sizeof(raw)) + 1);

	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (unsigned char)(i * 131 + 7);
	for (size_t n = 0; n < sizeof(raw); n += 37) {
		base64_encode(raw, n, text);
		ck_assert_int_eq(base64_decoded_len(text, strlen(text)), (ssize_t)n);
		memset(back, 0, sizeof(back));
		base64_decode(text, strlen(text), back);
		ck_assert_int_eq(memcmp(raw, back, n), 0);
	}
	free(text);
}
END_TEST

START_TEST(test_base64_rejects)
{
	static const char *const bad[] = {
		"Zg=",  "Zg",   "Z===",     "Zm9v!A==", "Zm 9v", "Zh==", /* non-zero padding bits */
		"Zm9=", "====", "Zm9vYg=A", "Zm\n9v",
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ck_assert_msg(base64_decoded_len(bad[i], strlen(bad[i])) == -EINVAL,
			      "'%s' accepted", bad[i]);
}
END_TEST

/* base64url: RFC 4648's vectors without their padding, both characters
 * of its own alphabet, and what it refuses. */
START_TEST(test_base64url)
{
	static const char *const bad[] = {
		"Zg==", "Z", "Zm9vY", "Zh", "Zm9", "Zm+v", "Zm/v", "Zm9v!A", "Zm 9v", "Zm9v=",
	};
	const unsigned char special[] = { 0xfb, 0xff, 0xbf };
	char out[64], back[64];

	for (size_t i = 0; i < ELEMENTSOF(vectors); i++) {
		size_t n = strlen(vectors[i].raw), len = strcspn(vectors[i].b64, "=");

		ck_assert_uint_eq(base64url_encoded_len(n), len);
		base64url_encode(vectors[i].raw, n, out);
		ck_assert_int_eq(strncmp(out, vectors[i].b64, len), 0);
		ck_assert_uint_eq(strlen(out), len);
		ck_assert_int_eq(base64url_decoded_len(out, len), (ssize_t)n);
		base64url_decode(out, len, back);
		ck_assert_int_eq(memcmp(back, vectors[i].raw, n), 0);
	}
	base64url_encode(special, sizeof(special), out);
	ck_assert_str_eq(out, "-_-_");
	base64url_decode(out, 4, back);
	ck_assert_int_eq(memcmp(back, special, sizeof(special)), 0);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ck_assert_msg(base64url_decoded_len(bad[i], strlen(bad[i])) == -EINVAL,
			      "'%s' accepted", bad[i]);
}
END_TEST

static void count_entry(uint64_t id, void *value, void *userdata)
{
	ck_assert_uint_eq(id, (uint64_t)(uintptr_t)value);
	(*(size_t *)userdata)++;
}

START_TEST(test_idmap)
{
	struct idmap m;
	size_t n = 0;

	idmap_init(&m);
	ck_assert_ptr_null(idmap_get(&m, 1));
	ck_assert_ptr_null(idmap_remove(&m, 1));
	for (uint64_t i = 1; i <= 5000; i++)
		ck_assert_int_eq(idmap_put(&m, i, (void *)(uintptr_t)i), 0);
	ck_assert_int_eq(idmap_put(&m, 77, (void *)1), -EEXIST);
	ck_assert_uint_eq(m.n_entries, 5000);
	for (uint64_t i = 1; i <= 5000; i++)
		ck_assert_ptr_eq(idmap_get(&m, i), (void *)(uintptr_t)i);
	for (uint64_t i = 1; i <= 5000; i += 2)
		ck_assert_ptr_eq(idmap_remove(&m, i), (void *)(uintptr_t)i);
	ck_assert_uint_eq(m.n_entries, 2500);
	ck_assert_ptr_null(idmap_get(&m, 4999));
	ck_assert_ptr_eq(idmap_get(&m, 5000), (void *)(uintptr_t)5000);
	ck_assert_int_eq(idmap_put(&m, UINT64_MAX, (void *)(uintptr_t)UINT64_MAX), 0);
	idmap_foreach(&m, count_entry, &n);
	ck_assert_uint_eq(n, 2501);
	idmap_done(&m);
}
END_TEST

/* Packed ranges: the wire bytes are little-endian u64 triples, whatever
 * the host; a round trip gives the ranges back. */
START_TEST(test_ranges_wire)
{
	const struct ranges_item r[2] = { { 1, 0x0102030405060708ULL, 3 },
					  { UINT64_MAX, 0, 1ULL << 40 } };
	struct ranges_item *back = NULL;
	char text[128];
	uint8_t bytes[48];
	const char *why = NULL;
	size_t n = 0;

	ck_assert_uint_eq(ranges_encoded_len(2), 64);
	ranges_encode(r, 2, text);
	ck_assert_uint_eq(strlen(text), 64);
	ck_assert_int_eq(base64_decoded_len(text, 64), 48);
	base64_decode(text, 64, bytes);
	/* First range: 1, then 08 07 .. 01, then 3. */
	ck_assert_uint_eq(bytes[0], 1);
	ck_assert_uint_eq(bytes[7], 0);
	ck_assert_uint_eq(bytes[8], 0x08);
	ck_assert_uint_eq(bytes[15], 0x01);
	ck_assert_uint_eq(bytes[16], 3);
	ck_assert_uint_eq(bytes[24], 0xff);
	ck_assert_uint_eq(bytes[45], 1); /* 1 << 40: byte 5 of the third u64 */
	ck_assert_int_eq(ranges_decode(text, 64, 2, &back, &n, &why), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_mem_eq(back, r, sizeof(r));
	free(back);
}
END_TEST

/* Refusals, each with its errno: the form only, bounds are the caller's. */
START_TEST(test_ranges_rejects)
{
	const struct ranges_item r[3] = { { 0, 0, 1 }, { 1, 1, 1 }, { 2, 2, 1 } };
	struct ranges_item *back = (void *)1;
	char text[256], partial[64];
	uint8_t raw[23] = {};
	const char *why = NULL;
	size_t n = 0;

	ranges_encode(r, 3, text);
	/* More than max, from the length alone. */
	ck_assert_int_eq(ranges_decode(text, strlen(text), 2, &back, &n, &why), -E2BIG);
	ck_assert_ptr_nonnull(why);
	ck_assert_int_eq(ranges_decode(text, strlen(text), 3, &back, &n, &why), 0);
	ck_assert_uint_eq(n, 3);
	free(back);
	back = (void *)1;
	/* Huge text: refused before it is read (it is not even base64). */
	memset(text, '!', sizeof(text));
	ck_assert_int_eq(ranges_decode(text, sizeof(text), 3, &back, &n, &why), -E2BIG);
	/* Not base64, padding wrong, a space. */
	ck_assert_int_eq(ranges_decode("AAAA AAA", 8, 10, &back, &n, &why), -EINVAL);
	ck_assert_int_eq(ranges_decode("AAAAAAA", 7, 10, &back, &n, &why), -EINVAL);
	/* Not whole ranges: 23 bytes, and 25. */
	base64_encode(raw, 23, partial);
	ck_assert_int_eq(ranges_decode(partial, strlen(partial), 10, &back, &n, &why), -EBADMSG);
	ranges_encode(r, 1, text);
	memcpy(text + 32, "AA==", 5);
	ck_assert_int_eq(ranges_decode(text, 36, 10, &back, &n, &why), -EBADMSG);
	ck_assert_int_eq(ranges_decode("", 0, 10, &back, &n, &why), -ENODATA);
	/* Nothing was handed back by a refusal. */
	ck_assert_ptr_eq(back, (void *)1);
}
END_TEST

/* Packed indices: little-endian u32 in base64, any count (a partial group
 * padded), and the same refusals as packed ranges. */
START_TEST(test_indices_wire)
{
	const uint64_t idx[5] = { 0, 1, 0x01020304, 131071, UINT32_MAX };
	uint32_t *back = (void *)1;
	uint8_t bytes[20];
	char text[64];
	const char *why = NULL;
	size_t n = 0;

	for (size_t k = 1; k <= 5; k++) {
		ck_assert_uint_eq(ranges_indices_encoded_len(k), base64_encoded_len(4 * k));
		ranges_indices_encode(idx, k, text);
		ck_assert_uint_eq(strlen(text), ranges_indices_encoded_len(k));
		ck_assert_int_eq(ranges_indices_decode(text, strlen(text), 5, &back, &n, &why), 0);
		ck_assert_uint_eq(n, k);
		for (size_t i = 0; i < k; i++)
			ck_assert_uint_eq(back[i], idx[i]);
		free(back);
	}
	base64_decode(text, strlen(text), bytes);
	ck_assert_uint_eq(bytes[4], 1);
	ck_assert_uint_eq(bytes[8], 0x04); /* 0x01020304, low byte first */
	ck_assert_uint_eq(bytes[11], 0x01);
	back = (void *)1;
	ck_assert_int_eq(ranges_indices_decode(text, strlen(text), 4, &back, &n, &why), -E2BIG);
	ck_assert_int_eq(ranges_indices_decode("AAAA AAA", 8, 10, &back, &n, &why), -EINVAL);
	base64_encode(bytes, 6, text);
	ck_assert_int_eq(ranges_indices_decode(text, strlen(text), 10, &back, &n, &why), -EBADMSG);
	ck_assert_int_eq(ranges_indices_decode("", 0, 10, &back, &n, &why), -ENODATA);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_eq(back, (void *)1);
}
END_TEST

Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_base64_vectors, 0, ELEMENTSOF(vectors));
	tcase_add_test(tc, test_base64_roundtrip_binary);
	tcase_add_test(tc, test_base64_rejects);
	tcase_add_test(tc, test_base64url);
	tcase_add_test(tc, test_ranges_wire);
	tcase_add_test(tc, test_ranges_rejects);
	tcase_add_test(tc, test_indices_wire);
	tcase_add_test(tc, test_idmap);
	suite_add_tcase(s, tc);
	return s;
}
