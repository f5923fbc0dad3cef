/* test_store_copy_pg.c: the upgrade path from SQLite: a receiver's SQLite
 * database filled by real callbacks, `idemhook store copy` to PostgreSQL,
 * every table equal row by row, a receiver on PostgreSQL answering the old
 * duplicates with their stored replies; a non-empty target is refused
 * without --replace; and the way back. Which other sessions refuse a
 * PostgreSQL end, and a copy run by the database's owner, no superuser. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "peer.h"
#include "pg_common.h"

#define COPY_ORDERS 12
#define COPY_API_ORDERS 4
/* A large source: more rows than one page of the copy, in every kind of
 * key, and audit rows whose text (COPY_BIG_REASON bytes each) adds up to
 * more than the copy may hold in memory (COPY_BIG_RSS_MAX_KB). */
#define COPY_BIG_REFS 2500
#define COPY_BIG_AUDIT 24000
#define COPY_BIG_REASON 5000
#define COPY_BIG_RSS_MAX_KB (80 * 1024)
/* Under AddressSanitizer freed memory stays in its quarantine (256 MB by
 * default) and the peak says nothing of what the copy holds: the bound is
 * checked by the plain build only (the README's test command). */
#if defined(__SANITIZE_ADDRESS__)
#define COPY_RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COPY_RSS_MEANINGFUL 0
#endif
#endif
#ifndef COPY_RSS_MEANINGFUL
#define COPY_RSS_MEANINGFUL 1
#endif
/* Longer than serve's statement_timeout (5 s by default), which the copy
 * does not inherit: a --replace of a large target deletes for longer. */
#define COPY_LOCK_HOLD_MS 6500
#define COPY_STR_(x) #x
#define COPY_STR(x) COPY_STR_(x)

/* What was sent to the SQLite receiver and what it answered. */
struct copy_sent {
	char *cs_body;
	char *cs_reply;
	size_t cs_reply_len;
};

static void copy_post(struct daemon *d, struct copy_sent *s, char *body)
{
	struct pg_callback cb;
	struct hres r;

	s->cs_body = body;
	pg_callback_init(&cb, d, body);
	assert_int_equal(pg_callback_send(&cb, &r), 0);
	assert_int_equal(r.hs_status, 200);
	s->cs_reply = r.hs_body;
	s->cs_reply_len = r.hs_body_len;
	r.hs_body = NULL;
	hres_finish(&r);
}

static void copy_api_post(struct daemon *d, int i, struct hres *ret)
{
	char url[256];
	char key[80];
	char body[128];
	const char *headers[3];

	snprintf(url, sizeof(url), "%s/api/orders", d->dm_base);
	snprintf(key, sizeof(key), "Idempotency-Key: copy-api-%d", i);
	snprintf(body, sizeof(body),
	         "{\"amount\":%d,\"currency\":\"eur\",\"customer_ref\":\"copy-%d\"}", 700 + i, i);
	headers[0] = "Content-Type: application/json";
	headers[1] = key;
	headers[2] = NULL;
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), ret), 0);
}

/* Every table of the SQLite schema, each row in one text form, through the
 * store's read API on both sides: "table\nrow\nrow\n--\n" per table. */
static char *copy_dump_all(const char *sqlite_db, const char *db)
{
	char *tables =
	        hn_db_dump(sqlite_db, "SELECT name FROM sqlite_master WHERE type = 'table' "
	                              "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name");
	struct buf out;
	char *line;
	char *next;
	char *s;

	if (tables == NULL) {
		return NULL;
	}
	buf_init(&out, 0);
	for (line = tables; *line != '\0'; line = next) {
		char sql[2048];
		char *cols;
		char *c;
		char *rows;
		int n = 0;
		int i;
		size_t used;

		next = strchr(line, '\n');
		*next++ = '\0';
		snprintf(sql, sizeof(sql), "SELECT name FROM pragma_table_info('%s') ORDER BY cid",
		         line);
		cols = hn_db_dump(sqlite_db, sql);
		assert_non_null(cols);
		used = (size_t)snprintf(sql, sizeof(sql), "SELECT ");
		for (c = cols; *c != '\0';) {
			char *eol = strchr(c, '\n');

			*eol = '\0';
			used += (size_t)snprintf(sql + used, sizeof(sql) - used, "%s%s",
			                         n > 0 ? ", " : "", c);
			n++;
			c = eol + 1;
		}
		used += (size_t)snprintf(sql + used, sizeof(sql) - used, " FROM %s ORDER BY ",
		                         line);
		for (i = 1; i <= n; i++) {
			used += (size_t)snprintf(sql + used, sizeof(sql) - used, "%s%d",
			                         i > 1 ? ", " : "", i);
		}
		assert_true(used < sizeof(sql));
		rows = hn_db_dump(db, sql);
		if (rows == NULL) {
			fail_msg("cannot read table %s from %s", line, db);
			break; /* not reached: fail_msg ends the test */
		}
		buf_printf(&out, "%s\n%s--\n", line, rows);
		free(rows);
		free(cols);
	}
	free(tables);
	s = buf_take(&out, NULL);
	buf_finish(&out);
	return s;
}

/* r is the stored answer replayed: status, Idempotent-Replayed, and the
 * body byte for byte. Finishes r. */
static void copy_assert_replayed(struct hres *r, long status, const char *body, size_t len)
{
	char *replayed;

	assert_int_equal(r->hs_status, status);
	replayed = hres_header(r, "Idempotent-Replayed");
	assert_non_null(replayed);
	free(replayed);
	assert_int_equal(r->hs_body_len, len);
	assert_memory_equal(r->hs_body, body, len);
	hres_finish(r);
}

/* Every callback of sent again to d's receiver: each gets its stored reply. */
static void copy_assert_duplicates(struct daemon *d, const struct copy_sent *sent, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct pg_callback cb;
		struct hres r;

		pg_callback_init(&cb, d, sent[i].cs_body);
		assert_int_equal(pg_callback_send(&cb, &r), 0);
		copy_assert_replayed(&r, 200, sent[i].cs_reply, sent[i].cs_reply_len);
	}
}

static void copy_assert_same(const char *want, const char *got, const char *what)
{
	const char *w = want;
	const char *g = got;
	int line = 1;

	assert_non_null(want);
	assert_non_null(got);
	while (*w != '\0' && *w == *g) {
		if (*w == '\n') {
			line++;
		}
		w++;
		g++;
	}
	if (*w != '\0' || *g != '\0') {
		fail_msg("%s differs at line %d:\nwant: %.200s\ngot:  %.200s", what, line, w, g);
	}
}

static int copy_run(struct daemon *d, const char *from, const char *to, int replace)
{
	const char *args[] = {
	        "store", "copy", "--from", from, "--to", to, replace ? "--replace" : NULL, NULL};

	return daemon_cli(d, 0, args, NULL);
}

