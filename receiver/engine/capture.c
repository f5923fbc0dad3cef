/* capture.c: writes each provider request to the spool as one plain file,
 * atomically, before the reply goes out; and parses such files back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "capture.h"
#include "crypto.h"
#include "log.h"
#include "metrics.h"
#include "provider.h"
#include "text.h"

#define CAPTURE_NAME_MAX 256 /* bytes of one file name */
#define CAPTURE_META_LINES_MAX 64 /* metadata lines a reader accepts */
#define CAPTURE_CLIENTS 256 /* clients whose rejected captures are counted apart */
#define CAPTURE_RESCAN_MS 10000 /* the spool is measured again at most this often */
#define CAPTURE_SKIP_LOG_MS 60000 /* one log line per reason this often at most */
#define CAPTURE_MAX_BYTES_DEFAULT ((size_t)1024 * 1024 * 1024) /* [capture] max_bytes */
#define CAPTURE_MIN_FREE_DEFAULT ((size_t)512 * 1024 * 1024)   /* [capture] min_free */
#define CAPTURE_REJECTED_BODY_MAX_DEFAULT ((size_t)64 * 1024) /* [capture] rejected_body_max */
#define CAPTURE_REJECTED_RATE_DEFAULT 60         /* [capture] rejected_rate, per minute */
#define CAPTURE_REJECTED_CLIENT_RATE_DEFAULT 10 /* [capture] rejected_client_rate, per minute */

enum capture_mode {
	CAPTURE_MODE_OFF = 0,
	CAPTURE_MODE_ALL,
	CAPTURE_MODE_REJECTED,
};

/* Why a capture was not written (the metric's reason label). */
enum capture_skip {
	CAPTURE_SKIP_REJECTED_SIZE = 0,
	CAPTURE_SKIP_REJECTED_CLIENT_RATE,
	CAPTURE_SKIP_REJECTED_RATE,
	CAPTURE_SKIP_QUOTA,
	CAPTURE_SKIP_FREE_SPACE,
	CAPTURE_SKIP_N,
};

static const char *const capture_skip_names[CAPTURE_SKIP_N + 1] = {
        "rejected_size", "rejected_client_rate", "rejected_rate", "quota", "free_space", NULL};

static const char *const capture_skip_why[CAPTURE_SKIP_N] = {
        "its body is over [capture] rejected_body_max",
        "its client is over [capture] rejected_client_rate",
        "rejected requests are over [capture] rejected_rate",
        "the spool is at [capture] max_bytes (half of it for rejected requests)",
        ("free space on the spool's file system is under [capture] min_free (twice it for "
         "rejected requests)"),
};

/* One client's rejected captures in the current minute. */
struct capture_client {
	char cc_addr[48];
	unsigned cc_n;
};

struct capture {
	enum capture_mode cap_mode;
	char *cap_dir;
	int64_t cap_retention_s;
	char cap_instance[9]; /* random hex: names stay unique across restarts */
	atomic_uint_fast64_t cap_seq;
	/* the bounds ([capture] keys) */
	size_t cap_max_bytes;
	size_t cap_min_free;
	size_t cap_rejected_body_max;
	unsigned cap_rejected_rate;        /* per minute, every client */
	unsigned cap_rejected_client_rate; /* per minute, one client */
	pthread_mutex_t cap_lock;
	/* under cap_lock */
	int64_t cap_spool_bytes; /* as last scanned, plus what was written (or reserved) since */
	int64_t cap_scanned_ms;
	int64_t cap_minute; /* the minute the rates count */
	unsigned cap_minute_n;
	struct capture_client cap_clients[CAPTURE_CLIENTS];
	int64_t cap_logged_ms[CAPTURE_SKIP_N];
	uint64_t cap_unlogged[CAPTURE_SKIP_N];
};

static int64_t capture_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void capture_err(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void capture_err(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || err_size == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

/* ---- time ---- */

static void capture_utc(int64_t ms, struct tm *ret)
{
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);

	gmtime_r(&t, ret);
}

void capture_rfc3339(int64_t ms, char out[32])
{
	struct tm tm;
	int64_t frac = ms % 1000;
	size_t n;

	if (frac < 0) {
		frac += 1000;
	}
	capture_utc(ms, &tm);
	n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", (int)frac);
}

/* Reads exactly n decimal digits at *s into ret; advances *s. */
static int capture_digits(const char **s, int n, int *ret)
{
	int v = 0;
	int i;

	for (i = 0; i < n; i++) {
		char c = (*s)[i];

		if (c < '0' || c > '9') {
			return -1;
		}
		v = v * 10 + (c - '0');
	}
	*s += n;
	*ret = v;
	return 0;
}

/* Consumes the character c at *s. */
static int capture_char(const char **s, char c)
{
	if (**s != c) {
		return -1;
	}
	(*s)++;
	return 0;
}

int capture_parse_time(const char *s, int64_t *ret_ms)
{
	struct tm tm;
	int year, mon, day, hour = 0, min = 0, sec = 0, oh, om;
	int64_t ms = 0;
	int64_t offset_s = 0;
	time_t t;

	if (s == NULL || capture_digits(&s, 4, &year) < 0 || capture_char(&s, '-') < 0 ||
	    capture_digits(&s, 2, &mon) < 0 || capture_char(&s, '-') < 0 || capture_digits(&s, 2, &day) < 0) {
		return -1;
	}
	if (*s != '\0') {
		if (*s != 'T' && *s != 't' && *s != ' ') {
			return -1;
		}
		s++;
		if (capture_digits(&s, 2, &hour) < 0 || capture_char(&s, ':') < 0 ||
		    capture_digits(&s, 2, &min) < 0 || capture_char(&s, ':') < 0 ||
		    capture_digits(&s, 2, &sec) < 0) {
			return -1;
		}
		if (*s == '.') {
			int64_t scale = 100;

			s++;
			if (*s < '0' || *s > '9') {
				return -1;
			}
			for (; *s >= '0' && *s <= '9'; s++) {
				ms += (*s - '0') * scale;
				scale /= 10;
			}
		}
		if (*s == 'Z' || *s == 'z') {
			s++;
		} else if (*s == '+' || *s == '-') {
			int sign = *s == '-' ? -1 : 1;

			s++;
			if (capture_digits(&s, 2, &oh) < 0 || capture_char(&s, ':') < 0 ||
			    capture_digits(&s, 2, &om) < 0) {
				return -1;
			}
			offset_s = sign * ((int64_t)oh * 3600 + (int64_t)om * 60);
		} else {
			return -1;
		}
		if (*s != '\0') {
			return -1;
		}
	}
	if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) {
		return -1;
	}
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* Nothing was received before 1970, and received-at has four digits
	 * of year: a time read here can always be written again. */
	if (t == (time_t)-1 || (int64_t)t - offset_s < 0 ||
	    ((int64_t)t - offset_s) * 1000 + ms > CAPTURE_TIME_MAX_MS) {
		return -1;
	}
	*ret_ms = ((int64_t)t - offset_s) * 1000 + ms;
	return 0;
}

