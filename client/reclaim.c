/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Regions kept across the daemon's restarts: the tokens Register gave, the
 * devices RegisterOn named, and the reconnect that reclaims them
 * (rdmamem.h, "Restarts of the daemon").
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client-internal.h"
#include "staging.h"
#include "proto/json.h"

/* Between two tries to connect while the daemon restarts. */
#define RECONNECT_RETRY_MSEC 50

static struct rdmamem__kept *kept_find(struct rdmamem_client *c, uint64_t region)
{
	for (size_t i = 0; i < c->n_kept; i++)
		if (c->kept[i].region == region)
			return &c->kept[i];
	return NULL;
}

static void kept_free(struct rdmamem__kept *k)
{
	for (size_t i = 0; i < k->n_devices; i++)
		free(k->devices[i]);
	free(k->devices);
}

int rdmamem__kept_add(struct rdmamem_client *c, uint64_t region, const char *token)
{
	struct rdmamem__kept *k;

	if (strlen(token) >= sizeof(k->token))
		return -EPROTO;
	if (c->n_kept == c->cap_kept) {
		size_t cap = MAX(c->cap_kept * 2, (size_t)8);

		k = realloc(c->kept, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		c->kept = k;
		c->cap_kept = cap;
	}
	k = &c->kept[c->n_kept++];
	*k = (struct rdmamem__kept){ .region = region };
	strcpy(k->token, token);
	return 0;
}

void rdmamem__kept_device(struct rdmamem_client *c, uint64_t region, const char *device)
{
	struct rdmamem__kept *k = kept_find(c, region);
	char **d, *name;

	if (!k)
		return;
	for (size_t i = 0; i < k->n_devices; i++)
		if (strcmp(k->devices[i], device) == 0)
			return;
	/* Best effort: the daemon's own state names the devices too. */
	d = realloc(k->devices, (k->n_devices + 1) * sizeof(*d));
	if (!d)
		return;
	k->devices = d;
	name = strdup(device);
	if (name)
		k->devices[k->n_devices++] = name;
}

void rdmamem__kept_forget(struct rdmamem_client *c, uint64_t region)
{
	struct rdmamem__kept *k = kept_find(c, region);

	if (!k)
		return;
	kept_free(k);
	*k = c->kept[--c->n_kept];
}

void rdmamem__kept_done(struct rdmamem_client *c)
{
	for (size_t i = 0; i < c->n_kept; i++)
		kept_free(&c->kept[i]);
	free(c->kept);
	c->kept = NULL;
	c->n_kept = c->cap_kept = 0;
}

int rdmamem__registration_parse(const cJSON *o, struct rdmamem_registration *ret)
{
	const cJSON *device = cJSON_GetObjectItemCaseSensitive(o, "device");
	uint64_t lkey = 0, rkey = 0;

	memset(ret, 0, sizeof(*ret));
	if (cJSON_IsString(device))
		snprintf(ret->device, sizeof(ret->device), "%s", device->valuestring);
	if (json_get_u64(o, "addr", &ret->addr) < 0 ||
	    json_get_u64(o, "length", &ret->length) < 0 || json_get_u64(o, "lkey", &lkey) < 0 ||
	    json_get_u64(o, "rkey", &rkey) < 0)
		return -EPROTO;
	ret->lkey = (uint32_t)lkey;
	ret->rkey = (uint32_t)rkey;
	return 0;
}

_public_ int rdmamem_client_on_reclaim(struct rdmamem_client *c, rdmamem_reclaim_fn fn,
				       void *userdata)
{
	if (!c)
		return -EINVAL;
	c->on_reclaim = fn;
	c->on_reclaim_userdata = userdata;
	return 0;
}

static uint64_t now_msec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A new socket to the same path; while the daemon restarts there may be
 * nobody at it for a moment (a socket unit keeps it: then at once). */
static int connect_again(struct rdmamem_client *c, int *ret_fd)
{
	uint64_t deadline = c->timeout_ms < 0 ? UINT64_MAX : now_msec() + (uint64_t)c->timeout_ms;
	int r;

	for (;;) {
		r = rdmamem__connect_fd(c->path, ret_fd);
		if (r != -ENOENT && r != -ECONNREFUSED)
			return r;
		if (now_msec() >= deadline)
			return r;
		(void)poll(NULL, 0, RECONNECT_RETRY_MSEC);
	}
}

/* Tells the user how region came back: its registrations now, or why not. */
static void report(struct rdmamem_client *c, uint64_t region, int error, const cJSON *reply)
{
	struct rdmamem_registration *regs = NULL;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(reply, "registrations"), *it;
	size_t n = 0;

	if (!c->on_reclaim)
		return;
	/* It must not call the library: blocking calls refuse while this
	 * counts, as in a reply callback. */
	c->dispatching++;
	if (!error && cJSON_GetArraySize(list) > 0)
		regs = calloc((size_t)cJSON_GetArraySize(list), sizeof(*regs));
	cJSON_ArrayForEach(it, list)
		if (regs && rdmamem__registration_parse(it, &regs[n]) == 0)
			n++;
	c->on_reclaim(c->on_reclaim_userdata, region, error, regs, n);
	c->dispatching--;
	free(regs);
}

/* Reclaim of one kept region: 1 when it came back, 0 when it is gone
 * (forgotten), 2 when it failed another way (kept for the next reconnect),
 * or the error that broke the new connection. */
static int reclaim_one(struct rdmamem_client *c, size_t i)
{
	struct rdmamem__kept *k = &c->kept[i];
	_cleanup_json_ cJSON *p = cJSON_CreateObject();
	_cleanup_json_ cJSON *root = NULL;
	cJSON *reply = NULL, *devices;
	uint64_t region = k->region;
	int r;

	devices = p ? cJSON_AddArrayToObject(p, "devices") : NULL;
	if (!devices || json_add_u64(p, "region", region) < 0 ||
	    json_add_string(p, "token", k->token) < 0)
		return -ENOMEM;
	for (size_t d = 0; d < k->n_devices; d++)
		if (!cJSON_AddItemToArray(devices, cJSON_CreateString(k->devices[d])))
			return -ENOMEM;
	/* Registration pins memory: no deadline of ours on it, as RegisterOn. */
	r = rdmamem__call(c, "io.rdmamemd.Reclaim", p, NULL, 0, -1, &root, &reply, NULL, NULL);
	if (c->dead)
		return c->dead;
	report(c, region, r, reply);
	/* Not kept, or not ours: forgotten. Another failure (memory) leaves
	 * it for the next reconnect. */
	if (r == -ENOENT || r == -EACCES) {
		rdmamem__kept_forget(c, region);
		return 0;
	}
	return r < 0 ? 2 : 1;
}

/* Whether the daemon closed the connection (one poll(), no wait). */
static bool daemon_closed(const struct rdmamem_client *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN | POLLRDHUP };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

_public_ int rdmamem_client_reconnect(struct rdmamem_client *c)
{
	int fd = -EBADF, r, n = 0;

	if (!c)
		return -EINVAL;
	if (c->dispatching || c->reconnecting || c->op_depth)
		return -EBUSY;
	/* A connection the daemon has not closed keeps what it holds. */
	if (!c->dead && !daemon_closed(c)) {
		rdmamem__set_error(c, NULL, "the connection to '%s' is up; nothing to reconnect",
				   c->path);
		return -EISCONN;
	}
	r = connect_again(c, &fd);
	if (r < 0) {
		rdmamem__set_error(c, NULL, "cannot reconnect to the daemon at '%s': %s", c->path,
				   strerror(-r));
		return r;
	}
	/* The old connection's calls end; its staging region went with it. */
	if (!c->dead)
		rdmamem__client_fail(c, -ECONNRESET);
	rdmamem__drop_calls(c);
	rdmamem__staging_done(c);
	safe_close(c->fd);
	c->fd = fd;
	frame_reader_done(&c->in);
	frame_reader_init(&c->in, VARLINK_BODY_MAX);
	c->dead = 0;
	c->dead_untold = false;
	free(c->dead_message);
	c->dead_message = NULL;

	c->reconnecting = true;
	for (size_t i = 0; i < c->n_kept;) {
		r = reclaim_one(c, i);
		if (r < 0)
			break;
		n += r == 1;
		/* A region forgotten: the last one took its place. */
		if (r > 0)
			i++;
	}
	c->reconnecting = false;
	return r < 0 ? r : n;
}

int rdmamem__reclaim_if_needed(struct rdmamem_client *c)
{
	int r;

	/* Only with something to take back, and only once the daemon closed
	 * the connection: otherwise a broken connection stays broken, as the
	 * caller was told. */
	if (c->reconnecting || c->op_depth || c->n_kept == 0)
		return 0;
	/* A daemon that went while this client was idle: one poll() tells,
	 * so that the call need not fail first. */
	if (!c->dead && list_empty(&c->calls) && daemon_closed(c))
		rdmamem__client_fail(c, -ECONNRESET);
	if (c->dead != -ECONNRESET)
		return 0;
	r = rdmamem_client_reconnect(c);
	return r < 0 ? r : 0;
}
