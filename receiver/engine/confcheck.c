/* confcheck.c: the whole-file configuration check, one validator per
 * section in one table, run at start and on every reload. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "capture.h"
#include "confcheck.h"
#include "config.h"
#include "crypto.h"
#include "gc.h"
#include "log.h"
#include "outbox.h"
#include "reconcile.h"

#define CONFCHECK_PEM_MAX (64 * 1024) /* bytes in a TLS certificate or key file */

/* One section's validator: 0, or -1 with each problem logged (file, line,
 * key). A module that reads a section of its own exports a check for it
 * and adds one line here (alphabetized); "provider" stands for every
 * [provider NAME] section. */
struct confcheck_section {
	const char *ccs_section;
	int (*ccs_check)(const struct config *cf, unsigned flags);
};

/* path (the value of section's key) must be a file the daemon can create
 * or replace: its directory exists and is writable, and it is no
 * directory itself. */
static int confcheck_writable_file(const struct config *cf, const char *section, const char *key,
                                   const char *path)
{
	char copy[PATH_MAX];
	struct stat st;
	const char *dir;

	if (path[0] == '\0') {
		return config_refuse(cf, section, key, "empty: leave the key out instead");
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		return config_refuse(cf, section, key, "%s is a directory; name a file in it",
		                     path);
	}
	if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy)) {
		return config_refuse(cf, section, key, "the path is too long");
	}
	dir = dirname(copy);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		return config_refuse(cf, section, key, "the directory %s does not exist", dir);
	}
	if (access(dir, W_OK) < 0) {
		return config_refuse(cf, section, key, "cannot write in %s: %s", dir,
		                     strerror(errno));
	}
	return 0;
}

/* dir (the value of section's key, or its default) must be a directory the
 * daemon can write in or make (as mkdir -p): it exists and is writable, or
 * the nearest part of it that exists is a directory in which the first part
 * missing can be made. That part is made and removed again to know, as
 * access() says yes to root where mkdir says no (in /proc): the check
 * leaves nothing behind, so a reload can run it. */
static int confcheck_usable_dir(const struct config *cf, const char *section, const char *key,
                                const char *dir)
{
	char path[PATH_MAX];
	char missing[PATH_MAX];
	struct stat st;
	char *slash;

	missing[0] = '\0';
	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
		return config_refuse(cf, section, key, "the path is too long");
	}
	while (stat(path, &st) < 0) {
		if (errno != ENOENT) {
			return config_refuse(cf, section, key, "cannot use %s: %s", path,
			                     strerror(errno));
		}
		memcpy(missing, path, sizeof(missing));
		slash = strrchr(path, '/');
		if (slash == NULL) {
			snprintf(path, sizeof(path), ".");
		} else {
			slash[slash == path ? 1 : 0] = '\0';
		}
	}
	if (!S_ISDIR(st.st_mode)) {
		return config_refuse(cf, section, key, "%s is not a directory", path);
	}
	if (missing[0] == '\0') {
		if (access(path, W_OK | X_OK) < 0) {
			return config_refuse(cf, section, key, "cannot write in %s: %s", path,
			                     strerror(errno));
		}
		return 0;
	}
	if (mkdir(missing, 0700) < 0) {
		return config_refuse(cf, section, key, "cannot create %s: %s", missing,
		                     strerror(errno));
	}
	rmdir(missing);
	return 0;
}

/* A file the daemon reads (not a secret: a CA bundle) must be readable. */
static int confcheck_readable_file(const struct config *cf, const char *section, const char *key)
{
	const char *path = config_get(cf, section, key);
	struct stat st;

	if (path == NULL) {
		return 0;
	}
	if (stat(path, &st) < 0 || access(path, R_OK) < 0) {
		return config_refuse(cf, section, key, "cannot read %s: %s", path, strerror(errno));
	}
	if (!S_ISREG(st.st_mode)) {
		return config_refuse(cf, section, key, "%s is not a regular file", path);
	}
	return 0;
}

/* A CA file must be one the HTTP client can load: readable, and PEM with
 * a certificate. Else every TLS call would fail, reading as a peer's
 * fault, until the file is fixed. */
static int confcheck_ca_file(const struct config *cf, const char *section)
{
	const char *path = config_get(cf, section, "ca_file");
	char why[128];

	if (confcheck_readable_file(cf, section, "ca_file") < 0) {
		return -1;
	}
	if (path != NULL && crypto_ca_file_check(path, why, sizeof(why)) < 0) {
		return config_refuse(cf, section, "ca_file", "the CA file %s cannot be used: %s",
		                     path, why);
	}
	return 0;
}

