/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The three-mode access lock of a region (Monarch's AccessLock, made
 * asynchronous): shared readers run together, disjoint writers run together,
 * the two groups exclude each other, and an exclusive holder runs alone.
 *
 * Fairness is strict FIFO: a request is granted at once only if nobody is
 * waiting and it is compatible with the holders; otherwise it queues. When
 * holders leave, the longest run of mutually compatible requests at the head
 * of the queue is granted together. So a stream of readers cannot starve a
 * waiting writer: readers that arrive after it wait behind it.
 *
 * Pure state machine, no libuv: grants are reported through callbacks, which
 * run synchronously from lock_acquire() (immediate grant) or from
 * lock_release()/lock_cancel() of another request.
 */
#ifndef RDMAMEMD_LOCK_H
#define RDMAMEMD_LOCK_H

#include <stdbool.h>

#include "util/list.h"

enum lock_mode {
	LOCK_SHARED,
	LOCK_DISJOINT,
	LOCK_EXCLUSIVE,
	_LOCK_MODE_MAX,
};

enum lock_state {
	LOCK_IDLE,
	LOCK_READING,           /* n shared holders */
	LOCK_DISJOINT_WRITING,  /* n disjoint holders */
	LOCK_EXCLUSIVE_WRITING, /* one holder */
};

struct lock_request;
typedef void (*lock_granted_fn)(struct lock_request *req);

struct lock_request {
	struct list_head link; /* in lock->waiters while waiting */
	enum lock_mode mode;
	bool waiting;
	bool held;
	lock_granted_fn granted;
	void *userdata;
};

struct access_lock {
	enum lock_state state;
	unsigned n_holders;
	unsigned n_waiters;
	struct list_head waiters;
};

void lock_init(struct access_lock *l);
bool lock_is_idle(const struct access_lock *l);

/*
 * Asks for the lock. Returns 1 if granted now (granted() is NOT called),
 * 0 if queued (granted() is called later). With try_only, a request that
 * would queue is not queued and -EAGAIN is returned.
 */
int lock_acquire(struct access_lock *l, struct lock_request *req, enum lock_mode mode,
		 bool try_only, lock_granted_fn granted, void *userdata);

/* Gives a held lock back; waiters that can now run are granted. */
void lock_release(struct access_lock *l, struct lock_request *req);

/* Withdraws a waiting request (timeout, disconnect); may grant others. */
void lock_cancel(struct access_lock *l, struct lock_request *req);

const char *lock_mode_to_string(enum lock_mode m);
int lock_mode_from_string(const char *s);
const char *lock_state_to_string(enum lock_state s);

#endif
