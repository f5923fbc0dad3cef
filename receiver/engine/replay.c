/* replay.c: replays captured callbacks and exported Stripe events, in
 * receive-time order, in-process through ingest_hook or over HTTP(S). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "capture.h"
#include "config.h"
#include "event.h"
#include "http.h"
#include "httpc.h"
#include "ingest.h"
#include "json.h"
#include "log.h"
#include "outbox.h"
#include "provider.h"
#include "reply.h"
#include "replay.h"

#define REPLAY_DEPTH_MAX 32 /* directory levels walked */
#define REPLAY_PEEK 64 /* bytes read to tell a capture from an export */
#define REPLAY_ERR_MAX 512
#define REPLAY_BAR_WIDTH 30

struct replay_entry {
	int64_t re_ms;
	char *re_path;
	long re_index; /* -1: a capture file; else the event's index in an export file */
};

enum replay_verdict {
	REPLAY_V_NEW,
	REPLAY_V_DUPLICATE,
	REPLAY_V_MISMATCH,
	REPLAY_V_REFUSED,
	REPLAY_V_REJECTED,
	REPLAY_V_RETRY, /* in progress or transient: try again shortly */
	REPLAY_V_FAILED,
};

struct replay_state {
	struct store *st_store;
	const struct config *st_cf;
	const struct replay_options *st_opt;
	struct replay_summary *st_sum;
	struct replay_entry *st_v;
	size_t st_n;
	size_t st_cap;
	/* the export file parsed last (one at a time keeps memory bounded) */
	char *st_export_path;
	cJSON *st_export;
	const struct provider_conf *st_export_pc;
	int st_export_pc_known; /* st_export_pc looked up (may be NULL) */
	/* --to: the URL captured targets are appended to */
	char st_base[1024];
	const char *st_ca_file;
	unsigned st_unavailable; /* --to: requests in a row that found it unavailable */
	int st_stopped;          /* --to: ro_stop_after reached; nothing more is sent */
	char st_unavailable_msg[REPLAY_ERR_MAX]; /* the last of them, for the stop message */
	/* progress */
	size_t st_done;
	size_t st_scan_failed; /* files that failed while being listed: done, and in the total */
	int st_scanning;
	int64_t st_drawn_ms;
	/* in-process: requests whose claims are with the store (--jobs) */
	unsigned st_jobs; /* at most this many in flight */
	unsigned st_in_flight; /* main thread only */
	pthread_mutex_t st_jobs_mutex;
	pthread_cond_t st_jobs_cond;
	struct replay_slot *st_finished; /* committed, waiting to be counted; under st_jobs_mutex */
	/* In-process, every request from the oldest one still with the store
	 * on, in file order (main thread only): the store completes them in
	 * batches, and a rejection is known at once, but their lines and the
	 * summary follow the files' order. Empty otherwise. */
	struct replay_slot *st_queue;
	struct replay_slot **st_queue_tail;
};

/* One in-process request in st_queue: with the store (rl_job), or with
 * its verdict known, waiting for those before it to be reported. The
 * request itself is not kept: ingest_prepare copied what the claims need. */
struct replay_slot {
	struct replay_state *rl_s;
	const struct replay_entry *rl_e;
	struct ingest_job *rl_job;
	int rl_attempt;
	struct replay_slot *rl_next; /* st_finished */
	struct replay_slot *rl_queue_next;
	/* the verdict, once known (rl_known) */
	int rl_known;
	int rl_fail; /* reported by replay_fail_now(rl_path, rl_index, ...) */
	enum replay_verdict rl_v;
	char *rl_reason;
	char *rl_msg;
	char *rl_path;
	long rl_index;
};

static int64_t replay_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t replay_now_s(void)
{
	return (int64_t)time(NULL);
}

