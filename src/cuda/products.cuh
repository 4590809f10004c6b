// The matrix products' device code, shared by matmul.cu (dense products,
// several of one input, routing) and experts.cu (the grouped experts):
// the integer path (dp4a, and the int8 tensor cores for prefill), the float
// path, the work a product's last block finishes, and the host-side choice
// of path and coding.
//
// Decode is memory-bound: a warp streams one weight row once per group of
// up to MM_TOK tokens, dequantizing 32 values at a time in registers; on
// the integer path, short rows (512 or 256 wide) take 16 or 8 lanes each,
// so no lane idles.
// Run on an H200 by scripts/gpu-check.sh (README, "CUDA").
#pragma once

#include "rows.cuh"

enum { MM_WARPS = 4, MM_TOK = 8 };

// How the CPU converts activations before a dot product with weights of
// type T (quant.c's dot_type and quantize_activations): the GPU applies the
// same rounding to x, so both sides multiply the same numbers.
template <int T> struct bg_act { enum { kind = ACT_Q8_0 }; }; // q4_0, q5_0, q8_0, iq4_nl, q4_1, q5_1
template <> struct bg_act<T_F32> { enum { kind = ACT_F32 }; };
template <> struct bg_act<T_F16> { enum { kind = ACT_F16 }; };
template <> struct bg_act<T_BF16> { enum { kind = ACT_BF16 }; };
template <> struct bg_act<T_Q2_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_Q3_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_Q4_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_Q5_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_Q6_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_IQ4_XS> { enum { kind = ACT_Q8_K }; };

// Rounds a lane's 32 activations as the CPU's conversion does (codes times
// their scale, for the float path).
template <int K> __device__ __forceinline__ void bg_round_act(float x[32], bool active)
{
    if (K == ACT_F32)
        return;
    if (K == ACT_F16) {
#pragma unroll
        for (int j = 0; j < 32; j++)
            x[j] = bg_h2f(bg_f2h(x[j]));
        return;
    }
    if (K == ACT_BF16) {
#pragma unroll
        for (int j = 0; j < 32; j++)
            x[j] = __bfloat162float(__float2bfloat16_rn(x[j]));
        return;
    }
    float q[32], d;
    bg_code_act<K>(x, active, q, &d);
#pragma unroll
    for (int j = 0; j < 32; j++)
        x[j] = q[j] * d;
}

// The accumulators of NR rows by TOK tokens (MM_TOK, or 1 for a decode
// step: fewer registers, more warps resident): zeroed; summed over a row's
// lanes for the nt tokens used (nt is the same in every lane).
template <int NR, int TOK> __device__ __forceinline__ void bg_acc_zero(float acc[NR][TOK])
{
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int t = 0; t < TOK; t++)
            acc[r][t] = 0.0f;
}
// lanes: the lanes that share a row (32, 16 or 8; aligned groups).
template <int NR, int TOK>
__device__ __forceinline__ void bg_acc_lanes_sum(float acc[NR][TOK], int nt, int lanes)
{
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int t = 0; t < TOK; t++) {
            if (t >= nt)
                break;
            for (int o = lanes / 2; o > 0; o >>= 1)
                acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], o);
        }
}

// The rows of weights a warp computes: a row per `lanes` lanes, 32 / lanes
// rows per warp (short rows on the integer path would leave most of a warp
// idle). False when the warp has none; else o is this lane's row, and
// valid false where the warp's last rows pass n_out (those lanes still
// take part in the sums, on no chunks, and write nothing).
__device__ __forceinline__ bool bg_warp_rows(uint64_t warp, uint64_t n_out, int lanes,
                                             uint64_t *o, bool *valid)
{
    const uint64_t first = warp * (uint64_t)(32 / lanes);
    if (first >= n_out)
        return false;
    const uint64_t mine = first + (threadIdx.x % 32) / (uint32_t)lanes;
    *valid = mine < n_out;
    *o = *valid ? mine : first;
    return true;
}

// Before its wait: the rows of n_out (row_bytes each) that block `block`
// of a product reads, per_block rows a block (its warps' bg_warp_rows,
// times the rows each takes), asked of L2 by thread 0 (bg_prefetch_l2).
__device__ __forceinline__ void bg_prefetch_block_rows(const uint8_t *w, uint64_t row_bytes,
                                                       uint64_t n_out, uint64_t per_block,
                                                       uint64_t block)
{
    const uint64_t first = block * per_block;
    if (threadIdx.x || first >= n_out)
        return;
    const uint64_t n = n_out - first < per_block ? n_out - first : per_block;
    bg_prefetch_l2(w + first * row_bytes, n * row_bytes);
}

// ---------------------------------------------- the integer path
//
// Weights whose values are small integers times a scale per 16 or 32 (Q4_0,
// Q5_0, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) multiply
// activations coded once per product (k_code_act: int8 codes and a scale
// per 32, as the CPU codes them for that type) with integer dot products of
// four bytes (dp4a): per 32 weights, value = d_a * (s0 * sum over the first
// 16 of w * a + s1 * sum over the last 16 - m0 * sum of the first 16 a -
// m1 * sum of the last 16 a), which is the float path's sum of (weight) *
// (rounded activation), summed exactly before the scales instead of after.
// Q4_1, Q5_1 and the float types take the float path.

template <int T> struct bg_int_path { enum { on = 0 }; };
#define BG_INT_TYPES(X)                                                                        \
    X(T_Q4_0) X(T_Q5_0) X(T_Q8_0) X(T_IQ4_NL) X(T_Q2_K) X(T_Q3_K) X(T_Q4_K) X(T_Q5_K) X(T_Q6_K)    \
    X(T_IQ4_XS)
#define BG_INT_PATH_ON(T)                                                                      \
    template <> struct bg_int_path<T> { enum { on = 1 }; };
BG_INT_TYPES(BG_INT_PATH_ON)
#undef BG_INT_PATH_ON

__device__ __forceinline__ int bg_dp4a(int a, int b, int c)
{
    return __dp4a(a, b, c);
}

// Chunk c of a row: its scales (value = s0 * code - m0 for its first 16
// codes, s1 * code - m1 for its last 16), and word k (of 8) of its codes as
// four int8.
template <int T>
__device__ __forceinline__ void bg_int_scales(const uint8_t *row, uint64_t c, float *s0,
                                              float *s1, float *m0, float *m1);
template <int T> __device__ __forceinline__ int bg_int_word(const uint8_t *row, uint64_t c, int k);
// Whether the type's scales carry a min (m0, m1 not 0): Q4_K's and Q5_K's
// groups of 32, Q2_K's of 16.
template <int T> struct bg_int_min { enum { on = T == T_Q4_K || T == T_Q5_K || T == T_Q2_K }; };
// Whether a chunk has one scale and one min (s0 == s1, m0 == m1: every
// integer type but Q2_K, Q3_K and Q6_K, whose scales go by 16 codes): its
// halves' sums then add as integers, one conversion and one multiply where
// two of each were, and so do the activation codes' sums its min takes.
template <int T> struct bg_int_one_scale {
    enum { on = T != T_Q6_K && T != T_Q3_K && T != T_Q2_K };
};

// A chunk's value from its halves' sums i0, i1 and the activation codes'
// sums a0, a1 of its halves (read for types with a min only; with one
// scale a chunk, a0 is the whole chunk's and a1 is not read).
template <int T>
__device__ __forceinline__ float bg_chunk_value(int i0, int i1, float s0, float s1, float m0,
                                                float m1, float a0, float a1)
{
    if constexpr (bg_int_one_scale<T>::on) {
        float v = s0 * (float)(i0 + i1);
        if constexpr (bg_int_min<T>::on)
            v = v - m0 * a0;
        return v;
    } else {
        float v = s0 * (float)i0 + s1 * (float)i1;
        if constexpr (bg_int_min<T>::on)
            v = v - m0 * a0 - m1 * a1;
        return v;
    }
}

// Four bytes less k in each (values below 64 here), without borrows
// between them: bit 7 set first, flipped back after.
__device__ __forceinline__ int bg_bytes_less(uint32_t v, uint32_t k)
{
    return (int)(((v | 0x80808080u) - k) ^ 0x80808080u);
}

