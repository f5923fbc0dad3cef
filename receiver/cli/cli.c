/* cli.c: what every command's output shares: table cells that never cut
 * a value without saying so, JSON strings, --limit, times, a progress
 * line on a terminal, and the private files a command writes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "config.h"
#include "store.h"
#include "text.h"

/* s as text_printable shows it (NULL or empty: "-"), NUL-terminated in
 * b; NULL when memory ran out. */
static const char *cli_printable(struct buf *b, const char *s)
{
	if (s == NULL || s[0] == '\0') {
		s = "-";
	}
	buf_init(b, 0);
	if (text_printable(b, s, strlen(s), 0) < 0 || buf_append(b, "", 1) < 0) {
		buf_finish(b);
		return NULL;
	}
	return b->buf_data;
}

void cli_text(FILE *out, const char *s)
{
	struct buf b;
	const char *p = cli_printable(&b, s);

	fputs(p != NULL ? p : "(out of memory)", out);
	buf_finish(&b);
}

void cli_line(FILE *out, const char *label, const char *s)
{
	fputs(label, out);
	cli_text(out, s);
	fputc('\n', out);
}

void cli_cell(FILE *out, const char *s, int width)
{
	struct buf b;
	size_t len;
	int i;

	s = cli_printable(&b, s);
	if (s == NULL) {
		s = "?";
	}
	len = strlen(s);
	if (width < 2 || len <= (size_t)width) {
		fputs(s, out);
		for (i = (int)len; i < width; i++) {
			fputc(' ', out);
		}
		buf_finish(&b);
		return;
	}
	/* Cut, and said so: an identifier shown in part must not pass for a
	 * whole one. */
	fwrite(s, 1, (size_t)width - 1, out);
	fputs("\xe2\x80\xa6", out);
	buf_finish(&b);
}

void cli_json_string(FILE *out, const char *s)
{
	struct buf b;

	if (s == NULL) {
		fputs("null", out);
		return;
	}
	/* Valid JSON and nothing for a terminal to act on, whatever is
	 * stored (text_json_string: C1 escaped, a byte not UTF-8 as
	 * \ufffd). */
	buf_init(&b, 0);
	if (text_json_string(&b, s, strlen(s)) < 0) {
		buf_finish(&b);
		fputs("null", out);
		return;
	}
	fwrite(b.buf_data, 1, b.buf_len, out);
	buf_finish(&b);
}

void cli_json_text(FILE *out, const char *json, size_t len)
{
	struct buf b;

	buf_init(&b, 0);
	if (text_json_clean(&b, json, len) < 0) {
		buf_finish(&b);
		fputs("null", out);
		return;
	}
	fwrite(b.buf_data != NULL ? b.buf_data : "", 1, b.buf_len, out);
	buf_finish(&b);
}

void cli_json_time(FILE *out, int64_t ms)
{
	char t[32];

	if (ms <= 0) {
		fputs("null", out);
		return;
	}
	cli_format_time(ms, t);
	cli_json_string(out, t);
}

static const char *cli_command_name; /* the command main runs */

void cli_command_set(const char *name)
{
	cli_command_name = name;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	char name[128];
	char *own = argv[0];
	int c;

	/* getopt names argv[0] in what it prints, and uses it for nothing
	 * else: the whole command in its place for the call. */
	if (cli_command_name == NULL || strcmp(own, cli_command_name) == 0) {
		snprintf(name, sizeof(name), "idemhook %s", own);
	} else {
		snprintf(name, sizeof(name), "idemhook %s %s", cli_command_name, own);
	}
	argv[0] = name;
	c = getopt_long(argc, argv, shortopts, longopts, NULL);
	argv[0] = own;
	return c;
}

int cli_tempfail(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	/* One command per process: any full disk met is this command's. */
	int full = store_full_count() > 0;

	if (cmd == NULL) {
		cmd = cli_command_name != NULL ? cli_command_name : "";
	}
	if (full) {
		fprintf(stderr, "idemhook %s: the disk of the database is full; ", cmd);
	} else {
		fprintf(stderr, "idemhook %s: the database is busy or failing; ", cmd);
	}
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (full) {
		fprintf(stderr, ". Free space on its file system first (see \"A full disk\" in "
		                "docs/operations.md), then run the same command again.\n");
	} else {
		fprintf(stderr, ". Run the same command again.\n");
	}
	return EX_TEMPFAIL;
}

int cli_parse_limit(const char *cmd, const char *arg, int64_t *ret)
{
	int64_t v = 0;

	if (cli_parse_id(arg, &v) < 0 || v > CLI_LIMIT_MAX) {
		fprintf(stderr, "idemhook %s: --limit wants 1..%d\n", cmd, CLI_LIMIT_MAX);
		return -1;
	}
	*ret = v;
	return 0;
}

