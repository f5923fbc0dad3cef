/* providers.c: the alphabetized provider table and helpers the profiles share. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "log.h"
#include "money.h"
#include "providers.h"

extern const struct provider provider_adyen;
extern const struct provider provider_alipay;
extern const struct provider provider_hmac;
extern const struct provider provider_standard_webhooks;
extern const struct provider provider_stripe;
extern const struct provider provider_wechatpay;

const struct provider *const provider_table[] = {
        &provider_adyen,  &provider_alipay,    &provider_hmac, &provider_standard_webhooks,
        &provider_stripe, &provider_wechatpay, NULL,
};

#define PROVIDER_ACK_MAX 1024 /* bytes in a JSON acknowledgement */

static int provider_config_find(const char *type, struct config_profile *ret)
{
	const struct provider *p = provider_find(type);

	if (p == NULL) {
		return 0;
	}
	ret->cpf_name = p->p_name;
	ret->cpf_keys = p->p_keys;
	ret->cpf_capture = p->p_capture;
	ret->cpf_retry_window_s = p->p_retry_window_s;
	ret->cpf_provider = p;
	return 1;
}

static int provider_config_create(const char *type, struct provider_conf *pc)
{
	const struct provider *p = provider_find(type);

	if (p == NULL) {
		return -1;
	}
	pc->pc_provider = p;
	pc->pc_state_destroy = p->p_destroy;
	return p->p_create(pc, &pc->pc_state);
}

static const struct config_profiles provider_config_profiles = {
	.cpr_find = provider_config_find,
	.cpr_create = provider_config_create,
};

struct config *provider_config_load(const char *path)
{
	return provider_config_load_opts(path, CONFIG_LOAD_SECRETS);
}

struct config *provider_config_load_shape(const char *path)
{
	return provider_config_load_opts(path, 0);
}

struct config *provider_config_load_opts(const char *path, unsigned flags)
{
	return config_load_opts(path, &provider_config_profiles, flags);
}

const struct provider *provider_find(const char *name)
{
	size_t i;

	if (name == NULL) {
		return NULL;
	}
	for (i = 0; provider_table[i] != NULL; i++) {
		if (strcmp(provider_table[i]->p_name, name) == 0) {
			return provider_table[i];
		}
	}
	return NULL;
}

static const char *provider_status_title(int status)
{
	switch (status) {
	case 400:
		return "Malformed callback";
	case 401:
		return "Callback authentication failed";
	case 403:
		return "Callback not meant for this receiver";
	case 404:
		return "Not found";
	case 409:
		return "Callback is being processed";
	case 413:
		return "Callback too large";
	case 503:
		return "Temporarily unavailable";
	default:
		break;
	}
	return status >= 500 ? "Server error" : "Request refused";
}

int provider_error(const struct provider_conf *pc, int status, const char *reason,
                   const char *detail, struct reply *ret)
{
	if (pc->pc_provider->p_error != NULL) {
		return pc->pc_provider->p_error(pc, status, reason, detail, ret);
	}
	return reply_problem(ret, status, reason != NULL ? reason : "error",
	                     provider_status_title(status), detail);
}

int provider_has_format(const struct provider_conf *pc)
{
	return pc->pc_provider->p_error != NULL;
}

int provider_refusal(const struct provider_conf *pc, int status, const char *slug,
                     const char *title, const char *detail, struct reply *ret)
{
	/* Without a format of its own, the listener's and the route's titles
	 * stay what every other path answers. */
	if (!provider_has_format(pc)) {
		return reply_problem(ret, status, slug, title, detail);
	}
	return pc->pc_provider->p_error(pc, status, slug, detail != NULL ? detail : title, ret);
}

int provider_verifies(const struct provider_conf *pc, const struct http_request *req, int64_t now_s)
{
	struct event_batch batch = {0};
	struct provider_verdict verdict = {0};
	int ok = pc->pc_state != NULL &&
	         pc->pc_provider->p_receive(pc, req, now_s, &batch, &verdict) == 0 &&
	         batch.eb_n > 0;

	event_batch_finish(&batch);
	return ok;
}

/* ---- secrets ---- */

/* The line of key in pc's section (its last), or the section's. */
static int provider_key_line(const struct provider_conf *pc, const char *key)
{
	const struct config_section *cs = pc->pc_section;
	int line = 0;
	size_t i;

	for (i = 0; cs != NULL && i < cs->cs_n; i++) {
		if (strcmp(cs->cs_kv[i].kv_key, key) == 0) {
			line = cs->cs_kv[i].kv_line;
		}
	}
	if (line == 0 && cs != NULL) {
		line = cs->cs_line;
	}
	return line;
}

/* provider_secret_resolve, and for a public key (secret 0) without the
 * warning about a value written in the file: a public key may stand there. */
