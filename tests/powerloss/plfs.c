/* plfs.c: a FUSE file system for power-loss tests: it passes every call
 * through to a backing directory and remembers what a power cut may take
 * back (each file's writes since its last fsync, the directory entries no
 * directory fsync made durable); on command it "loses power": it puts the
 * backing directory in a state a real disk could show after the cut, and
 * refuses every later call with EIO until it is unmounted.
 *
 * usage: plfs SEED BACKING TRASH MOUNTPOINT
 *
 * The model, seeded (the seed is printed with every cut):
 * - data: per file, the writes and truncations since its last fsync or
 *   fdatasync, in order. At the cut each such file loses all of them, keeps
 *   all of them, or keeps a random subset of their 4 KiB pages (the kernel
 *   writes dirty pages back in any order, and a write spanning pages can be
 *   torn); a kept page past the durable end of the file leaves a hole of
 *   zeros before it.
 * - names: creations, unlinks, renames, mkdir and rmdir. An fsync of a
 *   directory makes the name changes in it so far durable, and nothing
 *   else: not its own entry in its parent, not the names of another
 *   directory (POSIX promises no more). At the cut each directory keeps
 *   its durable changes and a random prefix of the others (its changes stay
 *   in order, as a journal keeps them; directories are independent); the
 *   rest are undone, newest first. A directory whose own creation is
 *   undone takes everything in it along, durable or not.
 * - the control file /.plfs: writing "cut" cuts now; "arm SUFFIX N" cuts
 *   just before the Nth later change (write, truncation, fsync, creation,
 *   unlink, rename) to a path ending in SUFFIX ("*": any path), which then
 *   fails; "policy drop" makes a cut lose everything it may (every unsynced
 *   change, every name not made durable), "policy keep" nothing, "policy
 *   random" (the default) as above; reading gives counters as "name value"
 *   lines.
 */
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define PLFS_PAGE 4096        /* bytes of one page written back on its own */
#define PLFS_BUCKETS 1024     /* buckets of the inode table */
#define PLFS_CONTROL "/.plfs" /* the control file at the root */
#define PLFS_STATUS_MAX 2048  /* bytes of the control file's text */
#define PLFS_SUFFIX_MAX 64    /* bytes of an armed suffix */

enum plfs_data_kind { PLFS_WRITE, PLFS_TRUNCATE };

/* What a cut takes: the worst case, nothing, or a seeded draw. */
enum plfs_policy { PLFS_RANDOM, PLFS_DROP, PLFS_KEEP };

/* One change to a file's data since its last fsync, with what it replaced. */
struct plfs_data_op {
	enum plfs_data_kind do_kind;
	off_t do_off;      /* write: offset; truncate: the new size */
	size_t do_len;     /* write: bytes written */
	off_t do_old_size; /* the file's size before */
	char *do_new;      /* write: the bytes written */
	char *do_old;      /* the bytes replaced: [do_off, min(end, old size)) for a
	                    * write, [new size, old size) for a truncation */
	size_t do_old_len;
	struct plfs_data_op *do_next;
};

/* A file with changes not yet fsynced, by its backing inode. */
struct plfs_node {
	ino_t nd_ino;
	int nd_fd; /* our own read-write descriptor: reverts work whatever its name */
	struct plfs_data_op *nd_ops; /* oldest first */
	struct plfs_data_op *nd_last;
	struct plfs_node *nd_next;
};

enum plfs_name_kind { PLFS_CREATE, PLFS_UNLINK, PLFS_RENAME, PLFS_MKDIR, PLFS_RMDIR };

/* One change to the names, with what undoing it needs (backing paths). */
struct plfs_name_op {
	enum plfs_name_kind no_kind;
	char *no_path;    /* the name created, removed, or renamed from */
	char *no_to;      /* rename: the new name */
	char *no_trash;   /* unlink, rmdir: where the object went; rename:
	                   * the replaced target, or NULL */
	ino_t no_dirs[2]; /* the directories it changed */
	int no_durable;   /* a fsync of one of them came after it */
	int no_undo;      /* the cut takes it back */
};

struct plfs {
	pthread_mutex_t pl_lock;
	uint64_t pl_rng;
	uint64_t pl_seed;
	char pl_backing[PATH_MAX];
	char pl_trash[PATH_MAX];
	int pl_dead;
	enum plfs_policy pl_policy;
	int pl_trace; /* $PLFS_TRACE=1: log each name change and directory fsync */
	struct plfs_node *pl_nodes[PLFS_BUCKETS];
	struct plfs_name_op *pl_names;
	size_t pl_n_names;
	size_t pl_cap_names;
	uint64_t pl_trash_seq;
	/* armed cut */
	char pl_arm_suffix[PLFS_SUFFIX_MAX];
	int64_t pl_arm_left; /* 0: not armed */
	/* counters */
	uint64_t pl_changes;
	uint64_t pl_fsyncs;
	uint64_t pl_dir_fsyncs;
	uint64_t pl_cuts;
	uint64_t pl_files_dropped;
	uint64_t pl_files_kept;
	uint64_t pl_files_torn;
	uint64_t pl_ops_lost;
	uint64_t pl_ops_kept;
	uint64_t pl_names_undone;
	uint64_t pl_names_kept;
	int64_t pl_last_wal_sync_ns; /* CLOCK_MONOTONIC at the start of the last
	                              * fsync of a "-wal" file */
};