template <>
__device__ __forceinline__ void bg_int_scales<T_Q8_0>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 34));
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q8_0>(const uint8_t *row, uint64_t c, int k)
{
    // 2-byte aligned: the codes are read by halves
    const uint16_t *h = BG_ALIGNED(const uint16_t *, row + c * 34 + 2);
    return (int)((uint32_t)h[2 * k] | (uint32_t)h[2 * k + 1] << 16);
}

// Group g's scale and min in a Q4_K/Q5_K super-block b (d, dmin, scales).
__device__ __forceinline__ void bg_k_group_scales(const uint8_t *b, int g, float *s0, float *s1,
                                                  float *m0, float *m1)
{
    int sc, mn;
    bg_k_scale_min(b + 4, g, &sc, &mn);
    *s0 = *s1 = __fmul_rn(bg_h2f(bg_ld16(b)), (float)sc);
    *m0 = *m1 = __fmul_rn(bg_h2f(bg_ld16(b + 2)), (float)mn);
}

template <>
__device__ __forceinline__ void bg_int_scales<T_Q4_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    bg_k_group_scales(row + (c / 8) * 144, (int)(c % 8), s0, s1, m0, m1);
}
// Word k of group c % 8's low four bits in a Q4_K/Q5_K super-block's qs
// (16-byte aligned): groups 2j and 2j + 1 share 32 bytes, low nibbles
// then high.
__device__ __forceinline__ uint32_t bg_k_nibbles(const uint8_t *qs, uint64_t c, int k)
{
    const uint32_t *w = BG_ALIGNED(const uint32_t *, qs + 32 * (c % 8 / 2));
    return (w[k] >> 4 * (c % 2)) & 0x0F0F0F0Fu;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q4_K>(const uint8_t *row, uint64_t c, int k)
{
    return (int)bg_k_nibbles(row + (c / 8) * 144 + 16, c, k);
}

template <>
__device__ __forceinline__ void bg_int_scales<T_Q6_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    const uint8_t *b = row + (c / 8) * 210; // 2-byte aligned: the block is 210 bytes
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = bg_h2f(bg_ld16(b + 208));
    const int e0 = 32 * (int)(c % 8);
    *s0 = __fmul_rn(d, (float)scales[e0 / 16]);
    *s1 = __fmul_rn(d, (float)scales[e0 / 16 + 1]);
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q6_K>(const uint8_t *row, uint64_t c, int k)
{
    // A chunk's 32 values have 32 consecutive bytes of ql (their low or
    // high nibbles) and of qh (one 2-bit field), so a word at a time: four
    // 6-bit values, then minus 32 in each byte.
    const uint8_t *b = row + (c / 8) * 210;
    const int e0 = 32 * (int)(c % 8), h = e0 / 128, el0 = e0 % 128;
    const uint16_t *ql = BG_ALIGNED(const uint16_t *, b + 64 * h + el0 % 64);
    const uint16_t *qh = BG_ALIGNED(const uint16_t *, b + 128 + 32 * h);
    const int lo_shift = el0 >= 64 ? 4 : 0, hi_shift = 2 * (el0 / 32);
    const uint32_t lo = (uint32_t)ql[2 * k] | (uint32_t)ql[2 * k + 1] << 16;
    const uint32_t hi = (uint32_t)qh[2 * k] | (uint32_t)qh[2 * k + 1] << 16;
    const uint32_t v = ((lo >> lo_shift) & 0x0F0F0F0Fu) | ((hi >> hi_shift) & 0x03030303u) << 4;
    return bg_bytes_less(v, 0x20202020u);
}

// Sixteen groups of 16, a chunk two of them (2 (c % 8) and the next), the
// chunk's codes one 2-bit field (bits 2 (c % 4)) of the 32 bytes of its
// 128-value half. Q2_K (84-byte blocks, 4-byte aligned): value = d * (sc &
// 15) * q - dmin * (sc >> 4), a scale byte sc a group.
template <>
__device__ __forceinline__ void bg_int_scales<T_Q2_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    const uint8_t *b = row + (c / 8) * 84;
    const float d = bg_h2f(bg_ld16(b + 80)), dmin = bg_h2f(bg_ld16(b + 82));
    const uint8_t *sc = b + 2 * (c % 8);
    *s0 = __fmul_rn(d, (float)(sc[0] & 0xF));
    *s1 = __fmul_rn(d, (float)(sc[1] & 0xF));
    *m0 = __fmul_rn(dmin, (float)(sc[0] >> 4));
    *m1 = __fmul_rn(dmin, (float)(sc[1] >> 4));
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q2_K>(const uint8_t *row, uint64_t c, int k)
{
    const uint32_t *qs = BG_ALIGNED(const uint32_t *, row + (c / 8) * 84 + 16 + 32 * (c % 8 / 4));
    return (int)((qs[k] >> 2 * (c % 4)) & 0x03030303u);
}

// Q3_K (110-byte blocks, 2-byte aligned): value = d * scale * (q - 4), the
// low two bits of q as Q2_K's, the third bit of value e bit c % 8 of
// hmask[e % 32] (bg_q3_scale: the signed group scales).
template <>
__device__ __forceinline__ void bg_int_scales<T_Q3_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    const uint8_t *b = row + (c / 8) * 110;
    const float d = bg_h2f(bg_ld16(b + 108));
    const int g = 2 * (int)(c % 8);
    *s0 = __fmul_rn(d, (float)bg_q3_scale(b + 96, g));
    *s1 = __fmul_rn(d, (float)bg_q3_scale(b + 96, g + 1));
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q3_K>(const uint8_t *row, uint64_t c, int k)
{
    // read by halves: a block is 2-byte aligned
    const uint8_t *b = row + (c / 8) * 110;
    const uint16_t *qs = BG_ALIGNED(const uint16_t *, b + 32 + 32 * (c % 8 / 4));
    const uint16_t *hm = BG_ALIGNED(const uint16_t *, b);
    const uint32_t lo = (uint32_t)qs[2 * k] | (uint32_t)qs[2 * k + 1] << 16;
    const uint32_t hi = (uint32_t)hm[2 * k] | (uint32_t)hm[2 * k + 1] << 16;
    const uint32_t v = ((lo >> 2 * (c % 4)) & 0x03030303u) | ((hi >> c % 8) & 0x01010101u) << 2;
    return bg_bytes_less(v, 0x04040404u);
}

// Word k of the nibbles of a 32-value block (16 bytes at qs, 2-byte
// aligned; values 0..15 in the low nibbles, 16..31 in the high ones), a
// nibble to a byte.
__device__ __forceinline__ uint32_t bg_nibble_word(const uint8_t *qs, int k)
{
    const uint16_t *h = BG_ALIGNED(const uint16_t *, qs) + 2 * (k % 4);
    return (((uint32_t)h[0] | (uint32_t)h[1] << 16) >> 4 * (k / 4)) & 0x0F0F0F0Fu;
}

// Four nibbles (a byte each) through the IQ4 codebook (bg_iq4_values, four
// entries to a word, first in the low byte) by byte permutes: entries 0-7
// and 8-15, then the one bit 3 picks.
__device__ __forceinline__ int bg_iq4_word(uint32_t n)
{
    const uint32_t sel = (n & 0x7u) | (n >> 4 & 0x70u) | (n >> 8 & 0x700u) | (n >> 12 & 0x7000u);
    const uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, sel);
    const uint32_t hi = __byte_perm(0x26190D01u, 0x71594535u, sel);
    const uint32_t high = (n >> 3 & 0x01010101u) * 0xFFu;
    return (int)((lo & ~high) | (hi & high));
}

// x = d * (q - 8)
template <>
__device__ __forceinline__ void bg_int_scales<T_Q4_0>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 18));
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q4_0>(const uint8_t *row, uint64_t c, int k)
{
    return bg_bytes_less(bg_nibble_word(row + c * 18 + 2, k), 0x08080808u);
}

