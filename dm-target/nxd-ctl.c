// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd control device /dev/nxd-control: histogram and statistics per
 * volume, read-and-clear, volume list.  ABI in kernel/nxd_ioctl.h.
 */
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include <linux/capability.h>
#include <linux/slab.h>
#include <linux/kdev_t.h>
#include <linux/build_bug.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd ctl"

/* ABI: fixed sizes; read_threshold became reserved0 in place. */
static_assert(sizeof(struct nxd_ioc_vol) == 192);
static_assert(offsetof(struct nxd_ioc_vol, reserved0) == 164);

static int nxd_hdr_check(const struct nxd_ioc_hdr *h, size_t min_size)
{
	if (h->version != NXD_IOCTL_VERSION || h->size < min_size ||
	    h->reserved || (h->flags & ~NXD_IOC_F_RESET))
		return -EINVAL;
	if (strnlen(h->name, NXD_NAME_LEN) == NXD_NAME_LEN)
		return -EINVAL;
	return 0;
}

/* Under nxd_vols_lock. */
static struct nxd_vol *nxd_vol_find(const struct nxd_ioc_hdr *h)
{
	char name[DM_NAME_LEN];
	struct nxd_vol *vol;

	list_for_each_entry(vol, &nxd_vols, node) {
		if (h->dev) {
			if (vol->dev == new_decode_dev(h->dev))
				return vol;
			continue;
		}
		if (!dm_copy_name_and_uuid(vol->md, name, NULL) &&
		    !strcmp(name, h->name))
			return vol;
	}
	return NULL;
}

/* Copy the request in: the caller's size may be smaller or larger than ours. */
static int nxd_ioc_in(void __user *arg, void *k, size_t ksize, size_t min_size)
{
	struct nxd_ioc_hdr *h = k;
	u32 usize;

	if (get_user(usize, (u32 __user *)arg))
		return -EFAULT;
	if (usize < sizeof(*h))
		return -EINVAL;
	if (copy_from_user(k, arg, min_t(size_t, usize, ksize)))
		return -EFAULT;
	h->size = usize;
	return nxd_hdr_check(h, min_size);
}

static int nxd_ioc_out(void __user *arg, void *k, size_t ksize)
{
	struct nxd_ioc_hdr *h = k;
	size_t n = min_t(size_t, h->size, ksize);

	h->size = n;
	return copy_to_user(arg, k, n) ? -EFAULT : 0;
}

static long nxd_ioc_stats(void __user *arg)
{
	struct nxd_ioc_stats *st;
	struct nxd_vol *vol;
	int r;

	st = kvzalloc(sizeof(*st), GFP_KERNEL);
	if (!st)
		return -ENOMEM;
	r = nxd_ioc_in(arg, st, sizeof(*st), sizeof(st->hdr));
	if (r)
		goto out;
	if ((st->hdr.flags & NXD_IOC_F_RESET) && !capable(CAP_SYS_ADMIN)) {
		r = -EPERM;
		goto out;
	}
	memset(&st->c, 0, sizeof(st->c));
	memset(st->hist, 0, sizeof(st->hist));
	mutex_lock(&nxd_vols_lock);
	vol = nxd_vol_find(&st->hdr);
	if (vol) {
		nxd_stats_fill(vol, st, st->hdr.flags & NXD_IOC_F_RESET);
		if (vol->active)
			nxd_gauges_fill(vol->active, &st->c);
		st->hdr.dev = new_encode_dev(vol->dev);
	}
	mutex_unlock(&nxd_vols_lock);
	r = vol ? nxd_ioc_out(arg, st, sizeof(*st)) : -ENODEV;
out:
	kvfree(st);
	return r;
}

static long nxd_ioc_auto(void __user *arg)
{
	struct nxd_ioc_auto *ia;
	struct nxd_vol *vol;
	int r;

	ia = kvzalloc(sizeof(*ia), GFP_KERNEL);
	if (!ia)
		return -ENOMEM;
	r = nxd_ioc_in(arg, ia, sizeof(*ia), sizeof(ia->hdr));
	if (r)
		goto out;
	if (ia->hdr.flags) {
		r = -EINVAL;
		goto out;
	}
	memset((char *)ia + sizeof(ia->hdr), 0, sizeof(*ia) - sizeof(ia->hdr));
	mutex_lock(&nxd_vols_lock);
	vol = nxd_vol_find(&ia->hdr);
	if (vol) {
		ia->mode = READ_ONCE(vol->tun.mode);
		ia->hdr.dev = new_encode_dev(vol->dev);
		if (vol->active) {
			ia->active = 1;
			nxd_auto_fill(vol->active, ia);
		}
	}
	mutex_unlock(&nxd_vols_lock);
	r = vol ? nxd_ioc_out(arg, ia, sizeof(*ia)) : -ENODEV;
out:
	kvfree(ia);
	return r;
}

static long nxd_ioc_list(void __user *arg)
{
	struct nxd_ioc_list *l;
	struct nxd_vol *vol;
	int r;

	l = kvzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	r = nxd_ioc_in(arg, l, sizeof(*l), offsetof(struct nxd_ioc_list, vols));
	if (r)
		goto out;
	if (l->hdr.flags) {
		r = -EINVAL;
		goto out;
	}
	l->count = 0;
	l->total = 0;
	memset(l->vols, 0, sizeof(l->vols));
	mutex_lock(&nxd_vols_lock);
	list_for_each_entry(vol, &nxd_vols, node) {
		struct nxd_ioc_vol *v;

		l->total++;
		if (l->count == NXD_IOC_MAX_VOLS)
			continue;
		v = &l->vols[l->count++];
		v->dev = new_encode_dev(vol->dev);
		if (dm_copy_name_and_uuid(vol->md, v->name, NULL))
			v->name[0] = '\0';
		memcpy(v->vol_uuid, vol->vol_uuid, sizeof(v->vol_uuid));
		v->sectors = get_capacity(dm_disk(vol->md));
		v->write_threshold = READ_ONCE(vol->tun.write_threshold);
		v->reserved0 = 0;	/* was read_threshold */
		v->mode = READ_ONCE(vol->tun.mode);
	}
	mutex_unlock(&nxd_vols_lock);
	r = nxd_ioc_out(arg, l, sizeof(*l));
out:
	kvfree(l);
	return r;
}

static long nxd_ctl_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	void __user *p = (void __user *)arg;

	/* The size in the number may differ by ABI version: hdr.size rules. */
	if (_IOC_TYPE(cmd) != NXD_IOC_MAGIC ||
	    _IOC_DIR(cmd) != (_IOC_READ | _IOC_WRITE))
		return -ENOTTY;
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(NXD_IOC_GET_STATS):
		return nxd_ioc_stats(p);
	case _IOC_NR(NXD_IOC_LIST):
		return nxd_ioc_list(p);
	case _IOC_NR(NXD_IOC_GET_AUTO):
		return nxd_ioc_auto(p);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations nxd_ctl_fops = {
	.owner = THIS_MODULE,
	.open = nonseekable_open,
	.unlocked_ioctl = nxd_ctl_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice nxd_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = NXD_CONTROL_NAME,
	.nodename = NXD_CONTROL_NAME,
	.mode = 0640,
	.fops = &nxd_ctl_fops,
};

int nxd_ctl_init(void)
{
	return misc_register(&nxd_misc);
}

void nxd_ctl_exit(void)
{
	misc_deregister(&nxd_misc);
}
