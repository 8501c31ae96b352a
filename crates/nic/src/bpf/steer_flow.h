/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * steer_flow.h: the packet parser and the Toeplitz hash of Steer's XDP
 * programs, the software RSS (crates/nic/src/bpf/softrss.bpf.c) and the L2-DSR
 * load balancer (crates/lbxdp/src/bpf/lbxdp.bpf.c).
 *
 * Why one header: CrossRSS has the load balancer compute the very hash bits
 * its backends' RSS computes, so that a bucket names one core on every
 * backend. Two copies of the parser and the hash could drift apart silently;
 * one copy compiled into both programs cannot.
 *
 * Used *ONLY* by BPF programs (like xdp-tutorial's common/xdp_stats_kern.h):
 * static __always_inline functions over packet memory and stack structs that
 * never reach a map, so nothing here is part of the Rust boundary. Map keys
 * and values stay in softrss.h and lbxdp.h, whose Rust types the skeletons
 * generate from BTF.
 *
 * Why it lives in crates/nic/src/bpf: the hash is the software RSS's
 * (mirroring rss::HashInput::build and rss::ToeplitzTable), the crate that
 * owns it is nic, and lbxdp already depends on nic; both build.rs files put
 * this directory on clang's include path. A top-level include directory would
 * belong to no crate and still be reached by a path outside each crate.
 */
#ifndef STEER_FLOW_H
#define STEER_FLOW_H

#ifndef __bpf__
#error "steer_flow.h is for BPF programs only; boundary structs are in softrss.h / lbxdp.h"
#endif

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* ---- Parsing: a cursor moved header by header, each bounds-checked against
 * the end of the frame before it is read (xdp-tutorial
 * common/parsing_helpers.h). The verifier accepts a packet read only after
 * such a check, and a frame cut anywhere must never be read past its end. */

/* Where the next header starts. */
struct steer_cursor {
	void *pos;
};

/* Results of the parsers below besides a protocol number (which is >= 0). */
/* The header at the cursor is cut short: nothing of it was read. */
#define STEER_PARSE_SHORT   (-1)
/* IPv4 with IHL < 5: the fixed header is readable (*ip is set), its length
 * field is impossible (RFC 791 section 3.1: the minimum is 5 words). */
#define STEER_PARSE_INVALID (-2)
/* IPv6 whose fixed header is readable (*ip6 is set) but an extension header
 * is cut short, so no L4 header can be found. */
#define STEER_PARSE_NO_L4   (-3)

/* 802.1Q tags followed: one, or two for 802.1ad (QinQ). */
#define STEER_VLAN_MAX 2
/* IPv6 extension headers skipped before giving up on finding ports. */
#define STEER_IPV6_EXT_MAX 3

/* The 4 bytes after a TPID (IEEE 802.1Q): tag control, then the ethertype
 * of what follows (network order). */
struct steer_vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

/* IPv4 flags/fragment offset field (RFC 791 section 3.1), host order. */
#define STEER_IPV4_MF     0x2000
#define STEER_IPV4_OFFSET 0x1fff

/* Ethernet header and up to STEER_VLAN_MAX VLAN tags at the cursor. Returns
 * the ethertype of what follows (network order, as in the frame) with *eth set
 * and the cursor after the last tag, or STEER_PARSE_SHORT if the header or a
 * tag is cut short. A third tag is returned as the ethertype (not IP). */
static __always_inline int steer_parse_eth(struct steer_cursor *c, void *end, struct ethhdr **eth)
{
	struct ethhdr *e = c->pos;
	__u16 proto;
	int i;

	if ((void *)(e + 1) > end)
		return STEER_PARSE_SHORT;
	*eth = e;
	proto = e->h_proto;
	c->pos = e + 1;
#pragma unroll
	for (i = 0; i < STEER_VLAN_MAX; i++) {
		struct steer_vlan_hdr *v = c->pos;

		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(v + 1) > end)
			return STEER_PARSE_SHORT;
		proto = v->encap_proto;
		c->pos = v + 1;
	}
	return proto;
}

