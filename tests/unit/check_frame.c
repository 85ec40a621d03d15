/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"
#include "tests/testlib.h"

static void feed(struct frame_reader *fr, const void *data, size_t len)
{
	void *p;
	size_t space;

	while (len > 0) {
		size_t n;

		ck_assert_int_eq(frame_reader_reserve(fr, &p, &space), 0);
		n = MIN(space, len);
		memcpy(p, data, n);
		frame_reader_commit(fr, n);
		data = (const char *)data + n;
		len -= n;
	}
}

START_TEST(test_many_messages_one_read)
{
	static const char in[] = "{\"a\":1}\0{\"b\":2}\0{\"c\":3}";
	struct frame_reader fr;
	struct frame f;

	frame_reader_init(&fr, 1024);
	feed(&fr, in, sizeof(in) - 1);

	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_str_eq(f.data, "{\"a\":1}");
	ck_assert_uint_eq(f.len, 7);
	ck_assert_uint_eq(f.ordinal, 0);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_str_eq(f.data, "{\"b\":2}");
	ck_assert_uint_eq(f.ordinal, 1);
	/* The third has no terminator yet. */
	ck_assert_int_eq(frame_reader_next(&fr, &f), 0);
	ck_assert_uint_eq(frame_reader_pending(&fr), 7);

	feed(&fr, "", 1);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_str_eq(f.data, "{\"c\":3}");
	ck_assert_uint_eq(f.ordinal, 2);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 0);
	ck_assert_uint_eq(frame_reader_pending(&fr), 0);
	frame_reader_done(&fr);
}
END_TEST

START_TEST(test_split_byte_by_byte)
{
	static const char in[] = "{\"method\":\"x.y.Z\"}";
	struct frame_reader fr;
	struct frame f;

	frame_reader_init(&fr, 1024);
	for (size_t i = 0; i < sizeof(in); i++) {
		ck_assert_int_eq(frame_reader_next(&fr, &f), 0);
		feed(&fr, in + i, 1);
	}
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_str_eq(f.data, in);
	ck_assert_uint_eq(f.len, sizeof(in) - 1);
	frame_reader_done(&fr);
}
END_TEST

START_TEST(test_exact_limit_and_one_over)
{
	const size_t max = 100000;
	char *buf = malloc(max + 2);
	struct frame_reader fr;
	struct frame f;

	ck_assert_ptr_nonnull(buf);
	memset(buf, 'x', max + 1);

	/* A body of exactly max bytes is fine. */
	frame_reader_init(&fr, max);
	feed(&fr, buf, max);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 0);
	feed(&fr, "", 1);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_uint_eq(f.len, max);
	frame_reader_done(&fr);

	/* One more byte without a terminator is an error, known before the
	 * terminator arrives. */
	frame_reader_init(&fr, max);
	feed(&fr, buf, max + 1);
	ck_assert_int_eq(frame_reader_next(&fr, &f), -EMSGSIZE);
	frame_reader_done(&fr);

	/* One over, terminated in the same read. */
	buf[max + 1] = '\0';
	frame_reader_init(&fr, max);
	feed(&fr, buf, max + 2);
	ck_assert_int_eq(frame_reader_next(&fr, &f), -EMSGSIZE);
	frame_reader_done(&fr);
	free(buf);
}
END_TEST

START_TEST(test_reserve_refuses_beyond_limit)
{
	const size_t max = 1000;
	struct frame_reader fr;
	size_t space, total = 0;
	void *p;

	frame_reader_init(&fr, max);
	/* Fill without terminators until the reader stops offering space. */
	while (frame_reader_reserve(&fr, &p, &space) == 0) {
		memset(p, 'y', space);
		frame_reader_commit(&fr, space);
		total += space;
		ck_assert_uint_lt(total, 10 * 1024 * 1024);
	}
	ck_assert_uint_gt(total, max);
	ck_assert_int_eq(frame_reader_reserve(&fr, &p, &space), -ENOBUFS);
	frame_reader_done(&fr);
}
END_TEST

START_TEST(test_empty_message)
{
	struct frame_reader fr;
	struct frame f;

	frame_reader_init(&fr, 16);
	feed(&fr, "\0\0", 2);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_uint_eq(f.ordinal, 1);
	frame_reader_done(&fr);
}
END_TEST

/* Commits one chunk (it must fit) and returns what commit says. */
static uint64_t commit(struct frame_reader *fr, const void *data, size_t len)
{
	void *p;
	size_t space;

	ck_assert_int_eq(frame_reader_reserve(fr, &p, &space), 0);
	ck_assert_uint_ge(space, len);
	memcpy(p, data, len);
	return frame_reader_commit(fr, len);
}

/* fds received with a read belong to the last message that starts in it. */
START_TEST(test_commit_start)
{
	struct frame_reader fr;
	struct frame f;

	frame_reader_init(&fr, 1024);
	/* Message 0 starts at the first byte, message 1 after its NUL. */
	ck_assert_uint_eq(commit(&fr, "{}\0{", 4), 1);
	/* Only the rest of message 1, then its terminator: nothing starts. */
	ck_assert_uint_eq(commit(&fr, "}", 1), FRAME_NO_START);
	ck_assert_uint_eq(commit(&fr, "", 1), FRAME_NO_START);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_uint_eq(f.ordinal, 1);
	/* A read that ends exactly at a terminator did not start the next. */
	ck_assert_uint_eq(commit(&fr, "{}\0", 3), 2);
	/* A message ending, several whole ones, the start of another. */
	ck_assert_uint_eq(commit(&fr, "{\0{}\0{}\0{", 9), 6);
	ck_assert_uint_eq(commit(&fr, "}\0{}\0", 5), 7);
	/* Empty messages start too. */
	ck_assert_uint_eq(commit(&fr, "\0", 1), 8);
	ck_assert_uint_eq(commit(&fr, "\0\0", 2), 10);
	frame_reader_done(&fr);
}
END_TEST

