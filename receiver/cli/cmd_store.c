/* cmd_store.c: `idemhook store copy`: every row of one store copied into
 * another (SQLite to PostgreSQL, or back), in one transaction of the target. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "log.h"
#include "store.h"

#define CMD_STORE_SQL_MAX 8192 /* bytes of one generated statement */
#define CMD_STORE_PAGE_ROWS 1000 /* source rows read by one statement */
#define CMD_STORE_KEYS_MAX 3     /* columns of a table's key */
/* A PostgreSQL end's statement_timeout. serve's (5 s by default) keeps a
 * receiver answering; the copy is one unit of work on stopped receivers
 * whose statements may run far longer (--replace emptying a target of
 * millions of rows), and cut short it would copy nothing. */
#define CMD_STORE_STATEMENT_TIMEOUT_MS (24u * 3600u * 1000u)
/* The application_name of the copy's own PostgreSQL sessions: the
 * sessions of the database that are not the copy's are told by it. */
#define CMD_STORE_APP_NAME "idemhook store copy"
/* Groups of other sessions named in the refusal; the rest are counted. */
#define CMD_STORE_SESSIONS_NAMED 8
/* Server pids listed per group (pg_terminate_backend takes them). */
#define CMD_STORE_SESSION_PIDS 4
#define CMD_STORE_STR_(x) #x
#define CMD_STORE_STR(x) CMD_STORE_STR_(x)
/* The name of the store's read connections ("idemhook reader"): their
 * transactions are READ ONLY, so a read-only command (events list, stats,
 * a copy from this database) changes nothing a copy reads or writes. A
 * receiver has them too, but is seen by its writer, which it keeps open. */
#define CMD_STORE_READER_NAME "idemhook reader"

/* The other client sessions on a PostgreSQL end's database (sessions on
 * other databases of the server are not counted), grouped by name and
 * address, with their first pids. Another role's session shows its name
 * and pid but not its address (pg_stat_activity without
 * pg_read_all_stats); server processes (autovacuum) have no role and are
 * not counted. */
static const char cmd_store_sessions_sql[] =
        "SELECT count(*), coalesce(application_name, ''), "
        "CASE WHEN client_addr IS NOT NULL THEN host(client_addr) "
        "WHEN client_port = -1 THEN 'the local socket' "
        "ELSE 'an address hidden from this role' END AS addr, "
        "array_to_string((array_agg(pid ORDER BY pid))[1:" CMD_STORE_STR(
                CMD_STORE_SESSION_PIDS) "], ', ') "
                                        "FROM pg_stat_activity WHERE datname = current_database() "
                                        "AND pid <> pg_backend_pid() AND usename IS NOT NULL "
                                        "AND coalesce(backend_type, 'client backend') = 'client "
                                        "backend' "
                                        "AND application_name IS DISTINCT FROM '" CMD_STORE_APP_NAME
                                        "' "
                                        "AND application_name IS DISTINCT FROM "
                                        "'" CMD_STORE_READER_NAME "' "
                                        "GROUP BY 2, 3 ORDER BY 3, 2";

/* Every table, parents before the rows that reference them, each in the
 * order of its key (outbox: a compensation row after the row it is for).
 * The key is unique and indexed: the source is read a page at a time
 * after the last key copied. */
struct cmd_store_table {
	const char *ct_name;
	const char *ct_keys[CMD_STORE_KEYS_MAX]; /* NULL-ended when shorter */
};

static const struct cmd_store_table cmd_store_tables[] = {
        {"orders", {"id"}},
        {"order_refs", {"provider", "ref"}},
        {"refunds", {"id"}},
        {"points_ledger", {"id"}},
        {"disputes", {"id"}},
        {"dispute_steps", {"provider", "dispute_ref", "step_key"}},
        {"order_parked", {"id"}},
        {"outbox", {"id"}},
        {"idempotency_records", {"id"}},
        {"checkout_flash", {"token"}},
        {"outbox_attempts", {"id"}},
        {"audit_log", {"id"}},
};

#define CMD_STORE_N_TABLES (sizeof(cmd_store_tables) / sizeof(cmd_store_tables[0]))

