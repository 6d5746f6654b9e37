// SPDX-License-Identifier: GPL-2.0
/* nxdctl: numbers and names for people (fmt.h). */
#include <inttypes.h>
#include <stdio.h>

#include "fmt.h"
#include "stats.h"

void nxdctl_fmt_lat(char *buf, size_t len, uint64_t time_ns, uint64_t count)
{
	double ns;

	if (!count) {
		snprintf(buf, len, "-");
		return;
	}
	ns = (double)time_ns / (double)count;
	if (ns < 1e3)
		snprintf(buf, len, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2fms", ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", ns / 1e9);
}

void nxdctl_fmt_human(char *buf, size_t len, uint64_t bytes)
{
	static const char sfx[] = "BKMGTPE";
	double v = (double)bytes;
	int i = 0;

	while (v >= 1024.0 && i < 6) {
		v /= 1024.0;
		i++;
	}
	if (!i)
		snprintf(buf, len, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, len, "%.1f%c", v, sfx[i]);
}

void nxdctl_fmt_size(char *buf, size_t len, uint64_t bytes)
{
	static const char sfx[] = "KMGTPE";
	int i = -1;

	while (bytes && !(bytes & 1023) && i < 5) {
		bytes >>= 10;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else
		snprintf(buf, len, "%" PRIu64 "%c", bytes, sfx[i]);
}

void nxdctl_fmt_uuid(char *buf, const uint8_t u[16])
{
	sprintf(buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		"%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

uint64_t nxdctl_encode_dev(unsigned int major, unsigned int minor)
{
	return (minor & 0xff) | (major << 8) | ((minor & ~0xffU) << 12);
}

void nxdctl_decode_dev(uint64_t dev, unsigned int *major, unsigned int *minor)
{
	*major = (dev & 0xfff00) >> 8;
	*minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
}
