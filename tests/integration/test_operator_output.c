/* test_operator_output.c: what an operator reads, through the real binary:
 * one exit-code table, --json/--limit/--order on the listings, `help`,
 * cells never cut silently, journald prefixes only off a terminal, progress
 * lines on a terminal, refused callbacks logged with what to act on, and
 * the demo's front door. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"
#include "json.h"
#include "peer.h"

/* What one CLI run gave back. On a terminal, out holds both streams as the
 * terminal showed them and err is NULL. */
struct run {
	int rn_status;
	char *rn_out;
	char *rn_err;
};

static void run_finish(struct run *r)
{
	free(r->rn_out);
	free(r->rn_err);
	memset(r, 0, sizeof(*r));
}

/* Runs $IDEMHOOK_BIN [-c config] args. tty: on a pseudo-terminal (stdin,
 * stdout, stderr), else stdout into a pipe and stderr into a file.
 * journal: with JOURNAL_STREAM set as systemd sets it (else unset). */
static void run_cli(const struct daemon *d, int with_config, const char *const *args, int tty,
                    int journal, struct run *ret)
{
	const char *bin = getenv("IDEMHOOK_BIN");
	const char *argv[64];
	char errpath[700];
	int pipefd[2] = {-1, -1};
	int master = -1;
	int n = 0;
	int status = 0;
	pid_t pid;

	memset(ret, 0, sizeof(*ret));
	assert_non_null(bin);
	argv[n++] = "idemhook";
	if (with_config) {
		argv[n++] = "-c";
		argv[n++] = d->dm_config;
	}
	while (args != NULL && *args != NULL && n < 62) {
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	snprintf(errpath, sizeof(errpath), "%s/cli.stderr", d->dm_dir);
	if (tty) {
		struct winsize ws = {.ws_row = 40, .ws_col = 200};

		pid = forkpty(&master, NULL, NULL, &ws);
	} else {
		assert_int_equal(pipe(pipefd), 0);
		pid = fork();
	}
	assert_true(pid >= 0);
	if (pid == 0) {
		if (journal) {
			setenv("JOURNAL_STREAM", "8:12345", 1);
		} else {
			unsetenv("JOURNAL_STREAM");
		}
		if (!tty) {
			int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			dup2(pipefd[1], 1);
			if (fd >= 0) {
				dup2(fd, 2);
			}
			close(pipefd[0]);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (tty) {
		char buf[4096];
		size_t len = 0;
		size_t cap = 0;
		char *out = NULL;

		/* Read until the child closed the terminal (EIO on Linux). */
		for (;;) {
			ssize_t k = read(master, buf, sizeof(buf));

			if (k < 0 && errno == EINTR) {
				continue;
			}
			if (k <= 0) {
				break;
			}
			if (len + (size_t)k + 1 > cap) {
				cap = (len + (size_t)k + 1) * 2;
				out = realloc(out, cap);
				assert_non_null(out);
			}
			memcpy(out + len, buf, (size_t)k);
			len += (size_t)k;
		}
		if (out == NULL) {
			out = calloc(1, 1);
		}
		out[len] = '\0';
		close(master);
		ret->rn_out = out;
	} else {
		close(pipefd[1]);
		ret->rn_out = hn_read_fd(pipefd[0]);
		close(pipefd[0]);
	}
	waitpid(pid, &status, 0);
	if (!tty) {
		ret->rn_err = hn_read_file(errpath);
	}
	ret->rn_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A file of the source tree, whole (IDEMHOOK_SOURCE_ROOT). */
static char *source_file(const char *rel)
{
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	char path[1024];
	char *s;

	assert_non_null(root);
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	s = hn_read_file(path);
	assert_non_null(s);
	return s;
}

static cJSON *parse_json(const char *s)
{
	cJSON *j;

	assert_non_null(s);
	j = cJSON_Parse(s);
	if (j == NULL) {
		fprintf(stderr, "not JSON: %s\n", s);
	}
	assert_non_null(j);
	return j;
}

/* ---- help and the exit-code table ---- */

/* The overview's command column is one width, every exit status it lists is
 * in docs/cli.md and the man page, and `help COMMAND` is COMMAND --help. */
static void test_help_is_aligned_and_lists_one_exit_table_the_docs_repeat(void **state)
{
	static const char *const help[] = {"help", NULL};
	static const char *const help_events[] = {"help", "events", NULL};
	static const char *const events_help[] = {"events", "--help", NULL};
	static const char *const help_nosuch[] = {"help", "nosuch", NULL};
	struct daemon *d = *state;
	char *cli_md = source_file("docs/cli.md");
	char *man = source_file("docs/idemhook.8.scd");
	struct run r;
	struct run r2;
	const char *p;
	int col = -1;
	int codes = 0;

	run_cli(d, 0, help, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	p = strstr(r.rn_out, "Commands:\n");
	assert_non_null(p);
	p += strlen("Commands:\n");
	/* every line: two spaces, a name, spaces, a summary starting at one column */
	while (strncmp(p, "  ", 2) == 0) {
		const char *name_end = p + 2 + strcspn(p + 2, " ");
		const char *sum = name_end + strspn(name_end, " ");

		assert_true(sum - name_end >= 2);
		if (col < 0) {
			col = (int)(sum - p);
		}
		assert_int_equal((int)(sum - p), col);
		p = strchr(p, '\n') + 1;
	}
	assert_non_null(strstr(r.rn_out, "  help "));
	p = strstr(r.rn_out, "Exit status (every command):\n");
	assert_non_null(p);
	p += strlen("Exit status (every command):\n");
	while (strncmp(p, "  ", 2) == 0) {
		char code[8];
		char needle[16];

		snprintf(code, sizeof(code), "%ld", strtol(p, NULL, 10));
		snprintf(needle, sizeof(needle), "| %s |", code);
		if (strstr(cli_md, needle) == NULL) {
			fail_msg("docs/cli.md has no row for exit status %s", code);
		}
		snprintf(needle, sizeof(needle), "*%s*", code);
		if (strstr(man, needle) == NULL) {
			fail_msg("the man page's EXIT STATUS has no %s", code);
		}
		codes++;
		p = strchr(p, '\n') + 1;
	}
	assert_true(codes >= 10);
	assert_non_null(strstr(r.rn_out, " 66  not found"));
	run_finish(&r);

	run_cli(d, 0, help_events, 0, 0, &r);
	run_cli(d, 0, events_help, 0, 0, &r2);
	assert_int_equal(r.rn_status, 0);
	assert_string_equal(r.rn_out, r2.rn_out);
	assert_non_null(strstr(r.rn_out, "events list"));
	run_finish(&r);
	run_finish(&r2);

	run_cli(d, 0, help_nosuch, 0, 0, &r);
	assert_int_equal(r.rn_status, 64);
	assert_non_null(strstr(r.rn_err, "unknown command 'nosuch'"));
	run_finish(&r);
	free(cli_md);
	free(man);
}

/* "No such ID" is 66 whatever the command. */
static void test_an_unknown_id_exits_66_in_every_command(void **state)
{
	static const char *const cases[][5] = {
	        {"events", "show", "999999", NULL},
	        {"events", "reprocess", "999999", NULL},
	        {"events", "dismiss", "999999", "--reason", "never applies"},
	        {"outbox", "show", "999999", NULL},
	        {"outbox", "retry", "999999", NULL},
	        {"outbox", "cancel", "999999", NULL},
	        {"order", "show", "ord_aaaaaaaaaaaaaaaaaaaa", NULL},
	        {"reconcile", "--order", "ord_aaaaaaaaaaaaaaaaaaaa", NULL},
	        {"simulate", "stripe", "payment", "--order", "ord_aaaaaaaaaaaaaaaaaaaa"},
	};
	struct daemon *d = *state;
	struct run r;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *args[7] = {NULL};

		memcpy(args, cases[i], sizeof(cases[i]));
		run_cli(d, 1, args, 0, 0, &r);
		if (r.rn_status != 66) {
			fail_msg("%s %s: exit %d, not 66 (%s)", args[0], args[1], r.rn_status,
			         r.rn_err != NULL ? r.rn_err : "");
		}
		run_finish(&r);
	}
}

/* ---- the listings ---- */

static void test_listings_take_json_limit_and_an_order_filter(void **state)
{
	struct daemon *d = *state;
	char a[64];
	char b[64];
	char c[64];
	struct run r;
	cJSON *j;
	cJSON *arr;
	cJSON *it;

	fx_order(d, 1000, "usd", a);
	fx_order(d, 2000, "usd", b);
	fx_order(d, 3000, "eur", c);
	assert_int_equal(fx_stripe_pay(d, "evt_list_a", a, 1000, "usd"), 200);
	assert_int_equal(fx_stripe_pay(d, "evt_list_b", b, 2000, "usd"), 200);

	{
		const char *args[] = {"events", "list", "--order", a, "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		arr = cJSON_GetObjectItem(j, "events");
		assert_int_equal(cJSON_GetArraySize(arr), 1);
		it = cJSON_GetArrayItem(arr, 0);
		assert_string_equal(cJSON_GetObjectItem(it, "key")->valuestring, "evt_list_a");
		assert_string_equal(cJSON_GetObjectItem(it, "order")->valuestring, a);
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"events", "list", "--limit", "1", "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "events")), 1);
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"events", "show", "1", "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		assert_int_equal(cJSON_GetObjectItem(j, "id")->valueint, 1);
		assert_non_null(cJSON_GetObjectItem(j, "payload"));
		cJSON_Delete(j);
		run_finish(&r);
	}
	/* a payload that is not JSON (a form body) stays a JSON string */
	{
		const char *args[] = {"events", "show", "1", "--json", NULL};
		struct hn_sqlite q;

		assert_int_equal(hn_sqlite_start(&q, d->dm_db,
		                                 "UPDATE idempotency_records SET payload = "
		                                 "'a=1&b=\"2\"' WHERE id = 1;"),
		                 0);
		assert_int_equal(hn_sqlite_finish(&q, ""), 0);
		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		assert_string_equal(cJSON_GetObjectItem(j, "payload")->valuestring, "a=1&b=\"2\"");
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"order", "list", "--status", "paid", "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		arr = cJSON_GetObjectItem(j, "orders");
		assert_int_equal(cJSON_GetArraySize(arr), 2);
		cJSON_ArrayForEach(it, arr)
		{
			assert_string_equal(cJSON_GetObjectItem(it, "status")->valuestring, "paid");
			assert_true(strcmp(cJSON_GetObjectItem(it, "id")->valuestring, c) != 0);
		}
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"order",   "list", "--provider", "stripe",
		                      "--limit", "1",    NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		/* a header and one row, the newest paid one: b */
		assert_non_null(strstr(r.rn_out, b));
		assert_null(strstr(r.rn_out, a));
		run_finish(&r);
	}
	{
		/* an order the provider knows only by a reference it gave it
		 * (order_refs; orders.provider unset) is the provider's too */
		const char *args[] = {"order", "list", "--provider", "stripe", NULL};
		struct hn_sqlite q;
		char sql[256];

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, a));
		assert_null(strstr(r.rn_out, c));
		run_finish(&r);
		snprintf(sql, sizeof(sql),
		         "INSERT INTO order_refs (provider, ref, order_id, kind, created_at)"
		         " VALUES ('stripe', 'ch_list_c', '%s', 'charge', 1);",
		         c);
		assert_int_equal(hn_sqlite_start(&q, d->dm_db, sql), 0);
		assert_int_equal(hn_sqlite_finish(&q, ""), 0);
		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, a));
		assert_non_null(strstr(r.rn_out, b));
		assert_non_null(strstr(r.rn_out, c));
		run_finish(&r);
	}
	{
		const char *since[] = {"order", "list", "--since", "1h", NULL};
		const char *until[] = {"order", "list", "--until", "1h", NULL};

		run_cli(d, 1, since, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, a));
		assert_non_null(strstr(r.rn_out, c));
		run_finish(&r);
		run_cli(d, 1, until, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_string_equal(r.rn_out, "no orders\n");
		run_finish(&r);
	}
	{
		const char *args[] = {"order", "show", c, "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		assert_string_equal(cJSON_GetObjectItem(j, "currency")->valuestring, "EUR");
		assert_int_equal(cJSON_GetObjectItem(j, "amount")->valueint, 3000);
		cJSON_Delete(j);
		run_finish(&r);
	}
}

static void test_events_list_says_a_provider_is_unknown(void **state)
{
	static const char *const args[] = {"events", "list", "--provider", "nosuch", NULL};
	static const char *const known[] = {"events", "list", "--provider", "stripe", NULL};
	struct daemon *d = *state;
	struct run r;

	run_cli(d, 1, args, 0, 0, &r);
	assert_int_equal(r.rn_status, 64);
	assert_non_null(strstr(r.rn_err, "unknown provider 'nosuch'"));
	assert_non_null(strstr(r.rn_err, "configured: stripe"));
	run_finish(&r);
	run_cli(d, 1, known, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	run_finish(&r);
}

/* events dismiss says which of its two mistakes was made: nothing to
 * dismiss, or IDs and a filter together. */
static void test_events_dismiss_says_what_is_missing_or_too_much(void **state)
{
	static const char *const neither[] = {"events", "dismiss", "--reason", "x", NULL};
	static const char *const both[] = {"events", "dismiss",    "1",      "--reason",
	                                   "x",      "--provider", "stripe", NULL};
	struct daemon *d = *state;
	struct run r;

	run_cli(d, 1, neither, 0, 0, &r);
	assert_int_equal(r.rn_status, 64);
	assert_non_null(strstr(r.rn_err, "give their IDs or a filter"));
	assert_null(strstr(r.rn_err, "not both"));
	run_finish(&r);
	run_cli(d, 1, both, 0, 0, &r);
	assert_int_equal(r.rn_status, 64);
	assert_non_null(strstr(r.rn_err, "not both"));
	run_finish(&r);
}

/* A misspelt --provider on dismiss is refused as on events list, not
 * counted as "0 match" (nor, confirmed, dismissed as 0). */
static void test_events_dismiss_says_a_provider_is_unknown(void **state)
{
	static const char *const count[] = {"events",     "dismiss", "--reason", "x",
	                                    "--provider", "nosuch",  NULL};
	static const char *const confirm[] = {"events", "dismiss",   "--reason", "x", "--provider",
	                                      "nosuch", "--confirm", "0",        NULL};
	static const char *const known[] = {"events",     "dismiss", "--reason", "x",
	                                    "--provider", "stripe",  NULL};
	struct daemon *d = *state;
	struct run r;

	run_cli(d, 1, count, 0, 0, &r);
	assert_int_equal(r.rn_status, 64);
	assert_non_null(strstr(r.rn_err, "unknown provider 'nosuch'"));
	assert_null(strstr(r.rn_out, "match"));
	run_finish(&r);
	run_cli(d, 1, confirm, 0, 0, &r);
	assert_int_equal(r.rn_status, 64);
	run_finish(&r);
	run_cli(d, 1, known, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	assert_non_null(strstr(r.rn_out, "open failed event(s) match"));
	run_finish(&r);
}

/* reprocess tells a script what happened: 0 applied, 1 ran and still
 * failed (the run stored, audited, counted), 65 refused with nothing done;
 * with several IDs a refusal outranks 1, which outranks 0. */
static void test_reprocess_exit_status_tells_applied_still_failed_and_refused_apart(void **state)
{
	static const char applied_order[] = "ord_rpexitapplied0000001"; /* ORDERS_ID_LEN */
	char a[32];
	char b[32];
	const char *one[] = {"events", "reprocess", b, NULL};
	const char *both[] = {"events", "reprocess", a, b, NULL};
	const char *refused_first[] = {"events", "reprocess", a, b, NULL};
	const char *missing[] = {"events", "reprocess", b, "999999", NULL};
	struct daemon *d = *state;
	struct hn_sqlite q;
	char sql[256];
	struct run r;

	assert_int_equal(fx_stripe_pay(d, "evt_rpexit_a", applied_order, 1999, "usd"), 200);
	assert_int_equal(fx_stripe_pay(d, "evt_rpexit_b", "ord_rpexitstillfailed001", 1999, "usd"),
	                 200);
	snprintf(a, sizeof(a), "%lld",
	         (long long)fx_db_int(d, "SELECT id FROM events WHERE idem_key = 'evt_rpexit_a'"));
	snprintf(b, sizeof(b), "%lld",
	         (long long)fx_db_int(d, "SELECT id FROM events WHERE idem_key = 'evt_rpexit_b'"));
	/* the cause is not fixed: it ran, and says so apart from a refusal */
	run_cli(d, 1, one, 0, 0, &r);
	assert_int_equal(r.rn_status, 1);
	assert_non_null(strstr(r.rn_out, "still failed (unknown_order)"));
	run_finish(&r);
	assert_int_equal(fx_db_int(d, "SELECT reprocessed FROM events WHERE id = %s", b), 1);
	fx_assert_audit(d, 1, "target = 'event:%s' AND result LIKE 'ok: still failed%%'", b);
	/* the shop creates the missing order: one applied, one still failed */
	snprintf(sql, sizeof(sql),
	         "INSERT INTO orders (id, amount, currency, created_at, updated_at)"
	         " VALUES ('%s', 1999, 'USD', %lld, %lld);",
	         applied_order, (long long)hn_now_ms(), (long long)hn_now_ms());
	assert_int_equal(hn_sqlite_start(&q, d->dm_db, sql), 0);
	assert_int_equal(hn_sqlite_finish(&q, ""), 0);
	run_cli(d, 1, both, 0, 0, &r);
	assert_int_equal(r.rn_status, 1);
	assert_non_null(strstr(r.rn_out, "done, order ord_rpexitapplied0000001"));
	assert_non_null(strstr(r.rn_out, "still failed (unknown_order)"));
	run_finish(&r);
	/* a done now: refused, nothing done for it; b ran all the same */
	run_cli(d, 1, refused_first, 0, 0, &r);
	assert_int_equal(r.rn_status, 65);
	assert_non_null(strstr(r.rn_err, "is not failed"));
	assert_non_null(strstr(r.rn_out, "still failed (unknown_order)"));
	run_finish(&r);
	assert_int_equal(fx_db_int(d, "SELECT reprocessed FROM events WHERE id = %s", b), 3);
	run_cli(d, 1, missing, 0, 0, &r);
	assert_int_equal(r.rn_status, 66);
	run_finish(&r);
}

/* A key longer than its column ends in an ellipsis in the table, and is
 * whole in the JSON. */
static void test_a_long_key_is_never_cut_silently(void **state)
{
	static const char *const table[] = {"events", "list", "--limit", "1", NULL};
	static const char *const json[] = {"events", "list", "--limit", "1", "--json", NULL};
	static const char key[] = "evt_a_key_much_longer_than_its_thirty_two_column_cell_0001";
	struct daemon *d = *state;
	char order[64];
	char cut[64];
	struct run r;

	fx_order(d, 500, "usd", order);
	assert_int_equal(fx_stripe_pay(d, key, order, 500, "usd"), 200);
	run_cli(d, 1, table, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	snprintf(cut, sizeof(cut), "%.31s\xe2\x80\xa6", key);
	if (strstr(r.rn_out, cut) == NULL) {
		fail_msg("no ellipsis after the cut key: %s", r.rn_out);
	}
	run_finish(&r);
	run_cli(d, 1, json, 0, 0, &r);
	assert_non_null(strstr(r.rn_out, key));
	run_finish(&r);
}

/* outbox show: the row and its attempts (as the row keeps them); list
 * takes --limit and --json. */
static void test_outbox_show_prints_the_row_with_its_attempts(void **state)
{
	struct daemon d;
	struct peer *p = peer_create();
	struct peer_behaviour fail500 = {.pb_action = PEER_REPLY, .pb_status = 500};
	char order[64];
	struct run r;
	cJSON *j;
	cJSON *att;

	(void)state;
	assert_non_null(p);
	assert_int_equal(peer_default(p, NULL, &fail500), 0);
	fx_daemon_start(&d,
	                FX_STRIPE_INI "\n[outbound]\nnotify_url = %s/notify\nretry_base = 50ms\n"
	                              "retry_cap = 100ms\npoll = 50ms\nmax_attempts = 2\n",
	                peer_base(p));
	fx_order(&d, 1999, "usd", order);
	assert_int_equal(fx_stripe_pay(&d, "evt_outbox_show", order, 1999, "usd"), 200);
	assert_int_equal(
	        hn_db_wait_int(d.dm_db, "SELECT count(*) FROM outbox WHERE status = 'dead'", 1, 30),
	        1);
	{
		const char *args[] = {"outbox", "show", "1", NULL};

		run_cli(&d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, "status:          dead"));
		assert_non_null(strstr(r.rn_out, "attempts:\n  count:         2\n"));
		assert_non_null(strstr(r.rn_out, "  last answer:   HTTP 500\n"));
		assert_non_null(strstr(r.rn_out, order));
		run_finish(&r);
	}
	{
		const char *args[] = {"outbox", "show", "--json", "1", NULL};

		run_cli(&d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		att = cJSON_GetObjectItem(j, "attempts");
		assert_int_equal(cJSON_GetObjectItem(att, "count")->valueint, 2);
		assert_int_equal(cJSON_GetObjectItem(att, "last_status")->valueint, 500);
		assert_string_equal(cJSON_GetObjectItem(j, "order")->valuestring, order);
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"outbox", "list", "--limit", "1", "--json", NULL};

		run_cli(&d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json(r.rn_out);
		assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "outbox")), 1);
		cJSON_Delete(j);
		run_finish(&r);
	}
	daemon_finish(&d);
	peer_destroy(p);
}

/* ---- log lines: journald prefixes off a terminal, info only with -v ---- */

static void test_log_prefixes_only_off_a_terminal_and_info_only_with_v(void **state)
{
	static const char *const migrate[] = {"migrate", NULL};
	static const char *const migrate_v[] = {"-v", "migrate", NULL};
	struct daemon d;
	struct run r;

	(void)state;
	/* a fresh database each time, so there are migrations to apply */
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	run_cli(&d, 1, migrate, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	assert_null(strstr(r.rn_err, "applied migration"));
	run_finish(&r);
	daemon_finish(&d);

	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	run_cli(&d, 1, migrate_v, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	assert_non_null(strstr(r.rn_err, "<6>store: applied migration"));
	run_finish(&r);
	daemon_finish(&d);

	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	run_cli(&d, 1, migrate_v, 1, 0, &r);
	assert_int_equal(r.rn_status, 0);
	assert_non_null(strstr(r.rn_out, "store: applied migration"));
	assert_null(strstr(r.rn_out, "<6>"));
	run_finish(&r);
	daemon_finish(&d);

	/* under systemd (JOURNAL_STREAM) the prefixes stay, terminal or not */
	assert_int_equal(daemon_init(&d, FX_STRIPE_INI), 0);
	run_cli(&d, 1, migrate_v, 1, 1, &r);
	assert_int_equal(r.rn_status, 0);
	assert_non_null(strstr(r.rn_out, "<6>store: applied migration"));
	run_finish(&r);
	daemon_finish(&d);
}

/* ---- progress on a terminal ---- */

static void test_gc_and_store_copy_draw_progress_on_a_terminal_only(void **state)
{
	static const char *const gc[] = {"gc", "--dry-run", NULL};
	struct daemon *d = *state;
	char to[700];
	char order[64];
	struct run r;

	fx_order(d, 100, "usd", order);
	run_cli(d, 1, gc, 1, 0, &r);
	assert_int_equal(r.rn_status, 0);
	assert_non_null(strstr(r.rn_out, "\r\033[Kgc: "));
	assert_non_null(strstr(r.rn_out, "gc: done"));
	assert_non_null(strstr(r.rn_out, "seconds"));
	run_finish(&r);
	run_cli(d, 1, gc, 0, 0, &r);
	assert_int_equal(r.rn_status, 0);
	assert_null(strchr(r.rn_err, '\r'));
	assert_non_null(strstr(r.rn_out, "seconds"));
	run_finish(&r);

	/* store copy: a database no serve holds (one it locks otherwise) */
	{
		struct daemon src;
		char from[700];
		const char *args[] = {"store", "copy", "--from", from, "--to", to, NULL};
		struct run r2;

		assert_int_equal(daemon_init(&src, FX_STRIPE_INI), 0);
		fx_order(&src, 100, "usd", order);
		snprintf(from, sizeof(from), "sqlite:%s", src.dm_db);
		snprintf(to, sizeof(to), "sqlite:%s/copy.db", src.dm_dir);
		run_cli(&src, 0, args, 1, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, "\r\033[Kstore copy: "));
		assert_non_null(strstr(r.rn_out, "store copy: 1 of 1 rows"));
		assert_non_null(strstr(r.rn_out, " rows from "));
		snprintf(to, sizeof(to), "sqlite:%s/copy2.db", src.dm_dir);
		run_cli(&src, 0, args, 0, 0, &r2);
		assert_int_equal(r2.rn_status, 0);
		assert_null(strchr(r2.rn_err, '\r'));
		assert_non_null(strstr(r2.rn_out, " s\n"));
		run_finish(&r2);
		run_finish(&r);
		daemon_finish(&src);
	}
}

/* ---- refused callbacks in the daemon's log ---- */

/* A hook line of log that contains head and ends, after it, in a latency
 * of whole and tenths of milliseconds ("12.3") and its newline. */
static void hook_line_check(const char *log, const char *head)
{
	const char *p = strstr(log, head);
	size_t digits = 0;

	if (p == NULL) {
		fail_msg("no line with %s: %s", head, log);
	}
	for (p += strlen(head); *p >= '0' && *p <= '9'; p++) {
		digits++;
	}
	if (digits == 0 || p[0] != '.' || p[1] < '0' || p[1] > '9' || p[2] != '\n') {
		fail_msg("a hook line ends in something else than its latency: %s", head);
	}
}
static void test_refused_callbacks_are_warnings_with_what_to_act_on(void **state)
{
	struct daemon d;
	struct hres res;
	char *sig;
	char *body;
	char *log;
	char hdr[512];
	const char *headers[3];
	char big[4096];

	(void)state;
	fx_daemon_start(&d, FX_STRIPE_INI "\n[server]\nbody_max = 2048\n");

	/* stale: signed 1000 s ago */
	body = hn_stripe_event(
	        "evt_stale_1", "payment_intent.succeeded",
	        "{\"id\":\"pi_stale_1\",\"object\":\"payment_intent\",\"amount\":100,"
	        "\"currency\":\"usd\",\"status\":\"succeeded\"}");
	sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s() - 1000, body, strlen(body));
	snprintf(hdr, sizeof(hdr), "Stripe-Signature: %s", sig);
	headers[0] = hdr;
	headers[1] = "Content-Type: application/json";
	headers[2] = NULL;
	{
		char url[128];

		snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
		assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &res), 0);
		assert_int_equal(res.hs_status, 401);
		hres_finish(&res);
		/* over [server] body_max: refused by the listener */
		memset(big, 'x', sizeof(big));
		assert_int_equal(hn_http("POST", url, headers + 1, big, sizeof(big), &res), 0);
		assert_int_equal(res.hs_status, 413);
		hres_finish(&res);
	}
	free(sig);
	free(body);

	/* a payment that names no order: failed as unknown_order */
	body = hn_stripe_event(
	        "evt_nometa_1", "payment_intent.succeeded",
	        "{\"id\":\"pi_nometa_1\",\"object\":\"payment_intent\",\"amount\":100,"
	        "\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{}}");
	assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
	free(body);

	/* a key longer than the log line keeps is cut with an ellipsis */
	{
		char id[201];
		char want[160];

		memset(id, 'k', sizeof(id) - 1);
		memcpy(id, "evt_", 4);
		id[sizeof(id) - 1] = '\0';
		body = fx_stripe_payment(id, "ord_no_such_order_for_a_long_key", 100, "usd");
		assert_int_equal(fx_stripe_send(&d, body, NULL), 200);
		free(body);
		snprintf(want, sizeof(want), "key=\"%.124s...\" outcome=failed", id);
		assert_int_equal(daemon_log_wait(&d, want, 10000), 0);
	}
	assert_int_equal(daemon_log_wait(&d, "key=\"evt_nometa_1\"", 10000), 0);
	assert_int_equal(daemon_log_wait(&d, "reason=body_too_large", 10000), 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	/* refused before its key was read: the key is "" */
	if (strstr(log, "<4>hook provider=\"stripe\" key=\"\" outcome=rejected "
	                "reason=stale_timestamp skew_s=-10") == NULL ||
	    strstr(log, "tolerance_s=300") == NULL) {
		fail_msg("no stale_timestamp warning with the skew: %s", log);
	}
	if (strstr(log, "<4>hook provider=\"stripe\" key=\"evt_nometa_1\" outcome=failed "
	                "reason=unknown_order") == NULL) {
		fail_msg("no unknown_order warning: %s", log);
	}
	/* The callback's line is built without printf: whole lines, to the
	 * newline. */
	hook_line_check(log, "<4>hook provider=\"stripe\" key=\"evt_nometa_1\" outcome=failed "
	                     "reason=unknown_order status=200 client=\"127.0.0.1\" latency_ms=");
	hook_line_check(log, "(signed in the past: a late retry or the sender's clock) status=401 "
	                     "client=\"127.0.0.1\" latency_ms=");
	if (strstr(log, "<4>hook path=\"/hooks/stripe\" outcome=rejected reason=body_too_large "
	                "status=413 "
	                "content_length=4096 limit_bytes=2048") == NULL) {
		fail_msg("no 413 warning with the limit: %s", log);
	}
	assert_non_null(strstr(log, "for payment \"pi_nometa_1\" (the event names no order)"));
	assert_null(strstr(log, "for order \"pi_nometa_1\""));
	free(log);
	daemon_finish(&d);
}

/* ---- the demo's front door ---- */

static void test_demo_root_links_to_the_checkout_page(void **state)
{
	struct daemon demo;
	struct daemon *d = *state;
	struct hres res;
	char url[128];
	char *ct;

	fx_daemon_start(&demo, FX_STRIPE_INI "\n[demo]\nenabled = yes\n");
	snprintf(url, sizeof(url), "%s/", demo.dm_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &res), 0);
	assert_int_equal(res.hs_status, 200);
	ct = hres_header(&res, "Content-Type");
	assert_non_null(ct);
	assert_non_null(strstr(ct, "text/html"));
	assert_non_null(strstr(res.hs_body, "href=\"/checkout\""));
	free(ct);
	hres_finish(&res);
	daemon_finish(&demo);

	/* not in demo mode: no page there */
	snprintf(url, sizeof(url), "%s/", d->dm_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &res), 0);
	assert_int_equal(res.hs_status, 404);
	hres_finish(&res);
}

