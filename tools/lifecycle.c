// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: what grow, detach, attach and replace-ssd (cmd_lifecycle.c)
 * share.  The test hooks, the devices of a table line, the drain with
 * progress, the switch of an nxd volume to linear over its HDD (detach),
 * the checks of a new SSD and the load of an nxd line over a linear
 * volume (attach).
 *
 * Test hooks (for --dry-run only): NXDCTL_TEST_TABLE holds the volume's
 * table line ("0 LEN TARGET PARAMS"), NXDCTL_TEST_STATUS its status
 * ("STATE FIELDS...") instead of asking device-mapper.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <libdevmapper.h>

#include "nxdctl.h"

static const char *test_table, *test_status;

void lc_hooks(void)
{
	const char *e = getenv("NXDCTL_TEST_TABLE");

	test_table = e && *e ? e : NULL;
	e = getenv("NXDCTL_TEST_STATUS");
	test_status = e && *e ? e : NULL;
}

bool lc_test(void)
{
	return test_table || test_status;
}

/* ---- device-mapper, or the test hooks ---- */

static int parse_table_line(const char *line, struct dm_line *t)
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

int lc_table(const char *name, struct dm_line *t)
{
	if (test_table)
		return parse_table_line(test_table, t);
	return dm_table(name, t);
}

int lc_status(const char *name, struct dm_nxd_status *s)
{
	if (test_status)
		return dm_parse_nxd_status(test_status, s) ?
			fail(NXDCTL_EXIT_USAGE, "bad test status") : 0;
	return dm_nxd_status(name, s);
}

int lc_resolve_any(const char *arg, struct vol *v)
{
	const char *base;

	if (!lc_test())
		return dm_resolve(arg, v);
	if (vol_start(arg, v, &base))
		return NXDCTL_EXIT_USAGE;
	snprintf(v->name, sizeof(v->name), "%s", base);
	snprintf(v->kname, sizeof(v->kname), "dm-0");
	return 0;
}

