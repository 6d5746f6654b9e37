// SPDX-License-Identifier: GPL-2.0
/*
 * nxd metadata on block devices (ondisk.h), read with the module's own
 * codec, kernel/nxd_codec.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "fmt.h"
#include "ondisk.h"

bool uuid_eq(const uint8_t *a, const uint8_t *b)
{
	return !memcmp(a, b, 16);
}

int open_dev(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	return fd;
}

int fd_size(int fd, uint64_t *bytes)
{
	struct stat st;

	if (!ioctl(fd, BLKGETSIZE64, bytes))
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return -ENOTBLK;
	*bytes = st.st_size;
	return 0;
}

int read_blk(int fd, uint64_t off, void **blk)
{
	ssize_t n;

	if (posix_memalign(blk, NXD_BLOCK_SIZE, NXD_BLOCK_SIZE))
		return -ENOMEM;
	n = pread(fd, *blk, NXD_BLOCK_SIZE, off);
	if (n == NXD_BLOCK_SIZE)
		return 0;
	free(*blk);
	*blk = NULL;
	return n < 0 ? -errno : -EIO;
}

int ondisk_read_sb_copies(int fd, uint64_t bytes, struct nxd_sb_info sbs[2],
			  int res[2])
{
	void *blk;
	int i, rc;

	memset(sbs, 0, 2 * sizeof(*sbs));
	for (i = 0; i < 2; i++) {
		rc = read_blk(fd, (uint64_t)i * NXD_BLOCK_SIZE, &blk);
		if (rc)
			return rc;
		res[i] = nxd_sb_decode(blk, bytes / NXD_BLOCK_SIZE, &sbs[i]);
		free(blk);
	}
	return 0;
}

int ondisk_read_sb(int fd, uint64_t bytes, struct nxd_meta *out)
{
	struct nxd_sb_info sbs[2];
	int res[2], i, rc;

	if (bytes < NXD_MIN_SSD_SECTORS * 512ULL)
		return 1;
	rc = ondisk_read_sb_copies(fd, bytes, sbs, res);
	if (rc)
		return rc;
	i = nxd_sb_pick(res, sbs);
	if (i == NXD_SB_NONE)
		return 1;
	if (i < 0)
		return i;
	memset(out, 0, sizeof(*out));
	out->sb = sbs[i];
	out->sb_copy = i;
	memcpy(out->vol_uuid, sbs[i].vol_uuid, 16);
	memcpy(out->hdd_uuid, sbs[i].hdd_uuid, 16);
	out->hdd_sectors = sbs[i].hdd_sectors;
	out->hdd_label_sector = sbs[i].hdd_label_sector;
	out->data_sectors = sbs[i].data_sectors;
	out->ring_blocks = sbs[i].ring_blocks;
	out->clean = sbs[i].flags & NXD_SB_CLEAN;
	out->data_offset = sbs[i].data_offset;
	out->format_version = nxd_layout_version(sbs[i].data_offset);
	return 0;
}

static int label_at(int fd, uint64_t sec, struct nxd_label_info *l)
{
	void *blk;
	int rc;

	rc = read_blk(fd, sec << 9, &blk);
	if (rc)
		return rc;
	rc = nxd_label_decode(blk, l);
	free(blk);
	return rc == NXD_ENOTNXD ? 1 : rc;
}

void ondisk_label_spots(uint64_t bytes, uint64_t spot[NXD_LABEL_SPOTS])
{
	spot[0] = 0;
	spot[1] = nxd_hdd_data_sectors(bytes >> 9);
}

int ondisk_label_magic_at(int fd, uint64_t sec)
{
	struct nxd_hdd_label *d;
	void *blk;
	int rc;

	rc = read_blk(fd, sec << 9, &blk);
	if (rc)
		return rc;
	d = blk;
	rc = le64_to_cpu(d->magic) == NXD_LABEL_MAGIC;
	free(blk);
	return rc;
}

/* A decode error is a damaged label: the next spot may hold the one. */
static bool label_io_error(int rc)
{
	return rc < 0 && rc != -EBADMSG && rc != -EINVAL &&
	       rc != -EPROTONOSUPPORT;
}

int ondisk_read_label(int fd, uint64_t bytes, uint64_t hint,
		      struct nxd_meta *out)
{
	struct nxd_label_info l;
	uint64_t spot[NXD_LABEL_SPOTS + 1], sec = 0;
	int i, n = NXD_LABEL_SPOTS, rc = 1, first = 1;

	ondisk_label_spots(bytes, spot);
	if (!spot[1])
		return 1;
	/* The HDD grew since its volume was last grown: label not at the end. */
	if (hint && hint != spot[1] &&
	    hint + NXD_SECTORS_PER_BLOCK <= bytes >> 9)
		spot[n++] = hint;
	for (i = 0; i < n; i++) {
		sec = spot[i];
		rc = label_at(fd, sec, &l);
		if (!rc || label_io_error(rc))
			break;
		if (first == 1)
			first = rc;
	}
	if (rc && !label_io_error(rc))
		return first;
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->label = l;
	out->label_sector = sec;
	memcpy(out->vol_uuid, l.vol_uuid, 16);
	memcpy(out->hdd_uuid, l.hdd_uuid, 16);
	out->hdd_sectors = l.hdd_sectors;
	out->data_offset = l.data_offset;
	out->format_version = nxd_layout_version(l.data_offset);
	return 0;
}

