/* traffic.c: callbacks per provider and hour, in memory (traffic.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "traffic.h"

#define TRAFFIC_HOUR_MS 3600000LL

struct traffic_provider {
	char tp_name[64];
	int64_t tp_hour[TRAFFIC_HOURS]; /* the hour (ms / hour) each slot counts, -1 none */
	uint64_t tp_counts[TRAFFIC_HOURS][TRAFFIC_KINDS];
};

static pthread_mutex_t traffic_lock = PTHREAD_MUTEX_INITIALIZER;
static struct traffic_provider traffic_table[TRAFFIC_PROVIDERS];
static size_t traffic_n;

enum traffic_kind traffic_kind_of(const char *result)
{
	if (strcmp(result, "new") == 0) {
		return TRAFFIC_ACCEPTED;
	}
	if (strcmp(result, "replayed") == 0 || strcmp(result, "mismatch") == 0) {
		return TRAFFIC_DUPLICATE;
	}
	if (strcmp(result, "failed") == 0) {
		return TRAFFIC_FAILED;
	}
	if (strcmp(result, "rejected") == 0) {
		return TRAFFIC_REJECTED;
	}
	return TRAFFIC_OTHER;
}

/* The provider's row (lock held); the last one collects the rest. */
static struct traffic_provider *traffic_row(const char *provider)
{
	struct traffic_provider *p;
	size_t i;

	for (i = 0; i < traffic_n; i++) {
		if (strcmp(traffic_table[i].tp_name, provider) == 0) {
			return &traffic_table[i];
		}
	}
	if (traffic_n == TRAFFIC_PROVIDERS) {
		p = &traffic_table[TRAFFIC_PROVIDERS - 1];
		snprintf(p->tp_name, sizeof(p->tp_name), "(others)");
		return p;
	}
	p = &traffic_table[traffic_n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->tp_name, sizeof(p->tp_name), "%s", provider);
	for (i = 0; i < TRAFFIC_HOURS; i++) {
		p->tp_hour[i] = -1;
	}
	return p;
}

void traffic_add(int64_t now_ms, const char *provider, enum traffic_kind kind)
{
	int64_t hour = now_ms / TRAFFIC_HOUR_MS;
	struct traffic_provider *p;
	size_t slot = (size_t)(hour % TRAFFIC_HOURS);

	if (now_ms < 0 || kind >= TRAFFIC_KINDS) {
		return;
	}
	pthread_mutex_lock(&traffic_lock);
	p = traffic_row(provider != NULL ? provider : "");
	if (p->tp_hour[slot] != hour) {
		p->tp_hour[slot] = hour;
		memset(p->tp_counts[slot], 0, sizeof(p->tp_counts[slot]));
	}
	p->tp_counts[slot][kind]++;
	pthread_mutex_unlock(&traffic_lock);
}

void traffic_get(int64_t now_ms, struct traffic_view *ret)
{
	int64_t hour = now_ms / TRAFFIC_HOUR_MS;
	size_t i;
	size_t h;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&traffic_lock);
	ret->tv_n = traffic_n;
	for (i = 0; i < traffic_n; i++) {
		const struct traffic_provider *p = &traffic_table[i];

		snprintf(ret->tv_name[i], sizeof(ret->tv_name[i]), "%s", p->tp_name);
		for (h = 0; h < TRAFFIC_HOURS; h++) {
			int64_t want = hour - (int64_t)h;
			size_t slot =
			        (size_t)(((want % TRAFFIC_HOURS) + TRAFFIC_HOURS) % TRAFFIC_HOURS);

			if (want >= 0 && p->tp_hour[slot] == want) {
				memcpy(ret->tv_counts[i][h], p->tp_counts[slot],
				       sizeof(p->tp_counts[slot]));
			}
		}
	}
	pthread_mutex_unlock(&traffic_lock);
}

void traffic_reset(void)
{
	pthread_mutex_lock(&traffic_lock);
	memset(traffic_table, 0, sizeof(traffic_table));
	traffic_n = 0;
	pthread_mutex_unlock(&traffic_lock);
}
