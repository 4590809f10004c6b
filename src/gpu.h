/* The device interface of the GPU backend: a table of functions that
 * src/cuda/ implements with CUDA (make CUDA=1) and that src/gpu_stub.c
 * leaves empty (bg_gpu_api() returns NULL) in every other build. The
 * forward pass on the device (src/gpu_backend.c) is plain C over this
 * table, so no model code has an #ifdef and the host logic is compiled
 * and tested everywhere.
 *
 * Plain C types only: this header is included from C11 and from the CUDA
 * C++ of the .cu files in src/cuda/. Pointers named d_* are device addresses. Every
 * operation is enqueued on the backend's one stream and returns 0, or -1
 * with a message kept for bg_gpu_api.error(); kernel faults surface at the
 * next synchronizing call (download, sync). */
#ifndef BG_GPU_H
#define BG_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_gpu bg_gpu;

/* Attention for a micro-batch of at most BG_GPU_ATT_SPLIT_TOKENS tokens (a
 * decode step), given scratch for it, splits each head's n_pos positions
 * into consecutive ranges of BG_GPU_ATT_SPLIT_LEN(n_pos), at most
 * BG_GPU_ATT_SPLITS of them, so that a long context keeps the whole device
 * busy: each range runs the CPU's online softmax in position order (the
 * accumulator in f16 for an f16 V cache, else f32), and the ranges merge
 * in f32, in order: M = max M_r, w_r = exp(M_r - M), out = (sum acc_r w_r)
 * / (sum S_r w_r). Up to BG_GPU_ATT_SPLIT_MIN positions are one range, the
 * CPU's arithmetic exactly. The scratch: BG_GPU_ATT_SPLIT_BYTES, a counter
 * per (token, head), then each range's D + 2 floats. */
#define BG_GPU_ATT_SPLIT_TOKENS 16u
#define BG_GPU_ATT_SPLITS 16u
#define BG_GPU_ATT_SPLIT_MIN 128u
#define BG_GPU_ATT_SPLIT_LEN(n_pos)                                                          \
    ((n_pos) <= BG_GPU_ATT_SPLIT_MIN                                                         \
         ? (n_pos)                                                                           \
         : ((n_pos) + BG_GPU_ATT_SPLITS - 1) / BG_GPU_ATT_SPLITS > BG_GPU_ATT_SPLIT_MIN      \
               ? ((n_pos) + BG_GPU_ATT_SPLITS - 1) / BG_GPU_ATT_SPLITS                       \
               : BG_GPU_ATT_SPLIT_MIN)
#define BG_GPU_ATT_SPLIT_COUNTER_BYTES(n_tok, n_head) (((uint64_t)(n_tok) * (n_head) * 4 + 15) / 16 * 16)
#define BG_GPU_ATT_SPLIT_BYTES(n_tok, n_head, head_dim)                                      \
    ((n_tok) > BG_GPU_ATT_SPLIT_TOKENS                                                       \
         ? 0                                                                                 \
         : BG_GPU_ATT_SPLIT_COUNTER_BYTES(n_tok, n_head) +                                   \
               (uint64_t)(n_tok) * (n_head) * BG_GPU_ATT_SPLITS * ((uint64_t)(head_dim) + 2) * 4)

/* Attention over the cache for every token of a micro-batch. */
typedef struct bg_gpu_attn_args {
    uint32_t n_tok, n_head, n_head_kv, head_dim;
    uint32_t type_k, type_v;         /* GGUF ids: f32, f16, q8_0, q4_0 */
    uint64_t k_row_bytes, v_row_bytes; /* one position, all kv heads */
    uint64_t k_seq_bytes, v_seq_bytes; /* one sequence's cache */
    uint32_t k_rotation, v_rotation; /* Hadamard sizes, 0: none */
    bool gated;                      /* qwen35moe: q interleaved with its gate per head */
    bool seq_single;                 /* each token its sequence's only one (a decode step) */
    uint32_t rope_dims;
    float rope_base, eps, scale;
    size_t q_width, a_width, kv_width; /* row strides of q, attn/gate, kv (floats) */
} bg_gpu_attn_args;

/* The Gated DeltaNet recurrence for every token of a micro-batch, in
 * order (the tokens of one sequence in order, anywhere in the batch;
 * seq_runs when each sequence's tokens are also consecutive, as a decode
 * step's are). */
