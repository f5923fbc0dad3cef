/* provider_test.h: shared fixtures for the provider profile unit tests: a
 * hand-built config section and provider instance, and requests. */
#ifndef IDEMHOOK_PROVIDER_TEST_H
#define IDEMHOOK_PROVIDER_TEST_H

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "event.h"
#include "http.h"
#include "provider.h"
#include "reply.h"

#define PT_MAX_KV 32
#define PT_MAX_HEADERS 16

struct pt_instance {
	struct config_section pi_section;
	struct config_kv pi_kv[PT_MAX_KV];
	struct provider_conf pi_conf;
};

/* kv: NULL-terminated list of key, value, key, value, ... (borrowed). */
static inline int pt_instance_create(struct pt_instance *pi, const struct provider *p,
                                     const char *const *kv)
{
	size_t n = 0;

	memset(pi, 0, sizeof(*pi));
	while (kv != NULL && kv[2 * n] != NULL && n < PT_MAX_KV) {
		pi->pi_kv[n].kv_key = (char *)kv[2 * n];
		pi->pi_kv[n].kv_value = (char *)kv[2 * n + 1];
		pi->pi_kv[n].kv_line = (int)n + 1;
		n++;
	}
	pi->pi_section.cs_name = (char *)"provider test";
	pi->pi_section.cs_kv = pi->pi_kv;
	pi->pi_section.cs_n = n;
	pi->pi_conf.pc_name = (char *)"test";
	pi->pi_conf.pc_provider = p;
	pi->pi_conf.pc_section = &pi->pi_section;
	pi->pi_conf.pc_tolerance_s = 300;
	pi->pi_conf.pc_retention_s = 7 * 24 * 3600;
	return p->p_create(&pi->pi_conf, &pi->pi_conf.pc_state);
}

static inline void pt_instance_destroy(struct pt_instance *pi)
{
	if (pi->pi_conf.pc_state != NULL) {
		pi->pi_conf.pc_provider->p_destroy(pi->pi_conf.pc_state);
		pi->pi_conf.pc_state = NULL;
	}
}

struct pt_request {
	struct http_header pr_headers[PT_MAX_HEADERS];
	char *pr_owned[PT_MAX_HEADERS]; /* values copied by pt_request_header */
	struct http_request pr_req;
};

static inline void pt_request_init(struct pt_request *r, const void *body, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->pr_req.hr_method = "POST";
	r->pr_req.hr_url = "/hooks/test";
	r->pr_req.hr_path = "/hooks/test";
	r->pr_req.hr_version = "HTTP/1.1";
	r->pr_req.hr_headers = r->pr_headers;
	r->pr_req.hr_body = body;
	r->pr_req.hr_body_len = len;
	r->pr_req.hr_peer = "127.0.0.1";
	r->pr_req.hr_client = "127.0.0.1";
}

/* Adds a header; the name must be a literal, the value is copied. */
static inline void pt_request_header(struct pt_request *r, const char *name, const char *value)
{
	size_t i = r->pr_req.hr_n_headers;

	if (i >= PT_MAX_HEADERS) {
		return;
	}
	r->pr_owned[i] = strdup(value);
	r->pr_headers[i].hh_name = name;
	r->pr_headers[i].hh_value = r->pr_owned[i];
	r->pr_req.hr_n_headers++;
}

static inline void pt_request_finish(struct pt_request *r)
{
	size_t i;

	for (i = 0; i < PT_MAX_HEADERS; i++) {
		free(r->pr_owned[i]);
	}
	memset(r, 0, sizeof(*r));
}

/* p_sign callback: adds each header to a pt_request. */
static inline void pt_add_header(void *arg, const char *name, const char *value)
{
	pt_request_header(arg, name, value);
}

/* Where p_sign says why it could not sign (provider.h). */
static const char *pt_sign_why __attribute__((unused));

/* Runs p_receive; the batch is left for the caller (event_batch_finish). */
static inline int pt_receive(struct pt_instance *pi, struct pt_request *r, int64_t now_s,
                             struct event_batch *b, struct provider_verdict *v)
{
	memset(b, 0, sizeof(*b));
	memset(v, 0, sizeof(*v));
	return pi->pi_conf.pc_provider->p_receive(&pi->pi_conf, &r->pr_req, now_s, b, v);
}

/* For each header field of r, a request pi accepts at now_s: r with that
 * field once more, first with the same value, then with another. Returns
 * how many of them p_receive does not refuse as "repeated_header" (0 when
 * the profile takes no line of a field it reads over another). */
static inline int pt_repeats_not_refused(struct pt_instance *pi, const struct pt_request *r,
                                         int64_t now_s)
{
	size_t i;
	size_t j;
	int k;
	int wrong = 0;

	for (i = 0; i < r->pr_req.hr_n_headers; i++) {
		for (k = 0; k < 2; k++) {
			struct pt_request c;
			struct event_batch b;
			struct provider_verdict v;

			pt_request_init(&c, r->pr_req.hr_body, r->pr_req.hr_body_len);
			for (j = 0; j < r->pr_req.hr_n_headers; j++) {
				pt_request_header(&c, r->pr_headers[j].hh_name,
				                  r->pr_headers[j].hh_value);
			}
			pt_request_header(&c, r->pr_headers[i].hh_name,
			                  k == 0 ? r->pr_headers[i].hh_value : "other");
			if (pt_receive(pi, &c, now_s, &b, &v) == 0) {
				event_batch_finish(&b);
				wrong++;
			} else if (v.pv_status != 400 || v.pv_reason == NULL ||
			           strcmp(v.pv_reason, "repeated_header") != 0) {
				wrong++;
			}
			pt_request_finish(&c);
		}
	}
	return wrong;
}

#endif
