/* Synthetic models: random weights with the exact geometry, tensor names and
 * metadata of a real model, and a real tokenizer copied from a vocabulary
 * file. Weights are drawn per row from a seed, so a file is reproducible and
 * independent of the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "gguf_writer.h"
#include "keys.h"
#include "presets.h"
#include "quant.h"
#include "tensor_names.h"
#include "types.h"

/* ------------------------------------------------------------------ random */

typedef struct rng {
    uint64_t state;
    double spare; /* Box-Muller makes normals in pairs */
    bool has_spare;
} rng;

static uint64_t splitmix64(rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): never 0, so log() is safe. */
static double uniform01(rng *r)
{
    return ((splitmix64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double gaussian(rng *r)
{
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    double radius = sqrt(-2.0 * log(uniform01(r))), angle = 6.283185307179586 * uniform01(r);
    r->spare = radius * sin(angle);
    r->has_spare = true;
    return radius * cos(angle);
}

static uint64_t hash_str(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ------------------------------------------------------------ tensor plan */

typedef enum init_kind {
    INIT_GAUSS,     /* N(0, scale^2) */
    INIT_NEAR_ONE,  /* norm weights: 1 + N(0, scale^2) */
    INIT_SSM_A,     /* -U(1, 16), the real A = -exp(A_log) init */
    INIT_DT_BIAS,   /* inverse softplus of dt ~ logU(1e-3, 1e-1) */
} init_kind;

typedef struct plan_tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    init_kind init;
    float scale;
} plan_tensor;

typedef struct plan {
    plan_tensor *t;
    size_t n, cap;
    uint32_t weight_type;
    brigade_error *err;
    brigade_status st;
} plan;

/* Types llama.cpp's quantizer falls back to when a row does not hold whole
 * blocks of the requested type. */
static uint32_t fallback_type(uint32_t type)
{
    switch (type) {
    case BG_TYPE_Q4_K: return BG_TYPE_Q5_0;
    case BG_TYPE_Q5_K: return BG_TYPE_Q5_1;
    case BG_TYPE_Q6_K: return BG_TYPE_Q8_0;
    case BG_TYPE_IQ4_XS: return BG_TYPE_IQ4_NL;
    default: return BG_TYPE_F16;
    }
}

static uint32_t matrix_type(uint32_t want, uint64_t ne0)
{
    uint64_t bytes;
    for (int tries = 0; tries < 3; tries++) {
        if (bg_type_row_bytes((bg_type)want, ne0, &bytes))
            return want;
        want = fallback_type(want);
    }
    return BG_TYPE_F32;
}

static void add(plan *p, const char *fmt, uint32_t il, uint32_t n_dims, uint64_t ne0,
                uint64_t ne1, uint64_t ne2, init_kind init, float scale, bool quantized)
{
    if (p->st)
        return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        plan_tensor *t = realloc(p->t, cap * sizeof *t);
        if (!t) {
            p->st = bg_fail(p->err, BRIGADE_ERR_NOMEM, "synth: out of memory");
            return;
        }
        p->t = t;
        p->cap = cap;
    }
    plan_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, fmt, il);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->type = quantized && n_dims >= 2 ? matrix_type(p->weight_type, ne0) : BG_TYPE_F32;
    t->init = init;
    t->scale = scale;
}

/* A weight matrix [in, out(, experts)] scaled 1/sqrt(in) so activations keep
 * their size through many layers. */
static void matrix(plan *p, const char *fmt, uint32_t il, uint64_t in, uint64_t out,
                   uint64_t experts)
{
    add(p, fmt, il, experts > 1 ? 3 : 2, in, out, experts, INIT_GAUSS, (float)(1.0 / sqrt((double)in)),
        true);
}

static void norm(plan *p, const char *fmt, uint32_t il, uint64_t n)
{
    add(p, fmt, il, 1, n, 1, 1, INIT_NEAR_ONE, 0.05f, false);
}

static void plan_attention(plan *p, const bg_preset *g, uint32_t il, bool gated_q)
{
    uint64_t q_out = (uint64_t)g->n_head * g->head_dim * (gated_q ? 2 : 1);
    uint64_t kv_out = (uint64_t)g->n_head_kv * g->head_dim;
    matrix(p, TN_ATTN_Q, il, g->n_embd, q_out, 1);
    matrix(p, TN_ATTN_K, il, g->n_embd, kv_out, 1);
    matrix(p, TN_ATTN_V, il, g->n_embd, kv_out, 1);
    matrix(p, TN_ATTN_OUT, il, (uint64_t)g->n_head * g->head_dim, g->n_embd, 1);
    norm(p, TN_ATTN_Q_NORM, il, g->head_dim);
    norm(p, TN_ATTN_K_NORM, il, g->head_dim);
}

static void plan_deltanet(plan *p, const bg_preset *g, uint32_t il)
{
    uint64_t key_dim = (uint64_t)g->ssm_state_size * g->ssm_group_count;
    uint64_t value_dim = (uint64_t)g->ssm_state_size * g->ssm_time_step_rank;
    uint64_t conv_dim = 2 * key_dim + value_dim;
    matrix(p, TN_ATTN_QKV, il, g->n_embd, conv_dim, 1);
    matrix(p, TN_ATTN_GATE, il, g->n_embd, value_dim, 1);
    /* The convolution stays f32, as llama.cpp's quantizer leaves it. */
    add(p, TN_SSM_CONV1D, il, 2, g->ssm_conv_kernel, conv_dim, 1, INIT_GAUSS,
        (float)(1.0 / sqrt((double)g->ssm_conv_kernel)), false);
    add(p, TN_SSM_DT, il, 1, g->ssm_time_step_rank, 1, 1, INIT_DT_BIAS, 0, false);
    add(p, TN_SSM_A, il, 1, g->ssm_time_step_rank, 1, 1, INIT_SSM_A, 0, false);
    matrix(p, TN_SSM_BETA, il, g->n_embd, g->ssm_time_step_rank, 1);
    matrix(p, TN_SSM_ALPHA, il, g->n_embd, g->ssm_time_step_rank, 1);
    norm(p, TN_SSM_NORM, il, g->ssm_state_size);
    matrix(p, TN_SSM_OUT, il, value_dim, g->n_embd, 1);
}

static void plan_moe(plan *p, const bg_preset *g, uint32_t il)
{
    /* The router stays f32: llama.cpp never quantizes ffn_gate_inp. */
    add(p, TN_FFN_GATE_INP, il, 2, g->n_embd, g->n_expert, 1, INIT_GAUSS,
        (float)(1.0 / sqrt((double)g->n_embd)), false);
    matrix(p, TN_FFN_GATE_EXPS, il, g->n_embd, g->n_ff_exp, g->n_expert);
    matrix(p, TN_FFN_UP_EXPS, il, g->n_embd, g->n_ff_exp, g->n_expert);
    matrix(p, TN_FFN_DOWN_EXPS, il, g->n_ff_exp, g->n_embd, g->n_expert);
    if (g->n_ff_shexp) {
        add(p, TN_FFN_GATE_INP_SHEXP, il, 1, g->n_embd, 1, 1, INIT_GAUSS,
            (float)(1.0 / sqrt((double)g->n_embd)), false);
        matrix(p, TN_FFN_GATE_SHEXP, il, g->n_embd, g->n_ff_shexp, 1);
        matrix(p, TN_FFN_UP_SHEXP, il, g->n_embd, g->n_ff_shexp, 1);
        matrix(p, TN_FFN_DOWN_SHEXP, il, g->n_ff_shexp, g->n_embd, 1);
    }
}

/* Tensor order follows llama.cpp's converter: embeddings, then each block,
 * then the output head. */
static void plan_model(plan *p, const bg_preset *g, uint32_t n_layers, uint32_t n_vocab)
{
    add(p, TN_TOKEN_EMBD, 0, 2, g->n_embd, n_vocab, 1, INIT_GAUSS, 1.0f, true);
    for (uint32_t il = 0; il < n_layers; il++) {
        norm(p, TN_ATTN_NORM, il, g->n_embd);
        if (g->arch == BG_ARCH_QWEN35MOE) {
            norm(p, TN_ATTN_POST_NORM, il, g->n_embd);
            if (bg_preset_is_recurrent(g, il))
                plan_deltanet(p, g, il);
            else
                plan_attention(p, g, il, true);
        } else {
            plan_attention(p, g, il, false);
            norm(p, TN_FFN_NORM, il, g->n_embd);
        }
        plan_moe(p, g, il);
    }
    norm(p, TN_OUTPUT_NORM, 0, g->n_embd);
    matrix(p, TN_OUTPUT, 0, g->n_embd, n_vocab, 1);
}

/* -------------------------------------------------------------- metadata */

static brigade_status set_u32(bg_gguf_writer *w, const char *arch, const char *suffix,
                              uint32_t v, brigade_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return bg_gguf_set_u32(w, key, v, err);
}

static brigade_status set_f32(bg_gguf_writer *w, const char *arch, const char *suffix, float v,
                              brigade_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return bg_gguf_set_f32(w, key, v, err);
}

/* llama.cpp's general.file_type for a model whose matrices are all `type`. */
static uint32_t file_type_of(uint32_t type)
{
    switch (type) {
    case BG_TYPE_F32: return 0;
    case BG_TYPE_F16: return 1;
    case BG_TYPE_Q4_0: return 2;
    case BG_TYPE_Q4_1: return 3;
    case BG_TYPE_Q8_0: return 7;
    case BG_TYPE_Q5_0: return 8;
    case BG_TYPE_Q5_1: return 9;
    case BG_TYPE_Q4_K: return 14; /* Q4_K_S: every matrix Q4_K */
    case BG_TYPE_Q5_K: return 16; /* Q5_K_S */
    case BG_TYPE_Q6_K: return 18;
    case BG_TYPE_IQ4_NL: return 25;
    case BG_TYPE_IQ4_XS: return 30;
    case BG_TYPE_BF16: return 32;
    default: return 0;
    }
}

static brigade_status write_hparams(bg_gguf_writer *w, const bg_preset *g, uint32_t n_layers,
                                    uint32_t n_expert_used, uint32_t weight_type,
                                    brigade_error *err)
{
    const char *a = bg_arch_name(g->arch);
    brigade_status st = bg_gguf_set_str(w, KEY_ARCHITECTURE, a, err);
    if (!st) st = bg_gguf_set_str(w, KEY_NAME, g->display_name, err);
    if (!st) st = set_u32(w, a, AKEY_BLOCK_COUNT, n_layers, err);
    if (!st) st = set_u32(w, a, AKEY_CONTEXT_LENGTH, g->n_ctx_train, err);
    if (!st) st = set_u32(w, a, AKEY_EMBEDDING_LENGTH, g->n_embd, err);
    if (!st && g->n_ff) st = set_u32(w, a, AKEY_FF_LENGTH, g->n_ff, err);
    if (!st) st = set_u32(w, a, AKEY_HEAD_COUNT, g->n_head, err);
    if (!st) st = set_u32(w, a, AKEY_HEAD_COUNT_KV, g->n_head_kv, err);
    if (!st) st = set_u32(w, a, AKEY_KEY_LENGTH, g->head_dim, err);
    if (!st) st = set_u32(w, a, AKEY_VALUE_LENGTH, g->head_dim, err);
    if (!st) st = set_f32(w, a, AKEY_ROPE_FREQ_BASE, g->rope_freq_base, err);
    if (!st) st = set_f32(w, a, AKEY_RMS_EPS, g->rms_eps, err);
    if (!st) st = set_u32(w, a, AKEY_EXPERT_COUNT, g->n_expert, err);
    if (!st) st = set_u32(w, a, AKEY_EXPERT_USED_COUNT, n_expert_used, err);
    if (!st) st = set_u32(w, a, AKEY_EXPERT_FF_LENGTH, g->n_ff_exp, err);
    if (!st) st = set_u32(w, a, AKEY_ROPE_DIM_COUNT, g->rope_dims, err);
    if (!st && g->arch == BG_ARCH_QWEN35MOE) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", a, AKEY_ROPE_SECTIONS);
        st = bg_gguf_set_array(w, key, BRIGADE_VALUE_I32, g->rope_sections, 4, err);
        if (!st) st = set_u32(w, a, AKEY_EXPERT_SHARED_FF_LENGTH, g->n_ff_shexp, err);
        if (!st) st = set_u32(w, a, AKEY_SSM_CONV_KERNEL, g->ssm_conv_kernel, err);
        if (!st) st = set_u32(w, a, AKEY_SSM_STATE_SIZE, g->ssm_state_size, err);
        if (!st) st = set_u32(w, a, AKEY_SSM_GROUP_COUNT, g->ssm_group_count, err);
        if (!st) st = set_u32(w, a, AKEY_SSM_TIME_STEP_RANK, g->ssm_time_step_rank, err);
        if (!st) st = set_u32(w, a, AKEY_SSM_INNER_SIZE, g->ssm_inner_size, err);
        if (!st) st = set_u32(w, a, AKEY_FULL_ATTN_INTERVAL, g->full_attention_interval, err);
    }
    if (!st) st = bg_gguf_set_u32(w, KEY_FILE_TYPE, file_type_of(weight_type), err);
    if (!st) st = bg_gguf_set_u32(w, KEY_QUANT_VERSION, 2, err);
    return st;
}

