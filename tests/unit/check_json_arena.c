/* SPDX-License-Identifier: BSD-3-Clause */
/* Request trees parsed into slots (daemon/core/json_arena.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "daemon/core/json_arena.h"
#include "proto/json.h"
#include "tests/testlib.h"

#define COPY_CALL                                                                                 \
	"{\"method\":\"io.rdmamemd.Copy\",\"parameters\":{\"from\":{\"region\":\"1\",\"offset\":" \
	"\"0\"},\"to\":{\"region\":\"2\",\"offset\":\"4096\"},\"length\":\"4096\"}}"

static void setup(void)
{
	ck_assert_int_eq(json_arena_setup(3), 0);
}

static void teardown(void)
{
	json_arena_teardown();
}

/* Parses text inside s (NULL: on the heap). */
static cJSON *parse_in(struct json_slot *s, const char *text)
{
	const char *reason = NULL;
	cJSON *root = NULL;
	int r;

	json_slot_enter(s);
	r = json_parse(text, strlen(text), &root, &reason);
	json_slot_leave();
	ck_assert_msg(r == 0, "%s", reason ? reason : "?");
	return root;
}

/* Every node, key and string of the tree, in the slot or not. */
static void expect_owned(const cJSON *item, bool owned)
{
	for (; item; item = item->next) {
		ck_assert(json_arena_owns(item) == owned);
		if (item->string)
			ck_assert(json_arena_owns(item->string) == owned);
		if (item->valuestring)
			ck_assert(json_arena_owns(item->valuestring) == owned);
		expect_owned(item->child, owned);
	}
}

START_TEST(test_tree_in_a_slot)
{
	struct json_slot *s = json_slot_take();
	cJSON *root, *p;

	ck_assert_ptr_nonnull(s);
	root = parse_in(s, COPY_CALL);
	expect_owned(root, true);
	p = cJSON_GetObjectItemCaseSensitive(root, "parameters");
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(p, "length")->valuestring, "4096");
	/* cJSON's own calls work on it, and what they add comes from the heap
	 * once the slot is left. */
	ck_assert_ptr_nonnull(cJSON_AddStringToObject(p, "mode", "exclusive"));
	ck_assert(!json_arena_owns(cJSON_GetObjectItemCaseSensitive(p, "mode")));
	cJSON_DeleteItemFromObject(p, "from");
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(p, "from"));
	cJSON_Delete(root);
	json_slot_give(s);
#if defined(__SANITIZE_ADDRESS__)
	/* A tree read after its slot went back is reported, as after free(). */
	ck_assert(__asan_address_is_poisoned(root));
#endif
	/* The slot given back last comes back first, empty. */
	ck_assert_ptr_eq(json_slot_take(), s);
	root = parse_in(s, COPY_CALL);
	expect_owned(root, true);
	cJSON_Delete(root);
	json_slot_give(s);
}
END_TEST

/* A tree larger than a slot spills onto the heap: whole and freeable. */
START_TEST(test_large_tree_spills)
{
	struct json_slot *s = json_slot_take();
	size_t n = 2000, len = 2 + n * 12;
	char *text = malloc(len), *w = text;
	cJSON *root, *it;
	size_t k = 0, in_slot = 0;

	ck_assert_ptr_nonnull(text);
	w += sprintf(w, "[");
	for (size_t i = 0; i < n; i++)
		w += sprintf(w, "%s\"v%zu\"", i ? "," : "", i);
	sprintf(w, "]");
	root = parse_in(s, text);
	cJSON_ArrayForEach(it, root) {
		char want[16];

		snprintf(want, sizeof(want), "v%zu", k++);
		ck_assert_str_eq(it->valuestring, want);
		in_slot += json_arena_owns(it);
	}
	ck_assert_uint_eq(k, n);
	ck_assert_uint_gt(in_slot, 0);
	ck_assert_uint_lt(in_slot, n);
	/* The heap part is freed here (ASan and valgrind would see a leak). */
	cJSON_Delete(root);
	json_slot_give(s);
	free(text);
}
END_TEST

/* Without a slot, and once the slots run out, trees live on the heap. */
START_TEST(test_heap_without_a_slot)
{
	struct json_slot *a = json_slot_take(), *b = json_slot_take(), *c = json_slot_take();
	cJSON *root;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_null(json_slot_take());
	root = parse_in(NULL, COPY_CALL);
	expect_owned(root, false);
	cJSON_Delete(root);
	json_slot_give(b);
	ck_assert_ptr_eq(json_slot_take(), b);
	json_slot_give(a);
	json_slot_give(b);
	json_slot_give(c);
	ck_assert_int_eq(json_arena_setup(3), -EALREADY);
}
END_TEST

Suite *json_arena_suite(void)
{
	Suite *s = suite_create("json_arena");
	TCase *tc = tcase_create("slots");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_tree_in_a_slot);
	tcase_add_test(tc, test_large_tree_spills);
	tcase_add_test(tc, test_heap_without_a_slot);
	suite_add_tcase(s, tc);
	return s;
}
