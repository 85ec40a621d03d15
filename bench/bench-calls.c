/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C side of the Python benchmark (bench/bench_python.py): times one
 * librdmamem call, or call pair, on a daemon that benchmark started, with
 * memory it made, so that each Python row has the very C call it wraps
 * beside it, measured in the same run. No daemon of its own.
 *
 *   bench-calls --socket PATH [--rounds N] ping
 *   bench-calls --socket PATH [--rounds N] memfd FD OFFSET LENGTH
 *   bench-calls --socket PATH [--rounds N] cuda-ipc HEX GPU OFFSET LENGTH
 *   bench-calls --socket PATH [--rounds N] copy LENGTH
 *   bench-calls --socket PATH [--rounds N] lock
 *
 * ping: rdmamem_ping(); memfd: rdmamem_register() + rdmamem_unregister() of
 * an inherited memfd's range; cuda-ipc: rdmamem_register_cuda_ipc() +
 * rdmamem_unregister() of a 64-byte CUipcMemHandle given in hex (the caller
 * keeps another region over the allocation registered, so the daemon's open
 * of it is shared and every round finds it cached); copy: rdmamem_copy() of
 * LENGTH bytes between two regions of its own (memfds it registers first);
 * lock: rdmamem_lock() + rdmamem_unlock(), exclusive, of a region of its own.
 * bench-instructions.py counts the daemon's instructions per round with it.
 *
 * Prints one line: "us p50 X mean Y rounds N" (microseconds per round), after
 * a tenth of the rounds as warm-up.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchlib.h"
#include "proto/hex.h"

enum op { OP_PING, OP_MEMFD, OP_CUDA_IPC, OP_COPY, OP_LOCK };

struct call {
	enum op op;
	int fd, gpu;
	uint64_t offset, length;
	uint64_t from, to; /* copy, lock: the regions it registered */
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE];
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int one_round(struct rdmamem_client *c, const struct call *k)
{
	uint64_t region;
	int r;

	switch (k->op) {
	case OP_PING:
		return rdmamem_ping(c);
	case OP_MEMFD:
		r = rdmamem_register(c, k->fd, k->offset, k->length, &region);
		break;
	case OP_CUDA_IPC:
		r = rdmamem_register_cuda_ipc(c, k->handle, k->gpu, k->offset, k->length, &region);
		break;
	case OP_COPY: {
		struct rdmamem_copy cp = { .from_region = k->from,
					   .to_region = k->to,
					   .length = k->length,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		return rdmamem_copy(c, &cp);
	}
	case OP_LOCK: {
		uint64_t lease;

		r = rdmamem_lock(c, k->from, RDMAMEM_LOCK_EXCLUSIVE, -1, &lease);
		return r < 0 ? r : rdmamem_unlock(c, lease);
	}
	default:
		return -EINVAL;
	}
	return r < 0 ? r : rdmamem_unregister(c, region);
}

/* copy and lock: two regions of max(length, 4096) bytes of its own. */
static int own_regions(struct rdmamem_client *c, struct call *k)
{
	uint64_t *ids[] = { &k->from, &k->to };
	uint64_t size = k->length > 4096 ? k->length : 4096;

	for (int i = 0; i < 2; i++) {
		int fd, r = rdmamem_memfd_create("bench-calls", size, &fd, NULL);

		if (r < 0)
			return r;
		r = rdmamem_register(c, fd, 0, 0, ids[i]);
		close(fd);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_call(int argc, char **argv, struct call *k)
{
	if (argc == 1 && strcmp(argv[0], "ping") == 0) {
		k->op = OP_PING;
		return 0;
	}
	if (argc == 4 && strcmp(argv[0], "memfd") == 0) {
		k->op = OP_MEMFD;
		k->fd = atoi(argv[1]);
		k->offset = strtoull(argv[2], NULL, 0);
		k->length = strtoull(argv[3], NULL, 0);
		return 0;
	}
	if (argc == 2 && strcmp(argv[0], "copy") == 0) {
		k->op = OP_COPY;
		k->length = strtoull(argv[1], NULL, 0);
		return k->length ? 0 : -EINVAL;
	}
	if (argc == 1 && strcmp(argv[0], "lock") == 0) {
		k->op = OP_LOCK;
		return 0;
	}
	if (argc == 5 && strcmp(argv[0], "cuda-ipc") == 0) {
		k->op = OP_CUDA_IPC;
		k->gpu = atoi(argv[2]);
		k->offset = strtoull(argv[3], NULL, 0);
		k->length = strtoull(argv[4], NULL, 0);
		return hex_decode(argv[1], k->handle, sizeof(k->handle));
	}
	return -EINVAL;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "rounds", required_argument, NULL, 'n' },
		{},
	};
	struct rdmamem_client *c = NULL;
	const char *socket = NULL;
	struct call k = { 0 };
	uint64_t *t, sum = 0;
	long rounds = 2000;
	int o, r;

	while ((o = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (o) {
		case 's':
			socket = optarg;
			break;
		case 'n':
			rounds = atol(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!socket || rounds < 1 || parse_call(argc - optind, argv + optind, &k) < 0) {
		fprintf(stderr, "Usage: bench-calls --socket PATH [--rounds N] "
				"ping | memfd FD OFFSET LENGTH | cuda-ipc HEX GPU OFFSET LENGTH | "
				"copy LENGTH | lock\n");
		return 2;
	}
	t = calloc(rounds, sizeof(*t));
	if (!t)
		return 1;
	r = rdmamem_client_connect(socket, &c);
	if (r < 0) {
		fprintf(stderr, "bench-calls: connect %s: %s\n", socket, strerror(-r));
		free(t);
		return 1;
	}
	if (k.op == OP_COPY || k.op == OP_LOCK) {
		r = own_regions(c, &k);
		if (r < 0) {
			fprintf(stderr, "bench-calls: regions: %s\n",
				rdmamem_client_error_message(c) ?: strerror(-r));
			rdmamem_client_close(c);
			free(t);
			return 1;
		}
	}
	for (long i = -rounds / 10; i < rounds; i++) {
		uint64_t t0 = bench_now_ns();

		r = one_round(c, &k);
		if (r < 0) {
			fprintf(stderr, "bench-calls: %s\n",
				rdmamem_client_error_message(c) ?: strerror(-r));
			break;
		}
		if (i >= 0) {
			t[i] = bench_now_ns() - t0;
			sum += t[i];
		}
	}
	rdmamem_client_close(c);
	if (r >= 0) {
		qsort(t, rounds, sizeof(*t), cmp_u64);
		printf("us p50 %.2f mean %.2f rounds %ld\n", t[rounds / 2] / 1e3,
		       sum / 1e3 / rounds, rounds);
	}
	free(t);
	return r < 0;
}
