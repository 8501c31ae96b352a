// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * lbxdp.bpf.c: an L4 load balancer for one IPv4 virtual IP, as an XDP
 * program, with L2 direct server return (DSR).
 *
 * For each frame: parse Ethernet (+ up to two VLAN tags) and IPv4; a TCP or
 * UDP packet for the VIP is forwarded, anything else passes to the stack.
 * An established connection (found in `conns`) goes to its backend whatever
 * the tables say now; a new one hashes its tuple with the backends' Toeplitz
 * key and fields (the same bits their NICs compute), takes bucket = hash %
 * buckets and picks a backend by config.mode, and is recorded in `conns`.
 * Forwarding rewrites only the Ethernet addresses (destination: the
 * backend's MAC, source: ours) and sends the frame back out (XDP_TX); the
 * backends hold the VIP on their loopback and reply to clients directly.
 *
 * Data plane and control plane meet only at the maps below; the loader is
 * crates/lbxdp/src/maps.rs, the controller crates/lbxdp/src/control.rs, the
 * shared structs are in lbxdp.h.
 */
#include <linux/bpf.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lbxdp.h"
/* The software RSS's parser and Toeplitz hash (crates/nic/src/bpf, on the
 * include path from build.rs): one copy, so buckets here are the backends'. */
#include "steer_flow.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Datapath configuration. key: u32 0; value: struct lbxdp_config.
 * writer: control plane (written last in each update); reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lbxdp_config);
} config SEC(".maps");

/* Toeplitz byte tables of the backends' key. key: u32 0; value: struct
 * lbxdp_toeplitz (12 x 256 u32). writer: control plane (once); reader: this
 * program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lbxdp_toeplitz);
} toeplitz SEC(".maps");

/* The bucket table (lb::BucketTable). key: u32 bucket; value: u32 backend
 * slot. writer: controller, every interval (mode TABLE); reader: this
 * program, for new connections only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_MAX_BUCKETS);
	__type(key, __u32);
	__type(value, __u32);
} buckets SEC(".maps");

/* Maglev lookup table (lb::Maglev). key: u32 hash % LBXDP_RING_SIZE; value:
 * u32 backend slot. writer: controller when the healthy set changes (mode
 * RING); reader: this program, new connections only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_RING_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} ring SEC(".maps");

/* crossrss-plus's ranked candidates (lb::PlusTable::candidates). key: u32
 * bucket * LBXDP_CANDIDATES + rank; value: u32 backend slot. writer:
 * controller every interval (mode PLUS); reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_MAX_BUCKETS * LBXDP_CANDIDATES);
	__type(key, __u32);
	__type(value, __u32);
} candidates SEC(".maps");

/* Each backend's RSS: key: u32 slot * LBXDP_MAX_BUCKETS + bucket; value: u32
 * the core (queue) that backend's indirection table gives the bucket (from
 * its agent's report). writer: controller; reader: this program (mode PLUS). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_MAX_BACKENDS * LBXDP_MAX_BUCKETS);
	__type(key, __u32);
	__type(value, __u32);
} bucket_core SEC(".maps");

/* New connections given to each core this interval. key: u32 slot *
 * LBXDP_MAX_CORES + core; value: u32 count (atomic add: shared by CPUs).
 * writer: this program (add), controller (reset each interval); reader:
 * this program (mode PLUS), controller. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_MAX_BACKENDS * LBXDP_MAX_CORES);
	__type(key, __u32);
	__type(value, __u32);
} core_taken SEC(".maps");

/* Backends. key: u32 slot; value: struct lbxdp_backend (MAC, healthy).
 * writer: control plane; reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct lbxdp_backend);
} backends SEC(".maps");

/* Backends that may take new connections. key: u32 0..config.healthy_count;
 * value: u32 slot. writer: controller; reader: this program (mode RR, and
 * the fallback when a table names an unhealthy backend). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LBXDP_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, __u32);
} healthy SEC(".maps");

/* The connection table: what keeps established connections where they
 * are when tables change. key: struct lbxdp_conn_key (5-tuple, network
 * order); value: struct lbxdp_conn. LRU: a full table evicts the least
 * recently used connection instead of refusing new ones. writer: this
 * program (insert at a connection's first packet); reader: this program,
 * control plane (`steer lb run` reports its size). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LBXDP_MAX_CONNS);
	__type(key, struct lbxdp_conn_key);
	__type(value, struct lbxdp_conn);
} conns SEC(".maps");

/* Round-robin position of this CPU (mode RR). key: u32 0; value: u32.
 * Per-CPU. writer and reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rr_pos SEC(".maps");

/* Counters by LBXDP_STAT_* slot. value: struct lbxdp_counters. Per-CPU, so
 * no atomics (one program instance per CPU at a time). writer: this
 * program; reader: control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LBXDP_STATS);
	__type(key, __u32);
	__type(value, struct lbxdp_counters);
} stats SEC(".maps");

/* Per-backend counters. key: u32 slot; value: struct
 * lbxdp_backend_counters. Per-CPU. writer: this program; reader: control
 * plane (per-server load seen by the LB). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LBXDP_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct lbxdp_backend_counters);
} backend_stats SEC(".maps");

/* Per-bucket new load. key: u32 bucket; value: struct
 * lbxdp_bucket_counters. Per-CPU. writer: this program; reader: controller
 * (crossrss-plus's bucket_new_load and new_connections). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LBXDP_MAX_BUCKETS);
	__type(key, __u32);
	__type(value, struct lbxdp_bucket_counters);
} bucket_stats SEC(".maps");

_Static_assert(LBXDP_F_SRC_IP == STEER_RSS_F_SRC_IP && LBXDP_F_DST_IP == STEER_RSS_F_DST_IP &&
		       LBXDP_F_SRC_PORT == STEER_RSS_F_SRC_PORT && LBXDP_F_DST_PORT == STEER_RSS_F_DST_PORT,
	       "lbxdp.h field bits are steer_flow.h's");
_Static_assert(LBXDP_MAX_INPUT >= STEER_RSS_INPUT_IPV4, "toeplitz rows cover an IPv4 4-tuple");

static __always_inline void count(__u32 slot, __u64 len)
{
	struct lbxdp_counters *c = bpf_map_lookup_elem(&stats, &slot);

	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

/* Toeplitz of the IPv4 tuple with `fields` selected, exactly as the
 * backends' software RSS computes it (steer_toeplitz). lbxdp_toeplitz is one
 * flat array (so its generated Rust type has a Default) with the rows of
 * softrss_toeplitz: row p is t[p * 256 .. p * 256 + 255]. */
