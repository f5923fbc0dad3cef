/* outbox.c: outbox rows, delivery policy and compensation (SQL through store.h). */
#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "crypto.h"
#include "event.h"
#include "httpc.h"
#include "json.h"
#include "log.h"
#include "orders.h"
#include "outbox.h"

#define OUTBOX_QUOTE_LEN 96         /* bytes of a user-controlled string in a log line */
#define OUTBOX_BODY_MAX (64 * 1024) /* bytes of a row body we build */
#define OUTBOX_RETRY_AFTER_MAX_S (30LL * 24 * 3600) /* longer Retry-After values are clamped */
#define OUTBOX_REFUND_BASE_DEFAULT "https://api.stripe.com"
/* The attempt-history line (and last error) of a call found leased by a
 * process that is gone: it stopped without a clean shutdown mid-call, or
 * (rarer: the worker writes an outcome again until its stop) with an
 * outcome its database never took, which its log then has. */
#define OUTBOX_INTERRUPTED_ERROR                                                                   \
	"interrupted: the idemhook process delivering it stopped without a clean shutdown "        \
	"(crash, kill -9, power loss) or unable to record it (see its log); the peer may have "    \
	"received it " OUTBOX_UNCOUNTED_MARK
/* ... and of a call whose lease ran out with no outcome recorded (several
 * receivers on one database: the one delivering it is gone or cut off). */
#define OUTBOX_EXPIRED_ERROR                                                                       \
	"lease expired: no outcome was recorded in time (the idemhook process delivering it "      \
	"stopped or lost its database); the peer may have received it " OUTBOX_UNCOUNTED_MARK

/* ---- configuration ---- */

static const char *const outbox_fixed_keys[] = {
        "concurrency",  "connect_timeout", "timeout",         "lease",      "poll",
        "response_max", "ca_file",         "retry_base",      "retry_cap",  "max_attempts",
        "max_age",      "signing_secret",  "refund_base_url", "refund_key", NULL,
};

int outbox_parse_ms(const char *s, int64_t *ret_ms)
{
	size_t len;
	int64_t secs;

	if (s == NULL) {
		return -1;
	}
	len = strlen(s);
	if (len > 2 && strcmp(s + len - 2, "ms") == 0) {
		int64_t v = 0;
		size_t i;

		for (i = 0; i < len - 2; i++) {
			if (!isdigit((unsigned char)s[i]) || v > (INT64_MAX - 9) / 10) {
				return -1;
			}
			v = v * 10 + (s[i] - '0');
		}
		*ret_ms = v;
		return 0;
	}
	if (config_parse_duration(s, &secs) < 0 || secs > INT64_MAX / 1000) {
		return -1;
	}
	*ret_ms = secs * 1000;
	return 0;
}

static int outbox_bad_key(const struct config *cf, const char *key, const char *value,
                          const char *why)
{
	char q[OUTBOX_QUOTE_LEN];

	return config_refuse(cf, OUTBOX_SECTION, key, "\"%s\": %s", log_quote(q, sizeof(q), value),
	                     why);
}

static int outbox_get_ms(const struct config *cf, const char *key, int64_t dflt, int64_t *ret)
{
	const char *v = config_get(cf, OUTBOX_SECTION, key);

	if (v == NULL) {
		*ret = dflt;
		return 0;
	}
	if (outbox_parse_ms(v, ret) < 0) {
		return outbox_bad_key(cf, key, v, "not a duration (e.g. 250ms, 5s, 2m, 1h, 3d)");
	}
	return 0;
}

/* The effects of orders.h a call can be queued on, and their bits. */
static const struct {
	const char *oe_name;
	unsigned oe_bit;
} outbox_effects[] = {
        {"paid", OUTBOX_ON_PAID},
        {"authorized", OUTBOX_ON_AUTHORIZED},
        {"refunded", OUTBOX_ON_REFUNDED},
        {"partially_refunded", OUTBOX_ON_PARTIALLY_REFUNDED},
        {"refund_failed", OUTBOX_ON_REFUND_FAILED},
        {"disputed", OUTBOX_ON_DISPUTED},
        {"dispute_won", OUTBOX_ON_DISPUTE_WON},
        {"dispute_lost", OUTBOX_ON_DISPUTE_LOST},
        {"capture_failed", OUTBOX_ON_CAPTURE_FAILED},
        {"cancelled", OUTBOX_ON_CANCELLED},
        {"expired", OUTBOX_ON_EXPIRED},
};

#define OUTBOX_EFFECTS_TEXT                                                                        \
	"paid authorized refunded partially_refunded refund_failed disputed dispute_won "          \
	"dispute_lost capture_failed cancelled expired"

/* The bit of an effect named by n bytes at p, or 0. */
static unsigned outbox_effect_bit_n(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < sizeof(outbox_effects) / sizeof(outbox_effects[0]); i++) {
		if (strlen(outbox_effects[i].oe_name) == n &&
		    strncmp(p, outbox_effects[i].oe_name, n) == 0) {
			return outbox_effects[i].oe_bit;
		}
	}
	return 0;
}

/* Parses key's "paid refunded partially_refunded ..." (spaces or commas):
 * every entry is checked, each one that names no effect refused (file,
 * line, key). Returns 0, or -1 when an entry was refused or none given. */
static int outbox_parse_on(const struct config *cf, const char *key, const char *s, unsigned *ret)
{
	unsigned on = 0;
	const char *cursor = s;
	const char *p;
	size_t n;
	int rc = 0;

	while ((p = config_list_next(&cursor, &n)) != NULL) {
		unsigned bit = outbox_effect_bit_n(p, n);
		char entry[OUTBOX_QUOTE_LEN];

		if (bit == 0) {
			snprintf(entry, sizeof(entry), "%.*s", (int)n, p);
			rc = outbox_bad_key(
			        cf, key, entry,
			        "not an effect; expected some of: " OUTBOX_EFFECTS_TEXT);
			continue;
		}
		on |= bit;
	}
	if (rc == 0 && on == 0) {
		return outbox_bad_key(cf, key, s, "expected some of: " OUTBOX_EFFECTS_TEXT);
	}
	if (rc == 0) {
		*ret = on;
	}
	return rc;
}

static int outbox_parse_compensation(const char *s, enum outbox_compensation *ret)
{
	if (strcmp(s, "none") == 0) {
		*ret = OUTBOX_COMP_NONE;
	} else if (strcmp(s, "refund") == 0) {
		*ret = OUTBOX_COMP_REFUND;
	} else if (strcmp(s, "manual") == 0) {
		*ret = OUTBOX_COMP_MANUAL;
	} else {
		return -1;
	}
	return 0;
}

static const char *outbox_compensation_name(enum outbox_compensation c)
{
	switch (c) {
	case OUTBOX_COMP_REFUND:
		return "refund";
	case OUTBOX_COMP_MANUAL:
		return "manual";
	case OUTBOX_COMP_NONE:
		break;
	}
	return "none";
}

/* 0 when url is a URL we may send to (httpc_url_check, credential: the
 * requests carry a key), else -1 (logged with file, line and key). */
static int outbox_url_check(const struct config *cf, const char *key, const char *url,
                            int credential)
{
	char err[HTTPC_ERR_MAX];

	/* The value is not logged: it may hold a password. */
	if (httpc_url_check(url, credential, err, sizeof(err)) < 0) {
		return config_refuse(cf, OUTBOX_SECTION, key, "%s", err);
	}
	return 0;
}

static int outbox_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s);
	size_t m = strlen(suffix);

	return n > m && strcmp(s + n - m, suffix) == 0;
}

static const struct outbox_call_conf *outbox_find_call(const struct outbox_conf *oc,
                                                       const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < oc->oc_n_calls; i++) {
		if (strlen(oc->oc_calls[i].occ_name) == len &&
		    strncmp(oc->oc_calls[i].occ_name, name, len) == 0) {
			return &oc->oc_calls[i];
		}
	}
	return NULL;
}

/* One "<name>_url" key: a call type. */
static int outbox_conf_call(const struct config *cf, struct outbox_conf *oc, const char *key)
{
	size_t n = strlen(key) - 4;
	struct outbox_call_conf *c;
	char okey[96];
	const char *v;
	size_t i;
	int rc = 0;

	/* The key is the problem here, not its value: the message names the
	 * key (config_refuse) and what it may be. */
	if (n == 0 || n > 32) {
		return config_refuse(cf, OUTBOX_SECTION, key,
		                     "call type names are 1 to 32 characters");
	}
	for (i = 0; i < n; i++) {
		if (!islower((unsigned char)key[i]) && !isdigit((unsigned char)key[i]) &&
		    key[i] != '_') {
			return config_refuse(cf, OUTBOX_SECTION, key,
			                     "call type names use a-z, 0-9 and _");
		}
	}
	if (n == strlen(OUTBOX_REFUND_CALL) && strncmp(key, OUTBOX_REFUND_CALL, n) == 0) {
		return config_refuse(cf, OUTBOX_SECTION, key,
		                     "\"refund\" is the compensation call; use another name");
	}
	if (outbox_find_call(oc, key, n) != NULL) {
		return 0; /* the same key again: config_get gives its last value */
	}
	if (oc->oc_n_calls >= OUTBOX_CALLS_MAX) {
		return config_refuse(cf, OUTBOX_SECTION, key,
		                     "too many call types: at most %d NAME_url keys",
		                     OUTBOX_CALLS_MAX);
	}
	c = &oc->oc_calls[oc->oc_n_calls++];
	c->occ_name = strndup(key, n);
	if (c->occ_name == NULL) {
		return -1;
	}
	/* The URL, _on and _compensation each checked whatever the others
	 * hold. */
	v = config_get(cf, OUTBOX_SECTION, key);
	if (outbox_url_check(cf, key, v, 0) < 0) {
		rc = -1;
	} else if ((c->occ_url = strdup(v)) == NULL) {
		return -1;
	}
	c->occ_on = OUTBOX_ON_ALL;
	snprintf(okey, sizeof(okey), "%s_on", c->occ_name);
	v = config_get(cf, OUTBOX_SECTION, okey);
	if (v != NULL && outbox_parse_on(cf, okey, v, &c->occ_on) < 0) {
		rc = -1;
	}
	c->occ_compensation = OUTBOX_COMP_MANUAL;
	snprintf(okey, sizeof(okey), "%s_compensation", c->occ_name);
	v = config_get(cf, OUTBOX_SECTION, okey);
	if (v != NULL && outbox_parse_compensation(v, &c->occ_compensation) < 0) {
		rc = outbox_bad_key(cf, okey, v, "expected refund, manual or none");
	}
	return rc;
}

/* 1 when cs has the key "<the n bytes of name>_url", else 0. */
static int outbox_has_url(const struct config_section *cs, const char *name, size_t n)
{
	char key[96];

	if (n > 64) {
		return 0;
	}
	snprintf(key, sizeof(key), "%.*s_url", (int)n, name);
	return config_section_get(cs, key) != NULL;
}

/* Every key must be known: a fixed one, or <call>_url/_on/_compensation. */
static int outbox_conf_check_keys(const struct config *cf, const struct config_section *cs,
                                  struct outbox_conf *oc)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < cs->cs_n; i++) {
		const char *key = cs->cs_kv[i].kv_key;
		size_t j;
		int known = 0;

		for (j = 0; outbox_fixed_keys[j] != NULL; j++) {
			if (strcmp(key, outbox_fixed_keys[j]) == 0) {
				known = 1;
			}
		}
		/* A _on or _compensation key belongs to its _url key, refused
		 * or not (a refused call name is not refused twice). */
		if (!known && outbox_has_suffix(key, "_url")) {
			known = 1;
		} else if (!known && outbox_has_suffix(key, "_on")) {
			known = outbox_has_url(cs, key, strlen(key) - 3);
		} else if (!known && outbox_has_suffix(key, "_compensation")) {
			known = outbox_has_url(cs, key, strlen(key) - 13);
		}
		if (!known) {
			char q[OUTBOX_QUOTE_LEN];

			rc = config_refuse(
			        cf, OUTBOX_SECTION, key, "unknown key \"%s\" (no %.*s_url for it)",
			        log_quote(q, sizeof(q), key), (int)strcspn(key, "_"), key);
		}
	}
	return rc;
}

