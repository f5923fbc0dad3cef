/* mhd_epoll_stall.c: a reproducer, for libmicrohttpd's developers, of the
 * stall that idemhook's listener works around (docs/upstream/
 * libmicrohttpd-epoll-128.md). It uses libmicrohttpd alone, with one
 * internal thread polling with epoll.
 *
 * The thread is held in a request handler while a request arrives on each
 * of n other kept-alive connections; then it is let go. With n = 127 every
 * request is answered at once. With n = 128 the thread's epoll_wait returns
 * exactly 128 events, and libmicrohttpd calls epoll_wait again, with the
 * timeout it computed before, before it handles any of them: the requests
 * wait for another event or the connection timeout.
 *
 *	mhd_epoll_stall [WAIT_MS]
 *
 * Runs n = 127 and n = 128 and prints how many were answered within
 * WAIT_MS (default 5000) and when. Exits 1 when the 128 stalled, 0 when
 * they did not, 2 on a setup error.
 *
 * One file on libc and libmicrohttpd alone, so that it can be sent as it
 * is: its few client lines (connect, send, read an answer) do what
 * tests/harness/rawhttp.c does, on purpose, and it stands outside the
 * daemon's seams (tests/check_seams.py), as the benchmarks' ceiling does. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

static pthread_mutex_t hold_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_inside;
static int hold_release;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* /hold keeps the thread until main lets it go; anything else is "ok". */
static enum MHD_Result stall_access(void *cls, struct MHD_Connection *con, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls)
{
	static const char ok[] = "ok";
	struct MHD_Response *resp;
	enum MHD_Result rc;

	(void)cls;
	(void)method;
	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) {
		/* The head: answered on the next call, once the request is
		 * whole (0.9.75 closed the connection after an answer queued here). */
		*con_cls = con;
		return MHD_YES;
	}
	*upload_data_size = 0;
	if (strcmp(url, "/hold") == 0) {
		pthread_mutex_lock(&hold_mutex);
		hold_inside = 1;
		pthread_cond_broadcast(&hold_cond);
		while (!hold_release) {
			pthread_cond_wait(&hold_cond, &hold_mutex);
		}
		pthread_mutex_unlock(&hold_mutex);
	}
	resp = MHD_create_response_from_buffer(sizeof(ok) - 1, (void *)ok, MHD_RESPMEM_PERSISTENT);
	rc = MHD_queue_response(con, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return rc;
}

static int stall_connect(unsigned port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int stall_send(int fd, const char *path)
{
	char req[64];
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);

	return send(fd, req, (size_t)len, MSG_NOSIGNAL) == len ? 0 : -1;
}

/* 1 once a whole answer ("ok", two bytes after the head) is read by
 * deadline, else 0. */
static int stall_answer(int fd, long long deadline)
{
	char buf[1024];
	size_t have = 0;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		long long left = deadline - now_ms();
		const char *end;
		ssize_t n;

		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end != NULL && (size_t)(end + 4 - buf) + 2 <= have) {
			return 1;
		}
		if (left <= 0 || have + 1 >= sizeof(buf) || poll(&pf, 1, (int)left) <= 0) {
			return 0;
		}
		n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (n <= 0) {
			return 0;
		}
		have += (size_t)n;
	}
}

/* One run with n requests ready at once. Returns how many were answered
 * within wait_ms, or -1 on a setup error; *took_ms: when the last was. */
static int stall_run(int n, int wait_ms, long long *took_ms)
{
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	int fds[130];
	int answered = 0;
	long long t0;
	int i;

	hold_inside = 0;
	hold_release = 0;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC, 0, NULL,
	                     NULL, stall_access, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
	                     MHD_OPTION_END);
	info = d != NULL ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
	if (info == NULL) {
		fprintf(stderr, "mhd_epoll_stall: cannot start a daemon\n");
		return -1;
	}
	/* n + 1 kept-alive connections, each with one request answered. */
	for (i = 0; i <= n; i++) {
		fds[i] = stall_connect(info->port);
		if (fds[i] < 0 || stall_send(fds[i], "/x") < 0 ||
		    !stall_answer(fds[i], now_ms() + 5000)) {
			fprintf(stderr, "mhd_epoll_stall: connection %d: %s\n", i, strerror(errno));
			return -1;
		}
	}
	/* The thread held on the last one while a request comes on each other. */
	stall_send(fds[n], "/hold");
	pthread_mutex_lock(&hold_mutex);
	while (!hold_inside) {
		pthread_cond_wait(&hold_cond, &hold_mutex);
	}
	pthread_mutex_unlock(&hold_mutex);
	for (i = 0; i < n; i++) {
		stall_send(fds[i], "/x");
	}
	usleep(100 * 1000); /* all of them in the thread's epoll set, ready */
	pthread_mutex_lock(&hold_mutex);
	hold_release = 1;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_mutex);
	t0 = now_ms();
	*took_ms = 0;
	stall_answer(fds[n], t0 + wait_ms);
	for (i = 0; i < n; i++) {
		if (stall_answer(fds[i], t0 + wait_ms)) {
			answered++;
			*took_ms = now_ms() - t0;
		}
	}
	for (i = 0; i <= n; i++) {
		close(fds[i]);
	}
	MHD_stop_daemon(d);
	return answered;
}

int main(int argc, char **argv)
{
	int wait_ms = argc > 1 ? atoi(argv[1]) : 5000;
	int stalled = 0;
	int n;

	if (wait_ms <= 0) {
		fprintf(stderr, "usage: mhd_epoll_stall [WAIT_MS]\n");
		return 2;
	}
	printf("libmicrohttpd %s, one internal thread polling with epoll\n", MHD_get_version());
	for (n = 127; n <= 128; n++) {
		long long took_ms;
		int answered = stall_run(n, wait_ms, &took_ms);

		if (answered < 0) {
			return 2;
		}
		printf("%d requests ready at once: %d answered within %d ms", n, answered, wait_ms);
		if (answered > 0) {
			printf(", the last after %lld ms", took_ms);
		}
		printf("\n");
		stalled |= n == 128 && answered < n;
	}
	printf(stalled ? "stalled: epoll_wait returned exactly 128 events and was called again "
	                 "with the full timeout before they were handled\n"
	               : "no stall\n");
	return stalled;
}
