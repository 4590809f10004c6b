/* Sessions: state allocation and the token loop around the per-architecture
 * layers. Every buffer is allocated once, when the session is created. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "error.h"
#include "ops.h"
#include "session.h"
#include "types.h"

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Each allocation is checked at the end: a NULL anywhere fails the session. */
typedef struct allocs {
    bool failed;
    uint64_t bytes;
} allocs;

static void *alloc_bytes(allocs *a, uint64_t n)
{
    void *p = n <= SIZE_MAX ? calloc(n ? (size_t)n : 1, 1) : NULL;
    a->failed |= p == NULL;
    a->bytes += n;
    return p;
}

static void *alloc_floats(allocs *a, uint64_t n)
{
    if (n > SIZE_MAX / sizeof(float)) {
        a->failed = true;
        return NULL;
    }
    void *p = calloc(n ? (size_t)n : 1, sizeof(float));
    a->failed |= p == NULL;
    a->bytes += n * sizeof(float);
    return p;
}

static brigade_status alloc_state(brigade_session *s, brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    allocs a = {0};
    const uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint64_t S = hp->ssm_state_size;
    const uint64_t key_dim = S * hp->ssm_group_count, value_dim = S * hp->ssm_time_step_rank;
    const uint64_t conv_dim = 2 * key_dim + value_dim;
    s->layers = calloc(hp->n_layers, sizeof *s->layers);
    if (!s->layers)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for %u layers", hp->n_layers);
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        bg_layer_state *st = &s->layers[il];
        if (bg_hparams_is_recurrent(hp, il)) {
            st->conv = alloc_floats(&a, conv_dim * (hp->ssm_conv_kernel - 1));
            st->ssm = alloc_floats(&a, (uint64_t)hp->ssm_time_step_rank * S * S);
        } else {
            st->k_cache = alloc_bytes(&a, (uint64_t)s->n_ctx * s->k_row_bytes);
            st->v_cache = alloc_bytes(&a, (uint64_t)s->n_ctx * s->v_row_bytes);
        }
    }
    const uint64_t qh = (uint64_t)hp->n_head * hp->head_dim, ub = s->n_ubatch;
    const uint64_t K = hp->n_expert_used;
    s->q_width = (size_t)max3(2 * qh, conv_dim, 1);
    s->a_width = (size_t)max3(qh, value_dim, 1);
    s->ff_width = (size_t)max3(hp->n_ff_exp, hp->n_ff_shexp, 1);
    s->x = alloc_floats(&a, ub * hp->n_embd);
    s->xn = alloc_floats(&a, ub * hp->n_embd);
    s->out = alloc_floats(&a, ub * hp->n_embd);
    s->q = alloc_floats(&a, ub * s->q_width);
    s->kv = alloc_floats(&a, ub * 2 * kv_dim);
    s->attn = alloc_floats(&a, ub * s->a_width);
    s->gate = alloc_floats(&a, ub * s->a_width);
    s->router = alloc_floats(&a, ub * hp->n_expert);
    s->heads = alloc_floats(&a, ub * 2 * (uint64_t)hp->ssm_time_step_rank + 2);
    s->ff_gate = alloc_floats(&a, ub * s->ff_width);
    s->ff_up = alloc_floats(&a, ub * s->ff_width);
    s->gx = alloc_floats(&a, ub * hp->n_embd);
    s->gy = alloc_floats(&a, ub * hp->n_embd);
    s->slot_out = alloc_floats(&a, ub * K * hp->n_embd);
    s->chosen = alloc_bytes(&a, ub * K * sizeof(int32_t));
    s->chosen_w = alloc_floats(&a, ub * K);
    s->members = alloc_bytes(&a, ub * sizeof(int32_t));
    s->acc = alloc_floats(&a, hp->head_dim);
    s->vrow = alloc_floats(&a, hp->head_dim);
    uint64_t max_in = max3(hp->n_embd, max3(qh, value_dim, hp->n_ff_exp), hp->n_ff_shexp);
    s->xq = alloc_bytes(&a, bg_matmul_scratch(max_in, ub));
    if (a.failed)
        return bg_fail(err, BRIGADE_ERR_NOMEM,
                       "out of memory for the session state (%llu bytes for a context of %u and "
                       "micro-batches of %u)",
                       (unsigned long long)a.bytes, s->n_ctx, s->n_ubatch);
    return BRIGADE_OK;
}

static const struct {
    const char *name;
    uint32_t type;
} cache_types[] = {
    [BRIGADE_CACHE_F16] = {"f16", BG_TYPE_F16},
    [BRIGADE_CACHE_F32] = {"f32", BG_TYPE_F32},
    [BRIGADE_CACHE_Q8_0] = {"q8_0", BG_TYPE_Q8_0},
    [BRIGADE_CACHE_Q4_0] = {"q4_0", BG_TYPE_Q4_0},
};