static int provider_value_resolve(const struct provider_conf *pc, const char *key,
                                  const char *value, int line, int secret, char **ret,
                                  size_t *ret_len)
{
	const char *name = pc->pc_name != NULL ? pc->pc_name : "?";
	char err[CONFIG_SECRET_ERR_MAX];
	char *copy;

	if (strncmp(value, "file:", 5) == 0 || strncmp(value, "credential:", 11) == 0 ||
	    strncmp(value, "env:", 4) == 0 || value[0] == '/') {
		if (config_read_secret(value, ret, ret_len, err, sizeof(err)) < 0) {
			/* One line: where, which key, and the source with its cause. */
			log_err("config %s:%d: [provider %s] %s cannot be read: %s",
			        pc->pc_section != NULL && pc->pc_section->cs_file != NULL
			                ? pc->pc_section->cs_file
			                : "(demo)",
			        line > 0 ? line : provider_key_line(pc, key), name, key, err);
			return -1;
		}
		return 0;
	}
	if (secret && strcmp(value, CONFIG_DEMO_STRIPE_SECRET) != 0) {
		log_warn("provider %s: %s is written literally in the config file, where whoever "
		         "reads the file (a backup, a diff) reads it too; use credential:, file: "
		         "or env:",
		         name, key);
	}
	copy = strdup(value);
	if (copy == NULL) {
		return -1;
	}
	*ret = copy;
	*ret_len = strlen(copy);
	return 0;
}

int provider_secret_resolve(const struct provider_conf *pc, const char *key, const char *value,
                            int line, char **ret, size_t *ret_len)
{
	return provider_value_resolve(pc, key, value, line, 1, ret, ret_len);
}

int provider_public_resolve(const struct provider_conf *pc, const char *key, const char *value,
                            int line, char **ret, size_t *ret_len)
{
	return provider_value_resolve(pc, key, value, line, 0, ret, ret_len);
}

struct provider_secrets_ctx {
	const struct provider_conf *sc_pc;
	const char *sc_key;
	struct provider_secrets *sc_out;
	int sc_secret; /* 0: public keys (provider_publics_load) */
	int sc_bad; /* a line was refused (logged); the next ones are read all the same */
	int sc_over; /* past PROVIDER_SECRETS_MAX: said once, the rest still checked */
};

static int provider_secrets_one(void *arg, const char *value, int line)
{
	struct provider_secrets_ctx *ctx = arg;
	struct provider_secret *s;
	char *data = NULL;
	size_t len = 0;

	if (ctx->sc_out->ps_n >= PROVIDER_SECRETS_MAX && !ctx->sc_over) {
		log_err("provider %s: line %d: more than %d values for %s", ctx->sc_pc->pc_name,
		        line, PROVIDER_SECRETS_MAX, ctx->sc_key);
		ctx->sc_over = 1;
		ctx->sc_bad = 1;
	}
	if (provider_value_resolve(ctx->sc_pc, ctx->sc_key, value, line, ctx->sc_secret, &data,
	                           &len) < 0) {
		ctx->sc_bad = 1; /* logged */
		return 0;
	}
	if (len == 0) {
		log_err("provider %s: line %d: %s is empty", ctx->sc_pc->pc_name, line,
		        ctx->sc_key);
		free(data);
		ctx->sc_bad = 1;
		return 0;
	}
	if (ctx->sc_over) {
		/* Checked, not kept: there is no room for it. */
		explicit_bzero(data, len);
		free(data);
		return 0;
	}
	s = &ctx->sc_out->ps_items[ctx->sc_out->ps_n++];
	s->ps_data = (unsigned char *)data;
	s->ps_len = len;
	s->ps_line = line;
	return 0;
}

static int provider_values_load(const struct provider_conf *pc, const char *key, int secret,
                                struct provider_secrets *ret)
{
	struct provider_secrets_ctx ctx = {pc, key, ret, secret, 0, 0};

	/* Every line read, each bad one logged, the good ones kept for the
	 * caller's checks: all of them in one run. */
	memset(ret, 0, sizeof(*ret));
	if (pc->pc_section == NULL) {
		return 0;
	}
	if (config_section_each(pc->pc_section, key, provider_secrets_one, &ctx) != 0 ||
	    ctx.sc_bad) {
		return -1;
	}
	return 0;
}

int provider_secrets_load(const struct provider_conf *pc, const char *key,
                          struct provider_secrets *ret)
{
	return provider_values_load(pc, key, 1, ret);
}

int provider_publics_load(const struct provider_conf *pc, const char *key,
                          struct provider_secrets *ret)
{
	return provider_values_load(pc, key, 0, ret);
}

void provider_secrets_finish(struct provider_secrets *s)
{
	size_t i;

	for (i = 0; i < s->ps_n; i++) {
		volatile unsigned char *p = s->ps_items[i].ps_data;
		size_t j;

		/* Secrets do not linger in freed memory. */
		for (j = 0; j < s->ps_items[i].ps_len; j++) {
			p[j] = 0;
		}
		free(s->ps_items[i].ps_data);
		s->ps_items[i].ps_data = NULL;
		s->ps_items[i].ps_len = 0;
	}
	s->ps_n = 0;
}

