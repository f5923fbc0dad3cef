/* harness.c: integration-test helpers: the real daemon, real HTTP, real database. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "buf.h"
#include "crypto.h"
#include "harness.h"
#include "pgserver.h"
#include "store.h"

int64_t hn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t hn_now_s(void)
{
	return hn_now_ms() / 1000;
}

static void hn_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int hn_write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		fprintf(stderr, "harness: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	fputs(content, f);
	return fclose(f) == 0 ? 0 : -1;
}

static int hn_read_port(const char *path, unsigned *ret)
{
	FILE *f = fopen(path, "r");
	unsigned port = 0;
	int n;

	if (f == NULL) {
		return -1;
	}
	n = fscanf(f, "%u", &port);
	fclose(f);
	if (n != 1 || port == 0) {
		return -1;
	}
	*ret = port;
	return 0;
}

int daemon_write_file(struct daemon *d, const char *relpath, const char *content)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s/%s", d->dm_dir, relpath);
	return hn_write_file(path, content);
}

int daemon_append_config(struct daemon *d, const char *text)
{
	FILE *f = fopen(d->dm_config, "a");

	if (f == NULL) {
		return -1;
	}
	fputs(text, f);
	return fclose(f);
}

char *hn_read_file(const char *path)
{
	struct buf b;
	char chunk[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL) {
		return NULL;
	}
	buf_init(&b, 0);
	buf_puts(&b, "");
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		buf_append(&b, chunk, n);
	}
	fclose(f);
	return buf_take(&b, NULL);
}

char *hn_read_fd(int fd)
{
	struct buf b;

	buf_init(&b, 0);
	buf_puts(&b, "");
	for (;;) {
		char chunk[4096];
		ssize_t r = read(fd, chunk, sizeof(chunk));

		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			break;
		}
		buf_append(&b, chunk, (size_t)r);
	}
	return buf_take(&b, NULL);
}

int daemon_log_wait(struct daemon *d, const char *text, int timeout_ms)
{
	int waited = 0;

	for (;;) {
		char *log_text = hn_read_file(d->dm_log);
		int found = log_text != NULL && strstr(log_text, text) != NULL;

		free(log_text);
		if (found) {
			return 0;
		}
		if (waited >= timeout_ms) {
			return -1;
		}
		hn_sleep_ms(50);
		waited += 50;
	}
}

int hn_backend_is_postgresql(void)
{
	const char *v = getenv("IDEMHOOK_TEST_BACKEND");

	return v != NULL && (strcmp(v, "postgresql") == 0 || strcmp(v, "postgres") == 0);
}

/* Writes the config with store_ini as its [store] section's keys. */
int hn_mkdtemp(char *out, size_t size, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(out, size, "%s/%s-XXXXXX", tmp != NULL ? tmp : "/tmp", name);
	if (mkdtemp(out) == NULL) {
		fprintf(stderr, "harness: mkdtemp %s: %s\n", out, strerror(errno));
		out[0] = '\0';
		return -1;
	}
	return 0;
}

static int hn_daemon_prepare(struct daemon *d)
{
	memset(d, 0, sizeof(*d));
	if (hn_mkdtemp(d->dm_dir, sizeof(d->dm_dir), "idemhook-test") < 0) {
		return -1;
	}
	snprintf(d->dm_config, sizeof(d->dm_config), "%s/idemhook.ini", d->dm_dir);
	snprintf(d->dm_db, sizeof(d->dm_db), "%s/idemhook.db", d->dm_dir);
	snprintf(d->dm_log, sizeof(d->dm_log), "%s/daemon.log", d->dm_dir);
	return 0;
}

/* 1 when ini gives key in a [section] of its own: the harness then leaves
 * its default out, as a key given twice refuses the file. */
static int hn_ini_sets(const char *ini, const char *section, const char *key)
{
	char header[64];
	const char *line = ini;
	int in = 0;

	if (ini == NULL) {
		return 0;
	}
	snprintf(header, sizeof(header), "[%s]", section);
	while (*line != '\0') {
		size_t n = strcspn(line, "\n");

		if (line[0] == '[') {
			in = strncmp(line, header, strlen(header)) == 0;
		} else if (in && strncmp(line, key, strlen(key)) == 0 &&
		           (line[strlen(key)] == ' ' || line[strlen(key)] == '=')) {
			return 1;
		}
		line += n;
		line += *line == '\n';
	}
	return 0;
}

