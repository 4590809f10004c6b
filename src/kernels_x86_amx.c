/* AMX tiled products for prefill (Sapphire Rapids and later): 16 weight
 * rows by 16 activation rows per tile multiply.
 *
 * Why: a dot product keeps one weight row in the vector lanes and spends
 * about two 512-bit multiplies per 64 weights on every activation row. One
 * AMX TDPBUSD multiplies a 16 x 64 tile of weight codes by a 64 x 16 tile of
 * activations (16384 products), so the integer work almost disappears; what
 * remains is unpacking the weights and scaling the integer results.
 *
 * Layout:
 *  - Activations (Q8_K or Q8_0 rows) are packed once per product, for every
 *    block of 16 rows and super-block, into a record: the 256 codes in the
 *    "VNNI" order the B tile takes (row k/4, column 4t + k%4 holds code k
 *    of activation row t), the scales d and, for Q4_K's mins, the rows'
 *    32-code sums as s16 pairs. Rows past the end are zero, so they add
 *    nothing.
 *  - Q4_K and Q6_K weights are unpacked per stripe of 16 rows and up to
 *    AMX_CHUNK super-blocks into two byte planes with each group's scale
 *    folded in (see folded_stripe), so a super-block is four 64-deep
 *    multiplies per plane and one pass through memory (tiles have no path
 *    to vector registers) to turn its exact integer sum to float. Q8_0 A
 *    tiles are read from the matrix itself, one 32-code block a multiply.
 *
 * The integer sums are exact, as in the dots; the float steps are ordered
 * differently, so results differ from the dots in the last bits (llama.cpp's
 * own prefill kernels differ from its vec_dot in the same way). matmul.c
 * uses these only for micro-batches of at least their min_act rows; decode
 * keeps the dots. */
#include "kernels.h"

#ifdef BG_KERNELS_X86
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels_x86_tiled.h"
#include "quant.h"

#define BG_AMX __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,f16c,amx-tile,amx-int8")))

/* Super-blocks of a stripe unpacked at a time: two planes of 16 rows x 8 x
 * 256 bytes, 64 KB (L2; each tile load reads 16 lines of it). */
#define AMX_CHUNK 8

/* One block of 16 activation rows, one super-block. */
typedef struct bg_amx_act {
    int8_t q[BG_QK_K / 4][64]; /* q[k / 4][4 t + k % 4] = code k of row t */
    float d[16];
    int32_t sum32_pair[4][16]; /* sums of codes 64p.. 64p+31 (low) and the next 32 (high) */
} bg_amx_act;

size_t bg_amx_packed_bytes(int64_t n_in, int64_t n_act)
{
    return (size_t)((n_act + 15) / 16) * (size_t)(n_in / BG_QK_K) * sizeof(bg_amx_act);
}

/* out[d] lane i = in[i] lane d: a 16 x 16 transpose of 32-bit elements. */
BG_AMX static void transpose16(const __m512i in[16], __m512i out[16])
{
    __m512i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    /* a[2i] lane group k: in[2i][4k], in[2i+1][4k], in[2i][4k+1], in[2i+1][4k+1] */
    for (int q = 0; q < 4; q++) {
        b[4 * q + 0] = _mm512_unpacklo_epi64(a[4 * q], a[4 * q + 2]);
        b[4 * q + 1] = _mm512_unpackhi_epi64(a[4 * q], a[4 * q + 2]);
        b[4 * q + 2] = _mm512_unpacklo_epi64(a[4 * q + 1], a[4 * q + 3]);
        b[4 * q + 3] = _mm512_unpackhi_epi64(a[4 * q + 1], a[4 * q + 3]);
    }
    /* b[4q + m] lane group k: element 4k + m of rows 4q .. 4q + 3 */
    for (int m = 0; m < 4; m++) {
        const __m512i c = _mm512_shuffle_i32x4(b[m], b[4 + m], 0x88);
        const __m512i d = _mm512_shuffle_i32x4(b[m], b[4 + m], 0xDD);
        const __m512i e = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0x88);
        const __m512i f = _mm512_shuffle_i32x4(b[8 + m], b[12 + m], 0xDD);
        out[m] = _mm512_shuffle_i32x4(c, e, 0x88);
        out[8 + m] = _mm512_shuffle_i32x4(c, e, 0xDD);
        out[4 + m] = _mm512_shuffle_i32x4(d, f, 0x88);
        out[12 + m] = _mm512_shuffle_i32x4(d, f, 0xDD);
    }
}

