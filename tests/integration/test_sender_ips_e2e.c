/* test_sender_ips_e2e.c: allow_from = provider:NAME end to end: the real
 * daemon behind a trusted proxy (X-Forwarded-For), the address list shipped
 * with the binary, `idemhook ips update` against a list server this test
 * starts (tests/harness/peer.c), a reload that takes the new list, and a
 * provider that publishes no list refused with its advice. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"
#include "peer.h"
#include "provider_e2e.h"

#define T_INI                                                                                      \
	"[server]\ntrusted_proxies = 127.0.0.1/32\n\n"                                             \
	"[provider stripe]\ntype = stripe\nsecret = " FX_STRIPE_SECRET "\n"                        \
	"allow_from = provider:stripe\n"

#define T_IN_SHIPPED "3.18.12.63"         /* in the list shipped with idemhook */
#define T_OUTSIDE "198.51.100.7"          /* in no list Stripe publishes */
#define T_UPDATED_RANGE "198.51.100.0/24" /* what the list server serves */

/* POSTs a correctly signed payment for order as if from addr, through the
 * trusted proxy on loopback. Returns the status. */
static long post_from(struct daemon *d, const char *addr, const char *event_id, const char *order)
{
	char *body = fx_stripe_payment(event_id, order, 1999, "usd");
	char *sig = hn_stripe_signature(FX_STRIPE_SECRET, hn_now_s(), body, strlen(body));
	char sig_h[256];
	char xff[128];
	char url[256];
	const char *headers[4];
	struct hres r;
	long status;

	snprintf(sig_h, sizeof(sig_h), "Stripe-Signature: %s", sig);
	snprintf(xff, sizeof(xff), "X-Forwarded-For: %s", addr);
	headers[0] = sig_h;
	headers[1] = xff;
	headers[2] = "Content-Type: application/json";
	headers[3] = NULL;
	snprintf(url, sizeof(url), "%s/hooks/stripe", d->dm_base);
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &r), 0);
	status = r.hs_status;
	hres_finish(&r);
	free(sig);
	free(body);
	return status;
}

