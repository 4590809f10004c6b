/* Sessions: state allocation and the token loop around the per-architecture
 * layers. Every buffer is allocated once, when the session is created. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "error.h"
#include "gpu_backend.h"
#include "kernels.h"
#include "ops.h"
#include "placement.h"
#include "planner.h"
#include "session.h"
#include "types.h"

static brigade_status start_gpu(brigade_session *s, const brigade_session_options *opts,
                                brigade_error *err);

/* Each allocation is checked at the end: a NULL anywhere fails the session. */
typedef struct allocs {
    bool failed;
    uint64_t bytes;
} allocs;

/* n zeroed bytes of host memory: page-locked by gpu (NULL: none) so that
 * its copies to and from the device run at full speed, else plain;
 * *release frees them (also after the GPU session). */
static void *host_bytes(struct bg_gpu_session *gpu, uint64_t n, void (**release)(void *))
{
    void *p = gpu ? bg_gpu_host_alloc(gpu, n, release) : NULL;
    if (p)
        return memset(p, 0, n);
    *release = free;
    return n <= SIZE_MAX ? calloc(n ? (size_t)n : 1, 1) : NULL;
}

static void *counted(allocs *a, void *p, uint64_t n)
{
    a->failed |= p == NULL;
    a->bytes += n;
    return p;
}

static void *alloc_bytes(allocs *a, uint64_t n)
{
    void (*release)(void *);
    return counted(a, host_bytes(NULL, n, &release), n);
}

/* Where each micro-batch buffer (BG_BUF_*) of the session is kept. */
static void buffer_slots(brigade_session *s, void **slots[BG_BUF_COUNT])
{
    void **const all[BG_BUF_COUNT] = {
        [BG_BUF_X] = (void **)&s->x,          [BG_BUF_XN] = (void **)&s->xn,
        [BG_BUF_OUT] = (void **)&s->out,      [BG_BUF_Q] = (void **)&s->q,
        [BG_BUF_KV] = (void **)&s->kv,        [BG_BUF_ATTN] = (void **)&s->attn,
        [BG_BUF_GATE] = (void **)&s->gate,    [BG_BUF_ROUTER] = (void **)&s->router,
        [BG_BUF_HEADS] = (void **)&s->heads,  [BG_BUF_FF_GATE] = (void **)&s->ff_gate,
        [BG_BUF_FF_UP] = (void **)&s->ff_up,  [BG_BUF_GX] = (void **)&s->gx,
        [BG_BUF_GY] = (void **)&s->gy,        [BG_BUF_SLOT_OUT] = (void **)&s->slot_out,
        [BG_BUF_CHOSEN] = (void **)&s->chosen, [BG_BUF_CHOSEN_W] = (void **)&s->chosen_w,
        [BG_BUF_MEMBERS] = (void **)&s->members, [BG_BUF_XQ] = (void **)&s->xq,
        [BG_BUF_TOK_SEQ] = (void **)&s->tok_seq, [BG_BUF_TOK_POS] = (void **)&s->tok_pos,
        [BG_BUF_SEQ_PAST] = (void **)&s->seq_past, [BG_BUF_SEQ_COUNT] = (void **)&s->seq_count,
    };
    memcpy(slots, all, sizeof all);
}

