/* Tensor storage formats: GGUF block layouts and scalar reference kernels.
 *
 * The structs below are the on-disk (little-endian) block layouts of GGUF,
 * so a tensor's data can be cast to an array of them. fp16 fields are raw
 * IEEE half bit patterns (see fp16.h).
 *
 * The kernels are references, written for clarity, not speed: quantization
 * is byte-identical to ggml's reference quantization (ggml_quantize_chunk
 * without an importance matrix; quantize_row_q8_1_ref / _q8_K_ref for the
 * activation-only formats), dequantization is bit-identical to ggml's
 * to_float, and dot() is the exact-as-practical value every faster kernel
 * is tested against. */
#ifndef BG_QUANT_H
#define BG_QUANT_H

#include <stdint.h>

#include "types.h"

#define BG_QK 32           /* elements per block of Q4_0..Q8_1 and IQ4_NL */
#define BG_QK_K 256        /* elements per super-block of the K and IQ4_XS formats */
#define BG_K_SCALE_BYTES 12 /* 6-bit scales: Q4_K/Q5_K eight and eight mins, Q3_K 16 */

/* x = d * (q - 8), q in 0..15 */
typedef struct bg_block_q4_0 {
    uint16_t d;
    uint8_t qs[BG_QK / 2]; /* q[j] low nibble, q[j + 16] high nibble of byte j */
} bg_block_q4_0;

/* x = d * q + m, q in 0..15 */
typedef struct bg_block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[BG_QK / 2];
} bg_block_q4_1;

/* x = d * (q - 16), q in 0..31; bit 4 of q[j] is bit j of qh (LE word) */
typedef struct bg_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[BG_QK / 2];
} bg_block_q5_0;

/* x = d * q + m, q in 0..31 */
typedef struct bg_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[BG_QK / 2];
} bg_block_q5_1;

/* x = d * q */
typedef struct bg_block_q8_0 {
    uint16_t d;
    int8_t qs[BG_QK];
} bg_block_q8_0;

/* x = d * q; s caches d * sum(q) in fp16 (computed from the unrounded d) */
typedef struct bg_block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[BG_QK];
} bg_block_q8_1;

/* Sixteen groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4),
 * q in 0..3. Per 128-element chunk, bits 2k..2k+1 of byte l of its 32 qs
 * bytes hold q[32k + l]. */
typedef struct bg_block_q2_K {
    uint8_t scales[BG_QK_K / 16];
    uint8_t qs[BG_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} bg_block_q2_K;

/* Sixteen groups of 16: x = d * (sc[g] - 32) * (q - 4), q in 0..7, sc 6-bit
 * packed in scales[] (see quant.c). The low two bits of q lie as in Q2_K;
 * the third bit of q[e] is bit e / 32 of hmask[e % 32]. */
typedef struct bg_block_q3_K {
    uint8_t hmask[BG_QK_K / 8];
    uint8_t qs[BG_QK_K / 4];
    uint8_t scales[BG_K_SCALE_BYTES];
    uint16_t d;
} bg_block_q3_K;

/* Eight groups of 32: x = d * sc[g] * q - dmin * mn[g], q in 0..15, sc/mn
 * 6-bit, packed in scales[] (see quant.c). Nibbles: within each 64-element
 * chunk, byte l holds q[l] low and q[l + 32] high. */
typedef struct bg_block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[BG_K_SCALE_BYTES];
    uint8_t qs[BG_QK_K / 2];
} bg_block_q4_K;

/* As Q4_K with q in 0..31; bit 4 of q[e] is bit e / 32 of qh[e % 32]. */
typedef struct bg_block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[BG_K_SCALE_BYTES];
    uint8_t qh[BG_QK_K / 8];
    uint8_t qs[BG_QK_K / 2];
} bg_block_q5_K;

