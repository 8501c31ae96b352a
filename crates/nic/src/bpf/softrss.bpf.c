// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * softrss.bpf.c: software RSS for devices without it (veth, single-queue
 * virtio), as an XDP program.
 *
 * For each frame: parse Ethernet (+ up to two VLAN tags), IPv4 / IPv6,
 * TCP / UDP; build the Toeplitz input exactly as rss::HashInput::build does
 * (fields per flow type, input transform); hash it with the key's byte tables
 * (rss::ToeplitzTable); pick the indirection entry hash % table_size; count
 * the frame for its queue; and hand it to the queue's CPU through a cpumap
 * (or pass it up here when this CPU is that CPU).
 *
 * Data plane and control plane meet only at the maps below; the loader is
 * crates/nic/src/loader.rs and the shared structs are in softrss.h.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "softrss.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Datapath configuration.
 * key: u32 0; value: struct softrss_config (host order).
 * writer: loader (attach, update); reader: this program, `stats`, `update`. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct softrss_config);
} config SEC(".maps");

/* Toeplitz byte tables of the current key.
 * key: u32 0; value: struct softrss_toeplitz (36 x 256 u32 hash
 * contributions, host order). writer: loader; reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct softrss_toeplitz);
} toeplitz SEC(".maps");

/* Indirection table. key: u32 entry index (hash % config.table_size);
 * value: struct softrss_indir_entry (queue and its CPU). Sized by the loader
 * for the largest table Steer accepts, so `update` can change the size live.
 * writer: loader; reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SOFTRSS_MAX_TABLE);
	__type(key, __u32);
	__type(value, struct softrss_indir_entry);
} indir SEC(".maps");

/* Queue -> CPU delivery. key: u32 CPU id; value: struct bpf_cpumap_val
 * (qsize = frames buffered per CPU, no program). max_entries is set by the
 * loader to the number of possible CPUs. writer: loader; reader: kernel. */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, SOFTRSS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_map SEC(".maps");

/* Per-queue counters. key: u32 queue; value: struct softrss_counters
 * (frames, bytes from the Ethernet header). Per-CPU, so this program adds
 * without atomics: only one program instance runs per CPU at a time.
 * writer: this program (reset by `reset_stats`); reader: `stats`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SOFTRSS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct softrss_counters);
} queue_stats SEC(".maps");

/* Frames that are not IPv4/IPv6 (ARP, LLDP, truncated headers): passed up on
 * the current CPU, not counted in any queue. key: u32 0; value: struct
 * softrss_counters. Per-CPU. writer: this program; reader: `stats`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct softrss_counters);
} non_ip SEC(".maps");

/* Optional per-flow table (config.track_flows). key: struct softrss_flow_key
 * (the tuple as parsed, network order); value: struct softrss_flow_value
 * (queue, frames, bytes; counters added atomically since flows are shared by
 * CPUs). LRU, so it never fills up; the loader sizes it to 1 entry when
 * tracking is off. writer: this program; reader: `flows`, `clear_flows`. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SOFTRSS_MAX_FLOWS);
	__type(key, struct softrss_flow_key);
	__type(value, struct softrss_flow_value);
} flows SEC(".maps");

#define VLAN_HLEN 4
#define IPV4_MF 0x2000
#define IPV4_OFFSET 0x1fff

/* Byte k (in memory order) of a word loaded from memory. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BYTE(w, k) (((w) >> (8 * (k))) & 0xff)
#else
#define BYTE(w, k) (((w) >> (24 - 8 * (k))) & 0xff)
#endif

/* Toeplitz of 4 input bytes (a word as stored in the packet) at input
 * positions pos..pos+3. The caller guarantees pos + 4 <= SOFTRSS_MAX_INPUT. */
static __always_inline __u32 hash_word(const struct softrss_toeplitz *tt, __u32 pos, __u32 w)
{
	return tt->t[pos][BYTE(w, 0)] ^ tt->t[pos + 1][BYTE(w, 1)] ^
	       tt->t[pos + 2][BYTE(w, 2)] ^ tt->t[pos + 3][BYTE(w, 3)];
}

/* Toeplitz of a 2-byte port (as stored in the packet) at pos, pos+1. */
static __always_inline __u32 hash_port(const struct softrss_toeplitz *tt, __u32 pos, __u16 p)
{
	return tt->t[pos][BYTE((__u32)p, 0)] ^ tt->t[pos + 1][BYTE((__u32)p, 1)];
}

