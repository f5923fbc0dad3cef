/* pgserver.c: a throwaway PostgreSQL server for tests and benchmarks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "buf.h"
#include "harness.h"
#include "pgserver.h"

#define PGSERVER_READY_TIMEOUT_MS 60000
#define PGSERVER_STOP_TIMEOUT_MS 15000

static void pgserver_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

int pgserver_required(void)
{
	const char *v = getenv("IDEMHOOK_TEST_REQUIRE_PG");

	return v != NULL && strcmp(v, "1") == 0;
}

static int pgserver_has_bin(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, X_OK) == 0;
}

int pgserver_find_bindir(char *ret, size_t size)
{
	const char *env = getenv("IDEMHOOK_PG_BINDIR");
	struct dirent *de;
	DIR *dir;
	long best = -1;

	if (env != NULL && env[0] != '\0') {
		if (!pgserver_has_bin(env, "initdb") || !pgserver_has_bin(env, "postgres")) {
			return -1;
		}
		snprintf(ret, size, "%s", env);
		return 0;
	}
	dir = opendir("/usr/lib/postgresql");
	if (dir == NULL) {
		return -1;
	}
	while ((de = readdir(dir)) != NULL) {
		char bindir[300];
		char *end;
		long v = strtol(de->d_name, &end, 10);

		if (end == de->d_name || *end != '\0' || v <= best) {
			continue;
		}
		snprintf(bindir, sizeof(bindir), "/usr/lib/postgresql/%s/bin", de->d_name);
		if (pgserver_has_bin(bindir, "initdb") && pgserver_has_bin(bindir, "postgres") &&
		    pgserver_has_bin(bindir, "psql")) {
			best = v;
			snprintf(ret, size, "%s", bindir);
		}
	}
	closedir(dir);
	return best >= 0 ? 0 : -1;
}

/* PostgreSQL refuses to run as root: as root, initdb and postgres run as
 * the postgres user (Debian's package makes it), else nobody. */
static int pgserver_account(uid_t *ret_uid, gid_t *ret_gid)
{
	const struct passwd *pw;

	if (geteuid() != 0) {
		*ret_uid = geteuid();
		*ret_gid = getegid();
		return 0;
	}
	pw = getpwnam("postgres");
	if (pw == NULL) {
		pw = getpwnam("nobody");
	}
	if (pw == NULL) {
		fprintf(stderr, "pgserver: running as root and there is neither a postgres nor a "
		                "nobody user\n");
		return -1;
	}
	*ret_uid = pw->pw_uid;
	*ret_gid = pw->pw_gid;
	return 0;
}

/* In a child: become the account, send stdout/stderr to log. */
static void pgserver_child_setup(uid_t uid, gid_t gid, const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (geteuid() == 0) {
		if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
			_exit(126);
		}
	}
}

static int pgserver_free_port(unsigned *ret)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		close(fd);
		return -1;
	}
	*ret = ntohs(sa.sin_port);
	close(fd);
	return 0;
}

