/* event.h: a provider callback normalized to what the business handlers need. */
#ifndef IDEMHOOK_EVENT_H
#define IDEMHOOK_EVENT_H

#include <stddef.h>
#include <stdint.h>

/* What a callback means for an order, whatever the provider calls it
 * (docs/providers.md has each provider's table, docs/orders.md the effects). */
enum event_kind {
	EVENT_OTHER = 0, /* acknowledged and recorded, no business effect */
	EVENT_PAYMENT_SUCCEEDED, /* money taken: the order is paid */
	EVENT_REFUNDED, /* a refund went through */
	EVENT_PAYMENT_AUTHORIZED, /* funds reserved, to be captured separately */
	EVENT_PAYMENT_CAPTURED, /* a separate capture went through: paid */
	EVENT_CAPTURE_FAILED, /* a capture was rejected after it was reported */
	EVENT_PAYMENT_CANCELLED, /* closed before any money was taken */
	EVENT_PAYMENT_EXPIRED, /* never completed, or authorised and never captured */
	EVENT_CANCEL_OR_REFUND, /* cancelled if unpaid, else the rest refunded */
	EVENT_REFUND_FAILED, /* a refund named by ev_refund_ref did not go through */
	EVENT_DISPUTE_OPENED, /* a dispute withholds funds */
	EVENT_DISPUTE_WON, /* a dispute was decided for the merchant: funds back */
	EVENT_DISPUTE_LOST, /* a dispute was decided for the cardholder */
};

#define EVENT_FINGERPRINT_LEN 32 /* SHA-256 */

struct event {
	char *ev_key; /* idempotency key: the provider's callback/event id */
	char *ev_type; /* the provider's own event type, e.g. "charge.refunded" */
	enum event_kind ev_kind;
	char *ev_order_ref; /* our order id (orders.id), NULL when absent */
	char *ev_payment_ref; /* provider's id of the payment (PaymentIntent, pspReference,
				 transaction id, trade number), or NULL */
	char *ev_charge_ref; /* a second id of the same payment (Stripe's charge), or NULL */
	char *ev_refund_ref; /* provider's id of the refund, dispute or capture the event is
				about, or NULL */
	int64_t ev_amount; /* minor units; -1 when absent. Refunds: this refund's amount,
			      or the running total when ev_refund_cumulative */
	char ev_currency[4]; /* ISO 4217 upper case, "" when absent */
	int ev_refund_cumulative;
	int64_t ev_occurred_ms; /* when the provider says it happened, 0 when unknown */
	/* SHA-256 over what the profile calls semantic; duplicates that differ
	 * only in volatile fields share it. */
	unsigned char ev_fingerprint[EVENT_FINGERPRINT_LEN];
	/* The semantic payload (JSON or form text), kept with the event record so
	 * that a failed event can be reprocessed; owned. */
	char *ev_payload;
	size_t ev_payload_len;
	/* Set by a batch profile (Adyen) when this item alone is refused by its
	 * own rules before any business effect; 0 otherwise. */
	int ev_refused;
	/* Set by a profile for a thin notification (Stripe event
	 * destinations): authentic, but without the object's data. It is
	 * claimed and recorded as fetching, with no business effect, until the
	 * fetch worker (fetch.h) has the full event. */
	int ev_fetch;
	/* The account the event happened in when it is not the instance's
	 * own (a Stripe thin notification's context: a connected account,
	 * "acct_..." or "acct_.../acct_..."), which its fetch must name; or
	 * NULL. Checked by the profile: letters, digits, "_" and "/". */
	char *ev_context;
	/* 1 when the provider marks the event as made in its test mode or
	 * sandbox (Stripe livemode false, Adyen live "false"): recorded, and
	 * counted apart from live failures. */
	int ev_test_mode;
};

/* What the business handler made of one event; providers turn it into their
 * acknowledgement. Pointers are borrowed for the call. */
struct event_outcome {
	int eo_refused; /* 1: refused by business rules, the key ends failed */
	const char *eo_reason; /* refusal slug ("unknown_order", "amount_mismatch"), or NULL */
	const char *eo_order_id; /* our order id, or NULL */
	const char *eo_effect; /* "paid", "refunded", ... (docs/orders.md), "noop", "recorded" */
};

struct event_batch {
	struct event *eb_events;
	size_t eb_n;
};

/* Returns a new zeroed event appended to the batch (ev_amount = -1), or NULL
 * on allocation failure. Pointers to earlier events may move. */
struct event *event_batch_add(struct event_batch *b);

/* Frees everything the batch and its events own; leaves it empty. */
void event_batch_finish(struct event_batch *b);

/* Frees what one event owns. */
void event_finish(struct event *ev);

const char *event_kind_name(enum event_kind kind);

/* The kind called name (as event_kind_name gives it); EVENT_OTHER for
 * anything else. */
enum event_kind event_kind_from_name(const char *name);

/* SHA-256 of data into ev->ev_fingerprint. */
void event_fingerprint(struct event *ev, const void *data, size_t len);

#endif
