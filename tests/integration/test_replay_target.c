/* test_replay_target.c: `replay --to` sends each capture to the --to
 * address and nowhere else: a capture whose request target is not a path
 * ("@127.0.0.1:OTHER/hooks/stripe", which concatenated after the base URL
 * makes libcurl connect to OTHER) is not sent, and is counted failed, never
 * new. It waits as long as the target's Retry-After asks (within a bound),
 * sends a request that got no answer again (the target may be restarting),
 * and stops the run when the target is plainly down. A capture its instance
 * can verify but not sign again is failed, never sent with its old
 * signature. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "crypto.h"
#include "fixtures.h"
#include "harness.h"
#include "peer.h"
#include "rawhttp.h"

static char t_found[2][1024];
static size_t t_n_found;

static int t_collect(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	size_t len = strlen(path);

	(void)sb;
	(void)ftw;
	if (type == FTW_F && len > 4 && strcmp(path + len - 4, ".cap") == 0 && t_n_found < 2) {
		snprintf(t_found[t_n_found++], sizeof(t_found[0]), "%s", path);
	}
	return 0;
}

/* Rewrites the request line of the capture at path to target. */
static void t_retarget(const char *path, const char *target)
{
	const char *line = "POST /hooks/stripe HTTP/1.1\r\n";
	char *text = hn_read_file(path);
	char *at;
	FILE *f;

	assert_non_null(text);
	at = strstr(text, line);
	assert_non_null(at);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(text, 1, (size_t)(at - text), f);
	fprintf(f, "POST %s HTTP/1.1\r\n", target);
	fputs(at + strlen(line), f);
	assert_int_equal(fclose(f), 0);
	free(text);
}

static int64_t t_field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	assert_true(cJSON_IsNumber(v));
	return (int64_t)v->valuedouble;
}

static void
test_a_capture_whose_target_names_another_host_is_sent_nowhere_and_not_counted(void **state)
{
	struct daemon origin;
	struct daemon target;
	struct peer *other;
	char spool[600];
	char evil[128];
	char *body;
	char *out = NULL;
	const char *args[] = {"replay", "--json", "--to", NULL, spool, NULL};
	const cJSON *reasons;
	cJSON *s;

	(void)state;
	other = peer_create();
	assert_non_null(other);
	/* Two callbacks captured by the origin. */
	assert_int_equal(daemon_init(&origin, FX_STRIPE_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", origin.dm_dir);
	fx_append_config(&origin, "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_start(&origin), 0);
	body = hn_stripe_event("evt_rt_good", "customer.created",
	                       "{\"id\":\"cus_rt_1\",\"object\":\"customer\"}");
	assert_int_equal(fx_stripe_send(&origin, body, NULL), 200);
	free(body);
	body = hn_stripe_event("evt_rt_evil", "customer.created",
	                       "{\"id\":\"cus_rt_2\",\"object\":\"customer\"}");
	assert_int_equal(fx_stripe_send(&origin, body, NULL), 200);
	free(body);
	assert_int_equal(daemon_term(&origin, 20), 0);
	assert_int_equal(nftw(spool, t_collect, 8, FTW_PHYS), 0);
	assert_int_equal(t_n_found, 2);
	/* One of them now says to go to the other listener. */
	snprintf(evil, sizeof(evil), "@%s/hooks/stripe", peer_base(other) + strlen("http://"));
	{
		char *text = hn_read_file(t_found[0]);

		assert_non_null(text);
		t_retarget(t_found[strstr(text, "evt_rt_evil") != NULL ? 0 : 1], evil);
		free(text);
	}

	fx_daemon_start(&target, FX_STRIPE_INI);
	args[3] = target.dm_base;
	assert_int_not_equal(daemon_cli(&target, 1, args, &out), 0);
	assert_non_null(out);
	s = cJSON_Parse(out);
	if (s == NULL) {
		fail_msg("replay printed no JSON summary: \"%s\"", out);
	}
	assert_int_equal(t_field(s, "new"), 1);
	assert_int_equal(t_field(s, "failed"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "bad_target"), 1);
	cJSON_Delete(s);
	free(out);
	assert_int_equal(daemon_log_wait(&target, "not an origin-form path", 0), 0);
	/* The other listener heard nothing; the target took only the good one. */
	assert_int_equal(peer_count(other), 0);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 1);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records "
	                                         "WHERE idem_key = 'evt_rt_good'"),
	                 1);
	assert_int_equal(daemon_term(&target, 20), 0);
	daemon_finish(&target);
	daemon_finish(&origin);
	peer_destroy(other);
}