void bg_amx_pack_q8_K(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                     void *packed) BG_AMX;

void bg_amx_pack_q8_K(int64_t n_in, const void *xq, size_t xq_row, int64_t n_act, int64_t block,
                     void *packed)
{
    const int64_t nb = n_in / BG_QK_K, t0 = block * 16;
    bg_amx_act *out = (bg_amx_act *)packed + block * nb;
    for (int64_t s = 0; s < nb; s++, out++) {
        const bg_block_q8_K *rows[16];
        bg_q8_K_rows16(xq, xq_row, n_act, t0, s, rows);
        for (int part = 0; part < 4; part++) {
            __m512i in[16], tr[16];
            for (int t = 0; t < 16; t++)
                in[t] = rows[t] ? _mm512_loadu_si512(rows[t]->qs + 64 * part)
                                : _mm512_setzero_si512();
            transpose16(in, tr);
            for (int k = 0; k < 16; k++)
                _mm512_storeu_si512(out->q[16 * part + k], tr[k]);
        }
        for (int t = 0; t < 16; t++) {
            out->d[t] = rows[t] ? rows[t]->d : 0.0f;
            const int16_t *bs = rows[t] ? rows[t]->bsums : NULL;
            /* |a sum of 32 codes| <= 4096: an s16 */
            for (int p = 0; p < 4; p++)
                out->sum32_pair[p][t] =
                    bs ? bg_s16_pair(bs[4 * p] + bs[4 * p + 1], bs[4 * p + 2] + bs[4 * p + 3]) : 0;
        }
    }
}

/* gcc's tile intrinsics are asm without a memory clobber: fence the
 * compiler so buffers are written before a tile load and read after a
 * tile store. */
#define AMX_FENCE() __asm__ volatile("" ::: "memory")

/* Tile registers, k the depth of one multiply: 0/3 the 16 x 16 s32
 * results, 1/4 the 16 x k weight codes, 2/5 the k x 16 activation codes
 * (Q8_0, k = 32: two sets, so one block's multiply runs while the other's
 * is read back); with k = 64 all eight are 16 x 64 bytes (the K-quants'
 * use, below). */
typedef struct amx_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

