/* Every SIMD dot-product variant (AVX2, AVX-512 where the CPU has them)
 * against the scalar reference of quant.c, on random data of several
 * distributions, for many row lengths (one block to thousands, odd block
 * counts, so every unrolled loop's tail runs). Quantized weights are also
 * tried as random bytes (every code pattern: -128 in Q8_0, all scale and
 * high-bit combinations), and every variant runs once more on operands at
 * odd addresses, where it must give the same bits. The reference sums
 * exactly and rounds once; a float SIMD kernel may differ by float
 * rounding of its partial sums, so the bound is relative to sum |w_i a_i|
 * (from the dequantized operands): 2e-6, about 32 float roundings' worth. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fp16.h"
#include "kernels.h"
#include "quant.h"

static uint64_t rng_state = 88172645463325252ull;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static float gauss(void)
{
    return (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

typedef enum dist { GAUSS, UNIFORM, OUTLIERS, SMALL, BYTES, DIST_COUNT } dist;
static const char *dist_name[] = {"gauss", "uniform", "outliers", "small", "random bytes"};

/* Byte offsets of the fp16 scales in a block of the weight formats; -1
 * ends the list. Random bytes elsewhere are valid codes and 6/8-bit
 * scales; the fp16 fields get finite values near 1/64. */
static const int *half_fields(bg_type type)
{
    static const int d[] = {0, -1}, d_m[] = {0, 2, -1}, q6_K[] = {208, -1},
                     q2_K[] = {80, 82, -1}, q3_K[] = {108, -1};
    switch (type) {
    case BG_TYPE_Q8_0: case BG_TYPE_Q4_0: case BG_TYPE_Q5_0: case BG_TYPE_IQ4_NL:
    case BG_TYPE_IQ4_XS: return d;
    case BG_TYPE_Q4_1: case BG_TYPE_Q5_1: case BG_TYPE_Q4_K: case BG_TYPE_Q5_K: return d_m;
    case BG_TYPE_Q6_K: return q6_K;
    case BG_TYPE_Q2_K: return q2_K;
    case BG_TYPE_Q3_K: return q3_K;
    default: return NULL; /* float formats: random bytes would be NaN */
    }
}

static void random_blocks(uint8_t *q, size_t n_blocks, const bg_type_info *ti, const int *halves)
{
    for (size_t i = 0; i < n_blocks * ti->block_bytes; i++)
        q[i] = (uint8_t)(uniform() * 256);
    for (size_t b = 0; b < n_blocks; b++)
        for (const int *h = halves; *h >= 0; h++) {
            /* 2^-6 times 1 + a random 8-bit mantissa, sign random */
            uint16_t v = (uint16_t)(0x2400 | (uint16_t)(uniform() * 256) << 2 |
                                    (uniform() < 0.5 ? 0x8000 : 0));
            memcpy(q + b * ti->block_bytes + (size_t)*h, &v, sizeof v);
        }
}

static void fill(float *x, int64_t n, dist d)
{
    for (int64_t i = 0; i < n; i++) {
        switch (d) {
        case GAUSS: x[i] = gauss(); break;
        case UNIFORM: x[i] = (float)(uniform() * 2 - 1); break;
        case OUTLIERS: x[i] = gauss() * (uniform() < 0.01 ? 50.0f : 1.0f); break;
        case SMALL: x[i] = gauss() * 1e-3f; break;
        default: break;
        }
    }
}

