/* Checks brigade's tensor formats against llama.cpp's ggml (the oracle):
 *   1. the type table of types.c against ggml's type traits;
 *   2. the fp16/bf16 conversions against ggml's exported ones, exhaustively
 *      for 16 -> 32 bits and over every rounding boundary for 32 -> 16;
 *   3. for every format with kernels, on many data distributions and row
 *      shapes: quantized bytes identical to ggml's reference quantization,
 *      dequantized floats bit-identical to ggml's to_float of the same
 *      bytes, and dot() within 1e-6 * sum|w_i a_i| of a double-precision
 *      dot of the dequantized rows (see check_dot for why that bound).
 * Data comes from a fixed-seed generator, so every run sees the same
 * values. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

#include "check.h"
#include "fp16.h"
#include "quant.h"
#include "types.h"

/* Exported by libggml-base but declared only in ggml's private
 * ggml-quants.h; the block pointers are passed as void * (same ABI). Q8_K
 * is not accepted by ggml_quantize_chunk and has no to_float trait. */
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
void dequantize_row_q8_K(const void *x, float *y, int64_t k);

/* ------------------------------------------------------------------------
 * Deterministic random numbers: splitmix64, Box-Muller
 * ------------------------------------------------------------------------ */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1): never 0, so logs and divisions are safe */
static double rng_unit(rng *r)
{
    return ((double)(rng_next(r) >> 11) + 0.5) * 0x1.0p-53;
}

static double rng_gauss(rng *r)
{
    return sqrt(-2.0 * log(rng_unit(r))) * cos(2.0 * M_PI * rng_unit(r));
}

/* ------------------------------------------------------------------------
 * 1. Type table
 * ------------------------------------------------------------------------ */

static void check_type_table(void)
{
    CHECK((int)BG_TYPE_COUNT == (int)GGML_TYPE_COUNT, "BG_TYPE_COUNT %d != GGML_TYPE_COUNT %d",
          BG_TYPE_COUNT, GGML_TYPE_COUNT);
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const struct ggml_type_traits *g = ggml_get_type_traits((enum ggml_type)t);
        const bg_type_info *b = bg_type_get((uint32_t)t);
        if (g->blck_size == 0) { /* retired or never assigned in ggml */
            CHECK(b == NULL, "type %d is retired in ggml but types.c has %s", t,
                  b ? b->name : "");
            continue;
        }
        CHECK(b != NULL, "type %d (%s) missing from types.c", t, g->type_name);
        if (!b)
            continue;
        CHECK(strcmp(b->name, g->type_name) == 0, "type %d: name %s, ggml %s", t, b->name,
              g->type_name);
        CHECK(b->block_elems == (uint64_t)g->blck_size && b->block_bytes == g->type_size,
              "type %d (%s): block %u elems/%u bytes, ggml %lld/%zu", t, b->name,
              b->block_elems, b->block_bytes, (long long)g->blck_size, g->type_size);
    }
    CHECK(bg_type_get(GGML_TYPE_COUNT) == NULL, "bg_type_get accepts id %d", GGML_TYPE_COUNT);
}

/* ------------------------------------------------------------------------
 * 2. fp16 / bf16 conversions
 * ------------------------------------------------------------------------ */

/* Tallies mismatches of one conversion sweep; reports the first. */
typedef struct sweep {
    const char *what;
    uint64_t tried, failed;
    uint32_t first_in, first_got, first_want;
} sweep;

static void sweep_note(sweep *s, uint32_t in, uint32_t got, uint32_t want)
{
    s->tried++;
    if (got != want && s->failed++ == 0) {
        s->first_in = in;
        s->first_got = got;
        s->first_want = want;
    }
}

static void sweep_check(const sweep *s)
{
    CHECK(s->failed == 0 && s->tried > 0,
          "%s: %llu of %llu differ, first input 0x%08x -> 0x%08x, ggml 0x%08x", s->what,
          (unsigned long long)s->failed, (unsigned long long)s->tried, s->first_in,
          s->first_got, s->first_want);
}

