/* rawhttp.c: HTTP/1.1 as raw bytes over a socket, for the tests. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rawhttp.h"

#define RH_HEAD_MAX (64 * 1024)

static long long rh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rh_connect(const char *source, unsigned port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		return -1;
	}
	if (source != NULL) {
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		inet_pton(AF_INET, source, &sa.sin_addr);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(fd);
			return -1;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int rh_send(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Waits until fd is readable or the deadline; 1, 0 on timeout, -1. */
static int rh_wait(int fd, long long end)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	long long left = end - rh_now_ms();
	int rc;

	if (left <= 0) {
		return 0;
	}
	rc = poll(&pfd, 1, (int)left);
	return rc < 0 ? -1 : rc;
}

char *rh_header(const struct rh_response *r, const char *name)
{
	size_t nlen = strlen(name);
	const char *p = r->rr_head;

	while (p != NULL && *p != '\0') {
		const char *eol = strstr(p, "\r\n");
		size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);

		if (len > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
			const char *v = p + nlen + 1;

			while (*v == ' ') {
				v++;
			}
			return strndup(v, len - (size_t)(v - p));
		}
		p = eol != NULL ? eol + 2 : NULL;
	}
	return NULL;
}

int rh_read_response(int fd, int timeout_ms, struct rh_response *ret)
{
	long long end = rh_now_ms() + timeout_ms;
	char *buf = malloc(RH_HEAD_MAX + 1);
	size_t have = 0;
	size_t head_len = 0;
	size_t want = 0;
	char *cl;
	char *conn;

	memset(ret, 0, sizeof(*ret));
	if (buf == NULL) {
		return -1;
	}
	/* One byte at a time would be slow; the head and body may come in
	 * one piece with nothing after them (clients here never pipeline). */
	for (;;) {
		ssize_t n;
		char *blank;

		if (rh_wait(fd, end) <= 0) {
			goto fail;
		}
		n = recv(fd, buf + have, RH_HEAD_MAX - have, 0);
		if (n == 0 && have == 0) {
			free(buf);
			return 0;
		}
		if (n <= 0) {
			if (n < 0 && have == 0 && (errno == ECONNRESET || errno == EPIPE)) {
				free(buf);
				return 0;
			}
			goto fail;
		}
		have += (size_t)n;
		buf[have] = '\0';
		blank = strstr(buf, "\r\n\r\n");
		if (blank != NULL) {
			head_len = (size_t)(blank - buf) + 4;
			break;
		}
		if (have == RH_HEAD_MAX) {
			goto fail;
		}
	}
	ret->rr_head = strndup(buf, head_len - 2);
	if (ret->rr_head == NULL || sscanf(buf, "HTTP/1.%*d %d", &ret->rr_status) != 1) {
		goto fail;
	}
	cl = rh_header(ret, "Content-Length");
	want = cl != NULL ? strtoul(cl, NULL, 10) : 0;
	free(cl);
	conn = rh_header(ret, "Connection");
	ret->rr_close = conn != NULL && strcasecmp(conn, "close") == 0;
	free(conn);
	ret->rr_body = malloc(want + 1);
	if (ret->rr_body == NULL) {
		goto fail;
	}
	ret->rr_body_len = have - head_len < want ? have - head_len : want;
	memcpy(ret->rr_body, buf + head_len, ret->rr_body_len);
	while (ret->rr_body_len < want) {
		ssize_t n;

		if (rh_wait(fd, end) <= 0) {
			goto fail;
		}
		n = recv(fd, ret->rr_body + ret->rr_body_len, want - ret->rr_body_len, 0);
		if (n <= 0) {
			goto fail;
		}
		ret->rr_body_len += (size_t)n;
	}
	ret->rr_body[ret->rr_body_len] = '\0';
	free(buf);
	return 1;
fail:
	free(buf);
	rh_response_finish(ret);
	return -1;
}

void rh_response_finish(struct rh_response *r)
{
	free(r->rr_head);
	free(r->rr_body);
	memset(r, 0, sizeof(*r));
}

int rh_exchange(unsigned port, const void *data, size_t len, int timeout_ms,
                struct rh_response *ret)
{
	int fd = rh_connect(NULL, port);
	int rc;

	memset(ret, 0, sizeof(*ret));
	if (fd < 0) {
		return -1;
	}
	/* A refused request may be answered before all of it is sent. */
	(void)rh_send(fd, data, len);
	rc = rh_read_response(fd, timeout_ms, ret);
	close(fd);
	return rc;
}

int rh_wait_end(int fd, int timeout_ms)
{
	long long end = rh_now_ms() + timeout_ms;
	char sink[4096];

	for (;;) {
		ssize_t n;

		if (rh_wait(fd, end) <= 0) {
			return 0;
		}
		n = recv(fd, sink, sizeof(sink), 0);
		if (n == 0) {
			return 1;
		}
		if (n < 0 && errno != EINTR && errno != EAGAIN) {
			return -1;
		}
	}
}

