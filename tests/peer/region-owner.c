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
 * --export adds " export=ID xtoken=HEX descriptor=TEXT" to the line: the
 * region exported (ExportRegion) on its devices, for another host's
 * daemon to Transfer to and from; xtoken is the export's own token. Then
 * SIGHUP revokes that token and SIGUSR1 unregisters the region, each
 * printing a line ("revoked", "unregistered") once done, so that a test
 * can end a remote peer's access in the middle of its transfer.
 *
 * --await-notify N waits, after the line, for N notifications into the
 * export (up to 120 s for each) and prints one line each,
 *
 *   notified len=LEN data=TEXT fnv=HEX
 *
 * fnv being FNV-1a 64 of the whole region when it arrived: a notification
 * must come after the data of its transfer, so the bytes are in place by
 * then. "notified none" when one did not come in time.
 *
 * --read-from DESCRIPTOR plays a client of this host reading another's
 * export: before the line goes out, the whole region is read (Transfer
 * READ) from the descriptor's region at offset 0, and the line gets
 * " read=BYTES fnv=HEX", FNV-1a 64 of the region after the read.
 *
 *   region-owner --socket PATH --device NAME [--device NAME]... --size BYTES
 *                --fill TEXT [--export] [--read-from DESCRIPTOR] [--await-notify N]
 *
 * Exit status: 0 on SIGTERM or SIGINT, 1 when any step fails (named on
 * stderr).
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "rdmamem.h"

#define DEVICES_MAX 8

static const char *arg_socket, *arg_fill, *arg_read_from;
static const char *arg_devices[DEVICES_MAX];
static size_t arg_n_devices, arg_size;
static unsigned arg_await_notify;
static bool arg_export;

static int fail(struct rdmamem_client *client, const char *what)
{
	fprintf(stderr, "region-owner: %s: %s: %s\n", what, rdmamem_client_error_name(client) ?: "",
		rdmamem_client_error_message(client) ?: "");
	return 1;
}

/* FNV-1a, 64 bits: what a test on the other host compares with its own. */
static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/* Each notification as it arrives, with the region's hash then. */
static int await_notify(struct rdmamem_client *client, const char *map)
{
	static struct rdmamem_notification n;

	for (unsigned i = 0; i < arg_await_notify; i++) {
		int r = rdmamem_notifications_wait(client, 120000, &n, 1);
		uint64_t h;

		if (r < 0)
			return fail(client, "WaitNotifications");
		if (r == 0) {
			printf("notified none\n");
			fflush(stdout);
			continue;
		}
		/* Hashed at once: the bytes as they were when it came. */
		h = fnv1a((const unsigned char *)map, arg_size);
		printf("notified len=%zu data=%.*s fnv=%016llx\n", n.len, (int)n.len,
		       (const char *)n.data, (unsigned long long)h);
		fflush(stdout);
	}
	return 0;
}

/* The whole region from the descriptor's region at offset 0. */
static int read_from(struct rdmamem_client *client, uint64_t region, const char *map)
{
	struct rdmamem_transfer_op op = { .op = RDMAMEM_TRANSFER_READ,
					  .region = region,
					  .length = arg_size };
	uint64_t bytes = 0;

	if (rdmamem_remote_import(client, arg_read_from, &op.remote) < 0)
		return fail(client, "ImportRemote");
	if (rdmamem_transfer(client, &op, 1, NULL, NULL, &bytes) < 0)
		return fail(client, "Transfer");
	printf(" read=%llu fnv=%016llx", (unsigned long long)bytes,
	       (unsigned long long)fnv1a((const unsigned char *)map, arg_size));
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 'S' },
		{ "fill", required_argument, NULL, 'f' },
		{ "export", no_argument, NULL, 'e' },
		{ "read-from", required_argument, NULL, 'r' },
		{ "await-notify", required_argument, NULL, 'n' },
		{},
	};
	char token[RDMAMEM_TOKEN_LEN + 1], xtoken[RDMAMEM_TOKEN_LEN + 1];
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
		case 'e':
			arg_export = true;
			break;
		case 'r':
			arg_read_from = optarg;
			break;
		case 'n':
			arg_await_notify = (unsigned)strtoul(optarg, NULL, 0);
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
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGUSR1);
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
	if (arg_export) {
		char *desc;
		uint64_t id;

		if (rdmamem_region_export(client, region, NULL, &desc, xtoken, &id) < 0)
			return fail(client, "ExportRegion");
		printf(" export=%llu xtoken=%s descriptor=%s", (unsigned long long)id, xtoken,
		       desc);
		free(desc);
	}
	if (arg_read_from && read_from(client, region, map))
		return 1;
	printf("\n");
	fflush(stdout);
	if (arg_await_notify && await_notify(client, map))
		return 1;

	for (;;) {
		sigwait(&stop, &sig);
		if (sig == SIGHUP && arg_export) {
			if (rdmamem_access_token_revoke(client, xtoken) < 0)
				return fail(client, "RevokeAccessToken");
			printf("revoked\n");
		} else if (sig == SIGUSR1) {
			if (rdmamem_unregister(client, region) < 0)
				return fail(client, "Unregister");
			printf("unregistered\n");
		} else if (sig == SIGTERM || sig == SIGINT) {
			break;
		}
		fflush(stdout);
	}
	rdmamem_client_close(client);
	return 0;
}
