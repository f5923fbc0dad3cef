/* stripe_common.h: the names the Stripe integration tests used before the
 * shared fixtures (harness/fixtures.h), kept for tests not yet converted;
 * new tests use fx_* directly. */
#ifndef IDEMHOOK_TEST_STRIPE_COMMON_H
#define IDEMHOOK_TEST_STRIPE_COMMON_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixtures.h"
#include "harness.h"

#define TEST_STRIPE_SECRET FX_STRIPE_SECRET
#define TEST_STRIPE_INI FX_STRIPE_INI

static inline char *test_pi_succeeded(const char *event_id, const char *order_id, int64_t amount,
				      const char *currency)
{
	return fx_stripe_payment(event_id, order_id, amount, currency);
}

static inline char *test_session_completed(const char *event_id, const char *order_id, int64_t amount,
					   const char *currency)
{
	return fx_stripe_session(event_id, order_id, amount, currency);
}

static inline char *test_charge_refunded(const char *event_id, const char *order_id, int64_t amount,
					 int64_t amount_refunded, const char *refund_id, const char *currency)
{
	return fx_stripe_refund(event_id, order_id, amount, amount_refunded, refund_id, currency);
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
