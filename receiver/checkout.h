/* checkout.h: the server-rendered checkout page (Post/Redirect/Get). */
#ifndef IDEMHOOK_CHECKOUT_H
#define IDEMHOOK_CHECKOUT_H

#include "app.h"

/* Handles /checkout, /orders/{id} and the page's static script. Returns 1
 * when the path is the page's (ret filled), 0 otherwise. */
int checkout_route(struct app *app, const struct config *cf, const struct http_request *req, struct reply *ret);

#endif
