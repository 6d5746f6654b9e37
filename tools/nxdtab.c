// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: the boot-time configuration (/etc/nxd/nxdtab) and the marks of
 * volumes removed on purpose (/run/nxd/removed), which automatic assembly
 * honours.  The format is in nxdctl(8), FILES.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "nxdctl.h"

const char *nxdtab_path(const char *opt)
{
	const char *e = getenv("NXD_CONFIG");

	if (opt)
		return opt;
	return e && *e ? e : NXDTAB_PATH;
}

/* 8-4-4-4-12 hex digits, either case. */
bool parse_uuid(const char *s, uint8_t *out)
{
	unsigned int i, n;

	if (strlen(s) != 36)
		return false;
	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)s[i])) {
			return false;
		}
	}
	for (i = 0, n = 0; n < 16; n++) {
		char h[3];

		if (s[i] == '-')
			i++;
		h[0] = s[i];
		h[1] = s[i + 1];
		h[2] = 0;
		out[n] = strtoul(h, NULL, 16);
		i += 2;
	}
	return true;
}

/* The table option of create named @key (its long option), or 0. */
static int table_opt_named(const char *key)
{
	const struct option *o;

	for (o = table_opts; o->name; o++)
		if (o->val >= O_WTHR && o->val < O_DRY && !strcmp(o->name, key))
			return o->val;
	return 0;
}

/* OPTIONS of one line into @v; 0 or an exit code (reported). */
static int parse_options(char *s, struct nxdtab_vol *v)
{
	unsigned long seen = 0;
	char *item, *save = NULL;

	for (item = strtok_r(s, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		char *val = strchr(item, '='), *p;
		int o, rc;

		if (val)
			*val++ = 0;
		/* The table line's spelling (write_threshold) is fine too. */
		for (p = item; *p; p++)
			if (*p == '_')
				*p = '-';
		if (!strcmp(item, "noauto") || !strcmp(item, "drain-on-stop")) {
			if (val)
				return usage_error(NULL, "%s takes no value",
						   item);
			if (item[0] == 'n')
				v->noauto = true;
			else
				v->drain_on_stop = true;
			continue;
		}
		o = table_opt_named(item);
		if (!o)
			return usage_error(NULL, "unknown option '%s'", item);
		if (!val || !*val)
			return usage_error(NULL, "%s needs a value (%s=...)",
					   item, item);
		if (seen & (1UL << (o - O_WTHR)))
			return usage_error(NULL, "%s given twice", item);
		seen |= 1UL << (o - O_WTHR);
		rc = table_opt("assemble", o, val, &v->co);
		if (rc)
			return rc;
	}
	return 0;
}

/* One line (comment stripped) into @v; 0, -1 if blank, or an exit code. */
static int parse_line(char *line, const struct nxdtab *t,
		      struct nxdtab_vol *v)
{
	char *f[3], *tok, *save = NULL;
	unsigned int n = 0, i;

	for (tok = strtok_r(line, " \t\r\n", &save); tok;
	     tok = strtok_r(NULL, " \t\r\n", &save)) {
		if (n == 3)
			return usage_error(NULL, "unexpected '%s' (NAME "
					   "UUID=... [OPTION,...])", tok);
		f[n++] = tok;
	}
	if (!n)
		return -1;
	if (!valid_dm_name(f[0]))
		return usage_error(NULL, "bad volume name '%s'", f[0]);
	scopy(v->name, sizeof(v->name), f[0]);
	if (n < 2 || strncasecmp(f[1], "UUID=", 5))
		return usage_error(NULL, "no UUID=<volume uuid> after %s",
				   f[0]);
	if (!parse_uuid(f[1] + 5, v->uuid))
		return usage_error(NULL, "bad volume UUID '%s'", f[1] + 5);
	for (i = 0; i < t->n; i++) {
		if (!strcmp(t->vols[i].name, v->name))
			return usage_error(NULL, "volume name %s already at "
					   "line %u", v->name,
					   t->vols[i].line);
		if (uuid_eq(t->vols[i].uuid, v->uuid))
			return usage_error(NULL, "volume UUID %s already at "
					   "line %u", f[1] + 5,
					   t->vols[i].line);
	}
	return n == 3 ? parse_options(f[2], v) : 0;
}

int nxdtab_read(const char *path, struct nxdtab *t)
{
	char where[PATH_MAX + 16], *line = NULL;
	unsigned int lineno = 0;
	size_t cap = 0;
	FILE *f;
	int rc;

	memset(t, 0, sizeof(*t));
	t->path = path;
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT) {
			t->missing = true;
			return 0;
		}
		return fail(errno_code(errno), "%s: %s", path,
			    strerror(errno));
	}
	while (getline(&line, &cap, f) >= 0) {
		struct nxdtab_vol v = { 0 };

		lineno++;
		line[strcspn(line, "#")] = 0;
		v.line = lineno;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		err_where = where;
		rc = parse_line(line, t, &v);
		err_where = NULL;
		if (rc < 0)
			continue;
		if (rc) {
			t->bad++;
			continue;
		}
		if (!(t->n & 15)) {
			struct nxdtab_vol *nv;

			nv = realloc(t->vols, (t->n + 16) * sizeof(*nv));
			if (!nv) {
				rc = fail(NXDCTL_EXIT_KERNEL, "out of memory");
				goto out;
			}
			t->vols = nv;
		}
		t->vols[t->n++] = v;
	}
	rc = ferror(f) ? fail(NXDCTL_EXIT_KERNEL, "%s: read error", path) : 0;
