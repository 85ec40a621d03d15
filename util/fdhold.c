/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fdhold.h"
#include "util/macro.h"
#include "util/sockio.h"

/* The message's one byte: a datagram of none carries no fds on every kernel. */
static const char hold_mark = 'H';

int fdhold_make(int fd, int *ret_holder)
{
	int pair[2];
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) < 0)
		return -errno;
	n = sockio_send(pair[0], &hold_mark, 1, &fd, 1, MSG_DONTWAIT);
	/* The sender goes: a datagram socket's peer hears no hang-up, and
	 * what was sent stays queued on pair[1]. */
	close(pair[0]);
	if (n != 1) {
		close(pair[1]);
		return n < 0 ? (int)n : -EIO;
	}
	*ret_holder = pair[1];
	return 0;
}

int fdhold_peek(int holder, int *ret_fd)
{
	int fds[SOCKIO_FDS_MAX];
	size_t n_fds = 0;
	char mark;
	ssize_t n;

	n = sockio_recv(holder, &mark, 1, fds, &n_fds, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return n == -EAGAIN ? -ENOMSG : (int)n;
	if (n != 1 || mark != hold_mark || n_fds != 1) {
		for (size_t i = 0; i < n_fds; i++)
			close(fds[i]);
		return -ENOMSG;
	}
	*ret_fd = fds[0];
	return 0;
}
