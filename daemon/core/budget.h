/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Budgets: bytes the daemon holds for its clients' messages, bounded for each
 * uid and for all uids together, so that no client (nor many) can make the
 * daemon take memory without bound: the OOM killer would take every client's
 * regions with it. Two kinds, one machinery:
 *
 * - input: what clients send, before it is served: the connection's input
 *   buffer, then a large message until its tree is freed (conn.c);
 * - output: replies, from when they are queued until they have left, and a
 *   large reply (a Read's, megabytes of base64 made on the pool) from before
 *   it is made (its size is known when the call comes, and reserved then)
 *   until it is queued (conn.c).
 *
 * Bytes are counted in the uid's account and in the daemon's total. A
 * connection whose next step would pass a limit waits: it is not read
 * (input), or takes no call and makes no large reply (output), until room is
 * freed. That is back-pressure: its client's writes block, nothing is
 * refused. Waiters stand in one line per kind, oldest first, and are tried
 * again, in order, each time bytes are given back.
 *
 * Waiting alone could deadlock: a uid's connections may all hold unfinished
 * messages, each waiting for room the others hold, and a budget may be
 * smaller than one message or reply. So the oldest waiter that finds no room
 * gets a pass for the limit it is over: one connection of a uid and one
 * daemon-wide at a time, until what it was let past for is done
 * (budget_unexempt(): its message complete, its reply sent) or it closes. A
 * uid's budget is passed by at most one message and one reply. The
 * daemon-wide pass comes with its uid's, so that its holder waits for
 * nothing: were they held by two connections of one uid, each could wait for
 * the other's. Nor may many uids, each within its own budget, crowd one out
 * of the daemon's: a uid within its share of the daemon-wide limit (divided
 * among the uids with bytes held) is not held back by it. The uids over
 * their share came in while there was room, so all together hold at most
 * twice that limit (and a pass past it).
 *
 * Budgets know no connection: a waiter is a struct budget_wait that its
 * owner (a connection, in ipc) embeds, and the line calls the owner back
 * through budget.retry when it may try again. The client a waiter stands for
 * is its session (its account, and its id and credentials for the log).
 */
#ifndef RDMAMEMD_BUDGET_H
#define RDMAMEMD_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon/core/account.h"
#include "daemon/core/log.h"
#include "util/list.h"

struct daemon_config;
struct session;

/* One kind, one waiter (in its owner: struct conn). */
struct budget_wait {
	void *owner;           /* passed to budget.retry */
	struct list_head link; /* in budget.waiters while waiting */
	bool waiting;
	uint64_t want; /* the bytes it waits for; 0: room at all */
};

/* Tries owner's step of kind k again: it leaves the line itself
 * (budget_unwait()) once it may go on. Runs on the loop, from the timer. */
typedef void (*budget_retry_fn)(void *owner, enum budget_kind k);

/* One kind, daemon-wide (in struct server). */
struct budget {
	enum budget_kind kind;
	const struct daemon_config *cfg; /* the limits, read at each use (reloads) */
	uv_loop_t *loop;
	budget_retry_fn retry;
	uint64_t bytes;                   /* held for all uids: their accounts' sum */
	unsigned n_uids;                  /* accounts that hold some */
	const struct budget_wait *exempt; /* let past the daemon-wide limit, or NULL */
	struct list_head waiters;         /* struct budget_wait, oldest first */
	uv_timer_t wake;                  /* tries them again once room was freed */
	struct ratelimit log;
};

/*
 * Bytes of one thing that is no connection's any more (a message parsed and
 * served, its tree freed off the loop), counted until it is freed.
 */
struct budget_charge {
	struct account *account; /* a reference while bytes are counted */
	enum budget_kind kind;
	uint64_t bytes;
};

/* Sets up the budgets of each kind (an array of BUDGET_KINDS);
 * budget_start() once the loop may know their memory. */
void budget_init(struct budget *budgets, const struct daemon_config *cfg, budget_retry_fn retry,
		 uint64_t log_interval_msec);
void budget_start(struct budget *budgets, uv_loop_t *loop);
/* Closes the timers (they must have been started). */
void budget_stop(struct budget *budgets);

/* The limits of kind k: for one uid, for all. */
void budget_limits(const struct daemon_config *cfg, enum budget_kind k, uint64_t *ret_per_uid,
		   uint64_t *ret_all);

/* Counts n more bytes of a's as held, in a's total and the daemon's. */
void budget_add(struct account *a, enum budget_kind k, uint64_t n);
/* Counts n of them as freed: waiters may go on. */
void budget_sub(struct account *a, enum budget_kind k, uint64_t n);
/* *charged, bytes of a's counted, become now. */
void budget_recharge(struct account *a, enum budget_kind k, uint64_t *charged, uint64_t now);
/* Gives back what ch holds and empties it. */
void budget_charge_release(struct budget_charge *ch);

/* In the functions below, w is the waiter of kind k of a client whose
 * session is s (w stands for it in the line and holds its passes). */

/* Whether s's uid may hold grow more bytes of kind k within the limits,
 * passes aside. */
bool budget_has_room(const struct session *s, enum budget_kind k, uint64_t grow);
/*
 * Whether w may hold grow more bytes of kind k: there is room, or w holds a
 * pass that covers it (input: the pass lets its message grow until it is
 * complete; output: a pass is for one reply, and its holder waits like any
 * other for the next), or w waits in line and takes a free pass.
 */
bool budget_admit(const struct session *s, struct budget_wait *w, enum budget_kind k,
		  uint64_t grow);
/* What w was let past for is done, or it is going: it needs no pass. */
void budget_unexempt(const struct session *s, struct budget_wait *w, enum budget_kind k);

/* w waits for want bytes (0: room at all) of kind k, said at notice at
 * most once per interval; budget.retry tries it again. */
void budget_wait(const struct session *s, struct budget_wait *w, enum budget_kind k, uint64_t want);
/* w leaves the line, if it is in it. */
void budget_unwait(struct budget_wait *w);
/* Room of b's kind was freed: waiters get their turn soon (not from inside
 * the caller, which may be tearing a connection down). */
void budget_freed(struct budget *b);

#endif
