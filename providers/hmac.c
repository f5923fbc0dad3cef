/* hmac.c: a generic HMAC profile for senders not covered by a named one
 * (GitHub-style "sha256=" headers and the like), configured key by key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "json.h"
#include "log.h"
#include "providers.h"

#define HMAC_RETRY_WINDOW_S (3 * 24 * 3600)
#define HMAC_HEADER_NAME_MAX 64 /* bytes in a configured header name */
#define HMAC_SIGNATURE_MAX 1024 /* bytes in the signature header */
#define HMAC_TEMPLATE_MAX 256   /* bytes in signed_content */

enum hmac_encoding {
	HMAC_HEX = 0,
	HMAC_BASE64,
};

struct hmac_state {
	struct provider_secrets hs_secrets;
	enum crypto_hash hs_hash;
	enum hmac_encoding hs_encoding;
	char *hs_header;           /* signature header */
	char *hs_prefix;           /* e.g. "sha256=", "" for none */
	char *hs_timestamp_header; /* NULL: no signed timestamp */
	char *hs_template;         /* signed content with {timestamp} {body} {id} */
	char *hs_key_header;       /* idempotency key from this header, or */
	char *hs_key_path;         /* from this JSON path */
	struct provider_mapping hs_map;
};

static void hmac_destroy(void *state)
{
	struct hmac_state *st = state;

	if (st == NULL) {
		return;
	}
	provider_secrets_finish(&st->hs_secrets);
	free(st->hs_header);
	free(st->hs_prefix);
	free(st->hs_timestamp_header);
	free(st->hs_template);
	free(st->hs_key_header);
	free(st->hs_key_path);
	provider_mapping_finish(&st->hs_map);
	free(st);
}

/* Copies the configured value of key (or dflt; NULL stays NULL). */
static int hmac_get(const struct provider_conf *pc, const char *key, const char *dflt, size_t max,
                    char **ret)
{
	const char *v = config_section_get(pc->pc_section, key);

	if (v == NULL) {
		v = dflt;
	}
	if (v == NULL) {
		*ret = NULL;
		return 0;
	}
	if (strlen(v) > max) {
		log_err("provider %s: %s is longer than %zu bytes", pc->pc_name, key, max);
		return -1;
	}
	*ret = strdup(v);
	return *ret != NULL ? 0 : -1;
}

/* Only {timestamp}, {body} and {id} may appear, and each needs its source.
 * Whatever the key, the timestamp and the body come from must be signed: a
 * key header outside the signature lets anyone replay one captured request
 * under fresh keys, each processed as new. {id} next to another placeholder
 * could be split two ways ("evt_0" + "1700000000" = "evt_" + "01700000000"),
 * so a literal must separate them. */
static int hmac_template_check(const struct provider_conf *pc, const struct hmac_state *st)
{
	const char *p = st->hs_template;
	const char *prev_end = NULL; /* just past the previous placeholder */
	int prev_id = 0;
	int has_body = 0;
	int has_ts = 0;
	int has_id = 0;

	while ((p = strchr(p, '{')) != NULL) {
		int is_id = 0;
		size_t n;

		if (strncmp(p, "{body}", 6) == 0) {
			n = 6;
			has_body = 1;
		} else if (strncmp(p, "{timestamp}", 11) == 0 && st->hs_timestamp_header != NULL) {
			n = 11;
			has_ts = 1;
		} else if (strncmp(p, "{id}", 4) == 0 && st->hs_key_header != NULL) {
			n = 4;
			has_id = 1;
			is_id = 1;
		} else {
			log_err("provider %s: signed_content: only {body}, {timestamp} (with "
			        "timestamp_header) and {id} (with key_header) may be used",
			        pc->pc_name);
			return -1;
		}
		if (prev_end == p && (is_id || prev_id)) {
			log_err("provider %s: signed_content: put a separator such as '.' between "
			        "{id} and the placeholder next to it",
			        pc->pc_name);
			return -1;
		}
		prev_id = is_id;
		p += n;
		prev_end = p;
	}
	if (!has_body) {
		log_err("provider %s: signed_content must include {body}: the body is what the "
		        "signature protects",
		        pc->pc_name);
		return -1;
	}
	if (st->hs_timestamp_header != NULL && !has_ts) {
		log_err("provider %s: timestamp_header %s is not signed: add {timestamp} to "
		        "signed_content, or drop timestamp_header",
		        pc->pc_name, st->hs_timestamp_header);
		return -1;
	}
	if (st->hs_key_header != NULL && !has_id) {
		log_err("provider %s: key_header %s is not covered by the signature, so a captured "
		        "callback could be replayed under any key: add {id} to signed_content "
		        "(as the sender signs it, e.g. {id}.{timestamp}.{body}), or take the key "
		        "from the signed body with key_path instead",
		        pc->pc_name, st->hs_key_header);
		return -1;
	}
	return 0;
}

