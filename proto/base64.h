/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RFC 4648 base64: with padding and the standard alphabet, the encoding of
 * Read and Write payloads; base64url without padding (section 5), the
 * encoding of descriptors, which travel in URLs and on command lines.
 * Decoding is strict in both: one spelling per byte string.
 */
#ifndef RDMAMEM_BASE64_H
#define RDMAMEM_BASE64_H

#include <stddef.h>
#include <sys/types.h>

/* Length of the encoding of n bytes, without a terminator. */
static inline size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* The same without padding: a last group of 1 or 2 bytes takes 2 or 3 characters. */
static inline size_t base64url_encoded_len(size_t n)
{
	return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

/* Writes base64_encoded_len(n) characters and a NUL to out. */
void base64_encode(const void *in, size_t n, char *out);
/* Writes base64url_encoded_len(n) characters and a NUL to out. */
void base64url_encode(const void *in, size_t n, char *out);

/*
 * Checks text[0..len) (strict: padded, standard alphabet, no spaces) and
 * returns the decoded length, or -EINVAL.
 */
ssize_t base64_decoded_len(const char *text, size_t len);
/* The same for base64url: its alphabet ('-', '_'), no '=', and the unused
 * bits of a last partial group zero. */
ssize_t base64url_decoded_len(const char *text, size_t len);

/* Decodes text that base64_decoded_len() (base64url_decoded_len()) accepted into out. */
void base64_decode(const char *text, size_t len, void *out);
void base64url_decode(const char *text, size_t len, void *out);

#endif
