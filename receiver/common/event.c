/* event.c: normalized provider callbacks. */
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "event.h"

struct event *event_batch_add(struct event_batch *b)
{
	struct event *p = realloc(b->eb_events, (b->eb_n + 1) * sizeof(*p));
	struct event *ev;

	if (p == NULL) {
		return NULL;
	}
	b->eb_events = p;
	ev = &p[b->eb_n++];
	memset(ev, 0, sizeof(*ev));
	ev->ev_amount = -1;
	return ev;
}

void event_finish(struct event *ev)
{
	free(ev->ev_key);
	free(ev->ev_type);
	free(ev->ev_order_ref);
	free(ev->ev_payment_ref);
	free(ev->ev_charge_ref);
	free(ev->ev_refund_ref);
	free(ev->ev_payload);
	free(ev->ev_context);
	memset(ev, 0, sizeof(*ev));
	ev->ev_amount = -1;
}

void event_batch_finish(struct event_batch *b)
{
	size_t i;

	for (i = 0; i < b->eb_n; i++) {
		event_finish(&b->eb_events[i]);
	}
	free(b->eb_events);
	b->eb_events = NULL;
	b->eb_n = 0;
}

/* Names as stored in the events table; "payment_refunded" predates the rest. */
static const char *const event_kind_names[] = {
        [EVENT_OTHER] = "other",
        [EVENT_PAYMENT_SUCCEEDED] = "payment_succeeded",
        [EVENT_REFUNDED] = "payment_refunded",
        [EVENT_PAYMENT_AUTHORIZED] = "payment_authorized",
        [EVENT_PAYMENT_CAPTURED] = "payment_captured",
        [EVENT_CAPTURE_FAILED] = "capture_failed",
        [EVENT_PAYMENT_CANCELLED] = "payment_cancelled",
        [EVENT_PAYMENT_EXPIRED] = "payment_expired",
        [EVENT_CANCEL_OR_REFUND] = "cancel_or_refund",
        [EVENT_REFUND_FAILED] = "refund_failed",
        [EVENT_DISPUTE_OPENED] = "dispute_opened",
        [EVENT_DISPUTE_WON] = "dispute_won",
        [EVENT_DISPUTE_LOST] = "dispute_lost",
};

#define EVENT_KINDS (sizeof(event_kind_names) / sizeof(event_kind_names[0]))

const char *event_kind_name(enum event_kind kind)
{
	if ((size_t)kind >= EVENT_KINDS || event_kind_names[kind] == NULL) {
		return "other";
	}
	return event_kind_names[kind];
}

enum event_kind event_kind_from_name(const char *name)
{
	size_t i;

	if (name == NULL) {
		return EVENT_OTHER;
	}
	for (i = 0; i < EVENT_KINDS; i++) {
		if (event_kind_names[i] != NULL && strcmp(event_kind_names[i], name) == 0) {
			return (enum event_kind)i;
		}
	}
	return EVENT_OTHER;
}

void event_fingerprint(struct event *ev, const void *data, size_t len)
{
	crypto_sha256(data, len, ev->ev_fingerprint);
}
