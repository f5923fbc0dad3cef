/* wechatpay.c: WeChat Pay API v3 notifications: SHA256withRSA by platform key
 * serial, AES-256-GCM resource decryption, body id as key, 204 acknowledgement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "json.h"
#include "log.h"
#include "money.h"
#include "providers.h"

#define WECHATPAY_KEYS_MAX 8     /* platform keys/certificates per instance */
#define WECHATPAY_SERIAL_MAX 128 /* bytes in a serial or public key id */
#define WECHATPAY_APIV3_KEY_LEN 32
#define WECHATPAY_SIGNATURE_MAX 2048         /* bytes of base64 in Wechatpay-Signature */
#define WECHATPAY_NONCE_MAX 64               /* bytes in Wechatpay-Nonce and resource.nonce */
#define WECHATPAY_RETRY_WINDOW_S (25 * 3600) /* 15 tries from 15 s to 6 h apart: just over 24 h */
#define WECHATPAY_PROBE_PREFIX "WECHATPAY/SIGNTEST/"
#define WECHATPAY_ERROR_MAX 1024 /* bytes in an error answer */
#define WECHATPAY_API_BASE_DEFAULT "https://api.mch.weixin.qq.com"
#define WECHATPAY_AUTH_SCHEMA "WECHATPAY2-SHA256-RSA2048"

struct wechatpay_key {
	char *wk_serial;
	struct crypto_pubkey *wk_key;
	int wk_line; /* the platform_key line it was read from */
};

struct wechatpay_state {
	struct wechatpay_key ws_keys[WECHATPAY_KEYS_MAX];
	size_t ws_n_keys;
	struct provider_secrets ws_apiv3; /* 32-byte API v3 keys, first is current */
	char *ws_mchid;                   /* when set, the resource's mchid must match */
	char *ws_sp_mchid;                /* partner mode: the service provider's merchant id */
	char **ws_sub_mchids; /* partner mode: accepted sub_mchid values (NULL-terminated) or NULL
	                       */
	/* Reconciliation: the merchant API private key and its certificate's
	 * serial (sign the queries), or NULL; the API base. */
	struct crypto_privkey *ws_merchant_key;
	char *ws_merchant_serial;
	char *ws_api_base;
};

static void wechatpay_destroy(void *state)
{
	struct wechatpay_state *st = state;
	size_t i;

	if (st == NULL) {
		return;
	}
	for (i = 0; i < st->ws_n_keys; i++) {
		free(st->ws_keys[i].wk_serial);
		crypto_pubkey_destroy(st->ws_keys[i].wk_key);
	}
	provider_secrets_finish(&st->ws_apiv3);
	free(st->ws_mchid);
	free(st->ws_sp_mchid);
	for (i = 0; st->ws_sub_mchids != NULL && st->ws_sub_mchids[i] != NULL; i++) {
		free(st->ws_sub_mchids[i]);
	}
	free(st->ws_sub_mchids);
	crypto_privkey_destroy(st->ws_merchant_key);
	free(st->ws_merchant_serial);
	free(st->ws_api_base);
	free(st);
}

struct wechatpay_load_ctx {
	const struct provider_conf *lc_pc;
	struct wechatpay_state *lc_st;
	int lc_bad; /* a line was refused (logged); the next ones are read all the same */
	int lc_over; /* past WECHATPAY_KEYS_MAX: said once, the rest still checked */
};

/* "SERIAL SPEC": the serial WeChat Pay sends in Wechatpay-Serial, then where
 * the PEM public key or certificate is (file:, credential:, env:). A bad
 * line is logged and the next one read. */
static int wechatpay_load_key(void *arg, const char *value, int line)
{
	struct wechatpay_load_ctx *ctx = arg;
	struct wechatpay_state *st = ctx->lc_st;
	const char *name = ctx->lc_pc->pc_name;
	size_t n = strcspn(value, " \t");
	const char *spec = value + n + strspn(value + n, " \t");
	struct wechatpay_key *k;
	struct wechatpay_key scratch = {0};
	int over = st->ws_n_keys >= WECHATPAY_KEYS_MAX;
	char *text = NULL;
	size_t len = 0;
	size_t i;

	if (over && !ctx->lc_over) {
		log_err("provider %s: line %d: more than %d platform_key values", name, line,
		        WECHATPAY_KEYS_MAX);
		ctx->lc_over = 1;
	}
	if (over) {
		ctx->lc_bad = 1; /* and the line is checked all the same, not kept */
	}
	if (n == 0 || n > WECHATPAY_SERIAL_MAX || spec[0] == '\0') {
		log_err("provider %s: line %d: platform_key needs \"SERIAL file:/path/to/key.pem\"",
		        name, line);
		ctx->lc_bad = 1;
		return 0;
	}
	/* Serials are compared without case (wechatpay_key_for): two lines
	 * naming one serial would leave which key verifies to their order. */
	for (i = 0; i < st->ws_n_keys; i++) {
		if (strlen(st->ws_keys[i].wk_serial) == n &&
		    strncasecmp(st->ws_keys[i].wk_serial, value, n) == 0) {
			log_err("provider %s: line %d: platform_key serial \"%.*s\" is line %d's "
			        "(\"%s\"; serials are compared without regard to case): one line "
			        "per serial",
			        name, line, (int)n, value, st->ws_keys[i].wk_line,
			        st->ws_keys[i].wk_serial);
			ctx->lc_bad = 1;
			return 0;
		}
	}
	if (provider_public_resolve(ctx->lc_pc, "platform_key", spec, line, &text, &len) < 0) {
		ctx->lc_bad = 1; /* logged */
		return 0;
	}
	k = over ? &scratch : &st->ws_keys[st->ws_n_keys];
	k->wk_key = crypto_pubkey_load(text, len);
	free(text);
	if (k->wk_key == NULL) {
		log_err("provider %s: line %d: platform_key is not a PEM public key or certificate",
		        name, line);
		ctx->lc_bad = 1;
		return 0;
	}
	if (over) {
		crypto_pubkey_destroy(k->wk_key);
		return 0;
	}
	k->wk_serial = strndup(value, n);
	if (k->wk_serial == NULL) {
		crypto_pubkey_destroy(k->wk_key);
		k->wk_key = NULL;
		return -1;
	}
	k->wk_line = line;
	st->ws_n_keys++;
	return 0;
}