/* ---- small shared checks ---- */

int provider_refuse(struct provider_verdict *v, int status, const char *reason, const char *detail)
{
	v->pv_status = status;
	v->pv_reason = reason;
	v->pv_detail = detail;
	return -1;
}

int provider_header(const struct http_request *req, const char *name, struct provider_verdict *v,
                    const char **ret_value)
{
	if (http_header_one(req, name, ret_value) < 0) {
		return provider_refuse(v, 400, "repeated_header",
		                       "A signature, timestamp or id header field comes more than "
		                       "once.");
	}
	return 0;
}

int provider_parse_timestamp(const char *s, int64_t *ret_s)
{
	int64_t v = 0;
	size_t i;

	if (s == NULL || s[0] == '\0') {
		return -1;
	}
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= 12) {
			return -1;
		}
		v = v * 10 + (s[i] - '0');
	}
	*ret_s = v;
	return 0;
}

int provider_timestamp_fresh(int64_t ts, int64_t now_s, int64_t tolerance_s)
{
	int64_t d = ts > now_s ? ts - now_s : now_s - ts;

	return d <= tolerance_s;
}

int provider_refuse_stale(struct provider_verdict *v, int64_t ts, int64_t now_s,
                          int64_t tolerance_s)
{
	v->pv_has_skew = 1;
	v->pv_skew_s = ts - now_s;
	v->pv_tolerance_s = tolerance_s;
	return provider_refuse(v, 401, "stale_timestamp",
	                       "The signed timestamp is outside the tolerance.");
}

/* ---- JSON ---- */

const struct cJSON *provider_json_path(const struct cJSON *root, const char *path)
{
	const cJSON *cur = root;
	const char *p = path;

	if (root == NULL || path == NULL || path[0] == '\0') {
		return NULL;
	}
	while (cur != NULL) {
		const char *dot = strchr(p, '.');
		size_t n = dot != NULL ? (size_t)(dot - p) : strlen(p);
		char seg[PROVIDER_JSON_PATH_MAX];

		if (n == 0 || n >= sizeof(seg)) {
			return NULL;
		}
		memcpy(seg, p, n);
		seg[n] = '\0';
		if (cJSON_IsObject(cur)) {
			cur = cJSON_GetObjectItemCaseSensitive(cur, seg);
		} else if (cJSON_IsArray(cur)) {
			int64_t idx = 0;

			if (provider_parse_timestamp(seg, &idx) < 0 || idx > 100000) {
				return NULL;
			}
			cur = cJSON_GetArrayItem(cur, (int)idx);
		} else {
			return NULL;
		}
		if (dot == NULL) {
			return cur;
		}
		p = dot + 1;
	}
	return NULL;
}

const char *provider_json_string(const struct cJSON *root, const char *path)
{
	const cJSON *it = provider_json_path(root, path);

	if (!cJSON_IsString(it)) {
		return NULL;
	}
	return it->valuestring;
}

int provider_json_minor(const struct cJSON *item, int64_t *ret_minor)
{
	double d;

	if (cJSON_IsString(item)) {
		return money_parse_minor(item->valuestring, ret_minor);
	}
	if (!cJSON_IsNumber(item)) {
		return -1;
	}
	/* MONEY_MAX_MINOR < 2^53: every integer up to it is exact in a double,
	 * so an integral value in range is the amount that was sent. */
	d = item->valuedouble;
	if (!(d >= 0) || d > (double)MONEY_MAX_MINOR || d != (double)(int64_t)d) {
		return -1;
	}
	*ret_minor = (int64_t)d;
	return 0;
}

/* An object's members sorted on the stack up to this many (a request's
 * objects have a few dozen at most); more, on the heap. */
#define PROVIDER_MEMBERS_LOCAL 32

struct provider_member {
	const cJSON *pm_item;
	size_t pm_index;
};

static int provider_member_cmp(const void *a, const void *b)
{
	const struct provider_member *x = a;
	const struct provider_member *y = b;
	int c = strcmp(x->pm_item->string, y->pm_item->string);

	if (c != 0) {
		return c;
	}
	return x->pm_index < y->pm_index ? -1 : 1;
}

/* cJSON's test of a number printed with 15 digits read back. */
static int provider_same_double(double a, double b)
{
	double max = fabs(a) > fabs(b) ? fabs(a) : fabs(b);

	return fabs(a - b) <= max * DBL_EPSILON;
}

