/* fixtures.c: the setup blocks tests share (fixtures.h). */
#include <ctype.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "event.h"
#include "fixtures.h"
#include "orders.h"
#include "store.h"

#define FX_OBJECT_MAX 1536 /* bytes of an event's data.object */

/* Gives d's config the printf-formatted text through put (daemon_init,
 * daemon_append_config); asserts. */
static void fx_config_write(struct daemon *d, int (*put)(struct daemon *, const char *),
                            const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

static void fx_config_write(struct daemon *d, int (*put)(struct daemon *, const char *),
                            const char *fmt, va_list ap)
{
	char *text = NULL;

	assert_true(vasprintf(&text, fmt, ap) >= 0);
	assert_int_equal(put(d, text), 0);
	free(text);
}

void fx_daemon_start(struct daemon *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fx_config_write(d, daemon_init, fmt, ap);
	va_end(ap);
	assert_int_equal(daemon_start(d), 0);
}

void fx_order(struct daemon *d, int64_t amount, const char *currency, char ret_id[64])
{
	assert_int_equal(hn_order_create(d, amount, currency, ret_id), 0);
}

int64_t fx_db_int(struct daemon *d, const char *fmt, ...)
{
	char sql[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(sql));
	return hn_db_int(d->dm_db, sql);
}

void fx_append_config(struct daemon *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fx_config_write(d, daemon_append_config, fmt, ap);
	va_end(ap);
}

/* The audit rows a failed fx_assert_audit shows, at most. */
#define FX_AUDIT_SHOWN 50

void fx_cli_says_at(const char *file, int line, struct daemon *d, const char *const *args,
                    int want_rc, const char *said)
{
	char *out = NULL;
	int rc = daemon_cli(d, 1, args, &out);

	if (rc != want_rc || out == NULL || strstr(out, said) == NULL) {
		print_error("%s %s: exit %d (want %d), no \"%s\" in what it printed:\n%s\n",
		            args[0], args[1] != NULL ? args[1] : "", rc, want_rc, said,
		            out != NULL ? out : "(nothing)");
		free(out);
		_fail(file, line);
	}
	free(out);
}

void fx_assert_audit_at(const char *file, int line, struct daemon *d, int64_t want,
                        const char *where_fmt, ...)
{
	char where[768];
	char sql[1024];
	va_list ap;
	int64_t got;
	int64_t all;
	char *rows;
	int n;

	va_start(ap, where_fmt);
	n = vsnprintf(where, sizeof(where), where_fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(where));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM audit_log WHERE %s", where);
	got = hn_db_int(d->dm_db, sql);
	if (got == want) {
		return;
	}
	all = hn_db_int(d->dm_db, "SELECT count(*) FROM audit_log");
	snprintf(sql, sizeof(sql),
	         "SELECT actor, action, target, reason, result FROM audit_log ORDER BY id LIMIT %d",
	         FX_AUDIT_SHOWN);
	rows = hn_db_dump(d->dm_db, sql);
	print_error("audit_log: %" PRId64 " row(s) WHERE %s, want %" PRId64
	            "; the log holds %" PRId64 " row(s)%s (actor|action|target|reason|result):\n%s",
	            got, where, want, all, all > FX_AUDIT_SHOWN ? ", the first shown" : "",
	            rows != NULL ? rows : "(cannot read the log)\n");
	free(rows);
	_fail(file, line);
}

char *fx_stripe_payment(const char *event_id, const char *order_id, int64_t amount, const char *currency)
{
	char obj[FX_OBJECT_MAX];

	snprintf(obj, sizeof(obj),
		 "{\"id\":\"pi_%s\",\"object\":\"payment_intent\",\"amount\":%" PRId64 ",\"amount_received\":%" PRId64
		 ",\"currency\":\"%s\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}",
		 order_id, amount, amount, currency, order_id);
	return hn_stripe_event(event_id, "payment_intent.succeeded", obj);
}

char *fx_stripe_session(const char *event_id, const char *order_id, int64_t amount, const char *currency)
{
	char obj[FX_OBJECT_MAX];

	snprintf(obj, sizeof(obj),
		 "{\"id\":\"cs_%s\",\"object\":\"checkout.session\",\"amount_total\":%" PRId64
		 ",\"currency\":\"%s\",\"payment_status\":\"paid\",\"status\":\"complete\","
		 "\"client_reference_id\":\"%s\",\"payment_intent\":\"pi_%s\",\"metadata\":{}}",
		 order_id, amount, currency, order_id, order_id);
	return hn_stripe_event(event_id, "checkout.session.completed", obj);
}

char *fx_stripe_refund(const char *event_id, const char *order_id, int64_t amount, int64_t amount_refunded,
		       const char *refund_id, const char *currency)
{
	char obj[FX_OBJECT_MAX];

	snprintf(obj, sizeof(obj),
		 "{\"id\":\"ch_%s\",\"object\":\"charge\",\"amount\":%" PRId64 ",\"amount_refunded\":%" PRId64
		 ",\"currency\":\"%s\",\"payment_intent\":\"pi_%s\",\"refunded\":%s,"
		 "\"metadata\":{\"order_id\":\"%s\"},\"refunds\":{\"object\":\"list\",\"data\":[{\"id\":\"%s\","
		 "\"object\":\"refund\",\"amount\":%" PRId64 "}]}}",
		 order_id, amount, amount_refunded, currency, order_id,
		 amount_refunded >= amount ? "true" : "false", order_id, refund_id, amount_refunded);
	return hn_stripe_event(event_id, "charge.refunded", obj);
}

long fx_stripe_send(struct daemon *d, const char *body, struct hres *ret)
{
	struct hres scratch;
	long status;

	assert_non_null(body);
	assert_int_equal(hn_post_stripe(d, "stripe", FX_STRIPE_SECRET, body, ret != NULL ? ret : &scratch), 0);
	status = ret != NULL ? ret->hs_status : scratch.hs_status;
	if (ret == NULL) {
		hres_finish(&scratch);
	}
	return status;
}

long fx_stripe_pay(struct daemon *d, const char *event_id, const char *order_id, int64_t amount,
		   const char *currency)
{
	char *body = fx_stripe_payment(event_id, order_id, amount, currency);
	long status = fx_stripe_send(d, body, NULL);

	free(body);
	return status;
}

struct store *fx_store_create(char ret_dir[64])
{
	struct store_options opt;
	struct store *st;
	char path[128];

	snprintf(ret_dir, 64, "/tmp/idemhook-fx.XXXXXX");
	assert_non_null(mkdtemp(ret_dir));
	snprintf(path, sizeof(path), "%s/idemhook.db", ret_dir);
	memset(&opt, 0, sizeof(opt));
	opt.so_path = path;
	opt.so_sync = STORE_SYNC_OFF;
	st = store_create(&opt);
	assert_non_null(st);
	return st;
}

void fx_store_destroy(struct store *st, const char *dir)
{
	char cmd[128];

	store_destroy(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

struct fx_order_job {
	int64_t oj_amount;
	const char *oj_currency;
	char oj_id[ORDERS_ID_LEN + 1];
};

static int fx_order_fn(struct store_tx *tx, void *arg)
{
	struct fx_order_job *oj = arg;

	return orders_create(tx, oj->oj_amount, oj->oj_currency, "cust_1", oj->oj_id);
}

void fx_order_row(struct store *st, int64_t amount, const char *currency, char ret_id[64])
{
	struct fx_order_job oj;

	memset(&oj, 0, sizeof(oj));
	oj.oj_amount = amount;
	oj.oj_currency = currency;
	assert_int_equal(store_write(st, (int64_t)time(NULL) * 1000, fx_order_fn, &oj), 0);
	snprintf(ret_id, 64, "%s", oj.oj_id);
}

void fx_event_payment(struct event *ev, const char *key, const char *order_id, const char *payment_ref,
		      int64_t amount, const char *currency)
{
	size_t i;

	memset(ev, 0, sizeof(*ev));
	ev->ev_key = (char *)key;
	ev->ev_type = (char *)"payment_intent.succeeded";
	ev->ev_kind = EVENT_PAYMENT_SUCCEEDED;
	ev->ev_order_ref = (char *)order_id;
	ev->ev_payment_ref = (char *)payment_ref;
	ev->ev_amount = amount;
	for (i = 0; i + 1 < sizeof(ev->ev_currency) && currency[i] != '\0'; i++) {
		ev->ev_currency[i] = (char)toupper((unsigned char)currency[i]);
	}
}

void fx_assert_mode(const char *path, unsigned want)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		fail_msg("%s: missing", path);
	}
	if ((st.st_mode & 07777) != want) {
		fail_msg("%s: mode %04o, want %04o", path, (unsigned)(st.st_mode & 07777), want);
	}
}
