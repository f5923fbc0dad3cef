/* test_capture_replay.c: capture callbacks to the spool, replay them into
 * a restored database in-process and over HTTP and HTTPS, and survive broken
 * files. */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "fixtures.h"

#define N_ORDERS 4

/* What the business state is made of, without clock columns. */
static const char *const state_queries[] = {
	"SELECT id, amount, currency, status, refunded_amount, provider, payment_ref FROM orders ORDER BY id",
	"SELECT order_id, reason, ref, points FROM points_ledger ORDER BY order_id, reason, ref",
	"SELECT order_id, provider, refund_ref, amount FROM refunds ORDER BY order_id, refund_ref",
};

struct origin {
	struct daemon og_d; /* the daemon that captured */
	char og_spool[700];
	char og_snapshot[700]; /* its database before any callback: the "backup" */
	char og_orders[N_ORDERS][64];
	char *og_state; /* its business state after the callbacks */
	int64_t og_records; /* its idempotency records */
};

static int copy_file(const char *from, const char *to)
{
	char chunk[65536];
	int in = open(from, O_RDONLY);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n = 0;
	int rc = -1;

	if (in < 0 || out < 0) {
		goto out;
	}
	for (;;) {
		n = read(in, chunk, sizeof(chunk));
		if (n <= 0) {
			break;
		}
		if (write(out, chunk, (size_t)n) != n) {
			goto out;
		}
	}
	rc = n == 0 ? 0 : -1;
out:
	if (in >= 0) {
		close(in);
	}
	if (out >= 0) {
		close(out);
	}
	return rc;
}

static char *state_of(const char *db)
{
	size_t i;
	size_t len = 0;
	char *all = NULL;

	for (i = 0; i < sizeof(state_queries) / sizeof(state_queries[0]); i++) {
		char *part = hn_db_dump(db, state_queries[i]);
		size_t plen;
		char *grown;

		assert_non_null(part);
		plen = strlen(part);
		grown = realloc(all, len + plen + 3);
		assert_non_null(grown);
		all = grown;
		memcpy(all + len, part, plen);
		memcpy(all + len + plen, "\n#\n", 3);
		len += plen + 3;
		free(part);
	}
	all[len - 1] = '\0';
	return all;
}

static void post(struct daemon *d, const char *secret, const char *body, long want_status)
{
	struct hres r;

	assert_int_equal(hn_post_stripe(d, "stripe", secret, body, &r), 0);
	assert_int_equal(r.hs_status, want_status);
	hres_finish(&r);
}

/* Runs the origin daemon once for the whole group: orders, a snapshot of its
 * database, then a mix of callbacks with capture on. */
