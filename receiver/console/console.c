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
#define CONSOLE_BULK_MAX 1000   /* rows one bulk retry takes */
#define CONSOLE_FORM_FIELD_MAX 8192 /* encoded: a 500-character reason is 6000 at most */
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
};

/* token = NAME ROLE SECRET (ROLE read-only or operator; SECRET a
 * reference: file:, credential:, env:). */
static int console_conf_token(void *arg, const char *value, int line)
{
	struct console_tokens_load *tl = arg;
	struct console_conf *c = tl->tl_conf;
	struct console_token *t;
	char name[CONSOLE_NAME_MAX + 2];
	char role[16];
	char spec[600];
	size_t i;

	if (c->cc_n_tokens == CONSOLE_TOKENS_MAX) {
		log_err("config: %s:%d: [console] token: more than %d tokens", tl->tl_file, line,
		        CONSOLE_TOKENS_MAX);
		return -1;
	}
	if (sscanf(value, "%65s %15s %599s", name, role, spec) != 3 ||
	    strlen(name) > CONSOLE_NAME_MAX ||
	    (strcmp(role, "read-only") != 0 && strcmp(role, "operator") != 0) ||
	    (strncmp(spec, "file:", 5) != 0 && strncmp(spec, "credential:", 11) != 0 &&
	     strncmp(spec, "env:", 4) != 0)) {
		log_err("config: %s:%d: [console] token: expected NAME read-only|operator "
		        "file:PATH|credential:NAME|env:NAME",
		        tl->tl_file, line);
		return -1;
	}
	for (i = 0; name[i] != '\0'; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) {
			log_err("config: %s:%d: [console] token: NAME is letters, digits, . _ -",
			        tl->tl_file, line);
			return -1;
		}
	}
	for (i = 0; i < c->cc_n_tokens; i++) {
		if (strcmp(c->cc_tokens[i].ct_name, name) == 0) {
			log_err("config: %s:%d: [console] token: the name \"%s\" is used twice",
			        tl->tl_file, line, name);
			return -1;
		}
	}
	t = &c->cc_tokens[c->cc_n_tokens];
	memset(t, 0, sizeof(*t));
	snprintf(t->ct_name, sizeof(t->ct_name), "%s", name);
	t->ct_role = strcmp(role, "operator") == 0 ? CONSOLE_ROLE_OPERATOR : CONSOLE_ROLE_READ_ONLY;
	if (tl->tl_with_secrets) {
		if (config_read_secret(spec, &t->ct_secret, &t->ct_len) < 0) {
			return -1;
		}
		if (t->ct_len < 16) {
			log_err("config: %s:%d: [console] token %s: the secret is shorter than 16 "
			        "bytes",
			        tl->tl_file, line, name);
			free(t->ct_secret);
			t->ct_secret = NULL;
			return -1;
		}
	}
	c->cc_n_tokens++;
	return 0;
}

int console_conf_load(const struct config *cf, int with_secrets, struct console_conf *ret)
{
	const struct config_section *cs = config_section(cf, CONSOLE_SECTION);
	const char *file = cf->cf_path != NULL ? cf->cf_path : "(demo)";
	const char *admin = config_get(cf, "admin", "listen");
	struct console_tokens_load tl = {ret, file, with_secrets};
	int64_t failures = 0;

	memset(ret, 0, sizeof(*ret));
	if (config_get_bool(cf, CONSOLE_SECTION, "enabled", 0, &ret->cc_enabled) < 0 ||
	    config_get_duration(cf, CONSOLE_SECTION, "session_ttl", CONSOLE_TTL_DEFAULT_S,
	                        &ret->cc_session_ttl_s) < 0 ||
	    config_get_bool(cf, CONSOLE_SECTION, "allow_insecure", 0, &ret->cc_allow_insecure) <
	            0) {
		return -1;
	}
	{
		unsigned u;

		if (config_get_uint(cf, CONSOLE_SECTION, "login_failures",
		                    CONSOLE_LOGIN_FAILURES_DEFAULT, &u) < 0) {
			return -1;
		}
		failures = u;
	}
	ret->cc_login_failures = (unsigned)failures;
	if (!ret->cc_enabled) {
		return 0;
	}
	if (ret->cc_session_ttl_s < 1 || ret->cc_session_ttl_s > 7 * 86400) {
		log_err("config: %s: [console] session_ttl: between 1s and 7d", file);
		goto fail;
	}
	if (ret->cc_login_failures < 1) {
		log_err("config: %s: [console] login_failures: at least 1", file);
		goto fail;
	}
	if (cs == NULL || config_section_each(cs, "token", console_conf_token, &tl) != 0) {
		goto fail;
	}
	if (ret->cc_n_tokens == 0) {
		log_err("config: %s: [console] enabled = yes needs at least one token = NAME ROLE "
		        "SECRET",
		        file);
		goto fail;
	}
	if (admin != NULL && strcmp(admin, "off") == 0) {
		log_err("config: %s: [console] enabled = yes needs the admin listener ([admin] "
		        "listen "
		        "is off)",
		        file);
		goto fail;
	}
	/* The admin listener speaks plain HTTP: a token typed into the login
	 * form crosses the network in clear unless a TLS proxy sits in front. */
	if (admin != NULL && !console_loopback(admin)) {
		if (!ret->cc_allow_insecure) {
			log_err("config: %s: [console] refused on the non-loopback admin address "
			        "%s "
			        "without TLS: put it on loopback behind a TLS reverse proxy, or "
			        "set "
			        "[console] allow_insecure = yes",
			        file, admin);
			goto fail;
		}
		ret->cc_cookie_secure = 1;
	}
	return 0;
fail:
	console_conf_finish(ret);
	return -1;
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
	int64_t cs_expires_ms;
};

