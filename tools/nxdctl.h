/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl: what the command files (cmd_*.c) share.  One file per kernel
 * interface or concept: cli.c (errors, options, sysfs files), vol.c
 * (naming a volume, its tunables), ctl.c (/dev/nxd-control), dm.c
 * (libdevmapper), table.c (the table line, create), ondisk.c (devices
 * carrying nxd metadata).  The pure parts (stats.h, view.h, suggest.h,
 * fmt.h, json.h) know nothing of these.
 */
#ifndef NXDCTL_H
#define NXDCTL_H

#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <getopt.h>
#include <sys/types.h>

#include "../kernel/nxd_ioctl.h"
#include "../kernel/nxd_core.h"
#include "ondisk.h"
#include "fmt.h"
#include "stats.h"
#include "suggest.h"
#include "status.h"
#include "view.h"
#include "events.h"

/* Exit codes, documented in nxdctl(8). */
#define NXDCTL_EXIT_OK		0
#define NXDCTL_EXIT_USAGE	1
#define NXDCTL_EXIT_NOVOL	2
#define NXDCTL_EXIT_PERM	3
#define NXDCTL_EXIT_KERNEL	4
/* status, list, monitor --oneshot: a volume is degraded (or lost writes). */
#define NXDCTL_EXIT_DEGRADED	5
/* create, assemble: the volume belongs to another host (owner.c). */
#define NXDCTL_EXIT_FOREIGN	6

#define CONTROL_PATH	"/dev/" NXD_CONTROL_NAME
#define TARGET_NAME	"nxd"

/* ---- cli.c ---- */

/* Test hooks: NXDCTL_SYSFS replaces "/sys", NXDCTL_TEST_STATS names a file. */
extern const char *sysfs_root;
extern const char *test_stats;
/* Set while a config line is parsed: usage errors name "FILE:LINE". */
extern const char *err_where;

struct cmd {
	const char *name;
	int (*fn)(const struct cmd *c, int argc, char **argv);
	const char *args;
	const char *summary;
	const char *help;
};

#define HELP_OPT { "help", no_argument, NULL, 'h' }
#define VOL_HELP							\
	"VOL is a dm name, /dev/mapper/NAME, /dev/nxd/NAME or /dev/dm-N.\n"

/* "nxdctl: ..." on stderr; returns @code. */
int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exit code for errno @e. */
int errno_code(int e);
int usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Copy @src into @dst of @len; false (and a truncated copy) if too long. */
bool scopy(char *dst, size_t len, const char *src);
bool is_dir(const char *path);
int sysfs_read(const char *path, char *buf, size_t len);
int sysfs_write(const char *path, const char *val);

int parse_size_opt(const char *cmd, const char *opt, const char *s,
		   uint64_t max, uint64_t *out);
int parse_uint_opt(const char *cmd, const char *opt, const char *s,
		   unsigned long min, unsigned long max, unsigned long *out);
int parse_pos_double(const char *cmd, const char *opt, const char *s,
		     double *out);
void cmd_usage(const struct cmd *c, FILE *f);
/* The default case of getopt loops: --help, or a bad option. */
int opt_default(const struct cmd *c, int o, char **argv);
/* An option that sets a bool (@flag) or keeps its argument (@arg). */
struct simple_opt {
	int val;		/* as getopt_long() returns it; 0 ends a list */
	bool *flag;
	const char **arg;
};

/*
 * The getopt_long() loop of a command whose options are all simple_opts
 * (@so, NULL if none): anything else is opt_default()'s, --help or a bad
 * option.  -1 when the options are read, else the exit code (0 after
 * --help).
 */
int simple_opts(const struct cmd *c, int argc, char **argv,
		const char *shortopts, const struct option *opts,
		const struct simple_opt *so);
int want_args(const struct cmd *c, int argc, char **argv, int n_min,
	      int n_max);

/* ---- vol.c ---- */

struct vol {
	const char *arg;		/* as the user gave it */
	char name[NXD_NAME_LEN];	/* dm name */
	char kname[64];			/* dm-N */
	unsigned int major, minor;
};

/*
 * VOL: a dm name, /dev/mapper/NAME, /dev/nxd/NAME, /dev/dm-N, dm-N, or any
 * block device node of the volume.  0 or an exit code (reported).
 */
