/* replay.h: feeds captured callbacks (and exported Stripe events) back
 * through the pipeline, in-process or over HTTP to a running idemhook. */
#ifndef IDEMHOOK_REPLAY_H
#define IDEMHOOK_REPLAY_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct config;
struct store;

#define REPLAY_RESPONSE_MAX (1024 * 1024) /* bytes of an answer read back with --to */
#define REPLAY_EXPORT_MAX (256 * 1024 * 1024) /* bytes of one exported-events file */
#define REPLAY_REASONS_MAX 32 /* distinct reasons kept per summary category */
#define REPLAY_TIMEOUT_DEFAULT_S 30 /* --to: the whole exchange of one request */
#define REPLAY_RETRIES 3            /* extra attempts after a 409/429/503 answer, or none at all */
#define REPLAY_RETRY_AFTER_MAX_S                                                                   \
	60 /* --to: longest Retry-After waited for; a longer one fails the request */
#define REPLAY_STOP_AFTER_DEFAULT                                                                  \
	3 /* --to: requests in a row that find the address unavailable, then stop */
#define REPLAY_JOBS_DEFAULT 64 /* in-process requests in flight (--jobs): a batch
				 * of group commit, a bounded amount of memory */
#define REPLAY_JOBS_MAX 1024

enum replay_progress {
	REPLAY_PROGRESS_NONE = 0,
	REPLAY_PROGRESS_BAR, /* one redrawn line on stderr (a TTY) */
	REPLAY_PROGRESS_LINES, /* one line per file on stderr */
};

struct replay_options {
	const char *ro_to; /* "http[s]://host[:port][/prefix]", or NULL for in-process */
	/* --to: PEM CA certificates an https:// address is verified against,
	 * in place of [client] ca_file; NULL: that, or the system's CAs */
	const char *ro_ca_file;
	const char *ro_provider; /* only this provider instance, or NULL */
	int64_t ro_since_ms; /* received at or after; INT64_MIN for none */
	int64_t ro_until_ms; /* received before; INT64_MAX for none */
	int ro_dry_run; /* a dry run: st is a disposable snapshot (store_snapshot); only the words change */
	int ro_trust_unsigned; /* accept exported provider events (signed here) */
	enum replay_progress ro_progress;
	unsigned ro_timeout_s; /* --to; 0 = REPLAY_TIMEOUT_DEFAULT_S */
	/* --to: stop the run once this many requests in a row found the
	 * address unavailable (no answer, or 429/503, after the retries); 0 =
	 * never */
	unsigned ro_stop_after;
	unsigned ro_jobs; /* in-process: requests in flight, their claims sharing commits;
			     0 = REPLAY_JOBS_DEFAULT */
};

struct replay_reason {
	char rr_slug[48];
	uint64_t rr_n;
};

struct replay_summary {
	uint64_t rs_total; /* requests considered (after filters) */
	uint64_t rs_skipped; /* left out by --provider/--since/--until */
	uint64_t rs_new;
	uint64_t rs_duplicate; /* includes rs_mismatch */
	uint64_t rs_mismatch; /* duplicate key, other payload */
	uint64_t rs_refused; /* processed, refused by business rules (key ends failed) */
	uint64_t rs_rejected; /* refused before any claim (signature, body) */
	uint64_t rs_failed; /* could not be replayed: unreadable, unknown provider, store or network */
	uint64_t rs_not_sent; /* --to: left unsent when the run stopped (ro_stop_after); not in
	                         rs_total */
	struct replay_reason rs_rejected_reasons[REPLAY_REASONS_MAX];
	size_t rs_n_rejected_reasons;
	struct replay_reason rs_failed_reasons[REPLAY_REASONS_MAX];
	size_t rs_n_failed_reasons;
	double rs_seconds;
};

/* Replays every capture and export under paths (files, directories walked
 * recursively), in receive-time order, with memory bounded by ro_jobs
 * requests plus a (time, path) pair per file. With ro_jobs > 1 requests are
 * still handed to the store in that order and applied in it, but one that
 * needs a retry is applied after later ones. In-process when opt->ro_to is NULL
 * (st must be open), else over HTTP (st unused). A file that cannot be read
 * is reported on stderr naming it, counted as failed, and the replay goes on.
 * Fills ret. Returns 0, or -1 when the replay could not run at all (logged). */
int replay_run(struct store *st, const struct config *cf, const struct replay_options *opt,
	       const char *const *paths, size_t n_paths, struct replay_summary *ret);

/* Appends the summary as text lines or as one JSON object. Returns 0 or -1. */
int replay_summary_text(const struct replay_summary *s, int dry_run, struct buf *out);
int replay_summary_json(const struct replay_summary *s, int dry_run, struct buf *out);

/* 1 when anything was rejected, failed or left unsent (the exit status is
 * then non-zero). */
int replay_summary_bad(const struct replay_summary *s);

/* Checks a --to URL, http:// or https://host[:port][/prefix], and writes
 * the base that captured request targets are appended to (no trailing '/')
 * into ret_base. Returns 0, or -1 when malformed (user info, a query, a bad
 * port) or longer than base_size. */
int replay_parse_url(const char *url, char *ret_base, size_t base_size);

#endif
