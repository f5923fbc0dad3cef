/* notify.c: systemd readiness, status and watchdog through sd_notify(3); all
 * no-ops without libsystemd or outside systemd ($NOTIFY_SOCKET unset). */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "build_config.h"
#include "notify.h"

#if HAVE_LIBSYSTEMD
#include <inttypes.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "log.h"

#define NOTIFY_STATUS_MAX 200 /* bytes of one STATUS= line we send */

/* STATUS= is one line: newlines and control bytes become spaces. */
static void notify_clean(char *out, size_t out_size, const char *status)
{
	size_t i;

	for (i = 0; status != NULL && status[i] != '\0' && i + 1 < out_size; i++) {
		out[i] = (unsigned char)status[i] < 0x20 ? ' ' : status[i];
	}
	out[i] = '\0';
}

static void notify_send(const char *state)
{
	int rc;

	rc = sd_notify(0, state);
	if (rc < 0) {
		log_debug("notify: sd_notify failed: %s", strerror(-rc));
	}
}

void notify_ready(const char *status)
{
	char line[NOTIFY_STATUS_MAX];
	char msg[NOTIFY_STATUS_MAX + 32];

	notify_clean(line, sizeof(line), status != NULL ? status : "ready");
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", line);
	notify_send(msg);
}

void notify_status(const char *status)
{
	char line[NOTIFY_STATUS_MAX];
	char msg[NOTIFY_STATUS_MAX + 32];

	notify_clean(line, sizeof(line), status);
	snprintf(msg, sizeof(msg), "STATUS=%s", line);
	notify_send(msg);
}

void notify_stopping(void)
{
	notify_send("STOPPING=1\nSTATUS=stopping");
}

void notify_reloading(void)
{
	struct timespec ts;
	char msg[96];

	/* MONOTONIC_USEC lets Type=notify-reload units (systemd 253+) match
	 * the reload; older managers ignore it. READY=1 ends the reload. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%" PRIu64,
	         (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
	notify_send(msg);
}

void notify_watchdog(void)
{
	notify_send("WATCHDOG=1");
}

int64_t notify_watchdog_interval_ms(void)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) {
		return 0;
	}
	return (int64_t)(usec / 2000u) > 0 ? (int64_t)(usec / 2000u) : 1;
}

#else

void notify_ready(const char *status)
{
	(void)status;
}

void notify_status(const char *status)
{
	(void)status;
}

void notify_stopping(void)
{
}

void notify_reloading(void)
{
}

void notify_watchdog(void)
{
}

int64_t notify_watchdog_interval_ms(void)
{
	return 0;
}

#endif
