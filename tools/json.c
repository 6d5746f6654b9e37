// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl's JSON writer.  Keys and strings are escaped; numbers are
 * written as integers (or %.6g for doubles, null if not finite), never
 * quoted.
 */
#include <inttypes.h>
#include <math.h>

#include "json.h"

static void jw_raw_str(struct jw *j, const char *s)
{
	fputc('"', j->f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(j->f, "\\%c", c);
		else if (c < 0x20)
			fprintf(j->f, "\\u%04x", c);
		else
			fputc(c, j->f);
	}
	fputc('"', j->f);
}

void jw_start(struct jw *j, FILE *f, bool pretty)
{
	j->f = f;
	j->pretty = pretty;
	j->first = true;
	j->depth = 0;
}

void jw_key(struct jw *j, const char *key)
{
	if (!j->first)
		fputc(',', j->f);
	j->first = false;
	if (j->pretty && j->depth)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	if (key) {
		jw_raw_str(j, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

void jw_open(struct jw *j, const char *key, char c)
{
	jw_key(j, key);
	fputc(c, j->f);
	j->depth++;
	j->first = true;
}

void jw_close(struct jw *j, char c)
{
	j->depth--;
	if (j->pretty && !j->first)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	fputc(c, j->f);
	j->first = false;
	if (!j->depth)
		fputc('\n', j->f);
}

void jw_u64(struct jw *j, const char *key, uint64_t v)
{
	jw_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void jw_i64(struct jw *j, const char *key, int64_t v)
{
	jw_key(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void jw_double(struct jw *j, const char *key, double v)
{
	jw_key(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

void jw_bool(struct jw *j, const char *key, bool v)
{
	jw_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

void jw_null(struct jw *j, const char *key)
{
	jw_key(j, key);
	fputs("null", j->f);
}

void jw_str(struct jw *j, const char *key, const char *v)
{
	jw_key(j, key);
	jw_raw_str(j, v);
}
