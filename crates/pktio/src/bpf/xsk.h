/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * xsk.h: the maps shared by xsk_redirect.bpf.c (kernel) and pktio's AF_XDP
 * backend (crates/pktio/src/xdp.rs, through the generated skeleton types).
 * Fixed-width fields, padding spelled out, no implicit holes.
 */
#ifndef STEER_PKTIO_XSK_H
#define STEER_PKTIO_XSK_H

#include <linux/types.h>

/* RX queues of one device that can each have an AF_XDP socket. */
#define XSK_MAX_QUEUES 64
/* Match rules (address, protocol, port) of one port. */
#define XSK_MAX_RULES 1024

/* config.mode: which frames go to the sockets. */
#define XSK_MODE_ALL 0   /* every frame (a raw port: the wire) */
#define XSK_MODE_RULES 1 /* frames matching a rule; the rest to the kernel */

/* stats slots (per CPU). */
#define XSK_STAT_REDIRECTED 0 /* handed to bpf_redirect_map */
#define XSK_STAT_PASSED 1     /* left to the kernel (no rule matched) */
#define XSK_STAT_NO_SOCKET 2  /* matched, but no socket on the RX queue */
#define XSK_STAT_MAX 3

/* Address family tags of rule keys (not AF_*). */
#define XSK_FAMILY_V4 4
#define XSK_FAMILY_V6 6

struct xsk_config {
	__u32 mode;
	__u32 pad;
};

/* A rule: frames to `addr` (network order; IPv4 in addr[0..4], rest zero)
 * with IP protocol `proto` and destination port `port` (network order).
 * proto 0 matches any protocol (and ARP for an IPv4 address), port 0 any
 * port (and frames without one: ICMP, fragments after the first). */
struct xsk_rule {
	__u8 addr[16];
	__u16 port;
	__u8 proto;
	__u8 family;
};

#endif