struct cmd_store_copy {
	struct store *cs_dst;
	/* The source's one read transaction (one snapshot of every table),
	 * used from the target's writer while this thread waits for it. */
	struct store_tx *cs_src_tx;
	int cs_replace;
	int64_t cs_counts[CMD_STORE_N_TABLES];
	/* the table being copied */
	const struct cmd_store_table *cs_table;
	struct store_tx *cs_target;
	struct buf cs_select;
	struct buf cs_insert;
	int cs_blob[STORE_ROW_MAX]; /* per column: declared binary */
	size_t cs_n_cols;
	int64_t cs_rows;
	/* Where the next page starts: the key of the last row copied. A
	 * page's statement reads cs_key as its parameters while it runs (a
	 * SQLite statement borrows them), so its rows' keys go to cs_last,
	 * which becomes cs_key once the page is read. */
	size_t cs_n_keys;
	size_t cs_key_col[CMD_STORE_KEYS_MAX];         /* the key's columns in the row */
	struct store_value cs_key[CMD_STORE_KEYS_MAX]; /* sv_text owned */
	struct store_value cs_last[CMD_STORE_KEYS_MAX]; /* sv_text owned */
	int64_t cs_page_rows;
	/* progress: every row of the source, and those copied so far */
	struct cli_progress cs_progress;
	int64_t cs_src_total;
	int64_t cs_copied;
};

/* What cmd_store_sessions found on one end. */
struct cmd_store_sessions {
	int64_t ss_total;   /* other sessions */
	int64_t ss_writers; /* of them "idemhook writer": one per receiver */
	size_t ss_groups;
	struct buf ss_list; /* `N "name" from ADDR, ...` */
};

static int cmd_store_session_row(void *arg, const struct store_row *row)
{
	struct cmd_store_sessions *ss = arg;
	int64_t n = store_row_int(row, 0);
	const char *name = store_row_text(row, 1);
	const char *addr = store_row_text(row, 2);
	const char *pids = store_row_text(row, 3);

	ss->ss_total += n;
	if (name != NULL && strcmp(name, "idemhook writer") == 0) {
		ss->ss_writers += n;
	}
	if (ss->ss_groups++ < CMD_STORE_SESSIONS_NAMED) {
		return buf_printf(&ss->ss_list, "%s%lld \"%s\" from %s (pid %s%s)",
		                  ss->ss_groups > 1 ? ", " : "", (long long)n,
		                  name != NULL ? name : "", addr != NULL ? addr : "?",
		                  pids != NULL ? pids : "?",
		                  n > CMD_STORE_SESSION_PIDS ? ", ..." : "");
	}
	return 0;
}

static int cmd_store_sessions_tx(struct store_tx *tx, void *arg)
{
	return store_query_each(tx, cmd_store_sessions_sql, NULL, 0, cmd_store_session_row, arg);
}

/* A PostgreSQL end (flag: --from or --to) on which other sessions run:
 * receivers whose callbacks, committed during the copy, would be missing
 * from it (source) or deleted or mixed with it (target). Returns 0 when
 * there are none (or a SQLite end: its file lock refused a serve at open),
 * 1 when refused (said here), -1 when the sessions could not be read. */
static int cmd_store_check_sessions(struct store *st, const struct store_options *so,
                                    const char *flag)
{
	struct cmd_store_sessions ss;
	int r = 0;

	if (so->so_backend != STORE_BACKEND_POSTGRESQL) {
		return 0;
	}
	memset(&ss, 0, sizeof(ss));
	buf_init(&ss.ss_list, 0);
	if (store_read(st, cli_now_ms(), cmd_store_sessions_tx, &ss) < 0) {
		fprintf(stderr, "idemhook store copy: %s: cannot read pg_stat_activity\n", flag);
		r = -1;
		goto out;
	}
	if (ss.ss_total == 0) {
		goto out;
	}
	fprintf(stderr, "idemhook store copy: %s: the database has %lld other session%s", flag,
	        (long long)ss.ss_total, ss.ss_total == 1 ? "" : "s");
	if (ss.ss_writers > 0) {
		fprintf(stderr, " (%lld receiver%s, by %s \"idemhook writer\")",
		        (long long)ss.ss_writers, ss.ss_writers == 1 ? "" : "s",
		        ss.ss_writers == 1 ? "its" : "their");
	}
	fprintf(stderr, ": %s%s\n", ss.ss_list.buf_data != NULL ? ss.ss_list.buf_data : "",
	        ss.ss_groups > CMD_STORE_SESSIONS_NAMED ? ", ..." : "");
	fprintf(stderr,
	        "idemhook store copy: what a receiver commits during the copy would %s: stop the "
	        "receivers first, or pass --allow-running to copy anyway\n",
	        strcmp(flag, "--from") == 0 ? "not be in it" : "be deleted or mixed with it");
	r = 1;
out:
	buf_finish(&ss.ss_list);
	return r;
}

