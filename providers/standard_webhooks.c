/* standard_webhooks.c: Standard Webhooks (Svix and the SaaS following the spec):
 * v1 HMAC-SHA256 and v1a Ed25519 over "id.timestamp.body", key = webhook-id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "json.h"
#include "log.h"
#include "providers.h"

#define SW_SIGNATURES_MAX 16 /* entries considered in one signature header */
#define SW_HEADER_MAX 4096   /* bytes in the signature header */
/* Svix: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: about 27.6 h. */
#define SW_RETRY_WINDOW_S (28 * 3600)
#define SW_ED25519_KEY_LEN 32
#define SW_HEADERS 3 /* id, timestamp, signature: one set */

struct standard_webhooks_state {
	struct provider_secrets sw_secrets; /* decoded HMAC keys */
	struct provider_secrets sw_public;  /* raw 32-byte Ed25519 keys */
	struct provider_mapping sw_map;
};

/* Replaces each configured value by its base64 payload after prefix;
 * every one is checked, each bad one logged. */
static int standard_webhooks_decode_keys(const struct provider_conf *pc, const char *key,
                                         const char *prefix, struct provider_secrets *s,
                                         size_t want_len)
{
	size_t plen = strlen(prefix);
	size_t i;
	int rc = 0;

	for (i = 0; i < s->ps_n; i++) {
		struct provider_secret *it = &s->ps_items[i];
		const char *text = (const char *)it->ps_data;
		size_t len = it->ps_len;
		unsigned char *raw = NULL;
		size_t raw_len = 0;

		if (len >= plen && memcmp(text, prefix, plen) == 0) {
			text += plen;
			len -= plen;
		}
		if (crypto_base64_decode(text, len, &raw, &raw_len) < 0 || raw_len == 0 ||
		    (want_len != 0 && raw_len != want_len)) {
			free(raw);
			log_err("provider %s: line %d: %s is not %s followed by base64%s",
			        pc->pc_name, it->ps_line, key, prefix,
			        want_len != 0 ? " of a 32-byte key" : "");
			rc = -1;
			continue;
		}
		memset(it->ps_data, 0, it->ps_len);
		free(it->ps_data);
		it->ps_data = raw;
		it->ps_len = raw_len;
	}
	return rc;
}

static void standard_webhooks_destroy(void *state)
{
	struct standard_webhooks_state *st = state;

	if (st == NULL) {
		return;
	}
	provider_secrets_finish(&st->sw_secrets);
	provider_secrets_finish(&st->sw_public);
	provider_mapping_finish(&st->sw_map);
	free(st);
}

static int standard_webhooks_create(const struct provider_conf *pc, void **ret_state)
{
	struct standard_webhooks_state *st = calloc(1, sizeof(*st));
	int rc = 0;

	if (st == NULL) {
		return -1;
	}
	/* The secrets, the public keys and the mapping, each checked whatever
	 * the others hold; whether any key is given only when both lists
	 * were read. */
	/* Each list's readable lines are decoded (and their problems
	 * logged) even when another line could not be read. */
	if (provider_secrets_load(pc, "secret", &st->sw_secrets) < 0) {
		rc = -1;
	}
	if (standard_webhooks_decode_keys(pc, "secret", "whsec_", &st->sw_secrets, 0) < 0) {
		rc = -1;
	}
	if (provider_publics_load(pc, "public_key", &st->sw_public) < 0) {
		rc = -1;
	}
	if (standard_webhooks_decode_keys(pc, "public_key", "whpk_", &st->sw_public,
	                                  SW_ED25519_KEY_LEN) < 0) {
		rc = -1;
	}
	if (provider_mapping_load(pc, &st->sw_map) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	if (st->sw_secrets.ps_n == 0 && st->sw_public.ps_n == 0) {
		log_err("provider %s: a secret (whsec_...) or public_key (whpk_...) is needed",
		        pc->pc_name);
		goto fail;
	}
	*ret_state = st;
	return 0;
fail:
	standard_webhooks_destroy(st);
	return -1;
}

/* The spec's header, or its svix- alias, into *ret (NULL when neither
 * is there), counting in *spec and *svix which of the two came: 0, or -1
 * with v set when either comes more than once or both come with different
 * values. A sender moving from the svix- names to the spec's may send
 * both, the same (Standard Webhooks, "Migrating"); two different ids would
 * leave the idempotency key to whichever name a receiver prefers (Svix's
 * own libraries take svix-, the spec webhook-), so neither is taken. */
static int standard_webhooks_header(const struct http_request *req, const char *suffix,
                                    const char *differ, struct provider_verdict *v, unsigned *spec,
                                    unsigned *svix, const char **ret)
{
	const char *alias = NULL;
	char name[64];

	memcpy(name, "webhook-", 8);
	memcpy(name + 8, suffix, strlen(suffix) + 1);
	if (provider_header(req, name, v, ret) < 0) {
		return -1;
	}
	memcpy(name, "svix-", 5);
	memcpy(name + 5, suffix, strlen(suffix) + 1);
	if (provider_header(req, name, v, &alias) < 0) {
		*ret = NULL;
		return -1;
	}
	*spec += *ret != NULL;
	*svix += alias != NULL;
	if (*ret == NULL) {
		*ret = alias;
	} else if (alias != NULL && strcmp(*ret, alias) != 0) {
		*ret = NULL;
		return provider_refuse(v, 400, "repeated_header", differ);
	}
	return 0;
}

static int standard_webhooks_signed_content(const char *id, const char *ts, const void *body,
                                            size_t len, struct buf *b)
{
	if (buf_puts(b, id) < 0 || buf_puts(b, ".") < 0 || buf_puts(b, ts) < 0 ||
	    buf_puts(b, ".") < 0 || buf_append(b, body, len) < 0) {
		return -1;
	}
	return 0;
}

/* base64 HMAC-SHA256 of content with one key; malloc'd. */
static char *standard_webhooks_v1(const struct provider_secret *key, const struct buf *content)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t mac_len = 0;
	char *out = NULL;

	if (crypto_hmac(CRYPTO_SHA256, key->ps_data, key->ps_len, content->buf_data,
	                content->buf_len, mac, &mac_len) < 0 ||
	    crypto_base64_encode(mac, mac_len, &out, NULL) < 0) {
		return NULL;
	}
	return out;
}

