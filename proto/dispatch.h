/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Table-driven decoding of a JSON object into a C struct (the sd_json_dispatch
 * idea): every field is typed, unknown fields are refused, and the first
 * problem is reported by name so the peer learns exactly what to change.
 */
#ifndef RDMAMEM_DISPATCH_H
#define RDMAMEM_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

enum json_type {
	JSON_U64,	/* uint64_t: decimal string, or a number below 2^53 */
	JSON_U32,	/* uint32_t: number */
	JSON_INT,	/* int64_t: number, |v| < 2^53 */
	JSON_BOOL,	/* bool */
	JSON_STRING,	/* const char *, points into the tree */
	JSON_OBJECT,	/* cJSON *, an object */
	JSON_ARRAY,	/* cJSON *, an array */
	JSON_ANY,	/* cJSON *, any value */
};

#define JSON_MANDATORY (1U << 0)

struct json_field {
	const char *name;
	enum json_type type;
	size_t offset;
	unsigned flags;
};

struct json_dispatch_error {
	const char *field;	/* NULL when the object itself is wrong */
	const char *reason;	/* static English text */
};

/*
 * Fills out from obj (NULL counts as an empty object). Absent and null
 * fields leave out untouched. Returns 0, or -EINVAL with *err set.
 */
int json_dispatch(const cJSON *obj, const struct json_field *fields, void *out,
		  struct json_dispatch_error *err);

#endif
