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
	free(ev->ev_refund_ref);
	free(ev->ev_payload);
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

const char *event_kind_name(enum event_kind kind)
{
	switch (kind) {
	case EVENT_PAYMENT_SUCCEEDED:
		return "payment_succeeded";
	case EVENT_REFUNDED:
		return "payment_refunded";
	case EVENT_OTHER:
		break;
	}
	return "other";
}

void event_fingerprint(struct event *ev, const void *data, size_t len)
{
	crypto_sha256(data, len, ev->ev_fingerprint);
}
