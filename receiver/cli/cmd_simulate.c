/* cmd_simulate.c: `idemhook simulate PROVIDER EVENT`: a provider's callback built,
 * signed and sent as the provider would, and the answer printed. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "buf.h"
#include "capture.h"
#include "cli.h"
#include "config.h"
#include "crypto.h"
#include "env.h"
#include "httpc.h"
#include "money.h"
#include "orders.h"
#include "provider.h"
#include "store.h"

#define SIMULATE_DIR "simulate"                /* beside the database */
#define SIMULATE_PRIVATE_KEY "private-key.pem" /* the throwaway key pair */
#define SIMULATE_PUBLIC_KEY "public-key.pem"
#define SIMULATE_APIV3_KEY "wechatpay-apiv3-key"
#define SIMULATE_KEY_BITS 2048
#define SIMULATE_KEY_MAX (16 * 1024)      /* bytes of the private key file */
#define SIMULATE_ANSWER_MAX (1024 * 1024) /* bytes of an answer printed */
#define SIMULATE_TIMEOUT_MS 30000
#define SIMULATE_ID_BYTES 12 /* random bytes of a callback id: 24 hex characters */

struct simulate_opts {
	const char *so_provider;
	const char *so_event;
	const char *so_order;
	const char *so_to;
	const char *so_currency;
	const char *so_context; /* thin-payment: a connected account's context, or NULL */
	int64_t so_amount; /* -1: from the order */
	int so_print_config;
};

static void cmd_simulate_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] simulate PROVIDER payment|refund|thin-payment --order "
	        "ID\n"
	        "                [--amount MINOR] [--currency CODE] [--context ACCOUNT] [--to "
	        "URL]\n"
	        "       idemhook [-c FILE] simulate PROVIDER duplicate [--to URL]\n"
	        "       idemhook [-c FILE] simulate --print-config\n\n"
	        "Builds the callback the provider instance PROVIDER ([provider PROVIDER] of the\n"
	        "configuration) would send, with a fresh id and timestamp, signs it as the\n"
	        "provider signs (with the instance's secret; WeChat Pay and Alipay with a\n"
	        "throwaway key pair), sends it and prints the answer.\n\n"
	        "  payment            the order's payment (amount and currency from the database)\n"
	        "  refund             a refund of what is left, or of --amount (a partial refund)\n"
	        "  thin-payment       Stripe: the payment as a thin event (event destinations):\n"
	        "                     idemhook fetches the full event from api_base_url\n"
	        "  duplicate          the last callback for PROVIDER again, byte for byte\n"
	        "  --order ID         the order the callback is about\n"
	        "  --amount MINOR     amount in minor units instead of the order's\n"
	        "  --currency CODE    currency instead of the order's\n"
	        "  --context ACCOUNT  thin-payment: the event of a connected account, e.g.\n"
	        "                     acct_1Nv0FGQ9RKHgCVdK (account ids joined by /), which\n"
	        "                     idemhook fetches in that context (Stripe-Context)\n"
	        "  --to URL           where to send it (default: the configured listener,\n"
	        "                     http://HOST:PORT/hooks/PROVIDER); https:// is verified\n"
	        "                     against the system CAs or [client] ca_file\n"
	        "  --print-config     make the throwaway key pair (once) and print the provider\n"
	        "                     sections of a test instance that accepts it\n\n"
	        "Exit status: 0 for a 2xx answer, 65 for any other answer, 66 no such order (or\n"
	        "no earlier callback to duplicate), 69 when no answer came.\n");
}

/* Makes dir (mode 0700) and its parent when missing: beside a SQLite
 * database the parent exists; with a PostgreSQL store it may not. Returns 0
 * or -1 (told). */
static int simulate_mkdir(const char *dir)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(dir, '/');

	if (slash != NULL && slash != dir && (size_t)(slash - dir) < sizeof(parent)) {
		memcpy(parent, dir, (size_t)(slash - dir));
		parent[slash - dir] = '\0';
		if (cli_mkdir_private("simulate", parent) < 0) {
			return -1;
		}
	}
	return cli_mkdir_private("simulate", dir);
}

/* DIR of the database + "/simulate", into out. Returns 0 or -1. */
static int simulate_dir(const struct config *cf, char *out, size_t out_size)
{
	const char *db = cf->cf_db_path;
	const char *slash = strrchr(db, '/');
	int n;

	if (slash == NULL) {
		n = snprintf(out, out_size, "%s", SIMULATE_DIR);
	} else {
		n = snprintf(out, out_size, "%.*s/%s", (int)(slash - db), db, SIMULATE_DIR);
	}
	return n < 0 || (size_t)n >= out_size ? -1 : 0;
}