int resolve_vol(const char *arg, struct vol *v);
/* The one argument of command @c, a VOL, resolved.  0 or an exit code. */
int want_vol(const struct cmd *c, int argc, char **argv, struct vol *v);
/*
 * A new @v for VOL @arg and the last component of its path in *@base.
 * 0, or an exit code (reported) if that is empty.
 */
int vol_start(const char *arg, struct vol *v, const char **base);
void nxd_attr_path(const struct vol *v, const char *attr, char *p,
		   size_t len);
int attr_get(const struct vol *v, const char *attr, char *buf, size_t len);
int attr_set(const struct vol *v, const char *attr, const char *val);

/* ---- ctl.c ---- */

int control_open(void);
void hdr_init(struct nxd_ioc_hdr *h, uint32_t size, uint32_t flags,
	      const struct vol *v);
int get_stats(const struct vol *v, uint32_t flags, struct nxd_ioc_stats *st);
int get_auto(const struct vol *v, struct nxd_ioc_auto *ia);
int get_list(struct nxd_ioc_list *l);
/* GET_STATS of the volume with device number @dev (or name), silently. */
int peek_stats(uint64_t dev, const char *name, struct nxd_ioc_stats *st);
/* Name of the active volume with @uuid, if any. */
bool active_volume(const uint8_t *uuid, char *name, size_t len);
/* The volume UUID of active volume @name.  0 or an exit code. */
int vol_uuid_of(const char *name, uint8_t *uuid);

/* ---- cmd_volume.c ---- */

/*
 * dmsetup remove @v (@retry: while briefly busy); @mark: record it as
 * removed on purpose, which automatic assembly honours.  0 or an exit code.
 */
int remove_volume(const struct vol *v, bool retry, bool mark);

/* ---- dm.c ---- */

void dm_log(int level, const char *file, int line, int dm_errno_or_class,
	    const char *f, ...) __attribute__((format(printf, 5, 6)));
int dm_fail(const char *what, const char *name);
/*
 * Type and parameters of the first target of @name.  0 or an exit code;
 * an empty @target if the device has no table.
 */
int dm_table_of(const char *name, char *target, size_t tlen, char *params,
		size_t plen);
int dm_message(const struct vol *v, const char *msg);
/* The same, with the kernel's reply in @out (empty if none). */
int dm_message_out(const struct vol *v, const char *msg, char *out,
		   size_t len);

/* The first target of a table, and how many there are. */
struct dm_line {
	unsigned int ntargets;
	uint64_t start, len;
	char type[32];
	char params[PATH_MAX + 1024];
};

/* The fields of the nxd status line that lifecycle.c needs. */
struct dm_nxd_status {
	char state[16];
	uint64_t log_blocks, log_used, index_entries, degraded;
};

/* The live table of @name.  0 or an exit code (ntargets 0: no table). */
int dm_table(const char *name, struct dm_line *t);
/* Parse an nxd status line ("STATE FIELDS...").  0 or -EINVAL. */
int dm_parse_nxd_status(const char *p, struct dm_nxd_status *s);
/* The status of the live nxd table of @name.  0 or an exit code. */
int dm_nxd_status(const char *name, struct dm_nxd_status *s);
/*
 * One device-mapper operation on @name: DM_DEVICE_RELOAD (with @t),
 * SUSPEND (@nolockfs), RESUME (waits for udev) or CLEAR.  Prints nothing
 * but errors.  0 or an exit code.
 */
int dm_op(int op, const char *name, const struct dm_line *t, bool nolockfs);
/* Give active dm device @name, created without one, the DM UUID @uuid. */
int dm_set_uuid(const char *name, const char *uuid);
struct dm_task;
/*
 * Run @dmt, set up for @name when @ok (errno cleared before the set-up),
 * waiting for udev when @udev; destroys it.  0 or an exit code, the
 * error said as "@what @name".
 */
int dm_run(struct dm_task *dmt, bool ok, bool udev, const char *what,
	   const char *name);
/*
 * VOL naming any device-mapper device, nxd or not: a dm name,
 * /dev/mapper/NAME, /dev/dm-N, dm-N or a device node.
 */
int dm_resolve(const char *arg, struct vol *v);

/* ---- table.c ---- */

struct create_opts {
	const char *uuid;
	uint64_t len;		/* sectors; 0: all the HDD has room for */
	char extra[512];	/* key value pairs, space separated */
	unsigned int nargs;
	bool dry_run;
	bool format;		/* "format" is in @extra */
	bool force;		/* --force: skip create_checks() refusals */
	struct nxd_tun tun;	/* the tunables named in @extra, */
	uint32_t tun_given;	/* BIT(i): nxd_tuns[i] */
	struct nxd_tun base;	/* the others, if @base_valid (stored) */
	bool base_valid;
	bool take_over;		/* --take-over: owner_check() records us */
};