/* ------------------------------------------------------------- tokenizer */

/* GPT-2's byte-to-character map: printable bytes stand for themselves, the
 * rest are shifted to code points from 256 up. Writes UTF-8, returns length. */
static int byte_token(unsigned b, char *out)
{
    unsigned cp = b;
    bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    if (!printable) {
        unsigned n = 0;
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae)))
                n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

enum { TOKEN_NORMAL = 1, TOKEN_CONTROL = 3 };

/* Writes tokens, types and (if given) scores, padded with control tokens
 * "[PADn]" up to n_vocab as llama.cpp's converter pads a vocabulary to the
 * embedding size. types may be NULL (all normal). */
static brigade_status write_token_arrays(bg_gguf_writer *w, const brigade_string *tokens,
                                         const int32_t *types, const float *scores,
                                         uint64_t n_have, uint32_t n_vocab, brigade_error *err)
{
    brigade_string *tok = calloc(n_vocab, sizeof *tok);
    int32_t *typ = calloc(n_vocab, sizeof *typ);
    float *sco = calloc(n_vocab, sizeof *sco);
    char *pad_names = calloc((size_t)(n_vocab - n_have) + 1, 16);
    brigade_status st = BRIGADE_OK;
    if (!tok || !typ || !sco || !pad_names) {
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory for %u tokens", n_vocab);
        goto done;
    }
    for (uint64_t i = 0; i < n_vocab; i++) {
        if (i < n_have) {
            tok[i] = tokens[i];
            typ[i] = types ? types[i] : TOKEN_NORMAL;
            sco[i] = scores ? scores[i] : 0;
        } else {
            char *name = pad_names + (i - n_have) * 16;
            int len = snprintf(name, 16, "[PAD%llu]", (unsigned long long)i);
            tok[i] = (brigade_string){name, (uint64_t)len};
            typ[i] = TOKEN_CONTROL;
        }
    }
    brigade_value tv = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                        .count = n_vocab, .as.strings = tok};
    st = bg_gguf_set(w, KEY_TOK_TOKENS, &tv, err);
    if (!st)
        st = bg_gguf_set_array(w, KEY_TOK_TYPES, BRIGADE_VALUE_I32, typ, n_vocab, err);
    if (!st && scores)
        st = bg_gguf_set_array(w, KEY_TOK_SCORES, BRIGADE_VALUE_F32, sco, n_vocab, err);
