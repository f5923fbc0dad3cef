/* test_rejects.c: bad input gets a clear answer and changes nothing. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "rawhttp.h"
#include "fixtures.h"

struct rejects {
	struct daemon rj_daemon;
	char rj_order[64];
	char rj_url[256];
};

/* Everything a request could have changed: business and idempotency rows. */
static char *rejects_snapshot(struct daemon *d)
{
	static const char *const tables[] = {
		"SELECT * FROM idempotency_records ORDER BY id",
		"SELECT * FROM events ORDER BY id",
		"SELECT * FROM orders ORDER BY id",
		"SELECT * FROM points_ledger ORDER BY id",
		"SELECT * FROM refunds ORDER BY id",
	};
	struct buf b;
	size_t i;
	char *s;

	buf_init(&b, 0);
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		char *part = hn_db_dump(d->dm_db, tables[i]);

		assert_non_null(part);
		buf_puts(&b, part);
		buf_puts(&b, "--\n");
		free(part);
	}
	s = buf_take(&b, NULL);
	buf_finish(&b);
	return s;
}

static int setup(void **state)
{
	struct rejects *rj = calloc(1, sizeof(*rj));
	struct hres r;
	char *body;

	if (rj == NULL ||
	    daemon_init(&rj->rj_daemon,
			FX_STRIPE_INI "\n[provider stripe-locked]\ntype = stripe\nsecret = " FX_STRIPE_SECRET
					"\nallow_from = 192.0.2.0/24, 2001:db8::/32\n") < 0 || daemon_start(&rj->rj_daemon) < 0 ||
	    hn_order_create(&rj->rj_daemon, 1999, "usd", rj->rj_order) < 0) {
		return -1;
	}
	/* One accepted callback, so the snapshot is not trivially empty. */
	body = fx_stripe_payment("evt_reject_base", rj->rj_order, 1999, "usd");
	if (hn_post_stripe(&rj->rj_daemon, "stripe", FX_STRIPE_SECRET, body, &r) < 0 || r.hs_status != 200) {
		return -1;
	}
	hres_finish(&r);
	free(body);
	snprintf(rj->rj_url, sizeof(rj->rj_url), "%s/hooks/stripe", rj->rj_daemon.dm_base);
	*state = rj;
	return 0;
}

static int teardown(void **state)
{
	struct rejects *rj = *state;

	daemon_finish(&rj->rj_daemon);
	free(rj);
	return 0;
}

/* Sends body with the given signature header (NULL: none) and checks the
 * status, the problem+json answer, and that nothing changed. */
static void expect_refused(struct rejects *rj, const char *sig_header, const char *body, size_t body_len,
			   long status)
{
	const char *headers[3] = {"Content-Type: application/json", sig_header, NULL};
	char *before = rejects_snapshot(&rj->rj_daemon);
	char *after;
	char *ct;
	struct hres r;

	assert_int_equal(hn_http("POST", rj->rj_url, headers, body, body_len, &r), 0);
	assert_int_equal(r.hs_status, status);
	ct = hres_header(&r, "Content-Type");
	assert_non_null(ct);
	assert_string_equal(ct, "application/problem+json");
	after = rejects_snapshot(&rj->rj_daemon);
	assert_string_equal(before, after);
	free(ct);
	free(before);
	free(after);
	hres_finish(&r);
}

static char *signed_header(const char *secret, int64_t t, const char *body)
{
	char *sig = hn_stripe_signature(secret, t, body, strlen(body));
	char *h = malloc(strlen(sig) + 32);

	snprintf(h, strlen(sig) + 32, "Stripe-Signature: %s", sig);
	free(sig);
	return h;
}

static void test_wrong_secret_is_refused_with_401_and_stores_nothing(void **state)
{
	struct rejects *rj = *state;
	char *body = fx_stripe_payment("evt_bad_sig", rj->rj_order, 1999, "usd");
	char *h = signed_header("whsec_not_the_secret", hn_now_s(), body);

	expect_refused(rj, h, body, strlen(body), 401);
	free(h);
	free(body);
}

static void test_body_changed_after_signing_is_refused_with_401(void **state)
{
	struct rejects *rj = *state;
	char *body = fx_stripe_payment("evt_tampered", rj->rj_order, 1999, "usd");
	char *h = signed_header(FX_STRIPE_SECRET, hn_now_s(), body);
	char *amount = strstr(body, "1999");

	amount[0] = '9'; /* one byte changed */
	expect_refused(rj, h, body, strlen(body), 401);
	free(h);
	free(body);
}

