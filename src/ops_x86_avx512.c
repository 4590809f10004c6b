/* AVX-512 versions of the vectorized float arithmetic of ops.c, chosen at
 * run time where the CPU has AVX-512 F and FMA. They are the lane
 * arithmetic ops.c's scalar versions spell out, 16 lanes at a time, and
 * give the same bits (tests/test_kernels.c compares them). */
#include "ops.h"

#ifdef BG_OPS_X86
#include <immintrin.h>
#include <math.h>

#define BG_AVX512_F __attribute__((target("avx512f,fma")))

/* exp_lane of ops.c: the polynomial by fused multiply-adds, the scale by
 * 2^n in one rounding (vscalefps), 0 or infinity beyond |n| > 192. */
BG_AVX512_F static inline __m512 exp16(__m512 x)
{
    const __m512 shift = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
    const __m512 n = _mm512_sub_ps(z, shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
    const __m512 j = _mm512_fmadd_ps(hi, u,
                                     _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b,
                                                     _mm512_set1_ps(1.0f)));
    const __m512 r = _mm512_scalef_ps(j, n);
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (!big)
        return r;
    const __mmask16 neg = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512 limit = _mm512_mask_blend_ps(neg, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, r, limit);
}

BG_AVX512_F static inline __m512 silu16(__m512 x)
{
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* reduce16 of ops.c: halves, quarters, then pairs. */
BG_AVX512_F static inline float reduce16(__m512 v)
{
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 h = _mm256_add_ps(lo, hi);
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1)));
}

BG_AVX512_F static void silu16_avx512(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
}

BG_AVX512_F static void swiglu16_avx512(float *y, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(silu16(_mm512_loadu_ps(gate + i)),
                                              _mm512_loadu_ps(up + i)));
}

BG_AVX512_F static float dot64_avx512(const float *x, const float *y, int64_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    return reduce16(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
}

BG_AVX512_F static void axpy16_avx512(float *y, const float *x, float a, int64_t n)
{
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), va, _mm512_loadu_ps(y + i)));
}

BG_AVX512_F static double expsum16_avx512(float *y, const float *x, float max, int64_t n)
{
    const __m512 m = _mm512_set1_ps(max);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(y + i, e);
        sum += (double)reduce16(e);
    }
    return sum;
}

/* dot64's accumulators and reduction, the scaling fused into the first
 * pass and the update into the second. */
BG_AVX512_F static float delta64_avx512(float *row, const float *k, const float *q, float g,
                                        float v, float beta, int64_t n)
{
    const __m512 vg = _mm512_set1_ps(g);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 64) {
        const __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(row + i), vg);
        const __m512 r1 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 16), vg);
        const __m512 r2 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 32), vg);
        const __m512 r3 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 48), vg);
        _mm512_storeu_ps(row + i, r0);
        _mm512_storeu_ps(row + i + 16, r1);
        _mm512_storeu_ps(row + i + 32, r2);
        _mm512_storeu_ps(row + i + 48, r3);
        a0 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(k + i), a0);
        a1 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(k + i + 16), a1);
        a2 = _mm512_fmadd_ps(r2, _mm512_loadu_ps(k + i + 32), a2);
        a3 = _mm512_fmadd_ps(r3, _mm512_loadu_ps(k + i + 48), a3);
    }
    const __m512 vd =
        _mm512_set1_ps((v - reduce16(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)))) * beta);
    __m512 b0 = _mm512_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
    for (int64_t i = 0; i < n; i += 64) {
        const __m512 r0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vd, _mm512_loadu_ps(row + i));
        const __m512 r1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), vd, _mm512_loadu_ps(row + i + 16));
        const __m512 r2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 32), vd, _mm512_loadu_ps(row + i + 32));
        const __m512 r3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 48), vd, _mm512_loadu_ps(row + i + 48));
        _mm512_storeu_ps(row + i, r0);
        _mm512_storeu_ps(row + i + 16, r1);
        _mm512_storeu_ps(row + i + 32, r2);
        _mm512_storeu_ps(row + i + 48, r3);
        b0 = _mm512_fmadd_ps(r0, _mm512_loadu_ps(q + i), b0);
        b1 = _mm512_fmadd_ps(r1, _mm512_loadu_ps(q + i + 16), b1);
        b2 = _mm512_fmadd_ps(r2, _mm512_loadu_ps(q + i + 32), b2);
        b3 = _mm512_fmadd_ps(r3, _mm512_loadu_ps(q + i + 48), b3);
    }
    return reduce16(_mm512_add_ps(_mm512_add_ps(b0, b2), _mm512_add_ps(b1, b3)));
}

