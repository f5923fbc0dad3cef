/* adyen.c: Adyen standard notifications: a batch of items, each with its own
 * HMAC-SHA256; one key per item (pspReference:eventCode); answer "[accepted]". */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "json.h"
#include "log.h"
#include "money.h"
#include "providers.h"

#define ADYEN_BATCH_MAX 500 /* items verified per request: ingest takes no more either */
#define ADYEN_RETRY_WINDOW_S (30 * 24 * 3600)
#define ADYEN_AUTH_MAX 1024 /* bytes in the Authorization header */

struct adyen_state {
	struct provider_secrets ad_keys; /* binary HMAC keys (hex in config) */
	char *ad_basic;                  /* expected Authorization value, or NULL */
	char *ad_merchant_account;       /* when set, items of other accounts are refused */
};

static void adyen_destroy(void *state)
{
	struct adyen_state *st = state;

	if (st == NULL) {
		return;
	}
	provider_secrets_finish(&st->ad_keys);
	if (st->ad_basic != NULL) {
		memset(st->ad_basic, 0, strlen(st->ad_basic));
		free(st->ad_basic);
	}
	free(st->ad_merchant_account);
	free(st);
}

/* Replaces each hex key from the config by its bytes; every one is
 * checked, each bad one logged. */
static int adyen_decode_keys(const struct provider_conf *pc, struct provider_secrets *s)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < s->ps_n; i++) {
		unsigned char *raw = NULL;
		size_t raw_len = 0;

		if (crypto_hex_decode((const char *)s->ps_items[i].ps_data, s->ps_items[i].ps_len,
		                      &raw, &raw_len) < 0 ||
		    raw_len == 0) {
			log_err("provider %s: line %d: hmac_key is not the hex key from the "
			        "Customer Area",
			        pc->pc_name, s->ps_items[i].ps_line);
			free(raw);
			rc = -1;
			continue;
		}
		memset(s->ps_items[i].ps_data, 0, s->ps_items[i].ps_len);
		free(s->ps_items[i].ps_data);
		s->ps_items[i].ps_data = raw;
		s->ps_items[i].ps_len = raw_len;
	}
	return rc;
}

/* "Basic base64(user:password)" for the configured credentials. */
static int adyen_basic(const struct provider_conf *pc, struct adyen_state *st)
{
	const char *user = config_section_get(pc->pc_section, "basic_user");
	const char *pass_spec = config_section_get(pc->pc_section, "basic_password");
	char *pass = NULL;
	size_t pass_len = 0;
	char *b64 = NULL;
	struct buf b;
	int rc = -1;

	if (user == NULL && pass_spec == NULL) {
		return 0;
	}
	if (user == NULL || pass_spec == NULL || strchr(user, ':') != NULL) {
		log_err("provider %s: basic_user (without ':') and basic_password go together",
		        pc->pc_name);
		return -1;
	}
	if (provider_secret_resolve(pc, "basic_password", pass_spec, 0, &pass, &pass_len) < 0) {
		return -1;
	}
	buf_init(&b, 0);
	if (buf_puts(&b, user) < 0 || buf_puts(&b, ":") < 0 || buf_append(&b, pass, pass_len) < 0 ||
	    crypto_base64_encode(b.buf_data, b.buf_len, &b64, NULL) < 0) {
		goto done;
	}
	memset(b.buf_data, 0, b.buf_len);
	buf_finish(&b);
	buf_init(&b, 0);
	if (buf_puts(&b, "Basic ") < 0 || buf_puts(&b, b64) < 0) {
		goto done;
	}
	st->ad_basic = buf_take(&b, NULL);
	rc = st->ad_basic != NULL ? 0 : -1;
done:
	if (b64 != NULL) {
		memset(b64, 0, strlen(b64));
		free(b64);
	}
	memset(pass, 0, pass_len);
	free(pass);
	buf_finish(&b);
	return rc;
}

