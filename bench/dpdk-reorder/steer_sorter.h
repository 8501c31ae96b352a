/* C ABI of Steer's SRPIC sorter (bench/dpdk-reorder/steer-capi). */
#ifndef STEER_SORTER_H
#define STEER_SORTER_H

#include <stddef.h>
#include <stdint.h>

typedef struct steer_sorter steer_sorter;

/* One IPv4 TCP segment as a receive loop parses it (host byte order). */
struct steer_seg {
	uint32_t src_ip, dst_ip;
	uint16_t sport, dport;
	uint32_t seq; /* TCP sequence number */
	uint32_t len; /* payload bytes */
};

/* Listing 1 exactly (SorterConfig::paper) with this BlockSize and ring size;
 * NULL if they are invalid. */
steer_sorter *steer_sorter_new(uint32_t block_size, uint32_t ring_size);
void steer_sorter_free(steer_sorter *s);
/* One receive batch: builds a descriptor per segment (the 4-tuple's words
 * as they are: no address objects), pushes each, ends the batch (flush all).
 * out[0..n] receives the indices 0..n-1 in delivery order; returns how many
 * were written (always n). */
size_t steer_sorter_sort_batch(steer_sorter *s, const struct steer_seg *segs, size_t n,
			       uint32_t *out);

#endif
