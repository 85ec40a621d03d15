/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict JSON as cJSON trees: the text is checked before any of its tree
 * is built (UTF-8, nesting, no NUL smuggled in as \u0000), json_read()
 * builds the tree in one pass (objects may not repeat a key), and 64-bit
 * integers travel as decimal strings.
 */
#ifndef RDMAMEM_JSON_H
#define RDMAMEM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "util/macro.h"

/* Deepest nesting of objects and arrays a message may have. */
#define JSON_DEPTH_MAX 32
/*
 * Most values (array elements, object members, the top-level value) a
 * message a client sends may hold. A value costs the parsed tree about 100
 * bytes however few bytes of text it took ("0," is two), so without a bound
 * a 16 MiB message of tiny values makes a tree of over 600 MiB; with it the
 * tree is at most a few MiB more than the text. No call needs a tenth of it.
 */
#define JSON_VALUES_MAX 65536U
/* JSON numbers are doubles: integers beyond this are not exact. */
#define JSON_SAFE_INT_MAX ((UINT64_C(1) << 53) - 1)

/*
 * Checks text[0..len) without building anything. Returns 0, or a negative
 * errno with *ret_reason set to a static English explanation:
 * -EILSEQ bad UTF-8, -EBADMSG a \u0000 escape, -ELOOP nesting too deep.
 */
int json_check_text(const char *text, size_t len, const char **ret_reason);

/*
 * Parses text[0..len), where text[len] must be the NUL terminator. On
 * failure returns -EBADMSG/-EILSEQ/-ELOOP/-ENOTUNIQ (repeated key) or
 * -ENOMEM, with *ret_reason set.
 */
int json_parse(const char *text, size_t len, cJSON **ret, const char **ret_reason);
/* The same, refusing with -E2BIG a text of more than max_values values
 * (counted from the text: containers count once more), before any of its
 * tree is built. */
int json_parse_bounded(const char *text, size_t len, size_t max_values, cJSON **ret,
		       const char **ret_reason);

/*
 * Reads a 64-bit unsigned value: a string of decimal digits (canonical), or a
 * JSON number that is an integer in [0, 2^53). Returns -EINVAL otherwise,
 * -ERANGE on overflow.
 */
int json_to_u64(const cJSON *item, uint64_t *ret);
/* json_to_u64() of obj's member name. */
int json_get_u64(const cJSON *obj, const char *name, uint64_t *ret);
int json_parse_u64(const char *s, uint64_t *ret);

/* value in decimal, in buf (returns where its digits start; NUL ended). */
#define JSON_U64_DIGITS_MAX 21
const char *json_u64_digits(uint64_t value, char buf[static JSON_U64_DIGITS_MAX]);
/* The same for a signed value, its sign before its digits. */
#define JSON_INT_DIGITS_MAX (JSON_U64_DIGITS_MAX + 1)
const char *json_int_digits(int64_t value, char buf[static JSON_INT_DIGITS_MAX]);
/* Adds name: "decimal" to obj. Returns 0 or -ENOMEM. */
int json_add_u64(cJSON *obj, const char *name, uint64_t value);

/* Helpers that return -ENOMEM instead of a NULL that is easy to ignore.
 * json_add_int adds a cJSON_Raw item holding the decimal text (cheaper to
 * print than a cJSON number): trees are built to be sent, not read back. */
int json_add_string(cJSON *obj, const char *name, const char *value);
int json_add_int(cJSON *obj, const char *name, int64_t value);
int json_add_bool(cJSON *obj, const char *name, bool value);

/*
 * Whether obj has the member name with a value other than null. Decoding
 * leaves an absent parameter at its default, which for some parameters is a
 * value a client may also send (length 0, lease 0): handlers that must tell
 * the two apart ask this.
 */
bool json_present(const cJSON *obj, const char *name);

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete)
#define _cleanup_json_ _cleanup_(cJSON_Deletep)

#endif
