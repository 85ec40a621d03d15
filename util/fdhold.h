/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A file held in flight: a Unix datagram socket whose one queued message
 * carries the file as SCM_RIGHTS. The socket is a file of its own, so that
 * a store which keeps one descriptor per open file (systemd's fd store)
 * keeps every holder, even when two hold the same file: PyTorch sends one
 * exported CUDA fd for every tensor of a segment. The held file lives as
 * long as the holder; the holder never reports a hang-up (a datagram
 * socket's peer going away leaves it be), so a store that drops hung-up
 * fds keeps it.
 */
#ifndef RDMAMEM_FDHOLD_H
#define RDMAMEM_FDHOLD_H

/* A new holder of fd (fd stays the caller's), close-on-exec. -errno. */
int fdhold_make(int fd, int *ret_holder);

/*
 * A new descriptor of the file holder holds, close-on-exec; the holder
 * keeps holding it (the message is peeked). -ENOTSOCK when holder is not
 * a socket (a file stored as itself), -ENOMSG when it holds nothing.
 */
int fdhold_peek(int holder, int *ret_fd);

#endif
