/* prom_text.h: a strict reader of the Prometheus text exposition format
 * (0.0.4) for the tests: it checks the grammar (names, label syntax and
 * escapes, values) and the family rules (HELP and TYPE for every family
 * before its samples, samples of a family together, no series twice, no
 * label twice, counters named *_total and never negative, histograms
 * complete: cumulative buckets ending in +Inf equal to _count, with _sum),
 * and answers sums of samples by name and labels. */
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
#define PROM_PAIRS_MAX 16   /* labels of one sample */

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
	size_t pf_samples;
};

struct prom_text {
	struct prom_sample pt_samples[PROM_MAX_SAMPLES];
	size_t pt_n;
	struct prom_family pt_families[PROM_MAX_FAMILIES];
	size_t pt_n_families;
	char pt_error[1024];
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

/* Splits labels (name="value" pairs joined by ',', as read) into pairs,
 * minding quotes and escapes. Returns the count, or -1 past PROM_PAIRS_MAX. */
static inline int prom_pairs(const char *labels, char pairs[PROM_PAIRS_MAX][PROM_LABELS_MAX])
{
	const char *q = labels;
	int n = 0;

	while (*q != '\0') {
		const char *start = q;
		int quoted = 0;
		size_t len;

		while (*q != '\0' && (quoted || *q != ',')) {
			if (quoted && *q == '\\' && q[1] != '\0') {
				q++;
			} else if (*q == '"') {
				quoted = !quoted;
			}
			q++;
		}
		if (n == PROM_PAIRS_MAX) {
			return -1;
		}
		len = (size_t)(q - start);
		memcpy(pairs[n], start, len);
		pairs[n][len] = '\0';
		n++;
		if (*q == ',') {
			q++;
		}
	}
	return n;
}

static inline int prom_pair_cmp(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The labels sorted by name, without the one called skip (may be NULL), in
 * out: the identity of a series. Returns 0, or -1 when two labels share a
 * name or there are too many. */
static inline int prom_canon(const char *labels, const char *skip, char out[PROM_LABELS_MAX])
{
	char pairs[PROM_PAIRS_MAX][PROM_LABELS_MAX];
	size_t skip_len = skip != NULL ? strlen(skip) : 0;
	size_t len = 0;
	int n = prom_pairs(labels, pairs);
	int i;

	out[0] = '\0';
	if (n < 0) {
		return -1;
	}
	qsort(pairs, (size_t)n, sizeof(pairs[0]), prom_pair_cmp);
	for (i = 0; i < n; i++) {
		size_t pl = strlen(pairs[i]);
		size_t nl = strcspn(pairs[i], "=");

		if (i > 0 && strncmp(pairs[i], pairs[i - 1], nl + 1) == 0) {
			return -1;
		}
		if (skip != NULL && nl == skip_len && strncmp(pairs[i], skip, nl) == 0) {
			continue;
		}
		if (len + pl + 2 >= PROM_LABELS_MAX) {
			return -1;
		}
		if (len > 0) {
			out[len++] = ',';
		}
		memcpy(out + len, pairs[i], pl + 1);
		len += pl;
	}
	return 0;
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
	{
		char canon[PROM_LABELS_MAX];
		size_t i;

		if (prom_canon(sm->ps_labels, NULL, canon) < 0) {
			return prom_fail(p, line, "a label name twice, or too many labels");
		}
		/* The same name and labels in any order is the same series. */
		for (i = 0; i < p->pt_n; i++) {
			char other[PROM_LABELS_MAX];

			if (strcmp(p->pt_samples[i].ps_name, sm->ps_name) == 0 &&
			    prom_canon(p->pt_samples[i].ps_labels, NULL, other) == 0 &&
			    strcmp(other, canon) == 0) {
				return prom_fail(p, line, "a series twice");
			}
		}
	}
	f->pf_samples++;
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
	{
		size_t i;

		for (i = 0; i < p->pt_n_families; i++) {
			const struct prom_family *f = &p->pt_families[i];
			size_t nl = strlen(f->pf_name);

			if (f->pf_type[0] == '\0' || !f->pf_help) {
				snprintf(p->pt_error, sizeof(p->pt_error), "%s: HELP or TYPE missing",
				         f->pf_name);
				return -1;
			}
			if (strcmp(f->pf_type, "counter") == 0 &&
			    (nl < 6 || strcmp(f->pf_name + nl - 6, "_total") != 0)) {
				snprintf(p->pt_error, sizeof(p->pt_error),
				         "%s: a counter whose name does not end in _total", f->pf_name);
				return -1;
			}
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

/* The sample called name whose labels are canon (sorted, as prom_canon), or
 * NULL. */
static inline const struct prom_sample *prom_find(const struct prom_text *p, const char *name,
                                                  const char *canon)
{
	size_t i;

	for (i = 0; i < p->pt_n; i++) {
		char c[PROM_LABELS_MAX];

		if (strcmp(p->pt_samples[i].ps_name, name) == 0 &&
		    prom_canon(p->pt_samples[i].ps_labels, NULL, c) == 0 && strcmp(c, canon) == 0) {
			return &p->pt_samples[i];
		}
	}
	return NULL;
}

/* The value of label name in labels (quotes and escapes kept), or -1. */
static inline int prom_label(const char *labels, const char *name, char *out, size_t size)
{
	char pairs[PROM_PAIRS_MAX][PROM_LABELS_MAX];
	size_t nl = strlen(name);
	int n = prom_pairs(labels, pairs);
	int i;

	for (i = 0; i < n; i++) {
		size_t vl;

		if (strncmp(pairs[i], name, nl) != 0 || pairs[i][nl] != '=') {
			continue;
		}
		vl = strlen(pairs[i] + nl + 2);
		if (vl == 0 || vl > size) {
			return -1;
		}
		memcpy(out, pairs[i] + nl + 2, vl - 1); /* without the quotes */
		out[vl - 1] = '\0';
		return 0;
	}
	return -1;
}

/* Checks every histogram, per label set: every bucket has le, the le bounds
 * rise and the counts never fall, the last bucket is +Inf, +Inf equals
 * _count, _sum is there, and no _count or _sum stands without buckets.
 * Returns 0 or -1 with pt_error. */
static inline int prom_check_histograms(struct prom_text *p)
{
	size_t i;
	size_t j;

	for (i = 0; i < p->pt_n; i++) {
		const struct prom_sample *s = &p->pt_samples[i];
		const struct prom_family *f = prom_family_find(p, s->ps_family);
		char base[PROM_LABELS_MAX];
		char name[PROM_NAME_MAX + 8];
		const struct prom_sample *count;
		double prev_le = -INFINITY;
		double prev = 0;
		double inf = -1;
		size_t nl = strlen(s->ps_name);
		size_t n_buckets = 0;

		if (f == NULL || strcmp(f->pf_type, "histogram") != 0) {
			continue;
		}
		if (prom_canon(s->ps_labels, "le", base) < 0) {
			return prom_fail(p, 0, "bad labels in a histogram");
		}
		if (nl > 6 && (strcmp(s->ps_name + nl - 4, "_sum") == 0 ||
		               strcmp(s->ps_name + nl - 6, "_count") == 0)) {
			/* checked from its buckets below; here only that they exist */
			snprintf(name, sizeof(name), "%s_bucket", f->pf_name);
			for (j = 0; j < p->pt_n; j++) {
				char c[PROM_LABELS_MAX];

				if (strcmp(p->pt_samples[j].ps_name, name) == 0 &&
				    prom_canon(p->pt_samples[j].ps_labels, "le", c) == 0 &&
				    strcmp(c, base) == 0) {
					break;
				}
			}
			if (j == p->pt_n) {
				snprintf(p->pt_error, sizeof(p->pt_error), "%s{%s}: no buckets", s->ps_name,
				         base);
				return -1;
			}
			continue;
		}
		/* the first bucket of a label set walks all of them */
		for (j = 0; j < i; j++) {
			char c[PROM_LABELS_MAX];

			if (strcmp(p->pt_samples[j].ps_name, s->ps_name) == 0 &&
			    prom_canon(p->pt_samples[j].ps_labels, "le", c) == 0 && strcmp(c, base) == 0) {
				break;
			}
		}
		if (j < i) {
			continue;
		}
		for (j = i; j < p->pt_n; j++) {
			const struct prom_sample *b = &p->pt_samples[j];
			char c[PROM_LABELS_MAX];
			char le[32];
			double lev;

			if (strcmp(b->ps_name, s->ps_name) != 0 || prom_canon(b->ps_labels, "le", c) < 0 ||
			    strcmp(c, base) != 0) {
				continue;
			}
			if (prom_label(b->ps_labels, "le", le, sizeof(le)) < 0 ||
			    prom_parse_value(le, &lev) < 0) {
				snprintf(p->pt_error, sizeof(p->pt_error), "%s{%s}: a bucket without a valid le",
				         b->ps_name, base);
				return -1;
			}
			if (!(lev > prev_le) || inf >= 0) {
				snprintf(p->pt_error, sizeof(p->pt_error),
				         "%s{%s}: le bounds do not rise to a last +Inf", b->ps_name, base);
				return -1;
			}
			if (b->ps_value < prev || b->ps_value != floor(b->ps_value)) {
				snprintf(p->pt_error, sizeof(p->pt_error),
				         "%s{%s}: buckets are not cumulative counts (le=%s: %g after %g)",
				         b->ps_name, base, le, b->ps_value, prev);
				return -1;
			}
			prev = b->ps_value;
			prev_le = lev;
			n_buckets++;
			if (isinf(lev)) {
				inf = b->ps_value;
			}
		}
		if (inf < 0) {
			snprintf(p->pt_error, sizeof(p->pt_error), "%s{%s}: no +Inf bucket", s->ps_name,
			         base);
			return -1;
		}
		snprintf(name, sizeof(name), "%s_count", f->pf_name);
		count = prom_find(p, name, base);
		if (count == NULL || count->ps_value != inf) {
			snprintf(p->pt_error, sizeof(p->pt_error),
			         "%s{%s}: +Inf bucket %g, _count %g", f->pf_name, base, inf,
			         count != NULL ? count->ps_value : -1.0);
			return -1;
		}
		snprintf(name, sizeof(name), "%s_sum", f->pf_name);
		if (prom_find(p, name, base) == NULL) {
			snprintf(p->pt_error, sizeof(p->pt_error), "%s{%s}: no _sum", f->pf_name, base);
			return -1;
		}
	}
	return 0;
}

#endif