static int adyen_create(const struct provider_conf *pc, void **ret_state)
{
	struct adyen_state *st = calloc(1, sizeof(*st));
	const char *account;
	int keys_read;
	int rc = 0;

	if (st == NULL) {
		return -1;
	}
	if (pc->pc_section == NULL) {
		goto fail;
	}
	/* The keys and the Basic credentials, each checked whatever the
	 * other holds; the key lines read even when another could not be. */
	keys_read = provider_secrets_load(pc, "hmac_key", &st->ad_keys) == 0;
	if (adyen_decode_keys(pc, &st->ad_keys) < 0 || !keys_read) {
		rc = -1;
	} else if (st->ad_keys.ps_n == 0) {
		log_err("provider %s: hmac_key (the webhook's HMAC key) is needed", pc->pc_name);
		rc = -1;
	}
	if (adyen_basic(pc, st) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	if (st->ad_basic == NULL) {
		log_warn("provider %s: no basic_user and basic_password: the item HMAC does not "
		         "cover eventDate, so it is not used, and a re-capture Adyen reports after "
		         "a scheme rejected a capture is taken as a duplicate of the first CAPTURE "
		         "(the order stays authorized); set HTTP Basic credentials here and at "
		         "Adyen",
		         pc->pc_name);
	}
	account = config_section_get(pc->pc_section, "merchant_account");
	if (account != NULL) {
		st->ad_merchant_account = strdup(account);
		if (st->ad_merchant_account == NULL) {
			goto fail;
		}
	}
	*ret_state = st;
	return 0;
fail:
	adyen_destroy(st);
	return -1;
}

/* A field as it enters the signed string: strings as they are, integral
 * numbers in decimal, booleans as true/false, absent as "". */
static int adyen_field(const cJSON *item, const char *path, struct buf *b)
{
	const cJSON *it = provider_json_path(item, path);
	int64_t n;

	if (it == NULL || cJSON_IsNull(it)) {
		return 0;
	}
	if (cJSON_IsString(it)) {
		return buf_puts(b, it->valuestring);
	}
	if (cJSON_IsBool(it)) {
		return buf_puts(b, cJSON_IsTrue(it) ? "true" : "false");
	}
	if (cJSON_IsNumber(it) && provider_json_minor(it, &n) == 0) {
		return buf_printf(b, "%lld", (long long)n);
	}
	return -1;
}

/* The string an item's HMAC is over: eight fields joined by ':'. Returns 0,
 * or -1 when a field cannot be signed or memory ran out. */
static int adyen_signed(const cJSON *item, struct buf *b)
{
	static const char *const fields[] = {
	        "pspReference", "originalReference", "merchantAccountCode", "merchantReference",
	        "amount.value", "amount.currency",   "eventCode",           "success"};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if ((i > 0 && buf_puts(b, ":") < 0) || adyen_field(item, fields[i], b) < 0) {
			return -1;
		}
	}
	if (b->buf_data == NULL && buf_puts(b, "") < 0) {
		return -1;
	}
	return 0;
}

/* The base64 HMAC-SHA256 of signed with key (malloc'd), or NULL. */
static char *adyen_mac(const struct provider_secret *key, const struct buf *signed_text)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t mac_len = 0;
	char *b64 = NULL;

	if (crypto_hmac(CRYPTO_SHA256, key->ps_data, key->ps_len, signed_text->buf_data,
	                signed_text->buf_len, mac, &mac_len) < 0 ||
	    crypto_base64_encode(mac, mac_len, &b64, NULL) < 0) {
		return NULL;
	}
	return b64;
}

/* 1 when the item's hmacSignature matches a configured key, 0 when not or
 * when a field cannot be signed, -1 on error. */
static int adyen_item_verify(const struct adyen_state *st, const cJSON *item)
{
	const char *given = provider_json_string(item, "additionalData.hmacSignature");
	struct buf b;
	size_t i;
	int ok = 0;

	if (given == NULL) {
		return 0;
	}
	buf_init(&b, 0);
	if (adyen_signed(item, &b) < 0) {
		ok = b.buf_overflow ? -1 : 0;
		goto done;
	}
	for (i = 0; i < st->ad_keys.ps_n; i++) {
		char *b64 = adyen_mac(&st->ad_keys.ps_items[i], &b);

		if (b64 == NULL) {
			ok = -1;
			goto done;
		}
		ok |= crypto_equal(given, strlen(given), b64, strlen(b64));
		free(b64);
	}
done:
	buf_finish(&b);
	return ok;
}

/* The signed string joins eight fields with ':', so a field holding ':'
 * could be read back split another way under the same signature. The fields
 * the key and the refund and payment references come from are Adyen's own
 * tokens, which never hold one: refusing ':' there pins them in place. */
