// SPDX-License-Identifier: GPL-2.0
/*
 * Host ownership of volumes: the owner in the HDD label (nxd_format.h),
 * this host's system id, and the check that create and assemble make
 * before they activate a volume.
 *
 * The owner lives in the HDD label only, so that every path that
 * activates a volume can read it even with its SSD dead.  The kernel
 * never looks at it; it keeps it across its own label rewrites by
 * reading the label back first (dm-target/nxd-meta.c).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nxdctl.h"

bool valid_owner(const char *s)
{
	size_t n = strlen(s), i;

	if (!n || n >= NXD_LABEL_OWNER_LEN)
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._:-", s[i]))
			return false;
	return true;
}

const char *system_id_path(void)
{
	const char *e = getenv("NXD_SYSTEM_ID_FILE");

	return e && *e ? e : SYSTEM_ID_PATH;
}

int local_owner(char *out, size_t len)
{
	const char *path = system_id_path();
	char line[256], *p, *end;
	FILE *f = fopen(path, "re");

	if (f) {
		/* The first line that is not blank or a comment. */
		out[0] = 0;
		while (fgets(line, sizeof(line), f)) {
			for (p = line; isspace((unsigned char)*p); p++)
				;
			if (!*p || *p == '#')
				continue;
			for (end = p + strlen(p); end > p &&
			     isspace((unsigned char)end[-1]); end--)
				;
			*end = 0;
			scopy(out, len, p);
			break;
		}
		fclose(f);
		if (!valid_owner(out))
			return fail(NXDCTL_EXIT_USAGE, "%s: bad system id '%s' "
				    "(1 to %d letters, digits or ._:-)", path,
				    out, NXD_LABEL_OWNER_LEN - 1);
		return 0;
	}
	if (errno != ENOENT)
		return fail(errno_code(errno), "%s: %s", path, strerror(errno));
	if (gethostname(line, sizeof(line)))
		return fail(NXDCTL_EXIT_KERNEL, "gethostname: %s",
			    strerror(errno));
	line[sizeof(line) - 1] = 0;
	if (!valid_owner(line))
		return fail(NXDCTL_EXIT_USAGE, "the host name '%s' cannot be a "
			    "volume owner: write a system id into %s", line,
			    path);
	scopy(out, len, line);
	return 0;
}

int owner_read(const char *hdd, uint64_t hint, struct nxd_meta *m)
{
	uint64_t bytes;
	int e;

	if (probe_role(hdd, hint, m, &bytes, &e) == ROLE_HDD)
		return 0;
	return e ? e : -ENODATA;
}

int owner_write(const char *hdd, const struct nxd_meta *m, const char *owner)
{
	struct nxd_label_info l;
	uint64_t off = m->label_sector << 9;
	static char keep[NXD_BLOCK_SIZE];
	void *blk = NULL;
	int fd, rc;

	/* Not O_EXCL: the volume may be active (set-owner, create). */
	fd = open(hdd, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL)
		fd = open(hdd, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_blk(fd, off, &blk);
	if (rc)
		goto out;
	/* Read, modified, written: nothing but the owner changes. */
	if (nxd_label_decode(blk, &l) || !uuid_eq(l.vol_uuid, m->vol_uuid) ||
	    !uuid_eq(l.hdd_uuid, m->hdd_uuid)) {
		rc = -ESTALE;
		goto out;
	}
	memset(l.owner, 0, sizeof(l.owner));
	scopy(l.owner, sizeof(l.owner), owner);
	memcpy(keep, blk, NXD_BLOCK_SIZE);
	nxd_label_encode(&l, blk);
	/* An abandoned log's list of lost ranges stays. */
	nxd_label_keep_lost(blk, keep);
	if (pwrite(fd, blk, NXD_BLOCK_SIZE, off) != NXD_BLOCK_SIZE ||
	    fdatasync(fd)) {
		rc = errno ? -errno : -EIO;
		goto out;
	}
	free(blk);
	blk = NULL;
	rc = read_blk(fd, off, &blk);
	if (!rc && (nxd_label_decode(blk, &l) || strcmp(l.owner, owner)))
		rc = -EIO;
out:
	free(blk);
	close(fd);
	return rc;
}

/*
 * Before create or assemble activates the volume whose HDD is @hdd
 * (@hint: the superblock's label sector, or 0): refuse it if its label
 * names another host; with @take_over, record this host instead (also
 * on an unowned volume).  @vol names the volume in messages.  0 or an
 * exit code (reported).
 */
int owner_check(const char *hdd, uint64_t hint, const char *vol,
		bool take_over, bool dry_run)
{
	char me[NXD_LABEL_OWNER_LEN], u[40];
	struct nxd_meta m;
	const char *cur;
	int rc;

	if (owner_read(hdd, hint, &m))
		return 0;	/* no label here: the kernel says what is wrong */
	cur = m.label.owner;
	if (!*cur && !take_over)
		return 0;	/* unowned: as before owners existed */
	rc = local_owner(me, sizeof(me));
	if (rc)
		return rc;
	nxdctl_fmt_uuid(u, m.vol_uuid);
	if (!strcmp(cur, me))
		return 0;
	if (!take_over)
		return fail(NXDCTL_EXIT_FOREIGN, "volume %s (%s) belongs to "
			    "host '%s', this host is '%s': not activated.\n"
			    "If '%s' is down or has stopped it for good, take "
			    "it over: nxdctl takeover %s\n(or assemble "
			    "--take-over); activating it on two hosts at once "
			    "destroys it", vol, u, cur, me, cur, hdd);
	printf("takeover: volume %s (%s): owner '%s' -> '%s' in the HDD "
	       "label of %s\n", vol, u, *cur ? cur : "(none)", me, hdd);
	if (dry_run)
		return 0;
	rc = owner_write(hdd, &m, me);
	if (rc)
		return fail(errno_code(-rc), "%s: cannot write the owner into "
			    "the HDD label: %s", hdd, strerror(-rc));
	return 0;
}

/* A new volume on @hdd (just formatted): this host owns it. */
int owner_record_new(const char *hdd, const char *vol)
{
	char me[NXD_LABEL_OWNER_LEN];
	struct nxd_meta m;
	int rc;

	rc = local_owner(me, sizeof(me));
	if (!rc)
		rc = owner_read(hdd, 0, &m) ? NXDCTL_EXIT_NOVOL : 0;
	if (!rc && strcmp(m.label.owner, me)) {
		rc = owner_write(hdd, &m, me);
		if (rc)
			rc = errno_code(-rc);
	}
	if (rc)
		return fail(rc, "%s is active, but its owner could not be "
			    "recorded: nxdctl set-owner %s", vol, vol);
	printf("owner of %s: %s (HDD label)\n", vol, me);
	return 0;
}
