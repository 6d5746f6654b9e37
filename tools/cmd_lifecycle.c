// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl grow, detach, attach, replace-ssd: the online lifecycle of a
 * volume's SSD and HDD (docs/admin-guide.md, sections 7 and 8), done as
 * the dmsetup recipes there do it, with the checks in between.
 *
 *   grow:        reload the live nxd line at the length the HDD has room
 *                for now (the kernel moves the label at resume).
 *   detach:      drain (with progress), drain_on_suspend=1, load a linear
 *                table over the HDD at the same length, suspend (lockfs:
 *                the suspend drains again with the file system frozen),
 *                check the old table's log is empty, resume.  Anything
 *                wrong before the resume: the nxd table is resumed again.
 *   attach:      a linear volume over an HDD gets an SSD: the nxd line
 *                with "format" at the same length, suspend, resume.
 *   replace-ssd: detach, then attach the new SSD with the old options.
 *
 * Test hooks (for --dry-run only): NXDCTL_TEST_TABLE holds the volume's
 * table line ("0 LEN TARGET PARAMS"), NXDCTL_TEST_STATUS its status
 * ("STATE FIELDS...") instead of asking device-mapper.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <libdevmapper.h>

#include "nxdctl.h"

#define MIN_SSD_BYTES	(NXD_MIN_SSD_SECTORS * 512ULL)

enum {
	O_TIMEOUT = 512, O_NOLOCKFS,
};

struct lc_table {
	unsigned int ntargets;
	uint64_t start, len;
	char type[32];
	char params[PATH_MAX + 1024];
};

/* The fields of the nxd status line this file needs. */
struct lc_status {
	char state[16];
	uint64_t log_blocks, log_used, index_entries, degraded;
};

static const char *test_table, *test_status;

static void lc_hooks(void)
{
	const char *e = getenv("NXDCTL_TEST_TABLE");

	test_table = e && *e ? e : NULL;
	e = getenv("NXDCTL_TEST_STATUS");
	test_status = e && *e ? e : NULL;
}

static bool lc_test(void)
{
	return test_table || test_status;
}

/* ---- device-mapper ---- */

static int parse_table_line(const char *line, struct lc_table *t)
{
	unsigned long long s, l;
	int n = 0;

	memset(t, 0, sizeof(*t));
	if (sscanf(line, "%llu %llu %31s %n", &s, &l, t->type, &n) < 3 || !n)
		return fail(NXDCTL_EXIT_USAGE, "bad test table '%s'", line);
	t->ntargets = 1;
	t->start = s;
	t->len = l;
	snprintf(t->params, sizeof(t->params), "%s", line + n);
	return 0;
}

/* The live table of @name: its first target, and how many there are. */
static int lc_table(const char *name, struct lc_table *t)
{
	uint64_t start, length;
	char *type = NULL, *par = NULL;
	struct dm_task *dmt;
	void *next = NULL;

	if (test_table)
		return parse_table_line(test_table, t);
	memset(t, 0, sizeof(*t));
	dmt = dm_task_create(DM_DEVICE_TABLE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, name) || !dm_task_run(dmt)) {
		dm_task_destroy(dmt);
		return dm_fail("reading the table of", name);
	}
	do {
		next = dm_get_next_target(dmt, next, &start, &length, &type,
					  &par);
		if (!type)
			break;
		if (!t->ntargets++) {
			t->start = start;
			t->len = length;
			snprintf(t->type, sizeof(t->type), "%s", type);
			snprintf(t->params, sizeof(t->params), "%s",
				 par ? par : "");
		}
	} while (next);
	dm_task_destroy(dmt);
	return 0;
}

static int parse_status_line(const char *p, struct lc_status *s)
{
	unsigned long long f[27];
	int i, n;

	memset(s, 0, sizeof(*s));
	if (sscanf(p, "%15s%n", s->state, &n) != 1)
		return -EINVAL;
	p += n;
	/* counters in struct nxd_ioc_counters order: degraded is the 26th */
	for (i = 0; i < 26; i++) {
		if (sscanf(p, "%llu%n", &f[i], &n) != 1)
			return -EINVAL;
		p += n;
	}
	s->log_blocks = f[0];
	s->log_used = f[1];
	s->index_entries = f[2];
	s->degraded = f[25];
	return 0;
}

/* The status of the live nxd table of @name. */
static int lc_status(const char *name, struct lc_status *s)
{
	uint64_t start, length;
	char *type = NULL, *par = NULL;
	struct dm_task *dmt;
	int rc = 0;

	if (test_status)
		return parse_status_line(test_status, s) ?
			fail(NXDCTL_EXIT_USAGE, "bad test status") : 0;
	dmt = dm_task_create(DM_DEVICE_STATUS);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, name) || !dm_task_run(dmt)) {
		dm_task_destroy(dmt);
		return dm_fail("reading the status of", name);
	}
	dm_get_next_target(dmt, NULL, &start, &length, &type, &par);
	if (!type || strcmp(type, TARGET_NAME) || !par ||
	    parse_status_line(par, s))
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: unexpected status '%s %s'",
			  name, type ? type : "", par ? par : "");
	dm_task_destroy(dmt);
	return rc;
}

