/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's messages to systemd's fd store (daemon/fdstore.c) against a
 * notify socket of the test's: each put carries its fd, puts and removes
 * arrive in the order said, and a full queue at PID 1 makes them wait on
 * the loop instead of blocking it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/kcmp.h>

#include <uv.h>

#include "daemon/fdstore.h"
#include "rdmamem.h"
#include "tests/testlib.h"
#include "util/fdhold.h"

/* More than a Unix datagram socket queues by default (max_dgram_qlen 512
 * and the receive buffer): some must wait. */
#define N_MSGS 3000

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A bound datagram socket at a fresh path, as NOTIFY_SOCKET. */
static int notify_socket(char *path, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	snprintf(path, size, "/tmp/rdmamemd-fdstore-test.%d", (int)getpid());
	unlink(path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
	return fd;
}

/* One message: its text in buf, the fds that came with it closed and
 * counted. 0 when none waits. */
static int receive(int fd, char *buf, size_t size, unsigned *n_fds)
{
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { buf, size - 1 };
	struct msghdr m = { .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);

	if (n < 0) {
		ck_assert_int_eq(errno, EAGAIN);
		return 0;
	}
	buf[n] = '\0';
	*n_fds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			close(((int *)CMSG_DATA(c))[i]);
			(*n_fds)++;
		}
	return 1;
}

START_TEST(test_order_and_no_blocking)
{
	char path[108], name[64], want[160], got[512];
	struct fdstore *s = NULL;
	unsigned n_fds, seen = 0;
	uv_loop_t loop;
	struct rlimit lim;
	double t0, took;
	int sink, mfd;

	/* Each queued put holds its fd until it is sent: more than a normal
	 * user's soft limit of 1024. The daemon raises its own limit to the
	 * hard one at start; so does this case. */
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &lim), 0);
	ck_assert_msg(lim.rlim_max > N_MSGS + 64, "RLIMIT_NOFILE's hard limit %lu is too low",
		      (unsigned long)lim.rlim_max);
	lim.rlim_cur = lim.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	sink = notify_socket(path, sizeof(path));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(fdstore_new(&loop, &s), 0);
	ck_assert_int_eq(rdmamem_memfd_create("fdstore", 4096, &mfd, NULL), 0);

	/* Nobody reads: none of these may block. */
	t0 = now_sec();
	for (unsigned i = 0; i < N_MSGS; i++) {
		snprintf(name, sizeof(name), "rdmamem-r1.%u", i);
		ck_assert_int_eq(i % 3 == 2 ? fdstore_ops.remove(s, name) :
					      fdstore_ops.put(s, name, mfd),
				 0);
	}
	took = now_sec() - t0;
	ck_assert_msg(took < 5, "%u messages took %.1f s to say", N_MSGS, took);

	/* PID 1 reads; the loop sends the rest, in order. */
	while (seen < N_MSGS) {
		uv_run(&loop, UV_RUN_NOWAIT);
		while (seen < N_MSGS && receive(sink, got, sizeof(got), &n_fds)) {
			if (seen % 3 == 2)
				snprintf(want, sizeof(want),
					 "FDSTOREREMOVE=1\nFDNAME=rdmamem-r1.%u", seen);
			else
				snprintf(want, sizeof(want),
					 "FDSTORE=1\nFDNAME=rdmamem-r1.%u\nFDPOLL=0", seen);
			ck_assert_str_eq(got, want);
			ck_assert_uint_eq(n_fds, seen % 3 == 2 ? 0 : 1);
			seen++;
		}
		ck_assert_msg(now_sec() - t0 < 60, "only %u of %u messages came", seen, N_MSGS);
	}

	/* At exit, what waits is sent, but nobody waits more than a second
	 * for a PID 1 that reads nothing. */
	for (unsigned i = 0; i < N_MSGS; i++)
		ck_assert_int_eq(fdstore_ops.put(s, "rdmamem-r1.late", mfd), 0);
	t0 = now_sec();
	s = fdstore_free(s);
	ck_assert_double_lt(now_sec() - t0, 3);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	while (receive(sink, got, sizeof(got), &n_fds))
		;
	close(mfd);
	close(sink);
	unlink(path);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

/* Where NOTIFY_SOCKET names no Unix socket, there is no store. */
START_TEST(test_no_socket)
{
	struct fdstore *s = NULL;
	uv_loop_t loop;

	ck_assert_int_eq(uv_loop_init(&loop), 0);
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(fdstore_new(&loop, &s), -ENXIO);
	setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);
	ck_assert_int_eq(fdstore_new(&loop, &s), -ENXIO);
	setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1);
	ck_assert_int_lt(fdstore_new(&loop, &s), 0);
	unsetenv("NOTIFY_SOCKET");
	/* A service manager that went away: the put fails at once, by name. */
	{
		char path[108];
		int sink = notify_socket(path, sizeof(path)), mfd;

		ck_assert_int_eq(fdstore_new(&loop, &s), 0);
		close(sink);
		ck_assert_int_eq(rdmamem_memfd_create("fdstore", 4096, &mfd, NULL), 0);
		ck_assert_int_eq(fdstore_ops.put(s, "rdmamem-r1.gone", mfd), -ECONNREFUSED);
		close(mfd);
		s = fdstore_free(s);
		uv_run(&loop, UV_RUN_DEFAULT);
		unlink(path);
		unsetenv("NOTIFY_SOCKET");
	}
	ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/*
 * util/fdhold: a file held in flight outlives every other fd of it, comes
 * back as many times as it is peeked, and its holder is a file of its own
 * that never reports a hang-up (systemd drops hung-up fds from its store,
 * and keeps one fd per open file).
 */
START_TEST(test_fdhold)
{
	int file = memfd_create("held", MFD_CLOEXEC), h1, h2, back, pair[2];
	pid_t pid = getpid();
	char buf[8] = {};
	struct pollfd p;

	ck_assert_int_ge(file, 0);
	ck_assert_int_eq(pwrite(file, "held", 4, 0), 4);
	ck_assert_int_eq(fdhold_make(file, &h1), 0);
	ck_assert_int_eq(fdhold_make(file, &h2), 0);
	ck_assert_int_ne(syscall(SYS_kcmp, pid, pid, KCMP_FILE, h1, h2), 0);
	close(file);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(fdhold_peek(h1, &back), 0);
		ck_assert_int_eq(fcntl(back, F_GETFD), FD_CLOEXEC);
		ck_assert_int_eq(pread(back, buf, 4, 0), 4);
		ck_assert_str_eq(buf, "held");
		close(back);
	}
	p = (struct pollfd){ .fd = h1 };
	ck_assert_int_eq(poll(&p, 1, 0), 0);
	ck_assert_int_eq(fcntl(h1, F_GETFD), FD_CLOEXEC);
	/* A file stored as itself, and a socket that holds nothing. */
	back = memfd_create("plain", MFD_CLOEXEC);
	ck_assert_int_eq(fdhold_peek(back, &file), -ENOTSOCK);
	close(back);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair), 0);
	ck_assert_int_eq(fdhold_peek(pair[1], &file), -ENOMSG);
	close(pair[0]);
	close(pair[1]);
	close(h1);
	close(h2);
}
END_TEST

Suite *fdstore_suite(void)
{
	Suite *s = suite_create("fdstore");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_order_and_no_blocking);
	tcase_add_test(tc, test_no_socket);
	tcase_add_test(tc, test_fdhold);
	tcase_set_timeout(tc, 90);
	suite_add_tcase(s, tc);
	return s;
}
