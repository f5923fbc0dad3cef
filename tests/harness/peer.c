/* peer.c: a scriptable HTTP test peer on libmicrohttpd (tests only). */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "peer.h"

#define PEER_BODY_MAX (16 * 1024 * 1024) /* bytes of a request body kept */
#define PEER_ROUTES_MAX 16
#define PEER_SCRIPT_MAX 256
#define PEER_HANDLERS_MAX 8

struct peer_step {
	char *ps_path;              /* NULL: any */
	struct peer_behaviour ps_b; /* pb_body, pb_retry_after and pb_headers owned */
};

struct peer_handler_entry {
	char *ph_prefix;
	peer_handler_fn ph_fn;
	void (*ph_done)(void *arg, struct peer_behaviour *ret);
	void *ph_arg;
};

struct peer {
	struct MHD_Daemon *p_daemon;
	char p_base[64];
	char p_ca[600];   /* peer_create_tls: its certificate, the CA to trust; else "" */
	char *p_tls_cert; /* PEM, kept while the daemon runs */
	char *p_tls_key;
	pthread_mutex_t p_lock;
	pthread_cond_t p_cond; /* requests arrive; stop */
	int p_stopping;
	struct peer_step p_defaults[PEER_ROUTES_MAX];
	size_t p_n_defaults;
	struct peer_step p_script[PEER_SCRIPT_MAX];
	size_t p_n_script;
	struct peer_handler_entry p_handlers[PEER_HANDLERS_MAX];
	size_t p_n_handlers;
	struct peer_request *p_reqs;
	size_t p_n_reqs;
};

struct peer_conn {
	char *pc_uri; /* the request line's target, as sent */
	int pc_started;
	char *pc_body;
	size_t pc_len;
	int pc_too_big;
};

struct peer_stream {
	struct peer *ps_peer;
	size_t ps_size;
	unsigned ps_ms;
};

