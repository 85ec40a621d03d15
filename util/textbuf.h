/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Text grown in one buffer, for the daemon's O(n) outputs (the metrics,
 * the fd store's state): appends never fail one by one; an allocation that
 * fails sticks (oom) and is checked once at the end. And the reading back
 * of such hand-written text: decimal fields (text_u64()).
 */
#ifndef RDMAMEM_TEXTBUF_H
#define RDMAMEM_TEXTBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

struct textbuf {
	char *p; /* NUL-terminated after each append; free() it */
	size_t len, cap;
	bool oom;
};

/* Room for more bytes (and a NUL) past len. */
void textbuf_reserve(struct textbuf *b, size_t more);
void textbuf_vprintf(struct textbuf *b, const char *fmt, va_list ap) _printf_(2, 0);
void textbuf_printf(struct textbuf *b, const char *fmt, ...) _printf_(2, 3);

/* A decimal number at *p of at most max, digits only, that ends at end;
 * *p moves past end (onto it when end is '\0'). -EINVAL otherwise. */
int text_u64(const char **p, char end, uint64_t max, uint64_t *ret);

#endif
