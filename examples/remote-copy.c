/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Copies a region from one host to another through the daemons: no verbs
 * in the client, the daemon posts the RDMA READs on its own queue pairs.
 *
 * On the host that has the bytes:
 *
 *   remote-copy export SOCKET DEVICE SIZE
 *
 * fills SIZE bytes, registers them on DEVICE, exports the region and
 * prints its descriptor and checksum, then keeps it exported until
 * killed (the descriptor dies with this connection). On the other host:
 *
 *   remote-copy import SOCKET DEVICE DESCRIPTOR [CHECKSUM]
 *
 * registers a local region of the remote's size on DEVICE, READs the whole
 * remote region into it with one Transfer and prints its checksum; with
 * CHECKSUM, exits 1 unless they match. SOCKET "-": the default socket.
 *
 *   cc remote-copy.c $(pkg-config --cflags --libs rdmamem) -o remote-copy
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdmamem.h>

/* FNV-1a, 64 bits: enough to tell a faithful copy. */
static uint64_t checksum(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static int fail(struct rdmamem_client *c, const char *what, int r)
{
	fprintf(stderr, "remote-copy: %s: %s%s%s\n", what, strerror(-r), c ? ": " : "",
		c ? rdmamem_client_error_message(c) : "");
	return 1;
}

/* A memfd region of size bytes registered on device; its mapping in *ret_mem. */
static int region_on(struct rdmamem_client *c, const char *device, size_t size, uint64_t *ret,
		     uint8_t **ret_mem)
{
	struct rdmamem_registration reg;
	void *mem;
	int fd, r;

	r = rdmamem_memfd_create("remote-copy", size, &fd, &mem);
	if (r < 0)
		return fail(NULL, "memfd", r);
	r = rdmamem_register(c, fd, 0, 0, ret);
	close(fd);
	if (r < 0)
		return fail(c, "Register", r);
	r = rdmamem_register_on(c, *ret, device, &reg);
	if (r < 0)
		return fail(c, "RegisterOn", r);
	*ret_mem = mem;
	return 0;
}

static int do_export(struct rdmamem_client *c, const char *device, const char *size_arg)
{
	size_t size = strtoull(size_arg, NULL, 0);
	char *desc = NULL;
	uint64_t region;
	uint8_t *mem;
	int r;

	if (size == 0)
		return fail(NULL, "SIZE", -EINVAL);
	if (region_on(c, device, size, &region, &mem))
		return 1;
	for (size_t i = 0; i < size; i++)
		mem[i] = (uint8_t)(i * 2654435761U >> 13);
	r = rdmamem_region_export(c, region, NULL, &desc, NULL, NULL);
	if (r < 0)
		return fail(c, "ExportRegion", r);
	printf("descriptor %s\nchecksum %" PRIu64 "\n", desc, checksum(mem, size));
	fflush(stdout);
	free(desc);
	/* Exported while this connection lives. */
	for (;;)
		pause();
}

/* A decimal string field of a JSON reply ("name":"123"): 64-bit values
 * travel as strings. */
static int reply_u64(const char *reply, const char *name, uint64_t *ret)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\":\"", name);
	p = strstr(reply, key);
	if (!p)
		return -EPROTO;
	*ret = strtoull(p + strlen(key), NULL, 10);
	return 0;
}

static int do_import(struct rdmamem_client *c, const char *device, const char *desc,
		     const char *expect)
{
	struct rdmamem_transfer_op op = { .op = RDMAMEM_TRANSFER_READ };
	char *params = NULL, *reply = NULL;
	uint64_t remote, length, bytes = 0, sum;
	uint8_t *mem;
	int r;

	/* ImportRemote by hand: its reply says the remote region's length,
	 * which rdmamem_remote_import() does not return. */
	if (asprintf(&params, "{\"descriptor\":\"%s\"}", desc) < 0)
		return fail(NULL, "asprintf", -ENOMEM);
	r = rdmamem_call(c, "io.rdmamemd.ImportRemote", params, NULL, 0, &reply, NULL, NULL);
	free(params);
	if (r < 0)
		return fail(c, "ImportRemote", r);
	if (reply_u64(reply, "remote", &remote) < 0 || reply_u64(reply, "length", &length) < 0) {
		free(reply);
		return fail(NULL, "ImportRemote's reply", -EPROTO);
	}
	free(reply);
	if (region_on(c, device, length, &op.region, &mem))
		return 1;
	op.remote = remote;
	op.length = length;
	r = rdmamem_transfer(c, &op, 1, NULL, NULL, &bytes);
	if (r < 0)
		return fail(c, "Transfer", r);
	sum = checksum(mem, length);
	printf("copied %" PRIu64 " bytes, checksum %" PRIu64, bytes, sum);
	if (expect && strtoull(expect, NULL, 10) != sum) {
		printf("\n");
		fprintf(stderr, "remote-copy: checksum mismatch: expected %s\n", expect);
		return 1;
	}
	printf("%s\n", expect ? ": checksum ok" : "");
	return 0;
}

int main(int argc, char **argv)
{
	struct rdmamem_client *c = NULL;
	int r;

	if (argc < 5 || (strcmp(argv[1], "export") != 0 && strcmp(argv[1], "import") != 0)) {
		fprintf(stderr, "usage: remote-copy export SOCKET DEVICE SIZE\n"
				"       remote-copy import SOCKET DEVICE DESCRIPTOR [CHECKSUM]\n");
		return 2;
	}
	r = rdmamem_client_connect(strcmp(argv[2], "-") ? argv[2] : NULL, &c);
	if (r < 0)
		return fail(NULL, "connect", r);
	/* A large region crosses slow links: give the reply time. */
	rdmamem_client_set_timeout(c, 600000);
	if (strcmp(argv[1], "export") == 0)
		r = do_export(c, argv[3], argv[4]);
	else
		r = do_import(c, argv[3], argv[4], argc > 5 ? argv[5] : NULL);
	rdmamem_client_close(c);
	return r;
}
