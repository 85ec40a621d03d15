/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CPU work a client can make as large as its messages — parsing a message of
 * megabytes, freeing the tree made of it — runs on the libuv thread pool, not
 * on the loop that serves everyone. At most OFFLOAD_RUNNING_MAX such jobs
 * occupy pool threads at a time (the rest wait their turn, in order), so that
 * transfers and registrations, which share the pool, always find a thread
 * however many clients send large messages.
 */
#ifndef RDMAMEMD_OFFLOAD_H
#define RDMAMEMD_OFFLOAD_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "util/list.h"

#define OFFLOAD_RUNNING_MAX 2U

struct offload {
	uv_loop_t *loop;
	struct list_head waiting; /* struct offload_job, in order */
	unsigned n_waiting;       /* on waiting: the metrics' queue depth */
	unsigned running;
};

struct offload_job {
	uv_work_t work;
	struct list_head link; /* in offload.waiting until it runs */
	bool started;
	struct offload *offload;
	void (*run)(struct offload_job *j);  /* on a pool thread */
	void (*done)(struct offload_job *j); /* on the loop, after run; may free j */
};

void offload_init(struct offload *o, uv_loop_t *loop);

/* Runs j->run on the pool, then j->done on the loop. Never fails: should the
 * pool refuse, both run right here. */
void offload_submit(struct offload *o, struct offload_job *j);

/* Takes back a job that has not started: its run never happens, its done
 * does, now. Returns false when it started already (done comes later). */
bool offload_cancel(struct offload_job *j);

struct budget_charge;

/* Frees a tree on the pool (inline when that cannot be had), then gives back
 * the input bytes charge counts for it (taken; may be empty). Frees go before
 * every job that waits: they give memory back, the others take more. */
void offload_json_delete(struct offload *o, cJSON *root, struct budget_charge *charge);

#endif
