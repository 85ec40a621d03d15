/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Descriptors (daemon/remote/descriptor.c): what is formatted parses back
 * field for field, the largest one is exactly DESCRIPTOR_TEXT_MAX long,
 * and each way a text or a record can be wrong is refused with its own
 * reason (records are made by hand from a good one's bytes).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/descriptor.h"
#include "proto/base64.h"
#include "tests/testlib.h"

/* A good descriptor with n_ep endpoints and n_dev devices, names name_len long. */
static void make(struct descriptor *d, unsigned n_ep, unsigned n_dev, size_t name_len)
{
	memset(d, 0, sizeof(*d));
	d->access = DESCRIPTOR_ACCESS_READ | DESCRIPTOR_ACCESS_WRITE;
	d->id = UINT64_C(0x0102030405060708);
	d->length = UINT64_C(1) << 40;
	for (unsigned i = 0; i < TOKEN_BYTES; i++)
		d->token[i] = (uint8_t)(0xa0 + i);
	d->n_endpoints = (uint8_t)n_ep;
	for (unsigned i = 0; i < n_ep; i++) {
		struct descriptor_endpoint *e = &d->endpoints[i];

		e->family = i % 2 ? 6 : 4;
		e->port = (uint16_t)(7471 + i);
		e->addr[0] = e->family == 4 ? 10 : 0xfe;
		e->addr[3] = (uint8_t)(i + 1);
		if (e->family == 6)
			e->addr[15] = 1;
	}
	d->n_devices = (uint8_t)n_dev;
	for (unsigned i = 0; i < n_dev; i++) {
		struct descriptor_device *dev = &d->devices[i];

		memset(dev->name, 'a' + (char)i, name_len);
		dev->name[name_len] = '\0';
		dev->name[0] = (char)('a' + i);
		for (unsigned k = 0; k < 16; k++)
			dev->gid[k] = (uint8_t)(i * 16 + k);
		dev->addr = UINT64_C(0x7f0000000000) + i * UINT64_C(0x100000000);
		dev->rkey = 0x80000000U + i;
		dev->port = (uint8_t)(1 + i % 2);
	}
}

static void expect_same(const struct descriptor *a, const struct descriptor *b)
{
	ck_assert_uint_eq(a->access, b->access);
	ck_assert_uint_eq(a->id, b->id);
	ck_assert_uint_eq(a->length, b->length);
	ck_assert_int_eq(memcmp(a->token, b->token, TOKEN_BYTES), 0);
	ck_assert_uint_eq(a->n_endpoints, b->n_endpoints);
	ck_assert_uint_eq(a->n_devices, b->n_devices);
	for (unsigned i = 0; i < a->n_endpoints; i++) {
		ck_assert_uint_eq(a->endpoints[i].family, b->endpoints[i].family);
		ck_assert_uint_eq(a->endpoints[i].port, b->endpoints[i].port);
		ck_assert_int_eq(memcmp(a->endpoints[i].addr, b->endpoints[i].addr, 16), 0);
	}
	for (unsigned i = 0; i < a->n_devices; i++) {
		ck_assert_str_eq(a->devices[i].name, b->devices[i].name);
		ck_assert_int_eq(memcmp(a->devices[i].gid, b->devices[i].gid, 16), 0);
		ck_assert_uint_eq(a->devices[i].addr, b->devices[i].addr);
		ck_assert_uint_eq(a->devices[i].rkey, b->devices[i].rkey);
		ck_assert_uint_eq(a->devices[i].port, b->devices[i].port);
	}
}

/* Formats d, parses it back, and returns the text. */
static char *round_trip(const struct descriptor *d)
{
	struct descriptor back;
	const char *why = NULL;
	char *text = NULL;

	ck_assert_int_eq(descriptor_format(d, &text, &why), 0);
	ck_assert_int_eq(strncmp(text, DESCRIPTOR_PREFIX, strlen(DESCRIPTOR_PREFIX)), 0);
	ck_assert_uint_le(strlen(text), DESCRIPTOR_TEXT_MAX);
	ck_assert_msg(descriptor_parse(text, strlen(text), &back, &why) == 0, "refused: %s", why);
	expect_same(d, &back);
	return text;
}

START_TEST(test_round_trip)
{
	static const unsigned shapes[][3] = {
		{ 1, 1, 1 }, { 1, 1, 5 }, { 2, 3, 17 }, { 8, 1, 1 }, { 1, 16, 1 }, { 8, 16, 63 },
	};
	struct descriptor d;
	char *text;

	for (size_t i = 0; i < ELEMENTSOF(shapes); i++) {
		make(&d, shapes[i][0], shapes[i][1], shapes[i][2]);
		free(round_trip(&d));
	}
	/* Values at their extremes survive: little-endian, all 64 bits. */
	make(&d, 1, 1, 4);
	d.id = UINT64_MAX;
	d.length = 1;
	d.devices[0].addr = UINT64_MAX - 1;
	d.devices[0].rkey = UINT32_MAX;
	d.devices[0].port = 255;
	d.endpoints[0].port = 65535;
	d.access = DESCRIPTOR_ACCESS_READ;
	free(round_trip(&d));
	d.access = DESCRIPTOR_ACCESS_WRITE;
	free(round_trip(&d));

	/* The largest descriptor is as long as the bound says, no longer. */
	make(&d, DESCRIPTOR_ENDPOINTS_MAX, DESCRIPTOR_DEVICES_MAX, DESCRIPTOR_NAME_MAX);
	text = round_trip(&d);
	ck_assert_uint_eq(strlen(text), DESCRIPTOR_TEXT_MAX);
	free(text);
}
END_TEST

/* The record's bytes of a good descriptor, to break by hand. */
static size_t record_of(const struct descriptor *d, uint8_t *rec)
{
	size_t prefix = strlen(DESCRIPTOR_PREFIX);
	const char *why;
	char *text;
	ssize_t n;

	ck_assert_int_eq(descriptor_format(d, &text, &why), 0);
	n = base64url_decoded_len(text + prefix, strlen(text) - prefix);
	ck_assert_int_gt(n, 0);
	base64url_decode(text + prefix, strlen(text) - prefix, rec);
	free(text);
	return (size_t)n;
}

/* Expects rec[0..n) to be refused with a reason containing want. */
static void expect_refused(const uint8_t *rec, size_t n, const char *want)
{
	char text[DESCRIPTOR_TEXT_MAX * 2];
	struct descriptor d;
	const char *why = NULL;

	ck_assert_uint_lt(strlen(DESCRIPTOR_PREFIX) + base64url_encoded_len(n), sizeof(text));
	strcpy(text, DESCRIPTOR_PREFIX);
	base64url_encode(rec, n, text + strlen(DESCRIPTOR_PREFIX));
	ck_assert_int_eq(descriptor_parse(text, strlen(text), &d, &why), -EINVAL);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(strstr(why, want), "reason '%s', wanted '%s'", why, want);
}

/* Offsets in the record of make(d, 1, 1, 4): one IPv4 endpoint, one device. */
enum {
	AT_VERSION = 0,
	AT_ACCESS = 1,
	AT_N_EP = 2,
	AT_N_DEV = 3,
	AT_LENGTH = 12,
	AT_EP = DESCRIPTOR_HEADER_BYTES,
	AT_DEV = AT_EP + DESCRIPTOR_ENDPOINT_BYTES,
	AT_DEV_ADDR = AT_DEV + 16,
	AT_DEV_PORT = AT_DEV + 28,
	AT_DEV_NAME_LEN = AT_DEV + 29,
	AT_DEV_NAME = AT_DEV + 30,
};

START_TEST(test_malformed_records)
{
	uint8_t good[DESCRIPTOR_RECORD_MAX + 64], rec[sizeof(good)];
	struct descriptor d;
	size_t n;

	make(&d, 1, 1, 4);
	n = record_of(&d, good);
	ck_assert_uint_eq(n, AT_DEV_NAME + 4);

#define BREAK(_at, _value, _why)                \
	do {                                    \
		memcpy(rec, good, n);           \
		rec[(_at)] = (uint8_t)(_value); \
		expect_refused(rec, n, (_why)); \
	} while (0)

	expect_refused(good, AT_EP - 1, "shorter than its header");
	expect_refused(good, 0, "shorter than its header");
	BREAK(AT_VERSION, 2, "version other than 1");
	BREAK(AT_VERSION, 0, "version other than 1");
	BREAK(AT_ACCESS, 0, "grants no access");
	BREAK(AT_ACCESS, 4, "grants no access");
	BREAK(AT_ACCESS, 0xff, "grants no access");
	BREAK(AT_N_EP, 0, "1 to 8 endpoints");
	BREAK(AT_N_EP, 9, "1 to 8 endpoints");
	BREAK(AT_N_EP, 255, "1 to 8 endpoints");
	BREAK(AT_N_DEV, 0, "1 to 16 devices");
	BREAK(AT_N_DEV, 17, "1 to 16 devices");
	BREAK(AT_N_DEV, 2, "ends inside a device");
	/* A second endpoint read from the device: its gid[1] (1) as the pad byte. */
	BREAK(AT_N_EP, 2, "pad byte");
	memcpy(rec, good, n);
	memset(rec + AT_LENGTH, 0, 8);
	expect_refused(rec, n, "length 0");
	BREAK(AT_EP, 5, "neither 4 nor 6");
	BREAK(AT_EP, 0, "neither 4 nor 6");
	BREAK(AT_EP + 1, 1, "pad byte");
	memcpy(rec, good, n);
	rec[AT_EP + 2] = rec[AT_EP + 3] = 0;
	expect_refused(rec, n, "without a port");
	BREAK(AT_EP + 4 + 7, 1, "unused address bytes");
	memcpy(rec, good, n);
	memset(rec + AT_EP + 4, 0, 4);
	expect_refused(rec, n, "unspecified address");
	/* An IPv6 endpoint of all zeroes (::). */
	memcpy(rec, good, n);
	rec[AT_EP] = 6;
	memset(rec + AT_EP + 4, 0, 16);
	expect_refused(rec, n, "unspecified address");
	BREAK(AT_DEV_PORT, 0, "without a port");
	BREAK(AT_DEV_NAME_LEN, 0, "name is not");
	BREAK(AT_DEV_NAME_LEN, 64, "name is not");
	BREAK(AT_DEV_NAME_LEN, 5, "ends inside a device's name");
	BREAK(AT_DEV_NAME + 1, '/', "name is not");
	BREAK(AT_DEV_NAME + 1, ' ', "name is not");
	BREAK(AT_DEV_NAME + 3, 0, "name is not");
	memcpy(rec, good, n);
	memset(rec + AT_DEV_ADDR, 0xff, 8);
	expect_refused(rec, n, "wraps around");
	/* Truncated anywhere in the lists, and one byte too many. */
	expect_refused(good, AT_EP + 3, "ends inside an endpoint");
	expect_refused(good, AT_DEV + 29, "ends inside a device");
	expect_refused(good, n - 1, "ends inside a device's name");
	memcpy(rec, good, n);
	rec[n] = 0;
	expect_refused(rec, n + 1, "bytes after its last device");
#undef BREAK
}
END_TEST

START_TEST(test_duplicate_device)
{
	uint8_t rec[DESCRIPTOR_RECORD_MAX];
	struct descriptor d;
	const char *why = NULL;
	char *text = NULL;
	size_t n;

	make(&d, 1, 2, 4);
	n = record_of(&d, rec);
	/* The second device's name made the first's. */
	memcpy(rec + n - 4, d.devices[0].name, 4);
	expect_refused(rec, n, "names a device twice");
	/* descriptor_format() refuses what parse would. */
	strcpy(d.devices[1].name, d.devices[0].name);
	ck_assert_int_eq(descriptor_format(&d, &text, &why), -EINVAL);
	ck_assert_ptr_null(text);
	ck_assert_ptr_nonnull(strstr(why, "names a device twice"));
}
END_TEST

/* Refused as text: the prefix, the encoding, the bound. */
START_TEST(test_malformed_text)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "", "does not start" },
		{ "rdmamem1", "does not start" },
		{ "RDMAMEM1.AQMBAQ", "does not start" },
		{ "xrdmamem1.AQMBAQ", "does not start" },
		{ "rdmamem2.AQMBAQ", "not of a format this daemon knows" },
		{ "rdmamem1.AQMBAQ=", "not base64url" },
		{ "rdmamem1.AQMBA+", "not base64url" },
		{ "rdmamem1.AQMBA/", "not base64url" },
		{ "rdmamem1.AQM BAQ", "not base64url" },
		{ "rdmamem1.A", "not base64url" },
		{ "rdmamem1.AR", "not base64url" }, /* bits past the last byte */
		{ "rdmamem1.", "shorter than its header" },
	};
	struct descriptor d;
	const char *why;
	char *big;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		why = NULL;
		ck_assert_msg(descriptor_parse(bad[i].text, strlen(bad[i].text), &d, &why) ==
				      -EINVAL,
			      "'%s' accepted", bad[i].text);
		ck_assert_msg(why && strstr(why, bad[i].why), "'%s': reason '%s', wanted '%s'",
			      bad[i].text, why, bad[i].why);
	}
	/* One character past the longest: refused before it is decoded. */
	big = malloc(DESCRIPTOR_TEXT_MAX + 2);
	ck_assert_ptr_nonnull(big);
	strcpy(big, DESCRIPTOR_PREFIX);
	memset(big + strlen(DESCRIPTOR_PREFIX), 'A',
	       DESCRIPTOR_TEXT_MAX + 1 - strlen(DESCRIPTOR_PREFIX));
	big[DESCRIPTOR_TEXT_MAX + 1] = '\0';
	ck_assert_int_eq(descriptor_parse(big, DESCRIPTOR_TEXT_MAX + 1, &d, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "longer than any descriptor"));
	free(big);
}
END_TEST