static int cmd_store_known_table(void *arg, const char *name)
{
	size_t i;

	(void)arg;
	for (i = 0; i < CMD_STORE_N_TABLES; i++) {
		if (strcmp(cmd_store_tables[i].ct_name, name) == 0) {
			return 0;
		}
	}
	/* A table a later migration added and this copy does not know: copying
	 * without it would lose rows. */
	fprintf(stderr, "idemhook store copy: the source has a table this copy does not know: %s\n",
	        name);
	return -1;
}


static int cmd_store_column(void *arg, const char *name, int is_blob)
{
	struct cmd_store_copy *cs = arg;
	size_t k;

	if (cs->cs_n_cols >= STORE_ROW_MAX) {
		fprintf(stderr, "idemhook store copy: more than %d columns in one table\n",
		        STORE_ROW_MAX);
		return -1;
	}
	cs->cs_blob[cs->cs_n_cols] = is_blob;
	for (k = 0; k < cs->cs_n_keys; k++) {
		if (strcmp(cs->cs_table->ct_keys[k], name) == 0) {
			cs->cs_key_col[k] = cs->cs_n_cols;
		}
	}
	if ((cs->cs_n_cols > 0 &&
	     (buf_puts(&cs->cs_select, ", ") < 0 || buf_puts(&cs->cs_insert, ", ") < 0)) ||
	    buf_puts(&cs->cs_select, name) < 0 || buf_puts(&cs->cs_insert, name) < 0) {
		return -1;
	}
	cs->cs_n_cols++;
	return 0;
}

static void cmd_store_key_clear(struct store_value *key)
{
	size_t k;

	for (k = 0; k < CMD_STORE_KEYS_MAX; k++) {
		free((char *)key[k].sv_text);
		memset(&key[k], 0, sizeof(key[k]));
	}
}

/* Keeps the key of row, the last one copied so far, in cs_last. */
static int cmd_store_key_keep(struct cmd_store_copy *cs, const struct store_row *row)
{
	size_t k;

	cmd_store_key_clear(cs->cs_last);
	for (k = 0; k < cs->cs_n_keys; k++) {
		const struct store_value *v = &row->sr_cols[cs->cs_key_col[k]];

		cs->cs_last[k] = *v;
		cs->cs_last[k].sv_text = NULL;
		if (v->sv_type == STORE_NULL) {
			fprintf(stderr, "idemhook store copy: %s: a row without its key\n",
			        cs->cs_table->ct_name);
			return -1;
		}
		if (v->sv_type == STORE_TEXT || v->sv_type == STORE_BLOB) {
			char *t = malloc(v->sv_len + 1);

			if (t == NULL) {
				fprintf(stderr, "idemhook store copy: out of memory\n");
				return -1;
			}
			memcpy(t, v->sv_text, v->sv_len);
			t[v->sv_len] = '\0';
			cs->cs_last[k].sv_text = t;
		}
	}
	return 0;
}

/* After a page: its last key is where the next one starts. */
static void cmd_store_key_advance(struct cmd_store_copy *cs)
{
	cmd_store_key_clear(cs->cs_key);
	memcpy(cs->cs_key, cs->cs_last, sizeof(cs->cs_key));
	memset(cs->cs_last, 0, sizeof(cs->cs_last));
}

/* One source row into the target, each column as what it is, binary
 * columns as binary whatever SQLite stored in them. */