/* Captures n Stripe callbacks with a daemon whose spool is o's; o stays
 * initialised (stopped) so that its configuration can replay them. */
static void t_capture(struct daemon *o, char *spool, size_t spool_size, int n)
{
	char id[64];
	char *body;
	int i;

	assert_int_equal(daemon_init(o, FX_STRIPE_INI), 0);
	snprintf(spool, spool_size, "%s/spool", o->dm_dir);
	fx_append_config(o, "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_start(o), 0);
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "evt_ra_%d", i);
		body = hn_stripe_event(id, "customer.created",
		                       "{\"id\":\"cus_ra\",\"object\":\"customer\"}");
		assert_int_equal(fx_stripe_send(o, body, NULL), 200);
		free(body);
	}
	assert_int_equal(daemon_term(o, 20), 0);
}

/* Runs replay --json --to peer over spool with o's configuration; returns
 * the exit status and the summary in *ret. */
static int t_replay(struct daemon *o, const char *to, const char *spool, const char *extra,
                    const char *extra_value, cJSON **ret)
{
	const char *args[] = {"replay", "--json", "--timeout", "1",  "--to",
	                      to,       spool,    NULL,        NULL, NULL};
	char *out = NULL;
	int rc;

	if (extra != NULL) {
		args[6] = extra;
		args[7] = extra_value;
		args[8] = spool;
	}
	rc = daemon_cli(o, 1, args, &out);
	assert_non_null(out);
	*ret = cJSON_Parse(out);
	if (*ret == NULL) {
		fail_msg("replay printed no JSON summary: \"%s\"", out);
	}
	free(out);
	return rc;
}

static int64_t t_at_ms(struct peer *p, size_t i)
{
	struct peer_request r;
	int64_t at;

	assert_int_equal(peer_request(p, i, &r), 0);
	at = r.pq_at_ms;
	peer_request_finish(&r);
	return at;
}

static void test_replay_waits_as_long_as_the_targets_retry_after_asks(void **state)
{
	struct daemon origin;
	struct peer *target;
	struct peer_behaviour b;
	char spool[600];
	char date[64];
	struct tm tm;
	time_t when;
	cJSON *s;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 1);
	target = peer_create();
	assert_non_null(target);
	/* 429 with delta-seconds, then 503 with an HTTP-date, then accepted. */
	memset(&b, 0, sizeof(b));
	b.pb_action = PEER_RETRY_AFTER;
	b.pb_retry_after = "2";
	assert_int_equal(peer_script(target, NULL, &b), 0);
	/* Far enough ahead that our own pause (400 ms) after the first
	 * wait would come well before it, even after a slow start. */
	when = time(NULL) + 6;
	gmtime_r(&when, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	b = peer_reply(503, "{}");
	b.pb_retry_after = date;
	assert_int_equal(peer_script(target, NULL, &b), 0);
	assert_int_equal(t_replay(&origin, peer_base(target), spool, NULL, NULL, &s), 0);
	assert_int_equal(t_field(s, "new"), 1);
	assert_int_equal(t_field(s, "failed"), 0);
	cJSON_Delete(s);
	assert_int_equal(peer_count(target), 3);
	/* Our own pauses are 200 and 400 ms: these waits are the target's.
	 * The second is to the date itself, which has whole seconds: it is
	 * measured against the date, not against the request before, whose
	 * time depends on how fast the replay started. */
	assert_true(t_at_ms(target, 1) - t_at_ms(target, 0) >= 1900);
	assert_true(t_at_ms(target, 2) >= (int64_t)when * 1000 - 1000);
	peer_destroy(target);
	daemon_finish(&origin);
}