static struct plfs plfs_g;

static uint64_t plfs_rand(void)
{
	/* splitmix64: small, seeded, the same sequence for the same seed */
	uint64_t z = (plfs_g.pl_rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int64_t plfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void plfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void plfs_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("plfs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void plfs_path(char *out, size_t cap, const char *path)
{
	snprintf(out, cap, "%s%s", plfs_g.pl_backing, path);
}

static int plfs_ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s);
	size_t lx = strlen(suffix);

	return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/* ---- the cut ---- */

static void plfs_data_free(struct plfs_data_op *op)
{
	while (op != NULL) {
		struct plfs_data_op *next = op->do_next;

		free(op->do_new);
		free(op->do_old);
		free(op);
		op = next;
	}
}

static void plfs_pwrite_all(int fd, const char *p, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, off);

		if (w <= 0) {
			plfs_log("revert: pwrite: %s", strerror(errno));
			return;
		}
		p += w;
		n -= (size_t)w;
		off += w;
	}
}

/* Puts the file back as it was at its last fsync (newest change undone
 * first). */
static void plfs_node_undo(struct plfs_node *nd)
{
	size_t n = 0;
	struct plfs_data_op **ops;
	struct plfs_data_op *op;
	size_t i;

	for (op = nd->nd_ops; op != NULL; op = op->do_next) {
		n++;
	}
	ops = calloc(n, sizeof(*ops));
	if (ops == NULL) {
		abort();
	}
	i = 0;
	for (op = nd->nd_ops; op != NULL; op = op->do_next) {
		ops[i++] = op;
	}
	while (i-- > 0) {
		op = ops[i];
		if (op->do_kind == PLFS_WRITE) {
			plfs_pwrite_all(nd->nd_fd, op->do_old, op->do_old_len, op->do_off);
			if (ftruncate(nd->nd_fd, op->do_old_size) < 0) {
				plfs_log("revert: ftruncate: %s", strerror(errno));
			}
		} else {
			if (ftruncate(nd->nd_fd, op->do_old_size) < 0) {
				plfs_log("revert: ftruncate: %s", strerror(errno));
			}
			plfs_pwrite_all(nd->nd_fd, op->do_old, op->do_old_len, op->do_off);
		}
	}
	free(ops);
}

/* Replays the changes a cut keeps: each page of each write with
 * probability 1/2 (all of them when keep_all), truncations likewise. */
static void plfs_node_redo_some(struct plfs_node *nd)
{
	struct plfs_data_op *op;

	for (op = nd->nd_ops; op != NULL; op = op->do_next) {
		if (op->do_kind == PLFS_TRUNCATE) {
			if (plfs_rand() & 1) {
				if (ftruncate(nd->nd_fd, op->do_off) < 0) {
					plfs_log("redo: ftruncate: %s", strerror(errno));
				}
				plfs_g.pl_ops_kept++;
			} else {
				plfs_g.pl_ops_lost++;
			}
			continue;
		}
		{
			off_t pos = op->do_off;
			off_t end = op->do_off + (off_t)op->do_len;

			while (pos < end) {
				off_t page_end = (pos / PLFS_PAGE + 1) * PLFS_PAGE;

				if (page_end > end) {
					page_end = end;
				}
				if (plfs_rand() & 1) {
					plfs_pwrite_all(nd->nd_fd, op->do_new + (pos - op->do_off),
					                (size_t)(page_end - pos), pos);
					plfs_g.pl_ops_kept++;
				} else {
					plfs_g.pl_ops_lost++;
				}
				pos = page_end;
			}
		}
	}
}

static int plfs_to_trash(const char *backing_path, char ret_trash[PATH_MAX]);

static void plfs_undo_name(const struct plfs_name_op *no)
{
	int rc = 0;

	switch (no->no_kind) {
	case PLFS_CREATE:
		rc = unlink(no->no_path);
		break;
	case PLFS_MKDIR: {
		/* its entry is gone, and with it whatever the directory holds */
		char trash[PATH_MAX];

		rc = plfs_to_trash(no->no_path, trash) < 0 ? -1 : 0;
		break;
	}
	case PLFS_UNLINK:
	case PLFS_RMDIR:
		rc = rename(no->no_trash, no->no_path);
		break;
	case PLFS_RENAME:
		rc = rename(no->no_to, no->no_path);
		if (rc == 0 && no->no_trash != NULL) {
			rc = rename(no->no_trash, no->no_to);
		}
		break;
	}
	if (rc < 0) {
		plfs_log("revert of %s: %s", no->no_path, strerror(errno));
	}
}

/* A directory's share of a cut: how many of its changes that no fsync
 * made durable it keeps (a prefix), how many it has met so far. */
struct plfs_dir_cut {
	ino_t dc_ino;
	size_t dc_pending;
	size_t dc_keep;
	size_t dc_seen;
	int dc_broken; /* a change of it was undone: so are the later ones */
};

