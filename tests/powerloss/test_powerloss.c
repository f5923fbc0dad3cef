/* test_powerloss.c: the receiver's database, WAL and capture spool on plfs,
 * the power cut at random points (inside group commit, during a checkpoint,
 * during gc, during `store copy`, during a migration, and under load at
 * synchronous = normal), then a remount, a restart and the checks: every
 * callback acknowledged before the cut applied exactly once, nothing half
 * applied, replayed replies byte for byte, the integrity check, and at
 * normal a loss no larger than docs/operations.md says.
 *
 * IDEMHOOK_POWERLOSS_CUTS sets the number of cuts (default 50, spread over
 * the scenarios); IDEMHOOK_POWERLOSS_SEED replays the draws of a run. */
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "fixtures.h"
#include "plmount.h"

#define PL_ORDERS 64            /* orders in the template database, paid once per cut */
#define PL_NORMAL_ORDERS 192    /* callbacks of a cut at synchronous = normal */
#define PL_TEMPLATE_STORM 32    /* orders created at once for the template */
#define PL_SENDERS 8            /* concurrent callers */
#define PL_CUTS_DEFAULT 50      /* the scenarios' shares below add up to it */
#define PL_ARM_NEVER 1000000000 /* an armed count that never runs out: counts changes */

/* One callback of a run, and what the caller saw. */
struct pl_call {
	char pc_event[64];
	char *pc_body;
	int pc_acked; /* a 2xx came back */
	long pc_status;
	char *pc_reply;
	size_t pc_reply_len;
	int64_t pc_sent_ns; /* CLOCK_MONOTONIC, as plfs's last_wal_sync_ns */
	int64_t pc_ack_ns;
	int pc_kept;          /* applied after the cut (synchronous = normal) */
	struct hres pc_again; /* the answer when sent again after the restart */
	int pc_again_ok;
};

struct pl_run {
	struct daemon pr_daemon; /* config and log on a plain directory */
	struct plmount pr_mount; /* the database and the spool */
	struct pl_call *pr_calls;
	int pr_n;
	atomic_int pr_next;
	atomic_int pr_done; /* senders finished */
	pthread_t pr_threads[PL_SENDERS];
	int pr_loading;
	int pr_again; /* the senders send everything again, into pc_again */
};

static uint64_t pl_seed;
static uint64_t pl_draws;
static const char *pl_spool_rel = "spool";    /* the spool under the mount */
static const char *pl_db_rel = "idemhook.db"; /* the database under the mount */
static struct daemon pl_template_daemon;      /* holds the template */
static char pl_template[2100];                /* a migrated database with the orders */
static char pl_order_ids[PL_NORMAL_ORDERS][64];
static int pl_cuts_total;
static int pl_cuts_done;
static int pl_acked_total;
static int pl_lost_normal;

