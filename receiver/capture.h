/* capture.h: the spool of raw callbacks on disk, and reading it back. */
#ifndef IDEMHOOK_CAPTURE_H
#define IDEMHOOK_CAPTURE_H

#include "config.h"
#include "http.h"

struct capture;

/* From the [capture] section; NULL with *ret_off = 1 when capture is off,
 * NULL with *ret_off = 0 on a configuration error (logged). */
struct capture *capture_create(const struct config *cf, int *ret_off);
void capture_destroy(struct capture *cap);

/* Writes req (as it arrived at provider instance `provider`) atomically to the
 * spool, if the mode asks for it (rejected: only when rejected != 0). Returns
 * 0, or -1 (logged and counted; the callback itself goes on). */
int capture_request(struct capture *cap, const char *provider, const struct http_request *req, int rejected);

#endif
