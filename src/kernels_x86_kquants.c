/* AVX2 dot products of the 256-element formats (Q2_K..Q6_K, IQ4_XS)
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
 * The multi-row dots (prefill: several tokens against one weight row) decode
 * a super-block's codes and scales once for up to BG_DOT_MULTI activation
 * rows and keep each row's steps, so each result is the single dot's bits.
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

#include "kernels_x86_codes.h"
#include "kernels_x86_kquant.h"
#include "kernels_x86_prefetch.h"
#include "quant.h"

#define BG_AVX2 __attribute__((target("avx2,fma,f16c")))

/* Before a loop over the activation rows of a multi-row dot: unrolled
 * whole, the rows' sums stay in registers rather than in arrays. */
#define BG_EACH_ROW _Pragma("GCC unroll 4")
/* Before a loop over a chunk's four code registers: unrolled, the shift
 * counts and pshufb controls are constants. */
#define BG_EACH_CODE _Pragma("GCC unroll 4")

BG_AVX2 static inline __m256i loadu256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

BG_AVX2 static inline __m128i loadu128(const void *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

/* The single and multi-row dot entries of a format whose rows function
 * takes (n, w, a, a_stride, na, out): each row count is a constant in its
 * own inlined copy, so the rows' sums stay in registers. */
#define BG_DOT_ENTRIES(name, rows)                                                        \
    BG_AVX2 float bg_dot_##name##_avx2(int64_t n, const void *w, const void *a)            \
    {                                                                                     \
        float out;                                                                        \
        rows(n, w, a, 0, 1, &out);                                                        \
        return out;                                                                       \
    }                                                                                     \
    BG_AVX2 void bg_dot_multi_##name##_avx2(int64_t n, const void *w, const void *a,       \
                                            size_t a_stride, int na, float *out)           \
    {                                                                                     \
        _Static_assert(BG_DOT_MULTI == 4, "one case per row count");                      \
        switch (na) {                                                                     \
        case 4: rows(n, w, a, a_stride, 4, out); break;                                   \
        case 3: rows(n, w, a, a_stride, 3, out); break;                                   \
        case 2: rows(n, w, a, a_stride, 2, out); break;                                   \
        default: rows(n, w, a, a_stride, 1, out); break;                                  \
        }                                                                                 \
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

/* The 32-byte chunk c of a Q4_K/Q5_K super-block at qs: byte l holds element
 * 64c + l (group 2c) low and 64c + 32 + l (group 2c + 1) high, so the two
 * nibble planes are whole groups, in activation order: *lo and *hi. For
 * Q5_K, *hb holds the qh bytes shifted right by 2c: bits 0 and 1 of byte l
 * are the fifth bits of the chunk's two elements l (16-bit shifts are
 * fine: the bits read never cross a byte), and moves on to the next
 * chunk's. */
BG_AVX2 static inline void k_codes(const uint8_t *qs, __m256i *hb, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const __m256i q = loadu256(qs);
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (hb) {
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(*hb, 4), bit4));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_slli_epi16(*hb, 3), bit4));
        *hb = _mm256_srli_epi16(*hb, 2);
    }
}

/* Chunk c's scaled sums with each of the na activation rows y[t], added
 * into isum[t]; ctl0 picks the scale of group 2c, ctl1 of 2c + 1. Written
 * to be called with constants (no loop), so the pshufb controls are
 * constants rather than a counter. */
BG_AVX2 static inline void k_chunk_rows(const uint8_t *qs, __m256i *hb,
                                        const bg_block_q8_K *const *y, int na, int c,
                                        __m256i sc, __m256i ctl0, __m256i ctl1, __m256i *isum)
{
    __m256i lo, hi;
    k_codes(qs + 32 * c, hb, &lo, &hi);
    const __m256i s0 = pick_scale(sc, ctl0), s1 = pick_scale(sc, ctl1);
    BG_EACH_ROW for (int t = 0; t < na; t++)
        isum[t] = _mm256_add_epi32(isum[t],
                                   _mm256_add_epi32(dot32_u(lo, y[t]->qs + 64 * c, s0),
                                                    dot32_u(hi, y[t]->qs + 64 * c + 32, s1)));
}

/* One Q4_K/Q5_K weight row (blocks of `bytes` bytes, qs / qh (0: none,
 * Q4_K) at the given offsets) against na activation rows, a_stride bytes
 * apart: out[t] = sum_b d_a * (d * sum_g sc_g (q.a)_g - dmin * sum_g mn_g
 * bsum_g). A super-block's codes and scales are decoded once for all rows;
 * each row's integer sums are exact, so their order does not matter, and
 * its float arithmetic is kq_add's (llama.cpp's): every row's result is
 * the single dot's, bit for bit. Inlined with na a constant, so the
 * per-row sums live in registers. */
