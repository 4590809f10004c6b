/* AVX2 + F16C element-wise kernels for attention's accumulators. Each
 * element gets the same operations as the scalar versions in kernels.c
 * (convert, one fused multiply-add or one multiply, round to nearest even),
 * so results are bitwise equal to them; only NaN payloads may differ. */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>

#include "fp16.h"

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
#endif