static void check_type(bg_type type)
{
    const bg_quant_ops *ops = bg_quant_ops_get(type);
    const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
    bg_dot_variant v[4];
    size_t nv = bg_kernel_dot_variants(type, v, 4);
    const bg_type_info *wi = bg_type_get(type), *ai = bg_type_get(ops->dot_type);
    uint32_t blk = wi->block_elems > ai->block_elems ? wi->block_elems : ai->block_elems;
    if (blk < 32)
        blk = 32;
    static const int64_t blocks[] = {1, 2, 3, 5, 7, 8, 13, 16, 31, 64};
    double worst = 0;
    for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
        int64_t n = blocks[bi] * blk;
        float *w = malloc(n * sizeof *w), *a = malloc(n * sizeof *a);
        float *wd = malloc(n * sizeof *wd), *ad = malloc(n * sizeof *ad);
        const size_t wbytes = (size_t)(n / wi->block_elems) * wi->block_bytes;
        const size_t abytes = (size_t)(n / ai->block_elems) * ai->block_bytes;
        uint8_t *wq = malloc(wbytes), *aq = malloc(abytes);
        uint8_t *wodd = malloc(wbytes + 1), *aodd = malloc(abytes + 1);
        for (int d = 0; d < DIST_COUNT; d++) {
            if (d == BYTES && !half_fields(type))
                continue;
            fill(w, n, d == BYTES ? GAUSS : (dist)d);
            fill(a, n, (dist)((d + 1) % BYTES));
            if (d == BYTES)
                random_blocks(wq, (size_t)(n / wi->block_elems), wi, half_fields(type));
            else
                ops->quantize(w, wq, n);
            aops->quantize_activations(a, aq, n);
            memcpy(wodd + 1, wq, wbytes);
            memcpy(aodd + 1, aq, abytes);
            ops->dequantize(wq, wd, n);
            aops->dequantize(aq, ad, n);
            double mag = 0;
            for (int64_t i = 0; i < n; i++)
                mag += fabs((double)wd[i] * ad[i]);
            const float ref = v[0].fn(n, wq, aq);
            for (size_t k = 1; k < nv; k++) {
                const float got = v[k].fn(n, wq, aq);
                /* min terms (Q4_1/Q5_1 against Q8_1's s) add their own scale */
                double err = fabs((double)got - ref), rel = mag > 0 ? err / mag : err;
                if (rel > worst)
                    worst = rel;
                CHECK(rel <= 2e-6 || err <= 1e-30, "%s %s, n=%lld, %s: %.9g vs reference %.9g "
                      "(error %.2e of sum|wa| %.3g)", wi->name, v[k].name, (long long)n,
                      dist_name[d], got, ref, rel, mag);
            }
            /* loads must not assume alignment: same bits at odd addresses */
            for (size_t k = 0; k < nv; k++) {
                const float aligned = v[k].fn(n, wq, aq), odd = v[k].fn(n, wodd + 1, aodd + 1);
                CHECK(memcmp(&aligned, &odd, sizeof odd) == 0,
                      "%s %s, n=%lld, %s: %.9g at odd addresses, %.9g aligned", wi->name,
                      v[k].name, (long long)n, dist_name[d], odd, aligned);
            }
        }
        free(w), free(a), free(wd), free(ad), free(wq), free(aq), free(wodd), free(aodd);
    }
    printf("  %-7s %zu variant(s)", wi->name, nv);
    for (size_t k = 0; k < nv; k++)
        printf(" %s", v[k].name);
    printf(", worst error %.2e\n", worst);
    CHECK(bg_kernel_dot(type) == v[nv - 1].fn, "%s: the fastest variant is not the one used",
          wi->name);
}

/* The multi-row dot, where the CPU has one for the type, against the
 * single dot row by row: bitwise, for every row count, at odd addresses
 * and with a row stride that is not a multiple of the row size. */
static void check_multi(bg_type type)
{
    bg_dot_multi_fn multi = bg_kernel_dot_multi(type);
    if (!multi)
        return;
    const bg_quant_ops *ops = bg_quant_ops_get(type);
    const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
    const bg_type_info *wi = bg_type_get(type), *ai = bg_type_get(ops->dot_type);
    const bg_dot_fn dot = bg_kernel_dot(type);
    static const int64_t blocks[] = {1, 2, 3, 8, 11};
    int checked = 0;
    for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
        const int64_t n = blocks[bi] * (int64_t)wi->block_elems;
        const size_t wbytes = (size_t)(n / wi->block_elems) * wi->block_bytes;
        const size_t abytes = (size_t)(n / ai->block_elems) * ai->block_bytes;
        const size_t stride = abytes + 13;
        float *x = malloc(n * sizeof *x);
        uint8_t *wq = malloc(wbytes + 1), *aq = malloc(BG_DOT_MULTI * stride + 1);
        fill(x, n, GAUSS);
        ops->quantize(x, wq + 1, n);
        for (int t = 0; t < BG_DOT_MULTI; t++) {
            fill(x, n, (dist)(t % BYTES));
            aops->quantize_activations(x, aq + 1 + t * stride, n);
        }
        for (int na = 1; na <= BG_DOT_MULTI; na++) {
            float out[BG_DOT_MULTI];
            multi(n, wq + 1, aq + 1, stride, na, out);
            for (int t = 0; t < na; t++) {
                const float want = dot(n, wq + 1, aq + 1 + t * stride);
                CHECK(memcmp(&want, &out[t], sizeof want) == 0,
                      "%s multi-row dot, n=%lld, row %d of %d: %.9g, single dot %.9g", wi->name,
                      (long long)n, t, na, out[t], want);
                checked++;
            }
        }
        free(x), free(wq), free(aq);
    }
    printf("  %-7s multi-row dot: %d results bitwise equal to the single dot\n", wi->name, checked);
}

