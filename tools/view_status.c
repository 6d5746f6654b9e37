// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl's views of the health model (status.h): the status report, the
 * volume list with health (libsmartcols), and both as JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <libsmartcols.h>

#include "../kernel/nxd_core.h"
#include "fmt.h"
#include "json.h"
#include "view.h"

static void dev_line(FILE *f, const char *what, const char *dev,
		     const char *id)
{
	fprintf(f, "  %-10s %s", what, dev[0] ? dev : "?");
	if (id[0])
		fprintf(f, " (%s)", id);
	fputc('\n', f);
}

void nxdctl_print_status(FILE *f, const struct nxdctl_status *s)
{
	const struct nxd_ioc_counters *c = &s->st.c;
	char a[32], b[32], u[40], act[1024];
	double bps;

	nxdctl_fmt_uuid(u, s->uuid);
	nxdctl_fmt_human(a, sizeof(a), s->size_bytes);
	fprintf(f, "%s: %s\n", s->name, nxdctl_status_state(s));
	if (nxdctl_status_action(s, act, sizeof(act)))
		fprintf(f, "  %-10s %s\n", "action", act);
	if (s->missing) {
		fprintf(f, "  %-10s UUID %s, in the configuration file, not "
			"active\n", "volume", u);
		return;
	}
	fprintf(f, "  %-10s %u:%u, %s, UUID %s\n", "volume", s->major,
		s->minor, a, u);
	dev_line(f, "HDD", s->hdd, s->hdd_id);
	dev_line(f, "SSD", s->ssd, s->ssd_id);
	if (s->owner_known)
		fprintf(f, "  %-10s %s\n", "owner", s->owner[0] ? s->owner :
			"none");
	if (!s->have_stats) {
		fprintf(f, "  (no statistics: %s)\n", "dm-nxd did not answer");
		return;
	}
	nxdctl_fmt_human(a, sizeof(a), nxdctl_status_log_used_bytes(s));
	nxdctl_fmt_human(b, sizeof(b), nxdctl_status_log_bytes(s));
	fprintf(f, "  %-10s %.1f%% used (%s of %s)\n", "log",
		nxdctl_status_log_pct(s), a, b);
	nxdctl_fmt_human(a, sizeof(a), nxdctl_status_dirty_bytes(s));
	fprintf(f, "  %-10s %" PRIu64 " blocks logged and not yet on the HDD "
		"(up to %s)\n", "dirty", (uint64_t)c->index_entries, a);
	fprintf(f, "  %-10s ", "destage");
	bps = nxdctl_status_destage_bps(s);
	if (bps >= 0)
		fprintf(f, "%.1f MiB/s over the last %.1f s", bps / 1048576.0,
			s->interval_s);
	else
		fputs("rate not measured", f);
	if (s->destage_limit > 0)
		fprintf(f, " (limit %" PRId64 " MiB/s)", s->destage_limit);
	else if (!s->destage_limit)
		fputs(" (no limit)", f);
	nxdctl_fmt_human(a, sizeof(a), c->destaged_bytes);
	fprintf(f, "; %s in all\n", a);
	fprintf(f, "  %-10s %" PRIu64 " logged, %" PRIu64 " to the HDD, %"
		PRIu64 " around a full log\n", "writes",
		(uint64_t)c->writes_logged, (uint64_t)c->writes_direct,
		(uint64_t)c->writes_around_full);
	fprintf(f, "  %-10s SSD %" PRIu64 ", HDD %" PRIu64 "%s\n", "errors",
		(uint64_t)c->ssd_errors, (uint64_t)c->hdd_errors,
		c->acked_lost ? "; acknowledged log writes LOST, flushes fail" : "");
	nxdctl_fmt_human(a, sizeof(a), c->index_bytes);
	fprintf(f, "  %-10s %s (index)\n", "memory", a);
	nxdctl_fmt_size(a, sizeof(a), s->write_threshold);
	fprintf(f, "  %-10s write threshold %s, mode %s\n", "routing", a,
		nxd_mode_name(s->mode));
	fprintf(f, "  %-10s %" PRIu64 " segments, %" PRIu64 " blocks in %.1f "
		"ms at activation\n", "recovery",
		(uint64_t)c->recovered_segments, (uint64_t)c->recovered_blocks,
		c->recovery_us / 1000.0);
}