enum { N_CACHE_TYPES = sizeof cache_types / sizeof *cache_types };

bool brigade_cache_type_from_name(const char *name, brigade_cache_type *out)
{
    for (int i = 0; i < N_CACHE_TYPES; i++)
        if (strcasecmp(cache_types[i].name, name) == 0) {
            *out = (brigade_cache_type)i;
            return true;
        }
    return false;
}

const char *brigade_cache_type_name(brigade_cache_type type)
{
    return (unsigned)type < N_CACHE_TYPES ? cache_types[type].name : "unknown";
}

/* Quantized caches need whole blocks per head. */
static brigade_status choose_cache_types(brigade_session *s, const brigade_session_options *opts,
                                         brigade_error *err)
{
    brigade_cache_type want[2] = {opts ? opts->cache_type_k : BRIGADE_CACHE_F16,
                                  opts ? opts->cache_type_v : BRIGADE_CACHE_F16};
    for (int i = 0; i < 2; i++)
        if ((unsigned)want[i] >= N_CACHE_TYPES)
            return bg_fail(err, BRIGADE_ERR_ARG, "%s cache type %d is not one of f16, f32, q8_0, q4_0",
                           i ? "V" : "K", (int)want[i]);
    s->type_k = cache_types[want[0]].type;
    s->type_v = cache_types[want[1]].type;
    const uint64_t kv_dim = (uint64_t)s->hp->n_head_kv * s->hp->head_dim;
    const uint32_t types[2] = {s->type_k, s->type_v};
    for (int i = 0; i < 2; i++) {
        uint32_t t = types[i];
        const bg_type_info *ti = bg_type_get(t);
        if (s->hp->head_dim % ti->block_elems != 0)
            return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                           "a %s %s cache needs the head size (%u) to be a multiple of %u",
                           ti->name, i ? "V" : "K", s->hp->head_dim, ti->block_elems);
    }
    /* llama.cpp rotates quantized caches when heads are multiples of 64:
     * K by the largest power of two dividing the head size, V by 64. */
    const uint32_t D = s->hp->head_dim;
    if (s->type_k != BG_TYPE_F32 && s->type_k != BG_TYPE_F16 && D % 64 == 0) {
        s->k_rotation = 64;
        while (D % (s->k_rotation * 2) == 0)
            s->k_rotation *= 2;
    }
    if (s->type_v != BG_TYPE_F32 && s->type_v != BG_TYPE_F16 && D % 64 == 0)
        s->v_rotation = 64;
    bg_type_row_bytes((bg_type)s->type_k, kv_dim, &s->k_row_bytes);
    bg_type_row_bytes((bg_type)s->type_v, kv_dim, &s->v_row_bytes);
    return BRIGADE_OK;
}

brigade_status brigade_session_new(const brigade_model *model, const brigade_session_options *opts,
                                   brigade_session **out, brigade_error *err)
{
    *out = NULL;
    brigade_session *s = calloc(1, sizeof *s);
    if (!s)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    s->model = model;
    s->hp = &model->hp;
    s->n_ctx = opts && opts->n_ctx ? opts->n_ctx
                                   : (model->hp.n_ctx_train < 4096 ? model->hp.n_ctx_train : 4096);
    s->n_ubatch = opts && opts->n_ubatch ? opts->n_ubatch : 512;
    if (s->n_ubatch > s->n_ctx)
        s->n_ubatch = s->n_ctx;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = opts && opts->n_threads ? opts->n_threads : (cores > 0 ? (unsigned)cores : 1);
    brigade_status st = BRIGADE_OK;
    if (s->n_ctx == 0 || s->n_ctx > (1u << 24))
        st = bg_fail(err, BRIGADE_ERR_ARG, "context size %u outside 1..%u", s->n_ctx, 1u << 24);
    else if (opts && opts->n_ubatch > (1u << 16))
        st = bg_fail(err, BRIGADE_ERR_ARG, "micro-batch size %u is more than 65536",
                     opts->n_ubatch);
    else if (threads > 1024)
        st = bg_fail(err, BRIGADE_ERR_ARG, "%u threads is more than 1024", threads);
    if (!st)
        st = choose_cache_types(s, opts, err);
    if (!st && !(s->pool = bg_pool_new(threads)))
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "cannot start %u threads", threads);
    if (!st)
        st = alloc_state(s, err);
    if (st) {
        brigade_session_free(s);
        return st;
    }
    *out = s;
    return BRIGADE_OK;
}

