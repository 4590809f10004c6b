/* AVX2 dot products of the float formats (F32, F16, BF16) and of the
 * 32-element block formats (Q8_0, Q4_0, Q5_0, IQ4_NL against Q8_0
 * activations; Q4_1, Q5_1 against Q8_1), the rows dots of Q4_0 and IQ4_NL
 * (eight weight rows against one activation row, kernels.h), and the
 * quantizers of those activations.
 *
 * Block formats: each block's weight codes are expanded to 32 int8 (or
 * uint8) lanes in activation order, multiplied with the activation codes
 * and summed exactly in int32 (|sum| <= 32 * 128 * 128 = 2^19, so its
 * conversion to float is exact too); the block sum is then scaled by
 * d_w * d_a and accumulated with float FMAs, in the order of llama.cpp's
 * vec_dot so that the results are its bits (tests/oracle_kernels.c): one
 * accumulator block after block for Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1 (whose
 * min terms m * s go to one fused float running sum), two alternating for
 * IQ4_NL.
 *
 * Float formats: four 8-lane FMA accumulators; a tail of fewer than 8 (BF16:
 * 16) elements is copied into a zero-padded buffer and processed as one
 * more full vector.
 *
 * All loads are unaligned: tensors are mmapped at arbitrary offsets, so
 * block fields are read through byte pointers, never through the structs. */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "fp16.h"
#include "kernels_x86_codes.h"
#include "kernels_x86_prefetch.h"
#include "quant.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* ------------------------------------------------------------------------
 * Shared helpers
 * ------------------------------------------------------------------------ */

/* Sum of the 8 lanes. */
static inline AVX2 float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of the 8 int32 lanes, in every lane of the result. */
static inline AVX2 __m128i hsum_i32(__m256i v)
{
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    return _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
}

/* The fp16 at p (and the one after it) as floats in lanes 0 (and 1); the
 * upper lanes are zero. One 32-bit load, no scalar insertion. */
static inline AVX2 __m128 load_f16x2(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
}

/* Sum of u[i] * s[i] over 32 bytes, u unsigned, s signed, in 8 int32
 * lanes. Exact while no two adjacent products sum past int16: for u <= 127,
 * or for u <= 128 and s >= -127. */
static inline AVX2 __m256i dot_u8_i8(__m256i u, __m256i s)
{
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* Sum of x[i] * y[i] over 32 signed bytes, in 8 int32 lanes. The sign of x
 * moves onto y so that |x| can be the unsigned operand: exact for any x
 * while y has no -128 (whose negation wraps). */
static inline AVX2 __m256i dot_i8(__m256i x, __m256i y)
{
    return dot_u8_i8(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
}

static inline AVX2 __m256i load_i8x32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* ------------------------------------------------------------------------
 * Float formats
 * ------------------------------------------------------------------------ */

/* acc + x * y over 8 floats. */
static inline AVX2 __m256 fma_f32x8(const float *x, const float *y, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y), acc);
}

AVX2 float bg_dot_f32_avx2(int64_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = fma_f32x8(x + i, y + i, acc0);
        acc1 = fma_f32x8(x + i + 8, y + i + 8, acc1);
        acc2 = fma_f32x8(x + i + 16, y + i + 16, acc2);
        acc3 = fma_f32x8(x + i + 24, y + i + 24, acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = fma_f32x8(x + i, y + i, acc0);
    if (i < n) {
        float tx[8] = {0}, ty[8] = {0};
        memcpy(tx, x + i, (size_t)(n - i) * sizeof *x);
        memcpy(ty, y + i, (size_t)(n - i) * sizeof *y);
        acc1 = fma_f32x8(tx, ty, acc1);
    }
    return hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

/* acc + x * y over 8 halves. */
static inline AVX2 __m256 fma_f16x8(const uint16_t *x, const uint16_t *y, __m256 acc)
{
    const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)x));
    const __m256 vy = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)y));
    return _mm256_fmadd_ps(vx, vy, acc);
}

