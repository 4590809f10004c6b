/* Blocks both Qwen MoE architectures share: grouped-query attention with
 * QK-norm and rotary embedding, and the routed mixture of experts. Each
 * works on a micro-batch; a token's arithmetic does not depend on the
 * batch it is in, so prefill and decode give the same results. */
#include <math.h>
#include <string.h>

#include "fp16.h"
#include "kernels.h"
#include "ops.h"
#include "quant.h"
#include "session.h"
#include "types.h"

void bg_project(brigade_session *s, const brigade_tensor_info *w, const float *x, size_t x_width,
                float *y, size_t y_width)
{
    bg_matrix m = bg_matrix_of(w, 0);
    bg_matmul(s->pool, &m, x, x_width, y, y_width, s->n_tok, s->xq);
}

void bg_add_residual(brigade_session *s)
{
    size_t n = (size_t)s->n_tok * s->hp->n_embd;
    for (size_t i = 0; i < n; i++)
        s->x[i] += s->out[i];
}

void bg_norm_tokens(brigade_session *s, const brigade_tensor_info *weight)
{
    const size_t n = s->hp->n_embd;
    for (uint32_t i = 0; i < s->n_tok; i++)
        bg_rmsnorm(s->xn + i * n, s->x + i * n, weight->data, n, s->hp->rms_eps);
}

/* Attention over one micro-batch, split over the worker pool in three
 * passes: each token's query, key and value prepared (and K, V cached),
 * then each (token, head) pair attended, then each token's output rotated
 * and gated. A pair's arithmetic is the same in every split. */
typedef struct attn_job {
    brigade_session *s;
    const bg_layer *L;
    const bg_layer_state *st;
    bool gated_q;
    float scale;
    int64_t heads_per_task; /* query heads of one KV head an attend_task takes */
    bool f32_acc;           /* attend_heads_f32_acc: a micro-batch on f16 caches */
    uint64_t q_head_bytes, k_head_bytes, v_head_bytes; /* one head of a query (K's dot format), K, V */
} attn_job;


/* Positions up to which f32 caches take llama.cpp's plain attention
 * (attend_head_f32): its two rows of scratch live on the stack. */
#define MAX_PLAIN_POSITIONS 32768

/* One head's attention over positions 0..pos with f32 K and V caches, as
 * llama.cpp computes it (it runs no flash attention on f32 caches): scores
 * q . k, the positions padded to a multiple of 64 with -inf (its masked,
 * padded cache), softmax with the scale, then each output dimension the
 * dot of its V column with the probabilities. */
static void attend_head_f32(const attn_job *j, const uint8_t *k_cache, const uint8_t *v_cache,
                            const float *q, int64_t kvh, uint32_t pos, float *out)
{
    const brigade_session *s = j->s;
    const int64_t D = s->hp->head_dim, n = (int64_t)pos + 1, npad = (n + 63) & ~(int64_t)63;
    float p[MAX_PLAIN_POSITIONS], col[MAX_PLAIN_POSITIONS];
    for (int64_t t = 0; t < n; t++)
        p[t] = bg_dot_f32((const float *)(const void *)(k_cache + t * s->k_row_bytes) + kvh * D, q, D);
    for (int64_t t = n; t < npad; t++)
        p[t] = -INFINITY, col[t] = 0.0f;
    bg_softmax(p, npad, j->scale);
    for (int64_t d = 0; d < D; d++) {
        for (int64_t t = 0; t < n; t++)
            col[t] = ((const float *)(const void *)(v_cache + t * s->v_row_bytes))[kvh * D + d];
        out[d] = bg_dot_f32(col, p, npad);
    }
}

/* Floats of per-head scratch attend_heads keeps on its stack: the query
 * heads of a task (at most ATTN_GROUP of them) times head_dim fit in it. */
#define ATTN_GROUP 8
_Static_assert(ATTN_GROUP <= BG_ATTN_MAX_HEADS, "attention's block passes take a task's heads");
#define ATTN_GROUP_FLOATS 8192

/* Positions attention takes at a time: a block's scores and its V rows
 * (16 KiB of f16 at head_dim 128) stay in L1 between the two passes. */
