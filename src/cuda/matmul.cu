// Dense matrix products for every weight format (one, or several of one
// input in one launch) and the routing of the mixture of experts (softmax,
// top-k) after the router's product; products.cuh holds their device code.
// Run on an H200 by scripts/gpu-check.sh (README, "CUDA").
#include "products.cuh"

// Whether mma.sync lays its fragments out as bg_mma_s8's callers assume:
// one product of a 16 x 16 matrix by a 16 x 8 one (a: row-major codes, b:
// each column's 16 codes in turn), d row-major 16 x 8; then d2 = twice
// that, the product accumulated onto itself (bg_mma_s8_add).
__global__ void k_mma_probe(const int *a, const int *b, int *d, int *d2)
{
    BG_KERNEL_ENTRY();
    const int g = (int)threadIdx.x / 4, q = (int)threadIdx.x % 4;
    int v[4];
    const auto put = [&](int *out, const int *x) { // this lane's part of D, row-major
        out[8 * g + 2 * q] = x[0], out[8 * g + 2 * q + 1] = x[1];
        out[8 * (g + 8) + 2 * q] = x[2], out[8 * (g + 8) + 2 * q + 1] = x[3];
    };
    bg_mma_s8(v, a[4 * g + q], a[4 * (g + 8) + q], b[4 * g + q]);
    put(d, v);
    bg_mma_s8_add(v, a[4 * g + q], a[4 * (g + 8) + q], b[4 * g + q]);
    put(d2, v);
}

// Runs k_mma_probe on distinct codes and checks it against the product
// worked out here; false on any difference or error (cleared). The
// device's init keeps the tensor cores off unless this holds.
bool bg_cuda_mma_works(cudaStream_t stream)
{
    int8_t a[16 * 16], b[8 * 16];
    int want[16 * 8], got[2][16 * 8];
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
        int *const d = (int *)(dev + sizeof a + sizeof b);
        BG_LAUNCH(1, 32, 0, stream, k_mma_probe)((const int *)dev, (const int *)(dev + sizeof a),
                                                 d, d + 16 * 8);
        ok = cudaGetLastError() == cudaSuccess &&
             cudaMemcpyAsync(got, d, sizeof got, cudaMemcpyDeviceToHost, stream) ==
                 cudaSuccess &&
             cudaStreamSynchronize(stream) == cudaSuccess && !memcmp(got[0], want, sizeof want);
        for (int i = 0; ok && i < 16 * 8; i++)
            ok = got[1][i] == 2 * want[i];
    }
    cudaFree(dev);
    cudaGetLastError();
    return ok;
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
    bool prefetch; // the block's weight rows asked of L2 before the wait
};

// Before the wait: the block's rows of W (and W1), by the first token
// group's blocks (the others read the same rows).
template <int T, int NR> __device__ __forceinline__ void bg_mm_prefetch(const bg_mm &m)
{
    if (!m.prefetch || blockIdx.y)
        return;
    const uint64_t per = (uint64_t)MM_WARPS * (32 / m.lanes), rb = bg_row_bytes<T>(m.n_in);
    bg_prefetch_block_rows(m.w0, rb, m.n_out, per, blockIdx.x);
    if (NR == 2)
        bg_prefetch_block_rows(m.w1, rb, m.n_out, per, blockIdx.x);
}

// Rows of a product, a warp's rows (bg_warp_rows) at a time, then the tail.
template <int T, int NR, int TOK, bool INT, int TAIL>
__device__ __forceinline__ void bg_matmul_block(const bg_mm &m, const bg_tail &tail)
{
    uint64_t o;
    bool valid;
    if (bg_warp_rows((uint64_t)blockIdx.x * MM_WARPS + threadIdx.x / 32, m.n_out, m.lanes, &o,
                     &valid))
        bg_matmul_row<T, NR, TOK, INT>(m.w0, m.w1, o, valid, m.lanes, m.n_in, m.x, m.xs, m.xq,
                                       m.y, m.ys, m.n_tok);
    bg_tail_finish<TAIL>(tail);
}

template <int T, int NR, int TOK, bool INT>
__global__ void __launch_bounds__(MM_WARPS * 32) k_matmul(const bg_mm m)
{
    bg_mm_prefetch<T, NR>(m);
    BG_KERNEL_ENTRY();
    bg_matmul_block<T, NR, TOK, INT, TAIL_NONE>(m, bg_tail{});
}

