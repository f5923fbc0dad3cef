/* test_simulate_e2e.c: `idemhook simulate` for every provider profile against
 * a real daemon configured as docs/providers.md says: the callback pays the
 * order, its duplicate is replayed, a refund lands, and a receiver holding
 * another secret (or key) refuses it. Over HTTPS too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"
#include "provider_e2e.h"

/* One provider instance: its section as the docs write it (secrets in files
 * under the daemon's directory, @DIR@), the files to write, and a second
 * version of the same files that the wrong receiver gets. */
struct sim_case {
	const char *sc_name;
	const char *sc_currency;
	const char *sc_ini;         /* @DIR@ stands for the daemon's directory */
	const char *sc_files[3][3]; /* name, right content, wrong content */
	int sc_keypair;             /* sections come from simulate --print-config */
};

static const struct sim_case sim_cases[] = {
        {
                .sc_name = "stripe",
                .sc_currency = "usd",
                .sc_ini = "[provider stripe]\ntype = stripe\nsecret = file:@DIR@/stripe-secret\n",
                .sc_files = {{"stripe-secret", "whsec_simulate_right\n", "whsec_simulate_wrong\n"}},
        },
        {
                .sc_name = "saas-billing",
                .sc_currency = "usd",
                .sc_ini = "[provider saas-billing]\ntype = standard-webhooks\n"
                          "secret = file:@DIR@/saas-billing-secret\n"
                          "paid_types = invoice.paid, payment.succeeded\n"
                          "refunded_types = payment.refunded\n"
                          "order_path = data.metadata.order_id\n"
                          "amount_path = data.amount\n"
                          "currency_path = data.currency\n",
                .sc_files = {{"saas-billing-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                              "whsec_QmFzZTY0IGlzIG5vdCB0aGUgcmlnaHQga2V5"}},
        },
        {
                .sc_name = "adyen",
                .sc_currency = "eur",
                .sc_ini =
                        "[provider adyen]\ntype = adyen\nhmac_key = file:@DIR@/adyen-hmac\n"
                        "basic_user = idemhook\nbasic_password = file:@DIR@/adyen-basic-password\n"
                        "merchant_account = ShopCOM\nretention = 31d\n",
                .sc_files = {{"adyen-hmac",
                              "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
                              "0011223344556677889900112233445566778899001122334455667788990011"},
                             {"adyen-basic-password", "right-password", "right-password"}},
        },
        {
                .sc_name = "shop-backend",
                .sc_currency = "usd",
                .sc_ini = "[provider shop-backend]\ntype = hmac\nsecret = "
                          "file:@DIR@/shop-backend-secret\n"
                          "header = X-Hub-Signature-256\nprefix = sha256=\nalgorithm = sha256\n"
                          "encoding = hex\nkey_header = X-Delivery\nsigned_content = {id}.{body}\n"
                          "type_path = action\n"
                          "paid_types = paid\nrefunded_types = refunded\norder_path = order.id\n"
                          "amount_path = order.total\ncurrency_path = order.currency\n",
                .sc_files = {{"shop-backend-secret", "shop-secret-right", "shop-secret-wrong"}},
        },
        {.sc_name = "wechatpay", .sc_currency = "cny", .sc_keypair = 1},
        {.sc_name = "alipay", .sc_currency = "cny", .sc_keypair = 1},
};

#define N_CASES (sizeof(sim_cases) / sizeof(sim_cases[0]))

/* Runs `idemhook -c <d's config> ARGS...`; returns the exit status, stdout in *ret_out. */
static int cli(struct daemon *d, const char *const *args, char **ret_out)
{
	return daemon_cli(d, 1, args, ret_out);
}

/* Gives d the provider sections of case c: the right or the wrong secrets.
 * For the key-pair profiles, the sections simulate --print-config prints
 * for d's configuration (wrong: the key pair of another configuration). */
static void configure(struct daemon *d, const struct sim_case *c, int wrong, struct daemon *keys_of)
{
	char ini[2048];
	size_t i;

	if (c->sc_keypair) {
		const char *args[] = {"simulate", "--print-config", NULL};
		char *out = NULL;

		assert_int_equal(cli(keys_of, args, &out), 0);
		assert_non_null(strstr(out, "[provider wechatpay]"));
		assert_int_equal(daemon_append_config(d, out), 0);
		free(out);
		return;
	}
	for (i = 0; i < 3 && c->sc_files[i][0] != NULL; i++) {
		assert_int_equal(
		        daemon_write_file(d, c->sc_files[i][0], c->sc_files[i][wrong ? 2 : 1]), 0);
	}
	{
		const char *p = c->sc_ini;
		size_t n = 0;

		while (*p != '\0') {
			if (strncmp(p, "@DIR@", 5) == 0) {
				n += (size_t)snprintf(ini + n, sizeof(ini) - n, "%s", d->dm_dir);
				p += 5;
			} else {
				ini[n++] = *p++;
			}
			assert_true(n < sizeof(ini) - 1);
		}
		ini[n] = '\0';
	}
	assert_int_equal(daemon_append_config(d, ini), 0);
}

static void order_create(struct daemon *d, const char *currency, char id[64])
{
	fx_order(d, 1999, currency, id);
}

static char *order_text(struct daemon *d, const char *id, const char *column)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT %s FROM orders WHERE id = '%s'", column, id);
	return hn_db_dump(d->dm_db, sql);
}

static void expect_order(struct daemon *d, const char *id, const char *status, int64_t refunded)
{
	char *s = order_text(d, id, "status");

	assert_non_null(s);
	s[strcspn(s, "\n")] = '\0';
	assert_string_equal(s, status);
	free(s);
	assert_int_equal(e2e_db_int(d, "SELECT refunded_amount FROM orders WHERE id = '%s'", id),
	                 refunded);
}

static void simulate_case(const struct sim_case *c)
{
	struct daemon d;
	struct daemon wrong;
	struct daemon keys;
	char order[64];
	char other[64];
	char to[256];
	const char *pay[] = {"simulate", c->sc_name, "payment", "--order", order, NULL};
	const char *dup[] = {"simulate", c->sc_name, "duplicate", NULL};
	const char *part[] = {"simulate", c->sc_name, "refund", "--order",
	                      order,      "--amount", "500",    NULL};
	const char *rest[] = {"simulate", c->sc_name, "refund", "--order", order, NULL};
	const char *refused[] = {"simulate", c->sc_name, "payment", "--order",
	                         other,      "--to",     to,        NULL};
	char *out = NULL;
	int64_t records;

	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, c, 0, &d);
	assert_int_equal(daemon_start(&d), 0);
	order_create(&d, c->sc_currency, order);
	order_create(&d, c->sc_currency, other);

	/* The payment: accepted in the provider's format, the order paid. */
	assert_int_equal(cli(&d, pay, &out), 0);
	assert_non_null(strstr(out, "HTTP 20"));
	assert_null(strstr(out, "Idempotent-Replayed"));
	free(out);
	expect_order(&d, order, "paid", 0);
	records = e2e_db_int(&d, "SELECT COUNT(*) FROM idempotency_records");
	assert_true(records >= 1);

	/* The same bytes again: the stored answer, marked replayed, nothing new. */
	assert_int_equal(cli(&d, dup, &out), 0);
	assert_non_null(strstr(out, "Idempotent-Replayed: true"));
	free(out);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"), records);
	expect_order(&d, order, "paid", 0);

	/* A partial refund, then the rest. */
	assert_int_equal(cli(&d, part, &out), 0);
	free(out);
	expect_order(&d, order, "partially_refunded", 500);
	assert_int_equal(cli(&d, rest, &out), 0);
	free(out);
	expect_order(&d, order, "refunded", 1999);

	/* A receiver holding another secret (another key pair) refuses it, and
	 * nothing is stored there. */
	/* For the key-pair profiles: another configuration, so another
	 * database directory and another pair. */
	assert_int_equal(daemon_init(&keys, NULL), 0);
	assert_int_equal(daemon_init(&wrong, NULL), 0);
	configure(&wrong, c, 1, &keys);
	assert_int_equal(daemon_start(&wrong), 0);
	snprintf(to, sizeof(to), "%s/hooks/%s", wrong.dm_base, c->sc_name);
	assert_int_equal(cli(&d, refused, &out), 65);
	assert_non_null(strstr(out, "HTTP 401"));
	free(out);
	assert_int_equal(e2e_db_int(&wrong, "SELECT COUNT(*) FROM idempotency_records"), 0);
	expect_order(&d, other, "pending", 0);
	assert_int_equal(daemon_term(&wrong, 20), 0);
	daemon_finish(&wrong);
	daemon_finish(&keys);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

static void test_simulated_stripe_callback_pays_once_and_its_duplicate_is_replayed(void **state)
{
	simulate_case(&sim_cases[0]);
}

static void
test_simulated_standard_webhooks_callback_pays_once_and_its_duplicate_is_replayed(void **state)
{
	simulate_case(&sim_cases[1]);
}

static void test_simulated_adyen_notification_pays_once_and_its_duplicate_is_replayed(void **state)
{
	simulate_case(&sim_cases[2]);
}

static void test_simulated_hmac_callback_pays_once_and_its_duplicate_is_replayed(void **state)
{
	simulate_case(&sim_cases[3]);
}

static void
test_simulated_wechatpay_notification_pays_once_and_its_duplicate_is_replayed(void **state)
{
	simulate_case(&sim_cases[4]);
}

static void test_simulated_alipay_notification_pays_once_and_its_duplicate_is_replayed(void **state)
{
	simulate_case(&sim_cases[5]);
}

static void test_simulate_to_https_verifies_the_listener_against_client_ca_file(void **state)
{
	struct daemon d;
	char order[64];
	char ini[800];
	const char *pay[] = {"simulate", "stripe", "payment", "--order", order, NULL};
	const char *to[] = {"simulate", "stripe", "payment", "--order", order, "--to", NULL, NULL};
	char url[256];
	char *out = NULL;

	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, &sim_cases[0], 0, &d);
	assert_int_equal(daemon_use_tls(&d), 0);
	assert_int_equal(daemon_start(&d), 0);
	order_create(&d, "usd", order);
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	to[6] = url;
	/* The system CAs do not know the certificate: no answer, nothing paid. */
	assert_int_equal(cli(&d, to, &out), 69);
	free(out);
	expect_order(&d, order, "pending", 0);
	/* With [client] ca_file it verifies; the default target is https too. */
	snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s\n", d.dm_ca);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(cli(&d, pay, &out), 0);
	assert_non_null(strstr(out, "HTTP 200"));
	free(out);
	expect_order(&d, order, "paid", 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

/* [client] ca_file is the only trust, as its documentation says: the
 * system's CA directory (a directory of the test's own over /etc/ssl/certs,
 * in the CLI's own mount namespace; the machine's is untouched) vouches for
 * the listener, and without ca_file simulate trusts it through that
 * directory; with ca_file naming another CA the listener's certificate is
 * refused and nothing reaches it. libcurl built with a CA directory
 * (Debian's) used to verify against the directory beside the file. */
static void test_simulate_trusts_client_ca_file_alone_not_the_system_ca_directory(void **state)
{
	struct daemon d;
	char order[64];
	char other_order[64];
	char ini[800];
	char cmd[4096];
	char url[256];
	const char *to[] = {"simulate", "stripe", "payment", "--order", NULL, "--to", url, NULL};
	char *out = NULL;
	char *err = NULL;

	if (!hn_can_mount_ns()) {
		print_message("no mount namespace here (root only): not run\n");
		skip();
	}
	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, &sim_cases[0], 0, &d);
	assert_int_equal(daemon_use_tls(&d), 0);
	assert_int_equal(daemon_start(&d), 0);
	order_create(&d, "usd", order);
	order_create(&d, "usd", other_order);
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	/* the directory: the listener's CA under its subject hash, and the
	 * system's bundle (libcurl's default CA file is in that directory,
	 * and it does not vouch for the listener); the other CA: a
	 * certificate of its own */
	snprintf(cmd, sizeof(cmd),
	         "mkdir '%s/certs' && cp '%s' '%s/certs/listener.pem' && openssl rehash '%s/certs' "
	         ">/dev/null 2>&1 && cp /etc/ssl/certs/ca-certificates.crt '%s/certs/' && "
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s/other.key' "
	         "-out '%s/other.pem' -days 1 -subj /CN=other-ca >/dev/null 2>&1",
	         d.dm_dir, d.dm_ca, d.dm_dir, d.dm_dir, d.dm_dir, d.dm_dir, d.dm_dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/certs", d.dm_dir);
	hn_cli_system_certs(cmd);
	/* The directory is in effect: no ca_file, and the listener verifies. */
	to[4] = order;
	assert_int_equal(daemon_cli(&d, 1, to, &out), 0);
	assert_non_null(strstr(out, "HTTP 200"));
	free(out);
	expect_order(&d, order, "paid", 0);
	/* ca_file names another CA: the directory vouches no more. */
	snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s/other.pem\n", d.dm_dir);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	to[4] = other_order;
	assert_int_equal(daemon_cli_err(&d, 1, to, &out, &err), 69);
	if (err == NULL || strstr(err, "certificate") == NULL) {
		fail_msg("simulate said: %s", err != NULL ? err : "(nothing)");
	}
	assert_true(out == NULL || strstr(out, "HTTP 200") == NULL);
	free(out);
	free(err);
	expect_order(&d, other_order, "pending", 0);
	hn_cli_system_certs(NULL);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

/* [client] ca_file names a file TLS cannot load: simulate refuses it up
 * front, as serve would, with the configuration's exit status (78) and
 * the file named; nothing reaches the listener, the order stays pending. */
static void test_simulate_refuses_a_client_ca_file_that_cannot_be_used_before_sending(void **state)
{
	struct daemon d;
	char order[64];
	char ini[800];
	char bad[700];
	char want[900];
	const char *pay[] = {"simulate", "stripe", "payment", "--order", order, NULL};
	char *out = NULL;
	char *err = NULL;

	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, &sim_cases[0], 0, &d);
	assert_int_equal(daemon_use_tls(&d), 0);
	assert_int_equal(daemon_start(&d), 0);
	order_create(&d, "usd", order);
	assert_int_equal(daemon_write_file(&d, "bad.pem", "not a certificate\n"), 0);
	snprintf(bad, sizeof(bad), "%s/bad.pem", d.dm_dir);
	snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s\n", bad);
	assert_int_equal(daemon_append_config(&d, ini), 0);
	assert_int_equal(daemon_cli_err(&d, 1, pay, &out, &err), 78);
	snprintf(want, sizeof(want),
	         "[client] ca_file: the CA file %s cannot be used: it holds no "
	         "PEM certificate",
	         bad);
	if (err == NULL || strstr(err, want) == NULL) {
		fail_msg("simulate said: %s", err != NULL ? err : "(nothing)");
	}
	assert_true(out == NULL || strstr(out, "HTTP ") == NULL);
	free(out);
	free(err);
	expect_order(&d, order, "pending", 0);
	assert_int_equal(hn_db_int(d.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

static void test_simulate_refuses_what_it_cannot_do_with_a_clear_exit_status(void **state)
{
	struct daemon d;
	char order[64];
	const char *unknown[] = {"simulate", "paypal", "payment", "--order", order, NULL};
	const char *no_last[] = {"simulate", "stripe", "duplicate", NULL};
	const char *bad_event[] = {"simulate", "stripe", "chargeback", "--order", order, NULL};
	const char *no_order[] = {"simulate", "stripe", "payment", NULL};
	const char *missing[] = {
	        "simulate", "stripe", "payment", "--order", "ord_aaaaaaaaaaaaaaaaaaaa", NULL};
	const char *bad_to[] = {"simulate", "stripe", "payment",  "--order",
	                        order,      "--to",   "ftp://x/", NULL};

	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, &sim_cases[0], 0, &d);
	assert_int_equal(daemon_start(&d), 0);
	order_create(&d, "usd", order);
	assert_int_equal(cli(&d, unknown, NULL), 64);
	assert_int_equal(cli(&d, no_last, NULL), 66);
	assert_int_equal(cli(&d, bad_event, NULL), 64);
	assert_int_equal(cli(&d, no_order, NULL), 64);
	assert_int_equal(cli(&d, missing, NULL), 66); /* no such order: not found */
	assert_int_equal(cli(&d, bad_to, NULL), 64);
	assert_int_equal(e2e_db_int(&d, "SELECT COUNT(*) FROM idempotency_records"), 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

/* An operator's box whose configuration names a PostgreSQL database out of
 * reach (an outage, a firewall): a payment given --amount and --currency
 * needs nothing of the database, so it is built, signed, sent and
 * answered; the receiver it reaches pays the order. A refund reads the
 * order's refunded total from the database, so it says it cannot (69). */
static void test_simulate_with_amount_and_currency_needs_no_database(void **state)
{
	struct daemon d;
	char order[64];
	char url[256];
	char ini[2048];
	char ini_path[700];
	char key_dir[700];
	const char *pay[] = {"-c",      ini_path, "simulate", "stripe", "payment",
	                     "--order", order,    "--amount", "1999",   "--currency",
	                     "usd",     "--to",   url,        NULL};
	const char *refund[] = {"-c",      ini_path, "simulate", "stripe", "refund",
	                        "--order", order,    "--amount", "500",    "--currency",
	                        "usd",     "--to",   url,        NULL};
	char *out = NULL;

	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, &sim_cases[0], 0, &d);
	assert_int_equal(daemon_start(&d), 0);
	order_create(&d, "usd", order);
	snprintf(url, sizeof(url), "%s/hooks/stripe", d.dm_base);
	/* Nothing listens on port 1: libpq's connection is refused at once. */
	snprintf(key_dir, sizeof(key_dir), "%s/operator", d.dm_dir);
	snprintf(ini, sizeof(ini),
	         "[store]\nbackend = postgresql\nconninfo = host=127.0.0.1 port=1 "
	         "dbname=idemhook user=idemhook connect_timeout=2\npath = %s/idemhook.db\n\n"
	         "[provider stripe]\ntype = stripe\nsecret = file:%s/stripe-secret\n",
	         key_dir, d.dm_dir);
	assert_int_equal(daemon_write_file(&d, "operator.ini", ini), 0);
	snprintf(ini_path, sizeof(ini_path), "%s/operator.ini", d.dm_dir);

	assert_int_equal(daemon_cli(&d, 0, pay, &out), 0);
	assert_non_null(strstr(out, "HTTP 200"));
	free(out);
	expect_order(&d, order, "paid", 0);
	assert_int_equal(daemon_cli(&d, 0, refund, &out), 69);
	free(out);
	expect_order(&d, order, "paid", 0);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

/* A callback simulate cannot sign (the instance's public key is not the
 * half of this box's key pair) says so with a sentence that reads right
 * for any type's name, and sends nothing. */
static void test_simulate_says_which_callback_it_cannot_build(void **state)
{
	struct daemon d;
	struct daemon keys;
	const char *pay[] = {"simulate",
	                     "alipay",
	                     "payment",
	                     "--order",
	                     "ord_aaaaaaaaaaaaaaaaaaaa",
	                     "--amount",
	                     "1999",
	                     "--currency",
	                     "cny",
	                     "--to",
	                     "http://127.0.0.1:1/hooks/alipay",
	                     NULL};
	char *log;

	(void)state;
	assert_int_equal(daemon_init(&keys, NULL), 0);
	assert_int_equal(daemon_init(&d, NULL), 0);
	configure(&d, &sim_cases[5], 0, &keys);
	assert_int_equal(cli(&d, pay, NULL), 78);
	assert_int_equal(daemon_log_wait(&d,
	                                 "simulate: cannot build a callback for alipay (type "
	                                 "alipay; see above)",
	                                 1000),
	                 0);
	log = hn_read_file(d.dm_log);
	assert_non_null(log);
	assert_null(strstr(log, "a alipay"));
	free(log);
	daemon_finish(&d);
	daemon_finish(&keys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_simulated_stripe_callback_pays_once_and_its_duplicate_is_replayed),
	        cmocka_unit_test(
	                test_simulated_standard_webhooks_callback_pays_once_and_its_duplicate_is_replayed),
	        cmocka_unit_test(
	                test_simulated_adyen_notification_pays_once_and_its_duplicate_is_replayed),
	        cmocka_unit_test(
	                test_simulated_hmac_callback_pays_once_and_its_duplicate_is_replayed),
	        cmocka_unit_test(
	                test_simulated_wechatpay_notification_pays_once_and_its_duplicate_is_replayed),
	        cmocka_unit_test(
	                test_simulated_alipay_notification_pays_once_and_its_duplicate_is_replayed),
	        cmocka_unit_test(
	                test_simulate_to_https_verifies_the_listener_against_client_ca_file),
	        cmocka_unit_test(
	                test_simulate_trusts_client_ca_file_alone_not_the_system_ca_directory),
	        cmocka_unit_test(
	                test_simulate_refuses_a_client_ca_file_that_cannot_be_used_before_sending),
	        cmocka_unit_test(test_simulate_refuses_what_it_cannot_do_with_a_clear_exit_status),
	        cmocka_unit_test(test_simulate_with_amount_and_currency_needs_no_database),
	        cmocka_unit_test(test_simulate_says_which_callback_it_cannot_build),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
