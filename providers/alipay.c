/* alipay.c: Alipay asynchronous notifications: form-encoded, RSA2 over the
 * sorted parameters, notify_id as key, answer body exactly "success". */
#include <errno.h>
#include <iconv.h>
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
#include "text.h"

#define ALIPAY_PARAMS_MAX 128             /* fields in one notification */
#define ALIPAY_KEYS_MAX 4                 /* Alipay public keys per instance (rotation) */
#define ALIPAY_RETRY_WINDOW_S (25 * 3600) /* 8 tries within 25 h */
#define ALIPAY_GATEWAY_DEFAULT "https://openapi.alipay.com/gateway.do"
#define ALIPAY_QUERY_METHOD "alipay.trade.query"
#define ALIPAY_QUERY_RESPONSE "alipay_trade_query_response"
#define ALIPAY_ERROR_RESPONSE "error_response"

struct alipay_state {
	struct crypto_pubkey *as_keys[ALIPAY_KEYS_MAX];
	size_t as_n_keys;
	char *as_app_id;
	char *as_seller_id;  /* NULL: not checked */
	char as_currency[4]; /* what total_amount is in, default CNY */
	/* Reconciliation: the app's private key (signs alipay.trade.query), or
	 * NULL; and the gateway it is sent to. */
	struct crypto_privkey *as_app_key;
	char *as_gateway;
};

struct alipay_param {
	char *ap_key; /* percent-decoded bytes in the form's charset */
	char *ap_value;
	char *ap_key_utf8; /* the same converted to UTF-8 */
	char *ap_value_utf8;
};

struct alipay_form {
	struct alipay_param af_params[ALIPAY_PARAMS_MAX];
	size_t af_n;
};

static void alipay_destroy(void *state)
{
	struct alipay_state *st = state;
	size_t i;

	if (st == NULL) {
		return;
	}
	for (i = 0; i < st->as_n_keys; i++) {
		crypto_pubkey_destroy(st->as_keys[i]);
	}
	free(st->as_app_id);
	free(st->as_seller_id);
	crypto_privkey_destroy(st->as_app_key);
	free(st->as_gateway);
	free(st);
}

struct alipay_load_ctx {
	const struct provider_conf *lc_pc;
	struct alipay_state *lc_st;
	int lc_bad; /* a line was refused (logged); the next ones are read all the same */
	int lc_over; /* past ALIPAY_KEYS_MAX: said once, the rest still checked */
};

/* One public_key line; a bad one is logged and the next one read. */
static int alipay_load_key(void *arg, const char *value, int line)
{
	struct alipay_load_ctx *ctx = arg;
	struct alipay_state *st = ctx->lc_st;
	struct crypto_pubkey *key;
	int over = st->as_n_keys >= ALIPAY_KEYS_MAX;
	char *text = NULL;
	size_t len = 0;

	if (over && !ctx->lc_over) {
		log_err("provider %s: line %d: more than %d public_key values", ctx->lc_pc->pc_name,
		        line, ALIPAY_KEYS_MAX);
		ctx->lc_over = 1;
	}
	if (over) {
		ctx->lc_bad = 1; /* and the line is checked all the same, not kept */
	}
	/* A public key is not a secret: the console's base64 text may stand inline. */
	if (provider_public_resolve(ctx->lc_pc, "public_key", value, line, &text, &len) < 0) {
		ctx->lc_bad = 1; /* logged */
		return 0;
	}
	key = crypto_pubkey_load(text, len);
	free(text);
	if (key == NULL) {
		log_err("provider %s: line %d: public_key is not an Alipay public key (base64 or "
		        "PEM)",
		        ctx->lc_pc->pc_name, line);
		ctx->lc_bad = 1;
		return 0;
	}
	if (over) {
		crypto_pubkey_destroy(key);
		return 0;
	}
	st->as_keys[st->as_n_keys++] = key;
	return 0;
}