BG_AVX2 static inline __attribute__((always_inline)) void
k_dot_rows(int64_t n, const uint8_t *w, size_t bytes, size_t qh_off, size_t qs_off,
           const uint8_t *a, size_t a_stride, int na, float *out)
{
    kq_sums s[BG_DOT_MULTI];
    BG_EACH_ROW for (int t = 0; t < na; t++)
        s[t] = (kq_sums){_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
    for (int64_t b = 0; b < n / BG_QK_K; b++, w += bytes) {
        bg_prefetch_ahead(w, bytes);
        const bg_block_q8_K *y[BG_DOT_MULTI];
        __m256i isum[BG_DOT_MULTI];
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            y[t] = (const bg_block_q8_K *)(const void *)(a + (size_t)t * a_stride) + b;
            isum[t] = _mm256_setzero_si256();
        }
        __m128i mins;
        const __m256i sc = kq_scales(w + offsetof(bg_block_q4_K, scales), &mins);
        __m256i hbits = qh_off ? loadu256(w + qh_off) : _mm256_setzero_si256();
        __m256i *hb = qh_off ? &hbits : NULL;
        k_chunk_rows(w + qs_off, hb, y, na, 0, sc, CTL_SAME(0), CTL_SAME(1), isum);
        k_chunk_rows(w + qs_off, hb, y, na, 1, sc, CTL_SAME(2), CTL_SAME(3), isum);
        k_chunk_rows(w + qs_off, hb, y, na, 2, sc, CTL_SAME(4), CTL_SAME(5), isum);
        k_chunk_rows(w + qs_off, hb, y, na, 3, sc, CTL_SAME(6), CTL_SAME(7), isum);
        const float wd = kq_block_d(w), wdmin = kq_block_dmin(w);
        BG_EACH_ROW for (int t = 0; t < na; t++)
            kq_add(&s[t], wd, wdmin, y[t], isum[t], mins, qh_off != 0);
    }
    BG_EACH_ROW for (int t = 0; t < na; t++)
        out[t] = kq_total(&s[t], qh_off != 0);
}

/* Inlined into each format's entry, so qh_off is a constant there: left to
 * GCC, one copy served Q4_K and Q5_K, testing for the fifth bits at every
 * chunk (Q5_K's dot took 14.6 ns a super-block that way, 12.1 inlined). */
BG_AVX2 static inline __attribute__((always_inline)) float
k_dot(int64_t n, const uint8_t *w, size_t bytes, size_t qh_off, size_t qs_off, const void *a)
{
    float out;
    k_dot_rows(n, w, bytes, qh_off, qs_off, a, 0, 1, &out);
    return out;
}

/* The multi-row dot of Q4_K/Q5_K: na (2 to BG_DOT_MULTI) as a constant,
 * and qh_off too (inlined as k_dot). */
BG_AVX2 static inline __attribute__((always_inline)) void
k_dot_multi(int64_t n, const uint8_t *w, size_t bytes, size_t qh_off, size_t qs_off, const void *a,
            size_t a_stride, int na, float *out)
{
    _Static_assert(BG_DOT_MULTI == 4, "one case per row count");
    switch (na) {
    case 4: k_dot_rows(n, w, bytes, qh_off, qs_off, a, a_stride, 4, out); break;
    case 3: k_dot_rows(n, w, bytes, qh_off, qs_off, a, a_stride, 3, out); break;
    case 2: k_dot_rows(n, w, bytes, qh_off, qs_off, a, a_stride, 2, out); break;
    default: k_dot_rows(n, w, bytes, qh_off, qs_off, a, a_stride, 1, out); break;
    }
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

BG_AVX2 void bg_dot_multi_q4_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                    int na, float *out)
{
    k_dot_multi(n, w, sizeof(bg_block_q4_K), 0, offsetof(bg_block_q4_K, qs), a, a_stride, na,
                out);
}

BG_AVX2 void bg_dot_multi_q5_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                    int na, float *out)
{
    k_dot_multi(n, w, sizeof(bg_block_q5_K), offsetof(bg_block_q5_K, qh),
                offsetof(bg_block_q5_K, qs), a, a_stride, na, out);
}

/* ------------------------------------------------------------------------
 * Q2_K and Q3_K
 * ------------------------------------------------------------------------ */