static struct plfs_dir_cut *plfs_dir_cut_find(struct plfs_dir_cut *dcs, size_t *n, ino_t ino)
{
	size_t i;

	for (i = 0; i < *n; i++) {
		if (dcs[i].dc_ino == ino) {
			return &dcs[i];
		}
	}
	memset(&dcs[*n], 0, sizeof(dcs[0]));
	dcs[*n].dc_ino = ino;
	return &dcs[(*n)++];
}

/* Chooses the name changes the cut takes back and undoes them, newest
 * first. */
static void plfs_names_cut(void)
{
	struct plfs_dir_cut *dcs = calloc(2 * plfs_g.pl_n_names + 1, sizeof(*dcs));
	size_t n_dcs = 0;
	size_t i;
	int d;

	if (dcs == NULL) {
		abort();
	}
	for (i = 0; i < plfs_g.pl_n_names; i++) {
		const struct plfs_name_op *no = &plfs_g.pl_names[i];

		for (d = 0; d < 2 && !no->no_durable; d++) {
			if (d == 0 || no->no_dirs[1] != no->no_dirs[0]) {
				plfs_dir_cut_find(dcs, &n_dcs, no->no_dirs[d])->dc_pending++;
			}
		}
	}
	for (i = 0; i < n_dcs; i++) {
		dcs[i].dc_keep = (size_t)(plfs_rand() % (dcs[i].dc_pending + 1));
		if (plfs_g.pl_policy != PLFS_RANDOM) {
			dcs[i].dc_keep = plfs_g.pl_policy == PLFS_KEEP ? dcs[i].dc_pending : 0;
		}
	}
	for (i = 0; i < plfs_g.pl_n_names; i++) {
		struct plfs_name_op *no = &plfs_g.pl_names[i];
		struct plfs_dir_cut *dc[2];

		if (no->no_durable) {
			continue;
		}
		dc[0] = plfs_dir_cut_find(dcs, &n_dcs, no->no_dirs[0]);
		dc[1] = plfs_dir_cut_find(dcs, &n_dcs, no->no_dirs[1]);
		for (d = 0; d < 2; d++) {
			if (dc[d]->dc_broken || dc[d]->dc_seen >= dc[d]->dc_keep) {
				no->no_undo = 1;
			}
		}
		dc[0]->dc_seen++;
		if (dc[1] != dc[0]) {
			dc[1]->dc_seen++;
		}
		if (no->no_undo) {
			dc[0]->dc_broken = 1;
			dc[1]->dc_broken = 1;
		}
	}
	free(dcs);
	for (i = plfs_g.pl_n_names; i > 0; i--) {
		if (plfs_g.pl_names[i - 1].no_undo) {
			plfs_undo_name(&plfs_g.pl_names[i - 1]);
			plfs_g.pl_names_undone++;
		} else {
			plfs_g.pl_names_kept++;
		}
	}
}

/* The power cut, under the lock: from here on every call fails. */
static void plfs_cut(const char *why)
{
	size_t b;
	uint64_t files = 0;

	plfs_g.pl_dead = 1;
	plfs_g.pl_cuts++;
	for (b = 0; b < PLFS_BUCKETS; b++) {
		struct plfs_node *nd;

		for (nd = plfs_g.pl_nodes[b]; nd != NULL; nd = nd->nd_next) {
			uint64_t mode;

			if (nd->nd_ops == NULL) {
				continue;
			}
			files++;
			mode = plfs_rand() % 3;
			if (plfs_g.pl_policy != PLFS_RANDOM) {
				mode = plfs_g.pl_policy == PLFS_KEEP ? 0 : 1;
			}
			if (mode == 0) {
				struct plfs_data_op *op;

				for (op = nd->nd_ops; op != NULL; op = op->do_next) {
					plfs_g.pl_ops_kept++;
				}
				plfs_g.pl_files_kept++;
				continue;
			}
			plfs_node_undo(nd);
			if (mode == 1) {
				struct plfs_data_op *op;

				for (op = nd->nd_ops; op != NULL; op = op->do_next) {
					plfs_g.pl_ops_lost++;
				}
				plfs_g.pl_files_dropped++;
			} else {
				plfs_node_redo_some(nd);
				plfs_g.pl_files_torn++;
			}
		}
	}
	plfs_names_cut();
	plfs_log("power cut (%s), seed %" PRIu64 ": %" PRIu64 " files with unsynced data (%" PRIu64
	         " kept whole, %" PRIu64 " dropped, %" PRIu64 " torn; %" PRIu64
	         " changes or pages kept, %" PRIu64 " lost); names: %" PRIu64
	         " changes kept, %" PRIu64 " undone",
	         why, plfs_g.pl_seed, files, plfs_g.pl_files_kept, plfs_g.pl_files_dropped,
	         plfs_g.pl_files_torn, plfs_g.pl_ops_kept, plfs_g.pl_ops_lost, plfs_g.pl_names_kept,
	         plfs_g.pl_names_undone);
}

