/* AVX2 + FMA versions of the vectorized float arithmetic of ops.c, for
 * CPUs without AVX-512: each 16-lane group of the AVX-512 arithmetic as two
 * 8-lane halves, the same bits (tests/test_ops.c compares them). */
#include "ops.h"

#ifdef BG_OPS_X86
#include <immintrin.h>

#define BG_AVX2_FMA __attribute__((target("avx2,fma")))

/* Before a loop over the eight accumulators: unrolled whole, they stay in
 * registers rather than in an array on the stack. */
#define BG_EACH_ACC _Pragma("GCC unroll 8")

/* 2^e for integer e in [-126, 127], from its bits. */
BG_AVX2_FMA static inline __m256 pow2(__m256i e)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

/* exp_lane of ops.c on 8 lanes. The scale by 2^n (|n| <= 192) is two
 * multiplications by 2^(n>>1) and 2^(n - (n>>1)): the first is exact (j is
 * near 1), so the second rounds once, as vscalefps and ldexpf do, also
 * into subnormals and to infinity. */
BG_AVX2_FMA static inline __m256 exp8(__m256 x)
{
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f)));
    const __m256 j = _mm256_fmadd_ps(hi, u,
                                     _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b,
                                                     _mm256_set1_ps(1.0f)));
    const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n),
                                     _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    /* n is an integer; lanes that are big or NaN give garbage exponents
     * here and are replaced (big) or stay NaN (j is NaN) */
    const __m256i ni = _mm256_cvtps_epi32(_mm256_andnot_ps(big, n));
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256 r = _mm256_mul_ps(_mm256_mul_ps(j, pow2(n1)), pow2(_mm256_sub_epi32(ni, n1)));
    if (!_mm256_movemask_ps(big))
        return r;
    const __m256 neg = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
    const __m256 limit = _mm256_andnot_ps(neg, _mm256_set1_ps(__builtin_inff()));
    return _mm256_blendv_ps(r, limit, big);
}

BG_AVX2_FMA static inline __m256 silu8(__m256 x)
{
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* reduce16 of ops.c, the 16 lanes as halves lo (0..7) and hi (8..15). */
BG_AVX2_FMA static inline float reduce16(__m256 lo, __m256 hi)
{
    const __m256 h = _mm256_add_ps(lo, hi);
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1)));
}

BG_AVX2_FMA static void silu16_avx2(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
}

BG_AVX2_FMA static void swiglu16_avx2(float *y, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)),
                                              _mm256_loadu_ps(up + i)));
}

/* The sum of dot64's eight accumulators: accumulator j of its 16 lanes is
 * a[2j] (low half) and a[2j+1], added as the AVX-512 kernel adds its four. */
BG_AVX2_FMA static inline float sum_acc8(const __m256 a[8])
{
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    return reduce16(lo, hi);
}

BG_AVX2_FMA static float dot64_avx2(const float *x, const float *y, int64_t n)
{
    __m256 a[8];
    BG_EACH_ACC for (int k = 0; k < 8; k++)
        a[k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 64)
        BG_EACH_ACC for (int k = 0; k < 8; k++)
            a[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k),
                                   a[k]);
    return sum_acc8(a);
}

/* bg_delta_rule_row in two passes over the row instead of four: the
 * decay with M k, then the rank-one update with M q, each step and each
 * sum in dot64_avx2's and axpy16_avx2's order, so the same bits. */
BG_AVX2_FMA static float delta64_avx2(float *row, const float *k, const float *q, float g,
                                      float v, float beta, int64_t n)
{
    const __m256 vg = _mm256_set1_ps(g);
    __m256 a[8];
    BG_EACH_ACC for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 64)
        BG_EACH_ACC for (int j = 0; j < 8; j++) {
            const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8 * j), vg);
            _mm256_storeu_ps(row + i + 8 * j, r);
            a[j] = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i + 8 * j), a[j]);
        }
    const __m256 vd = _mm256_set1_ps((v - sum_acc8(a)) * beta);
    BG_EACH_ACC for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 64)
        BG_EACH_ACC for (int j = 0; j < 8; j++) {
            const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8 * j), vd,
                                             _mm256_loadu_ps(row + i + 8 * j));
            _mm256_storeu_ps(row + i + 8 * j, r);
            a[j] = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i + 8 * j), a[j]);
        }
    return sum_acc8(a);
}

