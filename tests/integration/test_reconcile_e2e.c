/* test_reconcile_e2e.c: reconciliation end to end: the real daemon and the
 * real `idemhook reconcile` against provider API fakes this test starts on
 * loopback (tests/harness/peer.c): a Stripe events API that pages, and Alipay
 * and WeChat Pay query endpoints that check our request signatures and sign
 * their answers as the providers do (one signs wrongly), fail, rate-limit or
 * hang when told to. Keys are generated at test time. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "crypto.h"
#include "peer.h"
#include "provider_e2e.h"
#include "rawhttp.h"
#include "fixtures.h"
#include "text.h"

#define T_APP_ID "2021001144680325"
#define T_MCHID "1900000001"
#define T_PLATFORM_SERIAL "PUB_KEY_ID_0114232134912410000000000000"
#define T_MERCHANT_SERIAL "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
#define T_STRIPE_KEY "rk_test_reconcile_e2e"
#define T_ORDERS_MAX 32
#define T_STEPS_MAX 6
#define T_EVENTS_MAX 512

/* The provider's key pair (signs answers and notifications) and ours (signs
 * queries), both handed to the daemon through the environment. */
static char *provider_priv;
static char *provider_pub;
static char *our_priv;
static char *our_pub;

/* ---- the fakes ---- */

struct fake_order {
	char fo_id[64];
	char fo_amount[16]; /* "19.99" */
	int64_t fo_minor;
	char fo_steps[T_STEPS_MAX][12]; /* what each request gets; the last repeats */
	size_t fo_n_steps;
	size_t fo_at;
};

struct fake {
	pthread_mutex_t fk_lock;
	/* Stripe: events, newest first, fk_page a page */
	char *fk_events[T_EVENTS_MAX];
	size_t fk_n_events;
	size_t fk_page;
	int fk_ignore_cursor; /* starting_after dropped on the way (a proxy) */
	/* Pages after the first are answered 429 with this Retry-After */
	const char *fk_limit_later_pages;
	unsigned fk_delay_ms; /* before each answer */
	size_t fk_started;    /* requests whose answer is being prepared or was sent */
	/* Alipay and WeChat Pay: what each order's queries get */
	struct fake_order fk_orders[T_ORDERS_MAX];
	size_t fk_n_orders;
	int fk_bad_requests; /* queries whose signature did not verify */
};

static struct fake fake;

static void fake_reset(void)
{
	size_t i;

	for (i = 0; i < fake.fk_n_events; i++) {
		free(fake.fk_events[i]);
	}
	pthread_mutex_destroy(&fake.fk_lock);
	memset(&fake, 0, sizeof(fake));
	pthread_mutex_init(&fake.fk_lock, NULL);
	fake.fk_page = 2;
}

/* Adds an event to the top of the list (the newest). */
static void fake_event(const char *json)
{
	pthread_mutex_lock(&fake.fk_lock);
	assert_true(fake.fk_n_events < T_EVENTS_MAX);
	memmove(&fake.fk_events[1], &fake.fk_events[0], fake.fk_n_events * sizeof(char *));
	fake.fk_events[0] = strdup(json);
	fake.fk_n_events++;
	pthread_mutex_unlock(&fake.fk_lock);
}

/* steps: space-separated: paid wait closed refunded badsig busy notexist 500
 * 429 hang (Alipay), or paid notpay closed refund badsig (WeChat Pay). */
static void fake_order(const char *id, int64_t minor, const char *steps)
{
	struct fake_order *o;
	char copy[128];
	char *save = NULL;
	char *w;

	pthread_mutex_lock(&fake.fk_lock);
	assert_true(fake.fk_n_orders < T_ORDERS_MAX);
	o = &fake.fk_orders[fake.fk_n_orders++];
	memset(o, 0, sizeof(*o));
	snprintf(o->fo_id, sizeof(o->fo_id), "%s", id);
	o->fo_minor = minor;
	snprintf(o->fo_amount, sizeof(o->fo_amount), "%lld.%02lld", (long long)(minor / 100),
	         (long long)(minor % 100));
	snprintf(copy, sizeof(copy), "%s", steps);
	for (w = strtok_r(copy, " ", &save); w != NULL && o->fo_n_steps < T_STEPS_MAX;
	     w = strtok_r(NULL, " ", &save)) {
		snprintf(o->fo_steps[o->fo_n_steps++], sizeof(o->fo_steps[0]), "%s", w);
	}
	pthread_mutex_unlock(&fake.fk_lock);
}

/* The step for order id's next query ("notexist" for orders it never saw),
 * and the order's amount. Called with the lock held. */
static const char *fake_step(const char *id, const struct fake_order **ret)
{
	size_t i;

	*ret = NULL;
	for (i = 0; i < fake.fk_n_orders; i++) {
		struct fake_order *o = &fake.fk_orders[i];

		if (strcmp(o->fo_id, id) == 0) {
			size_t at = o->fo_at < o->fo_n_steps ? o->fo_at : o->fo_n_steps - 1;

			o->fo_at++;
			*ret = o;
			return o->fo_steps[at];
		}
	}
	return "notexist";
}

static char *sign_b64(const char *priv_pem, const char *text, size_t len)
{
	struct crypto_privkey *k = crypto_privkey_load(priv_pem, strlen(priv_pem));
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *b64 = NULL;

	if (k != NULL && crypto_rsa_sha256_sign(k, text, len, &sig, &sig_len) == 0) {
		crypto_base64_encode(sig, sig_len, &b64, NULL);
	}
	free(sig);
	crypto_privkey_destroy(k);
	return b64;
}

static int verifies(const char *pub_pem, const char *text, size_t len, const char *sig_b64)
{
	struct crypto_pubkey *k = crypto_pubkey_load(pub_pem, strlen(pub_pem));
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	int ok = 0;

	if (k != NULL && crypto_base64_decode(sig_b64, strlen(sig_b64), &sig, &sig_len) == 0) {
		ok = crypto_rsa_sha256_verify(k, text, len, sig, sig_len) == 1;
	}
	free(sig);
	crypto_pubkey_destroy(k);
	return ok;
}

static void fake_done(void *arg, struct peer_behaviour *b)
{
	size_t i;

	(void)arg;
	free((char *)b->pb_body);
	for (i = 0; i < PEER_HEADERS_MAX; i++) {
		free((char *)b->pb_headers[i]);
	}
}

static void fake_delay(void)
{
	unsigned ms;

	pthread_mutex_lock(&fake.fk_lock);
	ms = fake.fk_delay_ms;
	fake.fk_started++;
	pthread_mutex_unlock(&fake.fk_lock);
	if (ms > 0) {
		usleep(ms * 1000);
	}
}

/* The decoded value of name in a query or form text, malloc'd, or NULL. */
static char *form_value(const char *text, const char *name)
{
	size_t nlen = strlen(name);
	const char *p = text;

	while (p != NULL && *p != '\0') {
		const char *amp = strchr(p, '&');
		size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);

		if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
			return text_form_decode(p + nlen + 1, len - nlen - 1);
		}
		p = amp != NULL ? amp + 1 : NULL;
	}
	return NULL;
}

/* Stripe: GET /v1/events, newest first, the page after starting_after. */
static void fake_stripe(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	char *after = form_value(req->pq_query, "starting_after");
	struct buf b;
	size_t first = 0;
	size_t i;
	size_t n;

	(void)arg;
	fake_delay();
	pthread_mutex_lock(&fake.fk_lock);
	if (req->pq_authorization == NULL ||
	    strcmp(req->pq_authorization, "Bearer " T_STRIPE_KEY) != 0) {
		pthread_mutex_unlock(&fake.fk_lock);
		ret->pb_status = 401;
		ret->pb_body = strdup("{\"error\":{\"message\":\"Invalid API Key provided\"}}");
		free(after);
		return;
	}
	if (after != NULL && fake.fk_limit_later_pages != NULL) {
		ret->pb_action = PEER_RETRY_AFTER;
		ret->pb_retry_after = fake.fk_limit_later_pages;
		pthread_mutex_unlock(&fake.fk_lock);
		free(after);
		return;
	}
	for (i = 0; after != NULL && !fake.fk_ignore_cursor && i < fake.fk_n_events; i++) {
		char id[80];

		snprintf(id, sizeof(id), "\"id\":\"%s\"", after);
		if (strstr(fake.fk_events[i], id) != NULL) {
			first = i + 1;
		}
	}
	buf_init(&b, 0);
	buf_puts(&b, "{\"object\":\"list\",\"url\":\"/v1/events\",\"data\":[");
	for (n = 0, i = first; i < fake.fk_n_events && n < fake.fk_page; i++, n++) {
		buf_printf(&b, "%s%s", n > 0 ? "," : "", fake.fk_events[i]);
	}
	buf_printf(&b, "],\"has_more\":%s}", i < fake.fk_n_events ? "true" : "false");
	pthread_mutex_unlock(&fake.fk_lock);
	ret->pb_body = buf_take(&b, NULL);
	free(after);
}

struct form_field {
	char *ff_k;
	char *ff_v;
};

