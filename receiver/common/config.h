/* config.h: the INI configuration (inih), kept as sections of key/value pairs.
 *
 * config.c parses the core sections ([server], [store], [points], [demo]) and
 * the [provider NAME] sections into typed fields; what a provider profile
 * makes of its section comes from the profile table above config, through
 * struct config_profiles (provider_config_load in providers.c). Other modules read their
 * own sections ([admin], [capture], [outbound], [api], ...) through
 * config_get*(), and report their own bad values (config_refuse) when
 * the daemon's validation (confcheck.c) asks them, before anything starts. Which
 * sections and keys exist is one table in config.c (config_known_keys) plus
 * each provider profile's p_keys: anything else refuses the file. */
#ifndef IDEMHOOK_CONFIG_H
#define IDEMHOOK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct provider;

/* The listener's defaults ([server] keys left out; transport/http.c applies
 * them to options left 0). */
#define HTTP_BODY_MAX_DEFAULT (1024 * 1024) /* bytes */
#define HTTP_HEAD_TIMEOUT_DEFAULT_MS 10000 /* the whole request head, TLS handshake included */
#define HTTP_BODY_MIN_RATE_DEFAULT 1024 /* bytes per second a body averages, after a grace */
#define HTTP_DRAIN_TIMEOUT_DEFAULT_MS 45000 /* below the unit's TimeoutStopSec=60s */

/* [store] synchronous: how durable a COMMIT is. */
enum store_sync {
	STORE_SYNC_FULL = 0, /* default: acknowledged means on disk */
	STORE_SYNC_NORMAL,
	STORE_SYNC_OFF, /* benchmarks only */
};

/* Where the data lives. SQLite is the embedded default and single-receiver;
 * PostgreSQL is shared by any number of receivers. */
enum store_backend {
	STORE_BACKEND_SQLITE = 0,
	STORE_BACKEND_POSTGRESQL,
};

struct config_kv {
	char *kv_key;
	char *kv_value;
	int kv_line;
};

struct config_section {
	char *cs_name; /* "server", "provider stripe-us", ... */
	struct config_kv *cs_kv;
	size_t cs_n;
	int cs_line; /* where the section first appears, 0 when built in */
	const char *cs_file; /* the configuration file, for messages: borrowed from the config */
};

/* One [provider NAME] section: a provider instance, its own scope and path. */
struct provider_conf {
	char *pc_name; /* instance name: scope and path /hooks/<name> */
	const struct provider *pc_provider;
	const struct config_section *pc_section; /* all its keys, for the profile */
	int64_t pc_tolerance_s; /* signature timestamp tolerance, default 300 */
	int64_t pc_retention_s; /* idempotency retention; default [store] retention */
	int pc_capture_manual; /* capture = manual: authorised is not paid (profiles with p_capture) */
	void *pc_state; /* the profile's parsed secrets and keys (p_create) */
	void (*pc_state_destroy)(void *state); /* frees pc_state (p_destroy), or NULL */
	char **pc_allow_from; /* source CIDRs allowed to call (NULL-terminated), or NULL: any */
};

/* 1 when client (an address) may call provider instance pc, else 0. */
int config_provider_allows(const struct provider_conf *pc, const char *client);

struct config {
	char *cf_path; /* NULL for the built-in demo */
	int cf_demo; /* demo mode: built-in secret, demo pages */
	struct config_section *cf_sections;
	size_t cf_n_sections;

	/* [server] */
	char *cf_listen_host; /* default 127.0.0.1 */
	unsigned cf_listen_port; /* default 8080; 0 = ephemeral */
	unsigned cf_threads; /* default: number of cores */
	unsigned cf_conn_timeout_s; /* default 30 */
	unsigned cf_per_ip_limit; /* connections per client address, default 64 */
	unsigned cf_max_connections; /* default 0: what the file limit allows */
	int64_t cf_head_timeout_s;   /* a request head within this, default 10 */
	size_t cf_body_min_rate;     /* bytes/s a body averages, default 1k */
	int64_t cf_drain_timeout_s;  /* a drain waits this long for connections, default 45 */
	size_t cf_body_max; /* default 1 MiB */
	char *cf_port_file; /* write the bound port here (tests), or NULL */
	char **cf_trusted_proxies; /* CIDRs whose X-Forwarded-For is believed (NULL-terminated), or NULL */

