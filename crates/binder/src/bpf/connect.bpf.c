// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * connect.bpf.c: the cgroup BPF binder of Steer. cgroup/connect4 and
 * cgroup/connect6 programs that bind a planned source port inside the kernel
 * with bpf_bind() before an unbound TCP socket of the cgroup connects, so
 * static binaries, setuid programs and containers are steered too.
 *
 * For each connect(): look up the destination's plan; take the next slot of
 * the destination host's counter (atomic); bpf_bind() the plan's local
 * address and that slot's port; if the bind fails (port in use), take the
 * next slot, at most BINDER_MAX_TRIES times; then let connect() proceed
 * (with a kernel-chosen port if nothing was bound). The program always
 * returns 1 (allow): it never makes a connect fail.
 *
 * The same idea as the kernel selftest progs/connect_force_port4.c.
 * Control plane: crates/binder/src/cgroup.rs; structs: binder.h.
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "binder.h"
#include "steer_counters.h"

#define SOCK_STREAM 1
#define SOL_SOCKET 1
#define SO_REUSEADDR 2
#define SO_REUSEPORT 15
#define AF_INET 2
#define AF_INET6 10

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Plans. key: struct binder_dest; value: struct binder_plan.
 * writer: loader (steer attach / exec --bpf, later the allocator);
 * reader: this program. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct binder_dest);
	__type(value, struct binder_plan);
} plans SEC(".maps");

/* Slot counters. key: struct binder_host; value: struct binder_counter.
 * writer: loader creates the entry (0) with the first plan of a host; this
 * program increments it atomically. reader: this program, the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct binder_host);
	__type(value, struct binder_counter);
} counters SEC(".maps");

/* Event counts (steer_counters.h). key: enum binder_stat; value: u64
 * count (per CPU). writer: this program; reader: loader (stats). */
STEER_EVENT_COUNTERS(BINDER_STAT_MAX)

/* Binds the next planned port of `dest`; `sa`/`len` is a prepared sockaddr
 * whose port is filled in per attempt through `port_be`. */
static __always_inline int bind_planned(struct bpf_sock_addr *ctx, const struct binder_dest *dest,
					 const struct binder_host *host, void *sa, int len,
					 __u16 *port_be, __u8 *local, __u32 local_len)
{
	/* A socket with SO_REUSEADDR/SO_REUSEPORT may bind a port another
	 * such socket holds; connect() would then fail with EADDRNOTAVAIL if
	 * both went to the same destination. Leave those to the kernel. */
	int reuse = 0, reuseport = 0;
	if (bpf_getsockopt(ctx, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) != 0 ||
	    bpf_getsockopt(ctx, SOL_SOCKET, SO_REUSEPORT, &reuseport, sizeof(reuseport)) != 0 ||
	    reuse || reuseport) {
		count(BINDER_STAT_SKIPPED);
		return 1;
	}
	struct binder_plan *plan = bpf_map_lookup_elem(&plans, dest);
	struct binder_counter *ctr = bpf_map_lookup_elem(&counters, host);
	if (!plan || !ctr || plan->count == 0 || plan->count > BINDER_MAX_PORTS) {
		count(BINDER_STAT_NO_PLAN);
		return 1;
	}
	if (local_len == 4)
		__builtin_memcpy(local, plan->local, 4);
	else
		__builtin_memcpy(local, plan->local, 16);
	for (int i = 0; i < BINDER_MAX_TRIES; i++) {
		__u64 n = __sync_fetch_and_add(&ctr->next, 1);
		__u32 slot = (__u32)(n % plan->count);
		if (slot >= BINDER_MAX_PORTS)
			break;
		/* A no-op after the check, but a 32-bit AND zero-extends, which
		 * gives the verifier the 64-bit bound it needs for the index. */
		slot &= BINDER_MAX_PORTS - 1;
		__u16 port = plan->ports[slot];
		if (port == 0)
			continue;
		*port_be = bpf_htons(port);
		if (bpf_bind(ctx, sa, len) == 0) {
			count(BINDER_STAT_BOUND);
			return 1;
		}
		count(BINDER_STAT_BIND_FAILED);
	}
	count(BINDER_STAT_FALLBACK);
	return 1;
}

SEC("cgroup/connect4")
int steer_connect4(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	if (ctx->type != SOCK_STREAM || ctx->protocol != IPPROTO_TCP || sk->src_port != 0 ||
	    sk->src_ip4 != 0) {
		count(BINDER_STAT_SKIPPED);
		return 1;
	}
	struct binder_dest dest = { .family = BINDER_FAMILY_V4 };
	struct binder_host host = { .family = BINDER_FAMILY_V4 };
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(dest.addr, &ip, 4);
	__builtin_memcpy(host.addr, &ip, 4);
	dest.port = (__u16)ctx->user_port;

	struct sockaddr_in sa = { .sin_family = AF_INET };
	return bind_planned(ctx, &dest, &host, &sa, sizeof(sa), &sa.sin_port,
			    (__u8 *)&sa.sin_addr.s_addr, 4);
}

SEC("cgroup/connect6")
int steer_connect6(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	if (ctx->type != SOCK_STREAM || ctx->protocol != IPPROTO_TCP || sk->src_port != 0 ||
	    (sk->src_ip6[0] | sk->src_ip6[1] | sk->src_ip6[2] | sk->src_ip6[3]) != 0) {
		count(BINDER_STAT_SKIPPED);
		return 1;
	}
	__u32 a[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3] };
	/* IPv4-mapped (::ffff:a.b.c.d): tcp_v6_connect hands it to IPv4; a
	 * bpf_bind of an IPv6 address would make that connect fail. */
	if (a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff)) {
		count(BINDER_STAT_SKIPPED);
		return 1;
	}
	struct binder_dest dest = { .family = BINDER_FAMILY_V6 };
	struct binder_host host = { .family = BINDER_FAMILY_V6 };
	__builtin_memcpy(dest.addr, a, 16);
	__builtin_memcpy(host.addr, a, 16);
	dest.port = (__u16)ctx->user_port;

	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	return bind_planned(ctx, &dest, &host, &sa, sizeof(sa), &sa.sin6_port,
			    (__u8 *)&sa.sin6_addr, 16);
}