/* 1 when any entry of the header verifies, 0 when none does, -1 on error;
 * *ret_usable counts the v1/v1a entries seen. */
static int standard_webhooks_verify(const struct standard_webhooks_state *st, char *header,
                                    const struct buf *content, size_t *ret_usable)
{
	char *v1[PROVIDER_SECRETS_MAX];
	size_t i;
	size_t seen = 0;
	int ok = 0;
	int rc = -1;
	char *p = header;

	memset(v1, 0, sizeof(v1));
	for (i = 0; i < st->sw_secrets.ps_n; i++) {
		v1[i] = standard_webhooks_v1(&st->sw_secrets.ps_items[i], content);
		if (v1[i] == NULL) {
			goto done;
		}
	}
	while (*p != '\0') {
		char *tok = p + strspn(p, " ");
		size_t n = strcspn(tok, " ");
		char *comma;

		if (n == 0) {
			break;
		}
		p = tok[n] == ' ' ? tok + n + 1 : tok + n;
		tok[n] = '\0';
		comma = strchr(tok, ',');
		if (comma == NULL) {
			continue;
		}
		*comma = '\0';
		if (strcmp(tok, "v1") == 0) {
			if (++seen > SW_SIGNATURES_MAX) {
				break;
			}
			for (i = 0; i < st->sw_secrets.ps_n; i++) {
				ok |= crypto_equal(comma + 1, strlen(comma + 1), v1[i],
				                   strlen(v1[i]));
			}
		} else if (strcmp(tok, "v1a") == 0) {
			unsigned char *sig = NULL;
			size_t sig_len = 0;

			if (++seen > SW_SIGNATURES_MAX) {
				break;
			}
			if (crypto_base64_decode(comma + 1, strlen(comma + 1), &sig, &sig_len) <
			    0) {
				continue;
			}
			for (i = 0; i < st->sw_public.ps_n; i++) {
				if (crypto_ed25519_verify(st->sw_public.ps_items[i].ps_data,
				                          content->buf_data, content->buf_len, sig,
				                          sig_len) == 1) {
					ok = 1;
				}
			}
			free(sig);
		}
	}
	*ret_usable = seen;
	rc = ok;
done:
	for (i = 0; i < st->sw_secrets.ps_n; i++) {
		free(v1[i]);
	}
	return rc;
}

static int standard_webhooks_receive(const struct provider_conf *pc, const struct http_request *req,
                                     int64_t now_s, struct event_batch *ret_batch,
                                     struct provider_verdict *ret_verdict)
{
	const struct standard_webhooks_state *st = pc->pc_state;
	const char *id = NULL;
	const char *ts_text = NULL;
	const char *sig_text = NULL;
	struct buf content;
	cJSON *root = NULL;
	struct event *ev;
	char *sig = NULL;
	size_t usable = 0;
	unsigned spec = 0;
	unsigned svix = 0;
	int64_t ts = 0;
	int ok;