static void replay_err(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void replay_err(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

/* ---- summary ---- */

static void replay_reason_add(struct replay_reason *v, size_t *n, const char *slug)
{
	size_t i;

	if (slug == NULL || *slug == '\0') {
		slug = "unknown";
	}
	for (i = 0; i < *n; i++) {
		if (strcmp(v[i].rr_slug, slug) == 0) {
			v[i].rr_n++;
			return;
		}
	}
	if (*n == REPLAY_REASONS_MAX) {
		/* The last slot collects whatever does not fit. */
		snprintf(v[*n - 1].rr_slug, sizeof(v[*n - 1].rr_slug), "%s", "other");
		v[*n - 1].rr_n++;
		return;
	}
	snprintf(v[*n].rr_slug, sizeof(v[*n].rr_slug), "%s", slug);
	v[*n].rr_n = 1;
	(*n)++;
}

int replay_summary_bad(const struct replay_summary *s)
{
	return s->rs_rejected > 0 || s->rs_failed > 0 || s->rs_not_sent > 0;
}

static int replay_reasons_text(struct buf *out, const struct replay_reason *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (buf_printf(out, "%s %s %" PRIu64, i == 0 ? ":" : ",", v[i].rr_slug, v[i].rr_n) < 0) {
			return -1;
		}
	}
	return buf_puts(out, "\n");
}

int replay_summary_text(const struct replay_summary *s, int dry_run, struct buf *out)
{
	double rate = s->rs_seconds > 0 ? (double)s->rs_total / s->rs_seconds : 0.0;

	if (buf_printf(out, "%s%" PRIu64 " requests in %.2f s (%.0f/s)\n", dry_run ? "dry run (nothing changed): " : "",
		       s->rs_total, s->rs_seconds, rate) < 0 ||
	    buf_printf(out, "new        %" PRIu64 "\n", s->rs_new) < 0 ||
	    buf_printf(out, "duplicate  %" PRIu64 " (other payload: %" PRIu64 ")\n", s->rs_duplicate,
		       s->rs_mismatch) < 0 ||
	    buf_printf(out, "refused    %" PRIu64 " (business rules; the key ends failed)\n", s->rs_refused) < 0 ||
	    buf_printf(out, "rejected   %" PRIu64, s->rs_rejected) < 0 ||
	    replay_reasons_text(out, s->rs_rejected_reasons, s->rs_n_rejected_reasons) < 0 ||
	    buf_printf(out, "failed     %" PRIu64, s->rs_failed) < 0 ||
	    replay_reasons_text(out, s->rs_failed_reasons, s->rs_n_failed_reasons) < 0 ||
	    buf_printf(out, "skipped    %" PRIu64 " (filters)\n", s->rs_skipped) < 0) {
		return -1;
	}
	if (s->rs_not_sent > 0 &&
	    buf_printf(out, "not sent   %" PRIu64 " (stopped: the --to address was unavailable)\n",
	               s->rs_not_sent) < 0) {
		return -1;
	}
	return 0;
}

static int replay_reasons_json(struct buf *out, const char *name, const struct replay_reason *v, size_t n)
{
	size_t i;

	if (buf_printf(out, ",\"%s\":{", name) < 0) {
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((i > 0 && buf_puts(out, ",") < 0) || buf_json_string(out, v[i].rr_slug) < 0 ||
		    buf_printf(out, ":%" PRIu64, v[i].rr_n) < 0) {
			return -1;
		}
	}
	return buf_puts(out, "}");
}

int replay_summary_json(const struct replay_summary *s, int dry_run, struct buf *out)
{
	if (buf_printf(out,
	               "{\"dry_run\":%s,\"total\":%" PRIu64 ",\"new\":%" PRIu64
	               ",\"duplicate\":%" PRIu64 ",\"mismatch\":%" PRIu64 ",\"refused\":%" PRIu64
	               ",\"rejected\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"skipped\":%" PRIu64
	               ",\"not_sent\":%" PRIu64 ",\"seconds\":%.3f",
	               dry_run ? "true" : "false", s->rs_total, s->rs_new, s->rs_duplicate,
	               s->rs_mismatch, s->rs_refused, s->rs_rejected, s->rs_failed, s->rs_skipped,
	               s->rs_not_sent, s->rs_seconds) < 0 ||
	    replay_reasons_json(out, "rejected_reasons", s->rs_rejected_reasons,
	                        s->rs_n_rejected_reasons) < 0 ||
	    replay_reasons_json(out, "failed_reasons", s->rs_failed_reasons,
	                        s->rs_n_failed_reasons) < 0 ||
	    buf_puts(out, "}\n") < 0) {
		return -1;
	}
	return 0;
}

/* ---- progress ---- */

static void replay_draw(struct replay_state *s, int final)
{
	const struct replay_summary *sum = s->st_sum;
	char bar[REPLAY_BAR_WIDTH + 1];
	size_t done;
	size_t total;
	size_t fill;
	size_t i;
	int64_t now = replay_mono_ms();

	if (s->st_opt->ro_progress != REPLAY_PROGRESS_BAR || (!final && now - s->st_drawn_ms < 100)) {
		return;
	}
	s->st_drawn_ms = now;
	done = s->st_done + s->st_scan_failed;
	total = s->st_n + s->st_scan_failed;
	fill = total > 0 ? done * REPLAY_BAR_WIDTH / total : REPLAY_BAR_WIDTH;
	for (i = 0; i < REPLAY_BAR_WIDTH; i++) {
		bar[i] = i < fill ? '#' : '.';
	}
	bar[REPLAY_BAR_WIDTH] = '\0';
	fprintf(stderr, "\rreplay [%s] %zu/%zu new %" PRIu64 " dup %" PRIu64 " rej %" PRIu64 " fail %" PRIu64 "%s",
		bar, done, total, sum->rs_new, sum->rs_duplicate, sum->rs_rejected, sum->rs_failed,
		final ? "\n" : "");
	fflush(stderr);
}

/* One file's outcome on its own line (not on a TTY). */
static void replay_line(struct replay_state *s, const struct replay_entry *e, const char *what, const char *reason)
{
	char q[PATH_MAX];

	if (s->st_opt->ro_progress != REPLAY_PROGRESS_LINES) {
		return;
	}
	if (e->re_index >= 0) {
		fprintf(stderr, "%s [event %ld]: %s%s%s\n", log_quote(q, sizeof(q), e->re_path), e->re_index, what,
			reason != NULL ? " " : "", reason != NULL ? reason : "");
	} else {
		fprintf(stderr, "%s: %s%s%s\n", log_quote(q, sizeof(q), e->re_path), what, reason != NULL ? " " : "",
			reason != NULL ? reason : "");
	}
}

/* A request that could not be replayed: said on stderr naming the file. */
static void replay_fail_now(struct replay_state *s, const char *path, long index, const char *slug,
                            const char *msg)
{
	char q[PATH_MAX];

	if (s->st_opt->ro_progress == REPLAY_PROGRESS_BAR) {
		/* Clear the bar; it is drawn again below the message. */
		fputs("\r\033[K", stderr);
	}
	if (msg == NULL) {
		msg = "out of memory";
	}
	if (index >= 0) {
		log_err("replay: \"%s\" event %ld: %s", log_quote(q, sizeof(q), path), index, msg);
	} else {
		log_err("replay: \"%s\": %s", log_quote(q, sizeof(q), path), msg);
	}
	s->st_sum->rs_total++;
	s->st_sum->rs_failed++;
	replay_reason_add(s->st_sum->rs_failed_reasons, &s->st_sum->rs_n_failed_reasons, slug);
	if (s->st_scanning) {
		s->st_scan_failed++;
	}
}

/* replay_fail_now, in file order (st_queue). */
static void replay_fail(struct replay_state *s, const char *path, long index, const char *slug,
                        const char *msg);

/* ---- the list of work ---- */

static int replay_add(struct replay_state *s, int64_t ms, const char *path, long index)
{
	struct replay_entry *e;

	if (s->st_n == s->st_cap) {
		size_t cap = s->st_cap == 0 ? 256 : s->st_cap * 2;
		struct replay_entry *v = realloc(s->st_v, cap * sizeof(*v));

		if (v == NULL) {
			return -1;
		}
		s->st_v = v;
		s->st_cap = cap;
	}
	e = &s->st_v[s->st_n];
	e->re_path = strdup(path);
	if (e->re_path == NULL) {
		return -1;
	}
	e->re_ms = ms;
	e->re_index = index;
	s->st_n++;
	return 0;
}

/* Receive order: by the time of receipt, then by file name (which
 * goes on with the receiver's sequence), then by the whole path: two
 * captures of one millisecond keep their order in every tree they were
 * copied into. */
static int replay_entry_cmp(const void *a, const void *b)
{
	const struct replay_entry *x = a;
	const struct replay_entry *y = b;
	const char *xn = strrchr(x->re_path, '/');
	const char *yn = strrchr(y->re_path, '/');
	int c;

	if (x->re_ms != y->re_ms) {
		return x->re_ms < y->re_ms ? -1 : 1;
	}
	c = strcmp(xn != NULL ? xn : x->re_path, yn != NULL ? yn : y->re_path);
	if (c != 0) {
		return c;
	}
	c = strcmp(x->re_path, y->re_path);
	if (c != 0) {
		return c;
	}
	return x->re_index < y->re_index ? -1 : (x->re_index > y->re_index ? 1 : 0);
}

/* 1 when ms lies inside --since/--until. */
static int replay_in_window(const struct replay_options *opt, int64_t ms)
{
	return ms >= opt->ro_since_ms && ms < opt->ro_until_ms;
}

/* ---- exported Stripe events ---- */

/* The provider instance exported events go to: --provider, or the only
 * Stripe instance configured. */
static const struct provider_conf *replay_export_pc(struct replay_state *s, char *err, size_t err_size)
{
	const struct config *cf = s->st_cf;
	const struct provider_conf *found = NULL;
	size_t i;

	if (s->st_opt->ro_provider != NULL) {
		found = config_provider(cf, s->st_opt->ro_provider);
		if (found == NULL || strcmp(found->pc_provider->p_name, "stripe") != 0) {
			replay_err(err, err_size, "--provider does not name a Stripe instance of the configuration");
			return NULL;
		}
		return found;
	}
	for (i = 0; i < cf->cf_n_providers; i++) {
		if (strcmp(cf->cf_providers[i].pc_provider->p_name, "stripe") != 0) {
			continue;
		}
		if (found != NULL) {
			replay_err(err, err_size, "several Stripe instances are configured: name one with --provider");
			return NULL;
		}
		found = &cf->cf_providers[i];
	}
	if (found == NULL) {
		replay_err(err, err_size, "no Stripe instance is configured");
	}
	return found;
}

/* Parses an export (a JSON array of events, or one event per line) into an
 * array; a line that is not JSON becomes null so indices stay stable. */
static cJSON *replay_export_parse(const char *path, char *err, size_t err_size)
{
	char *data = NULL;
	size_t len = 0;
	size_t i = 0;
	cJSON *arr = NULL;

	if (capture_read_file(path, REPLAY_EXPORT_MAX, &data, &len, err, err_size) < 0) {
		return NULL;
	}
	while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n')) {
		i++;
	}
	if (i < len && data[i] == '[') {
		arr = json_parse_strict(data, len, NULL);
		if (arr == NULL || !cJSON_IsArray(arr)) {
			replay_err(err, err_size, "not a valid JSON array of events");
			cJSON_Delete(arr);
			arr = NULL;
		}
		goto out;
	}
	arr = cJSON_CreateArray();
	if (arr == NULL) {
		replay_err(err, err_size, "out of memory");
		goto out;
	}
	while (i < len) {
		char *nl = memchr(data + i, '\n', len - i);
		size_t end = nl != NULL ? (size_t)(nl - data) : len;
		size_t j = i;
		cJSON *item;

		while (j < end && (data[j] == ' ' || data[j] == '\t' || data[j] == '\r')) {
			j++;
		}
		if (j < end) {
			item = json_parse_strict(data + i, end - i, NULL);
			if (item == NULL) {
				item = cJSON_CreateNull();
			}
			if (item == NULL) {
				replay_err(err, err_size, "out of memory");
				cJSON_Delete(arr);
				arr = NULL;
				goto out;
			}
			cJSON_AddItemToArray(arr, item);
		}
		i = end + 1;
	}
out:
	free(data);
	return arr;
}

