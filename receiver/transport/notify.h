/* notify.h: systemd readiness, status and watchdog (sd_notify); every call
 * is a no-op outside systemd or without libsystemd. */
#ifndef IDEMHOOK_NOTIFY_H
#define IDEMHOOK_NOTIFY_H

#include <stdint.h>

void notify_ready(const char *status);
void notify_status(const char *status);
void notify_stopping(void);
void notify_reloading(void);
/* Sends WATCHDOG=1 (the health thread does, while the daemon is alive). */
void notify_watchdog(void);
/* Half the watchdog interval in ms, or 0 when no watchdog is asked for. */
int64_t notify_watchdog_interval_ms(void);

#endif