/*
 * One device-mapper operation on @name: RELOAD (with @t), SUSPEND
 * (@nolockfs), RESUME (waits for udev) or CLEAR.  Prints nothing.
 */
static int lc_dm(int op, const char *name, const struct lc_table *t,
		 bool nolockfs)
{
	static const char *const what[] = {
		[DM_DEVICE_RELOAD] = "loading a table into",
		[DM_DEVICE_SUSPEND] = "suspending",
		[DM_DEVICE_RESUME] = "resuming",
		[DM_DEVICE_CLEAR] = "clearing the inactive table of",
	};
	struct dm_task *dmt = dm_task_create(op);
	uint32_t cookie = 0;
	int rc = 0;

	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, name) ||
	    (t && !dm_task_add_target(dmt, t->start, t->len, t->type,
				      t->params)) ||
	    (nolockfs && !dm_task_skip_lockfs(dmt)) ||
	    (op == DM_DEVICE_RESUME && !dm_task_set_cookie(dmt, &cookie, 0)) ||
	    !dm_task_run(dmt)) {
		rc = dm_fail(what[op], name);
		if (op == DM_DEVICE_RELOAD && rc == NXDCTL_EXIT_KERNEL)
			fprintf(stderr, "nxdctl: the kernel log (dmesg) says "
				"why the table was refused\n");
	}
	if (cookie)
		dm_udev_wait(cookie);
	dm_task_destroy(dmt);
	return rc;
}

/*
 * VOL naming any device-mapper device (attach takes a linear one): a dm
 * name, /dev/mapper/NAME, /dev/dm-N, dm-N or a device node.
 */
static int lc_resolve_any(const char *arg, struct vol *v)
{
	char path[PATH_MAX];
	struct dm_task *dmt;
	struct dm_info info;
	const char *base, *n;
	struct stat st;
	bool bydev = false;

	memset(v, 0, sizeof(*v));
	v->arg = arg;
	base = strrchr(arg, '/');
	base = base ? base + 1 : arg;
	if (!*base)
		return fail(NXDCTL_EXIT_USAGE, "bad volume name '%s'", arg);
	if (lc_test()) {
		snprintf(v->name, sizeof(v->name), "%s", base);
		snprintf(v->kname, sizeof(v->kname), "dm-0");
		return 0;
	}
	if (!strchr(arg, '/') && !strncmp(arg, "dm-", 3) && arg[3] &&
	    strspn(arg + 3, "0123456789") == strlen(arg + 3)) {
		snprintf(path, sizeof(path), "/dev/%s", arg);
		arg = path;
	}
	if (strchr(arg, '/') && strncmp(arg, "/dev/mapper/", 12)) {
		if (stat(arg, &st))
			return fail(NXDCTL_EXIT_NOVOL, "%s: %s", arg,
				    strerror(errno));
		if (!S_ISBLK(st.st_mode))
			return fail(NXDCTL_EXIT_NOVOL,
				    "%s is not a block device", arg);
		bydev = true;
	}
	dmt = dm_task_create(DM_DEVICE_INFO);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if ((bydev ? !dm_task_set_major(dmt, major(st.st_rdev)) ||
	     !dm_task_set_minor(dmt, minor(st.st_rdev)) :
	     !dm_task_set_name(dmt, base)) || !dm_task_run(dmt) ||
	    !dm_task_get_info(dmt, &info)) {
		int rc = dm_fail("looking up", v->arg);

		dm_task_destroy(dmt);
		return rc;
	}
	n = dm_task_get_name(dmt);
	if (!info.exists || !n || !*n) {
		dm_task_destroy(dmt);
		return fail(NXDCTL_EXIT_NOVOL, "'%s' is not a device-mapper "
			    "device", v->arg);
	}
	snprintf(v->name, sizeof(v->name), "%s", n);
	snprintf(v->kname, sizeof(v->kname), "dm-%u", info.minor);
	v->major = info.major;
	v->minor = info.minor;
	dm_task_destroy(dmt);
	return 0;
}

/* ---- devices ---- */

/* A device of a table line ("MAJ:MIN" or a path) as a path to open. */
static void dev_path(const char *tok, char *out, size_t len)
{
	if (strchr(tok, '/') || devnode_of(tok, out, len))
		snprintf(out, len, "%s", tok);
}

/* ... and as a name for people: /dev/md0 (253:3). */
static void dev_say(const char *tok, char *out, size_t len)
{
	char n[PATH_MAX];

	if (!strchr(tok, '/') && !devname_of(tok, n, sizeof(n)))
		snprintf(out, len, "%s (%s)", n, tok);
	else
		snprintf(out, len, "%s", tok);
}

/* The first two words of an nxd line (HDD, SSD) and what follows. */
static int nxd_devs(const char *params, char *hdd, char *ssd, size_t len,
		    const char **rest)
{
	int a = 0, b = 0;

	if (sscanf(params, "%*s%n %*s%n", &a, &b) < 0 || !a || !b ||
	    (size_t)a >= len || (size_t)(b - a) > len)
		return fail(NXDCTL_EXIT_KERNEL, "unexpected table '%s'",
			    params);
	memcpy(hdd, params, a);
	hdd[a] = 0;
	while (params[a] == ' ')
		a++;
	memcpy(ssd, params + a, b - a);
	ssd[b - a] = 0;
	if (rest) {
		*rest = params + b;
		while (**rest == ' ')
			(*rest)++;
	}
	return 0;
}