/* signing_secret and refund_key, each read whatever the other holds;
 * calls_ok: the calls (their compensations) were all read. Returns 0, or
 * -1 with each problem logged. */
static int outbox_conf_secrets(const struct config *cf, struct outbox_conf *oc, int calls_ok)
{
	const char *v;
	char err[CONFIG_SECRET_ERR_MAX];
	char *secret = NULL;
	size_t len = 0;
	size_t i;
	int need_refund = 0;
	int rc = 0;

	v = config_get(cf, OUTBOX_SECTION, "signing_secret");
	if (v != NULL) {
		if (config_read_secret(v, &secret, &len, err, sizeof(err)) < 0) {
			rc = config_refuse(cf, OUTBOX_SECTION, "signing_secret",
			                   "cannot be read: %s", err);
		} else if (outbox_signing_key(secret, len, &oc->oc_signing_key,
		                              &oc->oc_signing_key_len) < 0) {
			rc = config_refuse(cf, OUTBOX_SECTION, "signing_secret",
			                   "not a whsec_<base64> secret");
		}
		if (secret != NULL) {
			explicit_bzero(secret, len);
			free(secret);
		}
	}
	for (i = 0; i < oc->oc_n_calls; i++) {
		if (oc->oc_calls[i].occ_compensation == OUTBOX_COMP_REFUND) {
			need_refund = 1;
		}
	}
	v = config_get(cf, OUTBOX_SECTION, "refund_key");
	if (v == NULL && need_refund && calls_ok) {
		rc = config_refuse(cf, OUTBOX_SECTION, NULL,
		                   "a call compensates with refund but refund_key is not set");
	}
	if (v != NULL) {
		if (config_read_secret(v, &oc->oc_refund_key, &len, err, sizeof(err)) < 0) {
			rc = config_refuse(cf, OUTBOX_SECTION, "refund_key", "cannot be read: %s",
			                   err);
		} else if (len == 0 || strpbrk(oc->oc_refund_key, "\r\n") != NULL) {
			rc = config_refuse(cf, OUTBOX_SECTION, "refund_key",
			                   "the key file must hold one line");
		}
	}
	return rc;
}

int outbox_conf_load(const struct config *cf, int with_secrets, struct outbox_conf *ret)
{
	const struct config_section *cs = config_section(cf, OUTBOX_SECTION);
	struct outbox_conf *oc = ret;
	struct outbox_policy *pol = &oc->oc_policy;
	int calls_ok = 1;
	int base_ok;
	int cap_ok;
	int timeout_ok;
	int lease_ok;
	size_t i;
	int rc = 0;

	/* Every key is checked whatever the others hold, each problem logged;
	 * a check that relates two keys runs only when both were read. */
	memset(oc, 0, sizeof(*oc));
	pol->op_max_attempts = 12;
	oc->oc_concurrency = 8;
	oc->oc_response_max = OUTBOX_RESPONSE_MAX_DEFAULT;
	base_ok = outbox_get_ms(cf, "retry_base", 1000, &pol->op_base_ms) == 0;
	cap_ok = outbox_get_ms(cf, "retry_cap", 3600 * 1000, &pol->op_cap_ms) == 0;
	if (outbox_get_ms(cf, "max_age", 3LL * 24 * 3600 * 1000, &pol->op_max_age_ms) < 0) {
		rc = -1;
	}
	if (outbox_get_ms(cf, "connect_timeout", 5000, &oc->oc_connect_timeout_ms) < 0) {
		rc = -1;
	} else if (oc->oc_connect_timeout_ms <= 0) {
		rc = config_refuse(cf, OUTBOX_SECTION, "connect_timeout", "must be above 0");
	}
	timeout_ok = outbox_get_ms(cf, "timeout", 30000, &oc->oc_timeout_ms) == 0;
	if (timeout_ok && oc->oc_timeout_ms <= 0) {
		config_refuse(cf, OUTBOX_SECTION, "timeout", "must be above 0");
		timeout_ok = 0;
	}
	if (outbox_get_ms(cf, "poll", 1000, &oc->oc_poll_ms) < 0) {
		rc = -1;
	} else if (oc->oc_poll_ms <= 0) {
		rc = config_refuse(cf, OUTBOX_SECTION, "poll", "must be above 0");
	}
	lease_ok = outbox_get_ms(cf, "lease", oc->oc_timeout_ms + 60000, &oc->oc_lease_ms) == 0;
	if (!base_ok || !cap_ok || !timeout_ok || !lease_ok) {
		rc = -1;
	}
	if (config_get_uint(cf, OUTBOX_SECTION, "max_attempts", 12, &pol->op_max_attempts) < 0) {
		rc = -1;
	} else if (pol->op_max_attempts == 0) {
		rc = config_refuse(cf, OUTBOX_SECTION, "max_attempts", "must be above 0");
	}
	if (config_get_uint(cf, OUTBOX_SECTION, "concurrency", 8, &oc->oc_concurrency) < 0) {
		rc = -1;
	} else if (oc->oc_concurrency == 0 || oc->oc_concurrency > 1024) {
		rc = config_refuse(cf, OUTBOX_SECTION, "concurrency", "must be 1 to 1024");
	}
	if (config_get_size(cf, OUTBOX_SECTION, "response_max", OUTBOX_RESPONSE_MAX_DEFAULT,
	                    &oc->oc_response_max) < 0) {
		rc = -1;
	} else if (oc->oc_response_max == 0) {
		rc = config_refuse(cf, OUTBOX_SECTION, "response_max", "must be above 0");
	}
	if (base_ok && pol->op_base_ms <= 0) {
		rc = config_refuse(cf, OUTBOX_SECTION, "retry_base", "must be above 0");
	} else if (base_ok && cap_ok && pol->op_cap_ms < pol->op_base_ms) {
		rc = config_refuse(cf, OUTBOX_SECTION, "retry_cap",
		                   "retry_base must be > 0 and retry_cap >= retry_base");
	}
	if (timeout_ok && lease_ok && oc->oc_lease_ms <= oc->oc_timeout_ms) {
		rc = config_refuse(cf, OUTBOX_SECTION, "lease", "must be longer than timeout");
	}
	{
		/* [outbound] ca_file is kept for configurations written before
		 * [client] ca_file served every outgoing call. */
		const char *ca = config_get(cf, OUTBOX_SECTION, "ca_file");

		if (ca == NULL) {
			ca = config_client_ca_file(cf);
		}
		if (ca != NULL && (oc->oc_ca_file = strdup(ca)) == NULL) {
			goto fail;
		}
	}
	{
		const char *base = config_get(cf, OUTBOX_SECTION, "refund_base_url");

		if (base == NULL) {
			base = OUTBOX_REFUND_BASE_DEFAULT;
		} else if (outbox_url_check(cf, "refund_base_url", base, 1) < 0) {
			rc = -1;
			base = OUTBOX_REFUND_BASE_DEFAULT;
		}
		oc->oc_refund_base_url =
		        strndup(base, strlen(base) - (outbox_has_suffix(base, "/") ? 1 : 0));
		if (oc->oc_refund_base_url == NULL) {
			goto fail;
		}
	}
	if (cs != NULL) {
		for (i = 0; i < cs->cs_n; i++) {
			const char *key = cs->cs_kv[i].kv_key;

			if (outbox_has_suffix(key, "_url") && strcmp(key, "refund_base_url") != 0 &&
			    outbox_conf_call(cf, oc, key) < 0) {
				calls_ok = 0;
			}
		}
		if (outbox_conf_check_keys(cf, cs, oc) < 0) {
			rc = -1;
		}
	}
	if (!calls_ok) {
		rc = -1;
	}
	if (with_secrets && outbox_conf_secrets(cf, oc, calls_ok) < 0) {
		rc = -1;
	}
	if (rc < 0) {
		goto fail;
	}
	return oc->oc_n_calls > 0 ? 1 : 0;
fail:
	outbox_conf_finish(oc);
	return -1;
}

static int outbox_str_equal(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

int outbox_conf_equal(const struct outbox_conf *a, const struct outbox_conf *b)
{
	size_t i;

	if (a->oc_n_calls != b->oc_n_calls ||
	    memcmp(&a->oc_policy, &b->oc_policy, sizeof(a->oc_policy)) != 0 ||
	    a->oc_concurrency != b->oc_concurrency ||
	    a->oc_connect_timeout_ms != b->oc_connect_timeout_ms ||
	    a->oc_timeout_ms != b->oc_timeout_ms || a->oc_lease_ms != b->oc_lease_ms ||
	    a->oc_poll_ms != b->oc_poll_ms || a->oc_response_max != b->oc_response_max ||
	    !outbox_str_equal(a->oc_ca_file, b->oc_ca_file) ||
	    !outbox_str_equal(a->oc_refund_base_url, b->oc_refund_base_url) ||
	    !outbox_str_equal(a->oc_refund_key, b->oc_refund_key) ||
	    a->oc_signing_key_len != b->oc_signing_key_len ||
	    (a->oc_signing_key_len > 0 &&
	     memcmp(a->oc_signing_key, b->oc_signing_key, a->oc_signing_key_len) != 0)) {
		return 0;
	}
	for (i = 0; i < a->oc_n_calls; i++) {
		if (strcmp(a->oc_calls[i].occ_name, b->oc_calls[i].occ_name) != 0 ||
		    strcmp(a->oc_calls[i].occ_url, b->oc_calls[i].occ_url) != 0 ||
		    a->oc_calls[i].occ_on != b->oc_calls[i].occ_on ||
		    a->oc_calls[i].occ_compensation != b->oc_calls[i].occ_compensation) {
			return 0;
		}
	}
	return 1;
}

void outbox_conf_finish(struct outbox_conf *oc)
{
	size_t i;

	for (i = 0; i < oc->oc_n_calls; i++) {
		free(oc->oc_calls[i].occ_name);
		free(oc->oc_calls[i].occ_url);
	}
	oc->oc_n_calls = 0;
	free(oc->oc_ca_file);
	oc->oc_ca_file = NULL;
	free(oc->oc_refund_base_url);
	oc->oc_refund_base_url = NULL;
	if (oc->oc_signing_key != NULL) {
		memset(oc->oc_signing_key, 0, oc->oc_signing_key_len);
		free(oc->oc_signing_key);
		oc->oc_signing_key = NULL;
	}
	if (oc->oc_refund_key != NULL) {
		memset(oc->oc_refund_key, 0, strlen(oc->oc_refund_key));
		free(oc->oc_refund_key);
		oc->oc_refund_key = NULL;
	}
}

/* ---- delivery policy ---- */

enum outbox_class outbox_classify(long http_status)
{
	if (http_status >= 200 && http_status <= 299) {
		return OUTBOX_SUCCESS;
	}
	if (http_status == 0 || http_status == 408 || http_status == 425 || http_status == 429 ||
	    (http_status >= 500 && http_status <= 599)) {
		return OUTBOX_TRANSIENT;
	}
	return OUTBOX_PERMANENT;
}

int64_t outbox_backoff_ms(const struct outbox_policy *p, unsigned attempts, uint64_t rnd)
{
	int64_t window = p->op_base_ms;
	unsigned i;

	for (i = 1; i < attempts && window < p->op_cap_ms; i++) {
		window *= 2;
	}
	if (window > p->op_cap_ms) {
		window = p->op_cap_ms;
	}
	if (window <= 0) {
		return 0;
	}
	return (int64_t)(rnd % ((uint64_t)window + 1));
}

static const char *outbox_skip_space(const char *s)
{
	while (*s == ' ' || *s == '\t') {
		s++;
	}
	return s;
}

int outbox_retry_after_ms(const char *value, int64_t now_ms, int64_t *ret_ms)
{
	const char *s = outbox_skip_space(value);
	struct tm tm;
	const char *end;
	time_t t;

	if (isdigit((unsigned char)*s)) {
		int64_t secs = 0;

		while (isdigit((unsigned char)*s)) {
			if (secs < OUTBOX_RETRY_AFTER_MAX_S) {
				secs = secs * 10 + (*s - '0');
			}
			s++;
		}
		if (*outbox_skip_space(s) != '\0') {
			return -1;
		}
		if (secs > OUTBOX_RETRY_AFTER_MAX_S) {
			secs = OUTBOX_RETRY_AFTER_MAX_S;
		}
		*ret_ms = secs * 1000;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *outbox_skip_space(end) != '\0') {
		return -1;
	}
	t = timegm(&tm);
	if (t == (time_t)-1) {
		return -1;
	}
	if ((int64_t)t * 1000 <= now_ms) {
		*ret_ms = 0;
	} else if ((int64_t)t - now_ms / 1000 > OUTBOX_RETRY_AFTER_MAX_S) {
		*ret_ms = OUTBOX_RETRY_AFTER_MAX_S * 1000;
	} else {
		*ret_ms = (int64_t)t * 1000 - now_ms;
	}
	return 0;
}

int64_t outbox_next_attempt_ms(const struct outbox_policy *p, unsigned attempts,
                               int64_t window_start_ms, int64_t now_ms, int64_t retry_after_ms,
                               uint64_t rnd)
{
	int64_t delay;
	int64_t deadline;
	int64_t t;

	if (attempts >= p->op_max_attempts) {
		return -1;
	}
	delay = outbox_backoff_ms(p, attempts, rnd);
	if (retry_after_ms > delay) {
		delay = retry_after_ms;
	}
	t = now_ms + delay;
	if (p->op_max_age_ms <= 0) {
		return t;
	}
	deadline = window_start_ms + p->op_max_age_ms;
	if (t <= deadline) {
		return t;
	}
	/* The jitter may land past the deadline; the receiver's own Retry-After
	 * (or a deadline already gone) may not be overruled. */
	if (now_ms >= deadline || retry_after_ms > deadline - now_ms) {
		return -1;
	}
	return deadline;
}

int outbox_signing_key(const char *secret, size_t len, unsigned char **ret, size_t *ret_len)
{
	unsigned char *key = NULL;
	size_t key_len = 0;

	if (len >= 6 && strncmp(secret, "whsec_", 6) == 0) {
		secret += 6;
		len -= 6;
	}
	if (len == 0 || crypto_base64_decode(secret, len, &key, &key_len) < 0) {
		return -1;
	}
	if (key_len == 0) {
		free(key);
		return -1;
	}
	*ret = key;
	*ret_len = key_len;
	return 0;
}

int outbox_sign(const unsigned char *key, size_t key_len, const char *msg_id, int64_t ts,
                const void *body, size_t body_len, char **ret)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t mac_len = 0;
	char *b64 = NULL;
	size_t b64_len = 0;
	struct buf content;
	struct buf out;

	buf_init(&content, 0);
	buf_init(&out, 0);
	if (buf_printf(&content, "%s.%" PRId64 ".", msg_id, ts) < 0 ||
	    buf_append(&content, body, body_len) < 0) {
		goto fail;
	}
	if (crypto_hmac(CRYPTO_SHA256, key, key_len, content.buf_data, content.buf_len, mac,
	                &mac_len) < 0 ||
	    crypto_base64_encode(mac, mac_len, &b64, &b64_len) < 0) {
		goto fail;
	}
	if (buf_puts(&out, "v1,") < 0 || buf_append(&out, b64, b64_len) < 0) {
		goto fail;
	}
	free(b64);
	buf_finish(&content);
	*ret = buf_take(&out, NULL);
	return *ret != NULL ? 0 : -1;
fail:
	free(b64);
	buf_finish(&content);
	buf_finish(&out);
	return -1;
}