/* ---- writing ---- */

/* Provider names end up in file names: keep a safe alphabet. */
static void capture_name_part(const char *s, char *out, size_t out_size)
{
	size_t o = 0;

	for (; s != NULL && *s != '\0' && o + 1 < out_size && o < 64; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		    c == '_') {
			out[o++] = (char)c;
		} else {
			out[o++] = '_';
		}
	}
	out[o] = '\0';
}

static int capture_has_line_break(const char *s)
{
	return s != NULL && strpbrk(s, "\r\n") != NULL;
}

static int capture_safe_meta(const char *s)
{
	return s != NULL && *s != '\0' && !capture_has_line_break(s) && strlen(s) < CAPTURE_PROVIDER_MAX;
}

int capture_is_credential(const char *name)
{
	return strcasecmp(name, "Authorization") == 0 ||
	       strcasecmp(name, "Proxy-Authorization") == 0;
}

/* A capture keeps no credential (capture_format writes CAPTURE_REDACTED).
 * One the instance accepted when it came gets the instance's own back, so
 * that its check passes now as it did then; a refused one keeps the marker
 * and is refused again. A capture written before idemhook redacted holds
 * the value as received, which is left as it is. */
void capture_restore_auth(const struct provider_conf *pc, struct capture_record *rec)
{
	const char *auth;
	size_t i;

	if (pc == NULL || rec->cr_rejected != 0 ||
	    pc->pc_provider->p_required_authorization == NULL ||
	    (auth = pc->pc_provider->p_required_authorization(pc)) == NULL) {
		return;
	}
	for (i = 0; i < rec->cr_req.hr_n_headers; i++) {
		if (strcasecmp(rec->cr_headers[i].hh_name, "Authorization") == 0 &&
		    rec->cr_headers[i].hh_value != NULL &&
		    strcmp(rec->cr_headers[i].hh_value, CAPTURE_REDACTED) == 0) {
			rec->cr_headers[i].hh_value = auth;
		}
	}
}

int capture_format(struct buf *out, const char *provider, const struct http_request *req, int rejected)
{
	unsigned char digest[CRYPTO_SHA256_LEN];
	char hex[2 * CRYPTO_SHA256_LEN + 1];
	char when[32];
	int64_t ms = req->hr_received_ms != 0 ? req->hr_received_ms : capture_now_ms();
	const char *peer = req->hr_peer != NULL && *req->hr_peer != '\0' ? req->hr_peer : "-";
	const char *client = req->hr_client != NULL && *req->hr_client != '\0' ? req->hr_client : peer;
	size_t i;

	if (!capture_safe_meta(provider) || capture_has_line_break(peer) || capture_has_line_break(client) ||
	    req->hr_method == NULL || req->hr_url == NULL || strpbrk(req->hr_method, " \r\n") != NULL ||
	    strpbrk(req->hr_url, " \r\n") != NULL || (req->hr_body == NULL && req->hr_body_len > 0)) {
		return -1;
	}
	for (i = 0; i < req->hr_n_headers; i++) {
		const struct http_header *h = &req->hr_headers[i];

		if (h->hh_name == NULL || *h->hh_name == '\0' || strpbrk(h->hh_name, ":\r\n") != NULL ||
		    capture_has_line_break(h->hh_value)) {
			return -1;
		}
	}
	crypto_sha256(req->hr_body != NULL ? (const void *)req->hr_body : "", req->hr_body_len, digest);
	crypto_hex_encode(digest, sizeof(digest), hex);
	capture_rfc3339(ms, when);
	if (buf_printf(out,
		       "%s %d\nreceived-at: %s\nreceived-ms: %" PRId64 "\nprovider: %s\npeer: %s\n"
		       "client: %s\nrejected: %s\nbody-length: %zu\nbody-sha256: %s\n\n",
		       CAPTURE_MAGIC, CAPTURE_VERSION, when, ms, provider, peer, client, rejected ? "yes" : "no",
		       req->hr_body_len, hex) < 0) {
		return -1;
	}
	if (buf_printf(out, "%s %s %s\r\n", req->hr_method, req->hr_url,
		       req->hr_version != NULL ? req->hr_version : "HTTP/1.1") < 0) {
		return -1;
	}
	for (i = 0; i < req->hr_n_headers; i++) {
		const struct http_header *h = &req->hr_headers[i];

		const char *v = h->hh_value != NULL ? h->hh_value : "";

		if (buf_printf(out, "%s: %s\r\n", h->hh_name,
		               capture_is_credential(h->hh_name) ? CAPTURE_REDACTED : v) < 0) {
			return -1;
		}
	}
	if (buf_puts(out, "\r\n") < 0) {
		return -1;
	}
	if (req->hr_body_len > 0 && buf_append(out, req->hr_body, req->hr_body_len) < 0) {
		return -1;
	}
	return 0;
}

static int capture_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0) {
		return -1;
	}
	if (fsync(fd) < 0) {
		rc = -1;
	}
	close(fd);
	return rc;
}

/* Syncs the directory that holds path (its entry for path). */
static int capture_fsync_parent(const char *path)
{
	char parent[PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash == NULL) {
		return capture_fsync_dir(".");
	}
	slash[slash == parent ? 1 : 0] = '\0';
	return capture_fsync_dir(parent);
}

/* mkdir -p for the spool directory itself (exactly 0700 for what it
 * creates). Each directory it creates is synced into its parent: without
 * that a power cut could take a new spool, with every capture that was
 * fsynced into it, away. */
static int capture_mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);
	size_t i;

	if (len == 0 || len >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(tmp, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (tmp[i] == '/' || tmp[i] == '\0') {
			char saved = tmp[i];

			tmp[i] = '\0';
			if (mkdir(tmp, 0700) == 0) {
				if (chmod(tmp, 0700) < 0 || capture_fsync_parent(tmp) < 0) {
					return -1;
				}
			} else if (errno != EEXIST) {
				return -1;
			}
			tmp[i] = saved;
		}
	}
	return 0;
}