static int form_field_cmp(const void *a, const void *b)
{
	return strcmp(((const struct form_field *)a)->ff_k, ((const struct form_field *)b)->ff_k);
}

/* Alipay's gateway check of a request: every parameter but sign, sorted. */
static int alipay_request_ok(const char *body)
{
	struct form_field f[32];
	char *sign = NULL;
	const char *p = body;
	struct buf text;
	size_t n = 0;
	size_t i;
	int ok;

	while (*p != '\0' && n < 32) {
		const char *amp = strchr(p, '&');
		size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);

		if (eq == NULL) {
			break;
		}
		f[n].ff_k = text_form_decode(p, (size_t)(eq - p));
		f[n].ff_v = text_form_decode(eq + 1, len - (size_t)(eq - p) - 1);
		if (strcmp(f[n].ff_k, "sign") == 0) {
			sign = f[n].ff_v;
			free(f[n].ff_k);
		} else {
			n++;
		}
		p += len + (amp != NULL);
	}
	qsort(f, n, sizeof(f[0]), form_field_cmp);
	buf_init(&text, 0);
	for (i = 0; i < n; i++) {
		buf_printf(&text, "%s%s=%s", i > 0 ? "&" : "", f[i].ff_k, f[i].ff_v);
		free(f[i].ff_k);
		free(f[i].ff_v);
	}
	ok = sign != NULL && verifies(our_pub, text.buf_data, text.buf_len, sign);
	free(sign);
	buf_finish(&text);
	return ok;
}

/* Alipay: POST /gateway.do, method alipay.trade.query. */
static void fake_alipay(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	char *params = malloc(strlen(req->pq_query) + req->pq_body_len + 2);
	char *biz = form_value(req->pq_body, "biz_content");
	cJSON *root = biz != NULL ? cJSON_Parse(biz) : NULL;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "out_trade_no");
	const struct fake_order *o = NULL;
	const char *step;
	char trade_no[40];
	char inner[1024];
	char *sig;
	struct buf b;

	(void)arg;
	fake_delay();
	pthread_mutex_lock(&fake.fk_lock);
	/* The gateway reads the query string and the form body alike. */
	sprintf(params, "%s&%s", req->pq_query, req->pq_body);
	if (!alipay_request_ok(params) || !cJSON_IsString(id)) {
		fake.fk_bad_requests++;
		step = "badreq";
	} else {
		step = fake_step(id->valuestring, &o);
	}
	pthread_mutex_unlock(&fake.fk_lock);
	snprintf(trade_no, sizeof(trade_no), "2025120222%018zu",
	         o != NULL ? (size_t)o->fo_minor : 0);
	if (strcmp(step, "500") == 0) {
		ret->pb_status = 500;
		ret->pb_body = strdup("{}");
		goto done;
	}
	if (strcmp(step, "429") == 0) {
		ret->pb_action = PEER_RETRY_AFTER;
		ret->pb_retry_after = "1";
		ret->pb_body = strdup("{}");
		goto done;
	}
	if (strcmp(step, "hang") == 0) {
		ret->pb_action = PEER_HANG;
		ret->pb_ms = 2500;
		goto done;
	}
	if (strcmp(step, "paid") == 0 || strcmp(step, "badsig") == 0) {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"buyer_logon_id\":\"159****"
		         "5620\","
		         "\"buyer_pay_amount\":\"%s\",\"out_trade_no\":\"%s\",\"receipt_amount\":"
		         "\"%s\","
		         "\"send_pay_date\":\"2025-12-02 20:00:00\",\"total_amount\":\"%s\","
		         "\"trade_no\":\"%s\",\"trade_status\":\"TRADE_SUCCESS\"}",
		         o->fo_amount, o->fo_id, o->fo_amount, o->fo_amount, trade_no);
	} else if (strcmp(step, "wait") == 0) {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"%s\","
		         "\"total_amount\":\"%s\",\"trade_no\":\"%s\",\"trade_status\":"
		         "\"WAIT_BUYER_PAY\"}",
		         o->fo_id, o->fo_amount, trade_no);
	} else if (strcmp(step, "closed") == 0) {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"%s\","
		         "\"total_amount\":\"%s\",\"trade_no\":\"%s\",\"trade_status\":\"TRADE_"
		         "CLOSED\"}",
		         o->fo_id, o->fo_amount, trade_no);
	} else if (strcmp(step, "refunded") == 0) {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"buyer_pay_amount\":\"%s\","
		         "\"out_trade_no\":\"%s\",\"send_pay_date\":\"2025-12-02 19:00:00\","
		         "\"total_amount\":\"%s\",\"trade_no\":\"%s\",\"trade_status\":\"TRADE_"
		         "CLOSED\"}",
		         o->fo_amount, o->fo_id, o->fo_amount, trade_no);
	} else if (strcmp(step, "busy") == 0) {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"20000\",\"msg\":\"Service Currently "
		         "Unavailable\",\"sub_code\":"
		         "\"isp.unknow-error\",\"sub_msg\":\"busy\"}");
	} else if (strcmp(step, "badreq") == 0) {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"40002\",\"msg\":\"Invalid Arguments\",\"sub_code\":"
		         "\"isv.invalid-signature\",\"sub_msg\":\"bad request signature\"}");
	} else {
		snprintf(inner, sizeof(inner),
		         "{\"code\":\"40004\",\"msg\":\"Business Failed\",\"sub_code\":"
		         "\"ACQ.TRADE_NOT_EXIST\",\"sub_msg\":\"trade does not exist\"}");
	}
	/* The gateway signs the text of the _response value exactly as sent. */
	sig = sign_b64(strcmp(step, "badsig") == 0 ? our_priv : provider_priv, inner,
	               strlen(inner));
	buf_init(&b, 0);
	buf_printf(&b, "{\"alipay_trade_query_response\":%s,\"sign\":\"%s\"}", inner, sig);
	free(sig);
	ret->pb_body = buf_take(&b, NULL);
done:
	cJSON_Delete(root);
	free(biz);
	free(params);
}

/* The value of name="..." in an Authorization header, malloc'd, or NULL. */
static char *auth_param(const char *auth, const char *name)
{
	char pat[64];
	const char *p;
	const char *end;

	snprintf(pat, sizeof(pat), "%s=\"", name);
	p = auth != NULL ? strstr(auth, pat) : NULL;
	if (p == NULL) {
		return NULL;
	}
	p += strlen(pat);
	end = strchr(p, '"');
	return end != NULL ? strndup(p, (size_t)(end - p)) : NULL;
}

/* WeChat Pay's check of WECHATPAY2-SHA256-RSA2048 on a GET. */
static int wechatpay_request_ok(const struct peer_request *req)
{
	char *nonce = auth_param(req->pq_authorization, "nonce_str");
	char *sig = auth_param(req->pq_authorization, "signature");
	char *ts = auth_param(req->pq_authorization, "timestamp");
	char *serial = auth_param(req->pq_authorization, "serial_no");
	char *mchid = auth_param(req->pq_authorization, "mchid");
	struct buf text;
	int ok = 0;

	buf_init(&text, 0);
	if (nonce != NULL && sig != NULL && ts != NULL && serial != NULL && mchid != NULL &&
	    strncmp(req->pq_authorization, "WECHATPAY2-SHA256-RSA2048 ", 26) == 0 &&
	    strcmp(serial, T_MERCHANT_SERIAL) == 0 && strcmp(mchid, T_MCHID) == 0 &&
	    buf_printf(&text, "GET\n%s?%s\n%s\n%s\n\n", req->pq_path, req->pq_query, ts, nonce) ==
	            0) {
		ok = verifies(our_pub, text.buf_data, text.buf_len, sig);
	}
	buf_finish(&text);
	free(nonce);
	free(sig);
	free(ts);
	free(serial);
	free(mchid);
	return ok;
}

