/* qwen35moe (Qwen3.5/3.6-35B-A3B): three of every four layers are Gated
 * DeltaNet (linear attention with a recurrent state), the fourth gated full
 * attention; every layer ends in a routed mixture of experts with a shared
 * expert. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "session.h"

/* Gated DeltaNet over the micro-batch. Reads s->xn, writes s->out.
 *   qkv   = W_qkv x, convolved over the last conv_kernel tokens, silu
 *   q, k  = l2-normalized per key head, shared by value heads (tiled)
 *   beta  = sigmoid(W_beta x), decay g = softplus(W_alpha x + dt) * a
 *   M     = M * exp(g);  M += beta (v - M k) k^T;  o = M q / sqrt(d)
 *   out   = W_out (rmsnorm(o) * silu(z)), z = W_gate x
 * The projections run for all tokens at once. The recurrent parts run on
 * the worker pool, each task over every token in order: the convolution
 * split by channel, the delta rule by value head (heads do not interact),
 * then the norms by token. Each value gets the same arithmetic in every
 * split, so batched and token-by-token results are equal. */
typedef struct deltanet_job {
    brigade_session *s;
    const bg_layer *L;
    const bg_layer_state *st;
} deltanet_job;

enum { CONV_CHANNELS_PER_TASK = 256 };

/* Causal depthwise convolution of channels [c0, c1) over [state | token]
 * (bg_conv_causal), over each run of consecutive tokens of one sequence;
 * each sequence's state keeps its last K-1 inputs. */
static void conv_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const deltanet_job *j = ctx;
    brigade_session *s = j->s;
    const bg_hparams *hp = s->hp;
    const int64_t S = hp->ssm_state_size, Hk = hp->ssm_group_count, Hv = hp->ssm_time_step_rank;
    const int64_t conv_dim = 2 * S * Hk + S * Hv, K = hp->ssm_conv_kernel;
    const int64_t c0 = task * CONV_CHANNELS_PER_TASK;
    const int64_t c1 = c0 + CONV_CHANNELS_PER_TASK < conv_dim ? c0 + CONV_CHANNELS_PER_TASK : conv_dim;
    const float *w = j->L->t[BG_ROLE_SSM_CONV1D]->data; /* [conv_dim][K] */
    for (uint32_t i0 = 0, i1; i0 < s->n_tok; i0 = i1) {
        const uint32_t seq = s->tok_seq[i0];
        for (i1 = i0 + 1; i1 < s->n_tok && s->tok_seq[i1] == seq; i1++)
            ;
        float *conv = bg_seq_conv(s, j->st, seq);
        bg_conv_causal(s->q + i0 * s->q_width + c0, s->q_width, i1 - i0, conv + c0 * (K - 1),
                       w + c0 * K, K, c1 - c0);
    }
}

/* Token i's convolved q, k, v: silu, then q and k l2-normalized per key head. */
static void qk_norm_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const deltanet_job *j = ctx;
    const brigade_session *s = j->s;
    const bg_hparams *hp = s->hp;
    const int64_t S = hp->ssm_state_size, Hk = hp->ssm_group_count, Hv = hp->ssm_time_step_rank;
    const int64_t key_dim = S * Hk, conv_dim = 2 * key_dim + S * Hv;
    float *qkv = s->q + task * s->q_width;
    bg_silu_row(qkv, qkv, conv_dim);
    for (int64_t h = 0; h < Hk; h++) {
        bg_l2norm(qkv + h * S, S, hp->rms_eps);
        bg_l2norm(qkv + key_dim + h * S, S, hp->rms_eps);
    }
}

/* Rows of a head's state updated together for every token of the
 * micro-batch: 8 rows of 128 floats (4 KB) stay in L1 while the tokens'
 * keys and queries stream past, instead of the whole 64 KB state being
 * read twice per token. */
enum { DELTA_ROWS_PER_PASS = 8 };

/* Value head h's delta rule over every token of the micro-batch, in order,
 * each token on its sequence's state; o = M q / sqrt(S) into s->attn. The
 * rows of M are independent (row r reads only row r, k, q and v[r]), so
 * each block of rows runs over all tokens before the next: every value
 * gets the arithmetic, and the order, of ggml's whole-matrix steps (M *=
 * exp(g), then M k, the rank-one update and M q). */
