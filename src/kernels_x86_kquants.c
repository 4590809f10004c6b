/* AVX2 dot products of the 256-element formats (Q4_K, Q5_K, Q6_K, IQ4_XS)
 * with Q8_K activations. (Placeholder: the scalar references until the
 * SIMD versions land.) */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include "quant.h"

float bg_dot_q4_K_avx2(int64_t n, const void *w, const void *a) { return bg_quant_ops_get(BG_TYPE_Q4_K)->dot(n, w, a); }
float bg_dot_q5_K_avx2(int64_t n, const void *w, const void *a) { return bg_quant_ops_get(BG_TYPE_Q5_K)->dot(n, w, a); }
float bg_dot_q6_K_avx2(int64_t n, const void *w, const void *a) { return bg_quant_ops_get(BG_TYPE_Q6_K)->dot(n, w, a); }
float bg_dot_iq4_xs_avx2(int64_t n, const void *w, const void *a) { return bg_quant_ops_get(BG_TYPE_IQ4_XS)->dot(n, w, a); }
#endif
