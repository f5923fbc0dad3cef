/* http.c: the HTTP listener on libmicrohttpd; the only file that includes microhttpd.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "buf.h"
#include "cidr.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "text.h"

#define HTTP_DISCARD_MAX (8 * 1024 * 1024) /* bytes of a refused body dropped before closing */
/* Lingering close. A connection answered before its body was read (a 413,
 * any refusal of the head) is closed by libmicrohttpd once the answer is
 * out; closing a socket with unread input makes the kernel send a reset,
 * and a client still sending then sees the reset instead of the answer
 * (its send fails, or the reset destroys what it had not read yet). So
 * such a socket is kept open past libmicrohttpd's close, shut for writing,
 * and what the client still sends is read and dropped, until it closes,
 * HTTP_DISCARD_MAX bytes or HTTP_DISCARD_MS. */
#define HTTP_DISCARD_MS 5000
#define HTTP_LINGER_SOCKS_MAX 128 /* at most this many at once; beyond, closed at once */
#define HTTP_LINGER_SWEEP_MS 10   /* the sweeper's interval while some linger */
/* Bytes of libmicrohttpd's per-connection pool: the request head (up to
 * HTTP_HEAD_MAX bytes in HTTP_HEADERS_MAX fields), read and write buffers;
 * bodies are copied out as they arrive. libmicrohttpd clears the whole pool
 * before every request on a connection, and every connection holds one (a
 * suspended one too): the size is paid per request and per connection, so
 * it is no bigger than a request head needs. A head it cannot hold gets its
 * own 431 (or 414), with a short HTML body. */
#define HTTP_CONN_MEMORY (16 * 1024)
/* Not always: a head whose last field fits the pool but leaves no room for
 * the field's record makes libmicrohttpd 0.9.75 close the connection
 * without a word (it cannot build even its own 431's header in the pool;
 * about 16,000 bytes of head in a 16 KiB pool). http_head_lost answers
 * those with our 431 as it closes (http_head_lost). */
#define HTTP_BODY_EXPECT_MAX (64 * 1024) /* an announced body reserved at once, up to this */
#define HTTP_LISTEN_BACKLOG 4096 /* the kernel caps it at net.core.somaxconn */
#define HTTP_FD_RESERVE 256      /* descriptors kept for the database, outbound calls, files */
#define HTTP_CONN_MIN 16         /* the least connection limit the file limit may size */
/* The sweeper: a thread per server that enforces the head deadline and the
 * body rate, keeps room for new connections and drains old generations. */
#define HTTP_SWEEP_MS 100
#define HTTP_IDLE_PROBE_MS 500  /* how often an idle keep-alive connection is looked at */
#define HTTP_BODY_GRACE_MS 5000 /* a body is measured against its floor after this */
#define HTTP_RESERVE_DIV 10     /* a tenth of the connection limit is kept free for new requests */
#define HTTP_RESERVE_MIN 4
#define HTTP_DRAIN_IDLE_MS 2000  /* stopping: an idle keep-alive connection is closed after this */
#define HTTP_DRAIN_FLUSH_MS 5000 /* past the deadline: answers already made get this to go out */
#define HTTP_DRAIN_LOG_MS 2000   /* drain progress in the log */
/* The accept thread. A generation's daemon has no listening socket: the
 * generation's own thread accepts on its descriptor and hands each
 * connection to libmicrohttpd (MHD_add_connection), so a drain only ends
 * that thread. libmicrohttpd 0.9.75's MHD_quiesce_daemon, the other way to
 * stop a daemon accepting, takes the socket out of each pool thread's epoll
 * set while the thread may be doing so itself, and aborts the process when
 * it finds the socket already gone. */
#define HTTP_ACCEPT_BATCH 64       /* connections taken before the wake-up is looked at again */
#define HTTP_ACCEPT_BACKOFF_MS 100 /* out of descriptors or memory: try again after this */
#define HTTP_ACCEPT_LOG_MS 1000    /* at most one line a second about failing accepts */
#define HTTP_CUT_LOG_MS 10000    /* slow clients cut: one summary line at most this often */
#define HTTP_LINGER_MS 1000 /* a 408 gets this long to be read before the connection is reset */
#define HTTP_ALIVE_PROGRESS_MS                                                                     \
	5000 /* at the connection limit, a request completed within this is life */
/* A server thread's wake-up. libmicrohttpd's epoll loop (0.9.75, and its
 * later releases alike) reads at most 128 events per epoll_wait and, when it
 * gets exactly 128, waits again with the full timeout before it handles any
 * of them: a thread whose 128 ready connections came at once (it was busy
 * meanwhile) then sits until some other event comes, or the connection
 * timeout closes them unanswered (issue 24: 256 connections on 2 threads
 * stalled for 5 to 30 s). A thread with requests under way that has
 * completed none for HTTP_STALL_MS (a head or body counts only while its
 * socket holds bytes the thread has not read: a client that sends nothing
 * leaves it nothing to do) is handed a connection that is already
 * closed (one end of a socket pair), which is an event in its set: it
 * wakes, handles what was ready, and closes that one. Not more often than
 * every HTTP_STALL_MS per thread; a thread that was merely waiting (for
 * commits, or for a slow client) loses nothing by it. */
#define HTTP_STALL_MS 500
/* The same stall, seen sooner: a thread that holds at least
 * HTTP_STALL_CONNS connections (128 events need at least 127, with its own
 * wake-up descriptor), has completed nothing for HTTP_STALL_READY_MS and
 * has a kept-alive connection whose next request it has not read is woken
 * then; while a thread holds that many, the sweeper looks at the threads
 * every HTTP_SWEEP_CROWDED_MS between its sweeps of every connection. At
 * 500 ms alone, the benchmark's 256 connections on 2 threads had phases
 * with a p99 of 520 to 600 ms (issue 24, fourteenth round). */
#define HTTP_STALL_CONNS 120
#define HTTP_STALL_READY_MS 40
#define HTTP_SWEEP_CROWDED_MS 20

/* Where a connection is, for the sweeper. */
enum http_phase {
	HTTP_PHASE_HEAD = 0, /* reading a request head (a TLS handshake too) */
	HTTP_PHASE_BODY,     /* the head is in; reading the body */
	HTTP_PHASE_BUSY,     /* the request is complete: routed, deferred or answering */
	HTTP_PHASE_IDLE,     /* keep-alive, between requests */
	HTTP_PHASE_CUT,      /* the sweeper closed it: nothing more is routed */
};

/* Why the sweeper closed a connection. */
enum http_cut {
	HTTP_CUT_HEAD = 0, /* the head took longer than the deadline */
	HTTP_CUT_BODY,     /* the body came slower than the floor */
	HTTP_CUT_ROOM,     /* the oldest incomplete heads and idle connections, to keep room */
	HTTP_CUT_DRAIN,    /* draining: idle, or the drain deadline passed */
	HTTP_CUT_N,
};

/* Their names in metrics (idemhook_http_connections_cut_total). */
static const char *const http_cut_names[HTTP_CUT_N + 1] = {"head_timeout", "body_min_rate",
                                                           "make_room", "drain", NULL};

/* The statuses http_refuse answers with (http_refusal_set's callers), and
 * the kinds of drain: a listener's series of each, exported at 0 from its
 * start (metrics_declare_http). */
static const int http_refused_statuses[] = {400, 413, 414, 431, 501, 503, 0};
static const char *const http_drain_kinds[] = {"reload", "stop", NULL};

struct http_gen;

/* One connection (libmicrohttpd's socket context), from accept to close, in
 * its generation's list. Server threads move its phase; the sweeper reads
 * it, and may shut its socket down: the descriptor stays valid for as long
 * as the connection is listed, as libmicrohttpd reports a connection closed
 * before it closes the descriptor, and unlisting takes the lock. */
struct http_sock {
	struct http_sock *hk_prev;
	struct http_sock *hk_next;
	int hk_fd;
	unsigned hk_thread; /* its server thread: its descriptor modulo the threads */
	/* The phase (enum http_phase) in the low byte, above it a count of
	 * moves: a compare-and-swap on the whole word fails if the
	 * connection moved at all since it was read, even back and forth. */
	atomic_ullong hk_state;
	atomic_llong hk_since_ms;   /* monotonic: when the phase began */
	atomic_llong hk_body_bytes; /* of the body being read */
	/* the sweeper's own */
	atomic_int hk_unread;   /* answered before its body was read: linger when closed */
	/* The request's own 408 for a head or body too slow: 1 + the index of
	 * its path in hg_timeouts, or 0 for the problem (set by its server
	 * thread once the request line is in, reset when the request ends). */
	atomic_int hk_answer;
	/* Or this request's own 408 on the wire, when the route layer added
	 * headers to it once the head was in (ho_timeout_headers), else
	 * NULL: taken before hk_answer. Written only by its server thread,
	 * under hg_lock, as the sweeper reads it (with hg_lock held). */
	char *hk_timeout;
	size_t hk_timeout_len;
	int64_t hk_linger_ms;   /* cut with an answer: its read side is shut this much later (hg_lock) */
	int64_t hk_probe_ms;    /* an idle connection was last looked at */
	uint64_t hk_idle_bytes; /* bytes received by then; UINT64_MAX: not looked at yet */
	unsigned long long hk_idle_state; /* hk_state when hk_idle_bytes was taken */
	/* Its server thread's: the bytes of the requests it completed on this
	 * connection (request line, header fields, blank line, body), or
	 * UINT64_MAX once that is not known (TLS, a chunked body). More bytes
	 * received than that: the next request's first bytes are in
	 * (http_sock_rest, http_sock_probe_idle). */
	uint64_t hk_consumed;
	/* hk_consumed when its last request completed: what an idle
	 * connection's first look compares with (UINT64_MAX: unknown). */
	atomic_ullong hk_idle_base;
	/* The peer's address as text, formatted once per connection: each
	 * request of a keep-alive connection copies it (issue 24). */
	char hk_peer[INET6_ADDRSTRLEN + 1];
};

/* One of libmicrohttpd's server threads, as the sweeper sees it. Each
 * thread writes its own on every request it completes: a cache line of its
 * own, shared with no other thread's. */
struct http_thread {
	_Alignas(64) atomic_llong ht_done_ms; /* monotonic: a request last completed */
	atomic_int ht_conns;                  /* connections it holds (the sweeper's list) */
	int64_t ht_looked_ms;                 /* the sweeper's own: last looked at for any work, */
	int64_t ht_looked_ready_ms;           /* and for unread requests (HTTP_STALL_READY_MS) */
	int64_t ht_young_ms; /* the sweeper's own: when its oldest work under HTTP_STALL_MS began */
	unsigned char ht_mark;                /* the sweeper's own: an http_mark */
};

/* What http_gen_wake_stalled found of a thread this time. */
enum http_mark {
	HTTP_MARK_NONE = 0, /* not looked at */
	HTTP_MARK_ANY,      /* looked at: any work under way counts */
	HTTP_MARK_UNREAD,   /* looked at: only a request left unread counts */
	HTTP_MARK_WAKE,     /* to be woken */
};

/* A 408 as sent on the wire, for a path that has its own (ho_timeouts). */
struct http_timeout_answer {
	char *hta_path;
	size_t hta_path_len;
	int hta_under; /* and every path below hta_path */
	char *hta_data;
	size_t hta_len;
};

/* One libmicrohttpd daemon and the settings it serves with. A reload starts
 * a new generation on a dup of the same listening socket before the old one
 * stops accepting, so settings never change under a request in flight. */
struct http_gen {
	struct http_server *hg_srv;
	struct MHD_Daemon *hg_daemon;
	struct http_gen *hg_next; /* in the server's list of draining generations */
	unsigned hg_number;       /* 1 at start, +1 per reload: for the log */
	int hg_fd; /* this generation's descriptor of the listening socket */
	int hg_tls;
	size_t hg_body_max;
	unsigned hg_conn_limit;
	int64_t hg_head_timeout_ms;
	size_t hg_body_min_rate;
	int64_t hg_drain_timeout_ms;
	char **hg_proxies; /* trusted proxy CIDRs, NULL-terminated, or NULL */
	http_refused_fn hg_refused;
	http_refused_fn hg_timeout_headers;
	char *hg_timeout_answer; /* the 408 a plain-HTTP slow client gets */
	size_t hg_timeout_answer_len;
	char *hg_head_answer; /* the 431 of a head libmicrohttpd dropped (http_head_lost) */
	size_t hg_head_answer_len;
	struct http_timeout_answer *hg_timeouts; /* and at these paths, for a body (ho_timeouts) */
	size_t hg_n_timeouts;
	pthread_mutex_t hg_lock;    /* hg_socks */
	struct http_sock *hg_socks; /* every open connection */
	/* Open connections: counted by the accept thread before it hands one
	 * to libmicrohttpd, uncounted when libmicrohttpd says it closed (or
	 * refused it as it was handed over). One that libmicrohttpd drops in
	 * between, which it does only when its thread cannot allocate the
	 * connection's memory, stays counted: its drain then waits for the
	 * deadline. */
	atomic_int hg_conns;
	atomic_int hg_suspended; /* deferred requests whose answer is not queued yet */
	atomic_int hg_draining;  /* not accepting: answers close their connection */
	atomic_int hg_stopping; /* the daemon is about to stop: no more suspensions */
	atomic_int hg_started; /* MHD_start_daemon returned */
	atomic_llong hg_log_ms;      /* when the last loud libmicrohttpd message was logged */
	atomic_long hg_answered;     /* requests completed */
	/* libmicrohttpd's server threads: a connection goes to the one its
	 * descriptor modulo their number names (while that one has room) */
	unsigned hg_threads;
	struct http_thread *hg_thread;
	unsigned long hg_wakeups;        /* the sweeper's own: threads woken (http_gen_cut_log) */
	unsigned long hg_wakeups_told;
	/* the accept thread */
	pthread_t hg_acceptor;
	int hg_acceptor_started;
	int hg_wake_fd;               /* eventfd: wakes the accept thread */
	atomic_int hg_accept_stop;    /* the accept thread is to end */
	atomic_int hg_accept_parked;  /* it waits for a close (at the limit, or backing off) */
	int64_t hg_accept_log_ms;     /* its own: when it last logged a failing accept */
	/* the sweeper's own */
	int hg_drain_stop; /* the drain is a stop, not a reload */
	int64_t hg_drain_since_ms;
	int64_t hg_drain_deadline_ms;
	int64_t hg_drain_log_ms;
	long hg_drain_answered; /* hg_answered when the drain began */
	int hg_deadline_told;
	unsigned long hg_cuts[HTTP_CUT_N];
	unsigned long hg_cuts_told[HTTP_CUT_N];
	int64_t hg_cut_log_ms;
};

/* A refused connection's socket kept open to drop its unread body. */
struct http_linger {
	int hl_fd; /* a dup: libmicrohttpd closed its own */
	int64_t hl_since_ms;
	size_t hl_bytes;
};

struct http_server {
	char *hs_host;
	unsigned hs_port;
	http_route_fn hs_route;
	void *hs_arg;
	char *hs_name;
	pthread_mutex_t hs_lock;      /* what follows, and the generations' drain fields */
	pthread_cond_t hs_cond;       /* a generation ended, or the sweeper is to stop */
	struct http_gen *hs_gen;      /* the serving generation; NULL once draining to stop */
	struct http_gen *hs_draining; /* older generations still finishing */
	unsigned hs_generations;
	int hs_stop;
	pthread_t hs_sweeper;
	int hs_sweeper_started;
	/* lingering closes: hs_linger_lock */
	pthread_mutex_t hs_linger_lock;
	struct http_linger *hs_lingers;
	size_t hs_n_lingers;
	/* http_alive: the local port of the probe under way, and whether a
	 * server thread took its connection */
	pthread_mutex_t hs_probe_lock;
	atomic_int hs_probe_port;
	atomic_int hs_probe_seen;
	/* Deferred requests resumed, and the ns from each http_resume until
	 * its server thread took the answer up; the sweeper hands what came
	 * since it last did (the *_told, its own) to the metrics. */
	atomic_ullong hs_resumes;
	atomic_ullong hs_resume_ns;
	unsigned long long hs_resumes_told;
	unsigned long long hs_resume_ns_told;
};

