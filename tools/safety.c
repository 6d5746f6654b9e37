// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: what a destructive step would destroy.  Signatures (libblkid,
 * as wipefs and mkfs see them), data where a new volume's HDD label goes
 * (block 0 for format version 2), and writes still in an nxd log
 * (ondisk.c).  Used by create (before a new volume or --format) and
 * wipe, which also clear labels here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <blkid/blkid.h>

#include "nxdctl.h"

int signatures(const char *path, char *desc, size_t len)
{
	blkid_probe pr;
	int n = 0;

	desc[0] = 0;
	pr = blkid_new_probe_from_filename(path);
	if (!pr)
		return errno ? -errno : -EIO;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE |
		BLKID_SUBLKS_USAGE | BLKID_SUBLKS_UUID | BLKID_SUBLKS_LABEL |
		BLKID_SUBLKS_MAGIC | BLKID_SUBLKS_BADCSUM);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC |
					 BLKID_PARTS_FORCE_GPT);
	/* Every signature in turn, as wipefs lists them. */
	while (blkid_do_probe(pr) == 0) {
		const char *type = NULL, *uuid = NULL, *label = NULL;
		size_t l = strlen(desc);
		bool pt = false;

		if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL)) {
			if (blkid_probe_lookup_value(pr, "PTTYPE", &type,
						     NULL))
				continue;
			pt = true;
		}
		if (blkid_probe_lookup_value(pr, "UUID", &uuid, NULL))
			uuid = NULL;
		if (blkid_probe_lookup_value(pr, "LABEL", &label, NULL))
			label = NULL;
		if (l + 1 < len)
			snprintf(desc + l, len - l, "%s%s%s%s%s%s%s%s",
				 n ? ", " : "", type,
				 pt ? " partition table" : "",
				 uuid ? " UUID " : "", uuid ? uuid : "",
				 label ? " LABEL '" : "", label ? label : "",
				 label ? "'" : "");
		n++;
	}
	blkid_free_probe(pr);
	return n;
}

int label_area_in_use(const char *path, uint64_t bytes, uint64_t data_offset,
		      uint64_t *off)
{
	const size_t chunk = 64 << 10;
	uint64_t start, end, o;
	struct nxd_label_info l;
	int fd, rc = 0;
	uint8_t *buf;
	size_t i, n;

	/* Version 2: the label in block 0; version 1: the last MiB. */
	if (data_offset) {
		start = 0;
		end = bytes < NXD_BLOCK_SIZE ? bytes : NXD_BLOCK_SIZE;
	} else {
		start = nxd_hdd_data_sectors(bytes >> 9) << 9;
		end = bytes;
		if (!start)
			return 0;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(chunk);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (o = start; o < end && !rc; o += n) {
		n = end - o < chunk ? end - o : chunk;
		if (pread(fd, buf, n, o) != (ssize_t)n) {
			rc = -EIO;
			break;
		}
		/* An nxd label is ours to overwrite. */
		if (o == start && n >= NXD_BLOCK_SIZE &&
		    !nxd_label_decode(buf, &l))
			memset(buf, 0, NXD_BLOCK_SIZE);
		for (i = 0; i < n; i++) {
			if (buf[i]) {
				*off = o + i;
				rc = 1;
				break;
			}
		}
	}
	free(buf);
	close(fd);
	return rc;
}

int zero_range(const char *path, uint64_t off, size_t len)
{
	void *buf;
	int fd, rc = 0;

	fd = open(path, O_RDWR | O_EXCL | O_CLOEXEC);
	if (fd < 0 && errno == EBUSY)
		return fail(NXDCTL_EXIT_KERNEL, "%s is in use (mounted, or "
			    "held by md or device-mapper)", path);
	if (fd < 0)
		return fail(errno_code(errno), "%s: %s", path,
			    strerror(errno));
	buf = calloc(1, len);
	if (!buf) {
		close(fd);
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	}
	if (pwrite(fd, buf, len, off) != (ssize_t)len || fsync(fd))
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: write: %s", path,
			  strerror(errno ? errno : EIO));
	free(buf);
	if (close(fd) && !rc)
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: %s", path, strerror(errno));
	return rc;
}

