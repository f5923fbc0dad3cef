/* cmd_serve.c: `idemhook serve`: run the daemon in the foreground. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.h"
#include "console.h"
#include "app.h"
#include "capture.h"
#include "cli.h"
#include "confcheck.h"
#include "config.h"
#include "crypto.h"
#include "fetch.h"
#include "gc.h"
#include "health.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "outbound.h"
#include "provider.h"
#include "reconcile.h"
#include "store.h"

#define SERVE_OUTBOUND_GRACE_MS 5000
#define SERVE_ADMIN_CONNECTIONS 64 /* scrapers and probes */
#define SERVE_ADMIN_DRAIN_MS 5000
/* The console's forms: a dismiss reason of 500 characters is up to 6000
 * bytes percent-encoded, beside the CSRF token. */
#define SERVE_ADMIN_BODY_MAX (16 * 1024)
#define SERVE_TLS_PEM_MAX (64 * 1024)
#define SERVE_LOG_DEFER_MS 20 /* info lines gathered at most this long (log_set_deferred) */

struct serve_listener {
	char *sl_host;
	unsigned sl_port;
	char *sl_tls_cert;
	char *sl_tls_key;
	struct app_timeouts sl_timeouts;
};

static void serve_listener_finish(struct serve_listener *sl)
{
	free(sl->sl_host);
	if (sl->sl_tls_key != NULL) {
		explicit_bzero(sl->sl_tls_key, strlen(sl->sl_tls_key));
	}
	free(sl->sl_tls_cert);
	free(sl->sl_tls_key);
	app_timeouts_finish(&sl->sl_timeouts);
	memset(sl, 0, sizeof(*sl));
}

/* Writes "PORT\n" to path through a temporary file and rename, so a reader
 * never sees half a number. */
