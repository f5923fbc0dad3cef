/* stripe.c: Stripe webhooks: Stripe-Signature HMAC-SHA256, event id as key. */
#include <stdio.h>
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

#define STRIPE_SIGNATURES_MAX 16 /* v1 entries considered in one header */
#define STRIPE_HEADER_MAX 4096   /* bytes in Stripe-Signature */
#define STRIPE_RETRY_WINDOW_S (3 * 24 * 3600)

#define STRIPE_API_BASE_DEFAULT "https://api.stripe.com"
#define STRIPE_PAGE_LIMIT 100 /* events per page, Stripe's most */
/* API v2 requests name a version (Stripe-Version); the fetch reads only
 * fields every v2 version has (id, object, type, created, data). */
#define STRIPE_V2_VERSION "2025-09-30.clover"

struct stripe_state {
	struct provider_secrets ss_secrets;
	/* Reconciliation: a restricted key that may read Events, or NULL. */
	char *ss_api_key;
	char *ss_api_base;
	int ss_undelivered_only; /* ask only for events not delivered to every endpoint */
};

/* The event types the profile gives a meaning (stripe_normalize), which
 * reconciliation lists (Stripe takes up to 20 in types[]). */
static const char *const stripe_reconcile_types[] = {
        "payment_intent.succeeded",
        "payment_intent.amount_capturable_updated",
        "payment_intent.canceled",
        "checkout.session.completed",
        "checkout.session.async_payment_succeeded",
        "checkout.session.expired",
        "charge.refunded",
        "charge.refund.updated",
        "refund.updated",
        "refund.failed",
        "charge.dispute.created",
        "charge.dispute.funds_withdrawn",
        "charge.dispute.funds_reinstated",
        "charge.dispute.closed",
        NULL,
};

static void stripe_destroy(void *state);

/* The reconciliation keys: api_key, api_base_url, reconcile_undelivered_only. */
static int stripe_create_reconcile(const struct provider_conf *pc, struct stripe_state *st)
{
	const char *key = config_section_get(pc->pc_section, "api_key");
	const char *undelivered = config_section_get(pc->pc_section, "reconcile_undelivered_only");
	size_t len = 0;
	int rc = 0;

	/* Each key checked whatever the others hold. */
	if (key != NULL &&
	    provider_secret_resolve(pc, "api_key", key, 0, &st->ss_api_key, &len) < 0) {
		rc = -1;
	} else if (st->ss_api_key != NULL && len == 0) {
		log_err("provider %s: api_key is empty", pc->pc_name);
		rc = -1;
	}
	if (undelivered != NULL && config_parse_bool(undelivered, &st->ss_undelivered_only) < 0) {
		log_err("provider %s: reconcile_undelivered_only: expected yes or no", pc->pc_name);
		rc = -1;
	}
	if (provider_base_url(pc, "api_base_url", STRIPE_API_BASE_DEFAULT, &st->ss_api_base) < 0) {
		rc = -1;
	}
	return rc;
}

struct stripe_sig {
	int64_t sg_t;
	int sg_has_t;
	const char *sg_v1[STRIPE_SIGNATURES_MAX];
	size_t sg_v1_len[STRIPE_SIGNATURES_MAX];
	size_t sg_n;
};

static int stripe_create(const struct provider_conf *pc, void **ret_state)
{
	struct stripe_state *st = calloc(1, sizeof(*st));
	int rc = 0;

	if (st == NULL) {
		return -1;
	}
	/* The secrets and the reconciliation keys, each checked whatever
	 * the other holds. */
	if (provider_secrets_load(pc, "secret", &st->ss_secrets) < 0) {
		rc = -1;
	} else if (st->ss_secrets.ps_n == 0) {
		log_err("provider %s: at least one secret (the endpoint's whsec_... signing "
		        "secret) is needed",
		        pc->pc_name);
		rc = -1;
	}
	if (pc->pc_section != NULL && stripe_create_reconcile(pc, st) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	*ret_state = st;
	return 0;
fail:
	stripe_destroy(st);
	return -1;
}

static void stripe_destroy(void *state)
{
	struct stripe_state *st = state;

	if (st == NULL) {
		return;
	}
	provider_secrets_finish(&st->ss_secrets);
	if (st->ss_api_key != NULL) {
		explicit_bzero(st->ss_api_key, strlen(st->ss_api_key));
	}
	free(st->ss_api_key);
	free(st->ss_api_base);
	free(st);
}

/* Splits "t=..,v1=..,v1=..,v0=.." in place; other schemes are ignored. */
static int stripe_parse_header(char *h, struct stripe_sig *ret)
{
	char *p = h;

	memset(ret, 0, sizeof(*ret));
	while (*p != '\0') {
		char *item = p + strspn(p, " \t");
		size_t n = strcspn(item, ",");
		char *eq;
		char *end = item + n;

		p = *end == ',' ? end + 1 : end;
		*end = '\0';
		while (end > item && (end[-1] == ' ' || end[-1] == '\t')) {
			*--end = '\0';
		}
		eq = strchr(item, '=');
		if (eq == NULL) {
			continue;
		}
		*eq = '\0';
		if (strcmp(item, "t") == 0) {
			if (ret->sg_has_t || provider_parse_timestamp(eq + 1, &ret->sg_t) < 0) {
				return -1;
			}
			ret->sg_has_t = 1;
		} else if (strcmp(item, "v1") == 0) {
			if (ret->sg_n >= STRIPE_SIGNATURES_MAX) {
				return -1;
			}
			ret->sg_v1[ret->sg_n] = eq + 1;
			ret->sg_v1_len[ret->sg_n] = strlen(eq + 1);
			ret->sg_n++;
		}
	}
	if (!ret->sg_has_t || ret->sg_n == 0) {
		return -1;
	}
	return 0;
}

/* HMAC-SHA256 over "<t>.<body>" with secret, as lower-case hex into out[65];
 * the body is MACed where it lies, not copied behind the prefix. */
static int stripe_mac(const struct provider_secret *secret, int64_t t, const void *body,
                      size_t body_len, char out[2 * CRYPTO_SHA256_LEN + 1])
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	char prefix[32];
	struct crypto_span spans[2];
	size_t mac_len = 0;
	int n = snprintf(prefix, sizeof(prefix), "%lld.", (long long)t);

	if (n < 0 || (size_t)n >= sizeof(prefix)) {
		return -1;
	}
	spans[0] = (struct crypto_span){.cs_data = prefix, .cs_len = (size_t)n};
	spans[1] = (struct crypto_span){.cs_data = body, .cs_len = body_len};
	if (crypto_hmac_spans(CRYPTO_SHA256, secret->ps_data, secret->ps_len, spans, 2, mac,
	                      &mac_len) < 0) {
		return -1;
	}
	crypto_hex_encode(mac, mac_len, out);
	return 0;
}