static uint64_t pl_rand(void)
{
	uint64_t z = (pl_seed + 0x9e3779b97f4a7c15ULL * ++pl_draws);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A number in [1, n]. */
static int64_t pl_pick(int64_t n)
{
	return n <= 1 ? 1 : 1 + (int64_t)(pl_rand() % (uint64_t)n);
}

static int64_t pl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A scenario's cuts: its share of the default PL_CUTS_DEFAULT, scaled to
 * IDEMHOOK_POWERLOSS_CUTS (rounded up). */
static int pl_share(int cuts_of_default)
{
	return (cuts_of_default * pl_cuts_total + PL_CUTS_DEFAULT - 1) / PL_CUTS_DEFAULT;
}

/* 1 when order i is paid, from the list of paid orders read once. */
static int pl_paid(const char *paid_list, int i)
{
	char needle[80];

	snprintf(needle, sizeof(needle), "%.63s\n", pl_order_ids[i]);
	return strstr(paid_list, needle) != NULL;
}

static char *pl_paid_list(struct pl_run *r)
{
	char *list = hn_db_dump(r->pr_daemon.dm_db, "SELECT id FROM orders WHERE status = 'paid'");

	assert_non_null(list);
	return list;
}

static void pl_copy_file(const char *from, const char *to)
{
	char *cmd = NULL;

	assert_true(asprintf(&cmd, "cp '%s' '%s'", from, to) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

/* The config: the store and the spool on the mount, the rest beside it. */
static void pl_write_config(struct pl_run *r, const char *sync, const char *extra,
                            const char *capture)
{
	struct buf b;
	struct daemon *d = &r->pr_daemon;

	buf_init(&b, 0);
	buf_printf(&b,
	           "[server]\nlisten = 127.0.0.1:0\nport_file = %s/port\nthreads = 8\n"
	           "connection_timeout = 30\nper_ip_connections = 0\n\n"
	           "[store]\npath = %s/%s\nsynchronous = %s\n%s\n"
	           "[admin]\nlisten = 127.0.0.1:0\nport_file = %s/admin_port\n\n"
	           "[capture]\nmode = %s\ndir = %s/%s\n\n" FX_STRIPE_INI,
	           d->dm_dir, r->pr_mount.pm_mnt, pl_db_rel, sync, extra != NULL ? extra : "",
	           d->dm_dir, capture, r->pr_mount.pm_mnt, pl_spool_rel);
	assert_int_equal(daemon_write_file(d, "idemhook.ini", b.buf_data), 0);
	buf_finish(&b);
	snprintf(d->dm_db, sizeof(d->dm_db), "%s/%s", r->pr_mount.pm_mnt, pl_db_rel);
}

/* A fresh mount holding the template database (or nothing), its config. */
static struct pl_run *pl_run_create(int n, int with_template, const char *sync, const char *extra)
{
	struct pl_run *r = calloc(1, sizeof(*r));
	char to[700];
	int i;

	assert_non_null(r);
	assert_int_equal(daemon_init(&r->pr_daemon, NULL), 0);
	assert_int_equal(plmount_init(&r->pr_mount), 0);
	if (with_template) {
		snprintf(to, sizeof(to), "%s/idemhook.db", r->pr_mount.pm_backing);
		pl_copy_file(pl_template, to);
	}
	assert_int_equal(plmount_up(&r->pr_mount, pl_rand() % 1000000000), 0);
	pl_write_config(r, sync, extra, "all");
	r->pr_n = n;
	r->pr_calls = calloc((size_t)n, sizeof(*r->pr_calls));
	assert_non_null(r->pr_calls);
	for (i = 0; i < n; i++) {
		snprintf(r->pr_calls[i].pc_event, sizeof(r->pr_calls[i].pc_event), "evt_pl_%d_", i);
		r->pr_calls[i].pc_body =
		        fx_stripe_payment(r->pr_calls[i].pc_event, pl_order_ids[i], 100 + i, "usd");
	}
	return r;
}

static void pl_run_destroy(struct pl_run *r)
{
	int i;

	daemon_finish(&r->pr_daemon);
	plmount_finish(&r->pr_mount);
	for (i = 0; i < r->pr_n; i++) {
		free(r->pr_calls[i].pc_body);
		free(r->pr_calls[i].pc_reply);
	}
	free(r->pr_calls);
	free(r);
}

static void *pl_sender(void *p)
{
	struct pl_run *r = p;

	for (;;) {
		int i = atomic_fetch_add(&r->pr_next, 1);
		struct pl_call *c;
		struct hres res;

		if (i >= r->pr_n) {
			break;
		}
		c = &r->pr_calls[i];
		if (r->pr_again) {
			c->pc_again_ok = hn_post_stripe(&r->pr_daemon, "stripe", FX_STRIPE_SECRET,
			                                c->pc_body, &c->pc_again) == 0;
			continue;
		}
		c->pc_sent_ns = pl_now_ns();
		if (hn_post_stripe(&r->pr_daemon, "stripe", FX_STRIPE_SECRET, c->pc_body, &res) ==
		    0) {
			c->pc_status = res.hs_status;
			if (res.hs_status >= 200 && res.hs_status < 300) {
				c->pc_ack_ns = pl_now_ns();
				c->pc_acked = 1;
				c->pc_reply = malloc(res.hs_body_len + 1);
				assert_non_null(c->pc_reply);
				memcpy(c->pc_reply, res.hs_body, res.hs_body_len);
				c->pc_reply[res.hs_body_len] = '\0';
				c->pc_reply_len = res.hs_body_len;
			}
		}
		hres_finish(&res);
	}
	atomic_fetch_add(&r->pr_done, 1);
	return NULL;
}

static void pl_load_start(struct pl_run *r)
{
	int i;

	atomic_init(&r->pr_next, 0);
	atomic_init(&r->pr_done, 0);
	for (i = 0; i < PL_SENDERS; i++) {
		assert_int_equal(pthread_create(&r->pr_threads[i], NULL, pl_sender, r), 0);
	}
	r->pr_loading = 1;
}

static void pl_load_join(struct pl_run *r)
{
	int i;

	if (!r->pr_loading) {
		return;
	}
	for (i = 0; i < PL_SENDERS; i++) {
		pthread_join(r->pr_threads[i], NULL);
	}
	r->pr_loading = 0;
}

/* Every callback once more, by the same eight callers, after the restart. */
static void pl_resend_all(struct pl_run *r)
{
	r->pr_again = 1;
	pl_load_start(r);
	pl_load_join(r);
	r->pr_again = 0;
}

/* Waits until the armed cut fired or the load ended without reaching it
 * (a load may make fewer changes than the one counted): then the power
 * goes at the end of the load. */
static void pl_wait_cut_or_end(struct pl_run *r)
{
	struct timespec pause = {0, 5 * 1000 * 1000};

	while (plmount_counter(&r->pr_mount, "dead") != 1 &&
	       atomic_load(&r->pr_done) < PL_SENDERS) {
		nanosleep(&pause, NULL);
	}
}

static int pl_acked(const struct pl_run *r)
{
	int n = 0;
	int i;

	for (i = 0; i < r->pr_n; i++) {
		n += r->pr_calls[i].pc_acked;
	}
	return n;
}

/* The power goes (now, unless an armed cut already took it), every process
 * on the mount dies with it, the disk comes back as the cut left it. */
static void pl_power_cut_and_remount(struct pl_run *r)
{
	if (plmount_counter(&r->pr_mount, "dead") != 1) {
		assert_int_equal(plmount_command(&r->pr_mount, "cut"), 0);
	}
	daemon_kill9(&r->pr_daemon);
	pl_load_join(r);
	assert_int_equal(plmount_down(&r->pr_mount), 0);
	assert_int_equal(plmount_up(&r->pr_mount, pl_rand() % 1000000000), 0);
	pl_cuts_done++;
}

static void pl_assert_integrity(const char *db)
{
	char *check = hn_db_dump(db, "PRAGMA integrity_check");

	assert_non_null(check);
	assert_string_equal(check, "ok\n");
	free(check);
}

/* Everything in the spool, concatenated. */
static struct buf pl_spool_text;

static int pl_spool_add(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_F && strstr(path, ".cap") != NULL) {
		char *t = hn_read_file(path);

		if (t != NULL) {
			buf_puts(&pl_spool_text, t);
			free(t);
		}
	}
	return 0;
}

/* Each order is paid with its points, or untouched with none: never one
 * without the other, never a record without its effect. */
static void pl_assert_nothing_half_applied(struct pl_run *r)
{
	const char *db = r->pr_daemon.dm_db;
	int64_t paid = hn_db_int(db, "SELECT COUNT(*) FROM orders WHERE status = 'paid'");

	assert_int_equal(hn_db_int(db, "SELECT COUNT(*) FROM points_ledger"), paid);
	assert_int_equal(
	        hn_db_int(db, "SELECT COUNT(*) FROM idempotency_records WHERE scope = 'stripe'"),
	        paid);
	assert_int_equal(
	        hn_db_int(db, "SELECT COUNT(*) FROM idempotency_records WHERE status != 'done'"),
	        0);
	assert_int_equal(
	        hn_db_int(db,
	                  "SELECT COUNT(*) FROM orders o JOIN points_ledger l ON l.order_id = o.id "
	                  "WHERE o.status != 'paid' OR l.points != o.amount / 100"),
	        0);
}

/* After the restart: what was acknowledged is applied and its capture is
 * in the spool (when must_keep_acked); each callback sent again gets the
 * stored reply byte for byte (or runs now, when it never committed); each
 * order is then paid exactly once. Returns how many acknowledged callbacks
 * were lost (0 when must_keep_acked). */
static int pl_check_after_restart(struct pl_run *r, int must_keep_acked, int with_capture)
{
	const char *db = r->pr_daemon.dm_db;
	char *paid_list;
	int lost = 0;
	int i;

	pl_assert_integrity(db);
	pl_assert_nothing_half_applied(r);
	paid_list = pl_paid_list(r);
	if (with_capture) {
		buf_init(&pl_spool_text, 0);
		buf_puts(&pl_spool_text, "");
		nftw(plmount_path(&r->pr_mount, "spool"), pl_spool_add, 16, FTW_PHYS);
	}
	for (i = 0; i < r->pr_n; i++) {
		struct pl_call *c = &r->pr_calls[i];
		int64_t paid;

		if (!c->pc_acked) {
			continue;
		}
		paid = pl_paid(paid_list, i);
		if (paid != 1) {
			if (must_keep_acked) {
				fail_msg("callback %s was acknowledged before the cut and is lost",
				         c->pc_event);
			}
			lost++;
			continue;
		}
		if (with_capture) {
			char needle[80];

			snprintf(needle, sizeof(needle), "\"id\":\"%s\"", c->pc_event);
			if (strstr(pl_spool_text.buf_data, needle) == NULL) {
				fail_msg("callback %s was acknowledged and its capture is not in "
				         "the spool",
				         c->pc_event);
			}
		}
	}
	if (with_capture) {
		buf_finish(&pl_spool_text);
	}
	pl_resend_all(r);
	for (i = 0; i < r->pr_n; i++) {
		struct pl_call *c = &r->pr_calls[i];
		struct hres *res = &c->pc_again;

		assert_int_equal(c->pc_again_ok, 1);
		assert_int_equal(res->hs_status, 200);
		if (c->pc_acked && pl_paid(paid_list, i)) {
			char *replayed = hres_header(res, "Idempotent-Replayed");

			assert_non_null(replayed);
			assert_string_equal(replayed, "true");
			free(replayed);
			assert_int_equal(res->hs_body_len, c->pc_reply_len);
			assert_memory_equal(res->hs_body, c->pc_reply, c->pc_reply_len);
		}
		hres_finish(res);
		c->pc_again_ok = 0;
	}
	free(paid_list);
	assert_int_equal(hn_db_int(db,
	                           "SELECT COUNT(*) FROM orders WHERE status = 'paid' AND id IN "
	                           "(SELECT order_id FROM points_ledger)"),
	                 r->pr_n);
	pl_assert_nothing_half_applied(r);
	pl_assert_integrity(db);
	pl_acked_total += pl_acked(r);
	return lost;
}

/* ---- calibration: how many changes a step makes, to cut inside it ---- */

static int64_t pl_changes_counted(struct pl_run *r)
{
	return PL_ARM_NEVER - plmount_counter(&r->pr_mount, "armed_left");
}

/* ---- the scenarios ---- */

/* Group commit: the cut lands at a random write to the WAL while eight
 * callers keep the writer batching. */
static void test_cut_inside_group_commit_loses_no_acknowledged_callback(void **state)
{
	int cuts = pl_share(15);
	int64_t wal_changes;
	int k;

	(void)state;
	/* one run without a cut: the WAL changes a load makes */
	{
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", NULL);

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		assert_int_equal(plmount_command(&r->pr_mount, "arm -wal %d", PL_ARM_NEVER), 0);
		pl_load_start(r);
		pl_load_join(r);
		wal_changes = pl_changes_counted(r);
		assert_int_equal(pl_acked(r), PL_ORDERS);
		pl_run_destroy(r);
	}
	print_message("group commit: a load of %d callbacks makes %" PRId64 " changes to the WAL\n",
	              PL_ORDERS, wal_changes);
	for (k = 0; k < cuts; k++) {
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", NULL);
		int64_t at = pl_pick(wal_changes);

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		assert_int_equal(plmount_command(&r->pr_mount, "arm -wal %" PRId64, at), 0);
		pl_load_start(r);
		pl_wait_cut_or_end(r);
		pl_power_cut_and_remount(r);
		print_message("group commit cut %d at WAL change %" PRId64
		              ": %d of %d acknowledged\n",
		              k + 1, at, pl_acked(r), PL_ORDERS);
		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_check_after_restart(r, 1, 1);
		pl_run_destroy(r);
	}
}

/* A checkpoint: the WAL copied into the database file as the daemon stops
 * (SIGTERM), cut at a random write of the database file. */
static void test_cut_during_a_checkpoint_loses_nothing(void **state)
{
	int done = 0;
	int cuts = pl_share(8);
	int64_t db_changes;
	int k;

	(void)state;
	{
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", NULL);

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_load_start(r);
		pl_load_join(r);
		assert_int_equal(plmount_command(&r->pr_mount, "arm .db %d", PL_ARM_NEVER), 0);
		assert_int_equal(daemon_term(&r->pr_daemon, 20), 0);
		db_changes = pl_changes_counted(r);
		pl_run_destroy(r);
	}
	print_message("checkpoint: the last checkpoint makes %" PRId64
	              " changes to the database file\n",
	              db_changes);
	assert_true(db_changes > 0);
	for (k = 0; k < cuts; k++) {
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", NULL);
		int64_t at = pl_pick(db_changes);

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_load_start(r);
		pl_load_join(r);
		assert_int_equal(pl_acked(r), PL_ORDERS);
		assert_int_equal(plmount_command(&r->pr_mount, "arm .db %" PRId64, at), 0);
		daemon_term(&r->pr_daemon, 20);
		if (plmount_counter(&r->pr_mount, "dead") != 1) {
			/* Autocheckpoints under load took more of the pages this
			 * time: the last checkpoint made fewer changes than drawn. */
			print_message("checkpoint cut %d at database change %" PRId64
			              ": not reached, this run's checkpoint was smaller\n",
			              k + 1, at);
			pl_run_destroy(r);
			continue;
		}
		done++;
		pl_power_cut_and_remount(r);
		print_message("checkpoint cut %d at database change %" PRId64 "\n", k + 1, at);
		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_check_after_restart(r, 1, 1);
		pl_run_destroy(r);
	}
	assert_true(done > 0);
}

/* gc: every record expired (retention 1 s), `idemhook gc` (and, every
 * other cut, --vacuum with its TRUNCATE checkpoint) cut at a random
 * change to the WAL. Records may be gone; payments and points stay, once each. */
static void test_cut_during_gc_keeps_every_payment_once(void **state)
{
	static const char gc_ini[] = "retention = 1s\n\n[gc]\nbatch = 8\npause = 1ms\n";
	int cuts = pl_share(8);
	int64_t gc_changes[2];
	int k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", gc_ini);
		const char *args[] = {"gc", k == 1 ? "--vacuum" : NULL, NULL};

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_load_start(r);
		pl_load_join(r);
		sleep(1);
		assert_int_equal(plmount_command(&r->pr_mount, "arm -wal %d", PL_ARM_NEVER), 0);
		assert_int_equal(daemon_cli(&r->pr_daemon, 1, args, NULL), 0);
		gc_changes[k] = pl_changes_counted(r);
		assert_int_equal(
		        hn_db_int(r->pr_daemon.dm_db, "SELECT COUNT(*) FROM idempotency_records"),
		        0);
		pl_run_destroy(r);
	}
	print_message("gc: a pass makes %" PRId64 " changes to the WAL, with --vacuum %" PRId64
	              "\n",
	              gc_changes[0], gc_changes[1]);
	for (k = 0; k < cuts; k++) {
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", gc_ini);
		int vacuum = k % 2;
		const char *args[] = {"gc", vacuum ? "--vacuum" : NULL, NULL};
		int64_t at = pl_pick(gc_changes[vacuum]);
		const char *again[] = {"gc", NULL};

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_load_start(r);
		pl_load_join(r);
		assert_int_equal(pl_acked(r), PL_ORDERS);
		sleep(1);
		assert_int_equal(plmount_command(&r->pr_mount, "arm -wal %" PRId64, at), 0);
		daemon_cli(&r->pr_daemon, 1, args, NULL);
		pl_power_cut_and_remount(r);
		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		print_message(
		        "gc cut %d at change %" PRId64 "%s: %" PRId64 " expired records left\n",
		        k + 1, at, vacuum ? " (--vacuum)" : "",
		        hn_db_int(r->pr_daemon.dm_db, "SELECT COUNT(*) FROM idempotency_records"));
		pl_assert_integrity(r->pr_daemon.dm_db);
		assert_int_equal(hn_db_int(r->pr_daemon.dm_db,
		                           "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
		                 PL_ORDERS);
		assert_int_equal(
		        hn_db_int(r->pr_daemon.dm_db, "SELECT COUNT(*) FROM points_ledger"),
		        PL_ORDERS);
		/* The pass runs again to its end; then resent callbacks run as
		 * new and change nothing. */
		assert_int_equal(daemon_cli(&r->pr_daemon, 1, again, NULL), 0);
		assert_int_equal(
		        hn_db_int(r->pr_daemon.dm_db, "SELECT COUNT(*) FROM idempotency_records"),
		        0);
		{
			int i;

			for (i = 0; i < r->pr_n; i++) {
				assert_int_equal(
				        fx_stripe_send(&r->pr_daemon, r->pr_calls[i].pc_body, NULL),
				        200);
			}
		}
		assert_int_equal(hn_db_int(r->pr_daemon.dm_db,
		                           "SELECT COUNT(*) FROM orders WHERE status = 'paid'"),
		                 PL_ORDERS);
		assert_int_equal(
		        hn_db_int(r->pr_daemon.dm_db, "SELECT COUNT(*) FROM points_ledger"),
		        PL_ORDERS);
		pl_assert_integrity(r->pr_daemon.dm_db);
		pl_acked_total += PL_ORDERS;
		pl_run_destroy(r);
	}
}

/* store copy to a second SQLite file on the same disk, cut at a random
 * change: the source is as it was, the target holds the whole copy or
 * none of it, and a second copy (--replace) completes. */
static void test_cut_during_store_copy_leaves_all_or_nothing(void **state)
{
	int cuts = pl_share(7);
	int64_t copy_changes = 0;
	int k;

	(void)state;
	for (k = -1; k < cuts; k++) {
		struct pl_run *r = pl_run_create(PL_ORDERS, 1, "full", NULL);
		char from[400];
		char to[400];
		char *before;
		char *after;
		char *target;
		int64_t at = k < 0 ? PL_ARM_NEVER : pl_pick(copy_changes);
		int64_t target_orders;

		snprintf(from, sizeof(from), "sqlite:%s/idemhook.db", r->pr_mount.pm_mnt);
		snprintf(to, sizeof(to), "sqlite:%s/copy.db", r->pr_mount.pm_mnt);
		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		pl_load_start(r);
		pl_load_join(r);
		assert_int_equal(daemon_term(&r->pr_daemon, 20), 0);
		before = hn_db_snapshot(r->pr_daemon.dm_db);
		assert_non_null(before);
		assert_int_equal(plmount_command(&r->pr_mount, "arm * %" PRId64, at), 0);
		{
			const char *args[] = {"store", "copy", "--from", from, "--to", to, NULL};
			int rc = daemon_cli(&r->pr_daemon, 0, args, NULL);

			if (k < 0) {
				assert_int_equal(rc, 0);
				copy_changes = pl_changes_counted(r);
				print_message("store copy: a copy makes %" PRId64 " changes\n",
				              copy_changes);
				free(before);
				pl_run_destroy(r);
				continue;
			}
		}
		pl_power_cut_and_remount(r);
		after = hn_db_snapshot(r->pr_daemon.dm_db);
		assert_non_null(after);
		assert_string_equal(after, before);
		pl_assert_integrity(r->pr_daemon.dm_db);
		target = hn_db_snapshot(plmount_path(&r->pr_mount, "copy.db"));
		target_orders = target == NULL ? -1
		                               : hn_db_int(plmount_path(&r->pr_mount, "copy.db"),
		                                           "SELECT COUNT(*) FROM orders");
		print_message("store copy cut %d at change %" PRId64 ": the target %s\n", k + 1, at,
		              target == NULL       ? "does not open (never created)"
		              : target_orders == 0 ? "is empty"
		                                   : "holds the whole copy");
		if (target != NULL && target_orders != 0) {
			assert_string_equal(target, before);
			pl_assert_integrity(plmount_path(&r->pr_mount, "copy.db"));
		}
		free(target);
		{
			const char *args[] = {"store", "copy", "--from",    from,
			                      "--to",  to,     "--replace", NULL};

			assert_int_equal(daemon_cli(&r->pr_daemon, 0, args, NULL), 0);
		}
		target = hn_db_snapshot(plmount_path(&r->pr_mount, "copy.db"));
		assert_non_null(target);
		assert_string_equal(target, before);
		free(target);
		free(before);
		free(after);
		pl_acked_total += pl_acked(r);
		pl_run_destroy(r);
	}
}

/* The schema version of the SQLite file at path (the sqlite3 shell: the
 * store's read-only API refuses a database with migrations pending), -1
 * when there is no such file. */
static int64_t pl_user_version(const char *path)
{
	char cmd[800];
	struct stat st;
	FILE *f;
	long long v = -1;

	if (stat(path, &st) < 0) {
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA user_version'", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lld", &v), 1);
	assert_int_equal(pclose(f), 0);
	return v;
}

/* The migrations of a new database, cut at a random change: afterwards the
 * database is at some version with nothing of the next one, `migrate`
 * completes it, and the schema is the one a run without a cut makes. */
static void test_cut_during_a_migration_leaves_no_half_migration(void **state)
{
	static const char schema_sql[] =
	        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name";
	int cuts = pl_share(6);
	int64_t migrate_changes = 0;
	char *want_schema = NULL;
	int64_t want_version = 0;
	int k;

	(void)state;
	for (k = -1; k < cuts; k++) {
		struct pl_run *r = pl_run_create(1, 0, "full", NULL);
		const char *args[] = {"migrate", NULL};
		int64_t at = k < 0 ? PL_ARM_NEVER : pl_pick(migrate_changes);
		char *schema;
		int64_t version;

		assert_int_equal(plmount_command(&r->pr_mount, "arm * %" PRId64, at), 0);
		if (k < 0) {
			assert_int_equal(daemon_cli(&r->pr_daemon, 1, args, NULL), 0);
			migrate_changes = pl_changes_counted(r);
			want_schema = hn_db_dump(r->pr_daemon.dm_db, schema_sql);
			want_version = hn_db_int(r->pr_daemon.dm_db, "PRAGMA user_version");
			assert_non_null(want_schema);
			print_message("migration: migrating a new database to version %" PRId64
			              " makes %" PRId64 " changes\n",
			              want_version, migrate_changes);
			pl_run_destroy(r);
			continue;
		}
		daemon_cli(&r->pr_daemon, 1, args, NULL);
		pl_power_cut_and_remount(r);
		version = pl_user_version(r->pr_daemon.dm_db);
		if (version < 0) {
			print_message("migration cut %d at change %" PRId64
			              ": no database (its name was not durable yet)\n",
			              k + 1, at);
		} else {
			print_message("migration cut %d at change %" PRId64
			              ": the database is at version %" PRId64 " of %" PRId64 "\n",
			              k + 1, at, version, want_version);
		}
		assert_true(version <= want_version);
		assert_int_equal(daemon_cli(&r->pr_daemon, 1, args, NULL), 0);
		assert_int_equal(hn_db_int(r->pr_daemon.dm_db, "PRAGMA user_version"),
		                 want_version);
		schema = hn_db_dump(r->pr_daemon.dm_db, schema_sql);
		assert_non_null(schema);
		assert_string_equal(schema, want_schema);
		free(schema);
		pl_assert_integrity(r->pr_daemon.dm_db);
		pl_run_destroy(r);
	}
	free(want_schema);
}

/* synchronous = normal: the WAL reaches the disk at checkpoints only, so a
 * cut may lose acknowledged callbacks, but (docs/operations.md) only those
 * acknowledged after the last checkpoint began, always the newest (a
 * callback acknowledged before another was sent is never lost while that
 * one stays), never half of one. */
static void
test_cut_at_synchronous_normal_loses_only_the_newest_since_the_last_checkpoint(void **state)
{
	int cuts = pl_share(6);
	int64_t wal_changes;
	int k;

	(void)state;
	{
		struct pl_run *r = pl_run_create(PL_NORMAL_ORDERS, 1, "normal", NULL);

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		assert_int_equal(plmount_command(&r->pr_mount, "arm -wal %d", PL_ARM_NEVER), 0);
		pl_load_start(r);
		pl_load_join(r);
		wal_changes = pl_changes_counted(r);
		assert_int_equal(pl_acked(r), PL_NORMAL_ORDERS);
		pl_run_destroy(r);
	}
	print_message("normal: a load of %d callbacks makes %" PRId64 " changes to the WAL\n",
	              PL_NORMAL_ORDERS, wal_changes);
	for (k = 0; k < cuts; k++) {
		struct pl_run *r = pl_run_create(PL_NORMAL_ORDERS, 1, "normal", NULL);
		int64_t at = pl_pick(wal_changes);
		int64_t synced_ns;
		char *paid_list;
		int lost;
		int i;
		int j;

		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		assert_int_equal(plmount_command(&r->pr_mount, "arm -wal %" PRId64, at), 0);
		pl_load_start(r);
		pl_wait_cut_or_end(r);
		synced_ns = plmount_counter(&r->pr_mount, "last_wal_sync_ns");
		pl_power_cut_and_remount(r);
		assert_int_equal(daemon_start(&r->pr_daemon), 0);
		/* before anything is sent again: who survived */
		paid_list = pl_paid_list(r);
		for (i = 0; i < r->pr_n; i++) {
			struct pl_call *a = &r->pr_calls[i];

			if (!a->pc_acked) {
				continue;
			}
			a->pc_kept = pl_paid(paid_list, i);
			if (a->pc_ack_ns < synced_ns && !a->pc_kept) {
				fail_msg("%s was acknowledged before the WAL was last synced and "
				         "is lost",
				         a->pc_event);
			}
		}
		free(paid_list);
		for (i = 0; i < r->pr_n; i++) {
			const struct pl_call *a = &r->pr_calls[i];

			if (!a->pc_acked || a->pc_kept) {
				continue;
			}
			for (j = 0; j < r->pr_n; j++) {
				const struct pl_call *b = &r->pr_calls[j];

				if (b->pc_acked && b->pc_kept && b->pc_sent_ns > a->pc_ack_ns) {
					fail_msg("%s is lost while %s, sent after it was "
					         "acknowledged, stays",
					         a->pc_event, b->pc_event);
				}
			}
		}
		lost = pl_check_after_restart(r, 0, 0);
		pl_lost_normal += lost;
		print_message("normal cut %d at WAL change %" PRId64
		              ": %d acknowledged, %d of them lost\n",
		              k + 1, at, pl_acked(r), lost);
		pl_run_destroy(r);
	}
}

/* A spool whose directories capture creates (here spool/captures, both
 * new): each capture is fsynced, renamed and its day directory synced, but
 * unless the entries of the directories above it are durable too, a cut
 * takes the whole spool, the captures of acknowledged callbacks with it.
 * The cut drops everything it may. */
static void test_a_new_nested_spool_survives_a_cut_with_its_captures(void **state)
{
	struct pl_run *r = pl_run_create(8, 1, "full", NULL);
	char *spool_text;
	int i;

	(void)state;
	assert_int_equal(plmount_command(&r->pr_mount, "policy drop"), 0);
	pl_spool_rel = "spool/captures";
	pl_write_config(r, "full", NULL, "all");
	pl_spool_rel = "spool";
	assert_int_equal(daemon_start(&r->pr_daemon), 0);
	for (i = 0; i < r->pr_n; i++) {
		struct hres res;

		assert_int_equal(fx_stripe_send(&r->pr_daemon, r->pr_calls[i].pc_body, &res), 200);
		r->pr_calls[i].pc_acked = 1;
		hres_finish(&res);
	}
	pl_power_cut_and_remount(r);
	assert_int_equal(daemon_start(&r->pr_daemon), 0);
	buf_init(&pl_spool_text, 0);
	buf_puts(&pl_spool_text, "");
	nftw(plmount_path(&r->pr_mount, "spool"), pl_spool_add, 16, FTW_PHYS);
	spool_text = buf_take(&pl_spool_text, NULL);
	for (i = 0; i < r->pr_n; i++) {
		char needle[80];

		snprintf(needle, sizeof(needle), "\"id\":\"%s\"", r->pr_calls[i].pc_event);
		if (strstr(spool_text, needle) == NULL) {
			fail_msg("callback %s was acknowledged and its capture is gone after the "
			         "cut",
			         r->pr_calls[i].pc_event);
		}
	}
	free(spool_text);
	pl_run_destroy(r);
}

/* The same for the database: a new one in a directory the store creates
 * (here state/): SQLite syncs the directory that holds the database and its
 * WAL, not that directory's own entry in its parent. */
static void test_a_new_database_in_a_new_directory_survives_a_cut(void **state)
{
	struct pl_run *r = pl_run_create(1, 0, "full", NULL);
	char ids[4][64];
	int i;

	(void)state;
	assert_int_equal(plmount_command(&r->pr_mount, "policy drop"), 0);
	pl_db_rel = "state/idemhook.db";
	pl_write_config(r, "full", NULL, "off");
	pl_db_rel = "idemhook.db";
	assert_int_equal(daemon_start(&r->pr_daemon), 0);
	for (i = 0; i < 4; i++) {
		char event[64];

		fx_order(&r->pr_daemon, 500 + i, "usd", ids[i]);
		snprintf(event, sizeof(event), "evt_pl_dir_%d", i);
		assert_int_equal(fx_stripe_pay(&r->pr_daemon, event, ids[i], 500 + i, "usd"), 200);
	}
	pl_power_cut_and_remount(r);
	assert_int_equal(daemon_start(&r->pr_daemon), 0);
	for (i = 0; i < 4; i++) {
		if (fx_db_int(&r->pr_daemon, "SELECT status = 'paid' FROM orders WHERE id = '%s'",
		              ids[i]) != 1) {
			fail_msg("order %s was paid by an acknowledged callback and is not after "
			         "the cut",
			         ids[i]);
		}
	}
	pl_assert_integrity(r->pr_daemon.dm_db);
	pl_run_destroy(r);
}

static int64_t pl_suite_ns;
static int64_t pl_scenario_ns;
static int pl_scenario_cuts;

static int pl_scenario_start(void **state)
{
	(void)state;
	pl_scenario_ns = pl_now_ns();
	pl_scenario_cuts = pl_cuts_done;
	return 0;
}

static int pl_scenario_end(void **state)
{
	(void)state;
	fprintf(stderr, "powerloss: %d cuts in %.1f s\n", pl_cuts_done - pl_scenario_cuts,
	        (double)(pl_now_ns() - pl_scenario_ns) / 1e9);
	return 0;
}

/* The template: a database with the orders every run pays, made through
 * the order API (a storm at a time: group commit makes it quick). */
static int pl_setup(void **state)
{
	struct daemon *d = &pl_template_daemon;
	int i;

	(void)state;
	fx_daemon_start(d, "%s[api]\nrate = 0\n", FX_STRIPE_INI);
	for (i = 0; i < PL_NORMAL_ORDERS; i += PL_TEMPLATE_STORM) {
		struct hreq reqs[PL_TEMPLATE_STORM];
		struct hres res[PL_TEMPLATE_STORM];
		char keys[PL_TEMPLATE_STORM][64];
		char bodies[PL_TEMPLATE_STORM][64];
		const char *headers[PL_TEMPLATE_STORM][3];
		char url[800];
		int j;

		snprintf(url, sizeof(url), "%s/api/orders", d->dm_base);
		for (j = 0; j < PL_TEMPLATE_STORM; j++) {
			snprintf(keys[j], sizeof(keys[j]), "Idempotency-Key: pl-template-%d",
			         i + j);
			snprintf(bodies[j], sizeof(bodies[j]),
			         "{\"amount\": %d, \"currency\": \"usd\"}", 100 + i + j);
			headers[j][0] = "Content-Type: application/json";
			headers[j][1] = keys[j];
			headers[j][2] = NULL;
			reqs[j].rq_method = "POST";
			reqs[j].rq_url = url;
			reqs[j].rq_headers = headers[j];
			reqs[j].rq_body = bodies[j];
			reqs[j].rq_body_len = strlen(bodies[j]);
		}
		assert_int_equal(hn_http_storm_each(PL_TEMPLATE_STORM, reqs, res), 0);
		for (j = 0; j < PL_TEMPLATE_STORM; j++) {
			const char *id;

			assert_int_equal(res[j].hs_status, 201);
			id = strstr(res[j].hs_body, "\"id\":\"");
			assert_non_null(id);
			id += strlen("\"id\":\"");
			snprintf(pl_order_ids[i + j], sizeof(pl_order_ids[0]), "%.*s",
			         (int)strcspn(id, "\""), id);
			hres_finish(&res[j]);
		}
	}
	/* A clean stop: the WAL is in the file, which is all there is to copy. */
	assert_int_equal(daemon_term(d, 20), 0);
	snprintf(pl_template, sizeof(pl_template), "%s", d->dm_db);
	return 0;
}

static int pl_teardown(void **state)
{
	(void)state;
	daemon_finish(&pl_template_daemon);
	fprintf(stderr,
	        "powerloss: %d power cuts (seed %" PRIu64
	        "), %d callbacks acknowledged before them; at "
	        "synchronous = normal %d acknowledged callbacks lost, as documented\n",
	        pl_cuts_done, pl_seed, pl_acked_total, pl_lost_normal);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_a_new_nested_spool_survives_a_cut_with_its_captures),
	        cmocka_unit_test(test_a_new_database_in_a_new_directory_survives_a_cut),
	        cmocka_unit_test_setup_teardown(
	                test_cut_inside_group_commit_loses_no_acknowledged_callback,
	                pl_scenario_start, pl_scenario_end),
	        cmocka_unit_test_setup_teardown(test_cut_during_a_checkpoint_loses_nothing,
	                                        pl_scenario_start, pl_scenario_end),
	        cmocka_unit_test_setup_teardown(test_cut_during_gc_keeps_every_payment_once,
	                                        pl_scenario_start, pl_scenario_end),
	        cmocka_unit_test_setup_teardown(test_cut_during_store_copy_leaves_all_or_nothing,
	                                        pl_scenario_start, pl_scenario_end),
	        cmocka_unit_test_setup_teardown(
	                test_cut_during_a_migration_leaves_no_half_migration, pl_scenario_start,
	                pl_scenario_end),
	        cmocka_unit_test_setup_teardown(
	                test_cut_at_synchronous_normal_loses_only_the_newest_since_the_last_checkpoint,
	                pl_scenario_start, pl_scenario_end),
	};
	const char *cuts = getenv("IDEMHOOK_POWERLOSS_CUTS");

	plmount_require_or_skip("powerloss");
	pl_seed = plmount_seed("powerloss");
	pl_suite_ns = pl_now_ns();
	pl_cuts_total = cuts != NULL ? (int)strtol(cuts, NULL, 10) : 0;
	if (pl_cuts_total <= 0) {
		pl_cuts_total = PL_CUTS_DEFAULT;
	}
	fprintf(stderr, "powerloss: %d cuts (IDEMHOOK_POWERLOSS_CUTS)\n", pl_cuts_total);
	return cmocka_run_group_tests_name("powerloss", tests, pl_setup, pl_teardown);
}
