/* test_tls_reload.c: native HTTPS, a certificate rotated by SIGHUP
 * without refusing a single connection, and the demo payment's callback to
 * a native HTTPS listener. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "harness.h"

static size_t discard(char *p, size_t s, size_t n, void *arg)
{
	return s * n;
}

/* GET /healthz over https trusting only ca_path; the status, or 0 when the
 * TLS handshake or connection failed. */
static long https_get(struct daemon *d, const char *ca_path)
{
	char url[128];
	CURL *c = curl_easy_init();
	long status = 0;

	snprintf(url, sizeof(url), "https://127.0.0.1:%u/healthz", d->dm_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca_path);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	}
	curl_easy_cleanup(c);
	return status;
}

/* A self-signed certificate into DIR/cert.pem + key.pem, with a copy of the
 * certificate (the CA to trust) at DIR/<ca_name>. */
static void make_cert(struct daemon *d, const char *ca_name)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.new -out %s/cert.new -days 1 "
		 "-subj /CN=127.0.0.1 >/dev/null 2>&1 && cp %s/cert.new %s/%s && mv %s/key.new %s/key.pem && "
		 "mv %s/cert.new %s/cert.pem",
		 d->dm_dir, d->dm_dir, d->dm_dir, d->dm_dir, ca_name, d->dm_dir, d->dm_dir, d->dm_dir, d->dm_dir);
	assert_int_equal(system(cmd), 0);
}

static int log_count(struct daemon *d, const char *needle)
{
	FILE *f = fopen(d->dm_log, "r");
	char line[4096];
	int n = 0;

	if (f == NULL) {
		return 0;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, needle) != NULL) {
			n++;
		}
	}
	fclose(f);
	return n;
}

static void wait_log(struct daemon *d, const char *needle, int count)
{
	struct timespec pause = {0, 20 * 1000 * 1000};
	int i;

	for (i = 0; i < 500 && log_count(d, needle) < count; i++) {
		nanosleep(&pause, NULL);
	}
	assert_true(log_count(d, needle) >= count);
}

struct load {
	struct daemon *ld_daemon;
	char ld_ca[700];
	atomic_int ld_stop;
	int ld_ok;
	int ld_failed;
};

static void *load_run(void *p)
{
	struct load *l = p;

	while (!atomic_load(&l->ld_stop)) {
		if (https_get(l->ld_daemon, l->ld_ca) == 200) {
			l->ld_ok++;
		} else {
			l->ld_failed++;
		}
	}
	return NULL;
}

static void test_sighup_rotates_the_certificate_without_refusing_connections(void **state)
{
	struct daemon d;
	char extra[2048];
	char ca_a[700];
	char ca_b[700];
	struct load l;
	pthread_t th;
	int i;

	memset(&l, 0, sizeof(l));
	assert_int_equal(daemon_init(&d, NULL), 0);
	snprintf(extra, sizeof(extra),
		 "[server]\ntls_cert = file:%s/cert.pem\ntls_key = file:%s/key.pem\n\n"
		 "[provider stripe]\ntype = stripe\nsecret = whsec_tls_test\n",
		 d.dm_dir, d.dm_dir);
	assert_int_equal(daemon_append_config(&d, extra), 0);
	make_cert(&d, "ca-a.pem");
	snprintf(ca_a, sizeof(ca_a), "%s/ca-a.pem", d.dm_dir);
	snprintf(ca_b, sizeof(ca_b), "%s/ca-b.pem", d.dm_dir);
	assert_int_equal(daemon_start(&d), 0);
	assert_int_equal(https_get(&d, ca_a), 200);

	/* Rotate: new files, SIGHUP; the new certificate serves, the old no longer verifies. */
	make_cert(&d, "ca-b.pem");
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	wait_log(&d, "TLS certificate reloaded", 1);
	assert_int_equal(https_get(&d, ca_b), 200);
	assert_int_equal(https_get(&d, ca_a), 0);

	/* Reloads under load refuse no connection. */
	l.ld_daemon = &d;
	snprintf(l.ld_ca, sizeof(l.ld_ca), "%s", ca_b);
	atomic_init(&l.ld_stop, 0);
	assert_int_equal(pthread_create(&th, NULL, load_run, &l), 0);
	for (i = 0; i < 5; i++) {
		struct timespec pause = {0, 150 * 1000 * 1000};

		nanosleep(&pause, NULL);
		assert_int_equal(daemon_signal(&d, SIGHUP), 0);
		wait_log(&d, "TLS certificate reloaded", 2 + i);
	}
	atomic_store(&l.ld_stop, 1);
	pthread_join(th, NULL);
	print_message("requests during reloads: %d ok, %d failed\n", l.ld_ok, l.ld_failed);
	assert_true(l.ld_ok > 0);
	assert_int_equal(l.ld_failed, 0);

	/* A certificate that does not load is refused; the running one stays. */
	assert_int_equal(daemon_write_file(&d, "cert.pem", "-----BEGIN CERTIFICATE-----\nbroken\n"), 0);
	assert_int_equal(daemon_signal(&d, SIGHUP), 0);
	wait_log(&d, "keeping the running configuration", 1);
	assert_int_equal(https_get(&d, ca_b), 200);
	assert_int_equal(daemon_term(&d, 20), 0);
	daemon_finish(&d);
}

