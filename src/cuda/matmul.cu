// Dequantizing matrix-vector products for every weight format, and the
// fused mixture of experts: routing (softmax, top-k) and the chosen
// experts' gate/up/down rows, all on the device (backend.cu's expert_sum
// weighs and adds them).
//
// Decode is memory-bound: a warp streams one weight row once per group of
// up to MM_TOK tokens, dequantizing 32 values at a time in registers; on
// the integer path, short rows (512 or 256 wide) take 16 or 8 lanes each,
// so no lane idles.
// Not yet run on a GPU (written in a session without one).
#include "rows.cuh"

enum { MM_WARPS = 4, MM_TOK = 8 };

// How the CPU converts activations before a dot product with weights of
// type T (quant.c's dot_type and quantize_activations): the GPU applies the
// same rounding to x, so both sides multiply the same numbers.
template <int T> struct bg_act { enum { kind = ACT_Q8_0 }; }; // q4_0, q5_0, q8_0, iq4_nl, q4_1, q5_1
template <> struct bg_act<T_F32> { enum { kind = ACT_F32 }; };
template <> struct bg_act<T_F16> { enum { kind = ACT_F16 }; };
template <> struct bg_act<T_BF16> { enum { kind = ACT_BF16 }; };
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

// ---------------------------------------------- the integer path
//
// Weights whose values are small integers times a scale per 16 or 32 (Q4_0,
// Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS) multiply activations coded
// once per product (k_code_act: int8 codes and a scale per 32, as the CPU
// codes them for that type) with integer dot products of four bytes
// (dp4a): per 32 weights, value = d_a * (s0 * sum over the first 16 of w * a
// + s1 * sum over the last 16 - m * sum of a), which is the float path's sum
// of (weight) * (rounded activation), summed exactly before the scales
// instead of after. Q4_1, Q5_1 and the float types take the float path.

template <int T> struct bg_int_path { enum { on = 0 }; };
#define BG_INT_TYPES(X) X(T_Q4_0) X(T_Q5_0) X(T_Q8_0) X(T_IQ4_NL) X(T_Q4_K) X(T_Q5_K) X(T_Q6_K) X(T_IQ4_XS)
#define BG_INT_PATH_ON(T)                                                                      \
    template <> struct bg_int_path<T> { enum { on = 1 }; };
BG_INT_TYPES(BG_INT_PATH_ON)
#undef BG_INT_PATH_ON

__device__ __forceinline__ int bg_dp4a(int a, int b, int c)
{
    return __dp4a(a, b, c);
}

// Chunk c of a row: its scales (value = s0 * code for its first 16 codes,
// s1 * code for its last 16, less m), and word k (of 8) of its codes as
// four int8.
template <int T>
__device__ __forceinline__ void bg_int_scales(const uint8_t *row, uint64_t c, float *s0,
                                              float *s1, float *m);
template <int T> __device__ __forceinline__ int bg_int_word(const uint8_t *row, uint64_t c, int k);

// Four bytes less k in each (values below 64 here), without borrows
// between them: bit 7 set first, flipped back after.
__device__ __forceinline__ int bg_bytes_less(uint32_t v, uint32_t k)
{
    return (int)(((v | 0x80808080u) - k) ^ 0x80808080u);
}

template <>
__device__ __forceinline__ void bg_int_scales<T_Q8_0>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 34));
    *m = 0.0f;
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
                                                  float *m)
{
    int sc, mn;
    bg_k_scale_min(b + 4, g, &sc, &mn);
    *s0 = *s1 = __fmul_rn(bg_h2f(bg_ld16(b)), (float)sc);
    *m = __fmul_rn(bg_h2f(bg_ld16(b + 2)), (float)mn);
}

template <>
__device__ __forceinline__ void bg_int_scales<T_Q4_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m)
{
    bg_k_group_scales(row + (c / 8) * 144, (int)(c % 8), s0, s1, m);
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
                                                      float *s1, float *m)
{
    const uint8_t *b = row + (c / 8) * 210; // 2-byte aligned: the block is 210 bytes
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = bg_h2f(bg_ld16(b + 208));
    const int e0 = 32 * (int)(c % 8);
    *s0 = __fmul_rn(d, (float)scales[e0 / 16]);
    *s1 = __fmul_rn(d, (float)scales[e0 / 16 + 1]);
    *m = 0.0f;
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
                                                      float *s1, float *m)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 18));
    *m = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_Q4_0>(const uint8_t *row, uint64_t c, int k)
{
    return bg_bytes_less(bg_nibble_word(row + c * 18 + 2, k), 0x08080808u);
}

// x = d * (q - 16), bit 4 of value e is bit e of qh
template <>
__device__ __forceinline__ void bg_int_scales<T_Q5_0>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 22));
    *m = 0.0f;
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
                                                        float *s1, float *m)
{
    *s0 = *s1 = bg_h2f(bg_ld16(row + c * 18));
    *m = 0.0f;
}
template <>
__device__ __forceinline__ int bg_int_word<T_IQ4_NL>(const uint8_t *row, uint64_t c, int k)
{
    return bg_iq4_word(bg_nibble_word(row + c * 18 + 2, k));
}

