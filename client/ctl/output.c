/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl: the daemon's replies read and formatted, calls made. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
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