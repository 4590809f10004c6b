#include "quant_mix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "types.h"

/* ------------------------------------------------------------- file types */

typedef struct ftype_info {
    brigade_ftype ftype;
    const char *name;
    bg_type default_type;
} ftype_info;

static const ftype_info ftypes[] = {
    {BRIGADE_FTYPE_F32, "F32", BG_TYPE_F32},        {BRIGADE_FTYPE_F16, "F16", BG_TYPE_F16},
    {BRIGADE_FTYPE_BF16, "BF16", BG_TYPE_BF16},     {BRIGADE_FTYPE_Q4_0, "Q4_0", BG_TYPE_Q4_0},
    {BRIGADE_FTYPE_Q4_1, "Q4_1", BG_TYPE_Q4_1},     {BRIGADE_FTYPE_Q5_0, "Q5_0", BG_TYPE_Q5_0},
    {BRIGADE_FTYPE_Q5_1, "Q5_1", BG_TYPE_Q5_1},     {BRIGADE_FTYPE_Q8_0, "Q8_0", BG_TYPE_Q8_0},
    {BRIGADE_FTYPE_Q2_K, "Q2_K", BG_TYPE_Q2_K},     {BRIGADE_FTYPE_Q3_K_S, "Q3_K_S", BG_TYPE_Q3_K},
    {BRIGADE_FTYPE_Q3_K_M, "Q3_K_M", BG_TYPE_Q3_K}, {BRIGADE_FTYPE_Q3_K_L, "Q3_K_L", BG_TYPE_Q3_K},
    {BRIGADE_FTYPE_Q4_K_S, "Q4_K_S", BG_TYPE_Q4_K}, {BRIGADE_FTYPE_Q4_K_M, "Q4_K_M", BG_TYPE_Q4_K},
    {BRIGADE_FTYPE_Q5_K_S, "Q5_K_S", BG_TYPE_Q5_K}, {BRIGADE_FTYPE_Q5_K_M, "Q5_K_M", BG_TYPE_Q5_K},
    {BRIGADE_FTYPE_Q6_K, "Q6_K", BG_TYPE_Q6_K},
};

static const ftype_info *ftype_find(brigade_ftype ftype)
{
    for (size_t i = 0; i < sizeof ftypes / sizeof *ftypes; i++)
        if (ftypes[i].ftype == ftype)
            return &ftypes[i];
    return NULL;
}

const char *brigade_ftype_name(brigade_ftype ftype)
{
    const ftype_info *f = ftype_find(ftype);
    return f ? f->name : NULL;
}

bool brigade_ftype_from_name(const char *name, brigade_ftype *out)
{
    for (size_t i = 0; name && i < sizeof ftypes / sizeof *ftypes; i++)
        if (strcasecmp(ftypes[i].name, name) == 0) {
            *out = ftypes[i].ftype;
            return true;
        }
    return false;
}

uint32_t brigade_ftype_default_type(brigade_ftype ftype)
{
    const ftype_info *f = ftype_find(ftype);
    return f ? (uint32_t)f->default_type : BG_TYPE_COUNT;
}

/* ---------------------------------------------------------------- order */

/* The block number of "blk.N.*", else -1 (as the quantizer's sort reads it). */
static long block_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    char *end;
    long n = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' ? n : -1;
}

typedef struct order_key {
    long block;
    const char *name;
    size_t index;
} order_key;

static int cmp_order(const void *a, const void *b)
{
    const order_key *ka = a, *kb = b;
    if (ka->block != kb->block)
        return ka->block < kb->block ? -1 : 1;
    return strcmp(ka->name, kb->name);
}

bool bg_mix_order(const bg_mix_tensor *tensors, size_t n, size_t *perm)
{
    order_key *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return false;
    for (size_t i = 0; i < n; i++)
        keys[i] = (order_key){block_of(tensors[i].name), tensors[i].name, i};
    qsort(keys, n, sizeof *keys, cmp_order);
    for (size_t i = 0; i < n; i++)
        perm[i] = keys[i].index;
    free(keys);
    return true;
}

/* ------------------------------------------------------------ categories */

typedef enum category {
    CAT_OTHER, CAT_TOKEN_EMBD, CAT_OUTPUT, CAT_ATTN_V_LIKE, CAT_ATTN_K, CAT_ATTN_Q,
    CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN,
} category;

static bool has(const char *name, const char *part) { return strstr(name, part) != NULL; }

/* Broad roles by name, tested in the quantizer's order (attn_qkv, the
 * DeltaNet input projection, counts as attn_v: both get more bits). */
