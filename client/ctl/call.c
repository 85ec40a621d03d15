/* SPDX-License-Identifier: BSD-3-Clause */
/* rdmamemctl call and retry: any method by name, and RetryRegistration. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "util/macro.h"
#include "rdmamem.h"
#include "ctl/ctl.h"

/* Standard input, whole (a call's parameters: a JSON object). */
static char *read_stdin(void)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *p;

	while (buf) {
		size_t n = fread(buf + len, 1, cap - len - 1, stdin);

		len += n;
		if (n == 0)
			break;
		if (cap - len > 1)
			continue;
		cap *= 2;
		p = realloc(buf, cap);
		if (!p)
			free(buf);
		buf = p;
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}

/*
 * call METHOD [JSON]: what `varlinkctl call` does, on this daemon's socket
 * (file descriptors aside: methods that take them need a program). The
 * reply's parameters are printed as JSON; an error goes to stderr and,
 * with --json, as {"error": NAME, "parameters": {...}} to stdout too.
 */
int verb_call(struct rdmamem_client *c, char *const *args)
{
	_cleanup_free_ char *method = NULL, *input = NULL, *text = NULL, *answer = NULL;
	_cleanup_json_ cJSON *params = NULL, *reply = NULL;
	const char *name;
	int r;

	if (strchr(args[0], '.'))
		method = strdup(args[0]);
	else if (asprintf(&method, "io.rdmamemd.%s", args[0]) < 0)
		method = NULL;
	if (!method)
		return -ENOMEM;
	if (args[1] && strcmp(args[1], "-") == 0) {
		input = read_stdin();
		if (!input)
			return -ENOMEM;
	}
	params = cJSON_Parse(input ?: args[1] ?: "{}");
	if (!cJSON_IsObject(params)) {
		fprintf(stderr, "rdmamemctl: call: the parameters must be a JSON object, such as "
				"'{\"region\":\"1\"}'\n");
		return -EUSAGE;
	}
	text = cJSON_PrintUnformatted(params);
	if (!text)
		return -ENOMEM;
	r = rdmamem_call(c, method, text, NULL, 0, &answer, NULL, NULL);
	reply = answer ? cJSON_Parse(answer) : NULL;
	if (r < 0) {
		name = rdmamem_client_error_name(c);
		fprintf(stderr, "rdmamemctl: %s%s%s\n", name ?: "", name ? ": " : "",
			rdmamem_client_error_message(c) ?: strerror(-r));
		if (arg_json && name) {
			_cleanup_json_ cJSON *o = cJSON_CreateObject();

			if (!o || !cJSON_AddStringToObject(o, "error", name))
				return -ENOMEM;
			cJSON_AddItemToObject(o, "parameters",
					      TAKE_PTR(reply) ?: cJSON_CreateObject());
			print_json(o);
		}
		return r;
	}
	if (!reply) {
		fprintf(stderr, "rdmamemctl: the daemon's reply is not valid JSON\n");
		return -EPROTO;
	}
	return print_json(reply);
}

/* retry REGION DEVICE: RetryRegistration, which root alone may call. */
int verb_retry(struct rdmamem_client *c, char *const *args)
{
	_cleanup_free_ char *params = NULL;
	_cleanup_json_ cJSON *p = NULL, *reply = cJSON_CreateObject();
	const char *name;
	uint64_t id;
	int r;

	if (json_parse_u64(args[0], &id) < 0) {
		fprintf(stderr, "rdmamemctl: 'retry' wants a region id, as 'regions' lists them\n");
		return -EUSAGE;
	}
	p = cJSON_CreateObject();
	if (!p || json_add_u64(p, "region", id) < 0 ||
	    !cJSON_AddStringToObject(p, "device", args[1]))
		return -ENOMEM;
	params = cJSON_PrintUnformatted(p);
	if (!params)
		return -ENOMEM;
	r = rdmamem_call(c, "io.rdmamemd.RetryRegistration", params, NULL, 0, NULL, NULL, NULL);
	name = rdmamem_client_error_name(c);
	/* The daemon names the parameter; its reason is in its log. */
	if (r < 0 && name && strcmp(name, "org.varlink.service.InvalidParameter") == 0) {
		fprintf(stderr,
			"rdmamemctl: %s: region %" PRIu64 " has no recorded failure on '%s' "
			"(rdmamemctl region %" PRIu64 " lists its registrations)\n",
			name, id, args[1], id);
		return r;
	}
	if (r < 0) {
		fprintf(stderr, "rdmamemctl: %s%s%s\n", name ?: "", name ? ": " : "",
			rdmamem_client_error_message(c) ?: strerror(-r));
		return r;
	}
	if (arg_json)
		return print_json(reply);
	printf("region %" PRIu64 ": the failure on %s is forgotten; the next registration "
	       "there tries again\n",
	       id, args[1]);
	return 0;
}
