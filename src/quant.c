/* Scalar reference kernels for the tensor formats of quant.h.
 *
 * Bit-exactness with ggml constrains the float code: every expression that
 * rounds is evaluated in the same order and precision as ggml's reference C
 * (the Makefile's -ffp-contract=off keeps the compiler from fusing
 * multiply-adds). Integer packing and control flow are free, and are
 * organised here as two families sharing decoders:
 *   - 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL), one
 *     scale (and possibly a min) per block, described by legacy_format;
 *   - 256-element super-blocks (Q4_K, Q5_K, Q6_K, IQ4_XS, Q8_K), a float
 *     scale times small integer scales per group, decoded to sb_decoded. */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "fp16.h"

/* ggml treats groups whose largest magnitude is below this as all-zero. */
#define GROUP_EPS 1e-15f

/* The IQ4 codebook, shared by IQ4_NL and IQ4_XS. */
static const int8_t iq4_values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* ------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------ */

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int max_int(int a, int b) { return a > b ? a : b; }
static inline int clamp_int(int v, int lo, int hi) { return min_int(hi, max_int(lo, v)); }

static inline float load_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return bg_f16_to_f32(h);
}

static inline void store_f16(uint8_t *p, float f)
{
    uint16_t h = bg_f32_to_f16(f);
    memcpy(p, &h, sizeof h);
}

/* Round to nearest, ties to even, the way ggml's K-quant code does: adding
 * 1.5 * 2^23 pushes the fraction out of the mantissa so the FPU rounds, and
 * the low 22 mantissa bits (biased by 2^22) are the result. Exact for
 * |v| < 2^22; beyond that it wraps exactly as ggml's does, so even codes
 * clamped from degenerate inputs agree. */
static inline int round_nearest(float v)
{
    uint32_t bits = bg_f32_bits(v + 12582912.0f);
    return (int)(bits & 0x7FFFFFu) - 0x400000;
}

/* Index of the codebook entry nearest to x; a tie goes to the larger. */
static int iq4_nearest_index(float x)
{
    if (x <= iq4_values[0])
        return 0;
    if (x >= iq4_values[15])
        return 15;
    int hi = 1; /* first entry above x */
    while (x >= iq4_values[hi])
        hi++;
    return x - iq4_values[hi - 1] < iq4_values[hi] - x ? hi - 1 : hi;
}

/* Byte j of qs holds codes[j] (low nibble) and codes[j + half] (high). */
static void pack_nibbles(const uint8_t *codes, int half, uint8_t *qs)
{
    for (int j = 0; j < half; j++)
        qs[j] = (uint8_t)((codes[j] & 0xF) | (codes[j + half] & 0xF) << 4);
}

static void unpack_nibbles(const uint8_t *qs, int half, uint8_t *codes)
{
    for (int j = 0; j < half; j++) {
        codes[j] = qs[j] & 0xF;
        codes[j + half] = qs[j] >> 4;
    }
}

/* The bits of codes above their `low` bits (the nibble of Q5_K/Q6_K, the
 * two bits of Q3_K), `width` bits each, for the K-formats' layout: element
 * e goes to field e / 32 of byte qh[e % 32]. */
static void pack_high_bits(const uint8_t *codes, int count, int low, int width, uint8_t *qh)
{
    memset(qh, 0, 32);
    for (int e = 0; e < count; e++)
        qh[e % 32] |= (uint8_t)((codes[e] >> low) << (width * (e / 32)));
}

static void unpack_high_bits(const uint8_t *qh, int count, int low, int width, uint8_t *codes)
{
    const int mask = (1 << width) - 1;
    for (int e = 0; e < count; e++)
        codes[e] |= (uint8_t)(((qh[e % 32] >> (width * (e / 32))) & mask) << low);
}

static int32_t dot_i8(const int8_t *a, const int8_t *b, int n)
{
    int32_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static int32_t sum_i8(const int8_t *a, int n)
{
    int32_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += a[i];
    return sum;
}

/* ------------------------------------------------------------------------
 * F32, F16, BF16
 * ------------------------------------------------------------------------ */

static void dequantize_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void quantize_f32(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void dequantize_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bg_f16_to_f32(h[i]);
}

static void quantize_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = bg_f32_to_f16(src[i]);
}

static void dequantize_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bg_bf16_to_f32(h[i]);
}

static void quantize_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = bg_f32_to_bf16(src[i]);
}

/* Float products are exact in double, so only the summation rounds. */
static float dot_f32(int64_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i] * y[i];
    return (float)sum;
}

static float dot_f16(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)bg_f16_to_f32(x[i]) * bg_f16_to_f32(y[i]);
    return (float)sum;
}

static float dot_bf16(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)bg_bf16_to_f32(x[i]) * bg_bf16_to_f32(y[i]);
    return (float)sum;
}

/* ------------------------------------------------------------------------
 * 32-element block formats
 * ------------------------------------------------------------------------ */

/* Where the fields of a 32-element block live. d is always at offset 0;
 * an offset of 0 for m or qh means the block has no such field. */
typedef struct legacy_format {
    size_t bytes;
    int bits;              /* 4, 5 or 8 bits per code */
    int zero;              /* code of value 0 (symmetric formats), else 0 */
    const int8_t *values;  /* codebook (IQ4_NL) instead of code - zero */
    size_t off_m, off_qh, off_qs;
} legacy_format;

static const legacy_format fmt_q4_0 = {
    sizeof(bg_block_q4_0), 4, 8, NULL, 0, 0, offsetof(bg_block_q4_0, qs)};
