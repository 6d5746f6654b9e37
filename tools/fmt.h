/* SPDX-License-Identifier: GPL-2.0 */
/* nxdctl: numbers and names for people (sizes, latencies, UUIDs, modes). */
#ifndef NXDCTL_FMT_H
#define NXDCTL_FMT_H

#include <stddef.h>
#include <stdint.h>

/* "64K", "1.5M"-free human sizes: exact binary suffix when it divides. */
void nxdctl_fmt_size(char *buf, size_t len, uint64_t bytes);
/* "10.9T": one decimal, binary units (lsblk's SIZE). */
void nxdctl_fmt_human(char *buf, size_t len, uint64_t bytes);
/* Mean latency "85us", "6.20ms", "-" when @count is 0. */
void nxdctl_fmt_lat(char *buf, size_t len, uint64_t time_ns, uint64_t count);
void nxdctl_fmt_uuid(char *buf, const uint8_t uuid[16]);	/* 37 bytes */

/* new_encode_dev() / new_decode_dev() of the kernel. */
uint64_t nxdctl_encode_dev(unsigned int major, unsigned int minor);
void nxdctl_decode_dev(uint64_t dev, unsigned int *major, unsigned int *minor);

#endif /* NXDCTL_FMT_H */
