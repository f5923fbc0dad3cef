/* cmd_gc.c: `idemhook gc [--dry-run | --vacuum]`: one cleanup pass on demand. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "config.h"
#include "gc.h"
#include "log.h"
#include "store.h"

static void cmd_gc_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] gc [--dry-run | --vacuum]\n\n"
	        "Deletes expired idempotency records (per-provider retention, [store] retention\n"
	        "for the order API), events past their retention, finished outbox rows and old\n"
	        "capture files, in batches of [gc] batch rows with [gc] pause between batches.\n"
	        "Safe while the daemon runs. --dry-run only counts what would go.\n"
	        "--vacuum then gives every free page of the database file back to the file\n"
	        "system. A database made before idemhook had incremental vacuum is rebuilt\n"
	        "once (VACUUM): writers, the daemon's callbacks too, wait until it is done, and\n"
	        "it needs free disk space for a copy of the live data.\n"
	        "On a terminal a progress line is drawn while it runs (not with -q); the\n"
	        "summary says what went, in how many batches and seconds.\n");
}

/* The progress line after each batch (a terminal only). */
static void cmd_gc_progress(void *arg, const char *what, const struct gc_report *so_far)
{
	struct cli_progress *cp = arg;

	cli_progress_draw(cp, 0,
	                  "gc: %s; so far %" PRId64 " records, %" PRId64 " events, %" PRId64
	                  " outbox rows in %" PRId64 " batches",
	                  what, so_far->gr_records, so_far->gr_events, so_far->gr_outbox,
	                  so_far->gr_batches);
}

/* The exit code of a pass that stopped: 70 for a failure of gc's own
 * (logged), else the closing line of a busy or failing store, saying what
 * went for good (each batch commits on its own) and what is unchanged. */
static int cmd_gc_stopped(int dry_run, const struct gc_report *r)
{
	if (!r->gr_store_failed) {
		return EX_SOFTWARE;
	}
	if (dry_run) {
		return cli_tempfail("gc", "nothing was deleted (a dry run deletes nothing)");
	}
	if (r->gr_stopped_at != NULL && strcmp(r->gr_stopped_at, GC_STOPPED_FREE_PAGES) == 0) {
		return cli_tempfail(
		        "gc",
		        "every expired row was deleted (%" PRId64 " idempotency records, %" PRId64
		        " events, %" PRId64 " parked events applied, %" PRId64
		        " outbox rows), then it stopped while %s: the free pages not given "
		        "back yet stay in the file, where new rows reuse them",
		        r->gr_records, r->gr_events, r->gr_parked, r->gr_outbox, r->gr_stopped_at);
	}
	if (r->gr_batches == 0) {
		return cli_tempfail("gc", "nothing was deleted");
	}
	return cli_tempfail("gc",
	                    "it stopped while %s, after %" PRId64
	                    " batch(es), which stay deleted: %" PRId64
	                    " idempotency records, %" PRId64 " events, %" PRId64
	                    " parked events applied and %" PRId64
	                    " outbox rows; the rest is unchanged, and a new run goes on from there",
	                    r->gr_stopped_at != NULL ? r->gr_stopped_at : "deleting rows",
	                    r->gr_batches, r->gr_records, r->gr_events, r->gr_parked, r->gr_outbox);
}

static int cmd_gc_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"dry-run", no_argument, NULL, 'n'},
	        {"vacuum", no_argument, NULL, 'V'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct config *cf = NULL;
	struct store *st = NULL;
	struct gc_report rep;
	struct cli_progress cp;
	int dry_run = 0;
	int vacuum = 0;
	int c;
	int rc;

	optind = 0;
	for (;;) {
		c = cli_getopt(argc, argv, "nh", opts);
		if (c == -1) {
			break;
		}
		if (c == 'n') {
			dry_run = 1;
		} else if (c == 'V') {
			vacuum = 1;
		} else if (c == 'h') {
			cmd_gc_usage(stdout);
			return EX_OK;
		} else {
			cmd_gc_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc || (dry_run && vacuum)) {
		cmd_gc_usage(stderr);
		return EX_USAGE;
	}
	rc = cli_load_config(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	if (gc_check_config(cf) < 0) {
		rc = EX_CONFIG;
		goto fail;
	}
	/* A cleanup never makes a database: a wrong path says so (69). */
	rc = cli_open_store(cf, dry_run ? 1 : CLI_STORE_EXISTING, &st);
	if (rc != EX_OK) {
		goto fail;
	}
	cli_progress_init(&cp, log_get_level() < LOG_LEVEL_NOTICE);
	if (gc_run_progress(st, cf, cli_now_ms(), dry_run, cmd_gc_progress, &cp, &rep) < 0) {
		cli_progress_draw(&cp, 1, "gc: stopped");
		rc = cmd_gc_stopped(dry_run, &rep);
		goto fail;
	}
	if (vacuum) {
		cli_progress_draw(&cp, 0, "gc: giving free pages back to the file system");
		if (gc_vacuum(st, cf, &rep) < 0) {
			cli_progress_draw(&cp, 1, "gc: stopped");
			rc = cmd_gc_stopped(dry_run, &rep);
			goto fail;
		}
	}
	cli_progress_draw(&cp, 1, "gc: done, %" PRId64 " batches", rep.gr_batches);
	printf("%s\n"
	       "idempotency records  %12" PRId64 "\n"
	       "events               %12" PRId64 "\n"
	       "parked, applied      %12" PRId64 "\n"
	       "outbox rows          %12" PRId64 "\n"
	       "capture files        %12" PRId64 "\n"
	       "batches              %12" PRId64 "\n",
	       dry_run ? "would delete (dry run):" : "deleted:", rep.gr_records, rep.gr_events,
	       rep.gr_parked, rep.gr_outbox, rep.gr_captures, rep.gr_batches);
	printf("seconds              %12.1f\n", cli_progress_seconds(&cp));
	if (rep.gr_file_before > 0) {
		printf("database files       %12" PRId64 " bytes before, %" PRId64 " after\n",
		       rep.gr_file_before, rep.gr_file_after);
	}
	rc = EX_OK;
fail:
	store_destroy(st);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_gc = {
        .cc_name = "gc",
        .cc_summary = "delete expired records, events, outbox rows and captures",
        .cc_run = cmd_gc_run,
};
