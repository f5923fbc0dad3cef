/* cmd_reconcile.c: `idemhook reconcile`: ask the providers what became of
 * the payments whose callbacks never arrived, once (docs/reconcile.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cli.h"
#include "config.h"
#include "reconcile.h"
#include "store.h"

static void cmd_reconcile_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] reconcile [--provider NAME] [--older-than 15m]\n"
	        "                          [--since DATE] [--order ID] [--dry-run] [--json]\n\n"
	        "Asks each provider instance that can be asked what became of payments whose\n"
	        "callbacks never arrived: Stripe lists its events, Alipay and WeChat Pay are\n"
	        "asked about each order still pending (or authorised); Adyen and the generic\n"
	        "profiles cannot be asked, and the report says what to do instead. Each answer\n"
	        "goes through the same pipeline as a callback (same keys where the provider\n"
	        "has them, same handlers, same outbox), so an event already applied changes\n"
	        "nothing, and a callback that arrives later is a duplicate.\n\n"
	        "  --provider NAME     only this [provider NAME] instance\n"
	        "  --older-than DUR    leave younger orders and events to their callbacks\n"
	        "                      (default: [reconcile] older_than, 15m)\n"
	        "  --since DATE        orders and events created since DATE (2026-11-01, or\n"
	        "                      2026-11-01T08:00:00Z, or a duration ago: 3d); default:\n"
	        "                      [reconcile] lookback, 3d\n"
	        "  --order ID          this order alone, now: its provider instance is asked\n"
	        "                      about it whatever its status and age (Stripe: the events\n"
	        "                      since it was created that name it or its payment)\n"
	        "  --dry-run           ask, and report what would change; change nothing\n"
	        "  --json              the report as JSON\n\n"
	        "Exit status 0, 66 no such order (--order), or 75 when a question failed after\n"
	        "its retries (nothing of it was applied; the next run asks again).\n");
}

static int cmd_reconcile_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"provider", required_argument, NULL, 'p'},
	        {"older-than", required_argument, NULL, 'o'},
	        {"since", required_argument, NULL, 's'},
	        {"order", required_argument, NULL, 'O'},
	        {"dry-run", no_argument, NULL, 'n'},
	        {"json", no_argument, NULL, 'j'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct reconcile_options opt;
	struct reconcile_report rep = {0};
	struct config *cf = NULL;
	struct store *st = NULL;
	struct buf out;
	int json = 0;
	int have_report = 0;
	int c;
	int rc;

	memset(&opt, 0, sizeof(opt));
	opt.ro_older_than_s = -1;
	buf_init(&out, 0);
	optind = 0;
	for (;;) {
		c = cli_getopt(argc, argv, "p:o:s:O:njh", opts);
		if (c == -1) {
			break;
		}
		if (c == 'p') {
			opt.ro_provider = optarg;
		} else if (c == 'o') {
			if (config_parse_duration(optarg, &opt.ro_older_than_s) < 0 ||
			    opt.ro_older_than_s < 0) {
				fprintf(stderr, "idemhook reconcile: --older-than wants a duration "
				                "(\"15m\", \"2h\", \"0\")\n");
				return EX_USAGE;
			}
		} else if (c == 's') {
			if (cli_parse_when(optarg, &opt.ro_since_ms) < 0) {
				fprintf(stderr,
				        "idemhook reconcile: --since wants a date (2026-11-01), "
				        "a UTC time (2026-11-01T08:00:00Z) or a duration (3d)\n");
				return EX_USAGE;
			}
		} else if (c == 'O') {
			opt.ro_order = optarg;
		} else if (c == 'n') {
			opt.ro_dry_run = 1;
		} else if (c == 'j') {
			json = 1;
		} else if (c == 'h') {
			cmd_reconcile_usage(stdout);
			return EX_OK;
		} else {
			cmd_reconcile_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_reconcile_usage(stderr);
		return EX_USAGE;
	}
	rc = cli_load_config_secrets(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	/* Every question goes out with it: refused before any is asked. */
	rc = cli_check_client_ca_file(cf);
	if (rc != EX_OK) {
		goto done;
	}
	if (opt.ro_provider != NULL && config_provider(cf, opt.ro_provider) == NULL) {
		fprintf(stderr, "idemhook reconcile: no [provider %s] in the configuration\n",
		        opt.ro_provider);
		rc = EX_USAGE;
		goto done;
	}
	/* A dry run reads the database only: no writer, no migration. */
	rc = cli_open_store(cf, opt.ro_dry_run ? 1 : CLI_STORE_EXISTING, &st);
	if (rc != EX_OK) {
		goto done;
	}
	if (reconcile_run(st, cf, &opt, &rep) < 0) {
		if (rep.rr_order_unknown) {
			fprintf(stderr, "idemhook reconcile: no order %s\n", opt.ro_order);
			rc = CLI_EX_NOT_FOUND;
		} else if (rep.rr_window_empty) {
			char since[32];
			char until[32];

			cli_format_time(rep.rr_since_ms, since);
			cli_format_time(rep.rr_until_ms, until);
			fprintf(stderr,
			        "idemhook reconcile: --since %s is not before the window's end, %s "
			        "(now minus --older-than, or [reconcile] older_than): nothing "
			        "would be "
			        "checked; give an earlier --since or a shorter --older-than\n",
			        since, until);
			rc = EX_USAGE;
		} else {
			rc = EX_CONFIG;
		}
		goto done;
	}
	have_report = 1;
	if ((json ? reconcile_format_json(&rep, &out) : reconcile_format_text(&rep, &out)) < 0) {
		fprintf(stderr, "idemhook reconcile: out of memory\n");
		rc = EX_SOFTWARE;
		goto done;
	}
	if (json) {
		cli_json_text(stdout, out.buf_data, out.buf_len);
	} else {
		fwrite(out.buf_data, 1, out.buf_len, stdout);
	}
	rc = rep.rr_failed > 0 ? EX_TEMPFAIL : EX_OK;
done:
	if (have_report) {
		reconcile_report_finish(&rep);
	}
	buf_finish(&out);
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_reconcile = {
        .cc_name = "reconcile",
        .cc_summary = "ask the providers about callbacks that never arrived",
        .cc_run = cmd_reconcile_run,
};