	buf_init(&content, 0);
	if (standard_webhooks_header(req, "id", "webhook-id and svix-id differ.", ret_verdict,
	                             &spec, &svix, &id) < 0 ||
	    standard_webhooks_header(req, "timestamp",
	                             "webhook-timestamp and svix-timestamp differ.", ret_verdict,
	                             &spec, &svix, &ts_text) < 0 ||
	    standard_webhooks_header(req, "signature",
	                             "webhook-signature and svix-signature differ.", ret_verdict,
	                             &spec, &svix, &sig_text) < 0) {
		goto fail;
	}
	/* One set under one family of names, or both sets whole. Svix's
	 * libraries read a whole svix- set, else a whole webhook- set, and
	 * the spec's receiver the webhook- set: neither takes webhook-id with
	 * svix-timestamp and svix-signature, so neither does this one. */
	if (spec > 0 && svix > 0 && (spec < SW_HEADERS || svix < SW_HEADERS)) {
		provider_refuse(ret_verdict, 400, "mixed_headers",
		                "The webhook- and svix- header names are mixed: send webhook-id, "
		                "webhook-timestamp and webhook-signature, or the three svix- "
		                "ones, or both sets with the same values.");
		goto fail;
	}
	if (id == NULL || ts_text == NULL || sig_text == NULL) {
		provider_refuse(
		        ret_verdict, 400, "missing_signature",
		        "webhook-id, webhook-timestamp and webhook-signature are all needed.");
		goto fail;
	}
	/* Checked before the key is taken: past the signature, a failing copy
	 * can then only be memory running out (503). */
	if (id[0] == '\0' || !provider_ref_usable(id)) {
		provider_refuse(ret_verdict, 400, "missing_key",
		                "The webhook-id header is empty, too long or holds a control "
		                "byte.");
		goto fail;
	}
	if (provider_parse_timestamp(ts_text, &ts) < 0 || strlen(sig_text) > SW_HEADER_MAX) {
		provider_refuse(ret_verdict, 400, "malformed_signature",
		                "The timestamp or signature header is malformed.");
		goto fail;
	}
	sig = strdup(sig_text);
	if (sig == NULL || standard_webhooks_signed_content(id, ts_text, req->hr_body,
	                                                    req->hr_body_len, &content) < 0) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail;
	}
	ok = standard_webhooks_verify(st, sig, &content, &usable);
	if (ok < 0) {
		provider_refuse(ret_verdict, 503, "internal_error", NULL);
		goto fail;
	}
	if (usable == 0) {
		provider_refuse(ret_verdict, 400, "malformed_signature",
		                "The signature header holds no v1 or v1a entry.");
		goto fail;
	}
	if (ok == 0) {
		provider_refuse(ret_verdict, 401, "bad_signature",
		                "No signature matches a configured key.");
		goto fail;
	}
	if (!provider_timestamp_fresh(ts, now_s, pc->pc_tolerance_s)) {
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
	if (ev == NULL || provider_set_ref(&ev->ev_key, id) < 0) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail_batch;
	}
	if (provider_mapping_event(&st->sw_map, root, req, ev, ret_verdict) < 0) {
		goto fail_batch;
	}
	cJSON_Delete(root);
	buf_finish(&content);
	free(sig);
	return 0;
fail_batch:
	event_batch_finish(ret_batch);
fail:
	cJSON_Delete(root);
	buf_finish(&content);
	free(sig);
	return -1;
}

static int standard_webhooks_ack(const struct provider_conf *pc, const struct event *ev,
                                 const struct event_outcome *out, struct reply *ret)
{
	return provider_ack_json(ev, out, ret);
}