/* The rows dot, where the CPU has one for the type, against its definition
 * in kernels.h computed here from the blocks: each block's exact integer
 * dot (the weight codes read back through the reference dequantizer with
 * the block's scale set to 1), then acc = fma(isum, d_w * d_a, acc) block
 * after block. Bitwise, for every row count, quantized and random-byte
 * weights, odd addresses and a row stride that is not the row size. */
static void check_rows(bg_type type)
{
    bg_dot_rows_fn rows = bg_kernel_dot_rows(type);
    if (!rows)
        return;
    const bg_quant_ops *ops = bg_quant_ops_get(type);
    const bg_quant_ops *aops = bg_quant_ops_get(BG_TYPE_Q8_0);
    const bg_type_info *wi = bg_type_get(type);
    CHECK(ops->dot_type == BG_TYPE_Q8_0 && wi->block_elems == BG_QK, "%s: not a Q8_0-dot format",
          wi->name);
    static const int64_t blocks[] = {1, 2, 3, 8, 11, 64};
    enum { N_ROWS = 2 * BG_DOT_ROWS + 3 };
    int checked = 0;
    for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
        const int64_t nb = blocks[bi], n = nb * BG_QK;
        const size_t stride = (size_t)nb * wi->block_bytes + 7;
        float *x = malloc(n * sizeof *x), *codes = malloc(BG_QK * sizeof *codes);
        uint8_t *wq = malloc(N_ROWS * stride + 1), *aq = malloc((size_t)nb * sizeof(bg_block_q8_0) + 1);
        for (int r = 0; r < N_ROWS; r++) {
            uint8_t *row = wq + 1 + r * stride;
            if (r % 3 == 2) {
                random_blocks(row, (size_t)nb, wi, half_fields(type));
            } else {
                fill(x, n, (dist)(r % BYTES));
                ops->quantize(x, row, n);
            }
        }
        fill(x, n, GAUSS);
        aops->quantize_activations(x, aq + 1, n);
        for (int r0 = 0; r0 < N_ROWS; r0 += 3)
            for (int nr = 1; nr <= BG_DOT_ROWS && r0 + nr <= N_ROWS; nr++) {
                float out[BG_DOT_ROWS];
                rows(n, wq + 1 + r0 * stride, stride, nr, aq + 1, out);
                for (int r = 0; r < nr; r++) {
                    const uint8_t *row = wq + 1 + (r0 + r) * stride;
                    float want = 0;
                    for (int64_t b = 0; b < nb; b++) {
                        uint8_t block[64];
                        memcpy(block, row + b * wi->block_bytes, wi->block_bytes);
                        const uint16_t one = 0x3C00, dw = (uint16_t)(block[0] | block[1] << 8);
                        memcpy(block, &one, sizeof one);
                        ops->dequantize(block, codes, BG_QK);
                        const uint8_t *ab = aq + 1 + b * sizeof(bg_block_q8_0);
                        int32_t isum = 0;
                        for (int i = 0; i < BG_QK; i++)
                            isum += (int32_t)codes[i] * (int8_t)ab[offsetof(bg_block_q8_0, qs) + i];
                        const float da = bg_f16_to_f32((uint16_t)(ab[0] | ab[1] << 8));
                        want = fmaf((float)isum, bg_f16_to_f32(dw) * da, want);
                    }
                    CHECK(memcmp(&want, &out[r], sizeof want) == 0,
                          "%s rows dot, %lld blocks, row %d of %d from row %d: %.9g, defined "
                          "%.9g",
                          wi->name, (long long)nb, r, nr, r0, out[r], want);
                    checked++;
                }
            }
        free(x), free(codes), free(wq), free(aq);
    }
    printf("  %-7s rows dot: %d results bitwise equal to their definition\n", wi->name, checked);
}

/* The tiled product, where the CPU has one for the type, against the
 * scalar reference dot: every output within 2e-6 of sum |w a| (its float
 * steps are ordered differently), for row counts around the 16-row blocks,
 * rows that are long enough to be taken in several chunks, odd addresses
 * and strides that are not multiples of the row size; and bitwise against
 * the rows dot where the type has one. */
