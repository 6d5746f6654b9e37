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
#include <linux/sizes.h>

#include "nxd.h"

/* Guards the volume list, vol->active and nxd-target.c's table list. */
DEFINE_MUTEX(nxd_vols_lock);
LIST_HEAD(nxd_vols);

/* ---- tunables ---- */

const struct nxd_tun nxd_default_tun = {
	.write_threshold = 64 * 1024,
	.mode = NXD_MODE_AUTO,
	.low_wm = 25,
	.high_wm = 75,
	.destage_rate = 0,
	.ssd_discard = 1,
	.drain_on_suspend = 0,
};

/* Serialises writes of a volume's tunables, and copies of all of them. */
static DEFINE_MUTEX(nxd_tun_lock);

static int nxd_parse_u32(const char *s, u32 min, u32 max, u32 *v)
{
	u64 x;
	int r = nxd_parse_size(s, &x);

	if (r)
		return r;
	if (x < min || x > max)
		return -ERANGE;
	*v = x;
	return 0;
}

#define NXD_MAX_THRESHOLD	SZ_1G

/* Apply one key/value option; shared by the table parser and sysfs. */
int nxd_tun_set(struct nxd_tun *t, const char *key, const char *val)
{
	enum nxd_mode m;
	int r;

	if (!strcasecmp(key, "write_threshold"))
		return nxd_parse_u32(val, 0, NXD_MAX_THRESHOLD, &t->write_threshold);
	if (!strcasecmp(key, "mode")) {
		r = nxd_mode_parse(val, &m);
		if (!r)
			t->mode = m;
		return r;
	}
	if (!strcasecmp(key, "low_watermark"))
		return nxd_parse_u32(val, 0, 100, &t->low_wm);
	if (!strcasecmp(key, "high_watermark"))
		return nxd_parse_u32(val, 0, 100, &t->high_wm);
	if (!strcasecmp(key, "destage_rate"))
		return nxd_parse_u32(val, 0, 1000000, &t->destage_rate);
	if (!strcasecmp(key, "ssd_discard"))
		return nxd_parse_u32(val, 0, 1, &t->ssd_discard);
	if (!strcasecmp(key, "drain_on_suspend"))
		return nxd_parse_u32(val, 0, 1, &t->drain_on_suspend);
	return -ENOENT;
}

/* A consistent copy of @vol's tunables (for the superblock). */
void nxd_tun_get(struct nxd_vol *vol, struct nxd_tun *t)
{
	mutex_lock(&nxd_tun_lock);
	*t = vol->tun;
	mutex_unlock(&nxd_tun_lock);
}

/* ---- sysfs ---- */

struct nxd_attr {
	struct attribute attr;
	const char *key;	/* tunable name, or NULL for read-only */
	ssize_t (*show)(struct nxd_vol *vol, char *buf);
};

static struct nxd_vol *kobj_to_vol(struct kobject *k)
{
	return container_of(k, struct nxd_vol, kobj);
}

#define NXD_TUN_SHOW(field)						\
static ssize_t nxd_show_##field(struct nxd_vol *vol, char *buf)	\
{									\
	return sysfs_emit(buf, "%u\n", READ_ONCE(vol->tun.field));	\
}

NXD_TUN_SHOW(write_threshold)
NXD_TUN_SHOW(low_wm)
NXD_TUN_SHOW(high_wm)
NXD_TUN_SHOW(destage_rate)
NXD_TUN_SHOW(ssd_discard)
NXD_TUN_SHOW(drain_on_suspend)

static ssize_t nxd_show_mode(struct nxd_vol *vol, char *buf)
{
	return sysfs_emit(buf, "%s\n", nxd_mode_name(READ_ONCE(vol->tun.mode)));
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

#define NXD_RW(_n, field)						\
	static struct nxd_attr nxd_attr_##_n = {			\
		.attr = { .name = #_n, .mode = 0644 },			\
		.key = #_n, .show = nxd_show_##field }
#define NXD_RO(_n)							\
	static struct nxd_attr nxd_attr_##_n = {			\
		.attr = { .name = #_n, .mode = 0444 },			\
		.show = nxd_show_##_n }

NXD_RW(write_threshold, write_threshold);
NXD_RW(mode, mode);
NXD_RW(low_watermark, low_wm);
NXD_RW(high_watermark, high_wm);
NXD_RW(destage_rate, destage_rate);
NXD_RW(ssd_discard, ssd_discard);
NXD_RW(drain_on_suspend, drain_on_suspend);
NXD_RO(log_used_pct);
NXD_RO(state);
NXD_RO(events);
NXD_RO(last_event);

static struct attribute *nxd_attrs[] = {
	&nxd_attr_write_threshold.attr,
	&nxd_attr_mode.attr,
	&nxd_attr_low_watermark.attr,
	&nxd_attr_high_watermark.attr,
	&nxd_attr_destage_rate.attr,
	&nxd_attr_ssd_discard.attr,
	&nxd_attr_drain_on_suspend.attr,
	&nxd_attr_log_used_pct.attr,
	&nxd_attr_state.attr,
	&nxd_attr_events.attr,
	&nxd_attr_last_event.attr,
	NULL,
};
ATTRIBUTE_GROUPS(nxd);

static ssize_t nxd_attr_show(struct kobject *k, struct attribute *a, char *buf)
{
	return container_of(a, struct nxd_attr, attr)->show(kobj_to_vol(k), buf);
}

static ssize_t nxd_attr_store(struct kobject *k, struct attribute *a,
			      const char *buf, size_t len)
{
	struct nxd_attr *na = container_of(a, struct nxd_attr, attr);
	struct nxd_vol *vol = kobj_to_vol(k);
	struct nxd_tun t;
	char val[32];
	int r;

	if (!na->key)
		return -EPERM;
	if (len >= sizeof(val))
		return -EINVAL;
	memcpy(val, buf, len);
	val[len] = '\0';
	mutex_lock(&nxd_tun_lock);
	t = vol->tun;
	r = nxd_tun_set(&t, na->key, strim(val));
	if (!r && t.low_wm > t.high_wm)
		r = -EINVAL;
	if (!r) {
		/* Each field is read with READ_ONCE on the I/O path. */
		WRITE_ONCE(vol->tun.write_threshold, t.write_threshold);
		WRITE_ONCE(vol->tun.mode, t.mode);
		WRITE_ONCE(vol->tun.low_wm, t.low_wm);
		WRITE_ONCE(vol->tun.high_wm, t.high_wm);
		WRITE_ONCE(vol->tun.destage_rate, t.destage_rate);
		WRITE_ONCE(vol->tun.ssd_discard, t.ssd_discard);
		WRITE_ONCE(vol->tun.drain_on_suspend, t.drain_on_suspend);
	}
	mutex_unlock(&nxd_tun_lock);
	if (r)
		return -EINVAL;
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