static int pgserver_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void pgserver_rmdir(const char *dir)
{
	int i;

	/* A backend may still be writing for a moment after its postmaster died. */
	for (i = 0; i < 20; i++) {
		if (nftw(dir, pgserver_rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ||
		    access(dir, F_OK) != 0) {
			return;
		}
		pgserver_sleep_ms(100);
	}
}

pid_t pgserver_postmaster_pid(const struct pgserver *pg)
{
	char path[600];
	FILE *f;
	long pid = 0;

	snprintf(path, sizeof(path), "%s/data/postmaster.pid", pg->pg_dir);
	f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	if (fscanf(f, "%ld", &pid) != 1) {
		pid = 0;
	}
	fclose(f);
	return (pid_t)pid;
}

/* The parent pid of process pid (from /proc/pid/stat), 0 when unknown. */
static pid_t pgserver_parent_of(pid_t pid)
{
	char path[64];
	char line[1024];
	const char *close_paren;
	long ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	if (fgets(line, sizeof(line), f) == NULL) {
		line[0] = '\0';
	}
	fclose(f);
	/* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
	close_paren = strrchr(line, ')');
	if (close_paren == NULL || sscanf(close_paren + 1, " %*c %ld", &ppid) != 1) {
		return 0;
	}
	return (pid_t)ppid;
}

int pgserver_signal_all(const struct pgserver *pg, int sig)
{
	pid_t postmaster = pgserver_postmaster_pid(pg);
	struct dirent *de;
	DIR *proc;
	int n = 0;

	if (postmaster <= 0) {
		return -1;
	}
	/* The postmaster first, so it forks no new backend meanwhile. */
	if (kill(postmaster, sig) == 0) {
		n++;
	}
	proc = opendir("/proc");
	if (proc == NULL) {
		return n;
	}
	while ((de = readdir(proc)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end == '\0' && pid > 0 && pgserver_parent_of((pid_t)pid) == postmaster &&
		    kill((pid_t)pid, sig) == 0) {
			n++;
		}
	}
	closedir(proc);
	return n;
}

/* IDEMHOOK_KEEP_TMP=1 keeps the directory (the server's log) as it keeps
 * the daemons'. */
static int pgserver_keep(void)
{
	const char *keep = getenv("IDEMHOOK_KEEP_TMP");

	return keep != NULL && strcmp(keep, "1") == 0;
}

/* The watcher: in a session of its own (a test runner killing the test's
 * process group does not reach it), it runs postgres as its child and, once
 * the pipe from the test program reads EOF (pgserver_stop closed it, or the
 * program died), stops postgres and removes the directory. */
static void pgserver_watch(const struct pgserver *pg, int watch_fd, uid_t uid, gid_t gid)
{
	char data[600];
	char log[600];
	char postgres[300];
	char opt_port[32];
	char tls_cert[600];
	char tls_key[600];
	pid_t child;
	int waited;
	int status;
	int fd;

	/* Hold nothing of the test program's: not the runner's output pipes
	 * (it waits for their EOF), not another server's watch pipe. */
	for (fd = 0; fd < 1024; fd++) {
		if (fd != watch_fd) {
			close(fd);
		}
	}
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2) {
			close(fd);
		}
	}
	setsid();
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	snprintf(data, sizeof(data), "%s/data", pg->pg_dir);
	snprintf(log, sizeof(log), "%s/postgres.log", pg->pg_dir);
	snprintf(postgres, sizeof(postgres), "%s/postgres", pg->pg_bindir);
	snprintf(opt_port, sizeof(opt_port), "%u", pg->pg_port);
	snprintf(tls_cert, sizeof(tls_cert), "ssl_cert_file=%s/server.pem", pg->pg_dir);
	snprintf(tls_key, sizeof(tls_key), "ssl_key_file=%s/server.key", pg->pg_dir);
	child = fork();
	if (child == 0) {
		const char *argv[64] = {postgres,
		                        "-D",
		                        data,
		                        "-p",
		                        opt_port,
		                        "-k",
		                        pg->pg_dir,
		                        "-c",
		                        "listen_addresses=",
		                        "-c",
		                        "fsync=on",
		                        "-c",
		                        "synchronous_commit=on",
		                        "-c",
		                        "full_page_writes=on",
		                        "-c",
		                        "max_connections=300",
		                        "-c",
		                        "shared_buffers=64MB",
		                        "-c",
		                        "shared_preload_libraries=pg_stat_statements",
		                        "-c",
		                        "logging_collector=off",
		                        "-c",
		                        "log_min_messages=warning"};
		size_t n = 25;
		size_t i;

		close(watch_fd);
		pgserver_child_setup(uid, gid, log);
		/* Durable as in production: fsync and synchronous_commit on. The
		 * unix socket in the directory; no TCP listener to collide with,
		 * unless TLS asks for one. */
		if (pg->pg_tls) {
			argv[n++] = "-c";
			argv[n++] = "listen_addresses=127.0.0.1";
			argv[n++] = "-c";
			argv[n++] = "ssl=on";
			argv[n++] = "-c";
			argv[n++] = tls_cert;
			argv[n++] = "-c";
			argv[n++] = tls_key;
		}
		for (i = 0; pg->pg_settings != NULL && pg->pg_settings[i] != NULL && n + 3 < 64;
		     i++) {
			argv[n++] = "-c";
			argv[n++] = pg->pg_settings[i];
		}
		argv[n] = NULL;
		execv(postgres, (char *const *)argv);
		_exit(127);
	}
	for (;;) {
		struct pollfd pfd = {.fd = watch_fd, .events = POLLIN};
		char byte;

		if (poll(&pfd, 1, 500) > 0 && read(watch_fd, &byte, 1) <= 0) {
			break;
		}
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			child = 0; /* died by itself: wait for the test to say goodbye */
		}
	}
	if (child > 0) {
		/* Immediate shutdown: the data is thrown away anyway. */
		kill(child, SIGQUIT);
		for (waited = 0; waited < PGSERVER_STOP_TIMEOUT_MS; waited += 20) {
			if (waitpid(child, &status, WNOHANG) == child) {
				child = 0;
				break;
			}
			pgserver_sleep_ms(20);
		}
		if (child > 0) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
		}
	}
	if (!pgserver_keep()) {
		pgserver_rmdir(pg->pg_dir);
	}
	_exit(0);
}

