/* plmount.c: mounting, cutting and unmounting the power-loss file system. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plmount.h"

#define PLMOUNT_PATHS 8 /* rotating buffers of plmount_path */

static void plmount_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

void plmount_require_or_skip(const char *who)
{
	const char *req = getenv("IDEMHOOK_TEST_REQUIRE_FUSE");
	const char *bin = getenv("IDEMHOOK_PLFS");
	const char *why = NULL;
	int required = req != NULL && strcmp(req, "1") == 0;

	if (geteuid() != 0) {
		why = "not root (mounting the power-loss file system needs root)";
	} else if (access("/dev/fuse", R_OK | W_OK) != 0) {
		why = "no usable /dev/fuse";
	} else if (bin == NULL || access(bin, X_OK) != 0) {
		why = "IDEMHOOK_PLFS does not name the plfs binary (run through meson test)";
	}
	if (why == NULL) {
		return;
	}
	if (required) {
		fprintf(stderr, "%s: FAILED: %s, and IDEMHOOK_TEST_REQUIRE_FUSE=1\n", who, why);
		exit(1);
	}
	fprintf(stderr, "%s: SKIPPED: %s\n", who, why);
	exit(77);
}

uint64_t plmount_seed(const char *who)
{
	const char *env = getenv("IDEMHOOK_POWERLOSS_SEED");
	uint64_t seed;

	if (env != NULL && env[0] != '\0') {
		seed = strtoull(env, NULL, 10);
	} else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
		seed %= 1000000000000ULL;
	}
	fprintf(stderr,
	        "%s: seed %" PRIu64 " (IDEMHOOK_POWERLOSS_SEED=%" PRIu64 " draws the same again)\n",
	        who, seed, seed);
	return seed;
}

int plmount_init(struct plmount *pm)
{
	const char *tmp = getenv("TMPDIR");

	memset(pm, 0, sizeof(*pm));
	snprintf(pm->pm_root, sizeof(pm->pm_root), "%s/idemhook-plfs-XXXXXX",
	         tmp != NULL ? tmp : "/tmp");
	if (mkdtemp(pm->pm_root) == NULL) {
		fprintf(stderr, "plmount: mkdtemp: %s\n", strerror(errno));
		pm->pm_root[0] = '\0';
		return -1;
	}
	snprintf(pm->pm_backing, sizeof(pm->pm_backing), "%s/backing", pm->pm_root);
	snprintf(pm->pm_trash, sizeof(pm->pm_trash), "%s/trash", pm->pm_root);
	snprintf(pm->pm_mnt, sizeof(pm->pm_mnt), "%s/mnt", pm->pm_root);
	snprintf(pm->pm_log, sizeof(pm->pm_log), "%s/plfs.log", pm->pm_root);
	if (mkdir(pm->pm_backing, 0755) < 0 || mkdir(pm->pm_trash, 0755) < 0 ||
	    mkdir(pm->pm_mnt, 0755) < 0) {
		fprintf(stderr, "plmount: mkdir: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int plmount_up(struct plmount *pm, uint64_t seed)
{
	const char *bin = getenv("IDEMHOOK_PLFS");
	char seed_s[32];
	char control[400];
	int i;

	snprintf(seed_s, sizeof(seed_s), "%" PRIu64, seed);
	snprintf(control, sizeof(control), "%s/.plfs", pm->pm_mnt);
	pm->pm_pid = fork();
	if (pm->pm_pid < 0) {
		pm->pm_pid = 0;
		return -1;
	}
	if (pm->pm_pid == 0) {
		int fd = open(pm->pm_log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		execl(bin, "plfs", seed_s, pm->pm_backing, pm->pm_trash, pm->pm_mnt, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 1000; i++) {
		struct stat st;
		int status;

		if (stat(control, &st) == 0) {
			return 0;
		}
		if (waitpid(pm->pm_pid, &status, WNOHANG) == pm->pm_pid) {
			fprintf(stderr,
			        "plmount: plfs exited (status %d) before mounting; see %s\n",
			        status, pm->pm_log);
			pm->pm_pid = 0;
			return -1;
		}
		plmount_sleep_ms(10);
	}
	fprintf(stderr, "plmount: plfs did not mount within 10 s; see %s\n", pm->pm_log);
	plmount_down(pm);
	return -1;
}

int plmount_command(struct plmount *pm, const char *fmt, ...)
{
	char control[400];
	char cmd[128];
	va_list ap;
	int fd;
	int n;
	ssize_t w;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(cmd)) {
		return -1;
	}
	snprintf(control, sizeof(control), "%s/.plfs", pm->pm_mnt);
	fd = open(control, O_WRONLY);
	if (fd < 0) {
		fprintf(stderr, "plmount: %s: %s\n", control, strerror(errno));
		return -1;
	}
	w = write(fd, cmd, (size_t)n);
	close(fd);
	if (w != n) {
		fprintf(stderr, "plmount: command \"%s\" refused\n", cmd);
		return -1;
	}
	return 0;
}

int64_t plmount_counter(struct plmount *pm, const char *name)
{
	char control[400];
	char text[2048];
	size_t len = strlen(name);
	char *line;
	int fd;
	ssize_t n;

	snprintf(control, sizeof(control), "%s/.plfs", pm->pm_mnt);
	fd = open(control, O_RDONLY);
	if (fd < 0) {
		return -1;
	}
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0) {
		return -1;
	}
	text[n] = '\0';
	for (line = text; line != NULL && *line != '\0';
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, name, len) == 0 && line[len] == ' ') {
			return strtoll(line + len + 1, NULL, 10);
		}
	}
	return -1;
}

int plmount_down(struct plmount *pm)
{
	int i;

	if (pm->pm_pid <= 0) {
		return 0;
	}
	if (umount2(pm->pm_mnt, MNT_DETACH) < 0) {
		fprintf(stderr, "plmount: umount %s: %s\n", pm->pm_mnt, strerror(errno));
	}
	for (i = 0; i < 1000; i++) {
		if (waitpid(pm->pm_pid, NULL, WNOHANG) == pm->pm_pid) {
			pm->pm_pid = 0;
			return 0;
		}
		plmount_sleep_ms(10);
	}
	fprintf(stderr, "plmount: plfs did not exit after the unmount; killing it\n");
	kill(pm->pm_pid, SIGKILL);
	waitpid(pm->pm_pid, NULL, 0);
	pm->pm_pid = 0;
	return -1;
}

static int plmount_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void plmount_finish(struct plmount *pm)
{
	const char *keep = getenv("IDEMHOOK_KEEP_TMP");

	plmount_down(pm);
	if (pm->pm_root[0] == '\0') {
		return;
	}
	if (keep != NULL && strcmp(keep, "1") == 0) {
		fprintf(stderr, "plmount: kept %s\n", pm->pm_root);
		return;
	}
	nftw(pm->pm_root, plmount_rm, 16, FTW_DEPTH | FTW_PHYS);
	pm->pm_root[0] = '\0';
}

const char *plmount_path(struct plmount *pm, const char *rel)
{
	static char bufs[PLMOUNT_PATHS][600];
	static int next;
	char *b = bufs[next];

	next = (next + 1) % PLMOUNT_PATHS;
	snprintf(b, sizeof(bufs[0]), "%s/%s", pm->pm_mnt, rel);
	return b;
}