static brigade_status alloc_state(brigade_session *s, brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    allocs a = {0};
    bg_session_plan *p = &s->plan;
    s->layers = calloc(hp->n_layers, sizeof *s->layers);
    if (!s->layers)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for %u layers", hp->n_layers);
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        bg_layer_state *st = &s->layers[il];
        if (s->gpu && bg_gpu_layer_on(bg_gpu_session_split(s->gpu), il))
            continue; /* its state lives on the GPU */
        if (bg_hparams_is_recurrent(hp, il)) {
            st->conv = alloc_bytes(&a, s->n_seq * p->conv_layer_bytes);
            st->ssm = alloc_bytes(&a, s->n_seq * p->ssm_layer_bytes);
        } else {
            st->k_cache = alloc_bytes(&a, s->n_seq * p->k_layer_bytes);
            st->v_cache = alloc_bytes(&a, s->n_seq * p->v_layer_bytes);
        }
    }
    s->q_width = (size_t)p->q_width;
    s->a_width = (size_t)p->a_width;
    s->ff_width = (size_t)p->ff_width;
    void **bufs[BG_BUF_COUNT];
    buffer_slots(s, bufs);
    /* those that cross to and from a device page-locked */
    for (int i = 0; i < BG_BUF_COUNT; i++)
        *bufs[i] = counted(&a,
                           host_bytes(bg_gpu_buffer_crosses(i) ? s->gpu : NULL, p->buf_bytes[i],
                                      &s->buf_release[i]),
                           p->buf_bytes[i]);
    s->allocated_bytes = a.bytes;
    if (a.failed)
        return bg_fail(err, BRIGADE_ERR_NOMEM,
                       "out of memory for the session state (%llu bytes for %u sequences of %u "
                       "positions and micro-batches of %u)",
                       (unsigned long long)a.bytes, s->n_seq, s->n_ctx, s->n_ubatch);
    return BRIGADE_OK;
}

/* Context per sequence (default min(training context, 4096)), sequences
 * and micro-batch size. */
static brigade_status choose_sizes(brigade_session *s, const brigade_session_options *opts,
                                   brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    s->n_ctx = opts && opts->n_ctx ? opts->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    s->n_ubatch = opts && opts->n_ubatch ? opts->n_ubatch : 512;
    if (s->n_ubatch > s->n_ctx)
        s->n_ubatch = s->n_ctx;
    if (s->n_ctx == 0 || s->n_ctx > (1u << 24))
        return bg_fail(err, BRIGADE_ERR_ARG, "context size %u outside 1..%u", s->n_ctx, 1u << 24);
    if (opts && opts->n_ubatch > (1u << 16))
        return bg_fail(err, BRIGADE_ERR_ARG, "micro-batch size %u is more than 65536",
                       opts->n_ubatch);
    s->n_seq = opts && opts->n_seq_max ? opts->n_seq_max : 1;
    if (s->n_seq > 4096)
        return bg_fail(err, BRIGADE_ERR_ARG, "%u sequences is more than 4096", s->n_seq);
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
    if (model->header_only)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "this model is described by its header only (a catalogue entry): it can "
                       "be planned, not evaluated");
    bg_cpu_isa cap;
    if (!bg_cpu_isa_cap(&cap))
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "BRIGADE_CPU_ISA=%s: expected scalar, avx2, avx512 or amx (the widest "
                       "instruction set the CPU's kernels may use)",
                       getenv("BRIGADE_CPU_ISA"));
    brigade_session *s = calloc(1, sizeof *s);
    if (!s)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    s->model = model;
    s->hp = &model->hp;
    brigade_status st = choose_sizes(s, opts, err);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = opts && opts->n_threads ? opts->n_threads : (cores > 0 ? (unsigned)cores : 1);
    if (!st && threads > 1024)
        st = bg_fail(err, BRIGADE_ERR_ARG, "%u threads is more than 1024", threads);
    if (!st)
        st = choose_cache_types(s, opts, err);
    if (!st && !(s->pool = bg_pool_acquire(threads)))
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "cannot start %u threads", threads);
    if (!st)
        bg_plan_session(s->hp, s->n_ctx, s->n_ubatch, s->n_seq, s->type_k, s->type_v, &s->plan);
    if (!st)
        st = start_gpu(s, opts, err);
    if (!st)
        st = alloc_state(s, err);
    if (st) {
        brigade_session_free(s);
        return st;
    }
    *out = s;
    return BRIGADE_OK;
}

/* The block before a logits buffer: how to release it. */
enum { LOGITS_HEADER = 64 };

