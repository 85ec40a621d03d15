/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "util/macro.h"
#include "util/sockio.h"

ssize_t sockio_recv(int fd, void *buf, size_t len, int *fds, size_t *ret_n_fds, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * SOCKIO_FDS_MAX)];
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = &control,
		.msg_controllen = sizeof(control),
	};
	struct cmsghdr *cmsg;
	size_t n_fds = 0;
	ssize_t n;

	*ret_n_fds = 0;
	n = recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return negative_errno();

	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		size_t k;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (n_fds + k > SOCKIO_FDS_MAX)
			k = SOCKIO_FDS_MAX - n_fds;
		memcpy(fds + n_fds, CMSG_DATA(cmsg), k * sizeof(int));
		n_fds += k;
	}

	if (msg.msg_flags & MSG_CTRUNC) {
		/* The kernel already closed what did not fit; what did fit
		 * would be attributed to the wrong message. */
		close_many(fds, n_fds);
		return -EPROTO;
	}

	*ret_n_fds = n_fds;
	return n;
}

ssize_t sockio_send(int fd, const void *buf, size_t len, const int *fds, size_t n_fds, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * SOCKIO_FDS_MAX)];
	} control;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (n_fds > SOCKIO_FDS_MAX)
		return -E2BIG;
	if (n_fds > 0) {
		struct cmsghdr *cmsg;

		memset(&control, 0, sizeof(control));
		msg.msg_control = &control;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
	}

	n = sendmsg(fd, &msg, flags | MSG_NOSIGNAL);
	if (n < 0)
		return negative_errno();
	return n;
}
