// SPDX-License-Identifier: GPL-2.0
/*
 * nxd-probe DEVICE: the udev helper that recognises the two halves of a
 * dm-nxd volume by their metadata, with the module's own codec
 * (kernel/nxd_codec.c), as probe-bcache does for bcache.  For
 * IMPORT{program} in 64-nxd-members.rules: prints, for a device carrying
 * an nxd SSD superblock or HDD label,
 *
 *   NXD_ROLE=ssd|hdd
 *   NXD_FS_TYPE=nxd_log|nxd_hdd       (what the rules put in ID_FS_TYPE)
 *   NXD_FS_USAGE=other|raid           (ID_FS_USAGE)
 *   NXD_VOL_UUID=<volume UUID>        (ID_FS_UUID)
 *   NXD_HDD_UUID=<HDD UUID>           (ID_FS_UUID_SUB)
 *   NXD_FORMAT_VERSION=1|2            (ID_FS_VERSION: the member's own)
 *   NXD_DATA_OFFSET=<sectors>         (where the data area starts on the
 *                                      HDD: 0 for format 1)
 *   NXD_SB_CLEAN=0|1                  (SSD: clean shutdown recorded)
 *   NXD_LOG_FROZEN=1, NXD_LOG_ABANDONED=1  (HDD label flags, when set)
 *
 * and nothing for any other device, or one it cannot read.  It reads at
 * most four 4 KiB blocks: block 0 (a format 2 HDD label, or superblock
 * copy A), block 1 (copy B), and the format 1 label spot in the last MiB.
 *
 * nxd-probe --links uuid=UUID_ENC label=LABEL_ENC [LINK...]: prints
 * NXD_LINKS=, the LINKs (udev's $links) but disk/by-uuid/UUID_ENC and
 * disk/by-label/LABEL_ENC: udev 252 has no SYMLINK-=, so the rules
 * assign the list this prints.
 *
 * Exit status 0 unless the usage is wrong.
 */
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "ondisk.h"

static int links(int argc, char **argv)
{
	const char *uuid = NULL, *label = NULL;
	char u[512], l[512];
	int i, n = 0;

	if (argc < 4 || strncmp(argv[2], "uuid=", 5) ||
	    strncmp(argv[3], "label=", 6)) {
		fprintf(stderr, "Usage: nxd-probe --links uuid=U label=L "
			"[LINK...]\n");
		return 1;
	}
	uuid = argv[2] + 5;
	label = argv[3] + 6;
	snprintf(u, sizeof(u), "disk/by-uuid/%s", uuid);
	snprintf(l, sizeof(l), "disk/by-label/%s", label);
	fputs("NXD_LINKS=", stdout);
	for (i = 4; i < argc; i++) {
		if ((*uuid && !strcmp(argv[i], u)) ||
		    (*label && !strcmp(argv[i], l)))
			continue;
		printf("%s%s", n++ ? " " : "", argv[i]);
	}
	putchar('\n');
	return 0;
}

int main(int argc, char **argv)
{
	struct nxd_meta m;
	uint64_t bytes;
	enum role r;
	int e;

	if (argc >= 2 && !strcmp(argv[1], "--links"))
		return links(argc, argv);
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "Usage: nxd-probe DEVICE\n");
		return 1;
	}
	r = probe_role(argv[1], 0, &m, &bytes, &e);
	ondisk_print_env(stdout, r, &m, true);
	return 0;
}
