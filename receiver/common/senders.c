/* senders.c: providers' published callback addresses (senders.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"
#include "log.h"
#include "senders.h"
#include "senders_data.h"

struct senders_provider {
	const char *sp_name;
	const char *sp_data; /* the shipped list, or NULL */
	const size_t *sp_len;
	const char *sp_url;    /* its machine-readable source, or NULL */
	const char *sp_advice; /* when it publishes no list */
};

static const struct senders_provider senders_table[] = {
        {"adyen", NULL, NULL, NULL,
         "Adyen publishes no list of addresses: it recommends allowing its domain "
         "out.adyen.com (a DNS lookup, repeated hourly) in the firewall, and verifying "
         "the HMAC signature, which idemhook does for every item"},
        {"alipay", NULL, NULL, NULL,
         "Alipay publishes no list of the addresses its notifications come from: the "
         "RSA2 signature, which idemhook verifies, is what authenticates them"},
        {"stripe", senders_stripe, &senders_stripe_len,
         "https://stripe.com/files/ips/ips_webhooks.txt", NULL},
        {"wechatpay", senders_wechatpay, &senders_wechatpay_len, NULL, NULL},
};

static const struct senders_provider *senders_find(const char *provider)
{
	size_t i;

	for (i = 0; i < sizeof(senders_table) / sizeof(senders_table[0]); i++) {
		if (strcmp(senders_table[i].sp_name, provider) == 0) {
			return &senders_table[i];
		}
	}
	return NULL;
}

const char *senders_advice(const char *provider)
{
	const struct senders_provider *sp = senders_find(provider);

	if (sp != NULL && sp->sp_data != NULL) {
		return NULL;
	}
	if (sp != NULL) {
		return sp->sp_advice;
	}
	return "idemhook knows no address list this provider publishes: list its CIDRs in "
	       "allow_from yourself, or rely on the signature";
}

const char *senders_url(const char *provider)
{
	const struct senders_provider *sp = senders_find(provider);

	return sp != NULL ? sp->sp_url : NULL;
}

int senders_dir(const char *db_path, char *out, size_t out_size)
{
	const char *slash = db_path != NULL ? strrchr(db_path, '/') : NULL;
	int n;

	if (slash == NULL) {
		n = snprintf(out, out_size, "%s", SENDERS_DIR_NAME);
	} else {
		n = snprintf(out, out_size, "%.*s/%s", (int)(slash - db_path), db_path,
		             SENDERS_DIR_NAME);
	}
	return n < 0 || (size_t)n >= out_size ? -1 : 0;
}

void senders_list_finish(struct senders_list *l)
{
	size_t i;

	if (l->sl_cidrs != NULL) {
		for (i = 0; i < l->sl_n; i++) {
			free(l->sl_cidrs[i]);
		}
		free(l->sl_cidrs);
	}
	memset(l, 0, sizeof(*l));
}

/* "# key: value" into out when line is that comment. */
static void senders_meta(const char *line, size_t len, const char *key, char *out, size_t out_size)
{
	size_t klen = strlen(key);
	const char *p = line + 1;
	size_t n;

	while (p < line + len && (*p == ' ' || *p == '\t')) {
		p++;
	}
	if ((size_t)(line + len - p) <= klen || strncmp(p, key, klen) != 0) {
		return;
	}
	p += klen;
	while (p < line + len && (*p == ' ' || *p == '\t')) {
		p++;
	}
	n = (size_t)(line + len - p);
	if (n >= out_size) {
		n = out_size - 1;
	}
	memcpy(out, p, n);
	out[n] = '\0';
}

int senders_parse(const char *text, size_t len, struct senders_list *ret, char *err,
                  size_t err_size)
{
	const char *p = text;
	const char *end = text + len;
	unsigned line_no = 0;

	memset(ret, 0, sizeof(*ret));
	ret->sl_cidrs = calloc(SENDERS_ENTRIES_MAX + 1, sizeof(char *));
	if (ret->sl_cidrs == NULL) {
		snprintf(err, err_size, "out of memory");
		return -1;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl != NULL ? nl : end;
		const char *s = p;
		char *item;

		line_no++;
		p = nl != NULL ? nl + 1 : end;
		while (s < e && (*s == ' ' || *s == '\t')) {
			s++;
		}
		while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) {
			e--;
		}
		if (s == e) {
			continue;
		}
		if (*s == '#') {
			senders_meta(s, (size_t)(e - s), "date:", ret->sl_date,
			             sizeof(ret->sl_date));
			senders_meta(s, (size_t)(e - s), "source:", ret->sl_source,
			             sizeof(ret->sl_source));
			continue;
		}
		if (ret->sl_n >= SENDERS_ENTRIES_MAX) {
			snprintf(err, err_size, "more than %d entries", SENDERS_ENTRIES_MAX);
			goto fail;
		}
		item = strndup(s, (size_t)(e - s));
		if (item == NULL) {
			snprintf(err, err_size, "out of memory");
			goto fail;
		}
		ret->sl_cidrs[ret->sl_n++] = item;
		if (cidr_match(item, "127.0.0.1") < 0) {
			snprintf(err, err_size, "line %u is not an address or CIDR: \"%.64s\"",
			         line_no, item);
			goto fail;
		}
	}
	if (ret->sl_n == 0) {
		snprintf(err, err_size, "the list holds no address");
		goto fail;
	}
	return 0;
