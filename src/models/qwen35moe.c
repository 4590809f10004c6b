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
static void deltanet(brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const bg_layer_state *st = &s->layers[il];
    const int64_t S = hp->ssm_state_size, Hk = hp->ssm_group_count, Hv = hp->ssm_time_step_rank;
    const int64_t key_dim = S * Hk, value_dim = S * Hv, conv_dim = 2 * key_dim + value_dim;
    const int64_t K = hp->ssm_conv_kernel;

    float *qkv = s->q;           /* [conv_dim] */
    float *z = s->gate;          /* [value_dim] */
    float *beta = s->heads, *alpha = s->heads + Hv;
    bg_project(s, L->t[BG_ROLE_SSM_QKV], s->xn, qkv);
    bg_project(s, L->t[BG_ROLE_SSM_GATE], s->xn, z);
    bg_project(s, L->t[BG_ROLE_SSM_BETA], s->xn, beta);
    bg_project(s, L->t[BG_ROLE_SSM_ALPHA], s->xn, alpha);
    const float *dt = L->t[BG_ROLE_SSM_DT]->data, *a = L->t[BG_ROLE_SSM_A]->data;
    for (int64_t h = 0; h < Hv; h++) {
        beta[h] = bg_sigmoid(beta[h]);
        alpha[h] = bg_softplus(alpha[h] + dt[h]) * a[h]; /* now the log-decay g */
    }

    /* causal depthwise convolution over [state | this token], then silu;
     * the state keeps the last K-1 inputs */
    const float *w = L->t[BG_ROLE_SSM_CONV1D]->data; /* [conv_dim][K] */
    for (int64_t c = 0; c < conv_dim; c++) {
        float *hist = st->conv + c * (K - 1);
        const float *wc = w + c * K;
        float acc = 0;
        for (int64_t j = 0; j < K - 1; j++)
            acc += hist[j] * wc[j];
        acc += qkv[c] * wc[K - 1];
        if (K > 1) {
            memmove(hist, hist + 1, (size_t)(K - 2) * sizeof(float));
            hist[K - 2] = qkv[c];
        }
        qkv[c] = bg_silu(acc);
    }
    float *q = qkv, *k = qkv + key_dim, *v = qkv + 2 * key_dim;
    for (int64_t h = 0; h < Hk; h++) {
        bg_l2norm(q + h * S, S, hp->rms_eps);
        bg_l2norm(k + h * S, S, hp->rms_eps);
    }

    const float scale = 1.0f / sqrtf((float)S);
    float *o = s->attn; /* [Hv][S] */
    for (int64_t h = 0; h < Hv; h++) {
        float *M = st->ssm + h * S * S;
        const float *qh = q + (h % Hk) * S, *kh = k + (h % Hk) * S, *vh = v + h * S;
        const float decay = expf(alpha[h]);
        for (int64_t i = 0; i < S * S; i++)
            M[i] *= decay;
        for (int64_t i = 0; i < S; i++) {
            float *row = M + i * S;
            float mk = 0;
            for (int64_t j = 0; j < S; j++)
                mk += row[j] * kh[j];
            const float d = (vh[i] - mk) * beta[h];
            float mq = 0;
            for (int64_t j = 0; j < S; j++) {
                row[j] += kh[j] * d;
                mq += row[j] * qh[j];
            }
            o[h * S + i] = mq * scale;
        }
    }
    /* gated norm per value head, then the output projection */
    const float *norm_w = L->t[BG_ROLE_SSM_NORM]->data;
    for (int64_t h = 0; h < Hv; h++) {
        bg_rmsnorm(o + h * S, o + h * S, norm_w, S, hp->rms_eps);
        for (int64_t i = 0; i < S; i++)
            o[h * S + i] *= bg_silu(z[h * S + i]);
    }
    bg_project(s, L->t[BG_ROLE_SSM_OUT], o, s->out);
}

void bg_qwen35moe_layer(brigade_session *s, uint32_t il, uint32_t pos)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    bg_rmsnorm(s->xn, s->x, L->t[BG_ROLE_ATTN_NORM]->data, hp->n_embd, hp->rms_eps);
    if (bg_hparams_is_recurrent(hp, il))
        deltanet(s, il);
    else
        bg_block_attention(s, il, pos, true);
    for (uint32_t i = 0; i < hp->n_embd; i++)
        s->x[i] += s->out[i];
    bg_rmsnorm(s->xn, s->x, L->t[BG_ROLE_POST_NORM]->data, hp->n_embd, hp->rms_eps);
    bg_block_moe(s, il);
    for (uint32_t i = 0; i < hp->n_embd; i++)
        s->x[i] += s->out[i];
}