static int group_setup(void **state)
{
	struct origin *o = calloc(1, sizeof(*o));
	char ini[1024];
	char *body;
	size_t i;

	if (o == NULL || daemon_init(&o->og_d, FX_STRIPE_INI) < 0) {
		return -1;
	}
	snprintf(o->og_spool, sizeof(o->og_spool), "%s/spool", o->og_d.dm_dir);
	snprintf(ini, sizeof(ini), "\n[capture]\nmode = all\ndir = %s\nretention = 7d\n", o->og_spool);
	if (daemon_append_config(&o->og_d, ini) < 0) {
		return -1;
	}
	for (i = 0; i < N_ORDERS; i++) {
		if (hn_order_create(&o->og_d, 1000 * (int64_t)(i + 1), "usd", o->og_orders[i]) < 0) {
			return -1;
		}
	}
	snprintf(o->og_snapshot, sizeof(o->og_snapshot), "%s/snapshot.db", o->og_d.dm_dir);
	if (copy_file(o->og_d.dm_db, o->og_snapshot) < 0 || daemon_start(&o->og_d) < 0) {
		return -1;
	}
	/* Order 0: paid, the same callback delivered twice. */
	body = fx_stripe_payment("evt_cr_pay0", o->og_orders[0], 1000, "usd");
	post(&o->og_d, FX_STRIPE_SECRET, body, 200);
	post(&o->og_d, FX_STRIPE_SECRET, body, 200);
	free(body);
	/* Order 1: paid, then partly refunded. */
	body = fx_stripe_session("evt_cr_pay1", o->og_orders[1], 2000, "usd");
	post(&o->og_d, FX_STRIPE_SECRET, body, 200);
	free(body);
	body = fx_stripe_refund("evt_cr_ref1", o->og_orders[1], 2000, 500, "re_cr_1", "usd");
	post(&o->og_d, FX_STRIPE_SECRET, body, 200);
	free(body);
	/* Order 2: a forged payment, refused, never applied. */
	body = fx_stripe_payment("evt_cr_forged", o->og_orders[2], 3000, "usd");
	post(&o->og_d, "whsec_not_the_secret", body, 401);
	free(body);
	/* Order 3 stays pending; an event with no business effect. */
	body = hn_stripe_event("evt_cr_other", "customer.created", "{\"id\":\"cus_1\",\"object\":\"customer\"}");
	post(&o->og_d, FX_STRIPE_SECRET, body, 200);
	free(body);
	/* A payment for an order nobody created: acknowledged, refused by the
	 * business rules (its key ends failed). */
	body = fx_stripe_payment("evt_cr_unknown", "ord_unknownunknownunkn", 500, "usd");
	post(&o->og_d, FX_STRIPE_SECRET, body, 200);
	free(body);
	if (daemon_term(&o->og_d, 20) != 0) {
		return -1;
	}
	o->og_state = state_of(o->og_d.dm_db);
	o->og_records = hn_db_int(o->og_d.dm_db, "SELECT COUNT(*) FROM idempotency_records");
	*state = o;
	return 0;
}

static int group_teardown(void **state)
{
	struct origin *o = *state;

	if (o != NULL) {
		daemon_finish(&o->og_d);
		free(o->og_state);
		free(o);
	}
	return 0;
}

/* A second instance with the same secret whose database is the snapshot. */
static void restored(struct origin *o, struct daemon *d)
{
	assert_int_equal(daemon_init(d, FX_STRIPE_INI), 0);
	assert_int_equal(copy_file(o->og_snapshot, d->dm_db), 0);
}

/* Runs `idemhook replay --json ARGS...` with d's config; returns the exit
 * status and the parsed summary. */
static int replay(struct daemon *d, const char *const *args, cJSON **ret_summary)
{
	const char *argv[16];
	char *out = NULL;
	size_t n = 0;
	int rc;

	argv[n++] = "replay";
	argv[n++] = "--json";
	while (*args != NULL && n < 15) {
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	rc = daemon_cli(d, 1, argv, &out);
	assert_non_null(out);
	*ret_summary = cJSON_Parse(out);
	if (*ret_summary == NULL) {
		fail_msg("replay printed no JSON summary: \"%s\"", out);
	}
	free(out);
	return rc;
}

static int64_t field(const cJSON *summary, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(summary, name);

	assert_true(cJSON_IsNumber(v));
	return (int64_t)v->valuedouble;
}

static int64_t reason(const cJSON *summary, const char *group, const char *slug)
{
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(summary, group);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, slug);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

static void test_capture_writes_one_0600_file_per_callback_that_reached_a_provider(void **state)
{
	struct origin *o = *state;
	char cmd[1024];
	char line[64] = "";
	FILE *p;

	/* Seven callbacks arrived; each is one file in a day directory. */
	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 2 -maxdepth 2 -name '*.cap' -perm 0600 | wc -l",
		 o->og_spool);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	assert_int_equal(strtol(line, NULL, 10), 7);
}

