/* fixtures.h: the setup blocks tests used to repeat, one call each: a daemon
 * started with a config, an order, a Stripe event signed and delivered, a
 * fresh store with order rows. Each checks what it needs with cmocka's
 * asserts (so a test stops where its setup failed), and a test body reads
 * as its scenario. */
#ifndef IDEMHOOK_FIXTURES_H
#define IDEMHOOK_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

struct event;
struct store;

/* The Stripe instance most integration tests run: its secret and its
 * config (with one point per 100 minor units). */
#define FX_STRIPE_SECRET "whsec_integration_test_secret"
#define FX_STRIPE_INI                                                                                        \
	"[provider stripe]\ntype = stripe\nsecret = " FX_STRIPE_SECRET "\n\n[points]\nrate = 1/100\n"

/* ---- the daemon ---- */

/* daemon_init with the printf-formatted extra config, then daemon_start;
 * asserts both. */
void fx_daemon_start(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An order created through the CLI (idemhook order create); asserts. */
void fx_order(struct daemon *d, int64_t amount, const char *currency, char ret_id[64]);

/* The first column of the first row of the printf-formatted SQL on the
 * daemon's database, as an integer (-1 on error or no row). */
int64_t fx_db_int(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* daemon_append_config with the printf-formatted text; asserts. */
void fx_append_config(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fails the test unless the audit log has want rows for which the
 * printf-formatted SQL condition (what follows WHERE) holds; the message
 * names the condition, the count found and the rows the log holds, and the
 * failure the caller's line. */
#define fx_assert_audit(d, want, ...)                                                              \
	fx_assert_audit_at(__FILE__, __LINE__, (d), (want), __VA_ARGS__)
void fx_assert_audit_at(const char *file, int line, struct daemon *d, int64_t want,
                        const char *where_fmt, ...) __attribute__((format(printf, 5, 6)));

/* Runs the CLI with d's config (daemon_cli) and asserts its exit status
 * is want_rc and its standard output holds said; a failure names the
 * command, what it printed and the caller's line. */
#define fx_cli_says(d, args, want_rc, said)                                                        \
	fx_cli_says_at(__FILE__, __LINE__, (d), (args), (want_rc), (said))
void fx_cli_says_at(const char *file, int line, struct daemon *d, const char *const *args,
                    int want_rc, const char *said);

/* ---- Stripe events (bodies malloc'd, as Stripe sends them) ---- */

/* payment_intent.succeeded for order_id. */
char *fx_stripe_payment(const char *event_id, const char *order_id, int64_t amount, const char *currency);

/* checkout.session.completed, paid, for order_id. */
char *fx_stripe_session(const char *event_id, const char *order_id, int64_t amount, const char *currency);

/* charge.refunded: amount_refunded is Stripe's running total, refund_id the
 * newest refund. */
char *fx_stripe_refund(const char *event_id, const char *order_id, int64_t amount, int64_t amount_refunded,
		       const char *refund_id, const char *currency);

/* POSTs body, signed now with FX_STRIPE_SECRET, to /hooks/stripe; asserts
 * that an answer came back and returns its status. ret may be NULL (the
 * answer is dropped); else finish it with hres_finish. */
long fx_stripe_send(struct daemon *d, const char *body, struct hres *ret);

/* fx_stripe_payment + fx_stripe_send: returns the status. */
long fx_stripe_pay(struct daemon *d, const char *event_id, const char *order_id, int64_t amount,
		   const char *currency);

/* ---- a store of one's own (unit tests) ---- */

/* A store on a fresh database in a new temporary directory (written to
 * ret_dir, 64 bytes), synchronous off; asserts. */
struct store *fx_store_create(char ret_dir[64]);

/* Destroys st and removes dir with everything in it. */
void fx_store_destroy(struct store *st, const char *dir);

/* A pending order row (customer cust_1) written through st; asserts. */
void fx_order_row(struct store *st, int64_t amount, const char *currency, char ret_id[64]);

/* ev (zeroed first) as the Stripe profile makes it for a payment of
 * order_id: key, type payment_intent.succeeded, kind, order, payment_ref,
 * amount, currency (upper-cased). ev points into the arguments. */
void fx_event_payment(struct event *ev, const char *key, const char *order_id, const char *payment_ref,
		      int64_t amount, const char *currency);

/* Fails the test unless path (not followed if a link) exists with the
 * permission bits want (0600, 0700, ...). */
void fx_assert_mode(const char *path, unsigned want);

#endif