static int dev_bytes(const char *tok, bool dry_run, uint64_t *bytes,
		     dev_t *rdev)
{
	char p[PATH_MAX];

	dev_path(tok, p, sizeof(p));
	return dev_size(p, dry_run, bytes, rdev);
}

/* ---- progress ---- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void say_log(FILE *f, const char *name, const struct lc_status *s,
		    double t, bool tty)
{
	fprintf(f, "%snxdctl: %s: draining: log %.1f%% used (%" PRIu64
		" of %" PRIu64 " blocks), %" PRIu64 " index entries, %.0f s%s",
		tty ? "\r" : "", name, s->log_blocks ? 100.0 * s->log_used /
		s->log_blocks : 0.0, s->log_used, s->log_blocks,
		s->index_entries, t, tty ? "   " : "\n");
	fflush(f);
}

/*
 * The drain message, sent by a child so that the parent can show the
 * log emptying, give up at @timeout seconds (0: never) or on SIGINT /
 * SIGTERM; the kernel's drain wait is interruptible.  0 if the drain
 * returned success, else an exit code (reported).
 */
static int drain_progress(const struct vol *v, unsigned long timeout)
{
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	bool tty = isatty(STDERR_FILENO);
	double t0 = now_s(), last = -10;
	struct lc_status s;
	int status, rc = 0;
	pid_t pid, w;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return fail(NXDCTL_EXIT_KERNEL, "fork: %s", strerror(errno));
	if (!pid) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		_exit(dm_message(v, "drain"));
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	for (;;) {
		double t = now_s() - t0;

		w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (interrupted || (timeout && t >= timeout)) {
			kill(pid, SIGTERM);
			waitpid(pid, &status, 0);
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: drain %s after %.0f "
				  "s", v->name, interrupted ? "interrupted" :
				  "timed out", t);
			break;
		}
		if (t - last >= (tty ? 1 : 5) && !lc_status(v->name, &s)) {
			say_log(stderr, v->name, &s, t, tty);
			last = t;
		}
		usleep(200000);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (!rc && !lc_status(v->name, &s))
		say_log(stderr, v->name, &s, now_s() - t0, false);
	else if (tty)
		fputc('\n', stderr);
	if (rc)
		return rc;
	if (!WIFEXITED(status))
		return fail(NXDCTL_EXIT_KERNEL, "%s: drain ended by signal %d",
			    v->name, WTERMSIG(status));
	return WEXITSTATUS(status);
}

/* ---- grow ---- */

static int do_grow(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, O_DRY }, HELP_OPT, { 0 }
	};
	char hdd[PATH_MAX], ssd[PATH_MAX], hs[PATH_MAX + 32];
	struct lc_table t, now;
	struct lc_status s;
	bool dry_run = false;
	uint64_t bytes, len;
	struct vol v;
	int o, rc;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case O_DRY:
			dry_run = true;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (rc)
		return rc;
	if (lc_test() && !dry_run)
		return usage_error(c->name, "the test hooks need --dry-run");
	rc = lc_test() ? lc_resolve_any(argv[optind], &v) :
		resolve_vol(argv[optind], &v);
	if (!rc)
		rc = lc_table(v.name, &t);
	if (rc)
		return rc;
	if (t.ntargets != 1 || strcmp(t.type, TARGET_NAME) || t.start)
		return fail(NXDCTL_EXIT_NOVOL, "%s: not a one-target nxd "
			    "table (%s)", v.name, t.type);
	rc = nxd_devs(t.params, hdd, ssd, sizeof(hdd), NULL);
	if (!rc)
		rc = lc_status(v.name, &s);
	if (!rc)
		rc = dev_bytes(hdd, dry_run, &bytes, NULL);
	if (rc)
		return rc;
	dev_say(hdd, hs, sizeof(hs));
	if (s.degraded || !strcmp(s.state, "degraded"))
		return fail(NXDCTL_EXIT_USAGE, "%s is degraded (its SSD "
			    "failed a write): growing writes a new SSD "
			    "superblock;\nreplace the SSD first (nxdctl "
			    "replace-ssd)", v.name);
	if (strcmp(s.state, "ok"))
		return fail(NXDCTL_EXIT_USAGE, "%s is %s: resume it first",
			    v.name, s.state);
	len = nxd_hdd_data_sectors(bytes >> 9);
	if (len <= t.len)
		return fail(NXDCTL_EXIT_USAGE, "%s: nothing to grow: the "
			    "volume has %" PRIu64 " sectors, the HDD %s "
			    "(%" PRIu64 " sectors) has room for %" PRIu64,
			    v.name, t.len, hs, bytes >> 9, len);
	printf("%s: %" PRIu64 " -> %" PRIu64 " sectors (%.1f -> %.1f GiB), "
	       "HDD %s\n", v.name, t.len, len, t.len / 2097152.0,
	       len / 2097152.0, hs);
	t.len = len;
	printf("dmsetup load %s --table '0 %" PRIu64 " %s %s'\n"
	       "dmsetup resume %s\n", v.name, t.len, t.type, t.params, v.name);
	fflush(stdout);
	if (dry_run)
		return 0;
	rc = lc_dm(DM_DEVICE_RELOAD, v.name, &t, false);
	if (rc) {
		fprintf(stderr, "nxdctl: %s keeps its old table and size\n",
			v.name);
		return rc;
	}
	rc = lc_dm(DM_DEVICE_RESUME, v.name, NULL, false);
	if (rc) {
		fprintf(stderr, "nxdctl: %s: the resume failed: see dmesg and "
			"'dmsetup info %s' (it may be\nleft suspended with "
			"the longer table)\n", v.name, v.name);
		return rc;
	}
	rc = lc_table(v.name, &now);
	if (rc)
		return rc;
	if (now.len != len)
		return fail(NXDCTL_EXIT_KERNEL, "%s: the live table has %"
			    PRIu64 " sectors, not %" PRIu64, v.name, now.len,
			    len);
	printf("%s: grown to %" PRIu64 " sectors; now grow the file system: "
	       "xfs_growfs MOUNTPOINT\n(ext4/ldiskfs: resize2fs "
	       "/dev/mapper/%s)\n", v.name, len, v.name);
	return 0;
}