int clear_labels(const char *path, uint64_t hint, bool dry_run,
		 const char *what)
{
	uint64_t spot[NXD_LABEL_SPOTS + 1], bytes;
	int fd, i, n = NXD_LABEL_SPOTS, found[NXD_LABEL_SPOTS + 1];
	int rc, cleared = 0;

	fd = open_dev(path);
	if (fd < 0)
		return -fail(errno_code(errno), "%s: %s", path,
			     strerror(errno));
	rc = fd_size(fd, &bytes);
	if (rc) {
		close(fd);
		return -fail(errno_code(-rc), "%s: %s", path, strerror(-rc));
	}
	ondisk_label_spots(bytes, spot);
	if (hint && hint != spot[0] && hint != spot[1] &&
	    hint + NXD_SECTORS_PER_BLOCK <= bytes >> 9)
		spot[n++] = hint;
	for (i = 0; i < n; i++) {
		found[i] = 0;
		if (i && !spot[i])
			continue;
		if ((spot[i] + NXD_SECTORS_PER_BLOCK) << 9 > bytes)
			continue;
		rc = ondisk_label_magic_at(fd, spot[i]);
		if (rc < 0) {
			close(fd);
			return -fail(errno_code(-rc), "%s: reading sector %"
				     PRIu64 ": %s", path, spot[i],
				     strerror(-rc));
		}
		found[i] = rc;
	}
	close(fd);
	for (i = 0; i < n; i++) {
		if (!found[i])
			continue;
		printf("%s: %s the nxd HDD label at sector %" PRIu64 " (%d "
		       "bytes at offset %" PRIu64 ")\n", what, dry_run ?
		       "would clear" : "clearing", spot[i], NXD_BLOCK_SIZE,
		       spot[i] << 9);
		fflush(stdout);
		cleared++;
		if (dry_run)
			continue;
		rc = zero_range(path, spot[i] << 9, NXD_BLOCK_SIZE);
		if (rc)
			return -rc;
	}
	return cleared;
}

/* The label of the HDD that goes with SSD @ssd, if that HDD is present. */
static bool peer_label(const char *ssd, const struct nxd_meta *m,
		       struct nxd_meta *hm, char *hdd, size_t len)
{
	uint64_t bytes;
	int e;

	if (find_peer(m, ROLE_HDD, ssd, hdd, len))
		return false;
	return probe_role(hdd, m->hdd_label_sector, hm, &bytes, &e) ==
	       ROLE_HDD;
}

int log_risk(const char *dev, enum role r, const struct nxd_meta *m,
	     struct log_risk *out)
{
	struct nxd_meta sm, hm;
	const struct nxd_meta *s = m;
	const struct nxd_label_info *label = NULL;
	uint64_t bytes;
	int fd, rc, e;

	memset(out, 0, sizeof(*out));
	if (r == ROLE_HDD) {
		if (m->label.flags & NXD_LABEL_LOG_ABANDONED)
			return 0;
		label = &m->label;
		snprintf(out->hdd, sizeof(out->hdd), "%s", dev);
		if (find_peer(m, ROLE_SSD, dev, out->ssd, sizeof(out->ssd)) ||
		    probe_role(out->ssd, 0, &sm, &bytes, &e) != ROLE_SSD) {
			out->ssd[0] = 0;
			out->ssd_missing = true;
			return 1;
		}
		s = &sm;
	} else {
		snprintf(out->ssd, sizeof(out->ssd), "%s", dev);
		if (peer_label(dev, m, &hm, out->hdd, sizeof(out->hdd)))
			label = &hm.label;
		else
			out->hdd[0] = 0;
	}
	fd = open_dev(out->ssd);
	if (fd < 0)
		return -errno;
	rc = ondisk_log_scan(fd, s, label, UINT64_MAX, true, &out->scan);
	close(fd);
	if (rc)
		return rc;
	return out->scan.data_blocks ? 1 : 0;
}

void log_risk_say(const struct log_risk *lr, const uint8_t *vol_uuid)
{
	char u[40];

	nxdctl_fmt_uuid(u, vol_uuid);
	if (lr->ssd_missing) {
		fprintf(stderr, "nxdctl: the SSD of volume %s is not present: "
			"its log may hold writes\nthat are not on the HDD "
			"yet, and they would be lost\n", u);
		return;
	}
	fprintf(stderr, "nxdctl: the log of volume %s on %s holds writes not "
		"yet on the HDD\n(segment %" PRIu64 " onwards%s); assemble "
		"the volume and run 'nxdctl drain' first\n", u, lr->ssd,
		lr->scan.first_seq, lr->scan.frozen ?
		", frozen after an SSD failure" : "");
}

int log_risk_check(const char *dev, enum role r, const struct nxd_meta *m)
{
	struct log_risk lr;
	int rc = log_risk(dev, r, m, &lr);

	/* An HDD's log is on the SSD of its volume. */
	if (rc > 0)
		log_risk_say(&lr, m->vol_uuid);
	else if (rc < 0)
		fprintf(stderr, "nxdctl: %s: cannot read %s\n", dev,
			r == ROLE_HDD ? "the log of its volume" : "its log");
	return rc != 0;
}

