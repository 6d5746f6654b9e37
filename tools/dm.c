// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: device-mapper through libdevmapper (tables, status, messages,
 * loading, suspending and resuming tables, naming any dm device).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <libdevmapper.h>

#include "nxdctl.h"

/* libdevmapper logs through here: errors only, with our prefix. */
void __attribute__((format(printf, 5, 6)))
dm_log(int level, const char *file, int line, int dm_errno_or_class,
	const char *f, ...)
{
	va_list ap;

	(void)file;
	(void)line;
	(void)dm_errno_or_class;
	if ((level & 7) > 3)
		return;
	fputs("nxdctl: device-mapper: ", stderr);
	va_start(ap, f);
	vfprintf(stderr, f, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int dm_fail(const char *what, const char *name)
{
	int e = errno;

	if (e == EACCES || e == EPERM || (geteuid() &&
	    access("/dev/mapper/control", R_OK | W_OK)))
		return fail(NXDCTL_EXIT_PERM, "%s %s: permission denied "
			    "(device-mapper needs root)", what, name);
	if (e == EBUSY)
		return fail(NXDCTL_EXIT_KERNEL, "%s %s failed: it is in use "
			    "(mounted or open)", what, name);
	return fail(NXDCTL_EXIT_KERNEL, "%s %s failed%s%s", what, name,
		    e ? ": " : "", e ? strerror(e) : "");
}

/* Task @op on @name, run; NULL and *@rc (said: @what @name) if not. */
static struct dm_task *run_named(int op, const char *name, const char *what,
				 int *rc)
{
	struct dm_task *dmt = dm_task_create(op);

	if (!dmt) {
		*rc = fail(NXDCTL_EXIT_KERNEL, "out of memory");
		return NULL;
	}
	errno = 0;
	if (!dm_task_set_name(dmt, name) || !dm_task_run(dmt)) {
		dm_task_destroy(dmt);
		*rc = dm_fail(what, name);
		return NULL;
	}
	return dmt;
}

/* The live table of @name: its first target, and how many there are. */
int dm_table(const char *name, struct dm_line *t)
{
	uint64_t start, length;
	char *type = NULL, *par = NULL;
	struct dm_task *dmt;
	void *next = NULL;
	int rc;

	memset(t, 0, sizeof(*t));
	dmt = run_named(DM_DEVICE_TABLE, name, "reading the table of", &rc);
	if (!dmt)
		return rc;
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

int dm_table_of(const char *name, char *target, size_t tlen, char *params,
		size_t plen)
{
	struct dm_line t;
	int rc;

	target[0] = 0;
	rc = dm_table(name, &t);
	if (rc)
		return rc;
	if (t.ntargets)
		snprintf(target, tlen, "%s", t.type);
	if (params)
		snprintf(params, plen, "%s", t.params);
	return 0;
}

int dm_message(const struct vol *v, const char *msg)
{
	return dm_message_out(v, msg, NULL, 0);
}

int dm_message_out(const struct vol *v, const char *msg, char *out,
		   size_t len)
{
	struct dm_task *dmt = dm_task_create(DM_DEVICE_TARGET_MSG);
	const char *resp;
	int rc = 0;

	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, v->name) || !dm_task_set_sector(dmt, 0) ||
	    !dm_task_set_message(dmt, msg) || !dm_task_run(dmt)) {
		int e = errno;

		if (e == EACCES || e == EPERM || geteuid())
			rc = fail(NXDCTL_EXIT_PERM, "%s: message '%s': "
				  "permission denied", v->arg, msg);
		else
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: message '%s' "
				  "failed%s%s (see dmesg)", v->arg, msg,
				  e ? ": " : "", e ? strerror(e) : "");
	} else if (out && len) {
		resp = dm_task_get_message_response(dmt);
		snprintf(out, len, "%s", resp ? resp : "");
	}
	dm_task_destroy(dmt);
	return rc;
}

/* An nxd status line ("STATE FIELDS..."): the fields lifecycle needs. */
int dm_parse_nxd_status(const char *p, struct dm_nxd_status *s)
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
int dm_nxd_status(const char *name, struct dm_nxd_status *s)
{
	uint64_t start, length;
	char *type = NULL, *par = NULL;
	struct dm_task *dmt;
	int rc = 0;

	dmt = run_named(DM_DEVICE_STATUS, name, "reading the status of", &rc);
	if (!dmt)
		return rc;
	dm_get_next_target(dmt, NULL, &start, &length, &type, &par);
	if (!type || strcmp(type, TARGET_NAME) || !par ||
	    dm_parse_nxd_status(par, s))
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: unexpected status '%s %s'",
			  name, type ? type : "", par ? par : "");
	dm_task_destroy(dmt);
	return rc;
}

int dm_run(struct dm_task *dmt, bool ok, bool udev, const char *what,
	   const char *name)
{
	uint32_t cookie = 0;
	int rc = 0;

	if (!ok || (udev && !dm_task_set_cookie(dmt, &cookie, 0)) ||
	    !dm_task_run(dmt))
		rc = dm_fail(what, name);
	if (cookie)
		dm_udev_wait(cookie);
	dm_task_destroy(dmt);
	return rc;
}

/*
 * One device-mapper operation on @name: RELOAD (with @t), SUSPEND
 * (@nolockfs), RESUME (waits for udev) or CLEAR.  Prints nothing.
 */
int dm_op(int op, const char *name, const struct dm_line *t, bool nolockfs)
{
	static const char *const what[] = {
		[DM_DEVICE_RELOAD] = "loading a table into",
		[DM_DEVICE_SUSPEND] = "suspending",
		[DM_DEVICE_RESUME] = "resuming",
		[DM_DEVICE_CLEAR] = "clearing the inactive table of",
	};
	struct dm_task *dmt = dm_task_create(op);
	bool ok;
	int rc;

	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	ok = dm_task_set_name(dmt, name) &&
	     (!t || dm_task_add_target(dmt, t->start, t->len, t->type,
				       t->params)) &&
	     (!nolockfs || dm_task_skip_lockfs(dmt));
	rc = dm_run(dmt, ok, op == DM_DEVICE_RESUME, what[op], name);
	if (op == DM_DEVICE_RELOAD && rc == NXDCTL_EXIT_KERNEL)
		fprintf(stderr, "nxdctl: the kernel log (dmesg) says "
			"why the table was refused\n");
	return rc;
}

int dm_set_uuid(const char *name, const char *uuid)
{
	struct dm_task *dmt = dm_task_create(DM_DEVICE_RENAME);

	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	return dm_run(dmt, dm_task_set_name(dmt, name) &&
		      dm_task_set_newuuid(dmt, uuid), true,
		      "setting the device-mapper UUID of", name);
}

/*
 * VOL naming any device-mapper device (attach takes a linear one): a dm
 * name, /dev/mapper/NAME, /dev/dm-N, dm-N or a device node.
 */
int dm_resolve(const char *arg, struct vol *v)
{
	char path[PATH_MAX];
	struct dm_task *dmt;
	struct dm_info info;
	const char *base, *n;
	struct stat st;
	bool bydev = false;

	if (vol_start(arg, v, &base))
		return NXDCTL_EXIT_USAGE;
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
