/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Table-driven decoding of a JSON object into a C struct (the sd_json_dispatch
 * idea), from the fields an interface table declares (idl.h): every field is
 * typed, unknown fields are refused, and the first problem is reported by
 * name so the peer learns exactly what to change.
 */
#ifndef RDMAMEM_DISPATCH_H
#define RDMAMEM_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "proto/idl.h"

struct json_dispatch_error {
	const char *parent; /* the parameter whose struct holds field; NULL at the top */
	const char *field;  /* NULL when the object itself is wrong */
	const char *reason; /* static English text */
};

/*
 * Fills out from obj (NULL counts as an empty object) by fields, a list of
 * idl.h fields; replies' fields (VARLINK_OUT) and comments are skipped. In
 * three passes, so that the first problem reported is the same whatever
 * the order of the object's members: each member's name and type, then the
 * mandatory fields (those without VARLINK_NULLABLE), then the fields of
 * nested structs. Absent and null fields leave out untouched (but for
 * their presence flag, cleared). Returns 0, or -EINVAL with *err set.
 */
int json_dispatch(const cJSON *obj, const struct varlink_field *fields, void *out,
		  struct json_dispatch_error *err);

#endif