static int hn_daemon_write_config(struct daemon *d, const char *store_ini, const char *extra_ini)
{
	static const char *const server_keys[][2] = {
	        {"threads", "8"}, {"connection_timeout", "30"}, {"per_ip_connections", "0"}};
	struct buf b;
	size_t i;
	int rc;

	buf_init(&b, 0);
	buf_printf(&b, "[server]\nlisten = 127.0.0.1:0\nport_file = %s/port\n", d->dm_dir);
	for (i = 0; i < sizeof(server_keys) / sizeof(server_keys[0]); i++) {
		if (!hn_ini_sets(extra_ini, "server", server_keys[i][0])) {
			buf_printf(&b, "%s = %s\n", server_keys[i][0], server_keys[i][1]);
		}
	}
	buf_printf(&b,
	           "\n[store]\n%s\n"
	           "[admin]\nlisten = 127.0.0.1:0\nport_file = %s/admin_port\n\n%s\n",
	           store_ini, d->dm_dir, extra_ini != NULL ? extra_ini : "");
	rc = hn_write_file(d->dm_config, b.buf_data);
	buf_finish(&b);
	return rc;
}

/* The [store] keys for a daemon on PostgreSQL database db by conninfo, and
 * store_lines (more [store] keys, "" for none). */
static int hn_daemon_write_pg_at(struct daemon *d, const char *db, const char *conninfo,
                                 const char *store_lines, const char *extra_ini)
{
	char store_ini[1400];

	snprintf(d->dm_pg_db, sizeof(d->dm_pg_db), "%s", db);
	snprintf(d->dm_db, sizeof(d->dm_db), "postgresql:%.580s", conninfo);
	snprintf(store_ini, sizeof(store_ini), "backend = postgresql\nconninfo = %.700s\n%.600s",
	         conninfo, store_lines);
	return hn_daemon_write_config(d, store_ini, extra_ini);
}

/* The [store] keys for a daemon on database db of the shared server. */
static int hn_daemon_write_pg_config(struct daemon *d, const char *db, const char *extra_ini)
{
	struct pgserver *pg = pgserver_shared(NULL);
	char conninfo[500];

	if (pg == NULL) {
		fprintf(stderr, "harness: no PostgreSQL server for a daemon on backend = postgresql\n");
		return -1;
	}
	pgserver_conninfo(pg, db, conninfo, sizeof(conninfo));
	return hn_daemon_write_pg_at(d, db, conninfo, "", extra_ini);
}

int daemon_init_pg_at(struct daemon *d, const char *db, const char *conninfo,
                      const char *store_lines, const char *extra_ini)
{
	if (hn_daemon_prepare(d) < 0) {
		return -1;
	}
	return hn_daemon_write_pg_at(d, db, conninfo, store_lines, extra_ini);
}

int daemon_init_pg(struct daemon *d, const char *extra_ini)
{
	struct pgserver *pg;
	char db[64];

	if (hn_daemon_prepare(d) < 0) {
		return -1;
	}
	/* No PostgreSQL installed: skip the test program (exit 77), or fail
	 * it where the run requires PostgreSQL. */
	pgserver_require_or_skip("harness");
	pg = pgserver_shared(NULL);
	if (pg == NULL || pgserver_create_db(pg, "idemhook", db) < 0) {
		fprintf(stderr, "harness: no PostgreSQL database for the daemon\n");
		return -1;
	}
	return hn_daemon_write_pg_config(d, db, extra_ini);
}

int daemon_init_beside(struct daemon *d, const struct daemon *first, const char *extra_ini)
{
	char db[64];

	if (first->dm_pg_db[0] == '\0') {
		fprintf(stderr, "harness: daemon_init_beside needs a first daemon on PostgreSQL\n");
		return -1;
	}
	snprintf(db, sizeof(db), "%s", first->dm_pg_db);
	if (hn_daemon_prepare(d) < 0) {
		return -1;
	}
	return hn_daemon_write_pg_config(d, db, extra_ini);
}

int daemon_init(struct daemon *d, const char *extra_ini)
{
	char store_ini[700];

	if (hn_backend_is_postgresql()) {
		return daemon_init_pg(d, extra_ini);
	}
	if (hn_daemon_prepare(d) < 0) {
		return -1;
	}
	snprintf(store_ini, sizeof(store_ini), "path = %s\n", d->dm_db);
	return hn_daemon_write_config(d, store_ini, extra_ini);
}

