/* AVX2 tiled products for prefill (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights
 * against Q8_K activations; at the end of the file, the signed codes of Q8_0, Q4_0,
 * Q5_0 and IQ4_NL against Q8_0 and of IQ4_XS against Q8_K): processors
 * without AMX, the consumer CPUs that hold a split model's experts among
 * them.
 *
 * Why: the dots keep 32 weights of one row in a register and pay two
 * multiplies per 32 products (maddubs, then madd to apply the group's
 * scale and widen to 32 bits), and reload every activation row for every
 * weight row. Here the lanes are activation rows instead: a register holds
 * four codes of each of 8 activation rows, and one weight row's four codes
 * are broadcast against it. The s16 sums of one scale group then pile up
 * over several maddubs (eight for Q4_K, four for Q5_K, Q3_K and Q2_K, two
 * for Q6_K: a scale's codes, within s16 range)
 * before the one madd that scales them. A tile is 4 weight rows by 16
 * activation rows (two registers), so a step loads 6 registers for 8
 * maddubs: with one weight row a load, the load ports would bound it.
 *
 * Layout:
 *  - Activations are packed once per product, per 16 rows and super-block,
 *    into an act16 record: q[k / 4][4 t + k % 4] is code k of row t (rows
 *    0-7 in the first 32 bytes of a line, 8-15 in the second), with the
 *    rows' scales and code sums (as s16 pairs, for madd). Rows past the end
 *    are zero.
 *  - Weights are unpacked per stripe of 16 rows and GEMM_CHUNK super-blocks
 *    into unsigned codes in element order plus per-group s16 scale pairs, so
 *    a row's four codes are one 32-bit broadcast load.
 *
 * The integer sums are exact, as in the dots; the float steps are ordered
 * differently, so results agree with the dots to rounding, not to the bit
 * (llama.cpp's own repacked AVX2 prefill kernels differ from its vec_dot in
 * the same way). Ranges, |a| <= 128: a maddubs lane is at most 2 x 15 x 128
 * (Q4_K), 2 x 31 x 128 (Q5_K), 2 x 63 x 128 (Q6_K), 2 x 7 x 128 (Q3_K) or
 * 2 x 3 x 128 (Q2_K), so eight, four, two, four or four of them sum below
 * 32767; a super-block's scaled sum is below 2^31 as in the dots. */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels_x86_codes.h"
#include "kernels_x86_kquant.h"
#include "kernels_x86_tiled.h"
#include "quant.h"

#define BG_AVX2 __attribute__((target("avx2,fma,f16c")))

/* Super-blocks of a stripe unpacked at a time: 16 rows x 4 x 424 bytes,
 * which stay in L1 with a block of activations while it is used. */
#define GEMM_CHUNK 4

/* One block of 16 activation rows, one super-block. */
typedef struct act16 {
    int8_t q[BG_QK_K / 4][64];  /* q[k / 4][4 t + k % 4] = code k of row t */
    float d[16];
    int32_t sum16_pair[8][16];  /* s16 pair: bsums 2p (low) and 2p + 1 (high) */
    int32_t sum32_pair[4][16];  /* s16 pair: sums of codes 64p .. +31 (low), the next 32 */
} act16;

/* One weight row's super-block, unpacked. */
typedef struct wblock {
    /* unsigned: Q4_K 0..15, Q5_K 0..31, Q6_K 0..63 (code + 32), Q3_K 0..7
     * (code + 4), Q2_K 0..3 */
    uint8_t codes[BG_QK_K];
    int32_t scale_pair[32];  /* the scale of each run of maddubs steps, in both s16 halves */
    /* mins 2p, 2p + 1 (s16 pair; Q4_K, Q5_K of 32-code groups, Q2_K of
     * 16-code ones); Q6_K, Q3_K: scales 2p, 2p + 1 */
    int32_t offset_pair[8];
    float d, dmin;
} wblock;

size_t bg_avx2_packed_bytes(int64_t n_in, int64_t n_act)
{
    return (size_t)((n_act + 15) / 16) * (size_t)(n_in / BG_QK_K) * sizeof(act16);
}


/* r[i] lane j becomes lane i of out[j]: an 8 x 8 transpose of 32-bit
 * elements, in place. */
BG_AVX2 static void transpose8(__m256i r[8])
{
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* t[2i] per lane half: r[2i][0], r[2i+1][0], r[2i][1], r[2i+1][1] */
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    /* u[4h + m]: element m (low half) and 4 + m (high) of rows 4h .. 4h + 3 */
    for (int m = 0; m < 4; m++) {
        r[m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x20);
        r[4 + m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x31);
    }
}

/* 32 codes of each of 16 activation rows (src[t]; NULL: zeros) into the
 * 8 lines q[0..7] of a packed record: q[k][4 t + i] is code 4 k + i of row
 * t. */
BG_AVX2 static void transpose_codes(const int8_t *const src[16], int8_t (*q)[64])
{
    for (int half = 0; half < 2; half++) {
        __m256i r[8];
        for (int t = 0; t < 8; t++)
            r[t] = src[8 * half + t] ? _mm256_loadu_si256((const __m256i *)src[8 * half + t])
                                     : _mm256_setzero_si256();
        transpose8(r);
        for (int k = 0; k < 8; k++)
            _mm256_storeu_si256((__m256i *)(q[k] + 32 * half), r[k]);
    }
}

void bg_avx2_pack_q8_K(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                       void *packed) BG_AVX2;

