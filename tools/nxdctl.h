/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl: what the command files share.
 */
#ifndef NXDCTL_H
#define NXDCTL_H

#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "../kernel/nxd_ioctl.h"
#include "nxdctl_core.h"
#include "fmt.h"
#include "stats.h"
#include "suggest.h"
#include "view.h"

/* Exit codes, documented in nxdctl(8). */
#define NXDCTL_EXIT_OK		0
#define NXDCTL_EXIT_USAGE	1
#define NXDCTL_EXIT_NOVOL	2
#define NXDCTL_EXIT_PERM	3
#define NXDCTL_EXIT_KERNEL	4

#endif /* NXDCTL_H */