int confcheck_admin_listen(const struct config *cf, char **ret_host, unsigned *ret_port)
{
	const char *v = config_get(cf, "admin", "listen");

	if (v != NULL && strcmp(v, "off") == 0) {
		return 0;
	}
	*ret_host = NULL;
	if (config_parse_listen(cf, "admin", CONFIG_ADMIN_LISTEN_DEFAULT, ret_host, ret_port) < 0) {
		return -1;
	}
	return 1;
}

static int confcheck_admin(const struct config *cf, unsigned flags)
{
	const char *port_file = config_get(cf, "admin", "port_file");
	char *host = NULL;
	unsigned port;
	int rc;

	rc = confcheck_admin_listen(cf, &host, &port);
	free(host);
	if (rc < 0) {
		return -1;
	}
	if ((flags & CONFCHECK_DAEMON) && rc == 1 && port_file != NULL) {
		return confcheck_writable_file(cf, "admin", "port_file", port_file);
	}
	return 0;
}

static int confcheck_api(const struct config *cf, unsigned flags)
{
	return api_config_check(cf, (flags & CONFCHECK_DAEMON) && cf->cf_secrets);
}

static int confcheck_capture(const struct config *cf, unsigned flags)
{
	const char *dir = NULL;
	int rc = capture_check_config(cf, &dir);

	/* The spool serve makes at start (capture_create), when mode and
	 * dir themselves are good. */
	if ((flags & CONFCHECK_DAEMON) && dir != NULL &&
	    confcheck_usable_dir(cf, "capture", "dir", dir) < 0) {
		rc = -1;
	}
	return rc;
}

static int confcheck_client(const struct config *cf, unsigned flags)
{
	return (flags & CONFCHECK_DAEMON) ? confcheck_ca_file(cf, "client") : 0;
}

static int confcheck_gc(const struct config *cf, unsigned flags)
{
	return gc_check_config(cf);
}

static int confcheck_outbound(const struct config *cf, unsigned flags)
{
	struct outbox_conf oc;
	size_t i;
	int rc;

	rc = outbox_conf_load(cf, (flags & CONFCHECK_DAEMON) && cf->cf_secrets, &oc);
	if (rc < 0) {
		/* Each problem logged; the calls are not known, ca_file is. */
		if ((flags & CONFCHECK_DAEMON)) {
			confcheck_ca_file(cf, "outbound");
		}
		return -1;
	}
	if (flags & CONFCHECK_DAEMON) {
		for (i = 0; i < oc.oc_n_calls; i++) {
			char key[64];

			snprintf(key, sizeof(key), "%s_url", oc.oc_calls[i].occ_name);
			if (strncmp(oc.oc_calls[i].occ_url, "http://", 7) == 0 &&
			    config_get(cf, "outbound", "signing_secret") == NULL) {
				config_caution(
				        cf, "outbound", key,
				        "plain http:// and unsigned (no signing_secret): anyone on "
				        "the "
				        "path can read these calls, and the receiver cannot tell "
				        "them "
				        "from forged ones; use https:// or set signing_secret");
			}
		}
		rc = confcheck_ca_file(cf, "outbound");
	}
	outbox_conf_finish(&oc);
	return rc < 0 ? -1 : 0;
}

/* The sections, not the instances: a file whose provider sections all
 * have problems (each logged by config_load_opts) has no instance, yet
 * does not lack a provider. */
static int confcheck_providers(const struct config *cf, unsigned flags)
{
	int allow = 0;
	size_t n = 0;
	size_t i;

	if (config_get_bool(cf, "server", "allow_no_providers", 0, &allow) < 0) {
		return -1;
	}
	for (i = 0; i < cf->cf_n_sections; i++) {
		n += strncmp(cf->cf_sections[i].cs_name, "provider ", 9) == 0;
	}
	if ((flags & CONFCHECK_DAEMON) && n == 0 && !allow) {
		log_err("config %s: no [provider NAME] section: every callback would be answered "
		        "404; "
		        "set [server] allow_no_providers = yes for a receiver that serves only the "
		        "order "
		        "API",
		        cf->cf_path != NULL ? cf->cf_path : "(demo)");
		return -1;
	}
	return 0;
}