static int cmd_store_row(void *arg, const struct store_row *row)
{
	struct cmd_store_copy *cs = arg;
	struct store_value p[STORE_ROW_MAX];
	size_t i;

	if (row->sr_n != cs->cs_n_cols) {
		fprintf(stderr, "idemhook store copy: %s: %zu columns read, %zu expected\n",
		        cs->cs_table->ct_name, row->sr_n, cs->cs_n_cols);
		return -1;
	}
	for (i = 0; i < row->sr_n && i < STORE_ROW_MAX; i++) {
		p[i] = row->sr_cols[i];
		if (p[i].sv_type == STORE_TEXT && cs->cs_blob[i]) {
			p[i].sv_type = STORE_BLOB;
		}
	}
	if (store_exec(cs->cs_target, cs->cs_insert.buf_data, p, row->sr_n, NULL) < 0 ||
	    cmd_store_key_keep(cs, row) < 0) {
		return -1;
	}
	cs->cs_rows++;
	cs->cs_page_rows++;
	cs->cs_copied++;
	cli_progress_draw(&cs->cs_progress, 0, "store copy: %lld of %lld rows (%s)",
	                  (long long)cs->cs_copied, (long long)cs->cs_src_total,
	                  cs->cs_table->ct_name);
	return 0;
}

/* The statement that reads one page of t: the columns in cols, the rows
 * after the last key copied (after: 0 for the first page) in the key's order. */
static int cmd_store_page_sql(struct buf *b, const struct cmd_store_table *t, const char *cols,
                              size_t n_keys, int after)
{
	size_t k;

	if (buf_printf(b, "SELECT %s FROM %s", cols, t->ct_name) < 0) {
		return -1;
	}
	if (after) {
		/* (a, b) > (?, ?): the row-value comparison both backends have. */
		if (buf_puts(b, n_keys > 1 ? " WHERE (" : " WHERE ") < 0) {
			return -1;
		}
		for (k = 0; k < n_keys; k++) {
			if (buf_printf(b, "%s%s", k > 0 ? ", " : "", t->ct_keys[k]) < 0) {
				return -1;
			}
		}
		if (buf_puts(b, n_keys > 1 ? ") > (" : " > ") < 0) {
			return -1;
		}
		for (k = 0; k < n_keys; k++) {
			if (buf_puts(b, k > 0 ? ", ?" : "?") < 0) {
				return -1;
			}
		}
		if (n_keys > 1 && buf_puts(b, ")") < 0) {
			return -1;
		}
	}
	if (buf_puts(b, " ORDER BY ") < 0) {
		return -1;
	}
	for (k = 0; k < n_keys; k++) {
		if (buf_printf(b, "%s%s", k > 0 ? ", " : "", t->ct_keys[k]) < 0) {
			return -1;
		}
	}
	return buf_printf(b, " LIMIT %d", CMD_STORE_PAGE_ROWS) < 0 ? -1 : 0;
}

/* Copies one table: its columns as the source has them, every row, read a
 * page at a time in the key's order (a PostgreSQL source hands a
 * statement's whole result over at once: one statement for the table
 * would hold the whole table in this process's memory). */
