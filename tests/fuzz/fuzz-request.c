/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Decoding of one request as the daemon does it: json_parse_bounded (strict
 * UTF-8, value count, depth, no \u0000, no repeated keys), varlink_call_parse,
 * then json_dispatch of the parameters into field tables of every type the
 * methods use, with the nested struct Copy's ends are. Besides not
 * crashing:
 * - the reader's verdict and tree are cJSON's (tests/json_compare.h);
 * - whatever parsed prints back to text that our own parser accepts (the
 *   daemon echoes client strings in replies and error messages);
 * - a value dispatch accepts is in range for its type;
 * - base64 that is accepted decodes to the length it announced.
 *
 * Input: one message, up to its first NUL (the framing never hands out a
 * NUL inside a message).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "proto/base64.h"
#include "proto/dispatch.h"
#include "proto/json.h"
#include "proto/varlink.h"
#include "tests/json_compare.h"

struct any_params {
	uint64_t u64;
	uint32_t u32;
	int64_t i64;
	bool b, has;
	const char *str;
	cJSON *obj, *arr, *any;
	struct any_end {
		uint64_t u64;
		bool has;
	} from, to;
};

#define F(name, type, member, flags) VARLINK_INPUT_AT(struct any_params, name, member, type, flags)
#define O VARLINK_NULLABLE

/* Copy's ends: decoded by the dispatcher into their struct. */
/* clang-format off */
static const struct varlink_symbol end_type = VARLINK_DEFINE_TYPE(
	End, NULL,
	VARLINK_INPUT_AT(struct any_end, region, u64, VARLINK_U64, 0),
	VARLINK_INPUT_AT(struct any_end, offset, u64, VARLINK_U64, VARLINK_NULLABLE),
	VARLINK_INPUT_HAS(struct any_end, lease, u64, VARLINK_U64, VARLINK_NULLABLE, has));
/* clang-format on */

/* Shapes of the daemon's tables: every type, optional and mandatory. */
static const struct varlink_field *const tables[] = {
	VARLINK_FIELDS(F(region, VARLINK_U64, u64, 0), F(offset, VARLINK_U64, u64, O),
		       F(length, VARLINK_U64, u64, O), F(timeout_ms, VARLINK_INT, i64, O),
		       VARLINK_INPUT_HAS(struct any_params, lease, u64, VARLINK_U64, O, has),
		       F(mode, VARLINK_STRING, str, O), F(data, VARLINK_STRING, str, O)),
	VARLINK_FIELDS(VARLINK_INPUT_BY_TYPE(struct any_params, from, from, end_type, 0),
		       VARLINK_INPUT_BY_TYPE(struct any_params, to, to, end_type, 0),
		       F(length, VARLINK_U64, u64, 0), F(mode, VARLINK_STRING, str, O),
		       F(timeout_ms, VARLINK_INT, i64, O)),
	VARLINK_FIELDS(F(fd, VARLINK_INT, i64, O), F(offset, VARLINK_U64, u64, O),
		       F(length, VARLINK_U64, u64, O),
		       F(access, VARLINK_STRING, arr, O | VARLINK_ARRAY),
		       F(devices, VARLINK_OBJECT, any, O), F(memory, VARLINK_STRING, str, O),
		       F(gpu, VARLINK_U32, u32, O), F(ipc_handle, VARLINK_STRING, str, O)),
	VARLINK_FIELDS(F(qpn, VARLINK_U32, u32, 0), F(readonly, VARLINK_BOOL, b, O),
		       F(uid, VARLINK_INT, i64, O), F(data, VARLINK_STRING, str, O),
		       F(calls, VARLINK_STRING, obj, O | VARLINK_MAP)),
	VARLINK_FIELDS(),
};

static void check_dispatched(const struct varlink_field *fields, const struct any_params *p)
{
	for (const struct varlink_field *f = fields; f->name; f++)
		if (f->type == VARLINK_INT)
			fuzz_check(p->i64 >= -(int64_t)JSON_SAFE_INT_MAX &&
				   p->i64 <= (int64_t)JSON_SAFE_INT_MAX);
	if (p->obj)
		fuzz_check(cJSON_IsObject(p->obj));
	if (p->str) {
		size_t len = strlen(p->str);
		ssize_t n = base64_decoded_len(p->str, len);

		if (n >= 0) {
			char *out = malloc(n + 1);

			fuzz_check(out);
			fuzz_check((size_t)n <= len / 4 * 3);
			base64_decode(p->str, len, out);
			free(out);
		}
	}
}

/* What the daemon would send back must be text it would itself accept. */
static void check_printable(const cJSON *root)
{
	char *text = cJSON_PrintUnformatted(root);
	const char *reason = NULL;
	cJSON *again = NULL;

	fuzz_check(text);
	fuzz_check(json_parse(text, strlen(text), &again, &reason) == 0);
	cJSON_Delete(again);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_dispatch_error err;
	const char *reason = NULL;
	struct varlink_call vc;
	cJSON *root = NULL;
	bool compared;
	size_t len = strnlen((const char *)data, size);
	char *text;
	int r;

	text = malloc(len + 1);
	fuzz_check(text);
	memcpy(text, data, len);
	text[len] = '\0';

	r = json_parse_bounded(text, len, JSON_VALUES_MAX, &root, &reason);
	fuzz_check(!json_read_differs(text, len, &compared));
	if (r < 0) {
		fuzz_check(reason);
		fuzz_check(r == -EBADMSG || r == -EILSEQ || r == -ELOOP || r == -ENOTUNIQ ||
			   r == -ENOMEM);
		free(text);
		return 0;
	}
	check_printable(root);

	r = varlink_call_parse(root, &vc, &reason);
	if (r < 0) {
		fuzz_check(r == -EBADMSG && reason);
		goto out;
	}
	fuzz_check(varlink_method_name_is_valid(vc.method));
	fuzz_check(vc.interface_len < strlen(vc.method));
	fuzz_check(!(vc.oneway && vc.more));

	for (size_t t = 0; t < ELEMENTSOF(tables); t++) {
		struct any_params p = {};

		if (json_dispatch(vc.parameters, tables[t], &p, &err) < 0) {
			fuzz_check(err.reason);
			fuzz_check(!err.parent || err.field);
			continue;
		}
		check_dispatched(tables[t], &p);
		if (p.arr) {
			const cJSON *item;
			uint64_t v;

			cJSON_ArrayForEach(item, p.arr)
				(void)json_to_u64(item, &v);
		}
	}
out:
	cJSON_Delete(root);
	free(text);
	return 0;
}