float *brigade_logits_alloc(brigade_session *s, uint32_t n_rows)
{
    const uint64_t n = (uint64_t)n_rows * (uint64_t)s->hp->n_vocab;
    if (!n_rows || n > (UINT64_MAX - LOGITS_HEADER) / sizeof(float))
        return NULL;
    void (*release)(void *);
    uint8_t *p = host_bytes(s->gpu, LOGITS_HEADER + n * sizeof(float), &release);
    if (!p)
        return NULL;
    memcpy(p, &release, sizeof release);
    return (float *)(p + LOGITS_HEADER);
}

void brigade_logits_free(float *logits)
{
    if (!logits)
        return;
    uint8_t *p = (uint8_t *)logits - LOGITS_HEADER;
    void (*release)(void *);
    memcpy(&release, p, sizeof release);
    release(p);
}

void brigade_session_free(brigade_session *s)
{
    if (!s)
        return;
    bg_gpu_session_free(s->gpu);
    for (uint32_t il = 0; s->layers && il < s->hp->n_layers; il++) {
        free(s->layers[il].k_cache);
        free(s->layers[il].v_cache);
        free(s->layers[il].conv);
        free(s->layers[il].ssm);
    }
    free(s->layers);
    void **bufs[BG_BUF_COUNT];
    buffer_slots(s, bufs);
    for (int i = 0; i < BG_BUF_COUNT; i++)
        if (*bufs[i]) /* set with its release; the device's works after the device */
            s->buf_release[i](*bufs[i]);
    bg_pool_release(s->pool);
    free(s);
}

void brigade_session_seq_clear(brigade_session *s, uint32_t seq)
{
    if (seq >= s->n_seq)
        return;
    for (uint32_t il = 0; il < s->hp->n_layers; il++) {
        bg_layer_state *st = &s->layers[il];
        if (st->conv) {
            memset(bg_seq_conv(s, st, seq), 0, s->plan.conv_layer_bytes);
            memset(bg_seq_ssm(s, st, seq), 0, s->plan.ssm_layer_bytes);
        }
    }
    if (s->gpu)
        bg_gpu_seq_clear(s->gpu, s, seq);
    s->seq_past[seq] = 0; /* the KV cache is overwritten position by position */
}

void brigade_session_reset(brigade_session *s)
{
    for (uint32_t q = 0; q < s->n_seq; q++)
        brigade_session_seq_clear(s, q);
}

static void fill_memory(const brigade_model *m, uint32_t n_ctx, const bg_session_plan *p,
                        brigade_memory *out)
{
    *out = (brigade_memory){
        .weights_bytes = brigade_model_weight_bytes(m),
        .kv_bytes = p->kv_bytes,
        .recurrent_bytes = p->recurrent_bytes,
        .compute_bytes = p->compute_bytes,
        .n_ctx = n_ctx,
    };
    out->total_bytes = out->weights_bytes + out->kv_bytes + out->recurrent_bytes + out->compute_bytes;
}

/* The plan brigade_session_new would allocate by, without allocating. */
static brigade_status plan_without_session(const brigade_model *model,
                                           const brigade_session_options *opts, uint32_t *n_ctx,
                                           bg_session_plan *plan, brigade_error *err)
{
    brigade_session probe = {.model = model, .hp = &model->hp};
    brigade_status st = choose_sizes(&probe, opts, err);
    if (!st)
        st = choose_cache_types(&probe, opts, err);
    if (st)
        return st;
    *n_ctx = probe.n_ctx;
    bg_plan_session(&model->hp, probe.n_ctx, probe.n_ubatch, probe.n_seq, probe.type_k, probe.type_v,
                    plan);
    return BRIGADE_OK;
}

brigade_status brigade_memory_plan(const brigade_model *model, const brigade_session_options *opts,
                                   brigade_memory *out, brigade_error *err)
{
    uint32_t n_ctx;
    bg_session_plan plan;
    brigade_status st = plan_without_session(model, opts, &n_ctx, &plan, err);
    if (st)
        return st;
    fill_memory(model, n_ctx, &plan, out);
    return BRIGADE_OK;
}

