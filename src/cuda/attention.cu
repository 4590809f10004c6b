// Attention over f32/f16/q8_0/q4_0 KV caches and the Gated DeltaNet
// recurrence (convolution, l2 norms, delta-rule state update, gated norm),
// mirroring src/models/blocks.c and src/models/qwen35moe.c step by step.
// Positions and sequences are read from device memory, so a decode step's
// launches do not change from one token to the next (CUDA graphs).
// Run on an H200 by scripts/gpu-check.sh (README, "CUDA").
#include "rows.cuh"

// ---------------------------------------------------------- block helpers

// The block's threads take the elements of a row of D (a multiple of 32)
// in turn: thread i has elements i, i + blockDim.x, ... (so each warp holds
// whole 32-value blocks). k_attn_prepare runs D threads, k_attn fewer.

// Walsh-Hadamard transform of each chunk of n of v[0..D) (shared), scaled
// by 1 / sqrt(n) first, as ops.c's bg_hadamard.
__device__ void bg_block_hadamard(float *v, uint32_t D, uint32_t n)
{
    for (uint32_t j = threadIdx.x; j < D; j += blockDim.x)
        v[j] *= 1.0f / sqrtf((float)n);
    __syncthreads();
    for (uint32_t span = 1; span < n; span <<= 1) {
        for (uint32_t j = threadIdx.x; j < D; j += blockDim.x)
            if ((j & span) == 0) {
                const float a = v[j], b = v[j + span];
                v[j] = a + b;
                v[j + span] = a - b;
            }
        __syncthreads();
    }
}

// NEOX rope on v[] (shared): pairs (i, i + n_rot/2), theta advanced by
// repeated multiplication as ops.c does.
__device__ void bg_block_rope(float *v, uint32_t n_rot, uint32_t pos, float base)
{
    const uint32_t half = n_rot / 2;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
        float theta = (float)pos;
        for (uint32_t k = 0; k < i; k++)
            theta *= theta_scale;
        const float c = cosf(theta), s = sinf(theta);
        const float x0 = v[i], x1 = v[i + half];
        v[i] = fmaf(x0, c, -(x1 * s));
        v[i + half] = fmaf(x0, s, x1 * c);
    }
    __syncthreads();
}

// A query or key head as it enters attention: QK-norm, rope at pos, and
// the rotation of a quantized K cache (0: none), into v (shared).
__device__ void bg_block_head_in(const bg_gpu_attn_args &a, float *v, const float *src,
                                 const float *norm_w, uint32_t pos)
{
    bg_block_rmsnorm(v, src, norm_w, a.head_dim, a.eps);
    __syncthreads();
    bg_block_rope(v, a.rope_dims, pos, a.rope_base);
    if (a.k_rotation)
        bg_block_hadamard(v, a.head_dim, a.k_rotation);
}

// ----------------------------------------------------------- cache formats

__host__ __device__ __forceinline__ uint64_t bg_head_bytes(uint32_t type, uint32_t D)
{
    switch (type) {
    case T_F32: return (uint64_t)D * 4;
    case T_F16: return (uint64_t)D * 2;
    case T_Q8_0: return (uint64_t)D / 32 * 34;
    default: return (uint64_t)D / 32 * 18; // q4_0
    }
}

// Element e of one head's row in the cache.
__device__ __forceinline__ float bg_cache_get(uint32_t type, const uint8_t *h, uint32_t e)
{
    switch (type) {
    case T_F32: return ((const float *)h)[e];
    case T_F16: return bg_h2f(BG_ALIGNED(const uint16_t *, h)[e]);
    case T_Q8_0: {
        const uint8_t *b = h + (e / 32) * 34;
        return (float)(int8_t)b[2 + e % 32] * bg_h2f(bg_ld16(b));
    }
    default: {
        const uint8_t *b = h + (e / 32) * 18;
        const uint32_t j = e % 32;
        const int q = j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4;
        return (float)(q - 8) * bg_h2f(bg_ld16(b));
    }
    }
}

// Stores element e (x) of a head's row in the cache type, as llama.cpp's
// copy into the cache converts (quant.c's quantize_activations): f16
// rounding; q8_0 with d = amax / 127 and codes rounded half to even; q4_0
// by the reference (d = max / -8). The calling warp's lanes hold one
// 32-value block, in order.
__device__ void bg_cache_put(uint32_t type, uint8_t *h, uint32_t e, float x)
{
    const uint32_t lane = e % 32;
    switch (type) {
    case T_F32: ((float *)h)[e] = x; return;
    case T_F16: ((uint16_t *)h)[e] = bg_f2h(x); return;
    case T_Q8_0: {
        uint8_t *b = h + (e / 32) * 34;
        const float amax = bg_warp_max(fabsf(x));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        if (lane == 0) {
            const uint16_t dh = bg_f2h(d);
            b[0] = (uint8_t)dh;
            b[1] = (uint8_t)(dh >> 8);
        }
        b[2 + lane] = (uint8_t)(int8_t)nearbyintf(x * id);
        return;
    }
    default: {
        uint8_t *b = h + (e / 32) * 18;
        // the value of largest magnitude, the first one on ties
        float best = fabsf(x);
        uint32_t at = lane;
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const uint32_t oa = __shfl_xor_sync(0xffffffffu, at, o);
            if (ob > best || (ob == best && oa < at)) {
                best = ob;
                at = oa;
            }
        }
        const float max = __shfl_sync(0xffffffffu, x, at);
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int q = (int)(x * id + 8.5f);
        q = q > 15 ? 15 : q;
        const int other = __shfl_xor_sync(0xffffffffu, q, 16);
        if (lane == 0) {
            const uint16_t dh = bg_f2h(d);
            b[0] = (uint8_t)dh;
            b[1] = (uint8_t)(dh >> 8);
        }
        if (lane < 16)
            b[2 + lane] = (uint8_t)((q & 0xF) | (other & 0xF) << 4);
        return;
    }
    }
}

// The query as the K type's dot product sees it: f16 rounding for an f16
// cache, q8_0 (x86 activation rounding) for quantized ones.
__device__ float bg_query_round(uint32_t type_k, float x)
{
    if (type_k == T_F16)
        return bg_h2f(bg_f2h(x));
    if (type_k == T_Q8_0 || type_k == T_Q4_0) {
        const float amax = bg_warp_max(fabsf(x));
        const float d = bg_h2f(bg_f2h(amax / 127.f));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        return nearbyintf(x * id) * d;
    }
    return x;
}

// -------------------------------------------------------------- attention

// Token t's new K and V rows of kv head h (kv: the token's projections),
// K normed, roped and rotated, V rotated, stored as the cache stores them
// at kc and vc (device or shared memory). v: D floats of shared scratch.
__device__ void bg_kv_fresh(const bg_gpu_attn_args &a, const float *kv, uint32_t h,
                            const float *k_norm, uint32_t pos, float *v, uint8_t *kc, uint8_t *vc)
{
    const uint32_t D = a.head_dim;
    bg_block_head_in(a, v, kv + (size_t)h * D, k_norm, pos);
    for (uint32_t j = threadIdx.x; j < D; j += blockDim.x)
        bg_cache_put(a.type_k, kc, j, v[j]);
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < D; j += blockDim.x)
        v[j] = kv[(size_t)a.n_head_kv * D + (size_t)h * D + j];
    __syncthreads();
    if (a.v_rotation)
        bg_block_hadamard(v, D, a.v_rotation);
    for (uint32_t j = threadIdx.x; j < D; j += blockDim.x)
        bg_cache_put(a.type_v, vc, j, v[j]);
    __syncthreads();
}

__host__ __device__ __forceinline__ uint64_t bg_round16(uint64_t x) { return (x + 15) / 16 * 16; }