void bg_avx2_pack_q8_K(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                       void *packed)
{
    const int64_t nb = n_in / BG_QK_K, t0 = block * 16;
    act16 *out = (act16 *)packed + block * nb;
    for (int64_t s = 0; s < nb; s++, out++) {
        const bg_block_q8_K *rows[16];
        bg_q8_K_rows16(xq, xq_row, n_act, t0, s, rows);
        for (int part = 0; part < 8; part++) {
            const int8_t *src[16];
            for (int t = 0; t < 16; t++)
                src[t] = rows[t] ? rows[t]->qs + 32 * part : NULL;
            transpose_codes(src, out->q + 8 * part);
        }
        for (int t = 0; t < 16; t++) {
            const int16_t *bs = rows[t] ? rows[t]->bsums : NULL;
            out->d[t] = rows[t] ? rows[t]->d : 0.0f;
            /* |a sum of 32 codes| <= 4096: an s16 */
            for (int p = 0; p < 8; p++)
                out->sum16_pair[p][t] = bs ? bg_s16_pair(bs[2 * p], bs[2 * p + 1]) : 0;
            for (int p = 0; p < 4; p++)
                out->sum32_pair[p][t] =
                    bs ? bg_s16_pair(bs[4 * p] + bs[4 * p + 1], bs[4 * p + 2] + bs[4 * p + 3]) : 0;
        }
    }
}

/* ------------------------------------------------------------------------
 * Weight unpacking
 * ------------------------------------------------------------------------ */

/* 32-bit lanes holding an s16 value in the low half: the value in both
 * halves, the scale operand of a madd. */
BG_AVX2 static inline __m256i both_halves(__m256i v)
{
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
                           _mm256_slli_epi32(v, 16));
}

/* The header Q4_K and Q5_K share: d, dmin, and the 12 scale bytes of
 * six-bit scales and mins (quant.c). A run of maddubs steps is a whole
 * group of 32 codes (Q4_K, eight steps) or half of one (Q5_K, four), so
 * run r takes scale r or r / 2. */
BG_AVX2 static void k_header_unpack(const uint8_t *x, bool half_runs, wblock *out)
{
    __m128i mins;
    const __m128i scales =
        _mm256_castsi256_si128(kq_scales(x + offsetof(bg_block_q4_K, scales), &mins));
    if (half_runs) {
        _mm256_storeu_si256((__m256i *)out->scale_pair,
                            both_halves(_mm256_cvtepu16_epi32(_mm_unpacklo_epi16(scales, scales))));
        _mm256_storeu_si256((__m256i *)(out->scale_pair + 8),
                            both_halves(_mm256_cvtepu16_epi32(_mm_unpackhi_epi16(scales, scales))));
    } else {
        _mm256_storeu_si256((__m256i *)out->scale_pair,
                            both_halves(_mm256_cvtepu16_epi32(scales)));
    }
    _mm_storeu_si128((__m128i *)out->offset_pair, mins);
    out->d = kq_block_d(x);
    out->dmin = kq_block_dmin(x);
}

/* Q4_K: chunk c of qs holds codes 64c + l (low nibbles) and 64c + 32 + l
 * (high). */
BG_AVX2 static void q4_K_unpack(const uint8_t *src, wblock *out)
{
    const bg_block_q4_K *x = (const bg_block_q4_K *)(const void *)src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        _mm256_storeu_si256((__m256i *)(out->codes + 64 * c), _mm256_and_si256(q, m4));
        _mm256_storeu_si256((__m256i *)(out->codes + 64 * c + 32),
                            _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    }
    k_header_unpack(src, false, out);
}

/* Q5_K: Q4_K's nibbles, and bits 2c and 2c + 1 of qh byte l are the fifth
 * bits of codes 64c + l and 64c + 32 + l. */
BG_AVX2 static void q5_K_unpack(const uint8_t *src, wblock *out)
{
    const bg_block_q5_K *x = (const bg_block_q5_K *)(const void *)src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    __m256i h = _mm256_loadu_si256((const __m256i *)x->qh);
    for (int c = 0; c < 4; c++, h = _mm256_srli_epi16(h, 2)) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        /* 16-bit shifts: the bits read never cross a byte */
        _mm256_storeu_si256((__m256i *)(out->codes + 64 * c),
                            _mm256_or_si256(_mm256_and_si256(q, m4),
                                            _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4)));
        _mm256_storeu_si256((__m256i *)(out->codes + 64 * c + 32),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                            _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4)));
    }
    k_header_unpack(src, true, out);
}

/* Q6_K: per 128-code half c, byte l < 64 of ql holds code l low and code
 * l + 64 high; bits 2i, 2i + 1 of qh byte l < 32 are the top two bits of
 * code l + 32i. The codes stay unsigned (code + 32); the offset comes back
 * through the activations' 16-code sums. */
BG_AVX2 static void q6_K_unpack(const uint8_t *src, wblock *out)
{
    const bg_block_q6_K *x = (const bg_block_q6_K *)(const void *)src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    for (int c = 0; c < 2; c++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * c));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * c + 32));
        const __m256i h = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * c));
        uint8_t *o = out->codes + 128 * c;
        _mm256_storeu_si256((__m256i *)o,
                            _mm256_or_si256(_mm256_and_si256(l0, m4),
                                            _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)));
        _mm256_storeu_si256((__m256i *)(o + 32),
                            _mm256_or_si256(_mm256_and_si256(l1, m4),
                                            _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)));
        _mm256_storeu_si256((__m256i *)(o + 64),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                            _mm256_and_si256(h, m30)));
        _mm256_storeu_si256((__m256i *)(o + 96),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                            _mm256_and_si256(_mm256_srli_epi16(h, 2), m30)));
    }
    /* A run is two maddubs steps, 8 codes: half a 16-code group, so run r
     * takes scale r / 2, sign-extended into both s16 halves. The offsets'
     * pairs of consecutive scales are the scales widened to s16. */
    const __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)x->scales);
    const __m128i twice_lo = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m128i twice_hi = _mm_add_epi8(twice_lo, _mm_set1_epi8(8));
    const __m128i dup[2] = {_mm_shuffle_epi8(sc, twice_lo), _mm_shuffle_epi8(sc, twice_hi)};
    for (int i = 0; i < 4; i++) {
        const __m256i v = _mm256_cvtepi8_epi32(i % 2 ? _mm_srli_si128(dup[i / 2], 8) : dup[i / 2]);
        _mm256_storeu_si256((__m256i *)(out->scale_pair + 8 * i), both_halves(v));
    }
    _mm256_storeu_si256((__m256i *)out->offset_pair, _mm256_cvtepi8_epi16(sc));
    out->d = kq_load_f16(&x->d);
    out->dmin = 0.0f;
}