/* Counts one change to path; returns -EIO when it is the armed one (the
 * power goes before it) or the power is already gone. */
static int plfs_change(const char *path)
{
	if (plfs_g.pl_dead) {
		return -EIO;
	}
	plfs_g.pl_changes++;
	if (plfs_g.pl_arm_left > 0 &&
	    (strcmp(plfs_g.pl_arm_suffix, "*") == 0 ||
	     (path != NULL && plfs_ends_with(path, plfs_g.pl_arm_suffix)))) {
		plfs_g.pl_arm_left--;
		if (plfs_g.pl_arm_left == 0) {
			char why[PLFS_SUFFIX_MAX + 64];

			snprintf(why, sizeof(why), "armed, before a change to %s",
			         path != NULL ? path : "?");
			plfs_cut(why);
			return -EIO;
		}
	}
	return 0;
}

/* ---- bookkeeping ---- */

static struct plfs_node *plfs_node_get(ino_t ino, int fd)
{
	size_t b = (size_t)(ino % PLFS_BUCKETS);
	struct plfs_node *nd;

	for (nd = plfs_g.pl_nodes[b]; nd != NULL; nd = nd->nd_next) {
		if (nd->nd_ino == ino) {
			return nd;
		}
	}
	nd = calloc(1, sizeof(*nd));
	if (nd == NULL) {
		abort();
	}
	nd->nd_ino = ino;
	nd->nd_fd = dup(fd);
	nd->nd_next = plfs_g.pl_nodes[b];
	plfs_g.pl_nodes[b] = nd;
	return nd;
}

/* Removes ino's record from the table and returns it (NULL: none). */
static struct plfs_node *plfs_node_take(ino_t ino)
{
	struct plfs_node **pp;

	for (pp = &plfs_g.pl_nodes[ino % PLFS_BUCKETS]; *pp != NULL; pp = &(*pp)->nd_next) {
		struct plfs_node *nd = *pp;

		if (nd->nd_ino == ino) {
			*pp = nd->nd_next;
			return nd;
		}
	}
	return NULL;
}

/* 1 when fd's file was unlinked through us (it waits in the trash). */
static int plfs_in_trash(int fd)
{
	char link[64];
	char target[PATH_MAX];
	size_t lt = strlen(plfs_g.pl_trash);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0) {
		return 0;
	}
	target[n] = '\0';
	return strncmp(target, plfs_g.pl_trash, lt) == 0 && target[lt] == '/';
}

static void plfs_node_add(struct plfs_node *nd, struct plfs_data_op *op)
{
	if (nd->nd_last != NULL) {
		nd->nd_last->do_next = op;
	} else {
		nd->nd_ops = op;
	}
	nd->nd_last = op;
}

/* Records and applies a truncation of fd to size. */
static int plfs_truncate_fd(int fd, off_t size)
{
	struct stat st;
	struct plfs_data_op *op;
	struct plfs_node *nd;

	if (fstat(fd, &st) < 0) {
		return -errno;
	}
	op = calloc(1, sizeof(*op));
	if (op == NULL) {
		return -ENOMEM;
	}
	op->do_kind = PLFS_TRUNCATE;
	op->do_off = size;
	op->do_old_size = st.st_size;
	if (size < st.st_size) {
		ssize_t r;

		op->do_old_len = (size_t)(st.st_size - size);
		op->do_old = malloc(op->do_old_len);
		if (op->do_old == NULL) {
			free(op);
			return -ENOMEM;
		}
		r = pread(fd, op->do_old, op->do_old_len, size);
		if (r < 0 || (size_t)r != op->do_old_len) {
			free(op->do_old);
			free(op);
			return -EIO;
		}
	}
	if (ftruncate(fd, size) < 0) {
		int e = errno;

		free(op->do_old);
		free(op);
		return -e;
	}
	nd = plfs_node_get(st.st_ino, fd);
	plfs_node_add(nd, op);
	return 0;
}

static ino_t plfs_parent_ino(const char *backing_path)
{
	char dir[PATH_MAX];
	char *slash;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", backing_path);
	slash = strrchr(dir, '/');
	if (slash == NULL) {
		return 0;
	}
	if (slash == dir) {
		slash[1] = '\0';
	} else {
		*slash = '\0';
	}
	return stat(dir, &st) == 0 ? st.st_ino : 0;
}

static void plfs_name_add(enum plfs_name_kind kind, const char *path, const char *to,
                          const char *trash)
{
	struct plfs_name_op *no;

	if (plfs_g.pl_n_names == plfs_g.pl_cap_names) {
		size_t cap = plfs_g.pl_cap_names == 0 ? 64 : plfs_g.pl_cap_names * 2;
		struct plfs_name_op *grown = realloc(plfs_g.pl_names, cap * sizeof(*grown));

		if (grown == NULL) {
			abort();
		}
		plfs_g.pl_names = grown;
		plfs_g.pl_cap_names = cap;
	}
	no = &plfs_g.pl_names[plfs_g.pl_n_names++];
	memset(no, 0, sizeof(*no));
	no->no_kind = kind;
	no->no_path = strdup(path);
	no->no_to = to != NULL ? strdup(to) : NULL;
	no->no_trash = trash != NULL ? strdup(trash) : NULL;
	no->no_dirs[0] = plfs_parent_ino(kind == PLFS_RENAME ? to : path);
	no->no_dirs[1] = kind == PLFS_RENAME ? plfs_parent_ino(path) : no->no_dirs[0];
	if (plfs_g.pl_trace) {
		plfs_log("name change %zu: %d %s%s%s (directories %lu, %lu)", plfs_g.pl_n_names - 1,
		         (int)kind, path, to != NULL ? " -> " : "", to != NULL ? to : "",
		         (unsigned long)no->no_dirs[0], (unsigned long)no->no_dirs[1]);
	}
}

