/* defaults.h: the values the configuration and the modules it configures share.
 *
 * config.c fills its fields with these when a key is absent; http.h and
 * store.h take them from here, so the configuration (receiver/common) knows
 * nothing of the listener or the store above it. */
#ifndef IDEMHOOK_DEFAULTS_H
#define IDEMHOOK_DEFAULTS_H

/* The listener ([server]; http.c). */
#define HTTP_BODY_MAX_DEFAULT (1024 * 1024) /* bytes */
#define HTTP_HEAD_TIMEOUT_DEFAULT_MS 10000  /* the whole request head, TLS handshake included */
#define HTTP_BODY_MIN_RATE_DEFAULT 1024     /* bytes per second a body averages, after a grace */
#define HTTP_DRAIN_TIMEOUT_DEFAULT_MS 45000 /* below the unit's TimeoutStopSec=60s */

/* The store ([store]; store.c). */
enum store_sync {
	STORE_SYNC_FULL = 0, /* default: acknowledged means on disk */
	STORE_SYNC_NORMAL,
	STORE_SYNC_OFF, /* benchmarks only */
};

/* Where the data lives. SQLite is the embedded default and single-receiver;
 * PostgreSQL is shared by any number of receivers. */
enum store_backend {
	STORE_BACKEND_SQLITE = 0,
	STORE_BACKEND_POSTGRESQL,
};

#endif
