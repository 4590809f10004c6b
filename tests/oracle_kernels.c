/* Dot kernels against llama.cpp's own: for the K-quants (the bulk of
 * Q4_K_M and Q5_K_M files) and every other weight format with a dot kernel
 * (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS), every SIMD variant
 * brigade can run here returns exactly, to the bit, what the vec_dot of
 * llama.cpp's CPU backend returns for the same quantized row and
 * activations (the vec_dot it runs token by token). A model's activations
 * are rounded to 8 bits from these sums, so a different last bit can move a
 * rounding and grow through the layers; matching bitwise is what keeps the
 * engine's logits on llama.cpp's (tests/oracle_parity.c). Both the AVX2
 * (haswell) and AVX-512 (icelake) builds of llama.cpp are checked, since
 * they agree on these formats. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"
#include "check.h"
#include "ggml-cpu.h"
#include "kernels.h"
#include "oracle.h"
#include "quant.h"

typedef const struct ggml_type_traits_cpu *(*traits_fn)(enum ggml_type);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / 16777216.0) - 0.5f;
}

static void check_variant(const char *variant, bool required)
{
    char lib[512];
    snprintf(lib, sizeof lib, "%s/libggml-cpu-%s.so", ORACLE_LIB_DIR, variant);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "cannot load %s: %s", lib, dlerror());
    if (!h)
        return;
    void (*init)(void) = (void (*)(void))dlsym(h, "ggml_cpu_init");
    traits_fn traits = (traits_fn)dlsym(h, "ggml_get_type_traits_cpu");
    CHECK(init && traits, "%s: no ggml_get_type_traits_cpu", variant);
    if (!init || !traits)
        return;
    init();
    static const bg_type types[] = {BG_TYPE_Q4_K, BG_TYPE_Q5_K, BG_TYPE_Q6_K, BG_TYPE_Q4_0,
                                    BG_TYPE_Q8_0, BG_TYPE_Q5_0, BG_TYPE_IQ4_NL, BG_TYPE_Q4_1,
                                    BG_TYPE_Q5_1, BG_TYPE_IQ4_XS, BG_TYPE_Q2_K, BG_TYPE_Q3_K};
    enum { N = 4096, ROWS = 300 };
    float *w = malloc(N * sizeof *w), *x = malloc(N * sizeof *x);
    uint8_t *wq = malloc(N * 2), *aq = malloc(N * 2);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const bg_quant_ops *ops = bg_quant_ops_get(types[t]);
        const bg_quant_ops *act = bg_quant_ops_get(ops->dot_type);
        bg_dot_variant vars[8];
        size_t n_vars = bg_kernel_dot_variants(types[t], vars, 8);
        for (size_t v = 1; v < n_vars; v++) { /* [0] is the scalar reference */
            int same = 0;
            for (int r = 0; r < ROWS; r++) {
                /* lengths from one super-block to sixteen, varied scales */
                int n = 256 * (1 + r % 16);
                float scale = 0.01f + (float)(r % 7);
                for (int i = 0; i < n; i++) {
                    w[i] = uniform() * scale;
                    x[i] = uniform() * 4.0f * (1 + (i % 5 == 0));
                }
                ops->quantize(w, wq, n);
                act->quantize_activations(x, aq, n);
                float theirs = 0;
                traits((enum ggml_type)types[t])->vec_dot(n, &theirs, 0, wq, 0, aq, 0, 1);
                float ours = vars[v].fn(n, wq, aq);
                same += memcmp(&theirs, &ours, sizeof ours) == 0;
            }
            printf("  %-8s %-7s %-7s %3d of %d dot products bitwise equal to llama.cpp's\n",
                   variant, brigade_type_name(types[t]), vars[v].name, same, ROWS);
            if (required)
                CHECK(same == ROWS, "%s: %s %s kernel: %d of %d dots differ from llama.cpp's",
                      variant, brigade_type_name(types[t]), vars[v].name, ROWS - same, ROWS);
        }
    }
    free(w);
    free(x);
    free(wq);
    free(aq);
    /* not dlclose'd: ggml's backend keeps thread-local state */
}

int main(void)
{
    check_variant("haswell", true);
    /* llama.cpp's AVX-512 build runs only where the CPU has what it was
     * built for (it stops on an illegal instruction elsewhere); brigade's
     * AVX-512 kernels are then not run either (bg_kernel_dot_variants
     * lists what this CPU runs), and the AVX2 ones were checked above */
    if (oracle_cpu_runs_icelake())
        check_variant("icelake", true);
    else
        printf("  icelake: not run: this CPU lacks AVX-512 (F, BW, VL, DQ, VBMI, VNNI), which "
               "llama.cpp's icelake build needs\n");
    return check_summary("oracle_kernels");
}
