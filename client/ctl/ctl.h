/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl's pieces: what the commands share (options, the daemon's
 * replies, formatting) and the commands that are more than a call. */
#ifndef RDMAMEM_CTL_H
#define RDMAMEM_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct rdmamem_client;

extern const char *arg_socket;
extern bool arg_json;

/* Reading the daemon's replies: "?", -1, false, 0 when absent. */
const char *get_string(const cJSON *o, const char *name);
double get_number(const cJSON *o, const char *name);
bool get_bool(const cJSON *o, const char *name);
uint64_t get_u64(const cJSON *o, const char *name);

/* 1.5 GiB; 12min 3s. */
void format_bytes(uint64_t v, char *buf, size_t size);
void format_duration(uint64_t msec, char *buf, size_t size);

/* Calls method (every page of it when paged) and hands back the parsed
 * reply; prints the error itself. */
int call_paged(struct rdmamem_client *c, const char *method, const char *params, bool paged,
	       cJSON **ret);
int call(struct rdmamem_client *c, const char *method, const char *params, cJSON **ret);
int print_json(const cJSON *reply);

/* The text views of the replies (show.c). */
void show_status(const cJSON *reply);
void show_ping(const cJSON *reply);
void show_regions(const cJSON *reply);
void show_region(const cJSON *reply);
void show_descriptor(const cJSON *reply);
void show_devices(const cJSON *reply);
void show_connections(const cJSON *reply);
void show_gpus(const cJSON *reply);
void show_clients(const cJSON *reply);
void show_limits(const cJSON *reply);
void show_stats(const cJSON *reply);
int region_params(const char *arg, char **ret);
int descriptor_params(const char *arg, char **ret);

/* Commands that make several calls. */
int verb_peers(struct rdmamem_client *c, const char *arg);
int verb_doctor(struct rdmamem_client *c, const char *arg);

#endif
