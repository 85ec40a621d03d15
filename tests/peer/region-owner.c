/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * region-owner: a client that owns one region and keeps it, for tests that
 * reach the region from another host (rdmamemctl only looks; it holds
 * nothing). It makes a memfd of --size bytes filled with --fill repeated,
 * registers it with the daemon at --socket and on each --device, makes an
 * access token, prints one line
 *
 *   region=ID fd=FD token=HEX DEVICE=ADDR/RKEY...
 *
 * and holds the connection (and so the region) until SIGTERM or SIGINT,
 * when it exits 0. fd is its own descriptor of the memfd: root on the same
 * host reads and writes the region's bytes at /proc/PID/fd/FD.
 *
 *   region-owner --socket PATH --device NAME [--device NAME]... --size BYTES
 *                --fill TEXT
 *
 * Exit status: 0 on a signal, 1 when any step fails (named on stderr).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "rdmamem.h"

#define DEVICES_MAX 8

static const char *arg_socket, *arg_fill;
static const char *arg_devices[DEVICES_MAX];
static size_t arg_n_devices, arg_size;

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 'S' },
		{ "fill", required_argument, NULL, 'f' },
		{},
	};
	char token[RDMAMEM_TOKEN_LEN + 1];
	struct rdmamem_client *client;
	struct rdmamem_registration reg;
	size_t fill_len;
	uint64_t region;
	sigset_t stop;
	char *map;
	int c, fd, r, sig;

	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 's':
			arg_socket = optarg;
			break;
		case 'd':
			if (arg_n_devices == DEVICES_MAX) {
				fprintf(stderr, "region-owner: at most %d devices\n", DEVICES_MAX);
				return 1;
			}
			arg_devices[arg_n_devices++] = optarg;
			break;
		case 'S':
			arg_size = strtoul(optarg, NULL, 0);
			break;
		case 'f':
			arg_fill = optarg;
			break;
		default:
			return 1;
		}
	}
	if (!arg_socket || !arg_n_devices || !arg_size || !arg_fill || !*arg_fill) {
		fprintf(stderr,
			"region-owner: usage: see the comment at the top of region-owner.c\n");
		return 1;
	}
	/* Blocked before the line goes out: a test may signal us as soon as
	 * it has read it. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, NULL);

	r = rdmamem_client_connect(arg_socket, &client);
	if (r < 0) {
		fprintf(stderr, "region-owner: connecting to %s: %s\n", arg_socket, strerror(-r));
		return 1;
	}
	r = rdmamem_memfd_create("region-owner", arg_size, &fd, (void **)&map);
	if (r < 0) {
		fprintf(stderr, "region-owner: memfd of %zu bytes: %s\n", arg_size, strerror(-r));
		return 1;
	}
	fill_len = strlen(arg_fill);
	for (size_t i = 0; i < arg_size; i += fill_len)
		memcpy(map + i, arg_fill, MIN(fill_len, arg_size - i));
	if (rdmamem_register(client, fd, 0, 0, &region) < 0 ||
	    rdmamem_access_token_create(client, token) < 0) {
		fprintf(stderr, "region-owner: %s: %s\n", rdmamem_client_error_name(client) ?: "",
			rdmamem_client_error_message(client) ?: "");
		return 1;
	}
	printf("region=%llu fd=%d token=%s", (unsigned long long)region, fd, token);
	for (size_t i = 0; i < arg_n_devices; i++) {
		if (rdmamem_register_on(client, region, arg_devices[i], &reg) < 0) {
			fprintf(stderr, "region-owner: RegisterOn %s: %s\n", arg_devices[i],
				rdmamem_client_error_message(client) ?: "");
			return 1;
		}
		printf(" %s=%llu/%u", arg_devices[i], (unsigned long long)reg.addr, reg.rkey);
	}
	printf("\n");
	fflush(stdout);

	sigwait(&stop, &sig);
	rdmamem_client_close(client);
	return 0;
}
