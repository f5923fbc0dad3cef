/* admin.h: the admin listener: /healthz, /readyz, /metrics, and the
 * operator console under /console when the daemon runs one. */
#ifndef IDEMHOOK_ADMIN_H
#define IDEMHOOK_ADMIN_H

#include "http.h"
#include "reply.h"

struct env;

/* What the admin listener serves: env (the store for /metrics, the health
 * thread for /readyz) and, when not NULL, the console's route for /console
 * and below (the console sits above the engine: the daemon hands it in). */
struct admin {
	const struct env *adm_env;
	http_route_fn adm_console;
	void *adm_console_arg;
};

/* The admin listener's route function (arg = const struct admin *). */
void admin_route(void *arg, const struct http_request *req, struct reply *ret);

#endif
