/* DPDK rte_reorder vs Steer's SRPIC sorter on the same synthetic receive
 * batches of 64 descriptors, in one run.  `make -C bench/dpdk-reorder run`
 *
 * Workload: F interleaved TCP flows (F = 1, 16, 256): arrival k of a period
 * belongs to flow k % F and is that flow's packet k / F; segments of 1448
 * bytes, sequence numbers starting just below the 2^32 wrap and continuing
 * from period to period. A period is max(64, 4F) packets (so every flow has
 * at least 4 packets in it) cut into batches of 64. "reordered10": 10% of a
 * period's packets are swapped with a packet 1..3 later of the same flow
 * (the same permutation for every implementation, fixed seed). With 256
 * flows a batch holds 64 different flows and a swap crosses batches.
 *
 * Comparable work, per batch:
 *   rte_reorder (F = 1 only): one buffer; write each mbuf's sequence number
 *     (the packet index, the dynfield a driver or rte_distributor would set),
 *     rte_reorder_insert all 64, rte_reorder_drain until empty.
 *   rte_hash + rte_reorder: what an application writes for many flows: one
 *     rte_reorder buffer per flow, found with rte_hash_lookup_bulk_data on
 *     the batch's 64 4-tuples (CRC32 hash); set each mbuf's sequence number
 *     (its packet index within its flow), insert into its flow's buffer,
 *     then drain every flow the batch touched.
 *   Steer: fill a steer_seg (4-tuple, TCP seq, len) per segment, then one
 *     call: the sorter builds a descriptor per segment, pushes all 64
 *     (BlockSize 32, ring 512, Listing 1) and ends the batch (flush all),
 *     writing the 64 indices in delivery order.
 * All take references in arrival order and return them in sequence order
 * without touching payload. The semantics differ: rte_reorder is handed a
 * dense packet-counted sequence number that a receiver does not have (here
 * it is computed from the permutation, which favours rte_reorder), keeps one
 * window per buffer and hands out only the in-order prefix (a gap holds what
 * follows across batches until it is filled); the sorter derives order from
 * each flow's TCP byte sequence numbers, sorts within blocks and releases
 * everything at the end of the batch, gaps or not.
 *
 * EAL: --no-huge --no-pci -m 256 --no-shconf --no-telemetry -l 0. With
 * --in-memory instead of --no-shconf, DPDK 22.11 refuses: "Option
 * --legacy-mem is not compatible with --in-memory" (--no-huge implies
 * legacy memory).
 *
 * Usage: reorder_bench [--json] [ITERS [ROUNDS]] (defaults 200, 1001): each
 * round times ITERS batches of each case and implementation, interleaved
 * (the order rotates per round); the median over rounds, with p10..p90.
 * Short passes and many rounds keep the median clear of preemption on a
 * shared machine. With --json the table goes to stderr and stdout gets one
 * JSON object (the test matrix reads it: crates/bench/cases.toml,
 * "dpdk-reorder"): per case the three medians (null where an
 * implementation does not apply) and steer/rte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_reorder.h>

#include "../harness_json.h"

#include "steer_sorter.h"

#define BATCH 64
#define MSS 1448u
#define MAX_FLOWS 256
#define MAX_PERIOD (4 * MAX_FLOWS)
/* Sequence numbers of every flow's first packet: both wrap 2^32 early. */
#define SEQ0 (UINT32_MAX - 20 * MSS)
#define SEQN0 (UINT32_MAX - 20)

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

struct workload {
	char name[32];
	unsigned flows;
	unsigned period;  /* packets; a multiple of BATCH and of flows */
	unsigned per;     /* packets of one flow in a period */
	uint16_t flow[MAX_PERIOD]; /* arrival k: its flow */
	uint32_t pkt[MAX_PERIOD];  /* arrival k: its packet number in its flow, this period */
	int out_of_order;          /* arrivals below an earlier one of their flow */
};