static const legacy_format fmt_q4_1 = {
    sizeof(bg_block_q4_1), 4, 0, NULL, offsetof(bg_block_q4_1, m), 0,
    offsetof(bg_block_q4_1, qs)};
static const legacy_format fmt_q5_0 = {
    sizeof(bg_block_q5_0), 5, 16, NULL, 0, offsetof(bg_block_q5_0, qh),
    offsetof(bg_block_q5_0, qs)};
static const legacy_format fmt_q5_1 = {
    sizeof(bg_block_q5_1), 5, 0, NULL, offsetof(bg_block_q5_1, m),
    offsetof(bg_block_q5_1, qh), offsetof(bg_block_q5_1, qs)};
static const legacy_format fmt_q8_0 = {
    sizeof(bg_block_q8_0), 8, 0, NULL, 0, 0, offsetof(bg_block_q8_0, qs)};
static const legacy_format fmt_q8_1 = { /* s is a cache, not a min */
    sizeof(bg_block_q8_1), 8, 0, NULL, 0, 0, offsetof(bg_block_q8_1, qs)};
static const legacy_format fmt_iq4_nl = {
    sizeof(bg_block_iq4_nl), 4, 0, iq4_values, 0, 0, offsetof(bg_block_iq4_nl, qs)};

typedef struct legacy_decoded {
    float d, m; /* m is meaningful only if has_min */
    bool has_min;
    int8_t v[BG_QK]; /* x = d * v (+ m) */
} legacy_decoded;

static void legacy_decode(const legacy_format *f, const uint8_t *blk, legacy_decoded *out)
{
    out->d = load_f16(blk);
    out->has_min = f->off_m != 0;
    out->m = out->has_min ? load_f16(blk + f->off_m) : 0.0f;
    if (f->bits == 8) {
        memcpy(out->v, blk + f->off_qs, BG_QK);
        return;
    }
    uint8_t codes[BG_QK];
    unpack_nibbles(blk + f->off_qs, BG_QK / 2, codes);
    if (f->off_qh) {
        uint32_t qh;
        memcpy(&qh, blk + f->off_qh, sizeof qh);
        for (int j = 0; j < BG_QK; j++)
            codes[j] |= (uint8_t)(((qh >> j) & 1u) << 4);
    }
    for (int j = 0; j < BG_QK; j++)
        out->v[j] = f->values ? f->values[codes[j]] : (int8_t)(codes[j] - f->zero);
}

/* Stores 4- or 5-bit codes; the caller has stored d (and m). */
static void legacy_pack(const legacy_format *f, const uint8_t *codes, uint8_t *blk)
{
    pack_nibbles(codes, BG_QK / 2, blk + f->off_qs);
    if (f->off_qh) {
        uint32_t qh = 0;
        for (int j = 0; j < BG_QK; j++)
            qh |= (uint32_t)(codes[j] >> 4) << j;
        memcpy(blk + f->off_qh, &qh, sizeof qh);
    }
}

static void legacy_dequantize(const legacy_format *f, const void *src, float *dst, int64_t n)
{
    const uint8_t *blk = src;
    for (int64_t b = 0; b < n / BG_QK; b++, blk += f->bytes, dst += BG_QK) {
        legacy_decoded q;
        legacy_decode(f, blk, &q);
        /* No "+ 0" for symmetric formats: it would turn -0 into +0. */
        for (int j = 0; j < BG_QK; j++)
            dst[j] = q.has_min ? q.v[j] * q.d + q.m : q.v[j] * q.d;
    }
}

/* Symmetric 4/5-bit (Q4_0, Q5_0): the value of largest magnitude maps to
 * code 0 exactly, d = max / -2^(bits-1). Codes truncate x/d + zero + 0.5. */
static void quantize_symmetric_block(const legacy_format *f, const float *x, uint8_t *blk)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < BG_QK; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    const float d = max / (float)-f->zero;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float offset = (float)f->zero + 0.5f;
    const int top = (1 << f->bits) - 1;

    uint8_t codes[BG_QK];
    for (int j = 0; j < BG_QK; j++)
        codes[j] = (uint8_t)min_int(top, (int)(x[j] * id + offset));
    store_f16(blk, d);
    legacy_pack(f, codes, blk);
}

/* Affine 4/5-bit (Q4_1, Q5_1): [min, max] spans all codes, m = min. */
static void quantize_affine_block(const legacy_format *f, const float *x, uint8_t *blk)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < BG_QK; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    const int top = (1 << f->bits) - 1;
    const float d = (max - min) / (float)top;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;

    uint8_t codes[BG_QK];
    for (int j = 0; j < BG_QK; j++)
        codes[j] = (uint8_t)min_int(top, (int)((x[j] - min) * id + 0.5f));
    store_f16(blk, d);
    store_f16(blk + f->off_m, min);
    legacy_pack(f, codes, blk);
}

static void legacy_quantize(const legacy_format *f, const float *src, void *dst, int64_t n)
{
    uint8_t *blk = dst;
    for (int64_t b = 0; b < n / BG_QK; b++, blk += f->bytes, src += BG_QK) {
        if (f->off_m)
            quantize_affine_block(f, src, blk);
        else
            quantize_symmetric_block(f, src, blk);
    }
}

/* 8-bit block: d = amax / 127, q = round-half-away(x / d). Returns the
 * unrounded d (Q8_1's s is computed from it). */