static int stripe_verify(const struct stripe_state *st, const struct stripe_sig *sig,
                         const struct http_request *req)
{
	size_t i;
	size_t j;
	int ok = 0;

	for (i = 0; i < st->ss_secrets.ps_n; i++) {
		char expect[2 * CRYPTO_SHA256_LEN + 1];

		if (stripe_mac(&st->ss_secrets.ps_items[i], sig->sg_t, req->hr_body,
		               req->hr_body_len, expect) < 0) {
			return -1;
		}
		/* No early exit: the time taken does not depend on which entry matched. */
		for (j = 0; j < sig->sg_n; j++) {
			ok |= crypto_equal(sig->sg_v1[j], sig->sg_v1_len[j], expect,
			                   2 * CRYPTO_SHA256_LEN);
		}
	}
	return ok;
}

static const char *stripe_order_ref(const cJSON *obj)
{
	const char *ref = provider_json_string(obj, "metadata.order_id");

	if (ref == NULL || ref[0] == '\0') {
		ref = provider_json_string(obj, "client_reference_id");
	}
	if (ref != NULL && ref[0] == '\0') {
		ref = NULL;
	}
	return ref;
}

/* Stripe counts ISK in hundredths though ISO 4217 gives it no minor unit:
 * "ISK will remain a two-decimal currency in the Stripe API, and an ISK
 * amount of 100 will continue to represent 1 krona" (Stripe, deprecation of
 * fractional ISK, 2023; docs.stripe.com/currencies "Special cases"). HUF and
 * TWD are two-decimal in charges as in ISO (their special case is payouts,
 * in whole units), and UGX is zero-decimal as in ISO; the other currencies
 * follow ISO 4217 too. */
static const struct {
	const char *se_code;
	int se_exponent;
} stripe_exponents[] = {
        {"ISK", 2},
};

/* An amount as Stripe counts it in currency (upper case), into ISO minor
 * units. Returns 0, or -1 when malformed or not a whole ISO amount. Stripe
 * sends every amount as a JSON integer: a string ("1999") is malformed,
 * whatever its digits. */
static int stripe_amount(const cJSON *item, const char *currency, int64_t *ret)
{
	int iso = money_exponent(currency);
	int exponent = iso;
	int64_t raw;
	size_t i;

	if (iso < 0 || !cJSON_IsNumber(item) || provider_json_minor(item, &raw) < 0) {
		return -1;
	}
	for (i = 0; i < sizeof(stripe_exponents) / sizeof(stripe_exponents[0]); i++) {
		if (strcmp(stripe_exponents[i].se_code, currency) == 0) {
			exponent = stripe_exponents[i].se_exponent;
		}
	}
	return money_rescale(raw, exponent, iso, ret);
}

static int stripe_is(const char *s, const char *want)
{
	return s != NULL && strcmp(s, want) == 0;
}

/* Fills the business fields of ev from the event's type and data.object
 * (docs/providers.md has the table). */
static int stripe_normalize(const char *id, const char *type, int64_t created_s, const cJSON *obj,
                            struct event *ev, struct provider_verdict *v)
{
	const char *currency = provider_json_string(obj, "currency");
	const char *object_id = provider_json_string(obj, "id");
	const char *status = provider_json_string(obj, "status");
	const char *pi = provider_json_string(obj, "payment_intent");
	const char *charge = provider_json_string(obj, "charge");
	const char *ref = NULL;
	const char *amount_key = "amount";
	const cJSON *amount;

