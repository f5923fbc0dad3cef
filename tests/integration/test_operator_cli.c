/* test_operator_cli.c: what the operator's commands write is stamped like
 * what the daemon writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define T_INI "[provider stripe]\ntype = stripe\nsecret = whsec_operator_cli\n"

static void test_order_create_stamps_created_and_updated_at_with_the_current_time(void **state)
{
	struct daemon *d = *state;
	char id[64];
	char sql[256];
	int64_t before = hn_now_ms();
	int64_t after;

	assert_int_equal(hn_order_create(d, 1999, "usd", id), 0);
	after = hn_now_ms();
	snprintf(sql, sizeof(sql), "SELECT created_at FROM orders WHERE id = '%s'", id);
	assert_in_range(hn_db_int(d->dm_db, sql), before, after);
	snprintf(sql, sizeof(sql), "SELECT updated_at FROM orders WHERE id = '%s'", id);
	assert_in_range(hn_db_int(d->dm_db, sql), before, after);
}

static int setup(void **state)
{
	return daemon_setup(state, T_INI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(
	                test_order_create_stamps_created_and_updated_at_with_the_current_time),
	};

	return cmocka_run_group_tests(tests, setup, daemon_teardown);
}
