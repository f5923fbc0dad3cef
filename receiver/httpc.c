/* httpc.c: a small blocking HTTP/1.1 client over plain TCP, one request per connection. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "httpc.h"
#include "text.h"

#define HTTPC_CHUNK 16384 /* bytes read per recv */

static void httpc_err(char *err, size_t err_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void httpc_err(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || err_size == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

static int64_t httpc_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or deadline_ms passes. Returns 1 when
 * ready, 0 on timeout, -1 on a poll error. */
static int httpc_wait(int fd, short events, int64_t deadline_ms)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int64_t left = deadline_ms - httpc_mono_ms();
		int rc;

		if (left <= 0) {
			return 0;
		}
		rc = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (rc < 0 && errno == EINTR) {
			continue;
		}
		if (rc < 0) {
			return -1;
		}
		return rc > 0;
	}
}

/* ---- header lists ---- */

void httpc_headers_init(struct httpc_headers *h)
{
	memset(h, 0, sizeof(*h));
}

void httpc_headers_finish(struct httpc_headers *h)
{
	size_t i;

	for (i = 0; i < h->hch_n; i++) {
		free((char *)h->hch_v[i].hh_name);
		free((char *)h->hch_v[i].hh_value);
	}
	httpc_headers_init(h);
}

void httpc_headers_add(void *arg, const char *name, const char *value)
{
	struct httpc_headers *h = arg;
	char *n;
	char *v;

	if (h->hch_n == HTTPC_HEADERS_MAX || name[0] == '\0' || strpbrk(name, "\r\n: \t") != NULL ||
	    strpbrk(value, "\r\n") != NULL) {
		h->hch_overflow = 1;
		return;
	}
	n = strdup(name);
	v = strdup(value);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		h->hch_overflow = 1;
		return;
	}
	h->hch_v[h->hch_n].hh_name = n;
	h->hch_v[h->hch_n].hh_value = v;
	h->hch_n++;
}

const char *httpc_headers_get(const struct httpc_headers *h, const char *name)
{
	size_t i;

	for (i = 0; i < h->hch_n; i++) {
		if (strcasecmp(h->hch_v[i].hh_name, name) == 0) {
			return h->hch_v[i].hh_value;
		}
	}
	return NULL;
}

/* ---- connect and send ---- */

/* Returns a connected non-blocking socket, or -1 (err set). */
static int httpc_connect(const char *host, unsigned port, int64_t deadline_ms, char *err,
                         size_t err_size)
{
	struct addrinfo hints;
	struct addrinfo *res = NULL;
	struct addrinfo *ai;
	char service[8];
	int fd = -1;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%u", port);
	rc = getaddrinfo(host, service, &hints, &res);
	if (rc != 0) {
		httpc_err(err, err_size, "cannot resolve %s: %s", host, gai_strerror(rc));
		goto fail;
	}
	httpc_err(err, err_size, "cannot connect to %s port %u", host, port);
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		int soerr = 0;
		socklen_t slen = sizeof(soerr);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
		            ai->ai_protocol);
		if (fd < 0) {
			httpc_err(err, err_size, "socket: %s", strerror(errno));
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			break;
		}
		if (errno == EINPROGRESS) {
			rc = httpc_wait(fd, POLLOUT, deadline_ms);
			if (rc > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) == 0 &&
			    soerr == 0) {
				break;
			}
			errno = rc == 0 ? ETIMEDOUT : soerr != 0 ? soerr : errno;
		}
		httpc_err(err, err_size, "cannot connect to %s port %u: %s", host, port,
		          strerror(errno));
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		goto fail;
	}
	freeaddrinfo(res);
	return fd;
fail:
	if (res != NULL) {
		freeaddrinfo(res);
	}
	return -1;
}

