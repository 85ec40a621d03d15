/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "daemon/core/budget.h"
#include "daemon/core/offload.h"

void offload_init(struct offload *o, uv_loop_t *loop)
{
	o->loop = loop;
	list_init(&o->waiting);
	o->running = 0;
	o->n_waiting = 0;
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
		o->n_waiting--;
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
	j->offload->n_waiting--;
	j->done(j);
	return true;
}

static void offload_enqueue(struct offload *o, struct offload_job *j, bool first)
{
	j->offload = o;
	j->started = false;
	list_add_tail(&j->link, first ? o->waiting.next : &o->waiting);
	o->n_waiting++;
	offload_start_next(o);
}

void offload_submit(struct offload *o, struct offload_job *j)
{
	offload_enqueue(o, j, false);
}

struct json_delete {
	struct offload_job job;
	cJSON *root;
	struct budget_charge charge;
};

static void json_delete_run(struct offload_job *j)
{
	struct json_delete *jd = container_of(j, struct json_delete, job);

	cJSON_Delete(jd->root);
}

static void json_delete_done(struct offload_job *j)
{
	struct json_delete *jd = container_of(j, struct json_delete, job);

	budget_charge_release(&jd->charge);
	free(jd);
}

void offload_json_delete(struct offload *o, cJSON *root, struct budget_charge *charge)
{
	struct json_delete *jd = root ? calloc(1, sizeof(*jd)) : NULL;

	if (!jd) {
		cJSON_Delete(root);
		budget_charge_release(charge);
		return;
	}
	jd->root = root;
	jd->charge = *charge;
	*charge = (struct budget_charge){};
	jd->job.run = json_delete_run;
	jd->job.done = json_delete_done;
	offload_enqueue(o, &jd->job, true);
}
