/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the kernel's red-black tree (rbtree.h, rbtree_augmented.h and
 * rbtree.c here, copied from the kernel's tools/ tree) needs from the
 * kernel, for the userspace builds of the core: the module uses the
 * kernel's own <linux/rbtree.h>.
 */
#ifndef NXD_RBTREE_COMPAT_H
#define NXD_RBTREE_COMPAT_H

#include <stddef.h>
#include <stdbool.h>

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif
#ifndef READ_ONCE
#define READ_ONCE(x)		(*(const volatile __typeof__(x) *)&(x))
#endif
#ifndef WRITE_ONCE
#define WRITE_ONCE(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))
#endif
#ifndef __always_inline
#define __always_inline		inline __attribute__((always_inline))
#endif
#ifndef likely
#define likely(x)		__builtin_expect(!!(x), 1)
#define unlikely(x)		__builtin_expect(!!(x), 0)
#endif
#ifndef EXPORT_SYMBOL
#define EXPORT_SYMBOL(sym)
#endif

#endif /* NXD_RBTREE_COMPAT_H */
