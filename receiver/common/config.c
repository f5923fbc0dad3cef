/* config.c: the INI configuration (inih), core sections and provider instances. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cidr.h"
#include "config.h"
#include "log.h"
#include "senders.h"

#define CONFIG_SECRET_MAX (64 * 1024) /* bytes in one secret or key file */
#define CONFIG_RETENTION_DEFAULT_S (7 * 24 * 3600)
/* [store] writer_nice's default: the writer threads run ahead of the server
 * threads when both want a core (store.c, store_writer_priority). */
#define CONFIG_WRITER_NICE (-10)
#define CONFIG_FILE_MAX (4 * 1024 * 1024) /* bytes in a configuration file */
#define CONFIG_LINE_MAX INI_MAX_LINE /* bytes in one line, newline included */
#define CONFIG_PROVIDER_KIND "provider" /* [provider NAME] sections */

/* ---- every key the configuration may hold ----
 *
 * A key or section not listed here is an error at start and refuses a
 * reload, so a misspelt key never silently leaves a default in force.
 * Adding a key: one line here, in its section's place, then
 * contrib/idemhook.example.ini and docs/configuration.md. "*_url" stands for
 * any key ending in "_url". [provider NAME] sections take the keys of
 * section "provider" below plus those their profile lists in its p_keys
 * (through struct config_profiles: config knows no profile).
 *
 * What a key is: CONFIG_KEY_MULTI, it may be given on several lines, each
 * one counting (tokens, origins); else a second line refuses the file.
 * CONFIG_KEY_RELOADS, a reload (SIGHUP) applies it; else it takes effect
 * at the next start, and a reload that changes it says so. A key added
 * without flags is single-valued and needs a restart: the safe side. */
#define CONFIG_KEY_MULTI 0x1u
#define CONFIG_KEY_RELOADS 0x2u

struct config_known_key {
	const char *ck_section;
	const char *ck_key;
	unsigned ck_flags;
};

/* One key a line, so that adding one is a one-line diff. */
/* clang-format off */
static const struct config_known_key config_known_keys[] = {
	{"admin", "listen", 0},
	{"admin", "port_file", 0},
	{"api", "body_max", CONFIG_KEY_RELOADS},
	{"api", "burst", CONFIG_KEY_RELOADS},
	{"api", "cors_origins", CONFIG_KEY_MULTI | CONFIG_KEY_RELOADS},
	{"api", "order_reads", CONFIG_KEY_RELOADS},
	{"api", "rate", CONFIG_KEY_RELOADS},
	{"api", "token", CONFIG_KEY_MULTI | CONFIG_KEY_RELOADS},
	{"capture", "dir", 0},
	{"capture", "max_bytes", 0},
	{"capture", "min_free", 0},
	{"capture", "mode", 0},
	{"capture", "rejected_body_max", 0},
	{"capture", "rejected_client_rate", 0},
	{"capture", "rejected_rate", 0},
	{"capture", "retention", CONFIG_KEY_RELOADS},
	{"client", "ca_file", CONFIG_KEY_RELOADS},
	{"console", "allow_insecure", CONFIG_KEY_RELOADS},
	{"console", "enabled", 0},
	{"console", "login_failures", CONFIG_KEY_RELOADS},
	{"console", "secure_cookie", CONFIG_KEY_RELOADS},
	{"console", "session_ttl", CONFIG_KEY_RELOADS},
	{"console", "token", CONFIG_KEY_MULTI | CONFIG_KEY_RELOADS},
	{"demo", "enabled", CONFIG_KEY_RELOADS},
	{"gc", "batch", CONFIG_KEY_RELOADS},
	{"gc", "events_retention", CONFIG_KEY_RELOADS},
	{"gc", "interval", CONFIG_KEY_RELOADS},
	{"gc", "outbox_retention", CONFIG_KEY_RELOADS},
	{"gc", "pause", CONFIG_KEY_RELOADS},
	{"outbound", "ca_file", CONFIG_KEY_RELOADS},
	{"outbound", "concurrency", CONFIG_KEY_RELOADS},
	{"outbound", "connect_timeout", CONFIG_KEY_RELOADS},
	{"outbound", "lease", CONFIG_KEY_RELOADS},
	{"outbound", "max_age", CONFIG_KEY_RELOADS},
	{"outbound", "max_attempts", CONFIG_KEY_RELOADS},
	{"outbound", "poll", CONFIG_KEY_RELOADS},
	{"outbound", "refund_base_url", CONFIG_KEY_RELOADS},
	{"outbound", "refund_key", CONFIG_KEY_RELOADS},
	{"outbound", "response_max", CONFIG_KEY_RELOADS},
	{"outbound", "retry_base", CONFIG_KEY_RELOADS},
	{"outbound", "retry_cap", CONFIG_KEY_RELOADS},
	{"outbound", "signing_secret", CONFIG_KEY_RELOADS},
	{"outbound", "timeout", CONFIG_KEY_RELOADS},
	{"outbound", "*_compensation", CONFIG_KEY_RELOADS},
	{"outbound", "*_on", CONFIG_KEY_RELOADS},
	{"outbound", "*_url", CONFIG_KEY_RELOADS},
	{"points", "rate", CONFIG_KEY_RELOADS},
	{"provider", "allow_from", CONFIG_KEY_RELOADS},
	{"provider", "capture", CONFIG_KEY_RELOADS},
	{"provider", "retention", CONFIG_KEY_RELOADS},
	{"provider", "tolerance", CONFIG_KEY_RELOADS},
	{"provider", "type", CONFIG_KEY_RELOADS},
	{"reconcile", "interval", CONFIG_KEY_RELOADS},
	{"reconcile", "lookback", CONFIG_KEY_RELOADS},
	{"reconcile", "max_bytes", CONFIG_KEY_RELOADS},
	{"reconcile", "max_orders", CONFIG_KEY_RELOADS},
	{"reconcile", "max_pages", CONFIG_KEY_RELOADS},
	{"reconcile", "older_than", CONFIG_KEY_RELOADS},
	{"reconcile", "retries", CONFIG_KEY_RELOADS},
	{"reconcile", "retry_base", CONFIG_KEY_RELOADS},
	{"reconcile", "timeout", CONFIG_KEY_RELOADS},
	{"server", "allow_no_providers", CONFIG_KEY_RELOADS},
	{"server", "body_max", CONFIG_KEY_RELOADS},
	{"server", "body_min_rate", CONFIG_KEY_RELOADS},
	{"server", "connection_timeout", CONFIG_KEY_RELOADS},
	{"server", "drain_timeout", CONFIG_KEY_RELOADS},
	{"server", "head_timeout", CONFIG_KEY_RELOADS},
	{"server", "listen", 0},
	{"server", "max_connections", CONFIG_KEY_RELOADS},
	{"server", "per_ip_connections", CONFIG_KEY_RELOADS},
	{"server", "port_file", 0},
	{"server", "threads", CONFIG_KEY_RELOADS},
	{"server", "tls_cert", CONFIG_KEY_RELOADS},
	{"server", "tls_key", CONFIG_KEY_RELOADS},
	{"server", "trusted_proxies", CONFIG_KEY_RELOADS},
	{"store", "backend", 0},
	{"store", "batch_max", 0},
	{"store", "busy_timeout_ms", 0},
	{"store", "conninfo", 0},
	{"store", "lease", CONFIG_KEY_RELOADS},
	{"store", "path", 0},
	{"store", "pool_size", 0},
	{"store", "pg_writers", 0},
	{"store", "retention", CONFIG_KEY_RELOADS},
	{"store", "statement_timeout", 0},
	{"store", "synchronous", 0},
	{"store", "writer_nice", 0},
};
/* clang-format on */

static const char *config_file_name(const struct config *cf)
{
	return cf->cf_path != NULL ? cf->cf_path : "(demo)";
}

const struct config_section *config_section(const struct config *cf, const char *name)
{
	size_t i;

	for (i = 0; i < cf->cf_n_sections; i++) {
		if (strcmp(cf->cf_sections[i].cs_name, name) == 0) {
			return &cf->cf_sections[i];
		}
	}
	return NULL;
}

const char *config_section_get(const struct config_section *cs, const char *key)
{
	const char *v = NULL;
	size_t i;

	if (cs == NULL) {
		return NULL;
	}
	for (i = 0; i < cs->cs_n; i++) {
		if (strcmp(cs->cs_kv[i].kv_key, key) == 0) {
			v = cs->cs_kv[i].kv_value;
		}
	}
	return v;
}

const char *config_get(const struct config *cf, const char *section, const char *key)
{
	return config_section_get(config_section(cf, section), key);
}

int config_section_each(const struct config_section *cs, const char *key,
			int (*fn)(void *arg, const char *value, int line), void *arg)
{
	size_t i;

	if (cs == NULL) {
		return 0;
	}
	for (i = 0; i < cs->cs_n; i++) {
		if (strcmp(cs->cs_kv[i].kv_key, key) == 0) {
			int rc = fn(arg, cs->cs_kv[i].kv_value, cs->cs_kv[i].kv_line);

			if (rc != 0) {
				return rc;
			}
		}
	}
	return 0;
}