#define ATTN_BLOCK 32

/* Floats of dequantized V rows a block of a quantized V cache keeps on
 * the stack (fewer positions a block past head_dim 256). */
#define ATTN_VROW_FLOATS 8192

/* Each head's weighted sum of V rows divided by its sum of weights (0
 * where nothing weighed), as llama.cpp's flash attention ends. */
static void divide_by_sums(float *out, int nh, int64_t D, const float *S)
{
    for (int h = 0; h < nh; h++) {
        const float inv = S[h] == 0.0f ? 0.0f : 1.0f / S[h];
        for (int64_t i = 0; i < D; i++)
            out[h * D + i] *= inv;
    }
}

/* Micro-batches of this many tokens or more attend f16 caches as
 * llama.cpp's CPU flash attention does them (its tiled path, from
 * GGML_FA_TILE_Q query rows): attend_heads_f32_acc. */
#define ATTN_F32_ACC_MIN_TOKENS 64

/* Query heads of one token on f16 caches, with the arithmetic of
 * llama.cpp's tiled CPU flash attention: f32 queries, each block's scores
 * scaled, the running max moved once a block (the accumulator and sum
 * rescaled by exp(old - new)), exp(score - max) over the block with ggml's
 * vector exp and its sum in double, and V accumulated in f32 (not in f16
 * as one token at a time). q is the token's f32 query heads, head after
 * head. */
static void attend_heads_f32_acc(const attn_job *j, const uint8_t *k_cache, const uint8_t *v_cache,
                                 const float *q, int nh, int64_t kvh, uint32_t pos, float *out)
{
    const brigade_session *s = j->s;
    const int64_t D = s->hp->head_dim;
    float p[ATTN_GROUP * ATTN_BLOCK];
    float S[ATTN_GROUP], M[ATTN_GROUP];
    for (int h = 0; h < nh; h++)
        S[h] = 0.0f, M[h] = -INFINITY;
    memset(out, 0, (size_t)(nh * D) * sizeof *out);
    const uint64_t n = (uint64_t)pos + 1;
    for (uint64_t t0 = 0; t0 < n; t0 += ATTN_BLOCK) {
        const int nt = n - t0 < ATTN_BLOCK ? (int)(n - t0) : ATTN_BLOCK;
        const uint8_t *kt = k_cache + t0 * s->k_row_bytes + kvh * j->k_head_bytes;
        const uint8_t *vt = v_cache + t0 * s->v_row_bytes + kvh * j->v_head_bytes;
        bg_attn_scores_f16(D, (const uint16_t *)(const void *)kt, s->k_row_bytes, nt, q, nh, p);
        for (int h = 0; h < nh; h++) {
            float *row = p + h * nt, block_max = -INFINITY;
            for (int t = 0; t < nt; t++) {
                row[t] *= j->scale;
                block_max = row[t] > block_max ? row[t] : block_max;
            }
            if (block_max == -INFINITY) { /* no weight here: scores overflowed */
                memset(row, 0, (size_t)nt * sizeof *row);
                continue;
            }
            const float m = fmaxf(M[h], block_max);
            if (m > M[h]) {
                const float ms = expf(M[h] - m);
                for (int64_t i = 0; i < D; i++)
                    out[h * D + i] *= ms;
                S[h] *= ms;
            }
            M[h] = m;
            S[h] = (float)((double)S[h] + bg_exp_sum(row, row, m, nt));
        }
        bg_attn_accumulate_f32(D, out, nh, (const uint16_t *)(const void *)vt, s->v_row_bytes, nt, p);
    }
    divide_by_sums(out, nh, D, S);
}

/* Query heads h0 .. h0 + nh - 1 of one token, all reading KV head kvh:
 * each one's attention over positions 0..pos of a sequence's cache, with
 * the arithmetic of llama.cpp's CPU flash attention one query at a time:
 * the query in the K type's dot format (qx, head after head), scores
 * s = (q . k) * scale, an online softmax position by position, and V
 * accumulated in f32, or in f16 for an f16 V cache. It goes by blocks of
 * positions: every score of the block first (f16 K: bg_attn_scores_f16,
 * the K row widened once for all heads, which is bitwise the f16 dot;
 * quantized K: the multi-row dot where there is one), then each head's
 * softmax steps in position order with their exps called together, then
 * V (f16: bg_attn_accumulate_f16; quantized: dequantized once a block,
 * bg_attn_accumulate_f32_rows). Each head gets the operations, values and
 * order of the position-by-position loop, so its bits. */
