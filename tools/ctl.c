// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: the control device /dev/nxd-control (NXD_IOC_GET_STATS,
 * NXD_IOC_LIST, NXD_IOC_GET_AUTO), or the NXDCTL_TEST_STATS file in its place.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "nxdctl.h"

int control_open(void)
{
	int fd = open(CONTROL_PATH, O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == ENOENT)
		return -fail(NXDCTL_EXIT_KERNEL,
			     "cannot open %s: %s (is dm-nxd loaded?)",
			     CONTROL_PATH, strerror(errno));
	return -fail(errno_code(errno) == NXDCTL_EXIT_PERM ?
		     NXDCTL_EXIT_PERM : NXDCTL_EXIT_KERNEL,
		     "cannot open %s: %s", CONTROL_PATH, strerror(errno));
}

/*
 * ioctl @req of the control device, which is closed again: 0 and in *@e
 * the ioctl's errno (0 if it worked), or the exit code (reported) if the
 * device cannot be opened.
 */
static int control_ioctl(unsigned long req, void *arg, int *e)
{
	int fd = control_open();

	if (fd < 0)
		return -fd;
	*e = ioctl(fd, req, arg) ? errno : 0;
	close(fd);
	return 0;
}

void hdr_init(struct nxd_ioc_hdr *h, uint32_t size, uint32_t flags,
		     const struct vol *v)
{
	h->size = size;
	h->version = NXD_IOCTL_VERSION;
	h->flags = flags;
	if (v) {
		h->dev = nxdctl_encode_dev(v->major, v->minor);
		snprintf(h->name, sizeof(h->name), "%s", v->name);
	}
}

int get_stats(const struct vol *v, uint32_t flags,
		     struct nxd_ioc_stats *st)
{
	int rc, e;

	memset(st, 0, sizeof(*st));
	if (test_stats) {
		FILE *f = fopen(test_stats, "rb");

		if (!f)
			return fail(NXDCTL_EXIT_KERNEL, "%s: %s", test_stats,
				    strerror(errno));
		if (fread(st, 1, sizeof(*st), f) < sizeof(st->hdr)) {
			fclose(f);
			return fail(NXDCTL_EXIT_KERNEL, "%s: short file",
				    test_stats);
		}
		fclose(f);
		return 0;
	}

	hdr_init(&st->hdr, sizeof(*st), flags, v);
	rc = control_ioctl(NXD_IOC_GET_STATS, st, &e);
	if (rc || !e)
		return rc;
	if ((e == EPERM || e == EACCES) && (flags & NXD_IOC_F_RESET))
		return fail(NXDCTL_EXIT_PERM, "%s: resetting statistics needs "
			    "CAP_SYS_ADMIN", v->arg);
	if (errno_code(e) == NXDCTL_EXIT_NOVOL)
		return fail(NXDCTL_EXIT_NOVOL, "%s: dm-nxd does not know this "
			    "volume", v->arg);
	return fail(errno_code(e), "%s: NXD_IOC_GET_STATS: %s", v->arg,
		    strerror(e));
}

int get_auto(const struct vol *v, struct nxd_ioc_auto *ia)
{
	int rc, e;

	memset(ia, 0, sizeof(*ia));
	hdr_init(&ia->hdr, sizeof(*ia), 0, v);
	rc = control_ioctl(NXD_IOC_GET_AUTO, ia, &e);
	if (rc || !e)
		return rc;
	if (errno_code(e) == NXDCTL_EXIT_NOVOL)
		return fail(NXDCTL_EXIT_NOVOL, "%s: dm-nxd does not know this "
			    "volume", v->arg);
	if (e == ENOTTY)
		return fail(NXDCTL_EXIT_KERNEL, "%s: this dm-nxd has no "
			    "adaptive routing (NXD_IOC_GET_AUTO)", v->arg);
	return fail(errno_code(e), "%s: NXD_IOC_GET_AUTO: %s", v->arg,
		    strerror(e));
}

int get_list(struct nxd_ioc_list *l)
{
	int rc, e;

	memset(l, 0, sizeof(*l));
	hdr_init(&l->hdr, sizeof(*l), 0, NULL);
	rc = control_ioctl(NXD_IOC_LIST, l, &e);
	if (rc)
		return rc;
	if (e)
		return fail(errno_code(e) == NXDCTL_EXIT_PERM ?
			    NXDCTL_EXIT_PERM : NXDCTL_EXIT_KERNEL,
			    "NXD_IOC_LIST: %s", strerror(e));
	if (l->count > NXD_IOC_MAX_VOLS)
		l->count = NXD_IOC_MAX_VOLS;
	return 0;
}

/* Name of the active volume with @uuid, if any. */
bool active_volume(const uint8_t *uuid, char *name, size_t len)
{
	struct nxd_ioc_list *l = calloc(1, sizeof(*l));
	bool found = false;
	unsigned int i;
	int fd;

	if (!l)
		return false;
	hdr_init(&l->hdr, sizeof(*l), 0, NULL);
	fd = open(CONTROL_PATH, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !ioctl(fd, NXD_IOC_LIST, l)) {
		for (i = 0; i < l->count && i < NXD_IOC_MAX_VOLS; i++) {
			if (uuid_eq(l->vols[i].vol_uuid, uuid)) {
				snprintf(name, len, "%.*s", NXD_NAME_LEN,
					 l->vols[i].name);
				found = true;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	free(l);
	return found;
}

/* The volume UUID of active volume @name, from the kernel's list. */
int vol_uuid_of(const char *name, uint8_t *uuid)
{
	struct nxd_ioc_list *l = calloc(1, sizeof(*l));
	unsigned int i;
	int rc;

	if (!l)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	rc = get_list(l);
	for (i = 0; !rc && i < l->count; i++) {
		if (strncmp(l->vols[i].name, name, NXD_NAME_LEN))
			continue;
		memcpy(uuid, l->vols[i].vol_uuid, 16);
		free(l);
		return 0;
	}
	free(l);
	return rc ? rc : fail(NXDCTL_EXIT_KERNEL, "%s is not in the kernel's "
			      "list of nxd volumes", name);
}

int peek_stats(uint64_t dev, const char *name, struct nxd_ioc_stats *st)
{
	int fd, rc = 0;

	memset(st, 0, sizeof(*st));
	if (test_stats) {
		FILE *f = fopen(test_stats, "rb");

		if (!f)
			return -errno;
		if (fread(st, 1, sizeof(*st), f) < sizeof(st->hdr))
			rc = -EIO;
		fclose(f);
		return rc;
	}
	st->hdr.size = sizeof(*st);
	st->hdr.version = NXD_IOCTL_VERSION;
	st->hdr.dev = dev;
	if (name)
		snprintf(st->hdr.name, sizeof(st->hdr.name), "%s", name);
	fd = open(CONTROL_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, NXD_IOC_GET_STATS, st))
		rc = -errno;
	close(fd);
	return rc;
}