	ev->ev_kind = EVENT_OTHER;
	/* A PaymentIntent or a Charge is the payment; refunds, disputes and
	 * sessions name it. */
	if (stripe_is(provider_json_string(obj, "object"), "payment_intent")) {
		pi = object_id;
		charge = provider_json_string(obj, "latest_charge");
	} else if (stripe_is(provider_json_string(obj, "object"), "charge")) {
		charge = object_id;
	} else if (stripe_is(provider_json_string(obj, "object"), "checkout.session")) {
		amount_key = "amount_total";
	}
	if (strcmp(type, "payment_intent.succeeded") == 0) {
		ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
		pi = object_id;
		charge = provider_json_string(obj, "latest_charge");
		amount_key =
		        cJSON_HasObjectItem(obj, "amount_received") ? "amount_received" : "amount";
	} else if (strcmp(type, "payment_intent.amount_capturable_updated") == 0) {
		const cJSON *capturable =
		        cJSON_GetObjectItemCaseSensitive(obj, "amount_capturable");

		/* capture_method=manual: the funds are held until captured. */
		if (cJSON_IsNumber(capturable) && capturable->valuedouble > 0) {
			ev->ev_kind = EVENT_PAYMENT_AUTHORIZED;
		}
		pi = object_id;
		charge = provider_json_string(obj, "latest_charge");
	} else if (strcmp(type, "payment_intent.canceled") == 0) {
		ev->ev_kind = EVENT_PAYMENT_CANCELLED;
		pi = object_id;
	} else if (strcmp(type, "checkout.session.completed") == 0 ||
	           strcmp(type, "checkout.session.async_payment_succeeded") == 0) {
		/* An unpaid session (delayed methods) pays later with its own event. */
		if (stripe_is(provider_json_string(obj, "payment_status"), "paid")) {
			ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
		}
		amount_key = "amount_total";
	} else if (strcmp(type, "checkout.session.expired") == 0) {
		ev->ev_kind = EVENT_PAYMENT_EXPIRED;
		amount_key = "amount_total";
	} else if (strcmp(type, "charge.refunded") == 0) {
		ev->ev_kind = EVENT_REFUNDED;
		ev->ev_refund_cumulative = 1;
		amount_key = "amount_refunded";
		charge = object_id;
		ref = provider_json_string(obj, "refunds.data.0.id");
		if (ref == NULL) {
			ref = id;
		}
	} else if (strcmp(type, "charge.refund.updated") == 0 ||
	           strcmp(type, "refund.updated") == 0 || strcmp(type, "refund.failed") == 0) {
		/* A Refund object; refund.created and succeeded updates are
		 * counted by charge.refunded already. */
		if (stripe_is(status, "failed") || stripe_is(status, "canceled")) {
			ev->ev_kind = EVENT_REFUND_FAILED;
		}
		ref = object_id;
	} else if (strncmp(type, "charge.dispute.", 15) == 0) {
		const char *what = type + 15;

		/* Inquiries (status warning_*) withhold no funds. */
		if ((strcmp(what, "created") == 0 && status != NULL &&
		     strncmp(status, "warning_", 8) != 0) ||
		    strcmp(what, "funds_withdrawn") == 0) {
			ev->ev_kind = EVENT_DISPUTE_OPENED;
		} else if (strcmp(what, "funds_reinstated") == 0 ||
		           (strcmp(what, "closed") == 0 && stripe_is(status, "won"))) {
			ev->ev_kind = EVENT_DISPUTE_WON;
		} else if (strcmp(what, "closed") == 0 && stripe_is(status, "lost")) {
			ev->ev_kind = EVENT_DISPUTE_LOST;
		}
		ref = object_id;
	}
	/* The PaymentIntent names the payment; a charge without one (the
	 * Charges API) names it by itself. */
	if (pi == NULL) {
		pi = charge;
		charge = NULL;
	}
	if (provider_set_ref(&ev->ev_order_ref, stripe_order_ref(obj)) < 0 ||
	    provider_set_ref(&ev->ev_payment_ref, pi) < 0 ||
	    provider_set_ref(&ev->ev_charge_ref, charge) < 0 ||
	    provider_set_ref(&ev->ev_refund_ref, ev->ev_kind != EVENT_OTHER ? ref : NULL) < 0) {
		return provider_refuse(v, 400, "malformed_body",
		                       "A reference in the event is not usable.");
	}
	if (currency != NULL && money_currency_normalize(currency, ev->ev_currency) < 0) {
		return provider_refuse(v, 400, "malformed_body",
		                       "The currency is not an ISO 4217 code.");
	}
	amount = cJSON_GetObjectItemCaseSensitive(obj, amount_key);
	if (amount != NULL && !cJSON_IsNull(amount) &&
	    (currency == NULL || stripe_amount(amount, ev->ev_currency, &ev->ev_amount) < 0)) {
		ev->ev_amount = -1;
		return provider_refuse(v, 400, "malformed_body",
		                       "The amount is not a whole number of minor units of its "
		                       "currency.");
	}
	ev->ev_occurred_ms = created_s > 0 ? created_s * 1000 : 0;
	return 0;
}

/* Only `type` and `data.object` are semantic: `pending_webhooks`, `request`
 * and delivery details differ between retries of one event. */
static int stripe_fingerprint(const char *type, const cJSON *obj, struct event *ev)
{
	struct buf b;
	int rc = -1;

	buf_init(&b, 0);
	if (buf_puts(&b, "{\"type\":") < 0 || buf_json_string(&b, type) < 0 ||
	    buf_puts(&b, ",\"object\":") < 0 || provider_json_canonical(obj, &b) < 0 ||
	    buf_puts(&b, "}") < 0) {
		goto done;
	}
	event_fingerprint(ev, b.buf_data, b.buf_len);
	rc = 0;
done:
	buf_finish(&b);
	return rc;
}

/* Appends one event to b: key id, recorded type, the business fields read
 * from obj as a snapshot event of norm_type, the fingerprint, test_mode
 * (the event's livemode is false) and the payload raw. Returns 0, or -1 with v set and b as it was.
 */
static int stripe_event_add(struct event_batch *b, const char *id, const char *type,
                            const char *norm_type, int64_t created_s, const cJSON *obj,
                            int test_mode, const void *raw, size_t raw_len,
                            struct provider_verdict *v)
{
	struct event *ev = event_batch_add(b);