static float quantize_q8_block(const float *x, uint8_t *blk, int8_t *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < BG_QK; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < BG_QK; j++)
        qs[j] = (int8_t)roundf(x[j] * id);
    store_f16(blk, d);
    return d;
}

static void quantize_q8_0(const float *src, void *dst, int64_t n)
{
    bg_block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++)
        quantize_q8_block(src + b * BG_QK, (uint8_t *)&y[b], y[b].qs);
}

static void quantize_q8_1(const float *src, void *dst, int64_t n)
{
    bg_block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++) {
        const float d = quantize_q8_block(src + b * BG_QK, (uint8_t *)&y[b], y[b].qs);
        y[b].s = bg_f32_to_f16((float)sum_i8(y[b].qs, BG_QK) * d);
    }
}

/* One block of activations as ggml's x86 CPU code quantizes it: d = amax/127,
 * codes round(x * (127/amax)) with ties to even. Returns d unrounded. */
static float activation_q8_block(const float *x, uint16_t *d_out, int8_t *qs)
{
    float amax = 0;
    for (int i = 0; i < BG_QK; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    *d_out = bg_f32_to_f16(d);
    /* default rounding: half to even. A product that is not finite (a NaN
     * input, infinity times the zero scale of an infinite max, anything
     * times the infinite scale of a tiny max) is code 0: converting it
     * would be undefined, and gcc and clang make different codes of it. */
    for (int i = 0; i < BG_QK; i++) {
        const float v = x[i] * id;
        qs[i] = isfinite(v) ? (int8_t)nearbyintf(v) : 0;
    }
    return d;
}

static void activations_q8_0(const float *src, void *dst, int64_t n)
{
    bg_block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++)
        activation_q8_block(src + b * BG_QK, &y[b].d, y[b].qs);
}

static void activations_q8_1(const float *src, void *dst, int64_t n)
{
    bg_block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++) {
        const float d = activation_q8_block(src + b * BG_QK, &y[b].d, y[b].qs);
        y[b].s = bg_f32_to_f16(d * (float)sum_i8(y[b].qs, BG_QK));
    }
}

/* Weights in a 32-element format against Q8_0 activations, or Q8_1 for
 * formats with a min. The min term uses Q8_1's s (d times the sum of the
 * codes, rounded to fp16) as ggml does, so results follow its rounding: it
 * differs from the exact sum by up to 2^-11 |m * s| per block. */
static float legacy_dot(const legacy_format *f, int64_t n, const void *w, const void *a)
{
    const legacy_format *af = f->off_m ? &fmt_q8_1 : &fmt_q8_0;
    const uint8_t *wb = w, *ab = a;
    double sum = 0;
    for (int64_t b = 0; b < n / BG_QK; b++, wb += f->bytes, ab += af->bytes) {
        legacy_decoded qw, qa;
        legacy_decode(f, wb, &qw);
        legacy_decode(af, ab, &qa);
        sum += (double)qw.d * qa.d * dot_i8(qw.v, qa.v, BG_QK);
        if (qw.has_min)
            sum += (double)qw.m * bg_f16_to_f32(((const bg_block_q8_1 *)(const void *)ab)->s);
    }
    return (float)sum;
}

/* ------------------------------------------------------------------------
 * Super-block formats
 * ------------------------------------------------------------------------ */

/* x[e] = d * scale[g] * v[e] - dmin * min[g], for e in group g. */
typedef struct sb_decoded {
    float d, dmin; /* dmin and min[] are meaningful only if has_min */
    bool has_min;
    int group; /* elements per scale: 16 or 32 */
    int scale[BG_QK_K / 16], min[BG_QK_K / 16];
    int8_t v[BG_QK_K];
} sb_decoded;

typedef void (*sb_decode_fn)(const void *blk, sb_decoded *out);

static void sb_dequantize(sb_decode_fn decode, size_t bytes, const void *src, float *dst,
                          int64_t n)
{
    const uint8_t *blk = src;
    for (int64_t b = 0; b < n / BG_QK_K; b++, blk += bytes) {
        sb_decoded q;
        decode(blk, &q);
        for (int g = 0; g < BG_QK_K / q.group; g++) {
            const float ds = q.d * (float)q.scale[g];
            const float dm = q.dmin * (float)q.min[g];
            for (int j = 0; j < q.group; j++, dst++) {
                const float v = q.v[g * q.group + j];
                *dst = q.has_min ? ds * v - dm : ds * v;
            }
        }
    }
}

/* Weights against Q8_K activations; the min term uses the exact group sums
 * the activations carry in bsums. */
static float sb_dot(sb_decode_fn decode, size_t bytes, int64_t n, const void *w, const void *a)
{
    const uint8_t *wb = w;
    const bg_block_q8_K *qa = a;
    double sum = 0;
    for (int64_t b = 0; b < n / BG_QK_K; b++, wb += bytes, qa++) {
        sb_decoded q;
        decode(wb, &q);
        const int per_group = q.group / 16; /* bsums per group */
        int64_t isum = 0, msum = 0;
        for (int g = 0; g < BG_QK_K / q.group; g++) {
            const int at = g * q.group;
            isum += (int64_t)q.scale[g] * dot_i8(q.v + at, qa->qs + at, q.group);
            for (int k = 0; k < per_group; k++)
                msum += (int64_t)q.min[g] * qa->bsums[g * per_group + k];
        }
        sum += (double)q.d * qa->d * (double)isum;
        if (q.has_min)
            sum -= (double)q.dmin * qa->d * (double)msum;
    }
    return (float)sum;
}