/* Hop-by-hop and framing fields are ours to write, never the caller's. */
static int httpc_skip_header(const char *name)
{
	static const char *const skip[] = {"Host",
	                                   "Content-Length",
	                                   "Connection",
	                                   "Transfer-Encoding",
	                                   "Expect",
	                                   "Keep-Alive",
	                                   "TE",
	                                   "Upgrade",
	                                   "Proxy-Connection"};
	size_t i;

	for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
		if (strcasecmp(name, skip[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

/* 1 when s is non-empty and holds no space, control character or DEL. */
static int httpc_token_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (*p == '\0') {
		return 0;
	}
	for (; *p != '\0'; p++) {
		if (*p <= ' ' || *p == 0x7f) {
			return 0;
		}
	}
	return 1;
}

/* The request's bytes into b. Returns 0, or -1 (err set). */
static int httpc_build(const struct httpc_request *req, struct buf *b, char *err, size_t err_size)
{
	const struct httpc_headers *h = req->hcq_headers;
	int v6 = strchr(req->hcq_host, ':') != NULL;
	size_t i;

	if (!httpc_token_ok(req->hcq_method) || !httpc_token_ok(req->hcq_target) ||
	    (h != NULL && h->hch_overflow)) {
		httpc_err(err, err_size, "malformed request (method, target or header fields)");
		goto fail;
	}
	if (buf_printf(b, "%s %s HTTP/1.1\r\nHost: %s%s%s:%u\r\n", req->hcq_method, req->hcq_target,
	               v6 ? "[" : "", req->hcq_host, v6 ? "]" : "", req->hcq_port) < 0) {
		goto nomem;
	}
	for (i = 0; h != NULL && i < h->hch_n; i++) {
		if (httpc_skip_header(h->hch_v[i].hh_name)) {
			continue;
		}
		if (buf_printf(b, "%s: %s\r\n", h->hch_v[i].hh_name, h->hch_v[i].hh_value) < 0) {
			goto nomem;
		}
	}
	if (buf_printf(b, "Content-Length: %zu\r\nConnection: close\r\n\r\n", req->hcq_body_len) <
	            0 ||
	    (req->hcq_body_len > 0 && buf_append(b, req->hcq_body, req->hcq_body_len) < 0)) {
		goto nomem;
	}
	return 0;
nomem:
	httpc_err(err, err_size, "out of memory");
fail:
	return -1;
}

static int httpc_send(int fd, const char *data, size_t len, int64_t deadline_ms, char *err,
                      size_t err_size)
{
	while (len > 0) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		int rc;

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			rc = httpc_wait(fd, POLLOUT, deadline_ms);
			if (rc == 0) {
				httpc_err(err, err_size, "timed out sending the request");
				goto fail;
			}
			if (rc < 0) {
				httpc_err(err, err_size, "poll: %s", strerror(errno));
				goto fail;
			}
			continue;
		}
		if (n < 0) {
			httpc_err(err, err_size, "cannot send the request: %s", strerror(errno));
			goto fail;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
fail:
	return -1;
}

/* ---- the answer ---- */

/* Walks a chunked body of len bytes at data. With decode, moves the chunks'
 * data together at data and sets *ret_len. Returns 1 when the last chunk
 * and the trailer are complete, 0 when more is needed, -1 when malformed. */
static int httpc_chunked(char *data, size_t len, int decode, size_t *ret_len)
{
	size_t at = 0;
	size_t out = 0;

	for (;;) {
		size_t size = 0;
		size_t digits = 0;
		const char *eol;

		while (at < len && text_hex_value(data[at]) >= 0) {
			int v = text_hex_value(data[at]);

			if (size > (SIZE_MAX >> 4)) {
				return -1;
			}
			size = size * 16 + (size_t)v;
			digits++;
			at++;
		}
		if (at == len) {
			return 0;
		}
		if (digits == 0 ||
		    (data[at] != ';' && data[at] != '\r' && data[at] != ' ' && data[at] != '\t')) {
			return -1;
		}
		/* Chunk extensions are allowed and ignored. */
		eol = memchr(data + at, '\n', len - at);
		if (eol == NULL) {
			return 0;
		}
		at = (size_t)(eol - data) + 1;
		if (size == 0) {
			break;
		}
		if (size > len - at || len - at - size < 2) {
			return 0;
		}
		if (data[at + size] != '\r' || data[at + size + 1] != '\n') {
			return -1;
		}
		if (decode) {
			memmove(data + out, data + at, size);
		}
		out += size;
		at += size + 2;
	}
	/* Trailer fields, ignored, up to the empty line. */
	for (;;) {
		const char *eol = memchr(data + at, '\n', len - at);

		if (eol == NULL) {
			return 0;
		}
		if (eol == data + at || (eol == data + at + 1 && data[at] == '\r')) {
			break;
		}
		at = (size_t)(eol - data) + 1;
	}
	if (decode) {
		data[out] = '\0';
		*ret_len = out;
	}
	return 1;
}

/* Parses a Content-Length value. Returns 0, or -1 when not all digits. */
static int httpc_content_length(const char *s, size_t *ret)
{
	size_t v = 0;

	if (*s == '\0') {
		return -1;
	}
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || v > (SIZE_MAX - 9) / 10) {
			return -1;
		}
		v = v * 10 + (size_t)(*s - '0');
	}
	*ret = v;
	return 0;
}

/* Splits the head (NUL-terminated, CRLF lines, without the blank line) in
 * place into status and fields. Returns 0, or -1 when malformed. */
static int httpc_parse_head(char *head, struct httpc_response *r)
{
	char *line = head;
	char *next;

	next = strstr(line, "\r\n");
	if (next != NULL) {
		*next = '\0';
		next += 2;
	}
	/* "HTTP/1.x NNN[ reason]" */
	if (strncmp(line, "HTTP/1.", 7) != 0 || line[7] < '0' || line[7] > '9' || line[8] != ' ' ||
	    line[9] < '1' || line[9] > '5' || line[10] < '0' || line[10] > '9' || line[11] < '0' ||
	    line[11] > '9' || (line[12] != ' ' && line[12] != '\0')) {
		goto fail;
	}
	r->hcr_status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	r->hcr_headers = calloc(HTTPC_HEADERS_MAX, sizeof(r->hcr_headers[0]));
	if (r->hcr_headers == NULL) {
		goto fail;
	}
	while (next != NULL && *next != '\0') {
		char *colon;
		char *v;
		char *end;

		line = next;
		next = strstr(line, "\r\n");
		if (next != NULL) {
			*next = '\0';
			next += 2;
		}
		colon = strchr(line, ':');
		if (colon == NULL || colon == line || r->hcr_n_headers == HTTPC_HEADERS_MAX) {
			goto fail;
		}
		*colon = '\0';
		/* Whitespace in a name, or an obsolete folded line. */
		if (strpbrk(line, " \t") != NULL) {
			goto fail;
		}
		v = colon + 1;
		while (*v == ' ' || *v == '\t') {
			v++;
		}
		end = v + strlen(v);
		while (end > v && (end[-1] == ' ' || end[-1] == '\t')) {
			end--;
		}
		*end = '\0';
		r->hcr_headers[r->hcr_n_headers].hh_name = line;
		r->hcr_headers[r->hcr_n_headers].hh_value = v;
		r->hcr_n_headers++;
	}
	return 0;
fail:
	free(r->hcr_headers);
	r->hcr_headers = NULL;
	r->hcr_n_headers = 0;
	return -1;
}

/* How the body ends, known once the head is in. */
enum httpc_framing {
	HTTPC_FRAME_NONE, /* no body: HEAD, 1xx, 204, 304 */
	HTTPC_FRAME_LENGTH,
	HTTPC_FRAME_CHUNKED,
	HTTPC_FRAME_CLOSE, /* until the server closes */
};

static int httpc_framing(const struct httpc_request *req, const struct httpc_response *r,
                         enum httpc_framing *ret, size_t *ret_length, char *err, size_t err_size)
{
	const char *te = httpc_response_header(r, "Transfer-Encoding");
	const char *cl = httpc_response_header(r, "Content-Length");

	if (strcmp(req->hcq_method, "HEAD") == 0 || r->hcr_status < 200 || r->hcr_status == 204 ||
	    r->hcr_status == 304) {
		*ret = HTTPC_FRAME_NONE;
		return 0;
	}
	if (te != NULL) {
		if (strcasecmp(te, "chunked") != 0) {
			httpc_err(err, err_size, "unsupported Transfer-Encoding in the answer");
			return -1;
		}
		*ret = HTTPC_FRAME_CHUNKED;
		return 0;
	}
	if (cl != NULL) {
		if (httpc_content_length(cl, ret_length) < 0) {
			httpc_err(err, err_size, "malformed Content-Length in the answer");
			return -1;
		}
		if (*ret_length > req->hcq_answer_max) {
			httpc_err(err, err_size, "the answer's body is over %zu bytes",
			          req->hcq_answer_max);
			return -1;
		}
		*ret = HTTPC_FRAME_LENGTH;
		return 0;
	}
	*ret = HTTPC_FRAME_CLOSE;
	return 0;
}

/* Reads the whole answer from fd. Returns 0 with ret filled, or -1 (err
 * set, ret untouched). */
static int httpc_read(int fd, const struct httpc_request *req, int64_t deadline_ms,
                      struct httpc_response *ret, char *err, size_t err_size)
{
	struct httpc_response r;
	enum httpc_framing framing = HTTPC_FRAME_CLOSE;
	struct buf b;
	char *chunk = NULL;
	size_t body_at = 0; /* 0 until the blank line after the head is in */
	size_t length = 0;
	size_t body_len = 0;
	int done = 0;

	memset(&r, 0, sizeof(r));
	buf_init(&b, 0);
	chunk = malloc(HTTPC_CHUNK);
	if (chunk == NULL) {
		httpc_err(err, err_size, "out of memory");
		goto fail;
	}
	while (!done) {
		ssize_t n = recv(fd, chunk, HTTPC_CHUNK, 0);
		size_t scan_from = b.buf_len > 3 ? b.buf_len - 3 : 0;
		int rc;

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			rc = httpc_wait(fd, POLLIN, deadline_ms);
			if (rc == 0) {
				httpc_err(err, err_size, "timed out waiting for the answer");
				goto fail;
			}
			if (rc < 0) {
				httpc_err(err, err_size, "poll: %s", strerror(errno));
				goto fail;
			}
			continue;
		}
		if (n < 0) {
			httpc_err(err, err_size, "cannot read the answer: %s", strerror(errno));
			goto fail;
		}
		if (n == 0) {
			if (body_at == 0) {
				httpc_err(err, err_size,
				          "connection closed without an HTTP answer");
				goto fail;
			}
			if (framing != HTTPC_FRAME_CLOSE) {
				httpc_err(err, err_size, "connection closed in the answer's body");
				goto fail;
			}
			break;
		}
		if (buf_append(&b, chunk, (size_t)n) < 0) {
			httpc_err(err, err_size, "out of memory");
			goto fail;
		}
		if (body_at == 0) {
			char *head_end = memmem(b.buf_data + scan_from, b.buf_len - scan_from,
			                        "\r\n\r\n", 4);

			if (head_end == NULL) {
				if (b.buf_len > HTTPC_HEAD_MAX) {
					httpc_err(err, err_size,
					          "the answer's head is over %d bytes",
					          HTTPC_HEAD_MAX);
					goto fail;
				}
				continue;
			}
			body_at = (size_t)(head_end - b.buf_data) + 4;
			if (body_at > HTTPC_HEAD_MAX) {
				httpc_err(err, err_size, "the answer's head is over %d bytes",
				          HTTPC_HEAD_MAX);
				goto fail;
			}
			/* Parsed in place: the head's strings end where its CRLFs were. */
			head_end[2] = '\0';
			if (httpc_parse_head(b.buf_data, &r) < 0) {
				httpc_err(err, err_size, "malformed answer (not HTTP/1.x)");
				goto fail;
			}
			if (httpc_framing(req, &r, &framing, &length, err, err_size) < 0) {
				goto fail;
			}
		}
		body_len = b.buf_len - body_at;
		/* A Content-Length over the cap was refused with the head. */
		if ((framing == HTTPC_FRAME_CHUNKED || framing == HTTPC_FRAME_CLOSE) &&
		    body_len > req->hcq_answer_max) {
			httpc_err(err, err_size, "the answer's body is over %zu bytes",
			          req->hcq_answer_max);
			goto fail;
		}
		switch (framing) {
		case HTTPC_FRAME_NONE:
			body_len = 0;
			done = 1;
			break;
		case HTTPC_FRAME_LENGTH:
			if (body_len >= length) {
				body_len = length;
				done = 1;
			}
			break;
		case HTTPC_FRAME_CHUNKED:
			rc = httpc_chunked(b.buf_data + body_at, body_len, 0, NULL);
			if (rc < 0) {
				httpc_err(err, err_size, "malformed chunked body in the answer");
				goto fail;
			}
			if (rc > 0) {
				httpc_chunked(b.buf_data + body_at, body_len, 1, &body_len);
				done = 1;
			}
			break;
		case HTTPC_FRAME_CLOSE:
			break;
		}
	}
	r.hcr_raw = buf_take(&b, NULL);
	if (r.hcr_raw == NULL) {
		httpc_err(err, err_size, "out of memory");
		goto fail;
	}
	/* buf_take hands the same allocation over: the header pointers hold. */
	r.hcr_body = r.hcr_raw + body_at;
	r.hcr_body[body_len] = '\0';
	r.hcr_body_len = body_len;
	free(chunk);
	*ret = r;
	return 0;
fail:
	free(r.hcr_headers);
	free(chunk);
	buf_finish(&b);
	return -1;
}