static void test_replay_does_not_wait_an_hour_for_a_retry_after_but_fails_the_request(void **state)
{
	struct daemon origin;
	struct peer *target;
	struct peer_behaviour b;
	char spool[600];
	const cJSON *reasons;
	cJSON *s;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 1);
	target = peer_create();
	assert_non_null(target);
	memset(&b, 0, sizeof(b));
	b.pb_action = PEER_RETRY_AFTER;
	b.pb_retry_after = "3600";
	assert_int_equal(peer_default(target, NULL, &b), 0);
	assert_int_equal(t_replay(&origin, peer_base(target), spool, NULL, NULL, &s), 65);
	assert_int_equal(t_field(s, "failed"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "http_429"), 1);
	cJSON_Delete(s);
	assert_int_equal(peer_count(target), 1);
	assert_int_equal(daemon_log_wait(&origin, "asks to wait 3600 s", 0), 0);
	peer_destroy(target);
	daemon_finish(&origin);
}

static void test_replay_stops_after_three_requests_in_a_row_get_no_answer(void **state)
{
	struct daemon origin;
	struct peer *target;
	struct peer_behaviour b;
	char spool[600];
	const char *usage[] = {"replay", "--stop-after", "2", NULL, NULL};
	char gone[64];
	cJSON *s;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 6);
	target = peer_create();
	assert_non_null(target);
	memset(&b, 0, sizeof(b));
	b.pb_action = PEER_HANG;
	b.pb_ms = 20000;
	assert_int_equal(peer_default(target, NULL, &b), 0);
	/* Each attempt waits its whole --timeout (1 s), and each request is
	 * tried 4 times; the fourth request is not sent. */
	assert_int_equal(t_replay(&origin, peer_base(target), spool, NULL, NULL, &s), 69);
	assert_int_equal(t_field(s, "failed"), 3);
	assert_int_equal(t_field(s, "not_sent"), 3);
	cJSON_Delete(s);
	assert_int_equal(peer_count(target), 12);
	assert_int_equal(daemon_log_wait(&origin, "replay: stopped: 3 requests in a row", 0), 0);
	assert_int_equal(daemon_log_wait(&origin, "(4 attempts)", 0), 0);
	peer_destroy(target);
	/* --stop-after 0 never stops: all six are tried, here against an
	 * address that refuses every connection. */
	target = peer_create();
	assert_non_null(target);
	snprintf(gone, sizeof(gone), "%s", peer_base(target));
	peer_destroy(target);
	assert_int_equal(t_replay(&origin, gone, spool, "--stop-after", "0", &s), 65);
	assert_int_equal(t_field(s, "failed"), 6);
	assert_int_equal(t_field(s, "not_sent"), 0);
	cJSON_Delete(s);
	/* In-process there is no address to give up on. */
	usage[3] = spool;
	assert_int_equal(daemon_cli(&origin, 1, usage, NULL), 64);
	daemon_finish(&origin);
}

static void test_a_request_answered_in_between_starts_the_count_again(void **state)
{
	struct daemon origin;
	struct peer *target;
	struct peer_behaviour hang;
	struct peer_behaviour ok = peer_reply(200, "{}");
	char spool[600];
	cJSON *s;
	int i;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 5);
	target = peer_create();
	assert_non_null(target);
	memset(&hang, 0, sizeof(hang));
	hang.pb_action = PEER_CLOSE;
	/* Requests with no answer to any of their 4 attempts: 2, then one
	 * accepted, then 2 more: never 3 in a row. */
	for (i = 0; i < 8; i++) {
		assert_int_equal(peer_script(target, NULL, &hang), 0);
	}
	assert_int_equal(peer_script(target, NULL, &ok), 0);
	for (i = 0; i < 8; i++) {
		assert_int_equal(peer_script(target, NULL, &hang), 0);
	}
	assert_int_equal(t_replay(&origin, peer_base(target), spool, NULL, NULL, &s), 65);
	assert_int_equal(t_field(s, "new"), 1);
	assert_int_equal(t_field(s, "failed"), 4);
	assert_int_equal(t_field(s, "not_sent"), 0);
	cJSON_Delete(s);
	assert_int_equal(peer_count(target), 17);
	peer_destroy(target);
	daemon_finish(&origin);
}