static int serve_write_port_file(const char *path, unsigned port)
{
	char tmp[4096];
	char line[16];
	int fd;
	int len;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0) {
		log_err("cannot write port file %s: %s", tmp, strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	len = snprintf(line, sizeof(line), "%u\n", port);
	if (write(fd, line, (size_t)len) != len) {
		log_err("cannot write port file %s: %s", tmp, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		log_err("cannot rename port file to %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int serve_read_pem(const char *spec, char **ret)
{
	char err[CONFIG_SECRET_ERR_MAX];
	size_t len;

	if (config_read_secret(spec, ret, &len, err, sizeof(err)) < 0) {
		log_err("TLS file %s", err);
		return -1;
	}
	if (len > SERVE_TLS_PEM_MAX) {
		log_err("TLS file %s is too large", spec);
		free(*ret);
		*ret = NULL;
		return -1;
	}
	return 0;
}

static int serve_server_listener(const struct config *cf, struct serve_listener *sl)
{
	const char *v;

	memset(sl, 0, sizeof(*sl));
	sl->sl_host = strdup(cf->cf_listen_host);
	sl->sl_port = cf->cf_listen_port;
	if (sl->sl_host == NULL) {
		return -1;
	}
	v = config_get(cf, "server", "tls_cert");
	if (v != NULL) {
		const char *k = config_get(cf, "server", "tls_key");

		if (k == NULL) {
			log_err("config: [server] tls_cert needs tls_key");
			return -1;
		}
		/* Checked here, so libmicrohttpd never sees a pair it cannot load. */
		if (serve_read_pem(v, &sl->sl_tls_cert) < 0 || serve_read_pem(k, &sl->sl_tls_key) < 0 ||
		    crypto_tls_pair_check(sl->sl_tls_cert, sl->sl_tls_key) < 0) {
			return -1;
		}
	}
	return 0;
}

/* Fills ho from cf's [server] section; sl owns the strings it points to. */
static int serve_public_options(const struct config *cf, struct serve_listener *sl, struct http_options *ho)
{
	if (serve_server_listener(cf, sl) < 0) {
		return -1;
	}
	if (app_timeouts_build(cf, &sl->sl_timeouts) < 0) {
		log_err("out of memory");
		return -1;
	}
	memset(ho, 0, sizeof(*ho));
	ho->ho_host = sl->sl_host;
	ho->ho_port = sl->sl_port;
	ho->ho_threads = cf->cf_threads;
	ho->ho_conn_timeout_s = cf->cf_conn_timeout_s;
	ho->ho_per_ip_limit = cf->cf_per_ip_limit;
	ho->ho_max_connections = cf->cf_max_connections;
	ho->ho_head_timeout_ms = (unsigned)(cf->cf_head_timeout_s * 1000);
	ho->ho_body_min_rate = cf->cf_body_min_rate;
	ho->ho_drain_timeout_ms = (unsigned)(cf->cf_drain_timeout_s * 1000);
	ho->ho_body_max = cf->cf_body_max;
	ho->ho_tls_cert_pem = sl->sl_tls_cert;
	ho->ho_tls_key_pem = sl->sl_tls_key;
	ho->ho_trusted_proxies = (const char *const *)cf->cf_trusted_proxies;
	ho->ho_name = "public";
	ho->ho_refused = app_refused_public;
	ho->ho_timeout_headers = app_timeout_public;
	ho->ho_timeouts = sl->sl_timeouts.at_items;
	ho->ho_n_timeouts = sl->sl_timeouts.at_n;
	return 0;
}

/* A listener that could not start: the key that chose its address, so
 * that the operator knows what to change (http.c said why). */
static void serve_bind_failed(const struct config *cf, const char *section, const char *host,
                              unsigned port)
{
	int v6 = strchr(host, ':') != NULL;

	log_err("config %s:%d: [%s] listen: cannot listen on %s%s%s:%u (above: why); "
	        "choose another address or port%s",
	        cf->cf_path != NULL ? cf->cf_path : "(demo)", config_line(cf, section, "listen"),
	        section, v6 ? "[" : "", host, v6 ? "]" : "", port,
	        strcmp(section, "admin") == 0 && config_get(cf, "admin", "listen") == NULL
	                ? " ([admin] listen is not set: this is its default)"
	                : "");
}

static struct http_server *serve_start_public(struct app *app, const struct config *cf)
{
	struct serve_listener sl;
	struct http_options ho;
	struct http_server *srv = NULL;

	if (serve_public_options(cf, &sl, &ho) == 0) {
		srv = http_create(&ho, app_route_public, app);
		if (srv == NULL) {
			serve_bind_failed(cf, "server", sl.sl_host, sl.sl_port);
		}
	}
	if (srv != NULL) {
		int v6 = strchr(sl.sl_host, ':') != NULL;

		log_notice("listening on %s%s%s:%u%s", v6 ? "[" : "", sl.sl_host, v6 ? "]" : "",
			   http_port(srv), sl.sl_tls_cert != NULL ? " (https)" : "");
		if (cf->cf_demo) {
			const char *host = strcmp(sl.sl_host, "0.0.0.0") == 0 ? "127.0.0.1"
					   : strcmp(sl.sl_host, "::") == 0    ? "::1"
									      : sl.sl_host;

			v6 = strchr(host, ':') != NULL;
			log_notice("demo mode: the checkout page is %s://%s%s%s:%u/checkout",
				   sl.sl_tls_cert != NULL ? "https" : "http", v6 ? "[" : "", host,
				   v6 ? "]" : "", http_port(srv));
		}
	}
	serve_listener_finish(&sl);
	return srv;
}

/* Starts the admin listener ([admin] listen, or off). ret_hl (when the
 * listener runs) gets what the health thread needs to check it. Returns
 * 1 when started, 0 when off, -1 on failure. */
static int serve_start_admin(struct app *app, const struct config *cf, struct admin *adm,
                             struct health_listener *ret_hl)
{
	struct http_options ho;
	char *host = NULL;
	unsigned port = 0;
	int rc;

	rc = confcheck_admin_listen(cf, &host, &port);
	if (rc <= 0) {
		return rc;
	}
	memset(&ho, 0, sizeof(ho));
	ho.ho_host = host;
	ho.ho_port = port;
	ho.ho_threads = 1;
	ho.ho_conn_timeout_s = 10;
	ho.ho_max_connections = SERVE_ADMIN_CONNECTIONS;
	ho.ho_drain_timeout_ms = SERVE_ADMIN_DRAIN_MS;
	ho.ho_body_max = SERVE_ADMIN_BODY_MAX;
	ho.ho_name = "admin";
	app->app_admin = http_create(&ho, admin_route, adm);
	if (app->app_admin == NULL) {
		serve_bind_failed(cf, "admin", host, port);
		free(host);
		return -1;
	}
	health_listener_set(ret_hl, "admin", host, app->app_admin);
	log_notice("admin listener on %s%s%s:%u (healthz, readyz, metrics%s)",
	           strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
	           http_port(app->app_admin), adm->adm_console != NULL ? ", console" : "");
	free(host);
	return 1;
}

/* [console] checked whole, its tokens read, as confcheck_run checks the
 * engine's sections (the console sits above the engine, so serve runs it):
 * a bad section refuses the start or the reload. Returns 0 or -1 (logged). */
static int serve_check_console(const struct config *cf)
{
	struct console_conf cc;

	if (console_conf_load(cf, 1, &cc) < 0) {
		return -1;
	}
	console_conf_finish(&cc);
	return 0;
}

/* Loads path (NULL: the demo) with its secrets and checks it whole, as
 * the start and every reload do, so a reload never takes a file the next
 * start would refuse (with 78, which the unit does not restart): every
 * problem of the file is logged in this one run, those the load found and
 * those of every section's check (confcheck_run: secrets, certificates,
 * the port files, the capture spool and the database's directory; then
 * [console]). It changes nothing (the running spool, database and
 * listeners stay). Returns the configuration, or NULL when the file is
 * refused. */
static struct config *serve_load(const char *path)
{
	struct config *cf =
	        provider_config_load_opts(path, CONFIG_LOAD_SECRETS | CONFIG_LOAD_PROBLEMS);
	int rc;

	if (cf == NULL) {
		return NULL;
	}
	rc = confcheck_run(cf, CONFCHECK_DAEMON);
	if (serve_check_console(cf) < 0 || rc < 0 || cf->cf_problems > 0) {
		config_destroy(cf);
		return NULL;
	}
	return cf;
}

/* serve --check: serve_load, what the start and every reload run, and
 * nothing after it (no database, listener nor spool opened). Returns
 * EX_OK (said on stdout) or EX_CONFIG (every problem logged). */
static int serve_check(const char *config_path)
{
	struct config *cf;

	if (cli_config_path(config_path, 1, &config_path) < 0) {
		return EX_CONFIG;
	}
	cf = serve_load(config_path);
	if (cf == NULL) {
		return EX_CONFIG;
	}
	printf("%s: good: serve would start with it, and a reload would take it\n",
	       config_path != NULL ? config_path : "(demo)");
	config_destroy(cf);
	return EX_OK;
}

/* The workers a reload tells about the new configuration, and the
 * configuration the daemon started with (what the keys that need a restart
 * are in force from). */
struct serve_workers {
	struct gc_worker *sw_gc;
	struct reconcile_worker *sw_reconcile;
	const struct config *sw_boot;
};

/* Collects "[section] key" names into a buffer, for the reload's log line. */
struct serve_restart_list {
	char srl_text[1024];
	size_t srl_len;
	unsigned srl_n;
};

static int serve_restart_one(void *arg, const char *section, const char *key)
{
	struct serve_restart_list *l = arg;
	int w;

	metrics_restart_pending_add(section, key);
	l->srl_n++;
	if (l->srl_len < sizeof(l->srl_text)) {
		w = snprintf(l->srl_text + l->srl_len, sizeof(l->srl_text) - l->srl_len,
		             "%s[%s] %s", l->srl_len > 0 ? ", " : "", section, key);
		if (w > 0) {
			l->srl_len += (size_t)w;
		}
	}
	return 0;
}

/* Applies the new configuration (already the current one) to the
 * outbound worker when it changes what it does. A running worker takes
 * the new settings between transfers and keeps its transfers in flight
 * (outbound_reload): the reload does not wait for them, also when the
 * section has no call left (the worker then leases nothing, and what is in
 * flight is recorded when it ends). A section added with no worker running
 * starts one. Returns 1 when applied, 0 when unchanged, -1 when the worker
 * could not take or start it (logged). */
static int serve_outbound_reload(struct app *app, int changed)
{
	struct outbound *ob;
	int err = 0;
	int rc;

	if (!changed) {
		return 0;
	}
	/* Only this thread swaps app_outbound: reading it here is safe. */
	if (app->app_outbound != NULL) {
		rc = outbound_reload(app->app_outbound, &app->app_env);
		if (rc == 0) {
			log_notice("SIGHUP: the outbound worker takes the new [outbound] settings "
			           "between transfers; those in flight finish as they began");
			return 1;
		}
		if (rc == 1) {
			log_notice(
			        "SIGHUP: no outbound call configured any more: the outbound worker "
			        "starts no delivery; those in flight finish and are recorded");
			return 1;
		}
		if (rc < 0) {
			log_err("SIGHUP: the outbound worker could not take the new [outbound] "
			        "settings; it keeps the running ones");
			return -1;
		}
	}
	ob = outbound_start(&app->app_env, &err);
	app_outbound_swap(app, ob);
	if (err) {
		log_err("SIGHUP: the outbound worker could not start with the new [outbound] "
		        "settings; outbound rows wait until it can");
		return -1;
	}
	if (ob == NULL) {
		return 0;
	}
	log_notice("SIGHUP: outbound worker started with the new [outbound] settings");
	return 1;
}

/* Returns METRICS_RELOAD_TAKEN when the new configuration was taken,
 * METRICS_RELOAD_PARTIAL when taken except [outbound] (the worker could not
 * take it: a failed reload, on a new configuration all the same),
 * METRICS_RELOAD_REFUSED when the running one was kept. */
static int serve_reload_run(struct app *app, const struct serve_workers *sw, const char *path)
{
	struct serve_restart_list rl;
	struct serve_listener sl;
	struct http_options ho;
	struct config *cf;
	int outbound_changed;
	int outbound_taken;

	notify_reloading();
	if (path == NULL) {
		log_warn("SIGHUP: running on the built-in demo configuration; nothing to reload");
		notify_ready("serving (demo)");
		return METRICS_RELOAD_REFUSED;
	}
	/* The same load and the same whole check as the start: a file the
	 * start refuses is refused here, before anything is swapped. */
	cf = serve_load(path);
	if (cf == NULL || (outbound_changed = outbound_conf_changed(app->app_outbound, cf)) < 0) {
		config_destroy(cf);
		log_err("SIGHUP: %s is not valid (above: file, line and key); keeping the running "
		        "configuration",
		        path);
		notify_ready("serving (reload refused: bad config)");
		return METRICS_RELOAD_REFUSED;
	}
	/* The listener first: a certificate that does not load refuses the
	 * whole reload, so config and listener never disagree. */
	if (serve_public_options(cf, &sl, &ho) < 0 || http_reload(app->app_env.env_http, &ho) < 0) {
		serve_listener_finish(&sl);
		config_destroy(cf);
		log_err("SIGHUP: the listener could not take the new [server] settings; keeping the running "
			"configuration");
		notify_ready("serving (reload refused: listener)");
		return METRICS_RELOAD_REFUSED;
	}
	serve_listener_finish(&sl);
	memset(&rl, 0, sizeof(rl));
	metrics_restart_pending_clear();
	config_each_restart_change(sw->sw_boot, cf, serve_restart_one, &rl);
	app_config_swap(app, cf);
	gc_worker_reload(sw->sw_gc);
	reconcile_worker_reload(sw->sw_reconcile);
	outbound_taken = serve_outbound_reload(app, outbound_changed) >= 0;
	cf = app_config_acquire(app);
	if (!outbound_taken) {
		/* The rest is swapped and stays: said, and counted as a failed
		 * reload, so IdemhookReloadFailed tells that the worker is not on
		 * the file's [outbound]. A later reload tries it again. */
		log_err("SIGHUP: configuration%s reloaded from %s except [outbound] (above): "
		        "outbound calls do not run on its settings; fix the cause and reload "
		        "again, or restart idemhook (systemctl restart idemhook)%s%s%s",
		        config_get(cf, "server", "tls_cert") != NULL
		                ? ", secrets and TLS certificate"
		                : " and secrets",
		        path, rl.srl_n > 0 ? "; not in effect until a restart: " : "", rl.srl_text,
		        rl.srl_len >= sizeof(rl.srl_text) - 1 ? "..." : "");
		app_config_release(app, cf);
		notify_ready("serving (reload incomplete: [outbound] not taken; reload again or "
		             "restart)");
		return METRICS_RELOAD_PARTIAL;
	}
	log_notice("SIGHUP: configuration%s reloaded from %s%s%s%s",
	           config_get(cf, "server", "tls_cert") != NULL ? ", secrets and TLS certificate"
	                                                        : " and secrets",
	           path, rl.srl_n > 0 ? "; not in effect until a restart: " : "", rl.srl_text,
	           rl.srl_len >= sizeof(rl.srl_text) - 1 ? "..." : "");
	app_config_release(app, cf);
	notify_ready(rl.srl_n > 0 ? "serving (restart pending for changed keys)" : "serving");
	return METRICS_RELOAD_TAKEN;
}

static void serve_reload(struct app *app, const struct serve_workers *sw, const char *path)
{
	metrics_reload(serve_reload_run(app, sw, path));
	/* READY=1 came with a STATUS= of its own: readiness says its own again
	 * when it is not "serving". */
	health_status_touched(__atomic_load_n(&app->app_env.env_health, __ATOMIC_ACQUIRE));
}

/* Connections are descriptors: the soft file limit goes up to the hard
 * one, and the listener sizes its connection limit from it. */
static void serve_raise_file_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_warn("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			log_warn("cannot raise the file limit from %llu to %llu: %s",
			         (unsigned long long)was, (unsigned long long)rl.rlim_max,
			         strerror(errno));
			return;
		}
	}
	log_info("file limit %llu descriptors", (unsigned long long)rl.rlim_cur);
}

static void serve_log_start(const struct config *cf)
{
	size_t i;

	if (cf->cf_path == NULL) {
		log_notice("demo mode: no configuration file given; using the built-in demo");
		log_notice("demo mode: http://%s:%u, database %s, provider stripe at /hooks/stripe", cf->cf_listen_host,
			   cf->cf_listen_port, cf->cf_db_path);
		log_notice("demo mode: the Stripe signing secret is the public demo value \"%s\"; never use it "
			   "in production",
			   CONFIG_DEMO_STRIPE_SECRET);
	} else {
		log_notice("configuration %s", cf->cf_path);
	}
	for (i = 0; i < cf->cf_n_providers; i++) {
		log_info("provider %s (%s) at /hooks/%s, retention %llds", cf->cf_providers[i].pc_name,
			 cf->cf_providers[i].pc_provider->p_name, cf->cf_providers[i].pc_name,
			 (long long)cf->cf_providers[i].pc_retention_s);
	}
}

/* Takes signals one at a time. The watchdog is not fed here but by the
 * health thread, so a reload that waits for a connection never starves it. */
static int serve_loop(struct app *app, const struct serve_workers *sw, const char *config_path)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);

		if (sig == SIGHUP) {
			serve_reload(app, sw, config_path);
		} else if (sig == SIGTERM || sig == SIGINT) {
			log_notice("%s: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			return 0;
		}
	}
}