static int hmac_create(const struct provider_conf *pc, void **ret_state)
{
	struct hmac_state *st = calloc(1, sizeof(*st));
	const char *alg;
	const char *enc;
	int headers_ok = 1;
	int rc = 0;

	if (st == NULL) {
		return -1;
	}
	if (pc->pc_section == NULL) {
		goto fail;
	}
	/* Every key checked whatever the others hold, each problem logged;
	 * the template only when the headers it names were read. */
	if (provider_secrets_load(pc, "secret", &st->hs_secrets) < 0) {
		rc = -1;
	} else if (st->hs_secrets.ps_n == 0) {
		log_err("provider %s: at least one secret is needed", pc->pc_name);
		rc = -1;
	}
	if (provider_mapping_load(pc, &st->hs_map) < 0) {
		rc = -1;
	}
	alg = config_section_get(pc->pc_section, "algorithm");
	if (alg == NULL || strcmp(alg, "sha256") == 0) {
		st->hs_hash = CRYPTO_SHA256;
	} else if (strcmp(alg, "sha512") == 0) {
		st->hs_hash = CRYPTO_SHA512;
	} else {
		log_err("provider %s: algorithm: expected sha256 or sha512", pc->pc_name);
		rc = -1;
	}
	enc = config_section_get(pc->pc_section, "encoding");
	if (enc == NULL || strcmp(enc, "hex") == 0) {
		st->hs_encoding = HMAC_HEX;
	} else if (strcmp(enc, "base64") == 0) {
		st->hs_encoding = HMAC_BASE64;
	} else {
		log_err("provider %s: encoding: expected hex or base64", pc->pc_name);
		rc = -1;
	}
	if (hmac_get(pc, "header", "X-Signature", HMAC_HEADER_NAME_MAX, &st->hs_header) < 0) {
		headers_ok = 0;
	}
	if (hmac_get(pc, "prefix", "", HMAC_HEADER_NAME_MAX, &st->hs_prefix) < 0) {
		headers_ok = 0;
	}
	if (hmac_get(pc, "timestamp_header", NULL, HMAC_HEADER_NAME_MAX, &st->hs_timestamp_header) <
	    0) {
		headers_ok = 0;
	}
	if (hmac_get(pc, "key_header", NULL, HMAC_HEADER_NAME_MAX, &st->hs_key_header) < 0) {
		headers_ok = 0;
	}
	if (hmac_get(pc, "key_path", st->hs_key_header == NULL ? "id" : NULL,
	             PROVIDER_JSON_PATH_MAX - 1, &st->hs_key_path) < 0) {
		headers_ok = 0;
	}
	if (hmac_get(pc, "signed_content",
	             st->hs_timestamp_header != NULL ? "{timestamp}.{body}" : "{body}",
	             HMAC_TEMPLATE_MAX, &st->hs_template) < 0) {
		headers_ok = 0;
	}
	if (!headers_ok || hmac_template_check(pc, st) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	*ret_state = st;
	return 0;
fail:
	hmac_destroy(st);
	return -1;
}

static int hmac_render(const struct hmac_state *st, const char *ts, const char *id,
                       const void *body, size_t len, struct buf *b)
{
	const char *p = st->hs_template;

	while (*p != '\0') {
		const char *brace = strchr(p, '{');
		size_t n = brace != NULL ? (size_t)(brace - p) : strlen(p);
		int rc = 0;

		if (n > 0 && buf_append(b, p, n) < 0) {
			return -1;
		}
		p += n;
		if (*p == '\0') {
			break;
		}
		if (strncmp(p, "{body}", 6) == 0) {
			rc = buf_append(b, body, len);
			p += 6;
		} else if (strncmp(p, "{timestamp}", 11) == 0) {
			rc = buf_puts(b, ts != NULL ? ts : "");
			p += 11;
		} else if (strncmp(p, "{id}", 4) == 0) {
			rc = buf_puts(b, id != NULL ? id : "");
			p += 4;
		} else {
			rc = buf_append(b, p, 1);
			p++;
		}
		if (rc < 0) {
			return -1;
		}
	}
	/* Give an empty content a buffer, so that MAC input is never NULL. */
	return buf_append(b, "", 0);
}

/* The encoded MAC with one secret, malloc'd. */
static char *hmac_encoded(const struct hmac_state *st, const struct provider_secret *secret,
                          const struct buf *content)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t mac_len = 0;
	char *out = NULL;

	if (crypto_hmac(st->hs_hash, secret->ps_data, secret->ps_len, content->buf_data,
	                content->buf_len, mac, &mac_len) < 0) {
		return NULL;
	}
	if (st->hs_encoding == HMAC_BASE64) {
		if (crypto_base64_encode(mac, mac_len, &out, NULL) < 0) {
			return NULL;
		}
		return out;
	}
	out = malloc(2 * mac_len + 1);
	if (out != NULL) {
		crypto_hex_encode(mac, mac_len, out);
	}
	return out;
}

