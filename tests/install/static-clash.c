// SPDX-License-Identifier: BSD-3-Clause
/*
 * A client with functions of its own named like librdmamem's insides
 * (json_parse, base64_encode, sockio_send), linked against the installed
 * static archive (tests/installcheck.sh). With those names global in the
 * archive the link fails ("multiple definition"), or the library calls
 * ours; so it must link, and each side must run its own: the library
 * parses the daemon's replies and base64-encodes a small write.
 *
 *   static-clash SOCKET    prints "static-clash: ok" and exits 0
 */
#include <rdmamem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Signatures unlike the library's, so that a call crossing over shows. */
int json_parse(const char *text);
int base64_encode(void);
int sockio_send(int x);

int json_parse(const char *text)
{
	return (int)strlen(text);
}

int base64_encode(void)
{
	return 64;
}

int sockio_send(int x)
{
	return x + 1;
}

static int fail(struct rdmamem_client *c, const char *what, int r)
{
	fprintf(stderr, "static-clash: %s: %s (%s)\n", what, strerror(-r),
		c && rdmamem_client_error_message(c) ? rdmamem_client_error_message(c) : "");
	return 1;
}

int main(int argc, char **argv)
{
	struct rdmamem_client *c = NULL;
	char *reply = NULL, back[6] = "";
	uint64_t region;
	void *addr;
	int r, fd;

	if (argc != 2) {
		fprintf(stderr, "usage: static-clash SOCKET\n");
		return 2;
	}
	r = rdmamem_client_connect(argv[1], &c);
	if (r < 0)
		return fail(c, "connect", r);
	r = rdmamem_call(c, "io.rdmamemd.GetStatus", NULL, NULL, 0, &reply, NULL, NULL);
	if (r < 0)
		return fail(c, "GetStatus", r);
	if (!strstr(reply, "\"version\"")) {
		fprintf(stderr, "static-clash: GetStatus said %s\n", reply);
		return 1;
	}
	r = rdmamem_memfd_create("static-clash", 4096, &fd, &addr);
	if (r < 0)
		return fail(c, "memfd", r);
	r = rdmamem_register(c, fd, 0, 0, &region);
	if (r < 0)
		return fail(c, "register", r);
	/* Below 4 KiB the bytes travel as base64 in the Write and Read calls. */
	r = rdmamem_write(c, region, 0, "hello", 5, RDMAMEM_LOCK_EXCLUSIVE, 0);
	if (r < 0)
		return fail(c, "write", r);
	r = rdmamem_read(c, region, 0, back, 5, 0);
	if (r < 0)
		return fail(c, "read", r);
	if (strcmp(back, "hello") || memcmp(addr, "hello", 5)) {
		fprintf(stderr, "static-clash: read back '%s'\n", back);
		return 1;
	}
	if (json_parse("abc") != 3 || base64_encode() != 64 || sockio_send(1) != 2) {
		fprintf(stderr, "static-clash: our own functions answered wrong\n");
		return 1;
	}
	free(reply);
	munmap(addr, 4096);
	close(fd);
	rdmamem_client_close(c);
	printf("static-clash: ok\n");
	return 0;
}
