/* test_health.c: /readyz and systemd hear the truth. A database write-locked
 * by another process turns /readyz to 503 within a second (and STATUS= says
 * why) and back to 200 once released; a pending migration does too; the
 * watchdog keeps coming while a reload waits for an idle connection; every
 * thread of the daemon but the main one has a name of its own (top -H,
 * perf). */
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <dirent.h>

#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"

#define T_SECRET "whsec_health_test_secret"
#define T_INI                                                                                      \
	"[store]\nbusy_timeout_ms = 300\n\n"                                                       \
	"[provider stripe]\ntype = stripe\nsecret = " T_SECRET "\n"
#define T_WATCHDOG_USEC "400000" /* WATCHDOG=1 every 200 ms */
#define T_NOTIFY_MAX 256

/* ---- systemd's notify socket, with the arrival time of each message ---- */

struct t_msg {
	int64_t tm_ms;
	char tm_text[256];
};

struct t_notify {
	char tn_dir[64];
	char tn_path[128];
	int tn_fd;
	struct t_msg tn_msgs[T_NOTIFY_MAX];
	size_t tn_n;
};

static void t_notify_open(struct t_notify *n)
{
	struct sockaddr_un sa;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 20 * 1000};

	memset(n, 0, sizeof(*n));
	snprintf(n->tn_dir, sizeof(n->tn_dir), "/tmp/idemhook-health.XXXXXX");
	assert_non_null(mkdtemp(n->tn_dir));
	snprintf(n->tn_path, sizeof(n->tn_path), "%s/notify", n->tn_dir);
	n->tn_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(n->tn_fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, n->tn_path, strlen(n->tn_path) + 1);
	assert_int_equal(bind(n->tn_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(setsockopt(n->tn_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static void t_notify_close(struct t_notify *n)
{
	close(n->tn_fd);
	unlink(n->tn_path);
	rmdir(n->tn_dir);
}

/* Reads whatever arrives for ms milliseconds (the oldest messages give way
 * when the list is full). */
static void t_notify_read(struct t_notify *n, int ms)
{
	int64_t until = hn_now_ms() + ms;

	while (hn_now_ms() < until) {
		char buf[sizeof(n->tn_msgs[0].tm_text)];
		ssize_t got = recv(n->tn_fd, buf, sizeof(buf) - 1, 0);

		if (got <= 0) {
			continue;
		}
		if (n->tn_n == T_NOTIFY_MAX) {
			memmove(&n->tn_msgs[0], &n->tn_msgs[1], sizeof(n->tn_msgs[0]) * (T_NOTIFY_MAX - 1));
			n->tn_n--;
		}
		buf[got] = '\0';
		n->tn_msgs[n->tn_n].tm_ms = hn_now_ms();
		memcpy(n->tn_msgs[n->tn_n].tm_text, buf, (size_t)got + 1);
		n->tn_n++;
	}
}

/* Reads until a message holding want arrives (up to ms). Returns 1 or 0. */
static int t_notify_until(struct t_notify *n, const char *want, int ms)
{
	int64_t until = hn_now_ms() + ms;
	size_t seen = 0;

	for (;;) {
		for (; seen < n->tn_n; seen++) {
			if (strstr(n->tn_msgs[seen].tm_text, want) != NULL) {
				return 1;
			}
		}
		if (hn_now_ms() >= until) {
			return 0;
		}
		t_notify_read(n, 20);
		if (seen > n->tn_n) {
			seen = n->tn_n;
		}
	}
}

/* ---- helpers ---- */

static long t_readyz(struct daemon *d, char *body, size_t size)
{
	struct hres r;
	char url[256];
	long status;

	snprintf(url, sizeof(url), "%s/readyz", d->dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	status = r.hs_status;
	if (body != NULL) {
		snprintf(body, size, "%s", r.hs_body != NULL ? r.hs_body : "");
	}
	hres_finish(&r);
	return status;
}

/* Polls /readyz until it answers want (with a body holding says, when not
 * NULL); returns ms waited, or -1 after ms. */
static int64_t t_readyz_until(struct daemon *d, long want, const char *says, int ms, char *body,
                              size_t size)
{
	int64_t start = hn_now_ms();

	for (;;) {
		if (t_readyz(d, body, size) == want && (says == NULL || strstr(body, says) != NULL)) {
			return hn_now_ms() - start;
		}
		if (hn_now_ms() - start > ms) {
			return -1;
		}
		usleep(20 * 1000);
	}
}

static void t_start_with_notify(struct daemon *d, struct t_notify *n)
{
	t_notify_open(n);
	assert_int_equal(daemon_init(d, T_INI), 0);
	setenv("NOTIFY_SOCKET", n->tn_path, 1);
	setenv("WATCHDOG_USEC", T_WATCHDOG_USEC, 1);
	assert_int_equal(daemon_start(d), 0);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	assert_true(t_notify_until(n, "READY=1", 10000));
}

/* How many times text is in the daemon's log. */
static int t_log_count(struct daemon *d, const char *text)
{
	char *log = hn_read_file(d->dm_log);
	const char *p = log;
	int n = 0;

	assert_non_null(log);
	while ((p = strstr(p, text)) != NULL) {
		n++;
		p += strlen(text);
	}
	fprintf(stderr, "health: %d lines with \"%s\" in the log\n", n, text);
	free(log);
	return n;
}

/* ---- tests ---- */

static void test_a_write_locked_database_turns_readyz_to_503_within_a_second_and_back(void **state)
{
	struct hn_sqlite l;
	struct t_notify n;
	struct daemon d;
	struct hres r;
	char body[512];
	char url[256];
	char *evt;
	int64_t waited;

	(void)state;
	t_start_with_notify(&d, &n);
	assert_int_equal(t_readyz(&d, body, sizeof(body)), 200);
	assert_string_equal(body, "ready\n");

	assert_int_equal(hn_sqlite_start(&l, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	waited = t_readyz_until(&d, 503, NULL, 1000, body, sizeof(body));
	fprintf(stderr, "health: /readyz answered 503 %lld ms after the lock was taken\n",
	        (long long)waited);
	assert_true(waited >= 0);
	assert_non_null(strstr(body, "write-locked"));
	/* systemd is told why */
	assert_true(t_notify_until(&n, "STATUS=not ready: the database is write-locked", 2000));
	/* the process itself is fine: /healthz says so */
	snprintf(url, sizeof(url), "%s/healthz", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	/* what /readyz foretold: a callback cannot commit */
	evt = hn_stripe_event("evt_health_locked", "customer.created",
	                      "{\"id\":\"cus_h\",\"object\":\"customer\"}");
	assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET, evt, &r), 0);
	assert_int_equal(r.hs_status, 503);
	hres_finish(&r);
	assert_int_equal(t_readyz(&d, NULL, 0), 503);

	assert_int_equal(hn_sqlite_finish(&l, "ROLLBACK;"), 0);
	assert_true(t_readyz_until(&d, 200, NULL, 2000, body, sizeof(body)) >= 0);
	assert_true(t_notify_until(&n, "STATUS=serving", 2000));

	assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET, evt, &r), 0);
	assert_int_equal(r.hs_status, 200);
	hres_finish(&r);
	free(evt);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	t_notify_close(&n);
}

/* A callback whose commit waits on the lock: the writer's wait grows at
 * every tick, and the log says it once, not each tick's figure of it. */
static void test_a_writer_waiting_on_a_lock_is_logged_once(void **state)
{
	struct hn_sqlite l;
	struct daemon d;
	struct hres r;
	char *evt;

	(void)state;
	/* a lock waited on for 4 s: the health ticks see the wait grow */
	assert_int_equal(daemon_init(&d,
	                             "[store]\nbusy_timeout_ms = 4000\n\n"
	                             "[provider stripe]\ntype = stripe\nsecret = " T_SECRET "\n"),
	                 0);
	assert_int_equal(daemon_start(&d), 0);
	evt = hn_stripe_event("evt_health_waits", "customer.created",
	                      "{\"id\":\"cus_w\",\"object\":\"customer\"}");
	assert_int_equal(hn_sqlite_start(&l, d.dm_db, "BEGIN IMMEDIATE;"), 0);
	/* sent at once, before readiness turns: its batch waits on the lock */
	assert_int_equal(hn_post_stripe(&d, "stripe", T_SECRET, evt, &r), 0);
	assert_int_equal(r.hs_status, 503);
	hres_finish(&r);
	assert_int_equal(daemon_log_wait(&d, "the writer has waited", 0), 0);
	assert_int_equal(hn_sqlite_finish(&l, "ROLLBACK;"), 0);
	assert_true(t_readyz_until(&d, 200, NULL, 2000, NULL, 0) >= 0);
	assert_true(t_log_count(&d, "health: not ready: ") <= 2);
	free(evt);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

static void test_a_pending_or_newer_schema_turns_readyz_to_503(void **state)
{
	struct hn_sqlite l;
	struct daemon d;
	char body[512];
	char sql[64];
	int64_t version;

	(void)state;
	fx_daemon_start(&d, T_INI);
	assert_int_equal(t_readyz(&d, NULL, 0), 200);
	version = hn_db_int(d.dm_db, "PRAGMA user_version");
	assert_true(version > 1);

	/* an older schema, as if this binary were newer than the database */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld;", (long long)version - 1);
	assert_int_equal(hn_sqlite_start(&l, d.dm_db, sql), 0);
	assert_int_equal(hn_sqlite_finish(&l, ""), 0);
	assert_true(t_readyz_until(&d, 503, "migrations pending", 2000, body, sizeof(body)) >= 0);
	/* a newer one, as after `idemhook migrate` of a newer release */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld;", (long long)version + 1);
	assert_int_equal(hn_sqlite_start(&l, d.dm_db, sql), 0);
	assert_int_equal(hn_sqlite_finish(&l, ""), 0);
	assert_true(t_readyz_until(&d, 503, "newer than this idemhook", 2000, body, sizeof(body)) >=
	            0);

	snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld;", (long long)version);
	assert_int_equal(hn_sqlite_start(&l, d.dm_db, sql), 0);
	assert_int_equal(hn_sqlite_finish(&l, ""), 0);
	assert_true(t_readyz_until(&d, 200, NULL, 2000, body, sizeof(body)) >= 0);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

/* A connection that is open and says nothing (a client that connected
 * ahead of time, or a proxy's idle pool): the old listener waits for it. */
static int t_idle_connection(struct daemon *d)
{
	struct sockaddr_in sa;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)d->dm_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_the_watchdog_keeps_coming_while_a_reload_waits_for_an_idle_connection(void **state)
{
	struct t_notify n;
	struct daemon d;
	int64_t sighup_ms;
	int64_t last = 0;
	int64_t gap = 0;
	size_t from;
	size_t i;
	int pings = 0;
	int fd;

	(void)state;
	t_start_with_notify(&d, &n);
	fd = t_idle_connection(&d);
	from = n.tn_n;
	sighup_ms = hn_now_ms();
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	t_notify_read(&n, 3000);
	last = sighup_ms;
	for (i = from; i < n.tn_n; i++) {
		if (strstr(n.tn_msgs[i].tm_text, "WATCHDOG=1") == NULL) {
			continue;
		}
		pings++;
		if (n.tn_msgs[i].tm_ms - last > gap) {
			gap = n.tn_msgs[i].tm_ms - last;
		}
		last = n.tn_msgs[i].tm_ms;
	}
	if (hn_now_ms() - last > gap) {
		gap = hn_now_ms() - last;
	}
	fprintf(stderr, "health: %d WATCHDOG=1 in the 3 s after SIGHUP, longest gap %lld ms\n", pings,
	        (long long)gap);
	/* every 200 ms asked; a gap of 1.5 s is a starved watchdog */
	assert_true(gap < 1500);
	close(fd);
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
	t_notify_close(&n);
}

/* The names of pid's threads, each followed by ",", into names; returns
 * how many threads other than the main one still carry the program's. */
static int t_thread_names(int pid, char *names, size_t size)
{
	char path[320];
	struct dirent *de;
	size_t len = 0;
	int unnamed = 0;
	DIR *dir;

	names[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	assert_non_null(dir);
	while ((de = readdir(dir)) != NULL) {
		char comm[64] = "";
		FILE *f;

		if (de->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", pid, de->d_name);
		f = fopen(path, "r");
		if (f == NULL) {
			continue; /* the thread ended meanwhile */
		}
		if (fgets(comm, sizeof(comm), f) != NULL) {
			comm[strcspn(comm, "\n")] = '\0';
		}
		fclose(f);
		if (strcmp(comm, "idemhook") == 0 && atoi(de->d_name) != pid) {
			unnamed++;
		}
		len += (size_t)snprintf(names + len, len < size ? size - len : 0, "%s,", comm);
	}
	closedir(dir);
	return unnamed;
}

/* Every thread of a serving daemon says what it is in top -H and perf: the
 * main thread keeps the program's name, and no other thread does (a thread
 * left unnamed shows as "idemhook" beside it). A thread names itself as it
 * starts, so one just created may not have yet (the sanitizer build's
 * health thread was seen so): the names are read again for up to 5 s. */
static void test_every_thread_but_the_main_one_has_a_name_of_its_own(void **state)
{
	static const char *const expected[] = {"store-writer", "store-ckpt", "gc",
	                                       "health",       "fetch",      "log-flusher",
	                                       "http-accept"};
	char names[4096];
	struct daemon d;
	size_t i;
	int unnamed;
	int tries;

	(void)state;
	fx_daemon_start(&d, T_INI);
	for (tries = 0;; tries++) {
		int missing = 0;

		unnamed = t_thread_names((int)d.dm_pid, names, sizeof(names));
		for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
			char want[32];

			snprintf(want, sizeof(want), "%s,", expected[i]);
			missing += strstr(names, want) == NULL;
		}
		if ((unnamed == 0 && missing == 0) || tries == 100) {
			break;
		}
		usleep(50 * 1000);
	}
	if (unnamed != 0) {
		fail_msg("%d thread(s) left unnamed: %s", unnamed, names);
	}
	for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		char want[32];

		snprintf(want, sizeof(want), "%s,", expected[i]);
		if (strstr(names, want) == NULL) {
			fail_msg("no thread named %s: %s", expected[i], names);
		}
	}
	assert_int_equal(daemon_term(&d, 30), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_write_locked_database_turns_readyz_to_503_within_a_second_and_back),
	        cmocka_unit_test(test_a_writer_waiting_on_a_lock_is_logged_once),
	        cmocka_unit_test(test_a_pending_or_newer_schema_turns_readyz_to_503),
	        cmocka_unit_test(
	                test_the_watchdog_keeps_coming_while_a_reload_waits_for_an_idle_connection),
	        cmocka_unit_test(test_every_thread_but_the_main_one_has_a_name_of_its_own),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