/* One sub_mchid line: one or more ids (comma or space separated). */
static int wechatpay_sub_mchid(void *arg, const char *value, int line)
{
	struct wechatpay_state *st = arg;
	const char *cursor = value;
	const char *p;
	size_t n;
	size_t count = 0;

	while (st->ws_sub_mchids != NULL && st->ws_sub_mchids[count] != NULL) {
		count++;
	}
	while ((p = config_list_next(&cursor, &n)) != NULL) {
		char **grown = realloc(st->ws_sub_mchids, (count + 2) * sizeof(*grown));

		if (grown == NULL) {
			return -1;
		}
		st->ws_sub_mchids = grown;
		grown[count] = strndup(p, n);
		grown[count + 1] = NULL;
		if (grown[count] == NULL) {
			return -1;
		}
		count++;
	}
	return 0;
}

/* Partner (service provider) mode: sp_mchid, and optionally which
 * sub_mchid values are ours. Direct mode's mchid does not go with it. */
static int wechatpay_partner_load(const struct provider_conf *pc, struct wechatpay_state *st)
{
	const char *sp = config_section_get(pc->pc_section, "sp_mchid");

	if (sp == NULL) {
		if (config_section_get(pc->pc_section, "sub_mchid") != NULL) {
			log_err("provider %s: sub_mchid needs sp_mchid (partner mode)",
			        pc->pc_name);
			return -1;
		}
		return 0;
	}
	if (st->ws_mchid != NULL) {
		log_err("provider %s: mchid (direct merchant) and sp_mchid (partner mode) exclude "
		        "each other",
		        pc->pc_name);
		return -1;
	}
	st->ws_sp_mchid = strdup(sp);
	if (st->ws_sp_mchid == NULL) {
		return -1;
	}
	if (config_section_each(pc->pc_section, "sub_mchid", wechatpay_sub_mchid, st) != 0) {
		log_err("provider %s: sub_mchid: out of memory", pc->pc_name);
		return -1;
	}
	return 0;
}

/* 1 when the resource is for this instance's merchant where a payment or
 * refund names it: its mchid (direct), or its sp_mchid and an accepted
 * sub_mchid (partner), or anything when neither is configured. */
