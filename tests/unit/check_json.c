/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/dispatch.h"
#include "proto/json.h"
#include "proto/json_out.h"
#include "tests/json_compare.h"
#include "tests/testlib.h"

static const struct {
	const char *text;
	size_t len; /* 0: strlen */
	int expect;
} parse_cases[] = {
	{ "{}", 0, 0 },
	{ "{\"a\":[1,2,{\"b\":null}]}", 0, 0 },
	{ "{\"s\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", 0, 0 },
	{ "{\"s\":\"a\\\\u0000\"}", 0, 0 }, /* escaped backslash, then text */
	{ "{\"s\":\"\\u00e9\"}", 0, 0 },
	{ "", 0, -EBADMSG },
	{ "{", 0, -EBADMSG },
	{ "{} {}", 0, -EBADMSG },
	{ "{\"a\":1,}", 0, -EBADMSG },
	{ "{\"s\":\"\\u0000\"}", 0, -EBADMSG },
	{ "{\"s\":\"x\\u0000y\"}", 0, -EBADMSG },
	{ "{\"s\":\"\xff\"}", 0, -EILSEQ },
	{ "{\"s\":\"\xc0\x80\"}", 0, -EILSEQ },         /* overlong NUL */
	{ "{\"s\":\"\xed\xa0\x80\"}", 0, -EILSEQ },     /* surrogate */
	{ "{\"s\":\"\xf4\x90\x80\x80\"}", 0, -EILSEQ }, /* above U+10FFFF */
	{ "{\"s\":\"\xe2\x82\"}", 0, -EILSEQ },         /* truncated */
	/* Long plain runs (checked 8 bytes at a time), then what ends them,
	 * at each offset within a word. */
	{ "{\"s\":\"abcdefghijklmnopqrstuvwxyz0123456789\",\"t\":[1,2]}", 0, 0 },
	{ "{\"s\":\"abcdefghijklmnopqrstu\\\\u0000\"}", 0, 0 },
	{ "{\"s\":\"abcdefghijklmnopqrstuvwx\\u0000y\"}", 0, -EBADMSG },
	{ "{\"s\":\"abcdefghijklmnopqrstuvw\\u0000\"}", 0, -EBADMSG },
	{ "{\"s\":\"abcdefghijklmnopq\xff\"}", 0, -EILSEQ },
	{ "{\"s\":\"abcdefghijklmnopqr\xc3\xa9stuvwxyzabcdefgh\xe2\x82\"}", 0, -EILSEQ },
	{ "{\"s\":\"abcdefghijklmnop\"}x", 0, -EBADMSG },
	{ "{\"a\":1,\"a\":2}", 0, -ENOTUNIQ },
	{ "{\"x\":{\"a\":1,\"b\":{\"a\":1,\"a\":1}}}", 0, -ENOTUNIQ },
};

START_TEST(test_parse_table)
{
	const char *text = parse_cases[_i].text;
	size_t len = parse_cases[_i].len ?: strlen(text);
	cJSON *root = NULL;
	const char *reason = NULL;
	int r;

	r = json_parse(text, len, &root, &reason);
	ck_assert_msg(r == parse_cases[_i].expect, "case %d '%s': got %d, expected %d", _i, text, r,
		      parse_cases[_i].expect);
	if (r == 0)
		ck_assert_ptr_nonnull(root);
	else
		ck_assert_ptr_nonnull(reason);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_depth_limit)
{
	char buf[512];
	cJSON *root = NULL;
	const char *reason;
	size_t n = 0;

	for (int i = 0; i < JSON_DEPTH_MAX; i++)
		buf[n++] = '[';
	for (int i = 0; i < JSON_DEPTH_MAX; i++)
		buf[n++] = ']';
	buf[n] = '\0';
	ck_assert_int_eq(json_parse(buf, n, &root, &reason), 0);
	cJSON_Delete(root);

	n = 0;
	for (int i = 0; i <= JSON_DEPTH_MAX; i++)
		buf[n++] = '[';
	for (int i = 0; i <= JSON_DEPTH_MAX; i++)
		buf[n++] = ']';
	buf[n] = '\0';
	ck_assert_int_eq(json_parse(buf, n, &root, &reason), -ELOOP);

	/* Brackets inside strings do not count. */
	n = snprintf(buf, sizeof(buf), "{\"s\":\"%0100d\"}", 0);
	memset(buf + 6, '[', 100);
	ck_assert_int_eq(json_parse(buf, n, &root, &reason), 0);
	cJSON_Delete(root);
}
END_TEST

