/* Dot kernels against llama.cpp's own: for the K-quants (the bulk of
 * Q4_K_M and Q5_K_M files) and every other weight format with a dot kernel
 * (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS), every SIMD variant
 * brigade can run here returns exactly, to the bit, what the vec_dot of
 * llama.cpp's CPU backend returns for the same quantized row and
 * activations (the vec_dot it runs token by token). A model's activations
 * are rounded to 8 bits from these sums, so a different last bit can move a
 * rounding and grow through the layers; matching bitwise is what keeps the
 * engine's logits on llama.cpp's (tests/oracle_parity.c). Decode's rows
 * dots (Q4_0, IQ4_NL) are checked against the product llama.cpp decodes
 * those types with on AVX2 processors, on weights repacked eight rows at a
 * time, which sums in another order than its vec_dot. Both the AVX2
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
#include "matmul.h"
#include "oracle.h"
#include "quant.h"

typedef const struct ggml_type_traits_cpu *(*traits_fn)(enum ggml_type);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / 16777216.0) - 0.5f;
}

/* llama.cpp's matrix-vector product on weights repacked eight rows at a
 * time (repack.cpp): what its CPU backend runs for Q4_0 and IQ4_NL
 * matrices with a multiple of 8 rows when it decodes on an AVX2 processor
 * (nr activation rows, nc weight rows, s[row] out). */
typedef void (*gemv_fn)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr,
                        int nc);

/* Eight rows of 32-element blocks (18 bytes: fp16 d, 16 bytes of nibbles)
 * laid out as that product reads them: for each block, the eight rows' d,
 * then their nibbles 8 bytes at a time (rows 0-7's first 8 bytes, then
 * their last 8), each byte XORed with `flip` (0x88 for Q4_0, whose
 * repacked nibbles are signed, 0 for IQ4_NL). */
static void repack8(const uint8_t *rows, size_t row_bytes, int64_t nb, uint8_t flip, uint8_t *out)
{
    enum { BLOCK = sizeof(bg_block_q4_0) };
    _Static_assert(sizeof(bg_block_iq4_nl) == BLOCK, "the same 18-byte blocks");
    for (int64_t b = 0; b < nb; b++, out += 8 * BLOCK) {
        for (int r = 0; r < 8; r++)
            memcpy(out + 2 * r, rows + r * row_bytes + b * BLOCK, 2);
        for (int k = 0; k < 16; k++)
            for (int i = 0; i < 8; i++)
                out[16 + 8 * k + i] =
                    rows[(k % 8) * row_bytes + b * BLOCK + 2 + (k / 8) * 8 + i] ^ flip;
    }
}

/* The types llama.cpp repacks on AVX2: their product and the XOR that
 * repack8 applies. */
static const struct {
    bg_type type;
    const char *gemv;
    uint8_t flip;
} repacked[] = {{BG_TYPE_Q4_0, "ggml_gemv_q4_0_8x8_q8_0", 0x88},
                {BG_TYPE_IQ4_NL, "ggml_gemv_iq4_nl_8x8_q8_0", 0}};

/* brigade's rows dot (decode's product for these types) against that
 * product: bitwise, for row groups and every row count (a row's result must
 * not depend on the rows beside it). */
static void check_rows(void *h, const char *variant, bool required)
{
    enum { N = 4096, ROWS = 64 };
    for (size_t c = 0; c < sizeof repacked / sizeof *repacked; c++) {
        const bg_dot_rows_fn rows = bg_kernel_dot_rows(repacked[c].type);
        const gemv_fn gemv = (gemv_fn)dlsym(h, repacked[c].gemv);
        CHECK(gemv != NULL, "%s: no %s", variant, repacked[c].gemv);
        CHECK(rows != NULL, "%s: no rows dot on this CPU", brigade_type_name(repacked[c].type));
        if (!gemv || !rows)
            continue;
        const bg_quant_ops *ops = bg_quant_ops_get(repacked[c].type);
        const bg_quant_ops *act = bg_quant_ops_get(BG_TYPE_Q8_0);
        float *x = malloc(N * sizeof *x), *theirs = malloc(ROWS * sizeof *theirs);
        uint8_t *wq = malloc((size_t)ROWS * N), *packed = malloc((size_t)ROWS * N);
        uint8_t *aq = malloc(N * 2);
        int same = 0, total = 0;
        for (int len = 0; len < 12; len++) {
            const int n = 32 * (1 + len * 11); /* 1 to 122 blocks */
            const size_t row_bytes = (size_t)n / 32 * sizeof(bg_block_q4_0);
            for (int r = 0; r < ROWS; r++) {
                const float scale = 0.01f + (float)(r % 7);
                for (int i = 0; i < n; i++)
                    x[i] = uniform() * scale;
                ops->quantize(x, wq + r * row_bytes, n);
            }
            for (int i = 0; i < n; i++)
                x[i] = uniform() * 4.0f * (1 + (i % 5 == 0));
            act->quantize_activations(x, aq, n);
            for (int g = 0; g < ROWS / 8; g++)
                repack8(wq + g * 8 * row_bytes, row_bytes, n / 32, repacked[c].flip,
                        packed + g * 8 * row_bytes);
            gemv(n, theirs, 0, packed, aq, 1, ROWS);
            for (int g = 0; g < ROWS / 8; g++) {
                const int nr = 1 + (g + len) % 8;
                float ours[8];
                rows(n, wq + g * 8 * row_bytes, row_bytes, nr, aq, ours);
                for (int r = 0; r < nr; r++, total++)
                    same += memcmp(&theirs[g * 8 + r], &ours[r], sizeof ours[r]) == 0;
            }
        }
        printf("  %-8s %-7s rows    %3d of %d rows-dot results bitwise equal to llama.cpp's "
               "repacked product\n",
               variant, brigade_type_name(repacked[c].type), same, total);
        if (required)
            CHECK(same == total, "%s: %s rows dot: %d of %d results differ from llama.cpp's",
                  variant, brigade_type_name(repacked[c].type), total - same, total);
        free(x), free(theirs), free(wq), free(packed), free(aq);
    }
}