/* ---- writing rows ---- */

static unsigned outbox_effect_bit(const char *effect)
{
	return outbox_effect_bit_n(effect, strlen(effect));
}

static int outbox_new_key(char out[OUTBOX_KEY_LEN + 1])
{
	char uuid[37];

	if (crypto_uuid4(uuid) < 0) {
		return -1;
	}
	snprintf(out, OUTBOX_KEY_LEN + 1, "obx_%s", uuid);
	return 0;
}

static int outbox_insert(struct store_tx *tx, const struct outbox_new *n, const char *key,
                         int64_t *ret_id)
{
	int64_t now = store_tx_now(tx);
	struct store_row row;
	struct store_value p[] = {
	        store_text(n->on_order_id),
	        store_text(n->on_call_type),
	        store_text(n->on_effect),
	        store_text(n->on_provider),
	        store_text(n->on_url),
	        store_text(n->on_content_type),
	        store_blob(n->on_body, n->on_body_len),
	        store_text(key),
	        store_text(outbox_compensation_name(n->on_compensation)),
	        n->on_parent_id > 0 ? store_int(n->on_parent_id) : store_null(),
	        store_int(now),
	        store_int(now),
	        store_int(now),
	        store_int(now),
	};
	int rc;

	/* No RETURNING: SQLite builds a temporary table for it on every run. */
	if (store_exec(tx,
	               "INSERT INTO outbox (order_id, call_type, effect, provider, url, "
	               "content_type, body, idem_key, compensation, parent_id, status, attempts, "
	               "window_start, next_attempt_at, created_at, updated_at)"
	               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)",
	               p, sizeof(p) / sizeof(p[0]), NULL) < 0) {
		return -1;
	}
	if (ret_id == NULL) {
		return 0;
	}
	{
		struct store_value q[] = {store_text(key)};

		rc = store_query(tx, "SELECT id FROM outbox WHERE idem_key = ?", q, 1, &row);
	}
	if (rc <= 0) {
		return -1;
	}
	*ret_id = store_row_int(&row, 0);
	store_row_finish(&row);
	return 0;
}

int outbox_enqueue(struct store_tx *tx, const struct outbox_new *n, int64_t *ret_id)
{
	char key[OUTBOX_KEY_LEN + 1];

	if (outbox_new_key(key) < 0) {
		return -1;
	}
	return outbox_insert(tx, n, key, ret_id);
}

/* The order as the notification body shows it. */
static int outbox_order_body(struct store_tx *tx, const char *key, const char *call,
                             const char *provider, const char *order_id, const char *effect,
                             struct buf *out)
{
	struct store_value p[] = {store_text(order_id)};
	struct store_row row;
	const char *prov;
	int rc;

	rc = store_query(
	        tx,
	        "SELECT id, amount, currency, status, refunded_amount, provider, payment_ref,"
	        " (SELECT COALESCE(SUM(points), 0) FROM points_ledger WHERE order_id = orders.id)"
	        " FROM orders WHERE id = ?",
	        p, 1, &row);
	if (rc <= 0) {
		return rc;
	}
	prov = provider != NULL ? provider : store_row_text(&row, 5);
	if (buf_puts(out, "{\"id\":") < 0 || buf_json_string(out, key) < 0 ||
	    buf_printf(out, ",\"type\":\"order.%s\",\"effect\":", effect) < 0 ||
	    buf_json_string(out, effect) < 0 || buf_puts(out, ",\"call\":") < 0 ||
	    buf_json_string(out, call) < 0 ||
	    buf_printf(out, ",\"created_at\":%" PRId64 ",\"order\":{\"id\":", store_tx_now(tx)) <
	            0 ||
	    buf_json_string(out, store_row_text(&row, 0)) < 0 ||
	    buf_printf(out, ",\"amount\":%" PRId64 ",\"currency\":", store_row_int(&row, 1)) < 0 ||
	    buf_json_string(out, store_row_text(&row, 2)) < 0 ||
	    buf_puts(out, ",\"status\":") < 0 ||
	    buf_json_string(out, store_row_text(&row, 3)) < 0 ||
	    buf_printf(out, ",\"refunded_amount\":%" PRId64 ",\"provider\":",
	               store_row_int(&row, 4)) < 0 ||
	    (prov != NULL ? buf_json_string(out, prov) : buf_puts(out, "null")) < 0 ||
	    buf_puts(out, ",\"provider_transaction\":") < 0 ||
	    (store_row_is_null(&row, 6) ? buf_puts(out, "null")
	                                : buf_json_string(out, store_row_text(&row, 6))) < 0 ||
	    buf_printf(out, ",\"points\":%" PRId64 "}}", store_row_int(&row, 7)) < 0) {
		store_row_finish(&row);
		return -1;
	}
	store_row_finish(&row);
	return 1;
}

int outbox_queue_effect(struct store_tx *tx, const struct outbox_conf *oc, const char *provider,
                        const char *order_id, const char *effect)
{
	unsigned bit = effect != NULL ? outbox_effect_bit(effect) : 0;
	int queued = 0;
	size_t i;

	if (bit == 0 || order_id == NULL) {
		return 0;
	}
	for (i = 0; i < oc->oc_n_calls; i++) {
		const struct outbox_call_conf *c = &oc->oc_calls[i];
		char key[OUTBOX_KEY_LEN + 1];
		struct outbox_new n;
		struct buf body;
		int rc;

		if ((c->occ_on & bit) == 0) {
			continue;
		}
		if (outbox_new_key(key) < 0) {
			return -1;
		}
		buf_init(&body, OUTBOX_BODY_MAX);
		rc = outbox_order_body(tx, key, c->occ_name, provider, order_id, effect, &body);
		if (rc <= 0) {
			buf_finish(&body);
			if (rc == 0) {
				char q[OUTBOX_QUOTE_LEN];

				log_warn("outbox: order \"%s\" not found; nothing queued",
				         log_quote(q, sizeof(q), order_id));
				return 0;
			}
			return -1;
		}
		memset(&n, 0, sizeof(n));
		n.on_order_id = order_id;
		n.on_call_type = c->occ_name;
		n.on_effect = effect;
		n.on_provider = provider;
		n.on_url = c->occ_url;
		n.on_content_type = "application/json";
		n.on_body = body.buf_data;
		n.on_body_len = body.buf_len;
		n.on_compensation = c->occ_compensation;
		rc = outbox_insert(tx, &n, key, NULL);
		buf_finish(&body);
		if (rc < 0) {
			return -1;
		}
		queued++;
	}
	if (queued > 0) {
		/* News the shop has not heard yet: the order is pending again. */
		struct store_value p[] = {store_int(store_tx_now(tx)), store_text(order_id)};

		if (store_exec(tx,
		               "UPDATE orders SET fulfillment_status = 'pending', updated_at = ?"
		               " WHERE id = ? AND fulfillment_status = 'notified'",
		               p, 2, NULL) < 0) {
			return -1;
		}
	}
	return 0;
}

/* [outbound] as outbox_on_effect queues from it, parsed once per loaded
 * config (cf_serial) rather than once per callback. Only a parse that
 * succeeded is kept: one that failed is tried (and logged) again, as
 * before. Callers hold a reference while they queue rows, so a reload
 * cannot free the conf under them; the lock is not held across the
 * statements (on PostgreSQL, several claims run their statements
 * interleaved on the writer's one thread, and one of them waiting for a
 * lock another holds across a statement would wait forever). */
struct outbox_effect {
	struct outbox_conf oe_conf;
	uint64_t oe_serial;
	unsigned oe_refs; /* under outbox_effect_lock; the current one holds one */
};

static pthread_mutex_t outbox_effect_lock = PTHREAD_MUTEX_INITIALIZER;
static struct outbox_effect *outbox_effect_current;

static void outbox_effect_put(struct outbox_effect *oe)
{
	int last;

	pthread_mutex_lock(&outbox_effect_lock);
	last = --oe->oe_refs == 0;
	pthread_mutex_unlock(&outbox_effect_lock);
	if (last) {
		outbox_conf_finish(&oe->oe_conf);
		free(oe);
	}
}