static void test_a_sqlite_install_copied_to_postgresql_answers_its_duplicates_the_same(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour busy = peer_reply(503, "{}");
	struct copy_sent sent[COPY_ORDERS * 2 + 1];
	struct hres api_first[COPY_API_ORDERS];
	struct daemon lite;
	struct daemon pgd;
	struct daemon back;
	char ini[2048];
	char from[700];
	char back_loc[700];
	char *want;
	char *got;
	size_t n_sent = 0;
	size_t i;
	int k;

	assert_non_null(p);
	/* Outbox rows stay due: the shop answers 503 until the copy. */
	peer_default(p, "/notify", &busy);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI
	         "\n[outbound]\nnotify_url = %s/notify\nretry_base = 10s\nretry_cap = 60s\n"
	         "poll = 50ms\ntimeout = 5s\nconnect_timeout = 2s\n",
	         peer_base(p));
	/* The SQLite install, filled through its real front door. */
	assert_int_equal(daemon_init(&lite, ini), 0);
	assert_int_equal(daemon_start(&lite), 0);
	for (k = 0; k < COPY_ORDERS; k++) {
		char event_id[64];
		char refund_id[64];
		char order[64];

		assert_int_equal(hn_order_create(&lite, 1000 * (k + 1), "usd", order), 0);
		snprintf(event_id, sizeof(event_id), "evt_copy_pay_%d", k);
		copy_post(&lite, &sent[n_sent++],
		          fx_stripe_payment(event_id, order, 1000 * (k + 1), "usd"));
		if (k % 3 == 0) {
			continue;
		}
		/* Partial refunds for some orders, full ones for others. */
		snprintf(event_id, sizeof(event_id), "evt_copy_ref_%d", k);
		snprintf(refund_id, sizeof(refund_id), "re_copy_%d", k);
		copy_post(&lite, &sent[n_sent++],
		          fx_stripe_refund(event_id, order, 1000 * (k + 1),
		                               k % 3 == 1 ? 300 : 1000 * (k + 1), refund_id,
		                               "usd"));
	}
	/* An event for an order nobody knows: stored, not applied. */
	copy_post(&lite, &sent[n_sent++],
	          fx_stripe_payment("evt_copy_unknown", "ord_unknownunknownunk", 500, "usd"));
	for (k = 0; k < COPY_API_ORDERS; k++) {
		copy_api_post(&lite, k, &api_first[k]);
		assert_int_equal(api_first[k].hs_status, 201);
	}
	assert_true(hn_db_int(lite.dm_db, "SELECT COUNT(*) FROM outbox") > 0);
	assert_true(hn_db_int(lite.dm_db, "SELECT COUNT(*) FROM refunds") > 0);
	assert_int_equal(daemon_term(&lite, 20), 0);
	want = copy_dump_all(lite.dm_db, lite.dm_db);
	assert_non_null(want);

	/* Stop, copy, switch the config, start. */
	assert_int_equal(daemon_init_pg(&pgd, ini), 0);
	snprintf(from, sizeof(from), "sqlite:%s", lite.dm_db);
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 0), 0);
	got = copy_dump_all(lite.dm_db, pgd.dm_db);
	copy_assert_same(want, got, "the copy on PostgreSQL");
	free(got);

	/* A target with data is refused, and left as it was; --replace
	 * replaces it. */
	assert_true(copy_run(&lite, from, pgd.dm_db, 0) != 0);
	got = copy_dump_all(lite.dm_db, pgd.dm_db);
	copy_assert_same(want, got, "the target after a refused copy");
	free(got);
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 1), 0);
	got = copy_dump_all(lite.dm_db, pgd.dm_db);
	copy_assert_same(want, got, "the copy after --replace");
	free(got);

	/* A receiver on PostgreSQL: every duplicate gets the stored reply. */
	assert_int_equal(daemon_start(&pgd), 0);
	copy_assert_duplicates(&pgd, sent, n_sent);
	for (k = 0; k < COPY_API_ORDERS; k++) {
		struct hres r;

		copy_api_post(&pgd, k, &r);
		copy_assert_replayed(&r, 201, api_first[k].hs_body, api_first[k].hs_body_len);
		hres_finish(&api_first[k]);
	}
	/* Nothing was applied twice; new ids do not collide with copied ones. */
	assert_int_equal(
	        hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	        hn_db_int(lite.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"));
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM points_ledger"),
	                 hn_db_int(lite.dm_db, "SELECT COUNT(*) FROM points_ledger"));
	{
		char id[64];
		struct copy_sent fresh;

		assert_int_equal(hn_order_create(&pgd, 4242, "usd", id), 0);
		copy_post(&pgd, &fresh, fx_stripe_payment("evt_copy_after", id, 4242, "usd"));
		assert_null(strstr(fresh.cs_reply, "replayed"));
		free(fresh.cs_body);
		free(fresh.cs_reply);
	}
	assert_int_equal(daemon_term(&pgd, 20), 0);

	/* And back: PostgreSQL to a new SQLite file holds what PostgreSQL holds. */
	assert_int_equal(daemon_init(&back, ini), 0);
	snprintf(back_loc, sizeof(back_loc), "sqlite:%s", back.dm_db);
	assert_int_equal(copy_run(&back, pgd.dm_db, back_loc, 0), 0);
	free(want);
	want = copy_dump_all(lite.dm_db, pgd.dm_db);
	got = copy_dump_all(lite.dm_db, back.dm_db);
	copy_assert_same(want, got, "the copy back to SQLite");
	free(got);
	free(want);
	/* A receiver on the copy back answers the same duplicates the same. */
	assert_int_equal(daemon_start(&back), 0);
	copy_assert_duplicates(&back, sent, n_sent);
	assert_int_equal(daemon_term(&back, 20), 0);

	for (i = 0; i < n_sent; i++) {
		free(sent[i].cs_body);
		free(sent[i].cs_reply);
	}
	daemon_finish(&back);
	daemon_finish(&pgd);
	daemon_finish(&lite);
	peer_destroy(p);
}

/* The keys of the outbox rows a SQLite receiver delivered, one per line. */
static int copy_key_listed(const char *keys, const char *key)
{
	size_t n = strlen(key);
	const char *k;

	for (k = keys; (k = strstr(k, key)) != NULL; k += n) {
		if ((k == keys || k[-1] == '\n') && (k[n] == '\n' || k[n] == '\0')) {
			return 1;
		}
	}
	return 0;
}

