/* console.c: the operator console's access and routes: the [console]
 * section, login (an operator token for a session cookie), sessions, the
 * failed-login limit, CSRF, the security headers, and the actions, each
 * recorded in the audit log. The pages are console_pages.c's. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "config.h"
#include "console.h"
#include "console_assets.h"
#include "console_db.h"
#include "console_pages.h"
#include "crypto.h"
#include "env.h"
#include "log.h"
#include "outbox.h"
#include "provider.h"
#include "reconcile.h"
#include "store.h"
#include "text.h"

#define CONSOLE_SESSIONS_MAX 256
#define CONSOLE_SESSION_ID_BYTES 32 /* random bytes of a session id, sent as hex */
#define CONSOLE_COOKIE "idemhook_console"
#define CONSOLE_TTL_DEFAULT_S (8 * 3600)
#define CONSOLE_LOGIN_FAILURES_DEFAULT 5
#define CONSOLE_LOGIN_WINDOW_MS (15 * 60 * 1000)
#define CONSOLE_CLIENTS_MAX 256 /* client addresses the failed-login limit tracks */
#define CONSOLE_LOG_PATH_MAX 256    /* bytes of a request path in a log line */
#define CONSOLE_FORM_FIELD_MAX 8192 /* encoded: a 500-character reason is 6000 at most */
#define CONSOLE_URL_MAX 700   /* a page's URL: an order id of 200 bytes, encoded */
#define CONSOLE_FLASH_MAX 700 /* an action's message shown after its redirect */
#define CONSOLE_FLASH_TTL_MS (60 * 1000)
#define CONSOLE_HTML "text/html; charset=utf-8"
#define CONSOLE_CSP                                                                                \
	"default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "                \
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

/* ---- the [console] section ---- */

/* "localhost", 127.0.0.0/8, ::1 (bracketed or not). */
static int console_loopback(const char *listen)
{
	const char *colon = strrchr(listen, ':');
	size_t n = colon != NULL ? (size_t)(colon - listen) : strlen(listen);

	return (n == 9 && strncmp(listen, "localhost", 9) == 0) ||
	       strncmp(listen, "127.", 4) == 0 || (n == 5 && strncmp(listen, "[::1]", 5) == 0) ||
	       (n == 3 && strncmp(listen, "::1", 3) == 0);
}

struct console_tokens_load {
	struct console_conf *tl_conf;
	const char *tl_file;
	int tl_with_secrets;
	int tl_bad; /* a line was refused (logged); the next ones are read all the same */
	int tl_over; /* past CONSOLE_TOKENS_MAX: said once, the lines after it still checked */
};

/* token = NAME ROLE SECRET (ROLE read-only or operator; SECRET a
 * reference: file:, credential:, env:). */
static int console_conf_token(void *arg, const char *value, int line)
{
	struct console_tokens_load *tl = arg;
	struct console_conf *c = tl->tl_conf;
	struct console_token *t;
	struct console_token scratch;
	char name[CONSOLE_NAME_MAX + 2];
	char role[16];
	char spec[600];
	char err[CONFIG_SECRET_ERR_MAX];
	int over = c->cc_n_tokens == CONSOLE_TOKENS_MAX;
	size_t i;

	if (over && !tl->tl_over) {
		log_err("config: %s:%d: [console] token: more than %d tokens", tl->tl_file, line,
		        CONSOLE_TOKENS_MAX);
		tl->tl_over = 1;
	}
	if (over) {
		tl->tl_bad = 1; /* and the line is checked all the same, not kept */
	}
	/* A bad line is logged and the next one read (tl_bad): every problem
	 * in one run. */
	if (sscanf(value, "%65s %15s %599s", name, role, spec) != 3 ||
	    strlen(name) > CONSOLE_NAME_MAX ||
	    (strcmp(role, "read-only") != 0 && strcmp(role, "operator") != 0) ||
	    (strncmp(spec, "file:", 5) != 0 && strncmp(spec, "credential:", 11) != 0 &&
	     strncmp(spec, "env:", 4) != 0)) {
		log_err("config: %s:%d: [console] token: expected NAME read-only|operator "
		        "file:PATH|credential:NAME|env:NAME",
		        tl->tl_file, line);
		tl->tl_bad = 1;
		return 0;
	}
	for (i = 0; name[i] != '\0'; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) {
			log_err("config: %s:%d: [console] token: NAME is letters, digits, . _ -",
			        tl->tl_file, line);
			tl->tl_bad = 1;
			return 0;
		}
	}
	for (i = 0; i < c->cc_n_tokens; i++) {
		if (strcmp(c->cc_tokens[i].ct_name, name) == 0) {
			log_err("config: %s:%d: [console] token: the name \"%s\" is used twice",
			        tl->tl_file, line, name);
			tl->tl_bad = 1;
			return 0;
		}
	}
	t = over ? &scratch : &c->cc_tokens[c->cc_n_tokens];
	memset(t, 0, sizeof(*t));
	snprintf(t->ct_name, sizeof(t->ct_name), "%s", name);
	t->ct_role = strcmp(role, "operator") == 0 ? CONSOLE_ROLE_OPERATOR : CONSOLE_ROLE_READ_ONLY;
	if (tl->tl_with_secrets) {
		if (config_read_secret(spec, &t->ct_secret, &t->ct_len, err, sizeof(err)) < 0) {
			log_err("config: %s:%d: [console] token %s: cannot be read: %s",
			        tl->tl_file, line, name, err);
			t->ct_secret = NULL;
			tl->tl_bad = 1;
			return 0;
		}
		if (t->ct_len < 16) {
			log_err("config: %s:%d: [console] token %s: the secret is shorter than 16 "
			        "bytes",
			        tl->tl_file, line, name);
			free(t->ct_secret);
			t->ct_secret = NULL;
			tl->tl_bad = 1;
			return 0;
		}
	}
	if (over) {
		if (t->ct_secret != NULL) {
			explicit_bzero(t->ct_secret, t->ct_len);
			free(t->ct_secret);
		}
		return 0;
	}
	c->cc_n_tokens++;
	return 0;
}

int console_conf_load(const struct config *cf, int with_secrets, struct console_conf *ret)
{
	const struct config_section *cs = config_section(cf, CONSOLE_SECTION);
	const char *file = cf->cf_path != NULL ? cf->cf_path : "(demo)";
	const char *admin = config_get(cf, "admin", "listen");
	struct console_tokens_load tl = {ret, file, with_secrets, 0, 0};
	unsigned failures = 0;
	int ttl_ok;
	int failures_ok;
	int insecure_ok;
	int rc = 0;

	/* Every key checked whatever the others hold, each problem logged;
	 * what depends on a refused key (enabled) is not checked. */
	memset(ret, 0, sizeof(*ret));
	if (config_get_bool(cf, CONSOLE_SECTION, "enabled", 0, &ret->cc_enabled) < 0) {
		rc = -1;
	}
	ttl_ok = config_get_duration(cf, CONSOLE_SECTION, "session_ttl", CONSOLE_TTL_DEFAULT_S,
	                             &ret->cc_session_ttl_s) == 0;
	insecure_ok = config_get_bool(cf, CONSOLE_SECTION, "allow_insecure", 0,
	                              &ret->cc_allow_insecure) == 0;
	if (!insecure_ok) {
		rc = -1;
	}
	failures_ok = config_get_uint(cf, CONSOLE_SECTION, "login_failures",
	                              CONSOLE_LOGIN_FAILURES_DEFAULT, &failures) == 0;
	ret->cc_login_failures = failures;
	if (!ttl_ok || !failures_ok) {
		rc = -1;
	}
	/* Secure on the cookie: auto (the default) sets it where the admin
	 * address is not loopback (below); yes sets it always, for a loopback
	 * listener that a TLS proxy serves to the browser as HTTPS. */
	{
		const char *v = config_get(cf, CONSOLE_SECTION, "secure_cookie");

		if (v != NULL && strcmp(v, "auto") != 0 &&
		    (config_parse_bool(v, &ret->cc_cookie_secure) < 0 || !ret->cc_cookie_secure)) {
			rc = config_refuse(cf, CONSOLE_SECTION, "secure_cookie",
			                   "\"%s\": auto or yes", v);
		}
	}
	if (!ret->cc_enabled) {
		goto done;
	}
	if (ttl_ok && (ret->cc_session_ttl_s < 1 || ret->cc_session_ttl_s > 7 * 86400)) {
		log_err("config: %s: [console] session_ttl: between 1s and 7d", file);
		rc = -1;
	}
	if (failures_ok && ret->cc_login_failures < 1) {
		log_err("config: %s: [console] login_failures: at least 1", file);
		rc = -1;
	}
	if (cs != NULL && config_section_each(cs, "token", console_conf_token, &tl) != 0) {
		rc = -1;
	}
	if (tl.tl_bad) {
		rc = -1;
	} else if (ret->cc_n_tokens == 0) {
		log_err("config: %s: [console] enabled = yes needs at least one token = NAME ROLE "
		        "SECRET",
		        file);
		rc = -1;
	}
	if (admin != NULL && strcmp(admin, "off") == 0) {
		log_err("config: %s: [console] enabled = yes needs the admin listener ([admin] "
		        "listen "
		        "is off)",
		        file);
		rc = -1;
	} else if (admin != NULL && !console_loopback(admin)) {
		/* The admin listener speaks plain HTTP: a token typed into the
		 * login form crosses the network in clear unless a TLS proxy
		 * sits in front. */
		if (!ret->cc_allow_insecure && insecure_ok) {
			log_err("config: %s: [console] refused on the non-loopback admin address "
			        "%s "
			        "without TLS: put it on loopback behind a TLS reverse proxy, or "
			        "set "
			        "[console] allow_insecure = yes",
			        file, admin);
			rc = -1;
		}
		ret->cc_cookie_secure = 1;
	}
done:
	if (rc < 0) {
		console_conf_finish(ret);
	}
	return rc;
}

void console_conf_finish(struct console_conf *c)
{
	size_t i;

	for (i = 0; i < c->cc_n_tokens; i++) {
		if (c->cc_tokens[i].ct_secret != NULL) {
			memset(c->cc_tokens[i].ct_secret, 0, c->cc_tokens[i].ct_len);
			free(c->cc_tokens[i].ct_secret);
		}
	}
	memset(c, 0, sizeof(*c));
}

/* ---- the console ---- */

struct console_session {
	char cs_id[2 * CONSOLE_SESSION_ID_BYTES + 1]; /* "" when the slot is free */
	char cs_csrf[2 * CONSOLE_SESSION_ID_BYTES + 1];
	char cs_name[CONSOLE_NAME_MAX + 1];
	enum console_role cs_role;
	/* A keyed MAC of the token's secret at login (never the secret): a
	 * reload that changed the secret ends the session. */
	unsigned char cs_secret_mac[CRYPTO_HMAC_MAX];
	int64_t cs_expires_ms;
	/* The outcome of the session's last action, shown once by the page it
	 * redirected to, for a minute at most. That URL is kept as its SHA-256
	 * (cs_flash_url_hash, when cs_flash_set): a bulk dismiss's filters make
	 * it as long as a form field, and a cut copy would never match. */
	char cs_flash[CONSOLE_FLASH_MAX];
	unsigned char cs_flash_url_hash[CRYPTO_SHA256_LEN];
	int cs_flash_set;
	int cs_flash_error;
	int64_t cs_flash_at_ms;
};