/* Q2_K and Q3_K: sixteen groups of 16 codes, a scale each: run r (four
 * maddubs steps) takes scale r. scales16 holds them as s16. */
BG_AVX2 static void sixteen_scales(__m256i scales16, wblock *out)
{
    _mm256_storeu_si256((__m256i *)out->scale_pair,
                        both_halves(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(scales16))));
    _mm256_storeu_si256((__m256i *)(out->scale_pair + 8),
                        both_halves(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(scales16, 1))));
}

/* Q2_K: scale (low nibble) and min (high) of each group of 16; the mins
 * pair with the activations' 16-code sums. */
BG_AVX2 static void q2_K_unpack(const uint8_t *src, wblock *out)
{
    const bg_block_q2_K *x = (const bg_block_q2_K *)(const void *)src;
    for (int c = 0; c < 2; c++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        for (int k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i *)(out->codes + 128 * c + 32 * k), kq_crumbs(bits, k));
    }
    const __m128i packed = _mm_loadu_si128((const __m128i *)(const void *)x->scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    sixteen_scales(_mm256_cvtepu8_epi16(_mm_and_si128(packed, m4)), out);
    _mm256_storeu_si256((__m256i *)out->offset_pair,
                        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4)));
    out->d = kq_load_f16(&x->d);
    out->dmin = kq_load_f16(&x->dmin);
}

/* Q3_K: the codes + 4, unsigned; the 4 comes back through the activations'
 * 16-code sums times the (signed) scales, as Q6_K's 32. */
BG_AVX2 static void q3_K_unpack(const uint8_t *src, wblock *out)
{
    const bg_block_q3_K *x = (const bg_block_q3_K *)(const void *)src;
    const __m256i hmask = _mm256_loadu_si256((const __m256i *)x->hmask);
    for (int c = 0; c < 2; c++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        for (int k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i *)(out->codes + 128 * c + 32 * k),
                                kq_q3_codes(bits, hmask, c, k));
    }
    const __m256i scales16 = _mm256_cvtepi8_epi16(kq_q3_scales(x->scales));
    sixteen_scales(scales16, out);
    _mm256_storeu_si256((__m256i *)out->offset_pair, scales16);
    out->d = kq_load_f16(&x->d);
    out->dmin = 0.0f;
}

/* ------------------------------------------------------------------------
 * The product
 * ------------------------------------------------------------------------ */

/* Four codes of a weight row in every 32-bit lane. */
BG_AVX2 static inline __m256i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* How a format's super-block sums: steps, the maddubs steps (of four
 * codes) a scale covers (Q4_K 8, Q5_K 4, Q6_K 2, Q3_K 4, Q2_K 4); pairs16,
 * whether its offsets pair with the activations' 16-code sums (Q6_K, Q3_K,
 * Q2_K) or their 32-code ones (Q4_K, Q5_K); shift, for codes stored plus
 * 2^shift (Q6_K 5, Q3_K 2): the offsets are scales and the sum loses
 * their product with the code sums, shifted; 0: the offsets are mins and
 * their product goes out at dmin. */
typedef struct k_format {
    int steps;
    bool pairs16;
    int shift;
} k_format;

/* One super-block of weight rows w[0..3] against activation rows 0..7
 * (halves 1) or 0..15 (halves 2) of a: acc[16 m + t] += row m . row t, in
 * format f. Eleven
 * registers hold the s16 sums (one weight row, 8 activation rows each),
 * the two activation registers and a broadcast; the scaled 32-bit sums,
 * touched once a run, may spill. */
