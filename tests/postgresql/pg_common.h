/* pg_common.h: what the suite postgresql's programs share: receivers on one
 * PostgreSQL database, signed Stripe callbacks spread across them. */
#ifndef IDEMHOOK_TEST_PG_COMMON_H
#define IDEMHOOK_TEST_PG_COMMON_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"
#include "pgserver.h"

#define PG_RECEIVERS 3

/* Starts n receivers with extra_ini on one fresh database: the first
 * creates the schema, the others join it. Returns 0 or -1. */
static inline int pg_receivers_start(struct daemon *r, size_t n, const char *extra_ini)
{
	size_t i;

	if (daemon_init_pg(&r[0], extra_ini) < 0 || daemon_start(&r[0]) < 0) {
		return -1;
	}
	for (i = 1; i < n; i++) {
		if (daemon_init_beside(&r[i], &r[0], extra_ini) < 0 || daemon_start(&r[i]) < 0) {
			return -1;
		}
	}
	return 0;
}

static inline void pg_receivers_finish(struct daemon *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		daemon_finish(&r[i]);
	}
}

/* A Stripe callback as a provider sends it: the URL of receiver d, the
 * signature header (into hdr), the body. */
struct pg_callback {
	char pc_url[256];
	char pc_sig[1400];
	const char *pc_headers[3];
	const char *pc_body;
};

static inline void pg_callback_init(struct pg_callback *c, const struct daemon *d, const char *body)
{
	char *sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));

	snprintf(c->pc_url, sizeof(c->pc_url), "%s/hooks/stripe", d->dm_base);
	snprintf(c->pc_sig, sizeof(c->pc_sig), "Stripe-Signature: %s", sig != NULL ? sig : "");
	free(sig);
	c->pc_headers[0] = c->pc_sig;
	c->pc_headers[1] = "Content-Type: application/json";
	c->pc_headers[2] = NULL;
	c->pc_body = body;
}

static inline int pg_callback_send(const struct pg_callback *c, struct hres *ret)
{
	return hn_http("POST", c->pc_url, c->pc_headers, c->pc_body, strlen(c->pc_body), ret);
}

static inline struct hreq pg_callback_req(const struct pg_callback *c)
{
	struct hreq q = {
	        .rq_method = "POST",
	        .rq_url = c->pc_url,
	        .rq_headers = c->pc_headers,
	        .rq_body = c->pc_body,
	        .rq_body_len = strlen(c->pc_body),
	};

	return q;
}

/* A psql session kept open on d's database (pgserver_session_run and
 * pgserver_session_finish go on with it). */
static inline int pg_session_start(struct pgserver_session *ps, const struct daemon *d)
{
	return pgserver_session_start(ps, pgserver_shared(NULL), d->dm_pg_db);
}

#endif
