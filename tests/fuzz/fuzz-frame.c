/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The framing reader (proto/frame.c) against a reference model: the bytes
 * arrive in chunks of a size the input picks, under a size limit the input
 * picks, and every message handed out must be exactly the next NUL-separated
 * piece of the stream, the limit must be enforced, and a full buffer must
 * never leave the reader with nothing to say (the daemon would spin on a
 * readable socket it cannot read).
 *
 * Input: [limit][chunk] then the stream.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proto/frame.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_reader fr;
	size_t max_body, chunk, fed = 0, taken = 0;
	uint64_t ordinal = 0, started;
	const uint8_t *s;
	bool broken = false;

	if (size < 2)
		return 0;
	/* Small limits reach the size checks quickly; 0 means a real one. */
	max_body = data[0] ? data[0] : 100000;
	chunk = 1 + data[1];
	s = data + 2;
	size -= 2;

	frame_reader_init(&fr, max_body);
	while (fed < size && !broken) {
		size_t space, n;
		void *p;
		int r = frame_reader_reserve(&fr, &p, &space);

		if (r == -ENOBUFS) {
			/* Documented: the pending message is over the limit. */
			fuzz_check(frame_reader_pending(&fr) > max_body);
			fuzz_check(frame_reader_next(&fr, &(struct frame){}) == -EMSGSIZE);
			broken = true;
			break;
		}
		fuzz_check(r == 0);
		fuzz_check(space > 0);
		n = MIN(MIN(chunk, space), size - fed);
		memcpy(p, s + fed, n);
		started = frame_reader_commit(&fr, n);
		fed += n;

		/* The last message that starts in the bytes fed now (at the
		 * stream's first byte or after a NUL): its ordinal is the
		 * number of NULs before it. */
		{
			uint64_t nuls = 0, want = FRAME_NO_START;

			for (size_t i = 0; i < fed; i++) {
				if (i >= fed - n && (i == 0 || s[i - 1] == 0))
					want = nuls;
				nuls += s[i] == 0;
			}
			fuzz_check(started == want);
		}

		for (;;) {
			struct frame f;
			const uint8_t *nul;
			size_t want;

			r = frame_reader_next(&fr, &f);
			if (r == 0)
				break;
			nul = memchr(s + taken, 0, fed - taken);
			if (r < 0) {
				fuzz_check(r == -EMSGSIZE);
				/* Only a message longer than the limit, finished
				 * or still arriving, is refused. */
				fuzz_check((nul ? (size_t)(nul - (s + taken)) : fed - taken) >
					   max_body);
				broken = true;
				break;
			}
			/* Exactly the next piece of the stream, in order. */
			fuzz_check(nul);
			want = nul - (s + taken);
			fuzz_check(f.len == want);
			fuzz_check(f.len <= max_body);
			fuzz_check(memcmp(f.data, s + taken, want) == 0);
			fuzz_check(f.data[f.len] == '\0');
			fuzz_check(f.ordinal == ordinal);
			ordinal++;
			taken += want + 1;
		}
		if (!broken)
			fuzz_check(frame_reader_pending(&fr) == fed - taken);
	}
	/* Everything terminated and within the limit came out. */
	if (!broken)
		fuzz_check(!memchr(s + taken, 0, fed - taken));
	frame_reader_done(&fr);
	return 0;
}