/* The daemon's parse counts values from the text, before cJSON builds a
 * node of them; strings do not count what they hold. */
START_TEST(test_values_limit)
{
	const size_t max = 100;
	char buf[1024];
	cJSON *root = NULL;
	const char *reason = NULL;
	size_t n = 0;

	/* An array of 99 elements is 100 values with the array. */
	buf[n++] = '[';
	for (size_t i = 0; i < max - 1; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s0", i ? "," : "");
	buf[n++] = ']';
	buf[n] = '\0';
	ck_assert_int_eq(json_parse_bounded(buf, n, max, &root, &reason), 0);
	cJSON_Delete(root);
	memcpy(buf + n - 1, ",0]", 4);
	n += 2;
	root = NULL;
	ck_assert_int_eq(json_parse_bounded(buf, n, max, &root, &reason), -E2BIG);
	ck_assert_ptr_null(root);
	ck_assert_str_eq(reason, "message holds too many values");
	/* Unbounded, it parses. */
	ck_assert_int_eq(json_parse(buf, n, &root, &reason), 0);
	cJSON_Delete(root);

	/* Commas and brackets in strings are text. */
	n = (size_t)snprintf(buf, sizeof(buf), "{\"s\":\"%0500d\"}", 0);
	memset(buf + 6, ',', 250);
	memset(buf + 256, '[', 250);
	ck_assert_int_eq(json_parse_bounded(buf, n, 3, &root, &reason), 0);
	cJSON_Delete(root);
}
END_TEST

/* Many keys go through the hashed duplicate check. */
START_TEST(test_duplicate_keys_many)
{
	char *buf = malloc(64 * 1024);
	cJSON *root = NULL;
	const char *reason;
	size_t n = 0;

	ck_assert_ptr_nonnull(buf);
	n += sprintf(buf + n, "{");
	for (int i = 0; i < 1000; i++)
		n += sprintf(buf + n, "%s\"k%d\":%d", i ? "," : "", i, i);
	n += sprintf(buf + n, "}");
	ck_assert_int_eq(json_parse(buf, n, &root, &reason), 0);
	cJSON_Delete(root);

	n -= 1;
	n += sprintf(buf + n, ",\"k777\":1}");
	ck_assert_int_eq(json_parse(buf, n, &root, &reason), -ENOTUNIQ);
	free(buf);
}
END_TEST

START_TEST(test_u64)
{
	uint64_t v;
	cJSON *n;

	ck_assert_int_eq(json_parse_u64("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(json_parse_u64("18446744073709551615", &v), 0);
	ck_assert(v == UINT64_MAX);
	ck_assert_int_eq(json_parse_u64("18446744073709551616", &v), -ERANGE);
	ck_assert_int_eq(json_parse_u64("99999999999999999999999", &v), -ERANGE);
	ck_assert_int_eq(json_parse_u64("", &v), -EINVAL);
	ck_assert_int_eq(json_parse_u64("-1", &v), -EINVAL);
	ck_assert_int_eq(json_parse_u64("+1", &v), -EINVAL);
	ck_assert_int_eq(json_parse_u64(" 1", &v), -EINVAL);
	ck_assert_int_eq(json_parse_u64("01", &v), -EINVAL);
	ck_assert_int_eq(json_parse_u64("0x10", &v), -EINVAL);
	ck_assert_int_eq(json_parse_u64("1e3", &v), -EINVAL);

	n = cJSON_CreateNumber(4096);
	ck_assert_int_eq(json_to_u64(n, &v), 0);
	ck_assert_uint_eq(v, 4096);
	cJSON_SetNumberValue(n, 9007199254740992.0); /* 2^53: not exact any more */
	ck_assert_int_eq(json_to_u64(n, &v), -ERANGE);
	cJSON_SetNumberValue(n, 1.5);
	ck_assert_int_eq(json_to_u64(n, &v), -EINVAL);
	cJSON_SetNumberValue(n, -1);
	ck_assert_int_eq(json_to_u64(n, &v), -EINVAL);
	cJSON_Delete(n);

	n = cJSON_CreateObject();
	ck_assert_int_eq(json_add_u64(n, "big", UINT64_MAX), 0);
	ck_assert_str_eq(cJSON_GetObjectItem(n, "big")->valuestring, "18446744073709551615");
	ck_assert_int_eq(json_add_u64(n, "zero", 0), 0);
	ck_assert_str_eq(cJSON_GetObjectItem(n, "zero")->valuestring, "0");
	ck_assert_int_eq(json_add_u64(n, "ten", 10), 0);
	ck_assert_str_eq(cJSON_GetObjectItem(n, "ten")->valuestring, "10");
	cJSON_Delete(n);
}
END_TEST

/* json_add_int() writes the digits itself: every sign and both ends. */
START_TEST(test_add_int)
{
	static const struct {
		int64_t value;
		const char *text;
	} cases[] = {
		{ 0, "0" },
		{ 7, "7" },
		{ -7, "-7" },
		{ 1000, "1000" },
		{ -1000, "-1000" },
		{ INT64_MAX, "9223372036854775807" },
		{ INT64_MIN, "-9223372036854775808" },
	};
	cJSON *n = cJSON_CreateObject();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char name[8];
		const cJSON *item;

		snprintf(name, sizeof(name), "v%zu", i);
		ck_assert_int_eq(json_add_int(n, name, cases[i].value), 0);
		item = cJSON_GetObjectItem(n, name);
		ck_assert(cJSON_IsRaw(item));
		ck_assert_str_eq(item->valuestring, cases[i].text);
	}
	cJSON_Delete(n);
}
END_TEST

/*
 * json_out writes what cJSON would print for the same values: nested
 * objects and arrays with their commas, strings escaped (quotes, the
 * backslash, control characters, UTF-8 as it is), u64 values as decimal
 * strings, ints with their sign, and booleans. A buffer of 8
 * bytes makes it move to the heap and grow on the way.
 */
START_TEST(test_json_out)
{
	static const char want[] =
		"{\"a\":\"18446744073709551615\",\"b\":-9223372036854775808,\"c\":[true,false,"
		"\"q\\\"b\\\\\\n\\t\\u0001\\u001f\u00e9\",{},[]],\"d\":{\"e\":{\"f\":0}},"
		"\"z\":\"\"}";
	char small[8];
	struct json_out o;
	_cleanup_json_ cJSON *tree = NULL, *expect = NULL;
	const char *why;

	json_out_init(&o, small, sizeof(small));
	json_out_object(&o, NULL);
	json_out_u64(&o, "a", UINT64_MAX);
	json_out_int(&o, "b", INT64_MIN);
	json_out_array(&o, "c");
	json_out_bool(&o, NULL, true);
	json_out_bool(&o, NULL, false);
	json_out_string(&o, NULL, "q\"b\\\n\t\x01\x1f\u00e9");
	json_out_object(&o, NULL);
	json_out_end(&o);
	json_out_array(&o, NULL);
	json_out_end(&o);
	json_out_end(&o);
	json_out_object(&o, "d");
	json_out_object(&o, "e");
	json_out_int(&o, "f", 0);
	json_out_end(&o);
	json_out_end(&o);
	json_out_string(&o, "z", "");
	json_out_end(&o);
	ck_assert_int_eq(o.err, 0);
	ck_assert(o.heap);
	ck_assert_str_eq(o.text, want);
	ck_assert_uint_eq(o.len, strlen(want));
	/* What a client reads: the same as cJSON's tree of it. */
	ck_assert_int_eq(json_parse(want, strlen(want), &expect, &why), 0);
	tree = test_out_tree(&o);
	ck_assert(cJSON_Compare(tree, expect, true));

	/* One end too many is an error, kept, as is a failure to grow. */
	json_out_init(&o, NULL, 0);
	json_out_object(&o, NULL);
	json_out_end(&o);
	ck_assert_int_eq(o.err, 0);
	json_out_end(&o);
	ck_assert_int_eq(o.err, -EINVAL);
	json_out_string(&o, "k", "v");
	ck_assert_str_eq(o.text, "{}");
	json_out_free(&o);
}
END_TEST

struct sample {
	uint64_t size;
	uint32_t index;
	int64_t timeout;
	bool flag;
	const char *name;
	cJSON *list;
};

static const struct varlink_field *const sample_fields =
	VARLINK_FIELDS(VARLINK_INPUT(struct sample, size, VARLINK_U64, 0),
		       VARLINK_INPUT(struct sample, index, VARLINK_U32, VARLINK_NULLABLE),
		       VARLINK_INPUT(struct sample, timeout, VARLINK_INT, VARLINK_NULLABLE),
		       VARLINK_INPUT(struct sample, flag, VARLINK_BOOL, VARLINK_NULLABLE),
		       VARLINK_INPUT(struct sample, name, VARLINK_STRING, VARLINK_NULLABLE),
		       VARLINK_INPUT(struct sample, list, VARLINK_STRING,
				     VARLINK_NULLABLE | VARLINK_ARRAY));

static cJSON *dispatch_root;

/* The tree stays alive until the next call: err->field may point into it. */
static int dispatch_text(const char *text, struct sample *out, struct json_dispatch_error *err)
{
	cJSON_Delete(dispatch_root);
	dispatch_root = cJSON_Parse(text);
	ck_assert_ptr_nonnull(dispatch_root);
	memset(out, 0, sizeof(*out));
	return json_dispatch(dispatch_root, sample_fields, out, err);
}

START_TEST(test_dispatch)
{
	struct json_dispatch_error err;
	struct sample s;

	ck_assert_int_eq(dispatch_text("{\"size\":\"12345678901234567890\",\"index\":7,"
				       "\"timeout\":-5,\"flag\":true,\"name\":null}",
				       &s, &err),
			 0);
	ck_assert(s.size == 12345678901234567890ULL);
	ck_assert_uint_eq(s.index, 7);
	ck_assert_int_eq(s.timeout, -5);
	ck_assert(s.flag);
	ck_assert_ptr_null(s.name);

	ck_assert_int_eq(dispatch_text("{}", &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "size");
	ck_assert_str_eq(err.reason, "is required");

	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"sise\":1}", &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "sise");

	ck_assert_int_eq(dispatch_text("{\"size\":1.5}", &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "size");
	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"index\":-1}", &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "index");
	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"index\":4294967296}", &s, &err), -EINVAL);
	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"timeout\":1e300}", &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "timeout");
	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"flag\":1}", &s, &err), -EINVAL);
	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"name\":5}", &s, &err), -EINVAL);
	ck_assert_int_eq(dispatch_text("{\"size\":\"1\",\"list\":{}}", &s, &err), -EINVAL);
	ck_assert_str_eq(err.field, "list");
	ck_assert_int_eq(dispatch_text("[]", &s, &err), -EINVAL);
	ck_assert_ptr_null(err.field);
	cJSON_Delete(dispatch_root);
	dispatch_root = NULL;
}
END_TEST

