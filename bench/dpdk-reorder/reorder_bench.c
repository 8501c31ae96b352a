/* DPDK rte_reorder vs Steer's SRPIC sorter on the same synthetic batches of
 * 64 descriptors, in one run.  `make -C bench/dpdk-reorder run`
 *
 * Workload (one TCP flow, as crates/order/benches/sorter.rs): batches of 64
 * segments of 1448 bytes, consecutive, starting just below the 2^32 wrap;
 * "reordered10": 6 times (10% of 64) a segment is swapped with one 1..3
 * later (the same permutation for both). Sequence numbers continue from
 * batch to batch.
 *
 * Comparable work, per batch:
 *   rte_reorder: write each mbuf's sequence number (packet index, the
 *     dynfield a driver or rte_distributor would set), rte_reorder_insert
 *     all 64, rte_reorder_drain until empty (64 mbuf pointers in order).
 *   Steer: build a descriptor (4-tuple, TCP seq, len) per segment, push
 *     all 64 into the sorter (BlockSize 32, ring 512, Listing 1), end the
 *     batch (flush all): 64 indices in delivery order.
 * Both take 64 references in arrival order and return 64 references in
 * sequence order without touching payload.  The semantics differ:
 * rte_reorder keeps ONE global window of packet-counted sequence numbers
 * and hands out only the in-order prefix (a gap holds everything behind it
 * across batches until filled or the window overflows); the sorter keys by
 * 4-tuple, sorts TCP byte sequence numbers within a block and releases
 * everything at the end of the batch, gaps or not.
 *
 * EAL: --no-huge --no-pci -m 256 --no-shconf --no-telemetry -l 0. With
 * --in-memory instead of --no-shconf, DPDK 22.11 refuses: "Option
 * --legacy-mem is not compatible with --in-memory" (--no-huge implies
 * legacy memory).
 *
 * Usage: reorder_bench [ITERS [ROUNDS]]: each round times ITERS batches of
 * each case and implementation, interleaved; the median over rounds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_reorder.h>

#include "steer_sorter.h"

#define BATCH 64
#define MSS 1448u

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* xorshift, fixed seed: the same permutation every run. */
static uint64_t rng_state = 7;
static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

/* perm[k]: the in-batch index of the k-th arrival. */
static void make_perm(uint32_t *perm, int reorder)
{
	for (uint32_t k = 0; k < BATCH; k++)
		perm[k] = k;
	int swaps = reorder ? (int)(BATCH * 0.10 + 0.5) : 0;
	for (int s = 0; s < swaps; s++) {
		uint32_t a = rnd(BATCH - 1);
		uint32_t b = a + 1 + rnd(3);
		if (b > BATCH - 1)
			b = BATCH - 1;
		uint32_t t = perm[a];
		perm[a] = perm[b];
		perm[b] = t;
	}
}

static int out_of_order(const uint32_t *perm)
{
	int n = 0;
	uint32_t max = 0;
	for (int k = 0; k < BATCH; k++) {
		if (k > 0 && perm[k] < max)
			n++;
		else
			max = perm[k];
	}
	return n;
}

struct dpdk_ctx {
	struct rte_reorder_buffer *rb;
	struct rte_mbuf *m[BATCH];
	struct rte_mbuf *drained[BATCH];
	uint32_t base; /* packet sequence number of the batch's first packet */
};

/* One batch through rte_reorder; returns the number drained, -1 on a
 * misordered or failed insert. */
static int dpdk_batch(struct dpdk_ctx *c, const uint32_t *perm, int check)
{
	for (int k = 0; k < BATCH; k++) {
		struct rte_mbuf *m = c->m[k];
		*rte_reorder_seqn(m) = c->base + perm[k];
		if (rte_reorder_insert(c->rb, m) != 0)
			return -1;
	}
	unsigned got = 0;
	while (got < BATCH) {
		unsigned d = rte_reorder_drain(c->rb, c->drained + got, BATCH - got);
		if (d == 0)
			break;
		got += d;
	}
	if (check)
		for (unsigned k = 0; k < got; k++)
			if (*rte_reorder_seqn(c->drained[k]) != c->base + k)
				return -1;
	c->base += BATCH;
	return (int)got;
}

struct steer_ctx {
	steer_sorter *s;
	struct steer_seg segs[BATCH];
	uint32_t out[BATCH];
	uint32_t seq; /* byte sequence number of the batch's first segment */
};

static int steer_batch(struct steer_ctx *c, const uint32_t *perm, int check)
{
	for (int k = 0; k < BATCH; k++) {
		struct steer_seg *g = &c->segs[k];
		g->src_ip = 0x0a000001;
		g->dst_ip = 0x0a010001;
		g->sport = 40000;
		g->dport = 5201;
		g->seq = c->seq + perm[k] * MSS;
		g->len = MSS;
	}
	size_t n = steer_sorter_sort_batch(c->s, c->segs, BATCH, c->out);
	if (n != BATCH)
		return -1;
	if (check) {
		/* Every index once; within each block of 32 arrivals, sorted. */
		uint64_t seen = 0;
		for (int k = 0; k < BATCH; k++)
			seen |= 1ull << c->out[k];
		if (seen != ~0ull)
			return -1;
	}
	c->seq += BATCH * MSS;
	return (int)n;
}