// As Q4_K (176-byte blocks), bit 4 of value e is bit c % 8 of qh[e]
template <>
__device__ __forceinline__ void bg_int_scales<T_Q5_K>(const uint8_t *row, uint64_t c, float *s0,
                                                      float *s1, float *m)
{
    bg_k_group_scales(row + (c / 8) * 176, (int)(c % 8), s0, s1, m);
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
                                                        float *s1, float *m)
{
    const uint8_t *b = row + (c / 8) * 136;
    const int g = (int)(c % 8);
    const int lo = (b[4 + g / 2] >> (4 * (g % 2))) & 0xF;
    const int hi = (bg_ld16(b + 2) >> (2 * g)) & 3;
    *s0 = *s1 = __fmul_rn(bg_h2f(bg_ld16(b)), (float)((lo | hi << 4) - 32));
    *m = 0.0f;
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
                                         float *s1, float *m)
{
    bg_int_scales<T>(row, c, s0, s1, m);
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
template <int NR, int TOK>
__device__ __forceinline__ void bg_acc_chunk_int(float acc[NR][TOK], int t, const int w[NR][8],
                                                 const float s0[NR], const float s1[NR],
                                                 const float m[NR], const int a[8], float da)
{
    int asum = 0;
#pragma unroll
    for (int k = 0; k < 8; k++)
        asum = bg_dp4a(a[k], 0x01010101, asum);
#pragma unroll
    for (int r = 0; r < NR; r++) {
        int i0 = 0, i1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            i0 = bg_dp4a(w[r][k], a[k], i0);
            i1 = bg_dp4a(w[r][k + 4], a[k + 4], i1);
        }
        acc[r][t] += da * (s0[r] * (float)i0 + s1[r] * (float)i1 - m[r] * (float)asum);
    }
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
    for (uint64_t c = threadIdx.x % (uint32_t)lanes; c < n_chunks; c += (uint32_t)lanes) {
        int w[NR][8];
        float s0[NR], s1[NR], m[NR];
#pragma unroll
        for (int r = 0; r < NR; r++)
            bg_int32<T>(rows[r], c, w[r], &s0[r], &s1[r], &m[r]);
#pragma unroll
        for (int t = 0; t < TOK; t++) {
            if (t >= nt)
                break;
            const uint4 *ap = BG_ALIGNED(const uint4 *, xq[t] + c * 32);
            const uint4 a0 = ap[0], a1 = ap[1];
            const int a[8] = {(int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w,
                              (int)a1.x, (int)a1.y, (int)a1.z, (int)a1.w};
            bg_acc_chunk_int<NR, TOK>(acc, t, w, s0, s1, m, a, ((const float *)(xq[t] + n_in))[c]);
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
    float v[32], da;
    bg_load32(x + c * 32, active, v);
    bg_code_act<bg_act<T>::kind>(v, active, v, &da); // in place: fewer registers
    if (active && valid) {
        int w[NR][8], a[8];
        float s0[NR], s1[NR], m[NR];
#pragma unroll
        for (int r = 0; r < NR; r++)
            bg_int32<T>(rows[r], c, w[r], &s0[r], &s1[r], &m[r]);
        bg_pack_codes(v, (uint32_t *)a);
        bg_acc_chunk_int<NR, 1>(acc, 0, w, s0, s1, m, a, da);
    }
    bg_acc_lanes_sum<NR, 1>(acc, 1, lanes);
}

// ---------------------------------------------- tensor cores
//
// Products of more than MM_TOK tokens on the integer path (prefill) run on
// the tensor cores: mma.sync m16n8k16 over int8 (sm_80 and later) gives a
// warp the sums over 16 codes of 16 weight rows by 8 tokens, the i0 and i1
// that bg_acc_chunk_int adds up with dp4a a lane at a time; each chunk's
// value is then the same float expression, da * (s0 i0 + s1 i1 - m asum).
// A warp takes 16 rows by 8 * NG tokens, so a weight word it loads serves
// 8 * NG tokens instead of MM_TOK. BRIGADE_CUDA_MMA=0 turns this off.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with integer
// type"), for lane l, g = l / 4, q = l % 4: A is a register of row g's codes
// 4q .. 4q + 3 and one of row g + 8's; B a register of token g's codes
// 4q .. 4q + 3; D rows g and g + 8 by tokens 2q and 2q + 1.
extern bool bg_mma; // backend.cu sets it

// d = the 16 x 8 products of a_lo / a_hi (rows g, g + 8) and b (token g).
__device__ __forceinline__ void bg_mma_s8(int d[4], int a_lo, int a_hi, int b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%7, %7, %7, %7};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a_lo), "r"(a_hi), "r"(b), "r"(0));
#else
    // the host emulation (and device code for cards before sm_80, which
    // never run it: bg_mma is off there): each sum from the lanes holding
    // its row and token
    const int g = (int)(threadIdx.x % 32 / 4), q = (int)(threadIdx.x % 4);
    d[0] = d[1] = d[2] = d[3] = 0;
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

// Whether mma.sync lays its fragments out as bg_mma_s8's callers assume:
// one product of a 16 x 16 matrix by a 16 x 8 one (a: row-major codes, b:
// each column's 16 codes in turn), d row-major 16 x 8.
__global__ void k_mma_probe(const int *a, const int *b, int *d)
{
    BG_KERNEL_ENTRY();
    const int g = (int)threadIdx.x / 4, q = (int)threadIdx.x % 4;
    int v[4];
    bg_mma_s8(v, a[4 * g + q], a[4 * (g + 8) + q], b[4 * g + q]);
    d[8 * g + 2 * q] = v[0], d[8 * g + 2 * q + 1] = v[1];
    d[8 * (g + 8) + 2 * q] = v[2], d[8 * (g + 8) + 2 * q + 1] = v[3];
}

// Runs k_mma_probe on distinct codes and checks it against the product
// worked out here; false on any difference or error (cleared). The
// device's init keeps the tensor cores off unless this holds.
bool bg_cuda_mma_works(cudaStream_t stream)
{
    int8_t a[16 * 16], b[8 * 16];
    int want[16 * 8], got[16 * 8];
    for (int i = 0; i < 16 * 16; i++)
        a[i] = (int8_t)((i * 37 + 11) % 255 - 127);
    for (int i = 0; i < 8 * 16; i++)
        b[i] = (int8_t)((i * 53 + 5) % 255 - 127);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            int s = 0;
            for (int k = 0; k < 16; k++)
                s += a[16 * r + k] * b[16 * n + k];
            want[8 * r + n] = s;
        }
    uint8_t *dev = NULL;
    const size_t bytes = sizeof a + sizeof b + sizeof got;
    bool ok = cudaMalloc((void **)&dev, bytes) == cudaSuccess &&
              cudaMemcpyAsync(dev, a, sizeof a, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
              cudaMemcpyAsync(dev + sizeof a, b, sizeof b, cudaMemcpyHostToDevice, stream) ==
                  cudaSuccess;
    if (ok) {
        BG_LAUNCH(1, 32, 0, stream, k_mma_probe)((const int *)dev, (const int *)(dev + sizeof a),
                                                 (int *)(dev + sizeof a + sizeof b));
        ok = cudaGetLastError() == cudaSuccess &&
             cudaMemcpyAsync(got, dev + sizeof a + sizeof b, sizeof got, cudaMemcpyDeviceToHost,
                             stream) == cudaSuccess &&
             cudaStreamSynchronize(stream) == cudaSuccess && !memcmp(got, want, sizeof got);
    }
    cudaFree(dev);
    cudaGetLastError();
    return ok;
}

enum { MMA_ROWS = 16 * MM_WARPS, MMA_NG = 4 };

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
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int j = 0; j < NG; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[r][j][e] = 0.0f;
    const uint64_t n_chunks = n_in / 32;
    for (uint64_t c = 0; c < n_chunks; c++) {
        int a[NR][2][2]; // [matrix][half of the chunk][row g, row g + 8]
        float s0[NR][2], s1[NR][2], m[NR][2];
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                a[r][0][h] = bg_int_word<T>(rows[r][h], c, q);
                a[r][1][h] = bg_int_word<T>(rows[r][h], c, q + 4);
                bg_int_scales<T>(rows[r][h], c, &s0[r][h], &s1[r][h], &m[r][h]);
            }
#pragma unroll
        for (int j = 0; j < NG; j++) {
            const uint32_t *bw = BG_ALIGNED(const uint32_t *, xb[j] + c * 32);
            const int b0 = (int)bw[q], b1 = (int)bw[q + 4];
            // the codes' sums of tokens 2q and 2q + 1, for the mins
            float as[2] = {0.0f, 0.0f};
            if constexpr (T == T_Q4_K || T == T_Q5_K) { // the types with mins
                int s = bg_dp4a(b0, 0x01010101, bg_dp4a(b1, 0x01010101, 0));
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                as[0] = (float)__shfl_sync(0xffffffffu, s, 8 * q);
                as[1] = (float)__shfl_sync(0xffffffffu, s, 8 * q + 4);
            }
            const float da[2] = {((const float *)(xd[j][0] + n_in))[c],
                                 ((const float *)(xd[j][1] + n_in))[c]};
#pragma unroll
            for (int r = 0; r < NR; r++) {
                int i0[4], i1[4];
                bg_mma_s8(i0, a[r][0][0], a[r][0][1], b0);
                bg_mma_s8(i1, a[r][1][0], a[r][1][1], b1);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int h = e / 2, t = e % 2;
                    acc[r][j][e] += da[t] * (s0[r][h] * (float)i0[e] + s1[r][h] * (float)i1[e] -
                                             m[r][h] * as[t]);
                }
            }
        }
    }
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

