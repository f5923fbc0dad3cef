/* api.c: the order API: POST /api/orders with Idempotency-Key, GET
 * /api/orders[/{id}], bearer tokens, CORS and per-address rate limits. */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api.h"
#include "buf.h"
#include "crypto.h"
#include "env.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "money.h"
#include "orders.h"
#include "store.h"
#include "text.h"

#define API_JSON_DEPTH_MAX 16            /* nesting levels in a request body */
#define API_BODY_MAX_DEFAULT (64 * 1024) /* bytes; [api] body_max */
#define API_LINE_ITEMS_MAX 100
#define API_QUANTITY_MAX 100000
#define API_CLIENT_MAX 64 /* X-Client-Id and token names, characters */
#define API_TOKENS_MAX 64
#define API_ORIGINS_MAX 32
#define API_ORIGIN_MAX 256  /* characters of one configured origin */
#define API_RATE_DEFAULT 20 /* requests per second per client address */
#define API_BURST_DEFAULT 40
#define API_RATE_MAX 1000000 /* rate and burst are clamped to this */
#define API_RATE_SLOTS 1024  /* client addresses tracked at once */
#define API_RATE_PROBE 8
#define API_ADDR_MAX 64
#define API_LIST_MAX 100 /* orders in one GET /api/orders */
#define API_CLIENT_HEADER "X-Client-Id"
#define API_PROBLEM_TYPE "application/problem+json"
/* The detail of refusals said in several places: every problem has one. */
#define API_DETAIL_NO_ORDER "There is no order with this id that this client may read."
#define API_DETAIL_UNAVAILABLE                                                                     \
	"Nothing was kept; retry with the same key after Retry-After seconds."
#define API_DETAIL_UNREADABLE                                                                      \
	"The orders could not be read just now; retry after Retry-After seconds."

/* ---- settings of the [api] section, loaded once per config ---- */

struct api_token {
	char at_name[API_CLIENT_MAX + 1];
	char *at_secret;
	size_t at_len;
};

struct api_settings {
	const struct config *as_cf; /* the config these were read from */
	char *as_fingerprint;       /* the [api] section's text, to notice a reused address */
	int as_ok;                  /* 0 when the section is broken: the API answers 503 */
	struct api_token as_tokens[API_TOKENS_MAX];
	size_t as_n_tokens;
	char *as_origins[API_ORIGINS_MAX];
	size_t as_n_origins;
	size_t as_body_max;
	unsigned as_rate;
	unsigned as_burst;
	int as_reads_all; /* [api] order_reads = all: any client reads any order */
	int as_no_secrets; /* check only: token secrets are not read */
	int as_bad;        /* a token or origin line was refused (logged), the walk went on */
	int as_tokens_over;  /* past API_TOKENS_MAX: said once, the rest still checked */
	int as_origins_over; /* past API_ORIGINS_MAX: likewise */
	int as_any;          /* cors_origins = *: every origin, answered with "*" */
	int as_any_mixed;    /* "*" and other origins listed: said once */
	size_t as_n_named;   /* origins listed other than "*" */
};

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static struct api_settings api_set;

static void api_settings_clear(struct api_settings *as)
{
	size_t i;

	for (i = 0; i < as->as_n_tokens; i++) {
		if (as->as_tokens[i].at_secret != NULL) {
			explicit_bzero(as->as_tokens[i].at_secret, as->as_tokens[i].at_len);
			free(as->as_tokens[i].at_secret);
		}
	}
	for (i = 0; i < as->as_n_origins; i++) {
		free(as->as_origins[i]);
	}
	free(as->as_fingerprint);
	memset(as, 0, sizeof(*as));
}

static char *api_section_text(const struct config *cf)
{
	const struct config_section *cs = config_section(cf, "api");
	struct buf b;
	size_t i;

	buf_init(&b, 0);
	if (cs != NULL) {
		for (i = 0; i < cs->cs_n; i++) {
			if (buf_printf(&b, "%s=%s\n", cs->cs_kv[i].kv_key, cs->cs_kv[i].kv_value) <
			    0) {
				buf_finish(&b);
				return NULL;
			}
		}
	}
	return buf_take(&b, NULL);
}

static int api_client_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

static int api_client_valid(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > API_CLIENT_MAX) {
		return 0;
	}
	for (i = 0; i < len; i++) {
		if (!api_client_char(s[i])) {
			return 0;
		}
	}
	return 1;
}

/* The client name of a token given without one: the last part of its
 * secret reference ("credential:shop-web" and "file:/etc/x/shop-web" give
 * "shop-web"), so keys stay scoped to it across restarts. */
static size_t api_token_default_name(const char *spec, const char **ret_name)
{
	const char *p = spec;
	const char *c;

	c = strrchr(p, ':');
	if (c != NULL) {
		p = c + 1;
	}
	c = strrchr(p, '/');
	if (c != NULL) {
		p = c + 1;
	}
	*ret_name = p;
	return strlen(p);
}

static const char *api_cf_name(const struct api_settings *as)
{
	return as->as_cf != NULL && as->as_cf->cf_path != NULL ? as->as_cf->cf_path : "(demo)";
}

/* token = [NAME] SPEC, SPEC as config_read_secret takes it; NAME is the
 * client the token stands for. */
static int api_settings_token(void *arg, const char *value, int line)
{
	struct api_settings *as = arg;
	struct api_token *t;
	struct api_token scratch;
	const char *sp = strchr(value, ' ');
	const char *name = value;
	const char *spec = value;
	int over = as->as_n_tokens == API_TOKENS_MAX;
	char err[CONFIG_SECRET_ERR_MAX];
	size_t name_len;
	size_t i;

	if (over && !as->as_tokens_over) {
		log_err("config %s:%d: [api] token: more than %d tokens", api_cf_name(as), line,
		        API_TOKENS_MAX);
		as->as_tokens_over = 1;
	}
	if (over) {
		as->as_bad = 1; /* and the line is checked all the same, not kept */
	}
	if (sp != NULL) {
		name_len = (size_t)(sp - value);
		spec = sp;
		while (*spec == ' ') {
			spec++;
		}
	} else {
		name_len = api_token_default_name(value, &name);
	}
	/* A bad line is logged and the next one read (as_bad): every
	 * problem in one run. */
	if (!api_client_valid(name, name_len) || spec[0] == '\0') {
		log_err("config %s:%d: [api] token: expected [NAME] file:PATH, credential:NAME "
		        "or env:NAME "
		        "(NAME: 1 to 64 letters, digits, . _ -)",
		        api_cf_name(as), line);
		as->as_bad = 1;
		return 0;
	}
	memset(&scratch, 0, sizeof(scratch));
	t = over ? &scratch : &as->as_tokens[as->as_n_tokens];
	memcpy(t->at_name, name, name_len);
	t->at_name[name_len] = '\0';
	for (i = 0; i < as->as_n_tokens; i++) {
		if (strcmp(as->as_tokens[i].at_name, t->at_name) == 0) {
			log_err("config %s:%d: [api] token: client name \"%s\" used twice",
			        api_cf_name(as), line, t->at_name);
			as->as_bad = 1;
			return 0;
		}
	}
	if (as->as_no_secrets) {
		if (!over) {
			as->as_n_tokens++;
		}
		return 0;
	}
	if (config_read_secret(spec, &t->at_secret, &t->at_len, err, sizeof(err)) < 0) {
		log_err("config %s:%d: [api] token: %s cannot be read: %s", api_cf_name(as), line,
		        t->at_name, err);
		t->at_secret = NULL;
		as->as_bad = 1;
		return 0;
	}
	if (over) {
		explicit_bzero(t->at_secret, t->at_len);
		free(t->at_secret);
		return 0;
	}
	as->as_n_tokens++;
	if (t->at_len < 16) {
		log_warn("config: [api] token %s (line %d) is shorter than 16 bytes", t->at_name,
			 line);
	}
	return 0;
}

static int api_ascii_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int api_ascii_digit(char c)
{
	return c >= '0' && c <= '9';
}

