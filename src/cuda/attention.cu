// Attention over f32/f16/q8_0/q4_0 KV caches and the Gated DeltaNet
// recurrence (convolution, l2 norms, delta-rule state update, gated norm),
// mirroring src/models/blocks.c and src/models/qwen35moe.c step by step.
// Positions and sequences are read from device memory, so a decode step's
// launches do not change from one token to the next (CUDA graphs).
// Not yet run on a GPU (written in a session without one).
#include "common.cuh"

// ---------------------------------------------------------- block helpers

// Sum over the block (blockDim.x a multiple of 32, at most 1024), in double.
__device__ double bg_block_sum_d(double v, double *sh)
{
    v = bg_warp_sum_d(v);
    const int w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        sh[w] = v;
    __syncthreads();
    double total = 0.0;
    for (int i = 0; i < nw; i++)
        total += sh[i];
    return total;
}

// rmsnorm of the block's D values (one per thread), as ops.c: squares in
// float, summed in double, scale 1 / sqrt(mean + eps).
__device__ float bg_block_rmsnorm(float x, const float *w, float eps, double *sh)
{
    const double sum = bg_block_sum_d((double)(x * x), sh);
    const float mean = (float)(sum / (double)blockDim.x);
    const float scale = 1.0f / sqrtf(mean + eps);
    return w ? (x * scale) * w[threadIdx.x] : x * scale;
}

// Walsh-Hadamard transform of each chunk of n of the block's values in
// v[] (shared), scaled by 1 / sqrt(n) first, as ops.c's bg_hadamard.
__device__ void bg_block_hadamard(float *v, int n)
{
    const int j = threadIdx.x;
    v[j] *= 1.0f / sqrtf((float)n);
    __syncthreads();
    for (int span = 1; span < n; span <<= 1) {
        if ((j & span) == 0) {
            const float a = v[j], b = v[j + span];
            v[j] = a + b;
            v[j + span] = a - b;
        }
        __syncthreads();
    }
}

// NEOX rope on the block's values in v[] (shared): pairs (i, i + n_rot/2),
// theta advanced by repeated multiplication as ops.c does.
__device__ void bg_block_rope(float *v, uint32_t n_rot, uint32_t pos, float base)
{
    const uint32_t half = n_rot / 2, i = threadIdx.x;
    float x0 = 0, x1 = 0, c = 0, s = 0;
    if (i < half) {
        const float theta_scale = powf(base, -2.0f / (float)n_rot);
        float theta = (float)pos;
        for (uint32_t k = 0; k < i; k++)
            theta *= theta_scale;
        c = cosf(theta);
        s = sinf(theta);
        x0 = v[i];
        x1 = v[i + half];
    }
    __syncthreads();
    if (i < half) {
        v[i] = fmaf(x0, c, -(x1 * s));
        v[i + half] = fmaf(x0, s, x1 * c);
    }
    __syncthreads();
}

// ----------------------------------------------------------- cache formats

__device__ __forceinline__ uint64_t bg_head_bytes(uint32_t type, uint32_t D)
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

