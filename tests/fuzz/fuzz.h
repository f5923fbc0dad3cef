/* fuzz.h: what the libFuzzer harnesses share: a silent log, a provider
 * instance built from key/value pairs, and one request run through it with
 * the promises every profile makes checked (a refusal stores nothing; an
 * accepted callback has a key). A broken promise aborts, as a crash would. */
#ifndef IDEMHOOK_FUZZ_H
#define IDEMHOOK_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "provider_test.h"

#define FUZZ_NOW 1733130100 /* the clock every harness runs at */

/* Aborts with a message: libFuzzer keeps the input that did it. */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz: %s:%d: promise broken: %s\n", __FILE__, __LINE__,  \
			        #cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* The daemon's log is not what is being fuzzed. */
static inline void fuzz_quiet(void)
{
	log_set_level((enum log_level)0);
}

/* A profile instance as a [provider fuzz] section of kv pairs would make. */
static inline void fuzz_instance(struct pt_instance *pi, const struct provider *p,
                                 const char *const *kv)
{
	if (pt_instance_create(pi, p, kv) != 0) {
		fprintf(stderr, "fuzz: the %s instance is refused\n", p->p_name);
		abort();
	}
	pi->pi_conf.pc_name = (char *)"fuzz";
}

/* Runs r through the instance at FUZZ_NOW, builds the answer the provider
 * would get, and checks the promises. */
static inline void fuzz_receive(struct pt_instance *pi, struct pt_request *r)
{
	const struct provider *p = pi->pi_conf.pc_provider;
	struct event_batch b;
	struct provider_verdict v;
	struct reply rep;
	size_t i;
	int rc;

	rc = pt_receive(pi, r, FUZZ_NOW, &b, &v);
	if (rc == 0) {
		FUZZ_CHECK(b.eb_n > 0);
		for (i = 0; i < b.eb_n; i++) {
			const struct event *ev = &b.eb_events[i];

			FUZZ_CHECK(ev->ev_key != NULL && ev->ev_key[0] != '\0');
			FUZZ_CHECK(ev->ev_type != NULL);
			FUZZ_CHECK(ev->ev_payload != NULL);
			reply_init(&rep);
			FUZZ_CHECK(p->p_ack(&pi->pi_conf, ev, NULL, &rep) == 0);
			reply_finish(&rep);
		}
	} else {
		FUZZ_CHECK(b.eb_n == 0);
		FUZZ_CHECK(v.pv_reason != NULL);
		FUZZ_CHECK(v.pv_status == 400 || v.pv_status == 401 || v.pv_status == 403 ||
		           v.pv_status == 503);
		reply_init(&rep);
		FUZZ_CHECK(provider_error(&pi->pi_conf, v.pv_status, v.pv_reason, v.pv_detail,
		                          &rep) == 0);
		reply_finish(&rep);
	}
	event_batch_finish(&b);
}

/* Signs body with the profile's own p_sign (event_id may be NULL) and runs it. */
static inline void fuzz_signed(struct pt_instance *pi, const uint8_t *body, size_t len,
                               const char *event_id)
{
	struct pt_request r;

	pt_request_init(&r, body, len);
	pt_request_header(&r, "Content-Type", "application/json");
	FUZZ_CHECK(pi->pi_conf.pc_provider->p_sign(&pi->pi_conf, body, len, FUZZ_NOW, event_id,
	                                           pt_add_header, &r, &pt_sign_why) == 0);
	fuzz_receive(pi, &r);
	pt_request_finish(&r);
}

#endif
