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
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "softrss.h"
#include "steer_flow.h"

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

/* Cpumap counters per destination CPU. key: u32 destination CPU; value:
 * struct softrss_cpumap_counters. Per-CPU: the enqueue event runs on the
 * source CPU and the kthread event on the destination, and each adds to its
 * own copy without atomics. writer: the tracepoint programs `cpumap_enqueue`
 * and `cpumap_kthread` below (reset by `reset_stats`); reader: `stats`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SOFTRSS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct softrss_cpumap_counters);
} cpumap_stats SEC(".maps");

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

/* The hash is the one the load balancer computes too (steer_flow.h): the
 * boundary bits and table shape of softrss.h must be that header's. */
_Static_assert(SOFTRSS_F_SRC_IP == STEER_RSS_F_SRC_IP && SOFTRSS_F_DST_IP == STEER_RSS_F_DST_IP &&
		       SOFTRSS_F_SRC_PORT == STEER_RSS_F_SRC_PORT && SOFTRSS_F_DST_PORT == STEER_RSS_F_DST_PORT,
	       "softrss.h field bits are steer_flow.h's");
_Static_assert(SOFTRSS_MAX_INPUT >= STEER_RSS_INPUT_IPV6, "toeplitz rows cover an IPv6 4-tuple");

/* What the parser found: the tuple in packet (network) order. */
struct parsed {
	struct steer_rss_input t;
	__u8 proto;  /* IPPROTO_TCP, IPPROTO_UDP or SOFTRSS_PROTO_OTHER */
	__u8 family; /* SOFTRSS_FAMILY_* */
};

/* The input transform of rss::HashInput::build (cfg->transform), applied to
 * the parsed tuple before hashing. */
static __always_inline void transform(struct steer_rss_input *out, const struct steer_rss_input *in,
				      __u32 xfrm)
{
	int i;

	switch (xfrm) {
	case SOFTRSS_XFRM_SYM_XOR:
#pragma unroll
		for (i = 0; i < 4; i++)
			out->src[i] = out->dst[i] = in->src[i] ^ in->dst[i];
		out->sport = out->dport = in->sport ^ in->dport;
		break;
	case SOFTRSS_XFRM_SYM_OR_XOR:
#pragma unroll
		for (i = 0; i < 4; i++) {
			out->src[i] = in->src[i] | in->dst[i];
			out->dst[i] = in->src[i] ^ in->dst[i];
		}
		out->sport = in->sport | in->dport;
		out->dport = in->sport ^ in->dport;
		break;
	default:
		*out = *in;
		break;
	}
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
		__builtin_memcpy(&key.src[4 * i], &pk->t.src[i], 4);
		__builtin_memcpy(&key.dst[4 * i], &pk->t.dst[i], 4);
	}
	key.src_port = pk->t.sport;
	key.dst_port = pk->t.dport;
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

/* Reads the ports of a TCP or UDP header at the cursor, or leaves the flow a
 * 2-tuple (proto OTHER) if the header is cut short. */
static __always_inline void parse_ports(struct parsed *pk, const struct steer_cursor *c, void *end, int proto)
{
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return;
	if (steer_parse_ports(c, end, &pk->t.sport, &pk->t.dport) < 0)
		return;
	pk->proto = proto;
}

SEC("xdp")
int softrss(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 len = (__u64)(end - data);
	struct steer_cursor cur = { .pos = data };
	struct softrss_config *cfg;
	struct softrss_toeplitz *tt;
	struct softrss_indir_entry *entry;
	struct steer_rss_input in;
	struct parsed pk;
	struct ethhdr *eth;
	int eth_proto, l4, flow;
	__u32 zero = 0, fields, hash, index;

	eth_proto = steer_parse_eth(&cur, end, &eth);
	if (eth_proto < 0)
		goto non_ip;

	__builtin_memset(&pk, 0, sizeof(pk));
	if (eth_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip;

		l4 = steer_parse_ipv4(&cur, end, &ip);
		if (l4 < 0)
			goto non_ip;
		pk.t.src[0] = ip->saddr;
		pk.t.dst[0] = ip->daddr;
		pk.family = SOFTRSS_FAMILY_IPV4;
		if (!steer_ipv4_is_fragment(ip))
			parse_ports(&pk, &cur, end, l4);
	} else if (eth_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;

		l4 = steer_parse_ipv6(&cur, end, &ip6);
		if (l4 == STEER_PARSE_SHORT)
			goto non_ip;
		__builtin_memcpy(pk.t.src, &ip6->saddr, 16);
		__builtin_memcpy(pk.t.dst, &ip6->daddr, 16);
		pk.family = SOFTRSS_FAMILY_IPV6;
		/* A cut extension header (STEER_PARSE_NO_L4): the 2-tuple. */
		if (l4 >= 0)
			parse_ports(&pk, &cur, end, l4);
	} else {
		goto non_ip;
	}

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

	transform(&in, &pk.t, cfg->transform);
	if (pk.family == SOFTRSS_FAMILY_IPV4)
		hash = steer_toeplitz(tt->t, SOFTRSS_MAX_INPUT, &in, fields, 1);
	else
		hash = steer_toeplitz(tt->t, SOFTRSS_MAX_INPUT, &in, fields, 4);

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
	 * and TCP sees reordering; see docs/performance.md. */
	if (cfg->same_cpu_pass && entry->cpu == bpf_get_smp_processor_id())
		return XDP_PASS;
	return bpf_redirect_map(&cpu_map, entry->cpu, XDP_PASS);

non_ip:
	count(&non_ip, 0, len);
	return XDP_PASS;
}

/* The cpumap's own account of the frames redirected above. Raw tracepoints
 * (no tracefs needed); their arguments are the TP_PROTO of
 * include/trace/events/xdp.h:
 *   xdp_cpumap_enqueue(int map_id, unsigned int processed,
 *                      unsigned int drops, int to_cpu)
 *   xdp_cpumap_kthread(int map_id, unsigned int processed,
 *                      unsigned int drops, int sched, ...)
 * Both fire for every cpumap on the machine; only this attachment's
 * (config.cpumap_id) is counted. The loader attaches them and pins the links
 * beside the program, so they live exactly as long as the attachment. */

/* The counters of destination `cpu` if `map_id` is this attachment's map. */
static __always_inline struct softrss_cpumap_counters *cpumap_counters(__u64 map_id, __u64 cpu)
{
	struct softrss_config *cfg;
	__u32 zero = 0, key = (__u32)cpu;

	cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || cfg->cpumap_id == 0 || (__u32)map_id != cfg->cpumap_id)
		return 0;
	return bpf_map_lookup_elem(&cpumap_stats, &key);
}

SEC("raw_tp/xdp_cpumap_enqueue")
int cpumap_enqueue(struct bpf_raw_tracepoint_args *ctx)
{
	struct softrss_cpumap_counters *c = cpumap_counters(ctx->args[0], ctx->args[3]);

	if (c) {
		c->enqueued += (__u32)ctx->args[1];
		c->enqueue_drops += (__u32)ctx->args[2];
	}
	return 0;
}

SEC("raw_tp/xdp_cpumap_kthread")
int cpumap_kthread(struct bpf_raw_tracepoint_args *ctx)
{
	struct softrss_cpumap_counters *c = cpumap_counters(ctx->args[0], bpf_get_smp_processor_id());

	if (c) {
		c->kthread_processed += (__u32)ctx->args[1];
		c->kthread_drops += (__u32)ctx->args[2];
	}
	return 0;
}
