/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl monitor's model of an event, with no kernel access: which kinds
 * of dm-nxd event happened between two readings of a volume's counters,
 * and the event as one NDJSON line, one text line, or the environment of
 * an --exec program.  Unit-tested by tools/tests/test_fmt.c.
 */
#ifndef NXDCTL_EVENTS_H
#define NXDCTL_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../kernel/nxd_ioctl.h"

/* Kinds are NXD_EV_DEGRADED .. NXD_EV_DRAIN_DONE; index 0 unused. */
#define NXDCTL_EV_NR	(NXD_EV_ACKED_LOST + 1)

struct nxdctl_event {
	const char *volume;		/* dm name */
	unsigned int major, minor;
	uint32_t event_nr;		/* device-mapper's event number after it */
	uint64_t time_ms;		/* Unix time, milliseconds */
	bool removed;			/* the volume went away: no counters */
	bool missing;			/* configured, not active: no counters */
	/*
	 * A report of the state a volume is in (when the monitor starts,
	 * or the volume appears), not of new events: @current holds the
	 * kinds whose condition holds (1 << kind), @count is all zero.
	 */
	bool initial;
	unsigned int current;
	char state[16];			/* ok, degraded, ...; "" if unknown */
	uint64_t count[NXDCTL_EV_NR];	/* new events of each kind */
	struct nxd_ioc_counters c;	/* the counters after it */
};

/* "degraded", "log_full", "drain_done"; NULL for anything else. */
const char *nxdctl_event_kind_name(unsigned int kind);

/*
 * Fill e->count with the events of each kind counted between @prev and
 * @now (all of @now's if a counter went back: a new volume of the same
 * name), and e->c with @now; returns how many events that is.
 */
uint64_t nxdctl_event_diff(struct nxdctl_event *e,
			   const struct nxd_ioc_counters *now,
			   const struct nxd_ioc_counters *prev);

/*
 * An initial report of @c (and e->state): the kinds whose condition holds
 * now (degraded, log_full, acked_lost) into e->current, e->initial set,
 * e->c = *@c.  Returns e->current (0: nothing abnormal to report).
 */
unsigned int nxdctl_event_current(struct nxdctl_event *e,
				  const struct nxd_ioc_counters *c);

/*
 * The syslog(3) level of the event: LOG_CRIT for degraded and
 * acked_lost, LOG_ERR for missing, LOG_WARNING for log_full, LOG_NOTICE
 * for removed, else LOG_INFO.
 */
int nxdctl_event_level(const struct nxdctl_event *e);

/* The kinds that happened, comma separated ("removed" if it went away). */
void nxdctl_event_kinds(const struct nxdctl_event *e, char *buf, size_t len);

/* The state to report: e->state, else from the counters. */
const char *nxdctl_event_state(const struct nxdctl_event *e);

/* One JSON object on one line, newline-terminated. */
void nxdctl_event_json(FILE *f, const struct nxdctl_event *e);
/* One line for people. */
void nxdctl_event_text(FILE *f, const struct nxdctl_event *e);

/*
 * The event as NAME=VALUE strings for an --exec program: NXD_VOLUME,
 * NXD_DEVICE, NXD_EVENTS, NXD_EVENT_NR, NXD_TIME, NXD_TIMESTAMP,
 * NXD_STATE, NXD_INITIAL, NXD_NEW_<KIND>, NXD_<COUNTER> for every counter (the
 * counter events as NXD_EVENTS_TOTAL), and NXD_EVENT_JSON (the NDJSON
 * line).  NULL-terminated, or NULL if out of
 * memory; free with nxdctl_env_free().
 */
char **nxdctl_event_env(const struct nxdctl_event *e);
void nxdctl_env_free(char **env);

#endif /* NXDCTL_EVENTS_H */