done:
    free(tok);
    free(typ);
    free(sco);
    free(pad_names);
    return st;
}

/* A small byte-level BPE vocabulary (all 256 bytes, a few merges, ChatML
 * control tokens) for models made without --vocab. */
static brigade_status builtin_vocab(bg_gguf_writer *w, uint32_t preset_vocab, uint32_t *n_vocab,
                                    brigade_error *err)
{
    static const char *const merges[] = {"Ġ t", "h e", "i n", "e r", "a n", "Ġ a", "o n",
                                         "r e", "Ġt he", "e n"};
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    enum { N_MERGES = sizeof merges / sizeof *merges, N_SPECIAL = 3 };
    enum { N = 256 + N_MERGES + N_SPECIAL };
    static char bytes_utf8[256][3];
    static char merged[N_MERGES][16];
    brigade_string tokens[N], merge_strs[N_MERGES];
    int32_t types[N];
    for (unsigned b = 0; b < 256; b++) {
        int len = byte_token(b, bytes_utf8[b]);
        tokens[b] = (brigade_string){bytes_utf8[b], (uint64_t)len};
        types[b] = TOKEN_NORMAL;
    }
    for (unsigned i = 0; i < N_MERGES; i++) {
        const char *m = merges[i];
        size_t k = 0;
        for (const char *c = m; *c && k < sizeof merged[i] - 1; c++)
            if (*c != ' ')
                merged[i][k++] = *c;
        merged[i][k] = 0;
        tokens[256 + i] = (brigade_string){merged[i], k};
        types[256 + i] = TOKEN_NORMAL;
        merge_strs[i] = (brigade_string){m, strlen(m)};
    }
    for (unsigned i = 0; i < N_SPECIAL; i++) {
        tokens[256 + N_MERGES + i] = (brigade_string){specials[i], strlen(specials[i])};
        types[256 + N_MERGES + i] = TOKEN_CONTROL;
    }
    brigade_value mer = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                         .count = N_MERGES, .as.strings = merge_strs};
    uint32_t eos = 256 + N_MERGES, eot = eos + 2;
    brigade_status st = bg_gguf_set_str(w, KEY_TOK_MODEL, "gpt2", err);
    if (!st) st = bg_gguf_set_str(w, KEY_TOK_PRE, "qwen2", err);
    *n_vocab = preset_vocab > N ? preset_vocab : N;
    if (!st) st = write_token_arrays(w, tokens, types, NULL, N, *n_vocab, err);
    if (!st) st = bg_gguf_set(w, KEY_TOK_MERGES, &mer, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_EOS, eos, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_PAD, eos, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_BOS, eos, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_EOT, eot, err);
    if (!st) st = bg_gguf_set_bool(w, KEY_TOK_ADD_BOS, false, err);
    return st;
}

