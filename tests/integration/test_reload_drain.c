/* test_reload_drain.c: reloads and stops answer every request: keep-alive
 * clients posting signed callbacks through 20 reloads get an answer to
 * each, and every committed event was answered; a drain finishes what was
 * under way, refuses new connections at once, says not ready, exits 0;
 * 120 reloads back to back and a stop under a pool of clients on new and
 * kept connections never abort the daemon (libmicrohttpd's quiesce did),
 * never break an answer, and every 200 committed. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "rawhttp.h"
#include "fixtures.h"

#define RELOADS 20
/* Half check the connection before reusing it, half do not; half post back
 * to back, half pause up to 300 ms between requests (their connections are
 * often idle when a reload comes). */
#define CLIENTS 4
#define STRESS_RELOADS 120
#define STRESS_CLIENTS 24 /* even ones keep their connection alive, odd ones open one per request  \
	                   */
/* A pool of many threads: each one is a thread that a quiesce and the
 * thread's own loop could both take the listening socket out of. */
#define STRESS_INI FX_STRIPE_INI "\n[server]\nthreads = 16\n"
#define SENT_MAX 100000

static int log_count(struct daemon *d, const char *needle)
{
	FILE *f = fopen(d->dm_log, "r");
	char line[4096];
	int n = 0;

	if (f == NULL) {
		return 0;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		n += strstr(line, needle) != NULL;
	}
	fclose(f);
	return n;
}

static void wait_log(struct daemon *d, const char *needle, int count)
{
	int i;

	for (i = 0; i < 1000 && log_count(d, needle) < count; i++) {
		usleep(20 * 1000);
	}
	assert_true(log_count(d, needle) >= count);
}

/* A signed Stripe callback for event id, as raw bytes (malloc'd); with
 * close_after, it asks for the connection to be closed after it. */
static char *signed_callback_close(const char *event_id, int close_after, size_t *ret_len)
{
	char *body = hn_stripe_event(event_id, "customer.created",
	                             "{\"id\":\"cus_1\",\"object\":\"customer\"}");
	char *sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
	struct buf b;
	char *s;

	buf_init(&b, 0);
	buf_printf(&b,
	           "POST /hooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
	           "Content-Type: application/json\r\nStripe-Signature: %s\r\n"
	           "Content-Length: %zu\r\n\r\n%s",
	           close_after ? "Connection: close\r\n" : "", sig, strlen(body), body);
	s = buf_take(&b, ret_len);
	buf_finish(&b);
	free(body);
	free(sig);
	return s;
}

static char *signed_callback(const char *event_id, size_t *ret_len)
{
	return signed_callback_close(event_id, 0, ret_len);
}

struct poster {
	struct daemon *po_daemon;
	int po_id;
	int po_check; /* looks whether the server closed a kept connection before reusing it */
	int po_pause; /* waits up to 300 ms between requests */
	int po_fresh; /* a new connection for every request */
	atomic_int *po_stop;
	/* results */
	char (*po_answered)[48]; /* event ids answered 200 */
	size_t po_n_answered;
	size_t po_closed; /* sent, and the connection ended cleanly without an answer */
	size_t po_broken; /* sent, and a partial answer, an error or no answer in time */
	size_t po_other;  /* answered, but not 200 */
	size_t po_reconnects;
	char po_first_unanswered[48];
};