static void
test_provider_stripe_admits_an_address_in_the_shipped_list_and_refuses_one_outside_it(void **state)
{
	struct daemon d;
	char order[64];
	char *out = NULL;
	const char *show[] = {"ips", "show", "stripe", NULL};

	(void)state;
	fx_daemon_start(&d, T_INI);
	fx_order(&d, 1999, "usd", order);
	assert_int_equal(post_from(&d, T_OUTSIDE, "evt_ips_outside", order), 403);
	assert_int_equal(fx_db_int(&d,
	                           "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = '%s'",
	                           "evt_ips_outside"),
	                 0);
	assert_int_equal(
	        fx_db_int(&d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", order), 1);
	assert_int_equal(post_from(&d, T_IN_SHIPPED, "evt_ips_inside", order), 200);
	assert_int_equal(fx_db_int(&d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", order),
	                 1);
	/* What the preset stands for, with its date. */
	assert_int_equal(daemon_cli(&d, 1, show, &out), 0);
	assert_non_null(strstr(out, "shipped with idemhook, dated 2026-05-15"));
	assert_non_null(strstr(out, "\n" T_IN_SHIPPED "\n"));
	free(out);
	daemon_finish(&d);
}

/* A correctly signed callback from an address the list lacks is refused
 * all the same, but not silently among everyone else's refusals: the log
 * says the list may be out of date. A forged one from elsewhere is not
 * taken for the provider's. */
static void test_a_signed_callback_from_an_unlisted_address_says_the_list_may_be_old(void **state)
{
	struct daemon d;
	char order[64];
	char *body;
	char *sig;
	char sig_h[256];
	char xff[128];
	char url[256];
	const char *headers[4];
	struct hres r;
	char *log;

	(void)state;
	fx_daemon_start(&d, T_INI);
	fx_order(&d, 1999, "usd", order);
	/* Signed with another secret, from 203.0.113.9. */
	body = fx_stripe_payment("evt_ips_forged", order, 1999, "usd");
	sig = hn_stripe_signature("whsec_not_the_endpoints", hn_now_s(), body, strlen(body));
	snprintf(sig_h, sizeof(sig_h), "Stripe-Signature: %s", sig);
	snprintf(xff, sizeof(xff), "X-Forwarded-For: %s", "203.0.113.9");
	headers[0] = sig_h;
	headers[1] = xff;
	headers[2] = "Content-Type: application/json";
	headers[3] = NULL;
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	assert_int_equal(hn_http("POST", url, headers, body, strlen(body), &r), 0);
	assert_int_equal(r.hs_status, 403);
	hres_finish(&r);
	free(sig);
	free(body);
	/* Signed with the endpoint's secret, from an address Stripe's list lacks. */
	assert_int_equal(post_from(&d, T_OUTSIDE, "evt_ips_unlisted", order), 403);
	assert_int_equal(daemon_log_wait(&d, "client=\"" T_OUTSIDE "\": a correctly signed", 5000),
	                 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "idemhook ips update"));
	assert_null(strstr(log, "client=\"203.0.113.9\": a correctly signed"));
	free(log);
	/* Refused all the same: nothing stored, the order unpaid. */
	assert_int_equal(fx_db_int(&d,
	                           "SELECT COUNT(*) FROM idempotency_records WHERE idem_key = '%s'",
	                           "evt_ips_unlisted"),
	                 0);
	assert_int_equal(
	        fx_db_int(&d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", order), 1);
	daemon_finish(&d);
}

#define T_SERVICE_UID 65534 /* nobody: stands for the service's user */

/* path has mode want; run as root, it belongs to T_SERVICE_UID too. */
static void assert_mode_owner(const char *path, mode_t want)
{
	struct stat st;

	fx_assert_mode(path, want);
	assert_int_equal(lstat(path, &st), 0);
	if (geteuid() == 0 && (st.st_uid != T_SERVICE_UID || st.st_gid != T_SERVICE_UID)) {
		fail_msg("%s: owned by %u:%u, not by the database directory's owner", path,
		         (unsigned)st.st_uid, (unsigned)st.st_gid);
	}
}

/* A name that is no provider is a usage error (64), as for every command;
 * 65 stays for a provider that publishes no list. */
static void test_ips_an_unknown_provider_is_a_usage_error(void **state)
{
	static const char *const show[] = {"ips", "show", "nosuch", NULL};
	static const char *const update[] = {"ips", "update", "nosuch", NULL};
	static const char *const adyen[] = {"ips", "show", "adyen", NULL};
	struct daemon d;
	char *log;

	(void)state;
	assert_int_equal(daemon_init(&d, T_INI), 0);
	assert_int_equal(daemon_cli(&d, 1, show, NULL), 64);
	assert_int_equal(daemon_cli(&d, 1, update, NULL), 64);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "unknown provider 'nosuch'; providers: adyen alipay"));
	free(log);
	assert_int_equal(daemon_cli(&d, 1, adyen, NULL), 65);
	daemon_finish(&d);
}

static void test_ips_update_writes_the_served_list_and_a_reload_takes_it(void **state)
{
	struct daemon d;
	struct peer *lists = peer_create();
	struct peer_behaviour good = peer_reply(200, "3.130.192.231\n" T_UPDATED_RANGE "\n");
	struct peer_behaviour bad = peer_reply(200, "3.130.192.231\nnot-an-address\n");
	char url[256];
	char path[700];
	char dir[700];
	char order_a[64];
	char order_b[64];
	char *out = NULL;
	char *file;
	const char *update[] = {"ips", "update", "stripe", "--from", url, NULL};
	const char *show[] = {"ips", "show", "stripe", NULL};

	(void)state;
	assert_non_null(lists);
	fx_daemon_start(&d, T_INI);
	snprintf(url, sizeof(url), "%s/files/ips/ips_webhooks.txt", peer_base(lists));
	snprintf(path, sizeof(path), "%s/sender-ips/stripe.txt", d.dm_dir);
	/* A malformed list is refused whole: nothing written. */
	assert_int_equal(peer_script(lists, NULL, &bad), 0);
	assert_int_equal(daemon_cli(&d, 1, update, &out), 65);
	free(out);
	assert_int_equal(access(path, F_OK), -1);
	/* The served list: written where the configuration reads it, private
	 * whatever the umask (docs/operations.md); run as root, owned by the
	 * owner of the database's directory, the service's user, which must
	 * read it at the next reload. */
	if (geteuid() == 0) {
		assert_int_equal(chown(d.dm_dir, T_SERVICE_UID, T_SERVICE_UID), 0);
	}
	assert_int_equal(peer_default(lists, NULL, &good), 0);
	umask(022);
	fx_cli_says(&d, update, 0, "2 addresses and ranges");
	assert_mode_owner(path, 0600);
	snprintf(dir, sizeof(dir), "%s/sender-ips", d.dm_dir);
	assert_mode_owner(dir, 0700);
	if (geteuid() == 0) {
		assert_int_equal(chown(d.dm_dir, 0, 0), 0);
	}
	file = hn_read_file(path);
	assert_non_null(file);
	assert_non_null(strstr(file, "# source: "));
	assert_non_null(strstr(file, "\n" T_UPDATED_RANGE "\n"));
	free(file);
	assert_int_equal(daemon_cli(&d, 1, show, &out), 0);
	assert_non_null(strstr(out, "from "));
	assert_non_null(strstr(out, "sender-ips/stripe.txt"));
	free(out);
	/* The running daemon keeps its list until it reloads. */
	fx_order(&d, 1999, "usd", order_a);
	assert_int_equal(post_from(&d, T_OUTSIDE, "evt_ips_before_reload", order_a), 403);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	assert_int_equal(post_from(&d, T_OUTSIDE, "evt_ips_after_reload", order_a), 200);
	fx_order(&d, 1999, "usd", order_b);
	assert_int_equal(post_from(&d, T_IN_SHIPPED, "evt_ips_dropped", order_b), 403);
	assert_int_equal(
	        fx_db_int(&d, "SELECT status = 'pending' FROM orders WHERE id = '%s'", order_b), 1);
	daemon_finish(&d);
	peer_destroy(lists);
}

/* [client] ca_file names a file TLS cannot load: ips update refuses it
 * before fetching anything, as serve would (78, the file named), and
 * writes nothing; ips show, which fetches nothing, still works. */
static void test_ips_update_refuses_an_unusable_ca_file_before_fetching(void **state)
{
	struct daemon d;
	struct peer *lists = peer_create();
	struct peer_behaviour good = peer_reply(200, "3.130.192.231\n" T_UPDATED_RANGE "\n");
	char url[256];
	char path[700];
	char bad[700];
	char ini[800];
	char want[900];
	char *err = NULL;
	const char *update[] = {"ips", "update", "stripe", "--from", url, NULL};
	const char *show[] = {"ips", "show", "stripe", NULL};

	(void)state;
	assert_non_null(lists);
	assert_int_equal(peer_default(lists, NULL, &good), 0);
	fx_daemon_start(&d, T_INI);
	snprintf(url, sizeof(url), "%s/files/ips/ips_webhooks.txt", peer_base(lists));
	snprintf(path, sizeof(path), "%s/sender-ips/stripe.txt", d.dm_dir);
	assert_int_equal(daemon_write_file(&d, "bad.pem", "not a certificate\n"), 0);
	snprintf(bad, sizeof(bad), "%s/bad.pem", d.dm_dir);
	snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s\n", bad);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(daemon_cli_err(&d, 1, update, NULL, &err), 78);
	snprintf(want, sizeof(want),
	         "[client] ca_file: the CA file %s cannot be used: it holds no PEM certificate",
	         bad);
	if (err == NULL || strstr(err, want) == NULL) {
		fail_msg("ips update said: %s", err != NULL ? err : "(nothing)");
	}
	free(err);
	assert_int_equal(peer_count(lists), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(daemon_cli(&d, 1, show, NULL), 0);
	daemon_finish(&d);
	peer_destroy(lists);
}

/* path with the first "# date: " line's day replaced by day. */
static void rewrite_date(const char *path, const char *day)
{
	char *file = hn_read_file(path);
	char *at;
	FILE *f;

	assert_non_null(file);
	at = strstr(file, "# date: ");
	assert_non_null(at);
	assert_true(strlen(at + 8) >= 10);
	memcpy(at + 8, day, 10);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(file, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	free(file);
}

/* An update run before an upgrade whose binary ships a newer list (Stripe
 * moved its senders, with notice, in between) must not go on refusing the
 * new addresses: the newer list by its date is in force, and the log says
 * which one was passed over. */
static void test_an_update_older_than_the_shipped_list_gives_way_to_it(void **state)
{
	struct daemon d;
	struct peer *lists = peer_create();
	struct peer_behaviour served = peer_reply(200, T_UPDATED_RANGE "\n");
	char url[256];
	char path[700];
	char order[64];
	char *out = NULL;
	char *log;
	const char *update[] = {"ips", "update", "stripe", "--from", url, NULL};
	const char *show[] = {"ips", "show", "stripe", NULL};

	(void)state;
	assert_non_null(lists);
	fx_daemon_start(&d, T_INI);
	snprintf(url, sizeof(url), "%s/files/ips/ips_webhooks.txt", peer_base(lists));
	snprintf(path, sizeof(path), "%s/sender-ips/stripe.txt", d.dm_dir);
	assert_int_equal(peer_default(lists, NULL, &served), 0);
	assert_int_equal(daemon_cli(&d, 1, update, &out), 0);
	free(out);
	/* The update as if it ran before the shipped list was taken. */
	rewrite_date(path, "2026-01-10");
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	assert_int_equal(daemon_log_wait(&d, "SIGHUP: configuration", 10000), 0);
	fx_order(&d, 1999, "usd", order);
	assert_int_equal(post_from(&d, T_OUTSIDE, "evt_ips_old_update", order), 403);
	assert_int_equal(post_from(&d, T_IN_SHIPPED, "evt_ips_shipped", order), 200);
	assert_int_equal(fx_db_int(&d, "SELECT status = 'paid' FROM orders WHERE id = '%s'", order),
	                 1);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(strstr(log, "sender-ips/stripe.txt is dated 2026-01-10, older than the "
	                            "stripe list shipped with idemhook (2026-05-15)"));
	free(log);
	fx_cli_says(&d, show, 0, "shipped with idemhook, dated 2026-05-15");
	/* An update newer than the shipped list is in force again. */
	rewrite_date(path, "2026-06-01");
	assert_int_equal(daemon_cli(&d, 1, show, &out), 0);
	assert_non_null(strstr(out, "sender-ips/stripe.txt, dated 2026-06-01"));
	assert_non_null(strstr(out, "\n" T_UPDATED_RANGE "\n"));
	free(out);
	daemon_finish(&d);
	peer_destroy(lists);
}

static void test_a_provider_that_publishes_no_list_refuses_the_preset_with_its_advice(void **state)
{
	struct daemon d;
	char *log;

	(void)state;
	assert_int_equal(
	        daemon_init(&d, "[provider adyen]\ntype = adyen\nhmac_key = "
	                        "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056\n"
	                        "allow_from = provider:adyen\n"),
	        0);
	assert_int_equal(daemon_start(&d), -1);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_non_null(
	        strstr(log, "allow_from = provider:adyen: Adyen publishes no list of addresses"));
	assert_non_null(strstr(log, "out.adyen.com"));
	free(log);
	daemon_finish(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_provider_stripe_admits_an_address_in_the_shipped_list_and_refuses_one_outside_it),
	        cmocka_unit_test(test_ips_update_writes_the_served_list_and_a_reload_takes_it),
	        cmocka_unit_test(test_ips_an_unknown_provider_is_a_usage_error),
	        cmocka_unit_test(test_ips_update_refuses_an_unusable_ca_file_before_fetching),
	        cmocka_unit_test(test_an_update_older_than_the_shipped_list_gives_way_to_it),
	        cmocka_unit_test(
	                test_a_signed_callback_from_an_unlisted_address_says_the_list_may_be_old),
	        cmocka_unit_test(
	                test_a_provider_that_publishes_no_list_refuses_the_preset_with_its_advice),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