// Rows o0 .. o0 + 15 of w (NR matrices) against n_tok tokens coded in xq,
// tiles of 8 MMA_NG tokens from blockIdx.y on, into y (stride ys).
template <int T, int NR>
__device__ __forceinline__ void bg_mma_tokens(const uint8_t *const w[NR], uint64_t o0,
                                              uint64_t n_out, uint64_t n_in, const uint8_t *xq,
                                              uint32_t n_tok, float *y, size_t ys)
{
    const uint64_t qs = bg_code_row_bytes(n_in);
    for (uint32_t t0 = blockIdx.y * 8 * MMA_NG; t0 < n_tok; t0 += gridDim.y * 8 * MMA_NG) {
        const int nt = n_tok - t0 < 8 * MMA_NG ? (int)(n_tok - t0) : 8 * MMA_NG;
        bg_mma_rows<T, NR, MMA_NG>(
            w, o0, n_out, n_in, nt, [&](int i) { return xq + (size_t)(t0 + i) * qs; },
            [&](int i, uint64_t o, float v) { y[(size_t)(t0 + i) * ys + o] = v; });
    }
}

// The first row of the calling warp's 16 (MMA_ROWS a block).
__device__ __forceinline__ uint64_t bg_mma_first_row(uint32_t block)
{
    return (uint64_t)block * MMA_ROWS + threadIdx.x / 32 * 16;
}

// ---------------------------------------------- the float path

