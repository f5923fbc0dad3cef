/* admin.h: the admin listener: /healthz, /readyz, /metrics. */
#ifndef IDEMHOOK_ADMIN_H
#define IDEMHOOK_ADMIN_H

#include "app.h"

/* The admin listener's route function (arg = struct app *). */
void admin_route(void *arg, const struct http_request *req, struct reply *ret);

#endif