static void test_replay_into_a_restored_database_rebuilds_the_same_state_and_again_changes_nothing(void **state)
{
	struct origin *o = *state;
	const char *args[] = {o->og_spool, NULL};
	struct daemon b;
	cJSON *s = NULL;
	char *after;
	char *before_again;

	restored(o, &b);
	/* The forged callback is rejected again: the exit status says so. */
	assert_int_equal(replay(&b, args, &s), 65);
	assert_int_equal(field(s, "total"), 7);
	assert_int_equal(field(s, "new"), 4);
	assert_int_equal(field(s, "duplicate"), 1);
	assert_int_equal(field(s, "refused"), 1);
	assert_int_equal(field(s, "rejected"), 1);
	assert_int_equal(reason(s, "rejected_reasons", "bad_signature"), 1);
	assert_int_equal(field(s, "failed"), 0);
	cJSON_Delete(s);
	after = state_of(b.dm_db);
	assert_string_equal(after, o->og_state);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM idempotency_records"), o->og_records);

	/* Replaying the same spool again: all duplicates, nothing changed. */
	assert_int_equal(replay(&b, args, &s), 65);
	assert_int_equal(field(s, "new"), 0);
	assert_int_equal(field(s, "duplicate"), 6);
	assert_int_equal(field(s, "rejected"), 1);
	cJSON_Delete(s);
	before_again = state_of(b.dm_db);
	assert_string_equal(before_again, after);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM idempotency_records"), o->og_records);
	free(after);
	free(before_again);
	daemon_finish(&b);
}

static void test_replay_to_a_running_daemon_over_http_rebuilds_the_same_state(void **state)
{
	struct origin *o = *state;
	const char *args[] = {"--to", NULL, o->og_spool, NULL};
	struct daemon c;
	cJSON *s = NULL;
	char *after;

	restored(o, &c);
	assert_int_equal(daemon_start(&c), 0);
	args[1] = c.dm_base;
	/* The captures are signed again, now, with the configured secret; the
	 * forged one is checked first and not laundered into a valid one. */
	assert_int_equal(replay(&c, args, &s), 65);
	assert_int_equal(field(s, "new"), 4);
	assert_int_equal(field(s, "duplicate"), 1);
	/* counted as in-process replay counts it, though acknowledged 200 */
	assert_int_equal(field(s, "refused"), 1);
	assert_int_equal(field(s, "rejected"), 1);
	assert_int_equal(reason(s, "rejected_reasons", "bad_signature"), 1);
	cJSON_Delete(s);
	assert_int_equal(replay(&c, args, &s), 65);
	assert_int_equal(field(s, "new"), 0);
	assert_int_equal(field(s, "duplicate"), 6);
	cJSON_Delete(s);
	assert_int_equal(daemon_term(&c, 20), 0);
	after = state_of(c.dm_db);
	assert_string_equal(after, o->og_state);
	free(after);
	daemon_finish(&c);
}

static void test_replay_reports_empty_truncated_and_corrupted_files_and_goes_on(void **state)
{
	struct origin *o = *state;
	const char *args[] = {NULL, NULL};
	char tree[800];
	char cmd[4096];
	struct daemon b;
	cJSON *s = NULL;
	char *after;
	char *log;
	size_t len;
	FILE *f;

	restored(o, &b);
	snprintf(tree, sizeof(tree), "%s/tree", b.dm_dir);
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", o->og_spool, tree);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(daemon_write_file(&b, "tree/empty.cap", ""), 0);
	assert_int_equal(daemon_write_file(&b, "tree/garbage.cap", "hello, world\n"), 0);
	/* A capture cut in the middle of its body. */
	snprintf(cmd, sizeof(cmd),
		 "f=$(find '%s' -name '*.cap' | head -n 1); head -c $(($(wc -c < \"$f\") - 20)) \"$f\" > "
		 "'%s/truncated.cap'",
		 o->og_spool, tree);
	assert_int_equal(system(cmd), 0);
	/* A capture whose body was changed after the fact. */
	snprintf(cmd, sizeof(cmd),
		 "f=$(grep -rl usd '%s' | head -n 1); mkdir -p '%s/nested/x' && "
		 "sed 's/usd/eur/' \"$f\" > '%s/nested/x/edited.cap'",
		 o->og_spool, tree, tree);
	assert_int_equal(system(cmd), 0);

	args[0] = tree;
	assert_int_equal(replay(&b, args, &s), 65);
	assert_int_equal(field(s, "new"), 4);
	assert_int_equal(field(s, "refused"), 1);
	assert_int_equal(field(s, "failed"), 4);
	assert_int_equal(reason(s, "failed_reasons", "empty"), 1);
	assert_int_equal(reason(s, "failed_reasons", "truncated"), 1);
	assert_int_equal(reason(s, "failed_reasons", "corrupted"), 2);
	cJSON_Delete(s);
	after = state_of(b.dm_db);
	assert_string_equal(after, o->og_state);
	free(after);

	/* Each broken file is named on stderr with what is wrong with it. */
	f = fopen(b.dm_log, "r");
	assert_non_null(f);
	log = calloc(1, 1 << 20);
	assert_non_null(log);
	len = fread(log, 1, (1 << 20) - 1, f);
	fclose(f);
	log[len] = '\0';
	assert_non_null(strstr(log, "empty.cap\": empty file"));
	assert_non_null(strstr(log, "truncated.cap\": truncated: the body has"));
	assert_non_null(strstr(log, "garbage.cap\": neither an idemhook capture"));
	assert_non_null(strstr(log, "edited.cap\": corrupted: the body does not match body-sha256"));
	free(log);
	daemon_finish(&b);
}

