/* config.c: the INI configuration (inih), core sections and provider instances. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "provider.h"
#include "store.h"

#define CONFIG_SECRET_MAX (64 * 1024) /* bytes in one secret or key file */
#define CONFIG_RETENTION_DEFAULT_S (7 * 24 * 3600)

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

static int config_bad(const struct config *cf, const char *section, const char *key, const char *value,
		      const char *expect)
{
	char q[128];

	log_err("config %s: [%s] %s = \"%s\": expected %s", config_file_name(cf), section, key,
		log_quote(q, sizeof(q), value), expect);
	return -1;
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
		return config_bad(cf, section, key, v, "yes or no");
	}
	return 0;
}

static int config_read_file(const char *path, char **ret, size_t *ret_len)
{
	char *data = NULL;
	size_t len = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		log_err("cannot read secret file %s: %s", path, strerror(errno));
		return -1;
	}
	data = malloc(CONFIG_SECRET_MAX + 1);
	if (data == NULL) {
		goto fail;
	}
	for (;;) {
		ssize_t n = read(fd, data + len, CONFIG_SECRET_MAX + 1 - len);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			log_err("cannot read secret file %s: %s", path, strerror(errno));
			goto fail;
		}
		if (n == 0) {
			break;
		}
		len += (size_t)n;
		if (len > CONFIG_SECRET_MAX) {
			log_err("secret file %s is larger than %d bytes", path, CONFIG_SECRET_MAX);
			goto fail;
		}
	}
	close(fd);
	data[len] = '\0';
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
fail:
	close(fd);
	free(data);
	return -1;
}

int config_read_secret(const char *spec, char **ret, size_t *ret_len)
{
	char path[PATH_MAX];
	const char *dir;

	if (strncmp(spec, "file:", 5) == 0) {
		return config_read_file(spec + 5, ret, ret_len);
	}
	if (strncmp(spec, "credential:", 11) == 0) {
		dir = getenv("CREDENTIALS_DIRECTORY");
		if (dir == NULL) {
			log_err("secret %s: $CREDENTIALS_DIRECTORY is not set (use LoadCredential= in the unit)", spec);
			return -1;
		}
		if (strchr(spec + 11, '/') != NULL ||
		    snprintf(path, sizeof(path), "%s/%s", dir, spec + 11) >= (int)sizeof(path)) {
			log_err("secret %s: bad credential name", spec);
			return -1;
		}
		return config_read_file(path, ret, ret_len);
	}
	if (strncmp(spec, "env:", 4) == 0) {
		const char *v = getenv(spec + 4);

		if (v == NULL) {
			log_err("secret %s: environment variable is not set", spec);
			return -1;
		}
		*ret = strdup(v);
		if (*ret == NULL) {
			return -1;
		}
		*ret_len = strlen(v);
		return 0;
	}
	return config_read_file(spec, ret, ret_len);
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

static int config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
	int line = 0;
	struct config *cf = user;

	if (name == NULL) {
		/* A section header alone still declares the section. */
		if (config_section(cf, section) == NULL && config_add_section(cf, section) == NULL) {
			return 0;
		}
		return 1;
	}
	if (section[0] == '\0') {
		log_err("config %s: key \"%s\" outside any section", config_file_name(cf), name);
		return 0;
	}
	return config_add_kv(cf, section, name, value, line) == 0;
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
 * absent). */
static int config_parse_cidrs(struct config *cf, const char *section, const char *key, const char *v,
			      char ***ret)
{
	const char *cursor = v;
	const char *item;
	size_t len;
	size_t n = 0;
	char **list;

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
		if (http_cidr_match(list[n++], "127.0.0.1") < 0) {
			return config_bad(cf, section, key, list[n - 1], "CIDRs such as 192.0.2.0/24 or ::1/128");
		}
	}
	return 0;
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

