/* store_sqlite.c: the SQLite engine of the store: connections with a
 * prepared-statement cache, WAL and its checkpointer thread, migrations under
 * PRAGMA user_version, and the file operations (sizes, reclaim, VACUUM,
 * snapshots). The only file that includes sqlite3.h. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "migrations.h"
#include "store_engine.h"

#define STORE_BUSY_TIMEOUT_MS_DEFAULT 5000
#define STORE_STMT_BUCKETS 64
#define STORE_STMT_CACHE_MAX 512 /* cached statements per connection */
#define STORE_DIR_MODE 0700  /* directories the store creates */
#define STORE_FILE_MODE 0600 /* the database; SQLite gives -wal and -shm its mode */
/* The page size of a new database: 1 KiB pages wrote 13.6 KB per unique
 * callback where 4 KiB pages wrote 69 KB, and 512-byte pages 11.7 KB for
 * more CPU per callback (issue 24, docs/benchmarks.md). A database made
 * before keeps its page size. */
#define STORE_PAGE_SIZE "1024"
/* WAL frames (pages) after which the checkpointer copies them into the
 * database file (the writer then finishes the copy and starts the WAL over
 * between two batches, store_sqlite_after_batch), and the hard bound past
 * which the writer does so even if the checkpointer has not caught up:
 * about 12 MB and 32 MB at 1 KiB pages. A page that several commits change is
 * copied once per checkpoint: 4,000 wrote 18-19 KB per unique callback
 * where 1,000 wrote 21-22 KB, and 12,000 wrote 1.8 to 2.5 KB less than
 * 4,000; 16,000 with a bound of 32,000 saved no more than 12,000 (issue 24,
 * docs/benchmarks.md). */
#define STORE_CKPT_FRAMES 12000
#define STORE_CKPT_FRAMES_MAX 32000
/* The frames the checkpointer may leave behind for the writer to copy: it
 * goes on with another round while more were committed meanwhile, since the
 * writer's copy holds every commit back. Copying 1,000 to 5,000 frames and
 * syncing the database file took the writer 7 to 50 ms a time (issue 24,
 * eighth round). */
#define STORE_CKPT_TAIL 128
#define STORE_CKPT_ROUNDS_MAX 16      /* rounds after one wake */
#define STORE_PROBE_BUSY_MS 100       /* the probe's wait for the write lock */
#define STORE_CHECKPOINT_BUSY_MS 200  /* a TRUNCATE checkpoint briefly holds writers back */
#define STORE_CKPT_RESTART_MS 20      /* the writer's wait for readers to leave the WAL */
/* The WAL held past its bound: a read transaction that stays open keeps
 * every checkpoint from copying past its snapshot, the WAL grows and every
 * read slows as it does (a 62 s listing at ten million callbacks held it
 * for a minute, issue 24). A warning once it has lasted so_wal_held_warn_ms
 * (default below), again every minute while it lasts, and a notice when
 * the WAL starts over. */
#define STORE_WAL_HELD_WARN_MS 10000
#define STORE_WAL_HELD_REPEAT_MS 60000
/* Once it has warned, the writer tries to start the WAL over at most this
 * often instead of after every batch: each try waits STORE_CKPT_RESTART_MS
 * for readers, and under a long reader those waits took 60 to 85 % of the
 * writer's time (issue 24, ten million callbacks). */
#define STORE_WAL_HELD_RETRY_MS 100
#define STORE_CKPT_RESTART_STEP_US 50
/* The sub-journal (the old contents of the pages a savepoint changes; a
 * batch keeps it until COMMIT) stays in memory up to this size instead of
 * SQLite's 64 KiB: in a temporary file it wrote every page of a batch a
 * third time (13 KB per unique callback at 256 connections). A batch of
 * batch_max = 256 callbacks needs about 3 MB. */
#define STORE_SUBJOURNAL_SPILL (4 << 20)
/* The writer's page cache, in KiB, instead of SQLite's 2,000: a unique
 * callback's inserts land on leaf pages at random places in four indexes,
 * and a page the writer's cache has dropped is read again with a pread
 * (from the WAL or the file). 4 MiB halved the writer's preads and took
 * 2-8 us off its CPU per callback (bench_store, issue 24); the cache fills
 * only as pages are used, so it adds at most 2 MiB to the daemon's peak
 * RSS (issue 10's target: below 32 MiB at 256 connections). */
#define STORE_WRITER_CACHE_KIB "4096"
/* SQLite's lock-byte page begins here (PENDING_BYTE); see store_pcache. */
#define STORE_LOCK_BYTE_OFFSET 0x40000000u
/* A duplicate's lookup reuses its thread's read snapshot while no commit
 * has been made since it began, for at most this long and this many
 * lookups; the checkpointer ends one left idle about as long after. Each
 * read transaction takes and releases a lock on the -shm file (fcntl),
 * 7-11% of the duplicate path (issue 24). A lookup never sees less than a
 * new snapshot would, except a commit whose claims are not answered yet;
 * a miss goes to the writer, whose claim decides, as every miss does. */
#define STORE_SNAPSHOT_MS 4
#define STORE_SNAPSHOT_USES 256

struct store_stmt {
	char *sm_sql;
	sqlite3_stmt *sm_stmt;
	int sm_busy; /* in use: a nested use of the same SQL prepares a temporary one */
	struct store_stmt *sm_next;
};

struct store_conn {
	sqlite3 *cn_db;
	struct store_stmt *cn_stmts[STORE_STMT_BUCKETS];
	size_t cn_n_stmts;
	struct store_conn *cn_next; /* in db_readers */
	/* A read connection's snapshot kept open between the lookups of the
	 * duplicate path (store_sqlite_reader_get): cn_mutex is held by its
	 * thread from get to put on that path, and by the checkpointer thread
	 * when it ends a snapshot left idle (store_snapshots_reap). */
	pthread_mutex_t cn_mutex;
	int cn_locked;            /* gets its thread holds cn_mutex for (its thread only) */
	int cn_held;              /* a kept snapshot is open (under cn_mutex) */
	int64_t cn_held_ms;       /* monotonic ms it began (under cn_mutex) */
	uint64_t cn_held_commits; /* db_commits when it began (under cn_mutex) */
	unsigned cn_held_uses;
	int cn_rw; /* opened read-write: keeps the -wal and -shm (store_conn_open_vfs) */
};

/* The checkpointer: copies WAL frames into the database file on its own
 * connection and thread, so the writer's commits never wait for it. */
struct store_ckpt {
	struct store_conn *ck_conn;
	pthread_t ck_thread;
	int ck_running;
	pthread_mutex_t ck_mutex;
	pthread_cond_t ck_cond;
	int ck_wanted; /* under ck_mutex */
	int ck_stopping; /* under ck_mutex */
	/* Held around every checkpoint of the checkpointer's and the writer's:
	 * SQLite refuses a second checkpoint at once without waiting. */
	pthread_mutex_t ck_run_mutex;
	int ck_rounds; /* wakes whose rounds have finished (atomic) */
	int ck_sync;   /* sync the database file after the rounds (not at synchronous = OFF) */
	int ck_reap;   /* some read snapshot is kept open (atomic; set under ck_mutex) */
};

struct store_db {
	char *db_path;
	unsigned db_busy_timeout_ms;
	struct store_conn *db_writer; /* NULL when read-only */
	pthread_mutex_t db_mutex;
	pthread_key_t db_key; /* this thread's read connection */
	int db_key_made;
	struct store_conn *db_readers; /* every read connection, under db_mutex */
	int db_wal_frames; /* frames in the WAL after the last commit (writer; read atomically) */
	int db_ckpt_asked; /* db_wal_frames when the checkpointer was last woken (writer thread) */
	int db_ckpt_round; /* its ck_rounds then (writer thread) */
	/* Since when (monotonic ms; 0: not held) the writer's restarts of a WAL
	 * past its bound have failed (writer thread; read atomically), when it
	 * last warned, and after how long it warns. */
	int64_t db_wal_held_since;
	int64_t db_wal_held_warned;
	int64_t db_wal_held_tried; /* when it last tried (writer thread) */
	unsigned db_wal_held_warn_ms;
	uint64_t db_wal_written; /* frames appended to the WAL (writer thread; read atomically) */
	uint64_t db_commits;     /* commits so far (written by the writer thread, atomic) */
	struct store_ckpt db_ckpt;
	struct store_conn *db_probe; /* store_probe's own connection (the probe's thread) */
	int64_t db_probe_locked_at;  /* monotonic ms the probe last found the lock held; 0 */
	int db_probe_locked_rc;
	int db_lock_fd; /* PATH.lock while so_exclusive holds it, else -1 */
};

static const struct store_engine *const en = &store_engine_sqlite;

static int store_rc_transient(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_FULL:
	case SQLITE_IOERR:
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_NOMEM:
		return 1;
	default:
		return 0;
	}
}

/* 1 when rc says the file system had no room: SQLITE_FULL (ENOSPC, or a
 * short write), or an I/O error whose errno is ENOSPC or EDQUOT (a quota
 * is a full disk for its user; the unix VFS maps only ENOSPC). */
static int store_rc_full(sqlite3 *db, int rc)
{
	int e;

	if ((rc & 0xff) == SQLITE_FULL) {
		return 1;
	}
	if ((rc & 0xff) != SQLITE_IOERR || db == NULL) {
		return 0;
	}
	e = sqlite3_system_errno(db);
	return e == ENOSPC || e == EDQUOT;
}

static void store_log_rc(sqlite3 *db, int rc, const char *what)
{
	const char *msg = db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc);

	if (store_rc_full(db, rc)) {
		store_note_full();
	}
	if (store_rc_transient(rc)) {
		log_warn("store: %.100s: %s", what, msg);
	} else {
		log_err("store: %.100s: %s", what, msg);
	}
}

/* ---- connections and the statement cache ---- */

/* The statement cache's key: FNV-1a over the length and the first and
 * last STORE_HASH_EDGE bytes. Statements run for every unit of work and
 * some are long; the whole text is compared on a hit anyway. */
#define STORE_HASH_EDGE 32

static unsigned store_hash(const char *s)
{
	size_t len = strlen(s);
	size_t head = len < 2 * STORE_HASH_EDGE ? len : STORE_HASH_EDGE;
	unsigned h = 2166136261u ^ (unsigned)len;
	size_t i;

	for (i = 0; i < head; i++) {
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	}
	for (i = len - (len - head < STORE_HASH_EDGE ? len - head : STORE_HASH_EDGE); i < len; i++) {
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	}
	return h;
}

static void store_conn_close(struct store_conn *cn)
{
	size_t i;
	int rc;

	if (cn == NULL) {
		return;
	}
	for (i = 0; i < STORE_STMT_BUCKETS; i++) {
		struct store_stmt *sm = cn->cn_stmts[i];

		while (sm != NULL) {
			struct store_stmt *next = sm->sm_next;

			sqlite3_finalize(sm->sm_stmt);
			free(sm->sm_sql);
			free(sm);
			sm = next;
		}
	}
	/* Should this be the last connection to the file, its close
	 * checkpoints and then leaves the -wal and -shm in place (persistent
	 * WAL), the -wal cut to nothing: a restored backup beside it replays
	 * no stale frame. No commit follows, so the limit changes nothing
	 * else. */
	if (cn->cn_db != NULL && cn->cn_rw) {
		(void)sqlite3_exec(cn->cn_db, "PRAGMA journal_size_limit = 0", NULL, NULL, NULL);
	}
	if (cn->cn_db != NULL) {
		rc = sqlite3_close(cn->cn_db);
		if (rc != SQLITE_OK) {
			store_log_rc(cn->cn_db, rc, "close");
		}
	}
	free(cn);
}

/* ---- the writer's WAL: one write per commit ---- */

