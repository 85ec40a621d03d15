/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/errors.h"
#include "proto/json.h"
#include "proto/varlink.h"
#include "tests/testlib.h"

static const struct {
	const char *text;
	int expect;
} call_cases[] = {
	{ "{\"method\":\"io.rdmamemd.Ping\"}", 0 },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":{}}", 0 },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"oneway\":true}", 0 },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"more\":true,\"parameters\":{\"a\":1}}", 0 },
	{ "{\"method\":\"org.varlink.service.GetInfo\",\"upgrade\":false}", 0 },
	/* null counts as absent: the reference Go library sends
	 * "parameters": null for every call without parameters. */
	{ "{\"method\":\"org.varlink.service.GetInfo\",\"parameters\":null}", 0 },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"oneway\":null,\"more\":null}", 0 },
	{ "{\"method\":null}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"extra\":null}", -EBADMSG },
	{ "[]", -EBADMSG },
	{ "\"io.rdmamemd.Ping\"", -EBADMSG },
	{ "{}", -EBADMSG },
	{ "{\"parameters\":{}}", -EBADMSG },
	{ "{\"method\":5}", -EBADMSG },
	{ "{\"method\":\"Ping\"}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.ping\"}", -EBADMSG },
	{ "{\"method\":\"io..rdmamemd.Ping\"}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd-.Ping\"}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.Pi ng\"}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"parameters\":[]}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"oneway\":1}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"oneway\":true,\"more\":true}", -EBADMSG },
	{ "{\"method\":\"io.rdmamemd.Ping\",\"extra\":1}", -EBADMSG },
};

START_TEST(test_call_table)
{
	struct varlink_call vc;
	const char *reason = NULL;
	cJSON *root = cJSON_Parse(call_cases[_i].text);
	int r;

	ck_assert_ptr_nonnull(root);
	r = varlink_call_parse(root, &vc, &reason);
	ck_assert_msg(r == call_cases[_i].expect, "case %d '%s': got %d", _i, call_cases[_i].text,
		      r);
	if (r < 0)
		ck_assert_ptr_nonnull(reason);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_call_fields)
{
	struct varlink_call vc;
	const char *reason;
	cJSON *root = cJSON_Parse("{\"method\":\"org.varlink.service.GetInterfaceDescription\","
				  "\"parameters\":{\"interface\":\"io.rdmamemd\"},\"more\":true}");

	ck_assert_int_eq(varlink_call_parse(root, &vc, &reason), 0);
	ck_assert_str_eq(vc.method, "org.varlink.service.GetInterfaceDescription");
	ck_assert_uint_eq(vc.interface_len, strlen("org.varlink.service"));
	ck_assert(vc.more);
	ck_assert(!vc.oneway);
	ck_assert_str_eq(cJSON_GetObjectItem(vc.parameters, "interface")->valuestring,
			 "io.rdmamemd");
	cJSON_Delete(root);

	root = cJSON_Parse("{\"method\":\"io.rdmamemd.Ping\",\"parameters\":null,\"oneway\":null}");
	ck_assert_int_eq(varlink_call_parse(root, &vc, &reason), 0);
	ck_assert_ptr_null(vc.parameters);
	ck_assert(!vc.oneway);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_names)
{
	ck_assert(varlink_method_name_is_valid("io.rdmamemd.Ping"));
	ck_assert(varlink_method_name_is_valid("org.example.a-b.Method2"));
	ck_assert(varlink_method_name_is_valid("a.b.C"));
	ck_assert(!varlink_method_name_is_valid("io.Ping"));
	ck_assert(!varlink_method_name_is_valid("io.rdmamemd."));
	ck_assert(!varlink_method_name_is_valid(".io.rdmamemd.Ping"));
	ck_assert(!varlink_method_name_is_valid("1o.rdmamemd.Ping"));
	ck_assert(!varlink_method_name_is_valid("io.-rdmamemd.Ping"));
	ck_assert(!varlink_method_name_is_valid("io.rdmamemd.Ping_"));
	ck_assert(varlink_interface_name_is_valid("org.varlink.service", 19));
	ck_assert(!varlink_interface_name_is_valid("org", 3));
	ck_assert(!varlink_interface_name_is_valid("org.", 4));
}
END_TEST