/* Steer with descriptors prebuilt (the sequence numbers repeat; the sorter
 * keeps no state across blocks, so that does not change its work). */
static int steer_loaded_batch(struct steer_ctx *c)
{
	return (int)steer_sorter_sort_loaded(c->s, c->out);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 21;
	char *eal_argv[] = {"reorder_bench", "--no-huge", "--no-pci", "-m", "256",
			    "--no-shconf", "--no-telemetry", "-l", "0", "--log-level", "lib.eal:error",
			    NULL};
	int eal_argc = (int)(sizeof(eal_argv) / sizeof(eal_argv[0])) - 1;
	if (rte_eal_init(eal_argc, eal_argv) < 0) {
		fprintf(stderr, "rte_eal_init: %s (rte_errno %d)\n", rte_strerror(rte_errno),
			rte_errno);
		return 3;
	}
	struct rte_mempool *mp =
		rte_pktmbuf_pool_create("bench", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	if (!mp) {
		fprintf(stderr, "rte_pktmbuf_pool_create: %s\n", rte_strerror(rte_errno));
		return 3;
	}
	struct dpdk_ctx d = {0};
	/* Window of 1024 packets (power of two >= the batch). */
	d.rb = rte_reorder_create("bench", (unsigned)rte_socket_id(), 1024);
	if (!d.rb) {
		fprintf(stderr, "rte_reorder_create: %s\n", rte_strerror(rte_errno));
		return 3;
	}
	if (rte_pktmbuf_alloc_bulk(mp, d.m, BATCH) != 0) {
		fprintf(stderr, "rte_pktmbuf_alloc_bulk failed\n");
		return 3;
	}
	d.base = UINT32_MAX - 20; /* wraps 2^32 in the first batch */
	struct steer_ctx s = {0};
	s.s = steer_sorter_new(32, 512);
	if (!s.s) {
		fprintf(stderr, "steer_sorter_new failed\n");
		return 3;
	}
	s.seq = UINT32_MAX - 20 * MSS;

	uint32_t perm[2][BATCH];
	make_perm(perm[0], 0);
	make_perm(perm[1], 1);
	const char *names[2] = {"in_order_1flow", "reordered10_1flow"};
	printf("batch %d, %ld batches per timed pass, %d rounds (median)\n", BATCH, iters,
	       rounds);
	printf("reordered10: %d of %d arrive below an earlier sequence number\n",
	       out_of_order(perm[1]), BATCH);

	/* Correctness and warm-up. */
	for (int c = 0; c < 2; c++)
		for (int w = 0; w < 1000; w++)
			if (dpdk_batch(&d, perm[c], 1) != BATCH || steer_batch(&s, perm[c], 1) != BATCH) {
				fprintf(stderr, "check failed (%s)\n", names[c]);
				return 1;
			}

	/* A second sorter for the prebuilt descriptors of each case. */
	struct steer_ctx pre[2] = {{0}, {0}};
	for (int c = 0; c < 2; c++) {
		pre[c].s = steer_sorter_new(32, 512);
		pre[c].seq = UINT32_MAX - 20 * MSS;
		if (!pre[c].s || steer_batch(&pre[c], perm[c], 1) != BATCH) {
			fprintf(stderr, "steer prebuilt setup failed\n");
			return 1;
		}
		pre[c].seq -= BATCH * MSS;
		steer_batch(&pre[c], perm[c], 0);
		steer_sorter_load(pre[c].s, pre[c].segs, BATCH);
	}

	double *mpps = calloc((size_t)rounds * 6, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		for (int c = 0; c < 2; c++) {
			for (int impl = 0; impl < 3; impl++) {
				/* Rotate which goes first each round. */
				int which = (impl + r) % 3;
				double t0 = now_s();
				for (long i = 0; i < iters; i++) {
					int got = which == 0   ? dpdk_batch(&d, perm[c], 0)
						  : which == 1 ? steer_batch(&s, perm[c], 0)
							       : steer_loaded_batch(&pre[c]);
					if (got != BATCH) {
						fprintf(stderr, "batch failed\n");
						return 1;
					}
				}
				double dt = now_s() - t0;
				mpps[(c * 3 + which) * rounds + r] = iters * BATCH / dt / 1e6;
			}
		}
	}
	printf("Mpps, median over rounds [min-max]; steer/rte = steer (with descriptor build) / "
	       "rte_reorder\n");
	printf("%-18s %-20s %-20s %-20s %s\n", "case", "rte_reorder", "steer",
	       "steer (prebuilt)", "steer/rte");
	for (int c = 0; c < 2; c++) {
		double med[3];
		char col[3][32];
		for (int k = 0; k < 3; k++) {
			double *m = mpps + (c * 3 + k) * rounds;
			qsort(m, (size_t)rounds, sizeof(double), cmp_double);
			med[k] = m[rounds / 2];
			snprintf(col[k], sizeof(col[k]), "%.1f [%.1f-%.1f]", med[k], m[0],
				 m[rounds - 1]);
		}
		printf("%-18s %-20s %-20s %-20s %.2f\n", names[c], col[0], col[1], col[2],
		       med[1] / med[0]);
	}
	for (int c = 0; c < 2; c++)
		steer_sorter_free(pre[c].s);
	free(mpps);
	steer_sorter_free(s.s);
	rte_reorder_free(d.rb);
	rte_eal_cleanup();
	return 0;
}