static int config_parse_u64(const char *s, uint64_t *ret, const char **ret_end)
{
	uint64_t v = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p)) {
		return -1;
	}
	for (; isdigit((unsigned char)*p); p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (v > (UINT64_MAX - d) / 10) {
			return -1;
		}
		v = v * 10 + d;
	}
	*ret = v;
	*ret_end = p;
	return 0;
}

int config_parse_duration(const char *s, int64_t *ret_s)
{
	uint64_t v;
	uint64_t mult = 1;
	const char *end;

	if (s == NULL || config_parse_u64(s, &v, &end) < 0) {
		return -1;
	}
	if (strcmp(end, "") == 0 || strcmp(end, "s") == 0) {
		mult = 1;
	} else if (strcmp(end, "m") == 0) {
		mult = 60;
	} else if (strcmp(end, "h") == 0) {
		mult = 3600;
	} else if (strcmp(end, "d") == 0) {
		mult = 86400;
	} else {
		return -1;
	}
	if (v > (uint64_t)INT64_MAX / mult / 1000) {
		return -1;
	}
	*ret_s = (int64_t)(v * mult);
	return 0;
}

int config_parse_size(const char *s, size_t *ret)
{
	uint64_t v;
	uint64_t mult = 1;
	const char *end;

	if (s == NULL || config_parse_u64(s, &v, &end) < 0) {
		return -1;
	}
	if (*end == '\0') {
		mult = 1;
	} else if (strcasecmp(end, "k") == 0) {
		mult = 1024;
	} else if (strcasecmp(end, "m") == 0) {
		mult = 1024 * 1024;
	} else if (strcasecmp(end, "g") == 0) {
		mult = 1024ULL * 1024 * 1024;
	} else {
		return -1;
	}
	if (v > SIZE_MAX / mult) {
		return -1;
	}
	*ret = (size_t)(v * mult);
	return 0;
}

int config_parse_bool(const char *s, int *ret)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*ret = 0;
			return 0;
		}
	}
	return -1;
}

int config_line(const struct config *cf, const char *section, const char *key)
{
	const struct config_section *cs = config_section(cf, section);
	int line = 0;
	size_t i;

	for (i = 0; cs != NULL && i < cs->cs_n; i++) {
		if (key != NULL && strcmp(cs->cs_kv[i].kv_key, key) == 0) {
			line = cs->cs_kv[i].kv_line;
		}
	}
	if (line == 0 && cs != NULL) {
		line = cs->cs_line;
	}
	return line;
}

int config_refuse(const struct config *cf, const char *section, const char *key, const char *fmt,
                  ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_err("config %s:%d: [%s]%s%s: %s", config_file_name(cf), config_line(cf, section, key),
	        section, key != NULL ? " " : "", key != NULL ? key : "", msg);
	return -1;
}

void config_caution(const struct config *cf, const char *section, const char *key, const char *fmt,
                    ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("config %s:%d: [%s]%s%s: %s", config_file_name(cf), config_line(cf, section, key),
	         section, key != NULL ? " " : "", key != NULL ? key : "", msg);
}

static int config_bad(const struct config *cf, const char *section, const char *key, const char *value,
		      const char *expect)
{
	char q[128];

	log_err("config %s:%d: [%s] %s = \"%s\": expected %s", config_file_name(cf),
	        config_line(cf, section, key), section, key, log_quote(q, sizeof(q), value),
	        expect);
	return -1;
}

/* Counts a problem (already logged) when rc < 0: the load goes on to the
 * next key, its default standing in, and the file is refused at the end. */
static void config_count(struct config *cf, int rc)
{
	if (rc < 0) {
		cf->cf_problems++;
	}
}

int config_get_uint(const struct config *cf, const char *section, const char *key, unsigned dflt,
		    unsigned *ret)
{
	const char *v = config_get(cf, section, key);
	uint64_t n;
	const char *end;

	if (v == NULL) {
		*ret = dflt;
		return 0;
	}
	if (config_parse_u64(v, &n, &end) < 0 || *end != '\0' || n > UINT_MAX) {
		*ret = dflt;
		return config_bad(cf, section, key, v, "a whole number");
	}
	*ret = (unsigned)n;
	return 0;
}

int config_get_duration(const struct config *cf, const char *section, const char *key, int64_t dflt_s,
			int64_t *ret_s)
{
	const char *v = config_get(cf, section, key);

	if (v == NULL) {
		*ret_s = dflt_s;
		return 0;
	}
	if (config_parse_duration(v, ret_s) < 0) {
		*ret_s = dflt_s;
		return config_bad(cf, section, key, v, "a duration such as 300, 90s, 15m, 25h or 7d");
	}
	return 0;
}

int config_get_size(const struct config *cf, const char *section, const char *key, size_t dflt, size_t *ret)
{
	const char *v = config_get(cf, section, key);

	if (v == NULL) {
		*ret = dflt;
		return 0;
	}
	if (config_parse_size(v, ret) < 0) {
		*ret = dflt;
		return config_bad(cf, section, key, v, "a size such as 1048576, 512k or 1M");
	}
	return 0;
}

int config_get_bool(const struct config *cf, const char *section, const char *key, int dflt, int *ret)
{
	const char *v = config_get(cf, section, key);

	if (v == NULL) {
		*ret = dflt;
		return 0;
	}
	if (config_parse_bool(v, ret) < 0) {
		*ret = dflt;
		return config_bad(cf, section, key, v, "yes or no (also true/false, on/off, 1/0)");
	}
	return 0;
}