fail:
	senders_list_finish(ret);
	return -1;
}

/* The file at path, whole, malloc'd, into *ret (NUL-terminated). Returns 1
 * when read, 0 when it does not exist, -1 on error (err set). */
static int senders_read(const char *path, char **ret, size_t *ret_len, char *err, size_t err_size)
{
	FILE *f = fopen(path, "rb");
	char *data;
	size_t n;

	if (f == NULL) {
		if (errno == ENOENT) {
			return 0;
		}
		snprintf(err, err_size, "%s: %s", path, strerror(errno));
		return -1;
	}
	data = malloc(SENDERS_FILE_MAX + 1);
	if (data == NULL) {
		fclose(f);
		snprintf(err, err_size, "out of memory");
		return -1;
	}
	n = fread(data, 1, SENDERS_FILE_MAX + 1, f);
	if (ferror(f) || n > SENDERS_FILE_MAX) {
		snprintf(err, err_size, "%s: %s", path,
		         ferror(f) ? "cannot be read" : "larger than 256 KiB");
		fclose(f);
		free(data);
		return -1;
	}
	fclose(f);
	data[n] = '\0';
	*ret = data;
	*ret_len = n;
	return 1;
}

/* 1 when date is a "YYYY-MM-DD" day, which compare as strings. */
static int senders_is_day(const char *date)
{
	static const char shape[] = "dddd-dd-dd";
	size_t i;

	for (i = 0; shape[i] != '\0'; i++) {
		if (shape[i] == 'd' ? date[i] < '0' || date[i] > '9' : date[i] != shape[i]) {
			return 0;
		}
	}
	return date[i] == '\0';
}

/* ret holds the list an update wrote: it stays in force unless the list
 * shipped with this binary is newer by their date lines, as after an
 * upgrade that ships a list taken since the update ran. A provider that
 * moves its senders announces it ahead, and the shipped list follows; an
 * old update left in place would go on refusing the new addresses. A file
 * without a readable date is the operator's own and stays. Returns 0, or
 * -1 with err set (ret finished). */
static int senders_newest(const struct senders_provider *sp, struct senders_list *ret, char *err,
                          size_t err_size)
{
	struct senders_list shipped;

	if (!senders_is_day(ret->sl_date)) {
		return 0;
	}
	if (senders_parse(sp->sp_data, *sp->sp_len, &shipped, err, err_size) < 0) {
		senders_list_finish(ret);
		return -1;
	}
	if (!senders_is_day(shipped.sl_date) || strcmp(ret->sl_date, shipped.sl_date) >= 0) {
		senders_list_finish(&shipped);
		return 0;
	}
	log_notice("senders: %s is dated %s, older than the %s list shipped with idemhook "
	           "(%s): the shipped list is in force; idemhook ips update %s fetches the "
	           "current one",
	           ret->sl_path, ret->sl_date, sp->sp_name, shipped.sl_date, sp->sp_name);
	senders_list_finish(ret);
	*ret = shipped;
	ret->sl_shipped = 1;
	return 0;
}

int senders_load(const char *dir, const char *provider, struct senders_list *ret, char *err,
                 size_t err_size)
{
	const struct senders_provider *sp = senders_find(provider);
	const char *advice = senders_advice(provider);
	char path[512];
	char why[SENDERS_ERR_MAX];
	char *data = NULL;
	size_t len = 0;
	int rc;

	memset(ret, 0, sizeof(*ret));
	if (advice != NULL) {
		snprintf(err, err_size, "%s", advice);
		return -1;
	}
	if (dir != NULL &&
	    snprintf(path, sizeof(path), "%s/%s.txt", dir, provider) < (int)sizeof(path)) {
		rc = senders_read(path, &data, &len, err, err_size);
		if (rc < 0) {
			return -1;
		}
		if (rc == 1) {
			rc = senders_parse(data, len, ret, why, sizeof(why));
			free(data);
			if (rc < 0) {
				snprintf(err, err_size, "%s: %s", path, why);
				return -1;
			}
			snprintf(ret->sl_path, sizeof(ret->sl_path), "%s", path);
			return senders_newest(sp, ret, err, err_size);
		}
	}
	if (senders_parse(sp->sp_data, *sp->sp_len, ret, err, err_size) < 0) {
		return -1;
	}
	ret->sl_shipped = 1;
	return 0;
}