/* What an operator reads on the source and on its copy is the same. */
static void copy_assert_same_output(struct daemon *src, struct daemon *dst)
{
	static const char *const cmds[][8] = {
	        {"events", "list", "--limit", "100", NULL},
	        {"events", "list", "--failed", NULL},
	        {"events", "show", "1", "--json", NULL},
	        {"outbox", "list", NULL},
	        {"outbox", "show", "2", NULL},
	        {"audit", "list", NULL},
	        {"order", "list", "--json", NULL},
	};
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *want = NULL;
		char *got = NULL;
		char what[128];
		int rc_want = daemon_cli(src, 1, cmds[i], &want);
		int rc_got = daemon_cli(dst, 1, cmds[i], &got);

		snprintf(what, sizeof(what), "%s %s on the copy", cmds[i][0],
		         cmds[i][1] != NULL ? cmds[i][1] : "");
		assert_int_equal(rc_want, 0);
		assert_int_equal(rc_got, rc_want);
		copy_assert_same(want != NULL ? want : "", got != NULL ? got : "", what);
		free(want);
		free(got);
	}
}

static void test_a_store_copied_to_postgresql_keeps_auditing_and_delivering(void **state)
{
	struct peer *p = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct peer_behaviour busy = peer_reply(503, "{}");
	struct daemon lite;
	struct daemon pgd;
	char ini[2048];
	char from[700];
	char id[32];
	char *out = NULL;
	char *delivered;
	const char *dismiss[] = {"events", "dismiss", id, "--reason", "paid at the till", NULL};
	size_t seen;
	size_t i;
	int64_t attempts;
	int k;

	(void)state;
	assert_non_null(p);
	/* The shop takes the first notification, then is busy until the copy:
	 * the source holds rows delivered and rows waiting, with attempts. */
	peer_script(p, "/notify", &ok);
	peer_default(p, "/notify", &busy);
	snprintf(ini, sizeof(ini),
	         FX_STRIPE_INI
	         "\n[outbound]\nnotify_url = %s/notify\nretry_base = 1s\nretry_cap = 2s\n"
	         "max_attempts = 100\npoll = 50ms\ntimeout = 5s\nconnect_timeout = 2s\n",
	         peer_base(p));
	assert_int_equal(daemon_init(&lite, ini), 0);
	assert_int_equal(daemon_start(&lite), 0);
	for (k = 0; k < 3; k++) {
		char event_id[64];
		char order[64];

		assert_int_equal(hn_order_create(&lite, 2000 + k, "usd", order), 0);
		snprintf(event_id, sizeof(event_id), "evt_keep_pay_%d", k);
		assert_int_equal(fx_stripe_pay(&lite, event_id, order, 2000 + k, "usd"), 200);
	}
	/* Two events that can never apply: one dismissed before the copy,
	 * one after it. */
	assert_int_equal(
	        fx_stripe_pay(&lite, "evt_keep_lost_0", "ord_keeplostkeeplost00", 5, "usd"), 200);
	assert_int_equal(
	        fx_stripe_pay(&lite, "evt_keep_lost_1", "ord_keeplostkeeplost01", 5, "usd"), 200);
	snprintf(id, sizeof(id), "%lld",
	         (long long)hn_db_int(lite.dm_db,
	                              "SELECT id FROM events WHERE idem_key = 'evt_keep_lost_0'"));
	assert_int_equal(daemon_cli(&lite, 1, dismiss, &out), 0);
	free(out);
	out = NULL;
	assert_int_equal(hn_db_wait_int(lite.dm_db,
	                                "SELECT COUNT(*) >= 2 FROM outbox_attempts WHERE "
	                                "http_status = 503",
	                                1, 20),
	                 1);
	assert_int_equal(daemon_term(&lite, 20), 0);
	delivered =
	        hn_db_dump(lite.dm_db, "SELECT idem_key FROM outbox WHERE status = 'succeeded'");
	assert_non_null(delivered);
	assert_true(delivered[0] != '\0');
	assert_true(hn_db_int(lite.dm_db,
	                      "SELECT COUNT(*) FROM outbox WHERE status <> 'succeeded'") > 0);
	attempts = hn_db_int(lite.dm_db, "SELECT COUNT(*) FROM outbox_attempts");

	assert_int_equal(daemon_init_pg(&pgd, ini), 0);
	snprintf(from, sizeof(from), "sqlite:%s", lite.dm_db);
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 0), 0);
	copy_assert_same_output(&lite, &pgd);

	/* The shop is back: the receiver on PostgreSQL delivers what waited,
	 * recording each attempt, and nothing that had been delivered. */
	peer_default(p, "/notify", &ok);
	seen = peer_count(p);
	assert_int_equal(daemon_start(&pgd), 0);
	assert_int_equal(hn_db_wait_int(pgd.dm_db,
	                                "SELECT COUNT(*) FROM outbox WHERE status <> 'succeeded'",
	                                0, 20),
	                 0);
	assert_true(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM outbox_attempts") > attempts);
	for (i = seen; i < peer_count(p); i++) {
		struct peer_request r;

		assert_int_equal(peer_request(p, i, &r), 0);
		assert_non_null(r.pq_idem_key);
		if (copy_key_listed(delivered, r.pq_idem_key)) {
			fail_msg("outbox row %s was delivered before the copy and again after it",
			         r.pq_idem_key);
		}
		peer_request_finish(&r);
	}

	/* An operator action on the copy is audited next to the copied ones. */
	snprintf(id, sizeof(id), "%lld",
	         (long long)hn_db_int(pgd.dm_db,
	                              "SELECT id FROM events WHERE idem_key = 'evt_keep_lost_1'"));
	assert_int_equal(daemon_cli(&pgd, 1, dismiss, &out), 0);
	free(out);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM audit_log WHERE "
	                                      "action = 'events.dismiss' AND result = 'ok'"),
	                 2);
	assert_int_equal(daemon_term(&pgd, 20), 0);

	free(delivered);
	daemon_finish(&pgd);
	daemon_finish(&lite);
	peer_destroy(p);
}

/* copy_run in a child of its own: returns the copy's exit status and its
 * peak resident memory (KiB) in *ret_rss_kb. */
static int copy_run_measured(struct daemon *d, const char *from, const char *to, long *ret_rss_kb)
{
	int fds[2];
	pid_t pid;
	int status;
	long got[2] = {-1, -1};

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rusage ru;
		long out[2];

		close(fds[0]);
		out[0] = copy_run(d, from, to, 0);
		out[1] = getrusage(RUSAGE_CHILDREN, &ru) == 0 ? ru.ru_maxrss : -1;
		if (write(fds[1], out, sizeof(out)) != (ssize_t)sizeof(out)) {
			_exit(1);
		}
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], got, sizeof(got)), (ssize_t)sizeof(got));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	*ret_rss_kb = got[1];
	return (int)got[0];
}

/* The tables with composite keys hold the same rows at from and to. */
static void copy_assert_same_keys(const char *from, const char *to, const char *what)
{
	static const char *const sqls[] = {
	        "SELECT provider, ref, order_id FROM order_refs ORDER BY order_id",
	        "SELECT provider, dispute_ref, step_key FROM dispute_steps ORDER BY created_at",
	};
	size_t i;

	for (i = 0; i < sizeof(sqls) / sizeof(sqls[0]); i++) {
		char *want = hn_db_dump(from, sqls[i]);
		char *got = hn_db_dump(to, sqls[i]);

		assert_non_null(want);
		assert_true(strlen(want) > 1000);
		copy_assert_same(want, got, what);
		free(want);
		free(got);
	}
}

