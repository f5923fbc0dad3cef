/* prom_text.h: a strict reader of the Prometheus text exposition format
 * (0.0.4) for the tests: it checks the grammar and the family rules and
 * answers sums of samples by name and labels. */
#ifndef IDEMHOOK_TEST_PROM_TEXT_H
#define IDEMHOOK_TEST_PROM_TEXT_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROM_MAX_SAMPLES 4096
#define PROM_MAX_FAMILIES 256
#define PROM_NAME_MAX 128
#define PROM_LABELS_MAX 512 /* bytes of one sample's normalized labels */

struct prom_sample {
	char ps_name[PROM_NAME_MAX];
	char ps_family[PROM_NAME_MAX];
	char ps_labels[PROM_LABELS_MAX]; /* name="value" pairs joined by ',', as read */
	double ps_value;
};

struct prom_family {
	char pf_name[PROM_NAME_MAX];
	char pf_type[16];
	int pf_help;
	int pf_closed; /* samples of another family came after this one's */
};

struct prom_text {
	struct prom_sample pt_samples[PROM_MAX_SAMPLES];
	size_t pt_n;
	struct prom_family pt_families[PROM_MAX_FAMILIES];
	size_t pt_n_families;
	char pt_error[256];
};

static inline int prom_fail(struct prom_text *p, int line, const char *what)
{
	snprintf(p->pt_error, sizeof(p->pt_error), "line %d: %s", line, what);
	return -1;
}

static inline int prom_is_name(const char *s, size_t n, int colon)
{
	size_t i;

	if (n == 0 || n >= PROM_NAME_MAX) {
		return 0;
	}
	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (!(isalpha(c) || c == '_' || (colon && c == ':') || (i > 0 && isdigit(c)))) {
			return 0;
		}
	}
	return 1;
}

static inline struct prom_family *prom_family_find(struct prom_text *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->pt_n_families; i++) {
		if (strcmp(p->pt_families[i].pf_name, name) == 0) {
			return &p->pt_families[i];
		}
	}
	return NULL;
}

static inline struct prom_family *prom_family_add(struct prom_text *p, const char *name)
{
	struct prom_family *f = prom_family_find(p, name);

	if (f != NULL || p->pt_n_families == PROM_MAX_FAMILIES) {
		return f;
	}
	f = &p->pt_families[p->pt_n_families++];
	memset(f, 0, sizeof(*f));
	memcpy(f->pf_name, name, strnlen(name, PROM_NAME_MAX - 1));
	return f;
}

/* The family a sample name belongs to: histogram suffixes are stripped when
 * the stripped name has TYPE histogram. */
static inline void prom_sample_family(struct prom_text *p, const char *name,
                                      char out[PROM_NAME_MAX])
{
	static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
	size_t n = strlen(name);
	size_t i;

	for (i = 0; i < 3; i++) {
		size_t sl = strlen(suffixes[i]);
		struct prom_family *f;

		if (n > sl && strcmp(name + n - sl, suffixes[i]) == 0) {
			memset(out, 0, PROM_NAME_MAX);
			memcpy(out, name, n - sl < PROM_NAME_MAX ? n - sl : PROM_NAME_MAX - 1);
			f = prom_family_find(p, out);
			if (f != NULL && (strcmp(f->pf_type, "histogram") == 0 ||
			                  strcmp(f->pf_type, "summary") == 0)) {
				return;
			}
		}
	}
	memset(out, 0, PROM_NAME_MAX);
	memcpy(out, name, n < PROM_NAME_MAX ? n : PROM_NAME_MAX - 1);
}

static inline int prom_parse_value(const char *s, double *ret)
{
	char *end = NULL;

	if (strcmp(s, "+Inf") == 0) {
		*ret = INFINITY;
		return 0;
	}
	if (strcmp(s, "-Inf") == 0) {
		*ret = -INFINITY;
		return 0;
	}
	if (strcmp(s, "NaN") == 0) {
		*ret = NAN;
		return 0;
	}
	*ret = strtod(s, &end);
	return end != s && *end == '\0' ? 0 : -1;
}

