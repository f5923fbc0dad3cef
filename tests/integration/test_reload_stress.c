/* test_reload_stress.c: reloads back to back, then a stop, under a pool of
 * clients that open new connections and keep others alive: the daemon never
 * aborts and exits 0, every request sent gets an answer or a clean close
 * (never a partial answer or a hang), and every committed event was
 * answered 200 and every 200 committed. */
#include <errno.h>
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
#include "fixtures.h"
#include "rawhttp.h"

#define RELOADS 120
#define CLIENTS 24 /* even ones keep their connection alive, odd ones open one per request */
#define SENT_MAX 100000
/* A pool of many threads: each one is a thread that a quiesce and the
 * thread's own loop could both take the listening socket out of. */
#define STRESS_INI FX_STRIPE_INI "\n[server]\nthreads = 16\n"

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

/* A signed Stripe callback for event id, as raw bytes (malloc'd). */
static char *signed_callback(const char *event_id, int close_after, size_t *ret_len)
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

struct client {
	struct daemon *cl_daemon;
	int cl_id;
	int cl_fresh; /* a new connection for every request */
	atomic_int *cl_stop;
	/* results */
	char (*cl_answered)[48]; /* event ids answered 200 */
	size_t cl_n_answered;
	size_t cl_closed; /* sent, and the connection ended cleanly without an answer */
	size_t cl_broken; /* a partial answer, an error or no answer in time */
	size_t cl_other;  /* answered, but not 200 */
	char cl_first_broken[48];
};

static void *client_run(void *arg)
{
	struct client *cl = arg;
	int fd = -1;
	unsigned seq = 0;

	while (!atomic_load(cl->cl_stop) && cl->cl_n_answered < SENT_MAX) {
		char id[48];
		struct rh_response r;
		size_t len;
		char *req;
		int rc;

		if (fd >= 0 && rh_closed_now(fd)) {
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			fd = rh_connect(NULL, cl->cl_daemon->dm_port);
			if (fd < 0) {
				usleep(5 * 1000); /* refused: the daemon is stopping */
				continue;
			}
		}
		snprintf(id, sizeof(id), "evt_s%d_%u", cl->cl_id, seq++);
		req = signed_callback(id, cl->cl_fresh, &len);
		rc = rh_send(fd, req, len) == 0 ? rh_read_response(fd, 30000, &r) : 0;
		free(req);
		if (rc == 0) {
			cl->cl_closed++;
		} else if (rc < 0) {
			if (cl->cl_broken++ == 0) {
				snprintf(cl->cl_first_broken, sizeof(cl->cl_first_broken), "%s",
				         id);
			}
		} else {
			if (r.rr_status == 200) {
				snprintf(cl->cl_answered[cl->cl_n_answered++], 48, "%s", id);
			} else {
				cl->cl_other++;
			}
			if (!r.rr_close && !cl->cl_fresh) {
				rh_response_finish(&r);
				continue;
			}
			rh_response_finish(&r);
		}
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		close(fd);
	}
	return NULL;
}

static int answered_has(const struct client *cl, size_t n, const char *id)
{
	size_t c;
	size_t i;

	for (c = 0; c < n; c++) {
		for (i = 0; i < cl[c].cl_n_answered; i++) {
			if (strcmp(cl[c].cl_answered[i], id) == 0) {
				return 1;
			}
		}
	}
	return 0;
}

static void test_reloads_back_to_back_and_a_stop_under_load_never_abort(void **state)
{
	struct daemon d;
	struct client cl[CLIENTS];
	pthread_t th[CLIENTS];
	atomic_int stop;
	size_t answered = 0;
	size_t committed = 0;
	char *keys;
	char *line;
	char *next;
	int status;
	int i;

	fx_daemon_start(&d, STRESS_INI);
	atomic_init(&stop, 0);
	for (i = 0; i < CLIENTS; i++) {
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].cl_daemon = &d;
		cl[i].cl_id = i;
		cl[i].cl_fresh = i % 2;
		cl[i].cl_stop = &stop;
		cl[i].cl_answered = calloc(SENT_MAX, 48);
		assert_non_null(cl[i].cl_answered);
		assert_int_equal(pthread_create(&th[i], NULL, client_run, &cl[i]), 0);
	}
	usleep(200 * 1000);
	/* Each reload as soon as the previous one is in: several generations
	 * drain at once while the newest serves. */
	for (i = 0; i < RELOADS; i++) {
		int j;

		assert_int_equal(daemon_signal(&d, SIGHUP), 0);
		for (j = 0; j < 1000 && log_count(&d, "SIGHUP: configuration") < i + 1; j++) {
			usleep(5 * 1000);
		}
		assert_true(log_count(&d, "SIGHUP: configuration") >= i + 1);
	}
	/* The stop comes while the clients still send. */
	status = daemon_term(&d, 60);
	atomic_store(&stop, 1);
	for (i = 0; i < CLIENTS; i++) {
		pthread_join(th[i], NULL);
		print_message("client %d (%s): %zu answered, %zu other, %zu closed unanswered, %zu "
		              "broken (first %s)\n",
		              i, cl[i].cl_fresh ? "new connections" : "keep-alive",
		              cl[i].cl_n_answered, cl[i].cl_other, cl[i].cl_closed, cl[i].cl_broken,
		              cl[i].cl_first_broken);
		answered += cl[i].cl_n_answered;
	}
	if (status != 0) {
		print_message("the daemon's exit status: %d; its log: %s\n", status, d.dm_log);
	}
	assert_int_equal(log_count(&d, "Failed to remove listen FD"), 0);
	assert_int_equal(status, 0);
	for (i = 0; i < CLIENTS; i++) {
		assert_int_equal(cl[i].cl_broken, 0);
		assert_int_equal(cl[i].cl_other, 0);
		assert_true(cl[i].cl_n_answered > 0);
	}
	/* Every committed event was answered 200, and every 200 committed. */
	keys = hn_db_dump(d.dm_db,
	                  "SELECT idem_key FROM idempotency_records WHERE scope = 'stripe'");
	assert_non_null(keys);
	for (line = keys; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL) {
			*next++ = '\0';
		}
		assert_true(answered_has(cl, CLIENTS, line));
		committed++;
	}
	free(keys);
	print_message("%zu answered, %zu committed, %d reloads\n", answered, committed, RELOADS);
	assert_int_equal(committed, answered);
	for (i = 0; i < CLIENTS; i++) {
		free(cl[i].cl_answered);
	}
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_reloads_back_to_back_and_a_stop_under_load_never_abort),
	};

	return cmocka_run_group_tests_name("reload stress", tests, NULL, NULL);
}