static void test_a_large_postgresql_source_is_copied_a_page_at_a_time(void **state)
{
	struct daemon pgd;
	struct daemon back;
	struct daemon again;
	char back_loc[700];
	char sql[1024];
	long rss_kb;

	(void)state;
	assert_int_equal(daemon_init_pg(&pgd, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&pgd), 0);
	assert_int_equal(daemon_term(&pgd, 20), 0);
	/* Two providers interleaved: the composite key's order is not the
	 * order the rows were written in. */
	snprintf(sql, sizeof(sql),
	         "INSERT INTO orders (id, amount, currency, created_at, updated_at) "
	         "SELECT 'ord_big_' || lpad(i::text, 6, '0'), i, 'USD', i, i "
	         "FROM generate_series(1, %d) AS i",
	         COPY_BIG_REFS);
	assert_int_equal(hn_db_exec(pgd.dm_db, sql), 0);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO order_refs (provider, ref, order_id, kind, created_at) "
	         "SELECT CASE WHEN i %% 2 = 0 THEN 'stripe' ELSE 'adyen' END, "
	         "'pi_' || (%d - i), 'ord_big_' || lpad(i::text, 6, '0'), 'payment', i "
	         "FROM generate_series(1, %d) AS i",
	         COPY_BIG_REFS, COPY_BIG_REFS);
	assert_int_equal(hn_db_exec(pgd.dm_db, sql), 0);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO dispute_steps (provider, dispute_ref, step_key, outcome, created_at) "
	         "SELECT 'p' || (i %% 3), 'dp_' || (i %% 7), 'st_' || i, 'opened', i "
	         "FROM generate_series(1, %d) AS i",
	         COPY_BIG_REFS);
	assert_int_equal(hn_db_exec(pgd.dm_db, sql), 0);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO audit_log (at, actor, action, target, reason, result) "
	         "SELECT i, 'cli:big', 'events.dismiss', 'event:' || i, repeat('r', %d), 'ok' "
	         "FROM generate_series(1, %d) AS i",
	         COPY_BIG_REASON, COPY_BIG_AUDIT);
	assert_int_equal(hn_db_exec(pgd.dm_db, sql), 0);

	assert_int_equal(daemon_init(&back, NULL), 0);
	snprintf(back_loc, sizeof(back_loc), "sqlite:%s", back.dm_db);
	assert_int_equal(copy_run_measured(&pgd, pgd.dm_db, back_loc, &rss_kb), 0);
	if (COPY_RSS_MEANINGFUL && rss_kb > COPY_BIG_RSS_MAX_KB) {
		fail_msg("the copy of %d MB of audit text held %ld KiB",
		         COPY_BIG_AUDIT * COPY_BIG_REASON >> 20, rss_kb);
	}
	copy_assert_same_keys(pgd.dm_db, back.dm_db, "PostgreSQL to SQLite");
	/* And from SQLite, whose statements read their parameters as they
	 * step: each page starts after the last key of the one before. */
	assert_int_equal(daemon_init_pg(&again, FX_STRIPE_INI), 0);
	assert_int_equal(copy_run(&back, back_loc, again.dm_db, 0), 0);
	copy_assert_same_keys(back.dm_db, again.dm_db, "SQLite to PostgreSQL");
	assert_int_equal(hn_db_int(again.dm_db, "SELECT COUNT(*) FROM audit_log"), COPY_BIG_AUDIT);
	assert_int_equal(hn_db_int(back.dm_db, "SELECT COUNT(*) FROM orders"), COPY_BIG_REFS);
	assert_int_equal(hn_db_int(back.dm_db, "SELECT COUNT(DISTINCT id) FROM audit_log WHERE "
	                                       "length(reason) = " COPY_STR(COPY_BIG_REASON)),
	                 COPY_BIG_AUDIT);
	assert_int_equal(hn_db_int(back.dm_db, "SELECT MAX(id) FROM audit_log"), COPY_BIG_AUDIT);

	daemon_finish(&again);
	daemon_finish(&back);
	daemon_finish(&pgd);
}

/* A fake Stripe v2 events API (as tests/integration/test_stripe_thin_e2e.c
 * has): GET /v2/core/events/evt_thin_<pi> answers 500 while down, then the
 * full event of the one payment it was given. */
#define COPY_THIN_KEY "rk_test_store_copy"

static struct {
	pthread_mutex_t ct_lock;
	int ct_up;
	unsigned ct_served; /* full events served */
	char ct_pi[96];
	char ct_order[64];
	int64_t ct_amount;
} copy_thin = {.ct_lock = PTHREAD_MUTEX_INITIALIZER};

static void copy_thin_done(void *arg, struct peer_behaviour *b)
{
	(void)arg;
	free((char *)b->pb_body);
}

static void copy_thin_events(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	const char *id = req->pq_path + strlen("/v2/core/events/");
	struct buf b;

	(void)arg;
	pthread_mutex_lock(&copy_thin.ct_lock);
	if (req->pq_authorization == NULL ||
	    strcmp(req->pq_authorization, "Bearer " COPY_THIN_KEY) != 0) {
		ret->pb_status = 401;
		ret->pb_body = strdup("{\"error\":{\"message\":\"Invalid API Key provided\"}}");
	} else if (!copy_thin.ct_up) {
		ret->pb_status = 500;
		ret->pb_body = strdup("{\"error\":{\"message\":\"An unknown error occurred\"}}");
	} else if (strncmp(id, "evt_thin_", 9) != 0 || strcmp(id + 9, copy_thin.ct_pi) != 0) {
		ret->pb_status = 404;
		ret->pb_body = strdup("{\"error\":{\"message\":\"No such event\"}}");
	} else {
		buf_init(&b, 0);
		buf_printf(
		        &b,
		        "{\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":"
		        "\"v1.payment_intent.succeeded\",\"created\":\"2026-12-04T08:00:00.000Z\","
		        "\"livemode\":false,\"context\":null,\"related_object\":{\"id\":\"%s\","
		        "\"type\":\"payment_intent\",\"url\":\"/v1/payment_intents/%s\"},"
		        "\"data\":{\"object\":{\"id\":\"%s\",\"object\":\"payment_intent\","
		        "\"amount\":%lld,\"amount_received\":%lld,\"currency\":\"usd\","
		        "\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}}}",
		        id, copy_thin.ct_pi, copy_thin.ct_pi, copy_thin.ct_pi,
		        (long long)copy_thin.ct_amount, (long long)copy_thin.ct_amount,
		        copy_thin.ct_order);
		ret->pb_body = buf_take(&b, NULL);
		copy_thin.ct_served++;
	}
	pthread_mutex_unlock(&copy_thin.ct_lock);
}