int outbox_on_effect(struct store_tx *tx, const struct config *cf, const char *provider,
                     const char *order_id, const char *effect)
{
	struct outbox_effect *oe;
	struct outbox_effect *old = NULL;
	struct outbox_conf oc;
	int rc;

	if (effect == NULL || outbox_effect_bit(effect) == 0 ||
	    config_section(cf, OUTBOX_SECTION) == NULL) {
		return 0;
	}
	if (cf->cf_serial == 0) {
		/* a config built by hand: nothing tells it apart, parse it now */
		rc = outbox_conf_load(cf, 0, &oc);
		if (rc < 0) {
			return -1;
		}
		rc = outbox_queue_effect(tx, &oc, provider, order_id, effect);
		outbox_conf_finish(&oc);
		return rc;
	}
	pthread_mutex_lock(&outbox_effect_lock);
	oe = outbox_effect_current;
	if (oe == NULL || oe->oe_serial != cf->cf_serial) {
		oe = calloc(1, sizeof(*oe));
		if (oe == NULL) {
			log_err("outbox: out of memory");
		}
		if (oe == NULL || outbox_conf_load(cf, 0, &oe->oe_conf) < 0) {
			pthread_mutex_unlock(&outbox_effect_lock);
			free(oe);
			return -1;
		}
		oe->oe_serial = cf->cf_serial;
		oe->oe_refs = 1;
		old = outbox_effect_current;
		outbox_effect_current = oe;
	}
	oe->oe_refs++;
	pthread_mutex_unlock(&outbox_effect_lock);
	if (old != NULL) {
		outbox_effect_put(old);
	}
	rc = outbox_queue_effect(tx, &oe->oe_conf, provider, order_id, effect);
	outbox_effect_put(oe);
	return rc;
}

/* ---- the worker's side ---- */

void outbox_row_finish(struct outbox_row *row)
{
	free(row->or_order_id);
	free(row->or_call_type);
	free(row->or_url);
	free(row->or_content_type);
	free(row->or_body);
	free(row->or_idem_key);
	memset(row, 0, sizeof(*row));
}

/* The number a new history line of row ROW takes (SQL, ROW an expression
 * for the row's id), when ATTEMPTS is the row's attempt count: one more
 * than the newest counted line's, or the number of the newest line given
 * back (its call is being repeated), whichever is larger; ATTEMPTS for the
 * row's first line. So the numbers go on across `outbox retry` (which
 * starts the count max_attempts limits again at 1) and stay unique per
 * counted call, and only the newest lines, which are kept, are read. */
#define OUTBOX_HISTORY_NUMBER(ROW, ATTEMPTS)                                                       \
	"COALESCE((SELECT MAX(CASE WHEN n.http_status IS NULL AND n.error LIKE "                   \
	"'%" OUTBOX_UNCOUNTED_MARK                                                                 \
	"' THEN n.attempt ELSE n.attempt + 1 END) FROM outbox_attempts n"                          \
	" WHERE n.outbox_id = " ROW "), " ATTEMPTS ")"

/* The rows an interrupted call left leased: 'delivering' with a lease
 * older than the bound (a single receiver passes INT64_MAX: every such row
 * is its own, from the last run), or one row when id > 0. */
#define OUTBOX_INTERRUPTED_WHERE " WHERE status = 'delivering' AND lease_until < ?"
#define OUTBOX_INTERRUPTED_ONE OUTBOX_INTERRUPTED_WHERE " AND id = ?"

/* Keeps the interrupted call of each such row in its attempt history, under
 * its attempt number, with no HTTP status, no latency (when the call ended
 * is not known) and error, trimmed as outbox_record_attempt trims. */
static int outbox_interrupted_tx(struct store_tx *tx, int64_t bound, int64_t id, const char *error)
{
	int64_t now = store_tx_now(tx);

	{
		struct store_value p[] = {store_int(now), store_text(error), store_int(bound),
		                          store_int(id)};

		if (store_exec(
		            tx,
		            id > 0 ? "INSERT INTO outbox_attempts (outbox_id, attempt, at, error)"
		                     " SELECT id, " OUTBOX_HISTORY_NUMBER(
		                             "outbox.id",
		                             "attempts") ", ?, ? FROM outbox" OUTBOX_INTERRUPTED_ONE
		                   : "INSERT INTO outbox_attempts (outbox_id, attempt, at, error)"
		                     " SELECT id, " OUTBOX_HISTORY_NUMBER(
		                             "outbox.id",
		                             "attempts") ", ?, ? FROM "
		                                         "outbox" OUTBOX_INTERRUPTED_WHERE,
		            p, id > 0 ? 4 : 3, NULL) < 0) {
			return -1;
		}
	}
	{
		struct store_value p[] = {store_int(bound), store_int(id),
		                          store_int(OUTBOX_ATTEMPTS_KEPT)};
		struct store_value q[] = {store_int(bound), store_int(OUTBOX_ATTEMPTS_KEPT)};

		return store_exec(
		               tx,
		               id > 0 ? "DELETE FROM outbox_attempts WHERE outbox_id IN (SELECT id"
		                        " FROM outbox" OUTBOX_INTERRUPTED_ONE ") AND id NOT IN"
		                        " (SELECT k.id FROM outbox_attempts k WHERE k.outbox_id ="
		                        " outbox_attempts.outbox_id ORDER BY k.id DESC LIMIT ?)"
		                      : "DELETE FROM outbox_attempts WHERE outbox_id IN (SELECT id"
		                        " FROM outbox" OUTBOX_INTERRUPTED_WHERE ") AND id NOT IN"
		                        " (SELECT k.id FROM outbox_attempts k WHERE k.outbox_id ="
		                        " outbox_attempts.outbox_id ORDER BY k.id DESC LIMIT ?)",
		               id > 0 ? p : q, id > 0 ? 3 : 2, NULL) < 0
		               ? -1
		               : 0;
	}
}

static int outbox_release_all_tx(struct store_tx *tx, void *arg)
{
	int64_t *ret_n = arg;
	int64_t now = store_tx_now(tx);
	/* Several receivers on one database: the rows other live receivers
	 * are delivering are theirs; only an expired lease is given back. */
	int64_t bound = store_tx_shared(tx) ? now : INT64_MAX;
	struct store_value p[] = {store_text(OUTBOX_INTERRUPTED_ERROR), store_int(now),
	                          store_int(now), store_int(bound)};

	if (outbox_interrupted_tx(tx, bound, 0, OUTBOX_INTERRUPTED_ERROR) < 0) {
		return -1;
	}
	/* Not counted, as a release at shutdown: what became of the call is
	 * not known, and the next attempt sends it again with the same key. */
	return store_exec(tx,
	                  "UPDATE outbox SET status = CASE WHEN attempts > 1 THEN 'retry_wait'"
	                  " ELSE 'pending' END,"
	                  " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
	                  " lease_until = NULL, last_status = NULL, last_error = ?,"
	                  " next_attempt_at = ?, updated_at = ?" OUTBOX_INTERRUPTED_WHERE,
	                  p, 4, ret_n) < 0
	               ? -1
	               : 0;
}

int outbox_release_all(struct store *st, int64_t now_ms, int64_t *ret_n)
{
	int64_t n = 0;

	if (store_write(st, now_ms, outbox_release_all_tx, &n) < 0) {
		return -1;
	}
	if (n > 0) {
		log_notice("outbox: %" PRId64
		           " row(s) left delivering by the last run are queued again",
		           n);
	}
	if (ret_n != NULL) {
		*ret_n = n;
	}
	return 0;
}

struct outbox_due_ctx {
	const int64_t *od_held; /* rows the caller holds: not due to it */
	size_t od_n_held;
	int64_t od_ms;
	int od_found;
};

static int outbox_due_held(const struct outbox_due_ctx *ctx, int64_t id)
{
	size_t i;

	for (i = 0; i < ctx->od_n_held; i++) {
		if (ctx->od_held[i] == id) {
			return 1;
		}
	}
	return 0;
}

/* The first 'delivering' row (earliest lease) the caller does not hold. */
static int outbox_due_lease(void *arg, const struct store_row *row)
{
	struct outbox_due_ctx *ctx = arg;
	int64_t t = store_row_int(row, 1);

	if (outbox_due_held(ctx, store_row_int(row, 0))) {
		return 0;
	}
	if (!ctx->od_found || t < ctx->od_ms) {
		ctx->od_ms = t;
		ctx->od_found = 1;
	}
	return 1;
}

static int outbox_next_due_tx(struct store_tx *tx, void *arg)
{
	struct outbox_due_ctx *ctx = arg;
	struct store_value p[] = {store_int((int64_t)ctx->od_n_held + 1)};
	struct store_row row;
	int rc;

	rc = store_query(tx,
	                 "SELECT MIN(next_attempt_at) FROM outbox"
	                 " WHERE status IN ('pending', 'retry_wait')",
	                 NULL, 0, &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 1) {
		if (!store_row_is_null(&row, 0)) {
			ctx->od_ms = store_row_int(&row, 0);
			ctx->od_found = 1;
		}
		store_row_finish(&row);
	}
	/* A held row's lease may have run out while its holder keeps the
	 * outcome the store refused: it is never leased again, so it is not
	 * due either, or the worker would look for it at every poll. At most
	 * n_held rows are skipped before one that counts. */
	if (store_query_each(tx,
	                     "SELECT id, lease_until FROM outbox WHERE status = 'delivering'"
	                     " AND lease_until IS NOT NULL ORDER BY lease_until, id LIMIT ?",
	                     p, 1, outbox_due_lease, ctx) < 0) {
		return -1;
	}
	return ctx->od_found ? 1 : 0;
}

int outbox_next_due(struct store *st, int64_t now_ms, const int64_t *held, size_t n_held,
                    int64_t *ret_ms)
{
	struct outbox_due_ctx ctx;
	int rc;

	memset(&ctx, 0, sizeof(ctx));
	ctx.od_held = held;
	ctx.od_n_held = n_held;
	rc = store_read(st, now_ms, outbox_next_due_tx, &ctx);
	if (rc == 1) {
		*ret_ms = ctx.od_ms;
	}
	return rc;
}

struct outbox_lease_ctx {
	const struct outbox_conf *ol_conf; /* NULL: each row keeps its URL */
	int64_t ol_lease_ms;
	size_t ol_max;
	size_t ol_limit;        /* rows looked at: ol_max, plus room for the held ones */
	const int64_t *ol_held; /* rows the caller holds: never leased again */
	size_t ol_n_held;
	struct outbox_row *ol_rows;
	size_t ol_n;
	int64_t ol_ids[64];
	int ol_expired[64]; /* of ol_ids: a 'delivering' row whose lease ran out */
	size_t ol_n_ids;
};

static int outbox_lease_id(void *arg, const struct store_row *row)
{
	struct outbox_lease_ctx *ctx = arg;

	ctx->ol_expired[ctx->ol_n_ids] = store_row_int(row, 1) != 0;
	ctx->ol_ids[ctx->ol_n_ids++] = store_row_int(row, 0);
	return ctx->ol_n_ids < sizeof(ctx->ol_ids) / sizeof(ctx->ol_ids[0]) ? 0 : 1;
}

static char *outbox_dup(const char *s)
{
	return strdup(s != NULL ? s : "");
}

/* The URL oc sends a row of call type call to now, into out: the call
 * type's URL, or the refunds endpoint under refund_base_url. Returns 1, 0
 * when oc does not know the call type (the row keeps its URL), -1. */
static int outbox_current_url(const struct outbox_conf *oc, const char *call, struct buf *out)
{
	const struct outbox_call_conf *c;

	if (strcmp(call, OUTBOX_REFUND_CALL) == 0) {
		if (oc->oc_refund_base_url == NULL) {
			return 0;
		}
		return buf_printf(out, "%s/v1/refunds", oc->oc_refund_base_url) < 0 ? -1 : 1;
	}
	c = outbox_find_call(oc, call, strlen(call));
	if (c == NULL || c->occ_url == NULL) {
		return 0;
	}
	return buf_puts(out, c->occ_url) < 0 ? -1 : 1;
}

/* Points leased row r at the URL its call type has now in oc, in the row
 * too (so `outbox show` tells where it went): a URL changed by a reload
 * applies to what is queued, not only to rows queued after it. */
static int outbox_lease_url(struct store_tx *tx, const struct outbox_conf *oc, struct outbox_row *r)
{
	struct buf url;
	char *dup;
	int rc;

	buf_init(&url, 0);
	rc = outbox_current_url(oc, r->or_call_type, &url);
	if (rc <= 0 || strcmp(url.buf_data, r->or_url) == 0) {
		buf_finish(&url);
		return rc < 0 ? -1 : 0;
	}
	{
		struct store_value p[] = {store_text(url.buf_data), store_int(r->or_id)};

		rc = store_exec(tx, "UPDATE outbox SET url = ? WHERE id = ?", p, 2, NULL);
	}
	dup = rc < 0 ? NULL : strdup(url.buf_data);
	buf_finish(&url);
	if (dup == NULL) {
		return -1;
	}
	/* The URL is not logged: it may carry a token in its query. */
	log_notice("outbox: row %" PRId64 " (%s) goes to the URL configured for it now, not the "
	           "one it was queued with",
	           r->or_id, r->or_call_type);
	free(r->or_url);
	r->or_url = dup;
	return 0;
}