static uint64_t tensor_bytes(const brigade_tensor_info *t) { return t ? t->n_bytes : 0; }

/* The planner's view of a model and session plan; layers is [n_layers]. */
static bg_place_input place_input(const brigade_model *model, const bg_session_plan *plan,
                                  bg_layer_bytes *layers, uint64_t gpu_budget,
                                  uint64_t overhead_bytes)
{
    const bg_hparams *hp = &model->hp;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        const bg_layer *L = &model->layers[il];
        layers[il] = (bg_layer_bytes){0};
        for (int r = 0; r < BG_ROLE_COUNT; r++) {
            bool expert = r == BG_ROLE_FFN_GATE_EXPS || r == BG_ROLE_FFN_UP_EXPS ||
                          r == BG_ROLE_FFN_DOWN_EXPS;
            if (expert)
                layers[il].experts += tensor_bytes(L->t[r]);
            else
                layers[il].other += tensor_bytes(L->t[r]);
        }
        layers[il].cache = plan->n_seq * (bg_hparams_is_recurrent(hp, il)
                                              ? plan->conv_layer_bytes + plan->ssm_layer_bytes
                                              : plan->k_layer_bytes + plan->v_layer_bytes);
    }
    return (bg_place_input){
        .layers = layers,
        .n_layers = hp->n_layers,
        .embeddings = tensor_bytes(model->global.t[BG_ROLE_TOKEN_EMBD]),
        .head = tensor_bytes(model->global.t[BG_ROLE_OUTPUT_NORM]) +
                tensor_bytes(model->global.t[BG_ROLE_OUTPUT]),
        .compute = plan->compute_bytes,
        .overhead = overhead_bytes,
        .gpu_budget = gpu_budget,
    };
}

brigade_status brigade_memory_place(const brigade_model *model, const brigade_session_options *opts,
                                    uint64_t gpu_budget, uint64_t overhead_bytes,
                                    brigade_placement *out, brigade_error *err)
{
    uint32_t n_ctx;
    bg_session_plan plan;
    brigade_status st = plan_without_session(model, opts, &n_ctx, &plan, err);
    if (st)
        return st;
    bg_layer_bytes *layers = calloc(model->hp.n_layers, sizeof *layers);
    if (!layers)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    bg_place_input in = place_input(model, &plan, layers, gpu_budget, overhead_bytes);
    bg_placement p = bg_place(&in);
    free(layers);
    *out = (brigade_placement){(brigade_placement_kind)p.kind, p.n_cpu_moe_layers, p.n_gpu_layers,
                               p.gpu_bytes, p.host_bytes};
    return BRIGADE_OK;
}

bool brigade_gpu_built(void) { return bg_gpu_api_get() != NULL; }

void brigade_session_gpu(const brigade_session *s, brigade_gpu_report *out)
{
    if (s->gpu)
        bg_gpu_session_report(s->gpu, out);
    else
        *out = (brigade_gpu_report){.active = false};
}

/* The GPU part of a new session, when the options ask for one. */
static brigade_status start_gpu(brigade_session *s, const brigade_session_options *opts,
                                brigade_error *err)
{
    if (!opts || opts->n_gpu_layers == 0) {
        if (opts && (opts->n_cpu_moe || opts->gpu_budget) && !brigade_gpu_built())
            return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                           "built without CUDA: --n-cpu-moe and --gpu-budget need a build with "
                           "`make CUDA=1`");
        return BRIGADE_OK;
    }
    bg_layer_bytes *layers = calloc(s->hp->n_layers, sizeof *layers);
    if (!layers)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    bg_place_input in = place_input(s->model, &s->plan, layers, 0, BRIGADE_GPU_OVERHEAD_DEFAULT);
    brigade_status st = bg_gpu_session_new(s->model, &s->plan, opts, &in, &s->gpu, err);
    free(layers);
    return st;
}

void brigade_session_memory(const brigade_session *s, brigade_memory *out)
{
    fill_memory(s->model, s->n_ctx, &s->plan, out);
    /* what was really allocated, counted buffer by buffer */
    out->allocated_bytes = s->allocated_bytes;
}