enum {
	O_WTHR = 256, O_MODE, O_LOWWM, O_HIGHWM, O_RATE, O_DISCARD,
	O_DRAIN, O_AMIN, O_AMAX, O_SMIN, O_SSIZE, O_DRY, O_FORMAT, O_UUID, O_NAME, O_SSDIOPS, O_SSDMBPS,
	O_HDDIOPS, O_HDDMBPS, O_PROBE, O_RETRY, O_ACCEPT_LOSS, O_FORCE,
	O_STRIPE, O_CHUNK, O_NOCAP, O_ALL, O_AUTO, O_CONFIG, O_TAKEOVER,
};

/* The table options (O_WTHR ... O_DRY) and --format, for getopt_long. */
#define TABLE_OPTS							\
	{ "write-threshold", required_argument, NULL, O_WTHR },		\
	{ "mode", required_argument, NULL, O_MODE },			\
	{ "low-watermark", required_argument, NULL, O_LOWWM },		\
	{ "high-watermark", required_argument, NULL, O_HIGHWM },	\
	{ "destage-rate", required_argument, NULL, O_RATE },		\
	{ "ssd-discard", required_argument, NULL, O_DISCARD },		\
	{ "drain-on-suspend", required_argument, NULL, O_DRAIN },	\
	{ "auto-min-threshold", required_argument, NULL, O_AMIN },	\
	{ "auto-max-threshold", required_argument, NULL, O_AMAX },	\
	{ "stream-min", required_argument, NULL, O_SMIN },		\
	{ "stripe-size", required_argument, NULL, O_SSIZE },		\
	{ "dry-run", no_argument, NULL, O_DRY },			\
	{ "format", no_argument, NULL, O_FORMAT }

/* Options of create and assemble; each refuses those that are not its own. */
extern const struct option table_opts[];
int add_opt(struct create_opts *co, const char *key, const char *val);
/*
 * @val of tunable @d into *@v, or an error naming @what (the option as
 * written) and the range; the kernel's own table (nxd_tuns[]).
 */
int tun_value(const char *cmd, const char *what,
	      const struct nxd_tun_desc *d, const char *val, uint32_t *v);
/*
 * The checks between tunables (the kernel's nxd_tun_valid() beyond each
 * range): low <= high watermark, adaptive min <= max, whole-block stripe.
 */
int tun_pairs_check(const char *cmd, const struct nxd_tun *t);
/* One table option from getopt; 1 if @o is not one. */
int table_opt(const char *cmd, int o, const char *arg,
	      struct create_opts *co);
/*
 * The default case of the getopt loops of create, assemble and attach: a
 * table option, else opt_default()'s.  -1 when @o was a table option,
 * taken; else the exit code (0 after --help).
 */
int table_opt_default(const struct cmd *c, int o, char **argv,
		      struct create_opts *co);
/* --format or --force (create, attach, replace-ssd) taken: true. */
bool format_force_opt(int o, bool *format, bool *force);
/* Size in bytes of a block device (or, for --dry-run, a regular file). */
int dev_size(const char *path, bool allow_file, uint64_t *bytes,
	     dev_t *rdev);
/* The nxd volume (dm name in @name) holding block device @dev, if any. */
bool nxd_holder(dev_t dev, char *name, size_t len);
bool valid_dm_name(const char *n);
int create_volume(const char *name, const char *hdd, const char *ssd,
		  const struct create_opts *co);

/*
 * The data area of an nxd volume over an HDD (on-disk-format.md): version
 * 2 from data_offset, version 1 (data_offset 0) from sector 0.  Every
 * table length nxdctl computes comes from volume_sectors().
 */
/* The HDD's optimal I/O size in bytes (sysfs; a partition's disk), or 0. */
uint64_t hdd_io_opt(dev_t rdev);
/* Where a new volume's data area starts on block device @rdev (0: file). */
uint64_t new_data_offset(dev_t rdev);
/* Sectors of the data area over an HDD of @bytes from @data_offset. */
uint64_t volume_sectors(uint64_t bytes, uint64_t data_offset);
/*
 * The layout the kernel gives a volume it formats over HDD @path (@bytes,
 * @rdev): that of the label in block 0 or at the version 1 end spot (in
 * *@label, *@labelled true), else a new one.  *@off: its data offset.
 * 0 or -errno (the label area cannot be read).
 */