static int outbox_lease_one(struct store_tx *tx, struct outbox_lease_ctx *ctx, int64_t id,
                            int expired)
{
	int64_t now = store_tx_now(tx);
	struct outbox_row *r = &ctx->ol_rows[ctx->ol_n];
	struct store_row row;
	int64_t changes = 0;
	int order_null;
	int rc;

	/* An expired lease is taken over: the call under it went out and its
	 * outcome never came back, so it is in the history and, as a release,
	 * not counted (the new lease keeps its attempt number). */
	if (expired && outbox_interrupted_tx(tx, now, id, OUTBOX_EXPIRED_ERROR) < 0) {
		return -1;
	}
	{
		struct store_value p[] = {store_int(now + ctx->ol_lease_ms),
		                          store_text(OUTBOX_EXPIRED_ERROR),
		                          store_int(now),
		                          store_int(id),
		                          store_int(now),
		                          store_int(now)};

		if (store_exec(tx,
		               "UPDATE outbox"
		               " SET lease_until = ?, lease_token = lease_token + 1,"
		               " attempts = CASE WHEN status = 'delivering' THEN attempts"
		               " ELSE attempts + 1 END,"
		               " last_status = CASE WHEN status = 'delivering' THEN NULL"
		               " ELSE last_status END,"
		               " last_error = CASE WHEN status = 'delivering' THEN ?"
		               " ELSE last_error END,"
		               " status = 'delivering', updated_at = ?"
		               " WHERE id = ? AND ((status IN ('pending', 'retry_wait')"
		               " AND next_attempt_at <= ?) OR (status = 'delivering'"
		               " AND lease_until < ?))",
		               p, 6, &changes) < 0) {
			return -1;
		}
	}
	if (changes != 1) {
		return 0;
	}
	{
		struct store_value p[] = {store_int(id)};

		rc = store_query(tx,
		                 "SELECT id, order_id, call_type, url, content_type, body, "
		                 "idem_key, attempts, window_start, lease_token FROM outbox"
		                 " WHERE id = ?",
		                 p, 1, &row);
	}
	if (rc <= 0) {
		return rc;
	}
	memset(r, 0, sizeof(*r));
	order_null = store_row_is_null(&row, 1);
	r->or_id = store_row_int(&row, 0);
	r->or_order_id = order_null ? NULL : outbox_dup(store_row_text(&row, 1));
	r->or_call_type = outbox_dup(store_row_text(&row, 2));
	r->or_url = outbox_dup(store_row_text(&row, 3));
	r->or_content_type = outbox_dup(store_row_text(&row, 4));
	r->or_body_len = row.sr_cols[5].sv_len;
	r->or_body = malloc(r->or_body_len + 1);
	r->or_idem_key = outbox_dup(store_row_text(&row, 6));
	r->or_attempts = (unsigned)store_row_int(&row, 7);
	r->or_window_start_ms = store_row_int(&row, 8);
	r->or_lease_token = store_row_int(&row, 9);
	if (r->or_body != NULL) {
		if (r->or_body_len > 0) {
			memcpy(r->or_body, row.sr_cols[5].sv_text, r->or_body_len);
		}
		r->or_body[r->or_body_len] = '\0';
	}
	store_row_finish(&row);
	if (r->or_call_type == NULL || r->or_url == NULL || r->or_content_type == NULL ||
	    r->or_body == NULL || r->or_idem_key == NULL ||
	    (!order_null && r->or_order_id == NULL) ||
	    (ctx->ol_conf != NULL && outbox_lease_url(tx, ctx->ol_conf, r) < 0)) {
		outbox_row_finish(r);
		return -1;
	}
	ctx->ol_n++;
	return 0;
}

static int outbox_lease_tx(struct store_tx *tx, void *arg)
{
	struct outbox_lease_ctx *ctx = arg;
	int64_t now = store_tx_now(tx);
	struct store_value p[] = {store_int(now), store_int(now),
	                          store_int((int64_t)ctx->ol_limit)};
	size_t i;
	size_t j;

	ctx->ol_n_ids = 0;
	/* Several receivers on one database: each takes due rows no other is
	 * taking right now (their locks skipped, not waited for); the
	 * conditional UPDATE of outbox_lease_one makes one of them the holder
	 * of a row in any case, and a dead receiver's row is due again when
	 * its lease_until passes. */
	if (store_query_each(
	            tx,
	            store_tx_shared(tx)
	                    ? "SELECT id, CASE WHEN status = 'delivering' THEN 1 ELSE 0 END"
	                      " FROM outbox WHERE (status IN ('pending', 'retry_wait')"
	                      " AND next_attempt_at <= ?) OR (status = 'delivering'"
	                      " AND lease_until < ?) ORDER BY next_attempt_at, id LIMIT ?"
	                      " FOR UPDATE SKIP LOCKED"
	                    : "SELECT id, CASE WHEN status = 'delivering' THEN 1 ELSE 0 END"
	                      " FROM outbox WHERE (status IN ('pending', 'retry_wait')"
	                      " AND next_attempt_at <= ?) OR (status = 'delivering'"
	                      " AND lease_until < ?) ORDER BY next_attempt_at, id LIMIT ?",
	            p, 3, outbox_lease_id, ctx) < 0) {
		return -1;
	}
	for (i = 0; i < ctx->ol_n_ids && ctx->ol_n < ctx->ol_max; i++) {
		/* A row whose lease ran out while its holder keeps the outcome
		 * (the store refused it): taking it over would send the call
		 * again, and the kept outcome could never be recorded. */
		for (j = 0; j < ctx->ol_n_held && ctx->ol_held[j] != ctx->ol_ids[i]; j++) {
		}
		if (j < ctx->ol_n_held) {
			continue;
		}
		if (outbox_lease_one(tx, ctx, ctx->ol_ids[i], ctx->ol_expired[i]) < 0) {
			return -1;
		}
	}
	return 0;
}

static int outbox_lease_with(struct store *st, const struct outbox_conf *oc, int64_t now_ms,
                             int64_t lease_ms, size_t max, const int64_t *held, size_t n_held,
                             struct outbox_row *rows, size_t *ret_n)
{
	const size_t cap = sizeof(((struct outbox_lease_ctx *)NULL)->ol_ids) /
	                   sizeof(((struct outbox_lease_ctx *)NULL)->ol_ids[0]);
	struct outbox_lease_ctx ctx;
	size_t i;

	memset(&ctx, 0, sizeof(ctx));
	ctx.ol_conf = oc;
	ctx.ol_lease_ms = lease_ms;
	ctx.ol_max = max < cap ? max : cap;
	ctx.ol_limit = n_held < cap - ctx.ol_max ? ctx.ol_max + n_held : cap;
	ctx.ol_held = held;
	ctx.ol_n_held = n_held;
	ctx.ol_rows = rows;
	*ret_n = 0;
	if (ctx.ol_max == 0) {
		return 0;
	}
	if (store_write(st, now_ms, outbox_lease_tx, &ctx) < 0) {
		/* Rolled back (or the commit failed): the copies describe nothing. */
		for (i = 0; i < ctx.ol_n; i++) {
			outbox_row_finish(&rows[i]);
		}
		return -1;
	}
	*ret_n = ctx.ol_n;
	return 0;
}

int outbox_lease(struct store *st, int64_t now_ms, int64_t lease_ms, size_t max,
                 struct outbox_row *rows, size_t *ret_n)
{
	return outbox_lease_with(st, NULL, now_ms, lease_ms, max, NULL, 0, rows, ret_n);
}

int outbox_lease_current(struct store *st, const struct outbox_conf *oc, int64_t now_ms, size_t max,
                         const int64_t *held, size_t n_held, struct outbox_row *rows, size_t *ret_n)
{
	return outbox_lease_with(st, oc, now_ms, oc->oc_lease_ms, max, held, n_held, rows, ret_n);
}

/* Percent-encodes s for an application/x-www-form-urlencoded value. */
static int outbox_form_value(struct buf *out, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
			if (buf_append(out, s, 1) < 0) {
				return -1;
			}
		} else {
			char esc[3] = {'%', hex[c >> 4], hex[c & 15]};

			if (buf_append(out, esc, 3) < 0) {
				return -1;
			}
		}
	}
	return 0;
}

/* Flags the order for an operator (manual compensation). */
static int outbox_flag_operator(struct store_tx *tx, int64_t id, const char *order_id,
                                const char *why)
{
	int64_t now = store_tx_now(tx);
	char q[OUTBOX_QUOTE_LEN];

	if (order_id != NULL) {
		struct store_value p[] = {store_int(now), store_text(order_id)};

		if (store_exec(tx,
		               "UPDATE orders SET needs_operator = 1, updated_at = ? WHERE id = ?",
		               p, 2, NULL) < 0) {
			return -1;
		}
	}
	{
		struct store_value p[] = {store_int(now), store_int(id)};

		if (store_exec(
		            tx,
		            "UPDATE outbox SET comp_state = 'flagged', updated_at = ? WHERE id = ?",
		            p, 2, NULL) < 0) {
			return -1;
		}
	}
	log_warn("outbox: row %" PRId64 " of order \"%s\" needs an operator: %s", id,
	         log_quote(q, sizeof(q), order_id != NULL ? order_id : "-"), why);
	return 0;
}

/* A row that had been flagged (or compensated by hand) and was retried got
 * through: its compensation is void, and the order needs no operator once
 * no other row of it is still flagged. */
static int outbox_unflag_tx(struct store_tx *tx, int64_t id, const char *order_id)
{
	int64_t now = store_tx_now(tx);
	struct store_value p[] = {store_int(now), store_int(id)};
	struct store_value q[] = {store_int(now), store_text(order_id), store_text(order_id)};

	if (store_exec(tx,
	               "UPDATE outbox SET comp_state = 'none', updated_at = ?"
	               " WHERE id = ? AND comp_state IN ('flagged', 'done')",
	               p, 2, NULL) < 0) {
		return -1;
	}
	return store_exec(tx,
	                  "UPDATE orders SET needs_operator = 0, updated_at = ?"
	                  " WHERE id = ? AND needs_operator <> 0"
	                  " AND NOT EXISTS (SELECT 1 FROM outbox WHERE order_id = ?"
	                  " AND comp_state = 'flagged')",
	                  q, 3, NULL);
}

/* The order is notified once every regular call of it got through or was
 * cancelled by an operator, and one got through: after a delivery and
 * after a cancel alike, so the order of the two does not matter. */
static int outbox_notified_tx(struct store_tx *tx, const char *order_id)
{
	struct store_value p[] = {store_int(store_tx_now(tx)), store_text(order_id),
	                          store_text(order_id), store_text(order_id)};

	return store_exec(tx,
	                  "UPDATE orders"
	                  " SET fulfillment_status = 'notified', updated_at = ?"
	                  " WHERE id = ?"
	                  " AND fulfillment_status IN ('pending', 'failed', 'compensated')"
	                  " AND NOT EXISTS (SELECT 1 FROM outbox WHERE order_id = ?"
	                  " AND parent_id IS NULL AND status NOT IN ('succeeded', 'cancelled'))"
	                  " AND EXISTS (SELECT 1 FROM outbox WHERE order_id = ?"
	                  " AND parent_id IS NULL AND status = 'succeeded')",
	                  p, 4, NULL);
}

/* A regular call of the order queued again by an operator: the order's
 * fulfillment is pending while it is, as for a call queued by an event,
 * unless another of its calls is still dead (then it stays failed, or
 * compensated). */
