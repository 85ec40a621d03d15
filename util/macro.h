/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Small helpers shared by the daemon, the client library and the tests:
 * scope cleanup (systemd's _cleanup_ idea), ownership transfer and fd
 * hygiene. Never included from the public header.
 */
#ifndef RDMAMEM_MACRO_H
#define RDMAMEM_MACRO_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _public_ __attribute__((visibility("default")))
#define _warn_unused_ __attribute__((warn_unused_result))

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#include <sys/param.h> /* MIN and MAX, as libuv pulls it in anyway */

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Hand a pointer or fd out of a _cleanup_ scope: the variable is reset so
 * the cleanup handler does nothing. */
#define TAKE_PTR(p)                      \
	({                               \
		__typeof__(p) _p_ = (p); \
		(p) = NULL;              \
		_p_;                     \
	})
#define TAKE_FD(fd)              \
	({                       \
		int _fd_ = (fd); \
		(fd) = -EBADF;   \
		_fd_;            \
	})

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
	static inline void func##p(type *p)     \
	{                                       \
		if (*p)                         \
			func(*p);               \
	}

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Closes fd if it is valid, keeps errno intact and returns -EBADF so that
 * callers can write "fd = safe_close(fd);". */
static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;

		close(fd);
		errno = saved;
	}
	return -EBADF;
}

static inline void closep(int *fd)
{
	safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void close_many(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fds[i] = safe_close(fds[i]);
}

/* errno of a failed libc call, never 0: some paths (short writes, EOF) leave
 * errno untouched. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

#endif