static char api_ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* One configured origin, checked against what a browser sends in Origin
 * (the URL standard's serialization of an origin, RFC 6454): a lower-case
 * scheme, "://", a lower-case host (an IPv6 address in brackets), a port
 * only when it is not the scheme's default, and nothing after; or "*".
 * Returns 0 when p (n bytes, at most API_ORIGIN_MAX) is one; else -1 with
 * *ret_why a static sentence and ret_fix the origin to write instead, or
 * "" when no origin can be told. Anything else would match no request. */
static int api_origin_check(const char *p, size_t n, const char **ret_why,
                            char ret_fix[API_ORIGIN_MAX + 1])
{
	static const char shape[] =
	        "an origin is scheme://host or scheme://host:port, as the "
	        "browser's address bar shows the page (https://shop.example.com)";
	char fix[API_ORIGIN_MAX + 1];
	size_t f = 0;
	size_t i = 0;
	size_t scheme_end;
	size_t host;
	size_t port = 0;
	unsigned long port_value = 0;
	int port_default = 0;
	const char *why = NULL;

	ret_fix[0] = '\0';
	if (n == 1 && p[0] == '*') {
		return 0;
	}
	if (n == 4 && strncasecmp(p, "null", 4) == 0) {
		*ret_why =
		        "null is the origin of sandboxed frames and local files, and any page can "
		        "make its requests say it: it is never allowed";
		return -1;
	}
	while (i < n && (api_ascii_alpha(p[i]) ||
	                 (i > 0 && (api_ascii_digit(p[i]) || strchr("+.-", p[i]) != NULL)))) {
		i++;
	}
	if (i == 0 || n - i < 3 || memcmp(p + i, "://", 3) != 0) {
		*ret_why = shape;
		return -1;
	}
	scheme_end = i;
	i += 3;
	host = i;
	if (i < n && p[i] == '[') {
		while (++i < n && p[i] != ']') {
			if (!(api_ascii_digit(p[i]) ||
			      (api_ascii_lower(p[i]) >= 'a' && api_ascii_lower(p[i]) <= 'f') ||
			      p[i] == ':' || p[i] == '.')) {
				*ret_why = shape;
				return -1;
			}
		}
		if (i == n || i == host + 1) {
			*ret_why = shape;
			return -1;
		}
		i++;
	} else {
		while (i < n && (api_ascii_alpha(p[i]) || api_ascii_digit(p[i]) || p[i] == '.' ||
		                 p[i] == '-')) {
			i++;
		}
	}
	if (i < n && (unsigned char)p[i] >= 0x80) {
		*ret_why = "a browser sends a host name that is not ASCII in its ASCII form "
		           "(xn--...): write that";
		return -1;
	}
	if (i == host) {
		*ret_why = shape;
		return -1;
	}
	if (i < n && p[i] == '@') {
		*ret_why = "an origin has no user name or password: write scheme://host[:port] "
		           "alone";
		return -1;
	}
	memcpy(fix, p, i);
	for (f = 0; f < i; f++) {
		fix[f] = api_ascii_lower(fix[f]);
	}
	if (i < n && p[i] == ':') {
		port = ++i;
		while (i < n && api_ascii_digit(p[i])) {
			if (port_value <= 65535) {
				port_value = port_value * 10 + (unsigned long)(p[i] - '0');
			}
			i++;
		}
		if (port == i || port_value == 0 || port_value > 65535) {
			*ret_why = "a port is a number from 1 to 65535";
			return -1;
		}
		port_default =
		        (scheme_end == 5 && strncasecmp(p, "https", 5) == 0 && port_value == 443) ||
		        (scheme_end == 4 && strncasecmp(p, "http", 4) == 0 && port_value == 80);
		if (!port_default) {
			f += (size_t)snprintf(fix + f, sizeof(fix) - f, ":%lu", port_value);
		}
	}
	fix[f] = '\0';
	if (i < n && p[i] != '/' && p[i] != '?' && p[i] != '#') {
		*ret_why = shape;
		return -1;
	}
	if (i == n && f == n && memcmp(fix, p, n) == 0) {
		return 0;
	}
	if (i < n) {
		why = "an origin ends after the host or port: a browser never sends a path, a "
		      "query or a trailing slash in Origin";
	} else if (port_default) {
		why = "a browser leaves out the scheme's default port (443 for https, 80 for "
		      "http)";
	} else if (port != 0 && p[port] == '0') {
		why = "a browser writes the port without leading zeros";
	} else {
		why = "a browser sends the scheme and the host in lower case";
	}
	*ret_why = why;
	memcpy(ret_fix, fix, f + 1);
	return -1;
}

static int api_settings_origins(void *arg, const char *value, int line)
{
	struct api_settings *as = arg;
	const char *cursor = value;
	const char *p;
	size_t n;

	while ((p = config_list_next(&cursor, &n)) != NULL) {
		int over = as->as_n_origins == API_ORIGINS_MAX;
		char q[2 * API_ORIGIN_MAX + 8];
		char fix[API_ORIGIN_MAX + 1];
		const char *why = NULL;
		char *o;
		int star = n == 1 && p[0] == '*';

		if (over && !as->as_origins_over) {
			log_err("config %s:%d: [api] cors_origins: at most %d origins",
			        api_cf_name(as), line, API_ORIGINS_MAX);
			as->as_origins_over = 1;
		}
		if (over) {
			as->as_bad = 1; /* and each origin past it is checked, not kept */
		}
		if (n > API_ORIGIN_MAX) {
			/* Logged, and the next origin read. */
			log_err("config %s:%d: [api] cors_origins: \"%.32s...\" is longer than "
			        "%d characters",
			        api_cf_name(as), line, p, API_ORIGIN_MAX);
			as->as_bad = 1;
			continue;
		}
		if (api_origin_check(p, n, &why, fix) < 0) {
			o = strndup(p, n);
			log_err("config %s:%d: [api] cors_origins: \"%s\" is no origin to list: "
			        "%s%s%s%s",
			        api_cf_name(as), line,
			        o != NULL ? log_quote(q, sizeof(q), o) : "(out of memory)", why,
			        fix[0] != '\0' ? "; write \"" : "", fix,
			        fix[0] != '\0' ? "\"" : "");
			free(o);
			as->as_bad = 1; /* and the next origin read */
			continue;
		}
		/* "*" answers every origin alike (no list to match), so an
		 * origin beside it would mean nothing: said once, wherever. */
		if ((star ? as->as_n_named > 0 : as->as_any) && !as->as_any_mixed) {
			log_err("config %s:%d: [api] cors_origins: * allows every origin and is "
			        "not "
			        "listed with others: write cors_origins = * alone, or the origins "
			        "without *",
			        api_cf_name(as), line);
			as->as_any_mixed = 1;
			as->as_bad = 1;
		}
		if (over) {
			continue;
		}
		if (star) {
			as->as_any = 1;
		} else {
			as->as_n_named++;
		}
		as->as_origins[as->as_n_origins] = strndup(p, n);
		if (as->as_origins[as->as_n_origins] == NULL) {
			return -1;
		}
		as->as_n_origins++;
	}
	return 0;
}

/* [api] order_reads: own (default) or all; any other value is refused
 * by the configuration's load (config_check_order_reads), its one check,
 * and read here as own. */
static void api_settings_reads(struct api_settings *as, const struct config *cf)
{
	const char *v = config_get(cf, "api", "order_reads");

	as->as_reads_all = v != NULL && strcmp(v, "all") == 0;
}

/* Reads cf's [api] section into as, every key and every token and origin
 * line whatever the others hold. Returns 0, or -1 with each problem
 * logged (file, line, key). */
static int api_settings_read(struct api_settings *as, const struct config *cf)
{
	const struct config_section *cs = config_section(cf, "api");
	int rc = 0;

	as->as_cf = cf;
	as->as_bad = 0;
	as->as_tokens_over = 0;
	as->as_origins_over = 0;
	as->as_any = 0;
	as->as_any_mixed = 0;
	as->as_n_named = 0;
	as->as_fingerprint = api_section_text(cf);
	if (as->as_fingerprint == NULL) {
		goto fail;
	}
	if (config_get_size(cf, "api", "body_max", API_BODY_MAX_DEFAULT, &as->as_body_max) < 0) {
		rc = -1;
	}
	if (config_get_uint(cf, "api", "rate", API_RATE_DEFAULT, &as->as_rate) < 0) {
		rc = -1;
	}
	if (config_get_uint(cf, "api", "burst", API_BURST_DEFAULT, &as->as_burst) < 0) {
		rc = -1;
	}
	api_settings_reads(as, cf);
	/* Bounds that keep the bucket arithmetic far from overflow. */
	if (as->as_rate > API_RATE_MAX) {
		as->as_rate = API_RATE_MAX;
	}
	if (as->as_burst > API_RATE_MAX) {
		as->as_burst = API_RATE_MAX;
	}
	if (as->as_burst == 0) {
		as->as_burst = 1;
	}
	if (cs != NULL && config_section_each(cs, "token", api_settings_token, as) != 0) {
		rc = -1;
	}
	if (cs != NULL && config_section_each(cs, "cors_origins", api_settings_origins, as) != 0) {
		rc = -1;
	}
	if (rc < 0 || as->as_bad) {
		goto fail;
	}
	return 0;
fail:
	return -1;
}

static int api_settings_load(struct api_settings *as, const struct config *cf)
{
	if (api_settings_read(as, cf) < 0) {
		log_err("api: the [api] section is unusable; the order API answers 503 until it is "
		        "fixed");
		as->as_ok = 0;
		return -1;
	}
	as->as_ok = 1;
	return 0;
}

int api_config_check(const struct config *cf, int read_secrets)
{
	struct api_settings *as = calloc(1, sizeof(*as));
	int rc;

	if (as == NULL) {
		return -1;
	}
	as->as_no_secrets = !read_secrets;
	rc = api_settings_read(as, cf);
	api_settings_clear(as);
	free(as);
	return rc;
}

/* Makes api_set describe cf. Called with api_lock held. */
static void api_settings_ensure(const struct config *cf)
{
	char *text;
	int same;

	if (api_set.as_cf == cf && api_set.as_fingerprint != NULL) {
		/* A new config can be allocated where an old one was freed: the
		 * section text tells them apart in all but the rarest case. */
		text = api_section_text(cf);
		same = text != NULL && strcmp(text, api_set.as_fingerprint) == 0;
		free(text);
		if (same) {
			return;
		}
	}
	api_settings_clear(&api_set);
	api_settings_load(&api_set, cf);
}

/* ---- rate limits ---- */

struct api_bucket {
	char ab_addr[API_ADDR_MAX];
	int64_t ab_milli; /* tokens x 1000 */
	int64_t ab_last_ms;
};

static struct api_bucket api_buckets[API_RATE_SLOTS];

static uint32_t api_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

/* Called with api_lock held. */
static int api_rate_take(unsigned rate, unsigned burst, const char *client, int64_t now_ms,
			 int64_t *ret_retry_after_s)
{
	struct api_bucket *b = NULL;
	struct api_bucket *oldest = NULL;
	uint32_t h;
	int64_t cap;
	size_t i;

	if (rate == 0) {
		return 1;
	}
	if (client == NULL || strlen(client) >= API_ADDR_MAX) {
		client = "?";
	}
	h = api_hash(client);
	for (i = 0; i < API_RATE_PROBE; i++) {
		struct api_bucket *c = &api_buckets[(h + i) % API_RATE_SLOTS];

		if (strcmp(c->ab_addr, client) == 0) {
			b = c;
			break;
		}
		if (oldest == NULL || c->ab_last_ms < oldest->ab_last_ms) {
			oldest = c;
		}
	}
	cap = (int64_t)burst * 1000;
	if (b == NULL) {
		/* A new address (or one evicted by the least recently seen
		 * rule) starts with a full bucket. */
		b = oldest;
		memset(b, 0, sizeof(*b));
		memcpy(b->ab_addr, client, strlen(client) + 1);
		b->ab_milli = cap;
		b->ab_last_ms = now_ms;
	}
	if (now_ms > b->ab_last_ms) {
		int64_t elapsed = now_ms - b->ab_last_ms;
		int64_t add = elapsed >= cap ? cap : elapsed * (int64_t)rate;

		b->ab_milli = add > cap - b->ab_milli ? cap : b->ab_milli + add;
		b->ab_last_ms = now_ms;
	}
	if (b->ab_milli >= 1000) {
		b->ab_milli -= 1000;
		return 1;
	}
	*ret_retry_after_s = ((1000 - b->ab_milli) / (int64_t)rate + 999) / 1000;
	if (*ret_retry_after_s < 1) {
		*ret_retry_after_s = 1;
	}
	return 0;
}

int api_rate_allow(const struct config *cf, const char *client, int64_t now_ms,
		   int64_t *ret_retry_after_s)
{
	int rc;

	pthread_mutex_lock(&api_lock);
	api_settings_ensure(cf);
	rc = api_rate_take(api_set.as_rate, api_set.as_burst, client, now_ms, ret_retry_after_s);
	pthread_mutex_unlock(&api_lock);
	return rc;
}

/* ---- Idempotency-Key ---- */

static int api_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~:/", c) != NULL);
}

