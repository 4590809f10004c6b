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
#include <string.h>

#include "kernels_x86_kquant.h"
#include "quant.h"

#define BG_AVX2 __attribute__((target("avx2,fma,f16c")))

BG_AVX2 static inline __m256i loadu256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

BG_AVX2 static inline __m128i loadu128(const void *p)
{
    return _mm_loadu_si128((const __m128i *)p);
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

/* sum_b d_a * (d * sum_g sc_g (q.a)_g - dmin * sum_g mn_g bsum_g), blocks of
 * `bytes` bytes with qs / qh (0: none, Q4_K) at the given offsets; the
 * float arithmetic is kq_add's (llama.cpp's). */
BG_AVX2 static inline float k_dot(int64_t n, const uint8_t *w, size_t bytes, size_t qh_off,
                                  size_t qs_off, const bg_block_q8_K *y)
{
    kq_sums s = {_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
    for (int64_t b = 0; b < n / BG_QK_K; b++, w += bytes, y++) {
        __m128i mins;
        const __m256i sc = kq_scales(w + offsetof(bg_block_q4_K, scales), &mins);
        const __m256i isum = k_block_isum(w + qs_off, qh_off ? w + qh_off : NULL, y->qs, sc);
        kq_add(&s, kq_block_d(w), kq_block_dmin(w), y, isum, mins, qh_off != 0);
    }
    return kq_total(&s, qh_off != 0);
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
                              _mm256_set1_ps(y->d * kq_load_f16(&x->d)), acc);
    }
    return kq_hsum(acc);
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

/* Group g of 32 (16 bytes at qs + 16g: low nibbles elements 0-15, high
 * 16-31) as its 32 codebook values in element order. */
BG_AVX2 static inline __m256i iq4_xs_group(const uint8_t *qs, __m256i book)
{
    const __m128i v = loadu128(qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_shuffle_epi8(book, _mm256_and_si256(both, _mm256_set1_epi8(0x0F)));
}

/* As llama.cpp's vec_dot, so the results are its bits: lane l of each
 * group sums elements 4l..4l+3 times the group's scale, the groups add up
 * exactly in int32, and each super-block is one fused multiply-add. */
BG_AVX2 float bg_dot_iq4_xs_avx2(int64_t n, const void *w, const void *a)
{
    const bg_block_iq4_xs *x = w;
    const bg_block_q8_K *y = a;
    const __m256i book = _mm256_broadcastsi128_si256(loadu128(iq4_codebook));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++, y++) {
        const __m256i sc = iq4_xs_scales(x);
        __m256i isum = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++)
            isum = _mm256_add_epi32(isum, dot32_s(iq4_xs_group(x->qs + 16 * g, book),
                                                  loadu256(y->qs + 32 * g),
                                                  pick_scale(sc, CTL_SAME(g))));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(y->d * kq_load_f16(&x->d)), acc);
    }
    return kq_hsum(acc);
}
#endif