static int alipay_create(const struct provider_conf *pc, void **ret_state)
{
	struct alipay_state *st = calloc(1, sizeof(*st));
	struct alipay_load_ctx ctx = {pc, st, 0, 0};
	const char *app_id;
	const char *seller_id;
	const char *currency;
	int keys_read = 1;
	int rc = 0;

	if (st == NULL) {
		return -1;
	}
	if (pc->pc_section == NULL) {
		goto fail;
	}
	/* Every key checked whatever the others hold, each problem logged;
	 * "are needed" for public_key only when its every line was read (a
	 * refused line is not a missing one). */
	if (config_section_each(pc->pc_section, "public_key", alipay_load_key, &ctx) != 0 ||
	    ctx.lc_bad) {
		keys_read = 0;
		rc = -1;
	}
	app_id = config_section_get(pc->pc_section, "app_id");
	seller_id = config_section_get(pc->pc_section, "seller_id");
	currency = config_section_get(pc->pc_section, "currency");
	if ((keys_read && st->as_n_keys == 0) || app_id == NULL || app_id[0] == '\0') {
		log_err("provider %s: app_id and public_key (the Alipay public key) are needed",
		        pc->pc_name);
		rc = -1;
	}
	if (money_currency_normalize(currency != NULL ? currency : "CNY", st->as_currency) < 0) {
		log_err("provider %s: currency: expected a three-letter ISO 4217 code",
		        pc->pc_name);
		rc = -1;
	}
	if (app_id != NULL) {
		st->as_app_id = strdup(app_id);
		if (st->as_app_id == NULL) {
			goto fail;
		}
	}
	if (seller_id != NULL) {
		st->as_seller_id = strdup(seller_id);
		if (st->as_seller_id == NULL) {
			goto fail;
		}
	}
	if (provider_privkey_load(pc, "app_private_key", &st->as_app_key) < 0) {
		rc = -1;
	}
	if (provider_base_url(pc, "gateway_url", ALIPAY_GATEWAY_DEFAULT, &st->as_gateway) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	*ret_state = st;
	return 0;
fail:
	alipay_destroy(st);
	return -1;
}

static void alipay_form_finish(struct alipay_form *f)
{
	size_t i;

	for (i = 0; i < f->af_n; i++) {
		free(f->af_params[i].ap_key);
		free(f->af_params[i].ap_value);
		free(f->af_params[i].ap_key_utf8);
		free(f->af_params[i].ap_value_utf8);
	}
	f->af_n = 0;
}

/* Splits body into fields; empty segments ("a=1&&b=2") are skipped, a
 * segment without '=' or a repeated name is malformed. */
static int alipay_form_parse(const char *body, size_t len, struct alipay_form *f)
{
	size_t i = 0;

	while (i < len) {
		const char *seg = body + i;
		const char *amp = memchr(seg, '&', len - i);
		size_t n = amp != NULL ? (size_t)(amp - seg) : len - i;
		const char *eq = memchr(seg, '=', n);
		struct alipay_param *p;
		size_t j;

		i += n + 1;
		if (n == 0) {
			continue;
		}
		if (eq == NULL || eq == seg || f->af_n >= ALIPAY_PARAMS_MAX) {
			return -1;
		}
		p = &f->af_params[f->af_n++];
		p->ap_key = text_form_decode(seg, (size_t)(eq - seg));
		p->ap_value = text_form_decode(eq + 1, n - (size_t)(eq - seg) - 1);
		if (p->ap_key == NULL || p->ap_value == NULL || p->ap_key[0] == '\0') {
			return -1;
		}
		for (j = 0; j + 1 < f->af_n; j++) {
			if (strcmp(f->af_params[j].ap_key, p->ap_key) == 0) {
				return -1;
			}
		}
	}
	return f->af_n > 0 ? 0 : -1;
}

/* The value of field key, or NULL. Empty values are left out of the signed
 * content, so anyone could add one: they read as absent. */
static const char *alipay_get(const struct alipay_form *f, const char *key)
{
	size_t i;

	for (i = 0; i < f->af_n; i++) {
		if (strcmp(f->af_params[i].ap_key, key) == 0 &&
		    f->af_params[i].ap_value[0] != '\0') {
			return f->af_params[i].ap_value_utf8 != NULL ? f->af_params[i].ap_value_utf8
			                                             : f->af_params[i].ap_value;
		}
	}
	return NULL;
}

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static int alipay_utf8_valid(const unsigned char *s)
{
	while (*s != '\0') {
		unsigned cp;
		int n;
		int k;

		if (s[0] < 0x80) {
			s++;
			continue;
		} else if ((s[0] & 0xe0) == 0xc0) {
			n = 1;
			cp = s[0] & 0x1f;
		} else if ((s[0] & 0xf0) == 0xe0) {
			n = 2;
			cp = s[0] & 0x0f;
		} else if ((s[0] & 0xf8) == 0xf0) {
			n = 3;
			cp = s[0] & 0x07;
		} else {
			return 0;
		}
		for (k = 1; k <= n; k++) {
			if ((s[k] & 0xc0) != 0x80) {
				return 0;
			}
			cp = cp << 6 | (s[k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
			return 0;
		}
		s += n + 1;
	}
	return 1;
}

static char *alipay_iconv_one(iconv_t cd, const char *in)
{
	size_t in_left = strlen(in);
	size_t cap = in_left * 2 + 1; /* GBK -> UTF-8 grows at most 2 bytes to 3 */
	char *out = malloc(cap);
	char *inp = (char *)in;
	char *outp = out;
	size_t out_left = cap - 1;

	if (out == NULL) {
		return NULL;
	}
	iconv(cd, NULL, NULL, NULL, NULL);
	if (iconv(cd, &inp, &in_left, &outp, &out_left) == (size_t)-1 || in_left != 0) {
		free(out);
		return NULL;
	}
	*outp = '\0';
	return out;
}

/* The charset field names the bytes' encoding: verification works on those
 * bytes; what we keep is converted to UTF-8. Returns 0 or -1 (malformed). */
static int alipay_form_to_utf8(struct alipay_form *f)
{
	const char *charset = NULL;
	iconv_t cd;
	size_t i;
	int rc = -1;

	for (i = 0; i < f->af_n; i++) {
		if (strcmp(f->af_params[i].ap_key, "charset") == 0) {
			charset = f->af_params[i].ap_value;
		}
	}
	if (charset == NULL || strcasecmp(charset, "utf-8") == 0 ||
	    strcasecmp(charset, "utf8") == 0) {
		for (i = 0; i < f->af_n; i++) {
			if (!alipay_utf8_valid((const unsigned char *)f->af_params[i].ap_key) ||
			    !alipay_utf8_valid((const unsigned char *)f->af_params[i].ap_value)) {
				return -1;
			}
		}
		return 0;
	}
	if (strcasecmp(charset, "gbk") != 0 && strcasecmp(charset, "gb2312") != 0 &&
	    strcasecmp(charset, "gb18030") != 0) {
		return -1;
	}
	/* GB18030 is a superset of GBK and GB2312. */
	cd = iconv_open("UTF-8", "GB18030");
	if (cd == (iconv_t)-1) {
		log_err("alipay: iconv_open(GB18030): %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < f->af_n; i++) {
		f->af_params[i].ap_key_utf8 = alipay_iconv_one(cd, f->af_params[i].ap_key);
		f->af_params[i].ap_value_utf8 = alipay_iconv_one(cd, f->af_params[i].ap_value);
		if (f->af_params[i].ap_key_utf8 == NULL || f->af_params[i].ap_value_utf8 == NULL) {
			goto done;
		}
	}
	rc = 0;
done:
	iconv_close(cd);
	return rc;
}

static int alipay_param_cmp(const void *a, const void *b)
{
	const struct alipay_param *const *x = a;
	const struct alipay_param *const *y = b;

	return strcmp((*x)->ap_key, (*y)->ap_key);
}

/* Fields sorted by name in byte order, without sign and sign_type (and, for
 * the fingerprint, without notify_time) and without empty values. */
static size_t alipay_sorted(const struct alipay_form *f, int semantic,
                            const struct alipay_param **out)
{
	size_t n = 0;
	size_t i;

	for (i = 0; i < f->af_n; i++) {
		const struct alipay_param *p = &f->af_params[i];

		if (strcmp(p->ap_key, "sign") == 0 || strcmp(p->ap_key, "sign_type") == 0 ||
		    p->ap_value[0] == '\0') {
			continue;
		}
		if (semantic && strcmp(p->ap_key, "notify_time") == 0) {
			continue;
		}
		out[n++] = p;
	}
	qsort(out, n, sizeof(*out), alipay_param_cmp);
	return n;
}

static int alipay_verify(const struct alipay_state *st, const struct alipay_form *f,
                         const char *sign_b64)
{
	const struct alipay_param *sorted[ALIPAY_PARAMS_MAX];
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	size_t n = alipay_sorted(f, 0, sorted);
	struct buf b;
	size_t i;
	int ok = 0;

	if (crypto_base64_decode(sign_b64, strlen(sign_b64), &sig, &sig_len) < 0) {
		return -2;
	}
	buf_init(&b, 0);
	for (i = 0; i < n; i++) {
		if ((i > 0 && buf_puts(&b, "&") < 0) || buf_puts(&b, sorted[i]->ap_key) < 0 ||
		    buf_puts(&b, "=") < 0 || buf_puts(&b, sorted[i]->ap_value) < 0) {
			ok = -1;
			goto done;
		}
	}
	for (i = 0; i < st->as_n_keys && ok == 0; i++) {
		int v = crypto_rsa_sha256_verify(st->as_keys[i], b.buf_data, b.buf_len, sig,
		                                 sig_len);

		ok = v == 1 ? 1 : v < 0 ? -1 : 0;
	}
done:
	buf_finish(&b);
	free(sig);
	return ok;
}

/* {"k":"v",...} in UTF-8, sorted; the semantic copy leaves out notify_time. */
static int alipay_json(const struct alipay_form *f, int semantic, struct buf *b)
{
	const struct alipay_param *sorted[ALIPAY_PARAMS_MAX];
	size_t n = alipay_sorted(f, semantic, sorted);
	size_t i;

	if (buf_puts(b, "{") < 0) {
		return -1;
	}
	for (i = 0; i < n; i++) {
		const char *k =
		        sorted[i]->ap_key_utf8 != NULL ? sorted[i]->ap_key_utf8 : sorted[i]->ap_key;
		const char *v = sorted[i]->ap_value_utf8 != NULL ? sorted[i]->ap_value_utf8
		                                                 : sorted[i]->ap_value;

		if ((i > 0 && buf_puts(b, ",") < 0) || buf_json_string(b, k) < 0 ||
		    buf_puts(b, ":") < 0 || buf_json_string(b, v) < 0) {
			return -1;
		}
	}
	return buf_puts(b, "}");
}

static int alipay_amount(const char *text, const char *currency, int64_t *ret)
{
	if (text == NULL || text[0] == '\0') {
		return 1;
	}
	return money_parse_decimal(text, currency, ret);
}

static int alipay_normalize(const struct alipay_state *st, const struct alipay_form *f,
                            struct event *ev, struct provider_verdict *v)
{
	const char *status = alipay_get(f, "trade_status");
	const char *refund_fee = alipay_get(f, "refund_fee");
	const char *type = status != NULL ? status : alipay_get(f, "notify_type");
	int64_t refunded = 0;
	int rc;

	memcpy(ev->ev_currency, st->as_currency, sizeof(ev->ev_currency));
	rc = alipay_amount(refund_fee, st->as_currency, &refunded);
	if (rc < 0) {
		return provider_refuse(v, 400, "malformed_body",
		                       "refund_fee is not a decimal amount.");
	}
	ev->ev_kind = EVENT_OTHER;
	if (rc == 0 && refunded > 0) {
		const char *refund_ref = alipay_get(f, "out_biz_no");

		/* Alipay reports the refunded total so far, not this refund alone. */
		ev->ev_kind = EVENT_REFUNDED;
		ev->ev_refund_cumulative = 1;
		ev->ev_amount = refunded;
		if (provider_set_ref(&ev->ev_refund_ref,
		                     refund_ref != NULL ? refund_ref : ev->ev_key) < 0) {
			return provider_refuse(v, 400, "malformed_body",
			                       "out_biz_no is not usable.");
		}
	} else {
		if (status != NULL && (strcmp(status, "TRADE_SUCCESS") == 0 ||
		                       strcmp(status, "TRADE_FINISHED") == 0)) {
			ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
		} else if (status != NULL && strcmp(status, "TRADE_CLOSED") == 0) {
			/* Closed unpaid (timeout, or closed by the merchant). Closed
			 * after a full refund carries refund_fee and is that refund. */
			ev->ev_kind = EVENT_PAYMENT_CANCELLED;
		}
		rc = alipay_amount(alipay_get(f, "total_amount"), st->as_currency, &ev->ev_amount);
		if (rc < 0) {
			ev->ev_amount = -1;
			return provider_refuse(v, 400, "malformed_body",
			                       "total_amount is not a decimal amount.");
		}
		if (rc > 0 && ev->ev_kind == EVENT_PAYMENT_SUCCEEDED) {
			return provider_refuse(v, 400, "malformed_body",
			                       "A paid notification needs total_amount.");
		}
	}
	if (provider_set_ref(&ev->ev_type, type != NULL ? type : "") < 0 ||
	    provider_set_ref(&ev->ev_order_ref, alipay_get(f, "out_trade_no")) < 0 ||
	    provider_set_ref(&ev->ev_payment_ref, alipay_get(f, "trade_no")) < 0) {
		return provider_refuse(v, 400, "malformed_body",
		                       "A reference in the form is not usable.");
	}
	return 0;
}

static int alipay_receive(const struct provider_conf *pc, const struct http_request *req,
                          int64_t now_s, struct event_batch *ret_batch,
                          struct provider_verdict *ret_verdict)
{
	const struct alipay_state *st = pc->pc_state;
	struct alipay_form *f;
	const char *sign;
	const char *sign_type;
	const char *app_id;
	const char *seller_id;
	const char *notify_id;
	struct event *ev;
	struct buf b;
	int ok;

	buf_init(&b, 0);
	f = calloc(1, sizeof(*f));
	if (f == NULL) {
		return provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
	}
	if (alipay_form_parse((const char *)req->hr_body, req->hr_body_len, f) < 0) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The body is not a well-formed form.");
		goto fail;
	}
	if (alipay_form_to_utf8(f) < 0) {
		provider_refuse(ret_verdict, 400, "malformed_body",
		                "The form is not valid in its declared charset.");
		goto fail;
	}
	sign = alipay_get(f, "sign");
	sign_type = alipay_get(f, "sign_type");
	if (sign == NULL || sign[0] == '\0') {
		provider_refuse(ret_verdict, 400, "missing_signature",
		                "The form has no sign field.");
		goto fail;
	}
	if (sign_type != NULL && strcmp(sign_type, "RSA2") != 0) {
		provider_refuse(ret_verdict, 400, "unsupported_sign_type",
		                "Only sign_type RSA2 is accepted.");
		goto fail;
	}
	ok = alipay_verify(st, f, sign);
	if (ok == -2) {
		provider_refuse(ret_verdict, 400, "malformed_signature", "sign is not base64.");
		goto fail;
	}
	if (ok < 0) {
		provider_refuse(ret_verdict, 503, "internal_error", NULL);
		goto fail;
	}
	if (ok == 0) {
		provider_refuse(ret_verdict, 401, "bad_signature",
		                "The signature does not verify.");
		goto fail;
	}
	app_id = alipay_get(f, "app_id");
	seller_id = alipay_get(f, "seller_id");
	if (app_id == NULL || strcmp(app_id, st->as_app_id) != 0) {
		provider_refuse(ret_verdict, 403, "wrong_app",
		                "The notification is for another app_id.");
		goto fail;
	}
	if (st->as_seller_id != NULL &&
	    (seller_id == NULL || strcmp(seller_id, st->as_seller_id) != 0)) {
		provider_refuse(ret_verdict, 403, "wrong_seller",
		                "The notification is for another seller_id.");
		goto fail;
	}
	notify_id = alipay_get(f, "notify_id");
	if (notify_id == NULL || notify_id[0] == '\0') {
		provider_refuse(ret_verdict, 400, "missing_key", "The form has no notify_id.");
		goto fail;
	}
	ev = event_batch_add(ret_batch);
	if (ev == NULL) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail;
	}
	if (provider_set_ref(&ev->ev_key, notify_id) < 0) {
		provider_refuse(ret_verdict, 400, "malformed_body", "notify_id is not usable.");
		goto fail_batch;
	}
	if (alipay_normalize(st, f, ev, ret_verdict) < 0) {
		goto fail_batch;
	}
	if (alipay_json(f, 1, &b) < 0) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail_batch;
	}
	event_fingerprint(ev, b.buf_data, b.buf_len);
	buf_finish(&b);
	buf_init(&b, 0);
	if (alipay_json(f, 0, &b) < 0 || provider_set_payload(ev, b.buf_data, b.buf_len) < 0) {
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		goto fail_batch;
	}
	buf_finish(&b);
	alipay_form_finish(f);
	free(f);
	return 0;
fail_batch:
	event_batch_finish(ret_batch);
fail:
	buf_finish(&b);
	alipay_form_finish(f);
	free(f);
	return -1;
}

static int alipay_ack(const struct provider_conf *pc, const struct event *ev,
                      const struct event_outcome *out, struct reply *ret)
{
	return reply_set(ret, 200, "text/plain", "success", 7);
}

static int alipay_error(const struct provider_conf *pc, int status, const char *reason,
                        const char *detail, struct reply *ret)
{
	return reply_set(ret, status, "text/plain", "fail", 4);
}

/* Appends s form-encoded: unreserved bytes as they are, the rest as %XX. */
static int alipay_sim_encode(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[3] = {'%', hex[c >> 4], hex[c & 0xf]};
		int unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		                 (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
		                 c == '~';

		if ((unreserved ? buf_append(b, s, 1) : buf_append(b, esc, 3)) < 0) {
			return -1;
		}
	}
	return 0;
}

/* A trade_status_sync notification signed RSA2 with the throwaway key, which
 * must be the private half of a configured public_key. Amounts are in the
 * instance's currency; refunds carry the running total in refund_fee. */
static int alipay_simulate(const struct provider_conf *pc, const struct provider_sim *sim,
                           int64_t now_s, struct buf *ret_body,
                           void (*add_header)(void *arg, const char *name, const char *value),
                           void *arg)
{
	const struct alipay_state *st = pc->pc_state;
	int refund = sim->ps_kind == PROVIDER_SIM_REFUND;
	const char *seller =
	        st != NULL && st->as_seller_id != NULL ? st->as_seller_id : "2088000000000000";
	struct alipay_form f;
	const struct alipay_param *sorted[ALIPAY_PARAMS_MAX];
	char trade_no[29];
	char out_biz_no[80];
	char when[32];
	char total[32];
	char paid[32];
	char refund_fee[32];
	time_t t = (time_t)(now_s + 8 * 3600); /* Alipay writes Beijing time */
	struct tm tm;
	struct buf signed_text;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *sig_b64 = NULL;
	size_t n;
	size_t i;
	int ours = 0;
	int rc = -1;

	memset(&f, 0, sizeof(f));
	buf_init(&signed_text, 0);
	for (i = 0; st != NULL && i < st->as_n_keys; i++) {
		ours |= crypto_privkey_matches(sim->ps_key, st->as_keys[i]);
	}
	if (!ours) {
		log_err("provider %s: no public_key is the public half of the simulate key pair; "
		        "see idemhook simulate --print-config",
		        pc->pc_name);
		goto done;
	}
	memcpy(trade_no, "2026", 4);
	provider_sim_ref(sim->ps_order_id, 0, trade_no + 4, 24);
	snprintf(out_biz_no, sizeof(out_biz_no), "sim_%s", sim->ps_id);
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
		goto done;
	}
	money_format(refund ? sim->ps_order_amount : sim->ps_amount, st->as_currency, total);
	money_format(sim->ps_amount, st->as_currency, paid);
	money_format(sim->ps_refunded_total, st->as_currency, refund_fee);
	{
		const char *const kv[][2] = {
		        {"app_id", st->as_app_id},
		        {"auth_app_id", st->as_app_id},
		        {"buyer_id", "2088102122524333"},
		        {"charset", "utf-8"},
		        {"gmt_create", when},
		        {"gmt_payment", when},
		        {"gmt_refund", refund ? when : ""},
		        {"notify_id", sim->ps_id},
		        {"notify_time", when},
		        {"notify_type", "trade_status_sync"},
		        {"out_biz_no", refund ? out_biz_no : ""},
		        {"out_trade_no", sim->ps_order_id},
		        {"receipt_amount", refund ? "" : paid},
		        {"refund_fee", refund ? refund_fee : ""},
		        {"seller_id", seller},
		        {"sign_type", "RSA2"},
		        {"subject", "idemhook simulate"},
		        {"total_amount", total},
		        {"trade_no", trade_no},
		        {"trade_status", refund && sim->ps_refunded_total >= sim->ps_order_amount
		                                 ? "TRADE_CLOSED"
		                                 : "TRADE_SUCCESS"},
		        {"version", "1.0"},
		};

		for (i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
			if (kv[i][1][0] == '\0') {
				continue;
			}
			f.af_params[f.af_n].ap_key = strdup(kv[i][0]);
			f.af_params[f.af_n].ap_value = strdup(kv[i][1]);
			f.af_n++;
			if (f.af_params[f.af_n - 1].ap_key == NULL ||
			    f.af_params[f.af_n - 1].ap_value == NULL) {
				goto done;
			}
		}
	}
	/* Signed as it is verified: sorted, without sign and sign_type. */
	n = alipay_sorted(&f, 0, sorted);
	for (i = 0; i < n; i++) {
		if ((i > 0 && buf_puts(&signed_text, "&") < 0) ||
		    buf_printf(&signed_text, "%s=%s", sorted[i]->ap_key, sorted[i]->ap_value) < 0) {
			goto done;
		}
	}
	if (crypto_rsa_sha256_sign(sim->ps_key, signed_text.buf_data, signed_text.buf_len, &sig,
	                           &sig_len) < 0 ||
	    crypto_base64_encode(sig, sig_len, &sig_b64, NULL) < 0) {
		goto done;
	}
	for (i = 0; i < f.af_n; i++) {
		if (buf_puts(ret_body, f.af_params[i].ap_key) < 0 || buf_puts(ret_body, "=") < 0 ||
		    alipay_sim_encode(ret_body, f.af_params[i].ap_value) < 0 ||
		    buf_puts(ret_body, "&") < 0) {
			goto done;
		}
	}
	if (buf_puts(ret_body, "sign=") < 0 || alipay_sim_encode(ret_body, sig_b64) < 0) {
		goto done;
	}
	add_header(arg, "Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
	rc = 0;
done:
	alipay_form_finish(&f);
	buf_finish(&signed_text);
	free(sig);
	free(sig_b64);
	return rc;
}

/* ---- reconciliation: alipay.trade.query ----
 *
 * The request is signed as every OpenAPI request: every parameter but sign
 * (sign_type included, empty values left out) sorted by name, joined as
 * k=v with '&', SHA256withRSA with the app's private key, base64. The
 * answer is {"alipay_trade_query_response":{...},"sign":"..."} and its
 * signature covers the JSON text of the _response value exactly as sent,
 * verified with the Alipay public key (docs/reconcile.md has the sources). */

static enum provider_reconcile_mode alipay_reconcile_mode(const struct provider_conf *pc,
                                                          const char **ret_why)
{
	const struct alipay_state *st = pc->pc_state;

	*ret_why = NULL;
	if (st == NULL || st->as_app_key == NULL) {
		*ret_why = "no app_private_key: give the instance the app's private key "
		           "(app_private_key = credential:NAME) so that reconciliation can sign "
		           "alipay.trade.query";
		return PROVIDER_RECONCILE_NONE;
	}
	return PROVIDER_RECONCILE_ORDERS;
}

static int alipay_reconcile_request(const struct provider_conf *pc, const struct provider_query *q,
                                    int64_t now_s, struct provider_request *ret)
{
	const struct alipay_state *st = pc->pc_state;
	time_t t = (time_t)(now_s + 8 * 3600); /* Alipay reads Beijing time */
	struct alipay_form f;
	const struct alipay_param *sorted[ALIPAY_PARAMS_MAX];
	struct buf biz;
	struct buf signed_text;
	char when[32];
	struct tm tm;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *sig_b64 = NULL;
	size_t n;
	size_t i;
	int rc = -1;

	memset(&f, 0, sizeof(f));
	buf_init(&biz, 0);
	buf_init(&signed_text, 0);
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm) == 0 ||
	    buf_puts(&biz, "{\"out_trade_no\":") < 0 || buf_json_string(&biz, q->pq_order_id) < 0 ||
	    buf_puts(&biz, "}") < 0) {
		goto done;
	}
	{
		const char *const kv[][2] = {
		        {"app_id", st->as_app_id}, {"method", ALIPAY_QUERY_METHOD},
		        {"format", "JSON"},        {"charset", "utf-8"},
		        {"sign_type", "RSA2"},     {"timestamp", when},
		        {"version", "1.0"},        {"biz_content", biz.buf_data},
		};

		for (i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
			f.af_params[f.af_n].ap_key = strdup(kv[i][0]);
			f.af_params[f.af_n].ap_value = strdup(kv[i][1]);
			f.af_n++;
			if (f.af_params[f.af_n - 1].ap_key == NULL ||
			    f.af_params[f.af_n - 1].ap_value == NULL) {
				goto done;
			}
		}
	}
	/* Unlike a notification's, a request's signed text keeps sign_type. */
	n = 0;
	for (i = 0; i < f.af_n; i++) {
		sorted[n++] = &f.af_params[i];
	}
	qsort(sorted, n, sizeof(*sorted), alipay_param_cmp);
	for (i = 0; i < n; i++) {
		if ((i > 0 && buf_puts(&signed_text, "&") < 0) ||
		    buf_printf(&signed_text, "%s=%s", sorted[i]->ap_key, sorted[i]->ap_value) < 0) {
			goto done;
		}
	}
	if (crypto_rsa_sha256_sign(st->as_app_key, signed_text.buf_data, signed_text.buf_len, &sig,
	                           &sig_len) < 0 ||
	    crypto_base64_encode(sig, sig_len, &sig_b64, NULL) < 0) {
		goto done;
	}
	/* As Alipay's SDKs send it: the common parameters and sign in the
	 * query string, biz_content in the form body. */
	if (buf_puts(&ret->prq_url, st->as_gateway) < 0) {
		goto done;
	}
	for (i = 0; i < f.af_n; i++) {
		int in_body = strcmp(f.af_params[i].ap_key, "biz_content") == 0;
		struct buf *to = in_body ? &ret->prq_body : &ret->prq_url;
		const char *sep = in_body ? (to->buf_len > 0 ? "&" : "")
		                          : (strchr(to->buf_data, '?') != NULL ? "&" : "?");

		if (buf_puts(to, sep) < 0 || buf_puts(to, f.af_params[i].ap_key) < 0 ||
		    buf_puts(to, "=") < 0 || provider_url_encode(to, f.af_params[i].ap_value) < 0) {
			goto done;
		}
	}
	if (buf_puts(&ret->prq_url, "&sign=") < 0 ||
	    provider_url_encode(&ret->prq_url, sig_b64) < 0) {
		goto done;
	}
	ret->prq_method = "POST";
	httpc_headers_add(&ret->prq_headers, "Content-Type",
	                  "application/x-www-form-urlencoded; charset=utf-8");
	httpc_headers_add(&ret->prq_headers, "Accept", "application/json");
	rc = ret->prq_headers.hch_overflow ? -1 : 0;