/* A number as cJSON_PrintUnformatted prints it (cJSON 1.7's print_number;
 * stored fingerprints depend on these bytes), without its allocations and,
 * for a whole number below 10^15 (a timestamp in ms, an amount), without
 * formatting a float: "%1.15g" prints such a number's digits as they are.
 * test_json_canonical_numbers_print_as_cjson_prints_them (test_stripe.c)
 * compares the two. */
static int provider_json_number(const cJSON *item, struct buf *b)
{
	char text[32];
	double d = item->valuedouble;
	double back = 0;

	if (isnan(d) || isinf(d)) {
		return buf_puts(b, "null");
	}
	if (d == 0 && signbit(d)) {
		snprintf(text, sizeof(text), "%1.15g", d); /* "-0", as this cJSON prints it */
	} else if (d == (double)item->valueint) {
		snprintf(text, sizeof(text), "%d", item->valueint);
	} else if (d == floor(d) && fabs(d) < 1e15) {
		snprintf(text, sizeof(text), "%lld", (long long)d);
	} else {
		snprintf(text, sizeof(text), "%1.15g", d);
		if (sscanf(text, "%lg", &back) != 1 || !provider_same_double(back, d)) {
			snprintf(text, sizeof(text), "%1.17g", d);
		}
	}
	return buf_puts(b, text);
}

static int provider_json_object(const cJSON *item, struct buf *b)
{
	struct provider_member local[PROVIDER_MEMBERS_LOCAL];
	struct provider_member *m = local;
	const cJSON *c;
	size_t n = 0;
	size_t i;
	int rc = -1;

	for (c = item->child; c != NULL; c = c->next) {
		n++;
	}
	if (n > PROVIDER_MEMBERS_LOCAL) {
		m = calloc(n, sizeof(*m));
		if (m == NULL) {
			return -1;
		}
	}
	n = 0;
	for (c = item->child; c != NULL; c = c->next) {
		m[n].pm_item = c;
		m[n].pm_index = n;
		n++;
	}
	if (n > 0) {
		qsort(m, n, sizeof(*m), provider_member_cmp);
	}
	if (buf_puts(b, "{") < 0) {
		goto done;
	}
	for (i = 0; i < n; i++) {
		if ((i > 0 && buf_puts(b, ",") < 0) ||
		    buf_json_string(b, m[i].pm_item->string) < 0 || buf_puts(b, ":") < 0 ||
		    provider_json_canonical(m[i].pm_item, b) < 0) {
			goto done;
		}
	}
	rc = buf_puts(b, "}");
done:
	if (m != local) {
		free(m);
	}
	return rc;
}

int provider_json_canonical(const struct cJSON *item, struct buf *b)
{
	const cJSON *c;

	if (cJSON_IsObject(item)) {
		return provider_json_object(item, b);
	}
	if (cJSON_IsArray(item)) {
		if (buf_puts(b, "[") < 0) {
			return -1;
		}
		for (c = item->child; c != NULL; c = c->next) {
			if ((c != item->child && buf_puts(b, ",") < 0) ||
			    provider_json_canonical(c, b) < 0) {
				return -1;
			}
		}
		return buf_puts(b, "]");
	}
	if (cJSON_IsString(item)) {
		return buf_json_string(b, item->valuestring);
	}
	if (cJSON_IsNumber(item)) {
		return provider_json_number(item, b);
	}
	if (cJSON_IsTrue(item)) {
		return buf_puts(b, "true");
	}
	if (cJSON_IsFalse(item)) {
		return buf_puts(b, "false");
	}
	return buf_puts(b, "null");
}

/* Whether s is a context as Stripe writes one (docs.stripe.com/context):
 * account ids, letters, digits and "_", joined by "/" (an organization's
 * platform, then its connected account). Nothing else may reach the
 * Stripe-Context header of a fetch: no line break, space or colon. */
int provider_context_valid(const char *s)
{
	size_t len = strlen(s);
	size_t i;

	if (len == 0 || len > PROVIDER_CONTEXT_MAX || s[0] == '/' || s[len - 1] == '/') {
		return 0;
	}
	for (i = 0; i < len; i++) {
		char c = s[i];

		if (c == '/' && s[i + 1] == '/') {
			return 0;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '/')) {
			return 0;
		}
	}
	return 1;
}

int provider_ref_usable(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || i >= PROVIDER_REF_MAX) {
			return 0;
		}
	}
	return 1;
}

int provider_set_ref(char **dst, const char *s)
{
	char *copy;

	free(*dst);
	*dst = NULL;
	if (s == NULL) {
		return 0;
	}
	if (!provider_ref_usable(s)) {
		return -1;
	}
	copy = strdup(s);
	if (copy == NULL) {
		return -1;
	}
	*dst = copy;
	return 0;
}

int provider_set_payload(struct event *ev, const void *data, size_t len)
{
	char *p = malloc(len + 1);

	if (p == NULL) {
		return -1;
	}
	if (len > 0) {
		memcpy(p, data, len);
	}
	p[len] = '\0';
	free(ev->ev_payload);
	ev->ev_payload = p;
	ev->ev_payload_len = len;
	return 0;
}