static void test_missing_signature_is_refused_with_400(void **state)
{
	struct rejects *rj = *state;
	char *body = fx_stripe_payment("evt_no_sig", rj->rj_order, 1999, "usd");

	expect_refused(rj, NULL, body, strlen(body), 400);
	free(body);
}

static void test_malformed_signature_header_is_refused_with_400(void **state)
{
	struct rejects *rj = *state;
	char *body = fx_stripe_payment("evt_garbled", rj->rj_order, 1999, "usd");

	expect_refused(rj, "Stripe-Signature: garbage-without-fields", body, strlen(body), 400);
	free(body);
}

static void test_stale_timestamp_is_refused_with_401(void **state)
{
	struct rejects *rj = *state;
	char *body = fx_stripe_payment("evt_stale", rj->rj_order, 1999, "usd");
	char *h = signed_header(FX_STRIPE_SECRET, hn_now_s() - 301, body);

	expect_refused(rj, h, body, strlen(body), 401);
	free(h);
	free(body);
}

static void test_malformed_json_with_a_valid_signature_is_refused_with_400(void **state)
{
	struct rejects *rj = *state;
	const char *body = "{\"id\":\"evt_broken\",\"type\":\"payment_intent.succeeded\",\"data\":{";
	char *h = signed_header(FX_STRIPE_SECRET, hn_now_s(), body);

	expect_refused(rj, h, body, strlen(body), 400);
	free(h);
}

#define STRICT_OBJECT                                                                              \
	"{\"id\":\"pi_strict\",\"object\":\"payment_intent\",\"amount\":1999,"                     \
	"\"amount_received\":1999,\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{"   \
	"\"order_id\":\"%s\"}}"
#define STRICT_DUP_OBJECT                                                                          \
	"{\"id\":\"pi_strict\",\"object\":\"payment_intent\",\"amount\":1999,"                     \
	"\"amount_received\":1,\"amount_received\":1999,\"currency\":\"usd\",\"status\":"          \
	"\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}"

/* Bodies two JSON parsers could read differently, each correctly signed:
 * refused before any claim, so the event's real delivery still applies. */