/* One sentence into err, cut to err_size (a path may be long). */
static void config_err(char *err, size_t err_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void config_err(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

/* Reads the whole file at path, a regular file of at most max bytes, into
 * *ret (NUL-terminated; free() it). Never waits: a FIFO, a terminal or a
 * device could keep start or a reload waiting forever, so only regular
 * files are read. Returns 0, or -1 with the cause in err (not logged: the
 * caller says which file it was for). */
static int config_slurp(const char *path, size_t max, char **ret, size_t *ret_len, char *err,
                        size_t err_size)
{
	char *data = NULL;
	size_t len = 0;
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		config_err(err, err_size, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		config_err(err, err_size, "cannot stat: %s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		config_err(err, err_size, "%s",
		           S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
		goto fail;
	}
	data = malloc(max + 1);
	if (data == NULL) {
		config_err(err, err_size, "out of memory");
		goto fail;
	}
	for (;;) {
		ssize_t n = read(fd, data + len, max + 1 - len);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			config_err(err, err_size, "cannot read: %s", strerror(errno));
			goto fail;
		}
		if (n == 0) {
			break;
		}
		len += (size_t)n;
		if (len > max) {
			config_err(err, err_size, "larger than %zu bytes", max);
			goto fail;
		}
	}
	close(fd);
	data[len] = '\0';
	*ret = data;
	*ret_len = len;
	return 0;
fail:
	close(fd);
	free(data);
	return -1;
}

static int config_read_file(const char *path, char **ret, size_t *ret_len, char *err,
                            size_t err_size)
{
	char *data = NULL;
	size_t len = 0;

	if (config_slurp(path, CONFIG_SECRET_MAX, &data, &len, err, err_size) < 0) {
		return -1;
	}
	/* Editors end files with a newline that is not part of the secret. */
	if (len > 0 && data[len - 1] == '\n') {
		data[--len] = '\0';
		if (len > 0 && data[len - 1] == '\r') {
			data[--len] = '\0';
		}
	}
	*ret = data;
	*ret_len = len;
	return 0;
}

/* config_read_secret without the source in front of the cause. */
static int config_read_secret_cause(const char *spec, char **ret, size_t *ret_len, char *err,
                                    size_t err_size)
{
	char path[PATH_MAX];
	const char *dir;
	int fallback = 0;

	if (strncmp(spec, "file:", 5) == 0) {
		return config_read_file(spec + 5, ret, ret_len, err, err_size);
	}
	if (strncmp(spec, "credential:", 11) == 0) {
		dir = getenv("CREDENTIALS_DIRECTORY");
		if (dir == NULL || dir[0] == '\0') {
			fallback = 1;
			dir = CONFIG_CREDENTIALS_FALLBACK;
		}
		if (spec[11] == '\0' || strchr(spec + 11, '/') != NULL ||
		    snprintf(path, sizeof(path), "%s/%s", dir, spec + 11) >= (int)sizeof(path)) {
			config_err(err, err_size, "bad credential name");
			return -1;
		}
		/* Outside the service (a command run by hand), the service's
		 * own copies, while it runs and to whoever may read them. */
		if (fallback && access(path, R_OK) < 0) {
			config_err(err, err_size,
			           "$CREDENTIALS_DIRECTORY is not set, and %s cannot be read there "
			           "either (%s): the service's credentials exist while it runs "
			           "(LoadCredential= in the unit) and are readable by root; or set "
			           "CREDENTIALS_DIRECTORY",
			           path, strerror(errno));
			return -1;
		}
		if (config_read_file(path, ret, ret_len, err, err_size) < 0) {
			/* The credential's file, whose name the spec does not give. */
			char cause[CONFIG_SECRET_ERR_MAX];

			snprintf(cause, sizeof(cause), "%s", err);
			config_err(err, err_size, "%s: %s", path, cause);
			return -1;
		}
		return 0;
	}
	if (strncmp(spec, "env:", 4) == 0) {
		const char *v = getenv(spec + 4);

		if (v == NULL) {
			config_err(err, err_size, "environment variable is not set");
			return -1;
		}
		*ret = strdup(v);
		if (*ret == NULL) {
			config_err(err, err_size, "out of memory");
			return -1;
		}
		*ret_len = strlen(v);
		return 0;
	}
	return config_read_file(spec, ret, ret_len, err, err_size);
}

int config_read_secret(const char *spec, char **ret, size_t *ret_len, char *err, size_t err_size)
{
	char cause[CONFIG_SECRET_ERR_MAX];

	if (config_read_secret_cause(spec, ret, ret_len, cause, sizeof(cause)) < 0) {
		/* The reference, never a value: spec is file:, credential:, env:
		 * or a path. */
		config_err(err, err_size, "%s: %s", spec, cause);
		return -1;
	}
	return 0;
}

/* [store] writer_nice: "-20" to "0" (default -10, CONFIG_WRITER_NICE). */
static int config_parse_writer_nice(struct config *cf)
{
	const char *v = config_get(cf, "store", "writer_nice");
	const char *digits;
	const char *end;
	uint64_t n;

	cf->cf_writer_nice = CONFIG_WRITER_NICE;
	if (v == NULL) {
		return 0;
	}
	digits = v[0] == '-' ? v + 1 : v;
	if (config_parse_u64(digits, &n, &end) < 0 || *end != '\0' || n > 20 ||
	    (v[0] != '-' && n != 0)) {
		return config_bad(cf, "store", "writer_nice", v, "a nice value from -20 to 0");
	}
	cf->cf_writer_nice = -(int)n;
	return 0;
}

/* [store] backend, conninfo, pool_size, pg_writers, statement_timeout. conninfo holds
 * the database password, so like every secret it may be read from
 * credential:NAME, file:PATH or env:NAME (the whole connection string);
 * anything else is the string itself. It is never logged. Each problem
 * is counted (cf_problems). Returns 0, or -1 when out of memory. */
static int config_parse_backend(struct config *cf)
{
	const char *v = config_get(cf, "store", "backend");
	char err[CONFIG_SECRET_ERR_MAX];
	int64_t timeout_s;
	size_t len;

	cf->cf_backend = STORE_BACKEND_SQLITE;
	if (v != NULL) {
		if (strcasecmp(v, "sqlite") == 0) {
			cf->cf_backend = STORE_BACKEND_SQLITE;
		} else if (strcasecmp(v, "postgresql") == 0) {
			cf->cf_backend = STORE_BACKEND_POSTGRESQL;
		} else {
			config_count(cf,
			             config_bad(cf, "store", "backend", v, "sqlite or postgresql"));
		}
	}
	config_count(cf, config_get_uint(cf, "store", "pool_size", 4, &cf->cf_pool_size));
	config_count(cf, config_get_duration(cf, "store", "statement_timeout", 5, &timeout_s));
	config_count(cf, config_get_uint(cf, "store", "pg_writers", 2, &cf->cf_pg_writers));
	if (cf->cf_pool_size == 0) {
		config_count(cf, config_bad(cf, "store", "pool_size", "0", "at least 1"));
		cf->cf_pool_size = 4;
	}
	if (cf->cf_pg_writers == 0 || cf->cf_pg_writers > 16) {
		config_count(cf, config_bad(cf, "store", "pg_writers",
		                            config_get(cf, "store", "pg_writers"), "1 to 16"));
		cf->cf_pg_writers = 2;
	}
	if (timeout_s <= 0 || timeout_s > 3600) {
		config_count(cf,
		             config_bad(cf, "store", "statement_timeout",
		                        config_get(cf, "store", "statement_timeout"), "1s to 1h"));
		timeout_s = 5;
	}
	cf->cf_statement_timeout_ms = (unsigned)(timeout_s * 1000);
	v = config_get(cf, "store", "conninfo");
	if (cf->cf_backend != STORE_BACKEND_POSTGRESQL) {
		return 0; /* a conninfo kept for later is not read (its secret may not be there) */
	}
	if (v == NULL) {
		config_count(cf,
		             config_refuse(cf, "store", "backend", "postgresql needs conninfo"));
		return 0;
	}
	if (strncmp(v, "credential:", 11) == 0 || strncmp(v, "file:", 5) == 0 ||
	    strncmp(v, "env:", 4) == 0) {
		if (config_read_secret(v, &cf->cf_conninfo, &len, err, sizeof(err)) < 0) {
			config_count(cf, config_refuse(cf, "store", "conninfo",
			                               "cannot be read: %s", err));
			return 0;
		}
		while (len > 0 && (cf->cf_conninfo[len - 1] == '\n' || cf->cf_conninfo[len - 1] == '\r')) {
			cf->cf_conninfo[--len] = '\0';
		}
		return 0;
	}
	if (strstr(v, "password") != NULL || strchr(v, '@') != NULL) {
		log_warn("%s: [store] conninfo may hold a password in the file itself; "
		         "prefer conninfo = credential:NAME (or a .pgpass file)",
		         config_file_name(cf));
	}
	cf->cf_conninfo = strdup(v);
	return cf->cf_conninfo != NULL ? 0 : -1;
}

/* ---- building the section list ---- */

static struct config_section *config_add_section(struct config *cf, const char *name)
{
	struct config_section *p;
	struct config_section *cs;

	p = realloc(cf->cf_sections, (cf->cf_n_sections + 1) * sizeof(*p));
	if (p == NULL) {
		return NULL;
	}
	cf->cf_sections = p;
	cs = &p[cf->cf_n_sections];
	memset(cs, 0, sizeof(*cs));
	cs->cs_name = strdup(name);
	if (cs->cs_name == NULL) {
		return NULL;
	}
	cs->cs_file = config_file_name(cf);
	cf->cf_n_sections++;
	return cs;
}

static int config_add_kv(struct config *cf, const char *section, const char *key, const char *value, int line)
{
	struct config_section *cs = (struct config_section *)config_section(cf, section);
	struct config_kv *p;
	struct config_kv *kv;

	if (cs == NULL) {
		cs = config_add_section(cf, section);
		if (cs == NULL) {
			return -1;
		}
	}
	p = realloc(cs->cs_kv, (cs->cs_n + 1) * sizeof(*p));
	if (p == NULL) {
		return -1;
	}
	cs->cs_kv = p;
	kv = &p[cs->cs_n];
	kv->kv_key = strdup(key);
	kv->kv_value = strdup(value);
	kv->kv_line = line;
	if (kv->kv_key == NULL || kv->kv_value == NULL) {
		free(kv->kv_key);
		free(kv->kv_value);
		return -1;
	}
	cs->cs_n++;
	return 0;
}

/* inih reads through this, so every key keeps the line it came from. */
struct config_reader {
	struct config *cr_cf;
	FILE *cr_file;
	int cr_line;     /* physical line of the text inih is parsing */
	int cr_header;   /* line of the last [section] header seen */
	int cr_too_long; /* the line that does not fit CONFIG_LINE_MAX, or 0 */
	char **cr_providers; /* [provider NAME] headers seen, as written */
	int *cr_provider_lines;
	size_t cr_n_providers;
	int cr_repeat;       /* a [provider NAME] header seen twice: its second line, or 0 */
	int cr_repeat_first; /* and its first */
	int cr_oom;
};

/* Remembers a [provider NAME] header (header: the text after '['); a second
 * one with the same name would merge into the first without a word. */
static void config_reader_header(struct config_reader *cr, const char *header)
{
	size_t n = strcspn(header, "]");
	char **names;
	int *lines;
	size_t i;

	if (header[n] != ']' ||
	    strncmp(header, CONFIG_PROVIDER_KIND " ", strlen(CONFIG_PROVIDER_KIND) + 1) != 0) {
		return;
	}
	for (i = 0; i < cr->cr_n_providers; i++) {
		if (strlen(cr->cr_providers[i]) == n &&
		    strncmp(cr->cr_providers[i], header, n) == 0) {
			if (cr->cr_repeat == 0) {
				cr->cr_repeat = cr->cr_line;
				cr->cr_repeat_first = cr->cr_provider_lines[i];
			}
			return;
		}
	}
	names = realloc(cr->cr_providers, (cr->cr_n_providers + 1) * sizeof(*names));
	if (names != NULL) {
		cr->cr_providers = names;
	}
	lines = realloc(cr->cr_provider_lines, (cr->cr_n_providers + 1) * sizeof(*lines));
	if (lines != NULL) {
		cr->cr_provider_lines = lines;
	}
	if (names == NULL || lines == NULL ||
	    (names[cr->cr_n_providers] = strndup(header, n)) == NULL) {
		cr->cr_oom = 1;
		return;
	}
	lines[cr->cr_n_providers++] = cr->cr_line;
}

static char *config_reader_line(char *str, int num, void *stream)
{
	struct config_reader *cr = stream;
	size_t len;
	int next;

	if (fgets(str, num, cr->cr_file) == NULL) {
		return NULL;
	}
	cr->cr_line++;
	/* inih reports a section only with its first key: remember the header. */
	if (str[strspn(str, " \t")] == '[') {
		cr->cr_header = cr->cr_line;
		config_reader_header(cr, str + strspn(str, " \t") + 1);
	}
	len = strlen(str);
	if (len > 0 && str[len - 1] != '\n') {
		/* Cut short by the buffer, not by the end of the file: inih would
		 * read the rest as a line of its own. */
		next = getc(cr->cr_file);
		if (next != EOF) {
			cr->cr_too_long = cr->cr_line;
			return NULL;
		}
	}
	return str;
}

static int config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
	struct config_reader *cr = user;
	struct config *cf = cr->cr_cf;
	struct config_section *cs;

	if (name == NULL) {
		/* A section header alone still declares the section. */
		cs = (struct config_section *)config_section(cf, section);
		if (cs == NULL) {
			cs = config_add_section(cf, section);
			if (cs == NULL) {
				return 0;
			}
			cs->cs_line = cr->cr_line;
		}
		return 1;
	}
	if (section[0] == '\0') {
		log_err("config %s:%d: key \"%s\" outside any section", config_file_name(cf), cr->cr_line,
			name);
		return 0;
	}
	if (config_section(cf, section) == NULL) {
		cs = config_add_section(cf, section);
		if (cs == NULL) {
			return 0;
		}
		cs->cs_line = cr->cr_header;
	}
	return config_add_kv(cf, section, name, value, cr->cr_line) == 0;
}


/* Parses the INI file at path into cf's sections. A file that is not a
 * configuration (a directory, a NUL byte, no section at all: a file cut
 * short or overwritten) is refused rather than read as one without
 * providers. Returns 0 or -1 (logged). */
static int config_read_ini(struct config *cf, const char *path)
{
	struct config_reader cr;
	char err[CONFIG_SECRET_ERR_MAX];
	char *text = NULL;
	const char *nul;
	size_t len = 0;
	size_t i;
	int rc = -1;
	int prc;

	memset(&cr, 0, sizeof(cr));
	cr.cr_cf = cf;
	if (config_slurp(path, CONFIG_FILE_MAX, &text, &len, err, sizeof(err)) < 0) {
		log_err("config %s: %s", path, err);
		return -1;
	}
	nul = memchr(text, '\0', len);
	if (nul != NULL) {
		int line = 1;
		const char *p;

		for (p = text; p < nul; p++) {
			line += *p == '\n';
		}
		log_err("config %s:%d: a NUL byte: this is not a text configuration file", path,
		        line);
		goto done;
	}
	if (len == 0) {
		log_err("config %s: the file is empty", path);
		goto done;
	}
	cr.cr_file = fmemopen(text, len, "r");
	if (cr.cr_file == NULL) {
		log_err("config %s: %s", path, strerror(errno));
		goto done;
	}
	prc = ini_parse_stream(config_reader_line, &cr, config_ini_handler, &cr);
	fclose(cr.cr_file);
	if (cr.cr_too_long > 0) {
		log_err("config %s:%d: the line is longer than %d bytes; give long values through "
			"file: or env:",
			path, cr.cr_too_long, CONFIG_LINE_MAX - 1);
		goto done;
	}
	if (prc != 0 || cr.cr_oom) {
		log_err("config %s:%d: cannot parse this line", path, prc > 0 ? prc : cr.cr_line);
		goto done;
	}
	if (cr.cr_repeat > 0) {
		log_err("config %s:%d: a second section of the same name as line %d's: one "
		        "[provider NAME] "
		        "section per instance",
		        path, cr.cr_repeat, cr.cr_repeat_first);
		goto done;
	}
	if (cf->cf_n_sections == 0) {
		log_err("config %s: no section at all (only blanks and comments): refused as empty",
		        path);
		goto done;
	}
	rc = 0;
done:
	for (i = 0; i < cr.cr_n_providers; i++) {
		free(cr.cr_providers[i]);
	}
	free(cr.cr_providers);
	free(cr.cr_provider_lines);
	explicit_bzero(text, len);
	free(text);
	return rc;
}

/* ---- unknown keys and sections ---- */

static unsigned char config_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Edit distance with adjacent transpositions (optimal string alignment),
 * ignoring case; capped at CONFIG_LINE_MAX-long strings. */
static size_t config_distance(const char *a, const char *b)
{
	size_t n = strlen(a);
	size_t m = strlen(b);
	size_t rows[3][CONFIG_LINE_MAX + 1];
	size_t i;
	size_t j;

	if (n > CONFIG_LINE_MAX || m > CONFIG_LINE_MAX) {
		return SIZE_MAX;
	}
	/* Row i lives in rows[(i + 2) % 3]. */
	for (j = 0; j <= m; j++) {
		rows[2][j] = j;
	}
	for (i = 1; i <= n; i++) {
		size_t *prev2 = rows[i % 3];
		size_t *prev = rows[(i + 1) % 3];
		size_t *cur = rows[(i + 2) % 3];

		cur[0] = i;
		for (j = 1; j <= m; j++) {
			size_t cost = config_lower((unsigned char)a[i - 1]) !=
					      config_lower((unsigned char)b[j - 1]);
			size_t best = prev[j] + 1;

			if (cur[j - 1] + 1 < best) {
				best = cur[j - 1] + 1;
			}
			if (prev[j - 1] + cost < best) {
				best = prev[j - 1] + cost;
			}
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < best) {
				best = prev2[j - 2] + 1;
			}
			cur[j] = best;
		}
	}
	return rows[(n + 2) % 3][m];
}

