/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Descriptors (daemon/remote/descriptor.c), as ImportRemote meets them from
 * any client: whatever the input, parsing returns, and what it accepts is
 * canonical — formatting the result gives back the very text parsed, which
 * parses again to the same fields.
 *
 * Input: [mode] then the rest. Mode 0: the rest is the descriptor's text.
 * Any other mode: the rest is the binary record, put behind "rdmamem1." in
 * base64url here, so the fuzzer works on the record's fields directly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/remote/descriptor.h"
#include "fuzz.h"
#include "proto/base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t prefix = strlen(DESCRIPTOR_PREFIX);
	struct descriptor d, again;
	const char *why = NULL;
	char *text, *formatted = NULL;
	size_t len;
	int r;

	if (size < 1)
		return 0;
	if (data[0] == 0) {
		len = size - 1;
		text = malloc(len + 1);
		fuzz_check(text);
		memcpy(text, data + 1, len);
	} else {
		len = prefix + base64url_encoded_len(size - 1);
		text = malloc(len + 1);
		fuzz_check(text);
		memcpy(text, DESCRIPTOR_PREFIX, prefix);
		base64url_encode(data + 1, size - 1, text + prefix);
	}
	text[len] = '\0';

	r = descriptor_parse(text, len, &d, &why);
	fuzz_check(r == 0 || r == -EINVAL);
	if (r < 0) {
		/* Every refusal says why. */
		fuzz_check(why && *why);
		free(text);
		return 0;
	}
	fuzz_check(len <= DESCRIPTOR_TEXT_MAX);
	fuzz_check(descriptor_format(&d, &formatted, &why) == 0);
	fuzz_check(strlen(formatted) == len && memcmp(formatted, text, len) == 0);
	fuzz_check(descriptor_parse(formatted, len, &again, &why) == 0);
	fuzz_check(again.n_devices == d.n_devices && again.n_endpoints == d.n_endpoints);
	fuzz_check(again.id == d.id && again.length == d.length && again.access == d.access);
	free(formatted);
	free(text);
	return 0;
}
