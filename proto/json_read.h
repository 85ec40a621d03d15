/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Builds the cJSON tree of a message in one pass, in place of
 * cJSON_ParseWithLengthOpts(): every call's message is parsed, and cJSON's
 * parser spent more instructions on a Ping than the rest of the call's
 * reading and dispatching (strncmp for each of null/false/true before
 * every value, a number's bytes copied for strtod, keys swapped in from
 * values). The tree is cJSON's own (cJSON_malloc'd items and strings,
 * child->prev at the last child), freed with cJSON_Delete().
 *
 * It reads what cJSON reads, with cJSON's values (a number is what strtod
 * makes of its bytes; valueint saturates; whitespace is any
 * byte up to 32; a UTF-8 BOM may lead), with two differences, both
 * refusals: a \u escape must have four hex digits (cJSON read "\uZZZZ" as
 * U+0000 and cut the string there), and an object may not repeat a key
 * (json_parse() refused those after cJSON anyway).
 *
 * The text must have passed json_check_text()'s checks first: nesting is
 * bounded there, so the recursion here is too.
 */
#ifndef RDMAMEM_JSON_READ_H
#define RDMAMEM_JSON_READ_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Parses text[0..len) into *ret. -EBADMSG not JSON, -ENOTUNIQ an object
 * repeats a key, -ENOMEM. */
int json_read(const char *text, size_t len, cJSON **ret);

#endif
