/* C ABI of Steer's Toeplitz hash (bench/dpdk/steer-capi). */
#ifndef STEER_TOEPLITZ_H
#define STEER_TOEPLITZ_H

#include <stddef.h>
#include <stdint.h>

typedef struct steer_toeplitz steer_toeplitz;

/* Steer's Toeplitz paths (rss::ToeplitzPath), fastest first: names by index. */
size_t steer_toeplitz_paths(void);
const char *steer_toeplitz_path_name(size_t i);
/* The path rss::ToeplitzTable::new picks on this CPU. */
size_t steer_toeplitz_default_path(void);
/* Tables for key[0..len) computing with path `path`; NULL when the CPU
 * cannot run it (or the key is bad), with the reason in why[0..why_len). */
steer_toeplitz *steer_toeplitz_new_path(const uint8_t *key, size_t len, size_t path,
					char *why, size_t why_len);
void steer_toeplitz_free(steer_toeplitz *table);
/* One IPv4 4-tuple: src ip, dst ip, src port, dst port, network byte order. */
uint32_t steer_toeplitz_v4(const steer_toeplitz *table, const uint8_t tuple[12]);
/* n contiguous 12-byte tuples -> out[0..n]. */
void steer_toeplitz_batch_v4(const steer_toeplitz *table, const uint8_t (*tuples)[12],
			     uint32_t *out, size_t n);

#endif
