/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/hex.h"
#include "proto/json_read.h"
#include "util/macro.h"
#include "util/strset.h"

/* Where the reader is in the text, how deep, and its first failure. A
 * repeated key (repeat: 1, or -ENOMEM from looking) counts only in a text
 * that is JSON otherwise, as when cJSON parsed and the tree was searched. */
struct reader {
	const unsigned char *p;
	const unsigned char *end;
	unsigned depth;
	int repeat;
	int err;
};

static bool failed(struct reader *r, int err)
{
	if (r->err == 0)
		r->err = err;
	return false;
}

static bool at(const struct reader *r, unsigned char c)
{
	return r->p < r->end && *r->p == c;
}

/* cJSON's whitespace: every byte up to and with the space. */
static void skip_space(struct reader *r)
{
	while (r->p < r->end && *r->p <= ' ')
		r->p++;
}

static cJSON *item_new(struct reader *r)
{
	cJSON *item = cJSON_malloc(sizeof(*item));

	if (!item) {
		failed(r, -ENOMEM);
		return NULL;
	}
	memset(item, 0, sizeof(*item));
	return item;
}

static char *put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		*out++ = (char)cp;
	} else if (cp < 0x800) {
		*out++ = (char)(0xc0 | cp >> 6);
		*out++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*out++ = (char)(0xe0 | cp >> 12);
		*out++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*out++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*out++ = (char)(0xf0 | cp >> 18);
		*out++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*out++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*out++ = (char)(0x80 | (cp & 0x3f));
	}
	return out;
}

/*
 * The \u escape at p (its backslash; close is the string's closing quote),
 * a surrogate pair taken whole, written to *out as UTF-8: returns how many
 * bytes of text it took, 0 when it is refused. As cJSON: a low surrogate
 * alone, or a high one without a low one's escape after it.
 */