struct console_client {
	char cc_addr[64];
	unsigned cc_failures;
	int64_t cc_window_start_ms;
};

#define CONSOLE_RUNS_MAX 8        /* "reconcile now" runs under way at once, all orders */
#define CONSOLE_RUN_ORDER_MAX 200 /* bytes of an order id "reconcile now" takes */
#define CONSOLE_RUN_AUDIT_MS (60 * 1000) /* a run's outcome waits this long for the store */

/* A "reconcile now" run. It runs on a thread of its own, because a
 * provider may take its whole [reconcile] timeout (and retries) to answer:
 * the request waits for it until its deadline (CONSOLE_DB_WAIT_MS), and
 * past that the run goes on, records its own outcome in the audit log and
 * leaves it for the session's next look at the order page. cr_ended,
 * cr_detached and cr_done are read and written under co_lock. */
struct console_run {
	struct console *cr_c;
	pthread_t cr_thread;
	struct config *cr_cf; /* acquired for the run, released by the thread */
	char cr_order[CONSOLE_RUN_ORDER_MAX + 1];
	char cr_actor[CONSOLE_NAME_MAX + 16];
	char cr_target[220];
	char cr_sid[2 * CONSOLE_SESSION_ID_BYTES + 1]; /* whose flash the outcome is */
	char cr_url[CONSOLE_URL_MAX];                  /* the order page, as linked */
	int64_t cr_started_ms;                         /* wall clock */
	struct reconcile_report cr_rep;
	int cr_rc;       /* reconcile_run's */
	int cr_ended;    /* reconcile_run returned: cr_rc and cr_rep are set */
	int cr_detached; /* the request stopped waiting: the thread records the outcome */
	int cr_done;     /* the thread touches nothing more: join it, free the run */
	int cr_held;     /* the request that started it reads it: not freed yet */
};

struct console {
	const struct env *co_env;
	pthread_mutex_t co_lock;
	struct console_conf co_conf; /* of config co_serial */
	uint64_t co_serial;
	unsigned char co_mac_key[32]; /* random per process: the key of cs_secret_mac */
	struct console_session co_sessions[CONSOLE_SESSIONS_MAX];
	struct console_client co_clients[CONSOLE_CLIENTS_MAX];
	/* "reconcile now" runs (NULL: a free slot), and what wakes the request
	 * waiting for one (CLOCK_MONOTONIC) */
	struct console_run *co_runs[CONSOLE_RUNS_MAX];
	pthread_cond_t co_run_cond;
	int co_stopping; /* atomic: console_destroy began; runs give up between attempts */
};

struct console *console_create(const struct env *env, int *ret_off)
{
	struct config *cf = env_config_acquire(env);
	struct console *c = NULL;
	struct console_conf conf;

	*ret_off = 0;
	if (console_conf_load(cf, 1, &conf) < 0) {
		goto out;
	}
	if (!conf.cc_enabled) {
		*ret_off = 1;
		goto out;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		console_conf_finish(&conf);
		goto out;
	}
	if (crypto_random(c->co_mac_key, sizeof(c->co_mac_key)) < 0) {
		log_err("console: no random bytes for the session key");
		console_conf_finish(&conf);
		free(c);
		c = NULL;
		goto out;
	}
	c->co_env = env;
	pthread_mutex_init(&c->co_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&c->co_run_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	c->co_conf = conf;
	c->co_serial = cf->cf_serial;
	log_notice("console: on the admin listener under /console, %zu token(s)", conf.cc_n_tokens);
out:
	env_config_release(env, cf);
	return c;
}

static void console_run_free(struct console_run *r);

void console_destroy(struct console *c)
{
	size_t i;

	if (c == NULL) {
		return;
	}
	/* No request is left (the listener is gone); runs still under way
	 * give up between attempts, end their current request, record their
	 * outcome and are joined before the store closes. */
	__atomic_store_n(&c->co_stopping, 1, __ATOMIC_RELEASE);
	for (i = 0; i < CONSOLE_RUNS_MAX; i++) {
		if (c->co_runs[i] != NULL) {
			pthread_join(c->co_runs[i]->cr_thread, NULL);
			console_run_free(c->co_runs[i]);
			c->co_runs[i] = NULL;
		}
	}
	pthread_cond_destroy(&c->co_run_cond);
	console_conf_finish(&c->co_conf);
	memset(c->co_sessions, 0, sizeof(c->co_sessions));
	memset(c->co_mac_key, 0, sizeof(c->co_mac_key));
	pthread_mutex_destroy(&c->co_lock);
	free(c);
}

/* The MAC of a token's secret a session keeps (CRYPTO_HMAC_MAX bytes,
 * zero-padded). Returns 0 or -1. */
static int console_secret_mac(const struct console *c, const struct console_token *t,
                              unsigned char *out)
{
	size_t len = 0;

	memset(out, 0, CRYPTO_HMAC_MAX);
	return crypto_hmac(CRYPTO_SHA256, c->co_mac_key, sizeof(c->co_mac_key), t->ct_secret,
	                   t->ct_len, out, &len);
}

/* Takes a reloaded [console] (lock held). A bad one keeps the last good
 * one (the reload itself checked the file). Sessions whose token is gone,
 * whose role changed or whose secret changed (a leaked token locked out)
 * end. */
static void console_follow_config(struct console *c, const struct config *cf)
{
	struct console_conf conf;
	size_t i;
	size_t k;

	if (cf->cf_serial == c->co_serial) {
		return;
	}
	c->co_serial = cf->cf_serial;
	if (console_conf_load(cf, 1, &conf) < 0) {
		log_warn("console: the reloaded [console] section is unusable; keeping the last "
		         "one");
		return;
	}
	console_conf_finish(&c->co_conf);
	c->co_conf = conf;
	for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
		struct console_session *s = &c->co_sessions[i];
		int kept = 0;

		for (k = 0; s->cs_id[0] != '\0' && k < conf.cc_n_tokens; k++) {
			unsigned char mac[CRYPTO_HMAC_MAX];

			if (strcmp(conf.cc_tokens[k].ct_name, s->cs_name) != 0 ||
			    conf.cc_tokens[k].ct_role != s->cs_role) {
				continue;
			}
			kept = console_secret_mac(c, &conf.cc_tokens[k], mac) == 0 &&
			       crypto_equal(mac, sizeof(mac), s->cs_secret_mac,
			                    sizeof(s->cs_secret_mac));
		}
		if (!kept || !conf.cc_enabled) {
			memset(s, 0, sizeof(*s));
		}
	}
}

/* ---- replies ---- */

static void console_headers(struct reply *ret)
{
	reply_add_header(ret, "Content-Security-Policy", CONSOLE_CSP);
	reply_add_header(ret, "X-Frame-Options", "DENY");
	reply_add_header(ret, "X-Content-Type-Options", "nosniff");
	reply_add_header(ret, "Referrer-Policy", "same-origin");
	reply_add_header(ret, "Cache-Control", "no-store");
}

static void console_reply_buf(struct reply *ret, int status, struct buf *b)
{
	size_t len = 0;
	char *body;

	if (status < 0 || b->buf_overflow) {
		buf_finish(b);
		reply_set(ret, 500, "text/plain; charset=utf-8", "console: page unavailable\n", 26);
		console_headers(ret);
		return;
	}
	body = buf_take(b, &len);
	if (body == NULL || reply_set_take(ret, status, CONSOLE_HTML, body, len) < 0) {
		free(body);
		reply_set(ret, 500, "text/plain; charset=utf-8", "console: out of memory\n", 23);
	}
	console_headers(ret);
}

static void console_text(struct reply *ret, int status, const char *text)
{
	reply_set(ret, status, "text/plain; charset=utf-8", text, strlen(text));
	console_headers(ret);
}

static void console_redirect(struct reply *ret, const char *location)
{
	reply_set(ret, 303, "text/plain; charset=utf-8", "see other\n", 10);
	reply_add_header(ret, "Location", location);
	console_headers(ret);
}

/* ---- forms and cookies ---- */

/* Field name of an application/x-www-form-urlencoded body, decoded
 * (malloc'd), or NULL. */
static char *console_form(const struct http_request *req, const char *name)
{
	const char *p = (const char *)req->hr_body;
	const char *end = p + req->hr_body_len;
	size_t nlen = strlen(name);

	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp != NULL ? amp : end;

		if ((size_t)(stop - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
			size_t vlen = (size_t)(stop - p) - nlen - 1;

			if (vlen > CONSOLE_FORM_FIELD_MAX) {
				return NULL;
			}
			return text_form_decode(p + nlen + 1, vlen);
		}
		p = stop + 1;
	}
	return NULL;
}

/* The session cookie's value into out, or "" when none. */
static void console_cookie(const struct http_request *req, char *out, size_t size)
{
	size_t i;

	out[0] = '\0';
	for (i = 0; i < req->hr_n_headers; i++) {
		const char *v = req->hr_headers[i].hh_value;

		if (strcasecmp(req->hr_headers[i].hh_name, "Cookie") != 0) {
			continue;
		}
		while (v != NULL && *v != '\0') {
			size_t n;

			while (*v == ' ' || *v == ';') {
				v++;
			}
			n = strcspn(v, ";");
			if (n > sizeof(CONSOLE_COOKIE) &&
			    strncmp(v, CONSOLE_COOKIE "=", sizeof(CONSOLE_COOKIE)) == 0) {
				size_t vlen = n - sizeof(CONSOLE_COOKIE);

				if (vlen < size) {
					memcpy(out, v + sizeof(CONSOLE_COOKIE), vlen);
					out[vlen] = '\0';
				}
				return;
			}
			v += n;
		}
	}
}

static int console_random_hex(char *out)
{
	unsigned char raw[CONSOLE_SESSION_ID_BYTES];

	if (crypto_random(raw, sizeof(raw)) < 0) {
		return -1;
	}
	crypto_hex_encode(raw, sizeof(raw), out);
	return 0;
}

/* The live session the request's cookie names, copied into ret (lock
 * held). Returns 1, or 0 when none (an expired one is freed). */
static int console_session_find(struct console *c, const struct http_request *req, int64_t now,
                                struct console_session *ret)
{
	char id[2 * CONSOLE_SESSION_ID_BYTES + 2];
	size_t i;

	console_cookie(req, id, sizeof(id));
	if (strlen(id) != 2 * CONSOLE_SESSION_ID_BYTES) {
		return 0;
	}
	for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
		struct console_session *s = &c->co_sessions[i];

		if (s->cs_id[0] == '\0' ||
		    !crypto_equal(s->cs_id, strlen(s->cs_id), id, strlen(id))) {
			continue;
		}
		if (s->cs_expires_ms <= now) {
			memset(s, 0, sizeof(*s));
			return 0;
		}
		*ret = *s;
		return 1;
	}
	return 0;
}

/* ---- login ---- */