/* Where a deferred request is. The route's thread and the thread that calls
 * http_resume race; each step is one atomic transition, so exactly one of
 * them resumes the connection and exactly one runs the finish function. */
enum http_defer_state {
	HTTP_DEFER_NONE = 0,
	HTTP_DEFER_WAITING, /* deferred; not suspended yet, answer not ready */
	HTTP_DEFER_SUSPENDED, /* suspended, waiting for http_resume */
	HTTP_DEFER_READY, /* http_resume came: the answer may be built */
	HTTP_DEFER_ORPHANED, /* the connection ended first: http_resume frees */
	HTTP_DEFER_FINISHED, /* the finish function ran */
};

struct http_deferred {
	atomic_int hd_state; /* enum http_defer_state */
	http_finish_fn hd_fn;
	void *hd_arg;
	struct MHD_Connection *hd_con;
	struct http_conn *hd_hc;
	int hd_counted; /* counted in hg_suspended (server thread only) */
	int64_t hd_resumed_ns; /* monotonic: http_resume resumed it; 0 */
};

struct http_header_list;

/* Per-request state, created when the request line arrives. */
struct http_conn {
	struct http_gen *hc_gen;
	struct MHD_Connection *hc_con;
	struct http_sock *hc_sock; /* NULL if it could not be tracked */
	char *hc_url;              /* the raw request target (at most HTTP_URL_MAX bytes of it) */
	size_t hc_url_len;         /* its whole length up to a NUL */
	size_t hc_params;          /* query parameters in it */
	struct buf hc_body;
	int hc_head_seen; /* the access handler has seen the request head */
	size_t hc_head_bytes; /* its size as libmicrohttpd counts it (0: unknown) */
	int hc_chunked;       /* its body comes chunked: its size on the wire is unknown */
	int hc_refused; /* a response was queued before the body was read */
	/* That refusal as sent on the wire, kept when the head was over
	 * HTTP_HEAD_MAX or had too many fields (plain HTTP only):
	 * libmicrohttpd may find no room in the pool to send it
	 * (http_head_lost). */
	char *hc_refusal;
	size_t hc_refusal_len;
	int hc_too_large; /* an unannounced body went over the cap */
	size_t hc_discarded; /* bytes dropped since */
	int64_t hc_received_ms;
	/* The request as routed, kept until it completes: a deferred answer
	 * is built from it after the connection is resumed. */
	struct http_header_list *hc_headers;
	/* The decoded path, made once when the request line arrives
	 * (http_uri_logger) and used by the head's checks, the timeouts and
	 * the route; cut at a NUL it decodes to (hc_path_nul), then only for
	 * a refusal's decoration. NULL when out of memory. */
	char *hc_path;
	int hc_path_nul;
	char hc_peer[INET6_ADDRSTRLEN + 1];
	char hc_client[INET6_ADDRSTRLEN + 1];
	struct http_request hc_req;
	struct http_deferred hc_defer;
};

struct http_header_list {
	size_t hl_n;
	size_t hl_cap; /* the request's header fields, at most HTTP_HEADERS_MAX */
	int hl_overflow;
	struct http_header hl_items[]; /* hl_cap of them */
};

#define HTTP_STR(x) #x
#define HTTP_XSTR(x) HTTP_STR(x) /* a limit's value, in a message */

static int64_t http_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t http_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t http_mono_ms(void)
{
	return http_mono_ns() / 1000000;
}

static void http_sleep_ms(long ms)
{
	struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&pause, NULL);
}

const char *http_header_get(const struct http_request *req, const char *name)
{
	size_t i;

	for (i = 0; i < req->hr_n_headers; i++) {
		if (strcasecmp(req->hr_headers[i].hh_name, name) == 0) {
			return req->hr_headers[i].hh_value;
		}
	}
	return NULL;
}

size_t http_header_count(const struct http_request *req, const char *name)
{
	size_t i;
	size_t n = 0;

	for (i = 0; i < req->hr_n_headers; i++) {
		if (strcasecmp(req->hr_headers[i].hh_name, name) == 0) {
			n++;
		}
	}
	return n;
}

int http_header_one(const struct http_request *req, const char *name, const char **ret_value)
{
	const char *v = NULL;
	size_t i;

	/* One walk: the first line, and whether there is a second. */
	*ret_value = NULL;
	for (i = 0; i < req->hr_n_headers; i++) {
		if (strcasecmp(req->hr_headers[i].hh_name, name) == 0) {
			if (v != NULL) {
				return -1;
			}
			v = req->hr_headers[i].hh_value;
		}
	}
	*ret_value = v;
	return v != NULL ? 1 : 0;
}

char *http_query_get(const struct http_request *req, const char *name)
{
	const char *q = strchr(req->hr_url, '?');
	size_t nlen = strlen(name);

	if (q == NULL) {
		return NULL;
	}
	q++;
	while (*q != '\0') {
		const char *amp = strchr(q, '&');
		size_t len = amp != NULL ? (size_t)(amp - q) : strlen(q);

		if (len > nlen && strncmp(q, name, nlen) == 0 && q[nlen] == '=') {
			return strndup(q + nlen + 1, len - nlen - 1);
		}
		if (len == nlen && strncmp(q, name, nlen) == 0) {
			return strdup("");
		}
		q += len;
		if (*q == '&') {
			q++;
		}
	}
	return NULL;
}

/* ---- connections ---- */

#define HTTP_STATE_PHASE(st) ((int)((st)&0xff))
#define HTTP_STATE_NEXT(st, phase) (((((st) >> 8) + 1) << 8) | (unsigned long long)(phase))

static int http_sock_phase(struct http_sock *hk)
{
	return HTTP_STATE_PHASE(atomic_load(&hk->hk_state));
}

/* Moves a connection to phase, from any phase but HTTP_PHASE_CUT (only the
 * sweeper moves one into it, and nothing out). Returns 0, or -1 when the
 * sweeper closed it: then the request must not be routed. NULL (a
 * connection that could not be tracked) is always 0. */
static int http_sock_move(struct http_sock *hk, enum http_phase phase)
{
	unsigned long long cur;

	if (hk == NULL) {
		return 0;
	}
	atomic_store(&hk->hk_since_ms, http_mono_ms());
	cur = atomic_load(&hk->hk_state);
	for (;;) {
		if (HTTP_STATE_PHASE(cur) == HTTP_PHASE_CUT) {
			return -1;
		}
		if (atomic_compare_exchange_weak(&hk->hk_state, &cur, HTTP_STATE_NEXT(cur, phase))) {
			return 0;
		}
	}
}

/* The connection of http_alive's probe, seen by a server thread? */
static void http_probe_check(struct http_server *srv, struct MHD_Connection *con)
{
	int port = atomic_load(&srv->hs_probe_port);
	const union MHD_ConnectionInfo *ci;
	const struct sockaddr *sa;
	int seen = 0;

	if (port == 0) {
		return;
	}
	ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	sa = ci != NULL ? ci->client_addr : NULL;
	if (sa == NULL) {
		return;
	}
	if (sa->sa_family == AF_INET) {
		seen = ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port) == port;
	} else if (sa->sa_family == AF_INET6) {
		seen = ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port) == port;
	}
	if (seen) {
		atomic_store(&srv->hs_probe_seen, 1);
	}
}

/* Keeps the socket behind fd open after libmicrohttpd closes fd (which it
 * is about to): its answer is out, and the sweeper drops what the client
 * still sends. The answer's end is marked (shut for writing) so the client
 * sees the end of the stream once it has read it. */
static void http_linger_add(struct http_server *srv, int fd)
{
	int dup_fd;

	pthread_mutex_lock(&srv->hs_linger_lock);
	if (srv->hs_lingers == NULL || srv->hs_n_lingers >= HTTP_LINGER_SOCKS_MAX) {
		pthread_mutex_unlock(&srv->hs_linger_lock);
		return;
	}
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0) {
		pthread_mutex_unlock(&srv->hs_linger_lock);
		return;
	}
	(void)shutdown(dup_fd, SHUT_WR);
	metrics_http_linger(srv->hs_name);
	srv->hs_lingers[srv->hs_n_lingers].hl_fd = dup_fd;
	srv->hs_lingers[srv->hs_n_lingers].hl_since_ms = http_mono_ms();
	srv->hs_lingers[srv->hs_n_lingers].hl_bytes = 0;
	srv->hs_n_lingers++;
	pthread_mutex_unlock(&srv->hs_linger_lock);
}

/* Reads and drops what every lingering socket has received; closes those
 * whose client closed or failed, or that reached a bound. Returns how many
 * still linger. */
static size_t http_linger_step(struct http_server *srv, int64_t now, int all)
{
	char sink[64 * 1024];
	size_t i = 0;
	size_t left;

	pthread_mutex_lock(&srv->hs_linger_lock);
	while (i < srv->hs_n_lingers) {
		struct http_linger *hl = &srv->hs_lingers[i];
		int done = all;

		while (!done) {
			ssize_t n = recv(hl->hl_fd, sink, sizeof(sink), MSG_DONTWAIT);

			if (n > 0) {
				hl->hl_bytes += (size_t)n;
				done = hl->hl_bytes > HTTP_DISCARD_MAX;
			} else if (n < 0 && errno == EINTR) {
				continue;
			} else {
				done = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
				break;
			}
		}
		if (done || now - hl->hl_since_ms >= HTTP_DISCARD_MS) {
			close(hl->hl_fd);
			*hl = srv->hs_lingers[--srv->hs_n_lingers];
			continue;
		}
		i++;
	}
	left = srv->hs_n_lingers;
	pthread_mutex_unlock(&srv->hs_linger_lock);
	return left;
}

static void http_accept_wake(struct http_gen *gen);

static void http_peer_address(struct MHD_Connection *con, char *out, size_t out_size);

/* A request libmicrohttpd ended with an error without an answer, as it
 * does with a head close to its pool's size (HTTP_CONN_MEMORY), on plain
 * HTTP. Either the head was all in and refused (over HTTP_HEAD_MAX), but
 * libmicrohttpd found no room in the pool for the answer's header: that
 * answer (hc_refusal), decorated as the route layer made it (CORS, a
 * provider's format), is sent, on any request of the connection. Or, on
 * a connection's first request, the head was still arriving, more than
 * HTTP_HEAD_MAX bytes came and nothing was sent back: libmicrohttpd
 * dropped a head its pool could not hold, and the client gets the
 * listener's 431. Returns 1 when an answer went out: the connection is to
 * linger when closed (hk_unread), so that no reset destroys it. Its own
 * 431, or a 408 the sweeper sent, has gone out: nothing more then. Only
 * for such an end, so no system call on any request that was answered. */
static int http_head_lost(struct http_gen *gen, const struct http_conn *hc)
{
	struct http_sock *hk = hc->hc_sock;
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int outq = 0;

	if (gen->hg_tls || hk == NULL || hk->hk_fd < 0) {
		return 0;
	}
	if (http_sock_phase(hk) != HTTP_PHASE_HEAD) {
		/* Refused with the head all in (counted then): unless a byte
		 * of the answer is still queued, none left. Not once the
		 * sweeper cut the connection (it may have answered). */
		if (hc->hc_refusal == NULL || http_sock_phase(hk) != HTTP_PHASE_BUSY ||
		    ioctl(hk->hk_fd, SIOCOUTQ, &outq) < 0 || outq != 0) {
			return 0;
		}
		/* A connection the client reset (libmicrohttpd's error) takes
		 * none of it: nothing to say then. */
		if (send(hk->hk_fd, hc->hc_refusal, hc->hc_refusal_len,
		         MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)hc->hc_refusal_len) {
			return 0;
		}
		log_info("http %s: a request head from %s refused %.3s, sent by the listener as "
		         "libmicrohttpd had no room left for it",
		         gen->hg_srv->hs_name, hk->hk_peer, hc->hc_refusal + strlen("HTTP/1.1 "));
		return 1;
	}
	if (gen->hg_head_answer == NULL || hk->hk_consumed != 0) {
		return 0;
	}
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(hk->hk_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received) ||
	    ioctl(hk->hk_fd, SIOCOUTQ, &outq) < 0) {
		return 0;
	}
	if (ti.tcpi_bytes_received <= HTTP_HEAD_MAX || ti.tcpi_bytes_acked != 0 || outq != 0) {
		return 0;
	}
	(void)send(hk->hk_fd, gen->hg_head_answer, gen->hg_head_answer_len,
	           MSG_DONTWAIT | MSG_NOSIGNAL);
	metrics_http_refused(gen->hg_srv->hs_name, 431);
	log_info("http %s: a request head of more than %d bytes from %s answered 431 as "
	         "libmicrohttpd closed it",
	         gen->hg_srv->hs_name, HTTP_HEAD_MAX, hk->hk_peer);
	return 1;
}

static void http_connection_notify(void *cls, struct MHD_Connection *con, void **socket_context,
                                   enum MHD_ConnectionNotificationCode toe)
{
	struct http_gen *gen = cls;
	struct http_sock *hk = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ca =
		        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

		if (ca != NULL && ca->client_addr != NULL &&
		    ca->client_addr->sa_family == AF_UNIX) {
			return; /* a wake-up (http_gen_wake_thread): closed already */
		}
		http_probe_check(gen->hg_srv, con);
		hk = calloc(1, sizeof(*hk));
		*socket_context = hk;
		if (hk == NULL) {
			return; /* served, but the sweeper cannot see it */
		}
		hk->hk_fd = ci != NULL ? ci->connect_fd : -1;
		hk->hk_thread = hk->hk_fd >= 0 ? (unsigned)hk->hk_fd % gen->hg_threads : 0;
		atomic_fetch_add(&gen->hg_thread[hk->hk_thread].ht_conns, 1);
		hk->hk_idle_bytes = UINT64_MAX;
		hk->hk_consumed = gen->hg_tls ? UINT64_MAX : 0;
		atomic_init(&hk->hk_idle_base, UINT64_MAX);
		http_peer_address(con, hk->hk_peer, sizeof(hk->hk_peer));
		atomic_init(&hk->hk_state, (unsigned long long)HTTP_PHASE_HEAD);
		atomic_init(&hk->hk_since_ms, http_mono_ms());
		atomic_init(&hk->hk_body_bytes, 0);
		atomic_init(&hk->hk_answer, 0);
		pthread_mutex_lock(&gen->hg_lock);
		hk->hk_next = gen->hg_socks;
		if (gen->hg_socks != NULL) {
			gen->hg_socks->hk_prev = hk;
		}
		gen->hg_socks = hk;
		pthread_mutex_unlock(&gen->hg_lock);
		return;
	}
	if (hk != NULL) {
		if (atomic_load(&hk->hk_unread) && hk->hk_fd >= 0) {
			http_linger_add(gen->hg_srv, hk->hk_fd);
		}
		pthread_mutex_lock(&gen->hg_lock);
		if (hk->hk_prev != NULL) {
			hk->hk_prev->hk_next = hk->hk_next;
		} else {
			gen->hg_socks = hk->hk_next;
		}
		if (hk->hk_next != NULL) {
			hk->hk_next->hk_prev = hk->hk_prev;
		}
		pthread_mutex_unlock(&gen->hg_lock);
		atomic_fetch_sub(&gen->hg_thread[hk->hk_thread].ht_conns, 1);
		free(hk->hk_timeout);
		free(hk);
		*socket_context = NULL;
	}
	atomic_fetch_sub(&gen->hg_conns, 1);
	if (atomic_exchange(&gen->hg_accept_parked, 0)) {
		http_accept_wake(gen);
	}
}

/* ---- the sweeper ---- */

static unsigned http_gen_reserve(const struct http_gen *gen)
{
	unsigned r = gen->hg_conn_limit / HTTP_RESERVE_DIV;

	return r > HTTP_RESERVE_MIN ? r : HTTP_RESERVE_MIN;
}