BG_AVX2 static inline __attribute__((always_inline)) void
tile_block(const wblock *const w[4], const act16 *a, int halves, k_format f, float *acc)
{
    const int steps = f.steps;
    __m256i isum[4][2];
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) isum[m][0] = isum[m][1] =
        _mm256_setzero_si256();
    for (int run = 0; run < BG_QK_K / 4 / steps; run++) {
        __m256i p[4][2];
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) p[m][0] = p[m][1] =
            _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int j = 0; j < steps; j++) {
            const int k4 = run * steps + j;
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)a->q[k4]);
            const __m256i a1 =
                halves > 1 ? _mm256_loadu_si256((const __m256i *)(a->q[k4] + 32)) : a0;
            _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
            {
                const __m256i b = bcast4(w[m]->codes + 4 * k4);
                p[m][0] = _mm256_add_epi16(p[m][0], _mm256_maddubs_epi16(b, a0));
                if (halves > 1)
                    p[m][1] = _mm256_add_epi16(p[m][1], _mm256_maddubs_epi16(b, a1));
            }
            /* keeps the steps in order: interleaved, they spill */
            if (halves > 1)
                __asm__("" : "+x"(p[0][0]), "+x"(p[0][1]), "+x"(p[1][0]), "+x"(p[1][1]),
                        "+x"(p[2][0]), "+x"(p[2][1]), "+x"(p[3][0]), "+x"(p[3][1]));
            else
                __asm__("" : "+x"(p[0][0]), "+x"(p[1][0]), "+x"(p[2][0]), "+x"(p[3][0]));
        }
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
        {
            const __m256i sc = _mm256_set1_epi32(w[m]->scale_pair[run]);
            isum[m][0] = _mm256_add_epi32(isum[m][0], _mm256_madd_epi16(p[m][0], sc));
            if (halves > 1)
                isum[m][1] = _mm256_add_epi32(isum[m][1], _mm256_madd_epi16(p[m][1], sc));
        }
    }
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) for (int half = 0; half < halves; half++)
    {
        const __m256 da = _mm256_loadu_ps(a->d + 8 * half);
        __m256i off = _mm256_setzero_si256();
        const int pairs = f.pairs16 ? 8 : 4;
        for (int p = 0; p < pairs; p++) {
            const int32_t *sums = f.pairs16 ? a->sum16_pair[p] : a->sum32_pair[p];
            off = _mm256_add_epi32(off, _mm256_madd_epi16(
                                            _mm256_loadu_si256((const __m256i *)(sums + 8 * half)),
                                            _mm256_set1_epi32(w[m]->offset_pair[p])));
        }
        float *out = acc + 16 * m + 8 * half;
        if (f.shift) {
            /* sum (code + 2^shift - 2^shift) a scale: exact in int32 (see the dots) */
            const __m256i dot = _mm256_sub_epi32(isum[m][half], _mm256_slli_epi32(off, f.shift));
            _mm256_storeu_ps(out, _mm256_fmadd_ps(_mm256_mul_ps(da, _mm256_set1_ps(w[m]->d)),
                                                  _mm256_cvtepi32_ps(dot), _mm256_loadu_ps(out)));
        } else {
            __m256 v = _mm256_fmadd_ps(_mm256_mul_ps(da, _mm256_set1_ps(w[m]->d)),
                                       _mm256_cvtepi32_ps(isum[m][half]), _mm256_loadu_ps(out));
            v = _mm256_fnmadd_ps(_mm256_mul_ps(da, _mm256_set1_ps(w[m]->dmin)),
                                 _mm256_cvtepi32_ps(off), v);
            _mm256_storeu_ps(out, v);
        }
    }
}

/* A tile's sums (acc[16 m + t]: weight row m0 + m, activation row t < nt)
 * into y, added to it when add: four tokens at a time, turned from the
 * tile's rows into the tokens' runs of 4 outputs. */
BG_AVX2 static inline void store_tile(const float *acc, int nt, int m0, float *y, size_t y_stride,
                                      bool add)
{
    for (int t0 = 0; t0 < nt; t0 += 4) {
        __m128 r0 = _mm_loadu_ps(acc + t0), r1 = _mm_loadu_ps(acc + 16 + t0);
        __m128 r2 = _mm_loadu_ps(acc + 32 + t0), r3 = _mm_loadu_ps(acc + 48 + t0);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        const __m128 col[4] = {r0, r1, r2, r3};
        for (int t = t0; t < nt && t < t0 + 4; t++) {
            float *row = y + (size_t)t * y_stride + m0;
            _mm_storeu_ps(row, add ? _mm_add_ps(_mm_loadu_ps(row), col[t - t0]) : col[t - t0]);
        }
    }
}

/* The inverse of store_tile: acc[16 m + t] = y's output m0 + m of
 * activation row t, for t < nt (0 beyond). */
BG_AVX2 static inline void load_tile(float *acc, int nt, int m0, const float *y, size_t y_stride)
{
    for (int t0 = 0; t0 < 16; t0 += 4) {
        __m128 c[4];
        for (int k = 0; k < 4; k++)
            c[k] = t0 + k < nt ? _mm_loadu_ps(y + (size_t)(t0 + k) * y_stride + m0)
                               : _mm_setzero_ps();
        _MM_TRANSPOSE4_PS(c[0], c[1], c[2], c[3]);
        for (int m = 0; m < 4; m++)
            _mm_storeu_ps(acc + 16 * m + t0, c[m]);
    }
}

/* Weight rows m0 .. m0 + 3 of the unpacked chunk (nc super-blocks) against
 * activation rows t0 .. (nt of them) of a (the chunk's first record of that
 * block of 16): into y, added to it when add. */
BG_AVX2 static inline __attribute__((always_inline)) void
tile(const wblock (*unpacked)[16], int nc, int m0, const act16 *a, int nt, k_format f, float *y,
     size_t y_stride, bool add)
{
    float acc[4 * 16];
    /* vector stores: GCC zeroes the array with rep stos, slow to start */
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _mm256_storeu_ps(acc + 8 * i,
                                                                         _mm256_setzero_ps());
    for (int s = 0; s < nc; s++) {
        const wblock *w[4] = {&unpacked[s][m0], &unpacked[s][m0 + 1], &unpacked[s][m0 + 2],
                              &unpacked[s][m0 + 3]};
        if (nt > 8)
            tile_block(w, a + s, 2, f, acc);
        else
            tile_block(w, a + s, 1, f, acc);
    }
    store_tile(acc, nt, m0, y, y_stride, add);
}

/* Asks for part b0 / chunk of the next stripe's weights while this
 * chunk of the stripe at r0 is multiplied. The weights come from memory
 * once per product, and a stripe's 16 rows are one contiguous run of
 * bytes: read in order, ahead, where the chunks read 16 scattered pieces
 * of it (next-chunk prefetches measured up to 28% slower on 16384 x 2048
 * Q6_K at 16 activation rows). Inlined early: GCC otherwise finds the
 * function free of side effects and drops the call. */