static int outbox_requeued_tx(struct store_tx *tx, int64_t id, const char *order_id)
{
	struct store_value p[] = {store_int(store_tx_now(tx)), store_text(order_id), store_int(id),
	                          store_text(order_id)};

	return store_exec(tx,
	                  "UPDATE orders"
	                  " SET fulfillment_status = 'pending', updated_at = ?"
	                  " WHERE id = ?"
	                  " AND fulfillment_status IN ('notified', 'failed', 'compensated')"
	                  " AND EXISTS (SELECT 1 FROM outbox WHERE id = ? AND parent_id IS NULL)"
	                  " AND NOT EXISTS (SELECT 1 FROM outbox WHERE order_id = ?"
	                  " AND parent_id IS NULL AND status = 'dead')",
	                  p, 4, NULL);
}

/* Runs compensation comp for dead/cancelled row id. */
static int outbox_compensate_tx(struct store_tx *tx, const struct outbox_conf *oc, int64_t id,
                                const char *order_id, const char *comp, int64_t *ret_refund_id)
{
	int64_t now = store_tx_now(tx);
	struct store_row row;
	int rc;

	if (order_id != NULL) {
		struct store_value p[] = {store_int(now), store_text(order_id)};

		if (store_exec(tx,
		               "UPDATE orders SET fulfillment_status = 'failed', updated_at = ?"
		               " WHERE id = ? AND fulfillment_status IN ('pending', 'notified')",
		               p, 2, NULL) < 0) {
			return -1;
		}
	}
	if (strcmp(comp, "none") == 0) {
		return 0;
	}
	if (strcmp(comp, "refund") != 0 || order_id == NULL) {
		return outbox_flag_operator(tx, id, order_id, "its call failed for good");
	}
	{
		struct store_value p[] = {store_text(order_id)};

		rc = store_query(tx, "SELECT status, payment_ref FROM orders WHERE id = ?", p, 1,
		                 &row);
	}
	if (rc < 0) {
		return -1;
	}
	if (rc == 0) {
		return outbox_flag_operator(tx, id, order_id,
		                            "refund wanted but the order is gone");
	}
	if (strcmp(store_row_text(&row, 0), "refunded") == 0) {
		/* Nothing is left to give back. */
		struct store_value p[] = {store_int(now), store_int(id)};

		store_row_finish(&row);
		if (store_exec(tx,
		               "UPDATE outbox SET comp_state = 'done', updated_at = ? WHERE id = ?",
		               p, 2, NULL) < 0) {
			return -1;
		}
		{
			struct store_value q[] = {store_int(now), store_text(order_id)};

			return store_exec(tx,
			                  "UPDATE orders"
			                  " SET fulfillment_status = 'compensated', updated_at = ?"
			                  " WHERE id = ?",
			                  q, 2, NULL);
		}
	}
	if ((strcmp(store_row_text(&row, 0), "paid") != 0 &&
	     strcmp(store_row_text(&row, 0), "partially_refunded") != 0) ||
	    store_row_is_null(&row, 1) || strncmp(store_row_text(&row, 1), "pi_", 3) != 0 ||
	    oc == NULL || oc->oc_refund_base_url == NULL) {
		store_row_finish(&row);
		return outbox_flag_operator(
		        tx, id, order_id,
		        "refund wanted but the order is not paid through a Stripe payment intent");
	}
	{
		struct buf url;
		struct buf body;
		struct outbox_new n;
		int64_t refund_id = 0;

		buf_init(&url, 0);
		buf_init(&body, OUTBOX_BODY_MAX);
		if (buf_printf(&url, "%s/v1/refunds", oc->oc_refund_base_url) < 0 ||
		    buf_puts(&body, "payment_intent=") < 0 ||
		    outbox_form_value(&body, store_row_text(&row, 1)) < 0 ||
		    buf_puts(&body, "&metadata%5Border_id%5D=") < 0 ||
		    outbox_form_value(&body, order_id) < 0 ||
		    buf_printf(&body, "&metadata%%5Boutbox_row%%5D=%" PRId64, id) < 0) {
			buf_finish(&url);
			buf_finish(&body);
			store_row_finish(&row);
			return -1;
		}
		store_row_finish(&row);
		memset(&n, 0, sizeof(n));
		n.on_order_id = order_id;
		n.on_call_type = OUTBOX_REFUND_CALL;
		n.on_effect = "compensation";
		n.on_url = url.buf_data;
		n.on_content_type = "application/x-www-form-urlencoded";
		n.on_body = body.buf_data;
		n.on_body_len = body.buf_len;
		n.on_compensation =
		        OUTBOX_COMP_MANUAL; /* a refund that fails for good needs a person */
		n.on_parent_id = id;
		rc = outbox_enqueue(tx, &n, &refund_id);
		buf_finish(&url);
		buf_finish(&body);
		if (rc < 0) {
			return -1;
		}
		{
			struct store_value p[] = {store_int(now), store_int(id)};

			if (store_exec(tx,
			               "UPDATE outbox SET comp_state = 'queued', updated_at = ?"
			               " WHERE id = ?",
			               p, 2, NULL) < 0) {
				return -1;
			}
		}
		if (ret_refund_id != NULL) {
			*ret_refund_id = refund_id;
		}
		log_warn("outbox: row %" PRId64 " is dead; refund queued as row %" PRId64, id,
		         refund_id);
	}
	return 0;
}

/* A refund row succeeded: apply it to the order through the orders handler,
 * which counts each provider refund (and its clawback) once. */
static int outbox_apply_refund(struct store_tx *tx, const struct orders_conf *orc, int64_t id,
                               const char *order_id, const char *idem_key,
                               const struct outbox_result *res)
{
	int64_t now = store_tx_now(tx);
	char refund_ref[128];
	int64_t amount = -1;
	struct store_row row;
	struct orders_result ores;
	struct event ev;
	char *order_ref = NULL;
	char *payment_ref = NULL;
	char *refund = NULL;
	char *type = NULL;
	char *key = NULL;
	char *provider = NULL;
	int rc = -1;
	int refused_status = 0;

	snprintf(refund_ref, sizeof(refund_ref), "%s", idem_key);
	if (res->ors_body != NULL && res->ors_body_len > 0) {
		cJSON *root = json_parse_strict(res->ors_body, res->ors_body_len, NULL);
		const cJSON *v;

		if (root != NULL) {
			v = cJSON_GetObjectItemCaseSensitive(root, "id");
			if (cJSON_IsString(v) && strlen(v->valuestring) < sizeof(refund_ref) &&
			    v->valuestring[0] != '\0') {
				snprintf(refund_ref, sizeof(refund_ref), "%s", v->valuestring);
			}
			v = cJSON_GetObjectItemCaseSensitive(root, "amount");
			if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e15) {
				amount = (int64_t)v->valuedouble;
			}
			v = cJSON_GetObjectItemCaseSensitive(root, "status");
			if (cJSON_IsString(v) && (strcmp(v->valuestring, "failed") == 0 ||
			                          strcmp(v->valuestring, "canceled") == 0)) {
				refused_status = 1;
			}
			cJSON_Delete(root);
		}
	}
	if (refused_status) {
		return outbox_flag_operator(tx, id, order_id,
		                            "the provider answered the refund with status failed");
	}
	{
		struct store_value p[] = {store_text(order_id)};

		rc = store_query(tx,
		                 "SELECT amount, refunded_amount, currency, provider, payment_ref"
		                 " FROM orders WHERE id = ?",
		                 p, 1, &row);
	}
	if (rc < 0) {
		return -1;
	}
	if (rc == 0) {
		return outbox_flag_operator(tx, id, order_id, "refunded, but the order is gone");
	}
	memset(&ev, 0, sizeof(ev));
	if (amount < 0) {
		amount = store_row_int(&row, 0) - store_row_int(&row, 1);
	}
	key = strdup(idem_key);
	type = strdup("outbox.refund");
	order_ref = strdup(order_id);
	refund = strdup(refund_ref);
	payment_ref = store_row_is_null(&row, 4) ? NULL : strdup(store_row_text(&row, 4));
	provider = strdup(store_row_is_null(&row, 3) ? "stripe" : store_row_text(&row, 3));
	snprintf(ev.ev_currency, sizeof(ev.ev_currency), "%s", store_row_text(&row, 2));
	store_row_finish(&row);
	rc = -1;
	if (key == NULL || type == NULL || order_ref == NULL || refund == NULL ||
	    provider == NULL) {
		goto done;
	}
	ev.ev_key = key;
	ev.ev_type = type;
	ev.ev_kind = EVENT_REFUNDED;
	ev.ev_order_ref = order_ref;
	ev.ev_payment_ref = payment_ref;
	ev.ev_refund_ref = refund;
	ev.ev_amount = amount;
	memset(&ores, 0, sizeof(ores));
	if (orders_apply_event(tx, orc, provider, &ev, &ores) < 0) {
		goto done;
	}
	if (ores.or_refused) {
		rc = outbox_flag_operator(tx, id, order_id,
		                          "the refund succeeded but the order refused it");
		goto done;
	}
	{
		struct store_value p[] = {store_int(now), store_text(order_id)};

		if (store_exec(tx,
		               "UPDATE orders"
		               " SET fulfillment_status = 'compensated', updated_at = ?"
		               " WHERE id = ?",
		               p, 2, NULL) < 0) {
			goto done;
		}
	}
	{
		struct store_value p[] = {store_int(now), store_int(id)};

		if (store_exec(tx,
		               "UPDATE outbox SET comp_state = 'done', updated_at = ? WHERE id ="
		               " (SELECT parent_id FROM outbox WHERE id = ?)",
		               p, 2, NULL) < 0) {
			goto done;
		}
	}
	log_notice("outbox: refund row %" PRId64 " applied to order %s (%s)", id, order_id,
	           ores.or_effect);
	rc = 0;
done:
	free(key);
	free(type);
	free(order_ref);
	free(refund);
	free(payment_ref);
	free(provider);
	return rc;
}

struct outbox_complete_ctx {
	const struct outbox_conf *oc_conf;
	const struct orders_conf *oc_orders;
	const struct outbox_row *oc_row;
	const struct outbox_result *oc_res;
	uint64_t oc_rnd;
};

/* Appends s to out[*n] when it fits with room for the NUL and reserve
 * bytes; returns 0, or -1 when it does not (nothing written). */
static int outbox_put(char *out, size_t size, size_t *n, const char *s, size_t reserve)
{
	size_t len = strlen(s);

	if (*n + len + reserve + 1 > size) {
		return -1;
	}
	memcpy(out + *n, s, len);
	*n += len;
	out[*n] = '\0';
	return 0;
}

void outbox_location_text(const char *loc, char *out, size_t size)
{
	size_t cap = size < OUTBOX_LOCATION_MAX + 1 ? size : OUTBOX_LOCATION_MAX + 1;
	const char *userinfo = NULL; /* "user:password@" of "scheme://user:password@host" */
	const char *host = NULL;
	const char *scheme_end = strstr(loc, "://");
	const char *p;
	size_t n = 0;

	if (cap == 0) {
		return;
	}
	out[0] = '\0';
	if (scheme_end != NULL && strcspn(loc, "/?#") >= (size_t)(scheme_end - loc)) {
		size_t auth = strcspn(scheme_end + 3, "/?#");
		size_t i;

		for (i = 0; i < auth; i++) {
			if (scheme_end[3 + i] == '@') {
				userinfo = scheme_end + 3;
				host = scheme_end + 3 + i + 1;
			}
		}
	}
	for (p = loc; *p != '\0'; p++) {
		unsigned char c;
		char one[8];

		if (p == userinfo) {
			p = host;
			if (*p == '\0') {
				break;
			}
		}
		c = (unsigned char)*p;
		if (c == '?' || c == '#') {
			snprintf(one, sizeof(one), "%c...", c);
			if (outbox_put(out, cap, &n, one, 0) < 0) {
				outbox_put(out, cap, &n, "...", 0);
			}
			return;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\') {
			snprintf(one, sizeof(one), "\\x%02x", c);
		} else {
			one[0] = (char)c;
			one[1] = '\0';
		}
		/* Room for "..." stays until the last byte. */
		if (outbox_put(out, cap, &n, one, p[1] != '\0' ? 3 : 0) < 0) {
			outbox_put(out, cap, &n, "...", 0);
			return;
		}
	}
}

/* What a 3xx answer pointed at, for the attempt's error: "Location <where>"
 * (outbox_location_text), or "no Location". */