static void attend_heads(const attn_job *j, const uint8_t *k_cache, const uint8_t *v_cache,
                         const uint8_t *qx, int nh, int64_t kvh, uint32_t pos, float *out)
{
    const brigade_session *s = j->s;
    const int64_t D = s->hp->head_dim;
    if (s->type_k == BG_TYPE_F32 && s->type_v == BG_TYPE_F32 && pos < MAX_PLAIN_POSITIONS) {
        for (int h = 0; h < nh; h++)
            attend_head_f32(j, k_cache, v_cache,
                            (const float *)(const void *)(qx + h * j->q_head_bytes), kvh, pos,
                            out + h * D);
        return;
    }
    const bool f16_k = s->type_k == BG_TYPE_F16, f16_v = s->type_v == BG_TYPE_F16;
    const bg_dot_fn kdot = bg_kernel_dot((bg_type)s->type_k);
    const bg_dot_multi_fn kdot_multi = bg_kernel_dot_multi((bg_type)s->type_k);
    const bg_quant_ops *vops = bg_quant_ops_get((bg_type)s->type_v);
    int64_t block = ATTN_BLOCK;
    if (!f16_v && block * D > ATTN_VROW_FLOATS)
        block = ATTN_VROW_FLOATS / D > 0 ? ATTN_VROW_FLOATS / D : 1;
    float qf[ATTN_GROUP_FLOATS], sc[ATTN_GROUP * ATTN_BLOCK], vrows[ATTN_VROW_FLOATS];
    float ms[ATTN_BLOCK * ATTN_GROUP], vs[ATTN_BLOCK * ATTN_GROUP], ex[ATTN_BLOCK * ATTN_GROUP];
    bool new_max[ATTN_BLOCK * ATTN_GROUP];
    uint8_t rescale[ATTN_BLOCK];
    uint16_t acc16[ATTN_GROUP_FLOATS];
    float S[ATTN_GROUP], M[ATTN_GROUP];
    for (int h = 0; h < nh; h++) {
        S[h] = 0.0f, M[h] = -INFINITY;
        if (f16_k)
            bg_vec_f16_to_f32(D, qf + h * D, (const uint16_t *)(const void *)(qx + h * j->q_head_bytes));
    }
    if (f16_v)
        memset(acc16, 0, (size_t)(nh * D) * sizeof *acc16);
    else
        memset(out, 0, (size_t)(nh * D) * sizeof *out);
    const uint64_t n = (uint64_t)pos + 1;
    for (uint64_t t0 = 0; t0 < n; t0 += (uint64_t)block) {
        const int nt = n - t0 < (uint64_t)block ? (int)(n - t0) : (int)block;
        const uint8_t *kt = k_cache + t0 * s->k_row_bytes + kvh * j->k_head_bytes;
        const uint8_t *vt = v_cache + t0 * s->v_row_bytes + kvh * j->v_head_bytes;
        if (f16_k) {
            bg_attn_scores_f16(D, (const uint16_t *)(const void *)kt, s->k_row_bytes, nt, qf, nh, sc);
        } else {
            for (int t = 0; t < nt; t++) {
                const uint8_t *krow = kt + t * s->k_row_bytes;
                for (int h = 0; h < nh; h += BG_DOT_MULTI) {
                    const int na = nh - h < BG_DOT_MULTI ? nh - h : BG_DOT_MULTI;
                    float d4[BG_DOT_MULTI];
                    if (kdot_multi)
                        kdot_multi(D, krow, qx + h * j->q_head_bytes, j->q_head_bytes, na, d4);
                    else
                        for (int a = 0; a < na; a++)
                            d4[a] = kdot(D, krow, qx + (h + a) * j->q_head_bytes);
                    for (int a = 0; a < na; a++)
                        sc[(h + a) * nt + t] = d4[a];
                }
            }
        }
        /* the running max: a new one rescales by exp(old - new), else the
         * position weighs exp(score - max) */
        memset(rescale, 0, (size_t)nt);
        for (int h = 0; h < nh; h++)
            for (int t = 0; t < nt; t++) {
                const float x = sc[h * nt + t] * j->scale;
                const int i = t * nh + h;
                new_max[i] = x > M[h];
                if (new_max[i]) {
                    ex[i] = M[h] - x;
                    M[h] = x;
                    rescale[t] = 1;
                } else {
                    ex[i] = x - M[h];
                }
            }
        for (int i = 0; i < nt * nh; i++)
            ex[i] = expf(ex[i]);
        for (int t = 0; t < nt; t++)
            for (int h = 0; h < nh; h++) {
                const int i = t * nh + h;
                ms[i] = new_max[i] ? ex[i] : 1.0f;
                vs[i] = new_max[i] ? 1.0f : ex[i];
                S[h] = S[h] * ms[i] + vs[i];
            }
        if (f16_v) {
            bg_attn_accumulate_f16(D, acc16, nh, (const uint16_t *)(const void *)vt, s->v_row_bytes,
                                   nt, ms, vs, rescale);
        } else {
            for (int t = 0; t < nt; t++)
                vops->dequantize(vt + t * s->v_row_bytes, vrows + t * D, D);
            bg_attn_accumulate_f32_rows(D, out, nh, vrows, nt, ms, vs, rescale);
        }
    }
    if (f16_v)
        bg_vec_f16_to_f32(nh * D, out, acc16);
    divide_by_sums(out, nh, D, S);
}

