/* cmd_replay.c: `idemhook replay PATH...`: feed captured callbacks back
 * through the pipeline, in-process or to a running idemhook. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "capture.h"
#include "cli.h"
#include "config.h"
#include "crypto.h"
#include "log.h"
#include "replay.h"
#include "store.h"

static void cmd_replay_usage(FILE *out)
{
	fprintf(out,
	        "usage: idemhook [-c FILE] replay [OPTIONS] PATH...\n\n"
	        "Replays capture files (and directories of them, recursively) in the order they\n"
	        "were received, through the same verification and deduplication as live\n"
	        "callbacks. Callbacks already applied come back as duplicates and change "
	        "nothing.\n\n"
	        "Options:\n"
	        "  --to URL             send to a running idemhook (http://host:port or\n"
	        "                       https://host[:port][/prefix]), re-signing where the\n"
	        "                       scheme allows; HTTPS peers are verified against the\n"
	        "                       system CAs or [client] ca_file;\n"
	        "                       default: in-process against the configured database\n"
	        "  --cacert FILE        --to: verify the address's certificate against the CA\n"
	        "                       certificates in FILE (PEM) instead, for this run\n"
	        "  --provider NAME      only captures of this provider instance\n"
	        "  --since TIME         only requests received at or after TIME\n"
	        "  --until TIME         only requests received before TIME\n"
	        "                       (TIME: 2026-12-02 or 2026-12-02T10:20:00Z)\n"
	        "  --jobs N             in-process: up to N requests in flight, so that their\n"
	        "                       claims share commits (default %d); they are applied in\n"
	        "                       receive order, except that a retried one comes later\n"
	        "  --dry-run            replay into a private copy of the database and report\n"
	        "                       what the replay would do; the database is not changed\n"
	        "  --trust-unsigned     also accept Stripe events exported from Stripe (a JSON\n"
	        "                       array or JSON lines), which carry no signature\n"
	        "  --json               print the summary as JSON\n"
	        "  --timeout SECONDS    --to: time limit per attempt of a request (default %d)\n"
	        "  --stop-after N       --to: stop the run when N requests in a row found the\n"
	        "                       address unavailable (no answer, a timeout, or 429/503,\n"
	        "                       still after the retries); default %d, 0: never\n"
	        "  -q, --quiet          no progress output, only errors and the summary\n\n"
	        "A request that got no answer, and a 409, 429 or 503 answer, is retried %d\n"
	        "times, after 200, 400, 600 ms or the answer's Retry-After when longer (up to\n"
	        "%d s; a longer one fails the request). A certificate that fails verification\n"
	        "is not retried: the request fails (tls_verify) and counts for --stop-after;\n"
	        "so is an https:// address whose port speaks plain HTTP (not_tls), and a CA\n"
	        "file that cannot be used (ca_file).\n\n"
	        "Exit status: 0 when every request was new or a duplicate (or refused by\n"
	        "business rules), 65 when any was rejected or could not be replayed, 69 when\n"
	        "the run stopped early because the --to address was unavailable.\n",
	        REPLAY_JOBS_DEFAULT, REPLAY_TIMEOUT_DEFAULT_S, REPLAY_STOP_AFTER_DEFAULT,
	        REPLAY_RETRIES, REPLAY_RETRY_AFTER_MAX_S);
}

static int cmd_replay_time(const char *name, const char *value, int64_t *ret)
{
	if (capture_parse_time(value, ret) < 0) {
		fprintf(stderr, "replay: %s takes an RFC 3339 time or a date (2026-12-02T10:20:00Z)\n", name);
		return -1;
	}
	return 0;
}

/* --cacert: with --to only, and a file this user can read that holds PEM
 * certificates, as TLS would load it: else every request would fail. */
static int cmd_replay_cacert_check(const char *to, const char *path)
{
	char q[PATH_MAX];
	char why[128];
	FILE *f;

	if (to == NULL) {
		fprintf(stderr, "replay: --cacert works with --to only\n");
		return -1;
	}
	f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, "replay: --cacert: cannot read %s: %s\n",
		        log_quote(q, sizeof(q), path), strerror(errno));
		return -1;
	}
	fclose(f);
	if (crypto_ca_file_check(path, why, sizeof(why)) < 0) {
		fprintf(stderr, "replay: --cacert: the CA file %s cannot be used: %s\n",
		        log_quote(q, sizeof(q), path), why);
		return -1;
	}
	return 0;
}