static void f32_to_f16_note(sweep *s, uint32_t bits)
{
    const float f = bg_f32_from_bits(bits);
    sweep_note(s, bits, bg_f32_to_f16(f), ggml_fp32_to_fp16(f));
}

static void f32_to_bf16_note(sweep *s, uint32_t bits)
{
    const float f = bg_f32_from_bits(bits);
    sweep_note(s, bits, bg_f32_to_bf16(f), ggml_fp32_to_bf16(f).bits);
}

static void check_f16_to_f32(void)
{
    sweep s = {.what = "f16->f32, all 65536 patterns"};
    sweep b = {.what = "bf16->f32, all 65536 patterns"};
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        sweep_note(&s, h, bg_f32_bits(bg_f16_to_f32((uint16_t)h)),
                   bg_f32_bits(ggml_fp16_to_fp32((ggml_fp16_t)h)));
        ggml_bf16_t gb = {(uint16_t)h};
        sweep_note(&b, h, bg_f32_bits(bg_bf16_to_f32((uint16_t)h)),
                   bg_f32_bits(ggml_bf16_to_fp32(gb)));
    }
    sweep_check(&s);
    sweep_check(&b);
}

/* Narrowing rounds on the low 13 (f16) or 16 (bf16) bits: sweeping every
 * value of the high bits with low bits at and around the rounding points
 * covers every normal-range tie, carry and overflow; the f16 subnormal
 * range, which rounds at other bit positions, is swept exhaustively. */
static void check_f32_to_16(void)
{
    static const uint32_t low13[] = {0, 1, 0x7FF, 0x800, 0xFFF, 0x1000, 0x1001, 0x1FFF};
    static const uint32_t low16[] = {0, 1, 0x3FFF, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF};
    rng r = {12345};

    sweep s = {.what = "f32->f16, all high bits x rounding points"};
    for (uint32_t hi = 0; hi < (1u << 19); hi++) {
        for (size_t k = 0; k < sizeof low13 / sizeof low13[0]; k++)
            f32_to_f16_note(&s, hi << 13 | low13[k]);
        f32_to_f16_note(&s, hi << 13 | (uint32_t)(rng_next(&r) & 0x1FFF));
    }
    sweep_check(&s);

    sweep sub = {.what = "f32->f16, every f32 with exponent field 100..114, both signs"};
    for (uint32_t bits = 100u << 23; bits < 115u << 23; bits++) {
        f32_to_f16_note(&sub, bits);
        f32_to_f16_note(&sub, bits | 0x80000000u);
    }
    sweep_check(&sub);

    sweep b = {.what = "f32->bf16, all high bits x rounding points"};
    for (uint32_t hi = 0; hi < (1u << 16); hi++) {
        for (size_t k = 0; k < sizeof low16 / sizeof low16[0]; k++)
            f32_to_bf16_note(&b, hi << 16 | low16[k]);
        f32_to_bf16_note(&b, hi << 16 | (uint32_t)(rng_next(&r) & 0xFFFF));
    }
    sweep_check(&b);

    sweep st = {.what = "f32->f16/bf16, every 4099th f32 pattern"};
    for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
        f32_to_f16_note(&st, (uint32_t)bits);
        f32_to_bf16_note(&st, (uint32_t)bits);
    }
    sweep_check(&st);

    /* Named edge cases, so a failure says which rule broke. */
    static const struct {
        const char *name;
        float value;
    } edges[] = {
        {"+0", 0.0f}, {"-0", -0.0f}, {"1", 1.0f}, {"-1", -1.0f},
        {"65504 (largest half)", 65504.0f}, {"65519.996", 65519.996f},
        {"65520 (ties to Inf)", 65520.0f}, {"-65520", -65520.0f}, {"65536", 65536.0f},
        {"FLT_MAX", FLT_MAX}, {"-FLT_MAX", -FLT_MAX}, {"+Inf", INFINITY}, {"-Inf", -INFINITY},
        {"2^-14 (smallest normal half)", 0x1p-14f}, {"2^-14 - ulp", 0x1.fffffep-15f},
        {"2^-24 (smallest subnormal)", 0x1p-24f}, {"2^-25 (ties to 0)", 0x1p-25f},
        {"2^-25 + ulp", 0x1.000002p-25f}, {"3 * 2^-25 (ties to even 2)", 0x1.8p-24f},
        {"2^-26", 0x1p-26f}, {"FLT_MIN", FLT_MIN}, {"smallest f32 subnormal", 0x1p-149f},
        {"1 + 2^-11 (tie, even down)", 1.00048828125f},
        {"1 + 3 * 2^-11 (tie, odd up)", 1.00146484375f},
    };
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++) {
        const float v = edges[k].value;
        CHECK(bg_f32_to_f16(v) == ggml_fp32_to_fp16(v), "f32->f16 %s: 0x%04x, ggml 0x%04x",
              edges[k].name, bg_f32_to_f16(v), ggml_fp32_to_fp16(v));
        CHECK(bg_f32_to_bf16(v) == ggml_fp32_to_bf16(v).bits,
              "f32->bf16 %s: 0x%04x, ggml 0x%04x", edges[k].name, bg_f32_to_bf16(v),
              ggml_fp32_to_bf16(v).bits);
    }
    static const uint32_t nans[] = {0x7F800001u, 0x7FBFFFFFu, 0x7FC00000u, 0x7FFFFFFFu,
                                    0xFF800001u, 0xFFC00001u, 0xFFFFFFFFu, 0x7F802000u};
    for (size_t k = 0; k < sizeof nans / sizeof nans[0]; k++) {
        const float v = bg_f32_from_bits(nans[k]);
        CHECK(bg_f32_to_f16(v) == ggml_fp32_to_fp16(v), "f32->f16 NaN 0x%08x: 0x%04x, ggml 0x%04x",
              nans[k], bg_f32_to_f16(v), ggml_fp32_to_fp16(v));
        CHECK(bg_f32_to_bf16(v) == ggml_fp32_to_bf16(v).bits,
              "f32->bf16 NaN 0x%08x: 0x%04x, ggml 0x%04x", nans[k], bg_f32_to_bf16(v),
              ggml_fp32_to_bf16(v).bits);
    }
}