BG_AMX static void amx_configure(int k)
{
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int colsb[6] = {64, k, 64, 64, k, 64}, rows[6] = {16, 16, k / 4, 16, 16, k / 4};
    for (int t = 0; t < 6; t++) {
        c.colsb[t] = (uint16_t)colsb[t];
        c.rows[t] = (uint8_t)rows[t];
    }
    for (int t = 6; t < 8; t++) { /* the folded products' second result pair uses 6 */
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    AMX_FENCE();
    _tile_loadconfig(&c);
}

/* Rows t < nt of the 16 x 16 block f (f[m] lane t: weight row m, activation
 * row t) into y[t * y_stride + m], added to what is there when add. */
BG_AMX static void amx_store(const __m512 f[16], float *y, size_t y_stride, int nt, bool add)
{
    __m512i in[16], tr[16];
    for (int m = 0; m < 16; m++)
        in[m] = _mm512_castps_si512(f[m]);
    transpose16(in, tr);
    for (int t = 0; t < nt; t++) {
        __m512 v = _mm512_castsi512_ps(tr[t]);
        if (add)
            v = _mm512_add_ps(v, _mm512_loadu_ps(y + (size_t)t * y_stride));
        _mm512_storeu_ps(y + (size_t)t * y_stride, v);
    }
}

/* K-quants with the group scales folded into the weight codes, so that a
 * super-block's 256 products run as four 64-deep tile multiplies with no
 * per-group pass through memory. A weight times its scale does not fit a
 * byte, so each is split in two byte planes, hi and lo, and the
 * super-block's integer sum (exact in int32, like the dots') is
 *  - Q4_K: code x scale, the six-bit scale split s = 8 hi + lo (both
 *    products <= 105, unsigned): 8 (hi . a) + (lo . a); the mins are
 *    applied after, with the activations' 32-code sums;
 *  - Q6_K: (code - 32) x scale (|.| <= 32 x 128) split into its signed
 *    high byte (-16 .. 15, TDPBSSD) and unsigned low byte (TDPBUSD):
 *    256 (hi . a) + (lo . a), the codes' offset already inside. */
typedef struct folded_stripe {
    uint8_t hi[AMX_CHUNK][16][BG_QK_K]; /* row m's hi plane (Q6_K: as int8) */
    uint8_t lo[AMX_CHUNK][16][BG_QK_K];
    int32_t min_pair[AMX_CHUNK][16][4]; /* Q4_K: mins 2p (low s16) and 2p + 1 (high) */
    float d[AMX_CHUNK][16], dmin[AMX_CHUNK][16];
} folded_stripe;

/* Q4_K's 12 scale bytes (layout in quant.c) as eight six-bit scales and
 * eight mins, one per byte, group j in byte j. */
static void k4_scales_mins(const uint8_t q[12], uint64_t *scales, uint64_t *mins)
{
    uint32_t w[3];
    memcpy(w, q, sizeof w);
    *scales = (uint64_t)(w[0] & 0x3f3f3f3fu) |
              (uint64_t)((w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u)) << 32;
    *mins = (uint64_t)(w[1] & 0x3f3f3f3fu) |
            (uint64_t)(((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u)) << 32;
}

BG_AMX static void k4_unpack(const uint8_t *w, size_t w_stride, int64_t b0, int nc,
                             folded_stripe *st)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* Chunk c of a super-block holds groups 2c (low nibbles) and 2c + 1
     * (high): each 16-bit lane of the unpacked 64 codes takes its group's
     * scale byte, zero-extended. */
    __m512i pick[4];
    for (int c = 0; c < 4; c++) {
        const __m512i a = _mm512_set1_epi16((int16_t)(0xFF00 | 2 * c));
        const __m512i b = _mm512_set1_epi16((int16_t)(0xFF00 | (2 * c + 1)));
        pick[c] = _mm512_inserti64x4(a, _mm512_castsi512_si256(b), 1);
    }
    for (int m = 0; m < 16; m++)
        for (int s = 0; s < nc; s++) {
            const bg_block_q4_K *blk = (const bg_block_q4_K *)(w + (size_t)m * w_stride) + b0 + s;
            uint64_t sc, mn;
            k4_scales_mins(blk->scales, &sc, &mn);
            const __m512i sc_hi = _mm512_set1_epi64((long long)((sc >> 3) & 0x0707070707070707u));
            const __m512i sc_lo = _mm512_set1_epi64((long long)(sc & 0x0707070707070707u));
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c));
                const __m512i codes = _mm512_and_si512(
                    _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), m4);
                /* per byte: code x scale <= 105, so no carry crosses a byte */
                _mm512_storeu_si512(st->hi[s][m] + 64 * c,
                                    _mm512_mullo_epi16(codes, _mm512_shuffle_epi8(sc_hi, pick[c])));
                _mm512_storeu_si512(st->lo[s][m] + 64 * c,
                                    _mm512_mullo_epi16(codes, _mm512_shuffle_epi8(sc_lo, pick[c])));
            }
            _mm_storeu_si128((__m128i *)st->min_pair[s][m],
                             _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn)));
            uint16_t h[2];
            memcpy(h, &blk->d, sizeof h);
            st->d[s][m] = _cvtsh_ss(h[0]);
            st->dmin[s][m] = _cvtsh_ss(h[1]);
        }
}