static __always_inline __u32 rss_hash(const struct lbxdp_toeplitz *tt, const struct lbxdp_conn_key *k,
				      __u32 fields)
{
	struct steer_rss_input in;

	__builtin_memset(&in, 0, sizeof(in));
	in.src[0] = k->saddr;
	in.dst[0] = k->daddr;
	in.sport = k->sport;
	in.dport = k->dport;
	return steer_toeplitz((const __u32(*)[256])tt->t, LBXDP_MAX_INPUT, &in, fields, 1);
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4]) |
		(a[5] ^ b[5])) == 0;
}

static __always_inline int usable(__u32 slot)
{
	struct lbxdp_backend *b = bpf_map_lookup_elem(&backends, &slot);

	return b && b->healthy;
}

/* The n-th healthy backend (n taken modulo their count). */
static __always_inline int nth_healthy(const struct lbxdp_config *cfg, __u32 n, __u32 *slot)
{
	__u32 *s;

	if (cfg->healthy_count == 0)
		return -1;
	n %= cfg->healthy_count;
	s = bpf_map_lookup_elem(&healthy, &n);
	if (!s)
		return -1;
	*slot = *s;
	return 0;
}

/* crossrss-plus: the first candidate whose core for `bucket` is under
 * budget, else the one whose core took the fewest (lb::PlusTable::pick). */