// The block copies n rows of `bytes` each (src_stride apart) to dst, one
// after another, in the widest words the addresses allow: every load is
// issued before any is used, so a chunk costs one trip to memory.
__device__ void bg_stage_rows(uint8_t *dst, const uint8_t *src, uint64_t src_stride,
                              uint32_t bytes, uint32_t n)
{
    const uint64_t align = (uint64_t)(uintptr_t)src | src_stride | bytes;
    if (align % 16 == 0) {
        const uint32_t per = bytes / 16;
        for (uint32_t i = threadIdx.x; i < n * per; i += blockDim.x) {
            const uint32_t r = i / per, c = i % per;
            BG_ALIGNED(uint4 *, dst + (size_t)r * bytes)[c] =
                BG_ALIGNED(const uint4 *, src + r * src_stride)[c];
        }
    } else if (align % 4 == 0) {
        const uint32_t per = bytes / 4;
        for (uint32_t i = threadIdx.x; i < n * per; i += blockDim.x) {
            const uint32_t r = i / per, c = i % per;
            BG_ALIGNED(uint32_t *, dst + (size_t)r * bytes)[c] =
                BG_ALIGNED(const uint32_t *, src + r * src_stride)[c];
        }
    } else { // cache rows are whole f16s or 2-byte-aligned blocks
        const uint32_t per = bytes / 2;
        for (uint32_t i = threadIdx.x; i < n * per; i += blockDim.x) {
            const uint32_t r = i / per, c = i % per;
            BG_ALIGNED(uint16_t *, dst + (size_t)r * bytes)[c] =
                BG_ALIGNED(const uint16_t *, src + r * src_stride)[c];
        }
    }
}

// One block per (token, head), head_dim threads: the query split from its
// gate, QK-norm, rope, rotation (into attn, the attention kernel's input);
// heads below n_head_kv also prepare K and V, coded into shared memory
// first and then copied to the cache, as k_attn stores a decode token's
// (coded straight into the cache, quantized rows came out wrong on an
// H200: NMSE ~1e-2 per row, though no tool found a race or a bad access,
// and the emulation agreed with the host). Zeroes the split ranges'
// counters (split_counters: NULL when nothing splits).
__global__ void k_attn_prepare(bg_gpu_attn_args a, const float *q, const float *kv, float *gate,
                               float *attn, const float *q_norm, const float *k_norm,
                               uint8_t *k_cache, uint8_t *v_cache, const uint32_t *tok_seq,
                               const uint32_t *tok_pos, int *split_counters)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(float, v); // [head_dim], then a K row and a V row (sized at the launch)
    const uint32_t t = blockIdx.x, h = blockIdx.y, D = a.head_dim, j = threadIdx.x;
    const uint32_t pos = tok_pos[t], seq = tok_seq[t];
    if (split_counters && h < a.n_head && j == 0)
        split_counters[t * a.n_head + h] = 0; // counted by k_attn's ranges
    if (h < a.n_head) {
        const float *src = q + (size_t)t * a.q_width + (size_t)(a.gated ? 2 * h : h) * D;
        if (a.gated)
            gate[(size_t)t * a.a_width + (size_t)h * D + j] = src[D + j];
        bg_block_head_in(a, v, src, q_norm, pos);
        attn[(size_t)t * a.a_width + (size_t)h * D + j] = bg_query_round(a.type_k, v[j]);
        __syncthreads();
    }
    if (h >= a.n_head_kv)
        return;
    const uint64_t kh = bg_head_bytes(a.type_k, D), vh = bg_head_bytes(a.type_v, D);
    uint8_t *kf = (uint8_t *)(v + D), *vf = kf + bg_round16(kh);
    bg_kv_fresh(a, kv + (size_t)t * a.kv_width, h, k_norm, pos, v, kf, vf);
    bg_stage_rows(k_cache + seq * a.k_seq_bytes + pos * a.k_row_bytes + h * kh, kf, 0,
                  (uint32_t)kh, 1);
    bg_stage_rows(v_cache + seq * a.v_seq_bytes + pos * a.v_row_bytes + h * vh, vf, 0,
                  (uint32_t)vh, 1);
}

enum { ATT_WARPS = 4, ATT_CHUNK = 32, ATT_PER_WARP = ATT_CHUNK / ATT_WARPS };
// A decode step of up to ATT_FRESH_TOKENS tokens, each its sequence's only
// one, is one launch (k_attn prepares its tokens); its split ranges count
// themselves in the backend's counters from BG_OWN_COUNTERS_AT on.
enum { ATT_FRESH_TOKENS = 4 };
enum { ATT_MAX_PER_THREAD = 512 / (ATT_WARPS * 32) }; // head_dim <= 512
// Shared memory for a chunk's K and V rows: 32 positions of an f16 cache
// with heads of 256; fewer positions of larger rows.
enum { ATT_STAGE_BYTES = 32 * 1024 };

__device__ __forceinline__ float bg_round_f16(float x) { return bg_h2f(bg_f2h(x)); }

// A warp's sum of per-lane dot products in the order of the CPU's f16 dot
// (kernels_x86_legacy.c's bg_dot_f16_avx2): lane j holds the fused
// multiply-add chain over elements j, j + 32, ...; the tree adds 0-7 to
// 8-15 and 16-23 to 24-31, those two, then halves of 8, 4 and 2. The f16
// V path amplifies a last-bit difference in a score (an f16 rounding that
// tips), so there the scores match bit for bit.
__device__ __forceinline__ float bg_sum_f16_dot_order(float d)
{
    d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 8));
    d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 16));
    for (int o = 4; o > 0; o >>= 1)
        d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, o));
    return d;
}

// Scores q . k times the scale of a chunk's n staged keys (rows of kh
// bytes) into sc[]: warp w takes positions w, w + ATT_WARPS, ..., their
// dot products interleaved so that the loads of one hide behind another.
// An f16 K sums as the CPU's f16 dot does; other types per lane, then
// across the warp.
template <uint32_t KT>
__device__ __forceinline__ void bg_attn_scores(const bg_gpu_attn_args &a, const uint8_t *ks,
                                               uint32_t kh, const float *qs, uint32_t n,
                                               float *sc)
{
    const uint32_t lane = threadIdx.x % 32, w = threadIdx.x / 32, per = a.head_dim / 32;
    float d[ATT_PER_WARP];
#pragma unroll
    for (int u = 0; u < ATT_PER_WARP; u++)
        d[u] = 0.0f;
    for (uint32_t i = 0; i < per; i++) {
        const uint32_t e = lane + 32 * i;
        const float q = qs[e];
#pragma unroll
        for (int u = 0; u < ATT_PER_WARP; u++) {
            const uint32_t k = w + ATT_WARPS * u;
            if (k < n) {
                const float kv = bg_cache_get(KT, ks + (size_t)k * kh, e);
                d[u] = KT == T_F16 ? fmaf(kv, q, d[u]) : d[u] + kv * q;
            }
        }
    }
#pragma unroll
    for (int u = 0; u < ATT_PER_WARP; u++) {
        const uint32_t k = w + ATT_WARPS * u;
        if (k < n) { // the same in every lane of the warp
            const float dot = KT == T_F16 ? bg_sum_f16_dot_order(d[u]) : bg_warp_sum(d[u]);
            if (lane == 0)
                sc[k] = __fmul_rn(dot, a.scale);
        }
    }
}

// The online softmax's steps for a chunk's n <= 32 scores, as the CPU
// takes them one by one from the running maximum M: a score above the
// maximum so far rescales (ms = exp(M - s), vs = 1), any other adds with
// vs = exp(s - M). Warp 0 finds every position's maximum so far at once
// (a scan); returns the chunk's new maximum in every thread.
__device__ float bg_attn_steps(const float *sc, uint32_t n, float M, float *ms, float *vs,
                               float *m_sh)
{
    if (threadIdx.x < 32) {
        const uint32_t lane = threadIdx.x;
        const float s = lane < n ? sc[lane] : -INFINITY;
        float upto = s; // the maximum of scores 0..lane
        for (int o = 1; o < 32; o <<= 1) {
            const float other = __shfl_up_sync(0xffffffffu, upto, o);
            if (lane >= (uint32_t)o)
                upto = fmaxf(upto, other);
        }
        const float below = __shfl_up_sync(0xffffffffu, upto, 1);
        const float prev = lane == 0 ? M : fmaxf(M, below);
        if (lane < n) {
            const bool above = s > prev;
            ms[lane] = above ? expf(prev - s) : 1.0f;
            vs[lane] = above ? 1.0f : expf(s - prev);
        }
        const float last = __shfl_sync(0xffffffffu, upto, n - 1);
        if (lane == 0)
            *m_sh = fmaxf(M, last);
    }
    __syncthreads();
    return *m_sh;
}

