#include "ops.h"

#include <math.h>
#include <string.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "kernels.h"

void bg_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

void bg_rmsnorm_rows(float *x, const float *w, int64_t n, int64_t n_rows, float eps)
{
    for (int64_t r = 0; r < n_rows; r++)
        bg_rmsnorm(x + r * n, x + r * n, w, n, eps);
}

void bg_l2norm(float *x, int64_t n, float eps)
{
    bg_rmsnorm(x, x, NULL, n, eps / (float)n);
    const float s = 1.0f / sqrtf((float)n);
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
}

float bg_silu(float x) { return x / (1.0f + expf(-x)); }
float bg_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
float bg_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* ---- ggml's vectorized float arithmetic, one lane at a time ----
 * exp(x) as ggml's AVX-512 build computes it: x = n ln2 + b with n
 * rounded to an integer by the 1.5 * 2^23 trick and ln2 split in two, a
 * degree-5 polynomial in b by fused multiply-adds, scaled by 2^n in one
 * rounding (vscalefps; ldexpf rounds once too); beyond |n| > 192 it is 0
 * or infinity. */
static float exp_lane(float x)
{
    const float shift = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, shift);
    const float n = z - shift;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float hi = fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                          fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
    const float j = fmaf(hi, u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f)
        return n <= 0.0f ? 0.0f : INFINITY;
    if (isnan(n))
        return n;
    return ldexpf(j, (int)n);
}

/* The sum of 16 lanes in the order of GCC's _mm512_reduce_add_ps: halves,
 * quarters, then pairs. */
