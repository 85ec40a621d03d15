/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "proto/hex.h"
#include "proto/json.h"
#include "proto/json_read.h"

/* Length of the UTF-8 sequence at s (at most n bytes), 0 if invalid:
 * overlong forms, surrogates and code points past U+10FFFF are refused. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Counts values as 1 + commas + containers opened: at least as many as the
 * tree cJSON would build has nodes. */
/* Bytes a word: a byte of it is 0 (or, above such a byte, may seem so). */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(x) (((x)-ONES) & ~(x)&HIGHS)

/*
 * How many bytes from s[i] on (8 at a time, before len) are plain string
 * bytes: none a quote, a backslash or past ASCII. A packed range list or
 * a descriptor is megabytes of those: the byte loop below then sees only
 * the string's ends.
 */
static size_t plain_run(const unsigned char *s, size_t i, size_t len)
{
	size_t start = i;

	while (len - i >= 8) {
		uint64_t w;

		memcpy(&w, s + i, 8);
		if (HAS_ZERO(w ^ (ONES * '"')) | HAS_ZERO(w ^ (ONES * '\\')) | (w & HIGHS))
			break;
		i += 8;
	}
	return i - start;
}

/* What a byte means to check_text(), inside a string and outside one; 0:
 * nothing, go on. */
enum { IN_QUOTE = 1, IN_BACKSLASH, IN_HIGH };
enum { OUT_QUOTE = 1, OUT_OPEN, OUT_CLOSE, OUT_COMMA, OUT_HIGH };

static const uint8_t in_class[256] = {
	['"'] = IN_QUOTE,
	['\\'] = IN_BACKSLASH,
	[0x80 ... 0xff] = IN_HIGH,
};

static const uint8_t out_class[256] = {
	['"'] = OUT_QUOTE, ['{'] = OUT_OPEN,  ['['] = OUT_OPEN,           ['}'] = OUT_CLOSE,
	[']'] = OUT_CLOSE, [','] = OUT_COMMA, [0x80 ... 0xff] = OUT_HIGH,
};

static int check_text(const char *text, size_t len, size_t max_values, const char **ret_reason)
{
	const unsigned char *s = (const unsigned char *)text;
	bool in_string = false;
	unsigned depth = 0;
	size_t i = 0, n_values = 1, n;

	while (i < len) {
		if (in_string) {
			i += plain_run(s, i, len);
			/* Fewer than 8 plain bytes before the next quote,
			 * backslash or byte past ASCII: one at a time. */
			while (i < len && !in_class[s[i]])
				i++;
			if (i == len)
				break;
			switch (in_class[s[i]]) {
			case IN_QUOTE:
				in_string = false;
				i++;
				continue;
			case IN_BACKSLASH:
				if (i + 1 < len) {
					uint32_t cp;

					if (s[i + 1] == 'u' && i + 6 <= len &&
					    hex_u16(text + i + 2, &cp) == 0 && cp == 0) {
						*ret_reason =
							"strings may not contain NUL (\\u0000)";
						return -EBADMSG;
					}
					i++;
				}
				i++;
				continue;
			default: /* IN_HIGH */
				break;
			}
		} else {
			while (i < len && !out_class[s[i]])
				i++;
			if (i == len)
				break;
			switch (out_class[s[i]]) {
			case OUT_QUOTE:
				in_string = true;
				i++;
				continue;
			case OUT_OPEN:
				if (++depth > JSON_DEPTH_MAX) {
					*ret_reason = "message nests objects and arrays too deeply";
					return -ELOOP;
				}
				/* fallthrough */
			case OUT_COMMA:
				if (++n_values > max_values) {
					*ret_reason = "message holds too many values";
					return -E2BIG;
				}
				i++;
				continue;
			case OUT_CLOSE:
				if (depth > 0)
					depth--;
				i++;
				continue;
			default: /* OUT_HIGH */
				break;
			}
		}
		/* A byte past ASCII, in a string or not: a whole UTF-8 sequence. */
		n = utf8_sequence(s + i, len - i);
		if (n == 0) {
			*ret_reason = "message is not valid UTF-8";
			return -EILSEQ;
		}
		i += n;
	}
	return 0;
}

