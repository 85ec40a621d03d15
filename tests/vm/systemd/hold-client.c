/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client that stays connected across a reload (run.sh's VM test): it
 * connects, pings, says "connected", waits until the file GO exists, then
 * pings again on the same connection and says whether the daemon still
 * answered.
 *
 *   hold-client GO [SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmamem.h>

#include "wait-file.h"

int main(int argc, char **argv)
{
	struct rdmamem_client *c = NULL;
	int r, limit = argc > 2 ? atoi(argv[2]) : 120;

	if (argc < 2) {
		fprintf(stderr, "usage: hold-client GO [SECONDS]\n");
		return 2;
	}
	r = rdmamem_client_connect(NULL, &c);
	if (r < 0) {
		fprintf(stderr, "hold-client: connect: %s\n", strerror(-r));
		return 1;
	}
	r = rdmamem_ping(c);
	if (r < 0) {
		fprintf(stderr, "hold-client: first ping: %s\n", strerror(-r));
		return 1;
	}
	printf("connected pid %d\n", (int)getpid());
	fflush(stdout);
	if (wait_file("hold-client", argv[1], limit))
		return 1;
	r = rdmamem_ping(c);
	if (r < 0) {
		fprintf(stderr, "hold-client: ping on the same connection failed: %s\n",
			strerror(-r));
		return 1;
	}
	printf("still answered on the same connection\n");
	rdmamem_client_close(c);
	return 0;
}