static void check_gemm(bg_type type)
{
    const bg_gemm_kernel *k = bg_kernel_gemm(type);
    if (!k) {
        printf("  %-7s no tiled product on this CPU\n", bg_type_get(type)->name);
        return;
    }
    const bg_quant_ops *ops = bg_quant_ops_get(type);
    const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
    const bg_type_info *wi = bg_type_get(type), *ai = bg_type_get(ops->dot_type);
    /* rows of activations: whole blocks of 16, tails of 1, 15 and 6, and
     * the 8 a batch starts tiled at */
    static const int64_t blocks[] = {1, 3, 8, 9, 17, 5};
    static const int64_t acts[] = {16, 17, 31, 48, 70, 8};
    const int64_t n_rows = 2 * BG_GEMM_ROWS;
    double worst = 0;
    int checked = 0, same_as_rows = 0;
    for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
        const int64_t n = blocks[bi] * BG_GEMM_COLS;
        const size_t wrow = (size_t)(n / wi->block_elems) * wi->block_bytes + 5;
        const size_t arow = (size_t)(n / ai->block_elems) * ai->block_bytes + 3;
        const int64_t n_act = acts[bi];
        float *x = malloc(n * sizeof *x), *wd = malloc(n_rows * n * sizeof *wd);
        float *ad = malloc(n_act * n * sizeof *ad);
        uint8_t *wq = malloc(n_rows * wrow + 1), *aq = malloc(n_act * arow + 1);
        for (int64_t r = 0; r < n_rows; r++) {
            fill(x, n, (dist)(r % BYTES));
            ops->quantize(x, wq + 1 + r * wrow, n);
            /* Q8_0 files may hold -128, which no quantizer writes: the
             * first code of each block of every third row */
            if (type == BG_TYPE_Q8_0 && r % 3 == 0)
                for (int64_t b = 0; b < n / BG_QK; b++)
                    wq[1 + r * wrow + b * sizeof(bg_block_q8_0) + offsetof(bg_block_q8_0, qs)] =
                        0x80;
            ops->dequantize(wq + 1 + r * wrow, wd + r * n, n);
        }
        for (int64_t t = 0; t < n_act; t++) {
            fill(x, n, (dist)((t + 1) % BYTES));
            aops->quantize_activations(x, aq + 1 + t * arow, n);
            aops->dequantize(aq + 1 + t * arow, ad + t * n, n);
        }
        const size_t y_stride = (size_t)n_rows + 3;
        float *y = malloc(n_act * y_stride * sizeof *y);
        void *packed = aligned_alloc(64, (k->packed_bytes(n, n_act) + 63) / 64 * 64);
        for (int64_t b = 0; b * 16 < n_act; b++)
            k->pack(n, aq + 1, arow, n_act, b, packed);
        k->gemm(n, wq + 1, wrow, n_rows, packed, n_act, y, y_stride);
        for (int64_t t = 0; t < n_act; t++)
            for (int64_t r = 0; r < n_rows; r++) {
                const double want = ops->dot(n, wq + 1 + r * wrow, aq + 1 + t * arow);
                double mag = 0;
                for (int64_t i = 0; i < n; i++)
                    mag += fabs((double)wd[r * n + i] * ad[t * n + i]);
                const double got = y[t * y_stride + r], rel = fabs(got - want) / mag;
                worst = rel > worst ? rel : worst;
                /* The tiles round a super-block's whole scaled sum and its
                 * min term once each (the dots, eighths of them in eight
                 * lanes): terms that grow with the unsigned codes' range,
                 * cancelling to the result. Seen: Q4_K 1.1e-6, Q5_K 2.1e-6;
                 * a wrong code or scale is 1e-4 and more. */
                CHECK(rel <= 4e-6, "%s %s, n=%lld, row %lld, activation %lld of %lld: %.9g vs "
                      "reference %.9g (error %.2e of sum|wa|)", wi->name, k->name, (long long)n,
                      (long long)r, (long long)t, (long long)n_act, got, want, rel);
                checked++;
            }
        /* where decode has a rows dot, the tile sums in its order: prefill
         * and decode then give the same bits */
        const bg_dot_rows_fn rows = bg_kernel_dot_rows(type);
        for (int64_t t = 0; rows && t < n_act; t++)
            for (int64_t r = 0; r < n_rows; r += BG_DOT_ROWS) {
                float out[BG_DOT_ROWS];
                rows(n, wq + 1 + r * wrow, wrow, BG_DOT_ROWS, aq + 1 + t * arow, out);
                CHECK(memcmp(out, y + t * y_stride + r, sizeof out) == 0,
                      "%s %s, n=%lld, rows %lld.., activation %lld of %lld: not the rows dot's "
                      "bits",
                      wi->name, k->name, (long long)n, (long long)r, (long long)t,
                      (long long)n_act);
                same_as_rows += BG_DOT_ROWS;
            }
        free(x), free(wd), free(ad), free(wq), free(aq), free(y), free(packed);
    }
    printf("  %-7s %s tiled product: %d results, worst error %.2e", wi->name, k->name, checked,
           worst);
    if (bg_kernel_dot_rows(type))
        printf("; %d compared bitwise with the rows dot", same_as_rows);
    printf("\n");
}

