/* SPDX-License-Identifier: BSD-3-Clause */
/* Little-endian integers of n bytes (1 to 8) in byte buffers: the records
 * daemons exchange (descriptors, notifications) are little-endian whatever
 * the host is. */
#ifndef RDMAMEMD_LE_H
#define RDMAMEMD_LE_H

#include <stddef.h>
#include <stdint.h>

static inline void le_put(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t le_get(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#endif