/* Every tokenizer.* key of the vocabulary file is copied. */
static brigade_status copy_vocab(bg_gguf_writer *w, const char *path, uint32_t preset_vocab,
                                 uint32_t *n_vocab, brigade_error *err)
{
    brigade_gguf *vocab;
    brigade_status st = brigade_gguf_open(path, NULL, &vocab, err);
    if (st)
        return st;
    const brigade_value *tokens = brigade_gguf_get(vocab, KEY_TOK_TOKENS);
    const brigade_value *types = brigade_gguf_get(vocab, KEY_TOK_TYPES);
    const brigade_value *scores = brigade_gguf_get(vocab, KEY_TOK_SCORES);
    if (!tokens) {
        st = bg_fail(err, BRIGADE_ERR_FORMAT, "%s: no '%s' array: not a vocabulary file", path,
                     KEY_TOK_TOKENS);
    } else if ((types && types->elem_type != BRIGADE_VALUE_I32) ||
               (scores && scores->elem_type != BRIGADE_VALUE_F32)) {
        st = bg_fail(err, BRIGADE_ERR_UNSUPPORTED, "%s: token types must be i32 and scores f32",
                     path);
    } else if ((types && types->count != tokens->count) ||
               (scores && scores->count != tokens->count)) {
        st = bg_fail(err, BRIGADE_ERR_FORMAT,
                     "%s: %llu tokens but %llu token types and %llu scores", path,
                     (unsigned long long)tokens->count,
                     (unsigned long long)(types ? types->count : tokens->count),
                     (unsigned long long)(scores ? scores->count : tokens->count));
    } else if (preset_vocab && tokens->count > preset_vocab) {
        st = bg_fail(err, BRIGADE_ERR_ARG,
                     "%s: %llu tokens do not fit the preset's vocabulary of %u", path,
                     (unsigned long long)tokens->count, preset_vocab);
    } else if (tokens->count == 0 || tokens->count > UINT32_MAX / 2) {
        st = bg_fail(err, BRIGADE_ERR_FORMAT, "%s: unusable token count %llu", path,
                     (unsigned long long)tokens->count);
    }
    if (!st) {
        *n_vocab = preset_vocab ? preset_vocab : (uint32_t)tokens->count;
        for (int64_t i = 0; i < brigade_gguf_kv_count(vocab) && !st; i++) {
            const char *key = brigade_gguf_kv_key(vocab, i);
            if (strncmp(key, "tokenizer.", 10) == 0 && strcmp(key, KEY_TOK_TOKENS) != 0 &&
                strcmp(key, KEY_TOK_TYPES) != 0 && strcmp(key, KEY_TOK_SCORES) != 0)
                st = bg_gguf_set(w, key, brigade_gguf_kv_value(vocab, i), err);
        }
        if (!st)
            st = write_token_arrays(w, tokens->as.strings, types ? types->as.numbers : NULL,
                                    scores ? scores->as.numbers : NULL, tokens->count, *n_vocab,
                                    err);
    }
    brigade_gguf_close(vocab);
    return st;
}