/* The rule for a method name, written as the specification says it, one
 * segment at a time: the one-pass check must agree with it. */
static bool spec_segment(const char *s, size_t len, bool first, bool member)
{
	if (len == 0 || s[0] == '-' || s[len - 1] == '-')
		return false;
	if (member ? !(s[0] >= 'A' && s[0] <= 'Z') :
		     !(isalpha((unsigned char)s[0]) || (!first && isdigit((unsigned char)s[0]))))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && (member || s[i] != '-'))
			return false;
	return true;
}

static bool spec_method_name(const char *s)
{
	const char *dot, *start = s;
	unsigned n = 0;

	if (strlen(s) > VARLINK_METHOD_MAX)
		return false;
	while ((dot = strchr(start, '.'))) {
		if (!spec_segment(start, (size_t)(dot - start), n == 0, false))
			return false;
		n++;
		start = dot + 1;
	}
	return n >= 2 && spec_segment(start, strlen(start), false, true);
}

START_TEST(test_names_against_spec)
{
	static const char alphabet[] = "aaaaZZZ00-...\xc3_";
	char name[VARLINK_METHOD_MAX + 2];
	unsigned seed = 1, valid = 0;

	for (int k = 0; k < 200000; k++) {
		size_t len = (seed = seed * 1103515245 + 12345) >> 16 & 15;

		for (size_t i = 0; i < len; i++)
			name[i] = alphabet[((seed = seed * 1103515245 + 12345) >> 16) %
					   (sizeof(alphabet) - 1)];
		name[len] = '\0';
		ck_assert_msg(varlink_method_name_is_valid(name) == spec_method_name(name),
			      "'%s': the check says %d", name, varlink_method_name_is_valid(name));
		valid += spec_method_name(name);
	}
	/* Both answers came up. */
	ck_assert_uint_gt(valid, 100);
	/* The bound: VARLINK_METHOD_MAX bytes pass, one more does not. */
	memset(name, 'a', sizeof(name));
	memcpy(name, "a.b.", 4);
	name[4] = 'C';
	name[VARLINK_METHOD_MAX] = '\0';
	ck_assert(varlink_method_name_is_valid(name));
	name[VARLINK_METHOD_MAX] = 'a';
	name[VARLINK_METHOD_MAX + 1] = '\0';
	ck_assert(!varlink_method_name_is_valid(name));
}
END_TEST

START_TEST(test_reply)
{
	struct varlink_reply rp;
	const char *reason;
	cJSON *root;

	root = cJSON_Parse("{\"parameters\":{\"a\":1},\"continues\":true,\"future\":1}");
	ck_assert_int_eq(varlink_reply_parse(root, &rp, &reason), 0);
	ck_assert(rp.continues);
	ck_assert_ptr_null(rp.error);
	ck_assert_ptr_nonnull(rp.parameters);
	cJSON_Delete(root);

	root = cJSON_Parse("{\"error\":\"io.rdmamemd.InternalError\"}");
	ck_assert_int_eq(varlink_reply_parse(root, &rp, &reason), 0);
	ck_assert_str_eq(rp.error, "io.rdmamemd.InternalError");
	ck_assert_ptr_null(rp.parameters);
	cJSON_Delete(root);

	/* null parameters are no parameters. */
	root = cJSON_Parse("{\"parameters\":null,\"error\":\"io.rdmamemd.InternalError\"}");
	ck_assert_int_eq(varlink_reply_parse(root, &rp, &reason), 0);
	ck_assert_str_eq(rp.error, "io.rdmamemd.InternalError");
	ck_assert_ptr_null(rp.parameters);
	cJSON_Delete(root);

	root = cJSON_Parse("{\"error\":7}");
	ck_assert_int_eq(varlink_reply_parse(root, &rp, &reason), -EBADMSG);
	cJSON_Delete(root);
	root = cJSON_Parse("{\"parameters\":[]}");
	ck_assert_int_eq(varlink_reply_parse(root, &rp, &reason), -EBADMSG);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_format)
{
	cJSON *params = cJSON_CreateObject();
	char *text;
	size_t len;

	json_add_u64(params, "offset", 4096);
	ck_assert_int_eq(varlink_call_format("io.rdmamemd.Read", params, true, &text, &len), 0);
	ck_assert_str_eq(text,
			 "{\"method\":\"io.rdmamemd.Read\",\"parameters\":{\"offset\":\"4096\"},"
			 "\"oneway\":true}");
	ck_assert_uint_eq(len, strlen(text));
	free(text);
	ck_assert_int_eq(varlink_call_format("io.rdmamemd.Ping", NULL, false, &text, &len), 0);
	ck_assert_str_eq(text, "{\"method\":\"io.rdmamemd.Ping\"}");
	free(text);
	cJSON_Delete(params);
}
END_TEST