// x = d * (q - 16), bit 4 of value e is bit e of qh
template <>
__device__ __forceinline__ void bg_int_scales<T_Q5_0>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 22));
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q5_0>(const uint8_t *row, uint64_t c, int k)
{
    const uint8_t *b = row + c * 22;
    const uint32_t h = bg_ld32(b + 2) >> 4 * k & 0xFu; // values 4k .. 4k + 3
    const uint32_t bit4 = (h & 1u) << 4 | (h & 2u) << 11 | (h & 4u) << 18 | (h & 8u) << 25;
    return bg_bytes_less(bg_nibble_word(b + 6, k) | bit4, 0x10101010u);
}

// x = d * kvalues[q]
template <>
__device__ __forceinline__ void bg_int_scales<T_IQ4_NL>(const uint8_t *row, uint64_t c, float *s0,
                                                        float *s1, float *m0, float *m1)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 18));
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_IQ4_NL>(const uint8_t *row, uint64_t c, int k)
{
    return bg_iq4_word(bg_nibble_word(row + c * 18 + 2, k));
}

// As Q4_K (176-byte blocks), bit 4 of value e is bit c % 8 of qh[e]
template <>
__device__ __forceinline__ void bg_int_scales<T_Q5_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m0, float *m1)
{
    bg_k_group_scales(row + (c / 8) * 176, (int)(c % 8), s0, s1, m0, m1);
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q5_K>(const uint8_t *row, uint64_t c, int k)
{
    const uint8_t *b = row + (c / 8) * 176; // 16-byte aligned: rows are 176-byte multiples
    const uint32_t *qh = BG_ALIGNED(const uint32_t *, b + 16);
    return (int)(bg_k_nibbles(b + 48, c, k) | (qh[k] >> c % 8 & 0x01010101u) << 4);
}

// x = d * (ls - 32) * kvalues[q], ls the group's 6-bit scale
template <>
__device__ __forceinline__ void bg_int_scales<T_IQ4_XS>(const uint8_t *row, uint64_t c, float *s0,
                                                        float *s1, float *m0, float *m1)
{
    const uint8_t *b = row + (c / 8) * 136;
    const int g = (int)(c % 8);
    const int lo = (b[4 + g / 2] >> (4 * (g % 2))) & 0xF;
    const int hi = (bg_ld16(b + 2) >> (2 * g)) & 3;
    *s0 = *s1 = __fmul_rn(bg_h2f(bg_ld16(b)), (float)((lo | hi << 4) - 32));
    *m0 = *m1 = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_IQ4_XS>(const uint8_t *row, uint64_t c, int k)
{
    return bg_iq4_word(bg_nibble_word(row + (c / 8) * 136 + 8 + 16 * (c % 8), k));
}

// Chunk c of a row as 8 words of four int8 weights, and its scales: Q4_K's
// 32 bytes in two wide loads, the others a word at a time.
template <int T>
__device__ __forceinline__ void bg_int32(const uint8_t *row, uint64_t c, int w[8], float *s0,
                                         float *s1, float *m0, float *m1)
{
    bg_int_scales<T>(row, c, s0, s1, m0, m1);
    if constexpr (T == T_Q4_K) {
        const uint4 *qs = BG_ALIGNED(const uint4 *, row + (c / 8) * 144 + 16 + 32 * (c % 8 / 2));
        const uint4 lo = qs[0], hi = qs[1];
        const uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        const int shift = 4 * (int)(c % 2);
#pragma unroll
        for (int k = 0; k < 8; k++)
            w[k] = (int)((words[k] >> shift) & 0x0F0F0F0Fu);
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++)
            w[k] = bg_int_word<T>(row, c, k);
    }
}

// Codes rows of x (one thread per 32 values) as bg_code_act<K>.
template <int K>
__global__ void k_code_act(const float *x, size_t xs, uint64_t n_in, uint32_t n_rows,
                           uint8_t *xq)
{
    BG_KERNEL_ENTRY();
    const uint64_t n_chunks = n_in / 32, c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = c < n_chunks;
    const uint64_t qs = bg_code_row_bytes(n_in);
    for (uint32_t r = blockIdx.y; r < n_rows; r += gridDim.y) { // the same count in every lane
        float v[32], d;
        bg_load32(x + (size_t)r * xs + c * 32, active, v);
        bg_code_act<K>(v, active, v, &d);
        if (active)
            bg_store_codes(xq + (size_t)r * qs, n_in, c, v, d);
    }
}

// acc[r][t] += chunk c's part of row r's dot product with token t's codes
// a (8 words of four int8) and their scale da, for the NR rows' chunks w
// and scales (bg_int32).
template <int T, int NR, int TOK>
__device__ __forceinline__ void bg_acc_chunk_int(float acc[NR][TOK], int t, const int w[NR][8],
                                                 const float s0[NR], const float s1[NR],
                                                 const float m0[NR], const float m1[NR],
                                                 const int a[8], float da)
{
    // the codes' sums the mins take: the chunk's (one scale), or its halves'
    int asum[2] = {0, 0};
    if constexpr (bg_int_min<T>::on) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int h = bg_int_one_scale<T>::on ? 0 : k / 4;
            asum[h] = bg_dp4a(a[k], 0x01010101, asum[h]);
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++) {
        int i0 = 0, i1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            i0 = bg_dp4a(w[r][k], a[k], i0);
            i1 = bg_dp4a(w[r][k + 4], a[k + 4], i1);
        }
        acc[r][t] += da * bg_chunk_value<T>(i0, i1, s0[r], s1[r], m0[r], m1[r], (float)asum[0],
                                            (float)asum[1]);
    }
}

enum { INT_CHUNKS = 2 }; // chunks a lane loads at once, one token

// Chunk c of a coded row of n_in (k_code_act's layout): its 32 codes as 8
// words of four int8, and its scale.
__device__ __forceinline__ void bg_chunk_codes(const uint8_t *xrow, uint64_t n_in, uint64_t c,
                                               int a[8], float *da)
{
    const uint4 *ap = BG_ALIGNED(const uint4 *, xrow + c * 32);
    const uint4 a0 = ap[0], a1 = ap[1];
    a[0] = (int)a0.x, a[1] = (int)a0.y, a[2] = (int)a0.z, a[3] = (int)a0.w;
    a[4] = (int)a1.x, a[5] = (int)a1.y, a[6] = (int)a1.z, a[7] = (int)a1.w;
    *da = ((const float *)(xrow + n_in))[c];
}

// NR rows against nt tokens' coded activations (xq[t]: token t's row),
// over the `lanes` lanes of this lane's row (none of it unless valid).
template <int T, int NR, int TOK>
__device__ __forceinline__ void bg_rows_dot_int(const uint8_t *const rows[NR], uint64_t n_in,
                                                const uint8_t *const xq[TOK], int nt,
                                                float acc[NR][TOK], int lanes, bool valid)
{
    bg_acc_zero<NR, TOK>(acc);
    const uint64_t n_chunks = valid ? n_in / 32 : 0;
    if constexpr (TOK == 1) {
        // one token (a decode step): INT_CHUNKS chunks' loads a lane go
        // out before their sums, so a row of 2048 (64 chunks, 32 lanes) is
        // one trip to memory instead of one a chunk; the same sums in the
        // same order
        for (uint64_t c0 = threadIdx.x % (uint32_t)lanes; c0 < n_chunks;
             c0 += INT_CHUNKS * (uint32_t)lanes) {
            int w[INT_CHUNKS][NR][8], a[INT_CHUNKS][8];
            float s0[INT_CHUNKS][NR], s1[INT_CHUNKS][NR], da[INT_CHUNKS];
            float m0[INT_CHUNKS][NR], m1[INT_CHUNKS][NR];
#pragma unroll
            for (int u = 0; u < INT_CHUNKS; u++) {
                const uint64_t c = c0 + (uint64_t)u * (uint32_t)lanes;
                if (c >= n_chunks)
                    break;
#pragma unroll
                for (int r = 0; r < NR; r++)
                    bg_int32<T>(rows[r], c, w[u][r], &s0[u][r], &s1[u][r], &m0[u][r],
                                &m1[u][r]);
                bg_chunk_codes(xq[0], n_in, c, a[u], &da[u]);
            }
#pragma unroll
            for (int u = 0; u < INT_CHUNKS; u++)
                if (c0 + (uint64_t)u * (uint32_t)lanes < n_chunks)
                    bg_acc_chunk_int<T, NR, TOK>(acc, 0, w[u], s0[u], s1[u], m0[u], m1[u], a[u],
                                                 da[u]);
        }
    } else {
        for (uint64_t c = threadIdx.x % (uint32_t)lanes; c < n_chunks; c += (uint32_t)lanes) {
            int w[NR][8];
            float s0[NR], s1[NR], m0[NR], m1[NR];
#pragma unroll
            for (int r = 0; r < NR; r++)
                bg_int32<T>(rows[r], c, w[r], &s0[r], &s1[r], &m0[r], &m1[r]);
#pragma unroll
            for (int t = 0; t < TOK; t++) {
                if (t >= nt)
                    break;
                int a[8];
                float da;
                bg_chunk_codes(xq[t], n_in, c, a, &da);
                bg_acc_chunk_int<T, NR, TOK>(acc, t, w, s0, s1, m0, m1, a, da);
            }
        }
    }
    bg_acc_lanes_sum<NR, TOK>(acc, nt, lanes);
}