BG_AVX2 static inline __attribute__((always_inline)) void
prefetch_next_stripe(const uint8_t *w, size_t w_stride, int64_t n_rows, int64_t nb, int64_t r0,
                     int64_t b0, int64_t chunk)
{
    if (r0 + 16 >= n_rows)
        return;
    const size_t chunks = (size_t)((nb + chunk - 1) / chunk);
    const size_t part = (size_t)(b0 / chunk), bytes = 16 * w_stride;
    const uint8_t *next = w + (size_t)(r0 + 16) * w_stride;
    for (size_t off = bytes * part / chunks & ~(size_t)63; off < bytes * (part + 1) / chunks;
         off += 64)
        _mm_prefetch((const char *)(next + off), _MM_HINT_T0);
}

/* The weight formats of the K-quant tiles. */
typedef enum k_kind { KIND_Q2_K, KIND_Q3_K, KIND_Q4_K, KIND_Q5_K, KIND_Q6_K } k_kind;

BG_AVX2 static inline __attribute__((always_inline)) void
gemm(int64_t n_in, const uint8_t *w, size_t w_stride, int64_t n_rows, const act16 *packed,
     int64_t n_act, float *y, size_t y_stride, k_kind kind)
{
    const int64_t nb = n_in / BG_QK_K;
    /* maddubs steps: a scale's codes, at most 32767 over 2 x code x 128 */
    const k_format f = kind == KIND_Q2_K   ? (k_format){4, true, 0}
                       : kind == KIND_Q3_K ? (k_format){4, true, 2}
                       : kind == KIND_Q4_K ? (k_format){8, false, 0}
                       : kind == KIND_Q5_K ? (k_format){4, false, 0}
                                           : (k_format){2, true, 5};
    const size_t block_bytes = kind == KIND_Q2_K   ? sizeof(bg_block_q2_K)
                               : kind == KIND_Q3_K ? sizeof(bg_block_q3_K)
                               : kind == KIND_Q4_K ? sizeof(bg_block_q4_K)
                               : kind == KIND_Q5_K ? sizeof(bg_block_q5_K)
                                                   : sizeof(bg_block_q6_K);
    wblock unpacked[GEMM_CHUNK][16];
    for (int64_t r0 = 0; r0 < n_rows; r0 += 16)
        for (int64_t b0 = 0; b0 < nb; b0 += GEMM_CHUNK) {
            const int nc = nb - b0 < GEMM_CHUNK ? (int)(nb - b0) : GEMM_CHUNK;
            for (int s = 0; s < nc; s++)
                for (int m = 0; m < 16; m++) {
                    const uint8_t *src = w + (size_t)(r0 + m) * w_stride + (size_t)(b0 + s) * block_bytes;
                    if (kind == KIND_Q2_K)
                        q2_K_unpack(src, &unpacked[s][m]);
                    else if (kind == KIND_Q3_K)
                        q3_K_unpack(src, &unpacked[s][m]);
                    else if (kind == KIND_Q4_K)
                        q4_K_unpack(src, &unpacked[s][m]);
                    else if (kind == KIND_Q5_K)
                        q5_K_unpack(src, &unpacked[s][m]);
                    else
                        q6_K_unpack(src, &unpacked[s][m]);
                }
            prefetch_next_stripe(w, w_stride, n_rows, nb, r0, b0, GEMM_CHUNK);
            for (int64_t t0 = 0; t0 < n_act; t0 += 16) {
                const act16 *a = packed + (t0 / 16) * nb + b0;
                const int nt = n_act - t0 < 16 ? (int)(n_act - t0) : 16;
                float *yt = y + (size_t)t0 * y_stride + r0;
                for (int m0 = 0; m0 < 16; m0 += 4)
                    tile(unpacked, nc, m0, a, nt, f, yt, y_stride, b0 > 0);
            }
        }
}

/* The exported entry point bg_gemm_<name>_avx2 of impl (gemm or
 * signed_gemm) for one weight format. */
#define GEMM_ENTRY(name, impl, kind)                                                               \
    void bg_gemm_##name##_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,       \
                               const void *packed, int64_t n_act, float *y, size_t y_stride)       \
        BG_AVX2;                                                                                   \
    void bg_gemm_##name##_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,       \
                               const void *packed, int64_t n_act, float *y, size_t y_stride)       \
    {                                                                                              \
        impl(n_in, w, w_stride, n_rows, packed, n_act, y, y_stride, kind);                         \
    }
GEMM_ENTRY(q2_K, gemm, KIND_Q2_K)
GEMM_ENTRY(q3_K, gemm, KIND_Q3_K)
GEMM_ENTRY(q4_K, gemm, KIND_Q4_K)
GEMM_ENTRY(q5_K, gemm, KIND_Q5_K)
GEMM_ENTRY(q6_K, gemm, KIND_Q6_K)

/* ------------------------------------------------------------------------
 * Signed codes: Q8_0, Q4_0, Q5_0 and IQ4_NL weights against Q8_0
 * activations, IQ4_XS against Q8_K
 *
 * The weights' codes are signed (Q8_0 any int8, -128 included; Q4_0 and
 * Q5_0 their codes less 8 or 16; IQ4_NL and IQ4_XS their codebook's
 * values, -127 to 113), so they take maddubs's unsigned side as |w|, and
 * the activations (in [-127, 127], as the quantizers make them) take w's
 * sign: every product is exact. A maddubs lane is then up to 2 x 128 x
 * 127, so each goes through its madd at once, against ones (the
 * 32-element blocks) or the group's integer scale (IQ4_XS): two
 * multiplies per 32 products, as in the dots, but with the dots' per-pair
 * float steps, scale loads and conversions gone. The 32-element blocks
 * have a float scale each on both sides, so their sums go to float a
 * block at a time; IQ4_XS's, a super-block at a time (at most 256 x 127 x
 * 127 x 32 < 2^31), and without code sums to correct: no offsets. Q4_0
 * and Q5_0 keep their unsigned codes instead (plain_block): no sign step,
 * several maddubs a madd, and the offset back from the activations' block
 * code sums.
 * ------------------------------------------------------------------------ */