int json_check_text(const char *text, size_t len, const char **ret_reason)
{
	return check_text(text, len, SIZE_MAX, ret_reason);
}

int json_parse_bounded(const char *text, size_t len, size_t max_values, cJSON **ret,
		       const char **ret_reason)
{
	int r;

	r = check_text(text, len, max_values, ret_reason);
	if (r < 0)
		return r;
	r = json_read(text, len, ret);
	if (r < 0)
		*ret_reason = r == -ENOTUNIQ ? "an object repeats a key" :
			      r == -ENOMEM   ? "out of memory" :
					       "message is not valid JSON";
	return r;
}

int json_parse(const char *text, size_t len, cJSON **ret, const char **ret_reason)
{
	return json_parse_bounded(text, len, SIZE_MAX, ret, ret_reason);
}

int json_get_u64(const cJSON *obj, const char *name, uint64_t *ret)
{
	return json_to_u64(cJSON_GetObjectItemCaseSensitive(obj, name), ret);
}

int json_parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	/* One canonical spelling per value: no sign, no spaces, no leading 0. */
	if (s[0] == '0' && s[1])
		return -EINVAL;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		d = *s - '0';
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

int json_to_u64(const cJSON *item, uint64_t *ret)
{
	double d;

	if (cJSON_IsString(item))
		return json_parse_u64(item->valuestring, ret);
	if (!cJSON_IsNumber(item))
		return -EINVAL;
	d = item->valuedouble;
	if (!isfinite(d) || d < 0 || d != floor(d))
		return -EINVAL;
	if (d > (double)JSON_SAFE_INT_MAX)
		return -ERANGE;
	*ret = (uint64_t)d;
	return 0;
}

const char *json_u64_digits(uint64_t value, char buf[static JSON_U64_DIGITS_MAX])
{
	char *p = buf + JSON_U64_DIGITS_MAX;

	/* From the back: snprintf() was half of json_add_u64()'s cost, and
	 * every call carries several ids. */
	*--p = '\0';
	do {
		*--p = (char)('0' + value % 10);
		value /= 10;
	} while (value);
	return p;
}

int json_add_u64(cJSON *obj, const char *name, uint64_t value)
{
	char buf[JSON_U64_DIGITS_MAX];

	return json_add_string(obj, name, json_u64_digits(value, buf));
}

int json_add_string(cJSON *obj, const char *name, const char *value)
{
	return cJSON_AddStringToObject(obj, name, value) ? 0 : -ENOMEM;
}

/*
 * The decimal text itself, as a raw value: cJSON prints a number with
 * "%1.15g" and reads it back with sscanf to check it, which made integers
 * the largest part of printing a listing (2.4 of 3.4 µs per region).
 */
const char *json_int_digits(int64_t value, char buf[static JSON_INT_DIGITS_MAX])
{
	char *p =
		(char *)json_u64_digits(value < 0 ? 0 - (uint64_t)value : (uint64_t)value, buf + 1);

	/* The digits of the magnitude (INT64_MIN's too), then the sign:
	 * snprintf() was half the cost of adding one, and a region's answer
	 * carries eight of them. */
	if (value < 0)
		*--p = '-';
	return p;
}

int json_add_int(cJSON *obj, const char *name, int64_t value)
{
	char buf[JSON_INT_DIGITS_MAX];

	return cJSON_AddRawToObject(obj, name, json_int_digits(value, buf)) ? 0 : -ENOMEM;
}

int json_add_bool(cJSON *obj, const char *name, bool value)
{
	return cJSON_AddBoolToObject(obj, name, value) ? 0 : -ENOMEM;
}

bool json_present(const cJSON *obj, const char *name)
{
	const cJSON *item = NULL;

	if (cJSON_IsObject(obj))
		item = cJSON_GetObjectItemCaseSensitive(obj, name);

	return item && !cJSON_IsNull(item);
}