/* Moves a backing object out of the tree, keeping it for an undo; writes
 * its new backing path. */
static int plfs_to_trash(const char *backing_path, char ret_trash[PATH_MAX])
{
	int n = snprintf(ret_trash, PATH_MAX, "%s/%" PRIu64, plfs_g.pl_trash,
	                 ++plfs_g.pl_trash_seq);

	if (n < 0 || n >= PATH_MAX) {
		return -ENAMETOOLONG;
	}
	if (rename(backing_path, ret_trash) < 0) {
		return -errno;
	}
	return 0;
}

/* ---- the control file ---- */

static int plfs_is_control(const char *path)
{
	return path != NULL && strcmp(path, PLFS_CONTROL) == 0;
}

static int plfs_status(char *out, size_t cap)
{
	return snprintf(out, cap,
	                "dead %d\nseed %" PRIu64 "\nchanges %" PRIu64 "\nfsyncs %" PRIu64
	                "\ndir_fsyncs %" PRIu64 "\ncuts %" PRIu64 "\nfiles_kept %" PRIu64
	                "\nfiles_dropped %" PRIu64 "\nfiles_torn %" PRIu64 "\nchanges_kept %" PRIu64
	                "\nchanges_lost %" PRIu64 "\nnames_kept %" PRIu64 "\nnames_undone %" PRIu64
	                "\narmed_left %" PRId64 "\nlast_wal_sync_ns %" PRId64 "\n",
	                plfs_g.pl_dead, plfs_g.pl_seed, plfs_g.pl_changes, plfs_g.pl_fsyncs,
	                plfs_g.pl_dir_fsyncs, plfs_g.pl_cuts, plfs_g.pl_files_kept,
	                plfs_g.pl_files_dropped, plfs_g.pl_files_torn, plfs_g.pl_ops_kept,
	                plfs_g.pl_ops_lost, plfs_g.pl_names_kept, plfs_g.pl_names_undone,
	                plfs_g.pl_arm_left, plfs_g.pl_last_wal_sync_ns);
}

static int plfs_control_write(const char *buf, size_t size)
{
	char cmd[PLFS_SUFFIX_MAX + 32];
	char suffix[PLFS_SUFFIX_MAX];
	long long n;

	if (size >= sizeof(cmd)) {
		return -EINVAL;
	}
	memcpy(cmd, buf, size);
	cmd[size] = '\0';
	if (strncmp(cmd, "cut", 3) == 0) {
		if (!plfs_g.pl_dead) {
			plfs_cut("on command");
		}
		return (int)size;
	}
	if (sscanf(cmd, "policy %63s", suffix) == 1) {
		if (strcmp(suffix, "drop") == 0) {
			plfs_g.pl_policy = PLFS_DROP;
		} else if (strcmp(suffix, "keep") == 0) {
			plfs_g.pl_policy = PLFS_KEEP;
		} else if (strcmp(suffix, "random") == 0) {
			plfs_g.pl_policy = PLFS_RANDOM;
		} else {
			return -EINVAL;
		}
		return (int)size;
	}
	if (sscanf(cmd, "arm %63s %lld", suffix, &n) == 2 && n > 0) {
		snprintf(plfs_g.pl_arm_suffix, sizeof(plfs_g.pl_arm_suffix), "%s", suffix);
		plfs_g.pl_arm_left = n;
		return (int)size;
	}
	return -EINVAL;
}

/* ---- the operations ---- */

static void *plfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	/* An unlinked file that is still open stays reachable through its
	 * descriptor (no .fuse_hidden renames, which would be name changes
	 * of their own); the other calls still get their path. */
	cfg->hard_remove = 1;
	cfg->nullpath_ok = 0;
	/* The kernel keeps no stale attributes across a cut: the attributes
	 * come from the backing files, which a cut rewrites. */
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	return NULL;
}