static void test_a_request_that_got_no_answer_is_sent_again_until_the_target_answers(void **state)
{
	struct daemon origin;
	struct peer *target;
	struct peer_behaviour cut;
	char spool[600];
	cJSON *s;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 1);
	target = peer_create();
	assert_non_null(target);
	/* The connection is closed twice without an answer (a target
	 * restarting), then the request is accepted. */
	memset(&cut, 0, sizeof(cut));
	cut.pb_action = PEER_CLOSE;
	assert_int_equal(peer_script(target, NULL, &cut), 0);
	assert_int_equal(peer_script(target, NULL, &cut), 0);
	assert_int_equal(t_replay(&origin, peer_base(target), spool, NULL, NULL, &s), 0);
	assert_int_equal(t_field(s, "new"), 1);
	assert_int_equal(t_field(s, "failed"), 0);
	cJSON_Delete(s);
	assert_int_equal(peer_count(target), 3);
	/* Our own pauses, as after a 503: 200 ms, then 400 ms. */
	assert_true(t_at_ms(target, 1) - t_at_ms(target, 0) >= 180);
	assert_true(t_at_ms(target, 2) - t_at_ms(target, 1) >= 380);
	assert_int_equal(daemon_log_wait(&origin, "sending it again in 200 ms (attempt 2 of 4)", 0),
	                 0);
	peer_destroy(target);
	daemon_finish(&origin);
}

/* Starts the target on its port once the replay says it found nobody
 * there and will try again. */
struct t_late {
	struct daemon *tl_origin;
	unsigned tl_port;
	struct peer *tl_peer;
};

static void *t_late_start(void *arg)
{
	struct t_late *tl = arg;

	if (daemon_log_wait(tl->tl_origin, "sending it again in", 20000) == 0) {
		tl->tl_peer = peer_create_on(tl->tl_port);
	}
	return NULL;
}

static void test_replay_waits_for_a_target_that_refuses_connections_for_a_moment(void **state)
{
	struct daemon origin;
	struct peer *probe;
	struct t_late tl;
	pthread_t th;
	char spool[600];
	char base[64];
	cJSON *s;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 1);
	/* A port nobody listens on: connections are refused until the
	 * target comes up there. */
	probe = peer_create();
	assert_non_null(probe);
	snprintf(base, sizeof(base), "%s", peer_base(probe));
	peer_destroy(probe);
	memset(&tl, 0, sizeof(tl));
	tl.tl_origin = &origin;
	tl.tl_port = (unsigned)strtoul(strrchr(base, ':') + 1, NULL, 10);
	assert_int_equal(pthread_create(&th, NULL, t_late_start, &tl), 0);
	assert_int_equal(t_replay(&origin, base, spool, NULL, NULL, &s), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_non_null(tl.tl_peer);
	assert_int_equal(t_field(s, "new"), 1);
	assert_int_equal(t_field(s, "failed"), 0);
	cJSON_Delete(s);
	assert_int_equal(peer_count(tl.tl_peer), 1);
	peer_destroy(tl.tl_peer);
	daemon_finish(&origin);
}

/* A target serving native HTTPS with a self-signed certificate for
 * 127.0.0.1. A certificate that fails verification fails every attempt
 * alike: each request fails at once (no retry) under its own reason with
 * the way out in the message, and such requests in a row stop the run like
 * an address that is down. --cacert trusts the target's certificate for
 * this run; the host name must still be the certificate's. */
