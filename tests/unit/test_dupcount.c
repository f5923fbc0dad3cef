/* test_dupcount.c: duplicates answered per key, counted in memory: each
 * key its own count, scopes apart, a slot taken over by another key, no
 * count lost between threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "dupcount.h"

static void test_each_key_counts_its_own_duplicates_and_scopes_stay_apart(void **state)
{
	uint32_t n = 0;
	int64_t last = 0;
	int64_t before = (int64_t)time(NULL) * 1000 - 1000;

	(void)state;
	dupcount_reset();
	assert_int_equal(dupcount_get("stripe", "evt_1", &n, &last), 0);
	dupcount_add("stripe", "evt_1");
	dupcount_add("stripe", "evt_1");
	dupcount_add("stripe", "evt_2");
	assert_int_equal(dupcount_get("stripe", "evt_1", &n, &last), 1);
	assert_int_equal(n, 2);
	assert_true(last >= before);
	assert_int_equal(dupcount_get("stripe", "evt_2", &n, &last), 1);
	assert_int_equal(n, 1);
	/* the same key under another instance, and the scope/key split */
	assert_int_equal(dupcount_get("stripe2", "evt_1", &n, &last), 0);
	assert_int_equal(dupcount_get("stripeevt_1", "", &n, &last), 0);
	dupcount_reset();
	assert_int_equal(dupcount_get("stripe", "evt_1", &n, &last), 0);
}

/* More keys than slots: the table stays bounded, and a key whose slot a
 * later key took reads as none rather than as another key's count. */
static void test_a_full_table_never_reports_another_keys_count(void **state)
{
	char key[32];
	uint32_t n = 0;
	int64_t last = 0;
	unsigned i;
	unsigned kept = 0;

	(void)state;
	dupcount_reset();
	for (i = 0; i < 4 * DUPCOUNT_SLOTS; i++) {
		snprintf(key, sizeof(key), "evt_%u", i);
		dupcount_add("stripe", key);
	}
	for (i = 0; i < 4 * DUPCOUNT_SLOTS; i++) {
		snprintf(key, sizeof(key), "evt_%u", i);
		if (dupcount_get("stripe", key, &n, &last)) {
			assert_int_equal(n, 1);
			kept++;
		}
	}
	assert_true(kept > 0);
	assert_true(kept <= DUPCOUNT_SLOTS);
}

#define DUPCOUNT_TEST_THREADS 4
#define DUPCOUNT_TEST_KEYS 200 /* evt_0 to evt_199: each has a slot of its own (FNV-1a) */
#define DUPCOUNT_TEST_ROUNDS 500

static void *dupcount_test_adder(void *arg)
{
	char key[32];
	unsigned i;
	unsigned r;

	(void)arg;
	for (r = 0; r < DUPCOUNT_TEST_ROUNDS; r++) {
		for (i = 0; i < DUPCOUNT_TEST_KEYS; i++) {
			snprintf(key, sizeof(key), "evt_%u", i);
			dupcount_add("stripe", key);
		}
	}
	return NULL;
}

/* The table's locks are per stripe of slots: server threads counting the
 * same keys at once lose no count, and each key keeps its own. */
static void test_threads_counting_the_same_keys_lose_no_count(void **state)
{
	pthread_t t[DUPCOUNT_TEST_THREADS];
	char key[32];
	uint32_t n = 0;
	int64_t last = 0;
	unsigned i;

	(void)state;
	dupcount_reset();
	for (i = 0; i < DUPCOUNT_TEST_THREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, dupcount_test_adder, NULL), 0);
	}
	for (i = 0; i < DUPCOUNT_TEST_THREADS; i++) {
		pthread_join(t[i], NULL);
	}
	for (i = 0; i < DUPCOUNT_TEST_KEYS; i++) {
		snprintf(key, sizeof(key), "evt_%u", i);
		assert_int_equal(dupcount_get("stripe", key, &n, &last), 1);
		assert_int_equal(n, DUPCOUNT_TEST_THREADS * DUPCOUNT_TEST_ROUNDS);
	}
	dupcount_reset();
	assert_int_equal(dupcount_get("stripe", "evt_0", &n, &last), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_each_key_counts_its_own_duplicates_and_scopes_stay_apart),
	        cmocka_unit_test(test_a_full_table_never_reports_another_keys_count),
	        cmocka_unit_test(test_threads_counting_the_same_keys_lose_no_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