/* A chunk's scaled sums for one activation row: lane l of register k sums
 * its elements 4l..4l+3 times their group's scale, as llama.cpp's lanes
 * do, so the float steps after see the same integers. */
BG_AVX2 static inline __m256i crumb_chunk_sum(const __m256i q[4], const int8_t *act, __m256i sc)
{
    __m256i sum = _mm256_setzero_si256();
    BG_EACH_CODE for (int k = 0; k < 4; k++)
        sum = _mm256_add_epi32(sum, dot32_u(q[k], act + 32 * k, pick_scale(sc, CTL_PAIR(2 * k))));
    return sum;
}

/* One Q2_K weight row against na activation rows (a_stride bytes apart):
 * codes and scales decoded once a super-block, each row's integers and
 * float steps llama.cpp's (the min term's fused multiply-add first, by
 * -d_a * dmin on the lanes of group pairs, then the scaled sums'), so every
 * result is its vec_dot's bits. */
BG_AVX2 static inline __attribute__((always_inline)) void
q2_dot_rows(int64_t n, const bg_block_q2_K *x, const uint8_t *a, size_t a_stride, int na,
            float *out)
{
    __m256 acc[BG_DOT_MULTI];
    BG_EACH_ROW for (int t = 0; t < na; t++)
        acc[t] = _mm256_setzero_ps();
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++) {
        bg_prefetch_ahead(x, sizeof *x);
        const bg_block_q8_K *y[BG_DOT_MULTI];
        __m256i isum[BG_DOT_MULTI];
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            y[t] = (const bg_block_q8_K *)(const void *)(a + (size_t)t * a_stride) + b;
            isum[t] = _mm256_setzero_si256();
        }
        const __m128i packed = loadu128(x->scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
        const __m128i sc8 = _mm_and_si128(packed, m4);
        for (int c = 0; c < 2; c++) {
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepu8_epi16(c ? _mm_srli_si128(sc8, 8) : sc8));
            const __m256i bits = loadu256(x->qs + 32 * c);
            const __m256i q[4] = {kq_crumbs(bits, 0), kq_crumbs(bits, 1), kq_crumbs(bits, 2),
                                  kq_crumbs(bits, 3)};
            BG_EACH_ROW for (int t = 0; t < na; t++)
                isum[t] = _mm256_add_epi32(isum[t], crumb_chunk_sum(q, y[t]->qs + 128 * c, sc));
        }
        const float dw = kq_load_f16(&x->d), dmin = kq_load_f16(&x->dmin);
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            const __m256i msum = _mm256_madd_epi16(mins, loadu256(y[t]->bsums));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-y[t]->d * dmin), _mm256_cvtepi32_ps(msum),
                                     acc[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(y[t]->d * dw), _mm256_cvtepi32_ps(isum[t]),
                                     acc[t]);
        }
    }
    BG_EACH_ROW for (int t = 0; t < na; t++)
        out[t] = kq_hsum(acc[t]);
}

BG_DOT_ENTRIES(q2_K, q2_dot_rows)

/* Q3_K's sixteen scales (kq_q3_scales) as s16: the eight of chunk c in
 * both lanes of sc[c]. */
BG_AVX2 static inline void q3_scales(const uint8_t *p, __m256i sc[2])
{
    const __m128i s = kq_q3_scales(p);
    sc[0] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(s));
    sc[1] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(s, 8)));
}

/* One Q3_K weight row against na activation rows: codes are q - 4 with q
 * unsigned, so each maddubs pair (q a) loses the pair's 4 a, the same for
 * every weight row (one maddubs of the activations by 4 each); lane l then
 * holds llama.cpp's integers, (q - 4) a times the scale over elements
 * 4l..4l+3, and one fused multiply-add a super-block makes its bits. */