/* Blocks of 32 in a group of BG_GEMM_COLS codes. */
#define Q8_0_GROUP (BG_GEMM_COLS / BG_QK)

/* Groups of a stripe unpacked at a time: 16 rows x 2 x 576 bytes, half
 * L1, as the K-quants' chunk. */
#define SIGNED_CHUNK 2

_Static_assert(sizeof(((bg_act16_q8_0 *)0)->d) / sizeof(((bg_act16_q8_0 *)0)->d[0]) ==
                   Q8_0_GROUP,
               "a Q8_0 record's blocks are a group's");

/* One weight row's group of BG_GEMM_COLS codes, unpacked. */
typedef struct wsigned {
    int8_t codes[BG_GEMM_COLS];
    union {
        uint8_t abs[BG_GEMM_COLS];    /* |code|: 128 for -128 */
        uint8_t plain[BG_GEMM_COLS];  /* Q4_0, Q5_0: the unsigned code, code + offset */
    };
    float d[Q8_0_GROUP];        /* each block's; IQ4_XS: the super-block's in d[0] */
    int32_t scale_pair[8];      /* IQ4_XS: group g's scale in both s16 halves */
} wsigned;

size_t bg_avx2_packed_bytes_q8_0(int64_t n_in, int64_t n_act)
{
    return (size_t)((n_act + 15) / 16) * (size_t)(n_in / BG_GEMM_COLS) * sizeof(bg_act16_q8_0);
}

void bg_avx2_pack_q8_0(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                       void *packed) BG_AVX2;

void bg_avx2_pack_q8_0(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                       void *packed)
{
    const int64_t ng = n_in / BG_GEMM_COLS, t0 = block * 16;
    const size_t group_bytes = Q8_0_GROUP * sizeof(bg_block_q8_0);
    bg_act16_q8_0 *out = (bg_act16_q8_0 *)packed + block * ng;
    for (int64_t g = 0; g < ng; g++, out++) {
        /* byte pointers: rows may start at any address */
        const uint8_t *rows[16];
        for (int t = 0; t < 16; t++)
            rows[t] = t0 + t < n_act ? (const uint8_t *)xq + (size_t)(t0 + t) * xq_row +
                                           (size_t)g * group_bytes
                                     : NULL;
        for (int b = 0; b < Q8_0_GROUP; b++) {
            const int8_t *src[16];
            for (int t = 0; t < 16; t++)
                src[t] = rows[t] ? (const int8_t *)(rows[t] + b * sizeof(bg_block_q8_0) +
                                                    offsetof(bg_block_q8_0, qs))
                                 : NULL;
            transpose_codes(src, out->q + 8 * b);
            for (int t = 0; t < 16; t++) {
                out->d[b][t] = rows[t] ? kq_load_f16(rows[t] + b * sizeof(bg_block_q8_0) +
                                                      offsetof(bg_block_q8_0, d))
                                       : 0.0f;
                int32_t sum = 0;
                for (int i = 0; src[t] && i < BG_QK; i++)
                    sum += src[t][i];
                out->sum[b][t] = sum;
            }
        }
    }
}

/* Stores a group's 32 signed codes at codes + 32 g and their magnitudes. */
BG_AVX2 static inline void store_signed(__m256i q, int g, wsigned *out)
{
    _mm256_storeu_si256((__m256i *)(out->codes + 32 * g), q);
    _mm256_storeu_si256((__m256i *)(out->abs + 32 * g), _mm256_abs_epi8(q));
}

/* The weight formats of the signed tiles. */
typedef enum signed_kind {
    SIGNED_Q8_0,
    SIGNED_Q4_0,
    SIGNED_Q5_0,
    SIGNED_IQ4_NL,
    SIGNED_IQ4_XS
} signed_kind;

/* A group of Q8_0_GROUP 32-element blocks, block_bytes each (their fp16
 * scale first). */
BG_AVX2 static inline __attribute__((always_inline)) void
blocks_unpack(const uint8_t *src, size_t block_bytes, signed_kind kind, wsigned *out)
{
    for (int b = 0; b < Q8_0_GROUP; b++, src += block_bytes) {
        if (kind == SIGNED_Q4_0 || kind == SIGNED_Q5_0) {
            const __m256i q =
                kind == SIGNED_Q4_0
                    ? bg_unpack_nibbles(src + offsetof(bg_block_q4_0, qs))
                    : bg_unsigned_codes_q5(src + offsetof(bg_block_q5_0, qh),
                                           src + offsetof(bg_block_q5_0, qs));
            _mm256_storeu_si256((__m256i *)(out->plain + 32 * b), q);
        } else {
            store_signed(kind == SIGNED_IQ4_NL ? bg_codes_iq4_nl(src) : bg_codes_q8_0(src), b,
                         out);
        }
        out->d[b] = kq_load_f16(src);
    }
}

/* IQ4_XS: group g's 16 bytes at qs + 16 g hold its codes 0-15 in the low
 * nibbles and 16-31 in the high, indices into the codebook. */