static void *poster_run(void *arg)
{
	struct poster *po = arg;
	int fd = -1;
	unsigned seq = 0;
	unsigned pause_seed = (unsigned)po->po_id;

	while (!atomic_load(po->po_stop) && po->po_n_answered < SENT_MAX) {
		char id[48];
		struct rh_response r;
		size_t len;
		char *req;
		int rc;

		if (po->po_pause) {
			usleep((useconds_t)(rand_r(&pause_seed) % 300) * 1000);
		}
		if (fd >= 0 && po->po_check && rh_closed_now(fd)) {
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			fd = rh_connect(NULL, po->po_daemon->dm_port);
			po->po_reconnects++;
			if (fd < 0) {
				usleep(5 * 1000); /* refused: the daemon is stopping */
				continue;
			}
		}
		snprintf(id, sizeof(id), "evt_c%d_%u", po->po_id, seq++);
		req = signed_callback_close(id, po->po_fresh, &len);
		rc = rh_send(fd, req, len) == 0 ? rh_read_response(fd, 30000, &r) : 0;
		free(req);
		if (rc != 1) {
			/* Sent, and the connection ended without an answer. */
			if (po->po_closed + po->po_broken == 0) {
				snprintf(po->po_first_unanswered, sizeof(po->po_first_unanswered),
				         "%s", id);
			}
			*(rc == 0 ? &po->po_closed : &po->po_broken) += 1;
			close(fd);
			fd = -1;
			continue;
		}
		if (r.rr_status == 200) {
			snprintf(po->po_answered[po->po_n_answered++], 48, "%s", id);
		} else {
			po->po_other++;
		}
		if (r.rr_close || po->po_fresh) {
			close(fd);
			fd = -1;
		}
		rh_response_finish(&r);
	}
	if (fd >= 0) {
		close(fd);
	}
	return NULL;
}

static int answered_has(const struct poster *po, size_t n, const char *id)
{
	size_t c;
	size_t i;

	for (c = 0; c < n; c++) {
		for (i = 0; i < po[c].po_n_answered; i++) {
			if (strcmp(po[c].po_answered[i], id) == 0) {
				return 1;
			}
		}
	}
	return 0;
}

/* Every event committed was answered 200, and every 200 committed. */
static void assert_answers_are_the_commits(struct daemon *d, const struct poster *po, size_t n)
{
	size_t answered = 0;
	size_t committed = 0;
	char *keys;
	char *line;
	char *next;
	size_t i;

	for (i = 0; i < n; i++) {
		answered += po[i].po_n_answered;
	}
	keys = hn_db_dump(d->dm_db,
	                  "SELECT idem_key FROM idempotency_records WHERE scope = 'stripe'");
	assert_non_null(keys);
	for (line = keys; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL) {
			*next++ = '\0';
		}
		assert_true(answered_has(po, n, line));
		committed++;
	}
	free(keys);
	print_message("%zu answered, %zu committed\n", answered, committed);
	assert_int_equal(committed, answered);
}

/* Starts n posting clients on d, client i set up by how(i, &po[i]). */
static void posters_start(struct daemon *d, struct poster *po, pthread_t *th, size_t n,
                          atomic_int *stop, void (*how)(size_t i, struct poster *po))
{
	size_t i;

	atomic_init(stop, 0);
	for (i = 0; i < n; i++) {
		memset(&po[i], 0, sizeof(po[i]));
		po[i].po_daemon = d;
		po[i].po_id = (int)i;
		po[i].po_stop = stop;
		how(i, &po[i]);
		po[i].po_answered = calloc(SENT_MAX, 48);
		assert_non_null(po[i].po_answered);
		assert_int_equal(pthread_create(&th[i], NULL, poster_run, &po[i]), 0);
	}
}

/* Stops and joins the clients, and says what each saw. */
static void posters_stop(struct poster *po, pthread_t *th, size_t n, atomic_int *stop)
{
	size_t i;

	atomic_store(stop, 1);
	for (i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		print_message("client %zu (%s, %s, %s): %zu answered, %zu other, %zu closed and "
		              "%zu broken unanswered (first %s), %zu connections\n",
		              i, po[i].po_fresh ? "new connections" : "keep-alive",
		              po[i].po_check ? "checks" : "does not check",
		              po[i].po_pause ? "pauses" : "back to back", po[i].po_n_answered,
		              po[i].po_other, po[i].po_closed, po[i].po_broken,
		              po[i].po_first_unanswered, po[i].po_reconnects);
	}
}

