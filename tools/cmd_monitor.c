// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl monitor: wait for the device-mapper events dm-nxd raises
 * (degraded, log_full, drain_done, acked_lost) and report each one as a line of text
 * or NDJSON, or run a program with its details in the environment.
 *
 * One volume: DM_DEVICE_WAITEVENT with the event number last seen, as
 * dmsetup wait and dmeventd do, so that no event between two waits is
 * missed; after each wake-up the volume's counters (never reset) say
 * which kinds happened since the previous reading.  All volumes: one
 * child process per volume doing the same, and the list looked at again
 * every 2 seconds for new ones.
 *
 * The first reading is also reported when it shows an abnormal state
 * (degraded, log full, acknowledged writes lost): a volume that is
 * already degraded when the monitor starts, or that appears degraded,
 * is reported once.  Without VOL, the volumes of the configuration file
 * that are not active are reported at start (missing).  --oneshot:
 * those reports only, then exit (non-zero if there was any).
 *
 * Every report also goes to syslog(3), facility LOG_DAEMON, unless
 * --no-syslog.
 *
 * Test hooks: NXDCTL_TEST_EVENTS names a file of raw struct
 * nxd_ioc_stats records; the first is the reading at start, each "wait"
 * returns the next, and the end of the file is the volume going away.
 * NXDCTL_TEST_SYSLOG names a file that gets "<PRIORITY>MESSAGE" lines
 * instead of syslog(3); with a test hook and without it, nothing is
 * logged.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <syslog.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <libdevmapper.h>

#include "nxdctl.h"

#define MON_RESCAN_S	2

struct mon {
	bool json;
	const char *exec;	/* --exec PROG: run with sh -c */
	unsigned long count;	/* --count N: stop after N events (0: never) */
	bool oneshot;		/* --oneshot: the state now, then exit */
	bool syslog;		/* not --no-syslog */
	const char *config;	/* --config FILE */
	const char *test_events;
	const char *test_syslog;
	FILE *test_f;
};

struct watched {
	const char *name;
	unsigned int major, minor;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The volume's event number in *@nr; with @wait, first sleep until it is
 * no longer *@nr (at once if it already moved on).  0, -ENXIO if the
 * volume does not exist (or went away), -errno.
 */
static int dm_event(const char *name, uint32_t *nr, bool wait)
{
	struct dm_task *dmt = dm_task_create(wait ? DM_DEVICE_WAITEVENT :
					     DM_DEVICE_INFO);
	struct dm_info info;
	int r = 0;

	if (!dmt)
		return -ENOMEM;
	errno = 0;
	if (!dm_task_set_name(dmt, name) ||
	    (wait && (!dm_task_set_event_nr(dmt, *nr) ||
		      !dm_task_no_open_count(dmt))) ||
	    !dm_task_run(dmt) || !dm_task_get_info(dmt, &info))
		r = errno ? -errno : -EIO;
	else if (!info.exists)
		r = -ENXIO;
	else
		*nr = info.event_nr;
	dm_task_destroy(dmt);
	return r;
}

/* The next reading: from the kernel, or the test file's next record. */
static int read_counters(struct mon *m, const struct watched *w,
			 struct nxd_ioc_counters *c)
{
	struct nxd_ioc_stats *st = calloc(1, sizeof(*st));
	int r;

	if (!st)
		return -ENOMEM;
	if (m->test_f) {
		r = fread(st, 1, sizeof(*st), m->test_f) == sizeof(*st) ?
		    0 : -ENODEV;
	} else {
		r = peek_stats(nxdctl_encode_dev(w->major, w->minor), w->name,
			       st);
	}
	if (!r)
		*c = st->c;
	free(st);
	return r;
}

static void read_state(const struct watched *w, char *buf, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/nxd/state",
		 sysfs_root, w->major, w->minor);
	if (sysfs_read(path, buf, len))
		buf[0] = 0;
}

