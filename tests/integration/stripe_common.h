/* stripe_common.h: Stripe event bodies shared by the integration tests. */
#ifndef IDEMHOOK_TEST_STRIPE_COMMON_H
#define IDEMHOOK_TEST_STRIPE_COMMON_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#define TEST_STRIPE_SECRET "whsec_integration_test_secret"

#define TEST_STRIPE_INI                                                                                      \
	"[provider stripe]\ntype = stripe\nsecret = " TEST_STRIPE_SECRET "\n\n[points]\nrate = 1/100\n"

/* A payment_intent.succeeded event body for order_id (malloc'd). */
static inline char *test_pi_succeeded(const char *event_id, const char *order_id, int64_t amount,
				      const char *currency)
{
	char obj[1024];

	snprintf(obj, sizeof(obj),
		 "{\"id\":\"pi_%s\",\"object\":\"payment_intent\",\"amount\":%" PRId64 ",\"amount_received\":%" PRId64
		 ",\"currency\":\"%s\",\"status\":\"succeeded\",\"metadata\":{\"order_id\":\"%s\"}}",
		 order_id, amount, amount, currency, order_id);
	return hn_stripe_event(event_id, "payment_intent.succeeded", obj);
}

/* A checkout.session.completed (paid) event body for order_id (malloc'd). */
static inline char *test_session_completed(const char *event_id, const char *order_id, int64_t amount,
					   const char *currency)
{
	char obj[1024];

	snprintf(obj, sizeof(obj),
		 "{\"id\":\"cs_%s\",\"object\":\"checkout.session\",\"amount_total\":%" PRId64
		 ",\"currency\":\"%s\",\"payment_status\":\"paid\",\"status\":\"complete\","
		 "\"client_reference_id\":\"%s\",\"payment_intent\":\"pi_%s\",\"metadata\":{}}",
		 order_id, amount, currency, order_id, order_id);
	return hn_stripe_event(event_id, "checkout.session.completed", obj);
}

/* A charge.refunded event: amount_refunded is Stripe's running total. */
static inline char *test_charge_refunded(const char *event_id, const char *order_id, int64_t amount,
					 int64_t amount_refunded, const char *refund_id, const char *currency)
{
	char obj[1536];

	snprintf(obj, sizeof(obj),
		 "{\"id\":\"ch_%s\",\"object\":\"charge\",\"amount\":%" PRId64 ",\"amount_refunded\":%" PRId64
		 ",\"currency\":\"%s\",\"payment_intent\":\"pi_%s\",\"refunded\":%s,"
		 "\"metadata\":{\"order_id\":\"%s\"},\"refunds\":{\"object\":\"list\",\"data\":[{\"id\":\"%s\","
		 "\"object\":\"refund\",\"amount\":%" PRId64 "}]}}",
		 order_id, amount, amount_refunded, currency, order_id,
		 amount_refunded >= amount ? "true" : "false", order_id, refund_id, amount_refunded);
	return hn_stripe_event(event_id, "charge.refunded", obj);
}

/* Integer query on the daemon's database with printf-style SQL. */
static inline int64_t test_db_int(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int64_t test_db_int(struct daemon *d, const char *fmt, ...)
{
	char sql[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	return hn_db_int(d->dm_db, sql);
}

#endif