static int64_t peer_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *peer_strdup(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

struct peer_behaviour peer_reply(int status, const char *body)
{
	struct peer_behaviour b;

	memset(&b, 0, sizeof(b));
	b.pb_action = PEER_REPLY;
	b.pb_status = status;
	b.pb_body = body;
	return b;
}

static int peer_step_set(struct peer_step *s, const char *path, const struct peer_behaviour *b)
{
	size_t i;

	memset(s, 0, sizeof(*s));
	s->ps_b = *b;
	s->ps_path = peer_strdup(path);
	s->ps_b.pb_body = peer_strdup(b->pb_body);
	s->ps_b.pb_retry_after = peer_strdup(b->pb_retry_after);
	for (i = 0; i < PEER_HEADERS_MAX && b->pb_headers[i] != NULL; i++) {
		s->ps_b.pb_headers[i] = peer_strdup(b->pb_headers[i]);
	}
	for (; i < PEER_HEADERS_MAX; i++) {
		s->ps_b.pb_headers[i] = NULL;
	}
	return 0;
}

static void peer_step_finish(struct peer_step *s)
{
	size_t i;

	free(s->ps_path);
	free((char *)s->ps_b.pb_body);
	free((char *)s->ps_b.pb_retry_after);
	for (i = 0; i < PEER_HEADERS_MAX; i++) {
		free((char *)s->ps_b.pb_headers[i]);
	}
	memset(s, 0, sizeof(*s));
}

static int peer_path_matches(const struct peer_step *s, const char *path)
{
	return s->ps_path == NULL || strcmp(s->ps_path, path) == 0;
}

/* Picks the behaviour for path (caller holds the lock); copies into ret with
 * owned strings. Returns 1 instead, with *ret_handler, when a handler
 * answers it. */
static int peer_pick(struct peer *p, const char *path, struct peer_step *ret,
                     struct peer_handler_entry *ret_handler)
{
	size_t i;

	for (i = 0; i < p->p_n_script; i++) {
		if (peer_path_matches(&p->p_script[i], path)) {
			*ret = p->p_script[i];
			memmove(&p->p_script[i], &p->p_script[i + 1],
			        (p->p_n_script - i - 1) * sizeof(p->p_script[0]));
			p->p_n_script--;
			return 0;
		}
	}
	for (i = 0; i < p->p_n_handlers; i++) {
		if (strncmp(path, p->p_handlers[i].ph_prefix, strlen(p->p_handlers[i].ph_prefix)) ==
		    0) {
			*ret_handler = p->p_handlers[i];
			return 1;
		}
	}
	/* The last matching default wins, so a path default beats "any". */
	for (i = p->p_n_defaults; i > 0; i--) {
		if (p->p_defaults[i - 1].ps_path != NULL &&
		    strcmp(p->p_defaults[i - 1].ps_path, path) == 0) {
			peer_step_set(ret, path, &p->p_defaults[i - 1].ps_b);
			return 0;
		}
	}
	for (i = p->p_n_defaults; i > 0; i--) {
		if (p->p_defaults[i - 1].ps_path == NULL) {
			peer_step_set(ret, path, &p->p_defaults[i - 1].ps_b);
			return 0;
		}
	}
	{
		struct peer_behaviour ok = peer_reply(200, "{}");

		peer_step_set(ret, path, &ok);
	}
	return 0;
}

static const char *peer_header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The request as received, into r (owned copies). */
static void peer_request_fill(struct peer_request *r, struct MHD_Connection *c, const char *method,
                              const char *path, const struct peer_conn *pc)
{
	const char *q = pc->pc_uri != NULL ? strchr(pc->pc_uri, '?') : NULL;

	memset(r, 0, sizeof(*r));
	r->pq_method = peer_strdup(method);
	r->pq_path = peer_strdup(path);
	r->pq_query = peer_strdup(q != NULL ? q + 1 : "");
	r->pq_idem_key = peer_strdup(peer_header(c, "Idempotency-Key"));
	r->pq_content_type = peer_strdup(peer_header(c, "Content-Type"));
	r->pq_authorization = peer_strdup(peer_header(c, "Authorization"));
	r->pq_webhook_id = peer_strdup(peer_header(c, "webhook-id"));
	r->pq_webhook_timestamp = peer_strdup(peer_header(c, "webhook-timestamp"));
	r->pq_webhook_signature = peer_strdup(peer_header(c, "webhook-signature"));
	r->pq_stripe_context = peer_strdup(peer_header(c, "Stripe-Context"));
	r->pq_body = malloc(pc->pc_len + 1);
	if (r->pq_body != NULL) {
		if (pc->pc_len > 0) {
			memcpy(r->pq_body, pc->pc_body, pc->pc_len);
		}
		r->pq_body[pc->pc_len] = '\0';
		r->pq_body_len = pc->pc_len;
	}
	r->pq_at_ms = peer_now_ms();
}

static void peer_record(struct peer *p, struct MHD_Connection *c, const char *method,
                        const char *path, struct peer_conn *pc, enum peer_action action)
{
	struct peer_request r;
	struct peer_request *grown;

	peer_request_fill(&r, c, method, path, pc);
	r.pq_action = action;
	pthread_mutex_lock(&p->p_lock);
	grown = realloc(p->p_reqs, (p->p_n_reqs + 1) * sizeof(*grown));
	if (grown != NULL) {
		p->p_reqs = grown;
		p->p_reqs[p->p_n_reqs++] = r;
		memset(&r, 0, sizeof(r));
	}
	pthread_cond_broadcast(&p->p_cond);
	pthread_mutex_unlock(&p->p_lock);
	peer_request_finish(&r);
}

/* Sleeps ms (0: until stop). Returns 1 when the peer is stopping. */
static int peer_sleep(struct peer *p, unsigned ms)
{
	struct timespec until;
	int stopping;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->p_lock);
	while (!p->p_stopping) {
		int rc = ms == 0 ? pthread_cond_wait(&p->p_cond, &p->p_lock)
		                 : pthread_cond_timedwait(&p->p_cond, &p->p_lock, &until);

		if (rc == ETIMEDOUT) {
			break;
		}
	}
	stopping = p->p_stopping;
	pthread_mutex_unlock(&p->p_lock);
	return stopping;
}