static struct console_client *console_client(struct console *c, const char *addr, int64_t now)
{
	struct console_client *oldest = &c->co_clients[0];
	size_t i;

	for (i = 0; i < CONSOLE_CLIENTS_MAX; i++) {
		struct console_client *cl = &c->co_clients[i];

		if (strcmp(cl->cc_addr, addr) == 0) {
			if (now - cl->cc_window_start_ms >= CONSOLE_LOGIN_WINDOW_MS) {
				cl->cc_failures = 0;
				cl->cc_window_start_ms = now;
			}
			return cl;
		}
		if (cl->cc_window_start_ms < oldest->cc_window_start_ms) {
			oldest = cl;
		}
	}
	memset(oldest, 0, sizeof(*oldest));
	snprintf(oldest->cc_addr, sizeof(oldest->cc_addr), "%s", addr);
	oldest->cc_window_start_ms = now;
	return oldest;
}

static void console_login_page(struct reply *ret, int status, const char *error)
{
	struct buf b;

	buf_init(&b, CONSOLE_PAGE_MAX);
	console_reply_buf(ret, console_page_login(&b, error) < 0 ? -1 : status, &b);
}

/* host[:port] of an authority, with the scheme's default port left out. */
static size_t console_authority(const char *a, size_t n, int https)
{
	if (https && n > 4 && strncmp(a + n - 4, ":443", 4) == 0) {
		return n - 4;
	}
	if (!https && n > 3 && strncmp(a + n - 3, ":80", 3) == 0) {
		return n - 3;
	}
	return n;
}

/* Whether a login POST comes from the console's own pages, as far as the
 * browser tells: NULL when it may go on, else why not. A browser that sends
 * Sec-Fetch-Site computed it itself: same-origin (or none: typed, a
 * bookmark) is the console's own form, anything else another site's. One
 * that does not is judged by Origin, which must then be the console's own:
 * the Host the request names (behind a proxy, the one the browser used:
 * the proxy passes it on), over http or https (a TLS proxy in front).
 * "null" (a sandboxed frame, a data: page) is no one's own. No header at
 * all is not a browser's cross-site form (curl, a script): it goes on. */
static const char *console_cross_site(const struct http_request *req)
{
	const char *site = http_header_get(req, "Sec-Fetch-Site");
	const char *origin = http_header_get(req, "Origin");
	const char *host = http_header_get(req, "Host");
	const char *authority;
	size_t n;
	size_t hn;
	int https;

	if (site != NULL) {
		return strcmp(site, "same-origin") == 0 || strcmp(site, "none") == 0
		               ? NULL
		               : "the browser says it was sent from another site";
	}
	if (origin == NULL) {
		return NULL;
	}
	https = strncmp(origin, "https://", 8) == 0;
	if (!https && strncmp(origin, "http://", 7) != 0) {
		return "its Origin is not the console's";
	}
	authority = origin + (https ? 8 : 7);
	n = console_authority(authority, strlen(authority), https);
	hn = host != NULL ? console_authority(host, strlen(host), https) : 0;
	if (host == NULL || n != hn || strncasecmp(authority, host, n) != 0) {
		return "its Origin is not the console's";
	}
	return NULL;
}

/* ---- writes waited for a bounded time ----
 * An action's write (and login's audit row) runs on the store's thread of
 * writes (store_call_owned_write) and is waited for at most
 * CONSOLE_DB_WAIT_MS, as the pages' reads are: a hung database answers
 * 503, not never, and a write stuck behind the write lock leaves the
 * pages' reads (and /metrics') their own thread. The job owns
 * copies of everything the write needs, the configuration's reference
 * among them, so a write that outlives its wait (and may still be applied
 * when the database answers) uses nothing of the request's; the store's
 * thread frees it then. */

enum console_wkind {
	CONSOLE_W_AUDIT,
	CONSOLE_W_OUTBOX,
	CONSOLE_W_DISMISS,
	CONSOLE_W_REPROCESS,
	CONSOLE_W_DISMISS_ALL, /* dismiss what wj_q's filters select */
};

struct console_wjob {
	enum console_wkind wj_kind;
	const struct env *wj_env;
	struct config *wj_cf; /* reprocess: a reference of the job's own */
	int64_t wj_now_ms;
	int64_t wj_id;
	char wj_actor[CONSOLE_NAME_MAX + 16];
	char wj_op[40];      /* outbox: retry, cancel, compensate; audit: the action */
	char wj_target[220]; /* audit */
	char *wj_reason;     /* or NULL */
	char *wj_result;     /* audit */
	struct outbox_conf wj_oc;
	int wj_have_oc;
	int64_t wj_expect;                 /* dismiss all: the count confirmed */
	struct console_events_query *wj_q; /* dismiss all: the filters, the job's own */
	int64_t wj_count;                  /* dismiss all: the events matching */
	/* what the write gives back, when it ended in time */
	int wj_rc;
	char wj_msg[CONSOLE_DB_MSG_MAX + 300];
	struct console_db_reprocess wj_rp;
};

static void console_wjob_free(void *arg)
{
	struct console_wjob *j = arg;

	if (j == NULL) {
		return;
	}
	if (j->wj_have_oc) {
		outbox_conf_finish(&j->wj_oc);
	}
	if (j->wj_cf != NULL) {
		env_config_release(j->wj_env, j->wj_cf);
	}
	if (j->wj_q != NULL) {
		console_events_query_finish(j->wj_q);
		free(j->wj_q);
	}
	free(j->wj_reason);
	free(j->wj_result);
	free(j);
}

static int console_wjob_run(struct store *st, void *arg)
{
	struct console_wjob *j = arg;

	switch (j->wj_kind) {
	case CONSOLE_W_AUDIT:
		j->wj_rc = console_db_audit(st, j->wj_now_ms, j->wj_actor, j->wj_op, j->wj_target,
		                            j->wj_reason, j->wj_result);
		break;
	case CONSOLE_W_OUTBOX:
		j->wj_rc = console_db_outbox_admin(st, j->wj_have_oc ? &j->wj_oc : NULL,
		                                   j->wj_now_ms, j->wj_actor, j->wj_op, j->wj_id,
		                                   j->wj_reason, j->wj_msg, sizeof(j->wj_msg));
		break;
	case CONSOLE_W_DISMISS:
		j->wj_rc = console_db_dismiss(st, j->wj_now_ms, j->wj_actor, j->wj_id, j->wj_reason,
		                              j->wj_msg, sizeof(j->wj_msg));
		break;
	case CONSOLE_W_REPROCESS:
		j->wj_rc = console_db_reprocess(st, j->wj_cf, j->wj_now_ms, j->wj_actor, j->wj_id,
		                                &j->wj_rp);
		break;
	case CONSOLE_W_DISMISS_ALL:
		j->wj_rc = console_db_dismiss_filter(st, j->wj_now_ms, j->wj_actor, &j->wj_q->eq_f,
		                                     j->wj_reason, j->wj_expect, &j->wj_count);
		break;
	}
	return 0;
}

/* A job of kind for actor at now_ms, reason copied (NULL: none); NULL
 * when out of memory. */
static struct console_wjob *console_wjob_new(enum console_wkind kind, const struct env *env,
                                             int64_t now_ms, const char *actor, const char *reason)
{
	struct console_wjob *j = calloc(1, sizeof(*j));

	if (j == NULL) {
		return NULL;
	}
	j->wj_kind = kind;
	j->wj_env = env;
	j->wj_now_ms = now_ms;
	snprintf(j->wj_actor, sizeof(j->wj_actor), "%s", actor);
	if (reason != NULL && (j->wj_reason = strdup(reason)) == NULL) {
		free(j);
		return NULL;
	}
	return j;
}

/* Runs job j (given away) waited for at most CONSOLE_DB_WAIT_MS. Returns
 * 0 with *ret_j the job ended in time (the caller frees it),
 * STORE_CALL_NOT_RUN (nothing was done: the database does not answer, or
 * out of memory) or STORE_CALL_LATE (begun, the outcome unknown: the job
 * is the store's now). */
static int console_wjob_call(struct store *st, struct console_wjob *j, struct console_wjob **ret_j)
{
	int rc;

	*ret_j = NULL;
	if (j == NULL) {
		log_err("console: out of memory");
		return STORE_CALL_NOT_RUN;
	}
	rc = store_call_owned_write(st, CONSOLE_DB_WAIT_MS, console_wjob_run, j, console_wjob_free);
	if (rc == STORE_CALL_LATE) {
		return rc; /* the store's thread frees it */
	}
	if (rc < -1) {
		console_wjob_free(j);
		return STORE_CALL_NOT_RUN;
	}
	*ret_j = j;
	return 0;
}

/* console_db_audit, waited for at most CONSOLE_DB_WAIT_MS: 0 when
 * recorded, -1 on a store error, STORE_CALL_NOT_RUN when the database did
 * not answer (not recorded), STORE_CALL_LATE when it may still be. */
static int console_audit_within(const struct env *env, int64_t now_ms, const char *actor,
                                const char *action, const char *target, const char *reason,
                                const char *result)
{
	struct console_wjob *j = console_wjob_new(CONSOLE_W_AUDIT, env, now_ms, actor, reason);
	struct console_wjob *done;
	int rc;

	if (j != NULL) {
		snprintf(j->wj_op, sizeof(j->wj_op), "%s", action);
		snprintf(j->wj_target, sizeof(j->wj_target), "%s", target);
		j->wj_result = strdup(result);
		if (j->wj_result == NULL) {
			console_wjob_free(j);
			j = NULL;
		}
	}
	rc = console_wjob_call(env->env_store, j, &done);
	if (rc == 0) {
		rc = done->wj_rc < 0 ? -1 : 0;
		console_wjob_free(done);
	}
	return rc;
}

/* What an action answers when its write did not end in time (rc:
 * STORE_CALL_NOT_RUN or STORE_CALL_LATE): 503 with Retry-After, and what
 * is known of its outcome. */
#define CONSOLE_RETRY_AFTER "5"
#define CONSOLE_NOT_RUN_MSG                                                                        \
	"The database is not answering (an earlier request still waits for it); nothing was "      \
	"changed. Try again in a moment."
#define CONSOLE_READ_LATE_MSG                                                                      \
	"The database did not answer within " CONSOLE_DB_WAIT_TEXT                                 \
	" (reading the rows to retry); nothing was changed. Try again in a moment."
#define CONSOLE_LATE_MSG                                                                           \
	"The database did not answer within " CONSOLE_DB_WAIT_TEXT                                 \
	": the outcome of this action is unknown. It may still be applied when the database "      \
	"answers, or not at all. Reload this page in a moment to see it (and the audit log, "      \
	"/console/audit) before you send it again."

static void console_login(struct console *c, const struct http_request *req, int64_t now,
                          struct reply *ret)
{
	const char *client = req->hr_client != NULL ? req->hr_client : "unknown";
	struct console_session *slot = NULL;
	struct console_client *cl;
	char cookie[300];
	char *token = console_form(req, "token");
	char actor[CONSOLE_NAME_MAX + 16] = "";
	char sid[2 * CONSOLE_SESSION_ID_BYTES + 1] = "";
	const struct console_token *match = NULL;
	const char *foreign = console_cross_site(req);
	int limited = 0;
	size_t i;

