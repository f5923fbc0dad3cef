/* pg_run.c: runs a unit test program with IDEMHOOK_TEST_PG_CONNINFO naming a
 * fresh database on a throwaway PostgreSQL server, so its PostgreSQL
 * variants run (tests/unit/pg_fixture.h); the server goes with it.
 * Usage: pg_run PROGRAM [ARGS...]. Exits with the program's status, 77
 * (skipped) when PostgreSQL is not installed and not required. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pgserver.h"

int main(int argc, char **argv)
{
	struct pgserver *pg;
	char conninfo[700];
	char db[64];
	int status;
	pid_t pid;

	if (argc < 2) {
		fprintf(stderr, "usage: pg_run PROGRAM [ARGS...]\n");
		return 64;
	}
	pgserver_require_or_skip("pg_run");
	pg = pgserver_shared(NULL);
	if (pg == NULL || pgserver_create_db(pg, "unit", db) < 0) {
		return 1;
	}
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	if (setenv("IDEMHOOK_TEST_PG_CONNINFO", conninfo, 1) < 0) {
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		return 1;
	}
	if (pid == 0) {
		execv(argv[1], argv + 1);
		perror("pg_run: exec");
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid) {
		return 1;
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "pg_run: %s killed by signal %d\n", argv[1], WTERMSIG(status));
		return 1;
	}
	return WEXITSTATUS(status);
}
