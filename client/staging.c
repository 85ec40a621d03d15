/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staging region: a memfd of the connection's own, registered once and
 * mapped here, through which rdmamem_read() and rdmamem_write() move their
 * bytes as a Copy into or out of it instead of base64 on the socket.
 *
 * Why: a Write of 64 KiB as base64 is an 87 KiB message that the library
 * encodes, prints and sends, and the daemon reads, parses on its pool and
 * decodes; as a Copy it is one memcpy here, a message of 150 bytes and one
 * memcpy there (bench/bench-region.c's "staged" rows). It is the daemon's
 * protocol as it is: Register and Copy, so any daemon serves it.
 *
 * The region lives as long as the connection: the daemon drops it when the
 * connection closes, and rdmamem_client_close() unmaps this side. It counts
 * against the uid's pinned bytes like any region; when the daemon refuses
 * it (a quota, a cap on regions), the client says nothing and moves its
 * bytes as base64, as before.
 */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client-internal.h"
#include "staging.h"

int rdmamem__staging_get(struct rdmamem_client *c, struct rdmamem__staging **ret)
{
	struct rdmamem__staging *s = &c->staging;
	_cleanup_close_ int fd = -EBADF;
	void *map;
	int r;

	if (s->map) {
		*ret = s;
		return 1;
	}
	if (s->refused)
		return 0;
	r = rdmamem_memfd_create("rdmamem-staging", STAGING_SIZE, &fd, &map);
	if (r < 0) {
		s->refused = true;
		return 0;
	}
	/* The connection's own: not reclaimed after a restart (staging_done()
	 * forgets it), so not kept. */
	r = rdmamem__register_memfd(c, fd, 0, 0, false, &s->region);
	if (r < 0) {
		munmap(map, STAGING_SIZE);
		/* A connection that ended, or a call that timed out, is the
		 * caller's failure; a refusal only means "not this way". */
		if (c->dead || r == -ETIMEDOUT)
			return r;
		rdmamem__set_error(c, NULL, NULL);
		s->refused = true;
		return 0;
	}
	s->map = map;
	*ret = s;
	return 1;
}

void rdmamem__staging_done(struct rdmamem_client *c)
{
	if (c->staging.map)
		munmap(c->staging.map, STAGING_SIZE);
	c->staging = (struct rdmamem__staging){};
}