int provider_ack_json(const struct event *ev, const struct event_outcome *out, struct reply *ret)
{
	const char *order =
	        out != NULL && out->eo_order_id != NULL ? out->eo_order_id : ev->ev_order_ref;
	const char *outcome = "recorded";
	struct buf b;
	char *body;
	size_t len = 0;

	if (out != NULL && out->eo_refused) {
		outcome = "refused";
	} else if (out != NULL && out->eo_effect != NULL) {
		outcome = out->eo_effect;
	}
	buf_init(&b, PROVIDER_ACK_MAX);
	if (buf_puts(&b, "{\"received\":true,\"order_id\":") < 0 ||
	    (order != NULL ? buf_json_string(&b, order) : buf_puts(&b, "null")) < 0 ||
	    buf_puts(&b, ",\"outcome\":") < 0 || buf_json_string(&b, outcome) < 0) {
		goto fail;
	}
	if (out != NULL && out->eo_refused && out->eo_reason != NULL &&
	    (buf_puts(&b, ",\"reason\":") < 0 || buf_json_string(&b, out->eo_reason) < 0)) {
		goto fail;
	}
	if (buf_puts(&b, "}\n") < 0) {
		goto fail;
	}
	body = buf_take(&b, &len);
	if (body == NULL) {
		goto fail;
	}
	if (reply_set_take(ret, 200, "application/json", body, len) < 0) {
		free(body);
		return -1;
	}
	return 0;
fail:
	buf_finish(&b);
	return -1;
}

/* ---- configurable mapping ---- */

static int provider_list_add(char ***list, size_t *n, const char *s, size_t len)
{
	char **p;
	char *item;

	item = strndup(s, len);
	if (item == NULL) {
		return -1;
	}
	p = realloc(*list, (*n + 1) * sizeof(*p));
	if (p == NULL) {
		free(item);
		return -1;
	}
	p[(*n)++] = item;
	*list = p;
	return 0;
}

struct provider_list_ctx {
	char ***lc_list;
	size_t *lc_n;
};

static int provider_list_one(void *arg, const char *value, int line)
{
	struct provider_list_ctx *ctx = arg;
	const char *cursor = value;
	const char *p;
	size_t n;

	while ((p = config_list_next(&cursor, &n)) != NULL) {
		if (provider_list_add(ctx->lc_list, ctx->lc_n, p, n) < 0) {
			return -1;
		}
	}
	return 0;
}

static int provider_path_get(const struct provider_conf *pc, const char *key, const char *dflt,
                             char **ret)
{
	const char *v = pc->pc_section != NULL ? config_section_get(pc->pc_section, key) : NULL;

	if (v == NULL) {
		v = dflt;
	}
	if (strlen(v) >= PROVIDER_JSON_PATH_MAX || v[0] == '\0') {
		log_err("provider %s: %s: a JSON path of 1 to %d bytes is needed", pc->pc_name, key,
		        PROVIDER_JSON_PATH_MAX - 1);
		return -1;
	}
	*ret = strdup(v);
	return *ret != NULL ? 0 : -1;
}

int provider_mapping_load(const struct provider_conf *pc, struct provider_mapping *ret)
{
	struct provider_list_ctx paid = {&ret->pm_paid, &ret->pm_n_paid};
	struct provider_list_ctx refunded = {&ret->pm_refunded, &ret->pm_n_refunded};
	const struct config_section *cs = pc->pc_section;
	const char *v;
	int rc = 0;

	/* Every key checked whatever the others hold, each problem logged. */
	memset(ret, 0, sizeof(*ret));
	if (provider_path_get(pc, "type_path", "type", &ret->pm_type_path) < 0) {
		rc = -1;
	}
	if (provider_path_get(pc, "order_path", "data.order_id", &ret->pm_order_path) < 0) {
		rc = -1;
	}
	if (provider_path_get(pc, "amount_path", "data.amount", &ret->pm_amount_path) < 0) {
		rc = -1;
	}
	if (provider_path_get(pc, "currency_path", "data.currency", &ret->pm_currency_path) < 0) {
		rc = -1;
	}
	if (provider_path_get(pc, "payment_path", "data.payment_id", &ret->pm_payment_path) < 0) {
		rc = -1;
	}
	if (provider_path_get(pc, "refund_path", "data.refund_id", &ret->pm_refund_path) < 0) {
		rc = -1;
	}
	if (cs != NULL &&
	    (config_section_each(cs, "paid_types", provider_list_one, &paid) != 0 ||
	     config_section_each(cs, "refunded_types", provider_list_one, &refunded) != 0)) {
		goto fail; /* out of memory */
	}
	v = cs != NULL ? config_section_get(cs, "amount_format") : NULL;
	if (v != NULL && strcmp(v, "decimal") == 0) {
		ret->pm_amount_decimal = 1;
	} else if (v != NULL && strcmp(v, "minor") != 0) {
		log_err("provider %s: amount_format: expected minor or decimal", pc->pc_name);
		rc = -1;
	}
	v = cs != NULL ? config_section_get(cs, "refund_cumulative") : NULL;
	if (v != NULL && config_parse_bool(v, &ret->pm_refund_cumulative) < 0) {
		log_err("provider %s: refund_cumulative: expected yes or no", pc->pc_name);
		rc = -1;
	}
	if (rc == 0) {
		return 0;
	}
fail:
	provider_mapping_finish(ret);
	return -1;
}