BG_AVX2_FMA static void axpy16_avx2(float *y, const float *x, float a, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a);
    for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(y + i)));
}

BG_AVX2_FMA static double expsum16_avx2(float *y, const float *x, float max, int64_t n)
{
    const __m256 m = _mm256_set1_ps(max);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i += 16) {
        const __m256 lo = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        const __m256 hi = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
        _mm256_storeu_ps(y + i, lo);
        _mm256_storeu_ps(y + i + 8, hi);
        sum += (double)reduce16(lo, hi);
    }
    return sum;
}

/* conv_lanes of ops.c for 16 channels, as two halves of 8: a half's
 * history and weights gathered into registers once, the tokens streamed,
 * the history stored back (AVX2 has no scatter). */
BG_AVX2_FMA static void conv16_avx2(float *x, size_t x_stride, int64_t n_tok, float *hist,
                                    const float *w, int64_t K)
{
    for (int c0 = 0; c0 < 16; c0 += 8) {
        const __m256i lane = _mm256_setr_epi32(c0, c0 + 1, c0 + 2, c0 + 3, c0 + 4, c0 + 5,
                                               c0 + 6, c0 + 7);
        const __m256i hidx = _mm256_mullo_epi32(lane, _mm256_set1_epi32((int)K - 1));
        const __m256i widx = _mm256_mullo_epi32(lane, _mm256_set1_epi32((int)K));
        __m256 h[7], wv[8];
        for (int64_t j = 0; j < K - 1; j++)
            h[j] = _mm256_i32gather_ps(hist, _mm256_add_epi32(hidx, _mm256_set1_epi32((int)j)), 4);
        for (int64_t j = 0; j < K; j++)
            wv[j] = _mm256_i32gather_ps(w, _mm256_add_epi32(widx, _mm256_set1_epi32((int)j)), 4);
        if (K == 4) { /* the models' kernel, in registers */
            __m256 h0 = h[0], h1 = h[1], h2 = h[2];
            for (int64_t i = 0; i < n_tok; i++) {
                float *xi = x + (size_t)i * x_stride + c0;
                const __m256 in = _mm256_loadu_ps(xi);
                __m256 acc = _mm256_fmadd_ps(h0, wv[0], _mm256_setzero_ps());
                acc = _mm256_fmadd_ps(h1, wv[1], acc);
                acc = _mm256_fmadd_ps(h2, wv[2], acc);
                _mm256_storeu_ps(xi, _mm256_fmadd_ps(in, wv[3], acc));
                h0 = h1, h1 = h2, h2 = in;
            }
            h[0] = h0, h[1] = h1, h[2] = h2;
        } else {
            for (int64_t i = 0; i < n_tok; i++) {
                float *xi = x + (size_t)i * x_stride + c0;
                const __m256 in = _mm256_loadu_ps(xi);
                __m256 acc = _mm256_setzero_ps();
                for (int64_t j = 0; j < K - 1; j++)
                    acc = _mm256_fmadd_ps(h[j], wv[j], acc);
                _mm256_storeu_ps(xi, _mm256_fmadd_ps(in, wv[K - 1], acc));
                for (int64_t j = 0; j + 2 < K; j++)
                    h[j] = h[j + 1];
                h[K - 2] = in;
            }
        }
        for (int64_t j = 0; j < K - 1; j++) {
            float v[8];
            _mm256_storeu_ps(v, h[j]);
            for (int l = 0; l < 8; l++)
                hist[(c0 + l) * (K - 1) + j] = v[l];
        }
    }
}

const bg_ops_impl bg_ops_avx2 = {"avx2",      silu16_avx2, swiglu16_avx2, dot64_avx2,
                                 axpy16_avx2, expsum16_avx2, delta64_avx2,
                                 NULL /* one by one */, conv16_avx2};
#endif