/* ---- the checkout page ---- */

/* The text a customer reads: the page without its <details> disclosures. */
static char *outside_details(const char *html)
{
	char *out = strdup(html);
	char *p;

	assert_non_null(out);
	while ((p = strstr(out, "<details")) != NULL) {
		char *end = strstr(p, "</details>");

		assert_non_null(end);
		end += strlen("</details>");
		memmove(p, end, strlen(end) + 1);
	}
	return out;
}

static void checkout_post(struct daemon *d, const char *form, const char *accept, struct hres *ret)
{
	char url[128];
	char hdr[128];
	const char *headers[3] = {"Content-Type: application/x-www-form-urlencoded", NULL, NULL};

	snprintf(url, sizeof(url), "%s/checkout?place", d->dm_base);
	if (accept != NULL) {
		snprintf(hdr, sizeof(hdr), "Accept: %s", accept);
		headers[1] = hdr;
	}
	assert_int_equal(hn_http("POST", url, headers, form, strlen(form), ret), 0);
}

/* Back, other details, the same form again: 422 as docs/order-api.md says,
 * for the plain form and for the script alike, each with the way to the
 * order already placed; developer wording only behind "How this works". */
static void test_checkout_changed_resubmit_is_422_linking_the_order_placed(void **state)
{
	static const char first[] =
	        "idempotency_key=0b8e6a3c-6f1d-4d8e-9a51-3c2f7e4b9d10&product=beans&quantity=1";
	static const char changed[] =
	        "idempotency_key=0b8e6a3c-6f1d-4d8e-9a51-3c2f7e4b9d10&product=beans&quantity=3";
	struct daemon *d = *state;
	struct hres a;
	struct hres b;
	char *loc;
	char *text;
	char order[64];
	char link[96];
	char url[128];
	cJSON *j;

	checkout_post(d, first, NULL, &a);
	assert_int_equal(a.hs_status, 303);
	loc = hres_header(&a, "Location");
	assert_non_null(loc);
	assert_true(strncmp(loc, "/orders/", 8) == 0);
	snprintf(order, sizeof(order), "%.*s", (int)strcspn(loc + 8, "?"), loc + 8);
	snprintf(link, sizeof(link), "href=\"/orders/%s\"", order);

	checkout_post(d, changed, NULL, &b);
	assert_int_equal(b.hs_status, 422);
	assert_non_null(strstr(b.hs_body, link));
	assert_non_null(strstr(b.hs_body, "Start a new order"));
	assert_non_null(strstr(b.hs_body, "<summary>How this works</summary>"));
	text = outside_details(b.hs_body);
	assert_null(strstr(text, "idempotency"));
	assert_null(strstr(text, "Idempotent-Replayed"));
	free(text);
	hres_finish(&b);

	checkout_post(d, changed, "application/json", &b);
	assert_int_equal(b.hs_status, 422);
	j = parse_json(b.hs_body);
	assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring,
	                    "urn:idemhook:problem:idempotency_key_reused");
	snprintf(link, sizeof(link), "/orders/%s", order);
	assert_string_equal(cJSON_GetObjectItem(j, "order_url")->valuestring, link);
	cJSON_Delete(j);
	hres_finish(&b);
	assert_int_equal(fx_db_int(d,
	                           "SELECT count(*) FROM orders WHERE id = '%s' AND amount = 2490",
	                           order),
	                 1);

	/* the form itself: the customer's text speaks of orders, not keys */
	snprintf(url, sizeof(url), "%s/checkout", d->dm_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &b), 0);
	assert_int_equal(b.hs_status, 200);
	assert_non_null(strstr(b.hs_body, "<summary>How this works</summary>"));
	text = outside_details(b.hs_body);
	assert_null(strstr(text, "idempotency key"));
	free(text);
	hres_finish(&b);
	free(loc);
	hres_finish(&a);
}