/* SQLite writes each WAL frame with two pwrite calls (its 24-byte header,
 * then the page), so a commit of a hundred callbacks makes about two
 * thousand system calls; on this project's VMs the calls, not the bytes,
 * were a third of the writer thread's time (docs/benchmarks.md). The writer
 * connection therefore opens its WAL through this VFS, which gathers
 * contiguous writes in a buffer and hands them to the real file at once.
 * The buffer goes to the file before every sync, read, truncate, size query,
 * file control and close, and before a write elsewhere in the file. Only at
 * synchronous = FULL, where every commit syncs the WAL before it publishes
 * the commit to readers (the wal-index), so a frame that a reader or a
 * crash recovery can see is always in the file: the buffer holds only
 * frames of a transaction not yet committed. Every other file, and the WAL
 * at NORMAL or OFF, goes straight to the default VFS. */
#define STORE_WALBUF_NAME "idemhook-walbuf"
/* The unix VFS hands at most 128 KiB - 1 to one pwrite (it masks larger
 * sizes, and reports a short write as a full disk). */
#define STORE_WALBUF_SIZE (64 * 1024)

struct store_walbuf {
	sqlite3_file wb_base;   /* its methods: store_walbuf_io */
	sqlite3_file *wb_real;  /* the default VFS's file, after this struct */
	char *wb_buf;           /* STORE_WALBUF_SIZE bytes, on the first write */
	size_t wb_len;          /* bytes gathered */
	sqlite3_int64 wb_start; /* their offset in the file */
};

static sqlite3_vfs *store_walbuf_real;
static sqlite3_vfs store_walbuf_vfs;
static int store_walbuf_ok; /* registered */
/* The writer's VFS at NORMAL and OFF: the same, but the WAL goes straight
 * to the default VFS; only the sub-journal's writes are cut in pieces. */
#define STORE_SPLIT_NAME "idemhook-split"
static sqlite3_vfs store_split_vfs;
static int store_split_ok;

static int store_walbuf_flush(struct store_walbuf *wb)
{
	int rc;

	if (wb->wb_len == 0) {
		return SQLITE_OK;
	}
	rc = wb->wb_real->pMethods->xWrite(wb->wb_real, wb->wb_buf, (int)wb->wb_len, wb->wb_start);
	/* Dropped on failure too: the transaction fails, and SQLite writes its
	 * frames again from its own state. */
	wb->wb_len = 0;
	return rc;
}

static int store_walbuf_close(sqlite3_file *f)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc = store_walbuf_flush(wb);
	int rc2 = wb->wb_real->pMethods->xClose(wb->wb_real);

	free(wb->wb_buf);
	wb->wb_buf = NULL;
	return rc != SQLITE_OK ? rc : rc2;
}

static int store_walbuf_read(sqlite3_file *f, void *p, int amt, sqlite3_int64 off)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc = store_walbuf_flush(wb);

	return rc != SQLITE_OK ? rc : wb->wb_real->pMethods->xRead(wb->wb_real, p, amt, off);
}

static int store_walbuf_write(sqlite3_file *f, const void *p, int amt, sqlite3_int64 off)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc;

	if (wb->wb_len > 0 && (off != wb->wb_start + (sqlite3_int64)wb->wb_len ||
	                       wb->wb_len + (size_t)amt > STORE_WALBUF_SIZE)) {
		rc = store_walbuf_flush(wb);
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	if (wb->wb_buf == NULL) {
		wb->wb_buf = malloc(STORE_WALBUF_SIZE);
	}
	if (wb->wb_buf == NULL || (size_t)amt > STORE_WALBUF_SIZE) {
		/* In pieces the unix VFS takes whole: a sub-journal moving to its
		 * file writes up to STORE_SUBJOURNAL_SPILL at once. */
		while (amt > 0) {
			int n = amt > STORE_WALBUF_SIZE ? STORE_WALBUF_SIZE : amt;

			rc = wb->wb_real->pMethods->xWrite(wb->wb_real, p, n, off);
			if (rc != SQLITE_OK) {
				return rc;
			}
			p = (const char *)p + n;
			amt -= n;
			off += n;
		}
		return SQLITE_OK;
	}
	if (wb->wb_len == 0) {
		wb->wb_start = off;
	}
	memcpy(wb->wb_buf + wb->wb_len, p, (size_t)amt);
	wb->wb_len += (size_t)amt;
	return SQLITE_OK;
}

static int store_walbuf_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc = store_walbuf_flush(wb);

	return rc != SQLITE_OK ? rc : wb->wb_real->pMethods->xTruncate(wb->wb_real, size);
}

static int store_walbuf_sync(sqlite3_file *f, int flags)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc = store_walbuf_flush(wb);

	return rc != SQLITE_OK ? rc : wb->wb_real->pMethods->xSync(wb->wb_real, flags);
}

static int store_walbuf_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc = store_walbuf_flush(wb);

	return rc != SQLITE_OK ? rc : wb->wb_real->pMethods->xFileSize(wb->wb_real, size);
}

static int store_walbuf_lock(sqlite3_file *f, int level)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;

	return wb->wb_real->pMethods->xLock(wb->wb_real, level);
}

static int store_walbuf_unlock(sqlite3_file *f, int level)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;

	return wb->wb_real->pMethods->xUnlock(wb->wb_real, level);
}

static int store_walbuf_check_lock(sqlite3_file *f, int *out)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;

	return wb->wb_real->pMethods->xCheckReservedLock(wb->wb_real, out);
}

static int store_walbuf_fcntl(sqlite3_file *f, int op, void *arg)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc = store_walbuf_flush(wb);

	return rc != SQLITE_OK ? rc : wb->wb_real->pMethods->xFileControl(wb->wb_real, op, arg);
}

static int store_walbuf_sector_size(sqlite3_file *f)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;

	return wb->wb_real->pMethods->xSectorSize(wb->wb_real);
}

static int store_walbuf_device(sqlite3_file *f)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;

	return wb->wb_real->pMethods->xDeviceCharacteristics(wb->wb_real);
}

/* Version 1: a WAL file has no shared memory and is never memory-mapped. */
static const sqlite3_io_methods store_walbuf_io = {
        .iVersion = 1,
        .xClose = store_walbuf_close,
        .xRead = store_walbuf_read,
        .xWrite = store_walbuf_write,
        .xTruncate = store_walbuf_truncate,
        .xSync = store_walbuf_sync,
        .xFileSize = store_walbuf_file_size,
        .xLock = store_walbuf_lock,
        .xUnlock = store_walbuf_unlock,
        .xCheckReservedLock = store_walbuf_check_lock,
        .xFileControl = store_walbuf_fcntl,
        .xSectorSize = store_walbuf_sector_size,
        .xDeviceCharacteristics = store_walbuf_device,
};

static int store_walbuf_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags,
                             int *out_flags)
{
	struct store_walbuf *wb = (struct store_walbuf *)f;
	int rc;

	/* The WAL only through STORE_WALBUF_NAME; the sub-journal through
	 * both, for its large writes. */
	if (((flags & SQLITE_OPEN_WAL) == 0 || vfs != &store_walbuf_vfs) &&
	    (flags & SQLITE_OPEN_SUBJOURNAL) == 0) {
		/* The default VFS's file fills the start of f, which is larger. */
		return store_walbuf_real->xOpen(store_walbuf_real, name, f, flags, out_flags);
	}
	memset(wb, 0, sizeof(*wb));
	wb->wb_real = (sqlite3_file *)(wb + 1);
	rc = store_walbuf_real->xOpen(store_walbuf_real, name, wb->wb_real, flags, out_flags);
	if (rc != SQLITE_OK) {
		/* SQLite calls no xClose on a file whose pMethods is NULL. */
		if (wb->wb_real->pMethods != NULL) {
			wb->wb_real->pMethods->xClose(wb->wb_real);
		}
		wb->wb_base.pMethods = NULL;
		return rc;
	}
	wb->wb_base.pMethods = &store_walbuf_io;
	return SQLITE_OK;
}

/* Registers STORE_WALBUF_NAME beside the default VFS (not as the default). */
static void store_walbuf_register(void)
{
	store_walbuf_real = sqlite3_vfs_find(NULL);
	if (store_walbuf_real == NULL) {
		return;
	}
	store_walbuf_vfs = *store_walbuf_real;
	store_walbuf_vfs.pNext = NULL;
	store_walbuf_vfs.zName = STORE_WALBUF_NAME;
	store_walbuf_vfs.szOsFile = (int)sizeof(struct store_walbuf) + store_walbuf_real->szOsFile;
	store_walbuf_vfs.xOpen = store_walbuf_open;
	store_walbuf_ok = sqlite3_vfs_register(&store_walbuf_vfs, 0) == SQLITE_OK;
	store_split_vfs = store_walbuf_vfs;
	store_split_vfs.zName = STORE_SPLIT_NAME;
	store_split_ok = store_walbuf_ok && sqlite3_vfs_register(&store_split_vfs, 0) == SQLITE_OK;
}

/* The page cache: SQLite's own (pcache1) behind a wrapper that skips one
 * call. When a b-tree split puts its new pages in order, SQLite swaps two
 * page numbers through a temporary one, the lock-byte page's (1,048,577 at
 * 1 KiB pages), and pcache1 then believes it may hold a page that far
 * past the end of the database. Every COMMIT truncates the cache at the
 * database's size, and pcache1 walks its whole hash table whenever that
 * believed largest page is more than a table's length past the end: a
 * walk of thousands of buckets after almost every batch of claims: 3 % of
 * the writer's CPU in the daemon at 32 connections, 6 to 7 % in bench_store
 * (issue 24; perf, and a uprobe on the walk that read pcache1's bound). The
 * wrapper keeps its own bound on the page numbers the cache holds (every
 * page fetched, every page given a new number other than that temporary
 * one) and passes a truncation on only when a page at or past its limit
 * may be there; a page still parked at the temporary number keeps every
 * truncation passed on. */
struct store_pcache {
	sqlite3_pcache *pc_real;
	unsigned pc_max;  /* no page in the cache has a larger number */
	unsigned pc_temp; /* the lock-byte page: the split's temporary number */
	unsigned pc_held; /* pages given the temporary number and not yet moved */
};
static sqlite3_pcache_methods2 store_pcache_real;
static _Atomic uint64_t store_pcache_passed;  /* truncations passed on */
static _Atomic uint64_t store_pcache_skipped; /* truncations with nothing to do */

static int store_pcache_init(void *arg)
{
	(void)arg;
	return store_pcache_real.xInit(store_pcache_real.pArg);
}

static void store_pcache_shutdown(void *arg)
{
	(void)arg;
	if (store_pcache_real.xShutdown != NULL) {
		store_pcache_real.xShutdown(store_pcache_real.pArg);
	}
}

static sqlite3_pcache *store_pcache_create(int page_size, int extra_size, int purgeable)
{
	struct store_pcache *pc = sqlite3_malloc((int)sizeof(*pc));

	if (pc == NULL) {
		return NULL;
	}
	pc->pc_real = store_pcache_real.xCreate(page_size, extra_size, purgeable);
	if (pc->pc_real == NULL) {
		sqlite3_free(pc);
		return NULL;
	}
	pc->pc_max = 0;
	pc->pc_temp = page_size > 0 ? STORE_LOCK_BYTE_OFFSET / (unsigned)page_size + 1 : 0;
	pc->pc_held = 0;
	return (sqlite3_pcache *)pc;
}

static void store_pcache_cachesize(sqlite3_pcache *p, int pages)
{
	store_pcache_real.xCachesize(((struct store_pcache *)p)->pc_real, pages);
}

static int store_pcache_pagecount(sqlite3_pcache *p)
{
	return store_pcache_real.xPagecount(((struct store_pcache *)p)->pc_real);
}