// NR rows against one token's float activations x, each lane coding the
// chunk it reads as k_code_act would (so the products agree bit for bit):
// for rows whose chunks all fit their lanes (n_in <= 32 * lanes), which
// saves a decode step's coding launch. Every lane calls it.
template <int T, int NR>
__device__ __forceinline__ void bg_rows_dot_int_coding(const uint8_t *const rows[NR],
                                                       uint64_t n_in, const float *x,
                                                       float acc[NR][1], int lanes, bool valid)
{
    bg_acc_zero<NR, 1>(acc);
    const uint64_t c = threadIdx.x % (uint32_t)lanes;
    const bool active = c < n_in / 32;
    // the weights' loads first: their trip to memory overlaps x's and its
    // coding instead of following them
    int w[NR][8] = {}, a[8];
    float s0[NR] = {}, s1[NR] = {}, m0[NR] = {}, m1[NR] = {};
    if (active && valid)
#pragma unroll
        for (int r = 0; r < NR; r++)
            bg_int32<T>(rows[r], c, w[r], &s0[r], &s1[r], &m0[r], &m1[r]);
    float v[32], da;
    bg_load32(x + c * 32, active, v);
    bg_code_act<bg_act<T>::kind>(v, active, v, &da); // in place: fewer registers
    if (active && valid) {
        bg_pack_codes(v, (uint32_t *)a);
        bg_acc_chunk_int<T, NR, 1>(acc, 0, w, s0, s1, m0, m1, a, da);
    }
    bg_acc_lanes_sum<NR, 1>(acc, 1, lanes);
}

// ---------------------------------------------- tensor cores
//
// Products of more than MM_TOK tokens on the integer path (prefill) run on
// the tensor cores: mma.sync m16n8k16 over int8 (sm_80 and later) gives a
// warp the sums over 16 codes of 16 weight rows by 8 tokens, the i0 and i1
// that bg_acc_chunk_int adds up with dp4a a lane at a time; each chunk's
// value is then the same float expression, da * bg_chunk_value (with one
// scale, the second product accumulates onto the first).
// A warp takes 16 rows by 8 * NG tokens, so a weight word it loads serves
// 8 * NG tokens instead of MM_TOK. BRIGADE_CUDA_MMA=0 turns this off.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with integer
// type"), for lane l, g = l / 4, q = l % 4: A is a register of row g's codes
// 4q .. 4q + 3 and one of row g + 8's; B a register of token g's codes
// 4q .. 4q + 3; D rows g and g + 8 by tokens 2q and 2q + 1. bg_mma
// (common.cuh) says whether they are on.
// d += the 16 x 8 products of a_lo / a_hi (rows g, g + 8) and b (token g).
__device__ __forceinline__ void bg_mma_s8_add(int d[4], int a_lo, int a_hi, int b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a_lo), "r"(a_hi), "r"(b));
#else
    // the host emulation (and device code for cards before sm_80, which
    // never run it: bg_mma is off there): each sum from the lanes holding
    // its row and token
    const int g = (int)(threadIdx.x % 32 / 4), q = (int)(threadIdx.x % 4);
    for (int p = 0; p < 4; p++) {
        const int lo = __shfl_sync(0xffffffffu, a_lo, 4 * g + p);
        const int hi = __shfl_sync(0xffffffffu, a_hi, 4 * g + p);
        const int b0 = __shfl_sync(0xffffffffu, b, 8 * q + p);
        const int b1 = __shfl_sync(0xffffffffu, b, 8 * q + 4 + p);
        d[0] = __dp4a(lo, b0, d[0]), d[1] = __dp4a(lo, b1, d[1]);
        d[2] = __dp4a(hi, b0, d[2]), d[3] = __dp4a(hi, b1, d[3]);
    }
#endif
}

// d = the products alone.
__device__ __forceinline__ void bg_mma_s8(int d[4], int a_lo, int a_hi, int b)
{
    d[0] = d[1] = d[2] = d[3] = 0;
    bg_mma_s8_add(d, a_lo, a_hi, b);
}

enum { MMA_ROWS = 16 * MM_WARPS, MMA_NG = 4 };

// Chunk c of bg_mma_rows' products: the weight words and scales of rows
// g and g + 8 (rows[r][0], rows[r][1]), token g's codes of each group of
// 8 (xb[j]), and the scales of tokens 2q and 2q + 1 (xd[j][t], at xn
// bytes past the codes) into acc.
template <int T, int NR, int NG>
__device__ __forceinline__ void bg_mma_chunk(const uint8_t *const (&rows)[NR][2],
                                             const uint8_t *const (&xb)[NG],
                                             const uint8_t *const (&xd)[NG][2], uint64_t c,
                                             uint64_t xn, float (&acc)[NR][NG][4])
{
    const int q = (int)(threadIdx.x % 4);
    int a[NR][2][2]; // [matrix][half of the chunk][row g, row g + 8]
    float s0[NR][2], s1[NR][2], m0[NR][2], m1[NR][2];
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            a[r][0][h] = bg_int_word<T>(rows[r][h], c, q);
            a[r][1][h] = bg_int_word<T>(rows[r][h], c, q + 4);
            bg_int_scales<T>(rows[r][h], c, &s0[r][h], &s1[r][h], &m0[r][h], &m1[r][h]);
        }
#pragma unroll
    for (int j = 0; j < NG; j++) {
        const uint32_t *bw = BG_ALIGNED(const uint32_t *, xb[j] + c * 32);
        const int b0 = (int)bw[q], b1 = (int)bw[q + 4];
        // the codes' sums of tokens 2q and 2q + 1, for the mins: a
        // matrix of ones times the tokens' codes puts each token's sum
        // in every row, where D's layout gives this lane those two; as
        // bg_acc_chunk_int's, the chunk's (one scale) or its halves'
        float as[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}; // [half][token 2q, 2q + 1]
        if constexpr (bg_int_min<T>::on) {
            int sum[4];
            bg_mma_s8(sum, 0x01010101, 0x01010101, b0);
            if constexpr (bg_int_one_scale<T>::on) {
                bg_mma_s8_add(sum, 0x01010101, 0x01010101, b1);
            } else {
                as[0][0] = (float)sum[0], as[0][1] = (float)sum[1];
                bg_mma_s8(sum, 0x01010101, 0x01010101, b1);
            }
            as[bg_int_one_scale<T>::on ? 0 : 1][0] = (float)sum[0];
            as[bg_int_one_scale<T>::on ? 0 : 1][1] = (float)sum[1];
        }
        const float da[2] = {((const float *)(xd[j][0] + xn))[c],
                             ((const float *)(xd[j][1] + xn))[c]};
#pragma unroll
        for (int r = 0; r < NR; r++) {
            // one scale: the second half's sums onto the first's
            int i0[4], i1[4] = {0, 0, 0, 0};
            bg_mma_s8(i0, a[r][0][0], a[r][0][1], b0);
            if constexpr (bg_int_one_scale<T>::on)
                bg_mma_s8_add(i0, a[r][1][0], a[r][1][1], b1);
            else
                bg_mma_s8(i1, a[r][1][0], a[r][1][1], b1);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int h = e / 2, t = e % 2;
                acc[r][j][e] += da[t] * bg_chunk_value<T>(i0[e], i1[e], s0[r][h], s1[r][h],
                                                          m0[r][h], m1[r][h], as[0][t],
                                                          as[1][t]);
            }
        }
    }
}