/* The tiles that pile several maddubs into s16 sums before widening them
 * (the K-quants, Q4_0, Q5_0) at the largest codes their blocks hold: every
 * code byte 0xFF (Q4_0 15, Q5_0 31, Q2_K 3 with scale and min 15, Q3_K 7
 * with scale 31, Q4_K/Q5_K 15/31 with scales and mins 63, Q6_K 63), the
 * scales d 1/64, against activations whose codes are all at the end of
 * their range (x = 1: Q8_0 127, Q8_K -128). One maddubs too many a sum
 * saturates there, where random rows never reach: the results must still
 * be the scalar reference's, to rounding. */
static void check_gemm_extremes(void)
{
    static const struct {
        bg_type type;
        int d, dmin; /* byte offsets of the fp16 scales; -1: none */
    } cases[] = {
        {BG_TYPE_Q4_0, offsetof(bg_block_q4_0, d), -1},
        {BG_TYPE_Q5_0, offsetof(bg_block_q5_0, d), -1},
        {BG_TYPE_Q2_K, offsetof(bg_block_q2_K, d), offsetof(bg_block_q2_K, dmin)},
        {BG_TYPE_Q3_K, offsetof(bg_block_q3_K, d), -1},
        {BG_TYPE_Q4_K, offsetof(bg_block_q4_K, d), offsetof(bg_block_q4_K, dmin)},
        {BG_TYPE_Q5_K, offsetof(bg_block_q5_K, d), offsetof(bg_block_q5_K, dmin)},
        {BG_TYPE_Q6_K, offsetof(bg_block_q6_K, d), -1},
    };
    enum { N = 2 * BG_GEMM_COLS, ROWS = BG_GEMM_ROWS, ACTS = 16 };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const bg_type type = cases[c].type;
        const bg_gemm_kernel *k = bg_kernel_gemm(type);
        if (!k)
            continue;
        const bg_quant_ops *ops = bg_quant_ops_get(type);
        const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
        const bg_type_info *wi = bg_type_get(type), *ai = bg_type_get(ops->dot_type);
        const size_t wrow = (size_t)(N / wi->block_elems) * wi->block_bytes;
        const size_t arow = (size_t)(N / ai->block_elems) * ai->block_bytes;
        uint8_t *wq = malloc(ROWS * wrow), *aq = malloc(ACTS * arow);
        memset(wq, 0xFF, ROWS * wrow);
        const uint16_t scale = bg_f32_to_f16(1.0f / 64);
        for (size_t b = 0; b < ROWS * wrow / wi->block_bytes; b++) {
            memcpy(wq + b * wi->block_bytes + cases[c].d, &scale, sizeof scale);
            if (cases[c].dmin >= 0)
                memcpy(wq + b * wi->block_bytes + cases[c].dmin, &scale, sizeof scale);
        }
        float *x = malloc(N * sizeof *x);
        for (int i = 0; i < N; i++)
            x[i] = 1.0f;
        for (int t = 0; t < ACTS; t++)
            aops->quantize_activations(x, aq + t * arow, N);
        float *y = malloc(ACTS * ROWS * sizeof *y);
        void *packed = aligned_alloc(64, (k->packed_bytes(N, ACTS) + 63) / 64 * 64);
        k->pack(N, aq, arow, ACTS, 0, packed);
        k->gemm(N, wq, wrow, ROWS, packed, ACTS, y, ROWS);
        int bad = 0;
        for (int t = 0; t < ACTS; t++)
            for (int r = 0; r < ROWS; r++) {
                const double want = ops->dot(N, wq + r * wrow, aq + t * arow);
                const double got = y[t * ROWS + r];
                bad += !(fabs(got - want) <= 1e-5 * fabs(want) + 1e-6);
            }
        CHECK(bad == 0, "%s %s tile at the extreme codes: %d of %d results off the reference "
              "(first: %.9g vs %.9g)", wi->name, k->name, bad, ACTS * ROWS, y[0],
              ops->dot(N, wq, aq));
        printf("  %-7s %s tiled product at the extreme codes: %d of %d results the reference's\n",
               wi->name, k->name, ACTS * ROWS - bad, ACTS * ROWS);
        free(wq), free(aq), free(x), free(y), free(packed);
    }
}