static void test_a_certificate_that_fails_verification_is_not_retried_and_says_why(void **state)
{
	struct daemon origin;
	struct daemon target;
	char spool[600];
	char by_name[64];
	const cJSON *reasons;
	cJSON *s;
	int64_t t0;
	const char *missing[] = {"replay", "--cacert", "/nonexistent/ca.pem", "--to", NULL,
	                         NULL,     NULL};
	const char *alone[] = {"replay", "--cacert", NULL, NULL, NULL};

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 4);
	assert_int_equal(daemon_init(&target, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_use_tls(&target), 0);
	assert_int_equal(daemon_start(&target), 0);

	/* Not trusted by the system CAs: 3 failures in a row, then the run
	 * stops; one attempt each, well within the 1 s --timeout. */
	t0 = hn_now_ms();
	assert_int_equal(t_replay(&origin, target.dm_base, spool, NULL, NULL, &s), 69);
	assert_true(hn_now_ms() - t0 < 3000);
	assert_int_equal(t_field(s, "new"), 0);
	assert_int_equal(t_field(s, "failed"), 3);
	assert_int_equal(t_field(s, "not_sent"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "tls_verify"), 3);
	assert_null(cJSON_GetObjectItemCaseSensitive(reasons, "connection"));
	cJSON_Delete(s);
	assert_int_equal(daemon_log_wait(&origin, "sending it again", 0), -1);
	assert_int_equal(daemon_log_wait(&origin, "certificate could not be verified", 0), 0);
	assert_int_equal(daemon_log_wait(&origin, "--cacert", 0), 0);

	/* Its CA trusted, but addressed by a name the certificate does not
	 * hold. */
	snprintf(by_name, sizeof(by_name), "https://localhost:%u", target.dm_port);
	assert_int_equal(t_replay(&origin, by_name, spool, "--cacert", target.dm_ca, &s), 69);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "tls_verify"), 3);
	cJSON_Delete(s);
	assert_int_equal(daemon_log_wait(&origin, "localhost", 0), 0);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);

	/* Trusted and addressed by its name: every capture is applied. */
	assert_int_equal(t_replay(&origin, target.dm_base, spool, "--cacert", target.dm_ca, &s), 0);
	assert_int_equal(t_field(s, "new"), 4);
	assert_int_equal(t_field(s, "failed"), 0);
	cJSON_Delete(s);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 4);

	/* A CA file that cannot be read, or --cacert in-process, is a usage
	 * error, and nothing is sent. */
	missing[4] = target.dm_base;
	missing[5] = spool;
	assert_int_equal(daemon_cli(&origin, 1, missing, NULL), 64);
	assert_int_equal(daemon_log_wait(&origin, "/nonexistent/ca.pem", 0), 0);
	alone[2] = target.dm_ca;
	alone[3] = spool;
	assert_int_equal(daemon_cli(&origin, 1, alone, NULL), 64);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 4);
	assert_int_equal(daemon_term(&target, 20), 0);
	daemon_finish(&target);
	daemon_finish(&origin);
}

/* A Standard Webhooks sender that signs v1a (Ed25519) only: its instance
 * holds the public key, which verifies a capture but cannot sign it
 * again. */
#define T_SW_INI "[provider billing]\ntype = standard-webhooks\npublic_key = %s\n"

/* POSTs body to d's /hooks/billing, signed v1a now with key as message id;
 * returns the status. */
static long t_sw_ed_send(struct daemon *d, EVP_PKEY *key, const char *id, const char *body)
{
	char ts[32];
	char content[512];
	unsigned char sig[64];
	size_t sig_len = sizeof(sig);
	char *sig_b64 = NULL;
	char h_id[96];
	char h_ts[64];
	char h_sig[160];
	const char *headers[] = {h_id, h_ts, h_sig, "Content-Type: application/json", NULL};
	char url[128];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	struct hres r;
	long status;

	snprintf(ts, sizeof(ts), "%lld", (long long)hn_now_s());
	snprintf(content, sizeof(content), "%s.%s.%s", id, ts, body);
	assert_non_null(ctx);
	assert_int_equal(EVP_DigestSignInit(ctx, NULL, NULL, NULL, key), 1);
	assert_int_equal(
	        EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)content, strlen(content)),
	        1);
	EVP_MD_CTX_free(ctx);
	assert_int_equal(crypto_base64_encode(sig, sig_len, &sig_b64, NULL), 0);
	snprintf(h_id, sizeof(h_id), "webhook-id: %s", id);
	snprintf(h_ts, sizeof(h_ts), "webhook-timestamp: %s", ts);
	snprintf(h_sig, sizeof(h_sig), "webhook-signature: v1a,%s", sig_b64);
	free(sig_b64);
	snprintf(url, sizeof(url), "%s/hooks/billing", d->dm_base);
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &r), 0);
	status = r.hs_status;
	hres_finish(&r);
	return status;
}