/* Q6_K's codes: per 128-code half c, byte l < 64 of ql holds code l low
 * and code l + 64 high (four bits each); bits 2i, 2i + 1 of qh byte l < 32
 * are the top two bits of code l + 32 i. */
BG_AMX static void k6_unpack(const uint8_t *w, size_t w_stride, int64_t b0, int nc,
                             folded_stripe *st)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m512i offset = _mm512_set1_epi16(32);
    /* codes 32k .. 32k + 31 are groups 2k and 2k + 1: their scales, as
     * 16-bit lanes, picked from the sixteen sign-extended ones */
    __m512i pick[8];
    for (int k = 0; k < 8; k++)
        pick[k] = _mm512_inserti64x4(_mm512_set1_epi16((int16_t)(2 * k)),
                                     _mm256_set1_epi16((int16_t)(2 * k + 1)), 1);
    for (int m = 0; m < 16; m++)
        for (int s = 0; s < nc; s++) {
            const bg_block_q6_K *blk = (const bg_block_q6_K *)(w + (size_t)m * w_stride) + b0 + s;
            const __m512i scales = _mm512_cvtepi8_epi16(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)blk->scales)));
            for (int c = 0; c < 2; c++) {
                const uint8_t *ql = blk->ql + 64 * c, *qh = blk->qh + 32 * c;
                const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
                for (int half = 0; half < 2; half++) {
                    const __m256i l = _mm256_loadu_si256((const __m256i *)(ql + 32 * half));
                    const __m256i top_lo = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(h, 2 * half), 4), m2);
                    const __m256i top_hi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(h, 2 * half + 4), 4), m2);
                    /* codes 128c + 32 half + l (low nibbles), and 64 on (high) */
                    const __m256i codes[2] = {
                        _mm256_or_si256(_mm256_and_si256(l, m4), top_lo),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4), top_hi)};
                    for (int u = 0; u < 2; u++) {
                        const int k = 4 * c + 2 * u + half;
                        const __m512i p = _mm512_mullo_epi16(
                            _mm512_sub_epi16(_mm512_cvtepu8_epi16(codes[u]), offset),
                            _mm512_permutexvar_epi16(pick[k], scales));
                        _mm256_storeu_si256((__m256i *)(st->lo[s][m] + 32 * k), _mm512_cvtepi16_epi8(p));
                        _mm256_storeu_si256((__m256i *)(st->hi[s][m] + 32 * k),
                                            _mm512_cvtepi16_epi8(_mm512_srai_epi16(p, 8)));
                    }
                }
            }
            uint16_t h;
            memcpy(&h, &blk->d, sizeof h);
            st->d[s][m] = _cvtsh_ss(h);
        }
}

/* A super-block's two integer products into tiles C_HI and C_LO (weight
 * planes in tiles 2 and 3, activations in 4, 64 codes a multiply). */
#define FOLDED_SUPERBLOCK(Q6, C_HI, C_LO, st, s, a)                                         \
    do {                                                                                    \
        _tile_zero(C_HI);                                                                   \
        _tile_zero(C_LO);                                                                   \
        for (int c_ = 0; c_ < 4; c_++) {                                                    \
            _tile_loadd(2, (st).hi[s][0] + 64 * c_, BG_QK_K);                               \
            _tile_loadd(3, (st).lo[s][0] + 64 * c_, BG_QK_K);                               \
            _tile_loadd(4, (a)->q[16 * c_], 64);                                            \
            if (Q6)                                                                         \
                _tile_dpbssd(C_HI, 2, 4);                                                   \
            else                                                                            \
                _tile_dpbusd(C_HI, 2, 4);                                                   \
            _tile_dpbusd(C_LO, 3, 4);                                                       \
        }                                                                                   \
    } while (0)

/* f[m] += d_m da (Q4_K: 8 hi[m] + lo[m], Q6_K: 256 hi[m] + lo[m]), and for
 * Q4_K -= dmin_m da (mins_m . 32-code sums of a). */