uint32_t brigade_session_n_ctx(const brigade_session *s) { return s->n_ctx; }
uint32_t brigade_session_n_past(const brigade_session *s) { return s->seq_past[0]; }
uint32_t brigade_session_n_seq(const brigade_session *s) { return s->n_seq; }
uint32_t brigade_session_seq_n_past(const brigade_session *s, uint32_t seq)
{
    return seq < s->n_seq ? s->seq_past[seq] : 0;
}

static bool all_finite(const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

/* Which tokens of a micro-batch get a row of logits. */
typedef enum out_rows { OUT_NONE, OUT_LAST, OUT_ALL, OUT_FLAGGED } out_rows;

/* Evaluates n (<= n_ubatch) tokens, token i at the next position of
 * sequence seq[i] (seq NULL: all in sequence 0). logits receives one row
 * per token asked for, in order; *n_rows counts them. A sequence's
 * position advances only when the whole micro-batch succeeds. */
static brigade_status eval_ubatch(brigade_session *s, const int32_t *tokens, const uint32_t *seq,
                                  uint32_t n, out_rows which, const bool *flagged, float *logits,
                                  size_t *n_rows, brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    const brigade_model *m = s->model;
    const size_t n_embd = hp->n_embd;
    *n_rows = 0;
    /* the previous micro-batch's tokens, positions and x read by the device */
    brigade_status st = s->gpu ? bg_gpu_inputs_free(s->gpu, err) : BRIGADE_OK;
    if (st)
        return st;
    for (uint32_t i = 0; i < n; i++)
        s->seq_count[seq ? seq[i] : 0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t q = seq ? seq[i] : 0;
        s->tok_seq[i] = q;
        s->tok_pos[i] = s->seq_past[q] + s->seq_count[q]++;
    }
    s->n_tok = n;
    bg_matrix embd = bg_matrix_of(m->global.t[BG_ROLE_TOKEN_EMBD], 0);
    for (uint32_t i = 0; i < n; i++)
        bg_matrix_row(&embd, (uint64_t)tokens[i], s->x + i * n_embd);
    /* the CPU layers first, then those on the GPU (the last ones) */
    const uint32_t n_cpu_layers =
        s->gpu ? bg_gpu_session_split(s->gpu)->first_gpu_layer : hp->n_layers;
    st = s->gpu ? bg_gpu_begin(s->gpu, s, err) : BRIGADE_OK;
    if (st)
        return st;
    for (uint32_t il = 0; il < n_cpu_layers; il++) {
        if (hp->arch == BG_ARCH_QWEN35MOE)
            bg_qwen35moe_layer(s, il);
        else
            bg_qwen3moe_layer(s, il);
        if (!all_finite(s->x, (uint64_t)n * n_embd))
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "NaN or Inf in the hidden state after layer %u, positions %u..%u: "
                           "the weights are damaged or out of range",
                           il, s->tok_pos[0], s->tok_pos[n - 1]);
    }
    /* on the GPU, x stays on the device; NaN or Inf show in the logits */
    st = s->gpu && n_cpu_layers < hp->n_layers ? bg_gpu_layers(s->gpu, s, err) : BRIGADE_OK;
    if (st)
        return st;
    for (uint32_t i = 0; i < n; i++)
        s->seq_past[s->tok_seq[i]] = s->tok_pos[i] + 1;
    if (!logits || which == OUT_NONE)
        return BRIGADE_OK;
    /* the output head only for the rows asked for */
    const float *norm = m->global.t[BG_ROLE_OUTPUT_NORM]->data;
    uint32_t rows = 0, first = 0;
    uint32_t *row_of = (uint32_t *)s->members; /* [ub] free at this point */
    for (uint32_t i = 0; i < n; i++) {
        bool want = which == OUT_ALL || (which == OUT_LAST && i == n - 1) ||
                    (which == OUT_FLAGGED && flagged[i]);
        if (!want)
            continue;
        if (!rows)
            first = i;
        row_of[rows] = i;
        if (!s->gpu)
            bg_rmsnorm(s->xn + rows * n_embd, s->x + i * n_embd, norm, n_embd, hp->rms_eps);
        rows++;
    }
    *n_rows = rows;
    if (!rows)
        return BRIGADE_OK;
    if (s->gpu) {
        st = bg_gpu_head(s->gpu, s, row_of, rows, logits, err);
        if (st)
            return st;
    } else {
        s->n_tok = rows;
        bg_project(s, m->global.t[BG_ROLE_OUTPUT], s->xn, n_embd, logits, hp->n_vocab);
    }
    if (!all_finite(logits, (uint64_t)rows * hp->n_vocab))
        return bg_fail(err, BRIGADE_ERR_FORMAT, "NaN or Inf in the logits at positions %u..%u",
                       s->tok_pos[first], s->tok_pos[n - 1]);
    return BRIGADE_OK;
}