static void
test_a_capture_its_instance_cannot_sign_again_is_failed_with_reason_sign_not_sent(void **state)
{
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	unsigned char pub[32];
	size_t pub_len = sizeof(pub);
	char *pub_b64 = NULL;
	char whpk[80];
	struct daemon origin;
	struct daemon target;
	char spool[600];
	const cJSON *reasons;
	cJSON *s;

	(void)state;
	assert_non_null(key);
	assert_int_equal(EVP_PKEY_get_raw_public_key(key, pub, &pub_len), 1);
	assert_int_equal(crypto_base64_encode(pub, pub_len, &pub_b64, NULL), 0);
	snprintf(whpk, sizeof(whpk), "whpk_%s", pub_b64);
	free(pub_b64);
	/* The origin verifies and captures the callback. */
	assert_int_equal(daemon_init(&origin, NULL), 0);
	snprintf(spool, sizeof(spool), "%s/spool", origin.dm_dir);
	fx_append_config(&origin, T_SW_INI "\n[capture]\nmode = all\ndir = %s\n", whpk, spool);
	assert_int_equal(daemon_start(&origin), 0);
	assert_int_equal(t_sw_ed_send(&origin, key, "msg_rp_ed_1", "{\"type\":\"thing.happened\"}"),
	                 200);
	assert_int_equal(daemon_term(&origin, 20), 0);
	/* A second daemon, configured alike, is the target. Sent with its
	 * captured signature the request would pass there now, and fail as
	 * stale_timestamp once the capture is older than the tolerance:
	 * neither is a re-signed replay, and the operator must know. */
	fx_daemon_start(&target, T_SW_INI, whpk);
	assert_int_equal(t_replay(&origin, target.dm_base, spool, NULL, NULL, &s), 65);
	assert_int_equal(t_field(s, "new"), 0);
	assert_int_equal(t_field(s, "failed"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "sign"), 1);
	cJSON_Delete(s);
	assert_int_equal(daemon_log_wait(&origin,
	                                 "provider instance \"billing\" cannot sign the request "
	                                 "again: the instance holds only Ed25519 public keys",
	                                 0),
	                 0);
	/* Nothing reached the target. */
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(daemon_term(&target, 20), 0);
	daemon_finish(&target);
	daemon_finish(&origin);
	EVP_PKEY_free(key);
}
/* --to https:// on a port that speaks plain HTTP (a plain server that
 * answers every ClientHello with a status line): its answer to the
 * handshake is not TLS, and will not be in a second either. Each request
 * is sent once and fails at once (no retry, not "no answer") under its own
 * reason, the message says to use http://, and such requests in a row stop
 * the run like an address that is down. */
static void test_an_https_address_on_a_plain_http_port_fails_at_once_and_says_use_http(void **state)
{
	struct daemon origin;
	struct rh_plain *plain;
	char spool[600];
	char to[64];
	const cJSON *reasons;
	cJSON *s;
	int64_t t0;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 4);
	plain = rh_plain_start();
	assert_non_null(plain);
	snprintf(to, sizeof(to), "https://127.0.0.1:%u", rh_plain_port(plain));

	t0 = hn_now_ms();
	assert_int_equal(t_replay(&origin, to, spool, NULL, NULL, &s), 69);
	assert_true(hn_now_ms() - t0 < 3000);
	assert_int_equal(t_field(s, "new"), 0);
	assert_int_equal(t_field(s, "failed"), 3);
	assert_int_equal(t_field(s, "not_sent"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "not_tls"), 3);
	assert_null(cJSON_GetObjectItemCaseSensitive(reasons, "connection"));
	cJSON_Delete(s);
	assert_int_equal(rh_plain_count(plain), 3);
	assert_int_equal(daemon_log_wait(&origin, "sending it again", 0), -1);
	assert_int_equal(daemon_log_wait(&origin, "port does not speak TLS", 0), 0);
	assert_int_equal(daemon_log_wait(&origin, "with http://", 0), 0);
	rh_plain_stop(plain);
	daemon_finish(&origin);
}

/* --to https:// on a server that takes the ClientHello and closes without
 * a byte (libmicrohttpd does so on a plain port for some ClientHellos):
 * not conclusive, so retried as no answer, and the message says what the
 * close may mean. */