int format_layout(const char *path, dev_t rdev, uint64_t bytes,
		  struct nxd_meta *label, bool *labelled, uint64_t *off);

/* ---- scan.c (and ondisk.h) ---- */

/* Block devices worth looking at: not nxd volumes, not held by md/dm. */
bool candidate(const char *kn);
/*
 * @fn(@arg, "/dev/NAME") for each candidate() among /sys/class/block,
 * until it returns non-zero: that, or 0; an exit code (reported) if the
 * directory cannot be read.
 */
int for_each_candidate(int (*fn)(void *arg, const char *dev), void *arg);
/*
 * Find the other half of volume @od among /sys/class/block: a device of
 * role @want whose metadata carries the same volume and HDD UUIDs.
 */
int find_peer(const struct nxd_meta *od, enum role want,
	      const char *self, char *out, size_t len);

/* /dev path of block device "MAJ:MIN": /dev/block/M:m if present. */
int devnode_of(const char *majmin, char *out, size_t len);
/* /dev/NAME of block device "MAJ:MIN" (its uevent DEVNAME). */
int devname_of(const char *majmin, char *out, size_t len);
/* The best /dev/disk/by-id link to @dev (hardware names first), or -errno. */
int by_id_of(const char *dev, char *out, size_t len);
/* Trigger a udev change event for block device @path (re-probe it). */
int udev_change(const char *path);

/* ---- owner.c ---- */

#define SYSTEM_ID_PATH	"/etc/nxd/system_id"

/* 1 to 63 letters, digits or ._:- (a host name fits). */
bool valid_owner(const char *s);
/* $NXD_SYSTEM_ID_FILE, else SYSTEM_ID_PATH. */
const char *system_id_path(void);
/*
 * This host's name as an owner: the first line of system_id_path() if
 * that file exists, else the host name.  0 or an exit code (reported).
 */
int local_owner(char *out, size_t len);
/* The HDD label of @hdd (@hint as probe_role's) into @m.  0 or -errno. */
int owner_read(const char *hdd, uint64_t hint, struct nxd_meta *m);
/*
 * Rewrite the owner of the label @m of @hdd ("": none), read-modify-
 * write, and read it back.  0 or -errno (-ESTALE: the label changed).
 */
int owner_write(const char *hdd, const struct nxd_meta *m, const char *owner);
int owner_check(const char *hdd, uint64_t hint, const char *vol,
		bool take_over, bool dry_run);
int owner_record_new(const char *hdd, const char *vol);

/* ---- nxdtab.c ---- */

#define NXDTAB_PATH	"/etc/nxd/nxdtab"
#define REMOVED_DIR	"/run/nxd/removed"

/* One line of the config: NAME UUID=<volume uuid> [OPTION,...]. */
struct nxdtab_vol {
	char name[NXD_NAME_LEN];
	uint8_t uuid[16];
	struct create_opts co;	/* its table options */
	bool noauto;		/* not assembled at boot */
	bool drain_on_stop;	/* stop drains it before removing it */
	unsigned int line;
};

struct nxdtab {
	const char *path;
	struct nxdtab_vol *vols;
	unsigned int n;
	unsigned int bad;	/* lines refused (reported as FILE:LINE) */
	bool missing;		/* no such file */
};

/* --config @opt, else $NXD_CONFIG, else NXDTAB_PATH. */
const char *nxdtab_path(const char *opt);
/*
 * Read the config at @path (missing: an empty one).  Bad lines are
 * reported and counted in @t->bad, the others kept.  0 or an exit code.
 */
int nxdtab_read(const char *path, struct nxdtab *t);
/*
 * nxdtab_read() of --config @opt (NULL: not given), else of the default
 * path: only the default may be missing; a --config FILE that does not
 * exist is a usage error (reported).  0 or an exit code.
 */
int nxdtab_load(const char *opt, struct nxdtab *t);
void nxdtab_free(struct nxdtab *t);
const struct nxdtab_vol *nxdtab_find(const struct nxdtab *t,
				     const uint8_t *uuid);
bool parse_uuid(const char *s, uint8_t *out);

/*
 * Volumes removed on purpose (nxdctl remove): a file named by the volume
 * UUID in $NXD_REMOVED_DIR, else REMOVED_DIR (tmpfs: a reboot forgets).
 * Automatic assembly skips them; assembling or creating one by hand
 * clears the mark.
 */
