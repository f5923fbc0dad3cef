/* providers.h: helpers the provider profiles share (secrets, JSON paths,
 * canonical JSON, timestamps, configurable field mapping), in providers.c.
 * Only profiles include this; the rest of idemhook sees provider.h. */
#ifndef IDEMHOOK_PROVIDERS_H
#define IDEMHOOK_PROVIDERS_H

#include <stddef.h>
#include <stdint.h>

#include "provider.h"

struct cJSON;
struct buf;

#define PROVIDER_SECRETS_MAX 8     /* active secrets per instance (rotation) */
#define PROVIDER_JSON_PATH_MAX 256 /* bytes in a configured JSON path */
#define PROVIDER_REF_MAX 256       /* bytes in an id/reference taken from a callback */

struct provider_secret {
	unsigned char *ps_data; /* NUL-terminated for convenience */
	size_t ps_len;
	int ps_line; /* its line in the configuration file, for messages */
};

struct provider_secrets {
	struct provider_secret ps_items[PROVIDER_SECRETS_MAX];
	size_t ps_n;
};

/* Resolves one configured value: "file:PATH", "credential:NAME", "env:NAME"
 * or an absolute path go through config_read_secret; anything else is taken
 * literally (testing and demos; a notice says so, never the value). line is
 * the value's line in the file, or 0 for the key's own (its last). Returns
 * 0 with a malloc'd NUL-terminated copy, or -1, logged in one line naming
 * the file and line, the key, the source and the cause. */
int provider_secret_resolve(const struct provider_conf *pc, const char *key, const char *value,
                            int line, char **ret, size_t *ret_len);

/* The same for a public key: a value written in the file is not warned
 * about. */
int provider_public_resolve(const struct provider_conf *pc, const char *key, const char *value,
                            int line, char **ret, size_t *ret_len);

/* Loads every occurrence of key in the instance's section, in file order,
 * up to PROVIDER_SECRETS_MAX. Returns 0 (possibly with none) or -1 when a
 * line could not be read or there are more (each logged, naming the key
 * and line); either way ret holds the lines that could be read, so their
 * own checks run in the same run, and the caller finishes it. */
int provider_secrets_load(const struct provider_conf *pc, const char *key,
                          struct provider_secrets *ret);

/* The same for public keys (provider_public_resolve). */
int provider_publics_load(const struct provider_conf *pc, const char *key,
                          struct provider_secrets *ret);

/* Wipes and frees the secrets; leaves the set empty. */
void provider_secrets_finish(struct provider_secrets *s);

/* Fills *v and returns -1, so a profile can write `return provider_refuse(...)`. */
int provider_refuse(struct provider_verdict *v, int status, const char *reason, const char *detail);

/* The value of req's one header called name (NULL when it has none): 0, or
 * -1 with *v a 400 "repeated_header" when several lines carry it, as a
 * signature, timestamp or id field may come once (RFC 9110 5.3) and a
 * profile cannot know which line the sender meant. */
int provider_header(const struct http_request *req, const char *name, struct provider_verdict *v,
                    const char **ret_value);

/* A decimal Unix timestamp (digits only, at most 12). Returns 0 or -1. */
int provider_parse_timestamp(const char *s, int64_t *ret_s);

/* 1 when ts lies within tolerance_s of now_s either way, else 0. */
int provider_timestamp_fresh(int64_t ts, int64_t now_s, int64_t tolerance_s);

/* provider_refuse with 401 stale_timestamp, recording the skew (ts - now_s)
 * and the tolerance in *v for the operator's log line. Returns -1. */
int provider_refuse_stale(struct provider_verdict *v, int64_t ts, int64_t now_s,
                          int64_t tolerance_s);

/* The item at a dotted path ("data.object.metadata.order_id"; numeric
 * segments index arrays), or NULL. Borrowed from root. */
const struct cJSON *provider_json_path(const struct cJSON *root, const char *path);

/* The string at path, or NULL when absent or not a string. */
const char *provider_json_string(const struct cJSON *root, const char *path);

/* An integral, non-negative JSON number (<= MONEY_MAX_MINOR) or a string of
 * digits. Returns 0 or -1. */
int provider_json_minor(const struct cJSON *item, int64_t *ret_minor);

/* Appends item serialized canonically: object keys sorted by bytes, no
 * whitespace, so equal JSON values give equal bytes. Returns 0 or -1. */
int provider_json_canonical(const struct cJSON *item, struct buf *b);

/* 1 when s may be an id or reference: at most PROVIDER_REF_MAX bytes and
 * no control byte (C0 or DEL); else 0. */
int provider_ref_usable(const char *s);

/* Copies s (provider_ref_usable) into *dst, freeing what was there. NULL s
 * leaves *dst NULL. Returns 0, or -1 when s is not usable or memory ran out. */
