/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "proto/json_out.h"

void json_out_init(struct json_out *o, char *buf, size_t size)
{
	static char empty[1];

	*o = (struct json_out){ .text = buf && size ? buf : empty, .size = buf && size ? size : 1 };
	o->text[0] = '\0';
}

void json_out_free(struct json_out *o)
{
	if (o->heap)
		free(o->text);
	*o = (struct json_out){ .err = -ENOMEM };
}

/* Room for n more bytes and the NUL; false (err set) when there is none. */
static bool grow(struct json_out *o, size_t n)
{
	size_t want, size;
	char *p;

	if (o->err)
		return false;
	want = o->len + n + 1;
	size = MAX(o->size * 2, want);
	p = o->heap ? realloc(o->text, size) : malloc(size);
	if (!p) {
		o->err = -ENOMEM;
		return false;
	}
	if (!o->heap)
		memcpy(p, o->text, o->len + 1);
	o->text = p;
	o->size = size;
	o->heap = true;
	return true;
}

/* The common case inline: a region's answer is some 30 values of a few
 * bytes each, and a call per byte copied was a fifth of its cost. */
static inline bool room(struct json_out *o, size_t n)
{
	return (!o->err && o->len + n < o->size) || grow(o, n);
}

static inline void put(struct json_out *o, const char *s, size_t n)
{
	if (!room(o, n))
		return;
	memcpy(o->text + o->len, s, n);
	o->len += n;
	o->text[o->len] = '\0';
}

static inline void put_char(struct json_out *o, char c)
{
	if (!room(o, 1))
		return;
	o->text[o->len++] = c;
	o->text[o->len] = '\0';
}

/* What comes before a value: a comma after the container's previous one,
 * and "name": in an object, written at once. */
static void value_start(struct json_out *o, const char *name)
{
	uint64_t bit = UINT64_C(1) << o->depth;
	bool comma = o->has_value & bit;
	size_t n = name ? strlen(name) : 0;
	char *p;

	o->has_value |= bit;
	if (!name) {
		if (comma)
			put_char(o, ',');
		return;
	}
	if (!room(o, n + 4))
		return;
	p = o->text + o->len;
	if (comma)
		*p++ = ',';
	*p++ = '"';
	memcpy(p, name, n);
	p += n;
	*p++ = '"';
	*p++ = ':';
	*p = '\0';
	o->len = (size_t)(p - o->text);
}

static void open_container(struct json_out *o, const char *name, bool array)
{
	value_start(o, name);
	if (o->depth + 1 >= 64) {
		/* Deeper than any answer goes (JSON_DEPTH_MAX): a bug. */
		o->err = -ELOOP;
		return;
	}
	o->depth++;
	o->has_value &= ~(UINT64_C(1) << o->depth);
	if (array)
		o->is_array |= UINT64_C(1) << o->depth;
	else
		o->is_array &= ~(UINT64_C(1) << o->depth);
	put_char(o, array ? '[' : '{');
}

void json_out_object(struct json_out *o, const char *name)
{
	open_container(o, name, false);
}

void json_out_array(struct json_out *o, const char *name)
{
	open_container(o, name, true);
}

void json_out_end(struct json_out *o)
{
	if (o->depth == 0) {
		o->err = o->err ?: -EINVAL;
		return;
	}
	put_char(o, o->is_array & (UINT64_C(1) << o->depth) ? ']' : '}');
	o->depth--;
}

void json_out_string(struct json_out *o, const char *name, const char *value)
{
	static const char hex[] = "0123456789abcdef";
	const char *s = value, *plain = value;

	value_start(o, name);
	put_char(o, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
		size_t n = 6;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(o, plain, (size_t)(s - plain));
		plain = s + 1;
		switch (c) {
		case '"':
		case '\\':
			esc[1] = (char)c;
			n = 2;
			break;
		case '\n':
			esc[1] = 'n';
			n = 2;
			break;
		case '\t':
			esc[1] = 't';
			n = 2;
			break;
		case '\r':
			esc[1] = 'r';
			n = 2;
			break;
		}
		put(o, esc, n);
	}
	put(o, plain, (size_t)(s - plain));
	put_char(o, '"');
}

void json_out_u64(struct json_out *o, const char *name, uint64_t value)
{
	char buf[JSON_U64_DIGITS_MAX];
	const char *digits = json_u64_digits(value, buf);

	value_start(o, name);
	put_char(o, '"');
	put(o, digits, strlen(digits));
	put_char(o, '"');
}

void json_out_int(struct json_out *o, const char *name, int64_t value)
{
	char buf[JSON_INT_DIGITS_MAX];
	const char *digits = json_int_digits(value, buf);

	value_start(o, name);
	put(o, digits, strlen(digits));
}

void json_out_bool(struct json_out *o, const char *name, bool value)
{
	value_start(o, name);
	if (value)
		put(o, "true", 4);
	else
		put(o, "false", 5);
}

cJSON *json_out_item(struct json_out *o)
{
	cJSON *item = o->err || o->depth ? NULL : cJSON_CreateRaw(o->text);

	json_out_free(o);
	return item;
}