static int adyen_item_unambiguous(const cJSON *item)
{
	static const char *const fields[] = {"pspReference", "originalReference", "eventCode",
	                                     "success"};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const char *v = provider_json_string(item, fields[i]);

		if (v != NULL && strchr(v, ':') != NULL) {
			return 0;
		}
	}
	return 1;
}

static int adyen_success(const cJSON *item)
{
	const cJSON *s = provider_json_path(item, "success");

	return cJSON_IsTrue(s) || (cJSON_IsString(s) && strcmp(s->valuestring, "true") == 0);
}

/* What each eventCode means for an order (docs/providers.md has the table;
 * codes not listed are recorded). */
struct adyen_code {
	const char *ac_code;
	enum event_kind ac_kind;
	int ac_needs_success; /* success=false: the operation did not happen, recorded */
	int ac_dated_key;     /* may come again for one pspReference: the key adds eventDate
	                       * (with Basic credentials only, adyen_item_event) */
};

static const struct adyen_code adyen_codes[] = {
        {"AUTHORISATION", EVENT_PAYMENT_SUCCEEDED, 1, 0},
        {"CANCELLATION", EVENT_PAYMENT_CANCELLED, 1, 0},
        {"CANCEL_OR_REFUND", EVENT_CANCEL_OR_REFUND, 1, 0},
        /* Adyen re-captures a capture the scheme rejected and reports it
         * as a new CAPTURE of the same pspReference. */
        {"CAPTURE", EVENT_PAYMENT_CAPTURED, 1, 1},
        {"CAPTURE_FAILED", EVENT_CAPTURE_FAILED, 0, 1},
        {"CHARGEBACK", EVENT_DISPUTE_OPENED, 0, 0},
        {"CHARGEBACK_REVERSED", EVENT_DISPUTE_WON, 0, 0},
        {"EXPIRE", EVENT_PAYMENT_EXPIRED, 0, 0},
        {"OFFER_CLOSED", EVENT_PAYMENT_EXPIRED, 0, 0},
        {"PREARBITRATION_LOST", EVENT_DISPUTE_LOST, 0, 0},
        {"PREARBITRATION_WON", EVENT_DISPUTE_WON, 0, 0},
        {"REFUND", EVENT_REFUNDED, 1, 0},
        {"REFUND_FAILED", EVENT_REFUND_FAILED, 0, 0},
        {"SECOND_CHARGEBACK", EVENT_DISPUTE_LOST, 0, 0},
        {"TECHNICAL_CANCEL", EVENT_PAYMENT_CANCELLED, 1, 0},
};

static const struct adyen_code *adyen_code_find(const char *code)
{
	size_t i;

	for (i = 0; i < sizeof(adyen_codes) / sizeof(adyen_codes[0]); i++) {
		if (strcmp(adyen_codes[i].ac_code, code) == 0) {
			return &adyen_codes[i];
		}
	}
	return NULL;
}

/* Adyen counts these currencies with other decimals than ISO 4217
 * (docs.adyen.com/development-resources/currency-codes: "For CLP, CVE, IDR,
 * and ISK the standard has a different number of decimals"). */
static const struct {
	const char *ae_code;
	int ae_exponent;
} adyen_exponents[] = {
        {"CLP", 2},
        {"CVE", 0},
        {"IDR", 0},
        {"ISK", 2},
};

/* amount.value as Adyen counts it in currency (upper case), into ISO minor
 * units. Returns 0, or -1 when malformed or not a whole ISO amount. */
static int adyen_amount(const cJSON *item, const char *currency, int64_t *ret)
{
	int iso = money_exponent(currency);
	int exponent = iso;
	int64_t raw;
	size_t i;

	if (iso < 0 || provider_json_minor(item, &raw) < 0) {
		return -1;
	}
	for (i = 0; i < sizeof(adyen_exponents) / sizeof(adyen_exponents[0]); i++) {
		if (strcmp(adyen_exponents[i].ae_code, currency) == 0) {
			exponent = adyen_exponents[i].ae_exponent;
		}
	}
	return money_rescale(raw, exponent, iso, ret);
}