// This thread's elements of the accumulator through a chunk's n staged
// values (rows of vh bytes) in position order, and the sum S: in f16 for
// an f16 V cache as llama.cpp's CPU flash attention (and blocks.c's
// attend_head) keeps it, rounded after every scaling and every fused
// multiply-add; in f32 for the others.
template <uint32_t VT>
__device__ __forceinline__ void bg_attn_accumulate(const uint8_t *vs_rows, uint32_t vh,
                                                   uint32_t D, uint32_t n, const float *ms,
                                                   const float *vsc,
                                                   float acc[ATT_MAX_PER_THREAD], float *S)
{
    for (uint32_t k = 0; k < n; k++) {
        const float m = ms[k], v = vsc[k];
        const uint8_t *vp = vs_rows + (size_t)k * vh;
#pragma unroll
        for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++) {
            const uint32_t e = threadIdx.x + i * blockDim.x;
            if (e < D) {
                const float x = bg_cache_get(VT, vp, e);
                if (VT == T_F16) {
                    const float scaled = m != 1.0f ? bg_round_f16(__fmul_rn(acc[i], m)) : acc[i];
                    acc[i] = bg_round_f16(fmaf(x, v, scaled));
                } else {
                    acc[i] = __fadd_rn(__fmul_rn(acc[i], m), __fmul_rn(x, v));
                }
            }
        }
        *S = __fadd_rn(__fmul_rn(*S, m), v);
    }
}

// The block's shared memory: the query, the output, a chunk's scores and
// steps, the running maximum, then the chunk's K and V rows, then (k_attn
// preparing its own token) the token's new K and V rows.
struct bg_attn_shared {
    float *qs, *out, *sc, *ms, *vs, *m;
    uint8_t *ks, *vrows, *kf, *vf;
};

// k_attn's dynamic shared memory, in bg_attn_shared's order: the floats
// (query and output of D, a chunk's scores and two steps, the running
// maximum, 3 floats to keep what follows 16-byte aligned), then the
// chunk's K rows, its V rows and (fresh) a new K and V row, each 16-byte
// aligned.
__host__ __device__ __forceinline__ uint64_t bg_attn_floats(uint32_t D)
{
    return 2 * (uint64_t)D + 3 * ATT_CHUNK + 4;
}
__host__ __device__ __forceinline__ uint64_t bg_attn_shared_bytes(uint32_t D, uint32_t chunk,
                                                                  uint64_t kh, uint64_t vh,
                                                                  bool fresh)
{
    return bg_attn_floats(D) * sizeof(float) + bg_round16(chunk * kh) + bg_round16(chunk * vh) +
           (fresh ? bg_round16(kh) + vh : 0);
}

// One head's online softmax over positions [p0, p1) of its sequence's
// cache (kc, vc: the head's first row), ATT_CHUNK positions at a time:
// the block stages their K and V rows, scores them, takes the softmax's
// steps, then each thread runs its elements through them in order. With
// fresh, the last position's rows are the block's own sh.kf and sh.vf
// (the token's, which another block may be storing in the cache).
// Leaves this thread's elements of the accumulator, and M and S.
__device__ void bg_attn_range(const bg_gpu_attn_args &a, const uint8_t *kc, const uint8_t *vc,
                              uint32_t p0, uint32_t p1, uint32_t chunk,
                              const bg_attn_shared &sh, bool fresh,
                              float acc[ATT_MAX_PER_THREAD], float *M_out, float *S_out)
{
    const uint32_t D = a.head_dim;
    const uint32_t kh = (uint32_t)bg_head_bytes(a.type_k, D), vh = (uint32_t)bg_head_bytes(a.type_v, D);
#pragma unroll
    for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++)
        acc[i] = 0.0f;
    float M = -INFINITY, S = 0.0f;
    for (uint32_t b = p0; b < p1; b += chunk) {
        const uint32_t n = p1 - b < chunk ? p1 - b : chunk;
        const uint32_t n_cached = fresh && b + n == p1 ? n - 1 : n;
        bg_stage_rows(sh.ks, kc + b * a.k_row_bytes, a.k_row_bytes, kh, n_cached);
        bg_stage_rows(sh.vrows, vc + b * a.v_row_bytes, a.v_row_bytes, vh, n_cached);
        if (n_cached < n) {
            bg_stage_rows(sh.ks + (size_t)n_cached * kh, sh.kf, 0, kh, 1);
            bg_stage_rows(sh.vrows + (size_t)n_cached * vh, sh.vf, 0, vh, 1);
        }
        __syncthreads();
        switch (a.type_k) {
        case T_F16: bg_attn_scores<T_F16>(a, sh.ks, kh, sh.qs, n, sh.sc); break;
        case T_F32: bg_attn_scores<T_F32>(a, sh.ks, kh, sh.qs, n, sh.sc); break;
        case T_Q8_0: bg_attn_scores<T_Q8_0>(a, sh.ks, kh, sh.qs, n, sh.sc); break;
        default: bg_attn_scores<T_Q4_0>(a, sh.ks, kh, sh.qs, n, sh.sc); break;
        }
        __syncthreads();
        M = bg_attn_steps(sh.sc, n, M, sh.ms, sh.vs, sh.m);
        switch (a.type_v) {
        case T_F16: bg_attn_accumulate<T_F16>(sh.vrows, vh, D, n, sh.ms, sh.vs, acc, &S); break;
        case T_F32: bg_attn_accumulate<T_F32>(sh.vrows, vh, D, n, sh.ms, sh.vs, acc, &S); break;
        case T_Q8_0: bg_attn_accumulate<T_Q8_0>(sh.vrows, vh, D, n, sh.ms, sh.vs, acc, &S); break;
        default: bg_attn_accumulate<T_Q4_0>(sh.vrows, vh, D, n, sh.ms, sh.vs, acc, &S); break;
        }
        __syncthreads(); // the stage and the steps are rewritten
    }
    *M_out = M;
    *S_out = S;
}

// A range's result (acc of D floats, then M and S) merged with the other
// ranges' in order, as gpu.h defines it, into out (shared). w: shared
// scratch of BG_GPU_ATT_SPLITS floats. The ranges were written by other
// blocks: read past L1.
__device__ void bg_attn_merge(const float *parts, uint32_t n_split, uint32_t D, float *w,
                              float *out)
{
    float M = -INFINITY;
    for (uint32_t z = 0; z < n_split; z++)
        M = fmaxf(M, __ldcg(parts + (size_t)z * (D + 2) + D));
    if (threadIdx.x < n_split)
        w[threadIdx.x] = expf(__ldcg(parts + (size_t)threadIdx.x * (D + 2) + D) - M);
    __syncthreads();
    float S = 0.0f;
    for (uint32_t z = 0; z < n_split; z++)
        S = __fadd_rn(S, __fmul_rn(__ldcg(parts + (size_t)z * (D + 2) + D + 1), w[z]));
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (uint32_t e = threadIdx.x; e < D; e += blockDim.x) {
        float o = 0.0f;
        for (uint32_t z = 0; z < n_split; z++)
            o = __fadd_rn(o, __fmul_rn(__ldcg(parts + (size_t)z * (D + 2) + e), w[z]));
        out[e] = __fmul_rn(o, inv);
    }
}