static unsigned copy_thin_served(void)
{
	unsigned n;

	pthread_mutex_lock(&copy_thin.ct_lock);
	n = copy_thin.ct_served;
	pthread_mutex_unlock(&copy_thin.ct_lock);
	return n;
}

/* A thin event the SQLite receiver could not fetch (Stripe's API down)
 * waits for its full event in the copy: a receiver on PostgreSQL fetches
 * it once Stripe answers, and applies it once; its duplicate is answered
 * from the stored reply. */
static void
test_a_thin_event_waiting_on_the_source_is_fetched_and_applied_once_on_the_copy(void **state)
{
	struct peer *api = peer_create();
	struct peer *shop = peer_create();
	struct peer_behaviour ok = peer_reply(200, "{}");
	struct daemon lite;
	struct daemon pgd;
	char ini[2048];
	char from[700];
	char order[64];
	char event_id[160];
	char sql[512];
	char thin[1024];
	char *replayed;
	struct hres r;

	(void)state;
	assert_non_null(api);
	assert_non_null(shop);
	peer_default(shop, "/notify", &ok);
	assert_int_equal(
	        peer_handler(api, "/v2/core/events/", copy_thin_events, copy_thin_done, NULL), 0);
	setenv("IDEMHOOK_COPY_THIN_KEY", COPY_THIN_KEY, 1);
	snprintf(ini, sizeof(ini),
	         "[provider stripe]\ntype = stripe\nsecret = " FX_STRIPE_SECRET "\n"
	         "api_key = env:IDEMHOOK_COPY_THIN_KEY\napi_base_url = %s\n\n"
	         "[points]\nrate = 1/100\n\n"
	         "[outbound]\nnotify_url = %s/notify\npoll = 50ms\n\n"
	         "[reconcile]\nretries = 2\nretry_base = 50ms\ntimeout = 1s\n",
	         peer_base(api), peer_base(shop));
	assert_int_equal(daemon_init(&lite, ini), 0);
	assert_int_equal(daemon_start(&lite), 0);
	assert_int_equal(hn_order_create(&lite, 1900, "usd", order), 0);
	pthread_mutex_lock(&copy_thin.ct_lock);
	copy_thin.ct_up = 0;
	copy_thin.ct_served = 0;
	snprintf(copy_thin.ct_pi, sizeof(copy_thin.ct_pi), "pi_%s", order);
	snprintf(copy_thin.ct_order, sizeof(copy_thin.ct_order), "%s", order);
	copy_thin.ct_amount = 1900;
	pthread_mutex_unlock(&copy_thin.ct_lock);
	snprintf(event_id, sizeof(event_id), "evt_thin_pi_%s", order);
	snprintf(thin, sizeof(thin),
	         "{\"id\":\"%s\",\"object\":\"v2.core.event\",\"type\":"
	         "\"v1.payment_intent.succeeded\",\"created\":\"2026-12-04T08:00:00.000Z\","
	         "\"livemode\":false,\"context\":null,\"related_object\":{\"id\":\"pi_%s\","
	         "\"type\":\"payment_intent\",\"url\":\"/v1/payment_intents/pi_%s\"}}",
	         event_id, order, order);
	assert_int_equal(fx_stripe_send(&lite, thin, NULL), 200);
	assert_int_equal(daemon_log_wait(&lite, "gave up after 3 attempts: HTTP 500", 10000), 0);
	assert_int_equal(daemon_term(&lite, 20), 0);
	/* Waiting on the source: nothing applied. */
	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND effect = 'to_fetch'",
	         event_id);
	assert_int_equal(hn_db_int(lite.dm_db, sql), 1);
	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM orders WHERE id = '%s' AND status = "
	         "'pending'",
	         order);
	assert_int_equal(hn_db_int(lite.dm_db, sql), 1);
	assert_int_equal(copy_thin_served(), 0);

	/* The copy, then Stripe back, then a receiver on the copy. */
	assert_int_equal(daemon_init_pg(&pgd, ini), 0);
	snprintf(from, sizeof(from), "sqlite:%s", lite.dm_db);
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 0), 0);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM events WHERE effect = "
	                                      "'to_fetch'"),
	                 1);
	pthread_mutex_lock(&copy_thin.ct_lock);
	copy_thin.ct_up = 1;
	pthread_mutex_unlock(&copy_thin.ct_lock);
	assert_int_equal(daemon_start(&pgd), 0);
	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM orders WHERE id = '%s' AND status = "
	         "'paid'",
	         order);
	assert_int_equal(hn_db_wait_int(pgd.dm_db, sql, 1, 20), 1);
	assert_int_equal(copy_thin_served(), 1);
	snprintf(sql, sizeof(sql),
	         "SELECT COUNT(*) FROM events WHERE idem_key = '%s' AND effect = 'to_fetch'",
	         event_id);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 0);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'",
	         order);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 1);

	/* Once: Stripe's retry of the thin event is a duplicate, and a
	 * restarted receiver has nothing left to fetch. */
	assert_int_equal(fx_stripe_send(&pgd, thin, &r), 200);
	replayed = hres_header(&r, "Idempotent-Replayed");
	assert_non_null(replayed);
	free(replayed);
	hres_finish(&r);
	assert_int_equal(daemon_term(&pgd, 20), 0);
	assert_int_equal(daemon_start(&pgd), 0);
	assert_int_equal(fx_stripe_pay(&pgd, "evt_copy_thin_after", order, 1900, "usd"), 200);
	assert_int_equal(daemon_term(&pgd, 20), 0);
	assert_int_equal(copy_thin_served(), 1);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM outbox WHERE order_id = '%s'", order);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 1);

	daemon_finish(&pgd);
	daemon_finish(&lite);
	peer_destroy(api);
	peer_destroy(shop);
}

/* The refusal store copy wrote to d's log since it was `before` bytes
 * long: the receiver's sessions named, the flag that overrides it. */
static void copy_assert_refused(const struct daemon *d, size_t before, const char *flag)
{
	char *log = hn_read_file(d->dm_log);
	const char *said;

	assert_non_null(log);
	assert_true(strlen(log) >= before);
	said = log + before;
	if (strstr(said, flag) == NULL ||
	    strstr(said, "(1 receiver, by its \"idemhook writer\")") == NULL ||
	    strstr(said, "\"idemhook writer\" from the local socket") == NULL ||
	    strstr(said, "--allow-running") == NULL) {
		fail_msg("no refusal naming the receiver on %s in:\n%s", flag, said);
	}
	free(log);
}

static size_t copy_log_len(const struct daemon *d)
{
	char *log = hn_read_file(d->dm_log);
	size_t n = log != NULL ? strlen(log) : 0;

	free(log);
	return n;
}

/* A PostgreSQL end has no file lock: a receiver still running on it is
 * found in pg_stat_activity and the copy refused (69), in both
 * directions, nothing changed; --allow-running overrides it; stopped, the
 * copy runs. */
