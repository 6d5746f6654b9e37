// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd write routing (log or HDD) and mode names, size histogram
 * buckets, and the size parser of the table line and sysfs.  Built into
 * dm-nxd.ko and into userspace tests; uses only what nxd_shim.h provides.
 */
#include "nxd_route.h"
#include "nxd_format.h"

/* ---- routing ---- */

bool nxd_route_write_to_log(u64 sector, u64 bytes, u32 threshold,
			    u32 io_min, enum nxd_mode mode)
{
	switch (mode) {
	case NXD_MODE_PASSTHROUGH:
		return false;
	case NXD_MODE_LOG_ALL:
		return true;
	case NXD_MODE_AUTO:
	case NXD_MODE_ADAPTIVE:
		break;
	default:
		return false;
	}
	if (!threshold)
		return false;
	if (bytes <= threshold)
		return true;
	return !nxd_route_aligned(sector, bytes, io_min);
}

bool nxd_route_aligned(u64 sector, u64 bytes, u32 io_min)
{
	if ((sector & (NXD_SECTORS_PER_BLOCK - 1)) ||
	    (bytes & (NXD_BLOCK_SIZE - 1)))
		return false;
	if (io_min > NXD_BLOCK_SIZE &&
	    (nxd_rem_u64(sector << 9, io_min) || nxd_rem_u64(bytes, io_min)))
		return false;
	return true;
}

u32 nxd_pace_duty(u32 pct, u32 low, u32 high, u32 min_duty, u32 max_duty)
{
	if (max_duty > 1000)
		max_duty = 1000;
	if (!max_duty)
		max_duty = 1;	/* the log must still drain */
	if (min_duty > max_duty)
		min_duty = max_duty;
	if (!min_duty)
		min_duty = 1;
	if (pct >= high)
		return max_duty;
	if (pct <= low)
		return min_duty;
	/* low < pct < high: no division by zero, and pct - low < high - low. */
	return min_duty + (max_duty - min_duty) * (pct - low) / (high - low);
}

u32 nxd_pace_pause_ms(u32 busy_ms, u32 duty)
{
	if (duty >= 1000)
		return 0;
	if (!duty)
		duty = 1;
	/* Bounded so that the product fits in 32 bits (no 64-bit division). */
	if (busy_ms > 1000000)
		busy_ms = 1000000;
	return busy_ms * (1000 - duty) / duty;
}

u8 nxd_block_mask(u64 block, u64 start, u64 end)
{
	u64 lo = block * NXD_SECTORS_PER_BLOCK, hi = lo + NXD_SECTORS_PER_BLOCK;

	if (start > lo)
		lo = start;
	if (end < hi)
		hi = end;
	if (lo >= hi)
		return 0;
	return (u8)(((1U << (hi - lo)) - 1) << (lo % NXD_SECTORS_PER_BLOCK));
}

static const char *const nxd_mode_names[NXD_MODE_MAX] = {
	[NXD_MODE_AUTO] = "auto",
	[NXD_MODE_PASSTHROUGH] = "passthrough",
	[NXD_MODE_LOG_ALL] = "log_all",
	[NXD_MODE_ADAPTIVE] = "adaptive",
};

const char *nxd_mode_name(enum nxd_mode m)
{
	if ((unsigned int)m >= NXD_MODE_MAX)
		return "unknown";
	return nxd_mode_names[m];
}

int nxd_mode_parse(const char *s, enum nxd_mode *m)
{
	unsigned int i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < NXD_MODE_MAX; i++) {
		if (!strcmp(s, nxd_mode_names[i])) {
			*m = (enum nxd_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- histogram ---- */

const char *const nxd_hist_labels[NXD_HIST_BUCKETS] = {
	"< 4K", "4K", "4K+1 - 8K", "8K+1 - 16K", "16K+1 - 32K",
	"32K+1 - 64K", "64K+1 - 128K", "128K+1 - 256K", "256K+1 - 512K",
	"512K+1 - 1M", "1M+1 - 2M", "2M+1 - 4M", "4M+1 - 8M", "8M+1 - 16M",
	"16M+1 - 32M", "> 32M",
};

unsigned int nxd_hist_bucket(u64 bytes)
{
	if (bytes < 4096)
		return 0;
	if (bytes == 4096)
		return 1;
	if (bytes > (32ULL << 20))
		return NXD_HIST_BUCKETS - 1;
	/*
	 * (2^(k-1), 2^k] for k = 13..25 maps to bucket k - 11; k is
	 * ceil(log2(bytes)) = 64 - clz(bytes - 1), and bytes - 1 >= 4096.
	 */
	return 64 - __builtin_clzll(bytes - 1) - 11;
}

/* ---- size parser ---- */

int nxd_parse_size(const char *s, u64 *out)
{
	unsigned int shift = 0;
	const char *p;
	u64 v = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (p = s; *p >= '0' && *p <= '9'; p++)
		;
	switch (*p) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (shift && p[1])
		return -EINVAL;

	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned int d = *s - '0';

		if (v > (NXD_U64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v > (NXD_U64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}
