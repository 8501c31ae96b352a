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
 * rte_thash_gfni is a static inline function, inlined into the timing loop;
 * "rte_thash_gfni (called)" is the same behind a non-inlined C function, the
 * call boundary Steer's single-tuple hash always has here.
 *
 * Input forms, as each API expects them:
 *  - rte_softrss / rte_softrss_be: three host-order uint32_t words (what
 *    struct rte_ipv4_tuple holds after rte_be_to_cpu_32); rte_softrss_be
 *    with the key converted by rte_convert_rss_key.
 *  - rte_thash_gfni / rte_thash_gfni_bulk: the 12 bytes in network order,
 *    with matrices from rte_thash_complete_matrix.
 *  - Steer: the same 12 network-order bytes, through the C ABI of
 *    bench/dpdk/steer-capi (a real call per tuple: no cross-language
 *    inlining, unlike DPDK's inline functions), once per Steer path
 *    (rss::ToeplitzPath: gfni-avx512, table), each forced.
 *
 * Runs on any x86-64 CPU: an implementation this build or this CPU cannot
 * run (rte_thash_gfni needs GFNI and AVX-512 both in the compiler's target
 * and in the CPU; Steer's gfni-avx512 path needs them in the CPU) is skipped,
 * and the skip is printed with its reason; the ratios compare what ran.
 *
 * Usage: toeplitz_bench [--json] [N [REPS]]   (defaults 1024, 2001)
 * With --json the tables go to stderr and stdout gets one JSON object (the
 * test matrix reads it: crates/bench/cases.toml, "dpdk-toeplitz"): every
 * implementation's median ns/tuple (null and the reason when skipped) and
 * every ratio (null when a side was skipped).
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

#include "../harness_json.h"
#include "steer_toeplitz.h"

#define KEY_LEN 40

static const uint8_t microsoft_key[KEY_LEN] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

/* Steer paths measured: at most this many. */
#define MAX_STEER_PATHS 4

struct ctx {
	size_t n;
	uint8_t (*bytes)[12];	/* network order */
	uint8_t **byte_ptrs;	/* for rte_thash_gfni_bulk */
	uint32_t (*words)[3];	/* host order */
	uint8_t key_be[KEY_LEN];	/* rte_convert_rss_key(key) */
	uint64_t *matrices;	/* rte_thash_complete_matrix(key) */
	steer_toeplitz *steer[MAX_STEER_PATHS];	/* one table per Steer path (NULL: skipped) */
	uint32_t *out;
};

typedef void (*impl_fn)(struct ctx *c, size_t path);

static void run_softrss(struct ctx *c, size_t path)
{
	(void)path;
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = rte_softrss(c->words[i], 3, microsoft_key);
}

static void run_softrss_be(struct ctx *c, size_t path)
{
	(void)path;
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = rte_softrss_be(c->words[i], 3, c->key_be);
}

#ifdef RTE_THASH_GFNI_DEFINED
static void run_thash_gfni(struct ctx *c, size_t path)
{
	(void)path;
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = rte_thash_gfni(c->matrices, c->bytes[i], 12);
}

/* rte_thash_gfni behind a call, as Steer's single-tuple hash is behind its
 * C ABI: the same call boundary on both sides, so the ratio compares the
 * kernels without the inlining only DPDK's header gets. */
__attribute__((noinline)) static uint32_t thash_gfni_called(const uint64_t *m,
							     const uint8_t *tuple)
{
	return rte_thash_gfni(m, tuple, 12);
}

static void run_thash_gfni_called(struct ctx *c, size_t path)
{
	(void)path;
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = thash_gfni_called(c->matrices, c->bytes[i]);
}

static void run_thash_gfni_bulk(struct ctx *c, size_t path)
{
	(void)path;
	rte_thash_gfni_bulk(c->matrices, 12, c->byte_ptrs, c->out, (uint32_t)c->n);
}
#endif

static void run_steer_single(struct ctx *c, size_t path)
{
	for (size_t i = 0; i < c->n; i++)
		c->out[i] = steer_toeplitz_v4(c->steer[path], c->bytes[i]);
}

static void run_steer_batch(struct ctx *c, size_t path)
{
	steer_toeplitz_batch_v4(c->steer[path], (const uint8_t (*)[12])c->bytes, c->out, c->n);
}

struct impl {
	char name[48];
	impl_fn fn;
	size_t path;		/* Steer path index */
	char skipped[160];	/* non-empty: why it did not run */
	double *samples;	/* ns per tuple, one per round */
	double median;
};

#define MAX_IMPLS (5 + 2 * MAX_STEER_PATHS)
static struct impl impls[MAX_IMPLS];
static size_t nimpl;

/* Where the human-readable tables go: stdout, or stderr with --json
 * (take_json_flag). */
static FILE *out;

/* The ratios printed, kept for --json: label, value (negative: n/a). */
#define MAX_RATIOS (5 * MAX_STEER_PATHS)
static struct {
	char label[96];
	double value;
} ratios[MAX_RATIOS];
static size_t nratios;

static struct impl *add_impl(const char *name, impl_fn fn, size_t path)
{
	struct impl *im = &impls[nimpl++];

	snprintf(im->name, sizeof(im->name), "%s", name);
	im->fn = fn;
	im->path = path;
	return im;
}

static struct impl *find_impl(const char *name)
{
	for (size_t k = 0; k < nimpl; k++)
		if (strcmp(impls[k].name, name) == 0)
			return &impls[k];
	return NULL;
}

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

/* Registers every implementation, with the reason when one cannot run. */
static void register_impls(struct ctx *c)
{
	add_impl("rte_softrss", run_softrss, 0);
	add_impl("rte_softrss_be", run_softrss_be, 0);

	/*
	 * rte_thash_gfni exists in this binary only if the compiler's target has
	 * GFNI and AVX-512F (DPDK's header tests __GFNI__ && __AVX512F__), and
	 * runs only if the CPU has them plus AVX-512BW/VBMI (its masked byte
	 * permutes). rte_thash_gfni_supported() cannot tell: it is decided when
	 * librte_hash is compiled, and Debian compiles it for -march=corei7.
	 */
	int gfni_cpu = __builtin_cpu_supports("gfni") && __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
	const char *dpdk_gfni_why = NULL;
#ifdef RTE_THASH_GFNI_DEFINED
	if (!gfni_cpu)
		dpdk_gfni_why = "this CPU lacks GFNI or AVX-512F/BW/VBMI";
	struct impl *g = add_impl("rte_thash_gfni", run_thash_gfni, 0);
	struct impl *gc = add_impl("rte_thash_gfni (called)", run_thash_gfni_called, 0);
	struct impl *gb = add_impl("rte_thash_gfni_bulk", run_thash_gfni_bulk, 0);
#else
	dpdk_gfni_why = "not compiled in: the compiler target (MARCH) lacks GFNI or AVX-512F";
	struct impl *g = add_impl("rte_thash_gfni", NULL, 0);
	struct impl *gc = add_impl("rte_thash_gfni (called)", NULL, 0);
	struct impl *gb = add_impl("rte_thash_gfni_bulk", NULL, 0);
#endif
	if (dpdk_gfni_why) {
		snprintf(g->skipped, sizeof(g->skipped), "%s", dpdk_gfni_why);
		snprintf(gc->skipped, sizeof(gc->skipped), "%s", dpdk_gfni_why);
		snprintf(gb->skipped, sizeof(gb->skipped), "%s", dpdk_gfni_why);
	}
	fprintf(out, "rte_thash_gfni_supported() = %d (fixed when librte_hash was built); "
	       "CPU has GFNI+AVX-512F/BW/VBMI: %d\n",
	       rte_thash_gfni_supported(), gfni_cpu);

	size_t paths = steer_toeplitz_paths();
	if (paths > MAX_STEER_PATHS)
		paths = MAX_STEER_PATHS;
	for (size_t p = 0; p < paths; p++) {
		char name[48], why[160] = "";
		const char *pname = steer_toeplitz_path_name(p);

		c->steer[p] = steer_toeplitz_new_path(microsoft_key, KEY_LEN, p, why, sizeof(why));
		snprintf(name, sizeof(name), "steer %s single", pname);
		struct impl *s1 = add_impl(name, run_steer_single, p);
		snprintf(name, sizeof(name), "steer %s batch", pname);
		struct impl *sb = add_impl(name, run_steer_batch, p);
		if (!c->steer[p]) {
			snprintf(s1->skipped, sizeof(s1->skipped), "%s", why);
			snprintf(sb->skipped, sizeof(sb->skipped), "%s", why);
		}
	}
	fprintf(out, "steer default path on this CPU: %s\n",
	       steer_toeplitz_path_name(steer_toeplitz_default_path()));
}

/* "A / B" as "1.23x" when both ran, else "n/a (X skipped)". */
static void print_ratio(const char *label, const char *a, const char *b)
{
	struct impl *x = find_impl(a), *y = find_impl(b);

	if (!x || !y)
		return;
	double value = x->skipped[0] || y->skipped[0] ? -1 : y->median / x->median;
	fprintf(out, "  %-58s ", label);
	if (value < 0)
		fprintf(out, "n/a (%s skipped)\n", x->skipped[0] ? x->name : y->name);
	else
		fprintf(out, "%.2fx\n", value);
	if (nratios < MAX_RATIOS) {
		snprintf(ratios[nratios].label, sizeof(ratios[nratios].label), "%s", label);
		ratios[nratios++].value = value;
	}
}

/* The results as one JSON object on stdout. */
static void print_json(size_t n, size_t reps)
{
	printf("{\"tuples\": %zu, \"rounds\": %zu, \"unit\": \"ns/tuple\", \"default_path\": ", n,
	       reps);
	json_string(steer_toeplitz_path_name(steer_toeplitz_default_path()));
	printf(", \"implementations\": [");
	for (size_t k = 0; k < nimpl; k++) {
		printf("%s{\"name\": ", k ? ", " : "");
		json_string(impls[k].name);
		if (impls[k].skipped[0]) {
			printf(", \"median_ns\": null, \"skipped\": ");
			json_string(impls[k].skipped);
		} else {
			printf(", \"median_ns\": %.4f, \"skipped\": null", impls[k].median);
		}
		printf("}");
	}
	printf("], \"ratios\": [");
	for (size_t r = 0; r < nratios; r++) {
		printf("%s{\"label\": ", r ? ", " : "");
		json_string(ratios[r].label);
		if (ratios[r].value < 0)
			printf(", \"value\": null}");
		else
			printf(", \"value\": %.4f}", ratios[r].value);
	}
	printf("]}\n");
}

int main(int argc, char **argv)
{
	int json = take_json_flag(&argc, &argv, &out);
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024;
	size_t reps = argc > 2 ? strtoul(argv[2], NULL, 0) : 2001;
	struct ctx c = { .n = n };
	uint32_t *reference;
	cpu_set_t cpus;

	if (n == 0 || reps == 0) {
		fprintf(stderr, "usage: toeplitz_bench [--json] [N [REPS]] (both > 0)\n");
		return 2;
	}
	/* Stay on one core (the last one) so rounds are comparable. */
	CPU_ZERO(&cpus);
	CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) - 1, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0)
		fprintf(stderr, "note: could not pin to one CPU: %s\n", strerror(errno));

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
	register_impls(&c);

	/* Everyone that runs must agree, tuple by tuple. rte_softrss is the
	 * yardstick; Microsoft's first IPv4 TCP vector is the absolute check. */
	const uint8_t ms[12] = { 66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6 };
	uint32_t ms_words[3] = { 0x420995bb, 0xa18e6450, 0x0aea06e6 };

	if (rte_softrss(ms_words, 3, microsoft_key) != 0x51ccc178) {
		fprintf(stderr, "MISMATCH: rte_softrss on the Microsoft vector\n");
		return 1;
	}
	run_softrss(&c, 0);
	memcpy(reference, c.out, n * sizeof(*reference));
	size_t ran = 0;
	for (size_t k = 0; k < nimpl; k++) {
		if (impls[k].skipped[0])
			continue;
		memset(c.out, 0xa5, n * sizeof(*c.out));
		impls[k].fn(&c, impls[k].path);
		for (size_t i = 0; i < n; i++) {
			if (c.out[i] != reference[i]) {
				fprintf(stderr,
					"MISMATCH: %s gives 0x%08" PRIx32 " for tuple %zu, rte_softrss 0x%08" PRIx32 "\n",
					impls[k].name, c.out[i], i, reference[i]);
				return 1;
			}
		}
		ran++;
	}
	for (size_t p = 0; p < MAX_STEER_PATHS; p++)
		if (c.steer[p] && steer_toeplitz_v4(c.steer[p], ms) != 0x51ccc178) {
			fprintf(stderr, "MISMATCH: steer %s on the Microsoft vector\n",
				steer_toeplitz_path_name(p));
			return 1;
		}
#ifdef RTE_THASH_GFNI_DEFINED
	if (!find_impl("rte_thash_gfni")->skipped[0] && rte_thash_gfni(c.matrices, ms, 12) != 0x51ccc178) {
		fprintf(stderr, "MISMATCH: rte_thash_gfni on the Microsoft vector\n");
		return 1;
	}
#endif
	fprintf(out, "all %zu implementations that run agree on %zu random IPv4 4-tuples (and the Microsoft vector)\n",
	       ran, n);
	for (size_t k = 0; k < nimpl; k++)
		if (impls[k].skipped[0])
			fprintf(out, "skipped %s: %s\n", impls[k].name, impls[k].skipped);

	for (size_t k = 0; k < nimpl; k++)
		impls[k].samples = xmalloc(reps * sizeof(double));
	for (size_t k = 0; k < nimpl; k++) /* warm up */
		for (int w = 0; w < 50 && !impls[k].skipped[0]; w++)
			impls[k].fn(&c, impls[k].path);
	for (size_t r = 0; r < reps; r++) {
		for (size_t j = 0; j < nimpl; j++) {
			size_t k = (r + j) % nimpl;

			if (impls[k].skipped[0])
				continue;
			uint64_t t0 = now_ns();

			impls[k].fn(&c, impls[k].path);
			uint64_t t1 = now_ns();

			__asm__ volatile("" : : "r"(c.out) : "memory");
			impls[k].samples[r] = (double)(t1 - t0) / (double)n;
		}
	}

	double base = 0;

	fprintf(out, "\n%zu tuples per pass, %zu rounds, median ns/tuple (p10..p90)\n", n, reps);
	fprintf(out, "%-28s %10s %18s %14s %12s\n", "implementation", "ns/tuple", "p10..p90", "Mtuples/s",
	       "vs softrss");
	for (size_t k = 0; k < nimpl; k++) {
		double *s = impls[k].samples;

		if (impls[k].skipped[0]) {
			fprintf(out, "%-28s %10s\n", impls[k].name, "skipped");
			continue;
		}
		qsort(s, reps, sizeof(double), cmp_double);
		double med = s[reps / 2], p10 = s[reps / 10], p90 = s[reps * 9 / 10];

		impls[k].median = med;
		if (k == 0)
			base = med;
		fprintf(out, "%-28s %10.2f %8.2f..%-8.2f %14.1f %11.1fx\n", impls[k].name, med, p10, p90,
		       1e3 / med, base / med);
	}

	fprintf(out, "\nspeed ratios (higher: Steer faster), same run:\n");
	for (size_t p = 0; p < MAX_STEER_PATHS && steer_toeplitz_path_name(p); p++) {
		char s1[48], sb[48], label[96];
		const char *pname = steer_toeplitz_path_name(p);

		snprintf(s1, sizeof(s1), "steer %s single", pname);
		snprintf(sb, sizeof(sb), "steer %s batch", pname);
		snprintf(label, sizeof(label), "%s vs rte_thash_gfni", s1);
		print_ratio(label, s1, "rte_thash_gfni");
		snprintf(label, sizeof(label), "%s vs rte_thash_gfni (called)", s1);
		print_ratio(label, s1, "rte_thash_gfni (called)");
		snprintf(label, sizeof(label), "%s vs rte_thash_gfni", sb);
		print_ratio(label, sb, "rte_thash_gfni");
		snprintf(label, sizeof(label), "%s vs rte_thash_gfni_bulk", sb);
		print_ratio(label, sb, "rte_thash_gfni_bulk");
		snprintf(label, sizeof(label), "%s vs rte_softrss", s1);
		print_ratio(label, s1, "rte_softrss");
	}
	if (json)
		print_json(n, reps);
	for (size_t p = 0; p < MAX_STEER_PATHS; p++)
		steer_toeplitz_free(c.steer[p]);
	return 0;
}
