// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl monitor's event model (events.h).  No output of its own but to
 * the FILE it is given, no kernel access: unit-tested by
 * tools/tests/test_fmt.c.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "events.h"
#include "json.h"
#include "stats.h"

static const char *const kind_names[NXDCTL_EV_NR] = {
	[NXD_EV_DEGRADED] = "degraded",
	[NXD_EV_LOG_FULL] = "log_full",
	[NXD_EV_DRAIN_DONE] = "drain_done",
	[NXD_EV_ACKED_LOST] = "acked_lost",
};

const char *nxdctl_event_kind_name(unsigned int kind)
{
	return kind > 0 && kind < NXDCTL_EV_NR ? kind_names[kind] : NULL;
}

static uint64_t kind_count(const struct nxd_ioc_counters *c, unsigned int k)
{
	switch (k) {
	case NXD_EV_DEGRADED:
		return c->events_degraded;
	case NXD_EV_LOG_FULL:
		return c->events_log_full;
	case NXD_EV_DRAIN_DONE:
		return c->events_drain_done;
	case NXD_EV_ACKED_LOST:
		return c->events_acked_lost;
	default:
		return 0;
	}
}

uint64_t nxdctl_event_diff(struct nxdctl_event *e,
			   const struct nxd_ioc_counters *now,
			   const struct nxd_ioc_counters *prev)
{
	uint64_t n = 0;
	unsigned int k;

	for (k = 1; k < NXDCTL_EV_NR; k++) {
		uint64_t a = kind_count(now, k), b = kind_count(prev, k);

		e->count[k] = a >= b ? a - b : a;
		n += e->count[k];
	}
	e->count[0] = 0;
	e->c = *now;
	return n;
}

/* Kind @k is in the report: new events of it, or its condition at start. */
static bool has_kind(const struct nxdctl_event *e, unsigned int k)
{
	return e->initial ? !!(e->current & (1U << k)) : !!e->count[k];
}

unsigned int nxdctl_event_current(struct nxdctl_event *e,
				  const struct nxd_ioc_counters *c)
{
	e->initial = true;
	e->current = 0;
	memset(e->count, 0, sizeof(e->count));
	e->c = *c;
	if (c->degraded || !strcmp(e->state, "degraded"))
		e->current |= 1U << NXD_EV_DEGRADED;
	if (c->log_full)
		e->current |= 1U << NXD_EV_LOG_FULL;
	if (c->acked_lost)
		e->current |= 1U << NXD_EV_ACKED_LOST;
	return e->current;
}

int nxdctl_event_level(const struct nxdctl_event *e)
{
	if (e->missing)
		return LOG_ERR;
	if (e->removed)
		return LOG_NOTICE;
	if (has_kind(e, NXD_EV_DEGRADED) || has_kind(e, NXD_EV_ACKED_LOST))
		return LOG_CRIT;
	if (has_kind(e, NXD_EV_LOG_FULL))
		return LOG_WARNING;
	return LOG_INFO;
}

void nxdctl_event_kinds(const struct nxdctl_event *e, char *buf, size_t len)
{
	size_t used = 0;
	unsigned int k;

	if (!len)
		return;
	buf[0] = 0;
	if (e->removed || e->missing) {
		snprintf(buf, len, e->removed ? "removed" : "missing");
		return;
	}
	for (k = 1; k < NXDCTL_EV_NR; k++) {
		int w;

		if (!has_kind(e, k) || used >= len)
			continue;
		w = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
			     kind_names[k]);
		if (w > 0)
			used += (size_t)w;
	}
}

const char *nxdctl_event_state(const struct nxdctl_event *e)
{
	if (e->removed)
		return "removed";
	if (e->missing)
		return "inactive";
	if (e->state[0])
		return e->state;
	return e->c.degraded ? "degraded" : "unknown";
}

/* 2026-11-26T08:30:01.123Z */
static void iso_time(char *buf, size_t len, uint64_t ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char b[32];

	if (!gmtime_r(&s, &tm) || !strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S",
					    &tm)) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, "%s.%03uZ", b, (unsigned int)(ms % 1000));
}

void nxdctl_event_json(FILE *f, const struct nxdctl_event *e)
{
	char ts[48], dev[32];
	unsigned int k, i;
	struct jw j;

	iso_time(ts, sizeof(ts), e->time_ms);
	snprintf(dev, sizeof(dev), "%u:%u", e->major, e->minor);
	jw_start(&j, f, false);
	jw_open(&j, NULL, '{');
	jw_str(&j, "volume", e->volume);
	jw_str(&j, "device", dev);
	jw_u64(&j, "time", e->time_ms / 1000);
	jw_str(&j, "timestamp", ts);
	jw_u64(&j, "event_nr", e->event_nr);
	jw_open(&j, "events", '[');
	if (e->removed || e->missing) {
		jw_str(&j, NULL, e->removed ? "removed" : "missing");
	} else {
		for (k = 1; k < NXDCTL_EV_NR; k++)
			if (has_kind(e, k))
				jw_str(&j, NULL, kind_names[k]);
	}
	jw_close(&j, ']');
	jw_str(&j, "state", nxdctl_event_state(e));
	jw_bool(&j, "initial", e->initial || e->missing);
	if (!e->removed && !e->missing) {
		jw_open(&j, "new", '{');
		for (k = 1; k < NXDCTL_EV_NR; k++)
			jw_u64(&j, kind_names[k], e->count[k]);
		jw_close(&j, '}');
		jw_open(&j, "counters", '{');
		for (i = 0; i < nxdctl_nr_counters; i++)
			jw_u64(&j, nxdctl_counters[i].name,
			       nxdctl_counter_get(&e->c, i));
		jw_close(&j, '}');
	}
	jw_close(&j, '}');
}

