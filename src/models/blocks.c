/* Blocks both Qwen MoE architectures share: grouped-query attention with
 * QK-norm and rotary embedding, and the routed mixture of experts. */
#include <math.h>
#include <string.h>

#include "fp16.h"
#include "ops.h"
#include "quant.h"
#include "session.h"
#include "types.h"

void bg_project(brigade_session *s, const brigade_tensor_info *w, const float *x, float *y)
{
    bg_matrix m = bg_matrix_of(w, 0);
    bg_matvec(s->pool, &m, x, y, s->xq);
}

/* One head's attention over positions 0..pos of the cache, with the
 * arithmetic of llama.cpp's CPU flash attention: the query converted to
 * the K type's dot format, scores s = (q . k) * scale, an online softmax,
 * and V accumulated in f32, or in f16 for an f16 V cache. */
static void attend_head(brigade_session *s, const bg_layer_state *st, const float *q,
                        int64_t kvh, uint32_t pos, float scale, float *out)
{
    const int64_t D = s->hp->head_dim;
    const bg_quant_ops *kops = bg_quant_ops_get((bg_type)s->type_k);
    const bg_quant_ops *vops = bg_quant_ops_get((bg_type)s->type_v);
    const bg_quant_ops *qops = bg_quant_ops_get(kops->dot_type);
    uint64_t k_head_bytes, v_head_bytes;
    bg_type_row_bytes((bg_type)s->type_k, (uint64_t)D, &k_head_bytes);
    bg_type_row_bytes((bg_type)s->type_v, (uint64_t)D, &v_head_bytes);
    qops->quantize_activations(q, s->xq, D);

    const bool f16_acc = s->type_v == BG_TYPE_F16;
    uint16_t *acc16 = (uint16_t *)s->acc;
    float *acc32 = s->acc;
    memset(s->acc, 0, (size_t)D * sizeof(float));
    float S = 0.0f, M = -INFINITY;
    for (uint32_t t = 0; t <= pos; t++) {
        const uint8_t *kt = st->k_cache + t * s->k_row_bytes + kvh * k_head_bytes;
        const uint8_t *vt = st->v_cache + t * s->v_row_bytes + kvh * v_head_bytes;
        const float sc = kops->dot(D, kt, s->xq) * scale;
        const float m_old = M;
        float ms = 1.0f, vs = 1.0f;
        if (sc > M) {
            M = sc;
            ms = expf(m_old - M);
            for (int64_t i = 0; i < D; i++) {
                if (f16_acc)
                    acc16[i] = bg_f32_to_f16(bg_f16_to_f32(acc16[i]) * ms);
                else
                    acc32[i] *= ms;
            }
        } else {
            vs = expf(sc - M);
        }
        if (f16_acc) {
            const uint16_t *v16 = (const uint16_t *)(const void *)vt;
            for (int64_t i = 0; i < D; i++)
                acc16[i] = bg_f32_to_f16(fmaf(bg_f16_to_f32(v16[i]), vs, bg_f16_to_f32(acc16[i])));
        } else {
            vops->dequantize(vt, s->vrow, D);
            for (int64_t i = 0; i < D; i++)
                acc32[i] += s->vrow[i] * vs;
        }
        S = S * ms + vs;
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int64_t i = 0; i < D; i++)
        out[i] = (f16_acc ? bg_f16_to_f32(acc16[i]) : acc32[i]) * inv;
}

/* Attention for the token at pos over positions 0..pos. qwen35moe's query
 * projection interleaves per head [query | output gate] and its output is
 * gated by sigmoid(gate); qwen3moe's is plain. Reads s->xn, writes s->out. */