int api_idempotency_key_parse(const char *value, char ret_key[API_KEY_MAX + 1])
{
	char key[API_KEY_MAX + 1];
	size_t n = 0;
	const char *p;
	const char *end;

	if (value == NULL) {
		return -1;
	}
	p = value;
	while (*p == ' ' || *p == '\t') {
		p++;
	}
	end = p + strlen(p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t')) {
		end--;
	}
	if (p < end && *p == '"') {
		/* sf-string: printable ASCII, only \" and \\ escaped. */
		p++;
		for (;;) {
			char c;

			if (p >= end) {
				return -1;
			}
			c = *p++;
			if (c == '"') {
				break;
			}
			if (c == '\\') {
				if (p >= end || (*p != '"' && *p != '\\')) {
					return -1;
				}
				c = *p++;
			} else if (c < 0x20 || c > 0x7e) {
				return -1;
			}
			if (n == API_KEY_MAX) {
				return -1;
			}
			key[n++] = c;
		}
		if (p != end) {
			return -1; /* parameters, a list or trailing bytes */
		}
	} else {
		for (; p < end; p++) {
			if (!api_tchar(*p) || n == API_KEY_MAX) {
				return -1;
			}
			key[n++] = *p;
		}
	}
	if (n == 0) {
		return -1;
	}
	key[n] = '\0';
	memcpy(ret_key, key, n + 1);
	return 0;
}

/* ---- Accept ---- */

/* An RFC 9110 qvalue ("0", "0.5", "1.000") of n bytes in thousandths:
 * 0 with *ret set, or -1. */
static int api_qvalue(const char *p, size_t n, int *ret)
{
	static const int scale[] = {100, 10, 1};
	int q;
	size_t i;

	if (n == 0 || (p[0] != '0' && p[0] != '1') || n > 5 || (n > 1 && p[1] != '.')) {
		return -1;
	}
	q = (p[0] - '0') * 1000;
	for (i = 2; i < n; i++) {
		if (!api_ascii_digit(p[i])) {
			return -1;
		}
		q += (p[i] - '0') * scale[i - 2];
	}
	if (q > 1000) {
		return -1;
	}
	*ret = q;
	return 0;
}

/* How specifically the media range r (n bytes) names type ("text/html"):
 * 3 the type itself, 2 its major type with any subtype ("text" and "*"),
 * 1 any type ("*" and "*"), 0 not at all. */
static int api_accept_rank(const char *r, size_t n, const char *type)
{
	size_t major = strcspn(type, "/");

	if (n == strlen(type) && strncasecmp(r, type, n) == 0) {
		return 3;
	}
	if (n == major + 2 && strncasecmp(r, type, major + 1) == 0 && r[major + 1] == '*') {
		return 2;
	}
	return n == 3 && memcmp(r, "*/*", 3) == 0 ? 1 : 0;
}

/* Past the element of an Accept value at p, to its "," or the end,
 * stepping over quoted strings. */
static const char *api_accept_skip(const char *p)
{
	int quoted = 0;

	for (; *p != '\0' && (quoted || *p != ','); p++) {
		if (quoted && *p == '\\' && p[1] != '\0') {
			p++;
		} else if (*p == '"') {
			quoted = !quoted;
		}
	}
	return p;
}

/* One element of an Accept value at p: its media range's rank for type
 * and its weight (1000 without q=). Returns 0, or -1 when the element is
 * not one RFC 9110 reads (it then counts for nothing). */
static int api_accept_element(const char *p, const char *end, const char *type, int *ret_rank,
                              int *ret_q)
{
	size_t n = strcspn(p, " \t;,");
	int q = 1000;
	int weighed = 0;

	if (p + n > end || memchr(p, '/', n) == NULL) {
		return -1;
	}
	*ret_rank = api_accept_rank(p, n, type);
	p += n;
	for (;;) {
		const char *name;
		size_t name_len;
		const char *value;

		p += strspn(p, " \t");
		if (p >= end) {
			break;
		}
		if (*p != ';') {
			return -1;
		}
		p++;
		p += strspn(p, " \t");
		name = p;
		name_len = strcspn(p, " \t;,=\"");
		p += name_len;
		if (name_len == 0 || p >= end || *p != '=') {
			return -1;
		}
		value = ++p;
		if (*p == '"') {
			/* A quoted-string: to its closing quote, past escapes. */
			while (*++p != '"') {
				if (*p == '\\' && p[1] != '\0') {
					p++;
				}
				if (*p == '\0' || p >= end) {
					return -1;
				}
			}
			p++;
			continue;
		}
		p += strcspn(p, " \t;,");
		/* The first q is the weight; parameters before it belong to
		 * the media range, which this does not read. */
		if (name_len == 1 && (name[0] == 'q' || name[0] == 'Q') && !weighed) {
			if (api_qvalue(value, (size_t)(p - value), &q) < 0) {
				return -1;
			}
			weighed = 1;
		}
	}
	*ret_q = q;
	return 0;
}

int api_accept_quality(const struct http_request *req, const char *type, int *ret_rank)
{
	int best_q = 0;
	int best_rank = 0;
	int seen = 0;
	size_t i;

	for (i = 0; i < req->hr_n_headers; i++) {
		const char *p = req->hr_headers[i].hh_value;

		if (strcasecmp(req->hr_headers[i].hh_name, "Accept") != 0) {
			continue;
		}
		seen = 1;
		while (*p != '\0') {
			const char *end;
			int rank = 0;
			int q = 0;

			p += strspn(p, " \t,");
			if (*p == '\0') {
				break;
			}
			end = api_accept_skip(p);
			if (api_accept_element(p, end, type, &rank, &q) == 0 && rank > 0 &&
			    (rank > best_rank || (rank == best_rank && q > best_q))) {
				best_rank = rank;
				best_q = q;
			}
			p = end;
		}
	}
	if (!seen) {
		/* No Accept: any type will do (RFC 9110 12.5.1). */
		*ret_rank = 0;
		return 1000;
	}
	*ret_rank = best_rank;
	return best_q;
}

/* ---- canonical JSON ---- */

static int api_canon_value(struct buf *b, const cJSON *v, int depth);