/*
 * json_read() against cJSON's own parser, which it replaced: the same
 * verdict and the same tree (types, numbers to the bit, valueint, strings,
 * keys, order, the first child's prev at the last) for hand-made texts and
 * for 30,000 mutants of them (bytes replaced by JSON's own, cut, doubled),
 * every one that passes json_check_text(). The two refusals json_read
 * adds are the only differences let through: a repeated key, a \u escape
 * without four hex digits.
 */
static const char *const read_seeds[] = {
	"{\"method\":\"io.rdmamemd.Lock\",\"parameters\":{\"region\":\"1\",\"mode\":\"exclusive\","
	"\"timeout_ms\":-1}}",
	"{\"method\":\"io.rdmamemd.Ping\"}",
	" \t\r\n[ 0 , -0 , 1 , -1 , 123456789012345 , 1234567890123456 , 9007199254740993 ]\x01",
	"[1.5, -2.25e3, 1E-2, 1e+2, 0.1, .5, -.5, 01, +1, 1e999, -1e999, 2147483647, 2147483648, "
	"-2147483648, -2147483649, 1.e3, 00]",
	"[1e, 2]",
	"[123456789012345678901234567890123456789012345678901234567890123456789, "
	"0.0000000000000000000000000000000000000000000000000000000000000000001e-5, "
	"99999999999999999999999999999999999999999999999999999999999999999999999999999999999999"
	"99999999999999999999999999999999999999999999999999999999999999999999999999999999999999]",
	"{\"a\":true,\"b\":false,\"c\":null,\"d\":[],\"e\":{},\"f\":[[]],\"g\":[{}]}",
	"{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00 plain\"}",
	"{\"s\":\"\\ud83d\",\"t\":\"\\ude00\",\"u\":\"\\ud83d\\u0041\",\"v\":\"\\uZZZZ\"}",
	"\xef\xbb\xbf{\"bom\":1}",
	"{\"k\":1,\"k\":2}",
	"{\"a\":{\"b\":{\"c\":[1,{\"d\":\"e\"}]}},\"f\":\"caf\xc3\xa9\"}",
	"[\"a\\\"b\",\"\\\\\",\"x\\\\\\\"y\"]",
	"nul",
	"[true, fals, nulll, truex]",
	"{\"a\" 1}",
	"{1:2}",
	"\"top\"",
	"-",
	"[1,,2]",
	"{\"a\":1 \"b\":2}",
};

