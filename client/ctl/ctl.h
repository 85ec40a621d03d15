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

/* A command's arguments it cannot use (said on stderr): exit status 2. */
#define EUSAGE 4096

/* access.c: the socket (--socket, else the default), connecting to it,
 * why that failed, and whether this user may connect at all: "PASS",
 * "WARN" (no socket) or "FAIL", and why in buf. */
const char *socket_path(void);
int ctl_connect(struct rdmamem_client **ret);
void connect_error(int r, char *buf, size_t size);
const char *socket_access(const char *path, char *buf, size_t size);

/*
 * Colour: on a terminal, unless $NO_COLOR is set (https://no-color.org) or
 * TERM is dumb; never with --json. color() is "" without it.
 */
enum color { COLOR_OFF, COLOR_BOLD, COLOR_RED, COLOR_GREEN, COLOR_YELLOW, COLOR_GREY };
void color_init(void);
const char *color(enum color c);
/* PASS green, WARN yellow, FAIL red, SKIP grey; states: ACTIVE green... */
const char *color_of_status(const char *status);

/*
 * Names beside numbers: "1000 (alice)", "4242 (python3)", resolved here
 * (user and group databases, /proc/PID/comm); the number alone when there
 * is none. annotate_ids() adds them to a reply for --json: "user" beside
 * every "uid", "group" beside "gid", "process" beside "pid".
 */
const char *user_of(double uid, char *buf, size_t size);
const char *group_of(double gid, char *buf, size_t size);
const char *process_of(double pid, char *buf, size_t size);
void annotate_ids(cJSON *reply);

/* An empty table says so, the same way everywhere: "No regions." or, with
 * why, "No RDMA devices: why". A full one ends with its count. */
void table_empty(const char *what, const char *why);
void table_count(int n, const char *one, const char *many);

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
int region_params(char *const *args, char **ret);
int descriptor_params(char *const *args, char **ret);

/* Commands of their own: several calls, or none but the one named. doctor
 * connects itself (c is NULL): the daemon may be down. */
int verb_peers(struct rdmamem_client *c, char *const *args);
int verb_doctor(struct rdmamem_client *c, char *const *args);
int verb_call(struct rdmamem_client *c, char *const *args);
int verb_retry(struct rdmamem_client *c, char *const *args);

/* doctor.c, doctor_host.c */
struct checks {
	cJSON *list; /* --json */
	int failed, warned;
};

void check(struct checks *ck, const char *status, const char *what, const char *hint,
	   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* answered: whether the daemon answered on the socket. */
void doctor_socket(struct checks *ck, bool answered);
void doctor_units(struct checks *ck, bool answered);
void doctor_memlock_here(struct checks *ck);

#endif
