/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "daemon/core/budget.h"
#include "daemon/core/offload.h"

void offload_init(struct offload *o, uv_loop_t *loop)
{
	o->loop = loop;
	list_init(&o->waiting);
	o->running = 0;
}

static void on_work(uv_work_t *w)
{
	struct offload_job *j = container_of(w, struct offload_job, work);

	j->run(j);
}

static void offload_start_next(struct offload *o);

static void on_work_done(uv_work_t *w, int status)
{
	struct offload_job *j = container_of(w, struct offload_job, work);
	struct offload *o = j->offload;

	/* Never cancelled: nothing calls uv_cancel() on these. */
	(void)status;
	o->running--;
	j->done(j);
	offload_start_next(o);
}

static void offload_start_next(struct offload *o)
{
	while (o->running < OFFLOAD_RUNNING_MAX && !list_empty(&o->waiting)) {
		struct offload_job *j = list_first_entry(&o->waiting, struct offload_job, link);

		list_del(&j->link);
		j->started = true;
		o->running++;
		if (uv_queue_work(o->loop, &j->work, on_work, on_work_done) < 0) {
			/* No pool: the work has to be done all the same. */
			o->running--;
			j->run(j);
			j->done(j);
		}
	}
}

bool offload_cancel(struct offload_job *j)
{
	if (j->started)
		return false;
	list_del(&j->link);
	j->done(j);
	return true;
}

static void offload_enqueue(struct offload *o, struct offload_job *j, bool first)
{
	j->offload = o;
	j->started = false;
	list_add_tail(&j->link, first ? o->waiting.next : &o->waiting);
	offload_start_next(o);
}

void offload_submit(struct offload *o, struct offload_job *j)
{
	offload_enqueue(o, j, false);
}

/* Memory given back on the pool: a tree, a large array. */
struct deferred_free {
	struct offload_job job;
	void (*free)(void *p);
	void *p;
	struct budget_charge charge;
};

static void deferred_free_run(struct offload_job *j)
{
	struct deferred_free *df = container_of(j, struct deferred_free, job);

	df->free(df->p);
}

static void deferred_free_done(struct offload_job *j)
{
	struct deferred_free *df = container_of(j, struct deferred_free, job);

	budget_charge_release(&df->charge);
	free(df);
}

static void deferred_free(struct offload *o, void (*fn)(void *p), void *p,
			  struct budget_charge *charge)
{
	struct deferred_free *df = p ? calloc(1, sizeof(*df)) : NULL;

	if (!df) {
		if (p)
			fn(p);
		if (charge)
			budget_charge_release(charge);
		return;
	}
	df->free = fn;
	df->p = p;
	if (charge) {
		df->charge = *charge;
		*charge = (struct budget_charge){};
	}
	df->job.run = deferred_free_run;
	df->job.done = deferred_free_done;
	offload_enqueue(o, &df->job, true);
}

static void json_delete(void *p)
{
	cJSON_Delete(p);
}

void offload_json_delete(struct offload *o, cJSON *root, struct budget_charge *charge)
{
	deferred_free(o, json_delete, root, charge);
}

void offload_free(struct offload *o, void *p)
{
	deferred_free(o, free, p, NULL);
}
