// SPDX-License-Identifier: GPL-2.0
/*
 * Cost of the extent index's operations (nxd_index.c), in userspace at
 * -O2: N entries with random blocks over 8N, then 4N point look-ups that
 * hit, 4N that miss, N range look-ups of 256 blocks (a 1 MiB read or a
 * stripe) and N removals.  Not a test: it prints nanoseconds per
 * operation and memory per slot.
 *
 * Usage: bench_index [N ...]   (default: 100000 4000000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nxd_index.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static u64 rs = 88172645463325252ULL;

static u64 rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static int run(u64 n)
{
	u64 space = n * 8, i, hits = 0, *keys;
	struct nxd_index ix;
	double t[6];

	if (nxd_index_init(&ix, n))
		return 1;
	keys = malloc(n * sizeof(*keys));
	if (!keys)
		return 1;
	t[0] = now();
	for (i = 0; i < n; i++) {
		keys[i] = rnd() % space;
		nxd_index_set(&ix, keys[i], (u32)i, 0xff, NULL);
	}
	t[1] = now();
	for (i = 0; i < 4 * n; i++)
		hits += !!nxd_index_find(&ix, keys[rnd() % n]);
	t[2] = now();
	for (i = 0; i < 4 * n; i++)
		hits += !!nxd_index_find(&ix, space + rnd() % space);
	t[3] = now();
	for (i = 0; i < n; i++) {
		u64 f = rnd() % space;

		hits += !!nxd_index_first(&ix, f, f + 255);
	}
	t[4] = now();
	for (i = 0; i < n; i++)
		hits += nxd_index_del(&ix, keys[i], NULL);
	t[5] = now();
	printf("entries %llu: set %.0f ns, find hit %.0f ns, find miss %.0f ns, "
	       "range of 256 %.0f ns, del %.0f ns; %.1f bytes per slot (%llu)\n",
	       (unsigned long long)n, (t[1] - t[0]) / n * 1e9,
	       (t[2] - t[1]) / (4 * n) * 1e9, (t[3] - t[2]) / (4 * n) * 1e9,
	       (t[4] - t[3]) / n * 1e9, (t[5] - t[4]) / n * 1e9,
	       (double)nxd_index_mem(&ix) / n, (unsigned long long)hits);
	free(keys);
	nxd_index_free(&ix);
	return 0;
}

int main(int argc, char **argv)
{
	int i, r = 0;

	if (argc < 2)
		return run(100000) || run(4000000);
	for (i = 1; i < argc; i++)
		r |= run(strtoull(argv[i], NULL, 0));
	return r;
}