/* Q4_K/Q5_K scales: eight 6-bit scales and eight 6-bit mins in 12 bytes.
 * Groups 0-3 take the low 6 bits of bytes 0-3 (scale) and 4-7 (min);
 * groups 4-7 keep their low nibbles in bytes 8-11 (scale low, min high)
 * and their top two bits in the top bits of bytes 0-3 (scale), 4-7 (min). */
static void pack_k_scales(const uint8_t *sc, const uint8_t *mn, uint8_t *out)
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
    }
}

static void unpack_k_scales(const uint8_t *in, int *sc, int *mn)
{
    for (int j = 0; j < 4; j++) {
        sc[j] = in[j] & 63;
        mn[j] = in[j + 4] & 63;
        sc[j + 4] = (in[j + 8] & 0xF) | (in[j] >> 6) << 4;
        mn[j + 4] = (in[j + 8] >> 4) | (in[j + 4] >> 6) << 4;
    }
}

/* The low two bits of the codes of Q2_K/Q3_K: in each 128-element chunk,
 * byte l of its 32 bytes holds element 32k + l in bits 2k..2k+1 (the bits
 * above go elsewhere: pack_high_bits). */
static void unpack_crumbs(const uint8_t *qs, uint8_t *codes)
{
    for (int c = 0; c < BG_QK_K / 128; c++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                codes[128 * c + 32 * k + l] = (qs[32 * c + l] >> (2 * k)) & 3;
}

static void pack_crumbs(const uint8_t *codes, uint8_t *qs)
{
    for (int c = 0; c < BG_QK_K / 128; c++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *q = codes + 128 * c + l;
            qs[32 * c + l] =
                (uint8_t)((q[0] & 3) | (q[32] & 3) << 2 | (q[64] & 3) << 4 | (q[96] & 3) << 6);
        }
}

static void decode_q2_K(const void *blk, sb_decoded *out)
{
    const bg_block_q2_K *x = blk;
    out->d = load_f16((const uint8_t *)&x->d);
    out->dmin = load_f16((const uint8_t *)&x->dmin);
    out->has_min = true;
    out->group = 16;
    for (int g = 0; g < BG_QK_K / 16; g++) {
        out->scale[g] = x->scales[g] & 0xF;
        out->min[g] = x->scales[g] >> 4;
    }
    uint8_t codes[BG_QK_K];
    unpack_crumbs(x->qs, codes);
    for (int e = 0; e < BG_QK_K; e++)
        out->v[e] = (int8_t)codes[e];
}

/* Q3_K scales: sixteen 6-bit values stored biased by 32. Bytes 0-7 hold
 * the low nibbles (group g low in byte g, group g + 8 high); the top two
 * bits of group g sit at bits 2 * (g / 4) of byte 8 + g % 4. */
static void pack_q3_scales(const uint8_t *sc, uint8_t *out)
{
    memset(out, 0, BG_K_SCALE_BYTES);
    for (int g = 0; g < 16; g++) {
        out[g % 8] |= (uint8_t)((sc[g] & 0xF) << (g < 8 ? 0 : 4));
        out[8 + g % 4] |= (uint8_t)((sc[g] >> 4) << (2 * (g / 4)));
    }
}

static int q3_scale(const uint8_t *in, int g)
{
    const int lo = (in[g % 8] >> (g < 8 ? 0 : 4)) & 0xF;
    const int hi = (in[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static void decode_q3_K(const void *blk, sb_decoded *out)
{
    const bg_block_q3_K *x = blk;
    out->d = load_f16((const uint8_t *)&x->d);
    out->dmin = 0.0f;
    out->has_min = false;
    out->group = 16;
    for (int g = 0; g < BG_QK_K / 16; g++)
        out->scale[g] = q3_scale(x->scales, g);
    uint8_t codes[BG_QK_K];
    unpack_crumbs(x->qs, codes);
    unpack_high_bits(x->hmask, BG_QK_K, 2, 1, codes);
    for (int e = 0; e < BG_QK_K; e++)
        out->v[e] = (int8_t)(codes[e] - 4);
}

static void decode_k_header(const uint8_t *d, const uint8_t *dmin, const uint8_t *scales,
                            sb_decoded *out)
{
    out->d = load_f16(d);
    out->dmin = load_f16(dmin);
    out->has_min = true;
    out->group = 32;
    unpack_k_scales(scales, out->scale, out->min);
}

static void decode_q4_K(const void *blk, sb_decoded *out)
{
    const bg_block_q4_K *x = blk;
    decode_k_header((const uint8_t *)&x->d, (const uint8_t *)&x->dmin, x->scales, out);
    uint8_t codes[BG_QK_K];
    for (int c = 0; c < BG_QK_K / 64; c++)
        unpack_nibbles(x->qs + 32 * c, 32, codes + 64 * c);
    for (int e = 0; e < BG_QK_K; e++)
        out->v[e] = (int8_t)codes[e];
}

static void decode_q5_K(const void *blk, sb_decoded *out)
{
    const bg_block_q5_K *x = blk;
    decode_k_header((const uint8_t *)&x->d, (const uint8_t *)&x->dmin, x->scales, out);
    uint8_t codes[BG_QK_K];
    for (int c = 0; c < BG_QK_K / 64; c++)
        unpack_nibbles(x->qs + 32 * c, 32, codes + 64 * c);
    unpack_high_bits(x->qh, BG_QK_K, 4, 1, codes);
    for (int e = 0; e < BG_QK_K; e++)
        out->v[e] = (int8_t)codes[e];
}

static void decode_q6_K(const void *blk, sb_decoded *out)
{
    const bg_block_q6_K *x = blk;
    out->d = load_f16((const uint8_t *)&x->d);
    out->dmin = 0.0f;
    out->has_min = false;
    out->group = 16;
    uint8_t codes[BG_QK_K];
    for (int c = 0; c < BG_QK_K / 128; c++) {
        unpack_nibbles(x->ql + 64 * c, 64, codes + 128 * c);
        unpack_high_bits(x->qh + 32 * c, 128, 4, 2, codes + 128 * c);
    }
    for (int g = 0; g < BG_QK_K / 16; g++)
        out->scale[g] = x->scales[g];
    for (int e = 0; e < BG_QK_K; e++)
        out->v[e] = (int8_t)(codes[e] - 32);
}

static void decode_iq4_xs(const void *blk, sb_decoded *out)
{
    const bg_block_iq4_xs *x = blk;
    out->d = load_f16((const uint8_t *)&x->d);
    out->dmin = 0.0f;
    out->has_min = false;
    out->group = 32;
    for (int g = 0; g < BG_QK_K / 32; g++) {
        const int lo = (x->scales_l[g / 2] >> (4 * (g % 2))) & 0xF;
        const int hi = (x->scales_h >> (2 * g)) & 3;
        out->scale[g] = (lo | hi << 4) - 32;
        uint8_t codes[32];
        unpack_nibbles(x->qs + 16 * g, 16, codes);
        for (int j = 0; j < 32; j++)
            out->v[32 * g + j] = iq4_values[codes[j]];
    }
}

static void decode_q8_K(const void *blk, sb_decoded *out)
{
    const bg_block_q8_K *x = blk;
    out->d = x->d;
    out->dmin = 0.0f;
    out->has_min = false;
    out->group = 16;
    for (int g = 0; g < BG_QK_K / 16; g++)
        out->scale[g] = 1; /* d * 1 == d: same values as d * q */
    memcpy(out->v, x->qs, BG_QK_K);
}

/* Fits x ~ scale * L - min over n weighted values, L in 0..nmax, min >= 0
 * (ggml's make_qkx2_quants): a first guess from the range, then nstep + 1
 * trial scales around nmax / range, each refined by weighted least squares;
 * keeps the trial with the lowest weighted error, squared or, with
 * abs_error, absolute (Q2_K). Returns scale, stores min (as a non-negative
 * offset) and the codes. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, float rmin,
                           float rdelta, int nstep, bool abs_error, uint8_t *L, float *the_min)
{
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0; /* the offset only ever lowers values */
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }

    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(round_nearest(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (abs_error ? fabsf(diff) : diff * diff);
    }

    uint8_t trial[32]; /* n <= 32 */
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(round_nearest(iscale * (x[i] - min)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float error = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * trial[i] + this_min - x[i];
            error += w[i] * (abs_error ? fabsf(diff) : diff * diff);
        }
        if (error < best_error) {
            memcpy(L, trial, (size_t)n);
            best_error = error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* A group's codes again from its scale as stored (dg, and mg for a min):
 * L = x / dg rounded into 0..nmax (affine: (x + mg) / dg), or -nmax..nmax-1
 * stored + nmax (signed). A zero scale keeps the fitted codes. */
static void requantize_affine(const float *x, int n, float dg, float mg, int nmax, uint8_t *L)
{
    if (dg == 0.0f)
        return;
    for (int j = 0; j < n; j++)
        L[j] = (uint8_t)clamp_int(round_nearest((x[j] + mg) / dg), 0, nmax);
}

static void requantize_signed(const float *x, int n, float dg, int nmax, int8_t *L)
{
    if (dg == 0.0f)
        return;
    for (int j = 0; j < n; j++)
        L[j] = (int8_t)(clamp_int(round_nearest(x[j] / dg), -nmax, nmax - 1) + nmax);
}

/* Q4_K and Q5_K: fit each group of 32, quantize the group scales and mins
 * to 6 bits against the largest of each, then requantize the values with
 * the scales as stored. Leaves the codes (0..nmax) in L. */
static void quantize_k_affine(const float *x, int nmax, float rmin, int nstep, uint16_t *d,
                              uint16_t *dmin, uint8_t *scales, uint8_t *L)
{
    float scale[8], min[8], weight[32];
    float max_scale = 0, max_min = 0;
    for (int g = 0; g < 8; g++) {
        const float *xg = x + 32 * g;
        /* weights favour large values, with a floor at the group's rms */
        float sum_x2 = 0;
        for (int j = 0; j < 32; j++)
            sum_x2 += xg[j] * xg[j];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int j = 0; j < 32; j++)
            weight[j] = av_x + fabsf(xg[j]);
        scale[g] = fit_scale_min(32, nmax, xg, weight, rmin, 0.1f, nstep, false, L + 32 * g,
                                 &min[g]);
        if (scale[g] > max_scale)
            max_scale = scale[g];
        if (min[g] > max_min)
            max_min = min[g];
    }

    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int g = 0; g < 8; g++) {
        /* truncation to 8 bits before the clamp is ggml's (matters only for
         * a negative fitted scale, which then saturates to 63) */
        ls[g] = (uint8_t)min_int(63, (uint8_t)round_nearest(inv_scale * scale[g]));
        lm[g] = (uint8_t)min_int(63, (uint8_t)round_nearest(inv_min * min[g]));
    }
    pack_k_scales(ls, lm, scales);
    *d = bg_f32_to_f16(max_scale / 63.f);
    *dmin = bg_f32_to_f16(max_min / 63.f);

    const float df = bg_f16_to_f32(*d), dminf = bg_f16_to_f32(*dmin);
    for (int g = 0; g < 8; g++)
        requantize_affine(x + 32 * g, 32, df * ls[g], dminf * lm[g], nmax, L + 32 * g);
}

static void quantize_q4_K(const float *src, void *dst, int64_t n)
{
    bg_block_q4_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        uint8_t L[BG_QK_K];
        quantize_k_affine(src, 15, -1.0f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
        for (int c = 0; c < BG_QK_K / 64; c++)
            pack_nibbles(L + 64 * c, 32, y[b].qs + 32 * c);
    }
}

static void quantize_q5_K(const float *src, void *dst, int64_t n)
{
    bg_block_q5_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        uint8_t L[BG_QK_K];
        quantize_k_affine(src, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
        for (int c = 0; c < BG_QK_K / 64; c++)
            pack_nibbles(L + 64 * c, 32, y[b].qs + 32 * c);
        pack_high_bits(L, BG_QK_K, 4, 1, y[b].qh);
    }
}

/* The value of largest magnitude, the first of equals (0 for none). */
static float signed_extreme(int n, const float *x)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    return max;
}

/* Signed codes l in -nmax..nmax-1 for x ~ scale * l, weighted by x^2
 * (ggml's make_qx_quants, rmse_type 1): the scale that maps the extreme
 * value to -nmax, and 18 perturbations of it, each refined by weighted
 * least squares; keeps the best. Returns the scale, codes + nmax in L. */
static float fit_signed_scale(int n, int nmax, const float *x, int8_t *L)
{
    const float max = signed_extreme(n, x);
    if (fabsf(max) < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }

    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;

    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        int8_t trial[32]; /* n <= 32 */
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1);
            trial[i] = (int8_t)(l + nmax);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        /* compares sumlx^2 / suml2 against the best without dividing */
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            memcpy(L, trial, (size_t)n);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void quantize_q6_K(const float *src, void *dst, int64_t n)
{
    bg_block_q6_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        int8_t L[BG_QK_K];
        float scale[16];
        for (int g = 0; g < 16; g++)
            scale[g] = fit_signed_scale(16, 32, src + 16 * g, L + 16 * g);
        const float max_scale = signed_extreme(16, scale);
        if (fabsf(max_scale) < GROUP_EPS) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }

        /* the group scales become int8 against the extreme one at -128 */
        const float iscale = -128.f / max_scale;
        y[b].d = bg_f32_to_f16(1 / iscale);
        for (int g = 0; g < 16; g++)
            y[b].scales[g] = (int8_t)min_int(127, round_nearest(iscale * scale[g]));

        const float df = bg_f16_to_f32(y[b].d);
        for (int g = 0; g < 16; g++)
            requantize_signed(src + 16 * g, 16, df * y[b].scales[g], 32, L + 16 * g);

        const uint8_t *codes = (const uint8_t *)L;
        for (int c = 0; c < BG_QK_K / 128; c++) {
            pack_nibbles(codes + 128 * c, 64, y[b].ql + 64 * c);
            pack_high_bits(codes + 128 * c, 128, 4, 2, y[b].qh + 32 * c);
        }
    }
}

/* Q2_K: each group of 16 fitted as scale * L - min, L in 0..3, weighted by
 * |x| with absolute errors; scales and mins to 4 bits against the largest
 * of each; the values requantized with the scales as stored. */
static void quantize_q2_K(const float *src, void *dst, int64_t n)
{
    bg_block_q2_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        uint8_t L[BG_QK_K];
        float scale[16], min[16], weight[16];
        float max_scale = 0, max_min = 0;
        for (int g = 0; g < 16; g++) {
            for (int j = 0; j < 16; j++)
                weight[j] = fabsf(src[16 * g + j]);
            scale[g] = fit_scale_min(16, 3, src + 16 * g, weight, -0.5f, 0.1f, 15, true,
                                     L + 16 * g, &min[g]);
            if (scale[g] > max_scale)
                max_scale = scale[g];
            if (min[g] > max_min)
                max_min = min[g];
        }

        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int g = 0; g < 16; g++) /* a negative fit wraps as in ggml */
                y[b].scales[g] = (uint8_t)round_nearest(iscale * scale[g]);
        }
        y[b].d = bg_f32_to_f16(max_scale > 0 ? max_scale / 15.f : 0.f);
        if (max_min > 0) {
            const float imin = 15.f / max_min;
            for (int g = 0; g < 16; g++)
                y[b].scales[g] |= (uint8_t)(round_nearest(imin * min[g]) << 4);
        }
        y[b].dmin = bg_f32_to_f16(max_min > 0 ? max_min / 15.f : 0.f);

        const float df = bg_f16_to_f32(y[b].d), dminf = bg_f16_to_f32(y[b].dmin);
        for (int g = 0; g < 16; g++)
            requantize_affine(src + 16 * g, 16, df * (float)(y[b].scales[g] & 0xF),
                              dminf * (float)(y[b].scales[g] >> 4), 3, L + 16 * g);
        pack_crumbs(L, y[b].qs);
    }
}