	/* [store] */
	char *cf_db_path; /* default ./var/idemhook.db */
	int cf_sync; /* enum store_sync */
	unsigned cf_batch_max; /* default 256 */
	int cf_writer_nice; /* the writer threads' nice value, -20 to 0, default -10 */
	unsigned cf_busy_timeout_ms;
	int64_t cf_retention_s; /* default 7 days */
	int64_t cf_lease_s; /* default 60 */
	int cf_backend; /* enum store_backend, default sqlite */
	char *cf_conninfo; /* PostgreSQL connection string, resolved (a secret: never logged) */
	unsigned cf_pool_size; /* PostgreSQL read connections, default 4 */
	unsigned cf_pg_writers; /* PostgreSQL writer connections and threads, default 2 */
	unsigned cf_statement_timeout_ms; /* PostgreSQL, default 5000 */

	/* [points] rate as an exact fraction: points = floor(amount * num / den) */
	int64_t cf_points_num;
	int64_t cf_points_den;

	struct provider_conf *cf_providers;
	size_t cf_n_providers;

	int cf_secrets; /* 1: the providers' secrets were read (CONFIG_LOAD_SECRETS) */

	/* Not 0 when config_load_opts found problems in the file (each logged
	 * with file, line and key), which only CONFIG_LOAD_PROBLEMS returns. A
	 * provider section with a problem has no instance in cf_providers. */
	unsigned cf_problems;

	/* Set by config_load, from 1, never twice in a process (0: built by
	 * hand): modules that keep what they parsed from a config tell two
	 * configs apart by it, even one allocated where another was freed. */
	uint64_t cf_serial;
};

/* What config needs to know about the provider profile a [provider NAME]
 * section names (type = ...). */
struct config_profile {
	const char *cpf_name;           /* the profile's name (static) */
	const char *const *cpf_keys;    /* its own keys in the section, NULL-terminated, or NULL */
	int cpf_capture;                /* 1: authorisation and capture are separate events */
	int64_t cpf_retry_window_s;     /* how long the provider keeps retrying */
	const struct provider *cpf_provider; /* what pc_provider becomes */
};

/* The provider profiles, handed to config_load_with by the table that
 * knows them (providers.c), so that config includes no provider. */
struct config_profiles {
	/* 1 with ret filled when a profile is called type, else 0. */
	int (*cpr_find)(const char *type, struct config_profile *ret);
	/* Makes pc, its common keys read, an instance of profile type: sets
	 * pc_provider, pc_state and pc_state_destroy from the section. Returns
	 * 0, or -1 with the problem logged (naming the key, never a secret). */
	int (*cpr_create)(const char *type, struct provider_conf *pc);
};

/* Loads and validates path with its provider instances (cpr: the profiles;
 * NULL reads no [provider NAME] section and checks none of their keys);
 * NULL path gives the demo configuration. Every key is checked, each
 * provider section too after one is refused, so that one load logs every
 * problem of the file (file, line and key). Returns NULL on any problem.
 * The daemon and the commands load through provider_config_load_opts
 * (provider.h), which passes the profiles. */
struct config *config_load_with(const char *path, const struct config_profiles *cpr);

/* What config_load_opts reads besides the file. CONFIG_LOAD_SECRETS: every
 * provider's secrets, made into its state (cpr_create); without it the
 * instances have their profile but no state (pc_state NULL): the shape of
 * the configuration, for commands that verify and sign nothing. Secret
 * references are checked for form either way. [store] conninfo is read
 * either way on PostgreSQL: opening the store needs it. */
#define CONFIG_LOAD_SECRETS 0x1u

/* CONFIG_LOAD_PROBLEMS: a file whose values have problems is returned all
 * the same, with cf_problems counting them (each logged; a key with a
 * problem holds its default), so that the caller checks the other
 * sections too (confcheck_run) and then refuses it: one run shows every
 * problem. Such a configuration is for checking only, never for use. A
 * file that is not a configuration at all (unreadable, not INI, a NUL
 * byte, a provider section given twice) and running out of memory still
 * give NULL. */
#define CONFIG_LOAD_PROBLEMS 0x2u

/* Where credential:NAME is looked for when $CREDENTIALS_DIRECTORY is not
 * set: the directory systemd gives the unit contrib/idemhook.service. */
#define CONFIG_CREDENTIALS_FALLBACK "/run/credentials/idemhook.service"

/* config_load_with, with flags (CONFIG_LOAD_*); config_load_with reads the
 * secrets. */
struct config *config_load_opts(const char *path, const struct config_profiles *cpr,
                                unsigned flags);

/* 1 when a reload (SIGHUP) applies key of section ([provider NAME] keys
 * all do), 0 when it takes effect at the next start. */
int config_key_reloads(const char *section, const char *key);

/* Calls fn for every key that a reload does not apply and whose value
 * differs between was and now (or is in one of them only), each once;
 * stops at and returns fn's first non-zero result. */
