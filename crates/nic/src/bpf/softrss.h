/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * softrss.h: the boundary between the software RSS XDP program
 * (softrss.bpf.c) and its loader (crates/nic/src/loader.rs).
 *
 * Shared by both sides: every struct here is a map key or value. All fields
 * are fixed-width, little-endian host order unless a comment says
 * "network order", and padding is explicit so the layout is the same in BPF
 * and in the Rust types generated from BTF by the skeleton.
 */
#ifndef STEER_SOFTRSS_H
#define STEER_SOFTRSS_H

#ifndef __u32
#include <linux/types.h>
#endif

/* Longest Toeplitz input: two IPv6 addresses and two ports (rss::HashInput). */
#define SOFTRSS_MAX_INPUT 36
/* Largest indirection table the loader accepts (entries). */
#define SOFTRSS_MAX_TABLE 65536
/* Largest queue count the loader accepts; also the size of `queue_stats`. */
#define SOFTRSS_MAX_QUEUES 256
/* Largest CPU id a queue may be served by; the size of `cpu_map`. */
#define SOFTRSS_MAX_CPUS 256
/* Entries of the optional per-flow table. */
#define SOFTRSS_MAX_FLOWS 65536

/* Bits of softrss_config.fields[flow type] (rss::HashFields). */
#define SOFTRSS_F_SRC_IP   (1u << 0)
#define SOFTRSS_F_DST_IP   (1u << 1)
#define SOFTRSS_F_SRC_PORT (1u << 2)
#define SOFTRSS_F_DST_PORT (1u << 3)

/* Index of softrss_config.fields (rss::FlowType). */
#define SOFTRSS_FLOW_TCP4 0
#define SOFTRSS_FLOW_UDP4 1
#define SOFTRSS_FLOW_TCP6 2
#define SOFTRSS_FLOW_UDP6 3

/* softrss_config.transform (rss::InputTransform). */
#define SOFTRSS_XFRM_NONE       0
#define SOFTRSS_XFRM_SYM_XOR    1
#define SOFTRSS_XFRM_SYM_OR_XOR 2

/* flow_key.proto (rss::L4Proto): the IP protocol number for TCP and UDP, 0 for
 * everything hashed as a 2-tuple (other protocols and IP fragments). */
#define SOFTRSS_PROTO_OTHER 0

/* flow_key.family */
#define SOFTRSS_FAMILY_IPV4 4
#define SOFTRSS_FAMILY_IPV6 6

/* The datapath configuration: map `config`, key 0. */
struct softrss_config {
	/* Number of entries in `indir` that are used; packet uses entry
	 * hash % table_size. 1..=SOFTRSS_MAX_TABLE. */
	__u32 table_size;
	/* SOFTRSS_XFRM_* applied to the fields before hashing. */
	__u32 transform;
	/* SOFTRSS_F_* bits per SOFTRSS_FLOW_*. */
	__u32 fields[4];
	/* 1: count packets per flow in `flows`. */
	__u32 track_flows;
	/* The loader's cpumap queue size (read back by `update`; unused by BPF). */
	__u32 cpumap_qsize;
	/* Number of queues (stats readers; unused by BPF). */
	__u32 queues;
	/* 1: a frame whose queue CPU is the CPU running the program is passed
	 * up here (XDP_PASS) instead of through the cpumap. */
	__u32 same_cpu_pass;
	/* The kernel's id of this attachment's `cpu_map` (written by the
	 * loader once the map exists): the cpumap tracepoint programs count
	 * only events of this map, since the tracepoints fire for every
	 * cpumap on the machine. */
	__u32 cpumap_id;
	__u32 pad;
};

/* One indirection table entry: map `indir`, key = table index. */
struct softrss_indir_entry {
	/* Receive queue (0..queues). */
	__u32 queue;
	/* The CPU serving that queue (RssConfig.queue_cpus[queue]); kept here
	 * so the datapath needs one lookup per packet. */
	__u32 cpu;
};

/* The key's Toeplitz tables: map `toeplitz`, key 0.
 * t[p][v] = hash of an input whose only non-zero byte is v at position p
 * (exactly rss::ToeplitzTable). The hash of an input is the XOR over its
 * bytes; a zero byte contributes 0. */
struct softrss_toeplitz {
	__u32 t[SOFTRSS_MAX_INPUT][256];
};

/* Per-queue counters: map `queue_stats` (per-CPU), key = queue. */
struct softrss_counters {
	/* Frames steered to the queue. */
	__u64 packets;
	/* Their bytes, counted from the Ethernet header to the end of the frame. */
	__u64 bytes;
};

/* What happened to the frames handed to one destination CPU through the
 * cpumap: map `cpumap_stats` (per-CPU), key = destination CPU. Counted from
 * the kernel's own tracepoints (include/trace/events/xdp.h), so these are
 * the datapath's numbers, not the program's intentions. */
struct softrss_cpumap_counters {
	/* Frames a source CPU flushed towards the destination's ring
	 * (xdp_cpumap_enqueue `processed`). */
	__u64 enqueued;
	/* Of those, frames dropped because the ring (cpumap qsize) was full
	 * (xdp_cpumap_enqueue `drops`): the loss between the redirect and the
	 * destination CPU. */
	__u64 enqueue_drops;
	/* Frames the destination's kthread took off the ring and handed to
	 * the stack (xdp_cpumap_kthread `processed`). */
	__u64 kthread_processed;
	/* Frames the kthread dropped (xdp_cpumap_kthread `drops`: no skb). */
	__u64 kthread_drops;
};

/* Key of the optional per-flow table `flows`: the tuple as parsed from the
 * packet, before the input transform. Ports are 0 for proto OTHER. */
struct softrss_flow_key {
	/* Addresses in network order; IPv4 uses the first 4 bytes, rest 0. */
	__u8 src[16];
	__u8 dst[16];
	/* Ports in network order. */
	__u16 src_port;
	__u16 dst_port;
	/* 6 (TCP), 17 (UDP) or SOFTRSS_PROTO_OTHER. */
	__u8 proto;
	/* SOFTRSS_FAMILY_IPV4 or SOFTRSS_FAMILY_IPV6. */
	__u8 family;
	__u8 pad[2];
};

/* Value of `flows`. */
struct softrss_flow_value {
	__u32 queue;
	__u32 pad;
	__u64 packets;
	__u64 bytes;
};

#endif /* STEER_SOFTRSS_H */
