/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client's end of a socketpair whose other end is a real connection
 * (daemon/ipc/conn.c) on the test's loop: writes raw bytes, turning the
 * loop while the socket is full, and cuts what comes back into messages.
 * The suites that drive a connection share it (check_conn.c,
 * check_notify_conn.c). Loop thread: the test's.
 */
#ifndef RDMAMEMD_TESTS_CONN_CLIENT_H
#define RDMAMEMD_TESTS_CONN_CLIENT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <uv.h>

#include "util/sockio.h"

/* How long the client waits for something the connection must do. */
#define CONN_CLIENT_WAIT_MSEC 20000

struct conn_client {
	uv_loop_t *loop;
	int fd;   /* the test's end */
	char *rx; /* bytes received and not yet taken as messages */
	size_t rx_len, rx_cap;
	bool rx_eof;
	char *msg; /* the message conn_client_next() returned last */
};

static inline uint64_t conn_client_msec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000U + (uint64_t)ts.tv_nsec / 1000000U;
}

static inline void conn_client_init(struct conn_client *cl, uv_loop_t *loop, int fd)
{
	*cl = (struct conn_client){ .loop = loop, .fd = fd };
}

static inline void conn_client_done(struct conn_client *cl)
{
	safe_close(cl->fd);
	cl->fd = -EBADF;
	free(cl->rx);
	free(cl->msg);
	cl->rx = cl->msg = NULL;
	cl->rx_len = cl->rx_cap = 0;
}

/* Writes all of buf, fds on its first byte, turning the loop while the
 * socket is full. Returns 0, or -EPIPE/-ECONNRESET once the daemon hung up
 * (when allow_hangup). */
static inline int conn_client_write(struct conn_client *cl, const void *buf, size_t len,
				    const int *fds, size_t n_fds, bool allow_hangup)
{
	uint64_t deadline = conn_client_msec() + CONN_CLIENT_WAIT_MSEC;
	const char *p = buf;

	while (len > 0) {
		ssize_t n = sockio_send(cl->fd, p, len, fds, n_fds, MSG_DONTWAIT);

		if (n == -EAGAIN) {
			ck_assert_msg(conn_client_msec() < deadline, "the daemon reads nothing");
			uv_run(cl->loop, UV_RUN_NOWAIT);
			usleep(200);
			continue;
		}
		if (allow_hangup && (n == -EPIPE || n == -ECONNRESET))
			return (int)n;
		ck_assert_msg(n > 0, "send: %s", strerror((int)-n));
		p += n;
		len -= (size_t)n;
		n_fds = 0;
	}
	return 0;
}

/* Turns the loop once and takes what the client's end has. */
static inline void conn_client_poll(struct conn_client *cl)
{
	int fds[SOCKIO_FDS_MAX];
	size_t n_fds;
	ssize_t n;

	uv_run(cl->loop, UV_RUN_NOWAIT);
	if (cl->rx_eof)
		return;
	if (cl->rx_cap - cl->rx_len < 65536) {
		cl->rx_cap = cl->rx_cap * 2 + 65536;
		cl->rx = realloc(cl->rx, cl->rx_cap);
		ck_assert_ptr_nonnull(cl->rx);
	}
	n = sockio_recv(cl->fd, cl->rx + cl->rx_len, cl->rx_cap - cl->rx_len, fds, &n_fds,
			MSG_DONTWAIT);
	if (n == -EAGAIN) {
		usleep(200);
		return;
	}
	/* The daemon closed with bytes of ours unread: the kernel says so
	 * once what it sent has been read. */
	if (n == 0 || n == -ECONNRESET) {
		cl->rx_eof = true;
		return;
	}
	ck_assert_msg(n > 0, "recv: %s", strerror((int)-n));
	ck_assert_uint_eq(n_fds, 0);
	cl->rx_len += (size_t)n;
}

/* The next message the daemon sent, or NULL at the end of the stream; valid
 * until the next call. */
static inline const char *conn_client_next(struct conn_client *cl)
{
	uint64_t deadline = conn_client_msec() + CONN_CLIENT_WAIT_MSEC;

	for (;;) {
		char *nul = cl->rx_len > 0 ? memchr(cl->rx, '\0', cl->rx_len) : NULL;

		if (nul) {
			size_t len = (size_t)(nul - cl->rx) + 1;

			free(cl->msg);
			cl->msg = malloc(len);
			ck_assert_ptr_nonnull(cl->msg);
			memcpy(cl->msg, cl->rx, len);
			memmove(cl->rx, cl->rx + len, cl->rx_len - len);
			cl->rx_len -= len;
			return cl->msg;
		}
		if (cl->rx_eof) {
			ck_assert_msg(cl->rx_len == 0, "the stream ends inside a message");
			return NULL;
		}
		ck_assert_msg(conn_client_msec() < deadline, "no message from the daemon");
		conn_client_poll(cl);
	}
}

#endif