static void test_a_copy_is_refused_while_a_receiver_runs_on_a_postgresql_end(void **state)
{
	struct daemon lite;
	struct daemon pgd;
	struct daemon back;
	char from[700];
	char back_loc[700];
	char lite_order[64];
	char pg_order[64];
	char sql[256];
	size_t before;
	int rc;

	(void)state;
	assert_int_equal(daemon_init(&lite, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&lite), 0);
	assert_int_equal(hn_order_create(&lite, 1500, "usd", lite_order), 0);
	assert_int_equal(fx_stripe_pay(&lite, "evt_running_lite", lite_order, 1500, "usd"), 200);
	assert_int_equal(daemon_term(&lite, 20), 0);
	assert_int_equal(daemon_init_pg(&pgd, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&pgd), 0);
	assert_int_equal(hn_order_create(&pgd, 2500, "usd", pg_order), 0);
	assert_int_equal(fx_stripe_pay(&pgd, "evt_running_pg", pg_order, 2500, "usd"), 200);
	snprintf(from, sizeof(from), "sqlite:%s", lite.dm_db);
	assert_int_equal(daemon_init(&back, NULL), 0);
	snprintf(back_loc, sizeof(back_loc), "sqlite:%s", back.dm_db);

	/* Into the running receiver's database: refused, its rows kept. */
	before = copy_log_len(&lite);
	rc = copy_run(&lite, from, pgd.dm_db, 1);
	assert_int_equal(rc, 69);
	copy_assert_refused(&lite, before, "--to");
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM orders WHERE id = '%s'", pg_order);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 1);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM orders"), 1);
	/* Out of it: refused before the SQLite target is made. */
	before = copy_log_len(&back);
	rc = copy_run(&back, pgd.dm_db, back_loc, 0);
	assert_int_equal(rc, 69);
	copy_assert_refused(&back, before, "--from");
	assert_int_not_equal(access(back.dm_db, F_OK), 0);
	/* The receiver answers on, untouched by the refusals. */
	assert_int_equal(fx_stripe_pay(&pgd, "evt_running_pg", pg_order, 2500, "usd"), 200);
	{
		const char *args[] = {"store", "copy",   "--from",          pgd.dm_db,
		                      "--to",  back_loc, "--allow-running", NULL};

		assert_int_equal(daemon_cli(&back, 0, args, NULL), 0);
	}
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM orders WHERE id = '%s'", pg_order);
	assert_int_equal(hn_db_int(back.dm_db, sql), 1);

	/* Stopped: both directions copy. */
	assert_int_equal(daemon_term(&pgd, 20), 0);
	assert_int_equal(copy_run(&back, pgd.dm_db, back_loc, 1), 0);
	assert_int_equal(hn_db_int(back.dm_db, sql), 1);
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 1), 0);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM orders WHERE id = '%s'", lite_order);
	assert_int_equal(hn_db_int(pgd.dm_db, sql), 1);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM orders"), 1);

	daemon_finish(&back);
	daemon_finish(&pgd);
	daemon_finish(&lite);
}

/* Another session's lock on the target's audit_log, kept while it sleeps
 * and dropped COPY_LOCK_HOLD_MS after it was taken. */
struct copy_holder {
	const char *ch_db;
	pthread_t ch_thread;
	pthread_t ch_releaser;
};

static void *copy_holder_main(void *arg)
{
	struct copy_holder *ch = arg;

	/* Fails when terminated: that is how the lock is released. */
	pgserver_psql(pgserver_shared(NULL), ch->ch_db,
	              "BEGIN; LOCK TABLE audit_log IN SHARE MODE; SELECT pg_sleep(120); COMMIT;",
	              NULL);
	return NULL;
}

static int64_t copy_holder_sessions(const struct copy_holder *ch, const char *what)
{
	char sql[512];
	char *out = NULL;
	int64_t n = -1;

	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM pg_stat_activity WHERE datname = '%s' AND query LIKE "
	         "'%%pg_sleep(120)%%' AND pid <> pg_backend_pid() AND wait_event = 'PgSleep'",
	         what, ch->ch_db);
	if (pgserver_psql(pgserver_shared(NULL), ch->ch_db, sql, &out) == 0 && out != NULL) {
		n = strtoll(out, NULL, 10);
	}
	free(out);
	return n;
}

static void *copy_releaser_main(void *arg)
{
	struct copy_holder *ch = arg;

	usleep(COPY_LOCK_HOLD_MS * 1000);
	copy_holder_sessions(ch, "count(pg_terminate_backend(pid))");
	return NULL;
}

static void test_a_copy_statement_may_run_longer_than_serves_statement_timeout(void **state)
{
	struct daemon lite;
	struct daemon pgd;
	struct copy_holder ch;
	char from[700];
	int tries;
	int64_t t0;
	int rc;

	(void)state;
	assert_int_equal(daemon_init(&lite, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&lite), 0);
	assert_int_equal(daemon_term(&lite, 20), 0);
	assert_int_equal(hn_db_exec(lite.dm_db,
	                            "INSERT INTO audit_log (at, actor, action, target, "
	                            "result) VALUES (1, 'cli:new', 'a', 'event:1', 'ok')"),
	                 0);
	assert_int_equal(daemon_init_pg(&pgd, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&pgd), 0);
	assert_int_equal(daemon_term(&pgd, 20), 0);
	assert_int_equal(hn_db_exec(pgd.dm_db,
	                            "INSERT INTO audit_log (at, actor, action, target, "
	                            "result) VALUES (1, 'cli:old', 'a', 'event:1', 'ok')"),
	                 0);

	/* --replace's DELETE waits on the lock for longer than 5 s. */
	ch.ch_db = pgd.dm_pg_db;
	assert_int_equal(pthread_create(&ch.ch_thread, NULL, copy_holder_main, &ch), 0);
	for (tries = 0; tries < 500 && copy_holder_sessions(&ch, "count(*)") != 1; tries++) {
		usleep(20 * 1000);
	}
	assert_int_equal(copy_holder_sessions(&ch, "count(*)"), 1);
	assert_int_equal(pthread_create(&ch.ch_releaser, NULL, copy_releaser_main, &ch), 0);
	t0 = hn_now_ms();
	snprintf(from, sizeof(from), "sqlite:%s", lite.dm_db);
	{
		/* The holder is another session on the target: the copy is
		 * told to run beside it. */
		const char *args[] = {"store",   "copy",      "--from",          from, "--to",
		                      pgd.dm_db, "--replace", "--allow-running", NULL};

		rc = daemon_cli(&lite, 0, args, NULL);
	}
	pthread_join(ch.ch_releaser, NULL);
	pthread_join(ch.ch_thread, NULL);
	assert_int_equal(rc, 0);
	assert_true(hn_now_ms() - t0 >= COPY_LOCK_HOLD_MS - 1000);
	assert_int_equal(
	        hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM audit_log WHERE actor = 'cli:new'"), 1);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM audit_log"), 1);

	daemon_finish(&pgd);
	daemon_finish(&lite);
}