void brigade_session_free(brigade_session *s)
{
    if (!s)
        return;
    for (uint32_t il = 0; s->layers && il < s->hp->n_layers; il++) {
        free(s->layers[il].k_cache);
        free(s->layers[il].v_cache);
        free(s->layers[il].conv);
        free(s->layers[il].ssm);
    }
    free(s->layers);
    void *bufs[] = {s->x,      s->xn,      s->out,    s->q,      s->kv,     s->attn,
                    s->gate,   s->router,  s->heads,  s->ff_gate, s->ff_up,  s->gx,
                    s->gy,     s->slot_out, s->chosen, s->chosen_w, s->members, s->acc,
                    s->vrow,   s->xq};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
    bg_pool_free(s->pool);
    free(s);
}

void brigade_session_reset(brigade_session *s)
{
    const bg_hparams *hp = s->hp;
    const uint64_t S = hp->ssm_state_size;
    const uint64_t conv_dim = 2 * S * hp->ssm_group_count + S * hp->ssm_time_step_rank;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        bg_layer_state *st = &s->layers[il];
        if (st->conv) {
            memset(st->conv, 0, conv_dim * (hp->ssm_conv_kernel - 1) * sizeof(float));
            memset(st->ssm, 0, hp->ssm_time_step_rank * S * S * sizeof(float));
        }
    }
    s->n_past = 0; /* the KV cache is overwritten position by position */
}

uint32_t brigade_session_n_ctx(const brigade_session *s) { return s->n_ctx; }
uint32_t brigade_session_n_past(const brigade_session *s) { return s->n_past; }

static bool all_finite(const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

/* Evaluates n (<= n_ubatch) tokens from position n_past. logits: NULL,
 * one row for the last token, or one per token. */
static brigade_status eval_ubatch(brigade_session *s, const int32_t *tokens, uint32_t n,
                                  bool all_logits, float *logits, brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    const brigade_model *m = s->model;
    const size_t n_embd = hp->n_embd;
    s->n_tok = n;
    s->pos0 = s->n_past;
    bg_matrix embd = bg_matrix_of(m->global.t[BG_ROLE_TOKEN_EMBD], 0);
    for (uint32_t i = 0; i < n; i++)
        bg_matrix_row(&embd, (uint64_t)tokens[i], s->x + i * n_embd);
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        if (hp->arch == BG_ARCH_QWEN35MOE)
            bg_qwen35moe_layer(s, il);
        else
            bg_qwen3moe_layer(s, il);
        if (!all_finite(s->x, (uint64_t)n * n_embd))
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "NaN or Inf in the hidden state after layer %u, positions %u..%u: "
                           "the weights are damaged or out of range",
                           il, s->pos0, s->pos0 + n - 1);
    }
    s->n_past += n;
    if (!logits)
        return BRIGADE_OK;
    /* the output head only for the rows asked for */
    uint32_t first = all_logits ? 0 : n - 1;
    s->n_tok = n - first;
    const float *norm = m->global.t[BG_ROLE_OUTPUT_NORM]->data;
    for (uint32_t i = first; i < n; i++)
        bg_rmsnorm(s->xn + (i - first) * n_embd, s->x + i * n_embd, norm, n_embd, hp->rms_eps);
    bg_project(s, m->global.t[BG_ROLE_OUTPUT], s->xn, n_embd, logits, hp->n_vocab);
    if (!all_finite(logits, (uint64_t)s->n_tok * hp->n_vocab))
        return bg_fail(err, BRIGADE_ERR_FORMAT, "NaN or Inf in the logits at positions %u..%u",
                       s->pos0 + first, s->pos0 + n - 1);
    return BRIGADE_OK;
}

brigade_status brigade_session_eval(brigade_session *s, const int32_t *tokens, size_t n,
                                    bool all_logits, float *logits, brigade_error *err)
{
    if (n > s->n_ctx - s->n_past)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "%zu tokens do not fit: %u of the context's %u positions are used", n,
                       s->n_past, s->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= s->hp->n_vocab)
            return bg_fail(err, BRIGADE_ERR_ARG, "token %zu is %d, outside the vocabulary of %u",
                           i, tokens[i], s->hp->n_vocab);
    for (size_t done = 0; done < n;) {
        uint32_t k = n - done < s->n_ubatch ? (uint32_t)(n - done) : s->n_ubatch;
        float *dst = NULL;
        if (logits && all_logits)
            dst = logits + done * (size_t)s->hp->n_vocab;
        else if (logits && done + k == n)
            dst = logits;
        brigade_status st = eval_ubatch(s, tokens + done, k, all_logits, dst, err);
        if (st)
            return st;
        done += k;
    }
    return BRIGADE_OK;
}
