/* delayproxy.c: the delaying proxy of delayproxy.h. Per connection, one
 * thread per direction reads what arrives, stamps it, and writes each chunk
 * once its time has come, in order: the bytes arrive delay_us later than
 * they were sent, whatever their size, as over a link with that latency
 * and no bandwidth limit (netem's "delay" without jitter). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "delayproxy.h"

#define DELAYPROXY_CHUNK 65536

struct delayproxy {
	int dp_listen;
	char dp_path[108];
	unsigned dp_delay_us;
};

struct delayproxy_chunk {
	int64_t dc_due_us;
	size_t dc_len;
	struct delayproxy_chunk *dc_next;
	char dc_data[];
};

/* One connection's two sockets; the second direction to end closes them. */
struct delayproxy_pair {
	int dpr_fd[2];
	int dpr_ended;
};

struct delayproxy_pipe {
	struct delayproxy_pair *dpp_pair;
	int dpp_from;
	int dpp_to;
	unsigned dpp_delay_us;
};

static int64_t delayproxy_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int delayproxy_write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);

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

/* One direction: read, hold, write; ends when either side closes. */
static void *delayproxy_pipe_main(void *arg)
{
	struct delayproxy_pipe *pp = arg;
	struct delayproxy_chunk *head = NULL;
	struct delayproxy_chunk *tail = NULL;
	struct delayproxy_chunk *c;
	int open = 1;

	while (open || head != NULL) {
		struct pollfd pfd = {.fd = pp->dpp_from, .events = POLLIN};
		int timeout = -1;

		if (head != NULL) {
			int64_t wait = head->dc_due_us - delayproxy_now_us();

			timeout = wait > 0 ? (int)((wait + 999) / 1000) : 0;
		}
		if (open && poll(&pfd, 1, timeout) > 0) {
			ssize_t n;

			c = malloc(sizeof(*c) + DELAYPROXY_CHUNK);
			if (c == NULL) {
				break;
			}
			n = read(pp->dpp_from, c->dc_data, DELAYPROXY_CHUNK);
			if (n <= 0) {
				free(c);
				open = 0;
			} else {
				c->dc_len = (size_t)n;
				c->dc_due_us = delayproxy_now_us() + pp->dpp_delay_us;
				c->dc_next = NULL;
				if (tail == NULL) {
					head = c;
				} else {
					tail->dc_next = c;
				}
				tail = c;
			}
		} else if (!open && head != NULL) {
			int64_t wait = head->dc_due_us - delayproxy_now_us();

			if (wait > 0) {
				usleep((useconds_t)wait);
			}
		}
		while (head != NULL && head->dc_due_us <= delayproxy_now_us()) {
			c = head;
			head = c->dc_next;
			if (head == NULL) {
				tail = NULL;
			}
			if (delayproxy_write_all(pp->dpp_to, c->dc_data, c->dc_len) < 0) {
				open = 0;
			}
			free(c);
		}
	}
	while (head != NULL) {
		c = head;
		head = c->dc_next;
		free(c);
	}
	shutdown(pp->dpp_to, SHUT_WR);
	shutdown(pp->dpp_from, SHUT_RD);
	if (__atomic_add_fetch(&pp->dpp_pair->dpr_ended, 1, __ATOMIC_ACQ_REL) == 2) {
		close(pp->dpp_pair->dpr_fd[0]);
		close(pp->dpp_pair->dpr_fd[1]);
		free(pp->dpp_pair);
	}
	free(pp);
	return NULL;
}

static int delayproxy_pipe_start(struct delayproxy_pair *pair, int from, int to, unsigned delay_us)
{
	struct delayproxy_pipe *pp = malloc(sizeof(*pp));
	pthread_t t;

	if (pp == NULL) {
		return -1;
	}
	pp->dpp_pair = pair;
	pp->dpp_from = from;
	pp->dpp_to = to;
	pp->dpp_delay_us = delay_us;
	if (pthread_create(&t, NULL, delayproxy_pipe_main, pp) != 0) {
		free(pp);
		return -1;
	}
	pthread_detach(t);
	return 0;
}

static void *delayproxy_accept_main(void *arg)
{
	struct delayproxy *dp = arg;
	struct sockaddr_un sun;
	int one = 1;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, dp->dp_path, sizeof(sun.sun_path));
	for (;;) {
		int c = accept(dp->dp_listen, NULL, NULL);
		struct delayproxy_pair *pair;
		int s;

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED) {
				continue;
			}
			break;
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		s = socket(AF_UNIX, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			fprintf(stderr, "delayproxy: cannot reach %s: %s\n", dp->dp_path,
			        strerror(errno));
			close(c);
			if (s >= 0) {
				close(s);
			}
			continue;
		}
		pair = calloc(1, sizeof(*pair));
		if (pair == NULL) {
			close(c);
			close(s);
			continue;
		}
		pair->dpr_fd[0] = c;
		pair->dpr_fd[1] = s;
		if (delayproxy_pipe_start(pair, c, s, dp->dp_delay_us) < 0) {
			close(c);
			close(s);
			free(pair);
			continue;
		}
		if (delayproxy_pipe_start(pair, s, c, dp->dp_delay_us) < 0) {
			/* Counted as ended first: the direction running ends
			 * at this shutdown and closes both. */
			__atomic_add_fetch(&pair->dpr_ended, 1, __ATOMIC_ACQ_REL);
			shutdown(c, SHUT_RDWR);
		}
	}
	return NULL;
}

struct delayproxy *delayproxy_start(const char *path, unsigned delay_us, unsigned *ret_port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	struct delayproxy *dp;
	pthread_t t;

	dp = calloc(1, sizeof(*dp));
	if (dp == NULL || strlen(path) >= sizeof(dp->dp_path)) {
		fprintf(stderr, "delayproxy: socket path too long\n");
		free(dp);
		return NULL;
	}
	snprintf(dp->dp_path, sizeof(dp->dp_path), "%s", path);
	dp->dp_delay_us = delay_us;
	dp->dp_listen = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (dp->dp_listen < 0 || bind(dp->dp_listen, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(dp->dp_listen, 128) < 0 ||
	    getsockname(dp->dp_listen, (struct sockaddr *)&sin, &len) < 0 ||
	    pthread_create(&t, NULL, delayproxy_accept_main, dp) != 0) {
		fprintf(stderr, "delayproxy: cannot listen: %s\n", strerror(errno));
		if (dp->dp_listen >= 0) {
			close(dp->dp_listen);
		}
		free(dp);
		return NULL;
	}
	pthread_detach(t);
	*ret_port = ntohs(sin.sin_port);
	return dp;
}