/* Prepares token i's query, key and value and stores K and V in the
 * cache: q split from its gate, QK-norm, rope at pos, and for quantized
 * caches the Hadamard rotation llama.cpp applies (it spreads outliers
 * before rounding; q and k rotate alike so q.k is kept, V's rotation is
 * undone on the output). Unless the micro-batch attends with f32
 * queries (f32_acc), the query's heads are then converted to K's dot
 * format, as llama.cpp converts them once per row, into token i's part of
 * s->xq. */
static void prepare_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const attn_job *j = ctx;
    brigade_session *s = j->s;
    const bg_layer *L = j->L;
    const bg_hparams *hp = s->hp;
    const uint32_t i = (uint32_t)task;
    const int64_t D = hp->head_dim, H = hp->n_head, kv_dim = (int64_t)hp->n_head_kv * D;
    const uint32_t pos = s->tok_pos[i], seq = s->tok_seq[i];
    float *q = s->q + i * s->q_width, *gate = s->gate + i * s->a_width;
    float *k = s->kv + (size_t)i * 2 * kv_dim, *v = k + kv_dim;
    if (j->gated_q) {
        /* the projection interleaves per head [query | gate] */
        for (int64_t h = 0; h < H; h++) {
            memcpy(gate + h * D, q + (2 * h + 1) * D, (size_t)D * sizeof(float));
            memmove(q + h * D, q + 2 * h * D, (size_t)D * sizeof(float));
        }
    }
    bg_rmsnorm_rows(q, L->t[BG_ROLE_ATTN_Q_NORM]->data, D, H, hp->rms_eps);
    bg_rmsnorm_rows(k, L->t[BG_ROLE_ATTN_K_NORM]->data, D, hp->n_head_kv, hp->rms_eps);
    bg_rope_neox(q, H, D, hp->rope_dims, pos, hp->rope_freq_base);
    bg_rope_neox(k, hp->n_head_kv, D, hp->rope_dims, pos, hp->rope_freq_base);
    if (s->k_rotation) {
        bg_hadamard(q, H * D, s->k_rotation);
        bg_hadamard(k, kv_dim, s->k_rotation);
    }
    if (s->v_rotation)
        bg_hadamard(v, kv_dim, s->v_rotation);
    /* converted as llama.cpp's copy into its cache converts */
    bg_quant_ops_get((bg_type)s->type_k)->quantize_activations(k, bg_seq_k(s, j->st, seq) + pos * s->k_row_bytes, kv_dim);
    bg_quant_ops_get((bg_type)s->type_v)->quantize_activations(v, bg_seq_v(s, j->st, seq) + pos * s->v_row_bytes, kv_dim);
    if (j->f32_acc) /* attends with the f32 query */
        return;
    const bg_quant_ops *qops = bg_quant_ops_get(bg_quant_ops_get((bg_type)s->type_k)->dot_type);
    uint8_t *qx = (uint8_t *)s->xq + (uint64_t)i * H * j->q_head_bytes;
    for (int64_t h = 0; h < H; h++)
        qops->quantize_activations(q + h * D, qx + h * j->q_head_bytes, D);
}

