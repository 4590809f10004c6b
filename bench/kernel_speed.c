/* Speed of every dot-product variant of each weight type, one thread: a
 * ROWS x N weight matrix (in cache at the defaults, as in prefill) dotted
 * with one activation row, variants interleaved and the best of REPS
 * passes kept. Each variant's result is checked against the scalar
 * reference first (relative error of the sum, the test_kernels bound).
 *
 * usage: kernel_speed [-n N] [-rows ROWS] [-r REPS] [TYPE...]
 * prints a markdown table: type, variant, ns per 256 weights, GB/s of
 * weights, speed relative to the previous variant (avx2 vs scalar, ...);
 * where the type has a rows dot (decode's eight rows at a time), a last
 * line for it, against the fastest single dot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kernels.h"
#include "quant.h"
#include "types.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x853c49e6748fea9bull;

static float noise(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

enum { MAX_VARIANTS = 8 };

static volatile float sink;

/* Seconds for one pass of all rows through fn. */
static double pass(bg_dot_fn fn, int64_t n, const uint8_t *w, size_t row_bytes, int rows,
                   const void *a)
{
    float s = 0;
    double t0 = now();
    for (int r = 0; r < rows; r++)
        s += fn(n, w + (size_t)r * row_bytes, a);
    double t = now() - t0;
    sink = s;
    return t;
}

/* The same through the rows dot, BG_DOT_ROWS rows a call. */
static double pass_rows(bg_dot_rows_fn fn, int64_t n, const uint8_t *w, size_t row_bytes,
                        int rows, const void *a)
{
    float s = 0, out[BG_DOT_ROWS];
    double t0 = now();
    for (int r = 0; r < rows; r += BG_DOT_ROWS) {
        const int nr = rows - r < BG_DOT_ROWS ? rows - r : BG_DOT_ROWS;
        fn(n, w + (size_t)r * row_bytes, row_bytes, nr, a, out);
        s += out[0];
    }
    double t = now() - t0;
    sink = s;
    return t;
}

static void bench_type(bg_type type, int64_t n, int rows, int reps)
{
    const bg_quant_ops *ops = bg_quant_ops_get(type);
    const bg_type_info *wi = bg_type_get(type);
    if (!ops || !ops->dot || !wi)
        return;
    const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
    uint64_t wrow = 0, arow = 0;
    if (!bg_type_row_bytes(type, (uint64_t)n, &wrow) ||
        !bg_type_row_bytes(ops->dot_type, (uint64_t)n, &arow)) {
        fprintf(stderr, "kernel_speed: %s: n=%lld is not a whole number of blocks\n", wi->name,
                (long long)n);
        return;
    }
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *w = malloc(wrow * (uint64_t)rows), *a = malloc(arow);
    for (int r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++)
            x[i] = noise();
        ops->quantize(x, w + (size_t)r * wrow, n);
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = noise();
    aops->quantize_activations(x, a, n);

    bg_dot_variant v[MAX_VARIANTS];
    size_t nv = bg_kernel_dot_variants(type, v, MAX_VARIANTS);
    if (nv > MAX_VARIANTS)
        nv = MAX_VARIANTS;
    double best[MAX_VARIANTS];
    for (size_t k = 0; k < nv; k++) {
        best[k] = 1e30;
        float ref = v[0].fn(n, w, a), got = v[k].fn(n, w, a);
        if (fabsf(got - ref) > 1e-4f * (fabsf(ref) + 1))
            printf("<!-- %s %s: %g vs reference %g -->\n", wi->name, v[k].name, got, ref);
    }
    /* the scalar reference is slow: fewer rows for it */
    for (int rep = 0; rep < reps; rep++)
        for (size_t k = 0; k < nv; k++) {
            int nr = k == 0 ? (rows < 64 ? rows : 64) : rows;
            double t = pass(v[k].fn, n, w, wrow, nr, a) / nr;
            if (t < best[k])
                best[k] = t;
        }
    /* the rows dot, where the type has one, as one more variant */
    const bg_dot_rows_fn rows_fn = bg_kernel_dot_rows(type);
    double best_rows = 1e30;
    if (rows_fn && rows >= BG_DOT_ROWS) {
        float out[BG_DOT_ROWS];
        rows_fn(n, w, wrow, BG_DOT_ROWS, a, out);
        for (int r = 0; r < BG_DOT_ROWS; r++) {
            const float ref = v[0].fn(n, w + (size_t)r * wrow, a);
            if (fabsf(out[r] - ref) > 1e-4f * (fabsf(ref) + 1))
                printf("<!-- %s rows dot, row %d: %g vs reference %g -->\n", wi->name, r, out[r],
                       ref);
        }
    }
    for (int rep = 0; rows_fn && rep < reps; rep++) {
        double t = pass_rows(rows_fn, n, w, wrow, rows, a) / rows;
        best_rows = t < best_rows ? t : best_rows;
    }
    for (size_t k = 0; k < nv; k++) {
        double per256 = best[k] / (double)n * 256 * 1e9;
        printf("| %s | %s | %.1f | %.2f | %s", wi->name, v[k].name, per256,
               (double)wrow / best[k] / 1e9, k ? "" : "|\n");
        if (k)
            printf("%.2fx |\n", best[k - 1] / best[k]);
    }
    if (rows_fn)
        printf("| %s | rows of %d | %.1f | %.2f | %.2fx |\n", wi->name, BG_DOT_ROWS,
               best_rows / (double)n * 256 * 1e9, (double)wrow / best_rows / 1e9,
               best[nv - 1] / best_rows);
    free(x), free(w), free(a);
}

int main(int argc, char **argv)
{
    int64_t n = 2048;
    int rows = 512, reps = 20;
    bg_type types[BG_TYPE_COUNT];
    int n_types = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            int found = 0;
            for (int t = 0; t < BG_TYPE_COUNT && !found; t++) {
                const bg_type_info *ti = bg_type_get((uint32_t)t);
                if (ti && !strcasecmp(ti->name, argv[i]) && n_types < BG_TYPE_COUNT)
                    types[n_types++] = (bg_type)t, found = 1;
            }
            if (!found) {
                fprintf(stderr, "usage: kernel_speed [-n N] [-rows ROWS] [-r REPS] [TYPE...]\n");
                return 2;
            }
        }
    }
    if (n <= 0 || rows <= 0 || reps <= 0)
        return 2;
    if (!n_types) {
        static const bg_type all[] = {BG_TYPE_Q2_K,   BG_TYPE_Q3_K,   BG_TYPE_Q4_K, BG_TYPE_Q5_K,
                                      BG_TYPE_Q6_K,   BG_TYPE_Q8_0,   BG_TYPE_Q4_0, BG_TYPE_Q4_1,
                                      BG_TYPE_Q5_0,   BG_TYPE_Q5_1,   BG_TYPE_IQ4_NL,
                                      BG_TYPE_IQ4_XS, BG_TYPE_F32,    BG_TYPE_F16,  BG_TYPE_BF16};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            types[n_types++] = all[i];
    }
    printf("n = %lld, %d rows, best of %d, one thread\n\n", (long long)n, rows, reps);
    printf("| type | variant | ns / 256 weights | weights GB/s | vs previous |\n"
           "| --- | --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_types; i++)
        bench_type(types[i], n, rows, reps);
    return 0;
}
