/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "proto/hex.h"

static int digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hex_decode(const char *hex, uint8_t *out, size_t n)
{
	/* Bounded: hex may be megabytes of a client's message. */
	if (strnlen(hex, 2 * n + 1) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int hex_u16(const char *p, uint32_t *ret)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		int d = digit(p[i]);

		if (d < 0)
			return -EBADMSG;
		v = v << 4 | (uint32_t)d;
	}
	*ret = v;
	return 0;
}

void hex_encode(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}
