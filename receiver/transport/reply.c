/* reply.c: an HTTP reply as the store keeps and replays it. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "reply.h"

#define REPLY_HEADER_LOCAL 256 /* header lines up to this long are split on the stack */

void reply_init(struct reply *r)
{
	memset(r, 0, sizeof(*r));
}

void reply_finish(struct reply *r)
{
	free(r->reply_content_type);
	free(r->reply_headers);
	free(r->reply_body);
	reply_init(r);
}

int reply_set_take(struct reply *r, int status, const char *content_type, char *body, size_t len)
{
	char *ct = NULL;

	if (content_type != NULL) {
		ct = strdup(content_type);
		if (ct == NULL) {
			return -1;
		}
	}
	free(r->reply_content_type);
	free(r->reply_body);
	r->reply_status = status;
	r->reply_content_type = ct;
	r->reply_body = body;
	r->reply_body_len = body != NULL ? len : 0;
	return 0;
}

int reply_set(struct reply *r, int status, const char *content_type, const void *body, size_t len)
{
	char *copy = NULL;

	if (body != NULL) {
		copy = malloc(len + 1);
		if (copy == NULL) {
			return -1;
		}
		memcpy(copy, body, len);
		copy[len] = '\0';
	}
	if (reply_set_take(r, status, content_type, copy, len) < 0) {
		free(copy);
		return -1;
	}
	return 0;
}

int reply_add_header(struct reply *r, const char *name, const char *value)
{
	size_t old = r->reply_headers != NULL ? strlen(r->reply_headers) : 0;
	size_t nlen = strlen(name);
	size_t vlen = strlen(value);
	char *p = malloc(old + nlen + vlen + 4);

	/* "<old><name>: <value>\n", in one allocation. */
	if (p == NULL) {
		return -1;
	}
	if (old > 0) {
		memcpy(p, r->reply_headers, old);
	}
	memcpy(p + old, name, nlen);
	memcpy(p + old + nlen, ": ", 2);
	memcpy(p + old + nlen + 2, value, vlen);
	memcpy(p + old + nlen + 2 + vlen, "\n", 2);
	free(r->reply_headers);
	r->reply_headers = p;
	return 0;
}

void reply_each_header(const struct reply *r, void (*fn)(void *arg, const char *name, const char *value),
		       void *arg)
{
	const char *line = r->reply_headers;

	while (line != NULL && *line != '\0') {
		const char *nl = strchr(line, '\n');
		const char *colon = strchr(line, ':');
		size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
		char local[REPLY_HEADER_LOCAL];
		char *copy;

		if (colon != NULL && colon < line + len) {
			/* A line of usual length is split on the stack. */
			copy = len < sizeof(local) ? local : malloc(len + 1);
			if (copy != NULL) {
				char *value = copy + (colon - line) + 1;

				memcpy(copy, line, len);
				copy[len] = '\0';
				copy[colon - line] = '\0';
				while (*value == ' ') {
					value++;
				}
				fn(arg, copy, value);
				if (copy != local) {
					free(copy);
				}
			}
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
}

int reply_copy(struct reply *dst, const struct reply *src)
{
	struct reply tmp;

	reply_init(&tmp);
	if (reply_set(&tmp, src->reply_status, src->reply_content_type, src->reply_body, src->reply_body_len) < 0) {
		goto fail;
	}
	if (src->reply_headers != NULL) {
		tmp.reply_headers = strdup(src->reply_headers);
		if (tmp.reply_headers == NULL) {
			goto fail;
		}
	}
	reply_finish(dst);
	*dst = tmp;
	return 0;
fail:
	reply_finish(&tmp);
	return -1;
}

int reply_problem(struct reply *r, int status, const char *slug, const char *title, const char *detail)
{
	struct buf b;
	char *body;
	size_t len;

	buf_init(&b, 0);
	if (buf_printf(&b, "{\"type\":\"urn:idemhook:problem:%s\",\"title\":", slug) < 0 ||
	    buf_json_string(&b, title) < 0 || buf_printf(&b, ",\"status\":%d", status) < 0) {
		goto fail;
	}
	if (detail != NULL && (buf_puts(&b, ",\"detail\":") < 0 || buf_json_string(&b, detail) < 0)) {
		goto fail;
	}
	if (buf_puts(&b, "}\n") < 0) {
		goto fail;
	}
	body = buf_take(&b, &len);
	if (body == NULL || reply_set_take(r, status, "application/problem+json", body, len) < 0) {
		free(body);
		return -1;
	}
	return 0;
fail:
	buf_finish(&b);
	return -1;
}
