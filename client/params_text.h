/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The parameters of the calls made most (Copy, Lock, Unlock) as text, for
 * the message as one raw node: building them as a tree of cJSON nodes,
 * printing it and freeing it was most of what the library did per call
 * (callgrind: about 10k of a Copy's 14k instructions). Only for what needs
 * no escaping: keys and enum names written here, numbers. A text that would
 * not fit makes params_text_done() return NULL, as building a tree does
 * when out of memory; the caller says -ENOMEM.
 */
#ifndef RDMAMEM_PARAMS_TEXT_H
#define RDMAMEM_PARAMS_TEXT_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define PARAMS_TEXT_MAX 256U
#define PARAMS_TEXT_DEPTH 3U

struct params_text {
	char buf[PARAMS_TEXT_MAX];
	unsigned len, depth;
	bool overflow;
	bool first[PARAMS_TEXT_DEPTH]; /* no member yet at that depth */
};

void params_text_init(struct params_text *t);
/* "key":"decimal" (ids and sizes travel as strings). */
void params_text_id(struct params_text *t, const char *key, uint64_t value);
/* "key":decimal */
void params_text_int(struct params_text *t, const char *key, int64_t value);
/* "key":"value", value a name of ours (no escaping). */
void params_text_name(struct params_text *t, const char *key, const char *value);
/* "key":{ … } */
void params_text_open(struct params_text *t, const char *key);
void params_text_close(struct params_text *t);
/* The whole object as a raw node; NULL if it did not fit or on OOM. */
cJSON *params_text_done(struct params_text *t);

#endif