static int api_canon_cmp(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a;
	const cJSON *y = *(const cJSON *const *)b;

	return strcmp(x->string, y->string);
}

static int api_canon_number(struct buf *b, double d)
{
	if (!isfinite(d)) {
		return -1;
	}
	/* Integers print as integers (1, 1.0 and 1e0 are one value); -0 is 0. */
	if (d == floor(d) && fabs(d) < 9007199254740992.0) {
		return buf_printf(b, "%lld", (long long)d);
	}
	return buf_printf(b, "%.17g", d);
}

static int api_canon_object(struct buf *b, const cJSON *v, int depth)
{
	const cJSON **kids = NULL;
	const cJSON *c;
	size_t n = 0;
	size_t i;

	for (c = v->child; c != NULL; c = c->next) {
		n++;
	}
	if (n > 0) {
		kids = calloc(n, sizeof(*kids));
		if (kids == NULL) {
			goto fail;
		}
	}
	i = 0;
	for (c = v->child; c != NULL; c = c->next) {
		if (c->string == NULL) {
			goto fail;
		}
		kids[i++] = c;
	}
	if (n > 1) {
		qsort(kids, n, sizeof(*kids), api_canon_cmp);
	}
	if (buf_puts(b, "{") < 0) {
		goto fail;
	}
	for (i = 0; i < n; i++) {
		if (i > 0 && strcmp(kids[i - 1]->string, kids[i]->string) == 0) {
			goto fail; /* a duplicate key has no single meaning */
		}
		if ((i > 0 && buf_puts(b, ",") < 0) || buf_json_string(b, kids[i]->string) < 0 ||
		    buf_puts(b, ":") < 0 || api_canon_value(b, kids[i], depth + 1) < 0) {
			goto fail;
		}
	}
	if (buf_puts(b, "}") < 0) {
		goto fail;
	}
	free(kids);
	return 0;
fail:
	free(kids);
	return -1;
}

static int api_canon_value(struct buf *b, const cJSON *v, int depth)
{
	const cJSON *c;

	if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && depth > API_JSON_DEPTH_MAX) {
		return -1;
	}
	if (cJSON_IsNull(v)) {
		return buf_puts(b, "null");
	}
	if (cJSON_IsTrue(v)) {
		return buf_puts(b, "true");
	}
	if (cJSON_IsFalse(v)) {
		return buf_puts(b, "false");
	}
	if (cJSON_IsNumber(v)) {
		return api_canon_number(b, v->valuedouble);
	}
	if (cJSON_IsString(v)) {
		return buf_json_string(b, v->valuestring);
	}
	if (cJSON_IsArray(v)) {
		if (buf_puts(b, "[") < 0) {
			return -1;
		}
		for (c = v->child; c != NULL; c = c->next) {
			if ((c != v->child && buf_puts(b, ",") < 0) ||
			    api_canon_value(b, c, depth + 1) < 0) {
				return -1;
			}
		}
		return buf_puts(b, "]");
	}
	if (cJSON_IsObject(v)) {
		return api_canon_object(b, v, depth);
	}
	return -1;
}

static int api_canon_tree(const cJSON *root, char **ret, size_t *ret_len)
{
	struct buf b;
	char *out;

	buf_init(&b, 0);
	if (api_canon_value(&b, root, 1) < 0) {
		goto fail;
	}
	out = buf_take(&b, ret_len);
	if (out == NULL) {
		goto fail;
	}
	*ret = out;
	return 0;
fail:
	buf_finish(&b);
	return -1;
}

static cJSON *api_json_parse(const void *json, size_t len)
{
	return json_parse_strict(json, len, NULL);
}

int api_canonical_json(const void *json, size_t len, char **ret, size_t *ret_len)
{
	cJSON *root = api_json_parse(json, len);
	int rc;

	if (root == NULL) {
		return -1;
	}
	rc = api_canon_tree(root, ret, ret_len);
	cJSON_Delete(root);
	return rc;
}

int api_fingerprint(const void *json, size_t len, unsigned char ret[32])
{
	char *canon = NULL;
	size_t canon_len = 0;

	if (api_canonical_json(json, len, &canon, &canon_len) < 0) {
		return -1;
	}
	crypto_sha256(canon, canon_len, ret);
	free(canon);
	return 0;
}

/* ---- small helpers ---- */

/* The outcome names api_claim_account counts: a finished claim ends as
 * one of the first five (STORE_NEW .. STORE_TRANSIENT). */
static const char *const api_outcome_names[] = {
        [STORE_NEW] = "new",
        [STORE_REPLAYED] = "replayed",
        [STORE_MISMATCH] = "mismatch",
        [STORE_IN_PROGRESS] = "in_progress",
        [STORE_TRANSIENT] = "transient",
        [STORE_CLAIMED] = "claimed",
};

void api_metrics_declare(void)
{
	const char *outcomes[STORE_TRANSIENT + 2];
	size_t i;

	for (i = 0; i <= STORE_TRANSIENT; i++) {
		outcomes[i] = api_outcome_names[i];
	}
	outcomes[i] = NULL;
	metrics_declare_provider("api:orders", outcomes, NULL);
	metrics_declare_provider("api:checkout", outcomes, NULL);
}

void api_claim_account(const char *label, const char *client, const char *key,
		       enum store_outcome outcome, int status, int64_t t0_ms, int64_t now_ms)
{
	const char *const *names = api_outcome_names;
	const char *name =
	        (size_t)outcome < sizeof(api_outcome_names) / sizeof(api_outcome_names[0])
	                ? names[outcome]
	                : "transient";
	int64_t elapsed = now_ms - t0_ms;
	char qclient[API_CLIENT_MAX + 8];
	char qkey[80];

	if (outcome == STORE_REPLAYED) {
		metrics_duplicate(label);
	} else if (outcome == STORE_MISMATCH) {
		metrics_mismatch(label);
	}
	metrics_request(label, name, (double)elapsed / 1000.0);
	log_info("%s client=\"%s\" key=\"%s\" outcome=%s status=%d latency_ms=%lld", label,
		 log_quote(qclient, sizeof(qclient), client), log_quote(qkey, sizeof(qkey), key),
		 name, status, (long long)elapsed);
}

void api_format_time(int64_t ms, char out[32])
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char day[24];

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(out, 32, "%lld", (long long)ms);
		return;
	}
	snprintf(out, 32, "%s.%03dZ", day, (int)(ms % 1000));
}

int api_order_id_valid(const char *id)
{
	size_t n = strlen(id);
	size_t i;

	if (n < 5 || n > ORDERS_ID_LEN || strncmp(id, "ord_", 4) != 0) {
		return 0;
	}
	for (i = 4; i < n; i++) {
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9'))) {
			return 0;
		}
	}
	return 1;
}

static void api_copy(char *dst, size_t dst_size, const char *src)
{
	size_t n = src != NULL ? strlen(src) : 0;

	if (n >= dst_size) {
		n = dst_size - 1;
	}
	if (n > 0) {
		memcpy(dst, src, n);
	}
	dst[n] = '\0';
}

#define API_ORDER_COLUMNS                                                                          \
	"id, status, amount, currency, refunded_amount, customer_ref, fulfillment_status, "        \
	"created_at, "                                                                             \
	"paid_at, refunded_at, (SELECT COALESCE(SUM(points), 0) FROM points_ledger "               \
	"WHERE points_ledger.order_id = orders.id)"

static void api_order_from_row(const struct store_row *row, struct api_order *o)
{
	memset(o, 0, sizeof(*o));
	api_copy(o->ao_id, sizeof(o->ao_id), store_row_text(row, 0));
	api_copy(o->ao_status, sizeof(o->ao_status), store_row_text(row, 1));
	o->ao_amount = store_row_int(row, 2);
	api_copy(o->ao_currency, sizeof(o->ao_currency), store_row_text(row, 3));
	o->ao_refunded = store_row_int(row, 4);
	api_copy(o->ao_customer_ref, sizeof(o->ao_customer_ref), store_row_text(row, 5));
	api_copy(o->ao_fulfillment, sizeof(o->ao_fulfillment), store_row_text(row, 6));
	o->ao_created_ms = store_row_int(row, 7);
	o->ao_paid_ms = store_row_int(row, 8);
	o->ao_refunded_ms = store_row_int(row, 9);
	o->ao_points = store_row_int(row, 10);
}

/* Whose orders a GET may show through the API. */
struct api_reader {
	const char *ar_client; /* only this client's; NULL: every order (order_reads = all) */
	int ar_ownerless;      /* also those no API client created (no tokens configured) */
};

#define API_OWNED_BY "(owner = ? OR (? = 1 AND owner IS NULL))"

struct api_load {
	const char *al_id;
	const struct api_reader *al_reader; /* NULL: any order */
	struct api_order *al_order;
};

