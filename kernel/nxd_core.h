/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-neutral core of dm-nxd, one header per concept: on-disk codec,
 * log ring accounting, extent index, routing and histogram, tunables,
 * the automatic routing (threshold controller, streams, stripe splits).
 * Compiled into the module, nxdctl, nxd-probe, the userspace unit tests
 * and the fuzzer.
 * This header only gathers them for the callers that use several.
 */
#ifndef NXD_CORE_H
#define NXD_CORE_H

#include "nxd_codec.h"
#include "nxd_ring.h"
#include "nxd_index.h"
#include "nxd_route.h"
#include "nxd_tun.h"
#include "nxd_auto.h"

#endif /* NXD_CORE_H */
