/* What the AVX2 and AVX-512 K-quant dot kernels share (the AVX2 tiled
 * products read Q4_K headers with it too): reading the Q4_K/Q5_K block
 * header, and the float arithmetic that turns a
 * super-block's exact integer sums into the dot product. That arithmetic is
 * llama.cpp's, step for step, so the results agree to the bit (its
 * activations are rounded to Q8_K from these sums, and a random network
 * amplifies any difference; tests/oracle_kernels.c checks it): the scaled
 * sums accumulate in eight lanes, one fused multiply-add per super-block,
 * summed pairwise at the end; the min terms of Q4_K go to four lanes of
 * group pairs, those of Q5_K to one float per super-block, fused into a
 * running sum. Only the integer sums differ between the kernels. */
#ifndef BG_KERNELS_X86_KQUANT_H
#define BG_KERNELS_X86_KQUANT_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "quant.h"

/* A subset of every K-quant kernel's target, so these inline into both. */
#define BG_KQ __attribute__((target("avx2,fma,f16c")))

/* The header (d, dmin, scales) is laid out alike in both formats. */
_Static_assert(offsetof(bg_block_q4_K, d) == offsetof(bg_block_q5_K, d) &&
                   offsetof(bg_block_q4_K, dmin) == offsetof(bg_block_q5_K, dmin) &&
                   offsetof(bg_block_q4_K, scales) == offsetof(bg_block_q5_K, scales),
               "Q4_K/Q5_K headers differ");

/* fp16 at p, exactly (subnormals included). */
BG_KQ static inline float kq_load_f16(const void *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)), as llama.cpp sums. */
BG_KQ static inline float kq_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 12 packed scale bytes of Q4_K/Q5_K (layout in quant.c), unpacked four
 * groups at a time with 32-bit integer arithmetic: bytes 0-3 / 4-7 carry
 * groups 0-3 in their low six bits and the top two bits of groups 4-7 in
 * their top two; bytes 8-11 carry the low nibbles of groups 4-7 (scale low,
 * min high). Returns the eight scales as s16 in both lanes and, in *mins,
 * the eight mins as s16. */
BG_KQ static inline __m256i kq_scales(const uint8_t *p, __m128i *mins)
{
    uint32_t u[3];
    memcpy(u, p, sizeof u);
    const uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
    const uint32_t sc_lo = u[0] & low6, mn_lo = u[1] & low6;
    const uint32_t sc_hi = (u[2] & low4) | ((u[0] >> 6) & low2) << 4;
    const uint32_t mn_hi = ((u[2] >> 4) & low4) | ((u[1] >> 6) & low2) << 4;
    const __m128i b = _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)mn_lo, (int)mn_hi);
    *mins = _mm_cvtepu8_epi16(_mm_srli_si128(b, 8));
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(b));
}

/* The running sums of one Q4_K/Q5_K dot product. */
typedef struct kq_sums {
    __m256 acc;      /* d * scaled sums, eight lanes */
    __m128 acc_min;  /* Q4_K: -dmin * min terms, four lanes */
    float sum_min;   /* Q5_K: the same, one float */
} kq_sums;

/* The super-block's d and dmin as floats. */
BG_KQ static inline float kq_block_d(const uint8_t *w)
{
    return kq_load_f16(w + offsetof(bg_block_q4_K, d));
}
BG_KQ static inline float kq_block_dmin(const uint8_t *w)
{
    return kq_load_f16(w + offsetof(bg_block_q4_K, dmin));
}

/* Folds in a super-block (a Q4_K or Q5_K block, its d and dmin as floats)
 * with activations y, given its eight lanes of scaled integer sums and its
 * eight mins. The min terms
 * pair groups: t = min(2t) * bsum32(2t) + min(2t+1) * bsum32(2t+1), where
 * bsum32(g) is the activation sum of group g (two 16-element bsums). */
BG_KQ static inline void kq_add(kq_sums *s, float wd, float wdmin, const bg_block_q8_K *y,
                                __m256i isum, __m128i mins, bool q5)
{
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    const __m128i pairs = _mm_madd_epi16(
        mins, _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
    const float d = y->d * wd;
    const float dmin = -y->d * wdmin;
    s->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), s->acc);
    if (q5) {
        const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(pairs, pairs), pairs);
        /* llama.cpp's compiler fuses this multiply-add */
        s->sum_min = fmaf(dmin, (float)_mm_cvtsi128_si32(h), s->sum_min);
    } else {
        s->acc_min = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(pairs), s->acc_min);
    }
}

BG_KQ static inline float kq_total(const kq_sums *s, bool q5)
{
    if (q5)
        return kq_hsum(s->acc) + s->sum_min;
    __m128 m = _mm_add_ps(s->acc_min, _mm_movehl_ps(s->acc_min, s->acc_min));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return kq_hsum(s->acc) + _mm_cvtss_f32(m);
}

/* Q2_K and Q3_K codes, for the dots and the tiles. Register k of chunk c
 * (k < 4) holds the two-bit codes of elements 128c + 32k + l, the bits
 * 2k..2k+1 of the chunk's byte l: two groups of 16 in activation order,
 * one per 128-bit lane. */
BG_KQ static inline __m256i kq_crumbs(__m256i q, int k)
{
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), _mm256_set1_epi8(3));
}

/* Q3_K: register k of chunk c as kq_crumbs(), with each code's third bit
 * (bit 4c + k of hmask byte l) added as 4: unsigned codes 0..7 (the code
 * + 4) for maddubs. */
BG_KQ static inline __m256i kq_q3_codes(__m256i bits, __m256i hmask, int c, int k)
{
    const int bit = 4 * c + k;
    const __m256i h = _mm256_and_si256(hmask, _mm256_set1_epi8((char)(1 << bit)));
    /* 16-bit shifts: the bit never leaves its byte (to bit 2 from 0..7) */
    const __m256i h4 = bit <= 2 ? _mm256_slli_epi16(h, 2 - bit) : _mm256_srli_epi16(h, bit - 2);
    return _mm256_or_si256(kq_crumbs(bits, k), h4);
}

/* Q3_K's sixteen 6-bit scales - 32 (layout in quant.c) as signed bytes,
 * group g in byte g. The 12 bytes as three words: groups 0-3 and 4-7 take
 * the low nibbles of words 0 and 1, groups 8-11 and 12-15 their high
 * nibbles; word 2 holds the top two bits of groups 4j..4j+3 at bits 2j of
 * each byte. */
BG_KQ static inline __m128i kq_q3_scales(const uint8_t *p)
{
    uint32_t u[3];
    memcpy(u, p, sizeof u);
    const uint32_t low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
    const __m128i b = _mm_setr_epi32((int)((u[0] & low4) | (u[2] & low2) << 4),
                                     (int)((u[1] & low4) | ((u[2] >> 2) & low2) << 4),
                                     (int)(((u[0] >> 4) & low4) | ((u[2] >> 4) & low2) << 4),
                                     (int)(((u[1] >> 4) & low4) | ((u[2] >> 6) & low2) << 4));
    return _mm_sub_epi8(b, _mm_set1_epi8(32));
}

#endif