static void test_dry_run_classifies_exactly_as_the_replay_and_changes_nothing(void **state)
{
	struct origin *o = *state;
	const char *args[] = {"--dry-run", o->og_spool, NULL};
	char tmp[700];
	char cmd[800];
	char line[64] = "";
	struct daemon b;
	cJSON *s = NULL;
	char *before;
	char *after;
	FILE *p;

	restored(o, &b);
	before = state_of(b.dm_db);
	/* the snapshot it works on goes to $TMPDIR, and is gone after */
	snprintf(tmp, sizeof(tmp), "%s/tmp", b.dm_dir);
	assert_int_equal(mkdir(tmp, 0700), 0);
	assert_int_equal(setenv("TMPDIR", tmp, 1), 0);
	assert_int_equal(replay(&b, args, &s), 65);
	unsetenv("TMPDIR");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "dry_run")));
	/* The same counts as the real replay: the second delivery of order 0's
	 * payment is a duplicate, the unknown order's payment is refused. */
	assert_int_equal(field(s, "total"), 7);
	assert_int_equal(field(s, "new"), 4);
	assert_int_equal(field(s, "duplicate"), 1);
	assert_int_equal(field(s, "refused"), 1);
	assert_int_equal(field(s, "rejected"), 1);
	assert_int_equal(field(s, "failed"), 0);
	cJSON_Delete(s);
	after = state_of(b.dm_db);
	assert_string_equal(after, before);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM events"), 0);
	snprintf(cmd, sizeof(cmd), "find '%s' -type f | wc -l", tmp);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	assert_int_equal(strtol(line, NULL, 10), 0);
	free(before);
	free(after);
	daemon_finish(&b);
}

/* The per-file lines of the log from offset on ("PATH.cap: what"), their
 * paths into names (each malloc'd). Returns how many. */
static size_t cap_lines(const char *log_path, size_t offset, char **names, size_t max)
{
	char *log = hn_read_file(log_path);
	char *line;
	char *save = NULL;
	size_t n = 0;

	assert_non_null(log);
	assert_true(strlen(log) >= offset);
	for (line = strtok_r(log + offset, "\n", &save); line != NULL && n < max;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *end = strstr(line, ".cap: ");

		if (end != NULL && line[0] == '/') {
			names[n] = strndup(line, (size_t)(end - line) + 4);
			assert_non_null(names[n]);
			n++;
		}
	}
	free(log);
	return n;
}

/* Receive order, as replay sorts: by day directory and file name (which
 * start with the time of receipt), then by the whole path. */
static int receive_cmp(const char *a, const char *b)
{
	const char *ta = a + strlen(a);
	const char *tb = b + strlen(b);
	int slashes;
	int c;

	for (slashes = 0; ta > a && slashes < 2; ta--) {
		slashes += ta[-1] == '/';
	}
	for (slashes = 0; tb > b && slashes < 2; tb--) {
		slashes += tb[-1] == '/';
	}
	c = strcmp(ta, tb);
	return c != 0 ? c : strcmp(a, b);
}

#define T_COPIES 9 /* of the seven captures: 63 requests in flight at once */