	if (ev == NULL) {
		return provider_refuse(v, 503, "out_of_memory", NULL);
	}
	if (provider_set_ref(&ev->ev_key, id) < 0 || provider_set_ref(&ev->ev_type, type) < 0) {
		provider_refuse(v, 400, "malformed_body", "The event id or type is not usable.");
		goto fail;
	}
	if (stripe_normalize(id, norm_type, created_s, obj, ev, v) < 0) {
		goto fail;
	}
	ev->ev_test_mode = test_mode;
	if (stripe_fingerprint(norm_type, obj, ev) < 0 ||
	    provider_set_payload(ev, raw, raw_len) < 0) {
		provider_refuse(v, 503, "out_of_memory", NULL);
		goto fail;
	}
	return 0;
fail:
	event_finish(ev);
	if (--b->eb_n == 0) {
		event_batch_finish(b);
	}
	return -1;
}

/* Appends the Stripe event root (raw: its text, kept as the payload) to b,
 * normalised: the webhook's body and an event Stripe lists are the same
 * object, so both give the same key, event and fingerprint. Returns 0, or
 * -1 with v set and b as it was. */
static int stripe_event_read(const cJSON *root, const void *raw, size_t raw_len,
                             struct event_batch *b, struct provider_verdict *v)
{
	const cJSON *obj = provider_json_path(root, "data.object");
	const char *type = provider_json_string(root, "type");
	const cJSON *created;
	const char *id;

	if (!cJSON_IsObject(root) || !cJSON_IsObject(obj) || type == NULL) {
		return provider_refuse(v, 400, "malformed_body", "The body is not a Stripe event.");
	}
	id = provider_json_string(root, "id");
	if (id == NULL || id[0] == '\0') {
		return provider_refuse(v, 400, "missing_key", "The event has no id.");
	}
	created = cJSON_GetObjectItemCaseSensitive(root, "created");
	return stripe_event_add(
	        b, id, type, type,
	        cJSON_IsNumber(created) && created->valuedouble > 0 && created->valuedouble < 1e11
	                ? (int64_t)created->valuedouble
	                : 0,
	        obj, cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "livemode")), raw,
	        raw_len, v);
}

/* ---- thin events (event destinations, docs/providers.md) ---- */

/* A thin event of a v1 resource is typed "v1.<snapshot type>"; v2 types
 * ("v2.core....") name nothing this profile gives a meaning. */
static const char *stripe_thin_snapshot_type(const char *type)
{
	return strncmp(type, "v1.", 3) == 0 ? type + 3 : type;
}

/* Events v2 give `created` as RFC 3339 ("2025-01-01T00:00:00.000Z");
 * seconds since the epoch, or 0 when unreadable. */
static int64_t stripe_v2_created(const cJSON *created)
{
	struct tm tm;
	const char *s;
	char *end;

	if (cJSON_IsNumber(created)) {
		return created->valuedouble > 0 && created->valuedouble < 1e11
		               ? (int64_t)created->valuedouble
		               : 0;
	}
	if (!cJSON_IsString(created)) {
		return 0;
	}
	s = created->valuestring;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL) {
		return 0;
	}
	return (int64_t)timegm(&tm);
}

/* A thin notification: authentic but without the object's data. It
 * becomes one event to fetch (ev_fetch), keyed by its own id, with the
 * related object as its payment reference, so that operators see what it
 * is about before the fetch. */
static int stripe_thin_read(const struct stripe_state *st, const cJSON *root, const void *raw,
                            size_t raw_len, struct event_batch *b, struct provider_verdict *v)
{
	const char *id = provider_json_string(root, "id");
	const char *type = provider_json_string(root, "type");
	const cJSON *related = cJSON_GetObjectItemCaseSensitive(root, "related_object");
	const cJSON *context = cJSON_GetObjectItemCaseSensitive(root, "context");
	struct event *ev;
	struct buf fp;

	if (id == NULL || id[0] == '\0') {
		return provider_refuse(v, 400, "missing_key", "The thin event has no id.");
	}
	if (type == NULL) {
		return provider_refuse(v, 400, "malformed_body", "The thin event has no type.");
	}
	/* null (or "", as Stripe's SDKs read it): the instance's own account. */
	if (context != NULL && !cJSON_IsNull(context) &&
	    !(cJSON_IsString(context) &&
	      (context->valuestring[0] == '\0' || provider_context_valid(context->valuestring)))) {
		return provider_refuse(v, 400, "malformed_body",
		                       "The thin event's context is not an account id.");
	}
	if (st->ss_api_key == NULL) {
		/* Stripe retries it until the key is given: nothing is claimed. */
		log_err("stripe: thin event \"%.64s\" cannot be fetched: the instance has no "
		        "api_key (a restricted key that may read Events)",
		        id);
		return provider_refuse(v, 503, "fetch_unconfigured",
		                       "Thin events need api_key to fetch the full event.");
	}
	ev = event_batch_add(b);
	if (ev == NULL) {
		return provider_refuse(v, 503, "out_of_memory", NULL);
	}
	ev->ev_fetch = 1;
	buf_init(&fp, 0);
	if (provider_set_ref(&ev->ev_key, id) < 0 || provider_set_ref(&ev->ev_type, type) < 0 ||
	    provider_set_ref(&ev->ev_context,
	                     cJSON_IsString(context) && context->valuestring[0] != '\0'
	                             ? context->valuestring
	                             : NULL) < 0 ||
	    provider_set_ref(&ev->ev_payment_ref,
	                     cJSON_IsObject(related) ? provider_json_string(related, "id") : NULL) <
	            0) {
		provider_refuse(v, 400, "malformed_body",
		                "The thin event's id or type is not usable.");
		goto fail;
	}
	ev->ev_occurred_ms =
	        stripe_v2_created(cJSON_GetObjectItemCaseSensitive(root, "created")) * 1000;
	ev->ev_test_mode = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "livemode"));
	/* Semantic: the type and what it is about; not delivery details. */
	if (buf_puts(&fp, "{\"thin\":") < 0 || buf_json_string(&fp, type) < 0 ||
	    buf_puts(&fp, ",\"related_object\":") < 0 ||
	    (cJSON_IsObject(related) ? provider_json_canonical(related, &fp)
	                             : buf_puts(&fp, "null")) < 0 ||
	    buf_puts(&fp, "}") < 0 || provider_set_payload(ev, raw, raw_len) < 0) {
		provider_refuse(v, 503, "out_of_memory", NULL);
		goto fail;
	}
	event_fingerprint(ev, fp.buf_data, fp.buf_len);
	buf_finish(&fp);
	return 0;