static int wechatpay_merchant_ok(const struct wechatpay_state *st, const cJSON *res)
{
	const char *mchid = provider_json_string(res, "mchid");
	const char *sp = provider_json_string(res, "sp_mchid");
	const char *sub = provider_json_string(res, "sub_mchid");
	size_t i;

	if (st->ws_mchid != NULL) {
		return mchid != NULL && strcmp(mchid, st->ws_mchid) == 0;
	}
	if (st->ws_sp_mchid == NULL) {
		return 1;
	}
	if (sp == NULL || strcmp(sp, st->ws_sp_mchid) != 0) {
		return 0;
	}
	if (st->ws_sub_mchids == NULL) {
		return 1;
	}
	for (i = 0; sub != NULL && st->ws_sub_mchids[i] != NULL; i++) {
		if (strcmp(sub, st->ws_sub_mchids[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

/* 1 when a combined payment's sub-order is this instance's merchant's:
 * its mchid is mchid (direct); or, in partner mode, its mchid is sp_mchid
 * and its sub_mchid an accepted one; or anything when neither is
 * configured. */
static int wechatpay_sub_order_ours(const struct wechatpay_state *st, const cJSON *sub)
{
	const char *mchid = provider_json_string(sub, "mchid");
	const char *smch = provider_json_string(sub, "sub_mchid");
	size_t i;

	if (st->ws_mchid != NULL) {
		return mchid != NULL && strcmp(mchid, st->ws_mchid) == 0;
	}
	if (st->ws_sp_mchid == NULL) {
		return 1;
	}
	if (mchid == NULL || strcmp(mchid, st->ws_sp_mchid) != 0) {
		return 0;
	}
	if (st->ws_sub_mchids == NULL) {
		return 1;
	}
	for (i = 0; smch != NULL && st->ws_sub_mchids[i] != NULL; i++) {
		if (strcmp(smch, st->ws_sub_mchids[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

/* Where a notification the profile does not apply names a merchant, by
 * WeChat Pay's field names: most resources `mchid` (partner: `sp_mchid`),
 * a transfer's `mch_id`, a combined payment `combine_mchid` and each
 * sub-order's `mchid`. */
static const char *const wechatpay_merchant_fields[] = {"mchid", "sp_mchid", "mch_id",
                                                        "combine_mchid", NULL};

enum wechatpay_named {
	WECHATPAY_NAMED_NONE = 0, /* no known field names a merchant */
	WECHATPAY_NAMED_OURS,     /* one names the instance's (mchid, or sp_mchid) */
	WECHATPAY_NAMED_OTHER,    /* merchants are named, none of them ours */
};

static void wechatpay_named_add(const struct wechatpay_state *st, const char *value,
                                enum wechatpay_named *named)
{
	const char *ours = st->ws_mchid != NULL ? st->ws_mchid : st->ws_sp_mchid;

	if (value == NULL || *named == WECHATPAY_NAMED_OURS) {
		return;
	}
	*named = strcmp(value, ours) == 0 ? WECHATPAY_NAMED_OURS : WECHATPAY_NAMED_OTHER;
}

/* Whether the resource names this instance's merchant (mchid or sp_mchid,
 * one of which is configured) in any field WeChat Pay puts one. */
static enum wechatpay_named wechatpay_merchant_named(const struct wechatpay_state *st,
                                                     const cJSON *res)
{
	enum wechatpay_named named = WECHATPAY_NAMED_NONE;
	const cJSON *sub_orders = cJSON_GetObjectItemCaseSensitive(res, "sub_orders");
	const cJSON *item;
	size_t i;

	for (i = 0; wechatpay_merchant_fields[i] != NULL; i++) {
		wechatpay_named_add(st, provider_json_string(res, wechatpay_merchant_fields[i]),
		                    &named);
	}
	if (cJSON_IsArray(sub_orders)) {
		cJSON_ArrayForEach(item, sub_orders)
		{
			wechatpay_named_add(st, provider_json_string(item, "mchid"), &named);
		}
	}
	return named;
}

/* Reconciliation's keys: merchant_key and merchant_serial go together,
 * and a query names the direct merchant (mchid). Each key checked whatever
 * the others hold; whether the two go together only when merchant_key was
 * read (a refused one is not "missing"). */
static int wechatpay_reconcile_load(const struct provider_conf *pc, struct wechatpay_state *st)
{
	const char *serial = config_section_get(pc->pc_section, "merchant_serial");
	int rc = 0;

	if (provider_privkey_load(pc, "merchant_key", &st->ws_merchant_key) < 0) {
		rc = -1;
	} else if ((st->ws_merchant_key != NULL) != (serial != NULL)) {
		log_err("provider %s: merchant_key and merchant_serial (the serial of the merchant "
		        "API certificate) go together",
		        pc->pc_name);
		rc = -1;
	}
	if (provider_base_url(pc, "api_base_url", WECHATPAY_API_BASE_DEFAULT, &st->ws_api_base) <
	    0) {
		rc = -1;
	}
	if (serial != NULL && (serial[0] == '\0' || strlen(serial) > WECHATPAY_SERIAL_MAX ||
	                       strpbrk(serial, "\" \t") != NULL)) {
		log_err("provider %s: merchant_serial: expected the certificate's serial number",
		        pc->pc_name);
		rc = -1;
	} else if (serial != NULL) {
		st->ws_merchant_serial = strdup(serial);
		if (st->ws_merchant_serial == NULL) {
			rc = -1;
		}
	}
	return rc;
}

static int wechatpay_create(const struct provider_conf *pc, void **ret_state)
{
	struct wechatpay_state *st = calloc(1, sizeof(*st));
	struct wechatpay_load_ctx ctx = {pc, st, 0, 0};
	const char *mchid;
	int keys_read = 1;
	int apiv3_read = 1;
	int rc = 0;
	size_t i;

	if (st == NULL) {
		return -1;
	}
	if (pc->pc_section == NULL) {
		goto fail;
	}
	/* Every key checked whatever the others hold, each problem logged;
	 * "are needed" only for a list whose every line was read (a refused
	 * line is not a missing one). */
	if (config_section_each(pc->pc_section, "platform_key", wechatpay_load_key, &ctx) != 0 ||
	    ctx.lc_bad) {
		keys_read = 0;
		rc = -1;
	}
	if (provider_secrets_load(pc, "apiv3_key", &st->ws_apiv3) < 0) {
		apiv3_read = 0;
		rc = -1;
	}
	if ((keys_read && st->ws_n_keys == 0) || (apiv3_read && st->ws_apiv3.ps_n == 0)) {
		log_err("provider %s: platform_key (SERIAL and key file) and apiv3_key are needed",
		        pc->pc_name);
		rc = -1;
	}
	/* The lines that could be read, even when another could not. */
	for (i = 0; i < st->ws_apiv3.ps_n; i++) {
		if (st->ws_apiv3.ps_items[i].ps_len != WECHATPAY_APIV3_KEY_LEN) {
			log_err("provider %s: line %d: apiv3_key is not %d bytes", pc->pc_name,
			        st->ws_apiv3.ps_items[i].ps_line, WECHATPAY_APIV3_KEY_LEN);
			rc = -1;
		}
	}
	mchid = config_section_get(pc->pc_section, "mchid");
	if (mchid != NULL) {
		st->ws_mchid = strdup(mchid);
		if (st->ws_mchid == NULL) {
			goto fail;
		}
	}
	if (wechatpay_partner_load(pc, st) < 0) {
		rc = -1;
	}
	if (wechatpay_reconcile_load(pc, st) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	*ret_state = st;
	return 0;
fail:
	wechatpay_destroy(st);
	return -1;
}

static const struct crypto_pubkey *wechatpay_key_for(const struct wechatpay_state *st,
                                                     const char *serial)
{
	size_t i;

	for (i = 0; i < st->ws_n_keys; i++) {
		/* Serials are hex, written in either case (the merchant
		 * platform upper, some tools lower); public key ids compare
		 * the same way. */
		if (strcasecmp(st->ws_keys[i].wk_serial, serial) == 0) {
			return st->ws_keys[i].wk_key;
		}
	}
	return NULL;
}

/* SHA256withRSA over "ts\nnonce\nbody\n": 1 valid, 0 not, -1 error. */
static int wechatpay_verify(const struct crypto_pubkey *key, const char *ts, const char *nonce,
                            const char *sig_b64, const struct http_request *req)
{
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	struct buf b;
	int rc = -1;

	if (crypto_base64_decode(sig_b64, strlen(sig_b64), &sig, &sig_len) < 0) {
		return 0;
	}
	buf_init(&b, 0);
	if (buf_printf(&b, "%s\n%s\n", ts, nonce) < 0 ||
	    buf_append(&b, req->hr_body, req->hr_body_len) < 0 || buf_puts(&b, "\n") < 0) {
		goto done;
	}
	rc = crypto_rsa_sha256_verify(key, b.buf_data, b.buf_len, sig, sig_len);
done:
	buf_finish(&b);
	free(sig);
	return rc;
}

/* Decrypts resource with any configured API v3 key; malloc'd plaintext. */
static int wechatpay_decrypt(const struct wechatpay_state *st, const cJSON *resource, char **ret,
                             size_t *ret_len)
{
	const char *alg = provider_json_string(resource, "algorithm");
	const char *ct = provider_json_string(resource, "ciphertext");
	const char *nonce = provider_json_string(resource, "nonce");
	const char *aad = provider_json_string(resource, "associated_data");
	unsigned char *raw = NULL;
	size_t raw_len = 0;
	size_t i;
	int rc = -1;

	if (alg == NULL || strcmp(alg, "AEAD_AES_256_GCM") != 0 || ct == NULL || nonce == NULL ||
	    strlen(nonce) > WECHATPAY_NONCE_MAX || nonce[0] == '\0') {
		return -1;
	}
	if (aad == NULL) {
		aad = "";
	}
	if (crypto_base64_decode(ct, strlen(ct), &raw, &raw_len) < 0) {
		return -1;
	}
	for (i = 0; i < st->ws_apiv3.ps_n && rc < 0; i++) {
		unsigned char *plain = NULL;
		size_t plain_len = 0;

		if (crypto_aes256gcm_decrypt(st->ws_apiv3.ps_items[i].ps_data, nonce, strlen(nonce),
		                             aad, strlen(aad), raw, raw_len, &plain,
		                             &plain_len) == 0) {
			*ret = (char *)plain;
			*ret_len = plain_len;
			rc = 0;
		}
	}
	free(raw);
	return rc;
}

/* The order and payment references, the currency and the amount at
 * amount_path (or none) of obj, a resource or a combined payment's
 * sub-order, once ev_kind is set. Returns 0, or -1 with the verdict set. */
static int wechatpay_fill(const cJSON *obj, const char *amount_path, struct event *ev,
                          struct provider_verdict *v)
{
	const char *currency = provider_json_string(obj, "amount.currency");
	const cJSON *amount;

	if (provider_set_ref(&ev->ev_order_ref, provider_json_string(obj, "out_trade_no")) < 0 ||
	    provider_set_ref(&ev->ev_payment_ref, provider_json_string(obj, "transaction_id")) <
	            0) {
		return provider_refuse(v, 400, "malformed_body",
		                       "A reference in the resource is not usable.");
	}
	/* WeChat Pay settles in CNY; refund notifications carry no currency. */
	if (money_currency_normalize(currency != NULL ? currency : "CNY", ev->ev_currency) < 0) {
		return provider_refuse(v, 400, "malformed_body",
		                       "The currency is not an ISO 4217 code.");
	}
	amount = amount_path != NULL ? provider_json_path(obj, amount_path) : NULL;
	if (amount != NULL && provider_json_minor(amount, &ev->ev_amount) < 0) {
		ev->ev_amount = -1;
		return provider_refuse(v, 400, "malformed_body",
		                       "The amount is not a whole number of fen.");
	}
	if (ev->ev_kind != EVENT_OTHER && amount == NULL) {
		return provider_refuse(v, 400, "malformed_body", "The resource has no amount.");
	}
	return 0;
}

/* Fills the business fields from the decrypted resource. */
static int wechatpay_normalize(const char *event_type, const cJSON *res, struct event *ev,
                               struct provider_verdict *v)
{
	const char *amount_path = NULL;

	ev->ev_kind = EVENT_OTHER;
	if (strcmp(event_type, "TRANSACTION.SUCCESS") == 0) {
		const char *state = provider_json_string(res, "trade_state");

		if (state != NULL && strcmp(state, "SUCCESS") == 0) {
			ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
		}
		amount_path = "amount.total";
	} else if (strcmp(event_type, "REFUND.SUCCESS") == 0) {
		const char *state = provider_json_string(res, "refund_status");

		if (state == NULL || strcmp(state, "SUCCESS") == 0) {
			ev->ev_kind = EVENT_REFUNDED;
		}
		amount_path = "amount.refund";
		if (provider_set_ref(&ev->ev_refund_ref, provider_json_string(res, "refund_id")) <
		    0) {
			return provider_refuse(v, 400, "malformed_body",
			                       "The refund id is not usable.");
		}
	} else if (strcmp(event_type, "REFUND.ABNORMAL") == 0 ||
	           strcmp(event_type, "REFUND.CLOSED") == 0) {
		/* The refund did not reach the payer (ABNORMAL: e.g. a closed card;
		 * the money stays with the merchant) or was closed. */
		ev->ev_kind = EVENT_REFUND_FAILED;
		amount_path = "amount.refund";
		if (provider_set_ref(&ev->ev_refund_ref, provider_json_string(res, "refund_id")) <
		    0) {
			return provider_refuse(v, 400, "malformed_body",
			                       "The refund id is not usable.");
		}
	}
	return wechatpay_fill(res, amount_path, ev, v);
}

/* Whether the batch holds an event for the sub-order order already. */
static int wechatpay_combine_seen(const struct event_batch *b, const char *order)
{
	size_t i;

	for (i = 0; i < b->eb_n; i++) {
		if (b->eb_events[i].ev_order_ref != NULL &&
		    strcmp(b->eb_events[i].ev_order_ref, order) == 0) {
			return 1;
		}
	}
	return 0;
}

/* One event of a combined payment's sub-order sub, keyed "<id>:<out_trade_no>":
 * paid when its trade_state is SUCCESS, its amount amount.total_amount.
 * The payload names the sub-order and holds the whole resource (canon). */
static int wechatpay_combine_event(const char *id, const char *event_type, const cJSON *sub,
                                   const struct buf *canon, struct event *ev,
                                   struct provider_verdict *v)
{
	const char *order = provider_json_string(sub, "out_trade_no");
	const char *state = provider_json_string(sub, "trade_state");
	struct buf key;
	struct buf b;
	int rc = -1;

	buf_init(&key, 0);
	buf_init(&b, 0);
	ev->ev_kind = state != NULL && strcmp(state, "SUCCESS") == 0 ? EVENT_PAYMENT_SUCCEEDED
	                                                             : EVENT_OTHER;
	if (buf_printf(&key, "%s:%s", id, order) < 0 ||
	    provider_set_ref(&ev->ev_key, key.buf_data) < 0 ||
	    provider_set_ref(&ev->ev_type, event_type) < 0) {
		provider_refuse(v, 400, "malformed_body", "The id or a sub-order is not usable.");
		goto done;
	}
	if (wechatpay_fill(sub, "amount.total_amount", ev, v) < 0) {
		goto done;
	}
	/* Semantic: the type, which sub-order, and the decrypted resource. */
	if (buf_puts(&b, "{\"event_type\":") < 0 || buf_json_string(&b, event_type) < 0 ||
	    buf_puts(&b, ",\"sub_order\":") < 0 || buf_json_string(&b, order) < 0 ||
	    buf_puts(&b, ",\"resource\":") < 0 ||
	    buf_append(&b, canon->buf_data, canon->buf_len) < 0 || buf_puts(&b, "}") < 0 ||
	    provider_set_payload(ev, b.buf_data, b.buf_len) < 0) {
		provider_refuse(v, 503, "out_of_memory", NULL);
		goto done;
	}
	event_fingerprint(ev, b.buf_data, b.buf_len);
	rc = 0;
done:
	buf_finish(&key);
	buf_finish(&b);
	return rc;
}

/* A combined payment (合单支付): one TRANSACTION.SUCCESS for several
 * sub-orders, each a merchant's own order with its own transaction id.
 * Each sub-order of this instance's merchant becomes one event, claimed
 * with the others in the notification's one transaction; other merchants'
 * are left out. Returns how many events were added (0: no sub-order is
 * ours), or -1 with the verdict set and the batch left empty. */
static int wechatpay_combine_read(const struct wechatpay_state *st, const char *id,
                                  const char *event_type, const cJSON *res, struct event_batch *b,
                                  struct provider_verdict *v)
{
	const cJSON *sub;
	struct buf canon;
	struct event *ev;
	int n = 0;

	buf_init(&canon, 0);
	if (provider_json_canonical(res, &canon) < 0) {
		provider_refuse(v, 503, "out_of_memory", NULL);
		goto fail;
	}
	cJSON_ArrayForEach(sub, cJSON_GetObjectItemCaseSensitive(res, "sub_orders"))
	{
		const char *order = provider_json_string(sub, "out_trade_no");

		if (!cJSON_IsObject(sub)) {
			provider_refuse(v, 400, "malformed_body", "A sub-order is not an object.");
			goto fail;
		}
		if (!wechatpay_sub_order_ours(st, sub)) {
			continue;
		}
		if (order == NULL || order[0] == '\0') {
			provider_refuse(v, 400, "malformed_body",
			                "A sub-order of this merchant names no out_trade_no.");
			goto fail;
		}
		if (wechatpay_combine_seen(b, order)) {
			provider_refuse(v, 400, "malformed_body",
			                "A sub-order's out_trade_no is named twice.");
			goto fail;
		}
		ev = event_batch_add(b);
		if (ev == NULL) {
			provider_refuse(v, 503, "out_of_memory", NULL);
			goto fail;
		}
		if (wechatpay_combine_event(id, event_type, sub, &canon, ev, v) < 0) {
			goto fail;
		}
		n++;
	}
	buf_finish(&canon);
	return n;
fail:
	buf_finish(&canon);
	event_batch_finish(b);
	return -1;
}

/* Checks the headers and the signature; 0, or -1 with the verdict set. */
static int wechatpay_authenticate(const struct provider_conf *pc, const struct http_request *req,
                                  int64_t now_s, struct provider_verdict *v)
{
	const struct wechatpay_state *st = pc->pc_state;
	const char *ts_text = NULL;
	const char *nonce = NULL;
	const char *sig = NULL;
	const char *serial = NULL;
	const struct crypto_pubkey *key;
	int64_t ts = 0;
	int ok;

	if (provider_header(req, "Wechatpay-Timestamp", v, &ts_text) < 0 ||
	    provider_header(req, "Wechatpay-Nonce", v, &nonce) < 0 ||
	    provider_header(req, "Wechatpay-Signature", v, &sig) < 0 ||
	    provider_header(req, "Wechatpay-Serial", v, &serial) < 0) {
		return -1;
	}
	if (ts_text == NULL || nonce == NULL || sig == NULL || serial == NULL) {
		return provider_refuse(
		        v, 400, "missing_signature",
		        "Wechatpay-Timestamp, -Nonce, -Signature and -Serial are all needed.");
	}
	/* WeChat Pay sends these on purpose to see that we do verify. */
	if (strncmp(sig, WECHATPAY_PROBE_PREFIX, strlen(WECHATPAY_PROBE_PREFIX)) == 0) {
		return provider_refuse(v, 401, "probe_signature", "Signature probe refused.");
	}
	if (provider_parse_timestamp(ts_text, &ts) < 0 || nonce[0] == '\0' ||
	    strlen(nonce) > WECHATPAY_NONCE_MAX || strlen(sig) > WECHATPAY_SIGNATURE_MAX) {
		return provider_refuse(v, 400, "malformed_signature",
		                       "A Wechatpay-* header is malformed.");
	}
	key = wechatpay_key_for(st, serial);
	if (key == NULL) {
		return provider_refuse(v, 401, "unknown_serial",
		                       "Wechatpay-Serial names no configured platform key.");
	}
	ok = wechatpay_verify(key, ts_text, nonce, sig, req);
	if (ok < 0) {
		return provider_refuse(v, 503, "internal_error", NULL);
	}
	if (ok == 0) {
		return provider_refuse(v, 401, "bad_signature", "The signature does not verify.");
	}
	if (!provider_timestamp_fresh(ts, now_s, pc->pc_tolerance_s)) {
		return provider_refuse_stale(v, ts, now_s, pc->pc_tolerance_s);
	}
	return 0;
}

static int wechatpay_receive(const struct provider_conf *pc, const struct http_request *req,
                             int64_t now_s, struct event_batch *ret_batch,
                             struct provider_verdict *ret_verdict)
{
	const struct wechatpay_state *st = pc->pc_state;
	const char *id;
	const char *event_type;
	cJSON *root = NULL;
	cJSON *res = NULL;
	char *plain = NULL;
	size_t plain_len = 0;
	struct event *ev;
	struct buf b;

	buf_init(&b, 0);
	if (wechatpay_authenticate(pc, req, now_s, ret_verdict) < 0) {
		goto fail;
	}
	root = json_parse_strict(req->hr_body, req->hr_body_len, NULL);
	event_type = provider_json_string(root, "event_type");
	if (!cJSON_IsObject(root) || event_type == NULL ||
	    !cJSON_IsObject(provider_json_path(root, "resource"))) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The body is not a WeChat Pay notification.");
		goto fail;
	}
	id = provider_json_string(root, "id");
	if (id == NULL || id[0] == '\0') {
		provider_refuse(ret_verdict, 400, "missing_key", "The notification has no id.");
		goto fail;
	}
	if (wechatpay_decrypt(st, provider_json_path(root, "resource"), &plain, &plain_len) < 0) {
		provider_refuse(ret_verdict, 401, "decrypt_failed",
		                "The resource does not decrypt with the configured API v3 key.");
		goto fail;
	}
	res = json_parse_strict(plain, plain_len, NULL);
	if (!cJSON_IsObject(res)) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The decrypted resource is not a JSON object.");
		goto fail;
	}
	/* Another merchant's, wherever WeChat Pay names it: not ours. */
	if ((st->ws_mchid != NULL || st->ws_sp_mchid != NULL) &&
	    wechatpay_merchant_named(st, res) == WECHATPAY_NAMED_OTHER) {
		provider_refuse(ret_verdict, 403, "wrong_merchant",
		                "The notification is for another merchant id.");
		goto fail;
	}
	/* A combined payment pays each of our sub-orders' orders; one that
	 * names none of ours is recorded as one event, below. */
	if (strcmp(event_type, "TRANSACTION.SUCCESS") == 0 &&
	    cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(res, "sub_orders"))) {
		int n = wechatpay_combine_read(st, id, event_type, res, ret_batch, ret_verdict);

		if (n < 0) {
			goto fail;
		}
		if (n > 0) {
			goto done;
		}
	}
	ev = event_batch_add(ret_batch);
	if (ev == NULL) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail;
	}
	if (provider_set_ref(&ev->ev_key, id) < 0 ||
	    provider_set_ref(&ev->ev_type, event_type) < 0) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The id or event type is not usable.");
		goto fail_batch;
	}
	if (wechatpay_normalize(event_type, res, ev, ret_verdict) < 0) {
		goto fail_batch;
	}
	/* What changes an order must name our merchant where payments and
	 * refunds do. What is only recorded (a transfer, a combined payment, a
	 * complaint) is acknowledged: refused, WeChat Pay would retry it for a
	 * day, and no retry could change the answer. */
	if (ev->ev_kind != EVENT_OTHER && !wechatpay_merchant_ok(st, res)) {
		provider_refuse(ret_verdict, 403, "wrong_merchant",
		                "The notification is for another merchant id.");
		goto fail_batch;
	}
	/* Semantic: the event type and the decrypted resource; the ciphertext
	 * and its nonce may differ between deliveries of one notification. */
	if (buf_puts(&b, "{\"event_type\":") < 0 || buf_json_string(&b, event_type) < 0 ||
	    buf_puts(&b, ",\"resource\":") < 0 || provider_json_canonical(res, &b) < 0 ||
	    buf_puts(&b, "}") < 0 || provider_set_payload(ev, b.buf_data, b.buf_len) < 0) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail_batch;
	}
	event_fingerprint(ev, b.buf_data, b.buf_len);
done:
	buf_finish(&b);
	cJSON_Delete(res);
	cJSON_Delete(root);
	free(plain);
	return 0;
fail_batch:
	event_batch_finish(ret_batch);
fail:
	buf_finish(&b);
	cJSON_Delete(res);
	cJSON_Delete(root);
	free(plain);
	return -1;
}

static int wechatpay_ack(const struct provider_conf *pc, const struct event *ev,
                         const struct event_outcome *out, struct reply *ret)
{
	return reply_set(ret, 204, NULL, NULL, 0);
}

static int wechatpay_error(const struct provider_conf *pc, int status, const char *reason,
                           const char *detail, struct reply *ret)
{
	struct buf b;
	char *body;
	size_t len = 0;

	buf_init(&b, WECHATPAY_ERROR_MAX);
	if (buf_puts(&b, "{\"code\":\"FAIL\",\"message\":") < 0 ||
	    buf_json_string(&b, detail != NULL   ? detail
	                        : reason != NULL ? reason
	                                         : "error") < 0 ||
	    buf_puts(&b, "}") < 0) {
		buf_finish(&b);
		return -1;
	}
	body = buf_take(&b, &len);
	if (body == NULL) {
		return -1;
	}
	if (reply_set_take(ret, status, "application/json", body, len) < 0) {
		free(body);
		return -1;
	}
	return 0;
}

/* Random lower-case hex of n characters into out (n + 1 bytes, n <= 64). */
static int wechatpay_sim_nonce(char *out, size_t n)
{
	unsigned char raw[32];
	char hex[2 * sizeof(raw) + 1];

	if (n > 2 * sizeof(raw) || crypto_random(raw, sizeof(raw)) < 0) {
		return -1;
	}
	crypto_hex_encode(raw, sizeof(raw), hex);
	memcpy(out, hex, n);
	out[n] = '\0';
	return 0;
}

/* The decrypted resource of a TRANSACTION.SUCCESS or REFUND.SUCCESS. */
static int wechatpay_sim_resource(const struct wechatpay_state *st, const struct provider_sim *sim,
                                  const char *when, struct buf *b)
{
	const char *mchid = st->ws_mchid != NULL ? st->ws_mchid : "1900000001";
	char transaction[29];
	char refund[29];

	memcpy(transaction, "4200", 4);
	provider_sim_ref(sim->ps_order_id, 0, transaction + 4, 24);
	if (sim->ps_kind == PROVIDER_SIM_PAYMENT) {
		return buf_printf(
		        b,
		        "{\"mchid\":\"%s\",\"appid\":\"wxd678efh567hg6787\","
		        "\"out_trade_no\":\"%s\",\"transaction_id\":\"%s\","
		        "\"trade_type\":\"NATIVE\",\"trade_state\":\"SUCCESS\","
		        "\"trade_state_desc\":\"OK\",\"bank_type\":\"OTHERS\",\"attach\":\"\","
		        "\"success_time\":\"%s\",\"payer\":{\"openid\":\"o-simulated\"},"
		        "\"amount\":{\"total\":%lld,\"payer_total\":%lld,\"currency\":\"%s\","
		        "\"payer_currency\":\"%s\"}}",
		        mchid, sim->ps_order_id, transaction, when, (long long)sim->ps_amount,
		        (long long)sim->ps_amount, sim->ps_currency, sim->ps_currency);
	}
	memcpy(refund, "5030", 4);
	provider_sim_ref(sim->ps_id, 0, refund + 4, 24);
	/* Refund notifications carry no currency: WeChat Pay refunds in CNY. */
	return buf_printf(b,
	                  "{\"mchid\":\"%s\",\"out_trade_no\":\"%s\",\"transaction_id\":\"%s\","
	                  "\"out_refund_no\":\"sim_%s\",\"refund_id\":\"%s\","
	                  "\"refund_status\":\"SUCCESS\",\"success_time\":\"%s\","
	                  "\"user_received_account\":\"simulated\",\"amount\":{\"total\":%lld,"
	                  "\"refund\":%lld,\"payer_total\":%lld,\"payer_refund\":%lld}}",
	                  mchid, sim->ps_order_id, transaction, sim->ps_id, refund, when,
	                  (long long)sim->ps_order_amount, (long long)sim->ps_amount,
	                  (long long)sim->ps_order_amount, (long long)sim->ps_amount);
}

/* A notification encrypted with the first API v3 key and signed with the
 * throwaway key, under the serial of the platform_key that is its public half. */
static int wechatpay_simulate(const struct provider_conf *pc, const struct provider_sim *sim,
                              int64_t now_s, struct buf *ret_body,
                              void (*add_header)(void *arg, const char *name, const char *value),
                              void *arg)
{
	const struct wechatpay_state *st = pc->pc_state;
	int refund = sim->ps_kind == PROVIDER_SIM_REFUND;
	const char *aad = refund ? "refund" : "transaction";
	const char *serial = NULL;
	char res_nonce[13];
	char nonce[33];
	char when[40];
	char ts[24];
	time_t t = (time_t)(now_s + 8 * 3600); /* WeChat Pay writes Beijing time */
	struct tm tm;
	struct buf plain;
	struct buf signed_text;
	unsigned char *ct = NULL;
	size_t ct_len = 0;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *ct_b64 = NULL;
	char *sig_b64 = NULL;
	size_t i;
	int rc = -1;

	buf_init(&plain, 0);
	buf_init(&signed_text, 0);
	for (i = 0; st != NULL && i < st->ws_n_keys && serial == NULL; i++) {
		if (crypto_privkey_matches(sim->ps_key, st->ws_keys[i].wk_key)) {
			serial = st->ws_keys[i].wk_serial;
		}
	}
	if (serial == NULL) {
		log_err("provider %s: no platform_key is the public half of the simulate key pair; "
		        "see idemhook simulate --print-config",
		        pc->pc_name);
		goto done;
	}
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S+08:00", &tm) == 0 ||
	    wechatpay_sim_nonce(res_nonce, 12) < 0 || wechatpay_sim_nonce(nonce, 32) < 0 ||
	    wechatpay_sim_resource(st, sim, when, &plain) < 0 ||
	    crypto_aes256gcm_encrypt(st->ws_apiv3.ps_items[0].ps_data, res_nonce, strlen(res_nonce),
	                             aad, strlen(aad), plain.buf_data, plain.buf_len, &ct,
	                             &ct_len) < 0 ||
	    crypto_base64_encode(ct, ct_len, &ct_b64, NULL) < 0) {
		goto done;
	}
	if (buf_printf(ret_body,
	               "{\"id\":\"sim-%s\",\"create_time\":\"%s\",\"resource_type\":"
	               "\"encrypt-resource\",\"event_type\":\"%s\",\"summary\":\"%s\","
	               "\"resource\":{\"original_type\":\"%s\",\"algorithm\":\"AEAD_AES_256_GCM\","
	               "\"ciphertext\":\"%s\",\"associated_data\":\"%s\",\"nonce\":\"%s\"}}",
	               sim->ps_id, when, refund ? "REFUND.SUCCESS" : "TRANSACTION.SUCCESS",
	               refund ? "Refund succeeded" : "Payment succeeded", aad, ct_b64, aad,
	               res_nonce) < 0) {
		goto done;
	}
	snprintf(ts, sizeof(ts), "%lld", (long long)now_s);
	if (buf_printf(&signed_text, "%s\n%s\n", ts, nonce) < 0 ||
	    buf_append(&signed_text, ret_body->buf_data, ret_body->buf_len) < 0 ||
	    buf_puts(&signed_text, "\n") < 0 ||
	    crypto_rsa_sha256_sign(sim->ps_key, signed_text.buf_data, signed_text.buf_len, &sig,
	                           &sig_len) < 0 ||
	    crypto_base64_encode(sig, sig_len, &sig_b64, NULL) < 0) {
		goto done;
	}
	add_header(arg, "Content-Type", "application/json");
	add_header(arg, "Wechatpay-Timestamp", ts);
	add_header(arg, "Wechatpay-Nonce", nonce);
	add_header(arg, "Wechatpay-Signature", sig_b64);
	add_header(arg, "Wechatpay-Serial", serial);
	rc = 0;
done:
	buf_finish(&plain);
	buf_finish(&signed_text);
	free(ct);
	free(ct_b64);
	free(sig);
	free(sig_b64);
	return rc;
}

/* ---- reconciliation: query by out_trade_no ----
 *
 * GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=..., with
 * Authorization: WECHATPAY2-SHA256-RSA2048 over "GET\nURL\nts\nnonce\n\n"
 * (URL: path and query, no host) with the merchant's private key; the
 * answer is signed as a notification is, over "ts\nnonce\nbody\n" with the
 * platform key its Wechatpay-Serial names (docs/reconcile.md). */

static enum provider_reconcile_mode wechatpay_reconcile_mode(const struct provider_conf *pc,
                                                             const char **ret_why)
{
	const struct wechatpay_state *st = pc->pc_state;

	*ret_why = NULL;
	if (st != NULL && st->ws_sp_mchid != NULL) {
		*ret_why = "partner mode (sp_mchid): a query must name each order's sub-merchant, "
		           "which idemhook does not know; look the orders up in the merchant "
		           "platform, or ask WeChat Pay to send the callbacks again";
		return PROVIDER_RECONCILE_NONE;
	}
	if (st == NULL || st->ws_merchant_key == NULL || st->ws_mchid == NULL) {
		*ret_why = "no merchant_key, merchant_serial and mchid: reconciliation signs its "
		           "queries with the merchant API key as the direct merchant mchid";
		return PROVIDER_RECONCILE_NONE;
	}
	return PROVIDER_RECONCILE_ORDERS;
}

static int wechatpay_reconcile_request(const struct provider_conf *pc,
                                       const struct provider_query *q, int64_t now_s,
                                       struct provider_request *ret)
{
	const struct wechatpay_state *st = pc->pc_state;
	const char *path;
	struct buf signed_text;
	struct buf auth;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *sig_b64 = NULL;
	char nonce[33];
	int rc = -1;

	buf_init(&signed_text, 0);
	buf_init(&auth, 0);
	ret->prq_method = "GET";
	if (buf_printf(&ret->prq_url, "%s/v3/pay/transactions/out-trade-no/", st->ws_api_base) <
	            0 ||
	    provider_url_encode(&ret->prq_url, q->pq_order_id) < 0 ||
	    buf_puts(&ret->prq_url, "?mchid=") < 0 ||
	    provider_url_encode(&ret->prq_url, st->ws_mchid) < 0 ||
	    wechatpay_sim_nonce(nonce, 32) < 0) {
		goto done;
	}
	/* The URL as signed: what follows the host. */
	path = strstr(ret->prq_url.buf_data, "://");
	path = path != NULL ? strchr(path + 3, '/') : NULL;
	if (path == NULL ||
	    buf_printf(&signed_text, "GET\n%s\n%lld\n%s\n\n", path, (long long)now_s, nonce) < 0 ||
	    crypto_rsa_sha256_sign(st->ws_merchant_key, signed_text.buf_data, signed_text.buf_len,
	                           &sig, &sig_len) < 0 ||
	    crypto_base64_encode(sig, sig_len, &sig_b64, NULL) < 0 ||
	    buf_printf(&auth,
	               WECHATPAY_AUTH_SCHEMA " mchid=\"%s\",nonce_str=\"%s\",signature=\"%s\","
	                                     "timestamp=\"%lld\",serial_no=\"%s\"",
	               st->ws_mchid, nonce, sig_b64, (long long)now_s,
	               st->ws_merchant_serial) < 0) {
		goto done;
	}
	httpc_headers_add(&ret->prq_headers, "Authorization", auth.buf_data);
	httpc_headers_add(&ret->prq_headers, "Accept", "application/json");
	rc = ret->prq_headers.hch_overflow ? -1 : 0;
done:
	buf_finish(&signed_text);
	buf_finish(&auth);
	free(sig);
	free(sig_b64);
	return rc;
}

/* Checks the answer's Wechatpay-* headers and signature as a callback's. */
static int wechatpay_answer_authentic(const struct provider_conf *pc,
                                      const struct httpc_response *resp, int64_t now_s,
                                      struct provider_answer *ret)
{
	struct http_request req;
	struct provider_verdict v = {0};

	memset(&req, 0, sizeof(req));
	req.hr_headers = resp->hcr_headers.hch_v;
	req.hr_n_headers = resp->hcr_headers.hch_n;
	req.hr_body = (const unsigned char *)resp->hcr_body;
	req.hr_body_len = resp->hcr_body_len;
	if (wechatpay_authenticate(pc, &req, now_s, &v) < 0) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "bad_signature",
		                           "the answer is not signed by a configured platform key "
		                           "(%s): nothing of it was used",
		                           v.pv_reason != NULL ? v.pv_reason : "unverified");
	}
	return 0;
}

/* One event of the answer, keyed "reconcile:<ref>:<what>". */
static int wechatpay_answer_event(const cJSON *res, const struct httpc_response *resp,
                                  enum event_kind kind, const char *what,
                                  struct provider_answer *ret)
{
	const char *state = provider_json_string(res, "trade_state");
	const char *transaction = provider_json_string(res, "transaction_id");
	const char *order = provider_json_string(res, "out_trade_no");
	struct provider_verdict v = {0};
	struct event *ev = event_batch_add(&ret->pa_events);
	struct buf key;
	int rc = -1;

	buf_init(&key, 0);
	if (ev == NULL) {
		return -1;
	}
	/* The answer is the resource a TRANSACTION.SUCCESS notification
	 * carries: read the same way, the kind from the state asked. */
	if (wechatpay_normalize("TRANSACTION.SUCCESS", res, ev, &v) < 0) {
		goto done;
	}
	ev->ev_kind = kind;
	if (kind != EVENT_PAYMENT_SUCCEEDED) {
		ev->ev_amount = -1;
	} else if (ev->ev_amount < 0) {
		goto done;
	}
	if (buf_printf(&key, "reconcile:%s:%s",
	               transaction != NULL && transaction[0] != '\0' ? transaction : order,
	               what) < 0 ||
	    provider_set_ref(&ev->ev_key, key.buf_data) < 0 ||
	    provider_set_ref(&ev->ev_type, state) < 0 || provider_fingerprint_normalized(ev) < 0 ||
	    provider_set_payload(ev, resp->hcr_body, resp->hcr_body_len) < 0) {
		goto done;
	}
	rc = 0;
done:
	buf_finish(&key);
	if (rc < 0) {
		event_finish(ev);
		if (--ret->pa_events.eb_n == 0) {
			event_batch_finish(&ret->pa_events);
		}
	}
	return rc;
}

static int wechatpay_reconcile_answer(const struct provider_conf *pc,
                                      const struct provider_query *q,
                                      const struct httpc_response *resp, int64_t now_s,
                                      struct provider_answer *ret)
{
	const struct wechatpay_state *st = pc->pc_state;
	cJSON *root = NULL;
	const char *state;
	const char *order;
	int rc;

	if (resp->hcr_truncated) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                           "the answer is larger than the response cap");
	}
	root = json_parse_strict(resp->hcr_body, resp->hcr_body_len, NULL);
	if (resp->hcr_status != 200) {
		const char *code = provider_json_string(root, "code");
		const char *message = provider_json_string(root, "message");

		/* An error answer changes nothing, so it is read unverified. */
		if (resp->hcr_status == 404 && code != NULL &&
		    strcmp(code, "ORDER_NOT_EXIST") == 0) {
			snprintf(ret->pa_state, sizeof(ret->pa_state), "ORDER_NOT_EXIST");
			rc = provider_answer_set(ret, PROVIDER_ANSWER_OK, NULL, NULL);
		} else {
			rc = provider_answer_set(
			        ret, PROVIDER_ANSWER_FAILED,
			        resp->hcr_status == 401 ? "unauthorized" : "provider_error",
			        "HTTP %ld %.40s: %.160s%s", resp->hcr_status,
			        code != NULL ? code : "", message != NULL ? message : "",
			        resp->hcr_status == 401
			                ? " (check merchant_key and merchant_serial)"
			                : "");
		}
		goto done;
	}
	if (wechatpay_answer_authentic(pc, resp, now_s, ret) < 0) {
		rc = -1;
		goto done;
	}
	state = provider_json_string(root, "trade_state");
	order = provider_json_string(root, "out_trade_no");
	if (!cJSON_IsObject(root) || state == NULL) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                         "the answer is not a transaction");
		goto done;
	}
	if (order == NULL || strcmp(order, q->pq_order_id) != 0 ||
	    !wechatpay_merchant_ok(st, root)) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "mismatched_answer",
		                         "the answer is about another order or merchant");
		goto done;
	}
	snprintf(ret->pa_state, sizeof(ret->pa_state), "%s", state);
	rc = 0;
	if (strcmp(state, "SUCCESS") == 0 || strcmp(state, "REFUND") == 0) {
		rc = wechatpay_answer_event(root, resp, EVENT_PAYMENT_SUCCEEDED, "paid", ret);
		if (strcmp(state, "REFUND") == 0) {
			snprintf(ret->pa_note, sizeof(ret->pa_note),
			         "paid, then refunded (trade_state REFUND); the query does not say "
			         "how "
			         "much: the REFUND.SUCCESS callback applies it, or look the refund "
			         "up "
			         "in the merchant platform");
		}
	} else if (strcmp(state, "CLOSED") == 0 || strcmp(state, "REVOKED") == 0) {
		rc = wechatpay_answer_event(root, resp, EVENT_PAYMENT_CANCELLED, "closed", ret);
	} else if (strcmp(state, "PAYERROR") == 0) {
		snprintf(ret->pa_note, sizeof(ret->pa_note),
		         "the payment failed (trade_state PAYERROR); the order stays pending");
	}
	if (rc < 0) {
		event_batch_finish(&ret->pa_events);
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                         "a reference or amount of the answer is not usable");
		goto done;
	}
	rc = provider_answer_set(ret, PROVIDER_ANSWER_OK, NULL, NULL);
done:
	cJSON_Delete(root);
	return rc;
}

static const char *const wechatpay_keys[] = {"platform_key",    "apiv3_key",    "mchid",
                                             "sp_mchid",        "sub_mchid",    "merchant_key",
                                             "merchant_serial", "api_base_url", NULL};

const struct provider provider_wechatpay = {
        .p_name = "wechatpay",
        .p_keys = wechatpay_keys,
        .p_retry_window_s = WECHATPAY_RETRY_WINDOW_S,
        .p_create = wechatpay_create,
        .p_destroy = wechatpay_destroy,
        .p_receive = wechatpay_receive,
        .p_ack = wechatpay_ack,
        /* No p_sign: the platform's private key is WeChat Pay's, not ours. */
        .p_error = wechatpay_error,
        .p_simulate = wechatpay_simulate,
        .p_reconcile_mode = wechatpay_reconcile_mode,
        .p_reconcile_request = wechatpay_reconcile_request,
        .p_reconcile_answer = wechatpay_reconcile_answer,
};
