/* SPDX-License-Identifier: BSD-3-Clause */
/* Binary strings as hex digits: access tokens, GIDs, CUDA IPC handles. */
#ifndef RDMAMEM_HEX_H
#define RDMAMEM_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Decodes exactly 2 * n hex digits from hex (no more, no less) into out. */
int hex_decode(const char *hex, uint8_t *out, size_t n);
/* The four hex digits at p (a JSON \u escape's; p has at least four
 * bytes), as a value below 0x10000. -EBADMSG. */
int hex_u16(const char *p, uint32_t *ret);
/* Writes 2 * n lower-case digits and a NUL. */
void hex_encode(const uint8_t *in, size_t n, char *out);

#endif
