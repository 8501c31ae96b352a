// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xsk_redirect.bpf.c: the XDP program of pktio's AF_XDP backend. It hands
 * a frame to the AF_XDP socket bound to the RX queue it arrived on
 * (Documentation/networking/af_xdp.rst: a socket receives only from the
 * queue it is bound to) and leaves every other frame to the kernel.
 *
 * In XSK_MODE_ALL every frame goes to the socket (a raw port, as the wire
 * uses it). In XSK_MODE_RULES only frames for a data path's own addresses,
 * protocols and ports do (struct xsk_rule); ARP, neighbour discovery and
 * the namespace's other traffic stay with the kernel unless a rule names
 * them. A rule is looked up as (addr, proto, port), then (addr, proto, *),
 * then (addr, *, *).
 *
 * Control plane: crates/pktio/src/xdp.rs; structs: xsk.h.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "xsk.h"
#include "steer_counters.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* RX queue -> AF_XDP socket. writer: loader; reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XSK_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

/* One entry: struct xsk_config. writer: loader; reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xsk_config);
} config SEC(".maps");

/* Rules of XSK_MODE_RULES. writer: loader; reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XSK_MAX_RULES);
	__type(key, struct xsk_rule);
	__type(value, __u32);
} rules SEC(".maps");

/* Event counts (XSK_STAT_*, steer_counters.h). writer: this program;
 * reader: loader. */
STEER_EVENT_COUNTERS(XSK_STAT_MAX)

/* The ARP payload after the 8-byte fixed header, for Ethernet/IPv4. */
struct arp_ipv4 {
	__u8 sha[6];
	__u8 spa[4];
	__u8 tha[6];
	__u8 tpa[4];
} __attribute__((packed));

/* Fills `key` from the frame; returns 0 if it names something a rule can
 * match, -1 otherwise. key->port stays 0 when the frame has no port. */
static __always_inline int frame_key(void *data, void *end, struct xsk_rule *key)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	void *l3 = eth + 1;
	__u16 proto = eth->h_proto;
	__u8 l4proto;
	void *l4;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return -1;
		key->family = XSK_FAMILY_V4;
		__builtin_memcpy(key->addr, &ip->daddr, 4);
		l4proto = ip->protocol;
		/* Only the first fragment carries the ports (RFC 791). */
		if (ip->frag_off & bpf_htons(0x1fff))
			l4proto = 0;
		l4 = (void *)ip + ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		if ((void *)(ip6 + 1) > end)
			return -1;
		key->family = XSK_FAMILY_V6;
		__builtin_memcpy(key->addr, &ip6->daddr, 16);
		/* Extension headers are not walked: their frames match by
		 * address and protocol wildcard only. */
		l4proto = ip6->nexthdr;
		l4 = ip6 + 1;
	} else if (proto == bpf_htons(ETH_P_ARP)) {
		/* 8-byte header (htype, ptype, hlen, plen, oper), then IPv4. */
		struct arp_ipv4 *arp = l3 + 8;
		if ((void *)(arp + 1) > end)
			return -1;
		key->family = XSK_FAMILY_V4;
		__builtin_memcpy(key->addr, arp->tpa, 4);
		return 0;
	} else {
		return -1;
	}
	key->proto = l4proto;
	if (l4proto == IPPROTO_TCP || l4proto == IPPROTO_UDP) {
		/* The destination port is the second 16-bit field of both. */
		__u16 *ports = l4;
		if ((void *)(ports + 2) > end)
			return -1;
		key->port = ports[1];
	}
	return 0;
}

static __always_inline int matches(struct xsk_rule *key)
{
	if (bpf_map_lookup_elem(&rules, key))
		return 1;
	key->port = 0;
	if (bpf_map_lookup_elem(&rules, key))
		return 1;
	key->proto = 0;
	return bpf_map_lookup_elem(&rules, key) != NULL;
}

SEC("xdp")
int pktio_xsk_redirect(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct xsk_config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return XDP_PASS;
	if (cfg->mode == XSK_MODE_RULES) {
		struct xsk_rule key = {};
		void *data = (void *)(long)ctx->data;
		void *end = (void *)(long)ctx->data_end;
		if (frame_key(data, end, &key) != 0 || !matches(&key)) {
			count(XSK_STAT_PASSED);
			return XDP_PASS;
		}
	}
	/* XDP_PASS as the fallback action: no socket on this queue. */
	int act = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	count(act == XDP_REDIRECT ? XSK_STAT_REDIRECTED : XSK_STAT_NO_SOCKET);
	return act;
}