static void make_workload(struct workload *w, unsigned flows, int reorder)
{
	w->flows = flows;
	w->period = 4 * flows > BATCH ? 4 * flows : BATCH;
	w->per = w->period / flows;
	snprintf(w->name, sizeof(w->name), "%s_%uflow%s", reorder ? "reordered10" : "in_order",
		 flows, flows > 1 ? "s" : "");
	for (unsigned k = 0; k < w->period; k++) {
		w->flow[k] = (uint16_t)(k % flows);
		w->pkt[k] = k / flows;
	}
	unsigned swaps = reorder ? (w->period + 5) / 10 : 0;
	for (unsigned s = 0; s < swaps; s++) {
		unsigned a = rnd(w->period - flows);
		unsigned b = a + (1 + rnd(3)) * flows;
		while (b >= w->period)
			b -= flows;
		uint32_t t = w->pkt[a];
		w->pkt[a] = w->pkt[b];
		w->pkt[b] = t;
	}
	uint32_t max[MAX_FLOWS];
	int seen[MAX_FLOWS] = {0};
	w->out_of_order = 0;
	for (unsigned k = 0; k < w->period; k++) {
		unsigned f = w->flow[k];
		if (seen[f] && w->pkt[k] < max[f])
			w->out_of_order++;
		else
			max[f] = w->pkt[k];
		seen[f] = 1;
	}
}

/* Where a batch is in the stream: batch b of period r. */
struct cursor {
	uint32_t r;
	unsigned b;
};

static void advance(struct cursor *c, const struct workload *w)
{
	if (++c->b == w->period / BATCH) {
		c->b = 0;
		c->r++;
	}
}

/* The 4-tuple of flow f, as parsed from its headers (host order). */
struct flow_key {
	uint32_t src_ip, dst_ip;
	uint16_t sport, dport;
};

static struct flow_key flow_key(unsigned f)
{
	return (struct flow_key){0x0a000001 + f, 0x0a010001, (uint16_t)(40000 + f), 5201};
}

/* rte_reorder, one buffer or one per flow. */
struct dpdk_case {
	const struct workload *w;
	struct rte_hash *hash;           /* 4-tuple -> flow index (NULL: one buffer) */
	struct rte_reorder_buffer *rb[MAX_FLOWS];
	struct rte_mbuf *m[MAX_PERIOD];  /* arrival k of a period uses m[k] */
	struct rte_mbuf *drained[MAX_PERIOD];
	uint32_t next[MAX_FLOWS];        /* checks: the next packet number per flow */
	uint32_t stamp[MAX_FLOWS];       /* the batch that last touched the flow */
	uint32_t batches;
	struct cursor at;
};

static uint32_t seqn_of(const struct dpdk_case *c, unsigned k)
{
	return SEQN0 + c->at.r * c->w->per + c->w->pkt[k];
}

/* Checks each drained mbuf is its flow's next packet (m->port = flow). */
static int check_drained(struct dpdk_case *c, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = c->drained[i];
		if (*rte_reorder_seqn(m) != SEQN0 + c->next[m->port]++)
			return -1;
	}
	return 0;
}

static int drain_all(struct rte_reorder_buffer *rb, struct rte_mbuf **out, unsigned room)
{
	unsigned got = 0, d;
	while (got < room && (d = rte_reorder_drain(rb, out + got, room - got)) > 0)
		got += d;
	return (int)got;
}

/* One batch through one rte_reorder buffer; returns the number drained, -1
 * on a failed insert or (check) a misordered drain. */
static int dpdk_single_batch(struct dpdk_case *c, int check)
{
	unsigned k0 = c->at.b * BATCH;
	for (unsigned i = 0; i < BATCH; i++) {
		struct rte_mbuf *m = c->m[k0 + i];
		*rte_reorder_seqn(m) = seqn_of(c, k0 + i);
		if (rte_reorder_insert(c->rb[0], m) != 0)
			return -1;
	}
	int got = drain_all(c->rb[0], c->drained, MAX_PERIOD);
	if (check && check_drained(c, (unsigned)got) != 0)
		return -1;
	advance(&c->at, c->w);
	return got;
}