static brigade_status check_token(const brigade_session *s, size_t i, int32_t token,
                                  brigade_error *err)
{
    if (token < 0 || (uint32_t)token >= s->hp->n_vocab)
        return bg_fail(err, BRIGADE_ERR_ARG, "token %zu is %d, outside the vocabulary of %u", i,
                       token, s->hp->n_vocab);
    return BRIGADE_OK;
}

brigade_status brigade_session_eval(brigade_session *s, const int32_t *tokens, size_t n,
                                    bool all_logits, float *logits, brigade_error *err)
{
    const uint32_t n_past = s->seq_past[0];
    if (n > s->n_ctx - n_past)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "%zu tokens do not fit: %u of the context's %u positions are used", n,
                       n_past, s->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (check_token(s, i, tokens[i], err))
            return err ? err->status : BRIGADE_ERR_ARG;
    for (size_t done = 0; done < n;) {
        uint32_t k = n - done < s->n_ubatch ? (uint32_t)(n - done) : s->n_ubatch;
        float *dst = NULL;
        out_rows which = OUT_NONE;
        if (logits && all_logits)
            dst = logits + done * (size_t)s->hp->n_vocab, which = OUT_ALL;
        else if (logits && done + k == n)
            dst = logits, which = OUT_LAST;
        size_t rows;
        brigade_status st = eval_ubatch(s, tokens + done, NULL, k, which, NULL, dst, &rows, err);
        if (st)
            return st;
        done += k;
    }
    return BRIGADE_OK;
}

brigade_status brigade_session_eval_batch(brigade_session *s, const brigade_batch *b,
                                          float *logits, brigade_error *err)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->seq[i] >= s->n_seq)
            return bg_fail(err, BRIGADE_ERR_ARG, "token %zu is for sequence %u, the session has %u",
                           i, b->seq[i], s->n_seq);
        if (check_token(s, i, b->tokens[i], err))
            return BRIGADE_ERR_ARG;
        s->seq_count[b->seq[i]] = 0;
    }
    for (size_t i = 0; i < b->n; i++) {
        uint32_t q = b->seq[i];
        if (s->seq_count[q]++ == s->n_ctx - s->seq_past[q])
            return bg_fail(err, BRIGADE_ERR_ARG,
                           "the batch's tokens for sequence %u do not fit: %u of its %u positions "
                           "are used",
                           q, s->seq_past[q], s->n_ctx);
    }
    const bool want = logits && b->logits;
    for (size_t done = 0; done < b->n;) {
        uint32_t k = b->n - done < s->n_ubatch ? (uint32_t)(b->n - done) : s->n_ubatch;
        size_t rows;
        brigade_status st =
            eval_ubatch(s, b->tokens + done, b->seq + done, k, want ? OUT_FLAGGED : OUT_NONE,
                        want ? b->logits + done : NULL, logits, &rows, err);
        if (st)
            return st;
        if (want)
            logits += rows * (size_t)s->hp->n_vocab;
        done += k;
    }
    return BRIGADE_OK;
}