fail:
	buf_finish(&fp);
	event_finish(ev);
	if (--b->eb_n == 0) {
		event_batch_finish(b);
	}
	return -1;
}

static int stripe_receive(const struct provider_conf *pc, const struct http_request *req,
                          int64_t now_s, struct event_batch *ret_batch,
                          struct provider_verdict *ret_verdict)
{
	const struct stripe_state *st = pc->pc_state;
	const char *header = NULL;
	struct stripe_sig sig;
	cJSON *root = NULL;
	char *copy = NULL;
	int ok;

	if (provider_header(req, "Stripe-Signature", ret_verdict, &header) < 0) {
		return -1;
	}
	if (header == NULL) {
		return provider_refuse(ret_verdict, 400, "missing_signature",
		                       "The Stripe-Signature header is missing.");
	}
	if (strlen(header) > STRIPE_HEADER_MAX) {
		return provider_refuse(ret_verdict, 400, "malformed_signature",
		                       "The Stripe-Signature header is too long.");
	}
	copy = strdup(header);
	if (copy == NULL) {
		return provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
	}
	if (stripe_parse_header(copy, &sig) < 0) {
		provider_refuse(
		        ret_verdict, 400, "malformed_signature",
		        "The Stripe-Signature header needs one t= and at least one v1= entry.");
		goto fail;
	}
	ok = stripe_verify(st, &sig, req);
	if (ok < 0) {
		provider_refuse(ret_verdict, 503, "internal_error", NULL);
		goto fail;
	}
	if (ok == 0) {
		provider_refuse(ret_verdict, 401, "bad_signature",
		                "No v1 signature matches a configured secret.");
		goto fail;
	}
	if (!provider_timestamp_fresh(sig.sg_t, now_s, pc->pc_tolerance_s)) {
		provider_refuse_stale(ret_verdict, sig.sg_t, now_s, pc->pc_tolerance_s);
		goto fail;
	}
	root = json_parse_strict(req->hr_body, req->hr_body_len, NULL);
	if (stripe_is(provider_json_string(root, "object"), "v2.core.event")) {
		if (stripe_thin_read(st, root, req->hr_body, req->hr_body_len, ret_batch,
		                     ret_verdict) < 0) {
			goto fail;
		}
	} else if (stripe_event_read(root, req->hr_body, req->hr_body_len, ret_batch, ret_verdict) <
	           0) {
		goto fail;
	}
	cJSON_Delete(root);
	free(copy);
	return 0;
fail:
	cJSON_Delete(root);
	free(copy);
	return -1;
}

static int stripe_ack(const struct provider_conf *pc, const struct event *ev,
                      const struct event_outcome *out, struct reply *ret)
{
	return provider_ack_json(ev, out, ret);
}

static int stripe_sign(const struct provider_conf *pc, const void *body, size_t body_len,
                       int64_t now_s, const char *event_id,
                       void (*add_header)(void *arg, const char *name, const char *value),
                       void *arg, const char **ret_why)
{
	const struct stripe_state *st = pc->pc_state;
	char mac[2 * CRYPTO_SHA256_LEN + 1];
	struct buf b;
	int rc = -1;

	if (st == NULL || st->ss_secrets.ps_n == 0) {
		*ret_why = "the instance's secrets were not loaded";
		return -1;
	}
	if (stripe_mac(&st->ss_secrets.ps_items[0], now_s, body, body_len, mac) < 0) {
		*ret_why = "the HMAC could not be computed";
		return -1;
	}
	buf_init(&b, 0);
	if (buf_printf(&b, "t=%lld,v1=%s", (long long)now_s, mac) < 0) {
		*ret_why = "out of memory";
		goto done;
	}
	add_header(arg, "Stripe-Signature", b.buf_data);
	rc = 0;
done:
	buf_finish(&b);
	return rc;
}

/* A payment_intent.succeeded, or a charge.refunded carrying the running
 * total, shaped as Stripe sends them (currency in lower case); or the
 * payment as a thin event, whose full event Stripe's API serves. */