typedef struct bg_gpu_deltanet_args {
    uint32_t n_tok;
    bool seq_runs;
    uint32_t state, n_k_heads, n_v_heads, conv_kernel; /* S, Hk, Hv, K */
    float eps;
    uint64_t conv_seq_floats, ssm_seq_floats; /* one sequence's state */
    size_t q_width, a_width;
} bg_gpu_deltanet_args;

/* A mixture of experts over a micro-batch: routing and the routed experts
 * on the device, without a host round trip. The shared expert may join
 * them (its matrices set: the routed ones' types and n_ff) as one more
 * expert that every token uses, in slots n_tok * n_used + t. */
typedef struct bg_gpu_moe_args {
    uint32_t n_tok, n_embd, n_ff, n_expert, n_used;
    uint32_t type_gate, type_up, type_down;
    uint64_t gate_expert_bytes, up_expert_bytes, down_expert_bytes; /* one expert's matrix */
    const void *d_gate_shexp, *d_up_shexp, *d_down_shexp; /* NULL: none (or run apart) */
} bg_gpu_moe_args;

/* The MoE's grouping of n_slots (token, rank) slots by expert: offsets
 * [n_expert + 1], the count of experts chosen, their list [n_expert], the
 * offset of each chosen one's group [n_expert + 1] (the last: n_slots) and
 * its group's first slot [n_expert], then the slots sorted by expert
 * [n_slots]. The lists by rank among the experts chosen give a block of
 * the experts' products its expert, its slots and its first input at
 * once, instead of one after another. */
#define BG_GPU_MOE_GROUP_INTS(n_slots, n_expert) ((uint64_t)(n_slots) + 4 * (uint64_t)(n_expert) + 3)

/* Bytes of one token's activations coded for integer products over rows
 * of n_in: int8 codes, a float scale per 32, padded to 16 bytes.
 *
 * Coded rows travel with the rows they code: a producer (rmsnorm,
 * add_rmsnorm, expert_sum; attention and deltanet for their output) given
 * d_xq also codes its output rows there for K-quant weights (Q8_K; n a
 * multiple of 256), and a product of those rows (matmul, matmul_multi,
 * moe) given them uses them for K-quant weights instead of coding its
 * input again. NULL: none. */
#define BG_GPU_ACT_CODE_BYTES(n_in) (((uint64_t)(n_in) + (uint64_t)(n_in) / 8 + 15) / 16 * 16)

/* Experts per layer the device's routing handles (its registers). */
#define BG_GPU_MAX_EXPERTS 512u

/* The backend's own device counters, at the start of the scratch
 * (set_scratch): kernels whose last block to finish completes their work
 * (a residual and norm after a product, routing after the router's
 * product, the experts' sum after their down rows, the merge of a decode
 * step's attention ranges) count their blocks there instead of taking a
 * launch of their own. */
#define BG_GPU_COUNTER_BYTES 4096u

/* The end of a feed-forward half, per token t (rows of n): o = the sum
 * over ranks k of w[t][k] * slot[t][k], in rank order (n_used rows per
 * token; d_w NULL: one row, weight 1), plus sigmoid(shared_w . xn[t]) *
 * shared[t] when d_shared is set (the shared expert, gated); then x[t] +=
 * o and, when d_norm_w is set, xn[t] = rmsnorm(x[t]) * norm_w (the next
 * half-layer's input), coded into d_xq when set. One pass instead of
 * four. */
typedef struct bg_gpu_ffn_end {
    float *d_x, *d_xn;
    const float *d_w;                   /* [n_tok][n_used], or NULL */
    const float *d_shared, *d_shared_w; /* NULL: no shared expert */
    const float *d_norm_w;              /* NULL: no next norm */
    float eps;
    uint8_t *d_xq;
} bg_gpu_ffn_end;

/* One of several products of the same input (matmul_multi). */
#define BG_GPU_MAX_PROJ 4
typedef struct bg_gpu_proj {
    uint32_t type;      /* GGUF id */
    const void *d_w;    /* n_out rows of n_in */
    uint64_t n_out;
    float *d_y;
    size_t y_stride;
} bg_gpu_proj;