/* A server thread that finds its connection cut, and is about to close
 * it, waits here until the sweeper has finished the cut (it holds hg_lock
 * from the phase change to the 408 and the shutdown): closing before would
 * send the end of the stream first, and the 408 would never be written.
 * A connection told 408 whose client is still sending (its server thread
 * just read more) closes through the lingering close, which reads and
 * drops the rest, so no reset destroys the 408 before the client reads
 * it. NULL hk is a no-op. */
static void http_sock_cut_wait(struct http_gen *gen, struct http_sock *hk)
{
	if (hk == NULL) {
		return;
	}
	pthread_mutex_lock(&gen->hg_lock);
	if (hk->hk_linger_ms != 0) {
		atomic_store(&hk->hk_unread, 1);
	}
	pthread_mutex_unlock(&gen->hg_lock);
}

/* http_sock_move for a server thread that closes the connection when the
 * sweeper has cut it: 0, or -1 once the cut is finished (http_sock_cut_wait). */
static int http_sock_enter(struct http_gen *gen, struct http_sock *hk, enum http_phase phase)
{
	if (http_sock_move(hk, phase) < 0) {
		http_sock_cut_wait(gen, hk);
		return -1;
	}
	return 0;
}

/* Closes a connection that is in phase from: nothing more is routed on it
 * (a request that completes meanwhile is dropped, never processed), and a
 * plain-HTTP client in the middle of a request is told 408. Its server
 * thread sees the end of the stream and closes it: at once, or after the
 * 408 had HTTP_LINGER_MS to be read (closing on unread input resets the
 * connection, and a reset can destroy the answer before the client reads
 * it). Returns 1, or 0 when the connection left that phase first. hg_lock
 * held. */
static int http_sock_cut(struct http_gen *gen, struct http_sock *hk, unsigned long long state,
                         enum http_cut why, int64_t now)
{
	int from = HTTP_STATE_PHASE(state);

	if (hk->hk_fd < 0 || !atomic_compare_exchange_strong(&hk->hk_state, &state,
	                                                     HTTP_STATE_NEXT(state, HTTP_PHASE_CUT))) {
		return 0;
	}
	gen->hg_cuts[why]++;
	metrics_http_cut(gen->hg_srv->hs_name, http_cut_names[why]);
	/* Over TLS the 408 would have to go through libmicrohttpd's GnuTLS
	 * session, which its server thread may be using (a handshake, a
	 * read): it is only closed (docs/operations.md, native TLS). */
	if (from != HTTP_PHASE_IDLE && !gen->hg_tls && gen->hg_timeout_answer != NULL) {
		const char *data = gen->hg_timeout_answer;
		size_t len = gen->hg_timeout_answer_len;
		/* Once its request line is in, the request's path is known
		 * (http_uri_logger): its own answer, for a slow head too. */
		int own = atomic_load(&hk->hk_answer);

		if (hk->hk_timeout != NULL) {
			data = hk->hk_timeout;
			len = hk->hk_timeout_len;
		} else if (own > 0 && (size_t)own <= gen->hg_n_timeouts) {
			data = gen->hg_timeouts[own - 1].hta_data;
			len = gen->hg_timeouts[own - 1].hta_len;
		}
		/* Its server thread writes nothing while a request is still
		 * arriving, and will write nothing more now. */
		(void)send(hk->hk_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		shutdown(hk->hk_fd, SHUT_WR);
		hk->hk_linger_ms = now;
		return 1;
	}
	shutdown(hk->hk_fd, SHUT_RDWR);
	return 1;
}

/* An idle keep-alive connection on which bytes arrived has begun its next
 * head: its deadline runs from now (the request line may not be complete
 * yet, so libmicrohttpd has not said so). hg_lock held. */
static void http_sock_probe_idle(struct http_sock *hk, unsigned long long state, int64_t now)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (hk->hk_fd < 0 || now - hk->hk_probe_ms < HTTP_IDLE_PROBE_MS) {
		return;
	}
	hk->hk_probe_ms = now;
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(hk->hk_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received)) {
		return;
	}
	if (hk->hk_idle_bytes == UINT64_MAX || hk->hk_idle_state != state) {
		/* The first look in this idle period: compared with the
		 * bytes of the requests completed so far (more began a head:
		 * sent with the last one, or since), else with now. */
		unsigned long long base = atomic_load(&hk->hk_idle_base);

		hk->hk_idle_state = state;
		hk->hk_idle_bytes = base;
		if (base == UINT64_MAX || base > ti.tcpi_bytes_received) {
			hk->hk_idle_bytes = ti.tcpi_bytes_received;
			return;
		}
	}
	if (ti.tcpi_bytes_received > hk->hk_idle_bytes) {
		/* Fails, rightly, if a request came and went meanwhile. */
		atomic_store(&hk->hk_since_ms, now);
		atomic_compare_exchange_strong(&hk->hk_state, &state,
		                               HTTP_STATE_NEXT(state, HTTP_PHASE_HEAD));
		hk->hk_idle_bytes = UINT64_MAX;
	}
}

struct http_victim {
	struct http_sock *hv_sock;
	unsigned long long hv_state;
	int64_t hv_since;
};

/* Heads before idle connections, the oldest first. */
static int http_victim_cmp(const void *a, const void *b)
{
	const struct http_victim *x = a;
	const struct http_victim *y = b;

	if (HTTP_STATE_PHASE(x->hv_state) != HTTP_STATE_PHASE(y->hv_state)) {
		return HTTP_STATE_PHASE(x->hv_state) == HTTP_PHASE_HEAD ? -1 : 1;
	}
	return x->hv_since < y->hv_since ? -1 : x->hv_since > y->hv_since;
}

/* When a request last completed on any of gen's server threads (monotonic). */
static int64_t http_gen_progress_ms(struct http_gen *gen)
{
	int64_t last = 0;
	unsigned t;

	for (t = 0; t < gen->hg_threads; t++) {
		int64_t done = atomic_load(&gen->hg_thread[t].ht_done_ms);

		last = done > last ? done : last;
	}
	return last;
}

/* Hands server thread t of gen a connection that is closed already: one end
 * of a socket pair whose other end is gone, on a descriptor that
 * libmicrohttpd gives to thread t (HTTP_STALL_MS). The thread reads its end
 * of stream and closes it; the connection callback leaves it out of the
 * connections the sweeper sees. Returns 0, or -1 (no descriptor). */
static int http_gen_wake_thread(struct http_gen *gen, unsigned t)
{
	struct sockaddr_un un;
	int sv[2];
	int fd;
	int tries;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		return -1;
	}
	close(sv[1]);
	fd = sv[0];
	/* The lowest free descriptor at or above the next one that names t;
	 * taken ones in between may name another: try a few. */
	for (tries = 0; tries < 8 && (unsigned)fd % gen->hg_threads != t; tries++) {
		int next = fcntl(fd, F_DUPFD_CLOEXEC,
		                 fd + (int)((t + gen->hg_threads - (unsigned)fd % gen->hg_threads) %
		                            gen->hg_threads));

		close(fd);
		if (next < 0) {
			return -1;
		}
		fd = next;
	}
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	atomic_fetch_add(&gen->hg_conns, 1);
	if (MHD_add_connection(gen->hg_daemon, fd, (struct sockaddr *)&un,
	                       (socklen_t)sizeof(un.sun_family)) != MHD_YES) {
		atomic_fetch_sub(&gen->hg_conns, 1); /* closed by libmicrohttpd */
	}
	return 0;
}

/* 1 when a server thread of gen holds HTTP_STALL_CONNS connections or
 * more: one that can meet libmicrohttpd's 128-event stall. */
static int http_gen_crowded(const struct http_gen *gen)
{
	unsigned t;

	for (t = 0; t < gen->hg_threads; t++) {
		if (atomic_load(&gen->hg_thread[t].ht_conns) >= HTTP_STALL_CONNS) {
			return 1;
		}
	}
	return 0;
}

/* Wakes each server thread of gen that has completed no request for
 * HTTP_STALL_MS while it has work: a request under way on one of its
 * connections for that long, or an idle one with input it has not read (a
 * poll of those, only for such threads); and, holding HTTP_STALL_CONNS
 * connections, one that has completed none for HTTP_STALL_READY_MS while
 * an idle connection has input it has not read. Looks at a thread at most
 * that often, or sooner when its oldest request turns HTTP_STALL_MS. */
static void http_gen_wake_stalled(struct http_gen *gen, int64_t now)
{
	struct http_thread *th = gen->hg_thread;
	struct pollfd *pf = NULL;
	size_t n_pf = 0;
	size_t cap_pf = 0;
	struct http_sock *hk;
	unsigned t;
	int any = 0;
	size_t i;

	if (!atomic_load(&gen->hg_started)) {
		return;
	}
	for (t = 0; t < gen->hg_threads; t++) {
		int64_t quiet = now - atomic_load(&th[t].ht_done_ms);

		th[t].ht_mark = HTTP_MARK_NONE;
		if (quiet >= HTTP_STALL_MS && now - th[t].ht_looked_ms >= HTTP_STALL_MS) {
			th[t].ht_mark = HTTP_MARK_ANY;
			th[t].ht_looked_ms = now;
			th[t].ht_young_ms = INT64_MAX;
		} else if (quiet >= HTTP_STALL_READY_MS &&
		           now - th[t].ht_looked_ready_ms >= HTTP_STALL_READY_MS &&
		           atomic_load(&th[t].ht_conns) >= HTTP_STALL_CONNS) {
			th[t].ht_mark = HTTP_MARK_UNREAD;
			th[t].ht_looked_ready_ms = now;
		}
		any |= th[t].ht_mark != HTTP_MARK_NONE;
	}
	if (!any) {
		return;
	}
	cap_pf = (size_t)atomic_load(&gen->hg_conns) + 64;
	pf = calloc(cap_pf, sizeof(*pf));
	pthread_mutex_lock(&gen->hg_lock);
	for (hk = gen->hg_socks; hk != NULL; hk = hk->hk_next) {
		int phase = HTTP_STATE_PHASE(atomic_load(&hk->hk_state));
		unsigned char mark = th[hk->hk_thread].ht_mark;

		if ((mark != HTTP_MARK_ANY && mark != HTTP_MARK_UNREAD) || hk->hk_fd < 0) {
			continue;
		}
		if (mark == HTTP_MARK_ANY &&
		    (phase == HTTP_PHASE_HEAD || phase == HTTP_PHASE_BODY ||
		     phase == HTTP_PHASE_BUSY)) {
			int64_t since = atomic_load(&hk->hk_since_ms);

			/* Work that began less than HTTP_STALL_MS ago had
			 * nothing to complete before (a quiet listener's
			 * probe): its thread is looked at again when it is
			 * that old. A head the sweeper saw begin
			 * (http_sock_probe_idle: since is that look) came in
			 * unread between two of its looks: waiting already.
			 * A head or body counts only with bytes its thread
			 * has not read (below): one whose client sends
			 * nothing (a browser's preconnected socket, a slow
			 * upload) leaves the thread nothing to do. */
			if (now - since < HTTP_STALL_MS &&
			    !(phase == HTTP_PHASE_HEAD && since == hk->hk_probe_ms)) {
				if (since < th[hk->hk_thread].ht_young_ms) {
					th[hk->hk_thread].ht_young_ms = since;
				}
			} else if (phase == HTTP_PHASE_BUSY) {
				th[hk->hk_thread].ht_mark = HTTP_MARK_WAKE;
			} else if (n_pf < cap_pf && pf != NULL) {
				pf[n_pf].fd = hk->hk_fd;
				pf[n_pf].events = POLLIN;
				n_pf++;
			}
		} else if ((phase == HTTP_PHASE_IDLE ||
		            (phase == HTTP_PHASE_HEAD &&
		             atomic_load(&hk->hk_since_ms) == hk->hk_probe_ms)) &&
		           n_pf < cap_pf && pf != NULL) {
			/* idle, or a head the sweeper saw begin: unread so far */
			pf[n_pf].fd = hk->hk_fd;
			pf[n_pf].events = POLLIN;
			n_pf++;
		}
	}
	/* Under the lock: a listed connection's descriptor is its own. */
	if (n_pf > 0 && poll(pf, (nfds_t)n_pf, 0) > 0) {
		for (i = 0; i < n_pf; i++) {
			/* Its thread, as hk_thread: the descriptor modulo the threads. */
			t = (unsigned)pf[i].fd % gen->hg_threads;
			if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
			    (th[t].ht_mark == HTTP_MARK_ANY || th[t].ht_mark == HTTP_MARK_UNREAD)) {
				th[t].ht_mark = HTTP_MARK_WAKE;
			}
		}
	}
	pthread_mutex_unlock(&gen->hg_lock);
	free(pf);
	for (t = 0; t < gen->hg_threads; t++) {
		if (th[t].ht_mark == HTTP_MARK_ANY && th[t].ht_young_ms < th[t].ht_looked_ms) {
			th[t].ht_looked_ms = th[t].ht_young_ms;
		}
		if (th[t].ht_mark == HTTP_MARK_WAKE && http_gen_wake_thread(gen, t) == 0) {
			gen->hg_wakeups++;
			metrics_http_wakeup(gen->hg_srv->hs_name);
		}
	}
}

/* One look at every connection of gen: heads past their deadline, bodies
 * under their rate, and (draining) idle connections and everything past the
 * drain deadline are closed; when fewer than a tenth of the connection limit
 * is free, the oldest incomplete heads, then the longest idle connections,
 * until it is. Requests complete or answering are never touched. */
static void http_gen_sweep(struct http_gen *gen, int64_t now)
{
	int draining = atomic_load(&gen->hg_draining);
	int past = draining && now >= gen->hg_drain_deadline_ms;
	int conns = atomic_load(&gen->hg_conns);
	unsigned reserve = http_gen_reserve(gen);
	size_t excess = 0;
	struct http_victim *v = NULL;
	size_t n_v = 0;
	size_t cap_v = 0;
	struct http_sock *hk;
	size_t i;

	if (!draining && conns > 0 && (unsigned)conns + reserve > gen->hg_conn_limit) {
		excess = (unsigned)conns + reserve - gen->hg_conn_limit;
		cap_v = (size_t)conns + 64; /* a few more may come while we look */
		v = calloc(cap_v, sizeof(*v));
	}
	pthread_mutex_lock(&gen->hg_lock);
	for (hk = gen->hg_socks; hk != NULL; hk = hk->hk_next) {
		unsigned long long state = atomic_load(&hk->hk_state);
		int phase = HTTP_STATE_PHASE(state);
		int64_t since = atomic_load(&hk->hk_since_ms);
		int64_t elapsed = now - since;

		switch (phase) {
		case HTTP_PHASE_HEAD:
			if ((past || elapsed > gen->hg_head_timeout_ms) &&
			    http_sock_cut(gen, hk, state, past ? HTTP_CUT_DRAIN : HTTP_CUT_HEAD,
			                  now)) {
				if (excess > 0) {
					excess--;
				}
				continue;
			}
			break;
		case HTTP_PHASE_BODY:
			/* bytes < rate * (elapsed - grace) / 1000, in integers */
			if ((past || (elapsed > HTTP_BODY_GRACE_MS &&
			              (uint64_t)atomic_load(&hk->hk_body_bytes) * 1000 <
			                      (uint64_t)gen->hg_body_min_rate *
			                              (uint64_t)(elapsed - HTTP_BODY_GRACE_MS))) &&
			    http_sock_cut(gen, hk, state, past ? HTTP_CUT_DRAIN : HTTP_CUT_BODY,
			                  now)) {
				if (excess > 0) {
					excess--;
				}
			}
			continue; /* an upload under way is never cut for room */
		case HTTP_PHASE_IDLE:
			/* Stopping, an idle connection has HTTP_DRAIN_IDLE_MS
			 * from the start of the drain to send its next request. */
			if (since < gen->hg_drain_since_ms) {
				since = gen->hg_drain_since_ms;
			}
			if ((past || (gen->hg_drain_stop && draining && now - since >= HTTP_DRAIN_IDLE_MS)) &&
			    http_sock_cut(gen, hk, state, HTTP_CUT_DRAIN, now)) {
				continue;
			}
			http_sock_probe_idle(hk, state, now);
			state = atomic_load(&hk->hk_state);
			phase = HTTP_STATE_PHASE(state);
			break;
		case HTTP_PHASE_CUT:
			if (hk->hk_linger_ms != 0 && now - hk->hk_linger_ms >= HTTP_LINGER_MS) {
				shutdown(hk->hk_fd, SHUT_RDWR);
				hk->hk_linger_ms = 0;
			}
			continue;
		default:
			continue; /* busy */
		}
		if (n_v < cap_v && (phase == HTTP_PHASE_HEAD || phase == HTTP_PHASE_IDLE)) {
			v[n_v].hv_sock = hk;
			v[n_v].hv_state = state;
			v[n_v].hv_since = atomic_load(&hk->hk_since_ms);
			n_v++;
		}
	}
	if (excess > 0 && n_v > 0) {
		qsort(v, n_v, sizeof(*v), http_victim_cmp);
		for (i = 0; i < n_v && excess > 0; i++) {
			if (http_sock_cut(gen, v[i].hv_sock, v[i].hv_state, HTTP_CUT_ROOM, now)) {
				excess--;
			}
		}
	}
	pthread_mutex_unlock(&gen->hg_lock);
	free(v);
	http_gen_wake_stalled(gen, now);
}