/* Parses one sample line into p. */
static inline int prom_sample_line(struct prom_text *p, int line, const char *s,
                                   const char **last_family)
{
	struct prom_sample *sm;
	struct prom_family *f;
	const char *q = s;
	size_t n = 0;
	char value[64];
	size_t lb = 0;

	if (p->pt_n == PROM_MAX_SAMPLES) {
		return prom_fail(p, line, "too many samples");
	}
	sm = &p->pt_samples[p->pt_n];
	memset(sm, 0, sizeof(*sm));
	while (q[n] != '\0' && q[n] != '{' && q[n] != ' ') {
		n++;
	}
	if (!prom_is_name(q, n, 1)) {
		return prom_fail(p, line, "bad metric name");
	}
	memcpy(sm->ps_name, q, n);
	q += n;
	if (*q == '{') {
		q++;
		while (*q != '}') {
			size_t ln = 0;

			while (q[ln] != '\0' && q[ln] != '=') {
				ln++;
			}
			if (!prom_is_name(q, ln, 0) || q[ln] != '=' || q[ln + 1] != '"') {
				return prom_fail(p, line, "bad label name or missing =\"");
			}
			if (lb + ln + 4 >= PROM_LABELS_MAX) {
				return prom_fail(p, line, "labels too long");
			}
			if (lb > 0) {
				sm->ps_labels[lb++] = ',';
			}
			memcpy(sm->ps_labels + lb, q, ln + 2);
			lb += ln + 2;
			q += ln + 2;
			while (*q != '"') {
				if (*q == '\0' || *q == '\n') {
					return prom_fail(p, line, "unterminated label value");
				}
				if (*q == '\\') {
					if (q[1] != '\\' && q[1] != '"' && q[1] != 'n') {
						return prom_fail(p, line,
						                 "bad escape in label value");
					}
					if (lb + 3 >= PROM_LABELS_MAX) {
						return prom_fail(p, line, "labels too long");
					}
					sm->ps_labels[lb++] = *q++;
				}
				if (lb + 3 >= PROM_LABELS_MAX) {
					return prom_fail(p, line, "labels too long");
				}
				sm->ps_labels[lb++] = *q++;
			}
			sm->ps_labels[lb++] = '"';
			q++;
			if (*q == ',') {
				q++;
			} else if (*q != '}') {
				return prom_fail(p, line, "expected , or } after a label");
			}
		}
		q++;
	}
	if (*q != ' ') {
		return prom_fail(p, line, "expected a space before the value");
	}
	q++;
	n = 0;
	while (q[n] != '\0' && q[n] != ' ') {
		n++;
	}
	if (n == 0 || n >= sizeof(value)) {
		return prom_fail(p, line, "bad value");
	}
	memcpy(value, q, n);
	value[n] = '\0';
	if (prom_parse_value(value, &sm->ps_value) < 0) {
		return prom_fail(p, line, "value is not a float");
	}
	q += n;
	if (*q == ' ') {
		char *end = NULL;

		strtoll(q + 1, &end, 10);
		if (end == q + 1 || *end != '\0') {
			return prom_fail(p, line, "bad timestamp");
		}
	}
	prom_sample_family(p, sm->ps_name, sm->ps_family);
	f = prom_family_find(p, sm->ps_family);
	if (f == NULL || f->pf_type[0] == '\0') {
		return prom_fail(p, line, "sample before its # TYPE line");
	}
	if (f->pf_closed) {
		return prom_fail(p, line, "samples of one family are not grouped together");
	}
	if (*last_family != NULL && strcmp(*last_family, f->pf_name) != 0) {
		struct prom_family *prev = prom_family_find(p, *last_family);

		if (prev != NULL) {
			prev->pf_closed = 1;
		}
	}
	*last_family = f->pf_name;
	if (strcmp(f->pf_type, "histogram") == 0 && strcmp(sm->ps_name, f->pf_name) == 0) {
		return prom_fail(p, line, "a histogram sample without _bucket/_sum/_count");
	}
	if (strcmp(f->pf_type, "counter") == 0 && !(sm->ps_value >= 0)) {
		return prom_fail(p, line, "a negative counter");
	}
	p->pt_n++;
	return 0;
}

/* Parses and checks text (NUL-terminated). Returns 0, or -1 with pt_error. */
static inline int prom_parse(struct prom_text *p, const char *text)
{
	const char *last_family = NULL;
	const char *s = text;
	char linebuf[2048];
	int line = 0;

	memset(p, 0, sizeof(*p));
	if (text[0] != '\0' && text[strlen(text) - 1] != '\n') {
		return prom_fail(p, 0, "the text does not end with a line feed");
	}
	while (*s != '\0') {
		const char *nl = strchr(s, '\n');
		size_t len = (size_t)(nl - s);

		line++;
		if (len >= sizeof(linebuf)) {
			return prom_fail(p, line, "line too long");
		}
		memcpy(linebuf, s, len);
		linebuf[len] = '\0';
		s = nl + 1;
		if (len == 0) {
			continue;
		}
		if (strncmp(linebuf, "# HELP ", 7) == 0 || strncmp(linebuf, "# TYPE ", 7) == 0) {
			char *name = linebuf + 7;
			char *sp = strchr(name, ' ');
			struct prom_family *f;

			if (sp == NULL || !prom_is_name(name, (size_t)(sp - name), 1)) {
				return prom_fail(p, line, "bad HELP/TYPE line");
			}
			*sp = '\0';
			f = prom_family_add(p, name);
			if (f == NULL) {
				return prom_fail(p, line, "too many families");
			}
			if (f->pf_closed || (f->pf_type[0] != '\0' && last_family != NULL &&
			                     strcmp(last_family, f->pf_name) == 0)) {
				return prom_fail(p, line, "HELP/TYPE after the family's samples");
			}
			if (linebuf[2] == 'H') {
				if (f->pf_help) {
					return prom_fail(p, line, "a second HELP line");
				}
				f->pf_help = 1;
			} else {
				const char *t = sp + 1;

				if (f->pf_type[0] != '\0') {
					return prom_fail(p, line, "a second TYPE line");
				}
				if (strcmp(t, "counter") != 0 && strcmp(t, "gauge") != 0 &&
				    strcmp(t, "histogram") != 0 && strcmp(t, "summary") != 0 &&
				    strcmp(t, "untyped") != 0) {
					return prom_fail(p, line, "unknown TYPE");
				}
				snprintf(f->pf_type, sizeof(f->pf_type), "%s", t);
			}
			continue;
		}
		if (linebuf[0] == '#') {
			continue;
		}
		if (prom_sample_line(p, line, linebuf, &last_family) < 0) {
			return -1;
		}
	}
	return 0;
}

