/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * steer_counters.h: the per-CPU event counters of Steer's BPF programs that
 * count events by slot (the AF_XDP redirect in pktio, the cgroup binder in
 * binder).
 *
 * STEER_EVENT_COUNTERS(max) declares the map `stats` (a per-CPU array: key
 * the event's slot, 0..max-1; value a __u64 count of that event on that
 * CPU) and `count(slot)`, which adds one. Per-CPU values need no atomics
 * (xdp-tutorial's common/xdp_stats_kern.h): each CPU writes only its own
 * copy, and the loader sums the copies when it reads the map. Each program
 * names its slots in its own header and comments its `stats` map where it
 * uses this macro.
 *
 * Why it lives in crates/buildkit/bpf: buildkit compiles every BPF program
 * of the workspace and puts this directory on clang's include path, so no
 * crate reaches into another for it.
 *
 * Used *ONLY* by BPF programs.
 */
#ifndef STEER_COUNTERS_H
#define STEER_COUNTERS_H

#ifndef __bpf__
#error "steer_counters.h is for BPF programs only"
#endif

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define STEER_EVENT_COUNTERS(max)                                    \
	struct {                                                     \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);             \
		__uint(max_entries, max);                            \
		__type(key, __u32);                                  \
		__type(value, __u64);                                \
	} stats SEC(".maps");                                        \
                                                                     \
	static __always_inline void count(__u32 slot)                \
	{                                                            \
		__u64 *v = bpf_map_lookup_elem(&stats, &slot);       \
                                                                     \
		if (v)                                               \
			*v += 1;                                     \
	}

#endif /* STEER_COUNTERS_H */
