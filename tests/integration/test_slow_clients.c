/* test_slow_clients.c: slow clients do not starve callbacks: more
 * connections than FD_SETSIZE, trickling their heads from 20 addresses
 * (each under the per-address limit), and a signed callback from another
 * address is still answered; a trickling head is cut at its deadline. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "rawhttp.h"
#include "fixtures.h"

#define SLOW_SOURCES 20
#define SLOW_PER_SOURCE 55                      /* under the default per_ip_connections = 64 */
#define SLOW_N (SLOW_SOURCES * SLOW_PER_SOURCE) /* 1100 > FD_SETSIZE (1024) */

struct callback_job {
	struct daemon *cj_daemon;
	atomic_int cj_done;
	int cj_rc;
	struct rh_response cj_res;
};

/* A signed callback on a connection of its own from 127.0.0.1; unanswered
 * after 20 s (a hang, not a slow answer) it gives up. */
static void *callback_run(void *arg)
{
	struct callback_job *cj = arg;
	char *body = hn_stripe_event("evt_slow_clients", "customer.created",
	                             "{\"id\":\"cus_1\",\"object\":\"customer\"}");
	char *sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
	char req[4096];
	int len;

	len = snprintf(req, sizeof(req),
	               "POST /hooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	               "Content-Type: application/json\r\nStripe-Signature: %s\r\n"
	               "Content-Length: %zu\r\n\r\n%s",
	               sig, strlen(body), body);
	cj->cj_rc = rh_exchange(cj->cj_daemon->dm_port, req, (size_t)len, 20000, &cj->cj_res);
	free(body);
	free(sig);
	atomic_store(&cj->cj_done, 1);
	return NULL;
}

static void raise_file_limit(void)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_true(rl.rlim_cur > SLOW_N + 100);
}

static void
test_a_callback_is_answered_with_more_trickling_connections_than_fd_setsize(void **state)
{
	struct daemon d;
	struct callback_job cj;
	static int fds[SLOW_N];
	pthread_t t;
	int open_at_end = 0;
	int i;

	raise_file_limit();
	fx_daemon_start(&d, FX_STRIPE_INI "\n[server]\nper_ip_connections = 64\n");
	for (i = 0; i < SLOW_N; i++) {
		char source[32];

		snprintf(source, sizeof(source), "127.0.1.%d", 1 + i / SLOW_PER_SOURCE);
		fds[i] = rh_connect(source, d.dm_port);
		assert_true(fds[i] >= 0);
		assert_int_equal(rh_send(fds[i], "POST /hooks/stripe HTTP/1.1\r\n", 29), 0);
	}
	memset(&cj, 0, sizeof(cj));
	cj.cj_daemon = &d;
	atomic_init(&cj.cj_done, 0);
	assert_int_equal(pthread_create(&t, NULL, callback_run, &cj), 0);
	/* A header line a second from every slow connection until the
	 * callback has its answer (or gave up). */
	while (!atomic_load(&cj.cj_done)) {
		for (i = 0; i < SLOW_N; i++) {
			if (fds[i] >= 0 && rh_send(fds[i], "X-Slow: 1\r\n", 11) < 0) {
				close(fds[i]);
				fds[i] = -1;
			}
		}
		for (i = 0; i < 10 && !atomic_load(&cj.cj_done); i++) {
			usleep(100 * 1000);
		}
	}
	pthread_join(t, NULL);
	assert_int_equal(cj.cj_rc, 1);
	assert_int_equal(cj.cj_res.rr_status, 200);
	rh_response_finish(&cj.cj_res);
	for (i = 0; i < SLOW_N; i++) {
		if (fds[i] >= 0) {
			open_at_end += !rh_closed_now(fds[i]);
			close(fds[i]);
		}
	}
	print_message("%d of %d slow connections still open when the callback was answered\n",
	              open_at_end, SLOW_N);
	assert_true(open_at_end > 1024);
	assert_int_equal(daemon_term(&d, 60), 0);
	daemon_finish(&d);
}

static void test_a_trickling_head_is_cut_after_its_deadline(void **state)
{
	struct daemon d;
	int64_t end;
	char got[2048] = "";
	size_t have = 0;
	int closed = 0;
	int fd;

	fx_daemon_start(&d, FX_STRIPE_INI "\n[server]\nhead_timeout = 2s\n");
	fd = rh_connect(NULL, d.dm_port);
	assert_true(fd >= 0);
	assert_int_equal(rh_send(fd, "POST /hooks/stripe HTTP/1.1\r\n", 29), 0);
	/* A line every 200 ms: never idle, never done. */
	end = hn_now_ms() + 30000;
	while (!closed && hn_now_ms() < end) {
		ssize_t n;

		closed = rh_send(fd, "X-Slow: 1\r\n", 11) < 0;
		usleep(200 * 1000);
		n = recv(fd, got + have, sizeof(got) - 1 - have, MSG_DONTWAIT);
		if (n > 0) {
			have += (size_t)n;
			got[have] = '\0';
		}
		closed = closed || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
	}
	assert_true(closed);
	assert_non_null(strstr(got, "HTTP/1.1 408 "));
	assert_non_null(strstr(got, "urn:idemhook:problem:request_timeout"));
	close(fd);
	assert_int_equal(daemon_term(&d, 60), 0);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_callback_is_answered_with_more_trickling_connections_than_fd_setsize),
	        cmocka_unit_test(test_a_trickling_head_is_cut_after_its_deadline),
	};

	return cmocka_run_group_tests_name("slow clients", tests, NULL, NULL);
}