/* The event's id and creation time; 0, or -1 when it is not a Stripe event. */
static int replay_export_event(const cJSON *ev, const char **ret_id, int64_t *ret_created_s)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(ev, "id");
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(ev, "created");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
	const cJSON *object = cJSON_GetObjectItemCaseSensitive(ev, "object");

	if (!cJSON_IsObject(ev) || !cJSON_IsString(id) || !cJSON_IsNumber(created) || !cJSON_IsString(type) ||
	    (object != NULL && (!cJSON_IsString(object) || strcmp(object->valuestring, "event") != 0))) {
		return -1;
	}
	*ret_id = id->valuestring;
	*ret_created_s = (int64_t)created->valuedouble;
	return 0;
}

static int replay_scan_export(struct replay_state *s, const char *path)
{
	char err[REPLAY_ERR_MAX];
	const struct provider_conf *pc;
	const cJSON *ev;
	cJSON *arr;
	long index = 0;

	if (!s->st_opt->ro_trust_unsigned) {
		replay_fail(s, path, -1, "unsigned_export",
			    "holds exported provider events, which carry no signature: pass --trust-unsigned "
			    "to replay them (see docs/capture-replay.md)");
		return 0;
	}
	if (!s->st_export_pc_known) {
		s->st_export_pc = replay_export_pc(s, err, sizeof(err));
		s->st_export_pc_known = 1;
	}
	pc = s->st_export_pc;
	if (pc == NULL) {
		replay_fail(s, path, -1, "no_provider", err);
		return 0;
	}
	arr = replay_export_parse(path, err, sizeof(err));
	if (arr == NULL) {
		replay_fail(s, path, -1, "unreadable", err);
		return 0;
	}
	cJSON_ArrayForEach(ev, arr)
	{
		const char *id;
		int64_t created_s;

		if (replay_export_event(ev, &id, &created_s) < 0) {
			replay_fail(s, path, index, "not_an_event",
				    "not a Stripe event object (needs id, type, created)");
		} else if (!replay_in_window(s->st_opt, created_s * 1000)) {
			s->st_sum->rs_skipped++;
		} else if (replay_add(s, created_s * 1000, path, index) < 0) {
			cJSON_Delete(arr);
			return -1;
		}
		index++;
	}
	cJSON_Delete(arr);
	return 0;
}

/* ---- scanning ---- */

static int replay_scan_file(struct replay_state *s, const char *path)
{
	char peek[REPLAY_PEEK];
	char err[REPLAY_ERR_MAX];
	struct capture_meta meta;
	size_t magic_len = sizeof(CAPTURE_MAGIC) - 1;
	ssize_t n;
	size_t i = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		replay_err(err, sizeof(err), "cannot open: %s", strerror(errno));
		replay_fail(s, path, -1, "unreadable", err);
		return 0;
	}
	n = read(fd, peek, sizeof(peek));
	close(fd);
	if (n < 0) {
		replay_err(err, sizeof(err), "cannot read: %s", strerror(errno));
		replay_fail(s, path, -1, "unreadable", err);
		return 0;
	}
	if (n == 0) {
		replay_fail(s, path, -1, "empty", "empty file");
		return 0;
	}
	/* A capture cut inside its first line is still a capture: truncated. */
	if (memcmp(peek, CAPTURE_MAGIC, (size_t)n < magic_len ? (size_t)n : magic_len) == 0) {
		if (capture_read_meta(path, &meta, err, sizeof(err)) < 0) {
			replay_fail(s, path, -1, strncmp(err, "truncated", 9) == 0 ? "truncated" : "corrupted", err);
			return 0;
		}
		if ((s->st_opt->ro_provider != NULL && strcmp(s->st_opt->ro_provider, meta.cm_provider) != 0) ||
		    !replay_in_window(s->st_opt, meta.cm_received_ms)) {
			s->st_sum->rs_skipped++;
			return 0;
		}
		return replay_add(s, meta.cm_received_ms, path, -1);
	}
	while (i < (size_t)n && (peek[i] == ' ' || peek[i] == '\t' || peek[i] == '\r' || peek[i] == '\n')) {
		i++;
	}
	if (i < (size_t)n && (peek[i] == '[' || peek[i] == '{')) {
		return replay_scan_export(s, path);
	}
	replay_fail(s, path, -1, "corrupted",
		    "neither an idemhook capture (first line \"" CAPTURE_MAGIC " 1\") nor exported JSON events");
	return 0;
}

/* Files a directory walk picks up: captures and exports, no hidden files
 * (temporary files of a capture in progress start with a dot). */
