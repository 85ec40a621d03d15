/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include "params_text.h"
#include "proto/json.h"

static void put(struct params_text *t, const char *s, size_t n)
{
	if (t->overflow || n >= PARAMS_TEXT_MAX - t->len) {
		t->overflow = true;
		return;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += (unsigned)n;
}

static void puts_(struct params_text *t, const char *s)
{
	put(t, s, strlen(s));
}

/* ,"key": — the comma unless it is the object's first member. */
static void key(struct params_text *t, const char *k)
{
	if (!t->first[t->depth])
		put(t, ",", 1);
	t->first[t->depth] = false;
	put(t, "\"", 1);
	puts_(t, k);
	put(t, "\":", 2);
}

void params_text_init(struct params_text *t)
{
	t->len = 0;
	t->depth = 0;
	t->overflow = false;
	t->first[0] = true;
	put(t, "{", 1);
}

void params_text_id(struct params_text *t, const char *k, uint64_t value)
{
	char digits[JSON_U64_DIGITS_MAX];

	key(t, k);
	put(t, "\"", 1);
	puts_(t, json_u64_digits(value, digits));
	put(t, "\"", 1);
}

void params_text_int(struct params_text *t, const char *k, int64_t value)
{
	char digits[JSON_U64_DIGITS_MAX];

	key(t, k);
	if (value < 0)
		put(t, "-", 1);
	/* -(value + 1) + 1: INT64_MIN too. */
	puts_(t,
	      json_u64_digits(value < 0 ? (uint64_t) - (value + 1) + 1 : (uint64_t)value, digits));
}

void params_text_name(struct params_text *t, const char *k, const char *value)
{
	key(t, k);
	put(t, "\"", 1);
	puts_(t, value);
	put(t, "\"", 1);
}

void params_text_open(struct params_text *t, const char *k)
{
	key(t, k);
	put(t, "{", 1);
	if (t->depth + 1 >= PARAMS_TEXT_DEPTH) {
		t->overflow = true;
		return;
	}
	t->first[++t->depth] = true;
}

void params_text_close(struct params_text *t)
{
	put(t, "}", 1);
	if (t->depth > 0)
		t->depth--;
}

cJSON *params_text_done(struct params_text *t)
{
	put(t, "}", 1);
	if (t->overflow || t->depth != 0)
		return NULL;
	t->buf[t->len] = '\0';
	return cJSON_CreateRaw(t->buf);
}
