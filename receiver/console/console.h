/* console.h: the operator console under /console on the admin listener:
 * server-rendered pages over the store (console_db.h), actions recorded in
 * the audit log, behind a login that exchanges an operator token for a
 * session cookie. Off unless [console] enabled = yes (docs/console.md). */
#ifndef IDEMHOOK_CONSOLE_H
#define IDEMHOOK_CONSOLE_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "reply.h"

struct config;
struct env;

#define CONSOLE_SECTION "console"
#define CONSOLE_PREFIX "/console"
#define CONSOLE_TOKENS_MAX 16
#define CONSOLE_NAME_MAX 64

enum console_role {
	CONSOLE_ROLE_READ_ONLY = 0, /* every page, no action */
	CONSOLE_ROLE_OPERATOR,      /* every page and every action */
};

struct console_token {
	char ct_name[CONSOLE_NAME_MAX + 1];
	enum console_role ct_role;
	char *ct_secret; /* NULL until read (with_secrets) */
	size_t ct_len;
};

/* The [console] section, parsed. */
struct console_conf {
	int cc_enabled;
	struct console_token cc_tokens[CONSOLE_TOKENS_MAX];
	size_t cc_n_tokens;
	int64_t cc_session_ttl_s;   /* a session lives this long (default 8h) */
	unsigned cc_login_failures; /* failed logins per client per 15 min (default 5) */
	int cc_allow_insecure;      /* serve on a non-loopback admin address without TLS */
	int cc_cookie_secure; /* Secure cookies: secure_cookie = yes, or a non-loopback admin */
};

/* Reads and checks [console] of cf (every key, each token's NAME ROLE
 * SECRET, and with_secrets reads the secrets), and that the admin
 * listener it needs is on, on loopback unless allow_insecure = yes. The
 * whole validation of the section is here. Returns 0 (ret->cc_enabled 0
 * when off), or -1 with the file, key and problem logged. Finish ret. */
int console_conf_load(const struct config *cf, int with_secrets, struct console_conf *ret);
void console_conf_finish(struct console_conf *c);

struct console;

/* The console for the daemon in env: NULL with *ret_off = 1 when [console]
 * is off, NULL with *ret_off = 0 on a bad section (logged). Takes the
 * current config from env at every request; a reloaded [console] (new
 * tokens) applies from then on, sessions of a token that is gone,
 * whose role changed or whose secret changed end. */
struct console *console_create(const struct env *env, int *ret_off);
void console_destroy(struct console *c);

/* The route for /console and everything under it (arg = struct console *). */
void console_route(void *arg, const struct http_request *req, struct reply *ret);

#endif