/* ---- one exchange ---- */

int httpc_exchange(const struct httpc_request *req, struct httpc_response *ret, char *err,
                   size_t err_size)
{
	struct buf b;
	int fd = -1;

	buf_init(&b, 0);
	if (httpc_build(req, &b, err, err_size) < 0) {
		goto fail;
	}
	fd = httpc_connect(req->hcq_host, req->hcq_port, httpc_mono_ms() + req->hcq_timeout_ms, err,
	                   err_size);
	if (fd < 0) {
		goto fail;
	}
	if (httpc_send(fd, b.buf_data, b.buf_len, httpc_mono_ms() + req->hcq_timeout_ms, err,
	               err_size) < 0 ||
	    httpc_read(fd, req, httpc_mono_ms() + req->hcq_timeout_ms, ret, err, err_size) < 0) {
		goto fail;
	}
	close(fd);
	buf_finish(&b);
	return 0;
fail:
	if (fd >= 0) {
		close(fd);
	}
	buf_finish(&b);
	return -1;
}

const char *httpc_response_header(const struct httpc_response *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->hcr_n_headers; i++) {
		if (strcasecmp(r->hcr_headers[i].hh_name, name) == 0) {
			return r->hcr_headers[i].hh_value;
		}
	}
	return NULL;
}

void httpc_response_finish(struct httpc_response *r)
{
	free(r->hcr_headers);
	free(r->hcr_raw);
	memset(r, 0, sizeof(*r));
}