static int capture_write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return -1;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- the spool's bounds ---- */

/* Bytes of the regular files under dir, depth levels down (the spool is
 * dir/day/file). A directory that cannot be read counts as empty. */
static int64_t capture_du(const char *dir, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat sb;
	int64_t sum = 0;
	DIR *d = opendir(dir);

	if (d == NULL) {
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		int n;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
			continue;
		}
		n = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(path) || lstat(path, &sb) < 0) {
			continue;
		}
		if (S_ISREG(sb.st_mode)) {
			sum += (int64_t)sb.st_size;
		} else if (S_ISDIR(sb.st_mode) && depth > 0) {
			sum += capture_du(path, depth - 1);
		}
	}
	closedir(d);
	return sum;
}

static unsigned capture_client_slot(const char *addr)
{
	unsigned h = 2166136261u;

	for (; *addr != '\0'; addr++) {
		h = (h ^ (unsigned char)*addr) * 16777619u;
	}
	return h % CAPTURE_CLIENTS;
}

/* Under cap_lock: whether a capture of len bytes (rejected or not) from
 * client may be written now, reserving its bytes and its place in the
 * rates when it may. Rejected requests (anyone can send them) get a small
 * share: a size cap, a rate per client and in all, half the quota and
 * twice the free-space floor, so that they can never stop the captures of
 * authenticated callbacks, let alone take the database's space. Returns
 * CAPTURE_SKIP_N when it may, else the reason. */