AVX2 float bg_dot_f16_avx2(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = fma_f16x8(x + i, y + i, acc0);
        acc1 = fma_f16x8(x + i + 8, y + i + 8, acc1);
        acc2 = fma_f16x8(x + i + 16, y + i + 16, acc2);
        acc3 = fma_f16x8(x + i + 24, y + i + 24, acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = fma_f16x8(x + i, y + i, acc0);
    if (i < n) {
        uint16_t tx[8] = {0}, ty[8] = {0};
        memcpy(tx, x + i, (size_t)(n - i) * sizeof *x);
        memcpy(ty, y + i, (size_t)(n - i) * sizeof *y);
        acc1 = fma_f16x8(tx, ty, acc1);
    }
    return hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

/* acc + x * y over 16 bf16, in two accumulators. Each 32-bit lane holds
 * two bf16: the upper one is a float once the lower is masked off, the
 * lower one once shifted up. Both operands split alike, so the products
 * pair up correctly (the order of the terms is all that changes). */
static inline AVX2 void fma_bf16x16(const uint16_t *x, const uint16_t *y, __m256 *acc_lo,
                                    __m256 *acc_hi)
{
    const __m256i upper = _mm256_set1_epi32((int32_t)0xFFFF0000);
    const __m256i vx = _mm256_loadu_si256((const __m256i *)(const void *)x);
    const __m256i vy = _mm256_loadu_si256((const __m256i *)(const void *)y);
    *acc_lo = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(vx, 16)),
                              _mm256_castsi256_ps(_mm256_slli_epi32(vy, 16)), *acc_lo);
    *acc_hi = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(vx, upper)),
                              _mm256_castsi256_ps(_mm256_and_si256(vy, upper)), *acc_hi);
}

AVX2 float bg_dot_bf16_avx2(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        fma_bf16x16(x + i, y + i, &acc0, &acc1);
        fma_bf16x16(x + i + 16, y + i + 16, &acc2, &acc3);
    }
    for (; i + 16 <= n; i += 16)
        fma_bf16x16(x + i, y + i, &acc0, &acc1);
    if (i < n) {
        uint16_t tx[16] = {0}, ty[16] = {0};
        memcpy(tx, x + i, (size_t)(n - i) * sizeof *x);
        memcpy(ty, y + i, (size_t)(n - i) * sizeof *y);
        fma_bf16x16(tx, ty, &acc2, &acc3);
    }
    return hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

/* ------------------------------------------------------------------------
 * Block formats against Q8_0: sum over blocks of d_w * d_a * isum
 * ------------------------------------------------------------------------ */

/* The exact integer dot of one weight block (at wb) with 32 activation
 * codes y, as 8 int32 partial sums. */
typedef __m256i (*block_isum_fn)(const uint8_t *wb, __m256i y);

/* The 4/5-bit and IQ4_NL weights expand to int8 values in [-127, 127], so
 * the activations take the unsigned side (|y| <= 128): exact for any y. */
static inline AVX2 __m256i isum_q4_0(const uint8_t *wb, __m256i y)
{
    return dot_i8(y, bg_codes_q4_0(wb));
}

static inline AVX2 __m256i isum_q5_0(const uint8_t *wb, __m256i y)
{
    return dot_i8(y, bg_codes_q5_0(wb));
}

static inline AVX2 __m256i isum_iq4_nl(const uint8_t *wb, __m256i y)
{
    return dot_i8(y, bg_codes_iq4_nl(wb));
}

/* Q8_0 weights may hold any int8 (-128 included), so they take the
 * unsigned side: exact for activations in [-127, 127], which is what the
 * Q8_0 quantizers produce. */
static inline AVX2 __m256i isum_q8_0(const uint8_t *wb, __m256i y)
{
    return dot_i8(bg_codes_q8_0(wb), y);
}

/* One block: acc + d_w * d_a * isum. The scale is in lane 0 of the
 * product of the blocks' first two fp16 (lane 1 multiplies code bytes and
 * is ignored). */
static inline AVX2 __m256 q8_0_block(block_isum_fn isum, const uint8_t *wb, const uint8_t *ab,
                                     __m256 acc)
{
    const __m128 scale = _mm_mul_ps(load_f16x2(wb), load_f16x2(ab));
    const __m256i y = load_i8x32(ab + offsetof(bg_block_q8_0, qs));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum(wb, y)), _mm256_broadcastss_ps(scale), acc);
}