static void json_vol(struct jw *j, const struct nxdctl_status *s, bool full)
{
	const struct nxd_ioc_counters *c = &s->st.c;
	char u[40], act[1024];
	double bps;

	nxdctl_fmt_uuid(u, s->uuid);
	jw_open(j, NULL, '{');
	jw_str(j, "name", s->name);
	if (s->missing) {
		jw_str(j, "state", nxdctl_status_state(s));
		jw_str(j, "uuid", u);
		jw_bool(j, "active", false);
		if (full && nxdctl_status_action(s, act, sizeof(act)))
			jw_str(j, "action", act);
		jw_close(j, '}');
		return;
	}
	jw_u64(j, "major", s->major);
	jw_u64(j, "minor", s->minor);
	jw_str(j, "state", nxdctl_status_state(s));
	jw_u64(j, "sectors", s->size_bytes >> 9);
	jw_u64(j, "size_bytes", s->size_bytes);
	jw_u64(j, "write_threshold", s->write_threshold);
	jw_str(j, "mode", nxd_mode_name(s->mode));
	jw_str(j, "uuid", u);
	jw_bool(j, "active", true);
	if (s->owner_known)
		jw_str(j, "owner", s->owner);
	else
		jw_null(j, "owner");
	if (full) {
		if (nxdctl_status_action(s, act, sizeof(act)))
			jw_str(j, "action", act);
		jw_str(j, "hdd", s->hdd);
		jw_str(j, "ssd", s->ssd);
		jw_str(j, "hdd_by_id", s->hdd_id);
		jw_str(j, "ssd_by_id", s->ssd_id);
		if (s->destage_limit >= 0)
			jw_i64(j, "destage_rate_limit_mib_s", s->destage_limit);
	}
	if (s->have_stats) {
		jw_u64(j, "log_bytes", nxdctl_status_log_bytes(s));
		jw_u64(j, "log_used_bytes", nxdctl_status_log_used_bytes(s));
		jw_double(j, "log_used_pct", nxdctl_status_log_pct(s));
		jw_u64(j, "dirty_blocks", c->index_entries);
		jw_u64(j, "dirty_bytes_max", nxdctl_status_dirty_bytes(s));
		jw_u64(j, "ssd_errors", c->ssd_errors);
		jw_u64(j, "hdd_errors", c->hdd_errors);
		jw_bool(j, "acked_lost", c->acked_lost);
		jw_u64(j, "index_bytes", c->index_bytes);
	}
	if (full && s->have_stats) {
		bps = nxdctl_status_destage_bps(s);
		if (bps >= 0) {
			jw_double(j, "destage_bytes_per_s", bps);
			jw_double(j, "interval_s", s->interval_s);
		} else {
			jw_null(j, "destage_bytes_per_s");
		}
		jw_u64(j, "destaged_bytes", c->destaged_bytes);
		jw_u64(j, "writes_logged", c->writes_logged);
		jw_u64(j, "writes_direct", c->writes_direct);
		jw_u64(j, "writes_around_full", c->writes_around_full);
		jw_u64(j, "recovered_segments", c->recovered_segments);
		jw_u64(j, "recovered_blocks", c->recovered_blocks);
		jw_u64(j, "recovery_us", c->recovery_us);
	}
	jw_close(j, '}');
}

/* { "@key": @val, "volumes": [ json_vol()... ] } */
static void json_vols(FILE *f, const struct nxdctl_status *s,
		      unsigned int n, const char *key, uint64_t val, bool full)
{
	unsigned int i;
	struct jw j;

	jw_start(&j, f, true);
	jw_open(&j, NULL, '{');
	jw_u64(&j, key, val);
	jw_open(&j, "volumes", '[');
	for (i = 0; i < n; i++)
		json_vol(&j, &s[i], full);
	jw_close(&j, ']');
	jw_close(&j, '}');
}

void nxdctl_json_status(FILE *f, const struct nxdctl_status *s,
			unsigned int n, uint64_t time)
{
	json_vols(f, s, n, "time", time, true);
}