static ssize_t peer_huge_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct peer_stream *s = cls;
	size_t n;

	if (pos >= s->ps_size) {
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	n = s->ps_size - (size_t)pos;
	if (n > max) {
		n = max;
	}
	memset(buf, 'x', n);
	return (ssize_t)n;
}

static ssize_t peer_drip_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct peer_stream *s = cls;

	if (pos >= s->ps_size) {
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	if (max == 0) {
		return 0;
	}
	if (pos > 0 && peer_sleep(s->ps_peer, s->ps_ms == 0 ? 1 : s->ps_ms)) {
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	buf[0] = 'd';
	return 1;
}

static void peer_stream_free(void *cls)
{
	free(cls);
}

static enum MHD_Result peer_queue(struct MHD_Connection *c, struct MHD_Response *resp, int status)
{
	enum MHD_Result rc;

	if (resp == NULL) {
		return MHD_NO;
	}
	rc = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* The extra "Name: value" fields of b. */
static void peer_add_headers(struct MHD_Response *resp, const struct peer_behaviour *b)
{
	size_t i;

	for (i = 0; i < PEER_HEADERS_MAX && b->pb_headers[i] != NULL; i++) {
		const char *colon = strchr(b->pb_headers[i], ':');
		char name[128];
		size_t n;

		if (colon == NULL || (size_t)(colon - b->pb_headers[i]) >= sizeof(name)) {
			continue;
		}
		n = (size_t)(colon - b->pb_headers[i]);
		memcpy(name, b->pb_headers[i], n);
		name[n] = '\0';
		colon++;
		while (*colon == ' ') {
			colon++;
		}
		MHD_add_response_header(resp, name, colon);
	}
}

static enum MHD_Result peer_answer(struct peer *p, struct MHD_Connection *c,
                                   const struct peer_step *step)
{
	const struct peer_behaviour *b = &step->ps_b;
	int status = b->pb_status != 0 ? b->pb_status : 200;
	const char *body = b->pb_body != NULL ? b->pb_body : "{}";
	struct MHD_Response *resp;
	struct peer_stream *s;

	switch (b->pb_action) {
	case PEER_REPLY:
	case PEER_RETRY_AFTER:
		if (b->pb_action == PEER_RETRY_AFTER) {
			status = 429;
		}
		resp = MHD_create_response_from_buffer(strlen(body), (void *)body,
		                                       MHD_RESPMEM_MUST_COPY);
		if (resp == NULL) {
			return MHD_NO;
		}
		MHD_add_response_header(resp, "Content-Type", "application/json");
		if (b->pb_retry_after != NULL) {
			MHD_add_response_header(resp, "Retry-After", b->pb_retry_after);
		}
		peer_add_headers(resp, b);
		return peer_queue(c, resp, status);
	case PEER_HANG:
		peer_sleep(p, b->pb_ms);
		return MHD_NO;
	case PEER_CLOSE:
		return MHD_NO;
	case PEER_DRIP:
	case PEER_HUGE:
		s = calloc(1, sizeof(*s));
		if (s == NULL) {
			return MHD_NO;
		}
		s->ps_peer = p;
		s->ps_size = b->pb_size;
		s->ps_ms = b->pb_ms;
		resp = MHD_create_response_from_callback(
		        b->pb_size, b->pb_action == PEER_DRIP ? 1 : 64 * 1024,
		        b->pb_action == PEER_DRIP ? peer_drip_read : peer_huge_read, s,
		        peer_stream_free);
		if (resp == NULL) {
			free(s);
			return MHD_NO;
		}
		return peer_queue(c, resp, status);
	}
	return MHD_NO;
}

static enum MHD_Result peer_handle(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
	struct peer *p = cls;
	struct peer_conn *pc = *con_cls;
	struct peer_handler_entry h;
	struct peer_step step;
	enum MHD_Result rc;

	(void)version;
	if (pc == NULL) {
		pc = calloc(1, sizeof(*pc));
		if (pc == NULL) {
			return MHD_NO;
		}
		*con_cls = pc;
	}
	if (!pc->pc_started) {
		pc->pc_started = 1;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		if (pc->pc_len + n > PEER_BODY_MAX) {
			pc->pc_too_big = 1;
		} else {
			char *grown = realloc(pc->pc_body, pc->pc_len + n + 1);

			if (grown == NULL) {
				return MHD_NO;
			}
			pc->pc_body = grown;
			memcpy(pc->pc_body + pc->pc_len, upload_data, n);
			pc->pc_len += n;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	memset(&h, 0, sizeof(h));
	pthread_mutex_lock(&p->p_lock);
	rc = peer_pick(p, url, &step, &h) ? MHD_YES : MHD_NO;
	pthread_mutex_unlock(&p->p_lock);
	if (rc == MHD_YES) {
		/* A fake: the answer is computed from the request. */
		struct peer_request req;
		struct peer_behaviour b;

		peer_request_fill(&req, c, method, url, pc);
		memset(&b, 0, sizeof(b));
		b.pb_action = PEER_REPLY;
		h.ph_fn(h.ph_arg, &req, &b);
		peer_step_set(&step, url, &b);
		if (h.ph_done != NULL) {
			h.ph_done(h.ph_arg, &b);
		}
		peer_request_finish(&req);
	}
	peer_record(p, c, method, url, pc, step.ps_b.pb_action);
	rc = peer_answer(p, c, &step);
	peer_step_finish(&step);
	return rc;
}

/* The request target as sent, query included, before MHD parses it. */
static void *peer_uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct peer_conn *pc = calloc(1, sizeof(*pc));

	(void)cls;
	(void)c;
	if (pc != NULL) {
		pc->pc_uri = peer_strdup(uri);
	}
	return pc;
}

static void peer_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                           enum MHD_RequestTerminationCode toe)
{
	struct peer_conn *pc = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (pc != NULL) {
		free(pc->pc_uri);
		free(pc->pc_body);
		free(pc);
		*con_cls = NULL;
	}
}

struct peer *peer_create(void)
{
	return peer_create_on(0);
}

/* Starts p's daemon on port (0: ephemeral), over TLS when p holds a
 * certificate and key. 0 or -1. */
static int peer_start(struct peer *p, unsigned port)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;

	pthread_mutex_init(&p->p_lock, NULL);
	pthread_cond_init(&p->p_cond, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	/* A thread per connection, so a hanging or dripping answer blocks only its own. */
	if (p->p_tls_cert != NULL) {
		p->p_daemon = MHD_start_daemon(
		        flags | MHD_USE_TLS, 0, NULL, NULL, peer_handle, p, MHD_OPTION_SOCK_ADDR,
		        (struct sockaddr *)&sa, MHD_OPTION_URI_LOG_CALLBACK, peer_uri_log, p,
		        MHD_OPTION_NOTIFY_COMPLETED, peer_completed, p,
		        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_HTTPS_MEM_CERT,
		        p->p_tls_cert, MHD_OPTION_HTTPS_MEM_KEY, p->p_tls_key, MHD_OPTION_END);
	} else {
		p->p_daemon = MHD_start_daemon(
		        flags, 0, NULL, NULL, peer_handle, p, MHD_OPTION_SOCK_ADDR,
		        (struct sockaddr *)&sa, MHD_OPTION_URI_LOG_CALLBACK, peer_uri_log, p,
		        MHD_OPTION_NOTIFY_COMPLETED, peer_completed, p,
		        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
	}
	if (p->p_daemon == NULL) {
		fprintf(stderr, "peer: MHD_start_daemon failed\n");
		return -1;
	}
	info = MHD_get_daemon_info(p->p_daemon, MHD_DAEMON_INFO_BIND_PORT);
	if (info == NULL || info->port == 0) {
		fprintf(stderr, "peer: no bound port\n");
		return -1;
	}
	snprintf(p->p_base, sizeof(p->p_base), "%s://127.0.0.1:%u",
	         p->p_tls_cert != NULL ? "https" : "http", (unsigned)info->port);
	return 0;
}

struct peer *peer_create_on(unsigned port)
{
	struct peer *p = calloc(1, sizeof(*p));

	if (p == NULL) {
		return NULL;
	}
	if (peer_start(p, port) < 0) {
		peer_destroy(p);
		return NULL;
	}
	return p;
}

/* The whole file at path, NUL-terminated, or NULL. */
static char *peer_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *data = NULL;
	long len;

	if (f == NULL) {
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
		data = calloc(1, (size_t)len + 1);
		if (data != NULL && fread(data, 1, (size_t)len, f) != (size_t)len) {
			free(data);
			data = NULL;
		}
	}
	fclose(f);
	return data;
}

struct peer *peer_create_tls(const char *dir)
{
	struct peer *p = calloc(1, sizeof(*p));
	char key[600];
	char cmd[1600];

	if (p == NULL) {
		return NULL;
	}
	snprintf(p->p_ca, sizeof(p->p_ca), "%s/peer-cert.pem", dir);
	snprintf(key, sizeof(key), "%s/peer-key.pem", dir);
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' -days 1 "
	         "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
	         key, p->p_ca);
	if (system(cmd) != 0) {
		fprintf(stderr, "peer: openssl could not make a certificate\n");
		free(p);
		return NULL;
	}
	p->p_tls_cert = peer_read_file(p->p_ca);
	p->p_tls_key = peer_read_file(key);
	if (p->p_tls_cert == NULL || p->p_tls_key == NULL || peer_start(p, 0) < 0) {
		peer_destroy(p);
		return NULL;
	}
	return p;
}

const char *peer_ca(const struct peer *p)
{
	return p->p_ca;
}

void peer_destroy(struct peer *p)
{
	size_t i;

	if (p == NULL) {
		return;
	}
	pthread_mutex_lock(&p->p_lock);
	p->p_stopping = 1;
	pthread_cond_broadcast(&p->p_cond);
	pthread_mutex_unlock(&p->p_lock);
	if (p->p_daemon != NULL) {
		MHD_stop_daemon(p->p_daemon);
	}
	for (i = 0; i < p->p_n_defaults; i++) {
		peer_step_finish(&p->p_defaults[i]);
	}
	for (i = 0; i < p->p_n_script; i++) {
		peer_step_finish(&p->p_script[i]);
	}
	for (i = 0; i < p->p_n_handlers; i++) {
		free(p->p_handlers[i].ph_prefix);
	}
	for (i = 0; i < p->p_n_reqs; i++) {
		peer_request_finish(&p->p_reqs[i]);
	}
	free(p->p_reqs);
	free(p->p_tls_cert);
	free(p->p_tls_key);
	pthread_cond_destroy(&p->p_cond);
	pthread_mutex_destroy(&p->p_lock);
	free(p);
}

const char *peer_base(const struct peer *p)
{
	return p->p_base;
}

int peer_default(struct peer *p, const char *path, const struct peer_behaviour *b)
{
	int rc = -1;

	pthread_mutex_lock(&p->p_lock);
	if (p->p_n_defaults < PEER_ROUTES_MAX) {
		peer_step_set(&p->p_defaults[p->p_n_defaults++], path, b);
		rc = 0;
	}
	pthread_mutex_unlock(&p->p_lock);
	return rc;
}

int peer_script(struct peer *p, const char *path, const struct peer_behaviour *b)
{
	int rc = -1;

	pthread_mutex_lock(&p->p_lock);
	if (p->p_n_script < PEER_SCRIPT_MAX) {
		peer_step_set(&p->p_script[p->p_n_script++], path, b);
		rc = 0;
	}
	pthread_mutex_unlock(&p->p_lock);
	return rc;
}

int peer_handler(struct peer *p, const char *prefix, peer_handler_fn fn,
                 void (*done)(void *arg, struct peer_behaviour *ret), void *arg)
{
	int rc = -1;

	pthread_mutex_lock(&p->p_lock);
	if (p->p_n_handlers < PEER_HANDLERS_MAX) {
		struct peer_handler_entry *h = &p->p_handlers[p->p_n_handlers];

		h->ph_prefix = peer_strdup(prefix);
		h->ph_fn = fn;
		h->ph_done = done;
		h->ph_arg = arg;
		if (h->ph_prefix != NULL) {
			p->p_n_handlers++;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&p->p_lock);
	return rc;
}

size_t peer_count(struct peer *p)
{
	size_t n;

	pthread_mutex_lock(&p->p_lock);
	n = p->p_n_reqs;
	pthread_mutex_unlock(&p->p_lock);
	return n;
}

size_t peer_wait(struct peer *p, size_t n, int timeout_ms)
{
	int64_t deadline = peer_now_ms() + timeout_ms;
	size_t have;

	pthread_mutex_lock(&p->p_lock);
	while (p->p_n_reqs < n && !p->p_stopping) {
		int64_t left = deadline - peer_now_ms();
		struct timespec until;

		if (left <= 0) {
			break;
		}
		if (left > 50) {
			left = 50;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)left * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->p_cond, &p->p_lock, &until);
	}
	have = p->p_n_reqs;
	pthread_mutex_unlock(&p->p_lock);
	return have;
}

int peer_request(struct peer *p, size_t i, struct peer_request *ret)
{
	const struct peer_request *r;
	int rc = -1;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&p->p_lock);
	if (i < p->p_n_reqs) {
		r = &p->p_reqs[i];
		ret->pq_method = peer_strdup(r->pq_method);
		ret->pq_path = peer_strdup(r->pq_path);
		ret->pq_query = peer_strdup(r->pq_query);
		ret->pq_idem_key = peer_strdup(r->pq_idem_key);
		ret->pq_content_type = peer_strdup(r->pq_content_type);
		ret->pq_authorization = peer_strdup(r->pq_authorization);
		ret->pq_webhook_id = peer_strdup(r->pq_webhook_id);
		ret->pq_webhook_timestamp = peer_strdup(r->pq_webhook_timestamp);
		ret->pq_webhook_signature = peer_strdup(r->pq_webhook_signature);
		ret->pq_stripe_context = peer_strdup(r->pq_stripe_context);
		ret->pq_body = malloc(r->pq_body_len + 1);
		if (ret->pq_body != NULL) {
			memcpy(ret->pq_body, r->pq_body != NULL ? r->pq_body : "", r->pq_body_len);
			ret->pq_body[r->pq_body_len] = '\0';
			ret->pq_body_len = r->pq_body_len;
		}
		ret->pq_at_ms = r->pq_at_ms;
		ret->pq_action = r->pq_action;
		rc = 0;
	}
	pthread_mutex_unlock(&p->p_lock);
	return rc;
}

void peer_request_finish(struct peer_request *r)
{
	free(r->pq_method);
	free(r->pq_path);
	free(r->pq_query);
	free(r->pq_idem_key);
	free(r->pq_content_type);
	free(r->pq_authorization);
	free(r->pq_webhook_id);
	free(r->pq_webhook_timestamp);
	free(r->pq_webhook_signature);
	free(r->pq_stripe_context);
	free(r->pq_body);
	memset(r, 0, sizeof(*r));
}
