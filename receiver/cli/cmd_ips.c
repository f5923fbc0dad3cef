/* cmd_ips.c: `idemhook ips show|update`: the addresses providers publish
 * that their callbacks come from (allow_from = provider:NAME, senders.h). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build_config.h"
#include "buf.h"
#include "cli.h"
#include "config.h"
#include "httpc.h"
#include "provider.h"
#include "senders.h"

#define IPS_TIMEOUT_MS 30000
#define IPS_USER_AGENT "idemhook/" IDEMHOOK_VERSION " (ips update)"

static void cmd_ips_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] ips show PROVIDER\n"
	        "       idemhook [-c FILE] ips update [PROVIDER] [--from URL]\n\n"
	        "The addresses a provider publishes that its callbacks come from, which\n"
	        "allow_from = provider:PROVIDER admits (PROVIDER is a profile: stripe,\n"
	        "wechatpay).\n"
	        "show prints the list in force: the one update wrote into sender-ips/ beside\n"
	        "the database, unless the one shipped with idemhook is newer, else the\n"
	        "shipped one, with its date and source.\n"
	        "update fetches the current list where the provider serves one (every such\n"
	        "provider, or PROVIDER; --from URL: from a mirror of your own) and writes it\n"
	        "into sender-ips/; the daemon reads it at its next reload (SIGHUP).\n"
	        "A provider that publishes no list (adyen, alipay) says what it recommends.\n\n"
	        "Exit status: 0 done, 64 usage (an unknown provider too), 65 a provider\n"
	        "that publishes no list or a fetched list refused, 69 nothing to fetch or\n"
	        "the fetch failed, 73 the list could not be written.\n");
}

static int cmd_ips_dir(const struct config *cf, char *out, size_t out_size)
{
	if (senders_dir(cf->cf_db_path, out, out_size) < 0) {
		fprintf(stderr, "ips: the directory beside %s is too long\n", cf->cf_db_path);
		return -1;
	}
	return 0;
}

static int cmd_ips_show(const struct config *cf, const char *provider)
{
	struct senders_list l;
	char err[SENDERS_ERR_MAX];
	char dir[512];
	size_t i;

	if (cmd_ips_dir(cf, dir, sizeof(dir)) < 0) {
		return EX_SOFTWARE;
	}
	if (senders_load(dir, provider, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "ips: %s: %s\n", provider, err);
		return EX_DATAERR;
	}
	printf("%s: %zu addresses and ranges, %s%s, dated %s\n", provider, l.sl_n,
	       l.sl_shipped ? "shipped with idemhook" : "from ", l.sl_shipped ? "" : l.sl_path,
	       l.sl_date[0] != '\0' ? l.sl_date : "(no date)");
	if (l.sl_source[0] != '\0') {
		printf("source: %s\n", l.sl_source);
	}
	for (i = 0; i < l.sl_n; i++) {
		printf("%s\n", l.sl_cidrs[i]);
	}
	senders_list_finish(&l);
	return EX_OK;
}

/* Fetches provider's list from url, checks it, and writes it into dir.
 * Returns an exit code. */
static int cmd_ips_fetch(const struct config *cf, const char *dir, const char *provider,
                         const char *url)
{
	struct httpc_headers hdrs;
	struct httpc_request req;
	struct httpc_response resp;
	struct senders_list l;
	char err[SENDERS_ERR_MAX];
	char herr[HTTPC_ERR_MAX];
	char path[PATH_MAX];
	char today[16];
	struct buf text;
	time_t now = time(NULL);
	struct tm tm;
	size_t i;
	int rc = EX_OK;

	httpc_headers_init(&hdrs);
	httpc_headers_add(&hdrs, "User-Agent", IPS_USER_AGENT);
	memset(&req, 0, sizeof(req));
	req.hcq_method = "GET";
	req.hcq_url = url;
	req.hcq_headers = &hdrs;
	req.hcq_response_max = SENDERS_FILE_MAX;
	req.hcq_timeout_ms = IPS_TIMEOUT_MS;
	req.hcq_ca_file = config_client_ca_file(cf);
	if (httpc_exchange(&req, &resp, herr, sizeof(herr)) < 0) {
		httpc_headers_finish(&hdrs);
		fprintf(stderr, "ips: %s: %s: %s; nothing written\n", provider, url, herr);
		return EX_UNAVAILABLE;
	}
	httpc_headers_finish(&hdrs);
	if (resp.hcr_status != 200 || resp.hcr_truncated) {
		fprintf(stderr, "ips: %s: %s answered HTTP %ld%s; nothing written\n", provider, url,
		        resp.hcr_status, resp.hcr_truncated ? " with more than 256 KiB" : "");
		httpc_response_finish(&resp);
		return EX_UNAVAILABLE;
	}
	if (senders_parse(resp.hcr_body, resp.hcr_body_len, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "ips: %s: %s: %s; nothing written\n", provider, url, err);
		httpc_response_finish(&resp);
		return EX_DATAERR;
	}
	httpc_response_finish(&resp);
	gmtime_r(&now, &tm);
	strftime(today, sizeof(today), "%Y-%m-%d", &tm);
	buf_init(&text, 0);
	if (buf_printf(&text, "# %s: fetched by idemhook ips update\n# source: %s\n# date: %s\n",
	               provider, url, today) < 0) {
		rc = EX_SOFTWARE;
	}
	for (i = 0; i < l.sl_n && rc == EX_OK; i++) {
		if (buf_printf(&text, "%s\n", l.sl_cidrs[i]) < 0) {
			rc = EX_SOFTWARE;
		}
	}
	if (rc == EX_OK && cli_mkdir_private("ips", dir) < 0) {
		rc = EX_CANTCREAT;
	}
	if (rc == EX_OK &&
	    (snprintf(path, sizeof(path), "%s/%s.txt", dir, provider) >= (int)sizeof(path) ||
	     cli_write_private("ips", path, text.buf_data, text.buf_len) < 0)) {
		rc = EX_CANTCREAT;
	}
	if (rc == EX_OK) {
		printf("%s: %zu addresses and ranges from %s written to %s; reload the daemon "
		       "(systemctl reload idemhook) to use them\n",
		       provider, l.sl_n, url, path);
	}
	buf_finish(&text);
	senders_list_finish(&l);
	return rc;
}

