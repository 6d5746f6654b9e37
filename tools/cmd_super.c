// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl show-super: the nxd metadata of a device, read offline with the
 * module's codec (like bcache-super-show or mdadm --examine): both SSD
 * superblock copies and the log they describe, or the HDD label.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "nxdctl.h"
#include "json.h"

#define SCAN_MAX	100000	/* segment headers read at most */

static const char *decode_word(int res)
{
	switch (res) {
	case 0:
		return "valid";
	case NXD_ENOTNXD:
		return "no nxd magic";
	case -EBADMSG:
		return "bad checksum";
	default:
		return "invalid";
	}
}

/* The volume a superblock or a label belongs to: both say it alike. */
static void text_uuids(const uint8_t *vol_uuid, const uint8_t *hdd_uuid)
{
	char a[40], b[40];

	nxdctl_fmt_uuid(a, vol_uuid);
	nxdctl_fmt_uuid(b, hdd_uuid);
	printf("  volume UUID   %s\n  HDD UUID      %s\n", a, b);
}

static void json_uuids(struct jw *j, const uint8_t *vol_uuid,
		       const uint8_t *hdd_uuid, uint64_t hdd_sectors)
{
	char u[40];

	nxdctl_fmt_uuid(u, vol_uuid);
	jw_str(j, "vol_uuid", u);
	nxdctl_fmt_uuid(u, hdd_uuid);
	jw_str(j, "hdd_uuid", u);
	jw_u64(j, "hdd_sectors", hdd_sectors);
}

/* What a show-super document of either role starts with. */
static void json_head(struct jw *j, const char *dev, const char *role,
		      const struct nxd_meta *m)
{
	jw_start(j, stdout, true);
	jw_open(j, NULL, '{');
	jw_str(j, "device", dev);
	jw_str(j, "role", role);
	jw_u64(j, "format_version", m->format_version);
	jw_u64(j, "data_offset", m->data_offset);
}

/*
 * The HDD layout of a volume: "format 2: label in HDD block 0, data from
 * sector N (X MiB)" or "format 1: data from sector 0, label at sector N".
 */
static void text_layout(uint64_t data_offset, uint64_t label_sector)
{
	if (data_offset)
		printf("  layout        format 2: label in HDD block 0, data "
		       "from sector %" PRIu64 " (%" PRIu64 " MiB)\n",
		       data_offset, data_offset >> 11);
	else
		printf("  layout        format 1: data from sector 0, label at "
		       "sector %" PRIu64 "\n", label_sector);
}

static void text_sb(const struct nxd_sb_info *sb, uint64_t bytes)
{
	char a[40], b[40], buf[NXD_TUN_STR_LEN];
	unsigned int i;

	text_uuids(sb->vol_uuid, sb->hdd_uuid);
	text_layout(sb->data_offset, sb->hdd_label_sector);
	nxdctl_fmt_human(a, sizeof(a), sb->data_sectors << 9);
	printf("  data area     %" PRIu64 " sectors (%s); HDD label at "
	       "sector %" PRIu64 " of %" PRIu64 "\n", sb->data_sectors, a,
	       sb->hdd_label_sector, sb->hdd_sectors);
	nxdctl_fmt_human(a, sizeof(a), sb->ring_blocks * NXD_BLOCK_SIZE);
	nxdctl_fmt_human(b, sizeof(b), bytes);
	printf("  log ring      %" PRIu64 " blocks (%s) from block %" PRIu64
	       ", on %s\n", sb->ring_blocks, a, sb->ring_start, b);
	printf("  tail          position %" PRIu64 ", segment %" PRIu64 "\n",
	       sb->tail_pos, sb->tail_seq);
	printf("  head          position %" PRIu64 ", segment %" PRIu64 "%s\n",
	       sb->head_pos, sb->head_seq, sb->flags & NXD_SB_CLEAN ? "" :
	       " (not valid: no clean shutdown recorded)");
	printf("  generation    %" PRIu64 ", from segment %" PRIu64 "\n",
	       sb->gen, sb->gen_start_seq);
	printf("  flags         %s\n", sb->flags & NXD_SB_CLEAN ? "clean" :
	       "none (in use, or not shut down cleanly)");
	printf("  name          %s\n", sb->name[0] ? sb->name :
	       "none stored");
	if (!sb->tun_valid) {
		printf("  tunables      none stored\n");
		return;
	}
	printf("  tunables     ");
	for (i = 0; i < NXD_TUN_NR; i++)
		printf(" %s %s", nxd_tuns[i].name,
		       nxd_tun_str(&nxd_tuns[i],
				   nxd_tun_val(&sb->tun, &nxd_tuns[i]), buf));
	printf("\n");
}