/* A frame leaves with its buffer; what followed it stays with the reader. */
START_TEST(test_detach)
{
	struct frame_reader fr;
	struct frame f;
	char *buf;

	frame_reader_init(&fr, 1024);
	feed(&fr, "{\"a\":1}\0{\"b\":2}\0{\"c", 19);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_int_eq(frame_reader_detach(&fr, &f, &buf), 0);
	ck_assert_str_eq(f.data, "{\"b\":2}");
	ck_assert_uint_eq(frame_reader_pending(&fr), 3);
	free(buf);
	feed(&fr, "\":3}", 4);
	ck_assert_uint_eq(commit(&fr, "\0{", 2), 3);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_str_eq(f.data, "{\"c\":3}");
	ck_assert_uint_eq(f.ordinal, 2);
	/* The last frame of a buffer, nothing after it. */
	feed(&fr, "}", 1);
	feed(&fr, "", 1);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 1);
	ck_assert_int_eq(frame_reader_detach(&fr, &f, &buf), 0);
	ck_assert_str_eq(f.data, "{}");
	ck_assert_uint_eq(f.ordinal, 3);
	ck_assert_uint_eq(frame_reader_pending(&fr), 0);
	free(buf);
	ck_assert_int_eq(frame_reader_next(&fr, &f), 0);
	frame_reader_done(&fr);
}
END_TEST

/* However much space there is, one read is offered a bounded amount. */
START_TEST(test_read_bounded)
{
	char *big = malloc(4 << 20);
	struct frame_reader fr;
	size_t space;
	void *p;

	ck_assert_ptr_nonnull(big);
	memset(big, ' ', 4 << 20);
	frame_reader_init(&fr, 16 << 20);
	feed(&fr, big, 4 << 20);
	ck_assert_int_eq(frame_reader_reserve(&fr, &p, &space), 0);
	ck_assert_uint_le(space, 256 * 1024);
	frame_reader_done(&fr);
	free(big);
}
END_TEST

/* Compaction keeps partial messages intact across many reads. */
START_TEST(test_compaction)
{
	struct frame_reader fr;
	struct frame f;
	char msg[300];
	unsigned seen = 0;

	frame_reader_init(&fr, 4096);
	for (unsigned i = 0; i < 5000; i++) {
		int n = snprintf(msg, sizeof(msg), "{\"i\":%u,\"pad\":\"%0*u\"}", i, (int)(i % 200),
				 0);

		/* Feed in two pieces to leave partials at the buffer end. */
		feed(&fr, msg, n / 2);
		feed(&fr, msg + n / 2, n - n / 2 + 1);
		while (frame_reader_next(&fr, &f) == 1) {
			char expect[32];

			snprintf(expect, sizeof(expect), "{\"i\":%u,", seen);
			ck_assert_int_eq(strncmp(f.data, expect, strlen(expect)), 0);
			ck_assert_uint_eq(f.ordinal, seen);
			seen++;
		}
	}
	ck_assert_uint_eq(seen, 5000);
	frame_reader_done(&fr);
}
END_TEST

/*
 * frame_reader_growth() says what the next reserve adds, before it does: the
 * initial buffer, then doubling for a message still arriving, nothing when
 * there is room or the message is at the limit.
 */
START_TEST(test_growth_announced)
{
	const size_t max = 1 << 20;
	struct frame_reader fr;
	size_t space;
	void *p;

	frame_reader_init(&fr, max);
	ck_assert_uint_eq(frame_reader_growth(&fr), FRAME_BUFFER_INITIAL);
	for (;;) {
		size_t cap = fr.cap, grow = frame_reader_growth(&fr);

		if (frame_reader_reserve(&fr, &p, &space) < 0)
			break;
		ck_assert_uint_eq(fr.cap, cap + grow);
		ck_assert_uint_le(fr.cap, max + 1 + FRAME_BUFFER_INITIAL / 2);
		memset(p, 'x', space);
		frame_reader_commit(&fr, space);
	}
	ck_assert_uint_eq(frame_reader_growth(&fr), 0);
	frame_reader_done(&fr);

	/* Room left: no growth; a small message never grows the buffer. */
	frame_reader_init(&fr, max);
	feed(&fr, "{}", 3);
	ck_assert_uint_eq(fr.cap, FRAME_BUFFER_INITIAL);
	ck_assert_uint_eq(frame_reader_growth(&fr), 0);
	frame_reader_done(&fr);
}
END_TEST

Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_many_messages_one_read);
	tcase_add_test(tc, test_split_byte_by_byte);
	tcase_add_test(tc, test_empty_message);
	tcase_add_test(tc, test_commit_start);
	tcase_add_test(tc, test_detach);
	tcase_add_test(tc, test_compaction);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, test_exact_limit_and_one_over);
	tcase_add_test(tc, test_reserve_refuses_beyond_limit);
	tcase_add_test(tc, test_read_bounded);
	tcase_add_test(tc, test_growth_announced);
	suite_add_tcase(s, tc);
	return s;
}