// A decode step's work k_attn takes on from k_attn_prepare (on: each
// token the only one of its sequence): the raw projections and norms, and
// where the ranges count themselves (counters: the backend's, zero between
// launches).
struct bg_attn_fresh {
    bool on;
    const float *q, *kv, *q_norm, *k_norm;
    int *counters;
    bool prefetch; // with on: the cached rows asked of L2 before the wait
};

// The most bytes of each cache one range asks L2 for (bg_attn_prefetch):
// a layer's few MB at short contexts, not a long context's hundreds.
enum { ATT_PREFETCH_BYTES = 256 << 10 };

// Before the wait: the cache rows of range z of the token's positions
// before its own (written by earlier steps; positions and sequences are
// the host's), every K/V head's, by the first head's block of the range.
__device__ __forceinline__ void bg_attn_prefetch(const bg_gpu_attn_args &a,
                                                 const uint8_t *k_cache, const uint8_t *v_cache,
                                                 const uint32_t *tok_seq, const uint32_t *tok_pos,
                                                 const uint8_t *split, const bg_attn_fresh &f)
{
    if (!f.on || !f.prefetch || threadIdx.x || blockIdx.y)
        return;
    const uint32_t pos = __ldcg(tok_pos + blockIdx.x), seq = __ldcg(tok_seq + blockIdx.x);
    const uint64_t len = split ? BG_GPU_ATT_SPLIT_LEN(pos + 1) : pos + 1;
    const uint64_t p0 = blockIdx.z * len, p1 = p0 + len < pos ? p0 + len : pos;
    if (p0 >= p1)
        return;
    const uint64_t kb = (p1 - p0) * a.k_row_bytes, vb = (p1 - p0) * a.v_row_bytes;
    bg_prefetch_l2(k_cache + seq * a.k_seq_bytes + p0 * a.k_row_bytes,
                   kb < ATT_PREFETCH_BYTES ? kb : ATT_PREFETCH_BYTES);
    bg_prefetch_l2(v_cache + seq * a.v_seq_bytes + p0 * a.v_row_bytes,
                   vb < ATT_PREFETCH_BYTES ? vb : ATT_PREFETCH_BYTES);
}

// One block per (token, head, range of positions): the ranges of gpu.h's
// split for a decode step given scratch (split), else one. A lone range
// finishes itself; split ranges leave their results in the scratch, and
// the last to finish (a counter per token and head, zeroed by
// k_attn_prepare, or the backend's) merges them. Finishing: V's rotation
// undone and the gate applied, output in place of the query in attn, and
// the head's span of the token's row coded for the out projection (aq set:
// head_dim a multiple of 256). With f.on, each block prepares its query
// itself, and the range holding the token's position its new K and V rows
// too; the first head of each K/V head stores them in the cache.
__global__ void __launch_bounds__(ATT_WARPS * 32)
    k_attn(bg_gpu_attn_args a, float *attn, const float *gate, const uint8_t *k_cache,
           const uint8_t *v_cache, const uint32_t *tok_seq, const uint32_t *tok_pos,
           uint8_t *aq, uint8_t *split, uint32_t chunk, const bg_attn_fresh f)
{
    bg_attn_prefetch(a, k_cache, v_cache, tok_seq, tok_pos, split, f);
    BG_KERNEL_ENTRY();
    const uint32_t t = blockIdx.x, h = blockIdx.y, z = blockIdx.z, D = a.head_dim;
    const uint32_t pos = tok_pos[t], seq = tok_seq[t], n_pos = pos + 1;
    const uint32_t len = split ? BG_GPU_ATT_SPLIT_LEN(n_pos) : n_pos;
    const uint32_t n_split = (n_pos + len - 1) / len;
    if (z >= n_split)
        return;
    BG_DYNAMIC_SHARED(float, base);
    __shared__ float merge_w[BG_GPU_ATT_SPLITS];
    const uint64_t kh = bg_head_bytes(a.type_k, D), vh = bg_head_bytes(a.type_v, D);
    bg_attn_shared sh;
    sh.qs = base, sh.out = base + D, sh.sc = sh.out + D, sh.ms = sh.sc + ATT_CHUNK;
    sh.vs = sh.ms + ATT_CHUNK, sh.m = sh.vs + ATT_CHUNK;
    sh.ks = (uint8_t *)(base + bg_attn_floats(D));
    sh.vrows = sh.ks + bg_round16(chunk * kh);
    sh.kf = sh.vrows + bg_round16(chunk * vh);
    sh.vf = sh.kf + bg_round16(kh);
    float *row = attn + (size_t)t * a.a_width + (size_t)h * D;
    const uint32_t group = a.n_head / a.n_head_kv, kvh = h / group;
    const uint8_t *kc = k_cache + seq * a.k_seq_bytes + kvh * kh;
    const uint8_t *vc = v_cache + seq * a.v_seq_bytes + kvh * vh;
    const float *q_row =
        f.on ? f.q + (size_t)t * a.q_width + (size_t)(a.gated ? 2 * h : h) * D : NULL;
    const bool fresh = f.on && z == n_split - 1; // the range with the token's position
    if (f.on) {
        bg_block_head_in(a, sh.qs, q_row, f.q_norm, pos);
        for (uint32_t e = threadIdx.x; e < D; e += blockDim.x)
            sh.qs[e] = bg_query_round(a.type_k, sh.qs[e]);
        if (fresh) {
            bg_kv_fresh(a, f.kv + (size_t)t * a.kv_width, kvh, f.k_norm, pos, sh.out, sh.kf,
                        sh.vf);
            if (h % group == 0) { // one block stores them; the others read their own
                bg_stage_rows((uint8_t *)kc + pos * a.k_row_bytes, sh.kf, 0, (uint32_t)kh, 1);
                bg_stage_rows((uint8_t *)vc + pos * a.v_row_bytes, sh.vf, 0, (uint32_t)vh, 1);
            }
        }
    } else {
        for (uint32_t e = threadIdx.x; e < D; e += blockDim.x)
            sh.qs[e] = row[e];
    }
    __syncthreads();
    float acc[ATT_MAX_PER_THREAD], M, S;
    const uint32_t p0 = z * len, p1 = n_pos - p0 < len ? n_pos : p0 + len;
    bg_attn_range(a, kc, vc, p0, p1, chunk, sh, fresh, acc, &M, &S);
    if (n_split == 1) {
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
#pragma unroll
        for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++) {
            const uint32_t e = threadIdx.x + i * blockDim.x;
            if (e < D)
                sh.out[e] = __fmul_rn(acc[i], inv);
        }
    } else {
        float *parts = (float *)(split + BG_GPU_ATT_SPLIT_COUNTER_BYTES(gridDim.x, a.n_head)) +
                       (size_t)(t * a.n_head + h) * BG_GPU_ATT_SPLITS * (D + 2);
        float *mine = parts + (size_t)z * (D + 2);
#pragma unroll
        for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++) {
            const uint32_t e = threadIdx.x + i * blockDim.x;
            if (e < D)
                mine[e] = acc[i];
        }
        if (threadIdx.x == 0) {
            mine[D] = M;
            mine[D + 1] = S;
        }
        int *counters = f.on ? f.counters : (int *)split;
        if (!bg_block_arrives_last(counters + t * a.n_head + h, (int)n_split))
            return;
        bg_attn_merge(parts, n_split, D, merge_w, sh.out);
    }
    __syncthreads();
    float *out = sh.out;
    if (a.v_rotation) {
        // the rotation is its own inverse; chunks of v_rotation, in turn
        const float scale = 1.0f / sqrtf((float)a.v_rotation);
        for (uint32_t e = threadIdx.x; e < D; e += blockDim.x)
            out[e] *= scale;
        __syncthreads();
        for (uint32_t span = 1; span < a.v_rotation; span <<= 1) {
            for (uint32_t e = threadIdx.x; e < D; e += blockDim.x)
                if ((e & span) == 0) {
                    const float x = out[e], y = out[e + span];
                    out[e] = x + y;
                    out[e + span] = x - y;
                }
            __syncthreads();
        }
    }
    const float *gr = f.on ? q_row + D : gate + (size_t)t * a.a_width + (size_t)h * D;
    for (uint32_t e = threadIdx.x; e < D; e += blockDim.x)
        row[e] = a.gated ? out[e] * bg_sigmoid(gr[e]) : out[e];
    if (!aq)
        return;
    __syncthreads();
    const uint32_t n_row = a.n_head * D;
    bg_block_code_span(attn + (size_t)t * a.a_width, n_row, h * D / 32, D / 32,
                       aq + t * bg_code_row_bytes(n_row));
}