/* The text is parsed by length, not to a NUL: a good one followed by junk
 * is refused, and a good one cut out of a longer buffer is read. */
START_TEST(test_length_not_nul)
{
	struct descriptor d, back;
	const char *why;
	char *text, *longer;
	size_t n;

	make(&d, 1, 1, 4);
	ck_assert_int_eq(descriptor_format(&d, &text, &why), 0);
	n = strlen(text);
	longer = malloc(n + 8);
	ck_assert_ptr_nonnull(longer);
	memcpy(longer, text, n);
	memcpy(longer + n, "AAAAAAA", 8);
	ck_assert_int_eq(descriptor_parse(longer, n, &back, &why), 0);
	expect_same(&d, &back);
	ck_assert_int_eq(descriptor_parse(longer, n + 4, &back, &why), -EINVAL);
	free(longer);
	free(text);
}
END_TEST

/* Limits, by the bound and one past it, through the format side. */
START_TEST(test_limits)
{
	struct descriptor d;
	const char *why;
	char *text = NULL;

	make(&d, DESCRIPTOR_ENDPOINTS_MAX, DESCRIPTOR_DEVICES_MAX, DESCRIPTOR_NAME_MAX);
	ck_assert_int_eq(descriptor_format(&d, &text, &why), 0);
	free(text);
	text = NULL;
	d.n_endpoints = DESCRIPTOR_ENDPOINTS_MAX + 1;
	ck_assert_int_eq(descriptor_format(&d, &text, &why), -EINVAL);
	d.n_endpoints = 1;
	d.n_devices = DESCRIPTOR_DEVICES_MAX + 1;
	ck_assert_int_eq(descriptor_format(&d, &text, &why), -EINVAL);
	d.n_devices = 1;
	d.devices[0].name[0] = '\0';
	ck_assert_int_eq(descriptor_format(&d, &text, &why), -EINVAL);
	ck_assert_ptr_null(text);
}
END_TEST

