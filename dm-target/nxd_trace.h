/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd trace events.  nxd_io_done: one per completed read or write of
 * a volume, with where it went and how long it took, so that a run's
 * routing can be recorded and replayed (bench/route_oracle.py).  The
 * file name has an underscore: TRACE_INCLUDE_FILE must be a C token.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM nxd

#if !defined(_NXD_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _NXD_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(nxd_io_done,
	    TP_PROTO(dev_t dev, u64 sector, u32 bytes, u8 dir, u8 route, u8 align, u64 ns),
	    TP_ARGS(dev, sector, bytes, dir, route, align, ns),
	    TP_STRUCT__entry(__field(dev_t, dev)
		    __field(u64, sector)
		    __field(u64, ns)
		    __field(u32, bytes)
		    __field(u8, dir)
		    __field(u8, route)
		    __field(u8, align)
	    ),
	    TP_fast_assign(__entry->dev = dev;
		    __entry->sector = sector;
		    __entry->ns = ns;
		    __entry->bytes = bytes;
		    __entry->dir = dir;
		    __entry->route = route;
		    __entry->align = align;
	    ),
	    TP_printk("%d,%d %c sector=%llu bytes=%u route=%s align=%s ns=%llu",
		      MAJOR(__entry->dev), MINOR(__entry->dev),
		      __entry->dir ? 'W' : 'R', __entry->sector, __entry->bytes,
		      __entry->route ? "hdd" : "ssd",
		      __entry->align ? "no" : "4k", __entry->ns)
);

#endif /* _NXD_TRACE_H */

/* Found through the module's -I$(src)/dm-target. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE nxd_trace
#include <trace/define_trace.h>
