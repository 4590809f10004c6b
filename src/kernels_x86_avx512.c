/* AVX-512 (F, BW, VL, DQ) + VNNI dot products of the K-quants that
 * dominate real files: Q4_K, Q5_K, Q6_K against Q8_K activations, single
 * and multi-row. The dispatcher (kernels.c) prefers them to the AVX2
 * kernels only on CPUs with all of these extensions (and AVX2, FMA, F16C,
 * which the tails borrow). The 32-element formats keep their AVX2 kernels:
 * those follow llama.cpp's vec_dot block order (one accumulator), which
 * pairing blocks in 512-bit registers would change.
 *
 * What AVX-512 buys here:
 * - VNNI. vpdpwssd multiplies s16 pairs into an s32 accumulator (AVX2:
 *   madd + add). Integer sums stay exact.
 * - Half-register shifts are masked shifts.
 * - 512-bit registers where they pay: Q6_K (64 contiguous ql bytes give
 *   two 64-element registers in activation order; one group of 16 per
 *   128-bit lane, scales spread with vpermw), and the multi-row dots, where
 *   decoding is shared and a chunk's two groups meet 64 activations at
 *   once. The single Q4_K/Q5_K dots stay at 256 bits with VNNI: at 512 the
 *   core issues vector uops to two ports instead of three and these
 *   kernels, bound by shifts, shuffles and multiplies, ran no faster.
 *
 * Range checks as in the AVX2 kernels: maddubs pairs <= 2 * 63 * 128 (Q6_K)
 * fit s16, a super-block's scaled sum < 2^31.
 *
 * Loads are unaligned throughout (tensors are mmapped at any offset). */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels_x86_kquant.h"
#include "kernels_x86_prefetch.h"
#include "quant.h"

#define BG_AVX512                                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

BG_AVX512 static inline __m256i loadu256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

BG_AVX512 static inline __m512i loadu512(const void *p)
{
    return _mm512_loadu_si512(p);
}

/* 32 bytes at p in both halves of a register: one broadcast load. */
BG_AVX512 static inline __m512i load_twice256(const void *p)
{
    return _mm512_broadcast_i64x4(loadu256(p));
}

/* The 16 s32 lanes of v folded to 8 (lane i + lane i + 8). */
BG_AVX512 static inline __m256i fold512(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* ------------------------------------------------------------------------
 * Q4_K and Q5_K: 256-bit registers with VNNI
 * ------------------------------------------------------------------------ */

/* Full 512-bit registers do not help these two: with them in flight the
 * core runs vector uops on two ports instead of three, and the kernels are
 * port-bound (shifts, shuffles, multiplies). In 256-bit registers VNNI's
 * vpdpwssd still fuses the scale multiply with the accumulation, which
 * removes the adds of the AVX2 kernel. Layout as in kernels_x86_kquants.c:
 * chunk c's 32 bytes hold group 2c (low nibbles) and 2c + 1 (high). */

/* acc + the scaled dot of chunk c (its two groups) with the activations. */
/* Chunk c's codes: group 2c in *lo, group 2c + 1 in *hi, with Q5_K's fifth
 * bits from *hb (NULL for Q4_K), which moves on to the next chunk's bits. */
BG_AVX512 static inline void k_codes256(const uint8_t *qs, __m256i *hb, int c, __m256i *lo,
                                        __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i q = loadu256(qs + 32 * c);
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (hb) {
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(*hb, 4), bit4));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_slli_epi16(*hb, 3), bit4));
        *hb = _mm256_srli_epi16(*hb, 2);
    }
}

BG_AVX512 static inline __m256i k_chunk256(__m256i acc, const uint8_t *qs, __m256i *hb,
                                           const int8_t *act, __m256i sc, int c)
{
    __m256i lo, hi;
    k_codes256(qs, hb, c, &lo, &hi);
    const __m256i s0 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * 2 * c)));
    const __m256i s1 =
        _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
    acc = _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(lo, loadu256(act + 64 * c)), s0);
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(hi, loadu256(act + 64 * c + 32)), s1);
}