/* One line now and then on the slow and idle connections the sweeper
 * closed: under a flood, what happens, not one line per connection. */
static void http_gen_cut_log(struct http_gen *gen, int64_t now)
{
	unsigned long d[HTTP_CUT_N];
	unsigned long total = 0;
	int i;

	if (now - gen->hg_cut_log_ms < HTTP_CUT_LOG_MS) {
		return;
	}
	for (i = 0; i < HTTP_CUT_N; i++) {
		d[i] = gen->hg_cuts[i] - gen->hg_cuts_told[i];
		gen->hg_cuts_told[i] = gen->hg_cuts[i];
		total += i != HTTP_CUT_DRAIN ? d[i] : 0;
	}
	gen->hg_cut_log_ms = now;
	if (gen->hg_wakeups != gen->hg_wakeups_told) {
		log_info("http %s: woke server threads %lu times in %d s: each had completed "
		         "nothing for %d ms while a request of its waited that long for its "
		         "answer or lay unread, or held %d connections or more and had left a "
		         "request "
		         "unread for %d ms",
		         gen->hg_srv->hs_name, gen->hg_wakeups - gen->hg_wakeups_told,
		         HTTP_CUT_LOG_MS / 1000, HTTP_STALL_MS, HTTP_STALL_CONNS,
		         HTTP_STALL_READY_MS);
		gen->hg_wakeups_told = gen->hg_wakeups;
	}
	if (total == 0) {
		return;
	}
	log_warn("http %s: closed %lu slow connections in %d s: %lu heads not in within %lld ms, "
	         "%lu bodies under %zu bytes/s, %lu incomplete or idle to keep room "
	         "(%d of %u connections open)",
	         gen->hg_srv->hs_name, total, HTTP_CUT_LOG_MS / 1000, d[HTTP_CUT_HEAD],
	         (long long)gen->hg_head_timeout_ms, d[HTTP_CUT_BODY], gen->hg_body_min_rate,
	         d[HTTP_CUT_ROOM], atomic_load(&gen->hg_conns), gen->hg_conn_limit);
}

/* Where a draining generation is; 1 when it may stop now: no connection
 * left, or past the deadline and its flush time with no deferred answer
 * outstanding (those are always waited for). No settling time: the drain
 * began after the accept thread ended, and every connection that thread
 * took was counted before it was handed over. */
static int http_gen_drain_step(struct http_gen *gen, int64_t now)
{
	struct http_server *srv = gen->hg_srv;
	int conns = atomic_load(&gen->hg_conns);
	int suspended = atomic_load(&gen->hg_suspended);
	long answered = atomic_load(&gen->hg_answered) - gen->hg_drain_answered;

	if (conns == 0 && suspended == 0) {
		log_notice("http %s: generation %u drained in %lld ms (%ld requests answered with "
		           "Connection: close)",
		           srv->hs_name, gen->hg_number, (long long)(now - gen->hg_drain_since_ms),
		           answered);
		return 1;
	}
	if (now >= gen->hg_drain_deadline_ms && !gen->hg_deadline_told) {
		gen->hg_deadline_told = 1;
		log_warn("http %s: generation %u: drain deadline of %lld ms passed with %d "
		         "connections open; closing all but the requests being answered",
		         srv->hs_name, gen->hg_number, (long long)gen->hg_drain_timeout_ms, conns);
	}
	if (now >= gen->hg_drain_deadline_ms + HTTP_DRAIN_FLUSH_MS) {
		/* From here no request suspends; one that deferred meanwhile is
		 * counted, and waited for, or waits on its own thread. */
		atomic_store(&gen->hg_stopping, 1);
		if (atomic_load(&gen->hg_suspended) == 0) {
			log_warn("http %s: generation %u: stopping with %d connections still open",
			         srv->hs_name, gen->hg_number, atomic_load(&gen->hg_conns));
			return 1;
		}
	}
	if (now - gen->hg_drain_log_ms >= HTTP_DRAIN_LOG_MS) {
		gen->hg_drain_log_ms = now;
		log_info("http %s: generation %u draining: %d connections open, %d waiting for "
		         "their commit, %ld answered so far, %lld ms to the deadline",
		         srv->hs_name, gen->hg_number, conns, suspended, answered,
		         (long long)(gen->hg_drain_deadline_ms - now));
	}
	return 0;
}

static void http_gen_destroy(struct http_gen *gen);

/* Sleeps a sweep interval (ms), or until woken. */
static void http_sweeper_sleep(struct http_server *srv, long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += ms * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&srv->hs_lock);
	pthread_cond_timedwait(&srv->hs_cond, &srv->hs_lock, &ts);
	pthread_mutex_unlock(&srv->hs_lock);
}

/* Hands the resumes counted since the last call to the metrics (the
 * sweeper's thread). */
static void http_tell_resumes(struct http_server *srv)
{
	unsigned long long n = atomic_load(&srv->hs_resumes);
	unsigned long long ns = atomic_load(&srv->hs_resume_ns);

	if (n == srv->hs_resumes_told) {
		return;
	}
	metrics_http_resumed(srv->hs_name, n - srv->hs_resumes_told,
	                     (double)(ns - srv->hs_resume_ns_told) / 1e9);
	srv->hs_resumes_told = n;
	srv->hs_resume_ns_told = ns;
}

static void *http_sweeper_main(void *arg)
{
	struct http_server *srv = arg;
	int64_t swept_ms = 0; /* the last whole sweep */

	pthread_setname_np(pthread_self(), "http-sweeper"); /* top -H, perf */

	for (;;) {
		struct http_gen *cur;
		struct http_gen *g;
		struct http_gen *next;
		int64_t now = http_mono_ms();
		size_t lingering = http_linger_step(srv, now, 0);
		long interval = HTTP_SWEEP_MS;
		int done;

		pthread_mutex_lock(&srv->hs_lock);
		cur = srv->hs_gen;
		g = srv->hs_draining;
		done = srv->hs_stop;
		pthread_mutex_unlock(&srv->hs_lock);
		/* Between two sweeps, while a thread is crowded (and nothing
		 * lingers, drains or stops): only the sooner look at its
		 * threads, a few loads when they are busy. */
		if (cur != NULL && g == NULL && !done && lingering == 0 &&
		    now - swept_ms < HTTP_SWEEP_MS) {
			http_gen_wake_stalled(cur, now);
			http_sweeper_sleep(srv, HTTP_SWEEP_CROWDED_MS);
			continue;
		}
		swept_ms = now;
		http_tell_resumes(srv);
		if (cur != NULL) {
			http_gen_sweep(cur, now);
			http_gen_cut_log(cur, now);
			if (http_gen_crowded(cur)) {
				interval = HTTP_SWEEP_CROWDED_MS;
			}
		}
		/* Only this thread takes a generation off the list, and others
		 * only push onto its head: the walk is safe without the lock. */
		for (; g != NULL; g = next) {
			next = g->hg_next;
			http_gen_sweep(g, now);
			http_gen_cut_log(g, now);
			if (!http_gen_drain_step(g, now)) {
				continue;
			}
			pthread_mutex_lock(&srv->hs_lock);
			{
				struct http_gen **pp = &srv->hs_draining;

				while (*pp != g) {
					pp = &(*pp)->hg_next;
				}
				*pp = g->hg_next;
			}
			pthread_mutex_unlock(&srv->hs_lock);
			http_gen_destroy(g);
		}
		pthread_mutex_lock(&srv->hs_lock);
		done = srv->hs_stop && srv->hs_gen == NULL && srv->hs_draining == NULL;
		pthread_mutex_unlock(&srv->hs_lock);
		if (done) {
			http_linger_step(srv, now, 1);
			http_tell_resumes(srv);
			return NULL;
		}
		http_sweeper_sleep(srv, lingering > 0 ? HTTP_LINGER_SWEEP_MS : interval);
	}
}

/* ---- MHD callbacks ---- */

static char *http_path_decode(const char *url, int *ret_nul);
static int http_timeout_find(const struct http_gen *gen, const char *path);
static void http_sock_timeout_set(struct http_gen *gen, struct http_sock *hk, char *data,
                                  size_t len);
static void http_timeout_own(struct MHD_Connection *con, struct http_conn *hc, const char *url,
                             const char *method, const char *version);

/* Query parameters in q (the text after '?'): one more than its '&'. */
static size_t http_count_params(const char *q)
{
	size_t n = *q != '\0';

	for (; *q != '\0'; q++) {
		n += *q == '&';
	}
	return n;
}

static void *http_uri_logger(void *cls, const char *uri, struct MHD_Connection *con)
{
	struct http_gen *gen = cls;
	struct http_conn *hc = calloc(1, sizeof(*hc));
	const union MHD_ConnectionInfo *ci;
	char *q;

	if (hc == NULL) {
		return NULL;
	}
	hc->hc_gen = gen;
	hc->hc_con = con;
	ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	hc->hc_sock = ci != NULL ? ci->socket_context : NULL;
	if (hc->hc_sock != NULL && http_sock_phase(hc->hc_sock) == HTTP_PHASE_IDLE) {
		/* The next request on a kept-alive connection: its head's
		 * deadline runs from here unless the sweeper saw it begin. */
		http_sock_move(hc->hc_sock, HTTP_PHASE_HEAD);
	}
	hc->hc_url_len = strlen(uri);
	hc->hc_url = strndup(uri, HTTP_URL_MAX);
	hc->hc_path = http_path_decode(uri, &hc->hc_path_nul);
	if (hc->hc_sock != NULL && gen->hg_n_timeouts > 0) {
		/* The request line is in, the header fields are not: a head
		 * too slow from here on is told 408 in its path's format. */
		atomic_store(&hc->hc_sock->hk_answer,
		             hc->hc_path_nul ? 0 : http_timeout_find(gen, hc->hc_path));
	}
	q = strchr(uri, '?');
	if (q != NULL) {
		hc->hc_params = http_count_params(q + 1);
		/* libmicrohttpd (0.9.75) next splits the query into the
		 * connection's 16 KiB pool, and when the pool runs out it queues
		 * an error that it then never sends: the client waits for the
		 * timeout. Nothing here reads its copy (http_query_get reads
		 * the target), so it gets an empty query to split. uri points
		 * into the connection's own read buffer, which is writable. */
		q[1] = '\0';
	}
	buf_init(&hc->hc_body, gen->hg_body_max);
	hc->hc_received_ms = http_now_ms();
	atomic_init(&hc->hc_defer.hd_state, HTTP_DEFER_NONE);
	return hc;
}

static void http_conn_free(struct http_conn *hc)
{
	buf_finish(&hc->hc_body);
	free(hc->hc_refusal);
	free(hc->hc_url);
	free(hc->hc_headers);
	free(hc->hc_path);
	free(hc);
}

/* Takes a deferred request out of hg_suspended (on a server thread). */
static void http_defer_uncount(struct http_conn *hc)
{
	if (hc->hc_defer.hd_counted) {
		hc->hc_defer.hd_counted = 0;
		atomic_fetch_sub(&hc->hc_gen->hg_suspended, 1);
	}
}

/* The request ended with its deferral unfinished. Returns 1 when hc must
 * stay allocated (http_resume is still to come and frees it), else 0. */
static int http_defer_abandon(struct http_conn *hc)
{
	struct http_deferred *d = &hc->hc_defer;
	int state = atomic_load(&d->hd_state);

	http_defer_uncount(hc);
	while (state == HTTP_DEFER_WAITING || state == HTTP_DEFER_SUSPENDED) {
		if (atomic_compare_exchange_strong(&d->hd_state, &state, HTTP_DEFER_ORPHANED)) {
			/* libmicrohttpd never ends a suspended connection unless
			 * stopped with one, which the drain prevents. */
			log_err("http %s: a deferred request ended before its answer was ready",
				hc->hc_gen->hg_srv->hs_name);
			return 1;
		}
	}
	if (state == HTTP_DEFER_READY) {
		/* Resumed, but the client went away before the answer was built. */
		d->hd_fn(d->hd_arg, NULL, NULL);
		atomic_store(&d->hd_state, HTTP_DEFER_FINISHED);
	}
	return 0;
}

/* Counts the bytes of hc, a kept-alive connection's request that completed
 * (ok: it was answered), and leaves the count as what the sweeper's first
 * look at the idle connection compares the bytes received with. A
 * pipelined request, or the first bytes of the next one sent with the last,
 * are in libmicrohttpd's buffer already and never show as new bytes to a
 * look that compared with the bytes received at completion; against the
 * count they do, and that head's deadline runs from that look. No system
 * call here: this runs once per request. */
static void http_sock_rest(struct http_sock *hk, const struct http_conn *hc, int ok)
{
	if (hk->hk_consumed != UINT64_MAX) {
		if (!ok || hc->hc_chunked || hc->hc_head_bytes == 0) {
			hk->hk_consumed = UINT64_MAX;
		} else {
			hk->hk_consumed +=
			        hc->hc_head_bytes + (uint64_t)atomic_load(&hk->hk_body_bytes);
		}
	}
	atomic_store(&hk->hk_idle_base, hk->hk_consumed);
}

static void http_completed(void *cls, struct MHD_Connection *con, void **con_cls,
			   enum MHD_RequestTerminationCode toe)
{
	struct http_gen *gen = cls;
	struct http_conn *hc = *con_cls;

	if (hc == NULL) {
		return;
	}
	*con_cls = NULL;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
		atomic_fetch_add(&gen->hg_answered, 1);
		atomic_store(&gen->hg_thread[hc->hc_sock != NULL ? hc->hc_sock->hk_thread : 0]
		                      .ht_done_ms,
		             http_mono_ms());
	}
	if (toe == MHD_REQUEST_TERMINATED_WITH_ERROR && http_head_lost(gen, hc)) {
		atomic_store(&hc->hc_sock->hk_unread, 1);
	}
	if (hc->hc_sock != NULL) {
		/* The next request's head is the problem's until its request
		 * line names a path. */
		atomic_store(&hc->hc_sock->hk_answer, 0);
		if (hc->hc_sock->hk_timeout != NULL) {
			http_sock_timeout_set(gen, hc->hc_sock, NULL, 0);
		}
		http_sock_rest(hc->hc_sock, hc, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
	}
	http_sock_move(hc->hc_sock, HTTP_PHASE_IDLE);
	if (hc->hc_defer.hd_fn != NULL && http_defer_abandon(hc)) {
		return;
	}
	http_conn_free(hc);
}

