/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "proto/dispatch.h"
#include "proto/json.h"

static bool is_field(const struct varlink_field *f)
{
	return f->type != VARLINK_COMMENT && f->direction == VARLINK_IN;
}

static const char *type_reason(const struct varlink_field *f)
{
	if (f->flags & VARLINK_ARRAY)
		return "must be an array";
	if (f->flags & VARLINK_MAP)
		return "must be an object";
	switch (f->type) {
	case VARLINK_U64:
		return "must be an unsigned 64-bit integer as a decimal string";
	case VARLINK_U32:
		return "must be an unsigned 32-bit integer";
	case VARLINK_INT:
		return "must be an integer";
	case VARLINK_BOOL:
		return "must be a boolean";
	case VARLINK_STRING:
		return "must be a string";
	case VARLINK_STRUCT:
		return "must be an object";
	case VARLINK_OBJECT:
	case VARLINK_COMMENT:
		break;
	}
	return "has the wrong type";
}

/* The integers a double carries exactly (JSON numbers are doubles). */
static const double JSON_SAFE_INT = (double)JSON_SAFE_INT_MAX;

static int number_to_int(const cJSON *item, double lo, double hi, double *ret)
{
	double d;

	if (!cJSON_IsNumber(item))
		return -EINVAL;
	d = item->valuedouble;
	if (!isfinite(d) || d != floor(d) || d < lo || d > hi)
		return -EINVAL;
	*ret = d;
	return 0;
}

static int dispatch_one(const cJSON *item, const struct varlink_field *f, void *out)
{
	void *p = (char *)out + f->offset;
	double d;

	if (f->flags & (VARLINK_ARRAY | VARLINK_MAP)) {
		const cJSON *e;

		if (!((f->flags & VARLINK_ARRAY) ? cJSON_IsArray(item) : cJSON_IsObject(item)))
			return -EINVAL;
		/* []string and []T: each element's JSON type, in the first pass,
		 * so that a wrong element is named before a missing parameter. */
		cJSON_ArrayForEach(e, item)
			if ((f->type == VARLINK_STRING && !cJSON_IsString(e)) ||
			    (f->type == VARLINK_STRUCT && !cJSON_IsObject(e)))
				return -EINVAL;
		*(const cJSON **)p = item;
		return 0;
	}
	switch (f->type) {
	case VARLINK_U64:
		return json_to_u64(item, p);
	case VARLINK_U32:
		if (number_to_int(item, 0, UINT32_MAX, &d) < 0)
			return -EINVAL;
		*(uint32_t *)p = (uint32_t)d;
		return 0;
	case VARLINK_INT:
		if (number_to_int(item, -JSON_SAFE_INT, JSON_SAFE_INT, &d) < 0)
			return -EINVAL;
		*(int64_t *)p = (int64_t)d;
		return 0;
	case VARLINK_BOOL:
		if (!cJSON_IsBool(item))
			return -EINVAL;
		*(bool *)p = cJSON_IsTrue(item);
		return 0;
	case VARLINK_STRING:
		if (!cJSON_IsString(item))
			return -EINVAL;
		*(const char **)p = item->valuestring;
		return 0;
	case VARLINK_STRUCT:
		/* Its fields are decoded in the last pass. */
		return cJSON_IsObject(item) ? 0 : -EINVAL;
	case VARLINK_OBJECT:
		*(const cJSON **)p = item;
		return 0;
	case VARLINK_COMMENT:
		break;
	}
	return -EINVAL;
}

int json_dispatch(const cJSON *obj, const struct varlink_field *fields, void *out,
		  struct json_dispatch_error *err)
{
	const struct varlink_field *f;
	const cJSON *item;
	/* Which of the first 64 fields came, not null: the required ones are
	 * then checked without looking each up again (a later field is). */
	uint64_t given = 0;

	*err = (struct json_dispatch_error){};
	if (obj && !cJSON_IsObject(obj)) {
		err->reason = "must be an object";
		return -EINVAL;
	}

	for (f = fields; f->name; f++)
		if (is_field(f) && (f->flags & VARLINK_PRESENCE))
			*(bool *)((char *)out + f->has_offset) = false;

	cJSON_ArrayForEach(item, obj) {
		for (f = fields; f->name; f++)
			if (is_field(f) && strcmp(f->name, item->string) == 0)
				break;
		if (!f->name) {
			err->field = item->string;
			err->reason = "is not a known parameter";
			return -EINVAL;
		}
		if (cJSON_IsNull(item))
			continue;
		if (dispatch_one(item, f, out) < 0) {
			err->field = f->name;
			err->reason = type_reason(f);
			return -EINVAL;
		}
		if (f->flags & VARLINK_PRESENCE)
			*(bool *)((char *)out + f->has_offset) = true;
		if (f - fields < 64)
			given |= 1ULL << (f - fields);
	}

	for (f = fields; f->name; f++) {
		if (!is_field(f) || (f->flags & VARLINK_NULLABLE))
			continue;
		if (f - fields < 64) {
			if (given & (1ULL << (f - fields)))
				continue;
			item = NULL;
		} else {
			item = obj ? cJSON_GetObjectItemCaseSensitive(obj, f->name) : NULL;
		}
		if (!item || cJSON_IsNull(item)) {
			err->field = f->name;
			err->reason = "is required";
			return -EINVAL;
		}
	}

	for (f = fields; f->name; f++) {
		if (!is_field(f) || f->type != VARLINK_STRUCT ||
		    (f->flags & (VARLINK_ARRAY | VARLINK_MAP)))
			continue;
		item = obj ? cJSON_GetObjectItemCaseSensitive(obj, f->name) : NULL;
		if (!item || cJSON_IsNull(item))
			continue;
		if (json_dispatch(item, f->symbol->fields, (char *)out + f->offset, err) < 0) {
			/* One level deep: the parameter is named, its field told. */
			err->parent = f->name;
			return -EINVAL;
		}
	}
	return 0;
}