static sqlite3_pcache_page *store_pcache_fetch(sqlite3_pcache *p, unsigned key, int create)
{
	struct store_pcache *pc = (struct store_pcache *)p;
	sqlite3_pcache_page *pg = store_pcache_real.xFetch(pc->pc_real, key, create);

	if (pg != NULL && key > pc->pc_max) {
		pc->pc_max = key;
	}
	return pg;
}

static void store_pcache_unpin(sqlite3_pcache *p, sqlite3_pcache_page *pg, int discard)
{
	store_pcache_real.xUnpin(((struct store_pcache *)p)->pc_real, pg, discard);
}

static void store_pcache_rekey(sqlite3_pcache *p, sqlite3_pcache_page *pg, unsigned from,
                               unsigned to)
{
	struct store_pcache *pc = (struct store_pcache *)p;

	store_pcache_real.xRekey(pc->pc_real, pg, from, to);
	if (from == pc->pc_temp && pc->pc_held > 0) {
		pc->pc_held--;
	}
	if (to == pc->pc_temp) {
		pc->pc_held++;
	} else if (to > pc->pc_max) {
		pc->pc_max = to;
	}
}

static void store_pcache_truncate(sqlite3_pcache *p, unsigned limit)
{
	struct store_pcache *pc = (struct store_pcache *)p;

	if (limit > pc->pc_max && (pc->pc_held == 0 || limit > pc->pc_temp)) {
		atomic_fetch_add_explicit(&store_pcache_skipped, 1, memory_order_relaxed);
#ifndef NDEBUG
		/* Builds with assertions (the tests') check the bound: the
		 * truncation skipped would have dropped nothing. */
		int pages = store_pcache_real.xPagecount(pc->pc_real);

		store_pcache_real.xTruncate(pc->pc_real, limit);
		assert(store_pcache_real.xPagecount(pc->pc_real) == pages);
#endif
		return;
	}
	atomic_fetch_add_explicit(&store_pcache_passed, 1, memory_order_relaxed);
	store_pcache_real.xTruncate(pc->pc_real, limit);
	if (limit > 0 && pc->pc_max >= limit) {
		pc->pc_max = limit - 1;
	}
	if (limit <= pc->pc_temp) {
		pc->pc_held = 0;
	}
}

static void store_pcache_destroy(sqlite3_pcache *p)
{
	struct store_pcache *pc = (struct store_pcache *)p;

	store_pcache_real.xDestroy(pc->pc_real);
	sqlite3_free(pc);
}

static void store_pcache_shrink(sqlite3_pcache *p)
{
	store_pcache_real.xShrink(((struct store_pcache *)p)->pc_real);
}

static void store_pcache_counts(uint64_t *ret_passed, uint64_t *ret_skipped)
{
	*ret_passed = atomic_load_explicit(&store_pcache_passed, memory_order_relaxed);
	*ret_skipped = atomic_load_explicit(&store_pcache_skipped, memory_order_relaxed);
}

/* Installs the wrapper around SQLite's default page cache; before SQLite
 * is initialised, or not at all (SQLite then keeps its own). */
static void store_pcache_register(void)
{
	static const sqlite3_pcache_methods2 wrapper = {
	        .iVersion = 1,
	        .xInit = store_pcache_init,
	        .xShutdown = store_pcache_shutdown,
	        .xCreate = store_pcache_create,
	        .xCachesize = store_pcache_cachesize,
	        .xPagecount = store_pcache_pagecount,
	        .xFetch = store_pcache_fetch,
	        .xUnpin = store_pcache_unpin,
	        .xRekey = store_pcache_rekey,
	        .xTruncate = store_pcache_truncate,
	        .xDestroy = store_pcache_destroy,
	        .xShrink = store_pcache_shrink,
	};

	if (sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &store_pcache_real) != SQLITE_OK ||
	    store_pcache_real.xCreate == NULL || store_pcache_real.xShrink == NULL) {
		return;
	}
	(void)sqlite3_config(SQLITE_CONFIG_PCACHE2, &wrapper);
}

