/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzz targets: each file defines LLVMFuzzerTestOneInput. Built with clang
 * and libFuzzer by `make fuzz`; built with gcc and fuzz-main.c by `make
 * check`, which replays tests/fuzz/corpus/<target>/ so that every input
 * the fuzzers ever found stays a regression test.
 */
#ifndef RDMAMEM_FUZZ_H
#define RDMAMEM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* libFuzzer calls these by name: visible whatever -fvisibility says. */
#define FUZZ_EXPORT __attribute__((visibility("default")))

FUZZ_EXPORT int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
FUZZ_EXPORT int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * A broken invariant: abort so that libFuzzer (or the replay) reports the
 * input with a stack trace. Not assert(): it must hold in every build.
 */
#define fuzz_check(cond)                                                                          \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", __FILE__, __LINE__, \
				#cond);                                                           \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

#endif