/* Query heads of one KV head a task takes: all of them where the scratch
 * holds them, fewer where that would leave the pool's threads short of
 * tasks (a decode step's few tokens over a long context). */
static int64_t attn_heads_per_task(const brigade_session *s)
{
    const bg_hparams *hp = s->hp;
    const int64_t group = hp->n_head / hp->n_head_kv;
    const int64_t tasks_wanted = 4 * (int64_t)(s->pool ? bg_pool_threads(s->pool) : 1);
    int64_t per = ATTN_GROUP_FLOATS / hp->head_dim;
    per = per < ATTN_GROUP ? per : ATTN_GROUP;
    per = per < group ? per : group;
    while (per > 1 && (group % per || (int64_t)s->n_tok * hp->n_head / per < tasks_wanted))
        per--;
    return per;
}

/* Task = (token * n_head + head) / heads per task. */
static void attend_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const attn_job *j = ctx;
    const brigade_session *s = j->s;
    const int64_t H = s->hp->n_head, D = s->hp->head_dim, group = H / s->hp->n_head_kv;
    const int64_t per = j->heads_per_task, first = task * per;
    const uint32_t i = (uint32_t)(first / H);
    const int64_t h = first % H;
    if (j->f32_acc) {
        attend_heads_f32_acc(j, bg_seq_k(s, j->st, s->tok_seq[i]), bg_seq_v(s, j->st, s->tok_seq[i]),
                             s->q + i * s->q_width + h * D, (int)per, h / group, s->tok_pos[i],
                             s->attn + i * s->a_width + h * D);
        return;
    }
    const uint8_t *qx = (const uint8_t *)s->xq + ((uint64_t)i * H + h) * j->q_head_bytes;
    attend_heads(j, bg_seq_k(s, j->st, s->tok_seq[i]), bg_seq_v(s, j->st, s->tok_seq[i]), qx,
                 (int)per, h / group, s->tok_pos[i], s->attn + i * s->a_width + h * D);
}

/* qwen35moe's output is gated by sigmoid(gate); qwen3moe's is plain. */
static void finish_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const attn_job *j = ctx;
    const brigade_session *s = j->s;
    const int64_t HD = (int64_t)s->hp->n_head * s->hp->head_dim;
    float *attn = s->attn + task * s->a_width;
    if (s->v_rotation)
        bg_hadamard(attn, HD, s->v_rotation);
    if (j->gated_q) {
        const float *gate = s->gate + task * s->a_width;
        for (int64_t e = 0; e < HD; e++)
            attn[e] *= bg_sigmoid(gate[e]);
    }
}

void bg_run_tasks(brigade_session *s, int64_t n, uint64_t work, bg_pool_fn fn, void *ctx)
{
    if (s->pool && n > 1 && work >= (1u << 15))
        bg_pool_run(s->pool, n, fn, ctx);
    else
        for (int64_t t = 0; t < n; t++)
            fn(ctx, t, 0);
}

/* Causal attention for the micro-batch: every token's K and V are cached
 * first, then each token attends to its sequence's positions up to its own. */