/* In-process, requests complete in batches, and a rejection (the forged
 * payment) is known before the commits of those before it; the lines
 * still come in receive order, as over HTTP and as the writer applies
 * them. Each tree also holds a second copy of one capture under another
 * name (...-copy.cap): two captures of the same millisecond, which keep their
 * order in every tree. */
static void test_replay_prints_its_lines_in_receive_order_in_process_and_dry_run(void **state)
{
	struct origin *o = *state;
	char tree[800];
	char cmd[4096];
	const char *real[] = {"replay", tree, NULL};
	const char *dry[] = {"replay", "--dry-run", tree, NULL};
	const char *const *runs[] = {dry, real};
	char *names[8 * T_COPIES];
	struct daemon b;
	size_t offset;
	size_t n;
	size_t i;
	size_t r;

	restored(o, &b);
	snprintf(tree, sizeof(tree), "%s/tree", b.dm_dir);
	snprintf(cmd, sizeof(cmd),
	         "mkdir '%s' && for i in $(seq 1 %d); do cp -r '%s' '%s/c'$i; done"
	         " && for d in '%s'/c*/*/; do f=$(ls \"$d\" | grep '[.]cap$' | head -n 1);"
	         " cp \"$d$f\" \"$d${f%%.cap}-copy.cap\"; done",
	         tree, T_COPIES, o->og_spool, tree, tree);
	assert_int_equal(system(cmd), 0);
	for (r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		char *log = hn_read_file(b.dm_log);

		offset = log != NULL ? strlen(log) : 0;
		free(log);
		assert_int_equal(daemon_cli(&b, 1, runs[r], NULL), 65);
		n = cap_lines(b.dm_log, offset, names, 8 * T_COPIES);
		assert_int_equal(n, 8 * T_COPIES);
		for (i = 1; i < n; i++) {
			if (receive_cmp(names[i - 1], names[i]) >= 0) {
				fail_msg("%s: line %zu is %s, after %s", runs[r][1], i, names[i],
				         names[i - 1]);
			}
		}
		for (i = 0; i < n; i++) {
			free(names[i]);
		}
	}
	daemon_finish(&b);
}

static void test_filters_leave_out_what_they_do_not_match(void **state)
{
	struct origin *o = *state;
	const char *future[] = {"--since", "2999-01-01", o->og_spool, NULL};
	const char *past[] = {"--until", "2000-01-01T00:00:00Z", o->og_spool, NULL};
	const char *named[] = {"--provider", "stripe", "--since", "2000-01-01", o->og_spool, NULL};
	const char *swapped[] = {"replay",     "--since",   "2026-12-02", "--until",
	                         "2000-01-01", o->og_spool, NULL};
	const char *empty[] = {"replay",     "--since",   "2026-12-02", "--until",
	                       "2026-12-02", o->og_spool, NULL};
	char *out = NULL;
	struct daemon b;
	cJSON *s = NULL;

	restored(o, &b);
	assert_int_equal(replay(&b, future, &s), 0);
	assert_int_equal(field(s, "total"), 0);
	assert_int_equal(field(s, "skipped"), 7);
	cJSON_Delete(s);
	assert_int_equal(replay(&b, past, &s), 0);
	assert_int_equal(field(s, "skipped"), 7);
	cJSON_Delete(s);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	/* A window with its ends swapped (or equal) holds nothing: a usage
	 * error, not a run that skips every request and exits 0. */
	assert_int_equal(daemon_cli(&b, 1, swapped, &out), 64);
	assert_true(out == NULL || strstr(out, "skipped") == NULL);
	free(out);
	assert_int_equal(daemon_cli(&b, 1, empty, &out), 64);
	free(out);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(replay(&b, named, &s), 65);
	assert_int_equal(field(s, "total"), 7);
	cJSON_Delete(s);
	daemon_finish(&b);
}

