/* log.c: stderr logging with journald priority prefixes (left out on a
 * terminal, where a person reads the lines). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static enum log_level log_threshold = LOG_LEVEL_INFO;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_prefixed = 1;

/* The <N> prefix is for journald: kept when stderr is not a terminal (a
 * pipe, a file, the journal's stream) and whenever systemd set
 * JOURNAL_STREAM; dropped when a person runs a command on a terminal. */
static void log_decide(void)
{
	const char *js = getenv("JOURNAL_STREAM");

	log_prefixed = !isatty(STDERR_FILENO) || (js != NULL && js[0] != '\0');
}

int log_prefix_enabled(void)
{
	pthread_once(&log_once, log_decide);
	return log_prefixed;
}

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

enum log_level log_get_level(void)
{
	return log_threshold;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t len;
	int n;

	if (level > log_threshold) {
		return;
	}
	n = 0;
	if (log_prefix_enabled()) {
		n = snprintf(line, sizeof(line), "<%d>", (int)level);
	} else if (level <= LOG_LEVEL_WARNING) {
		n = snprintf(line, sizeof(line),
		             "%s: ", level <= LOG_LEVEL_ERR ? "error" : "warning");
	}
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	len = strlen(line);
	line[len] = '\n';
	/* One write per line keeps lines from different threads whole. */
	fwrite(line, 1, len + 1, stderr);
}

const char *log_quote(char *out, size_t out_size, const char *s)
{
	size_t o = 0;

	if (out_size == 0) {
		return out;
	}
	if (s == NULL) {
		s = "(null)";
	}
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[5];
		size_t len;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			len = 2;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			len = 4;
		} else {
			esc[0] = (char)c;
			len = 1;
		}
		if (o + len + 4 > out_size) {
			if (out_size >= 4) {
				o = o < out_size - 4 ? o : out_size - 4;
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, esc, len);
		o += len;
	}
	out[o] = '\0';
	return out;
}