static int api_order_load_tx(struct store_tx *tx, void *arg)
{
	struct api_load *al = arg;
	struct store_value p[3];
	struct store_row row;
	int rc;

	p[0] = store_text(al->al_id);
	if (al->al_reader == NULL || al->al_reader->ar_client == NULL) {
		rc = store_query(tx, "SELECT " API_ORDER_COLUMNS " FROM orders WHERE id = ?", p, 1,
				 &row);
	} else {
		p[1] = store_text(al->al_reader->ar_client);
		p[2] = store_int(al->al_reader->ar_ownerless);
		rc = store_query(tx,
				 "SELECT " API_ORDER_COLUMNS
				 " FROM orders WHERE id = ? AND " API_OWNED_BY,
				 p, 3, &row);
	}
	if (rc == 1) {
		api_order_from_row(&row, al->al_order);
		store_row_finish(&row);
	}
	return rc;
}

int api_order_load(struct store *st, int64_t now_ms, const char *id, struct api_order *ret)
{
	struct api_order o;
	struct api_load al = {.al_id = id, .al_order = &o};
	int rc;

	rc = store_read(st, now_ms, api_order_load_tx, &al);
	if (rc == 1) {
		*ret = o;
	}
	return rc;
}

static int api_order_json(struct buf *b, const struct api_order *o)
{
	char t[32];

	if (buf_puts(b, "{\"id\":") < 0 || buf_json_string(b, o->ao_id) < 0 ||
	    buf_puts(b, ",\"status\":") < 0 || buf_json_string(b, o->ao_status) < 0 ||
	    buf_printf(b, ",\"amount\":%lld,\"currency\":", (long long)o->ao_amount) < 0 ||
	    buf_json_string(b, o->ao_currency) < 0 ||
	    buf_printf(b, ",\"refunded_amount\":%lld,\"points\":%lld,\"fulfillment_status\":",
		       (long long)o->ao_refunded, (long long)o->ao_points) < 0 ||
	    buf_json_string(b, o->ao_fulfillment) < 0 || buf_puts(b, ",\"customer_ref\":") < 0) {
		return -1;
	}
	if (o->ao_customer_ref[0] != '\0' ? buf_json_string(b, o->ao_customer_ref) < 0
					  : buf_puts(b, "null") < 0) {
		return -1;
	}
	api_format_time(o->ao_created_ms, t);
	if (buf_printf(b, ",\"created_at\":\"%s\",\"paid_at\":", t) < 0) {
		return -1;
	}
	api_format_time(o->ao_paid_ms, t);
	if (buf_printf(b, o->ao_paid_ms != 0 ? "\"%s\"" : "null", t) < 0 ||
	    buf_puts(b, ",\"refunded_at\":") < 0) {
		return -1;
	}
	api_format_time(o->ao_refunded_ms, t);
	if (buf_printf(b, o->ao_refunded_ms != 0 ? "\"%s\"" : "null", t) < 0) {
		return -1;
	}
	return buf_puts(b, "}");
}

static int api_problem(struct reply *ret, int status, const char *slug, const char *title,
		       const char *detail)
{
	return reply_problem(ret, status, slug, title, detail);
}

/* 405, the methods the resource allows in Allow and in the detail. */
void api_method_not_allowed(struct reply *ret, const char *allow)
{
	char detail[API_DETAIL_MAX];

	snprintf(detail, sizeof(detail), "This resource allows %s (the Allow header).", allow);
	api_problem(ret, 405, "method_not_allowed", "Method not allowed", detail);
	reply_add_header(ret, "Allow", allow);
}

/* 400 for a field that may come once and came on several lines (RFC 9110
 * 5.3): neither line is taken over the other, identical or not. */
static void api_repeated(struct reply *ret, const char *field)
{
	char detail[API_DETAIL_MAX];

	snprintf(detail, sizeof(detail), "Send the %s header once.", field);
	api_problem(ret, 400, "repeated_header", "Header field repeated", detail);
}

static int api_retry_after(struct reply *ret, int64_t seconds)
{
	char v[24];

	snprintf(v, sizeof(v), "%lld", (long long)(seconds < 1 ? 1 : seconds));
	return reply_add_header(ret, "Retry-After", v);
}

static int api_reply_json(struct reply *ret, int status, struct buf *b)
{
	size_t len = 0;
	char *body = buf_puts(b, "\n") == 0 ? buf_take(b, &len) : NULL;

	if (body == NULL || reply_set_take(ret, status, "application/json", body, len) < 0) {
		free(body);
		return -1;
	}
	return 0;
}

/* ---- POST /api/orders ---- */

struct api_create {
	struct api_order_body ac_body;
	const char *ac_owner;          /* the client, who may read the order back */
	char ac_id[ORDERS_ID_LEN + 1]; /* out */
};

static int api_json_int(const cJSON *v, int64_t min, int64_t max, int64_t *ret)
{
	double d;

	if (!cJSON_IsNumber(v)) {
		return -1;
	}
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d) || d < (double)min || d > (double)max) {
		return -1;
	}
	*ret = (int64_t)d;
	return 0;
}

static int api_text_ok(const cJSON *v)
{
	return cJSON_IsString(v) && text_field_ok(v->valuestring, API_TEXT_MAX);
}

int api_order_fields_check(int64_t amount, const char *currency, const char *customer_ref,
                           char ret_currency[4], const char **ret_detail)
{
	char cur[4];

	if (amount < 1 || amount > MONEY_MAX_MINOR) {
		*ret_detail =
		        "amount must be a positive whole number of minor units (1999 for 19.99).";
		return -1;
	}
	if (currency == NULL || money_currency_normalize(currency, cur) < 0) {
		*ret_detail = "currency must be an ISO 4217 currency code, such as EUR or usd.";
		return -1;
	}
	if (customer_ref != NULL && !text_field_ok(customer_ref, API_TEXT_MAX)) {
		*ret_detail = "customer_ref must be a string of 1 to 128 bytes of UTF-8 without "
		              "control characters.";
		return -1;
	}
	memcpy(ret_currency, cur, sizeof(cur));
	return 0;
}

static int api_only_keys(const cJSON *obj, const char *const *keys, const char **ret_bad)
{
	const cJSON *c;
	size_t i;

	for (c = obj->child; c != NULL; c = c->next) {
		int ok = 0;

		for (i = 0; keys[i] != NULL; i++) {
			if (strcmp(c->string, keys[i]) == 0) {
				ok = 1;
			}
		}
		if (!ok) {
			*ret_bad = c->string;
			return -1;
		}
	}
	return 0;
}

/* Validates the order body; on refusal *ret_detail says why (static), and
 * *ret_unknown names the field when it is one the API does not know. */
static int api_create_parse(const cJSON *root, struct api_order_body *ob, const char **ret_detail,
                            const char **ret_unknown)
{
	static const char *const top_keys[] = {"amount", "currency", "customer_ref", "line_items",
					       NULL};
	static const char *const item_keys[] = {"sku", "name", "quantity", "unit_amount", NULL};
	const cJSON *items;
	const cJSON *it;
	const char *bad = NULL;
	const char *currency;
	const char *ref;
	int64_t sum = 0;
	size_t n = 0;

	if (!cJSON_IsObject(root)) {
		*ret_detail = "The body must be a JSON object.";
		return -1;
	}
	if (api_only_keys(root, top_keys, &bad) < 0) {
		*ret_detail = "allowed: amount, currency, customer_ref, line_items.";
		*ret_unknown = bad;
		return -1;
	}
	/* The JSON types here, the rules in api_order_fields_check (the CLI's
	 * too): a number that is no whole amount counts as 0 and a
	 * customer_ref that is no string as "", both refused there. */
	if (api_json_int(cJSON_GetObjectItemCaseSensitive(root, "amount"), 0, MONEY_MAX_MINOR,
	                 &ob->ob_amount) < 0) {
		ob->ob_amount = 0;
	}
	it = cJSON_GetObjectItemCaseSensitive(root, "currency");
	currency = cJSON_IsString(it) ? it->valuestring : NULL;
	it = cJSON_GetObjectItemCaseSensitive(root, "customer_ref");
	ref = it == NULL || cJSON_IsNull(it) ? NULL : cJSON_IsString(it) ? it->valuestring : "";
	if (api_order_fields_check(ob->ob_amount, currency, ref, ob->ob_currency, ret_detail) < 0) {
		return -1;
	}
	if (ref != NULL) {
		api_copy(ob->ob_customer_ref, sizeof(ob->ob_customer_ref), ref);
		ob->ob_has_customer_ref = 1;
	}
	items = cJSON_GetObjectItemCaseSensitive(root, "line_items");
	if (items == NULL || cJSON_IsNull(items)) {
		return 0;
	}
	if (!cJSON_IsArray(items)) {
		*ret_detail = "line_items must be an array.";
		return -1;
	}
	cJSON_ArrayForEach(it, items)
	{
		const cJSON *sku = cJSON_GetObjectItemCaseSensitive(it, "sku");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
		int64_t qty;
		int64_t unit;

		if (++n > API_LINE_ITEMS_MAX) {
			*ret_detail = "At most 100 line items.";
			return -1;
		}
		if (!cJSON_IsObject(it)) {
			*ret_detail = "Each line item is an object with sku, name, quantity and "
				      "unit_amount.";
			return -1;
		}
		if (api_only_keys(it, item_keys, &bad) < 0) {
			*ret_detail = "a line item has sku, name, quantity and unit_amount.";
			*ret_unknown = bad;
			return -1;
		}
		if ((sku == NULL && name == NULL) || (sku != NULL && !api_text_ok(sku)) ||
		    (name != NULL && !api_text_ok(name))) {
			*ret_detail =
				"Each line item needs a sku or a name (strings of 1 to 128 bytes).";
			return -1;
		}
		if (api_json_int(cJSON_GetObjectItemCaseSensitive(it, "quantity"), 1,
				 API_QUANTITY_MAX, &qty) < 0 ||
		    api_json_int(cJSON_GetObjectItemCaseSensitive(it, "unit_amount"), 0,
				 MONEY_MAX_MINOR, &unit) < 0) {
			*ret_detail = "Each line item needs a whole quantity (1 to 100000) and a "
				      "unit_amount in minor units.";
			return -1;
		}
		if (unit != 0 && qty > (MONEY_MAX_MINOR - sum) / unit) {
			*ret_detail = "The line items add up to more than any order can hold.";
			return -1;
		}
		sum += qty * unit;
	}
	if (n > 0 && sum != ob->ob_amount) {
		*ret_detail =
			"amount must equal the sum of quantity x unit_amount over line_items.";
		return -1;
	}
	return 0;
}