// acc[r][t] += v[r] . round(x_t[32c .. 32c+31]) for the group's tokens
// (xr[t]: token t's row) and each of the NR weight rows; a token's
// activations are loaded and rounded once for all NR rows.
template <int T, int NR>
__device__ __forceinline__ void bg_acc_tokens(const float v[NR][32], const float *const xr[MM_TOK],
                                              uint64_t c, int nt, bool active,
                                              float acc[NR][MM_TOK])
{
#pragma unroll
    for (int t = 0; t < MM_TOK; t++) {
        if (t >= nt)
            break;
        float xv[32];
        bg_load32(xr[t] + c * 32, active, xv);
        bg_round_act<bg_act<T>::kind>(xv, active);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 32; j++)
                s += v[r][j] * xv[j];
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
        float v[NR][32];
        if (active)
#pragma unroll
            for (int r = 0; r < NR; r++)
                bg_deq32<T>(rows[r], c, v[r]);
        bg_acc_tokens<T, NR>(v, xr, c, nt, active, acc);
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
// block: it counts each expert's slots, lists the experts chosen, and
// files every slot under its expert. The order of the slots inside a group
// is not fixed, and need not be: each slot's dot products are its own.
// cursor: n_expert ints of shared memory. The block's writes of chosen are
// visible (after a barrier).
__device__ __forceinline__ void bg_block_group(const int32_t *chosen, uint32_t n_slots,
                                               uint32_t n_expert, int32_t *groups,
                                               int32_t *cursor)
{
    int32_t *offsets = groups, *n_active = groups + n_expert + 1, *active = n_active + 1;
    int32_t *sorted = active + n_expert;
    for (uint32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
        cursor[e] = 0;
    __syncthreads();
    for (uint32_t s = threadIdx.x; s < n_slots; s += blockDim.x)
        atomicAdd(&cursor[chosen[s]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t at = 0, n = 0;
        for (uint32_t e = 0; e < n_expert; e++) {
            const int32_t count = cursor[e];
            offsets[e] = at;
            cursor[e] = at;
            if (count)
                active[n++] = (int32_t)e;
            at += count;
        }
        offsets[n_expert] = at;
        *n_active = n;
    }
    __syncthreads();
    for (uint32_t s = threadIdx.x; s < n_slots; s += blockDim.x)
        sorted[atomicAdd(&cursor[chosen[s]], 1)] = (int32_t)s;
}

// Tokens [t0, t_end) routed over their logits (rows of n_expert), a warp
// each, and, when groups is set, the slots of all n_tok tokens grouped
// by this block (cursor: n_expert ints of shared memory).
__device__ __forceinline__ void bg_block_route(const float *logits, uint32_t t0, uint32_t t_end,
                                               uint32_t n_tok, uint32_t n_expert,
                                               uint32_t k_used, int32_t *chosen, float *chosen_w,
                                               int32_t *groups, int32_t *cursor)
{
    for (uint32_t t = t0 + threadIdx.x / 32; t < t_end; t += blockDim.x / 32)
        bg_warp_route(logits + (size_t)t * n_expert, n_expert, k_used, chosen + t * k_used,
                      chosen_w + t * k_used);
    if (!groups)
        return;
    __syncthreads();
    bg_block_group(chosen, n_tok * k_used, n_expert, groups, cursor);
}

// What a product's last block does once every block has written its rows,
// for a decode step's few tokens (at most TAIL_TOKENS; more take launches
// of their own, where every block has a share of the work): nothing, the
// residual and the next norm after a mixer's out projection, the routing
// after the router's product, or the end of the feed-forward half after
// the experts' down rows. Each saves a launch per layer.
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
static size_t bg_tail_shared_bytes(const bg_tail &t)
{
    return t.kind == TAIL_ROUTE && t.groups ? (size_t)t.n * sizeof(int32_t) : 0;
}

// Called by every thread of every block, last. TAIL is the kernel's, so
// kernels without one carry none of its code or registers.
template <int TAIL> __device__ __forceinline__ void bg_tail_finish(const bg_tail &t)
{
    if constexpr (TAIL != TAIL_NONE) {
        if (!bg_block_arrives_last(t.counter, (int)(gridDim.x * gridDim.y * gridDim.z)))
            return;
        if constexpr (TAIL == TAIL_ROUTE) {
            BG_DYNAMIC_SHARED(int32_t, cursor);
            bg_block_route(t.y, 0, t.n_tok, t.n_tok, t.n, t.n_used, t.chosen, t.chosen_w,
                           t.groups, cursor);
        } else {
            for (uint32_t r = 0; r < t.n_tok; r++) {
                __syncthreads(); // the previous row's shared sums are read
                if constexpr (TAIL == TAIL_ADD_RMSNORM)
                    bg_block_add_rmsnorm(t.end.d_x, t.y, t.end.d_xn, t.end.d_norm_w, t.n,
                                         t.end.eps, t.end.d_xq, r);
                else
                    bg_block_ffn_end(t.end, t.y, t.n_used, t.n, r);
            }
        }
    }
}

// Row o of W against every token, TOK at a time (NR = 1: y = W x), or
// rows o of Wg (w0) and Wu (w1) together (NR = 2: y = silu(Wg x) * Wu x).
// INT: the integer path over the tokens' coded activations xq (`lanes`
// lanes a row, bg_warp_rows); else the float path over x (a warp a row,
// MM_TOK tokens at a time). Each path is its own kernel, so the float
// path's registers do not crowd the integer path's.
template <int T, int NR, int TOK, bool INT>
__device__ __forceinline__ void bg_matmul_row(const uint8_t *w0, const uint8_t *w1, uint64_t o,
                                              bool valid, int lanes, uint64_t n_in,
                                              const float *x, size_t xs, const uint8_t *xq,
                                              float *y, size_t ys, uint32_t n_tok)
{
    const uint64_t at = o * bg_row_bytes<T>(n_in), qs = bg_code_row_bytes(n_in);
    const uint8_t *const rows[2] = {w0 + at, w1 + at};
    for (uint32_t t0 = blockIdx.y * TOK; t0 < n_tok; t0 += gridDim.y * TOK) {
        const int nt = n_tok - t0 < (uint32_t)TOK ? (int)(n_tok - t0) : TOK;
        float acc[NR][TOK];
        if constexpr (INT) {
            const uint8_t *xr[TOK];
#pragma unroll
            for (int t = 0; t < TOK; t++)
                xr[t] = xq + (size_t)(t0 + (t < nt ? t : 0)) * qs;
            bg_rows_dot_int<T, NR, TOK>(rows, n_in, xr, nt, acc, lanes, valid);
        } else {
            static_assert(TOK == MM_TOK, "the float path groups MM_TOK tokens");
            const float *xr[TOK];
#pragma unroll
            for (int t = 0; t < TOK; t++)
                xr[t] = x + (size_t)(t0 + (t < nt ? t : 0)) * xs;
            bg_rows_dot<T, NR>(rows, n_in, xr, nt, acc);
        }
        if (threadIdx.x % (uint32_t)lanes == 0 && valid)
            for (int t = 0; t < nt; t++)
                y[(size_t)(t0 + t) * ys + o] =
                    NR == 2 ? bg_silu(acc[0][t]) * acc[NR - 1][t] : acc[0][t];
    }
}

// A product's operands (k_matmul).
struct bg_mm {
    const uint8_t *w0, *w1;
    uint64_t n_in, n_out;
    const float *x;
    size_t xs;
    const uint8_t *xq;
    float *y;
    size_t ys;
    uint32_t n_tok;
    int lanes;
};

// With a tail, more registers than the loop's alone: the products that
// take one (a mixer's out projection, the router) are a decode step's
// 512 blocks or fewer, all on the device at once anyway.
template <int T, int NR, int TOK, bool INT, int TAIL>
__global__ void __launch_bounds__(MM_WARPS * 32) k_matmul(const bg_mm m, const bg_tail tail)
{
    BG_KERNEL_ENTRY();
    uint64_t o;
    bool valid;
    if (bg_warp_rows((uint64_t)blockIdx.x * MM_WARPS + threadIdx.x / 32, m.n_out, m.lanes, &o,
                     &valid))
        bg_matmul_row<T, NR, TOK, INT>(m.w0, m.w1, o, valid, m.lanes, m.n_in, m.x, m.xs, m.xq,
                                       m.y, m.ys, m.n_tok);
    bg_tail_finish<TAIL>(tail);
}

// k_matmul's integer path on the tensor cores (more than MM_TOK tokens, no
// tail): a warp 16 rows.
template <int T, int NR>
__global__ void __launch_bounds__(MM_WARPS * 32) k_matmul_mma(const bg_mm m)
{
    BG_KERNEL_ENTRY();
    const uint64_t o0 = bg_mma_first_row(blockIdx.x);
    const uint8_t *const w[2] = {m.w0, m.w1};
    if (o0 < m.n_out)
        bg_mma_tokens<T, NR>(w, o0, m.n_out, m.n_in, m.xq, m.n_tok, m.y, m.ys);
}

// Whether products with weights of this type code their activations for
// the integer path (bg_int_path), and how.
static bool int_path(uint32_t type)
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
static int code_kind(uint32_t type)
{
    if (!int_path(type))
        return -1;
    return type == T_Q4_K || type == T_Q5_K || type == T_Q6_K || type == T_IQ4_XS ? ACT_Q8_K
                                                                                  : ACT_Q8_0;
}

// The coded rows of x for products with weights of `type`: pre (x's rows
// coded by the norm that wrote them, or NULL) where the type codes as it
// does, else n_rows rows coded now into the scratch; NULL (float path)
// when the type has no integer path or the scratch is too small.
static const uint8_t *code_act(bg_gpu *g, uint32_t type, const float *x, size_t xs,
                               uint64_t n_in, uint32_t n_rows, const uint8_t *pre, int *rc)
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
static int row_lanes(bool int_path, uint64_t n_in)
{
    const uint64_t chunks = n_in / 32;
    return !int_path || chunks > 16 ? 32 : chunks > 8 ? 16 : 8;
}

// Blocks of MM_WARPS warps for n_out rows, lanes to a row.
static uint32_t row_blocks(uint64_t n_out, int lanes)
{
    const uint64_t per_block = (uint64_t)MM_WARPS * (uint64_t)(32 / lanes);
    return (uint32_t)((n_out + per_block - 1) / per_block);
}

static dim3 mm_grid(uint64_t n_out, uint32_t n_tok, int lanes)
{
    uint32_t groups = (n_tok + MM_TOK - 1) / MM_TOK;
    return dim3(row_blocks(n_out, lanes), groups > 65535 ? 65535 : groups);
}

// Whether a product of n_tok tokens on the integer path runs on the tensor
// cores, and the blocks of those kernels: for n_out rows, and for n_tok
// tokens (tiles of 8 MMA_NG).
static bool mma_on(uint32_t n_tok) { return bg_mma && n_tok > MM_TOK; }
static uint32_t mma_blocks(uint64_t n_out) { return (uint32_t)((n_out + MMA_ROWS - 1) / MMA_ROWS); }
static uint32_t mma_tiles(uint32_t n_tok)
{
    const uint32_t tiles = (n_tok + 8 * MMA_NG - 1) / (8 * MMA_NG);
    return tiles > 65535 ? 65535 : tiles;
}

template <int T, int NR, int TOK, bool INT, int TAIL>
static void launch_k_matmul(bg_gpu *g, dim3 grid, const bg_mm &m, const bg_tail &tail)
{
    BG_LAUNCH(grid, MM_WARPS * 32, bg_tail_shared_bytes(tail), g->stream,
              k_matmul<T, NR, TOK, INT, TAIL>)(m, tail);
}

// Launches k_matmul for weights of type T: the integer path when x is
// coded (one token alone, as in a decode step, takes the one-token
// kernel), else the float path. The tail goes along with the integer
// path's single products (a residual) and with an f32 router's (the
// routing), where decode steps meet them; true when it did.
template <int T, int NR>
static bool launch_matmul(bg_gpu *g, dim3 grid, const bg_mm &m, const bg_tail &tail)
{
    if constexpr (bg_int_path<T>::on) {
        if (m.xq) {
            if (tail.kind == TAIL_NONE && mma_on(m.n_tok)) {
                BG_LAUNCH(dim3(mma_blocks(m.n_out), mma_tiles(m.n_tok)), MM_WARPS * 32, 0,
                          g->stream, k_matmul_mma<T, NR>)(m);
                return false;
            }
            if constexpr (NR == 1)
                if (tail.kind == TAIL_ADD_RMSNORM) {
                    if (m.n_tok == 1)
                        launch_k_matmul<T, 1, 1, true, TAIL_ADD_RMSNORM>(g, grid, m, tail);
                    else
                        launch_k_matmul<T, 1, MM_TOK, true, TAIL_ADD_RMSNORM>(g, grid, m, tail);
                    return true;
                }
            if (m.n_tok == 1)
                launch_k_matmul<T, NR, 1, true, TAIL_NONE>(g, grid, m, tail);
            else
                launch_k_matmul<T, NR, MM_TOK, true, TAIL_NONE>(g, grid, m, tail);
            return false;
        }
    }
    if constexpr (NR == 1 && T == T_F32)
        if (tail.kind == TAIL_ROUTE) {
            launch_k_matmul<T, 1, MM_TOK, false, TAIL_ROUTE>(g, grid, m, tail);
            return true;
        }
    launch_k_matmul<T, NR, MM_TOK, false, TAIL_NONE>(g, grid, m, tail);
    return false;
}

// Whether a product's last block may finish the work that follows it.
static bool tails_on(const bg_gpu *g, uint32_t n_tok)
{
    return g->counters && n_tok <= TAIL_TOKENS;
}

// y = W x (w1 NULL), or y = silu(W x) * W1 x; xq_pre: x coded, or NULL;
// then the tail's work where it goes along (*tail_done set; tail NULL:
// none).
static int matmul(bg_gpu *g, uint32_t type, const void *w0, const void *w1, uint64_t n_in,
                  uint64_t n_out, const float *x, size_t xs, const uint8_t *xq_pre, float *y,
                  size_t ys, uint32_t n_tok, const bg_tail *tail_or_null, bool *tail_done)
{
    const bg_tail tail = tail_or_null ? *tail_or_null : bg_tail{};
    if (tail_done)
        *tail_done = false;
    if (n_in % 32 || xs % 4 || (uintptr_t)x % 16) {
        snprintf(g->err, sizeof g->err, "matmul: rows of %llu (stride %zu) not handled",
                 (unsigned long long)n_in, xs);
        return -1;
    }
    if (!n_tok || !n_out)
        return 0;
    int rc;
    const uint8_t *xq = code_act(g, type, x, xs, n_in, n_tok, xq_pre, &rc);
    if (rc)
        return rc;
    const int lanes = row_lanes(xq != NULL, n_in);
    const dim3 grid = mm_grid(n_out, n_tok, lanes);
    const uint8_t *p0 = (const uint8_t *)w0;
    const bg_mm m = {p0, w1 ? (const uint8_t *)w1 : p0, n_in, n_out, x, xs, xq, y, ys, n_tok,
                     lanes};
    bool ok, done;
#define MM(T) (done = w1 ? launch_matmul<T, 2>(g, grid, m, tail) : launch_matmul<T, 1>(g, grid, m, tail))
    BG_DISPATCH(type, ok, MM);
#undef MM
    if (tail_done)
        *tail_done = ok && done;
    if (!ok) {
        snprintf(g->err, sizeof g->err, "matmul: tensor type %u has no CUDA kernel", type);
        return -1;
    }
    return bg_cuda_launched(g, "matmul");
}

// ---------------------------------------------- several products, one input

// The products of one launch: block ranges, weights and outputs of each.
struct bg_multi {
    const uint8_t *w[BG_GPU_MAX_PROJ];
    float *y[BG_GPU_MAX_PROJ];
    uint64_t n_out[BG_GPU_MAX_PROJ];
    size_t ys[BG_GPU_MAX_PROJ];
    uint32_t type[BG_GPU_MAX_PROJ];
    uint32_t first_block[BG_GPU_MAX_PROJ + 1];
    uint32_t n;
    int lanes; // to a row (row_lanes)
};

// Blocks [first_block[k], first_block[k + 1]) compute product k; each
// block's rows have one type, so the switch does not split a warp.
__device__ __forceinline__ uint32_t bg_multi_product(const bg_multi &m)
{
    uint32_t k = 0;
    while (k + 1 < m.n && blockIdx.x >= m.first_block[k + 1])
        k++;
    return k;
}

template <int TOK>
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_matmul_multi(bg_multi m, uint64_t n_in, const uint8_t *xq, uint32_t n_tok)
{
    BG_KERNEL_ENTRY();
    const uint32_t k = bg_multi_product(m);
    uint64_t o;
    bool valid;
    if (!bg_warp_rows((uint64_t)(blockIdx.x - m.first_block[k]) * MM_WARPS + threadIdx.x / 32,
                      m.n_out[k], m.lanes, &o, &valid))
        return;
    switch (m.type[k]) {
    // integer path only (xq is set): x is not read
#define ROW(T)                                                                                 \
    bg_matmul_row<T, 1, TOK, true>(m.w[k], m.w[k], o, valid, m.lanes, n_in, NULL, 0, xq, m.y[k], \
                                   m.ys[k], n_tok)
#define CASE(T) case T: ROW(T); break;
        BG_INT_TYPES(CASE)
#undef CASE
#undef ROW
    default: break;
    }
}

// k_matmul_multi on the tensor cores (first_block counts MMA_ROWS a block).
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_matmul_multi_mma(bg_multi m, uint64_t n_in, const uint8_t *xq, uint32_t n_tok)
{
    BG_KERNEL_ENTRY();
    const uint32_t k = bg_multi_product(m);
    const uint64_t o0 = bg_mma_first_row(blockIdx.x - m.first_block[k]);
    if (o0 >= m.n_out[k])
        return;
    const uint8_t *const w[1] = {m.w[k]};
    switch (m.type[k]) {
#define ROWS(T) bg_mma_tokens<T, 1>(w, o0, m.n_out[k], n_in, xq, n_tok, m.y[k], m.ys[k])
#define CASE(T) case T: ROWS(T); break;
        BG_INT_TYPES(CASE)
#undef CASE
#undef ROWS
    default: break;
    }
}

extern "C" int bg_cuda_matmul_multi(bg_gpu *g, const bg_gpu_proj *proj, uint32_t n_proj,
                                    uint64_t n_in, const float *d_x, size_t x_stride,
                                    const uint8_t *d_xq, uint32_t n_tok)
{
    if (n_proj > BG_GPU_MAX_PROJ) {
        snprintf(g->err, sizeof g->err, "matmul_multi: %u products, at most %d", n_proj,
                 BG_GPU_MAX_PROJ);
        return -1;
    }
    // one launch when every product codes its activations the same way
    bool one = n_proj > 1 && n_tok && code_kind(proj[0].type) >= 0 && x_stride % 4 == 0 &&
               (uintptr_t)d_x % 16 == 0;
    for (uint32_t k = 1; k < n_proj; k++)
        one = one && code_kind(proj[k].type) == code_kind(proj[0].type);
    int rc = 0;
    const uint8_t *xq =
        one ? code_act(g, proj[0].type, d_x, x_stride, n_in, n_tok, d_xq, &rc) : NULL;
    if (rc)
        return rc;
    if (!xq) { // one product after another
        for (uint32_t k = 0; k < n_proj; k++)
            if (matmul(g, proj[k].type, proj[k].d_w, NULL, n_in, proj[k].n_out, d_x, x_stride,
                       d_xq, proj[k].d_y, proj[k].y_stride, n_tok, NULL, NULL))
                return -1;
        return 0;
    }
    bg_multi m = {};
    m.lanes = row_lanes(true, n_in);
    const bool mma = mma_on(n_tok);
    uint32_t blocks = 0;
    for (uint32_t k = 0; k < n_proj; k++) {
        m.w[k] = (const uint8_t *)proj[k].d_w;
        m.y[k] = proj[k].d_y;
        m.n_out[k] = proj[k].n_out;
        m.ys[k] = proj[k].y_stride;
        m.type[k] = proj[k].type;
        m.first_block[k] = blocks;
        blocks += mma ? mma_blocks(proj[k].n_out) : row_blocks(proj[k].n_out, m.lanes);
    }
    m.first_block[n_proj] = blocks;
    m.n = n_proj;
    const uint32_t groups = (n_tok + MM_TOK - 1) / MM_TOK;
    const dim3 grid(blocks, groups > 65535 ? 65535 : groups);
    if (mma)
        BG_LAUNCH(dim3(blocks, mma_tiles(n_tok)), MM_WARPS * 32, 0, g->stream,
                  k_matmul_multi_mma)(m, n_in, xq, n_tok);
    else if (n_tok == 1)
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_matmul_multi<1>)(m, n_in, xq, n_tok);
    else
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_matmul_multi<MM_TOK>)(m, n_in, xq, n_tok);
    return bg_cuda_launched(g, "matmul (several)");
}

extern "C" int bg_cuda_matmul(bg_gpu *g, uint32_t type, const void *d_w, uint64_t n_in,
                              uint64_t n_out, const float *d_x, size_t x_stride,
                              const uint8_t *d_xq, float *d_y, size_t y_stride, uint32_t n_tok)
{
    return matmul(g, type, d_w, NULL, n_in, n_out, d_x, x_stride, d_xq, d_y, y_stride, n_tok,
                  NULL, NULL);
}

extern "C" int bg_cuda_matmul_add_rmsnorm(bg_gpu *g, const bg_gpu_proj *p, uint64_t n_in,
                                          const float *d_a, size_t a_stride, const uint8_t *d_aq,
                                          uint32_t n_tok, float *d_x, float *d_xn,
                                          const float *d_norm_w, float eps, uint8_t *d_xq)
{
    const uint32_t n = (uint32_t)p->n_out;
    if (p->y_stride != p->n_out) {
        snprintf(g->err, sizeof g->err, "matmul and add: rows of %u at a stride of %zu", n,
                 p->y_stride);
        return -1;
    }
    if (bg_cuda_codes_ok(g, "add and rmsnorm", d_xq, n, d_xn, n))
        return -1;
    bg_tail t = {};
    t.kind = TAIL_ADD_RMSNORM, t.counter = g->counters, t.n_tok = n_tok, t.n = n, t.y = p->d_y;
    t.end.d_x = d_x, t.end.d_xn = d_xn, t.end.d_norm_w = d_norm_w, t.end.eps = eps;
    t.end.d_xq = d_xq;
    bool done;
    if (matmul(g, p->type, p->d_w, NULL, n_in, n, d_a, a_stride, d_aq, p->d_y, n, n_tok,
               tails_on(g, n_tok) ? &t : NULL, &done))
        return -1;
    return done ? 0 : bg_cuda_add_rmsnorm(g, d_x, p->d_y, d_xn, d_norm_w, n, n_tok, eps, d_xq);
}

extern "C" int bg_cuda_matmul_swiglu(bg_gpu *g, uint32_t type, const void *d_wg, const void *d_wu,
                                     uint64_t n_in, uint64_t n_out, const float *d_x,
                                     size_t x_stride, float *d_h, size_t h_stride, uint32_t n_tok)
{
    return matmul(g, type, d_wg, d_wu, n_in, n_out, d_x, x_stride, NULL, d_h, h_stride, n_tok,
                  NULL, NULL);
}

// ------------------------------------------------------------------ MoE

enum { ROUTE_WARPS = 8 };

// The routing of ROUTE_WARPS tokens a block; a grid of one block also
// groups the slots (groups set), saving k_group's launch.
__global__ void __launch_bounds__(ROUTE_WARPS * 32)
    k_route(const float *logits, uint32_t n_tok, uint32_t n_expert, uint32_t k_used,
            int32_t *chosen, float *chosen_w, int32_t *groups)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(int32_t, cursor); // [n_expert] when grouping
    const uint32_t t0 = blockIdx.x * ROUTE_WARPS;
    const uint32_t t_end = n_tok - t0 < (uint32_t)ROUTE_WARPS ? n_tok : t0 + ROUTE_WARPS;
    bg_block_route(logits, t0, t_end, n_tok, n_expert, k_used, chosen, chosen_w, groups, cursor);
}