/* One batch through per-flow buffers found by rte_hash. */
static int dpdk_flows_batch(struct dpdk_case *c, int check)
{
	const struct workload *w = c->w;
	unsigned k0 = c->at.b * BATCH;
	struct flow_key keys[BATCH];
	const void *key_ptrs[BATCH];
	void *data[BATCH];
	uint64_t hits = 0;
	uint16_t touched[BATCH];
	unsigned ntouched = 0;
	uint32_t stamp = ++c->batches;

	for (unsigned i = 0; i < BATCH; i++) {
		keys[i] = flow_key(w->flow[k0 + i]);
		key_ptrs[i] = &keys[i];
	}
	if (rte_hash_lookup_bulk_data(c->hash, key_ptrs, BATCH, &hits, data) != BATCH)
		return -1;
	for (unsigned i = 0; i < BATCH; i++) {
		unsigned f = (unsigned)(uintptr_t)data[i];
		struct rte_mbuf *m = c->m[k0 + i];
		*rte_reorder_seqn(m) = seqn_of(c, k0 + i);
		if (rte_reorder_insert(c->rb[f], m) != 0)
			return -1;
		if (c->stamp[f] != stamp) {
			c->stamp[f] = stamp;
			touched[ntouched++] = (uint16_t)f;
		}
	}
	int got = 0;
	for (unsigned t = 0; t < ntouched; t++)
		got += drain_all(c->rb[touched[t]], c->drained + got, MAX_PERIOD - (unsigned)got);
	if (check && check_drained(c, (unsigned)got) != 0)
		return -1;
	advance(&c->at, w);
	return got;
}

static struct rte_reorder_buffer *new_buffer(const char *name, struct rte_mbuf *primer)
{
	/* A window of 64 packets per buffer (a power of two). The first insert
	 * fixes the window start, so prime it with the packet just before the
	 * flow's first one: a reordered first batch is then not "too early". */
	struct rte_reorder_buffer *rb =
		rte_reorder_create(name, (unsigned)rte_socket_id(), 64);
	struct rte_mbuf *out;
	if (!rb)
		return NULL;
	*rte_reorder_seqn(primer) = SEQN0 - 1;
	if (rte_reorder_insert(rb, primer) != 0 || rte_reorder_drain(rb, &out, 1) != 1) {
		rte_reorder_free(rb);
		return NULL;
	}
	return rb;
}

static int dpdk_setup(struct dpdk_case *c, const struct workload *w, int with_hash, int id,
		      struct rte_mempool *mp)
{
	char name[RTE_HASH_NAMESIZE];
	memset(c, 0, sizeof(*c));
	c->w = w;
	if (rte_pktmbuf_alloc_bulk(mp, c->m, w->period) != 0)
		return -1;
	for (unsigned k = 0; k < w->period; k++)
		c->m[k]->port = w->flow[k];
	unsigned buffers = with_hash ? w->flows : 1;
	for (unsigned f = 0; f < buffers; f++) {
		snprintf(name, sizeof(name), "rb%d_%u", id, f);
		c->rb[f] = new_buffer(name, c->m[0]);
		if (!c->rb[f])
			return -1;
	}
	if (!with_hash)
		return 0;
	snprintf(name, sizeof(name), "flows%d", id);
	struct rte_hash_parameters p = {
		.name = name,
		.entries = 1024,
		.key_len = sizeof(struct flow_key),
		.hash_func = rte_hash_crc,
		.socket_id = (int)rte_socket_id(),
	};
	c->hash = rte_hash_create(&p);
	if (!c->hash)
		return -1;
	for (unsigned f = 0; f < w->flows; f++) {
		struct flow_key key = flow_key(f);
		if (rte_hash_add_key_data(c->hash, &key, (void *)(uintptr_t)f) != 0)
			return -1;
	}
	return 0;
}

struct steer_case {
	const struct workload *w;
	steer_sorter *s;
	struct steer_seg segs[BATCH];
	uint32_t out[BATCH];
	struct cursor at;
};

static int steer_batch(struct steer_case *c, int check)
{
	const struct workload *w = c->w;
	unsigned k0 = c->at.b * BATCH;
	for (unsigned i = 0; i < BATCH; i++) {
		unsigned k = k0 + i;
		struct flow_key key = flow_key(w->flow[k]);
		struct steer_seg *g = &c->segs[i];
		g->src_ip = key.src_ip;
		g->dst_ip = key.dst_ip;
		g->sport = key.sport;
		g->dport = key.dport;
		g->seq = SEQ0 + (c->at.r * w->per + w->pkt[k]) * MSS;
		g->len = MSS;
	}
	size_t n = steer_sorter_sort_batch(c->s, c->segs, BATCH, c->out);
	if (n != BATCH)
		return -1;
	if (check) {
		/* Every index once. */
		uint64_t seen = 0;
		for (int k = 0; k < BATCH; k++)
			seen |= 1ull << c->out[k];
		if (seen != ~0ull)
			return -1;
	}
	advance(&c->at, w);
	return (int)n;
}

