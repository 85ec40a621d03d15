/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdint.h>

#include "proto/base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 0..63 for alphabet characters, 64 for anything else; built at load time
 * so that decoding needs no locking. */
static uint8_t reverse[256];

__attribute__((constructor)) static void build_reverse(void)
{
	for (int i = 0; i < 256; i++)
		reverse[i] = 64;
	for (int i = 0; i < 64; i++)
		reverse[(uint8_t)alphabet[i]] = (uint8_t)i;
}

void base64_encode(const void *in, size_t n, char *out)
{
	const uint8_t *p = in;
	size_t i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		*out++ = alphabet[v >> 18];
		*out++ = alphabet[(v >> 12) & 63];
		*out++ = alphabet[(v >> 6) & 63];
		*out++ = alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		*out++ = alphabet[v >> 18];
		*out++ = alphabet[(v >> 12) & 63];
		*out++ = '=';
		*out++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		*out++ = alphabet[v >> 18];
		*out++ = alphabet[(v >> 12) & 63];
		*out++ = alphabet[(v >> 6) & 63];
		*out++ = '=';
	}
	*out = '\0';
}

ssize_t base64_decoded_len(const char *text, size_t len)
{
	const uint8_t *t = reverse;
	size_t pad = 0;

	if (len % 4)
		return -EINVAL;
	if (len >= 1 && text[len - 1] == '=')
		pad++;
	if (len >= 2 && text[len - 2] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++)
		if (t[(uint8_t)text[i]] == 64)
			return -EINVAL;
	/* Padding bits must be zero: one spelling per byte string. */
	if (pad == 1 && (t[(uint8_t)text[len - 2]] & 3))
		return -EINVAL;
	if (pad == 2 && (t[(uint8_t)text[len - 3]] & 15))
		return -EINVAL;
	return (ssize_t)(len / 4 * 3 - pad);
}

void base64_decode(const char *text, size_t len, void *out)
{
	const uint8_t *t = reverse;
	uint8_t *o = out;
	size_t i;

	for (i = 0; i + 4 <= len; i += 4) {
		uint32_t v = (uint32_t)t[(uint8_t)text[i]] << 18 | (uint32_t)t[(uint8_t)text[i + 1]]
									   << 12;

		*o++ = v >> 16;
		if (text[i + 2] == '=')
			break;
		v |= (uint32_t)t[(uint8_t)text[i + 2]] << 6;
		*o++ = (v >> 8) & 0xff;
		if (text[i + 3] == '=')
			break;
		v |= t[(uint8_t)text[i + 3]];
		*o++ = v & 0xff;
	}
}
