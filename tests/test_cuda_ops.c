/* Each CUDA operation against the host reference (tests/gpu_reference.h,
 * the CPU engine's arithmetic): matrix products in every weight type and
 * batch size, norms, attention over every cache type (gated or not, with
 * the quantized caches' rotations, prefill then decode over two
 * sequences, and a decode step over 2101 positions split as gpu.h
 * defines), the DeltaNet step, routing and the mixture of experts. On
 * the same inputs, outputs must agree to NMSE 1e-5 (1e-4 where the cache
 * rounding can tip a code). make test runs it on the CUDA emulation
 * (build/tests/emu_cuda_ops: the same kernels compiled for the host,
 * tests/cuda_emu); on a GPU, scripts/gpu-check.sh runs the CUDA build
 * first, so a parity failure there can be traced to one kernel. The plain
 * build (no CUDA, no emulation) reports that it checked nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"
#include "check.h"
#include "gpu_reference.h"

static const bg_gpu_api *dev;
static bg_gpu *dg, *rg;                 /* the device, the reference */
static uint8_t *dbase, *rbase;          /* their arenas */
static uint64_t used, cap = 256u << 20; /* bump allocation, same offsets in both */

static uint64_t rnd_state = 0x2545f4914f6cdd1dull;
static float frand(void)
{
    rnd_state ^= rnd_state << 13, rnd_state ^= rnd_state >> 7, rnd_state ^= rnd_state << 17;
    return (float)((rnd_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* A region in both arenas; returns its offset. */
static uint64_t take(uint64_t bytes)
{
    uint64_t off = used;
    used = (used + bytes + 255) / 256 * 256;
    if (used > cap) {
        fprintf(stderr, "test_cuda_ops: arena too small\n");
        exit(1);
    }
    return off;
}

static uint64_t put(const void *host, uint64_t bytes)
{
    uint64_t off = take(bytes);
    dev->upload(dg, dbase + off, host, bytes);
    memcpy(rbase + off, host, bytes);
    return off;
}

static uint64_t put_random(uint64_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    uint64_t off = put(x, n * sizeof *x);
    free(x);
    return off;
}

/* n floats of zeros on both sides (outputs with gaps a kernel must not
 * write: the gaps then compare equal). */
static uint64_t put_zeros(uint64_t n)
{
    float *z = calloc(n, sizeof *z);
    uint64_t off = put(z, n * sizeof *z);
    free(z);
    return off;
}

/* Weights of n_out rows of n_in in `type`, quantized from random values. */
static uint64_t put_weights(uint32_t type, uint64_t n_in, uint64_t n_out, float scale)
{
    uint64_t rb = 0;
    bg_type_row_bytes((bg_type)type, n_in, &rb);
    float *x = malloc(n_in * n_out * sizeof *x);
    uint8_t *q = malloc(rb * n_out);
    for (uint64_t i = 0; i < n_in * n_out; i++)
        x[i] = frand() * scale;
    if (type == BG_TYPE_F32)
        memcpy(q, x, rb * n_out);
    else
        for (uint64_t r = 0; r < n_out; r++)
            bg_quant_ops_get((bg_type)type)->quantize(x + r * n_in, q + r * rb, (int64_t)n_in);
    uint64_t off = put(q, rb * n_out);
    free(x);
    free(q);
    return off;
}

#define D(off) ((void *)(dbase + (off)))
#define R(off) ((void *)(rbase + (off)))

/* NMSE of n floats at off, device against reference. */
static double compare_floats(uint64_t off, uint64_t n)
{
    float *d = malloc(n * sizeof *d);
    if (dev->download(dg, d, dbase + off, n * sizeof *d)) {
        fprintf(stderr, "download: %s\n", dev->error(dg));
        free(d);
        return INFINITY;
    }
    const float *r = R(off);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!isfinite(d[i])) {
            free(d);
            return INFINITY;
        }
        num += ((double)d[i] - r[i]) * ((double)d[i] - r[i]);
        den += (double)r[i] * r[i];
    }
    free(d);
    return den > 0 ? num / den : num;
}

static void matmuls(void)
{
    static const uint32_t types[] = {
        BG_TYPE_F32,  BG_TYPE_F16,  BG_TYPE_BF16, BG_TYPE_Q8_0,   BG_TYPE_Q4_0,
        BG_TYPE_Q4_1, BG_TYPE_Q5_0, BG_TYPE_Q5_1, BG_TYPE_Q2_K,   BG_TYPE_Q3_K,
        BG_TYPE_Q4_K, BG_TYPE_Q5_K, BG_TYPE_Q6_K, BG_TYPE_IQ4_NL, BG_TYPE_IQ4_XS,
    };
    /* 13 and 41 tokens: the integer path on the tensor cores, 41 with a
     * tile of 32 and a part of one */
    static const uint32_t toks[] = {1, 3, 8, 13, 41};
    /* rows of 768 take a warp each; rows of 256 (integer path) 8 lanes,
     * four rows to a warp, 70 not a multiple of a block's rows (nor of the
     * tensor cores' 16 a warp); rows of 2304 (72 chunks of 32) give a
     * decode step's lanes 2 or 3 chunks, loaded 2 at a time */
    static const uint64_t widths[] = {768, 256, 2304};
    enum { N_WIDTHS = sizeof widths / sizeof *widths };
    const uint64_t n_out = 70;
    for (size_t i = 0; i < N_WIDTHS * sizeof types / sizeof *types; i++) {
        const uint64_t n_in = widths[i % N_WIDTHS];
        const uint32_t type = types[i / N_WIDTHS];
        uint64_t mark = used;
        uint64_t w = put_weights(type, n_in, n_out, 0.05f);
        for (size_t k = 0; k < sizeof toks / sizeof *toks; k++) {
            const uint32_t n = toks[k];
            uint64_t x = put_random(n * (n_in + 4), 1.0f), y = put_zeros(n * (n_out + 2));
            int rc = dev->matmul(dg, type, D(w), n_in, n_out, D(x), n_in + 4, NULL, D(y),
                                 n_out + 2, n);
            mock.matmul(rg, type, R(w), n_in, n_out, R(x), n_in + 4, NULL, R(y), n_out + 2, n);
            double e = rc ? INFINITY : compare_floats(y, n * (n_out + 2));
            CHECK(e <= 1e-5, "matmul %s, rows of %u, %u tokens: NMSE %.3g%s%s",
                  brigade_type_name(type), (unsigned)n_in, n, e, rc ? ": " : "",
                  rc ? dev->error(dg) : "");
        }
        /* gate and up rows together: h = silu(Wg x) * Wu x */
        uint64_t wu = put_weights(type, n_in, n_out, 0.05f);
        for (uint32_t n = 1; n <= 37; n += 12 + (n > 1 ? 12 : 0)) { /* 1, 13, 37 */
            uint64_t x = put_random(n * n_in, 1.0f), h = put_zeros(n * (n_out + 2));
            int rc = dev->matmul_swiglu(dg, type, D(w), D(wu), n_in, n_out, D(x), n_in, D(h),
                                        n_out + 2, n);
            mock.matmul_swiglu(rg, type, R(w), R(wu), n_in, n_out, R(x), n_in, R(h),
                               n_out + 2, n);
            double e = rc ? INFINITY : compare_floats(h, n * (n_out + 2));
            CHECK(e <= 1e-5, "matmul_swiglu %s, %u tokens: NMSE %.3g%s%s",
                  brigade_type_name(type), n, e, rc ? ": " : "", rc ? dev->error(dg) : "");
        }
        used = mark;
    }
}

/* Several products of one input: one launch when their activations code
 * alike (and a scratch is set), else one after another; then of a norm's
 * output with the norm's coded rows (used by the K-quant products, ignored
 * by the others). */
static void multis(void)
{
    static const uint32_t sets[][3] = {
        {BG_TYPE_Q6_K, BG_TYPE_Q4_K, BG_TYPE_Q4_K},
        {BG_TYPE_Q3_K, BG_TYPE_Q2_K, BG_TYPE_Q4_K},
        {BG_TYPE_Q8_0, BG_TYPE_Q8_0, BG_TYPE_Q8_0},
        {BG_TYPE_F16, BG_TYPE_Q4_K, BG_TYPE_Q8_0},
    };
    static const uint64_t n_out[3] = {70, 36, 8};
    const uint64_t n_in = 512;
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        for (uint32_t n = 1; n <= 33; n += n == 1 ? 8 : 24) { /* 1, 9, 33 */
            uint64_t mark = used;
            uint64_t x = put_random(n * n_in, 1.0f), w[3], y[3];
            bg_gpu_proj dp[3], rp[3];
            for (int k = 0; k < 3; k++) {
                w[k] = put_weights(sets[i][k], n_in, n_out[k], 0.05f);
                y[k] = put_zeros(n * (n_out[k] + 3));
                dp[k] = (bg_gpu_proj){sets[i][k], D(w[k]), n_out[k], D(y[k]), n_out[k] + 3};
                rp[k] = (bg_gpu_proj){sets[i][k], R(w[k]), n_out[k], R(y[k]), n_out[k] + 3};
            }
            uint64_t nw = put_random(n_in, 1.0f), xq = take(n * BG_GPU_ACT_CODE_BYTES(n_in));
            for (int coded = 0; coded < 2; coded++) {
                int rc = 0;
                if (coded) { /* x normed in place, with its codes */
                    rc = dev->rmsnorm(dg, D(x), n_in, D(x), n_in, D(nw), n_in, n, 1e-6f, D(xq));
                    mock.rmsnorm(rg, R(x), n_in, R(x), n_in, R(nw), n_in, n, 1e-6f, NULL);
                }
                rc = rc ? rc : dev->matmul_multi(dg, dp, 3, n_in, D(x), n_in,
                                                 coded ? D(xq) : NULL, n);
                mock.matmul_multi(rg, rp, 3, n_in, R(x), n_in, NULL, n);
                for (int k = 0; k < 3; k++) {
                    double e = rc ? INFINITY : compare_floats(y[k], n * (n_out[k] + 3));
                    CHECK(e <= 1e-5,
                          "matmul_multi %s/%s/%s%s, %u tokens, product %d: NMSE %.3g%s%s",
                          brigade_type_name(sets[i][0]), brigade_type_name(sets[i][1]),
                          brigade_type_name(sets[i][2]), coded ? " (coded by the norm)" : "",
                          n, k, e, rc ? ": " : "", rc ? dev->error(dg) : "");
                }
            }
            used = mark;
        }
}

/* The feed-forward half's end: K weighted rows, one row (the CPU's sum),
 * with and without the shared expert and the next norm. The reference
 * adds in the same order, so x agrees to rounding of the gate's dot. */
static void expert_sums(void)
{
    const uint32_t n = 320, rows = 5, K = 3;
    uint64_t slot = put_random(n * rows * K, 1.0f), w = put_random(rows * K, 1.0f);
    uint64_t shared = put_random(n * rows, 1.0f), shared_w = put_random(n, 0.1f);
    uint64_t norm_w = put_random(n, 1.0f);
    for (int c = 0; c < 4; c++) {
        const bool weighed = c % 2 == 0, with_shared = c < 2, with_norm = c != 1;
        uint64_t mark = used, x = put_random(n * rows, 1.0f), xn = put_random(n * rows, 1.0f);
        const bg_gpu_ffn_end de = {D(x), D(xn), weighed ? D(w) : NULL,
                                   with_shared ? D(shared) : NULL, D(shared_w),
                                   with_norm ? D(norm_w) : NULL, 1e-6f, NULL};
        const bg_gpu_ffn_end re = {R(x), R(xn), weighed ? R(w) : NULL,
                                   with_shared ? R(shared) : NULL, R(shared_w),
                                   with_norm ? R(norm_w) : NULL, 1e-6f, NULL};
        int rc = dev->expert_sum(dg, &de, D(slot), K, n, rows);
        mock.expert_sum(rg, &re, R(slot), K, n, rows);
        double ex = rc ? INFINITY : compare_floats(x, n * rows);
        double exn = rc ? INFINITY : compare_floats(xn, n * rows);
        CHECK(ex <= 1e-12 && exn <= 1e-10,
              "expert_sum (%s, shared %d, norm %d): NMSE x %.3g, xn %.3g%s%s",
              weighed ? "3 weighed rows" : "one row", with_shared, with_norm, ex, exn,
              rc ? ": " : "", rc ? dev->error(dg) : "");
        used = mark;
    }
}

static void small_ops(void)
{
    const uint32_t n = 320, rows = 5;
    uint64_t x = put_random(n * rows, 2.0f), w = put_random(n, 1.0f);
    uint64_t y = take(n * rows * 4);
    dev->rmsnorm(dg, D(y), n, D(x), n, D(w), n, rows, 1e-6f, NULL);
    mock.rmsnorm(rg, R(y), n, R(x), n, R(w), n, rows, 1e-6f, NULL);
    CHECK(compare_floats(y, n * rows) <= 1e-10, "rmsnorm");
    dev->silu_mul(dg, D(x), D(y), n - 8, n, rows);
    mock.silu_mul(rg, R(x), R(y), n - 8, n, rows);
    CHECK(compare_floats(x, n * rows) <= 1e-10, "silu_mul");
    uint64_t out = put_random(n * rows, 1.0f);
    /* the residual and the next norm in one pass: x and xn both */
    uint64_t xn = take(n * rows * 4);
    dev->add_rmsnorm(dg, D(x), D(out), D(xn), D(w), n, rows, 1e-6f, NULL);
    mock.add_rmsnorm(rg, R(x), R(out), R(xn), R(w), n, rows, 1e-6f, NULL);
    CHECK(compare_floats(x, n * rows) <= 1e-12, "add_rmsnorm: x");
    CHECK(compare_floats(xn, n * rows) <= 1e-10, "add_rmsnorm: xn");
    expert_sums();
}

/* A K-quant product of a mixer's output rows (n_in of stride xs at x),
 * the device's from the codes its mixer wrote (xq), the reference's from
 * the floats. */
static void out_projection_on_codes(const char *what, uint64_t x, size_t xs, uint64_t xq,
                                    uint64_t n_in, uint32_t n_tok, int rc)
{
    uint64_t mark = used, w = put_weights(BG_TYPE_Q4_K, n_in, 16, 0.05f);
    uint64_t y = put_zeros(16 * n_tok);
    rc = rc ? rc : dev->matmul(dg, BG_TYPE_Q4_K, D(w), n_in, 16, D(x), xs, D(xq), D(y), 16, n_tok);
    mock.matmul(rg, BG_TYPE_Q4_K, R(w), n_in, 16, R(x), xs, NULL, R(y), 16, n_tok);
    double e = rc ? INFINITY : compare_floats(y, 16 * n_tok);
    CHECK(e <= 1e-5, "%s output coded, then a q4_K product of the codes, %u tokens: NMSE %.3g%s%s",
          what, n_tok, e, rc ? ": " : "", rc ? dev->error(dg) : "");
    used = mark;
}

/* A mixer's end: its out projection, the residual and the experts' norm
 * (coded), for a decode step's few tokens (one launch, its last block
 * finishing, when the counters are set) and for more; the codes checked
 * by a product of them. */
static void mixer_ends(void)
{
    static const uint32_t types[] = {BG_TYPE_Q4_K, BG_TYPE_Q2_K, BG_TYPE_Q3_K, BG_TYPE_Q8_0,
                                     BG_TYPE_F32};
    static const uint32_t toks[] = {1, 4, 5, 9};
    const uint64_t n_in = 512, n = 256;
    /* uncoded too: then only the barrier between the last block's rows
     * keeps one row's norm from overwriting the shared sums another reads */
    for (int coded = 1; coded >= 0; coded--)
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        for (size_t k = 0; k < sizeof toks / sizeof *toks; k++) {
            const uint32_t n_tok = toks[k];
            uint64_t mark = used, w = put_weights(types[i], n_in, n, 0.05f);
            uint64_t a = put_random(n_tok * (n_in + 8), 1.0f), y = put_zeros(n_tok * n);
            uint64_t x = put_random(n_tok * n, 1.0f), xn = put_zeros(n_tok * n);
            uint64_t nw = put_random(n, 1.0f), xq = take(n_tok * BG_GPU_ACT_CODE_BYTES(n));
            const bg_gpu_proj dp = {types[i], D(w), n, D(y), n}, rp = {types[i], R(w), n, R(y), n};
            int rc = dev->matmul_add_rmsnorm(dg, &dp, n_in, D(a), n_in + 8, NULL, n_tok, D(x),
                                             D(xn), D(nw), 1e-6f, coded ? D(xq) : NULL);
            mock.matmul_add_rmsnorm(rg, &rp, n_in, R(a), n_in + 8, NULL, n_tok, R(x), R(xn),
                                    R(nw), 1e-6f, NULL);
            const double ey = rc ? INFINITY : compare_floats(y, n_tok * n);
            const double ex = rc ? INFINITY : compare_floats(x, n_tok * n);
            const double exn = rc ? INFINITY : compare_floats(xn, n_tok * n);
            CHECK(ey <= 1e-5 && ex <= 1e-5 && exn <= 1e-5,
                  "matmul_add_rmsnorm %s, %u tokens%s: NMSE y %.3g, x %.3g, xn %.3g%s%s",
                  brigade_type_name(types[i]), n_tok, coded ? "" : ", uncoded", ey, ex, exn,
                  rc ? ": " : "", rc ? dev->error(dg) : "");
            if (coded)
                out_projection_on_codes("matmul_add_rmsnorm", xn, n, xq, n, n_tok, rc);
            used = mark;
        }
}

/* Whether the device's coded rows at xq are the CPU's Q8_K coding of the
 * device's own normed rows at xn (n wide, stride n): codes and each
 * chunk's scale, bit for bit. */
static bool codes_are_cpus(uint64_t xn, uint64_t xq, uint32_t n, uint32_t rows)
{
    const uint64_t qb = BG_GPU_ACT_CODE_BYTES(n);
    float *v = malloc((size_t)n * rows * sizeof *v);
    uint8_t *q = malloc(qb * rows);
    bg_block_q8_K *ref = malloc(n / 256 * sizeof *ref);
    bool same = !dev->download(dg, v, dbase + xn, (size_t)n * rows * sizeof *v) &&
                !dev->download(dg, q, dbase + xq, qb * rows);
    for (uint32_t r = 0; same && r < rows; r++) {
        bg_quant_ops_get(BG_TYPE_Q8_K)->quantize_activations(v + (size_t)r * n, ref, n);
        const uint8_t *row = q + r * qb;
        for (uint32_t c = 0; same && c < n / 32; c++) {
            float d;
            memcpy(&d, row + n + 4 * c, 4);
            same = !memcmp(&d, &ref[c / 8].d, 4) &&
                   !memcmp(row + 32 * c, ref[c / 8].qs + 32 * (c % 8), 32);
        }
    }
    free(v);
    free(q);
    free(ref);
    return same;
}

/* Rows of n with a tie for the largest magnitude after the norm (-3, then
 * +3 in the same lane's values and in another lane's, of the same
 * super-block: the first sets the codes' sign) and, from a width of 768,
 * a super-block of zeros. */
static uint64_t put_norm_rows(uint32_t n, uint32_t rows)
{
    float *x = malloc((size_t)n * rows * sizeof *x);
    for (uint64_t i = 0; i < (uint64_t)n * rows; i++)
        x[i] = frand();
    for (uint32_t r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n;
        xr[37] = -3.0f, xr[38] = xr[200] = 3.0f;
        for (uint32_t i = 256; n >= 768 && i < 512; i++)
            xr[i] = 0.0f;
    }
    uint64_t off = put(x, (size_t)n * rows * sizeof *x);
    free(x);
    return off;
}

/* The norms at a model's widths, where a block holds the row in its
 * registers (up to 16 values a thread) and the row's codes come from
 * them, and past that, where it takes the row in passes: rmsnorm, the
 * residual and norm (one row a block), the end of a feed-forward half,
 * and a mixer's end (the product's last block: 128 threads). The codes
 * must be the CPU's Q8_K of the same floats. */
static void row_norms(void)
{
    static const uint32_t widths[] = {256, 768, 2048, 4096, 4352};
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        const uint32_t n = widths[k], rows = 3;
        uint64_t mark = used, w = put_random(n, 1.0f), y = put_random(n * rows, 1.0f);
        float *ones = malloc(n * sizeof *ones);
        for (uint32_t i = 0; i < n; i++)
            ones[i] = i == 37 || i == 38 || i == 200 ? 1.0f : 0.5f + 0.5f * fabsf(frand());
        uint64_t tie_w = put(ones, n * sizeof *ones);
        free(ones);
        uint64_t x = put_norm_rows(n, rows), xn = put_zeros(n * rows);
        uint64_t xq = take(rows * BG_GPU_ACT_CODE_BYTES(n));
        int rc = dev->rmsnorm(dg, D(xn), n, D(x), n, D(tie_w), n, rows, 1e-6f, D(xq));
        mock.rmsnorm(rg, R(xn), n, R(x), n, R(tie_w), n, rows, 1e-6f, NULL);
        CHECK(!rc && compare_floats(xn, n * rows) <= 1e-12 && codes_are_cpus(xn, xq, n, rows),
              "rmsnorm of %u, coded: NMSE %.3g, codes the CPU's", n,
              compare_floats(xn, n * rows));
        rc = dev->add_rmsnorm(dg, D(x), D(y), D(xn), D(w), n, rows, 1e-6f, D(xq));
        mock.add_rmsnorm(rg, R(x), R(y), R(xn), R(w), n, rows, 1e-6f, NULL);
        CHECK(!rc && compare_floats(x, n * rows) <= 1e-12 &&
                  compare_floats(xn, n * rows) <= 1e-12 && codes_are_cpus(xn, xq, n, rows),
              "add_rmsnorm of %u, coded: NMSE x %.3g, xn %.3g", n, compare_floats(x, n * rows),
              compare_floats(xn, n * rows));
        /* the feed-forward half's end: two weighed rows and the gated
         * shared expert's, then the norm */
        uint64_t slot = put_random(n * rows * 2, 1.0f), sw = put_random(rows * 2, 1.0f);
        uint64_t sh = put_random(n * rows, 1.0f), sh_w = put_random(n, 0.05f);
        const bg_gpu_ffn_end de = {D(x), D(xn), D(sw), D(sh), D(sh_w), D(w), 1e-6f, D(xq)};
        const bg_gpu_ffn_end re = {R(x), R(xn), R(sw), R(sh), R(sh_w), R(w), 1e-6f, NULL};
        rc = dev->expert_sum(dg, &de, D(slot), 2, n, rows);
        mock.expert_sum(rg, &re, R(slot), 2, n, rows);
        CHECK(!rc && compare_floats(x, n * rows) <= 1e-12 &&
                  compare_floats(xn, n * rows) <= 1e-12 && codes_are_cpus(xn, xq, n, rows),
              "expert_sum of %u, normed and coded: NMSE x %.3g, xn %.3g", n,
              compare_floats(x, n * rows), compare_floats(xn, n * rows));
        /* a mixer's end for 1 and 3 tokens: the last block's residual and norm
         * (the products differ from the CPU's in float order alone) */
        const uint64_t n_in = 256;
        uint64_t wo = put_weights(BG_TYPE_Q8_0, n_in, n, 0.05f);
        uint64_t a = put_random(rows * n_in, 1.0f), out = put_zeros(n * rows);
        for (uint32_t n_tok = 1; n_tok <= rows; n_tok += 2) {
            const bg_gpu_proj dp = {BG_TYPE_Q8_0, D(wo), n, D(out), n};
            const bg_gpu_proj rp = {BG_TYPE_Q8_0, R(wo), n, R(out), n};
            rc = dev->matmul_add_rmsnorm(dg, &dp, n_in, D(a), n_in, NULL, n_tok, D(x), D(xn),
                                         D(w), 1e-6f, D(xq));
            mock.matmul_add_rmsnorm(rg, &rp, n_in, R(a), n_in, NULL, n_tok, R(x), R(xn), R(w),
                                    1e-6f, NULL);
            CHECK(!rc && compare_floats(x, n * n_tok) <= 1e-12 &&
                      compare_floats(xn, n * n_tok) <= 1e-12 &&
                      codes_are_cpus(xn, xq, n, n_tok),
                  "matmul_add_rmsnorm to %u, %u tokens: NMSE x %.3g, xn %.3g%s%s", n, n_tok,
                  compare_floats(x, n * n_tok), compare_floats(xn, n * n_tok), rc ? ": " : "",
                  rc ? dev->error(dg) : "");
        }
        used = mark;
    }
}