/* The f16 row kernels against the formulas, element by element. */
static void check_vec_f16(void)
{
    enum { N = 77 };
    uint16_t x[N], y[N], want[N];
    float f[N];
    for (int rep = 0; rep < 50; rep++) {
        const float s = (float)(uniform() * 4 - 2);
        for (int i = 0; i < N; i++) {
            x[i] = bg_f32_to_f16(gauss() * (rep % 5 == 0 ? 1e-5f : 3.0f));
            y[i] = bg_f32_to_f16(gauss());
            want[i] = bg_f32_to_f16(fmaf(bg_f16_to_f32(x[i]), s, bg_f16_to_f32(y[i])));
        }
        bg_vec_mad_f16(N, y, x, s);
        CHECK(memcmp(y, want, sizeof y) == 0, "bg_vec_mad_f16 differs from f16(fma(x, s, y))");
        for (int i = 0; i < N; i++)
            want[i] = bg_f32_to_f16(bg_f16_to_f32(y[i]) * s);
        bg_vec_scale_f16(N, y, s);
        CHECK(memcmp(y, want, sizeof y) == 0, "bg_vec_scale_f16 differs from f16(y * s)");
        bg_vec_f16_to_f32(N, f, y);
        for (int i = 0; i < N; i++)
            CHECK(f[i] == bg_f16_to_f32(y[i]), "bg_vec_f16_to_f32 element %d", i);
    }
}

/* Attention widens f16 K rows and queries to f32 once and dots them with
 * the f32 kernel (models/blocks.c): that must be bitwise the f16 dot, for
 * the chosen kernels and for every variant pair of one instruction set. */
static void check_f16_widened(void)
{
    enum { N = 300 };
    uint16_t k[N], q[N];
    float kf[N], qf[N];
    bg_dot_variant v16[4], v32[4];
    const size_t n16 = bg_kernel_dot_variants(BG_TYPE_F16, v16, 4);
    const size_t n32 = bg_kernel_dot_variants(BG_TYPE_F32, v32, 4);
    CHECK(n16 == n32, "f16 and f32 have the same dot variants (%zu, %zu)", n16, n32);
    const int lengths[] = {1, 7, 8, 31, 32, 33, 64, 100, 128, 256, 300};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
        for (int rep = 0; rep < 20; rep++) {
            const int n = lengths[li];
            for (int i = 0; i < n; i++) {
                k[i] = bg_f32_to_f16(gauss() * (rep % 4 == 0 ? 1e-4f : 2.0f));
                q[i] = bg_f32_to_f16(gauss());
                kf[i] = bg_f16_to_f32(k[i]), qf[i] = bg_f16_to_f32(q[i]);
            }
            const float want = bg_kernel_dot(BG_TYPE_F16)(n, k, q);
            const float got = bg_kernel_dot(BG_TYPE_F32)(n, kf, qf);
            CHECK(memcmp(&want, &got, sizeof want) == 0,
                  "n %d: the chosen f32 dot of widened f16 rows %.9g, the f16 dot %.9g", n, got, want);
            for (size_t vi = 0; vi < n16 && vi < n32 && vi < 4; vi++) {
                const float w = v16[vi].fn(n, k, q), g = v32[vi].fn(n, kf, qf);
                CHECK(strcmp(v16[vi].name, v32[vi].name) == 0 && memcmp(&w, &g, sizeof w) == 0,
                      "n %d: %s f32 dot of widened rows %.9g, %s f16 dot %.9g", n, v32[vi].name, g,
                      v16[vi].name, w);
            }
        }
}

/* Attention's block passes (kernels.h) against their definitions composed
 * from independent parts, to the bit: the scores against a scalar widening
 * and the chosen f32 dot (check_f16_widened ties that to the f16 dot), the
 * accumulation against f16(y * ms) and f16(fma(v, vs, y)) on each element
 * in order, in f32 against fmaf, and over f32 rows against a multiply then
 * an add. Rows lie apart in a wider cache row, head dims with and
 * without the SIMD kernels' multiples, every head count, accumulators that
 * overflow f16 or go subnormal. */
