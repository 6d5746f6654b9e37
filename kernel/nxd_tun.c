// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd tunables: the one table of names, defaults and ranges, and its
 * parser and printer.  Built into dm-nxd.ko, nxdctl and userspace tests;
 * uses only what nxd_shim.h provides.
 */
#include "nxd_tun.h"
#include "nxd_route.h"
#include "nxd_format.h"

#define NXD_TUN(_name, _field, _kind, _def, _min, _max) {		\
	.name = _name, .off = offsetof(struct nxd_tun, _field),		\
	.kind = _kind, .def = _def, .min = _min, .max = _max }

const struct nxd_tun_desc nxd_tuns[NXD_TUN_NR] = {
	NXD_TUN("write_threshold", write_threshold, NXD_TUN_BYTES,
		64 * 1024, 0, 1U << 30),
	NXD_TUN("mode", mode, NXD_TUN_MODE,
		NXD_MODE_AUTO, 0, NXD_MODE_MAX - 1),
	NXD_TUN("low_watermark", low_wm, NXD_TUN_NUM, 25, 0, 100),
	NXD_TUN("high_watermark", high_wm, NXD_TUN_NUM, 75, 0, 100),
	/* MB/s; 0 is unlimited. */
	NXD_TUN("destage_rate", destage_rate, NXD_TUN_NUM, 0, 0, 1000000),
	NXD_TUN("ssd_discard", ssd_discard, NXD_TUN_NUM, 1, 0, 1),
	NXD_TUN("drain_on_suspend", drain_on_suspend, NXD_TUN_NUM, 0, 0, 1),
	/* Mode adaptive: the threshold's bounds, stream and stripe sizes. */
	NXD_TUN("auto_min_threshold", auto_min_thr, NXD_TUN_BYTES,
		4096, 4096, 1U << 30),
	NXD_TUN("auto_max_threshold", auto_max_thr, NXD_TUN_BYTES,
		1U << 20, 4096, 1U << 30),
	NXD_TUN("stream_min", stream_min, NXD_TUN_BYTES,
		4U << 20, 4096, 1U << 30),
	/* 0: the HDD's io_opt. */
	NXD_TUN("stripe_size", stripe_size, NXD_TUN_BYTES, 0, 0, 1U << 30),
	/*
	 * % of the HDD's time the destager leaves to foreground I/O at and
	 * above high_watermark, a full log included: who pays when the log
	 * fills.  At most 90: the log must still drain.
	 */
	NXD_TUN("stream_share", stream_share, NXD_TUN_NUM, 0, 0, 90),
};

void nxd_tun_defaults(struct nxd_tun *t)
{
	unsigned int i;

	for (i = 0; i < NXD_TUN_NR; i++)
		*nxd_tun_field(t, &nxd_tuns[i]) = nxd_tuns[i].def;
}

/* Keys were always matched without case in the table line. */
const struct nxd_tun_desc *nxd_tun_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < NXD_TUN_NR; i++)
		if (!strcasecmp(name, nxd_tuns[i].name))
			return &nxd_tuns[i];
	return NULL;
}

int nxd_tun_parse(const struct nxd_tun_desc *d, const char *s, u32 *v)
{
	enum nxd_mode m;
	u64 x;
	int r;

	if (d->kind == NXD_TUN_MODE) {
		r = nxd_mode_parse(s, &m);
		if (!r)
			*v = m;
		return r;
	}
	r = nxd_parse_size(s, &x);
	if (r)
		return r;
	if (x < d->min || x > d->max)
		return -ERANGE;
	*v = x;
	return 0;
}

int nxd_tun_set(struct nxd_tun *t, const char *key, const char *val)
{
	const struct nxd_tun_desc *d = nxd_tun_find(key);

	if (!d)
		return -ENOENT;
	return nxd_tun_parse(d, val, nxd_tun_field(t, d));
}

const char *nxd_tun_str(const struct nxd_tun_desc *d, u32 v, char *buf)
{
	if (d->kind == NXD_TUN_MODE)
		return nxd_mode_name(v);
	snprintf(buf, NXD_TUN_STR_LEN, "%u", v);
	return buf;
}

/* @v with the largest K/M/G suffix that divides it exactly. */
static int nxd_tun_size_str(char *buf, size_t len, u32 v)
{
	static const char sfx[] = "GMK";
	unsigned int i;

	for (i = 0; v && i < 3; i++)
		if (!(v & ((1U << (10 * (3 - i))) - 1)))
			return snprintf(buf, len, "%u%c", v >> (10 * (3 - i)),
					sfx[i]);
	return snprintf(buf, len, "%u", v);
}

const char *nxd_tun_range(const struct nxd_tun_desc *d, char *buf)
{
	size_t len = NXD_TUN_RANGE_LEN, n = 0;
	u32 i;

	if (d->kind == NXD_TUN_MODE) {
		for (i = d->min; i <= d->max && n < len; i++)
			n += snprintf(buf + n, len - n, "%s%s",
				      i == d->min ? "" :
				      i == d->max ? " or " : ", ",
				      nxd_mode_name(i));
		return buf;
	}
	if (d->kind == NXD_TUN_BYTES) {
		n = nxd_tun_size_str(buf, len, d->min);
		n += snprintf(buf + n, len - n, " to ");
		nxd_tun_size_str(buf + n, len - n, d->max);
		return buf;
	}
	snprintf(buf, len, "%u to %u", d->min, d->max);
	return buf;
}

bool nxd_tun_valid(const struct nxd_tun *t)
{
	unsigned int i;
	u32 v;

	for (i = 0; i < NXD_TUN_NR; i++) {
		v = nxd_tun_val(t, &nxd_tuns[i]);
		if (v < nxd_tuns[i].min || v > nxd_tuns[i].max)
			return false;
	}
	return t->low_wm <= t->high_wm && t->auto_min_thr <= t->auto_max_thr &&
	       !(t->stripe_size & (NXD_BLOCK_SIZE - 1));
}
