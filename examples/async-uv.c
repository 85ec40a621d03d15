/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librdmamem's asynchronous API in a libuv loop: each connection is a
 * uv_poll on its fd and a uv_timer for its nearest deadline; a uv_prepare
 * asks every connection what it waits for before the loop sleeps.
 *
 * One connection holds a lease; a second asks for the same lock (the call
 * waits in the daemon) and queues a Ping behind it; the first keeps
 * pinging meanwhile, and after five Pings gives the lease back. A third
 * connection holds a stream of notifications ("more") open for the
 * duration. Varlink answers the calls of one connection in order, so
 * calls that must not wait for each other take connections of their own.
 *
 *   cc async-uv.c $(pkg-config --cflags --libs rdmamem libuv) -o async-uv
 *   ./async-uv [SOCKET]
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmamem.h>
#include <uv.h>

#define PINGS 5

/* One connection driven by the loop. */
struct driver {
	const char *name;
	struct rdmamem_client *c;
	uv_poll_t poll;
	uv_timer_t timer;
	int events; /* UV_READABLE | UV_WRITABLE being watched */
};

static struct driver holder = { .name = "holder" }, waiter = { .name = "waiter" },
		     listener = { .name = "listener" };
static struct driver *const drivers[] = { &holder, &waiter, &listener };
static uv_prepare_t prepare;
static uint64_t region, lease;
static unsigned pings, failures;
static int lock_done, behind_done;

static void drive(struct driver *d)
{
	int r;

	do
		r = rdmamem_client_process(d->c);
	while (r > 0);
	if (r < 0 && d->events) {
		fprintf(stderr, "%s: connection lost: %s\n", d->name, strerror(-r));
		failures++;
		uv_poll_stop(&d->poll);
		d->events = 0;
	}
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	drive(p->data);
}

static void on_timer(uv_timer_t *t)
{
	drive(t->data);
}

/* Before the loop sleeps: each connection's events and deadline. Callbacks
 * may have queued calls on any connection, so all are asked. */
static void on_prepare(uv_prepare_t *p)
{
	(void)p;
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
		struct driver *d = drivers[i];
		int ev = rdmamem_client_get_events(d->c), want;
		uint64_t t, now = uv_hrtime() / 1000;

		want = (ev & POLLIN ? UV_READABLE : 0) | (ev & POLLOUT ? UV_WRITABLE : 0);
		if (want != d->events) {
			if (want)
				uv_poll_start(&d->poll, want, on_poll);
			else
				uv_poll_stop(&d->poll);
			d->events = want;
		}
		/* uv_hrtime() and the library both count CLOCK_MONOTONIC. */
		rdmamem_client_get_timeout(d->c, &t);
		if (t == UINT64_MAX)
			uv_timer_stop(&d->timer);
		else
			uv_timer_start(&d->timer, on_timer, t > now ? (t - now + 999) / 1000 : 0,
				       0);
	}
}

static void shut_down(void)
{
	uv_prepare_stop(&prepare);
	uv_close((uv_handle_t *)&prepare, NULL);
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
		uv_close((uv_handle_t *)&drivers[i]->poll, NULL);
		uv_close((uv_handle_t *)&drivers[i]->timer, NULL);
	}
}

static int failed(const char *what, const struct rdmamem_reply *reply)
{
	if (reply->error == 0)
		return 0;
	fprintf(stderr, "%s: %s (%s)\n", what, reply->error_message,
		reply->error_name ?: strerror(-reply->error));
	failures++;
	shut_down();
	return -1;
}

static void on_ping(struct rdmamem_client *c, struct rdmamem_call *call,
		    const struct rdmamem_reply *reply, void *userdata);

static void on_unlock(struct rdmamem_client *c, struct rdmamem_call *call,
		      const struct rdmamem_reply *reply, void *userdata)
{
	(void)c;
	(void)call;
	(void)userdata;
	if (failed("Unlock", reply) == 0)
		printf("holder: lease given back\n");
}

static void on_ping(struct rdmamem_client *c, struct rdmamem_call *call,
		    const struct rdmamem_reply *reply, void *userdata)
{
	char p[64];

	(void)call;
	(void)userdata;
	if (failed("Ping", reply) < 0)
		return;
	pings++;
	printf("holder: ping %u answered%s\n", pings,
	       lock_done ? "" : " while the other connection's lock waits");
	if (pings < PINGS) {
		rdmamem_call_async(c, "io.rdmamemd.Ping", NULL, NULL, 0, 0, on_ping, NULL, NULL);
		return;
	}
	snprintf(p, sizeof(p), "{\"lease\":\"%" PRIu64 "\"}", lease);
	rdmamem_call_async(c, "io.rdmamemd.Unlock", p, NULL, 0, 0, on_unlock, NULL, NULL);
}