static void check_attn_f16(void)
{
    enum { MAX_D = 264, MAX_T = 37, STRIDE = MAX_D + 40 };
    static uint16_t k[MAX_T * STRIDE], v[MAX_T * STRIDE];
    static uint16_t acc[BG_ATTN_MAX_HEADS * MAX_D], want[BG_ATTN_MAX_HEADS * MAX_D];
    static float q[BG_ATTN_MAX_HEADS * MAX_D], row[MAX_D];
    static float ms[MAX_T * BG_ATTN_MAX_HEADS], vs[MAX_T * BG_ATTN_MAX_HEADS];
    static float got_s[BG_ATTN_MAX_HEADS * MAX_T];
    static float acc32[BG_ATTN_MAX_HEADS * MAX_D], want32[BG_ATTN_MAX_HEADS * MAX_D];
    uint8_t rescale[MAX_T];
    const int dims[] = {2, 8, 24, 32, 40, 96, 128, 256, 264};
    const int counts[] = {1, 2, 7, 32, 37};
    int cases = 0;
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++)
        for (int nh = 1; nh <= BG_ATTN_MAX_HEADS; nh++)
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
                const int d = dims[di], nt = counts[ci], rep = cases++;
                const float kscale = rep % 4 == 0 ? 1e-4f : 2.0f, vscale = rep % 3 == 0 ? 3e3f : 1.0f;
                for (int i = 0; i < MAX_T * STRIDE; i++) {
                    k[i] = bg_f32_to_f16(gauss() * kscale);
                    v[i] = bg_f32_to_f16(gauss() * vscale);
                }
                for (int i = 0; i < nh * d; i++) {
                    q[i] = bg_f16_to_f32(bg_f32_to_f16(gauss()));
                    acc[i] = want[i] = bg_f32_to_f16(gauss() * (rep % 5 == 0 ? 1e-6f : 1.0f));
                }
                for (int t = 0; t < nt; t++) {
                    rescale[t] = t == 0 || uniform() < 0.2;
                    for (int h = 0; h < nh; h++) {
                        const bool now = rescale[t] && (h == 0 || uniform() < 0.5);
                        ms[t * nh + h] = now ? (float)uniform() * (t == 0 ? 0.0f : 1.0f) : 1.0f;
                        vs[t * nh + h] = now ? 1.0f : (float)uniform();
                    }
                }
                const size_t stride = STRIDE * sizeof(uint16_t);
                bg_attn_scores_f16(d, k + 3, stride, nt, q, nh, got_s);
                for (int t = 0; t < nt; t++) {
                    for (int i = 0; i < d; i++)
                        row[i] = bg_f16_to_f32(k[3 + t * STRIDE + i]);
                    for (int h = 0; h < nh; h++) {
                        const float w = bg_kernel_dot(BG_TYPE_F32)(d, row, q + h * d);
                        CHECK(memcmp(&w, &got_s[h * nt + t], sizeof w) == 0,
                              "attention scores, d %d, %d heads, position %d of %d, head %d: "
                              "%.9g, the f32 dot %.9g", d, nh, t, nt, h, got_s[h * nt + t], w);
                    }
                }
                bg_attn_accumulate_f16(d, acc, nh, v + 5, stride, nt, ms, vs, rescale);
                for (int t = 0; t < nt; t++)
                    for (int h = 0; h < nh; h++)
                        for (int i = 0; i < d; i++) {
                            uint16_t *y = want + h * d + i;
                            if (rescale[t])
                                *y = bg_f32_to_f16(bg_f16_to_f32(*y) * ms[t * nh + h]);
                            *y = bg_f32_to_f16(fmaf(bg_f16_to_f32(v[5 + t * STRIDE + i]),
                                                    vs[t * nh + h], bg_f16_to_f32(*y)));
                        }
                CHECK(memcmp(acc, want, (size_t)nh * d * sizeof *acc) == 0,
                      "attention accumulation, d %d, %d heads, %d positions: differs from its "
                      "definition", d, nh, nt);
                /* f32 rows, rescaled where asked, the product rounded before its add */
                static float vrows[MAX_T * MAX_D];
                for (int i = 0; i < nt * d; i++)
                    vrows[i] = gauss() * vscale;
                for (int i = 0; i < nh * d; i++)
                    acc32[i] = want32[i] = gauss();
                bg_attn_accumulate_f32_rows(d, acc32, nh, vrows, nt, ms, vs, rescale);
                for (int t = 0; t < nt; t++)
                    for (int h = 0; h < nh; h++)
                        for (int i = 0; i < d; i++) {
                            float *y = want32 + h * d + i;
                            if (rescale[t])
                                *y *= ms[t * nh + h];
                            const float prod = vrows[t * d + i] * vs[t * nh + h];
                            *y += prod;
                        }
                CHECK(memcmp(acc32, want32, (size_t)nh * d * sizeof *acc32) == 0,
                      "attention accumulation of f32 rows, d %d, %d heads, %d positions: differs "
                      "from its definition", d, nh, nt);
                /* in f32: fma(v, p, acc) element by element, position by position */
                for (int i = 0; i < nh * d; i++)
                    acc32[i] = want32[i] = gauss();
                for (int i = 0; i < nh * nt; i++)
                    got_s[i] = (float)uniform() * (rep % 7 == 0 ? 1e-30f : 1.0f);
                bg_attn_accumulate_f32(d, acc32, nh, v + 5, stride, nt, got_s);
                for (int t = 0; t < nt; t++)
                    for (int h = 0; h < nh; h++)
                        for (int i = 0; i < d; i++)
                            want32[h * d + i] = fmaf(bg_f16_to_f32(v[5 + t * STRIDE + i]),
                                                     got_s[h * nt + t], want32[h * d + i]);
                CHECK(memcmp(acc32, want32, (size_t)nh * d * sizeof *acc32) == 0,
                      "attention accumulation in f32, d %d, %d heads, %d positions: differs from "
                      "its definition", d, nh, nt);
            }
}