bool removed_marked(const uint8_t *uuid);
int removed_mark(const uint8_t *uuid, const char *name);
void removed_clear(const uint8_t *uuid);

/* ---- safety.c ---- */

/*
 * Signatures libblkid finds on @path (file systems, RAID, partition
 * tables), described in @desc ("xfs UUID ... LABEL 'x', ...").  Their
 * number, or -errno.
 */
int signatures(const char *path, char *desc, size_t len);
/*
 * 1 (and the first byte's offset in *@off) if where the label of a new
 * volume whose data start at @data_offset goes holds anything but zeros
 * or an nxd label: block 0 (version 2), or the HDD's last MiB and the
 * rounding below it (version 1, @data_offset 0); 0 if not; -errno.
 */
int label_area_in_use(const char *path, uint64_t bytes, uint64_t data_offset,
		      uint64_t *off);
/*
 * Zero the HDD labels (valid or damaged) at the spots nxd uses, block 0
 * and the version 1 end spot, plus sector @hint if not 0; with @dry_run
 * only say so.  Prints one line a label ("@what: ...").  The number
 * cleared, or an exit code (negated).
 */
int clear_labels(const char *path, uint64_t hint, bool dry_run,
		 const char *what);
/* Zero @len bytes at @off of @path, opened exclusively, and sync. */
int zero_range(const char *path, uint64_t off, size_t len);

struct log_risk {
	char ssd[PATH_MAX], hdd[PATH_MAX];	/* the pair, "" if absent */
	bool ssd_missing;	/* an HDD whose SSD is not present */
	struct nxd_log_scan scan;
};

/*
 * Would removing the nxd metadata of @dev (role @r, metadata @m) lose
 * writes?  1 if its log holds data blocks not yet destaged (or the HDD's
 * SSD is not present, so nobody can tell), 0 if not, -errno if the log
 * cannot be read.  The pair's other half is looked for like assemble does.
 */
int log_risk(const char *dev, enum role r, const struct nxd_meta *m,
	     struct log_risk *out);
void log_risk_say(const struct log_risk *lr, const uint8_t *vol_uuid);
/*
 * log_risk() of @dev, said (writes at risk, or a log that cannot be
 * read): 1 if there is a problem, else 0.
 */
int log_risk_check(const char *dev, enum role r, const struct nxd_meta *m);
/*
 * Before create: would the table about to be loaded destroy anything?
 * Signatures on a new volume's HDD or SSD, data where its label goes
 * (@data_offset: the new layout), writes in a log that --format (or a new
 * volume) discards, an old volume's data area that the new one would not
 * keep.  Says what,
 * and returns 0 if there is nothing or @force, else an exit code.
 */
int create_checks(const char *hdd, const char *ssd, uint64_t hdd_bytes,
		  uint64_t data_offset, bool format, bool force);
/*
 * The end of checks that said each of their @problems: 0 if there were
 * none, or @force (said so); else @refusal and an exit code.
 */
int checks_verdict(int problems, bool force, const char *refusal);

/* ---- cmd_status.c ---- */

/*
 * The health model of the volumes named in @vols (all volumes if
 * @nvols is 0): list entry, counters, sysfs state, and with @devices the
 * table's HDD and SSD; with @interval > 0 a second reading that many
 * seconds later for rates.  *@out (free()) holds *@n of the *@total
 * volumes.  0 or an exit code.
 */
int collect_status(int nvols, char **vols, double interval, bool devices,
		   struct nxdctl_status **out, unsigned int *n,
		   unsigned int *total);
/*
 * Append to *@s (*@n entries, reallocated) the volumes of the
 * configuration file (--config @config) that are not among them, marked
 * missing; noauto ones are not.  0 or an exit code.
 */
int collect_missing(const char *config, struct nxdctl_status **s,
		    unsigned int *n);
/*
 * The exit status of status and list: NXDCTL_EXIT_NOVOL if a configured
 * volume is not active, else NXDCTL_EXIT_DEGRADED if one is degraded or
 * lost acknowledged writes, else 0.
 */
int health_exit(const struct nxdctl_status *s, unsigned int n);

/* ---- lifecycle.c (grow, detach, attach, replace-ssd) ---- */

#define MIN_SSD_BYTES	(NXD_MIN_SSD_SECTORS * 512ULL)