__global__ void k_group(const int32_t *chosen, uint32_t n_slots, uint32_t n_expert,
                        int32_t *groups)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(int32_t, cursor); // [n_expert]
    bg_block_group(chosen, n_slots, n_expert, groups, cursor);
}

// The router's product, then the routing: in the product's last block for
// a decode step, else in launches of their own.
extern "C" int bg_cuda_route(bg_gpu *g, const bg_gpu_proj *router, uint64_t n_in,
                             const float *d_x, const uint8_t *d_xq, uint32_t n_tok,
                             uint32_t n_used, int32_t *d_chosen, float *d_chosen_w,
                             int32_t *d_groups)
{
    const uint32_t n_expert = (uint32_t)router->n_out;
    if (!n_tok)
        return 0;
    if (!n_used || n_used > n_expert || n_expert > BG_GPU_MAX_EXPERTS ||
        router->y_stride != router->n_out) {
        snprintf(g->err, sizeof g->err,
                 "routing: %u of %u experts (at most %u), logits at a stride of %zu", n_used,
                 n_expert, BG_GPU_MAX_EXPERTS, router->y_stride);
        return -1;
    }
    float *logits = router->d_y;
    bg_tail t = {};
    t.kind = TAIL_ROUTE, t.counter = g->counters, t.n_tok = n_tok, t.n = n_expert;
    t.n_used = n_used, t.y = logits, t.chosen = d_chosen, t.chosen_w = d_chosen_w;
    t.groups = d_groups;
    bool done;
    if (matmul(g, router->type, router->d_w, NULL, n_in, n_expert, d_x, n_in, d_xq, logits,
               n_expert, n_tok, tails_on(g, n_tok) ? &t : NULL, &done))
        return -1;
    if (done)
        return 0;
    const uint32_t blocks = (n_tok + ROUTE_WARPS - 1) / ROUTE_WARPS;
    int32_t *groups_here = blocks == 1 ? d_groups : NULL;
    BG_LAUNCH(blocks, ROUTE_WARPS * 32, groups_here ? n_expert * sizeof(int32_t) : 0, g->stream,
              k_route)(logits, n_tok, n_expert, n_used, d_chosen, d_chosen_w, groups_here);
    if (bg_cuda_launched(g, "routing"))
        return -1;
    if (!d_groups || groups_here)
        return 0;
    BG_LAUNCH(1, 1024, n_expert * sizeof(int32_t), g->stream, k_group)(d_chosen, n_tok * n_used,
                                                                 n_expert, d_groups);
    return bg_cuda_launched(g, "grouping the experts' tokens");
}