START_TEST(test_error_errno)
{
	ck_assert_int_eq(rdmamem_error_to_errno(VARLINK_ERROR_INVALID_PARAMETER), -EINVAL);
	ck_assert_int_eq(rdmamem_error_to_errno(VARLINK_ERROR_METHOD_NOT_FOUND), -EOPNOTSUPP);
	ck_assert_int_eq(rdmamem_error_to_errno(RDMAMEM_ERROR_TOO_MANY_CONNECTIONS), -EUSERS);
	ck_assert_int_eq(rdmamem_error_to_errno("com.example.Unknown"), -EREMOTEIO);
}
END_TEST

/* The interface files, as GetInterfaceDescription serves them. */
static const char *const idl_files[] = { "io.rdmamemd", "org.varlink.service" };

struct idl_member {
	char keyword[8]; /* "type", "method" or "error" */
	char name[64];
};

/*
 * The members an interface file declares: "type", "method" or "error" first
 * on a line, then a capitalised name. Fields named type, method or error are
 * followed by a colon and do not match. Returns how many were found.
 */
static size_t idl_members(const char *text, struct idl_member *out, size_t max)
{
	size_t n = 0;

	for (const char *line = text, *next; line; line = next) {
		struct idl_member m = {};

		next = strchr(line, '\n');
		next = next ? next + 1 : NULL;
		line += strspn(line, " \t");
		if (sscanf(line, "%7[a-z] %63[A-Za-z0-9]", m.keyword, m.name) != 2 ||
		    !(m.name[0] >= 'A' && m.name[0] <= 'Z'))
			continue;
		if (strcmp(m.keyword, "type") && strcmp(m.keyword, "method") &&
		    strcmp(m.keyword, "error"))
			continue;
		ck_assert_uint_lt(n, max);
		out[n++] = m;
	}
	return n;
}

/*
 * Types, methods and errors share one namespace in an interface: the
 * reference parser refused io.rdmamemd for "type Share" beside "method
 * Share" ("method `Share` already defined"). And every declared error has
 * an errno in the client library.
 */
START_TEST(test_idl_members)
{
	for (size_t k = 0; k < ELEMENTSOF(idl_files); k++) {
		struct idl_member m[256];
		char path[512];
		char *text;
		size_t n, errors = 0;

		snprintf(path, sizeof(path), "%s/proto/%s.varlink", SRC_DIR, idl_files[k]);
		text = test_read_file(path);
		n = idl_members(text, m, ELEMENTSOF(m));
		ck_assert_uint_gt(n, 5);
		for (size_t i = 0; i < n; i++) {
			char full[128];

			for (size_t j = 0; j < i; j++)
				ck_assert_msg(strcmp(m[i].name, m[j].name) != 0,
					      "%s: %s %s: the name is taken by %s %s", idl_files[k],
					      m[i].keyword, m[i].name, m[j].keyword, m[j].name);
			if (strcmp(m[i].keyword, "error") != 0)
				continue;
			errors++;
			snprintf(full, sizeof(full), "%s.%s", idl_files[k], m[i].name);
			ck_assert_msg(rdmamem_error_to_errno(full) != -EREMOTEIO,
				      "%s has no errno in proto/errors.c", full);
		}
		ck_assert_uint_gt(errors, 0);
		free(text);
	}
}
END_TEST

Suite *varlink_suite(void)
{
	Suite *s = suite_create("varlink");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_call_table, 0, ELEMENTSOF(call_cases));
	tcase_add_test(tc, test_call_fields);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_names_against_spec);
	tcase_add_test(tc, test_reply);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_error_errno);
	tcase_add_test(tc, test_idl_members);
	suite_add_tcase(s, tc);
	return s;
}
