// The fused mixture of experts' products: the chosen experts' gate/up and
// down rows (and the shared expert's) over the slots routing filed under
// each, all on the device; the down rows' last block finishes the
// feed-forward half (backend.cu's expert_sum when it does not).
// Run on an H200 by scripts/gpu-check.sh (README, "CUDA").
#include "products.cuh"

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
    uint32_t split; // block rows a routed expert (eg_block_rows)
    // before the wait, each block's rows asked of L2: the shared expert's
    // (prefetch), and the routed experts' (prefetch_routed: set where the
    // routing's launch is not the one right before, so it has completed)
    bool prefetch, prefetch_routed;
};

__device__ __forceinline__ size_t bg_egroup_xrow(int32_t slot, uint32_t n_routed, uint32_t x_div)
{
    const uint32_t s = (uint32_t)slot;
    return s < n_routed ? s / x_div : x_div == 1 ? s : s - n_routed;
}

// Which slots block row blockIdx.y takes, in tiles of TILE (the slots a
// product takes at once): p.split rows for each routed expert chosen, row
// `part` of them its tiles part, part + split, ...; then a row for each
// tile of the shared expert's slots (a slot for every token). So no
// expert's slots are left to a few blocks while the others idle: a
// micro-batch of 512 tokens gave the shared expert's 512 slots to the last
// row's blocks alone.
struct bg_eg_row {
    bool shared;
    uint32_t rank, part; // the rank of the routed expert chosen; the row's part
};
__device__ __forceinline__ bg_eg_row bg_eg_row_of(const bg_egroup &p)
{
    const uint32_t routed_rows = (p.n_routed < p.n_expert ? p.n_routed : p.n_expert) * p.split;
    if (blockIdx.y >= routed_rows)
        return {true, 0, blockIdx.y - routed_rows};
    return {false, blockIdx.y / p.split, blockIdx.y % p.split};
}

// A block row's expert (bg_eg_row): its matrices and the slots filed under
// it (slot(i): the i-th) that the row takes, tiles from first, step apart,
// before end. Read from the lists by rank, so the rows and the first input
// are two trips away (the count of experts chosen, then these), not four.
struct bg_expert_pick {
    const uint8_t *w[2];
    int32_t first, end, step;
    int32_t lead, lead_slot; // the expert's first slot's index, and slot(lead) known
                             // without a trip to sorted
    const int32_t *sorted;   // the routed slots by expert (route's grouping)
    int32_t n_routed;        // NULL sorted: the shared expert's slots follow these
    __device__ int32_t slot(int32_t i) const
    {
        return !sorted ? n_routed + i : i == lead ? lead_slot : sorted[i];
    }
    // the same from the list alone (a register fewer where slots are many)
    __device__ int32_t listed_slot(int32_t i) const { return sorted ? sorted[i] : n_routed + i; }
};
template <int TILE>
__device__ __forceinline__ bg_expert_pick bg_pick_expert(const bg_egroup &p, bg_eg_row row)
{
    const int32_t off = (int32_t)row.part * TILE;
    if (row.shared) // one tile: its step passes the end
        return {{p.shared[0], p.shared[1]}, off, (int32_t)p.n_shared, (int32_t)p.n_shared, 0,
                (int32_t)p.n_routed, NULL, (int32_t)p.n_routed};
    const int32_t *active = p.groups + p.n_expert + 2;
    const int32_t *rank_first = active + p.n_expert, *rank_slot = rank_first + p.n_expert + 1;
    const uint32_t r = row.rank;
    const int32_t e = active[r], lead = rank_first[r];
    const uint64_t at = (uint64_t)e * p.expert_bytes;
    return {{p.w[0] + at, p.w[1] + at}, lead + off, rank_first[r + 1], (int32_t)p.split * TILE,
            lead, rank_slot[r], rank_slot + p.n_expert, (int32_t)p.n_routed};
}

// Rows o of the matrices of block row `row`'s expert, over the slots it
// takes, TOK at a time (1 for decode steps: an expert seldom has more). NR = 2: gate
// (w[0]) and up (w[1]) together, y = silu(gate) * up; NR = 1: y = w[0] x.
// PATH: the integer path over p.xq (EG_CODED) or over p.x coded on the way
// (EG_CODING, one slot at a time), or the float path over p.x (EG_FLOAT).
enum { EG_FLOAT, EG_CODED, EG_CODING };

