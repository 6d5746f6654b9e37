// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: what every command uses: error reporting, option and argument
 * parsing, sysfs files.  The test hooks (NXDCTL_SYSFS, NXDCTL_TEST_STATS)
 * are read by main() into sysfs_root and test_stats.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "nxdctl.h"

const char *sysfs_root = "/sys";
const char *test_stats;
const char *err_where;

/* ---- errors ---- */

int fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("nxdctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int errno_code(int e)
{
	switch (e) {
	case EACCES:
	case EPERM:
		return NXDCTL_EXIT_PERM;
	case ENODEV:
	case ENXIO:
	case ENOENT:
		return NXDCTL_EXIT_NOVOL;
	default:
		return NXDCTL_EXIT_KERNEL;
	}
}

/* Copy @src into @dst of @len; false (and a truncated copy) if too long. */
bool scopy(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len) {
		memcpy(dst, src, len - 1);
		dst[len - 1] = 0;
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

/* ---- sysfs ---- */

int sysfs_read(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	close(fd);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

int sysfs_write(const char *path, const char *val)
{
	size_t len = strlen(val);
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	if (close(fd))
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

bool is_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* ---- option helpers ---- */

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("nxdctl: ", stderr);
	if (err_where)
		fprintf(stderr, "%s: ", err_where);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	/* A config file's error: its line, not the command line, is wrong. */
	if (err_where)
		fputc('\n', stderr);
	else
		fprintf(stderr, "\nTry 'nxdctl %s%s--help'.\n",
			cmd ? cmd : "", cmd ? " " : "");
	return NXDCTL_EXIT_USAGE;
}

int parse_size_opt(const char *cmd, const char *opt, const char *s,
			  uint64_t max, uint64_t *out)
{
	int rc = nxd_parse_size(s, out);

	if (rc || *out > max)
		return usage_error(cmd, "%s: bad size '%s' (bytes, or with a "
				   "K, M or G suffix)", opt, s);
	return 0;
}

int parse_uint_opt(const char *cmd, const char *opt, const char *s,
			  unsigned long min, unsigned long max,
			  unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || *out < min || *out > max)
		return usage_error(cmd, "%s: expected a number from %lu to "
				   "%lu, got '%s'", opt, min, max, s);
	return 0;
}

int parse_pos_double(const char *cmd, const char *opt, const char *s,
			    double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (!*s || *end || errno || !(*out > 0) || *out > 1e12)
		return usage_error(cmd, "%s: expected a positive number, got "
				   "'%s'", opt, s);
	return 0;
}

void cmd_usage(const struct cmd *c, FILE *f)
{
	fprintf(f, "Usage: nxdctl %s %s\n\n%s\n\n%s", c->name, c->args,
		c->summary, c->help);
}

/* The default case of getopt loops: --help, or a bad option. */
int opt_default(const struct cmd *c, int o, char **argv)
{
	if (o == 'h') {
		cmd_usage(c, stdout);
		return NXDCTL_EXIT_OK;
	}
	return usage_error(c->name, "bad option or missing value: '%s'",
			   argv[optind - 1]);
}

int simple_opts(const struct cmd *c, int argc, char **argv,
		const char *shortopts, const struct option *opts,
		const struct simple_opt *so)
{
	const struct simple_opt *s;
	int o;

	while ((o = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		for (s = so; s && s->val && s->val != o; s++)
			;
		if (!s || !s->val)
			return opt_default(c, o, argv);
		if (s->flag)
			*s->flag = true;
		else
			*s->arg = optarg;
	}
	return -1;
}

int want_args(const struct cmd *c, int argc, char **argv, int n_min,
		     int n_max)
{
	int n = argc - optind;

	if (n < n_min)
		return usage_error(c->name, "missing argument (usage: nxdctl "
				   "%s %s)", c->name, c->args);
	if (n > n_max)
		return usage_error(c->name, "unexpected argument '%s'",
				   argv[optind + n_max]);
	return 0;
}