static enum MHD_Result http_collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
					   const char *value)
{
	struct http_header_list *hl = cls;

	if (hl->hl_n == hl->hl_cap) {
		hl->hl_overflow = 1;
		return MHD_NO;
	}
	hl->hl_items[hl->hl_n].hh_name = key;
	hl->hl_items[hl->hl_n].hh_value = value != NULL ? value : "";
	hl->hl_n++;
	return MHD_YES;
}

struct http_header_ctx {
	struct MHD_Response *hx_resp;
};

static void http_add_reply_header(void *arg, const char *name, const char *value)
{
	struct http_header_ctx *hx = arg;

	MHD_add_response_header(hx->hx_resp, name, value);
}

/* Queues r; its body is handed over to libmicrohttpd (r keeps the rest). */
static enum MHD_Result http_send(struct MHD_Connection *con, struct reply *r, int close_after)
{
	static char empty[] = "";
	struct MHD_Response *resp;
	struct http_header_ctx hx;
	enum MHD_Result rc;

	if (r->reply_body != NULL && r->reply_body_len > 0) {
		resp = MHD_create_response_from_buffer_with_free_callback(r->reply_body_len, r->reply_body, free);
		if (resp != NULL) {
			r->reply_body = NULL;
			r->reply_body_len = 0;
		}
	} else {
		resp = MHD_create_response_from_buffer(0, empty, MHD_RESPMEM_PERSISTENT);
	}
	if (resp == NULL) {
		log_err("http: cannot create a response");
		return MHD_NO;
	}
	if (r->reply_content_type != NULL) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->reply_content_type);
	}
	hx.hx_resp = resp;
	reply_each_header(r, http_add_reply_header, &hx);
	if (close_after) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	}
	rc = MHD_queue_response(con, (unsigned)r->reply_status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static void http_client_address(const struct http_gen *gen, const struct http_header_list *hl, const char *peer,
				char *out, size_t out_size)
{
	const char *xff = NULL;
	char *copy;
	char *p;
	size_t i;
	int trusted = 0;
	size_t n;

	if (out_size == 0) {
		return;
	}
	/* snprintf's "%s" without printf: this runs for every request. */
	n = strnlen(peer, out_size - 1);
	memcpy(out, peer, n);
	out[n] = '\0';
	if (gen->hg_proxies == NULL) {
		return;
	}
	for (i = 0; gen->hg_proxies[i] != NULL; i++) {
		if (cidr_match(gen->hg_proxies[i], peer) == 1) {
			trusted = 1;
			break;
		}
	}
	if (!trusted) {
		return;
	}
	for (i = 0; i < hl->hl_n; i++) {
		if (strcasecmp(hl->hl_items[i].hh_name, "X-Forwarded-For") == 0) {
			xff = hl->hl_items[i].hh_value; /* the last one: appended by our proxy */
		}
	}
	if (xff == NULL) {
		return;
	}
	copy = strdup(xff);
	if (copy == NULL) {
		return;
	}
	/* Walk from the right: the first address that is not a trusted proxy is
	 * the client; anything left of it could have been forged. */
	for (;;) {
		char *comma = strrchr(copy, ',');
		char *addr = comma != NULL ? comma + 1 : copy;
		int is_proxy = 0;
		unsigned char tmp[16];
		int fam;

		while (*addr == ' ') {
			addr++;
		}
		for (p = addr + strlen(addr); p > addr && p[-1] == ' '; p--) {
			p[-1] = '\0';
		}
		if (cidr_parse_addr(addr, tmp, &fam) < 0) {
			break;
		}
		for (i = 0; gen->hg_proxies[i] != NULL; i++) {
			if (cidr_match(gen->hg_proxies[i], addr) == 1) {
				is_proxy = 1;
				break;
			}
		}
		if (!is_proxy || comma == NULL) {
			snprintf(out, out_size, "%s", addr);
			if (!is_proxy) {
				break;
			}
		}
		if (comma == NULL) {
			break;
		}
		*comma = '\0';
	}
	free(copy);
}

static void http_peer_address(struct MHD_Connection *con, char *out, size_t out_size)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

	snprintf(out, out_size, "unknown");
	if (sa == NULL) {
		return;
	}
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)out_size);
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			inet_ntop(AF_INET, &a6->s6_addr[12], out, (socklen_t)out_size);
		} else {
			inet_ntop(AF_INET6, a6, out, (socklen_t)out_size);
		}
	}
}

/* The percent-decoded path of a request target (up to '?'), malloc'd;
 * ret_nul set when it decodes to a NUL byte (the path is then cut there,
 * for the refusal's decoration only). A '%' not followed by two hex digits
 * stays as it is. NULL when out of memory. */
static char *http_path_decode(const char *url, int *ret_nul)
{
	const char *q = strchr(url, '?');
	size_t len = q != NULL ? (size_t)(q - url) : strlen(url);
	char *path = malloc(len + 1);
	size_t i;
	size_t o = 0;

	*ret_nul = 0;
	if (path == NULL) {
		return NULL;
	}
	for (i = 0; i < len; i++) {
		int hi;
		int lo;

		if (url[i] == '%' && i + 2 < len && (hi = text_hex_value(url[i + 1])) >= 0 &&
		    (lo = text_hex_value(url[i + 2])) >= 0) {
			path[o] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			path[o] = url[i];
		}
		if (path[o] == '\0') {
			*ret_nul = 1;
			break;
		}
		o++;
	}
	path[o] = '\0';
	return path;
}

/* Fills hc->hc_req from the connection: the head, and the body read so far
 * (none for a refusal). It lives in hc, so that a deferred answer can still
 * read it after a resume. Returns 0, or -1 when out of memory. */
static int http_request_build(struct MHD_Connection *con, struct http_conn *hc, const char *url,
                              const char *method, const char *version)
{
	struct http_request *req = &hc->hc_req;

	if (hc->hc_headers == NULL) {
		/* Sized to the request's fields: a list of HTTP_HEADERS_MAX
		 * for every request cost a large allocation each. */
		int n = MHD_get_connection_values(con, MHD_HEADER_KIND, NULL, NULL);
		size_t cap = n < 0 ? 0 : (size_t)n < HTTP_HEADERS_MAX ? (size_t)n : HTTP_HEADERS_MAX;

		hc->hc_headers = malloc(sizeof(*hc->hc_headers) + cap * sizeof(hc->hc_headers->hl_items[0]));
		if (hc->hc_headers == NULL) {
			return -1;
		}
		hc->hc_headers->hl_n = 0;
		hc->hc_headers->hl_cap = cap;
		hc->hc_headers->hl_overflow = 0;
		MHD_get_connection_values(con, MHD_HEADER_KIND, http_collect_header,
		                          hc->hc_headers);
	}
	if (hc->hc_path == NULL) {
		/* out of memory in http_uri_logger: one more try */
		hc->hc_path =
		        http_path_decode(hc->hc_url != NULL ? hc->hc_url : url, &hc->hc_path_nul);
		if (hc->hc_path == NULL) {
			return -1;
		}
	}
	if (hc->hc_sock != NULL) {
		_Static_assert(sizeof(hc->hc_peer) == sizeof(hc->hc_sock->hk_peer),
		               "the connection's peer text fits the request's");
		memcpy(hc->hc_peer, hc->hc_sock->hk_peer, sizeof(hc->hc_peer));
	} else {
		http_peer_address(con, hc->hc_peer, sizeof(hc->hc_peer));
	}
	http_client_address(hc->hc_gen, hc->hc_headers, hc->hc_peer, hc->hc_client,
	                    sizeof(hc->hc_client));
	req->hr_method = method;
	req->hr_url = hc->hc_url != NULL ? hc->hc_url : url;
	req->hr_path = hc->hc_path;
	req->hr_version = version;
	req->hr_headers = hc->hc_headers->hl_items;
	req->hr_n_headers = hc->hc_headers->hl_n;
	req->hr_body = (const unsigned char *)(hc->hc_body.buf_data != NULL && !hc->hc_refused
	                                               ? hc->hc_body.buf_data
	                                               : "");
	req->hr_body_len = hc->hc_refused ? 0 : hc->hc_body.buf_len;
	req->hr_peer = hc->hc_peer;
	req->hr_client = hc->hc_client;
	req->hr_received_ms = hc->hc_received_ms;
	req->hr_conn = hc;
	return 0;
}

static int http_answer_wire(const struct reply *r, const char *status_line, char **ret,
                            size_t *ret_len);

/* Answers the request with a problem before routing it, and closes the
 * connection (its body, if any, is not read: it lingers, see
 * HTTP_DISCARD_MS). The route layer may decorate the answer (ho_refused). */
static enum MHD_Result http_refuse(struct MHD_Connection *con, struct http_conn *hc,
                                   const struct http_refusal *hf, const char *url,
                                   const char *method, const char *version)
{
	struct http_gen *gen = hc->hc_gen;
	const union MHD_ConnectionInfo *head;
	struct reply r;
	enum MHD_Result rc;

	hc->hc_refused = 1;
	metrics_http_refused(gen->hg_srv->hs_name, hf->hf_status);
	if (hc->hc_sock != NULL) {
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
		                                             MHD_HTTP_HEADER_CONTENT_LENGTH);

		if ((cl != NULL && strcmp(cl, "0") != 0) ||
		    MHD_lookup_connection_value(con, MHD_HEADER_KIND,
		                                MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL) {
			atomic_store(&hc->hc_sock->hk_unread, 1);
		}
	}
	if (http_sock_enter(gen, hc->hc_sock, HTTP_PHASE_BUSY) < 0) {
		return MHD_NO;
	}
	reply_init(&r);
	if (reply_problem(&r, hf->hf_status, hf->hf_slug, hf->hf_title, hf->hf_detail) < 0) {
		return MHD_NO;
	}
	if (gen->hg_refused != NULL && http_request_build(con, hc, url, method, version) == 0) {
		gen->hg_refused(gen->hg_srv->hs_arg, &hc->hc_req, hf, &r);
		if (r.reply_status == 0) {
			reply_problem(&r, hf->hf_status, hf->hf_slug, hf->hf_title, hf->hf_detail);
		}
	}
	/* Kept for http_head_lost when the head is heavy (its bytes or its
	 * fields, whose records fill the same pool); without memory for it,
	 * that case closes without a word, as before. */
	head = MHD_get_connection_info(con, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	if (!gen->hg_tls && hc->hc_refusal == NULL &&
	    (hf->hf_status == 431 || (head != NULL && head->header_size > HTTP_HEAD_MAX))) {
		char line[80];
		const char *phrase = MHD_get_reason_phrase_for((unsigned)r.reply_status);

		snprintf(line, sizeof(line), "HTTP/1.1 %d %s", r.reply_status,
		         phrase != NULL && phrase[0] != '\0' ? phrase : "Refused");
		if (http_answer_wire(&r, line, &hc->hc_refusal, &hc->hc_refusal_len) < 0) {
			hc->hc_refusal = NULL;
		}
	}
	rc = http_send(con, &r, 1);
	reply_finish(&r);
	return rc;
}

static void http_refusal_set(struct http_refusal *hf, int status, const char *slug,
                             const char *title, const char *detail)
{
	hf->hf_status = status;
	hf->hf_slug = slug;
	hf->hf_title = title;
	hf->hf_detail = detail;
}

static void http_refuse_too_large(struct http_refusal *hf)
{
	http_refusal_set(hf, 413, "body_too_large", "Request body too large",
	                 "The body is larger than this server accepts.");
}

/* What the framing checks need from the header fields. */
struct http_framing {
	size_t hm_fields;
	size_t hm_host_n; /* Host fields */
	int hm_folded;    /* a field was continued on an obs-fold line */
	size_t hm_cl_n;   /* Content-Length fields */
	int hm_cl_bad;    /* one is not a plain decimal number */
	int hm_cl_differ; /* two say different lengths */
	unsigned long long hm_cl;
	size_t hm_te_n; /* Transfer-Encoding fields */
	const char *hm_te_first;
	char hm_te[256]; /* their values joined with ", " */
	int hm_te_long;  /* longer than that */
};

static int http_parse_length(const char *s, unsigned long long *ret)
{
	unsigned long long n = 0;
	const char *p;

	if (*s == '\0') {
		return -1;
	}
	for (p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || n > (ULLONG_MAX - 9) / 10) {
			return -1;
		}
		n = n * 10 + (unsigned long long)(*p - '0');
	}
	*ret = n;
	return 0;
}

static enum MHD_Result http_framing_collect(void *cls, enum MHD_ValueKind kind, const char *key,
                                            const char *value)
{
	struct http_framing *hm = cls;
	unsigned long long n = 0;

	hm->hm_fields++;
	if (value == NULL) {
		value = "";
	} else if ((uintptr_t)value < (uintptr_t)key + strlen(key) + 1) {
		/* libmicrohttpd (0.9.75) joins an obsolete folded line to the
		 * field's name rather than its value ("X-A: 1\r\n 2" becomes
		 * "X-A2: 1"), moving the name to a new place in its pool, past
		 * the read buffer. Every other field's value follows its name
		 * in the line it came in. */
		hm->hm_folded = 1;
	}
	if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
		hm->hm_host_n++;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (http_parse_length(value, &n) < 0) {
			hm->hm_cl_bad = 1;
		} else if (hm->hm_cl_n > 0 && n != hm->hm_cl) {
			hm->hm_cl_differ = 1;
		}
		hm->hm_cl = n;
		hm->hm_cl_n++;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		size_t used = strlen(hm->hm_te);

		if (hm->hm_te_n == 0) {
			hm->hm_te_first = value;
		}
		if (snprintf(hm->hm_te + used, sizeof(hm->hm_te) - used, "%s%s",
		             used > 0 ? ", " : "", value) >= (int)(sizeof(hm->hm_te) - used)) {
			hm->hm_te_long = 1;
		}
		hm->hm_te_n++;
	}
	return MHD_YES;
}

/* The last transfer coding in a Transfer-Encoding list, and whether there
 * are others: 1 when it is "chunked" and alone, 0 when it is "chunked"
 * after others, -1 when it is not "chunked" (the length cannot be known). */
static int http_te_chunked_last(const char *list)
{
	const char *last = list;
	const char *p;
	size_t len;
	int others = 0;

	for (p = list; *p != '\0'; p++) {
		if (*p == ',') {
			const char *q = p + 1;

			while (*q == ' ' || *q == '\t') {
				q++;
			}
			if (*q != '\0' && *q != ',') {
				others = 1;
				last = q;
			}
		}
	}
	while (*last == ' ' || *last == '\t') {
		last++;
	}
	len = strcspn(last, ",; \t");
	if (len != 7 || strncasecmp(last, "chunked", 7) != 0) {
		return -1;
	}
	return others ? 0 : 1;
}

/* 1 when the path of url (up to '?') holds an encoded slash (%2F): once
 * decoded it would be a separator the client did not send as one, so
 * "/hooks%2Fstripe" would reach /hooks/stripe. */
static int http_path_encoded_slash(const char *url)
{
	const char *p;

	for (p = url; *p != '\0' && *p != '?'; p++) {
		if (p[0] == '%' && p[1] == '2' && (p[2] == 'f' || p[2] == 'F')) {
			return 1;
		}
	}
	return 0;
}

/* 1 + the index of path's own 408 in gen->hg_timeouts, or 0. */
static int http_timeout_find(const struct http_gen *gen, const char *path)
{
	size_t i;

	for (i = 0; path != NULL && i < gen->hg_n_timeouts; i++) {
		const struct http_timeout_answer *ta = &gen->hg_timeouts[i];

		if (strncmp(ta->hta_path, path, ta->hta_path_len) == 0 &&
		    (path[ta->hta_path_len] == '\0' ||
		     (ta->hta_under && path[ta->hta_path_len] == '/'))) {
			return (int)i + 1;
		}
	}
	return 0;
}

/* Checks a request head once it is all in. Returns 0, or -1 with the
 * refusal in hf. libmicrohttpd takes the first Content-Length and the first
 * Transfer-Encoding, and only an exact "chunked" as chunked: anything that
 * could make another parser frame the body differently is refused here,
 * before a byte of it is read (RFC 9112 6.1 and 6.3). */