static enum capture_skip capture_admit(struct capture *cap, const char *client, size_t body_len,
                                       size_t len, int rejected, int64_t now_ms)
{
	struct capture_client *cc = NULL;
	struct statvfs vfs;
	int64_t limit = (int64_t)(rejected ? cap->cap_max_bytes / 2 : cap->cap_max_bytes);
	uint64_t floor = rejected ? 2 * (uint64_t)cap->cap_min_free : cap->cap_min_free;

	if (rejected) {
		if (body_len > cap->cap_rejected_body_max) {
			return CAPTURE_SKIP_REJECTED_SIZE;
		}
		if (now_ms / 60000 != cap->cap_minute) {
			cap->cap_minute = now_ms / 60000;
			cap->cap_minute_n = 0;
			memset(cap->cap_clients, 0, sizeof(cap->cap_clients));
		}
		/* Clients that share a slot share its count: stricter, never looser. */
		cc = &cap->cap_clients[capture_client_slot(client)];
		if (cc->cc_n >= cap->cap_rejected_client_rate) {
			return CAPTURE_SKIP_REJECTED_CLIENT_RATE;
		}
		if (cap->cap_minute_n >= cap->cap_rejected_rate) {
			return CAPTURE_SKIP_REJECTED_RATE;
		}
	}
	if (cap->cap_spool_bytes + (int64_t)len > limit && now_ms - cap->cap_scanned_ms >= CAPTURE_RESCAN_MS) {
		/* gc may have expired captures since. */
		cap->cap_spool_bytes = capture_du(cap->cap_dir, 1);
		cap->cap_scanned_ms = now_ms;
	}
	if (cap->cap_spool_bytes + (int64_t)len > limit) {
		return CAPTURE_SKIP_QUOTA;
	}
	if (statvfs(cap->cap_dir, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize < floor + len) {
		return CAPTURE_SKIP_FREE_SPACE;
	}
	if (cc != NULL) {
		snprintf(cc->cc_addr, sizeof(cc->cc_addr), "%s", client);
		cc->cc_n++;
		cap->cap_minute_n++;
	}
	cap->cap_spool_bytes += (int64_t)len;
	return CAPTURE_SKIP_N;
}

/* Counts a capture not written; one log line per reason a minute at most. */
static void capture_skipped(struct capture *cap, enum capture_skip why, const char *provider,
                            const char *client, int rejected, int64_t now_ms)
{
	char qp[128];
	char qc[96];
	uint64_t more = 0;
	int tell = 0;

	metrics_capture_skipped(capture_skip_names[why]);
	pthread_mutex_lock(&cap->cap_lock);
	if (cap->cap_logged_ms[why] == 0 || now_ms - cap->cap_logged_ms[why] >= CAPTURE_SKIP_LOG_MS) {
		tell = 1;
		more = cap->cap_unlogged[why];
		cap->cap_unlogged[why] = 0;
		cap->cap_logged_ms[why] = now_ms;
	} else {
		cap->cap_unlogged[why]++;
	}
	pthread_mutex_unlock(&cap->cap_lock);
	if (tell) {
		log_warn("capture: not capturing a%s request for \"%s\" from %s: %s (%s); %" PRIu64
		         " more not captured for this reason since the last line",
		         rejected ? " rejected" : "n accepted", log_quote(qp, sizeof(qp), provider),
		         log_quote(qc, sizeof(qc), client), capture_skip_why[why], capture_skip_names[why],
		         more);
	}
}

/* What [capture] of a configuration asks for. */
struct capture_conf {
	enum capture_mode cv_mode;
	int64_t cv_retention_s;
	size_t cv_max_bytes;
	size_t cv_min_free;
	size_t cv_rejected_body_max;
	unsigned cv_rejected_rate;
	unsigned cv_rejected_client_rate;
	const char *cv_spool; /* capture_spool_dir when mode and dir are good, else NULL */
};

/* Reads and checks [capture] of cf into ret, every key whatever the others
 * hold. Returns 0, or -1 with each problem logged (file, line and key). */
static int capture_conf(const struct config *cf, struct capture_conf *ret)
{
	const char *mode = config_get(cf, "capture", "mode");
	const char *dir = config_get(cf, "capture", "dir");
	char q[64];
	int mode_ok = 1;
	int rc = 0;

	ret->cv_spool = NULL;
	if (mode == NULL || strcmp(mode, "off") == 0) {
		ret->cv_mode = CAPTURE_MODE_OFF;
	} else if (strcmp(mode, "all") == 0) {
		ret->cv_mode = CAPTURE_MODE_ALL;
	} else if (strcmp(mode, "rejected") == 0) {
		ret->cv_mode = CAPTURE_MODE_REJECTED;
	} else {
		rc = config_refuse(cf, "capture", "mode", "\"%s\": expected all, rejected or off",
		                   log_quote(q, sizeof(q), mode));
		mode_ok = 0;
	}
	if (config_get_duration(cf, "capture", "retention", CAPTURE_RETENTION_DEFAULT_S,
	                        &ret->cv_retention_s) < 0) {
		rc = -1;
	}
	if (config_get_size(cf, "capture", "max_bytes", CAPTURE_MAX_BYTES_DEFAULT,
	                    &ret->cv_max_bytes) < 0) {
		rc = -1;
	}
	if (config_get_size(cf, "capture", "min_free", CAPTURE_MIN_FREE_DEFAULT,
	                    &ret->cv_min_free) < 0) {
		rc = -1;
	}
	if (config_get_size(cf, "capture", "rejected_body_max", CAPTURE_REJECTED_BODY_MAX_DEFAULT,
	                    &ret->cv_rejected_body_max) < 0) {
		rc = -1;
	}
	if (config_get_uint(cf, "capture", "rejected_rate", CAPTURE_REJECTED_RATE_DEFAULT,
	                    &ret->cv_rejected_rate) < 0) {
		rc = -1;
	}
	if (config_get_uint(cf, "capture", "rejected_client_rate",
	                    CAPTURE_REJECTED_CLIENT_RATE_DEFAULT,
	                    &ret->cv_rejected_client_rate) < 0) {
		rc = -1;
	}
	if (dir != NULL && dir[0] == '\0') {
		/* The spool's own check (confcheck) would be of the default
		 * directory: not what was meant. */
		return config_refuse(cf, "capture", "dir", "empty: leave the key out for %s",
		                     CAPTURE_DIR_DEFAULT);
	}
	if (mode_ok) {
		ret->cv_spool = capture_spool_dir(cf);
	}
	return rc;
}

int capture_check_config(const struct config *cf, const char **ret_spool)
{
	struct capture_conf cv;
	int rc = capture_conf(cf, &cv);

	*ret_spool = cv.cv_spool;
	return rc;
}

const char *capture_spool_dir(const struct config *cf)
{
	const char *mode = config_get(cf, "capture", "mode");
	const char *dir = config_get(cf, "capture", "dir");

	if (mode == NULL || strcmp(mode, "off") == 0) {
		return NULL;
	}
	return dir != NULL && dir[0] != '\0' ? dir : CAPTURE_DIR_DEFAULT;
}

struct capture *capture_create(const struct config *cf, int *ret_off)
{
	struct capture *cap = NULL;
	const char *mode = config_get(cf, "capture", "mode");
	const char *dir = capture_spool_dir(cf);
	unsigned char rnd[4];
	struct capture_conf cv;

	*ret_off = 0;
	if (capture_conf(cf, &cv) < 0) {
		return NULL;
	}
	if (cv.cv_mode == CAPTURE_MODE_OFF) {
		*ret_off = 1;
		return NULL;
	}
	cap = calloc(1, sizeof(*cap));
	if (cap == NULL) {
		goto fail;
	}
	cap->cap_mode = cv.cv_mode;
	cap->cap_retention_s = cv.cv_retention_s;
	cap->cap_max_bytes = cv.cv_max_bytes;
	cap->cap_min_free = cv.cv_min_free;
	cap->cap_rejected_body_max = cv.cv_rejected_body_max;
	cap->cap_rejected_rate = cv.cv_rejected_rate;
	cap->cap_rejected_client_rate = cv.cv_rejected_client_rate;
	pthread_mutex_init(&cap->cap_lock, NULL);
	cap->cap_dir = strdup(dir);
	if (cap->cap_dir == NULL) {
		goto fail;
	}
	if (crypto_random(rnd, sizeof(rnd)) < 0) {
		goto fail;
	}
	crypto_hex_encode(rnd, sizeof(rnd), cap->cap_instance);
	atomic_init(&cap->cap_seq, 0);
	if (capture_mkdirs(cap->cap_dir) < 0) {
		char q[256];

		log_err("capture: cannot create spool directory \"%s\": %s",
			log_quote(q, sizeof(q), cap->cap_dir), strerror(errno));
		goto fail;
	}
	cap->cap_spool_bytes = capture_du(cap->cap_dir, 1);
	cap->cap_scanned_ms = capture_now_ms();
	/* At 0 from the start, so that increase() sees the first skip. Only
	 * a start turns capture on ([capture] mode needs a restart). */
	metrics_declare_capture_skipped(capture_skip_names);
	log_info("capture: mode %s, spool \"%s\" (%" PRId64 " bytes of max_bytes %zu; min_free %zu)", mode,
		 cap->cap_dir, cap->cap_spool_bytes, cap->cap_max_bytes, cap->cap_min_free);
	return cap;
fail:
	capture_destroy(cap);
	return NULL;
}

void capture_destroy(struct capture *cap)
{
	if (cap == NULL) {
		return;
	}
	pthread_mutex_destroy(&cap->cap_lock);
	free(cap->cap_dir);
	free(cap);
}

int capture_request(struct capture *cap, const char *provider, const struct http_request *req, int rejected)
{
	struct buf text;
	struct tm tm;
	char day[PATH_MAX];
	char name[CAPTURE_NAME_MAX];
	char part[80];
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	char q[256];
	const char *what = "format";
	const char *client = req->hr_client != NULL ? req->hr_client : "";
	enum capture_skip skip;
	int64_t now_ms = capture_now_ms();
	int64_t ms;
	uint64_t seq;
	int fd = -1;
	int tmp_made = 0;
	int reserved = 0;
	int n;

	if (cap == NULL || cap->cap_mode == CAPTURE_MODE_OFF ||
	    (cap->cap_mode == CAPTURE_MODE_REJECTED && !rejected)) {
		return 0;
	}
	if (rejected && req->hr_body_len > cap->cap_rejected_body_max) {
		/* Not even formatted: anyone can send it. */
		capture_skipped(cap, CAPTURE_SKIP_REJECTED_SIZE, provider, client, rejected, now_ms);
		return 0;
	}
	buf_init(&text, (size_t)CAPTURE_HEAD_MAX + CAPTURE_BODY_MAX);
	ms = req->hr_received_ms != 0 ? req->hr_received_ms : now_ms;
	if (capture_format(&text, provider, req, rejected) < 0) {
		errno = EINVAL;
		goto fail;
	}
	pthread_mutex_lock(&cap->cap_lock);
	skip = capture_admit(cap, client, req->hr_body_len, text.buf_len, rejected, now_ms);
	pthread_mutex_unlock(&cap->cap_lock);
	if (skip != CAPTURE_SKIP_N) {
		capture_skipped(cap, skip, provider, client, rejected, now_ms);
		buf_finish(&text);
		return 0;
	}
	reserved = 1;
	capture_utc(ms, &tm);
	what = "path";
	n = snprintf(day, sizeof(day), "%s/%04d-%02d-%02d", cap->cap_dir, tm.tm_year + 1900, tm.tm_mon + 1,
		     tm.tm_mday);
	if (n < 0 || (size_t)n >= sizeof(day)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	what = "day directory";
	if (mkdir(day, 0700) == 0) {
		/* Exactly 0700 whatever the umask; a new directory entry is
		 * durable only once its parent is synced. */
		if (chmod(day, 0700) < 0 || capture_fsync_dir(cap->cap_dir) < 0) {
			goto fail;
		}
	} else if (errno == ENOENT) {
		/* The spool itself is gone (removed by hand, a cleanup script, a
		 * volume remounted): made again, 0700, as at start, rather than
		 * failing every capture until a restart. */
		if (capture_mkdirs(day) < 0) {
			goto fail;
		}
		log_warn("capture: the spool directory \"%s\" was missing; created it again",
		         log_quote(q, sizeof(q), cap->cap_dir));
		pthread_mutex_lock(&cap->cap_lock);
		cap->cap_scanned_ms = 0; /* measured again when the quota is next reached */
		pthread_mutex_unlock(&cap->cap_lock);
	} else if (errno != EEXIST) {
		goto fail;
	}
	capture_name_part(provider, part, sizeof(part));
	seq = atomic_fetch_add(&cap->cap_seq, 1);
	what = "path";
	n = snprintf(name, sizeof(name), "%02d%02d%02d.%03d-%s-%s-%06" PRIu64 "%s", tm.tm_hour, tm.tm_min,
		     tm.tm_sec, (int)(((ms % 1000) + 1000) % 1000), part, cap->cap_instance, seq, CAPTURE_SUFFIX);
	if (n < 0 || (size_t)n >= sizeof(name)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	n = snprintf(path, sizeof(path), "%s/%s", day, name);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	n = snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", day, name);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	what = "create";
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		goto fail;
	}
	tmp_made = 1;
	/* The umask can only narrow the mode; say 0600 explicitly anyway. */
	what = "chmod";
	if (fchmod(fd, 0600) < 0) {
		goto fail;
	}
	what = "write";
	if (capture_write_all(fd, text.buf_data != NULL ? text.buf_data : "", text.buf_len) < 0) {
		goto fail;
	}
	what = "fsync";
	if (fsync(fd) < 0) {
		goto fail;
	}
	what = "close";
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	what = "rename";
	if (rename(tmp, path) < 0) {
		goto fail;
	}
	tmp_made = 0;
	what = "fsync directory";
	if (capture_fsync_dir(day) < 0) {
		goto fail;
	}
	buf_finish(&text);
	return 0;
fail:
	log_err("capture: cannot write capture for provider \"%s\" (%s): %s", log_quote(q, sizeof(q), provider),
		what, strerror(errno));
	if (fd >= 0) {
		close(fd);
	}
	if (tmp_made) {
		unlink(tmp);
	}
	if (reserved) {
		pthread_mutex_lock(&cap->cap_lock);
		cap->cap_spool_bytes -= (int64_t)text.buf_len;
		pthread_mutex_unlock(&cap->cap_lock);
	}
	buf_finish(&text);
	metrics_capture_failure();
	return -1;
}

/* ---- finding one request's capture ---- */

int capture_find(const struct config *cf, const char *provider, int64_t received_ms,
                 const char *needle, struct capture_record *ret, char *ret_name, size_t name_size,
                 char *err, size_t err_size)
{
	const char *dir = config_get(cf, "capture", "dir");
	char day[PATH_MAX];
	char prefix[128];
	char part[80];
	char path[PATH_MAX];
	struct dirent *de;
	struct tm tm;
	DIR *d;
	int found = 0;
	int n;

	if (received_ms <= 0 || provider == NULL || needle == NULL || needle[0] == '\0') {
		return 0;
	}
	capture_utc(received_ms, &tm);
	n = snprintf(day, sizeof(day), "%s/%04d-%02d-%02d", dir != NULL ? dir : CAPTURE_DIR_DEFAULT,
	             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	if (n < 0 || (size_t)n >= sizeof(day)) {
		return 0;
	}
	/* The name starts with the time of receipt and the instance (capture_request). */
	capture_name_part(provider, part, sizeof(part));
	snprintf(prefix, sizeof(prefix), "%02d%02d%02d.%03d-%s-", tm.tm_hour, tm.tm_min, tm.tm_sec,
	         (int)(((received_ms % 1000) + 1000) % 1000), part);
	d = opendir(day);
	if (d == NULL) {
		if (errno == ENOENT) {
			return 0;
		}
		capture_err(err, err_size, "%s: %s", day, strerror(errno));
		return -1;
	}
	while (!found && (de = readdir(d)) != NULL) {
		struct capture_record rec;
		char why[160];
		size_t len = strlen(de->d_name);

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
		    len <= strlen(CAPTURE_SUFFIX) ||
		    strcmp(de->d_name + len - strlen(CAPTURE_SUFFIX), CAPTURE_SUFFIX) != 0) {
			continue;
		}
		n = snprintf(path, sizeof(path), "%s/%s", day, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(path) || capture_read(path, &rec, why, sizeof(why)) < 0) {
			continue;
		}
		/* Another request of the same millisecond is another file: the
		 * one whose body holds the key is this event's. */
		if (strcmp(rec.cr_provider, provider) == 0 && rec.cr_received_ms == received_ms &&
		    rec.cr_req.hr_body != NULL &&
		    memmem(rec.cr_req.hr_body, rec.cr_req.hr_body_len, needle, strlen(needle)) != NULL) {
			*ret = rec;
			snprintf(ret_name, name_size, "%04d-%02d-%02d/%s", tm.tm_year + 1900, tm.tm_mon + 1,
			         tm.tm_mday, de->d_name);
			found = 1;
		} else {
			capture_record_finish(&rec);
		}
	}
	closedir(d);
	return found;
}

/* ---- reading ---- */

/* The next line of data[*pos..len) without its LF (and CR); NULL at the end
 * of the data when no LF was found. */
static char *capture_line(char *data, size_t len, size_t *pos)
{
	char *start = data + *pos;
	char *nl;
	size_t llen;

	if (*pos >= len) {
		return NULL;
	}
	nl = memchr(start, '\n', len - *pos);
	if (nl == NULL) {
		return NULL;
	}
	llen = (size_t)(nl - start);
	*nl = '\0';
	if (llen > 0 && start[llen - 1] == '\r') {
		start[llen - 1] = '\0';
	}
	*pos += llen + 1;
	return start;
}

static int capture_parse_i64(const char *s, int64_t *ret)
{
	char *end;
	long long v;

	if (*s < '0' || *s > '9') {
		return -1;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0') {
		return -1;
	}
	*ret = (int64_t)v;
	return 0;
}

/* Percent-decodes the path part of url (before '?') into a new string. */
static char *capture_decode_path(const char *url)
{
	size_t len = strcspn(url, "?#");
	char *out = malloc(len + 1);
	size_t i;
	size_t o = 0;

	if (out == NULL) {
		return NULL;
	}
	for (i = 0; i < len; i++) {
		if (url[i] == '%' && i + 2 < len && text_hex_value(url[i + 1]) >= 0 &&
		    text_hex_value(url[i + 2]) >= 0) {
			out[o++] = (char)(text_hex_value(url[i + 1]) * 16 + text_hex_value(url[i + 2]));
			i += 2;
		} else {
			out[o++] = url[i];
		}
	}
	out[o] = '\0';
	return out;
}

struct capture_metaparse {
	int mp_version;
	const char *mp_provider;
	const char *mp_peer;
	const char *mp_client;
	int64_t mp_received_ms;
	int mp_have_ms;
	int mp_rejected;
	int64_t mp_body_len;
	const char *mp_sha256;
};

/* Parses the metadata block of data (cut in place); *pos ends after its
 * blank line. Returns 0, or -1 with err set. */
static int capture_parse_meta(char *data, size_t len, size_t *pos, struct capture_metaparse *mp, char *err,
			      size_t err_size)
{
	char *line;
	int64_t at_ms = 0;
	int have_at = 0;
	int lines = 0;
	const char *magic_end;

	memset(mp, 0, sizeof(*mp));
	mp->mp_body_len = -1;
	mp->mp_rejected = -1;
	if (len == 0) {
		capture_err(err, err_size, "empty file");
		return -1;
	}
	line = capture_line(data, len, pos);
	if (line == NULL) {
		size_t cmp = len < sizeof(CAPTURE_MAGIC) - 1 ? len : sizeof(CAPTURE_MAGIC) - 1;

		if (memcmp(data, CAPTURE_MAGIC, cmp) == 0) {
			capture_err(err, err_size, "truncated: the file ends inside the first line");
		} else {
			capture_err(err, err_size, "not an idemhook capture: the first line is not \"%s %d\"",
				    CAPTURE_MAGIC, CAPTURE_VERSION);
		}
		return -1;
	}
	if (strncmp(line, CAPTURE_MAGIC " ", sizeof(CAPTURE_MAGIC)) != 0) {
		capture_err(err, err_size, "not an idemhook capture: the first line is not \"%s %d\"", CAPTURE_MAGIC,
			    CAPTURE_VERSION);
		return -1;
	}
	magic_end = line + sizeof(CAPTURE_MAGIC);
	if (strcmp(magic_end, "1") != 0) {
		char q[64];

		capture_err(err, err_size, "unsupported capture format version \"%s\" (this idemhook reads %d)",
			    log_quote(q, sizeof(q), magic_end), CAPTURE_VERSION);
		return -1;
	}
	mp->mp_version = CAPTURE_VERSION;
	for (;;) {
		char *colon;
		char *value;

		line = capture_line(data, len, pos);
		if (line == NULL) {
			capture_err(err, err_size, "truncated: the file ends inside the metadata block");
			return -1;
		}
		if (*line == '\0') {
			break;
		}
		if (++lines > CAPTURE_META_LINES_MAX) {
			capture_err(err, err_size, "corrupted: more than %d metadata lines", CAPTURE_META_LINES_MAX);
			return -1;
		}
		colon = strchr(line, ':');
		if (colon == NULL) {
			capture_err(err, err_size, "corrupted: metadata line %d has no \"key: value\"", lines + 1);
			return -1;
		}
		*colon = '\0';
		value = colon + 1;
		while (*value == ' ' || *value == '\t') {
			value++;
		}
		if (strcmp(line, "received-ms") == 0) {
			if (capture_parse_i64(value, &mp->mp_received_ms) < 0 ||
			    mp->mp_received_ms > CAPTURE_TIME_MAX_MS) {
				capture_err(err, err_size, "corrupted: received-ms is not a number before the year 10000");
				return -1;
			}
			mp->mp_have_ms = 1;
		} else if (strcmp(line, "received-at") == 0) {
			if (capture_parse_time(value, &at_ms) < 0) {
				capture_err(err, err_size, "corrupted: received-at is not an RFC 3339 time");
				return -1;
			}
			have_at = 1;
		} else if (strcmp(line, "provider") == 0) {
			mp->mp_provider = value;
		} else if (strcmp(line, "peer") == 0) {
			mp->mp_peer = value;
		} else if (strcmp(line, "client") == 0) {
			mp->mp_client = value;
		} else if (strcmp(line, "rejected") == 0) {
			mp->mp_rejected = strcmp(value, "yes") == 0 ? 1 : 0;
		} else if (strcmp(line, "body-length") == 0) {
			if (capture_parse_i64(value, &mp->mp_body_len) < 0) {
				capture_err(err, err_size, "corrupted: body-length is not a number");
				return -1;
			}
			if (mp->mp_body_len > CAPTURE_BODY_MAX) {
				capture_err(err, err_size, "body-length %" PRId64 " is over the limit of %d bytes",
					    mp->mp_body_len, CAPTURE_BODY_MAX);
				return -1;
			}
		} else if (strcmp(line, "body-sha256") == 0) {
			mp->mp_sha256 = value;
		}
		/* Other keys are ignored: later versions may add some. */
	}
	if (!mp->mp_have_ms) {
		if (!have_at) {
			capture_err(err, err_size, "corrupted: neither received-ms nor received-at is given");
			return -1;
		}
		mp->mp_received_ms = at_ms;
	}
	if (mp->mp_provider == NULL || *mp->mp_provider == '\0' || strlen(mp->mp_provider) >= CAPTURE_PROVIDER_MAX) {
		capture_err(err, err_size, "corrupted: provider is missing");
		return -1;
	}
	if (mp->mp_body_len < 0) {
		capture_err(err, err_size, "corrupted: body-length is missing");
		return -1;
	}
	return 0;
}

void capture_record_finish(struct capture_record *rec)
{
	if (rec == NULL) {
		return;
	}
	free(rec->cr_data);
	free(rec->cr_headers);
	free(rec->cr_path);
	memset(rec, 0, sizeof(*rec));
}

int capture_parse(const void *data, size_t len, struct capture_record *ret, char *err, size_t err_size)
{
	struct capture_record rec;
	struct capture_metaparse mp;
	size_t pos = 0;
	size_t n_headers = 0;
	size_t have;
	char *line;
	char *sp1;
	char *sp2;
	const char *body_start;

	memset(&rec, 0, sizeof(rec));
	if (len > (size_t)CAPTURE_HEAD_MAX + CAPTURE_BODY_MAX + 2) {
		capture_err(err, err_size, "the file is larger than a capture can be (%zu bytes)", len);
		return -1;
	}
	/* A private copy with a NUL after it: strings are cut in place and the
	 * body stays NUL-terminated, as http_request promises. */
	rec.cr_data = malloc(len + 1);
	if (rec.cr_data == NULL) {
		capture_err(err, err_size, "out of memory");
		goto fail;
	}
	if (len > 0) {
		memcpy(rec.cr_data, data, len);
	}
	rec.cr_data[len] = '\0';
	if (capture_parse_meta(rec.cr_data, len, &pos, &mp, err, err_size) < 0) {
		goto fail;
	}
	line = capture_line(rec.cr_data, len, &pos);
	if (line == NULL) {
		capture_err(err, err_size, "truncated: the file ends before the request line");
		goto fail;
	}
	sp1 = strchr(line, ' ');
	sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
	if (sp1 == NULL || sp2 == NULL || sp1 == line || sp2 == sp1 + 1 || strchr(sp2 + 1, ' ') != NULL ||
	    strncmp(sp2 + 1, "HTTP/", 5) != 0) {
		capture_err(err, err_size, "corrupted: the request line is not \"METHOD TARGET HTTP/x.y\"");
		goto fail;
	}
	*sp1 = '\0';
	*sp2 = '\0';
	rec.cr_req.hr_method = line;
	rec.cr_req.hr_url = sp1 + 1;
	rec.cr_req.hr_version = sp2 + 1;
	rec.cr_headers = calloc(HTTP_HEADERS_MAX, sizeof(*rec.cr_headers));
	if (rec.cr_headers == NULL) {
		capture_err(err, err_size, "out of memory");
		goto fail;
	}
	for (;;) {
		char *colon;
		char *value;
		char *end;

		if (pos > CAPTURE_HEAD_MAX) {
			capture_err(err, err_size, "corrupted: the request head is over %d bytes", CAPTURE_HEAD_MAX);
			goto fail;
		}
		line = capture_line(rec.cr_data, len, &pos);
		if (line == NULL) {
			capture_err(err, err_size, "truncated: the file ends inside the request headers");
			goto fail;
		}
		if (*line == '\0') {
			break;
		}
		if (n_headers == HTTP_HEADERS_MAX) {
			capture_err(err, err_size, "corrupted: more than %d header fields", HTTP_HEADERS_MAX);
			goto fail;
		}
		colon = strchr(line, ':');
		if (colon == NULL || colon == line) {
			capture_err(err, err_size, "corrupted: header line %zu is not \"Name: value\"", n_headers + 1);
			goto fail;
		}
		*colon = '\0';
		value = colon + 1;
		while (*value == ' ' || *value == '\t') {
			value++;
		}
		end = value + strlen(value);
		while (end > value && (end[-1] == ' ' || end[-1] == '\t')) {
			*--end = '\0';
		}
		rec.cr_headers[n_headers].hh_name = line;
		rec.cr_headers[n_headers].hh_value = value;
		n_headers++;
	}
	have = len - pos;
	if ((uint64_t)have < (uint64_t)mp.mp_body_len) {
		capture_err(err, err_size, "truncated: the body has %zu of the %" PRId64 " bytes body-length gives",
			    have, mp.mp_body_len);
		goto fail;
	}
	body_start = rec.cr_data + pos;
	have -= (size_t)mp.mp_body_len;
	/* Editors like to end a file with a newline: one is forgiven. */
	if (!(have == 0 || (have == 1 && body_start[mp.mp_body_len] == '\n') ||
	      (have == 2 && body_start[mp.mp_body_len] == '\r' && body_start[mp.mp_body_len + 1] == '\n'))) {
		capture_err(err, err_size, "corrupted: %zu bytes follow the %" PRId64 " bytes body-length gives",
			    have, mp.mp_body_len);
		goto fail;
	}
	if (mp.mp_sha256 != NULL) {
		unsigned char digest[CRYPTO_SHA256_LEN];
		char hex[2 * CRYPTO_SHA256_LEN + 1];

		crypto_sha256(body_start, (size_t)mp.mp_body_len, digest);
		crypto_hex_encode(digest, sizeof(digest), hex);
		if (strlen(mp.mp_sha256) != 2 * CRYPTO_SHA256_LEN || strncasecmp(hex, mp.mp_sha256, sizeof(hex)) != 0) {
			capture_err(err, err_size, "corrupted: the body does not match body-sha256");
			goto fail;
		}
	}
	rec.cr_data[pos + (size_t)mp.mp_body_len] = '\0';
	rec.cr_path = capture_decode_path(rec.cr_req.hr_url);
	if (rec.cr_path == NULL) {
		capture_err(err, err_size, "out of memory");
		goto fail;
	}
	rec.cr_version = mp.mp_version;
	rec.cr_provider = mp.mp_provider;
	rec.cr_received_ms = mp.mp_received_ms;
	rec.cr_rejected = mp.mp_rejected;
	rec.cr_req.hr_path = rec.cr_path;
	rec.cr_req.hr_headers = rec.cr_headers;
	rec.cr_req.hr_n_headers = n_headers;
	rec.cr_req.hr_body = (const unsigned char *)body_start;
	rec.cr_req.hr_body_len = (size_t)mp.mp_body_len;
	rec.cr_req.hr_peer = mp.mp_peer != NULL ? mp.mp_peer : "-";
	rec.cr_req.hr_client = mp.mp_client != NULL ? mp.mp_client : rec.cr_req.hr_peer;
	rec.cr_req.hr_received_ms = mp.mp_received_ms;
	*ret = rec;
	return 0;
fail:
	capture_record_finish(&rec);
	return -1;
}

/* Reads path into a malloc'd NUL-terminated buffer. A file over max bytes
 * is an error, except with meta_only, which reads at most max bytes and
 * stops early once the metadata block's blank line is in. */
static int capture_slurp(const char *path, size_t max, int meta_only, char **ret, size_t *ret_len, char *err,
			 size_t err_size)
{
	struct buf b;
	char chunk[65536];
	size_t step = meta_only ? 4096 : sizeof(chunk);
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		capture_err(err, err_size, "cannot open: %s", strerror(errno));
		return -1;
	}
	buf_init(&b, 0);
	for (;;) {
		ssize_t n;

		if (meta_only && b.buf_data != NULL && b.buf_len > 0 &&
		    (b.buf_len >= max || memmem(b.buf_data, b.buf_len, "\n\n", 2) != NULL ||
		     memmem(b.buf_data, b.buf_len, "\n\r\n", 3) != NULL)) {
			break;
		}
		if (!meta_only && b.buf_len > max) {
			capture_err(err, err_size, "the file is larger than %zu bytes", max);
			goto fail;
		}
		n = read(fd, chunk, step);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			capture_err(err, err_size, "cannot read: %s", strerror(errno));
			goto fail;
		}
		if (n == 0) {
			break;
		}
		if (buf_append(&b, chunk, (size_t)n) < 0) {
			capture_err(err, err_size, "out of memory");
			goto fail;
		}
	}
	close(fd);
	*ret_len = b.buf_len;
	*ret = buf_take(&b, NULL);
	if (*ret == NULL) {
		capture_err(err, err_size, "out of memory");
		return -1;
	}
	return 0;
fail:
	close(fd);
	buf_finish(&b);
	return -1;
}