// Stores the block's values (one per thread, threads = head size) in the
// cache type, as llama.cpp's copy into the cache converts (quant.c's
// quantize_activations): f16 rounding; q8_0 with d = amax / 127 and codes
// rounded half to even; q4_0 by the reference (d = max / -8).
// Each warp is one 32-value block.
__device__ void bg_cache_put(uint32_t type, uint8_t *h, float x)
{
    const uint32_t e = threadIdx.x, lane = e % 32;
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

// One block per (token, head), head_dim threads: the query split from its
// gate, QK-norm, rope, rotation (into attn, the attention kernel's input);
// heads below n_head_kv also prepare and store K and V.
__global__ void k_attn_prepare(bg_gpu_attn_args a, const float *q, const float *kv, float *gate,
                               float *attn, const float *q_norm, const float *k_norm,
                               uint8_t *k_cache, uint8_t *v_cache, const uint32_t *tok_seq,
                               const uint32_t *tok_pos)
{
    __shared__ double red[32];
    BG_DYNAMIC_SHARED(float, v); // [head_dim]
    const uint32_t t = blockIdx.x, h = blockIdx.y, D = a.head_dim, j = threadIdx.x;
    const uint32_t pos = tok_pos[t], seq = tok_seq[t];
    if (h < a.n_head) {
        const float *src = q + (size_t)t * a.q_width + (size_t)(a.gated ? 2 * h : h) * D;
        if (a.gated)
            gate[(size_t)t * a.a_width + (size_t)h * D + j] = src[D + j];
        v[j] = bg_block_rmsnorm(src[j], q_norm, a.eps, red);
        __syncthreads();
        bg_block_rope(v, a.rope_dims, pos, a.rope_base);
        if (a.k_rotation)
            bg_block_hadamard(v, (int)a.k_rotation);
        attn[(size_t)t * a.a_width + (size_t)h * D + j] = bg_query_round(a.type_k, v[j]);
        __syncthreads();
    }
    if (h >= a.n_head_kv)
        return;
    const size_t kv_dim = (size_t)a.n_head_kv * D;
    const float *k = kv + (size_t)t * a.kv_width + (size_t)h * D;
    v[j] = bg_block_rmsnorm(k[j], k_norm, a.eps, red);
    __syncthreads();
    bg_block_rope(v, a.rope_dims, pos, a.rope_base);
    if (a.k_rotation)
        bg_block_hadamard(v, (int)a.k_rotation);
    bg_cache_put(a.type_k,
                 k_cache + seq * a.k_seq_bytes + pos * a.k_row_bytes + h * bg_head_bytes(a.type_k, D),
                 v[j]);
    __syncthreads();
    v[j] = k[kv_dim + j];
    __syncthreads();
    if (a.v_rotation)
        bg_block_hadamard(v, (int)a.v_rotation);
    bg_cache_put(a.type_v,
                 v_cache + seq * a.v_seq_bytes + pos * a.v_row_bytes + h * bg_head_bytes(a.type_v, D),
                 v[j]);
}

enum { ATT_WARPS = 4, ATT_MAX_PER_LANE = 16 }; // head_dim <= 512
enum { ATT_MAX_PER_THREAD = 32 * ATT_MAX_PER_LANE / (ATT_WARPS * 32) };

// q . k for position p's key of the block's kv head, times the scale, in
// every lane of the calling warp (qs: the query, rounded as K's dot does).
__device__ __forceinline__ float bg_attn_score(const bg_gpu_attn_args &a, const uint8_t *kc,
                                               const float *qs, uint32_t p)
{
    const uint32_t lane = threadIdx.x % 32, per = a.head_dim / 32;
    const uint8_t *kp = kc + p * a.k_row_bytes;
    float d = 0.0f;
    for (uint32_t i = 0; i < per; i++) {
        const uint32_t e = lane + 32 * i;
        d += bg_cache_get(a.type_k, kp, e) * qs[e];
    }
    return bg_warp_sum(d) * a.scale;
}

// The same for an f16 K, summed as the CPU's dot (kernels_x86_legacy.c's
// bg_dot_f16_avx2) sums: 32 fused multiply-add chains (lane j: elements j,
// j + 32, ...), then its reduction tree, accumulators 0-7 + 8-15 and 16-23
// + 24-31, those two, then the halves of 8, 4 and 2. The f16 V path
// amplifies a last-bit difference in a score (an f16 rounding that tips),
// so there the scores match bit for bit.
__device__ __forceinline__ float bg_attn_score_f16(const bg_gpu_attn_args &a, const uint8_t *kc,
                                                   const float *qs, uint32_t p)
{
    const uint32_t lane = threadIdx.x % 32, per = a.head_dim / 32;
    const uint16_t *kp = (const uint16_t *)(kc + p * a.k_row_bytes);
    float d = 0.0f;
    for (uint32_t i = 0; i < per; i++)
        d = fmaf(bg_h2f(kp[lane + 32 * i]), qs[lane + 32 * i], d);
    d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 8));
    d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 16));
    for (int o = 4; o > 0; o >>= 1)
        d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, o));
    return __fmul_rn(d, a.scale);
}

