/* Dot-product kernels: the scalar references of quant.c plus SIMD variants
 * chosen once, at first use, from what the processor supports. Every
 * variant is tested against the reference (tests/test_kernels.c). */
#ifndef BG_KERNELS_H
#define BG_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* Dot of n weights of some type with n activations in its dot format. */
typedef float (*bg_dot_fn)(int64_t n, const void *w, const void *a);

typedef struct bg_dot_variant {
    const char *name; /* "scalar", "avx2", ... */
    bg_dot_fn fn;
} bg_dot_variant;

/* Dots of one weight row with na <= BG_DOT_MULTI activation rows, row t at
 * a + t * a_stride, into out[t]: the weight row is decoded once for all of
 * them, and each result is bitwise the type's bg_kernel_dot. */
#define BG_DOT_MULTI 4
typedef void (*bg_dot_multi_fn)(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                                float *out);

/* The fastest dot this processor runs for weights of `type`; NULL where
 * the type has no dot. */
bg_dot_fn bg_kernel_dot(bg_type type);

/* The multi-row dot for `type`, where this processor has one; NULL
 * otherwise (use bg_kernel_dot row by row). */
bg_dot_multi_fn bg_kernel_dot_multi(bg_type type);

/* Dots of nr <= BG_DOT_ROWS weight rows (row r at w + r * w_stride) with
 * one activation row, into out[r], for Q4_0 and IQ4_NL: decode's products.
 * Each row's blocks go in order into one float, acc = fma(isum, d_w * d_a,
 * acc) with isum the block's exact integer dot: the order of llama.cpp's
 * repacked matrix-vector product, which is what it runs for these types on
 * AVX2 processors (tests/oracle_kernels.c), not its vec_dot's. The rows
 * share one vector of float steps, which a single dot spends half its time
 * on. A row's result does not depend on nr or on the rows beside it. */
#define BG_DOT_ROWS 8
typedef void (*bg_dot_rows_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                               float *out);

/* The rows dot for `type` where this processor has one; NULL otherwise
 * (use bg_kernel_dot). */
bg_dot_rows_fn bg_kernel_dot_rows(bg_type type);

/* Tiled products for micro-batches (prefill): BG_GEMM_ROWS weight rows at a
 * time against activation rows packed once per product. Their integer sums
 * are exact like the dots', but the float steps are ordered differently, so
 * they agree with bg_kernel_dot to rounding, not to the bit; decode keeps
 * the dots. n_in is a multiple of BG_GEMM_COLS. */
#define BG_GEMM_ROWS 16
#define BG_GEMM_COLS 256
typedef struct bg_gemm_kernel {
    const char *name;
    /* The fewest activation rows for which it beats the dots. */
    uint32_t min_act;
    /* Bytes of packed activations for n_act rows of n_in. */
    size_t (*packed_bytes)(int64_t n_in, int64_t n_act);
    /* Packs activation rows 16 * block .. 16 * block + 15 (of n_act rows of
     * the weight type's dot format, xq_row bytes apart) into packed. */
    void (*pack)(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                 void *packed);
    /* y[t * y_stride + m] = weight row m . activation row t, for the
     * n_rows rows at w (a multiple of BG_GEMM_ROWS, w_stride bytes apart)
     * and every t < n_act. */
    void (*gemm)(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows, const void *packed,
                 int64_t n_act, float *y, size_t y_stride);
} bg_gemm_kernel;

/* The tiled product for `type` where this processor has one; NULL
 * otherwise. */
const bg_gemm_kernel *bg_kernel_gemm(bg_type type);

/* Activations of n floats into `type` as the quant ops'
 * quantize_activations does it, bitwise, SIMD where this processor has it;
 * NULL where the type has no quant ops. */
typedef void (*bg_quantize_fn)(const float *src, void *dst, int64_t n);
bg_quantize_fn bg_kernel_quantize_activations(bg_type type);