static float reduce16(const float *a)
{
    float h[8], q[4];
    for (int l = 0; l < 8; l++)
        h[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++)
        q[l] = h[l] + h[l + 4];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

static float silu_lane(float x) { return x / (1.0f + exp_lane(0.0f - x)); }

static void silu16_scalar(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = silu_lane(x[i]);
}

static void swiglu16_scalar(float *y, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = silu_lane(gate[i]) * up[i];
}

static float dot64_scalar(const float *x, const float *y, int64_t n)
{
    float acc[4][16] = {{0}};
    for (int64_t i = 0; i < n; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++)
                acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
    for (int l = 0; l < 16; l++)
        acc[0][l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    return reduce16(acc[0]);
}

static void axpy16_scalar(float *y, const float *x, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fmaf(x[i], a, y[i]);
}

static double expsum16_scalar(float *y, const float *x, float max, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i += 16) {
        for (int l = 0; l < 16; l++)
            y[i + l] = exp_lane(x[i + l] - max);
        sum += (double)reduce16(y + i);
    }
    return sum;
}

static float delta64_scalar(float *row, const float *k, const float *q, float g, float v,
                            float beta, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        row[i] *= g;
    axpy16_scalar(row, k, (v - dot64_scalar(row, k, n)) * beta, n);
    return dot64_scalar(row, q, n);
}

/* bg_conv_causal channel by channel. */
static void conv_lanes(float *x, size_t x_stride, int64_t n_tok, float *hist, const float *w,
                       int64_t K, int64_t n_ch)
{
    for (int64_t c = 0; c < n_ch; c++) {
        float *h = hist + c * (K - 1);
        const float *wc = w + c * K;
        for (int64_t i = 0; i < n_tok; i++) {
            float *xi = x + (size_t)i * x_stride + c;
            float acc = 0;
            for (int64_t j = 0; j < K - 1; j++)
                acc = fmaf(h[j], wc[j], acc);
            acc = fmaf(*xi, wc[K - 1], acc);
            if (K > 1) {
                memmove(h, h + 1, (size_t)(K - 2) * sizeof *h);
                h[K - 2] = *xi;
            }
            *xi = acc;
        }
    }
}

static void conv16_scalar(float *x, size_t x_stride, int64_t n_tok, float *hist, const float *w,
                          int64_t K)
{
    conv_lanes(x, x_stride, n_tok, hist, w, K, 16);
}

static const bg_ops_impl ops_scalar = {"scalar",      silu16_scalar, swiglu16_scalar,
                                       dot64_scalar,  axpy16_scalar, expsum16_scalar,
                                       delta64_scalar, NULL,          conv16_scalar};

#ifdef BG_OPS_X86
static bool cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* The builtins also check that the OS saves the 512-bit state. */
static bool cpu_has_avx512(void)
{
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f");
}
#endif

int bg_ops_impls(bg_ops_impl *out, int cap)
{
    int n = 0;
    if (n < cap)
        out[n] = ops_scalar;
    n++;
#ifdef BG_OPS_X86
    /* scalar -> AVX2 -> AVX-512, each where the CPU has it */
    const bg_ops_impl *simd[] = {cpu_has_avx2() ? &bg_ops_avx2 : NULL,
                                 cpu_has_avx512() ? &bg_ops_avx512 : NULL};
    for (size_t i = 0; i < sizeof simd / sizeof *simd; i++) {
        if (!simd[i])
            continue;
        if (n < cap)
            out[n] = *simd[i];
        n++;
    }
#endif
    return n;
}

static bg_ops_impl chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* The last one listed within kernels.h's cap is the fastest. */
static void choose(void)
{
    bg_ops_impl v[4];
    int n = bg_ops_impls(v, 4);
    bg_cpu_isa cap;
    bg_cpu_isa_cap(&cap);
    chosen = v[0];
    for (int i = 1; i < n && i < 4; i++)
        if (bg_cpu_isa_of(v[i].name) <= cap)
            chosen = v[i];
}

static const bg_ops_impl *impl(void)
{
    pthread_once(&chosen_once, choose);
    return &chosen;
}

void bg_silu_row(float *y, const float *x, int64_t n)
{
    const int64_t nv = n & ~(int64_t)15;
    impl()->silu16(y, x, nv);
    for (int64_t i = nv; i < n; i++)
        y[i] = bg_silu(x[i]);
}

void bg_swiglu_row(float *y, const float *gate, const float *up, int64_t n)
{
    const int64_t nv = n & ~(int64_t)15;
    impl()->swiglu16(y, gate, up, nv);
    for (int64_t i = nv; i < n; i++)
        y[i] = bg_silu(gate[i]) * up[i];
}

float bg_dot_f32(const float *x, const float *y, int64_t n)
{
    const int64_t nv = n & ~(int64_t)63;
    float sum = impl()->dot64(x, y, nv);
    for (int64_t i = nv; i < n; i++)
        sum = fmaf(x[i], y[i], sum);
    return sum;
}

void bg_dot_f32_multi(const float *w, const float *x, size_t x_stride, int nx, int64_t n,
                      float *out)
{
    const int64_t nv = n & ~(int64_t)63;
    if (impl()->dot64_multi)
        impl()->dot64_multi(w, x, x_stride, nx, nv, out);
    else
        for (int t = 0; t < nx; t++)
            out[t] = impl()->dot64(w, x + t * x_stride, nv);
    for (int t = 0; t < nx; t++)
        for (int64_t i = nv; i < n; i++)
            out[t] = fmaf(w[i], x[t * x_stride + i], out[t]);
}

void bg_axpy(float *y, const float *x, float a, int64_t n)
{
    const int64_t nv = n & ~(int64_t)15;
    impl()->axpy16(y, x, a, nv);
    for (int64_t i = nv; i < n; i++)
        y[i] = fmaf(x[i], a, y[i]);
}

float bg_delta_rule_row(float *row, const float *k, const float *q, float g, float v, float beta,
                        int64_t n)
{
    if (n % 64 == 0 && impl()->delta64)
        return impl()->delta64(row, k, q, g, v, beta, n);
    for (int64_t i = 0; i < n; i++)
        row[i] *= g;
    bg_axpy(row, k, (v - bg_dot_f32(row, k, n)) * beta, n);
    return bg_dot_f32(row, q, n);
}

void bg_conv_causal(float *x, size_t x_stride, int64_t n_tok, float *hist, const float *w,
                    int64_t K, int64_t n_ch)
{
    int64_t c = 0;
    if (K >= 2 && K <= 8 && impl()->conv16)
        for (; c + 16 <= n_ch; c += 16)
            impl()->conv16(x + c, x_stride, n_tok, hist + c * (K - 1), w + c * K, K);
    conv_lanes(x + c, x_stride, n_tok, hist + c * (K - 1), w + c * K, K, n_ch - c);
}

double bg_exp_sum(float *y, const float *x, float max, int64_t n)
{
    const int64_t nv = n & ~(int64_t)15;
    double sum = impl()->expsum16(y, x, max, nv);
    for (int64_t i = nv; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += (double)y[i];
    }
    return sum;
}

void bg_softmax(float *x, int64_t n, float scale)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        x[i] *= scale;
        if (x[i] > max)
            max = x[i];
    }
    const double sum = bg_exp_sum(x, x, max, n);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void bg_rope_neox(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
                  float freq_base)
{
    /* theta advances by repeated multiplication, as ggml's cache does */
    const float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    float cos_c[2048], sin_c[2048]; /* n_rot <= head_dim <= 4096 (hparams.c) */
    float theta = (float)pos;
    int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half && i < 2048; i++) {
        cos_c[i] = cosf(theta);
        sin_c[i] = sinf(theta);
        theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * head_dim;
        for (int64_t i = 0; i < half; i++) {
            const float x0 = v[i], x1 = v[i + half];
            /* ggml's compiler fuses the first product of each line */
            v[i] = fmaf(x0, cos_c[i], -(x1 * sin_c[i]));
            v[i + half] = fmaf(x0, sin_c[i], x1 * cos_c[i]);
        }
    }
}

void bg_hadamard(float *x, int64_t len, int64_t n)
{
    const float scale = 1.0f / sqrtf((float)n);
    for (int64_t c = 0; c + n <= len; c += n) {
        float *v = x + c;
        for (int64_t j = 0; j < n; j++)
            v[j] *= scale;
        for (int64_t span = 1; span < n; span <<= 1)
            for (int64_t i = 0; i < n; i += 2 * span)
                for (int64_t j = i; j < i + span; j++) {
                    const float a = v[j], b = v[j + span];
                    v[j] = a + b;
                    v[j + span] = a - b;
                }
    }
}