int provider_set_ref(char **dst, const char *s);

/* Copies a whole buffer into ev->ev_payload. Returns 0 or -1. */
int provider_set_payload(struct event *ev, const void *data, size_t len);

/* The 2xx JSON acknowledgement {"received":true,"order_id":...,"outcome":...}
 * used by Stripe, Standard Webhooks and the generic HMAC profile. */
int provider_ack_json(const struct event *ev, const struct event_outcome *out, struct reply *ret);

/* A field mapping from configuration, for profiles whose payload shape is
 * the sender's choice (standard-webhooks, hmac). */
struct provider_mapping {
	char *pm_type_path; /* default "type" */
	char *pm_order_path;
	char *pm_amount_path;
	char *pm_currency_path;
	char *pm_payment_path;
	char *pm_refund_path;
	char **pm_paid; /* type values meaning "payment succeeded" */
	size_t pm_n_paid;
	char **pm_refunded; /* type values meaning "refunded" */
	size_t pm_n_refunded;
	int pm_amount_decimal;    /* amount_format = decimal: "12.34" strings */
	int pm_refund_cumulative; /* the refund amount is the running total */
};

/* The keys provider_mapping_load reads, for the p_keys of a profile that
 * uses a mapping. */
#define PROVIDER_MAPPING_KEYS                                                                      \
	"type_path", "order_path", "amount_path", "amount_format", "currency_path",                \
	        "payment_path", "refund_path", "paid_types", "refunded_types", "refund_cumulative"

/* Reads type_path, order_path, amount_path, currency_path, payment_path,
 * refund_path, paid_types, refunded_types (repeatable, comma or space
 * separated), amount_format (minor|decimal), refund_cumulative (bool).
 * Returns 0 or -1 (logged). */
int provider_mapping_load(const struct provider_conf *pc, struct provider_mapping *ret);
void provider_mapping_finish(struct provider_mapping *m);

/* Fills ev_type, ev_kind, refs, amount and currency from root. A malformed
 * amount or currency refuses (400 malformed_body). Returns 0 or -1. */
int provider_mapping_apply(const struct provider_mapping *m, const struct cJSON *root,
                           struct event *ev, struct provider_verdict *ret_verdict);

/* Completes an event whose ev_key is set from a configurably mapped JSON
 * body: provider_mapping_apply, the refund id defaulting to the key, the
 * whole body as payload and its canonical form as fingerprint. Returns 0,
 * or -1 with ret_verdict set. */
int provider_mapping_event(const struct provider_mapping *m, const struct cJSON *root,
                           const struct http_request *req, struct event *ev,
                           struct provider_verdict *ret_verdict);

/* ---- reconciliation (docs/reconcile.md) ---- */

/* Reads an API base URL (key) from the instance's section into *ret
 * (malloc'd, no trailing '/'), dflt when absent. Only https://, or http://
 * to a loopback address (a local fake or tunnel: the credentials must not
 * cross a network in clear). Returns 0, or -1 (logged, naming the key). */
int provider_base_url(const struct provider_conf *pc, const char *key, const char *dflt, char **ret);

/* Loads one private key (PEM) named by the secret reference at key, or
 * leaves *ret NULL when the key is absent. Returns 0, or -1 (logged). */
int provider_privkey_load(const struct provider_conf *pc, const char *key, struct crypto_privkey **ret);

/* Appends s percent-encoded as a URL query or path component (unreserved
 * bytes as they are). Returns 0 or -1. */
int provider_url_encode(struct buf *b, const char *s);

/* The fingerprint of an event a query answer gave, over its normalised
 * fields (kind, references, amount, currency), so the same facts asked
 * again give the same fingerprint whatever else the answer carried.
 * Returns 0 or -1 (out of memory). */
int provider_fingerprint_normalized(struct event *ev);

/* ---- idemhook simulate ---- */

/* n characters derived from seed (decimal digits, or upper-case hex with
 * hex) into out (n + 1 bytes, n <= 64): stable made-up provider references. */
void provider_sim_ref(const char *seed, int hex, char *out, size_t n);

/* Sets value at a dotted path under root, creating objects on the way (and
 * arrays, padded with empty objects, for numeric segments); takes value over
 * (freed on failure). Returns 0 or -1. */
int provider_json_put(struct cJSON *root, const char *path, struct cJSON *value);

/* The JSON body of sim for a profile whose payload is mapped by
 * configuration (standard-webhooks, hmac): the first paid_types or
 * refunded_types value, order, amount (refund_cumulative: the running
 * total), currency, payment and refund at their paths. NULL on failure
 * (logged: e.g. no type value configured for the kind). */
struct cJSON *provider_mapping_build(const struct provider_conf *pc, const struct provider_mapping *m,
                                     const struct provider_sim *sim);

#endif