done:
	alipay_form_finish(&f);
	buf_finish(&biz);
	buf_finish(&signed_text);
	free(sig);
	free(sig_b64);
	return rc;
}

/* Past the JSON value that starts at text[i] (nested objects, arrays and
 * strings with their escapes included); returns the index after it, or 0
 * when it is malformed or cut short. */
static size_t alipay_json_skip(const char *text, size_t len, size_t i)
{
	static const char delimiters[] = ",}] \t\r\n";
	size_t depth = 0;
	size_t from = i;

	if (i >= len) {
		return 0;
	}
	if (text[i] != '"' && text[i] != '{' && text[i] != '[') {
		/* A number, true, false or null: up to the next delimiter. */
		while (i < len && memchr(delimiters, text[i], sizeof(delimiters) - 1) == NULL) {
			i++;
		}
		return i > from ? i : 0;
	}
	for (;;) {
		if (i >= len) {
			return 0;
		}
		if (text[i] == '"') {
			for (i++; i < len && text[i] != '"'; i++) {
				if (text[i] == '\\') {
					i++;
				}
			}
			if (i >= len) {
				return 0;
			}
		} else if (text[i] == '{' || text[i] == '[') {
			depth++;
		} else if (text[i] == '}' || text[i] == ']') {
			if (depth == 0) {
				return 0;
			}
			depth--;
		}
		i++;
		if (depth == 0) {
			return i;
		}
	}
}