typedef struct bg_gpu_api {
    /* Starts on device `device`: a context, a stream and the library
     * handles. desc receives a description ("NVIDIA H200, sm_90, ..."). */
    int (*init)(int device, bg_gpu **out, char *desc, size_t desc_cap, char *msg,
                size_t msg_cap);
    void (*destroy)(bg_gpu *g);
    const char *(*error)(const bg_gpu *g);
    int (*mem_info)(bg_gpu *g, uint64_t *free_bytes, uint64_t *total_bytes);
    /* The one arena (and its release in destroy). */
    int (*alloc)(bg_gpu *g, uint64_t bytes, void **d_out);
    /* Enqueues the copy. A page-locked src is read when the stream gets
     * to it, so it may change only after wait_uploads. */
    int (*upload)(bg_gpu *g, void *d_dst, const void *src, uint64_t bytes);
    /* Returns once every upload enqueued so far has read its source. */
    int (*wait_uploads)(bg_gpu *g);
    /* Waits for the stream, then copies. */
    int (*download)(bg_gpu *g, void *dst, const void *d_src, uint64_t bytes);
    /* Enqueues the copy: dst holds it after the next sync or download
     * (without waiting on each, when dst is page-locked). */
    int (*download_async)(bg_gpu *g, void *dst, const void *d_src, uint64_t bytes);
    int (*zero)(bg_gpu *g, void *d_dst, uint64_t bytes);
    /* Host memory the device copies to and from at full speed (page-
     * locked), which host_free releases (also after destroy). Only a
     * speed-up: a caller may go on with plain memory without it. */
    int (*host_alloc)(bg_gpu *g, uint64_t bytes, void **out);
    void (*host_free)(void *host);
    /* Device memory (inside the arena): BG_GPU_COUNTER_BYTES of counters
     * first (zeroed here), then what the products may use for the
     * activations they code for integer dot products; a product whose
     * coded activations would not fit takes the float path instead. */
    int (*set_scratch)(bg_gpu *g, void *d_scratch, uint64_t bytes);
    int (*sync)(bg_gpu *g);
    /* Whether the kernels handle a weight type (GGUF id). */
    bool (*supports)(uint32_t type);

    /* y[t][o] = sum_i W[o][i] x[t][i] for n_tok tokens; W has n_out rows
     * of n_in in `type`. */
    int (*matmul)(bg_gpu *g, uint32_t type, const void *d_w, uint64_t n_in, uint64_t n_out,
                  const float *d_x, size_t x_stride, const uint8_t *d_xq, float *d_y,
                  size_t y_stride, uint32_t n_tok);
    /* y_k = W_k x for n_proj <= BG_GPU_MAX_PROJ products of one input (a
     * layer's q, k, v, or DeltaNet's in-projections): one launch over all
     * their rows, the activations coded once, where the types allow; one
     * product after another otherwise. */
    int (*matmul_multi)(bg_gpu *g, const bg_gpu_proj *proj, uint32_t n_proj, uint64_t n_in,
                        const float *d_x, size_t x_stride, const uint8_t *d_xq,
                        uint32_t n_tok);
    /* h[t][o] = silu(g) * u, g = Wg x[t] and u = Wu x[t] (n_out rows of
     * n_in each, both in `type`): the gate and up rows read in one pass. */
    int (*matmul_swiglu)(bg_gpu *g, uint32_t type, const void *d_wg, const void *d_wu,
                         uint64_t n_in, uint64_t n_out, const float *d_x, size_t x_stride,
                         float *d_h, size_t h_stride, uint32_t n_tok);
    /* y = x / sqrt(mean(x^2) + eps) * w (w may be NULL), rows of n. */
    int (*rmsnorm)(bg_gpu *g, float *d_y, size_t y_stride, const float *d_x, size_t x_stride,
                   const float *d_w, uint32_t n, uint32_t n_rows, float eps, uint8_t *d_yq);
    /* A residual and the next norm in one pass over rows of n: x += y,
     * then xn = rmsnorm(x) * w (contiguous rows). */
    int (*add_rmsnorm)(bg_gpu *g, float *d_x, const float *d_y, float *d_xn, const float *d_w,
                       uint32_t n, uint32_t n_rows, float eps, uint8_t *d_xq);
    /* The end of a mixer: y = W a (p: W, and y in rows of n = p->n_out),
     * then add_rmsnorm(x, y, xn, norm_w, n, n_tok, eps, xq); one launch
     * for a decode step. */
    int (*matmul_add_rmsnorm)(bg_gpu *g, const bg_gpu_proj *p, uint64_t n_in, const float *d_a,
                              size_t a_stride, const uint8_t *d_aq, uint32_t n_tok, float *d_x,
                              float *d_xn, const float *d_norm_w, float eps, uint8_t *d_xq);
    /* Attention: split, QK-norm, rope, rotation, cache store, then each
     * token over its sequence's positions; output (gated) into d_attn, and
     * coded for the out projection into d_attn_q when set (head_dim a
     * multiple of 256). d_split: BG_GPU_ATT_SPLIT_BYTES of scratch for a
     * decode step's split positions, or NULL (no split). */
    int (*attention)(bg_gpu *g, const bg_gpu_attn_args *a, float *d_q, float *d_kv,
                     float *d_gate, float *d_attn, const float *d_q_norm, const float *d_k_norm,
                     uint8_t *d_k_cache, uint8_t *d_v_cache, const uint32_t *d_tok_seq,
                     const uint32_t *d_tok_pos, uint8_t *d_attn_q, void *d_split);
    /* DeltaNet: beta/decay from the projections, convolution, l2 norms,
     * the state update and the gated norm; output into d_attn, and coded
     * for the out projection into d_attn_q when set (Hv * S a multiple of
     * 256). */
    int (*deltanet)(bg_gpu *g, const bg_gpu_deltanet_args *a, float *d_qkv, const float *d_z,
                    float *d_heads, const float *d_dt, const float *d_a,
                    const float *d_conv_w, const float *d_norm_w, float *d_conv,
                    float *d_ssm, float *d_attn, uint8_t *d_attn_q,
                    const uint32_t *d_tok_seq);
    /* Routing: the router's product (its n_out = n_expert logits per
     * token into router->d_y, left as scratch) of x's rows of n_in (xq:
     * coded, or NULL), softmax over each token's logits, the n_used most
     * probable experts kept (the earlier expert wins a tie; n_expert at
     * most BG_GPU_MAX_EXPERTS) and their probabilities renormalized (sum
     * in double, kept off zero as blocks.c does): d_chosen[t][k] and
     * d_chosen_w[t][k] in rank order; then, unless d_groups is NULL, the
     * (token, rank) slots grouped by expert for moe (BG_GPU_MOE_GROUP_INTS
     * int32s: offsets, the experts chosen, the slots sorted by expert). */
    int (*route)(bg_gpu *g, const bg_gpu_proj *router, uint64_t n_in, const float *d_x,
                 const uint8_t *d_xq, uint32_t n_tok, uint32_t n_used, int32_t *d_chosen,
                 float *d_chosen_w, int32_t *d_groups);
    /* The routed experts for route's choice, over route's grouping
     * (d_groups), and the shared expert when the args carry it: each
     * expert's rows read once per group of tokens, gate and up fused with
     * SiLU into d_h ([slot][n_ff]), down into d_slot_out ([slot][n_embd]);
     * then, given `end`, the feed-forward half's end (expert_sum over
     * d_slot_out; NULL: the caller's). */
    int (*moe)(bg_gpu *g, const bg_gpu_moe_args *a, const float *d_xn, const uint8_t *d_xq,
               const void *d_gate, const void *d_up, const void *d_down,
               const int32_t *d_groups, float *d_h, float *d_slot_out,
               const bg_gpu_ffn_end *end);
    /* The end of a feed-forward half (bg_gpu_ffn_end) over slot rows of
     * n, n_used per token (one when e->d_w is NULL). */
    int (*expert_sum)(bg_gpu *g, const bg_gpu_ffn_end *e, const float *d_slot, uint32_t n_used,
                      uint32_t n, uint32_t n_tok);
    /* h = silu(g) * u, rows of n at stride. */
    int (*silu_mul)(bg_gpu *g, float *d_g, const float *d_u, uint32_t n, size_t stride,
                    uint32_t n_tok);

    /* CUDA graphs for decode: what is enqueued between begin and end is
     * captured under `key` (the batch size) and replayed on later calls
     * with the same key. begin returns 0 with *replay set (a graph exists:
     * enqueue nothing, end launches it) or clear (capturing: enqueue the
     * step, end instantiates and launches it); 1 if graphs are unavailable
     * (nothing captured: run eagerly, do not call end); -1 on error. end
     * returns 0, or -1 on error; after a capture *n_nodes is the graph's
     * size (its kernels and copies), after a replay it is left alone. */
    int (*graph_begin)(bg_gpu *g, uint64_t key, bool *replay);
    int (*graph_end)(bg_gpu *g, uint64_t key, uint32_t *n_nodes);
} bg_gpu_api;

/* The CUDA implementation, or NULL in a build without CUDA=1. */
const bg_gpu_api *bg_gpu_api_get(void);

#ifdef __cplusplus
}
#endif

#endif