// The rows a row's lanes take at once: two neighbours for one matrix coded
// on the way (an expert's down rows in a decode step), so each lane has
// twice the loads in flight and the launch half the blocks; else one.
template <int NR, int PATH> struct eg_rows_of {
    enum { value = PATH == EG_CODING && NR == 1 ? 2 : 1 };
};
static inline int eg_rows(bool coding, int nr) { return coding && nr == 1 ? 2 : 1; }

// o: the lanes' row, or with eg_rows 2 their pair of rows (2o, 2o + 1).
template <int T, int NR, int TOK, int PATH>
__device__ __forceinline__ void bg_expert_rows(const bg_egroup &p, bg_eg_row row, uint64_t o,
                                               bool valid)
{
    constexpr int ROWS = (int)eg_rows_of<NR, PATH>::value;
    constexpr int ND = ROWS == 2 ? 2 : NR; // rows in each dot product
    const bg_expert_pick pick = bg_pick_expert<TOK>(p, row);
    const uint64_t rb = bg_row_bytes<T>(p.n_in), qs = bg_code_row_bytes(p.n_in);
    const uint64_t o0 = o * ROWS;
    const bool valid1 = ROWS == 2 && valid && o0 + 1 < p.n_out;
    const uint8_t *const rows[2] = {pick.w[0] + o0 * rb,
                                    ROWS == 2 ? pick.w[0] + (valid1 ? o0 + 1 : o0) * rb
                                              : pick.w[1] + o0 * rb};
    for (int32_t i0 = pick.first; i0 < pick.end; i0 += pick.step) {
        const int nt = pick.end - i0 < TOK ? pick.end - i0 : TOK;
        int32_t slot[TOK];
#pragma unroll
        for (int t = 0; t < TOK; t++)
            slot[t] = pick.slot(i0 + (t < nt ? t : 0));
        float acc[ND][TOK];
        if constexpr (PATH == EG_CODING) {
            static_assert(TOK == 1, "coding on the way takes one slot at a time");
            bg_rows_dot_int_coding<T, ND>(
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
                float *y = p.y + (size_t)slot[t] * p.ys + o0;
                if constexpr (ROWS == 2) {
                    y[0] = acc[0][t];
                    if (valid1)
                        y[1] = acc[ND - 1][t];
                } else {
                    y[0] = NR == 2 ? bg_silu(acc[0][t]) * acc[ND - 1][t] : acc[0][t];
                }
            }
    }
}

// The feed-forward half's end after the down rows (TAIL_FFN_END), for a
// decode step's few tokens: the blocks of column x (rows of every expert
// chosen, a chunk of n_embd) count themselves on a counter of their own,
// and the last of them ends that chunk of every token (the slots' sum
// into x); the last chunk's block then norms and codes the whole rows.
// Chunks end side by side, and the norm is all that one block does alone.
template <int ROWS> __device__ __forceinline__ void bg_ffn_end_chunks(const bg_egroup &p)
{
    const bg_tail &t = p.tail;
    if (!bg_block_arrives_last(t.counter + BG_OWN_COUNTERS_AT + blockIdx.x, (int)gridDim.y))
        return;
    __shared__ float gates[TAIL_TOKENS];
    for (uint32_t r = 0; r < t.n_tok && t.end.d_shared; r++) {
        const float gate = bg_block_shared_gate(t.end, t.n, r);
        if (threadIdx.x == 0)
            gates[r] = gate;
    }
    __syncthreads();
    const uint32_t per = MM_WARPS * (32 / (uint32_t)p.lanes) * ROWS, j0 = blockIdx.x * per;
    const uint32_t cols = t.n - j0 < per ? t.n - j0 : per;
    for (uint32_t i = threadIdx.x; i < t.n_tok * cols; i += blockDim.x)
        bg_ffn_end_column(t.end, t.y, t.n_used, t.n, i / cols, j0 + i % cols,
                          t.end.d_shared ? gates[i / cols] : 0.0f);
    if (!t.end.d_norm_w || !bg_block_arrives_last(t.counter, (int)gridDim.x))
        return;
    for (uint32_t r = 0; r < t.n_tok; r++)
        bg_block_ffn_norm(t.end, t.n, r);
}

// Before the wait (bg_prefetch_l2): the block's rows of its expert's
// matrices, where p says they are known (the routing read where it has
// completed, from L2, and only to pick the rows: a stale expert would
// cost a wasted fetch, not a wrong result). One block row of each expert.
template <int T, int NR, int PATH>
__device__ __forceinline__ void bg_eg_prefetch(const bg_egroup &p)
{
    if (!p.prefetch || threadIdx.x)
        return;
    const bg_eg_row row = bg_eg_row_of(p);
    if (row.part || (!row.shared && !p.prefetch_routed))
        return;
    const uint8_t *w[2] = {p.shared[0], p.shared[1]};
    if (!row.shared) {
        const int32_t *const n_active = p.groups + p.n_expert + 1;
        const uint32_t e = (uint32_t)__ldcg(n_active + 1 + row.rank);
        if ((int32_t)row.rank >= __ldcg(n_active) || e >= p.n_expert)
            return;
        w[0] = p.w[0] + e * p.expert_bytes, w[1] = p.w[1] + e * p.expert_bytes;
    }
    constexpr int ROWS = (int)eg_rows_of<NR, PATH>::value;
    const uint64_t per = (uint64_t)MM_WARPS * (32 / p.lanes) * ROWS;
    const uint64_t rb = bg_row_bytes<T>(p.n_in);
    for (int r = 0; r < (NR == 2 ? 2 : 1); r++)
        bg_prefetch_block_rows(w[r], rb, p.n_out, per, blockIdx.x);
}

// Every block counts itself for the tail, also those without rows. The
// tail's rows (a norm and its coding) would take more registers than the
// products' loop and cost the down rows' blocks room on an SM: the bound
// keeps the loop's count (sm_90: at most 128, no spills).
enum { EG_TAIL_BLOCKS = 4 };
template <int T, int NR, int TOK, int PATH, int TAIL>
__global__ void __launch_bounds__(MM_WARPS * 32, TAIL == TAIL_NONE ? 1 : EG_TAIL_BLOCKS)
    k_expert_group(const bg_egroup p)
{
    bg_eg_prefetch<T, NR, PATH>(p);
    BG_KERNEL_ENTRY();
    const int32_t *n_active = p.groups + p.n_expert + 1;
    const bg_eg_row row = bg_eg_row_of(p);
    constexpr int ROWS = (int)eg_rows_of<NR, PATH>::value;
    uint64_t o;
    bool valid;
    if ((row.shared || (int32_t)row.rank < *n_active) &&
        bg_warp_rows((uint64_t)blockIdx.x * MM_WARPS + threadIdx.x / 32,
                     (p.n_out + ROWS - 1) / ROWS, p.lanes, &o, &valid))
        bg_expert_rows<T, NR, TOK, PATH>(p, row, o, valid);
    static_assert(TAIL == TAIL_NONE || TAIL == TAIL_FFN_END, "the experts' tail: the half's end");
    if constexpr (TAIL == TAIL_FFN_END)
        bg_ffn_end_chunks<ROWS>(p);
}

// k_expert_group's integer path on the tensor cores (experts with more
// than a slot on average, no tail): a warp 16 rows, over tiles of
// 8 EG_MMA_NG of its row's slots (16: prefill's average with 512 tokens
// and 8 of 256 experts).
enum { EG_MMA_NG = 2, EG_MMA_TILE = 8 * EG_MMA_NG };
template <int T, int NR, bool STAGED>
__global__ void __launch_bounds__(MM_WARPS * 32) k_expert_group_mma(const bg_egroup p)
{
    BG_KERNEL_ENTRY();
    BG_DYNAMIC_SHARED(uint4, stage);
    const int32_t *n_active = p.groups + p.n_expert + 1;
    const bg_eg_row row = bg_eg_row_of(p);
    const uint64_t ob = bg_mma_block_row(blockIdx.x);
    if ((!row.shared && (int32_t)row.rank >= *n_active) ||
        !bg_mma_block_has_rows<STAGED>(ob, p.n_out))
        return;
    const bg_expert_pick pick = bg_pick_expert<EG_MMA_TILE>(p, row);
    const uint64_t qs = bg_code_row_bytes(p.n_in);
    for (int32_t i0 = pick.first; i0 < pick.end; i0 += pick.step) {
        const int nt = pick.end - i0 < EG_MMA_TILE ? pick.end - i0 : EG_MMA_TILE;
        const auto xrow = [&](int i) {
            return p.xq + bg_egroup_xrow(pick.listed_slot(i0 + i), p.n_routed, p.x_div) * qs;
        };
        const auto out = [&](int i, uint64_t o, float v) {
            p.y[(size_t)pick.listed_slot(i0 + i) * p.ys + o] = v;
        };
        if constexpr (STAGED)
            bg_mma_rows_staged<T, NR, EG_MMA_NG>((uint8_t *)stage, pick.w, ob, p.n_out, p.n_in,
                                                 nt, xrow, qs, out);
        else
            bg_mma_rows<T, NR, EG_MMA_NG>(pick.w, bg_mma_warp_row(ob), p.n_out, p.n_in, nt,
                                          xrow, out);
    }
}

// A launch's block rows (bg_eg_row_of) for tiles of `tile` slots, with
// p.split set: one row an expert for decode steps (lone: a slot or fewer an
// expert on average), else about two for each tile an expert has on
// average, so one with twice the average still ends with the others, and
// at most 4 (rows that find no tile cost their blocks a few trips each).
static uint32_t eg_block_rows(bg_egroup &p, uint32_t tile, bool lone)
{
    const uint32_t n_groups = p.n_routed < p.n_expert ? p.n_routed : p.n_expert;
    const uint64_t per_tile = (uint64_t)n_groups * tile;
    const uint64_t split = lone || !n_groups ? 1 : (2ull * p.n_routed + per_tile - 1) / per_tile;
    p.split = split < 1 ? 1 : split > 4 ? 4 : (uint32_t)split;
    return n_groups * p.split + (p.shared[0] ? (p.n_shared + tile - 1) / tile : 0);
}

// The integer path's kernels for weights of type T (lone: a slot at a
// time, for decode steps, where an expert seldom has more; coding: x is
// coded on the way).
template <int T, int NR, int TAIL>
static void launch_expert_group_int(bg_gpu *g, uint32_t blocks, bg_egroup p, bool lone,
                                    bool coding)
{
    const dim3 grid(blocks, eg_block_rows(p, coding || lone ? 1 : MM_TOK, lone));
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
// integer path's down rows; true when it did. blocks: the grid's x, rows
// by the blocks' share of them (the tensor cores' kernel has its own).
template <int T, int NR>
static bool launch_expert_group(bg_gpu *g, uint32_t blocks, bg_egroup p, bool lone, bool coding)
{
    if constexpr (bg_int_path<T>::on) {
        if (!lone && p.xq && bg_mma && p.tail.kind == TAIL_NONE) {
            const dim3 grid(mma_blocks(p.n_out), eg_block_rows(p, EG_MMA_TILE, false));
            if (const uint32_t shared = mma_stage_bytes(T, NR, EG_MMA_NG))
                BG_LAUNCH(grid, MM_WARPS * 32, shared, g->stream,
                          k_expert_group_mma<T, NR, true>)(p);
            else
                BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream, k_expert_group_mma<T, NR, false>)(p);
            return false;
        }
        if (coding || p.xq) {
            if constexpr (NR == 1)
                if (p.tail.kind == TAIL_FFN_END &&
                    BG_OWN_COUNTERS_AT + blocks <= BG_GPU_COUNTER_BYTES / sizeof(int)) {
                    launch_expert_group_int<T, 1, TAIL_FFN_END>(g, blocks, p, lone, coding);
                    return true;
                }
            launch_expert_group_int<T, NR, TAIL_NONE>(g, blocks, p, lone, coding);
            return false;
        }
    }
    const dim3 grid(blocks, eg_block_rows(p, MM_TOK, lone));
    BG_LAUNCH(grid, MM_WARPS * 32, 0, g->stream,
              k_expert_group<T, NR, MM_TOK, EG_FLOAT, TAIL_NONE>)(p);
    return false;
}

// One grouped expert product (NR = 1, or gate and up fused when NR = 2 and
// both have the type) over x's n_x rows (xq_pre: coded, or NULL); the
// grid's rows by their share of the slots (eg_block_rows); then the tail's
// work where it goes along (*tail_done set, when given).
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
    p.lanes = row_lanes(coding || p.xq, p.n_in);
    const uint64_t rows = eg_rows(coding, nr);
    const uint32_t blocks = row_blocks((p.n_out + rows - 1) / rows, p.lanes);
    bool ok, done;
#define EG(T)                                                                                 \
    (done = nr == 2 ? launch_expert_group<T, 2>(g, blocks, p, lone, coding)                  \
                    : launch_expert_group<T, 1>(g, blocks, p, lone, coding))
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
    p.prefetch = bg_prefetch;
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
    down.prefetch_routed = bg_prefetch; // the gate/up launch came between
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