static size_t alipay_json_space(const char *text, size_t len, size_t i)
{
	while (i < len &&
	       (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) {
		i++;
	}
	return i;
}

/* The exact text of the value of top-level key in the JSON object text:
 * what Alipay's signature covers. Returns 1 with the span, 0 when the key
 * is absent, -1 when the text is malformed or holds the key twice. */
static int alipay_json_span(const char *text, size_t len, const char *key, size_t *ret_start,
                            size_t *ret_len)
{
	size_t klen = strlen(key);
	size_t i = alipay_json_space(text, len, 0);
	int found = 0;

	if (i >= len || text[i] != '{') {
		return -1;
	}
	i = alipay_json_space(text, len, i + 1);
	if (i < len && text[i] == '}') {
		return 0;
	}
	for (;;) {
		size_t kstart;
		size_t kend;
		size_t vstart;
		size_t vend;

		if (i >= len || text[i] != '"') {
			return -1;
		}
		kstart = i + 1;
		kend = alipay_json_skip(text, len, i);
		if (kend == 0) {
			return -1;
		}
		kend--; /* the closing quote */
		i = alipay_json_space(text, len, kend + 1);
		if (i >= len || text[i] != ':') {
			return -1;
		}
		vstart = alipay_json_space(text, len, i + 1);
		vend = alipay_json_skip(text, len, vstart);
		if (vend == 0) {
			return -1;
		}
		if (kend - kstart == klen && memcmp(text + kstart, key, klen) == 0) {
			if (found) {
				return -1;
			}
			found = 1;
			*ret_start = vstart;
			*ret_len = vend - vstart;
		}
		i = alipay_json_space(text, len, vend);
		if (i < len && text[i] == ',') {
			i = alipay_json_space(text, len, i + 1);
			continue;
		}
		if (i < len && text[i] == '}') {
			break;
		}
		return -1;
	}
	return found;
}

/* 1 when the signature verifies over text with a configured public key. */
static int alipay_answer_verified(const struct alipay_state *st, const char *text, size_t len,
                                  const char *sign_b64)
{
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	size_t i;
	int ok = 0;

	if (crypto_base64_decode(sign_b64, strlen(sign_b64), &sig, &sig_len) < 0) {
		return 0;
	}
	for (i = 0; i < st->as_n_keys && !ok; i++) {
		ok = crypto_rsa_sha256_verify(st->as_keys[i], text, len, sig, sig_len) == 1;
	}
	free(sig);
	return ok;
}

/* A string field of the answer, or NULL (numbers are not what the
 * gateway sends for these fields). */
static const char *alipay_answer_get(const cJSON *res, const char *key)
{
	const char *v = provider_json_string(res, key);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Appends one event of the answer: kind, amount (cumulative for a refund),
 * its key "reconcile:<ref>:<what>". Returns 0 or -1. */
static int alipay_answer_event(const struct alipay_state *st, const cJSON *res, const char *text,
                               size_t len, enum event_kind kind, const char *what,
                               struct provider_answer *ret)
{
	const char *trade_no = alipay_answer_get(res, "trade_no");
	const char *order = alipay_answer_get(res, "out_trade_no");
	const char *status = alipay_answer_get(res, "trade_status");
	const char *total = alipay_answer_get(res, "total_amount");
	struct event *ev = event_batch_add(&ret->pa_events);
	struct buf key;
	int rc = -1;

	buf_init(&key, 0);
	if (ev == NULL) {
		return -1;
	}
	memcpy(ev->ev_currency, st->as_currency, sizeof(ev->ev_currency));
	ev->ev_kind = kind;
	if (buf_printf(&key, "reconcile:%s:%s", trade_no != NULL ? trade_no : order, what) < 0 ||
	    provider_set_ref(&ev->ev_key, key.buf_data) < 0 ||
	    provider_set_ref(&ev->ev_type, status) < 0 ||
	    provider_set_ref(&ev->ev_order_ref, order) < 0 ||
	    provider_set_ref(&ev->ev_payment_ref, trade_no) < 0) {
		goto done;
	}
	if (kind == EVENT_PAYMENT_SUCCEEDED || kind == EVENT_REFUNDED) {
		if (total == NULL ||
		    money_parse_decimal(total, st->as_currency, &ev->ev_amount) < 0) {
			ev->ev_amount = -1;
			goto done;
		}
	}
	if (kind == EVENT_REFUNDED) {
		/* Closed after a full refund: the refunded total is the whole
		 * amount, a running total as the refund notifications carry. */
		ev->ev_refund_cumulative = 1;
		buf_finish(&key);
		buf_init(&key, 0);
		if (buf_printf(&key, "%s:closed", trade_no) < 0 ||
		    provider_set_ref(&ev->ev_refund_ref, key.buf_data) < 0) {
			goto done;
		}
	}
	if (provider_fingerprint_normalized(ev) < 0 || provider_set_payload(ev, text, len) < 0) {
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

/* The trade as the verified answer describes it. */
static int alipay_answer_trade(const struct alipay_state *st, const struct provider_query *q,
                               const cJSON *res, const char *text, size_t len,
                               struct provider_answer *ret)
{
	const char *order = alipay_answer_get(res, "out_trade_no");
	const char *status = alipay_answer_get(res, "trade_status");

	if (order == NULL || strcmp(order, q->pq_order_id) != 0) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "mismatched_answer",
		                           "the answer is about another out_trade_no");
	}
	if (status == NULL) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                           "the answer has no trade_status");
	}
	snprintf(ret->pa_state, sizeof(ret->pa_state), "%s", status);
	if (strcmp(status, "TRADE_SUCCESS") == 0 || strcmp(status, "TRADE_FINISHED") == 0) {
		if (alipay_answer_event(st, res, text, len, EVENT_PAYMENT_SUCCEEDED, "paid", ret) <
		    0) {
			goto malformed;
		}
	} else if (strcmp(status, "TRADE_CLOSED") == 0) {
		/* "Closed unpaid on timeout, or fully refunded after payment"
		 * (trade_status): only a paid trade has send_pay_date, the time
		 * the money went to the seller, and a trade_no. */
		if (alipay_answer_get(res, "send_pay_date") != NULL &&
		    alipay_answer_get(res, "trade_no") != NULL) {
			if (alipay_answer_event(st, res, text, len, EVENT_PAYMENT_SUCCEEDED, "paid",
			                        ret) < 0 ||
			    alipay_answer_event(st, res, text, len, EVENT_REFUNDED, "refunded",
			                        ret) < 0) {
				goto malformed;
			}
		} else if (alipay_answer_event(st, res, text, len, EVENT_PAYMENT_CANCELLED,
		                               "closed", ret) < 0) {
			goto malformed;
		}
	} else if (strcmp(status, "WAIT_BUYER_PAY") != 0) {
		snprintf(ret->pa_note, sizeof(ret->pa_note),
		         "trade_status %.64s is not one idemhook knows; nothing applied", status);
	}
	return provider_answer_set(ret, PROVIDER_ANSWER_OK, NULL, NULL);
malformed:
	event_batch_finish(&ret->pa_events);
	return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
	                           "a reference or amount of the answer is not usable");
}

