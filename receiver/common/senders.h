/* senders.h: the addresses payment providers publish that their callbacks
 * come from (allow_from = provider:NAME): a list shipped with the binary,
 * with its date, or a newer one `idemhook ips update` wrote beside the
 * database; and, for providers that publish none, what they recommend. */
#ifndef IDEMHOOK_SENDERS_H
#define IDEMHOOK_SENDERS_H

#include <stddef.h>

#define SENDERS_PRESET "provider:"    /* allow_from = provider:stripe */
#define SENDERS_DIR_NAME "sender-ips" /* beside the database */
#define SENDERS_FILE_MAX (256 * 1024) /* bytes of one list */
#define SENDERS_ENTRIES_MAX 4096      /* addresses and ranges in one list */
#define SENDERS_ERR_MAX 320

struct senders_list {
	char sl_date[32];    /* "# date:" of the list, "" when it has none */
	char sl_source[256]; /* "# source:" of the list, "" when it has none */
	int sl_shipped;      /* 1: the list built into this binary; 0: the file sl_path */
	char sl_path[512];
	char **sl_cidrs; /* addresses and CIDRs, NULL-terminated (owned) */
	size_t sl_n;
};

/* What provider (a profile name: stripe, adyen, ...) recommends instead of
 * an address list when it publishes none (static); NULL when it does. */
const char *senders_advice(const char *provider);

/* Where provider serves its list in machine-readable form (static), or NULL
 * when it publishes it only on a documentation page. */
const char *senders_url(const char *provider);

/* The directory beside the database at db_path that holds updated lists,
 * into out. Returns 0, or -1 when it does not fit. */
int senders_dir(const char *db_path, char *out, size_t out_size);

/* Parses a list: one address or CIDR per line, '#' comments, "# date: ..."
 * and "# source: ..." lines kept. ret is filled (finish it). Returns 0, or
 * -1 with a sentence in err (no entry, a malformed line, too many). */
int senders_parse(const char *text, size_t len, struct senders_list *ret, char *err,
                  size_t err_size);

/* The list in force for provider: dir/PROVIDER.txt when it exists (dir may
 * be NULL) and is not older than the shipped one by their "# date:" lines
 * (an older one is passed over with a notice), else the shipped one.
 * Returns 0, or -1 with err set: the
 * provider's advice when it publishes no list, or what is wrong with the
 * file. */
int senders_load(const char *dir, const char *provider, struct senders_list *ret, char *err,
                 size_t err_size);

void senders_list_finish(struct senders_list *l);

#endif