/* ----------------------------------------------------------------- weights */

typedef struct fill_job {
    const plan_tensor *t;
    uint64_t seed;
    uint64_t row0, rows; /* the chunk being made */
    float *values;       /* rows * ne[0] */
    uint8_t *out;        /* quantized/converted bytes */
    uint64_t row_bytes;
    const bg_quant_ops *ops;
    unsigned worker, n_workers;
} fill_job;

static float draw(const plan_tensor *t, rng *rng)
{
    switch (t->init) {
    case INIT_GAUSS: return (float)(gaussian(rng) * t->scale);
    case INIT_NEAR_ONE: return (float)(1.0 + gaussian(rng) * t->scale);
    case INIT_SSM_A: return (float)-(1.0 + 15.0 * uniform01(rng));
    case INIT_DT_BIAS: {
        double dt = exp(log(1e-3) + uniform01(rng) * (log(1e-1) - log(1e-3)));
        return (float)(dt + log(-expm1(-dt)));
    }
    }
    return 0;
}

static void *fill_rows(void *arg)
{
    const fill_job *job = arg;
    const plan_tensor *t = job->t;
    uint64_t ne0 = t->ne[0];
    for (uint64_t r = job->worker; r < job->rows; r += job->n_workers) {
        rng rng = {.state = job->seed ^ ((job->row0 + r) * 0xd1b54a32d192ed03ull)};
        float *row = job->values + r * ne0;
        for (uint64_t i = 0; i < ne0; i++)
            row[i] = draw(t, &rng);
        if (job->ops)
            job->ops->quantize(row, job->out + r * job->row_bytes, (int64_t)ne0);
    }
    return NULL;
}