// out = softmax(scores) V with f32 accumulators: each warp an online
// softmax over every ATT_WARPS-th position, merged at the end (accs:
// ATT_WARPS * D floats of shared memory).
__device__ void bg_attn_split(const bg_gpu_attn_args &a, const uint8_t *kc, const uint8_t *vc,
                              const float *qs, float *accs, uint32_t pos, float *out)
{
    __shared__ float wm[ATT_WARPS], ws[ATT_WARPS];
    const uint32_t D = a.head_dim, lane = threadIdx.x % 32, w = threadIdx.x / 32, per = D / 32;
    float acc[ATT_MAX_PER_LANE]; // unrolled with guards: kept in registers
#pragma unroll
    for (uint32_t i = 0; i < ATT_MAX_PER_LANE; i++)
        acc[i] = 0.0f;
    float M = -INFINITY, S = 0.0f;
    for (uint32_t p = w; p <= pos; p += ATT_WARPS) {
        const float sc = bg_attn_score(a, kc, qs, p);
        const uint8_t *vp = vc + p * a.v_row_bytes;
        float ms = 1.0f, vs = 1.0f;
        if (sc > M) {
            ms = expf(M - sc);
            M = sc;
        } else {
            vs = expf(sc - M);
        }
#pragma unroll
        for (uint32_t i = 0; i < ATT_MAX_PER_LANE; i++)
            if (i < per)
                acc[i] = acc[i] * ms + bg_cache_get(a.type_v, vp, lane + 32 * i) * vs;
        S = S * ms + vs;
    }
#pragma unroll
    for (uint32_t i = 0; i < ATT_MAX_PER_LANE; i++)
        if (i < per)
            accs[w * D + lane + 32 * i] = acc[i];
    if (lane == 0) {
        wm[w] = M;
        ws[w] = S;
    }
    __syncthreads();
    float Mall = -INFINITY;
    for (int k = 0; k < ATT_WARPS; k++)
        Mall = fmaxf(Mall, wm[k]);
    float Sall = 0.0f;
    for (int k = 0; k < ATT_WARPS; k++)
        Sall += wm[k] == -INFINITY ? 0.0f : ws[k] * expf(wm[k] - Mall);
    const float inv = Sall == 0.0f ? 0.0f : 1.0f / Sall;
    for (uint32_t e = threadIdx.x; e < D; e += blockDim.x) {
        float o = 0.0f;
        for (int k = 0; k < ATT_WARPS; k++)
            if (wm[k] != -INFINITY)
                o += accs[k * D + e] * expf(wm[k] - Mall);
        out[e] = o * inv;
    }
}

__device__ __forceinline__ float bg_round_f16(float x) { return bg_h2f(bg_f2h(x)); }

// out = softmax(scores) V for an f16 V cache as llama.cpp's CPU flash
// attention (and blocks.c's attend_head) computes it: one online softmax
// over the positions in order, the accumulator kept in f16 (rounded after
// every scaling and every fused multiply-add). Splitting the positions in
// f32 as above differs from it by up to 5e-3 in the logits of a model with
// many attention layers. The warps score ATT_CHUNK positions at a time;
// each thread then runs the same sequence of maxima and sums over them,
// for its own elements (one dependent multiply-add per position).
enum { ATT_CHUNK = 32 };

__device__ void bg_attn_ordered_f16(const bg_gpu_attn_args &a, const uint8_t *kc,
                                    const uint8_t *vc, const float *qs, uint32_t pos, float *out)
{
    __shared__ float scores[ATT_CHUNK];
    const uint32_t D = a.head_dim, w = threadIdx.x / 32;
    float acc[ATT_MAX_PER_THREAD];
#pragma unroll
    for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++)
        acc[i] = 0.0f;
    float M = -INFINITY, S = 0.0f;
    for (uint32_t p0 = 0; p0 <= pos; p0 += ATT_CHUNK) {
        const uint32_t n = pos + 1 - p0 < (uint32_t)ATT_CHUNK ? pos + 1 - p0 : (uint32_t)ATT_CHUNK;
        for (uint32_t k = w; k < n; k += ATT_WARPS) {
            const float sc = a.type_k == T_F16 ? bg_attn_score_f16(a, kc, qs, p0 + k)
                                               : bg_attn_score(a, kc, qs, p0 + k);
            if (threadIdx.x % 32 == 0)
                scores[k] = sc;
        }
        __syncthreads();
        for (uint32_t k = 0; k < n; k++) {
            const float sc = scores[k];
            const uint16_t *vp = (const uint16_t *)(vc + (p0 + k) * a.v_row_bytes);
            float ms = 1.0f, vs = 1.0f;
            if (sc > M) {
                ms = expf(M - sc);
                M = sc;
#pragma unroll
                for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++)
                    acc[i] = bg_round_f16(__fmul_rn(acc[i], ms));
            } else {
                vs = expf(sc - M);
            }
#pragma unroll
            for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++) {
                const uint32_t e = threadIdx.x + i * blockDim.x;
                if (e < D)
                    acc[i] = bg_round_f16(fmaf(bg_h2f(vp[e]), vs, acc[i]));
            }
            S = __fadd_rn(__fmul_rn(S, ms), vs);
        }
        __syncthreads(); // scores is rewritten
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
#pragma unroll
    for (uint32_t i = 0; i < ATT_MAX_PER_THREAD; i++) {
        const uint32_t e = threadIdx.x + i * blockDim.x;
        if (e < D)
            out[e] = __fmul_rn(acc[i], inv);
    }
}

