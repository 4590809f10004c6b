/* AVX2 + F16C element-wise kernels for attention's accumulators. Each
 * element gets the same operations as the scalar versions in kernels.c
 * (convert, one fused multiply-add or one multiply, round to nearest even),
 * so results are bitwise equal to them; only NaN payloads may differ. The
 * attention passes below give each head the operations of those kernels
 * and of bg_dot_f32_avx2 in their order; they only share loads among heads
 * and keep values in registers between them. */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>

#include "fp16.h"
#include "kernels_x86_kquant.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define TO_F16 (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

AVX2 void bg_vec_mad_f16_avx2(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i)));
        __m256 yv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(void *)(y + i)));
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_cvtps_ph(_mm256_fmadd_ps(xv, vs, yv), TO_F16));
    }
    for (; i < n; i++)
        y[i] = bg_f32_to_f16(__builtin_fmaf(bg_f16_to_f32(x[i]), s, bg_f16_to_f32(y[i])));
}

AVX2 void bg_vec_scale_f16_avx2(int64_t n, uint16_t *y, float s)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 yv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(void *)(y + i)));
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_cvtps_ph(_mm256_mul_ps(yv, vs), TO_F16));
    }
    for (; i < n; i++)
        y[i] = bg_f32_to_f16(bg_f16_to_f32(y[i]) * s);
}

AVX2 void bg_vec_f16_to_f32_avx2(int64_t n, float *y, const uint16_t *x)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    for (; i < n; i++)
        y[i] = bg_f16_to_f32(x[i]);
}
/* 8 f16 at p as floats. */
static inline AVX2 __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* x rounded to f16 and back: what storing an f16 accumulator and loading it
 * again gives. */
static inline AVX2 __m256 round_f16x8(__m256 x)
{
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, TO_F16));
}

/* Scores of NR K rows (d a multiple of 32, k_stride bytes apart) against
 * NH heads' queries, NR * NH <= 4, as bg_dot_f32_avx2 sums each pair:
 * four accumulators over 32-float steps, then (acc0 + acc1) + (acc2 +
 * acc3). Accumulators 0 and 1 run first and are summed, then 2 and 3, so
 * that eight chains fit in registers with the K vectors the heads share;
 * fewer heads take more rows to keep eight chains. */
/* Accumulators (one per row and head) of the 16 floats from j of each
 * 32-float step: a takes j..j+7, b the next 8. */
static inline AVX2 __attribute__((always_inline)) void
scores_step(int64_t d, int64_t j, const uint16_t *k, size_t k_stride, int NR, const float *q,
            int NH, __m256 *a, __m256 *b)
{
    for (int64_t i = j; i < d; i += 32) {
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
            const uint16_t *kr = (const uint16_t *)(const void *)((const uint8_t *)k + r * k_stride);
            const __m256 k0 = load_f16x8(kr + i), k1 = load_f16x8(kr + i + 8);
#pragma GCC unroll 4
            for (int h = 0; h < NH; h++) {
                a[r * NH + h] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(q + h * d + i), a[r * NH + h]);
                b[r * NH + h] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(q + h * d + i + 8), b[r * NH + h]);
            }
        }
    }
}

static inline AVX2 __attribute__((always_inline)) void
scores_rows(int64_t d, const uint16_t *k, size_t k_stride, int NR, const float *q, int NH,
            float *out, int nt)
{
    __m256 a[4], b[4], lo[4];
#pragma GCC unroll 4
    for (int p = 0; p < NR * NH; p++)
        a[p] = b[p] = _mm256_setzero_ps();
    scores_step(d, 0, k, k_stride, NR, q, NH, a, b);
#pragma GCC unroll 4
    for (int p = 0; p < NR * NH; p++) {
        lo[p] = _mm256_add_ps(a[p], b[p]);
        a[p] = b[p] = _mm256_setzero_ps();
    }
    scores_step(d, 16, k, k_stride, NR, q, NH, a, b);
#pragma GCC unroll 4
    for (int p = 0; p < NR * NH; p++)
        out[(p % NH) * nt + p / NH] = kq_hsum(_mm256_add_ps(lo[p], _mm256_add_ps(a[p], b[p])));
}

