// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd volumes: the state every table of one dm device shares (it
 * outlives reloads).  The volume list, a volume's lifetime (its kobject),
 * its tunables, and its sysfs directory /sys/block/dm-N/nxd/, owned by
 * the volume object so old and new tables of a reload share it.
 */
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/string.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd"

/* Guards the volume list, vol->active and nxd-target.c's table list. */
DEFINE_MUTEX(nxd_vols_lock);
LIST_HEAD(nxd_vols);

/* ---- tunables ---- */

/* Serialises writes of a volume's tunables, and copies of all of them. */
static DEFINE_MUTEX(nxd_tun_lock);

/* A consistent copy of @vol's tunables (for the superblock). */
void nxd_tun_get(struct nxd_vol *vol, struct nxd_tun *t)
{
	mutex_lock(&nxd_tun_lock);
	*t = vol->tun;
	mutex_unlock(&nxd_tun_lock);
}

/* Replace all of @vol's tunables, as one change against sysfs writes. */
void nxd_tun_put(struct nxd_vol *vol, const struct nxd_tun *t)
{
	mutex_lock(&nxd_tun_lock);
	vol->tun = *t;
	mutex_unlock(&nxd_tun_lock);
}

/*
 * The tunables a new table does not name: the live volume's on a reload,
 * else the ones its superblock stored (none stored: the defaults stay).
 * The superblock is where tunables persist; the table only overrides.
 */
void nxd_tun_merge(struct nxd_c *nc, bool vol_active)
{
	const struct nxd_tun_desc *d;
	struct nxd_tun t;
	unsigned int i;

	if (vol_active)
		nxd_tun_get(nc->vol, &t);
	else if (nc->sb.tun_valid)
		t = nc->sb.tun;
	else
		return;
	for (i = 0; i < NXD_TUN_NR; i++) {
		d = &nxd_tuns[i];
		if (!(nc->opt_given & BIT(i)))
			*nxd_tun_field(&nc->opt, d) = nxd_tun_val(&t, d);
	}
}

/* "write_threshold must be 0 to 1G": built once, by nxd_sysfs_init(). */
static char nxd_tun_errs[NXD_TUN_NR][NXD_TUN_RANGE_LEN + 32];

const char *nxd_tun_pair_err(const struct nxd_tun *t)
{
	if (t->low_wm > t->high_wm)
		return "low_watermark must not exceed high_watermark";
	if (t->auto_min_thr > t->auto_max_thr)
		return "auto_min_threshold must not exceed auto_max_threshold";
	return "stripe_size must be a multiple of 4096";
}

const char *nxd_tun_err(const struct nxd_tun_desc *d)
{
	return nxd_tun_errs[d - nxd_tuns];
}

/* ---- sysfs ---- */

struct nxd_attr {
	struct attribute attr;
	const struct nxd_tun_desc *tun;	/* or NULL: read-only, ->show */
	ssize_t (*show)(struct nxd_vol *vol, char *buf);
};

static struct nxd_vol *kobj_to_vol(struct kobject *k)
{
	return container_of(k, struct nxd_vol, kobj);
}

static ssize_t nxd_show_log_used_pct(struct nxd_vol *vol, char *buf)
{
	ssize_t r = -ENODEV;

	mutex_lock(&nxd_vols_lock);
	if (vol->active)
		r = sysfs_emit(buf, "%u\n", nxd_log_used_pct(vol->active));
	mutex_unlock(&nxd_vols_lock);
	return r;
}

static ssize_t nxd_show_state(struct nxd_vol *vol, char *buf)
{
	ssize_t r;

	mutex_lock(&nxd_vols_lock);
	if (!vol->active)
		r = sysfs_emit(buf, "inactive\n");
	else if (atomic_read(&vol->active->degraded))
		r = sysfs_emit(buf, "degraded\n");
	else
		r = sysfs_emit(buf, "%s\n", vol->active->running ? "ok" : "suspended");
	mutex_unlock(&nxd_vols_lock);
	return r;
}