/* dot64 for up to four rows of x sharing w: each row's four accumulators
 * and reduction as there. */
BG_AVX512_F static void dot64_multi_avx512(const float *w, const float *x, size_t x_stride, int nx,
                                           int64_t n, float *out)
{
    if (nx < 4) {
        for (int t = 0; t < nx; t++)
            out[t] = dot64_avx512(w, x + t * x_stride, n);
        return;
    }
    __m512 a[4][4];
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 4; j++)
            a[t][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 64)
        for (int j = 0; j < 4; j++) {
            const __m512 wv = _mm512_loadu_ps(w + i + 16 * j);
            a[0][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + i + 16 * j), a[0][j]);
            a[1][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + x_stride + i + 16 * j), a[1][j]);
            a[2][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 2 * x_stride + i + 16 * j), a[2][j]);
            a[3][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 3 * x_stride + i + 16 * j), a[3][j]);
        }
    for (int t = 0; t < 4; t++)
        out[t] = reduce16(_mm512_add_ps(_mm512_add_ps(a[t][0], a[t][2]), _mm512_add_ps(a[t][1], a[t][3])));
}

/* conv_lanes of ops.c for 16 channels at once: the history and weights
 * gathered into registers once, the tokens streamed, the history
 * scattered back. */
BG_AVX512_F static void conv16_avx512(float *x, size_t x_stride, int64_t n_tok, float *hist,
                                      const float *w, int64_t K)
{
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i hidx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)K - 1));
    const __m512i widx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)K));
    __m512 h[7], wv[8];
    for (int64_t j = 0; j < K - 1; j++)
        h[j] = _mm512_i32gather_ps(_mm512_add_epi32(hidx, _mm512_set1_epi32((int)j)), hist, 4);
    for (int64_t j = 0; j < K; j++)
        wv[j] = _mm512_i32gather_ps(_mm512_add_epi32(widx, _mm512_set1_epi32((int)j)), w, 4);
    if (K == 4) { /* the models' kernel, in registers */
        __m512 h0 = h[0], h1 = h[1], h2 = h[2];
        for (int64_t i = 0; i < n_tok; i++) {
            float *xi = x + (size_t)i * x_stride;
            const __m512 in = _mm512_loadu_ps(xi);
            __m512 acc = _mm512_fmadd_ps(h0, wv[0], _mm512_setzero_ps());
            acc = _mm512_fmadd_ps(h1, wv[1], acc);
            acc = _mm512_fmadd_ps(h2, wv[2], acc);
            _mm512_storeu_ps(xi, _mm512_fmadd_ps(in, wv[3], acc));
            h0 = h1, h1 = h2, h2 = in;
        }
        h[0] = h0, h[1] = h1, h[2] = h2;
    } else {
        for (int64_t i = 0; i < n_tok; i++) {
            float *xi = x + (size_t)i * x_stride;
            const __m512 in = _mm512_loadu_ps(xi);
            __m512 acc = _mm512_setzero_ps();
            for (int64_t j = 0; j < K - 1; j++)
                acc = _mm512_fmadd_ps(h[j], wv[j], acc);
            _mm512_storeu_ps(xi, _mm512_fmadd_ps(in, wv[K - 1], acc));
            for (int64_t j = 0; j + 2 < K; j++)
                h[j] = h[j + 1];
            h[K - 2] = in;
        }
    }
    for (int64_t j = 0; j < K - 1; j++)
        _mm512_i32scatter_ps(hist, _mm512_add_epi32(hidx, _mm512_set1_epi32((int)j)), h[j], 4);
}

const bg_ops_impl bg_ops_avx512 = {"avx512",      silu16_avx512, swiglu16_avx512, dot64_avx512,
                                   axpy16_avx512, expsum16_avx512, delta64_avx512,
                                   dot64_multi_avx512, conv16_avx512};
#endif
