/* Loading a model: the file is opened and validated (gguf_read.c), the
 * hyperparameters read and checked (hparams.c), and every tensor the
 * architecture needs (arch.c) bound by name with its shape and type checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf_reader.h"
#include "keys.h"
#include "model.h"
#include "quant.h"
#include "types.h"

static void format_shape(char *buf, size_t size, uint32_t n_dims, const uint64_t *ne)
{
    int n = snprintf(buf, size, "[");
    for (uint32_t d = 0; d < n_dims && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%llu", d ? ", " : "", (unsigned long long)ne[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* Types a tensor of this kind may have. */
static bool type_fits(bg_weight_kind kind, uint32_t type)
{
    if (kind == BG_KIND_NORM || kind == BG_KIND_VECTOR)
        return type == BG_TYPE_F32;
    const bg_quant_ops *ops = bg_quant_ops_get((bg_type)type);
    if (type == BG_TYPE_F32)
        return true;
    return ops && ops->dequantize && (kind == BG_KIND_DENSE || ops->dot);
}

static brigade_status bind_one(brigade_model *m, const bg_tensor_spec *s, brigade_error *err)
{
    const brigade_tensor_info *t = brigade_gguf_find_tensor(m->file, s->name);
    if (!t) {
        if (s->optional)
            return BRIGADE_OK;
        return bg_fail(err, BRIGADE_ERR_FORMAT, "tensor '%s' is missing (%s expects it)", s->name,
                       bg_arch_name(m->hp.arch));
    }
    bool same = t->n_dims == s->n_dims;
    for (unsigned d = 0; same && d < 4; d++)
        same = t->ne[d] == s->ne[d];
    if (!same) {
        char want[96], got[96];
        format_shape(want, sizeof want, s->n_dims, s->ne);
        format_shape(got, sizeof got, t->n_dims, t->ne);
        return bg_fail(err, BRIGADE_ERR_FORMAT, "tensor '%s': expected shape %s, found %s %s",
                       s->name, want, brigade_type_name(t->type), got);
    }
    if (!type_fits(s->kind, t->type))
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "tensor '%s' has type %s, which brigade cannot compute with here%s", s->name,
                       brigade_type_name(t->type),
                       s->kind == BG_KIND_NORM || s->kind == BG_KIND_VECTOR
                           ? " (1-d tensors must be f32)"
                           : " (supported: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_K q5_K "
                             "q6_K iq4_nl iq4_xs)");
    bg_layer *slot = s->layer < 0 ? &m->global : &m->layers[s->layer];
    slot->t[s->role] = t;
    return BRIGADE_OK;
}

static brigade_status bind_tensors(brigade_model *m, brigade_error *err)
{
    size_t n = bg_arch_tensor_specs(&m->hp, NULL, 0);
    bg_tensor_spec *specs = calloc(n, sizeof *specs);
    m->layers = calloc(m->hp.n_layers, sizeof *m->layers);
    if (!specs || !m->layers) {
        free(specs);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory binding %zu tensors", n);
    }
    bg_arch_tensor_specs(&m->hp, specs, n);
    brigade_status st = BRIGADE_OK;
    int64_t bound = 0;
    for (size_t i = 0; i < n && !st; i++) {
        st = bind_one(m, &specs[i], err);
        const bg_layer *slot = specs[i].layer < 0 ? &m->global : &m->layers[specs[i].layer];
        if (!st && slot->t[specs[i].role]) {
            bound++;
            m->n_params += slot->t[specs[i].role]->n_elements;
            m->weight_bytes += slot->t[specs[i].role]->n_bytes;
        }
    }
    free(specs);
    if (!st && !m->global.t[BG_ROLE_OUTPUT])
        m->global.t[BG_ROLE_OUTPUT] = m->global.t[BG_ROLE_TOKEN_EMBD]; /* tied embeddings */
    m->n_ignored = brigade_gguf_tensor_count(m->file) - bound;
    return st;
}

/* The vocabulary size comes from the embedding matrix; a tokenizer in the
 * file must agree with it. */
static brigade_status read_vocab_size(brigade_model *m, brigade_error *err)
{
    const brigade_tensor_info *embd = brigade_gguf_find_tensor(m->file, "token_embd.weight");
    if (!embd)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "tensor 'token_embd.weight' is missing");
    if (embd->n_dims != 2 || embd->ne[1] > INT32_MAX)
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "tensor 'token_embd.weight' must be 2-d with at most 2^31-1 rows");
    m->hp.n_vocab = (uint32_t)embd->ne[1];
    const brigade_value *tokens = brigade_gguf_get(m->file, KEY_TOK_TOKENS);
    if (tokens && tokens->count != m->hp.n_vocab)
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "the tokenizer has %llu tokens but token_embd.weight has %u rows",
                       (unsigned long long)tokens->count, m->hp.n_vocab);
    return BRIGADE_OK;
}

