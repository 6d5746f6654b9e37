// SPDX-License-Identifier: GPL-2.0
/* nxdctl's health model of a volume (status.h). */
#include <stdio.h>
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
	s->low_wm = -1;
	s->high_wm = -1;
	s->stream_share = -1;
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
	if (s->missing)
		return "inactive";
	if (s->state[0])
		return s->state;
	if (s->have_stats && s->st.c.degraded)
		return "degraded";
	return "unknown";
}

enum nxdctl_health nxdctl_status_health(const struct nxdctl_status *s)
{
	if (s->missing)
		return NXDCTL_HEALTH_MISSING;
	if (!strcmp(nxdctl_status_state(s), "degraded") ||
	    (s->have_stats && s->st.c.acked_lost))
		return NXDCTL_HEALTH_DEGRADED;
	return NXDCTL_HEALTH_OK;
}

enum nxdctl_health nxdctl_status_worst(const struct nxdctl_status *s,
				       unsigned int n)
{
	enum nxdctl_health h, w = NXDCTL_HEALTH_OK;
	unsigned int i;

	for (i = 0; i < n; i++) {
		h = nxdctl_status_health(&s[i]);
		if (h > w)
			w = h;
	}
	return w;
}

/* The ways out the admin guide gives (Failure cookbook, Monitoring). */
bool nxdctl_status_action(const struct nxdctl_status *s, char *buf,
			  size_t len)
{
	const char *n = s->name;

	buf[0] = 0;
	if (s->missing) {
		snprintf(buf, len, "configured but not active: nxdctl assemble "
			 "--all (with --dry-run it says which half is missing)");
	} else if (s->have_stats && s->st.c.acked_lost) {
		snprintf(buf, len, "acknowledged log writes were lost and "
			 "flushes fail: check the file system (xfs_repair, "
			 "e2fsck), replace the SSD, then reload the table "
			 "(nxdctl stop %s; nxdctl assemble), which clears it",
			 n);
	} else if (nxdctl_status_health(s) != NXDCTL_HEALTH_DEGRADED) {
		return false;
	} else if (s->have_stats && s->st.c.log_abandoned_blocks) {
		snprintf(buf, len, "the SSD failed and its log was given up "
			 "(%llu blocks lost): the volume runs on the HDD "
			 "alone; check the file system, then nxdctl "
			 "replace-ssd %s NEW_SSD (or detach %s)",
			 (unsigned long long)s->st.c.log_abandoned_blocks,
			 n, n);
	} else if (s->have_stats && s->st.c.index_entries) {
		snprintf(buf, len, "the SSD failed: its frozen log holds "
			 "%llu blocks not yet on the HDD.  If the SSD still "
			 "reads, the destager copies them (drain_done when it "
			 "is empty): replace the SSD online (nxdctl "
			 "replace-ssd %s NEW_SSD) or fix its path and reload "
			 "the same table.  If it cannot be read (dirty does "
			 "not fall, ssd_errors rise), give the log up online, "
			 "losing those writes: nxdctl replace-ssd %s NEW_SSD "
			 "--accept-log-loss, or nxdctl detach %s "
			 "--accept-log-loss",
			 (unsigned long long)s->st.c.index_entries, n, n, n);
	} else {
		snprintf(buf, len, "the SSD failed and its log is on the HDD: "
			 "replace the SSD online (nxdctl replace-ssd %s "
			 "NEW_SSD) or fix its path and reload the same table",
			 n);
	}
	return true;
}