/* Signed codes l in -nmax..nmax-1 for x ~ scale * l, weighted by x^2
 * (ggml's make_q3_quants with its rmse search): the scale that maps the
 * extreme value to -nmax, then up to five passes that move single codes
 * to their best value given the others while that raises sumlx^2 / suml2.
 * Returns the least-squares scale, codes + nmax in L (all 0 for a zero
 * group). */
static float fit_signed_codes(int n, int nmax, const float *x, int8_t *L)
{
    const float max = signed_extreme(n, x);
    if (fabsf(max) < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }

    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (int8_t)clamp_int(round_nearest(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * L[i];
        suml2 += w * L[i] * L[i];
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0))
                continue;
            float sl2 = suml2 - w * L[i] * L[i];
            const int l = clamp_int(round_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i])
                continue;
            slx += w * x[i] * l;
            sl2 += w * l * l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)l;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Q3_K: each group of 16 fitted with signed 3-bit codes, the group scales
 * to 6 bits against the extreme one at -32, the values requantized with
 * the scales as stored. */
static void quantize_q3_K(const float *src, void *dst, int64_t n)
{
    bg_block_q3_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        int8_t L[BG_QK_K];
        float scale[16];
        for (int g = 0; g < 16; g++)
            scale[g] = fit_signed_codes(16, 4, src + 16 * g, L + 16 * g);
        const float max_scale = signed_extreme(16, scale);

        uint8_t ls[16] = {0};
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int g = 0; g < 16; g++)
                ls[g] = (uint8_t)(clamp_int(round_nearest(iscale * scale[g]), -32, 31) + 32);
            y[b].d = bg_f32_to_f16(1 / iscale);
        } else {
            y[b].d = bg_f32_to_f16(0.f);
        }
        pack_q3_scales(ls, y[b].scales);

        const float df = bg_f16_to_f32(y[b].d);
        for (int g = 0; g < 16; g++)
            requantize_signed(src + 16 * g, 16, df * (float)q3_scale(y[b].scales, g), 4,
                              L + 16 * g);

        const uint8_t *codes = (const uint8_t *)L;
        pack_crumbs(codes, y[b].qs);
        pack_high_bits(codes, BG_QK_K, 2, 1, y[b].hmask);
    }
}

