/*
 * Toeplitz hash, DPDK vs Steer, side by side in one run.
 *
 * Every implementation hashes the same N random IPv4 4-tuples with the same
 * key (Microsoft's 40-byte verification key). The harness first checks that
 * all of them produce identical hashes (exit 1 and a message if not), then
 * times REPS rounds; in each round every implementation hashes all N tuples
 * once, in a rotating order, so all see the same machine state. It prints
 * the median ns/tuple over the rounds (clock_gettime CLOCK_MONOTONIC around
 * each N-tuple pass) and the ratio to rte_softrss.
 *
 * Input forms, as each API expects them:
 *  - rte_softrss / rte_softrss_be: three host-order uint32_t words (what
 *    struct rte_ipv4_tuple holds after rte_be_to_cpu_32); rte_softrss_be
 *    with the key converted by rte_convert_rss_key.
 *  - rte_thash_gfni / rte_thash_gfni_bulk: the 12 bytes in network order,
 *    with matrices from rte_thash_complete_matrix.
 *  - Steer: the same 12 network-order bytes, through the C ABI of
 *    bench/dpdk/steer-capi (a real call per tuple: no cross-language
 *    inlining, unlike DPDK's inline functions).
 *
 * Usage: toeplitz_bench [N [REPS]]   (defaults 1024, 2001)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_thash.h>

#include "steer_toeplitz.h"

#ifndef RTE_THASH_GFNI_DEFINED
#error "rte_thash_gfni is not compiled in: build with -march=native after the DPDK cflags (see Makefile)"
#endif

#define KEY_LEN 40

static const uint8_t microsoft_key[KEY_LEN] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

struct ctx {
	size_t n;
	uint8_t (*bytes)[12];	/* network order */
	uint8_t **byte_ptrs;	/* for rte_thash_gfni_bulk */
	uint32_t (*words)[3];	/* host order */
	uint8_t key_be[KEY_LEN];	/* rte_convert_rss_key(key) */
	uint64_t *matrices;	/* rte_thash_complete_matrix(key) */
	steer_toeplitz *steer;
	uint32_t *out;
};

typedef void (*impl_fn)(struct ctx *c);

static void run_softrss(struct ctx *c)
{
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = rte_softrss(c->words[i], 3, microsoft_key);
}

static void run_softrss_be(struct ctx *c)
{
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = rte_softrss_be(c->words[i], 3, c->key_be);
}

static void run_thash_gfni(struct ctx *c)
{
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = rte_thash_gfni(c->matrices, c->bytes[i], 12);
}

static void run_thash_gfni_bulk(struct ctx *c)
{
	rte_thash_gfni_bulk(c->matrices, 12, c->byte_ptrs, c->out, (uint32_t)c->n);
}

static void run_steer_single(struct ctx *c)
{
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = steer_toeplitz_v4(c->steer, c->bytes[i]);
}

static void run_steer_batch(struct ctx *c)
{
	steer_toeplitz_batch_v4(c->steer, (const uint8_t (*)[12])c->bytes, c->out, c->n);
}

struct impl {
	const char *name;
	impl_fn fn;
	double *samples;	/* ns per tuple, one per round */
};