struct console_client {
	char cc_addr[64];
	unsigned cc_failures;
	int64_t cc_window_start_ms;
};

struct console {
	const struct env *co_env;
	pthread_mutex_t co_lock;
	struct console_conf co_conf; /* of config co_serial */
	uint64_t co_serial;
	struct console_session co_sessions[CONSOLE_SESSIONS_MAX];
	struct console_client co_clients[CONSOLE_CLIENTS_MAX];
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
	c->co_env = env;
	pthread_mutex_init(&c->co_lock, NULL);
	c->co_conf = conf;
	c->co_serial = cf->cf_serial;
	log_notice("console: on the admin listener under /console, %zu token(s)", conf.cc_n_tokens);
out:
	env_config_release(env, cf);
	return c;
}

void console_destroy(struct console *c)
{
	if (c == NULL) {
		return;
	}
	console_conf_finish(&c->co_conf);
	memset(c->co_sessions, 0, sizeof(c->co_sessions));
	pthread_mutex_destroy(&c->co_lock);
	free(c);
}

/* Takes a reloaded [console] (lock held). A bad one keeps the last good
 * one (the reload itself checked the file). Sessions whose token is gone,
 * or whose role changed, end. */
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
			kept |= strcmp(conf.cc_tokens[k].ct_name, s->cs_name) == 0 &&
			        conf.cc_tokens[k].ct_role == s->cs_role;
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