BG_AVX2 static void iq4_xs_unpack(const uint8_t *src, wsigned *out)
{
    const __m256i book = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(const void *)bg_iq4_codebook));
    const uint8_t *qs = src + offsetof(bg_block_iq4_xs, qs);
    for (int g = 0; g < 8; g++)
        store_signed(_mm256_shuffle_epi8(book, bg_unpack_nibbles(qs + 16 * g)), g, out);
    _mm256_storeu_si256((__m256i *)out->scale_pair, both_halves(bg_iq4_xs_scales32(src)));
    out->d[0] = kq_load_f16(src + offsetof(bg_block_iq4_xs, d));
}

/* Steps k4 .. k4 + 7 (32 codes) of weight rows w[0..3] against activation
 * codes q (rows 0..7, or 0..15 with halves 2): isum[m][half] += madd of
 * the products' pairs with mul[m]. */
BG_AVX2 static inline __attribute__((always_inline)) void
signed_steps(const wsigned *const w[4], const int8_t (*q)[64], int k4, const __m256i mul[4],
             int halves, __m256i isum[4][2])
{
    _Pragma("GCC unroll 8") for (int j = k4; j < k4 + BG_QK / 4; j++)
    {
        const __m256i a0 = _mm256_loadu_si256((const __m256i *)q[j]);
        const __m256i a1 = halves > 1 ? _mm256_loadu_si256((const __m256i *)(q[j] + 32)) : a0;
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
        {
            const __m256i sw = bcast4((const uint8_t *)w[m]->codes + 4 * j);
            const __m256i aw = bcast4(w[m]->abs + 4 * j);
            isum[m][0] = _mm256_add_epi32(
                isum[m][0],
                _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(a0, sw)), mul[m]));
            if (halves > 1)
                isum[m][1] = _mm256_add_epi32(
                    isum[m][1],
                    _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(a1, sw)), mul[m]));
        }
        /* keeps the steps in order: interleaved, they spill */
        if (halves > 1)
            __asm__("" : "+x"(isum[0][0]), "+x"(isum[0][1]), "+x"(isum[1][0]), "+x"(isum[1][1]),
                    "+x"(isum[2][0]), "+x"(isum[2][1]), "+x"(isum[3][0]), "+x"(isum[3][1]));
        else
            __asm__("" : "+x"(isum[0][0]), "+x"(isum[1][0]), "+x"(isum[2][0]), "+x"(isum[3][0]));
    }
}

/* acc[16 m + 8 half + t] += da[t] * dw[m] * isum[m][half] (lane t). */
BG_AVX2 static inline __attribute__((always_inline)) void
signed_to_float(__m256i isum[4][2], const float *da, const float dw[4], int halves, float *acc)
{
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) for (int half = 0; half < halves; half++)
    {
        const __m256 scale =
            _mm256_mul_ps(_mm256_loadu_ps(da + 8 * half), _mm256_set1_ps(dw[m]));
        float *out = acc + 16 * m + 8 * half;
        _mm256_storeu_ps(out, _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum[m][half]),
                                              _mm256_loadu_ps(out)));
        isum[m][half] = _mm256_setzero_si256();
    }
}

/* Q4_0 and Q5_0 a block at a time: the unsigned codes (code + 2^shift)
 * on maddubs's unsigned side against the signed activations, as the
 * K-quant tiles do, the s16 sums of `steps` maddubs (8 for Q4_0, 2 x 15 x
 * 127 each; 4 for Q5_0, 2 x 31 x 127) before each madd; the offset comes
 * back as 2^shift times the block's activation code sum. isum is then the
 * block's exact sum of code x activation, as signed_steps makes it, at
 * about half its instructions (no sign step, a madd an eighth or a quarter
 * as often). */
BG_AVX2 static inline __attribute__((always_inline)) void
plain_block(const wsigned *const w[4], const bg_act16_q8_0 *a8, int b, int steps, int shift,
            int halves, __m256i isum[4][2])
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j0 = 8 * b; j0 < 8 * b + BG_QK / 4; j0 += steps) {
        __m256i p[4][2];
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) p[m][0] = p[m][1] =
            _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int j = j0; j < j0 + steps; j++)
        {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)a8->q[j]);
            const __m256i a1 =
                halves > 1 ? _mm256_loadu_si256((const __m256i *)(a8->q[j] + 32)) : a0;
            _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
            {
                const __m256i c = bcast4(w[m]->plain + 4 * j);
                p[m][0] = _mm256_add_epi16(p[m][0], _mm256_maddubs_epi16(c, a0));
                if (halves > 1)
                    p[m][1] = _mm256_add_epi16(p[m][1], _mm256_maddubs_epi16(c, a1));
            }
        }
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) for (int half = 0; half < halves;
                                                                 half++)
            isum[m][half] = _mm256_add_epi32(isum[m][half], _mm256_madd_epi16(p[m][half], ones));
    }
    for (int half = 0; half < halves; half++) {
        const __m256i off = _mm256_slli_epi32(
            _mm256_loadu_si256((const __m256i *)(a8->sum[b] + 8 * half)), shift);
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) isum[m][half] =
            _mm256_sub_epi32(isum[m][half], off);
    }
}

/* One group of weight rows w[0..3] against activation rows 0..7 (halves
 * 1) or 0..15 (halves 2) of a (a bg_act16_q8_0 or, IQ4_XS, an act16):
 * acc[16 m + t] += row m . row t. Eight registers hold the 32-bit sums;
 * the float sums, touched once a block or super-block, may spill. */