/* Attention over H heads of Dh (Hkv of them for K and V) with caches of
 * n_ctx positions a sequence, the quantized caches rotated as sessions
 * rotate them (K by the head, V by 64). */
static bg_gpu_attn_args attn_args(uint32_t H, uint32_t Hkv, uint32_t Dh, uint32_t type_k,
                                  uint32_t type_v, bool gated, uint32_t n_ctx)
{
    bg_gpu_attn_args a = {.n_head = H, .n_head_kv = Hkv, .head_dim = Dh, .type_k = type_k,
                          .type_v = type_v, .gated = gated, .rope_dims = 64, .rope_base = 1e6f,
                          .eps = 1e-6f, .scale = 1.0f / sqrtf((float)Dh)};
    const bool quant_k = type_k != BG_TYPE_F32 && type_k != BG_TYPE_F16;
    const bool quant_v = type_v != BG_TYPE_F32 && type_v != BG_TYPE_F16;
    a.k_rotation = quant_k ? Dh : 0;
    a.v_rotation = quant_v ? 64 : 0;
    bg_type_row_bytes((bg_type)type_k, (uint64_t)Hkv * Dh, &a.k_row_bytes);
    bg_type_row_bytes((bg_type)type_v, (uint64_t)Hkv * Dh, &a.v_row_bytes);
    a.k_seq_bytes = n_ctx * a.k_row_bytes;
    a.v_seq_bytes = n_ctx * a.v_row_bytes;
    a.q_width = 2 * H * Dh;
    a.a_width = H * Dh;
    a.kv_width = 2 * Hkv * Dh;
    return a;
}