/* ---- detach ---- */

struct detach_opts {
	unsigned long timeout;
	bool dry_run, nolockfs;
};

/*
 * Switch nxd volume @v (live table @t) to linear over its HDD, online.
 * Prints the steps; on any failure before the resume the nxd table is
 * live again (said so).
 */
static int detach(const struct vol *v, const struct lc_table *t,
		  const struct detach_opts *o)
{
	char hdd[PATH_MAX], ssd[PATH_MAX], hs[PATH_MAX + 32];
	char ss[PATH_MAX + 32], dos[16] = "";
	struct lc_table lin, now;
	struct lc_status s;
	bool degraded;
	int rc;

	rc = nxd_devs(t->params, hdd, ssd, sizeof(hdd), NULL);
	if (!rc)
		rc = lc_status(v->name, &s);
	if (rc)
		return rc;
	dev_say(hdd, hs, sizeof(hs));
	dev_say(ssd, ss, sizeof(ss));
	if (!strcmp(s.state, "suspended"))
		return fail(NXDCTL_EXIT_USAGE, "%s is suspended: resume it "
			    "first", v->name);
	degraded = s.degraded || !strcmp(s.state, "degraded");
	if (degraded)
		fprintf(stderr, "nxdctl: %s is degraded: its SSD failed a "
			"write, so nothing new is logged and\nthe destager "
			"copies the frozen log (%" PRIu64 " blocks) from the "
			"SSD to the HDD.\nThe switch waits for that; if the "
			"SSD cannot be read the log never empties,\nand the "
			"volume stays nxd (the writes in it exist nowhere "
			"else).\n", v->name, s.log_used);

	memset(&lin, 0, sizeof(lin));
	lin.ntargets = 1;
	lin.len = t->len;
	snprintf(lin.type, sizeof(lin.type), "linear");
	snprintf(lin.params, sizeof(lin.params), "%s 0", hdd);

	printf("%s: detaching SSD %s; %s becomes linear over HDD %s "
	       "(%" PRIu64 " sectors)\n", v->name, ss, v->name, hs, t->len);
	printf("echo 1 > %s/block/%s/nxd/drain_on_suspend\n"
	       "dmsetup message %s 0 drain\n"
	       "dmsetup load %s --table '0 %" PRIu64 " linear %s'\n"
	       "dmsetup suspend%s %s\n"
	       "dmsetup status %s    # log_used_blocks, index_entries: 0\n"
	       "dmsetup resume %s\n", sysfs_root, v->kname, v->name, v->name,
	       lin.len, lin.params, o->nolockfs ? " --nolockfs" : "",
	       v->name, v->name, v->name);
	fflush(stdout);
	if (o->dry_run)
		return 0;

	/* The suspend drains again once dm has frozen the file system. */
	rc = attr_get(v, "drain_on_suspend", dos, sizeof(dos));
	if (!rc && strcmp(dos, "1"))
		rc = attr_set(v, "drain_on_suspend", "1");
	if (rc)
		return rc;
	rc = drain_progress(v, o->timeout);
	if (!rc)
		rc = lc_dm(DM_DEVICE_RELOAD, v->name, &lin, false);
	if (rc)
		goto restore;
	rc = lc_dm(DM_DEVICE_SUSPEND, v->name, NULL, o->nolockfs);
	if (rc) {
		lc_dm(DM_DEVICE_CLEAR, v->name, NULL, false);
		lc_dm(DM_DEVICE_RESUME, v->name, NULL, false);
		goto restore;
	}
	/* The old table is still live while suspended: is its log empty? */
	rc = lc_status(v->name, &s);
	if (!rc && (s.log_used || s.index_entries))
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: after the suspend's drains "
			  "the log still holds %" PRIu64 " blocks (%" PRIu64
			  " index entries)", v->name, s.log_used,
			  s.index_entries);
	if (rc) {
		lc_dm(DM_DEVICE_CLEAR, v->name, NULL, false);
		lc_dm(DM_DEVICE_RESUME, v->name, NULL, false);
		goto restore;
	}
	rc = lc_dm(DM_DEVICE_RESUME, v->name, NULL, false);
	if (rc) {
		fprintf(stderr, "nxdctl: %s: the resume of the linear table "
			"failed: see dmesg and 'dmsetup info\n%s' (the log "
			"was empty: the HDD alone is complete)\n", v->name,
			v->name);
		return rc;
	}
	rc = lc_table(v->name, &now);
	if (rc)
		return rc;
	if (strcmp(now.type, "linear") || now.len != t->len)
		return fail(NXDCTL_EXIT_KERNEL, "%s: the live table is %s of "
			    "%" PRIu64 " sectors, not linear", v->name,
			    now.type, now.len);
	printf("%s: detached: linear over %s; the log was empty at the "
	       "switch.\nSSD %s keeps its nxd superblock (an empty log): "
	       "'nxdctl wipe' it before\nusing it elsewhere, or attach a "
	       "new SSD (nxdctl attach %s SSD).\n", v->name, hs, ss,
	       v->name);
	return 0;