static void outbox_redirect_text(const struct outbox_result *res, char *out, size_t size)
{
	char loc[OUTBOX_LOCATION_MAX + 1];

	if (res->ors_location == NULL) {
		snprintf(out, size, "no Location");
		return;
	}
	outbox_location_text(res->ors_location, loc, sizeof(loc));
	snprintf(out, size, "Location %s", loc);
}

static int outbox_is_redirect(const struct outbox_result *res)
{
	return res->ors_http_status >= 300 && res->ors_http_status < 400;
}

/* "HTTP 500: <start of the body>", "HTTP 301 (Location <where>): <start of
 * the body>" or the transport error, for last_error. */
static void outbox_error_text(const struct outbox_result *res, char *out, size_t size)
{
	size_t n;
	size_t i;

	if (res->ors_http_status == 0) {
		snprintf(out, size, "%s", res->ors_error != NULL ? res->ors_error : "no answer");
		return;
	}
	if (outbox_is_redirect(res)) {
		char where[OUTBOX_LOCATION_MAX + 16];

		outbox_redirect_text(res, where, sizeof(where));
		n = (size_t)snprintf(out, size, "HTTP %ld (%s)", res->ors_http_status, where);
		if (n >= size) {
			return;
		}
	} else {
		n = (size_t)snprintf(out, size, "HTTP %ld", res->ors_http_status);
	}
	if (res->ors_body == NULL || res->ors_body_len == 0 || n + 3 >= size) {
		return;
	}
	out[n++] = ':';
	out[n++] = ' ';
	for (i = 0; i < res->ors_body_len && n + 1 < size; i++) {
		unsigned char c = (unsigned char)res->ors_body[i];

		out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : ' ';
	}
	out[n] = '\0';
}

/* Keeps the attempt in outbox_attempts (the console's and `outbox show`'s
 * history), and only the newest OUTBOX_ATTEMPTS_KEPT of the row. */
static int outbox_record_attempt(struct store_tx *tx, const struct outbox_row *r,
                                 const struct outbox_result *res, int64_t now)
{
	char excerpt[OUTBOX_ERROR_MAX];
	char where[OUTBOX_LOCATION_MAX + 16];
	const char *error = NULL;
	size_t n = 0;
	size_t i;

	if (res->ors_http_status == 0) {
		error = res->ors_error != NULL ? res->ors_error : "no answer";
	} else if (outbox_is_redirect(res)) {
		outbox_redirect_text(res, where, sizeof(where));
		error = where;
	}
	for (i = 0; res->ors_body != NULL && i < res->ors_body_len && n + 1 < sizeof(excerpt); i++) {
		unsigned char c = (unsigned char)res->ors_body[i];

		excerpt[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : ' ';
	}
	excerpt[n] = '\0';
	{
		struct store_value p[] = {
		        store_int(r->or_id),
		        store_int(r->or_id),
		        store_int(r->or_attempts),
		        store_int(now),
		        res->ors_http_status != 0 ? store_int(res->ors_http_status) : store_null(),
		        store_text(error),
		        store_int(res->ors_latency_ms),
		        store_text(n > 0 ? excerpt : NULL),
		};

		if (store_exec(tx,
		               "INSERT INTO outbox_attempts (outbox_id, attempt, at, http_status, "
		               "error,"
		               " latency_ms, excerpt) VALUES (?, " OUTBOX_HISTORY_NUMBER(
		                       "?", "?") ", ?, ?, ?, ?, ?)",
		               p, 8, NULL) < 0) {
			return -1;
		}
	}
	{
		struct store_value p[] = {store_int(r->or_id), store_int(r->or_id),
		                          store_int(OUTBOX_ATTEMPTS_KEPT)};

		return store_exec(tx,
		                  "DELETE FROM outbox_attempts WHERE outbox_id = ? AND id NOT IN"
		                  " (SELECT id FROM outbox_attempts WHERE outbox_id = ?"
		                  " ORDER BY id DESC LIMIT ?)",
		                  p, 3, NULL);
	}
}

static int outbox_complete_tx(struct store_tx *tx, void *arg)
{
	struct outbox_complete_ctx *ctx = arg;
	const struct outbox_row *r = ctx->oc_row;
	const struct outbox_result *res = ctx->oc_res;
	int64_t now = store_tx_now(tx);
	enum outbox_class cls = outbox_classify(res->ors_http_status);
	char err[OUTBOX_ERROR_MAX];
	struct store_row row;
	char *comp = NULL;
	int64_t parent = 0;
	int64_t next;
	int rc;

	{
		struct store_value p[] = {store_int(r->or_id), store_int(r->or_lease_token)};

		rc = store_query(tx,
		                 "SELECT compensation, parent_id FROM outbox WHERE id = ?"
		                 " AND status = 'delivering' AND lease_token = ?",
		                 p, 2, &row);
	}
	if (rc < 0) {
		return -1;
	}
	if (rc == 0) {
		return 1;
	}
	comp = strdup(store_row_text(&row, 0));
	parent = store_row_int(&row, 1);
	store_row_finish(&row);
	if (comp == NULL) {
		return -1;
	}
	outbox_error_text(res, err, sizeof(err));
	if (outbox_record_attempt(tx, r, res, now) < 0) {
		goto fail;
	}
	if (cls == OUTBOX_SUCCESS) {
		struct store_value p[] = {store_int(now), store_int(now),
		                          store_int(res->ors_http_status), store_int(r->or_id)};

		if (store_exec(tx,
		               "UPDATE outbox"
		               " SET status = 'succeeded', delivered_at = ?, updated_at = ?, "
		               "last_status = ?, last_error = NULL, lease_until = NULL"
		               " WHERE id = ?",
		               p, 4, NULL) < 0) {
			goto fail;
		}
		if (strcmp(r->or_call_type, OUTBOX_REFUND_CALL) == 0 && r->or_order_id != NULL &&
		    parent > 0) {
			if (outbox_apply_refund(tx, ctx->oc_orders, r->or_id, r->or_order_id,
			                        r->or_idem_key, res) < 0) {
				goto fail;
			}
		} else if (r->or_order_id != NULL) {
			if (outbox_notified_tx(tx, r->or_order_id) < 0) {
				goto fail;
			}
			if (outbox_unflag_tx(tx, r->or_id, r->or_order_id) < 0) {
				goto fail;
			}
		}
		free(comp);
		return 0;
	}
	next = -1;
	if (cls == OUTBOX_TRANSIENT) {
		next = outbox_next_attempt_ms(&ctx->oc_conf->oc_policy, r->or_attempts,
		                              r->or_window_start_ms, now, res->ors_retry_after_ms,
		                              ctx->oc_rnd);
	}
	if (next >= 0) {
		struct store_value p[] = {
		        store_int(next),
		        store_int(now),
		        res->ors_http_status != 0 ? store_int(res->ors_http_status) : store_null(),
		        store_text(err),
		        store_int(r->or_id),
		};

		if (store_exec(tx,
		               "UPDATE outbox"
		               " SET status = 'retry_wait', next_attempt_at = ?, updated_at = ?, "
		               "last_status = ?, last_error = ?, lease_until = NULL WHERE id = ?",
		               p, 5, NULL) < 0) {
			goto fail;
		}
		log_info("outbox: row %" PRId64 " attempt %u failed (%s); next in %" PRId64 " ms",
		         r->or_id, r->or_attempts, err, next - now);
		free(comp);
		return 0;
	}
	{
		struct store_value p[] = {
		        store_int(now),
		        res->ors_http_status != 0 ? store_int(res->ors_http_status) : store_null(),
		        store_text(err),
		        store_int(r->or_id),
		};

		if (store_exec(tx,
		               "UPDATE outbox"
		               " SET status = 'dead', updated_at = ?, last_status = ?, last_error "
		               "= ?, lease_until = NULL WHERE id = ?",
		               p, 4, NULL) < 0) {
			goto fail;
		}
	}
	log_warn("outbox: row %" PRId64 " (%s) is dead after %u attempt(s): %s%s", r->or_id,
	         r->or_call_type, r->or_attempts, err,
	         cls == OUTBOX_PERMANENT ? " (permanent)" : " (gave up)");
	if (outbox_compensate_tx(tx, ctx->oc_conf, r->or_id, r->or_order_id, comp, NULL) < 0) {
		goto fail;
	}
	free(comp);
	return 0;
fail:
	free(comp);
	return -1;
}

int outbox_complete(struct store *st, const struct outbox_conf *oc, const struct orders_conf *orc,
                    const struct outbox_row *row, const struct outbox_result *res, int64_t now_ms,
                    uint64_t rnd)
{
	struct outbox_complete_ctx ctx = {
	        .oc_conf = oc,
	        .oc_orders = orc,
	        .oc_row = row,
	        .oc_res = res,
	        .oc_rnd = rnd,
	};

	return store_write(st, now_ms, outbox_complete_tx, &ctx);
}

struct outbox_many_ctx {
	const struct outbox_conf *om_conf;
	const struct orders_conf *om_orders;
	struct outbox_attempt *om_attempts;
	size_t om_n;
};

static int outbox_complete_many_tx(struct store_tx *tx, void *arg)
{
	struct outbox_many_ctx *m = arg;
	size_t i;

	for (i = 0; i < m->om_n; i++) {
		struct outbox_complete_ctx ctx = {
		        .oc_conf = m->om_conf,
		        .oc_orders = m->om_orders,
		        .oc_row = m->om_attempts[i].oa_row,
		        .oc_res = &m->om_attempts[i].oa_res,
		        .oc_rnd = m->om_attempts[i].oa_rnd,
		};

		int rc = outbox_complete_tx(tx, &ctx);

		if (rc < 0) {
			return -1;
		}
		m->om_attempts[i].oa_overtaken = rc == 1;
	}
	return 0;
}

int outbox_complete_many(struct store *st, const struct outbox_conf *oc,
                         const struct orders_conf *orc, struct outbox_attempt *attempts, size_t n,
                         int64_t now_ms)
{
	struct outbox_many_ctx m = {
	        .om_conf = oc,
	        .om_orders = orc,
	        .om_attempts = attempts,
	        .om_n = n,
	};
	int rc = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		attempts[i].oa_unrecorded = 0;
		attempts[i].oa_overtaken = 0;
	}
	if (n == 0 || (n > 1 && store_write(st, now_ms, outbox_complete_many_tx, &m) >= 0)) {
		return 0;
	}
	/* One outcome failed and took the others with it: record them apart. */
	for (i = 0; i < n; i++) {
		int one = outbox_complete(st, oc, orc, attempts[i].oa_row, &attempts[i].oa_res,
		                          now_ms, attempts[i].oa_rnd);

		if (one < 0) {
			attempts[i].oa_unrecorded = 1;
			rc = -1;
		}
		attempts[i].oa_overtaken = one == 1;
	}
	return rc;
}

int outbox_attempt_counted(long http_status, const char *error)
{
	size_t n = error != NULL ? strlen(error) : 0;
	size_t m = strlen(OUTBOX_UNCOUNTED_MARK);

	if (http_status != 0 || n < m) {
		return 1;
	}
	return strcmp(error + n - m, OUTBOX_UNCOUNTED_MARK) != 0;
}

void outbox_attempt_label(char *out, size_t size, int64_t attempt, int64_t group, int counted)
{
	if (counted) {
		snprintf(out, size, "%" PRId64, attempt);
	} else {
		snprintf(out, size, "%" PRId64 ".%" PRId64, attempt, group);
	}
}

struct outbox_release_ctx {
	const struct outbox_row *orl_row;
	const struct outbox_result *orl_res; /* NULL: nothing was sent */
};

