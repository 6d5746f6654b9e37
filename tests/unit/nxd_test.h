/* SPDX-License-Identifier: GPL-2.0 */
/* Tiny check framework and PRNG shared by the unit tests. */
#ifndef NXD_TEST_H
#define NXD_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include "../../kernel/nxd_core.h"

static unsigned long nt_pass, nt_fail;

static inline void nt_report(void)
{
	printf("%lu passed, %lu failed\n", nt_pass, nt_fail);
	exit(nt_fail ? 1 : 0);
}

/* One failed check, already reported: past 20 the run stops here. */
static inline void nt_failed(void)
{
	if (++nt_fail > 20) {
		fprintf(stderr, "too many failures\n");
		nt_report();
	}
}

#define CHECK(cond) do {						\
	if (cond) {							\
		nt_pass++;						\
	} else {							\
		fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n",	\
			__FILE__, __LINE__, __func__, #cond);		\
		nt_failed();						\
	}								\
} while (0)

#define CHECK_EQ(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a == _b) {							\
		nt_pass++;						\
	} else {							\
		fprintf(stderr, "%s:%d: %s: %s == %lld, want %s == %lld\n", \
			__FILE__, __LINE__, __func__, #a, _a, #b, _b);	\
		nt_failed();						\
	}								\
} while (0)

/* splitmix64: small, fast, reproducible. */
static u64 nt_rng_state;

static inline u64 nt_rand(void)
{
	u64 z = (nt_rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0 (bias irrelevant here). */
static inline u64 nt_below(u64 n)
{
	return nt_rand() % n;
}

/* Seed from argv[1], else $NXD_SEED, else @def. */
static inline u64 nt_seed(int argc, char **argv, u64 def)
{
	const char *s = argc > 1 ? argv[1] : getenv("NXD_SEED");

	return s && *s ? strtoull(s, NULL, 0) : def;
}

/* Seed the PRNG from argv[1] or $NXD_SEED (default 1) and say so. */
static inline void nt_start(const char *name, int argc, char **argv)
{
	u64 seed = nt_seed(argc, argv, 1);

	nt_rng_state = seed;
	fprintf(stderr, "%s: seed %" PRIu64 "\n", name, seed);
}

/* main() of a test file: seed, run each of @tests, report and exit. */
static inline int nt_main(const char *name, int argc, char **argv,
			  void (*const *tests)(void), size_t n)
{
	size_t i;

	nt_start(name, argc, argv);
	for (i = 0; i < n; i++)
		tests[i]();
	nt_report();
	return 0;
}

/* The test table and main() of a test file named @name. */
#define NT_MAIN(name, ...)						\
	static void (*const nt_tests[])(void) = { __VA_ARGS__ };	\
	int main(int argc, char **argv)					\
	{								\
		return nt_main(name, argc, argv, nt_tests,		\
			       ARRAY_SIZE(nt_tests));			\
	}

#endif /* NXD_TEST_H */