/* Two sequences: a prefill of 5 tokens for sequence 0 and 3 for sequence 1
 * in one batch, then one decode token each (one launch that prepares its
 * tokens itself, each its sequence's only one), then 40 more tokens of
 * sequence 1 (past the f16 path's chunk of 32 positions, over the rows
 * the decode step stored). */
static void attentions(void)
{
    static const uint32_t kv_types[][2] = {
        {BG_TYPE_F16, BG_TYPE_F16},   {BG_TYPE_F32, BG_TYPE_F32},
        {BG_TYPE_Q8_0, BG_TYPE_Q8_0}, {BG_TYPE_Q4_0, BG_TYPE_Q4_0},
        {BG_TYPE_Q8_0, BG_TYPE_F16},
    };
    const uint32_t H = 4, Hkv = 2, n_ctx = 48;
    static uint32_t seq3[40], pos3[40];
    for (uint32_t i = 0; i < 40; i++)
        seq3[i] = 1, pos3[i] = 4 + i;
    for (size_t c = 0; c < sizeof kv_types / sizeof *kv_types; c++)
        for (int gated = 0; gated < 2; gated++) {
            /* Qwen3.6's heads of 256 (their output coded for the out
             * projection) for the first cache types, Qwen3's of 128 */
            const uint32_t Dh = c == 0 ? 256 : 128;
            uint64_t mark = used;
            bg_gpu_attn_args a =
                attn_args(H, Hkv, Dh, kv_types[c][0], kv_types[c][1], gated, n_ctx);
            uint64_t qn = put_random(Dh, 1.0f), kn = put_random(Dh, 1.0f);
            uint64_t kc = take(2 * a.k_seq_bytes), vc = take(2 * a.v_seq_bytes);
            dev->zero(dg, D(kc), 2 * a.k_seq_bytes);
            dev->zero(dg, D(vc), 2 * a.v_seq_bytes);
            memset(R(kc), 0, 2 * a.k_seq_bytes);
            memset(R(vc), 0, 2 * a.v_seq_bytes);
            static const uint32_t seq1[] = {0, 0, 1, 0, 1, 0, 1, 0}, pos1[] = {0, 1, 0, 2, 1, 3, 2, 4};
            static const uint32_t seq2[] = {1, 0}, pos2[] = {3, 5};
            const uint32_t *seqs[3] = {seq1, seq2, seq3}, *poss[3] = {pos1, pos2, pos3};
            const uint32_t ns[3] = {8, 2, 40};
            for (int step = 0; step < 3; step++) {
                a.n_tok = ns[step];
                a.seq_single = step == 1;
                uint64_t q = put_random(a.n_tok * a.q_width, 2.0f);
                uint64_t kv = put_random(a.n_tok * a.kv_width, 2.0f);
                uint64_t gate = take(a.n_tok * a.a_width * 4), att = take(a.n_tok * a.a_width * 4);
                uint64_t ts = put(seqs[step], a.n_tok * 4), tp = put(poss[step], a.n_tok * 4);
                const uint64_t n_row = (uint64_t)H * Dh;
                uint64_t aq = Dh % 256 ? 0 : take(a.n_tok * BG_GPU_ACT_CODE_BYTES(n_row));
                uint64_t split = take(BG_GPU_ATT_SPLIT_BYTES(BG_GPU_ATT_SPLIT_TOKENS, H, Dh));
                int rc = dev->attention(dg, &a, D(q), D(kv), D(gate), D(att), D(qn), D(kn),
                                        D(kc), D(vc), D(ts), D(tp), Dh % 256 ? NULL : D(aq),
                                        D(split));
                mock.attention(rg, &a, R(q), R(kv), R(gate), R(att), R(qn), R(kn), R(kc), R(vc),
                               R(ts), R(tp), NULL, R(split));
                if (Dh % 256 == 0)
                    out_projection_on_codes("attention", att, a.a_width, aq, n_row, a.n_tok, rc);
                double e = rc ? INFINITY : compare_floats(att, a.n_tok * a.a_width);
                /* the f16 V path follows the CPU's arithmetic step by step
                 * (bitwise here; a device exp's last bit may tip an f16
                 * rounding); the others differ by summation order */
                const double bound = a.type_v == BG_TYPE_F16 ? 1e-8 : 1e-10;
                CHECK(e <= bound, "attention %s/%s%s, step %d: NMSE %.3g%s%s",
                      brigade_type_name(a.type_k), brigade_type_name(a.type_v),
                      gated ? " gated" : "", step, e, rc ? ": " : "", rc ? dev->error(dg) : "");
            }
            used = mark;
        }
}

