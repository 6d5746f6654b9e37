// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: device-mapper through libdevmapper (tables, messages).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

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
	return fail(NXDCTL_EXIT_KERNEL, "%s %s failed%s%s", what, name,
		    e ? ": " : "", e ? strerror(e) : "");
}

/*
 * Type and parameters of the first target of @name.  0 or an exit code;
 * an empty @target if the device has no table.
 */
int dm_table_of(const char *name, char *target, size_t tlen,
		       char *params, size_t plen)
{
	uint64_t start, length;
	char *type = NULL, *par = NULL;
	struct dm_task *dmt;

	target[0] = 0;
	dmt = dm_task_create(DM_DEVICE_TABLE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, name) || !dm_task_run(dmt)) {
		dm_task_destroy(dmt);
		return dm_fail("reading the table of", name);
	}
	dm_get_next_target(dmt, NULL, &start, &length, &type, &par);
	if (type)
		snprintf(target, tlen, "%s", type);
	if (params)
		snprintf(params, plen, "%s", par ? par : "");
	dm_task_destroy(dmt);
	return 0;
}

int dm_message(const struct vol *v, const char *msg)
{
	struct dm_task *dmt = dm_task_create(DM_DEVICE_TARGET_MSG);
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
	}
	dm_task_destroy(dmt);
	return rc;
}