void bg_block_attention(brigade_session *s, uint32_t il, uint32_t pos, bool gated_q)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const bg_layer_state *st = &s->layers[il];
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, kv_dim = Hkv * D;

    bg_project(s, L->t[BG_ROLE_ATTN_Q], s->xn, s->q);
    float *k = s->kv_tmp, *v = s->kv_tmp + kv_dim;
    bg_project(s, L->t[BG_ROLE_ATTN_K], s->xn, k);
    bg_project(s, L->t[BG_ROLE_ATTN_V], s->xn, v);

    /* q: [H][D] (split from the gate when gated) */
    float *q = s->q;
    if (gated_q) {
        for (int64_t h = 0; h < H; h++) {
            memcpy(s->gate + h * D, s->q + (2 * h + 1) * D, (size_t)D * sizeof(float));
            memmove(s->q + h * D, s->q + 2 * h * D, (size_t)D * sizeof(float));
        }
    }
    const float *qn = L->t[BG_ROLE_ATTN_Q_NORM]->data, *kn = L->t[BG_ROLE_ATTN_K_NORM]->data;
    bg_rmsnorm_rows(q, qn, D, H, hp->rms_eps);
    bg_rmsnorm_rows(k, kn, D, Hkv, hp->rms_eps);
    bg_rope_neox(q, H, D, hp->rope_dims, pos, hp->rope_freq_base);
    bg_rope_neox(k, Hkv, D, hp->rope_dims, pos, hp->rope_freq_base);

    /* Quantized caches hold rotated vectors, as llama.cpp's do: a
     * Walsh-Hadamard rotation spreads outliers before rounding. Rotating q
     * and k alike keeps q.k; V's rotation is undone on the output. */
    const int64_t k_rot = s->k_rotation, v_rot = s->v_rotation;
    if (k_rot) {
        bg_hadamard(q, H * D, k_rot);
        bg_hadamard(k, kv_dim, k_rot);
    }
    if (v_rot)
        bg_hadamard(v, kv_dim, v_rot);

    /* into the cache, converted as llama.cpp's copy into its cache does */
    bg_quant_ops_get((bg_type)s->type_k)->quantize_activations(k, st->k_cache + pos * s->k_row_bytes, kv_dim);
    bg_quant_ops_get((bg_type)s->type_v)->quantize_activations(v, st->v_cache + pos * s->v_row_bytes, kv_dim);

    const float scale = 1.0f / sqrtf((float)D);
    const int64_t group = H / Hkv;
    for (int64_t h = 0; h < H; h++)
        attend_head(s, st, q + h * D, h / group, pos, scale, s->attn + h * D);
    if (v_rot)
        bg_hadamard(s->attn, H * D, v_rot);
    if (gated_q)
        for (int64_t i = 0; i < H * D; i++)
            s->attn[i] *= bg_sigmoid(s->gate[i]);
    bg_project(s, L->t[BG_ROLE_ATTN_OUT], s->attn, s->out);
}

/* out += weight * down(silu(gate x) * up(x)) for one expert (or the shared
 * one, expert == -1). */
static void expert_ffn(brigade_session *s, const bg_layer *L, int64_t expert, float weight)
{
    bool shared = expert < 0;
    const brigade_tensor_info *g = L->t[shared ? BG_ROLE_FFN_GATE_SHEXP : BG_ROLE_FFN_GATE_EXPS];
    const brigade_tensor_info *u = L->t[shared ? BG_ROLE_FFN_UP_SHEXP : BG_ROLE_FFN_UP_EXPS];
    const brigade_tensor_info *d = L->t[shared ? BG_ROLE_FFN_DOWN_SHEXP : BG_ROLE_FFN_DOWN_EXPS];
    uint64_t e = shared ? 0 : (uint64_t)expert;
    bg_matrix mg = bg_matrix_of(g, e), mu = bg_matrix_of(u, e), md = bg_matrix_of(d, e);
    bg_matvec(s->pool, &mg, s->xn, s->ff_gate, s->xq);
    bg_matvec(s->pool, &mu, s->xn, s->ff_up, s->xq);
    for (uint64_t i = 0; i < mg.n_out; i++)
        s->ff_gate[i] = bg_silu(s->ff_gate[i]) * s->ff_up[i];
    bg_matvec(s->pool, &md, s->ff_gate, s->ff_up, s->xq); /* ff_up: [n_embd] here */
    for (uint64_t i = 0; i < md.n_out; i++)
        s->out[i] += weight * s->ff_up[i];
}

/* Softmax routing over all experts, the top k kept and renormalized, plus
 * a sigmoid-gated shared expert where the layer has one. Reads s->xn,
 * writes s->out. */
void bg_block_moe(brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    bg_project(s, L->t[BG_ROLE_FFN_GATE_INP], s->xn, s->router);
    bg_softmax(s->router, hp->n_expert, 1.0f);

    /* top-k by probability; the earlier expert wins a tie */
    float sum = 0;
    for (uint32_t k = 0; k < hp->n_expert_used; k++) {
        int32_t best = -1;
        for (uint32_t e = 0; e < hp->n_expert; e++) {
            bool taken = false;
            for (uint32_t j = 0; j < k; j++)
                taken |= s->chosen[j] == (int32_t)e;
            if (!taken && (best < 0 || s->router[e] > s->router[best]))
                best = (int32_t)e;
        }
        s->chosen[k] = best;
        sum += s->router[best];
    }
    memset(s->out, 0, hp->n_embd * sizeof(float));
    for (uint32_t k = 0; k < hp->n_expert_used; k++)
        expert_ffn(s, L, s->chosen[k], s->router[s->chosen[k]] / sum);

    if (L->t[BG_ROLE_FFN_UP_SHEXP]) {
        /* the shared expert's gate is one dot product */
        const float *wg = L->t[BG_ROLE_FFN_GATE_INP_SHEXP]->data;
        float g = 0;
        for (uint32_t i = 0; i < hp->n_embd; i++)
            g += wg[i] * s->xn[i];
        expert_ffn(s, L, -1, bg_sigmoid(g));
    }
}
