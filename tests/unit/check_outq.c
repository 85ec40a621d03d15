/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/ipc/outq.h"
#include "util/sockio.h"
#include "tests/testlib.h"

static int sv[2];

static void setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
}

static void teardown(void)
{
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_coalesce)
{
	struct outq q;
	char buf[64];
	int fds[SOCKIO_FDS_MAX];
	size_t n_fds;

	outq_init(&q);
	ck_assert_int_eq(outq_push(&q, "{\"a\":1}", 7, NULL, 0), 0);
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_uint_eq(outq_pending(&q), 11);
	ck_assert_int_eq(outq_flush(&q, sv[0]), 1);
	ck_assert_uint_eq(outq_pending(&q), 0);
	/* Both messages left in one sendmsg. */
	ck_assert_int_eq(sockio_recv(sv[1], buf, sizeof(buf), fds, &n_fds, 0), 11);
	ck_assert_int_eq(memcmp(buf, "{\"a\":1}\0{}\0", 11), 0);
	ck_assert_uint_eq(n_fds, 0);
	outq_done(&q);
}
END_TEST

/* fds leave with the first byte of their own message, not with earlier
 * bytes coalesced in front of it. */
START_TEST(test_fds_boundaries)
{
	struct outq q;
	char buf[64];
	int fds[SOCKIO_FDS_MAX], pass[2];
	size_t n_fds;
	struct stat a, b;
	ssize_t n;

	outq_init(&q);
	pass[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pass[1] = open("/", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_int_eq(outq_push(&q, "{\"fd\":0}", 8, pass, 2), 0);
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_int_eq(outq_flush(&q, sv[0]), 1);

	/* The kernel may glue earlier bytes to the read that returns fds,
	 * but stops it at the end of the sendmsg that carried them: the
	 * read ends with the fd message, never with the one after it. */
	n = sockio_recv(sv[1], buf, sizeof(buf), fds, &n_fds, 0);
	ck_assert_int_eq(n, 12);
	ck_assert_int_eq(memcmp(buf, "{}\0{\"fd\":0}\0", 12), 0);
	ck_assert_uint_eq(n_fds, 2);
	ck_assert_int_eq(fstat(fds[0], &a), 0);
	ck_assert_int_eq(stat("/dev/null", &b), 0);
	ck_assert(a.st_rdev == b.st_rdev);
	close_many(fds, n_fds);
	n = sockio_recv(sv[1], buf, sizeof(buf), fds, &n_fds, 0);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(n_fds, 0);
	outq_done(&q);
}
END_TEST

/* A full socket keeps the rest queued; unsent fds are closed by outq_done. */
START_TEST(test_partial_and_done)
{
	struct outq q;
	static char big[256 * 1024];
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int before, after;

	outq_init(&q);
	memset(big, 'z', sizeof(big));
	ck_assert_int_eq(outq_push(&q, big, sizeof(big), NULL, 0), 0);
	before = test_count_fds(getpid());
	ck_assert_int_eq(outq_push(&q, "{}", 2, &devnull, 1), 0);
	ck_assert_int_eq(outq_flush(&q, sv[0]), 0);
	ck_assert_uint_gt(outq_pending(&q), 0);
	outq_done(&q);
	after = test_count_fds(getpid());
	ck_assert_int_eq(after, before - 1);
}
END_TEST

/* Reads from sv[1] until len bytes came (fds closed); they must be want. */
static void expect_stream(const char *want, size_t len)
{
	char *buf = malloc(len);
	int fds[SOCKIO_FDS_MAX];
	size_t got = 0, n_fds;

	ck_assert_ptr_nonnull(buf);
	while (got < len) {
		ssize_t n = sockio_recv(sv[1], buf + got, len - got, fds, &n_fds, 0);

		ck_assert_int_gt(n, 0);
		close_many(fds, n_fds);
		got += n;
	}
	ck_assert_int_eq(memcmp(buf, want, len), 0);
	free(buf);
}

/* A message in a buffer of its own goes out in its turn, between the
 * coalesced ones, however many flushes it takes; unsent ones are freed. */
START_TEST(test_own_buffer)
{
	const size_t big = 1 << 20;
	char *text = malloc(big + 1), *want = malloc(big + 32);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC), r;
	struct outq q;
	size_t n = 0;

	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(want);
	memset(text, 'b', big);
	text[big] = '\0';
	outq_init(&q);
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_int_eq(outq_push_buffer(&q, text, big), 0);
	ck_assert_int_eq(outq_push(&q, "{\"fd\":0}", 8, &devnull, 1), 0);
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_uint_eq(outq_pending(&q), 3 + big + 1 + 9 + 3);
	memcpy(want, "{}\0", 3);
	memset(want + 3, 'b', big);
	memcpy(want + 3 + big, "\0{\"fd\":0}\0{}\0", 13);
	/* The socket takes a part at a time: read what it took, flush on. */
	while ((r = outq_flush(&q, sv[0])) == 0) {
		char buf[65536];
		size_t n_fds;
		int fds[SOCKIO_FDS_MAX];
		ssize_t got = sockio_recv(sv[1], buf, sizeof(buf), fds, &n_fds, 0);

		ck_assert_int_gt(got, 0);
		ck_assert_int_eq(memcmp(buf, want + n, got), 0);
		close_many(fds, n_fds);
		n += got;
	}
	ck_assert_int_eq(r, 1);
	ck_assert_uint_eq(outq_pending(&q), 0);
	expect_stream(want + n, 3 + big + 13 - n);
	outq_done(&q);

	/* Never sent: outq_done frees it (the sanitizers and valgrind
	 * check). */
	outq_init(&q);
	text = malloc(16);
	strcpy(text, "{\"x\":1}");
	ck_assert_int_eq(outq_push_buffer(&q, text, 7), 0);
	outq_done(&q);
	free(want);
}
END_TEST

/*
 * What a queue holds is counted (its buffer, marks and own-buffer messages
 * until sent in full), and a queue that empties gives back a buffer that
 * grew large: a client that once had megabytes of small replies queued
 * keeps no megabytes.
 */
START_TEST(test_held)
{
	const size_t big = 256 * 1024;
	char *text = malloc(big + 1), small[1024], buf[65536];
	struct outq q;
	size_t n_fds;
	int fds[SOCKIO_FDS_MAX], r;

	ck_assert_ptr_nonnull(text);
	memset(text, 'b', big);
	text[big] = '\0';
	memset(small, 's', sizeof(small));
	outq_init(&q);
	ck_assert_uint_eq(outq_held(&q), 0);
	ck_assert_int_eq(outq_push_buffer(&q, text, big), 0);
	ck_assert_uint_ge(outq_held(&q), big + 1);
	/* Small messages until the buffer is far past what is kept. */
	for (int i = 0; i < 512; i++)
		ck_assert_int_eq(outq_push(&q, small, sizeof(small), NULL, 0), 0);
	ck_assert_uint_ge(outq_held(&q), big + 1 + 512 * (sizeof(small) + 1));
	while ((r = outq_flush(&q, sv[0])) == 0) {
		ck_assert_int_gt(sockio_recv(sv[1], buf, sizeof(buf), fds, &n_fds, 0), 0);
		/* The message of its own counts in full until it is sent. */
		if (outq_pending(&q) > 512 * (sizeof(small) + 1))
			ck_assert_uint_ge(outq_held(&q), big + 1);
	}
	ck_assert_int_eq(r, 1);
	ck_assert_uint_le(outq_held(&q), OUTQ_KEEP_MAX);
	/* Emptied, it is used again. */
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_int_eq(outq_flush(&q, sv[0]), 1);
	outq_done(&q);
}
END_TEST

START_TEST(test_broken_peer)
{
	struct outq q;

	outq_init(&q);
	close(sv[1]);
	sv[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(outq_push(&q, "{}", 2, NULL, 0), 0);
	ck_assert_int_eq(outq_flush(&q, sv[0]), -EPIPE);
	outq_done(&q);
}
END_TEST

Suite *outq_suite(void)
{
	Suite *s = suite_create("outq");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_coalesce);
	tcase_add_test(tc, test_fds_boundaries);
	tcase_add_test(tc, test_partial_and_done);
	tcase_add_test(tc, test_own_buffer);
	tcase_add_test(tc, test_held);
	tcase_add_test(tc, test_broken_peer);
	suite_add_tcase(s, tc);
	return s;
}