/* "Unknown field \"NAME\"; ALLOWED" into out, NAME cut to 64 bytes at a
 * character boundary (the reader passed only UTF-8). */
static void api_unknown_detail(char out[API_DETAIL_MAX], const char *name, const char *allowed)
{
	size_t n = strlen(name);

	if (n > 64) {
		n = 64;
		while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80) {
			n--;
		}
	}
	snprintf(out, API_DETAIL_MAX, "Unknown field \"%.*s\"%s; %s", (int)n, name,
	         n < strlen(name) ? "..." : "", allowed);
}

int api_order_body_parse(const void *body, size_t len, struct api_order_body *ret,
                         const char **ret_slug, char ret_detail[API_DETAIL_MAX])
{
	struct api_order_body ob;
	char *canon = NULL;
	size_t canon_len = 0;
	const char *why = NULL;
	const char *detail = NULL;
	const char *unknown = NULL;
	cJSON *root;
	int rc = -1;

	memset(&ob, 0, sizeof(ob));
	*ret_slug = "malformed_json";
	root = json_parse_strict(body, len, &why);
	if (root == NULL) {
		/* The reader's reason, as a client can act on it; none when it
		 * ran out of memory, which is no fault of the body. */
		if (why == NULL || strcmp(why, "out of memory") == 0) {
			snprintf(ret_detail, API_DETAIL_MAX, "The body could not be read as JSON.");
		} else {
			snprintf(ret_detail, API_DETAIL_MAX,
			         "The body is not one JSON value this API reads: %s.", why);
		}
		goto done;
	}
	if (api_canon_tree(root, &canon, &canon_len) < 0) {
		snprintf(ret_detail, API_DETAIL_MAX,
		         "The body nests arrays and objects deeper than %d levels.",
		         API_JSON_DEPTH_MAX);
		goto done;
	}
	crypto_sha256(canon, canon_len, ob.ob_fingerprint);
	*ret_slug = "invalid_order";
	if (api_create_parse(root, &ob, &detail, &unknown) < 0) {
		if (unknown != NULL) {
			api_unknown_detail(ret_detail, unknown, detail);
		} else {
			snprintf(ret_detail, API_DETAIL_MAX, "%s", detail);
		}
		goto done;
	}
	*ret = ob;
	rc = 0;
done:
	free(canon);
	cJSON_Delete(root);
	return rc;
}