extern "C" int bg_cuda_attention(bg_gpu *g, const bg_gpu_attn_args *a, float *d_q, float *d_kv,
                                 float *d_gate, float *d_attn, const float *d_q_norm,
                                 const float *d_k_norm, uint8_t *d_k_cache, uint8_t *d_v_cache,
                                 const uint32_t *d_tok_seq, const uint32_t *d_tok_pos,
                                 uint8_t *d_attn_q, void *d_split)
{
    const uint32_t D = a->head_dim;
    if (D % 32 || D > ATT_MAX_PER_THREAD * ATT_WARPS * 32 || a->n_head % a->n_head_kv ||
        a->rope_dims > D || (a->k_rotation && D % a->k_rotation) ||
        (a->v_rotation && D % a->v_rotation)) {
        snprintf(g->err, sizeof g->err, "attention: head size %u not handled", D);
        return -1;
    }
    if (bg_cuda_codes_ok(g, "attention (each head)", d_attn_q, D, d_attn, a->a_width))
        return -1;
    if (!a->n_tok)
        return 0;
    uint8_t *split = a->n_tok <= BG_GPU_ATT_SPLIT_TOKENS ? (uint8_t *)d_split : NULL;
    // a decode step: k_attn prepares its own tokens, its ranges counting
    // themselves past the backend's tails' counters
    const bool fresh = g->counters && a->seq_single && a->n_tok <= ATT_FRESH_TOKENS &&
                       (uint64_t)a->n_tok * a->n_head + BG_OWN_COUNTERS_AT <=
                           BG_GPU_COUNTER_BYTES / sizeof(int);
    if (!fresh) {
        const uint32_t heads = a->n_head > a->n_head_kv ? a->n_head : a->n_head_kv;
        const size_t shmem = D * sizeof(float) + bg_round16(bg_head_bytes(a->type_k, D)) +
                             bg_head_bytes(a->type_v, D);
        BG_LAUNCH(dim3(a->n_tok, heads), D, shmem, g->stream, k_attn_prepare)(
            *a, d_q, d_kv, d_gate, d_attn, d_q_norm, d_k_norm, d_k_cache, d_v_cache, d_tok_seq,
            d_tok_pos, (int *)split);
        if (bg_cuda_launched(g, "attention (prepare)"))
            return -1;
    }
    const uint64_t kh = bg_head_bytes(a->type_k, D), vh = bg_head_bytes(a->type_v, D);
    uint64_t chunk = (ATT_STAGE_BYTES - 16) / (kh + vh);
    chunk = chunk > (uint64_t)ATT_CHUNK ? (uint64_t)ATT_CHUNK : chunk;
    const size_t shmem = bg_attn_shared_bytes(D, (uint32_t)chunk, kh, vh, fresh);
    const dim3 grid(a->n_tok, a->n_head, split ? BG_GPU_ATT_SPLITS : 1);
    const bg_attn_fresh f = {fresh,    d_q, d_kv, d_q_norm, d_k_norm,
                             fresh ? g->counters + BG_OWN_COUNTERS_AT : NULL, bg_prefetch};
    BG_LAUNCH(grid, ATT_WARPS * 32, shmem, g->stream, k_attn)(
        *a, d_attn, d_gate, d_k_cache, d_v_cache, d_tok_seq, d_tok_pos, d_attn_q, split,
        (uint32_t)chunk, f);
    return bg_cuda_launched(g, "attention");
}

// --------------------------------------------------------------- DeltaNet

enum { DN_MAX_CONV = 8 }; // convolution widths handled (Qwen3.6: 4)
enum { DN_CONV_BATCH = 8 }; // tokens whose inputs a channel loads at once

// run(t0, t1, seq) for each run [t0, t1) of consecutive tokens of one
// sequence, in order: what the convolution walks (a decode step's tokens
// are one run a sequence).
template <typename RUN>
__device__ __forceinline__ void bg_seq_runs(const uint32_t *tok_seq, uint32_t n_tok, RUN run)
{
    for (uint32_t t0 = 0, t1; t0 < n_tok; t0 = t1) {
        for (t1 = t0 + 1; t1 < n_tok && tok_seq[t1] == tok_seq[t0];)
            t1++;
        run(t0, t1, tok_seq[t0]);
    }
}

// A channel's last K - 1 inputs between registers and its convolution
// state (store), or back.
__device__ __forceinline__ void bg_dn_hist_move(float (&hist)[DN_MAX_CONV - 1], float *state,
                                                uint32_t K, bool store)
{
#pragma unroll
    for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++) {
        if (j + 1 >= K)
            hist[j] = 0.0f;
        else if (store)
            state[j] = hist[j];
        else
            hist[j] = state[j];
    }
}

// Channel c's causal depthwise convolution through the tokens in order:
// token t's output, silu(sum of the K weights times its input and the K -
// 1 before), goes to out(t, value). The last K - 1 inputs ride in
// registers; a run's history is loaded from its sequence's state at its
// first token and, when store, stored back after its last. Without store,
// each sequence's tokens must be one run (a sequence met again would start
// from its stale state). The inputs are loaded BATCH tokens at a time
// before their outputs go out: out may write where qkv is read (in place),
// so the compiler cannot move a token's load above the token before's
// store, and one at a time a micro-batch of 512 tokens was 512 trips to
// memory in a row.
template <int BATCH, typename OUT>
__device__ __forceinline__ void bg_dn_conv_channel(const float *qkv, size_t q_width, uint32_t c,
                                                   const float *w, float *conv, uint64_t conv_seq,
                                                   const uint32_t *tok_seq, uint32_t K,
                                                   uint32_t n_tok, bool store, OUT out)
{
    // the weights of the K - 1 previous inputs, and of the current one
    float wc[DN_MAX_CONV - 1], hist[DN_MAX_CONV - 1];
#pragma unroll
    for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
        wc[j] = j + 1 < K ? w[(size_t)c * K + j] : 0.0f;
    const float w_now = w[(size_t)c * K + K - 1];
    bg_seq_runs(tok_seq, n_tok, [&](uint32_t t0, uint32_t t1, uint32_t seq) {
        float *state = conv + seq * conv_seq + (size_t)c * (K - 1);
        bg_dn_hist_move(hist, state, K, false);
        for (uint32_t tb = t0; tb < t1; tb += BATCH) {
            float in[BATCH];
#pragma unroll
            for (uint32_t i = 0; i < (uint32_t)BATCH; i++)
                in[i] = tb + i < t1 ? qkv[(size_t)(tb + i) * q_width + c] : 0.0f;
#pragma unroll
            for (uint32_t i = 0; i < (uint32_t)BATCH; i++) {
                if (tb + i >= t1)
                    break;
                float acc = 0.0f;
#pragma unroll
                for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
                    if (j + 1 < K)
                        acc = __fadd_rn(acc, __fmul_rn(hist[j], wc[j]));
                acc = __fadd_rn(acc, __fmul_rn(in[i], w_now));
#pragma unroll
                for (uint32_t j = 0; j + 2 < DN_MAX_CONV; j++)
                    if (j + 2 < K)
                        hist[j] = hist[j + 1];
                if (K > 1)
#pragma unroll
                    for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
                        if (j + 2 == K)
                            hist[j] = in[i];
                out(tb + i, bg_silu(acc));
            }
        }
        if (store)
            bg_dn_hist_move(hist, state, K, true);
    });
}

