/* log.c: stderr logging with journald priority prefixes (left out on a
 * terminal, where a person reads the lines). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static enum log_level log_threshold = LOG_LEVEL_INFO;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_prefixed = 1;

/* Deferred lines (log_set_deferred): info and debug lines wait here, whole
 * and in order, for the flusher thread or a more urgent line. */
#define LOG_DEFER_CAP 32768
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_cond = PTHREAD_COND_INITIALIZER;
static char log_defer_buf[LOG_DEFER_CAP];
static size_t log_defer_len;
static long log_defer_ms; /* 0: every line is written at once */

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

/* Writes all of p; called with log_mutex held, so lines keep their order. */
static void log_write_locked(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, p, n);

		if (w < 0) {
			return; /* nowhere to say so */
		}
		p += w;
		n -= (size_t)w;
	}
}

static void log_flush_locked(void)
{
	log_write_locked(log_defer_buf, log_defer_len);
	log_defer_len = 0;
}

void log_flush(void)
{
	pthread_mutex_lock(&log_mutex);
	log_flush_locked();
	pthread_mutex_unlock(&log_mutex);
}

/* The flusher: a first deferred line wakes it; it writes what gathered
 * log_defer_ms later in one write (sooner when log_set_deferred shortens
 * the delay, nothing when another line wrote them first). */
static void *log_flusher_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "log-flusher"); /* top -H, perf */
	pthread_mutex_lock(&log_mutex);
	for (;;) {
		struct timespec t0;
		struct timespec due;
		long ms;

		while (log_defer_len == 0) {
			pthread_cond_wait(&log_cond, &log_mutex);
		}
		clock_gettime(CLOCK_REALTIME, &t0);
		while (log_defer_len > 0) {
			ms = __atomic_load_n(&log_defer_ms, __ATOMIC_RELAXED);
			due = t0;
			due.tv_sec += ms / 1000;
			due.tv_nsec += (ms % 1000) * 1000000L;
			if (due.tv_nsec >= 1000000000L) {
				due.tv_sec++;
				due.tv_nsec -= 1000000000L;
			}
			if (pthread_cond_timedwait(&log_cond, &log_mutex, &due) != 0) {
				break; /* due */
			}
		}
		log_flush_locked();
	}
	return NULL;
}

static void log_deferred(enum log_level level, const char *line, size_t n)
{
	pthread_mutex_lock(&log_mutex);
	if (log_defer_len + n > sizeof(log_defer_buf)) {
		log_flush_locked();
	}
	if (level <= LOG_LEVEL_NOTICE || n > sizeof(log_defer_buf)) {
		/* What an operator waits for goes out now, after what came before. */
		log_flush_locked();
		log_write_locked(line, n);
	} else {
		if (log_defer_len == 0) {
			pthread_cond_signal(&log_cond);
		}
		memcpy(log_defer_buf + log_defer_len, line, n);
		log_defer_len += n;
	}
	pthread_mutex_unlock(&log_mutex);
}

int log_set_deferred(long ms)
{
	static int started;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (ms <= 0) {
		__atomic_store_n(&log_defer_ms, 0, __ATOMIC_RELAXED);
		log_flush();
		return 0;
	}
	pthread_mutex_lock(&log_mutex);
	/* A flusher waiting out a longer delay looks at the new one. */
	pthread_cond_broadcast(&log_cond);
	rc = 0;
	if (!started) {
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, log_flusher_main, NULL) == 0 ? 0 : -1;
		pthread_attr_destroy(&attr);
		if (rc == 0) {
			started = 1;
			atexit(log_flush);
		}
	}
	pthread_mutex_unlock(&log_mutex);
	if (rc == 0) {
		__atomic_store_n(&log_defer_ms, ms, __ATOMIC_RELAXED);
	}
	return rc;
}

/* The line's start for level: the journald prefix, or on a terminal
 * "error: " / "warning: " (or nothing). Returns its length. */
static size_t log_line_begin(enum log_level level, char *line, size_t size)
{
	int n = 0;

	if (log_prefix_enabled() && (unsigned)level <= 9 && size > 3) {
		/* "<%d>" of a single digit, without printf: a line per request */
		line[0] = '<';
		line[1] = (char)('0' + (int)level);
		line[2] = '>';
		n = 3;
	} else if (log_prefix_enabled()) {
		n = snprintf(line, size, "<%d>", (int)level);
	} else if (level <= LOG_LEVEL_WARNING) {
		n = snprintf(line, size, "%s: ", level <= LOG_LEVEL_ERR ? "error" : "warning");
	}
	return n > 0 ? (size_t)n : 0;
}

/* Writes line (len bytes and room for one more) with its newline. */
static void log_line_end(enum log_level level, char *line, size_t len)
{
	line[len] = '\n';
	if (__atomic_load_n(&log_defer_ms, __ATOMIC_RELAXED) > 0) {
		log_deferred(level, line, len + 1);
		return;
	}
	/* One write per line keeps lines from different threads whole. */
	fwrite(line, 1, len + 1, stderr);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	va_list ap;
	size_t n;

	if (level > log_threshold) {
		return;
	}
	n = log_line_begin(level, line, sizeof(line));
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	log_line_end(level, line, strlen(line));
}

void log_text(enum log_level level, const char *text, size_t len)
{
	char line[LOG_LINE_MAX];
	size_t n;

	if (level > log_threshold) {
		return;
	}
	n = log_line_begin(level, line, sizeof(line));
	/* As vsnprintf above: room for the newline and the NUL it keeps. */
	if (len > sizeof(line) - n - 2) {
		len = sizeof(line) - n - 2;
	}
	memcpy(line + n, text, len);
	log_line_end(level, line, n + len);
}

size_t log_cat(char *out, size_t size, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (len >= size) {
		return len;
	}
	if (n > size - len) {
		n = size - len;
	}
	memcpy(out + len, s, n);
	return len + n;
}

size_t log_cat_int(char *out, size_t size, size_t len, long long v)
{
	char digits[24];
	size_t i = sizeof(digits) - 1;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	digits[i] = '\0';
	do {
		digits[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u > 0);
	if (v < 0) {
		digits[--i] = '-';
	}
	return log_cat(out, size, len, digits + i);
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