restore:
	if (dos[0] && strcmp(dos, "1"))
		attr_set(v, "drain_on_suspend", dos);
	fprintf(stderr, "nxdctl: %s was not detached: the nxd table is live "
		"(SSD %s)\n", v->name, ss);
	return rc;
}

static int lc_nxd_volume(const struct cmd *c, const char *arg, bool dry_run,
			 struct vol *v, struct lc_table *t)
{
	int rc;

	if (lc_test() && !dry_run)
		return usage_error(c->name, "the test hooks need --dry-run");
	rc = lc_test() ? lc_resolve_any(arg, v) : resolve_vol(arg, v);
	if (!rc)
		rc = lc_table(v->name, t);
	if (rc)
		return rc;
	if (t->ntargets != 1 || strcmp(t->type, TARGET_NAME) || t->start)
		return fail(NXDCTL_EXIT_NOVOL, "%s: not a one-target nxd "
			    "table (%s)", v->name, t->type);
	return 0;
}

static int do_detach(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "nolockfs", no_argument, NULL, O_NOLOCKFS },
		{ "dry-run", no_argument, NULL, O_DRY }, HELP_OPT, { 0 }
	};
	struct detach_opts dopt = { 0 };
	struct lc_table t;
	struct vol v;
	int o, rc;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case O_TIMEOUT:
			rc = parse_uint_opt(c->name, "--timeout", optarg, 0,
					    INT_MAX, &dopt.timeout);
			if (rc)
				return rc;
			break;
		case O_NOLOCKFS:
			dopt.nolockfs = true;
			break;
		case O_DRY:
			dopt.dry_run = true;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc)
		rc = lc_nxd_volume(c, argv[optind], dopt.dry_run, &v, &t);
	if (rc)
		return rc;
	return detach(&v, &t, &dopt);
}

/* ---- attach ---- */

/*
 * May @ssd become the log of a volume over HDD @hdd_dev?  Says what is
 * wrong; 0, or an exit code unless @force covers it.
 */
static int ssd_checks(const char *ssd, const char *hdd, dev_t hdd_dev,
		      const char *old_ssd, bool dry_run, bool format,
		      bool force)
{
	char a[PATH_MAX], b[PATH_MAX];
	char holder[NXD_NAME_LEN], desc[1024], u[40];
	struct log_risk lr;
	struct nxd_meta m;
	uint64_t bytes, pb;
	int problems = 0, rc, e, fd;
	enum role r;
	dev_t sdev;

	rc = dev_size(ssd, dry_run, &bytes, &sdev);
	if (rc)
		return rc;
	if ((sdev && sdev == hdd_dev) ||
	    (!sdev && realpath(ssd, a) && realpath(hdd, b) && !strcmp(a, b)))
		return usage_error(NULL, "%s is the volume's HDD", ssd);
	if (old_ssd && sdev) {
		struct stat st;

		if (!stat(old_ssd, &st) && st.st_rdev == sdev)
			return usage_error(NULL, "%s is the volume's SSD "
					   "already", ssd);
	}
	if (sdev && nxd_holder(sdev, holder, sizeof(holder)))
		return fail(NXDCTL_EXIT_USAGE, "%s is in use by the nxd "
			    "volume %s", ssd, holder);
	if (bytes < MIN_SSD_BYTES)
		return fail(NXDCTL_EXIT_USAGE, "%s is too small for an nxd "
			    "SSD log (%" PRIu64 " bytes, needs %llu)", ssd,
			    bytes, MIN_SSD_BYTES);
	if (sdev) {
		fd = open(ssd, O_RDONLY | O_EXCL | O_CLOEXEC);
		if (fd < 0 && errno == EBUSY)
			return fail(NXDCTL_EXIT_USAGE, "%s is in use (mounted, "
				    "or held by md or device-mapper)", ssd);
		if (fd >= 0)
			close(fd);
	}
	r = probe_role(ssd, 0, &m, &pb, &e);
	if (r == ROLE_HDD) {
		fprintf(stderr, "nxdctl: %s carries an nxd HDD label\n", ssd);
		problems++;
	} else if (r == ROLE_SSD) {
		nxdctl_fmt_uuid(u, m.vol_uuid);
		if (!format)
			return fail(NXDCTL_EXIT_USAGE, "%s carries the nxd SSD "
				    "superblock of volume %s: --format to\n"
				    "reuse it (its old log is discarded)", ssd,
				    u);
		rc = log_risk(ssd, ROLE_SSD, &m, &lr);
		if (rc > 0)
			log_risk_say(&lr, m.vol_uuid);
		else if (rc < 0)
			fprintf(stderr, "nxdctl: %s: cannot read its log\n",
				ssd);
		if (rc)
			problems++;
	} else {
		rc = signatures(ssd, desc, sizeof(desc));
		if (rc < 0)
			return fail(errno_code(-rc), "%s: cannot probe: %s",
				    ssd, strerror(-rc));
		if (rc) {
			fprintf(stderr, "nxdctl: SSD %s holds %s\n", ssd,
				desc);
			problems++;
		}
	}
	if (!problems)
		return 0;
	if (force) {
		fprintf(stderr, "nxdctl: --force: going ahead\n");
		return 0;
	}
	return fail(NXDCTL_EXIT_USAGE, "refusing to use %s: what is named "
		    "above would be overwritten\nor lost (--force to go "
		    "ahead)", ssd);
}