int rh_wait_closed(int fd, int timeout_ms)
{
	/* a reset is a close too */
	return rh_wait_end(fd, timeout_ms) != 0;
}

int rh_closed_now(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char c;

	if (poll(&pfd, 1, 0) <= 0) {
		return 0;
	}
	return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

struct rh_plain {
	int rp_fd; /* listening */
	unsigned rp_port;
	pthread_t rp_thread;
	pthread_mutex_t rp_lock;
	int rp_stop;
	unsigned rp_count;
	int rp_silent; /* rh_silent_start: closes without a byte */
};

/* Waits up to timeout_ms for fd to be readable; 1, or 0. */
static int rh_readable(int fd, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, timeout_ms) > 0;
}

/* One connection: what came first is answered, then the client's close
 * is waited for (2 s at most) before the socket is closed. */
static void rh_plain_serve(int fd)
{
	static const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
	                             "Connection: close\r\n\r\n";
	char in[4096];
	long long until;

	if (rh_readable(fd, 2000) && recv(fd, in, sizeof(in), 0) > 0) {
		(void)rh_send(fd, answer, sizeof(answer) - 1);
	}
	shutdown(fd, SHUT_WR);
	until = rh_now_ms() + 2000;
	while (rh_now_ms() < until && rh_readable(fd, 100)) {
		if (recv(fd, in, sizeof(in), 0) <= 0) {
			break;
		}
	}
	close(fd);
}

/* One connection: what came first is read, then the server closes without
 * a byte, waiting for the client's close (2 s at most), so no reset. */
static void rh_silent_serve(int fd)
{
	char in[4096];
	long long until;

	if (rh_readable(fd, 2000)) {
		(void)recv(fd, in, sizeof(in), 0);
	}
	shutdown(fd, SHUT_WR);
	until = rh_now_ms() + 2000;
	while (rh_now_ms() < until && rh_readable(fd, 100)) {
		if (recv(fd, in, sizeof(in), 0) <= 0) {
			break;
		}
	}
	close(fd);
}

static void *rh_plain_main(void *arg)
{
	struct rh_plain *s = arg;

	for (;;) {
		int stop;
		int fd;

		pthread_mutex_lock(&s->rp_lock);
		stop = s->rp_stop;
		pthread_mutex_unlock(&s->rp_lock);
		if (stop) {
			return NULL;
		}
		if (!rh_readable(s->rp_fd, 50)) {
			continue;
		}
		fd = accept(s->rp_fd, NULL, NULL);
		if (fd < 0) {
			continue;
		}
		pthread_mutex_lock(&s->rp_lock);
		s->rp_count++;
		pthread_mutex_unlock(&s->rp_lock);
		if (s->rp_silent) {
			rh_silent_serve(fd);
		} else {
			rh_plain_serve(fd);
		}
	}
}

static struct rh_plain *rh_plain_start_as(int silent)
{
	struct rh_plain *s = calloc(1, sizeof(*s));
	struct sockaddr_in sa;
	socklen_t slen = sizeof(sa);

	if (s == NULL) {
		return NULL;
	}
	s->rp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s->rp_fd < 0 || bind(s->rp_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(s->rp_fd, 16) < 0 || getsockname(s->rp_fd, (struct sockaddr *)&sa, &slen) < 0) {
		goto fail;
	}
	s->rp_port = ntohs(sa.sin_port);
	s->rp_silent = silent;
	pthread_mutex_init(&s->rp_lock, NULL);
	if (pthread_create(&s->rp_thread, NULL, rh_plain_main, s) != 0) {
		pthread_mutex_destroy(&s->rp_lock);
		goto fail;
	}
	return s;
fail:
	if (s->rp_fd >= 0) {
		close(s->rp_fd);
	}
	free(s);
	return NULL;
}

struct rh_plain *rh_plain_start(void)
{
	return rh_plain_start_as(0);
}

struct rh_plain *rh_silent_start(void)
{
	return rh_plain_start_as(1);
}

unsigned rh_plain_port(const struct rh_plain *s)
{
	return s->rp_port;
}

unsigned rh_plain_count(struct rh_plain *s)
{
	unsigned n;

	pthread_mutex_lock(&s->rp_lock);
	n = s->rp_count;
	pthread_mutex_unlock(&s->rp_lock);
	return n;
}

void rh_plain_stop(struct rh_plain *s)
{
	if (s == NULL) {
		return;
	}
	pthread_mutex_lock(&s->rp_lock);
	s->rp_stop = 1;
	pthread_mutex_unlock(&s->rp_lock);
	pthread_join(s->rp_thread, NULL);
	pthread_mutex_destroy(&s->rp_lock);
	close(s->rp_fd);
	free(s);
}