static int config_parse_listen(struct config *cf, const char *section, char **ret_host, unsigned *ret_port)
{
	const char *v = config_get(cf, section, "listen");
	const char *colon;
	const char *end;
	uint64_t port;
	char *host;

	if (v == NULL) {
		return 0;
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

static int config_parse_core(struct config *cf)
{
	const char *v;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int64_t lease_s;

	cf->cf_listen_host = strdup("127.0.0.1");
	cf->cf_listen_port = 8080;
	cf->cf_db_path = strdup("./var/idemhook.db");
	if (cf->cf_listen_host == NULL || cf->cf_db_path == NULL) {
		return -1;
	}
	if (config_parse_listen(cf, "server", &cf->cf_listen_host, &cf->cf_listen_port) < 0 ||
	    config_get_uint(cf, "server", "threads", cores > 0 ? (unsigned)cores : 2, &cf->cf_threads) < 0 ||
	    config_get_uint(cf, "server", "connection_timeout", 30, &cf->cf_conn_timeout_s) < 0 ||
	    config_get_uint(cf, "server", "per_ip_connections", 64, &cf->cf_per_ip_limit) < 0 ||
	    config_get_size(cf, "server", "body_max", HTTP_BODY_MAX_DEFAULT, &cf->cf_body_max) < 0) {
		return -1;
	}
	if (cf->cf_threads == 0) {
		cf->cf_threads = cores > 0 ? (unsigned)cores : 2;
	}
	if (config_parse_cidrs(cf, "server", "trusted_proxies", config_get(cf, "server", "trusted_proxies"),
			       &cf->cf_trusted_proxies) < 0) {
		return -1;
	}
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
			return config_bad(cf, "store", "synchronous", v, "full, normal or off");
		}
	}
	if (config_get_uint(cf, "store", "batch_max", 256, &cf->cf_batch_max) < 0 ||
	    config_get_uint(cf, "store", "busy_timeout_ms", 5000, &cf->cf_busy_timeout_ms) < 0 ||
	    config_get_duration(cf, "store", "retention", CONFIG_RETENTION_DEFAULT_S, &cf->cf_retention_s) < 0 ||
	    config_get_duration(cf, "store", "lease", 60, &lease_s) < 0) {
		return -1;
	}
	if (cf->cf_batch_max == 0) {
		return config_bad(cf, "store", "batch_max", "0", "at least 1");
	}
	cf->cf_lease_s = lease_s > 0 ? lease_s : 60;
	return config_parse_points(cf);
}


int config_provider_allows(const struct provider_conf *pc, const char *client)
{
	size_t i;

	if (pc->pc_allow_from == NULL) {
		return 1;
	}
	for (i = 0; pc->pc_allow_from[i] != NULL; i++) {
		if (http_cidr_match(pc->pc_allow_from[i], client) == 1) {
			return 1;
		}
	}
	return 0;
}