/* n decimal digits at *p, advancing it. Returns the value or -1. */
static int64_t adyen_digits(const char **p, int n)
{
	int64_t v = 0;
	int i;

	for (i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9') {
			return -1;
		}
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	return v;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (y, m 1..12, d). */
static int64_t adyen_days(int64_t y, int64_t m, int64_t d)
{
	int64_t era;
	int64_t yoe;
	int64_t doy;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* eventDate ("2024-12-02T10:00:00+01:00", ISO 8601 with a zone) in ms since
 * the epoch, or 0 when absent or not in that form. */
static int64_t adyen_event_ms(const char *s)
{
	int64_t y, mo, d, h, mi, sec, off = 0;
	const char *p = s;

	if (s == NULL) {
		return 0;
	}
	y = adyen_digits(&p, 4);
	if (y < 0 || *p++ != '-' || (mo = adyen_digits(&p, 2)) < 1 || mo > 12 || *p++ != '-' ||
	    (d = adyen_digits(&p, 2)) < 1 || d > 31 || *p++ != 'T' ||
	    (h = adyen_digits(&p, 2)) < 0 || h > 23 || *p++ != ':' ||
	    (mi = adyen_digits(&p, 2)) < 0 || mi > 59 || *p++ != ':' ||
	    (sec = adyen_digits(&p, 2)) < 0 || sec > 60) {
		return 0;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			p++;
		}
	}
	if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1;
		int64_t oh = adyen_digits(&p, 2);
		int64_t om;

		if (oh < 0 || oh > 23 || *p++ != ':' || (om = adyen_digits(&p, 2)) < 0 || om > 59) {
			return 0;
		}
		off = sign * (oh * 3600 + om * 60);
	} else if (*p++ != 'Z') {
		return 0;
	}
	if (*p != '\0') {
		return 0;
	}
	return ((adyen_days(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) - off) * 1000;
}

/* The kind of an item: its code, success flag and, where the code leaves it
 * open, additionalData. */
static enum event_kind adyen_kind(const struct provider_conf *pc, const cJSON *item,
                                  const struct adyen_code *c)
{
	/* additionalData keys are flat: "modification.action" is one key. */
	const cJSON *additional = provider_json_path(item, "additionalData");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(additional, "modification.action");
	const char *action = cJSON_IsString(a) ? a->valuestring : NULL;
	const char *dispute = provider_json_string(additional, "disputeStatus");

	if (c == NULL || (c->ac_needs_success && !adyen_success(item))) {
		return EVENT_OTHER;
	}
	if (c->ac_kind == EVENT_PAYMENT_SUCCEEDED && pc->pc_capture_manual) {
		return EVENT_PAYMENT_AUTHORIZED;
	}
	/* Adyen says which one it did; without that the order's state decides. */
	if (c->ac_kind == EVENT_CANCEL_OR_REFUND && action != NULL &&
	    strcmp(action, "cancel") == 0) {
		return EVENT_PAYMENT_CANCELLED;
	}
	if (c->ac_kind == EVENT_CANCEL_OR_REFUND && action != NULL &&
	    strcmp(action, "refund") == 0) {
		return EVENT_REFUNDED;
	}
	if (c->ac_kind == EVENT_DISPUTE_OPENED && dispute != NULL &&
	    (strcmp(dispute, "Lost") == 0 || strcmp(dispute, "Accepted") == 0)) {
		return EVENT_DISPUTE_LOST;
	}
	return c->ac_kind;
}

static int adyen_item_event(const struct provider_conf *pc, const cJSON *item, struct event *ev,
                            struct provider_verdict *v)
{
	const struct adyen_state *st = pc->pc_state;
	const char *psp = provider_json_string(item, "pspReference");
	const char *orig = provider_json_string(item, "originalReference");
	const char *code = provider_json_string(item, "eventCode");
	const char *currency = provider_json_string(item, "amount.currency");
	const char *account = provider_json_string(item, "merchantAccountCode");
	const char *date = provider_json_string(item, "eventDate");
	const cJSON *amount = provider_json_path(item, "amount.value");
	/* eventDate is outside the item's HMAC: anyone holding one signed item
	 * could send it again under another date. It tells one capture of a
	 * pspReference from the next (a re-capture) and orders captures only
	 * when the request itself is Adyen's, by its HTTP Basic credentials
	 * (adyen_basic_ok passed). Without them the key is signed fields only,
	 * and the time unknown (0): a capture then never outweighs a capture
	 * failure, whatever the dates say (handlers/orders.c). */
	const int dated = st->ad_basic != NULL;
	const struct adyen_code *c;
	cJSON *copy = NULL;
	cJSON *additional;
	struct buf b;
	int rc = -1;

	buf_init(&b, 0);
	if (psp == NULL || psp[0] == '\0' || code == NULL || code[0] == '\0') {
		provider_refuse(v, 400, "missing_key", "An item has no pspReference or eventCode.");
		goto done;
	}
	c = adyen_code_find(code);
	/* Adyen retries an item as it was; success=false then success=true for
	 * one pspReference are two events. A key without a suffix is the
	 * success=true one, as before the suffix existed. */
	if (buf_printf(&b, "%s:%s", psp, code) < 0 ||
	    (!adyen_success(item) && buf_puts(&b, ":false") < 0) ||
	    (c != NULL && c->ac_dated_key && dated && date != NULL &&
	     buf_printf(&b, "@%s", date) < 0) ||
	    provider_set_ref(&ev->ev_key, b.buf_data) < 0 ||
	    provider_set_ref(&ev->ev_type, code) < 0) {
		provider_refuse(v, 400, "malformed_body",
		                "An item's pspReference or eventCode is not usable.");
		goto done;
	}
	ev->ev_kind = adyen_kind(pc, item, c);
	if (orig != NULL && orig[0] == '\0') {
		orig = NULL;
	}
	/* A modification (refund, capture, dispute, ...) names the payment in
	 * originalReference and itself in pspReference. */
	if (provider_set_ref(&ev->ev_order_ref, provider_json_string(item, "merchantReference")) <
	            0 ||
	    provider_set_ref(&ev->ev_payment_ref, orig != NULL ? orig : psp) < 0 ||
	    provider_set_ref(&ev->ev_refund_ref,
	                     orig != NULL && ev->ev_kind != EVENT_OTHER ? psp : NULL) < 0) {
		provider_refuse(v, 400, "malformed_body", "An item's reference is not usable.");
		goto done;
	}
	if (currency != NULL && money_currency_normalize(currency, ev->ev_currency) < 0) {
		provider_refuse(v, 400, "malformed_body",
		                "An item's currency is not an ISO 4217 code.");
		goto done;
	}
	if (amount != NULL &&
	    (currency == NULL || adyen_amount(amount, ev->ev_currency, &ev->ev_amount) < 0)) {
		ev->ev_amount = -1;
		provider_refuse(v, 400, "malformed_body",
		                "An item's amount is not a whole number of minor units of its "
		                "currency.");
		goto done;
	}
	ev->ev_occurred_ms = dated ? adyen_event_ms(date) : 0;
	if (st->ad_merchant_account != NULL &&
	    (account == NULL || strcmp(account, st->ad_merchant_account) != 0)) {
		ev->ev_refused = 1;
	}
	/* The signature changes when the key rotates; the item's facts do not. */
	copy = cJSON_Duplicate(item, 1);
	if (copy == NULL) {
		provider_refuse(v, 503, "out_of_memory", NULL);
		goto done;
	}
	additional = cJSON_GetObjectItemCaseSensitive(copy, "additionalData");
	if (cJSON_IsObject(additional)) {
		cJSON_DeleteItemFromObjectCaseSensitive(additional, "hmacSignature");
	}
	buf_finish(&b);
	buf_init(&b, 0);
	if (provider_json_canonical(copy, &b) < 0 ||
	    provider_set_payload(ev, b.buf_data, b.buf_len) < 0) {
		provider_refuse(v, 503, "out_of_memory", NULL);
		goto done;
	}
	event_fingerprint(ev, b.buf_data, b.buf_len);
	rc = 0;
done:
	cJSON_Delete(copy);
	buf_finish(&b);
	return rc;
}

/* auth: the request's one Authorization value, or NULL. */
static int adyen_basic_ok(const struct adyen_state *st, const char *auth)
{
	if (st->ad_basic == NULL) {
		return 1;
	}
	if (auth == NULL || strlen(auth) > ADYEN_AUTH_MAX) {
		return 0;
	}
	return crypto_equal(auth, strlen(auth), st->ad_basic, strlen(st->ad_basic));
}

static int adyen_receive(const struct provider_conf *pc, const struct http_request *req,
                         int64_t now_s, struct event_batch *ret_batch,
                         struct provider_verdict *ret_verdict)
{
	const struct adyen_state *st = pc->pc_state;
	const cJSON *items;
	const cJSON *it;
	cJSON *root = NULL;
	const char *auth = NULL;
	int n = 0;

	if (st->ad_basic != NULL && provider_header(req, "Authorization", ret_verdict, &auth) < 0) {
		return -1;
	}
	if (!adyen_basic_ok(st, auth)) {
		return provider_refuse(ret_verdict, 401, "bad_credentials",
		                       "HTTP Basic credentials are missing or wrong.");
	}
	root = json_parse_strict(req->hr_body, req->hr_body_len, NULL);
	items = provider_json_path(root, "notificationItems");
	if (!cJSON_IsObject(root) || !cJSON_IsArray(items)) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The body is not an Adyen notification.");
		goto fail;
	}
	n = cJSON_GetArraySize(items);
	if (n == 0 || n > ADYEN_BATCH_MAX) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The batch is empty or too large.");
		goto fail;
	}
	/* Every item must verify before any is taken: one forged item refuses the batch. */
	cJSON_ArrayForEach(it, items)
	{
		const cJSON *item = provider_json_path(it, "NotificationRequestItem");
		int ok;

		if (!cJSON_IsObject(item)) {
			provider_refuse(ret_verdict, 400, "malformed_body",
			                "An item is not a NotificationRequestItem.");
			goto fail;
		}
		if (!adyen_item_unambiguous(item)) {
			provider_refuse(ret_verdict, 400, "malformed_body",
			                "An item's pspReference, originalReference, eventCode or "
			                "success holds ':'.");
			goto fail;
		}
		ok = adyen_item_verify(st, item);
		if (ok < 0) {
			provider_refuse(ret_verdict, 503, "internal_error", NULL);
			goto fail;
		}
		if (ok == 0) {
			provider_refuse(ret_verdict, 401, "bad_signature",
			                "An item's HMAC signature does not verify.");
			goto fail;
		}
	}
	cJSON_ArrayForEach(it, items)
	{
		struct event *ev = event_batch_add(ret_batch);

		if (ev == NULL) {
			provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
			goto fail_batch;
		}
		if (adyen_item_event(pc, provider_json_path(it, "NotificationRequestItem"), ev,
		                     ret_verdict) < 0) {
			goto fail_batch;
		}	/* The batch's "live" flag: "false" from Adyen's test platform. */
		ev->ev_test_mode = provider_json_string(root, "live") != NULL &&
		                   strcmp(provider_json_string(root, "live"), "false") == 0;
	}
	cJSON_Delete(root);
	return 0;
