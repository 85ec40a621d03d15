/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Request trees without a malloc per node.
 *
 * cJSON allocates every node, key and string of a parsed request on its own
 * and frees each again when the call ends: for a small call that is most of
 * what the daemon does for it (callgrind, a 4 KiB Copy: some 5,000 of its
 * 16,000 instructions in malloc and free). The loop parses a small request
 * into a slot instead: a fixed block carved from one reservation made at
 * start, filled front to back and given back whole when the call's tree is
 * freed. cJSON's allocation hooks make that work for cJSON's own code: the
 * malloc hook bumps the slot this thread entered, if any (else, or when the
 * slot is full, it calls malloc), and the free hook ignores any address in
 * the reservation (one comparison) and frees the rest. So a tree may mix
 * slot and heap memory, and every cJSON call keeps working on it.
 *
 * Threads: json_arena_setup() once, before any other thread uses cJSON;
 * json_slot_take() and json_slot_give() on the loop only; entering a slot
 * is per thread. The hooks are safe on any thread: the reservation's bounds
 * never change after setup.
 *
 * Invariant: nothing of a tree outlives json_slot_give() of its slot: the
 * tree is deleted first (rpc_message_done()). In a build with
 * AddressSanitizer a given-back slot is poisoned, so a read of a freed tree
 * is reported as it would be with malloc.
 */
#ifndef RDMAMEMD_JSON_ARENA_H
#define RDMAMEMD_JSON_ARENA_H

#include <stdbool.h>
#include <stddef.h>

/* A slot holds the tree of one request of up to a few KiB. */
#define JSON_SLOT_SIZE (8U * 1024U)

struct json_slot;

/* Reserves n_slots slots (address space only until used) and installs the
 * hooks, once per process: -EALREADY after the first time. 0 or a negative
 * errno; without it, no slot is ever handed out. */
int json_arena_setup(size_t n_slots);

/* Undoes json_arena_setup() (tests); no slot may be in use. */
void json_arena_teardown(void);

/* A free slot, or NULL (none left, or no arena): parse on the heap. */
struct json_slot *json_slot_take(void);
void json_slot_give(struct json_slot *s);

/* Whether p lies in a slot (tests). */
bool json_arena_owns(const void *p);

/* This thread's cJSON allocations go into s (NULL: to the heap) until
 * json_slot_leave(). */
void json_slot_enter(struct json_slot *s);
void json_slot_leave(void);

#endif