/* As the AVX2 k_dot; only the integer sums use VNNI. */
BG_AVX512 static inline float k_dot256(int64_t n, const uint8_t *w, size_t bytes, size_t qh_off,
                                       size_t qs_off, const bg_block_q8_K *y)
{
    kq_sums s = {_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
    for (int64_t b = 0; b < n / BG_QK_K; b++, w += bytes, y++) {
        bg_prefetch_ahead(w, bytes);
        __m128i mins;
        const __m256i sc = kq_scales(w + offsetof(bg_block_q4_K, scales), &mins);
        const uint8_t *qs = w + qs_off;
        __m256i hbits = qh_off ? loadu256(w + qh_off) : _mm256_setzero_si256();
        __m256i *hb = qh_off ? &hbits : NULL;
        __m256i s01 = k_chunk256(_mm256_setzero_si256(), qs, hb, y->qs, sc, 0);
        s01 = k_chunk256(s01, qs, hb, y->qs, sc, 1);
        __m256i s23 = k_chunk256(_mm256_setzero_si256(), qs, hb, y->qs, sc, 2);
        s23 = k_chunk256(s23, qs, hb, y->qs, sc, 3);
        kq_add(&s, kq_block_d(w), kq_block_dmin(w), y, _mm256_add_epi32(s01, s23), mins, qh_off != 0);
    }
    return kq_total(&s, qh_off != 0);
}

/* Several activation rows against one weight row: a super-block's codes
 * and scales are unpacked once (k_unpack) and reused for every row. Per
 * row the integer work then runs at 512 bits: chunk c's two groups (low
 * nibbles, high nibbles) side by side meet the chunk's 64 contiguous
 * activations in one maddubs and one vpdpwssd, and the two halves folded
 * give each of the eight lanes the same exact integer as k_dot256; the
 * float steps are k_dot256's, so every result is bitwise the single dot. */
typedef struct k_unpacked {
    __m512i q[4]; /* chunk c: group 2c's codes | group 2c + 1's codes */
    __m512i s[4]; /* chunk c: their scales, in every s16 lane of each half */
    __m128i mins;
} k_unpacked;

BG_AVX512 static inline void k_unpack(const uint8_t *w, size_t qh_off, size_t qs_off,
                                      k_unpacked *u)
{
    const __m256i sc = kq_scales(w + offsetof(bg_block_q4_K, scales), &u->mins);
    __m256i hbits = qh_off ? loadu256(w + qh_off) : _mm256_setzero_si256();
    __m256i *hb = qh_off ? &hbits : NULL;
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k_codes256(w + qs_off, hb, c, &lo, &hi);
        const __m256i s0 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * 2 * c)));
        const __m256i s1 =
            _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
        u->q[c] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        u->s[c] = _mm512_inserti64x4(_mm512_castsi256_si512(s0), s1, 1);
    }
}

/* The eight lanes of scaled integer sums of an unpacked super-block with
 * 256 activations. */
BG_AVX512 static inline __m256i k_isum(const k_unpacked *u, const int8_t *act)
{
    __m512i s01 = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                      _mm512_maddubs_epi16(u->q[0], loadu512(act)), u->s[0]);
    __m512i s23 = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                      _mm512_maddubs_epi16(u->q[2], loadu512(act + 128)), u->s[2]);
    s01 = _mm512_dpwssd_epi32(s01, _mm512_maddubs_epi16(u->q[1], loadu512(act + 64)), u->s[1]);
    s23 = _mm512_dpwssd_epi32(s23, _mm512_maddubs_epi16(u->q[3], loadu512(act + 192)), u->s[3]);
    return fold512(_mm512_add_epi32(s01, s23));
}