static category category_of(const char *name)
{
    if (strcmp(name, "output.weight") == 0)
        return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    if (has(name, "attn_qkv.weight") || has(name, "attn_kv_b.weight") || has(name, "attn_v.weight"))
        return CAT_ATTN_V_LIKE;
    if (has(name, "attn_k.weight"))
        return CAT_ATTN_K;
    if (has(name, "attn_q.weight"))
        return CAT_ATTN_Q;
    if (has(name, "attn_output.weight"))
        return CAT_ATTN_OUTPUT;
    if (has(name, "ffn_up"))
        return CAT_FFN_UP;
    if (has(name, "ffn_gate"))
        return CAT_FFN_GATE;
    if (has(name, "ffn_down"))
        return CAT_FFN_DOWN;
    return CAT_OTHER;
}

bool bg_mix_quantizable(const bg_mix_tensor *t)
{
    size_t len = strlen(t->name);
    if (t->n_dims < 2 || len < 6 || strcmp(t->name + len - 6, "weight") != 0)
        return false;
    static const char *const kept[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d", "shortconv.conv.weight",
        "altup", "laurel", "per_layer_model_proj", "attn_rel_b.weight",
    };
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        if (has(t->name, kept[i]))
            return false;
    return strcmp(t->name, "position_embd.weight") != 0 &&
           strcmp(t->name, "token_types.weight") != 0;
}

/* ----------------------------------------------------------------- rules */

typedef struct mix_state {
    const bg_mix_options *o;
    uint32_t n_layers, n_expert, n_gqa;
    bool tied_embeddings; /* no output.weight: token_embd doubles as output */
    int n_attn_v, i_attn_v;
    int i_ffn_down, i_ffn_gate, i_ffn_up;
} mix_state;

/* The first and last eighth of the layers, and every third in between. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static uint32_t block_elems(uint32_t type) { return bg_type_get(type)->block_elems; }

/* The layer a feed-forward tensor belongs to: MoE models name it, dense
 * ones count (experts need not be stored in layer order). */
static brigade_status ffn_layer(mix_state *s, const char *name, int *counter, int *layer,
                                brigade_error *err)
{
    *layer = (*counter)++;
    if (s->n_expert <= 1)
        return BRIGADE_OK;
    long b = block_of(name);
    if (b < 0 || b >= (long)s->n_layers)
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "tensor '%s': cannot tell its layer (expected blk.N. with N < %u)", name,
                       s->n_layers);
    *layer = (int)b;
    return BRIGADE_OK;
}

static brigade_status mixed_type(mix_state *s, const bg_mix_tensor *t, category cat,
                                 uint32_t *type, brigade_error *err)
{
    brigade_ftype f = s->o->ftype;
    int n = (int)s->n_layers;
    bool km = f == BRIGADE_FTYPE_Q4_K_M || f == BRIGADE_FTYPE_Q5_K_M;
    bool eight_experts = s->n_expert == 8;
    int layer;
    brigade_status st = BRIGADE_OK;

    if (cat == CAT_OUTPUT || (s->tied_embeddings && cat == CAT_TOKEN_EMBD)) {
        if (s->o->output_type >= 0)
            *type = (uint32_t)s->o->output_type;
        else if (t->ne[0] % block_elems(*type) != 0)
            *type = BG_TYPE_Q8_0;
        else if (*type != BG_TYPE_Q8_0)
            *type = BG_TYPE_Q6_K;
    } else if (cat == CAT_TOKEN_EMBD) {
        /* the default type, unless overridden (handled by the caller) */
    } else if (cat == CAT_ATTN_V_LIKE) {
        if (f == BRIGADE_FTYPE_Q2_K)
            *type = s->n_gqa >= 4 ? BG_TYPE_Q4_K : BG_TYPE_Q3_K;
        else if (f == BRIGADE_FTYPE_Q3_K_M)
            *type = s->i_attn_v < 2 ? BG_TYPE_Q5_K : BG_TYPE_Q4_K;
        else if (f == BRIGADE_FTYPE_Q3_K_L)
            *type = BG_TYPE_Q5_K;
        else if (km && more_bits(s->i_attn_v, s->n_attn_v))
            *type = BG_TYPE_Q6_K;
        else if (f == BRIGADE_FTYPE_Q4_K_S && s->i_attn_v < 4)
            *type = BG_TYPE_Q5_K;
        if (eight_experts)
            *type = BG_TYPE_Q8_0;
        s->i_attn_v++;
    } else if (cat == CAT_ATTN_K) {
        if (eight_experts)
            *type = BG_TYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        st = ffn_layer(s, t->name, &s->i_ffn_down, &layer, err);
        if (st)
            return st;
        if (f == BRIGADE_FTYPE_Q2_K)
            *type = BG_TYPE_Q3_K;
        else if (f == BRIGADE_FTYPE_Q3_K_M) /* llama.cpp's Falcon rule aside */
            *type = layer < n / 16 ? BG_TYPE_Q5_K : BG_TYPE_Q4_K;
        else if (f == BRIGADE_FTYPE_Q3_K_L)
            *type = BG_TYPE_Q5_K;
        else if (km && more_bits(layer, n))
            *type = BG_TYPE_Q6_K;
        else if (f == BRIGADE_FTYPE_Q4_K_S && layer < n / 8)
            *type = BG_TYPE_Q5_K;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (eight_experts) {
            if (f == BRIGADE_FTYPE_Q2_K || f == BRIGADE_FTYPE_Q3_K_S || f == BRIGADE_FTYPE_Q3_K_M ||
                f == BRIGADE_FTYPE_Q4_K_S || f == BRIGADE_FTYPE_Q4_K_M)
                *type = BG_TYPE_Q5_K;
        } else if (f == BRIGADE_FTYPE_Q2_K) {
            *type = BG_TYPE_Q3_K;
        } else if (f == BRIGADE_FTYPE_Q3_K_M) {
            *type = BG_TYPE_Q4_K;
        } else if (f == BRIGADE_FTYPE_Q3_K_L) {
            *type = BG_TYPE_Q5_K;
        }
    } else if (cat == CAT_FFN_GATE) {
        st = ffn_layer(s, t->name, &s->i_ffn_gate, &layer, err);
    } else if (cat == CAT_FFN_UP) {
        st = ffn_layer(s, t->name, &s->i_ffn_up, &layer, err);
    }
    return st;
}

