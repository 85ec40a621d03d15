/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client whose region outlives a restart of the daemon (test.sh, "restart
 * keeps regions"): it registers a 1 MiB memfd with a known pattern on
 * DEVICE, says "registered REGION rkey RKEY", waits until the file GO
 * exists (the test restarts the daemon meanwhile), then makes one call —
 * librdmamem reconnects and reclaims the region first — and says what came
 * back: "reclaimed REGION rkey RKEY" from the reclaim callback, "byte-exact"
 * when the daemon's copy of the region reads back the pattern, "new REGION
 * rkey RKEY" for a region registered after the restart. Exits 0 when all of
 * it held.
 *
 *   keep-client GO DEVICE [SECONDS]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdmamem.h>

#include "wait-file.h"

#define SIZE (1U << 20)

/* What the reclaim callback said of the region watched, and of the others. */
struct seen {
	uint64_t watch;
	unsigned calls, others, failed;
	int error;
	uint32_t rkey;
	char device[64];
};

static void on_reclaim(void *userdata, uint64_t region, int error,
		       const struct rdmamem_registration *regs, size_t n_regs)
{
	struct seen *s = userdata;

	if (error)
		s->failed++;
	if (region != s->watch) {
		s->others++;
		return;
	}
	s->calls++;
	s->error = error;
	for (size_t i = 0; i < n_regs; i++) {
		s->rkey = regs[i].rkey;
		snprintf(s->device, sizeof(s->device), "%s", regs[i].device);
	}
}

static int fail(struct rdmamem_client *c, const char *what, int r)
{
	fprintf(stderr, "keep-client: %s: %s (%s)\n", what, strerror(-r),
		c ? rdmamem_client_error_message(c) ?: "" : "");
	return 1;
}

/* A memfd of SIZE bytes (its mapping in *ret_map, when asked), registered
 * and registered on device: 0, or what failed was said. */
static int register_memfd(struct rdmamem_client *c, const char *name, const char *device,
			  int *ret_fd, unsigned char **ret_map, uint64_t *ret_region,
			  struct rdmamem_registration *ret_reg)
{
	int r;

	r = rdmamem_memfd_create(name, SIZE, ret_fd, (void **)ret_map);
	if (r < 0)
		return fail(c, "memfd", r);
	for (unsigned i = 0; ret_map && i < SIZE; i++)
		(*ret_map)[i] = (unsigned char)(i * 7 + 3);
	r = rdmamem_register(c, *ret_fd, 0, 0, ret_region);
	if (r < 0)
		return fail(c, "register", r);
	r = rdmamem_register_on(c, *ret_region, device, ret_reg);
	if (r < 0)
		return fail(c, "register on the device", r);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdmamem_client *c = NULL;
	struct rdmamem_registration reg;
	struct seen seen = {};
	uint64_t region, region_b, region2;
	unsigned char *map, *buf;
	int fd, fd2, r, limit = argc > 3 ? atoi(argv[3]) : 300;

	if (argc < 3) {
		fprintf(stderr, "usage: keep-client GO DEVICE [SECONDS]\n");
		return 2;
	}
	r = rdmamem_client_connect(NULL, &c);
	if (r < 0)
		return fail(NULL, "connect", r);
	rdmamem_client_on_reclaim(c, on_reclaim, &seen);
	if (register_memfd(c, "keep-client", argv[2], &fd, &map, &region, &reg))
		return 1;
	seen.watch = region;
	/* A second region over the same fd: systemd keeps one fd per open
	 * file, so the daemon must store a file of its own for each. */
	r = rdmamem_register(c, fd, 0, SIZE / 2, &region_b);
	if (r < 0)
		return fail(c, "register a second region of the memfd", r);
	printf("registered %" PRIu64 " rkey %" PRIu32 "\n", region, reg.rkey);
	fflush(stdout);

	if (wait_file("keep-client", argv[1], limit))
		return 1;

	buf = malloc(SIZE);
	if (!buf)
		return 1;
	/* The first call after the restart: the library reconnects and
	 * reclaims before it goes out. */
	r = rdmamem_read(c, region, 0, buf, SIZE, 0);
	if (r < 0)
		return fail(c, "read after the restart", r);
	if (seen.calls != 1 || seen.error || seen.others != 1 || seen.failed || !seen.device[0]) {
		fprintf(stderr,
			"keep-client: reclaim callback: %u calls for region %" PRIu64
			", error %d, device '%s'; %u for the other, %u failed\n",
			seen.calls, region, seen.error, seen.device, seen.others, seen.failed);
		return 1;
	}
	printf("reclaimed %" PRIu64 " rkey %" PRIu32 " on %s, and %" PRIu64 "\n", region, seen.rkey,
	       seen.device, region_b);
	if (memcmp(buf, map, SIZE) != 0) {
		fprintf(stderr, "keep-client: the region's bytes differ after the restart\n");
		return 1;
	}
	printf("byte-exact\n");
	/* The daemon maps the client's pages, not a copy. */
	memcpy(map, "after", 5);
	r = rdmamem_read(c, region, 0, buf, 5, 0);
	if (r < 0 || memcmp(buf, "after", 5) != 0)
		return fail(c, "read of a write after the restart", r < 0 ? r : -EIO);
	r = rdmamem_register_on(c, region, argv[2], &reg);
	if (r < 0 || reg.rkey != seen.rkey)
		return fail(c, "the registration in force after the reclaim", r < 0 ? r : -EIO);

	/* A region registered after the restart. */
	if (register_memfd(c, "keep-client-new", argv[2], &fd2, NULL, &region2, &reg))
		return 1;
	printf("new %" PRIu64 " rkey %" PRIu32 "\n", region2, reg.rkey);
	free(buf);
	munmap(map, SIZE);
	close(fd);
	close(fd2);
	rdmamem_client_close(c);
	return 0;
}
