#include "kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"

#include "quant.h"

#ifdef BG_KERNELS_X86
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* AVX2 + FMA + F16C: every x86-64 desktop since 2013. F16C is read from
 * CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports lacks it. */
static bool cpu_has_avx2(void)
{
    __builtin_cpu_init();
    unsigned eax, ebx, ecx, edx;
    bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* AVX-512 F/BW/VL/DQ with VNNI (Ice Lake, Cascade Lake and later; Zen 4):
 * the AVX-512 kernels use all of them, and AVX2 for their tails. The
 * builtins also check that the OS saves the 512-bit state (XCR0). */
static bool cpu_has_avx512(void)
{
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

/* AMX tiles with 8-bit products (Sapphire Rapids and later), on AVX-512.
 * Linux hands out the tile state only on request (ARCH_REQ_XCOMP_PERM for
 * XTILEDATA); a refusal (an old kernel, a hypervisor) means no AMX. */
static bool cpu_has_amx(void)
{
#ifdef __linux__
    unsigned eax, ebx, ecx, edx;
    if (!cpu_has_avx512() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) ||
        !(edx & (1u << 24)) || !(edx & (1u << 25)))
        return false;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return false;
#endif
}

/* The tiled products by weight type, each with the fewest activation rows
 * from which it beats the dots (one thread, a 16384 x 2048 product out of
 * memory unless said):
 *  - The AVX2 Q6_K product piles only two maddubs onto a scale (Q4_K:
 *    eight) and fills a 16-row tile however few rows there are: 131072 x
 *    2048 took 36 ms tiled against 23-28 ms as dots at 8 rows, 46 against
 *    34-43 at 12, the same at 16. Q4_K's and Q5_K's tiles win from 8
 *    (Q5_K: 7.5 against 8.5 ms), Q8_0's and IQ4_XS's too (8.4 against
 *    9.6, 7.2 against 7.7).
 *  - The types without multi-row dots pay a whole dot a row: Q4_0's tile
 *    wins from 4 (7.0 against 7.8 ms).
 *  - Q3_K's tile wins from 6 (6.0 against 6.9-7.0 ms; at 5, 5.3-5.7
 *    against 5.7-5.8), Q2_K's from 8 (4.8-5.1 against 5.1-5.3; at 7, 4.6-5.1
 *    against 4.6-4.8): their multi-row dots decode codes cheaply, the tile
 *    unpacks every super-block of a stripe into bytes. */
static const bg_gemm_kernel avx2_gemm[BG_TYPE_COUNT] = {
    [BG_TYPE_Q2_K] = {"avx2", 8, bg_avx2_packed_bytes, bg_avx2_pack_q8_K, bg_gemm_q2_K_avx2},
    [BG_TYPE_Q3_K] = {"avx2", 6, bg_avx2_packed_bytes, bg_avx2_pack_q8_K, bg_gemm_q3_K_avx2},
    [BG_TYPE_Q4_K] = {"avx2", 8, bg_avx2_packed_bytes, bg_avx2_pack_q8_K, bg_gemm_q4_K_avx2},
    [BG_TYPE_Q5_K] = {"avx2", 8, bg_avx2_packed_bytes, bg_avx2_pack_q8_K, bg_gemm_q5_K_avx2},
    [BG_TYPE_Q6_K] = {"avx2", 16, bg_avx2_packed_bytes, bg_avx2_pack_q8_K, bg_gemm_q6_K_avx2},
    [BG_TYPE_IQ4_XS] = {"avx2", 8, bg_avx2_packed_bytes, bg_avx2_pack_q8_K, bg_gemm_iq4_xs_avx2},
    [BG_TYPE_Q8_0] = {"avx2", 8, bg_avx2_packed_bytes_q8_0, bg_avx2_pack_q8_0, bg_gemm_q8_0_avx2},
    [BG_TYPE_Q4_0] = {"avx2", 4, bg_avx2_packed_bytes_q8_0, bg_avx2_pack_q8_0, bg_gemm_q4_0_avx2},
    [BG_TYPE_Q5_0] = {"avx2", 4, bg_avx2_packed_bytes_q8_0, bg_avx2_pack_q8_0, bg_gemm_q5_0_avx2},
    [BG_TYPE_IQ4_NL] = {"avx2", 4, bg_avx2_packed_bytes_q8_0, bg_avx2_pack_q8_0,
                        bg_gemm_iq4_nl_avx2},
};
static const bg_gemm_kernel amx_gemm[BG_TYPE_COUNT] = {
    [BG_TYPE_Q4_K] = {"amx", 8, bg_amx_packed_bytes, bg_amx_pack_q8_K, bg_gemm_q4_K_amx},
    [BG_TYPE_Q6_K] = {"amx", 8, bg_amx_packed_bytes, bg_amx_pack_q8_K, bg_gemm_q6_K_amx},
    [BG_TYPE_Q8_0] = {"amx", 8, bg_avx2_packed_bytes_q8_0, bg_avx2_pack_q8_0, bg_gemm_q8_0_amx},
};

/* Only where they measured faster than AVX2 (bench/kernel_speed). */
static bg_dot_fn avx512_dot(bg_type type)
{
    switch (type) {
    case BG_TYPE_Q4_K: return bg_dot_q4_K_avx512;
    case BG_TYPE_Q5_K: return bg_dot_q5_K_avx512;
    case BG_TYPE_Q6_K: return bg_dot_q6_K_avx512;
    default: return NULL;
    }
}

static bg_dot_multi_fn avx512_dot_multi(bg_type type)
{
    switch (type) {
    case BG_TYPE_Q4_K: return bg_dot_multi_q4_K_avx512;
    case BG_TYPE_Q5_K: return bg_dot_multi_q5_K_avx512;
    case BG_TYPE_Q6_K: return bg_dot_multi_q6_K_avx512;
    default: return NULL;
    }
}

static bg_dot_fn avx2_dot(bg_type type)
{
    switch (type) {
    case BG_TYPE_F32: return bg_dot_f32_avx2;
    case BG_TYPE_F16: return bg_dot_f16_avx2;
    case BG_TYPE_BF16: return bg_dot_bf16_avx2;
    case BG_TYPE_Q8_0: return bg_dot_q8_0_avx2;
    case BG_TYPE_Q4_0: return bg_dot_q4_0_avx2;
    case BG_TYPE_Q4_1: return bg_dot_q4_1_avx2;
    case BG_TYPE_Q5_0: return bg_dot_q5_0_avx2;
    case BG_TYPE_Q5_1: return bg_dot_q5_1_avx2;
    case BG_TYPE_IQ4_NL: return bg_dot_iq4_nl_avx2;
    case BG_TYPE_Q2_K: return bg_dot_q2_K_avx2;
    case BG_TYPE_Q3_K: return bg_dot_q3_K_avx2;
    case BG_TYPE_Q4_K: return bg_dot_q4_K_avx2;
    case BG_TYPE_Q5_K: return bg_dot_q5_K_avx2;
    case BG_TYPE_Q6_K: return bg_dot_q6_K_avx2;
    case BG_TYPE_IQ4_XS: return bg_dot_iq4_xs_avx2;
    default: return NULL;
    }
}
#endif

size_t bg_kernel_dot_variants(bg_type type, bg_dot_variant *out, size_t cap)
{
    size_t n = 0;
    const bg_quant_ops *ops = bg_quant_ops_get(type);
    if (!ops || !ops->dot)
        return 0;
    if (n < cap)
        out[n] = (bg_dot_variant){"scalar", ops->dot};
    n++;
#ifdef BG_KERNELS_X86
    /* scalar -> AVX2 -> AVX-512, each where the CPU and the type have it */
    const bg_dot_variant simd[] = {
        {"avx2", cpu_has_avx2() ? avx2_dot(type) : NULL},
        {"avx512", cpu_has_avx512() ? avx512_dot(type) : NULL},
    };
    for (size_t i = 0; i < sizeof simd / sizeof *simd; i++) {
        if (!simd[i].fn)
            continue;
        if (n < cap)
            out[n] = simd[i];
        n++;
    }
#endif
    return n;
}

/* The instruction set of that name, as BRIGADE_CPU_ISA and the variants
 * name them; -1 for none. */
static int isa_named(const char *name)
{
    static const char *const names[] = {"scalar", "avx2", "avx512", "amx"};
    for (int i = 0; i <= BG_ISA_AMX; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

bg_cpu_isa bg_cpu_isa_of(const char *name)
{
    const int i = isa_named(name);
    return i < 0 ? BG_ISA_AMX : (bg_cpu_isa)i;
}

bool bg_cpu_isa_cap(bg_cpu_isa *cap)
{
    const char *v = getenv("BRIGADE_CPU_ISA");
    const int i = v && *v ? isa_named(v) : BG_ISA_AMX;
    *cap = i < 0 ? BG_ISA_AMX : (bg_cpu_isa)i;
    return i >= 0;
}

static void vec_mad_f16_scalar(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = bg_f32_to_f16(fmaf(bg_f16_to_f32(x[i]), s, bg_f16_to_f32(y[i])));
}

static void vec_scale_f16_scalar(int64_t n, uint16_t *y, float s)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = bg_f32_to_f16(bg_f16_to_f32(y[i]) * s);
}

static void vec_f16_to_f32_scalar(int64_t n, float *y, const uint16_t *x)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = bg_f16_to_f32(x[i]);
}

/* The definitions in kernels.h's attention passes, one head and one
 * position at a time (below): the fallbacks of the SIMD versions. */
static void attn_scores_f16_each(int64_t d, const uint16_t *k, size_t k_stride, int nt,
                                 const float *q, int nh, float *out);
static void attn_accumulate_f16_each(int64_t d, uint16_t *acc, int nh, const uint16_t *v,
                                     size_t v_stride, int nt, const float *ms, const float *vs,
                                     const uint8_t *rescale);
static void attn_accumulate_f32_each(int64_t d, float *acc, int nh, const uint16_t *v,
                                     size_t v_stride, int nt, const float *p);
static void attn_accumulate_f32_rows_each(int64_t d, float *acc, int nh, const float *v, int nt,
                                          const float *ms, const float *vs,
                                          const uint8_t *rescale);

static bg_dot_fn chosen[BG_TYPE_COUNT];
static bg_dot_multi_fn chosen_multi[BG_TYPE_COUNT];
static bg_dot_rows_fn chosen_rows[BG_TYPE_COUNT];
static bg_quantize_fn chosen_quantize[BG_TYPE_COUNT];
static const bg_gemm_kernel *chosen_gemm[BG_TYPE_COUNT];
static struct {
    void (*mad_f16)(int64_t n, uint16_t *y, const uint16_t *x, float s);
    void (*scale_f16)(int64_t n, uint16_t *y, float s);
    void (*f16_to_f32)(int64_t n, float *y, const uint16_t *x);
    void (*attn_scores_f16)(int64_t d, const uint16_t *k, size_t k_stride, int nt, const float *q,
                            int nh, float *out);
    void (*attn_accumulate_f16)(int64_t d, uint16_t *acc, int nh, const uint16_t *v,
                                size_t v_stride, int nt, const float *ms, const float *vs,
                                const uint8_t *rescale);
    void (*attn_accumulate_f32)(int64_t d, float *acc, int nh, const uint16_t *v, size_t v_stride,
                                int nt, const float *p);
    void (*attn_accumulate_f32_rows)(int64_t d, float *acc, int nh, const float *v, int nt,
                                     const float *ms, const float *vs, const uint8_t *rescale);
} vec = {vec_mad_f16_scalar,   vec_scale_f16_scalar,     vec_f16_to_f32_scalar,
       attn_scores_f16_each, attn_accumulate_f16_each, attn_accumulate_f32_each,
       attn_accumulate_f32_rows_each};
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* The last variant listed within the cap is the fastest. */
static void choose_all(void)
{
    bg_cpu_isa cap;
    bg_cpu_isa_cap(&cap);
    for (int t = 0; t < BG_TYPE_COUNT; t++) {
        bg_dot_variant v[4];
        size_t n = bg_kernel_dot_variants((bg_type)t, v, 4);
        chosen[t] = NULL;
        for (size_t i = 0; i < n && i < 4; i++)
            if (bg_cpu_isa_of(v[i].name) <= cap)
                chosen[t] = v[i].fn;
    }
    for (int t = 0; t < BG_TYPE_COUNT; t++) {
        const bg_quant_ops *ops = bg_quant_ops_get((bg_type)t);
        chosen_quantize[t] = ops ? ops->quantize_activations : NULL;
    }
#ifdef BG_KERNELS_X86
    const bool avx2 = cap >= BG_ISA_AVX2 && cpu_has_avx2();
    const bool avx512 = cap >= BG_ISA_AVX512 && cpu_has_avx512();
    if (avx2) { /* avx512 implies it */
        chosen_quantize[BG_TYPE_Q8_K] = avx512 ? bg_quantize_q8_K_avx512 : bg_quantize_q8_K_avx2;
        chosen_quantize[BG_TYPE_Q8_0] = bg_quantize_q8_0_avx2;
        chosen_quantize[BG_TYPE_Q8_1] = bg_quantize_q8_1_avx2;
    }
    /* a multi-row dot only where it equals the chosen single one */
    if (avx512)
        for (int t = 0; t < BG_TYPE_COUNT; t++)
            if (chosen[t] && chosen[t] == avx512_dot((bg_type)t))
                chosen_multi[t] = avx512_dot_multi((bg_type)t);
    /* The AVX2 tiles were measured against the AVX2 dots: AVX-512 keeps its
     * own multi-row dots (the K-quants'); the other types' AVX2 tiles beat
     * the AVX2 dots an AVX-512 processor runs for them too (untimed on
     * AVX-512 hardware). AMX comes first where it has a product. */
    const bool amx = cap >= BG_ISA_AMX && cpu_has_amx();
    for (int t = 0; t < BG_TYPE_COUNT; t++) {
        if (avx2 && avx2_gemm[t].gemm && !(avx512 && avx512_dot_multi((bg_type)t)))
            chosen_gemm[t] = &avx2_gemm[t];
        if (amx && amx_gemm[t].gemm)
            chosen_gemm[t] = &amx_gemm[t];
    }
    if (avx2) {
        const struct {
            bg_type type;
            bg_dot_fn single;
            bg_dot_multi_fn multi;
        } avx2_multi[] = {
            {BG_TYPE_Q8_0, bg_dot_q8_0_avx2, bg_dot_multi_q8_0_avx2},
            {BG_TYPE_Q2_K, bg_dot_q2_K_avx2, bg_dot_multi_q2_K_avx2},
            {BG_TYPE_Q3_K, bg_dot_q3_K_avx2, bg_dot_multi_q3_K_avx2},
            {BG_TYPE_Q4_K, bg_dot_q4_K_avx2, bg_dot_multi_q4_K_avx2},
            {BG_TYPE_Q5_K, bg_dot_q5_K_avx2, bg_dot_multi_q5_K_avx2},
            {BG_TYPE_Q6_K, bg_dot_q6_K_avx2, bg_dot_multi_q6_K_avx2},
            {BG_TYPE_IQ4_XS, bg_dot_iq4_xs_avx2, bg_dot_multi_iq4_xs_avx2},
        };
        for (size_t i = 0; i < sizeof avx2_multi / sizeof *avx2_multi; i++)
            if (chosen[avx2_multi[i].type] == avx2_multi[i].single)
                chosen_multi[avx2_multi[i].type] = avx2_multi[i].multi;
        chosen_rows[BG_TYPE_Q4_0] = bg_dot_rows_q4_0_avx2;
        chosen_rows[BG_TYPE_IQ4_NL] = bg_dot_rows_iq4_nl_avx2;
        vec.mad_f16 = bg_vec_mad_f16_avx2;
        vec.scale_f16 = bg_vec_scale_f16_avx2;
        vec.f16_to_f32 = bg_vec_f16_to_f32_avx2;
        vec.attn_accumulate_f16 = bg_attn_accumulate_f16_avx2;
        vec.attn_accumulate_f32 = bg_attn_accumulate_f32_avx2;
        vec.attn_accumulate_f32_rows = bg_attn_accumulate_f32_rows_avx2;
        /* its scores repeat the AVX2 f32 dot's summation */
        if (chosen[BG_TYPE_F32] == bg_dot_f32_avx2)
            vec.attn_scores_f16 = bg_attn_scores_f16_avx2;
    }
#endif
}

bg_dot_multi_fn bg_kernel_dot_multi(bg_type type)
{
    if ((unsigned)type >= BG_TYPE_COUNT)
        return NULL;
    pthread_once(&chosen_once, choose_all);
    return chosen_multi[type];
}

bg_dot_rows_fn bg_kernel_dot_rows(bg_type type)
{
    if ((unsigned)type >= BG_TYPE_COUNT)
        return NULL;
    pthread_once(&chosen_once, choose_all);
    return chosen_rows[type];
}

bg_quantize_fn bg_kernel_quantize_activations(bg_type type)
{
    if ((unsigned)type >= BG_TYPE_COUNT)
        return NULL;
    pthread_once(&chosen_once, choose_all);
    return chosen_quantize[type];
}

const bg_gemm_kernel *bg_kernel_gemm(bg_type type)
{
    if ((unsigned)type >= BG_TYPE_COUNT)
        return NULL;
    pthread_once(&chosen_once, choose_all);
    return chosen_gemm[type];
}

bg_dot_fn bg_kernel_dot(bg_type type)
{
    if ((unsigned)type >= BG_TYPE_COUNT)
        return NULL;
    pthread_once(&chosen_once, choose_all);
    return chosen[type];
}

void bg_vec_mad_f16(int64_t n, uint16_t *y, const uint16_t *x, float s)
{
    pthread_once(&chosen_once, choose_all);
    vec.mad_f16(n, y, x, s);
}

void bg_vec_scale_f16(int64_t n, uint16_t *y, float s)
{
    pthread_once(&chosen_once, choose_all);
    vec.scale_f16(n, y, s);
}

void bg_vec_f16_to_f32(int64_t n, float *y, const uint16_t *x)
{
    pthread_once(&chosen_once, choose_all);
    vec.f16_to_f32(n, y, x);
}

static void attn_scores_f16_each(int64_t d, const uint16_t *k, size_t k_stride, int nt,
                                 const float *q, int nh, float *out)
{
    float row[BG_ATTN_MAX_DIM];
    for (int t = 0; t < nt; t++) {
        vec.f16_to_f32(d, row, (const uint16_t *)(const void *)((const uint8_t *)k + t * k_stride));
        for (int h = 0; h < nh; h++)
            out[h * nt + t] = chosen[BG_TYPE_F32](d, row, q + h * d);
    }
}

static void attn_accumulate_f16_each(int64_t d, uint16_t *acc, int nh, const uint16_t *v,
                                     size_t v_stride, int nt, const float *ms, const float *vs,
                                     const uint8_t *rescale)
{
    for (int t = 0; t < nt; t++) {
        const uint16_t *vt = (const uint16_t *)(const void *)((const uint8_t *)v + t * v_stride);
        for (int h = 0; h < nh; h++) {
            if (rescale[t])
                vec.scale_f16(d, acc + h * d, ms[t * nh + h]);
            vec.mad_f16(d, acc + h * d, vt, vs[t * nh + h]);
        }
    }
}

static void attn_accumulate_f32_each(int64_t d, float *acc, int nh, const uint16_t *v,
                                     size_t v_stride, int nt, const float *p)
{
    for (int t = 0; t < nt; t++) {
        const uint16_t *vt = (const uint16_t *)(const void *)((const uint8_t *)v + t * v_stride);
        for (int h = 0; h < nh; h++)
            for (int64_t i = 0; i < d; i++)
                acc[h * d + i] = fmaf(bg_f16_to_f32(vt[i]), p[h * nt + t], acc[h * d + i]);
    }
}

static void attn_accumulate_f32_rows_each(int64_t d, float *acc, int nh, const float *v, int nt,
                                          const float *ms, const float *vs,
                                          const uint8_t *rescale)
{
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < nh; h++) {
            float *a = acc + h * d;
            if (rescale[t])
                for (int64_t i = 0; i < d; i++)
                    a[i] *= ms[t * nh + h];
            for (int64_t i = 0; i < d; i++)
                a[i] += v[t * d + i] * vs[t * nh + h];
        }
}