// A tile's accumulators zeroed; its rows' values out (bg_mma_rows' out).
template <int NR, int NG> __device__ __forceinline__ void bg_mma_zero(float (&acc)[NR][NG][4])
{
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int j = 0; j < NG; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[r][j][e] = 0.0f;
}
template <int NR, int NG, typename Out>
__device__ __forceinline__ void bg_mma_out(const float (&acc)[NR][NG][4], const uint64_t (&o)[2],
                                           uint64_t n_out, int nt, Out out)
{
    const int q = (int)(threadIdx.x % 4);
#pragma unroll
    for (int j = 0; j < NG; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = 8 * j + 2 * q + e % 2;
            if (o[e / 2] < n_out && i < nt)
                out(i, o[e / 2],
                    NR == 2 ? bg_silu(acc[0][j][e]) * acc[NR - 1][j][e] : acc[0][j][e]);
        }
}

// Rows o0 .. o0 + 15 of the NR matrices w (rows past n_out read the last
// row and are not stored) against tokens 0 .. nt - 1 of a tile (0 < nt <=
// 8 NG): token i's coded row at xq_row(i); out(i, o, v) stores row o's
// value for token i (NR = 2: silu(w[0] x) * w[1] x). The whole warp calls
// it.
template <int T, int NR, int NG, typename XRow, typename Out>
__device__ __forceinline__ void bg_mma_rows(const uint8_t *const w[NR], uint64_t o0,
                                            uint64_t n_out, uint64_t n_in, int nt, XRow xq_row,
                                            Out out)
{
    const int g = (int)(threadIdx.x % 32 / 4), q = (int)(threadIdx.x % 4);
    const uint64_t rb = bg_row_bytes<T>(n_in), o[2] = {o0 + g, o0 + g + 8};
    const uint8_t *rows[NR][2];
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            rows[r][h] = w[r] + (o[h] < n_out ? o[h] : n_out - 1) * rb;
    // token g of each group of 8 for B; tokens 2q and 2q + 1 for D
    const uint8_t *xb[NG], *xd[NG][2];
#pragma unroll
    for (int j = 0; j < NG; j++) {
        const int ib = 8 * j + g, id = 8 * j + 2 * q;
        xb[j] = xq_row(ib < nt ? ib : nt - 1);
        xd[j][0] = xq_row(id < nt ? id : nt - 1);
        xd[j][1] = xq_row(id + 1 < nt ? id + 1 : nt - 1);
    }
    float acc[NR][NG][4];
    bg_mma_zero<NR, NG>(acc);
    const uint64_t n_chunks = n_in / 32;
    for (uint64_t c = 0; c < n_chunks; c++)
        bg_mma_chunk<T, NR, NG>(rows, xb, xd, c, n_in, acc);
    bg_mma_out<NR, NG>(acc, o, n_out, nt, out);
}

// ------------------------------- the tensor cores' products, staged
//
// bg_mma_rows reads its words straight from memory: four bytes of 16 rows
// (or 8 tokens) a load, each warp its own, every warp of a block the same
// tokens' codes again. bg_mma_rows_staged has the block's threads copy
// the block's 64 rows and the tile's tokens, 256 codes (MMA_SEG chunks) at
// a time, into shared memory with wide copies that run while the thread
// goes on (cp.async, sm_80 and later), and its warps read them there with
// the same arithmetic in the same order (BRIGADE_CUDA_MMA_STAGE=0: the
// unstaged kernels).
enum { MMA_SEG = 8 };
// A staged row of seg bytes (the row bytes of MMA_SEG chunks): the span
// copied, whole units of up to 16 bytes around it (at most 30 bytes more),
// keeps its address modulo 16, so a block format's words lie as aligned
// as in memory.
__host__ __device__ constexpr uint32_t bg_mma_stage_stride(uint64_t seg)
{
    return (uint32_t)((seg + 30 + 15) / 16 * 16);
}
// A token's codes and scales of a segment (MMA_SEG * 32 + MMA_SEG * 4
// bytes), at its row's address modulo 16.
enum { MMA_STAGE_TOKEN = (MMA_SEG * 36 + 15 + 15) / 16 * 16 };
// Shared bytes of a block: NR matrices' MMA_ROWS rows (seg: a segment's
// row bytes), 8 NG tokens' codes, and the tokens' row addresses.
__host__ __device__ constexpr uint32_t bg_mma_stage_bytes(uint64_t seg, int nr, int ng)
{
    return (uint32_t)nr * MMA_ROWS * bg_mma_stage_stride(seg) + 8u * ng * MMA_STAGE_TOKEN +
           8u * ng * (uint32_t)sizeof(void *);
}

// One unit of u bytes (16, 8, 4: cp.async, left in flight until
// bg_copies_wait; 2, 1: a load and a store) from src to shared dst, both
// aligned to u.
__device__ __forceinline__ void bg_copy_unit(uint8_t *dst, const uint8_t *src, uint32_t u)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    if (u == 16)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    else if (u == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src) : "memory");
    else if (u == 4)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
    else if (u == 2)
        *(uint16_t *)dst = *(const uint16_t *)src;
    else
        *dst = *src;
#else
    memcpy(dst, src, u);
#endif
}
// The calling thread's copies done (then a barrier shows them to the block).
__device__ __forceinline__ void bg_copies_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
// The largest power of two dividing a, at most 16.
__device__ __forceinline__ uint32_t bg_unit_of(uint64_t a)
{
    return (uint32_t)((a | 16) & (~(a | 16) + 1));
}