/* WeChat Pay: GET /v3/pay/transactions/out-trade-no/{id}?mchid=... */
static void fake_wechatpay(void *arg, const struct peer_request *req, struct peer_behaviour *ret)
{
	const char *id = req->pq_path + strlen("/v3/pay/transactions/out-trade-no/");
	const struct fake_order *o = NULL;
	const char *step;
	const char *state = NULL;
	char body[1024];
	char ts[24];
	char *sig;
	struct buf text;
	struct buf h;

	(void)arg;
	fake_delay();
	pthread_mutex_lock(&fake.fk_lock);
	if (!wechatpay_request_ok(req)) {
		fake.fk_bad_requests++;
		step = "badreq";
	} else {
		step = fake_step(id, &o);
	}
	pthread_mutex_unlock(&fake.fk_lock);
	if (strcmp(step, "badreq") == 0) {
		ret->pb_status = 401;
		ret->pb_body =
		        strdup("{\"code\":\"SIGN_ERROR\",\"message\":\"signature mismatch\"}");
		return;
	}
	if (strcmp(step, "notexist") == 0) {
		ret->pb_status = 404;
		ret->pb_body =
		        strdup("{\"code\":\"ORDER_NOT_EXIST\",\"message\":\"order not exist\"}");
		return;
	}
	state = strcmp(step, "paid") == 0 || strcmp(step, "badsig") == 0 ? "SUCCESS"
	        : strcmp(step, "notpay") == 0                            ? "NOTPAY"
	        : strcmp(step, "closed") == 0                            ? "CLOSED"
	                                                                 : "REFUND";
	snprintf(
	        body, sizeof(body),
	        "{\"amount\":{\"currency\":\"CNY\",\"payer_currency\":\"CNY\",\"payer_total\":%lld,"
	        "\"total\":%lld},\"appid\":\"wxd678efh567hg6787\",\"attach\":\"\",\"bank_type\":"
	        "\"OTHERS\",\"mchid\":\"" T_MCHID
	        "\",\"out_trade_no\":\"%s\",\"payer\":{\"openid\":"
	        "\"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o\"},\"success_time\":\"2025-12-02T20:00:00+08:00\","
	        "\"trade_state\":\"%s\",\"trade_state_desc\":\"-\",\"trade_type\":\"NATIVE\","
	        "\"transaction_id\":\"42000020002025120200000%05lld\"}",
	        (long long)o->fo_minor, (long long)o->fo_minor, o->fo_id, state,
	        (long long)o->fo_minor);
	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	buf_init(&text, 0);
	buf_printf(&text, "%s\n%s\n%s\n", ts, "5K8264ILTKCH16CQ2502SI8ZNMTM67VS", body);
	sig = sign_b64(strcmp(step, "badsig") == 0 ? our_priv : provider_priv, text.buf_data,
	               text.buf_len);
	buf_finish(&text);
	ret->pb_body = strdup(body);
	buf_init(&h, 0);
	buf_printf(&h, "Wechatpay-Timestamp: %s", ts);
	ret->pb_headers[0] = buf_take(&h, NULL);
	ret->pb_headers[1] = strdup("Wechatpay-Nonce: 5K8264ILTKCH16CQ2502SI8ZNMTM67VS");
	buf_init(&h, 0);
	buf_printf(&h, "Wechatpay-Signature: %s", sig);
	ret->pb_headers[2] = buf_take(&h, NULL);
	ret->pb_headers[3] = strdup("Wechatpay-Serial: " T_PLATFORM_SERIAL);
	free(sig);
}

/* ---- the daemon and its fakes ---- */

struct t_env {
	struct daemon te_d;
	struct peer *te_peer;   /* the providers' APIs */
	struct peer *te_notify; /* the shop's backend ([outbound] notify_url) */
	struct peer *te_tls;    /* t_stripe_tls: Stripe's API over HTTPS */
	char te_tls_dir[600];   /* its certificate's directory */
	struct rh_plain *te_plain; /* t_stripe_https: a plain HTTP port */
};

/* 1: env_start gives Stripe's api_base_url as https:// on a plain HTTP
 * port (one that always answers: see rh_plain_start); 2: on a port whose
 * server closes without a byte (rh_silent_start). */
static int t_stripe_https;

/* 1: env_start gives Stripe's api_base_url as a fake of its own serving
 * HTTPS with a self-signed certificate no CA the daemon knows issued. */
static int t_stripe_tls;

/* A daemon whose providers' APIs are the peer's fakes; extra joins the
 * configuration (a [reconcile] section, say). */
static void env_start(struct t_env *e, const char *extra)
{
	char stripe_base[128];
	struct buf ini;

	fake_reset();
	e->te_peer = peer_create();
	e->te_notify = peer_create();
	assert_non_null(e->te_peer);
	assert_non_null(e->te_notify);
	assert_int_equal(peer_handler(e->te_peer, "/v1/events", fake_stripe, fake_done, NULL), 0);
	assert_int_equal(peer_handler(e->te_peer, "/gateway.do", fake_alipay, fake_done, NULL), 0);
	assert_int_equal(peer_handler(e->te_peer, "/v3/pay/transactions/out-trade-no/",
	                              fake_wechatpay, fake_done, NULL),
	                 0);
	snprintf(stripe_base, sizeof(stripe_base), "%s", peer_base(e->te_peer));
	e->te_plain = NULL;
	if (t_stripe_https) {
		e->te_plain = t_stripe_https == 2 ? rh_silent_start() : rh_plain_start();
		assert_non_null(e->te_plain);
		snprintf(stripe_base, sizeof(stripe_base), "https://127.0.0.1:%u",
		         rh_plain_port(e->te_plain));
	}
	e->te_tls = NULL;
	if (t_stripe_tls) {
		const char *tmp = getenv("TMPDIR");

		snprintf(e->te_tls_dir, sizeof(e->te_tls_dir), "%s/idemhook-tls-XXXXXX",
		         tmp != NULL ? tmp : "/tmp");
		assert_non_null(mkdtemp(e->te_tls_dir));
		e->te_tls = peer_create_tls(e->te_tls_dir);
		assert_non_null(e->te_tls);
		assert_int_equal(
		        peer_handler(e->te_tls, "/v1/events", fake_stripe, fake_done, NULL), 0);
		snprintf(stripe_base, sizeof(stripe_base), "%s", peer_base(e->te_tls));
	}
	buf_init(&ini, 0);
	buf_printf(
	        &ini,
	        "[provider stripe]\ntype = stripe\nsecret = " FX_STRIPE_SECRET "\n"
	        "api_key = env:IDEMHOOK_E2E_REC_STRIPE_KEY\napi_base_url = %s\n\n"
	        "[provider alipay]\ntype = alipay\napp_id = " T_APP_ID "\n"
	        "public_key = env:IDEMHOOK_E2E_REC_PROVIDER_PUB\n"
	        "app_private_key = env:IDEMHOOK_E2E_REC_OUR_PRIV\ngateway_url = %s/gateway.do\n\n"
	        "[provider wechatpay]\ntype = wechatpay\n"
	        "platform_key = " T_PLATFORM_SERIAL " env:IDEMHOOK_E2E_REC_PROVIDER_PUB\n"
	        "apiv3_key = env:IDEMHOOK_E2E_REC_APIV3\nmchid = " T_MCHID "\n"
	        "merchant_key = env:IDEMHOOK_E2E_REC_OUR_PRIV\n"
	        "merchant_serial = " T_MERCHANT_SERIAL "\napi_base_url = %s\n\n"
	        "[provider adyen]\ntype = adyen\n"
	        "hmac_key = 44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056\n\n"
	        "[points]\nrate = 1/100\n\n"
	        "[outbound]\nnotify_url = %s/notify\n\n%s\n",
	        stripe_base, peer_base(e->te_peer), peer_base(e->te_peer), peer_base(e->te_notify),
	        extra != NULL ? extra : "");
	assert_int_equal(daemon_init(&e->te_d, ini.buf_data), 0);
	buf_finish(&ini);
	assert_int_equal(daemon_start(&e->te_d), 0);
}

static void env_finish(struct t_env *e)
{
	daemon_finish(&e->te_d);
	peer_destroy(e->te_peer);
	peer_destroy(e->te_notify);
	if (e->te_tls != NULL) {
		char cmd[700];

		peer_destroy(e->te_tls);
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->te_tls_dir);
		assert_int_equal(system(cmd), 0);
	}
	rh_plain_stop(e->te_plain);
	e->te_peer = NULL;
	e->te_notify = NULL;
	e->te_tls = NULL;
	e->te_plain = NULL;
}

#define T_RECONCILE_FAST "[reconcile]\nretries = 2\nretry_base = 50ms\ntimeout = 1s\n"

/* `idemhook reconcile ARGS... --older-than 0`; its stdout in *ret_out. */
static int reconcile(struct t_env *e, char **ret_out, ...)
{
	const char *args[16];
	const char *a;
	size_t n = 0;
	va_list ap;

	args[n++] = "reconcile";
	va_start(ap, ret_out);
	while ((a = va_arg(ap, const char *)) != NULL && n < 12) {
		args[n++] = a;
	}
	va_end(ap);
	args[n++] = "--older-than";
	args[n++] = "0";
	args[n] = NULL;
	return daemon_cli(&e->te_d, 1, args, ret_out);
}

static void order_create(struct t_env *e, int64_t amount, const char *currency, char id[64])
{
	fx_order(&e->te_d, amount, currency, id);
}

static const char *order_status(struct t_env *e, const char *id, char out[32])
{
	char sql[256];
	char *s;

	snprintf(sql, sizeof(sql), "SELECT status FROM orders WHERE id = '%s'", id);
	s = hn_db_dump(e->te_d.dm_db, sql);
	assert_non_null(s);
	snprintf(out, 32, "%s", s);
	out[strcspn(out, "\n")] = '\0';
	free(s);
	return out;
}

static void assert_status(struct t_env *e, const char *id, const char *want)
{
	char got[32];

	assert_string_equal(order_status(e, id, got), want);
}

/* The value of "key": N in the JSON report's "total" (or -1). */
static int64_t report_total(const char *json, const char *key)
{
	cJSON *root = cJSON_Parse(json);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(root, "total"), key);
	int64_t n = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;

	cJSON_Delete(root);
	return n;
}

/* ---- Stripe ---- */