static int config_parse_provider(struct config *cf, const struct config_section *cs, struct provider_conf *pc)
{
	const char *name = cs->cs_name + strlen("provider ");
	const char *type = config_section_get(cs, "type");
	const char *p;
	char q[128];
	int64_t v;

	while (*name == ' ') {
		name++;
	}
	if (*name == '\0') {
		log_err("config %s: [%s]: a provider section needs a name: [provider NAME]", config_file_name(cf),
			cs->cs_name);
		return -1;
	}
	for (p = name; *p != '\0'; p++) {
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_') {
			log_err("config %s: [%s]: provider names use letters, digits, '-' and '_'",
				config_file_name(cf), log_quote(q, sizeof(q), cs->cs_name));
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
	pc->pc_provider = provider_find(type);
	if (pc->pc_provider == NULL) {
		log_err("config %s: [%s] type = \"%s\": unknown provider type", config_file_name(cf), cs->cs_name,
			log_quote(q, sizeof(q), type));
		return -1;
	}
	if (config_get_duration(cf, cs->cs_name, "tolerance", 300, &pc->pc_tolerance_s) < 0 ||
	    config_get_duration(cf, cs->cs_name, "retention", cf->cf_retention_s, &v) < 0) {
		return -1;
	}
	pc->pc_retention_s = v;
	/* Provider key "capture": automatic (default) or manual, for profiles
	 * whose authorisation and capture are separate events. */
	p = config_section_get(cs, "capture");
	if (p != NULL) {
		if (strcmp(p, "manual") == 0 && pc->pc_provider->p_capture) {
			pc->pc_capture_manual = 1;
		} else if (strcmp(p, "automatic") != 0) {
			return config_bad(cf, cs->cs_name, "capture", p,
					  pc->pc_provider->p_capture ? "automatic or manual"
								     : "automatic (this type captures with the payment)");
		}
	}
	if (config_parse_cidrs(cf, cs->cs_name, "allow_from", config_section_get(cs, "allow_from"),
			       &pc->pc_allow_from) < 0) {
		return -1;
	}
	if (pc->pc_provider->p_create(pc, &pc->pc_state) < 0) {
		log_err("config %s: [%s]: provider configuration refused", config_file_name(cf), cs->cs_name);
		return -1;
	}
	if (pc->pc_retention_s < pc->pc_provider->p_retry_window_s) {
		log_warn("[%s]: retention %llds is shorter than %s's retry window of %llds: a late retry "
			 "could be processed again",
			 cs->cs_name, (long long)pc->pc_retention_s, pc->pc_provider->p_name,
			 (long long)pc->pc_provider->p_retry_window_s);
	}
	return 0;
}

static int config_parse_providers(struct config *cf)
{
	size_t i;
	size_t j;

	for (i = 0; i < cf->cf_n_sections; i++) {
		const struct config_section *cs = &cf->cf_sections[i];
		struct provider_conf *p;

		if (strncmp(cs->cs_name, "provider ", 9) != 0) {
			continue;
		}
		p = realloc(cf->cf_providers, (cf->cf_n_providers + 1) * sizeof(*p));
		if (p == NULL) {
			return -1;
		}
		cf->cf_providers = p;
		memset(&p[cf->cf_n_providers], 0, sizeof(*p));
		cf->cf_n_providers++;
		if (config_parse_provider(cf, cs, &p[cf->cf_n_providers - 1]) < 0) {
			return -1;
		}
		for (j = 0; j + 1 < cf->cf_n_providers; j++) {
			if (strcmp(p[j].pc_name, p[cf->cf_n_providers - 1].pc_name) == 0) {
				log_err("config %s: provider \"%s\" is defined twice", config_file_name(cf),
					p[j].pc_name);
				return -1;
			}
		}
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

struct config *config_load(const char *path)
{
	struct config *cf = calloc(1, sizeof(*cf));
	int rc;

	if (cf == NULL) {
		return NULL;
	}
	if (path == NULL) {
		if (config_demo_sections(cf) < 0) {
			goto fail;
		}
	} else {
		cf->cf_path = strdup(path);
		if (cf->cf_path == NULL) {
			goto fail;
		}
		rc = ini_parse(path, config_ini_handler, cf);
		if (rc < 0) {
			log_err("config %s: cannot open: %s", path, strerror(errno));
			goto fail;
		}
		if (rc > 0) {
			log_err("config %s:%d: cannot parse this line", path, rc);
			goto fail;
		}
	}
	if (config_get_bool(cf, "demo", "enabled", 0, &cf->cf_demo) < 0 || config_parse_core(cf) < 0 ||
	    config_parse_providers(cf) < 0) {
		goto fail;
	}
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
		struct provider_conf *pc = &cf->cf_providers[i];

		if (pc->pc_state != NULL && pc->pc_provider != NULL && pc->pc_provider->p_destroy != NULL) {
			pc->pc_provider->p_destroy(pc->pc_state);
		}
		config_free_list(pc->pc_allow_from);
		free(pc->pc_name);
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