static brigade_status check_seq(const brigade_session *s, uint32_t seq, brigade_error *err)
{
    if (seq >= s->n_seq)
        return bg_fail(err, BRIGADE_ERR_ARG, "sequence %u: the session has %u", seq, s->n_seq);
    return BRIGADE_OK;
}

brigade_status brigade_session_seq_truncate(brigade_session *s, uint32_t seq, uint32_t n,
                                            brigade_error *err)
{
    if (check_seq(s, seq, err))
        return BRIGADE_ERR_ARG;
    if (n > s->seq_past[seq])
        return bg_fail(err, BRIGADE_ERR_ARG, "sequence %u holds %u tokens, not %u", seq,
                       s->seq_past[seq], n);
    if (n == 0) {
        brigade_session_seq_clear(s, seq);
        return BRIGADE_OK;
    }
    if (n < s->seq_past[seq] && s->plan.checkpoint_bytes)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "sequence %u cannot be cut back to %u tokens: the recurrent state can only "
                       "go back to a checkpoint",
                       seq, n);
    s->seq_past[seq] = n; /* later positions are overwritten as they come */
    return BRIGADE_OK;
}

uint64_t brigade_session_checkpoint_bytes(const brigade_session *s)
{
    return s->plan.checkpoint_bytes;
}

/* Copies one sequence's recurrent state to (save) or from (restore) buf. */
static brigade_status copy_recurrent(brigade_session *s, uint32_t seq, uint8_t *buf, bool save,
                                     brigade_error *err)
{
    for (uint32_t il = 0; il < s->hp->n_layers; il++) {
        bg_layer_state *st = &s->layers[il];
        if (!bg_hparams_is_recurrent(s->hp, il))
            continue;
        uint64_t sizes[2] = {s->plan.conv_layer_bytes, s->plan.ssm_layer_bytes};
        if (!st->conv) { /* on the GPU */
            brigade_status rc = bg_gpu_seq_copy(s->gpu, s, il, seq, buf, save, err);
            if (rc)
                return rc;
            buf += sizes[0] + sizes[1];
            continue;
        }
        void *parts[2] = {bg_seq_conv(s, st, seq), bg_seq_ssm(s, st, seq)};
        for (int k = 0; k < 2; k++) {
            if (save)
                memcpy(buf, parts[k], sizes[k]);
            else
                memcpy(parts[k], buf, sizes[k]);
            buf += sizes[k];
        }
    }
    return BRIGADE_OK;
}

static brigade_status check_checkpoint(const brigade_session *s, uint32_t seq, uint64_t size,
                                       brigade_error *err)
{
    if (check_seq(s, seq, err))
        return BRIGADE_ERR_ARG;
    if (size != s->plan.checkpoint_bytes)
        return bg_fail(err, BRIGADE_ERR_ARG, "a checkpoint has %llu bytes, not %llu",
                       (unsigned long long)s->plan.checkpoint_bytes, (unsigned long long)size);
    return BRIGADE_OK;
}

brigade_status brigade_session_seq_save(brigade_session *s, uint32_t seq, void *buf,
                                        uint64_t size, brigade_error *err)
{
    if (check_checkpoint(s, seq, size, err))
        return BRIGADE_ERR_ARG;
    return copy_recurrent(s, seq, buf, true, err);
}

brigade_status brigade_session_seq_restore(brigade_session *s, uint32_t seq, const void *buf,
                                           uint64_t size, uint32_t n_past, brigade_error *err)
{
    if (check_checkpoint(s, seq, size, err))
        return BRIGADE_ERR_ARG;
    if (n_past > s->seq_past[seq])
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "sequence %u holds %u tokens: a checkpoint at %u cannot be restored", seq,
                       s->seq_past[seq], n_past);
    brigade_status st = copy_recurrent(s, seq, (uint8_t *)(uintptr_t)buf, false, err);
    if (st)
        return st;
    s->seq_past[seq] = n_past;
    return BRIGADE_OK;
}