/* IPv4 header at the cursor (RFC 791). Returns its protocol with *ip set and
 * the cursor after the options (IHL words), STEER_PARSE_SHORT if the fixed 20
 * bytes are cut short, or STEER_PARSE_INVALID (with *ip set) if IHL < 5.
 * The options are not bounds-checked here: what reads at the cursor checks
 * its own bytes, so a frame cut inside the options fails that check. */
static __always_inline int steer_parse_ipv4(struct steer_cursor *c, void *end, struct iphdr **ip)
{
	struct iphdr *h = c->pos;
	__u32 ihl;

	if ((void *)(h + 1) > end)
		return STEER_PARSE_SHORT;
	*ip = h;
	ihl = h->ihl * 4;
	if (ihl < sizeof(*h))
		return STEER_PARSE_INVALID;
	c->pos = (void *)h + ihl;
	return h->protocol;
}

/* Whether an IPv4 packet is a fragment (more fragments, or a non-zero
 * offset). Only the first fragment carries the L4 header, so RSS hashes every
 * fragment as the 2-tuple (rss::HashInput::build). */
static __always_inline int steer_ipv4_is_fragment(const struct iphdr *ip)
{
	return (ip->frag_off & bpf_htons(STEER_IPV4_MF | STEER_IPV4_OFFSET)) != 0;
}

/* IPv6 header at the cursor (RFC 8200 section 3), then up to
 * STEER_IPV6_EXT_MAX hop-by-hop, routing and destination options headers
 * (RFC 8200 section 4.3-4.6: each begins with Next Header and Hdr Ext Len,
 * its length in 8-octet units not counting the first 8). Returns the next
 * header after them with *ip6 set and the cursor at it: a fragment header
 * (section 4.5), a further extension header or anything else is returned as
 * is, so the caller finds no ports and hashes the 2-tuple. STEER_PARSE_SHORT
 * if the fixed 40 bytes are cut short; STEER_PARSE_NO_L4 (*ip6 set) if an
 * extension header's first two bytes are. */
static __always_inline int steer_parse_ipv6(struct steer_cursor *c, void *end, struct ipv6hdr **ip6)
{
	struct ipv6hdr *h = c->pos;
	__u8 nexthdr;
	int i;

	if ((void *)(h + 1) > end)
		return STEER_PARSE_SHORT;
	*ip6 = h;
	nexthdr = h->nexthdr;
	c->pos = h + 1;
#pragma unroll
	for (i = 0; i < STEER_IPV6_EXT_MAX; i++) {
		__u8 *ext = c->pos;

		if (nexthdr != IPPROTO_HOPOPTS && nexthdr != IPPROTO_ROUTING && nexthdr != IPPROTO_DSTOPTS)
			break;
		if ((void *)(ext + 2) > end)
			return STEER_PARSE_NO_L4;
		nexthdr = ext[0];
		c->pos += (ext[1] + 1) * 8;
	}
	return nexthdr;
}

/* Source and destination port at the cursor: the first four bytes of both a
 * TCP (RFC 9293 section 3.1) and a UDP (RFC 768) header, stored in network
 * order. Returns 0 and sets both, or STEER_PARSE_SHORT and sets neither. The
 * cursor stays at the L4 header, whose other fields a caller may read next
 * (the load balancer reads the TCP flags). */
static __always_inline int steer_parse_ports(const struct steer_cursor *c, void *end, __u16 *sport,
					     __u16 *dport)
{
	__u16 *ports = c->pos;

	if ((void *)(ports + 2) > end)
		return STEER_PARSE_SHORT;
	*sport = ports[0];
	*dport = ports[1];
	return 0;
}

/* ---- Toeplitz hash (Microsoft, "RSS hashing functions" and "Verifying the
 * RSS hash calculation", learn.microsoft.com/windows-hardware/drivers/network).
 *
 * The Toeplitz hash is linear over GF(2) in its input, so the hash of an
 * input is the XOR, over its bytes, of the hash of an input holding only that
 * byte at that position. The loader precomputes those from the key
 * (rss::ToeplitzTable): t[p][v] is the hash of byte value v at input position
 * p, and hashing costs one load per input byte (a bit-serial loop over the
 * key does not pass the verifier). */