static int cmd_ips_update(const struct config *cf, const char *provider, const char *from)
{
	static const char *const all[] = {"stripe", "wechatpay", NULL};
	char dir[512];
	size_t i;
	int rc = EX_OK;

	if (cmd_ips_dir(cf, dir, sizeof(dir)) < 0) {
		return EX_SOFTWARE;
	}
	for (i = 0; all[i] != NULL; i++) {
		const char *name = provider != NULL ? provider : all[i];
		const char *advice = senders_advice(name);
		const char *url = from != NULL ? from : senders_url(name);
		int one;

		if (advice != NULL) {
			fprintf(stderr, "ips: %s: %s\n", name, advice);
			return EX_DATAERR;
		}
		if (url == NULL) {
			/* Published on a documentation page only: nothing to fetch. */
			fprintf(provider != NULL ? stderr : stdout,
			        "%s: the provider serves no machine-readable list; the list "
			        "shipped with "
			        "idemhook stays in force (idemhook ips show %s), or give --from "
			        "URL\n",
			        name, name);
			if (provider != NULL) {
				return EX_UNAVAILABLE;
			}
			continue;
		}
		one = cmd_ips_fetch(cf, dir, name, url);
		if (one != EX_OK) {
			rc = one;
		}
		if (provider != NULL) {
			break;
		}
	}
	return rc;
}

static int cmd_ips_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"from", required_argument, NULL, 'f'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct config *cf = NULL;
	const char *from = NULL;
	const char *verb;
	int c;
	int rc;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "h", opts)) != -1) {
		if (c == 'f') {
			from = optarg;
		} else if (c == 'h') {
			cmd_ips_usage(stdout);
			return EX_OK;
		} else {
			cmd_ips_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind >= argc) {
		cmd_ips_usage(stderr);
		return EX_USAGE;
	}
	verb = argv[optind];
	if (strcmp(verb, "show") == 0 ? argc - optind != 2 || from != NULL
	    : strcmp(verb, "update") == 0
	            ? argc - optind > 2 || (from != NULL && argc - optind != 2)
	            : 1) {
		if (strcmp(verb, "update") == 0 && from != NULL) {
			fprintf(stderr, "ips: --from needs the PROVIDER it is the list of\n");
		}
		cmd_ips_usage(stderr);
		return EX_USAGE;
	}
	if (from != NULL && !httpc_url_ok(from)) {
		fprintf(stderr, "ips: --from takes an http:// or https:// URL\n");
		return EX_USAGE;
	}
	/* A name no profile has is a typo (64); 65 is for a provider idemhook
	 * knows that publishes no list. */
	if (argc - optind == 2 && provider_find(argv[optind + 1]) == NULL) {
		fprintf(stderr, "ips: unknown provider '%s'; providers:", argv[optind + 1]);
		for (c = 0; provider_table[c] != NULL; c++) {
			fprintf(stderr, " %s", provider_table[c]->p_name);
		}
		fprintf(stderr, "\n");
		return EX_USAGE;
	}
	rc = cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	if (strcmp(verb, "show") == 0) {
		rc = cmd_ips_show(cf, argv[optind + 1]);
	} else {
		/* The lists are fetched with it: refused before any is. */
		rc = cli_check_client_ca_file(cf);
		if (rc != EX_OK) {
			config_destroy(cf);
			return rc;
		}
		rc = cmd_ips_update(cf, argc - optind == 2 ? argv[optind + 1] : NULL, from);
	}
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_ips = {
        .cc_name = "ips",
        .cc_summary = "show or update the addresses providers send callbacks from",
        .cc_run = cmd_ips_run,
};
