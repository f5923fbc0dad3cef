/* delayproxy.h: a TCP proxy for the benchmarks that holds every byte for a
 * fixed time in each direction before passing it on: the round-trip delay
 * of a network between a receiver and its database, on a machine where
 * tc netem is not at hand. Listens on 127.0.0.1, forwards to a unix socket. */
#ifndef IDEMHOOK_DELAYPROXY_H
#define IDEMHOOK_DELAYPROXY_H

struct delayproxy;

/* Starts a proxy on 127.0.0.1 (a free port, in *ret_port) to the unix
 * socket at path, delaying each direction by delay_us. Runs on threads of
 * this process until the process ends. NULL on failure (said on stderr). */
struct delayproxy *delayproxy_start(const char *path, unsigned delay_us, unsigned *ret_port);

#endif