static void test_an_https_address_that_closes_in_the_handshake_is_retried_with_a_hint(void **state)
{
	struct daemon origin;
	struct rh_plain *silent;
	char spool[600];
	char to[64];
	const cJSON *reasons;
	cJSON *s;

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 1);
	silent = rh_silent_start();
	assert_non_null(silent);
	snprintf(to, sizeof(to), "https://127.0.0.1:%u", rh_plain_port(silent));
	assert_int_equal(t_replay(&origin, to, spool, NULL, NULL, &s), 65);
	assert_int_equal(t_field(s, "failed"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "connection"), 1);
	cJSON_Delete(s);
	assert_true(rh_plain_count(silent) > 1); /* retried */
	assert_int_equal(daemon_log_wait(&origin,
	                                 "the server closed the connection during the TLS "
	                                 "handshake; if this port speaks plain HTTP, use http://",
	                                 0),
	                 0);
	rh_plain_stop(silent);
	daemon_finish(&origin);
}

/* A CA file that holds no certificate: --cacert is refused before
 * anything is sent (a usage error, 64); as [client] ca_file it is refused
 * up front too, as serve refuses it (the configuration's 78), the message
 * naming the file: nothing reaches the target. */
static void test_a_ca_file_that_cannot_be_used_is_named_and_not_retried(void **state)
{
	struct daemon origin;
	struct daemon target;
	char spool[600];
	char bad[700];
	char ini[800];
	const char *args[] = {"replay", "--cacert", NULL, "--to", NULL, NULL, NULL};

	(void)state;
	t_capture(&origin, spool, sizeof(spool), 4);
	assert_int_equal(daemon_init(&target, FX_STRIPE_INI), 0);
	assert_int_equal(daemon_use_tls(&target), 0);
	assert_int_equal(daemon_start(&target), 0);
	assert_int_equal(daemon_write_file(&origin, "bad.pem", "not a certificate\n"), 0);
	snprintf(bad, sizeof(bad), "%s/bad.pem", origin.dm_dir);

	args[2] = bad;
	args[4] = target.dm_base;
	args[5] = spool;
	assert_int_equal(daemon_cli(&origin, 1, args, NULL), 64);
	assert_int_equal(daemon_log_wait(&origin, "--cacert: the CA file", 0), 0);
	assert_int_equal(daemon_log_wait(&origin, "cannot be used: it holds no PEM certificate", 0),
	                 0);

	snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s\n", bad);
	assert_int_equal(daemon_append_config(&origin, ini), 0);
	args[1] = "--to";
	args[2] = target.dm_base;
	args[3] = spool;
	args[4] = NULL;
	assert_int_equal(daemon_cli(&origin, 1, args, NULL), 78);
	snprintf(ini, sizeof(ini),
	         "[client] ca_file: the CA file %s cannot be used: it holds no "
	         "PEM certificate",
	         bad);
	assert_int_equal(daemon_log_wait(&origin, ini, 0), 0);
	assert_int_equal(daemon_log_wait(&origin, "sending it again", 0), -1);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(daemon_term(&target, 20), 0);
	daemon_finish(&target);
	daemon_finish(&origin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_capture_whose_target_names_another_host_is_sent_nowhere_and_not_counted),
	        cmocka_unit_test(test_replay_waits_as_long_as_the_targets_retry_after_asks),
	        cmocka_unit_test(
	                test_replay_does_not_wait_an_hour_for_a_retry_after_but_fails_the_request),
	        cmocka_unit_test(test_replay_stops_after_three_requests_in_a_row_get_no_answer),
	        cmocka_unit_test(test_a_request_answered_in_between_starts_the_count_again),
	        cmocka_unit_test(
	                test_a_request_that_got_no_answer_is_sent_again_until_the_target_answers),
	        cmocka_unit_test(
	                test_replay_waits_for_a_target_that_refuses_connections_for_a_moment),
	        cmocka_unit_test(
	                test_a_capture_its_instance_cannot_sign_again_is_failed_with_reason_sign_not_sent),
	        cmocka_unit_test(
	                test_a_certificate_that_fails_verification_is_not_retried_and_says_why),
	        cmocka_unit_test(
	                test_an_https_address_on_a_plain_http_port_fails_at_once_and_says_use_http),
	        cmocka_unit_test(
	                test_an_https_address_that_closes_in_the_handshake_is_retried_with_a_hint),
	        cmocka_unit_test(test_a_ca_file_that_cannot_be_used_is_named_and_not_retried),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