static void test_exported_stripe_events_need_trust_unsigned(void **state)
{
	struct origin *o = *state;
	const char *refused[] = {NULL, NULL};
	const char *trusted[] = {"--trust-unsigned", NULL, NULL};
	char path[900];
	char sql[256];
	char *ev1;
	char *ev2;
	char *text;
	size_t len;
	struct daemon b;
	cJSON *s = NULL;

	restored(o, &b);
	ev1 = fx_stripe_payment("evt_export_3", o->og_orders[3], 4000, "usd");
	ev2 = hn_stripe_event("evt_export_other", "customer.updated", "{\"id\":\"cus_1\",\"object\":\"customer\"}");
	len = strlen(ev1) + strlen(ev2) + 8;
	text = malloc(len);
	assert_non_null(text);
	/* JSON lines, as `stripe events list` output is often saved. */
	snprintf(text, len, "%s\n%s\n", ev1, ev2);
	assert_int_equal(daemon_write_file(&b, "export.jsonl", text), 0);
	snprintf(path, sizeof(path), "%s/export.jsonl", b.dm_dir);
	refused[0] = path;
	trusted[1] = path;
	snprintf(sql, sizeof(sql), "SELECT status = 'paid' FROM orders WHERE id = '%s'", o->og_orders[3]);

	assert_int_equal(replay(&b, refused, &s), 65);
	assert_int_equal(field(s, "failed"), 1);
	assert_int_equal(reason(s, "failed_reasons", "unsigned_export"), 1);
	cJSON_Delete(s);
	assert_int_equal(hn_db_int(b.dm_db, sql), 0);

	assert_int_equal(replay(&b, trusted, &s), 0);
	assert_int_equal(field(s, "new"), 2);
	cJSON_Delete(s);
	assert_int_equal(hn_db_int(b.dm_db, sql), 1);

	/* A JSON array of the same events: duplicates now. */
	snprintf(text, len, "[%s,%s]", ev1, ev2);
	assert_int_equal(daemon_write_file(&b, "export.json", text), 0);
	snprintf(path, sizeof(path), "%s/export.json", b.dm_dir);
	assert_int_equal(replay(&b, trusted, &s), 0);
	assert_int_equal(field(s, "duplicate"), 2);
	cJSON_Delete(s);
	free(text);
	free(ev1);
	free(ev2);
	daemon_finish(&b);
}

static void test_a_capture_that_cannot_be_written_never_loses_the_callback(void **state)
{
	struct daemon d;
	struct hres r;
	char ini[1024];
	char spool[700];
	char moved[720];
	char url[128];
	char *body;

	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", d.dm_dir);
	snprintf(ini, sizeof(ini), "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	/* A plain file where the spool directory was: every write fails. */
	snprintf(moved, sizeof(moved), "%s.gone", spool);
	assert_int_equal(rename(spool, moved), 0);
	assert_int_equal(daemon_write_file(&d, "spool", "not a directory\n"), 0);

	body = hn_stripe_event("evt_cr_nospool", "customer.created", "{\"id\":\"cus_2\",\"object\":\"customer\"}");
	post(&d, FX_STRIPE_SECRET, body, 200);
	free(body);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 1);

	snprintf(url, sizeof(url), "%s/metrics", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "idemhook_capture_failures_total 1"));
	hres_finish(&r);
	daemon_finish(&d);
}

/* The number of 0600 capture files two levels under spool. */
static long count_captures(const char *spool)
{
	char cmd[1024];
	char line[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd),
	         "find '%s' -mindepth 2 -maxdepth 2 -name '*.cap' -perm 0600 | wc -l", spool);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	return strtol(line, NULL, 10);
}