static int replay_wanted_name(const char *name)
{
	static const char *const suffixes[] = {CAPTURE_SUFFIX, ".json", ".jsonl", ".ndjson"};
	size_t len = strlen(name);
	size_t i;

	if (name[0] == '.') {
		return 0;
	}
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t sl = strlen(suffixes[i]);

		if (len > sl && strcmp(name + len - sl, suffixes[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

static int replay_scan(struct replay_state *s, const char *path, int depth, int named)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	char err[REPLAY_ERR_MAX];
	int rc = 0;

	if (stat(path, &st) < 0) {
		replay_err(err, sizeof(err), "cannot open: %s", strerror(errno));
		replay_fail(s, path, -1, "unreadable", err);
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		return replay_scan_file(s, path);
	}
	if (!S_ISDIR(st.st_mode)) {
		if (named) {
			replay_fail(s, path, -1, "unreadable", "neither a file nor a directory");
		}
		return 0;
	}
	if (depth >= REPLAY_DEPTH_MAX) {
		replay_fail(s, path, -1, "unreadable", "directories nest too deep");
		return 0;
	}
	d = opendir(path);
	if (d == NULL) {
		replay_err(err, sizeof(err), "cannot open directory: %s", strerror(errno));
		replay_fail(s, path, -1, "unreadable", err);
		return 0;
	}
	for (de = readdir(d); de != NULL && rc == 0; de = readdir(d)) {
		char child[PATH_MAX];
		struct stat cst;
		int len;

		if (de->d_name[0] == '.') {
			continue;
		}
		len = snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
		if (len < 0 || (size_t)len >= sizeof(child)) {
			replay_fail(s, path, -1, "unreadable", "a path inside is too long");
			continue;
		}
		/* Symbolic links to directories are not followed: no loops. */
		if (lstat(child, &cst) < 0) {
			continue;
		}
		if (S_ISLNK(cst.st_mode) && (stat(child, &cst) < 0 || S_ISDIR(cst.st_mode))) {
			continue;
		}
		if (S_ISDIR(cst.st_mode)) {
			rc = replay_scan(s, child, depth + 1, 0);
		} else if (S_ISREG(cst.st_mode) && replay_wanted_name(de->d_name)) {
			rc = replay_scan_file(s, child);
		}
	}
	closedir(d);
	return rc;
}

/* ---- signatures ---- */

/* Signs body for pc at now_s into h. Returns 1 when signed; 0 when pc's
 * scheme is never signed by us (provider.h: p_sign NULL), h untouched;
 * -1 when it can sign but could not sign this one, with the reason in err. */
static int replay_sign(const struct provider_conf *pc, const void *body, size_t len, int64_t now_s,
                       const char *event_id, struct httpc_headers *h, char *err, size_t err_size)
{
	const char *why = NULL;
	char q[160];
	int rc;

	if (pc->pc_provider->p_sign == NULL) {
		return 0;
	}
	rc = pc->pc_provider->p_sign(pc, body, len, now_s, event_id, httpc_headers_add, h, &why);
	if (rc < 0 || h->hch_overflow) {
		httpc_headers_finish(h);
		replay_err(err, err_size,
		           "provider instance \"%s\" cannot sign the request again: %s",
		           log_quote(q, sizeof(q), pc->pc_name),
		           why != NULL ? why : "its signature headers do not fit");
		return -1;
	}
	return 1;
}

/* Checks req's own signature as of verify_s, without the store: NULL when
 * it holds, else the refusal's reason slug (static). */
static const char *replay_verify(const struct provider_conf *pc, const struct http_request *req, int64_t verify_s)
{
	struct event_batch batch;
	struct provider_verdict verdict;
	const char *reason = NULL;

	memset(&batch, 0, sizeof(batch));
	memset(&verdict, 0, sizeof(verdict));
	if (pc->pc_provider->p_receive(pc, req, verify_s, &batch, &verdict) < 0) {
		reason = verdict.pv_reason != NULL ? verdict.pv_reason : "unverified";
	}
	event_batch_finish(&batch);
	return reason;
}

/* ---- --to over HTTP ---- */

int replay_parse_url(const char *url, char *ret_base, size_t base_size)
{
	const char *p;
	const char *host_end;
	const char *path;
	size_t host_len;
	size_t len;

	if (strncasecmp(url, "http://", 7) == 0) {
		p = url + 7;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		p = url + 8;
	} else {
		return -1;
	}
	path = p + strcspn(p, "/?#");
	if (*p == '[') {
		host_end = memchr(p, ']', (size_t)(path - p));
		if (host_end == NULL) {
			return -1;
		}
		host_len = (size_t)(host_end - p - 1);
		host_end++;
	} else {
		host_end = memchr(p, ':', (size_t)(path - p));
		if (host_end == NULL) {
			host_end = path;
		}
		host_len = (size_t)(host_end - p);
	}
	if (host_len == 0 || memchr(p, '@', (size_t)(path - p)) != NULL) {
		return -1;
	}
	if (host_end < path) {
		char digits[8];
		size_t dl;
		char *end;
		unsigned long port;

		if (*host_end != ':') {
			return -1;
		}
		dl = (size_t)(path - host_end - 1);
		if (dl == 0 || dl >= sizeof(digits)) {
			return -1;
		}
		memcpy(digits, host_end + 1, dl);
		digits[dl] = '\0';
		if (digits[0] < '0' || digits[0] > '9') {
			return -1;
		}
		port = strtoul(digits, &end, 10);
		if (*end != '\0' || port == 0 || port > 65535) {
			return -1;
		}
	}
	if ((*path != '\0' && *path != '/') || strpbrk(path, "?# \t\r\n") != NULL) {
		return -1;
	}
	/* "http://h/" and "http://h" both mean no prefix. */
	len = strlen(url);
	if (len > 0 && url[len - 1] == '/') {
		len--;
	}
	if (len >= base_size) {
		return -1;
	}
	memcpy(ret_base, url, len);
	ret_base[len] = '\0';
	return 0;
}

struct replay_answer {
	int ra_status;
	int ra_replayed; /* Idempotent-Replayed: true */
	char ra_outcome[24]; /* Idemhook-Outcome, or "" */
	char ra_slug[48]; /* "urn:idemhook:problem:<slug>" of a problem answer, or "" */
	int64_t ra_retry_after_ms; /* the answer's Retry-After from now, or -1 */
	enum httpc_failure ra_failure; /* why no answer came (replay_http returned -1) */
};

/* POSTs req to url (the --to address joined with its target), with the
 * headers in sig (may be NULL) replacing those of the same name. */
/* 1 when the captured header name gives way to the fresh signature sig:
 * the same name, or the svix- twin of a webhook- name (a Standard Webhooks
 * receiver refuses the two with different values). */
static int replay_superseded(const struct httpc_headers *sig, const char *name)
{
	char twin[64];

	if (sig == NULL) {
		return 0;
	}
	if (httpc_headers_get(sig, name) != NULL) {
		return 1;
	}
	if (strncasecmp(name, "svix-", 5) != 0 || strlen(name + 5) + 9 > sizeof(twin)) {
		return 0;
	}
	snprintf(twin, sizeof(twin), "webhook-%s", name + 5);
	return httpc_headers_get(sig, twin) != NULL;
}

static int replay_http(struct replay_state *s, const char *url, const struct http_request *req,
		       const struct httpc_headers *sig, struct replay_answer *ret, char *err, size_t err_size)
{
	unsigned timeout = s->st_opt->ro_timeout_s != 0 ? s->st_opt->ro_timeout_s : REPLAY_TIMEOUT_DEFAULT_S;
	struct httpc_headers hdrs;
	struct httpc_request hreq;
	struct httpc_response resp;
	char herr[HTTPC_ERR_MAX];
	const char *replayed;
	const char *outcome;
	const char *slug;
	const char *retry_after;
	size_t i;
	int rc = -1;

	httpc_headers_init(&hdrs);
	memset(ret, 0, sizeof(*ret));
	memset(&hreq, 0, sizeof(hreq));
	memset(&resp, 0, sizeof(resp));
	for (i = 0; i < req->hr_n_headers; i++) {
		const struct http_header *h = &req->hr_headers[i];

		if (!replay_superseded(sig, h->hh_name)) {
			httpc_headers_add(&hdrs, h->hh_name, h->hh_value);
		}
	}
	for (i = 0; sig != NULL && i < sig->hch_n; i++) {
		httpc_headers_add(&hdrs, sig->hch_v[i].hh_name, sig->hch_v[i].hh_value);
	}
	if (hdrs.hch_overflow) {
		replay_err(err, err_size, "cannot build the request for the --to address");
		goto out;
	}
	if (timeout > UINT_MAX / 1000) {
		timeout = UINT_MAX / 1000;
	}
	hreq.hcq_method = req->hr_method;
	hreq.hcq_url = url;
	hreq.hcq_headers = &hdrs;
	hreq.hcq_body = req->hr_body;
	hreq.hcq_body_len = req->hr_body_len;
	hreq.hcq_response_max = REPLAY_RESPONSE_MAX;
	hreq.hcq_timeout_ms = timeout * 1000;
	hreq.hcq_ca_file = s->st_ca_file;
	if (httpc_exchange(&hreq, &resp, herr, sizeof(herr)) < 0) {
		ret->ra_failure = resp.hcr_failure;
		if (ret->ra_failure == HTTPC_FAILURE_TLS_VERIFY) {
			replay_err(err, err_size,
			           "the --to address's certificate could not be verified (%s), and "
			           "another attempt would fail alike: trust the CA that issued it "
			           "with --cacert FILE or [client] ca_file, and address it by a "
			           "name its certificate holds",
			           herr);
		} else if (ret->ra_failure == HTTPC_FAILURE_TLS_CA_FILE) {
			replay_err(err, err_size,
			           "%s, and every request would fail alike: give --cacert or "
			           "[client] ca_file a PEM file of the CAs to trust",
			           herr);
		} else if (ret->ra_failure == HTTPC_FAILURE_TLS_PLAIN) {
			replay_err(err, err_size,
			           "the --to address's port does not speak TLS (%s), and another "
			           "attempt would fail alike: address a plain HTTP port with "
			           "http://",
			           herr);
		} else {
			replay_err(err, err_size, "the --to address: %s", herr);
		}
		goto out;
	}
	ret->ra_status = (int)resp.hcr_status;
	ret->ra_retry_after_ms = -1;
	retry_after = httpc_response_header(&resp, "Retry-After");
	if (retry_after != NULL && outbox_retry_after_ms(retry_after, (int64_t)time(NULL) * 1000,
	                                                 &ret->ra_retry_after_ms) < 0) {
		ret->ra_retry_after_ms = -1;
	}
	replayed = httpc_response_header(&resp, "Idempotent-Replayed");
	ret->ra_replayed = replayed != NULL && strcasecmp(replayed, "true") == 0;
	outcome = httpc_response_header(&resp, INGEST_OUTCOME_HEADER);
	if (outcome != NULL && strlen(outcome) < sizeof(ret->ra_outcome)) {
		snprintf(ret->ra_outcome, sizeof(ret->ra_outcome), "%s", outcome);
	}
	slug = strstr(resp.hcr_body, "urn:idemhook:problem:");
	if (slug != NULL) {
		size_t n = 0;

		slug += strlen("urn:idemhook:problem:");
		while (n + 1 < sizeof(ret->ra_slug) && (slug[n] == '_' || slug[n] == '-' ||
							 (slug[n] >= 'a' && slug[n] <= 'z') ||
							 (slug[n] >= '0' && slug[n] <= '9'))) {
			ret->ra_slug[n] = slug[n];
			n++;
		}
		ret->ra_slug[n] = '\0';
	}
	rc = 0;
out:
	httpc_response_finish(&resp);
	httpc_headers_finish(&hdrs);
	return rc;
}

/* ---- one request ---- */

static void replay_count_now(struct replay_state *s, const struct replay_entry *e,
                             enum replay_verdict v, const char *reason, const char *msg)
{
	struct replay_summary *sum = s->st_sum;

	switch (v) {
	case REPLAY_V_NEW:
		sum->rs_total++;
		sum->rs_new++;
		replay_line(s, e, s->st_opt->ro_dry_run ? "would be new" : "new", NULL);
		break;
	case REPLAY_V_MISMATCH:
		/* A duplicate all the same, counted apart as well. */
		sum->rs_total++;
		sum->rs_duplicate++;
		sum->rs_mismatch++;
		replay_line(s, e, "duplicate (other payload)", NULL);
		break;
	case REPLAY_V_DUPLICATE:
		sum->rs_total++;
		sum->rs_duplicate++;
		replay_line(s, e, "duplicate", NULL);
		break;
	case REPLAY_V_REFUSED:
		sum->rs_total++;
		sum->rs_refused++;
		replay_line(s, e, "refused", reason);
		break;
	case REPLAY_V_REJECTED:
		sum->rs_total++;
		sum->rs_rejected++;
		replay_reason_add(sum->rs_rejected_reasons, &sum->rs_n_rejected_reasons, reason);
		replay_line(s, e, "rejected", reason);
		break;
	case REPLAY_V_RETRY:
	case REPLAY_V_FAILED:
		replay_fail_now(s, e->re_path, e->re_index, reason, msg != NULL ? msg : reason);
		break;
	}
}

static void replay_collect(struct replay_state *s, unsigned max);

/* Puts sl at the end of st_queue. */
static void replay_queue_push(struct replay_state *s, struct replay_slot *sl)
{
	if (s->st_queue == NULL) {
		s->st_queue_tail = &s->st_queue;
	}
	*s->st_queue_tail = sl;
	s->st_queue_tail = &sl->rl_queue_next;
}

static void replay_slot_free(struct replay_slot *sl)
{
	free(sl->rl_reason);
	free(sl->rl_msg);
	free(sl->rl_path);
	free(sl);
}

/* Gives sl its verdict, with copies of the strings (they may live in a job
 * about to be destroyed). Returns 0 or -1 (out of memory). */
static int replay_slot_know(struct replay_slot *sl, enum replay_verdict v, const char *reason,
                            const char *msg)
{
	sl->rl_known = 1;
	sl->rl_v = v;
	sl->rl_reason = reason != NULL ? strdup(reason) : NULL;
	sl->rl_msg = msg != NULL ? strdup(msg) : NULL;
	return (reason != NULL && sl->rl_reason == NULL) || (msg != NULL && sl->rl_msg == NULL) ? -1
	                                                                                        : 0;
}

/* Reports the requests at the head of st_queue whose verdict is known, up
 * to the first one still with the store. */
static void replay_queue_flush(struct replay_state *s)
{
	struct replay_slot *sl;

	while (s->st_queue != NULL && s->st_queue->rl_known) {
		sl = s->st_queue;
		s->st_queue = sl->rl_queue_next;
		if (sl->rl_fail) {
			replay_fail_now(s, sl->rl_path, sl->rl_index, sl->rl_reason, sl->rl_msg);
		} else {
			replay_count_now(s, sl->rl_e, sl->rl_v, sl->rl_reason, sl->rl_msg);
		}
		replay_slot_free(sl);
	}
}

/* A verdict known now, for e (NULL: a failure of path and index): reported
 * at once when no request before it is still with the store, else queued
 * behind them. Returns 1 when queued, 0 when the caller reports it now. */
static int replay_defer(struct replay_state *s, const struct replay_entry *e, enum replay_verdict v,
                        const char *reason, const char *msg, const char *path, long index)
{
	struct replay_slot *sl;

	if (s->st_queue == NULL) {
		return 0;
	}
	sl = calloc(1, sizeof(*sl));
	if (sl != NULL) {
		sl->rl_s = s;
		sl->rl_e = e;
		sl->rl_fail = e == NULL;
		sl->rl_index = index;
		sl->rl_path = e == NULL && path != NULL ? strdup(path) : NULL;
		if (replay_slot_know(sl, v, reason, msg) == 0 &&
		    (e != NULL || sl->rl_path != NULL)) {
			replay_queue_push(s, sl);
			return 1;
		}
		replay_slot_free(sl);
	}
	/* Out of memory: wait for every request before it instead. */
	replay_collect(s, 0);
	return 0;
}

static void replay_count(struct replay_state *s, const struct replay_entry *e,
                         enum replay_verdict v, const char *reason, const char *msg)
{
	if (!replay_defer(s, e, v, reason, msg, NULL, -1)) {
		replay_count_now(s, e, v, reason, msg);
	}
}

static void replay_fail(struct replay_state *s, const char *path, long index, const char *slug,
                        const char *msg)
{
	if (!replay_defer(s, NULL, REPLAY_V_FAILED, slug, msg, path, index)) {
		replay_fail_now(s, path, index, slug, msg);
	}
}

/* The verdict on an in-process request from its ingest report. */
static enum replay_verdict replay_verdict_of(const struct ingest_report *rep, const char **ret_reason)
{
	*ret_reason = rep->ir_reason;
	switch (rep->ir_result) {
	case INGEST_NEW:
		return REPLAY_V_NEW;
	case INGEST_DUPLICATE:
		return REPLAY_V_DUPLICATE;
	case INGEST_MISMATCH:
		return REPLAY_V_MISMATCH;
	case INGEST_FAILED:
		return REPLAY_V_REFUSED;
	case INGEST_REJECTED:
		return REPLAY_V_REJECTED;
	case INGEST_IN_PROGRESS:
	case INGEST_TRANSIENT:
		if (*ret_reason == NULL) {
			*ret_reason = ingest_result_name(rep->ir_result);
		}
		return REPLAY_V_RETRY;
	}
	return REPLAY_V_FAILED;
}

static void replay_sleep_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
	                      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* The pause before retry number attempt (1 = the first): 200, 400, 600 ms. */
static int64_t replay_backoff_ms(int attempt)
{
	return 200 * (int64_t)attempt;
}

static void replay_backoff(int attempt)
{
	replay_sleep_ms(replay_backoff_ms(attempt));
}

/* Counts an in-process verdict; a retry that found no success counts as
 * failed, with the store's answer as the reason. */
static const char *replay_ingest_msg(enum replay_verdict v, const char *reason, char *err,
                                     size_t err_size)
{
	if (v != REPLAY_V_RETRY && v != REPLAY_V_FAILED) {
		return NULL;
	}
	replay_err(err, err_size, "the store answered %s", reason != NULL ? reason : "");
	return err;
}

static void replay_count_ingest(struct replay_state *s, const struct replay_entry *e, enum replay_verdict v,
				const char *reason)
{
	char err[REPLAY_ERR_MAX];
	const char *msg = replay_ingest_msg(v, reason, err, sizeof(err));

	replay_count(s, e, v, reason != NULL && reason[0] != '\0' ? reason : NULL, msg);
}

/* The store's completion (its completion thread): hands the slot to the main
 * thread, which counts it. */
static void replay_slot_done(void *arg)
{
	struct replay_slot *sl = arg;
	struct replay_state *s = sl->rl_s;

	pthread_mutex_lock(&s->st_jobs_mutex);
	sl->rl_next = s->st_finished;
	s->st_finished = sl;
	pthread_cond_signal(&s->st_jobs_cond);
	pthread_mutex_unlock(&s->st_jobs_mutex);
}

/* Counts committed requests until at most max are in flight. A transient
 * one goes back to the store after a pause, as the sequential replay does. */
static void replay_collect(struct replay_state *s, unsigned max)
{
	struct replay_slot *list;
	struct replay_slot *sl;
	struct ingest_report rep;
	enum replay_verdict v;
	const char *reason;
	const char *msg;
	char err[REPLAY_ERR_MAX];
	struct reply answer;

	while (s->st_in_flight > max) {
		pthread_mutex_lock(&s->st_jobs_mutex);
		while (s->st_finished == NULL) {
			pthread_cond_wait(&s->st_jobs_cond, &s->st_jobs_mutex);
		}
		list = s->st_finished;
		s->st_finished = NULL;
		pthread_mutex_unlock(&s->st_jobs_mutex);
		while (list != NULL) {
			sl = list;
			list = sl->rl_next;
			reply_init(&answer);
			if (ingest_finish(sl->rl_job, &answer, &rep) < 0) {
				v = REPLAY_V_FAILED;
				reason = "out_of_memory";
			} else {
				v = replay_verdict_of(&rep, &reason);
			}
			reply_finish(&answer);
			if (v == REPLAY_V_RETRY && sl->rl_attempt < REPLAY_RETRIES) {
				sl->rl_attempt++;
				replay_backoff(sl->rl_attempt);
				ingest_submit(s->st_store, sl->rl_job, replay_slot_done, sl);
				continue;
			}
			/* Known now; reported once those before it are. Out of
			 * memory, it is reported without its text. */
			msg = replay_ingest_msg(v, reason, err, sizeof(err));
			(void)replay_slot_know(
			        sl, v, reason != NULL && reason[0] != '\0' ? reason : NULL, msg);
			ingest_job_destroy(sl->rl_job);
			sl->rl_job = NULL;
			s->st_in_flight--;
		}
		replay_queue_flush(s);
	}
	replay_queue_flush(s);
}

/* In-process: the same pipeline as the HTTP route. Verifies and prepares
 * req now (req is not needed after) and leaves its claims with the store;
 * up to st_jobs requests are in flight, so their claims share commits. */
static void replay_submit(struct replay_state *s, const struct replay_entry *e, const struct provider_conf *pc,
			  const struct http_request *req, int64_t verify_s)
{
	struct ingest_options opt;
	struct ingest_report rep;
	struct ingest_job *job = NULL;
	struct replay_slot *sl;
	struct reply answer;
	enum replay_verdict v = REPLAY_V_FAILED;
	const char *reason = NULL;
	int attempt;

	replay_collect(s, s->st_jobs - 1);
	memset(&opt, 0, sizeof(opt));
	/* The signature is checked as of the moment it arrived: see
	 * docs/capture-replay.md, for why that is safe. A dry run is this same
	 * replay into a snapshot of the database (replay.h). */
	opt.io_verify_s = verify_s;
	for (attempt = 0; attempt <= REPLAY_RETRIES; attempt++) {
		if (attempt > 0) {
			replay_backoff(attempt);
		}
		reply_init(&answer);
		if (ingest_prepare(s->st_store, s->st_cf, pc, req, &opt, &job, &answer, &rep) < 0) {
			reply_finish(&answer);
			replay_count_ingest(s, e, REPLAY_V_FAILED, "out_of_memory");
			return;
		}
		reply_finish(&answer);
		if (job != NULL) {
			break;
		}
		/* Answered without a claim: rejected. */
		v = replay_verdict_of(&rep, &reason);
		if (v != REPLAY_V_RETRY) {
			break;
		}
	}
	if (job == NULL) {
		replay_count_ingest(s, e, v, reason);
		return;
	}
	sl = calloc(1, sizeof(*sl));
	if (sl == NULL) {
		ingest_job_destroy(job);
		replay_count_ingest(s, e, REPLAY_V_FAILED, "out_of_memory");
		return;
	}
	sl->rl_s = s;
	sl->rl_e = e;
	sl->rl_job = job;
	replay_queue_push(s, sl);
	s->st_in_flight++;
	ingest_submit(s->st_store, job, replay_slot_done, sl);
}

/* Over HTTP: classified from the answer; REPLAY_V_RETRY for no answer and
 * for 409, 429 and 503, REPLAY_V_FAILED for a certificate that failed
 * verification or an https:// port that does not speak TLS. *ret_unavailable says whether the
 * address was unavailable (no answer, a certificate refused, or 429/503), *ret_wait_ms how long it
 * asked to be left alone (Retry-After), or -1. */
static enum replay_verdict replay_remote(struct replay_state *s, const struct http_request *req,
                                         const struct httpc_headers *sig, char *reason,
                                         size_t reason_size, char *err, size_t err_size,
                                         int *ret_unavailable, int64_t *ret_wait_ms)
{
	struct replay_answer a;
	char herr[HTTPC_ERR_MAX];
	char *url = NULL;
	int rc;

	*ret_unavailable = 0;
	*ret_wait_ms = -1;
	/* Built part by part: the capture's target is a path under the --to
	 * address and can never name another host (an "@host:port/..."
	 * target would with plain concatenation). Nothing is sent, and
	 * nothing counted as answered, for a target that is not a path. */
	if (httpc_url_join(s->st_base, req->hr_url, &url, herr, sizeof(herr)) < 0) {
		replay_err(err, err_size, "not sent: %s", herr);
		snprintf(reason, reason_size, "%s", "bad_target");
		return REPLAY_V_FAILED;
	}
	rc = replay_http(s, url, req, sig, &a, err, err_size);
	free(url);
	/* A certificate refused now is refused in a second too, and for
	 * every request after this one: no retry, and the stop counts it
	 * as the address unavailable. */
	if (rc < 0 && a.ra_failure == HTTPC_FAILURE_TLS_VERIFY) {
		snprintf(reason, reason_size, "%s", "tls_verify");
		*ret_unavailable = 1;
		return REPLAY_V_FAILED;
	}
	/* The CA file is the problem, for every request alike. */
	if (rc < 0 && a.ra_failure == HTTPC_FAILURE_TLS_CA_FILE) {
		snprintf(reason, reason_size, "%s", "ca_file");
		*ret_unavailable = 1;
		return REPLAY_V_FAILED;
	}
	/* An https:// address on a port that answers plain HTTP: the same
	 * answer comes every time. */
	if (rc < 0 && a.ra_failure == HTTPC_FAILURE_TLS_PLAIN) {
		snprintf(reason, reason_size, "%s", "not_tls");
		*ret_unavailable = 1;
		return REPLAY_V_FAILED;
	}
	/* No answer at all: the target may be restarting, and sending the
	 * same request again is safe (it dedupes on the event id), so it is
	 * tried again like a 503. */
	if (rc < 0) {
		snprintf(reason, reason_size, "%s", "connection");
		*ret_unavailable = 1;
		return REPLAY_V_RETRY;
	}
	if (a.ra_slug[0] != '\0') {
		snprintf(reason, reason_size, "%s", a.ra_slug);
	} else {
		snprintf(reason, reason_size, "http_%d", a.ra_status);
	}
	/* An idemhook says what became of the request, as in-process replay
	 * would count it; the status alone cannot tell a business refusal
	 * (acknowledged 2xx) from a new event. */
	if (a.ra_status >= 200 && a.ra_status < 300 && strcmp(a.ra_outcome, "failed") == 0) {
		snprintf(reason, reason_size, "%s", "refused_by_business_rules");
		return REPLAY_V_REFUSED;
	}
	if (a.ra_status >= 200 && a.ra_status < 300 && strcmp(a.ra_outcome, "mismatch") == 0) {
		return REPLAY_V_MISMATCH;
	}
	if (a.ra_status >= 200 && a.ra_status < 300) {
		return a.ra_replayed ? REPLAY_V_DUPLICATE : REPLAY_V_NEW;
	}
	if (a.ra_status == 409 || a.ra_status == 503 || a.ra_status == 429) {
		/* A 409 is one key still in progress there, not the address down. */
		*ret_unavailable = a.ra_status != 409;
		*ret_wait_ms = a.ra_retry_after_ms;
		if (a.ra_retry_after_ms >= 0) {
			replay_err(err, err_size,
			           "the --to address answered %d (Retry-After: %" PRId64 " s)",
			           a.ra_status, (a.ra_retry_after_ms + 999) / 1000);
		} else {
			replay_err(err, err_size, "the --to address answered %d", a.ra_status);
		}
		return REPLAY_V_RETRY;
	}
	if (a.ra_status == 400 || a.ra_status == 401 || a.ra_status == 403 || a.ra_status == 413) {
		return REPLAY_V_REJECTED;
	}
	replay_err(err, err_size, "the --to address answered %d", a.ra_status);
	return REPLAY_V_FAILED;
}

/* Replays req for provider instance name (pc may be NULL with --to). */
static void replay_one(struct replay_state *s, const struct replay_entry *e, const struct provider_conf *pc,
		       const struct http_request *req, int64_t verify_s, const struct httpc_headers *sig)
{
	char reason[64] = "";
	char err[REPLAY_ERR_MAX] = "";
	char q[PATH_MAX];
	enum replay_verdict v = REPLAY_V_FAILED;
	int unavailable = 0;
	int64_t wait_ms = -1;
	int64_t delay;
	int attempt;

	if (s->st_opt->ro_to == NULL) {
		replay_submit(s, e, pc, req, verify_s);
		return;
	}
	for (attempt = 0;; attempt++) {
		v = replay_remote(s, req, sig, reason, sizeof(reason), err, sizeof(err),
		                  &unavailable, &wait_ms);
		if (v != REPLAY_V_RETRY || attempt >= REPLAY_RETRIES) {
			break;
		}
		/* The target's Retry-After wins over our own pause when longer;
		 * one longer than the bound is not waited for. */
		if (wait_ms > (int64_t)REPLAY_RETRY_AFTER_MAX_S * 1000) {
			replay_err(err, sizeof(err),
			           "the --to address answered %s and asks to wait %" PRId64
			           " s, more than %d s: replay it later",
			           reason, (wait_ms + 999) / 1000, REPLAY_RETRY_AFTER_MAX_S);
			break;
		}
		delay = replay_backoff_ms(attempt + 1);
		if (wait_ms > delay) {
			delay = wait_ms;
		}
		log_warn("replay: \"%s\": %s; sending it again in %" PRId64
		         " ms (attempt %d of %d)",
		         log_quote(q, sizeof(q), e->re_path), err, delay, attempt + 2,
		         REPLAY_RETRIES + 1);
		replay_sleep_ms(delay);
	}
	if (v == REPLAY_V_RETRY && attempt > 0) {
		size_t len = strlen(err);

		snprintf(err + len, sizeof(err) - len, " (%d attempts)", attempt + 1);
	}
	replay_count(s, e, v, reason[0] != '\0' ? reason : NULL, err[0] != '\0' ? err : NULL);
	/* A target that is plainly down would cost every remaining request
	 * its whole --timeout: after ro_stop_after in a row, stop. */
	if (!unavailable) {
		s->st_unavailable = 0;
		return;
	}
	s->st_unavailable++;
	snprintf(s->st_unavailable_msg, sizeof(s->st_unavailable_msg), "%s", err);
	if (s->st_opt->ro_stop_after > 0 && s->st_unavailable >= s->st_opt->ro_stop_after) {
		s->st_stopped = 1;
	}
}

/* The id pc's profile signs req again with: the one it keys on when a
 * signed header carries it (Standard Webhooks' webhook-id, hmac's
 * key_header); NULL when the body has it. */
static const char *replay_event_id(const struct provider_conf *pc, const struct http_request *req)
{
	if (pc->pc_provider->p_sign_id == NULL) {
		return NULL;
	}
	return pc->pc_provider->p_sign_id(pc, req);
}

static void replay_capture(struct replay_state *s, const struct replay_entry *e)
{
	struct capture_record rec;
	struct httpc_headers sig;
	const struct provider_conf *pc;
	char err[REPLAY_ERR_MAX];
	char q[160];

	httpc_headers_init(&sig);
	if (capture_read(e->re_path, &rec, err, sizeof(err)) < 0) {
		replay_fail(s, e->re_path, -1, strncmp(err, "truncated", 9) == 0 ? "truncated" : "corrupted", err);
		return;
	}
	pc = config_provider(s->st_cf, rec.cr_provider);
	capture_restore_auth(pc, &rec);
	if (s->st_opt->ro_to == NULL) {
		if (pc == NULL) {
			replay_err(err, sizeof(err), "provider instance \"%s\" is not in the configuration",
				   log_quote(q, sizeof(q), rec.cr_provider));
			replay_fail(s, e->re_path, -1, "unknown_provider", err);
			goto out;
		}
		replay_one(s, e, pc, &rec.cr_req, rec.cr_received_ms / 1000, &sig);
		goto out;
	}
	/* Over HTTP the receiver checks the timestamp against its own clock:
	 * sign again, now, with this configuration's secret, keeping the
	 * event id (Standard Webhooks puts it in webhook-id, hmac in its
	 * key_header). Only what
	 * verifies as captured is signed again, or a forged capture would be
	 * laundered. Schemes we never sign go as captured; one that can sign
	 * but cannot sign this capture is not sent with its stale signature
	 * as if nothing were wrong: it fails, saying why. */
	if (pc != NULL) {
		const char *reason = replay_verify(pc, &rec.cr_req, rec.cr_received_ms / 1000);

		if (reason != NULL) {
			replay_count(s, e, REPLAY_V_REJECTED, reason, NULL);
			goto out;
		}
	}
	if (pc != NULL &&
	    replay_sign(pc, rec.cr_req.hr_body, rec.cr_req.hr_body_len, replay_now_s(),
	                replay_event_id(pc, &rec.cr_req), &sig, err, sizeof(err)) < 0) {
		replay_fail(s, e->re_path, -1, "sign", err);
		goto out;
	}
	replay_one(s, e, pc, &rec.cr_req, rec.cr_received_ms / 1000, &sig);
out:
	httpc_headers_finish(&sig);
	capture_record_finish(&rec);
}

static void replay_export_item(struct replay_state *s, const struct replay_entry *e)
{
	const struct provider_conf *pc = s->st_export_pc;
	struct httpc_headers hdr;
	struct http_request req;
	char err[REPLAY_ERR_MAX];
	char url[CAPTURE_PROVIDER_MAX + 16];
	const cJSON *ev;
	const char *id;
	char *body = NULL;
	int64_t created_s;
	int64_t sign_s;
	int signed_rc;

	httpc_headers_init(&hdr);
	if (s->st_export_path == NULL || strcmp(s->st_export_path, e->re_path) != 0) {
		cJSON_Delete(s->st_export);
		free(s->st_export_path);
		s->st_export = replay_export_parse(e->re_path, err, sizeof(err));
		s->st_export_path = strdup(e->re_path);
		if (s->st_export == NULL || s->st_export_path == NULL) {
			replay_fail(s, e->re_path, e->re_index, "unreadable", "the file changed or memory ran out");
			return;
		}
	}
	ev = cJSON_GetArrayItem(s->st_export, (int)e->re_index);
	if (ev == NULL || replay_export_event(ev, &id, &created_s) < 0) {
		replay_fail(s, e->re_path, e->re_index, "unreadable", "the file changed during the replay");
		return;
	}
	body = cJSON_PrintUnformatted(ev);
	if (body == NULL) {
		replay_fail(s, e->re_path, e->re_index, "out_of_memory", "out of memory");
		return;
	}
	/* --trust-unsigned: the operator vouches for these events, so they are
	 * signed here with the instance's own secret, as of their creation
	 * time in-process or now over HTTP, and then verified as usual. */
	sign_s = s->st_opt->ro_to != NULL ? replay_now_s() : created_s;
	httpc_headers_add(&hdr, "Content-Type", "application/json; charset=utf-8");
	signed_rc = replay_sign(pc, body, strlen(body), sign_s, id, &hdr, err, sizeof(err));
	if (signed_rc == 0) {
		replay_err(err, sizeof(err), "provider instance \"%s\" cannot sign events", pc->pc_name);
	}
	if (signed_rc != 1) {
		replay_fail(s, e->re_path, e->re_index, "sign", err);
		goto out;
	}
	snprintf(url, sizeof(url), "/hooks/%s", pc->pc_name);
	memset(&req, 0, sizeof(req));
	req.hr_method = "POST";
	req.hr_url = url;
	req.hr_path = url;
	req.hr_version = "HTTP/1.1";
	req.hr_headers = hdr.hch_v;
	req.hr_n_headers = hdr.hch_n;
	req.hr_body = (const unsigned char *)body;
	req.hr_body_len = strlen(body);
	req.hr_peer = "replay";
	req.hr_client = "replay";
	req.hr_received_ms = created_s * 1000;
	/* The signature headers are in req already: nothing to replace. */
	replay_one(s, e, pc, &req, created_s, NULL);
out:
	httpc_headers_finish(&hdr);
	cJSON_free(body);
}

int replay_run(struct store *st, const struct config *cf, const struct replay_options *opt,
	       const char *const *paths, size_t n_paths, struct replay_summary *ret)
{
	struct replay_state s;
	enum log_level saved_level;
	int64_t t0 = replay_mono_ms();
	size_t i;
	int rc = -1;

	memset(&s, 0, sizeof(s));
	memset(ret, 0, sizeof(*ret));
	s.st_store = st;
	s.st_cf = cf;
	s.st_opt = opt;
	s.st_sum = ret;
	s.st_jobs = opt->ro_jobs > 0 ? opt->ro_jobs : REPLAY_JOBS_DEFAULT;
	s.st_jobs_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	s.st_jobs_cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	if (opt->ro_to != NULL && replay_parse_url(opt->ro_to, s.st_base, sizeof(s.st_base)) < 0) {
		log_err("replay: --to takes an http:// or https://host[:port][/prefix] URL");
		return -1;
	}
	s.st_ca_file = opt->ro_ca_file != NULL ? opt->ro_ca_file : config_client_ca_file(cf);
	s.st_scanning = 1;
	for (i = 0; i < n_paths; i++) {
		if (replay_scan(&s, paths[i], 0, 1) < 0) {
			log_err("replay: out of memory while listing files");
			goto out;
		}
	}
	s.st_scanning = 0;
	/* Only (time, path) pairs are sorted; bodies are read one at a time. */
	if (s.st_n > 1) {
		qsort(s.st_v, s.st_n, sizeof(s.st_v[0]), replay_entry_cmp);
	}
	/* Warnings of the pipeline (a refused order, a mismatch) would break
	 * the bar's line; the summary counts them. Errors still show. */
	saved_level = log_get_level();
	if (opt->ro_progress == REPLAY_PROGRESS_BAR && saved_level > LOG_LEVEL_ERR) {
		log_set_level(LOG_LEVEL_ERR);
	}
	for (i = 0; i < s.st_n; i++) {
		if (s.st_stopped) {
			ret->rs_not_sent = s.st_n - i;
			if (opt->ro_progress == REPLAY_PROGRESS_BAR) {
				fputs("\r\033[K", stderr);
			}
			log_err("replay: stopped: %u requests in a row found the --to address "
			        "unavailable "
			        "(last: %s); %zu not sent",
			        s.st_unavailable, s.st_unavailable_msg, s.st_n - i);
			break;
		}
		if (s.st_v[i].re_index < 0) {
			replay_capture(&s, &s.st_v[i]);
		} else {
			replay_export_item(&s, &s.st_v[i]);
		}
		s.st_done++;
		replay_draw(&s, 0);
	}
	replay_collect(&s, 0);
	replay_draw(&s, 1);
	log_set_level(saved_level);
	rc = 0;
out:
	ret->rs_seconds = (double)(replay_mono_ms() - t0) / 1000.0;
	for (i = 0; i < s.st_n; i++) {
		free(s.st_v[i].re_path);
	}
	free(s.st_v);
	cJSON_Delete(s.st_export);
	free(s.st_export_path);
	return rc;
}