static void quantize_q8_K(const float *src, void *dst, int64_t n)
{
    bg_block_q8_K *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < BG_QK_K; j++) {
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            /* ggml leaves bsums unwritten here; zero is their true value */
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* -127 (not -128) keeps every code's negation representable */
        const float iscale = -127.f / max;
        for (int j = 0; j < BG_QK_K; j++)
            y[b].qs[j] = (int8_t)min_int(127, round_nearest(iscale * src[j]));
        for (int g = 0; g < BG_QK_K / 16; g++)
            y[b].bsums[g] = (int16_t)sum_i8(y[b].qs + 16 * g, 16);
        y[b].d = 1 / iscale;
    }
}

/* ------------------------------------------------------------------------
 * IQ4: 4-bit indices into iq4_values
 * ------------------------------------------------------------------------ */

/* Fits x ~ d * iq4_values[idx] over 32 values weighted by x^2: starts from
 * the d mapping the extreme value onto the codebook's -127 end, then tries
 * 15 scales around it, keeping the least-squares d of the best (the codes
 * are recomputed by the caller from the final scale). 0 for a zero group. */
static float fit_iq4_scale(const float *x)
{
    enum { NTRY = 7 };
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < GROUP_EPS)
        return 0.0f;

    float d = -max / (float)iq4_values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        const float q = iq4_values[iq4_nearest_index(id * x[j])];
        const float w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;

    for (int itry = -NTRY; itry <= NTRY; itry++) {
        id = (float)(itry + iq4_values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const float q = iq4_values[iq4_nearest_index(id * x[j])];
            const float w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void iq4_indices(const float *x, float id, uint8_t *codes)
{
    for (int j = 0; j < 32; j++)
        codes[j] = (uint8_t)iq4_nearest_index(id * x[j]);
}

static void quantize_iq4_nl(const float *src, void *dst, int64_t n)
{
    bg_block_iq4_nl *y = dst;
    for (int64_t b = 0; b < n / BG_QK; b++, src += BG_QK) {
        const float d = fit_iq4_scale(src);
        uint8_t codes[BG_QK];
        iq4_indices(src, d != 0.0f ? 1 / d : 0.0f, codes);
        y[b].d = bg_f32_to_f16(d);
        legacy_pack(&fmt_iq4_nl, codes, (uint8_t *)&y[b]);
    }
}

static void quantize_iq4_xs(const float *src, void *dst, int64_t n)
{
    bg_block_iq4_xs *y = dst;
    for (int64_t b = 0; b < n / BG_QK_K; b++, src += BG_QK_K) {
        float scale[8];
        float max_scale = 0, amax_scale = 0;
        for (int g = 0; g < 8; g++) {
            scale[g] = fit_iq4_scale(src + 32 * g);
            if (fabsf(scale[g]) > amax_scale) {
                amax_scale = fabsf(scale[g]);
                max_scale = scale[g];
            }
        }
        /* group scales become 6-bit signed, the extreme one at -32 */
        const float d = -max_scale / 32;
        const float id = d != 0.0f ? 1 / d : 0.0f;
        y[b].d = bg_f32_to_f16(d);
        y[b].scales_h = 0;
        memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        for (int g = 0; g < 8; g++) {
            const int l = clamp_int(round_nearest(id * scale[g]), -32, 31);
            const float dl = d * (float)l; /* the unrounded d, as ggml */
            uint8_t codes[32];
            iq4_indices(src + 32 * g, dl != 0.0f ? 1 / dl : 0.0f, codes);
            pack_nibbles(codes, 16, y[b].qs + 16 * g);
            const int ls = l + 32;
            y[b].scales_l[g / 2] |= (uint8_t)((ls & 0xF) << (4 * (g % 2)));
            y[b].scales_h |= (uint16_t)((ls >> 4) << (2 * g));
        }
    }
}

/* ------------------------------------------------------------------------
 * The ops table
 * ------------------------------------------------------------------------ */

static void dequantize_q4_0(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_q4_0, s, d, n); }
static void dequantize_q4_1(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_q4_1, s, d, n); }
static void dequantize_q5_0(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_q5_0, s, d, n); }
static void dequantize_q5_1(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_q5_1, s, d, n); }
static void dequantize_q8_0(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_q8_0, s, d, n); }
static void dequantize_q8_1(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_q8_1, s, d, n); }
static void dequantize_iq4_nl(const void *s, float *d, int64_t n) { legacy_dequantize(&fmt_iq4_nl, s, d, n); }

