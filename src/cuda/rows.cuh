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
template <int BATCH = ROWS_BATCH, class LOAD, class USE>
__device__ __forceinline__ void bg_block_batched(uint32_t n, LOAD load, USE use)
{
    using value = decltype(load(0u));
    for (uint32_t i0 = threadIdx.x; i0 < n; i0 += BATCH * blockDim.x) {
        value v[BATCH] = {};
#pragma unroll
        for (int u = 0; u < BATCH; u++)
            if (i0 + u * blockDim.x < n)
                v[u] = load(i0 + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < BATCH; u++)
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

// ---------------------------------------------- a row in registers
//
// A row's norm (and the residual before it, and the coding after it) with
// the row held in the block's registers: each thread owns ROW_VALS
// consecutive values a pass, so a warp owns 256 (one Q8_K super-block),
// over at most PASSES passes. Every load goes out before the first use,
// so the row costs one trip to memory; bg_block_rmsnorm and
// bg_block_code_after make one for each pass over it (the residual, the
// sum, the scaling, the coding), and in a product's last block those trips
// are a decode step's latency.
enum { ROW_VALS = 8, ROW_PASSES = 2 };

// Whether bg_block_norm_row_held takes a row of n at these addresses (the same
// in every thread).
__device__ __forceinline__ bool bg_row_fits(uint32_t n, const void *a, const void *b,
                                            const void *c, const void *d, const void *e)
{
    const uintptr_t any =
        (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e;
    return n % (ROW_VALS * 32) == 0 && n <= ROW_PASSES * ROW_VALS * blockDim.x && any % 16 == 0;
}

// ROW_VALS floats at p (16-byte aligned), past L1.
__device__ __forceinline__ void bg_load_row_vals(const float *p, float v[ROW_VALS])
{
    const float4 *q = BG_ALIGNED(const float4 *, p);
    const float4 a = __ldcg(q), b = __ldcg(q + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void bg_store_row_vals(float *p, const float v[ROW_VALS])
{
    float4 *q = BG_ALIGNED(float4 *, p);
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// The thread's ROW_VALS values at i (of a warp's 256 from i - 8 * lane) coded
// as bg_code_act<ACT_Q8_K> codes them (the super-block's first value of the
// largest magnitude sets d = max / -127), into a coded row of n: codes at
// i, d for each chunk of 32. The whole warp calls it; active alike in it.
__device__ __forceinline__ void bg_code_row_vals(const float v[ROW_VALS], bool active,
                                                 uint8_t *row, uint32_t n, uint32_t i)
{
    float amax = active ? 0.0f : -1.0f, max = 0.0f;
#pragma unroll
    for (int j = 0; j < ROW_VALS; j++)
        if (fabsf(v[j]) > amax)
            amax = fabsf(v[j]), max = v[j];
    const uint32_t lane = threadIdx.x % 32;
    for (uint32_t o = 1; o < 32; o <<= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
        const float om = __shfl_xor_sync(0xffffffffu, max, o);
        if (oa > amax || (oa == amax && (lane ^ o) < lane))
            amax = oa, max = om;
    }
    if (!active)
        return;
    const float iscale = amax > 0.0f ? -127.f / max : 0.0f;
    float q[ROW_VALS];
#pragma unroll
    for (int j = 0; j < ROW_VALS; j++)
        q[j] = amax > 0.0f ? fminf(127.f, rintf(iscale * v[j])) : 0.0f;
    *BG_ALIGNED(uint2 *, row + i) = make_uint2(bg_code_word(q), bg_code_word(q + 4));
    if (lane % (32 / ROW_VALS) == 0)
        ((float *)(row + n))[i / 32] = amax > 0.0f ? 1 / iscale : 0.0f;
}

// bg_block_norm_row with the row in registers; false, doing nothing,
// where bg_row_fits does not hold.
__device__ __forceinline__ bool bg_block_norm_row_held(const float *x, const float *y,
                                                       float *x_out, float *xn, const float *w,
                                                       uint32_t n, float eps, uint8_t *qrow)
{
    if (!bg_row_fits(n, x, y, xn, w, qrow))
        return false;
    float v[ROW_PASSES][ROW_VALS], a[ROW_PASSES][ROW_VALS], wv[ROW_PASSES][ROW_VALS];
    uint32_t at[ROW_PASSES];
#pragma unroll
    for (int p = 0; p < ROW_PASSES; p++) {
        at[p] = (p * blockDim.x + threadIdx.x) * ROW_VALS;
        if (at[p] < n) {
            bg_load_row_vals(x + at[p], v[p]);
            if (y)
                bg_load_row_vals(y + at[p], a[p]);
            if (w)
                bg_load_row_vals(w + at[p], wv[p]);
        }
    }
    double sum = 0.0;
#pragma unroll
    for (int p = 0; p < ROW_PASSES; p++) {
        if (at[p] >= n)
            continue;
        if (y) {
#pragma unroll
            for (int j = 0; j < ROW_VALS; j++)
                v[p][j] = v[p][j] + a[p][j];
            bg_store_row_vals(x_out + at[p], v[p]);
        }
#pragma unroll
        for (int j = 0; j < ROW_VALS; j++)
            sum += (double)(v[p][j] * v[p][j]);
    }
    const double total = bg_block_sum(sum);
    const float mean = (float)(total / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
#pragma unroll
    for (int p = 0; p < ROW_PASSES; p++) {
        const bool active = at[p] < n;
        if (active) {
#pragma unroll
            for (int j = 0; j < ROW_VALS; j++)
                v[p][j] = w ? (v[p][j] * scale) * wv[p][j] : v[p][j] * scale;
            bg_store_row_vals(xn + at[p], v[p]);
        }
        // a warp's passes are active alike (n a multiple of its 256)
        if (qrow && p * blockDim.x < n / ROW_VALS)
            bg_code_row_vals(v[p], active, qrow, n, at[p]);
    }
    return true;
}

// xn = rmsnorm(x) * w (w NULL: none) over a row of n, coded into qrow
// (NULL: not, else a multiple of 256); with y set, x += y first, written
// back to x_out. The row in registers where bg_row_fits holds, else in
// passes over it. The whole block calls it; xn may be x.
__device__ __forceinline__ void bg_block_norm_row(const float *x, const float *y, float *x_out,
                                                  float *xn, const float *w, uint32_t n,
                                                  float eps, uint8_t *qrow)
{
    if (bg_block_norm_row_held(x, y, x_out, xn, w, n, eps, qrow))
        return;
    if (y) {
        bg_block_batched(
            n, [&](uint32_t i) { return make_float2(x[i], __ldcg(y + i)); },
            [&](uint32_t i, float2 a) { x_out[i] = a.x + a.y; });
        x = x_out;
    }
    bg_block_rmsnorm(xn, x, w, n, eps);
    bg_block_code_after(xn, n, qrow, 0);
}

// Row r of n (contiguous rows): x += y, then xn = rmsnorm(x) * w, coded
// into row r of xq (or not: NULL).
__device__ __forceinline__ void bg_block_add_rmsnorm(float *x, const float *y, float *xn,
                                                     const float *w, uint32_t n, float eps,
                                                     uint8_t *xq, uint32_t r)
{
    float *xr = x + (size_t)r * n;
    bg_block_norm_row(xr, y + (size_t)r * n, xr, xn + (size_t)r * n, w, n, eps,
                      xq ? xq + r * bg_code_row_bytes(n) : NULL);
}

// Token t's gate on its shared expert's rows, sigmoid(shared_w . xn), by
// the block's threads (rounding as any float order: the CPU's is ggml's
// vec_dot_f32), in every thread. Reads all of xn's row, so the norm that
// rewrites it comes after a barrier. A row of 2048 is one batch of loads
// for 128 threads: the experts' chunk ends wait on it.
enum { GATE_BATCH = 16 };
__device__ __forceinline__ float bg_block_shared_gate(const bg_gpu_ffn_end &e, uint32_t n,
                                                      uint32_t t)
{
    const float *xn = e.d_xn + (size_t)t * n;
    float s = 0.0f;
    bg_block_batched<GATE_BATCH>(
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
    bg_block_norm_row(e.d_x + off, NULL, NULL, e.d_xn + off, e.d_norm_w, n, e.eps,
                      e.d_xq ? e.d_xq + t * bg_code_row_bytes(n) : NULL);
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
