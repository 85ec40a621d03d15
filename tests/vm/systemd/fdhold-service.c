/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What rdmamemd relies on to keep a CUDA VMM region's files across a
 * restart, under the real systemd: a file held in flight by a socket of
 * its own (util/fdhold.h) stays in the service's fd store, twice over for
 * one open file, while the open file itself is kept once.
 *
 * First run (no LISTEN_FDS): a memfd with a pattern goes to the store as
 * held1 and held2 (two holders of it) and as raw1 and raw2 (the memfd
 * itself twice: one open file); then it exits 3, and Restart=on-failure
 * starts it again with the store. Second run: writes to RESULT one line
 * per fd it was given, "NAME held PATTERN" or "NAME file PATTERN", and
 * exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "util/fdhold.h"

#define PATTERN "fdhold-pattern"

static int store(const char *name, int fd)
{
	char msg[64];

	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	return sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
}

static int first_run(void)
{
	int file = memfd_create("fdhold", MFD_CLOEXEC), h1, h2;

	if (file < 0 || pwrite(file, PATTERN, strlen(PATTERN), 0) != (ssize_t)strlen(PATTERN) ||
	    fdhold_make(file, &h1) < 0 || fdhold_make(file, &h2) < 0)
		return 1;
	if (store("held1", h1) <= 0 || store("held2", h2) <= 0 || store("raw1", file) <= 0 ||
	    store("raw2", file) <= 0)
		return 1;
	return 3; /* a failure: systemd restarts it, store and all */
}

int main(int argc, char **argv)
{
	char **names = NULL;
	FILE *out;
	int n;

	if (argc != 2)
		return 2;
	n = sd_listen_fds_with_names(1, &names);
	if (n <= 0)
		return first_run();
	out = fopen(argv[1], "we");
	if (!out)
		return 1;
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i, file = -1;
		char buf[32] = "";
		const char *kind = "held";

		if (fdhold_peek(fd, &file) == -ENOTSOCK) {
			kind = "file";
			file = fd;
		}
		if (file >= 0 && pread(file, buf, sizeof(buf) - 1, 0) < 0)
			buf[0] = '\0';
		fprintf(out, "%s %s %s\n", names[i], kind, buf[0] ? buf : "-");
	}
	return fclose(out) == 0 ? 0 : 1;
}