static void
test_stripe_reconcile_pays_the_missing_order_once_counts_the_known_one_and_a_late_callback_replays(
        void **state)
{
	struct t_env e;
	char a[64];
	char b[64];
	char *paid_a;
	char *paid_b;
	char *refund_b;
	char *out = NULL;
	struct hres r;
	struct peer_request pr;
	char *replayed;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 1999, "usd", a);
	order_create(&e, 2500, "usd", b);
	paid_a = fx_stripe_payment("evt_rec_a_paid", a, 1999, "usd");
	paid_b = fx_stripe_payment("evt_rec_b_paid", b, 2500, "usd");
	refund_b = fx_stripe_refund("evt_rec_b_refund", b, 2500, 500, "re_rec_b", "usd");
	/* B's payment came by webhook; A's never did, nor B's refund. */
	assert_int_equal(fx_stripe_send(&e.te_d, paid_b, NULL), 200);
	assert_status(&e, b, "paid");
	fake_event(paid_a);
	fake_event(paid_b);
	fake_event(refund_b);

	assert_int_equal(reconcile(&e, &out, "--json", NULL), 0);
	assert_non_null(out);
	assert_int_equal(report_total(out, "events_found"), 3);
	assert_int_equal(report_total(out, "applied"), 2);
	assert_int_equal(report_total(out, "already_known"), 1);
	assert_int_equal(report_total(out, "failed"), 0);
	free(out);
	assert_status(&e, a, "paid");
	assert_status(&e, b, "partially_refunded");
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s' AND "
	                            "reason = 'award'",
	                            a),
	                 1);
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_rec_a_paid' "
	                            "AND source = 'reconcile' AND effect = 'paid'"),
	                 1);
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_rec_b_paid' "
	                            "AND source = 'callback'"),
	                 1);
	assert_int_equal(
	        e2e_db_int(&e.te_d,
	                   "SELECT COUNT(*) FROM outbox WHERE order_id = '%s' AND effect = "
	                   "'paid'",
	                   a),
	        1);
	/* Two pages: the second after the first page's last (oldest) event. */
	assert_int_equal(peer_count(e.te_peer) >= 2, 1);
	assert_int_equal(peer_request(e.te_peer, 1, &pr), 0);
	assert_string_equal(pr.pq_path, "/v1/events");
	assert_non_null(strstr(pr.pq_query, "starting_after=evt_rec_b_paid"));
	assert_non_null(strstr(pr.pq_query, "types%5B%5D=payment_intent.succeeded"));
	assert_non_null(strstr(pr.pq_query, "created%5Bgte%5D="));
	assert_string_equal(pr.pq_authorization, "Bearer " T_STRIPE_KEY);
	peer_request_finish(&pr);

	/* Stripe's own late delivery of A's payment: the stored answer. */
	assert_int_equal(hn_post_stripe(&e.te_d, "stripe", FX_STRIPE_SECRET, paid_a, &r), 0);
	assert_int_equal(r.hs_status, 200);
	replayed = hres_header(&r, "Idempotent-Replayed");
	assert_non_null(replayed);
	assert_string_equal(replayed, "true");
	free(replayed);
	/* The same payload as listed: a replay, not a mismatch. */
	replayed = hres_header(&r, "Idemhook-Outcome");
	assert_non_null(replayed);
	assert_string_equal(replayed, "replayed");
	free(replayed);
	hres_finish(&r);
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s' AND "
	                            "reason = 'award'",
	                            a),
	                 1);

	/* A second run finds everything known. */
	assert_int_equal(reconcile(&e, &out, "--json", "--provider", "stripe", NULL), 0);
	assert_int_equal(report_total(out, "applied"), 0);
	assert_int_equal(report_total(out, "already_known"), 3);
	free(out);

	{
		static const char *const list[] = {"events", "list", "--source", "reconcile", NULL};

		assert_int_equal(daemon_cli(&e.te_d, 1, list, &out), 0);
		assert_non_null(strstr(out, "SOURCE"));
		assert_non_null(strstr(out, "evt_rec_a_paid"));
		assert_non_null(strstr(out, "evt_rec_b_refund"));
		assert_null(strstr(out, "evt_rec_b_paid"));
		free(out);
	}
	free(paid_a);
	free(paid_b);
	free(refund_b);
	env_finish(&e);
}

/* Every row of the tables a change would touch, as text. */
static char *dump_state(struct t_env *e)
{
	static const char *const sql[] = {
	        "SELECT id, status, refunded_amount, revision FROM orders ORDER BY id",
	        "SELECT scope, idem_key, status FROM idempotency_records ORDER BY scope, idem_key",
	        "SELECT idem_key, outcome, effect, source FROM events ORDER BY id",
	        "SELECT order_id, reason, points FROM points_ledger ORDER BY id",
	        "SELECT order_id, effect FROM outbox ORDER BY id",
	        "SELECT provider, ref, order_id FROM order_refs ORDER BY provider, ref",
	};
	struct buf b;
	size_t i;

	buf_init(&b, 0);
	for (i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		char *rows = hn_db_dump(e->te_d.dm_db, sql[i]);

		assert_non_null(rows);
		buf_printf(&b, "-- %s\n%s\n", sql[i], rows);
		free(rows);
	}
	return buf_take(&b, NULL);
}

static void test_dry_run_reports_what_would_change_and_changes_nothing(void **state)
{
	struct t_env e;
	char a[64];
	char w[64];
	char *paid;
	char *before;
	char *after;
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 1999, "usd", a);
	order_create(&e, 1500, "cny", w);
	paid = fx_stripe_payment("evt_rec_dry", a, 1999, "usd");
	fake_event(paid);
	fake_order(w, 1500, "paid");
	before = dump_state(&e);
	/* A window that holds nothing (--since not before now minus
	 * --older-than 0) is refused, not reported as a run that found
	 * nothing; as a real run, it changes nothing. */
	assert_int_equal(reconcile(&e, &out, "--since", "2999-01-01", NULL), 64);
	assert_true(out == NULL || out[0] == '\0');
	free(out);
	out = NULL;
	assert_int_equal(reconcile(&e, &out, "--dry-run", NULL), 0);
	assert_non_null(strstr(out, "dry run"));
	assert_non_null(strstr(out, "would_apply"));
	assert_non_null(strstr(out, "evt_rec_dry"));
	free(out);
	after = dump_state(&e);
	assert_string_equal(before, after);
	assert_status(&e, a, "pending");
	assert_status(&e, w, "pending");
	free(before);
	free(after);

	assert_int_equal(reconcile(&e, &out, "--json", NULL), 0);
	assert_int_equal(report_total(out, "applied"), 2);
	free(out);
	assert_status(&e, a, "paid");
	assert_status(&e, w, "paid");
	free(paid);
	env_finish(&e);
}

/* ---- Alipay and WeChat Pay ---- */

static void
test_alipay_answers_end_each_order_in_its_state_and_a_wrongly_signed_one_changes_nothing(
        void **state)
{
	struct t_env e;
	char paid[64], wait[64], closed[64], refunded[64], badsig[64], none[64];
	char *out = NULL;
	int rc;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 1999, "cny", paid);
	order_create(&e, 500, "cny", wait);
	order_create(&e, 700, "cny", closed);
	order_create(&e, 800, "cny", refunded);
	order_create(&e, 900, "cny", badsig);
	order_create(&e, 1000, "cny", none);
	fake_order(paid, 1999, "paid");
	fake_order(wait, 500, "wait");
	fake_order(closed, 700, "closed");
	fake_order(refunded, 800, "refunded");
	fake_order(badsig, 900, "badsig");

	rc = reconcile(&e, &out, "--provider", "alipay", NULL);
	/* The wrongly signed answer is a failed question: exit 75. */
	assert_int_equal(rc, 75);
	assert_non_null(strstr(out, "6 orders checked"));
	assert_non_null(strstr(out, "bad_signature"));
	free(out);
	assert_int_equal(fake.fk_bad_requests, 0);
	assert_status(&e, paid, "paid");
	assert_status(&e, wait, "pending");
	assert_status(&e, closed, "cancelled");
	assert_status(&e, refunded, "refunded");
	assert_status(&e, badsig, "pending");
	assert_status(&e, none, "pending");
	/* Refunded after payment: awarded, then taken back, each once. */
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COALESCE(SUM(points), -1) FROM points_ledger WHERE "
	                            "order_id = '%s'",
	                            refunded),
	                 0);
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM events WHERE order_ref = '%s' OR "
	                            "idem_key LIKE '%%badsig%%'",
	                            badsig),
	                 0);
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM events WHERE source = 'reconcile' AND "
	                            "scope = 'alipay'"),
	                 4);
	env_finish(&e);
}