BG_AVX2 static inline __attribute__((always_inline)) void
q3_dot_rows(int64_t n, const bg_block_q3_K *x, const uint8_t *a, size_t a_stride, int na,
            float *out)
{
    __m256 acc[BG_DOT_MULTI];
    BG_EACH_ROW for (int t = 0; t < na; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i four = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++) {
        bg_prefetch_ahead(x, sizeof *x);
        const bg_block_q8_K *y[BG_DOT_MULTI];
        __m256i isum[BG_DOT_MULTI];
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            y[t] = (const bg_block_q8_K *)(const void *)(a + (size_t)t * a_stride) + b;
            isum[t] = _mm256_setzero_si256();
        }
        __m256i sc[2];
        q3_scales(x->scales, sc);
        const __m256i hmask = loadu256(x->hmask);
        for (int c = 0; c < 2; c++) {
            const __m256i bits = loadu256(x->qs + 32 * c);
            __m256i q[4], s[4];
            BG_EACH_CODE for (int k = 0; k < 4; k++) {
                q[k] = kq_q3_codes(bits, hmask, c, k);
                s[k] = pick_scale(sc[c], CTL_PAIR(2 * k));
            }
            BG_EACH_ROW for (int t = 0; t < na; t++) {
                const int8_t *act = y[t]->qs + 128 * c;
                BG_EACH_CODE for (int k = 0; k < 4; k++) {
                    const __m256i av = loadu256(act + 32 * k);
                    const __m256i pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], av),
                                                           _mm256_maddubs_epi16(four, av));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, s[k]));
                }
            }
        }
        const float dw = kq_load_f16(&x->d);
        BG_EACH_ROW for (int t = 0; t < na; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(y[t]->d * dw), _mm256_cvtepi32_ps(isum[t]),
                                     acc[t]);
    }
    BG_EACH_ROW for (int t = 0; t < na; t++)
        out[t] = kq_hsum(acc[t]);
}

BG_DOT_ENTRIES(q3_K, q3_dot_rows)

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
BG_AVX2 static inline void q6_codes(const bg_block_q6_K *x, int c, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const uint8_t *ql = x->ql + 64 * c;
    const __m256i l0 = loadu256(ql), l1 = loadu256(ql + 32);
    const __m256i h = loadu256(x->qh + 32 * c);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}

/* One Q6_K weight row against na activation rows, a_stride bytes apart, as
 * k_dot_rows does it: the codes and scales decoded once a super-block, the
 * exact integer sums and the float steps per row, so every result is the
 * single dot's bit for bit. */
BG_AVX2 static inline __attribute__((always_inline)) void
q6_dot_rows(int64_t n, const bg_block_q6_K *x, const uint8_t *a, size_t a_stride, int na,
            float *out)
{
    __m256 acc[BG_DOT_MULTI];
    BG_EACH_ROW for (int t = 0; t < na; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++) {
        bg_prefetch_ahead(x, sizeof *x);
        const bg_block_q8_K *y[BG_DOT_MULTI];
        __m256i isum[BG_DOT_MULTI];
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            y[t] = (const bg_block_q8_K *)(const void *)(a + (size_t)t * a_stride) + b;
            isum[t] = _mm256_setzero_si256();
        }
        const __m128i sc8 = loadu128(x->scales);
        for (int c = 0; c < 2; c++) {
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(c ? _mm_srli_si128(sc8, 8) : sc8));
            __m256i q[4];
            q6_codes(x, c, q);
            const __m256i s0 = pick_scale(sc, CTL_PAIR(0)), s1 = pick_scale(sc, CTL_PAIR(2));
            const __m256i s2 = pick_scale(sc, CTL_PAIR(4)), s3 = pick_scale(sc, CTL_PAIR(6));
            BG_EACH_ROW for (int t = 0; t < na; t++) {
                const int8_t *act = y[t]->qs + 128 * c;
                isum[t] = _mm256_add_epi32(isum[t], dot32_u(q[0], act, s0));
                isum[t] = _mm256_add_epi32(isum[t], dot32_u(q[1], act + 32, s1));
                isum[t] = _mm256_add_epi32(isum[t], dot32_u(q[2], act + 64, s2));
                isum[t] = _mm256_add_epi32(isum[t], dot32_u(q[3], act + 96, s3));
            }
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const float dw = kq_load_f16(&x->d);
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            const __m256i corr = _mm256_madd_epi16(loadu256(y[t]->bsums), sc16);
            const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(y[t]->d * dw),
                                     acc[t]);
        }
    }
    BG_EACH_ROW for (int t = 0; t < na; t++)
        out[t] = kq_hsum(acc[t]);
}

BG_DOT_ENTRIES(q6_K, q6_dot_rows)

/* ------------------------------------------------------------------------
 * IQ4_XS
 * ------------------------------------------------------------------------ */

/* Eight 6-bit scales - 32 as s16 in both lanes (for pick_scale). */
BG_AVX2 static inline __m256i iq4_xs_scales(const bg_block_iq4_xs *x)
{
    const __m256i ls = bg_iq4_xs_scales32((const uint8_t *)x);
    /* s16 per lane: (0-3, 0-3 | 4-7, 4-7); qwords 0 and 2 give 0-7 twice */
    return _mm256_permute4x64_epi64(_mm256_packs_epi32(ls, ls), 0x88);
}

