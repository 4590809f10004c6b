// Row operations by the calling block: a norm, a residual with the next
// norm, the end of a feed-forward half. backend.cu's kernels run one row
// per block; a product's last block (matmul.cu) runs them over a decode
// step's few rows, after the other blocks wrote their inputs in the same
// launch. Those inputs are read past L1 (__ldcg): the block's own SM never
// cached them in this launch, and this way none ever matters.
#pragma once

#include "common.cuh"

enum { ROWS_BATCH = 8 }; // loads a thread issues together in the row tails
enum { FFN_COLS = 2 };   // elements a thread sums at once in bg_block_ffn_end

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

// yr = xr / sqrt(mean(xr^2) + eps) * w, as ops.c's bg_rmsnorm, by the
// block's threads (each reads only the elements it owns before the
// reduction, so a caller may have written them just before). Ends with
// red free for the next call's writes only after a barrier.
__device__ __forceinline__ void bg_block_rmsnorm(float *yr, const float *xr, const float *w,
                                                 uint32_t n, float eps)
{
    __shared__ double red[32];
    double sum = 0.0;
    bg_block_batched(
        n, [&](uint32_t i) { return xr[i]; },
        [&](uint32_t, float a) { sum += (double)(a * a); });
    sum = bg_warp_sum_d(sum);
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = sum;
    __syncthreads();
    double total = 0.0;
    for (unsigned k = 0; k < blockDim.x / 32; k++)
        total += red[k];
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

// Token t's end of a feed-forward half (gpu.h's bg_gpu_ffn_end) over its
// slot rows of n. The shared gate's dot is summed by the block's threads
// (rounding as any float order: the CPU's is ggml's vec_dot_f32); the sums
// in rank order, each add rounded as the CPU rounds it. The dot reads all
// of xn's row before the barrier that precedes the norm's writes to it.
__device__ __forceinline__ void bg_block_ffn_end(const bg_gpu_ffn_end &e, const float *slot,
                                                 uint32_t n_used, uint32_t n, uint32_t t)
{
    __shared__ float red[32];
    __shared__ float gate;
    const size_t off = (size_t)t * n;
    if (e.d_shared) {
        float s = 0.0f;
        for (uint32_t j = threadIdx.x; j < n; j += blockDim.x)
            s += e.d_shared_w[j] * e.d_xn[off + j];
        s = bg_warp_sum(s);
        if (threadIdx.x % 32 == 0)
            red[threadIdx.x / 32] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            float total = 0.0f;
            for (unsigned k = 0; k < blockDim.x / 32; k++)
                total += red[k];
            gate = bg_sigmoid(total);
        }
        __syncthreads();
    }
    const float *ws = e.d_w ? e.d_w + (size_t)t * n_used : NULL;
    const float *sr = slot + (size_t)t * (ws ? n_used : 1) * n;
    // FFN_COLS elements a thread at a time, their ranks' values ROWS_BATCH
    // at a time, all loaded together before they are added in order (a
    // load after each add, or after each element's store, would cost a trip
    // to L2 each: the tail's time in a decode step)
    for (uint32_t j0 = threadIdx.x; j0 < n; j0 += FFN_COLS * blockDim.x) {
        float o[FFN_COLS];
#pragma unroll
        for (int c = 0; c < FFN_COLS; c++)
            o[c] = 0.0f;
        const uint32_t jl = n - 1; // a column past the end reads the last (not x: others write it)
        for (uint32_t k0 = 0; ws && k0 < n_used; k0 += ROWS_BATCH) {
            float wk[ROWS_BATCH], sk[FFN_COLS][ROWS_BATCH];
#pragma unroll
            for (int u = 0; u < ROWS_BATCH; u++) {
                const uint32_t k = k0 + u < n_used ? k0 + u : n_used - 1;
                wk[u] = __ldcg(ws + k);
#pragma unroll
                for (int c = 0; c < FFN_COLS; c++) {
                    const uint32_t j = j0 + c * blockDim.x;
                    sk[c][u] = __ldcg(sr + (size_t)k * n + (j < n ? j : jl));
                }
            }
#pragma unroll
            for (int c = 0; c < FFN_COLS; c++)
#pragma unroll
                for (int u = 0; u < ROWS_BATCH; u++)
                    if (k0 + u < n_used)
                        o[c] = __fadd_rn(o[c], __fmul_rn(wk[u], sk[c][u]));
        }
        float sh[FFN_COLS], xv[FFN_COLS];
#pragma unroll
        for (int c = 0; c < FFN_COLS; c++) {
            const bool in = j0 + c * blockDim.x < n;
            const uint32_t j = in ? j0 + c * blockDim.x : jl;
            if (!ws)
                o[c] = __ldcg(sr + j);
            sh[c] = e.d_shared ? __ldcg(e.d_shared + off + j) : 0.0f;
            xv[c] = in ? e.d_x[off + j] : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < FFN_COLS; c++) {
            const uint32_t j = j0 + c * blockDim.x;
            if (j >= n)
                continue;
            float v = o[c];
            if (e.d_shared)
                v = __fadd_rn(v, __fmul_rn(gate, sh[c]));
            e.d_x[off + j] = __fadd_rn(xv[c], v);
        }
    }
    if (!e.d_norm_w)
        return;
    bg_block_rmsnorm(e.d_xn + off, e.d_x + off, e.d_norm_w, n, e.eps);
    bg_block_code_after(e.d_xn + off, n, e.d_xq, t);
}
