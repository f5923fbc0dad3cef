/* sqlite_ceiling.c: the storage ceiling of the benchmark: one INSERT per
 * transaction at synchronous=FULL in WAL mode, in a fresh database in DIR
 * (the filesystem the daemon's database is on), for SECONDS. Prints the
 * transactions per second. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

static double ceiling_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int ceiling_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "sqlite_ceiling: %s: %s\n", sql, err != NULL ? err : "?");
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char path[4096];
	sqlite3 *db = NULL;
	sqlite3_stmt *ins = NULL;
	double seconds;
	double t0;
	double t;
	long n = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: sqlite_ceiling DIR SECONDS\n");
		return 64;
	}
	seconds = strtod(argv[2], NULL);
	snprintf(path, sizeof(path), "%s/ceiling.db", argv[1]);
	unlink(path);
	if (sqlite3_open(path, &db) != SQLITE_OK || ceiling_exec(db, "PRAGMA journal_mode = WAL") < 0 ||
	    ceiling_exec(db, "PRAGMA synchronous = FULL") < 0 ||
	    ceiling_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v BLOB)") < 0 ||
	    sqlite3_prepare_v2(db, "INSERT INTO t (k, v) VALUES ('evt_0123456789abcdef', zeroblob(200))", -1,
			       &ins, NULL) != SQLITE_OK) {
		fprintf(stderr, "sqlite_ceiling: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	t0 = ceiling_now();
	do {
		if (sqlite3_step(ins) != SQLITE_DONE) {
			fprintf(stderr, "sqlite_ceiling: %s\n", sqlite3_errmsg(db));
			return 1;
		}
		sqlite3_reset(ins);
		n++;
		t = ceiling_now();
	} while (t - t0 < seconds);
	printf("%.0f\n", (double)n / (t - t0));
	sqlite3_finalize(ins);
	sqlite3_close(db);
	unlink(path);
	return 0;
}