static struct store_conn *store_conn_open_vfs(const char *path, int flags, unsigned busy_timeout_ms,
                                              const char *vfs)
{
	struct store_conn *cn;
	char quoted[256];
	int rc;

	cn = calloc(1, sizeof(*cn));
	if (cn != NULL) {
		cn->cn_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	}
	if (cn == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	rc = sqlite3_open_v2(path, &cn->cn_db, flags | SQLITE_OPEN_NOMUTEX, vfs);
	if (rc != SQLITE_OK) {
		log_err("store: cannot open \"%s\": %s", log_quote(quoted, sizeof(quoted), path),
		        cn->cn_db != NULL ? sqlite3_errmsg(cn->cn_db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(cn->cn_db, (int)busy_timeout_ms);
	/* The -wal and -shm stay when the last connection closes (the daemon
	 * stopping, a command that wrote): a user who may read the database
	 * but not create files beside it (a monitoring user in its group)
	 * can read it only through them (https://www.sqlite.org/walformat.html,
	 * SQLITE_FCNTL_PERSIST_WAL; SQLite 3.22.0 and later open them
	 * read-only). */
	if ((flags & SQLITE_OPEN_READWRITE) != 0) {
		int on = 1;

		cn->cn_rw = 1;
		(void)sqlite3_file_control(cn->cn_db, "main", SQLITE_FCNTL_PERSIST_WAL, &on);
	}
	return cn;
fail:
	store_conn_close(cn);
	return NULL;
}

/* Every connection through STORE_SPLIT_NAME: the sub-journal's size before
 * it moves to a file (STORE_SUBJOURNAL_SPILL) is the whole process's, and
 * the default VFS cannot take its first write. */
static struct store_conn *store_conn_open(const char *path, int flags, unsigned busy_timeout_ms)
{
	return store_conn_open_vfs(path, flags, busy_timeout_ms,
	                           store_split_ok ? STORE_SPLIT_NAME : NULL);
}

static int store_sql_is_blank(const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != ';') {
			return 0;
		}
	}
	return 1;
}

static sqlite3_stmt *store_prepare(struct store_conn *cn, const char *sql, unsigned flags)
{
	sqlite3_stmt *stmt = NULL;
	const char *tail = NULL;
	int rc;

	rc = sqlite3_prepare_v3(cn->cn_db, sql, -1, flags, &stmt, &tail);
	if (rc != SQLITE_OK) {
		store_log_rc(cn->cn_db, rc, sql);
		return NULL;
	}
	if (stmt == NULL || (tail != NULL && !store_sql_is_blank(tail))) {
		log_err("store: %.100s: exactly one statement expected", sql);
		sqlite3_finalize(stmt);
		return NULL;
	}
	return stmt;
}

/* Returns the cached statement for sql (marked busy, *ret_entry set), or a
 * temporary one (*ret_entry NULL) when the cached one is in use or the cache
 * is full. NULL on error (logged). */
static sqlite3_stmt *store_stmt_get(struct store_conn *cn, const char *sql,
                                    struct store_stmt **ret_entry)
{
	unsigned b = store_hash(sql) % STORE_STMT_BUCKETS;
	struct store_stmt *sm;

	*ret_entry = NULL;
	for (sm = cn->cn_stmts[b]; sm != NULL; sm = sm->sm_next) {
		if (strcmp(sm->sm_sql, sql) == 0) {
			break;
		}
	}
	if (sm != NULL && !sm->sm_busy) {
		sm->sm_busy = 1;
		*ret_entry = sm;
		return sm->sm_stmt;
	}
	if (sm != NULL || cn->cn_n_stmts >= STORE_STMT_CACHE_MAX) {
		return store_prepare(cn, sql, 0);
	}
	sm = calloc(1, sizeof(*sm));
	if (sm == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	sm->sm_sql = strdup(sql);
	if (sm->sm_sql == NULL) {
		log_err("store: out of memory");
		goto fail;
	}
	sm->sm_stmt = store_prepare(cn, sql, SQLITE_PREPARE_PERSISTENT);
	if (sm->sm_stmt == NULL) {
		goto fail;
	}
	sm->sm_busy = 1;
	sm->sm_next = cn->cn_stmts[b];
	cn->cn_stmts[b] = sm;
	cn->cn_n_stmts++;
	*ret_entry = sm;
	return sm->sm_stmt;
fail:
	free(sm->sm_sql);
	free(sm);
	return NULL;
}

/* Resets a statement so it holds no lock and no borrowed parameter. */
static void store_stmt_put(struct store_stmt *entry, sqlite3_stmt *stmt)
{
	if (entry == NULL) {
		sqlite3_finalize(stmt);
		return;
	}
	sqlite3_reset(stmt);
	sqlite3_clear_bindings(stmt);
	entry->sm_busy = 0;
}

/* ---- rows and statements ---- */
static int store_row_fill(sqlite3_stmt *stmt, struct store_row *row)
{
	int n = sqlite3_column_count(stmt);
	int i;

	memset(row, 0, sizeof(*row));
	if (n > STORE_ROW_MAX) {
		log_err("store: %.100s: more than %d result columns", sqlite3_sql(stmt),
		        STORE_ROW_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct store_value *v = &row->sr_cols[i];
		int type = sqlite3_column_type(stmt, i);
		const void *p;
		size_t len;
		char *copy;

		row->sr_n = (size_t)i + 1;
		if (type == SQLITE_NULL) {
			v->sv_type = STORE_NULL;
			continue;
		}
		if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
			v->sv_type = STORE_INT;
			v->sv_int = sqlite3_column_int64(stmt, i);
			continue;
		}
		if (type == SQLITE_TEXT) {
			p = sqlite3_column_text(stmt, i);
		} else {
			p = sqlite3_column_blob(stmt, i);
		}
		len = (size_t)sqlite3_column_bytes(stmt, i);
		copy = malloc(len + 1);
		if (copy == NULL) {
			log_err("store: out of memory");
			store_row_finish(row);
			return -1;
		}
		if (len > 0) {
			memcpy(copy, p, len);
		}
		copy[len] = '\0';
		v->sv_type = type == SQLITE_TEXT ? STORE_TEXT : STORE_BLOB;
		v->sv_text = copy;
		v->sv_len = len;
	}
	return 0;
}

static int store_bind(sqlite3 *db, sqlite3_stmt *stmt, const struct store_value *params,
                      size_t n_params)
{
	size_t i;
	int rc;

	if ((size_t)sqlite3_bind_parameter_count(stmt) != n_params) {
		log_err("store: %.100s: %d parameters expected, %zu given", sqlite3_sql(stmt),
		        sqlite3_bind_parameter_count(stmt), n_params);
		return -1;
	}
	for (i = 0; i < n_params; i++) {
		const struct store_value *p = &params[i];
		int idx = (int)i + 1;

		switch (p->sv_type) {
		case STORE_INT:
			rc = sqlite3_bind_int64(stmt, idx, p->sv_int);
			break;
		case STORE_TEXT:
			if (p->sv_text == NULL) {
				rc = sqlite3_bind_null(stmt, idx);
			} else {
				rc = sqlite3_bind_text64(stmt, idx, p->sv_text,
				                         p->sv_len > 0 ? p->sv_len
				                                       : strlen(p->sv_text),
				                         SQLITE_STATIC, SQLITE_UTF8);
			}
			break;
		case STORE_BLOB:
			/* A NULL pointer would bind SQL NULL; an empty blob stays a blob. */
			if (p->sv_text == NULL || p->sv_len == 0) {
				rc = sqlite3_bind_zeroblob(stmt, idx, 0);
			} else {
				rc = sqlite3_bind_blob64(stmt, idx, p->sv_text, p->sv_len,
				                         SQLITE_STATIC);
			}
			break;
		default:
			rc = sqlite3_bind_null(stmt, idx);
			break;
		}
		if (rc != SQLITE_OK) {
			store_log_rc(db, rc, sqlite3_sql(stmt));
			return -1;
		}
	}
	return 0;
}

/* Runs sql on tx's connection, calling fn for each row (fn may take the
 * row's contents and leave it empty) until fn returns 1 or -1. Statements
 * that write are always stepped to the end. Returns 1 when fn stopped, 0 at
 * the end of the rows, -1 on error (logged). */
static int store_sqlite_run(struct store_conn *cn, const char *sql, const struct store_value *params,
                            size_t n_params, store_row_fn fn, void *arg, int64_t *ret_changes)
{
	sqlite3 *db = cn->cn_db;
	struct store_stmt *entry;
	struct store_row row;
	sqlite3_stmt *stmt;
	int64_t before;
	int stopped = 0;
	int rc;
	int r;

	stmt = store_stmt_get(cn, sql, &entry);
	if (stmt == NULL) {
		return -1;
	}
	if (store_bind(db, stmt, params, n_params) < 0) {
		goto fail;
	}
	before = sqlite3_total_changes(db);
	for (;;) {
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_DONE) {
			break;
		}
		if (rc != SQLITE_ROW) {
			store_log_rc(db, rc, sql);
			goto fail;
		}
		if (stopped || fn == NULL) {
			continue;
		}
		if (store_row_fill(stmt, &row) < 0) {
			goto fail;
		}
		r = fn(arg, &row);
		store_row_finish(&row);
		if (r < 0) {
			goto fail;
		}
		if (r > 0) {
			stopped = 1;
			if (sqlite3_stmt_readonly(stmt)) {
				break;
			}
		}
	}
	if (ret_changes != NULL) {
		*ret_changes = sqlite3_total_changes(db) != before ? sqlite3_changes(db) : 0;
	}
	store_stmt_put(entry, stmt);
	return stopped;
fail:
	store_stmt_put(entry, stmt);
	return -1;
}

static int store_user_version(struct store_conn *cn, int *ret)
{
	struct store_tx tx = {.tx_engine = en, .tx_conn = cn};
	struct store_row row;
	int r;

	r = store_query(&tx, "PRAGMA user_version", NULL, 0, &row);
	if (r < 0) {
		return -1;
	}
	*ret = r > 0 ? (int)store_row_int(&row, 0) : 0;
	if (r > 0) {
		store_row_finish(&row);
	}
	return 0;
}

/* Syncs the directory that holds dir, so that dir's entry in it is
 * durable: SQLite syncs the database's own directory (for its WAL), never
 * the entry of that directory in its parent. */
static int store_sync_parent(const char *dir)
{
	char quoted[256];
	char *parent = strdup(dir);
	char *slash;
	int fd;
	int rc = 0;

	if (parent == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	slash = strrchr(parent, '/');
	if (slash == NULL) {
		snprintf(parent, strlen(parent) + 1, ".");
	} else {
		slash[slash == parent ? 1 : 0] = '\0';
	}
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		log_err("store: cannot sync directory \"%s\": %s", log_quote(quoted, sizeof(quoted), parent),
		        strerror(errno));
		rc = -1;
	}
	if (fd >= 0) {
		close(fd);
	}
	free(parent);
	return rc;
}

static int store_mkdir_parent(const char *path)
{
	char quoted[256];
	char *dir;
	char *p;

	dir = strdup(path);
	if (dir == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	p = strrchr(dir, '/');
	if (p == NULL || p == dir) {
		free(dir);
		return 0;
	}
	*p = '\0';
	for (p = dir + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0') {
			continue;
		}
		*p = '\0';
		if (mkdir(dir, STORE_DIR_MODE) == 0) {
			/* Exactly 0700, whatever the umask. */
			if (chmod(dir, STORE_DIR_MODE) < 0) {
				log_err("store: cannot chmod directory \"%s\": %s",
				        log_quote(quoted, sizeof(quoted), dir), strerror(errno));
				goto fail;
			}
			/* A power cut must not take the new directory (and the
			 * database that will be in it) away. */
			if (store_sync_parent(dir) < 0) {
				goto fail;
			}
		} else if (errno != EEXIST) {
			if (errno == EACCES || errno == EPERM || errno == EROFS) {
				store_open_denied();
			}
			log_err("store: cannot create directory \"%s\": %s",
			        log_quote(quoted, sizeof(quoted), dir), strerror(errno));
			goto fail;
		}
		*p = c;
		if (c == '\0') {
			break;
		}
	}
	free(dir);
	return 0;
fail:
	free(dir);
	return -1;
}

static int store_migrate_conn(struct store_conn *cn)
{
	sqlite3 *db = cn->cn_db;
	char sql[64];
	char *err = NULL;
	size_t i;
	int version;
	int rc;

	for (i = 0; i < migrations_count; i++) {
		const struct migration *mg = &migrations[i];
		int applied = 0;

		if (store_conn_exec(en, cn, "BEGIN IMMEDIATE") < 0) {
			goto fail;
		}
		/* Read again under the write lock: another process may have migrated. */
		if (store_user_version(cn, &version) < 0) {
			goto fail;
		}
		if (version < mg->mg_version) {
			rc = sqlite3_exec(db, mg->mg_sql, NULL, NULL, &err);
			if (rc != SQLITE_OK) {
				if (store_rc_full(db, rc)) {
					store_note_full();
				}
				log_err("store: migration %s failed: %s", mg->mg_name,
				        err != NULL ? err : sqlite3_errstr(rc));
				goto fail;
			}
			snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", mg->mg_version);
			rc = sqlite3_exec(db, sql, NULL, NULL, &err);
			if (rc != SQLITE_OK) {
				log_err("store: migration %s: %s", mg->mg_name,
				        err != NULL ? err : sqlite3_errstr(rc));
				goto fail;
			}
			applied = 1;
		}
		if (store_conn_exec(en, cn, "COMMIT") < 0) {
			goto fail;
		}
		if (applied) {
			log_info("store: applied migration %s", mg->mg_name);
		}
	}
	return 0;
fail:
	sqlite3_free(err);
	/* A lock held elsewhere past the busy timeout: this migration is
	 * undone whole, the ones before it stay, and a new try goes on. */
	rc = sqlite3_errcode(db);
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
		store_open_busy();
	}
	if (!sqlite3_get_autocommit(db)) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	return -1;
}

/* Whether this process may open the database at path as a reader (write
 * 0) or a writer without SQLite failing half-way ("attempt to write a
 * readonly database") or making files it must not. SQLite reads a database
 * in WAL mode through its -wal and -shm files and creates them when they
 * are missing, a read-only connection too; with neither, a user who may not
 * create them cannot read it at all (only the immutable parameter would
 * let it, and that is wrong while a writer runs: reads of pages a
 * checkpoint is rewriting). A reader creates them only as root or as the
 * database's owner (SQLite gives them the database's owner and mode, as the
 * daemon's own): made by another user they would keep the daemon from
 * writing its own WAL index. Returns 0, or -1 (the cause and its fix
 * logged, store_open_denied). */
static int store_sqlite_access(const char *path, int write)
{
	static const char *const suffix[] = {"-wal", "-shm"};
	const char *fix = "Start idemhook serve on it, or run idemhook migrate once as the "
	                  "database's owner (both leave the files in place), or run this command "
	                  "as the owner";
	char quoted[256];
	char name[PATH_MAX];
	char dir[PATH_MAX];
	const char *missing = "";
	int n_missing = 0;
	int mode = write ? R_OK | W_OK : R_OK;
	struct stat sb;
	char *slash;
	size_t i;
	int n;

	if (strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0 ||
	    stat(path, &sb) < 0 || strlen(path) + sizeof("-wal") > sizeof(name)) {
		return 0; /* SQLite says what else is wrong */
	}
	if (faccessat(AT_FDCWD, path, mode, AT_EACCESS) < 0) {
		log_err("store: cannot %s the database \"%s\": %s: %s", write ? "write" : "read",
		        log_quote(quoted, sizeof(quoted), path), strerror(errno),
		        write ? "run this command as the database's owner (the user idemhook serve "
		                "runs as), or root"
		              : "give this user read access to it (its group), or run this command "
		                "as the database's owner");
		goto denied;
	}
	for (i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(name, sizeof(name), "%s%s", path, suffix[i]);
		if (faccessat(AT_FDCWD, name, F_OK, AT_EACCESS) < 0 && errno == ENOENT) {
			n_missing++;
			missing = n_missing > 1 ? "its -wal and -shm files are"
			          : i == 0      ? "its -wal file is"
			                        : "its -shm file is";
			continue;
		}
		if (faccessat(AT_FDCWD, name, mode, AT_EACCESS) < 0) {
			log_err("store: cannot %s \"%s\": %s: give it the database's owner, group "
			        "and mode (chown --reference and chmod --reference the database), "
			        "or run this command as the database's owner",
			        write ? "write" : "read", log_quote(quoted, sizeof(quoted), name),
			        strerror(errno));
			goto denied;
		}
	}
	if (n_missing == 0) {
		return 0;
	}
	n = snprintf(dir, sizeof(dir), "%s", path);
	slash = n > 0 ? strrchr(dir, '/') : NULL;
	if (slash == NULL) {
		snprintf(dir, sizeof(dir), ".");
	} else {
		slash[slash == dir ? 1 : 0] = '\0';
	}
	if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0) {
		int e = errno;

		log_err("store: cannot %s \"%s\": %s missing and this user may not create %s in "
		        "\"%s\" (%s), and SQLite %s a database in WAL mode only through them. %s",
		        write ? "write" : "read", log_quote(quoted, sizeof(quoted), path), missing,
		        n_missing > 1 ? "them" : "it", dir, strerror(e), write ? "writes" : "reads",
		        write ? "Run this command as the database's owner (the user idemhook serve "
		                "runs as), or root"
		              : fix);
		goto denied;
	}
	if (!write && geteuid() != 0 && geteuid() != sb.st_uid) {
		log_err("store: cannot read \"%s\": %s missing, SQLite reads a database in WAL "
		        "mode only through them, and made by this user (not the database's owner) "
		        "they would keep idemhook serve from writing. %s",
		        log_quote(quoted, sizeof(quoted), path), missing, fix);
		goto denied;
	}
	return 0;
denied:
	store_open_denied();
	return -1;
}

/* After SQLite refused to open or read the database: a refusal of the
 * operating system's permissions that store_sqlite_access could not see
 * coming (the files changed in between) counts as one too. */
static void store_sqlite_refused(struct store_conn *cn)
{
	int rc = cn != NULL ? sqlite3_errcode(cn->cn_db) : SQLITE_OK;

	if (rc == SQLITE_READONLY || rc == SQLITE_PERM || rc == SQLITE_AUTH) {
		log_err("store: this user may not use the database's files as SQLite needs them "
		        "(its -wal and -shm): run this command as the database's owner "
		        "(docs/cli.md, Permissions)");
		store_open_denied();
	} else if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
		store_open_busy();
	}
}

static const char *store_sync_pragma(enum store_sync sync)
{
	switch (sync) {
	case STORE_SYNC_NORMAL:
		return "PRAGMA synchronous = NORMAL";
	case STORE_SYNC_OFF:
		return "PRAGMA synchronous = OFF";
	default:
		return "PRAGMA synchronous = FULL";
	}
}

/* Creates the database file empty with mode 0600 when it does not exist
 * yet: SQLite would create it 0644 less the umask, and gives the -wal and
 * -shm files the database's mode. An existing file keeps its mode. Returns
 * 0 or -1 (logged). */