static int api_create_apply(struct store_tx *tx, void *arg, struct reply *ret_reply)
{
	struct api_create *ac = arg;
	char location[32 + ORDERS_ID_LEN];
	struct buf b;

	if (orders_create_owned(tx, ac->ac_owner, ac->ac_body.ob_amount, ac->ac_body.ob_currency,
				ac->ac_body.ob_has_customer_ref ? ac->ac_body.ob_customer_ref : NULL,
				ac->ac_id) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	/* Accepted + the resource's id, never a snapshot: a replay of this
	 * reply can never show stale business data. */
	buf_init(&b, 0);
	if (buf_puts(&b, "{\"id\":") < 0 || buf_json_string(&b, ac->ac_id) < 0 ||
	    buf_puts(&b, ",\"status\":\"created\"}") < 0 ||
	    api_reply_json(ret_reply, 201, &b) < 0) {
		buf_finish(&b);
		return STORE_APPLY_TRANSIENT;
	}
	snprintf(location, sizeof(location), "/api/orders/%s", ac->ac_id);
	if (reply_add_header(ret_reply, "Location", location) < 0) {
		return STORE_APPLY_TRANSIENT;
	}
	return STORE_APPLY_DONE;
}

/* application/json in any case, with optional whitespace (SP or HTAB,
 * RFC 9110's OWS) around it and any parameters after a ';'. A charset
 * parameter is not read: JSON is UTF-8 (RFC 8259, 8.1), whatever it says. */
static int api_content_type_json(const char *ct)
{
	size_t n = strlen("application/json");

	if (ct == NULL) {
		return 0;
	}
	while (*ct == ' ' || *ct == '\t') {
		ct++;
	}
	if (strncasecmp(ct, "application/json", n) != 0) {
		return 0;
	}
	ct += n;
	while (*ct == ' ' || *ct == '\t') {
		ct++;
	}
	return *ct == '\0' || *ct == ';';
}

/* What the CORS headers of one answer depend on: [api] cors_origins and
 * the request's Origin, read under api_lock (api_cors_take) and used after
 * it, when the answer is built (api_cors). */
enum api_cors_mode {
	API_CORS_OFF = 0, /* no origin listed: no CORS headers */
	API_CORS_ANY,     /* "*": every answer says Access-Control-Allow-Origin: * */
	API_CORS_LIST,    /* the origins listed, each echoed, and Vary: Origin */
};

struct api_cors {
	enum api_cors_mode ac_mode;
	int ac_allowed;                     /* the request's origin may read the answer */
	char ac_origin[API_ORIGIN_MAX + 1]; /* API_CORS_LIST: that origin, when allowed */
};

/* A POST /api/orders whose claim is with the store: what its answer needs. */
struct api_post {
	struct store_claim ap_claim;
	struct api_create ap_create;
	char ap_key[API_KEY_MAX + 1];
	char ap_scope[16 + API_CLIENT_MAX];
	char ap_client[API_CLIENT_MAX + 1];
	struct api_cors ap_cors;
	int64_t ap_received_ms;
	const struct env *ap_env;
	struct http_deferred *ap_defer;
};

static void api_post_committed(void *arg, int result)
{
	struct api_post *ap = arg;

	(void)result; /* the claim has its outcome, transient when refused */
	http_resume(ap->ap_defer);
}

static void api_cors(struct reply *ret, const struct api_cors *c, int preflight);

/* The answer to a POST /api/orders once its claim committed, on a server
 * thread (ret NULL: the client went away). */
static void api_post_finish(void *arg, const struct http_request *req, struct reply *ret)
{
	struct api_post *ap = arg;
	struct store_claim *c = &ap->ap_claim;
	struct reply scratch;

	(void)req;
	reply_init(&scratch);
	if (ret == NULL) {
		ret = &scratch;
	}
	switch (c->sc_outcome) {
	case STORE_NEW:
	case STORE_REPLAYED:
		if (reply_copy(ret, &c->sc_reply) < 0 ||
		    (c->sc_outcome == STORE_REPLAYED &&
		     reply_add_header(ret, "Idempotent-Replayed", "true") < 0)) {
			api_problem(
			        ret, 500, "internal", "Internal error",
			        "The order was kept but its answer could not be built; retry with "
			        "the same key to get it.");
		}
		break;
	case STORE_MISMATCH:
		api_problem(ret, 422, "idempotency_key_reused",
			    "Idempotency-Key reused with another request",
			    "This key was already used for a request with different content. Use a "
			    "new key for a "
			    "new order.");
		break;
	case STORE_IN_PROGRESS:
		api_problem(ret, 409, "request_in_progress",
			    "A request with this Idempotency-Key is in progress",
			    "Retry with the same key after Retry-After seconds.");
		api_retry_after(ret, c->sc_retry_after_s);
		break;
	case STORE_TRANSIENT:
	default:
		api_problem(ret, 503, "temporarily_unavailable", "Temporarily unavailable",
			    "Nothing was kept; retry with the same key.");
		api_retry_after(ret, c->sc_retry_after_s);
		break;
	}
	api_cors(ret, &ap->ap_cors, 0);
	api_claim_account("api:orders", ap->ap_client, ap->ap_key, c->sc_outcome,
			  ret != &scratch ? ret->reply_status : 0, ap->ap_received_ms, env_now_ms(ap->ap_env));
	reply_finish(&scratch);
	store_claim_finish(c);
	free(ap);
}

/* Answers ret now, or defers the answer until the claim committed (then
 * returns 1: the answer carries its CORS headers for origin itself). */
static int api_post_order(const struct env *env, const struct config *cf,
                          const struct http_request *req, const char *client, size_t body_max,
                          const struct api_cors *cors, struct reply *ret)
{
	struct api_post *ap = NULL;
	const char *slug = NULL;
	char detail[API_DETAIL_MAX];
	size_t n_keys = http_header_count(req, "Idempotency-Key");
	const char *ctype = NULL;
	int deferred = 0;

	if (req->hr_body_len > body_max) {
		api_problem(ret, 413, "body_too_large", "Request body too large",
			    "The order body is over the API's size limit ([api] body_max).");
		return 0;
	}
	if (n_keys == 0) {
		api_problem(ret, 400, "missing_idempotency_key", "Idempotency-Key header required",
			    "POST /api/orders needs an Idempotency-Key header: one fresh UUID per "
			    "order, "
			    "reused on every retry of that order.");
		return 0;
	}
	if (n_keys > 1) {
		api_problem(ret, 400, "several_idempotency_keys", "More than one Idempotency-Key",
			    "Send exactly one Idempotency-Key header.");
		return 0;
	}
	ap = calloc(1, sizeof(*ap));
	if (ap == NULL) {
		api_problem(ret, 503, "temporarily_unavailable", "Temporarily unavailable",
		            API_DETAIL_UNAVAILABLE);
		api_retry_after(ret, 1);
		return 0;
	}
	if (api_idempotency_key_parse(http_header_get(req, "Idempotency-Key"), ap->ap_key) < 0) {
		api_problem(ret, 400, "malformed_idempotency_key", "Malformed Idempotency-Key",
			    "The key must be a quoted string or a bare token of 1 to 255 printable "
			    "ASCII characters, "
			    "and only one key.");
		goto done;
	}
	if (http_header_one(req, "Content-Type", &ctype) < 0) {
		api_repeated(ret, "Content-Type");
		goto done;
	}
	if (!api_content_type_json(ctype)) {
		api_problem(ret, 415, "unsupported_media_type",
		            "Content-Type must be application/json",
		            "Send the order as a JSON object with Content-Type: application/json.");
		goto done;
	}
	if (api_order_body_parse(req->hr_body, req->hr_body_len, &ap->ap_create.ac_body, &slug,
	                         detail) < 0) {
		api_problem(ret, 400, slug,
			    strcmp(slug, "malformed_json") == 0 ? "Malformed JSON" : "Invalid order",
			    detail);
		goto done;
	}
	memcpy(ap->ap_claim.sc_fingerprint, ap->ap_create.ac_body.ob_fingerprint,
	       sizeof(ap->ap_claim.sc_fingerprint));
	snprintf(ap->ap_scope, sizeof(ap->ap_scope), "api:orders:%s", client);
	api_copy(ap->ap_client, sizeof(ap->ap_client), client);
	ap->ap_create.ac_owner = ap->ap_client;
	ap->ap_cors = *cors;
	ap->ap_received_ms = req->hr_received_ms;
	ap->ap_claim.sc_scope = ap->ap_scope;
	ap->ap_claim.sc_key = ap->ap_key;
	ap->ap_env = env;
	ap->ap_claim.sc_now_ms = env_now_ms(env);
	ap->ap_claim.sc_retention_ms = cf->cf_retention_s * 1000;
	ap->ap_claim.sc_lease_ms = cf->cf_lease_s * 1000;
	ap->ap_claim.sc_apply = api_create_apply;
	ap->ap_claim.sc_arg = &ap->ap_create;
	/* No server thread waits for the COMMIT: api_post_finish answers. */
	ap->ap_defer = http_defer(req, api_post_finish, ap);
	store_submit_async(env->env_store, &ap->ap_claim, 1, api_post_committed, ap);
	ap = NULL;
	deferred = 1;
done:
	free(ap);
	return deferred;
}

/* ---- GET /api/orders[/{id}] ---- */

/* Another client's order is 404, not 403: an id says nothing about whether
 * it exists. */
static void api_get_order(const struct env *env, const char *id, const struct api_reader *reader,
			  struct reply *ret)
{
	struct api_order o;
	struct api_load al = {.al_id = id, .al_reader = reader, .al_order = &o};
	struct buf b;
	int rc;

	if (!api_order_id_valid(id)) {
		api_problem(ret, 404, "not_found", "No such order", API_DETAIL_NO_ORDER);
		return;
	}
	rc = store_read(env->env_store, env_now_ms(env), api_order_load_tx, &al);
	if (rc < 0) {
		api_problem(ret, 503, "temporarily_unavailable", "Temporarily unavailable",
		            API_DETAIL_UNREADABLE);
		api_retry_after(ret, 1);
		return;
	}
	if (rc == 0) {
		api_problem(ret, 404, "not_found", "No such order", API_DETAIL_NO_ORDER);
		return;
	}
	buf_init(&b, 0);
	if (api_order_json(&b, &o) < 0 || api_reply_json(ret, 200, &b) < 0) {
		buf_finish(&b);
		api_problem(ret, 500, "internal", "Internal error",
		            "The order could not be written out; retry.");
		return;
	}
	reply_add_header(ret, "Cache-Control", "no-store");
}

struct api_list {
	const struct api_reader *ali_reader;
	struct buf *ali_buf;
	size_t ali_n;
};

static int api_list_row(void *arg, const struct store_row *row)
{
	struct api_list *al = arg;
	struct api_order o;

	api_order_from_row(row, &o);
	if ((al->ali_n > 0 && buf_puts(al->ali_buf, ",") < 0) ||
	    api_order_json(al->ali_buf, &o) < 0) {
		return -1;
	}
	al->ali_n++;
	return 0;
}

static int api_list_tx(struct store_tx *tx, void *arg)
{
	struct api_list *al = arg;
	struct store_value p[3];

	if (al->ali_reader->ar_client == NULL) {
		p[0] = store_int(API_LIST_MAX);
		return store_query_each(tx,
					"SELECT " API_ORDER_COLUMNS
					" FROM orders ORDER BY created_at DESC, id LIMIT ?",
					p, 1, api_list_row, arg);
	}
	p[0] = store_text(al->ali_reader->ar_client);
	p[1] = store_int(al->ali_reader->ar_ownerless);
	p[2] = store_int(API_LIST_MAX);
	return store_query_each(tx,
				"SELECT " API_ORDER_COLUMNS " FROM orders WHERE " API_OWNED_BY
				" ORDER BY created_at DESC, id LIMIT ?",
				p, 3, api_list_row, arg);
}

static void api_list_orders(const struct env *env, const struct api_reader *reader, struct reply *ret)
{
	struct buf b;
	struct api_list al = {.ali_reader = reader, .ali_buf = &b};

	buf_init(&b, 0);
	if (buf_puts(&b, "{\"orders\":[") < 0 ||
	    store_read(env->env_store, env_now_ms(env), api_list_tx, &al) < 0 ||
	    buf_puts(&b, "]}") < 0 || api_reply_json(ret, 200, &b) < 0) {
		buf_finish(&b);
		api_problem(ret, 503, "temporarily_unavailable", "Temporarily unavailable",
		            API_DETAIL_UNREADABLE);
		api_retry_after(ret, 1);
		return;
	}
	reply_add_header(ret, "Cache-Control", "no-store");
}

/* ---- auth, CORS, routing ---- */

/* What cors_origins in as says for origin. origin NULL: none, or several (which one
 * asked is unknown). "null" (a sandboxed frame, a local file) is no
 * configured origin (api_origin_check), so it matches only under "*",
 * which does not echo it. */
static void api_cors_from(struct api_cors *ret, const struct api_settings *as, const char *origin)
{
	size_t i;

	ret->ac_mode = API_CORS_OFF;
	ret->ac_allowed = 0;
	ret->ac_origin[0] = '\0';
	if (as->as_any) {
		ret->ac_mode = API_CORS_ANY;
		ret->ac_allowed = 1;
		return;
	}
	if (as->as_n_origins == 0) {
		return;
	}
	ret->ac_mode = API_CORS_LIST;
	for (i = 0; origin != NULL && i < as->as_n_origins; i++) {
		if (strcmp(as->as_origins[i], origin) == 0) {
			ret->ac_allowed = 1;
			api_copy(ret->ac_origin, sizeof(ret->ac_origin), origin);
			return;
		}
	}
}

/* api_cors_from for the settings in use. Called with api_lock held. */
static void api_cors_take(struct api_cors *ret, const char *origin)
{
	api_cors_from(ret, &api_set, origin);
}

/* Called with api_lock held. 1 and ret_client filled when authorized; 0
 * when not; -1 when Authorization comes on several lines. */
static int api_authorize(const struct http_request *req, char ret_client[API_CLIENT_MAX + 1])
{
	const char *auth = NULL;
	const char *tok;
	size_t tok_len;
	size_t i;
	int found = -1;

	if (http_header_one(req, "Authorization", &auth) < 0) {
		return -1;
	}
	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) {
		return 0;
	}
	tok = auth + 7;
	while (*tok == ' ') {
		tok++;
	}
	tok_len = strlen(tok);
	while (tok_len > 0 && tok[tok_len - 1] == ' ') {
		tok_len--;
	}
	/* Every token is compared, each in constant time. */
	for (i = 0; i < api_set.as_n_tokens; i++) {
		if (crypto_equal(tok, tok_len, api_set.as_tokens[i].at_secret,
				 api_set.as_tokens[i].at_len) &&
		    found < 0) {
			found = (int)i;
		}
	}
	if (found < 0) {
		return 0;
	}
	api_copy(ret_client, API_CLIENT_MAX + 1, api_set.as_tokens[found].at_name);
	return 1;
}

