/* What the AVX2 and AMX tiled products share when they pack activations:
 * the 16 Q8_K rows of a block of activations, the s16 pairs their code
 * sums go into as madd operands, and the packed Q8_0 record. Plain C, so
 * it inlines under either target. */
#ifndef BG_KERNELS_X86_TILED_H
#define BG_KERNELS_X86_TILED_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/* lo in the low 16 bits, hi in the high: one 32-bit lane of a madd operand. */
static inline int32_t bg_s16_pair(int lo, int hi)
{
    return (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
}

/* A group of 256 codes of 16 Q8_0 activation rows, as the AVX2 and AMX
 * Q8_0 tiles both read it (bg_avx2_pack_q8_0 writes it): q[k / 4][4 t +
 * k % 4] is code k of row t, rows past the end zero; d[b][t] is block b's
 * scale of row t, sum[b][t] the sum of its codes. */
typedef struct bg_act16_q8_0 {
    int8_t q[256 / 4][64];
    float d[8][16];
    int32_t sum[8][16];
} bg_act16_q8_0;

/* Super-block s of activation rows t0 .. t0 + 15 (of n_act, xq_row bytes
 * apart) into rows; NULL for rows past the end. */
static inline void bg_q8_K_rows16(const void *xq, size_t xq_row, int64_t n_act, int64_t t0,
                                  int64_t s, const bg_block_q8_K *rows[16])
{
    for (int t = 0; t < 16; t++)
        rows[t] = t0 + t < n_act
                      ? (const bg_block_q8_K *)((const uint8_t *)xq + (size_t)(t0 + t) * xq_row) + s
                      : NULL;
}

#endif