static void console_login(struct console *c, const struct http_request *req, int64_t now,
                          struct reply *ret)
{
	const char *client = req->hr_client != NULL ? req->hr_client : "unknown";
	struct console_session *slot = NULL;
	struct console_client *cl;
	char cookie[300];
	char *token = console_form(req, "token");
	char actor[CONSOLE_NAME_MAX + 16] = "";
	const struct console_token *match = NULL;
	int limited = 0;
	size_t i;

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
		if (console_random_hex(slot->cs_id) < 0 || console_random_hex(slot->cs_csrf) < 0) {
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
	console_db_audit(c->co_env->env_store, now, actor, "console.login", "console", NULL, "ok");
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

/* The page an action leads back to, with its message. */
static void console_after(struct reply *ret, const struct console_ctx *cx, int status,
                          int (*page)(struct buf *, const struct console_ctx *, int64_t),
                          int64_t id, const char *msg, int error)
{
	struct console_ctx with = *cx;
	struct buf b;
	int rc;

	with.cx_flash = msg;
	with.cx_flash_error = error;
	buf_init(&b, CONSOLE_PAGE_MAX);
	rc = page(&b, &with, id);
	console_reply_buf(ret, rc < 0 ? -1 : status, &b);
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

static void console_action_event(struct console *c, const struct console_ctx *cx,
                                 const struct http_request *req, int64_t id, const char *op,
                                 struct reply *ret)
{
	char actor[CONSOLE_NAME_MAX + 16];
	char msg[CONSOLE_DB_MSG_MAX + 300];
	int rc;

	snprintf(actor, sizeof(actor), "console:%s", cx->cx_who->cw_name);
	if (strcmp(op, "dismiss") == 0) {
		char *reason = console_form(req, "reason");

		rc = console_db_dismiss(cx->cx_store, cx->cx_now_ms, actor, id, reason, msg,
		                        sizeof(msg));
		free(reason);
		if (rc == CONSOLE_DB_UNKNOWN) {
			console_after(ret, cx, 404, console_page_event, id, msg, 1);
			return;
		}
		console_after(ret, cx,
		              rc == CONSOLE_DB_OK ? 200
		              : rc < 0            ? 503
		                                  : 409,
		              console_page_event, id,
		              rc < 0 ? "The store failed; nothing changed." : msg,
		              rc != CONSOLE_DB_OK);
		return;
	}
	if (strcmp(op, "reprocess") == 0) {
		struct console_db_reprocess rp;

		rc = console_db_reprocess(cx->cx_store, cx->cx_cf, cx->cx_now_ms, actor, id, &rp);
		if (rc < 0) {
			console_after(ret, cx, 503, console_page_event, id,
			              "The store failed; nothing changed.", 1);
			return;
		}
		if (rp.rp_state == CONSOLE_DB_RP_UNKNOWN) {
			console_after(ret, cx, 404, console_page_event, id, "No such event.", 1);
			return;
		}
		if (rp.rp_state != CONSOLE_DB_RP_DONE) {
			console_after(
			        ret, cx, 409, console_page_event, id,
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
			env_outbox_kick(c->co_env);
		}
		console_after(ret, cx, 200, console_page_event, id, msg, rp.rp_res.or_refused);
		return;
	}
	console_text(ret, 404, "not found\n");
}

static void console_action_outbox(struct console *c, const struct console_ctx *cx, int64_t id,
                                  const char *op, struct reply *ret)
{
	char actor[CONSOLE_NAME_MAX + 16];
	char msg[300];
	char result[320];
	char target[40];
	char action[40];
	struct outbox_conf oc;
	int rc;

	snprintf(actor, sizeof(actor), "console:%s", cx->cx_who->cw_name);
	snprintf(target, sizeof(target), "outbox:%" PRId64, id);
	snprintf(action, sizeof(action), "outbox.%s", op);
	if (strcmp(op, "retry") == 0) {
		rc = outbox_admin_retry(cx->cx_store, id, cx->cx_now_ms, msg, sizeof(msg));
	} else if (strcmp(op, "cancel") == 0) {
		rc = outbox_admin_cancel(cx->cx_store, id, cx->cx_now_ms, msg, sizeof(msg));
	} else if (strcmp(op, "compensate") == 0) {
		if (outbox_conf_load(cx->cx_cf, 1, &oc) < 0) {
			console_after(ret, cx, 503, console_page_outbox_row, id,
			              "The [outbound] section is unusable; nothing changed.", 1);
			return;
		}
		rc = outbox_admin_compensate(cx->cx_store, &oc, id, cx->cx_now_ms, msg,
		                             sizeof(msg));
		outbox_conf_finish(&oc);
	} else {
		console_text(ret, 404, "not found\n");
		return;
	}
	console_result(result, sizeof(result), rc, msg);
	if (rc != OUTBOX_ADMIN_UNKNOWN && console_db_audit(cx->cx_store, cx->cx_now_ms, actor,
	                                                   action, target, NULL, result) < 0) {
		log_err("console: %s by %s on %s not recorded in the audit log", action, actor,
		        target);
	}
	if (rc == OUTBOX_ADMIN_OK) {
		env_outbox_kick(c->co_env);
	}
	console_after(ret, cx,
	              rc == OUTBOX_ADMIN_OK        ? 200
	              : rc == OUTBOX_ADMIN_UNKNOWN ? 404
	              : rc < 0                     ? 503
	                                           : 409,
	              console_page_outbox_row, id,
	              rc < 0 ? "The store failed; nothing changed." : msg, rc != OUTBOX_ADMIN_OK);
}

/* Reconcile one order now: the engine's reconcile run (reconcile.h) for
 * this order alone (reconcile_options ro_order: its provider instance,
 * or every one that can be asked when no payment has named one yet, from
 * a minute before the order was created). Audited as order.reconcile. */
static void console_action_reconcile(struct console *c, const struct console_ctx *cx,
                                     const struct http_request *req, struct reply *ret)
{
	char *order = console_form(req, "order");
	struct reconcile_options opt;
	struct reconcile_report rep = {0};
	struct console_ctx with = *cx;
	char actor[CONSOLE_NAME_MAX + 16];
	char target[220];
	char msg[600];
	char result[640];
	const char *why = NULL;
	size_t asked = 0;
	size_t i;
	struct buf b;
	int status = 200;
	int rc;

	if (order == NULL || order[0] == '\0' || strlen(order) > 200) {
		console_text(ret, 400, "reconcile wants the order's id\n");
		goto out;
	}
	snprintf(actor, sizeof(actor), "console:%s", cx->cx_who->cw_name);
	snprintf(target, sizeof(target), "order:%s", order);
	memset(&opt, 0, sizeof(opt));
	opt.ro_older_than_s = -1;
	opt.ro_order = order;
	rc = reconcile_run(cx->cx_store, cx->cx_cf, &opt, &rep);
	if (rc < 0 && rep.rr_order_unknown) {
		console_text(ret, 404, "no such order\n");
		goto out;
	}
	for (i = 0; rc == 0 && i < rep.rr_n; i++) {
		if (rep.rr_instances[i].rn_mode != PROVIDER_RECONCILE_NONE) {
			asked++;
		} else if (why == NULL) {
			why = rep.rr_instances[i].rn_why;
		}
	}
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "The reconcile run could not start; nothing changed.");
		snprintf(result, sizeof(result), "error");
		status = 503;
	} else if (asked == 0) {
		snprintf(msg, sizeof(msg), "No provider of this order can be asked: %s.",
		         why != NULL ? why : "none is configured");
		snprintf(result, sizeof(result), "refused: %s", msg);
		status = 409;
	} else {
		snprintf(msg, sizeof(msg),
		         "Reconciled: %" PRId64 " event(s) found, %" PRId64 " applied, %" PRId64
		         " known, %" PRId64 " refused, %" PRId64 " failed.",
		         rep.rr_events_found, rep.rr_applied, rep.rr_known, rep.rr_refused,
		         rep.rr_failed);
		snprintf(result, sizeof(result), "%s: %s", rep.rr_failed > 0 ? "failed" : "ok",
		         msg);
		status = rep.rr_failed > 0 ? 502 : 200;
	}
	if (console_db_audit(cx->cx_store, cx->cx_now_ms, actor, "order.reconcile", target, NULL,
	                     result) < 0) {
		log_err("console: order.reconcile by %s on %s not recorded in the audit log", actor,
		        target);
	}
	if (rep.rr_applied > 0) {
		env_outbox_kick(c->co_env);
	}
	with.cx_flash = msg;
	with.cx_flash_error = status != 200;
	buf_init(&b, CONSOLE_PAGE_MAX);
	rc = console_page_order(&b, &with, order);
	console_reply_buf(ret, rc < 0 ? -1 : status, &b);
out:
	reconcile_report_finish(&rep);
	free(order);
}

struct console_ids {
	int64_t ci_ids[CONSOLE_BULK_MAX];
	size_t ci_n;
};

static int console_ids_row(void *arg, const struct store_row *row)
{
	struct console_ids *ids = arg;

	if (ids->ci_n < CONSOLE_BULK_MAX) {
		ids->ci_ids[ids->ci_n++] = store_row_int(row, 0);
	}
	return 0;
}

/* Bulk retry of every row of one status, only when the count the operator
 * confirmed is still the count: each row retried (and audited) on its own. */
static void console_retry_all(struct console *c, const struct console_ctx *cx,
                              const struct http_request *req, struct reply *ret)
{
	char *status = console_form(req, "status");
	char *expect_text = console_form(req, "expect");
	int64_t expect = expect_text != NULL ? strtoll(expect_text, NULL, 10) : -1;
	char actor[CONSOLE_NAME_MAX + 16];
	struct console_ids *ids = calloc(1, sizeof(*ids));
	struct console_ctx with = *cx;
	char msg[300];
	char result[320];
	char target[40];
	int64_t ok = 0;
	struct buf b;
	size_t i;
	int rc;

	snprintf(actor, sizeof(actor), "console:%s", cx->cx_who->cw_name);
	if (ids == NULL || status == NULL ||
	    (strcmp(status, "dead") != 0 && strcmp(status, "retry_wait") != 0 &&
	     strcmp(status, "cancelled") != 0) ||
	    expect < 0) {
		console_text(ret, 400,
		             "bulk retry wants status (dead, retry_wait, cancelled) and "
		             "the count confirmed\n");
		goto out;
	}
	if (console_db_outbox_ids(cx->cx_store, cx->cx_now_ms, status, CONSOLE_BULK_MAX,
	                          console_ids_row, ids) < 0) {
		console_text(ret, 503, "the store failed; nothing changed\n");
		goto out;
	}
	if ((int64_t)ids->ci_n != expect) {
		snprintf(msg, sizeof(msg),
		         "%zu %s rows now, not the %" PRId64
		         " you confirmed: nothing retried. Look "
		         "again and confirm the new count.",
		         ids->ci_n, status, expect);
		with.cx_flash = msg;
		with.cx_flash_error = 1;
		buf_init(&b, CONSOLE_PAGE_MAX);
		rc = console_page_outbox(&b, &with, req);
		console_reply_buf(ret, rc < 0 ? -1 : 409, &b);
		goto out;
	}
	for (i = 0; i < ids->ci_n; i++) {
		rc = outbox_admin_retry(cx->cx_store, ids->ci_ids[i], cx->cx_now_ms, msg,
		                        sizeof(msg));
		console_result(result, sizeof(result), rc, msg);
		snprintf(target, sizeof(target), "outbox:%" PRId64, ids->ci_ids[i]);
		console_db_audit(cx->cx_store, cx->cx_now_ms, actor, "outbox.retry", target,
		                 "bulk retry", result);
		ok += rc == OUTBOX_ADMIN_OK;
	}
	if (ok > 0) {
		env_outbox_kick(c->co_env);
	}
	snprintf(msg, sizeof(msg), "%" PRId64 " of %zu rows queued again.", ok, ids->ci_n);
	with.cx_flash = msg;
	buf_init(&b, CONSOLE_PAGE_MAX);
	rc = console_page_outbox(&b, &with, req);
	console_reply_buf(ret, rc < 0 ? -1 : 200, &b);
out:
	free(ids);
	free(status);
	free(expect_text);
}

/* ---- the route ---- */

static int console_page_event_id(struct buf *b, const struct console_ctx *cx, int64_t id)
{
	return console_page_event(b, cx, id);
}

static void console_get(const struct console_ctx *cx, const struct http_request *req,
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
	console_reply_buf(ret, rc, &b);
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
	const char *suffix = NULL;
	char *csrf = NULL;
	int64_t id = 0;
	int found;

	if (strcmp(req->hr_path, "/console/console.css") == 0 ||
	    strcmp(req->hr_path, "/console/console.js") == 0) {
		int css = strcmp(req->hr_path, "/console/console.css") == 0;

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
		/* A page sends the browser to the login form; anything else is 401. */
		if (get) {
			console_redirect(ret, "/console/login");
		} else {
			console_text(ret, 401, "log in first\n");
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
	if (get) {
		console_get(&cx, req, ret);
		goto out;
	}
	/* Every POST carries the session's CSRF token, whatever it does. */
	csrf = console_form(req, "csrf");
	if (csrf == NULL || !crypto_equal(csrf, strlen(csrf), s.cs_csrf, strlen(s.cs_csrf))) {
		log_warn("console: %s refused for %s: missing or wrong CSRF token", req->hr_path,
		         s.cs_name);
		console_text(ret, 403, "refused: missing or wrong CSRF token; reload the page\n");
		goto out;
	}
	if (strcmp(req->hr_path, "/console/logout") == 0) {
		console_logout(c, &s, now, ret);
		goto out;
	}
	if (s.cs_role != CONSOLE_ROLE_OPERATOR) {
		console_text(ret, 403, "refused: this session is read-only\n");
		goto out;
	}
	if (console_path_id(req->hr_path, "/console/events/", &id, &suffix) == 0 &&
	    suffix[0] != '\0') {
		console_action_event(c, &cx, req, id, suffix, ret);
	} else if (strcmp(req->hr_path, "/console/reconcile") == 0) {
		console_action_reconcile(c, &cx, req, ret);
	} else if (strcmp(req->hr_path, "/console/outbox/retry-all") == 0) {
		console_retry_all(c, &cx, req, ret);
	} else if (console_path_id(req->hr_path, "/console/outbox/", &id, &suffix) == 0 &&
	           suffix[0] != '\0') {
		console_action_outbox(c, &cx, id, suffix, ret);
	} else {
		console_text(ret, 404, "not found\n");
	}
out:
	free(csrf);
	env_config_release(env, cf);
}
