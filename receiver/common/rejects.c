/* rejects.c: the ring of refused callbacks (rejects.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rejects.h"

static pthread_mutex_t rejects_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rejects_entry rejects_ring[REJECTS_RING];
static uint64_t rejects_total; /* entries ever added; the next slot is total % ring */

void rejects_add(int64_t at_ms, const char *provider, const char *reason, int status,
                 const char *client)
{
	struct rejects_entry *e;

	pthread_mutex_lock(&rejects_lock);
	e = &rejects_ring[rejects_total % REJECTS_RING];
	e->re_at_ms = at_ms;
	e->re_status = status;
	snprintf(e->re_provider, sizeof(e->re_provider), "%s", provider != NULL ? provider : "");
	snprintf(e->re_reason, sizeof(e->re_reason), "%s", reason != NULL ? reason : "");
	snprintf(e->re_client, sizeof(e->re_client), "%s", client != NULL ? client : "");
	rejects_total++;
	pthread_mutex_unlock(&rejects_lock);
}

size_t rejects_snapshot(struct rejects_entry *out, size_t max, uint64_t *ret_total)
{
	size_t n = 0;
	uint64_t i;

	pthread_mutex_lock(&rejects_lock);
	for (i = rejects_total; i > 0 && n < max && rejects_total - i < REJECTS_RING; i--) {
		out[n++] = rejects_ring[(i - 1) % REJECTS_RING];
	}
	if (ret_total != NULL) {
		*ret_total = rejects_total;
	}
	pthread_mutex_unlock(&rejects_lock);
	return n;
}

size_t rejects_count_since(int64_t since_ms, const char *provider)
{
	size_t n = 0;
	uint64_t i;

	pthread_mutex_lock(&rejects_lock);
	for (i = rejects_total; i > 0 && rejects_total - i < REJECTS_RING; i--) {
		const struct rejects_entry *e = &rejects_ring[(i - 1) % REJECTS_RING];

		if (e->re_at_ms >= since_ms &&
		    (provider == NULL || strcmp(provider, e->re_provider) == 0)) {
			n++;
		}
	}
	pthread_mutex_unlock(&rejects_lock);
	return n;
}

void rejects_reset(void)
{
	pthread_mutex_lock(&rejects_lock);
	memset(rejects_ring, 0, sizeof(rejects_ring));
	rejects_total = 0;
	pthread_mutex_unlock(&rejects_lock);
}