int daemon_use_tls(struct daemon *d)
{
	struct buf b;
	int rc;

	buf_init(&b, 0);
	buf_printf(&b,
		   "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s/tls-key.pem' -out '%s/tls-cert.pem' "
		   "-days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
		   d->dm_dir, d->dm_dir);
	rc = system(b.buf_data);
	buf_finish(&b);
	if (rc != 0) {
		fprintf(stderr, "harness: openssl could not make a certificate\n");
		return -1;
	}
	buf_init(&b, 0);
	buf_printf(&b,
	           "\n[server]\ntls_cert = file:%s/tls-cert.pem\ntls_key = file:%s/tls-key.pem\n",
	           d->dm_dir, d->dm_dir);
	rc = daemon_append_config(d, b.buf_data);
	buf_finish(&b);
	if (rc != 0) {
		return -1;
	}
	snprintf(d->dm_ca, sizeof(d->dm_ca), "%s/tls-cert.pem", d->dm_dir);
	return 0;
}

int daemon_start(struct daemon *d)
{
	const char *bin = getenv("IDEMHOOK_BIN");
	char port_file[700];
	char admin_file[700];
	int i;

	if (bin == NULL || bin[0] == '\0') {
		fprintf(stderr, "harness: IDEMHOOK_BIN is not set (run through meson test)\n");
		return -1;
	}
	snprintf(port_file, sizeof(port_file), "%s/port", d->dm_dir);
	snprintf(admin_file, sizeof(admin_file), "%s/admin_port", d->dm_dir);
	unlink(port_file);
	unlink(admin_file);
	d->dm_pid = fork();
	if (d->dm_pid < 0) {
		return -1;
	}
	if (d->dm_pid == 0) {
		int fd = open(d->dm_log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		/* A failed assertion skips daemon_finish: the daemon must still
		 * not outlive its test program. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		execl(bin, "idemhook", "-v", "serve", "-c", d->dm_config, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 2000; i++) {
		int status;

		if (hn_read_port(port_file, &d->dm_port) == 0) {
			hn_read_port(admin_file, &d->dm_admin_port);
			snprintf(d->dm_base, sizeof(d->dm_base), "%s://127.0.0.1:%u",
				 d->dm_ca[0] != '\0' ? "https" : "http", d->dm_port);
			snprintf(d->dm_admin_base, sizeof(d->dm_admin_base), "http://127.0.0.1:%u", d->dm_admin_port);
			return 0;
		}
		if (waitpid(d->dm_pid, &status, WNOHANG) == d->dm_pid) {
			fprintf(stderr, "harness: the daemon exited during start (status %d); see %s\n", status,
				d->dm_log);
			d->dm_pid = 0;
			return -1;
		}
		hn_sleep_ms(10);
	}
	fprintf(stderr, "harness: the daemon did not start within 20 s; see %s\n", d->dm_log);
	daemon_kill9(d);
	return -1;
}

int daemon_setup(void **state, const char *extra_ini)
{
	struct daemon *d = calloc(1, sizeof(*d));

	if (d == NULL || daemon_init(d, extra_ini) < 0 || daemon_start(d) < 0) {
		free(d);
		return -1;
	}
	*state = d;
	return 0;
}

int daemon_teardown(void **state)
{
	struct daemon *d = *state;

	daemon_finish(d);
	free(d);
	return 0;
}

void daemon_kill9(struct daemon *d)
{
	if (d->dm_pid > 0) {
		kill(d->dm_pid, SIGKILL);
		waitpid(d->dm_pid, NULL, 0);
		d->dm_pid = 0;
	}
}

int daemon_signal(struct daemon *d, int sig)
{
	return d->dm_pid > 0 ? kill(d->dm_pid, sig) : -1;
}

int daemon_term(struct daemon *d, int timeout_s)
{
	int status;
	int i;

	if (d->dm_pid <= 0) {
		return -1;
	}
	kill(d->dm_pid, SIGTERM);
	for (i = 0; i < timeout_s * 100; i++) {
		if (waitpid(d->dm_pid, &status, WNOHANG) == d->dm_pid) {
			d->dm_pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		hn_sleep_ms(10);
	}
	daemon_kill9(d);
	return -1;
}

static int hn_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

void daemon_finish(struct daemon *d)
{
	const char *keep = getenv("IDEMHOOK_KEEP_TMP");

	daemon_kill9(d);
	if (d->dm_dir[0] == '\0') {
		return;
	}
	if (keep != NULL && strcmp(keep, "1") == 0) {
		fprintf(stderr, "harness: kept %s\n", d->dm_dir);
		return;
	}
	nftw(d->dm_dir, hn_rm, 16, FTW_DEPTH | FTW_PHYS);
	d->dm_dir[0] = '\0';
}

/* daemon_cli's work: the command's stderr goes to err_path (truncated)
 * when not NULL, else appended to dm_log. */
/* In a child about to exec: a mount namespace of its own with certs over
 * /etc/ssl/certs. Returns 0, or -1 with errno. */
static int hn_mount_certs(const char *certs)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(certs, "/etc/ssl/certs", NULL, MS_BIND, NULL) < 0) {
		return -1;
	}
	return 0;
}

static char hn_cli_certs[700]; /* hn_cli_system_certs */

void hn_cli_system_certs(const char *dir)
{
	snprintf(hn_cli_certs, sizeof(hn_cli_certs), "%s", dir != NULL ? dir : "");
}

int hn_can_mount_ns(void)
{
	char dir[700];
	int status;
	pid_t pid;

	if (hn_mkdtemp(dir, sizeof(dir), "idemhook-ns") < 0) {
		return 0;
	}
	pid = fork();
	if (pid == 0) {
		_exit(hn_mount_certs(dir) == 0 ? 0 : 1);
	}
	status = -1;
	if (pid > 0) {
		waitpid(pid, &status, 0);
	}
	rmdir(dir);
	return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int daemon_cli_to(struct daemon *d, int with_config, const char *const *args, char **ret_out,
                         const char *err_path)
{
	const char *bin = getenv("IDEMHOOK_BIN");
	const char *argv[64];
	char *out;
	int pipefd[2];
	int n = 0;
	int status;
	pid_t pid;

	if (ret_out != NULL) {
		*ret_out = NULL;
	}
	if (bin == NULL || pipe(pipefd) < 0) {
		return -1;
	}
	argv[n++] = "idemhook";
	if (with_config) {
		argv[n++] = "-c";
		argv[n++] = d->dm_config;
	}
	while (args != NULL && *args != NULL && n < 62) {
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	pid = fork();
	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		int fd = err_path != NULL ? open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
		                          : open(d->dm_log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(pipefd[1], 1);
		if (fd >= 0) {
			dup2(fd, 2);
		}
		close(pipefd[0]);
		if (hn_cli_certs[0] != '\0' && hn_mount_certs(hn_cli_certs) < 0) {
			fprintf(stderr, "harness: cannot put %s over /etc/ssl/certs: %s\n",
			        hn_cli_certs, strerror(errno));
			_exit(126);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	out = hn_read_fd(pipefd[0]);
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	if (ret_out != NULL) {
		*ret_out = out;
	} else {
		free(out);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int daemon_cli(struct daemon *d, int with_config, const char *const *args, char **ret_out)
{
	return daemon_cli_to(d, with_config, args, ret_out, NULL);
}

int daemon_cli_err(struct daemon *d, int with_config, const char *const *args, char **ret_out,
                   char **ret_err)
{
	char path[700];
	char *err;
	FILE *log;
	int rc;

	*ret_err = NULL;
	snprintf(path, sizeof(path), "%s/cli.stderr", d->dm_dir);
	rc = daemon_cli_to(d, with_config, args, ret_out, path);
	err = hn_read_file(path);
	unlink(path);
	if (err == NULL) {
		/* nothing written (the exec failed), or out of memory */
		err = strdup("");
	}
	/* dm_log keeps what daemon_cli would have left there */
	log = fopen(d->dm_log, "a");
	if (log != NULL && err != NULL) {
		fputs(err, log);
	}
	if (log != NULL) {
		fclose(log);
	}
	*ret_err = err;
	return rc;
}

/* ---- HTTP ---- */

static size_t hn_collect(char *data, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;

	return buf_append(b, data, size * n) == 0 ? size * n : 0;
}

static pthread_once_t hn_curl_once = PTHREAD_ONCE_INIT;

static void hn_curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int hn_http(const char *method, const char *url, const char *const *headers, const void *body, size_t body_len,
	    struct hres *ret)
{
	struct curl_slist *list = NULL;
	struct buf hb;
	struct buf bb;
	CURL *c;
	CURLcode rc;
	int64_t t0 = hn_now_ms();

	pthread_once(&hn_curl_once, hn_curl_init);
	memset(ret, 0, sizeof(*ret));
	c = curl_easy_init();
	if (c == NULL) {
		return -1;
	}
	buf_init(&hb, 0);
	buf_init(&bb, 0);
	while (headers != NULL && *headers != NULL) {
		list = curl_slist_append(list, *headers++);
	}
	/* No "Expect: 100-continue" pause. */
	list = curl_slist_append(list, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, hn_collect);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &hb);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hn_collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &bb);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L); /* no body follows the head */
	}
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->hs_status);
	}
	ret->hs_headers = buf_take(&hb, NULL);
	ret->hs_body = buf_take(&bb, &ret->hs_body_len);
	ret->hs_seconds = (double)(hn_now_ms() - t0) / 1000.0;
	curl_slist_free_all(list);
	curl_easy_cleanup(c);
	buf_finish(&hb);
	buf_finish(&bb);
	return rc == CURLE_OK ? 0 : -1;
}

char *hres_header(const struct hres *r, const char *name)
{
	const char *line = r->hs_headers;
	size_t nlen = strlen(name);

	while (line != NULL && *line != '\0') {
		const char *eol = strstr(line, "\r\n");
		size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);

		if (len > nlen && strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
			const char *v = line + nlen + 1;

			while (*v == ' ') {
				v++;
			}
			return strndup(v, len - (size_t)(v - line));
		}
		line = eol != NULL ? eol + 2 : NULL;
	}
	return NULL;
}

