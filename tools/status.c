// SPDX-License-Identifier: GPL-2.0
/* nxdctl's health model of a volume (status.h). */
#include <string.h>

#include "fmt.h"
#include "status.h"

void nxdctl_status_from_vol(struct nxdctl_status *s,
			    const struct nxd_ioc_vol *v)
{
	memset(s, 0, sizeof(*s));
	memcpy(s->name, v->name, NXD_NAME_LEN);
	s->name[NXD_NAME_LEN] = 0;
	nxdctl_decode_dev(v->dev, &s->major, &s->minor);
	memcpy(s->uuid, v->vol_uuid, 16);
	s->size_bytes = v->sectors << 9;
	s->write_threshold = v->write_threshold;
	s->mode = v->mode;
	s->destage_limit = -1;
}

uint64_t nxdctl_status_log_bytes(const struct nxdctl_status *s)
{
	return s->have_stats ? s->st.c.log_blocks * 4096 : 0;
}

uint64_t nxdctl_status_log_used_bytes(const struct nxdctl_status *s)
{
	return s->have_stats ? s->st.c.log_used_blocks * 4096 : 0;
}

double nxdctl_status_log_pct(const struct nxdctl_status *s)
{
	if (!s->have_stats || !s->st.c.log_blocks)
		return 0;
	return 100.0 * (double)s->st.c.log_used_blocks /
	       (double)s->st.c.log_blocks;
}

uint64_t nxdctl_status_dirty_bytes(const struct nxdctl_status *s)
{
	return s->have_stats ? s->st.c.index_entries * 4096 : 0;
}

uint64_t nxdctl_status_errors(const struct nxdctl_status *s)
{
	return s->have_stats ? s->st.c.ssd_errors + s->st.c.hdd_errors : 0;
}

double nxdctl_status_destage_bps(const struct nxdctl_status *s)
{
	uint64_t now, prev;

	if (!s->have_stats || !(s->interval_s > 0))
		return -1;
	now = s->st.c.destaged_bytes;
	prev = s->prev.destaged_bytes;
	/* A reset in between: no rate. */
	if (now < prev)
		return -1;
	return (double)(now - prev) / s->interval_s;
}

const char *nxdctl_status_state(const struct nxdctl_status *s)
{
	if (s->state[0])
		return s->state;
	if (s->have_stats && s->st.c.degraded)
		return "degraded";
	return "unknown";
}
