/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * lbxdp.h: the boundary between the XDP load balancer (lbxdp.bpf.c) and its
 * control plane (crates/lbxdp/src/maps.rs). The maps themselves, each with
 * key, value, writer and reader, are declared in lbxdp.bpf.c; every struct a
 * map holds is here.
 *
 * All fields are fixed-width, host order unless a comment says "network
 * order", and padding is explicit, so the layout is the same in BPF and in
 * the Rust types the skeleton generates from BTF.
 */
#ifndef STEER_LBXDP_H
#define STEER_LBXDP_H

#ifndef __u32
#include <linux/types.h>
#endif

/* Toeplitz input of an IPv4 4-tuple (the VIP is IPv4): 12 bytes. */
#define LBXDP_MAX_INPUT 12
/* Largest bucket count (= the backends' indirection table size). */
#define LBXDP_MAX_BUCKETS 4096
/* Backend slots; a slot number is the server id of lb::BucketTable. */
#define LBXDP_MAX_BACKENDS 64
/* Cores (receive queues) per backend that crossrss-plus budgets. */
#define LBXDP_MAX_CORES 64
/* Maglev lookup table size (Katran's default, a prime). */
#define LBXDP_RING_SIZE 65537
/* Ranked candidates per bucket (lb::controller::PLUS_CANDIDATES). */
#define LBXDP_CANDIDATES 4
/* Connection table entries (LRU). */
#define LBXDP_MAX_CONNS 262144

/* Bits of lbxdp_config.fields_tcp / fields_udp (same as softrss.h). */
#define LBXDP_F_SRC_IP   (1u << 0)
#define LBXDP_F_DST_IP   (1u << 1)
#define LBXDP_F_SRC_PORT (1u << 2)
#define LBXDP_F_DST_PORT (1u << 3)

/* lbxdp_config.mode: how a new connection picks its backend. */
/* bucket = toeplitz % buckets; backend = map `buckets`[bucket]
 * (policies hash, crossrss). */
#define LBXDP_MODE_TABLE 0
/* Per-CPU round robin over map `healthy` (policy rr). */
#define LBXDP_MODE_RR    1
/* Maglev: backend = map `ring`[toeplitz % LBXDP_RING_SIZE] (policy maglev). */
#define LBXDP_MODE_RING  2
/* crossrss-plus: the first of the bucket's ranked `candidates` whose core
 * for the bucket took fewer than conn_budget new connections this
 * interval (lb::PlusTable::pick). */
#define LBXDP_MODE_PLUS  3

/* The datapath configuration: map `config`, key 0. */
struct lbxdp_config {
	/* Virtual IP, network order. 0: not configured, every frame passes. */
	__u32 vip;
	/* LBXDP_MODE_*. */
	__u32 mode;
	/* Buckets in use: bucket = toeplitz hash % buckets. 1..=LBXDP_MAX_BUCKETS. */
	__u32 buckets;
	/* LBXDP_F_* bits the backends' RSS hashes for TCP and UDP over IPv4
	 * (rss::HashFieldsByFlow tcp4 / udp4). */
	__u32 fields_tcp;
	__u32 fields_udp;
	/* Entries of map `healthy` in use (0: no backend may take new
	 * connections; they are dropped and counted). */
	__u32 healthy_count;
	/* Controller interval number; a connection created in this interval
	 * counts its packets in `bucket_stats` (crossrss-plus's new load). */
	__u32 epoch;
	/* crossrss-plus: new connections one core may take per interval. */
	__u32 conn_budget;
	/* crossrss-plus: candidates per bucket in use (1..=LBXDP_CANDIDATES). */
	__u32 candidates;
	/* The load balancer's own MAC: the source of every forwarded frame,
	 * so the switch keeps learning clients' MACs on the clients' ports. */
	__u8 lb_mac[6];
	__u8 pad[2];
};

/* One backend: map `backends`, key = slot (server id). */
struct lbxdp_backend {
	/* MAC of the backend's interface on the LB's L2 segment. */
	__u8 mac[6];
	__u8 pad[2];
	/* 1: may take new connections. 0: stale or gone; its established
	 * connections are still forwarded (they never move). */
	__u32 healthy;
};

/* Key of the connection table `conns`: the IPv4 5-tuple as in the packet. */
struct lbxdp_conn_key {
	/* Network order. */
	__u32 saddr;
	__u32 daddr;
	/* Network order. */
	__u16 sport;
	__u16 dport;
	/* IPPROTO_TCP or IPPROTO_UDP. */
	__u8 proto;
	__u8 pad[3];
};

/* Value of `conns`. */
struct lbxdp_conn {
	/* Backend slot chosen at the connection's first packet. */
	__u32 backend;
	/* Its bucket (toeplitz % buckets at that time). */
	__u32 bucket;
	/* config.epoch when it was created. */
	__u32 epoch;
	__u32 pad;
};

/* The key's Toeplitz tables: map `toeplitz`, key 0. t[p * 256 + v] = hash
 * of an input whose only non-zero byte is v at position p
 * (rss::ToeplitzTable). One flat array, so the generated Rust type has a
 * Default. */
struct lbxdp_toeplitz {
	__u32 t[LBXDP_MAX_INPUT * 256];
};

/* Slots of the per-CPU counter array `stats` (one struct lbxdp_counters
 * each). Never use a bare number: these names are the interface. */
#define LBXDP_STAT_FORWARDED   0 /* to a backend (XDP_TX) */
#define LBXDP_STAT_NEW_CONN    1 /* connection-table misses that created an entry */
#define LBXDP_STAT_MISS_NONSYN 2 /* of those, TCP without SYN (entry evicted, LB restarted) */
#define LBXDP_STAT_PASS_OTHER  3 /* not for the VIP, or not IPv4 (ARP, IPv6): XDP_PASS */
#define LBXDP_STAT_MALFORMED   4 /* for the VIP but truncated L4 header: XDP_DROP */
#define LBXDP_STAT_FRAGMENT    5 /* IPv4 fragment for the VIP: XDP_DROP (no ports) */
#define LBXDP_STAT_NO_BACKEND  6 /* new connection, no healthy backend: XDP_DROP */
#define LBXDP_STAT_OTHER_PROTO 7 /* for the VIP, neither TCP nor UDP: XDP_PASS */
#define LBXDP_STAT_CONN_FULL   8 /* connection table insert failed (forwarded anyway) */
#define LBXDP_STAT_UNCONFIGURED 9 /* config.vip == 0 or no tables: XDP_PASS */
#define LBXDP_STATS 10

/* Frames and bytes (Ethernet header to end of frame). */
struct lbxdp_counters {
	__u64 packets;
	__u64 bytes;
};

/* Per backend: map `backend_stats` (per-CPU), key = slot. */
struct lbxdp_backend_counters {
	__u64 packets;
	__u64 bytes;
	/* Connections created towards this backend. */
	__u64 new_conns;
	__u64 pad;
};

/* Per bucket: map `bucket_stats` (per-CPU), key = bucket. What
 * crossrss-plus needs from the load balancer (lb::CrossRssPlus::update). */
struct lbxdp_bucket_counters {
	/* Connections created in the bucket. */
	__u64 new_conns;
	/* Packets of connections created in the current epoch. */
	__u64 new_packets;
};

#endif /* STEER_LBXDP_H */