/* brigade's matrix-vector product (bg_matmul, decode's) for Q4_0 and
 * IQ4_NL matrices against the product llama.cpp picks for the matrix: its
 * repacked one where the row count is a multiple of 8 (only those are
 * repacked), its vec_dot row by row otherwise (a DeltaNet's alpha and beta
 * of 4 rows in the tiny models, an output of 269). Bitwise, every row. */
static void check_matmul(void *h, traits_fn traits, const char *variant, bool required)
{
    static const uint64_t n_outs[] = {4, 8, 12, 32, 269, 272};
    enum { N = 512, MAX_ROWS = 272 };
    const size_t row_bytes = N / 32 * sizeof(bg_block_q4_0);
    float *x = malloc(N * sizeof *x), *w = malloc(N * sizeof *w);
    float *ours = malloc(MAX_ROWS * sizeof *ours), *theirs = malloc(MAX_ROWS * sizeof *theirs);
    uint8_t *wq = malloc(MAX_ROWS * row_bytes), *packed = malloc(MAX_ROWS * row_bytes);
    uint8_t *aq = malloc(N * 2);
    void *scratch = malloc(bg_matmul_scratch(N, 1));
    for (size_t c = 0; c < sizeof repacked / sizeof *repacked; c++) {
        const gemv_fn gemv = (gemv_fn)dlsym(h, repacked[c].gemv);
        CHECK(gemv != NULL, "%s: no %s", variant, repacked[c].gemv);
        if (!gemv)
            continue;
        const bg_quant_ops *ops = bg_quant_ops_get(repacked[c].type);
        const bg_quant_ops *act = bg_quant_ops_get(BG_TYPE_Q8_0);
        int same = 0, total = 0;
        for (size_t m = 0; m < sizeof n_outs / sizeof *n_outs; m++) {
            const uint64_t n_out = n_outs[m];
            for (uint64_t r = 0; r < n_out; r++) {
                for (int i = 0; i < N; i++)
                    w[i] = uniform() * (0.01f + (float)(r % 7));
                ops->quantize(w, wq + r * row_bytes, N);
            }
            for (int i = 0; i < N; i++)
                x[i] = uniform() * 4.0f * (1 + (i % 5 == 0));
            act->quantize_activations(x, aq, N);
            if (n_out % 8 == 0) {
                for (uint64_t g = 0; g < n_out / 8; g++)
                    repack8(wq + g * 8 * row_bytes, row_bytes, N / 32, repacked[c].flip,
                            packed + g * 8 * row_bytes);
                gemv(N, theirs, 0, packed, aq, 1, (int)n_out);
            } else {
                for (uint64_t r = 0; r < n_out; r++)
                    traits((enum ggml_type)repacked[c].type)
                        ->vec_dot(N, &theirs[r], 0, wq + r * row_bytes, 0, aq, 0, 1);
            }
            const bg_matrix mat = {wq, repacked[c].type, N, n_out, row_bytes};
            bg_matmul(NULL, &mat, x, N, ours, n_out, 1, scratch);
            for (uint64_t r = 0; r < n_out; r++, total++)
                same += memcmp(&theirs[r], &ours[r], sizeof ours[r]) == 0;
        }
        printf("  %-8s %-7s matmul  %3d of %d rows of matrices of 4-272 rows bitwise equal to "
               "the product llama.cpp picks\n",
               variant, brigade_type_name(repacked[c].type), same, total);
        if (required)
            CHECK(same == total, "%s: %s matmul: %d of %d rows differ from llama.cpp's", variant,
                  brigade_type_name(repacked[c].type), total - same, total);
    }
    free(x), free(w), free(ours), free(theirs), free(wq), free(packed), free(aq), free(scratch);
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
    check_rows(h, variant, required);
    check_matmul(h, traits, variant, required);
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