static void provider_list_free(char **list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(list[i]);
	}
	free(list);
}

void provider_mapping_finish(struct provider_mapping *m)
{
	free(m->pm_type_path);
	free(m->pm_order_path);
	free(m->pm_amount_path);
	free(m->pm_currency_path);
	free(m->pm_payment_path);
	free(m->pm_refund_path);
	provider_list_free(m->pm_paid, m->pm_n_paid);
	provider_list_free(m->pm_refunded, m->pm_n_refunded);
	memset(m, 0, sizeof(*m));
}

static int provider_list_has(char *const *list, size_t n, const char *s)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(list[i], s) == 0) {
			return 1;
		}
	}
	return 0;
}

/* A reference may be a string or an integer id. */
static int provider_mapping_ref(const cJSON *root, const char *path, char **dst)
{
	const cJSON *it = provider_json_path(root, path);
	int64_t n;

	if (cJSON_IsString(it)) {
		return provider_set_ref(dst, it->valuestring);
	}
	if (cJSON_IsNumber(it) && provider_json_minor(it, &n) == 0) {
		char *text = cJSON_PrintUnformatted(it);
		int rc;

		if (text == NULL) {
			return -1;
		}
		rc = provider_set_ref(dst, text);
		cJSON_free(text);
		return rc;
	}
	return 0;
}

int provider_mapping_apply(const struct provider_mapping *m, const struct cJSON *root,
                           struct event *ev, struct provider_verdict *ret_verdict)
{
	const char *type = provider_json_string(root, m->pm_type_path);
	const char *currency = provider_json_string(root, m->pm_currency_path);
	const cJSON *amount = provider_json_path(root, m->pm_amount_path);

	if (provider_set_ref(&ev->ev_type, type != NULL ? type : "") < 0) {
		return provider_refuse(ret_verdict, 400, "malformed_body",
		                       "The event type is not usable.");
	}
	ev->ev_kind = EVENT_OTHER;
	if (type != NULL && provider_list_has(m->pm_paid, m->pm_n_paid, type)) {
		ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
	} else if (type != NULL && provider_list_has(m->pm_refunded, m->pm_n_refunded, type)) {
		ev->ev_kind = EVENT_REFUNDED;
		ev->ev_refund_cumulative = m->pm_refund_cumulative;
	}
	if (provider_mapping_ref(root, m->pm_order_path, &ev->ev_order_ref) < 0 ||
	    provider_mapping_ref(root, m->pm_payment_path, &ev->ev_payment_ref) < 0 ||
	    provider_mapping_ref(root, m->pm_refund_path, &ev->ev_refund_ref) < 0) {
		return provider_refuse(ret_verdict, 400, "malformed_body",
		                       "A reference in the body is not usable.");
	}
	if (currency != NULL && money_currency_normalize(currency, ev->ev_currency) < 0) {
		return provider_refuse(ret_verdict, 400, "malformed_body",
		                       "The currency is not an ISO 4217 code.");
	}
	if (amount != NULL) {
		int rc;

		if (m->pm_amount_decimal) {
			rc = cJSON_IsString(amount) && currency != NULL
			             ? money_parse_decimal(amount->valuestring, currency,
			                                   &ev->ev_amount)
			             : -1;
		} else {
			rc = provider_json_minor(amount, &ev->ev_amount);
		}
		if (rc < 0) {
			ev->ev_amount = -1;
			return provider_refuse(ret_verdict, 400, "malformed_body",
			                       "The amount is malformed.");
		}
	}
	return 0;
}

int provider_mapping_event(const struct provider_mapping *m, const struct cJSON *root,
                           const struct http_request *req, struct event *ev,
                           struct provider_verdict *ret_verdict)
{
	struct buf canon;

	if (provider_mapping_apply(m, root, ev, ret_verdict) < 0) {
		return -1;
	}
	buf_init(&canon, 0);
	if ((ev->ev_kind == EVENT_REFUNDED && ev->ev_refund_ref == NULL &&
	     provider_set_ref(&ev->ev_refund_ref, ev->ev_key) < 0) ||
	    provider_json_canonical(root, &canon) < 0 ||
	    provider_set_payload(ev, req->hr_body, req->hr_body_len) < 0) {
		buf_finish(&canon);
		provider_refuse(ret_verdict, 503, "out_of_memory", NULL);
		return -1;
	}
	/* The whole payload is semantic; canonical form absorbs re-serialization. */
	event_fingerprint(ev, canon.buf_data, canon.buf_len);
	buf_finish(&canon);
	return 0;
}