	/* Refused before the token is looked at or counted: another site's
	 * page can neither log a browser into its own session nor lock
	 * everyone out with failed logins. */
	if (foreign != NULL) {
		log_warn("console: login from %s refused: %s", client, foreign);
		console_login_page(ret, 403,
		                   "This login was refused: it was not sent from the console's "
		                   "own login page. Open the console's address and log in there.");
		if (token != NULL) {
			memset(token, 0, strlen(token));
			free(token);
		}
		return;
	}
	pthread_mutex_lock(&c->co_lock);
	cl = console_client(c, client, now);
	if (cl->cc_failures >= c->co_conf.cc_login_failures) {
		limited = 1;
	} else if (token != NULL) {
		/* Every token is compared, in constant time each, so the time
		 * taken does not say which one came close. */
		for (i = 0; i < c->co_conf.cc_n_tokens; i++) {
			const struct console_token *t = &c->co_conf.cc_tokens[i];

			if (crypto_equal(t->ct_secret, t->ct_len, token, strlen(token)) &&
			    match == NULL) {
				match = t;
			}
		}
	}
	if (!limited && match == NULL) {
		cl->cc_failures++;
	}
	if (match != NULL) {
		int64_t oldest_exp = INT64_MAX;

		cl->cc_failures = 0;
		for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
			struct console_session *s = &c->co_sessions[i];

			if (s->cs_id[0] == '\0' || s->cs_expires_ms <= now) {
				slot = s;
				break;
			}
			if (s->cs_expires_ms < oldest_exp) {
				oldest_exp = s->cs_expires_ms;
				slot = s;
			}
		}
		memset(slot, 0, sizeof(*slot));
		if (console_random_hex(slot->cs_id) < 0 || console_random_hex(slot->cs_csrf) < 0 ||
		    console_secret_mac(c, match, slot->cs_secret_mac) < 0) {
			memset(slot, 0, sizeof(*slot));
			slot = NULL;
		} else {
			snprintf(slot->cs_name, sizeof(slot->cs_name), "%s", match->ct_name);
			slot->cs_role = match->ct_role;
			slot->cs_expires_ms = now + c->co_conf.cc_session_ttl_s * 1000;
			snprintf(cookie, sizeof(cookie),
			         CONSOLE_COOKIE "=%s; Path=/console; Max-Age=%" PRId64
			                        "; HttpOnly; SameSite=Strict%s",
			         slot->cs_id, c->co_conf.cc_session_ttl_s,
			         c->co_conf.cc_cookie_secure ? "; Secure" : "");
			snprintf(actor, sizeof(actor), "console:%s", match->ct_name);
			snprintf(sid, sizeof(sid), "%s", slot->cs_id);
		}
	}
	pthread_mutex_unlock(&c->co_lock);
	if (token != NULL) {
		memset(token, 0, strlen(token));
		free(token);
	}
	if (limited) {
		log_warn("console: login refused for %s: too many failed logins", client);
		console_login_page(ret, 429,
		                   "Too many failed logins from this address; try again "
		                   "in 15 minutes.");
		reply_add_header(ret, "Retry-After", "900");
		return;
	}
	if (slot == NULL) {
		log_warn("console: failed login from %s", client);
		console_login_page(ret, 401, "That token is not valid.");
		return;
	}
	/* A login is recorded before its session is given: on a database
	 * that does not answer, the session made above is taken back (a
	 * row written late records a login that got no session). */
	if (console_audit_within(c->co_env, now, actor, "console.login", "console", NULL, "ok") <
	    -1) {
		pthread_mutex_lock(&c->co_lock);
		for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
			/* by its id: the slot may be another login's by now */
			if (strcmp(c->co_sessions[i].cs_id, sid) == 0) {
				memset(&c->co_sessions[i], 0, sizeof(c->co_sessions[i]));
			}
		}
		pthread_mutex_unlock(&c->co_lock);
		log_warn("console: login of %s from %s refused: the database did not answer "
		         "within %s (the login is recorded in the audit log first)",
		         actor, client, CONSOLE_DB_WAIT_TEXT);
		console_login_page(
		        ret, 503,
		        "The database is not answering (it did not answer "
		        "within " CONSOLE_DB_WAIT_TEXT
		        "), and a login is recorded in the audit log before it is let in: "
		        "you are not logged in. Try again in a moment.");
		reply_add_header(ret, "Retry-After", CONSOLE_RETRY_AFTER);
		return;
	}
	console_redirect(ret, "/console/");
	reply_add_header(ret, "Set-Cookie", cookie);
}

static void console_logout(struct console *c, const struct console_session *s, int64_t now,
                           struct reply *ret)
{
	size_t i;

	pthread_mutex_lock(&c->co_lock);
	for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
		if (strcmp(c->co_sessions[i].cs_id, s->cs_id) == 0) {
			memset(&c->co_sessions[i], 0, sizeof(c->co_sessions[i]));
		}
	}
	pthread_mutex_unlock(&c->co_lock);
	console_redirect(ret, "/console/login");
	reply_add_header(ret, "Set-Cookie",
	                 CONSOLE_COOKIE "=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict");
}

/* ---- actions ---- */

/* "/console/events/12/dismiss" -> 12 and "dismiss" (suffix points into path). */
static int console_path_id(const char *path, const char *prefix, int64_t *ret_id,
                           const char **ret_suffix)
{
	const char *p;
	char *end;
	long long v;

	if (strncmp(path, prefix, strlen(prefix)) != 0) {
		return -1;
	}
	p = path + strlen(prefix);
	if (*p < '1' || *p > '9') {
		return -1;
	}
	errno = 0;
	v = strtoll(p, &end, 10);
	if (errno != 0 || v <= 0) {
		return -1;
	}
	if (*end == '\0') {
		*ret_suffix = "";
	} else if (*end == '/') {
		*ret_suffix = end + 1;
	} else {
		return -1;
	}
	*ret_id = v;
	return 0;
}

static void console_get(const struct console_ctx *cx, const struct http_request *req, int status,
                        struct reply *ret);

/* The GET page at url (its path decoded: path) in answer to an action,
 * with msg on top, answered with status when the page itself is there:
 * the page as the operator would load it, filters and forms included. */
static void console_render_within(struct reply *ret, const struct console_ctx *cx,
                                  const struct http_request *req, const char *url, const char *path,
                                  int status, const char *msg, int error, int64_t deadline_ms)
{
	struct http_request get = *req;
	struct console_ctx with = *cx;

	get.hr_method = "GET";
	get.hr_url = url;
	get.hr_path = path;
	with.cx_flash = msg;
	with.cx_flash_error = error;
	with.cx_deadline_ms = deadline_ms;
	console_get(&with, &get, status, ret);
}

/* console_render_within, the page's reads with a deadline of their own,
 * after the action's write (which waited at most as long). */
static void console_render(struct reply *ret, const struct console_ctx *cx,
                           const struct http_request *req, const char *url, const char *path,
                           int status, const char *msg, int error)
{
	console_render_within(ret, cx, req, url, path, status, msg, error,
	                      console_mono_ms() + CONSOLE_DB_WAIT_MS);
}

#define CONSOLE_RESULT_MAX 700 /* an audit row's result */

/* One action under way: what it is and is on, for the audit log, and what
 * it tells the dispatcher back (console_route records every action there,
 * refusals included, except one that recorded itself inside its own
 * transaction). */
struct console_act {
	struct console *a_c;
	const struct console_ctx *a_cx;
	const struct http_request *a_req;
	const char *a_sid;                   /* the session's id: where its flash goes */
	char a_actor[CONSOLE_NAME_MAX + 16]; /* console:NAME */
	char a_action[40];                   /* events.dismiss, outbox.retry, ... */
	char a_target[220];                  /* event:ID, outbox:ID, order:ID, ... */
	int64_t a_id;                        /* the path's id, where it has one */
	char a_result[CONSOLE_RESULT_MAX];   /* ok: ..., refused: ..., error: ... */
	int a_audited;                       /* recorded by the action itself */
	void (*a_fn)(struct console_act *a, struct reply *ret);
};

/* Keeps msg for session sid, for the GET of url to show once. */
static void console_flash_set(struct console *c, const char *sid, const char *url, const char *msg,
                              int error, int64_t now)
{
	unsigned char hash[CRYPTO_SHA256_LEN];
	size_t i;

	crypto_sha256(url, strlen(url), hash);
	pthread_mutex_lock(&c->co_lock);
	for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
		struct console_session *s = &c->co_sessions[i];

		if (s->cs_id[0] != '\0' && strcmp(s->cs_id, sid) == 0) {
			snprintf(s->cs_flash, sizeof(s->cs_flash), "%s", msg);
			memcpy(s->cs_flash_url_hash, hash, sizeof(hash));
			s->cs_flash_set = 1;
			s->cs_flash_error = error;
			s->cs_flash_at_ms = now;
		}
	}
	pthread_mutex_unlock(&c->co_lock);
}

/* The message session sid keeps for the GET of url, into out (taken: shown
 * once). Returns 1, or 0 when none. */
static int console_flash_take(struct console *c, const char *sid, const char *url, int64_t now,
                              char *out, size_t size, int *ret_error)
{
	unsigned char hash[CRYPTO_SHA256_LEN];
	int found = 0;
	size_t i;

	crypto_sha256(url, strlen(url), hash);
	pthread_mutex_lock(&c->co_lock);
	for (i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
		struct console_session *s = &c->co_sessions[i];

		if (s->cs_id[0] == '\0' || strcmp(s->cs_id, sid) != 0 || !s->cs_flash_set ||
		    memcmp(s->cs_flash_url_hash, hash, sizeof(hash)) != 0) {
			continue;
		}
		if (now - s->cs_flash_at_ms < CONSOLE_FLASH_TTL_MS) {
			snprintf(out, size, "%s", s->cs_flash);
			*ret_error = s->cs_flash_error;
			found = 1;
		}
		s->cs_flash[0] = '\0';
		s->cs_flash_set = 0;
	}
	pthread_mutex_unlock(&c->co_lock);
	return found;
}

/* Where an action leads: the GET page at url (path: decoded) it concerns.
 * An action that was carried out (status 200: it changed something, or
 * may have) answers 303 to it, its message kept for that page to show
 * once: Post/Redirect/Get, so reloading the page does not send the action
 * again. One refused or failed before it changed anything answers that
 * page at once, with its status (404, 409, 503) and the message. */
static void console_after(struct console_act *a, struct reply *ret, int status, const char *url,
                          const char *path, const char *msg, int error)
{
	if (status != 200) {
		console_render(ret, a->a_cx, a->a_req, url, path, status, msg, error);
		return;
	}
	console_flash_set(a->a_c, a->a_sid, url, msg, error, a->a_cx->cx_now_ms);
	console_redirect(ret, url);
}

static void console_result(char *out, size_t size, int rc, const char *msg)
{
	if (rc < 0) {
		snprintf(out, size, "error");
	} else if (rc == 0) {
		snprintf(out, size, "ok: %s", msg);
	} else {
		snprintf(out, size, "refused: %s", msg);
	}
}