uint32_t bg_mix_fit_row(uint32_t type, uint64_t ne0)
{
    if (ne0 % block_elems(type) == 0)
        return type;
    uint32_t alt = type;
    switch (type) {
    case BG_TYPE_Q4_K: alt = BG_TYPE_Q5_0; break;
    case BG_TYPE_Q5_K: alt = BG_TYPE_Q5_1; break;
    case BG_TYPE_Q6_K: alt = BG_TYPE_Q8_0; break;
    case BG_TYPE_IQ4_XS: alt = BG_TYPE_IQ4_NL; break;
    case BG_TYPE_Q2_K:
    case BG_TYPE_Q3_K: alt = BG_TYPE_Q4_0; break;
    default: break;
    }
    return ne0 % block_elems(alt) == 0 ? alt : BG_TYPE_F16;
}

static bool is_block_quantized(uint32_t type)
{
    return type != BG_TYPE_F32 && type != BG_TYPE_F16 && type != BG_TYPE_BF16;
}

static bool valid_override(int32_t type)
{
    return type < 0 || (type < BG_TYPE_COUNT && bg_type_get((uint32_t)type));
}

brigade_status bg_mix_assign(const bg_mix_tensor *tensors, size_t n, const bg_mix_model *model,
                             const bg_mix_options *opts, uint32_t *types, uint32_t *n_fallback,
                             brigade_error *err)
{
    const ftype_info *fi = ftype_find(opts->ftype);
    if (!fi)
        return bg_fail(err, BRIGADE_ERR_ARG, "unsupported file type %d", (int)opts->ftype);
    if (!valid_override(opts->output_type) || !valid_override(opts->token_embd_type))
        return bg_fail(err, BRIGADE_ERR_ARG, "invalid output or token-embedding type");
    mix_state s = {.o = opts, .n_layers = model->n_layers,
                   .n_expert = model->n_expert ? model->n_expert : 1, .n_gqa = model->n_gqa,
                   .tied_embeddings = true};
    uint32_t fallbacks = 0;
    for (size_t i = 0; i < n; i++) {
        category c = category_of(tensors[i].name);
        s.n_attn_v += c == CAT_ATTN_V_LIKE;
        if (c == CAT_OUTPUT)
            s.tied_embeddings = false;
    }
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    if (!perm || !bg_mix_order(tensors, n, perm)) {
        free(perm);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    }
    brigade_status st = BRIGADE_OK;
    for (size_t k = 0; k < n && !st; k++) {
        const bg_mix_tensor *t = &tensors[perm[k]];
        uint32_t *out = &types[perm[k]];
        category c = category_of(t->name);
        *out = t->type;
        if (!bg_mix_quantizable(t))
            continue;
        if (opts->token_embd_type >= 0 && c == CAT_TOKEN_EMBD) {
            *out = (uint32_t)opts->token_embd_type;
            continue;
        }
        if (opts->output_type >= 0 && c == CAT_OUTPUT) {
            *out = (uint32_t)opts->output_type;
            continue;
        }
        *out = fi->default_type;
        if (!is_block_quantized(*out))
            continue;
        if (!opts->pure)
            st = mixed_type(&s, t, c, out, err);
        if (!st) {
            uint32_t chosen = *out;
            *out = bg_mix_fit_row(chosen, t->ne[0]);
            fallbacks += *out != chosen;
        }
    }
    free(perm);
    if (n_fallback)
        *n_fallback = fallbacks;
    return st;
}