static void posters_free(struct poster *po, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(po[i].po_answered);
	}
}

static void drain_client(size_t i, struct poster *po)
{
	po->po_check = (int)(i % 2);
	po->po_pause = (int)(i / 2);
}

static void test_keep_alive_clients_get_every_answer_through_20_reloads(void **state)
{
	struct daemon d;
	struct poster po[CLIENTS];
	pthread_t th[CLIENTS];
	atomic_int stop;
	int i;

	fx_daemon_start(&d, FX_STRIPE_INI);
	posters_start(&d, po, th, CLIENTS, &stop, drain_client);
	for (i = 0; i < RELOADS; i++) {
		usleep(150 * 1000);
		assert_int_equal(daemon_signal(&d, SIGHUP), 0);
		wait_log(&d, "SIGHUP: configuration", i + 1);
	}
	usleep(200 * 1000);
	posters_stop(po, th, CLIENTS, &stop);
	for (i = 0; i < CLIENTS; i++) {
		assert_int_equal(po[i].po_closed + po[i].po_broken, 0);
		assert_int_equal(po[i].po_other, 0);
		assert_true(po[i].po_n_answered > 0);
	}
	assert_answers_are_the_commits(&d, po, CLIENTS);
	assert_true(log_count(&d, "drained in") >= 1);
	assert_int_equal(daemon_term(&d, 60), 0);
	/* Each callback's configuration reference, handed from the route to
	 * its deferred answer, released once: none left, none twice. */
	assert_int_equal(log_count(&d, "a configuration was still held at exit"), 0);
	assert_int_equal(log_count(&d, "a configuration released that nobody holds"), 0);
	posters_free(po, CLIENTS);
	daemon_finish(&d);
}

static void stress_client(size_t i, struct poster *po)
{
	po->po_fresh = (int)(i % 2);
	po->po_check = 1;
}

static void test_reloads_back_to_back_and_a_stop_under_load_never_abort(void **state)
{
	struct daemon d;
	struct poster po[STRESS_CLIENTS];
	pthread_t th[STRESS_CLIENTS];
	atomic_int stop;
	int status;
	int i;

	fx_daemon_start(&d, STRESS_INI);
	posters_start(&d, po, th, STRESS_CLIENTS, &stop, stress_client);
	usleep(200 * 1000);
	/* Each reload as soon as the previous one is in: several generations
	 * drain at once while the newest serves. */
	for (i = 0; i < STRESS_RELOADS; i++) {
		int j;

		assert_int_equal(daemon_signal(&d, SIGHUP), 0);
		for (j = 0; j < 1000 && log_count(&d, "SIGHUP: configuration") < i + 1; j++) {
			usleep(5 * 1000);
		}
		assert_true(log_count(&d, "SIGHUP: configuration") >= i + 1);
	}
	/* The stop comes while the clients still send. */
	status = daemon_term(&d, 60);
	posters_stop(po, th, STRESS_CLIENTS, &stop);
	if (status != 0) {
		print_message("the daemon's exit status: %d; its log: %s\n", status, d.dm_log);
	}
	assert_int_equal(log_count(&d, "Failed to remove listen FD"), 0);
	assert_int_equal(log_count(&d, "a configuration was still held at exit"), 0);
	assert_int_equal(log_count(&d, "a configuration released that nobody holds"), 0);
	assert_int_equal(status, 0);
	for (i = 0; i < STRESS_CLIENTS; i++) {
		assert_int_equal(po[i].po_broken, 0);
		assert_int_equal(po[i].po_other, 0);
		assert_true(po[i].po_n_answered > 0);
	}
	assert_answers_are_the_commits(&d, po, STRESS_CLIENTS);
	posters_free(po, STRESS_CLIENTS);
	daemon_finish(&d);
}