// What bg_dn_conv_channel leaves in the convolution state of channels
// [c_first, c_end), without the convolution, by the block's threads: each
// sequence's history moved past its tokens (consecutive, as a decode
// step's are), the last K - 1 of its old history and its inputs. A
// thread's DN_MOVE_CHANNELS channels at a time, loads first: one channel
// after another would cost a trip to memory each.
enum { DN_MOVE_CHANNELS = 8 };
__device__ __forceinline__ void bg_dn_hist_advance(const float *qkv, size_t q_width,
                                                   uint32_t c_first, uint32_t c_end, float *conv,
                                                   uint64_t conv_seq, const uint32_t *tok_seq,
                                                   uint32_t K, uint32_t n_tok)
{
    bg_seq_runs(tok_seq, n_tok, [&](uint32_t t0, uint32_t t1, uint32_t seq) {
        const uint32_t nt = t1 - t0;
        float *state = conv + seq * conv_seq;
        for (uint32_t c0 = c_first + threadIdx.x; c0 < c_end;
             c0 += DN_MOVE_CHANNELS * blockDim.x) {
            float h[DN_MOVE_CHANNELS][DN_MAX_CONV - 1];
#pragma unroll
            for (uint32_t i = 0; i < DN_MOVE_CHANNELS; i++) {
                const uint32_t c = c0 + i * blockDim.x;
#pragma unroll
                for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++) {
                    const uint32_t m = j + nt; // in [old history, inputs]
                    h[i][j] = c >= c_end || j + 1 >= K ? 0.0f
                              : m + 1 < K      ? state[(size_t)c * (K - 1) + m]
                                               : qkv[(size_t)(t0 + m - (K - 1)) * q_width + c];
                }
            }
#pragma unroll
            for (uint32_t i = 0; i < DN_MOVE_CHANNELS; i++) {
                const uint32_t c = c0 + i * blockDim.x;
#pragma unroll
                for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
                    if (c < c_end && j + 1 < K)
                        state[(size_t)c * (K - 1) + j] = h[i][j];
            }
        }
    });
}

enum { DN_NORM_PER_LANE = 8 }; // a head's values per lane: heads of up to 256

// q or k heads' rows x + i * stride (i < n <= ROWS) of S values, each
// scaled to unit length, then by 1 / sqrt(S), as ops.c's bg_l2norm and the
// model's q scaling, by the calling warp; the mean square summed in double,
// as ops.c's norms. Every row's values are loaded before any is
// stored: a row at a time, each row's loads would wait for the row
// before's stores (they may alias, to the compiler).
template <int ROWS>
__device__ __forceinline__ void bg_dn_l2_rows(float *x, size_t stride, uint32_t n, uint32_t S,
                                              float eps)
{
    const uint32_t lane = threadIdx.x % 32;
    const float s = 1.0f / sqrtf((float)S);
    float v[ROWS][DN_NORM_PER_LANE];
#pragma unroll
    for (uint32_t i = 0; i < (uint32_t)ROWS; i++)
#pragma unroll
        for (uint32_t u = 0; u < DN_NORM_PER_LANE; u++)
            v[i][u] = i < n && lane + 32 * u < S ? x[i * stride + lane + 32 * u] : 0.0f;
#pragma unroll
    for (uint32_t i = 0; i < (uint32_t)ROWS; i++) {
        if (i >= n) // the same in every lane
            break;
        double sum = 0.0;
#pragma unroll
        for (uint32_t u = 0; u < DN_NORM_PER_LANE; u++)
            if (lane + 32 * u < S)
                sum += (double)(v[i][u] * v[i][u]);
        const float mean = (float)(bg_warp_sum_d(sum) / (double)S);
        const float scale = 1.0f / sqrtf(mean + eps / (float)S);
#pragma unroll
        for (uint32_t u = 0; u < DN_NORM_PER_LANE; u++)
            if (lane + 32 * u < S)
                x[i * stride + lane + 32 * u] = (v[i][u] * scale) * s;
    }
}
enum { DN_L2_ROWS = 4 }; // the rows a warp of k_dn_conv_l2 norms at once

// The convolution, in place, and the l2 norm of each q and k head (the
// micro-batches that k_dn_recur does not convolve itself): a thread a
// channel, DN_CONV_BATCH tokens' inputs at a time. Block b owns
// channels [b*S, b*S + S): a q head, a k head or a v head, a thread each;
// then the block's warps normalize the q or k head of every token.
__global__ void k_dn_conv_l2(float *qkv, size_t q_width, const float *w, float *conv,
                             uint64_t conv_seq, const uint32_t *tok_seq, uint32_t S,
                             uint32_t n_heads2, uint32_t K, float eps, uint32_t n_tok)
{
    BG_KERNEL_ENTRY();
    const uint32_t c = blockIdx.x * S + threadIdx.x;
    bg_dn_conv_channel<DN_CONV_BATCH>(
        qkv, q_width, c, w, conv, conv_seq, tok_seq, K, n_tok, true,
        [&](uint32_t t, float v) { qkv[(size_t)t * q_width + c] = v; });
    if (blockIdx.x >= n_heads2)
        return; // a v head: no norm
    __syncthreads(); // the block's outputs, every token
    const uint32_t per_warp = DN_L2_ROWS, step = blockDim.x / 32 * per_warp;
    for (uint32_t t = threadIdx.x / 32 * per_warp; t < n_tok; t += step)
        bg_dn_l2_rows<DN_L2_ROWS>(qkv + (size_t)t * q_width + (size_t)blockIdx.x * S, q_width,
                                  n_tok - t < per_warp ? n_tok - t : per_warp, S, eps);
}

// The gated norm of value head h of token t, rmsnorm(o) * w * silu(z), by
// the calling warp. The rows were written by other blocks of the caller's
// launch or an earlier one; none of them read them before.
__device__ __forceinline__ void bg_warp_dn_norm(float *attn, size_t a_width, const float *z,
                                                const float *w, uint32_t S, float eps,
                                                uint32_t t, uint32_t h)
{
    const uint32_t lane = threadIdx.x % 32;
    float *o = attn + (size_t)t * a_width + (size_t)h * S;
    const float *zz = z + (size_t)t * a_width + (size_t)h * S;
    // the lane's values loaded together, then stored: a store between two
    // loads would make each a trip of its own; the mean square summed in
    // double, as ops.c's norms
    float ov[DN_NORM_PER_LANE], wv[DN_NORM_PER_LANE], zv[DN_NORM_PER_LANE];
    double sum = 0.0;
#pragma unroll
    for (uint32_t u = 0; u < DN_NORM_PER_LANE; u++) {
        const uint32_t j = lane + 32 * u;
        ov[u] = j < S ? o[j] : 0.0f;
        wv[u] = j < S ? w[j] : 0.0f;
        zv[u] = j < S ? zz[j] : 0.0f;
    }
#pragma unroll
    for (uint32_t u = 0; u < DN_NORM_PER_LANE; u++)
        if (lane + 32 * u < S)
            sum += (double)(ov[u] * ov[u]);
    const float mean = (float)(bg_warp_sum_d(sum) / (double)S);
    const float scale = 1.0f / sqrtf(mean + eps);
#pragma unroll
    for (uint32_t u = 0; u < DN_NORM_PER_LANE; u++)
        if (lane + 32 * u < S)
            o[lane + 32 * u] = ((ov[u] * scale) * wv[u]) * bg_silu(zv[u]);
}

