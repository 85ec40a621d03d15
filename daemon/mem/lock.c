/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "daemon/mem/lock.h"

static const char *const mode_names[_LOCK_MODE_MAX] = {
	[LOCK_SHARED] = "shared",
	[LOCK_DISJOINT] = "disjoint",
	[LOCK_EXCLUSIVE] = "exclusive",
};

void lock_init(struct access_lock *l)
{
	*l = (struct access_lock){ .state = LOCK_IDLE };
	list_init(&l->waiters);
}

bool lock_is_idle(const struct access_lock *l)
{
	return l->state == LOCK_IDLE && l->n_waiters == 0;
}

static enum lock_state state_for(enum lock_mode m)
{
	switch (m) {
	case LOCK_SHARED:
		return LOCK_READING;
	case LOCK_DISJOINT:
		return LOCK_DISJOINT_WRITING;
	default:
		return LOCK_EXCLUSIVE_WRITING;
	}
}

/* Whether a request of mode m may join the current holders. */
static bool compatible(const struct access_lock *l, enum lock_mode m)
{
	if (l->state == LOCK_IDLE)
		return true;
	if (m == LOCK_EXCLUSIVE)
		return false;
	return l->state == state_for(m);
}

static void grant(struct access_lock *l, struct lock_request *req)
{
	l->state = state_for(req->mode);
	l->n_holders++;
	req->held = true;
}

/* Grants the compatible run at the head of the queue. Callbacks run after
 * the state is settled, since they may release or acquire again. */
static void grant_waiters(struct access_lock *l)
{
	struct list_head granted;
	struct lock_request *req, *next;

	list_init(&granted);
	while (!list_empty(&l->waiters)) {
		req = list_first_entry(&l->waiters, struct lock_request, link);
		if (!compatible(l, req->mode))
			break;
		list_del(&req->link);
		l->n_waiters--;
		req->waiting = false;
		grant(l, req);
		list_add_tail(&req->link, &granted);
	}
	list_for_each_entry_safe(req, next, &granted, link) {
		list_del(&req->link);
		req->granted(req);
	}
}

int lock_acquire(struct access_lock *l, struct lock_request *req, enum lock_mode mode,
		 bool try_only, lock_granted_fn granted, void *userdata)
{
	*req = (struct lock_request){ .mode = mode, .granted = granted, .userdata = userdata };
	list_init(&req->link);

	/* No barging: with anyone queued, even a compatible request waits. */
	if (l->n_waiters == 0 && compatible(l, mode)) {
		grant(l, req);
		return 1;
	}
	if (try_only)
		return -EAGAIN;
	req->waiting = true;
	list_add_tail(&req->link, &l->waiters);
	l->n_waiters++;
	return 0;
}

void lock_release(struct access_lock *l, struct lock_request *req)
{
	if (!req->held)
		return;
	req->held = false;
	if (--l->n_holders == 0)
		l->state = LOCK_IDLE;
	grant_waiters(l);
}

void lock_cancel(struct access_lock *l, struct lock_request *req)
{
	if (!req->waiting)
		return;
	req->waiting = false;
	list_del(&req->link);
	l->n_waiters--;
	/* The withdrawn request may have been what blocked the ones behind
	 * it (an exclusive waiter ahead of readers that can join holders). */
	grant_waiters(l);
}

const char *lock_mode_to_string(enum lock_mode m)
{
	return m < _LOCK_MODE_MAX ? mode_names[m] : "unknown";
}

int lock_mode_from_string(const char *s)
{
	for (int m = 0; m < _LOCK_MODE_MAX; m++)
		if (strcmp(mode_names[m], s) == 0)
			return m;
	return -EINVAL;
}

const char *lock_state_to_string(enum lock_state s)
{
	switch (s) {
	case LOCK_IDLE:
		return "idle";
	case LOCK_READING:
		return "reading";
	case LOCK_DISJOINT_WRITING:
		return "disjoint-writing";
	case LOCK_EXCLUSIVE_WRITING:
		return "exclusive";
	}
	return "unknown";
}