int config_each_restart_change(const struct config *was, const struct config *now,
                               int (*fn)(void *arg, const char *section, const char *key),
                               void *arg);

/* config_load_with(path, NULL): the core sections only. */
struct config *config_load(const char *path);

/* Frees the config and each provider's state. NULL is a no-op. */
void config_destroy(struct config *cf);

/* The provider instance called name, or NULL. */
const struct provider_conf *config_provider(const struct config *cf, const char *name);

/* Section lookup: the section named exactly name, or NULL. */
const struct config_section *config_section(const struct config *cf, const char *name);

/* The last value of key in section (NULL when absent). */
const char *config_get(const struct config *cf, const char *section, const char *key);
const char *config_section_get(const struct config_section *cs, const char *key);

/* Calls fn for every occurrence of key in section, in file order; stops at
 * and returns the first non-zero fn result. */
int config_section_each(const struct config_section *cs, const char *key,
			int (*fn)(void *arg, const char *value, int line), void *arg);

/* Typed readers: absent key -> default, malformed -> -1 with the error logged
 * (file, section, key) and *ret the default all the same, so that a caller
 * may go on to check the next key. Durations take "90", "90s", "15m", "25h", "7d". Sizes
 * take "1048576", "512k", "1M". Booleans take yes/no/true/false/on/off/1/0. */
int config_get_uint(const struct config *cf, const char *section, const char *key, unsigned dflt,
		    unsigned *ret);
int config_get_duration(const struct config *cf, const char *section, const char *key, int64_t dflt_s,
			int64_t *ret_s);
int config_get_size(const struct config *cf, const char *section, const char *key, size_t dflt,
		    size_t *ret);
int config_get_bool(const struct config *cf, const char *section, const char *key, int dflt, int *ret);
int config_parse_duration(const char *s, int64_t *ret_s);

/* The line of the value config_get(cf, section, key) gives, else of the
 * section's header (key NULL or absent), else 0. */
int config_line(const struct config *cf, const char *section, const char *key);

/* Logs "config FILE:LINE: [section] key: MESSAGE" at error (key may be
 * NULL: the section) and returns -1: how a module refuses its own keys, so
 * every refusal names file, line and key. config_caution: the same at
 * warning, for a value that works but is unwise. */
int config_refuse(const struct config *cf, const char *section, const char *key, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));
void config_caution(const struct config *cf, const char *section, const char *key, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));

/* The admin listener's address when [admin] listen is not given: away
 * from Prometheus (9090), its Pushgateway and Alertmanager (9091, 9093),
 * Kafka (9092), the exporters' range 9100-9999 and the HTTP alternates
 * 8080-8099 (docs/operations.md). */
#define CONFIG_ADMIN_LISTEN_DEFAULT "127.0.0.1:8491"

/* Parses section's "listen = HOST:PORT" (dflt when absent) into a numeric
 * address (malloc'd, replacing *ret_host) and a port. Returns 0, or -1
 * with file, line and key logged. */
int config_parse_listen(const struct config *cf, const char *section, const char *dflt,
                        char **ret_host, unsigned *ret_port);

/* Walks a list whose items are separated by spaces, tabs or commas: returns
 * the next item (not NUL-terminated) with its length in ret_len and advances
 * *cursor, or NULL when no item is left. */
const char *config_list_next(const char **cursor, size_t *ret_len);
int config_parse_size(const char *s, size_t *ret);
int config_parse_bool(const char *s, int *ret);

#define CONFIG_SECRET_ERR_MAX 512 /* bytes of config_read_secret's err, NUL included */

/* Reads a secret named by a config value: "file:PATH" (whole file, one
 * trailing newline stripped), "credential:NAME" ($CREDENTIALS_DIRECTORY/NAME,
 * systemd LoadCredential=; CONFIG_CREDENTIALS_FALLBACK/NAME when the
 * variable is not set), or "env:NAME". A bare PATH is read as a file.
 * Literal secrets are not accepted here. Returns 0, or -1 with one sentence
 * in err, the source (spec) and the cause ("file:/x: cannot open: No such
 * file or directory"), never the secret. Nothing is logged: the caller logs
 * err once, naming the file, line and key. */
int config_read_secret(const char *spec, char **ret, size_t *ret_len, char *err, size_t err_size);

/* [client] ca_file: PEM CA certificates that every HTTPS call idemhook makes
 * (outbound calls, replay --to, simulate --to) verifies peers with, or NULL
 * for the system's CAs. */
const char *config_client_ca_file(const struct config *cf);

/* The built-in demo Stripe secret (documented in the README). */
#define CONFIG_DEMO_STRIPE_SECRET "whsec_idemhook_demo_secret_do_not_use_in_production"

#endif
