// Dequantizing matrix-vector products for every weight format, and the
// fused mixture of experts: routing (softmax, top-k), the chosen experts'
// gate/up/down rows and the weighted sum, all on the device.
//
// Decode is memory-bound: each warp streams one weight row once per group
// of up to MM_TOK tokens, dequantizing 32 values at a time in registers.
// Not yet run on a GPU (written in a session without one).
#include "common.cuh"

enum { MM_WARPS = 4, MM_TOK = 8 };

// How the CPU converts activations before a dot product with weights of
// type T (quant.c's dot_type and quantize_activations): the GPU applies the
// same rounding to x, so both sides multiply the same numbers.
enum { ACT_F32, ACT_F16, ACT_BF16, ACT_Q8_0, ACT_Q8_K };
template <int T> struct bg_act { enum { kind = ACT_Q8_0 }; }; // q4_0, q5_0, q8_0, iq4_nl, q4_1, q5_1
template <> struct bg_act<T_F32> { enum { kind = ACT_F32 }; };
template <> struct bg_act<T_F16> { enum { kind = ACT_F16 }; };
template <> struct bg_act<T_BF16> { enum { kind = ACT_BF16 }; };
template <> struct bg_act<T_Q4_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_Q5_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_Q6_K> { enum { kind = ACT_Q8_K }; };
template <> struct bg_act<T_IQ4_XS> { enum { kind = ACT_Q8_K }; };

// Rounds a lane's 32 activations (one chunk) as the CPU's conversion does.
// Q8_0/Q8_1: d = amax / 127 (kept as f16), codes round(x * 127 / amax)
// ties to even (the x86 activation path; Q8_1's cached sum is not
// modelled). Q8_K: per 256 values, the 8 lanes of a super-block agree on
// the largest magnitude (first on ties), d = max / -127, codes
// min(127, round(x / d)). Every lane of the warp must call it.
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
    float amax = 0.0f, max = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (K == ACT_Q8_0) {
        const float d = bg_h2f(bg_f2h(amax / 127.f));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
#pragma unroll
        for (int j = 0; j < 32; j++)
            x[j] = rintf(x[j] * id) * d;
        return;
    }
    // Q8_K: the super-block's 8 chunks are 8 neighbouring lanes
    if (!active)
        amax = -1.0f;
    for (int o = 1; o < 8; o <<= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
        const float om = __shfl_xor_sync(0xffffffffu, max, o);
        const bool lower = ((threadIdx.x ^ o) & 7) < (threadIdx.x & 7);
        if (oa > amax || (oa == amax && lower)) {
            amax = oa;
            max = om;
        }
    }
    if (amax <= 0.0f) {
#pragma unroll
        for (int j = 0; j < 32; j++)
            x[j] = 0.0f;
        return;
    }
    const float iscale = -127.f / max, d = 1 / iscale;
#pragma unroll
    for (int j = 0; j < 32; j++) {
        const float q = fminf(127.f, rintf(iscale * x[j]));
        x[j] = q * d;
    }
}

// acc[t] += v . round(x[t][32c .. 32c+31]) for the group's tokens
template <int T>
__device__ __forceinline__ void bg_acc_tokens(const float v[32], const float *x, size_t xs,
                                              uint64_t c, int nt, bool active,
                                              float acc[MM_TOK])
{
#pragma unroll
    for (int t = 0; t < MM_TOK; t++) {
        if (t >= nt)
            break;
        float xv[32];
        if (active) {
            const float4 *xt = (const float4 *)(x + (size_t)t * xs + c * 32);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float4 q = xt[j];
                xv[4 * j] = q.x, xv[4 * j + 1] = q.y, xv[4 * j + 2] = q.z, xv[4 * j + 3] = q.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 32; j++)
                xv[j] = 0.0f;
        }
        bg_round_act<bg_act<T>::kind>(xv, active);
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; j++)
            s += v[j] * xv[j];
        acc[t] += active ? s : 0.0f;
    }
}

// One row of W against a group of tokens; the warp's lanes split the row
// (every lane runs the same number of iterations: the Q8_K rounding
// exchanges values between lanes).
template <int T>
__device__ __forceinline__ void bg_row_dot(const uint8_t *row, uint64_t n_in, const float *x,
                                           size_t xs, int nt, float *y, size_t ys)
{
    const int lane = threadIdx.x % 32;
    float acc[MM_TOK];
#pragma unroll
    for (int t = 0; t < MM_TOK; t++)
        acc[t] = 0.0f;
    const uint64_t n_chunks = n_in / 32;
    for (uint64_t c0 = 0; c0 < n_chunks; c0 += 32) {
        const uint64_t c = c0 + lane;
        const bool active = c < n_chunks;
        float v[32];
        if (active)
            bg_deq32<T>(row, c, v);
        bg_acc_tokens<T>(v, x, xs, c, nt, active, acc);
    }
#pragma unroll
    for (int t = 0; t < MM_TOK; t++) {
        if (t >= nt)
            break;
        const float s = bg_warp_sum(acc[t]);
        if (lane == 0)
            y[(size_t)t * ys] = s;
    }
}

