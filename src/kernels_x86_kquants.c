/* AVX2 dot products of the 256-element formats (Q4_K, Q5_K, Q6_K, IQ4_XS)
 * with Q8_K activations.
 *
 * Common scheme: per super-block, every group's integer dot product is
 * formed exactly with maddubs (u8 x s8 -> pairs summed into s16) and then
 * madd against the group's scale broadcast as s16 (pairs summed into s32),
 * so the scales are applied in the same instruction that widens to 32 bits.
 * The eight s32 lanes of a block are converted to float once and folded
 * into a float accumulator with one FMA by d_w * d_a. Range check (worst
 * case, |a| <= 128): a maddubs pair is at most 2*63*128 = 16128 (Q6_K) or
 * 2*127*128 = 32512 (IQ4_XS, sign trick), below 32767; a whole block's
 * scaled sum is at most 256*63*128*128 < 2^31 (Q6_K: 6-bit codes, 8-bit
 * scales; the others are smaller).
 *
 * Weights with an offset (the min of Q4_K/Q5_K, the -32 of Q6_K) are dotted
 * as unsigned codes and corrected with the Q8_K bsums (sums of 16
 * activations), which costs one madd per block instead of work per group.
 *
 * Loads are all unaligned: blocks sit at 2-byte-aligned offsets of a mmap.
 *
 * F16C is in the target list with AVX2/FMA: the dispatcher (kernels.c) only
 * picks these when the CPU has all three, and _cvtsh_ss converts the fp16
 * block scales exactly (subnormals included) without a branch. */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant.h"

#define BG_AVX2 __attribute__((target("avx2,fma,f16c")))

BG_AVX2 static inline float f16_to_f32(uint16_t h)
{
    return _cvtsh_ss(h);
}

BG_AVX2 static inline __m256i loadu256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

BG_AVX2 static inline __m128i loadu128(const void *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

BG_AVX2 static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sc holds eight s16 scales, the same in both 128-bit lanes; ctl is a
 * pshufb control whose byte pairs (2k, 2k+1) pick scale k for a lane. The
 * result is that lane's scale in all of its eight s16 slots. Using pshufb
 * (not a broadcast from a general register) keeps it one shuffle uop. */
BG_AVX2 static inline __m256i pick_scale(__m256i sc, __m256i ctl)
{
    return _mm256_shuffle_epi8(sc, ctl);
}

/* pshufb control picking scale k in both lanes / scale k in the low lane
 * and scale k + 1 in the high one. */
#define CTL_SAME(k) _mm256_set1_epi16((short)(0x0100 + 0x0202 * (k)))
#define CTL_PAIR(k)                                                                       \
    _mm256_setr_epi16(                                                                    \
        (short)(0x0100 + 0x0202 * (k)), (short)(0x0100 + 0x0202 * (k)),                  \
        (short)(0x0100 + 0x0202 * (k)), (short)(0x0100 + 0x0202 * (k)),                  \
        (short)(0x0100 + 0x0202 * (k)), (short)(0x0100 + 0x0202 * (k)),                  \
        (short)(0x0100 + 0x0202 * (k)), (short)(0x0100 + 0x0202 * (k)),                  \
        (short)(0x0100 + 0x0202 * ((k) + 1)), (short)(0x0100 + 0x0202 * ((k) + 1)),      \
        (short)(0x0100 + 0x0202 * ((k) + 1)), (short)(0x0100 + 0x0202 * ((k) + 1)),      \
        (short)(0x0100 + 0x0202 * ((k) + 1)), (short)(0x0100 + 0x0202 * ((k) + 1)),      \
        (short)(0x0100 + 0x0202 * ((k) + 1)), (short)(0x0100 + 0x0202 * ((k) + 1)))

/* 32 unsigned codes (< 64) against 32 activations at act, each s16 product
 * pair times the matching s16 of scale: eight exact s32 partial sums. */
BG_AVX2 static inline __m256i dot32_u(__m256i q, const int8_t *act, __m256i scale)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, loadu256(act)), scale);
}

/* The same for signed codes (|q| <= 127): maddubs needs an unsigned first
 * operand, so it gets |a| and q takes a's sign instead. Putting the abs on
 * the activation keeps a = -128 exact (its abs, 0x80, read unsigned, is
 * 128). */