// bg_mma_rows for the block's MMA_ROWS rows from ob (warp k: ob + 16 k ..),
// the codes staged in shared memory (smem: bg_mma_stage_bytes), the token
// rows xq_row(i) qs bytes apart from one another's. The whole block calls
// it, every warp, with the same arguments.
template <int T, int NR, int NG, typename XRow, typename Out>
__device__ __forceinline__ void bg_mma_rows_staged(uint8_t *smem, const uint8_t *const w[NR],
                                                   uint64_t ob, uint64_t n_out, uint64_t n_in,
                                                   int nt, XRow xq_row, uint64_t qs, Out out)
{
    constexpr uint64_t seg = bg_fmt<T>::bytes * (MMA_SEG * 32 / bg_fmt<T>::elems);
    constexpr uint32_t sws = bg_mma_stage_stride(seg); // a staged row's stride
    uint8_t *const sx = smem + NR * MMA_ROWS * sws;
    const uint8_t **const tok = (const uint8_t **)(sx + 8 * NG * MMA_STAGE_TOKEN);
    const uint32_t tid = threadIdx.x, n_threads = blockDim.x;
    const int g = (int)(tid % 32 / 4), q = (int)(tid % 4);
    const uint32_t lo = tid / 32 * 16 + g; // the lane's rows in the block: lo, lo + 8
    const uint64_t rb = bg_row_bytes<T>(n_in), o[2] = {ob + lo, ob + lo + 8};
    const uint64_t last = n_out - 1;
    // the rows' alignment: a copy unit that never crosses a row's ends
    uint64_t wa = rb;
#pragma unroll
    for (int r = 0; r < NR; r++)
        wa |= (uint64_t)(uintptr_t)w[r];
    const uint32_t uw = bg_unit_of(wa);
    __syncthreads(); // the previous tile's addresses are read
    for (uint32_t i = tid; i < (uint32_t)nt; i += n_threads)
        tok[i] = xq_row((int)i);
    __syncthreads();
    const uint32_t ux = bg_unit_of((uint64_t)(uintptr_t)tok[0] | qs);
    // a token's codes at its row's address modulo 16, its scales after them
    const uint8_t *xb[NG], *xd[NG][2];
#pragma unroll
    for (int j = 0; j < NG; j++) {
        const int ib = 8 * j + g, id = 8 * j + 2 * q;
        const int ti[3] = {ib < nt ? ib : nt - 1, id < nt ? id : nt - 1,
                           id + 1 < nt ? id + 1 : nt - 1};
        const uint8_t *at[3];
#pragma unroll
        for (int k = 0; k < 3; k++)
            at[k] = sx + (uint32_t)ti[k] * MMA_STAGE_TOKEN + ((uintptr_t)tok[ti[k]] & 15);
        xb[j] = at[0], xd[j][0] = at[1], xd[j][1] = at[2];
    }
    float acc[NR][NG][4];
    bg_mma_zero<NR, NG>(acc);
    const uint64_t n_chunks = n_in / 32;
    for (uint64_t c0 = 0; c0 < n_chunks; c0 += MMA_SEG) {
        const uint32_t nc = n_chunks - c0 < MMA_SEG ? (uint32_t)(n_chunks - c0) : MMA_SEG;
        // each row's segment in whole units: from the unit its first byte
        // is in to the one its last is in (a row's ends are whole units)
        const uint64_t seg_off = bg_row_bytes<T>(c0 * 32), seg_len = bg_row_bytes<T>(nc * 32);
        const uint64_t first = seg_off / uw * uw, end = (seg_off + seg_len + uw - 1) / uw * uw;
        const uint32_t wu = (uint32_t)((end - first) / uw);
        // the copied span of the block's row i of matrix r (rows past the
        // end repeat the last), and where it is staged
        const auto row_src = [&](uint32_t r, uint32_t i) {
            return w[r] + (ob + i < n_out ? ob + i : last) * rb + first;
        };
        const auto row_staged = [&](uint32_t r, uint32_t i, const uint8_t *src) {
            return smem + (r * MMA_ROWS + i) * sws + ((uintptr_t)src & 15);
        };
        if (c0)
            __syncthreads(); // the previous segment is read
        for (uint32_t k = tid; k < NR * MMA_ROWS * wu; k += n_threads) {
            const uint32_t r = k / wu / MMA_ROWS, i = k / wu % MMA_ROWS;
            const uint8_t *src = row_src(r, i);
            bg_copy_unit(row_staged(r, i, src) + (k % wu) * uw, src + (k % wu) * uw, uw);
        }
        // the tokens' codes, then their scales: both start and end on
        // units (their offsets are multiples of 32, the rows' ends units)
        const uint32_t cu = nc * 32 / ux, su = nc * 4 / ux, per = cu + su;
        for (uint32_t k = tid; k < (uint32_t)nt * per; k += n_threads) {
            const uint32_t i = k / per, j = k % per;
            const uint8_t *row = tok[i];
            uint8_t *dst = sx + i * MMA_STAGE_TOKEN + ((uintptr_t)row & 15);
            if (j < cu)
                bg_copy_unit(dst + j * ux, row + c0 * 32 + j * ux, ux);
            else
                bg_copy_unit(dst + nc * 32 + (j - cu) * ux, row + n_in + c0 * 4 + (j - cu) * ux,
                             ux);
        }
        bg_copies_wait();
        __syncthreads();
        const uint8_t *rows[NR][2];
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t i = lo + 8 * h;
                rows[r][h] = row_staged(r, i, row_src(r, i)) + (seg_off - first);
            }
        for (uint32_t c = 0; c < nc; c++)
            bg_mma_chunk<T, NR, NG>(rows, xb, xd, c, nc * 32, acc);
    }
    bg_mma_out<NR, NG>(acc, o, n_out, nt, out);
}

// The first of a block's MMA_ROWS rows, and of the calling warp's 16.
__device__ __forceinline__ uint64_t bg_mma_block_row(uint32_t block)
{
    return (uint64_t)block * MMA_ROWS;
}
__device__ __forceinline__ uint64_t bg_mma_warp_row(uint64_t ob)
{
    return ob + threadIdx.x / 32 * 16;
}

// Whether the calling warp takes part, its block's first row ob of n_out:
// staged, every warp of a block with a row does (it copies rows for the
// others).
template <bool STAGED>
__device__ __forceinline__ bool bg_mma_block_has_rows(uint64_t ob, uint64_t n_out)
{
    return (STAGED ? ob : bg_mma_warp_row(ob)) < n_out;
}

// The block's rows ob .. ob + MMA_ROWS - 1 of w (NR matrices), 16 a warp,
// against n_tok tokens coded in xq, tiles of 8 MMA_NG tokens from
// blockIdx.y on, into y (stride ys). STAGED: through shared memory smem,
// the block's warps all calling it (bg_mma_rows_staged).
template <int T, int NR, bool STAGED>
__device__ __forceinline__ void bg_mma_tokens(uint8_t *smem, const uint8_t *const w[NR],
                                              uint64_t ob, uint64_t n_out, uint64_t n_in,
                                              const uint8_t *xq, uint32_t n_tok, float *y,
                                              size_t ys)
{
    const uint64_t qs = bg_code_row_bytes(n_in);
    for (uint32_t t0 = blockIdx.y * 8 * MMA_NG; t0 < n_tok; t0 += gridDim.y * 8 * MMA_NG) {
        const int nt = n_tok - t0 < 8 * MMA_NG ? (int)(n_tok - t0) : 8 * MMA_NG;
        const auto xrow = [&](int i) { return xq + (size_t)(t0 + i) * qs; };
        const auto out = [&](int i, uint64_t o, float v) { y[(size_t)(t0 + i) * ys + o] = v; };
        if constexpr (STAGED)
            bg_mma_rows_staged<T, NR, MMA_NG>(smem, w, ob, n_out, n_in, nt, xrow, qs, out);
        else
            bg_mma_rows<T, NR, MMA_NG>(w, bg_mma_warp_row(ob), n_out, n_in, nt, xrow, out);
    }
}


// ---------------------------------------------- the float path

// Weight types with a min (x = d * q + m), whose CPU dot takes the min's
// term from Q8_1's s rather than from the rounded activations.
template <int T> struct bg_has_min { enum { value = T == T_Q4_1 || T == T_Q5_1 }; };

// A lane's 32 activations rounded as Q8_1 codes them (x = code * f16(d)),
// returning, for the min's term, s - sum(x): s = f16(d * sum(codes)) with d
// unrounded, as quant.c's activations_q8_1 (the CPU's m * s then follows).
__device__ __forceinline__ float bg_round_act_q8_1(float x[32], bool active)
{
    float d, d_raw;
    bg_code_act<ACT_Q8_0>(x, active, x, &d, &d_raw);
    float codes = 0.0f, sum = 0.0f; // codes: a sum of integers, exact
#pragma unroll
    for (int j = 0; j < 32; j++) {
        codes += x[j];
        x[j] *= d;
        sum += x[j];
    }
    return bg_h2f(bg_f2h(d_raw * codes)) - sum;
}

// acc[r][t] += v[r] . round(x_t[32c .. 32c+31]) for the group's tokens
// (xr[t]: token t's row) and each of the NR weight rows; a token's
// activations are loaded and rounded once for all NR rows. mins[r]: row
// r's min in this chunk, for the types with one.
template <int T, int NR>
__device__ __forceinline__ void bg_acc_tokens(const float v[NR][32], const float mins[NR],
                                              const float *const xr[MM_TOK], uint64_t c, int nt,
                                              bool active, float acc[NR][MM_TOK])
{
#pragma unroll
    for (int t = 0; t < MM_TOK; t++) {
        if (t >= nt)
            break;
        float xv[32], s_off = 0.0f;
        bg_load32(xr[t] + c * 32, active, xv);
        if (bg_has_min<T>::value)
            s_off = bg_round_act_q8_1(xv, active);
        else
            bg_round_act<bg_act<T>::kind>(xv, active);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 32; j++)
                s += v[r][j] * xv[j];
            if (bg_has_min<T>::value)
                s += mins[r] * s_off;
            acc[r][t] += active ? s : 0.0f;
        }
    }
}

