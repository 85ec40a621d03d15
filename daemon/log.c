/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static int max_level = LOG_INFO;
/* When stderr is connected to the journal, a "<N>" prefix carries the
 * priority and the journal adds its own timestamp and identifier. */
static bool prefix_priority;

static const char *const level_names[] = {
	[LOG_EMERG] = "emerg",	 [LOG_ALERT] = "alert", [LOG_CRIT] = "crit",
	[LOG_ERR] = "error",	 [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",	 [LOG_DEBUG] = "debug",
};

void log_setup(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long dev, ino;
	struct stat st;

	/* Only trust JOURNAL_STREAM if stderr is still that stream: a child
	 * of a service may have redirected it. */
	prefix_priority = e && sscanf(e, "%lu:%lu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
			  st.st_dev == dev && st.st_ino == ino;
}

void log_set_max_level(int level)
{
	max_level = level;
}

int log_get_max_level(void)
{
	return max_level;
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

int log_internal(int level, int error, const char *file, int line, const char *func,
		 const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	int saved = errno;

	/* %m prints the error this call is about, not whatever errno is. */
	errno = error < 0 ? -error : saved;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (prefix_priority)
		fprintf(stderr, "<%d>%s\n", level, msg);
	else if (max_level >= LOG_DEBUG)
		fprintf(stderr, "rdmamemd: %s: %s (%s:%d %s)\n", log_level_to_string(level), msg,
			file, line, func);
	else
		fprintf(stderr, "rdmamemd: %s: %s\n", log_level_to_string(level), msg);

	errno = saved;
	return error < 0 ? error : -error;
}