int capture_read_file(const char *path, size_t max, char **ret, size_t *ret_len, char *err, size_t err_size)
{
	return capture_slurp(path, max, 0, ret, ret_len, err, err_size);
}

int capture_read(const char *path, struct capture_record *ret, char *err, size_t err_size)
{
	char *data = NULL;
	size_t len = 0;
	int rc;

	if (capture_slurp(path, (size_t)CAPTURE_HEAD_MAX + CAPTURE_BODY_MAX + 2, 0, &data, &len, err, err_size) < 0) {
		return -1;
	}
	rc = capture_parse(data, len, ret, err, err_size);
	free(data);
	return rc;
}

int capture_read_meta(const char *path, struct capture_meta *ret, char *err, size_t err_size)
{
	struct capture_metaparse mp;
	char *data = NULL;
	size_t len = 0;
	size_t pos = 0;
	int rc = -1;

	if (capture_slurp(path, CAPTURE_HEAD_MAX, 1, &data, &len, err, err_size) < 0) {
		return -1;
	}
	if (capture_parse_meta(data, len, &pos, &mp, err, err_size) < 0) {
		goto out;
	}
	snprintf(ret->cm_provider, sizeof(ret->cm_provider), "%s", mp.mp_provider);
	ret->cm_received_ms = mp.mp_received_ms;
	rc = 0;
out:
	free(data);
	return rc;
}