/*
 * Load the nxd line @params (format included) at the length of the live
 * linear table of @v and resume.  Prints the steps.
 */
static int attach_load(const struct vol *v, uint64_t len, const char *params,
		       bool dry_run)
{
	struct lc_table nt, now;
	struct lc_status s;
	int rc;

	memset(&nt, 0, sizeof(nt));
	nt.ntargets = 1;
	nt.len = len;
	snprintf(nt.type, sizeof(nt.type), "%s", TARGET_NAME);
	snprintf(nt.params, sizeof(nt.params), "%s", params);
	printf("dmsetup load %s --table '0 %" PRIu64 " %s %s'\n"
	       "dmsetup suspend %s\ndmsetup resume %s\n", v->name, nt.len,
	       nt.type, nt.params, v->name, v->name);
	fflush(stdout);
	if (dry_run)
		return 0;
	rc = lc_dm(DM_DEVICE_RELOAD, v->name, &nt, false);
	if (rc)
		return rc;
	rc = lc_dm(DM_DEVICE_SUSPEND, v->name, NULL, false);
	if (rc) {
		lc_dm(DM_DEVICE_CLEAR, v->name, NULL, false);
		lc_dm(DM_DEVICE_RESUME, v->name, NULL, false);
		return rc;
	}
	rc = lc_dm(DM_DEVICE_RESUME, v->name, NULL, false);
	if (rc) {
		fprintf(stderr, "nxdctl: %s: the resume failed: see dmesg and "
			"'dmsetup info %s'\n", v->name, v->name);
		return rc;
	}
	rc = lc_table(v->name, &now);
	if (!rc && (strcmp(now.type, TARGET_NAME) || now.len != len))
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: the live table is %s, not "
			  "nxd", v->name, now.type);
	if (!rc)
		rc = lc_status(v->name, &s);
	if (rc)
		return rc;
	printf("%s: attached: nxd, state %s, log of %" PRIu64 " blocks\n",
	       v->name, s.state, s.log_blocks);
	return 0;
}

/*
 * The nxd parameters over @hdd and @ssd: @nopts table options in @opts
 * (count first, as in the table line), plus "format".
 */
static int attach_params(char *out, size_t len, const char *hdd,
			 const char *ssd, unsigned int nopts, const char *opts)
{
	int n = snprintf(out, len, "%s %s %u%s%s format", hdd, ssd, nopts + 1,
			 *opts && *opts != ' ' ? " " : "", opts);

	if (n < 0 || (size_t)n >= len)
		return usage_error(NULL, "device paths too long");
	return 0;
}

static void attach_done(const char *ssd, const char *hdd)
{
	char p[PATH_MAX];

	/* The kernel wrote a superblock and a label: re-probe both. */
	udev_change(ssd);
	dev_path(hdd, p, sizeof(p));
	udev_change(p);
	printf("The new log and HDD label carry a new volume UUID; "
	       "'nxdctl assemble %s'\nbrings the volume back after a "
	       "reboot.\n", ssd);
}

static const struct option attach_opts[] = {
	{ "write-threshold", required_argument, NULL, O_WTHR },
	{ "mode", required_argument, NULL, O_MODE },
	{ "low-watermark", required_argument, NULL, O_LOWWM },
	{ "high-watermark", required_argument, NULL, O_HIGHWM },
	{ "destage-rate", required_argument, NULL, O_RATE },
	{ "ssd-discard", required_argument, NULL, O_DISCARD },
	{ "drain-on-suspend", required_argument, NULL, O_DRAIN },
	{ "dry-run", no_argument, NULL, O_DRY },
	{ "format", no_argument, NULL, O_FORMAT },
	{ "force", no_argument, NULL, O_FORCE },
	HELP_OPT, { 0 }
};