static int simulate_path(const char *dir, const char *name, char *out, size_t out_size)
{
	int n = snprintf(out, out_size, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= out_size ? -1 : 0;
}

/* Makes the throwaway key pair and WeChat Pay API v3 key once. */
static int simulate_keys_ensure(const char *dir)
{
	static const char alnum[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	char priv_path[PATH_MAX];
	char pub_path[PATH_MAX];
	char apiv3_path[PATH_MAX];
	char *priv = NULL;
	char *pub = NULL;
	unsigned char raw[32];
	char apiv3[32];
	size_t i;
	int rc = -1;

	if (simulate_path(dir, SIMULATE_PRIVATE_KEY, priv_path, sizeof(priv_path)) < 0 ||
	    simulate_path(dir, SIMULATE_PUBLIC_KEY, pub_path, sizeof(pub_path)) < 0 ||
	    simulate_path(dir, SIMULATE_APIV3_KEY, apiv3_path, sizeof(apiv3_path)) < 0) {
		fprintf(stderr, "simulate: the directory name %s is too long\n", dir);
		return -1;
	}
	if (simulate_mkdir(dir) < 0) {
		return -1;
	}
	if (access(priv_path, F_OK) != 0 || access(pub_path, F_OK) != 0) {
		if (crypto_rsa_generate(SIMULATE_KEY_BITS, &priv, &pub) < 0 ||
		    cli_write_private("simulate", pub_path, pub, strlen(pub)) < 0 ||
		    cli_write_private("simulate", priv_path, priv, strlen(priv)) < 0) {
			goto done;
		}
	}
	if (access(apiv3_path, F_OK) != 0) {
		if (crypto_random(raw, sizeof(raw)) < 0) {
			goto done;
		}
		for (i = 0; i < sizeof(apiv3); i++) {
			apiv3[i] = alnum[raw[i] % (sizeof(alnum) - 1)];
		}
		if (cli_write_private("simulate", apiv3_path, apiv3, sizeof(apiv3)) < 0) {
			goto done;
		}
	}
	rc = 0;
done:
	if (priv != NULL) {
		memset(priv, 0, strlen(priv));
	}
	free(priv);
	free(pub);
	return rc;
}

static int simulate_print_config(const struct config *cf)
{
	char dir[PATH_MAX];
	char abs[PATH_MAX];

	if (simulate_dir(cf, dir, sizeof(dir)) < 0 || simulate_keys_ensure(dir) < 0) {
		return EX_CANTCREAT;
	}
	if (realpath(dir, abs) == NULL) {
		fprintf(stderr, "simulate: %s: %s\n", dir, strerror(errno));
		return EX_CANTCREAT;
	}
	printf("; Test instances for `idemhook simulate`. WeChat Pay and Alipay sign with\n"
	       "; their own private keys, so simulate signs with a throwaway key pair made\n"
	       "; for this configuration: its private half is %s/%s.\n"
	       "; Never configure these keys on a production instance.\n\n"
	       "[provider wechatpay]\n"
	       "type = wechatpay\n"
	       "platform_key = PUB_KEY_ID_IDEMHOOK_SIMULATE file:%s/%s\n"
	       "apiv3_key = file:%s/%s\n\n"
	       "[provider alipay]\n"
	       "type = alipay\n"
	       "app_id = 2021000000000000\n"
	       "public_key = file:%s/%s\n\n"
	       "; Stripe, Standard Webhooks, Adyen and hmac instances need nothing extra:\n"
	       "; simulate signs with the secret they are configured with.\n",
	       abs, SIMULATE_PRIVATE_KEY, abs, SIMULATE_PUBLIC_KEY, abs, SIMULATE_APIV3_KEY, abs,
	       SIMULATE_PUBLIC_KEY);
	return EX_OK;
}

/* The throwaway private key, or NULL when none was made yet. */
static struct crypto_privkey *simulate_key_load(const char *dir)
{
	char path[PATH_MAX];
	char err[256];
	char *pem = NULL;
	size_t len = 0;
	struct crypto_privkey *key;

	if (simulate_path(dir, SIMULATE_PRIVATE_KEY, path, sizeof(path)) < 0 ||
	    access(path, F_OK) != 0) {
		return NULL;
	}
	if (capture_read_file(path, SIMULATE_KEY_MAX, &pem, &len, err, sizeof(err)) < 0) {
		fprintf(stderr, "simulate: %s: %s\n", path, err);
		return NULL;
	}
	key = crypto_privkey_load(pem, len);
	memset(pem, 0, len);
	free(pem);
	return key;
}

/* The configured listener's URL for instance name, into out. */
static int simulate_default_url(const struct config *cf, const char *name, char *out,
                                size_t out_size)
{
	const char *host = cf->cf_listen_host;
	const char *scheme = config_get(cf, "server", "tls_cert") != NULL ? "https" : "http";
	unsigned port = cf->cf_listen_port;
	int n;

	if (host == NULL || host[0] == '\0' || strcmp(host, "0.0.0.0") == 0) {
		host = "127.0.0.1";
	} else if (strcmp(host, "::") == 0) {
		host = "::1";
	}
	if (port == 0 && cf->cf_port_file != NULL) {
		FILE *f = fopen(cf->cf_port_file, "r");

		if (f == NULL || fscanf(f, "%u", &port) != 1) {
			port = 0;
		}
		if (f != NULL) {
			fclose(f);
		}
	}
	if (port == 0) {
		fprintf(stderr, "simulate: the listener's port is chosen at start and [server] "
		                "port_file names no port yet: give --to URL\n");
		return -1;
	}
	n = snprintf(out, out_size,
	             strchr(host, ':') != NULL ? "%s://[%s]:%u/hooks/%s" : "%s://%s:%u/hooks/%s",
	             scheme, host, port, name);
	return n < 0 || (size_t)n >= out_size ? -1 : 0;
}

/* Reads the order: 1 found, 0 not (no database, or no such order), or -1
 * with an exit code in *ret_rc. */
static int simulate_order(const struct config *cf, const char *id, struct api_order *ret,
                          int *ret_rc)
{
	struct store *st = NULL;
	int rc;

	if (cf->cf_backend == STORE_BACKEND_SQLITE && access(cf->cf_db_path, F_OK) != 0) {
		return 0;
	}
	*ret_rc = cli_open_store(cf, 1, &st);
	if (*ret_rc != EX_OK) {
		return -1;
	}
	rc = api_order_load(st, env_clock_ms(), id, ret);
	store_destroy(st);
	*ret_rc = EX_TEMPFAIL;
	return rc;
}

/* Fills sim from the options and the order. A payment given --amount and
 * --currency is built from the command line alone: the database is not
 * opened (it may be out of reach, or not hold the order at all). A refund
 * reads the order's refunded total. Returns EX_OK or an exit code. */
static int simulate_fill(const struct config *cf, const struct simulate_opts *o,
                         struct provider_sim *sim)
{
	struct api_order order;
	int found = 0;
	int rc = EX_OK;

	memset(&order, 0, sizeof(order));
	if (sim->ps_kind == PROVIDER_SIM_REFUND || o->so_amount < 0 || o->so_currency == NULL) {
		found = simulate_order(cf, o->so_order, &order, &rc);
		if (found < 0) {
			return rc;
		}
	}
	if (found == 0 && (o->so_amount < 0 || o->so_currency == NULL)) {
		fprintf(stderr,
		        "simulate: no order %s in %s; give --amount and --currency for an order "
		        "this database does not hold\n",
		        o->so_order,
		        cf->cf_backend == STORE_BACKEND_POSTGRESQL ? "the postgresql database" : cf->cf_db_path);
		return CLI_EX_NOT_FOUND;
	}
	if (money_currency_normalize(o->so_currency != NULL ? o->so_currency : order.ao_currency,
	                             sim->ps_currency) < 0) {
		fprintf(stderr, "simulate: --currency takes a three-letter ISO 4217 code\n");
		return EX_USAGE;
	}
	sim->ps_order_id = o->so_order;
	sim->ps_order_amount = found ? order.ao_amount : o->so_amount;
	if (sim->ps_kind != PROVIDER_SIM_REFUND) {
		sim->ps_amount = o->so_amount >= 0 ? o->so_amount : order.ao_amount;
		return EX_OK;
	}
	sim->ps_amount = o->so_amount >= 0 ? o->so_amount : order.ao_amount - order.ao_refunded;
	if (sim->ps_amount <= 0) {
		fprintf(stderr, "simulate: order %s has nothing left to refund; give --amount\n",
		        o->so_order);
		return EX_DATAERR;
	}
	sim->ps_refunded_total = order.ao_refunded + sim->ps_amount;
	return EX_OK;
}

/* Sends hdrs and body to url and prints the answer. Returns the exit code. */
static int simulate_send(const struct config *cf, const char *url, const struct httpc_headers *hdrs,
                         const char *body, size_t body_len)
{
	struct httpc_request req;
	struct httpc_response resp;
	char err[HTTPC_ERR_MAX];
	size_t i;
	int ok;

	memset(&req, 0, sizeof(req));
	req.hcq_method = "POST";
	req.hcq_url = url;
	req.hcq_headers = hdrs;
	req.hcq_body = body;
	req.hcq_body_len = body_len;
	req.hcq_response_max = SIMULATE_ANSWER_MAX;
	req.hcq_timeout_ms = SIMULATE_TIMEOUT_MS;
	req.hcq_ca_file = config_client_ca_file(cf);
	if (httpc_exchange(&req, &resp, err, sizeof(err)) < 0) {
		fprintf(stderr, "simulate: %s: %s\n", url, err);
		return EX_UNAVAILABLE;
	}
	printf("HTTP %ld\n", resp.hcr_status);
	for (i = 0; i < resp.hcr_headers.hch_n; i++) {
		printf("%s: %s\n", resp.hcr_headers.hch_v[i].hh_name,
		       resp.hcr_headers.hch_v[i].hh_value);
	}
	printf("\n");
	fwrite(resp.hcr_body, 1, resp.hcr_body_len, stdout);
	if (resp.hcr_body_len > 0 && resp.hcr_body[resp.hcr_body_len - 1] != '\n') {
		printf("\n");
	}
	fflush(stdout);
	ok = resp.hcr_status >= 200 && resp.hcr_status < 300;
	httpc_response_finish(&resp);
	return ok ? EX_OK : EX_DATAERR;
}

static int simulate_last_path(const struct config *cf, const char *name, char *out, size_t out_size)
{
	char dir[PATH_MAX];
	int n;

	if (simulate_dir(cf, dir, sizeof(dir)) < 0) {
		return -1;
	}
	n = snprintf(out, out_size, "%s/last-%s%s", dir, name, CAPTURE_SUFFIX);
	return n < 0 || (size_t)n >= out_size ? -1 : 0;
}

/* Keeps the callback, in capture format, for `duplicate` (and replay). */
static int simulate_save(const struct config *cf, const struct provider_conf *pc,
                         const struct httpc_headers *hdrs, const struct buf *body)
{
	char dir[PATH_MAX];
	char path[PATH_MAX];
	char target[CAPTURE_PROVIDER_MAX + 16];
	struct http_request req;
	struct buf text;
	int rc = -1;

	if (simulate_dir(cf, dir, sizeof(dir)) < 0 ||
	    simulate_last_path(cf, pc->pc_name, path, sizeof(path)) < 0) {
		return -1;
	}
	if (simulate_mkdir(dir) < 0) {
		return -1;
	}
	snprintf(target, sizeof(target), "/hooks/%s", pc->pc_name);
	memset(&req, 0, sizeof(req));
	req.hr_method = "POST";
	req.hr_url = target;
	req.hr_path = target;
	req.hr_version = "HTTP/1.1";
	req.hr_headers = hdrs->hch_v;
	req.hr_n_headers = hdrs->hch_n;
	req.hr_body = (const unsigned char *)body->buf_data;
	req.hr_body_len = body->buf_len;
	req.hr_peer = "simulate";
	req.hr_received_ms = cli_now_ms();
	buf_init(&text, 0);
	if (capture_format(&text, pc->pc_name, &req, 0) == 0 &&
	    cli_write_private("simulate", path, text.buf_data, text.buf_len) == 0) {
		rc = 0;
	}
	buf_finish(&text);
	return rc;
}

static int simulate_duplicate(const struct config *cf, const struct provider_conf *pc,
                              const char *url)
{
	char path[PATH_MAX];
	char err[256];
	struct capture_record rec;
	struct httpc_headers hdrs;
	size_t i;
	int rc;

	if (simulate_last_path(cf, pc->pc_name, path, sizeof(path)) < 0) {
		return EX_SOFTWARE;
	}
	if (access(path, F_OK) != 0) {
		fprintf(stderr,
		        "simulate: no callback was simulated for %s yet (%s): simulate a payment "
		        "or refund first\n",
		        pc->pc_name, path);
		return CLI_EX_NOT_FOUND;
	}
	if (capture_read(path, &rec, err, sizeof(err)) < 0) {
		fprintf(stderr, "simulate: %s: %s\n", path, err);
		return EX_DATAERR;
	}
	/* It was written as a capture, which keeps no credential. */
	capture_restore_auth(pc, &rec);
	httpc_headers_init(&hdrs);
	for (i = 0; i < rec.cr_req.hr_n_headers; i++) {
		httpc_headers_add(&hdrs, rec.cr_req.hr_headers[i].hh_name,
		                  rec.cr_req.hr_headers[i].hh_value);
	}
	if (hdrs.hch_overflow) {
		rc = EX_DATAERR;
	} else {
		fprintf(stderr, "simulate: %s: the last %s callback again, byte for byte\n", url,
		        pc->pc_name);
		rc = simulate_send(cf, url, &hdrs, (const char *)rec.cr_req.hr_body,
		                   rec.cr_req.hr_body_len);
	}
	httpc_headers_finish(&hdrs);
	capture_record_finish(&rec);
	return rc;
}

static int simulate_new(const struct config *cf, const struct provider_conf *pc,
                        const struct simulate_opts *o, const char *url)
{
	struct provider_sim sim;
	struct httpc_headers hdrs;
	struct buf body;
	unsigned char raw[SIMULATE_ID_BYTES];
	char id[2 * SIMULATE_ID_BYTES + 1];
	char dir[PATH_MAX];
	struct crypto_privkey *key = NULL;
	int rc;

	memset(&sim, 0, sizeof(sim));
	sim.ps_kind = strcmp(o->so_event, "refund") == 0         ? PROVIDER_SIM_REFUND
	              : strcmp(o->so_event, "thin-payment") == 0 ? PROVIDER_SIM_THIN_PAYMENT
	                                                         : PROVIDER_SIM_PAYMENT;
	rc = simulate_fill(cf, o, &sim);
	if (rc != EX_OK) {
		return rc;
	}
	if (crypto_random(raw, sizeof(raw)) < 0 || simulate_dir(cf, dir, sizeof(dir)) < 0) {
		return EX_SOFTWARE;
	}
	crypto_hex_encode(raw, sizeof(raw), id);
	sim.ps_id = id;
	key = simulate_key_load(dir);
	sim.ps_key = key;
	sim.ps_context = o->so_context;
	httpc_headers_init(&hdrs);
	buf_init(&body, 0);
	if (pc->pc_provider->p_simulate(pc, &sim, cli_now_ms() / 1000, &body, httpc_headers_add,
	                                &hdrs) < 0 ||
	    hdrs.hch_overflow) {
		/* No article before the type's name: "a alipay", "a adyen". */
		fprintf(stderr, "simulate: cannot build a callback for %s (type %s; see above)\n",
		        pc->pc_name, pc->pc_provider->p_name);
		rc = EX_CONFIG;
		goto done;
	}
	if (simulate_save(cf, pc, &hdrs, &body) < 0) {
		rc = EX_CANTCREAT;
		goto done;
	}
	fprintf(stderr, "simulate: %s: %s %s of %lld %s for order %s%s%s (id %s)\n", url,
	        pc->pc_name, o->so_event, (long long)sim.ps_amount, sim.ps_currency,
	        sim.ps_order_id, o->so_context != NULL ? " in context " : "",
	        o->so_context != NULL ? o->so_context : "", id);
	rc = simulate_send(cf, url, &hdrs, body.buf_data, body.buf_len);
done:
	crypto_privkey_destroy(key);
	httpc_headers_finish(&hdrs);
	buf_finish(&body);
	return rc;
}

static int cmd_simulate_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"order", required_argument, NULL, 'o'},
	        {"amount", required_argument, NULL, 'a'},
	        {"currency", required_argument, NULL, 'C'},
	        {"context", required_argument, NULL, 'x'},
	        {"to", required_argument, NULL, 't'},
	        {"print-config", no_argument, NULL, 'P'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct simulate_opts o;
	const struct provider_conf *pc;
	struct config *cf = NULL;
	char url[1024];
	int c;
	int rc;

	memset(&o, 0, sizeof(o));
	o.so_amount = -1;
	optind = 0;
	while ((c = cli_getopt(argc, argv, "h", opts)) != -1) {
		switch (c) {
		case 'o':
			o.so_order = optarg;
			break;
		case 'a':
			if (money_parse_minor(optarg, &o.so_amount) < 0 || o.so_amount == 0) {
				fprintf(stderr,
				        "simulate: --amount takes minor units above 0, e.g. 500\n");
				return EX_USAGE;
			}
			break;
		case 'C':
			o.so_currency = optarg;
			break;
		case 'x':
			/* As the receiver checks a thin event's context. */
			if (!provider_context_valid(optarg)) {
				fprintf(stderr,
				        "simulate: --context takes a connected account's id, or "
				        "ids "
				        "joined by /: letters, digits and _, at most %d bytes, "
				        "e.g. "
				        "acct_1Nv0FGQ9RKHgCVdK\n",
				        PROVIDER_CONTEXT_MAX);
				return EX_USAGE;
			}
			o.so_context = optarg;
			break;
		case 't':
			o.so_to = optarg;
			break;
		case 'P':
			o.so_print_config = 1;
			break;
		case 'h':
			cmd_simulate_usage(stdout);
			return EX_OK;
		default:
			cmd_simulate_usage(stderr);
			return EX_USAGE;
		}
	}
	if (o.so_print_config) {
		if (optind != argc) {
			cmd_simulate_usage(stderr);
			return EX_USAGE;
		}
		rc = cli_load_config_secrets(config_path, &cf);
		if (rc == EX_OK) {
			rc = simulate_print_config(cf);
		}
		config_destroy(cf);
		return rc;
	}
	if (argc - optind != 2) {
		cmd_simulate_usage(stderr);
		return EX_USAGE;
	}
	o.so_provider = argv[optind];
	o.so_event = argv[optind + 1];
	if (strcmp(o.so_event, "payment") != 0 && strcmp(o.so_event, "refund") != 0 &&
	    strcmp(o.so_event, "duplicate") != 0 && strcmp(o.so_event, "thin-payment") != 0) {
		fprintf(stderr,
		        "simulate: EVENT is payment, refund, thin-payment or duplicate, not \"%s\"\n",
		        o.so_event);
		return EX_USAGE;
	}
	if (strcmp(o.so_event, "duplicate") != 0 &&
	    (o.so_order == NULL || !api_order_id_valid(o.so_order))) {
		fprintf(stderr, "simulate: %s needs --order with an order id (ord_...)\n",
		        o.so_event);
		return EX_USAGE;
	}
	if (o.so_context != NULL && strcmp(o.so_event, "thin-payment") != 0) {
		fprintf(stderr,
		        "simulate: --context goes with thin-payment (a Stripe thin event of "
		        "a connected account), not %s\n",
		        o.so_event);
		return EX_USAGE;
	}
	if (o.so_to != NULL && !httpc_url_ok(o.so_to)) {
		fprintf(stderr, "simulate: --to takes an http:// or https:// URL\n");
		return EX_USAGE;
	}
	rc = cli_load_config_secrets(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	pc = config_provider(cf, o.so_provider);
	if (pc == NULL) {
		fprintf(stderr, "simulate: the configuration has no [provider %s]\n",
		        o.so_provider);
		rc = EX_USAGE;
		goto out;
	}
	if (strcmp(o.so_event, "thin-payment") == 0 &&
	    strcmp(pc->pc_provider->p_name, "stripe") != 0) {
		fprintf(stderr, "simulate: thin events are Stripe's (event destinations); %s is %s\n",
		        pc->pc_name, pc->pc_provider->p_name);
		rc = EX_USAGE;
		goto out;
	}
	if (pc->pc_provider->p_simulate == NULL) {
		fprintf(stderr, "simulate: the %s profile cannot be simulated\n",
		        pc->pc_provider->p_name);
		rc = EX_USAGE;
		goto out;
	}
	/* The callback goes out with it: refused before anything is sent. */
	rc = cli_check_client_ca_file(cf);
	if (rc != EX_OK) {
		goto out;
	}
	if (o.so_to != NULL) {
		snprintf(url, sizeof(url), "%s", o.so_to);
	} else if (simulate_default_url(cf, pc->pc_name, url, sizeof(url)) < 0) {
		rc = EX_USAGE;
		goto out;
	}
	if (strcmp(o.so_event, "duplicate") == 0) {
		rc = simulate_duplicate(cf, pc, url);
	} else {
		rc = simulate_new(cf, pc, &o, url);
	}
out:
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_simulate = {
        .cc_name = "simulate",
        .cc_summary = "send a provider's signed callback, as the provider would",
        .cc_run = cmd_simulate_run,
};