BG_AVX512 static inline void k_dot256_multi(int64_t n, const uint8_t *w, size_t bytes,
                                            size_t qh_off, size_t qs_off, const uint8_t *a,
                                            size_t a_stride, int na, float *out)
{
    kq_sums s[BG_DOT_MULTI];
    for (int t = 0; t < na; t++)
        s[t] = (kq_sums){_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
    for (int64_t b = 0; b < n / BG_QK_K; b++, w += bytes) {
        bg_prefetch_ahead(w, bytes);
        k_unpacked u;
        k_unpack(w, qh_off, qs_off, &u);
        const float wd = kq_block_d(w), wdmin = kq_block_dmin(w);
        for (int t = 0; t < na; t++) {
            const bg_block_q8_K *y = (const bg_block_q8_K *)(const void *)(a + t * a_stride) + b;
            kq_add(&s[t], wd, wdmin, y, k_isum(&u, y->qs), u.mins, qh_off != 0);
        }
    }
    for (int t = 0; t < na; t++)
        out[t] = kq_total(&s[t], qh_off != 0);
}

BG_AVX512 void bg_dot_multi_q4_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride,
                                        int na, float *out)
{
    k_dot256_multi(n, w, sizeof(bg_block_q4_K), 0, offsetof(bg_block_q4_K, qs), a, a_stride, na,
                   out);
}

BG_AVX512 void bg_dot_multi_q5_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride,
                                        int na, float *out)
{
    k_dot256_multi(n, w, sizeof(bg_block_q5_K), offsetof(bg_block_q5_K, qh),
                   offsetof(bg_block_q5_K, qs), a, a_stride, na, out);
}

BG_AVX512 float bg_dot_q4_K_avx512(int64_t n, const void *w, const void *a)
{
    return k_dot256(n, w, sizeof(bg_block_q4_K), 0, offsetof(bg_block_q4_K, qs), a);
}

BG_AVX512 float bg_dot_q5_K_avx512(int64_t n, const void *w, const void *a)
{
    return k_dot256(n, w, sizeof(bg_block_q5_K), offsetof(bg_block_q5_K, qh),
                    offsetof(bg_block_q5_K, qs), a);
}

/* ------------------------------------------------------------------------
 * Q6_K
 * ------------------------------------------------------------------------ */

/* vpermw indices spreading s16 scales g..g+3 over the four 128-bit lanes. */
#define SPREAD4(g)                                                                        \
    _mm512_set_epi16((g) + 3, (g) + 3, (g) + 3, (g) + 3, (g) + 3, (g) + 3, (g) + 3, (g) + 3, \
                     (g) + 2, (g) + 2, (g) + 2, (g) + 2, (g) + 2, (g) + 2, (g) + 2, (g) + 2, \
                     (g) + 1, (g) + 1, (g) + 1, (g) + 1, (g) + 1, (g) + 1, (g) + 1, (g) + 1, \
                     (g), (g), (g), (g), (g), (g), (g), (g))

/* Per 128-element chunk c: the 64 ql bytes hold elements 0-63 of the chunk
 * in their low nibbles and 64-127 in their high ones, already in
 * activation order; qh byte l holds the top bits of elements l, 32 + l,
 * 64 + l, 96 + l at bits 0, 2, 4, 6. The 32 qh bytes go to both halves and
 * the high half is shifted right by 2, which lines up bits 0/2 (low/high
 * half) for the first register and bits 4/6 for the second. Each 128-bit
 * lane is one group of 16, so the scales are spread with vpermw. The codes
 * stay unsigned; the -32 comes back through the bsums as in AVX2. */