enum { MAX_WORKERS = 64 };

static unsigned worker_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : (unsigned)n;
}

/* Chunks of rows are drawn and quantized in parallel, then streamed out. */
static brigade_status write_tensor(bg_gguf_writer *w, const plan_tensor *t, uint64_t seed,
                                   float *values, uint8_t *out, uint64_t chunk_rows,
                                   const brigade_synth_options *o, uint64_t *done,
                                   uint64_t total, brigade_error *err)
{
    uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3], row_bytes = 0;
    bg_type_row_bytes((bg_type)t->type, t->ne[0], &row_bytes);
    const bg_quant_ops *ops = t->type == BG_TYPE_F32 ? NULL : bg_quant_ops_get((bg_type)t->type);
    if (t->type != BG_TYPE_F32 && (!ops || !ops->quantize))
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED, "synth: tensor '%s': no quantizer for %s",
                       t->name, brigade_type_name(t->type));
    uint64_t tseed = hash_str(t->name, seed * 0x9e3779b97f4a7c15ull + 1469598103934665603ull);
    unsigned n_workers = worker_count();
    for (uint64_t row0 = 0; row0 < rows; row0 += chunk_rows) {
        fill_job jobs[MAX_WORKERS];
        pthread_t tids[MAX_WORKERS];
        uint64_t n = rows - row0 < chunk_rows ? rows - row0 : chunk_rows;
        unsigned started = 0;
        for (unsigned k = 0; k < n_workers; k++) {
            jobs[k] = (fill_job){t, tseed, row0, n, values, out, row_bytes, ops, k, n_workers};
            if (k > 0 && pthread_create(&tids[k], NULL, fill_rows, &jobs[k]) == 0)
                started |= 1u << (k & 31);
            else if (k > 0)
                fill_rows(&jobs[k]); /* no thread: do its share here */
        }
        fill_rows(&jobs[0]);
        for (unsigned k = 1; k < n_workers; k++)
            if (started & (1u << (k & 31)))
                pthread_join(tids[k], NULL);
        const void *bytes = ops ? (const void *)out : (const void *)values;
        brigade_status st = bg_gguf_writer_data(w, bytes, n * row_bytes, err);
        if (st)
            return st;
        *done += n * row_bytes;
        if (o->progress)
            o->progress(o->progress_user, *done, total);
    }
    return BRIGADE_OK;
}