static void
test_wechatpay_answers_end_each_order_in_its_state_and_a_wrongly_signed_one_changes_nothing(
        void **state)
{
	struct t_env e;
	char paid[64], notpay[64], closed[64], refund[64], badsig[64];
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 1999, "cny", paid);
	order_create(&e, 500, "cny", notpay);
	order_create(&e, 700, "cny", closed);
	order_create(&e, 800, "cny", refund);
	order_create(&e, 900, "cny", badsig);
	fake_order(paid, 1999, "paid");
	fake_order(notpay, 500, "notpay");
	fake_order(closed, 700, "closed");
	fake_order(refund, 800, "refund");
	fake_order(badsig, 900, "badsig");

	assert_int_equal(reconcile(&e, &out, "--provider", "wechatpay", NULL), 75);
	assert_non_null(strstr(out, "5 orders checked"));
	assert_non_null(strstr(out, "bad_signature"));
	/* What the query cannot size is said, not guessed. */
	assert_non_null(strstr(out, "trade_state REFUND"));
	free(out);
	assert_int_equal(fake.fk_bad_requests, 0);
	assert_status(&e, paid, "paid");
	assert_status(&e, notpay, "pending");
	assert_status(&e, closed, "cancelled");
	assert_status(&e, refund, "paid");
	assert_status(&e, badsig, "pending");
	env_finish(&e);
}

/* An Alipay trade_status_sync notification signed by the provider's key,
 * for the trade the fake answers about an order of minor units. */
static char *alipay_notification(const char *notify_id, const char *order, const char *total,
                                 int64_t minor)
{
	const char *k[] = {"app_id",      "charset",      "notify_id", "notify_time",
	                   "notify_type", "out_trade_no", "sign_type", "total_amount",
	                   "trade_no",    "trade_status", "version"};
	char trade_no[40];
	const char *v[11];
	struct buf text;
	struct buf body;
	char *sig;
	size_t i;

	snprintf(trade_no, sizeof(trade_no), "2025120222%018zu", (size_t)minor);
	v[0] = T_APP_ID;
	v[1] = "utf-8";
	v[2] = notify_id;
	v[3] = "2025-12-02 20:00:01";
	v[4] = "trade_status_sync";
	v[5] = order;
	v[6] = "RSA2";
	v[7] = total;
	v[8] = trade_no;
	v[9] = "TRADE_SUCCESS";
	v[10] = "1.0";
	/* Sorted already; sign and sign_type are not signed. */
	buf_init(&text, 0);
	buf_init(&body, 0);
	for (i = 0; i < 11; i++) {
		if (strcmp(k[i], "sign_type") != 0) {
			buf_printf(&text, "%s%s=%s", text.buf_len > 0 ? "&" : "", k[i], v[i]);
		}
		buf_printf(&body, "%s=", k[i]);
		for (const char *p = v[i]; *p != '\0'; p++) {
			if (*p == ' ') {
				buf_puts(&body, "+");
			} else if (*p == ':' || *p == '-' || *p == '_' || *p == '.' ||
			           (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
			           (*p >= 'A' && *p <= 'Z')) {
				buf_append(&body, p, 1);
			} else {
				buf_printf(&body, "%%%02X", (unsigned char)*p);
			}
		}
		buf_puts(&body, "&");
	}
	sig = sign_b64(provider_priv, text.buf_data, text.buf_len);
	buf_puts(&body, "sign=");
	for (const char *p = sig; *p != '\0'; p++) {
		if (*p == '+' || *p == '/' || *p == '=') {
			buf_printf(&body, "%%%02X", (unsigned char)*p);
		} else {
			buf_append(&body, p, 1);
		}
	}
	free(sig);
	buf_finish(&text);
	return buf_take(&body, NULL);
}

static void test_a_late_alipay_notification_after_reconciliation_changes_nothing_more(void **state)
{
	static const char *const headers[] = {
	        "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL};
	struct t_env e;
	char id[64];
	char *out = NULL;
	char *form;
	struct hres r;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 1999, "cny", id);
	fake_order(id, 1999, "paid");
	assert_int_equal(reconcile(&e, &out, "--provider", "alipay", NULL), 0);
	free(out);
	assert_status(&e, id, "paid");
	/* No notify_id in a query answer: the real one is a new key, and the
	 * order's guards keep its effect single. */
	form = alipay_notification("2025120200222105938056380529774436", id, "19.99", 1999);
	assert_int_equal(e2e_post(&e.te_d, "alipay", headers, form, &r), 0);
	assert_int_equal(r.hs_status, 200);
	assert_string_equal(r.hs_body, "success");
	hres_finish(&r);
	free(form);
	assert_status(&e, id, "paid");
	assert_int_equal(
	        e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM points_ledger WHERE order_id = '%s'", id),
	        1);
	assert_int_equal(
	        e2e_db_int(&e.te_d,
	                   "SELECT COUNT(*) FROM events WHERE order_ref = '%s' AND effect = "
	                   "'paid'",
	                   id),
	        1);
	assert_int_equal(
	        e2e_db_int(&e.te_d,
	                   "SELECT COUNT(*) FROM events WHERE order_ref = '%s' AND effect = "
	                   "'noop' AND source = 'callback'",
	                   id),
	        1);
	assert_int_equal(
	        e2e_db_int(&e.te_d,
	                   "SELECT COUNT(*) FROM outbox WHERE order_id = '%s' AND effect = "
	                   "'paid'",
	                   id),
	        1);
	env_finish(&e);
}

/* ---- failures ---- */

static size_t requests_for(struct t_env *e, const char *order)
{
	size_t n = peer_count(e->te_peer);
	size_t hits = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		struct peer_request pr;

		if (peer_request(e->te_peer, i, &pr) == 0) {
			char *biz = form_value(pr.pq_body, "biz_content");

			hits += biz != NULL && strstr(biz, order) != NULL;
			free(biz);
			peer_request_finish(&pr);
		}
	}
	return hits;
}

static void
test_provider_errors_rate_limits_and_timeouts_are_retried_then_reported_nothing_half_applied(
        void **state)
{
	struct t_env e;
	char flaky[64], limited[64], busy[64], hung[64], down[64];
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 1000, "cny", flaky);
	order_create(&e, 1100, "cny", limited);
	order_create(&e, 1200, "cny", busy);
	order_create(&e, 1300, "cny", hung);
	order_create(&e, 1400, "cny", down);
	fake_order(flaky, 1000, "500 500 paid");
	fake_order(limited, 1100, "429 paid");
	fake_order(busy, 1200, "busy refunded");
	fake_order(hung, 1300, "hang");
	fake_order(down, 1400, "500");

	assert_int_equal(reconcile(&e, &out, "--provider", "alipay", NULL), 75);
	assert_non_null(strstr(out, "5 orders checked"));
	/* busy, then paid and fully refunded: two events. */
	assert_non_null(strstr(out, "4 applied"));
	assert_non_null(strstr(out, "2 failed"));
	assert_non_null(strstr(out, "gave up after 3 attempts"));
	free(out);
	assert_status(&e, flaky, "paid");
	assert_status(&e, limited, "paid");
	assert_status(&e, busy, "refunded");
	assert_status(&e, hung, "pending");
	assert_status(&e, down, "pending");
	/* Each question: the first attempt and [reconcile] retries = 2 more. */
	assert_int_equal(requests_for(&e, flaky), 3);
	assert_int_equal(requests_for(&e, limited), 2);
	assert_int_equal(requests_for(&e, hung), 3);
	assert_int_equal(requests_for(&e, down), 3);
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM events WHERE order_ref IN ('%s', '%s')",
	                            hung, down),
	                 0);
	env_finish(&e);
}