// One block per (token, head) over its sequence's positions (f32
// accumulators split by warp, or in order in f16 for an f16 V cache); V's
// rotation undone and the gate applied on the way out. Output in place of
// the query in attn, and the head's span of the token's row coded for the
// out projection (aq set: head_dim a multiple of 256).
__global__ void __launch_bounds__(ATT_WARPS * 32)
    k_attn(bg_gpu_attn_args a, float *attn, const float *gate, const uint8_t *k_cache,
           const uint8_t *v_cache, const uint32_t *tok_seq, const uint32_t *tok_pos,
           uint8_t *aq)
{
    BG_DYNAMIC_SHARED(float, sh); // q[D], acc[ATT_WARPS][D], then out[D]
    const uint32_t t = blockIdx.x, h = blockIdx.y, D = a.head_dim;
    float *qs = sh, *accs = sh + D, *out = accs + ATT_WARPS * D;
    float *row = attn + (size_t)t * a.a_width + (size_t)h * D;
    for (uint32_t e = threadIdx.x; e < D; e += blockDim.x)
        qs[e] = row[e];
    __syncthreads();
    const uint32_t kvh = h / (a.n_head / a.n_head_kv), pos = tok_pos[t], seq = tok_seq[t];
    const uint64_t kh = bg_head_bytes(a.type_k, D), vh = bg_head_bytes(a.type_v, D);
    const uint8_t *kc = k_cache + seq * a.k_seq_bytes + kvh * kh;
    const uint8_t *vc = v_cache + seq * a.v_seq_bytes + kvh * vh;
    if (a.type_v == T_F16)
        bg_attn_ordered_f16(a, kc, vc, qs, pos, out);
    else
        bg_attn_split(a, kc, vc, qs, accs, pos, out);
    __syncthreads();
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
    const float *gr = gate + (size_t)t * a.a_width + (size_t)h * D;
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
                                 uint8_t *d_attn_q)
{
    const uint32_t D = a->head_dim;
    if (D % 32 || D > 32 * ATT_MAX_PER_LANE || a->n_head % a->n_head_kv ||
        a->rope_dims > D || (a->k_rotation && D % a->k_rotation) ||
        (a->v_rotation && D % a->v_rotation)) {
        snprintf(g->err, sizeof g->err, "attention: head size %u not handled", D);
        return -1;
    }
    if (bg_cuda_codes_ok(g, "attention (each head)", d_attn_q, D, d_attn, a->a_width))
        return -1;
    if (!a->n_tok)
        return 0;
    const uint32_t heads = a->n_head > a->n_head_kv ? a->n_head : a->n_head_kv;
    BG_LAUNCH(dim3(a->n_tok, heads), D, D * sizeof(float), g->stream, k_attn_prepare)(
        *a, d_q, d_kv, d_gate, d_attn, d_q_norm, d_k_norm, d_k_cache, d_v_cache, d_tok_seq,
        d_tok_pos);
    if (bg_cuda_launched(g, "attention (prepare)"))
        return -1;
    const size_t shmem = (size_t)(2 + ATT_WARPS) * D * sizeof(float);
    BG_LAUNCH(dim3(a->n_tok, a->n_head), ATT_WARPS * 32, shmem, g->stream, k_attn)(
        *a, d_attn, d_gate, d_k_cache, d_v_cache, d_tok_seq, d_tok_pos, d_attn_q);
    return bg_cuda_launched(g, "attention");
}

// --------------------------------------------------------------- DeltaNet