/* 1 match, 0 none, -1 error. given is the header without its prefix. */
static int hmac_verify(const struct hmac_state *st, const char *given, const struct buf *content)
{
	char *norm = strdup(given);
	size_t len;
	size_t i;
	int ok = 0;

	if (norm == NULL) {
		return -1;
	}
	len = strlen(norm);
	while (len > 0 && (norm[len - 1] == ' ' || norm[len - 1] == '\t')) {
		norm[--len] = '\0';
	}
	/* Hex is case-insensitive; the signature is not secret, the MAC is. */
	for (i = 0; st->hs_encoding == HMAC_HEX && i < len; i++) {
		if (norm[i] >= 'A' && norm[i] <= 'F') {
			norm[i] = (char)(norm[i] - 'A' + 'a');
		}
	}
	for (i = 0; i < st->hs_secrets.ps_n; i++) {
		char *expect = hmac_encoded(st, &st->hs_secrets.ps_items[i], content);

		if (expect == NULL) {
			ok = -1;
			break;
		}
		ok |= crypto_equal(norm, len, expect, strlen(expect));
		free(expect);
	}
	free(norm);
	return ok;
}

/* The idempotency key as text: a string, or an integral number. */
static int hmac_key_from_body(const struct hmac_state *st, const cJSON *root, char **ret)
{
	const cJSON *it = provider_json_path(root, st->hs_key_path);
	int64_t n;

	if (cJSON_IsString(it) && it->valuestring[0] != '\0') {
		return provider_set_ref(ret, it->valuestring);
	}
	if (cJSON_IsNumber(it) && provider_json_minor(it, &n) == 0) {
		char *text = cJSON_PrintUnformatted(it);
		int rc;

		if (text == NULL) {
			return -1;
		}
		rc = provider_set_ref(ret, text);
		cJSON_free(text);
		return rc;
	}
	return 0;
}

static int hmac_receive(const struct provider_conf *pc, const struct http_request *req,
                        int64_t now_s, struct event_batch *ret_batch,
                        struct provider_verdict *ret_verdict)
{
	const struct hmac_state *st = pc->pc_state;
	const char *sig = NULL;
	const char *ts_text = NULL;
	const char *id = NULL;
	size_t plen = strlen(st->hs_prefix);
	struct buf content;
	cJSON *root = NULL;
	struct event *ev;
	int64_t ts = 0;
	int ok;

