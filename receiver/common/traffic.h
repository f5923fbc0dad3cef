/* traffic.h: callbacks per provider instance and hour over the last day,
 * by what became of them (accepted, duplicate, failed, rejected, other),
 * counted in memory as they are answered: the console's overview charts
 * them without reading the events table. Process-wide, as the metric
 * counters are (one receiver's own traffic); thread-safe. */
#ifndef IDEMHOOK_TRAFFIC_H
#define IDEMHOOK_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>

#define TRAFFIC_PROVIDERS 32 /* instances counted; more are counted as "other" */
#define TRAFFIC_HOURS 24

enum traffic_kind {
	TRAFFIC_ACCEPTED = 0, /* new: applied, or recorded */
	TRAFFIC_DUPLICATE,    /* answered from the stored reply */
	TRAFFIC_FAILED,       /* acknowledged but refused by the business rules */
	TRAFFIC_REJECTED,     /* refused before any claim */
	TRAFFIC_OTHER,        /* 409, 503 */
	TRAFFIC_KINDS,
};

/* The kind for an ingest result name ("new", "replayed", ...). */
enum traffic_kind traffic_kind_of(const char *result);

/* Counts one answered callback at now_ms. */
void traffic_add(int64_t now_ms, const char *provider, enum traffic_kind kind);

struct traffic_view {
	size_t tv_n;
	char tv_name[TRAFFIC_PROVIDERS][64];
	/* [provider][hours ago: 0 = the hour now running][kind] */
	uint64_t tv_counts[TRAFFIC_PROVIDERS][TRAFFIC_HOURS][TRAFFIC_KINDS];
};

/* The last 24 hours as of now_ms into ret. */
void traffic_get(int64_t now_ms, struct traffic_view *ret);

/* Forgets everything (tests). */
void traffic_reset(void);

#endif