int lc_nxd_volume(const struct cmd *c, int argc, char **argv, int nargs,
		  bool dry_run, struct vol *v, struct dm_line *t)
{
	const char *arg;
	int rc;

	rc = want_args(c, argc, argv, nargs, nargs);
	if (rc)
		return rc;
	if (lc_test() && !dry_run)
		return usage_error(c->name, "the test hooks need --dry-run");
	arg = argv[optind];
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

/* ---- devices ---- */

/* A device of a table line ("MAJ:MIN" or a path) as a path to open. */
void lc_dev_path(const char *tok, char *out, size_t len)
{
	if (strchr(tok, '/') || devnode_of(tok, out, len))
		snprintf(out, len, "%s", tok);
}

/* ... and as a name for people: /dev/md0 (253:3). */
void lc_dev_say(const char *tok, char *out, size_t len)
{
	char n[PATH_MAX];

	if (!strchr(tok, '/') && !devname_of(tok, n, sizeof(n)))
		snprintf(out, len, "%s (%s)", n, tok);
	else
		snprintf(out, len, "%s", tok);
}

/* The first two words of an nxd line (HDD, SSD) and what follows. */
int lc_nxd_devs(const char *params, char *hdd, char *ssd, size_t len,
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

int lc_dev_bytes(const char *tok, bool dry_run, uint64_t *bytes,
		 dev_t *rdev)
{
	char p[PATH_MAX];

	lc_dev_path(tok, p, sizeof(p));
	return dev_size(p, dry_run, bytes, rdev);
}

/*
 * Where the data area of the nxd volume over @hdd_tok and @ssd_tok
 * starts (HDD sectors): the SSD superblock's data_offset, else (the SSD
 * cannot be read) the HDD label's.  0 or an exit code (said).
 */
int lc_data_offset(const char *hdd_tok, const char *ssd_tok, uint64_t *off)
{
	char h[PATH_MAX], s[PATH_MAX];
	struct nxd_meta hm, sm;
	uint64_t bytes;
	int e;

	lc_dev_path(hdd_tok, h, sizeof(h));
	lc_dev_path(ssd_tok, s, sizeof(s));
	if (probe_role(s, 0, &sm, &bytes, &e) == ROLE_SSD) {
		*off = sm.data_offset;
		return 0;
	}
	if (probe_role(h, 0, &hm, &bytes, &e) == ROLE_HDD) {
		*off = hm.data_offset;
		return 0;
	}
	return fail(NXDCTL_EXIT_NOVOL, "neither the SSD superblock on %s nor "
		    "the HDD label on %s can be read:\ncannot tell where the "
		    "volume's data area starts", s, h);
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

static void say_log(FILE *f, const char *name, const struct dm_nxd_status *s,
		    double t, bool tty)
{
	fprintf(f, "%snxdctl: %s: draining: log %.1f%% used (%" PRIu64
		" of %" PRIu64 " blocks), %" PRIu64 " index entries, %.0f s%s",
		tty ? "\r" : "", name, s->log_blocks ? 100.0 * s->log_used /
		s->log_blocks : 0.0, s->log_used, s->log_blocks,
		s->index_entries, t, tty ? "   " : "\n");
	fflush(f);
}

/* A failed suspend or check: drop the loaded table, resume the live one. */
static void back_out(const char *name)
{
	dm_op(DM_DEVICE_CLEAR, name, NULL, false);
	dm_op(DM_DEVICE_RESUME, name, NULL, false);
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
	struct dm_nxd_status s;
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

/* ---- detach ---- */

/*
 * Print a log_at_risk or abandon_log reply ("blocks B ranges R S+N ...")
 * as the sectors at risk, one range a line.
 */
static void say_risk(const char *name, const char *reply, bool lost)
{
	unsigned long long blocks = 0, start, nr, shown = 0;
	unsigned int ranges = 0;
	const char *p = reply;
	int n = 0;

	if (sscanf(p, "blocks %llu ranges %u%n", &blocks, &ranges, &n) < 2) {
		printf("%s: reply '%s'\n", name, reply);
		return;
	}
	printf("%s: %s %llu sectors (%llu blocks of 4 KiB) in %u ranges%s\n",
	       name, lost ? "gave up" : "at risk:", blocks * 8, blocks, ranges,
	       blocks ? ":" : "");
	for (p += n; sscanf(p, " %llu+%llu%n", &start, &nr, &n) == 2; p += n) {
		printf("  lost sectors %llu+%llu\n", start, nr);
		shown++;
	}
	if (shown < ranges)
		printf("  ... and %llu more ranges (dmesg, and the HDD "
		       "label: nxdctl show-super)\n", ranges - shown);
}

/*
 * detach --accept-log-loss: say what the frozen log holds that the HDD
 * does not, and with --yes give it up (abandon_log): the volume then
 * reads and writes the HDD alone and its log is empty.
 */
static int give_up_log(const struct vol *v, const struct detach_opts *o)
{
	char reply[16384];
	int rc;

	printf("dmsetup message %s 0 log_at_risk\n"
	       "dmsetup message %s 0 abandon_log\n", v->name, v->name);
	if (o->dry_run)
		return 0;
	rc = dm_message_out(v, "log_at_risk", reply, sizeof(reply));
	if (rc)
		return rc;
	say_risk(v->name, reply, false);
	fflush(stdout);
	if (!o->yes)
		return fail(NXDCTL_EXIT_USAGE, "%s: these writes exist only "
			    "on the failed SSD and are lost for good\n"
			    "(those sectors read back older data): add --yes "
			    "to go ahead", v->name);
	rc = dm_message_out(v, "abandon_log", reply, sizeof(reply));
	if (rc)
		return rc;
	say_risk(v->name, reply, true);
	printf("%s: the SSD log is abandoned (HDD label): the volume runs "
	       "on the HDD alone;\nthe old SSD is refused unless loaded "
	       "with accept_log_loss\n", v->name);
	fflush(stdout);
	return 0;
}

int lc_detach(const struct vol *v, const struct dm_line *t,
	      const struct detach_opts *o)
{
	char hdd[PATH_MAX], ssd[PATH_MAX], hs[PATH_MAX + 32];
	char ss[PATH_MAX + 32], dos[16] = "";
	struct dm_line lin, now;
	struct dm_nxd_status s;
	bool degraded;
	uint64_t off;
	int rc;

	rc = lc_nxd_devs(t->params, hdd, ssd, sizeof(hdd), NULL);
	if (!rc)
		rc = lc_status(v->name, &s);
	if (rc)
		return rc;
	lc_dev_say(hdd, hs, sizeof(hs));
	lc_dev_say(ssd, ss, sizeof(ss));
	if (!strcmp(s.state, "suspended"))
		return fail(NXDCTL_EXIT_USAGE, "%s is suspended: resume it "
			    "first", v->name);
	degraded = s.degraded || !strcmp(s.state, "degraded");
	if (o->accept_loss && !degraded)
		return fail(NXDCTL_EXIT_USAGE, "%s is not degraded: "
			    "--accept-log-loss is for a volume whose SSD "
			    "failed; without it detach copies the log to "
			    "the HDD, losing nothing", v->name);
	if (degraded && !o->accept_loss)
		fprintf(stderr, "nxdctl: %s is degraded: its SSD failed a "
			"write, so nothing new is logged and\nthe destager "
			"copies the frozen log (%" PRIu64 " blocks) from the "
			"SSD to the HDD.\nThe switch waits for that; if the "
			"SSD cannot be read the log never empties,\nand the "
			"volume stays nxd (the writes in it exist nowhere "
			"else):\n--accept-log-loss gives them up.\n", v->name,
			s.log_used);
	if (o->accept_loss) {
		rc = give_up_log(v, o);
		if (rc)
			return rc;
	}

	/* The data area as the volume maps it: from its data offset. */
	rc = lc_data_offset(hdd, ssd, &off);
	if (rc)
		return rc;
	memset(&lin, 0, sizeof(lin));
	lin.ntargets = 1;
	lin.len = t->len;
	snprintf(lin.type, sizeof(lin.type), "linear");
	snprintf(lin.params, sizeof(lin.params), "%s %" PRIu64, hdd, off);

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
		rc = dm_op(DM_DEVICE_RELOAD, v->name, &lin, false);
	if (rc)
		goto restore;
	rc = dm_op(DM_DEVICE_SUSPEND, v->name, NULL, o->nolockfs);
	if (rc) {
		back_out(v->name);
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
		back_out(v->name);
		goto restore;
	}
	rc = dm_op(DM_DEVICE_RESUME, v->name, NULL, false);
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

/* ---- attach ---- */

/*
 * May @ssd become the log of a volume over HDD @hdd_dev?  Says what is
 * wrong; 0, or an exit code unless @force covers it.
 */
int lc_ssd_checks(const char *ssd, const char *hdd, dev_t hdd_dev,
		  const char *old_ssd, bool dry_run, bool format, bool force)
{
	char a[PATH_MAX], b[PATH_MAX];
	char holder[NXD_NAME_LEN], desc[1024], u[40], msg[PATH_MAX + 128];
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
		problems += log_risk_check(ssd, ROLE_SSD, &m);
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
	snprintf(msg, sizeof(msg), "refusing to use %s: what is named above "
		 "would be overwritten\nor lost (--force to go ahead)", ssd);
	return checks_verdict(problems, force, msg);
}

/*
 * Load the nxd line @params (format included) at the length of the live
 * linear table of @v and resume.  Prints the steps.
 */
int lc_attach_load(const struct vol *v, uint64_t len, const char *params,
		   bool dry_run)
{
	struct dm_line nt, now;
	struct dm_nxd_status s;
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
	rc = dm_op(DM_DEVICE_RELOAD, v->name, &nt, false);
	if (rc)
		return rc;
	rc = dm_op(DM_DEVICE_SUSPEND, v->name, NULL, false);
	if (rc) {
		back_out(v->name);
		return rc;
	}
	rc = dm_op(DM_DEVICE_RESUME, v->name, NULL, false);
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
int lc_attach_params(char *out, size_t len, const char *hdd,
		     const char *ssd, unsigned int nopts, const char *opts)
{
	int n = snprintf(out, len, "%s %s %u%s%s format", hdd, ssd, nopts + 1,
			 *opts && *opts != ' ' ? " " : "", opts);

	if (n < 0 || (size_t)n >= len)
		return usage_error(NULL, "device paths too long");
	return 0;
}

void lc_attach_done(const char *ssd, const char *hdd)
{
	char p[PATH_MAX];

	/* The kernel wrote a superblock and a label: re-probe both. */
	udev_change(ssd);
	lc_dev_path(hdd, p, sizeof(p));
	udev_change(p);
	printf("The new log and HDD label carry a new volume UUID; "
	       "'nxdctl assemble %s'\nbrings the volume back after a "
	       "reboot.\n", ssd);
}