// With a tail, more registers than the loop's alone, bounded: the
// products that take one (a mixer's out projection, the router) are a
// decode step's 512 blocks or fewer, all on an H200 at once while each SM
// holds 4 of them (128 registers a thread; the tail's row in registers
// takes more unbounded). A kernel of its own, so the bound leaves the
// products without a tail to ptxas's own choice.
enum { MM_TAIL_BLOCKS = 4 };
template <int T, int TOK, bool INT, int TAIL>
__global__ void __launch_bounds__(MM_WARPS * 32, MM_TAIL_BLOCKS)
    k_matmul_tail(const bg_mm m, const bg_tail tail)
{
    bg_mm_prefetch<T, 1>(m);
    BG_KERNEL_ENTRY();
    bg_matmul_block<T, 1, TOK, INT, TAIL>(m, tail);
}

// k_matmul's integer path on the tensor cores (more than MM_TOK tokens, no
// tail): a warp 16 rows (STAGED: through shared memory, mma_stage_bytes).
template <int T, int NR, bool STAGED>
__global__ void __launch_bounds__(MM_WARPS * 32) k_matmul_mma(const bg_mm m)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(uint4, stage);
    const uint64_t ob = bg_mma_block_row(blockIdx.x);
    const uint8_t *const w[2] = {m.w0, m.w1};
    if (bg_mma_block_has_rows<STAGED>(ob, m.n_out))
        bg_mma_tokens<T, NR, STAGED>((uint8_t *)stage, w, ob, m.n_out, m.n_in, m.xq, m.n_tok,
                                     m.y, m.ys);
}

static dim3 mm_grid(uint64_t n_out, uint32_t n_tok, int lanes)
{
    uint32_t groups = (n_tok + MM_TOK - 1) / MM_TOK;
    return dim3(row_blocks(n_out, lanes), groups > 65535 ? 65535 : groups);
}


template <int T, int NR, int TOK, bool INT, int TAIL>
static void launch_k_matmul(bg_gpu *g, dim3 grid, const bg_mm &m, const bg_tail &tail)
{
    if constexpr (TAIL == TAIL_NONE)
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_matmul<T, NR, TOK, INT>)(m);
    else
        BG_LAUNCH(grid, MM_WARPS * 32, bg_tail_shared_bytes(tail), g->stream,
                  k_matmul_tail<T, TOK, INT, TAIL>)(m, tail);
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
                const dim3 grid(mma_blocks(m.n_out), mma_tiles(m.n_tok));
                if (const uint32_t shared = mma_stage_bytes(T, NR, MMA_NG))
                    BG_LAUNCH(grid, MM_WARPS * 32, shared, g->stream,
                              k_matmul_mma<T, NR, true>)(m);
                else
                    BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_matmul_mma<T, NR, false>)(m);
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
                     lanes, bg_prefetch};
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
    uint64_t row_bytes[BG_GPU_MAX_PROJ];
    uint32_t n;
    int lanes;     // to a row (row_lanes)
    bool prefetch; // each block's weight rows asked of L2 before the wait
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

// The types a launch's kernel switches over. The kernel holds the code of
// each and takes the registers of the hungriest, so Q2_K and Q3_K (scales,
// and Q2_K's mins, per 16 codes), which would take the one-token kernel
// from 100 registers a thread to 130 (sm_90), have kernels of their own
// (LOW) with the types whose activations code alike (Q8_K), the only
// others a launch with them can have (bg_cuda_matmul_multi's `one`).
template <int T, bool LOW> struct bg_multi_has {
    enum { on = LOW ? bg_act<T>::kind == ACT_Q8_K : T != T_Q2_K && T != T_Q3_K };
};

template <int TOK, bool LOW>
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_matmul_multi(bg_multi m, uint64_t n_in, const uint8_t *xq, uint32_t n_tok)
{
    const uint32_t k = bg_multi_product(m);
    if (m.prefetch && !blockIdx.y)
        bg_prefetch_block_rows(m.w[k], m.row_bytes[k], m.n_out[k],
                               (uint64_t)MM_WARPS * (32 / m.lanes), blockIdx.x - m.first_block[k]);
    BG_KERNEL_ENTRY();
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
#define CASE(T)                                                                                \
    case T:                                                                                    \
        if constexpr (bg_multi_has<T, LOW>::on)                                                \
            ROW(T);                                                                            \
        break;
        BG_INT_TYPES(CASE)
#undef CASE
#undef ROW
    default: break;
    }
}

