/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "dispatch.h"
#include "json.h"

static const char *type_reason(enum json_type type)
{
	switch (type) {
	case JSON_U64:
		return "must be an unsigned 64-bit integer as a decimal string";
	case JSON_U32:
		return "must be an unsigned 32-bit integer";
	case JSON_INT:
		return "must be an integer";
	case JSON_BOOL:
		return "must be a boolean";
	case JSON_STRING:
		return "must be a string";
	case JSON_OBJECT:
		return "must be an object";
	case JSON_ARRAY:
		return "must be an array";
	case JSON_ANY:
		break;
	}
	return "has the wrong type";
}

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

static int dispatch_one(const cJSON *item, const struct json_field *f, void *out)
{
	void *p = (char *)out + f->offset;
	double d;

	switch (f->type) {
	case JSON_U64:
		return json_to_u64(item, p);
	case JSON_U32:
		if (number_to_int(item, 0, UINT32_MAX, &d) < 0)
			return -EINVAL;
		*(uint32_t *)p = (uint32_t)d;
		return 0;
	case JSON_INT:
		if (number_to_int(item, -(double)JSON_SAFE_INT_MAX, (double)JSON_SAFE_INT_MAX,
				  &d) < 0)
			return -EINVAL;
		*(int64_t *)p = (int64_t)d;
		return 0;
	case JSON_BOOL:
		if (!cJSON_IsBool(item))
			return -EINVAL;
		*(bool *)p = cJSON_IsTrue(item);
		return 0;
	case JSON_STRING:
		if (!cJSON_IsString(item))
			return -EINVAL;
		*(const char **)p = item->valuestring;
		return 0;
	case JSON_OBJECT:
		if (!cJSON_IsObject(item))
			return -EINVAL;
		*(const cJSON **)p = item;
		return 0;
	case JSON_ARRAY:
		if (!cJSON_IsArray(item))
			return -EINVAL;
		*(const cJSON **)p = item;
		return 0;
	case JSON_ANY:
		*(const cJSON **)p = item;
		return 0;
	}
	return -EINVAL;
}

int json_dispatch(const cJSON *obj, const struct json_field *fields, void *out,
		  struct json_dispatch_error *err)
{
	const cJSON *item;
	const struct json_field *f;

	if (obj && !cJSON_IsObject(obj)) {
		*err = (struct json_dispatch_error){ .reason = "must be an object" };
		return -EINVAL;
	}

	cJSON_ArrayForEach(item, obj) {
		for (f = fields; f->name; f++)
			if (strcmp(f->name, item->string) == 0)
				break;
		if (!f->name) {
			*err = (struct json_dispatch_error){ item->string, "is not a known parameter" };
			return -EINVAL;
		}
		if (cJSON_IsNull(item))
			continue;
		if (dispatch_one(item, f, out) < 0) {
			*err = (struct json_dispatch_error){ f->name, type_reason(f->type) };
			return -EINVAL;
		}
	}

	for (f = fields; f->name; f++) {
		if (!(f->flags & JSON_MANDATORY))
			continue;
		item = obj ? cJSON_GetObjectItemCaseSensitive(obj, f->name) : NULL;
		if (!item || cJSON_IsNull(item)) {
			*err = (struct json_dispatch_error){ f->name, "is required" };
			return -EINVAL;
		}
	}
	return 0;
}
