/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The smallest rdmamemd client: a sealed memfd registered as a region,
 * written and read back through the daemon, then dropped.
 *
 *   cc hello-region.c $(pkg-config --cflags --libs rdmamem) -o hello-region
 *   ./hello-region [SOCKET]
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdmamem.h>

int main(int argc, char **argv)
{
	static const char text[] = "hello, region";
	struct rdmamem_client *c = NULL;
	char back[sizeof(text)] = "";
	uint64_t region;
	void *mem;
	int r, fd = -1;

	r = rdmamem_client_connect(argc > 1 ? argv[1] : NULL, &c);
	if (r < 0) {
		fprintf(stderr, "connect: %s\n", strerror(-r));
		return 1;
	}
	r = rdmamem_memfd_create("hello", 4096, &fd, &mem);
	if (r == 0)
		r = rdmamem_register(c, fd, 0, 0, &region);
	if (r == 0)
		r = rdmamem_write(c, region, 100, text, sizeof(text), RDMAMEM_LOCK_EXCLUSIVE, 0);
	if (r == 0)
		r = rdmamem_read(c, region, 100, back, sizeof(back), 0);
	if (r < 0) {
		fprintf(stderr, "%s (%s)\n", rdmamem_client_error_message(c),
			rdmamem_client_error_name(c) ?: strerror(-r));
	} else {
		/* The daemon wrote into the very memory this process maps. */
		printf("region %" PRIu64 ": %s, %s\n", region, back,
		       memcmp((char *)mem + 100, text, sizeof(text)) == 0 ? "shared" :
									    "NOT shared");
		r = rdmamem_unregister(c, region);
	}
	if (fd >= 0) {
		munmap(mem, 4096);
		close(fd);
	}
	rdmamem_client_close(c);
	return r < 0 ? 1 : 0;
}