	buf_init(&content, 0);
	if (provider_header(req, st->hs_header, ret_verdict, &sig) < 0 ||
	    (st->hs_timestamp_header != NULL &&
	     provider_header(req, st->hs_timestamp_header, ret_verdict, &ts_text) < 0) ||
	    (st->hs_key_header != NULL &&
	     provider_header(req, st->hs_key_header, ret_verdict, &id) < 0)) {
		goto fail;
	}
	if (sig == NULL || (st->hs_timestamp_header != NULL && ts_text == NULL)) {
		provider_refuse(ret_verdict, 400, "missing_signature",
		                "The signature or timestamp header is missing.");
		goto fail;
	}
	if (strlen(sig) > HMAC_SIGNATURE_MAX || strncmp(sig, st->hs_prefix, plen) != 0 ||
	    (ts_text != NULL && provider_parse_timestamp(ts_text, &ts) < 0)) {
		provider_refuse(ret_verdict, 400, "malformed_signature",
		                "The signature or timestamp header is malformed.");
		goto fail;
	}
	if (hmac_render(st, ts_text, id, req->hr_body, req->hr_body_len, &content) < 0) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail;
	}
	ok = hmac_verify(st, sig + plen, &content);
	if (ok < 0) {
		provider_refuse(ret_verdict, 503, "internal_error", NULL);
		goto fail;
	}
	if (ok == 0) {
		provider_refuse(ret_verdict, 401, "bad_signature",
		                "The signature does not match a configured secret.");
		goto fail;
	}
	if (ts_text != NULL && !provider_timestamp_fresh(ts, now_s, pc->pc_tolerance_s)) {
		provider_refuse_stale(ret_verdict, ts, now_s, pc->pc_tolerance_s);
		goto fail;
	}
	root = json_parse_strict(req->hr_body, req->hr_body_len, NULL);
	if (!cJSON_IsObject(root)) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The body is not a JSON object.");
		goto fail;
	}
	ev = event_batch_add(ret_batch);
	if (ev == NULL) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail;
	}
	if (id != NULL && id[0] != '\0') {
		ok = provider_set_ref(&ev->ev_key, id);
	} else if (st->hs_key_path != NULL) {
		ok = hmac_key_from_body(st, root, &ev->ev_key);
	}
	/* Without a key there is no deduplication: never process such a callback. */
	if (ok < 0 || ev->ev_key == NULL) {
		provider_refuse(ret_verdict, 400, "missing_key",
		                "The callback carries no usable idempotency key.");
		goto fail_batch;
	}
	if (provider_mapping_event(&st->hs_map, root, req, ev, ret_verdict) < 0) {
		goto fail_batch;
	}
	cJSON_Delete(root);
	buf_finish(&content);
	return 0;
fail_batch:
	event_batch_finish(ret_batch);
fail:
	cJSON_Delete(root);
	buf_finish(&content);
	return -1;
}

static int hmac_ack(const struct provider_conf *pc, const struct event *ev,
                    const struct event_outcome *out, struct reply *ret)
{
	return provider_ack_json(ev, out, ret);
}

static int hmac_sign(const struct provider_conf *pc, const void *body, size_t body_len,
                     int64_t now_s, const char *event_id,
                     void (*add_header)(void *arg, const char *name, const char *value), void *arg,
                     const char **ret_why)
{
	const struct hmac_state *st = pc->pc_state;
	struct buf ts;
	struct buf content;
	struct buf header;
	char *mac = NULL;
	int rc = -1;

	if (st == NULL || st->hs_secrets.ps_n == 0) {
		*ret_why = "the instance's secrets were not loaded";
		return -1;
	}
	if (st->hs_key_header != NULL && event_id == NULL) {
		*ret_why = "the request has no delivery id in the instance's key_header, which the "
		           "signature covers as {id}";
		return -1;
	}
	buf_init(&ts, 0);
	buf_init(&content, 0);
	buf_init(&header, 0);
	if (buf_printf(&ts, "%lld", (long long)now_s) < 0 ||
	    hmac_render(st, ts.buf_data, event_id, body, body_len, &content) < 0) {
		goto done;
	}
	mac = hmac_encoded(st, &st->hs_secrets.ps_items[0], &content);
	if (mac == NULL || buf_puts(&header, st->hs_prefix) < 0 || buf_puts(&header, mac) < 0) {
		goto done;
	}
	add_header(arg, st->hs_header, header.buf_data);
	if (st->hs_timestamp_header != NULL) {
		add_header(arg, st->hs_timestamp_header, ts.buf_data);
	}
	if (st->hs_key_header != NULL) {
		add_header(arg, st->hs_key_header, event_id);
	}
	rc = 0;
done:
	if (rc < 0) {
		*ret_why = "out of memory";
	}
	free(mac);
	buf_finish(&ts);
	buf_finish(&content);
	buf_finish(&header);
	return rc;
}