BG_AVX512 float bg_dot_q6_K_avx512(int64_t n, const void *w, const void *a)
{
    const bg_block_q6_K *x = w;
    const bg_block_q8_K *y = a;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++, y++) {
        bg_prefetch_ahead(x, sizeof *x);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        const __m256i corr = _mm256_madd_epi16(loadu256(y->bsums), sc16);
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i isum = _mm512_setzero_si512();
        for (int c = 0; c < 2; c++) {
            const __m512i l = loadu512(x->ql + 64 * c);
            const __m512i h0 = load_twice256(x->qh + 32 * c);
            const __m512i h = _mm512_mask_srli_epi16(h0, 0xFFFF0000u, h0, 2);
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, m4),
                                                _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
            const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                _mm512_and_si512(h, m30));
            const int8_t *act = y->qs + 128 * c;
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(q01, loadu512(act)),
                                       _mm512_permutexvar_epi16(c ? SPREAD4(8) : SPREAD4(0), sc));
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(q23, loadu512(act + 64)),
                                       _mm512_permutexvar_epi16(c ? SPREAD4(12) : SPREAD4(4), sc));
        }
        const __m256i total = _mm256_sub_epi32(fold512(isum), _mm256_slli_epi32(corr, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total),
                              _mm256_set1_ps(y->d * kq_load_f16(&x->d)), acc);
    }
    return kq_hsum(acc);
}

/* Q6_K against several activation rows: each super-block's codes and
 * spread scales made once, then bg_dot_q6_K_avx512's steps per row. */
BG_AVX512 void bg_dot_multi_q6_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride,
                                        int na, float *out)
{
    const bg_block_q6_K *x = w;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m256 acc[BG_DOT_MULTI];
    for (int t = 0; t < na; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++) {
        bg_prefetch_ahead(x, sizeof *x);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i q[4], s[4];
        for (int c = 0; c < 2; c++) {
            const __m512i l = loadu512(x->ql + 64 * c);
            const __m512i h0 = load_twice256(x->qh + 32 * c);
            const __m512i h = _mm512_mask_srli_epi16(h0, 0xFFFF0000u, h0, 2);
            q[2 * c] = _mm512_or_si512(_mm512_and_si512(l, m4),
                                       _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
            q[2 * c + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                           _mm512_and_si512(h, m30));
            s[2 * c] = _mm512_permutexvar_epi16(c ? SPREAD4(8) : SPREAD4(0), sc);
            s[2 * c + 1] = _mm512_permutexvar_epi16(c ? SPREAD4(12) : SPREAD4(4), sc);
        }
        const float dw = kq_load_f16(&x->d);
        for (int t = 0; t < na; t++) {
            const bg_block_q8_K *y = (const bg_block_q8_K *)(const void *)((const uint8_t *)a + t * a_stride) + b;
            const __m256i corr = _mm256_madd_epi16(loadu256(y->bsums), sc16);
            __m512i isum = _mm512_setzero_si512();
            for (int g = 0; g < 4; g++)
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(q[g], loadu512(y->qs + 64 * g)), s[g]);
            const __m256i total = _mm256_sub_epi32(fold512(isum), _mm256_slli_epi32(corr, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(y->d * dw), acc[t]);
        }
    }
    for (int t = 0; t < na; t++)
        out[t] = kq_hsum(acc[t]);
}

/* quantize_q8_K of quant.c, 16 codes (one block sum) a vector: the first
 * element of largest magnitude sets the scale -127 / max, codes round to
 * nearest even as the reference's magic-number addition does, and a NaN
 * (which the reference skips when finding max) becomes code 0 as there. */
void bg_quantize_q8_K_avx512(const float *src, void *dst, int64_t n) BG_AVX512;

void bg_quantize_q8_K_avx512(const float *src, void *dst, int64_t n)
{
    bg_block_q8_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        __m512 amax16 = _mm512_setzero_ps();
        for (int i = 0; i < 16; i++) /* a NaN lane keeps the running max */
            amax16 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(src + 16 * i)), amax16);
        const float amax = _mm512_reduce_max_ps(amax16);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float max = 0;
        for (int i = 0; i < 16; i++) {
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(src + 16 * i)),
                                                     _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = src[16 * i + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        for (int i = 0; i < 16; i++) {
            const __m512 x = _mm512_loadu_ps(src + 16 * i);
            const __mmask16 num = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
            const __m512i q = _mm512_min_epi32(
                _mm512_maskz_cvtps_epi32(num, _mm512_mul_ps(vs, x)), _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[b].qs + 16 * i), _mm512_cvtepi32_epi8(q));
            y[b].bsums[i] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[b].d = 1 / iscale;
    }
}

#endif