// NR rows of W (rows[r]) against a group of nt tokens: acc[r][t], the same
// in every lane. The warp's lanes split the rows (every lane runs the same
// number of iterations: the Q8_K rounding exchanges values between lanes).
template <int T, int NR>
__device__ __forceinline__ void bg_rows_dot(const uint8_t *const rows[NR], uint64_t n_in,
                                            const float *const xr[MM_TOK], int nt,
                                            float acc[NR][MM_TOK])
{
    const int lane = threadIdx.x % 32;
    bg_acc_zero<NR, MM_TOK>(acc);
    const uint64_t n_chunks = n_in / 32;
    for (uint64_t c0 = 0; c0 < n_chunks; c0 += 32) {
        const uint64_t c = c0 + lane;
        const bool active = c < n_chunks;
        float v[NR][32], mins[NR];
#pragma unroll
        for (int r = 0; r < NR; r++) {
            mins[r] = 0.0f;
            if (!active)
                continue;
            bg_deq32<T>(rows[r], c, v[r]);
            if (bg_has_min<T>::value) // m follows d in the block
                mins[r] = bg_h2f(bg_ld16(rows[r] + c * bg_fmt<T>::bytes + 2));
        }
        bg_acc_tokens<T, NR>(v, mins, xr, c, nt, active, acc);
    }
    bg_acc_lanes_sum<NR, MM_TOK>(acc, nt, 32);
}

// ---------------------------------------------- the last block's work

// Routing by warps, a token to a warp: the softmax over its n_expert
// logits (lane l holds experts l, l + 32, ...), then k_used picks of the
// most probable (the earlier expert wins a tie), renormalized as blocks.c's
// route_token (the sum in double, rounded once, as ggml's sum_rows, and
// kept off zero as llama.cpp keeps it).
enum { ROUTE_PER_LANE = BG_GPU_MAX_EXPERTS / 32 };

// The warp's largest (value, index), the smaller index on ties, in every
// lane.
__device__ __forceinline__ void bg_warp_argmax(float *v, int *i)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, *v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, *i, o);
        if (ov > *v || (ov == *v && oi < *i))
            *v = ov, *i = oi;
    }
}

__device__ __forceinline__ void bg_warp_route(const float *l, uint32_t n_expert, uint32_t k_used,
                                              int32_t *chosen, float *chosen_w)
{
    const uint32_t lane = threadIdx.x % 32;
    float p[ROUTE_PER_LANE];
    float m = -INFINITY;
#pragma unroll
    for (uint32_t u = 0; u < ROUTE_PER_LANE; u++) {
        const uint32_t e = lane + 32 * u;
        p[u] = e < n_expert ? __ldcg(l + e) : -INFINITY;
        m = fmaxf(m, p[u]);
    }
    m = bg_warp_max(m);
    double sum = 0.0;
#pragma unroll
    for (uint32_t u = 0; u < ROUTE_PER_LANE; u++)
        if (lane + 32 * u < n_expert) {
            p[u] = expf(p[u] - m);
            sum += (double)p[u];
        }
    const float inv = (float)(1.0 / bg_warp_sum_d(sum));
#pragma unroll
    for (uint32_t u = 0; u < ROUTE_PER_LANE; u++)
        if (lane + 32 * u < n_expert)
            p[u] *= inv;
    double total = 0.0; // the same in every lane
    for (uint32_t k = 0; k < k_used; k++) {
        float v = -INFINITY;
        int best = INT_MAX;
#pragma unroll
        for (uint32_t u = 0; u < ROUTE_PER_LANE; u++)
            if (p[u] > v) // ascending experts: the earlier keeps a tie
                v = p[u], best = (int)(lane + 32 * u);
        bg_warp_argmax(&v, &best);
        if (best == INT_MAX)
            best = 0, v = 0.0f; // NaN logits: a valid expert all the same
#pragma unroll
        for (uint32_t u = 0; u < ROUTE_PER_LANE; u++)
            if ((int)(lane + 32 * u) == best)
                p[u] = -INFINITY;
        if (lane == 0)
            chosen[k] = best, chosen_w[k] = v;
        total += (double)v;
    }
    if (lane == 0) {
        const float div = fmaxf((float)total, 6.103515625e-5f);
        for (uint32_t k = 0; k < k_used; k++)
            chosen_w[k] = chosen_w[k] / div;
    }
}