/* ------------------------------------------------------------------------
 * 3. Formats
 * ------------------------------------------------------------------------ */

typedef struct format_case {
    bg_type type;
    bg_type dot_type; /* expected: ggml's vec_dot_type */
    size_t struct_bytes; /* sizeof brigade's block struct */
} format_case;

static const format_case formats[] = {
    {BG_TYPE_F32, BG_TYPE_F32, sizeof(float)},
    {BG_TYPE_F16, BG_TYPE_F16, sizeof(uint16_t)},
    {BG_TYPE_BF16, BG_TYPE_BF16, sizeof(uint16_t)},
    {BG_TYPE_Q4_0, BG_TYPE_Q8_0, sizeof(bg_block_q4_0)},
    {BG_TYPE_Q4_1, BG_TYPE_Q8_1, sizeof(bg_block_q4_1)},
    {BG_TYPE_Q5_0, BG_TYPE_Q8_0, sizeof(bg_block_q5_0)},
    {BG_TYPE_Q5_1, BG_TYPE_Q8_1, sizeof(bg_block_q5_1)},
    {BG_TYPE_Q8_0, BG_TYPE_Q8_0, sizeof(bg_block_q8_0)},
    {BG_TYPE_Q8_1, BG_TYPE_Q8_1, sizeof(bg_block_q8_1)},
    {BG_TYPE_Q2_K, BG_TYPE_Q8_K, sizeof(bg_block_q2_K)},
    {BG_TYPE_Q3_K, BG_TYPE_Q8_K, sizeof(bg_block_q3_K)},
    {BG_TYPE_Q4_K, BG_TYPE_Q8_K, sizeof(bg_block_q4_K)},
    {BG_TYPE_Q5_K, BG_TYPE_Q8_K, sizeof(bg_block_q5_K)},
    {BG_TYPE_Q6_K, BG_TYPE_Q8_K, sizeof(bg_block_q6_K)},
    {BG_TYPE_Q8_K, BG_TYPE_Q8_K, sizeof(bg_block_q8_K)},
    {BG_TYPE_IQ4_NL, BG_TYPE_Q8_0, sizeof(bg_block_iq4_nl)},
    {BG_TYPE_IQ4_XS, BG_TYPE_Q8_K, sizeof(bg_block_iq4_xs)},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

static const char *type_name(bg_type t)
{
    const bg_type_info *info = bg_type_get(t);
    return info ? info->name : "?";
}

static void check_ops_table(void)
{
    for (size_t k = 0; k < N_FORMATS; k++) {
        const format_case *f = &formats[k];
        const bg_quant_ops *ops = bg_quant_ops_get(f->type);
        const bg_type_info *info = bg_type_get(f->type);
        CHECK(ops && ops->type == f->type && ops->dot_type == f->dot_type && ops->dequantize &&
                  ops->quantize,
              "%s: ops missing or wrong type/dot_type", type_name(f->type));
        CHECK(info && info->block_bytes == f->struct_bytes, "%s: struct is %zu bytes, table %u",
              type_name(f->type), f->struct_bytes, info ? info->block_bytes : 0);
        const bool want_dot = f->type != BG_TYPE_Q8_1 && f->type != BG_TYPE_Q8_K;
        CHECK(ops && (ops->dot != NULL) == want_dot, "%s: dot should %sbe NULL",
              type_name(f->type), want_dot ? "not " : "");
    }
    CHECK(bg_quant_ops_get(BG_TYPE_IQ2_XXS) == NULL, "iq2_xxs has no kernels yet but ops exist");
    CHECK(bg_quant_ops_get(BG_TYPE_COUNT) == NULL, "ops for an out-of-range id");
    CHECK(bg_quant_ops_get(4) == NULL, "ops for retired id 4");
}

/* ---- data distributions ---- */

typedef enum dist {
    DIST_GAUSS, DIST_UNIFORM, DIST_STUDENT_T, DIST_CAUCHY, DIST_SPARSE, DIST_ZERO,
    DIST_CONSTANT, DIST_TINY, DIST_LARGE, DIST_OUTLIER, DIST_MULTISCALE, DIST_GRID,
    DIST_SHIFTED, DIST_COUNT
} dist;

static const char *const dist_names[DIST_COUNT] = {
    "gaussian", "uniform", "student-t(3)", "cauchy(clipped 1e4)", "sparse+outliers",
    "all-zero", "constant blocks", "tiny (1e-8)", "large (1e4)", "single huge outlier",
    "per-group scales 1e-4..1e2", "quarter-integer grid", "shifted (mean 3, mostly > 0)",
};

/* Fills nrows rows of n values. Magnitudes stay well inside fp16 range
 * (< 65504) so the fp16 scales and mins stay finite: the dot check needs
 * finite rows. */
static void fill(dist d, rng *r, float *x, int64_t nrows, int64_t n)
{
    const int64_t total = nrows * n;
    double group_scale = 1;
    for (int64_t i = 0; i < total; i++) {
        double v = 0;
        switch (d) {
        case DIST_GAUSS: v = rng_gauss(r); break;
        case DIST_UNIFORM: v = 2 * rng_unit(r) - 1; break;
        case DIST_STUDENT_T: {
            double chi2 = 0;
            for (int k = 0; k < 3; k++) {
                double z = rng_gauss(r);
                chi2 += z * z;
            }
            v = rng_gauss(r) / sqrt(chi2 / 3);
        } break;
        case DIST_CAUCHY: v = fmax(-1e4, fmin(1e4, tan(M_PI * (rng_unit(r) - 0.5)))); break;
        case DIST_SPARSE: {
            double u = rng_unit(r);
            v = u < 0.95 ? 0 : u < 0.99 ? rng_gauss(r) : 50 * rng_gauss(r);
        } break;
        case DIST_ZERO: v = 0; break;
        case DIST_CONSTANT: /* one value per 32, sign varying */
            if (i % 32 == 0)
                v = (rng_unit(r) < 0.5 ? -1 : 1) * (0.01 + 10 * rng_unit(r));
            else
                v = x[i - 1];
            break;
        case DIST_TINY: v = 1e-8 * rng_gauss(r); break;
        case DIST_LARGE: v = 1e4 * rng_gauss(r); break;
        case DIST_OUTLIER: v = rng_gauss(r); break;
        case DIST_MULTISCALE:
            if (i % 32 == 0)
                group_scale = pow(10, -4 + 6 * rng_unit(r));
            v = group_scale * rng_gauss(r);
            break;
        case DIST_GRID: v = 0.25 * (double)((int)(rng_next(r) % 33) - 16); break;
        case DIST_SHIFTED: v = 3 + rng_gauss(r); break;
        case DIST_COUNT: break;
        }
        x[i] = (float)v;
    }
    if (d == DIST_OUTLIER)
        for (int64_t row = 0; row < nrows; row++)
            x[row * n + (int64_t)(rng_next(r) % (uint64_t)n)] = rng_unit(r) < 0.5 ? -3e3f : 3e3f;
}

/* ---- the oracle's side ---- */

static void oracle_quantize(bg_type t, const float *x, void *dst, int64_t nrows, int64_t n)
{
    if (t == BG_TYPE_Q8_1)
        ggml_get_type_traits(GGML_TYPE_Q8_1)->from_float_ref(x, dst, nrows * n);
    else if (t == BG_TYPE_Q8_K)
        quantize_row_q8_K_ref(x, dst, nrows * n);
    else
        ggml_quantize_chunk((enum ggml_type)t, x, dst, 0, nrows, n, NULL);
}

/* ggml has no to_float for F32 (the bytes are the values) or Q8_1 (its d
 * and qs read as Q8_0 give the same values), and Q8_K's is unlisted. */
static void oracle_dequantize(bg_type t, const void *src, float *dst, int64_t n)
{
    if (t == BG_TYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == BG_TYPE_Q8_1) {
        const bg_block_q8_1 *b1 = src;
        bg_block_q8_0 *b0 = malloc((size_t)(n / BG_QK) * sizeof *b0);
        for (int64_t b = 0; b < n / BG_QK; b++) {
            b0[b].d = b1[b].d;
            memcpy(b0[b].qs, b1[b].qs, BG_QK);
        }
        ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(b0, dst, n);
        free(b0);
    } else if (t == BG_TYPE_Q8_K) {
        dequantize_row_q8_K(src, dst, n);
    } else {
        ggml_get_type_traits((enum ggml_type)t)->to_float(src, dst, n);
    }
}

/* ---- comparisons ---- */

typedef struct scenario {
    const char *type, *dist;
    int64_t nrows, n;
} scenario;

#define SCN_FMT "%s, %s, %lld x %lld"
#define SCN_ARGS(s) (s)->type, (s)->dist, (long long)(s)->nrows, (long long)(s)->n

static void check_bytes(const scenario *s, const uint8_t *got, const uint8_t *want, size_t len,
                        size_t block_bytes)
{
    size_t i = 0;
    while (i < len && got[i] == want[i])
        i++;
    CHECK(i == len, "quantize " SCN_FMT ": byte %zu (block %zu, offset %zu) is 0x%02x, ggml 0x%02x",
          SCN_ARGS(s), i, i / block_bytes, i % block_bytes, i < len ? got[i] : 0,
          i < len ? want[i] : 0);
}

/* Bitwise, except that any NaN matches any NaN: with NaN in two operands
 * the payload that survives depends on the compiler's operand order. */
static bool same_float(float a, float b)
{
    return bg_f32_bits(a) == bg_f32_bits(b) || (isnan(a) && isnan(b));
}

static void check_floats(const char *what, const scenario *s, const float *got,
                         const float *want, int64_t n)
{
    int64_t i = 0;
    while (i < n && same_float(got[i], want[i]))
        i++;
    CHECK(i == n, "%s " SCN_FMT ": element %lld is %.9g (0x%08x), ggml %.9g (0x%08x)", what,
          SCN_ARGS(s), (long long)i, i < n ? got[i] : 0.0, i < n ? bg_f32_bits(got[i]) : 0,
          i < n ? want[i] : 0.0, i < n ? bg_f32_bits(want[i]) : 0);
}

/* Worst |dot - exact| / sum|w a| seen per format, reported at the end. */
static double worst_dot_error[BG_TYPE_COUNT];

/* Tolerance: the reference sums exact integer block dots with scales in
 * double, so its only float rounding is the final one (2^-24 relative).
 * The dequantized rows it is compared against carry at most one float
 * rounding per element: in every format all products but the last are
 * exact (an fp16 scale's 11 significant bits times at most 13 bits of
 * integer scale and code fit in a float), so each element is within 2^-24
 * relative of its exact value, in both operands. Together that is under
 * 3 * 2^-24 ~ 1.8e-7 of sum|w_i a_i|; 1e-6 leaves margin yet catches a
 * single wrong code in a 4096-element row. */
static void check_dot(const scenario *s, const bg_quant_ops *ops, const void *wq,
                      const float *w, int64_t nrows, int64_t n, rng *r, dist d)
{
    const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
    const bg_type_info *wi = bg_type_get(ops->type), *ai = bg_type_get(ops->dot_type);
    float *a = malloc((size_t)(nrows * n) * sizeof *a);
    float *ad = malloc((size_t)(nrows * n) * sizeof *ad);
    uint8_t *aq = malloc((size_t)(nrows * n / ai->block_elems) * ai->block_bytes);
    fill(d, r, a, nrows, n);
    aops->quantize(a, aq, nrows * n);
    aops->dequantize(aq, ad, nrows * n);

    const size_t wrow = (size_t)(n / wi->block_elems) * wi->block_bytes;
    const size_t arow = (size_t)(n / ai->block_elems) * ai->block_bytes;
    double worst = 0;
    int64_t worst_row = 0;
    float worst_got = 0;
    double worst_want = 0, worst_mag = 0;
    for (int64_t row = 0; row < nrows; row++) {
        double exact = 0, mag = 0, slack = 0;
        for (int64_t i = row * n; i < (row + 1) * n; i++) {
            exact += (double)w[i] * ad[i];
            mag += fabs((double)w[i] * ad[i]);
        }
        /* Against Q8_1 the min term uses s, d * sum(codes) rounded to fp16
         * (2^-11 relative, or one subnormal step, 2^-24), times the block's
         * min m, |m| <= max|w|. Where s overflows fp16, ggml's result is
         * not finite either, and neither may ours be. */
        bool s_overflows = false;
        for (int64_t b = row * n; ops->dot_type == BG_TYPE_Q8_1 && b < (row + 1) * n; b += 32) {
            double wmax = 0, asum = 0;
            for (int64_t i = b; i < b + 32; i++) {
                wmax = fmax(wmax, fabs((double)w[i]));
                asum += ad[i];
            }
            s_overflows |= fabs(asum) >= 65504.0;
            slack += 1.01 * wmax * (fabs(asum) / 2048.0 + 0x1p-24);
        }
        if (s_overflows) {
            const float got = ops->dot(n, (const uint8_t *)wq + row * wrow, aq + row * arow);
            CHECK(!isfinite(got), "dot " SCN_FMT ": row %lld: Q8_1's s overflows fp16, as in "
                  "ggml, yet the dot is finite (%g)", SCN_ARGS(s), (long long)row, got);
            continue;
        }
        mag += slack * 1e6; /* the check below allows 1e-6 of mag */
        const float got = ops->dot(n, (const uint8_t *)wq + row * wrow,
                                   aq + row * arow);
        const double err = fabs(got - exact);
        const double rel = mag > 0 ? err / mag : (err > 0 ? INFINITY : 0);
        if (rel > worst || row == 0) {
            worst = rel;
            worst_row = row;
            worst_got = got;
            worst_want = exact;
            worst_mag = mag;
        }
    }
    if (worst > worst_dot_error[ops->type])
        worst_dot_error[ops->type] = worst;
    CHECK(worst <= 1e-6, "dot " SCN_FMT ": row %lld gives %.9g, exact %.9g, error %.3g of "
          "sum|wa| %.3g", SCN_ARGS(s), (long long)worst_row, worst_got, worst_want, worst, worst_mag);
    free(a);
    free(ad);
    free(aq);
}

static void check_format_on(const format_case *f, dist d, int64_t nrows, int64_t n)
{
    const bg_quant_ops *ops = bg_quant_ops_get(f->type);
    const bg_type_info *info = bg_type_get(f->type);
    if (!ops || !info || n % info->block_elems != 0)
        return;
    const scenario s = {info->name, dist_names[d], nrows, n};
    const int64_t total = nrows * n;
    const size_t bytes = (size_t)(total / info->block_elems) * info->block_bytes;

    /* same data for every format: seeded by distribution and shape only */
    rng r = {0x5EED0000ull + (uint64_t)d * 7919 + (uint64_t)(nrows * 131 + n)};
    float *x = malloc((size_t)total * sizeof *x);
    float *got = malloc((size_t)total * sizeof *got);
    float *want = malloc((size_t)total * sizeof *want);
    uint8_t *mine = malloc(bytes), *theirs = malloc(bytes);
    fill(d, &r, x, nrows, n);

    /* ours must write every byte: start from garbage; ggml's from zero */
    memset(mine, 0xA5, bytes);
    memset(theirs, 0, bytes);
    ops->quantize(x, mine, total);
    oracle_quantize(f->type, x, theirs, nrows, n);
    check_bytes(&s, mine, theirs, bytes, info->block_bytes);

    ops->dequantize(mine, got, total);
    oracle_dequantize(f->type, mine, want, total);
    check_floats("dequantize", &s, got, want, total);

    if (ops->dot)
        check_dot(&s, ops, mine, got, nrows, n, &r, d);

    free(x);
    free(got);
    free(want);
    free(mine);
    free(theirs);
}

/* Decoding arbitrary bytes reaches codes and scale patterns quantization
 * never produces (Q6_K scale -128, every 6-bit IQ4_XS scale, NaN/Inf
 * scales...). */
static void check_dequantize_random_bytes(const format_case *f)
{
    const bg_quant_ops *ops = bg_quant_ops_get(f->type);
    const bg_type_info *info = bg_type_get(f->type);
    const int64_t blocks = 64, total = blocks * info->block_elems;
    const size_t bytes = (size_t)blocks * info->block_bytes;
    const scenario s = {info->name, "random bytes", 1, total};
    rng r = {0xB17E5ull + (uint64_t)f->type};
    uint8_t *src = malloc(bytes);
    float *got = malloc((size_t)total * sizeof *got);
    float *want = malloc((size_t)total * sizeof *want);
    for (size_t i = 0; i < bytes; i++)
        src[i] = (uint8_t)rng_next(&r);
    ops->dequantize(src, got, total);
    oracle_dequantize(f->type, src, want, total);
    check_floats("dequantize", &s, got, want, total);
    free(src);
    free(got);
    free(want);
}

static void check_formats(void)
{
    static const int64_t shapes[][2] = { /* rows, elements per row */
        {1, 32}, {2, 96}, {1, 256}, {3, 768}, {2, 4096},
    };
    for (size_t k = 0; k < N_FORMATS; k++) {
        for (int d = 0; d < DIST_COUNT; d++)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
                check_format_on(&formats[k], (dist)d, shapes[sh][0], shapes[sh][1]);
        check_dequantize_random_bytes(&formats[k]);
    }
    for (size_t k = 0; k < N_FORMATS; k++)
        if (bg_quant_ops_get(formats[k].type)->dot)
            printf("  %-7s worst |dot - exact| / sum|w a|: %.2e\n", type_name(formats[k].type),
                   worst_dot_error[formats[k].type]);
}

int main(void)
{
    check_type_table();
    check_f16_to_f32();
    check_f32_to_16();
    check_ops_table();
    check_formats();
    return check_summary("oracle_quant");
}