enum { DN_MAX_CONV = 8 }; // convolution widths handled (Qwen3.6: 4)

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

// The causal depthwise convolution and the l2 norm of each q and k head.
// Block b owns channels [b*S, b*S + S): a q head, a k head or a v head.
// Each thread runs its channel through the tokens in order with the last
// K - 1 inputs in registers (a sequence's history is loaded when its first
// token comes and stored when another sequence's token follows); then the
// block's warps normalize the q or k head of every token, as ops.c's
// bg_l2norm.
__global__ void k_dn_conv_l2(float *qkv, size_t q_width, const float *w, float *conv,
                             uint64_t conv_seq, const uint32_t *tok_seq, uint32_t S,
                             uint32_t n_heads2, uint32_t K, float eps, uint32_t n_tok)
{
    const uint32_t c = blockIdx.x * S + threadIdx.x;
    // the weights of the K - 1 previous inputs, and of the current one
    float wc[DN_MAX_CONV - 1], hist[DN_MAX_CONV - 1];
#pragma unroll
    for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
        wc[j] = j + 1 < K ? w[(size_t)c * K + j] : 0.0f;
    const float w_now = w[(size_t)c * K + K - 1];
    uint32_t seq = UINT32_MAX;
    for (uint32_t t = 0; t < n_tok; t++) {
        if (tok_seq[t] != seq) {
            if (seq != UINT32_MAX)
                bg_dn_hist_move(hist, conv + seq * conv_seq + (size_t)c * (K - 1), K, true);
            seq = tok_seq[t];
            bg_dn_hist_move(hist, conv + seq * conv_seq + (size_t)c * (K - 1), K, false);
        }
        float *x = qkv + (size_t)t * q_width + c;
        const float in = *x;
        float acc = 0.0f;
#pragma unroll
        for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
            if (j + 1 < K)
                acc = __fadd_rn(acc, __fmul_rn(hist[j], wc[j]));
        acc = __fadd_rn(acc, __fmul_rn(in, w_now));
#pragma unroll
        for (uint32_t j = 0; j + 2 < DN_MAX_CONV; j++)
            if (j + 2 < K)
                hist[j] = hist[j + 1];
        if (K > 1)
#pragma unroll
            for (uint32_t j = 0; j + 1 < DN_MAX_CONV; j++)
                if (j + 2 == K)
                    hist[j] = in;
        *x = bg_silu(acc);
    }
    if (seq != UINT32_MAX)
        bg_dn_hist_move(hist, conv + seq * conv_seq + (size_t)c * (K - 1), K, true);
    if (blockIdx.x >= n_heads2)
        return; // a v head: no norm
    __syncthreads(); // the block's outputs, every token
    const uint32_t lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    const float s = 1.0f / sqrtf((float)S);
    for (uint32_t t = threadIdx.x / 32; t < n_tok; t += n_warps) {
        float *x = qkv + (size_t)t * q_width + (size_t)blockIdx.x * S;
        const float scale = 1.0f / sqrtf(bg_warp_mean_sq(x, S) + eps / (float)S);
        for (uint32_t j = lane; j < S; j += 32)
            x[j] = (x[j] * scale) * s;
    }
}

// The delta rule, block (h, y) owning state rows [y*DN_ROWS, y*DN_ROWS +
// DN_ROWS) of value head h, DN_RPW rows per warp:
//   M = M * exp(g);  M += beta (v - M k) k^T;  o = M q / sqrt(S)
// with beta = sigmoid(b), g = softplus(alpha + dt) * a. Rows are
// independent, so a warp keeps its rows in registers over all the tokens
// (loaded when a sequence's token comes, stored when another sequence's
// follows) and the state crosses memory once per launch, not per token.
// The block stages DN_CHUNK tokens' k, q, its v entries and gates in
// shared memory at a time.
enum { DN_WARPS = 4, DN_RPW = 4, DN_ROWS = DN_WARPS * DN_RPW, DN_MAX_PER_LANE = 8, DN_CHUNK = 8 };

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

