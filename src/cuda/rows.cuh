// Row operations by the calling block: a norm, a residual with the next
// norm, the end of a feed-forward half. backend.cu's kernels run one row
// per block; a product's last block (matmul.cu) runs them over a decode
// step's few rows, after the other blocks wrote their inputs in the same
// launch. Those inputs are read past L1 (__ldcg): the block's own SM never
// cached them in this launch, and this way none ever matters.
#pragma once

#include "common.cuh"

enum { ROWS_BATCH = 8 }; // loads a thread issues together in the row tails

// For each i < n the calling thread owns (i = threadIdx.x + k *
// blockDim.x), use(i, load(i)), ROWS_BATCH elements at a time, the
// batch's loads issued before its uses: a store between two loads (to the
// same row, say) would make each load a trip to L2 of its own. One block
// does these rows after a product, so those trips are a decode step's
// latency.
template <class LOAD, class USE>
__device__ __forceinline__ void bg_block_batched(uint32_t n, LOAD load, USE use)
{
    using value = decltype(load(0u));
    for (uint32_t i0 = threadIdx.x; i0 < n; i0 += ROWS_BATCH * blockDim.x) {
        value v[ROWS_BATCH] = {};
#pragma unroll
        for (int u = 0; u < ROWS_BATCH; u++)
            if (i0 + u * blockDim.x < n)
                v[u] = load(i0 + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < ROWS_BATCH; u++)
            if (i0 + u * blockDim.x < n)
                use(i0 + u * blockDim.x, v[u]);
    }
}

// v (float or double) summed over the block's threads, in every thread:
// each warp's lanes as bg_warp_sum adds them, then the warps in order.
// The whole block calls it; calls may follow one another.
template <typename V> __device__ __forceinline__ V bg_block_sum(V v)
{
    __shared__ V red[32];
    if constexpr (sizeof(V) == sizeof(double))
        v = bg_warp_sum_d(v);
    else
        v = bg_warp_sum(v);
    __syncthreads(); // the previous call's sums are read
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = v;
    __syncthreads();
    V total = 0;
    for (unsigned k = 0; k < blockDim.x / 32; k++)
        total += red[k];
    return total;
}

// yr = xr / sqrt(mean(xr^2) + eps) * w, as ops.c's bg_rmsnorm, by the
// block's threads (each reads only the elements it owns before the
// reduction, so a caller may have written them just before).
__device__ __forceinline__ void bg_block_rmsnorm(float *yr, const float *xr, const float *w,
                                                 uint32_t n, float eps)
{
    double sum = 0.0;
    bg_block_batched(
        n, [&](uint32_t i) { return xr[i]; },
        [&](uint32_t, float a) { sum += (double)(a * a); });
    const double total = bg_block_sum(sum);
    const float mean = (float)(total / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    bg_block_batched(
        n, [&](uint32_t i) { return make_float2(xr[i], w ? w[i] : 1.0f); },
        [&](uint32_t i, float2 a) { yr[i] = w ? (a.x * scale) * a.y : a.x * scale; });
}

// Row r of n (contiguous rows): x += y, then xn = rmsnorm(x) * w, coded
// into row r of xq (or not: NULL).
__device__ __forceinline__ void bg_block_add_rmsnorm(float *x, const float *y, float *xn,
                                                     const float *w, uint32_t n, float eps,
                                                     uint8_t *xq, uint32_t r)
{
    float *xr = x + (size_t)r * n, *xnr = xn + (size_t)r * n;
    const float *yr = y + (size_t)r * n;
    bg_block_batched(
        n, [&](uint32_t i) { return make_float2(xr[i], __ldcg(yr + i)); },
        [&](uint32_t i, float2 a) { xr[i] = a.x + a.y; });
    bg_block_rmsnorm(xnr, xr, w, n, eps);
    bg_block_code_after(xnr, n, xq, r);
}

// Token t's gate on its shared expert's rows, sigmoid(shared_w . xn), by
// the block's threads (rounding as any float order: the CPU's is ggml's
// vec_dot_f32), in every thread. Reads all of xn's row, so the norm that
// rewrites it comes after a barrier.
__device__ __forceinline__ float bg_block_shared_gate(const bg_gpu_ffn_end &e, uint32_t n,
                                                      uint32_t t)
{
    const float *xn = e.d_xn + (size_t)t * n;
    float s = 0.0f;
    bg_block_batched(
        n, [&](uint32_t j) { return make_float2(e.d_shared_w[j], xn[j]); },
        [&](uint32_t, float2 a) { s += a.x * a.y; });
    return bg_sigmoid(bg_block_sum(s));
}

// Column j of token t's end of a feed-forward half: x += the slot rows
// (n_used of them from slot's row t * n_used, or slot's row t alone
// without weights) times their weights summed in rank order, each add
// rounded as the CPU rounds it, plus the shared expert's row times its
// gate. Its loads all go before the adds: one trip to memory. The slot
// rows are read past L1, as another block of the caller's launch may have
// written them.
__device__ __forceinline__ void bg_ffn_end_column(const bg_gpu_ffn_end &e, const float *slot,
                                                  uint32_t n_used, uint32_t n, uint32_t t,
                                                  uint32_t j, float gate)
{
    const size_t off = (size_t)t * n;
    const float *ws = e.d_w ? e.d_w + (size_t)t * n_used : NULL;
    const float *sr = slot + (size_t)t * (ws ? n_used : 1) * n + j;
    const float sh = e.d_shared ? __ldcg(e.d_shared + off + j) : 0.0f, xv = e.d_x[off + j];
    float o = ws ? 0.0f : __ldcg(sr);
    for (uint32_t k0 = 0; ws && k0 < n_used; k0 += ROWS_BATCH) {
        float wk[ROWS_BATCH], sk[ROWS_BATCH];
#pragma unroll
        for (int u = 0; u < ROWS_BATCH; u++) {
            const uint32_t k = k0 + u < n_used ? k0 + u : n_used - 1;
            wk[u] = __ldcg(ws + k);
            sk[u] = __ldcg(sr + (size_t)k * n);
        }
#pragma unroll
        for (int u = 0; u < ROWS_BATCH; u++)
            if (k0 + u < n_used)
                o = __fadd_rn(o, __fmul_rn(wk[u], sk[u]));
    }
    if (e.d_shared)
        o = __fadd_rn(o, __fmul_rn(gate, sh));
    e.d_x[off + j] = __fadd_rn(xv, o);
}

// Token t's next norm after its feed-forward half, coded (none without
// d_norm_w). The whole block calls it once the row's x is written.
__device__ __forceinline__ void bg_block_ffn_norm(const bg_gpu_ffn_end &e, uint32_t n,
                                                  uint32_t t)
{
    if (!e.d_norm_w)
        return;
    const size_t off = (size_t)t * n;
    __syncthreads(); // the row's x written, and its xn read by the gate
    bg_block_rmsnorm(e.d_xn + off, e.d_x + off, e.d_norm_w, n, e.eps);
    bg_block_code_after(e.d_xn + off, n, e.d_xq, t);
}

// Token t's end of a feed-forward half (gpu.h's bg_gpu_ffn_end) over its
// slot rows of n, by one block.
__device__ __forceinline__ void bg_block_ffn_end(const bg_gpu_ffn_end &e, const float *slot,
                                                 uint32_t n_used, uint32_t n, uint32_t t)
{
    const float gate = e.d_shared ? bg_block_shared_gate(e, n, t) : 0.0f;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
        bg_ffn_end_column(e, slot, n_used, n, t, j, gate);
    bg_block_ffn_norm(e, n, t);
}