// One grouped expert product. Routed slot s (s < n_routed) reads x row
// s / x_div; with the shared expert's matrices set, its slots follow the
// routed ones, n_routed + t for token t < n_shared, and read x row t
// (x_div > 1: the tokens' rows) or their own slot (x_div 1: hidden rows).
struct bg_egroup {
    const uint8_t *w[2];      // expert 0's matrices (gate and up, or one); expert e at + e * expert_bytes
    const uint8_t *shared[2]; // the shared expert's, or NULL
    uint64_t expert_bytes, n_in, n_out;
    const int32_t *groups; // route's grouping
    uint32_t n_expert, n_routed, n_shared;
    const float *x;
    size_t xs;
    const uint8_t *xq; // x's coded rows (integer path), or NULL
    uint32_t x_div;
    float *y; // y[slot][o], stride ys
    size_t ys;
    int lanes;   // to a row (row_lanes)
    bg_tail tail; // the down rows': the feed-forward half's end, or none
};

__device__ __forceinline__ size_t bg_egroup_xrow(int32_t slot, uint32_t n_routed, uint32_t x_div)
{
    const uint32_t s = (uint32_t)slot;
    return s < n_routed ? s / x_div : x_div == 1 ? s : s - n_routed;
}

// The blockIdx.y-th expert chosen (the last blockIdx.y: the shared expert,
// when set): its matrices, and the range [first, end) of the slots filed
// under it (slot(i): the i-th).
struct bg_expert_pick {
    const uint8_t *w[2];
    int32_t first, end;
    const int32_t *sorted; // the routed slots by expert (route's grouping)
    int32_t n_routed;      // NULL sorted: the shared expert's slots follow these
    __device__ int32_t slot(int32_t i) const { return sorted ? sorted[i] : n_routed + i; }
};
__device__ __forceinline__ bg_expert_pick bg_pick_expert(const bg_egroup &p, bool shared)
{
    if (shared)
        return {{p.shared[0], p.shared[1]}, 0, (int32_t)p.n_shared, NULL, (int32_t)p.n_routed};
    const int32_t *offsets = p.groups, *active = p.groups + p.n_expert + 2;
    const int32_t e = active[blockIdx.y];
    const uint64_t at = (uint64_t)e * p.expert_bytes;
    return {{p.w[0] + at, p.w[1] + at}, offsets[e], offsets[e + 1], active + p.n_expert,
            (int32_t)p.n_routed};
}

