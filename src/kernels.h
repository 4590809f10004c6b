/* Dot-product kernels: the scalar references of quant.c plus SIMD variants
 * chosen once, at first use, from what the processor supports. Every
 * variant is tested against the reference (tests/test_kernels.c). */
#ifndef BG_KERNELS_H
#define BG_KERNELS_H

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
float bg_dot_q6_K_avx2(int64_t n, const void *w, const void *a);
float bg_dot_iq4_xs_avx2(int64_t n, const void *w, const void *a);
void bg_vec_mad_f16_avx2(int64_t n, uint16_t *y, const uint16_t *x, float s);
void bg_vec_scale_f16_avx2(int64_t n, uint16_t *y, float s);
void bg_vec_f16_to_f32_avx2(int64_t n, float *y, const uint16_t *x);
void bg_dot_multi_q8_0_avx2(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                            float *out);
void bg_dot_multi_q4_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
void bg_dot_multi_q5_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
void bg_dot_multi_q6_K_avx512(int64_t n, const void *w, const void *a, size_t a_stride, int na,
                              float *out);
float bg_dot_q4_K_avx512(int64_t n, const void *w, const void *a);
float bg_dot_q5_K_avx512(int64_t n, const void *w, const void *a);
float bg_dot_q6_K_avx512(int64_t n, const void *w, const void *a);
#endif

#endif
