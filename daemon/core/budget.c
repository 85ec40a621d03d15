/* SPDX-License-Identifier: BSD-3-Clause */
#include <inttypes.h>

#include "daemon/core/account.h"
#include "daemon/core/budget.h"
#include "daemon/core/core.h"
#include "daemon/core/config.h"
#include "daemon/core/session.h"

static const struct {
	const char *waits; /* what a connection in line does not do */
	const char *held;  /* what the bytes are */
	/* The pass lets its holder grow on past the limits until it is given
	 * back; else it was for one step, and the holder's next one waits. */
	bool pass_covers;
} kinds[BUDGET_KINDS] = {
	[BUDGET_INPUT] = { "waits to be read", "of messages buffered", true },
	[BUDGET_OUTPUT] = { "waits for room for its replies", "of replies held", false },
};

static void on_wake(uv_timer_t *t);

void budget_init(struct budget *budgets, const struct daemon_config *cfg, budget_retry_fn retry,
		 uint64_t log_interval_msec)
{
	for (unsigned k = 0; k < BUDGET_KINDS; k++) {
		struct budget *b = &budgets[k];

		b->kind = k;
		b->cfg = cfg;
		b->retry = retry;
		list_init(&b->waiters);
		b->log.interval_msec = log_interval_msec;
	}
}

void budget_start(struct budget *budgets, uv_loop_t *loop)
{
	for (unsigned k = 0; k < BUDGET_KINDS; k++) {
		budgets[k].loop = loop;
		uv_timer_init(loop, &budgets[k].wake);
	}
}

void budget_stop(struct budget *budgets)
{
	for (unsigned k = 0; k < BUDGET_KINDS; k++)
		core_close_handle((uv_handle_t *)&budgets[k].wake);
}

void budget_limits(const struct daemon_config *cfg, enum budget_kind k, uint64_t *ret_per_uid,
		   uint64_t *ret_all)
{
	*ret_per_uid = k == BUDGET_INPUT ? cfg->max_input_bytes_per_uid :
					   cfg->max_output_bytes_per_uid;
	*ret_all = k == BUDGET_INPUT ? cfg->max_input_bytes : cfg->max_output_bytes;
}

static struct budget *budget_of(const struct account *a, enum budget_kind k)
{
	return &a->table->budgets[k];
}

void budget_add(struct account *a, enum budget_kind k, uint64_t n)
{
	struct budget *b = budget_of(a, k);

	if (n == 0)
		return;
	b->n_uids += a->budget[k].bytes == 0;
	a->budget[k].bytes += n;
	b->bytes += n;
}

void budget_sub(struct account *a, enum budget_kind k, uint64_t n)
{
	struct budget *b = budget_of(a, k);

	if (n == 0)
		return;
	a->budget[k].bytes -= n;
	b->bytes -= n;
	b->n_uids -= a->budget[k].bytes == 0;
	budget_freed(b);
}

void budget_recharge(struct account *a, enum budget_kind k, uint64_t *charged, uint64_t now)
{
	if (now > *charged)
		budget_add(a, k, now - *charged);
	else
		budget_sub(a, k, *charged - now);
	*charged = now;
}

void budget_charge_release(struct budget_charge *ch)
{
	if (!ch->account)
		return;
	budget_sub(ch->account, ch->kind, ch->bytes);
	account_unref(ch->account);
	*ch = (struct budget_charge){};
}

/* Whether s's uid is within its limit, and within the daemon-wide one or
 * its share of it, after grow more bytes. */
static void budget_room(const struct session *s, enum budget_kind k, uint64_t grow, bool *ret_uid,
			bool *ret_all)
{
	const struct budget_use *u = &s->account->budget[k];
	const struct budget *b = budget_of(s->account, k);
	unsigned n_uids = b->n_uids + (u->bytes == 0);
	uint64_t per_uid, all;

	budget_limits(b->cfg, k, &per_uid, &all);
	*ret_uid = u->bytes + grow <= per_uid;
	*ret_all = b->bytes + grow <= all || u->bytes + grow <= all / n_uids;
}

