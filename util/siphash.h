/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SipHash-2-4: a keyed 64-bit hash for tables whose keys a client chooses.
 * Without the key nobody can make keys collide on purpose, and the table's
 * timing says nothing about the keys it holds.
 */
#ifndef RDMAMEM_SIPHASH_H
#define RDMAMEM_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_SIZE 16

uint64_t siphash24(const void *data, size_t len, const uint8_t key[SIPHASH_KEY_SIZE]);

/* A key of this process, drawn from the kernel once (thread-safe). */
const uint8_t *siphash_process_key(void);

#endif