void hres_finish(struct hres *r)
{
	free(r->hs_body);
	free(r->hs_headers);
	memset(r, 0, sizeof(*r));
}

struct hn_storm_arg {
	pthread_barrier_t *sa_barrier;
	const struct hreq *sa_req;
	struct hres *sa_ret;
	int sa_rc;
};

static void *hn_storm_thread(void *p)
{
	struct hn_storm_arg *a = p;
	const struct hreq *q = a->sa_req;

	pthread_barrier_wait(a->sa_barrier);
	a->sa_rc = hn_http(q->rq_method, q->rq_url, q->rq_headers, q->rq_body, q->rq_body_len, a->sa_ret);
	return NULL;
}

int hn_http_storm_each(size_t n, const struct hreq *reqs, struct hres *ret)
{
	pthread_barrier_t barrier;
	pthread_t *threads = calloc(n, sizeof(*threads));
	struct hn_storm_arg *args = calloc(n, sizeof(*args));
	size_t i;
	size_t started = 0;
	int rc = 0;

	pthread_once(&hn_curl_once, hn_curl_init);
	if (threads == NULL || args == NULL) {
		free(threads);
		free(args);
		return -1;
	}
	pthread_barrier_init(&barrier, NULL, (unsigned)n);
	for (i = 0; i < n; i++) {
		args[i].sa_barrier = &barrier;
		args[i].sa_req = &reqs[i];
		args[i].sa_ret = &ret[i];
		if (pthread_create(&threads[i], NULL, hn_storm_thread, &args[i]) != 0) {
			break;
		}
		started++;
	}
	if (started != n) {
		fprintf(stderr, "harness: could only start %zu of %zu threads\n", started, n);
		abort(); /* the barrier would never open */
	}
	for (i = 0; i < n; i++) {
		pthread_join(threads[i], NULL);
		if (args[i].sa_rc != 0) {
			rc = -1;
		}
	}
	pthread_barrier_destroy(&barrier);
	free(threads);
	free(args);
	return rc;
}

