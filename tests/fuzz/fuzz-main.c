/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replays inputs through LLVMFuzzerTestOneInput without libFuzzer (systemd's
 * fuzz-main.c idea): `make check` runs each target over its corpus under
 * gcc, so a crasher once found keeps being tested on every build.
 *
 *   fuzz-replay-TARGET FILE|DIR...
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Targets without an initialiser get this one. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "re");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		size_t n;

		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	/* libFuzzer hands out exactly size bytes: a copy of that size lets
	 * ASan see a read past the end. */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact)
			abort();
		memcpy(exact, buf, len);
		free(buf);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Directory entries in name order, so runs are reproducible. */
static int replay_dir(const char *dir, unsigned *n)
{
	struct dirent *de;
	char **names = NULL;
	size_t count = 0;
	DIR *d = opendir(dir);
	int r = 0;

	if (!d) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, (count + 1) * sizeof(*names));
		if (!names || !(names[count] = strdup(de->d_name)))
			abort();
		count++;
	}
	closedir(d);
	if (count)
		qsort(names, count, sizeof(*names), by_name);
	for (size_t i = 0; i < count; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (replay_file(path) < 0)
			r = -1;
		else
			(*n)++;
		free(names[i]);
	}
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	unsigned n = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return EXIT_FAILURE;
		}
		if (S_ISDIR(st.st_mode) ? replay_dir(argv[i], &n) < 0 : replay_file(argv[i]) < 0)
			return EXIT_FAILURE;
		if (!S_ISDIR(st.st_mode))
			n++;
	}
	printf("%s: %u inputs replayed, no invariant broken\n", argv[0], n);
	return EXIT_SUCCESS;
}