static int store_create_private(const char *path)
{
	char quoted[256];
	int fd;

	if (path[0] == '\0' || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
		return 0;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, STORE_FILE_MODE);
	if (fd < 0 && errno == EEXIST) {
		return 0;
	}
	if (fd < 0 || fchmod(fd, STORE_FILE_MODE) < 0) {
		if (errno == EACCES || errno == EPERM || errno == EROFS) {
			store_open_denied();
		}
		log_err("store: cannot create \"%s\" with mode 0600: %s",
		        log_quote(quoted, sizeof(quoted), path), strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	close(fd);
	return 0;
}

/* Opens the write connection: refuses a newer schema before changing
 * anything, then WAL, synchronous, foreign keys and (unless no_migrate)
 * pending migrations. */
static struct store_conn *store_open_writer(const char *path, enum store_sync sync,
                                            unsigned busy_timeout_ms, int no_migrate, int *ret_from,
                                            int *ret_to)
{
	struct store_tx tx = {.tx_engine = en};
	struct store_row row;
	struct store_conn *cn;
	int newest = store_schema_version();
	int version;
	int wal;
	int r;

	if (store_mkdir_parent(path) < 0 || (!no_migrate && store_create_private(path) < 0) ||
	    store_sqlite_access(path, 1) < 0) {
		return NULL;
	}
	/* A store that may not migrate has no use for a new, empty file. */
	/* The WAL's writes gathered per commit: only where each commit syncs
	 * the WAL before readers see it (store_walbuf_open). */
	cn = store_conn_open_vfs(path,
	                         SQLITE_OPEN_READWRITE | (no_migrate ? 0 : SQLITE_OPEN_CREATE),
	                         busy_timeout_ms,
	                         sync == STORE_SYNC_FULL && store_walbuf_ok ? STORE_WALBUF_NAME
	                         : store_split_ok                           ? STORE_SPLIT_NAME
	                                                                    : NULL);
	if (cn == NULL) {
		return NULL;
	}
	tx.tx_conn = cn;
	if (store_user_version(cn, &version) < 0) {
		goto fail;
	}
	if (store_version_check(version, !no_migrate) < 0) {
		goto fail;
	}
	/* A new file's page size (before anything else, or it is fixed):
	 * every page a commit changes is written whole to the WAL and again by
	 * the checkpoint, and a callback changes a few pages at random places
	 * (docs/benchmarks.md). */
	if (version == 0 && store_conn_exec(en, cn, "PRAGMA page_size = " STORE_PAGE_SIZE) < 0) {
		goto fail;
	}
	/* Only a file without tables takes this (a no-op otherwise): gc can
	 * then give freed pages back while serving (store_reclaim). */
	if (version == 0 && store_conn_exec(en, cn, "PRAGMA auto_vacuum = INCREMENTAL") < 0) {
		goto fail;
	}
	r = store_query(&tx, "PRAGMA journal_mode = WAL", NULL, 0, &row);
	if (r < 0) {
		goto fail;
	}
	wal = r > 0 && store_row_text(&row, 0) != NULL &&
	      strcasecmp(store_row_text(&row, 0), "wal") == 0;
	if (r > 0) {
		store_row_finish(&row);
	}
	if (!wal) {
		log_err("store: the database cannot switch to WAL mode");
		goto fail;
	}
	if (store_conn_exec(en, cn, store_sync_pragma(sync)) < 0 ||
	    store_conn_exec(en, cn, "PRAGMA foreign_keys = ON") < 0 ||
	    store_conn_exec(en, cn, "PRAGMA cache_size = -" STORE_WRITER_CACHE_KIB) < 0) {
		goto fail;
	}
	if (ret_from != NULL) {
		*ret_from = version;
	}
	if (!no_migrate && version < newest && store_migrate_conn(cn) < 0) {
		goto fail;
	}
	if (store_user_version(cn, &version) < 0) {
		goto fail;
	}
	if (ret_to != NULL) {
		*ret_to = version;
	}
	return cn;
fail:
	store_sqlite_refused(cn);
	/* The version reached (each migration commits whole), for the
	 * caller to say what is unchanged. */
	if (cn != NULL && ret_to != NULL && store_user_version(cn, &version) == 0) {
		*ret_to = version;
	}
	store_conn_close(cn);
	return NULL;
}

/* ---- the checkpointer ---- */

/* After each commit: SQLite reports the frames now in the WAL. The writer
 * connection runs no checkpoint of its own (this hook replaces the
 * auto-checkpoint); past STORE_CKPT_FRAMES the checkpointer is woken. */
static int store_wal_hook(void *arg, sqlite3 *handle, const char *name, int frames)
{
	struct store_db *db = arg;

	(void)handle;
	(void)name;
	if (frames < db->db_wal_frames) {
		db->db_ckpt_asked = 0; /* the WAL started over */
		db->db_wal_written += frames;
	} else {
		db->db_wal_written += frames - db->db_wal_frames;
	}
	__atomic_store_n(&db->db_wal_frames, frames, __ATOMIC_RELEASE);
	/* Before any claim of this commit is answered: a kept read snapshot
	 * older than it is not used again (store_sqlite_reader_get). */
	__atomic_add_fetch(&db->db_commits, 1, __ATOMIC_RELEASE);
	/* Once per STORE_CKPT_FRAMES new frames, not after every commit: a
	 * checkpoint costs two fsyncs, and the WAL keeps its length until the
	 * writer rewinds it. */
	if (frames - db->db_ckpt_asked >= STORE_CKPT_FRAMES && db->db_ckpt.ck_running) {
		db->db_ckpt_asked = frames;
		db->db_ckpt_round = __atomic_load_n(&db->db_ckpt.ck_rounds, __ATOMIC_ACQUIRE);
		pthread_mutex_lock(&db->db_ckpt.ck_mutex);
		if (!db->db_ckpt.ck_wanted) {
			db->db_ckpt.ck_wanted = 1;
			pthread_cond_signal(&db->db_ckpt.ck_cond);
		}
		pthread_mutex_unlock(&db->db_ckpt.ck_mutex);
	}
	return SQLITE_OK;
}

static int64_t store_mono_ms(void);

/* Ends every kept read snapshot at least min_age_ms old whose thread is not
 * using it: on the checkpointer's thread those left idle STORE_SNAPSHOT_MS,
 * on the writer's before it starts the WAL over all of them. Returns the
 * number of snapshots still open. */
static int store_snapshots_reap(struct store_db *db, int64_t min_age_ms)
{
	struct store_conn *cn;
	int64_t now = store_mono_ms();
	int open = 0;

	pthread_mutex_lock(&db->db_mutex);
	for (cn = db->db_readers; cn != NULL; cn = cn->cn_next) {
		if (pthread_mutex_trylock(&cn->cn_mutex) != 0) {
			open++;
			continue;
		}
		if (cn->cn_held && now - cn->cn_held_ms >= min_age_ms) {
			store_conn_exec(en, cn, "COMMIT");
			cn->cn_held = 0;
		}
		open += cn->cn_held;
		pthread_mutex_unlock(&cn->cn_mutex);
	}
	pthread_mutex_unlock(&db->db_mutex);
	return open;
}

/* Waits about STORE_SNAPSHOT_MS on ck_cond (held) unless a checkpoint is
 * wanted or the store stops meanwhile. */
static void store_ckpt_wait_snapshot(struct store_ckpt *ck)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)STORE_SNAPSHOT_MS * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	while (!ck->ck_wanted && !ck->ck_stopping &&
	       pthread_cond_timedwait(&ck->ck_cond, &ck->ck_mutex, &until) == 0) {
	}
}

/* The checkpointer's work after one wake: PASSIVE rounds, each copying what
 * no reader still needs without ever blocking the writer, which goes on
 * appending meanwhile; another round while the frames committed during the
 * last one are more than STORE_CKPT_TAIL and the last one moved on. */
static void store_ckpt_rounds(struct store_db *db)
{
	struct store_ckpt *ck = &db->db_ckpt;
	int log_frames;
	int done_frames;
	int last = -1;
	int round;
	int rc;

	for (round = 0; round < STORE_CKPT_ROUNDS_MAX; round++) {
		log_frames = 0;
		done_frames = 0;
		pthread_mutex_lock(&ck->ck_run_mutex);
		rc = sqlite3_wal_checkpoint_v2(ck->ck_conn->cn_db, NULL, SQLITE_CHECKPOINT_PASSIVE,
		                               &log_frames, &done_frames);
		pthread_mutex_unlock(&ck->ck_run_mutex);
		if (rc != SQLITE_OK) {
			if (rc != SQLITE_BUSY) {
				store_log_rc(ck->ck_conn->cn_db, rc, "checkpoint");
			}
			return;
		}
		/* The WAL started over (done_frames is then of the new one), a
		 * reader holds the copy back, or little is left. */
		if (done_frames <= last ||
		    __atomic_load_n(&db->db_wal_frames, __ATOMIC_ACQUIRE) - done_frames <=
		            STORE_CKPT_TAIL ||
		    __atomic_load_n(&ck->ck_stopping, __ATOMIC_ACQUIRE)) {
			return;
		}
		last = done_frames;
	}
}

/* Syncs the database file after the rounds. SQLite syncs it only at the
 * end of a checkpoint that reached the end of the WAL, which a PASSIVE
 * round running beside commits never does: every page the rounds copied
 * was left for the writer's RESTART to sync, 12,000 pages at random
 * places, 7 to 17 ms of fsync with nothing committed (issue 24, eighth
 * round). Synced here, the restart syncs only the pages it copies. */
static void store_ckpt_sync(struct store_ckpt *ck)
{
	sqlite3_file *file = NULL;
	int rc;

	if (!ck->ck_sync) {
		return;
	}
	rc = sqlite3_file_control(ck->ck_conn->cn_db, "main", SQLITE_FCNTL_FILE_POINTER, &file);
	if (rc != SQLITE_OK || file == NULL || file->pMethods == NULL) {
		return;
	}
	rc = file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
	if (rc != SQLITE_OK) {
		store_log_rc(ck->ck_conn->cn_db, rc, "checkpoint sync");
	}
}

static void *store_ckpt_main(void *arg)
{
	struct store_db *db = arg;
	struct store_ckpt *ck = &db->db_ckpt;

	pthread_setname_np(pthread_self(), "store-ckpt");
	pthread_mutex_lock(&ck->ck_mutex);
	for (;;) {
		while (!ck->ck_wanted && !ck->ck_stopping &&
		       !__atomic_load_n(&ck->ck_reap, __ATOMIC_ACQUIRE)) {
			pthread_cond_wait(&ck->ck_cond, &ck->ck_mutex);
		}
		if (!ck->ck_wanted && !ck->ck_stopping) {
			/* Kept snapshots: end those left idle, again while any is
			 * open. A thread that keeps one after this reset sets it
			 * again (store_sqlite_reader_get). */
			store_ckpt_wait_snapshot(ck);
			if (!ck->ck_wanted && !ck->ck_stopping) {
				__atomic_store_n(&ck->ck_reap, 0, __ATOMIC_RELEASE);
				pthread_mutex_unlock(&ck->ck_mutex);
				if (store_snapshots_reap(db, STORE_SNAPSHOT_MS) > 0) {
					__atomic_store_n(&ck->ck_reap, 1, __ATOMIC_RELEASE);
				}
				pthread_mutex_lock(&ck->ck_mutex);
				continue;
			}
		}
		if (ck->ck_stopping) {
			break;
		}
		ck->ck_wanted = 0;
		pthread_mutex_unlock(&ck->ck_mutex);
		store_ckpt_rounds(db);
		store_ckpt_sync(ck);
		__atomic_add_fetch(&ck->ck_rounds, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&ck->ck_mutex);
	}
	pthread_mutex_unlock(&ck->ck_mutex);
	return NULL;
}

struct store_restart_wait {
	int64_t rw_until_ms;
};

/* The writer's wait for readers to leave the WAL, in steps of
 * STORE_CKPT_RESTART_STEP_US until rw_until_ms: a lookup holds its snapshot
 * for microseconds, where SQLite's own busy handler sleeps 1, 2, 5, 10 ms
 * in turn. */
