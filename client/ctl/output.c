/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl: the daemon's replies read and formatted, calls made. */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/json.h"
#include "util/macro.h"
#include "rdmamem.h"
#include "ctl/ctl.h"

const char *arg_socket;
bool arg_json;
/* Prints a byte count the way people read them: 1.5 GiB. */
void format_bytes(uint64_t v, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	size_t u = 0;

	while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", v);
	else
		snprintf(buf, size, "%.1f %s", d, units[u]);
}

void format_duration(uint64_t msec, char *buf, size_t size)
{
	uint64_t s = msec / 1000;

	if (s >= 86400)
		snprintf(buf, size, "%" PRIu64 "d %" PRIu64 "h", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, size, "%" PRIu64 "h %" PRIu64 "min", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, size, "%" PRIu64 "min %" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, size, "%" PRIu64 ".%03" PRIu64 "s", s, msec % 1000);
}

const char *get_string(const cJSON *o, const char *name)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(i) ? i->valuestring : "?";
}

double get_number(const cJSON *o, const char *name)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(i) ? i->valuedouble : -1;
}

bool get_bool(const cJSON *o, const char *name)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

uint64_t get_u64(const cJSON *o, const char *name)
{
	uint64_t v = 0;

	json_to_u64(cJSON_GetObjectItemCaseSensitive(o, name), &v);
	return v;
}

/* Calls method (every page of it when paged) and hands back the parsed
 * reply; prints the error itself. */
int call_paged(struct rdmamem_client *c, const char *method, const char *params, bool paged,
	       cJSON **ret)
{
	char *reply = NULL;
	int r;

	r = paged ? rdmamem_list(c, method, &reply) :
		    rdmamem_call(c, method, params, NULL, 0, &reply, NULL, NULL);
	if (r < 0) {
		const char *name = rdmamem_client_error_name(c);
		const char *msg = rdmamem_client_error_message(c);

		fprintf(stderr, "rdmamemctl: %s%s%s\n", name ? name : "", name ? ": " : "",
			msg ? msg : strerror(-r));
		free(reply);
		return r;
	}
	*ret = cJSON_Parse(reply);
	free(reply);
	if (!*ret) {
		fprintf(stderr, "rdmamemctl: the daemon's reply is not valid JSON\n");
		return -EPROTO;
	}
	return 0;
}

int call(struct rdmamem_client *c, const char *method, const char *params, cJSON **ret)
{
	return call_paged(c, method, params, false, ret);
}

int print_json(const cJSON *reply)
{
	char *text = cJSON_Print(reply);

	if (!text)
		return -ENOMEM;
	printf("%s\n", text);
	free(text);
	return 0;
}
static bool use_color;

void color_init(void)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	use_color = !arg_json && isatty(STDOUT_FILENO) && !(no && *no) &&
		    !(term && strcmp(term, "dumb") == 0);
}

const char *color(enum color c)
{
	static const char *const seq[] = {
		[COLOR_OFF] = "\033[0m",    [COLOR_BOLD] = "\033[1m",    [COLOR_RED] = "\033[1;31m",
		[COLOR_GREEN] = "\033[32m", [COLOR_YELLOW] = "\033[33m", [COLOR_GREY] = "\033[2m",
	};

	return use_color ? seq[c] : "";
}

const char *color_of_status(const char *status)
{
	static const struct {
		const char *status;
		enum color color;
	} map[] = {
		{ "PASS", COLOR_GREEN },       { "WARN", COLOR_YELLOW },
		{ "FAIL", COLOR_RED },         { "SKIP", COLOR_GREY },
		{ "ACTIVE", COLOR_GREEN },     { "established", COLOR_GREEN },
		{ "registered", COLOR_GREEN }, { "failed", COLOR_RED },
		{ "error", COLOR_RED },        { "FATAL", COLOR_RED },
	};

	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (strcmp(map[i].status, status) == 0)
			return color(map[i].color);
	return color(COLOR_YELLOW);
}

const char *user_of(double uid, char *buf, size_t size)
{
	struct passwd *pw = uid >= 0 ? getpwuid((uid_t)uid) : NULL;

	if (pw)
		snprintf(buf, size, "%.0f (%s)", uid, pw->pw_name);
	else
		snprintf(buf, size, "%.0f", uid);
	return buf;
}

const char *group_of(double gid, char *buf, size_t size)
{
	struct group *gr = gid >= 0 ? getgrgid((gid_t)gid) : NULL;

	if (gr)
		snprintf(buf, size, "%.0f (%s)", gid, gr->gr_name);
	else
		snprintf(buf, size, "%.0f", gid);
	return buf;
}

/* The command name of a process (/proc/PID/comm): NULL when gone. */
static char *comm_of(double pid, char *buf, size_t size)
{
	char path[64];
	FILE *f;
	bool ok;

	if (pid <= 0 || size < 2)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%.0f/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	ok = fgets(buf, size, f) != NULL;
	fclose(f);
	if (!ok)
		return NULL;
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

const char *process_of(double pid, char *buf, size_t size)
{
	char comm[32];

	if (comm_of(pid, comm, sizeof(comm)))
		snprintf(buf, size, "%.0f (%s)", pid, comm);
	else
		snprintf(buf, size, "%.0f", pid);
	return buf;
}

/* Walks the whole reply: every object with a numeric uid, gid or pid. */
void annotate_ids(cJSON *o)
{
	cJSON *item, *id;
	char name[64];

	if (!cJSON_IsObject(o) && !cJSON_IsArray(o))
		return;
	cJSON_ArrayForEach(item, o)
		annotate_ids(item);
	if (!cJSON_IsObject(o))
		return;
	id = cJSON_GetObjectItemCaseSensitive(o, "uid");
	if (cJSON_IsNumber(id) && id->valuedouble >= 0 && !cJSON_HasObjectItem(o, "user")) {
		struct passwd *pw = getpwuid((uid_t)id->valuedouble);

		if (pw)
			cJSON_AddStringToObject(o, "user", pw->pw_name);
	}
	id = cJSON_GetObjectItemCaseSensitive(o, "gid");
	if (cJSON_IsNumber(id) && id->valuedouble >= 0 && !cJSON_HasObjectItem(o, "group")) {
		struct group *gr = getgrgid((gid_t)id->valuedouble);

		if (gr)
			cJSON_AddStringToObject(o, "group", gr->gr_name);
	}
	id = cJSON_GetObjectItemCaseSensitive(o, "pid");
	if (cJSON_IsNumber(id) && !cJSON_HasObjectItem(o, "process") &&
	    comm_of(id->valuedouble, name, sizeof(name)))
		cJSON_AddStringToObject(o, "process", name);
}

void table_empty(const char *what, const char *why)
{
	printf("No %s%s%s.\n", what, why ? ": " : "", why ?: "");
}

void table_count(int n, const char *one, const char *many)
{
	printf("%s%d %s%s\n", color(COLOR_GREY), n, n == 1 ? one : many, color(COLOR_OFF));
}