START_TEST(test_endpoint_text)
{
	struct descriptor d;
	struct sockaddr_storage ss;
	char buf[64];

	make(&d, 2, 1, 4);
	descriptor_endpoint_text(&d.endpoints[0], buf, sizeof(buf));
	ck_assert_str_eq(buf, "10.0.0.1:7471");
	descriptor_endpoint_text(&d.endpoints[1], buf, sizeof(buf));
	ck_assert_str_eq(buf, "[fe00:2::1]:7472");
	ck_assert_uint_eq(descriptor_endpoint_sockaddr(&d.endpoints[0], &ss),
			  sizeof(struct sockaddr_in));
	ck_assert_int_eq(ss.ss_family, AF_INET);
	ck_assert_uint_eq(descriptor_endpoint_sockaddr(&d.endpoints[1], &ss),
			  sizeof(struct sockaddr_in6));
	ck_assert_int_eq(ss.ss_family, AF_INET6);
}
END_TEST

Suite *descriptor_suite(void)
{
	Suite *s = suite_create("descriptor");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_malformed_records);
	tcase_add_test(tc, test_duplicate_device);
	tcase_add_test(tc, test_malformed_text);
	tcase_add_test(tc, test_length_not_nul);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_endpoint_text);
	suite_add_tcase(s, tc);
	return s;
}