static int store_restart_busy(void *arg, int count)
{
	struct store_restart_wait *wait = arg;

	(void)count;
	if (store_mono_ms() >= wait->rw_until_ms) {
		return 0;
	}
	usleep(STORE_CKPT_RESTART_STEP_US);
	return 1;
}

/* After the writer's restart of the WAL: held, it failed past the bound
 * (a reader still reads from the WAL); otherwise it started the WAL over. */
static void store_wal_held(struct store_db *db, int held)
{
	int64_t now = store_mono_ms();
	int64_t since = __atomic_load_n(&db->db_wal_held_since, __ATOMIC_RELAXED);

	if (!held) {
		if (db->db_wal_held_warned != 0) {
			log_notice("store: the WAL starts over, after %.1f s held past its bound",
			           (double)(now - since) / 1000.0);
		}
		__atomic_store_n(&db->db_wal_held_since, 0, __ATOMIC_RELAXED);
		db->db_wal_held_warned = 0;
		return;
	}
	db->db_wal_held_tried = now;
	if (since == 0) {
		__atomic_store_n(&db->db_wal_held_since, now, __ATOMIC_RELAXED);
		return;
	}
	if (now - since >= (int64_t)db->db_wal_held_warn_ms &&
	    (db->db_wal_held_warned == 0 ||
	     now - db->db_wal_held_warned >= STORE_WAL_HELD_REPEAT_MS)) {
		db->db_wal_held_warned = now;
		log_warn("store: the WAL has held %d pages, past its bound of %d, for %.1f s: "
		         "a read transaction kept open (a long query on the database?) keeps "
		         "checkpoints from copying it, and every read slows as it grows",
		         db->db_wal_frames, STORE_CKPT_FRAMES_MAX, (double)(now - since) / 1000.0);
	}
}

static void store_sqlite_wal_state(struct store_db *db, uint64_t *ret_pages, double *ret_held_s)
{
	int frames = __atomic_load_n(&db->db_wal_frames, __ATOMIC_ACQUIRE);
	int64_t since = __atomic_load_n(&db->db_wal_held_since, __ATOMIC_RELAXED);

	*ret_pages = frames > 0 ? (uint64_t)frames : 0;
	*ret_held_s = since != 0 ? (double)(store_mono_ms() - since) / 1000.0 : 0.0;
}

/* A PASSIVE checkpoint that runs while commits keep appending never catches
 * up with the end of the WAL, and SQLite restarts the WAL from its start only
 * once every frame is in the database and no reader still reads from the
 * WAL: with server threads looking up answers all the time there is nearly
 * always such a reader, and the WAL grew to ten times its bound (issue 24).
 * So once the checkpointer has finished the rounds it was woken for (and in
 * any case past STORE_CKPT_FRAMES_MAX), the writer itself, between two
 * batches, ends the kept read snapshots and runs a RESTART checkpoint: it
 * copies the frames committed since the last round (the rounds leave at
 * most about STORE_CKPT_TAIL, plus the batches committed after), then waits
 * (at most STORE_CKPT_RESTART_MS: a lookup holds its snapshot for
 * microseconds) until no reader reads from the WAL, and the next commit
 * starts the WAL over. Readers that begin meanwhile read the
 * database file and do not hold it up. This bounds the WAL; a reader that
 * holds a snapshot longer (a long listing) postpones the restart to a
 * later batch, and once one has held it past so_wal_held_warn_ms the
 * writer tries every STORE_WAL_HELD_RETRY_MS (store_wal_held). Returns 1
 * when it ran a checkpoint. */
static int store_sqlite_after_batch(struct store_db *db)
{
	struct store_restart_wait wait;
	sqlite3 *w;
	int log_frames = 0;
	int done_frames = 0;
	int rc;

	if (db->db_writer == NULL || db->db_wal_frames < STORE_CKPT_FRAMES ||
	    (db->db_wal_frames < STORE_CKPT_FRAMES_MAX &&
	     __atomic_load_n(&db->db_ckpt.ck_rounds, __ATOMIC_ACQUIRE) == db->db_ckpt_round)) {
		return 0;
	}
	/* Held past its bound by a reader long enough to warn: not after
	 * every batch. */
	if (db->db_wal_held_warned != 0 &&
	    store_mono_ms() - db->db_wal_held_tried < STORE_WAL_HELD_RETRY_MS) {
		return 0;
	}
	/* A round under way: the next batch looks again, unless the WAL is
	 * past its bound. */
	if (db->db_wal_frames < STORE_CKPT_FRAMES_MAX) {
		if (pthread_mutex_trylock(&db->db_ckpt.ck_run_mutex) != 0) {
			return 0;
		}
	} else {
		pthread_mutex_lock(&db->db_ckpt.ck_run_mutex);
	}
	w = db->db_writer->cn_db;
	/* A kept snapshot would hold the restart up until the checkpointer
	 * reaps it, and the checkpointer is busy copying. */
	store_snapshots_reap(db, 0);
	wait.rw_until_ms = store_mono_ms() + STORE_CKPT_RESTART_MS;
	sqlite3_busy_handler(w, store_restart_busy, &wait);
	rc = sqlite3_wal_checkpoint_v2(w, NULL, SQLITE_CHECKPOINT_RESTART, &log_frames,
	                               &done_frames);
	sqlite3_busy_timeout(w, (int)db->db_busy_timeout_ms);
	pthread_mutex_unlock(&db->db_ckpt.ck_run_mutex);
	if (rc == SQLITE_OK) {
		/* The next commit starts the WAL over. */
		__atomic_store_n(&db->db_wal_frames, 0, __ATOMIC_RELEASE);
		db->db_ckpt_asked = 0;
		store_wal_held(db, 0);
	} else if (rc != SQLITE_BUSY) {
		store_log_rc(w, rc, "checkpoint");
	} else if (db->db_wal_frames >= STORE_CKPT_FRAMES_MAX) {
		store_wal_held(db, 1);
	}
	return 1;
}

static int store_ckpt_start(struct store_db *db, enum store_sync sync)
{
	struct store_ckpt *ck = &db->db_ckpt;

	ck->ck_sync = sync != STORE_SYNC_OFF;
	ck->ck_conn = store_conn_open(db->db_path, SQLITE_OPEN_READWRITE, db->db_busy_timeout_ms);
	if (ck->ck_conn == NULL) {
		return -1;
	}
	/* The checkpoint's fsyncs follow the store's durability setting. */
	if (store_conn_exec(en, ck->ck_conn, store_sync_pragma(sync)) < 0) {
		return -1;
	}
	if (pthread_create(&ck->ck_thread, NULL, store_ckpt_main, db) != 0) {
		log_err("store: cannot start the checkpoint thread");
		return -1;
	}
	ck->ck_running = 1;
	return 0;
}

static void store_ckpt_stop(struct store_db *db)
{
	struct store_ckpt *ck = &db->db_ckpt;

	if (ck->ck_running) {
		pthread_mutex_lock(&ck->ck_mutex);
		__atomic_store_n(&ck->ck_stopping, 1, __ATOMIC_RELEASE);
		pthread_cond_signal(&ck->ck_cond);
		pthread_mutex_unlock(&ck->ck_mutex);
		pthread_join(ck->ck_thread, NULL);
		ck->ck_running = 0;
	}
	store_conn_close(ck->ck_conn);
	ck->ck_conn = NULL;
}

/* ---- operations ---- */

static int64_t store_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One integer from a PRAGMA on cn, without logging. Returns 0 or an SQLite
 * error code. */