/* Keeps the plain name candidate in best (best_size bytes) when it is closer
 * to typed than what is there and close enough to be a likely typo. */
static void config_closer_name(const char *typed, const char *candidate, char *best,
			       size_t best_size, size_t *best_d)
{
	size_t len = strlen(typed);
	size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
	size_t d = config_distance(typed, candidate);

	if (d <= limit && d < *best_d && strlen(candidate) < best_size) {
		memcpy(best, candidate, strlen(candidate) + 1);
		*best_d = d;
	}
}

/* config_closer_name for a known key or section; a pattern "*_on" is tried
 * as typed's own prefix before each '_' followed by "_on". */
static void config_closer(const char *typed, const char *candidate, char *best, size_t best_size,
			  size_t *best_d)
{
	char formed[CONFIG_LINE_MAX + 1];
	size_t len = strlen(typed);
	size_t k;

	if (candidate[0] != '*') {
		config_closer_name(typed, candidate, best, best_size, best_d);
		return;
	}
	for (k = 1; k < len; k++) {
		if (typed[k] == '_' &&
		    snprintf(formed, sizeof(formed), "%.*s%s", (int)k, typed, candidate + 1) <
			    (int)sizeof(formed)) {
			config_closer_name(typed, formed, best, best_size, best_d);
		}
	}
}

static int config_key_matches(const char *pattern, const char *key)
{
	size_t plen;
	size_t klen;

	if (pattern[0] != '*') {
		return strcmp(pattern, key) == 0;
	}
	plen = strlen(pattern + 1);
	klen = strlen(key);
	return klen > plen && strcmp(key + klen - plen, pattern + 1) == 0;
}

/* The keys of provider profiles that take several lines (rotation of
 * secrets and keys, lists): config knows no profile, so they are named
 * here; any other profile key is single-valued. */
static const char *const config_multi_profile_keys[] = {
        "apiv3_key",  "hmac_key",       "paid_types", "platform_key",
        "public_key", "refunded_types", "secret",     "sub_mchid",
};

/* The flags (CONFIG_KEY_*) of key in a section of kind; a provider
 * section's keys all reload (the instance is made anew). */
static unsigned config_key_flags(const char *kind, const char *key)
{
	size_t i;

	if (strcmp(kind, CONFIG_PROVIDER_KIND) == 0) {
		for (i = 0;
		     i < sizeof(config_multi_profile_keys) / sizeof(config_multi_profile_keys[0]);
		     i++) {
			if (strcmp(config_multi_profile_keys[i], key) == 0) {
				return CONFIG_KEY_MULTI | CONFIG_KEY_RELOADS;
			}
		}
		return CONFIG_KEY_RELOADS;
	}
	for (i = 0; i < sizeof(config_known_keys) / sizeof(config_known_keys[0]); i++) {
		if (strcmp(config_known_keys[i].ck_section, kind) == 0 &&
		    config_key_matches(config_known_keys[i].ck_key, key)) {
			return config_known_keys[i].ck_flags;
		}
	}
	return 0;
}