static int stripe_simulate(const struct provider_conf *pc, const struct provider_sim *sim,
                           int64_t now_s, struct buf *ret_body,
                           void (*add_header)(void *arg, const char *name, const char *value),
                           void *arg)
{
	const char *why = NULL;
	char cur[4];
	char id[64];
	int rc;
	int i;

	if (pc->pc_state == NULL ||
	    ((const struct stripe_state *)pc->pc_state)->ss_secrets.ps_n == 0) {
		log_err("provider %s: no secret to sign with", pc->pc_name);
		return -1;
	}
	for (i = 0; i < 3; i++) {
		cur[i] = (char)(sim->ps_currency[i] >= 'A' && sim->ps_currency[i] <= 'Z'
		                        ? sim->ps_currency[i] - 'A' + 'a'
		                        : sim->ps_currency[i]);
	}
	cur[3] = '\0';
	snprintf(id, sizeof(id), "evt_sim_%s", sim->ps_id);
	if (sim->ps_kind == PROVIDER_SIM_THIN_PAYMENT) {
		char created[32];
		time_t t = (time_t)now_s;
		struct tm tm;

		/* The thin notification an event destination sends: no data,
		 * the related object and where to fetch it. */
		gmtime_r(&t, &tm);
		strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%S.000Z", &tm);
		/* A connected account's names it (checked by the caller). */
		if (sim->ps_context != NULL && !provider_context_valid(sim->ps_context)) {
			log_err("provider %s: the context is not an account id", pc->pc_name);
			return -1;
		}
		rc = buf_printf(ret_body,
		                "{\"id\":\"%s\",\"object\":\"v2.core.event\","
		                "\"type\":\"v1.payment_intent.succeeded\",\"created\":\"%s\","
		                "\"livemode\":false,\"context\":%s%s%s,\"related_object\":{"
		                "\"id\":\"pi_sim_%s\",\"type\":\"payment_intent\","
		                "\"url\":\"/v1/payment_intents/pi_sim_%s\"}}",
		                id, created, sim->ps_context != NULL ? "\"" : "",
		                sim->ps_context != NULL ? sim->ps_context : "null",
		                sim->ps_context != NULL ? "\"" : "", sim->ps_order_id,
		                sim->ps_order_id);
	} else if (sim->ps_kind == PROVIDER_SIM_PAYMENT) {
		rc = buf_printf(
		        ret_body,
		        "{\"id\":\"%s\",\"object\":\"event\",\"api_version\":\"2024-06-20\","
		        "\"created\":%lld,\"livemode\":false,\"pending_webhooks\":1,"
		        "\"type\":\"payment_intent.succeeded\",\"data\":{\"object\":{"
		        "\"id\":\"pi_sim_%s\",\"object\":\"payment_intent\",\"amount\":%lld,"
		        "\"amount_received\":%lld,\"currency\":\"%s\",\"status\":\"succeeded\","
		        "\"metadata\":{\"order_id\":\"%s\"}}}}",
		        id, (long long)now_s, sim->ps_order_id, (long long)sim->ps_amount,
		        (long long)sim->ps_amount, cur, sim->ps_order_id);
	} else {
		/* charge.refunded reports amount_refunded as the running total. */
		rc = buf_printf(
		        ret_body,
		        "{\"id\":\"%s\",\"object\":\"event\",\"api_version\":\"2024-06-20\","
		        "\"created\":%lld,\"livemode\":false,\"pending_webhooks\":1,"
		        "\"type\":\"charge.refunded\",\"data\":{\"object\":{"
		        "\"id\":\"ch_sim_%s\",\"object\":\"charge\",\"amount\":%lld,"
		        "\"amount_refunded\":%lld,\"currency\":\"%s\",\"payment_intent\":"
		        "\"pi_sim_%s\",\"refunded\":%s,\"metadata\":{\"order_id\":\"%s\"},"
		        "\"refunds\":{\"object\":\"list\",\"data\":[{\"id\":\"re_sim_%s\","
		        "\"object\":\"refund\",\"amount\":%lld,\"currency\":\"%s\","
		        "\"status\":\"succeeded\"}]}}}}",
		        id, (long long)now_s, sim->ps_order_id, (long long)sim->ps_order_amount,
		        (long long)sim->ps_refunded_total, cur, sim->ps_order_id,
		        sim->ps_refunded_total >= sim->ps_order_amount ? "true" : "false",
		        sim->ps_order_id, sim->ps_id, (long long)sim->ps_amount, cur);
	}
	if (rc < 0) {
		return -1;
	}
	add_header(arg, "Content-Type", "application/json; charset=utf-8");
	if (stripe_sign(pc, ret_body->buf_data, ret_body->buf_len, now_s, id, add_header, arg,
	                &why) < 0) {
		log_err("provider %s: cannot sign: %s", pc->pc_name, why);
		return -1;
	}
	return 0;
}

/* ---- reconciliation: Stripe's own list of events ---- */

static enum provider_reconcile_mode stripe_reconcile_mode(const struct provider_conf *pc,
                                                          const char **ret_why)
{
	const struct stripe_state *st = pc->pc_state;

	*ret_why = NULL;
	if (st == NULL || st->ss_api_key == NULL) {
		*ret_why = "no api_key: give the instance a restricted key that may read Events "
		           "(api_key = credential:NAME) so that reconciliation can list them";
		return PROVIDER_RECONCILE_NONE;
	}
	return PROVIDER_RECONCILE_EVENTS;
}

/* GET /v1/events: the types this profile reads, created in [since, until],
 * 100 a page, newest first; the next page starts after the last id. */