brigade_status bg_model_from_file(brigade_gguf *file, const char *label, brigade_model **out,
                                  brigade_error *err)
{
    *out = NULL;
    brigade_model *m = calloc(1, sizeof *m);
    if (!m) {
        brigade_gguf_close(file);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: out of memory", label);
    }
    m->file = file;
    m->header_only = bg_gguf_is_header_only(file);
    brigade_status st = bg_hparams_read(m->file, &m->hp, err);
    if (!st)
        st = read_vocab_size(m, err);
    if (!st)
        st = bind_tensors(m, err);
    if (st && err && strncmp(err->message, label, strlen(label)) != 0)
        bg_error_prefix(err, "%s: ", label);
    if (st) {
        brigade_model_free(m);
        return st;
    }
    *out = m;
    return BRIGADE_OK;
}

brigade_status brigade_model_load(const char *path, const brigade_model_options *opts,
                                  brigade_model **out, brigade_error *err)
{
    *out = NULL;
    brigade_gguf_options gopts = {0};
    if (opts) {
        gopts.no_mmap = opts->no_mmap;
        gopts.progress = opts->progress;
        gopts.progress_user = opts->progress_user;
    }
    brigade_gguf *file;
    brigade_status st = brigade_gguf_open(path, &gopts, &file, err);
    return st ? st : bg_model_from_file(file, path, out, err);
}

void brigade_model_free(brigade_model *m)
{
    if (!m)
        return;
    brigade_gguf_close(m->file);
    free(m->header);
    free(m->layers);
    free(m);
}

const brigade_gguf *brigade_model_file(const brigade_model *m) { return m->file; }
const char *brigade_model_arch(const brigade_model *m) { return bg_arch_name(m->hp.arch); }
uint32_t brigade_model_n_layers(const brigade_model *m) { return m->hp.n_layers; }
uint32_t brigade_model_n_vocab(const brigade_model *m) { return m->hp.n_vocab; }
uint64_t brigade_model_n_params(const brigade_model *m) { return m->n_params; }
uint64_t brigade_model_weight_bytes(const brigade_model *m) { return m->weight_bytes; }

/* Which part of the model a role belongs to, as brigade fit reports it. */
static uint64_t *part_of(brigade_weight_breakdown *b, bg_role r)
{
    switch (r) {
    case BG_ROLE_TOKEN_EMBD: return &b->token_embd;
    case BG_ROLE_OUTPUT: return &b->output;
    case BG_ROLE_OUTPUT_NORM:
    case BG_ROLE_ATTN_NORM:
    case BG_ROLE_POST_NORM:
    case BG_ROLE_FFN_NORM: return &b->norms;
    case BG_ROLE_ATTN_Q:
    case BG_ROLE_ATTN_K:
    case BG_ROLE_ATTN_V:
    case BG_ROLE_ATTN_OUT:
    case BG_ROLE_ATTN_Q_NORM:
    case BG_ROLE_ATTN_K_NORM: return &b->attention;
    case BG_ROLE_FFN_GATE_INP: return &b->router;
    case BG_ROLE_FFN_GATE_EXPS:
    case BG_ROLE_FFN_UP_EXPS:
    case BG_ROLE_FFN_DOWN_EXPS: return &b->routed_experts;
    case BG_ROLE_FFN_GATE_INP_SHEXP:
    case BG_ROLE_FFN_GATE_SHEXP:
    case BG_ROLE_FFN_UP_SHEXP:
    case BG_ROLE_FFN_DOWN_SHEXP: return &b->shared_experts;
    default: return &b->deltanet; /* the SSM roles */
    }
}

void brigade_model_weights(const brigade_model *m, brigade_weight_breakdown *out)
{
    memset(out, 0, sizeof *out);
    for (int r = 0; r < BG_ROLE_COUNT; r++) {
        const brigade_tensor_info *t = m->global.t[r];
        /* a tied output is the embedding matrix, counted once */
        if (t && !(r == BG_ROLE_OUTPUT && t == m->global.t[BG_ROLE_TOKEN_EMBD]))
            *part_of(out, (bg_role)r) += t->n_bytes;
    }
    for (uint32_t il = 0; il < m->hp.n_layers; il++) {
        for (int r = 0; r < BG_ROLE_COUNT; r++)
            if (m->layers[il].t[r])
                *part_of(out, (bg_role)r) += m->layers[il].t[r]->n_bytes;
        if (bg_hparams_is_recurrent(&m->hp, il))
            out->n_deltanet_layers++;
        else
            out->n_attention_layers++;
    }
}