static int cmd_store_copy_table(struct cmd_store_copy *cs, const struct cmd_store_table *t)
{
	struct buf cols;
	struct buf first;
	size_t i;
	int rc = -1;

	buf_init(&cs->cs_select, CMD_STORE_SQL_MAX);
	buf_init(&cs->cs_insert, CMD_STORE_SQL_MAX);
	buf_init(&first, CMD_STORE_SQL_MAX);
	cs->cs_n_cols = 0;
	cs->cs_rows = 0;
	cs->cs_table = t;
	for (cs->cs_n_keys = 0; cs->cs_n_keys < CMD_STORE_KEYS_MAX && t->ct_keys[cs->cs_n_keys];
	     cs->cs_n_keys++) {
		cs->cs_key_col[cs->cs_n_keys] = STORE_ROW_MAX;
	}
	cmd_store_key_clear(cs->cs_key);
	cmd_store_key_clear(cs->cs_last);
	if (buf_printf(&cs->cs_insert, "INSERT INTO %s (", t->ct_name) < 0 ||
	    store_columns(cs->cs_src_tx, t->ct_name, cmd_store_column, cs) < 0) {
		goto out;
	}
	if (cs->cs_n_cols == 0) {
		fprintf(stderr, "idemhook store copy: the source has no table %s\n", t->ct_name);
		goto out;
	}
	for (i = 0; i < cs->cs_n_keys; i++) {
		if (cs->cs_key_col[i] >= cs->cs_n_cols) {
			fprintf(stderr, "idemhook store copy: the source's %s has no column %s\n",
			        t->ct_name, t->ct_keys[i]);
			goto out;
		}
	}
	/* cs_select holds the column list: make it the queries. */
	cols = cs->cs_select;
	buf_init(&cs->cs_select, CMD_STORE_SQL_MAX);
	if (cmd_store_page_sql(&first, t, cols.buf_data, cs->cs_n_keys, 0) < 0 ||
	    cmd_store_page_sql(&cs->cs_select, t, cols.buf_data, cs->cs_n_keys, 1) < 0) {
		buf_finish(&cols);
		goto out;
	}
	buf_finish(&cols);
	if (buf_puts(&cs->cs_insert, ") VALUES (") < 0) {
		goto out;
	}
	for (i = 0; i < cs->cs_n_cols; i++) {
		if (buf_puts(&cs->cs_insert, i > 0 ? ", ?" : "?") < 0) {
			goto out;
		}
	}
	if (buf_puts(&cs->cs_insert, ")") < 0 || cs->cs_select.buf_overflow ||
	    cs->cs_insert.buf_overflow || first.buf_overflow) {
		fprintf(stderr, "idemhook store copy: %s: statement too long\n", t->ct_name);
		goto out;
	}
	cs->cs_page_rows = 0;
	if (store_query_each(cs->cs_src_tx, first.buf_data, NULL, 0, cmd_store_row, cs) < 0) {
		goto out;
	}
	while (cs->cs_page_rows == CMD_STORE_PAGE_ROWS) {
		cmd_store_key_advance(cs);
		cs->cs_page_rows = 0;
		if (store_query_each(cs->cs_src_tx, cs->cs_select.buf_data, cs->cs_key,
		                     cs->cs_n_keys, cmd_store_row, cs) < 0) {
			goto out;
		}
	}
	rc = 0;
out:
	cmd_store_key_clear(cs->cs_key);
	cmd_store_key_clear(cs->cs_last);
	buf_finish(&first);
	buf_finish(&cs->cs_select);
	buf_finish(&cs->cs_insert);
	return rc;
}

static int64_t cmd_store_count(struct store_tx *tx, const char *table)
{
	struct store_row row;
	char sql[128];
	int64_t n;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	if (store_query(tx, sql, NULL, 0, &row) <= 0) {
		return -1;
	}
	n = store_row_int(&row, 0);
	store_row_finish(&row);
	return n;
}

/* The whole copy, one unit of work on the target's writer. */
static int cmd_store_copy_tx(struct store_tx *tx, void *arg)
{
	struct cmd_store_copy *cs = arg;
	char sql[128];
	int64_t n;
	size_t i;

	for (i = 0; i < CMD_STORE_N_TABLES; i++) {
		n = cmd_store_count(tx, cmd_store_tables[i].ct_name);
		if (n < 0) {
			return -1;
		}
		if (n > 0 && !cs->cs_replace) {
			fprintf(stderr,
			        "idemhook store copy: the target is not empty (%s has %lld rows); "
			        "--replace deletes what it holds first\n",
			        cmd_store_tables[i].ct_name, (long long)n);
			return -1;
		}
	}
	for (i = CMD_STORE_N_TABLES; cs->cs_replace && i-- > 0;) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s", cmd_store_tables[i].ct_name);
		if (store_exec(tx, sql, NULL, 0, NULL) < 0) {
			return -1;
		}
	}
	cs->cs_target = tx;
	for (i = 0; i < CMD_STORE_N_TABLES; i++) {
		if (cmd_store_copy_table(cs, &cmd_store_tables[i]) < 0) {
			return -1;
		}
		cs->cs_counts[i] = cs->cs_rows;
	}
	/* In the same transaction: a copy whose generators could not be moved
	 * is not committed (its first new row would collide). */
	if (store_after_copy(tx) < 0) {
		fprintf(stderr, "idemhook store copy: the target's id generators could not be "
		                "moved past the copied ids\n");
		return -1;
	}
	return 0;
}