static void test_bodies_parsers_disagree_on_are_refused_and_consume_no_key(void **state)
{
	struct rejects *rj = *state;
	char id[64];
	char obj[512];
	char *good;
	char *bad[5];
	struct buf b;
	struct hres r;
	size_t i;

	fx_order(&rj->rj_daemon, 1999, "usd", id);
	snprintf(obj, sizeof(obj), STRICT_OBJECT, id);
	good = hn_stripe_event("evt_strict_1", "payment_intent.succeeded", obj);
	/* a repeated key: cJSON took the first, most parsers the last */
	snprintf(obj, sizeof(obj), STRICT_DUP_OBJECT, id);
	bad[0] = hn_stripe_event("evt_strict_1", "payment_intent.succeeded", obj);
	/* a NUL cut the id to "evt_strict_1" */
	snprintf(obj, sizeof(obj), STRICT_OBJECT, id);
	bad[1] = hn_stripe_event("evt_strict_1\\u0000x", "payment_intent.succeeded", obj);
	/* a second object after the first, and a stray byte */
	buf_init(&b, 0);
	buf_printf(&b, "%s{\"id\":\"evt_strict_2\"}", good);
	bad[2] = buf_take(&b, NULL);
	buf_init(&b, 0);
	buf_printf(&b, "%s x", good);
	bad[3] = buf_take(&b, NULL);
	/* invalid UTF-8 inside a string */
	buf_init(&b, 0);
	buf_puts(&b, good);
	bad[4] = buf_take(&b, NULL);
	memcpy(strstr(bad[4], "succeeded\",\"metadata"), "succ\xc0\xaf" "ded", 9);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *h = signed_header(FX_STRIPE_SECRET, hn_now_s(), bad[i]);

		expect_refused(rj, h, bad[i], strlen(bad[i]), 400);
		free(h);
		free(bad[i]);
	}
	assert_int_equal(hn_post_stripe(&rj->rj_daemon, "stripe", FX_STRIPE_SECRET, good, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_null(hres_header(&r, "Idempotent-Replayed"));
	assert_int_equal(
	        fx_db_int(&rj->rj_daemon, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id),
	        1);
	hres_finish(&r);
	free(good);
}

static void test_oversized_body_is_refused_with_413(void **state)
{
	struct rejects *rj = *state;
	size_t len = 2 * 1024 * 1024;
	char *body = malloc(len + 1);
	char *h;

	memset(body, ' ', len);
	body[0] = '{';
	body[len - 1] = '}';
	body[len] = '\0';
	h = signed_header(FX_STRIPE_SECRET, hn_now_s(), body);
	expect_refused(rj, h, body, len, 413);
	free(h);
	free(body);
}

/* How a 413 client sends the body it was refused. */
enum upload_style {
	UPLOAD_INTERLEAVED, /* as fast as it can, reading whenever an answer comes */
	UPLOAD_ALL_FIRST,   /* the whole body before it reads a byte, as many clients do */
	UPLOAD_SLOW,        /* small pieces with pauses, reading meanwhile */
};

/* Sends a head announcing body_len bytes, then the body in the given style,
 * and returns what came back before the connection ended (malloc'd). A
 * reset that destroys the answer leaves the buffer without it. */
static char *upload_refused(unsigned port, size_t body_len, enum upload_style style)
{
	static char chunk[64 * 1024];
	char head[256];
	struct buf got;
	size_t sent = 0;
	int fd = rh_connect(NULL, port);
	int64_t end = hn_now_ms() + 20000;
	char *s;

	assert_true(fd >= 0);
	memset(chunk, ' ', sizeof(chunk));
	buf_init(&got, 0);
	snprintf(head, sizeof(head),
	         "POST /hooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	         "Stripe-Signature: t=1,v1=00\r\nContent-Length: %zu\r\n\r\n",
	         body_len);
	assert_int_equal(rh_send(fd, head, strlen(head)), 0);
	if (style == UPLOAD_ALL_FIRST) {
		/* Blocking: the server must read (or discard) it all for this
		 * to return; a reset ends it early. */
		while (sent < body_len) {
			size_t n = body_len - sent < sizeof(chunk) ? body_len - sent : sizeof(chunk);
			ssize_t w = send(fd, chunk, n, MSG_NOSIGNAL);

			if (w <= 0) {
				/* Such a client reports the failed send, never the answer. */
				close(fd);
				buf_finish(&got);
				s = malloc(64);
				snprintf(s, 64, "(send failed after %zu bytes: %s)", sent, strerror(errno));
				return s;
			}
			sent += (size_t)w;
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (hn_now_ms() < end) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		char in[4096];
		ssize_t r;

		if (sent < body_len) {
			pfd.events |= POLLOUT;
		}
		if (poll(&pfd, 1, style == UPLOAD_SLOW ? 2 : 1000) < 0) {
			break;
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			r = recv(fd, in, sizeof(in), 0);
			if (r > 0) {
				buf_append(&got, in, (size_t)r);
				continue;
			}
			if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
				break; /* the end, or a reset */
			}
		}
		if (sent < body_len && (pfd.revents & POLLOUT)) {
			size_t n = style == UPLOAD_SLOW ? 4096 : sizeof(chunk);
			ssize_t w;

			if (n > body_len - sent) {
				n = body_len - sent;
			}
			w = send(fd, chunk, n, MSG_NOSIGNAL);
			if (w > 0) {
				sent += (size_t)w;
			} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				sent = body_len; /* cannot send more: read what is left */
			}
		}
	}
	close(fd);
	buf_append(&got, "", 1);
	s = buf_take(&got, NULL);
	buf_finish(&got);
	return s;
}

/* A client still sending a body it was refused must read the 413, not a
 * reset: closing a socket with unread input makes the kernel send RST,
 * which can destroy the answer before the client reads it. Many times,
 * each way of sending, because the loss depends on timing. */
