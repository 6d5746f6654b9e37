// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl activate: event-driven assembly at boot and hotplug.
 *
 * 69-nxd-activate.rules asks "activate --udev DEVICE" whether the other
 * half of DEVICE's volume is present.  If it is, the rule has systemd
 * start nxd-activate@UUID.service ("activate UUID"), which assembles the
 * volume as "assemble --auto" does; if not, nxd-activate@UUID.timer, which
 * starts the same service later: by then the peer has appeared (its own
 * event assembled the volume, and the service finds it active) or it has
 * not, and the service says so in the journal.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nxdctl.h"

/* The members of a volume present now, each not held by md or dm. */
struct members {
	const uint8_t *uuid;
	char ssd[PATH_MAX], hdd[PATH_MAX];
	int ssds, hdds;
};

static int member(void *arg, const char *path)
{
	struct members *m = arg;
	struct nxd_meta od;
	uint64_t bytes;
	enum role r;
	int e;

	r = probe_role(path, 0, &od, &bytes, &e);
	if (r == ROLE_NONE || !uuid_eq(od.vol_uuid, m->uuid))
		return 0;
	if (r == ROLE_SSD && !m->ssds++)
		snprintf(m->ssd, sizeof(m->ssd), "%s", path);
	if (r == ROLE_HDD && !m->hdds++)
		snprintf(m->hdd, sizeof(m->hdd), "%s", path);
	return 0;
}

/*
 * For IMPORT{program}: NXD_PEER=1 if the other half of @dev is present.
 * Nothing for a device held by md or dm: that of an active volume (its
 * events, e.g. an array that starts after create, ask for nothing).
 */
static int udev_peer(const char *dev)
{
	char other[PATH_MAX], real[PATH_MAX];
	struct nxd_meta od;
	uint64_t bytes;
	enum role r;
	int e;

	if (realpath(dev, real) && !strncmp(real, "/dev/", 5) &&
	    !strchr(real + 5, '/') && !candidate(real + 5))
		return 0;
	r = probe_role(dev, 0, &od, &bytes, &e);
	if (r == ROLE_NONE)
		return 0;
	e = find_peer(&od, r == ROLE_SSD ? ROLE_HDD : ROLE_SSD, dev, other,
		      sizeof(other));
	printf("NXD_PEER=%d\n", !e);
	return 0;
}

static int do_activate(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "udev", no_argument, NULL, 'u' },
		{ "dry-run", no_argument, NULL, 'n' }, HELP_OPT, { 0 }
	};
	char vname[NXD_NAME_LEN + 1], u[40];
	char *av[] = { "assemble", "--auto", NULL, "--dry-run", NULL };
	struct members m = { 0 };
	uint8_t uuid[16];
	bool udev = false, dry = false;
	const struct simple_opt so[] = {
		{ 'u', &udev, NULL }, { 'n', &dry, NULL }, { 0 }
	};
	int rc;

	rc = simple_opts(c, argc, argv, "h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 1);
	if (rc)
		return rc;
	if (udev)
		return udev_peer(argv[optind]);
	if (!parse_uuid(argv[optind], uuid))
		return usage_error(c->name, "%s is not a volume UUID",
				   argv[optind]);
	nxdctl_fmt_uuid(u, uuid);
	if (active_volume(uuid, vname, sizeof(vname))) {
		printf("volume %s is already active as %s\n", u, vname);
		return 0;
	}
	m.uuid = uuid;
	rc = for_each_candidate(member, &m);
	if (rc)
		return rc;
	if (m.ssds > 1)
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: more than one "
			    "device carries its SSD superblock (%s, ...): not "
			    "assembled", u, m.ssd);
	if (!m.ssds && !m.hdds)
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: neither its SSD "
			    "nor its HDD is present: not assembled", u);
	if (!m.ssds || !m.hdds)
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: its %s %s is "
			    "present but its %s is missing: not assembled "
			    "(the %s alone is never mounted)", u,
			    m.ssds ? "SSD" : "HDD", m.ssds ? m.ssd : m.hdd,
			    m.ssds ? "HDD" : "SSD", m.ssds ? "SSD" : "HDD");
	av[2] = m.ssd;
	optind = 0;
	return cmd_assemble.fn(&cmd_assemble, dry ? 4 : 3, av);
}

const struct cmd cmd_activate = {
	"activate", do_activate, "UUID [--dry-run] | --udev DEVICE",
	"Assemble volume UUID if its SSD and HDD are both present, as "
	"'assemble\n--auto' does (the config file's NAME and options; "
	"nothing for a noauto\nor removed volume); say which half is missing "
	"if one is.  The command\nof nxd-activate@UUID.service.  --udev "
	"DEVICE: for udev IMPORT{program},\nprint NXD_PEER=1 if the other "
	"half of DEVICE's volume is present, else\nNXD_PEER=0 (nothing if "
	"DEVICE is not nxd or is held, as an active\nvolume's are).",
	"Options:\n"
	"  --dry-run     print the dmsetup command, create nothing\n"
	"  --udev        the udev rule's question about DEVICE\n",
};