static void test_a_drain_finishes_requests_refuses_new_connections_and_is_not_ready(void **state)
{
	struct daemon d;
	char url[128];
	struct hres h;
	struct rh_response r;
	size_t len_a;
	size_t len_b;
	char *a = signed_callback("evt_drain_kept", &len_a);
	char *b = signed_callback("evt_drain_slow", &len_b);
	size_t head_b = strstr(b, "\r\n\r\n") + 4 - b;
	int kept;
	int slow;
	int fresh = -1;
	int i;

	/* No body floor: the half-sent body waits as long as the test takes. */
	fx_daemon_start(&d, FX_STRIPE_INI "\n[server]\nbody_min_rate = 1\n");
	kept = rh_connect(NULL, d.dm_port);
	slow = rh_connect(NULL, d.dm_port);
	assert_true(kept >= 0 && slow >= 0);
	/* kept: one request done, the connection kept; slow: its head and
	 * half its body sent. */
	{
		char *warm = signed_callback("evt_drain_warm", &len_a);

		assert_int_equal(rh_send(kept, warm, len_a), 0);
		assert_int_equal(rh_read_response(kept, 10000, &r), 1);
		assert_int_equal(r.rr_status, 200);
		assert_false(r.rr_close);
		rh_response_finish(&r);
		free(warm);
	}
	assert_int_equal(rh_send(slow, b, head_b + 10), 0);
	usleep(200 * 1000);

	assert_int_equal(daemon_signal(&d, SIGTERM), 0);
	wait_log(&d, "SIGTERM: stopping", 1);
	/* New connections are refused at once (not queued by the kernel and
	 * reset later): a proxy retries elsewhere. */
	for (i = 0; i < 200; i++) {
		fresh = rh_connect(NULL, d.dm_port);
		if (fresh < 0 && errno == ECONNREFUSED) {
			break;
		}
		/* Connected, or reset while the socket was being closed. */
		if (fresh >= 0) {
			close(fresh);
		}
		usleep(10 * 1000);
	}
	assert_true(fresh < 0);
	assert_int_equal(errno, ECONNREFUSED);
	/* The kept connection's next request is answered, with Connection: close. */
	assert_int_equal(rh_send(kept, a, len_a), 0);
	assert_int_equal(rh_read_response(kept, 10000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	assert_true(r.rr_close);
	rh_response_finish(&r);
	/* The admin listener still answers, and says not ready. */
	snprintf(url, sizeof(url), "%s/readyz", d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &h), 0);
	assert_int_equal(h.hs_status, 503);
	assert_non_null(strstr(h.hs_body, "draining"));
	hres_finish(&h);
	/* The request under way finishes and is answered. */
	assert_int_equal(rh_send(slow, b + head_b + 10, len_b - head_b - 10), 0);
	assert_int_equal(rh_read_response(slow, 10000, &r), 1);
	assert_int_equal(r.rr_status, 200);
	assert_true(r.rr_close);
	rh_response_finish(&r);
	close(kept);
	close(slow);
	assert_int_equal(daemon_term(&d, 60), 0);
	assert_true(log_count(&d, "drained in") >= 1);
	/* All three committed, each once. */
	assert_int_equal(
	        hn_db_int(d.dm_db,
	                  "SELECT count(*) FROM idempotency_records WHERE scope = 'stripe' AND "
	                  "idem_key IN ('evt_drain_warm', 'evt_drain_kept', 'evt_drain_slow') "
	                  "AND status = 'done'"),
	        3);
	free(a);
	free(b);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_keep_alive_clients_get_every_answer_through_20_reloads),
	        cmocka_unit_test(
	                test_a_drain_finishes_requests_refuses_new_connections_and_is_not_ready),
	        cmocka_unit_test(test_reloads_back_to_back_and_a_stop_under_load_never_abort),
	};

	return cmocka_run_group_tests_name("reload and drain", tests, NULL, NULL);
}