/* NMSE of the rows a step stored in a cache (n_tok tokens at seqs/poss,
 * rows of row_bytes of the type, seq_bytes a sequence), device against
 * reference, each decoded to floats: a wrong code, scale or place shows
 * here before attention's softmax blurs it. */
static double compare_cache_rows(uint64_t cache, uint32_t type, uint64_t row_bytes,
                                 uint64_t seq_bytes, uint64_t row_elems, const uint32_t *seqs,
                                 const uint32_t *poss, uint32_t n_tok)
{
    uint8_t *d = malloc(row_bytes);
    float *fd = malloc(row_elems * sizeof *fd), *fr = malloc(row_elems * sizeof *fr);
    double num = 0, den = 0;
    int shown = 0;
    const bg_quant_ops *ops = bg_quant_ops_get((bg_type)type);
    for (uint32_t t = 0; t < n_tok && d && fd && fr; t++) {
        const uint64_t off = cache + seqs[t] * seq_bytes + poss[t] * row_bytes;
        if (dev->download(dg, d, dbase + off, row_bytes)) {
            num = INFINITY;
            break;
        }
        ops->dequantize(d, fd, (int64_t)row_elems);
        ops->dequantize(R(off), fr, (int64_t)row_elems);
        for (uint64_t e = 0; e < row_elems; e++) {
            const double diff = (double)fd[e] - fr[e];
            /* the first value off by more than a rounding: where to look */
            if (fabs(diff) > 1e-3 * fabs(fr[e]) + 1e-6 && !shown++)
                fprintf(stderr, "  %s row of token %u (seq %u pos %u), element %llu: device %g, "
                        "reference %g\n", brigade_type_name(type), t, seqs[t], poss[t],
                        (unsigned long long)e, fd[e], fr[e]);
            num += diff * diff;
            den += (double)fr[e] * fr[e];
        }
    }
    free(d);
    free(fd);
    free(fr);
    return den > 0 ? num / den : num;
}

