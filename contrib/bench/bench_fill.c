/* bench_fill.c: fills an idemhook SQLite database with stored callbacks
 * through SQL, fast, for the benchmark at a large database (bench_hooks).
 *
 * Usage: bench_fill DB TOTAL
 *
 * DB must hold a few real callbacks already (the templates: bench_hooks
 * sends 100 through HTTP to a daemon on DB first). Every row of every table
 * but checkout_flash is copied until the database holds TOTAL callbacks, so
 * the copies have whatever columns and indexes the schema of the binary
 * that made DB has: the benchmark runs against older versions of idemhook
 * too. Each copy's keys (text values in indexed columns that differ from
 * row to row in the templates, and order_id) get eight pseudo-random hex
 * digits (the same for one copy in every table, so an order and the rows
 * naming it keep matching). A provider's id (its first '_' within its first
 * eight characters: evt_, pi_, re_) gets them right after its tag, so the
 * copies spread over the same part of each index as the random ids of the
 * callbacks that come after them, and every new key lands among a million
 * old ones as it does in a database that has served a million callbacks.
 * idemhook's own order ids (ord_, time-ordered) and any other value get
 * them in front with a '.', so every copy sorts before the orders made
 * after the fill, as older orders do. (Until the eighteenth round of issue
 * 24 every key got them in front: the copies of "evt_..." then all sorted
 * before every new "evt_..." key, which landed in a part of the index that
 * only the benchmark's own callbacks had used, and a database filled once
 * answered as fast as an empty one.)
 * The indexes are kept while the rows go in, so their leaves fill and split
 * as a serving daemon's do (an index built afterwards would be packed full,
 * and every first insert into a leaf would split it).
 *
 * The copy runs without a journal, on an exclusive lock (the daemon must be
 * stopped): in WAL mode every page went to the WAL first and was copied into
 * the file by the checkpoint after, 80 s for 1,000,000 callbacks where
 * journal_mode = OFF took 33 s (docs/benchmarks.md). The database is put
 * back in WAL mode at the end. A fill that fails leaves a database to throw
 * away, as before. Prints the seconds it took and the callbacks stored. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define FILL_SQL_MAX 16384
#define FILL_COLS_MAX 64
/* A copy's key (column %s, eight times): the copy's eight hex digits after a
 * provider's tag (the value's first '_' within its first eight characters,
 * not an order id), or in front of the value with a '.'. */
#define FILL_HEX "printf('%%08x', (c.j * 2654435761 + 40503) %% 4294967296)"
#define FILL_KEY_SQL                                                                               \
	"CASE WHEN t.\"%s\" IS NULL THEN NULL "                                                    \
	"WHEN t.\"%s\" NOT GLOB 'ord_*' AND instr(t.\"%s\", '_') BETWEEN 2 AND 8 "                 \
	"THEN substr(t.\"%s\", 1, instr(t.\"%s\", '_')) || " FILL_HEX                              \
	" || substr(t.\"%s\", instr(t.\"%s\", '_') + 1) "                                          \
	"ELSE " FILL_HEX " || '.' || t.\"%s\" END"

static int fill_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "bench_fill: %s\n  in: %.300s\n", err != NULL ? err : "?", sql);
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

/* Sets a journal mode and checks that SQLite took it: a mode that another
 * connection prevents (journal_mode stays WAL while one is open) is
 * refused, not ignored. */
static int fill_journal(sqlite3 *db, const char *mode)
{
	char sql[64];
	sqlite3_stmt *st = NULL;
	int ok = 0;

	snprintf(sql, sizeof(sql), "PRAGMA journal_mode = %s", mode);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		const char *now = (const char *)sqlite3_column_text(st, 0);

		ok = now != NULL && strcasecmp(now, mode) == 0;
	}
	sqlite3_finalize(st);
	if (!ok) {
		fprintf(stderr,
		        "bench_fill: cannot set journal_mode = %s (is a daemon still using "
		        "the database?)\n",
		        mode);
	}
	return ok ? 0 : -1;
}

/* The copy ran at synchronous = OFF: its pages go to the disk now, not
 * while the benchmark measures the daemon that opens the file next. */
static int fill_sync(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc = fd >= 0 ? fsync(fd) : -1;

	if (fd >= 0) {
		close(fd);
	}
	if (rc != 0) {
		fprintf(stderr, "bench_fill: cannot sync %s: %s\n", path, strerror(errno));
	}
	return rc;
}

static int64_t fill_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		v = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return v;
}

/* Is column col of table part of an index or of the primary key? */
static int fill_indexed(sqlite3 *db, const char *table, const char *col)
{
	char sql[512];

	snprintf(
	        sql, sizeof(sql),
	        "SELECT count(*) FROM pragma_index_list('%s') AS l, pragma_index_info(l.name) AS i "
	        "WHERE i.name = '%s'",
	        table, col);
	return fill_int(db, sql) > 0;
}

/* Does column col hold a value of its own in most template rows (a key, an
 * id), rather than one of a few (a scope, a status, a reason)? */
static int fill_distinct(sqlite3 *db, const char *table, const char *col)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
	         "SELECT count(DISTINCT \"%s\") * 2 > count(*) FROM temp.\"tpl_%s\"", col, table);
	return fill_int(db, sql) == 1;
}