static size_t read_u_escape(const unsigned char *p, const unsigned char *close, char **out)
{
	uint32_t hi, lo;

	if (close - p < 6 || hex_u16((const char *)p + 2, &hi) < 0 ||
	    (hi >= 0xdc00 && hi <= 0xdfff))
		return 0;
	if (hi < 0xd800 || hi > 0xdbff) {
		*out = put_utf8(*out, hi);
		return 6;
	}
	if (close - p < 12 || p[6] != '\\' || p[7] != 'u' ||
	    hex_u16((const char *)p + 8, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
		return 0;
	*out = put_utf8(*out, 0x10000 + ((hi & 0x3ff) << 10 | (lo & 0x3ff)));
	return 12;
}

/*
 * The closing quote of the string whose first byte is at p, counting the
 * escapes before it: a backslash hides the byte after it. memchr finds
 * each; the quote is looked for again only once passed, so a string of
 * escaped quotes is read once, not once an escape.
 */
static const unsigned char *string_end(const unsigned char *p, const unsigned char *end,
				       size_t *ret_escapes)
{
	const unsigned char *quote = NULL, *bs;
	size_t escapes = 0;

	for (;;) {
		if (!quote || quote < p) {
			quote = memchr(p, '"', (size_t)(end - p));
			if (!quote)
				return NULL;
		}
		bs = memchr(p, '\\', (size_t)(quote - p));
		if (!bs)
			break;
		if (bs + 1 >= end)
			return NULL;
		escapes++;
		p = bs + 2;
	}
	*ret_escapes = escapes;
	return quote;
}

/* The string whose opening quote is at r->p, unescaped, in a new
 * cJSON_malloc'd buffer; r->p then past its closing quote. */
static char *read_string(struct reader *r)
{
	const unsigned char *q = r->p + 1, *close;
	size_t escapes;
	char *s, *out;

	if (!at(r, '"') || !(close = string_end(q, r->end, &escapes))) {
		failed(r, -EBADMSG);
		return NULL;
	}
	/* An escape's text is never shorter than what it stands for. */
	out = s = cJSON_malloc((size_t)(close - q) - escapes + 1);
	if (!s) {
		failed(r, -ENOMEM);
		return NULL;
	}
	while (q < close) {
		const unsigned char *bs = escapes ? memchr(q, '\\', (size_t)(close - q)) : NULL;
		size_t run = (size_t)((bs ? bs : close) - q), n = 2;

		memcpy(out, q, run);
		out += run;
		q += run;
		if (!bs)
			break;
		switch (q[1]) {
		case 'b':
			*out++ = '\b';
			break;
		case 'f':
			*out++ = '\f';
			break;
		case 'n':
			*out++ = '\n';
			break;
		case 'r':
			*out++ = '\r';
			break;
		case 't':
			*out++ = '\t';
			break;
		case '"':
		case '\\':
		case '/':
			*out++ = (char)q[1];
			break;
		case 'u':
			n = read_u_escape(q, close, &out);
			if (n)
				break;
			/* fallthrough */
		default:
			cJSON_free(s);
			failed(r, -EBADMSG);
			return NULL;
		}
		q += n;
	}
	*out = '\0';
	r->p = close + 1;
	return s;
}

/*
 * A number, as cJSON reads it: the run of bytes a number may hold, as much
 * of it as strtod takes (a run of 20,000 digits is a double too: inf). Most
 * numbers in a call are small integers, which strtod would return exactly:
 * those are summed here.
 */
static bool read_number(struct reader *r, cJSON *item)
{
	_cleanup_free_ char *heap = NULL;
	char stack[64], *buf = stack, *after;
	size_t n = 0, digits = 0;
	uint64_t u = 0;
	double v;

	for (; r->p + n < r->end; n++) {
		unsigned char c = r->p[n];

		if (c >= '0' && c <= '9')
			digits++, u = u * 10 + (unsigned)(c - '0');
		else if (c != '+' && c != '-' && c != '.' && c != 'e' && c != 'E')
			break;
	}
	if (digits > 0 && digits <= 15 && digits + (r->p[0] == '-') == n) {
		v = r->p[0] == '-' ? -(double)u : (double)u;
	} else {
		char point = *localeconv()->decimal_point;

		if (n >= sizeof(stack)) {
			buf = heap = malloc(n + 1);
			if (!heap)
				return failed(r, -ENOMEM);
		}
		memcpy(buf, r->p, n);
		buf[n] = '\0';
		/* strtod reads the locale's decimal point, as cJSON has it. */
		for (size_t i = 0; i < n; i++)
			if (buf[i] == '.')
				buf[i] = point;
		v = strtod(buf, &after);
		if (after == buf)
			return failed(r, -EBADMSG);
		n = (size_t)(after - buf);
	}
	r->p += n;
	item->type = cJSON_Number;
	item->valuedouble = v;
	if (v >= INT_MAX)
		item->valueint = INT_MAX;
	else if (v <= (double)INT_MIN)
		item->valueint = INT_MIN;
	else
		item->valueint = (int)v;
	return true;
}

static bool read_word(struct reader *r, const char *word, size_t n, int type, cJSON *item)
{
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
		return failed(r, -EBADMSG);
	r->p += n;
	item->type = type;
	/* cJSON's true has valueint 1. */
	item->valueint = type == cJSON_True;
	return true;
}

/* 1 when one of the n members of object o repeats a key, 0 if none, or
 * -ENOMEM. Parsers disagree about which duplicate wins, so a message with
 * one is ambiguous. */
static int repeats_key(const cJSON *o, size_t n)
{
	_cleanup_(strset_done) struct strset seen = {};

	if (n <= 8) {
		for (const cJSON *c = o->child; c; c = c->next)
			for (const cJSON *d = c->next; d; d = d->next)
				if (strcmp(c->string, d->string) == 0)
					return 1;
		return 0;
	}
	if (strset_init(&seen, n) < 0)
		return -ENOMEM;
	for (const cJSON *c = o->child; c; c = c->next)
		if (!strset_add(&seen, c->string))
			return 1;
	return 0;
}

static bool read_value(struct reader *r, cJSON *item);

/* An object or array whose opening bracket is at r->p. Each member is
 * linked before it is read, so a failure leaves a tree cJSON_Delete frees;
 * the first child's prev is the last, as cJSON keeps it. */
static bool read_container(struct reader *r, cJSON *item, bool object)
{
	unsigned char close = object ? '}' : ']';
	cJSON *last = NULL;
	size_t n = 0;

	if (++r->depth > CJSON_NESTING_LIMIT)
		return failed(r, -EBADMSG);
	item->type = object ? cJSON_Object : cJSON_Array;
	r->p++;
	skip_space(r);
	if (!at(r, close)) {
		for (;;) {
			cJSON *child = item_new(r);

			if (!child)
				return false;
			if (last) {
				last->next = child;
				child->prev = last;
			} else {
				item->child = child;
			}
			item->child->prev = last = child;
			n++;
			skip_space(r);
			if (object) {
				child->string = read_string(r);
				if (!child->string)
					return false;
				skip_space(r);
				if (!at(r, ':'))
					return failed(r, -EBADMSG);
				r->p++;
				skip_space(r);
			}
			if (!read_value(r, child))
				return false;
			skip_space(r);
			if (!at(r, ','))
				break;
			r->p++;
		}
		if (!at(r, close))
			return failed(r, -EBADMSG);
	}
	r->p++;
	r->depth--;
	if (object && n > 1 && r->repeat == 0)
		r->repeat = repeats_key(item, n);
	return true;
}

static bool read_value(struct reader *r, cJSON *item)
{
	if (r->p == r->end)
		return failed(r, -EBADMSG);
	switch (*r->p) {
	case '"':
		item->valuestring = read_string(r);
		item->type = cJSON_String;
		return item->valuestring != NULL;
	case '{':
		return read_container(r, item, true);
	case '[':
		return read_container(r, item, false);
	case 'n':
		return read_word(r, "null", 4, cJSON_NULL, item);
	case 'f':
		return read_word(r, "false", 5, cJSON_False, item);
	case 't':
		return read_word(r, "true", 4, cJSON_True, item);
	case '-':
	case '0' ... '9':
		return read_number(r, item);
	default:
		return failed(r, -EBADMSG);
	}
}

int json_read(const char *text, size_t len, cJSON **ret)
{
	struct reader r = { .p = (const unsigned char *)text,
			    .end = (const unsigned char *)text + len };
	cJSON *root;

	/* cJSON skips a UTF-8 byte order mark (in a text of more than it). */
	if (len > 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		r.p += 3;
	root = item_new(&r);
	if (!root)
		return -ENOMEM;
	skip_space(&r);
	if (read_value(&r, root)) {
		skip_space(&r);
		if (r.p != r.end)
			failed(&r, -EBADMSG);
		else if (r.repeat != 0)
			failed(&r, r.repeat < 0 ? r.repeat : -ENOTUNIQ);
	}
	if (r.err < 0) {
		cJSON_Delete(root);
		return r.err;
	}
	*ret = root;
	return 0;
}