bool budget_has_room(const struct session *s, enum budget_kind k, uint64_t grow)
{
	bool uid_room, all_room;

	budget_room(s, k, grow, &uid_room, &all_room);
	return uid_room && all_room;
}

/*
 * Past a limit only a connection with the pass for it goes, and a waiter
 * gets a pass that is free: the line is tried oldest first, so the oldest
 * one. A pass that does not cover growth is no way past for its holder's
 * next step either: it waits until the pass is given back.
 */
bool budget_admit(const struct session *s, struct budget_wait *w, enum budget_kind k, uint64_t grow)
{
	struct budget_use *u = &s->account->budget[k];
	struct budget *b = budget_of(s->account, k);
	bool covers = kinds[k].pass_covers, uid_room, all_room;

	budget_room(s, k, grow, &uid_room, &all_room);
	uid_room = uid_room || (covers && u->exempt == w);
	all_room = all_room || (covers && b->exempt == w);
	if (uid_room && all_room)
		return true;
	if (!w->waiting || (u->exempt && (u->exempt != w || !covers)) || (!all_room && b->exempt))
		return false;
	u->exempt = w;
	if (!all_room)
		b->exempt = w;
	return true;
}

void budget_unexempt(const struct session *s, struct budget_wait *w, enum budget_kind k)
{
	struct budget_use *u = &s->account->budget[k];
	struct budget *b = budget_of(s->account, k);

	if (u->exempt == w) {
		u->exempt = NULL;
		budget_freed(b);
	}
	if (b->exempt == w) {
		b->exempt = NULL;
		budget_freed(b);
	}
}

void budget_freed(struct budget *b)
{
	if (!list_empty(&b->waiters) && !uv_is_active((uv_handle_t *)&b->wake))
		uv_timer_start(&b->wake, on_wake, 0, 0);
}

void budget_wait(const struct session *s, struct budget_wait *w, enum budget_kind k, uint64_t want)
{
	struct budget *b = budget_of(s->account, k);
	const struct budget_use *u = &s->account->budget[k];
	uint64_t per_uid, all;
	unsigned held_back;

	w->want = want;
	if (w->waiting)
		return;
	w->waiting = true;
	list_add_tail(&w->link, &b->waiters);
	budget_limits(b->cfg, k, &per_uid, &all);
	if (ratelimit_pass(&b->log, uv_now(b->loop), &held_back))
		log_full_fields(LOG_NOTICE, 0, LOG_CLIENT(&s->cred),
				"Connection %" PRIu64 " (pid %d uid %u) %s: uid %u has %" PRIu64
				" bytes %s (limit %" PRIu64 "), all users %" PRIu64
				" (limit %" PRIu64 ") (%u more waits since the last message)",
				s->id, (int)s->cred.pid, (unsigned)s->cred.uid, kinds[k].waits,
				(unsigned)s->cred.uid, u->bytes, kinds[k].held, per_uid, b->bytes,
				all, held_back);
	/* Let the line move: w may be the one let past. */
	budget_freed(b);
}

void budget_unwait(struct budget_wait *w)
{
	if (!w->waiting)
		return;
	list_del(&w->link);
	w->waiting = false;
	w->want = 0;
}

/*
 * Room was freed: each waiter, oldest first, is tried again. Each is taken
 * off a private list before it is looked at and put back in line before it
 * is tried, so that a connection closed meanwhile (letting one go on can
 * close others) is on no list the walk still follows; one that may go on
 * leaves the line itself (budget.retry: conn_budget_retry()).
 */
static void on_wake(uv_timer_t *t)
{
	struct budget *b = container_of(t, struct budget, wake);
	struct list_head todo;

	list_init(&todo);
	while (!list_empty(&b->waiters)) {
		struct list_head *e = b->waiters.next;

		list_del(e);
		list_add_tail(e, &todo);
	}
	while (!list_empty(&todo)) {
		struct budget_wait *w = list_first_entry(&todo, struct budget_wait, link);

		list_del(&w->link);
		list_add_tail(&w->link, &b->waiters);
		b->retry(w->owner, b->kind);
	}
}