static int http_head_check(struct MHD_Connection *con, struct http_conn *hc, const char *url,
                           const char *version, struct http_refusal *hf)
{
	const union MHD_ConnectionInfo *ci =
	        MHD_get_connection_info(con, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	struct http_framing hm;

	if (hc->hc_url == NULL || hc->hc_path == NULL) {
		http_refusal_set(hf, 503, "unavailable", "Temporarily unavailable",
		                 "Out of memory.");
		return -1;
	}
	/* The target runs from url to the space before the version, which
	 * libmicrohttpd ended with a NUL: a NUL before that came from the
	 * client, and everything after it was hidden from the route. */
	if (version[0] != '\0' && (uintptr_t)version != (uintptr_t)url + hc->hc_url_len + 1) {
		http_refusal_set(hf, 400, "nul_in_target", "NUL byte in the request target",
		                 "The request target contains a NUL byte.");
		return -1;
	}
	if (hc->hc_url_len > HTTP_URL_MAX) {
		http_refusal_set(
		        hf, 414, "target_too_long", "Request target too long",
		        "The request target is longer than " HTTP_XSTR(HTTP_URL_MAX) " bytes.");
		return -1;
	}
	if (hc->hc_params > HTTP_QUERY_PARAMS_MAX) {
		http_refusal_set(hf, 414, "too_many_query_parameters", "Too many query parameters",
		                 "The request target has more than " HTTP_XSTR(
		                         HTTP_QUERY_PARAMS_MAX) " query parameters.");
		return -1;
	}
	if (hc->hc_path_nul) {
		http_refusal_set(hf, 400, "nul_in_target", "NUL byte in the request target",
		                 "The path contains an encoded NUL byte (%00).");
		return -1;
	}
	if (http_path_encoded_slash(hc->hc_url)) {
		http_refusal_set(hf, 400, "encoded_slash", "Encoded slash in the path",
		                 "The path contains an encoded slash (%2F); send / as itself.");
		return -1;
	}
	memset(&hm, 0, sizeof(hm));
	MHD_get_connection_values(con, MHD_HEADER_KIND, http_framing_collect, &hm);
	hc->hc_head_bytes = ci != NULL ? ci->header_size : 0;
	hc->hc_chunked = hm.hm_te_n > 0;
	if (hm.hm_fields > HTTP_HEADERS_MAX) {
		http_refusal_set(
		        hf, 431, "too_many_headers", "Too many header fields",
		        "The request has more than " HTTP_XSTR(HTTP_HEADERS_MAX) " header fields.");
		return -1;
	}
	if (ci != NULL && ci->header_size > HTTP_HEAD_MAX) {
		http_refusal_set(hf, 431, HTTP_HEAD_SLUG, HTTP_HEAD_TITLE, HTTP_HEAD_DETAIL);
		return -1;
	}
	/* RFC 9112 5.2: refused, not joined, as the library lost where the
	 * name ended. */
	if (hm.hm_folded) {
		http_refusal_set(hf, 400, "obsolete_line_folding", "Folded header field",
		                 "A header field is continued on a line that starts with a space "
		                 "or tab (obsolete line folding); send each field on one line.");
		return -1;
	}
	/* RFC 9112 3.2: which host the request is for must be unambiguous,
	 * and an HTTP/1.1 request must name it (HTTP/1.0 may not; the
	 * library takes any other 1.x as 1.1 and refuses the rest with 505).
	 * libmicrohttpd 0.9.75 checks the Host only with
	 * MHD_OPTION_STRICT_FOR_CLIENT, which is not set. */
	if (hm.hm_host_n > 1) {
		http_refusal_set(hf, 400, "repeated_host", "More than one Host",
		                 "The request has more than one Host header field.");
		return -1;
	}
	if (hm.hm_host_n == 0 && strcmp(version, MHD_HTTP_VERSION_1_0) != 0) {
		http_refusal_set(hf, 400, "missing_host", "No Host",
		                 "An HTTP/1.1 request must have a Host header field.");
		return -1;
	}
	if (hm.hm_te_n > 0) {
		int chunked = hm.hm_te_long ? -1 : http_te_chunked_last(hm.hm_te);

		if (hm.hm_cl_n > 0 || strcmp(version, MHD_HTTP_VERSION_1_0) == 0) {
			http_refusal_set(hf, 400, "ambiguous_framing", "Ambiguous message framing",
			                 "Transfer-Encoding comes with Content-Length, or in an "
			                 "HTTP/1.0 request.");
			return -1;
		}
		if (chunked < 0) {
			http_refusal_set(hf, 400, "bad_transfer_encoding",
			                 "Transfer-Encoding does not end in chunked",
			                 "The length of the body cannot be known.");
			return -1;
		}
		if (chunked == 0 || hm.hm_te_n > 1 || strcasecmp(hm.hm_te_first, "chunked") != 0) {
			http_refusal_set(hf, 501, "unsupported_transfer_encoding",
			                 "Transfer coding not supported",
			                 "Only Transfer-Encoding: chunked is supported.");
			return -1;
		}
	}
	if (hm.hm_cl_bad || hm.hm_cl_differ) {
		http_refusal_set(
		        hf, 400, "conflicting_content_length",
		        "Invalid or conflicting Content-Length",
		        "Content-Length must be one decimal number, the same in every field.");
		return -1;
	}
	if (hm.hm_cl_n > 0 && hm.hm_cl > hc->hc_gen->hg_body_max) {
		http_refuse_too_large(hf);
		return -1;
	}
	/* The announced body in one allocation rather than grown by doubling
	 * from 256 bytes; a failure here only leaves the growing to later. A
	 * large one still grows as its bytes arrive: an announcement alone
	 * reserves no more than HTTP_BODY_EXPECT_MAX. */
	if (hm.hm_cl_n > 0 && hm.hm_cl > 0 && hm.hm_cl <= HTTP_BODY_EXPECT_MAX) {
		buf_expect(&hc->hc_body, (size_t)hm.hm_cl);
	}
	return 0;
}

/* ---- deferred answers ---- */

struct http_deferred *http_defer(const struct http_request *req, http_finish_fn fn, void *arg)
{
	struct http_conn *hc = req->hr_conn;
	struct http_deferred *d = &hc->hc_defer;

	d->hd_fn = fn;
	d->hd_arg = arg;
	d->hd_con = hc->hc_con;
	d->hd_hc = hc;
	atomic_store(&d->hd_state, HTTP_DEFER_WAITING);
	return d;
}

void http_resume(struct http_deferred *d)
{
	/* Read before the exchange: once it is READY, d may be freed by the
	 * server thread unless the connection was suspended. */
	struct MHD_Connection *con = d->hd_con;
	int64_t now_ns = http_mono_ns();
	int prev;

	/* Before the exchange, while d is surely there; read by the server
	 * thread only once it sees READY. */
	d->hd_resumed_ns = now_ns;
	prev = atomic_exchange(&d->hd_state, HTTP_DEFER_READY);
	if (prev == HTTP_DEFER_SUSPENDED) {
		MHD_resume_connection(con);
	} else if (prev == HTTP_DEFER_ORPHANED) {
		d->hd_fn(d->hd_arg, NULL, NULL);
		http_conn_free(d->hd_hc);
	}
	/* WAITING: the route's thread has not suspended yet and will see READY. */
}

/* Builds the deferred answer and queues it (server thread, state READY). */
static enum MHD_Result http_defer_finish(struct MHD_Connection *con, struct http_conn *hc)
{
	struct http_deferred *d = &hc->hc_defer;
	struct reply r;
	enum MHD_Result rc;

	reply_init(&r);
	d->hd_fn(d->hd_arg, &hc->hc_req, &r);
	atomic_store(&d->hd_state, HTTP_DEFER_FINISHED);
	if (r.reply_status == 0) {
		reply_problem(&r, 500, "internal", "Internal error", NULL);
	}
	rc = http_send(con, &r, atomic_load(&hc->hc_gen->hg_draining));
	reply_finish(&r);
	/* Counted until now, so a drain waits until the answer is queued. */
	http_defer_uncount(hc);
	return rc;
}

/* Right after a route deferred: suspends the connection, unless the answer
 * is ready already (a duplicate answered from a read connection). */
static enum MHD_Result http_defer_suspend(struct MHD_Connection *con, struct http_conn *hc)
{
	struct http_deferred *d = &hc->hc_defer;
	struct http_gen *gen = hc->hc_gen;
	int expected = HTTP_DEFER_WAITING;

	if (atomic_load(&d->hd_state) == HTTP_DEFER_READY) {
		return http_defer_finish(con, hc);
	}
	/* Counted before stopping is read, as a drain sets stopping before it
	 * reads the count: either it waits for this request, or this request
	 * sees it stopping and does not suspend. */
	atomic_fetch_add(&gen->hg_suspended, 1);
	d->hd_counted = 1;
	if (atomic_load(&gen->hg_stopping)) {
		/* A daemon may not stop with a suspended connection: wait on this
		 * thread instead, for a commit already under way. */
		while (atomic_load(&d->hd_state) != HTTP_DEFER_READY) {
			http_sleep_ms(1);
		}
		return http_defer_finish(con, hc);
	}
	MHD_suspend_connection(con);
	if (!atomic_compare_exchange_strong(&d->hd_state, &expected, HTTP_DEFER_SUSPENDED)) {
		/* http_resume came in between and left the resuming to us. */
		MHD_resume_connection(con);
	}
	return MHD_YES;
}

static enum MHD_Result http_access(void *cls, struct MHD_Connection *con, const char *url, const char *method,
				   const char *version, const char *upload_data, size_t *upload_data_size,
				   void **con_cls)
{
	struct http_gen *gen = cls;
	struct http_server *srv = gen->hg_srv;
	struct http_conn *hc = *con_cls;
	struct http_refusal hf;
	struct reply r;
	enum MHD_Result rc;

	if (hc == NULL) {
		return MHD_NO; /* out of memory in the URI logger */
	}
	if (hc->hc_defer.hd_fn != NULL) {
		/* Called again after a resume. */
		if (atomic_load(&hc->hc_defer.hd_state) != HTTP_DEFER_READY) {
			return MHD_YES;
		}
		atomic_fetch_add(&srv->hs_resumes, 1);
		atomic_fetch_add(&srv->hs_resume_ns,
		                 (unsigned long long)(http_mono_ns() - hc->hc_defer.hd_resumed_ns));
		return http_defer_finish(con, hc);
	}
	if (hc->hc_refused) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (hc->hc_sock != NULL && http_sock_phase(hc->hc_sock) == HTTP_PHASE_CUT) {
		http_sock_cut_wait(gen, hc->hc_sock);
		return MHD_NO; /* the sweeper closed it: read and route nothing more */
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (hc->hc_sock != NULL) {
			atomic_fetch_add(&hc->hc_sock->hk_body_bytes, (long long)n);
		}
		if (hc->hc_too_large) {
			/* A body of unannounced length went over the cap: drop the
			 * rest so the client can read the 413, up to a bound. */
			hc->hc_discarded += n;
			if (hc->hc_discarded > HTTP_DISCARD_MAX) {
				http_refuse_too_large(&hf);
				return http_refuse(con, hc, &hf, url, method, version);
			}
			return MHD_YES;
		}
		if (buf_append(&hc->hc_body, upload_data, n) < 0) {
			hc->hc_too_large = 1;
		}
		return MHD_YES;
	}
	if (hc->hc_too_large) {
		http_refuse_too_large(&hf);
		return http_refuse(con, hc, &hf, url, method, version);
	}
	if (!hc->hc_head_seen) {
		/* First call: the head is in. Refuse what is malformed or too
		 * large before reading any of the body. */
		hc->hc_head_seen = 1;
		if (hc->hc_sock != NULL) {
			/* not the previous request's, on a kept-alive connection */
			atomic_store(&hc->hc_sock->hk_answer, 0);
		}
		if (http_sock_enter(gen, hc->hc_sock, HTTP_PHASE_BODY) < 0) {
			return MHD_NO;
		}
		if (hc->hc_sock != NULL) {
			atomic_store(&hc->hc_sock->hk_body_bytes, 0);
		}
		if (http_head_check(con, hc, url, version, &hf) < 0) {
			return http_refuse(con, hc, &hf, url, method, version);
		}
		if (hc->hc_sock != NULL && gen->hg_n_timeouts > 0) {
			atomic_store(&hc->hc_sock->hk_answer, http_timeout_find(gen, hc->hc_path));
		}
		http_timeout_own(con, hc, url, method, version);
		return MHD_YES;
	}
	/* The whole request is in. From here the sweeper leaves it alone. */
	if (http_sock_enter(gen, hc->hc_sock, HTTP_PHASE_BUSY) < 0) {
		return MHD_NO;
	}
	if (http_request_build(con, hc, url, method, version) < 0) {
		return MHD_NO;
	}
	reply_init(&r);
	srv->hs_route(srv->hs_arg, &hc->hc_req, &r);
	if (hc->hc_defer.hd_fn != NULL) {
		reply_finish(&r);
		return http_defer_suspend(con, hc);
	}
	if (r.reply_status == 0) {
		reply_problem(&r, 500, "internal", "Internal error", NULL);
	}
	rc = http_send(con, &r, atomic_load(&gen->hg_draining));
	reply_finish(&r);
	return rc;
}

/* Messages of libmicrohttpd that mean it is short of something (memory,
 * descriptors, threads) or refused connections; everything else it says at
 * run time is about one client's connection (a reset, a malformed request). */
static const char *const http_mhd_loud[] = {
	"limit", "memory", "thread", "epoll", "inter-thread", "listen", "socket descriptor",
};

#define HTTP_MHD_LOUD_EVERY_MS 1000 /* at most one loud message a second */

static enum log_level http_mhd_level(struct http_gen *gen, const char *line)
{
	int64_t now = http_now_ms();
	long long last;
	size_t i;

	if (!atomic_load(&gen->hg_started)) {
		return LOG_LEVEL_WARNING; /* why the listener did not start */
	}
	if (strncmp(line, "Error processing request", 24) == 0) {
		return LOG_LEVEL_DEBUG; /* its own answer to one malformed request */
	}
	for (i = 0; i < sizeof(http_mhd_loud) / sizeof(http_mhd_loud[0]); i++) {
		if (strcasestr(line, http_mhd_loud[i]) == NULL) {
			continue;
		}
		/* Under a flood, one a second is enough to say what happens. */
		last = atomic_load(&gen->hg_log_ms);
		if (now - last >= HTTP_MHD_LOUD_EVERY_MS &&
		    atomic_compare_exchange_strong(&gen->hg_log_ms, &last, now)) {
			return LOG_LEVEL_WARNING;
		}
		return LOG_LEVEL_DEBUG;
	}
	return LOG_LEVEL_DEBUG;
}

/* libmicrohttpd's messages: fmt is its own printf format. */
__attribute__((format(printf, 2, 0))) static void http_mhd_log(void *cls, const char *fmt,
                                                               va_list ap)
{
	struct http_gen *gen = cls;
	char line[512];
	char quoted[600];
	size_t len;

	vsnprintf(line, sizeof(line), fmt, ap);
	len = strlen(line);
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
		line[--len] = '\0';
	}
	log_msg(http_mhd_level(gen, line), "http %s: libmicrohttpd: %s", gen->hg_srv->hs_name,
		log_quote(quoted, sizeof(quoted), line));
}

static int http_listen(const char *host, unsigned port, int *ret_fd, unsigned *ret_port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;
	int fd = -1;

	memset(&ss, 0, sizeof(ss));
	if (strchr(host, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) {
			goto bad;
		}
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
			goto bad;
		}
		len = sizeof(*s4);
	}
	/* Non-blocking: during a reload two accept threads poll it, and the
	 * one that loses a connection to the other must not block. */
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		log_err("http: socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		log_err("http: cannot bind %s:%u: %s", host, port, strerror(errno));
		goto fail;
	}
	if (listen(fd, HTTP_LISTEN_BACKLOG) < 0) {
		log_err("http: listen: %s", strerror(errno));
		goto fail;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		log_err("http: getsockname: %s", strerror(errno));
		goto fail;
	}
	*ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	*ret_fd = fd;
	return 0;