static int do_attach(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	char hdd[PATH_MAX], hs[PATH_MAX + 32];
	char params[PATH_MAX + 1024];
	uint64_t bytes, max;
	bool format = false;
	struct lc_table t;
	const char *ssd;
	unsigned long off;
	dev_t hdev;
	struct vol v;
	int o, rc, n = 0;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", attach_opts, NULL)) != -1) {
		switch (o) {
		case O_FORMAT:
			format = true;
			break;
		case O_FORCE:
			co.force = true;
			break;
		default:
			return opt_default(c, o, argv);
		case O_WTHR ... O_DRY:
			rc = table_opt(c->name, o, optarg, &co);
			if (rc)
				return rc;
		}
	}
	rc = want_args(c, argc, argv, 2, 2);
	if (rc)
		return rc;
	if (lc_test() && !co.dry_run)
		return usage_error(c->name, "the test hooks need --dry-run");
	ssd = argv[optind + 1];
	rc = lc_resolve_any(argv[optind], &v);
	if (!rc)
		rc = lc_table(v.name, &t);
	if (rc)
		return rc;
	if (t.ntargets == 1 && !strcmp(t.type, TARGET_NAME))
		return fail(NXDCTL_EXIT_USAGE, "%s is an nxd volume already: "
			    "nxdctl replace-ssd %s %s", v.name, v.name, ssd);
	if (t.ntargets != 1 || strcmp(t.type, "linear") || t.start ||
	    sscanf(t.params, "%4095s %lu %n", hdd, &off, &n) < 2 || !n ||
	    t.params[n])
		return fail(NXDCTL_EXIT_NOVOL, "%s is not a one-target linear "
			    "volume (%u targets, %s %s)", v.name, t.ntargets,
			    t.type, t.params);
	if (off)
		return fail(NXDCTL_EXIT_USAGE, "%s maps its HDD from sector "
			    "%lu: the data area of an nxd volume starts at 0",
			    v.name, off);
	rc = dev_bytes(hdd, co.dry_run, &bytes, &hdev);
	if (rc)
		return rc;
	dev_say(hdd, hs, sizeof(hs));
	max = nxd_hdd_data_sectors(bytes >> 9);
	if (t.len > max)
		return fail(NXDCTL_EXIT_USAGE, "%s has %" PRIu64 " sectors, "
			    "but over HDD %s an nxd volume can have\nat most %"
			    PRIu64 " (the last MiB holds the label): the "
			    "label would overwrite the\nend of the volume",
			    v.name, t.len, hs, max);
	rc = ssd_checks(ssd, hdd, hdev, NULL, co.dry_run, format, co.force);
	if (rc)
		return rc;
	fprintf(stderr, "nxdctl: a new log on %s and a new label in the "
		"last MiB of %s; the\ndata area is not touched\n", ssd, hs);
	rc = attach_params(params, sizeof(params), hdd, ssd, co.nargs,
			   co.extra);
	if (!rc)
		rc = attach_load(&v, t.len, params, co.dry_run);
	if (rc) {
		if (!co.dry_run)
			fprintf(stderr, "nxdctl: %s stays linear over %s\n",
				v.name, hs);
		return rc;
	}
	if (!co.dry_run)
		attach_done(ssd, hdd);
	return 0;
}

/* ---- replace-ssd ---- */

static int do_replace(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "nolockfs", no_argument, NULL, O_NOLOCKFS },
		{ "dry-run", no_argument, NULL, O_DRY },
		{ "format", no_argument, NULL, O_FORMAT },
		{ "force", no_argument, NULL, O_FORCE },
		HELP_OPT, { 0 }
	};
	char hdd[PATH_MAX], ssd[PATH_MAX], old[PATH_MAX];
	char params[PATH_MAX + 1024];
	char hs[PATH_MAX + 32];
	struct detach_opts dopt = { 0 };
	bool format = false, force = false;
	const char *rest, *newssd;
	unsigned long nopts = 0;
	struct lc_table t;
	dev_t hdev;
	uint64_t bytes;
	struct vol v;
	char *end;
	int o, rc;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case O_TIMEOUT:
			rc = parse_uint_opt(c->name, "--timeout", optarg, 0,
					    INT_MAX, &dopt.timeout);
			if (rc)
				return rc;
			break;
		case O_NOLOCKFS:
			dopt.nolockfs = true;
			break;
		case O_DRY:
			dopt.dry_run = true;
			break;
		case O_FORMAT:
			format = true;
			break;
		case O_FORCE:
			force = true;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 2, 2);
	if (!rc)
		rc = lc_nxd_volume(c, argv[optind], dopt.dry_run, &v, &t);
	if (rc)
		return rc;
	newssd = argv[optind + 1];
	rc = nxd_devs(t.params, hdd, ssd, sizeof(hdd), &rest);
	if (!rc)
		rc = dev_bytes(hdd, dopt.dry_run, &bytes, &hdev);
	if (rc)
		return rc;
	dev_say(hdd, hs, sizeof(hs));
	dev_path(ssd, old, sizeof(old));
	/* The live line's options (count first) go to the new line. */
	if (*rest) {
		errno = 0;
		nopts = strtoul(rest, &end, 10);
		if (errno || end == rest)
			return fail(NXDCTL_EXIT_KERNEL, "%s: unexpected table "
				    "'%s'", v.name, t.params);
		rest = end;
	}
	/* Everything about the new SSD before the old one goes. */
	rc = ssd_checks(newssd, hdd, hdev, old, dopt.dry_run, format, force);
	if (!rc)
		rc = attach_params(params, sizeof(params), hdd, newssd, nopts,
				   rest);
	if (rc)
		return rc;
	rc = detach(&v, &t, &dopt);
	if (rc)
		return rc;
	rc = attach_load(&v, t.len, params, dopt.dry_run);
	if (rc) {
		if (!dopt.dry_run)
			fprintf(stderr, "nxdctl: %s is online, linear over %s "
				"(no SSD); try again with\n'nxdctl attach %s "
				"%s'\n", v.name, hs, v.name, newssd);
		return rc;
	}
	if (!dopt.dry_run)
		attach_done(newssd, hdd);
	return 0;
}