static void json_sb(struct jw *j, const char *key,
		    const struct nxd_sb_info *sb)
{
	const struct nxd_tun_desc *d;
	unsigned int i;
	u32 v;

	jw_open(j, key, '{');
	jw_u64(j, "sb_seq", sb->sb_seq);
	json_uuids(j, sb->vol_uuid, sb->hdd_uuid, sb->hdd_sectors);
	jw_u64(j, "hdd_label_sector", sb->hdd_label_sector);
	jw_u64(j, "data_offset", sb->data_offset);
	jw_u64(j, "data_sectors", sb->data_sectors);
	jw_u64(j, "ring_start", sb->ring_start);
	jw_u64(j, "ring_blocks", sb->ring_blocks);
	jw_u64(j, "tail_pos", sb->tail_pos);
	jw_u64(j, "tail_seq", sb->tail_seq);
	jw_u64(j, "head_pos", sb->head_pos);
	jw_u64(j, "head_seq", sb->head_seq);
	jw_u64(j, "gen", sb->gen);
	jw_u64(j, "gen_start_seq", sb->gen_start_seq);
	jw_bool(j, "clean", sb->flags & NXD_SB_CLEAN);
	jw_str(j, "name", sb->name);
	if (sb->tun_valid) {
		jw_open(j, "tunables", '{');
		for (i = 0; i < NXD_TUN_NR; i++) {
			d = &nxd_tuns[i];
			v = nxd_tun_val(&sb->tun, d);
			if (d->kind == NXD_TUN_MODE)
				jw_str(j, d->name, nxd_mode_name(v));
			else
				jw_u64(j, d->name, v);
		}
		jw_close(j, '}');
	} else {
		jw_null(j, "tunables");
	}
	jw_close(j, '}');
}

static void json_label(struct jw *j, const struct nxd_meta *m)
{
	const struct nxd_label_info *l = &m->label;

	jw_open(j, "label", '{');
	jw_u64(j, "sector", m->label_sector);
	jw_u64(j, "data_offset", l->data_offset);
	json_uuids(j, l->vol_uuid, l->hdd_uuid, l->hdd_sectors);
	jw_str(j, "owner", l->owner);
	jw_bool(j, "log_frozen", l->flags & NXD_LABEL_LOG_FROZEN);
	jw_bool(j, "log_abandoned", l->flags & NXD_LABEL_LOG_ABANDONED);
	if (l->flags & NXD_LABEL_LOG_FROZEN) {
		jw_u64(j, "frozen_end_seq", l->frozen_end_seq);
		jw_u64(j, "frozen_tail_pos", l->frozen_tail_pos);
		jw_u64(j, "frozen_tail_seq", l->frozen_tail_seq);
	}
	if (l->flags & NXD_LABEL_LOG_ABANDONED)
		jw_u64(j, "abandoned_gen", l->abandoned_gen);
	/* Given up online (abandon_log): what the label says was lost. */
	if ((l->flags & NXD_LABEL_LOG_ABANDONED) && l->lost_blocks) {
		jw_u64(j, "lost_blocks", l->lost_blocks);
		jw_u64(j, "lost_ranges", l->lost_ranges);
	}
	jw_close(j, '}');
}

