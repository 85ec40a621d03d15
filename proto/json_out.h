/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * JSON text written straight into a buffer, without a tree: for the answers
 * the daemon sends most, where building a cJSON tree, printing it and
 * freeing it cost more than the call itself (a Register's answer of 322
 * bytes took 29k instructions that way). The caller's buffer is used until
 * the text outgrows it, the heap after; a failure to grow is kept (err) and
 * makes every later write a no-op, so writers check once, at the end.
 *
 * Names are the caller's constants, written as they are (plain field names:
 * nothing to escape); string values are escaped as JSON wants. 64-bit
 * unsigned values go as decimal strings, the wire's form (json.h).
 */
#ifndef RDMAMEM_JSON_OUT_H
#define RDMAMEM_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

struct json_out {
	char *text;  /* what was written, NUL ended */
	size_t len;  /* without the NUL */
	size_t size; /* of text's buffer */
	bool heap;   /* text is ours (json_out_free() frees it) */
	int err;     /* 0, or -ENOMEM once growing failed */
	unsigned depth;
	/* Bit d: the container open at depth d has a value already (the next
	 * one wants a comma), is an array. */
	uint64_t has_value, is_array;
};

/* Starts empty text in buf (size bytes, at least 1; NULL and 0: the heap). */
void json_out_init(struct json_out *o, char *buf, size_t size);
/* Frees what o allocated; o may be initialized again. */
void json_out_free(struct json_out *o);

/*
 * Each of these writes one value: a member of the object open at the
 * current depth when name is given, else an element of the array open
 * there (or the top-level value).
 */
void json_out_object(struct json_out *o, const char *name);
void json_out_array(struct json_out *o, const char *name);
/* Closes the innermost object or array. */
void json_out_end(struct json_out *o);
void json_out_string(struct json_out *o, const char *name, const char *value);
void json_out_u64(struct json_out *o, const char *name, uint64_t value);
void json_out_int(struct json_out *o, const char *name, int64_t value);
void json_out_bool(struct json_out *o, const char *name, bool value);

#define _cleanup_json_out_ _cleanup_(json_out_free)

/* Frees o: its text as a tree's item, printed as it is (cJSON_Raw), where
 * a tree is still built around it; NULL when o failed, or out of memory. */
typedef struct cJSON cJSON;
cJSON *json_out_item(struct json_out *o);

#endif