/* A decode step over long caches, where gpu.h's split applies: caches
 * filled with random rows (sequence 0 up to position 2099, sequence 1 up
 * to 126), then four tokens: sequence 0 at 2100 (16 ranges of 132),
 * sequence 1 at 127 (one range), 128 (128 + 1) and 129 (128 + 2); or the
 * first two alone (each its sequence's only token: one launch, its last
 * range holding the token's own new rows). Without scratch, the same step
 * runs each head as one range. */
static void attention_long(void)
{
    static const uint32_t kv_types[][2] = {
        {BG_TYPE_F16, BG_TYPE_F16}, {BG_TYPE_F32, BG_TYPE_F32}, {BG_TYPE_Q8_0, BG_TYPE_Q8_0},
        {BG_TYPE_Q4_0, BG_TYPE_Q4_0}, {BG_TYPE_Q8_0, BG_TYPE_F16},
    };
    const uint32_t H = 4, Hkv = 2, n_ctx = 2112;
    static const uint32_t seq[] = {0, 1, 1, 1}, pos[] = {2100, 127, 128, 129};
    const uint32_t filled[2] = {2100, 127};
    for (size_t c = 0; c < sizeof kv_types / sizeof *kv_types; c++)
        for (int run = 3; run >= 0; run--) {
            const bool with_split = run & 1, single = run & 2;
            const uint32_t Dh = c == 0 ? 256 : 128;
            uint64_t mark = used;
            bg_gpu_attn_args a =
                attn_args(H, Hkv, Dh, kv_types[c][0], kv_types[c][1], true, n_ctx);
            a.n_tok = single ? 2 : 4;
            a.seq_single = single;
            /* the caches' rows as the cache store writes them: random
             * normed values (unit scale, as QK-norm leaves keys) */
            uint8_t *caches[2] = {malloc(2 * a.k_seq_bytes), malloc(2 * a.v_seq_bytes)};
            const uint32_t types[2] = {a.type_k, a.type_v};
            const uint64_t rows[2] = {a.k_row_bytes, a.v_row_bytes};
            float *x = malloc((size_t)Hkv * Dh * sizeof *x);
            for (int kv = 0; kv < 2; kv++) {
                memset(caches[kv], 0, 2 * n_ctx * rows[kv]);
                for (uint32_t sq = 0; sq < 2; sq++)
                    for (uint32_t p = 0; p < filled[sq]; p++) {
                        for (uint32_t e = 0; e < Hkv * Dh; e++)
                            x[e] = frand() * 2.0f;
                        bg_quant_ops_get((bg_type)types[kv])
                            ->quantize_activations(x, caches[kv] + (sq * n_ctx + p) * rows[kv],
                                                   (int64_t)Hkv * Dh);
                    }
            }
            free(x);
            uint64_t kc = put(caches[0], 2 * a.k_seq_bytes), vc = put(caches[1], 2 * a.v_seq_bytes);
            free(caches[0]);
            free(caches[1]);
            uint64_t qn = put_random(Dh, 1.0f), kn = put_random(Dh, 1.0f);
            uint64_t q = put_random(a.n_tok * a.q_width, 2.0f);
            uint64_t kv = put_random(a.n_tok * a.kv_width, 2.0f);
            uint64_t gate = take(a.n_tok * a.a_width * 4), att = take(a.n_tok * a.a_width * 4);
            uint64_t ts = put(seq, a.n_tok * 4), tp = put(pos, a.n_tok * 4);
            uint64_t split = take(BG_GPU_ATT_SPLIT_BYTES(a.n_tok, H, Dh));
            void *d_split = with_split ? D(split) : NULL, *r_split = with_split ? R(split) : NULL;
            int rc = dev->attention(dg, &a, D(q), D(kv), D(gate), D(att), D(qn), D(kn), D(kc),
                                    D(vc), D(ts), D(tp), NULL, d_split);
            mock.attention(rg, &a, R(q), R(kv), R(gate), R(att), R(qn), R(kn), R(kc), R(vc),
                           R(ts), R(tp), NULL, r_split);
            double e = rc ? INFINITY : compare_floats(att, a.n_tok * a.a_width);
            /* the new rows as stored: the device's rope (cosf, sinf) may
             * differ from the host's in a last bit, which can tip one
             * rounding of a row; a wrong row is NMSE ~1 */
            const double ek = compare_cache_rows(kc, a.type_k, a.k_row_bytes, a.k_seq_bytes,
                                                 (uint64_t)Hkv * Dh, seq, pos, a.n_tok);
            const double ev = compare_cache_rows(vc, a.type_v, a.v_row_bytes, a.v_seq_bytes,
                                                 (uint64_t)Hkv * Dh, seq, pos, a.n_tok);
            CHECK(ek <= 1e-6 && ev <= 1e-6,
                  "attention over 2101 positions %s/%s, %s%s: new rows stored, NMSE K %.3g V %.3g",
                  brigade_type_name(a.type_k), brigade_type_name(a.type_v),
                  with_split ? "split" : "one range", single ? ", a token a sequence" : "", ek, ev);
            /* as attentions(); the merge adds exp's last bit per range */
            const double bound = a.type_v == BG_TYPE_F16 ? 1e-8 : 1e-10;
            CHECK(e <= bound, "attention over 2101 positions %s/%s, %s%s: NMSE %.3g%s%s",
                  brigade_type_name(a.type_k), brigade_type_name(a.type_v),
                  with_split ? "split" : "one range", single ? ", a token a sequence" : "", e,
                  rc ? ": " : "", rc ? dev->error(dg) : "");
            used = mark;
        }
}

/* Two geometries: small heads with sequences interleaved token by token,
 * and Qwen3.6's state size with more tokens than the kernel stages at once
 * and a sequence switch inside a staged group. */