BG_AVX2 static inline __m256i dot32_s(__m256i q, __m256i a, __m256i scale)
{
    return _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(q, a)), scale);
}

/* ------------------------------------------------------------------------
 * Q4_K and Q5_K
 * ------------------------------------------------------------------------ */

/* The 12 packed scale bytes of Q4_K/Q5_K (layout in quant.c), unpacked four
 * groups at a time with 32-bit integer arithmetic: bytes 0-3 / 4-7 carry
 * groups 0-3 in their low six bits and the top two bits of groups 4-7 in
 * their top two; bytes 8-11 carry the low nibbles of groups 4-7 (scale low,
 * min high). Returns the eight scales as s16 in both lanes (for
 * pick_scale) and, in *mins, the eight mins as s16. */
BG_AVX2 static inline __m256i k_scales(const uint8_t *p, __m128i *mins)
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

/* The min terms of a Q4_K/Q5_K super-block as llama.cpp's CPU backend
 * groups them, so that its float roundings are reproduced: four s32, pair
 * t = min(2t) * bsum32(2t) + min(2t+1) * bsum32(2t+1), where bsum32(g) is
 * the activation sum of group g (two of the 16-element bsums). */
BG_AVX2 static inline __m128i k_min_pairs(const bg_block_q8_K *y, __m128i mins)
{
    const __m256i bs = loadu256(y->bsums);
    const __m128i g = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(mins, g);
}

/* One 32-byte chunk c of a Q4_K/Q5_K super-block: byte l holds element
 * 64c + l (group 2c) low and 64c + 32 + l (group 2c + 1) high, so the two
 * nibble planes are whole groups, in activation order. For Q5_K, *hb holds
 * the qh bytes shifted right by 2c: bits 0 and 1 of byte l are the fifth
 * bits of the chunk's two elements l (16-bit shifts are fine: the bits read
 * never cross a byte). ctl0 picks the scale of group 2c, ctl1 of 2c + 1.
 * Written to be called with constants (no loop), so the pshufb controls are
 * constants rather than a counter. */
BG_AVX2 static inline __m256i k_chunk(const uint8_t *qs, __m256i *hb, const int8_t *act,
                                      __m256i sc, __m256i ctl0, __m256i ctl1)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i q = loadu256(qs);
    __m256i lo = _mm256_and_si256(q, m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (hb) {
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(*hb, 4), bit4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(*hb, 3), bit4));
        *hb = _mm256_srli_epi16(*hb, 2);
    }
    return _mm256_add_epi32(dot32_u(lo, act, pick_scale(sc, ctl0)),
                            dot32_u(hi, act + 32, pick_scale(sc, ctl1)));
}

/* A Q4_K/Q5_K super-block's scaled integer sums, eight s32 lanes; qh is
 * NULL for Q4_K (a constant once inlined). */
BG_AVX2 static inline __m256i k_block_isum(const uint8_t *qs, const uint8_t *qh,
                                           const int8_t *act, __m256i sc)
{
    __m256i hbits = qh ? loadu256(qh) : _mm256_setzero_si256();
    __m256i *hb = qh ? &hbits : NULL;
    const __m256i s0 = k_chunk(qs, hb, act, sc, CTL_SAME(0), CTL_SAME(1));
    const __m256i s1 = k_chunk(qs + 32, hb, act + 64, sc, CTL_SAME(2), CTL_SAME(3));
    const __m256i s2 = k_chunk(qs + 64, hb, act + 128, sc, CTL_SAME(4), CTL_SAME(5));
    const __m256i s3 = k_chunk(qs + 96, hb, act + 192, sc, CTL_SAME(6), CTL_SAME(7));
    return _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
}

/* The header (d, dmin, scales) is laid out alike in both formats. */
_Static_assert(offsetof(bg_block_q4_K, d) == offsetof(bg_block_q5_K, d) &&
                   offsetof(bg_block_q4_K, dmin) == offsetof(bg_block_q5_K, dmin) &&
                   offsetof(bg_block_q4_K, scales) == offsetof(bg_block_q5_K, scales),
               "Q4_K/Q5_K headers differ");