static void on_lock(struct rdmamem_client *c, struct rdmamem_call *call,
		    const struct rdmamem_reply *reply, void *userdata)
{
	(void)c;
	(void)call;
	(void)userdata;
	if (failed("Lock", reply) < 0)
		return;
	lock_done = 1;
	printf("waiter: lock granted after %u pings: %s\n", pings, reply->parameters);
}

static void on_behind(struct rdmamem_client *c, struct rdmamem_call *call,
		      const struct rdmamem_reply *reply, void *userdata)
{
	(void)c;
	(void)call;
	(void)userdata;
	if (failed("Ping behind the lock", reply) < 0)
		return;
	behind_done = 1;
	printf("waiter: ping behind the lock answered %s it\n", lock_done ? "after" : "BEFORE");
	shut_down();
}

static void on_notification(struct rdmamem_client *c, struct rdmamem_call *call,
			    const struct rdmamem_reply *reply, void *userdata)
{
	(void)c;
	(void)call;
	(void)userdata;
	if (failed("WaitNotifications", reply) == 0)
		printf("listener: %s%s\n", reply->parameters,
		       reply->flags & RDMAMEM_REPLY_CONTINUES ? " (more follow)" : "");
}

int main(int argc, char **argv)
{
	const char *socket = argc > 1 ? argv[1] : NULL;
	uv_loop_t *loop = uv_default_loop();
	struct rdmamem_call *stream = NULL;
	char p[128];
	int fd = -1, r = 0;

	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]) && r == 0; i++) {
		r = rdmamem_client_connect(socket, &drivers[i]->c);
		if (r == 0) {
			uv_poll_init(loop, &drivers[i]->poll, rdmamem_client_get_fd(drivers[i]->c));
			uv_timer_init(loop, &drivers[i]->timer);
			drivers[i]->poll.data = drivers[i]->timer.data = drivers[i];
		}
	}
	if (r < 0) {
		fprintf(stderr, "connect: %s\n", strerror(-r));
		return 1;
	}
	/* Set up with the blocking calls: they are the same engine. */
	r = rdmamem_memfd_create("async-uv", 4096, &fd, NULL);
	if (r == 0)
		r = rdmamem_register(holder.c, fd, 0, 0, &region);
	if (r == 0)
		r = rdmamem_lock(holder.c, region, RDMAMEM_LOCK_EXCLUSIVE, 0, &lease);
	if (r < 0) {
		fprintf(stderr, "setup: %s\n", rdmamem_client_error_message(holder.c));
		return 1;
	}
	printf("holder: region %" PRIu64 ", exclusive lease %" PRIu64 "\n", region, lease);

	snprintf(p, sizeof(p),
		 "{\"region\":\"%" PRIu64 "\",\"mode\":\"exclusive\",\"timeout_ms\":10000}",
		 region);
	rdmamem_call_async(waiter.c, "io.rdmamemd.Lock", p, NULL, 0, 0, on_lock, NULL, NULL);
	rdmamem_call_async(waiter.c, "io.rdmamemd.Ping", NULL, NULL, 0, 0, on_behind, NULL, NULL);
	rdmamem_call_async(listener.c, "io.rdmamemd.WaitNotifications", NULL, NULL, 0,
			   RDMAMEM_CALL_MORE, on_notification, NULL, &stream);
	/* The stream has no end: no deadline for it. */
	rdmamem_call_set_timeout(stream, -1);
	rdmamem_call_async(holder.c, "io.rdmamemd.Ping", NULL, NULL, 0, 0, on_ping, NULL, NULL);

	uv_prepare_init(loop, &prepare);
	uv_prepare_start(&prepare, on_prepare);
	uv_run(loop, UV_RUN_DEFAULT);

	/* Closing a connection ends its calls, the stream too. */
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		rdmamem_client_close(drivers[i]->c);
	close(fd);
	uv_loop_close(loop);
	if (failures || !behind_done)
		return 1;
	printf("done\n");
	return 0;
}