static void deltanet_case(uint32_t S, uint32_t Hk, uint32_t Hv, uint32_t K,
                          const uint32_t *const seqs[2], const uint32_t ns[2])
{
    const uint32_t n_seq = 2;
    const uint32_t key_dim = S * Hk, conv_dim = 2 * key_dim + S * Hv;
    bg_gpu_deltanet_args a = {.state = S, .n_k_heads = Hk, .n_v_heads = Hv, .conv_kernel = K,
                              .eps = 1e-6f, .conv_seq_floats = (uint64_t)conv_dim * (K - 1),
                              .ssm_seq_floats = (uint64_t)Hv * S * S, .q_width = conv_dim + 8,
                              .a_width = S * Hv};
    uint64_t dt = put_random(Hv, 1.0f), A = put_random(Hv, 1.0f);
    for (uint32_t h = 0; h < Hv; h++) /* a = -exp(A_log) < 0 */
        ((float *)R(A))[h] = -1.0f - fabsf(((float *)R(A))[h]) * 4;
    dev->upload(dg, D(A), R(A), Hv * 4);
    uint64_t cw = put_random((uint64_t)conv_dim * K, 0.5f), nw = put_random(S, 1.0f);
    uint64_t conv = take(n_seq * a.conv_seq_floats * 4), ssm = take(n_seq * a.ssm_seq_floats * 4);
    dev->zero(dg, D(conv), n_seq * a.conv_seq_floats * 4);
    dev->zero(dg, D(ssm), n_seq * a.ssm_seq_floats * 4);
    memset(R(conv), 0, n_seq * a.conv_seq_floats * 4);
    memset(R(ssm), 0, n_seq * a.ssm_seq_floats * 4);
    for (int step = 0; step < 2; step++) {
        a.n_tok = ns[step];
        a.seq_runs = true; /* no sequence met again after another's token */
        for (uint32_t i = 1; i < a.n_tok; i++)
            for (uint32_t j = 0; j + 1 < i; j++)
                a.seq_runs &= seqs[step][i] == seqs[step][i - 1] || seqs[step][j] != seqs[step][i];
        uint64_t qkv = put_random(a.n_tok * a.q_width, 1.0f), z = put_random(a.n_tok * a.a_width, 1.0f);
        uint64_t heads = put_random(a.n_tok * 2 * Hv, 1.0f), att = take(a.n_tok * a.a_width * 4);
        uint64_t ts = put(seqs[step], a.n_tok * 4);
        /* the output also coded, for an out projection that takes the codes */
        const uint64_t n_out = Hv * S;
        uint64_t aq = take(a.n_tok * BG_GPU_ACT_CODE_BYTES(n_out));
        int rc = dev->deltanet(dg, &a, D(qkv), D(z), D(heads), D(dt), D(A), D(cw), D(nw), D(conv),
                               D(ssm), D(att), D(aq), D(ts));
        mock.deltanet(rg, &a, R(qkv), R(z), R(heads), R(dt), R(A), R(cw), R(nw), R(conv), R(ssm),
                      R(att), NULL, R(ts));
        out_projection_on_codes("deltanet", att, a.a_width, aq, n_out, a.n_tok, rc);
        double e = rc ? INFINITY : compare_floats(att, a.n_tok * a.a_width);
        CHECK(e <= 1e-5, "deltanet S=%u, %u tokens: NMSE %.3g%s%s", S, a.n_tok, e,
              rc ? ": " : "", rc ? dev->error(dg) : "");
        e = compare_floats(ssm, n_seq * a.ssm_seq_floats);
        CHECK(e <= 1e-5, "deltanet S=%u state after %u tokens: NMSE %.3g", S, a.n_tok, e);
        e = compare_floats(conv, n_seq * a.conv_seq_floats);
        CHECK(e <= 1e-10, "deltanet S=%u convolution state after %u tokens: NMSE %.3g", S,
              a.n_tok, e);
    }
}

