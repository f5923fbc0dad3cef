/* confcheck.h: the whole-file check of a configuration, one validator per
 * section, that the daemon runs at start and on every reload (SIGHUP)
 * before anything is opened or swapped, and every command runs after
 * loading: a file that serve refuses is refused by a reload too. */
#ifndef IDEMHOOK_CONFCHECK_H
#define IDEMHOOK_CONFCHECK_H

struct config;

/* What confcheck_run checks besides the shape of every section. */
#define CONFCHECK_DAEMON                                                                           \
	0x1u /* serve: secrets and certificates readable, port                                     \
	      * files writable, the capture spool and the SQLite                                   \
	      * database's directory usable or creatable, at least one                             \
	      * provider */

/* Checks cf with every section's validator. Runs them all, so that one
 * run shows every problem. Returns 0, or -1 with each problem logged
 * (file, line, key). */
int confcheck_run(const struct config *cf, unsigned flags);

/* The admin listener's address ([admin] listen, default
 * CONFIG_ADMIN_LISTEN_DEFAULT): 1 with *ret_host (malloc'd) and *ret_port
 * set, 0 when it is off, -1 when malformed (logged with file, line, key). */
int confcheck_admin_listen(const struct config *cf, char **ret_host, unsigned *ret_port);

#endif