static void quantize_q4_0(const float *s, void *d, int64_t n) { legacy_quantize(&fmt_q4_0, s, d, n); }
static void quantize_q4_1(const float *s, void *d, int64_t n) { legacy_quantize(&fmt_q4_1, s, d, n); }
static void quantize_q5_0(const float *s, void *d, int64_t n) { legacy_quantize(&fmt_q5_0, s, d, n); }
static void quantize_q5_1(const float *s, void *d, int64_t n) { legacy_quantize(&fmt_q5_1, s, d, n); }

static float dot_q4_0(int64_t n, const void *w, const void *a) { return legacy_dot(&fmt_q4_0, n, w, a); }
static float dot_q4_1(int64_t n, const void *w, const void *a) { return legacy_dot(&fmt_q4_1, n, w, a); }
static float dot_q5_0(int64_t n, const void *w, const void *a) { return legacy_dot(&fmt_q5_0, n, w, a); }
static float dot_q5_1(int64_t n, const void *w, const void *a) { return legacy_dot(&fmt_q5_1, n, w, a); }
static float dot_q8_0(int64_t n, const void *w, const void *a) { return legacy_dot(&fmt_q8_0, n, w, a); }
static float dot_iq4_nl(int64_t n, const void *w, const void *a) { return legacy_dot(&fmt_iq4_nl, n, w, a); }