/* ---- idemhook simulate ---- */

void provider_sim_ref(const char *seed, int hex, char *out, size_t n)
{
	static const char digits[] = "0123456789ABCDEF";
	unsigned char h[CRYPTO_SHA256_LEN];
	size_t i;

	crypto_sha256(seed, strlen(seed), h);
	for (i = 0; i < n && i < 2 * sizeof(h); i++) {
		unsigned v = i % 2 == 0 ? h[i / 2] >> 4 : h[i / 2] & 0xf;

		out[i] = hex ? digits[v] : digits[v % 10];
	}
	out[i] = '\0';
}

int provider_json_put(struct cJSON *root, const char *path, struct cJSON *value)
{
	cJSON *cur = root;
	const char *p = path;

	for (;;) {
		const char *dot = strchr(p, '.');
		size_t n = dot != NULL ? (size_t)(dot - p) : strlen(p);
		char seg[PROVIDER_JSON_PATH_MAX];
		int64_t idx = -1;
		cJSON *next;

		if (n == 0 || n >= sizeof(seg)) {
			goto fail;
		}
		memcpy(seg, p, n);
		seg[n] = '\0';
		if (cJSON_IsArray(cur)) {
			if (provider_parse_timestamp(seg, &idx) < 0 || idx > 1000) {
				goto fail;
			}
			while (cJSON_GetArraySize(cur) <= idx) {
				if (!cJSON_AddItemToArray(cur, cJSON_CreateObject())) {
					goto fail;
				}
			}
			if (dot == NULL) {
				return cJSON_ReplaceItemInArray(cur, (int)idx, value) ? 0 : -1;
			}
			next = cJSON_GetArrayItem(cur, (int)idx);
		} else if (cJSON_IsObject(cur)) {
			if (dot == NULL) {
				cJSON_DeleteItemFromObjectCaseSensitive(cur, seg);
				return cJSON_AddItemToObject(cur, seg, value) ? 0 : -1;
			}
			next = cJSON_GetObjectItemCaseSensitive(cur, seg);
			if (next == NULL) {
				int64_t ignored;
				const char *after = dot + 1;
				size_t an = strcspn(after, ".");
				char aseg[PROVIDER_JSON_PATH_MAX];

				if (an == 0 || an >= sizeof(aseg)) {
					goto fail;
				}
				memcpy(aseg, after, an);
				aseg[an] = '\0';
				next = provider_parse_timestamp(aseg, &ignored) == 0
				               ? cJSON_CreateArray()
				               : cJSON_CreateObject();
				if (next == NULL || !cJSON_AddItemToObject(cur, seg, next)) {
					cJSON_Delete(next);
					goto fail;
				}
			}
		} else {
			goto fail;
		}
		cur = next;
		p = dot + 1;
	}
fail:
	cJSON_Delete(value);
	return -1;
}

struct cJSON *provider_mapping_build(const struct provider_conf *pc,
                                     const struct provider_mapping *m,
                                     const struct provider_sim *sim)
{
	int refund = sim->ps_kind == PROVIDER_SIM_REFUND;
	const char *type = refund ? (m->pm_n_refunded > 0 ? m->pm_refunded[0] : NULL)
	                          : (m->pm_n_paid > 0 ? m->pm_paid[0] : NULL);
	int64_t amount =
	        refund && m->pm_refund_cumulative ? sim->ps_refunded_total : sim->ps_amount;
	cJSON *root = cJSON_CreateObject();
	cJSON *amount_item;
	char ref[80];

	if (type == NULL) {
		log_err("provider %s: no %s value is configured, so no callback would count as a "
		        "%s",
		        pc->pc_name, refund ? "refunded_types" : "paid_types",
		        refund ? "refund" : "payment");
		cJSON_Delete(root);
		return NULL;
	}
	snprintf(ref, sizeof(ref), "pay_sim_%s", sim->ps_order_id);
	if (root == NULL ||
	    provider_json_put(root, m->pm_type_path, cJSON_CreateString(type)) < 0 ||
	    provider_json_put(root, m->pm_order_path, cJSON_CreateString(sim->ps_order_id)) < 0 ||
	    provider_json_put(root, m->pm_currency_path, cJSON_CreateString(sim->ps_currency)) <
	            0 ||
	    provider_json_put(root, m->pm_payment_path, cJSON_CreateString(ref)) < 0) {
		goto fail;
	}
	if (m->pm_amount_decimal) {
		char text[32];

		money_format(amount, sim->ps_currency, text);
		amount_item = cJSON_CreateString(text);
	} else {
		amount_item = cJSON_CreateNumber((double)amount);
	}
	if (provider_json_put(root, m->pm_amount_path, amount_item) < 0) {
		goto fail;
	}
	if (refund) {
		snprintf(ref, sizeof(ref), "re_sim_%s", sim->ps_id);
		if (provider_json_put(root, m->pm_refund_path, cJSON_CreateString(ref)) < 0) {
			goto fail;
		}
	}
	return root;
fail:
	log_err("provider %s: the configured JSON paths do not fit into one body", pc->pc_name);
	cJSON_Delete(root);
	return NULL;
}

