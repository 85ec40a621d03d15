/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json_read() against cJSON's parser, which it replaced, for the json unit
 * test and the request fuzz target: json_read_differs() and what it is
 * made of (whether two trees are the same to the bit, and the two things
 * json_read refuses that cJSON let through).
 */
#ifndef RDMAMEM_TESTS_JSON_COMPARE_H
#define RDMAMEM_TESTS_JSON_COMPARE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "proto/hex.h"
#include "proto/json.h"
#include "proto/json_read.h"

/* A \u escape without four hex digits: cJSON read it as U+0000. */
static inline bool json_bad_u_escape(const char *t, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (t[i] == '\\' && t[i + 1] == 'u') {
			uint32_t cp;

			if (i + 6 > len || hex_u16(t + i + 2, &cp) < 0)
				return true;
		}
		if (t[i] == '\\')
			i++;
	}
	return false;
}

/* An object anywhere in the tree repeats a key. */
static inline bool json_repeats_key(const cJSON *item)
{
	for (const cJSON *c = item->child; c; c = c->next) {
		if (json_repeats_key(c))
			return true;
		if (cJSON_IsObject(item))
			for (const cJSON *d = c->next; d; d = d->next)
				if (strcmp(c->string, d->string) == 0)
					return true;
	}
	return false;
}

/* Types, number bits, valueint, strings, keys, order, and the first
 * child's prev at the last, as cJSON keeps it. */
static inline bool json_same_tree(const cJSON *a, const cJSON *b)
{
	const cJSON *x, *y;

	if (a->type != b->type || a->valueint != b->valueint ||
	    memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) != 0 ||
	    !a->valuestring != !b->valuestring || !a->string != !b->string ||
	    (a->valuestring && strcmp(a->valuestring, b->valuestring) != 0) ||
	    (a->string && strcmp(a->string, b->string) != 0) || !a->child != !b->child)
		return false;
	for (x = a->child, y = b->child; x && y; x = x->next, y = y->next)
		if (!json_same_tree(x, y))
			return false;
	if (x || y)
		return false;
	return !a->child ||
	       (a->child->prev && b->child->prev && json_same_tree(a->child->prev, b->child->prev));
}

/*
 * How json_read() and cJSON's parser disagree on text[0..len), NULL if they
 * do not: the same verdict (json_read's error -EBADMSG where cJSON refused)
 * and the same tree, but for json_read's two refusals (-ENOTUNIQ or
 * -EBADMSG). A text json_check_text() refuses reaches neither parser in the
 * daemon: *ret_compared is false for it.
 */
static inline const char *json_read_differs(const char *text, size_t len, bool *ret_compared)
{
	const char *reason, *why = NULL;
	cJSON *ours = NULL, *theirs;
	int r;

	*ret_compared = json_check_text(text, len, &reason) == 0;
	if (!*ret_compared)
		return NULL;
	theirs = cJSON_ParseWithLengthOpts(text, len + 1, NULL, 1);
	r = json_read(text, len, &ours);
	if (theirs && (json_repeats_key(theirs) || json_bad_u_escape(text, len)))
		why = r == -ENOTUNIQ || r == -EBADMSG ? NULL : "json_read took what it must refuse";
	else if (!theirs)
		why = r == -EBADMSG ? NULL : "cJSON refused it, json_read did not say -EBADMSG";
	else if (r != 0)
		why = "cJSON read it, json_read refused it";
	else if (!json_same_tree(theirs, ours))
		why = "the trees differ";
	cJSON_Delete(theirs);
	cJSON_Delete(ours);
	return why;
}

#endif