static int stripe_reconcile_request(const struct provider_conf *pc, const struct provider_query *q,
                                    int64_t now_s, struct provider_request *ret)
{
	const struct stripe_state *st = pc->pc_state;
	struct buf auth;
	size_t i;
	int rc = -1;

	buf_init(&auth, 0);
	ret->prq_method = "GET";
	if (q->pq_event_id != NULL) {
		/* A thin event's full event: GET /v2/core/events/{id}. */
		if (buf_printf(&ret->prq_url, "%s/v2/core/events/", st->ss_api_base) < 0 ||
		    provider_url_encode(&ret->prq_url, q->pq_event_id) < 0) {
			goto done;
		}
		httpc_headers_add(&ret->prq_headers, "Stripe-Version", STRIPE_V2_VERSION);
		/* An event of a connected account is served in its context only. */
		if (q->pq_event_context != NULL) {
			if (!provider_context_valid(q->pq_event_context)) {
				log_err("provider %s: thin event \"%.64s\": its context is not an "
				        "account id",
				        pc->pc_name, q->pq_event_id);
				goto done;
			}
			httpc_headers_add(&ret->prq_headers, "Stripe-Context", q->pq_event_context);
		}
	} else if (buf_printf(
	                   &ret->prq_url,
	                   "%s/v1/events?limit=%d&created%%5Bgte%%5D=%lld&created%%5Blte%%5D=%lld",
	                   st->ss_api_base, STRIPE_PAGE_LIMIT, (long long)q->pq_since_s,
	                   (long long)(q->pq_until_s > 0 ? q->pq_until_s : now_s)) < 0) {
		goto done;
	}
	for (i = 0; q->pq_event_id == NULL && stripe_reconcile_types[i] != NULL; i++) {
		if (buf_puts(&ret->prq_url, "&types%5B%5D=") < 0 ||
		    provider_url_encode(&ret->prq_url, stripe_reconcile_types[i]) < 0) {
			goto done;
		}
	}
	if (q->pq_event_id == NULL && st->ss_undelivered_only &&
	    buf_puts(&ret->prq_url, "&delivery_success=false") < 0) {
		goto done;
	}
	if (q->pq_event_id == NULL && q->pq_cursor != NULL &&
	    (buf_puts(&ret->prq_url, "&starting_after=") < 0 ||
	     provider_url_encode(&ret->prq_url, q->pq_cursor) < 0)) {
		goto done;
	}
	if (buf_printf(&auth, "Bearer %s", st->ss_api_key) < 0) {
		goto done;
	}
	httpc_headers_add(&ret->prq_headers, "Authorization", auth.buf_data);
	httpc_headers_add(&ret->prq_headers, "Accept", "application/json");
	rc = ret->prq_headers.hch_overflow ? -1 : 0;
done:
	if (auth.buf_data != NULL) {
		explicit_bzero(auth.buf_data, auth.buf_len);
	}
	buf_finish(&auth);
	return rc;
}

/* Stripe's error object: {"error":{"type":...,"code":...,"message":...}}. */
static int stripe_reconcile_error(const cJSON *root, long status, struct provider_answer *ret)
{
	const char *message = provider_json_string(root, "error.message");
	const char *code = provider_json_string(root, "error.code");

	if (status == 401 || status == 403) {
		return provider_answer_set(
		        ret, PROVIDER_ANSWER_FAILED, "unauthorized",
		        "HTTP %ld: the api_key was refused (it must be able to read "
		        "Events)%s%.160s",
		        status, message != NULL ? ": " : "", message != NULL ? message : "");
	}
	return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "provider_error",
	                           "HTTP %ld %.40s%s%.160s", status, code != NULL ? code : "",
	                           message != NULL ? ": " : "", message != NULL ? message : "");
}

/* The full event of a thin notification (GET /v2/core/events/{id}): its
 * fetched `data` holds the object (as `data.object`, the snapshot's shape,
 * or `data` itself), read as the snapshot event of the same type would be,
 * under the thin event's own id. */
static int stripe_fetch_answer(const struct provider_query *q, const struct httpc_response *resp,
                               struct provider_answer *ret)
{
	cJSON *root = json_parse_strict(resp->hcr_body, resp->hcr_body_len, NULL);
	cJSON *empty = NULL;
	const cJSON *obj;
	const char *context;
	const char *related;
	const char *type;
	const char *id;
	struct provider_verdict v = {0};
	int rc;