#define SB_KERNELS(name)                                                                 \
    static void dequantize_##name(const void *s, float *d, int64_t n)                    \
    {                                                                                    \
        sb_dequantize(decode_##name, sizeof(bg_block_##name), s, d, n);                  \
    }                                                                                    \
    static float dot_##name(int64_t n, const void *w, const void *a)                     \
    {                                                                                    \
        return sb_dot(decode_##name, sizeof(bg_block_##name), n, w, a);                  \
    }
SB_KERNELS(q2_K)
SB_KERNELS(q3_K)
SB_KERNELS(q4_K)
SB_KERNELS(q5_K)
SB_KERNELS(q6_K)
SB_KERNELS(iq4_xs)
#undef SB_KERNELS

static void dequantize_q8_K(const void *s, float *d, int64_t n)
{
    sb_dequantize(decode_q8_K, sizeof(bg_block_q8_K), s, d, n);
}

#define OPS(T, DT, name, dot)                                                            \
    [BG_TYPE_##T] = {BG_TYPE_##T, BG_TYPE_##DT, dequantize_##name, quantize_##name,          \
                     quantize_##name, dot}
#define OPS_ACT(T, DT, name, dot)                                                        \
    [BG_TYPE_##T] = {BG_TYPE_##T, BG_TYPE_##DT, dequantize_##name, quantize_##name,          \
                     activations_##name, dot}

static const bg_quant_ops ops_table[BG_TYPE_COUNT] = {
    OPS(F32, F32, f32, dot_f32),
    OPS(F16, F16, f16, dot_f16),
    OPS(BF16, BF16, bf16, dot_bf16),
    OPS(Q4_0, Q8_0, q4_0, dot_q4_0),
    OPS(Q4_1, Q8_1, q4_1, dot_q4_1),
    OPS(Q5_0, Q8_0, q5_0, dot_q5_0),
    OPS(Q5_1, Q8_1, q5_1, dot_q5_1),
    OPS_ACT(Q8_0, Q8_0, q8_0, dot_q8_0),
    OPS_ACT(Q8_1, Q8_1, q8_1, NULL),
    OPS(Q2_K, Q8_K, q2_K, dot_q2_K),
    OPS(Q3_K, Q8_K, q3_K, dot_q3_K),
    OPS(Q4_K, Q8_K, q4_K, dot_q4_K),
    OPS(Q5_K, Q8_K, q5_K, dot_q5_K),
    OPS(Q6_K, Q8_K, q6_K, dot_q6_K),
    OPS(Q8_K, Q8_K, q8_K, NULL),
    OPS(IQ4_NL, Q8_0, iq4_nl, dot_iq4_nl),
    OPS(IQ4_XS, Q8_K, iq4_xs, dot_iq4_xs),
};
#undef OPS

const bg_quant_ops *bg_quant_ops_get(bg_type type)
{
    if ((unsigned)type >= BG_TYPE_COUNT || ops_table[type].dequantize == NULL)
        return NULL;
    return &ops_table[type];
}