/* The widest instruction set the CPU's kernels may choose (dots, tiled
 * products, ops.h's row operations): BRIGADE_CPU_ISA names it (scalar,
 * avx2, avx512, amx; unset: all the processor has). The variants order
 * their float steps differently, so capping them gives the same products
 * in another valid summation order: gpu-check measures how far that moves
 * a model's logits, the distance a GPU's own order may also go. False
 * where BRIGADE_CPU_ISA names none of these (*cap: all, then). */
typedef enum bg_cpu_isa { BG_ISA_SCALAR, BG_ISA_AVX2, BG_ISA_AVX512, BG_ISA_AMX } bg_cpu_isa;
bool bg_cpu_isa_cap(bg_cpu_isa *cap);

/* The instruction set a variant's name ("scalar", "avx2", ...) says; a
 * name it does not know counts as the widest. */
bg_cpu_isa bg_cpu_isa_of(const char *variant_name);

/* Every variant this processor can run for `type`, the scalar reference
 * first; returns how many (at most cap are written). */
size_t bg_kernel_dot_variants(bg_type type, bg_dot_variant *out, size_t cap);

/* Element-wise kernels on rows of f16 bit patterns (attention's f16
 * accumulator, as ggml's flash attention keeps it), each element rounded to
 * nearest even once per operation; SIMD where the CPU has it, bitwise equal
 * to the scalar loops:
 *   mad:    y = f16(fma(x, s, y))
 *   scale:  y = f16(y * s)
 *   to_f32: y = x as floats */
void bg_vec_mad_f16(int64_t n, uint16_t *y, const uint16_t *x, float s);
void bg_vec_scale_f16(int64_t n, uint16_t *y, float s);
void bg_vec_f16_to_f32(int64_t n, float *y, const uint16_t *x);

/* Attention's two passes over a block of nt positions of f16 K and V rows
 * (row t at k + t * k_stride bytes, and v alike), for nh query heads
 * (1..BG_ATTN_MAX_HEADS) that share the KV head, each head_dim d long
 * (d <= BG_ATTN_MAX_DIM):
 *   scores:     out[h * nt + t] = the chosen f32 dot (bg_kernel_dot
 *               (BG_TYPE_F32)) of K row t widened to f32 with q + h * d;
 *   accumulate: for each position t in order and each head h, where
 *               rescale[t]: acc + h * d = bg_vec_scale_f16 by ms[t * nh + h],
 *               then acc + h * d = bg_vec_mad_f16 of V row t by
 *               vs[t * nh + h].
 * Bitwise equal to those definitions; SIMD where the CPU has it, sharing
 * each K and V element's load and conversion among the heads, and keeping
 * the f16 accumulators in registers across positions. */
#define BG_ATTN_MAX_HEADS 8
#define BG_ATTN_MAX_DIM 4096
void bg_attn_scores_f16(int64_t d, const uint16_t *k, size_t k_stride, int nt, const float *q,
                        int nh, float *out);
void bg_attn_accumulate_f16(int64_t d, uint16_t *acc, int nh, const uint16_t *v, size_t v_stride,
                            int nt, const float *ms, const float *vs, const uint8_t *rescale);
/* V rows already in f32 (row t at v + t * d, a quantized cache's rows
 * dequantized), accumulated in f32 as llama.cpp's one-query flash
 * attention does: for each position t in order and each head h, where
 * rescale[t], acc + h * d *= ms[t * nh + h]; then each element adds
 * v[t][i] * vs[t * nh + h], the product rounded first (no fused
 * multiply-add). */
void bg_attn_accumulate_f32_rows(int64_t d, float *acc, int nh, const float *v, int nt,
                                 const float *ms, const float *vs, const uint8_t *rescale);
/* V accumulated in f32: for each position t in order and each head h,
 * each element of acc + h * d takes fma(V row t, p[h * nt + t], itself). */
