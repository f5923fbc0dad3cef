/* cmd_stats.c: `idemhook stats [--since 24h] [--json]`: the daily check. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cli.h"
#include "config.h"
#include "stats.h"
#include "store.h"

#define CMD_STATS_OUT_MAX (1024 * 1024) /* bytes of one report */

static void cmd_stats_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] stats [--since DURATION] [--json]\n\n"
	        "Reads the database: callbacks by provider and outcome received in the window\n"
	        "(default --since 24h; durations like 90m, 24h, 7d), failed and reprocessed\n"
	        "events, records stuck in processing for more than 60 s, outbound backlog and\n"
	        "dead rows, orders paid and refunded. A table by default, --json for scripts.\n"
	        "Duplicates absorbed are counted in memory by the daemon: see /metrics.\n");
}

static int cmd_stats_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"since", required_argument, NULL, 's'},
	        {"json", no_argument, NULL, 'j'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct stats_report rep;
	struct config *cf = NULL;
	struct store *st = NULL;
	struct buf out;
	int64_t since_s = 24 * 3600;
	int64_t now_ms;
	int json = 0;
	int c;
	int rc;

	buf_init(&out, CMD_STATS_OUT_MAX);
	optind = 0;
	for (;;) {
		c = cli_getopt(argc, argv, "s:jh", opts);
		if (c == -1) {
			break;
		}
		if (c == 's') {
			if (config_parse_duration(optarg, &since_s) < 0 || since_s <= 0) {
				fprintf(stderr, "idemhook stats: --since wants a duration such as "
				                "24h or 7d\n");
				return EX_USAGE;
			}
		} else if (c == 'j') {
			json = 1;
		} else if (c == 'h') {
			cmd_stats_usage(stdout);
			return EX_OK;
		} else {
			cmd_stats_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		cmd_stats_usage(stderr);
		return EX_USAGE;
	}
	rc = cli_open(config_path, 1, &cf, &st);
	if (rc != EX_OK) {
		return rc;
	}
	now_ms = cli_now_ms();
	if (stats_collect(st, now_ms, now_ms - since_s * 1000, &rep) < 0) {
		rc = EX_SOFTWARE;
		goto fail;
	}
	rc = json ? stats_format_json(&rep, &out) : stats_format_text(&rep, &out);
	stats_report_finish(&rep);
	if (rc < 0) {
		rc = EX_SOFTWARE;
		goto fail;
	}
	if (json) {
		cli_json_text(stdout, out.buf_data, out.buf_len);
	} else {
		fwrite(out.buf_data, 1, out.buf_len, stdout);
	}
	rc = EX_OK;
fail:
	buf_finish(&out);
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_stats = {
        .cc_name = "stats",
        .cc_summary = "callbacks, failures, stuck records and orders from the database",
        .cc_run = cmd_stats_run,
};