// The gated norm of every value head of token t, a warp a head; then the
// token's row coded for the out projection (aq set: Hv * S a multiple of
// 256).
__device__ __forceinline__ void bg_block_dn_norm(float *attn, size_t a_width, const float *z,
                                                 const float *w, uint32_t S, uint32_t Hv,
                                                 float eps, uint8_t *aq, uint32_t t)
{
    for (uint32_t h = threadIdx.x / 32; h < Hv; h += blockDim.x / 32)
        bg_warp_dn_norm(attn, a_width, z, w, S, eps, t, h);
    bg_block_code_after(attn + (size_t)t * a_width, Hv * S, aq, t);
}

// What k_dn_recur takes on for a decode step (counter set; NULL: the
// convolution and the norm run apart): the convolution and l2 norms of its
// tokens (the q and k heads by every block of a head, each v row by its
// block, the q and k heads' state by the last block of those that read
// it), each head's gated norm by the last of its blocks, and the rows'
// coding by the last of those.
struct bg_dn_fused {
    const float *conv_w;
    float *conv;
    uint64_t conv_seq;
    uint32_t K;
    const float *z, *norm_w;
    float eps;
    uint8_t *aq;
    int *counter;
    bool prefetch; // the first token's state rows asked of L2 before the wait
};

// The delta rule, block (h, y) owning state rows [y*DN_ROWS, y*DN_ROWS +
// DN_ROWS) of value head h, DN_RPW rows per warp:
//   M = M * exp(g);  M += beta (v - M k) k^T;  o = M q / sqrt(S)
// with beta = sigmoid(b), g = softplus(alpha + dt) * a. Rows are
// independent, so a warp keeps its rows in registers over all the tokens
// (loaded when a sequence's token comes, stored when another sequence's
// follows) and the state crosses memory once per launch, not per token.
// The block stages DN_CHUNK tokens' k, q, its v entries and gates in
// shared memory at a time; a decode step's (f.counter set) convolved here,
// in one chunk.
enum { DN_WARPS = 4, DN_RPW = 4, DN_ROWS = DN_WARPS * DN_RPW, DN_MAX_PER_LANE = 8, DN_CHUNK = 8 };
enum { DN_TAIL_TOKENS = 4 }; // the most tokens k_dn_recur convolves and norms itself
static_assert((int)DN_TAIL_TOKENS <= (int)DN_CHUNK, "a decode step is one chunk");
static_assert((int)DN_CHUNK <= (int)DN_WARPS * 32, "a thread stages a token's gates");

// A warp's DN_RPW state rows (rows: the first, S floats each) from
// registers to memory (store) or back; lane l holds elements l, l + 32, ...
__device__ __forceinline__ void bg_dn_rows_move(float (&m)[DN_RPW][DN_MAX_PER_LANE], float *rows,
                                                uint32_t S, bool store)
{
    const uint32_t lane = threadIdx.x % 32, per = S / 32;
#pragma unroll
    for (uint32_t r = 0; r < DN_RPW; r++)
#pragma unroll
        for (uint32_t u = 0; u < DN_MAX_PER_LANE; u++) {
            float *e = rows + (size_t)r * S + lane + 32 * u;
            if (u >= per)
                m[r][u] = 0.0f; // beyond the state: never read
            else if (store)
                *e = m[r][u];
            else
                m[r][u] = *e;
        }
}

// Its grid is Hv * S / DN_ROWS blocks whatever the tokens (256 for
// Qwen3.6): two an SM at most, so its registers need no cap (sm_90: 142,
// where ptxas's own cap of 128 spilled).
__global__ void __launch_bounds__(DN_WARPS * 32, 1)
    k_dn_recur(const float *qkv, size_t q_width, const float *heads, const float *dt,
               const float *a_log, float *ssm, uint64_t ssm_seq, float *attn, size_t a_width,
               const uint32_t *tok_seq, uint32_t S, uint32_t Hk, uint32_t Hv, uint32_t n_tok,
               const bg_dn_fused f)
{
    // the state no kernel of the step writes before this one: the
    // sequences are the host's (uploaded before the step)
    if (f.prefetch && n_tok && threadIdx.x == 0)
        bg_prefetch_l2(ssm + __ldcg(tok_seq) * ssm_seq +
                           ((size_t)blockIdx.x * S + blockIdx.y * DN_ROWS) * S,
                       (uint64_t)DN_ROWS * S * sizeof(float));
    BG_KERNEL_ENTRY();
    __shared__ float sk[DN_CHUNK][32 * DN_MAX_PER_LANE], sq[DN_CHUNK][32 * DN_MAX_PER_LANE];
    __shared__ float sv[DN_CHUNK][DN_ROWS], sbeta[DN_CHUNK], sg[DN_CHUNK];
    const uint32_t h = blockIdx.x, lane = threadIdx.x % 32, w = threadIdx.x / 32, per = S / 32;
    const uint32_t r0 = blockIdx.y * DN_ROWS + w * DN_RPW, key_dim = S * Hk;
    const float scale = 1.0f / sqrtf((float)S);
    // the first token's state rows are loaded first: their trip to memory
    // overlaps the first chunk's staging (and a decode step's convolution)
    // instead of following it
    float m[DN_RPW][DN_MAX_PER_LANE];
    uint32_t seq = n_tok ? tok_seq[0] : UINT32_MAX;
    if (n_tok)
        bg_dn_rows_move(m, ssm + seq * ssm_seq + ((size_t)h * S + r0) * S, S, false);
    const float dt_h = dt[h], a_h = a_log[h];
    for (uint32_t t0 = 0; t0 < n_tok; t0 += DN_CHUNK) {
        const uint32_t nt = n_tok - t0 < (uint32_t)DN_CHUNK ? n_tok - t0 : (uint32_t)DN_CHUNK;
        __syncthreads(); // the previous chunk is used up
        // thread i < nt's token's gates, loaded now and used after the
        // staging, for the same reason
        float gate_b = 0.0f, gate_a = 0.0f;
        if (threadIdx.x < nt) {
            const float *row = heads + (size_t)(t0 + threadIdx.x) * 2 * Hv;
            gate_b = row[h], gate_a = row[Hv + h];
        }
        if (f.counter) { // the only chunk (n_tok <= DN_TAIL_TOKENS)
            const uint32_t qc = (h % Hk) * S, vc = 2 * key_dim + h * S + blockIdx.y * DN_ROWS;
            for (uint32_t j = threadIdx.x; j < S; j += blockDim.x) {
                bg_dn_conv_channel<DN_TAIL_TOKENS>(
                    qkv, q_width, qc + j, f.conv_w, f.conv, f.conv_seq, tok_seq, f.K, n_tok,
                    false, [&](uint32_t t, float v) { sq[t][j] = v; });
                bg_dn_conv_channel<DN_TAIL_TOKENS>(
                    qkv, q_width, key_dim + qc + j, f.conv_w, f.conv, f.conv_seq, tok_seq, f.K,
                    n_tok, false, [&](uint32_t t, float v) { sk[t][j] = v; });
            }
            for (uint32_t j = threadIdx.x; j < DN_ROWS; j += blockDim.x)
                bg_dn_conv_channel<DN_TAIL_TOKENS>(
                    qkv, q_width, vc + j, f.conv_w, f.conv, f.conv_seq, tok_seq, f.K, n_tok, true,
                    [&](uint32_t t, float v) { sv[t][j] = v; });
            __syncthreads();
            for (uint32_t i = w; i < 2 * nt; i += DN_WARPS)
                bg_dn_l2_rows<1>(i < nt ? sq[i] : sk[i - nt], 0, 1, S, f.eps);
        } else {
            for (uint32_t i = threadIdx.x; i < nt * S; i += blockDim.x) {
                const float *x = qkv + (size_t)(t0 + i / S) * q_width + (h % Hk) * S + i % S;
                sq[i / S][i % S] = x[0];
                sk[i / S][i % S] = x[key_dim];
            }
            for (uint32_t i = threadIdx.x; i < nt * DN_ROWS; i += blockDim.x)
                sv[i / DN_ROWS][i % DN_ROWS] = qkv[(size_t)(t0 + i / DN_ROWS) * q_width +
                                                    2 * key_dim + (size_t)h * S +
                                                    blockIdx.y * DN_ROWS + i % DN_ROWS];
        }
        if (threadIdx.x < nt) {
            sbeta[threadIdx.x] = bg_sigmoid(gate_b);
            sg[threadIdx.x] = expf(bg_softplus(gate_a + dt_h) * a_h);
        }
        __syncthreads();
        for (uint32_t i = 0; i < nt; i++) {
            const uint32_t t = t0 + i;
            if (tok_seq[t] != seq) {
                if (seq != UINT32_MAX)
                    bg_dn_rows_move(m, ssm + seq * ssm_seq + ((size_t)h * S + r0) * S, S, true);
                seq = tok_seq[t];
                bg_dn_rows_move(m, ssm + seq * ssm_seq + ((size_t)h * S + r0) * S, S, false);
            }
            const float g = sg[i], beta = sbeta[i];
            float k[DN_MAX_PER_LANE], q[DN_MAX_PER_LANE], mk[DN_RPW], mq[DN_RPW];
#pragma unroll
            for (uint32_t u = 0; u < DN_MAX_PER_LANE; u++) {
                k[u] = u < per ? sk[i][lane + 32 * u] : 0.0f;
                q[u] = u < per ? sq[i][lane + 32 * u] : 0.0f;
            }
#pragma unroll
            for (uint32_t r = 0; r < DN_RPW; r++) {
                mk[r] = 0.0f;
#pragma unroll
                for (uint32_t u = 0; u < DN_MAX_PER_LANE; u++)
                    if (u < per) {
                        m[r][u] *= g;
                        mk[r] += m[r][u] * k[u];
                    }
            }
#pragma unroll
            for (uint32_t r = 0; r < DN_RPW; r++)
                mk[r] = bg_warp_sum(mk[r]);
#pragma unroll
            for (uint32_t r = 0; r < DN_RPW; r++) {
                const float d = (sv[i][w * DN_RPW + r] - mk[r]) * beta;
                mq[r] = 0.0f;
#pragma unroll
                for (uint32_t u = 0; u < DN_MAX_PER_LANE; u++)
                    if (u < per) {
                        m[r][u] += k[u] * d;
                        mq[r] += m[r][u] * q[u];
                    }
            }
#pragma unroll
            for (uint32_t r = 0; r < DN_RPW; r++)
                mq[r] = bg_warp_sum(mq[r]);
            if (lane == 0)
#pragma unroll
                for (uint32_t r = 0; r < DN_RPW; r++)
                    attn[(size_t)t * a_width + (size_t)h * S + r0 + r] = mq[r] * scale;
        }
    }
    if (seq != UINT32_MAX)
        bg_dn_rows_move(m, ssm + seq * ssm_seq + ((size_t)h * S + r0) * S, S, true);
    if (!f.counter)
        return;
    // A decode step's work after the state, each part by the last block of
    // those it waits for, so the parts of different heads run side by side
    // instead of one block doing all of them in a row. First the history
    // of this block's q and k heads moves on, once every block that reads
    // it (those of the value heads on that k head) has.
    int *const k_counters = f.counter + BG_OWN_COUNTERS_AT, *const v_counters = k_counters + Hk;
    const uint32_t kh = h % Hk;
    if (bg_block_arrives_last(k_counters + kh, (int)(Hv / Hk * gridDim.y))) {
        bg_dn_hist_advance(qkv, q_width, kh * S, kh * S + S, f.conv, f.conv_seq, tok_seq, f.K,
                           n_tok);
        bg_dn_hist_advance(qkv, q_width, key_dim + kh * S, key_dim + kh * S + S, f.conv,
                           f.conv_seq, tok_seq, f.K, n_tok);
    }
    // the head's gated norm once all its rows are written, a warp a token
    if (!bg_block_arrives_last(v_counters + h, (int)gridDim.y))
        return;
    for (uint32_t t = w; t < n_tok; t += DN_WARPS)
        bg_warp_dn_norm(attn, a_width, f.z, f.norm_w, S, f.eps, t, h);
    // the tokens' rows coded once every head is normed
    if (!f.aq || !bg_block_arrives_last(f.counter, (int)Hv))
        return;
    for (uint32_t t = 0; t < n_tok; t++)
        bg_block_code_after(attn + (size_t)t * a_width, Hv * S, f.aq, t);
}