static struct impl impls[] = {
	{ "rte_softrss", run_softrss, NULL },
	{ "rte_softrss_be", run_softrss_be, NULL },
	{ "rte_thash_gfni", run_thash_gfni, NULL },
	{ "rte_thash_gfni_bulk", run_thash_gfni_bulk, NULL },
	{ "steer_toeplitz_v4 (single)", run_steer_single, NULL },
	{ "steer_toeplitz_batch_v4", run_steer_batch, NULL },
};
#define NIMPL (sizeof(impls) / sizeof(impls[0]))

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* xorshift64*: reproducible tuples without libc's rand. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void *xmalloc(size_t size)
{
	void *p = aligned_alloc(64, (size + 63) / 64 * 64);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024;
	size_t reps = argc > 2 ? strtoul(argv[2], NULL, 0) : 2001;
	struct ctx c = { .n = n };
	uint32_t *reference;
	cpu_set_t cpus;

	if (n == 0 || reps == 0) {
		fprintf(stderr, "usage: %s [N [REPS]] (both > 0)\n", argv[0]);
		return 2;
	}
	/* Stay on one core (the last one) so rounds are comparable. */
	CPU_ZERO(&cpus);
	CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) - 1, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0)
		fprintf(stderr, "note: could not pin to one CPU: %s\n", strerror(errno));

	/*
	 * rte_thash_gfni_supported() is decided when librte_hash is compiled:
	 * Debian builds it for -march=corei7, so it returns 0 on any CPU. The
	 * inline rte_thash_gfni in this binary is compiled with -march=native,
	 * so ask the CPU directly (the same features the inline code uses).
	 */
	int gfni_cpu = __builtin_cpu_supports("gfni") && __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
	printf("rte_thash_gfni_supported() = %d (librte_hash build); CPU has GFNI+AVX-512F/BW/VBMI: %d\n",
	       rte_thash_gfni_supported(), gfni_cpu);
	if (!gfni_cpu) {
		fprintf(stderr, "this CPU lacks GFNI/AVX-512: rte_thash_gfni cannot run\n");
		return 3;
	}

	c.bytes = xmalloc(n * sizeof(*c.bytes));
	c.byte_ptrs = xmalloc(n * sizeof(*c.byte_ptrs));
	c.words = xmalloc(n * sizeof(*c.words));
	c.out = xmalloc(n * sizeof(*c.out));
	reference = xmalloc(n * sizeof(*reference));
	c.matrices = xmalloc(KEY_LEN * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) {
		uint64_t a = rng(), b = rng();

		memcpy(c.bytes[i], &a, 8);
		memcpy(c.bytes[i] + 8, &b, 4);
		c.byte_ptrs[i] = c.bytes[i];
		for (int w = 0; w < 3; w++) {
			uint32_t be;

			memcpy(&be, c.bytes[i] + 4 * w, 4);
			c.words[i][w] = rte_be_to_cpu_32(be);
		}
	}
	rte_convert_rss_key((const uint32_t *)microsoft_key, (uint32_t *)c.key_be, KEY_LEN);
	rte_thash_complete_matrix(c.matrices, microsoft_key, KEY_LEN);
	c.steer = steer_toeplitz_new(microsoft_key, KEY_LEN);
	if (!c.steer) {
		fprintf(stderr, "steer_toeplitz_new failed\n");
		return 2;
	}

	/* Everyone must agree, tuple by tuple. rte_softrss is the yardstick. */
	run_softrss(&c);
	memcpy(reference, c.out, n * sizeof(*reference));
	for (size_t k = 0; k < NIMPL; k++) {
		memset(c.out, 0xa5, n * sizeof(*c.out));
		impls[k].fn(&c);
		for (size_t i = 0; i < n; i++) {
			if (c.out[i] != reference[i]) {
				fprintf(stderr,
					"MISMATCH: %s gives 0x%08" PRIx32 " for tuple %zu, rte_softrss 0x%08" PRIx32 "\n",
					impls[k].name, c.out[i], i, reference[i]);
				return 1;
			}
		}
	}
	/* Microsoft's first IPv4 TCP vector, as an absolute check. */
	{
		const uint8_t t[12] = { 66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6 };

		if (steer_toeplitz_v4(c.steer, t) != 0x51ccc178 ||
		    rte_thash_gfni(c.matrices, t, 12) != 0x51ccc178) {
			fprintf(stderr, "MISMATCH on the Microsoft vector\n");
			return 1;
		}
	}
	printf("all %zu implementations agree on %zu random IPv4 4-tuples (and the Microsoft vector)\n",
	       NIMPL, n);
	printf("steer batch path: %s\n",
	       steer_toeplitz_uses_simd(c.steer) ? "GFNI/AVX-512" : "scalar tables");

	for (size_t k = 0; k < NIMPL; k++)
		impls[k].samples = xmalloc(reps * sizeof(double));
	for (size_t k = 0; k < NIMPL; k++) /* warm up */
		for (int w = 0; w < 50; w++)
			impls[k].fn(&c);
	for (size_t r = 0; r < reps; r++) {
		for (size_t j = 0; j < NIMPL; j++) {
			size_t k = (r + j) % NIMPL;
			uint64_t t0 = now_ns();

			impls[k].fn(&c);
			uint64_t t1 = now_ns();

			__asm__ volatile("" : : "r"(c.out) : "memory");
			impls[k].samples[r] = (double)(t1 - t0) / (double)n;
		}
	}

	double base = 0;

	printf("\n%zu tuples per pass, %zu rounds, median ns/tuple (p10..p90)\n", n, reps);
	printf("%-28s %10s %18s %14s %12s\n", "implementation", "ns/tuple", "p10..p90", "Mtuples/s",
	       "vs softrss");
	for (size_t k = 0; k < NIMPL; k++) {
		double *s = impls[k].samples;

		qsort(s, reps, sizeof(double), cmp_double);
		double med = s[reps / 2], p10 = s[reps / 10], p90 = s[reps * 9 / 10];

		if (k == 0)
			base = med;
		printf("%-28s %10.2f %8.2f..%-8.2f %14.1f %11.1fx\n", impls[k].name, med, p10, p90,
		       1e3 / med, base / med);
	}
	steer_toeplitz_free(c.steer);
	return 0;
}