/*
 * Test hooks of the lifecycle commands, read by lc_hooks():
 * NXDCTL_TEST_TABLE (a table line "0 LEN TARGET PARAMS") and
 * NXDCTL_TEST_STATUS (an nxd status line) instead of device-mapper.
 */
void lc_hooks(void);
bool lc_test(void);
/* dm_table(), dm_nxd_status(), dm_resolve(), or the test hooks. */
int lc_table(const char *name, struct dm_line *t);
int lc_status(const char *name, struct dm_nxd_status *s);
int lc_resolve_any(const char *arg, struct vol *v);
/*
 * The @nargs arguments of @c, the first a VOL: an nxd volume @v with a
 * one-target table @t.  0 or an exit code.
 */
int lc_nxd_volume(const struct cmd *c, int argc, char **argv, int nargs,
		  bool dry_run, struct vol *v, struct dm_line *t);

/* A device of a table line ("MAJ:MIN" or a path) as a path to open... */
void lc_dev_path(const char *tok, char *out, size_t len);
/* ... and as a name for people: /dev/md0 (253:3). */
void lc_dev_say(const char *tok, char *out, size_t len);
/* The first two words of an nxd line (HDD, SSD) and what follows. */
int lc_nxd_devs(const char *params, char *hdd, char *ssd, size_t len,
		const char **rest);
/* dev_size() of the device of table line word @tok. */
int lc_dev_bytes(const char *tok, bool dry_run, uint64_t *bytes,
		 dev_t *rdev);

struct detach_opts {
	unsigned long timeout;
	bool dry_run, nolockfs;
	bool accept_loss, yes;	/* degraded: abandon_log first */
};

/*
 * Switch nxd volume @v (live table @t) to linear over its HDD, online:
 * drain with progress, load linear, suspend, check the log is empty,
 * resume.  Prints the steps; on any failure before the resume the nxd
 * table is live again (said so).  0 or an exit code.
 */
/*
 * Where the data area of the nxd volume over table words @hdd_tok,
 * @ssd_tok starts: the SSD superblock's data_offset, else the HDD
 * label's.  0 or an exit code (said).
 */
int lc_data_offset(const char *hdd_tok, const char *ssd_tok, uint64_t *off);
int lc_detach(const struct vol *v, const struct dm_line *t,
	      const struct detach_opts *o);
/*
 * May @ssd become the log of a volume over HDD @hdd (@hdd_dev), instead
 * of @old_ssd if any?  Says what is wrong; 0, or an exit code unless
 * @force covers it.
 */
int lc_ssd_checks(const char *ssd, const char *hdd, dev_t hdd_dev,
		  const char *old_ssd, bool dry_run, bool format, bool force);
/*
 * The nxd parameters over @hdd and @ssd: @nopts table options in @opts
 * (count first, as in the table line), plus "format".
 */
int lc_attach_params(char *out, size_t len, const char *hdd,
		     const char *ssd, unsigned int nopts, const char *opts);
/* Load nxd line @params at length @len over linear @v, resume, check. */
int lc_attach_load(const struct vol *v, uint64_t len, const char *params,
		   bool dry_run);
/* After an attach: re-probe the SSD and HDD, say how to assemble. */
void lc_attach_done(const char *ssd, const char *hdd);

/* ---- the commands ---- */

extern const struct cmd cmd_histogram, cmd_stats;		/* cmd_stats.c */
extern const struct cmd cmd_threshold, cmd_config;		/* cmd_tune.c */
extern const struct cmd cmd_create, cmd_remove, cmd_drain,	/* cmd_volume.c */
	cmd_pause_destage, cmd_resume_destage, cmd_list;
extern const struct cmd cmd_suggest_threshold;			/* cmd_suggest.c */
extern const struct cmd cmd_routing;				/* cmd_routing.c */
extern const struct cmd cmd_assemble, cmd_udev_info,		/* cmd_assemble.c */
	cmd_stop;
extern const struct cmd cmd_activate;				/* cmd_activate.c */
extern const struct cmd cmd_wipe;				/* cmd_wipe.c */
extern const struct cmd cmd_takeover, cmd_set_owner;		/* cmd_owner.c */
extern const struct cmd cmd_status;				/* cmd_status.c */
extern const struct cmd cmd_show_super;				/* cmd_super.c */
extern const struct cmd cmd_monitor;				/* cmd_monitor.c */
extern const struct cmd cmd_grow, cmd_detach, cmd_attach,	/* cmd_lifecycle.c */
	cmd_replace_ssd;

#endif /* NXDCTL_H */
