/* SPDX-License-Identifier: BSD-3-Clause */
/* RFC 4648 base64 with padding: the encoding of Read and Write payloads. */
#ifndef RDMAMEM_BASE64_H
#define RDMAMEM_BASE64_H

#include <stddef.h>
#include <sys/types.h>

/* Length of the encoding of n bytes, without a terminator. */
static inline size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Writes base64_encoded_len(n) characters and a NUL to out. */
void base64_encode(const void *in, size_t n, char *out);

/*
 * Checks text[0..len) (strict: padded, standard alphabet, no spaces) and
 * returns the decoded length, or -EINVAL.
 */
ssize_t base64_decoded_len(const char *text, size_t len);

/* Decodes text that base64_decoded_len() accepted into out. */
void base64_decode(const char *text, size_t len, void *out);

#endif