out:
	free(line);
	fclose(f);
	if (rc)
		nxdtab_free(t);
	return rc;
}

int nxdtab_load(const char *opt, struct nxdtab *t)
{
	int rc = nxdtab_read(nxdtab_path(opt), t);

	if (!rc && t->missing && opt)
		return fail(NXDCTL_EXIT_USAGE, "--config %s: no such file "
			    "(only the default configuration file may be "
			    "missing)", opt);
	return rc;
}

void nxdtab_free(struct nxdtab *t)
{
	free(t->vols);
	t->vols = NULL;
	t->n = 0;
}

const struct nxdtab_vol *nxdtab_find(const struct nxdtab *t,
				     const uint8_t *uuid)
{
	unsigned int i;

	for (i = 0; i < t->n; i++)
		if (uuid_eq(t->vols[i].uuid, uuid))
			return &t->vols[i];
	return NULL;
}

/* ---- volumes removed on purpose ---- */

static const char *removed_dir(void)
{
	const char *e = getenv("NXD_REMOVED_DIR");

	return e && *e ? e : REMOVED_DIR;
}

static void removed_path(const uint8_t *uuid, char *p, size_t len)
{
	char u[40];

	nxdctl_fmt_uuid(u, uuid);
	snprintf(p, len, "%s/%s", removed_dir(), u);
}

bool removed_marked(const uint8_t *uuid)
{
	char p[PATH_MAX];

	removed_path(uuid, p, sizeof(p));
	return !access(p, F_OK);
}

/* mkdir -p of @dir, mode 0755. */
static int mkdirs(const char *dir)
{
	char p[PATH_MAX], *s;

	if (!scopy(p, sizeof(p), dir))
		return -ENAMETOOLONG;
	for (s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

int removed_mark(const uint8_t *uuid, const char *name)
{
	char p[PATH_MAX];
	FILE *f;
	int rc;

	rc = mkdirs(removed_dir());
	if (rc)
		return rc;
	removed_path(uuid, p, sizeof(p));
	f = fopen(p, "we");
	if (!f)
		return -errno;
	fprintf(f, "%s\n", name);
	return fclose(f) ? -errno : 0;
}

void removed_clear(const uint8_t *uuid)
{
	char p[PATH_MAX];

	removed_path(uuid, p, sizeof(p));
	unlink(p);
}