static int store_pragma_int(struct store_conn *cn, const char *sql, int64_t *ret)
{
	sqlite3_stmt *stmt = NULL;
	int rc;

	rc = sqlite3_prepare_v2(cn->cn_db, sql, -1, &stmt, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_ROW) {
			*ret = sqlite3_column_int64(stmt, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(stmt);
	return rc;
}

/* Tries the write lock on the probe connection and lets go at once.
 * Returns SQLITE_OK, or the error code (SQLITE_BUSY when held elsewhere). */
static int store_probe_lock(struct store_conn *cn)
{
	int rc;

	rc = sqlite3_exec(cn->cn_db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_exec(cn->cn_db, "ROLLBACK", NULL, NULL, NULL);
	}
	if (!sqlite3_get_autocommit(cn->cn_db)) {
		sqlite3_exec(cn->cn_db, "ROLLBACK", NULL, NULL, NULL);
	}
	return rc;
}

/* The schema version and the write lock, on the probe's own connection
 * (store_probe serializes its callers). */
static void store_sqlite_probe(struct store_db *db, const int64_t *busy_since, const int64_t *ok_at,
                               struct store_health *h)
{
	int newest = store_schema_version();
	int64_t version = 0;
	int64_t began;
	int rc;

	if (db->db_probe == NULL) {
		db->db_probe = store_conn_open(db->db_path, SQLITE_OPEN_READWRITE, STORE_PROBE_BUSY_MS);
	}
	if (db->db_probe == NULL) {
		store_health_fail(h, "the database cannot be opened");
		return;
	}
	rc = store_pragma_int(db->db_probe, "PRAGMA user_version", &version);
	if (rc != SQLITE_OK) {
		store_health_fail(h, "the schema version cannot be read: %s", sqlite3_errstr(rc));
	} else {
		h->sh_schema = version > INT_MAX ? INT_MAX : (int)version;
		if (version < newest) {
			store_health_fail(h,
			                  "migrations pending: database schema %" PRId64
			                  ", this idemhook needs %d",
			                  version, newest);
		} else if (version > newest) {
			store_health_fail(
			        h, "database schema %" PRId64 " is newer than this idemhook (%d)",
			        version, newest);
		}
	}
	/* While our own writer is inside a young batch (or the WAL restart
	 * after one) it holds the lock (or waits for it): a probe would only
	 * compete with it. A probe that waited while our writer committed
	 * found the lock ours, not another connection's: under load the
	 * writer takes it again between the probe's tries. The last probe's
	 * verdict stands until the writer commits after it. */
	if (__atomic_load_n(busy_since, __ATOMIC_ACQUIRE) == 0) {
		began = store_mono_ms();
		rc = store_probe_lock(db->db_probe);
		if (rc == SQLITE_OK) {
			db->db_probe_locked_at = 0;
		} else if (__atomic_load_n(busy_since, __ATOMIC_ACQUIRE) == 0 &&
		           __atomic_load_n(ok_at, __ATOMIC_ACQUIRE) < began) {
			db->db_probe_locked_at = store_mono_ms();
			db->db_probe_locked_rc = rc;
		}
	}
	if (db->db_probe_locked_at != 0 &&
	    db->db_probe_locked_at > __atomic_load_n(ok_at, __ATOMIC_ACQUIRE)) {
		store_health_fail(h, "the database is write-locked by another connection (%s)",
		                  sqlite3_errstr(db->db_probe_locked_rc));
	}
}

struct store_file_query {
	int64_t fq_free_pages;
	int64_t fq_page_size;
	int64_t fq_auto_vacuum;
};

static int store_file_query_tx(struct store_tx *tx, void *arg)
{
	struct store_file_query *q = arg;

	if (store_pragma_int(tx->tx_conn, "PRAGMA freelist_count", &q->fq_free_pages) != SQLITE_OK ||
	    store_pragma_int(tx->tx_conn, "PRAGMA page_size", &q->fq_page_size) != SQLITE_OK ||
	    store_pragma_int(tx->tx_conn, "PRAGMA auto_vacuum", &q->fq_auto_vacuum) != SQLITE_OK) {
		return -1;
	}
	return 0;
}

static int64_t store_file_size(const char *path, const char *suffix)
{
	char name[4096];
	struct stat sb;

	if (snprintf(name, sizeof(name), "%s%s", path, suffix) >= (int)sizeof(name) ||
	    stat(name, &sb) < 0) {
		return 0;
	}
	return (int64_t)sb.st_size;
}

static int store_sqlite_file_stats(struct store *st, struct store_db *db, struct store_file_stats *ret)
{
	struct store_file_query q = {0};
	struct store_file_stats fs;

	memset(&fs, 0, sizeof(fs));
	fs.sf_db_bytes = store_file_size(db->db_path, "");
	fs.sf_wal_bytes = store_file_size(db->db_path, "-wal");
	if (store_read(st, 0, store_file_query_tx, &q) < 0) {
		return -1;
	}
	fs.sf_free_bytes = q.fq_free_pages * q.fq_page_size;
	fs.sf_incremental = q.fq_auto_vacuum == 2;
	*ret = fs;
	return 0;
}

struct store_reclaim_job {
	char rj_sql[64];
	int64_t rj_freed;
};

static int store_reclaim_tx(struct store_tx *tx, void *arg)
{
	struct store_reclaim_job *j = arg;
	int64_t before = 0;
	int64_t after = 0;

	if (store_pragma_int(tx->tx_conn, "PRAGMA freelist_count", &before) != SQLITE_OK ||
	    store_exec(tx, j->rj_sql, NULL, 0, NULL) < 0 ||
	    store_pragma_int(tx->tx_conn, "PRAGMA freelist_count", &after) != SQLITE_OK) {
		return -1;
	}
	j->rj_freed = before - after;
	return 0;
}

static int store_sqlite_reclaim(struct store *st, int64_t max_pages, int64_t *ret_pages)
{
	struct store_reclaim_job j;

	memset(&j, 0, sizeof(j));
	snprintf(j.rj_sql, sizeof(j.rj_sql), "PRAGMA incremental_vacuum(%" PRId64 ")",
	         max_pages > 0 ? max_pages : 1);
	if (store_write(st, 0, store_reclaim_tx, &j) < 0) {
		return -1;
	}
	*ret_pages = j.rj_freed;
	return 0;
}

static int store_sqlite_checkpoint(struct store_db *db)
{
	struct store_conn *cn;
	sqlite3_stmt *stmt = NULL;
	int busy = 1;
	int rc;

	cn = store_conn_open(db->db_path, SQLITE_OPEN_READWRITE, STORE_CHECKPOINT_BUSY_MS);
	if (cn == NULL) {
		return -1;
	}
	rc = sqlite3_prepare_v2(cn->cn_db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &stmt, NULL);
	if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
		busy = sqlite3_column_int(stmt, 0);
	}
	sqlite3_finalize(stmt);
	store_conn_close(cn);
	return busy ? 1 : 0;
}

static int store_sqlite_vacuum(struct store_db *db)
{
	struct store_conn *cn;
	char *err = NULL;
	int rc;

	cn = store_conn_open(db->db_path, SQLITE_OPEN_READWRITE, db->db_busy_timeout_ms);
	if (cn == NULL) {
		return -1;
	}
	rc = sqlite3_exec(cn->cn_db, "PRAGMA auto_vacuum = INCREMENTAL; VACUUM", NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		if (store_rc_full(cn->cn_db, rc)) {
			store_note_full();
		}
		log_err("store: VACUUM failed: %s", err != NULL ? err : sqlite3_errstr(rc));
		sqlite3_free(err);
		store_conn_close(cn);
		return -1;
	}
	store_conn_close(cn);
	return 0;
}

int store_snapshot(const char *path, const char *dir, char **ret_path)
{
	struct store_conn *cn = NULL;
	sqlite3_stmt *stmt = NULL;
	char quoted[256];
	char *name = NULL;
	size_t len;
	int fd;
	int rc;

	if (access(path, R_OK) < 0) {
		log_err("store: cannot read the database \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), path), strerror(errno));
		return -1;
	}
	if (dir == NULL || dir[0] == '\0') {
		dir = getenv("TMPDIR") != NULL && getenv("TMPDIR")[0] != '\0' ? getenv("TMPDIR") : "/tmp";
	}
	len = strlen(dir) + sizeof("/idemhook-snapshot.XXXXXX.db");
	name = malloc(len);
	if (name == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	snprintf(name, len, "%s/idemhook-snapshot.XXXXXX.db", dir);
	/* A new private file: VACUUM INTO takes an empty one. */
	fd = mkstemps(name, 3);
	if (fd < 0) {
		log_err("store: cannot create a snapshot file in \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), dir), strerror(errno));
		free(name);
		return -1;
	}
	close(fd);
	cn = store_conn_open(path, SQLITE_OPEN_READONLY, STORE_BUSY_TIMEOUT_MS_DEFAULT);
	if (cn == NULL) {
		goto fail;
	}
	/* One read transaction: a consistent copy that never blocks writers. */
	rc = sqlite3_prepare_v2(cn->cn_db, "VACUUM INTO ?", -1, &stmt, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	}
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(stmt);
	}
	if (rc != SQLITE_DONE) {
		log_err("store: cannot copy the database into \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), name), sqlite3_errmsg(cn->cn_db));
		goto fail;
	}
	sqlite3_finalize(stmt);
	store_conn_close(cn);
	*ret_path = name;
	return 0;
fail:
	sqlite3_finalize(stmt);
	store_conn_close(cn);
	store_snapshot_remove(name);
	free(name);
	return -1;
}

void store_snapshot_remove(const char *snapshot_path)
{
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
	char name[4096];
	size_t i;

	if (snapshot_path == NULL) {
		return;
	}
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (snprintf(name, sizeof(name), "%s%s", snapshot_path, suffixes[i]) < (int)sizeof(name)) {
			unlink(name);
		}
	}
}

/* ---- the engine ---- */

const char *store_library_version(void)
{
	return sqlite3_libversion();
}

static struct store_conn *store_sqlite_writer(struct store_db *db)
{
	return db->db_writer;
}

static int store_sqlite_writer_ready(struct store_db *db)
{
	return db->db_writer != NULL ? 0 : -1;
}

/* This thread's read connection, opened on first use. Read connections live
 * until the store is closed. Without wait (the duplicate path's lookup,
 * one statement), the thread's snapshot is kept open for the next lookups
 * while it is young (STORE_SNAPSHOT_MS, STORE_SNAPSHOT_USES) and the
 * checkpointer runs, which ends it when left idle; every other read ends a
 * kept snapshot first, so it sees every commit made before it began. */
static struct store_conn *store_sqlite_reader_get(struct store_db *db, int wait)
{
	struct store_conn *cn = pthread_getspecific(db->db_key);
	int64_t now;

	if (cn == NULL) {
		cn = store_conn_open(db->db_path, SQLITE_OPEN_READONLY, db->db_busy_timeout_ms);
		if (cn == NULL) {
			return NULL;
		}
		pthread_mutex_lock(&db->db_mutex);
		cn->cn_next = db->db_readers;
		db->db_readers = cn;
		pthread_mutex_unlock(&db->db_mutex);
		if (pthread_setspecific(db->db_key, cn) != 0) {
			log_warn("store: cannot remember this thread's read connection");
		}
	}
	if (cn->cn_locked > 0) {
		cn->cn_locked++; /* nested in a lookup: its snapshot */
		return cn;
	}
	pthread_mutex_lock(&cn->cn_mutex);
	now = store_mono_ms();
	if (cn->cn_held) {
		if (!wait && now - cn->cn_held_ms < STORE_SNAPSHOT_MS &&
		    cn->cn_held_uses < STORE_SNAPSHOT_USES &&
		    __atomic_load_n(&db->db_commits, __ATOMIC_ACQUIRE) == cn->cn_held_commits) {
			cn->cn_held_uses++;
			cn->cn_locked = 1;
			return cn;
		}
		store_conn_exec(en, cn, "COMMIT");
		cn->cn_held = 0;
	}
	if (wait || !db->db_ckpt.ck_running || !sqlite3_get_autocommit(cn->cn_db)) {
		/* Not kept: a read of its own, or one nested in a read. */
		pthread_mutex_unlock(&cn->cn_mutex);
		return cn;
	}
	cn->cn_locked = 1;
	/* Read before the snapshot begins: a commit in between only makes
	 * the next lookup take a new one. */
	cn->cn_held_commits = __atomic_load_n(&db->db_commits, __ATOMIC_ACQUIRE);
	if (store_conn_exec(en, cn, "BEGIN") == 0) {
		cn->cn_held = 1;
		cn->cn_held_ms = now;
		cn->cn_held_uses = 1;
		if (!__atomic_load_n(&db->db_ckpt.ck_reap, __ATOMIC_ACQUIRE)) {
			pthread_mutex_lock(&db->db_ckpt.ck_mutex);
			__atomic_store_n(&db->db_ckpt.ck_reap, 1, __ATOMIC_RELEASE);
			pthread_cond_signal(&db->db_ckpt.ck_cond);
			pthread_mutex_unlock(&db->db_ckpt.ck_mutex);
		}
	}
	return cn;
}

static void store_sqlite_reader_put(struct store_db *db, struct store_conn *cn)
{
	(void)db;
	/* Kept for the thread's next read, its snapshot too if kept. */
	if (cn->cn_locked > 0 && --cn->cn_locked == 0) {
		pthread_mutex_unlock(&cn->cn_mutex);
	}
}

static int store_sqlite_begin(struct store_conn *cn, int write)
{
	return store_conn_exec(en, cn, write ? "BEGIN IMMEDIATE" : "BEGIN");
}

/* Inside BEGIN IMMEDIATE the write lock is ours and the snapshot the
 * newest: a migration committed before it is seen, and none commits
 * until this transaction ends. user_version is read from the header of
 * page 1, which the transaction has in its cache. */
static int store_sqlite_schema_held(struct store_conn *cn, int *ret_version)
{
	return store_user_version(cn, ret_version);
}

static int store_sqlite_in_tx(struct store_conn *cn)
{
	return !sqlite3_get_autocommit(cn->cn_db);
}

/* SQLite ends the transaction by itself when a statement fails with FULL,
 * IOERR or NOMEM and has no statement journal to undo just itself. */
static enum store_tx_state store_sqlite_tx_state(struct store_conn *cn)
{
	return sqlite3_get_autocommit(cn->cn_db) ? STORE_TXS_ENDED : STORE_TXS_OPEN;
}

static int store_sqlite_last_error(struct store_conn *cn)
{
	return cn != NULL ? sqlite3_extended_errcode(cn->cn_db) : SQLITE_OK;
}

static const char *store_sqlite_error_reason(int code)
{
	/* A lock that was busy and is free now is no failure any more. */
	if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
		return NULL;
	}
	return sqlite3_errstr(code);
}

static uint64_t store_sqlite_wal_written(struct store_db *db)
{
	return db->db_wal_written;
}

static int store_sqlite_after_copy(struct store_tx *tx)
{
	(void)tx; /* INTEGER PRIMARY KEY takes max(id) + 1 by itself */
	return 0;
}

/* One process writes a SQLite file at a time: every named lock is its own. */
static int store_sqlite_try_lock(struct store_db *db, const char *name)
{
	(void)db;
	(void)name;
	return 1;
}

static void store_sqlite_unlock(struct store_db *db, const char *name)
{
	(void)db;
	(void)name;
}

/* so_exclusive: the receiver lock on PATH.lock, held until the store
 * closes. An open-file-description lock, so two stores of one process
 * exclude each other too, and closing another descriptor of the file does
 * not drop it. Returns 0, or -1 (logged) when another holds it. */
static int store_sqlite_lock_receiver(struct store_db *db)
{
	struct flock fl;
	char quoted[256];
	char *name = NULL;
	size_t len;

	if (strcmp(db->db_path, ":memory:") == 0 || strncmp(db->db_path, "file:", 5) == 0) {
		return 0;
	}
	len = strlen(db->db_path) + sizeof(".lock");
	name = malloc(len);
	if (name == NULL) {
		log_err("store: out of memory");
		return -1;
	}
	snprintf(name, len, "%s.lock", db->db_path);
	db->db_lock_fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, STORE_FILE_MODE);
	if (db->db_lock_fd < 0) {
		if (errno == EACCES || errno == EPERM || errno == EROFS) {
			store_open_denied();
		}
		log_err("store: cannot open the lock file \"%s\": %s",
		        log_quote(quoted, sizeof(quoted), name), strerror(errno));
		goto fail;
	}
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(db->db_lock_fd, F_OFD_SETLK, &fl) < 0) {
		if (errno == EAGAIN || errno == EACCES) {
			log_err("store: another idemhook serve (or store copy) is using \"%s\": SQLite "
			        "takes one receiver per database file; stop it first, or share a "
			        "PostgreSQL database ([store] backend = postgresql) between receivers",
			        log_quote(quoted, sizeof(quoted), db->db_path));
		} else {
			log_err("store: cannot lock \"%s\": %s", log_quote(quoted, sizeof(quoted), name),
			        strerror(errno));
		}
		goto fail;
	}
	free(name);
	return 0;
fail:
	if (db->db_lock_fd >= 0) {
		close(db->db_lock_fd);
		db->db_lock_fd = -1;
	}
	free(name);
	return -1;
}