fail_batch:
	event_batch_finish(ret_batch);
fail:
	cJSON_Delete(root);
	return -1;
}

static int adyen_ack(const struct provider_conf *pc, const struct event *ev,
                     const struct event_outcome *out, struct reply *ret)
{
	return reply_set(ret, 200, "text/plain", "[accepted]", 10);
}

/* One AUTHORISATION or REFUND item in a batch of one, its hmacSignature
 * made with the first hmac_key, with the instance's Basic credentials. */
static int adyen_simulate(const struct provider_conf *pc, const struct provider_sim *sim,
                          int64_t now_s, struct buf *ret_body,
                          void (*add_header)(void *arg, const char *name, const char *value),
                          void *arg)
{
	const struct adyen_state *st = pc->pc_state;
	int refund = sim->ps_kind == PROVIDER_SIM_REFUND;
	char psp[17];
	char original[17];
	char date[40];
	time_t t = (time_t)now_s;
	struct tm tm;
	cJSON *root = cJSON_CreateObject();
	cJSON *items = cJSON_AddArrayToObject(root, "notificationItems");
	cJSON *wrap = cJSON_CreateObject();
	cJSON *item = cJSON_AddObjectToObject(wrap, "NotificationRequestItem");
	cJSON *amount = cJSON_AddObjectToObject(item, "amount");
	cJSON *additional;
	struct buf signed_text;
	char *mac = NULL;
	char *text = NULL;
	int rc = -1;

	buf_init(&signed_text, 0);
	if (st == NULL || st->ad_keys.ps_n == 0 || root == NULL || items == NULL || wrap == NULL ||
	    item == NULL || amount == NULL || !cJSON_AddItemToArray(items, wrap)) {
		cJSON_Delete(wrap);
		goto done;
	}
	provider_sim_ref(sim->ps_id, 1, psp, 16);
	provider_sim_ref(sim->ps_order_id, 1, original, 16);
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S+00:00", &tm) == 0) {
		goto done;
	}
	if (cJSON_AddStringToObject(root, "live", "false") == NULL ||
	    cJSON_AddStringToObject(amount, "currency", sim->ps_currency) == NULL ||
	    cJSON_AddNumberToObject(amount, "value", (double)sim->ps_amount) == NULL ||
	    cJSON_AddStringToObject(item, "eventCode", refund ? "REFUND" : "AUTHORISATION") ==
	            NULL ||
	    cJSON_AddStringToObject(item, "eventDate", date) == NULL ||
	    cJSON_AddStringToObject(item, "merchantAccountCode",
	                            st->ad_merchant_account != NULL
	                                    ? st->ad_merchant_account
	                                    : "SimulatedMerchant") == NULL ||
	    cJSON_AddStringToObject(item, "merchantReference", sim->ps_order_id) == NULL ||
	    (refund && cJSON_AddStringToObject(item, "originalReference", original) == NULL) ||
	    cJSON_AddStringToObject(item, "paymentMethod", "visa") == NULL ||
	    cJSON_AddStringToObject(item, "pspReference", psp) == NULL ||
	    cJSON_AddStringToObject(item, "reason", "") == NULL ||
	    cJSON_AddStringToObject(item, "success", "true") == NULL) {
		goto done;
	}
	if (adyen_signed(item, &signed_text) < 0) {
		goto done;
	}
	mac = adyen_mac(&st->ad_keys.ps_items[0], &signed_text);
	additional = cJSON_AddObjectToObject(item, "additionalData");
	if (mac == NULL || additional == NULL ||
	    cJSON_AddStringToObject(additional, "hmacSignature", mac) == NULL) {
		goto done;
	}
	text = cJSON_PrintUnformatted(root);
	if (text == NULL || buf_puts(ret_body, text) < 0) {
		goto done;
	}
	add_header(arg, "Content-Type", "application/json");
	if (st->ad_basic != NULL) {
		add_header(arg, "Authorization", st->ad_basic);
	}
	rc = 0;