template <int T>
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_matmul(const uint8_t *w, uint64_t n_in, uint64_t n_out, const float *x, size_t xs,
             float *y, size_t ys, uint32_t n_tok)
{
    const uint64_t o = (uint64_t)blockIdx.x * MM_WARPS + threadIdx.x / 32;
    if (o >= n_out)
        return;
    const uint8_t *row = w + o * bg_row_bytes<T>(n_in);
    for (uint32_t t0 = blockIdx.y * MM_TOK; t0 < n_tok; t0 += gridDim.y * MM_TOK) {
        const int nt = n_tok - t0 < MM_TOK ? (int)(n_tok - t0) : MM_TOK;
        bg_row_dot<T>(row, n_in, x + (size_t)t0 * xs, xs, nt, y + (size_t)t0 * ys + o, ys);
    }
}

static dim3 mm_grid(uint64_t n_out, uint32_t n_tok)
{
    uint32_t groups = (n_tok + MM_TOK - 1) / MM_TOK;
    return dim3((unsigned)((n_out + MM_WARPS - 1) / MM_WARPS), groups > 65535 ? 65535 : groups);
}

extern "C" int bg_cuda_matmul(bg_gpu *g, uint32_t type, const void *d_w, uint64_t n_in,
                              uint64_t n_out, const float *d_x, size_t x_stride, float *d_y,
                              size_t y_stride, uint32_t n_tok)
{
    if (n_in % 32 || x_stride % 4 || (uintptr_t)d_x % 16) {
        snprintf(g->err, sizeof g->err, "matmul: rows of %llu (stride %zu) not handled",
                 (unsigned long long)n_in, x_stride);
        return -1;
    }
    if (!n_tok || !n_out)
        return 0;
    const dim3 grid = mm_grid(n_out, n_tok);
    bool ok;
#define MM(T)                                                                                \
    k_matmul<T><<<grid, MM_WARPS * 32, 0, g->stream>>>((const uint8_t *)d_w, n_in, n_out, d_x, \
                                                       x_stride, d_y, y_stride, n_tok)
    BG_DISPATCH(type, ok, MM);
#undef MM
    if (!ok) {
        snprintf(g->err, sizeof g->err, "matmul: tensor type %u has no CUDA kernel", type);
        return -1;
    }
    return bg_cuda_launched(g, "matmul");
}

// ------------------------------------------------------------------ MoE