/* The kind of a section name: "provider" for [provider NAME], else the name. */
static const char *config_kind(const char *section)
{
	if (strncmp(section, CONFIG_PROVIDER_KIND " ", strlen(CONFIG_PROVIDER_KIND) + 1) == 0) {
		return CONFIG_PROVIDER_KIND;
	}
	return section;
}

int config_key_reloads(const char *section, const char *key)
{
	return (config_key_flags(config_kind(section), key) & CONFIG_KEY_RELOADS) != 0;
}

int config_each_restart_change(const struct config *was, const struct config *now,
                               int (*fn)(void *arg, const char *section, const char *key),
                               void *arg)
{
	const struct config *sides[2] = {was, now};
	size_t side;
	size_t i;
	size_t j;

	for (side = 0; side < 2; side++) {
		const struct config *a = sides[side];
		const struct config *b = sides[1 - side];

		for (i = 0; i < a->cf_n_sections; i++) {
			const struct config_section *cs = &a->cf_sections[i];

			for (j = 0; j < cs->cs_n; j++) {
				const char *key = cs->cs_kv[j].kv_key;
				const char *va = config_section_get(cs, key);
				const char *vb = config_get(b, cs->cs_name, key);
				size_t k;
				int seen = 0;
				int rc;

				for (k = 0; k < j; k++) {
					seen |= strcmp(cs->cs_kv[k].kv_key, key) == 0;
				}
				/* Each key once; one present on both sides is the first side's. */
				if (seen || (side == 1 && vb != NULL) ||
				    config_key_reloads(cs->cs_name, key)) {
					continue;
				}
				if (vb != NULL && strcmp(va, vb) == 0) {
					continue;
				}
				rc = fn(arg, cs->cs_name, key);
				if (rc != 0) {
					return rc;
				}
			}
		}
	}
	return 0;
}

/* What is wrong with value as a secret reference (credential:NAME,
 * file:PATH, env:NAME, also as the last word of "[api] token = NAME SPEC"),
 * or NULL when it is none or a good one; *ret_ref is the reference. */
static const char *config_secret_ref_problem(const char *value, const char **ret_ref)
{
	const char *sp = strrchr(value, ' ');
	const char *v = sp != NULL ? sp + 1 : value;

	*ret_ref = v;
	if (strncmp(v, "credential:", 11) == 0) {
		if (v[11] == '\0' || strchr(v + 11, '/') != NULL || strcmp(v + 11, ".") == 0 ||
		    strcmp(v + 11, "..") == 0) {
			return "credential: needs the credential's name "
			       "(LoadCredential=NAME:...), no '/'";
		}
	} else if (strncmp(v, "file:", 5) == 0) {
		if (v[5] == '\0') {
			return "file: needs a path";
		}
	} else if (strncmp(v, "env:", 4) == 0) {
		if (v[4] == '\0' ||
		    strspn(v + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                  "0123456789_") != strlen(v + 4)) {
			return "env: needs an environment variable's name (letters, digits, _)";
		}
	}
	return NULL;
}

/* 1 when a value of cs is a malformed secret reference (refused, and
 * logged, by config_check_secret_refs), else 0. */
static int config_section_bad_ref(const struct config_section *cs)
{
	const char *ref;
	size_t j;

	for (j = 0; j < cs->cs_n; j++) {
		if (config_secret_ref_problem(cs->cs_kv[j].kv_value, &ref) != NULL) {
			return 1;
		}
	}
	return 0;
}

/* Every value that names a secret must name one: checked whether or not
 * the secret is read now. Returns how many do not (each logged). */
static unsigned config_check_secret_refs(const struct config *cf)
{
	unsigned n = 0;
	size_t i;
	size_t j;

	for (i = 0; i < cf->cf_n_sections; i++) {
		const struct config_section *cs = &cf->cf_sections[i];

		for (j = 0; j < cs->cs_n; j++) {
			const char *ref;
			const char *why = config_secret_ref_problem(cs->cs_kv[j].kv_value, &ref);
			char q[128];

			if (why != NULL) {
				log_err("config %s:%d: [%s] %s = \"%s\": %s", config_file_name(cf),
				        cs->cs_kv[j].kv_line, cs->cs_name, cs->cs_kv[j].kv_key,
				        log_quote(q, sizeof(q), ref), why);
				n++;
			}
		}
	}
	return n;
}

/* A single-valued key given twice would silently take its last line:
 * refused, naming both lines. Returns how many (each logged). */
static unsigned config_check_repeats(const struct config *cf)
{
	unsigned n = 0;
	size_t i;
	size_t j;
	size_t k;

	for (i = 0; i < cf->cf_n_sections; i++) {
		const struct config_section *cs = &cf->cf_sections[i];
		const char *kind = config_kind(cs->cs_name);

		for (j = 0; j < cs->cs_n; j++) {
			if (config_key_flags(kind, cs->cs_kv[j].kv_key) & CONFIG_KEY_MULTI) {
				continue;
			}
			for (k = 0; k < j; k++) {
				if (strcmp(cs->cs_kv[k].kv_key, cs->cs_kv[j].kv_key) == 0) {
					log_err("config %s:%d: [%s] %s is given again (first on "
					        "line %d); it takes "
					        "one value: remove one of the lines",
					        config_file_name(cf), cs->cs_kv[j].kv_line,
					        cs->cs_name, cs->cs_kv[j].kv_key,
					        cs->cs_kv[k].kv_line);
					n++;
					break;
				}
			}
		}
	}
	return n;
}

/* 1 when kind ("server", "provider", ...) is a section the table knows. */
static int config_kind_known(const char *kind)
{
	size_t i;

	for (i = 0; i < sizeof(config_known_keys) / sizeof(config_known_keys[0]); i++) {
		if (strcmp(config_known_keys[i].ck_section, kind) == 0) {
			return 1;
		}
	}
	return 0;
}

/* 1 when key belongs in a section of kind (with a profile's own keys, NULL
 * or NULL-terminated, for a provider section); else 0 with hint (hint_size
 * bytes) the closest known key, or "" when none is close. */
static int config_key_known(const char *kind, const char *const *profile_keys, const char *key,
			    char *hint, size_t hint_size)
{
	size_t best_d = SIZE_MAX;
	size_t i;

	hint[0] = '\0';
	for (i = 0; i < sizeof(config_known_keys) / sizeof(config_known_keys[0]); i++) {
		if (strcmp(config_known_keys[i].ck_section, kind) != 0) {
			continue;
		}
		if (config_key_matches(config_known_keys[i].ck_key, key)) {
			return 1;
		}
		config_closer(key, config_known_keys[i].ck_key, hint, hint_size, &best_d);
	}
	for (i = 0; profile_keys != NULL && profile_keys[i] != NULL; i++) {
		if (strcmp(profile_keys[i], key) == 0) {
			return 1;
		}
		config_closer(key, profile_keys[i], hint, hint_size, &best_d);
	}
	return 0;
}

/* The other sections that take key, as "[store]" or "[capture], [store]",
 * into out; 0 when none does. */
static size_t config_key_homes(const char *kind, const char *key, char *out, size_t out_size)
{
	size_t n = 0;
	size_t len = 0;
	size_t i;

	out[0] = '\0';
	for (i = 0; i < sizeof(config_known_keys) / sizeof(config_known_keys[0]); i++) {
		const char *home = config_known_keys[i].ck_section;
		int w;

		if (strcmp(config_known_keys[i].ck_key, key) != 0 || strcmp(home, kind) == 0) {
			continue;
		}
		w = snprintf(out + len, out_size - len, "%s[%s%s]", n > 0 ? ", " : "", home,
			     strcmp(home, CONFIG_PROVIDER_KIND) == 0 ? " NAME" : "");
		if (w < 0 || (size_t)w >= out_size - len) {
			break;
		}
		len += (size_t)w;
		n++;
	}
	return n;
}

static void config_unknown_section(const struct config *cf, const struct config_section *cs)
{
	const char *name = cs->cs_name;
	char best[64] = "";
	size_t best_d = SIZE_MAX;
	size_t word = strcspn(name, " \t");
	char q[128];
	char first[64];
	size_t i;

	if (strcmp(name, CONFIG_PROVIDER_KIND) == 0) {
		log_err("config %s:%d: [provider] needs a name: [provider NAME]", config_file_name(cf),
			cs->cs_line);
		return;
	}
	for (i = 0; i < sizeof(config_known_keys) / sizeof(config_known_keys[0]); i++) {
		if (strcmp(config_known_keys[i].ck_section, CONFIG_PROVIDER_KIND) != 0) {
			config_closer(name, config_known_keys[i].ck_section, best, sizeof(best),
				      &best_d);
		}
	}
	/* [providers stripe], [Provider stripe]: the first word was meant. */
	if (name[word] != '\0' && word < sizeof(first)) {
		memcpy(first, name, word);
		first[word] = '\0';
		if (config_distance(first, CONFIG_PROVIDER_KIND) <= 2) {
			log_err("config %s:%d: unknown section [%s]; did you mean [provider %s]?",
				config_file_name(cf), cs->cs_line, log_quote(q, sizeof(q), name),
				name + word + strspn(name + word, " \t"));
			return;
		}
	}
	if (best[0] != '\0') {
		log_err("config %s:%d: unknown section [%s]; did you mean [%s]?", config_file_name(cf),
			cs->cs_line, log_quote(q, sizeof(q), name), best);
	} else {
		log_err("config %s:%d: unknown section [%s]", config_file_name(cf), cs->cs_line,
			log_quote(q, sizeof(q), name));
	}
}

