/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "daemon/core/log.h"

/*
 * Logging is safe from any thread: the loop logs, and so do pool threads
 * (releasing a region's memory, closing a CUDA IPC mapping). The two
 * settings are read with relaxed atomics, since SIGHUP may change the level
 * on the loop while a pool thread logs; each message is formatted on the
 * caller's stack and leaves in one call (sd_journal_sendv(), or one
 * fprintf() on stderr, which stdio locks), so messages of two threads never
 * mix. Nothing else here is shared.
 */
static int max_level = LOG_INFO;
/* Under systemd, stderr is the journal: messages go to it natively, with
 * their fields; should that fail, as "<N>" prefixed lines on stderr. Set by
 * log_setup(), before any thread starts. */
static bool journal;

static const char *const level_names[] = {
	[LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",     [LOG_CRIT] = "crit",
	[LOG_ERR] = "error",   [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
};

void log_setup(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long dev, ino;
	struct stat st;

	/* Only trust JOURNAL_STREAM if stderr is still that stream: a child
	 * of a service may have redirected it. */
	__atomic_store_n(&journal,
			 e && sscanf(e, "%lu:%lu", &dev, &ino) == 2 &&
				 fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev &&
				 st.st_ino == ino,
			 __ATOMIC_RELAXED);
}

void log_set_max_level(int level)
{
	__atomic_store_n(&max_level, level, __ATOMIC_RELAXED);
}

int log_get_max_level(void)
{
	return __atomic_load_n(&max_level, __ATOMIC_RELAXED);
}

int log_level_from_string(const char *s)
{
	for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
		if (strcmp(level_names[i], s) == 0)
			return (int)i;
	if (strcmp(s, "err") == 0)
		return LOG_ERR;
	if (strcmp(s, "warn") == 0)
		return LOG_WARNING;
	return -EINVAL;
}

const char *log_level_to_string(int level)
{
	if (level < 0 || (size_t)level >= ELEMENTSOF(level_names))
		return "unknown";
	return level_names[level];
}

/*
 * The journal's native protocol, with the message's fields. Returns false
 * when the journal is not there, and stderr has to do.
 */
static bool log_to_journal(int level, int error, const char *file, int line, const char *func,
			   const struct log_fields *f, const char *msg)
{
	char buf[11][2200];
	struct iovec iov[11];
	size_t n = 0;

#define FIELD(...)                                                           \
	do {                                                                 \
		int _len = snprintf(buf[n], sizeof(buf[n]), __VA_ARGS__);    \
		iov[n].iov_base = buf[n];                                    \
		iov[n].iov_len = (size_t)MIN(_len, (int)sizeof(buf[n]) - 1); \
		n++;                                                         \
	} while (0)
	FIELD("MESSAGE=%s", msg);
	FIELD("PRIORITY=%d", level);
	FIELD("SYSLOG_IDENTIFIER=rdmamemd");
	FIELD("CODE_FILE=%s", file);
	FIELD("CODE_LINE=%d", line);
	FIELD("CODE_FUNC=%s", func);
	if (error < 0)
		FIELD("ERRNO=%d", -error);
	if (f && f->region)
		FIELD("REGION=%" PRIu64, f->region);
	if (f && f->has_client) {
		FIELD("CLIENT_PID=%d", (int)f->client_pid);
		FIELD("CLIENT_UID=%u", (unsigned)f->client_uid);
	}
	if (f && f->device)
		FIELD("DEVICE=%s", f->device);
#undef FIELD
	return sd_journal_sendv(iov, (int)n) >= 0;
}

int log_internal(int level, int error, const char *file, int line, const char *func,
		 const struct log_fields *fields, const char *fmt, ...)
{
	bool to_journal = __atomic_load_n(&journal, __ATOMIC_RELAXED);
	char msg[2048];
	va_list ap;
	int saved = errno;

	/* %m prints the error this call is about, not whatever errno is. */
	errno = error < 0 ? -error : saved;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (to_journal && log_to_journal(level, error, file, line, func, fields, msg))
		; /* structured, in the journal */
	else if (to_journal)
		fprintf(stderr, "<%d>%s\n", level, msg);
	else if (log_get_max_level() >= LOG_DEBUG)
		fprintf(stderr, "rdmamemd: %s: %s (%s:%d %s)\n", log_level_to_string(level), msg,
			file, line, func);
	else
		fprintf(stderr, "rdmamemd: %s: %s\n", log_level_to_string(level), msg);

	errno = saved;
	return error < 0 ? error : -error;
}

bool ratelimit_pass(struct ratelimit *rl, uint64_t now_msec, unsigned *ret_suppressed)
{
	if (rl->begin_msec && now_msec - rl->begin_msec < rl->interval_msec) {
		rl->n_suppressed++;
		return false;
	}
	rl->begin_msec = now_msec ?: 1;
	*ret_suppressed = rl->n_suppressed;
	rl->n_suppressed = 0;
	return true;
}