static void test_an_answer_the_store_cannot_take_is_applied_whole_or_not_at_all(void **state)
{
	struct t_env e;
	struct hn_sqlite lock;
	char id[64];
	char *out = NULL;

	(void)state;
	env_start(&e, "[store]\nbusy_timeout_ms = 200\n\n" T_RECONCILE_FAST);
	order_create(&e, 800, "cny", id);
	/* Paid, then fully refunded: two events of one answer. */
	fake_order(id, 800, "refunded");
	assert_int_equal(hn_sqlite_start(&lock, e.te_d.dm_db, "BEGIN IMMEDIATE;"), 0);
	assert_int_equal(reconcile(&e, &out, "--provider", "alipay", NULL), 75);
	assert_non_null(strstr(out, "store_unavailable"));
	free(out);
	assert_int_equal(hn_sqlite_finish(&lock, "ROLLBACK;"), 0);
	/* Neither the payment nor the refund: not paid-but-not-refunded. */
	assert_status(&e, id, "pending");
	assert_int_equal(
	        e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM events WHERE order_ref = '%s'", id), 0);
	assert_int_equal(reconcile(&e, &out, "--provider", "alipay", NULL), 0);
	free(out);
	assert_status(&e, id, "refunded");
	env_finish(&e);
}

/* ---- racing the callbacks ---- */

/* Waits until the fakes have begun answering n requests. */
static void fake_wait_started(size_t n)
{
	int i;

	for (i = 0; i < 2000; i++) {
		size_t started;

		pthread_mutex_lock(&fake.fk_lock);
		started = fake.fk_started;
		pthread_mutex_unlock(&fake.fk_lock);
		if (started >= n) {
			return;
		}
		usleep(5 * 1000);
	}
	fail_msg("the fakes got %zu requests, not %zu", fake.fk_started, n);
}

struct t_post {
	struct t_env *tp_env;
	const char *tp_body;
	unsigned tp_after_ms;
	long tp_status;
};

static void *race_post_stripe(void *arg)
{
	struct t_post *t = arg;
	struct hres r;

	usleep(t->tp_after_ms * 1000);
	if (hn_post_stripe(&t->tp_env->te_d, "stripe", FX_STRIPE_SECRET, t->tp_body, &r) == 0) {
		t->tp_status = r.hs_status;
		hres_finish(&r);
	}
	return NULL;
}

struct t_race {
	struct t_env *tr_env;
	const char *tr_provider;
	int tr_rc;
	char *tr_out;
};

static void *race_reconcile(void *arg)
{
	struct t_race *t = arg;

	t->tr_rc = reconcile(t->tr_env, &t->tr_out, "--provider", t->tr_provider, NULL);
	return NULL;
}

#define T_RACE 8

static void test_reconcile_racing_the_same_callbacks_changes_each_order_exactly_once(void **state)
{
	static const char *const form_headers[] = {
	        "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL};
	struct t_env e;
	char stripe_ids[T_RACE][64];
	char alipay_ids[T_RACE][64];
	char *events[T_RACE];
	struct t_post posts[T_RACE];
	pthread_t post_th[T_RACE];
	struct t_race t;
	pthread_t th;
	size_t i;

	(void)state;
	memset(posts, 0, sizeof(posts));
	env_start(&e, T_RECONCILE_FAST);
	for (i = 0; i < T_RACE; i++) {
		char evt[64];
		char oid[64];

		order_create(&e, 1000 + (int64_t)i, "usd", stripe_ids[i]);
		order_create(&e, 2000 + (int64_t)i, "cny", alipay_ids[i]);
		snprintf(evt, sizeof(evt), "evt_race_%zu", i);
		snprintf(oid, sizeof(oid), "%.40s", stripe_ids[i]);
		events[i] = fx_stripe_payment(evt, oid, 1000 + (int64_t)i, "usd");
		fake_event(events[i]);
		fake_order(alipay_ids[i], 2000 + (int64_t)i, "paid");
	}
	/* Slow answers, and callbacks sent at spread times around each one, so
	 * that the two paths meet: who wins an order varies, nothing else. */
	fake.fk_delay_ms = 60;

	/* Stripe: the same event ids by both paths, posted while the last page
	 * is answered and its events are fed through the pipeline. */
	memset(&t, 0, sizeof(t));
	t.tr_env = &e;
	t.tr_provider = "stripe";
	assert_int_equal(pthread_create(&th, NULL, race_reconcile, &t), 0);
	fake_wait_started(T_RACE / 2);
	for (i = 0; i < T_RACE; i++) {
		posts[i].tp_env = &e;
		posts[i].tp_body = events[i];
		posts[i].tp_after_ms = (unsigned)(i % 4) * 30;
		assert_int_equal(pthread_create(&post_th[i], NULL, race_post_stripe, &posts[i]), 0);
	}
	for (i = 0; i < T_RACE; i++) {
		pthread_join(post_th[i], NULL);
		assert_int_equal(posts[i].tp_status, 200);
	}
	pthread_join(th, NULL);
	assert_int_equal(t.tr_rc, 0);
	free(t.tr_out);

	/* Alipay: the query's key and the notification's differ; each
	 * notification is sent while its order's query is being answered. */
	memset(&t, 0, sizeof(t));
	t.tr_env = &e;
	t.tr_provider = "alipay";
	assert_int_equal(pthread_create(&th, NULL, race_reconcile, &t), 0);
	for (i = 0; i < T_RACE; i++) {
		char notify_id[64];
		char total[16];
		char *form;
		struct hres r;

		snprintf(notify_id, sizeof(notify_id), "2025120200222105938%013zu", i);
		snprintf(total, sizeof(total), "%d.%02d", (int)((2000 + i) / 100),
		         (int)((2000 + i) % 100));
		fake_wait_started(T_RACE / 2 + 1 + i);
		usleep((unsigned)(i % 3) * 40 * 1000);
		form = alipay_notification(notify_id, alipay_ids[i], total, 2000 + (int64_t)i);
		assert_int_equal(e2e_post(&e.te_d, "alipay", form_headers, form, &r), 0);
		assert_int_equal(r.hs_status, 200);
		hres_finish(&r);
		free(form);
	}
	pthread_join(th, NULL);
	assert_int_equal(t.tr_rc, 0);
	free(t.tr_out);
	printf("race: reconciliation applied %lld of %d Stripe and %lld of %d Alipay payments "
	       "first\n",
	       (long long)e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM events WHERE scope = 'stripe' "
	                                      "AND source = 'reconcile'"),
	       T_RACE,
	       (long long)e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM events WHERE scope = 'alipay' "
	                                      "AND source = 'reconcile' AND effect = 'paid'"),
	       T_RACE);

	for (i = 0; i < T_RACE; i++) {
		const char *ids[2] = {stripe_ids[i], alipay_ids[i]};
		size_t j;

		for (j = 0; j < 2; j++) {
			assert_status(&e, ids[j], "paid");
			assert_int_equal(
			        e2e_db_int(&e.te_d,
			                   "SELECT COUNT(*) FROM points_ledger WHERE order_id = "
			                   "'%s'",
			                   ids[j]),
			        1);
			assert_int_equal(
			        e2e_db_int(&e.te_d,
			                   "SELECT COUNT(*) FROM events WHERE order_ref = '%s' "
			                   "AND effect = 'paid'",
			                   ids[j]),
			        1);
			assert_int_equal(
			        e2e_db_int(&e.te_d,
			                   "SELECT COUNT(*) FROM outbox WHERE order_id = '%s' AND "
			                   "effect = 'paid'",
			                   ids[j]),
			        1);
			assert_int_equal(e2e_db_int(&e.te_d,
			                            "SELECT revision FROM orders WHERE id = '%s'",
			                            ids[j]),
			                 1);
		}
		free(events[i]);
	}
	env_finish(&e);
}

/* ---- the daemon's worker ---- */

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct buf b;
	char chunk[4096];
	size_t n;

	if (f == NULL) {
		return NULL;
	}
	buf_init(&b, 0);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		buf_append(&b, chunk, n);
	}
	fclose(f);
	return buf_take(&b, NULL);
}

static void test_the_daemon_reconciles_every_interval_once_a_reload_turns_it_on(void **state)
{
	struct t_env e;
	char id[64];
	char url[128];
	char *paid;
	char *ini;
	char *log;
	char *at;
	struct hres r;
	int i;

	(void)state;
	env_start(&e, "[reconcile]\ninterval = 0\nolder_than = 0\n");
	order_create(&e, 1999, "usd", id);
	paid = fx_stripe_payment("evt_rec_worker", id, 1999, "usd");
	fake_event(paid);
	ini = read_file(e.te_d.dm_config);
	assert_non_null(ini);
	at = strstr(ini, "interval = 0");
	assert_non_null(at);
	at[strlen("interval = ")] = '1';
	assert_int_equal(daemon_write_file(&e.te_d, "idemhook.ini", ini), 0);
	free(ini);
	assert_int_equal(daemon_signal(&e.te_d, SIGHUP), 0);
	for (i = 0; i < 200; i++) {
		char got[32];

		if (strcmp(order_status(&e, id, got), "paid") == 0) {
			break;
		}
		usleep(100 * 1000);
	}
	assert_status(&e, id, "paid");
	assert_int_equal(e2e_db_int(&e.te_d,
	                            "SELECT COUNT(*) FROM events WHERE idem_key = 'evt_rec_worker' "
	                            "AND source = 'reconcile'"),
	                 1);
	log = read_file(e.te_d.dm_log);
	assert_non_null(strstr(log, "asking the providers every 1 s"));
	assert_non_null(strstr(log, "key=\"evt_rec_worker\""));
	assert_non_null(strstr(log, "effect=paid source=reconcile"));
	free(log);
	snprintf(url, sizeof(url), "%s/metrics", e.te_d.dm_admin_base);
	assert_int_equal(hn_http("GET", url, NULL, NULL, 0, &r), 0);
	assert_non_null(strstr(r.hs_body, "idemhook_reconcile_events_total{provider=\"stripe\","
	                                  "result=\"applied\"} 1\n"));
	assert_non_null(strstr(r.hs_body, "idemhook_reconcile_runs_total{result=\"success\"}"));
	hres_finish(&r);
	free(paid);
	env_finish(&e);
}

static void test_instances_that_cannot_be_asked_say_what_to_do_instead(void **state)
{
	struct t_env e;
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	assert_int_equal(reconcile(&e, &out, NULL), 0);
	assert_non_null(strstr(out, "adyen (adyen): not asked: Adyen has no API"));
	assert_non_null(strstr(out, "Customer Area"));
	assert_non_null(strstr(out, "stripe (stripe): 1 pages listed"));
	free(out);
	assert_int_equal(reconcile(&e, &out, "--provider", "nope", NULL), 64);
	free(out);
	env_finish(&e);
}