const struct cmd cmd_grow = {
	"grow", do_grow, "VOL [--dry-run]",
	"Grow the nxd volume VOL to what its HDD has room for now, after the "
	"HDD\n(an md array) grew: the live table is reloaded at the new "
	"length (the\nHDD size rounded down to 1 MiB, less 1 MiB for the "
	"label), with the same\ndevices and options, and resumed; the file "
	"system stays mounted.  Then\ngrow the file system (xfs_growfs, "
	"resize2fs).",
	"Options:\n"
	"  --dry-run   print the old and new sizes and the dmsetup "
	"commands only\n"
	"Refuses (exit 1) when the HDD has no room for more, and while the "
	"volume\nis degraded or suspended.\n" VOL_HELP,
};

const struct cmd cmd_detach = {
	"detach", do_detach, "VOL [--timeout S] [--nolockfs] [--dry-run]",
	"Take the SSD out of the nxd volume VOL online: drain its log "
	"(progress on\nstderr), then switch VOL to a linear table over the "
	"HDD at the same\nlength.  The file system stays mounted.  The "
	"suspend of the switch drains\nagain after device-mapper froze the "
	"file system (drain_on_suspend=1);\nthe switch happens only if the "
	"old table's log is then empty, else the\nnxd table is resumed.  "
	"The SSD keeps its superblock (nxdctl wipe).",
	"Options:\n"
	"  --timeout S   give up the drain after S seconds (default 0: "
	"no limit);\n"
	"                SIGINT does the same.  The volume stays nxd.\n"
	"  --nolockfs    suspend without freezing the file system (it is "
	"frozen\n"
	"                already: fsfreeze -f; a lockfs nested in an "
	"fsfreeze left\n"
	"                the device frozen on 6.12)\n"
	"  --dry-run     print the dmsetup-equivalent steps only\n"
	"A degraded volume (failed SSD writes) is detached once the destager "
	"has\ncopied its frozen log to the HDD, which needs the SSD to be "
	"readable.\n" VOL_HELP,
};

const struct cmd cmd_attach = {
	"attach", do_attach, "VOL SSD [--format] [--force] [OPTIONS]",
	"Give the linear volume VOL (over an HDD from sector 0, e.g. after "
	"nxdctl\ndetach) the SSD log SSD, online: VOL is reloaded as nxd at "
	"the same\nlength with \"format\" (a new log on SSD, a new label in "
	"the HDD's last\nMiB, a new volume UUID; the data area is not "
	"touched) and resumed.",
	"Options:\n"
	"  --format      SSD may carry an nxd superblock (its old log is "
	"discarded)\n"
	"  --force       go ahead although SSD holds a signature (file "
	"system, RAID,\n"
	"                partition table) or a log with writes not on its "
	"HDD\n"
	"  --dry-run     run the checks and print the dmsetup commands only\n"
	"  and the table options of create (--write-threshold, --mode, "
	"...).\n"
	"Refuses a VOL longer than an nxd volume over its HDD can be (the "
	"label\nwould overwrite its end).\n" VOL_HELP,
};

const struct cmd cmd_replace_ssd = {
	"replace-ssd", do_replace, "VOL NEWSSD [--timeout S] [--format] "
	"[--force] [--dry-run]",
	"Replace the SSD of the nxd volume VOL by NEWSSD, online: the checks "
	"of\nattach on NEWSSD first, then detach (drain, linear), then "
	"attach NEWSSD\nwith the options of the old table line.  If the "
	"attach fails, VOL stays\nonline as linear over its HDD.",
	"Options: --timeout, --nolockfs as for detach; --format, --force as "
	"for attach;\n"
	"  --dry-run     print the dmsetup-equivalent steps only\n"
	"A degraded volume (its SSD failed a write) is replaced once its "
	"frozen log\nhas been copied to the HDD, read from the failed SSD; "
	"if it cannot be read,\nthe drain does not end (use --timeout) and "
	"the volume stays as it is.\n" VOL_HELP,
};