void bg_block_attention(brigade_session *s, uint32_t il, bool gated_q)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const int64_t D = hp->head_dim, H = hp->n_head, kv_dim = (int64_t)hp->n_head_kv * D;
    const size_t kv_width = 2 * (size_t)kv_dim;

    bg_project(s, L->t[BG_ROLE_ATTN_Q], s->xn, hp->n_embd, s->q, s->q_width);
    bg_project(s, L->t[BG_ROLE_ATTN_K], s->xn, hp->n_embd, s->kv, kv_width);
    bg_project(s, L->t[BG_ROLE_ATTN_V], s->xn, hp->n_embd, s->kv + kv_dim, kv_width);

    const bool f32_acc = s->type_k == BG_TYPE_F16 && s->type_v == BG_TYPE_F16 &&
                         s->n_tok >= ATTN_F32_ACC_MIN_TOKENS;
    attn_job j = {s, L, &s->layers[il], gated_q, 1.0f / sqrtf((float)D), attn_heads_per_task(s),
                  f32_acc, 0, 0, 0};
    bg_type_row_bytes(bg_quant_ops_get((bg_type)s->type_k)->dot_type, (uint64_t)D, &j.q_head_bytes);
    bg_type_row_bytes((bg_type)s->type_k, (uint64_t)D, &j.k_head_bytes);
    bg_type_row_bytes((bg_type)s->type_v, (uint64_t)D, &j.v_head_bytes);
    uint64_t span = 0; /* positions attended, all tokens together */
    for (uint32_t i = 0; i < s->n_tok; i++)
        span += s->tok_pos[i] + 1;
    const uint64_t token_work = (uint64_t)(H + kv_dim) * D;
    bg_run_tasks(s, s->n_tok, s->n_tok * token_work, prepare_task, &j);
    bg_run_tasks(s, (int64_t)s->n_tok * H / j.heads_per_task, span * H * D, attend_task, &j);
    if (s->v_rotation || gated_q)
        bg_run_tasks(s, s->n_tok, s->n_tok * token_work, finish_task, &j);
    bg_project(s, L->t[BG_ROLE_ATTN_OUT], s->attn, s->a_width, s->out, hp->n_embd);
}

/* down(silu(gate x) * up(x)) for n gathered rows of gx, into gy. expert -1
 * is the shared expert. */
static void expert_ffn(brigade_session *s, const bg_layer *L, int64_t expert, uint32_t n)
{
    bool shared = expert < 0;
    const brigade_tensor_info *g = L->t[shared ? BG_ROLE_FFN_GATE_SHEXP : BG_ROLE_FFN_GATE_EXPS];
    const brigade_tensor_info *u = L->t[shared ? BG_ROLE_FFN_UP_SHEXP : BG_ROLE_FFN_UP_EXPS];
    const brigade_tensor_info *d = L->t[shared ? BG_ROLE_FFN_DOWN_SHEXP : BG_ROLE_FFN_DOWN_EXPS];
    uint64_t e = shared ? 0 : (uint64_t)expert;
    const size_t n_embd = s->hp->n_embd, w = s->ff_width;
    bg_matrix mg = bg_matrix_of(g, e), mu = bg_matrix_of(u, e), md = bg_matrix_of(d, e);
    if (mg.type == mu.type && mg.n_in == mu.n_in && mg.n_out == mu.n_out) {
        bg_matmul_pair(s->pool, &mg, &mu, s->gx, n_embd, s->ff_gate, s->ff_up, w, n, s->xq);
    } else {
        bg_matmul(s->pool, &mg, s->gx, n_embd, s->ff_gate, w, n, s->xq);
        bg_matmul(s->pool, &mu, s->gx, n_embd, s->ff_up, w, n, s->xq);
    }
    for (uint32_t r = 0; r < n; r++)
        bg_swiglu_row(s->ff_gate + r * w, s->ff_gate + r * w, s->ff_up + r * w,
                      (int64_t)mg.n_out);
    bg_matmul(s->pool, &md, s->ff_gate, w, s->gy, n_embd, n, s->xq);
}

/* Softmax routing over all experts, the top k kept and renormalized; the
 * earlier expert wins a tie. An f32 router (as converters write it) takes
 * one bg_dot_f32 per expert, as llama.cpp's single-token product does. */
typedef struct route_job {
    brigade_session *s;
    const bg_layer *L;
} route_job;

/* Tokens routed together: each router row is read once for all of them. */
enum { ROUTE_TOKENS_PER_TASK = 4 };