/* The source's read transaction: one snapshot of the whole source (SQLite's
 * read transaction, PostgreSQL's repeatable read), copied by one write
 * transaction of the target. */
static int cmd_store_source_tx(struct store_tx *tx, void *arg)
{
	struct cmd_store_copy *cs = arg;

	size_t i;
	int64_t n;

	if (store_tables(tx, cmd_store_known_table, cs) < 0) {
		return -1;
	}
	/* The total for the progress line, from the same snapshot. */
	for (i = 0; i < CMD_STORE_N_TABLES && cs->cs_progress.cp_on; i++) {
		n = cmd_store_count(tx, cmd_store_tables[i].ct_name);
		cs->cs_src_total += n > 0 ? n : 0;
	}
	cs->cs_src_tx = tx;
	if (store_write(cs->cs_dst, store_tx_now(tx), cmd_store_copy_tx, cs) < 0) {
		fprintf(stderr, "idemhook store copy: nothing was copied\n");
		return -1;
	}
	return 0;
}

/* A location as the user may see it: a connection string may hold a password. */
static const char *cmd_store_name(const struct store_options *so)
{
	return so->so_backend == STORE_BACKEND_POSTGRESQL ? "postgresql" : so->so_path;
}

/* Parses --from or --to (flag). A location it refuses is named by its
 * scheme only: the rest may be a connection string with a password. */
static int cmd_store_location(const char *flag, const char *loc, struct store_options *so)
{
	size_t n = strcspn(loc, ":");

	if (store_location_parse(loc, so) == 0) {
		return 0;
	}
	if (loc[0] == '\0') {
		fprintf(stderr, "idemhook store copy: %s is empty", flag);
	} else if (loc[n] == ':' && n + 1 < strlen(loc)) {
		fprintf(stderr, "idemhook store copy: %s %.*s:...: not a store location", flag,
		        (int)n, loc);
	} else {
		fprintf(stderr, "idemhook store copy: %s %s: not a store location", flag, loc);
	}
	fprintf(stderr, "; expected sqlite:PATH, postgresql:CONNINFO or a postgresql:// URI\n");
	return -1;
}

static void cmd_store_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook store copy --from LOCATION --to LOCATION [--replace]\n"
	        "                           [--allow-running]\n\n"
	        "Copies every table (idempotency records with their stored replies, orders,\n"
	        "refunds, points, disputes, events, outbox, checkout messages) from one store\n"
	        "into another, row by row, in one transaction of the target that also moves\n"
	        "the target's id generators past the copied ids. The target is migrated first and\n"
	        "must be empty unless --replace. A SQLite store is locked as serve locks it:\n"
	        "stop serve first (the copy is refused while it runs). A PostgreSQL end\n"
	        "with other sessions on its database (receivers still running) is refused\n"
	        "too: they are listed by name, address and pid (read-only idemhook\n"
	        "commands are not counted).\n\n"
	        "  LOCATION         sqlite:PATH, postgresql:CONNINFO or a postgresql:// URI\n"
	        "  --replace        delete what the target holds first\n"
	        "  --allow-running  copy even with other sessions on a PostgreSQL end\n\n"
	        "On a terminal a progress line counts the rows copied (not with -q).\n\n"
	        "Example:\n"
	        "  idemhook store copy --from sqlite:/var/lib/idemhook/idemhook.db \\\n"
	        "      --to 'postgresql:host=db.internal dbname=idemhook user=idemhook'\n");
}

