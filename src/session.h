/* A session's state and scratch, shared by the per-architecture forward
 * passes in src/models/. Shapes are noted per buffer. */
#ifndef BG_SESSION_H
#define BG_SESSION_H

#include "matmul.h"
#include "planner.h"
#include "model.h"
#include "pool.h"

/* Each sequence has its own part of every buffer: sequence q's rows start
 * at q * n_ctx in the caches, its state at q times one sequence's size. */
typedef struct bg_layer_state {
    uint8_t *k_cache, *v_cache; /* attention: [n_seq][n_ctx] rows of n_head_kv * head_dim in the cache types */
    float *conv;              /* DeltaNet: [n_seq][conv_dim][conv_kernel - 1], oldest first */
    float *ssm;               /* DeltaNet: [n_seq][n_v_heads][state][state], row i = value dim */
} bg_layer_state;

struct bg_gpu_session;

struct brigade_session {
    const brigade_model *model;
    struct bg_gpu_session *gpu; /* the layers on the GPU; NULL: CPU only */
    const bg_hparams *hp;
    uint32_t n_ctx;                 /* positions per sequence */
    uint32_t n_seq;
    uint32_t *seq_past;             /* [n_seq] tokens each sequence holds */
    uint32_t *seq_count;            /* [n_seq] scratch: tokens per sequence in a batch */
    uint32_t type_k, type_v;        /* cache types */
    uint64_t k_row_bytes, v_row_bytes; /* one position of one layer */
    uint32_t k_rotation, v_rotation;   /* Hadamard size for quantized caches, 0: none */
    bg_pool *pool;
    bg_layer_state *layers;
    bg_session_plan plan;     /* what was allocated, buffer by buffer */
    uint64_t allocated_bytes; /* counted while allocating */
    /* Scratch for a micro-batch of up to n_ubatch tokens, sized at
     * creation; per-token rows are [n_ubatch][width]. */
    uint32_t n_ubatch;
    uint32_t n_tok; /* tokens in the micro-batch being evaluated */
    uint32_t *tok_seq, *tok_pos; /* [ub] each token's sequence and position */
    size_t q_width, a_width, ff_width;
    float *x;       /* [ub][n_embd] residual stream */
    float *xn;      /* [ub][n_embd] normed input of a block */
    float *out;     /* [ub][n_embd] block output */
    float *q;       /* [ub][q_width = max(2 * n_head * head_dim, conv_dim)] */
    float *kv;      /* [ub][2 * n_head_kv * head_dim] K then V before caching */
    float *attn;    /* [ub][a_width = max(n_head * head_dim, value_dim)] */
    float *gate;    /* [ub][a_width] output gates */
    float *router;  /* [ub][n_expert] */
    float *heads;   /* [ub][2 * n_v_heads] DeltaNet beta, then decay */
    float *ff_gate, *ff_up; /* [ub][ff_width = max(n_ff_exp, n_ff_shexp)] */
    float *gx, *gy;   /* [ub * n_expert_used][n_embd] rows gathered for one expert, its outputs */
    float *slot_out;  /* [ub][n_expert_used][n_embd] each routed expert's output */
    int32_t *chosen;  /* [ub][n_expert_used] routed experts */
    float *chosen_w;  /* [ub][n_expert_used] their weights */
    int32_t *members; /* [ub * n_expert_used] (token, rank) slots routed to one expert */
    void *xq;       /* converted activations for bg_matmul, or the micro-batch's queries */
    /* how each buffer above is released: free, or the device's for the
     * page-locked ones that cross to and from it */
    void (*buf_release[BG_BUF_COUNT])(void *);
};

/* One sequence's state in a layer. */
static inline uint8_t *bg_seq_k(const brigade_session *s, const bg_layer_state *st, uint32_t seq)
{
    return st->k_cache + (uint64_t)seq * s->plan.k_layer_bytes;
}
static inline uint8_t *bg_seq_v(const brigade_session *s, const bg_layer_state *st, uint32_t seq)
{
    return st->v_cache + (uint64_t)seq * s->plan.v_layer_bytes;
}
static inline float *bg_seq_conv(const brigade_session *s, const bg_layer_state *st, uint32_t seq)
{
    return st->conv + (uint64_t)seq * (s->plan.conv_layer_bytes / sizeof(float));
}
static inline float *bg_seq_ssm(const brigade_session *s, const bg_layer_state *st, uint32_t seq)
{
    return st->ssm + (uint64_t)seq * (s->plan.ssm_layer_bytes / sizeof(float));
}

/* Runs fn over n tasks, on the worker pool when there is enough work
 * (about `work` multiply-adds) to pay for waking it; the split never changes
 * the results. */
void bg_run_tasks(brigade_session *s, int64_t n, uint64_t work, bg_pool_fn fn, void *ctx);

/* One layer over the micro-batch (s->n_tok tokens, token i of sequence
 * s->tok_seq[i] at position s->tok_pos[i]): s->x is updated in place. */
void bg_qwen3moe_layer(brigade_session *s, uint32_t il);
void bg_qwen35moe_layer(brigade_session *s, uint32_t il);

/* Blocks shared by both architectures (src/models/blocks.c); they read
 * s->xn and write s->out for every token of the micro-batch. */
void bg_block_attention(brigade_session *s, uint32_t il, bool gated_q);
/* The mixture of experts: routing, the routed experts and the shared one.
 * Each routed expert runs once over all the tokens that chose it (its
 * weights read once per micro-batch); each token's expert outputs are kept
 * apart and summed in the order it ranked them, so the result does not
 * depend on the batch. */
void bg_block_moe(brigade_session *s, uint32_t il);
/* Only the routed experts, for the choice already in s->chosen and
 * s->chosen_w (made on the GPU): s->out = their weighted sum. */
void bg_block_moe_routed(brigade_session *s, uint32_t il);
/* y[i] = W x[i] for the micro-batch's tokens (rows of the given widths). */
void bg_project(brigade_session *s, const brigade_tensor_info *w, const float *x, size_t x_width,
                float *y, size_t y_width);
/* Residual: x += out for every token. */
void bg_add_residual(brigade_session *s);
/* The block input: xn = rmsnorm(x) * weight for every token. */
void bg_norm_tokens(brigade_session *s, const brigade_tensor_info *weight);

#endif