struct https_answer {
	long ha_status;
	char ha_location[256];
	char ha_body[16384];
	size_t ha_len;
};

static size_t https_body(char *p, size_t s, size_t n, void *arg)
{
	struct https_answer *a = arg;
	size_t len = s * n;
	size_t room = sizeof(a->ha_body) - 1 - a->ha_len;

	memcpy(a->ha_body + a->ha_len, p, len < room ? len : room);
	a->ha_len += len < room ? len : room;
	a->ha_body[a->ha_len] = '\0';
	return len;
}

static size_t https_header(char *p, size_t s, size_t n, void *arg)
{
	struct https_answer *a = arg;
	size_t len = s * n;

	if (len > 10 && strncasecmp(p, "Location: ", 10) == 0 && len - 10 < sizeof(a->ha_location)) {
		memcpy(a->ha_location, p + 10, len - 10);
		a->ha_location[strcspn(a->ha_location, "\r\n")] = '\0';
	}
	return len;
}

/* method path (with body, or NULL) over https trusting only ca_path. */
static void https_do(struct daemon *d, const char *ca_path, const char *method, const char *path,
		     const char *body, struct https_answer *ret)
{
	char url[512];
	CURL *c = curl_easy_init();

	memset(ret, 0, sizeof(*ret));
	snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", d->dm_port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(c, CURLOPT_CAINFO, ca_path);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, https_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, https_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, ret);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->ha_status);
	}
	curl_easy_cleanup(c);
}

static void test_demo_payment_reaches_a_native_tls_listener_over_https(void **state)
{
	struct daemon d;
	struct https_answer a;
	char ini[256];
	char path[256];
	int threads;

	/* With one thread, and with several. */
	for (threads = 1; threads <= 2; threads++) {
		snprintf(ini, sizeof(ini),
			 "[server]\nthreads = %d\n\n[demo]\nenabled = yes\n\n"
			 "[provider stripe]\ntype = stripe\nsecret = whsec_tls_test\n",
			 threads);
		assert_int_equal(daemon_init(&d, ini), 0);
		assert_int_equal(daemon_use_tls(&d), 0);
		assert_int_equal(daemon_start(&d), 0);
		https_do(&d, d.dm_ca, "POST", "/checkout", "idempotency_key=tls-pay-1&product=mug&quantity=1", &a);
		assert_int_equal(a.ha_status, 303);
		assert_int_equal(strncmp(a.ha_location, "/orders/", 8), 0);
		snprintf(path, sizeof(path), "%.*s/pay", (int)strcspn(a.ha_location, "?"), a.ha_location);
		https_do(&d, d.dm_ca, "POST", path, "", &a);
		assert_int_equal(a.ha_status, 303);
		snprintf(path, sizeof(path), "%s", a.ha_location);
		https_do(&d, d.dm_ca, "GET", path, NULL, &a);
		assert_int_equal(a.ha_status, 200);
		assert_non_null(strstr(a.ha_body, "First answer: 200 (processed)"));
		assert_non_null(strstr(a.ha_body, "Idempotent-Replayed: true"));
		assert_non_null(strstr(a.ha_body, "<td>paid</td>"));
		daemon_finish(&d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sighup_rotates_the_certificate_without_refusing_connections),
		cmocka_unit_test(test_demo_payment_reaches_a_native_tls_listener_over_https),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	return cmocka_run_group_tests_name("tls reload", tests, NULL, NULL);
}