void bg_attn_accumulate_f32(int64_t d, float *acc, int nh, const uint16_t *v, size_t v_stride,
                            int nt, const float *p);

/* x86 SIMD variants (src/kernels_x86_*.c); each is compiled for its target
 * with function attributes and called only when the CPU has it. */
#if defined(__x86_64__) || defined(__i386__)
#define BG_KERNELS_X86 1
float bg_dot_f32_avx2(int64_t n, const void *w, const void *a);
float bg_dot_f16_avx2(int64_t n, const void *w, const void *a);
float bg_dot_bf16_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q8_0_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q4_0_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q4_1_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q5_0_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q5_1_avx2(int64_t n, const void *w, const void *a);
float bg_dot_iq4_nl_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q4_K_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q5_K_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q2_K_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q3_K_avx2(int64_t n, const void *w, const void *a);
float bg_dot_q6_K_avx2(int64_t n, const void *w, const void *a);
float bg_dot_iq4_xs_avx2(int64_t n, const void *w, const void *a);
void bg_vec_mad_f16_avx2(int64_t n, uint16_t *y, const uint16_t *x, float s);
void bg_vec_scale_f16_avx2(int64_t n, uint16_t *y, float s);
void bg_vec_f16_to_f32_avx2(int64_t n, float *y, const uint16_t *x);
void bg_attn_scores_f16_avx2(int64_t d, const uint16_t *k, size_t k_stride, int nt,
                             const float *q, int nh, float *out);
void bg_attn_accumulate_f16_avx2(int64_t d, uint16_t *acc, int nh, const uint16_t *v,
                                 size_t v_stride, int nt, const float *ms, const float *vs,
                                 const uint8_t *rescale);
void bg_attn_accumulate_f32_avx2(int64_t d, float *acc, int nh, const uint16_t *v,
                                 size_t v_stride, int nt, const float *p);
void bg_attn_accumulate_f32_rows_avx2(int64_t d, float *acc, int nh, const float *v, int nt,
                                      const float *ms, const float *vs, const uint8_t *rescale);
void bg_dot_rows_q4_0_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                           float *out);
void bg_dot_rows_iq4_nl_avx2(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                             float *out);
void bg_dot_multi_q8_0_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_q2_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_q3_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_q4_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_q5_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_q6_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_iq4_xs_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
void bg_dot_multi_q4_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
void bg_dot_multi_q5_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
void bg_dot_multi_q6_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
float bg_dot_q4_K_avx512(int64_t n, const void *w, const void *a);
void bg_quantize_q8_0_avx2(const float *src, void *dst, int64_t n);
void bg_quantize_q8_1_avx2(const float *src, void *dst, int64_t n);
void bg_quantize_q8_K_avx2(const float *src, void *dst, int64_t n);
void bg_quantize_q8_K_avx512(const float *src, void *dst, int64_t n);
size_t bg_avx2_packed_bytes(int64_t n_in, int64_t n_act);
void bg_avx2_pack_q8_K(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                       void *packed);
void bg_gemm_q4_K_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q5_K_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q6_K_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q2_K_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q3_K_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
size_t bg_avx2_packed_bytes_q8_0(int64_t n_in, int64_t n_act);
void bg_avx2_pack_q8_0(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                       void *packed);
void bg_gemm_q8_0_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q4_0_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q5_0_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                       const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_iq4_nl_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                         const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_iq4_xs_avx2(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                         const void *packed, int64_t n_act, float *y, size_t y_stride);
size_t bg_amx_packed_bytes(int64_t n_in, int64_t n_act);
void bg_amx_pack_q8_K(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                      void *packed);
void bg_gemm_q4_K_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q6_K_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride);
void bg_gemm_q8_0_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride);
float bg_dot_q5_K_avx512(int64_t n, const void *w, const void *a);
float bg_dot_q6_K_avx512(int64_t n, const void *w, const void *a);
#endif

#endif
