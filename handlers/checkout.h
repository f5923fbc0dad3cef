/* checkout.h: the server-rendered checkout page (Post/Redirect/Get). */
#ifndef IDEMHOOK_CHECKOUT_H
#define IDEMHOOK_CHECKOUT_H

#include "config.h"
#include "env.h"
#include "http.h"
#include "reply.h"

/* Handles /checkout, /orders/{id} and the page's static script. Returns 1
 * when the path is the page's (ret filled or deferred), 0 otherwise. cf is
 * the request's config: a demo payment keeps a reference of its own
 * (env_config_retain) until it is answered. */
int checkout_route(const struct env *env, struct config *cf, const struct http_request *req, struct reply *ret);

#endif