static int standard_webhooks_sign(const struct provider_conf *pc, const void *body, size_t body_len,
                                  int64_t now_s, const char *event_id,
                                  void (*add_header)(void *arg, const char *name,
                                                     const char *value),
                                  void *arg, const char **ret_why)
{
	const struct standard_webhooks_state *st = pc->pc_state;
	char uuid[37];
	char ts[24];
	char id[64 + 37];
	struct buf content;
	struct buf header;
	char *mac = NULL;
	int rc = -1;

	if (st == NULL) {
		*ret_why = "the instance's secrets were not loaded";
		return -1;
	}
	/* An instance of a sender that signs v1a only holds public keys:
	 * they verify, but only the sender's private key signs. */
	if (st->sw_secrets.ps_n == 0) {
		*ret_why = "the instance holds only Ed25519 public keys (public_key), which verify "
		           "but cannot sign: give it the endpoint's whsec_ secret, or replay "
		           "in-process";
		return -1;
	}
	if (event_id == NULL) {
		if (crypto_uuid4(uuid) < 0) {
			*ret_why = "no random message id could be made";
			return -1;
		}
		memcpy(id, "msg_", 4);
		memcpy(id + 4, uuid, sizeof(uuid));
		event_id = id;
	}
	buf_init(&content, 0);
	buf_init(&header, 0);
	if (buf_printf(&header, "%lld", (long long)now_s) < 0 || header.buf_len >= sizeof(ts)) {
		goto done;
	}
	memcpy(ts, header.buf_data, header.buf_len + 1);
	buf_finish(&header);
	buf_init(&header, 0);
	if (standard_webhooks_signed_content(event_id, ts, body, body_len, &content) < 0) {
		goto done;
	}
	mac = standard_webhooks_v1(&st->sw_secrets.ps_items[0], &content);
	if (mac == NULL || buf_printf(&header, "v1,%s", mac) < 0) {
		goto done;
	}
	add_header(arg, "webhook-id", event_id);
	add_header(arg, "webhook-timestamp", ts);
	add_header(arg, "webhook-signature", header.buf_data);
	rc = 0;
done:
	if (rc < 0) {
		*ret_why = "out of memory";
	}
	free(mac);
	buf_finish(&content);
	buf_finish(&header);
	return rc;
}

/* The message id, under either name (a request this profile accepted has
 * one, or both the same). */
static const char *standard_webhooks_sign_id(const struct provider_conf *pc,
                                             const struct http_request *req)
{
	const char *id = http_header_get(req, "webhook-id");

	return id != NULL ? id : http_header_get(req, "svix-id");
}

/* A body shaped by the instance's mapping, signed v1 with its first secret
 * under a fresh webhook-id. */
static int
standard_webhooks_simulate(const struct provider_conf *pc, const struct provider_sim *sim,
                           int64_t now_s, struct buf *ret_body,
                           void (*add_header)(void *arg, const char *name, const char *value),
                           void *arg)
{
	const struct standard_webhooks_state *st = pc->pc_state;
	const char *why = NULL;
	char id[64];
	cJSON *root;
	char *text;
	int rc;

	if (st == NULL || st->sw_secrets.ps_n == 0) {
		log_err("provider %s: simulate signs v1 (HMAC) only: it needs a whsec_ secret",
		        pc->pc_name);
		return -1;
	}
	root = provider_mapping_build(pc, &st->sw_map, sim);
	if (root == NULL) {
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
	snprintf(id, sizeof(id), "msg_sim_%s", sim->ps_id);
	add_header(arg, "Content-Type", "application/json");
	if (standard_webhooks_sign(pc, ret_body->buf_data, ret_body->buf_len, now_s, id, add_header,
	                           arg, &why) < 0) {
		log_err("provider %s: cannot sign: %s", pc->pc_name, why);
		return -1;
	}
	return 0;
}

/* A generic sender: idemhook does not know its API. */
static enum provider_reconcile_mode standard_webhooks_reconcile_mode(const struct provider_conf *pc,
                                                                     const char **ret_why)
{
	*ret_why = "a Standard Webhooks sender has no query API idemhook knows: most (Svix "
	           "among them) can resend or replay failed messages from their dashboard or "
	           "API; or replay captures with idemhook replay";
	return PROVIDER_RECONCILE_NONE;
}

static const char *const standard_webhooks_keys[] = {"secret", "public_key", PROVIDER_MAPPING_KEYS,
                                                     NULL};

const struct provider provider_standard_webhooks = {
        .p_name = "standard-webhooks",
        .p_keys = standard_webhooks_keys,
        .p_retry_window_s = SW_RETRY_WINDOW_S,
        .p_create = standard_webhooks_create,
        .p_destroy = standard_webhooks_destroy,
        .p_receive = standard_webhooks_receive,
        .p_ack = standard_webhooks_ack,
        .p_sign = standard_webhooks_sign,
        .p_sign_id = standard_webhooks_sign_id,
        .p_simulate = standard_webhooks_simulate,
        .p_reconcile_mode = standard_webhooks_reconcile_mode,
};
