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

/* A psql session kept open on d's database: a transaction begun in it
 * holds its locks until pg_session_run ends it or pg_session_finish quits
 * (which rolls it back). */
struct pg_session {
	pid_t ps_pid;
	FILE *ps_in;
	FILE *ps_out;
};

static inline int pg_session_start(struct pg_session *ps, const struct daemon *d)
{
	struct pgserver *pg = pgserver_shared(NULL);
	char psql[300];
	char conninfo[700];
	int in[2];
	int out[2];

	if (pg == NULL || pipe(in) < 0) {
		return -1;
	}
	if (pipe(out) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	snprintf(psql, sizeof(psql), "%s/psql", pg->pg_bindir);
	pgserver_conninfo(pg, d->dm_pg_db, conninfo, sizeof(conninfo));
	ps->ps_pid = fork();
	if (ps->ps_pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		execl(psql, "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", conninfo,
		      (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	ps->ps_in = fdopen(in[1], "w");
	ps->ps_out = fdopen(out[0], "r");
	return ps->ps_pid > 0 && ps->ps_in != NULL && ps->ps_out != NULL ? 0 : -1;
}

/* Runs sql in the session and waits until the server has run it. Returns
 * 0, or -1 when the session ended (a statement failed). */
static inline int pg_session_run(struct pg_session *ps, const char *sql)
{
	char line[256];

	fprintf(ps->ps_in, "%s\n\\echo pg_session_done\n", sql);
	if (fflush(ps->ps_in) != 0) {
		return -1;
	}
	while (fgets(line, sizeof(line), ps->ps_out) != NULL) {
		if (strcmp(line, "pg_session_done\n") == 0) {
			return 0;
		}
	}
	return -1;
}

/* Quits the session; returns psql's exit status, or -1. */
static inline int pg_session_finish(struct pg_session *ps)
{
	int status;

	fclose(ps->ps_in);
	fclose(ps->ps_out);
	if (waitpid(ps->ps_pid, &status, 0) != ps->ps_pid || !WIFEXITED(status)) {
		return -1;
	}
	return WEXITSTATUS(status);
}

#endif