static int group_setup(void **state)
{
	(void)state;
	if (crypto_rsa_generate(2048, &provider_priv, &provider_pub) < 0 ||
	    crypto_rsa_generate(2048, &our_priv, &our_pub) < 0) {
		return -1;
	}
	setenv("IDEMHOOK_E2E_REC_PROVIDER_PUB", provider_pub, 1);
	setenv("IDEMHOOK_E2E_REC_OUR_PRIV", our_priv, 1);
	setenv("IDEMHOOK_E2E_REC_APIV3", "0123456789abcdef0123456789abcdef", 1);
	setenv("IDEMHOOK_E2E_REC_STRIPE_KEY", T_STRIPE_KEY, 1);
	pthread_mutex_init(&fake.fk_lock, NULL);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	fake_reset();
	free(provider_priv);
	free(provider_pub);
	free(our_priv);
	free(our_pub);
	return 0;
}

/* ---- a long listing: one page in memory, and bounded per run ---- */

/* The "stripe" instance's object in the report, as an integer field. */
static int64_t stripe_field(const char *json, const char *key)
{
	cJSON *root = cJSON_Parse(json);
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "providers");
	const cJSON *o;
	int64_t n = -1;

	cJSON_ArrayForEach(o, list)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "provider");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

		if (cJSON_IsString(name) && strcmp(name->valuestring, "stripe") == 0 &&
		    cJSON_IsNumber(v)) {
			n = (int64_t)v->valuedouble;
		}
	}
	cJSON_Delete(root);
	return n;
}

/* 300 payment events for orders this shop never made, 10 a page. */
static void many_events(void)
{
	char id[64];
	char order[64];
	size_t i;

	pthread_mutex_lock(&fake.fk_lock);
	fake.fk_page = 10;
	pthread_mutex_unlock(&fake.fk_lock);
	for (i = 0; i < 300; i++) {
		char *ev;

		snprintf(id, sizeof(id), "evt_long_%03zu", i);
		snprintf(order, sizeof(order), "ord_long%014zu", i);
		ev = fx_stripe_payment(id, order, 100 + (int64_t)i, "usd");
		fake_event(ev);
		free(ev);
	}
}

static void test_a_long_listing_is_applied_page_by_page_holding_one_page_at_a_time(void **state)
{
	struct t_env e;
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	many_events();
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 0);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "pages"), 30);
	assert_int_equal(stripe_field(out, "events_found"), 300);
	assert_int_equal(stripe_field(out, "failed"), 0);
	/* Each page went through the pipeline before the next was asked for:
	 * never more than one page's events held, whatever the listing's
	 * length (before, all 300 were held until the last page came). */
	assert_int_equal(stripe_field(out, "events_held_max"), 10);
	assert_true(stripe_field(out, "bytes") > 300 * 200);
	free(out);
	assert_int_equal(e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM idempotency_records WHERE "
	                                     "idem_key LIKE 'evt_long_%%'"),
	                 300);
	env_finish(&e);
}

static void test_a_listing_past_max_pages_or_max_bytes_is_cut_and_says_so(void **state)
{
	struct t_env e;
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST "max_pages = 5\n");
	many_events();
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "pages"), 5);
	assert_int_equal(stripe_field(out, "events_found"), 50);
	assert_int_equal(stripe_field(out, "failed"), 1);
	assert_non_null(strstr(out, "too_many_pages: the listing was cut after 5 pages"));
	free(out);
	env_finish(&e);

	env_start(&e, T_RECONCILE_FAST "max_bytes = 8k\n");
	many_events();
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
	assert_non_null(out);
	/* A page of 10 events is over 4 KiB: the third is not asked for. */
	assert_int_equal(stripe_field(out, "pages"), 2);
	assert_true(stripe_field(out, "bytes") >= 8 * 1024);
	assert_non_null(strstr(out, "max_bytes 8192"));
	free(out);
	env_finish(&e);
}

/* bytes counts the listing's pages, as max_bytes bounds them: a 503 with
 * a large body, retried, is one more request, not bytes of the listing. */
static void test_an_error_answers_body_is_not_counted_as_listing_bytes(void **state)
{
	struct peer_behaviour busy;
	struct t_env e;
	char *out = NULL;
	int64_t bytes;
	int64_t requests;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	many_events();
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 0);
	bytes = stripe_field(out, "bytes");
	requests = stripe_field(out, "requests");
	free(out);
	assert_true(bytes > 300 * 200);
	/* The same listing again, its first page answered 503 first. */
	memset(&busy, 0, sizeof(busy));
	busy.pb_action = PEER_HUGE;
	busy.pb_status = 503;
	busy.pb_size = 100000;
	assert_int_equal(peer_script(e.te_peer, "/v1/events", &busy), 0);
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 0);
	assert_int_equal(stripe_field(out, "pages"), 30);
	assert_int_equal(stripe_field(out, "requests"), requests + 1);
	assert_int_equal(stripe_field(out, "bytes"), bytes);
	free(out);
	env_finish(&e);
}

static void
test_a_listing_that_says_has_more_but_does_not_go_on_fails_rather_than_ends(void **state)
{
	struct t_env e;
	char a[64];
	char b[64];
	char c[64];
	char *ev;
	char *out = NULL;

	(void)state;
	env_start(&e, T_RECONCILE_FAST);
	order_create(&e, 100, "usd", a);
	order_create(&e, 200, "usd", b);
	order_create(&e, 300, "usd", c);
	ev = fx_stripe_payment("evt_more_c", c, 300, "usd");
	fake_event(ev);
	free(ev);
	ev = fx_stripe_payment("evt_more_b", b, 200, "usd");
	fake_event(ev);
	free(ev);
	ev = fx_stripe_payment("evt_more_a", a, 100, "usd");
	fake_event(ev);
	free(ev);
	/* Every page is the first one again, has_more true: C is never seen. */
	pthread_mutex_lock(&fake.fk_lock);
	fake.fk_ignore_cursor = 1;
	pthread_mutex_unlock(&fake.fk_lock);
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "pages"), 1);
	assert_int_equal(stripe_field(out, "applied"), 2);
	assert_int_equal(stripe_field(out, "failed"), 1);
	assert_non_null(strstr(out, "has_more but does not go past evt_more_b"));
	free(out);
	assert_status(&e, c, "pending");
	env_finish(&e);
}

/* A rate limit that asks for more than 2 minutes (seconds, or an HTTP-date
 * as far off) ends the listing for this run at once, with a line that says
 * how long the provider asked for: the run is not held for minutes, the
 * pages read before it are applied, and the next run lists again. */
static void test_a_rate_limit_asking_for_minutes_ends_the_listing_at_once_and_says_so(void **state)
{
	static const char *const waits[] = {"600", "Wed, 01 Jan 2098 00:00:00 GMT"};
	size_t w;

	(void)state;
	for (w = 0; w < 2; w++) {
		struct timespec t0;
		struct timespec t1;
		struct t_env e;
		char *out = NULL;
		int64_t ms;

		env_start(&e, "[reconcile]\nretries = 3\nretry_base = 50ms\ntimeout = 5s\n");
		many_events();
		pthread_mutex_lock(&fake.fk_lock);
		fake.fk_limit_later_pages = waits[w];
		pthread_mutex_unlock(&fake.fk_lock);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		assert_non_null(out);
		/* One 429 asked for, not retries = 3 more, and no wait. */
		assert_true(ms < 20000);
		assert_int_equal(stripe_field(out, "pages"), 1);
		assert_int_equal(stripe_field(out, "requests"), 2);
		assert_int_equal(stripe_field(out, "events_found"), 10);
		assert_int_equal(stripe_field(out, "failed"), 1);
		assert_non_null(strstr(out, "rate_limited"));
		assert_non_null(strstr(out, "HTTP 429, Retry-After: "));
		assert_non_null(strstr(out, " s; the next run asks again"));
		if (w == 0) {
			assert_non_null(strstr(out, "the provider asks to wait 600 s"));
		}
		free(out);
		/* The first page's events went through. */
		assert_int_equal(e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM idempotency_records"
		                                     " WHERE idem_key LIKE 'evt_long_%%'"),
		                 10);
		env_finish(&e);
	}
}

/* Stripe's api_base_url says https:// but its port speaks plain HTTP: the
 * instance fails at once (no retries: each would fail alike) with a reason
 * and a detail that say what to change. */
static void test_an_https_api_address_on_a_plain_port_fails_at_once_saying_use_http(void **state)
{
	struct t_env e;
	char *out = NULL;

	(void)state;
	t_stripe_https = 1;
	env_start(&e, "[reconcile]\nretries = 3\nretry_base = 50ms\ntimeout = 5s\n");
	t_stripe_https = 0;
	many_events();
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "requests"), 1);
	assert_int_equal(rh_plain_count(e.te_plain), 1);
	assert_int_equal(stripe_field(out, "failed"), 1);
	assert_non_null(strstr(out, "not_tls"));
	assert_non_null(strstr(out, "the server does not speak TLS: use http://"));
	free(out);
	assert_int_equal(e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM idempotency_records"
	                                     " WHERE idem_key LIKE 'evt_long_%%'"),
	                 0);
	env_finish(&e);
}