static brigade_status write_weights(bg_gguf_writer *w, const plan *p,
                                    const brigade_synth_options *o, brigade_error *err)
{
    uint64_t max_ne0 = 0, total = 0, done = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->t[i].ne[0] > max_ne0)
            max_ne0 = p->t[i].ne[0];
        total += bg_gguf_writer_tensor_bytes(w, (int64_t)i);
    }
    /* About 32 MiB of floats per chunk, at least one row. */
    uint64_t chunk_rows = (32u << 20) / (max_ne0 * sizeof(float));
    if (chunk_rows == 0)
        chunk_rows = 1;
    float *values = malloc(chunk_rows * max_ne0 * sizeof *values);
    uint8_t *out = malloc(chunk_rows * max_ne0 * sizeof *values);
    brigade_status st = BRIGADE_OK;
    if (!values || !out)
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory for work buffers");
    for (size_t i = 0; i < p->n && !st; i++)
        st = write_tensor(w, &p->t[i], o->seed, values, out, chunk_rows, o, &done, total, err);
    free(values);
    free(out);
    return st;
}

/* -------------------------------------------------------------------- main */

static brigade_status check_options(const brigade_synth_options *o, const bg_preset **g,
                                    brigade_error *err)
{
    if (!o || !o->preset)
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: no preset given");
    *g = bg_preset_find(o->preset);
    if (!*g)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "synth: unknown preset '%s' (known: qwen3.6-35b-a3b, qwen3-30b-a3b, "
                       "tiny-qwen35moe, tiny-qwen3moe)",
                       o->preset);
    const bg_type_info *ti = bg_type_get(o->type);
    const bg_quant_ops *ops = bg_quant_ops_get((bg_type)o->type);
    bool is_weight_type = o->type == BG_TYPE_F32 ||
                          (ops && ops->quantize && ops->dot && o->type != BG_TYPE_Q8_1);
    if (!ti || !is_weight_type)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "synth: type '%s' cannot be used for weights (use f32, f16, bf16, q8_0, "
                       "q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, iq4_nl or iq4_xs)",
                       ti ? ti->name : "unknown");
    uint32_t n_layers = o->n_layers ? o->n_layers : (*g)->n_layers;
    if (n_layers > 1000)
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: %u layers is more than 1000", n_layers);
    if ((*g)->arch == BG_ARCH_QWEN35MOE && n_layers < (*g)->full_attention_interval)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "synth: %s needs at least %u layers (one full-attention layer)",
                       o->preset, (*g)->full_attention_interval);
    if (o->n_experts_used > (*g)->n_expert)
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: %u experts used, but the model has %u",
                       o->n_experts_used, (*g)->n_expert);
    return BRIGADE_OK;
}

brigade_status brigade_synth(const char *out_path, const brigade_synth_options *o,
                             brigade_error *err)
{
    const bg_preset *g = NULL;
    brigade_status st = check_options(o, &g, err);
    if (st)
        return st;
    uint32_t n_layers = o->n_layers ? o->n_layers : g->n_layers;
    uint32_t n_used = o->n_experts_used ? o->n_experts_used : g->n_expert_used;
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    if (!w)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory");
    plan p = {.weight_type = o->type, .err = err};
    uint32_t n_vocab = 0;
    st = write_hparams(w, g, n_layers, n_used, o->type, err);
    if (!st)
        st = o->vocab_path ? copy_vocab(w, o->vocab_path, g->n_vocab, &n_vocab, err)
                           : builtin_vocab(w, g->n_vocab, &n_vocab, err);
    if (!st) {
        plan_model(&p, g, n_layers, n_vocab);
        st = p.st;
    }
    for (size_t i = 0; i < p.n && !st; i++)
        st = bg_gguf_add_tensor(w, p.t[i].name, p.t[i].type, p.t[i].n_dims, p.t[i].ne, err);
    if (!st)
        st = bg_gguf_writer_begin(w, out_path, err);
    for (size_t i = 0; o->sparse && i < p.n && !st; i++)
        st = bg_gguf_writer_skip(w, bg_gguf_writer_tensor_bytes(w, (int64_t)i), err);
    if (!st && !o->sparse)
        st = write_weights(w, &p, o, err);
    if (!st)
        st = bg_gguf_writer_finish(w, err);
    free(p.t);
    bg_gguf_writer_free(w);
    if (st)
        remove(out_path);
    return st;
}