// Softmax over the router's logits, the top k kept (the earlier expert wins
// a tie) and renormalized; one block per token, as blocks.c's route().
__global__ void k_route(float *router, uint32_t n_expert, uint32_t k_used, int32_t *chosen,
                        float *chosen_w)
{
    extern __shared__ float sh[];
    float *p = router + (size_t)blockIdx.x * n_expert;
    float *red = sh; // [blockDim.x]
    __shared__ double dsum[32];
    float m = -INFINITY;
    for (uint32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
        m = fmaxf(m, p[e]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    double sum = 0.0;
    for (uint32_t e = threadIdx.x; e < n_expert; e += blockDim.x) {
        const float v = expf(p[e] - m);
        p[e] = v;
        sum += (double)v;
    }
    sum = bg_warp_sum_d(sum);
    if (threadIdx.x % 32 == 0)
        dsum[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (unsigned w = 0; w < blockDim.x / 32; w++)
            total += dsum[w];
        dsum[0] = total;
    }
    __syncthreads();
    const float inv = (float)(1.0 / dsum[0]);
    for (uint32_t e = threadIdx.x; e < n_expert; e += blockDim.x)
        p[e] *= inv;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    int32_t *ch = chosen + (size_t)blockIdx.x * k_used;
    float *w = chosen_w + (size_t)blockIdx.x * k_used;
    float total = 0.0f;
    for (uint32_t k = 0; k < k_used; k++) {
        int32_t best = -1;
        for (uint32_t e = 0; e < n_expert; e++) {
            bool taken = false;
            for (uint32_t j = 0; j < k; j++)
                taken |= ch[j] == (int32_t)e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = (int32_t)e;
        }
        ch[k] = best;
        total += p[best];
    }
    for (uint32_t k = 0; k < k_used; k++)
        w[k] = p[ch[k]] / total;
}

// Slot s (token s / x_div's input row, or slot s's own when x_div is 1)
// through rows of its chosen expert's matrix.
template <int T>
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_expert_rows(const uint8_t *w, uint64_t expert_bytes, uint64_t n_in, uint64_t n_out,
                  const int32_t *chosen, const float *x, size_t xs, uint32_t x_div, float *y,
                  size_t ys)
{
    const uint64_t o = (uint64_t)blockIdx.x * MM_WARPS + threadIdx.x / 32;
    const uint32_t s = blockIdx.y;
    if (o >= n_out)
        return;
    const uint8_t *row = w + (uint64_t)chosen[s] * expert_bytes + o * bg_row_bytes<T>(n_in);
    bg_row_dot<T>(row, n_in, x + (size_t)(s / x_div) * xs, xs, 1, y + (size_t)s * ys + o, ys);
}

static int expert_rows(bg_gpu *g, uint32_t type, const void *w, uint64_t expert_bytes,
                       uint64_t n_in, uint64_t n_out, const int32_t *chosen, uint32_t n_slots,
                       const float *x, size_t xs, uint32_t x_div, float *y, size_t ys)
{
    const dim3 grid((unsigned)((n_out + MM_WARPS - 1) / MM_WARPS), n_slots);
    bool ok;
#define ER(T)                                                                                \
    k_expert_rows<T><<<grid, MM_WARPS * 32, 0, g->stream>>>(                                 \
        (const uint8_t *)w, expert_bytes, n_in, n_out, chosen, x, xs, x_div, y, ys)
    BG_DISPATCH(type, ok, ER);
#undef ER
    if (!ok) {
        snprintf(g->err, sizeof g->err, "experts: tensor type %u has no CUDA kernel", type);
        return -1;
    }
    return bg_cuda_launched(g, "expert rows");
}

// out[t] = sum over ranks k of w[t][k] * y[t][k], in rank order.
__global__ void k_combine(float *out, const float *slot_out, const float *w, uint32_t n_embd,
                          uint32_t k_used, uint32_t n_tok)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (uint64_t)n_embd * n_tok)
        return;
    const uint64_t t = i / n_embd, j = i % n_embd;
    float o = 0.0f;
    for (uint32_t k = 0; k < k_used; k++)
        o = __fadd_rn(o, __fmul_rn(w[t * k_used + k], slot_out[(t * k_used + k) * n_embd + j]));
    out[i] = o;
}

extern "C" int bg_cuda_moe(bg_gpu *g, const bg_gpu_moe_args *a, const float *d_xn,
                           float *d_router, const void *d_gate, const void *d_up,
                           const void *d_down, int32_t *d_chosen, float *d_chosen_w,
                           float *d_ff, float *d_slot_out, float *d_out)
{
    const uint32_t slots = a->n_tok * a->n_used;
    if (!slots)
        return 0;
    k_route<<<a->n_tok, 256, 256 * sizeof(float), g->stream>>>(d_router, a->n_expert, a->n_used,
                                                               d_chosen, d_chosen_w);
    if (bg_cuda_launched(g, "routing"))
        return -1;
    // gate into ff, up into slot_out (free until the down rows), both [slot][n_ff]
    if (expert_rows(g, a->type_gate, d_gate, a->gate_expert_bytes, a->n_embd, a->n_ff, d_chosen,
                    slots, d_xn, a->n_embd, a->n_used, d_ff, a->n_ff) ||
        expert_rows(g, a->type_up, d_up, a->up_expert_bytes, a->n_embd, a->n_ff, d_chosen,
                    slots, d_xn, a->n_embd, a->n_used, d_slot_out, a->n_ff))
        return -1;
    if (bg_cuda_silu_mul(g, d_ff, d_slot_out, a->n_ff, a->n_ff, slots))
        return -1;
    if (expert_rows(g, a->type_down, d_down, a->down_expert_bytes, a->n_ff, a->n_embd, d_chosen,
                    slots, d_ff, a->n_ff, 1, d_slot_out, a->n_embd))
        return -1;
    const uint64_t n_o = (uint64_t)a->n_tok * a->n_embd;
    k_combine<<<(unsigned)((n_o + 255) / 256), 256, 0, g->stream>>>(d_out, d_slot_out, d_chosen_w,
                                                                    a->n_embd, a->n_used, a->n_tok);
    return bg_cuda_launched(g, "expert sum");
}
