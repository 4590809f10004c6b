#include "ops.h"

#include <math.h>
#include <stddef.h>

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

void bg_softmax(float *x, int64_t n, float scale)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        x[i] *= scale;
        if (x[i] > max)
            max = x[i];
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
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
            v[i] = x0 * cos_c[i] - x1 * sin_c[i];
            v[i + half] = x0 * sin_c[i] + x1 * cos_c[i];
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