BG_AVX2 static inline float load_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return f16_to_f32(h);
}

/* sum_b d_a * (d * sum_g sc_g (q.a)_g - dmin * sum_g mn_g bsum_g), blocks of
 * `bytes` bytes with qs / qh (0: none) at the given offsets. The float
 * arithmetic is llama.cpp's, step for step, so results agree to the bit
 * (its activations are rounded to Q8_K from these sums, and a random
 * network amplifies any difference): the scaled sums accumulate in eight
 * lanes, one fused multiply-add per super-block, summed pairwise at the
 * end; the min terms go to four lanes for Q4_K, and for Q5_K to one float
 * per super-block, fused into a running sum. */
BG_AVX2 static inline float k_dot(int64_t n, const uint8_t *w, size_t bytes, size_t qh_off,
                                  size_t qs_off, const bg_block_q8_K *y)
{
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_min = _mm_setzero_ps();
    float sum_min = 0.0f;
    for (int64_t b = 0; b < n / BG_QK_K; b++, w += bytes, y++) {
        __m128i mins;
        const __m256i sc = k_scales(w + offsetof(bg_block_q4_K, scales), &mins);
        const __m128i pairs = k_min_pairs(y, mins);
        const __m256i isum = k_block_isum(w + qs_off, qh_off ? w + qh_off : NULL, y->qs, sc);
        const float d = y->d * load_f16(w + offsetof(bg_block_q4_K, d));
        const float dmin = -y->d * load_f16(w + offsetof(bg_block_q4_K, dmin));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        if (qh_off) {
            const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(pairs, pairs), pairs);
            /* llama.cpp's compiler fuses this multiply-add */
            sum_min = fmaf(dmin, (float)_mm_cvtsi128_si32(h), sum_min);
        } else {
            acc_min = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(pairs), acc_min);
        }
    }
    if (qh_off)
        return hsum_ps(acc) + sum_min;
    acc_min = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
    acc_min = _mm_add_ss(acc_min, _mm_movehdup_ps(acc_min));
    return hsum_ps(acc) + _mm_cvtss_f32(acc_min);
}

BG_AVX2 float bg_dot_q4_K_avx2(int64_t n, const void *w, const void *a)
{
    return k_dot(n, w, sizeof(bg_block_q4_K), 0, offsetof(bg_block_q4_K, qs), a);
}

BG_AVX2 float bg_dot_q5_K_avx2(int64_t n, const void *w, const void *a)
{
    return k_dot(n, w, sizeof(bg_block_q5_K), offsetof(bg_block_q5_K, qh),
                 offsetof(bg_block_q5_K, qs), a);
}

/* ------------------------------------------------------------------------
 * Q6_K
 * ------------------------------------------------------------------------ */

/* Per 128-element chunk c: ql bytes l and 32 + l (l < 32) hold elements
 * 32k + l for k = 0, 1 (low nibbles) and k = 2, 3 (high nibbles); qh byte l
 * holds their top two bits at bits 2k. Each k is one register of 32
 * elements in activation order, i.e. two groups of 16, one per 128-bit
 * lane, so its scale vector is (scale 2k | scale 2k + 1): CTL_PAIR. The
 * codes stay unsigned (0..63) for maddubs; the -32 comes back as
 * 32 * sum_g scale_g * bsum_g, one madd per block. */
BG_AVX2 float bg_dot_q6_K_avx2(int64_t n, const void *w, const void *a)
{
    const bg_block_q6_K *x = w;
    const bg_block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++, y++) {
        const __m128i sc8 = loadu128(x->scales);
        const __m256i corr = _mm256_madd_epi16(loadu256(y->bsums), _mm256_cvtepi8_epi16(sc8));
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 2; c++) {
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(c ? _mm_srli_si128(sc8, 8) : sc8));
            const uint8_t *ql = x->ql + 64 * c;
            const int8_t *act = y->qs + 128 * c;
            const __m256i l0 = loadu256(ql), l1 = loadu256(ql + 32);
            const __m256i h = loadu256(x->qh + 32 * c);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                               _mm256_and_si256(h, m30));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
            isum = _mm256_add_epi32(isum, dot32_u(q0, act, pick_scale(sc, CTL_PAIR(0))));
            isum = _mm256_add_epi32(isum, dot32_u(q1, act + 32, pick_scale(sc, CTL_PAIR(2))));
            isum = _mm256_add_epi32(isum, dot32_u(q2, act + 64, pick_scale(sc, CTL_PAIR(4))));
            isum = _mm256_add_epi32(isum, dot32_u(q3, act + 96, pick_scale(sc, CTL_PAIR(6))));
        }
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(y->d * f16_to_f32(x->d)), acc);
    }
    return hsum_ps(acc);
}