/* A database an older store copy made: audit_log and outbox_attempts rows
 * copied with their ids, their identity generators left at 1 (the copy
 * moved only the tables of migrations 0001 to 0005), and an outbox row
 * waiting. */
static void copy_rows_before_0018(struct buf *sql, int pg, void *arg)
{
	int i;

	(void)pg;
	(void)arg;
	buf_printf(sql, "INSERT INTO outbox (id, call_type, effect, url, content_type, body, "
	                "idem_key, status, window_start, next_attempt_at, created_at, updated_at) "
	                "VALUES (7, 'notify', 'notify', 'http://127.0.0.1:9/n', "
	                "'application/json', '\\x7b7d', 'ob-copied-7', 'pending', 1000, "
	                "4102444800000, 1000, 1000);\n");
	buf_printf(sql, "SELECT setval(pg_get_serial_sequence('outbox', 'id'), 8, false);\n");
	for (i = 1; i <= 3; i++) {
		buf_printf(sql,
		           "INSERT INTO audit_log (id, at, actor, action, target, result) VALUES "
		           "(%d, %d, 'cli:copied', 'outbox.retry', 'outbox:7', 'ok');\n"
		           "INSERT INTO outbox_attempts (id, outbox_id, attempt, at, http_status) "
		           "VALUES (%d, 7, %d, %d, 503);\n",
		           i, 1000 + i, i, i, 1000 + i);
	}
}

/* Migration 0018 moves the generators an older store copy left behind:
 * after `migrate`, the operator's next action and the worker's next
 * attempt get new ids instead of failing on the primary key; a generator
 * already ahead is not moved back. */
static void test_migrate_moves_the_ids_an_older_copy_left_behind(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const cancel[] = {"outbox", "cancel", "7", NULL};
	struct daemon d;
	int rc;

	(void)state;
	assert_int_equal(daemon_init_pg(&d, FX_STRIPE_INI), 0);
	rc = hn_db_build_before(&d, "_move_identities_past_copied_ids.sql", copy_rows_before_0018,
	                        NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	/* An operator's action is audited (before: a duplicate key, the audit
	 * row lost and only logged). */
	assert_int_equal(daemon_cli(&d, 1, cancel, NULL), 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT MAX(id) FROM audit_log"), 4);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM audit_log WHERE id = 4 AND "
	                                    "action = 'outbox.cancel' AND result LIKE 'ok:%'"),
	                 1);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM outbox WHERE status = "
	                                    "'cancelled'"),
	                 1);
	/* The worker's next attempt row gets a new id too. */
	assert_int_equal(hn_db_exec(d.dm_db, "INSERT INTO outbox_attempts (outbox_id, attempt, at) "
	                                     "VALUES (7, 4, 2000)"),
	                 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT MAX(id) FROM outbox_attempts"), 4);
	/* Only forward: rows deleted (gc) leave the generator where it is. */
	assert_int_equal(hn_db_exec(d.dm_db, "DELETE FROM outbox_attempts WHERE id >= 3"), 0);
	assert_int_equal(hn_db_exec(d.dm_db, "DELETE FROM idemhook_schema WHERE version = 18"), 0);
	assert_int_equal(daemon_cli(&d, 1, migrate, NULL), 0);
	assert_int_equal(hn_db_exec(d.dm_db, "INSERT INTO outbox_attempts (outbox_id, attempt, at) "
	                                     "VALUES (7, 5, 3000)"),
	                 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT MAX(id) FROM outbox_attempts"), 5);
	daemon_finish(&d);
}

/* ---- other sessions, and a role that is no superuser ---- */

/* A psql session that sleeps on a database until it is ended: db may carry
 * further conninfo keywords after the name ("db user=x"; a later keyword
 * wins over pgserver_conninfo's). */
struct copy_session {
	char cs_db[128];
	char cs_sql[128];
	char cs_tag[32];
	pthread_t cs_thread;
};

static void *copy_session_main(void *arg)
{
	struct copy_session *cs = arg;

	/* Fails when terminated: that is how it ends. */
	pgserver_psql(pgserver_shared(NULL), cs->cs_db, cs->cs_sql, NULL);
	return NULL;
}

/* what (an aggregate) over the session, read by the superuser. */
static int64_t copy_session_query(const struct copy_session *cs, const char *what)
{
	char sql[512];
	char *out = NULL;
	int64_t n = -1;

	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM pg_stat_activity WHERE query LIKE '%%pg_sleep(120) AS %s%%' "
	         "AND pid <> pg_backend_pid() AND wait_event = 'PgSleep'",
	         what, cs->cs_tag);
	if (pgserver_psql(pgserver_shared(NULL), "postgres", sql, &out) == 0 && out != NULL) {
		n = strtoll(out, NULL, 10);
	}
	free(out);
	return n;
}

/* Starts the session and returns its server pid once it sleeps. */
static int64_t copy_session_start(struct copy_session *cs, const char *db, const char *tag)
{
	int tries;

	snprintf(cs->cs_db, sizeof(cs->cs_db), "%s", db);
	snprintf(cs->cs_tag, sizeof(cs->cs_tag), "%s", tag);
	snprintf(cs->cs_sql, sizeof(cs->cs_sql), "SELECT pg_sleep(120) AS %s", tag);
	assert_int_equal(pthread_create(&cs->cs_thread, NULL, copy_session_main, cs), 0);
	for (tries = 0; tries < 500 && copy_session_query(cs, "count(*)") != 1; tries++) {
		usleep(20 * 1000);
	}
	assert_int_equal(copy_session_query(cs, "count(*)"), 1);
	return copy_session_query(cs, "max(pid)");
}

static void copy_session_end(struct copy_session *cs)
{
	assert_int_equal(copy_session_query(cs, "count(pg_terminate_backend(pid))"), 1);
	pthread_join(cs->cs_thread, NULL);
}

/* The refusal in d's log since `before` names the session as want. */
static void copy_assert_refused_for(const struct daemon *d, size_t before, const char *want)
{
	char *log = hn_read_file(d->dm_log);

	assert_non_null(log);
	assert_true(strlen(log) >= before);
	if (strstr(log + before, "the database has 1 other session: ") == NULL ||
	    strstr(log + before, want) == NULL) {
		fail_msg("no refusal naming %s in:\n%s", want, log + before);
	}
	free(log);
}

/* Only sessions that may write to the copy's own database refuse it: an
 * operator's psql left open on another database of the server does not,
 * nor does a read-only idemhook command's session on the same one (the
 * store's "idemhook reader", READ ONLY); a psql on the same database
 * does, named with its address and pid. */