/* A dry run is the real replay into a private snapshot of the database, so
 * it counts exactly what the replay would (the second copy of an event is a
 * duplicate, a business refusal is refused), and the snapshot is removed
 * after. */
static int cmd_replay_open_snapshot(const struct config *cf, char **ret_path, struct store **ret)
{
	struct store_options so;

	if (cf->cf_backend != STORE_BACKEND_SQLITE) {
		/* A private copy of a shared database is no cheap file copy. */
		fprintf(stderr, "idemhook replay: --dry-run replays into a copy of the SQLite file; "
		                "with [store] backend = postgresql, replay into a test instance "
		                "(--to URL) instead\n");
		return EX_UNAVAILABLE;
	}
	if (store_snapshot(cf->cf_db_path, NULL, ret_path) < 0) {
		return EX_UNAVAILABLE;
	}
	memset(&so, 0, sizeof(so));
	so.so_path = *ret_path;
	so.so_sync = STORE_SYNC_OFF; /* thrown away after */
	so.so_batch_max = cf->cf_batch_max;
	so.so_busy_timeout_ms = cf->cf_busy_timeout_ms;
	*ret = store_create(&so);
	return *ret != NULL ? EX_OK : EX_UNAVAILABLE;
}

static int cmd_replay_run(int argc, char **argv, const char *config_path)
{
	static const struct option opts[] = {
	        {"to", required_argument, NULL, 't'},
	        {"cacert", required_argument, NULL, 'C'},
	        {"provider", required_argument, NULL, 'p'},
	        {"since", required_argument, NULL, 's'},
	        {"until", required_argument, NULL, 'u'},
	        {"dry-run", no_argument, NULL, 'n'},
	        {"trust-unsigned", no_argument, NULL, 'U'},
	        {"json", no_argument, NULL, 'j'},
	        {"timeout", required_argument, NULL, 'T'},
	        {"jobs", required_argument, NULL, 'J'},
	        {"stop-after", required_argument, NULL, 'S'},
	        {"quiet", no_argument, NULL, 'q'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct replay_options ro;
	struct replay_summary sum;
	struct config *cf = NULL;
	struct store *st = NULL;
	char *snapshot = NULL;
	struct buf out;
	char base[1024];
	int json = 0;
	int quiet = 0;
	int stop_after_given = 0;
	int c;
	int rc;

	memset(&ro, 0, sizeof(ro));
	ro.ro_since_ms = INT64_MIN;
	ro.ro_until_ms = INT64_MAX;
	ro.ro_stop_after = REPLAY_STOP_AFTER_DEFAULT;
	buf_init(&out, 0);
	optind = 0;
	while ((c = cli_getopt(argc, argv, "qh", opts)) != -1) {
		char *end;
		unsigned long v;

		switch (c) {
		case 't':
			ro.ro_to = optarg;
			break;
		case 'C':
			ro.ro_ca_file = optarg;
			break;
		case 'p':
			ro.ro_provider = optarg;
			break;
		case 's':
			if (cmd_replay_time("--since", optarg, &ro.ro_since_ms) < 0) {
				return EX_USAGE;
			}
			break;
		case 'u':
			if (cmd_replay_time("--until", optarg, &ro.ro_until_ms) < 0) {
				return EX_USAGE;
			}
			break;
		case 'n':
			ro.ro_dry_run = 1;
			break;
		case 'U':
			ro.ro_trust_unsigned = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'T':
			v = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end != '\0' || v == 0 || v > 3600) {
				fprintf(stderr, "replay: --timeout takes seconds from 1 to 3600\n");
				return EX_USAGE;
			}
			ro.ro_timeout_s = (unsigned)v;
			break;
		case 'J':
			v = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end != '\0' || v == 0 || v > REPLAY_JOBS_MAX) {
				fprintf(stderr, "replay: --jobs takes a number from 1 to %d\n", REPLAY_JOBS_MAX);
				return EX_USAGE;
			}
			ro.ro_jobs = (unsigned)v;
			break;
		case 'S':
			v = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end != '\0' || v > 1000000) {
				fprintf(stderr, "replay: --stop-after takes a number from 0 "
				                "(never) to 1000000\n");
				return EX_USAGE;
			}
			ro.ro_stop_after = (unsigned)v;
			stop_after_given = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			cmd_replay_usage(stdout);
			return EX_OK;
		default:
			cmd_replay_usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "replay: name at least one capture file or directory\n");
		cmd_replay_usage(stderr);
		return EX_USAGE;
	}
	/* An empty window would skip every request and exit 0: an operator
	 * who swapped the two would believe the spool replayed. */
	if (ro.ro_since_ms >= ro.ro_until_ms) {
		fprintf(stderr, "replay: --since must be before --until: the window [since, until) "
		                "holds no request\n");
		return EX_USAGE;
	}
	if (ro.ro_to == NULL && stop_after_given) {
		fprintf(stderr, "replay: --stop-after works with --to only\n");
		return EX_USAGE;
	}
	if (ro.ro_ca_file != NULL && cmd_replay_cacert_check(ro.ro_to, ro.ro_ca_file) < 0) {
		return EX_USAGE;
	}
	if (ro.ro_to != NULL) {
		if (replay_parse_url(ro.ro_to, base, sizeof(base)) < 0) {
			fprintf(stderr, "replay: --to takes an http:// or https://host[:port][/prefix] URL\n");
			return EX_USAGE;
		}
		if (ro.ro_dry_run) {
			fprintf(stderr, "replay: --dry-run works in-process only, not with --to\n");
			return EX_USAGE;
		}
		if (ro.ro_jobs > 1) {
			fprintf(stderr, "replay: --jobs works in-process only, not with --to\n");
			return EX_USAGE;
		}
	}
	if (quiet) {
		ro.ro_progress = REPLAY_PROGRESS_NONE;
	} else if (isatty(STDERR_FILENO)) {
		ro.ro_progress = REPLAY_PROGRESS_BAR;
	} else {
		ro.ro_progress = REPLAY_PROGRESS_LINES;
	}
	rc = cli_load_config_secrets(config_path, &cf);
	if (rc != EX_OK) {
		return rc;
	}
	if (ro.ro_provider != NULL && config_provider(cf, ro.ro_provider) == NULL && ro.ro_to == NULL) {
		fprintf(stderr, "replay: --provider names no provider instance of the configuration\n");
		rc = EX_USAGE;
		goto out;
	}
	/* To a URL, every request goes out with it (--cacert was checked). */
	if (ro.ro_to != NULL && ro.ro_ca_file == NULL) {
		rc = cli_check_client_ca_file(cf);
		if (rc != EX_OK) {
			goto out;
		}
	}
	if (ro.ro_to == NULL) {
		rc = ro.ro_dry_run ? cmd_replay_open_snapshot(cf, &snapshot, &st) : cli_open_store(cf, 0, &st);
		if (rc != EX_OK) {
			goto out;
		}
	}
	if (replay_run(st, cf, &ro, (const char *const *)(argv + optind), (size_t)(argc - optind), &sum) < 0) {
		rc = EX_SOFTWARE;
		goto out;
	}
	if ((json ? replay_summary_json(&sum, ro.ro_dry_run, &out) : replay_summary_text(&sum, ro.ro_dry_run, &out)) <
	    0) {
		rc = EX_SOFTWARE;
		goto out;
	}
	fwrite(out.buf_data, 1, out.buf_len, stdout);
	fflush(stdout);
	if (sum.rs_not_sent > 0) {
		rc = EX_UNAVAILABLE;
	} else {
		rc = replay_summary_bad(&sum) ? EX_DATAERR : EX_OK;
	}
out:
	buf_finish(&out);
	store_destroy(st);
	store_snapshot_remove(snapshot);
	free(snapshot);
	config_destroy(cf);
	return rc;
}

const struct cli_command cli_cmd_replay = {
	.cc_name = "replay",
	.cc_summary = "feed captured callbacks back through the pipeline",
	.cc_run = cmd_replay_run,
};
