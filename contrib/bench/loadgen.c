/* loadgen.c: the benchmarks' HTTP/1.1 load generator (one epoll thread). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"

#define LG_RBUF 16384 /* bytes of one answer (head and body) */
#define LG_NONE ((size_t)-1)

struct lg_conn {
	int lc_fd;
	unsigned lc_source; /* index of its loopback source address */
	size_t lc_req; /* request in flight, or LG_NONE */
	size_t lc_sent; /* bytes of it written */
	double lc_due; /* when it was due (open loop) or sent (closed loop) */
	char lc_rbuf[LG_RBUF];
	size_t lc_rlen;
	int lc_writing; /* waiting for EPOLLOUT */
};

struct lg_state {
	const struct lg_options *ls_opt;
	const struct lg_request *ls_reqs;
	size_t ls_n;
	size_t ls_next; /* next request to hand out */
	size_t ls_answered;
	size_t ls_errors;
	size_t ls_dropped;
	int ls_bad_status;
	double ls_dropped_after_ms;
	double *ls_lat_ms;
	double ls_t0;
	double ls_last;
	int ls_ep;
};

static double lg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int lg_connect(struct lg_state *ls, struct lg_conn *c)
{
	struct sockaddr_in src;
	struct sockaddr_in dst;
	struct epoll_event ev;
	int one = 1;

	c->lc_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->lc_fd < 0) {
		return -1;
	}
	setsockopt(c->lc_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&src, 0, sizeof(src));
	src.sin_family = AF_INET;
	src.sin_addr.s_addr = htonl(0x7f000001u + c->lc_source);
	if (bind(c->lc_fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		goto fail;
	}
	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)ls->ls_opt->lo_port);
	dst.sin_addr.s_addr = htonl(0x7f000001u);
	if (connect(c->lc_fd, (struct sockaddr *)&dst, sizeof(dst)) < 0 && errno != EINPROGRESS) {
		goto fail;
	}
	c->lc_rlen = 0;
	c->lc_sent = 0;
	c->lc_writing = 0;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = c;
	if (epoll_ctl(ls->ls_ep, EPOLL_CTL_ADD, c->lc_fd, &ev) < 0) {
		goto fail;
	}
	return 0;
fail:
	close(c->lc_fd);
	c->lc_fd = -1;
	return -1;
}

static void lg_close(struct lg_state *ls, struct lg_conn *c)
{
	if (c->lc_fd >= 0) {
		epoll_ctl(ls->ls_ep, EPOLL_CTL_DEL, c->lc_fd, NULL);
		close(c->lc_fd);
		c->lc_fd = -1;
	}
}

static void lg_want_write(struct lg_state *ls, struct lg_conn *c, int on)
{
	struct epoll_event ev;

	if (c->lc_writing == on) {
		return;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | (on ? EPOLLOUT : 0);
	ev.data.ptr = c;
	epoll_ctl(ls->ls_ep, EPOLL_CTL_MOD, c->lc_fd, &ev);
	c->lc_writing = on;
}

/* Writes what is left of the request in flight. Returns 0, or -1. */
static int lg_flush(struct lg_state *ls, struct lg_conn *c)
{
	const struct lg_request *r = &ls->ls_reqs[c->lc_req];

	while (c->lc_sent < r->lr_len) {
		ssize_t w = send(c->lc_fd, r->lr_data + c->lc_sent, r->lr_len - c->lc_sent, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOTCONN) {
				lg_want_write(ls, c, 1);
				return 0;
			}
			return -1;
		}
		c->lc_sent += (size_t)w;
	}
	lg_want_write(ls, c, 0);
	return 0;
}

static void lg_finish_request(struct lg_state *ls, struct lg_conn *c, int ok)
{
	double now = lg_now();

	ls->ls_lat_ms[c->lc_req] = (now - c->lc_due) * 1000.0;
	ls->ls_answered++;
	ls->ls_errors += !ok;
	ls->ls_last = now;
	c->lc_req = LG_NONE;
	c->lc_sent = 0;
}

