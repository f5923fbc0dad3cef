/* plmount.h: the power-loss file system (plfs.c) from a test program: mount
 * it on a fresh directory, arm or cut the power, read its counters,
 * unmount and mount again over what the cut left. */
#ifndef IDEMHOOK_PLMOUNT_H
#define IDEMHOOK_PLMOUNT_H

#include <stdint.h>
#include <sys/types.h>

struct plmount {
	char pm_root[256];    /* temporary directory holding the three below */
	char pm_backing[300]; /* what the mount shows (and what a cut rewrites) */
	char pm_trash[300];   /* unlinked objects kept for an undo */
	char pm_mnt[300];     /* the mount point */
	char pm_log[300];     /* plfs's stderr (its seeds and cuts) */
	pid_t pm_pid;         /* 0 when not mounted */
};

/* Exits 77 (skipped, with a line that says why) unless this process is root,
 * /dev/fuse exists and $IDEMHOOK_PLFS names the plfs binary; exits 1 instead
 * when the environment has IDEMHOOK_TEST_REQUIRE_FUSE=1 (CI). */
void plmount_require_or_skip(const char *who);

/* Creates the temporary directory with an empty backing directory. Returns
 * 0 or -1. */
int plmount_init(struct plmount *pm);

/* Starts plfs with seed over pm_backing and waits (up to 10 s) until the
 * mount answers. Returns 0 or -1 (a mount that the kernel refuses is -1;
 * plmount_require_or_skip has already skipped where FUSE cannot be). */
int plmount_up(struct plmount *pm, uint64_t seed);

/* Sends one command to the control file ("cut", "arm -wal 12", "policy
 * drop"). Returns 0 or -1. */
int plmount_command(struct plmount *pm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The counter name of the control file (e.g. "dead", "cuts"), or -1. */
int64_t plmount_counter(struct plmount *pm, const char *name);

/* Unmounts (lazily, so a process still dying does not keep it) and reaps
 * plfs. Returns 0 or -1. */
int plmount_down(struct plmount *pm);

/* plmount_down, then removes the temporary directory. */
void plmount_finish(struct plmount *pm);

/* A path under the mount point, in a static
 * rotating buffer (valid for the next few calls). */
const char *plmount_path(struct plmount *pm, const char *rel);

/* The seed of this run: $IDEMHOOK_POWERLOSS_SEED, else the clock; printed
 * once so that a failure can be run again with the same draws. */
uint64_t plmount_seed(const char *who);

#endif