/* ---- expiry ---- */

/* 1 when name is a day directory "YYYY-MM-DD", with its start in ms. */
static int capture_day_name(const char *name, int64_t *ret_ms)
{
	if (strlen(name) != 10 || name[4] != '-' || name[7] != '-') {
		return 0;
	}
	return capture_parse_time(name, ret_ms) == 0 ? 1 : 0;
}

/* 1 for a capture file, 2 for the temporary file of a capture a crash
 * interrupted (".NAME.tmp", never renamed into place: no capture, and
 * skipped by replay), 0 for anything else. */
static int capture_is_capture_name(const char *name)
{
	size_t len = strlen(name);
	size_t slen = sizeof(CAPTURE_SUFFIX) - 1;

	if (name[0] == '.') {
		return len > 4 && strcmp(name + len - 4, ".tmp") == 0 ? 2 : 0;
	}
	return len > slen && strcmp(name + len - slen, CAPTURE_SUFFIX) == 0;
}

static int capture_expire_day(const char *day, int dry_run, int64_t *n)
{
	DIR *d = opendir(day);
	struct dirent *de;
	char path[PATH_MAX];
	char q[256];

	if (d == NULL) {
		log_err("capture: cannot open \"%s\": %s", log_quote(q, sizeof(q), day), strerror(errno));
		return -1;
	}
	for (de = readdir(d); de != NULL; de = readdir(d)) {
		int kind = capture_is_capture_name(de->d_name);
		int len;

		if (kind == 0) {
			continue;
		}
		len = snprintf(path, sizeof(path), "%s/%s", day, de->d_name);
		if (len < 0 || (size_t)len >= sizeof(path)) {
			continue;
		}
		if (!dry_run && unlink(path) < 0) {
			log_err("capture: cannot delete \"%s\": %s", log_quote(q, sizeof(q), path), strerror(errno));
			continue;
		}
		/* A leftover goes with its day but is no capture file. */
		if (kind == 1) {
			(*n)++;
		}
	}
	closedir(d);
	/* Fails harmlessly when something else lives there. */
	if (!dry_run) {
		rmdir(day);
	}
	return 0;
}

