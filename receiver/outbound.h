/* outbound.h: the outbox delivery worker (libcurl multi); only outbound.c
 * includes curl.h. */
#ifndef IDEMHOOK_OUTBOUND_H
#define IDEMHOOK_OUTBOUND_H

struct app;
struct outbound;

/* Starts the worker thread from the [outbound] section; NULL when nothing is
 * configured or on failure (logged; *ret_err set to 1 then). Rows left
 * 'delivering' by a previous run are released first. */
struct outbound *outbound_start(struct app *app, int *ret_err);

/* Wakes the worker (new rows were committed). */
void outbound_kick(struct outbound *ob);

/* Gives in-flight transfers up to grace_ms to finish, releases the rest for
 * the next start, stops the thread and frees. NULL is a no-op. */
void outbound_stop(struct outbound *ob, int grace_ms);

#endif
