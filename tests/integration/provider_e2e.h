/* provider_e2e.h: helpers shared by the non-Stripe provider end-to-end tests:
 * database reads with printf-style SQL and posting to /hooks/<name>.
 * Include after cmocka.h. */
#ifndef IDEMHOOK_TEST_PROVIDER_E2E_H
#define IDEMHOOK_TEST_PROVIDER_E2E_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "http.h" /* HTTP_HEAD_MAX, HTTP_BODY_MAX_DEFAULT */

#define E2E_STORM 24 /* concurrent copies of one callback */

static inline int64_t e2e_db_int(struct daemon *d, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static inline int64_t e2e_db_int(struct daemon *d, const char *fmt, ...)
{
	char sql[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	return hn_db_int(d->dm_db, sql);
}

/* A daemon (not started) with configuration ini on a database of the
 * schema before migration, holding rows (hn_db_build_before), carried
 * forward by `idemhook migrate`; skips the test where that schema cannot
 * be made (no sqlite3 command). Returns 1 on PostgreSQL, 0 on SQLite. */
static inline int e2e_migrate_from(struct daemon *d, const char *ini, const char *migration,
                                   void (*rows)(struct buf *sql, int pg, void *arg), void *arg)
{
	static const char *const args[] = {"migrate", NULL};
	int rc;

	assert_int_equal(daemon_init(d, ini), 0);
	rc = hn_db_build_before(d, migration, rows, arg);
	if (rc == 1) {
		daemon_finish(d);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(daemon_cli(d, 1, args, NULL), 0);
	return d->dm_pg_db[0] != '\0';
}

static inline void e2e_url(struct daemon *d, const char *provider, char *url, size_t size)
{
	snprintf(url, size, "%s/hooks/%s", d->dm_base, provider);
}

/* POSTs body with headers ("Name: value", NULL-terminated). */
static inline int e2e_post(struct daemon *d, const char *provider, const char *const *headers,
                           const char *body, struct hres *ret)
{
	char url[256];

	e2e_url(d, provider, url, sizeof(url));
	return hn_http("POST", url, headers, body, strlen(body), ret);
}

/* POSTs body with headers and checks the answer's status and that no row
 * changed: nothing stored, no key consumed. */
static inline void e2e_expect_unchanged(struct daemon *d, const char *provider,
                                        const char *const *headers, const char *body,
                                        long status)
{
	char *before = hn_db_snapshot(d->dm_db);
	char *after;
	struct hres r;

	assert_non_null(before);
	assert_int_equal(e2e_post(d, provider, headers, body, &r), 0);
	if (r.hs_status != status) {
		fail_msg("status %ld, expected %ld, for %s", r.hs_status, status, body);
	}
	after = hn_db_snapshot(d->dm_db);
	assert_non_null(after);
	assert_string_equal(before, after);
	hres_finish(&r);
	free(before);
	free(after);
}

/* body followed by text (a second object, a stray byte), malloc'd. */
static inline char *e2e_append(const char *body, const char *text)
{
	size_t a = strlen(body);
	size_t b = strlen(text);
	char *out = malloc(a + b + 1);

	assert_non_null(out);
	memcpy(out, body, a);
	memcpy(out + a, text, b + 1);
	return out;
}

/* body with the first occurrence of from replaced by to, malloc'd. */
static inline char *e2e_replace(const char *body, const char *from, const char *to)
{
	const char *at = strstr(body, from);
	size_t head;
	size_t to_len = strlen(to);
	size_t tail_len;
	char *out;

	assert_non_null(at);
	head = (size_t)(at - body);
	tail_len = strlen(at + strlen(from));
	out = malloc(head + to_len + tail_len + 1);
	assert_non_null(out);
	memcpy(out, body, head);
	memcpy(out + head, to, to_len);
	memcpy(out + head + to_len, at + strlen(from), tail_len + 1);
	return out;
}

/* The answers made at /hooks/<name> before any profile reads the callback:
 * by the listener, to a body over [server] body_max (the default) and to a
 * head over HTTP_HEAD_MAX; by the route, to a GET. */
struct e2e_refusals {
	struct hres er_too_large; /* 413 */
	struct hres er_head;      /* 431 */
	struct hres er_get;       /* 405 */
};

static inline void e2e_refusals(struct daemon *d, const char *provider, struct e2e_refusals *ret)
{
	size_t big_len = HTTP_BODY_MAX_DEFAULT + 1;
	char *big = malloc(big_len);
	char *filler = malloc(HTTP_HEAD_MAX + 64);
	const char *headers[2] = {NULL, NULL};
	char url[256];

	assert_non_null(big);
	assert_non_null(filler);
	memset(big, ' ', big_len);
	memcpy(filler, "X-Filler: ", 10);
	memset(filler + 10, 'f', HTTP_HEAD_MAX);
	filler[10 + HTTP_HEAD_MAX] = '\0';
	headers[0] = filler;
	e2e_url(d, provider, url, sizeof(url));
	assert_int_equal(hn_http("POST", url, NULL, big, big_len, &ret->er_too_large), 0);
	assert_int_equal(hn_http("POST", url, headers, "{}", 2, &ret->er_head), 0);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &ret->er_get), 0);
	free(big);
	free(filler);
}

static inline void e2e_refusals_finish(struct e2e_refusals *r)
{
	hres_finish(&r->er_too_large);
	hres_finish(&r->er_head);
	hres_finish(&r->er_get);
}

/* Checks r's status, Content-Type and body, byte for byte; header, when
 * not NULL, is "Name: value" it must carry too. */
static inline void e2e_expect_answer(const struct hres *r, long status, const char *content_type,
                                     const char *body, const char *header)
{
	char name[64];
	char *ct = hres_header(r, "Content-Type");
	char *v;

	if (r->hs_status != status || ct == NULL || strcmp(ct, content_type) != 0 ||
	    r->hs_body_len != strlen(body) || memcmp(r->hs_body, body, r->hs_body_len) != 0) {
		fail_msg("got %ld %s \"%.*s\", expected %ld %s \"%s\"", r->hs_status,
		         ct != NULL ? ct : "(no Content-Type)", (int)r->hs_body_len,
		         r->hs_body != NULL ? r->hs_body : "", status, content_type, body);
	}
	free(ct);
	if (header != NULL) {
		const char *colon = strchr(header, ':');

		assert_non_null(colon);
		snprintf(name, sizeof(name), "%.*s", (int)(colon - header), header);
		v = hres_header(r, name);
		if (v == NULL || strcmp(v, colon + 2) != 0) {
			fail_msg("no %s, got %s: %s", header, name, v != NULL ? v : "(none)");
		}
		free(v);
	}
}

/* 1 when the response carries Idempotent-Replayed: true. */
static inline int e2e_replayed(const struct hres *r)
{
	char *v = hres_header(r, "Idempotent-Replayed");
	int yes = v != NULL && strcmp(v, "true") == 0;

	free(v);
	return yes;
}

/* Sends E2E_STORM copies at once; returns how many answered status with
 * exactly first's body. */
static inline int e2e_storm(struct daemon *d, const char *provider, const char *const *headers,
                            const char *body, long status, const struct hres *first)
{
	struct hres res[E2E_STORM];
	char url[256];
	int same = 0;
	size_t i;

	e2e_url(d, provider, url, sizeof(url));
	if (hn_http_storm(E2E_STORM, "POST", url, headers, body, strlen(body), res) != 0) {
		return -1;
	}
	for (i = 0; i < E2E_STORM; i++) {
		if (res[i].hs_status == status && res[i].hs_body_len == first->hs_body_len &&
		    (first->hs_body_len == 0 ||
		     memcmp(res[i].hs_body, first->hs_body, first->hs_body_len) == 0)) {
			same++;
		}
		hres_finish(&res[i]);
	}
	return same;
}

/* Sends E2E_STORM copies at once; counts answers by class into ret[0] (2xx),
 * ret[1] (409) and ret[2] (anything else). Returns 0, or -1 when a request
 * got no HTTP answer. */
static inline int e2e_storm_classes(struct daemon *d, const char *provider,
                                    const char *const *headers, const char *body, int ret[3])
{
	struct hres res[E2E_STORM];
	char url[256];
	size_t i;

	ret[0] = ret[1] = ret[2] = 0;
	e2e_url(d, provider, url, sizeof(url));
	if (hn_http_storm(E2E_STORM, "POST", url, headers, body, strlen(body), res) != 0) {
		return -1;
	}
	for (i = 0; i < E2E_STORM; i++) {
		if (res[i].hs_status >= 200 && res[i].hs_status < 300) {
			ret[0]++;
		} else if (res[i].hs_status == 409) {
			ret[1]++;
		} else {
			ret[2]++;
		}
		hres_finish(&res[i]);
	}
	return 0;
}

/* fmt with every '@' replaced by id (malloc'd): one scenario's bodies for
 * as many orders as it is run against. */
static inline char *e2e_expand(const char *fmt, const char *id)
{
	size_t n = 1;
	const char *p;
	char *out;
	char *o;

	for (p = fmt; *p != '\0'; p++) {
		n += *p == '@' ? strlen(id) : 1;
	}
	out = malloc(n);
	if (out == NULL) {
		return NULL;
	}
	o = out;
	for (p = fmt; *p != '\0'; p++) {
		if (*p == '@') {
			memcpy(o, id, strlen(id));
			o += strlen(id);
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

/* Failed events (not applied, or parked and never released) of order id. */
static inline int64_t e2e_failed_events(struct daemon *d, const char *id)
{
	return e2e_db_int(
	        d,
	        "SELECT COUNT(*) FROM events WHERE outcome = 'failed' AND (order_ref = '%s'"
	        " OR payment_ref LIKE '%%%s%%' OR idem_key LIKE '%%%s%%')",
	        id, id, id);
}

#endif