/* 1 when every name="value" pair of filter (comma-separated, may be "")
 * appears among labels. */
static inline int prom_labels_match(const char *labels, const char *filter)
{
	const char *tok = filter;
	size_t ll = strlen(labels);

	while (*tok != '\0') {
		const char *comma = strchr(tok, ',');
		size_t tl = comma != NULL ? (size_t)(comma - tok) : strlen(tok);
		const char *hit;
		int ok = 0;

		for (hit = labels; *hit != '\0'; hit++) {
			size_t off = (size_t)(hit - labels);

			if (strncmp(hit, tok, tl) == 0 && (off == 0 || labels[off - 1] == ',') &&
			    (off + tl == ll || labels[off + tl] == ',')) {
				ok = 1;
				break;
			}
		}
		if (!ok) {
			return 0;
		}
		tok += tl;
		if (*tok == ',') {
			tok++;
		}
	}
	return 1;
}

/* The sum of the samples called name whose labels include filter. */
static inline double prom_sum(const struct prom_text *p, const char *name, const char *filter)
{
	double sum = 0;
	size_t i;

	for (i = 0; i < p->pt_n; i++) {
		if (strcmp(p->pt_samples[i].ps_name, name) == 0 &&
		    prom_labels_match(p->pt_samples[i].ps_labels, filter)) {
			sum += p->pt_samples[i].ps_value;
		}
	}
	return sum;
}

/* How many samples are called name. */
static inline size_t prom_count(const struct prom_text *p, const char *name)
{
	size_t n = 0;
	size_t i;

	for (i = 0; i < p->pt_n; i++) {
		n += strcmp(p->pt_samples[i].ps_name, name) == 0;
	}
	return n;
}

/* The family's TYPE, or NULL. */
static inline const char *prom_type(struct prom_text *p, const char *family)
{
	struct prom_family *f = prom_family_find(p, family);

	return f != NULL && f->pf_type[0] != '\0' ? f->pf_type : NULL;
}

/* Checks every histogram: buckets non-decreasing in le order, a +Inf bucket
 * equal to _count, for each label set. Returns 0 or -1 with pt_error. */
static inline int prom_check_histograms(struct prom_text *p)
{
	size_t i;
	size_t j;

	for (i = 0; i < p->pt_n; i++) {
		const struct prom_sample *b = &p->pt_samples[i];
		const struct prom_family *f = prom_family_find(p, b->ps_family);
		size_t nl = strlen(b->ps_name);
		double prev = -1;
		double prev_le = -INFINITY;
		int saw_inf = 0;

		if (f == NULL || strcmp(f->pf_type, "histogram") != 0 || nl < 7 ||
		    strcmp(b->ps_name + nl - 7, "_bucket") != 0) {
			continue;
		}
		/* Start of a label set: the first bucket whose base labels are new. */
		if (strstr(b->ps_labels, "le=\"") == NULL) {
			return prom_fail(p, 0, "a bucket without le");
		}
		for (j = i; j < p->pt_n && strcmp(p->pt_samples[j].ps_name, b->ps_name) == 0; j++) {
			const char *le = strstr(p->pt_samples[j].ps_labels, "le=\"");
			double lev;
			char lebuf[32];
			size_t k = 0;

			le += 4;
			while (le[k] != '"' && k + 1 < sizeof(lebuf)) {
				lebuf[k] = le[k];
				k++;
			}
			lebuf[k] = '\0';
			if (prom_parse_value(lebuf, &lev) < 0) {
				return prom_fail(p, 0, "le is not a float");
			}
			if (lev <= prev_le) {
				/* a new label set starts */
				break;
			}
			if (p->pt_samples[j].ps_value < prev) {
				return prom_fail(p, 0, "buckets are not cumulative");
			}
			prev = p->pt_samples[j].ps_value;
			prev_le = lev;
			if (isinf(lev)) {
				saw_inf = 1;
			}
		}
		if (!saw_inf) {
			return prom_fail(p, 0, "a histogram without a +Inf bucket");
		}
		i = j - 1;
	}
	return 0;
}

#endif