/* ------------------------------------------------------------------------
 * IQ4_XS
 * ------------------------------------------------------------------------ */

/* The IQ4_NL/IQ4_XS codebook (the format's constant table), for pshufb. */
static const int8_t iq4_codebook[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* Eight 6-bit scales - 32 as s16 in both lanes (for pick_scale): a
 * variable 32-bit shift pulls nibble g of scales_l and bit pair g of
 * scales_h into lane g at once. */
BG_AVX2 static inline __m256i iq4_xs_scales(const bg_block_iq4_xs *x)
{
    uint32_t sl;
    memcpy(&sl, x->scales_l, sizeof sl);
    const __m256i nibble_at = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i pair_at = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), nibble_at),
                                        _mm256_set1_epi32(0xF));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), pair_at),
                                        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)),
                                        _mm256_set1_epi32(32));
    /* s16 per lane: (0-3, 0-3 | 4-7, 4-7); qwords 0 and 2 give 0-7 twice */
    return _mm256_permute4x64_epi64(_mm256_packs_epi32(ls, ls), 0x88);
}

/* Groups of 32, each 16 bytes: low nibbles elements 0-15, high 16-31. The
 * 32 bytes at qs cover groups 2p and 2p + 1 and its nibble planes hold
 * (2p: 0-15 | 2p+1: 0-15) and (2p: 16-31 | 2p+1: 16-31), one group per
 * lane; the activations are gathered to match with two 16-byte loads per
 * register (vinserti128 from memory), and each lane takes its group's scale
 * (ctl = CTL_PAIR(2p)). The codebook lookup is one pshufb per plane. */
BG_AVX2 static inline __m256i iq4_xs_pair(const uint8_t *qs, const int8_t *act, __m256i book,
                                          __m256i sc, __m256i ctl)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = loadu256(qs);
    const __m256i wlo = _mm256_shuffle_epi8(book, _mm256_and_si256(q, m4));
    const __m256i whi = _mm256_shuffle_epi8(book, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    const __m256i alo =
        _mm256_inserti128_si256(_mm256_castsi128_si256(loadu128(act)), loadu128(act + 32), 1);
    const __m256i ahi =
        _mm256_inserti128_si256(_mm256_castsi128_si256(loadu128(act + 16)), loadu128(act + 48), 1);
    const __m256i s = pick_scale(sc, ctl);
    return _mm256_add_epi32(dot32_s(wlo, alo, s), dot32_s(whi, ahi, s));
}

BG_AVX2 float bg_dot_iq4_xs_avx2(int64_t n, const void *w, const void *a)
{
    const bg_block_iq4_xs *x = w;
    const bg_block_q8_K *y = a;
    const __m256i book = _mm256_broadcastsi128_si256(loadu128(iq4_codebook));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++, y++) {
        const __m256i sc = iq4_xs_scales(x);
        const __m256i s0 = iq4_xs_pair(x->qs, y->qs, book, sc, CTL_PAIR(0));
        const __m256i s1 = iq4_xs_pair(x->qs + 32, y->qs + 64, book, sc, CTL_PAIR(2));
        const __m256i s2 = iq4_xs_pair(x->qs + 64, y->qs + 128, book, sc, CTL_PAIR(4));
        const __m256i s3 = iq4_xs_pair(x->qs + 96, y->qs + 192, book, sc, CTL_PAIR(6));
        const __m256i isum = _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(y->d * f16_to_f32(x->d)), acc);
    }
    return hsum_ps(acc);
}
#endif