int hn_http_storm(size_t n, const char *method, const char *url, const char *const *headers, const void *body,
		  size_t body_len, struct hres *ret)
{
	struct hreq *reqs = calloc(n, sizeof(*reqs));
	size_t i;
	int rc;

	if (reqs == NULL) {
		return -1;
	}
	for (i = 0; i < n; i++) {
		reqs[i].rq_method = method;
		reqs[i].rq_url = url;
		reqs[i].rq_headers = headers;
		reqs[i].rq_body = body;
		reqs[i].rq_body_len = body_len;
	}
	rc = hn_http_storm_each(n, reqs, ret);
	free(reqs);
	return rc;
}

/* ---- database ---- */

struct hn_db_query {
	const char *dq_sql;
	struct buf dq_out;
	int64_t dq_int;
	int dq_rows;
};

/* An integer however the backend typed it: PostgreSQL gives sums of
 * bigints as numeric text and comparisons as booleans. */
static int64_t hn_db_value_int(const struct store_value *v)
{
	switch (v->sv_type) {
	case STORE_INT:
		return v->sv_int;
	case STORE_TEXT:
		if (strcmp(v->sv_text, "t") == 0 || strcmp(v->sv_text, "true") == 0) {
			return 1;
		}
		if (strcmp(v->sv_text, "f") == 0 || strcmp(v->sv_text, "false") == 0) {
			return 0;
		}
		return strtoll(v->sv_text, NULL, 10);
	default:
		return -1;
	}
}