static int confcheck_reconcile(const struct config *cf, unsigned flags)
{
	struct reconcile_conf rc;

	return reconcile_conf_load(cf, &rc);
}

static int confcheck_pem(const struct config *cf, const char *key)
{
	const char *spec = config_get(cf, "server", key);
	char err[CONFIG_SECRET_ERR_MAX];
	char *pem = NULL;
	size_t len = 0;
	int rc = 0;

	if (config_read_secret(spec, &pem, &len, err, sizeof(err)) < 0) {
		return config_refuse(cf, "server", key, "cannot be read: %s", err);
	}
	if (len > CONFCHECK_PEM_MAX) {
		rc = config_refuse(cf, "server", key, "larger than %d bytes", CONFCHECK_PEM_MAX);
	}
	explicit_bzero(pem, len);
	free(pem);
	return rc;
}

static int confcheck_server(const struct config *cf, unsigned flags)
{
	const char *cert = config_get(cf, "server", "tls_cert");
	const char *key = config_get(cf, "server", "tls_key");
	int rc = 0;

	if ((cert == NULL) != (key == NULL)) {
		rc = config_refuse(cf, "server", cert == NULL ? "tls_key" : "tls_cert",
		                   "tls_cert and tls_key go together");
	}
	if (!(flags & CONFCHECK_DAEMON)) {
		return rc;
	}
	/* Each file given read on its own; whether they make a pair only
	 * when both could be. */
	if (cert != NULL && confcheck_pem(cf, "tls_cert") < 0) {
		rc = -1;
		cert = NULL;
	}
	if (key != NULL && confcheck_pem(cf, "tls_key") < 0) {
		rc = -1;
		key = NULL;
	}
	if (cert != NULL && key != NULL) {
		char *cert_pem = NULL;
		char *key_pem = NULL;
		size_t cert_len = 0;
		size_t key_len = 0;
		char err[CONFIG_SECRET_ERR_MAX];

		/* Both were read just above: a failure now is a race, and
		 * what the daemon reads at start says so. */
		if (config_read_secret(cert, &cert_pem, &cert_len, err, sizeof(err)) == 0 &&
		    config_read_secret(key, &key_pem, &key_len, err, sizeof(err)) == 0 &&
		    crypto_tls_pair_check(cert_pem, key_pem) < 0) {
			rc = config_refuse(cf, "server", "tls_cert",
			                   "the certificate and tls_key do not make a pair");
		}
		free(cert_pem);
		if (key_pem != NULL) {
			explicit_bzero(key_pem, key_len);
			free(key_pem);
		}
	}
	if (cf->cf_port_file != NULL &&
	    confcheck_writable_file(cf, "server", "port_file", cf->cf_port_file) < 0) {
		rc = -1;
	}
	return rc;
}

/* The directory of a SQLite database, which serve makes at start when it
 * is missing (a PostgreSQL server is asked only then). */
static int confcheck_store(const struct config *cf, unsigned flags)
{
	char copy[PATH_MAX];
	struct stat st;
	const char *path = cf->cf_db_path;

	if (!(flags & CONFCHECK_DAEMON) || cf->cf_backend != STORE_BACKEND_SQLITE || path == NULL ||
	    strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
		return 0;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		return config_refuse(cf, "store", "path", "%s is a directory; name a file in it",
		                     path);
	}
	if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy)) {
		return config_refuse(cf, "store", "path", "the path is too long");
	}
	return confcheck_usable_dir(cf, "store", "path", dirname(copy));
}

/* Alphabetized; one line per section. */
static const struct confcheck_section confcheck_sections[] = {
        {"admin", confcheck_admin},
        {"api", confcheck_api},
        {"capture", confcheck_capture},
        {"client", confcheck_client},
        {"gc", confcheck_gc},
        {"outbound", confcheck_outbound},
        {"provider", confcheck_providers},
        {"reconcile", confcheck_reconcile},
        {"server", confcheck_server},
        {"store", confcheck_store},
};

int confcheck_run(const struct config *cf, unsigned flags)
{
	int rc = 0;
	size_t i;

	for (i = 0; i < sizeof(confcheck_sections) / sizeof(confcheck_sections[0]); i++) {
		if (confcheck_sections[i].ccs_check(cf, flags) < 0) {
			rc = -1;
		}
	}
	return rc;
}