/* One IQ4_XS weight row against na activation rows (a_stride bytes
 * apart), as llama.cpp's vec_dot, so each result is its bits: lane l of
 * each group sums elements 4l..4l+3 times the group's scale, the groups
 * add up exactly in int32, and each super-block is one fused multiply-add.
 * A super-block's codebook values and scales are decoded once for all
 * rows. Group g's 16 bytes at qs + 16 g hold its elements 0-15 in the low
 * nibbles and 16-31 in the high. */
BG_AVX2 static inline __attribute__((always_inline)) void
iq4_xs_rows(int64_t n, const void *w, const uint8_t *a, size_t a_stride, int na, float *out)
{
    const bg_block_iq4_xs *x = w;
    const __m256i book = _mm256_broadcastsi128_si256(loadu128(bg_iq4_codebook));
    __m256 acc[BG_DOT_MULTI];
    BG_EACH_ROW for (int t = 0; t < na; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / BG_QK_K; b++, x++) {
        bg_prefetch_ahead(x, sizeof *x);
        const __m256i sc = iq4_xs_scales(x);
        const bg_block_q8_K *y[BG_DOT_MULTI];
        __m256i isum[BG_DOT_MULTI];
        BG_EACH_ROW for (int t = 0; t < na; t++) {
            y[t] = (const bg_block_q8_K *)(const void *)(a + (size_t)t * a_stride) + b;
            isum[t] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++)
        {
            const __m256i q = _mm256_shuffle_epi8(book, bg_unpack_nibbles(x->qs + 16 * g));
            const __m256i scale = pick_scale(sc, CTL_SAME(g));
            BG_EACH_ROW for (int t = 0; t < na; t++)
                isum[t] = _mm256_add_epi32(isum[t],
                                           dot32_s(q, loadu256(y[t]->qs + 32 * g), scale));
        }
        const float dw = kq_load_f16(&x->d);
        BG_EACH_ROW for (int t = 0; t < na; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(y[t]->d * dw),
                                     acc[t]);
    }
    BG_EACH_ROW for (int t = 0; t < na; t++)
        out[t] = kq_hsum(acc[t]);
}

BG_DOT_ENTRIES(iq4_xs, iq4_xs_rows)

/* ------------------------------------------------------------------------
 * Q8_K activations
 * ------------------------------------------------------------------------ */

/* quantize_q8_K of quant.c, 32 codes (two block sums) a step: the first
 * element of largest magnitude sets the scale -127 / max, and codes round
 * to nearest even as the reference's magic-number addition does. A
 * product that is not finite (a NaN input; infinity times the zero scale
 * of an infinite max; anything times the infinite scale of a max below
 * 127 / FLT_MAX) becomes code 0, as the reference's rounding makes it. */
BG_AVX2 void bg_quantize_q8_K_avx2(const float *src, void *dst, int64_t n)
{
    bg_block_q8_K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        __m256 amax8 = _mm256_setzero_ps();
        for (int i = 0; i < BG_QK_K / 8; i++) /* a NaN lane keeps the running max */
            amax8 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + 8 * i)), amax8);
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        const float amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float max = 0;
        for (int i = 0; i < BG_QK_K / 8; i++) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(
                _mm256_andnot_ps(sign, _mm256_loadu_ps(src + 8 * i)), _mm256_set1_ps(amax),
                _CMP_EQ_OQ));
            if (hit) {
                max = src[8 * i + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        const __m256 inf = _mm256_set1_ps(__builtin_inff());
        for (int i = 0; i < BG_QK_K / 32; i++) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m256 p = _mm256_mul_ps(vs, _mm256_loadu_ps(src + 32 * i + 8 * k));
                const __m256i finite = _mm256_castps_si256(
                    _mm256_cmp_ps(_mm256_andnot_ps(sign, p), inf, _CMP_LT_OQ));
                q[k] = _mm256_min_epi32(_mm256_and_si256(_mm256_cvtps_epi32(p), finite), top);
            }
            /* packs interleave 128-bit lanes; the permute puts the codes back in order */
            const __m256i bytes = _mm256_permutevar8x32_epi32(
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
                _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * i), bytes);
            /* the two groups of 16: lanes 0 and 1 after two pairwise adds and the halves */
            __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            h = _mm256_hadd_epi32(h, h);
            const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            y[b].bsums[2 * i] = (int16_t)_mm_cvtsi128_si32(sums);
            y[b].bsums[2 * i + 1] = (int16_t)_mm_extract_epi32(sums, 1);
        }
        y[b].d = 1 / iscale;
    }
}
#endif