enum role probe_role(const char *path, uint64_t hint, struct nxd_meta *od,
		     uint64_t *bytes, int *err)
{
	enum role r = ROLE_NONE;
	int fd, rc;

	*err = 0;
	fd = open_dev(path);
	if (fd < 0) {
		*err = -errno;
		return ROLE_NONE;
	}
	rc = fd_size(fd, bytes);
	if (rc) {
		*err = rc;
		close(fd);
		return ROLE_NONE;
	}
	/* A valid label in block 0 (version 2): stale blocks after it aside. */
	if (*bytes >= NXD_BLOCK_SIZE && !label_at(fd, 0, &od->label)) {
		rc = ondisk_read_label(fd, *bytes, 0, od);
		if (!rc && !od->label_sector) {
			close(fd);
			return ROLE_HDD;
		}
	}
	rc = ondisk_read_sb(fd, *bytes, od);
	if (!rc) {
		r = ROLE_SSD;
	} else {
		if (rc < 0)
			*err = rc;
		rc = ondisk_read_label(fd, *bytes, hint, od);
		if (!rc)
			r = ROLE_HDD;
		else if (rc < 0 && !*err)
			*err = rc;
	}
	close(fd);
	return r;
}

/* Mirrors the replay loop of dm-target/nxd-meta.c, headers only. */
int ondisk_log_scan(int fd, const struct nxd_meta *ssd,
		    const struct nxd_label_info *label, uint64_t max_segs,
		    bool stop_at_data, struct nxd_log_scan *out)
{
	const struct nxd_sb_info *sb = &ssd->sb;
	struct nxd_label_info none = { 0 };
	uint64_t pos, seq, end, n;
	bool clean;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!label)
		label = &none;
	out->abandoned = label->flags & NXD_LABEL_LOG_ABANDONED;
	out->frozen = label->flags & NXD_LABEL_LOG_FROZEN;
	out->complete = true;
	if (out->abandoned)
		return 0;
	clean = (sb->flags & NXD_SB_CLEAN) && !out->frozen;
	nxd_replay_window(sb, label, &pos, &seq, &end);
	out->first_seq = seq;
	for (n = 0; n < sb->ring_blocks; n++) {
		struct nxd_seg_info si;
		void *hdr;

		if (seq >= end || (clean && seq == sb->head_seq))
			break;
		if (out->segments >= max_segs ||
		    (stop_at_data && out->data_blocks)) {
			out->complete = false;
			break;
		}
		rc = read_blk(fd, (sb->ring_start + pos) * NXD_BLOCK_SIZE, &hdr);
		if (rc)
			break;
		rc = nxd_seg_decode(hdr, sb->vol_uuid, sb->ring_blocks,
				    sb->data_sectors >> 3, &si);
		free(hdr);
		if (rc || si.seq != seq || si.pos != pos ||
		    !nxd_seg_gen_ok(sb, si.seq, si.gen)) {
			rc = 0;
			break;
		}
		out->segments++;
		out->data_blocks += si.nr_data;
		pos = nxd_next_seg_pos(sb->ring_blocks, pos + 1 + si.nr_data);
		seq++;
	}
	return rc;
}

void ondisk_print_env(FILE *f, enum role r, const struct nxd_meta *m,
		      bool fs)
{
	bool ssd = r == ROLE_SSD;
	char u[40];

	if (r == ROLE_NONE)
		return;
	fprintf(f, "NXD_ROLE=%s\n", ssd ? "ssd" : "hdd");
	if (fs) {
		fprintf(f, "NXD_FS_TYPE=%s\n", ssd ? "nxd_log" : "nxd_hdd");
		fprintf(f, "NXD_FS_USAGE=%s\n", ssd ? "other" : "raid");
	}
	nxdctl_fmt_uuid(u, m->vol_uuid);
	fprintf(f, "NXD_VOL_UUID=%s\n", u);
	nxdctl_fmt_uuid(u, m->hdd_uuid);
	fprintf(f, "NXD_HDD_UUID=%s\n", u);
	if (!fs)
		return;
	fprintf(f, "NXD_FORMAT_VERSION=%d\n", m->format_version);
	fprintf(f, "NXD_DATA_OFFSET=%" PRIu64 "\n", m->data_offset);
	if (ssd)
		fprintf(f, "NXD_SB_CLEAN=%d\n", m->clean ? 1 : 0);
	if (!ssd && (m->label.flags & NXD_LABEL_LOG_FROZEN))
		fputs("NXD_LOG_FROZEN=1\n", f);
	if (!ssd && (m->label.flags & NXD_LABEL_LOG_ABANDONED))
		fputs("NXD_LOG_ABANDONED=1\n", f);
}