static void head_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const deltanet_job *j = ctx;
    const brigade_session *s = j->s;
    const bg_hparams *hp = s->hp;
    const int64_t S = hp->ssm_state_size, Hk = hp->ssm_group_count, Hv = hp->ssm_time_step_rank;
    const int64_t key_dim = S * Hk, h = task;
    const float scale = 1.0f / sqrtf((float)S);
    for (int64_t r0 = 0; r0 < S; r0 += DELTA_ROWS_PER_PASS) {
        const int64_t r1 = r0 + DELTA_ROWS_PER_PASS < S ? r0 + DELTA_ROWS_PER_PASS : S;
        for (uint32_t i = 0; i < s->n_tok; i++) {
            const float *qkv = s->q + i * s->q_width;
            /* value heads share key heads by tiling, as llama.cpp repeats them */
            const float *qh = qkv + (h % Hk) * S, *kh = qkv + key_dim + (h % Hk) * S;
            const float *vh = qkv + 2 * key_dim + h * S;
            const float *beta = s->heads + (size_t)i * 2 * Hv, *decay = beta + Hv;
            float *M = bg_seq_ssm(s, j->st, s->tok_seq[i]) + h * S * S;
            float *o = s->attn + i * s->a_width + h * S;
            const float g = expf(decay[h]);
            for (int64_t r = r0; r < r1; r++) {
                o[r] = bg_delta_rule_row(M + r * S, kh, qh, g, vh[r], beta[h], S) * scale;
            }
        }
    }
}

/* Token i's gated norm per value head: rmsnorm(o) * silu(z). */
static void gated_norm_task(void *ctx, int64_t task, unsigned worker)
{
    (void)worker;
    const deltanet_job *j = ctx;
    const brigade_session *s = j->s;
    const bg_hparams *hp = s->hp;
    const int64_t S = hp->ssm_state_size, Hv = hp->ssm_time_step_rank;
    const float *norm_w = j->L->t[BG_ROLE_SSM_NORM]->data;
    float *o = s->attn + task * s->a_width;
    float *z = s->gate + task * s->a_width;
    for (int64_t h = 0; h < Hv; h++) {
        bg_rmsnorm(o + h * S, o + h * S, norm_w, S, hp->rms_eps);
        bg_silu_row(z + h * S, z + h * S, S);
        for (int64_t e = 0; e < S; e++)
            o[h * S + e] *= z[h * S + e];
    }
}

static void deltanet(brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const size_t Hv = hp->ssm_time_step_rank, n_embd = hp->n_embd;
    const int64_t S = hp->ssm_state_size, conv_dim = 2 * S * hp->ssm_group_count + S * (int64_t)Hv;
    bg_project(s, L->t[BG_ROLE_SSM_QKV], s->xn, n_embd, s->q, s->q_width);
    bg_project(s, L->t[BG_ROLE_SSM_GATE], s->xn, n_embd, s->gate, s->a_width);
    bg_project(s, L->t[BG_ROLE_SSM_BETA], s->xn, n_embd, s->heads, 2 * Hv);
    bg_project(s, L->t[BG_ROLE_SSM_ALPHA], s->xn, n_embd, s->heads + Hv, 2 * Hv);
    const float *dt = L->t[BG_ROLE_SSM_DT]->data, *a = L->t[BG_ROLE_SSM_A]->data;
    for (uint32_t i = 0; i < s->n_tok; i++) {
        float *beta = s->heads + (size_t)i * 2 * Hv, *alpha = beta + Hv;
        for (size_t h = 0; h < Hv; h++) {
            beta[h] = bg_sigmoid(beta[h]);
            alpha[h] = bg_softplus(alpha[h] + dt[h]) * a[h]; /* now the log-decay */
        }
    }
    deltanet_job j = {s, L, &s->layers[il]};
    const uint64_t n_tok = s->n_tok, row_work = n_tok * (uint64_t)conv_dim;
    bg_run_tasks(s, (conv_dim + CONV_CHANNELS_PER_TASK - 1) / CONV_CHANNELS_PER_TASK,
                 row_work * hp->ssm_conv_kernel, conv_task, &j);
    bg_run_tasks(s, s->n_tok, row_work, qk_norm_task, &j);
    bg_run_tasks(s, (int64_t)Hv, n_tok * Hv * (uint64_t)(S * S) * 4, head_task, &j);
    bg_run_tasks(s, s->n_tok, row_work, gated_norm_task, &j);
    bg_project(s, L->t[BG_ROLE_SSM_OUT], s->attn, s->a_width, s->out, n_embd);
}

void bg_qwen35moe_layer(brigade_session *s, uint32_t il)
{
    const bg_layer *L = &s->model->layers[il];
    bg_norm_tokens(s, L->t[BG_ROLE_ATTN_NORM]);
    if (bg_hparams_is_recurrent(s->hp, il))
        deltanet(s, il);
    else
        bg_block_attention(s, il, true);
    bg_add_residual(s);
    bg_norm_tokens(s, L->t[BG_ROLE_POST_NORM]);
    bg_block_moe(s, il);
    bg_add_residual(s);
}
