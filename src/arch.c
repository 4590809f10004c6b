#include "arch.h"

#include <stdio.h>
#include <string.h>

#include "tensor_names.h"

typedef struct spec_list {
    bg_tensor_spec *out;
    size_t n, cap;
} spec_list;

static void add(spec_list *l, bg_role role, const char *fmt, int32_t layer, bg_weight_kind kind,
                uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
    if (l->n < l->cap) {
        bg_tensor_spec *s = &l->out[l->n];
        memset(s, 0, sizeof *s);
        s->role = role;
        s->layer = layer;
        snprintf(s->name, sizeof s->name, fmt, layer < 0 ? 0u : (unsigned)layer);
        s->n_dims = n_dims;
        s->ne[0] = ne0;
        s->ne[1] = ne1;
        s->ne[2] = ne2;
        s->ne[3] = 1;
        s->kind = kind;
        s->optional = role == BG_ROLE_OUTPUT;
    }
    l->n++;
}

static void matrix(spec_list *l, bg_role role, const char *fmt, int32_t il, uint64_t in,
                   uint64_t out)
{
    add(l, role, fmt, il, BG_KIND_MATRIX, 2, in, out, 1);
}

static void norm(spec_list *l, bg_role role, const char *fmt, int32_t il, uint64_t n)
{
    add(l, role, fmt, il, BG_KIND_NORM, 1, n, 1, 1);
}

static void attention(spec_list *l, const bg_hparams *hp, int32_t il)
{
    /* qwen35moe's query projection also yields a per-head output gate */
    uint64_t q_out = (uint64_t)hp->n_head * hp->head_dim * (hp->arch == BG_ARCH_QWEN35MOE ? 2 : 1);
    uint64_t kv_out = (uint64_t)hp->n_head_kv * hp->head_dim;
    matrix(l, BG_ROLE_ATTN_Q, TN_ATTN_Q, il, hp->n_embd, q_out);
    matrix(l, BG_ROLE_ATTN_K, TN_ATTN_K, il, hp->n_embd, kv_out);
    matrix(l, BG_ROLE_ATTN_V, TN_ATTN_V, il, hp->n_embd, kv_out);
    matrix(l, BG_ROLE_ATTN_OUT, TN_ATTN_OUT, il, (uint64_t)hp->n_head * hp->head_dim, hp->n_embd);
    norm(l, BG_ROLE_ATTN_Q_NORM, TN_ATTN_Q_NORM, il, hp->head_dim);
    norm(l, BG_ROLE_ATTN_K_NORM, TN_ATTN_K_NORM, il, hp->head_dim);
}

static void deltanet(spec_list *l, const bg_hparams *hp, int32_t il)
{
    uint64_t key_dim = (uint64_t)hp->ssm_state_size * hp->ssm_group_count;
    uint64_t value_dim = (uint64_t)hp->ssm_state_size * hp->ssm_time_step_rank;
    uint64_t conv_dim = 2 * key_dim + value_dim;
    matrix(l, BG_ROLE_SSM_QKV, TN_ATTN_QKV, il, hp->n_embd, conv_dim);
    matrix(l, BG_ROLE_SSM_GATE, TN_ATTN_GATE, il, hp->n_embd, value_dim);
    add(l, BG_ROLE_SSM_CONV1D, TN_SSM_CONV1D, il, BG_KIND_DENSE, 2, hp->ssm_conv_kernel, conv_dim, 1);
    add(l, BG_ROLE_SSM_DT, TN_SSM_DT, il, BG_KIND_VECTOR, 1, hp->ssm_time_step_rank, 1, 1);
    add(l, BG_ROLE_SSM_A, TN_SSM_A, il, BG_KIND_VECTOR, 1, hp->ssm_time_step_rank, 1, 1);
    matrix(l, BG_ROLE_SSM_BETA, TN_SSM_BETA, il, hp->n_embd, hp->ssm_time_step_rank);
    matrix(l, BG_ROLE_SSM_ALPHA, TN_SSM_ALPHA, il, hp->n_embd, hp->ssm_time_step_rank);
    norm(l, BG_ROLE_SSM_NORM, TN_SSM_NORM, il, hp->ssm_state_size);
    matrix(l, BG_ROLE_SSM_OUT, TN_SSM_OUT, il, value_dim, hp->n_embd);
}

static void moe(spec_list *l, const bg_hparams *hp, int32_t il)
{
    add(l, BG_ROLE_FFN_GATE_INP, TN_FFN_GATE_INP, il, BG_KIND_DENSE, 2, hp->n_embd, hp->n_expert, 1);
    add(l, BG_ROLE_FFN_GATE_EXPS, TN_FFN_GATE_EXPS, il, BG_KIND_MATRIX, 3, hp->n_embd, hp->n_ff_exp,
        hp->n_expert);
    add(l, BG_ROLE_FFN_UP_EXPS, TN_FFN_UP_EXPS, il, BG_KIND_MATRIX, 3, hp->n_embd, hp->n_ff_exp,
        hp->n_expert);
    add(l, BG_ROLE_FFN_DOWN_EXPS, TN_FFN_DOWN_EXPS, il, BG_KIND_MATRIX, 3, hp->n_ff_exp, hp->n_embd,
        hp->n_expert);
    if (hp->n_ff_shexp) {
        add(l, BG_ROLE_FFN_GATE_INP_SHEXP, TN_FFN_GATE_INP_SHEXP, il, BG_KIND_VECTOR, 1, hp->n_embd,
            1, 1);
        matrix(l, BG_ROLE_FFN_GATE_SHEXP, TN_FFN_GATE_SHEXP, il, hp->n_embd, hp->n_ff_shexp);
        matrix(l, BG_ROLE_FFN_UP_SHEXP, TN_FFN_UP_SHEXP, il, hp->n_embd, hp->n_ff_shexp);
        matrix(l, BG_ROLE_FFN_DOWN_SHEXP, TN_FFN_DOWN_SHEXP, il, hp->n_ff_shexp, hp->n_embd);
    }
}

size_t bg_arch_tensor_specs(const bg_hparams *hp, bg_tensor_spec *out, size_t cap)
{
    spec_list l = {out, 0, out ? cap : 0};
    matrix(&l, BG_ROLE_TOKEN_EMBD, TN_TOKEN_EMBD, -1, hp->n_embd, hp->n_vocab);
    for (int32_t il = 0; il < (int32_t)hp->n_layers; il++) {
        norm(&l, BG_ROLE_ATTN_NORM, TN_ATTN_NORM, il, hp->n_embd);
        if (hp->arch == BG_ARCH_QWEN35MOE) {
            norm(&l, BG_ROLE_POST_NORM, TN_ATTN_POST_NORM, il, hp->n_embd);
            if (bg_hparams_is_recurrent(hp, (uint32_t)il))
                deltanet(&l, hp, il);
            else
                attention(&l, hp, il);
        } else {
            attention(&l, hp, il);
            norm(&l, BG_ROLE_FFN_NORM, TN_FFN_NORM, il, hp->n_embd);
        }
        moe(&l, hp, il);
    }
    norm(&l, BG_ROLE_OUTPUT_NORM, TN_OUTPUT_NORM, -1, hp->n_embd);
    matrix(&l, BG_ROLE_OUTPUT, TN_OUTPUT, -1, hp->n_embd, hp->n_vocab);
    return l.n;
}
