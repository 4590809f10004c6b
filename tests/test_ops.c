/* The vectorized float arithmetic of ops.c (ggml's exp, silu, swiglu,
 * f32 dot, multiply-add, softmax sums): every implementation this CPU
 * offers (scalar, AVX2, AVX-512) must give the same bits as the scalar one
 * on random rows of several scales and on edge values (zeros, infinities,
 * NaN, arguments whose exp is subnormal, overflows or underflows to 0),
 * and the scalar exp must be within a few ulps of libm's expf. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"

static uint64_t rng_state = 88172645463325252ull;

static float uniform(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}

enum { N = 4096 };

static bool same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

int main(void)
{
    static float x[N], y[N], ref[N], got[N];
    bg_ops_impl impl[4];
    int n_impl = bg_ops_impls(impl, 4);
    CHECK(n_impl >= 1 && strcmp(impl[0].name, "scalar") == 0, "the scalar version comes first");
    const float edges[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,     88.7f,  89.0f,
                           -87.3f, -88.7f,  -95.0f,   -103.9f,   -104.5f, -150.0f, 150.0f,
                           1e-30f, -1e-30f, 0.5f,     -0.5f,     20.0f,   -20.0f};
    const float scales[] = {1e-3f, 1.0f, 8.0f, 30.0f, 120.0f, 250.0f};
    for (size_t sc = 0; sc < sizeof scales / sizeof *scales; sc++) {
        for (int i = 0; i < N; i++) {
            x[i] = uniform(-scales[sc], scales[sc]);
            y[i] = uniform(-scales[sc], scales[sc]);
        }
        if (sc == 0)
            memcpy(x, edges, sizeof edges);
        for (int v = 1; v < n_impl; v++) {
            const char *name = impl[v].name;
            impl[0].silu16(ref, x, N);
            impl[v].silu16(got, x, N);
            CHECK(same_bits(ref, got, N), "%s silu differs at scale %g", name, scales[sc]);
            impl[0].swiglu16(ref, x, y, N);
            impl[v].swiglu16(got, x, y, N);
            CHECK(same_bits(ref, got, N), "%s swiglu differs at scale %g", name, scales[sc]);
            for (int64_t n = 64; n <= N; n *= 4) {
                float a = impl[0].dot64(x + 64, y, n - 64), b = impl[v].dot64(x + 64, y, n - 64);
                CHECK(same_bits(&a, &b, 1), "%s dot of %lld differs at scale %g", name,
                      (long long)n - 64, scales[sc]);
            }
            memcpy(ref, y, sizeof y);
            memcpy(got, y, sizeof y);
            impl[0].axpy16(ref, x + 16, 0.37f, N - 16);
            impl[v].axpy16(got, x + 16, 0.37f, N - 16);
            CHECK(same_bits(ref, got, N), "%s axpy differs at scale %g", name, scales[sc]);
            memcpy(ref, y, sizeof y);
            memcpy(got, y, sizeof y);
            for (int64_t n = 64; n <= 256 && impl[v].delta64; n += 64) {
                const float o0 = impl[0].delta64(ref, x, x + 512, 0.93f, 0.25f, 0.6f, n);
                const float o1 = impl[v].delta64(got, x, x + 512, 0.93f, 0.25f, 0.6f, n);
                CHECK(same_bits(ref, got, N) && same_bits(&o0, &o1, 1),
                      "%s delta rule row of %lld differs at scale %g", name, (long long)n,
                      scales[sc]);
            }
            for (int nx = 1; nx <= 4 && impl[v].dot64_multi; nx++) {
                float d[4];
                impl[v].dot64_multi(y, x + 64, 768, nx, 1024, d);
                for (int t = 0; t < nx; t++) {
                    const float r = impl[0].dot64(y, x + 64 + 768 * t, 1024);
                    CHECK(same_bits(&r, &d[t], 1), "%s dot %d of %d sharing a row differs at scale %g",
                          name, t, nx, scales[sc]);
                }
            }
            for (int64_t K = 2; K <= 8 && impl[v].conv16; K++) {
                /* 16 channels of 5 tokens, 24 floats apart; histories and
                 * weights from x and y */
                float hist0[16 * 7], hist1[16 * 7];
                memcpy(hist0, y + 100, sizeof hist0);
                memcpy(hist1, y + 100, sizeof hist1);
                memcpy(ref, x + 300, 5 * 24 * sizeof(float));
                memcpy(got, x + 300, 5 * 24 * sizeof(float));
                impl[0].conv16(ref, 24, 5, hist0, x + 1000, K);
                impl[v].conv16(got, 24, 5, hist1, x + 1000, K);
                CHECK(same_bits(ref, got, 5 * 24) && same_bits(hist0, hist1, 16 * (K - 1)),
                      "%s convolution of kernel %lld differs at scale %g", name, (long long)K,
                      scales[sc]);
            }
            double s0 = impl[0].expsum16(ref, x, 1.5f, N), s1 = impl[v].expsum16(got, x, 1.5f, N);
            CHECK(same_bits(ref, got, N) && (s0 == s1 || (isnan(s0) && isnan(s1))),
                  "%s exp differs at scale %g", name, scales[sc]);
        }
    }

    /* the polynomial exp against libm: at most 2 ulps in the normal range */
    int worst = 0;
    for (int i = 0; i < N; i++)
        x[i] = uniform(-87.0f, 88.0f);
    impl[0].expsum16(ref, x, 0.0f, N);
    for (int i = 0; i < N; i++) {
        float e = expf(x[i]);
        int32_t a, b;
        memcpy(&a, &e, 4);
        memcpy(&b, &ref[i], 4);
        int d = abs(a - b);
        if (d > worst)
            worst = d;
    }
    CHECK(worst <= 2, "exp is %d ulps from expf", worst);

    /* the row functions: vector part and expf tail */
    for (int i = 0; i < 37; i++)
        x[i] = uniform(-6.0f, 6.0f);
    bg_silu_row(got, x, 37);
    for (int i = 32; i < 37; i++)
        CHECK(got[i] == bg_silu(x[i]), "silu tail %d is libm's", i);
    for (int i = 0; i < 32; i++)
        CHECK(fabsf(got[i] - bg_silu(x[i])) <= 1e-6f * (1.0f + fabsf(x[i])), "silu %d", i);
    float p[40];
    for (int i = 0; i < 40; i++)
        p[i] = uniform(-10.0f, 10.0f);
    bg_softmax(p, 40, 0.5f);
    double total = 0;
    for (int i = 0; i < 40; i++)
        total += p[i];
    CHECK(fabs(total - 1.0) < 1e-6, "softmax sums to %.9f", total);
    float d = bg_dot_f32(x, y, 37);
    double dd = 0;
    for (int i = 0; i < 37; i++)
        dd += (double)x[i] * y[i];
    CHECK(fabs(d - dd) <= 1e-5 * (1 + fabs(dd)), "dot %g vs %g", d, dd);
    for (int v = 0; v < n_impl; v++)
        printf("  ops: %s\n", impl[v].name);
    return check_summary("test_ops");
}