static int hn_db_row(void *arg, const struct store_row *row)
{
	struct hn_db_query *q = arg;
	size_t i;

	if (q->dq_rows == 0 && row->sr_n > 0) {
		q->dq_int = hn_db_value_int(&row->sr_cols[0]);
	}
	q->dq_rows++;
	for (i = 0; i < row->sr_n; i++) {
		const struct store_value *v = &row->sr_cols[i];

		if (i > 0) {
			buf_puts(&q->dq_out, "|");
		}
		switch (v->sv_type) {
		case STORE_NULL:
			buf_puts(&q->dq_out, "NULL");
			break;
		case STORE_INT:
			buf_printf(&q->dq_out, "%" PRId64, v->sv_int);
			break;
		case STORE_TEXT:
			buf_append(&q->dq_out, v->sv_text, v->sv_len);
			break;
		case STORE_BLOB: {
			char *hex = malloc(v->sv_len * 2 + 1);

			if (hex != NULL) {
				crypto_hex_encode((const unsigned char *)v->sv_text, v->sv_len, hex);
				buf_puts(&q->dq_out, "x");
				buf_puts(&q->dq_out, hex);
				free(hex);
			}
			break;
		}
		}
	}
	buf_puts(&q->dq_out, "\n");
	return 0;
}

static int hn_db_unit(struct store_tx *tx, void *arg)
{
	struct hn_db_query *q = arg;

	return store_query_each(tx, q->dq_sql, NULL, 0, hn_db_row, q);
}

/* The store at db_path (a SQLite path or a store location), opened to
 * read, or to write one that exists; NULL when it cannot be. */
static struct store *hn_db_open(const char *db_path, int write)
{
	struct store_options so;

	memset(&so, 0, sizeof(so));
	if (store_location_parse(db_path, &so) < 0) {
		return NULL;
	}
	so.so_read_only = !write;
	so.so_must_exist = write;
	return store_create(&so);
}

static int hn_db_run(const char *db_path, struct hn_db_query *q)
{
	struct store *st = hn_db_open(db_path, 0);
	int rc;

	if (st == NULL) {
		return -1;
	}
	rc = store_read(st, 0, hn_db_unit, q);
	store_destroy(st);
	return rc;
}

int64_t hn_db_int(const char *db_path, const char *sql)
{
	struct hn_db_query q;

	memset(&q, 0, sizeof(q));
	q.dq_sql = sql;
	q.dq_int = -1;
	buf_init(&q.dq_out, 0);
	if (hn_db_run(db_path, &q) < 0 || q.dq_rows == 0) {
		q.dq_int = -1;
	}
	buf_finish(&q.dq_out);
	return q.dq_int;
}

int64_t hn_db_wait_int(const char *db_path, const char *sql, int64_t want, int timeout_s)
{
	int64_t v = -1;
	int i;

	for (i = 0; i < timeout_s * 20; i++) {
		v = hn_db_int(db_path, sql);
		if (v == want) {
			break;
		}
		usleep(50000);
	}
	return v;
}

char *hn_db_dump(const char *db_path, const char *sql)
{
	struct hn_db_query q;
	char *out;

	memset(&q, 0, sizeof(q));
	q.dq_sql = sql;
	buf_init(&q.dq_out, 0);
	if (hn_db_run(db_path, &q) < 0) {
		buf_finish(&q.dq_out);
		return NULL;
	}
	out = buf_take(&q.dq_out, NULL);
	buf_finish(&q.dq_out);
	return out;
}

static int hn_db_exec_unit(struct store_tx *tx, void *arg)
{
	return store_exec(tx, arg, NULL, 0, NULL);
}

int hn_db_exec(const char *db_path, const char *sql)
{
	struct store *st = hn_db_open(db_path, 1);
	int rc;

	if (st == NULL) {
		return -1;
	}
	rc = store_write(st, hn_now_ms(), hn_db_exec_unit, (void *)sql);
	store_destroy(st);
	return rc < 0 ? -1 : 0;
}

int hn_claim_begin(const char *db_path, const char *scope, const char *key, int64_t now_ms,
                   int64_t lease_ms)
{
	struct store *st = hn_db_open(db_path, 1);
	struct store_claim c;
	int rc;

	if (st == NULL) {
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.sc_scope = scope;
	c.sc_key = key;
	c.sc_now_ms = now_ms;
	c.sc_retention_ms = 7LL * 24 * 3600 * 1000;
	c.sc_lease_ms = lease_ms;
	store_claim_begin(st, &c);
	rc = c.sc_outcome == STORE_CLAIMED ? 0 : -1;
	store_claim_finish(&c);
	store_destroy(st);
	return rc;
}

char *hn_db_snapshot(const char *db_path)
{
	static const char *const tables[] = {
		"SELECT * FROM idempotency_records ORDER BY id", "SELECT * FROM events ORDER BY id",
		"SELECT * FROM orders ORDER BY id",              "SELECT * FROM points_ledger ORDER BY id",
		"SELECT * FROM refunds ORDER BY id",             "SELECT * FROM outbox ORDER BY id",
	};
	struct buf b;
	size_t i;

	buf_init(&b, 0);
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		char *part = hn_db_dump(db_path, tables[i]);

		if (part == NULL) {
			buf_finish(&b);
			return NULL;
		}
		buf_puts(&b, part);
		buf_puts(&b, "--\n");
		free(part);
	}
	return buf_take(&b, NULL);
}

