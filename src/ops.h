/* Vector operations of the forward pass, on f32, rounding as ggml's CPU
 * backend does where it matters for parity (sums of squares in double,
 * the same activation formulas). */
#ifndef BG_OPS_H
#define BG_OPS_H

#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w; w may be NULL (no scale). y may be x. */
void bg_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* Each of n_rows rows of width n normalized in place with the same w. */
void bg_rmsnorm_rows(float *x, const float *w, int64_t n, int64_t n_rows, float eps);
/* x / max(||x||, ...) as llama.cpp's DeltaNet does it: rms norm with eps/n,
 * scaled by 1/sqrt(n). In place. */
void bg_l2norm(float *x, int64_t n, float eps);

float bg_silu(float x);
float bg_sigmoid(float x);
float bg_softplus(float x);

/* Softmax of x[0..n) scaled by `scale`, in place; sums in double. */
void bg_softmax(float *x, int64_t n, float scale);

/* Rotary embedding, NEOX pairing (i, i + n_rot/2) over the first n_rot of
 * each head's head_dim values, for n_heads heads at position pos. */
void bg_rope_neox(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
                  float freq_base);

/* Orthonormal Walsh-Hadamard transform of each chunk of n (a power of two)
 * in x[0..len): scaled by 1/sqrt(n) first, then butterflies of growing
 * span, as ggml's CPU transform. Its own inverse. */
void bg_hadamard(float *x, int64_t len, int64_t n);

#endif