static __always_inline int pick_plus(const struct lbxdp_config *cfg, __u32 bucket, __u32 *slot)
{
	__u32 best = 0xffffffff, best_slot = 0, found = 0;
	int i;

#pragma unroll
	for (i = 0; i < LBXDP_CANDIDATES; i++) {
		__u32 idx = bucket * LBXDP_CANDIDATES + i, cidx, tidx;
		__u32 *s, *core, *taken, server;

		if (i >= cfg->candidates)
			break;
		s = bpf_map_lookup_elem(&candidates, &idx);
		if (!s)
			break;
		server = *s;
		if (server >= LBXDP_MAX_BACKENDS || !usable(server))
			continue;
		cidx = server * LBXDP_MAX_BUCKETS + bucket;
		core = bpf_map_lookup_elem(&bucket_core, &cidx);
		if (!core || *core >= LBXDP_MAX_CORES)
			continue;
		tidx = server * LBXDP_MAX_CORES + *core;
		taken = bpf_map_lookup_elem(&core_taken, &tidx);
		if (!taken)
			continue;
		if (*taken < cfg->conn_budget) {
			__sync_fetch_and_add(taken, 1);
			*slot = server;
			return 0;
		}
		if (*taken < best) {
			best = *taken;
			best_slot = server;
			found = 1;
		}
	}
	if (!found)
		return -1;
	{
		__u32 *core, *taken, cidx, tidx;

		cidx = best_slot * LBXDP_MAX_BUCKETS + bucket;
		core = bpf_map_lookup_elem(&bucket_core, &cidx);
		if (core && *core < LBXDP_MAX_CORES) {
			tidx = best_slot * LBXDP_MAX_CORES + *core;
			taken = bpf_map_lookup_elem(&core_taken, &tidx);
			if (taken)
				__sync_fetch_and_add(taken, 1);
		}
	}
	*slot = best_slot;
	return 0;
}

/* The backend of a new connection, by config.mode; -1 if none is usable. */
static __always_inline int pick_backend(const struct lbxdp_config *cfg, __u32 hash, __u32 bucket, __u32 *slot)
{
	__u32 zero = 0, *s, *pos, idx;

	switch (cfg->mode) {
	case LBXDP_MODE_RR:
		pos = bpf_map_lookup_elem(&rr_pos, &zero);
		if (!pos)
			return -1;
		*pos += 1;
		return nth_healthy(cfg, *pos + bpf_get_smp_processor_id(), slot);
	case LBXDP_MODE_RING:
		idx = hash % LBXDP_RING_SIZE;
		s = bpf_map_lookup_elem(&ring, &idx);
		break;
	case LBXDP_MODE_PLUS:
		if (pick_plus(cfg, bucket, slot) == 0)
			return 0;
		s = bpf_map_lookup_elem(&buckets, &bucket);
		break;
	default:
		s = bpf_map_lookup_elem(&buckets, &bucket);
		break;
	}
	if (s && *s < LBXDP_MAX_BACKENDS && usable(*s)) {
		*slot = *s;
		return 0;
	}
	/* The table names a backend that is stale or gone: plain hashing
	 * among the healthy ones until the controller rewrites it. */
	return nth_healthy(cfg, bucket, slot);
}