/* Run PROG with the event in its environment; wait for it. */
static void run_prog(const struct mon *m, const struct nxdctl_event *e)
{
	char **env = nxdctl_event_env(e);
	int status;
	pid_t pid;

	if (!env) {
		fail(NXDCTL_EXIT_KERNEL, "monitor: out of memory");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char **p;

		for (p = env; *p; p++)
			putenv(*p);
		execl("/bin/sh", "sh", "-c", m->exec, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		fail(NXDCTL_EXIT_KERNEL, "monitor: fork: %s", strerror(errno));
	else if (waitpid(pid, &status, 0) == pid &&
		 (!WIFEXITED(status) || WEXITSTATUS(status)))
		fprintf(stderr, "nxdctl: monitor: %s: '%s' exited %d\n",
			e->volume, m->exec, WIFEXITED(status) ?
			WEXITSTATUS(status) : 128 + WTERMSIG(status));
	nxdctl_env_free(env);
}

/* The event's text line, without its time stamp, to syslog. */
static void log_event(const struct mon *m, const struct nxdctl_event *e)
{
	int prio = LOG_DAEMON | nxdctl_event_level(e);
	char *buf = NULL, *msg;
	size_t len = 0;
	FILE *f;
	int fd;

	f = open_memstream(&buf, &len);
	if (!f)
		return;
	nxdctl_event_text(f, e);
	fclose(f);
	if (!buf)
		return;
	msg = strchr(buf, ' ');
	msg = msg ? msg + 1 : buf;
	msg[strcspn(msg, "\n")] = 0;
	if (m->test_syslog) {
		fd = open(m->test_syslog, O_WRONLY | O_CREAT | O_APPEND |
			  O_CLOEXEC, 0644);
		if (fd >= 0) {
			dprintf(fd, "<%d>%s\n", prio, msg);
			close(fd);
		}
	} else {
		syslog(prio, "%s", msg);
	}
	free(buf);
}

/* One line, written at once: several volumes' processes share stdout. */
static void report(const struct mon *m, const struct nxdctl_event *e)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (m->syslog)
		log_event(m, e);

	if (m->json || !m->exec) {
		f = open_memstream(&buf, &len);
		if (f) {
			if (m->json)
				nxdctl_event_json(f, e);
			else
				nxdctl_event_text(f, e);
			fclose(f);
			fflush(stdout);
			if (buf && write(STDOUT_FILENO, buf, len) < 0)
				fail(NXDCTL_EXIT_KERNEL, "monitor: write: %s",
				     strerror(errno));
			free(buf);
		}
	}
	if (m->exec)
		run_prog(m, e);
}

/* Watch one volume until it goes away or --count events were reported. */
static int monitor_one(struct mon *m, const struct watched *w)
{
	struct nxd_ioc_counters prev, now;
	struct nxdctl_event e;
	unsigned long seen = 0;
	uint32_t nr = 0;
	int r = 0;

	if (!m->test_f) {
		r = dm_event(w->name, &nr, false);
		if (r == -ENXIO)
			return fail(NXDCTL_EXIT_NOVOL, "%s: no such volume",
				    w->name);
		if (r)
			return fail(errno_code(-r), "%s: device-mapper info: "
				    "%s", w->name, strerror(-r));
	}
	r = read_counters(m, w, &prev);
	if (r)
		return fail(errno_code(-r), "%s: reading its counters: %s",
			    w->name, strerror(-r));
	/* The state it is in: reported if abnormal, once. */
	memset(&e, 0, sizeof(e));
	e.volume = w->name;
	e.major = w->major;
	e.minor = w->minor;
	e.event_nr = nr;
	e.time_ms = now_ms();
	if (!m->test_f)
		read_state(w, e.state, sizeof(e.state));
	if (nxdctl_event_current(&e, &prev)) {
		report(m, &e);
		if (m->count && ++seen >= m->count)
			return 0;
	}
	for (;;) {
		memset(&e, 0, sizeof(e));
		e.volume = w->name;
		e.major = w->major;
		e.minor = w->minor;
		if (m->test_f)
			nr++;
		else
			r = dm_event(w->name, &nr, true);
		if (!r)
			r = read_counters(m, w, &now);
		e.event_nr = nr;
		e.time_ms = now_ms();
		if (r == -ENXIO || r == -ENODEV) {
			e.removed = true;
			report(m, &e);
			return 0;
		}
		if (r)
			return fail(errno_code(-r), "%s: waiting for events: "
				    "%s", w->name, strerror(-r));
		/* Not one of ours (a rename), or already reported. */
		if (!nxdctl_event_diff(&e, &now, &prev))
			continue;
		prev = now;
		read_state(w, e.state, sizeof(e.state));
		report(m, &e);
		if (m->count && ++seen >= m->count)
			return 0;
	}
}

/*
 * The state now of the volumes @vols (every volume if @nvols is 0, and
 * the configured ones that are not active): one report for each that is
 * missing or abnormal.  With @missing_only, only the missing ones (the
 * others are reported by monitor_one()).  The exit status of --oneshot:
 * NXDCTL_EXIT_NOVOL if a configured volume is missing, else
 * NXDCTL_EXIT_DEGRADED if any was reported, else 0; or an error's code.
 */
static int report_now(struct mon *m, int nvols, char **vols,
		      bool missing_only)
{
	struct nxdctl_status *s;
	struct nxdctl_event e;
	unsigned int n, total, i;
	int rc, worst = 0;

	rc = collect_status(nvols, vols, 0, false, &s, &n, &total);
	if (rc)
		return rc;
	if (!nvols) {
		rc = collect_missing(m->config, &s, &n);
		if (rc) {
			free(s);
			return rc;
		}
	}
	for (i = 0; i < n; i++) {
		memset(&e, 0, sizeof(e));
		e.volume = s[i].name;
		e.major = s[i].major;
		e.minor = s[i].minor;
		e.time_ms = now_ms();
		if (s[i].missing) {
			e.missing = true;
			report(m, &e);
			worst = NXDCTL_EXIT_NOVOL;
			continue;
		}
		if (missing_only || !s[i].have_stats)
			continue;
		scopy(e.state, sizeof(e.state), s[i].state);
		if (!nxdctl_event_current(&e, &s[i].st.c))
			continue;
		report(m, &e);
		if (!worst)
			worst = NXDCTL_EXIT_DEGRADED;
	}
	free(s);
	return worst;
}

/* Every nxd volume, one child each; new ones are picked up on the way. */
static int monitor_all(struct mon *m)
{
	struct {
		pid_t pid;
		uint64_t dev;
		char name[NXD_NAME_LEN + 1];
	} kids[NXD_IOC_MAX_VOLS];
	struct nxd_ioc_list *l = calloc(1, sizeof(*l));
	unsigned int nk = 0, i, k;
	pid_t parent = getpid();
	int rc, status;
	pid_t pid;

	if (!l)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	rc = get_list(l);
	if (rc)
		goto out;
	/* Configured volumes that are not active: said once, at start. */
	rc = report_now(m, 0, NULL, true);
	if (rc != 0 && rc != NXDCTL_EXIT_NOVOL)
		goto out;
	for (;;) {
		for (i = 0; i < l->count; i++) {
			struct watched w;

			for (k = 0; k < nk && kids[k].dev != l->vols[i].dev; k++)
				;
			if (k < nk || nk == NXD_IOC_MAX_VOLS)
				continue;
			kids[nk].dev = l->vols[i].dev;
			snprintf(kids[nk].name, sizeof(kids[nk].name), "%.*s",
				 NXD_NAME_LEN, l->vols[i].name);
			fflush(stdout);
			pid = fork();
			if (pid < 0) {
				rc = fail(NXDCTL_EXIT_KERNEL, "fork: %s",
					  strerror(errno));
				goto out;
			}
			if (!pid) {
				/* Go when the parent goes. */
				prctl(PR_SET_PDEATHSIG, SIGTERM);
				if (getppid() != parent)
					_exit(0);
				w.name = kids[nk].name;
				nxdctl_decode_dev(kids[nk].dev, &w.major,
						  &w.minor);
				_exit(monitor_one(m, &w));
			}
			kids[nk++].pid = pid;
		}
		sleep(MON_RESCAN_S);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (k = 0; k < nk && kids[k].pid != pid; k++)
				;
			if (k < nk)
				kids[k] = kids[--nk];
		}
		rc = get_list(l);
		if (rc)
			goto out;
	}
out:
	free(l);
	return rc;
}