static int pgserver_run(const char *const *argv, uid_t uid, gid_t gid, const char *log)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		pgserver_child_setup(uid, gid, log);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid) {
		return -1;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int pgserver_wait_ready(const struct pgserver *pg)
{
	char path[600];
	int waited;

	snprintf(path, sizeof(path), "%s/data/postmaster.pid", pg->pg_dir);
	for (waited = 0; waited < PGSERVER_READY_TIMEOUT_MS; waited += 20) {
		FILE *f = fopen(path, "r");

		if (f != NULL) {
			char line[256];
			int ready = 0;

			while (fgets(line, sizeof(line), f) != NULL) {
				if (strncmp(line, "ready", 5) == 0) {
					ready = 1;
				}
			}
			fclose(f);
			if (ready) {
				return 0;
			}
		}
		if (waitpid(pg->pg_watcher, NULL, WNOHANG) == pg->pg_watcher) {
			return -1;
		}
		pgserver_sleep_ms(20);
	}
	return -1;
}

static void pgserver_print_log(const struct pgserver *pg)
{
	char path[600];
	char line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/postgres.log", pg->pg_dir);
	f = fopen(path, "r");
	if (f == NULL) {
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		fprintf(stderr, "pgserver: log: %s", line);
	}
	fclose(f);
}

/* A CA and a server certificate for localhost and 127.0.0.1 in pg_dir,
 * the key readable by the server's account only. Returns 0 or -1. */
static int pgserver_make_tls(const struct pgserver *pg, uid_t uid, gid_t gid)
{
	char cmd[4096];
	char key[600];
	const char *d = pg->pg_dir;

	snprintf(cmd, sizeof(cmd),
	         "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out "
	         "ca.pem -days 2 -subj /CN=idemhook-test-ca >/dev/null 2>&1 && openssl req "
	         "-newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "
	         "/CN=localhost >/dev/null 2>&1 && printf "
	         "'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > server.ext && openssl x509 "
	         "-req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile "
	         "server.ext -out server.pem >/dev/null 2>&1",
	         d);
	if (system(cmd) != 0) {
		fprintf(stderr, "pgserver: openssl could not make the TLS certificates\n");
		return -1;
	}
	snprintf(key, sizeof(key), "%s/server.key", d);
	if (chmod(key, 0600) < 0 || (geteuid() == 0 && chown(key, uid, gid) < 0)) {
		fprintf(stderr, "pgserver: %s: %s\n", key, strerror(errno));
		return -1;
	}
	return 0;
}

void pgserver_ca_path(const struct pgserver *pg, char *ret, size_t size)
{
	snprintf(ret, size, "%s/ca.pem", pg->pg_dir);
}

int pgserver_start(struct pgserver *pg)
{
	return pgserver_start_opts(pg, NULL, 0);
}

int pgserver_start_opts(struct pgserver *pg, const char *const *settings, int tls)
{
	const char *tmp = getenv("TMPDIR");
	char initdb[300];
	char data[600];
	char log[600];
	int fds[2] = {-1, -1};
	uid_t uid;
	gid_t gid;

	memset(pg, 0, sizeof(*pg));
	pg->pg_watch_fd = -1;
	pg->pg_settings = settings;
	pg->pg_tls = tls;
	if (pgserver_find_bindir(pg->pg_bindir, sizeof(pg->pg_bindir)) < 0) {
		return 1;
	}
	if (pgserver_account(&uid, &gid) < 0 || pgserver_free_port(&pg->pg_port) < 0) {
		return -1;
	}
	/* The socket lives here: keep the path well under the 107 bytes of sun_path. */
	snprintf(pg->pg_dir, sizeof(pg->pg_dir), "%s/idemhook-pg-XXXXXX",
	         tmp != NULL && strlen(tmp) < 60 ? tmp : "/tmp");
	if (mkdtemp(pg->pg_dir) == NULL) {
		fprintf(stderr, "pgserver: mkdtemp: %s\n", strerror(errno));
		pg->pg_dir[0] = '\0';
		return -1;
	}
	if (chmod(pg->pg_dir, 0755) < 0 || (geteuid() == 0 && chown(pg->pg_dir, uid, gid) < 0)) {
		fprintf(stderr, "pgserver: %s: %s\n", pg->pg_dir, strerror(errno));
		goto fail;
	}
	snprintf(initdb, sizeof(initdb), "%s/initdb", pg->pg_bindir);
	snprintf(data, sizeof(data), "%s/data", pg->pg_dir);
	snprintf(log, sizeof(log), "%s/initdb.log", pg->pg_dir);
	{
		/* --no-sync only for creating the cluster: the server itself
		 * runs with fsync on. */
		const char *argv[] = {initdb,     "-D",         data,        "-U",
		                      "postgres", "-A",         "trust",     "-E",
		                      "UTF8",     "--locale=C", "--no-sync", "--no-instructions",
		                      NULL};

		if (pgserver_run(argv, uid, gid, log) < 0) {
			fprintf(stderr, "pgserver: initdb failed; see %s\n", log);
			goto fail;
		}
	}
	if (tls && pgserver_make_tls(pg, uid, gid) < 0) {
		goto fail;
	}
	if (pipe2(fds, O_CLOEXEC) < 0) {
		goto fail;
	}
	pg->pg_watcher = fork();
	if (pg->pg_watcher < 0) {
		pg->pg_watcher = 0;
		goto fail;
	}
	if (pg->pg_watcher == 0) {
		close(fds[1]);
		pgserver_watch(pg, fds[0], uid, gid);
	}
	close(fds[0]);
	fds[0] = -1;
	pg->pg_watch_fd = fds[1];
	pg->pg_running = 1;
	if (pgserver_keep()) {
		fprintf(stderr, "pgserver: will keep %s\n", pg->pg_dir);
	}
	if (pgserver_wait_ready(pg) < 0) {
		fprintf(stderr, "pgserver: the server in %s did not become ready\n", pg->pg_dir);
		pgserver_print_log(pg);
		pgserver_stop(pg);
		return -1;
	}
	return 0;
fail:
	if (fds[0] >= 0) {
		close(fds[0]);
	}
	if (fds[1] >= 0) {
		close(fds[1]);
	}
	pgserver_rmdir(pg->pg_dir);
	pg->pg_dir[0] = '\0';
	return -1;
}

void pgserver_stop(struct pgserver *pg)
{
	if (!pg->pg_running) {
		return;
	}
	/* EOF on the pipe: the watcher stops postgres and removes the directory. */
	close(pg->pg_watch_fd);
	pg->pg_watch_fd = -1;
	if (pg->pg_watcher > 0) {
		waitpid(pg->pg_watcher, NULL, 0);
	}
	pg->pg_watcher = 0;
	pg->pg_running = 0;
}

void pgserver_conninfo(const struct pgserver *pg, const char *db, char *ret, size_t size)
{
	snprintf(ret, size, "host=%s port=%u user=postgres dbname=%s", pg->pg_dir, pg->pg_port, db);
}

int pgserver_session_start(struct pgserver_session *ps, const struct pgserver *pg, const char *db)
{
	char psql[300];
	char conninfo[700];
	int in[2];
	int out[2];

	memset(ps, 0, sizeof(*ps));
	if (pg == NULL || pipe(in) < 0) {
		return -1;
	}
	if (pipe(out) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	snprintf(psql, sizeof(psql), "%s/psql", pg->pg_bindir);
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
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
	if (ps->ps_pid < 0) {
		close(in[1]);
		close(out[0]);
		return -1;
	}
	ps->ps_in = fdopen(in[1], "w");
	ps->ps_out = fdopen(out[0], "r");
	return ps->ps_in != NULL && ps->ps_out != NULL ? 0 : -1;
}

int pgserver_session_run(struct pgserver_session *ps, const char *sql)
{
	char line[256];

	fprintf(ps->ps_in, "%s\n\\echo pgserver_session_done\n", sql);
	if (fflush(ps->ps_in) != 0) {
		return -1;
	}
	while (fgets(line, sizeof(line), ps->ps_out) != NULL) {
		if (strcmp(line, "pgserver_session_done\n") == 0) {
			return 0;
		}
	}
	return -1;
}

int pgserver_session_finish(struct pgserver_session *ps)
{
	int status;

	fclose(ps->ps_in);
	fclose(ps->ps_out);
	if (waitpid(ps->ps_pid, &status, 0) != ps->ps_pid || !WIFEXITED(status)) {
		return -1;
	}
	return WEXITSTATUS(status);
}

int pgserver_psql(const struct pgserver *pg, const char *db, const char *sql, char **ret_out)
{
	char psql[300];
	char conninfo[700];
	char *out;
	int pipefd[2];
	int status;
	pid_t pid;

	if (ret_out != NULL) {
		*ret_out = NULL;
	}
	snprintf(psql, sizeof(psql), "%s/psql", pg->pg_bindir);
	pgserver_conninfo(pg, db != NULL ? db : "postgres", conninfo, sizeof(conninfo));
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(pipefd[1], 1);
		execl(psql, "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", conninfo,
		      "-c", sql, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	out = hn_read_fd(pipefd[0]);
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) != pid) {
		status = -1;
	}
	if (ret_out != NULL) {
		*ret_out = out;
	} else {
		free(out);
	}
	return status == 0 ? 0 : -1;
}

int pgserver_create_db(struct pgserver *pg, const char *prefix, char ret_name[64])
{
	char sql[160];

	snprintf(ret_name, 64, "%s_%u", prefix, ++pg->pg_next_db);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", ret_name);
	if (pgserver_psql(pg, NULL, sql, NULL) < 0) {
		fprintf(stderr, "pgserver: %s failed\n", sql);
		return -1;
	}
	return 0;
}

static struct pgserver pgserver_the_shared;
static int pgserver_shared_state; /* 0 untried, 1 running, -1 failed, -2 missing */

static void pgserver_shared_stop(void)
{
	pgserver_stop(&pgserver_the_shared);
}

static void pgserver_proxy_close(struct pgserver_proxy *px, size_t i)
{
	close(px->px_client[i]);
	close(px->px_server[i]);
	px->px_client[i] = -1;
	px->px_server[i] = -1;
}

/* Copies what is readable on from to to (all of it: to's reader reads).
 * Returns the bytes copied, 0 at the end, -1 on failure. */
static ssize_t pgserver_proxy_copy(int from, int to, size_t max)
{
	char buf[16384];
	ssize_t n = read(from, buf, max < sizeof(buf) ? max : sizeof(buf));
	ssize_t off = 0;

	while (n > 0 && off < n) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));

		if (w <= 0) {
			return -1;
		}
		off += w;
	}
	return n;
}