BG_AMX static inline __attribute__((always_inline)) void
folded_finish(bool q6, __m512 f[16], const int32_t hi[16][16], const int32_t lo[16][16],
              const folded_stripe *st, int s, const bg_amx_act *a)
{
    const __m512 da = _mm512_loadu_ps(a->d);
    __m512i g[4];
    for (int p = 0; p < 4; p++)
        g[p] = q6 ? _mm512_setzero_si512() : _mm512_loadu_si512(a->sum32_pair[p]);
    for (int m = 0; m < 16; m++) {
        const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_loadu_si512(hi[m]), q6 ? 8 : 3),
                                             _mm512_loadu_si512(lo[m]));
        f[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                               _mm512_mul_ps(_mm512_set1_ps(st->d[s][m]), da), f[m]);
        if (q6)
            continue;
        const int32_t *mp = st->min_pair[s][m];
        __m512i mins = _mm512_madd_epi16(_mm512_set1_epi32(mp[0]), g[0]);
        for (int p = 1; p < 4; p++)
            mins = _mm512_dpwssd_epi32(mins, _mm512_set1_epi32(mp[p]), g[p]);
        f[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins),
                                _mm512_mul_ps(_mm512_set1_ps(st->dmin[s][m]), da), f[m]);
    }
}

/* One stripe of 16 rows. Super-blocks alternate between two pairs of
 * result tiles (0/1 and 5/6), so one's products run while the other's are
 * read back and scaled. */
BG_AMX static inline __attribute__((always_inline)) void
folded_stripe_gemm(bool q6, int64_t n_in, const uint8_t *w, size_t w_stride,
                   const bg_amx_act *acts, int64_t n_act, float *y, size_t y_stride)
{
    static _Thread_local folded_stripe st;
    _Alignas(64) int32_t c[2][2][16][16]; /* [tile pair][hi, lo] */
    const int64_t nb = n_in / BG_QK_K;
    for (int64_t b0 = 0; b0 < nb; b0 += AMX_CHUNK) {
        const int nc = nb - b0 < AMX_CHUNK ? (int)(nb - b0) : AMX_CHUNK;
        if (q6)
            k6_unpack(w, w_stride, b0, nc, &st);
        else
            k4_unpack(w, w_stride, b0, nc, &st);
        AMX_FENCE();
        for (int64_t blk = 0; blk * 16 < n_act; blk++) {
            const bg_amx_act *a = acts + blk * nb + b0;
            __m512 f[16];
            for (int m = 0; m < 16; m++)
                f[m] = _mm512_setzero_ps();
            for (int s = 0; s < nc; s += 2) {
                FOLDED_SUPERBLOCK(q6, 0, 1, st, s, a + s);
                if (s + 1 < nc)
                    FOLDED_SUPERBLOCK(q6, 5, 6, st, s + 1, a + s + 1);
                _tile_stored(0, c[0][0], 64);
                _tile_stored(1, c[0][1], 64);
                if (s + 1 < nc) {
                    _tile_stored(5, c[1][0], 64);
                    _tile_stored(6, c[1][1], 64);
                }
                AMX_FENCE();
                folded_finish(q6, f, c[0][0], c[0][1], &st, s, a + s);
                if (s + 1 < nc)
                    folded_finish(q6, f, c[1][0], c[1][1], &st, s + 1, a + s + 1);
            }
            const int nt = n_act - blk * 16 < 16 ? (int)(n_act - blk * 16) : 16;
            amx_store(f, y + (size_t)blk * 16 * y_stride, y_stride, nt, b0 > 0);
        }
    }
}

/* Every stripe of a folded product. The tile configuration is per thread
 * and other code in the process (llama.cpp's AMX kernels, say) may keep
 * its own there across calls: put back whatever was configured before. */
BG_AMX static void folded_gemm(bool q6, int64_t n_in, const void *w, size_t w_stride,
                               int64_t n_rows, const void *packed, int64_t n_act, float *y,
                               size_t y_stride)
{
    _Alignas(64) amx_config saved;
    _tile_storeconfig(&saved);
    amx_configure(64);
    for (int64_t r = 0; r < n_rows; r += 16) {
        const uint8_t *stripe = (const uint8_t *)w + (size_t)r * w_stride;
        if (q6)
            folded_stripe_gemm(true, n_in, stripe, w_stride, packed, n_act, y + r, y_stride);
        else
            folded_stripe_gemm(false, n_in, stripe, w_stride, packed, n_act, y + r, y_stride);
    }
    if (saved.palette)
        _tile_loadconfig(&saved);
    else
        _tile_release();
}