done:
	if (rc < 0) {
		log_err("provider %s: cannot build a notification", pc->pc_name);
	}
	cJSON_free(text);
	free(mac);
	buf_finish(&signed_text);
	cJSON_Delete(root);
	return rc;
}

static const char *adyen_required_authorization(const struct provider_conf *pc)
{
	const struct adyen_state *st = pc->pc_state;

	return st->ad_basic;
}

/* Adyen offers no API that lists past webhook events or tells a payment's
 * outcome by our reference; its Customer Area resends what failed. */
static enum provider_reconcile_mode adyen_reconcile_mode(const struct provider_conf *pc,
                                                         const char **ret_why)
{
	*ret_why = "Adyen has no API to ask for past webhook events: it retries a failed delivery "
	           "for up to 30 days, and its Customer Area (Developers > Webhooks > the "
	           "endpoint > Troubleshoot) lists the failed ones and sends them again";
	return PROVIDER_RECONCILE_NONE;
}

static const char *const adyen_keys[] = {"hmac_key", "basic_user", "basic_password",
                                         "merchant_account", NULL};

const struct provider provider_adyen = {
        .p_name = "adyen",
        .p_keys = adyen_keys,
        .p_retry_window_s = ADYEN_RETRY_WINDOW_S,
        .p_capture = 1,
        .p_create = adyen_create,
        .p_destroy = adyen_destroy,
        .p_receive = adyen_receive,
        .p_ack = adyen_ack,
        /* No p_sign: the signature sits inside each item of the body, not in
         * a header. */
        .p_required_authorization = adyen_required_authorization,
        .p_simulate = adyen_simulate,
        .p_reconcile_mode = adyen_reconcile_mode,
};