void bg_attn_scores_f16(int64_t d, const uint16_t *k, size_t k_stride, int nt, const float *q,
                        int nh, float *out)
{
    pthread_once(&chosen_once, choose_all);
    (d % 32 == 0 ? vec.attn_scores_f16 : attn_scores_f16_each)(d, k, k_stride, nt, q, nh, out);
}

void bg_attn_accumulate_f16(int64_t d, uint16_t *acc, int nh, const uint16_t *v, size_t v_stride,
                            int nt, const float *ms, const float *vs, const uint8_t *rescale)
{
    pthread_once(&chosen_once, choose_all);
    vec.attn_accumulate_f16(d, acc, nh, v, v_stride, nt, ms, vs, rescale);
}

void bg_attn_accumulate_f32(int64_t d, float *acc, int nh, const uint16_t *v, size_t v_stride,
                            int nt, const float *p)
{
    pthread_once(&chosen_once, choose_all);
    vec.attn_accumulate_f32(d, acc, nh, v, v_stride, nt, p);
}

void bg_attn_accumulate_f32_rows(int64_t d, float *acc, int nh, const float *v, int nt,
                                 const float *ms, const float *vs, const uint8_t *rescale)
{
    pthread_once(&chosen_once, choose_all);
    vec.attn_accumulate_f32_rows(d, acc, nh, v, nt, ms, vs, rescale);
}