/* Token i's expert choice and weights from its router logits. */
static void route_token(brigade_session *s, size_t i)
{
    const bg_hparams *hp = s->hp;
    float *p = s->router + i * hp->n_expert;
    int32_t *chosen = s->chosen + i * hp->n_expert_used;
    float *w = s->chosen_w + i * hp->n_expert_used;
    bg_softmax(p, hp->n_expert, 1.0f);
    double sum = 0; /* in double, rounded once, as ggml's sum_rows */
    for (uint32_t k = 0; k < hp->n_expert_used; k++) {
        int32_t best = -1;
        for (uint32_t e = 0; e < hp->n_expert; e++) {
            bool taken = false;
            for (uint32_t j = 0; j < k; j++)
                taken |= chosen[j] == (int32_t)e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = (int32_t)e;
        }
        chosen[k] = best;
        sum += (double)p[best];
    }
    /* llama.cpp keeps the divisor off zero: at least f16's smallest normal */
    const float total = fmaxf((float)sum, 6.103515625e-5f);
    for (uint32_t k = 0; k < hp->n_expert_used; k++)
        w[k] = p[chosen[k]] / total;
}

/* Routes tokens ROUTE_TOKENS_PER_TASK * task on (on the worker pool). */
static void route_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const route_job *j = ctx;
    brigade_session *s = j->s;
    const bg_hparams *hp = s->hp;
    const size_t i0 = (size_t)task * ROUTE_TOKENS_PER_TASK;
    const int nt = s->n_tok - i0 < ROUTE_TOKENS_PER_TASK ? (int)(s->n_tok - i0) : ROUTE_TOKENS_PER_TASK;
    const brigade_tensor_info *gate = j->L->t[BG_ROLE_FFN_GATE_INP];
    if (gate->type == BG_TYPE_F32)
        for (uint32_t e = 0; e < hp->n_expert; e++) {
            float logit[ROUTE_TOKENS_PER_TASK];
            bg_dot_f32_multi((const float *)gate->data + (size_t)e * hp->n_embd,
                             s->xn + i0 * hp->n_embd, hp->n_embd, nt, (int64_t)hp->n_embd, logit);
            for (int t = 0; t < nt; t++)
                s->router[(i0 + t) * hp->n_expert + e] = logit[t];
        }
    for (int t = 0; t < nt; t++)
        route_token(s, i0 + t);
}

/* Router logits and each token's expert choice: s->chosen, s->chosen_w. */
static void moe_route(brigade_session *s, const bg_layer *L)
{
    const bg_hparams *hp = s->hp;
    if (L->t[BG_ROLE_FFN_GATE_INP]->type != BG_TYPE_F32)
        bg_project(s, L->t[BG_ROLE_FFN_GATE_INP], s->xn, hp->n_embd, s->router, hp->n_expert);
    route_job rj = {s, L};
    bg_run_tasks(s, (s->n_tok + ROUTE_TOKENS_PER_TASK - 1) / ROUTE_TOKENS_PER_TASK,
                 (uint64_t)s->n_tok * hp->n_expert * hp->n_embd, route_task, &rj);
}

/* The most experts a token uses that moe_routed_lone takes at once. */
enum { LONE_MAX_USED = 32 };

/* A lone token's routed experts (a decode step): the K chosen experts'
 * gate and up rows in one pass of the pool and their down rows in another,
 * instead of two passes per expert (each too small to keep the threads
 * busy). The same dots as expert_ffn, so the same sums. Gate and up rows
 * land in slot_out, the hidden rows in gx, the outputs in slot_out (slot
 * k). False when the sizes do not allow it. */