static int plfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	char bp[PATH_MAX];
	int rc = 0;

	if (plfs_is_control(path)) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		return 0;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		rc = -EIO;
	} else if (fi != NULL) {
		if (fstat((int)fi->fh, st) < 0) {
			rc = -errno;
		} else if (plfs_in_trash((int)fi->fh)) {
			/* unlinked, kept only for an undo */
			st->st_nlink = 0;
		}
	} else {
		plfs_path(bp, sizeof(bp), path);
		if (lstat(bp, st) < 0) {
			rc = -errno;
		}
	}
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                        struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	char bp[PATH_MAX];
	DIR *dir;
	struct dirent *de;
	int rc = 0;

	(void)off;
	(void)fi;
	(void)flags;
	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		pthread_mutex_unlock(&plfs_g.pl_lock);
		return -EIO;
	}
	plfs_path(bp, sizeof(bp), path);
	dir = opendir(bp);
	if (dir == NULL) {
		rc = -errno;
		pthread_mutex_unlock(&plfs_g.pl_lock);
		return rc;
	}
	while ((de = readdir(dir)) != NULL) {
		if (fill(buf, de->d_name, NULL, 0, 0) != 0) {
			break;
		}
	}
	closedir(dir);
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return 0;
}

/* Opens the backing file read-write whatever the caller asked (a revert
 * and the record of replaced bytes read through it), without O_APPEND
 * (pwrite on an O_APPEND descriptor ignores its offset on Linux; the
 * kernel gives FUSE the offset of an append already). */
static int plfs_backing_flags(int flags)
{
	flags &= ~(O_ACCMODE | O_APPEND | O_TRUNC | O_CREAT | O_EXCL);
	return flags | O_RDWR;
}

static int plfs_open_common(const char *path, struct fuse_file_info *fi, int creating, mode_t mode)
{
	char bp[PATH_MAX];
	int fd;
	int rc;
	struct stat st;
	int existed;

	plfs_path(bp, sizeof(bp), path);
	existed = lstat(bp, &st) == 0;
	if (creating && existed && (fi->flags & O_EXCL)) {
		return -EEXIST;
	}
	if (!existed && !creating) {
		return -ENOENT;
	}
	if (!existed || (fi->flags & O_TRUNC)) {
		rc = plfs_change(path);
		if (rc < 0) {
			return rc;
		}
	}
	fd = open(bp, plfs_backing_flags(fi->flags) | (existed ? 0 : O_CREAT | O_EXCL), mode);
	if (fd < 0 && errno == EISDIR) {
		fd = open(bp, fi->flags & ~(O_TRUNC | O_CREAT | O_EXCL));
	}
	if (fd < 0) {
		return -errno;
	}
	if (!existed) {
		plfs_name_add(PLFS_CREATE, bp, NULL, NULL);
	} else if ((fi->flags & O_TRUNC) && S_ISREG(st.st_mode)) {
		rc = plfs_truncate_fd(fd, 0);
		if (rc < 0) {
			close(fd);
			return rc;
		}
	}
	fi->fh = (uint64_t)fd;
	return 0;
}

