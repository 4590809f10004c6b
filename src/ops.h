/* Vector operations of the forward pass, on f32, rounding as ggml's CPU
 * backend does where it matters for parity: sums of squares in double, the
 * same activation formulas, and where ggml vectorizes (its AVX-512 build,
 * the one llama.cpp loads on such CPUs) the same lane arithmetic: its
 * polynomial exp for 16 lanes at a time, its four 16-lane accumulators in
 * dot products, fused multiply-adds where its compiler fuses. Each of those
 * is computed bitwise alike on every CPU: a scalar version lane by lane
 * (fmaf), and SIMD versions chosen at first use where the CPU has them. */
#ifndef BG_OPS_H
#define BG_OPS_H

#include <stddef.h>
#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w; w may be NULL (no scale). y may be x. */
void bg_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* Each of n_rows rows of width n normalized in place with the same w. */
void bg_rmsnorm_rows(float *x, const float *w, int64_t n, int64_t n_rows, float eps);
/* x / max(||x||, ...) as llama.cpp's DeltaNet does it: rms norm with eps/n,
 * scaled by 1/sqrt(n). In place. */
void bg_l2norm(float *x, int64_t n, float eps);

/* Scalar activations with libm's expf (ggml's scalar ops and tails). */
float bg_silu(float x);
float bg_sigmoid(float x);
float bg_softplus(float x);

/* silu over a row of n as ggml's vectorized silu: the first n & ~15 values
 * with its 16-lane exp, the rest with expf. y may be x. */
void bg_silu_row(float *y, const float *x, int64_t n);
/* y = silu(gate) * up over a row of n, as ggml's swiglu (same split of
 * the row as bg_silu_row). y may be gate or up. */
void bg_swiglu_row(float *y, const float *gate, const float *up, int64_t n);

/* Dot product of n floats in ggml_vec_dot_f32's order: blocks of 64 into
 * four 16-lane fused multiply-add accumulators, summed pairwise and
 * lane-reduced as GCC's _mm512_reduce_add_ps, then the tail fused in order. */
float bg_dot_f32(const float *x, const float *y, int64_t n);
/* out[t] = bg_dot_f32(w, x + t * x_stride, n) for t < nx <= 4, the same
 * bits, w read once for all of them. */
void bg_dot_f32_multi(const float *w, const float *x, size_t x_stride, int nx, int64_t n,
                      float *out);
/* y += x * a, each element one fused multiply-add (ggml_vec_mad_f32). */
void bg_axpy(float *y, const float *x, float a, int64_t n);

/* One row of Gated DeltaNet's delta rule for one token: row *= g, then
 * d = (v - row . k) * beta, row += k d, and returns row . q; the dots and
 * the update as bg_dot_f32 and bg_axpy (the same bits), in one call so the
 * row is read from cache once per step rather than per function. */
float bg_delta_rule_row(float *row, const float *k, const float *q, float g, float v, float beta,
                        int64_t n);

/* Causal depthwise convolution (DeltaNet's) of n_ch channels over n_tok
 * tokens of one sequence, in place: x[i * x_stride + c] is token i's input
 * of channel c, replaced by its output; hist[c * (K - 1) + j] the channel's
 * last K - 1 inputs, oldest first, moved along; w[c * K + j] its weights.
 * Each output is the fused chain acc = 0, acc = fma(hist_j, w_j, acc) for
 * j < K - 1, then fma(x, w_{K-1}, acc), as ggml's loop builds it. */
void bg_conv_causal(float *x, size_t x_stride, int64_t n_tok, float *hist, const float *w,
                    int64_t K, int64_t n_ch);

/* y = exp(x - max) over n floats, returning their sum in double, as
 * ggml_vec_soft_max_f32: 16 lanes at a time with its exp, expf for the
 * tail. y may be x. */
double bg_exp_sum(float *y, const float *x, float max, int64_t n);

/* Softmax of x[0..n) scaled by `scale`, in place, as ggml's soft_max: exp
 * of 16 lanes at a time (expf for the tail), each group's lane sum added
 * to a double, then scaled by the float of 1/sum. */
void bg_softmax(float *x, int64_t n, float scale);

/* Rotary embedding, NEOX pairing (i, i + n_rot/2) over the first n_rot of
 * each head's head_dim values, for n_heads heads at position pos. */
void bg_rope_neox(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
                  float freq_base);

/* Orthonormal Walsh-Hadamard transform of each chunk of n (a power of two)
 * in x[0..len): scaled by 1/sqrt(n) first, then butterflies of growing
 * span, as ggml's CPU transform. Its own inverse. */
void bg_hadamard(float *x, int64_t len, int64_t n);

/* The implementations one CPU offers for the vectorized parts above (for
 * tests): "scalar" first, then SIMD ones. The bulk functions work on n a
 * multiple of 16 (dot: of 64); every implementation gives the same bits. */
typedef struct bg_ops_impl {
    const char *name;
    void (*silu16)(float *y, const float *x, int64_t n);
    void (*swiglu16)(float *y, const float *gate, const float *up, int64_t n);
    float (*dot64)(const float *x, const float *y, int64_t n);
    void (*axpy16)(float *y, const float *x, float a, int64_t n);
    double (*expsum16)(float *y, const float *x, float max, int64_t n); /* y = exp(x - max) */
    float (*delta64)(float *row, const float *k, const float *q, float g, float v, float beta,
                     int64_t n); /* bg_delta_rule_row; NULL: of dot64 and axpy16 */
    /* dot64 of w with nx <= 4 rows of x at once; NULL: one by one */
    void (*dot64_multi)(const float *w, const float *x, size_t x_stride, int nx, int64_t n,
                        float *out);
    /* bg_conv_causal of 16 channels, 2 <= K <= 8; NULL: the scalar one */
    void (*conv16)(float *x, size_t x_stride, int64_t n_tok, float *hist, const float *w,
                   int64_t K);
} bg_ops_impl;

int bg_ops_impls(bg_ops_impl *out, int cap);

#if defined(__x86_64__) || defined(__i386__)
#define BG_OPS_X86 1
extern const bg_ops_impl bg_ops_avx2;   /* src/ops_x86_avx2.c */
extern const bg_ops_impl bg_ops_avx512; /* src/ops_x86_avx512.c */
#endif

#endif
