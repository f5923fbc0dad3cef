/* capture.h: the spool of raw callbacks on disk, and reading it back.
 *
 * One file per request, in a format people can read and ordinary tools can
 * write (docs/capture-replay.md):
 *
 *	idemhook-capture 1
 *	received-at: 2026-12-02T10:20:12.345Z
 *	received-ms: 1796206812345
 *	provider: stripe
 *	peer: 127.0.0.1
 *	client: 127.0.0.1
 *	rejected: no
 *	body-length: 1234
 *	body-sha256: <hex>
 *	<blank line>
 *	POST /hooks/stripe HTTP/1.1<CRLF>
 *	Name: value<CRLF>
 *	...
 *	<CRLF>
 *	<exactly body-length raw bytes>
 *
 * Files live in <dir>/YYYY-MM-DD/ (UTC day of receipt), mode 0600. */
#ifndef IDEMHOOK_CAPTURE_H
#define IDEMHOOK_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "http.h"

struct buf;

#define CAPTURE_MAGIC "idemhook-capture"
#define CAPTURE_VERSION 1
#define CAPTURE_SUFFIX ".cap"
#define CAPTURE_HEAD_MAX (256 * 1024) /* bytes: metadata block plus request head */
#define CAPTURE_BODY_MAX (64 * 1024 * 1024) /* bytes of body a capture may hold */
#define CAPTURE_PROVIDER_MAX 128 /* bytes of a provider instance name */
#define CAPTURE_RETENTION_DEFAULT_S (30 * 86400) /* [capture] retention */
#define CAPTURE_TIME_MAX_MS 253402300799999LL /* ms at 9999-12-31T23:59:59.999Z */
#define CAPTURE_DIR_DEFAULT "./var/captures" /* [capture] dir */
/* What a capture keeps of an Authorization (or Proxy-Authorization)
 * field: never its value, which is a credential of ours (Adyen's HTTP
 * Basic). capture_restore_auth puts the instance's own back. */
#define CAPTURE_REDACTED "idemhook-redacted"

struct capture;

/* From the [capture] section; NULL with *ret_off = 1 when capture is off,
 * NULL with *ret_off = 0 on a configuration error (logged). */
struct capture *capture_create(const struct config *cf, int *ret_off);

/* Checks cf's [capture] section as capture_create reads it, every key,
 * creating nothing; *ret_spool is the spool directory capture_create would
 * make (capture_spool_dir), or NULL when capture is off or mode or dir was
 * refused (a check of it would be of a directory not meant). Returns 0, or
 * -1 with each problem logged (file, line and key). */
int capture_check_config(const struct config *cf, const char **ret_spool);

/* The spool directory capture_create makes and writes to for cf: [capture]
 * dir, or CAPTURE_DIR_DEFAULT; NULL when capture is off. */
const char *capture_spool_dir(const struct config *cf);
void capture_destroy(struct capture *cap);

/* Writes req (as it arrived at provider instance `provider`) atomically to the
 * spool, if the mode asks for it (rejected: only when rejected != 0). Returns
 * 0, or -1 (logged and counted; the callback itself goes on). */
int capture_request(struct capture *cap, const char *provider, const struct http_request *req, int rejected);

/* Appends the capture file text for req to out. rejected is recorded as
 * metadata only. Returns 0, or -1 when req cannot be written faithfully
 * (a line break inside a header, a name too long) or on allocation failure. */
int capture_format(struct buf *out, const char *provider, const struct http_request *req, int rejected);

/* A capture read back. Every pointer points into memory the record owns;
 * cr_req is ready for ingest_hook (hr_peer, hr_client, hr_received_ms set). */
struct capture_record {
	int cr_version;
	const char *cr_provider;
	int64_t cr_received_ms;
	int cr_rejected; /* as recorded: 1, 0, or -1 when absent */
	struct http_request cr_req;
	/* owned storage */
	char *cr_data; /* the parsed text, cut into strings in place */
	struct http_header *cr_headers;
	char *cr_path; /* decoded path for cr_req.hr_path */
};

/* Metadata only (the sort key and filters of replay), without the body. */
struct capture_meta {
	char cm_provider[CAPTURE_PROVIDER_MAX];
	int64_t cm_received_ms;
};

/* Parses len bytes of capture text into ret (copied). Returns 0, or -1 with
 * one sentence in err saying what is wrong; ret is then untouched. The
 * sentence starts with "empty file", "truncated:" (cut short), "corrupted:",
 * "not an idemhook capture" or "unsupported capture format version". */
int capture_parse(const void *data, size_t len, struct capture_record *ret, char *err, size_t err_size);

/* The header fields whose values a capture never keeps. */
int capture_is_credential(const char *name);
/* Puts back into rec the credential its instance pc requires
 * (provider.h's p_required_authorization) where the capture holds
 * CAPTURE_REDACTED, when the capture was accepted as it came: replay and
 * simulate's duplicate send it again as the sender did. pc may be NULL
 * (nothing done). The value stays pc's: rec must not outlive it. */
void capture_restore_auth(const struct provider_conf *pc, struct capture_record *rec);

/* capture_parse on the file at path. Returns 0, or -1 with err set. */
int capture_read(const char *path, struct capture_record *ret, char *err, size_t err_size);

/* Reads only the metadata block of the file at path (at most
 * CAPTURE_HEAD_MAX bytes). Returns 0, or -1 with err set. */
int capture_read_meta(const char *path, struct capture_meta *ret, char *err, size_t err_size);

/* Reads the whole file at path into a malloc'd, NUL-terminated buffer
 * (replay's exports use it too). Returns 0, or -1 with err set, also when
 * the file is larger than max bytes. */
int capture_read_file(const char *path, size_t max, char **ret, size_t *ret_len, char *err, size_t err_size);

/* Finds the capture of the request provider instance `provider` received
 * at received_ms (an event's received_at) whose body holds needle (the
 * event's key), in cf's [capture] dir whatever its mode now (files written
 * before stay until they expire). ret_name (name_size bytes) gets
 * "DAY/FILE". Returns 1 with ret set (finish it), 0 when no capture holds
 * it (not captured, skipped, expired), or -1 when the directory cannot be
 * read (err set). */
int capture_find(const struct config *cf, const char *provider, int64_t received_ms,
                 const char *needle, struct capture_record *ret, char *ret_name, size_t name_size,
                 char *err, size_t err_size);

/* Frees what the record owns and zeroes it. */
void capture_record_finish(struct capture_record *rec);

/* Formats ms since the epoch as RFC 3339 UTC with milliseconds
 * ("2026-12-02T10:20:12.345Z"); out needs 32 bytes. */
void capture_rfc3339(int64_t ms, char out[32]);

/* Parses RFC 3339 ("2026-12-02T10:20:12Z", fractional seconds and numeric
 * offsets allowed) or a bare date ("2026-12-02", midnight UTC) into ms since
 * the epoch. Returns 0, or -1 (also for a time before 1970 or after
 * CAPTURE_TIME_MAX_MS). */
int capture_parse_time(const char *s, int64_t *ret_ms);

/* Deletes capture files of the [capture] dir whose UTC day ended more than
 * [capture] retention ago (0 = keep forever), with the temporary files of
 * interrupted captures left in those days, then their empty day
 * directories. dry_run only counts. ret_n (may be NULL) gets the capture
 * files (a leftover temporary file is not one).
 * Returns 0, or -1 (logged). */
int capture_expire(const struct config *cf, int64_t now_ms, int dry_run, int64_t *ret_n);

#endif