/* An action whose write did not end in time (rc: STORE_CALL_NOT_RUN or
 * STORE_CALL_LATE): 503 with Retry-After on the page at url. One begun
 * records itself when applied; one not begun is recorded as an error by
 * console_route, if the database lets it. */
static void console_write_late(struct console_act *a, struct reply *ret, int rc, const char *url,
                               const char *path)
{
	if (rc == STORE_CALL_LATE) {
		a->a_audited = 1;
		log_warn("console: %s by %s on %s: the database did not answer within %s; its "
		         "outcome is unknown",
		         a->a_action, a->a_actor, a->a_target, CONSOLE_DB_WAIT_TEXT);
		/* The database did not answer the write: the page's reads
		 * get what is left of the request's time (nothing, as a
		 * rule), not 1.5 s more of waiting for it. */
		console_render_within(ret, a->a_cx, a->a_req, url, path, 503, CONSOLE_LATE_MSG, 1,
		                      a->a_cx->cx_deadline_ms);
		return;
	} else {
		snprintf(a->a_result, sizeof(a->a_result),
		         "error: the database is not answering; nothing changed");
	}
	console_after(a, ret, 503, url, path,
	              rc == STORE_CALL_LATE ? CONSOLE_LATE_MSG : CONSOLE_NOT_RUN_MSG, 1);
}

/* Dismiss and reprocess record themselves in their own transaction (also
 * a refusal found there); what is refused before, here. */
static void console_action_event(struct console_act *a, struct reply *ret)
{
	const struct console_ctx *cx = a->a_cx;
	const struct env *env = a->a_c->co_env;
	struct console_wjob *j;
	char msg[CONSOLE_DB_MSG_MAX + 300];
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "/console/events/%" PRId64, a->a_id);
	if (strcmp(a->a_action, "events.dismiss") == 0) {
		char *reason = console_form(a->a_req, "reason");
		int reason_ok = console_db_reason_ok(reason);

		if (!reason_ok) {
			/* refused before any transaction: no database needed */
			rc = console_db_dismiss(cx->cx_store, cx->cx_now_ms, a->a_actor, a->a_id,
			                        reason, msg, sizeof(msg));
		} else {
			j = console_wjob_new(CONSOLE_W_DISMISS, env, cx->cx_now_ms, a->a_actor,
			                     reason);
			if (j != NULL) {
				j->wj_id = a->a_id;
			}
			rc = console_wjob_call(cx->cx_store, j, &j);
			if (rc < -1) {
				free(reason);
				console_write_late(a, ret, rc, url, url);
				return;
			}
			rc = j->wj_rc;
			snprintf(msg, sizeof(msg), "%s", j->wj_msg);
			console_wjob_free(j);
		}
		/* Without a valid reason it is refused before any transaction;
		 * the same count of characters as console_db_dismiss's, not of
		 * bytes (500 characters of Chinese are a valid reason). */
		a->a_audited = rc >= 0 && reason_ok;
		free(reason);
		console_result(a->a_result, sizeof(a->a_result), rc, msg);
		console_after(a, ret,
		              rc == CONSOLE_DB_OK        ? 200
		              : rc == CONSOLE_DB_UNKNOWN ? 404
		              : rc < 0                   ? 503
		                                         : 409,
		              url, url, rc < 0 ? "The store failed; nothing changed." : msg,
		              rc != CONSOLE_DB_OK);
		return;
	}
	{
		struct console_db_reprocess rp;

		j = console_wjob_new(CONSOLE_W_REPROCESS, env, cx->cx_now_ms, a->a_actor, NULL);
		if (j != NULL) {
			j->wj_id = a->a_id;
			j->wj_cf = env_config_acquire(env);
		}
		rc = console_wjob_call(cx->cx_store, j, &j);
		if (rc < -1) {
			console_write_late(a, ret, rc, url, url);
			return;
		}
		rc = j->wj_rc;
		rp = j->wj_rp;
		console_wjob_free(j);
		if (rc < 0) {
			snprintf(a->a_result, sizeof(a->a_result), "error");
			console_after(a, ret, 503, url, url, "The store failed; nothing changed.",
			              1);
			return;
		}
		a->a_audited = 1;
		if (rp.rp_state == CONSOLE_DB_RP_UNKNOWN) {
			console_after(a, ret, 404, url, url, "No such event.", 1);
			return;
		}
		if (rp.rp_state != CONSOLE_DB_RP_DONE) {
			console_after(
			        a, ret, 409, url, url,
			        rp.rp_state == CONSOLE_DB_RP_NOT_FAILED
			                ? "This event is not failed; nothing to reprocess."
			                : "This event was refused by the provider's own rules.",
			        1);
			return;
		}
		if (rp.rp_res.or_refused) {
			snprintf(msg, sizeof(msg), "Reprocessed: still failed (%s).",
			         rp.rp_res.or_reason);
		} else {
			snprintf(msg, sizeof(msg), "Reprocessed: done, order %s %s.",
			         rp.rp_res.or_order_id[0] != '\0' ? rp.rp_res.or_order_id : "-",
			         rp.rp_res.or_effect != NULL ? rp.rp_res.or_effect : "-");
			env_outbox_kick(a->a_c->co_env);
		}
		console_after(a, ret, 200, url, url, msg, rp.rp_res.or_refused);
	}
}

static void console_action_outbox(struct console_act *a, struct reply *ret)
{
	const struct console_ctx *cx = a->a_cx;
	struct console_wjob *j;
	char msg[CONSOLE_DB_MSG_MAX + 300];
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "/console/outbox/%" PRId64, a->a_id);
	j = console_wjob_new(CONSOLE_W_OUTBOX, a->a_c->co_env, cx->cx_now_ms, a->a_actor, NULL);
	if (j == NULL) {
		console_write_late(a, ret, STORE_CALL_NOT_RUN, url, url);
		return;
	}
	j->wj_id = a->a_id;
	snprintf(j->wj_op, sizeof(j->wj_op), "%s", a->a_action + strlen("outbox."));
	if (strcmp(a->a_action, "outbox.compensate") == 0) {
		if (outbox_conf_load(cx->cx_cf, 1, &j->wj_oc) < 0) {
			console_wjob_free(j);
			snprintf(a->a_result, sizeof(a->a_result),
			         "error: the [outbound] section is unusable");
			console_after(a, ret, 503, url, url,
			              "The [outbound] section is unusable; nothing changed.", 1);
			return;
		}
		j->wj_have_oc = 1;
	}
	/* It records itself, but for a row that does not exist. */
	rc = console_wjob_call(cx->cx_store, j, &j);
	if (rc < -1) {
		console_write_late(a, ret, rc, url, url);
		return;
	}
	rc = j->wj_rc;
	snprintf(msg, sizeof(msg), "%s", j->wj_msg);
	console_wjob_free(j);
	a->a_audited = rc != OUTBOX_ADMIN_UNKNOWN;
	console_result(a->a_result, sizeof(a->a_result), rc, msg);
	if (rc == OUTBOX_ADMIN_OK) {
		env_outbox_kick(a->a_c->co_env);
	}
	console_after(a, ret,
	              rc == OUTBOX_ADMIN_OK        ? 200
	              : rc == OUTBOX_ADMIN_UNKNOWN ? 404
	              : rc < 0                     ? 503
	                                           : 409,
	              url, url, rc < 0 ? "The store failed; nothing changed." : msg,
	              rc != OUTBOX_ADMIN_OK);
}

/* A row of the order read before a reconcile run: only whether it answers
 * matters. */
static int console_reconcile_seen(void *arg, const struct store_row *row)
{
	(void)arg;
	(void)row;
	return 1;
}

static void console_run_free(struct console_run *r)
{
	if (r == NULL) {
		return;
	}
	reconcile_report_finish(&r->cr_rep);
	free(r);
}

/* ro_sleep of a run: the backoff between attempts, cut short (1: give
 * up) when the console stops. */