static void test_a_copy_is_refused_only_by_sessions_that_may_write_its_database(void **state)
{
	struct copy_session other;
	struct copy_session reader;
	struct copy_session psql;
	struct daemon pgd;
	struct daemon back;
	char back_loc[700];
	char reader_db[128];
	char want[128];
	char order[64];
	size_t before;
	int64_t pid;

	(void)state;
	assert_int_equal(daemon_init_pg(&pgd, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&pgd), 0);
	assert_int_equal(hn_order_create(&pgd, 2500, "usd", order), 0);
	assert_int_equal(fx_stripe_pay(&pgd, "evt_sessions_pg", order, 2500, "usd"), 200);
	assert_int_equal(daemon_term(&pgd, 20), 0);
	assert_int_equal(daemon_init(&back, NULL), 0);
	snprintf(back_loc, sizeof(back_loc), "sqlite:%s", back.dm_db);

	copy_session_start(&other, "postgres", "other_database");
	snprintf(reader_db, sizeof(reader_db), "%s application_name='idemhook reader'",
	         pgd.dm_pg_db);
	copy_session_start(&reader, reader_db, "read_only_command");
	assert_int_equal(copy_run(&back, pgd.dm_db, back_loc, 0), 0);
	assert_int_equal(hn_db_int(back.dm_db, "SELECT COUNT(*) FROM orders"), 1);

	pid = copy_session_start(&psql, pgd.dm_pg_db, "same_database");
	before = copy_log_len(&back);
	assert_int_equal(copy_run(&back, pgd.dm_db, back_loc, 1), 69);
	snprintf(want, sizeof(want), "1 \"psql\" from the local socket (pid %lld)", (long long)pid);
	copy_assert_refused_for(&back, before, want);
	copy_session_end(&psql);
	copy_session_end(&reader);
	copy_session_end(&other);
	daemon_finish(&back);
	daemon_finish(&pgd);
}

#define COPY_OWNER "idemhook_copy_owner"
#define COPY_OWNED_DB "idemhook_copy_owned"

/* The production setup of docs/postgresql.md: a role that is no superuser
 * and owns the database. The copy into it migrates and fills it; its
 * session check sees a superuser's session (name and pid, the address
 * hidden from this role) and refuses; --replace then keeps the id
 * generators where the database had moved them, so no id the target gave
 * out before is given to another row. */
static void test_a_copy_by_the_owner_of_the_database_needs_no_superuser(void **state)
{
	struct copy_session admin;
	struct daemon first;
	struct daemon lite;
	struct daemon pgd;
	char from[700];
	char want[160];
	char order[64];
	char *out = NULL;
	size_t before;
	int64_t pid;
	int64_t next;
	int i;

	(void)state;
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), "postgres",
	                               "CREATE ROLE " COPY_OWNER " LOGIN NOSUPERUSER", NULL),
	                 0);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), "postgres",
	                               "CREATE DATABASE " COPY_OWNED_DB " OWNER " COPY_OWNER, NULL),
	                 0);
	memset(&first, 0, sizeof(first));
	snprintf(first.dm_pg_db, sizeof(first.dm_pg_db), "%s user=%s", COPY_OWNED_DB, COPY_OWNER);
	assert_int_equal(daemon_init_beside(&pgd, &first, FX_STRIPE_INI), 0);

	assert_int_equal(daemon_init(&lite, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_start(&lite), 0);
	assert_int_equal(hn_order_create(&lite, 1500, "usd", order), 0);
	assert_int_equal(fx_stripe_pay(&lite, "evt_owner_lite", order, 1500, "usd"), 200);
	assert_int_equal(daemon_term(&lite, 20), 0);
	snprintf(from, sizeof(from), "sqlite:%s", lite.dm_db);

	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 0), 0);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
	                 1);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM points_ledger"), 1);
	assert_int_equal(
	        pgserver_psql(pgserver_shared(NULL), COPY_OWNED_DB,
	                      "SELECT tableowner FROM pg_tables WHERE tablename = 'orders'", &out),
	        0);
	assert_non_null(out);
	assert_non_null(strstr(out, COPY_OWNER));
	free(out);

	/* A receiver on it as the owner gives out points ids 2 and 3. */
	assert_int_equal(daemon_start(&pgd), 0);
	for (i = 0; i < 2; i++) {
		char event[32];

		assert_int_equal(hn_order_create(&pgd, 1500, "usd", order), 0);
		snprintf(event, sizeof(event), "evt_owner_pg_%d", i);
		assert_int_equal(fx_stripe_pay(&pgd, event, order, 1500, "usd"), 200);
	}
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT MAX(id) FROM points_ledger"), 3);
	assert_int_equal(daemon_term(&pgd, 20), 0);

	/* The superuser's session: seen by the owner, its address hidden. */
	pid = copy_session_start(&admin, COPY_OWNED_DB, "superuser_session");
	before = copy_log_len(&lite);
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 1), 69);
	snprintf(want, sizeof(want), "1 \"psql\" from an address hidden from this role (pid %lld)",
	         (long long)pid);
	copy_assert_refused_for(&lite, before, want);
	copy_session_end(&admin);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM points_ledger"), 3);

	/* --replace: the source's one row, and the next id is still new. */
	assert_int_equal(copy_run(&lite, from, pgd.dm_db, 1), 0);
	assert_int_equal(hn_db_int(pgd.dm_db, "SELECT COUNT(*) FROM points_ledger"), 1);
	assert_int_equal(pgserver_psql(pgserver_shared(NULL), COPY_OWNED_DB " user=" COPY_OWNER,
	                               "SELECT nextval(pg_get_serial_sequence('points_ledger', "
	                               "'id'))",
	                               &out),
	                 0);
	assert_non_null(out);
	next = strtoll(out, NULL, 10);
	free(out);
	print_message("points_ledger's next id after --replace: %lld\n", (long long)next);
	assert_true(next > 3);

	daemon_finish(&pgd);
	daemon_finish(&lite);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_sqlite_install_copied_to_postgresql_answers_its_duplicates_the_same),
	        cmocka_unit_test(test_a_store_copied_to_postgresql_keeps_auditing_and_delivering),
	        cmocka_unit_test(test_a_large_postgresql_source_is_copied_a_page_at_a_time),
	        cmocka_unit_test(test_a_copy_is_refused_while_a_receiver_runs_on_a_postgresql_end),
	        cmocka_unit_test(
	                test_a_thin_event_waiting_on_the_source_is_fetched_and_applied_once_on_the_copy),
	        cmocka_unit_test(
	                test_a_copy_statement_may_run_longer_than_serves_statement_timeout),
	        cmocka_unit_test(test_migrate_moves_the_ids_an_older_copy_left_behind),
	        cmocka_unit_test(
	                test_a_copy_is_refused_only_by_sessions_that_may_write_its_database),
	        cmocka_unit_test(test_a_copy_by_the_owner_of_the_database_needs_no_superuser),
	};

	pgserver_require_or_skip("test_store_copy_pg");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