void nxdctl_event_text(FILE *f, const struct nxdctl_event *e)
{
	char ts[48], kinds[64];

	iso_time(ts, sizeof(ts), e->time_ms);
	nxdctl_event_kinds(e, kinds, sizeof(kinds));
	fprintf(f, "%s %s %s state %s", ts, e->volume, kinds,
		nxdctl_event_state(e));
	if (e->missing) {
		fputs(" (in the configuration file, not active)\n", f);
		return;
	}
	if (!e->removed && e->c.log_blocks)
		fprintf(f, ", log used %" PRIu64 "%%, dirty blocks %" PRIu64,
			(uint64_t)(e->c.log_used_blocks * 100 / e->c.log_blocks),
			(uint64_t)e->c.index_entries);
	if (!e->removed)
		fprintf(f, ", ssd_errors %" PRIu64 ", hdd_errors %" PRIu64,
			(uint64_t)e->c.ssd_errors, (uint64_t)e->c.hdd_errors);
	fprintf(f, " (%sevent %u)\n", e->initial ? "at start, " : "",
		e->event_nr);
}

/* Append "NAME=VALUE" to @env (room for it was made by the caller). */
static bool env_add(char **env, unsigned int *n, const char *name,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static bool env_add(char **env, unsigned int *n, const char *name,
		    const char *fmt, ...)
{
	char *val = NULL, *s = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&val, fmt, ap);
	va_end(ap);
	if (r < 0)
		return false;
	r = asprintf(&s, "%s=%s", name, val);
	free(val);
	if (r < 0)
		return false;
	env[(*n)++] = s;
	env[*n] = NULL;
	return true;
}

char **nxdctl_event_env(const struct nxdctl_event *e)
{
	unsigned int max = 16 + NXDCTL_EV_NR + nxdctl_nr_counters, n = 0;
	unsigned int i, k;
	char kinds[64], ts[48], name[64], *json = NULL;
	size_t jlen = 0;
	char **env = calloc(max + 1, sizeof(*env));
	FILE *m;
	bool ok;

	if (!env)
		return NULL;
	nxdctl_event_kinds(e, kinds, sizeof(kinds));
	iso_time(ts, sizeof(ts), e->time_ms);
	ok = env_add(env, &n, "NXD_VOLUME", "%s", e->volume) &&
	     env_add(env, &n, "NXD_DEVICE", "%u:%u", e->major, e->minor) &&
	     env_add(env, &n, "NXD_EVENTS", "%s", kinds) &&
	     env_add(env, &n, "NXD_EVENT_NR", "%u", e->event_nr) &&
	     env_add(env, &n, "NXD_TIME", "%" PRIu64, e->time_ms / 1000) &&
	     env_add(env, &n, "NXD_TIMESTAMP", "%s", ts) &&
	     env_add(env, &n, "NXD_STATE", "%s", nxdctl_event_state(e)) &&
	     env_add(env, &n, "NXD_INITIAL", "%d", e->initial || e->missing);
	for (k = 1; ok && !e->removed && !e->missing && k < NXDCTL_EV_NR;
	     k++) {
		snprintf(name, sizeof(name), "NXD_NEW_%s", kind_names[k]);
		for (i = 0; name[i]; i++)
			name[i] = (char)toupper((unsigned char)name[i]);
		ok = env_add(env, &n, name, "%" PRIu64, e->count[k]);
	}
	for (i = 0; ok && !e->removed && !e->missing &&
	     i < nxdctl_nr_counters; i++) {
		/* NXD_EVENTS is the kinds; the counter is the total. */
		snprintf(name, sizeof(name), "NXD_%s%s", nxdctl_counters[i].name,
			 strcmp(nxdctl_counters[i].name, "events") ? "" :
			 "_total");
		for (k = 0; name[k]; k++)
			name[k] = (char)toupper((unsigned char)name[k]);
		ok = env_add(env, &n, name, "%" PRIu64,
			     nxdctl_counter_get(&e->c, i));
	}
	m = ok ? open_memstream(&json, &jlen) : NULL;
	if (m) {
		nxdctl_event_json(m, e);
		fclose(m);
		if (jlen && json[jlen - 1] == '\n')
			json[jlen - 1] = 0;
		ok = json && env_add(env, &n, "NXD_EVENT_JSON", "%s", json);
	} else {
		ok = false;
	}
	free(json);
	if (!ok) {
		nxdctl_env_free(env);
		return NULL;
	}
	return env;
}

void nxdctl_env_free(char **env)
{
	char **p;

	if (!env)
		return;
	for (p = env; *p; p++)
		free(*p);
	free(env);
}