/* The key header's value: hmac_sign needs it to sign {id} again. */
static const char *hmac_sign_id(const struct provider_conf *pc, const struct http_request *req)
{
	const struct hmac_state *st = pc->pc_state;

	if (st == NULL || st->hs_key_header == NULL) {
		return NULL;
	}
	return http_header_get(req, st->hs_key_header);
}

/* A body shaped by the instance's mapping, its key in key_header or at
 * key_path, signed as configured with the first secret. */
static int hmac_simulate(const struct provider_conf *pc, const struct provider_sim *sim,
                         int64_t now_s, struct buf *ret_body,
                         void (*add_header)(void *arg, const char *name, const char *value),
                         void *arg)
{
	const struct hmac_state *st = pc->pc_state;
	const char *why = NULL;
	char id[64];
	cJSON *root;
	char *text;
	int rc;

	if (st == NULL || st->hs_secrets.ps_n == 0) {
		log_err("provider %s: no secret to sign with", pc->pc_name);
		return -1;
	}
	root = provider_mapping_build(pc, &st->hs_map, sim);
	if (root == NULL) {
		return -1;
	}
	snprintf(id, sizeof(id), "sim_%s", sim->ps_id);
	if (st->hs_key_header == NULL &&
	    provider_json_put(root, st->hs_key_path, cJSON_CreateString(id)) < 0) {
		log_err("provider %s: key_path does not fit into the body", pc->pc_name);
		cJSON_Delete(root);
		return -1;
	}
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (text == NULL) {
		return -1;
	}
	rc = buf_puts(ret_body, text);
	cJSON_free(text);
	if (rc < 0) {
		return -1;
	}
	add_header(arg, "Content-Type", "application/json");
	if (hmac_sign(pc, ret_body->buf_data, ret_body->buf_len, now_s, id, add_header, arg, &why) <
	    0) {
		log_err("provider %s: cannot sign: %s", pc->pc_name, why);
		return -1;
	}
	return 0;
}

/* A generic sender: idemhook does not know its API. */
static enum provider_reconcile_mode hmac_reconcile_mode(const struct provider_conf *pc,
                                                        const char **ret_why)
{
	*ret_why = "a generic HMAC sender has no query API idemhook knows: ask the sender to "
	           "send the missing events again (its dashboard or API), or replay captures "
	           "with idemhook replay";
	return PROVIDER_RECONCILE_NONE;
}

static const char *const hmac_keys[] = {
        "secret",         "algorithm",           "encoding",   "header",
        "prefix",         "timestamp_header",    "key_header", "key_path",
        "signed_content", PROVIDER_MAPPING_KEYS, NULL};

const struct provider provider_hmac = {
        .p_name = "hmac",
        .p_keys = hmac_keys,
        .p_retry_window_s = HMAC_RETRY_WINDOW_S,
        .p_create = hmac_create,
        .p_destroy = hmac_destroy,
        .p_receive = hmac_receive,
        .p_ack = hmac_ack,
        .p_sign = hmac_sign,
        .p_sign_id = hmac_sign_id,
        .p_simulate = hmac_simulate,
        .p_reconcile_mode = hmac_reconcile_mode,
};
