/* SPDX-License-Identifier: BSD-3-Clause */
#include "daemon/gpu/gpu_cost.h"

/* The size's bucket: the position of its highest bit (0 and 1 in 0). */
static unsigned size_bucket(uint64_t size)
{
	return size > 1 ? 63U - (unsigned)__builtin_clzll(size) : 0U;
}

void gpu_cost_add(struct gpu_cost *c, enum gpu_cost_kind kind, uint64_t size, uint64_t ns)
{
	unsigned b = size_bucket(size);
	uint8_t *next = &c->next[kind][b];

	/* 0 marks an empty slot: a time too short to see still counts. */
	c->ns[kind][b][*next] = ns ? ns : 1;
	*next = (uint8_t)((*next + 1) % GPU_COST_SAMPLES);
}

uint64_t gpu_cost_usec(const struct gpu_cost *c, enum gpu_cost_kind kind, uint64_t size)
{
	const uint64_t *ns = c->ns[kind][size_bucket(size)];
	uint64_t least = UINT64_MAX;

	/* The least, not the mean: a pool thread's wake-up, a first import's
	 * driver load or a bandwidth probe count in some times, and only
	 * the call itself runs on the loop. */
	for (unsigned i = 0; i < GPU_COST_SAMPLES; i++)
		if (ns[i] && ns[i] < least)
			least = ns[i];
	return least == UINT64_MAX ? least : (least + 999) / 1000;
}