static void test_a_client_still_sending_reads_the_413_not_a_reset(void **state)
{
	struct rejects *rj = *state;
	char *before = rejects_snapshot(&rj->rj_daemon);
	char *after;
	int i;

	for (i = 0; i < 60; i++) {
		enum upload_style style = (enum upload_style)(i % 3);
		/* More than the kernel's socket buffers take in without the
		 * server reading (about 4 MiB on loopback), less than it
		 * drains after a refusal. */
		size_t len = style == UPLOAD_SLOW ? 2 * 1024 * 1024 : 7 * 1024 * 1024;
		char *got = upload_refused(rj->rj_daemon.dm_port, len, style);

		if (strncmp(got, "HTTP/1.1 413 ", 13) != 0 || strstr(got, "body_too_large") == NULL) {
			fail_msg("round %d (style %d): no 413 read, got %zu bytes: %.80s", i, (int)style,
			         strlen(got), got);
		}
		free(got);
	}
	after = rejects_snapshot(&rj->rj_daemon);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void test_get_on_a_hook_is_refused_with_405(void **state)
{
	struct rejects *rj = *state;
	struct hres r;
	char *allow;

	assert_int_equal(hn_http("GET", rj->rj_url, NULL, NULL, 0, &r), 0);
	assert_int_equal(r.hs_status, 405);
	allow = hres_header(&r, "Allow");
	assert_non_null(allow);
	assert_string_equal(allow, "POST");
	free(allow);
	hres_finish(&r);
}

static void test_unknown_provider_path_is_404(void **state)
{
	struct rejects *rj = *state;
	struct hres r;
	char url[300];

	snprintf(url, sizeof(url), "%s/hooks/nosuchprovider", rj->rj_daemon.dm_base);
	assert_int_equal(hn_http("POST", url, NULL, "{}", 2, &r), 0);
	assert_int_equal(r.hs_status, 404);
	assert_non_null(strstr(r.hs_body, "\"type\":\"urn:idemhook:problem:unknown_provider\""));
	hres_finish(&r);
}

static void test_an_encoded_nul_never_routes_to_the_provider_before_it(void **state)
{
	struct rejects *rj = *state;
	struct hres r;
	char url[300];

	/* Cut at the NUL, this path would read /hooks/stripe. */
	snprintf(url, sizeof(url), "%s/hooks/stripe%%00evil", rj->rj_daemon.dm_base);
	assert_int_equal(hn_http("POST", url, NULL, "{}", 2, &r), 0);
	assert_int_equal(r.hs_status, 400);
	assert_non_null(strstr(r.hs_body, "\"type\":\"urn:idemhook:problem:nul_in_target\""));
	assert_null(strstr(r.hs_body, "signature"));
	hres_finish(&r);
}

static void test_refused_key_is_not_consumed_and_the_valid_delivery_still_applies(void **state)
{
	struct rejects *rj = *state;
	char id[64];
	char *body;
	char *bad;
	struct hres r;

	fx_order(&rj->rj_daemon, 700, "usd", id);
	body = fx_stripe_payment("evt_retry_after_bad", id, 700, "usd");
	bad = signed_header("whsec_wrong", hn_now_s(), body);
	expect_refused(rj, bad, body, strlen(body), 401);
	assert_int_equal(hn_post_stripe(&rj->rj_daemon, "stripe", FX_STRIPE_SECRET, body, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_null(hres_header(&r, "Idempotent-Replayed"));
	assert_int_equal(fx_db_int(&rj->rj_daemon, "SELECT status = 'paid' FROM orders WHERE id = '%s'", id), 1);
	hres_finish(&r);
	free(bad);
	free(body);
}

static void test_caller_outside_allow_from_gets_403_and_changes_nothing(void **state)
{
	struct rejects *rj = *state;
	char *body = fx_stripe_payment("evt_wrong_source", rj->rj_order, 1999, "usd");
	char *h = signed_header(FX_STRIPE_SECRET, hn_now_s(), body);
	char saved[256];

	/* A correctly signed callback, but from an address the instance does not allow. */
	snprintf(saved, sizeof(saved), "%s", rj->rj_url);
	snprintf(rj->rj_url, sizeof(rj->rj_url), "%s/hooks/stripe-locked", rj->rj_daemon.dm_base);
	expect_refused(rj, h, body, strlen(body), 403);
	snprintf(rj->rj_url, sizeof(rj->rj_url), "%s", saved);
	free(h);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_secret_is_refused_with_401_and_stores_nothing),
		cmocka_unit_test(test_body_changed_after_signing_is_refused_with_401),
		cmocka_unit_test(test_missing_signature_is_refused_with_400),
		cmocka_unit_test(test_malformed_signature_header_is_refused_with_400),
		cmocka_unit_test(test_stale_timestamp_is_refused_with_401),
		cmocka_unit_test(test_malformed_json_with_a_valid_signature_is_refused_with_400),
		cmocka_unit_test(test_bodies_parsers_disagree_on_are_refused_and_consume_no_key),
		cmocka_unit_test(test_oversized_body_is_refused_with_413),
		cmocka_unit_test(test_a_client_still_sending_reads_the_413_not_a_reset),
		cmocka_unit_test(test_get_on_a_hook_is_refused_with_405),
		cmocka_unit_test(test_unknown_provider_path_is_404),
		cmocka_unit_test(test_an_encoded_nul_never_routes_to_the_provider_before_it),
		cmocka_unit_test(test_refused_key_is_not_consumed_and_the_valid_delivery_still_applies),
		cmocka_unit_test(test_caller_outside_allow_from_gets_403_and_changes_nothing),
	};

	return cmocka_run_group_tests_name("bad input changes nothing", tests, setup, teardown);
}
