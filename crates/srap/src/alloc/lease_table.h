/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * lease_table.h: the allocator's shared-memory lease table, the layout both
 * sides use. The allocator (crates/srap/src/alloc/table.rs) creates the file
 * next to its socket (<socket>LT_SUFFIX, mode 0666 like the socket) and is
 * its only writer of ports; the LD_PRELOAD shim
 * (crates/binder/shim/steer_preload.c) maps it MAP_SHARED and claims a
 * planned port with one compare-and-swap, without a round trip to the
 * allocator. The Rust mirror pins these numbers with const asserts, and the
 * binder's build pins the Rust constants against this file.
 *
 * Layout (little-endian, naturally aligned, no implicit padding):
 *
 *   header                      LT_HEADER_SIZE bytes
 *   LT_REGIONS x region         one per destination (proto, local, remote,
 *                               remote port) the allocator has planned for:
 *     region key                LT_REGION_KEY_SIZE bytes
 *     LT_SLOTS x slot           LT_SLOT_SIZE bytes each
 *
 * A slot's word packs state (bits 0-7), port (bits 8-23) and a generation
 * (bits 24-63) so that one 64-bit CAS both checks what was read and takes
 * it: the allocator bumps the generation on every change it makes, so a
 * shim holding an old word can never take a slot refilled since (ABA).
 *
 *   EMPTY --allocator fills--> FREE --shim CAS--> CLAIMED
 *     ^                         |                    |
 *     +---- allocator takes ----+                    |
 *     +---- allocator turns the claim into a lease --+
 *
 * A region's key is guarded by a sequence number (even: stable; odd: being
 * rewritten). The allocator empties every slot before it rewrites a key and
 * fills them only after, so a shim that reads the same even sequence before
 * the key and after its CAS has claimed a port planned for that key.
 */
#ifndef STEER_LEASE_TABLE_H
#define STEER_LEASE_TABLE_H

#include <stdint.h>

/* The table's file name is the allocator socket's path plus this. */
#define LT_SUFFIX ".leases"
#define LT_MAGIC 0x544c5453u /* "STLT" */
#define LT_VERSION 1
#define LT_REGIONS 64
#define LT_SLOTS 16
/* A table whose heartbeat is older than this is not used (allocator gone). */
#define LT_STALE_MS 1000
/* How often the allocator writes the heartbeat and collects claims, at the
 * latest. */
#define LT_HEARTBEAT_MS 100
/* A claim of this slot index or a later one wakes the allocator (futex):
 * it plans a region again once fewer than this many offers are left. Earlier
 * claims wake nobody (a wake-up costs the claimer a few us) and are
 * collected on the next heartbeat or lease request. */
#define LT_WAKE_SLOT 8

#define LT_STATE_EMPTY 0
#define LT_STATE_FREE 1
#define LT_STATE_CLAIMED 2
#define LT_PORT_SHIFT 8
#define LT_GEN_SHIFT 24

#define LT_FAMILY_V4 4
#define LT_FAMILY_V6 6
#define LT_PROTO_TCP 6

#define LT_HEADER_SIZE 64
#define LT_REGION_KEY_SIZE 64
#define LT_SLOT_SIZE 16
#define LT_REGION_SIZE 320 /* LT_REGION_KEY_SIZE + LT_SLOTS * LT_SLOT_SIZE */
#define LT_FILE_SIZE 20544 /* LT_HEADER_SIZE + LT_REGIONS * LT_REGION_SIZE */

/* Offsets the Rust mirror checks field by field. */
#define LT_OFF_HEARTBEAT 16
#define LT_OFF_CLAIMS 24
#define LT_OFF_KEY_LOCAL 16
#define LT_OFF_KEY_REMOTE 32

struct lt_header {
	uint32_t magic;        /* LT_MAGIC, written last at creation */
	uint32_t version;      /* LT_VERSION */
	uint32_t regions;      /* LT_REGIONS */
	uint32_t slots;        /* LT_SLOTS */
	uint64_t heartbeat_ms; /* allocator: CLOCK_MONOTONIC ms, every LT_HEARTBEAT_MS */
	uint32_t claims;       /* shim: +1 after a claim (FUTEX_WAKE from LT_WAKE_SLOT on); the allocator waits on it */
	uint32_t pad0;
	uint8_t reserved[32];
};

struct lt_region_key {
	uint64_t seq;         /* even: key stable; odd: being rewritten */
	uint8_t family;       /* 0: region unused; LT_FAMILY_V4 / LT_FAMILY_V6 */
	uint8_t proto;        /* LT_PROTO_TCP */
	uint16_t remote_port; /* host byte order */
	uint32_t pad0;
	uint8_t local[16];  /* network order; IPv4 in the first 4 bytes, rest 0 */
	uint8_t remote[16]; /* the same */
	uint8_t reserved[16];
};

struct lt_slot {
	uint64_t word;  /* state | port << LT_PORT_SHIFT | generation << LT_GEN_SHIFT */
	uint32_t queue; /* receiver queue planned for the port (for logs) */
	uint32_t cpu;   /* receiver CPU planned for the port (for logs) */
};

struct lt_region {
	struct lt_region_key key;
	struct lt_slot slots[LT_SLOTS];
};

_Static_assert(sizeof(struct lt_header) == LT_HEADER_SIZE, "header size");
_Static_assert(sizeof(struct lt_region_key) == LT_REGION_KEY_SIZE, "region key size");
_Static_assert(sizeof(struct lt_slot) == LT_SLOT_SIZE, "slot size");
_Static_assert(sizeof(struct lt_region) == LT_REGION_SIZE, "region size");
_Static_assert(LT_WAKE_SLOT > 0 && LT_WAKE_SLOT < LT_SLOTS, "wake slot");
_Static_assert(LT_HEADER_SIZE + LT_REGIONS * LT_REGION_SIZE == LT_FILE_SIZE, "file size");
_Static_assert(__builtin_offsetof(struct lt_header, heartbeat_ms) == LT_OFF_HEARTBEAT, "heartbeat");
_Static_assert(__builtin_offsetof(struct lt_header, claims) == LT_OFF_CLAIMS, "claims");
_Static_assert(__builtin_offsetof(struct lt_region_key, local) == LT_OFF_KEY_LOCAL, "local");
_Static_assert(__builtin_offsetof(struct lt_region_key, remote) == LT_OFF_KEY_REMOTE, "remote");

#endif