AVX2 void bg_attn_scores_f16_avx2(int64_t d, const uint16_t *k, size_t k_stride, int nt,
                                  const float *q, int nh, float *out)
{
    int t = 0;
    if (nh <= 2) { /* several rows at a time */
        const int nr = nh == 1 ? 4 : 2;
        for (; t + nr <= nt; t += nr) {
            const uint16_t *kt = (const uint16_t *)(const void *)((const uint8_t *)k + t * k_stride);
            if (nh == 1)
                scores_rows(d, kt, k_stride, 4, q, 1, out + t, nt);
            else
                scores_rows(d, kt, k_stride, 2, q, 2, out + t, nt);
        }
    }
    for (; t < nt; t++) {
        const uint16_t *kt = (const uint16_t *)(const void *)((const uint8_t *)k + t * k_stride);
        int h = 0;
        for (; h + 4 <= nh; h += 4)
            scores_rows(d, kt, k_stride, 1, q + h * d, 4, out + h * nt + t, nt);
        switch (nh - h) {
        case 3: scores_rows(d, kt, k_stride, 1, q + h * d, 3, out + h * nt + t, nt); break;
        case 2: scores_rows(d, kt, k_stride, 1, q + h * d, 2, out + h * nt + t, nt); break;
        case 1: scores_rows(d, kt, k_stride, 1, q + h * d, 1, out + h * nt + t, nt); break;
        default: break;
        }
    }
}

/* The three ways V is accumulated (kernels.h): into f16 accumulators by
 * weights vs with rescales (ACC_F16), into f32 ones by weights p with
 * fused multiply-adds (ACC_F32), and f32 rows into f32 accumulators with a
 * multiply then an add (ACC_ROWS). */
typedef enum { ACC_F16, ACC_F32, ACC_ROWS } acc_kind;

typedef struct acc_args {
    const uint8_t *v; /* row t at v + t * v_stride: f16, or f32 for ACC_ROWS */
    size_t v_stride;
    int nt;
    const float *ms, *vs; /* [t * nh + h]; not for ACC_F32 */
    const uint8_t *rescale;
    const float *p; /* [h * nt + t]; ACC_F32 only */
} acc_args;

/* 8 * NC (NC <= 4) elements from element e of NH heads' accumulators over the
 * block's positions, held in registers; f16 ones as floats that f16
 * represents exactly, each step rounded to f16 as bg_vec_*_f16's store
 * would. Those roundings' conversions bound ACC_F16 (two cycles a vector
 * on Zen 3), given NH * NC chains to hide their latency. */
static inline AVX2 __attribute__((always_inline)) void
accumulate_x8(acc_kind K, int64_t d, int64_t e, void *acc, int NH, int NC, const acc_args *x)
{
    uint16_t *acc16 = acc;
    float *acc32 = acc;
    __m256 a[BG_ATTN_MAX_HEADS][4];
#pragma GCC unroll 8
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            a[h][c] = K == ACC_F16 ? load_f16x8(acc16 + h * d + e + 8 * c)
                                   : _mm256_loadu_ps(acc32 + h * d + e + 8 * c);
    for (int t = 0; t < x->nt; t++) {
        const uint8_t *row = x->v + t * x->v_stride;
        __m256 vt[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            vt[c] = K == ACC_ROWS ? _mm256_loadu_ps((const float *)(const void *)row + e + 8 * c)
                                  : load_f16x8((const uint16_t *)(const void *)row + e + 8 * c);
        if (K != ACC_F32 && x->rescale[t]) {
#pragma GCC unroll 8
            for (int h = 0; h < NH; h++) {
                const __m256 m = _mm256_broadcast_ss(x->ms + t * NH + h);
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++)
                    a[h][c] = K == ACC_F16 ? round_f16x8(_mm256_mul_ps(a[h][c], m))
                                           : _mm256_mul_ps(a[h][c], m);
            }
        }
#pragma GCC unroll 8
        for (int h = 0; h < NH; h++) {
            const __m256 w = _mm256_broadcast_ss(K == ACC_F32 ? x->p + h * x->nt + t
                                                              : x->vs + t * NH + h);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++)
                a[h][c] = K == ACC_F16   ? round_f16x8(_mm256_fmadd_ps(vt[c], w, a[h][c]))
                          : K == ACC_F32 ? _mm256_fmadd_ps(vt[c], w, a[h][c])
                                         : _mm256_add_ps(a[h][c], _mm256_mul_ps(vt[c], w));
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            if (K == ACC_F16)
                _mm_storeu_si128((__m128i *)(void *)(acc16 + h * d + e + 8 * c),
                                 _mm256_cvtps_ph(a[h][c], TO_F16));
            else
                _mm256_storeu_ps(acc32 + h * d + e + 8 * c, a[h][c]);
        }
}