/* The loop shared by every format against Q8_0; inlined into each caller
 * with its own isum. */
static inline AVX2 float dot_vs_q8_0(block_isum_fn isum, size_t wbytes, int64_t n,
                                     const void *w, const void *a)
{
    const uint8_t *wb = w, *ab = a;
    const size_t abytes = sizeof(bg_block_q8_0);
    const int64_t nb = n / BG_QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, wb += 2 * wbytes, ab += 2 * abytes) {
        bg_prefetch_ahead(wb, 2 * wbytes);
        acc0 = q8_0_block(isum, wb, ab, acc0);
        acc1 = q8_0_block(isum, wb + wbytes, ab + abytes, acc1);
    }
    if (b < nb)
        acc0 = q8_0_block(isum, wb, ab, acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* The same with one accumulator, block after block: llama.cpp's vec_dot
 * order for Q8_0, Q4_0 and Q5_0 (its IQ4_NL alternates two), so the
 * results are its bits. */
static inline AVX2 float dot_vs_q8_0_in_order(block_isum_fn isum, size_t wbytes, int64_t n,
                                              const void *w, const void *a)
{
    const uint8_t *wb = w, *ab = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK; b++, wb += wbytes, ab += sizeof(bg_block_q8_0)) {
        bg_prefetch_ahead(wb, wbytes);
        acc = q8_0_block(isum, wb, ab, acc);
    }
    return hsum_ps(acc);
}

/* The body of bg_dot_multi_q8_0_avx2 for a known row count, so acc stays
 * in registers: with na read at run time GCC kept it on the stack, and
 * each block's fmadd waited on the previous block's store. */
static inline AVX2 __attribute__((always_inline)) void
multi_q8_0(int64_t n, const void *w, const void *a, size_t a_stride, int na, float *out)
{
    const uint8_t *wb = w;
    __m256 acc[BG_DOT_MULTI];
    _Pragma("GCC unroll 4") for (int t = 0; t < na; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK; b++, wb += sizeof(bg_block_q8_0)) {
        bg_prefetch_ahead(wb, sizeof(bg_block_q8_0));
        const __m256i x = load_i8x32(wb + offsetof(bg_block_q8_0, qs));
        const __m256i ax = _mm256_abs_epi8(x);
        const __m128 wd = load_f16x2(wb);
        _Pragma("GCC unroll 4") for (int t = 0; t < na; t++) {
            const uint8_t *ab = (const uint8_t *)a + t * a_stride + b * sizeof(bg_block_q8_0);
            const __m128 scale = _mm_mul_ps(wd, load_f16x2(ab));
            const __m256i y = load_i8x32(ab + offsetof(bg_block_q8_0, qs));
            const __m256i isum = dot_u8_i8(ax, _mm256_sign_epi8(y, x));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_broadcastss_ps(scale), acc[t]);
        }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < na; t++)
        out[t] = hsum_ps(acc[t]);
}

/* Q8_0 weights against several activation rows (BG_DOT_MULTI at most): a
 * block's |w| is loaded once for all rows, each row then takes
 * q8_0_block's steps in block order, so each result is bitwise the single
 * dot's. */
AVX2 void bg_dot_multi_q8_0_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                 int na, float *out)
{
    _Static_assert(BG_DOT_MULTI == 4, "one case per row count");
    switch (na) {
    case 4: multi_q8_0(n, w, a, a_stride, 4, out); break;
    case 3: multi_q8_0(n, w, a, a_stride, 3, out); break;
    case 2: multi_q8_0(n, w, a, a_stride, 2, out); break;
    default: multi_q8_0(n, w, a, a_stride, 1, out); break;
    }
}

AVX2 float bg_dot_q8_0_avx2(int64_t n, const void *w, const void *a)
{
    return dot_vs_q8_0_in_order(isum_q8_0, sizeof(bg_block_q8_0), n, w, a);
}

AVX2 float bg_dot_q4_0_avx2(int64_t n, const void *w, const void *a)
{
    return dot_vs_q8_0_in_order(isum_q4_0, sizeof(bg_block_q4_0), n, w, a);
}