/* ---- Stripe ---- */

char *hn_stripe_signature(const char *secret, int64_t t, const char *body, size_t body_len)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	char hex[CRYPTO_HMAC_MAX * 2 + 1];
	size_t mac_len;
	struct buf signed_content;
	struct buf out;
	char *s;

	buf_init(&signed_content, 0);
	buf_printf(&signed_content, "%" PRId64 ".", t);
	buf_append(&signed_content, body, body_len);
	if (crypto_hmac(CRYPTO_SHA256, secret, strlen(secret), signed_content.buf_data, signed_content.buf_len, mac,
			&mac_len) < 0) {
		buf_finish(&signed_content);
		return NULL;
	}
	buf_finish(&signed_content);
	crypto_hex_encode(mac, mac_len, hex);
	buf_init(&out, 0);
	buf_printf(&out, "t=%" PRId64 ",v1=%s", t, hex);
	s = buf_take(&out, NULL);
	buf_finish(&out);
	return s;
}

char *hn_stripe_event(const char *event_id, const char *type, const char *object_json)
{
	struct buf b;
	char *s;

	buf_init(&b, 0);
	buf_printf(&b,
		   "{\"id\":\"%s\",\"object\":\"event\",\"api_version\":\"2024-06-20\",\"created\":%" PRId64
		   ",\"type\":\"%s\",\"livemode\":true,\"pending_webhooks\":1,"
		   "\"request\":{\"id\":null,\"idempotency_key\":null},\"data\":{\"object\":%s}}",
		   event_id, hn_now_s(), type, object_json);
	s = buf_take(&b, NULL);
	buf_finish(&b);
	return s;
}

int hn_post_stripe(struct daemon *d, const char *provider, const char *secret, const char *body, struct hres *ret)
{
	char url[256];
	char *sig = hn_stripe_signature(secret, hn_now_s(), body, strlen(body));
	char *hdr;
	const char *headers[3];
	int rc;

	if (sig == NULL) {
		return -1;
	}
	hdr = malloc(strlen(sig) + 32);
	if (hdr == NULL) {
		free(sig);
		return -1;
	}
	snprintf(hdr, strlen(sig) + 32, "Stripe-Signature: %s", sig);
	headers[0] = hdr;
	headers[1] = "Content-Type: application/json; charset=utf-8";
	headers[2] = NULL;
	snprintf(url, sizeof(url), "%s/hooks/%s", d->dm_base, provider);
	rc = hn_http("POST", url, headers, body, strlen(body), ret);
	free(sig);
	free(hdr);
	return rc;
}

int hn_order_create(struct daemon *d, int64_t amount, const char *currency, char ret_id[64])
{
	char amount_s[32];
	const char *args[] = {"order", "create", "--amount", amount_s, "--currency", currency, NULL};
	char *out = NULL;
	int rc;

	snprintf(amount_s, sizeof(amount_s), "%" PRId64, amount);
	rc = daemon_cli(d, 1, args, &out);
	if (rc != 0 || out == NULL || strncmp(out, "ord_", 4) != 0) {
		free(out);
		return -1;
	}
	out[strcspn(out, "\r\n")] = '\0';
	snprintf(ret_id, 64, "%s", out);
	free(out);
	return 0;
}