int udev_change(const char *path)
{
	char p[PATH_MAX];
	struct stat st;

	if (stat(path, &st) || !S_ISBLK(st.st_mode))
		return 0;
	snprintf(p, sizeof(p), "%s/dev/block/%u:%u/uevent", sysfs_root,
		 major(st.st_rdev), minor(st.st_rdev));
	return sysfs_write(p, "change");
}

static int warn_sigs(const char *what, const char *path, int *problems)
{
	char desc[1024];
	int n = signatures(path, desc, sizeof(desc));

	if (n < 0)
		return fail(errno_code(-n), "%s: cannot probe: %s", path,
			    strerror(-n));
	if (n) {
		fprintf(stderr, "nxdctl: %s %s holds %s\n", what, path, desc);
		(*problems)++;
	}
	return 0;
}

int create_checks(const char *hdd, const char *ssd, uint64_t hdd_bytes,
		  uint64_t data_offset, bool format, bool force)
{
	struct nxd_meta hm, sm;
	enum role hr, sr;
	char u[40];
	int problems = 0, rc, e;
	uint64_t bytes, off;
	bool pair;

	/* The label may sit below the end of an HDD that grew (assemble). */
	sr = probe_role(ssd, 0, &sm, &bytes, &e);
	hr = probe_role(hdd, sr == ROLE_SSD ? sm.hdd_label_sector : 0, &hm,
			&bytes, &e);
	pair = hr == ROLE_HDD && sr == ROLE_SSD &&
	       uuid_eq(hm.vol_uuid, sm.vol_uuid) &&
	       uuid_eq(hm.hdd_uuid, sm.hdd_uuid);
	if (hr == ROLE_SSD) {
		fprintf(stderr, "nxdctl: HDD %s carries an nxd SSD "
			"superblock\n", hdd);
		problems++;
	}
	if (sr == ROLE_HDD) {
		fprintf(stderr, "nxdctl: SSD %s carries an nxd HDD label\n",
			ssd);
		problems++;
	}
	/* The volume of this pair comes back as it was: nothing to check. */
	if (pair && !format)
		goto out;

	if (hr == ROLE_HDD && format) {
		problems += log_risk_check(hdd, ROLE_HDD, &hm);
		/* Its label is cleared: the new volume gets the new layout. */
		if (hm.data_offset != data_offset) {
			nxdctl_fmt_uuid(u, hm.vol_uuid);
			fprintf(stderr, "nxdctl: HDD %s holds the data of volume "
				"%s (format %d, data from sector %" PRIu64 "); "
				"the new volume's data\narea starts at sector %"
				PRIu64 ", so its data would not be in it (to "
				"keep them with a new SSD:\nnxdctl attach or "
				"replace-ssd)\n", hdd, u, hm.format_version,
				hm.data_offset, data_offset);
			problems++;
		}
	} else if (hr == ROLE_NONE) {
		/* A new volume: nxd writes its label in block 0 (format 2). */
		rc = warn_sigs("HDD", hdd, &problems);
		if (rc)
			return rc;
		rc = label_area_in_use(hdd, hdd_bytes, data_offset, &off);
		if (rc < 0)
			return fail(errno_code(-rc), "%s: %s", hdd,
				    strerror(-rc));
		if (rc) {
			fprintf(stderr, "nxdctl: HDD %s holds data in %s (at "
				"byte %" PRIu64 "), where nxd writes its "
				"label\n", hdd, data_offset ? "its first 4 KiB" :
				"its last MiB", off);
			problems++;
		}
		if (problems)
			fprintf(stderr, "nxdctl: existing data cannot be "
				"converted in place: the new volume's data area "
				"starts at\nsector %" PRIu64 " of the HDD, and "
				"block 0 holds its label (back up, create, "
				"restore)\n", data_offset);
	}
	if (sr == ROLE_SSD && (format || !pair) &&
	    !(hr == ROLE_HDD && format && uuid_eq(hm.vol_uuid, sm.vol_uuid))) {
		problems += log_risk_check(ssd, ROLE_SSD, &sm);
	} else if (sr == ROLE_NONE) {
		rc = warn_sigs("SSD", ssd, &problems);
		if (rc)
			return rc;
	}
out:
	return checks_verdict(problems, force, "refusing to create the "
			      "volume: what is named above would be\n"
			      "overwritten or lost (--force to go ahead)");
}

int checks_verdict(int problems, bool force, const char *refusal)
{
	if (!problems)
		return 0;
	if (force) {
		fprintf(stderr, "nxdctl: --force: going ahead\n");
		return 0;
	}
	return fail(NXDCTL_EXIT_USAGE, "%s", refusal);
}