static int console_run_sleep(void *arg, int64_t ms)
{
	struct console *c = arg;

	while (ms > 0 && !__atomic_load_n(&c->co_stopping, __ATOMIC_ACQUIRE)) {
		int64_t step = ms < 100 ? ms : 100;
		struct timespec ts = {(time_t)(step / 1000), (long)(step % 1000) * 1000000L};

		nanosleep(&ts, NULL);
		ms -= step;
	}
	return __atomic_load_n(&c->co_stopping, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* What an ended run r says: its audit result into result, its message
 * for the order page into msg, *ret_error when that message is an error.
 * Returns the status the request answers it with: 200 (it ran, and may
 * have applied events), 404 (no such order), 409 (no provider of the
 * order can be asked), 503 (no run was possible). */
static int console_run_outcome(const struct console_run *r, char *msg, size_t msg_size,
                               char *result, size_t result_size, int *ret_error)
{
	const struct reconcile_report *rep = &r->cr_rep;
	const char *why = NULL;
	size_t asked = 0;
	size_t i;

	*ret_error = 1;
	if (r->cr_rc < 0 && rep->rr_order_unknown) {
		snprintf(msg, msg_size, "No such order; nothing was asked.");
		snprintf(result, result_size, "refused: no such order");
		return 404;
	}
	if (r->cr_rc < 0) {
		snprintf(msg, msg_size, "The reconcile run could not start; nothing changed.");
		snprintf(result, result_size, "error");
		return 503;
	}
	for (i = 0; i < rep->rr_n; i++) {
		if (rep->rr_instances[i].rn_mode != PROVIDER_RECONCILE_NONE) {
			asked++;
		} else if (why == NULL) {
			why = rep->rr_instances[i].rn_why;
		}
	}
	if (asked == 0) {
		snprintf(msg, msg_size, "No provider of this order can be asked: %s.",
		         why != NULL ? why : "none is configured");
		snprintf(result, result_size, "refused: %s", msg);
		return 409;
	}
	snprintf(msg, msg_size,
	         "Reconciled: %" PRId64 " event(s) found, %" PRId64 " applied, %" PRId64
	         " known, %" PRId64 " refused, %" PRId64 " failed.",
	         rep->rr_events_found, rep->rr_applied, rep->rr_known, rep->rr_refused,
	         rep->rr_failed);
	snprintf(result, result_size, "%s: %s", rep->rr_failed > 0 ? "failed" : "ok", msg);
	*ret_error = rep->rr_failed > 0;
	return 200;
}

/* The audit row of a run's outcome, from its thread: a write the store
 * did not begin (another write still waits for the database, or a read
 * does) is tried again every 500 ms for CONSOLE_RUN_AUDIT_MS, but once
 * the console stops; one begun is left to end, never sent twice. Returns
 * as console_audit_within. */
static int console_run_audit(struct console *c, const struct console_run *r, const char *result)
{
	const struct env *env = c->co_env;
	int64_t until = console_mono_ms() + CONSOLE_RUN_AUDIT_MS;
	int rc;

	for (;;) {
		rc = console_audit_within(env, env_now_ms(env), r->cr_actor, "order.reconcile",
		                          r->cr_target, NULL, result);
		if (rc != STORE_CALL_NOT_RUN || console_mono_ms() >= until ||
		    console_run_sleep(c, 500)) {
			return rc;
		}
	}
}

/* A run's thread: the engine's reconcile run for one order. When the
 * request that started it stopped waiting (cr_detached), the outcome is
 * recorded here: once in the audit log, and as the flash of the session
 * that asked, for its next look at the order page. */
static void *console_run_main(void *arg)
{
	struct console_run *r = arg;
	struct console *c = r->cr_c;
	const struct env *env = c->co_env;
	struct reconcile_options opt;
	char result[CONSOLE_RESULT_MAX];
	char msg[600];
	int detached;
	int error;
	int rc;

	memset(&opt, 0, sizeof(opt));
	opt.ro_older_than_s = -1;
	opt.ro_order = r->cr_order;
	opt.ro_sleep = console_run_sleep;
	opt.ro_sleep_arg = c;
	rc = reconcile_run(env->env_store, r->cr_cf, &opt, &r->cr_rep);
	env_config_release(env, r->cr_cf);
	r->cr_cf = NULL;
	pthread_mutex_lock(&c->co_lock);
	r->cr_rc = rc;
	r->cr_ended = 1;
	detached = r->cr_detached;
	pthread_cond_broadcast(&c->co_run_cond);
	pthread_mutex_unlock(&c->co_lock);
	if (detached) {
		console_run_outcome(r, msg, sizeof(msg), result, sizeof(result), &error);
		if (r->cr_rep.rr_applied > 0) {
			env_outbox_kick(env);
		}
		log_notice("console: order.reconcile by %s on %s ended after its request: %s",
		           r->cr_actor, r->cr_target, result);
		if (console_run_audit(c, r, result) < 0) {
			log_err("console: order.reconcile by %s on %s not recorded in the audit "
			        "log",
			        r->cr_actor, r->cr_target);
		}
		console_flash_set(c, r->cr_sid, r->cr_url, msg, error, env_now_ms(env));
	}
	pthread_mutex_lock(&c->co_lock);
	r->cr_done = 1;
	pthread_mutex_unlock(&c->co_lock);
	return NULL;
}

/* Starts a run for action a on order (its page: url), unless a run of
 * the same order is under way: then 1 with its actor and start (wall
 * clock ms) in ret_busy_actor and *ret_busy_ms. Returns 0 with *ret_r
 * (held: console_run_wait lets go of it), 1, or -1 when no run could
 * start (CONSOLE_RUNS_MAX under way, out of memory, no thread: logged).
 * Runs whose thread is done are joined and freed here. */
static int console_run_start(struct console_act *a, const char *order, const char *url,
                             struct console_run **ret_r, char *ret_busy_actor, size_t busy_size,
                             int64_t *ret_busy_ms)
{
	struct console *c = a->a_c;
	struct console_run *reap[CONSOLE_RUNS_MAX];
	struct console_run *r;
	size_t n_reap = 0;
	size_t free_slot = CONSOLE_RUNS_MAX;
	size_t i;
	int rc = -1;
	int err;

	*ret_r = NULL;
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		log_err("console: out of memory");
		return -1;
	}
	r->cr_c = c;
	snprintf(r->cr_order, sizeof(r->cr_order), "%s", order);
	snprintf(r->cr_actor, sizeof(r->cr_actor), "%s", a->a_actor);
	snprintf(r->cr_target, sizeof(r->cr_target), "%s", a->a_target);
	snprintf(r->cr_sid, sizeof(r->cr_sid), "%s", a->a_sid);
	snprintf(r->cr_url, sizeof(r->cr_url), "%s", url);
	r->cr_started_ms = a->a_cx->cx_now_ms;
	r->cr_held = 1;
	pthread_mutex_lock(&c->co_lock);
	for (i = 0; i < CONSOLE_RUNS_MAX; i++) {
		struct console_run *o = c->co_runs[i];

		if (o != NULL && o->cr_done && !o->cr_held) {
			reap[n_reap++] = o;
			c->co_runs[i] = NULL;
			o = NULL;
		}
		if (o == NULL) {
			free_slot = free_slot < i ? free_slot : i;
		} else if (strcmp(o->cr_order, order) == 0) {
			snprintf(ret_busy_actor, busy_size, "%s", o->cr_actor);
			*ret_busy_ms = o->cr_started_ms;
			rc = 1;
		}
	}
	if (rc != 1 && free_slot == CONSOLE_RUNS_MAX) {
		log_warn("console: order.reconcile by %s on %s refused: %d runs under way",
		         a->a_actor, a->a_target, CONSOLE_RUNS_MAX);
	} else if (rc != 1) {
		r->cr_cf = env_config_acquire(c->co_env);
		err = pthread_create(&r->cr_thread, NULL, console_run_main, r);
		if (err != 0) {
			log_err("console: cannot start a reconcile run: %s", strerror(err));
			env_config_release(c->co_env, r->cr_cf);
		} else {
			c->co_runs[free_slot] = r;
			*ret_r = r;
			r = NULL;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&c->co_lock);
	free(r);
	for (i = 0; i < n_reap; i++) {
		pthread_join(reap[i]->cr_thread, NULL);
		console_run_free(reap[i]);
	}
	return rc;
}
/* Waits for run r until deadline_ms (CLOCK_MONOTONIC). Returns 1 when it
 * ended (its report is the caller's to read; console_run_release after),
 * or 0: it goes on, and records its own outcome (the caller let go). */
static int console_run_wait(struct console *c, struct console_run *r, int64_t deadline_ms)
{
	struct timespec ts = {(time_t)(deadline_ms / 1000), (long)(deadline_ms % 1000) * 1000000L};
	int ended;

	pthread_mutex_lock(&c->co_lock);
	while (!r->cr_ended) {
		if (pthread_cond_timedwait(&c->co_run_cond, &c->co_lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	ended = r->cr_ended;
	if (!ended) {
		r->cr_detached = 1;
		r->cr_held = 0;
	}
	pthread_mutex_unlock(&c->co_lock);
	return ended;
}

static void console_run_release(struct console *c, struct console_run *r)
{
	pthread_mutex_lock(&c->co_lock);
	r->cr_held = 0;
	pthread_mutex_unlock(&c->co_lock);
}

/* The run of order under way, said for its page into out (who asked, how
 * long ago): 1, or 0 when none (console_ctx cx_order_run). */
static int console_run_note(void *arg, const char *order, int64_t now_ms, char *out, size_t size)
{
	struct console *c = arg;
	size_t i;
	int found = 0;

	pthread_mutex_lock(&c->co_lock);
	for (i = 0; i < CONSOLE_RUNS_MAX && !found; i++) {
		const struct console_run *r = c->co_runs[i];

		if (r != NULL && !r->cr_done && strcmp(r->cr_order, order) == 0) {
			snprintf(out, size,
			         "A reconcile run of this order is under way (asked by %s %" PRId64
			         " s ago): the provider has not answered yet. Its outcome will be "
			         "shown on this page and in the operator history below.",
			         r->cr_actor,
			         now_ms > r->cr_started_ms ? (now_ms - r->cr_started_ms) / 1000
			                                   : 0);
			found = 1;
		}
	}
	pthread_mutex_unlock(&c->co_lock);
	return found;
}

/* Reconcile one order now: the engine's reconcile run (reconcile.h) for
 * this order alone (reconcile_options ro_order: its provider instance,
 * or every one that can be asked when no payment has named one yet, from
 * a minute before the order was created), on a thread of its own. The
 * request waits for it until its deadline: an outcome in time is
 * answered as any action's; past it the answer says the run goes on and
 * where its outcome will show, and the run records it (console_run_main).
 * One run per order at a time. Audited as order.reconcile, once. */
static void console_action_reconcile(struct console_act *a, struct reply *ret)
{
	const struct console_ctx *cx = a->a_cx;
	char *order = console_form(a->a_req, "order");
	struct console_run *r = NULL;
	char url[CONSOLE_URL_MAX];
	char path[CONSOLE_URL_MAX];
	char busy_actor[CONSOLE_NAME_MAX + 16];
	struct buf href;
	char msg[900];
	int64_t busy_ms = 0;
	int status;
	int error;
	int rc;

	if (order == NULL || order[0] == '\0' || strlen(order) > CONSOLE_RUN_ORDER_MAX) {
		snprintf(a->a_result, sizeof(a->a_result), "refused: no order id given");
		console_text(ret, 400, "reconcile wants the order's id\n");
		goto out;
	}
	/* the order's page as the pages link it (a dot segment or a slash in
	 * the query form) */
	buf_init(&href, sizeof(url) - 1);
	console_order_href(&href, order);
	snprintf(url, sizeof(url), "%s", href.buf_data != NULL ? href.buf_data : "/console/orders");
	buf_finish(&href);
	snprintf(path, sizeof(path), "/console/orders/%s", order);
	/* A run on a database that does not answer now is not begun: the
	 * order is read first, within the request's deadline. */
	rc = console_db_order(cx->cx_store, cx->cx_now_ms, console_wait(cx), order,
	                      console_reconcile_seen, NULL);
	if (rc == CONSOLE_DB_LATE) {
		snprintf(a->a_result, sizeof(a->a_result),
		         "error: the database did not answer; nothing changed");
		console_after(a, ret, 503, url, path,
		              "The database did not answer within " CONSOLE_DB_WAIT_TEXT
		              " (reading the order); nothing was changed. Try again in a moment.",
		              1);
		goto out;
	}
	rc = console_run_start(a, order, url, &r, busy_actor, sizeof(busy_actor), &busy_ms);
	if (rc == 1) {
		snprintf(msg, sizeof(msg),
		         "A reconcile run of this order is already under way (asked by %s %" PRId64
		         " s ago); nothing more was started. Its outcome will be shown on this "
		         "page and in the operator history below.",
		         busy_actor,
		         cx->cx_now_ms > busy_ms ? (cx->cx_now_ms - busy_ms) / 1000 : 0);
		snprintf(a->a_result, sizeof(a->a_result),
		         "refused: a reconcile run of this order is already under way");
		console_after(a, ret, 409, url, path, msg, 1);
		goto out;
	}
	if (rc < 0) {
		snprintf(a->a_result, sizeof(a->a_result),
		         "error: no reconcile run could start; nothing changed");
		console_after(a, ret, 503, url, path,
		              "No reconcile run could start now (too many under way); nothing "
		              "was changed. Try again in a moment.",
		              1);
		goto out;
	}
	if (!console_run_wait(a->a_c, r, cx->cx_deadline_ms)) {
		/* The run goes on and records its outcome itself. */
		a->a_audited = 1;
		snprintf(msg, sizeof(msg),
		         "The provider has not answered within " CONSOLE_DB_WAIT_TEXT
		         ": the reconcile run goes on. Its outcome will be shown on this page "
		         "and in the operator history below (and the audit log, as "
		         "order.reconcile) when it ends.");
		console_after(a, ret, 200, url, path, msg, 0);
		goto out;
	}
	status = console_run_outcome(r, msg, sizeof(msg), a->a_result, sizeof(a->a_result), &error);
	if (r->cr_rep.rr_applied > 0) {
		env_outbox_kick(a->a_c->co_env);
	}
	console_run_release(a->a_c, r);
	if (status == 404) {
		console_text(ret, 404, "no such order\n");
		goto out;
	}
	/* It ran (and may have applied some): redirected like any action
	 * carried out, the failures said on the page. */
	console_after(a, ret, status, url, path, msg, error);
out:
	free(order);
}

struct console_ids {
	int64_t *ci_ids;
	size_t ci_n;
	size_t ci_cap;
};

static int console_ids_row(void *arg, const struct store_row *row)
{
	struct console_ids *ids = arg;

	if (ids->ci_n == ids->ci_cap) {
		size_t cap = ids->ci_cap == 0 ? 256 : 2 * ids->ci_cap;
		int64_t *more = realloc(ids->ci_ids, cap * sizeof(*more));

		if (more == NULL) {
			return -1;
		}
		ids->ci_ids = more;
		ids->ci_cap = cap;
	}
	ids->ci_ids[ids->ci_n++] = store_row_int(row, 0);
	return 0;
}

/* The statuses a bulk retry takes. */
static int console_bulk_status(const char *status)
{
	return status != NULL &&
	       (strcmp(status, "dead") == 0 || strcmp(status, "retry_wait") == 0 ||
	        strcmp(status, "cancelled") == 0);
}

/* Bulk retry of every row of one status, only when the count the operator
 * confirmed is still the count. The rows are the ones of that status in
 * one read, all of them however many: each then retried (and audited) on
 * its own, so one that another operator retried meanwhile is refused, and
 * one that took the status afterwards, never confirmed, is left alone.
 * The whole is recorded too, as outbox.retry_all. */
static void console_retry_all(struct console_act *a, struct reply *ret)
{
	const struct console_ctx *cx = a->a_cx;
	char *status = console_form(a->a_req, "status");
	char *expect_text = console_form(a->a_req, "expect");
	int64_t expect = expect_text != NULL ? strtoll(expect_text, NULL, 10) : -1;
	struct console_ids ids = {NULL, 0, 0};
	struct console_wjob *j;
	char msg[600];
	char url[64];
	int64_t ok = 0;
	size_t i;
	int rc;

	if (!console_bulk_status(status) || expect < 0) {
		snprintf(a->a_result, sizeof(a->a_result),
		         "refused: no status or no count confirmed");
		console_text(ret, 400,
		             "bulk retry wants status (dead, retry_wait, cancelled) and "
		             "the count confirmed\n");
		goto out;
	}
	/* The status's own page, so its form offers the count. */
	snprintf(url, sizeof(url), "/console/outbox?status=%s", status);
	rc = console_db_outbox_ids(cx->cx_store, cx->cx_now_ms, console_wait(cx), status, INT64_MAX,
	                           console_ids_row, &ids);
	if (rc == CONSOLE_DB_LATE) {
		snprintf(a->a_result, sizeof(a->a_result),
		         "error: the database did not answer; nothing changed");
		console_after(a, ret, 503, url, "/console/outbox", CONSOLE_READ_LATE_MSG, 1);
		goto out;
	}
	if (rc < 0) {
		snprintf(a->a_result, sizeof(a->a_result), "error");
		console_text(ret, 503, "the store failed; nothing changed\n");
		goto out;
	}
	/* None of that status: nothing to do, said as such (as events
	 * dismiss says "nothing to dismiss"), never "0 of 0 rows queued". */
	if (ids.ci_n == 0) {
		if (expect == 0) {
			snprintf(msg, sizeof(msg), "No %s rows: nothing to retry.", status);
		} else {
			snprintf(msg, sizeof(msg),
			         "No %s rows now, not the %" PRId64
			         " you confirmed: nothing to retry.",
			         status, expect);
		}
		snprintf(a->a_result, sizeof(a->a_result), "%s: %s", expect == 0 ? "ok" : "refused",
		         msg);
		console_after(a, ret, expect == 0 ? 200 : 409, url, "/console/outbox", msg,
		              expect != 0);
		goto out;
	}
	if ((int64_t)ids.ci_n != expect) {
		snprintf(msg, sizeof(msg),
		         "%zu %s rows now, not the %" PRId64
		         " you confirmed: nothing retried. Look "
		         "again and confirm the new count.",
		         ids.ci_n, status, expect);
		snprintf(a->a_result, sizeof(a->a_result), "refused: %s", msg);
		console_after(a, ret, 409, url, "/console/outbox", msg, 1);
		goto out;
	}
	/* Each row retried (and recorded) on its own, each write waited for
	 * at most CONSOLE_DB_WAIT_MS: a long list on a database that answers
	 * takes its time, one that stops answering stops it. */
	for (i = 0; i < ids.ci_n; i++) {
		j = console_wjob_new(CONSOLE_W_OUTBOX, a->a_c->co_env, cx->cx_now_ms, a->a_actor,
		                     "bulk retry");
		if (j != NULL) {
			j->wj_id = ids.ci_ids[i];
			snprintf(j->wj_op, sizeof(j->wj_op), "retry");
		}
		rc = console_wjob_call(cx->cx_store, j, &j);
		if (rc < -1) {
			break;
		}
		ok += j->wj_rc == OUTBOX_ADMIN_OK;
		console_wjob_free(j);
	}
	if (i < ids.ci_n) {
		if (ok > 0) {
			env_outbox_kick(a->a_c->co_env);
		}
		snprintf(msg, sizeof(msg),
		         "%" PRId64 " of %zu rows queued again, then the database %s: %s%" PRId64
		         "%s, the rest not retried. Reload this page in a moment to see them (and "
		         "the audit log, /console/audit) before you send it again.",
		         ok, ids.ci_n,
		         rc == STORE_CALL_LATE ? "did not answer within " CONSOLE_DB_WAIT_TEXT
		                               : "stopped answering",
		         rc == STORE_CALL_LATE ? "the outcome of row " : "row ", ids.ci_ids[i],
		         rc == STORE_CALL_LATE ? " is unknown" : " was not retried");
		snprintf(a->a_result, sizeof(a->a_result), "error: %s", msg);
		console_after(a, ret, 503, url, "/console/outbox", msg, 1);
		goto out;
	}
	if (ok > 0) {
		env_outbox_kick(a->a_c->co_env);
	}
	snprintf(msg, sizeof(msg), "%" PRId64 " of %zu rows queued again.", ok, ids.ci_n);
	snprintf(a->a_result, sizeof(a->a_result), "ok: %s", msg);
	console_after(a, ret, 200, url, "/console/outbox", msg, 0);
out:
	free(ids.ci_ids);
	free(status);
	free(expect_text);
}

/* Bulk dismiss of the events list's filters (the form's list, its query),
 * as idemhook events dismiss by filter: the events of those filters a
 * dismissal takes (console_events_dismiss_what), only when the count the
 * operator confirmed is still the count, each then dismissed and audited
 * (events.dismiss on event:ID, with the reason) in one transaction. A
 * refusal answers the list's page with the new count to confirm. */
static void console_dismiss_all(struct console_act *a, struct reply *ret)
{
	const struct console_ctx *cx = a->a_cx;
	char *list = console_form(a->a_req, "list");
	char *reason = console_form(a->a_req, "reason");
	char *expect_text = console_form(a->a_req, "expect");
	struct console_events_query q;
	struct http_request get = *a->a_req;
	struct console_wjob *j;
	const char *what;
	char *end = NULL;
	int64_t expect = -1;
	int64_t count = 0;
	char msg[600];
	struct buf url;
	int rc;

	/* The list's filters, read as the list's own URL would give them. */
	buf_init(&url, CONSOLE_URL_MAX + CONSOLE_FORM_FIELD_MAX);
	buf_printf(&url, "/console/events?%s", list != NULL ? list : "");
	get.hr_url = url.buf_data != NULL ? url.buf_data : "/console/events";
	console_events_query_load(&q, cx, &get);
	buf_finish(&url);
	/* and the page to show after it: that URL, rebuilt from what was read */
	buf_init(&url, CONSOLE_URL_MAX + CONSOLE_FORM_FIELD_MAX);
	console_events_href(&url, &q, "&");
	what = console_events_dismiss_what(&q);
	if (expect_text != NULL && expect_text[0] >= '0' && expect_text[0] <= '9') {
		expect = strtoll(expect_text, &end, 10);
		if (*end != '\0') {
			expect = -1;
		}
	}
	if (url.buf_overflow || url.buf_data == NULL) {
		snprintf(a->a_result, sizeof(a->a_result), "refused: filters too long");
		console_text(ret, 400, "these filters are too long\n");
		goto out;
	}
	if (what == NULL) {
		snprintf(msg, sizeof(msg),
		         "These filters select nothing a dismissal can take (%s); nothing "
		         "dismissed.",
		         q.eq_why[0] != '\0' ? q.eq_why : "done or dismissed events");
		snprintf(a->a_result, sizeof(a->a_result), "refused: %s", msg);
		console_after(a, ret, 409, url.buf_data, "/console/events", msg, 1);
		goto out;
	}
	if (!console_db_reason_ok(reason)) {
		snprintf(msg, sizeof(msg),
		         "A reason is required (1 to %d characters); nothing dismissed.",
		         CONSOLE_DB_REASON_MAX);
		snprintf(a->a_result, sizeof(a->a_result), "refused: %s", msg);
		console_after(a, ret, 409, url.buf_data, "/console/events", msg, 1);
		goto out;
	}
	if (expect < 1) {
		snprintf(a->a_result, sizeof(a->a_result), "refused: no count confirmed");
		console_text(ret, 400, "bulk dismiss wants the count confirmed\n");
		goto out;
	}
	/* The job takes the filters (and their strings) with it: q's are not
	 * used past here. */
	j = console_wjob_new(CONSOLE_W_DISMISS_ALL, a->a_c->co_env, cx->cx_now_ms, a->a_actor,
	                     reason);
	if (j != NULL && (j->wj_q = malloc(sizeof(*j->wj_q))) == NULL) {
		console_wjob_free(j);
		j = NULL;
	}
	if (j != NULL) {
		*j->wj_q = q;
		memset(q.eq_v, 0, sizeof(q.eq_v));
		j->wj_expect = expect;
	}
	rc = console_wjob_call(cx->cx_store, j, &j);
	if (rc < -1) {
		console_write_late(a, ret, rc, url.buf_data, "/console/events");
		goto out;
	}
	rc = j->wj_rc;
	count = j->wj_count;
	console_wjob_free(j);
	if (rc < 0) {
		snprintf(a->a_result, sizeof(a->a_result), "error");
		console_after(a, ret, 503, url.buf_data, "/console/events",
		              "The store failed; nothing changed.", 1);
		goto out;
	}
	if (rc == 1) {
		if (count == 0) {
			snprintf(msg, sizeof(msg),
			         "No %s match these filters now, not the %" PRId64
			         " you confirmed: nothing to dismiss.",
			         what, expect);
		} else {
			snprintf(msg, sizeof(msg),
			         "%" PRId64 " %s match these filters now, not the %" PRId64
			         " you confirmed: nothing dismissed. Look again and confirm the "
			         "new count.",
			         count, what, expect);
		}
		snprintf(a->a_result, sizeof(a->a_result), "refused: %s", msg);
		console_after(a, ret, 409, url.buf_data, "/console/events", msg, 1);
		goto out;
	}
	/* each one recorded in the transaction that dismissed it */
	a->a_audited = 1;
	snprintf(msg, sizeof(msg), "%" PRId64 " event(s) dismissed.", count);
	console_after(a, ret, 200, url.buf_data, "/console/events", msg, 0);
out:
	buf_finish(&url);
	console_events_query_finish(&q);
	free(list);
	free(reason);
	free(expect_text);
}

/* Which action a POST names, into a (action, target, the function):
 * returns 0, or -1 when the path is no action. The target is read from the
 * path, or from the form where the path has none. */
static int console_action_of(const struct http_request *req, struct console_act *a)
{
	const char *path = req->hr_path;
	const char *op = NULL;
	char *v;

	if (strcmp(path, "/console/events/dismiss") == 0) {
		/* refusals are recorded on the filters, each dismissal on its
		 * event (console_dismiss_all) */
		v = console_form(req, "list");
		snprintf(a->a_action, sizeof(a->a_action), "events.dismiss");
		snprintf(a->a_target, sizeof(a->a_target), "events?%.200s", v != NULL ? v : "");
		free(v);
		a->a_fn = console_dismiss_all;
	} else if (console_path_id(path, "/console/events/", &a->a_id, &op) == 0) {
		if (strcmp(op, "dismiss") != 0 && strcmp(op, "reprocess") != 0) {
			return -1;
		}
		snprintf(a->a_action, sizeof(a->a_action), "events.%s", op);
		snprintf(a->a_target, sizeof(a->a_target), "event:%" PRId64, a->a_id);
		a->a_fn = console_action_event;
	} else if (strcmp(path, "/console/reconcile") == 0) {
		v = console_form(req, "order");
		snprintf(a->a_action, sizeof(a->a_action), "order.reconcile");
		snprintf(a->a_target, sizeof(a->a_target), "order:%.200s", v != NULL ? v : "");
		free(v);
		a->a_fn = console_action_reconcile;
	} else if (strcmp(path, "/console/outbox/retry-all") == 0) {
		v = console_form(req, "status");
		snprintf(a->a_action, sizeof(a->a_action), "outbox.retry_all");
		snprintf(a->a_target, sizeof(a->a_target), "outbox?status=%s",
		         console_bulk_status(v) ? v : "");
		free(v);
		a->a_fn = console_retry_all;
	} else if (console_path_id(path, "/console/outbox/", &a->a_id, &op) == 0) {
		if (strcmp(op, "retry") != 0 && strcmp(op, "cancel") != 0 &&
		    strcmp(op, "compensate") != 0) {
			return -1;
		}
		snprintf(a->a_action, sizeof(a->a_action), "outbox.%s", op);
		snprintf(a->a_target, sizeof(a->a_target), "outbox:%" PRId64, a->a_id);
		a->a_fn = console_action_outbox;
	} else {
		return -1;
	}
	return 0;
}

/* The action's audit row, unless it recorded itself. */
static void console_audit(const struct console_act *a)
{
	if (a->a_audited) {
		return;
	}
	if (console_audit_within(a->a_c->co_env, a->a_cx->cx_now_ms, a->a_actor, a->a_action,
	                         a->a_target, NULL,
	                         a->a_result[0] != '\0' ? a->a_result : "error") < 0) {
		log_err("console: %s by %s on %s not recorded in the audit log", a->a_action,
		        a->a_actor, a->a_target);
	}
}

/* ---- the route ---- */

static int console_page_event_id(struct buf *b, const struct console_ctx *cx, int64_t id)
{
	return console_page_event(b, cx, id);
}

/* The page req names; answered with its own status (200, 404 for an
 * unknown row), or with status instead of 200 when status is not 0. */
static void console_get(const struct console_ctx *cx, const struct http_request *req, int status,
                        struct reply *ret)
{
	const char *path = req->hr_path;
	const char *suffix = NULL;
	struct buf b;
	int64_t id = 0;
	int rc;

	buf_init(&b, CONSOLE_PAGE_MAX);
	if (strcmp(path, "/console/") == 0) {
		rc = console_page_overview(&b, cx);
	} else if (strcmp(path, "/console/events") == 0) {
		rc = console_page_events(&b, cx, req);
	} else if (console_path_id(path, "/console/events/", &id, &suffix) == 0 &&
	           suffix[0] == '\0') {
		rc = console_page_event_id(&b, cx, id);
	} else if (strncmp(path, "/console/orders/", 16) == 0 && path[16] != '\0') {
		/* The rest of the decoded path, slashes and all: order ids come
		 * from callbacks and may hold anything. */
		rc = console_page_order(&b, cx, path + 16);
	} else if (strcmp(path, "/console/orders") == 0) {
		rc = console_page_order_query(&b, cx, req);
	} else if (strcmp(path, "/console/outbox") == 0) {
		rc = console_page_outbox(&b, cx, req);
	} else if (console_path_id(path, "/console/outbox/", &id, &suffix) == 0 &&
	           suffix[0] == '\0') {
		rc = console_page_outbox_row(&b, cx, id);
	} else if (strcmp(path, "/console/rejected") == 0) {
		rc = console_page_rejected(&b, cx);
	} else if (strcmp(path, "/console/audit") == 0) {
		rc = console_page_audit(&b, cx, req);
	} else {
		buf_finish(&b);
		console_text(ret, 404, "not found\n");
		return;
	}
	rc = rc == 200 && status != 0 ? status : rc;
	console_reply_buf(ret, rc, &b);
	if (rc == 503) {
		/* the database did not answer (or failed): worth trying again */
		reply_add_header(ret, "Retry-After", CONSOLE_RETRY_AFTER);
	}
}

void console_route(void *arg, const struct http_request *req, struct reply *ret)
{
	struct console *c = arg;
	const struct env *env = c->co_env;
	struct config *cf = env_config_acquire(env);
	int64_t now = env_now_ms(env);
	int get = strcmp(req->hr_method, "GET") == 0 || strcmp(req->hr_method, "HEAD") == 0;
	int post = strcmp(req->hr_method, "POST") == 0;
	struct console_session s;
	struct console_who who;
	struct console_ctx cx;
	struct console_act act;
	char flash[CONSOLE_FLASH_MAX];
	char *csrf = NULL;
	int is_action;
	int found;

	if (strcmp(req->hr_path, "/console/console.css") == 0 ||
	    strcmp(req->hr_path, "/console/console.js") == 0) {
		int css = strcmp(req->hr_path, "/console/console.css") == 0;

		if (!get) {
			console_text(ret, 405, "method not allowed\n");
			reply_add_header(ret, "Allow", "GET, HEAD");
			goto out;
		}
		reply_set(ret, 200,
		          css ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8",
		          css ? console_css : console_js, css ? console_css_len : console_js_len);
		console_headers(ret);
		goto out;
	}
	if (!get && !post) {
		console_text(ret, 405, "method not allowed\n");
		reply_add_header(ret, "Allow", "GET, HEAD, POST");
		goto out;
	}
	pthread_mutex_lock(&c->co_lock);
	console_follow_config(c, cf);
	found = c->co_conf.cc_enabled && console_session_find(c, req, now, &s);
	pthread_mutex_unlock(&c->co_lock);
	if (strcmp(req->hr_path, "/console/login") == 0) {
		if (post) {
			console_login(c, req, now, ret);
		} else if (found) {
			console_redirect(ret, "/console/");
		} else {
			console_login_page(ret, 200, NULL);
		}
		goto out;
	}
	if (!found) {
		/* A page sends the browser to the login form; anything else is 401,
		 * logged: there is no one to record it under in the audit log,
		 * and an operator whose session ended while filling a form needs
		 * to know that nothing was done. */
		if (get) {
			console_redirect(ret, "/console/login");
		} else {
			char q[CONSOLE_LOG_PATH_MAX];

			log_warn("console: POST \"%s\" from %s refused: no live session (none, "
			         "expired, logged out, or the receiver restarted)",
			         log_quote(q, sizeof(q), req->hr_path),
			         req->hr_client != NULL ? req->hr_client : "unknown");
			console_text(ret, 401,
			             "refused: no live session (it expired, was logged out, or the "
			             "receiver restarted); nothing was done: log in again at "
			             "/console/login\n");
		}
		goto out;
	}
	if (strcmp(req->hr_path, "/console") == 0) {
		console_redirect(ret, "/console/");
		goto out;
	}
	who.cw_name = s.cs_name;
	who.cw_operator = s.cs_role == CONSOLE_ROLE_OPERATOR;
	who.cw_csrf = s.cs_csrf;
	memset(&cx, 0, sizeof(cx));
	cx.cx_env = env;
	cx.cx_store = env->env_store;
	cx.cx_cf = cf;
	cx.cx_now_ms = now;
	cx.cx_who = &who;
	cx.cx_order_run = console_run_note;
	cx.cx_order_run_arg = c;
	/* One deadline for all of a page's reads (docs/console.md). */
	cx.cx_deadline_ms = console_mono_ms() + CONSOLE_DB_WAIT_MS;
	if (get) {
		/* The outcome of the action that redirected here, once. */
		if (strcmp(req->hr_method, "GET") == 0 &&
		    console_flash_take(c, s.cs_id, req->hr_url, now, flash, sizeof(flash),
		                       &cx.cx_flash_error)) {
			cx.cx_flash = flash;
		}
		console_get(&cx, req, 0, ret);
		goto out;
	}
	/* Every POST carries the session's CSRF token, whatever it does. An
	 * action's refusal is recorded like its outcome, here. */
	memset(&act, 0, sizeof(act));
	act.a_c = c;
	act.a_cx = &cx;
	act.a_req = req;
	act.a_sid = s.cs_id;
	snprintf(act.a_actor, sizeof(act.a_actor), "console:%s", s.cs_name);
	is_action = console_action_of(req, &act) == 0;
	csrf = console_form(req, "csrf");
	if (csrf == NULL || !crypto_equal(csrf, strlen(csrf), s.cs_csrf, strlen(s.cs_csrf))) {
		log_warn("console: %s refused for %s: missing or wrong CSRF token", req->hr_path,
		         s.cs_name);
		console_text(ret, 403, "refused: missing or wrong CSRF token; reload the page\n");
		if (is_action) {
			snprintf(act.a_result, sizeof(act.a_result),
			         "refused: missing or wrong CSRF token");
			console_audit(&act);
		}
		goto out;
	}
	if (strcmp(req->hr_path, "/console/logout") == 0) {
		console_logout(c, &s, now, ret);
		goto out;
	}
	if (!is_action) {
		console_text(ret, 404, "not found\n");
		goto out;
	}
	if (s.cs_role != CONSOLE_ROLE_OPERATOR) {
		console_text(ret, 403, "refused: this session is read-only\n");
		snprintf(act.a_result, sizeof(act.a_result), "refused: this session is read-only");
		console_audit(&act);
		goto out;
	}
	act.a_fn(&act, ret);
	console_audit(&act);
out:
	free(csrf);
	env_config_release(env, cf);
}