static int outbox_release_tx(struct store_tx *tx, void *arg)
{
	const struct outbox_release_ctx *ctx = arg;
	const struct outbox_row *r = ctx->orl_row;
	int64_t now = store_tx_now(tx);
	char err[OUTBOX_ERROR_MAX];
	int64_t changed = 0;
	struct store_value p[] = {store_int(now), store_int(now), store_int(r->or_id),
	                          store_int(r->or_lease_token)};

	if (store_exec(tx,
	               "UPDATE outbox SET status = CASE WHEN attempts > 1 THEN 'retry_wait'"
	               " ELSE 'pending'"
	               " END, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
	               " lease_until = NULL, "
	               "next_attempt_at = ?, updated_at = ? WHERE id = ?"
	               " AND status = 'delivering' AND lease_token = ?",
	               p, 4, &changed) < 0) {
		return -1;
	}
	if (changed == 0) {
		return 1; /* taken over: the taker wrote the call's history line */
	}
	/* A call that went out is in the history even though it does not
	 * count, or the peer's second copy of it has no explanation. */
	if (ctx->orl_res == NULL) {
		return 0;
	}
	/* It is the row's last attempt too (`outbox show`), as a call that
	 * came back with no answer would be. */
	outbox_error_text(ctx->orl_res, err, sizeof(err));
	{
		struct store_value q[] = {store_text(err), store_int(r->or_id)};

		if (store_exec(tx,
		               "UPDATE outbox SET last_status = NULL, last_error = ? WHERE id = ?",
		               q, 2, NULL) < 0) {
			return -1;
		}
	}
	return outbox_record_attempt(tx, r, ctx->orl_res, now);
}

int outbox_release(struct store *st, const struct outbox_row *row, const struct outbox_result *res,
                   int64_t now_ms)
{
	struct outbox_release_ctx ctx = {.orl_row = row, .orl_res = res};

	return store_write(st, now_ms, outbox_release_tx, &ctx);
}

/* ---- operator transitions ---- */

enum outbox_admin_op {
	OUTBOX_OP_RETRY = 0,
	OUTBOX_OP_CANCEL,
	OUTBOX_OP_COMPENSATE,
};

struct outbox_admin_ctx {
	const struct outbox_conf *oa_conf;
	int64_t oa_id;
	enum outbox_admin_op oa_op;
	char *oa_msg;
	size_t oa_size;
};

static int outbox_admin_tx(struct store_tx *tx, void *arg)
{
	struct outbox_admin_ctx *a = arg;
	int64_t now = store_tx_now(tx);
	struct store_value pid[] = {store_int(a->oa_id)};
	struct store_row row;
	const char *status;
	const char *comp_state;
	const char *order_id;
	int rc;

	rc = store_query(tx,
	                 "SELECT o.status, o.compensation, o.comp_state, o.order_id, "
	                 "COALESCE((SELECT needs_operator FROM orders WHERE id = o.order_id), 0),"
	                 " (SELECT id FROM outbox WHERE parent_id = o.id ORDER BY id DESC LIMIT 1)"
	                 " FROM outbox AS o WHERE o.id = ?",
	                 pid, 1, &row);
	if (rc < 0) {
		return -1;
	}
	if (rc == 0) {
		snprintf(a->oa_msg, a->oa_size, "no outbox row %" PRId64, a->oa_id);
		return OUTBOX_ADMIN_UNKNOWN;
	}
	status = store_row_text(&row, 0);
	comp_state = store_row_text(&row, 2);
	order_id = store_row_is_null(&row, 3) ? NULL : store_row_text(&row, 3);
	rc = OUTBOX_ADMIN_ILLEGAL;
	if (a->oa_op == OUTBOX_OP_RETRY) {
		if (strcmp(status, "dead") != 0 && strcmp(status, "cancelled") != 0 &&
		    strcmp(status, "retry_wait") != 0) {
			snprintf(a->oa_msg, a->oa_size,
			         "row %" PRId64
			         " is %s; only dead, cancelled or retry_wait rows can be retried",
			         a->oa_id, status);
		} else if (strcmp(comp_state, "queued") == 0 || store_row_int(&row, 5) > 0) {
			/* A refund row exists: the money went (or is going) back.
			 * A manual compensation gave nothing back: retry is fine. */
			snprintf(a->oa_msg, a->oa_size,
			         "row %" PRId64 " was compensated by a refund (row %" PRId64
			         "); it cannot be retried",
			         a->oa_id, store_row_int(&row, 5));
		} else {
			struct store_value p[] = {store_int(now), store_int(now), store_int(now),
			                          store_int(a->oa_id)};

			if (store_exec(tx,
			               "UPDATE outbox"
			               " SET status = 'pending', attempts = 0, window_start = ?, "
			               "next_attempt_at = ?, updated_at = ?, lease_until = NULL"
			               " WHERE id = ?",
			               p, 4, NULL) < 0) {
				goto fail;
			}
			if (order_id != NULL && outbox_requeued_tx(tx, a->oa_id, order_id) < 0) {
				goto fail;
			}
			snprintf(a->oa_msg, a->oa_size, "row %" PRId64 " queued again", a->oa_id);
			rc = OUTBOX_ADMIN_OK;
		}
	} else if (a->oa_op == OUTBOX_OP_CANCEL) {
		if (strcmp(status, "pending") != 0 && strcmp(status, "retry_wait") != 0) {
			snprintf(a->oa_msg, a->oa_size,
			         "row %" PRId64
			         " is %s; only pending or retry_wait rows can be cancelled",
			         a->oa_id, status);
		} else {
			struct store_value p[] = {store_int(now), store_int(a->oa_id)};

			if (store_exec(tx,
			               "UPDATE outbox SET status = 'cancelled', updated_at = ?"
			               " WHERE id = ?",
			               p, 2, NULL) < 0 ||
			    (order_id != NULL && outbox_notified_tx(tx, order_id) < 0)) {
				goto fail;
			}
			snprintf(a->oa_msg, a->oa_size, "row %" PRId64 " cancelled", a->oa_id);
			rc = OUTBOX_ADMIN_OK;
		}
	} else {
		if (strcmp(status, "dead") != 0 && strcmp(status, "cancelled") != 0) {
			snprintf(a->oa_msg, a->oa_size,
			         "row %" PRId64
			         " is %s; only dead or cancelled rows can be compensated",
			         a->oa_id, status);
		} else if (strcmp(comp_state, "queued") == 0 || strcmp(comp_state, "done") == 0) {
			snprintf(a->oa_msg, a->oa_size,
			         "row %" PRId64 " is already compensated (%s)", a->oa_id,
			         comp_state);
		} else if (strcmp(comp_state, "flagged") == 0) {
			/* The operator reports the case handled. */
			struct store_value p[] = {store_int(now), store_int(a->oa_id)};

			if (store_exec(tx,
			               "UPDATE outbox SET comp_state = 'done', updated_at = ?"
			               " WHERE id = ?",
			               p, 2, NULL) < 0) {
				goto fail;
			}
			if (order_id != NULL) {
				struct store_value q[] = {store_int(now), store_text(order_id)};

				if (store_exec(tx,
				               "UPDATE orders"
				               " SET needs_operator = 0, fulfillment_status = "
				               "'compensated', updated_at = ? WHERE id = ?",
				               q, 2, NULL) < 0) {
					goto fail;
				}
			}
			snprintf(a->oa_msg, a->oa_size,
			         "row %" PRId64 ": operator fix recorded, order compensated",
			         a->oa_id);
			rc = OUTBOX_ADMIN_OK;
		} else {
			const char *comp = store_row_text(&row, 1);
			int64_t refund_id = 0;

			if (outbox_compensate_tx(tx, a->oa_conf, a->oa_id, order_id,
			                         strcmp(comp, "none") == 0 ? "manual" : comp,
			                         &refund_id) < 0) {
				goto fail;
			}
			if (refund_id > 0) {
				snprintf(a->oa_msg, a->oa_size,
				         "row %" PRId64 ": refund queued as row %" PRId64, a->oa_id,
				         refund_id);
			} else {
				snprintf(a->oa_msg, a->oa_size,
				         "row %" PRId64 ": compensation ran (see the log)",
				         a->oa_id);
			}
			rc = OUTBOX_ADMIN_OK;
		}
	}
	store_row_finish(&row);
	return rc;
fail:
	store_row_finish(&row);
	return -1;
}

static int outbox_admin(struct store *st, const struct outbox_conf *oc, enum outbox_admin_op op,
                        int64_t id, int64_t now_ms, char *ret_msg, size_t msg_size)
{
	struct outbox_admin_ctx a = {
	        .oa_conf = oc,
	        .oa_id = id,
	        .oa_op = op,
	        .oa_msg = ret_msg,
	        .oa_size = msg_size,
	};

	ret_msg[0] = '\0';
	return store_write(st, now_ms, outbox_admin_tx, &a);
}

int outbox_admin_retry(struct store *st, int64_t id, int64_t now_ms, char *ret_msg, size_t msg_size)
{
	return outbox_admin(st, NULL, OUTBOX_OP_RETRY, id, now_ms, ret_msg, msg_size);
}

int outbox_admin_cancel(struct store *st, int64_t id, int64_t now_ms, char *ret_msg,
                        size_t msg_size)
{
	return outbox_admin(st, NULL, OUTBOX_OP_CANCEL, id, now_ms, ret_msg, msg_size);
}

int outbox_admin_compensate(struct store *st, const struct outbox_conf *oc, int64_t id,
                            int64_t now_ms, char *ret_msg, size_t msg_size)
{
	return outbox_admin(st, oc, OUTBOX_OP_COMPENSATE, id, now_ms, ret_msg, msg_size);
}

/* ---- listing ---- */

static const char *const outbox_statuses[] = {
        "pending", "delivering", "retry_wait", "succeeded", "dead", "cancelled", NULL,
};

int outbox_status_valid(const char *s)
{
	size_t i;

	for (i = 0; outbox_statuses[i] != NULL; i++) {
		if (strcmp(s, outbox_statuses[i]) == 0) {
			return 1;
		}
	}
	return 0;
}

struct outbox_list_ctx {
	const char *ol_status;
	const char *ol_order;
	int (*ol_fn)(void *arg, const struct outbox_info *info);
	void *ol_arg;
};

static int outbox_list_row(void *arg, const struct store_row *row)
{
	struct outbox_list_ctx *ctx = arg;
	struct outbox_info i;

	memset(&i, 0, sizeof(i));
	i.oi_id = store_row_int(row, 0);
	i.oi_order_id = store_row_text(row, 1);
	i.oi_call_type = store_row_text(row, 2);
	i.oi_effect = store_row_text(row, 3);
	i.oi_status = store_row_text(row, 4);
	i.oi_compensation = store_row_text(row, 5);
	i.oi_comp_state = store_row_text(row, 6);
	i.oi_parent_id = store_row_int(row, 7);
	i.oi_attempts = store_row_int(row, 8);
	i.oi_next_attempt_at = store_row_int(row, 9);
	i.oi_last_status = store_row_int(row, 10);
	i.oi_last_error = store_row_text(row, 11);
	i.oi_idem_key = store_row_text(row, 12);
	i.oi_fulfillment = store_row_text(row, 13);
	i.oi_needs_operator = (int)store_row_int(row, 14);
	i.oi_created_at = store_row_int(row, 15);
	return ctx->ol_fn(ctx->ol_arg, &i) != 0 ? 1 : 0;
}

static int outbox_list_tx(struct store_tx *tx, void *arg)
{
	struct outbox_list_ctx *ctx = arg;
	struct store_value p[] = {
	        store_text(ctx->ol_status),
	        store_text(ctx->ol_status),
	        store_text(ctx->ol_order),
	        store_text(ctx->ol_order),
	};

	return store_query_each(
	        tx,
	        "SELECT o.id, o.order_id, o.call_type, o.effect, o.status, o.compensation, "
	        "o.comp_state, o.parent_id, o.attempts, o.next_attempt_at, o.last_status, "
	        "o.last_error, o.idem_key, d.fulfillment_status, d.needs_operator, o.created_at"
	        " FROM outbox AS o LEFT JOIN orders AS d ON d.id = o.order_id WHERE (? IS NULL"
	        " OR o.status = ?) AND (? IS NULL OR o.order_id = ?) ORDER BY o.id",
	        p, 4, outbox_list_row, ctx);
}

int outbox_list(struct store *st, const char *status, const char *order_id,
                int (*fn)(void *arg, const struct outbox_info *info), void *arg)
{
	struct outbox_list_ctx ctx = {
	        .ol_status = status,
	        .ol_order = order_id,
	        .ol_fn = fn,
	        .ol_arg = arg,
	};
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return store_read(st, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, outbox_list_tx,
	                  &ctx);
}
