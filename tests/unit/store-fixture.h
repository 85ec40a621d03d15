/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in for systemd's fd store, for the unit suites of regions kept
 * across a restart (check_keep.c, check_gpu_unit.c): put (one fd per open
 * file, as systemd keeps them), remove by name, and what the next process
 * is passed. The real one runs in make
 * vmsystemd, a stand-in over a real notify socket in
 * tests/python/test_restart.py.
 */
#ifndef RDMAMEMD_TESTS_STORE_FIXTURE_H
#define RDMAMEMD_TESTS_STORE_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/kcmp.h>

#include <check.h>

#include "daemon/mem/keep.h"

#define STORE_FIXTURE_MAX 64

/* The stand-in store: each name with a duplicate of its fd. */
struct store {
	char *names[STORE_FIXTURE_MAX];
	int fds[STORE_FIXTURE_MAX];
	size_t n;
	unsigned puts, removes;
	bool refuse; /* put fails, as a notify socket that is gone */
};

/* As systemd: an fd of an open file the store holds already is dropped
 * without a word ("Suppressing duplicate fd in fd store"). */
static inline bool store_holds_file(const struct store *s, int fd)
{
	pid_t pid = getpid();

	for (size_t i = 0; i < s->n; i++)
		if (syscall(SYS_kcmp, pid, pid, KCMP_FILE, s->fds[i], fd) == 0)
			return true;
	return false;
}

static inline int store_put(void *userdata, const char *name, int fd)
{
	struct store *s = userdata;

	if (s->n == STORE_FIXTURE_MAX || s->refuse)
		return -ECONNREFUSED;
	if (store_holds_file(s, fd)) {
		s->puts++;
		return 0;
	}
	s->names[s->n] = strdup(name);
	s->fds[s->n] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	ck_assert(s->names[s->n] && s->fds[s->n] >= 0);
	s->n++;
	s->puts++;
	return 0;
}

static inline int store_remove(void *userdata, const char *name)
{
	struct store *s = userdata;

	s->removes++;
	for (size_t i = 0; i < s->n;)
		if (strcmp(s->names[i], name) == 0) {
			free(s->names[i]);
			close(s->fds[i]);
			s->names[i] = s->names[--s->n];
			s->fds[i] = s->fds[s->n];
		} else {
			i++;
		}
	return 0;
}

static const struct keep_store_ops store_ops = {
	.put = store_put,
	.remove = store_remove,
};

static inline size_t store_count(const struct store *s, const char *prefix)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		n += strncmp(s->names[i], prefix, strlen(prefix)) == 0;
	return n;
}

static inline void store_done(struct store *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->names[i]);
		close(s->fds[i]);
	}
	s->n = 0;
}

/* What systemd passes the next process: each name with its own fd. */
static inline struct keep_passed *store_pass(const struct store *s)
{
	struct keep_passed *p = calloc(s->n + 1, sizeof(*p));

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < s->n; i++) {
		p[i].name = strdup(s->names[i]);
		p[i].fd = fcntl(s->fds[i], F_DUPFD_CLOEXEC, 3);
	}
	return p;
}

static inline void passed_free(struct keep_passed *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_lt(p[i].fd, 0); /* every fd taken */
		free(p[i].name);
	}
	free(p);
}

#endif
