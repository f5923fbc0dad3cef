/* admin.c: the admin listener's routes: /healthz, /readyz and /metrics;
 * /console and below go to the console. */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "buf.h"
#include "env.h"
#include "health.h"
#include "metrics.h"
#include "stats.h"

#define ADMIN_METRICS_MAX (4 * 1024 * 1024) /* bytes of one /metrics answer */
#define ADMIN_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void admin_text(struct reply *ret, int status, const char *text)
{
	reply_set(ret, status, "text/plain; charset=utf-8", text, strlen(text));
}

static void admin_metrics(const struct env *env, struct reply *ret)
{
	struct buf b;
	size_t len;
	char *body;

	buf_init(&b, ADMIN_METRICS_MAX);
	if (metrics_render(&b) < 0 ||
	    (env->env_store != NULL && stats_render_metrics(&b, env->env_store) < 0)) {
		goto fail;
	}
	body = buf_take(&b, &len);
	if (body == NULL || reply_set_take(ret, 200, ADMIN_METRICS_TYPE, body, len) < 0) {
		goto fail;
	}
	return;
fail:
	buf_finish(&b);
	admin_text(ret, 500, "metrics unavailable\n");
}

/* The health thread's last answer: never waits for the database. */
static void admin_readyz(const struct env *env, struct reply *ret)
{
	struct health *h = env_health(env);
	char reason[HEALTH_REASON_MAX];
	char text[HEALTH_REASON_MAX + 16];

	if (health_ready(h, reason, sizeof(reason))) {
		admin_text(ret, 200, "ready\n");
		return;
	}
	snprintf(text, sizeof(text), "not ready: %s\n", reason);
	admin_text(ret, 503, text);
	reply_add_header(ret, "Retry-After", "1");
}

void admin_route(void *arg, const struct http_request *req, struct reply *ret)
{
	const struct admin *adm = arg;
	const struct env *env = adm->adm_env;
	int get = strcmp(req->hr_method, "GET") == 0 || strcmp(req->hr_method, "HEAD") == 0;

	if (adm->adm_console != NULL && strncmp(req->hr_path, "/console", 8) == 0 &&
	    (req->hr_path[8] == '\0' || req->hr_path[8] == '/')) {
		adm->adm_console(adm->adm_console_arg, req, ret);
		return;
	}
	if (strcmp(req->hr_path, "/healthz") != 0 && strcmp(req->hr_path, "/readyz") != 0 &&
	    strcmp(req->hr_path, "/metrics") != 0) {
		admin_text(ret, 404, "not found\n");
		return;
	}
	if (!get) {
		admin_text(ret, 405, "method not allowed\n");
		reply_add_header(ret, "Allow", "GET, HEAD");
		return;
	}
	if (strcmp(req->hr_path, "/healthz") == 0) {
		/* The process answers: nothing more (readiness is /readyz). */
		admin_text(ret, 200, "ok\n");
	} else if (strcmp(req->hr_path, "/readyz") == 0) {
		admin_readyz(env, ret);
	} else {
		admin_metrics(env, ret);
	}
}