static bool moe_routed_lone(brigade_session *s, const bg_layer *L)
{
    const bg_hparams *hp = s->hp;
    const uint32_t K = hp->n_expert_used;
    const size_t E = hp->n_embd, F = hp->n_ff_exp, f = sizeof(float);
    const brigade_tensor_info *g = L->t[BG_ROLE_FFN_GATE_EXPS], *u = L->t[BG_ROLE_FFN_UP_EXPS],
                              *d = L->t[BG_ROLE_FFN_DOWN_EXPS];
    const uint64_t *b = s->plan.buf_bytes;
    /* xq holds xn's converted row for gate/up, later the K hidden rows' */
    if (s->n_tok != 1 || K > LONE_MAX_USED || g->ne[1] != F || u->ne[1] != F || d->ne[0] != F ||
        b[BG_BUF_SLOT_OUT] < 2 * K * F * f || b[BG_BUF_SLOT_OUT] < K * E * f ||
        b[BG_BUF_GX] < K * F * f || b[BG_BUF_XQ] < bg_matmul_scratch(E, 1) ||
        b[BG_BUF_XQ] < bg_matmul_scratch(F, K))
        return false;
    bg_matrix m[2 * LONE_MAX_USED];
    for (uint32_t k = 0; k < K; k++) {
        m[k] = bg_matrix_of(g, (uint64_t)s->chosen[k]);
        m[K + k] = bg_matrix_of(u, (uint64_t)s->chosen[k]);
    }
    float *so = s->slot_out;
    if (g->type == u->type && g->ne[0] == u->ne[0]) {
        bg_matmul_each(s->pool, m, (int)(2 * K), s->xn, 0, so, F, s->xq);
    } else {
        bg_matmul_each(s->pool, m, (int)K, s->xn, 0, so, F, s->xq);
        bg_matmul_each(s->pool, m + K, (int)K, s->xn, 0, so + K * F, F, s->xq);
    }
    for (uint32_t k = 0; k < K; k++)
        bg_swiglu_row(s->gx + k * F, so + k * F, so + (K + k) * F, (int64_t)F);
    for (uint32_t k = 0; k < K; k++)
        m[k] = bg_matrix_of(d, (uint64_t)s->chosen[k]);
    bg_matmul_each(s->pool, m, (int)K, s->gx, F, so, E, s->xq);
    return true;
}

void bg_block_moe_routed(brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const size_t n_embd = hp->n_embd, K = hp->n_expert_used;
    const bool lone = moe_routed_lone(s, L);
    for (uint32_t e = 0; !lone && e < hp->n_expert; e++) {
        uint32_t n = 0;
        for (size_t slot = 0; slot < s->n_tok * K; slot++)
            if (s->chosen[slot] == (int32_t)e) {
                s->members[n] = (int32_t)slot;
                memcpy(s->gx + n * n_embd, s->xn + (slot / K) * n_embd, n_embd * sizeof(float));
                n++;
            }
        if (!n)
            continue;
        expert_ffn(s, L, e, n);
        for (uint32_t r = 0; r < n; r++)
            memcpy(s->slot_out + (size_t)s->members[r] * n_embd, s->gy + r * n_embd,
                   n_embd * sizeof(float));
    }
    for (uint32_t i = 0; i < s->n_tok; i++) {
        float *o = s->out + i * n_embd;
        memset(o, 0, n_embd * sizeof(float));
        for (size_t k = 0; k < K; k++) {
            const float w = s->chosen_w[i * K + k];
            const float *y = s->slot_out + (i * K + k) * n_embd;
            for (size_t j = 0; j < n_embd; j++)
                o[j] += w * y[j];
        }
    }
}

/* out += sigmoid(w . xn) * shared_expert(xn), for layers with one. */
static void moe_shared(brigade_session *s, const bg_layer *L)
{
    const size_t n_embd = s->hp->n_embd;
    if (!L->t[BG_ROLE_FFN_UP_SHEXP])
        return;
    memcpy(s->gx, s->xn, (size_t)s->n_tok * n_embd * sizeof(float));
    expert_ffn(s, L, -1, s->n_tok);
    /* the shared expert's gate is one dot product per token */
    const float *wg = L->t[BG_ROLE_FFN_GATE_INP_SHEXP]->data;
    for (uint32_t i = 0; i < s->n_tok; i++) {
        const float g = bg_sigmoid(bg_dot_f32(wg, s->xn + i * n_embd, (int64_t)n_embd));
        float *o = s->out + i * n_embd;
        const float *y = s->gy + i * n_embd;
        for (size_t j = 0; j < n_embd; j++)
            o[j] += g * y[j];
    }
}

void bg_block_moe(brigade_session *s, uint32_t il)
{
    const bg_layer *L = &s->model->layers[il];
    moe_route(s, L);
    bg_block_moe_routed(s, il);
    moe_shared(s, L);
}
