/* AVX2 dot products of the float formats and the 32-element formats
 * (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL). (Placeholder: the scalar
 * references until the SIMD versions land.) */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include "quant.h"

#define REF(name, T) \
    float bg_dot_##name##_avx2(int64_t n, const void *w, const void *a) { return bg_quant_ops_get(BG_TYPE_##T)->dot(n, w, a); }
REF(f32, F32)
REF(f16, F16)
REF(bf16, BF16)
REF(q8_0, Q8_0)
REF(q4_0, Q4_0)
REF(q4_1, Q4_1)
REF(q5_0, Q5_0)
REF(q5_1, Q5_1)
REF(iq4_nl, IQ4_NL)
#endif
