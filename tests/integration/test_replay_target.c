/* test_replay_target.c: `replay --to` sends each capture to the --to
 * address and nowhere else: a capture whose request target is not a path
 * ("@127.0.0.1:OTHER/hooks/stripe", which concatenated after the base URL
 * makes libcurl connect to OTHER) is not sent, and is counted failed, never
 * new. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "fixtures.h"
#include "harness.h"
#include "peer.h"

static char t_found[2][1024];
static size_t t_n_found;

static int t_collect(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	size_t len = strlen(path);

	(void)sb;
	(void)ftw;
	if (type == FTW_F && len > 4 && strcmp(path + len - 4, ".cap") == 0 && t_n_found < 2) {
		snprintf(t_found[t_n_found++], sizeof(t_found[0]), "%s", path);
	}
	return 0;
}

/* Rewrites the request line of the capture at path to target. */
static void t_retarget(const char *path, const char *target)
{
	const char *line = "POST /hooks/stripe HTTP/1.1\r\n";
	char *text = hn_read_file(path);
	char *at;
	FILE *f;

	assert_non_null(text);
	at = strstr(text, line);
	assert_non_null(at);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(text, 1, (size_t)(at - text), f);
	fprintf(f, "POST %s HTTP/1.1\r\n", target);
	fputs(at + strlen(line), f);
	assert_int_equal(fclose(f), 0);
	free(text);
}

static int64_t t_field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	assert_true(cJSON_IsNumber(v));
	return (int64_t)v->valuedouble;
}

static void
test_a_capture_whose_target_names_another_host_is_sent_nowhere_and_not_counted(void **state)
{
	struct daemon origin;
	struct daemon target;
	struct peer *other;
	char spool[600];
	char evil[128];
	char *body;
	char *out = NULL;
	const char *args[] = {"replay", "--json", "--to", NULL, spool, NULL};
	const cJSON *reasons;
	cJSON *s;

	(void)state;
	other = peer_create();
	assert_non_null(other);
	/* Two callbacks captured by the origin. */
	assert_int_equal(daemon_init(&origin, FX_STRIPE_INI), 0);
	snprintf(spool, sizeof(spool), "%s/spool", origin.dm_dir);
	fx_append_config(&origin, "\n[capture]\nmode = all\ndir = %s\n", spool);
	assert_int_equal(daemon_start(&origin), 0);
	body = hn_stripe_event("evt_rt_good", "customer.created",
	                       "{\"id\":\"cus_rt_1\",\"object\":\"customer\"}");
	assert_int_equal(fx_stripe_send(&origin, body, NULL), 200);
	free(body);
	body = hn_stripe_event("evt_rt_evil", "customer.created",
	                       "{\"id\":\"cus_rt_2\",\"object\":\"customer\"}");
	assert_int_equal(fx_stripe_send(&origin, body, NULL), 200);
	free(body);
	assert_int_equal(daemon_term(&origin, 20), 0);
	assert_int_equal(nftw(spool, t_collect, 8, FTW_PHYS), 0);
	assert_int_equal(t_n_found, 2);
	/* One of them now says to go to the other listener. */
	snprintf(evil, sizeof(evil), "@%s/hooks/stripe", peer_base(other) + strlen("http://"));
	{
		char *text = hn_read_file(t_found[0]);

		assert_non_null(text);
		t_retarget(t_found[strstr(text, "evt_rt_evil") != NULL ? 0 : 1], evil);
		free(text);
	}

	fx_daemon_start(&target, FX_STRIPE_INI);
	args[3] = target.dm_base;
	assert_int_not_equal(daemon_cli(&target, 1, args, &out), 0);
	assert_non_null(out);
	s = cJSON_Parse(out);
	if (s == NULL) {
		fail_msg("replay printed no JSON summary: \"%s\"", out);
	}
	assert_int_equal(t_field(s, "new"), 1);
	assert_int_equal(t_field(s, "failed"), 1);
	reasons = cJSON_GetObjectItemCaseSensitive(s, "failed_reasons");
	assert_int_equal(t_field(reasons, "bad_target"), 1);
	cJSON_Delete(s);
	free(out);
	assert_int_equal(daemon_log_wait(&target, "not an origin-form path", 0), 0);
	/* The other listener heard nothing; the target took only the good one. */
	assert_int_equal(peer_count(other), 0);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records"), 1);
	assert_int_equal(hn_db_int(target.dm_db, "SELECT COUNT(*) FROM idempotency_records "
	                                         "WHERE idem_key = 'evt_rt_good'"),
	                 1);
	assert_int_equal(daemon_term(&target, 20), 0);
	daemon_finish(&target);
	daemon_finish(&origin);
	peer_destroy(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_a_capture_whose_target_names_another_host_is_sent_nowhere_and_not_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