/* What the parser found. Addresses and ports stay in packet (network) order. */
struct parsed {
	__u32 src[4];
	__u32 dst[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;  /* IPPROTO_TCP, IPPROTO_UDP or SOFTRSS_PROTO_OTHER */
	__u8 family; /* SOFTRSS_FAMILY_* */
};

/* Hash of the input rss::HashInput::build makes: fields in the order source
 * address, destination address, source port, destination port, each only if
 * selected, after the input transform. `words` is 1 (IPv4) or 4 (IPv6). */
static __always_inline __u32 rss_hash(const struct softrss_toeplitz *tt, const struct softrss_config *cfg,
				      const struct parsed *pk, __u32 fields, int words)
{
	__u32 s[4], d[4];
	__u16 sp = pk->sport, dp = pk->dport;
	__u32 h = 0, pos = 0;
	int i;

	switch (cfg->transform) {
	case SOFTRSS_XFRM_SYM_XOR:
#pragma unroll
		for (i = 0; i < 4; i++)
			s[i] = d[i] = pk->src[i] ^ pk->dst[i];
		sp = dp = pk->sport ^ pk->dport;
		break;
	case SOFTRSS_XFRM_SYM_OR_XOR:
#pragma unroll
		for (i = 0; i < 4; i++) {
			s[i] = pk->src[i] | pk->dst[i];
			d[i] = pk->src[i] ^ pk->dst[i];
		}
		sp = pk->sport | pk->dport;
		dp = pk->sport ^ pk->dport;
		break;
	default:
#pragma unroll
		for (i = 0; i < 4; i++) {
			s[i] = pk->src[i];
			d[i] = pk->dst[i];
		}
		break;
	}

	if (fields & SOFTRSS_F_SRC_IP) {
#pragma unroll
		for (i = 0; i < 4; i++)
			if (i < words)
				h ^= hash_word(tt, 4 * i, s[i]);
		pos = 4 * words;
	}
	if (fields & SOFTRSS_F_DST_IP) {
		if (pos > SOFTRSS_MAX_INPUT - 4 * 4 - 4)
			return h;
#pragma unroll
		for (i = 0; i < 4; i++)
			if (i < words)
				h ^= hash_word(tt, pos + 4 * i, d[i]);
		pos += 4 * words;
	}
	if (pos > SOFTRSS_MAX_INPUT - 4)
		return h;
	if (fields & SOFTRSS_F_SRC_PORT) {
		h ^= hash_port(tt, pos, sp);
		pos += 2;
	}
	if (fields & SOFTRSS_F_DST_PORT)
		h ^= hash_port(tt, pos, dp);
	return h;
}

static __always_inline void count(void *map, __u32 key, __u64 len)
{
	struct softrss_counters *c = bpf_map_lookup_elem(map, &key);

	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

static __always_inline void track_flow(const struct parsed *pk, __u32 queue, __u64 len)
{
	struct softrss_flow_key key;
	struct softrss_flow_value *v;
	int i;

	__builtin_memset(&key, 0, sizeof(key));
#pragma unroll
	for (i = 0; i < 4; i++) {
		__builtin_memcpy(&key.src[4 * i], &pk->src[i], 4);
		__builtin_memcpy(&key.dst[4 * i], &pk->dst[i], 4);
	}
	key.src_port = pk->sport;
	key.dst_port = pk->dport;
	key.proto = pk->proto;
	key.family = pk->family;

	v = bpf_map_lookup_elem(&flows, &key);
	if (v) {
		__sync_fetch_and_add(&v->packets, 1);
		__sync_fetch_and_add(&v->bytes, len);
	} else {
		struct softrss_flow_value init = { .queue = queue, .packets = 1, .bytes = len };

		bpf_map_update_elem(&flows, &key, &init, BPF_NOEXIST);
	}
}

/* Reads the ports of a TCP or UDP header at l4, or leaves the flow a 2-tuple
 * (proto OTHER) if the header is cut short. */
static __always_inline void parse_ports(struct parsed *pk, void *l4, void *end, __u8 proto)
{
	__u16 *ports = l4;

	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return;
	if ((void *)(ports + 2) > end)
		return;
	pk->sport = ports[0];
	pk->dport = ports[1];
	pk->proto = proto;
}

SEC("xdp")
int softrss(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 len = (__u64)(end - data);
	struct ethhdr *eth = data;
	struct softrss_config *cfg;
	struct softrss_toeplitz *tt;
	struct softrss_indir_entry *entry;
	struct parsed pk;
	void *l3;
	__u16 eth_proto;
	__u32 zero = 0, fields, hash, index;
	int i, flow;

	if ((void *)(eth + 1) > end)
		goto non_ip;
	eth_proto = eth->h_proto;
	l3 = eth + 1;
#pragma unroll
	for (i = 0; i < 2; i++) {
		if (eth_proto != bpf_htons(ETH_P_8021Q) && eth_proto != bpf_htons(ETH_P_8021AD))
			break;
		if (l3 + VLAN_HLEN > end)
			goto non_ip;
		eth_proto = *(__u16 *)(l3 + 2);
		l3 += VLAN_HLEN;
	}

	__builtin_memset(&pk, 0, sizeof(pk));
	if (eth_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		__u32 ihl;

		if ((void *)(ip + 1) > end)
			goto non_ip;
		ihl = ip->ihl * 4;
		if (ihl < sizeof(*ip))
			goto non_ip;
		pk.src[0] = ip->saddr;
		pk.dst[0] = ip->daddr;
		pk.family = SOFTRSS_FAMILY_IPV4;
		/* Fragments hash the 2-tuple: only the first carries ports. */
		if (!(ip->frag_off & bpf_htons(IPV4_MF | IPV4_OFFSET)))
			parse_ports(&pk, l3 + ihl, end, ip->protocol);
	} else if (eth_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		void *next;
		__u8 nexthdr;

		if ((void *)(ip6 + 1) > end)
			goto non_ip;
		__builtin_memcpy(pk.src, &ip6->saddr, 16);
		__builtin_memcpy(pk.dst, &ip6->daddr, 16);
		pk.family = SOFTRSS_FAMILY_IPV6;
		nexthdr = ip6->nexthdr;
		next = ip6 + 1;
		/* Skip up to three hop-by-hop / routing / destination options
		 * headers; a fragment header (or anything else) ends the walk and
		 * the flow hashes the 2-tuple. */
#pragma unroll
		for (i = 0; i < 3; i++) {
			__u8 *ext = next;

			if (nexthdr != IPPROTO_HOPOPTS && nexthdr != IPPROTO_ROUTING &&
			    nexthdr != IPPROTO_DSTOPTS)
				break;
			if ((void *)(ext + 2) > end)
				goto hash;
			nexthdr = ext[0];
			next += (ext[1] + 1) * 8;
		}
		parse_ports(&pk, next, end, nexthdr);
	} else {
		goto non_ip;
	}

hash:
	cfg = bpf_map_lookup_elem(&config, &zero);
	tt = bpf_map_lookup_elem(&toeplitz, &zero);
	if (!cfg || !tt || cfg->table_size == 0)
		return XDP_PASS;

	if (pk.proto == IPPROTO_TCP)
		flow = pk.family == SOFTRSS_FAMILY_IPV4 ? SOFTRSS_FLOW_TCP4 : SOFTRSS_FLOW_TCP6;
	else if (pk.proto == IPPROTO_UDP)
		flow = pk.family == SOFTRSS_FAMILY_IPV4 ? SOFTRSS_FLOW_UDP4 : SOFTRSS_FLOW_UDP6;
	else
		flow = -1;
	fields = flow < 0 ? (SOFTRSS_F_SRC_IP | SOFTRSS_F_DST_IP) : cfg->fields[flow & 3];

	if (pk.family == SOFTRSS_FAMILY_IPV4)
		hash = rss_hash(tt, cfg, &pk, fields, 1);
	else
		hash = rss_hash(tt, cfg, &pk, fields, 4);

	index = hash % cfg->table_size;
	entry = bpf_map_lookup_elem(&indir, &index);
	if (!entry)
		return XDP_PASS;

	count(&queue_stats, entry->queue, len);
	if (cfg->track_flows)
		track_flow(&pk, entry->queue, len);

	/* Optional shortcut (config.same_cpu_pass): a frame for the CPU already
	 * running us goes up the stack here instead of through the cpumap. Same
	 * CPU, less work, but when the CPU running this program changes (the
	 * sender migrates), a flow's frames take two paths of different delay
	 * and TCP sees reordering; see docs/performance-xdp.md. */
	if (cfg->same_cpu_pass && entry->cpu == bpf_get_smp_processor_id())
		return XDP_PASS;
	return bpf_redirect_map(&cpu_map, entry->cpu, XDP_PASS);

non_ip:
	count(&non_ip, 0, len);
	return XDP_PASS;
}
