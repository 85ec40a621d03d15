/* SPDX-License-Identifier: BSD-3-Clause */
/* util/loop_poll: looks every turn while watched, none after; a stop
 * closes the handle only once the last item ended. */
#include <errno.h>

#include "util/loop_poll.h"
#include "tests/testlib.h"

struct counted {
	struct loop_poll_item item;
	int looks, ends_after; /* ends on its ends_after-th look */
};

static void look(struct loop_poll_item *it)
{
	struct counted *c = container_of(it, struct counted, item);

	if (++c->looks == c->ends_after)
		loop_poll_del(it);
}

START_TEST(test_looks_each_turn)
{
	uv_loop_t loop;
	struct loop_poll p;
	struct counted a = { .ends_after = 3 }, b = { .ends_after = 5 };

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	loop_poll_init(&p, &loop);
	/* Nothing watched: the loop has nothing alive to run. */
	ck_assert_int_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);
	ck_assert_int_eq(loop_poll_add(&p, &a.item, look), 0);
	ck_assert(!loop_poll_watched(&b.item));
	ck_assert_int_eq(loop_poll_add(&p, &b.item, look), 0);
	ck_assert(loop_poll_watched(&b.item));
	for (int i = 0; i < 4; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(a.looks, 3);
	ck_assert(!loop_poll_watched(&a.item));
	ck_assert_int_eq(b.looks, 4);
	ck_assert(loop_poll_watched(&b.item));
	/* The last one ends: the loop may sleep again, nothing looks. */
	ck_assert_int_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);
	ck_assert_int_eq(b.looks, 5);
	ck_assert_int_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);
	ck_assert_int_eq(b.looks, 5);

	/* Stopped with one watched: it is looked at until it ends, then the
	 * handle closes; nothing new is taken meanwhile. */
	a = (struct counted){ .ends_after = 4 };
	ck_assert_int_eq(loop_poll_add(&p, &a.item, look), 0);
	loop_poll_stop(&p);
	ck_assert_int_eq(loop_poll_add(&p, &b.item, look), -ESHUTDOWN);
	ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
	ck_assert_int_eq(a.looks, 4);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_stop_when_idle)
{
	uv_loop_t loop;
	struct loop_poll p;

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	loop_poll_init(&p, &loop);
	loop_poll_stop(&p);
	loop_poll_stop(&p);
	ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

Suite *loop_poll_suite(void)
{
	Suite *s = suite_create("loop_poll");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_looks_each_turn);
	tcase_add_test(tc, test_stop_when_idle);
	suite_add_tcase(s, tc);
	return s;
}
