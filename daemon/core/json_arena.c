/* SPDX-License-Identifier: BSD-3-Clause */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "daemon/core/json_arena.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SLOT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define SLOT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SLOT_POISON(p, n) ((void)(p), (void)(n))
#define SLOT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* What malloc() aligns to; cJSON needs no more. */
#define SLOT_ALIGN 16U

struct json_slot {
	char *base;
	size_t used;
	struct json_slot *next_free;
};

/* Set up once, before other threads; read-only afterwards but for the free
 * list, which only the loop touches. */
static struct {
	char *lo, *hi; /* the reservation */
	struct json_slot *slots;
	size_t n_slots;
	struct json_slot *free; /* LIFO: the slot used last is warm */
} arena;

static __thread struct json_slot *current;

static void *hook_malloc(size_t n)
{
	struct json_slot *s = current;

	if (s && n <= JSON_SLOT_SIZE - s->used) {
		void *p = s->base + s->used;

		s->used += (n + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
		if (s->used > JSON_SLOT_SIZE)
			s->used = JSON_SLOT_SIZE;
		SLOT_UNPOISON(p, n);
		return p;
	}
	return malloc(n);
}

bool json_arena_owns(const void *p)
{
	return (const char *)p >= arena.lo && (const char *)p < arena.hi;
}

static void hook_free(void *p)
{
	/* A slot's memory goes back with the slot. */
	if (json_arena_owns(p))
		return;
	free(p);
}

int json_arena_setup(size_t n_slots)
{
	size_t len = n_slots * JSON_SLOT_SIZE;
	char *base;

	if (arena.lo)
		return -EALREADY;
	if (n_slots == 0)
		return -EINVAL;
	arena.slots = calloc(n_slots, sizeof(*arena.slots));
	if (!arena.slots)
		return -ENOMEM;
	/* Pages are faulted in as slots are first used; NORESERVE: address
	 * space, not commit charge. */
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		    -1, 0);
	if (base == MAP_FAILED) {
		int r = -errno;

		free(arena.slots);
		arena.slots = NULL;
		return r;
	}
	SLOT_POISON(base, len);
	arena.lo = base;
	arena.hi = base + len;
	arena.n_slots = n_slots;
	for (size_t i = n_slots; i-- > 0;) {
		arena.slots[i] = (struct json_slot){ .base = base + i * JSON_SLOT_SIZE,
						     .next_free = arena.free };
		arena.free = &arena.slots[i];
	}
	cJSON_InitHooks(&(cJSON_Hooks){ .malloc_fn = hook_malloc, .free_fn = hook_free });
	return 0;
}

void json_arena_teardown(void)
{
	if (!arena.lo)
		return;
	cJSON_InitHooks(NULL);
	SLOT_UNPOISON(arena.lo, (size_t)(arena.hi - arena.lo));
	munmap(arena.lo, (size_t)(arena.hi - arena.lo));
	free(arena.slots);
	arena = (typeof(arena)){};
	current = NULL;
}

struct json_slot *json_slot_take(void)
{
	struct json_slot *s = arena.free;

	if (s) {
		arena.free = s->next_free;
		s->next_free = NULL;
		s->used = 0;
	}
	return s;
}

void json_slot_give(struct json_slot *s)
{
	if (!s)
		return;
	SLOT_POISON(s->base, JSON_SLOT_SIZE);
	s->next_free = arena.free;
	arena.free = s;
}

void json_slot_enter(struct json_slot *s)
{
	current = s;
}

void json_slot_leave(void)
{
	current = NULL;
}