/* 1 when s holds a C1 control as UTF-8 (C2 80 to C2 9F), raw. */
static int has_raw_c1(const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			return 1;
		}
	}
	return 0;
}

/* out is one JSON document for the strict reader and for Python's, with
 * nothing raw a terminal would obey. */
static cJSON *parse_json_clean(const char *out)
{
	char path[64];
	char cmd[200];
	cJSON *j;
	FILE *f;

	assert_non_null(out);
	j = json_parse_strict(out, strlen(out), NULL);
	if (j == NULL) {
		fprintf(stderr, "not valid JSON: %s\n", out);
	}
	assert_non_null(j);
	assert_false(has_raw_c1(out));
	snprintf(path, sizeof(path), "/tmp/idemhook-json-out.%ld", (long)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(out, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
	         "python3 -c 'import json,sys; json.load(sys.stdin)' < %s 2>/dev/null || "
	         "! command -v python3 >/dev/null",
	         path);
	assert_int_equal(system(cmd), 0);
	unlink(path);
	return j;
}

/* Text stored with C1 controls and bytes that are not UTF-8 (by a peer, an
 * older version, a hand in the database) comes out of --json as valid
 * JSON: C1 as \u0080-\u009f, each such byte as U+FFFD. */
static void test_json_output_is_valid_json_whatever_is_stored(void **state)
{
	struct daemon *d = *state;
	struct hn_sqlite q;
	struct run r;
	char order[64];
	char id[32];
	char sql[600];
	cJSON *j;
	cJSON *it;

	fx_order(d, 1500, "usd", order);
	assert_int_equal(fx_stripe_pay(d, "evt_c1_json", order, 1500, "usd"), 200);
	snprintf(id, sizeof(id), "%lld",
	         (long long)fx_db_int(d, "SELECT id FROM events WHERE idem_key = 'evt_c1_json'"));
	/* type: ESC-free C1 CSI "31m" and a lone 0xff; the payload JSON with a
	 * raw C1 in a string; the order's reference with a cut sequence. */
	snprintf(sql, sizeof(sql),
	         "UPDATE idempotency_records SET type = 'pi' || CAST(X'C29B' AS TEXT) "
	         "|| '31m' || CAST(X'FF' AS TEXT), payload = '{\"note\": \"a' || "
	         "CAST(X'C285' AS TEXT) || 'b\"}' WHERE idem_key = 'evt_c1_json';"
	         "UPDATE orders SET customer_ref = 'ref' || CAST(X'E282' AS TEXT) || "
	         "CAST(X'C29D' AS TEXT) WHERE id = '%s';",
	         order);
	assert_int_equal(hn_sqlite_start(&q, d->dm_db, sql), 0);
	assert_int_equal(hn_sqlite_finish(&q, ""), 0);
	{
		const char *args[] = {"events", "show", id, "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, "\"pi\\u009b31m\\ufffd\""));
		j = parse_json_clean(r.rn_out);
		assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "pi\xc2\x9b"
		                                                                 "31m\xef\xbf\xbd");
		it = cJSON_GetObjectItem(j, "payload");
		assert_string_equal(cJSON_GetObjectItem(it, "note")->valuestring, "a\xc2\x85"
		                                                                  "b");
		cJSON_Delete(j);
		run_finish(&r);
	}
	/* A payload that is neither JSON nor UTF-8 is a JSON string. */
	assert_int_equal(hn_sqlite_start(&q, d->dm_db,
	                                 "UPDATE idempotency_records SET payload = 'a=' || "
	                                 "CAST(X'FFC29B' AS TEXT) WHERE idem_key = 'evt_c1_json';"),
	                 0);
	assert_int_equal(hn_sqlite_finish(&q, ""), 0);
	{
		const char *args[] = {"events", "show", id, "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json_clean(r.rn_out);
		assert_string_equal(cJSON_GetObjectItem(j, "payload")->valuestring,
		                    "a=\xef\xbf\xbd\xc2\x9b");
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"events", "list", "--order", order, "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json_clean(r.rn_out);
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"order", "show", order, "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		assert_non_null(strstr(r.rn_out, "\"ref\\ufffd\\ufffd\\u009d\""));
		j = parse_json_clean(r.rn_out);
		cJSON_Delete(j);
		run_finish(&r);
	}
	{
		const char *args[] = {"stats", "--json", NULL};

		run_cli(d, 1, args, 0, 0, &r);
		assert_int_equal(r.rn_status, 0);
		j = parse_json_clean(r.rn_out);
		cJSON_Delete(j);
		run_finish(&r);
	}
}