/* Every section and key must be known (config_known_keys, the profiles'
 * p_keys): each one that is not is logged with its line and the closest
 * known name. A provider section of an unknown type is left to
 * config_parse_provider, which says so; without profiles (cpr NULL)
 * provider sections are not looked at. Returns how many are unknown. */
static unsigned config_check_known(const struct config *cf, const struct config_profiles *cpr)
{
	unsigned n = 0;
	size_t i;
	size_t j;

	for (i = 0; i < cf->cf_n_sections; i++) {
		const struct config_section *cs = &cf->cf_sections[i];
		struct config_profile prof = {.cpf_keys = NULL};
		const char *kind = cs->cs_name;

		if (strncmp(cs->cs_name, CONFIG_PROVIDER_KIND " ", strlen(CONFIG_PROVIDER_KIND) + 1) == 0) {
			const char *type = config_section_get(cs, "type");

			kind = CONFIG_PROVIDER_KIND;
			if (type == NULL) {
				type = cs->cs_name + strlen(CONFIG_PROVIDER_KIND) + 1;
				type += strspn(type, " ");
			}
			if (cpr == NULL || cpr->cpr_find(type, &prof) != 1) {
				continue;
			}
		} else if (strcmp(kind, CONFIG_PROVIDER_KIND) == 0 || !config_kind_known(kind)) {
			config_unknown_section(cf, cs);
			n++;
			continue;
		}
		for (j = 0; j < cs->cs_n; j++) {
			const char *key = cs->cs_kv[j].kv_key;
			char hint[CONFIG_LINE_MAX + 1];
			char homes[128];
			char q[128];
			char qs[128];

			if (config_key_known(kind, prof.cpf_keys, key, hint, sizeof(hint))) {
				continue;
			}
			n++;
			if (hint[0] != '\0') {
				log_err("config %s:%d: [%s] unknown key \"%s\"; did you mean \"%s\"?",
					config_file_name(cf), cs->cs_kv[j].kv_line, log_quote(qs, sizeof(qs), cs->cs_name),
					log_quote(q, sizeof(q), key), hint);
			} else if (config_key_homes(kind, key, homes, sizeof(homes)) > 0) {
				log_err("config %s:%d: [%s] unknown key \"%s\"; it belongs in %s",
					config_file_name(cf), cs->cs_kv[j].kv_line, log_quote(qs, sizeof(qs), cs->cs_name),
					log_quote(q, sizeof(q), key), homes);
			} else {
				log_err("config %s:%d: [%s] unknown key \"%s\"", config_file_name(cf),
					cs->cs_kv[j].kv_line, log_quote(qs, sizeof(qs), cs->cs_name),
					log_quote(q, sizeof(q), key));
			}
		}
	}
	return n;
}

const char *config_list_next(const char **cursor, size_t *ret_len)
{
	const char *p = *cursor;
	size_t n;

	p += strspn(p, " ,\t");
	n = strcspn(p, " ,\t");
	if (n == 0) {
		*cursor = p;
		return NULL;
	}
	*cursor = p + n;
	*ret_len = n;
	return p;
}

/* Parses a CIDR list value into a NULL-terminated array (NULL when the key is
 * absent). Every entry is checked: each bad one is logged and left out.
 * Returns 0, or -1 when an entry was bad or memory ran out. */
static int config_parse_cidrs(struct config *cf, const char *section, const char *key, const char *v,
			      char ***ret)
{
	const char *cursor = v;
	const char *item;
	size_t len;
	size_t n = 0;
	char **list;
	int rc = 0;

	if (v == NULL) {
		return 0;
	}
	list = calloc(strlen(v) / 2 + 2, sizeof(char *));
	if (list == NULL) {
		return -1;
	}
	*ret = list;
	while ((item = config_list_next(&cursor, &len)) != NULL) {
		list[n] = strndup(item, len);
		if (list[n] == NULL) {
			return -1;
		}
		if (cidr_match(list[n], "127.0.0.1") < 0) {
			rc = config_bad(cf, section, key, list[n],
			                "CIDRs such as 192.0.2.0/24 or ::1/128");
			free(list[n]);
			list[n] = NULL;
			continue;
		}
		n++;
	}
	return rc;
}

static void config_free_list(char **list)
{
	size_t i;

	if (list == NULL) {
		return;
	}
	for (i = 0; list[i] != NULL; i++) {
		free(list[i]);
	}
	free(list);
}

/* ---- typed core sections ---- */

int config_parse_listen(const struct config *cf, const char *section, const char *dflt,
                        char **ret_host, unsigned *ret_port)
{
	const char *v = config_get(cf, section, "listen");
	unsigned char addr[sizeof(struct in6_addr)];
	const char *colon;
	const char *end;
	uint64_t port;
	char *host;

	if (v == NULL) {
		v = dflt;
	}
	colon = strrchr(v, ':');
	if (colon == NULL || colon == v) {
		return config_bad(cf, section, "listen", v, "HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080");
	}
	if (config_parse_u64(colon + 1, &port, &end) < 0 || *end != '\0' || port > 65535) {
		return config_bad(cf, section, "listen", v, "a port from 0 to 65535");
	}
	if (v[0] == '[' && colon[-1] == ']') {
		host = strndup(v + 1, (size_t)(colon - v - 2));
	} else {
		host = strndup(v, (size_t)(colon - v));
	}
	if (host == NULL) {
		return -1;
	}
	/* The listener binds an address, never a name: "localhost" may be
	 * ::1, 127.0.0.1 or both, and would be found out only when binding. */
	if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1) {
		free(host);
		return config_bad(
		        cf, section, "listen", v,
		        "a numeric address and a port (127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080); "
		        "host names such as localhost are not resolved");
	}
	free(*ret_host);
	*ret_host = host;
	*ret_port = (unsigned)port;
	return 0;
}

static int config_parse_points(struct config *cf)
{
	const char *v = config_get(cf, "points", "rate");
	int64_t num = 0;
	int64_t den = 1;
	const char *p;
	int frac = -1;

	cf->cf_points_num = 1;
	cf->cf_points_den = 100;
	if (v == NULL) {
		return 0;
	}
	/* An exact decimal ("0.01") or fraction ("1/100"); never floating point. */
	p = strchr(v, '/');
	if (p != NULL) {
		uint64_t a;
		uint64_t b;
		const char *end;

		if (config_parse_u64(v, &a, &end) < 0 || end != p || config_parse_u64(p + 1, &b, &end) < 0 ||
		    *end != '\0' || b == 0 || a > 1000000000 || b > 1000000000) {
			return config_bad(cf, "points", "rate", v, "a decimal (0.01) or a fraction (1/100)");
		}
		cf->cf_points_num = (int64_t)a;
		cf->cf_points_den = (int64_t)b;
		return 0;
	}
	for (p = v; *p != '\0'; p++) {
		if (*p == '.' && frac < 0) {
			frac = 0;
			continue;
		}
		if (!isdigit((unsigned char)*p) || num > 100000000 || frac > 8) {
			return config_bad(cf, "points", "rate", v, "a decimal (0.01) or a fraction (1/100)");
		}
		num = num * 10 + (*p - '0');
		if (frac >= 0) {
			frac++;
			den *= 10;
		}
	}
	if (p == v || frac == 0) {
		return config_bad(cf, "points", "rate", v, "a decimal (0.01) or a fraction (1/100)");
	}
	cf->cf_points_num = num;
	cf->cf_points_den = den;
	return 0;
}

/* [api] order_reads is own or all (api.c reads it): anything else is
 * refused here, at start and on reload, rather than later by the API. */
static int config_check_order_reads(const struct config *cf)
{
	const char *v = config_get(cf, "api", "order_reads");
	char q[128];

	if (v == NULL || strcmp(v, "own") == 0 || strcmp(v, "all") == 0) {
		return 0;
	}
	log_err("config %s:%d: [api] order_reads = \"%s\": expected own (a client reads the orders "
	        "it created, the default) or all (any authorized client reads every order)",
	        config_file_name(cf), config_line(cf, "api", "order_reads"),
	        log_quote(q, sizeof(q), v));
	return -1;
}

/* The core sections ([server], [store], [points], [api] order_reads), every
 * key checked whatever the others hold: a problem is counted (cf_problems)
 * and its key keeps its default. Returns 0, or -1 when out of memory. */
