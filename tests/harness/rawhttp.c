/* rawhttp.c: HTTP/1.1 as raw bytes over a socket, for the tests. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
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

int rh_wait_closed(int fd, int timeout_ms)
{
	long long end = rh_now_ms() + timeout_ms;
	char sink[4096];

	for (;;) {
		ssize_t n;

		if (rh_wait(fd, end) <= 0) {
			return 0;
		}
		n = recv(fd, sink, sizeof(sink), 0);
		if (n <= 0) {
			return 1;
		}
	}
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