// Rows o of the matrices of the blockIdx.y-th expert chosen (the last
// blockIdx.y: the shared expert, when set), over the slots filed under it,
// TOK at a time (1 for decode steps: an expert seldom has more). NR = 2: gate
// (w[0]) and up (w[1]) together, y = silu(gate) * up; NR = 1: y = w[0] x.
// PATH: the integer path over p.xq (EG_CODED) or over p.x coded on the way
// (EG_CODING, one slot at a time), or the float path over p.x (EG_FLOAT).
enum { EG_FLOAT, EG_CODED, EG_CODING };
template <int T, int NR, int TOK, int PATH>
__device__ __forceinline__ void bg_expert_rows(const bg_egroup &p, bool shared, uint64_t o,
                                               bool valid)
{
    const bg_expert_pick pick = bg_pick_expert(p, shared);
    const uint64_t at = o * bg_row_bytes<T>(p.n_in), qs = bg_code_row_bytes(p.n_in);
    const uint8_t *const rows[2] = {pick.w[0] + at, pick.w[1] + at};
    for (int32_t i0 = pick.first; i0 < pick.end; i0 += TOK) {
        const int nt = pick.end - i0 < TOK ? pick.end - i0 : TOK;
        int32_t slot[TOK];
#pragma unroll
        for (int t = 0; t < TOK; t++)
            slot[t] = pick.slot(i0 + (t < nt ? t : 0));
        float acc[NR][TOK];
        if constexpr (PATH == EG_CODING) {
            static_assert(TOK == 1, "coding on the way takes one slot at a time");
            bg_rows_dot_int_coding<T, NR>(
                rows, p.n_in, p.x + bg_egroup_xrow(slot[0], p.n_routed, p.x_div) * p.xs, acc,
                p.lanes, valid);
        } else if constexpr (PATH == EG_CODED) {
            const uint8_t *xr[TOK];
#pragma unroll
            for (int t = 0; t < TOK; t++)
                xr[t] = p.xq + bg_egroup_xrow(slot[t], p.n_routed, p.x_div) * qs;
            bg_rows_dot_int<T, NR, TOK>(rows, p.n_in, xr, nt, acc, p.lanes, valid);
        } else {
            static_assert(TOK == MM_TOK, "the float path groups MM_TOK tokens");
            const float *xr[TOK];
#pragma unroll
            for (int t = 0; t < TOK; t++)
                xr[t] = p.x + bg_egroup_xrow(slot[t], p.n_routed, p.x_div) * p.xs;
            bg_rows_dot<T, NR>(rows, p.n_in, xr, nt, acc);
        }
        if (threadIdx.x % (uint32_t)p.lanes == 0 && valid)
            for (int t = 0; t < nt; t++) {
                const float v = NR == 2 ? bg_silu(acc[0][t]) * acc[NR - 1][t] : acc[0][t];
                p.y[(size_t)slot[t] * p.ys + o] = v;
            }
    }
}

// Every block counts itself for the tail, also those without rows. The
// tail's rows (a norm and its coding) would take more registers than the
// products' loop and cost the down rows' thousands of blocks room on an
// SM: the bound keeps the loop's count (sm_90: 78-90, no spills).
enum { EG_TAIL_BLOCKS = 5 };
template <int T, int NR, int TOK, int PATH, int TAIL>
__global__ void __launch_bounds__(MM_WARPS * 32, TAIL == TAIL_NONE ? 1 : EG_TAIL_BLOCKS)
    k_expert_group(const bg_egroup p)
{
    BG_KERNEL_ENTRY();
    const int32_t *n_active = p.groups + p.n_expert + 1;
    const bool shared = p.shared[0] && blockIdx.y == gridDim.y - 1;
    uint64_t o;
    bool valid;
    if ((shared || (int32_t)blockIdx.y < *n_active) &&
        bg_warp_rows((uint64_t)blockIdx.x * MM_WARPS + threadIdx.x / 32, p.n_out, p.lanes, &o,
                     &valid))
        bg_expert_rows<T, NR, TOK, PATH>(p, shared, o, valid);
    bg_tail_finish<TAIL>(p.tail);
}

// k_expert_group's integer path on the tensor cores (experts with more
// than a slot on average, no tail): a warp 16 rows, over tiles of
// 8 EG_MMA_NG of its expert's slots (16: prefill's average with 512 tokens
// and 8 of 256 experts).
enum { EG_MMA_NG = 2 };
template <int T, int NR>
__global__ void __launch_bounds__(MM_WARPS * 32) k_expert_group_mma(const bg_egroup p)
{
    BG_KERNEL_ENTRY();
    const int32_t *n_active = p.groups + p.n_expert + 1;
    const bool shared = p.shared[0] && blockIdx.y == gridDim.y - 1;
    const uint64_t o0 = bg_mma_first_row(blockIdx.x);
    if ((!shared && (int32_t)blockIdx.y >= *n_active) || o0 >= p.n_out)
        return;
    const bg_expert_pick pick = bg_pick_expert(p, shared);
    const uint64_t qs = bg_code_row_bytes(p.n_in);
    for (int32_t i0 = pick.first; i0 < pick.end; i0 += 8 * EG_MMA_NG) {
        const int nt = pick.end - i0 < 8 * EG_MMA_NG ? pick.end - i0 : 8 * EG_MMA_NG;
        bg_mma_rows<T, NR, EG_MMA_NG>(
            pick.w, o0, p.n_out, p.n_in, nt,
            [&](int i) {
                return p.xq + bg_egroup_xrow(pick.slot(i0 + i), p.n_routed, p.x_div) * qs;
            },
            [&](int i, uint64_t o, float v) { p.y[(size_t)pick.slot(i0 + i) * p.ys + o] = v; });
    }
}