static void
test_a_spool_directory_removed_while_serving_is_made_again_for_the_next_capture(void **state)
{
	struct daemon d;
	struct hres r;
	struct stat sb;
	char ini[1024];
	char spool[700];
	char cmd[800];
	char url[128];
	char *body;

	(void)state;
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", d.dm_dir);
	snprintf(ini, sizeof(ini), "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(daemon_start(&d), 0);
	body = hn_stripe_event("evt_cr_before_rm", "customer.created",
	                       "{\"id\":\"cus_3\",\"object\":\"customer\"}");
	post(&d, FX_STRIPE_SECRET, body, 200);
	free(body);
	assert_int_equal(count_captures(spool), 1);

	/* An operator (or a cleanup script) removes the whole spool. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", spool);
	assert_int_equal(system(cmd), 0);
	body = hn_stripe_event("evt_cr_after_rm", "customer.created",
	                       "{\"id\":\"cus_4\",\"object\":\"customer\"}");
	post(&d, FX_STRIPE_SECRET, body, 200);
	free(body);

	/* The next callback is captured into a spool made again, 0700. */
	assert_int_equal(stat(spool, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(count_captures(spool), 1);
	snprintf(url, sizeof(url), "%s/metrics", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_non_null(strstr(r.hs_body, "idemhook_capture_failures_total 0"));
	hres_finish(&r);
	daemon_finish(&d);
}

static void test_replay_to_a_running_daemon_over_https_verifies_it_and_rebuilds_the_same_state(void **state)
{
	struct origin *o = *state;
	const char *args[] = {"--to", NULL, o->og_spool, NULL};
	char ini[800];
	struct daemon c;
	cJSON *s = NULL;
	char *after;

	restored(o, &c);
	assert_int_equal(daemon_use_tls(&c), 0);
	assert_int_equal(daemon_start(&c), 0);
	assert_int_equal(strncmp(c.dm_base, "https://", 8), 0);
	args[1] = c.dm_base;
	/* The system CAs do not know its certificate: nothing is delivered,
	 * and after three requests in a row got no answer the run stops. */
	assert_int_equal(replay(&c, args, &s), 69);
	assert_int_equal(field(s, "new"), 0);
	assert_int_equal(field(s, "failed"), 3);
	assert_int_equal(field(s, "failed") + field(s, "rejected") + field(s, "not_sent"), 7);
	cJSON_Delete(s);
	assert_int_equal(hn_db_int(c.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);

	/* Trusted through [client] ca_file, the same replay goes through. */
	snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s\n", c.dm_ca);
	assert_int_equal(daemon_append_config(&c, ini), 0);
	assert_int_equal(replay(&c, args, &s), 65);
	assert_int_equal(field(s, "new"), 4);
	assert_int_equal(field(s, "duplicate"), 1);
	assert_int_equal(field(s, "refused"), 1);
	assert_int_equal(field(s, "rejected"), 1);
	cJSON_Delete(s);
	assert_int_equal(daemon_term(&c, 20), 0);
	after = state_of(c.dm_db);
	assert_string_equal(after, o->og_state);
	free(after);
	daemon_finish(&c);
}

static void test_replay_refuses_a_to_url_that_is_not_http_or_https(void **state)
{
	struct origin *o = *state;
	const char *args[] = {"replay", "--to", "ftp://127.0.0.1:8443", o->og_spool, NULL};
	struct daemon b;

	restored(o, &b);
	assert_int_equal(daemon_cli(&b, 1, args, NULL), 64);
	assert_int_equal(hn_db_int(b.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	daemon_finish(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_capture_writes_one_0600_file_per_callback_that_reached_a_provider),
	        cmocka_unit_test(
	                test_replay_into_a_restored_database_rebuilds_the_same_state_and_again_changes_nothing),
	        cmocka_unit_test(test_replay_to_a_running_daemon_over_http_rebuilds_the_same_state),
	        cmocka_unit_test(
	                test_replay_reports_empty_truncated_and_corrupted_files_and_goes_on),
	        cmocka_unit_test(test_dry_run_classifies_exactly_as_the_replay_and_changes_nothing),
	        cmocka_unit_test(
	                test_replay_prints_its_lines_in_receive_order_in_process_and_dry_run),
	        cmocka_unit_test(test_filters_leave_out_what_they_do_not_match),
	        cmocka_unit_test(test_exported_stripe_events_need_trust_unsigned),
	        cmocka_unit_test(test_a_capture_that_cannot_be_written_never_loses_the_callback),
	        cmocka_unit_test(
	                test_a_spool_directory_removed_while_serving_is_made_again_for_the_next_capture),
	        cmocka_unit_test(
	                test_replay_to_a_running_daemon_over_https_verifies_it_and_rebuilds_the_same_state),
	        cmocka_unit_test(test_replay_refuses_a_to_url_that_is_not_http_or_https),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
