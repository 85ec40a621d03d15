/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sendmsg/recvmsg with SCM_RIGHTS for Unix stream sockets. libuv cannot pass
 * arbitrary fds (memfd, dma-buf), so the daemon and the client both use
 * these on a plain non-blocking socket.
 */
#ifndef RDMAMEM_SOCKIO_H
#define RDMAMEM_SOCKIO_H

#include <stddef.h>
#include <sys/types.h>

/* The kernel's SCM_MAX_FD: more fds than this never arrive in one read. */
#define SOCKIO_FDS_MAX 253

/*
 * Reads up to len bytes and any fds sent with them (CLOEXEC). fds must hold
 * SOCKIO_FDS_MAX entries; *ret_n_fds is set in every case. Returns the byte
 * count (0 at end of stream) or -errno; -EPROTO when the control data was
 * truncated, in which case every fd that arrived has been closed.
 */
ssize_t sockio_recv(int fd, void *buf, size_t len, int *fds, size_t *ret_n_fds, int flags);

/*
 * Writes up to len bytes; when n_fds > 0 the fds ride on this call (the
 * kernel attaches them to the first byte written). Never raises SIGPIPE.
 * Returns bytes written or -errno.
 */
ssize_t sockio_send(int fd, const void *buf, size_t len, const int *fds, size_t n_fds, int flags);

#endif