/* The CORS headers of an answer (the Fetch standard's advice on caches).
 * Under "*" every answer says Access-Control-Allow-Origin: *, whatever the
 * request's Origin (or none), so the answer does not depend on it and says
 * no Vary. With origins listed, Vary: Origin goes on every answer, whatever
 * the Origin (or none): the answer depends on it, so a cache must not hand
 * one origin's answer to another, or to a request without one; the rest
 * only for an allowed origin, echoed. Never Access-Control-Allow-Credentials. */
static void api_cors(struct reply *ret, const struct api_cors *c, int preflight)
{
	const char *allow = "*";

	if (c->ac_mode == API_CORS_OFF) {
		return;
	}
	if (c->ac_mode == API_CORS_LIST) {
		reply_add_header(ret, "Vary", "Origin");
		if (!c->ac_allowed) {
			return;
		}
		allow = c->ac_origin;
	}
	reply_add_header(ret, "Access-Control-Allow-Origin", allow);
	if (preflight) {
		reply_add_header(
			ret, "Access-Control-Allow-Headers",
			"Idempotency-Key, Content-Type, Authorization, " API_CLIENT_HEADER);
		reply_add_header(ret, "Access-Control-Max-Age", "600");
	} else {
		reply_add_header(ret, "Access-Control-Expose-Headers",
				 "Location, Retry-After, Idempotent-Replayed");
	}
}

int api_route(const struct env *env, const struct config *cf, const struct http_request *req,
	      struct reply *ret)
{
	const char *path = req->hr_path;
	const char *method = req->hr_method;
	const char *origin = NULL;
	int origins = http_header_one(req, "Origin", &origin);
	char client[API_CLIENT_MAX + 1] = "anonymous";
	struct api_cors cors;
	const char *id = NULL;
	int is_list;
	int ok;
	int authorized = 1;
	int auth_on;
	int rate_ok;
	int64_t retry_after = 1;
	size_t body_max;
	struct api_reader reader;
	int reads_all;
	const char *allow;

	if (strcmp(path, "/api") != 0 && strncmp(path, "/api/", 5) != 0) {
		return 0;
	}
	is_list = strcmp(path, "/api/orders") == 0 || strcmp(path, "/api/orders/") == 0;
	if (strncmp(path, "/api/orders/", 12) == 0 && path[12] != '\0') {
		id = path + 12;
	}

	pthread_mutex_lock(&api_lock);
	api_settings_ensure(cf);
	ok = api_set.as_ok;
	body_max = api_set.as_body_max;
	reads_all = api_set.as_reads_all;
	api_cors_take(&cors, origins < 0 ? NULL : origin);
	rate_ok = api_rate_take(api_set.as_rate, api_set.as_burst, req->hr_client, env_now_ms(env),
				&retry_after);
	auth_on = api_set.as_n_tokens > 0;
	if (ok && auth_on) {
		authorized = api_authorize(req, client);
	}
	pthread_mutex_unlock(&api_lock);

	/* Two origins (a browser sends one): no CORS answer fits both. */
	if (origins < 0) {
		api_repeated(ret, "Origin");
		goto cors;
	}
	if (!is_list && id == NULL) {
		api_problem(ret, 404, "not_found", "No such API resource",
		            "The order API is POST /api/orders, GET /api/orders and GET "
		            "/api/orders/{id}.");
		goto cors;
	}
	allow = is_list ? "GET, HEAD, POST, OPTIONS" : "GET, HEAD, OPTIONS";
	if (strcmp(method, "OPTIONS") == 0) {
		/* A preflight (Origin and Access-Control-Request-Method) carries
		 * no credentials, so it is answered before auth; only for the
		 * configured origins. Any other OPTIONS asks what the resource
		 * allows (RFC 9110, 9.3.7). */
		int preflight = origin != NULL &&
		                http_header_get(req, "Access-Control-Request-Method") != NULL;

		if (preflight && !cors.ac_allowed) {
			api_problem(ret, 403, "cors_origin_not_allowed", "Origin not allowed",
				    "Add the origin to [api] cors_origins.");
			goto cors;
		}
		reply_set(ret, 204, NULL, NULL, 0);
		reply_add_header(ret, "Allow", allow);
		if (preflight) {
			api_cors(ret, &cors, 1);
			reply_add_header(ret, "Access-Control-Allow-Methods",
			                 is_list ? "GET, POST, OPTIONS" : "GET, OPTIONS");
			return 1;
		}
		goto cors;
	}
	if (!ok) {
		api_problem(ret, 503, "api_misconfigured", "Order API unavailable",
			    "The [api] section of the configuration is unusable; see the daemon's "
			    "log.");
		goto cors;
	}
	if (!rate_ok) {
		api_problem(ret, 429, "rate_limited", "Too many requests",
			    "Slow down and retry after Retry-After seconds.");
		api_retry_after(ret, retry_after);
		goto cors;
	}
	if (authorized < 0) {
		api_repeated(ret, "Authorization");
		goto cors;
	}
	if (!authorized) {
		api_problem(ret, 401, "unauthorized", "Bearer token required",
			    "Send Authorization: Bearer <token> with a token from [api] token.");
		reply_add_header(ret, "WWW-Authenticate", "Bearer realm=\"idemhook\"");
		goto cors;
	}
	if (!auth_on) {
		/* Without auth a client names itself: its keys live apart from
		 * other clients' keys. Not a credential. */
		const char *cid = NULL;

		if (http_header_one(req, API_CLIENT_HEADER, &cid) < 0) {
			api_repeated(ret, API_CLIENT_HEADER);
			goto cors;
		}
		if (cid != NULL) {
			if (!api_client_valid(cid, strlen(cid))) {
				api_problem(ret, 400, "malformed_client_id",
					    "Malformed " API_CLIENT_HEADER,
					    "1 to 64 letters, digits, '.', '_' or '-'.");
				goto cors;
			}
			api_copy(client, sizeof(client), cid);
		}
	}
	/* Reads are scoped to the client that created the order; without
	 * tokens, orders no API client created (checkout page, CLI) stay
	 * readable by id, as the checkout page links them. */
	reader.ar_client = reads_all ? NULL : client;
	reader.ar_ownerless = !auth_on;
	if (is_list && strcmp(method, "POST") == 0) {
		if (api_post_order(env, cf, req, client, body_max, &cors, ret)) {
			return 1; /* deferred; its answer brings its own CORS headers */
		}
	} else if (is_list && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
		if (!auth_on && !cf->cf_demo) {
			/* Without credentials anyone who reaches the listener
			 * could read every customer's reference. */
			api_problem(ret, 403, "listing_disabled", "Listing orders is disabled",
				    "GET /api/orders needs bearer-token auth ([api] token) or demo "
				    "mode.");
		} else {
			api_list_orders(env, &reader, ret);
		}
	} else if (id != NULL && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
		api_get_order(env, id, &reader, ret);
	} else {
		api_method_not_allowed(ret, allow);
	}
cors:
	/* A refusal depends on who asks (another client's order is 404 to
	 * them, not to its owner) and on when: a shared cache that keeps a
	 * 404 or a 401 by its own heuristics must not hand it on. */
	if (ret->reply_status >= 400) {
		reply_add_header(ret, "Cache-Control", "no-store");
	}
	api_cors(ret, &cors, 0);
	return 1;
}

void api_refused(const struct config *cf, const struct http_request *req, struct reply *ret)
{
	const char *origin = NULL;
	struct api_cors cors;

	if (strcmp(req->hr_path, "/api") != 0 && strncmp(req->hr_path, "/api/", 5) != 0) {
		return;
	}
	http_header_one(req, "Origin", &origin); /* NULL when repeated: which one asked? */
	pthread_mutex_lock(&api_lock);
	api_settings_ensure(cf);
	api_cors_take(&cors, origin);
	pthread_mutex_unlock(&api_lock);
	api_cors(ret, &cors, 0);
}

int api_timeout_reply(const struct config *cf, struct reply *ret)
{
	struct api_settings *as = calloc(1, sizeof(*as));
	struct api_cors cors;
	int rc = -1;

	if (as == NULL) {
		return -1;
	}
	/* Only cors_origins counts: no secret is read. A section that does
	 * not read was logged by the check at start and reload; its API
	 * answers 503 with the problem only. */
	as->as_no_secrets = 1;
	if (api_settings_read(as, cf) < 0) {
		rc = 0;
		goto done;
	}
	api_cors_from(&cors, as, NULL);
	if (cors.ac_mode == API_CORS_OFF) {
		rc = 0;
		goto done;
	}
	if (reply_problem(ret, 408, "request_timeout", HTTP_TIMEOUT_TITLE, HTTP_TIMEOUT_DETAIL) <
	    0) {
		goto done;
	}
	api_cors(ret, &cors, 0);
	rc = 1;
done:
	api_settings_clear(as);
	free(as);
	return rc;
}