/* Sixteen groups of 16: x = d * scales[g] * (q - 32), q in 0..63. Per
 * 128-element chunk: low nibbles in 64 bytes of ql (q[l] low, q[l + 64]
 * high), top two bits of q[e] in bits 2*(e / 32) of qh[e % 32]. */
typedef struct bg_block_q6_K {
    uint8_t ql[BG_QK_K / 2];
    uint8_t qh[BG_QK_K / 4];
    int8_t scales[BG_QK_K / 16];
    uint16_t d;
} bg_block_q6_K;

/* Activations for K-quant dot products: x = d * q, d a full float. */
typedef struct bg_block_q8_K {
    float d;
    int8_t qs[BG_QK_K];
    int16_t bsums[BG_QK_K / 16]; /* sum of each 16 consecutive qs */
} bg_block_q8_K;

/* x = d * kvalues[q]: a 4-bit index into a fixed non-linear codebook. */
typedef struct bg_block_iq4_nl {
    uint16_t d;
    uint8_t qs[BG_QK / 2];
} bg_block_iq4_nl;

/* Eight groups of 32: x = d * (ls[g] - 32) * kvalues[q], ls 6-bit: low
 * nibble in scales_l (two per byte), top two bits at 2*g in scales_h. */
typedef struct bg_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[BG_QK_K / 64];
    uint8_t qs[BG_QK_K / 2];
} bg_block_iq4_xs;

/* Must match the block_bytes of types.c (also checked by the oracle test). */
_Static_assert(sizeof(bg_block_q4_0) == 18, "q4_0 block size");
_Static_assert(sizeof(bg_block_q4_1) == 20, "q4_1 block size");
_Static_assert(sizeof(bg_block_q5_0) == 22, "q5_0 block size");
_Static_assert(sizeof(bg_block_q5_1) == 24, "q5_1 block size");
_Static_assert(sizeof(bg_block_q8_0) == 34, "q8_0 block size");
_Static_assert(sizeof(bg_block_q8_1) == 36, "q8_1 block size");
_Static_assert(sizeof(bg_block_q2_K) == 84, "q2_K block size");
_Static_assert(sizeof(bg_block_q3_K) == 110, "q3_K block size");
_Static_assert(sizeof(bg_block_q4_K) == 144, "q4_K block size");
_Static_assert(sizeof(bg_block_q5_K) == 176, "q5_K block size");
_Static_assert(sizeof(bg_block_q6_K) == 210, "q6_K block size");
_Static_assert(sizeof(bg_block_q8_K) == 292, "q8_K block size");
_Static_assert(sizeof(bg_block_iq4_nl) == 18, "iq4_nl block size");
_Static_assert(sizeof(bg_block_iq4_xs) == 136, "iq4_xs block size");

typedef struct bg_quant_ops {
    bg_type type;
    /* The activation format dot() takes as its second operand (ggml's
     * vec_dot_type): Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1,
     * Q8_K for Q2_K..Q6_K and IQ4_XS, the same type for F32/F16/BF16. */
    bg_type dot_type;
    /* n is a multiple of the block size in all three. */
    void (*dequantize)(const void *src, float *dst, int64_t n);
    /* Reference quantization, no importance matrix. */
    void (*quantize)(const float *src, void *dst, int64_t n);
    /* How llama.cpp's CPU backend converts activations to this format
     * before dot products. For Q8_0 and Q8_1 its x86 code scales by
     * 127/amax and rounds half to even, unlike the reference (1/d, half
     * away from zero); elsewhere it is the reference. */
    void (*quantize_activations)(const float *src, void *dst, int64_t n);
    /* Dot product of n weights in `type` with n activations in dot_type.
     * Per-block integer sums are exact, scales are applied and summed in
     * double, and the total is rounded to float once. NULL where ggml has
     * none (Q8_1, Q8_K). */
    float (*dot)(int64_t n, const void *w, const void *a);
} bg_quant_ops;

/* NULL if brigade has no kernels for the type. */
const bg_quant_ops *bg_quant_ops_get(bg_type type);

#endif