/* Copies the template rows of table copies times (copy numbers 1..copies). */
static int fill_table(sqlite3 *db, const char *table, int64_t copies)
{
	char cols[FILL_SQL_MAX] = "";
	char exprs[FILL_SQL_MAX] = "";
	char sql[3 * FILL_SQL_MAX];
	sqlite3_stmt *st = NULL;
	size_t cl = 0;
	size_t el = 0;
	int rowid_pk;
	int n = 0;

	/* One INTEGER primary key column of a rowid table: the rowid. */
	snprintf(sql, sizeof(sql),
	         "SELECT (SELECT count(*) FROM pragma_table_info('%s') WHERE pk > 0) = 1 AND "
	         "(SELECT sql NOT LIKE '%%WITHOUT ROWID%%' FROM sqlite_master WHERE name = '%s')",
	         table, table);
	rowid_pk = fill_int(db, sql) == 1;
	snprintf(sql, sizeof(sql), "SELECT name, type, pk FROM pragma_table_info('%s')", table);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		return -1;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		const char *type = (const char *)sqlite3_column_text(st, 1);
		int pk = sqlite3_column_int(st, 2);
		int text = type != NULL && strcasecmp(type, "TEXT") == 0;

		/* An INTEGER PRIMARY KEY is the rowid: the copy gets a new one. */
		if (pk > 0 && type != NULL && strcasecmp(type, "INTEGER") == 0 && rowid_pk) {
			continue;
		}
		cl += (size_t)snprintf(cols + cl, sizeof(cols) - cl, "%s\"%s\"", n > 0 ? ", " : "",
		                       name);
		if (text &&
		    (pk > 0 || strcmp(name, "order_id") == 0 || fill_indexed(db, table, name)) &&
		    fill_distinct(db, table, name)) {
			el += (size_t)snprintf(exprs + el, sizeof(exprs) - el, "%s" FILL_KEY_SQL,
			                       n > 0 ? ", " : "", name, name, name, name, name,
			                       name, name, name);
		} else {
			el += (size_t)snprintf(exprs + el, sizeof(exprs) - el, "%st.\"%s\"",
			                       n > 0 ? ", " : "", name);
		}
		n++;
		if (n >= FILL_COLS_MAX || cl >= sizeof(cols) - 256 || el >= sizeof(exprs) - 512) {
			sqlite3_finalize(st);
			return -1;
		}
	}
	sqlite3_finalize(st);
	snprintf(sql, sizeof(sql),
	         "WITH RECURSIVE c(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM c WHERE j < %lld) "
	         "INSERT INTO \"%s\" (%s) SELECT %s FROM c, temp.\"tpl_%s\" AS t",
	         (long long)copies, table, cols, exprs, table);
	return fill_exec(db, sql);
}

int main(int argc, char **argv)
{
	static const char *const skip[] = {"checkout_flash", NULL};
	char sql[1024];
	char tables[32][64];
	sqlite3_stmt *st = NULL;
	struct timespec t0;
	struct timespec t1;
	sqlite3 *db = NULL;
	int64_t have;
	int64_t total;
	int64_t copies;
	size_t n = 0;
	size_t i;

	if (argc != 3 || (total = strtoll(argv[2], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: bench_fill DB TOTAL\n");
		return 64;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sqlite3_open(argv[1], &db) != SQLITE_OK) {
		fprintf(stderr, "bench_fill: cannot open %s\n", argv[1]);
		return 1;
	}
	/* The templates: callbacks the daemon stored, whatever table holds
	 * them (the claimed keys). */
	have = fill_int(db, "SELECT count(*) FROM idempotency_records");
	if (have <= 0) {
		fprintf(stderr, "bench_fill: no stored callback to copy in %s\n", argv[1]);
		return 1;
	}
	copies = (total - have + have - 1) / have;
	/* 4 GB of page cache at most (it grows as pages are used): the
	 * indexes of 10,000,000 callbacks stay in it. */
	if (fill_exec(db, "PRAGMA locking_mode = EXCLUSIVE") < 0 || fill_journal(db, "OFF") < 0 ||
	    fill_exec(db, "PRAGMA synchronous = OFF; PRAGMA cache_size = -4000000; "
	                  "PRAGMA temp_store = MEMORY; PRAGMA foreign_keys = OFF") < 0 ||
	    sqlite3_prepare_v2(db,
	                       "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
	                       "LIKE 'sqlite_%' "
	                       "ORDER BY name",
	                       -1, &st, NULL) != SQLITE_OK) {
		return 1;
	}
	while (sqlite3_step(st) == SQLITE_ROW && n < sizeof(tables) / sizeof(tables[0])) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		int skipped = 0;

		for (i = 0; skip[i] != NULL; i++) {
			skipped |= strcmp(name, skip[i]) == 0;
		}
		if (!skipped) {
			snprintf(tables[n++], sizeof(tables[0]), "%s", name);
		}
	}
	sqlite3_finalize(st);
	if (fill_exec(db, "BEGIN") < 0) {
		return 1;
	}
	for (i = 0; i < n; i++) {
		snprintf(sql, sizeof(sql),
		         "CREATE TEMP TABLE \"tpl_%s\" AS SELECT * FROM main.\"%s\"", tables[i],
		         tables[i]);
		if (fill_exec(db, sql) < 0) {
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		if (fill_table(db, tables[i], copies) < 0) {
			fprintf(stderr, "bench_fill: cannot copy %s\n", tables[i]);
			return 1;
		}
	}
	if (fill_exec(db, "COMMIT") < 0 || fill_journal(db, "WAL") < 0) {
		return 1;
	}
	have = fill_int(db, "SELECT count(*) FROM idempotency_records");
	if (sqlite3_close(db) != SQLITE_OK || fill_sync(argv[1]) < 0) {
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.1f %lld\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (long long)have);
	return 0;
}
