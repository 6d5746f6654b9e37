/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl's one JSON writer: objects, arrays, numbers and escaped strings,
 * pretty-printed (two-space indent) or compact (one document per line).
 */
#ifndef NXDCTL_JSON_H
#define NXDCTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct jw {
	FILE *f;
	bool pretty;
	bool first;
	int depth;
};

void jw_start(struct jw *j, FILE *f, bool pretty);
/* Opens '{' or '[' under @key (NULL inside an array or at the top). */
void jw_open(struct jw *j, const char *key, char c);
/* Closes with '}' or ']'; a newline after the outermost one. */
void jw_close(struct jw *j, char c);
void jw_key(struct jw *j, const char *key);
void jw_u64(struct jw *j, const char *key, uint64_t v);
void jw_i64(struct jw *j, const char *key, int64_t v);
void jw_double(struct jw *j, const char *key, double v);
void jw_bool(struct jw *j, const char *key, bool v);
void jw_null(struct jw *j, const char *key);
void jw_str(struct jw *j, const char *key, const char *v);

#endif /* NXDCTL_JSON_H */
