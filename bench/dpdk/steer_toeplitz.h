/* C ABI of Steer's Toeplitz hash (bench/dpdk/steer-capi). */
#ifndef STEER_TOEPLITZ_H
#define STEER_TOEPLITZ_H

#include <stddef.h>
#include <stdint.h>

typedef struct steer_toeplitz steer_toeplitz;

steer_toeplitz *steer_toeplitz_new(const uint8_t *key, size_t len);
void steer_toeplitz_free(steer_toeplitz *table);
int steer_toeplitz_uses_simd(const steer_toeplitz *table);
/* One IPv4 4-tuple: src ip, dst ip, src port, dst port, network byte order. */
uint32_t steer_toeplitz_v4(const steer_toeplitz *table, const uint8_t tuple[12]);
/* n contiguous 12-byte tuples -> out[0..n]. */
void steer_toeplitz_batch_v4(const steer_toeplitz *table, const uint8_t (*tuples)[12],
			     uint32_t *out, size_t n);

#endif