bad:
	log_err("http: listen address \"%s\" is not a numeric IPv4 or IPv6 address", host);
	return -1;
fail:
	close(fd);
	return -1;
}

static void http_free_list(char **list)
{
	size_t i;

	if (list == NULL) {
		return;
	}
	for (i = 0; list[i] != NULL; i++) {
		free(list[i]);
	}
	free(list);
}

/* The connection limit: what was configured, or what the file limit
 * (raised to its hard limit at start) leaves after HTTP_FD_RESERVE, and
 * never more than that. */
static unsigned http_conn_limit(const char *name, unsigned configured)
{
	struct rlimit rl;
	unsigned budget = 65536;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		budget = rl.rlim_cur > (rlim_t)(HTTP_FD_RESERVE + HTTP_CONN_MIN)
		                 ? (rl.rlim_cur - HTTP_FD_RESERVE > UINT_MAX
		                            ? UINT_MAX
		                            : (unsigned)(rl.rlim_cur - HTTP_FD_RESERVE))
		                 : HTTP_CONN_MIN;
	}
	if (configured == 0) {
		return budget;
	}
	if (configured > budget) {
		log_warn("http %s: max_connections %u is more than the file limit allows (%u, with "
		         "%d descriptors kept for the rest); using %u",
		         name, configured, budget, HTTP_FD_RESERVE, budget);
		return budget;
	}
	return configured;
}

/* A 408 being written: its buffer, and whether a line failed. */
struct http_wire {
	struct buf hw_buf;
	int hw_failed;
};

static void http_wire_header(void *arg, const char *name, const char *value)
{
	struct http_wire *hw = arg;

	if (buf_printf(&hw->hw_buf, "%s: %s\r\n", name, value) < 0) {
		hw->hw_failed = 1;
	}
}

/* r (its content type, headers and body) on the wire after status_line
 * ("HTTP/1.1 408 Request Timeout"), with Connection: close, into *ret
 * (malloc'd): 0 or -1. */
static int http_answer_wire(const struct reply *r, const char *status_line, char **ret,
                            size_t *ret_len)
{
	struct http_wire hw;

	buf_init(&hw.hw_buf, 0);
	hw.hw_failed = buf_printf(&hw.hw_buf, "%s\r\nConnection: close\r\n", status_line) < 0;
	reply_each_header(r, http_wire_header, &hw);
	if (hw.hw_failed ||
	    (r->reply_content_type != NULL &&
	     buf_printf(&hw.hw_buf, "Content-Type: %s\r\n", r->reply_content_type) < 0) ||
	    buf_printf(&hw.hw_buf, "Content-Length: %zu\r\n\r\n", r->reply_body_len) < 0 ||
	    buf_append(&hw.hw_buf, r->reply_body, r->reply_body_len) < 0) {
		buf_finish(&hw.hw_buf);
		return -1;
	}
	*ret = buf_take(&hw.hw_buf, ret_len);
	buf_finish(&hw.hw_buf);
	return *ret != NULL ? 0 : -1;
}

static int http_timeout_wire(const struct reply *r, char **ret, size_t *ret_len)
{
	return http_answer_wire(r, "HTTP/1.1 408 Request Timeout", ret, ret_len);
}

/* Makes data (malloc'd, or NULL) hk's own 408, freeing the one before. */
static void http_sock_timeout_set(struct http_gen *gen, struct http_sock *hk, char *data,
                                  size_t len)
{
	char *old;

	pthread_mutex_lock(&gen->hg_lock);
	old = hk->hk_timeout;
	hk->hk_timeout = data;
	hk->hk_timeout_len = len;
	pthread_mutex_unlock(&gen->hg_lock);
	free(old);
}

/* Once a request's head is in: if its body is still to come and it comes
 * from a page (an Origin field), the route layer may add headers (CORS) to
 * the 408 it would get for a body too slow, so that the page's script
 * reads the 408 instead of a network error. Made now, as the sweeper that
 * sends it cannot read the request; most requests never need it. A slow
 * head, whose fields are not all in, gets its path's own 408 (ho_timeouts:
 * at /api, the headers a request without an Origin gets), or the plain one. */
static void http_timeout_own(struct MHD_Connection *con, struct http_conn *hc, const char *url,
                             const char *method, const char *version)
{
	struct http_gen *gen = hc->hc_gen;
	const char *cl;
	struct http_refusal hf;
	struct reply r;
	char *data = NULL;
	size_t len = 0;
	int own;

	if (gen->hg_timeout_headers == NULL || gen->hg_tls || hc->hc_sock == NULL) {
		return;
	}
	/* A path with an exact answer of its own keeps it; one under a
	 * prefix (/api) has the headers a request without Origin gets, and
	 * an allowed Origin may get more (its own, echoed). */
	own = atomic_load(&hc->hc_sock->hk_answer);
	if ((own > 0 && (size_t)own <= gen->hg_n_timeouts &&
	     !gen->hg_timeouts[own - 1].hta_under) ||
	    MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Origin") == NULL) {
		return;
	}
	cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if ((cl == NULL || strcmp(cl, "0") == 0) &&
	    MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ==
	            NULL) {
		return;
	}
	reply_init(&r);
	http_refusal_set(&hf, 408, "request_timeout", HTTP_TIMEOUT_TITLE, HTTP_TIMEOUT_DETAIL);
	if (reply_problem(&r, 408, hf.hf_slug, hf.hf_title, hf.hf_detail) == 0 &&
	    http_request_build(con, hc, url, method, version) == 0) {
		gen->hg_timeout_headers(gen->hg_srv->hs_arg, &hc->hc_req, &hf, &r);
		if (r.reply_headers != NULL && r.reply_status == 408 &&
		    http_timeout_wire(&r, &data, &len) == 0) {
			http_sock_timeout_set(gen, hc->hc_sock, data, len);
		}
	}
	reply_finish(&r);
}

/* The 408 a plain-HTTP client gets when the sweeper closes its request,
 * and at each of opt's paths with an answer of its own. */
static int http_timeout_answer_make(struct http_gen *gen, const struct http_options *opt)
{
	struct reply r;
	size_t i;
	int rc = -1;

	reply_init(&r);
	if (reply_problem(&r, 408, "request_timeout", HTTP_TIMEOUT_TITLE, HTTP_TIMEOUT_DETAIL) <
	            0 ||
	    http_timeout_wire(&r, &gen->hg_timeout_answer, &gen->hg_timeout_answer_len) < 0) {
		goto done;
	}
	reply_finish(&r);
	reply_init(&r);
	if (reply_problem(&r, 431, HTTP_HEAD_SLUG, HTTP_HEAD_TITLE, HTTP_HEAD_DETAIL) < 0 ||
	    http_answer_wire(&r, "HTTP/1.1 431 Request Header Fields Too Large",
	                     &gen->hg_head_answer, &gen->hg_head_answer_len) < 0) {
		goto done;
	}
	if (opt->ho_n_timeouts > 0) {
		gen->hg_timeouts = calloc(opt->ho_n_timeouts, sizeof(*gen->hg_timeouts));
		if (gen->hg_timeouts == NULL) {
			goto done;
		}
	}
	for (i = 0; i < opt->ho_n_timeouts; i++) {
		struct http_timeout_answer *ta = &gen->hg_timeouts[i];

		gen->hg_n_timeouts++;
		ta->hta_path = strdup(opt->ho_timeouts[i].htr_path);
		ta->hta_path_len = ta->hta_path != NULL ? strlen(ta->hta_path) : 0;
		ta->hta_under = opt->ho_timeouts[i].htr_under;
		if (ta->hta_path == NULL || http_timeout_wire(opt->ho_timeouts[i].htr_reply,
		                                              &ta->hta_data, &ta->hta_len) < 0) {
			goto done;
		}
	}
	rc = 0;
done:
	reply_finish(&r);
	return rc;
}

/* ---- the accept thread ---- */

/* Wakes gen's accept thread: to end, or because a connection closed. */
static void http_accept_wake(struct http_gen *gen)
{
	uint64_t one = 1;
	ssize_t n = write(gen->hg_wake_fd, &one, sizeof(one));

	(void)n; /* only a full counter fails it, and then the thread is awake anyway */
}

/* Room for one more connection? Without room the accept thread parks until
 * a close wakes it; the mark is set before the count is read again, so a
 * close in between is not missed (a needless wake-up is harmless). */
static int http_accept_room(struct http_gen *gen)
{
	if ((unsigned)atomic_load(&gen->hg_conns) < gen->hg_conn_limit) {
		return 1;
	}
	atomic_store(&gen->hg_accept_parked, 1);
	return (unsigned)atomic_load(&gen->hg_conns) < gen->hg_conn_limit;
}

/* Takes one connection off gen's socket and hands it to libmicrohttpd,
 * which serves it or, over the per-address limit, closes it (and says so
 * in the log). Returns 1 when one was taken or a client's own error ended
 * it (try the next), 0 when none is waiting, -1 when the process is out of
 * descriptors or memory, or the socket failed (errno set). */
static int http_accept_one(struct http_gen *gen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = accept4(gen->hg_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		switch (errno) {
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
			return 0; /* none left, or another generation took it */
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
		case ENETDOWN:
		case ENOPROTOOPT:
		case EHOSTDOWN:
		case ENONET:
		case EHOSTUNREACH:
		case EOPNOTSUPP:
		case ENETUNREACH:
			return 1; /* that client's connection failed (accept(2)) */
		default:
			return -1;
		}
	}
	atomic_fetch_add(&gen->hg_conns, 1);
	if (MHD_add_connection(gen->hg_daemon, fd, (struct sockaddr *)&ss, len) != MHD_YES) {
		atomic_fetch_sub(&gen->hg_conns, 1); /* closed by libmicrohttpd */
	}
	return 1;
}

/* The accept thread: takes connections while the generation has room. At
 * the connection limit it leaves them in the kernel's queue until a close
 * makes room, as libmicrohttpd's own threads did; out of descriptors it
 * logs and waits HTTP_ACCEPT_BACKOFF_MS or a close, rather than spin on a
 * socket that stays readable. Ends when http_accept_stop asks. */
static void *http_accept_main(void *arg)
{
	struct http_gen *gen = arg;
	int64_t backoff_until = 0;

	pthread_setname_np(pthread_self(), "http-accept");
	while (!atomic_load(&gen->hg_accept_stop)) {
		struct pollfd pfd[2];
		int64_t now = http_mono_ms();
		int timeout = -1;
		int i;

		pfd[0].fd = gen->hg_wake_fd;
		pfd[1].fd = gen->hg_fd;
		if (now < backoff_until) {
			pfd[1].fd = -1;
			timeout = (int)(backoff_until - now);
		} else if (!http_accept_room(gen)) {
			pfd[1].fd = -1;
		}
		pfd[0].events = pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		if (poll(pfd, 2, timeout) < 0) {
			continue; /* EINTR */
		}
		if (pfd[0].revents != 0) {
			uint64_t count;
			ssize_t n = read(gen->hg_wake_fd, &count, sizeof(count));

			(void)n;
			backoff_until = 0; /* a connection closed: a descriptor is free */
		}
		if (pfd[1].revents == 0) {
			continue;
		}
		for (i = 0; i < HTTP_ACCEPT_BATCH && http_accept_room(gen); i++) {
			int rc = http_accept_one(gen);

			if (rc == 0) {
				break;
			}
			if (rc < 0) {
				int err = errno;

				now = http_mono_ms();
				if (now - gen->hg_accept_log_ms >= HTTP_ACCEPT_LOG_MS) {
					gen->hg_accept_log_ms = now;
					log_warn("http %s: accept: %s; taking connections again in %d "
					         "ms, or when one closes",
					         gen->hg_srv->hs_name, strerror(err),
					         HTTP_ACCEPT_BACKOFF_MS);
				}
				atomic_store(&gen->hg_accept_parked, 1);
				backoff_until = now + HTTP_ACCEPT_BACKOFF_MS;
				break;
			}
		}
	}
	return NULL;
}

/* Starts gen's accept thread. Returns 0, or -1 (logged). */
static int http_accept_start(struct http_gen *gen)
{
	int rc = pthread_create(&gen->hg_acceptor, NULL, http_accept_main, gen);

	if (rc != 0) {
		log_err("http %s: cannot start the accept thread: %s", gen->hg_srv->hs_name,
		        strerror(rc));
		return -1;
	}
	gen->hg_acceptor_started = 1;
	return 0;
}

/* Ends gen's accept thread and waits for it. From the return on, every
 * connection it took is counted in hg_conns and in libmicrohttpd's hands,
 * and it takes no other. A no-op when it does not run. */
static void http_accept_stop(struct http_gen *gen)
{
	if (!gen->hg_acceptor_started) {
		return;
	}
	atomic_store(&gen->hg_accept_stop, 1);
	http_accept_wake(gen);
	pthread_join(gen->hg_acceptor, NULL);
	gen->hg_acceptor_started = 0;
}

/* Stops the daemon (it has no connection left, or the drain gave up on
 * them and no deferred request is outstanding) and frees. */
static void http_gen_destroy(struct http_gen *gen)
{
	size_t i;

	if (gen == NULL) {
		return;
	}
	http_accept_stop(gen); /* it hands connections to the daemon */
	if (gen->hg_daemon != NULL) {
		atomic_store(&gen->hg_stopping, 1);
		MHD_stop_daemon(gen->hg_daemon);
	}
	/* libmicrohttpd never had the listening socket. */
	if (gen->hg_fd >= 0) {
		close(gen->hg_fd);
	}
	if (gen->hg_wake_fd >= 0) {
		close(gen->hg_wake_fd);
	}
	http_free_list(gen->hg_proxies);
	free(gen->hg_timeout_answer);
	free(gen->hg_head_answer);
	for (i = 0; i < gen->hg_n_timeouts; i++) {
		free(gen->hg_timeouts[i].hta_path);
		free(gen->hg_timeouts[i].hta_data);
	}
	free(gen->hg_timeouts);
	free(gen->hg_thread);
	pthread_mutex_destroy(&gen->hg_lock);
	free(gen);
}

/* Stops a generation accepting: its accept thread ends (for a stop, the
 * listening socket is shut down as well: new connections are refused at
 * once, including those the kernel had queued) and marks it draining: its
 * answers close their connection from now on. The caller then hands it to
 * the sweeper. */
static void http_gen_drain_begin(struct http_gen *gen, int stop)
{
	int64_t now = http_mono_ms();

	/* The drain's fields first: the sweeper may look at this generation
	 * (still the serving one during a reload) as soon as it is marked,
	 * and with no deadline set yet it would take it for overdue and cut
	 * every request under way with a 408. */
	gen->hg_drain_stop = stop;
	gen->hg_drain_since_ms = now;
	gen->hg_drain_deadline_ms = now + gen->hg_drain_timeout_ms;
	gen->hg_drain_log_ms = now;
	gen->hg_drain_answered = atomic_load(&gen->hg_answered);
	atomic_store(&gen->hg_draining, 1);
	metrics_http_drain(gen->hg_srv->hs_name, stop ? http_drain_kinds[1] : http_drain_kinds[0]);
	http_accept_stop(gen);
	if (stop) {
		shutdown(gen->hg_fd, SHUT_RDWR);
	}
}

/* libmicrohttpd's own connection limit, split evenly over its threads,
 * holds per thread and does not count a connection handed over until its
 * thread takes it; it would close connections that the accept thread's
 * count (which does) has room for. So it is set where it never bites. */
static unsigned http_mhd_conn_limit(unsigned limit, unsigned threads)
{
	if (threads <= 1) {
		return limit;
	}
	return limit > UINT_MAX / threads ? UINT_MAX : limit * threads;
}