static int plfs_open(const char *path, struct fuse_file_info *fi)
{
	int rc;

	if (plfs_is_control(path)) {
		fi->direct_io = 1;
		fi->fh = (uint64_t)-1;
		return 0;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_g.pl_dead ? -EIO : plfs_open_common(path, fi, 0, 0);
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int rc;

	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_g.pl_dead ? -EIO : plfs_open_common(path, fi, 1, mode);
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	ssize_t r;

	if (plfs_is_control(path)) {
		char text[PLFS_STATUS_MAX];
		int n;

		pthread_mutex_lock(&plfs_g.pl_lock);
		n = plfs_status(text, sizeof(text));
		pthread_mutex_unlock(&plfs_g.pl_lock);
		if (off >= n) {
			return 0;
		}
		if ((size_t)(n - off) < size) {
			size = (size_t)(n - off);
		}
		memcpy(buf, text + off, size);
		return (int)size;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		pthread_mutex_unlock(&plfs_g.pl_lock);
		return -EIO;
	}
	r = pread((int)fi->fh, buf, size, off);
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return r < 0 ? -errno : (int)r;
}

static int plfs_write(const char *path, const char *buf, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
	int fd = (int)fi->fh;
	struct plfs_data_op *op = NULL;
	struct stat st;
	ssize_t w;
	int rc;

	if (plfs_is_control(path)) {
		pthread_mutex_lock(&plfs_g.pl_lock);
		rc = plfs_control_write(buf, size);
		pthread_mutex_unlock(&plfs_g.pl_lock);
		return rc;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto done;
	}
	op = calloc(1, sizeof(*op));
	if (op == NULL) {
		rc = -ENOMEM;
		goto done;
	}
	op->do_kind = PLFS_WRITE;
	op->do_off = off;
	op->do_len = size;
	op->do_old_size = st.st_size;
	op->do_new = malloc(size > 0 ? size : 1);
	if (op->do_new == NULL) {
		rc = -ENOMEM;
		goto done;
	}
	memcpy(op->do_new, buf, size);
	if (off < st.st_size) {
		ssize_t r;

		op->do_old_len =
		        (size_t)(st.st_size - off) < size ? (size_t)(st.st_size - off) : size;
		op->do_old = malloc(op->do_old_len);
		if (op->do_old == NULL) {
			rc = -ENOMEM;
			goto done;
		}
		r = pread(fd, op->do_old, op->do_old_len, off);
		if (r < 0 || (size_t)r != op->do_old_len) {
			rc = -EIO;
			goto done;
		}
	}
	w = pwrite(fd, buf, size, off);
	if (w < 0) {
		rc = -errno;
		goto done;
	}
	/* A short write records only what it wrote. */
	op->do_len = (size_t)w;
	if (op->do_old_len > (size_t)w) {
		op->do_old_len = (size_t)w;
	}
	plfs_node_add(plfs_node_get(st.st_ino, fd), op);
	op = NULL;
	rc = (int)w;
done:
	if (op != NULL) {
		free(op->do_new);
		free(op->do_old);
		free(op);
	}
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	char bp[PATH_MAX];
	int rc;
	int fd;

	if (plfs_is_control(path)) {
		return 0;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	if (fi != NULL) {
		rc = plfs_truncate_fd((int)fi->fh, size);
		goto done;
	}
	plfs_path(bp, sizeof(bp), path);
	fd = open(bp, O_RDWR);
	if (fd < 0) {
		rc = -errno;
		goto done;
	}
	rc = plfs_truncate_fd(fd, size);
	close(fd);
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct stat st;
	struct plfs_node *nd;
	int64_t start = plfs_now_ns();
	int rc;

	(void)datasync;
	if (plfs_is_control(path)) {
		return 0;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	plfs_g.pl_fsyncs++;
	if (fstat((int)fi->fh, &st) < 0) {
		rc = -errno;
		goto done;
	}
	/* Everything this file holds now is what a cut leaves of it. The
	 * backing file itself need not reach the disk: the test models the
	 * disk. */
	nd = plfs_node_take(st.st_ino);
	if (nd != NULL) {
		plfs_data_free(nd->nd_ops);
		close(nd->nd_fd);
		free(nd);
	}
	if (path != NULL && plfs_ends_with(path, "-wal")) {
		plfs_g.pl_last_wal_sync_ns = start;
	}
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	char bp[PATH_MAX];
	struct stat st;
	size_t i;
	int rc;

	(void)datasync;
	(void)fi;
	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	plfs_g.pl_dir_fsyncs++;
	plfs_path(bp, sizeof(bp), path);
	if (stat(bp, &st) < 0) {
		rc = -errno;
		goto done;
	}
	for (i = 0; i < plfs_g.pl_n_names; i++) {
		struct plfs_name_op *no = &plfs_g.pl_names[i];

		if (no->no_dirs[0] == st.st_ino || no->no_dirs[1] == st.st_ino) {
			no->no_durable = 1;
		}
	}
	if (plfs_g.pl_trace) {
		plfs_log("directory fsync: %s (%lu)", path, (unsigned long)st.st_ino);
	}
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_unlink(const char *path)
{
	char bp[PATH_MAX];
	char trash[PATH_MAX];
	struct stat st;
	int rc;

	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	plfs_path(bp, sizeof(bp), path);
	if (lstat(bp, &st) < 0) {
		rc = -errno;
		goto done;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		goto done;
	}
	rc = plfs_to_trash(bp, trash);
	if (rc < 0) {
		goto done;
	}
	plfs_name_add(PLFS_UNLINK, bp, NULL, trash);
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_rename(const char *from, const char *to, unsigned int flags)
{
	char bfrom[PATH_MAX];
	char bto[PATH_MAX];
	char trash[PATH_MAX];
	struct stat st;
	int replaced = 0;
	int rc;

	if (flags != 0 && flags != RENAME_NOREPLACE) {
		return -EINVAL;
	}
	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(to);
	if (rc < 0) {
		goto done;
	}
	plfs_path(bfrom, sizeof(bfrom), from);
	plfs_path(bto, sizeof(bto), to);
	if (lstat(bfrom, &st) < 0) {
		rc = -errno;
		goto done;
	}
	if (lstat(bto, &st) == 0) {
		if (flags == RENAME_NOREPLACE) {
			rc = -EEXIST;
			goto done;
		}
		rc = plfs_to_trash(bto, trash);
		if (rc < 0) {
			goto done;
		}
		replaced = 1;
	}
	if (rename(bfrom, bto) < 0) {
		rc = -errno;
		if (replaced && rename(trash, bto) < 0) {
			plfs_log("rename: cannot put back %s: %s", bto, strerror(errno));
		}
		goto done;
	}
	plfs_name_add(PLFS_RENAME, bfrom, bto, replaced ? trash : NULL);
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_mkdir(const char *path, mode_t mode)
{
	char bp[PATH_MAX];
	int rc;

	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	plfs_path(bp, sizeof(bp), path);
	if (mkdir(bp, mode) < 0) {
		rc = -errno;
		goto done;
	}
	plfs_name_add(PLFS_MKDIR, bp, NULL, NULL);
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_rmdir(const char *path)
{
	char bp[PATH_MAX];
	char trash[PATH_MAX];
	DIR *dir;
	struct dirent *de;
	int rc;

	pthread_mutex_lock(&plfs_g.pl_lock);
	rc = plfs_change(path);
	if (rc < 0) {
		goto done;
	}
	plfs_path(bp, sizeof(bp), path);
	dir = opendir(bp);
	if (dir == NULL) {
		rc = -errno;
		goto done;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			rc = -ENOTEMPTY;
			break;
		}
	}
	closedir(dir);
	if (rc < 0) {
		goto done;
	}
	rc = plfs_to_trash(bp, trash);
	if (rc < 0) {
		goto done;
	}
	plfs_name_add(PLFS_RMDIR, bp, NULL, trash);
done:
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char bp[PATH_MAX];
	int rc = 0;

	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		rc = -EIO;
	} else if (fi != NULL) {
		rc = fchmod((int)fi->fh, mode) < 0 ? -errno : 0;
	} else {
		plfs_path(bp, sizeof(bp), path);
		rc = chmod(bp, mode) < 0 ? -errno : 0;
	}
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	char bp[PATH_MAX];
	int rc = 0;

	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		rc = -EIO;
	} else if (fi != NULL) {
		rc = fchown((int)fi->fh, uid, gid) < 0 ? -errno : 0;
	} else {
		plfs_path(bp, sizeof(bp), path);
		rc = lchown(bp, uid, gid) < 0 ? -errno : 0;
	}
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	char bp[PATH_MAX];
	int rc = 0;

	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		rc = -EIO;
	} else if (fi != NULL) {
		rc = futimens((int)fi->fh, tv) < 0 ? -errno : 0;
	} else {
		plfs_path(bp, sizeof(bp), path);
		rc = utimensat(AT_FDCWD, bp, tv, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	}
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	return statvfs(plfs_g.pl_backing, sv) < 0 ? -errno : 0;
}

static int plfs_opendir(const char *path, struct fuse_file_info *fi)
{
	int rc = 0;

	(void)fi;
	pthread_mutex_lock(&plfs_g.pl_lock);
	if (plfs_g.pl_dead) {
		rc = -EIO;
	} else {
		char bp[PATH_MAX];
		struct stat st;

		plfs_path(bp, sizeof(bp), path);
		if (stat(bp, &st) < 0) {
			rc = -errno;
		} else if (!S_ISDIR(st.st_mode)) {
			rc = -ENOTDIR;
		}
	}
	pthread_mutex_unlock(&plfs_g.pl_lock);
	return rc;
}

static int plfs_release(const char *path, struct fuse_file_info *fi)
{
	if (plfs_is_control(path) || fi->fh == (uint64_t)-1) {
		return 0;
	}
	close((int)fi->fh);
	return 0;
}

static int plfs_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	return 0;
}

static const struct fuse_operations plfs_ops = {
        .init = plfs_init,
        .getattr = plfs_getattr,
        .readdir = plfs_readdir,
        .opendir = plfs_opendir,
        .open = plfs_open,
        .create = plfs_create,
        .read = plfs_read,
        .write = plfs_write,
        .truncate = plfs_truncate,
        .fsync = plfs_fsync,
        .fsyncdir = plfs_fsyncdir,
        .unlink = plfs_unlink,
        .rename = plfs_rename,
        .mkdir = plfs_mkdir,
        .rmdir = plfs_rmdir,
        .chmod = plfs_chmod,
        .chown = plfs_chown,
        .utimens = plfs_utimens,
        .statfs = plfs_statfs,
        .release = plfs_release,
        .flush = plfs_flush,
};

/* Empties the trash a previous mount left (what it holds was removed for
 * good by the last cut or was never undone). */
static void plfs_trash_empty(void)
{
	char cmd[2 * PATH_MAX + 64];
	int n = snprintf(cmd, sizeof(cmd), "rm -rf -- '%s' && mkdir -p -- '%s'", plfs_g.pl_trash,
	                 plfs_g.pl_trash);

	if (n < 0 || (size_t)n >= sizeof(cmd) || system(cmd) != 0) {
		plfs_log("cannot empty %s", plfs_g.pl_trash);
	}
}

int main(int argc, char **argv)
{
	char *fargv[8];
	int fargc = 0;
	char *end;

	if (argc != 5) {
		fprintf(stderr, "usage: plfs SEED BACKING TRASH MOUNTPOINT\n");
		return 64;
	}
	plfs_g.pl_seed = strtoull(argv[1], &end, 10);
	if (*end != '\0' || realpath(argv[2], plfs_g.pl_backing) == NULL ||
	    realpath(argv[3], plfs_g.pl_trash) == NULL) {
		fprintf(stderr, "plfs: bad seed, or a directory that does not exist\n");
		return 64;
	}
	plfs_g.pl_rng = plfs_g.pl_seed;
	plfs_g.pl_trace = getenv("PLFS_TRACE") != NULL && strcmp(getenv("PLFS_TRACE"), "1") == 0;
	pthread_mutex_init(&plfs_g.pl_lock, NULL);
	plfs_trash_empty();
	fargv[fargc++] = argv[0];
	fargv[fargc++] = "-f";
	fargv[fargc++] = "-o";
	fargv[fargc++] = "fsname=plfs,subtype=plfs";
	fargv[fargc++] = argv[4];
	fargv[fargc] = NULL;
	plfs_log("seed %" PRIu64 ", %s on %s", plfs_g.pl_seed, plfs_g.pl_backing, argv[4]);
	return fuse_main(fargc, fargv, &plfs_ops, NULL);
}