	if (resp->hcr_status == 404) {
		cJSON_Delete(root);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "not_found",
		                           "Stripe has no event %.64s (events are kept 30 days)",
		                           q->pq_event_id);
	}
	if (resp->hcr_status != 200) {
		rc = stripe_reconcile_error(root, resp->hcr_status, ret);
		cJSON_Delete(root);
		return rc;
	}
	id = provider_json_string(root, "id");
	type = provider_json_string(root, "type");
	if (!stripe_is(provider_json_string(root, "object"), "v2.core.event") || type == NULL ||
	    !stripe_is(id, q->pq_event_id)) {
		cJSON_Delete(root);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                           "the answer is not the event %.64s", q->pq_event_id);
	}
	/* Its id alone does not make it the event the signed notification
	 * announced: its type and its object must be those too. */
	if (q->pq_event_type != NULL && strcmp(type, q->pq_event_type) != 0) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "fetch_mismatch",
		                         "the fetched event is a %.64s, the thin event a %.64s",
		                         type, q->pq_event_type);
		cJSON_Delete(root);
		return rc;
	}
	related = provider_json_string(root, "related_object.id");
	if (q->pq_event_related != NULL && related != NULL &&
	    strcmp(related, q->pq_event_related) != 0) {
		rc = provider_answer_set(
		        ret, PROVIDER_ANSWER_FAILED, "fetch_mismatch",
		        "the fetched event is about related_object %.64s, the thin "
		        "event about %.64s",
		        related, q->pq_event_related);
		cJSON_Delete(root);
		return rc;
	}
	context = provider_json_string(root, "context");
	if (q->pq_event_context != NULL && context != NULL &&
	    strcmp(context, q->pq_event_context) != 0) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "fetch_mismatch",
		                         "the fetched event is in context %.64s, the thin event "
		                         "in %.64s",
		                         context, q->pq_event_context);
		cJSON_Delete(root);
		return rc;
	}
	obj = provider_json_path(root, "data.object");
	if (!cJSON_IsObject(obj)) {
		obj = cJSON_GetObjectItemCaseSensitive(root, "data");
	}
	if (!cJSON_IsObject(obj)) {
		/* No data (a v2 type this profile gives no meaning): recorded as other. */
		empty = cJSON_CreateObject();
		obj = empty;
	}
	if (obj == NULL) {
		cJSON_Delete(root);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "out_of_memory", NULL);
	}
	rc = stripe_event_add(&ret->pa_events, id, type, stripe_thin_snapshot_type(type),
	                      stripe_v2_created(cJSON_GetObjectItemCaseSensitive(root, "created")),
	                      obj,
	                      cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "livemode")),
	                      resp->hcr_body, resp->hcr_body_len, &v);
	cJSON_Delete(empty);
	cJSON_Delete(root);
	if (rc < 0) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, v.pv_reason, "%s",
		                           v.pv_detail != NULL ? v.pv_detail : v.pv_reason);
	}
	/* Applied in the context it was asked in: the row keeps it. */
	if (provider_set_ref(&ret->pa_events.eb_events[0].ev_context, q->pq_event_context) < 0) {
		event_batch_finish(&ret->pa_events);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "out_of_memory", NULL);
	}
	return provider_answer_set(ret, PROVIDER_ANSWER_OK, NULL, NULL);
}

static int stripe_reconcile_answer(const struct provider_conf *pc, const struct provider_query *q,
                                   const struct httpc_response *resp, int64_t now_s,
                                   struct provider_answer *ret)
{
	cJSON *root = NULL;
	const cJSON *data;
	const cJSON *item;
	const char *last = NULL;
	size_t unread = 0;
	int rc;

	if (resp->hcr_truncated) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                           "the answer is larger than the response cap");
	}
	if (q->pq_event_id != NULL) {
		return stripe_fetch_answer(q, resp, ret);
	}
	root = json_parse_strict(resp->hcr_body, resp->hcr_body_len, NULL);
	if (resp->hcr_status != 200) {
		rc = stripe_reconcile_error(root, resp->hcr_status, ret);
		cJSON_Delete(root);
		return rc;
	}
	data = cJSON_GetObjectItemCaseSensitive(root, "data");
	if (!cJSON_IsObject(root) || !stripe_is(provider_json_string(root, "object"), "list") ||
	    !cJSON_IsArray(data)) {
		cJSON_Delete(root);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                           "the answer is not a list of events");
	}
	cJSON_ArrayForEach(item, data)
	{
		struct provider_verdict v = {0};
		char *text = cJSON_PrintUnformatted(item);
		const char *id = provider_json_string(item, "id");

		if (id != NULL) {
			last = id;
		}
		if (text == NULL) {
			cJSON_Delete(root);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "out_of_memory",
			                           NULL);
		}
		/* An event this profile cannot read would be refused as a
		 * callback too: it is left out and named, the rest go on. */
		if (stripe_event_read(item, text, strlen(text), &ret->pa_events, &v) < 0) {
			if (unread++ == 0) {
				snprintf(ret->pa_note, sizeof(ret->pa_note),
				         "event %.64s cannot be read: %.120s",
				         id != NULL ? id : "(no id)",
				         v.pv_detail != NULL ? v.pv_detail : v.pv_reason);
			}
		}
		free(text);
	}
	if (unread > 1) {
		size_t n = strlen(ret->pa_note);

		snprintf(ret->pa_note + n, sizeof(ret->pa_note) - n, " (and %zu more)", unread - 1);
	}
	/* More to come, but nothing to go on from (an empty page, or the page
	 * before again: a proxy that dropped starting_after): taken as the end,
	 * the listing would pass as complete and the worker's mark move past
	 * events never read. */
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "has_more")) &&
	    (last == NULL || (q->pq_cursor != NULL && strcmp(q->pq_cursor, last) == 0))) {
		cJSON_Delete(root);
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                           "the page says has_more but does not go past %.64s",
		                           q->pq_cursor != NULL ? q->pq_cursor : "the first page");
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "has_more"))) {
		ret->pa_cursor = strdup(last);
		if (ret->pa_cursor == NULL) {
			cJSON_Delete(root);
			return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "out_of_memory",
			                           NULL);
		}
	}
	cJSON_Delete(root);
	return provider_answer_set(ret, PROVIDER_ANSWER_OK, NULL, NULL);
}

static const char *const stripe_keys[] = {"secret", "api_key", "api_base_url",
                                          "reconcile_undelivered_only", NULL};

const struct provider provider_stripe = {
        .p_name = "stripe",
        .p_keys = stripe_keys,
        .p_retry_window_s = STRIPE_RETRY_WINDOW_S,
        .p_create = stripe_create,
        .p_destroy = stripe_destroy,
        .p_receive = stripe_receive,
        .p_ack = stripe_ack,
        .p_sign = stripe_sign,
        .p_simulate = stripe_simulate,
        .p_thin_events = 1,
        .p_reconcile_mode = stripe_reconcile_mode,
        .p_reconcile_request = stripe_reconcile_request,
        .p_reconcile_answer = stripe_reconcile_answer,
};
