/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/textbuf.h"

void textbuf_reserve(struct textbuf *b, size_t more)
{
	size_t ncap;
	char *np;

	if (b->oom || b->len + more < b->cap)
		return;
	ncap = MAX(b->cap * 2, b->len + more + 1);
	np = realloc(b->p, ncap);
	if (!np) {
		b->oom = true;
		return;
	}
	b->p = np;
	b->cap = ncap;
}

void textbuf_vprintf(struct textbuf *b, const char *fmt, va_list ap)
{
	va_list again;
	int n;

	if (!b->p)
		textbuf_reserve(b, 256);
	if (b->oom)
		return;
	va_copy(again, ap);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	if (n >= 0 && (size_t)n >= b->cap - b->len) {
		textbuf_reserve(b, (size_t)n + 1);
		if (!b->oom)
			vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
	}
	va_end(again);
	if (n < 0)
		b->oom = true;
	if (!b->oom)
		b->len += (size_t)n;
}

void textbuf_printf(struct textbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	textbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

int text_u64(const char **p, char end, uint64_t max, uint64_t *ret)
{
	char *stop;
	uint64_t v;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(*p, &stop, 10);
	if (errno || v > max || *stop != end)
		return -EINVAL;
	*p = stop + (end != '\0');
	*ret = v;
	return 0;
}
