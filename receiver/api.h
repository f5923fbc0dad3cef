/* api.h: the order API with Idempotency-Key (POST/GET /api/orders). */
#ifndef IDEMHOOK_API_H
#define IDEMHOOK_API_H

#include "app.h"

/* Handles /api/... requests (including CORS preflight). Returns 1 when the
 * path belongs to the API (ret filled), 0 otherwise. */
int api_route(struct app *app, const struct config *cf, const struct http_request *req, struct reply *ret);

#endif