static ssize_t nxd_show_events(struct nxd_vol *vol, char *buf)
{
	u64 n = 0;
	int i;

	for (i = 1; i < NXD_EV_NR; i++)
		n += atomic64_read(&vol->ev_count[i]);
	return sysfs_emit(buf, "%llu\n", n);
}

static ssize_t nxd_show_last_event(struct nxd_vol *vol, char *buf)
{
	return sysfs_emit(buf, "%s\n", nxd_event_name(atomic_read(&vol->ev_last)));
}

#define NXD_RO(_n)							\
	static struct nxd_attr nxd_attr_##_n = {			\
		.attr = { .name = #_n, .mode = 0444 },			\
		.show = nxd_show_##_n }

NXD_RO(log_used_pct);
NXD_RO(state);
NXD_RO(events);
NXD_RO(last_event);

/* One writable file per tunable, named from nxd_tuns[] by nxd_sysfs_init(). */
static struct nxd_attr nxd_tun_attrs[NXD_TUN_NR];

static struct attribute *nxd_attrs[] = {
	[NXD_TUN_NR] = &nxd_attr_log_used_pct.attr,
	&nxd_attr_state.attr,
	&nxd_attr_events.attr,
	&nxd_attr_last_event.attr,
	NULL,
};
ATTRIBUTE_GROUPS(nxd);

/* Before any volume exists (module init): the files' names and modes. */
void nxd_sysfs_init(void)
{
	char range[NXD_TUN_RANGE_LEN];
	unsigned int i;

	for (i = 0; i < NXD_TUN_NR; i++) {
		snprintf(nxd_tun_errs[i], sizeof(nxd_tun_errs[i]),
			 "%s must be %s", nxd_tuns[i].name,
			 nxd_tun_range(&nxd_tuns[i], range));
		nxd_tun_attrs[i].attr.name = nxd_tuns[i].name;
		nxd_tun_attrs[i].attr.mode = 0644;
		nxd_tun_attrs[i].tun = &nxd_tuns[i];
		nxd_attrs[i] = &nxd_tun_attrs[i].attr;
	}
}

static ssize_t nxd_attr_show(struct kobject *k, struct attribute *a, char *buf)
{
	struct nxd_attr *na = container_of(a, struct nxd_attr, attr);
	struct nxd_vol *vol = kobj_to_vol(k);
	char s[NXD_TUN_STR_LEN];
	u32 v;

	if (!na->tun)
		return na->show(vol, buf);
	v = READ_ONCE(*nxd_tun_field(&vol->tun, na->tun));
	return sysfs_emit(buf, "%s\n", nxd_tun_str(na->tun, v, s));
}

static ssize_t nxd_attr_store(struct kobject *k, struct attribute *a,
			      const char *buf, size_t len)
{
	struct nxd_attr *na = container_of(a, struct nxd_attr, attr);
	struct nxd_vol *vol = kobj_to_vol(k);
	struct nxd_tun t;
	char val[32];
	u32 v;
	int r;

	if (!na->tun)
		return -EPERM;
	if (len >= sizeof(val))
		return -EINVAL;
	memcpy(val, buf, len);
	val[len] = '\0';
	mutex_lock(&nxd_tun_lock);
	t = vol->tun;
	r = nxd_tun_parse(na->tun, strim(val), &v);
	if (!r) {
		/* The pairs are checked against each other. */
		*nxd_tun_field(&t, na->tun) = v;
		if (!nxd_tun_valid(&t))
			r = -EDOM;
	}
	/* Each field is read with READ_ONCE on the I/O path. */
	if (!r)
		WRITE_ONCE(*nxd_tun_field(&vol->tun, na->tun), v);
	mutex_unlock(&nxd_tun_lock);
	if (r) {
		DMWARN_LIMIT("%s: %s", dm_disk(vol->md)->disk_name,
			     r == -EDOM ? nxd_tun_pair_err(&t) :
			     nxd_tun_err(na->tun));
		return -EINVAL;
	}
	mutex_lock(&nxd_vols_lock);
	if (vol->active)
		nxd_destager_wake(vol->active);
	mutex_unlock(&nxd_vols_lock);
	return len;
}

static const struct sysfs_ops nxd_sysfs_ops = {
	.show = nxd_attr_show,
	.store = nxd_attr_store,
};

static void nxd_vol_release(struct kobject *k)
{
	struct nxd_vol *vol = kobj_to_vol(k);

	nxd_stats_free(vol);
	kfree(vol);
}

static const struct kobj_type nxd_vol_ktype = {
	.sysfs_ops = &nxd_sysfs_ops,
	.default_groups = nxd_groups,
	.release = nxd_vol_release,
};

int nxd_sysfs_add(struct nxd_vol *vol)
{
	return kobject_add(&vol->kobj, &disk_to_dev(dm_disk(vol->md))->kobj,
			   "nxd");
}

/*
 * From the event work (process context): wake poll(2)ers of events, and
 * of state when the volume degraded.  The directory goes away only when
 * the last table of the volume is destroyed, after its event work was
 * cancelled; it may not exist yet (added at the first resume).
 */
static void nxd_sysfs_notify(struct nxd_vol *vol, unsigned int pending)
{
	/* Pairs with the release in nxd_resume(): the kobject is added. */
	if (!smp_load_acquire(&vol->kobj_added))
		return;
	sysfs_notify(&vol->kobj, NULL, "events");
	if (pending & BIT(NXD_EV_DEGRADED))
		sysfs_notify(&vol->kobj, NULL, "state");
}

static void nxd_sysfs_del(struct nxd_vol *vol)
{
	if (vol->kobj_added)
		kobject_del(&vol->kobj);
	vol->kobj_added = false;
}

/*
 * Process context, never under a lock of ours: dm_table_event() takes a
 * mutex, and sysfs_notify() kernfs locks.  A table that is not (or no
 * longer) bound to its device has no event callback: dm_table_event()
 * does nothing then.
 */
void nxd_event_work(struct work_struct *w)
{
	struct nxd_c *nc = container_of(w, struct nxd_c, ev_work);
	unsigned int pending = atomic_xchg(&nc->ev_pending, 0);

	if (!pending)
		return;
	dm_table_event(nc->ti->table);
	nxd_sysfs_notify(nc->vol, pending);
}

/* ---- the volume list ---- */

struct nxd_vol *nxd_vol_get(struct dm_target *ti, const struct nxd_tun *tun)
{
	struct mapped_device *md = dm_table_get_md(ti->table);
	dev_t dev = disk_devt(dm_disk(md));
	struct nxd_vol *vol;

	mutex_lock(&nxd_vols_lock);
	list_for_each_entry(vol, &nxd_vols, node) {
		if (vol->dev == dev) {
			kobject_get(&vol->kobj);
			vol->ntables++;
			goto out;
		}
	}
	vol = kzalloc(sizeof(*vol), GFP_KERNEL);
	if (!vol)
		goto out;
	kobject_init(&vol->kobj, &nxd_vol_ktype);
	vol->md = md;
	vol->dev = dev;
	if (nxd_stats_alloc(vol)) {
		kobject_put(&vol->kobj);
		vol = NULL;
		goto out;
	}
	list_add_tail(&vol->node, &nxd_vols);
	vol->tun = *tun;
	vol->ntables = 1;
out:
	mutex_unlock(&nxd_vols_lock);
	return vol;
}

void nxd_vol_put(struct nxd_c *nc)
{
	struct nxd_vol *vol = nc->vol;
	bool last;

	/* Decided and unlisted under one lock: two dtrs never both miss it. */
	mutex_lock(&nxd_vols_lock);
	if (vol->active == nc)
		vol->active = NULL;
	last = !--vol->ntables;
	if (last)
		list_del(&vol->node);
	mutex_unlock(&nxd_vols_lock);
	if (last)
		nxd_sysfs_del(vol);
	kobject_put(&vol->kobj);
}