static void text_label(const struct nxd_meta *m)
{
	const struct nxd_label_info *l = &m->label;

	text_uuids(l->vol_uuid, l->hdd_uuid);
	text_layout(l->data_offset, m->label_sector);
	printf("  HDD size      %" PRIu64 " sectors when labelled\n",
	       l->hdd_sectors);
	printf("  owner         %s\n", l->owner[0] ? l->owner :
	       "none (any host may activate it)");
	if (l->flags & NXD_LABEL_LOG_FROZEN)
		printf("  log           frozen after an SSD failure: replay "
		       "segments %" PRIu64 " (at %" PRIu64 ") to %" PRIu64
		       ", not after\n", l->frozen_tail_seq,
		       l->frozen_tail_pos, l->frozen_end_seq);
	if (l->flags & NXD_LABEL_LOG_ABANDONED)
		printf("  log           abandoned in generation %" PRIu64
		       ": never replayed\n", l->abandoned_gen);
	if ((l->flags & NXD_LABEL_LOG_ABANDONED) && l->lost_blocks)
		printf("  lost          %" PRIu64 " blocks of 4 KiB in %u ranges "
		       "(the kernel log lists them)\n", l->lost_blocks,
		       l->lost_ranges);
	if (!(l->flags & (NXD_LABEL_LOG_FROZEN | NXD_LABEL_LOG_ABANDONED)))
		printf("  flags         none\n");
}

/* The log the superblock describes, within the HDD's window if at hand. */
static int scan_log(const char *dev, const struct nxd_meta *m,
		    struct nxd_log_scan *ls, char *hdd, size_t hlen,
		    char *owner)
{
	struct nxd_meta hm;
	uint64_t bytes;
	int fd, rc, e;
	const struct nxd_label_info *l = NULL;

	hdd[0] = 0;
	if (!find_peer(m, ROLE_HDD, dev, hdd, hlen) &&
	    probe_role(hdd, m->hdd_label_sector, &hm, &bytes, &e) == ROLE_HDD) {
		l = &hm.label;
		memcpy(owner, l->owner, NXD_LABEL_OWNER_LEN);
	} else
		hdd[0] = 0;
	fd = open_dev(dev);
	if (fd < 0)
		return -errno;
	rc = ondisk_log_scan(fd, m, l, SCAN_MAX, false, ls);
	close(fd);
	return rc;
}

