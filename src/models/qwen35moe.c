/* qwen35moe (Qwen3.5/3.6-35B-A3B): three of every four layers are Gated
 * DeltaNet (linear attention with a recurrent state), the fourth gated full
 * attention; every layer ends in a routed mixture of experts with a shared
 * expert. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "session.h"

/* Gated DeltaNet for one token. Reads s->xn, writes s->out.
 *   qkv   = W_qkv x, convolved over the last conv_kernel tokens, silu
 *   q, k  = l2-normalized per key head, shared by value heads (tiled)
 *   beta  = sigmoid(W_beta x), decay g = softplus(W_alpha x + dt) * a
 *   M     = M * exp(g);  M += beta (v - M k) k^T;  o = M q / sqrt(d)
 *   out   = W_out (rmsnorm(o) * silu(z)), z = W_gate x */
/* The recurrent part for token i of the micro-batch: convolution, the
 * delta-rule update of its sequence's state, and the gated norm, into
 * s->attn. */
static void deltanet_token(brigade_session *s, const bg_layer *L, const bg_layer_state *st,
                           uint32_t i)
{
    const bg_hparams *hp = s->hp;
    const int64_t S = hp->ssm_state_size, Hk = hp->ssm_group_count, Hv = hp->ssm_time_step_rank;
    const int64_t key_dim = S * Hk, conv_dim = 2 * key_dim + S * Hv;
    const int64_t K = hp->ssm_conv_kernel;
    float *qkv = s->q + i * s->q_width; /* [conv_dim] */
    float *z = s->gate + i * s->a_width; /* [value_dim] */
    const float *beta = s->heads + (size_t)i * 2 * Hv, *decay = beta + Hv;
    float *conv = bg_seq_conv(s, st, s->tok_seq[i]), *ssm = bg_seq_ssm(s, st, s->tok_seq[i]);

    /* causal depthwise convolution over [state | this token] (a chain of
     * fused multiply-adds, as ggml's compiler builds its loop), then silu;
     * the state keeps the last K-1 inputs */
    const float *w = L->t[BG_ROLE_SSM_CONV1D]->data; /* [conv_dim][K] */
    for (int64_t c = 0; c < conv_dim; c++) {
        float *hist = conv + c * (K - 1);
        const float *wc = w + c * K;
        float acc = 0;
        for (int64_t j = 0; j < K - 1; j++)
            acc = fmaf(hist[j], wc[j], acc);
        acc = fmaf(qkv[c], wc[K - 1], acc);
        if (K > 1) {
            memmove(hist, hist + 1, (size_t)(K - 2) * sizeof(float));
            hist[K - 2] = qkv[c];
        }
        qkv[c] = acc;
    }
    bg_silu_row(qkv, qkv, conv_dim);
    float *q = qkv, *k = qkv + key_dim, *v = qkv + 2 * key_dim;
    for (int64_t h = 0; h < Hk; h++) {
        bg_l2norm(q + h * S, S, hp->rms_eps);
        bg_l2norm(k + h * S, S, hp->rms_eps);
    }

    const float scale = 1.0f / sqrtf((float)S);
    float *o = s->attn + i * s->a_width; /* [Hv][S] */
    for (int64_t h = 0; h < Hv; h++) {
        float *M = ssm + h * S * S;
        /* value heads share key heads by tiling, as llama.cpp repeats them */
        const float *qh = q + (h % Hk) * S, *kh = k + (h % Hk) * S, *vh = v + h * S;
        const float g = expf(decay[h]);
        for (int64_t j = 0; j < S * S; j++)
            M[j] *= g;
        /* rows are independent: ggml's order (all of M k, the rank-one
         * update, then M q) gives the same bits row by row */
        for (int64_t r = 0; r < S; r++) {
            float *row = M + r * S;
            const float d = (vh[r] - bg_dot_f32(row, kh, S)) * beta[h];
            bg_axpy(row, kh, d, S);
            o[h * S + r] = bg_dot_f32(row, qh, S) * scale;
        }
    }
    /* gated norm per value head */
    const float *norm_w = L->t[BG_ROLE_SSM_NORM]->data;
    for (int64_t h = 0; h < Hv; h++) {
        bg_rmsnorm(o + h * S, o + h * S, norm_w, S, hp->rms_eps);
        bg_silu_row(z + h * S, z + h * S, S);
        for (int64_t j = 0; j < S; j++)
            o[h * S + j] *= z[h * S + j];
    }
}

/* Gated DeltaNet over the micro-batch. Reads s->xn, writes s->out.
 *   qkv   = W_qkv x, convolved over the last conv_kernel tokens, silu
 *   q, k  = l2-normalized per key head, shared by value heads (tiled)
 *   beta  = sigmoid(W_beta x), decay g = softplus(W_alpha x + dt) * a
 *   M     = M * exp(g);  M += beta (v - M k) k^T;  o = M q / sqrt(d)
 *   out   = W_out (rmsnorm(o) * silu(z)), z = W_gate x
 * The projections run for all tokens at once; the recurrence in order. */
static void deltanet(brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const bg_layer_state *st = &s->layers[il];
    const size_t Hv = hp->ssm_time_step_rank, n_embd = hp->n_embd;
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
    for (uint32_t i = 0; i < s->n_tok; i++)
        deltanet_token(s, L, st, i);
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