/* Starts a daemon with opt, and its accept thread on fd (taken over,
 * closed on failure). */
static struct http_gen *http_gen_create(struct http_server *srv, const struct http_options *opt, int fd)
{
	struct http_gen *gen = calloc(1, sizeof(*gen));
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC |
	                 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET;
	struct MHD_OptionItem more[4];
	unsigned threads = opt->ho_threads;
	size_t n_more = 0;
	size_t i;
	size_t n = 0;

	if (gen == NULL) {
		close(fd);
		return NULL;
	}
	gen->hg_srv = srv;
	gen->hg_fd = fd;
	gen->hg_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	gen->hg_tls = opt->ho_tls_cert_pem != NULL;
	gen->hg_body_max = opt->ho_body_max != 0 ? opt->ho_body_max : HTTP_BODY_MAX_DEFAULT;
	gen->hg_conn_limit = http_conn_limit(srv->hs_name, opt->ho_max_connections);
	gen->hg_head_timeout_ms = opt->ho_head_timeout_ms != 0 ? opt->ho_head_timeout_ms
	                                                       : HTTP_HEAD_TIMEOUT_DEFAULT_MS;
	gen->hg_body_min_rate =
	        opt->ho_body_min_rate != 0 ? opt->ho_body_min_rate : HTTP_BODY_MIN_RATE_DEFAULT;
	gen->hg_drain_timeout_ms = opt->ho_drain_timeout_ms != 0 ? opt->ho_drain_timeout_ms
	                                                         : HTTP_DRAIN_TIMEOUT_DEFAULT_MS;
	gen->hg_refused = opt->ho_refused;
	gen->hg_timeout_headers = opt->ho_timeout_headers;
	if (threads == 0) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);

		threads = cores > 0 ? (unsigned)cores : 2;
	}
	gen->hg_threads = threads;
	gen->hg_thread =
	        aligned_alloc(_Alignof(struct http_thread), threads * sizeof(*gen->hg_thread));
	pthread_mutex_init(&gen->hg_lock, NULL);
	atomic_init(&gen->hg_conns, 0);
	atomic_init(&gen->hg_suspended, 0);
	atomic_init(&gen->hg_draining, 0);
	atomic_init(&gen->hg_stopping, 0);
	atomic_init(&gen->hg_started, 0);
	atomic_init(&gen->hg_log_ms, 0);
	atomic_init(&gen->hg_answered, 0);
	atomic_init(&gen->hg_accept_stop, 0);
	atomic_init(&gen->hg_accept_parked, 0);
	gen->hg_cut_log_ms = http_mono_ms();
	if (gen->hg_thread == NULL) {
		log_err("http %s: out of memory", srv->hs_name);
		goto fail;
	}
	memset(gen->hg_thread, 0, threads * sizeof(*gen->hg_thread));
	for (i = 0; i < threads; i++) {
		atomic_init(&gen->hg_thread[i].ht_done_ms, http_mono_ms());
		atomic_init(&gen->hg_thread[i].ht_conns, 0);
	}
	if (gen->hg_wake_fd < 0) {
		log_err("http %s: eventfd: %s", srv->hs_name, strerror(errno));
		goto fail;
	}
	if (http_timeout_answer_make(gen, opt) < 0) {
		goto fail;
	}
	if (opt->ho_trusted_proxies != NULL) {
		while (opt->ho_trusted_proxies[n] != NULL) {
			n++;
		}
		gen->hg_proxies = calloc(n + 1, sizeof(char *));
		if (gen->hg_proxies == NULL) {
			goto fail;
		}
		for (i = 0; i < n; i++) {
			gen->hg_proxies[i] = strdup(opt->ho_trusted_proxies[i]);
			if (gen->hg_proxies[i] == NULL) {
				goto fail;
			}
		}
	}
	/* A pool of one is no pool: libmicrohttpd wants the option left out
	 * then rather than given 0 or 1. */
	if (threads > 1) {
		more[n_more++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
	}
	if (opt->ho_tls_cert_pem != NULL) {
		flags |= MHD_USE_TLS;
		more[n_more++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)opt->ho_tls_cert_pem};
		more[n_more++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opt->ho_tls_key_pem};
	}
	more[n_more] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	/* The logger comes first, so that libmicrohttpd says nothing on its
	 * own stderr even while it reads the options that follow. epoll, and
	 * a connection limit of our own: its default is FD_SETSIZE - 4
	 * whatever the file limit and the polling. No listening socket: the
	 * accept thread hands it connections. */
	gen->hg_daemon = MHD_start_daemon(
	        flags, 0, NULL, NULL, http_access, gen, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log,
	        gen, MHD_OPTION_CONNECTION_TIMEOUT, opt->ho_conn_timeout_s,
	        MHD_OPTION_CONNECTION_LIMIT, http_mhd_conn_limit(gen->hg_conn_limit, threads),
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT, opt->ho_per_ip_limit,
	        MHD_OPTION_URI_LOG_CALLBACK, http_uri_logger, gen, MHD_OPTION_NOTIFY_COMPLETED,
	        http_completed, gen, MHD_OPTION_NOTIFY_CONNECTION, http_connection_notify, gen,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY, MHD_OPTION_ARRAY,
	        more, MHD_OPTION_END);
	if (gen->hg_daemon == NULL) {
		log_err("http %s: libmicrohttpd refused to start on %s:%u%s", srv->hs_name, srv->hs_host,
			srv->hs_port, opt->ho_tls_cert_pem != NULL ? " (check the TLS certificate and key)" : "");
		goto fail;
	}
	atomic_store(&gen->hg_started, 1);
	if (http_accept_start(gen) < 0) {
		goto fail;
	}
	gen->hg_number = ++srv->hs_generations;
	return gen;
fail:
	http_gen_destroy(gen);
	return NULL;
}

static void http_free(struct http_server *srv)
{
	pthread_cond_destroy(&srv->hs_cond);
	pthread_mutex_destroy(&srv->hs_lock);
	pthread_mutex_destroy(&srv->hs_probe_lock);
	if (srv->hs_lingers != NULL) {
		http_linger_step(srv, 0, 1);
		free(srv->hs_lingers);
	}
	pthread_mutex_destroy(&srv->hs_linger_lock);
	free(srv->hs_host);
	free(srv->hs_name);
	free(srv);
}

static void http_log_limits(const struct http_server *srv, const struct http_gen *gen,
                            unsigned per_ip)
{
	char per[32] = "no limit";

	if (per_ip > 0) {
		snprintf(per, sizeof(per), "%u", per_ip);
	}
	log_info("http %s: up to %u connections (per address: %s), request heads within %lld ms, "
	         "bodies at least %zu bytes/s, drains up to %lld ms",
	         srv->hs_name, gen->hg_conn_limit, per, (long long)gen->hg_head_timeout_ms,
	         gen->hg_body_min_rate, (long long)gen->hg_drain_timeout_ms);
}

struct http_server *http_create(const struct http_options *opt, http_route_fn route, void *arg)
{
	struct http_server *srv = calloc(1, sizeof(*srv));
	pthread_condattr_t ca;
	int fd;
	int rc;

	if (srv == NULL) {
		return NULL;
	}
	srv->hs_route = route;
	srv->hs_arg = arg;
	pthread_mutex_init(&srv->hs_lock, NULL);
	pthread_mutex_init(&srv->hs_probe_lock, NULL);
	pthread_mutex_init(&srv->hs_linger_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv->hs_cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&srv->hs_probe_port, 0);
	atomic_init(&srv->hs_probe_seen, 0);
	atomic_init(&srv->hs_resumes, 0);
	atomic_init(&srv->hs_resume_ns, 0);
	srv->hs_name = strdup(opt->ho_name != NULL ? opt->ho_name : "http");
	srv->hs_host = strdup(opt->ho_host);
	srv->hs_lingers = calloc(HTTP_LINGER_SOCKS_MAX, sizeof(*srv->hs_lingers));
	if (srv->hs_name == NULL || srv->hs_host == NULL || srv->hs_lingers == NULL) {
		goto fail;
	}
	metrics_declare_http(srv->hs_name, http_cut_names, http_refused_statuses, http_drain_kinds);
	if (http_listen(opt->ho_host, opt->ho_port, &fd, &srv->hs_port) < 0) {
		goto fail;
	}
	srv->hs_gen = http_gen_create(srv, opt, fd);
	if (srv->hs_gen == NULL) {
		goto fail;
	}
	rc = pthread_create(&srv->hs_sweeper, NULL, http_sweeper_main, srv);
	if (rc != 0) {
		log_err("http %s: cannot start the sweeper thread: %s", srv->hs_name, strerror(rc));
		http_gen_destroy(srv->hs_gen);
		goto fail;
	}
	srv->hs_sweeper_started = 1;
	http_log_limits(srv, srv->hs_gen, opt->ho_per_ip_limit);
	return srv;
fail:
	http_free(srv);
	return NULL;
}

int http_reload(struct http_server *srv, const struct http_options *opt)
{
	struct http_gen *gen;
	struct http_gen *old;
	int fd;
	int conns;

	if (strcmp(opt->ho_host, srv->hs_host) != 0 || (opt->ho_port != 0 && opt->ho_port != srv->hs_port)) {
		log_warn("http %s: a new listen address takes effect at the next start", srv->hs_name);
		return 1;
	}
	pthread_mutex_lock(&srv->hs_lock);
	old = srv->hs_gen;
	pthread_mutex_unlock(&srv->hs_lock);
	fd = dup(old->hg_fd);
	if (fd < 0) {
		log_err("http %s: dup: %s", srv->hs_name, strerror(errno));
		return -1;
	}
	gen = http_gen_create(srv, opt, fd);
	if (gen == NULL) {
		return -1;
	}
	/* Both accept on the socket for a moment; then the old one drains
	 * in the background, its answers closing their connections. */
	http_gen_drain_begin(old, 0);
	conns = atomic_load(&old->hg_conns);
	pthread_mutex_lock(&srv->hs_lock);
	srv->hs_gen = gen;
	old->hg_next = srv->hs_draining;
	srv->hs_draining = old;
	pthread_mutex_unlock(&srv->hs_lock);
	log_notice("http %s: listener generation %u serves the new settings; generation %u drains "
	           "(%d connections, deadline %lld ms)",
	           srv->hs_name, gen->hg_number, old->hg_number, conns,
	           (long long)old->hg_drain_timeout_ms);
	http_log_limits(srv, gen, opt->ho_per_ip_limit);
	return 0;
}

unsigned http_port(const struct http_server *srv)
{
	return srv->hs_port;
}

int http_tls(struct http_server *srv)
{
	int tls;

	pthread_mutex_lock(&srv->hs_lock);
	tls = srv->hs_gen != NULL && srv->hs_gen->hg_tls;
	pthread_mutex_unlock(&srv->hs_lock);
	return tls;
}

void http_destroy(struct http_server *srv)
{
	struct http_gen *gen;

	if (srv == NULL) {
		return;
	}
	pthread_mutex_lock(&srv->hs_lock);
	gen = srv->hs_gen;
	pthread_mutex_unlock(&srv->hs_lock);
	if (gen != NULL) {
		http_gen_drain_begin(gen, 1);
		log_notice("http %s: draining: the listening socket is closed; %d connections "
		           "open, %d waiting for their commit, deadline %lld ms",
		           srv->hs_name, atomic_load(&gen->hg_conns),
		           atomic_load(&gen->hg_suspended), (long long)gen->hg_drain_timeout_ms);
	}
	pthread_mutex_lock(&srv->hs_lock);
	if (gen != NULL) {
		gen->hg_next = srv->hs_draining;
		srv->hs_draining = gen;
	}
	srv->hs_gen = NULL;
	srv->hs_stop = 1;
	pthread_cond_broadcast(&srv->hs_cond);
	pthread_mutex_unlock(&srv->hs_lock);
	/* The sweeper ends once every generation has drained and stopped. */
	if (srv->hs_sweeper_started) {
		pthread_join(srv->hs_sweeper, NULL);
	}
	http_free(srv);
}

/* ---- liveness ---- */

/* Connects fd to the listener and waits for a server thread to take it
 * (or for it to be closed: over the per-address limit libmicrohttpd closes
 * it as the accept thread hands it over). Returns 1
 * when a server thread did, 0 when none did in time, -1 when the
 * connection was refused (err set). */
static int http_probe_run(struct http_server *srv, int fd, const struct sockaddr *to,
                          socklen_t to_len, int timeout_ms, char *err, size_t err_size)
{
	int64_t end = http_mono_ms() + timeout_ms;
	struct pollfd pfd;
	int connected = 0;

	if (connect(fd, to, to_len) == 0) {
		connected = 1;
	} else if (errno != EINPROGRESS) {
		snprintf(err, err_size, "connect: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		int64_t left = end - http_mono_ms();
		int soerr = 0;
		socklen_t len = sizeof(soerr);

		if (atomic_load(&srv->hs_probe_seen)) {
			return 1;
		}
		if (left <= 0) {
			snprintf(err, err_size, "no server thread took a connection within %d ms",
			         timeout_ms);
			return 0;
		}
		pfd.fd = fd;
		pfd.events = connected ? POLLIN : POLLOUT;
		pfd.revents = 0;
		if (poll(&pfd, 1, left < 10 ? (int)left : 10) <= 0) {
			continue;
		}
		if (!connected) {
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr != 0) {
				snprintf(err, err_size, "connect: %s",
				         strerror(soerr != 0 ? soerr : errno));
				return -1;
			}
			connected = 1;
			continue;
		}
		/* Readable before any request: closed by a server thread. */
		return 1;
	}
}

int http_alive(struct http_server *srv, int timeout_ms, char *err, size_t err_size)
{
	struct sockaddr_storage ss;
	struct sockaddr_storage local;
	socklen_t len;
	struct http_gen *gen;
	const char *host = srv->hs_host;
	int fd;
	int rc = 0;

	snprintf(err, err_size, "%s", "");
	memset(&ss, 0, sizeof(ss));
	if (strcmp(host, "0.0.0.0") == 0) {
		host = "127.0.0.1";
	} else if (strcmp(host, "::") == 0) {
		host = "::1";
	}
	if (strchr(host, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, host, &s6->sin6_addr);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		inet_pton(AF_INET, host, &s4->sin_addr);
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, err_size, "socket: %s", strerror(errno));
		return 0;
	}
	/* Bound first, so that the port is known before a server thread
	 * can see the connection. */
	memcpy(&local, &ss, sizeof(ss));
	((struct sockaddr_in *)&local)->sin_port = 0; /* same offset in both families */
	pthread_mutex_lock(&srv->hs_probe_lock);
	if (bind(fd, (struct sockaddr *)&local, len) < 0 ||
	    getsockname(fd, (struct sockaddr *)&local, &len) < 0) {
		snprintf(err, err_size, "bind: %s", strerror(errno));
	} else {
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)srv->hs_port);
		atomic_store(&srv->hs_probe_seen, 0);
		atomic_store(&srv->hs_probe_port, ntohs(((struct sockaddr_in *)&local)->sin_port));
		rc = http_probe_run(srv, fd, (struct sockaddr *)&ss, len, timeout_ms, err,
		                    err_size);
		atomic_store(&srv->hs_probe_port, 0);
	}
	pthread_mutex_unlock(&srv->hs_probe_lock);
	close(fd);
	if (rc == 1) {
		return 1;
	}
	/* At the connection limit the accept thread takes no new one: alive
	 * as long as requests keep completing. */
	pthread_mutex_lock(&srv->hs_lock);
	gen = srv->hs_gen;
	if (rc == 0 && gen != NULL &&
	    (unsigned)atomic_load(&gen->hg_conns) + http_gen_reserve(gen) >= gen->hg_conn_limit &&
	    http_mono_ms() - http_gen_progress_ms(gen) < HTTP_ALIVE_PROGRESS_MS) {
		rc = 1;
	}
	pthread_mutex_unlock(&srv->hs_lock);
	return rc == 1;
}