int capture_expire(const struct config *cf, int64_t now_ms, int dry_run, int64_t *ret_n)
{
	const char *dir = config_get(cf, "capture", "dir");
	int64_t retention_s;
	int64_t n = 0;
	DIR *d;
	struct dirent *de;
	char q[256];
	int rc = 0;

	if (config_get_duration(cf, "capture", "retention", CAPTURE_RETENTION_DEFAULT_S, &retention_s) < 0) {
		return -1;
	}
	if (dir == NULL || *dir == '\0') {
		dir = CAPTURE_DIR_DEFAULT;
	}
	if (retention_s <= 0) {
		goto out;
	}
	d = opendir(dir);
	if (d == NULL) {
		if (errno == ENOENT) {
			goto out;
		}
		log_err("capture: cannot open \"%s\": %s", log_quote(q, sizeof(q), dir), strerror(errno));
		return -1;
	}
	for (de = readdir(d); de != NULL; de = readdir(d)) {
		char path[PATH_MAX];
		int64_t start_ms;
		int len;

		if (!capture_day_name(de->d_name, &start_ms)) {
			continue;
		}
		/* Whole days only: every file of the day is older than retention. */
		if (start_ms + 86400 * 1000LL > now_ms - retention_s * 1000) {
			continue;
		}
		len = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (len < 0 || (size_t)len >= sizeof(path)) {
			continue;
		}
		if (capture_expire_day(path, dry_run, &n) < 0) {
			rc = -1;
		}
	}
	closedir(d);
out:
	if (ret_n != NULL) {
		*ret_n = n;
	}
	return rc;
}