// The gated norm, by one block per token (the micro-batches k_dn_recur does
// not norm itself).
__global__ void k_dn_norm(float *attn, size_t a_width, const float *z, const float *w,
                          uint32_t S, uint32_t Hv, float eps, uint8_t *aq)
{
    BG_KERNEL_ENTRY();
    bg_block_dn_norm(attn, a_width, z, w, S, Hv, eps, aq, blockIdx.x);
}

// Three launches: convolution with the q/k norms, the state (with the
// gates), the gated output norm; one for a decode step (k_dn_recur with
// the convolution and the norm). The state's rows spread over S / DN_ROWS
// blocks per head, so a decode step has Hv * S / 16 blocks at work.
extern "C" int bg_cuda_deltanet(bg_gpu *g, const bg_gpu_deltanet_args *a, float *d_qkv,
                                const float *d_z, float *d_heads, const float *d_dt,
                                const float *d_a, const float *d_conv_w, const float *d_norm_w,
                                float *d_conv, float *d_ssm, float *d_attn,
                                uint8_t *d_attn_q, const uint32_t *d_tok_seq)
{
    const uint32_t S = a->state, Hk = a->n_k_heads, Hv = a->n_v_heads, n = a->n_tok;
    if (S % 32 || S > 32 * DN_MAX_PER_LANE || !Hk || Hv % Hk) {
        snprintf(g->err, sizeof g->err, "DeltaNet: state size %u with %u/%u heads not handled",
                 S, Hk, Hv);
        return -1;
    }
    if (a->conv_kernel < 1 || a->conv_kernel > DN_MAX_CONV) {
        snprintf(g->err, sizeof g->err, "DeltaNet: convolution width %u not handled (1..%d)",
                 a->conv_kernel, DN_MAX_CONV);
        return -1;
    }
    if (bg_cuda_codes_ok(g, "DeltaNet", d_attn_q, Hv * S, d_attn, a->a_width))
        return -1;
    if (!n)
        return 0;
    const bool fused = g->counters && n <= DN_TAIL_TOKENS && a->seq_runs &&
                       BG_OWN_COUNTERS_AT + Hk + Hv <= BG_GPU_COUNTER_BYTES / sizeof(int);
    if (!fused) {
        BG_LAUNCH(2 * Hk + Hv, S, 0, g->stream, k_dn_conv_l2)(
            d_qkv, a->q_width, d_conv_w, d_conv, a->conv_seq_floats, d_tok_seq, S, 2 * Hk,
            a->conv_kernel, a->eps, n);
        if (bg_cuda_launched(g, "DeltaNet convolution"))
            return -1;
    }
    const bg_dn_fused f = {d_conv_w, d_conv,   a->conv_seq_floats, a->conv_kernel,
                           d_z,      d_norm_w, a->eps,             d_attn_q,
                           fused ? g->counters : NULL, bg_prefetch};
    BG_LAUNCH(dim3(Hv, S / DN_ROWS), DN_WARPS * 32, 0, g->stream, k_dn_recur)(
        d_qkv, a->q_width, d_heads, d_dt, d_a, d_ssm, a->ssm_seq_floats, d_attn, a->a_width,
        d_tok_seq, S, Hk, Hv, n, f);
    if (bg_cuda_launched(g, "DeltaNet state"))
        return -1;
    if (fused)
        return 0;
    BG_LAUNCH(n, 256, 0, g->stream, k_dn_norm)(d_attn, a->a_width, d_z, d_norm_w, S, Hv, a->eps,
                                               d_attn_q);
    return bg_cuda_launched(g, "DeltaNet norm");
}