static int alipay_reconcile_answer(const struct provider_conf *pc, const struct provider_query *q,
                                   const struct httpc_response *resp, int64_t now_s,
                                   struct provider_answer *ret)
{
	const struct alipay_state *st = pc->pc_state;
	const char *body = resp->hcr_body;
	size_t len = resp->hcr_body_len;
	cJSON *root = NULL;
	cJSON *res = NULL;
	const char *sign;
	const char *code;
	const char *sub_code;
	size_t start = 0;
	size_t span = 0;
	int found;
	int rc;

	if (resp->hcr_status != 200 || resp->hcr_truncated) {
		return provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "provider_error",
		                           "HTTP %ld from the gateway%s", resp->hcr_status,
		                           resp->hcr_truncated ? " (answer cut at the cap)" : "");
	}
	root = json_parse_strict(body, len, NULL);
	sign = provider_json_string(root, "sign");
	found = alipay_json_span(body, len, ALIPAY_QUERY_RESPONSE, &start, &span);
	if (found == 0) {
		found = alipay_json_span(body, len, ALIPAY_ERROR_RESPONSE, &start, &span);
	}
	if (!cJSON_IsObject(root) || found != 1) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                         "the answer holds no " ALIPAY_QUERY_RESPONSE);
		goto done;
	}
	if (sign == NULL || !alipay_answer_verified(st, body + start, span, sign)) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "bad_signature",
		                         "the answer's sign does not verify with any public_key: "
		                         "nothing of it was used");
		goto done;
	}
	/* Only the signed text is read. */
	res = json_parse_strict(body + start, span, NULL);
	code = provider_json_string(res, "code");
	sub_code = provider_json_string(res, "sub_code");
	if (!cJSON_IsObject(res) || code == NULL) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "malformed_answer",
		                         "the signed answer has no code");
		goto done;
	}
	if (strcmp(code, "10000") == 0) {
		rc = alipay_answer_trade(st, q, res, body + start, span, ret);
	} else if (sub_code != NULL && strcmp(sub_code, "ACQ.TRADE_NOT_EXIST") == 0) {
		/* No trade was ever created at Alipay for this order. */
		snprintf(ret->pa_state, sizeof(ret->pa_state), "TRADE_NOT_EXIST");
		rc = provider_answer_set(ret, PROVIDER_ANSWER_OK, NULL, NULL);
	} else if (strcmp(code, "20000") == 0 ||
	           (sub_code != NULL && strcmp(sub_code, "ACQ.SYSTEM_ERROR") == 0)) {
		rc = provider_answer_set(ret, PROVIDER_ANSWER_RETRY, "provider_busy",
		                         "code %.16s %.64s: the gateway asks to try again", code,
		                         sub_code != NULL ? sub_code : "");
	} else {
		const char *sub_msg = provider_json_string(res, "sub_msg");
		const char *msg = provider_json_string(res, "msg");

		rc = provider_answer_set(ret, PROVIDER_ANSWER_FAILED, "provider_error",
		                         "code %.16s %.64s: %.120s", code,
		                         sub_code != NULL ? sub_code : "",
		                         sub_msg != NULL ? sub_msg
		                         : msg != NULL   ? msg
		                                         : "");
	}
done:
	cJSON_Delete(res);
	cJSON_Delete(root);
	return rc;
}

static const char *const alipay_keys[] = {
        "app_id", "seller_id", "public_key", "currency", "app_private_key", "gateway_url", NULL};

const struct provider provider_alipay = {
        .p_name = "alipay",
        .p_keys = alipay_keys,
        .p_retry_window_s = ALIPAY_RETRY_WINDOW_S,
        .p_create = alipay_create,
        .p_destroy = alipay_destroy,
        .p_receive = alipay_receive,
        .p_ack = alipay_ack,
        /* No p_sign: Alipay signs with its own private key. */
        .p_error = alipay_error,
        .p_simulate = alipay_simulate,
        .p_reconcile_mode = alipay_reconcile_mode,
        .p_reconcile_request = alipay_reconcile_request,
        .p_reconcile_answer = alipay_reconcile_answer,
};