static int config_parse_core(struct config *cf)
{
	const char *v;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned threads = cores > 0 ? (unsigned)cores : 2;
	int64_t lease_s;

	cf->cf_listen_host = strdup("127.0.0.1");
	cf->cf_listen_port = 8080;
	cf->cf_db_path = strdup("./var/idemhook.db");
	if (cf->cf_listen_host == NULL || cf->cf_db_path == NULL) {
		return -1;
	}
	config_count(cf, config_parse_listen(cf, "server", "127.0.0.1:8080", &cf->cf_listen_host,
	                                     &cf->cf_listen_port));
	config_count(cf, config_get_uint(cf, "server", "threads", threads, &cf->cf_threads));
	config_count(cf, config_get_uint(cf, "server", "connection_timeout", 30,
	                                 &cf->cf_conn_timeout_s));
	config_count(cf,
	             config_get_uint(cf, "server", "per_ip_connections", 64, &cf->cf_per_ip_limit));
	config_count(cf, config_get_size(cf, "server", "body_max", HTTP_BODY_MAX_DEFAULT,
	                                 &cf->cf_body_max));
	config_count(cf,
	             config_get_uint(cf, "server", "max_connections", 0, &cf->cf_max_connections));
	config_count(cf, config_get_duration(cf, "server", "head_timeout",
	                                     HTTP_HEAD_TIMEOUT_DEFAULT_MS / 1000,
	                                     &cf->cf_head_timeout_s));
	config_count(cf, config_get_size(cf, "server", "body_min_rate", HTTP_BODY_MIN_RATE_DEFAULT,
	                                 &cf->cf_body_min_rate));
	config_count(cf, config_get_duration(cf, "server", "drain_timeout",
	                                     HTTP_DRAIN_TIMEOUT_DEFAULT_MS / 1000,
	                                     &cf->cf_drain_timeout_s));
	/* A value that did not parse holds its default, within these ranges;
	 * one out of range is given its default too. */
	if (cf->cf_head_timeout_s < 1 || cf->cf_head_timeout_s > 3600) {
		config_count(cf, config_bad(cf, "server", "head_timeout",
		                            config_get(cf, "server", "head_timeout"), "1s to 1h"));
		cf->cf_head_timeout_s = HTTP_HEAD_TIMEOUT_DEFAULT_MS / 1000;
	}
	if (cf->cf_drain_timeout_s < 1 || cf->cf_drain_timeout_s > 3600) {
		config_count(cf, config_bad(cf, "server", "drain_timeout",
		                            config_get(cf, "server", "drain_timeout"), "1s to 1h"));
		cf->cf_drain_timeout_s = HTTP_DRAIN_TIMEOUT_DEFAULT_MS / 1000;
	}
	if (cf->cf_body_min_rate == 0) {
		config_count(cf, config_bad(cf, "server", "body_min_rate",
		                            config_get(cf, "server", "body_min_rate"),
		                            "at least 1 byte per second"));
		cf->cf_body_min_rate = HTTP_BODY_MIN_RATE_DEFAULT;
	}
	if (cf->cf_threads == 0) {
		cf->cf_threads = threads;
	}
	config_count(cf, config_parse_cidrs(cf, "server", "trusted_proxies",
	                                    config_get(cf, "server", "trusted_proxies"),
	                                    &cf->cf_trusted_proxies));
	v = config_get(cf, "server", "port_file");
	if (v != NULL && (cf->cf_port_file = strdup(v)) == NULL) {
		return -1;
	}
	v = config_get(cf, "store", "path");
	if (v != NULL) {
		free(cf->cf_db_path);
		cf->cf_db_path = strdup(v);
		if (cf->cf_db_path == NULL) {
			return -1;
		}
	}
	v = config_get(cf, "store", "synchronous");
	cf->cf_sync = STORE_SYNC_FULL;
	if (v != NULL) {
		if (strcasecmp(v, "full") == 0) {
			cf->cf_sync = STORE_SYNC_FULL;
		} else if (strcasecmp(v, "normal") == 0) {
			cf->cf_sync = STORE_SYNC_NORMAL;
		} else if (strcasecmp(v, "off") == 0) {
			cf->cf_sync = STORE_SYNC_OFF;
		} else {
			config_count(cf, config_bad(cf, "store", "synchronous", v,
			                            "full, normal or off"));
		}
	}
	config_count(cf, config_get_uint(cf, "store", "batch_max", 256, &cf->cf_batch_max));
	config_count(
	        cf, config_get_uint(cf, "store", "busy_timeout_ms", 5000, &cf->cf_busy_timeout_ms));
	config_count(cf, config_get_duration(cf, "store", "retention", CONFIG_RETENTION_DEFAULT_S,
	                                     &cf->cf_retention_s));
	config_count(cf, config_get_duration(cf, "store", "lease", 60, &lease_s));
	if (cf->cf_batch_max == 0) {
		config_count(cf, config_bad(cf, "store", "batch_max", "0", "at least 1"));
		cf->cf_batch_max = 256;
	}
	config_count(cf, config_parse_writer_nice(cf));
	cf->cf_lease_s = lease_s > 0 ? lease_s : 60;
	if (config_parse_backend(cf) < 0) {
		return -1;
	}
	config_count(cf, config_check_order_reads(cf));
	config_count(cf, config_parse_points(cf));
	return 0;
}

int config_provider_allows(const struct provider_conf *pc, const char *client)
{
	size_t i;

	if (pc->pc_allow_from == NULL) {
		return 1;
	}
	for (i = 0; pc->pc_allow_from[i] != NULL; i++) {
		if (cidr_match(pc->pc_allow_from[i], client) == 1) {
			return 1;
		}
	}
	return 0;
}

/* allow_from: CIDRs, and provider:NAME presets expanded to the addresses
 * that provider publishes (senders.h): the list `idemhook ips update`
 * wrote beside the database, else the one shipped with the binary. A
 * provider that publishes none refuses the preset with its advice. */
static int config_parse_allow_from(struct config *cf, const struct config_section *cs, struct provider_conf *pc)
{
	const char *v = config_section_get(cs, "allow_from");
	const char *cursor = v;
	const char *item;
	char dir[512];
	struct buf all;
	size_t len;
	int bad = 0;
	int rc = -1;

	if (v == NULL || strstr(v, SENDERS_PRESET) == NULL) {
		return config_parse_cidrs(cf, cs->cs_name, "allow_from", v, &pc->pc_allow_from);
	}
	buf_init(&all, 0);
	if (senders_dir(cf->cf_db_path, dir, sizeof(dir)) < 0) {
		goto done;
	}
	while ((item = config_list_next(&cursor, &len)) != NULL) {
		struct senders_list l;
		char name[64];
		char err[SENDERS_ERR_MAX];
		size_t i;

		if (len <= strlen(SENDERS_PRESET) || strncmp(item, SENDERS_PRESET, strlen(SENDERS_PRESET)) != 0) {
			if (buf_append(&all, item, len) < 0 || buf_puts(&all, " ") < 0) {
				goto done;
			}
			continue;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(len - strlen(SENDERS_PRESET)), item + strlen(SENDERS_PRESET));
		if (senders_load(dir, name, &l, err, sizeof(err)) < 0) {
			/* Logged, and the other entries checked all the same. */
			log_err("config %s:%d: [%s] allow_from = %s%s: %s", config_file_name(cf),
			        config_line(cf, cs->cs_name, "allow_from"), cs->cs_name,
			        SENDERS_PRESET, name, err);
			bad = 1;
			continue;
		}
		for (i = 0; i < l.sl_n; i++) {
			if (buf_puts(&all, l.sl_cidrs[i]) < 0 || buf_puts(&all, " ") < 0) {
				senders_list_finish(&l);
				goto done;
			}
		}
		senders_list_finish(&l);
	}
	rc = config_parse_cidrs(cf, cs->cs_name, "allow_from", all.buf_data != NULL ? all.buf_data : "",
				&pc->pc_allow_from);
	if (bad) {
		rc = -1;
	}
done:
	buf_finish(&all);
	return rc;
}

/* Makes pc the instance of [provider NAME] section cs: its common keys
 * each checked whatever the others hold, then its secrets read and made
 * into its state by its profile (unless a key was refused, or the load
 * reads no secret). Returns 0, or -1 when the section has a problem
 * (logged) or memory ran out; pc then holds what config_provider_finish
 * frees. */