static int cmd_serve_run(int argc, char **argv, const char *config_path)
{
	struct config *cf = NULL;
	struct store *st = NULL;
	struct serve_workers sw = {NULL, NULL, NULL};
	struct console *console = NULL;
	struct admin adm = {NULL, NULL, NULL};
	int console_off = 1;
	struct health *health = NULL;
	struct health_options hopt;
	struct app app;
	sigset_t set;
	int app_ok = 0;
	int no_migrate = 0;
	int capture_off = 1;
	int err = 0;
	int rc;

	if (cli_wants_help(argc, argv)) {
		printf("usage: idemhook [-c FILE] serve [--no-migrate | --check]\n\n"
		       "Runs the receiver in the foreground (for systemd Type=notify). Without a\n"
		       "configuration it runs the demo: 127.0.0.1:8080, ./var/idemhook.db and a\n"
		       "public demo Stripe secret. SIGHUP reloads the configuration and secrets;\n"
		       "SIGTERM stops after the requests in flight.\n\n"
		       "  --no-migrate  refuse to start while migrations are pending, rather than\n"
		       "                apply them (run idemhook migrate once, then start the\n"
		       "                receivers)\n"
		       "  --check       check the file as the start and a reload do (every "
		       "section,\n"
		       "                [console] too, secrets and certificates read, the port\n"
		       "                files, the spool and the database's directory) and exit:\n"
		       "                0 when serve would take it, 78 with every problem said;\n"
		       "                nothing is opened nor changed\n");
		return EX_OK;
	}
	if (argc == 2 && strcmp(argv[1], "--no-migrate") == 0) {
		no_migrate = 1;
	} else if (argc == 2 && strcmp(argv[1], "--check") == 0) {
		return serve_check(config_path);
	} else if (argc != 1) {
		fprintf(stderr, "idemhook serve: takes no arguments but --no-migrate or --check\n");
		return EX_USAGE;
	}
	/* Signals are taken synchronously by the main loop; every thread started
	 * from here on inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cli_config_path(config_path, 1, &config_path) < 0) {
		return EX_CONFIG;
	}
	/* The whole file is checked, secrets read, before anything is opened:
	 * a bad file says so here, not as a database or listener error. */
	cf = serve_load(config_path);
	if (cf == NULL) {
		return EX_CONFIG;
	}
	serve_log_start(cf);
	/* A line per request: written 20 ms at a time, not one write each. */
	if (log_set_deferred(SERVE_LOG_DEFER_MS) < 0) {
		log_warn("cannot start the log thread; writing each line at once");
	}
	serve_raise_file_limit();
	notify_status("opening the database");
	/* One serve per SQLite file: a second one is refused here, before it
	 * touches the database; CLI commands are not held back. */
	rc = cli_open_store_exclusive(cf, no_migrate ? CLI_STORE_NO_MIGRATE : 0, 1, &st);
	if (rc != EX_OK) {
		config_destroy(cf);
		/* systemd starts it again (Restart=on-failure): said, so the
		 * journal shows why it did not start and that nothing is half
		 * done. */
		if (rc == EX_TEMPFAIL) {
			return cli_tempfail("serve", "it did not start, and no migration is half "
			                             "applied (each is applied whole in its own "
			                             "transaction, or not at all)");
		}
		return rc;
	}
	if (app_init(&app, cf) < 0) {
		config_destroy(cf);
		store_destroy(st);
		return EX_SOFTWARE;
	}
	app_ok = 1;
	sw.sw_boot = app_config_retain(&app, cf);
	metrics_set_start_time(app.app_started_ms);
	metrics_set_store_library(store_library_version());
	app.app_env.env_store = st;
	app.app_capture = capture_create(cf, &capture_off);
	if (app.app_capture == NULL && !capture_off) {
		rc = EX_CONFIG;
		goto done;
	}
	app_outbound_swap(&app, outbound_start(&app.app_env, &err));
	if (err) {
		/* The file was checked whole before anything was opened
		 * (serve_load): what failed is the start itself, most often the
		 * write lock held elsewhere past the busy timeout while the
		 * worker gave back the calls a previous run left delivering (the
		 * store's line above). Not 78, a bad file, which the unit does
		 * not restart (RestartPreventExitStatus=78): 75, and it is. */
		log_err("serve: the outbound worker could not start (the line above says why); "
		        "idemhook did not start and nothing was delivered: start it again "
		        "(systemd does, Restart=on-failure)");
		rc = EX_TEMPFAIL;
		goto done;
	}
	sw.sw_gc = gc_worker_start(&app.app_env);
	if (sw.sw_gc == NULL) {
		rc = EX_CONFIG;
		goto done;
	}
	sw.sw_reconcile = reconcile_worker_start(&app.app_env);
	if (sw.sw_reconcile == NULL) {
		rc = EX_CONFIG;
		goto done;
	}
	app.app_fetch = fetch_worker_start(&app.app_env);
	if (app.app_fetch == NULL) {
		rc = EX_SOFTWARE;
		goto done;
	}
	__atomic_store_n(&app.app_env.env_http, serve_start_public(&app, cf), __ATOMIC_RELEASE);
	if (app.app_env.env_http == NULL) {
		rc = EX_UNAVAILABLE;
		goto done;
	}
	memset(&hopt, 0, sizeof(hopt));
	hopt.ho_store = st;
	hopt.ho_watchdog_ms = notify_watchdog_interval_ms();
	health_listener_set(&hopt.ho_listeners[hopt.ho_n_listeners++], "public", cf->cf_listen_host,
	                    app.app_env.env_http);
	adm.adm_env = &app.app_env;
	console = console_create(&app.app_env, &console_off);
	if (console == NULL && !console_off) {
		rc = EX_CONFIG;
		goto done;
	}
	adm.adm_console = console != NULL ? console_route : NULL;
	adm.adm_console_arg = console;
	rc = serve_start_admin(&app, cf, &adm, &hopt.ho_listeners[hopt.ho_n_listeners]);
	if (rc < 0) {
		rc = EX_UNAVAILABLE;
		goto done;
	}
	hopt.ho_n_listeners += (size_t)rc;
	health = health_start(&hopt);
	if (health == NULL) {
		rc = EX_SOFTWARE;
		goto done;
	}
	__atomic_store_n(&app.app_env.env_health, health, __ATOMIC_RELEASE);
	/* The port files last: whoever waits for them finds /readyz answered
	 * by the health thread's first look, not "starting". The admin port
	 * first and the server's port after it, so whoever waits for the
	 * server's file (as the test harness does) finds both. */
	if ((app.app_admin != NULL && config_get(cf, "admin", "port_file") != NULL &&
	     serve_write_port_file(config_get(cf, "admin", "port_file"), http_port(app.app_admin)) < 0) ||
	    (cf->cf_port_file != NULL &&
	     serve_write_port_file(cf->cf_port_file, http_port(app.app_env.env_http)) < 0)) {
		rc = EX_CANTCREAT;
		goto done;
	}
	notify_ready("serving");
	health_status_touched(health);
	rc = serve_loop(&app, &sw, config_path) == 0 ? EX_OK : EX_SOFTWARE;
done:
	notify_stopping();
	health_set_draining(health);
	/* Order matters: no new requests, then the ones in flight finish and
	 * commit, then the workers let go, then the store drains and closes.
	 * The health thread keeps the watchdog fed through the drain. */
	http_destroy(app.app_env.env_http);
	http_destroy(app.app_admin);
	console_destroy(console);
	__atomic_store_n(&app.app_env.env_health, NULL, __ATOMIC_RELEASE);
	health_stop(health);
	reconcile_worker_stop(sw.sw_reconcile);
	fetch_worker_stop(app.app_fetch);
	outbound_stop(app_outbound_swap(&app, NULL), SERVE_OUTBOUND_GRACE_MS);
	gc_worker_stop(sw.sw_gc);
	capture_destroy(app.app_capture);
	store_destroy(st);
	if (app_ok) {
		app_config_release(&app, (struct config *)sw.sw_boot);
		app_finish(&app);
	}
	log_notice("stopped");
	return rc;
}

const struct cli_command cli_cmd_serve = {
	.cc_name = "serve",
	.cc_summary = "run the receiver in the foreground",
	.cc_run = cmd_serve_run,
};