/* Elements e.. of every head, one at a time, as the scalar loops (and
 * bg_vec_*_f16_avx2's tails) compute them. */
static AVX2 void accumulate_tail(acc_kind K, int64_t d, int64_t e, void *acc, int nh,
                                 const acc_args *x)
{
    for (int t = 0; t < x->nt; t++) {
        const uint8_t *row = x->v + t * x->v_stride;
        for (int h = 0; h < nh; h++)
            for (int64_t i = e; i < d; i++) {
                if (K == ACC_F32) {
                    float *y = (float *)acc + h * d + i;
                    *y = __builtin_fmaf(bg_f16_to_f32(((const uint16_t *)(const void *)row)[i]),
                                        x->p[h * x->nt + t], *y);
                } else if (K == ACC_ROWS) {
                    float *y = (float *)acc + h * d + i;
                    if (x->rescale[t])
                        *y *= x->ms[t * nh + h];
                    *y += ((const float *)(const void *)row)[i] * x->vs[t * nh + h];
                } else {
                    uint16_t *y = (uint16_t *)acc + h * d + i;
                    const float w = x->vs[t * nh + h];
                    if (x->rescale[t])
                        *y = bg_f32_to_f16(bg_f16_to_f32(*y) * x->ms[t * nh + h]);
                    *y = bg_f32_to_f16(__builtin_fmaf(
                        bg_f16_to_f32(((const uint16_t *)(const void *)row)[i]), w,
                        bg_f16_to_f32(*y)));
                }
            }
    }
}

/* As many vectors a head (four, two or one) as make eight chains or
 * fewer. */
static inline AVX2 __attribute__((always_inline)) void
accumulate(acc_kind K, int64_t d, void *acc, int nh, const acc_args *x)
{
    int64_t e = 0;
    for (; nh <= 2 && e + 32 <= d; e += 32) {
        if (nh == 1)
            accumulate_x8(K, d, e, acc, 1, 4, x);
        else
            accumulate_x8(K, d, e, acc, 2, 4, x);
    }
    for (; nh <= 4 && e + 16 <= d; e += 16) {
        switch (nh) {
        case 1: accumulate_x8(K, d, e, acc, 1, 2, x); break;
        case 2: accumulate_x8(K, d, e, acc, 2, 2, x); break;
        case 3: accumulate_x8(K, d, e, acc, 3, 2, x); break;
        default: accumulate_x8(K, d, e, acc, 4, 2, x); break;
        }
    }
    for (; e + 8 <= d; e += 8) {
        switch (nh) {
#define NH_CASE(n)                                                                                 \
    case n: accumulate_x8(K, d, e, acc, n, 1, x); break;
            NH_CASE(1) NH_CASE(2) NH_CASE(3) NH_CASE(4) NH_CASE(5) NH_CASE(6) NH_CASE(7)
            NH_CASE(8)
#undef NH_CASE
        default: break;
        }
    }
    if (e < d)
        accumulate_tail(K, d, e, acc, nh, x);
}

AVX2 void bg_attn_accumulate_f16_avx2(int64_t d, uint16_t *acc, int nh, const uint16_t *v,
                                      size_t v_stride, int nt, const float *ms, const float *vs,
                                      const uint8_t *rescale)
{
    const acc_args x = {(const uint8_t *)v, v_stride, nt, ms, vs, rescale, NULL};
    accumulate(ACC_F16, d, acc, nh, &x);
}

AVX2 void bg_attn_accumulate_f32_avx2(int64_t d, float *acc, int nh, const uint16_t *v,
                                      size_t v_stride, int nt, const float *p)
{
    const acc_args x = {(const uint8_t *)v, v_stride, nt, NULL, NULL, NULL, p};
    accumulate(ACC_F32, d, acc, nh, &x);
}

AVX2 void bg_attn_accumulate_f32_rows_avx2(int64_t d, float *acc, int nh, const float *v, int nt,
                                           const float *ms, const float *vs,
                                           const uint8_t *rescale)
{
    const acc_args x = {(const uint8_t *)v, (size_t)d * sizeof *v, nt, ms, vs, rescale, NULL};
    accumulate(ACC_ROWS, d, acc, nh, &x);
}
#endif