static int setup(void **state)
{
	return daemon_setup(state, FX_STRIPE_INI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_help_is_aligned_and_lists_one_exit_table_the_docs_repeat),
	        cmocka_unit_test(test_an_unknown_id_exits_66_in_every_command),
	        cmocka_unit_test(test_listings_take_json_limit_and_an_order_filter),
	        cmocka_unit_test(test_events_list_says_a_provider_is_unknown),
	        cmocka_unit_test(test_events_dismiss_says_what_is_missing_or_too_much),
	        cmocka_unit_test(test_events_dismiss_says_a_provider_is_unknown),
	        cmocka_unit_test(
	                test_reprocess_exit_status_tells_applied_still_failed_and_refused_apart),
	        cmocka_unit_test(test_a_long_key_is_never_cut_silently),
	        cmocka_unit_test(test_outbox_show_prints_the_row_with_its_attempts),
	        cmocka_unit_test(test_log_prefixes_only_off_a_terminal_and_info_only_with_v),
	        cmocka_unit_test(test_gc_and_store_copy_draw_progress_on_a_terminal_only),
	        cmocka_unit_test(test_refused_callbacks_are_warnings_with_what_to_act_on),
	        cmocka_unit_test(test_demo_root_links_to_the_checkout_page),
	        cmocka_unit_test(test_checkout_changed_resubmit_is_422_linking_the_order_placed),
	        cmocka_unit_test(test_json_output_is_valid_json_whatever_is_stored),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