/* A store that may not create its file (so_must_exist, a reader,
 * --no-migrate) finds it missing: says so, and what makes it. Returns 1
 * (logged) when it is missing, else 0 (SQLite says what else is wrong). */
static int store_sqlite_missing(const char *path, int no_migrate)
{
	char quoted[256];
	struct stat sb;

	if (strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0 ||
	    stat(path, &sb) == 0 || errno != ENOENT) {
		return 0;
	}
	if (no_migrate) {
		log_err("store: the database \"%s\" does not exist, and serve --no-migrate creates "
		        "none: run idemhook migrate first",
		        log_quote(quoted, sizeof(quoted), path));
	} else {
		log_err("store: the database \"%s\" does not exist (idemhook migrate or idemhook "
		        "serve creates it)",
		        log_quote(quoted, sizeof(quoted), path));
	}
	return 1;
}

static int store_sqlite_check_read_only(struct store_db *db)
{
	struct store_conn *cn;
	int version;

	cn = store_conn_open(db->db_path, SQLITE_OPEN_READONLY, db->db_busy_timeout_ms);
	if (cn == NULL) {
		return -1;
	}
	if (store_user_version(cn, &version) < 0) {
		store_sqlite_refused(cn);
		store_conn_close(cn);
		return -1;
	}
	if (store_version_check_read(version) < 0) {
		store_conn_close(cn);
		return -1;
	}
	store_conn_close(cn);
	return 0;
}

static void store_sqlite_close(struct store_db *db)
{
	struct store_conn *cn;

	if (db == NULL) {
		return;
	}
	store_ckpt_stop(db);
	while (db->db_readers != NULL) {
		cn = db->db_readers;
		db->db_readers = cn->cn_next;
		store_conn_close(cn);
	}
	/* The last connection to close checkpoints the WAL into the file. */
	store_conn_close(db->db_writer);
	store_conn_close(db->db_probe);
	if (db->db_key_made) {
		pthread_key_delete(db->db_key);
	}
	pthread_mutex_destroy(&db->db_mutex);
	if (db->db_lock_fd >= 0) {
		close(db->db_lock_fd); /* lets go of the receiver lock */
	}
	free(db->db_path);
	free(db);
}

static pthread_once_t store_sqlite_once = PTHREAD_ONCE_INIT;

/* Process-wide SQLite settings, before SQLite is first used. Memory
 * statistics take a global mutex around every allocation SQLite makes;
 * nothing here reads them. */
static void store_sqlite_config(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, STORE_SUBJOURNAL_SPILL);
	store_pcache_register();
	store_walbuf_register();
}

static struct store_db *store_sqlite_open(const struct store_options *opt, int *ret_from,
                                          int *ret_to)
{
	struct store_db *db;

	if (sqlite3_threadsafe() == 0) {
		log_err("store: this SQLite library is built without thread support");
		return NULL;
	}
	pthread_once(&store_sqlite_once, store_sqlite_config);
	db = calloc(1, sizeof(*db));
	if (db == NULL) {
		log_err("store: out of memory");
		return NULL;
	}
	/* Static initializers: these never fail. */
	db->db_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	db->db_ckpt.ck_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	db->db_ckpt.ck_run_mutex = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	db->db_ckpt.ck_cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	db->db_lock_fd = -1;
	db->db_wal_held_warn_ms =
	        opt->so_wal_held_warn_ms > 0 ? opt->so_wal_held_warn_ms : STORE_WAL_HELD_WARN_MS;
	db->db_busy_timeout_ms = opt->so_busy_timeout_ms > 0 ? opt->so_busy_timeout_ms
	                                                     : STORE_BUSY_TIMEOUT_MS_DEFAULT;
	db->db_path = strdup(opt->so_path != NULL ? opt->so_path : "");
	if (db->db_path == NULL) {
		log_err("store: out of memory");
		goto fail;
	}
	if (db->db_path[0] == '\0') {
		log_err("store: no database path");
		goto fail;
	}
	if (pthread_key_create(&db->db_key, NULL) != 0) {
		log_err("store: cannot create a thread key");
		goto fail;
	}
	db->db_key_made = 1;
	/* Before the lock and any directory: a missing file leaves no trace. */
	if ((opt->so_read_only || opt->so_no_migrate || opt->so_must_exist) &&
	    store_sqlite_missing(db->db_path, opt->so_no_migrate)) {
		goto fail;
	}
	if (opt->so_exclusive &&
	    ((!opt->so_read_only && store_mkdir_parent(db->db_path) < 0) ||
	     store_sqlite_lock_receiver(db) < 0)) {
		goto fail;
	}
	if (opt->so_read_only) {
		if (store_sqlite_access(db->db_path, 0) < 0 ||
		    store_sqlite_check_read_only(db) < 0) {
			goto fail;
		}
		return db;
	}
	db->db_writer = store_open_writer(db->db_path, opt->so_sync, db->db_busy_timeout_ms,
	                                  opt->so_no_migrate, ret_from, ret_to);
	if (db->db_writer == NULL) {
		goto fail;
	}
	if (store_ckpt_start(db, opt->so_sync) < 0) {
		goto fail;
	}
	sqlite3_wal_hook(db->db_writer->cn_db, store_wal_hook, db);
	return db;
fail:
	store_sqlite_close(db);
	return NULL;
}

/* ---- the files under the running daemon ---- */

/* Whether the database, its -wal and its -shm, as first seen at their paths,
 * are still there, by device and inode: one deleted or replaced under the
 * running daemon (a clean-up script, an operator) takes every commit since
 * the last checkpoint with it at the next restart, acknowledged or not.
 * The connections opened before still hold the old log open, so a
 * checkpoint on one of them (the probe's) copies what it holds into the
 * database file, which a restart reads; it runs again at every call, for
 * a batch that was already under way when the loss was seen. */
static int store_sqlite_files_check(struct store_db *db, struct store_files *f, char *reason,
                                    size_t reason_size)
{
	static const char *const suffix[STORE_FILES_MAX] = {"", "-wal", "-shm"};
	const char *name = strrchr(db->db_path, '/');
	char path[PATH_MAX];
	struct stat sb;
	int n_log = -1;
	int n_ckpt = -1;
	int rescued = 0;
	int fresh = !f->sfs_lost;
	size_t i;
	int rc;

	name = name != NULL ? name + 1 : db->db_path;
	for (i = 0; i < STORE_FILES_MAX && !f->sfs_lost; i++) {
		int n = snprintf(path, sizeof(path), "%s%s", db->db_path, suffix[i]);
		int gone;

		if (n < 0 || (size_t)n >= sizeof(path)) {
			return 0;
		}
		if (stat(path, &sb) < 0) {
			gone = errno == ENOENT && f->sfs_known[i];
		} else if (!f->sfs_known[i]) {
			f->sfs_known[i] = 1;
			f->sfs_dev[i] = (uint64_t)sb.st_dev;
			f->sfs_ino[i] = (uint64_t)sb.st_ino;
			gone = 0;
		} else {
			gone = f->sfs_dev[i] != (uint64_t)sb.st_dev ||
			       f->sfs_ino[i] != (uint64_t)sb.st_ino;
		}
		if (gone) {
			f->sfs_lost = 1;
			f->sfs_gone = (int)i;
			log_err("store: \"%s%s\" was deleted or replaced while the daemon held it "
			        "open: callbacks are refused (503) from now on, and what the open "
			        "write-ahead log holds is copied into the database file; restart "
			        "the "
			        "daemon (docs/operations.md)",
			        db->db_path, suffix[i]);
		}
	}
	if (!f->sfs_lost) {
		return 0;
	}
	if (db->db_probe != NULL && f->sfs_gone != 0) {
		rc = sqlite3_wal_checkpoint_v2(db->db_probe->cn_db, NULL, SQLITE_CHECKPOINT_FULL,
		                               &n_log, &n_ckpt);
		/* Whole only once the store refuses work (after this call
		 * returns): a COMMIT under way now is copied by the next one. */
		rescued = rc == SQLITE_OK && n_ckpt == n_log && !fresh;
		if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
			store_log_rc(db->db_probe->cn_db, rc, "checkpoint of the deleted log");
		}
	}
	if (rescued && !f->sfs_rescued) {
		log_notice("store: the write-ahead log held open is checkpointed into \"%s\" "
		           "(%d frames): a restart now keeps every acknowledged callback",
		           db->db_path, n_log);
	}
	f->sfs_rescued = rescued;
	snprintf(reason, reason_size,
	         "%.60s%s was deleted or replaced under the daemon: callbacks "
	         "refused; %s; restart it",
	         name, suffix[f->sfs_gone],
	         f->sfs_gone == 0 ? "the database file is gone, restore it"
	         : rescued        ? "its log is checkpointed into the database"
	                          : "checkpoint not complete yet");
	return 1;
}

const struct store_engine store_engine_sqlite = {
        .en_name = "SQLite",
        .en_shared = 0,
        .en_sql_has_table = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
        .en_sql_tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                         "'sqlite%' ORDER BY name",
        .en_sql_columns = "SELECT name, type FROM pragma_table_info(?) ORDER BY cid",
        .en_open = store_sqlite_open,
        .en_close = store_sqlite_close,
        .en_writer = store_sqlite_writer,
        .en_writer_ready = store_sqlite_writer_ready,
        .en_reader_get = store_sqlite_reader_get,
        .en_reader_put = store_sqlite_reader_put,
        .en_run = store_sqlite_run,
        .en_begin = store_sqlite_begin,
        .en_schema_held = store_sqlite_schema_held,
        .en_in_tx = store_sqlite_in_tx,
        .en_tx_state = store_sqlite_tx_state,
        .en_last_error = store_sqlite_last_error,
        .en_error_reason = store_sqlite_error_reason,
        .en_after_batch = store_sqlite_after_batch,
        .en_wal_written = store_sqlite_wal_written,
        .en_wal_state = store_sqlite_wal_state,
        .en_cache_truncations = store_pcache_counts,
        .en_probe = store_sqlite_probe,
        .en_file_stats = store_sqlite_file_stats,
        .en_reclaim = store_sqlite_reclaim,
        .en_checkpoint = store_sqlite_checkpoint,
        .en_files_check = store_sqlite_files_check,
        .en_vacuum = store_sqlite_vacuum,
        .en_after_copy = store_sqlite_after_copy,
        .en_try_lock = store_sqlite_try_lock,
        .en_unlock = store_sqlite_unlock,
};