static long long pgserver_proxy_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How much of pair i's client the relay may take now: the global budget,
 * and for a pair that passes only its startup packet, what is left of it
 * (its length read first, from the packet's head, left in the socket). */
static long long pgserver_proxy_client_max(struct pgserver_proxy *px, size_t i, long long budget)
{
	if (px->px_pair_left[i] == -2) {
		unsigned char head[4];
		ssize_t n = recv(px->px_client[i], head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);

		if (n == 0) {
			return 1; /* the client closed: the copy finds it, and closes the pair */
		}
		if (n < 4) {
			return 0; /* the packet's length has not all come yet */
		}
		px->px_pair_left[i] = ((long long)head[0] << 24) | ((long long)head[1] << 16) |
		                      ((long long)head[2] << 8) | (long long)head[3];
	}
	if (px->px_pair_left[i] >= 0 && (budget < 0 || px->px_pair_left[i] < budget)) {
		return px->px_pair_left[i];
	}
	return budget;
}

static void *pgserver_proxy_main(void *arg)
{
	struct pgserver_proxy *px = arg;

	while (!__atomic_load_n(&px->px_stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd[1 + 2 * PGSERVER_PROXY_PAIRS];
		long long budget = __atomic_load_n(&px->px_budget, __ATOMIC_ACQUIRE);
		long long now = pgserver_proxy_now_ms();
		size_t i;

		pfd[0].fd = px->px_listen;
		pfd[0].events = POLLIN;
		for (i = 0; i < PGSERVER_PROXY_PAIRS; i++) {
			int held = now - px->px_born_ms[i] < px->px_pair_hold_ms[i];

			pfd[1 + 2 * i].fd =
			        budget != 0 && px->px_pair_left[i] != 0 ? px->px_client[i] : -1;
			pfd[1 + 2 * i].events = POLLIN;
			pfd[2 + 2 * i].fd = held ? -1 : px->px_server[i];
			pfd[2 + 2 * i].events = POLLIN;
		}
		if (poll(pfd, 1 + 2 * PGSERVER_PROXY_PAIRS, 50) <= 0) {
			continue;
		}
		if (pfd[0].revents & POLLIN) {
			int c = accept(px->px_listen, NULL, NULL);
			struct sockaddr_in a = {.sin_family = AF_INET,
			                        .sin_port = htons((uint16_t)px->px_target_port),
			                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			int s = c >= 0 ? socket(AF_INET, SOCK_STREAM, 0) : -1;

			for (i = 0; i < PGSERVER_PROXY_PAIRS && px->px_client[i] >= 0; i++) {
			}
			if (s < 0 || i == PGSERVER_PROXY_PAIRS ||
			    connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
				if (c >= 0) {
					close(c);
				}
				if (s >= 0) {
					close(s);
				}
			} else {
				px->px_client[i] = c;
				px->px_server[i] = s;
				px->px_born_ms[i] = pgserver_proxy_now_ms();
				px->px_pair_hold_ms[i] =
				        __atomic_load_n(&px->px_hold_ms, __ATOMIC_ACQUIRE);
				px->px_pair_left[i] =
				        __atomic_load_n(&px->px_deaf, __ATOMIC_ACQUIRE) ? -2 : -1;
			}
		}
		for (i = 0; i < PGSERVER_PROXY_PAIRS; i++) {
			long long max;
			ssize_t n;

			if (px->px_client[i] < 0) {
				continue;
			}
			if (pfd[2 + 2 * i].revents != 0 &&
			    pgserver_proxy_copy(px->px_server[i], px->px_client[i], SIZE_MAX) <=
			            0) {
				pgserver_proxy_close(px, i);
				continue;
			}
			if (pfd[1 + 2 * i].fd < 0 || pfd[1 + 2 * i].revents == 0) {
				continue;
			}
			max = pgserver_proxy_client_max(px, i, budget);
			if (max == 0) {
				continue;
			}
			n = pgserver_proxy_copy(px->px_client[i], px->px_server[i],
			                        max < 0 ? SIZE_MAX : (size_t)max);
			if (n <= 0) {
				pgserver_proxy_close(px, i);
				continue;
			}
			if (px->px_pair_left[i] > 0) {
				px->px_pair_left[i] -= n;
			}
			if (budget > 0) {
				budget -= n;
				__atomic_store_n(&px->px_budget, budget, __ATOMIC_RELEASE);
			}
		}
	}
	return NULL;
}

int pgserver_proxy_start(struct pgserver_proxy *px, const struct pgserver *pg)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int small = 4096;
	size_t i;

	memset(px, 0, sizeof(*px));
	px->px_budget = -1;
	px->px_target_port = pg->pg_port;
	for (i = 0; i < PGSERVER_PROXY_PAIRS; i++) {
		px->px_client[i] = -1;
		px->px_server[i] = -1;
	}
	px->px_listen = socket(AF_INET, SOCK_STREAM, 0);
	if (px->px_listen < 0 ||
	    setsockopt(px->px_listen, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    bind(px->px_listen, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(px->px_listen, 16) < 0 ||
	    getsockname(px->px_listen, (struct sockaddr *)&a, &len) < 0) {
		fprintf(stderr, "pgserver: proxy: %s\n", strerror(errno));
		if (px->px_listen >= 0) {
			close(px->px_listen);
		}
		return -1;
	}
	px->px_port = ntohs(a.sin_port);
	if (pthread_create(&px->px_thread, NULL, pgserver_proxy_main, px) != 0) {
		close(px->px_listen);
		return -1;
	}
	return 0;
}

void pgserver_proxy_late(struct pgserver_proxy *px, int hold_ms, int deaf)
{
	__atomic_store_n(&px->px_hold_ms, hold_ms, __ATOMIC_RELEASE);
	__atomic_store_n(&px->px_deaf, deaf, __ATOMIC_RELEASE);
}

void pgserver_proxy_budget(struct pgserver_proxy *px, long long bytes)
{
	__atomic_store_n(&px->px_budget, bytes, __ATOMIC_RELEASE);
}

void pgserver_proxy_stop(struct pgserver_proxy *px)
{
	size_t i;

	__atomic_store_n(&px->px_stop, 1, __ATOMIC_RELEASE);
	pthread_join(px->px_thread, NULL);
	for (i = 0; i < PGSERVER_PROXY_PAIRS; i++) {
		if (px->px_client[i] >= 0) {
			pgserver_proxy_close(px, i);
		}
	}
	close(px->px_listen);
}

struct pgserver *pgserver_shared(int *ret_missing)
{
	int rc;

	if (ret_missing != NULL) {
		*ret_missing = 0;
	}
	if (pgserver_shared_state == 0) {
		rc = pgserver_start(&pgserver_the_shared);
		if (rc == 0) {
			pgserver_shared_state = 1;
			atexit(pgserver_shared_stop);
		} else {
			pgserver_shared_state = rc == 1 ? -2 : -1;
		}
	}
	if (pgserver_shared_state == -2 && ret_missing != NULL) {
		*ret_missing = 1;
	}
	return pgserver_shared_state == 1 ? &pgserver_the_shared : NULL;
}

void pgserver_require_or_skip(const char *program)
{
	int missing;

	if (pgserver_shared(&missing) != NULL) {
		return;
	}
	if (!missing) {
		fprintf(stderr, "%s: the throwaway PostgreSQL server did not start\n", program);
		exit(1);
	}
	if (pgserver_required()) {
		fprintf(stderr,
		        "%s: PostgreSQL is not installed (no /usr/lib/postgresql/N/bin/initdb) and "
		        "IDEMHOOK_TEST_REQUIRE_PG=1: contrib/install-deps.sh installs it\n",
		        program);
		exit(1);
	}
	fprintf(stderr,
	        "%s: skipped: PostgreSQL is not installed (no /usr/lib/postgresql/N/bin/initdb)\n",
	        program);
	exit(PGSERVER_SKIP);
}

int pgserver_alter_db_and_close(const struct pgserver *pg, const char *db, const char *setting)
{
	char sql[512];
	char *out = NULL;
	int closed;

	snprintf(sql, sizeof(sql), "ALTER DATABASE %s %s", db, setting);
	if (pgserver_psql(pg, NULL, sql, NULL) < 0) {
		return -1;
	}
	snprintf(sql, sizeof(sql),
	         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
	         "'%s'",
	         db);
	if (pgserver_psql(pg, NULL, sql, &out) < 0 || out == NULL) {
		free(out);
		return -1;
	}
	closed = atoi(out);
	free(out);
	return closed;
}
