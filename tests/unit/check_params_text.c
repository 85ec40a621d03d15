/* SPDX-License-Identifier: BSD-3-Clause */
/* The library's parameters as text (client/params_text.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/params_text.h"
#include "tests/testlib.h"

static char *print(cJSON *raw)
{
	char *s;

	ck_assert_ptr_nonnull(raw);
	ck_assert(cJSON_IsRaw(raw));
	s = strdup(raw->valuestring);
	cJSON_Delete(raw);
	return s;
}

START_TEST(test_text_is_the_json)
{
	struct params_text t;
	cJSON *parsed;
	char *s;

	params_text_init(&t);
	params_text_open(&t, "from");
	params_text_id(&t, "region", 1);
	params_text_id(&t, "offset", UINT64_MAX);
	params_text_close(&t);
	params_text_open(&t, "to");
	params_text_id(&t, "region", 0);
	params_text_close(&t);
	params_text_int(&t, "a", -1);
	params_text_int(&t, "b", INT64_MIN);
	params_text_int(&t, "c", 0);
	params_text_name(&t, "mode", "disjoint");
	s = print(params_text_done(&t));
	ck_assert_str_eq(s, "{\"from\":{\"region\":\"1\",\"offset\":\"18446744073709551615\"},"
			    "\"to\":{\"region\":\"0\"},\"a\":-1,\"b\":-9223372036854775808,"
			    "\"c\":0,\"mode\":\"disjoint\"}");
	parsed = cJSON_Parse(s);
	ck_assert_ptr_nonnull(parsed);
	cJSON_Delete(parsed);
	free(s);

	params_text_init(&t);
	s = print(params_text_done(&t));
	ck_assert_str_eq(s, "{}");
	free(s);
}
END_TEST

/* What does not fit, or nests too deep, or is left open, gives NULL. */
START_TEST(test_refused)
{
	struct params_text t;

	params_text_init(&t);
	for (int i = 0; i < 20; i++)
		params_text_id(&t, "a_long_enough_key", UINT64_MAX);
	ck_assert_ptr_null(params_text_done(&t));

	params_text_init(&t);
	params_text_open(&t, "a");
	params_text_open(&t, "b");
	params_text_open(&t, "c");
	params_text_close(&t);
	params_text_close(&t);
	params_text_close(&t);
	ck_assert_ptr_null(params_text_done(&t));

	params_text_init(&t);
	params_text_open(&t, "a");
	ck_assert_ptr_null(params_text_done(&t));
}
END_TEST

Suite *params_text_suite(void)
{
	Suite *s = suite_create("params_text");
	TCase *tc = tcase_create("text");

	tcase_add_test(tc, test_text_is_the_json);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return s;
}