/* A transport failure: the request in flight counts as an error and the
 * connection is made again. */
static void lg_fail(struct lg_state *ls, struct lg_conn *c)
{
	if (c->lc_req != LG_NONE) {
		double waited = (lg_now() - c->lc_due) * 1000.0;

		ls->ls_dropped++;
		if (waited > ls->ls_dropped_after_ms) {
			ls->ls_dropped_after_ms = waited;
		}
		lg_finish_request(ls, c, 0);
	}
	lg_close(ls, c);
	lg_connect(ls, c);
}

/* Parses an answer in the read buffer. Returns 1 when a whole one is in
 * (ret_status, ret_close set, consumed), 0 when more is needed, -1 when
 * it cannot be read. */
static int lg_parse(struct lg_conn *c, int *ret_status, int *ret_close)
{
	char *end;
	char *p;
	size_t head;
	size_t body = 0;
	size_t total;

	if (c->lc_rlen < 12) {
		return 0;
	}
	c->lc_rbuf[c->lc_rlen < LG_RBUF ? c->lc_rlen : LG_RBUF - 1] = '\0';
	end = strstr(c->lc_rbuf, "\r\n\r\n");
	if (end == NULL) {
		return c->lc_rlen >= LG_RBUF - 1 ? -1 : 0;
	}
	head = (size_t)(end - c->lc_rbuf) + 4;
	if (strncmp(c->lc_rbuf, "HTTP/1.", 7) != 0) {
		return -1;
	}
	*ret_status = (int)strtol(c->lc_rbuf + 9, NULL, 10);
	*ret_close = 0;
	for (p = strstr(c->lc_rbuf, "\r\n"); p != NULL && p < end; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, "Content-Length:", 15) == 0) {
			body = strtoul(p + 17, NULL, 10);
		} else if (strncasecmp(p + 2, "Connection: close", 17) == 0) {
			*ret_close = 1;
		}
	}
	total = head + body;
	if (total >= LG_RBUF) {
		return -1;
	}
	if (c->lc_rlen < total) {
		return 0;
	}
	memmove(c->lc_rbuf, c->lc_rbuf + total, c->lc_rlen - total);
	c->lc_rlen -= total;
	return 1;
}

/* Hands the next request to an idle connection, if one is due. */
static void lg_start(struct lg_state *ls, struct lg_conn *c, double now)
{
	double due;

	if (c->lc_req != LG_NONE || c->lc_fd < 0 || ls->ls_next >= ls->ls_n) {
		return;
	}
	due = ls->ls_opt->lo_rate > 0 ? ls->ls_t0 + (double)ls->ls_next / ls->ls_opt->lo_rate : now;
	if (due > now) {
		return;
	}
	c->lc_req = ls->ls_next++;
	c->lc_due = due;
	c->lc_sent = 0;
	if (lg_flush(ls, c) < 0) {
		lg_fail(ls, c);
	}
}

static void lg_read(struct lg_state *ls, struct lg_conn *c)
{
	int status;
	int close_after;
	int r;

	for (;;) {
		ssize_t got = recv(c->lc_fd, c->lc_rbuf + c->lc_rlen, LG_RBUF - 1 - c->lc_rlen, 0);

		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		}
		if (got <= 0) {
			lg_fail(ls, c);
			return;
		}
		c->lc_rlen += (size_t)got;
		while ((r = lg_parse(c, &status, &close_after)) == 1) {
			if (c->lc_req == LG_NONE) {
				lg_fail(ls, c);
				return;
			}
			if ((status < 200 || status >= 300) && ls->ls_bad_status == 0) {
				ls->ls_bad_status = status;
			}
			lg_finish_request(ls, c, status >= 200 && status < 300);
			if (close_after) {
				lg_close(ls, c);
				lg_connect(ls, c);
				return;
			}
		}
		if (r < 0) {
			lg_fail(ls, c);
			return;
		}
	}
}