static int cmd_store_copy_run(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"from", required_argument, NULL, 'f'},
	        {"to", required_argument, NULL, 't'},
	        {"replace", no_argument, NULL, 'r'},
	        {"allow-running", no_argument, NULL, 'a'},
	        {NULL, 0, NULL, 0},
	};
	struct store_options from;
	struct store_options to;
	struct cmd_store_copy cs;
	struct store *src = NULL;
	struct store *dst = NULL;
	const char *from_loc = NULL;
	const char *to_loc = NULL;
	int64_t total = 0;
	size_t i;
	int allow_running = 0;
	int rc = EX_UNAVAILABLE;

	memset(&cs, 0, sizeof(cs));
	optind = 1;
	for (;;) {
		int c = cli_getopt(argc, argv, "", opts);

		if (c == -1) {
			break;
		}
		switch (c) {
		case 'f':
			from_loc = optarg;
			break;
		case 't':
			to_loc = optarg;
			break;
		case 'r':
			cs.cs_replace = 1;
			break;
		case 'a':
			allow_running = 1;
			break;
		default:
			cmd_store_usage(stderr);
			return EX_USAGE;
		}
	}
	memset(&from, 0, sizeof(from));
	memset(&to, 0, sizeof(to));
	if (optind != argc || from_loc == NULL || to_loc == NULL) {
		cmd_store_usage(stderr);
		return EX_USAGE;
	}
	if (cmd_store_location("--from", from_loc, &from) < 0 ||
	    cmd_store_location("--to", to_loc, &to) < 0) {
		return EX_USAGE;
	}
	/* The source only read, at this binary's schema; both SQLite ends
	 * locked against a serve for the copy's length. */
	from.so_read_only = 1;
	from.so_exclusive = 1;
	to.so_exclusive = 1;
	to.so_pg_writers = 1; /* the copy is one unit of work */
	from.so_statement_timeout_ms = CMD_STORE_STATEMENT_TIMEOUT_MS;
	to.so_statement_timeout_ms = CMD_STORE_STATEMENT_TIMEOUT_MS;
	from.so_pg_application_name = CMD_STORE_APP_NAME;
	to.so_pg_application_name = CMD_STORE_APP_NAME;
	/* PostgreSQL ends are shared: no lock keeps receivers off them. The
	 * source is checked before the target is made (a SQLite file). */
	src = store_create(&from);
	if (src == NULL ||
	    (!allow_running && cmd_store_check_sessions(src, &from, "--from") != 0)) {
		goto out;
	}
	dst = store_create(&to);
	if (dst == NULL || (!allow_running && cmd_store_check_sessions(dst, &to, "--to") != 0)) {
		goto out;
	}
	cs.cs_dst = dst;
	rc = EX_DATAERR;
	cli_progress_init(&cs.cs_progress, log_get_level() < LOG_LEVEL_NOTICE);
	if (store_read(src, cli_now_ms(), cmd_store_source_tx, &cs) < 0) {
		if (cs.cs_progress.cp_on) {
			fputc('\n', stderr);
		}
		goto out;
	}
	cli_progress_draw(&cs.cs_progress, 1, "store copy: %lld of %lld rows",
	                  (long long)cs.cs_copied, (long long)cs.cs_src_total);
	for (i = 0; i < CMD_STORE_N_TABLES; i++) {
		printf("%-22s %10lld\n", cmd_store_tables[i].ct_name, (long long)cs.cs_counts[i]);
		total += cs.cs_counts[i];
	}
	printf("copied %lld rows from %s to %s in %.1f s\n", (long long)total, cmd_store_name(&from),
	       cmd_store_name(&to), cli_progress_seconds(&cs.cs_progress));
	rc = EX_OK;
out:
	store_destroy(dst);
	store_destroy(src);
	return rc;
}

static int cmd_store_run(int argc, char **argv, const char *config_path)
{
	(void)config_path; /* the locations are named on the command line */
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		cmd_store_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EX_USAGE : EX_OK;
	}
	if (strcmp(argv[1], "copy") == 0) {
		if (cli_wants_help(argc, argv)) {
			cmd_store_usage(stdout);
			return EX_OK;
		}
		return cmd_store_copy_run(argc - 1, argv + 1);
	}
	fprintf(stderr, "idemhook store: unknown subcommand '%s'\n", argv[1]);
	cmd_store_usage(stderr);
	return EX_USAGE;
}

const struct cli_command cli_cmd_store = {
        .cc_name = "store",
        .cc_summary = "copy a store into another (SQLite to PostgreSQL and back)",
        .cc_run = cmd_store_run,
};