static void deltanets(void)
{
    static const uint32_t mixed[] = {0, 1, 0, 0, 1, 1}, two[] = {1, 0};
    const uint32_t *const small[2] = {mixed, two};
    deltanet_case(64, 2, 4, 4, small, (const uint32_t[2]){6, 2});
    /* a decode step's few tokens (convolved by the state's kernel) with
     * a sequence's two in a row, then with a sequence met again (apart) */
    static const uint32_t runs[] = {1, 1, 0}, again[] = {0, 1, 0};
    const uint32_t *const few[2] = {runs, again};
    deltanet_case(64, 2, 4, 4, few, (const uint32_t[2]){3, 3});
    static uint32_t long_run[21], one[1];
    for (uint32_t t = 0; t < 21; t++) /* seq 1 from token 11 on */
        long_run[t] = t > 10;
    const uint32_t *const big[2] = {long_run, one};
    deltanet_case(128, 2, 4, 4, big, (const uint32_t[2]){21, 1});
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Two groupings of n_slots slots by expert (BG_GPU_MOE_GROUP_INTS) agree:
 * the same offsets, experts chosen and their groups' offsets, each group
 * the same slots in any order (dev's groups are sorted in place), and
 * dev's first slot of each group the one it filed first. */
static bool same_grouping(int32_t *dev_groups, const int32_t *ref, uint32_t n_slots,
                          uint32_t n_expert)
{
    const uint32_t active = n_expert + 2, rank_first = active + n_expert;
    const uint32_t rank_slot = rank_first + n_expert + 1, head = rank_slot + n_expert;
    const int32_t n_active = ref[n_expert + 1];
    if (memcmp(dev_groups, ref, (n_expert + 2) * sizeof(int32_t)) != 0 ||
        memcmp(dev_groups + active, ref + active, (size_t)n_active * sizeof(int32_t)) != 0 ||
        memcmp(dev_groups + rank_first, ref + rank_first,
               (size_t)(n_active + 1) * sizeof(int32_t)) != 0)
        return false;
    for (int32_t r = 0; r < n_active; r++)
        if (dev_groups[rank_slot + r] != dev_groups[head + dev_groups[rank_first + r]])
            return false;
    for (uint32_t e = 0; e < n_expert; e++) {
        int32_t *g = dev_groups + head + ref[e];
        qsort(g, (size_t)(ref[e + 1] - ref[e]), sizeof *g, cmp_i32);
    }
    return memcmp(dev_groups + head, ref + head, n_slots * sizeof(int32_t)) == 0;
}

/* Routing, then the routed experts for the reference's choice (so a
 * near-tie tipped by exp's rounding cannot make the products differ).
 * 40 tokens put more than one group of 8 slots on most experts. */
static void moes(void)
{
    static const uint32_t types[][3] = {
        {BG_TYPE_Q4_K, BG_TYPE_Q4_K, BG_TYPE_Q6_K},
        {BG_TYPE_Q2_K, BG_TYPE_Q2_K, BG_TYPE_Q3_K},
        {BG_TYPE_Q3_K, BG_TYPE_Q3_K, BG_TYPE_Q2_K},
        {BG_TYPE_Q8_0, BG_TYPE_Q8_0, BG_TYPE_Q8_0},
        {BG_TYPE_F16, BG_TYPE_BF16, BG_TYPE_Q5_K},
    };
    /* 1 and 3 tokens: a slot or fewer per expert (the one-slot kernels,
     * 3 tokens giving some experts two); the last 40: every token routed
     * alike, so each expert chosen has 40 slots (three tiles of the
     * tensor-core kernel's, spread over its block rows) */
    static const uint32_t n_toks[] = {1, 9, 40, 3, 40};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        for (size_t ti = 0; ti < sizeof n_toks / sizeof *n_toks; ti++) {
            const uint32_t n_tok = n_toks[ti];
            uint64_t mark = used;
            bg_gpu_moe_args a = {.n_tok = n_tok, .n_embd = 512, .n_ff = 256, .n_expert = 16,
                                 .n_used = 4, .type_gate = types[i][0],
                                 .type_up = types[i][1], .type_down = types[i][2]};
            const uint32_t slots = n_tok * a.n_used;
            uint64_t rb;
            bg_type_row_bytes((bg_type)a.type_gate, a.n_embd, &rb);
            a.gate_expert_bytes = rb * a.n_ff;
            bg_type_row_bytes((bg_type)a.type_up, a.n_embd, &rb);
            a.up_expert_bytes = rb * a.n_ff;
            bg_type_row_bytes((bg_type)a.type_down, a.n_ff, &rb);
            a.down_expert_bytes = rb * a.n_embd;
            uint64_t wg = put_weights(a.type_gate, a.n_embd, (uint64_t)a.n_ff * a.n_expert, 0.06f);
            uint64_t wu = put_weights(a.type_up, a.n_embd, (uint64_t)a.n_ff * a.n_expert, 0.06f);
            uint64_t wd = put_weights(a.type_down, a.n_ff, (uint64_t)a.n_embd * a.n_expert, 0.08f);
            uint64_t xn = put_random(n_tok * a.n_embd, 1.0f);
            /* the router's rows pick one input each (times 3), so its
             * logits are exact in any summation order */
            const bool alike = ti == 4;
            float *rxv = malloc((size_t)n_tok * a.n_embd * sizeof *rxv);
            for (uint64_t j = 0; j < (uint64_t)n_tok * a.n_embd; j++)
                rxv[j] = alike && j >= a.n_embd ? rxv[j % a.n_embd] : frand();
            uint64_t rx = put(rxv, (uint64_t)n_tok * a.n_embd * 4);
            free(rxv);
            uint64_t router = put_zeros(n_tok * a.n_expert);
            float *rw = calloc((size_t)a.n_expert * a.n_embd, sizeof *rw);
            for (uint32_t e = 0; e < a.n_expert; e++)
                rw[(size_t)e * a.n_embd + (e * 37) % a.n_embd] = 3.0f;
            uint64_t rwo = put(rw, (uint64_t)a.n_expert * a.n_embd * 4);
            free(rw);
            const bg_gpu_proj drp = {BG_TYPE_F32, D(rwo), a.n_expert, D(router), a.n_expert};
            const bg_gpu_proj rrp = {BG_TYPE_F32, R(rwo), a.n_expert, R(router), a.n_expert};
            uint64_t chosen = take(slots * 4), cw = take(slots * 4);
            uint64_t groups = take(BG_GPU_MOE_GROUP_INTS(slots, a.n_expert) * 4);
            /* the shared expert joins the routed ones on every other count */
            const bool shared = ti % 2 == 0;
            const uint32_t all = slots + (shared ? n_tok : 0);
            uint64_t sg = put_weights(a.type_gate, a.n_embd, a.n_ff, 0.06f);
            uint64_t su = put_weights(a.type_up, a.n_embd, a.n_ff, 0.06f);
            uint64_t sd = put_weights(a.type_down, a.n_ff, a.n_embd, 0.08f);
            uint64_t h = take((uint64_t)all * a.n_ff * 4);
            uint64_t so = take((uint64_t)all * a.n_embd * 4);
            /* xn normed in place with its codes on every other case: the
             * gate/up products take the norm's codes */
            const bool coded = (i + ti) % 2 == 0;
            uint64_t xq = take(n_tok * BG_GPU_ACT_CODE_BYTES(a.n_embd));
            if (coded) {
                dev->rmsnorm(dg, D(xn), a.n_embd, D(xn), a.n_embd, NULL, a.n_embd, n_tok, 1e-6f,
                             D(xq));
                mock.rmsnorm(rg, R(xn), a.n_embd, R(xn), a.n_embd, NULL, a.n_embd, n_tok, 1e-6f,
                             NULL);
            }
            int rc = dev->route(dg, &drp, a.n_embd, D(rx), NULL, n_tok, a.n_used, D(chosen),
                                D(cw), D(groups));
            mock.route(rg, &rrp, a.n_embd, R(rx), NULL, n_tok, a.n_used, R(chosen), R(cw),
                       R(groups));
            const uint64_t n_group_ints = BG_GPU_MOE_GROUP_INTS(slots, a.n_expert);
            int32_t *dch = malloc(slots * 4), *dgr = malloc(n_group_ints * 4);
            rc = rc ? rc : dev->download(dg, dch, D(chosen), slots * 4);
            CHECK(!rc && !memcmp(dch, R(chosen), slots * 4),
                  "routing, %u tokens: the chosen experts differ%s%s", n_tok, rc ? ": " : "",
                  rc ? dev->error(dg) : "");
            rc = rc ? rc : dev->download(dg, dgr, D(groups), n_group_ints * 4);
            CHECK(!rc && same_grouping(dgr, R(groups), slots, a.n_expert),
                  "routing, %u tokens: the slots are not grouped by expert as the choice says",
                  n_tok);
            free(dch);
            free(dgr);
            double e = rc ? INFINITY : compare_floats(cw, slots);
            CHECK(e <= 1e-10, "routing, %u tokens: expert weights NMSE %.3g", n_tok, e);
            /* the products on the same choice and weights */
            dev->upload(dg, D(groups), R(groups), n_group_ints * 4);
            dev->upload(dg, D(cw), R(cw), slots * 4);
            bg_gpu_moe_args da = a, ra = a;
            if (shared) {
                da.d_gate_shexp = D(sg), da.d_up_shexp = D(su), da.d_down_shexp = D(sd);
                ra.d_gate_shexp = R(sg), ra.d_up_shexp = R(su), ra.d_down_shexp = R(sd);
            }
            /* then the half's end, on every case but the first type's:
             * the joined shared expert's slots, or rows of its own; xn
             * is read by the shared gate, then normed anew (coded) */
            const bool ends = i > 0;
            const uint64_t E = a.n_embd, n_rows = (uint64_t)n_tok * E;
            uint64_t x = put_random(n_rows, 1.0f), apart = put_random(n_rows, 1.0f);
            uint64_t shw = put_random(E, 0.1f), nw = put_random(E, 1.0f);
            uint64_t xq2 = take(n_tok * BG_GPU_ACT_CODE_BYTES(E));
            const bg_gpu_ffn_end de = {D(x), D(xn), D(cw), shared ? (float *)D(so) + slots * E : D(apart),
                                       D(shw), D(nw), 1e-6f, D(xq2)};
            const bg_gpu_ffn_end re = {R(x), R(xn), R(cw), shared ? (float *)R(so) + slots * E : R(apart),
                                       R(shw), R(nw), 1e-6f, NULL};
            rc = dev->moe(dg, &da, D(xn), coded ? D(xq) : NULL, D(wg), D(wu), D(wd), D(groups),
                          D(h), D(so), ends ? &de : NULL);
            mock.moe(rg, &ra, R(xn), NULL, R(wg), R(wu), R(wd), R(groups), R(h), R(so),
                     ends ? &re : NULL);
            e = rc ? INFINITY : compare_floats(so, (uint64_t)all * a.n_embd);
            const double ex = rc || !ends ? 0 : compare_floats(x, n_rows);
            const double exn = rc || !ends ? 0 : compare_floats(xn, n_rows);
            CHECK(e <= 1e-5 && ex <= 1e-5 && exn <= 1e-5,
                  "moe %s/%s/%s%s%s%s, %u tokens%s: NMSE %.3g, x %.3g, xn %.3g%s%s",
                  brigade_type_name(a.type_gate), brigade_type_name(a.type_up),
                  brigade_type_name(a.type_down), shared ? " with the shared expert" : "",
                  coded ? " (coded by the norm)" : "", ends ? ", then the end" : "", n_tok,
                  alike ? " routed alike" : "", e,
                  ex, exn, rc ? ": " : "", rc ? dev->error(dg) : "");
            if (ends)
                out_projection_on_codes("moe's end", xn, E, xq2, E, n_tok, rc);
            used = mark;
        }
}

/* Routing alone with the real models' expert counts and more (256 of
 * Qwen3.6, 300: runs of three experts a thread and threads with none,
 * 512: the most), top-8, for a decode step and a batch: the choice, the
 * grouping (whose scan gives each of the block's threads a run of
 * experts) and the weights against the reference's. */
static void routings(void)
{
    static const uint32_t experts[] = {256, 300, BG_GPU_MAX_EXPERTS};
    static const uint32_t n_toks[] = {1, 3, 40};
    const uint32_t n_embd = 512, n_used = 8;
    for (size_t i = 0; i < sizeof experts / sizeof *experts; i++)
        for (size_t ti = 0; ti < sizeof n_toks / sizeof *n_toks; ti++) {
            const uint32_t n_expert = experts[i], n_tok = n_toks[ti], slots = n_tok * n_used;
            uint64_t mark = used;
            /* each router row picks one input (times 3): exact logits */
            uint64_t rx = put_random((uint64_t)n_tok * n_embd, 1.0f);
            uint64_t router = put_zeros((uint64_t)n_tok * n_expert);
            float *rw = calloc((size_t)n_expert * n_embd, sizeof *rw);
            for (uint32_t e = 0; e < n_expert; e++)
                rw[(size_t)e * n_embd + (e * 37) % n_embd] = 3.0f;
            uint64_t rwo = put(rw, (uint64_t)n_expert * n_embd * 4);
            free(rw);
            const bg_gpu_proj drp = {BG_TYPE_F32, D(rwo), n_expert, D(router), n_expert};
            const bg_gpu_proj rrp = {BG_TYPE_F32, R(rwo), n_expert, R(router), n_expert};
            const uint64_t n_group_ints = BG_GPU_MOE_GROUP_INTS(slots, n_expert);
            uint64_t chosen = take(slots * 4), cw = take(slots * 4), groups = take(n_group_ints * 4);
            int rc = dev->route(dg, &drp, n_embd, D(rx), NULL, n_tok, n_used, D(chosen), D(cw),
                                D(groups));
            mock.route(rg, &rrp, n_embd, R(rx), NULL, n_tok, n_used, R(chosen), R(cw), R(groups));
            int32_t *dch = malloc(slots * 4), *dgr = malloc(n_group_ints * 4);
            rc = rc ? rc : dev->download(dg, dch, D(chosen), slots * 4);
            rc = rc ? rc : dev->download(dg, dgr, D(groups), n_group_ints * 4);
            CHECK(!rc && !memcmp(dch, R(chosen), slots * 4) &&
                      same_grouping(dgr, R(groups), slots, n_expert),
                  "routing over %u experts, %u tokens: the choice or its grouping differs%s%s",
                  n_expert, n_tok, rc ? ": " : "", rc ? dev->error(dg) : "");
            free(dch);
            free(dgr);
            double e = rc ? INFINITY : compare_floats(cw, slots);
            CHECK(e <= 1e-10, "routing over %u experts, %u tokens: expert weights NMSE %.3g",
                  n_expert, n_tok, e);
            used = mark;
        }
}

/* The race check (race_cuda_ops, ThreadSanitizer) leaves out the unstaged
 * pass unless it is named: those kernels predate the staging and are
 * unchanged, and the pass costs it minutes. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RACE_CHECK 1
#endif
#endif
#ifdef RACE_CHECK
static const bool under_race_check = true;
#else
static const bool under_race_check = false;
#endif

/* Whether the group of checks named is to run: all, or those named on the
 * command line (e.g. test_cuda_ops attentions attention_long, under a
 * slow tool such as compute-sanitizer). */
static int only_argc;
static char **only_argv;
static bool wanted(const char *group)
{
    for (int i = 1; i < only_argc; i++)
        if (!strcmp(only_argv[i], group))
            return true;
    return only_argc < 2;
}

int main(int argc, char **argv)
{
    only_argc = argc, only_argv = argv;
#ifdef BG_TEST_SELF /* the harness against itself, to check the test code */
    dev = &mock;
#else
    dev = bg_gpu_api_get();
#endif
    if (!dev) {
        printf("test_cuda_ops: 0 passed, 0 failed (built without CUDA: nothing to check)\n");
        return 0;
    }
    char desc[128], msg[256];
#ifdef BG_TEST_EMULATION
    /* a card the build has no device code for: refused at init, saying
     * which archs it has and how to build for the card */
    setenv("BG_EMU_NO_KERNEL_IMAGE", "1", 1);
    CHECK(dev->init(0, &dg, desc, sizeof desc, msg, sizeof msg) != 0 &&
              strstr(msg, "no device code for it") && strstr(msg, "CUDA_ARCHS=90"),
          "a card without device code: %s", msg);
    unsetenv("BG_EMU_NO_KERNEL_IMAGE");
#endif
    if (dev->init(0, &dg, desc, sizeof desc, msg, sizeof msg)) {
        printf("test_cuda_ops: 0 passed, 0 failed (no GPU: %s)\n", msg);
        return 0;
    }
    /* the tensor cores pass their fragment check (a product worked out on
     * the host) on every card the build targets, and on the emulation */
    const char *mma_env = getenv("BRIGADE_CUDA_MMA");
    if (!(mma_env && !strcmp(mma_env, "0")))
        CHECK(strstr(desc, ", int8 tensor cores, staged") && !strstr(desc, "tensor cores off"),
              "device %s: the int8 tensor cores are off or not staged", desc);
    mock.init(0, &rg, desc, sizeof desc, msg, sizeof msg);
    void *d = NULL, *r = NULL;
    if (dev->alloc(dg, cap, &d) || mock.alloc(rg, cap, &r)) {
        fprintf(stderr, "test_cuda_ops: %s\n", dev->error(dg));
        return 1;
    }
    dbase = d;
    rbase = r;
    /* products in the float path, then (scratch given) the K-quants, Q8_0
     * and the others with an integer path in it */
#define GROUP(f) \
    if (wanted(#f)) \
        f()
    GROUP(matmuls);
    GROUP(multis);
    GROUP(moes);
    const uint64_t scratch_bytes = 8u << 20, scratch = take(scratch_bytes);
    dev->set_scratch(dg, D(scratch), scratch_bytes);
    GROUP(matmuls);
    GROUP(multis);
    GROUP(moes);
    GROUP(routings);
    GROUP(small_ops);
    GROUP(mixer_ends);
    GROUP(row_norms);
    GROUP(attentions);
    GROUP(attention_long);
    GROUP(deltanets);
    /* prefill's tensor-core products again, read straight from memory
     * instead of staged through shared memory (BRIGADE_CUDA_MMA_STAGE=0,
     * which gpu-check benches against the default): a device made anew
     * with the switch set, the scratch at the same offset */
    if (wanted("unstaged") && (!under_race_check || only_argc > 1)) {
        dev->destroy(dg);
        setenv("BRIGADE_CUDA_MMA_STAGE", "0", 1);
        const int rc = dev->init(0, &dg, desc, sizeof desc, msg, sizeof msg);
        unsetenv("BRIGADE_CUDA_MMA_STAGE");
        if (rc || dev->alloc(dg, cap, &d)) {
            fprintf(stderr, "test_cuda_ops: %s\n", rc ? msg : dev->error(dg));
            return 1;
        }
        CHECK(!strstr(desc, "staged"), "device %s: staged with BRIGADE_CUDA_MMA_STAGE=0", desc);
        dbase = d;
        dev->set_scratch(dg, D(scratch), scratch_bytes);
        printf("the tensor cores' products again, unstaged (BRIGADE_CUDA_MMA_STAGE=0):\n");
        matmuls();
        multis();
        moes();
    }
#undef GROUP
    dev->destroy(dg);
    mock.destroy(rg);
    return check_summary("test_cuda_ops");
}