static void read_compare(const char *t, size_t len, unsigned *n_compared)
{
	bool compared;
	const char *why = json_read_differs(t, len, &compared);

	ck_assert_msg(!why, "'%.*s': %s", (int)len, t, why);
	*n_compared += compared;
}

START_TEST(test_read_matches_cjson)
{
	static const char swaps[] = "\"\\{}[],:-+.eE0159 tfnu\x01\xc3";
	unsigned seed = 12345, n_checked = 0;
	char buf[512];

	for (size_t i = 0; i < ELEMENTSOF(read_seeds); i++)
		read_compare(read_seeds[i], strlen(read_seeds[i]), &n_checked);
	for (int m = 0; m < 30000; m++) {
		const char *src = read_seeds[m % ELEMENTSOF(read_seeds)];
		size_t len = strlen(src), at;

		memcpy(buf, src, len + 1);
		for (int k = 0; k < 1 + m % 3; k++) {
			seed = seed * 1103515245 + 12345;
			at = (seed >> 8) % len;
			switch ((seed >> 4) % 3) {
			case 0: /* a byte replaced */
				buf[at] = swaps[(seed >> 16) % (sizeof(swaps) - 1)];
				break;
			case 1: /* cut */
				len = at + 1;
				buf[len] = '\0';
				break;
			default: /* a run doubled */
				if (2 * len < sizeof(buf)) {
					memmove(buf + at + (len - at) / 2, buf + at, len - at + 1);
					len += (len - at) / 2;
				}
				break;
			}
		}
		read_compare(buf, strlen(buf), &n_checked);
	}
	/* Most mutants must reach both parsers, or the comparison says little. */
	ck_assert_uint_gt(n_checked, 20000);
}
END_TEST

Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_parse_table, 0, ELEMENTSOF(parse_cases));
	tcase_add_test(tc, test_u64);
	tcase_add_test(tc, test_add_int);
	tcase_add_test(tc, test_dispatch);
	tcase_add_test(tc, test_read_matches_cjson);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, test_depth_limit);
	tcase_add_test(tc, test_values_limit);
	tcase_add_test(tc, test_duplicate_keys_many);
	tcase_add_test(tc, test_json_out);
	suite_add_tcase(s, tc);
	return s;
}
