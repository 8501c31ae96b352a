/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * binder.h: the structs shared by connect.bpf.c (kernel) and the loader
 * (crates/binder/src/cgroup.rs, through the generated skeleton types).
 * Fixed-width fields, padding spelled out, no implicit holes.
 */
#ifndef STEER_BINDER_H
#define STEER_BINDER_H

#include <linux/types.h>

/* Planned ports per destination (one plan slot each). */
#define BINDER_MAX_PORTS 64
/* bpf_bind attempts per connect before the kernel chooses the port. */
#define BINDER_MAX_TRIES 8

/* Address family tags used in keys (not AF_*: 4 or 6). */
#define BINDER_FAMILY_V4 4
#define BINDER_FAMILY_V6 6

/* A destination: remote address and port.
 * addr: network order; IPv4 in addr[0..4], rest zero.
 * port: network order. */
struct binder_dest {
	__u8 addr[16];
	__u16 port;
	__u8 family;
	__u8 pad;
};

/* A remote host: the key of the slot counter shared by all its ports. */
struct binder_host {
	__u8 addr[16];
	__u8 family;
	__u8 pad[3];
};

/* The plan for one destination.
 * local: the source address the ports were computed for, network order
 * (all zero: bind the wildcard address and let routing choose).
 * ports[i], host order, is the port of slot i; slot i lands on the same
 * receiver queue for every destination port of one host, so a counter per
 * host spreads connections to different ports of that host too. */
struct binder_plan {
	__u8 local[16];
	__u32 count;
	__u32 pad;
	__u16 ports[BINDER_MAX_PORTS];
};

/* Per-host slot counter (atomic increment per bind attempt). */
struct binder_counter {
	__u64 next;
};

/* Indices of the stats array. */
enum binder_stat {
	BINDER_STAT_BOUND = 0,     /* connects bound to a planned port */
	BINDER_STAT_BIND_FAILED,   /* bpf_bind attempts that failed (port in use, ...) */
	BINDER_STAT_FALLBACK,      /* connects left to the kernel after BINDER_MAX_TRIES failures */
	BINDER_STAT_NO_PLAN,       /* TCP connects to a destination without a plan */
	BINDER_STAT_SKIPPED,       /* not TCP, already bound, SO_REUSEADDR/SO_REUSEPORT, IPv4-mapped IPv6 */
	BINDER_STAT_MAX,
};

#endif
