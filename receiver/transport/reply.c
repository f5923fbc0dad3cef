/* reply.c: an HTTP reply as the store keeps and replays it. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "reply.h"

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
	struct buf b;

	buf_init(&b, 0);
	if (r->reply_headers != NULL && buf_puts(&b, r->reply_headers) < 0) {
		goto fail;
	}
	if (buf_printf(&b, "%s: %s\n", name, value) < 0) {
		goto fail;
	}
	free(r->reply_headers);
	r->reply_headers = buf_take(&b, NULL);
	return r->reply_headers != NULL ? 0 : -1;
fail:
	buf_finish(&b);
	return -1;
}

void reply_each_header(const struct reply *r, void (*fn)(void *arg, const char *name, const char *value),
		       void *arg)
{
	const char *line = r->reply_headers;

	while (line != NULL && *line != '\0') {
		const char *nl = strchr(line, '\n');
		const char *colon = strchr(line, ':');
		size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
		char *copy;

		if (colon != NULL && colon < line + len) {
			copy = strndup(line, len);
			if (copy != NULL) {
				char *value = copy + (colon - line) + 1;

				copy[colon - line] = '\0';
				while (*value == ' ') {
					value++;
				}
				fn(arg, copy, value);
				free(copy);
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