/* The activation quantizers matmul uses against the quant ops' own, to
 * the bit: every distribution, a zero block, ties of +max and -max (the
 * first wins), NaN and infinity, and a block whose scale overflows. */
static void check_quantize_activations(void)
{
    const bg_type types[] = {BG_TYPE_Q8_0, BG_TYPE_Q8_1, BG_TYPE_Q8_K};
    enum { N = 4 * 256 };
    static float x[N];
    static uint8_t ref[2 * N], got[2 * N];
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        const bg_quant_ops *ops = bg_quant_ops_get(types[i]);
        bg_quantize_fn fn = bg_kernel_quantize_activations(types[i]);
        CHECK(ops && fn, "%s has an activation quantizer", bg_type_get(types[i])->name);
        if (!ops || !fn)
            continue;
        uint64_t bytes = 0;
        bg_type_row_bytes(types[i], N, &bytes);
        for (int d = 0; d < 4; d++)
            for (int rep = 0; rep < 50; rep++) {
                fill(x, N, (dist)d);
                memset(x + 256, 0, 256 * sizeof(float)); /* a zero block */
                if (rep % 5 == 1) { /* +max and -max: the first sets the sign */
                    x[512 + 7] = 9.5f;
                    x[512 + 200] = -9.5f;
                    x[768 + 3] = -9.5f;
                    x[768 + 10] = 9.5f; /* in the same 16 */
                }
                if (rep % 5 == 2)
                    x[17] = NAN, x[600] = INFINITY, x[900] = -INFINITY;
                if (rep % 5 == 3) /* a max so small that -127 / max overflows */
                    x[256 + 5] = 1e-38f, x[256 + 9] = -3e-39f;
                memset(ref, 0xA5, sizeof ref);
                memset(got, 0xA5, sizeof got);
                ops->quantize_activations(x, ref, N);
                fn(x, got, N);
                CHECK(memcmp(ref, got, bytes) == 0, "%s activations (%s, try %d) differ from the reference",
                      bg_type_get(types[i])->name, dist_name[d], rep);
            }
    }
}

int main(void)
{
    static const bg_type types[] = {BG_TYPE_F32,  BG_TYPE_F16,  BG_TYPE_BF16, BG_TYPE_Q8_0,
                                    BG_TYPE_Q4_0, BG_TYPE_Q4_1, BG_TYPE_Q5_0, BG_TYPE_Q5_1,
                                    BG_TYPE_IQ4_NL, BG_TYPE_Q4_K, BG_TYPE_Q5_K, BG_TYPE_Q6_K,
                                    BG_TYPE_IQ4_XS, BG_TYPE_Q2_K, BG_TYPE_Q3_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        check_type(types[i]);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        check_multi(types[i]);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        check_rows(types[i]);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        check_gemm(types[i]);
    check_gemm_extremes();
    check_vec_f16();
    check_f16_widened();
    check_attn_f16();
    check_quantize_activations();
    return check_summary("test_kernels");
}