// The integer path's kernels for weights of type T (lone: a slot at a
// time, for decode steps, where an expert seldom has more; coding: x is
// coded on the way).
template <int T, int NR, int TAIL>
static void launch_expert_group_int(bg_gpu *g, dim3 grid, const bg_egroup &p, bool lone,
                                    bool coding)
{
    if (coding)
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream,
                  k_expert_group<T, NR, 1, EG_CODING, TAIL>)(p);
    else if (lone)
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_expert_group<T, NR, 1, EG_CODED, TAIL>)(p);
    else
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream,
                  k_expert_group<T, NR, MM_TOK, EG_CODED, TAIL>)(p);
}

// Launches k_expert_group for weights of type T, as launch_matmul does
// k_matmul; the tail (the feed-forward half's end) goes along with the
// integer path's down rows; true when it did.
template <int T, int NR>
static bool launch_expert_group(bg_gpu *g, dim3 grid, const bg_egroup &p, bool lone, bool coding)
{
    if constexpr (bg_int_path<T>::on) {
        if (!lone && p.xq && bg_mma && p.tail.kind == TAIL_NONE) {
            BG_LAUNCH(dim3(mma_blocks(p.n_out), grid.y), MM_WARPS * 32, 0, g->stream,
                      k_expert_group_mma<T, NR>)(p);
            return false;
        }
        if (coding || p.xq) {
            if constexpr (NR == 1)
                if (p.tail.kind == TAIL_FFN_END) {
                    launch_expert_group_int<T, 1, TAIL_FFN_END>(g, grid, p, lone, coding);
                    return true;
                }
            launch_expert_group_int<T, NR, TAIL_NONE>(g, grid, p, lone, coding);
            return false;
        }
    }
    BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream,
              k_expert_group<T, NR, MM_TOK, EG_FLOAT, TAIL_NONE>)(p);
    return false;
}

// One grouped expert product (NR = 1, or gate and up fused when NR = 2 and
// both have the type) over x's n_x rows (xq_pre: coded, or NULL); grid:
// rows by (at most) every expert chosen, and the shared expert; then the
// tail's work where it goes along (*tail_done set, when given).
static int expert_group(bg_gpu *g, int nr, uint32_t type, bg_egroup p, uint32_t n_x,
                        const uint8_t *xq_pre, bool *tail_done)
{
    // decode steps (a slot or fewer per expert on average) take the
    // one-slot kernels, and their rows that fit the lanes are coded on the
    // way (bg_rows_dot_int_coding) instead of by a launch of their own
    const bool lone = p.n_routed <= p.n_expert;
    const bool coding = lone && !xq_pre && int_path(type) &&
                        p.n_in / 32 <= (uint64_t)row_lanes(true, p.n_in) &&
                        (code_kind(type) != ACT_Q8_K || p.n_in % 256 == 0) && p.xs % 4 == 0 &&
                        (uintptr_t)p.x % 16 == 0;
    int rc = 0;
    p.xq = coding ? NULL : code_act(g, type, p.x, p.xs, p.n_in, n_x, xq_pre, &rc);
    if (rc)
        return rc;
    if (nr == 1)
        p.w[1] = p.w[0], p.shared[1] = p.shared[0];
    const uint32_t n_groups = p.n_routed < p.n_expert ? p.n_routed : p.n_expert;
    p.lanes = row_lanes(coding || p.xq, p.n_in);
    const dim3 grid(row_blocks(p.n_out, p.lanes), n_groups + (p.shared[0] ? 1 : 0));
    bool ok, done;
#define EG(T)                                                                                 \
    (done = nr == 2 ? launch_expert_group<T, 2>(g, grid, p, lone, coding)                    \
                    : launch_expert_group<T, 1>(g, grid, p, lone, coding))
    BG_DISPATCH(type, ok, EG);
#undef EG
    if (tail_done)
        *tail_done = ok && done;
    if (!ok) {
        snprintf(g->err, sizeof g->err, "experts: tensor type %u has no CUDA kernel", type);
        return -1;
    }
    return bg_cuda_launched(g, "experts");
}

extern "C" int bg_cuda_moe(bg_gpu *g, const bg_gpu_moe_args *a, const float *d_xn,
                           const uint8_t *d_xq, const void *d_gate, const void *d_up,
                           const void *d_down, const int32_t *d_groups, float *d_h,
                           float *d_slot_out, const bg_gpu_ffn_end *end)
{
    const uint32_t slots = a->n_tok * a->n_used, n_shared = a->d_down_shexp ? a->n_tok : 0;
    if (!slots)
        return 0;
    if (a->n_embd % 32 || a->n_ff % 32 || a->n_ff > a->n_embd) {
        snprintf(g->err, sizeof g->err, "experts: widths %u and %u not handled", a->n_embd,
                 a->n_ff);
        return -1;
    }
    const uint32_t all = slots + n_shared;
    bg_egroup p = {};
    p.expert_bytes = a->gate_expert_bytes;
    p.n_in = a->n_embd, p.n_out = a->n_ff;
    p.groups = d_groups, p.n_expert = a->n_expert, p.n_routed = slots, p.n_shared = n_shared;
    p.x = d_xn, p.xs = a->n_embd, p.x_div = a->n_used;
    p.w[0] = (const uint8_t *)d_gate, p.shared[0] = (const uint8_t *)a->d_gate_shexp;
    p.y = d_h, p.ys = a->n_ff;
    if (a->type_gate == a->type_up) {
        p.w[1] = (const uint8_t *)d_up, p.shared[1] = (const uint8_t *)a->d_up_shexp;
        if (expert_group(g, 2, a->type_gate, p, a->n_tok, d_xq, NULL))
            return -1;
    } else {
        // up into slot_out (free until the down rows; n_ff <= n_embd), then
        // h = silu(gate) * up
        bg_egroup up = p;
        up.w[0] = (const uint8_t *)d_up, up.shared[0] = (const uint8_t *)a->d_up_shexp;
        up.expert_bytes = a->up_expert_bytes;
        up.y = d_slot_out;
        if (expert_group(g, 1, a->type_gate, p, a->n_tok, d_xq, NULL) ||
            expert_group(g, 1, a->type_up, up, a->n_tok, d_xq, NULL) ||
            bg_cuda_silu_mul(g, d_h, d_slot_out, a->n_ff, a->n_ff, all))
            return -1;
    }
    bg_egroup down = p;
    down.w[0] = (const uint8_t *)d_down, down.shared[0] = (const uint8_t *)a->d_down_shexp;
    down.expert_bytes = a->down_expert_bytes;
    down.n_in = a->n_ff, down.n_out = a->n_embd;
    down.x = d_h, down.xs = a->n_ff, down.x_div = 1;
    down.y = d_slot_out, down.ys = a->n_embd;
    if (!end)
        return expert_group(g, 1, a->type_down, down, all, NULL, NULL);
    if (bg_cuda_codes_ok(g, "expert sum", end->d_norm_w ? end->d_xq : NULL, a->n_embd,
                         end->d_xn, a->n_embd))
        return -1;
    const uint32_t n_used = end->d_w ? a->n_used : 1;
    if (tails_on(g, a->n_tok)) {
        bg_tail &t = down.tail;
        t.kind = TAIL_FFN_END, t.counter = g->counters, t.n_tok = a->n_tok, t.n = a->n_embd;
        t.n_used = n_used, t.y = d_slot_out, t.end = *end;
    }
    bool done;
    if (expert_group(g, 1, a->type_down, down, all, NULL, &done))
        return -1;
    return done ? 0 : bg_cuda_expert_sum(g, end, d_slot_out, n_used, a->n_embd, a->n_tok);
}