static int config_parse_provider(struct config *cf, const struct config_profiles *cpr,
				 const struct config_section *cs, struct provider_conf *pc)
{
	struct config_profile prof;
	const char *name = cs->cs_name + strlen("provider ");
	const char *type = config_section_get(cs, "type");
	const char *p;
	char q[128];
	int64_t v;
	int known;
	int rc = 0;

	while (*name == ' ') {
		name++;
	}
	if (*name == '\0') {
		log_err("config %s:%d: [%s]: a provider section needs a name: [provider NAME]",
		        config_file_name(cf), cs->cs_line, cs->cs_name);
		return -1;
	}
	for (p = name; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_') {
			log_err("config %s:%d: [%s]: provider names use letters, digits, '-' and "
			        "'_'",
			        config_file_name(cf), cs->cs_line,
			        log_quote(q, sizeof(q), cs->cs_name));
			return -1;
		}
	}
	pc->pc_name = strdup(name);
	if (pc->pc_name == NULL) {
		return -1;
	}
	pc->pc_section = cs;
	if (type == NULL) {
		type = name; /* [provider stripe] with no type = stripe */
	}
	known = cpr->cpr_find(type, &prof) == 1;
	if (!known) {
		/* The common keys are checked all the same; capture, which
		 * depends on the profile, and the profile's own keys are not. */
		log_err("config %s:%d: [%s] type = \"%s\": unknown provider type",
		        config_file_name(cf), config_line(cf, cs->cs_name, "type"), cs->cs_name,
		        log_quote(q, sizeof(q), type));
		rc = -1;
	}
	if (config_get_duration(cf, cs->cs_name, "tolerance", 300, &pc->pc_tolerance_s) < 0) {
		rc = -1;
	}
	if (config_get_duration(cf, cs->cs_name, "retention", cf->cf_retention_s, &v) < 0) {
		rc = -1;
	}
	pc->pc_retention_s = v;
	/* Provider key "capture": automatic (default) or manual, for profiles
	 * whose authorisation and capture are separate events. */
	p = config_section_get(cs, "capture");
	if (p != NULL && known) {
		if (strcmp(p, "manual") == 0 && prof.cpf_capture) {
			pc->pc_capture_manual = 1;
		} else if (strcmp(p, "automatic") != 0) {
			rc = config_bad(
			        cf, cs->cs_name, "capture", p,
			        prof.cpf_capture
			                ? "automatic or manual"
			                : "automatic (this type captures with the payment)");
		}
	}
	if (config_parse_allow_from(cf, cs, pc) < 0) {
		rc = -1;
	}
	if (!known) {
		return -1;
	}
	if (config_section_bad_ref(cs)) {
		return -1; /* refused and logged by config_check_secret_refs: nothing to read */
	}
	if (!cf->cf_secrets) {
		/* The shape only: the instance's keys were checked, its secrets
		 * are neither read nor parsed (a command that verifies nothing). */
		pc->pc_provider = prof.cpf_provider;
	} else if (cpr->cpr_create(type, pc) < 0) {
		log_err("config %s:%d: [%s]: provider configuration refused", config_file_name(cf),
		        cs->cs_line, cs->cs_name);
		return -1;
	}
	if (rc == 0 && pc->pc_retention_s < prof.cpf_retry_window_s) {
		log_warn("[%s]: retention %llds is shorter than %s's retry window of %llds: a late retry "
			 "could be processed again",
			 cs->cs_name, (long long)pc->pc_retention_s, prof.cpf_name,
			 (long long)prof.cpf_retry_window_s);
	}
	return rc;
}

/* Frees what config_parse_provider made of pc. */
static void config_provider_finish(struct provider_conf *pc)
{
	if (pc->pc_state != NULL && pc->pc_state_destroy != NULL) {
		pc->pc_state_destroy(pc->pc_state);
	}
	config_free_list(pc->pc_allow_from);
	free(pc->pc_name);
	memset(pc, 0, sizeof(*pc));
}

/* Every [provider NAME] section, each parsed whatever the others hold: one
 * with a problem is counted (cf_problems) and left without an instance.
 * Returns 0, or -1 when out of memory. */
static int config_parse_providers(struct config *cf, const struct config_profiles *cpr)
{
	size_t i;
	size_t j;

	for (i = 0; i < cf->cf_n_sections; i++) {
		const struct config_section *cs = &cf->cf_sections[i];
		struct provider_conf *p;
		struct provider_conf *pc;
		int rc;

		if (cpr == NULL || strncmp(cs->cs_name, "provider ", 9) != 0) {
			continue;
		}
		p = realloc(cf->cf_providers, (cf->cf_n_providers + 1) * sizeof(*p));
		if (p == NULL) {
			return -1;
		}
		cf->cf_providers = p;
		pc = &p[cf->cf_n_providers];
		memset(pc, 0, sizeof(*pc));
		rc = config_parse_provider(cf, cpr, cs, pc);
		for (j = 0; rc == 0 && j < cf->cf_n_providers; j++) {
			if (strcmp(p[j].pc_name, pc->pc_name) == 0) {
				log_err("config %s:%d: [%s]: provider \"%s\" is defined twice (also line %d)",
					config_file_name(cf), cs->cs_line, cs->cs_name, p[j].pc_name,
					p[j].pc_section->cs_line);
				rc = -1;
			}
		}
		if (rc < 0) {
			config_provider_finish(pc);
			cf->cf_problems++;
			continue;
		}
		cf->cf_n_providers++;
	}
	return 0;
}

static int config_demo_sections(struct config *cf)
{
	/* The demo: one Stripe instance with a published demo secret, the
	 * database under ./var, loopback only. */
	if (config_add_kv(cf, "server", "listen", "127.0.0.1:8080", 0) < 0 ||
	    config_add_kv(cf, "store", "path", "./var/idemhook.db", 0) < 0 ||
	    config_add_kv(cf, "provider stripe", "type", "stripe", 0) < 0 ||
	    config_add_kv(cf, "provider stripe", "secret", CONFIG_DEMO_STRIPE_SECRET, 0) < 0 ||
	    config_add_kv(cf, "demo", "enabled", "yes", 0) < 0) {
		return -1;
	}
	return 0;
}

static atomic_ullong config_serials; /* configs loaded so far: cf_serial */

struct config *config_load(const char *path)
{
	return config_load_with(path, NULL);
}

struct config *config_load_with(const char *path, const struct config_profiles *cpr)
{
	return config_load_opts(path, cpr, CONFIG_LOAD_SECRETS);
}

struct config *config_load_opts(const char *path, const struct config_profiles *cpr, unsigned flags)
{
	struct config *cf = calloc(1, sizeof(*cf));

	if (cf == NULL) {
		return NULL;
	}
	cf->cf_secrets = (flags & CONFIG_LOAD_SECRETS) != 0;
	if (path == NULL) {
		if (config_demo_sections(cf) < 0) {
			goto fail;
		}
	} else {
		cf->cf_path = strdup(path);
		if (cf->cf_path == NULL) {
			goto fail;
		}
		if (config_read_ini(cf, path) < 0) {
			goto fail;
		}
	}
	/* Every check runs, and every key and provider section is parsed
	 * whatever the others hold, so that one start shows every problem of
	 * the file; only running out of memory stops at once. */
	cf->cf_problems = config_check_known(cf, cpr) + config_check_repeats(cf) +
	                  config_check_secret_refs(cf);
	config_count(cf, config_get_bool(cf, "demo", "enabled", 0, &cf->cf_demo));
	if (config_parse_core(cf) < 0 || config_parse_providers(cf, cpr) < 0) {
		goto fail;
	}
	if (cf->cf_problems > 0 && !(flags & CONFIG_LOAD_PROBLEMS)) {
		goto fail;
	}
	cf->cf_serial = atomic_fetch_add(&config_serials, 1) + 1;
	return cf;
fail:
	config_destroy(cf);
	return NULL;
}

void config_destroy(struct config *cf)
{
	size_t i;
	size_t j;

	if (cf == NULL) {
		return;
	}
	for (i = 0; i < cf->cf_n_providers; i++) {
		config_provider_finish(&cf->cf_providers[i]);
	}
	free(cf->cf_providers);
	for (i = 0; i < cf->cf_n_sections; i++) {
		struct config_section *cs = &cf->cf_sections[i];

		for (j = 0; j < cs->cs_n; j++) {
			/* Values may be secrets: wipe before freeing. */
			explicit_bzero(cs->cs_kv[j].kv_value, strlen(cs->cs_kv[j].kv_value));
			free(cs->cs_kv[j].kv_key);
			free(cs->cs_kv[j].kv_value);
		}
		free(cs->cs_kv);
		free(cs->cs_name);
	}
	free(cf->cf_sections);
	free(cf->cf_listen_host);
	free(cf->cf_port_file);
	config_free_list(cf->cf_trusted_proxies);
	free(cf->cf_db_path);
	if (cf->cf_conninfo != NULL) {
		explicit_bzero(cf->cf_conninfo, strlen(cf->cf_conninfo));
		free(cf->cf_conninfo);
	}
	free(cf->cf_path);
	free(cf);
}

const struct provider_conf *config_provider(const struct config *cf, const char *name)
{
	size_t i;

	for (i = 0; i < cf->cf_n_providers; i++) {
		if (strcmp(cf->cf_providers[i].pc_name, name) == 0) {
			return &cf->cf_providers[i];
		}
	}
	return NULL;
}

const char *config_client_ca_file(const struct config *cf)
{
	return config_get(cf, "client", "ca_file");
}