int hn_sqlite_start(struct hn_sqlite *q, const char *db_path, const char *sql)
{
	char line[256];
	FILE *in = NULL;
	FILE *out = NULL;
	int to[2] = {-1, -1};
	int from[2] = {-1, -1};

	memset(q, 0, sizeof(*q));
	if (pipe(to) < 0 || pipe(from) < 0) {
		goto fail;
	}
	q->hq_pid = fork();
	if (q->hq_pid < 0) {
		goto fail;
	}
	if (q->hq_pid == 0) {
		dup2(to[0], STDIN_FILENO);
		dup2(from[1], STDOUT_FILENO);
		close(to[0]);
		close(to[1]);
		close(from[0]);
		close(from[1]);
		execlp("sqlite3", "sqlite3", "-batch", db_path, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	in = fdopen(to[1], "w");
	out = fdopen(from[0], "r");
	if (in == NULL || out == NULL) {
		goto fail;
	}
	q->hq_in = in;
	q->hq_out = out;
	fprintf(in, ".timeout 5000\n%s\nSELECT 'ready';\n", sql);
	fflush(in);
	if (fgets(line, sizeof(line), out) == NULL || strcmp(line, "ready\n") != 0) {
		hn_sqlite_finish(q, "");
		return -1;
	}
	return 0;
fail:
	fprintf(stderr, "harness: cannot start sqlite3: %s\n", strerror(errno));
	return -1;
}

int hn_sqlite_finish(struct hn_sqlite *q, const char *sql)
{
	int status = 0;

	if (q->hq_in != NULL) {
		fprintf(q->hq_in, "%s\n.quit\n", sql);
		fclose(q->hq_in);
	}
	if (q->hq_out != NULL) {
		fclose(q->hq_out);
	}
	q->hq_in = NULL;
	q->hq_out = NULL;
	if (q->hq_pid <= 0 || waitpid(q->hq_pid, &status, 0) != q->hq_pid) {
		return -1;
	}
	q->hq_pid = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

#define HN_MIGRATIONS_MAX 64

static int hn_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int hn_migrations_before(const char *dir, const char *name, struct buf *sql)
{
	char *names[HN_MIGRATIONS_MAX];
	struct dirent *de;
	size_t n = 0;
	size_t i;
	int version = -1;
	DIR *d = opendir(dir);

	if (d == NULL) {
		return -1;
	}
	while ((de = readdir(d)) != NULL && n < HN_MIGRATIONS_MAX) {
		size_t len = strlen(de->d_name);

		if (len > 4 && strcmp(de->d_name + len - 4, ".sql") == 0 && de->d_name[0] >= '0' &&
		    de->d_name[0] <= '9') {
			names[n++] = strdup(de->d_name);
		}
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), hn_name_cmp);
	for (i = 0; i < n; i++) {
		char path[1024];
		char chunk[4096];
		size_t got;
		FILE *f;

		if (strstr(names[i], name) != NULL) {
			version = (int)i;
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "rb");
		if (f == NULL) {
			break;
		}
		while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
			buf_append(sql, chunk, got);
		}
		buf_printf(sql, "\n;\n");
		fclose(f);
	}
	for (i = 0; i < n; i++) {
		free(names[i]);
	}
	return version;
}

int hn_db_build_before(struct daemon *d, const char *migration,
                       void (*rows)(struct buf *sql, int pg, void *arg), void *arg)
{
	const char *root = getenv("IDEMHOOK_SOURCE_ROOT");
	int pg = d->dm_pg_db[0] != '\0';
	char dir[700];
	char path[800];
	char cmd[2048];
	struct buf sql;
	int version;
	int rc = -1;
	FILE *f;

	if (root == NULL) {
		return -1;
	}
	buf_init(&sql, 0);
	snprintf(dir, sizeof(dir), "%s/migrations%s", root, pg ? "/postgresql" : "");
	if (!pg) {
		buf_printf(&sql, "PRAGMA foreign_keys = ON;\nBEGIN;\n");
	}
	version = hn_migrations_before(dir, migration, &sql);
	if (version <= 0) {
		goto out;
	}
	if (pg) {
		buf_printf(&sql,
		           "CREATE TABLE idemhook_schema (version BIGINT PRIMARY KEY, name TEXT "
		           "NOT NULL, applied_at BIGINT NOT NULL);\n"
		           "INSERT INTO idemhook_schema (version, name, applied_at)"
		           " SELECT v, 'before', 0 FROM generate_series(1, %d) AS v;\n",
		           version);
		rows(&sql, 1, arg);
		rc = pgserver_psql(pgserver_shared(NULL), d->dm_pg_db, sql.buf_data, NULL) == 0 ? 0 : -1;
		goto out;
	}
	buf_printf(&sql, "PRAGMA user_version = %d;\n", version);
	rows(&sql, 0, arg);
	buf_printf(&sql, "COMMIT;\n");
	snprintf(path, sizeof(path), "%s/previous.sql", d->dm_dir);
	f = fopen(path, "w");
	if (f == NULL) {
		goto out;
	}
	fwrite(sql.buf_data, 1, sql.buf_len, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "sqlite3 -bail '%s' < '%s' > /dev/null 2>&1", d->dm_db, path);
	rc = system(cmd);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) == 127) {
		rc = 1; /* no sqlite3 command: contrib/install-deps.sh installs it */
	} else {
		rc = WEXITSTATUS(rc) == 0 ? 0 : -1;
	}
out:
	buf_finish(&sql);
	return rc;
}