static int do_monitor(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "exec", required_argument, NULL, 'e' },
		{ "count", required_argument, NULL, 'n' },
		{ "oneshot", no_argument, NULL, '1' },
		{ "no-syslog", no_argument, NULL, 'S' },
		{ "config", required_argument, NULL, O_CONFIG },
		HELP_OPT, { 0 }
	};
	struct mon m = { .syslog = true };
	const char *e;
	struct watched w;
	struct vol v;
	int o, rc;

	while ((o = getopt_long(argc, argv, "je:n:h", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			m.json = true;
			break;
		case '1':
			m.oneshot = true;
			break;
		case 'S':
			m.syslog = false;
			break;
		case O_CONFIG:
			m.config = optarg;
			break;
		case 'e':
			if (!*optarg)
				return usage_error(c->name, "--exec needs a "
						   "program");
			m.exec = optarg;
			break;
		case 'n':
			rc = parse_uint_opt(c->name, "--count", optarg, 1,
					    ULONG_MAX, &m.count);
			if (rc)
				return rc;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 0, 1);
	if (rc)
		return rc;
	if (m.config && optind < argc)
		return usage_error(c->name, "--config is for every volume "
				   "(without VOL)");
	if (m.oneshot && m.count)
		return usage_error(c->name, "--oneshot takes no --count");
	if (m.config) {
		struct nxdtab t;

		rc = nxdtab_load(m.config, &t);
		if (rc)
			return rc;
		nxdtab_free(&t);
	}
	/* Lines go out as they happen, even into a pipe or a file. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	e = getenv("NXDCTL_TEST_SYSLOG");
	m.test_syslog = e && *e ? e : NULL;
	m.test_events = getenv("NXDCTL_TEST_EVENTS");
	/* The test hooks never write to the real syslog. */
	if (!m.test_syslog && (test_stats || (m.test_events &&
					      *m.test_events)))
		m.syslog = false;
	if (m.syslog && !m.test_syslog)
		openlog("nxdctl", LOG_PID, LOG_DAEMON);
	if (m.oneshot)
		return report_now(&m, argc - optind, argv + optind, false);
	if (m.test_events && *m.test_events) {
		if (optind == argc)
			return usage_error(c->name, "NXDCTL_TEST_EVENTS needs "
					   "a VOL");
		m.test_f = fopen(m.test_events, "rb");
		if (!m.test_f)
			return fail(NXDCTL_EXIT_KERNEL, "%s: %s",
				    m.test_events, strerror(errno));
		w.name = argv[optind];
		w.major = 253;
		w.minor = 0;
		rc = monitor_one(&m, &w);
		fclose(m.test_f);
		return rc;
	}
	if (optind == argc) {
		if (m.count)
			return usage_error(c->name, "--count needs a VOL");
		return monitor_all(&m);
	}
	rc = resolve_vol(argv[optind], &v);
	if (rc)
		return rc;
	w.name = v.name;
	w.major = v.major;
	w.minor = v.minor;
	return monitor_one(&m, &w);
}

const struct cmd cmd_monitor = {
	"monitor", do_monitor,
	"[VOL] [--json] [--exec PROG] [--count N] [--oneshot] [--no-syslog]\n"
	"       [--config FILE]",
	"Wait for the events dm-nxd raises and report each one: degraded "
	"(an SSD\nwrite failed), log_full (writes began going round a full "
	"log), drain_done\n(a drain finished, or a degraded volume's log "
	"emptied), acked_lost (the destager\nfound acknowledged log writes "
	"lost: flushes fail from then on).  Without\nVOL, every nxd volume, "
	"including those that appear later.  A volume that is\ndegraded, "
	"has a full log or lost acknowledged writes when the monitor starts\n"
	"(or when it appears) is reported once, with \"initial\"; without "
	"VOL, so is\neach volume of the configuration file that is not "
	"active (missing).\nEvery report also goes to syslog (facility "
	"daemon).",
	"Options:\n"
	"  --json         one JSON object per line (NDJSON): volume, device, "
	"time,\n"
	"                 timestamp, event_nr, events (the kinds), state, new "
	"(events\n"
	"                 of each kind), counters (as stats --json)\n"
	"  --exec PROG    run PROG (with sh -c) for each event, one at a time "
	"per\n"
	"                 volume, with NXD_VOLUME, NXD_EVENTS, NXD_STATE, "
	"NXD_EVENT_JSON,\n"
	"                 NXD_<COUNTER> ... in its environment; prints "
	"nothing unless\n"
	"                 --json\n"
	"  --count N      exit after N events of VOL\n"
	"  --oneshot      report the abnormal state now and exit: 0 if "
	"nothing, 2 if\n"
	"                 a configured volume is not active, else 5 (for "
	"cron)\n"
	"  --no-syslog    do not log to syslog\n"
	"  --config FILE  the configuration file (default $NXD_CONFIG or "
	"/etc/nxd/nxdtab)\n"
	"Events that come close together are reported in one line (events "
	"lists\n"
	"them all).  When VOL goes away a last line says \"removed\".\n"
	VOL_HELP,
};