enum impl { RTE_SINGLE, RTE_HASH, STEER, NIMPL };
static const char *impl_names[NIMPL] = {"rte_reorder", "rte_hash+rte_reorder", "steer"};

struct bench_case {
	struct workload w;
	struct dpdk_case dpdk[2]; /* RTE_SINGLE, RTE_HASH */
	struct steer_case steer;
	int has[NIMPL];
	double *mpps[NIMPL];
};

/* One batch of implementation `impl`; returns packets out, -1 on failure. */
static int run_batch(struct bench_case *bc, int impl, int check)
{
	switch (impl) {
	case RTE_SINGLE:
		return dpdk_single_batch(&bc->dpdk[0], check);
	case RTE_HASH:
		return dpdk_flows_batch(&bc->dpdk[1], check);
	default:
		return steer_batch(&bc->steer, check);
	}
}

/* The results as one JSON object on stdout. */
static void print_json(const struct bench_case *cases, int ncases, long iters, int rounds,
		       double med[][NIMPL])
{
	static const char *keys[NIMPL] = {"rte_reorder", "rte_hash_rte_reorder", "steer"};
	printf("{\"batch\": %d, \"iters\": %ld, \"rounds\": %d, \"unit\": \"Mpps\", "
	       "\"cases\": [",
	       BATCH, iters, rounds);
	for (int ci = 0; ci < ncases; ci++) {
		const struct bench_case *bc = &cases[ci];
		printf("%s{\"name\": \"%s\", \"flows\": %u", ci ? ", " : "", bc->w.name,
		       bc->w.flows);
		for (int impl = 0; impl < NIMPL; impl++) {
			if (bc->has[impl])
				printf(", \"%s\": %.3f", keys[impl], med[ci][impl]);
			else
				printf(", \"%s\": null", keys[impl]);
		}
		double base = bc->has[RTE_SINGLE] ? med[ci][RTE_SINGLE] : med[ci][RTE_HASH];
		printf(", \"steer_over_rte\": %.4f}", med[ci][STEER] / base);
	}
	printf("]}\n");
}

