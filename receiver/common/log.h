/* log.h: stderr logging with journald priority prefixes, no timestamps. */
#ifndef IDEMHOOK_LOG_H
#define IDEMHOOK_LOG_H

enum log_level {
	LOG_LEVEL_ERR = 3,
	LOG_LEVEL_WARNING = 4,
	LOG_LEVEL_NOTICE = 5,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
};

/* Lines above this level are dropped; default LOG_LEVEL_INFO. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* 1 when lines carry the journald <N> prefix: stderr is not a terminal, or
 * JOURNAL_STREAM is set (decided once, at the first line). */
int log_prefix_enabled(void);

/* Writes one line "<N>message\n" to stderr ("message\n" on a terminal
 * outside systemd, with "error: " or "warning: " before those). Callers
 * quote user-controlled strings themselves (log_quote) and never pass a
 * secret. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The longest line log_msg and log_text write, newline included; a longer
 * message is cut. */
#define LOG_LINE_MAX 2048

/* Writes the len bytes of text (no newline) as one line at level, exactly
 * as log_msg(level, "%.*s", (int)len, text) would: for a line written per
 * request and built without printf (log_cat, log_cat_int). */
void log_text(enum log_level level, const char *text, size_t len);

/* Appends s to the line in out (len bytes so far, size bytes of room),
 * cut where the room ends; returns the new length. Not NUL-terminated. */
size_t log_cat(char *out, size_t size, size_t len, const char *s);

/* Appends v in decimal as printf's "%lld" does; returns the new length. */
size_t log_cat_int(char *out, size_t size, size_t len, long long v);

/* From now on, info and debug lines are gathered and written together at
 * most ms milliseconds after the first of them (one write for many lines
 * instead of one each: a server logs a line per request); notice, warning
 * and error lines are written at once, after the lines gathered before
 * them. A line cut short by a crash is never half written, but up to ms of
 * info lines before a crash (SIGKILL, power loss) are lost; exit() writes
 * them. Starts a thread the first time; ms <= 0 writes what is gathered
 * and goes back to a write per line. Returns 0, or -1 (no thread: lines
 * stay written one by one). */
int log_set_deferred(long ms);

/* Writes the gathered lines now (see log_set_deferred). */
void log_flush(void);

#define log_err(...) log_msg(LOG_LEVEL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* Copies at most out_size-1 printable bytes of s into out, escaping quotes,
 * backslashes and control bytes, truncating with "...". Returns out. */
const char *log_quote(char *out, size_t out_size, const char *s);

#endif