/* Stripe's api_base_url says https:// and its server closes during the
 * handshake without a byte (as libmicrohttpd does on a plain port for
 * some ClientHellos): nothing sure, so retried as no answer (retries = 2:
 * three requests); the detail says what the close may mean. */
static void
test_an_https_api_address_that_closes_in_the_handshake_is_retried_with_a_hint(void **state)
{
	struct t_env e;
	char *out = NULL;

	(void)state;
	t_stripe_https = 2;
	env_start(&e, "[reconcile]\nretries = 2\nretry_base = 50ms\ntimeout = 5s\n");
	t_stripe_https = 0;
	many_events();
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "requests"), 3);
	assert_int_equal(rh_plain_count(e.te_plain), 3);
	assert_int_equal(stripe_field(out, "failed"), 1);
	if (strstr(out, "unreachable") == NULL ||
	    strstr(out, "no answer: the server closed the connection during the TLS handshake; if"
	                " this port speaks plain HTTP, use http:// (") == NULL) {
		fail_msg("reconcile said: %s", out);
	}
	assert_null(strstr(out, "not_tls"));
	free(out);
	env_finish(&e);
}

/* Stripe's API answers over HTTPS with a certificate no CA the daemon
 * knows issued: the question fails at once (one request, where retries
 * = 3 would make four: another attempt fails alike) with reason
 * tls_verify and what to set; once [client] ca_file names the CA, the
 * next run asks and applies. */
static void
test_an_api_certificate_that_fails_verification_fails_at_once_saying_what_to_set(void **state)
{
	struct t_env e;
	char *out = NULL;
	char id[64];
	char order[64];
	size_t i;

	(void)state;
	t_stripe_tls = 1;
	env_start(&e, "[reconcile]\nretries = 3\nretry_base = 50ms\ntimeout = 5s\n");
	t_stripe_tls = 0;
	for (i = 0; i < 3; i++) {
		char *ev;

		snprintf(id, sizeof(id), "evt_tls_%03zu", i);
		snprintf(order, sizeof(order), "ord_tls%015zu", i);
		ev = fx_stripe_payment(id, order, 100 + (int64_t)i, "usd");
		fake_event(ev);
		free(ev);
	}
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 75);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "requests"), 1);
	assert_int_equal(stripe_field(out, "failed"), 1);
	assert_non_null(strstr(out, "tls_verify"));
	assert_non_null(strstr(out, "the provider API's certificate is not trusted (SSL certificate"
	                            " problem: self-signed certificate): set [client] ca_file to"
	                            " the CA that issued it"));
	free(out);
	out = NULL;
	assert_int_equal(peer_count(e.te_tls), 0);
	assert_int_equal(e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM idempotency_records"
	                                     " WHERE idem_key LIKE 'evt_tls_%%'"),
	                 0);

	assert_int_equal(daemon_append_config(&e.te_d, "\n[client]\nca_file = "), 0);
	assert_int_equal(daemon_append_config(&e.te_d, peer_ca(e.te_tls)), 0);
	assert_int_equal(daemon_append_config(&e.te_d, "\n"), 0);
	assert_int_equal(reconcile(&e, &out, "--provider", "stripe", "--json", NULL), 0);
	assert_non_null(out);
	assert_int_equal(stripe_field(out, "failed"), 0);
	free(out);
	assert_true(peer_count(e.te_tls) >= 1);
	assert_int_equal(e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM idempotency_records"
	                                     " WHERE idem_key LIKE 'evt_tls_%%'"),
	                 3);
	env_finish(&e);
}

/* Takes tail, the text daemon_append_config last added, off d's
 * configuration again. Returns 0 or -1. */
static int daemon_drop_config_tail(struct daemon *d, const char *tail)
{
	char *text = hn_read_file(d->dm_config);
	size_t len = text != NULL ? strlen(text) : 0;
	size_t tail_len = strlen(tail);
	FILE *f;
	int rc = -1;

	if (text == NULL || len < tail_len || strcmp(text + len - tail_len, tail) != 0) {
		goto done;
	}
	f = fopen(d->dm_config, "w");
	if (f == NULL) {
		goto done;
	}
	rc = fwrite(text, 1, len - tail_len, f) == len - tail_len ? 0 : -1;
	if (fclose(f) != 0) {
		rc = -1;
	}
done:
	free(text);
	return rc;
}

/* [client] ca_file names a file that holds no certificate, or none at
 * all: reconcile refuses it up front, as serve does, with the
 * configuration's exit status (78) and the file named, before any
 * question is asked or anything is stored. */
static void test_a_ca_file_that_cannot_be_used_is_refused_before_any_question(void **state)
{
	static const char *const files[] = {"bad.pem", "missing.pem"};
	const char *args[] = {"reconcile",    "--provider", "stripe", "--json",
	                      "--older-than", "0",          NULL};
	struct t_env e;
	char *out = NULL;
	char *err = NULL;
	char bad[700];
	char want[1024];
	char ini[800];
	size_t i;

	(void)state;
	t_stripe_tls = 1;
	env_start(&e, "[reconcile]\nretries = 3\nretry_base = 50ms\ntimeout = 5s\n");
	t_stripe_tls = 0;
	many_events();
	assert_int_equal(daemon_write_file(&e.te_d, "bad.pem", "not a certificate\n"), 0);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(bad, sizeof(bad), "%s/%s", e.te_d.dm_dir, files[i]);
		snprintf(ini, sizeof(ini), "\n[client]\nca_file = %s\n", bad);
		assert_int_equal(daemon_append_config(&e.te_d, ini), 0);
		assert_int_equal(daemon_cli_err(&e.te_d, 1, args, &out, &err), 78);
		snprintf(want, sizeof(want), "[client] ca_file: %s %s",
		         i == 0 ? "the CA file" : "cannot read", bad);
		if (err == NULL || strstr(err, want) == NULL ||
		    strstr(err, i == 0 ? "cannot be used: it holds no PEM certificate"
		                       : "No such file or directory") == NULL) {
			fail_msg("reconcile said: %s", err != NULL ? err : "(nothing)");
		}
		assert_true(out == NULL || out[0] == '\0');
		free(out);
		free(err);
		out = NULL;
		err = NULL;
		assert_int_equal(daemon_drop_config_tail(&e.te_d, ini), 0);
	}
	assert_int_equal(peer_count(e.te_tls), 0);
	assert_int_equal(e2e_db_int(&e.te_d, "SELECT COUNT(*) FROM idempotency_records"
	                                     " WHERE idem_key LIKE 'evt_long_%%'"),
	                 0);
	env_finish(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_stripe_reconcile_pays_the_missing_order_once_counts_the_known_one_and_a_late_callback_replays),
	        cmocka_unit_test(test_dry_run_reports_what_would_change_and_changes_nothing),
	        cmocka_unit_test(
	                test_alipay_answers_end_each_order_in_its_state_and_a_wrongly_signed_one_changes_nothing),
	        cmocka_unit_test(
	                test_wechatpay_answers_end_each_order_in_its_state_and_a_wrongly_signed_one_changes_nothing),
	        cmocka_unit_test(
	                test_a_late_alipay_notification_after_reconciliation_changes_nothing_more),
	        cmocka_unit_test(
	                test_provider_errors_rate_limits_and_timeouts_are_retried_then_reported_nothing_half_applied),
	        cmocka_unit_test(
	                test_an_answer_the_store_cannot_take_is_applied_whole_or_not_at_all),
	        cmocka_unit_test(
	                test_reconcile_racing_the_same_callbacks_changes_each_order_exactly_once),
	        cmocka_unit_test(
	                test_the_daemon_reconciles_every_interval_once_a_reload_turns_it_on),
	        cmocka_unit_test(test_instances_that_cannot_be_asked_say_what_to_do_instead),
	        cmocka_unit_test(
	                test_a_long_listing_is_applied_page_by_page_holding_one_page_at_a_time),
	        cmocka_unit_test(test_a_listing_past_max_pages_or_max_bytes_is_cut_and_says_so),
	        cmocka_unit_test(test_an_error_answers_body_is_not_counted_as_listing_bytes),
	        cmocka_unit_test(
	                test_a_listing_that_says_has_more_but_does_not_go_on_fails_rather_than_ends),
	        cmocka_unit_test(
	                test_a_rate_limit_asking_for_minutes_ends_the_listing_at_once_and_says_so),
	        cmocka_unit_test(
	                test_an_https_api_address_on_a_plain_port_fails_at_once_saying_use_http),
	        cmocka_unit_test(
	                test_an_https_api_address_that_closes_in_the_handshake_is_retried_with_a_hint),
	        cmocka_unit_test(
	                test_an_api_certificate_that_fails_verification_fails_at_once_saying_what_to_set),
	        cmocka_unit_test(test_a_ca_file_that_cannot_be_used_is_refused_before_any_question),
	};

	/* IDEMHOOK_TEST_FILTER=test_a_* runs only the tests it matches. */
	if (getenv("IDEMHOOK_TEST_FILTER") != NULL) {
		cmocka_set_test_filter(getenv("IDEMHOOK_TEST_FILTER"));
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
