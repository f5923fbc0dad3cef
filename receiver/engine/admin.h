/* admin.h: the admin listener: /healthz, /readyz, /metrics. */
#ifndef IDEMHOOK_ADMIN_H
#define IDEMHOOK_ADMIN_H

#include "http.h"
#include "reply.h"

/* The admin listener's route function (arg = const struct env *: the
 * store for /metrics, the health thread for /readyz). */
void admin_route(void *arg, const struct http_request *req, struct reply *ret);

#endif