static int show_ssd(const char *dev, const struct nxd_meta *m,
		    uint64_t bytes, bool json)
{
	struct nxd_sb_info sbs[2];
	char hdd[PATH_MAX], owner[NXD_LABEL_OWNER_LEN] = "";
	struct nxd_log_scan ls;
	int res[2], fd, rc, i;
	struct jw j;

	fd = open_dev(dev);
	if (fd < 0)
		return fail(errno_code(errno), "%s: %s", dev, strerror(errno));
	rc = ondisk_read_sb_copies(fd, bytes, sbs, res);
	close(fd);
	if (rc)
		return fail(errno_code(-rc), "%s: %s", dev, strerror(-rc));
	rc = scan_log(dev, m, &ls, hdd, sizeof(hdd), owner);
	if (json) {
		json_head(&j, dev, "ssd", m);
		jw_u64(&j, "in_use", m->sb_copy);
		jw_open(&j, "copies", '[');
		for (i = 0; i < 2; i++) {
			jw_open(&j, NULL, '{');
			jw_u64(&j, "block", i);
			jw_str(&j, "decode", decode_word(res[i]));
			if (!res[i])
				json_sb(&j, "superblock", &sbs[i]);
			jw_close(&j, '}');
		}
		jw_close(&j, ']');
		json_sb(&j, "superblock", &m->sb);
		jw_open(&j, "log", '{');
		jw_str(&j, "hdd", hdd);
		if (hdd[0])
			jw_str(&j, "owner", owner);
		if (!rc) {
			jw_u64(&j, "live_segments", ls.segments);
			jw_u64(&j, "data_blocks", ls.data_blocks);
			jw_u64(&j, "first_seq", ls.first_seq);
			jw_bool(&j, "complete", ls.complete);
			jw_bool(&j, "frozen", ls.frozen);
			jw_bool(&j, "abandoned", ls.abandoned);
		}
		jw_close(&j, '}');
		jw_close(&j, '}');
		return 0;
	}
	printf("%s: nxd SSD superblock, format %d\n", dev, m->format_version);
	for (i = 0; i < 2; i++) {
		printf("  copy %c        block %d: %s", 'A' + i, i,
		       decode_word(res[i]));
		if (!res[i])
			printf(", sb_seq %" PRIu64 "%s", sbs[i].sb_seq,
			       i == m->sb_copy ? " (in use)" : "");
		putchar('\n');
	}
	text_sb(&m->sb, bytes);
	if (rc) {
		printf("  log           cannot be read: %s\n", strerror(-rc));
		return 0;
	}
	if (ls.abandoned)
		printf("  log           abandoned (HDD label): never replayed\n");
	else
		printf("  log           %s%" PRIu64 " live segments from "
		       "segment %" PRIu64 ", %" PRIu64 " data blocks not yet on "
		       "the HDD%s\n", ls.complete ? "" : "at least ",
		       ls.segments, ls.first_seq, ls.data_blocks,
		       ls.frozen ? " (frozen window)" : "");
	printf("  HDD           %s\n", hdd[0] ? hdd :
	       "not found (its label's frozen window not applied)");
	if (hdd[0])
		printf("  owner         %s (HDD label)\n", owner[0] ? owner :
		       "none");
	return 0;
}

static int show_hdd(const char *dev, const struct nxd_meta *m, bool json)
{
	struct jw j;

	if (json) {
		json_head(&j, dev, "hdd", m);
		json_label(&j, m);
		jw_close(&j, '}');
		return 0;
	}
	printf("%s: nxd HDD label, format %d, at sector %" PRIu64 "\n", dev,
	       m->format_version, m->label_sector);
	text_label(m);
	return 0;
}

static int do_show_super(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		HELP_OPT, { 0 }
	};
	char path[PATH_MAX];
	struct nxd_meta m;
	bool json = false;
	const struct simple_opt so[] = { { 'j', &json, NULL }, { 0 } };
	uint64_t bytes;
	enum role r;
	int rc, e;

	rc = simple_opts(c, argc, argv, "jh", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 1);
	if (rc)
		return rc;
	if (!strchr(argv[optind], '/'))
		snprintf(path, sizeof(path), "/dev/%s", argv[optind]);
	else
		snprintf(path, sizeof(path), "%s", argv[optind]);
	r = probe_role(path, 0, &m, &bytes, &e);
	if (r == ROLE_SSD)
		return show_ssd(path, &m, bytes, json);
	if (r == ROLE_HDD)
		return show_hdd(path, &m, json);
	if (e && e != -EINVAL && e != -ENODATA)
		return fail(errno_code(-e), "%s: %s", path, strerror(-e));
	return fail(NXDCTL_EXIT_NOVOL, "%s carries no nxd superblock or HDD "
		    "label", path);
}

const struct cmd cmd_show_super = {
	"show-super", do_show_super, "DEVICE [--json]",
	"Show the nxd metadata of DEVICE, read from the device (the volume "
	"need not\nbe active): both copies of an SSD's superblock, the one in "
	"use, and the\nlog it describes (live segments and data blocks not "
	"yet on the HDD, within\nthe HDD label's frozen window if the HDD is "
	"present); or an HDD's label.  Both say the volume's HDD layout: format "
	"2\n(label in HDD block 0, data from the data offset) or format 1 "
	"(data from\nsector 0, label in the last MiB).",
	"Options:\n  --json    as JSON\n" };