BG_AVX2 static inline __attribute__((always_inline)) void
signed_group(const wsigned *const w[4], const void *a, int halves, signed_kind kind, float *acc)
{
    const bool iq4 = kind == SIGNED_IQ4_XS;
    __m256i isum[4][2];
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) isum[m][0] = isum[m][1] =
        _mm256_setzero_si256();
    if (iq4) {
        const act16 *a16 = a;
        for (int g = 0; g < 8; g++) {
            const __m256i mul[4] = {
                _mm256_set1_epi32(w[0]->scale_pair[g]), _mm256_set1_epi32(w[1]->scale_pair[g]),
                _mm256_set1_epi32(w[2]->scale_pair[g]), _mm256_set1_epi32(w[3]->scale_pair[g])};
            signed_steps(w, a16->q, 8 * g, mul, halves, isum);
        }
        const float dw[4] = {w[0]->d[0], w[1]->d[0], w[2]->d[0], w[3]->d[0]};
        signed_to_float(isum, a16->d, dw, halves, acc);
    } else {
        const bg_act16_q8_0 *a8 = a;
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i mul[4] = {ones, ones, ones, ones};
        for (int b = 0; b < Q8_0_GROUP; b++) {
            if (kind == SIGNED_Q4_0)
                plain_block(w, a8, b, 8, 3, halves, isum);
            else if (kind == SIGNED_Q5_0)
                plain_block(w, a8, b, 4, 4, halves, isum);
            else
                signed_steps(w, a8->q, 8 * b, mul, halves, isum);
            const float dw[4] = {w[0]->d[b], w[1]->d[b], w[2]->d[b], w[3]->d[b]};
            signed_to_float(isum, a8->d[b], dw, halves, acc);
        }
    }
}

/* Weight rows m0 .. m0 + 3 of the unpacked chunk (nc groups) against
 * activation rows t0 .. (nt of them) of the chunk's first record a (of
 * record_bytes each): into y, carrying on from its sums when add. A block
 * at a time, each sum is one chain, acc = fma(d_w * d_a, isum, acc), from
 * the row's first block to its last: the rows dots' order (kernels.h), so
 * Q4_0's and IQ4_NL's tiles give their bits (tests/test_kernels.c). */
BG_AVX2 static inline __attribute__((always_inline)) void
signed_tile(const wsigned (*unpacked)[16], int nc, int m0, const uint8_t *a, size_t record_bytes,
            int nt, signed_kind kind, float *y, size_t y_stride, bool add)
{
    float acc[4 * 16];
    if (add)
        load_tile(acc, nt, m0, y, y_stride);
    else
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _mm256_storeu_ps(
            acc + 8 * i, _mm256_setzero_ps());
    for (int s = 0; s < nc; s++) {
        const wsigned *w[4] = {&unpacked[s][m0], &unpacked[s][m0 + 1], &unpacked[s][m0 + 2],
                               &unpacked[s][m0 + 3]};
        if (nt > 8)
            signed_group(w, a + s * record_bytes, 2, kind, acc);
        else
            signed_group(w, a + s * record_bytes, 1, kind, acc);
    }
    store_tile(acc, nt, m0, y, y_stride, false);
}

BG_AVX2 static inline __attribute__((always_inline)) void
signed_gemm(int64_t n_in, const uint8_t *w, size_t w_stride, int64_t n_rows, const void *packed,
            int64_t n_act, float *y, size_t y_stride, signed_kind kind)
{
    const int64_t ng = n_in / BG_GEMM_COLS;
    const bool iq4 = kind == SIGNED_IQ4_XS;
    const size_t block_bytes = kind == SIGNED_Q4_0     ? sizeof(bg_block_q4_0)
                               : kind == SIGNED_Q5_0   ? sizeof(bg_block_q5_0)
                               : kind == SIGNED_IQ4_NL ? sizeof(bg_block_iq4_nl)
                                                       : sizeof(bg_block_q8_0);
    const size_t group_bytes = iq4 ? sizeof(bg_block_iq4_xs) : Q8_0_GROUP * block_bytes;
    const size_t record_bytes = iq4 ? sizeof(act16) : sizeof(bg_act16_q8_0);
    wsigned unpacked[SIGNED_CHUNK][16];
    for (int64_t r0 = 0; r0 < n_rows; r0 += 16)
        for (int64_t g0 = 0; g0 < ng; g0 += SIGNED_CHUNK) {
            const int nc = ng - g0 < SIGNED_CHUNK ? (int)(ng - g0) : SIGNED_CHUNK;
            for (int s = 0; s < nc; s++)
                for (int m = 0; m < 16; m++) {
                    const uint8_t *src =
                        w + (size_t)(r0 + m) * w_stride + (size_t)(g0 + s) * group_bytes;
                    if (iq4)
                        iq4_xs_unpack(src, &unpacked[s][m]);
                    else
                        blocks_unpack(src, block_bytes, kind, &unpacked[s][m]);
                }
            prefetch_next_stripe(w, w_stride, n_rows, ng, r0, g0, SIGNED_CHUNK);
            for (int64_t t0 = 0; t0 < n_act; t0 += 16) {
                const uint8_t *a =
                    (const uint8_t *)packed + (size_t)((t0 / 16) * ng + g0) * record_bytes;
                const int nt = n_act - t0 < 16 ? (int)(n_act - t0) : 16;
                float *yt = y + (size_t)t0 * y_stride + r0;
                for (int m0 = 0; m0 < 16; m0 += 4)
                    signed_tile(unpacked, nc, m0, a, record_bytes, nt, kind, yt, y_stride,
                                g0 > 0);
            }
        }
}

GEMM_ENTRY(q8_0, signed_gemm, SIGNED_Q8_0)
GEMM_ENTRY(q4_0, signed_gemm, SIGNED_Q4_0)
GEMM_ENTRY(q5_0, signed_gemm, SIGNED_Q5_0)
GEMM_ENTRY(iq4_nl, signed_gemm, SIGNED_IQ4_NL)
GEMM_ENTRY(iq4_xs, signed_gemm, SIGNED_IQ4_XS)

#endif