/* ---- reconciliation ---- */

void provider_request_init(struct provider_request *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->prq_url, 0);
	buf_init(&r->prq_body, 0);
	httpc_headers_init(&r->prq_headers);
}

void provider_request_finish(struct provider_request *r)
{
	/* The headers may carry an API key or an Authorization. */
	size_t i;

	for (i = 0; i < r->prq_headers.hch_n; i++) {
		char *v = (char *)r->prq_headers.hch_v[i].hh_value;

		if (v != NULL) {
			explicit_bzero(v, strlen(v));
		}
	}
	httpc_headers_finish(&r->prq_headers);
	buf_finish(&r->prq_url);
	buf_finish(&r->prq_body);
	memset(r, 0, sizeof(*r));
}

void provider_answer_init(struct provider_answer *a)
{
	memset(a, 0, sizeof(*a));
}

void provider_answer_finish(struct provider_answer *a)
{
	free(a->pa_cursor);
	event_batch_finish(&a->pa_events);
	memset(a, 0, sizeof(*a));
}

int provider_answer_set(struct provider_answer *a, enum provider_answer_verdict verdict,
                        const char *reason, const char *fmt, ...)
{
	va_list ap;

	a->pa_verdict = verdict;
	a->pa_reason = reason;
	a->pa_detail[0] = '\0';
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(a->pa_detail, sizeof(a->pa_detail), fmt, ap);
		va_end(ap);
	}
	return verdict == PROVIDER_ANSWER_OK ? 0 : -1;
}

int provider_base_url(const struct provider_conf *pc, const char *key, const char *dflt, char **ret)
{
	const char *v = pc->pc_section != NULL ? config_section_get(pc->pc_section, key) : NULL;
	char err[HTTPC_ERR_MAX];
	size_t len;
	char *copy;

	*ret = NULL;
	if (v == NULL) {
		v = dflt;
	}
	if (strchr(v, '?') != NULL || strchr(v, '#') != NULL) {
		log_err("provider %s: %s: expected an https:// URL", pc->pc_name, key);
		return -1;
	}
	/* The requests to it carry the API key. */
	if (httpc_url_check(v, 1, err, sizeof(err)) < 0) {
		log_err("provider %s: %s: %s", pc->pc_name, key, err);
		return -1;
	}
	len = strlen(v);
	while (len > 0 && v[len - 1] == '/') {
		len--;
	}
	copy = strndup(v, len);
	if (copy == NULL) {
		return -1;
	}
	*ret = copy;
	return 0;
}

int provider_privkey_load(const struct provider_conf *pc, const char *key,
                          struct crypto_privkey **ret)
{
	const char *v = pc->pc_section != NULL ? config_section_get(pc->pc_section, key) : NULL;
	char *text = NULL;
	size_t len = 0;

	*ret = NULL;
	if (v == NULL) {
		return 0;
	}
	if (provider_secret_resolve(pc, key, v, 0, &text, &len) < 0) {
		return -1;
	}
	*ret = crypto_privkey_load(text, len);
	explicit_bzero(text, len);
	free(text);
	if (*ret == NULL) {
		log_err("provider %s: %s is not a private key (PEM, or the base64 of its DER)",
		        pc->pc_name, key);
		return -1;
	}
	return 0;
}

int provider_url_encode(struct buf *b, const char *s)
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

int provider_fingerprint_normalized(struct event *ev)
{
	struct buf b;
	int rc;

	buf_init(&b, 0);
	rc = buf_printf(&b, "%s\n%s\n%s\n%s\n%s\n%lld\n%s\n%d", event_kind_name(ev->ev_kind),
	                ev->ev_order_ref != NULL ? ev->ev_order_ref : "",
	                ev->ev_payment_ref != NULL ? ev->ev_payment_ref : "",
	                ev->ev_charge_ref != NULL ? ev->ev_charge_ref : "",
	                ev->ev_refund_ref != NULL ? ev->ev_refund_ref : "",
	                (long long)ev->ev_amount, ev->ev_currency, ev->ev_refund_cumulative);
	if (rc == 0) {
		event_fingerprint(ev, b.buf_data, b.buf_len);
	}
	buf_finish(&b);
	return rc;
}
