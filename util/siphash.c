/* SPDX-License-Identifier: BSD-3-Clause */
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/siphash.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND(v0, v1, v2, v3)                                          \
	do {                                                              \
		v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32); \
		v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                    \
		v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                    \
		v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t siphash24(const void *data, size_t len, const uint8_t key[SIPHASH_KEY_SIZE])
{
	const uint8_t *in = data, *end = in + (len & ~(size_t)7);
	uint64_t k0 = le64(key), k1 = le64(key + 8);
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
	uint64_t b = (uint64_t)len << 56, m;

	for (; in != end; in += 8) {
		m = le64(in);
		v3 ^= m;
		SIPROUND(v0, v1, v2, v3);
		SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	for (size_t i = 0; i < (len & 7); i++)
		b |= (uint64_t)in[i] << (8 * i);
	v3 ^= b;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	for (int i = 0; i < 4; i++)
		SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

static uint8_t process_key[SIPHASH_KEY_SIZE];
static pthread_once_t process_key_once = PTHREAD_ONCE_INIT;

static void process_key_init(void)
{
	struct timespec ts;
	uint64_t mix[2];

	/* Early at boot the pool may not be ready: do not wait for it. What
	 * is then used instead still differs from run to run. */
	if (getrandom(process_key, sizeof(process_key), GRND_NONBLOCK) ==
	    (ssize_t)sizeof(process_key))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	mix[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid();
	mix[1] = (uint64_t)(uintptr_t)&ts ^ (uint64_t)(uintptr_t)process_key;
	memcpy(process_key, mix, sizeof(process_key));
}

const uint8_t *siphash_process_key(void)
{
	pthread_once(&process_key_once, process_key_init);
	return process_key;
}