int lg_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int lg_run(const struct lg_options *opt, const struct lg_request *reqs, size_t n, struct lg_result *ret)
{
	struct epoll_event evs[256];
	struct lg_state ls;
	struct lg_conn *conns;
	unsigned sources = opt->lo_sources > 0 ? opt->lo_sources : 1;
	unsigned i;
	int rc = -1;

	memset(ret, 0, sizeof(*ret));
	memset(&ls, 0, sizeof(ls));
	ls.ls_opt = opt;
	ls.ls_reqs = reqs;
	ls.ls_n = n;
	ls.ls_lat_ms = calloc(n > 0 ? n : 1, sizeof(double));
	conns = calloc(opt->lo_conns, sizeof(*conns));
	ls.ls_ep = epoll_create1(EPOLL_CLOEXEC);
	if (ls.ls_lat_ms == NULL || conns == NULL || ls.ls_ep < 0) {
		goto out;
	}
	for (i = 0; i < opt->lo_conns; i++) {
		conns[i].lc_req = LG_NONE;
		conns[i].lc_source = i % sources;
		if (lg_connect(&ls, &conns[i]) < 0) {
			fprintf(stderr, "loadgen: cannot connect from 127.0.0.%u: %s\n", 1 + conns[i].lc_source,
				strerror(errno));
			goto out;
		}
	}
	ls.ls_t0 = lg_now();
	ls.ls_last = ls.ls_t0;
	while (ls.ls_answered < n) {
		double now = lg_now();
		struct timespec until;
		int timeout = -1;
		unsigned live = 0;
		int k;

		for (i = 0; i < opt->lo_conns; i++) {
			lg_start(&ls, &conns[i], now);
			live += conns[i].lc_fd >= 0;
		}
		if (live == 0) {
			/* Nothing can connect any more: the rest are errors. */
			ls.ls_errors += n - ls.ls_answered;
			ls.ls_dropped += n - ls.ls_answered;
			ls.ls_answered = n;
			break;
		}
		if (opt->lo_rate > 0 && ls.ls_next < n) {
			double due = ls.ls_t0 + (double)ls.ls_next / opt->lo_rate;
			double wait = due > now ? due - now : 0;

			/* To the nanosecond: a millisecond timeout rounds a short
			 * wait down to zero and spins, taking a core from the
			 * server under test. */
			until.tv_sec = (time_t)wait;
			until.tv_nsec = (long)((wait - (double)until.tv_sec) * 1e9);
			timeout = 1;
		}
		k = epoll_pwait2(ls.ls_ep, evs, (int)(sizeof(evs) / sizeof(evs[0])), timeout > 0 ? &until : NULL,
				 NULL);
		if (k < 0 && errno != EINTR) {
			goto out;
		}
		for (i = 0; k > 0 && i < (unsigned)k; i++) {
			struct lg_conn *c = evs[i].data.ptr;

			if (c->lc_fd < 0) {
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && c->lc_req != LG_NONE && lg_flush(&ls, c) < 0) {
				lg_fail(&ls, c);
				continue;
			}
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
				lg_read(&ls, c);
			}
		}
	}
	qsort(ls.ls_lat_ms, n, sizeof(double), lg_cmp_double);
	ret->lg_n = ls.ls_answered;
	ret->lg_errors = ls.ls_errors;
	ret->lg_dropped = ls.ls_dropped;
	ret->lg_bad_status = ls.ls_bad_status;
	ret->lg_dropped_after_ms = ls.ls_dropped_after_ms;
	ret->lg_seconds = ls.ls_last - ls.ls_t0;
	if (n > 0) {
		ret->lg_p50_ms = ls.ls_lat_ms[n / 2];
		ret->lg_p99_ms = ls.ls_lat_ms[(size_t)((double)(n - 1) * 0.99)];
		ret->lg_max_ms = ls.ls_lat_ms[n - 1];
	}
	rc = 0;
out:
	for (i = 0; conns != NULL && i < opt->lo_conns; i++) {
		lg_close(&ls, &conns[i]);
	}
	if (ls.ls_ep >= 0) {
		close(ls.ls_ep);
	}
	free(conns);
	free(ls.ls_lat_ms);
	return rc;
}