int main(int argc, char **argv)
{
	FILE *out;
	int json = take_json_flag(&argc, &argv, &out);
	long iters = argc > 1 ? atol(argv[1]) : 200;
	int rounds = argc > 2 ? atoi(argv[2]) : 1001;
	if (iters <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: reorder_bench [--json] [ITERS [ROUNDS]] (both > 0)\n");
		return 2;
	}
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
		rte_pktmbuf_pool_create("bench", 8191, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	if (!mp) {
		fprintf(stderr, "rte_pktmbuf_pool_create: %s\n", rte_strerror(rte_errno));
		return 3;
	}

	static const unsigned flow_counts[] = {1, 16, 256};
	enum { NCASES = 2 * (sizeof(flow_counts) / sizeof(flow_counts[0])) };
	struct bench_case *cases = calloc(NCASES, sizeof(*cases));
	if (!cases)
		return 3;
	for (int ci = 0; ci < NCASES; ci++) {
		struct bench_case *bc = &cases[ci];
		make_workload(&bc->w, flow_counts[ci / 2], ci % 2);
		bc->has[RTE_SINGLE] = bc->w.flows == 1;
		bc->has[RTE_HASH] = 1;
		bc->has[STEER] = 1;
		for (int impl = RTE_SINGLE; impl <= RTE_HASH; impl++)
			if (bc->has[impl] &&
			    dpdk_setup(&bc->dpdk[impl], &bc->w, impl == RTE_HASH, 2 * ci + impl, mp) != 0) {
				fprintf(stderr, "%s setup (%s): %s\n", impl_names[impl], bc->w.name,
					rte_strerror(rte_errno));
				return 3;
			}
		bc->steer.w = &bc->w;
		bc->steer.s = steer_sorter_new(32, 512);
		if (!bc->steer.s) {
			fprintf(stderr, "steer_sorter_new failed\n");
			return 3;
		}
		for (int impl = 0; impl < NIMPL; impl++)
			bc->mpps[impl] = calloc((size_t)rounds, sizeof(double));
	}

	fprintf(out, "batch %d, %ld batches per timed pass, %d rounds (median)\n", BATCH, iters,
		rounds);
	/* Correctness and warm-up: 64 periods of every case, checked. */
	for (int ci = 0; ci < NCASES; ci++) {
		struct bench_case *bc = &cases[ci];
		long batches = 64L * bc->w.period / BATCH;
		for (int impl = 0; impl < NIMPL; impl++) {
			long total = 0;
			for (long i = 0; bc->has[impl] && i < batches; i++) {
				int got = run_batch(bc, impl, 1);
				if (got < 0) {
					fprintf(stderr, "check failed: %s, %s\n", impl_names[impl],
						bc->w.name);
					return 1;
				}
				total += got;
			}
			if (bc->has[impl] && total != batches * BATCH) {
				fprintf(stderr, "check failed: %s, %s: %ld of %ld packets out\n",
					impl_names[impl], bc->w.name, total, batches * BATCH);
				return 1;
			}
		}
		if (bc->w.out_of_order)
			fprintf(out,
				"%s: %d of %u arrivals per period below an earlier one of their flow\n",
			       bc->w.name, bc->w.out_of_order, bc->w.period);
	}

	for (int r = 0; r < rounds; r++)
		for (int ci = 0; ci < NCASES; ci++) {
			struct bench_case *bc = &cases[ci];
			for (int j = 0; j < NIMPL; j++) {
				int impl = (j + r) % NIMPL; /* rotate which goes first */
				if (!bc->has[impl])
					continue;
				long out = 0;
				double t0 = now_s();
				for (long i = 0; i < iters; i++) {
					int got = run_batch(bc, impl, 0);
					if (got < 0) {
						fprintf(stderr, "batch failed: %s, %s\n",
							impl_names[impl], bc->w.name);
						return 1;
					}
					out += got;
				}
				double dt = now_s() - t0;
				(void)out;
				bc->mpps[impl][r] = iters * BATCH / dt / 1e6;
			}
		}

	fprintf(out, "Mpps, median over rounds [p10-p90]; steer/rte: steer / rte_reorder with one "
		     "flow, steer / rte_hash+rte_reorder with more\n");
	fprintf(out, "%-20s %-22s %-22s %-22s %s\n", "case", impl_names[0], impl_names[1],
		impl_names[2], "steer/rte");
	double medians[NCASES][NIMPL];
	for (int ci = 0; ci < NCASES; ci++) {
		struct bench_case *bc = &cases[ci];
		double *med = medians[ci];
		char col[NIMPL][32];
		for (int impl = 0; impl < NIMPL; impl++) {
			if (!bc->has[impl]) {
				snprintf(col[impl], sizeof(col[impl]), "n/a");
				continue;
			}
			double *m = bc->mpps[impl];
			qsort(m, (size_t)rounds, sizeof(double), cmp_double);
			med[impl] = m[rounds / 2];
			snprintf(col[impl], sizeof(col[impl]), "%.1f [%.1f-%.1f]", med[impl],
				 m[rounds / 10], m[rounds * 9 / 10]);
		}
		double base = bc->has[RTE_SINGLE] ? med[RTE_SINGLE] : med[RTE_HASH];
		fprintf(out, "%-20s %-22s %-22s %-22s %.2f\n", bc->w.name, col[0], col[1], col[2],
			med[STEER] / base);
	}
	if (json)
		print_json(cases, NCASES, iters, rounds, medians);
	for (int ci = 0; ci < NCASES; ci++) {
		for (int impl = 0; impl < NIMPL; impl++)
			free(cases[ci].mpps[impl]);
		steer_sorter_free(cases[ci].steer.s);
	}
	free(cases);
	rte_eal_cleanup();
	return 0;
}