// The slots grouped by expert (the layout of BG_GPU_MOE_GROUP_INTS), by one
// block: it counts each expert's slots, lists the experts chosen with
// their groups' offsets, files every slot under its expert, then lists
// each group's first slot as it files it. The order of the slots inside
// a group is not fixed, and need not be: each slot's dot products are its
// own. shared: bg_group_shared_bytes. The block's writes of chosen are
// visible (after a barrier).
static inline size_t bg_group_shared_bytes(uint32_t n_expert)
{
    return 3 * (size_t)n_expert * sizeof(int32_t);
}
__device__ __forceinline__ void bg_block_group(const int32_t *chosen, uint32_t n_slots,
                                               uint32_t n_expert, int32_t *groups,
                                               int32_t *shared)
{
    int32_t *offsets = groups, *n_active = groups + n_expert + 1, *active = n_active + 1;
    int32_t *rank_first = active + n_expert, *rank_slot = rank_first + n_expert + 1;
    int32_t *sorted = rank_slot + n_expert;
    // per expert: its count of slots, then of those filed; its group's
    // offset; its rank among the experts chosen
    int32_t *cursor = shared, *base = cursor + n_expert, *rank_of = base + n_expert;
    for (uint32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
        cursor[e] = 0;
    __syncthreads();
    for (uint32_t s = threadIdx.x; s < n_slots; s += blockDim.x)
        atomicAdd(&cursor[chosen[s]], 1);
    __syncthreads();
    // each expert's first slot and the experts chosen, in expert order: a
    // scan of (count, count > 0) over the block, each thread a run of
    // experts (one thread through all of them waited on shared memory
    // n_expert times in a row)
    __shared__ int32_t warp_slots[32], warp_experts[32];
    const uint32_t per = (n_expert + blockDim.x - 1) / blockDim.x, lane = threadIdx.x % 32;
    const uint32_t e0 = threadIdx.x * per < n_expert ? threadIdx.x * per : n_expert;
    const uint32_t e1 = e0 + per < n_expert ? e0 + per : n_expert;
    int32_t slots = 0, experts = 0;
    for (uint32_t e = e0; e < e1; e++)
        slots += cursor[e], experts += cursor[e] > 0;
    int32_t slots_to = slots, experts_to = experts; // this lane's and those before it
    for (uint32_t o = 1; o < 32; o <<= 1) {
        const int32_t a = __shfl_up_sync(0xffffffffu, slots_to, o);
        const int32_t b = __shfl_up_sync(0xffffffffu, experts_to, o);
        if (lane >= o)
            slots_to += a, experts_to += b;
    }
    if (lane == 31)
        warp_slots[threadIdx.x / 32] = slots_to, warp_experts[threadIdx.x / 32] = experts_to;
    __syncthreads();
    int32_t at = slots_to - slots, n = experts_to - experts;
    for (uint32_t w = 0; w < threadIdx.x / 32; w++)
        at += warp_slots[w], n += warp_experts[w];
    for (uint32_t e = e0; e < e1; e++) { // the thread's own experts' entries only
        const int32_t count = cursor[e];
        offsets[e] = base[e] = at;
        cursor[e] = 0;
        if (count)
            rank_of[e] = n, rank_first[n] = at, active[n++] = (int32_t)e;
        at += count;
    }
    if (threadIdx.x == blockDim.x - 1) { // the last run ends where every slot has
        offsets[n_expert] = at;
        rank_first[n] = at;
        *n_active = n;
    }
    __syncthreads();
    for (uint32_t s = threadIdx.x; s < n_slots; s += blockDim.x) {
        const int32_t e = chosen[s], i = atomicAdd(&cursor[e], 1);
        sorted[base[e] + i] = (int32_t)s;
        if (i == 0)
            rank_slot[rank_of[e]] = (int32_t)s;
    }
}

// Tokens [t0, t_end) routed over their logits (rows of n_expert), a warp
// each, and, when groups is set, the slots of all n_tok tokens grouped
// by this block (shared: bg_group_shared_bytes).
__device__ __forceinline__ void bg_block_route(const float *logits, uint32_t t0, uint32_t t_end,
                                               uint32_t n_tok, uint32_t n_expert,
                                               uint32_t k_used, int32_t *chosen, float *chosen_w,
                                               int32_t *groups, int32_t *shared)
{
    for (uint32_t t = t0 + threadIdx.x / 32; t < t_end; t += blockDim.x / 32)
        bg_warp_route(logits + (size_t)t * n_expert, n_expert, k_used, chosen + t * k_used,
                      chosen_w + t * k_used);
    if (!groups)
        return;
    __syncthreads();
    bg_block_group(chosen, n_tok * k_used, n_expert, groups, shared);
}

// What a product's last block does once every block has written its rows,
// for a decode step's few tokens (at most TAIL_TOKENS; more take launches
// of their own, where every block has a share of the work): nothing, the
// residual and the next norm after a mixer's out projection, the routing
// after the router's product, or the end of the feed-forward half after
// the experts' down rows (there the last block of each chunk of rows, then
// the last of those: experts.cu). Each saves a launch per layer.
enum { TAIL_NONE, TAIL_ADD_RMSNORM, TAIL_ROUTE, TAIL_FFN_END };
enum { TAIL_TOKENS = 4 };

struct bg_tail {
    int kind;
    int *counter;       // the backend's (set_scratch)
    uint32_t n_tok, n;  // tokens; the width of the product's rows
    uint32_t n_used;    // the sum's rows per token; routing: the experts chosen
    const float *y;     // the product's rows
    bg_gpu_ffn_end end; // x, xn, the norm and its codes (and the sum's weights and shared rows)
    int32_t *chosen, *groups;
    float *chosen_w;
};

// The dynamic shared memory a tail needs.
static inline size_t bg_tail_shared_bytes(const bg_tail &t)
{
    return t.kind == TAIL_ROUTE && t.groups ? bg_group_shared_bytes(t.n) : 0;
}

// Called by every thread of every block, last. TAIL is the kernel's, so
// kernels without one carry none of its code or registers. (The experts'
// kernel ends the feed-forward half its own way: experts.cu.)
template <int TAIL> __device__ __forceinline__ void bg_tail_finish(const bg_tail &t)
{
    static_assert(TAIL != TAIL_FFN_END, "experts.cu's bg_ffn_end_chunks");
    if constexpr (TAIL != TAIL_NONE) {
        if (!bg_block_arrives_last(t.counter, (int)(gridDim.x * gridDim.y * gridDim.z)))
            return;
        if constexpr (TAIL == TAIL_ROUTE) {
            BG_DYNAMIC_SHARED(int32_t, shared);
            bg_block_route(t.y, 0, t.n_tok, t.n_tok, t.n, t.n_used, t.chosen, t.chosen_w,
                           t.groups, shared);
        } else {
            for (uint32_t r = 0; r < t.n_tok; r++) {
                __syncthreads(); // the previous row's shared sums are read
                bg_block_add_rmsnorm(t.end.d_x, t.y, t.end.d_xn, t.end.d_norm_w, t.n, t.end.eps,
                                     t.end.d_xq, r);
            }
        }
    }
}

// Whether products with weights of this type code their activations for
// the integer path (bg_int_path), and how.
static inline bool int_path(uint32_t type)
{
    switch (type) {
#define BG_INT_CASE(T) case T:
        BG_INT_TYPES(BG_INT_CASE)
#undef BG_INT_CASE
        return true;
    default:
        return false;
    }
}

// The activation coding of a type on the integer path (ACT_Q8_0 or
// ACT_Q8_K), -1 for the float path.
static inline int code_kind(uint32_t type)
{
    switch (type) {
#define BG_INT_CASE(T) case T: return bg_act<T>::kind;
        BG_INT_TYPES(BG_INT_CASE)
#undef BG_INT_CASE
    default:
        return -1;
    }
}

// The coded rows of x for products with weights of `type`: pre (x's rows
// coded by the norm that wrote them, or NULL) where the type codes as it
// does, else n_rows rows coded now into the scratch; NULL (float path)
// when the type has no integer path or the scratch is too small.
static inline const uint8_t *code_act(bg_gpu *g, uint32_t type, const float *x, size_t xs,
                                      uint64_t n_in, uint32_t n_rows, const uint8_t *pre,
                                      int *rc)
{
    *rc = 0;
    if (pre && code_kind(type) == ACT_Q8_K && n_in % 256 == 0)
        return pre;
    if (!int_path(type) || !g->scratch || n_in % 256 ||
        (uint64_t)n_rows * bg_code_row_bytes(n_in) > g->scratch_bytes)
        return NULL;
    const uint64_t n_chunks = n_in / 32;
    const dim3 grid((unsigned)((n_chunks + 255) / 256), n_rows < 65535 ? n_rows : 65535);
    if (code_kind(type) == ACT_Q8_0)
        BG_LAUNCH(grid, 256, 0, g->stream, k_code_act<ACT_Q8_0>)(x, xs, n_in, n_rows, g->scratch);
    else
        BG_LAUNCH(grid, 256, 0, g->stream, k_code_act<ACT_Q8_K>)(x, xs, n_in, n_rows, g->scratch);
    *rc = bg_cuda_launched(g, "coding activations");
    return g->scratch;
}

// The lanes that share a row of n_in (bg_warp_rows): fewer than a warp for
// short rows on the integer path (an expert's down rows, 512 wide in
// Qwen3.6), so every lane has a chunk of 32 to read.
static inline int row_lanes(bool int_path, uint64_t n_in)
{
    const uint64_t chunks = n_in / 32;
    return !int_path || chunks > 16 ? 32 : chunks > 8 ? 16 : 8;
}

// Blocks of MM_WARPS warps for n_out rows, lanes to a row.
static inline uint32_t row_blocks(uint64_t n_out, int lanes)
{
    const uint64_t per_block = (uint64_t)MM_WARPS * (uint64_t)(32 / lanes);
    return (uint32_t)((n_out + per_block - 1) / per_block);
}

// Whether a product of n_tok tokens on the integer path runs on the tensor
// cores, and the blocks of those kernels: for n_out rows, and for n_tok
// tokens (tiles of 8 MMA_NG).
static inline bool mma_on(uint32_t n_tok) { return bg_mma && n_tok > MM_TOK; }
static inline uint32_t mma_blocks(uint64_t n_out)
{
    return (uint32_t)((n_out + MMA_ROWS - 1) / MMA_ROWS);
}
// The bytes of a row of n_in weights of type `type` (0: a type without a
// kernel).
static inline uint64_t row_bytes_of(uint32_t type, uint64_t n_in)
{
    uint64_t rb = 0;
    bool ok;
#define RB(T) (rb = bg_row_bytes<T>(n_in))
    BG_DISPATCH(type, ok, RB);
#undef RB
    return ok ? rb : 0;
}

// The shared memory of a staged tensor-core block (bg_mma_rows_staged) for
// nr matrices of `type` and tiles of 8 ng tokens; 0: unstaged
// (BRIGADE_CUDA_MMA_STAGE=0, or more than the 48 KiB a block gets without
// asking).
static inline uint32_t mma_stage_bytes(uint32_t type, int nr, int ng)
{
    const uint64_t seg = row_bytes_of(type, MMA_SEG * 32);
    const uint32_t bytes = bg_mma_stage_bytes(seg, nr, ng);
    return bg_mma_stage && seg && bytes <= 48 * 1024 ? bytes : 0;
}
static inline uint32_t mma_tiles(uint32_t n_tok)
{
    const uint32_t tiles = (n_tok + 8 * MMA_NG - 1) / (8 * MMA_NG);
    return tiles > 65535 ? 65535 : tiles;
}

// Whether a product's last block may finish the work that follows it.
static inline bool tails_on(const bg_gpu *g, uint32_t n_tok)
{
    return g->counters && n_tok <= TAIL_TOKENS;
}

