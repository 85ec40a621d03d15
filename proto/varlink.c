/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "proto/json.h"
#include "proto/varlink.h"

bool varlink_interface_name_is_valid(const char *s, size_t len)
{
	size_t segments = 0, seg_len = 0;

	/* Reverse-domain: two or more dot-separated segments of letters,
	 * digits and inner dashes; the first segment starts with a letter. */
	for (size_t i = 0; i <= len; i++) {
		char c = i < len ? s[i] : '.';
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		bool digit = c >= '0' && c <= '9';

		if (c == '.') {
			if (seg_len == 0 || s[i - 1] == '-')
				return false;
			segments++;
			seg_len = 0;
			continue;
		}
		if (seg_len == 0 && !alpha && !(digit && segments > 0))
			return false;
		if (!alpha && !digit && c != '-')
			return false;
		seg_len++;
	}
	return segments >= 2;
}

/*
 * interface.Method in one pass (every call's method is checked): the
 * interface as varlink_interface_name_is_valid() wants it, then a member
 * name of letters and digits that starts with a capital. Returns the
 * interface's length, or -1.
 */
/* What a byte is in a Varlink name; letters and digits in a row first. */
enum { NAME_OTHER, NAME_UPPER, NAME_LOWER, NAME_DIGIT, NAME_DASH, NAME_DOT };

static const uint8_t name_class[256] = {
	['A' ... 'Z'] = NAME_UPPER, ['a' ... 'z'] = NAME_LOWER, ['0' ... '9'] = NAME_DIGIT,
	['-'] = NAME_DASH,          ['.'] = NAME_DOT,
};

static ssize_t method_name_check(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, segments = 0, seg_start;
	bool dash;
	uint8_t c;

	/* A segment at a time: its first byte, then a run of letters, digits
	 * and dashes (most bytes: two compares each), then a dot or the end. */
	for (;;) {
		seg_start = i;
		c = name_class[p[i]];
		/* A letter, or a digit past the first segment. */
		if (!(c == NAME_UPPER || c == NAME_LOWER || (c == NAME_DIGIT && segments > 0)))
			return -1;
		dash = false;
		for (i++;; i++) {
			c = name_class[p[i]];
			if (c >= NAME_UPPER && c <= NAME_DIGIT)
				continue;
			if (c != NAME_DASH)
				break;
			dash = true;
		}
		/* Dashes inside a segment only. */
		if (p[i - 1] == '-' || c != NAME_DOT)
			break;
		segments++;
		i++;
	}
	/* The end, within VARLINK_METHOD_MAX (a longer name is read to its end
	 * first, no further than json_check_text() read the whole message);
	 * the last segment is the member: no dash, a capital first. */
	if (p[i] != '\0' || i > VARLINK_METHOD_MAX || segments < 2 || dash ||
	    name_class[p[seg_start]] != NAME_UPPER)
		return -1;
	return (ssize_t)seg_start - 1;
}

bool varlink_method_name_is_valid(const char *full)
{
	return method_name_check(full) >= 0;
}

static int get_bool(const cJSON *item, bool *ret)
{
	/* null: absent, that is false. */
	if (!item || cJSON_IsNull(item))
		return 0;
	if (!cJSON_IsBool(item))
		return -EBADMSG;
	*ret = cJSON_IsTrue(item);
	return 0;
}

int varlink_call_parse(cJSON *root, struct varlink_call *ret, const char **ret_reason)
{
	struct varlink_call c = {};
	const cJSON *method = NULL;
	ssize_t interface_len = -1;
	cJSON *item;

	if (!cJSON_IsObject(root)) {
		*ret_reason = "a call must be a JSON object";
		return -EBADMSG;
	}

	cJSON_ArrayForEach(item, root) {
		const char *k = item->string;
		int r = 0;

		if (strcmp(k, "method") == 0)
			method = item;
		else if (strcmp(k, "parameters") == 0)
			/* Null counts as absent, as it does among the
			 * parameters: the reference Go library sends
			 * "parameters": null for every call without any. */
			c.parameters = cJSON_IsNull(item) ? NULL : item;
		else if (strcmp(k, "oneway") == 0)
			r = get_bool(item, &c.oneway);
		else if (strcmp(k, "more") == 0)
			r = get_bool(item, &c.more);
		else if (strcmp(k, "upgrade") == 0)
			r = get_bool(item, &c.upgrade);
		else {
			*ret_reason = "a call has an unknown field (allowed: method, parameters, "
				      "oneway, more, upgrade)";
			return -EBADMSG;
		}
		if (r < 0) {
			*ret_reason = "'oneway', 'more' and 'upgrade' must be booleans";
			return r;
		}
	}

	if (!method) {
		*ret_reason = "a call needs a 'method' field";
		return -EBADMSG;
	}
	if (!cJSON_IsString(method) ||
	    (interface_len = method_name_check(method->valuestring)) < 0) {
		*ret_reason = "'method' must be a string of the form interface.Method";
		return -EBADMSG;
	}
	if (c.parameters && !cJSON_IsObject(c.parameters)) {
		*ret_reason = "'parameters' must be an object";
		return -EBADMSG;
	}
	if (c.oneway && c.more) {
		*ret_reason = "'oneway' and 'more' exclude each other";
		return -EBADMSG;
	}

	c.method = method->valuestring;
	c.interface_len = (size_t)interface_len;
	*ret = c;
	return 0;
}

int varlink_reply_parse(cJSON *root, struct varlink_reply *ret, const char **ret_reason)
{
	struct varlink_reply rp = {};
	cJSON *item;

	if (!cJSON_IsObject(root)) {
		*ret_reason = "a reply must be a JSON object";
		return -EBADMSG;
	}
	cJSON_ArrayForEach(item, root) {
		const char *k = item->string;

		/* Null counts as absent here too: a server may send
		 * "parameters": null for a reply without any. */
		if (cJSON_IsNull(item))
			continue;
		if (strcmp(k, "parameters") == 0) {
			if (!cJSON_IsObject(item)) {
				*ret_reason = "reply 'parameters' must be an object";
				return -EBADMSG;
			}
			rp.parameters = item;
		} else if (strcmp(k, "error") == 0) {
			if (!cJSON_IsString(item)) {
				*ret_reason = "reply 'error' must be a string";
				return -EBADMSG;
			}
			rp.error = item->valuestring;
		} else if (strcmp(k, "continues") == 0) {
			if (get_bool(item, &rp.continues) < 0) {
				*ret_reason = "reply 'continues' must be a boolean";
				return -EBADMSG;
			}
		}
		/* Unknown reply fields are ignored: newer servers may add some. */
	}
	*ret = rp;
	return 0;
}

int varlink_call_format(const char *method, const cJSON *params, bool oneway, char **ret,
			size_t *ret_len)
{
	_cleanup_json_ cJSON *root = NULL;
	char *text;

	root = cJSON_CreateObject();
	if (!root || json_add_string(root, "method", method) < 0)
		return -ENOMEM;
	/* A reference, not a copy: the caller's tree is printed in place
	 * (deleting root leaves it alone). */
	if (params && !cJSON_AddItemReferenceToObject(root, "parameters", (cJSON *)params))
		return -ENOMEM;
	if (oneway && json_add_bool(root, "oneway", true) < 0)
		return -ENOMEM;

	text = cJSON_PrintUnformatted(root);
	if (!text)
		return -ENOMEM;
	*ret_len = strlen(text);
	*ret = text;
	return 0;
}