SEC("xdp")
int lbxdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 len = (__u64)(end - data);
	struct lbxdp_config *cfg;
	struct lbxdp_conn_key key;
	struct lbxdp_conn *conn;
	struct lbxdp_backend *be;
	struct lbxdp_backend_counters *bc;
	struct lbxdp_bucket_counters *bk;
	struct steer_cursor cur = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *ip;
	__u16 sport, dport;
	__u32 zero = 0, slot;
	int eth_proto, l4, is_syn = 0;

	eth_proto = steer_parse_eth(&cur, end, &eth);
	if (eth_proto < 0)
		goto pass;
	/* IPv6 (with or without extension headers), ARP, anything else: not
	 * ours, the stack decides. */
	if (eth_proto != bpf_htons(ETH_P_IP))
		goto pass;
	l4 = steer_parse_ipv4(&cur, end, &ip);
	if (l4 == STEER_PARSE_SHORT)
		goto pass;

	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || cfg->vip == 0 || cfg->buckets == 0 || cfg->buckets > LBXDP_MAX_BUCKETS) {
		count(LBXDP_STAT_UNCONFIGURED, len);
		return XDP_PASS;
	}
	/* Only frames addressed to us: a switch floods frames for a MAC it
	 * forgot (a vanished backend's), and forwarding those again would loop. */
	if (ip->daddr != cfg->vip || !mac_eq(eth->h_dest, cfg->lb_mac))
		goto pass;
	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP) {
		count(LBXDP_STAT_OTHER_PROTO, len);
		return XDP_PASS;
	}
	if (steer_ipv4_is_fragment(ip)) {
		count(LBXDP_STAT_FRAGMENT, len);
		return XDP_DROP;
	}
	if (l4 == STEER_PARSE_INVALID || steer_parse_ports(&cur, end, &sport, &dport) < 0) {
		count(LBXDP_STAT_MALFORMED, len);
		return XDP_DROP;
	}
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *th = cur.pos;

		if ((void *)(th + 1) > end) {
			count(LBXDP_STAT_MALFORMED, len);
			return XDP_DROP;
		}
		is_syn = th->syn && !th->ack;
	}

	__builtin_memset(&key, 0, sizeof(key));
	key.saddr = ip->saddr;
	key.daddr = ip->daddr;
	key.sport = sport;
	key.dport = dport;
	key.proto = ip->protocol;

	conn = bpf_map_lookup_elem(&conns, &key);
	if (conn) {
		slot = conn->backend;
		if (conn->epoch == cfg->epoch) {
			__u32 b = conn->bucket;

			bk = bpf_map_lookup_elem(&bucket_stats, &b);
			if (bk)
				bk->new_packets++;
		}
	} else {
		struct lbxdp_toeplitz *tt = bpf_map_lookup_elem(&toeplitz, &zero);
		struct lbxdp_conn fresh;
		__u32 hash, bucket;

		if (!tt) {
			count(LBXDP_STAT_UNCONFIGURED, len);
			return XDP_PASS;
		}
		hash = rss_hash(tt, &key, key.proto == IPPROTO_TCP ? cfg->fields_tcp : cfg->fields_udp);
		bucket = hash % cfg->buckets;
		if (pick_backend(cfg, hash, bucket, &slot) < 0) {
			count(LBXDP_STAT_NO_BACKEND, len);
			return XDP_DROP;
		}
		__builtin_memset(&fresh, 0, sizeof(fresh));
		fresh.backend = slot;
		fresh.bucket = bucket;
		fresh.epoch = cfg->epoch;
		if (bpf_map_update_elem(&conns, &key, &fresh, BPF_NOEXIST) != 0) {
			/* Another CPU inserted it first: follow that entry. */
			conn = bpf_map_lookup_elem(&conns, &key);
			if (conn)
				slot = conn->backend;
			else
				count(LBXDP_STAT_CONN_FULL, len);
		} else {
			count(LBXDP_STAT_NEW_CONN, len);
			if (key.proto == IPPROTO_TCP && !is_syn)
				count(LBXDP_STAT_MISS_NONSYN, len);
			bk = bpf_map_lookup_elem(&bucket_stats, &bucket);
			if (bk) {
				bk->new_conns++;
				bk->new_packets++;
			}
			bc = bpf_map_lookup_elem(&backend_stats, &slot);
			if (bc)
				bc->new_conns++;
		}
	}

	be = bpf_map_lookup_elem(&backends, &slot);
	if (!be) {
		count(LBXDP_STAT_NO_BACKEND, len);
		return XDP_DROP;
	}
	__builtin_memcpy(eth->h_dest, be->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->lb_mac, ETH_ALEN);
	bc = bpf_map_lookup_elem(&backend_stats, &slot);
	if (bc) {
		bc->packets++;
		bc->bytes += len;
	}
	count(LBXDP_STAT_FORWARDED, len);
	return XDP_TX;

pass:
	count(LBXDP_STAT_PASS_OTHER, len);
	return XDP_PASS;
}

/* Attached to the switch-side peer of the load balancer's veth: a veth
 * only accepts XDP_TX frames from its peer when the receiving end runs NAPI,
 * which an XDP program (or GRO) turns on. Passes everything. */
SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