int nxdctl_print_health(FILE *f, const struct nxdctl_status *s,
			unsigned int n, unsigned int total, bool json)
{
	static const char *const cols[] = {
		"NAME", "MAJ:MIN", "SIZE", "STATE", "LOG_USED", "DIRTY",
		"ERRORS", "WRITE_THR", "MODE", "OWNER", "UUID",
	};
	struct libscols_table *tb;
	unsigned int i, k;
	char buf[64];
	int rc = 0;

	if (json) {
		json_vols(f, s, n, "total", total, false);
		return 0;
	}
	tb = scols_new_table();
	if (!tb)
		return -ENOMEM;
	scols_table_set_stream(tb, f);
	for (i = 0; i < ARRAY_SIZE_NXDCTL(cols) && !rc; i++)
		rc = nxdctl_add_col(tb, cols[i], i == 2 || (i >= 4 && i <= 7));
	for (i = 0; i < n && !rc; i++) {
		struct libscols_line *ln = scols_table_new_line(tb, NULL);
		const struct nxdctl_status *v = &s[i];

		if (!ln) {
			rc = -ENOMEM;
			break;
		}
		rc |= scols_line_set_data(ln, 0, v->name);
		if (v->missing) {
			/* Configured, not active: its name and UUID only. */
			for (k = 1; k < ARRAY_SIZE_NXDCTL(cols) - 1; k++)
				rc |= scols_line_set_data(ln, k, k == 3 ?
					nxdctl_status_state(v) : "-");
			nxdctl_fmt_uuid(buf, v->uuid);
			rc |= scols_line_set_data(ln, k, buf);
			continue;
		}
		snprintf(buf, sizeof(buf), "%u:%u", v->major, v->minor);
		rc |= scols_line_set_data(ln, 1, buf);
		nxdctl_fmt_human(buf, sizeof(buf), v->size_bytes);
		rc |= scols_line_set_data(ln, 2, buf);
		rc |= scols_line_set_data(ln, 3, v->state[0] || v->have_stats ?
					  nxdctl_status_state(v) : "-");
		if (v->have_stats) {
			snprintf(buf, sizeof(buf), "%.1f%%",
				 nxdctl_status_log_pct(v));
			rc |= scols_line_set_data(ln, 4, buf);
			nxdctl_fmt_human(buf, sizeof(buf),
					 nxdctl_status_dirty_bytes(v));
			rc |= scols_line_set_data(ln, 5, buf);
			snprintf(buf, sizeof(buf), "%" PRIu64,
				 nxdctl_status_errors(v));
			rc |= scols_line_set_data(ln, 6, buf);
		} else {
			rc |= scols_line_set_data(ln, 4, "-");
			rc |= scols_line_set_data(ln, 5, "-");
			rc |= scols_line_set_data(ln, 6, "-");
		}
		nxdctl_fmt_size(buf, sizeof(buf), v->write_threshold);
		rc |= scols_line_set_data(ln, 7, buf);
		rc |= scols_line_set_data(ln, 8, nxd_mode_name(v->mode));
		rc |= scols_line_set_data(ln, 9, !v->owner_known ? "?" :
					  v->owner[0] ? v->owner : "-");
		nxdctl_fmt_uuid(buf, v->uuid);
		rc |= scols_line_set_data(ln, 10, buf);
	}
	if (!rc)
		rc = scols_print_table(tb);
	scols_unref_table(tb);
	return rc ? -EIO : 0;
}

/* The list alone, without health (the model knows only the list entry). */
static int plain_list(FILE *f, const struct nxd_ioc_list *l, bool json)
{
	static struct nxdctl_status s[NXD_IOC_MAX_VOLS];
	unsigned int n = l->count < NXD_IOC_MAX_VOLS ? l->count :
			 NXD_IOC_MAX_VOLS, i;

	for (i = 0; i < n; i++)
		nxdctl_status_from_vol(&s[i], &l->vols[i]);
	return nxdctl_print_health(f, s, n, l->total, json);
}

int nxdctl_print_list(FILE *f, const struct nxd_ioc_list *l, bool json)
{
	return plain_list(f, l, json);
}

void nxdctl_json_list(FILE *f, const struct nxd_ioc_list *l)
{
	plain_list(f, l, true);
}