AVX2 float bg_dot_q5_0_avx2(int64_t n, const void *w, const void *a)
{
    return dot_vs_q8_0_in_order(isum_q5_0, sizeof(bg_block_q5_0), n, w, a);
}

AVX2 float bg_dot_iq4_nl_avx2(int64_t n, const void *w, const void *a)
{
    return dot_vs_q8_0(isum_iq4_nl, sizeof(bg_block_iq4_nl), n, w, a);
}

/* ------------------------------------------------------------------------
 * Several weight rows against one Q8_0 activation row (decode)
 * ------------------------------------------------------------------------ */

/* The rows dots take each block's integer dot from a block_isum_fn less
 * `offset` times the sum of y, which they take once for all rows. Q4_0's
 * codes are nibble - 8: the nibbles (0..15) take maddubs' unsigned side as
 * they are, with no abs/sign step, and the 8 * sum(y) comes off after. */
static inline AVX2 __m256i isum_q4_0_nibbles(const uint8_t *wb, __m256i y)
{
    return dot_u8_i8(bg_unpack_nibbles(wb + offsetof(bg_block_q4_0, qs)), y);
}

/* Lane r of the result: the sum of the 8 lanes of m[r]. */
static inline AVX2 __m256i lane_totals(const __m256i m[8])
{
    /* hadd pairs neighbours within each 128-bit half: two rounds leave rows
     * 0-3 (4-7) in order, their lower lanes' sums in one half, the upper's
     * in the other */
    const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]),
                                         _mm256_hadd_epi32(m[2], m[3]));
    const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]),
                                         _mm256_hadd_epi32(m[6], m[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                            _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* offset * sum(y) in every lane. */
static inline AVX2 __m256i offset_sum(int offset, __m256i y)
{
    return _mm256_broadcastsi128_si256(hsum_i32(dot_u8_i8(_mm256_set1_epi8((char)offset), y)));
}

/* The fp16 at p as the 16 bits of an int (for _mm_insert_epi16). */
static inline int load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One block of eight rows (row r at w + r * s) with the activation block
 * at ab: acc + isum * (d_w * d_a), lane r for row r. */
static inline AVX2 __attribute__((always_inline)) __m256
rows8_block(block_isum_fn isum_of, int offset, const uint8_t *w, size_t s,
            const uint8_t *ab, __m256 acc)
{
    const __m256i y = load_i8x32(ab + offsetof(bg_block_q8_0, qs));
    const uint8_t *w4 = w + 4 * s;
    const uint8_t *row[BG_DOT_ROWS] = {w, w + s, w + 2 * s, w + 3 * s,
                                       w4, w4 + s, w4 + 2 * s, w4 + 3 * s};
    __m256i m[BG_DOT_ROWS];
    _Pragma("GCC unroll 8") for (int r = 0; r < BG_DOT_ROWS; r++)
        m[r] = isum_of(row[r], y);
    /* inserted one by one from memory: a store and a reload of the eight
     * would stall on store forwarding */
    __m128i d = _mm_cvtsi32_si128(load_u16(row[0]));
    d = _mm_insert_epi16(d, load_u16(row[1]), 1);
    d = _mm_insert_epi16(d, load_u16(row[2]), 2);
    d = _mm_insert_epi16(d, load_u16(row[3]), 3);
    d = _mm_insert_epi16(d, load_u16(row[4]), 4);
    d = _mm_insert_epi16(d, load_u16(row[5]), 5);
    d = _mm_insert_epi16(d, load_u16(row[6]), 6);
    d = _mm_insert_epi16(d, load_u16(row[7]), 7);
    __m256i isum = lane_totals(m);
    if (offset)
        isum = _mm256_sub_epi32(isum, offset_sum(offset, y));
    const __m256 scale =
        _mm256_mul_ps(_mm256_cvtph_ps(d), _mm256_broadcastss_ps(load_f16x2(ab)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
}

/* Eight rows (row r at w + r * s) with the activation row a: lane r takes,
 * block after block, acc = fma(isum, d_w * d_a, acc), so the float steps
 * of all eight rows are one vector's.
 *
 * The eight rows are read as eight streams; the next eight rows (the ones
 * this thread dots next, rows lying one after another) are asked for as
 * one: each step asks for the next group's bytes in order, as many as
 * the step reads. That took decode from 33-35 to 38-44 tokens/s (Q4_0,
 * 2-core Zen 3); asking each row for its own line in the next group
 * gained nothing. */
static inline AVX2 __attribute__((always_inline)) void
rows8_vs_q8_0(block_isum_fn isum_of, int offset, size_t wbytes, int64_t n, const uint8_t *w,
              size_t s, const uint8_t *a, float *out)
{
    const size_t abytes = sizeof(bg_block_q8_0), step = 2 * BG_DOT_ROWS * wbytes;
    const int64_t nb = n / BG_QK;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        bg_prefetch_span(w, BG_DOT_ROWS * s + (size_t)b / 2 * step, step);
        acc = rows8_block(isum_of, offset, w + b * wbytes, s, a + b * abytes, acc);
        acc = rows8_block(isum_of, offset, w + (b + 1) * wbytes, s, a + (b + 1) * abytes, acc);
    }
    if (b < nb)
        acc = rows8_block(isum_of, offset, w + b * wbytes, s, a + b * abytes, acc);
    _mm256_storeu_ps(out, acc);
}

/* One row the same way, for the rows past the last eight: each lane of
 * the eight-row product is this. */
static inline AVX2 __attribute__((always_inline)) float
row_vs_q8_0(block_isum_fn isum_of, int offset, size_t wbytes, int64_t n, const uint8_t *w,
            const uint8_t *a)
{
    float acc = 0;
    for (int64_t b = 0; b < n / BG_QK; b++) {
        const uint8_t *ab = a + b * sizeof(bg_block_q8_0), *wb = w + b * wbytes;
        const __m256i y = load_i8x32(ab + offsetof(bg_block_q8_0, qs));
        __m128i h = hsum_i32(isum_of(wb, y));
        if (offset)
            h = _mm_sub_epi32(h, _mm256_castsi256_si128(offset_sum(offset, y)));
        const float scale = _mm_cvtss_f32(load_f16x2(wb)) * _mm_cvtss_f32(load_f16x2(ab));
        acc = fmaf((float)_mm_cvtsi128_si32(h), scale, acc);
    }
    return acc;
}

static inline AVX2 __attribute__((always_inline)) void
rows_vs_q8_0(block_isum_fn isum_of, int offset, size_t wbytes, int64_t n, const uint8_t *w,
             size_t w_stride, int nr, const uint8_t *a, float *out)
{
    if (nr == BG_DOT_ROWS)
        rows8_vs_q8_0(isum_of, offset, wbytes, n, w, w_stride, a, out);
    else
        for (int r = 0; r < nr; r++)
            out[r] = row_vs_q8_0(isum_of, offset, wbytes, n, w + (size_t)r * w_stride, a);
}

AVX2 void bg_dot_rows_q4_0_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                                float *out)
{
    rows_vs_q8_0(isum_q4_0_nibbles, 8, sizeof(bg_block_q4_0), n, w, w_stride, nr, a, out);
}

AVX2 void bg_dot_rows_iq4_nl_avx2(int64_t n, const void *w, size_t w_stride, int nr,
                                  const void *a, float *out)
{
    rows_vs_q8_0(isum_iq4_nl, 0, sizeof(bg_block_iq4_nl), n, w, w_stride, nr, a, out);
}

/* ------------------------------------------------------------------------
 * Block formats with a min against Q8_1: sum of d_w * d_a * isum + m * s
 * ------------------------------------------------------------------------ */

/* Exact integer sum of one block's unsigned codes (0..31) with y. */
static inline AVX2 __m256i isum_q4_1(const uint8_t *wb, __m256i y)
{
    return dot_u8_i8(bg_unpack_nibbles(wb + offsetof(bg_block_q4_1, qs)), y);
}

static inline AVX2 __m256i isum_q5_1(const uint8_t *wb, __m256i y)
{
    return dot_u8_i8(bg_unsigned_codes_q5(wb + offsetof(bg_block_q5_1, qh),
                                          wb + offsetof(bg_block_q5_1, qs)),
                     y);
}

/* Block after block into one accumulator, as llama.cpp's vec_dot: acc +
 * d_w * d_a * isum, and the min terms as one float running sum fused with
 * each product m * s (its compiler fuses that multiply-add), added at the
 * end. (d, m) and (d, s) are the first two fp16 of each block, so one
 * fused multiply-add of the pairs leaves that sum in lane 1. */
static inline AVX2 float dot_vs_q8_1(block_isum_fn isum, size_t wbytes, int64_t n,
                                     const void *w, const void *a)
{
    _Static_assert(offsetof(bg_block_q4_1, m) == 2 && offsetof(bg_block_q5_1, m) == 2 &&
                   offsetof(bg_block_q8_1, s) == 2, "d and m (s) are adjacent");
    const uint8_t *wb = w, *ab = a;
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK; b++, wb += wbytes, ab += sizeof(bg_block_q8_1)) {
        bg_prefetch_ahead(wb, wbytes);
        const __m128 wdm = load_f16x2(wb), ads = load_f16x2(ab);
        const __m128 scale = _mm_mul_ps(wdm, ads);
        const __m256i y = load_i8x32(ab + offsetof(bg_block_q8_1, qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum(wb, y)), _mm256_broadcastss_ps(scale), acc);
        accm = _mm_fmadd_ps(wdm, ads, accm);
    }
    return hsum_ps(acc) + _mm_cvtss_f32(_mm_movehdup_ps(accm));
}

AVX2 float bg_dot_q4_1_avx2(int64_t n, const void *w, const void *a)
{
    return dot_vs_q8_1(isum_q4_1, sizeof(bg_block_q4_1), n, w, a);
}

AVX2 float bg_dot_q5_1_avx2(int64_t n, const void *w, const void *a)
{
    return dot_vs_q8_1(isum_q5_1, sizeof(bg_block_q5_1), n, w, a);
}

/* ------------------------------------------------------------------------
 * Activations into Q8_0 and Q8_1
 * ------------------------------------------------------------------------ */

/* One block of 32 as quant.c's activation_q8_block does it, to the bit:
 * d = max |x| / 127 (a NaN never the max), codes x * 127 / max rounded to
 * nearest even. A product that is not finite (a NaN input; infinity times
 * the zero scale of an infinite max; anything times the infinite scale of
 * a tiny max) becomes code 0, as the reference's conversion makes it.
 * Returns d; *code_sum gets the sum of the codes. */
static inline AVX2 float activation_block(const float *x, uint16_t *d_out, int8_t *qs,
                                          int32_t *code_sum)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], amax8 = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax8 = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), amax8); /* NaN keeps amax8 */
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    *d_out = bg_f32_to_f16(d);
    const __m256 inf = _mm256_set1_ps(__builtin_inff());
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        const __m256 p = _mm256_mul_ps(v[k], _mm256_set1_ps(id));
        const __m256i finite =
            _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(sign, p), inf, _CMP_LT_OQ));
        q[k] = _mm256_and_si256(_mm256_cvtps_epi32(p), finite);
    }
    /* packs interleave 128-bit lanes; the permute puts the codes back in order */
    const __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)qs, bytes);
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    *code_sum = _mm_cvtsi128_si32(hsum_i32(s));
    return d;
}

AVX2 void bg_quantize_q8_0_avx2(const float *src, void *dst, int64_t n)
{
    uint8_t *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++, y += sizeof(bg_block_q8_0)) {
        uint16_t d;
        int32_t sum;
        activation_block(src + b * BG_QK, &d, (int8_t *)(y + offsetof(bg_block_q8_0, qs)), &sum);
        memcpy(y + offsetof(bg_block_q8_0, d), &d, sizeof d);
    }
}

AVX2 void bg_quantize_q8_1_avx2(const float *src, void *dst, int64_t n)
{
    uint8_t *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++, y += sizeof(bg_block_q8_1)) {
        uint16_t d16;
        int32_t sum;
        const float d = activation_block(src + b * BG_QK, &d16,
                                         (int8_t *)(y + offsetof(bg_block_q8_1, qs)), &sum);
        const uint16_t s16 = bg_f32_to_f16(d * (float)sum);
        memcpy(y + offsetof(bg_block_q8_1, d), &d16, sizeof d16);
        memcpy(y + offsetof(bg_block_q8_1, s), &s16, sizeof s16);
    }
}
#endif