void bg_gemm_q4_K_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride)
{
    folded_gemm(false, n_in, w, w_stride, n_rows, packed, n_act, y, y_stride);
}

void bg_gemm_q6_K_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride)
{
    folded_gemm(true, n_in, w, w_stride, n_rows, packed, n_act, y, y_stride);
}

/* Q8_0: 32-code blocks, each with its own scale on both sides, so every
 * block's 16 x 16 integer result is turned to float with d_w * d_a. The
 * weight codes are signed bytes, multiplied as they are stored (TDPBSSD,
 * A tile rows read from the matrix itself, a row stride apart). The
 * activations are packed by bg_avx2_pack_q8_0: its record's code rows are
 * already the B tiles' layout. One stripe of 16 rows. */
BG_AMX static void q8_0_stripe_gemm(int64_t n_in, const uint8_t *w, size_t w_stride,
                                    const bg_act16_q8_0 *acts, int64_t n_act, float *y,
                                    size_t y_stride)
{
    _Alignas(64) int32_t c0[16][16], c1[16][16];
    const int64_t ng = n_in / BG_QK_K;
    for (int64_t blk = 0; blk * 16 < n_act; blk++) {
        __m512 f[16];
        for (int m = 0; m < 16; m++)
            f[m] = _mm512_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const bg_act16_q8_0 *a = acts + blk * ng + g;
            for (int b = 0; b < 8; b += 2) {
                const bg_block_q8_0 *wb = (const bg_block_q8_0 *)w + 8 * g + b;
                _tile_zero(0);
                _tile_loadd(1, wb->qs, w_stride);
                _tile_loadd(2, a->q[8 * b], 64);
                _tile_dpbssd(0, 1, 2);
                _tile_stored(0, c0, 64);
                _tile_zero(3);
                _tile_loadd(4, wb[1].qs, w_stride);
                _tile_loadd(5, a->q[8 * (b + 1)], 64);
                _tile_dpbssd(3, 4, 5);
                _tile_stored(3, c1, 64);
                AMX_FENCE();
                const __m512 da0 = _mm512_loadu_ps(a->d[b]), da1 = _mm512_loadu_ps(a->d[b + 1]);
                for (int m = 0; m < 16; m++) {
                    const bg_block_q8_0 *row = (const bg_block_q8_0 *)(w + (size_t)m * w_stride) + 8 * g + b;
                    uint16_t h[2];
                    memcpy(&h[0], &row[0].d, sizeof h[0]);
                    memcpy(&h[1], &row[1].d, sizeof h[1]);
                    f[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c0[m])),
                                           _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h[0])), da0), f[m]);
                    f[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c1[m])),
                                           _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h[1])), da1), f[m]);
                }
            }
        }
        const int nt = n_act - blk * 16 < 16 ? (int)(n_act - blk * 16) : 16;
        amx_store(f, y + (size_t)blk * 16 * y_stride, y_stride, nt, false);
    }
}

void bg_gemm_q8_0_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride) BG_AMX;

void bg_gemm_q8_0_amx(int64_t n_in, const void *w, size_t w_stride, int64_t n_rows,
                      const void *packed, int64_t n_act, float *y, size_t y_stride)
{
    _Alignas(64) amx_config saved;
    _tile_storeconfig(&saved);
    amx_configure(32);
    for (int64_t r = 0; r < n_rows; r += 16)
        q8_0_stripe_gemm(n_in, (const uint8_t *)w + (size_t)r * w_stride, w_stride, packed, n_act,
                         y + r, y_stride);
    if (saved.palette)
        _tile_loadconfig(&saved);
    else
        _tile_release();
}

#endif
