/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proto/base64.h"

/* One of the two encodings: its alphabet, and whether it pads with '='. */
struct base64_code {
	const char *alphabet;
	bool pad;
	/* 0..63 for alphabet characters, 64 for anything else; and the two
	 * characters of every 12 bits, in memory order. Built at load time, so
	 * that neither needs locking. */
	uint8_t reverse[256];
	uint16_t pairs[4096];
};

static struct base64_code standard = {
	.alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
	.pad = true,
};
static struct base64_code url = {
	.alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
};

static void build_reverse(struct base64_code *c)
{
	for (int i = 0; i < 256; i++)
		c->reverse[i] = 64;
	for (int i = 0; i < 64; i++)
		c->reverse[(uint8_t)c->alphabet[i]] = (uint8_t)i;
	for (int i = 0; i < 4096; i++) {
		char two[2] = { c->alphabet[i >> 6], c->alphabet[i & 63] };

		memcpy(&c->pairs[i], two, 2);
	}
}

__attribute__((constructor)) static void build_reverses(void)
{
	build_reverse(&standard);
	build_reverse(&url);
}

static void encode(const struct base64_code *c, const void *in, size_t n, char *out)
{
	const char *a = c->alphabet;
	const uint8_t *p = in;
	size_t i = 0;

	/* Three bytes, four characters: two lookups of twelve bits each. */
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		memcpy(out, &c->pairs[v >> 12], 2);
		memcpy(out + 2, &c->pairs[v & 4095], 2);
		out += 4;
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;

		*out++ = a[v >> 18];
		*out++ = a[(v >> 12) & 63];
		if (c->pad) {
			*out++ = '=';
			*out++ = '=';
		}
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;

		*out++ = a[v >> 18];
		*out++ = a[(v >> 12) & 63];
		*out++ = a[(v >> 6) & 63];
		if (c->pad)
			*out++ = '=';
	}
	*out = '\0';
}

void base64_encode(const void *in, size_t n, char *out)
{
	encode(&standard, in, n, out);
}

void base64url_encode(const void *in, size_t n, char *out)
{
	encode(&url, in, n, out);
}

/* The characters of text that carry data: without the padding, if any. */
static size_t data_len(const struct base64_code *c, const char *text, size_t len)
{
	if (c->pad && len >= 1 && text[len - 1] == '=') {
		len--;
		if (len >= 1 && text[len - 1] == '=')
			len--;
	}
	return len;
}

static ssize_t decoded_len(const struct base64_code *c, const char *text, size_t len)
{
	size_t data = data_len(c, text, len), tail = data % 4;
	uint8_t seen = 0;

	/* Padded: whole groups only. A group of one character holds no byte. */
	if ((c->pad && len % 4) || tail == 1)
		return -EINVAL;
	/* Any character outside the alphabet sets bit 6 (64), which no
	 * alphabet character's value has: one test for the whole text. */
	for (size_t i = 0; i < data; i++)
		seen |= c->reverse[(uint8_t)text[i]];
	if (seen & 64)
		return -EINVAL;
	/* The bits past the last byte must be zero: one spelling per byte string. */
	if (tail == 2 && (c->reverse[(uint8_t)text[data - 1]] & 15))
		return -EINVAL;
	if (tail == 3 && (c->reverse[(uint8_t)text[data - 1]] & 3))
		return -EINVAL;
	return (ssize_t)(data / 4 * 3 + (tail ? tail - 1 : 0));
}

ssize_t base64_decoded_len(const char *text, size_t len)
{
	return decoded_len(&standard, text, len);
}

ssize_t base64url_decoded_len(const char *text, size_t len)
{
	return decoded_len(&url, text, len);
}

static void decode(const struct base64_code *c, const char *text, size_t len, void *out)
{
	const uint8_t *t = c->reverse;
	size_t data = data_len(c, text, len), i;
	uint8_t *o = out;
	uint32_t v;

	for (i = 0; i + 4 <= data; i += 4) {
		v = (uint32_t)t[(uint8_t)text[i]] << 18 | (uint32_t)t[(uint8_t)text[i + 1]] << 12 |
		    (uint32_t)t[(uint8_t)text[i + 2]] << 6 | t[(uint8_t)text[i + 3]];
		*o++ = v >> 16;
		*o++ = (v >> 8) & 0xff;
		*o++ = v & 0xff;
	}
	if (data - i < 2)
		return;
	v = (uint32_t)t[(uint8_t)text[i]] << 18 | (uint32_t)t[(uint8_t)text[i + 1]] << 12;
	*o++ = v >> 16;
	if (data - i == 3) {
		v |= (uint32_t)t[(uint8_t)text[i + 2]] << 6;
		*o++ = (v >> 8) & 0xff;
	}
}

void base64_decode(const char *text, size_t len, void *out)
{
	decode(&standard, text, len, out);
}

void base64url_decode(const char *text, size_t len, void *out)
{
	decode(&url, text, len, out);
}
