/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The VM test's clients wait for test.sh to create a file (GO) after it
 * restarted or reloaded the daemon under them.
 */
#ifndef RDMAMEMD_VMSYSTEMD_WAIT_FILE_H
#define RDMAMEMD_VMSYSTEMD_WAIT_FILE_H

#include <stdio.h>
#include <unistd.h>

/* 0 once path exists; 1, said on stderr as who, after seconds without it. */
static inline int wait_file(const char *who, const char *path, int seconds)
{
	for (int waited = 0; access(path, F_OK) < 0; waited++) {
		if (waited >= seconds * 10) {
			fprintf(stderr, "%s: %s did not appear in %d s\n", who, path, seconds);
			return 1;
		}
		usleep(100000);
	}
	return 0;
}

#endif