/* Fields of the input, in input order (the Microsoft spec's 4-tuple order:
 * source address, destination address, source port, destination port; the
 * same bits as rss::HashFields, SOFTRSS_F_* and LBXDP_F_*, which each program
 * asserts). */
#define STEER_RSS_F_SRC_IP   (1u << 0)
#define STEER_RSS_F_DST_IP   (1u << 1)
#define STEER_RSS_F_SRC_PORT (1u << 2)
#define STEER_RSS_F_DST_PORT (1u << 3)

/* Rows a table needs for the whole tuple of a family: 8 * words + 4. */
#define STEER_RSS_INPUT_IPV4 12
#define STEER_RSS_INPUT_IPV6 36

/* What is hashed, after any input transform: addresses and ports as stored
 * in the packet (network order). IPv4 uses src[0] and dst[0]. */
struct steer_rss_input {
	__u32 src[4];
	__u32 dst[4];
	__u16 sport;
	__u16 dport;
};

/* Byte k (in memory order) of a word loaded from packet memory. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define STEER_BYTE(w, k) (((w) >> (8 * (k))) & 0xff)
#else
#define STEER_BYTE(w, k) (((w) >> (24 - 8 * (k))) & 0xff)
#endif

/* Hash contribution of 4 input bytes (a word as stored in the packet) at
 * input positions pos..pos+3. The caller has checked pos + 4 <= rows. */
static __always_inline __u32 steer_toeplitz_word(const __u32 (*t)[256], __u32 pos, __u32 w)
{
	return t[pos][STEER_BYTE(w, 0)] ^ t[pos + 1][STEER_BYTE(w, 1)] ^ t[pos + 2][STEER_BYTE(w, 2)] ^
	       t[pos + 3][STEER_BYTE(w, 3)];
}

/* Hash contribution of a port (as stored in the packet) at pos, pos+1. The
 * caller has checked pos + 2 <= rows. */
static __always_inline __u32 steer_toeplitz_port(const __u32 (*t)[256], __u32 pos, __u16 p)
{
	return t[pos][STEER_BYTE((__u32)p, 0)] ^ t[pos + 1][STEER_BYTE((__u32)p, 1)];
}

/* The Toeplitz hash of the input rss::HashInput::build makes: the fields
 * selected by `fields` (STEER_RSS_F_*), each only if selected, packed in
 * input order. `t` is the key's byte table with `rows` input positions;
 * `words` is 1 (IPv4) or 4 (IPv6). Callers pass constants for rows and words
 * (the function is inlined), so the bounds checks below, which never fail for
 * a table of at least 8 * words + 4 rows, fold or give the verifier the
 * bound it needs on every table index. */
static __always_inline __u32 steer_toeplitz(const __u32 (*t)[256], __u32 rows,
					    const struct steer_rss_input *in, __u32 fields, int words)
{
	__u32 h = 0, pos = 0;
	int i;

	if (fields & STEER_RSS_F_SRC_IP) {
		if (4 * words > rows)
			return h;
#pragma unroll
		for (i = 0; i < 4; i++)
			if (i < words)
				h ^= steer_toeplitz_word(t, 4 * i, in->src[i]);
		pos = 4 * words;
	}
	if (fields & STEER_RSS_F_DST_IP) {
		if (pos + 4 * words > rows)
			return h;
#pragma unroll
		for (i = 0; i < 4; i++)
			if (i < words)
				h ^= steer_toeplitz_word(t, pos + 4 * i, in->dst[i]);
		pos += 4 * words;
	}
	if (fields & STEER_RSS_F_SRC_PORT) {
		if (pos + 2 > rows)
			return h;
		h ^= steer_toeplitz_port(t, pos, in->sport);
		pos += 2;
	}
	if (fields & STEER_RSS_F_DST_PORT) {
		if (pos + 2 > rows)
			return h;
		h ^= steer_toeplitz_port(t, pos, in->dport);
	}
	return h;
}

#endif /* STEER_FLOW_H */