// k_matmul_multi on the tensor cores (first_block counts MMA_ROWS a block;
// STAGED: through shared memory, the largest mma_stage_bytes of the types).
template <bool STAGED, bool LOW>
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_matmul_multi_mma(bg_multi m, uint64_t n_in, const uint8_t *xq, uint32_t n_tok)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(uint4, stage);
    const uint32_t k = bg_multi_product(m);
    const uint64_t ob = bg_mma_block_row(blockIdx.x - m.first_block[k]);
    if (!bg_mma_block_has_rows<STAGED>(ob, m.n_out[k]))
        return;
    const uint8_t *const w[1] = {m.w[k]};
    switch (m.type[k]) {
#define ROWS(T)                                                                                \
    bg_mma_tokens<T, 1, STAGED>((uint8_t *)stage, w, ob, m.n_out[k], n_in, xq, n_tok, m.y[k],  \
                                m.ys[k])
#define CASE(T)                                                                                \
    case T:                                                                                    \
        if constexpr (bg_multi_has<T, LOW>::on)                                                \
            ROWS(T);                                                                           \
        break;
        BG_INT_TYPES(CASE)
#undef CASE
#undef ROWS
    default: break;
    }
}

// Launches k_matmul_multi (or its tensor-core kernel, staged when `shared`
// is not 0) with the types of set LOW.
template <bool LOW>
static void launch_matmul_multi(bg_gpu *g, const bg_multi &m, uint64_t n_in, const uint8_t *xq,
                                uint32_t n_tok, bool mma, uint32_t shared)
{
    const uint32_t blocks = m.first_block[m.n], groups = (n_tok + MM_TOK - 1) / MM_TOK;
    const dim3 grid(blocks, groups > 65535 ? 65535 : groups), grid_mma(blocks, mma_tiles(n_tok));
    if (mma && shared)
        BG_LAUNCH(grid_mma, MM_WARPS * 32, shared, g->stream,
                  k_matmul_multi_mma<true, LOW>)(m, n_in, xq, n_tok);
    else if (mma)
        BG_LAUNCH(grid_mma, MM_WARPS * 32, 0, g->stream,
                  k_matmul_multi_mma<false, LOW>)(m, n_in, xq, n_tok);
    else if (n_tok == 1)
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_matmul_multi<1, LOW>)(m, n_in, xq, n_tok);
    else
        BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_matmul_multi<MM_TOK, LOW>)(m, n_in, xq,
                                                                                  n_tok);
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
    bool low = false; // the kernels with Q2_K and Q3_K (bg_multi_has)
    for (uint32_t k = 0; k < n_proj; k++) {
        low = low || proj[k].type == T_Q2_K || proj[k].type == T_Q3_K;
        m.w[k] = (const uint8_t *)proj[k].d_w;
        m.y[k] = proj[k].d_y;
        m.n_out[k] = proj[k].n_out;
        m.ys[k] = proj[k].y_stride;
        m.type[k] = proj[k].type;
        m.row_bytes[k] = row_bytes_of(proj[k].type, n_in);
        m.first_block[k] = blocks;
        blocks += mma ? mma_blocks(proj[k].n_out) : row_blocks(proj[k].n_out, m.lanes);
    }
    m.first_block[n_proj] = blocks;
    m.n = n_proj;
    m.prefetch = bg_prefetch && !mma;
    // staged where every type can be: the largest type's shared memory
    bool staged = mma;
    uint32_t shared = 0;
    for (uint32_t k = 0; k < n_proj && staged; k++) {
        const uint32_t b = mma_stage_bytes(proj[k].type, 1, MMA_NG);
        staged = b != 0;
        shared = b > shared ? b : shared;
    }
    if (!staged)
        shared = 0;
    if (low)
        launch_matmul_multi<true>(g, m, n_in, xq, n_tok, mma, shared);
    else
        launch_matmul_multi<false>(g, m, n_in, xq, n_tok, mma, shared);
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
    BG_DYNAMIC_SHARED(int32_t, shared); // bg_group_shared_bytes when grouping
    const uint32_t t0 = blockIdx.x * ROUTE_WARPS;
    const uint32_t t_end = n_tok - t0 < (uint32_t)ROUTE_WARPS ? n_tok : t0 + ROUTE_WARPS;
    bg_block_route(logits, t0, t_end, n_tok, n_expert, k_used, chosen, chosen_w, groups, shared);
}

__global__ void k_group(const int32_t *chosen, uint32_t n_slots, uint32_t n_expert,
                        int32_t *groups)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(int32_t, shared); // bg_group_shared_bytes
    bg_block_group(chosen, n_slots, n_expert, groups, shared);
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
    const size_t shmem = groups_here ? bg_group_shared_bytes(n_expert) : 0;
    BG_LAUNCH(blocks, ROUTE_WARPS * 32, shmem, g->stream, k_route)(
        logits, n_tok, n_expert, n_used, d_chosen, d_chosen_w, groups_here);
    if (bg_cuda_launched(g, "routing"))
        return -1;
    if (!d_groups || groups_here)
        return 0;
    BG_LAUNCH(1, 1024, bg_group_shared_bytes(n_expert), g->stream, k_group)(
        d_chosen, n_tok * n_used, n_expert, d_groups);
    return bg_cuda_launched(g, "grouping the experts' tokens");
}