__global__ void __launch_bounds__(DN_WARPS * 32)
    k_dn_recur(const float *qkv, size_t q_width, const float *heads, const float *dt,
               const float *a_log, float *ssm, uint64_t ssm_seq, float *attn, size_t a_width,
               const uint32_t *tok_seq, uint32_t S, uint32_t Hk, uint32_t Hv, uint32_t n_tok)
{
    __shared__ float sk[DN_CHUNK][32 * DN_MAX_PER_LANE], sq[DN_CHUNK][32 * DN_MAX_PER_LANE];
    __shared__ float sv[DN_CHUNK][DN_ROWS], sbeta[DN_CHUNK], sg[DN_CHUNK];
    const uint32_t h = blockIdx.x, lane = threadIdx.x % 32, w = threadIdx.x / 32, per = S / 32;
    const uint32_t r0 = blockIdx.y * DN_ROWS + w * DN_RPW, key_dim = S * Hk;
    const float scale = 1.0f / sqrtf((float)S);
    float m[DN_RPW][DN_MAX_PER_LANE];
    uint32_t seq = UINT32_MAX;
    for (uint32_t t0 = 0; t0 < n_tok; t0 += DN_CHUNK) {
        const uint32_t nt = n_tok - t0 < (uint32_t)DN_CHUNK ? n_tok - t0 : (uint32_t)DN_CHUNK;
        __syncthreads(); // the previous chunk is used up
        for (uint32_t i = threadIdx.x; i < nt * S; i += blockDim.x) {
            const float *x = qkv + (size_t)(t0 + i / S) * q_width + (h % Hk) * S + i % S;
            sq[i / S][i % S] = x[0];
            sk[i / S][i % S] = x[key_dim];
        }
        for (uint32_t i = threadIdx.x; i < nt * DN_ROWS; i += blockDim.x)
            sv[i / DN_ROWS][i % DN_ROWS] = qkv[(size_t)(t0 + i / DN_ROWS) * q_width +
                                                2 * key_dim + (size_t)h * S +
                                                blockIdx.y * DN_ROWS + i % DN_ROWS];
        for (uint32_t i = threadIdx.x; i < nt; i += blockDim.x) {
            const float *row = heads + (size_t)(t0 + i) * 2 * Hv;
            sbeta[i] = bg_sigmoid(row[h]);
            sg[i] = expf(bg_softplus(row[Hv + h] + dt[h]) * a_log[h]);
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
}

// The gated norm per value head, rmsnorm(o) * w * silu(z): one block per
// token, a warp per head; then the token's row coded for the out
// projection (aq set: Hv * S a multiple of 256).
__global__ void k_dn_norm(float *attn, size_t a_width, const float *z, const float *w,
                          uint32_t S, uint32_t Hv, float eps, uint8_t *aq)
{
    const uint32_t lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    float *row = attn + (size_t)blockIdx.x * a_width;
    for (uint32_t h = threadIdx.x / 32; h < Hv; h += n_warps) {
        float *o = row + (size_t)h * S;
        const float *zz = z + (size_t)blockIdx.x * a_width + (size_t)h * S;
        const float scale = 1.0f / sqrtf(bg_warp_mean_sq(o, S) + eps);
        for (uint32_t j = lane; j < S; j += 32)
            o[j] = ((o[j] * scale) * w[j]) * bg_silu(zz[j]);
    }
    bg_block_code_after(row, Hv * S, aq);
}

// Three launches: convolution with the q/k norms, the state (with the
// gates), the gated output norm. The state's rows spread over S / DN_ROWS
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
    BG_LAUNCH(2 * Hk + Hv, S, 0, g->stream, k_dn_conv_l2)(d_qkv, a->q_width, d_conv_w, d_conv,
                                                        a->conv_seq_floats, d_tok_seq, S,
                                                        2 * Hk, a->conv_kernel, a->eps, n);
    if (bg_cuda_launched(g, "DeltaNet convolution"))
        return -1;
    BG_LAUNCH(dim3(Hv, S / DN_ROWS), DN_WARPS * 32, 0, g->stream, k_dn_recur)(
        d_qkv, a->q_width, d_heads, d_dt, d_a, d_ssm, a->ssm_seq_floats, d_attn, a->a_width,
        d_tok_seq, S, Hk, Hv, n);
    if (bg_cuda_launched(g, "DeltaNet state"))
        return -1;
    BG_LAUNCH(n, 256, 0, g->stream, k_dn_norm)(d_attn, a->a_width, d_z, d_norm_w, S, Hv, a->eps,
                                               d_attn_q);
    return bg_cuda_launched(g, "DeltaNet norm");
}