int cli_take_flag(int *argc, char **argv, const char *flag)
{
	int found = 0;
	int i;
	int o = 0;

	for (i = 0; i < *argc; i++) {
		if (i > 0 && strcmp(argv[i], flag) == 0) {
			found = 1;
			continue;
		}
		argv[o++] = argv[i];
	}
	*argc = o;
	argv[o] = NULL;
	return found;
}

int cli_parse_when(const char *s, int64_t *ret_ms)
{
	struct tm tm;
	const char *end;
	int64_t ago;
	time_t t;

	if (config_parse_duration(s, &ago) == 0) {
		*ret_ms = cli_now_ms() - ago * 1000;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%d", &tm);
	if (end != NULL && *end == 'T') {
		end = strptime(end + 1, "%H:%M:%S", &tm);
		if (end == NULL || strcmp(end, "Z") != 0) {
			return -1;
		}
	} else if (end == NULL || *end != '\0') {
		return -1;
	}
	t = timegm(&tm);
	if (t == (time_t)-1 || t <= 0) {
		return -1;
	}
	*ret_ms = (int64_t)t * 1000;
	return 0;
}

#define CLI_PROGRESS_EVERY_MS 100 /* least time between two redraws */

static int64_t cli_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_progress_init(struct cli_progress *p, int quiet)
{
	memset(p, 0, sizeof(*p));
	p->cp_on = !quiet && isatty(STDERR_FILENO);
	p->cp_start_ms = cli_mono_ms();
	p->cp_drawn_ms = p->cp_start_ms - CLI_PROGRESS_EVERY_MS;
}

void cli_progress_draw(struct cli_progress *p, int final, const char *fmt, ...)
{
	char line[256];
	int64_t now = cli_mono_ms();
	va_list ap;

	if (!p->cp_on || (!final && now - p->cp_drawn_ms < CLI_PROGRESS_EVERY_MS)) {
		return;
	}
	p->cp_drawn_ms = now;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Back to the line's start and clear it: one line, redrawn. */
	fprintf(stderr, "\r\033[K%s (%.1f s)%s", line, (double)(now - p->cp_start_ms) / 1000.0,
	        final ? "\n" : "");
	fflush(stderr);
}

double cli_progress_seconds(const struct cli_progress *p)
{
	return (double)(cli_mono_ms() - p->cp_start_ms) / 1000.0;
}

/* ---- private files ---- */

/* Run as root (sudo idemhook ...), gives fd the owner of the directory
 * path is in, the service's user beside its database, so the daemon can
 * still read a 0600 file (SQLite does the same for -wal and -shm). A
 * no-op for any other user, who owns what it creates already. */
static int cli_chown_like_parent(int fd, const char *path)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;
	size_t n;

	if (geteuid() != 0) {
		return 0;
	}
	if (slash == NULL) {
		snprintf(parent, sizeof(parent), ".");
	} else {
		n = slash == path ? 1 : (size_t)(slash - path);
		if (n >= sizeof(parent)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(parent, path, n);
		parent[n] = '\0';
	}
	if (stat(parent, &st) < 0) {
		return -1;
	}
	return fchown(fd, st.st_uid, st.st_gid);
}

int cli_mkdir_private(const char *cmd, const char *dir)
{
	int fd;

	if (mkdir(dir, 0700) < 0) {
		if (errno == EEXIST) {
			return 0;
		}
		fprintf(stderr, "%s: cannot create %s: %s\n", cmd, dir, strerror(errno));
		return -1;
	}
	/* Exactly 0700 whatever the umask, owned like its parent. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0700) < 0 || cli_chown_like_parent(fd, dir) < 0) {
		fprintf(stderr, "%s: cannot set the mode of %s: %s\n", cmd, dir, strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	close(fd);
	return 0;
}

int cli_write_private(const char *cmd, const char *path, const void *data, size_t len)
{
	char tmp[PATH_MAX];
	const char *p = data;
	size_t off = 0;
	ssize_t k;
	int fd;
	int n = snprintf(tmp, sizeof(tmp), "%s.new", path);

	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		fprintf(stderr, "%s: the file name %s is too long\n", cmd, path);
		return -1;
	}
	/* A stale .new from an interrupted run is ours to replace. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		fprintf(stderr, "%s: cannot write %s: %s\n", cmd, tmp, strerror(errno));
		return -1;
	}
	/* The umask can only narrow the mode; say 0600 explicitly anyway. */
	if (fchmod(fd, 0600) < 0 || cli_chown_like_parent(fd, path) < 0) {
		goto fail;
	}
	while (off < len) {
		k = write(fd, p + off, len - off);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			goto fail;
		}
		off += (size_t)k;
	}
	if (fsync(fd) < 0) {
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(errno));
	if (fd >= 0) {
		close(fd);
	}
	unlink(tmp);
	return -1;
}
