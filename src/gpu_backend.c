/* The forward pass of the layers a session keeps on the GPU, over the
 * device interface of gpu.h. It mirrors src/models/ and blocks.c step by
 * step (same buffers, same order), with every buffer a slice of one device
 * arena laid out by gpu_plan.c.
 *
 * Not yet run on a GPU: written and compiled in a session without one
 * (see README, "CUDA"); scripts/gpu-check.sh is the check that runs it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu_backend.h"
#include "types.h"

struct bg_gpu_session {
    const bg_gpu_api *api;
    bg_gpu *g;
    const brigade_model *m;
    bg_session_plan plan;
    bg_gpu_split split;
    bg_gpu_layout layout;
    uint8_t *base;         /* the arena on the device */
    uint8_t *xn_codes;     /* xn coded by the norms that write it (gpu.h), or NULL */
    uint8_t *attn_codes;   /* the mixer's output coded for its out projection, or NULL */
    bool x_on_device;      /* the device's copy of x is the newer */
    bool xn_final;         /* xn holds x's final norm (and its codes), for the head */
    bool seq_runs, seq_single; /* the micro-batch's tokens by sequence (seq_runs()) */
    bool graphs;           /* decode steps replay CUDA graphs */
    brigade_gpu_report report;
};

static brigade_status gpu_fail(const bg_gpu_session *gs, brigade_error *err, const char *what)
{
    return bg_fail(err, BRIGADE_ERR_IO, "GPU: %s: %s", what,
                   gs->api && gs->g ? gs->api->error(gs->g) : "no device");
}

static void *at(const bg_gpu_session *gs, uint64_t off)
{
    return off == BG_GPU_NONE ? NULL : gs->base + off;
}
static float *buf(const bg_gpu_session *gs, bg_buf b) { return at(gs, gs->layout.buf_off[b]); }
static void *bufv(const bg_gpu_session *gs, bg_buf b) { return at(gs, gs->layout.buf_off[b]); }
static const void *weight(const bg_gpu_session *gs, uint32_t il, int role)
{
    return at(gs, gs->layout.layers[il].t_off[role]);
}

/* ------------------------------------------------------------- creation */

static const bg_gpu_api *api_override;

void bg_gpu_api_override(const bg_gpu_api *api) { api_override = api; }

/* The first layer from which on the device runs every layer to the end
 * with no host work between launches (no experts on the CPU): a decode
 * step's launches from there on can be captured as one graph. */
static uint32_t device_only_from(const bg_gpu_split *sp)
{
    return sp->n_cpu_moe > sp->first_gpu_layer ? sp->n_cpu_moe : sp->first_gpu_layer;
}

static brigade_status choose_split(bg_gpu_session *gs, const brigade_session_options *opts,
                                   const bg_place_input *place, uint64_t free_bytes,
                                   brigade_error *err)
{
    const uint32_t L = gs->m->hp.n_layers;
    brigade_placement automatic = {0};
    const brigade_placement *pa = NULL;
    uint64_t budget = opts->gpu_budget;
    if (!budget)
        budget = free_bytes > BG_GPU_AUTO_MARGIN ? free_bytes - BG_GPU_AUTO_MARGIN : 0;
    if (opts->n_gpu_layers < 0) {
        bg_place_input in = *place;
        in.gpu_budget = budget;
        bg_placement p = bg_place(&in);
        automatic = (brigade_placement){(brigade_placement_kind)p.kind, p.n_cpu_moe_layers,
                                        p.n_gpu_layers, p.gpu_bytes, p.host_bytes};
        pa = &automatic;
    }
    brigade_status st =
        bg_gpu_split_from(opts->n_gpu_layers, opts->n_cpu_moe, L, pa, &gs->split, err);
    if (st)
        return st;
    uint64_t planned = bg_place_gpu_bytes(place, gs->split.n_cpu_moe, gs->split.n_gpu_layers);
    gs->report.planned_bytes = planned;
    if (opts->gpu_budget && planned > opts->gpu_budget)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "-ngl %u --n-cpu-moe %u needs %.2f GiB of GPU memory, more than the "
                       "budget of %.2f GiB (try -ngl auto)",
                       gs->split.n_gpu_layers, gs->split.n_cpu_moe, planned / 1073741824.0,
                       opts->gpu_budget / 1073741824.0);
    return BRIGADE_OK;
}

static brigade_status check_types(const bg_gpu_session *gs, brigade_error *err)
{
    const brigade_model *m = gs->m;
    for (uint32_t il = 0; il < m->hp.n_layers; il++)
        for (int r = 0; r < BG_ROLE_COUNT; r++) {
            const brigade_tensor_info *t = m->layers[il].t[r];
            if (t && gs->layout.layers[il].t_off[r] != BG_GPU_NONE && !gs->api->supports(t->type))
                return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                               "GPU: tensor '%s' is %s, which the CUDA kernels do not handle",
                               t->name, brigade_type_name(t->type));
        }
    const brigade_tensor_info *head = m->global.t[BG_ROLE_OUTPUT];
    if (gs->split.head_on_gpu && !gs->api->supports(head->type))
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "GPU: tensor '%s' is %s, which the CUDA kernels do not handle",
                       head->name, brigade_type_name(head->type));
    if (m->hp.n_ff_exp > m->hp.n_embd)
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "GPU: expert width %u above the hidden size %u is not handled",
                       m->hp.n_ff_exp, m->hp.n_embd);
    if (m->hp.n_expert > BG_GPU_MAX_EXPERTS)
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "GPU: routing over %u experts is not handled (at most %u)",
                       m->hp.n_expert, BG_GPU_MAX_EXPERTS);
    return BRIGADE_OK;
}

static brigade_status upload_weights(bg_gpu_session *gs, brigade_error *err)
{
    const brigade_model *m = gs->m;
    for (uint32_t il = 0; il < m->hp.n_layers; il++)
        for (int r = 0; r < BG_ROLE_COUNT; r++) {
            const brigade_tensor_info *t = m->layers[il].t[r];
            uint64_t off = gs->layout.layers[il].t_off[r];
            if (t && off != BG_GPU_NONE &&
                gs->api->upload(gs->g, gs->base + off, t->data, t->n_bytes))
                return gpu_fail(gs, err, t->name);
        }
    if (gs->split.head_on_gpu) {
        const brigade_tensor_info *norm = m->global.t[BG_ROLE_OUTPUT_NORM];
        const brigade_tensor_info *head = m->global.t[BG_ROLE_OUTPUT];
        if (gs->api->upload(gs->g, gs->base + gs->layout.head_norm_off, norm->data, norm->n_bytes) ||
            gs->api->upload(gs->g, gs->base + gs->layout.head_off, head->data, head->n_bytes))
            return gpu_fail(gs, err, "uploading the output head");
    }
    uint64_t state0 = gs->layout.weights_bytes;
    if (gs->api->zero(gs->g, gs->base + state0, gs->layout.state_bytes) || gs->api->sync(gs->g))
        return gpu_fail(gs, err, "clearing the caches");
    return BRIGADE_OK;
}

brigade_status bg_gpu_session_new(const brigade_model *m, const bg_session_plan *plan,
                                  const brigade_session_options *opts,
                                  const bg_place_input *place, bg_gpu_session **out,
                                  brigade_error *err)
{
    *out = NULL;
    const bg_gpu_api *api = api_override ? api_override : bg_gpu_api_get();
    if (!api) {
        char ngl[16];
        if (opts->n_gpu_layers < 0)
            snprintf(ngl, sizeof ngl, "auto");
        else
            snprintf(ngl, sizeof ngl, "%d", (int)opts->n_gpu_layers);
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "built without CUDA: -ngl %s needs a build with `make CUDA=1` (use -ngl 0 "
                       "or leave it out to run on the CPU)",
                       ngl);
    }
    bg_gpu_session *gs = calloc(1, sizeof *gs);
    if (!gs)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    gs->api = api;
    gs->m = m;
    gs->plan = *plan;
    char msg[256] = "";
    brigade_status st = BRIGADE_OK;
    if (api->init(0, &gs->g, gs->report.device, sizeof gs->report.device, msg, sizeof msg))
        st = bg_fail(err, BRIGADE_ERR_IO, "GPU: %s", msg);
    uint64_t free_b = 0, total_b = 0;
    if (!st && api->mem_info(gs->g, &free_b, &total_b))
        st = gpu_fail(gs, err, "reading the free memory");
    gs->report.free_before = free_b;
    gs->report.total = total_b;
    gs->report.runtime_bytes = total_b > free_b ? total_b - free_b : 0;
    gs->report.overhead_bytes = place->overhead;
    if (!st)
        st = choose_split(gs, opts, place, free_b, err);
    if (!st && gs->split.n_gpu_layers == 0) {
        /* -ngl auto found room for no layer: the CPU engine, no device */
        bg_gpu_session_free(gs);
        return BRIGADE_OK;
    }
    if (!st)
        st = bg_gpu_layout_build(m, plan, &gs->split, &gs->layout, err);
    if (!st)
        st = check_types(gs, err);
    if (!st && gs->layout.total_bytes > free_b)
        st = bg_fail(err, BRIGADE_ERR_NOMEM,
                     "GPU: the layers asked for need %.2f GiB, the card has %.2f GiB free (try "
                     "-ngl auto, fewer layers or --n-cpu-moe)",
                     gs->layout.total_bytes / 1073741824.0, free_b / 1073741824.0);
    void *base = NULL;
    if (!st && api->alloc(gs->g, gs->layout.total_bytes, &base))
        st = gpu_fail(gs, err, "allocating the arena");
    gs->base = base;
    /* xq: the normed rows' codes first (rows of whole K-quant
     * super-blocks only), then the backend's counters and the products'
     * scratch */
    const uint64_t codes = m->hp.n_embd % 256 == 0 ? plan->xn_code_bytes : 0;
    gs->xn_codes = codes && !st ? bufv(gs, BG_BUF_XQ) : NULL;
    /* the mixer's output codes go to the products' scratch, unused from
     * the mixer's products until its out projection reads them */
    gs->attn_codes = gs->xn_codes ? gs->xn_codes + codes + BG_GPU_COUNTER_BYTES : NULL;
    if (!st && api->set_scratch(gs->g, (uint8_t *)bufv(gs, BG_BUF_XQ) + codes,
                                plan->buf_bytes[BG_BUF_XQ] - codes))
        st = gpu_fail(gs, err, "setting the scratch");
    if (!st)
        st = upload_weights(gs, err);
    uint64_t free_after = 0;
    if (!st && api->mem_info(gs->g, &free_after, &total_b))
        st = gpu_fail(gs, err, "reading the free memory");
    if (st) {
        bg_gpu_session_free(gs);
        return st;
    }
    /* graphs replay the layers the device runs alone, from the last with
     * experts on the CPU to the end */
    gs->graphs = device_only_from(&gs->split) < gs->split.n_layers;
    brigade_gpu_report *r = &gs->report;
    r->active = true;
    r->n_gpu_layers = gs->split.n_gpu_layers;
    r->n_cpu_moe_layers = gs->split.n_cpu_moe;
    r->n_tensors = gs->layout.n_tensors;
    r->weights_bytes = gs->layout.weights_bytes;
    r->state_bytes = gs->layout.state_bytes;
    r->scratch_bytes = gs->layout.scratch_bytes;
    r->arena_bytes = gs->layout.total_bytes;
    r->measured_bytes = free_b > free_after ? free_b - free_after : 0;
    *out = gs;
    return BRIGADE_OK;
}

void bg_gpu_session_free(bg_gpu_session *gs)
{
    if (!gs)
        return;
    if (gs->g)
        gs->api->destroy(gs->g); /* frees the arena too */
    bg_gpu_layout_free(&gs->layout);
    free(gs);
}

const bg_gpu_split *bg_gpu_session_split(const bg_gpu_session *gs) { return &gs->split; }

bool bg_gpu_buffer_crosses(int buf)
{
    switch (buf) {
    case BG_BUF_X: case BG_BUF_XN: case BG_BUF_OUT: case BG_BUF_CHOSEN: case BG_BUF_CHOSEN_W:
    case BG_BUF_TOK_SEQ: case BG_BUF_TOK_POS:
        return true;
    default:
        return false;
    }
}

void *bg_gpu_host_alloc(bg_gpu_session *gs, uint64_t bytes, void (**release)(void *))
{
    void *p = NULL;
    if (gs->api->host_alloc(gs->g, bytes, &p))
        return NULL;
    *release = gs->api->host_free;
    return p;
}

void bg_gpu_session_report(const bg_gpu_session *gs, brigade_gpu_report *out)
{
    *out = gs->report;
}

/* -------------------------------------------------------- forward pass */

/* Micro-batches up to this size replay a captured graph (decode steps of
 * up to this many sequences); larger ones run eagerly. */
enum { GRAPH_MAX_TOKENS = 16 };

/* How a micro-batch of up to GRAPH_MAX_TOKENS tokens falls into
 * sequences, which decides some kernels (and so is part of a graph's
 * key): each sequence's tokens consecutive (runs), or each token alone in
 * its sequence (single, a decode step). Larger batches: neither. */
static bool seq_runs(const brigade_session *s)
{
    if (s->n_tok > GRAPH_MAX_TOKENS)
        return false;
    for (uint32_t i = 1; i < s->n_tok; i++)
        if (s->tok_seq[i] != s->tok_seq[i - 1])
            for (uint32_t j = 0; j + 1 < i; j++)
                if (s->tok_seq[j] == s->tok_seq[i])
                    return false;
    return true;
}
static bool seq_single(const brigade_session *s)
{
    if (s->n_tok > GRAPH_MAX_TOKENS)
        return false;
    for (uint32_t i = 1; i < s->n_tok; i++)
        for (uint32_t j = 0; j < i; j++)
            if (s->tok_seq[j] == s->tok_seq[i])
                return false;
    return true;
}

brigade_status bg_gpu_inputs_free(bg_gpu_session *gs, brigade_error *err)
{
    if (gs->api->wait_uploads(gs->g))
        return gpu_fail(gs, err, "copying a micro-batch to the device");
    return BRIGADE_OK;
}

brigade_status bg_gpu_begin(bg_gpu_session *gs, const brigade_session *s, brigade_error *err)
{
    const bg_gpu_api *api = gs->api;
    gs->x_on_device = false;
    gs->xn_final = false;
    gs->seq_runs = seq_runs(s);
    gs->seq_single = seq_single(s);
    if (api->upload(gs->g, bufv(gs, BG_BUF_TOK_SEQ), s->tok_seq, s->n_tok * sizeof(uint32_t)) ||
        api->upload(gs->g, bufv(gs, BG_BUF_TOK_POS), s->tok_pos, s->n_tok * sizeof(uint32_t)))
        return gpu_fail(gs, err, "uploading token positions");
    return BRIGADE_OK;
}

static int put_x(bg_gpu_session *gs, const brigade_session *s)
{
    if (gs->x_on_device)
        return 0;
    gs->x_on_device = true;
    return gs->api->upload(gs->g, buf(gs, BG_BUF_X), s->x,
                           (uint64_t)s->n_tok * s->hp->n_embd * sizeof(float));
}

/* y = W x for the micro-batch, W layer il's weight in `role`. */
static int project(bg_gpu_session *gs, const brigade_session *s, uint32_t il, int role,
                   const float *x, size_t x_width, float *y, size_t y_width)
{
    const brigade_tensor_info *t = s->model->layers[il].t[role];
    return gs->api->matmul(gs->g, t->type, weight(gs, il, role), t->ne[0], t->ne[1], x, x_width,
                           NULL, y, y_width, s->n_tok);
}

/* One of the products of a layer's input (matmul_multi). */
static bg_gpu_proj projection(const bg_gpu_session *gs, const bg_layer *L, uint32_t il, int role,
                              float *y, size_t y_width)
{
    const brigade_tensor_info *t = L->t[role];
    return (bg_gpu_proj){t->type, weight(gs, il, role), t->ne[1], y, y_width};
}

/* Where the mixer's output rows are coded for the out projection, when
 * they split into whole K-quant super-blocks (for attention, each head),
 * or NULL. */
static uint8_t *out_codes(const bg_gpu_session *gs, bool whole_blocks)
{
    return whole_blocks ? gs->attn_codes : NULL;
}

/* Attention's output rows into attn, and their codes into *aq (or NULL). */
static int attention(bg_gpu_session *gs, const brigade_session *s, uint32_t il, bool gated,
                     uint8_t **aq_out)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const bg_gpu_layer_layout *LL = &gs->layout.layers[il];
    const size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim, E = hp->n_embd;
    float *q = buf(gs, BG_BUF_Q), *kv = buf(gs, BG_BUF_KV), *xn = buf(gs, BG_BUF_XN);
    float *attn = buf(gs, BG_BUF_ATTN), *gate = buf(gs, BG_BUF_GATE);
    const bg_gpu_proj proj[3] = {
        projection(gs, L, il, BG_ROLE_ATTN_Q, q, s->q_width),
        projection(gs, L, il, BG_ROLE_ATTN_K, kv, 2 * kv_dim),
        projection(gs, L, il, BG_ROLE_ATTN_V, kv + kv_dim, 2 * kv_dim),
    };
    int rc = gs->api->matmul_multi(gs->g, proj, 3, E, xn, E, gs->xn_codes, s->n_tok);
    bg_gpu_attn_args a = {
        .n_tok = s->n_tok, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim, .type_k = s->type_k, .type_v = s->type_v,
        .k_row_bytes = s->k_row_bytes, .v_row_bytes = s->v_row_bytes,
        .k_seq_bytes = gs->plan.k_layer_bytes, .v_seq_bytes = gs->plan.v_layer_bytes,
        .k_rotation = s->k_rotation, .v_rotation = s->v_rotation, .gated = gated,
        .seq_single = gs->seq_single,
        .rope_dims = hp->rope_dims, .rope_base = hp->rope_freq_base, .eps = hp->rms_eps,
        .scale = 1.0f / sqrtf((float)hp->head_dim), .q_width = s->q_width,
        .a_width = s->a_width, .kv_width = 2 * kv_dim,
    };
    uint8_t *aq = *aq_out = out_codes(gs, hp->head_dim % 256 == 0);
    return rc ? rc
              : gs->api->attention(gs->g, &a, q, kv, gate, attn,
                                   weight(gs, il, BG_ROLE_ATTN_Q_NORM),
                                   weight(gs, il, BG_ROLE_ATTN_K_NORM), at(gs, LL->k_off),
                                   at(gs, LL->v_off), bufv(gs, BG_BUF_TOK_SEQ),
                                   bufv(gs, BG_BUF_TOK_POS), aq, bufv(gs, BG_BUF_SLOT_OUT));
}

/* DeltaNet's output rows into attn, and their codes into *aq (or NULL). */
static int deltanet(bg_gpu_session *gs, const brigade_session *s, uint32_t il, uint8_t **aq_out)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const bg_gpu_layer_layout *LL = &gs->layout.layers[il];
    const size_t Hv = hp->ssm_time_step_rank, E = hp->n_embd;
    float *q = buf(gs, BG_BUF_Q), *xn = buf(gs, BG_BUF_XN), *gate = buf(gs, BG_BUF_GATE);
    float *heads = buf(gs, BG_BUF_HEADS), *attn = buf(gs, BG_BUF_ATTN);
    const bg_gpu_proj proj[4] = {
        projection(gs, L, il, BG_ROLE_SSM_QKV, q, s->q_width),
        projection(gs, L, il, BG_ROLE_SSM_GATE, gate, s->a_width),
        projection(gs, L, il, BG_ROLE_SSM_BETA, heads, 2 * Hv),
        projection(gs, L, il, BG_ROLE_SSM_ALPHA, heads + Hv, 2 * Hv),
    };
    int rc = gs->api->matmul_multi(gs->g, proj, 4, E, xn, E, gs->xn_codes, s->n_tok);
    uint8_t *aq = *aq_out = out_codes(gs, Hv * hp->ssm_state_size % 256 == 0);
    bg_gpu_deltanet_args a = {
        .n_tok = s->n_tok, .seq_runs = gs->seq_runs, .state = hp->ssm_state_size,
        .n_k_heads = hp->ssm_group_count,
        .n_v_heads = hp->ssm_time_step_rank, .conv_kernel = hp->ssm_conv_kernel,
        .eps = hp->rms_eps, .conv_seq_floats = gs->plan.conv_layer_bytes / sizeof(float),
        .ssm_seq_floats = gs->plan.ssm_layer_bytes / sizeof(float), .q_width = s->q_width,
        .a_width = s->a_width,
    };
    return rc ? rc
              : gs->api->deltanet(gs->g, &a, q, gate, heads, weight(gs, il, BG_ROLE_SSM_DT),
                                  weight(gs, il, BG_ROLE_SSM_A),
                                  weight(gs, il, BG_ROLE_SSM_CONV1D),
                                  weight(gs, il, BG_ROLE_SSM_NORM), at(gs, LL->conv_off),
                                  at(gs, LL->ssm_off), attn, aq, bufv(gs, BG_BUF_TOK_SEQ));
}

/* Router logits and each token's choice of experts, on the device, with
 * the slots grouped by expert for the device's experts (grouped true). */
static int route(bg_gpu_session *gs, const brigade_session *s, uint32_t il, bool grouped)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const brigade_tensor_info *t = L->t[BG_ROLE_FFN_GATE_INP];
    const bg_gpu_proj router = {t->type, weight(gs, il, BG_ROLE_FFN_GATE_INP), hp->n_expert,
                                buf(gs, BG_BUF_ROUTER), hp->n_expert};
    return gs->api->route(gs->g, &router, hp->n_embd, buf(gs, BG_BUF_XN), gs->xn_codes, s->n_tok,
                          hp->n_expert_used, bufv(gs, BG_BUF_CHOSEN), buf(gs, BG_BUF_CHOSEN_W),
                          grouped ? bufv(gs, BG_BUF_MEMBERS) : NULL);
}

/* Whether layer il's shared expert runs with the routed ones, as one more
 * expert (the same types and width), rather than apart. */
static bool shared_joins(const brigade_session *s, uint32_t il)
{
    const bg_layer *L = &s->model->layers[il];
    const brigade_tensor_info *sg = L->t[BG_ROLE_FFN_GATE_SHEXP], *su = L->t[BG_ROLE_FFN_UP_SHEXP],
                              *sd = L->t[BG_ROLE_FFN_DOWN_SHEXP];
    return sg && su && sd && bg_plan_shared_slot(s->hp) &&
           sg->type == L->t[BG_ROLE_FFN_GATE_EXPS]->type &&
           su->type == L->t[BG_ROLE_FFN_UP_EXPS]->type &&
           sd->type == L->t[BG_ROLE_FFN_DOWN_EXPS]->type;
}

/* slot_out = each chosen expert's output, for route's choice, and the
 * shared expert's in slots n_tok * n_used + t when it joins them; then the
 * feed-forward half's end. */
static int routed_experts(bg_gpu_session *gs, const brigade_session *s, uint32_t il,
                          bool with_shared, const bg_gpu_ffn_end *end)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const brigade_tensor_info *g = L->t[BG_ROLE_FFN_GATE_EXPS], *u = L->t[BG_ROLE_FFN_UP_EXPS],
                              *d = L->t[BG_ROLE_FFN_DOWN_EXPS];
    uint64_t gb = 0, ub = 0, db = 0;
    bg_type_row_bytes((bg_type)g->type, g->ne[0], &gb);
    bg_type_row_bytes((bg_type)u->type, u->ne[0], &ub);
    bg_type_row_bytes((bg_type)d->type, d->ne[0], &db);
    bg_gpu_moe_args a = {
        .n_tok = s->n_tok, .n_embd = hp->n_embd, .n_ff = hp->n_ff_exp, .n_expert = hp->n_expert,
        .n_used = hp->n_expert_used, .type_gate = g->type, .type_up = u->type,
        .type_down = d->type, .gate_expert_bytes = gb * g->ne[1],
        .up_expert_bytes = ub * u->ne[1], .down_expert_bytes = db * d->ne[1],
    };
    if (with_shared) {
        a.d_gate_shexp = weight(gs, il, BG_ROLE_FFN_GATE_SHEXP);
        a.d_up_shexp = weight(gs, il, BG_ROLE_FFN_UP_SHEXP);
        a.d_down_shexp = weight(gs, il, BG_ROLE_FFN_DOWN_SHEXP);
    }
    /* gx holds the [slot][n_ff] hidden rows and members the grouping by
     * expert (the planner sizes both for it, the shared slots too) */
    return gs->api->moe(gs->g, &a, buf(gs, BG_BUF_XN), gs->xn_codes,
                        weight(gs, il, BG_ROLE_FFN_GATE_EXPS),
                        weight(gs, il, BG_ROLE_FFN_UP_EXPS), weight(gs, il, BG_ROLE_FFN_DOWN_EXPS),
                        bufv(gs, BG_BUF_MEMBERS), buf(gs, BG_BUF_GX), buf(gs, BG_BUF_SLOT_OUT),
                        end);
}

/* gy = the shared expert's output, ungated, where the layer has one. */
static int shared_expert(bg_gpu_session *gs, const brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    if (!L->t[BG_ROLE_FFN_UP_SHEXP])
        return 0;
    const size_t E = hp->n_embd, w = s->ff_width;
    float *xn = buf(gs, BG_BUF_XN), *fg = buf(gs, BG_BUF_FF_GATE), *fu = buf(gs, BG_BUF_FF_UP);
    const brigade_tensor_info *tg = L->t[BG_ROLE_FFN_GATE_SHEXP], *tu = L->t[BG_ROLE_FFN_UP_SHEXP];
    int rc;
    if (tg->type == tu->type && tg->ne[0] == tu->ne[0] && tg->ne[1] == tu->ne[1]) {
        rc = gs->api->matmul_swiglu(gs->g, tg->type, weight(gs, il, BG_ROLE_FFN_GATE_SHEXP),
                                    weight(gs, il, BG_ROLE_FFN_UP_SHEXP), tg->ne[0], tg->ne[1],
                                    xn, E, fg, w, s->n_tok);
    } else {
        rc = project(gs, s, il, BG_ROLE_FFN_GATE_SHEXP, xn, E, fg, w);
        rc = rc ? rc : project(gs, s, il, BG_ROLE_FFN_UP_SHEXP, xn, E, fu, w);
        rc = rc ? rc : gs->api->silu_mul(gs->g, fg, fu, hp->n_ff_shexp, w, s->n_tok);
    }
    return rc ? rc : project(gs, s, il, BG_ROLE_FFN_DOWN_SHEXP, fg, w, buf(gs, BG_BUF_GY), E);
}

static int norm(bg_gpu_session *gs, const brigade_session *s, uint32_t il, int role)
{
    const uint32_t E = s->hp->n_embd;
    return gs->api->rmsnorm(gs->g, buf(gs, BG_BUF_XN), E, buf(gs, BG_BUF_X), E,
                            weight(gs, il, role), E, s->n_tok, s->hp->rms_eps, gs->xn_codes);
}

/* The norm before the mixer (ffn false) or the experts of layer il. */
static int norm_role(const bg_hparams *hp, bool ffn)
{
    if (!ffn)
        return BG_ROLE_ATTN_NORM;
    return hp->arch == BG_ARCH_QWEN35MOE ? BG_ROLE_POST_NORM : BG_ROLE_FFN_NORM;
}

/* The end of layer il's mixer: its out projection of attn (aq: coded, or
 * NULL), the residual x += out, and the norm of its experts, in one pass. */
static int mixer_end(bg_gpu_session *gs, const brigade_session *s, uint32_t il, int out_role,
                     const uint8_t *aq)
{
    const bg_hparams *hp = s->hp;
    const brigade_tensor_info *t = s->model->layers[il].t[out_role];
    const bg_gpu_proj out = {t->type, weight(gs, il, out_role), hp->n_embd, buf(gs, BG_BUF_OUT),
                             hp->n_embd};
    return gs->api->matmul_add_rmsnorm(gs->g, &out, t->ne[0], buf(gs, BG_BUF_ATTN), s->a_width,
                                       aq, s->n_tok, buf(gs, BG_BUF_X), buf(gs, BG_BUF_XN),
                                       weight(gs, il, norm_role(hp, true)), hp->rms_eps,
                                       gs->xn_codes);
}

/* The end of layer il's feed-forward half: the routed rows (w: their
 * weights, from the routing; NULL: one row a token, the CPU's sum), plus
 * the gated shared expert's rows (or NULL), into the residual, then the
 * next layer's mixer norm (after the last layer, the output norm: the
 * head's input, coded). */
static bg_gpu_ffn_end ffn_end(bg_gpu_session *gs, const brigade_session *s, uint32_t il,
                              const float *w, const float *shared)
{
    const bg_hparams *hp = s->hp;
    return (bg_gpu_ffn_end){
        .d_x = buf(gs, BG_BUF_X), .d_xn = buf(gs, BG_BUF_XN), .d_w = w, .d_shared = shared,
        .d_shared_w = shared ? weight(gs, il, BG_ROLE_FFN_GATE_INP_SHEXP) : NULL,
        .d_norm_w = il + 1 < hp->n_layers ? weight(gs, il + 1, norm_role(hp, false))
                                          : at(gs, gs->layout.head_norm_off),
        .eps = hp->rms_eps, .d_xq = gs->xn_codes,
    };
}

/* The shared expert's output rows: gy, where it ran apart. */
static const float *shared_rows(bg_gpu_session *gs, const brigade_session *s, uint32_t il)
{
    return s->model->layers[il].t[BG_ROLE_FFN_UP_SHEXP] ? buf(gs, BG_BUF_GY) : NULL;
}

static int moe(bg_gpu_session *gs, const brigade_session *s, uint32_t il)
{
    const uint32_t K = s->hp->n_expert_used;
    const bool joins = shared_joins(s, il);
    int rc = route(gs, s, il, true);
    /* apart, the shared expert runs first: the experts' end reads its rows */
    rc = rc || joins ? rc : shared_expert(gs, s, il);
    const float *shared = joins ? buf(gs, BG_BUF_SLOT_OUT) + (size_t)s->n_tok * K * s->hp->n_embd
                                : shared_rows(gs, s, il);
    const bg_gpu_ffn_end end = ffn_end(gs, s, il, buf(gs, BG_BUF_CHOSEN_W), shared);
    return rc ? rc : routed_experts(gs, s, il, joins, &end);
}

/* Layer il's feed-forward half with its routed experts in host memory.
 * The device routes; the CPU receives the normed hidden state and the
 * choice, and runs the chosen experts while the device runs the shared
 * expert; the CPU's sum goes back and joins it. Per token one row (and the
 * k choices) goes down and one row comes up; x stays on the device. */
static int cpu_experts(bg_gpu_session *gs, brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_gpu_api *api = gs->api;
    const uint64_t rows = (uint64_t)s->n_tok * hp->n_embd * sizeof(float);
    const uint64_t slots = (uint64_t)s->n_tok * hp->n_expert_used;
    int rc = route(gs, s, il, false); /* xn: normed by the mixer's residual */
    /* the copies follow the routing, and one wait covers them */
    rc = rc ? rc : api->download_async(gs->g, s->xn, buf(gs, BG_BUF_XN), rows);
    rc = rc ? rc
            : api->download_async(gs->g, s->chosen, bufv(gs, BG_BUF_CHOSEN),
                                  slots * sizeof(int32_t));
    rc = rc ? rc
            : api->download_async(gs->g, s->chosen_w, buf(gs, BG_BUF_CHOSEN_W),
                                  slots * sizeof(float));
    rc = rc ? rc : api->sync(gs->g);
    /* enqueued, so the device computes it while the CPU works below */
    rc = rc ? rc : shared_expert(gs, s, il);
    if (rc)
        return rc;
    bg_block_moe_routed(s, il);
    rc = api->upload(gs->g, buf(gs, BG_BUF_SLOT_OUT), s->out, rows);
    const bg_gpu_ffn_end end = ffn_end(gs, s, il, NULL, shared_rows(gs, s, il));
    return rc ? rc
              : api->expert_sum(gs->g, &end, buf(gs, BG_BUF_SLOT_OUT), 1, hp->n_embd, s->n_tok);
}

/* Enqueues layer il's device work: the mixer, and the experts too when
 * they are on the GPU. No host work, so decode steps can be captured.
 * Each residual carries the next half-layer's norm; the first GPU layer
 * norms its input itself. */
static int enqueue_layer(bg_gpu_session *gs, const brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bool q35 = hp->arch == BG_ARCH_QWEN35MOE;
    const bool recurrent = q35 && bg_hparams_is_recurrent(hp, il);
    uint8_t *aq = NULL;
    int rc = il == gs->split.first_gpu_layer ? norm(gs, s, il, BG_ROLE_ATTN_NORM) : 0;
    if (!rc)
        rc = recurrent ? deltanet(gs, s, il, &aq) : attention(gs, s, il, q35, &aq);
    rc = rc ? rc
            : mixer_end(gs, s, il, recurrent ? BG_ROLE_SSM_OUT : BG_ROLE_ATTN_OUT, aq);
    if (!rc && bg_gpu_experts_on(&gs->split, il))
        rc = moe(gs, s, il);
    return rc;
}

brigade_status bg_gpu_layers(bg_gpu_session *gs, brigade_session *s, brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    if (put_x(gs, s))
        return gpu_fail(gs, err, "uploading the hidden state");
    gs->xn_final = true; /* by the last layer's end (ffn_end) */
    /* the layers with experts on the CPU, each with its round trip */
    const uint32_t from = device_only_from(&gs->split);
    for (uint32_t il = gs->split.first_gpu_layer; il < from; il++)
        if (enqueue_layer(gs, s, il) || cpu_experts(gs, s, il))
            return gpu_fail(gs, err, "the forward pass (experts on the CPU)");
    if (gs->graphs && s->n_tok <= GRAPH_MAX_TOKENS) {
        /* every kernel reads positions from the device, so a step's graph
         * depends only on the batch size and on how its tokens fall into
         * sequences (seq_runs, seq_single) */
        const uint64_t key =
            s->n_tok | (uint64_t)gs->seq_runs << 32 | (uint64_t)gs->seq_single << 33;
        bool replay = false;
        int rc = gs->api->graph_begin(gs->g, key, &replay);
        if (rc < 0)
            return gpu_fail(gs, err, "the forward pass (graph)");
        if (rc == 0) {
            for (uint32_t il = from; !rc && !replay && il < hp->n_layers; il++)
                rc = enqueue_layer(gs, s, il);
            /* end the capture even after an error, then report */
            uint32_t n_nodes = 0;
            if (gs->api->graph_end(gs->g, key, &n_nodes) || rc)
                return gpu_fail(gs, err, "the forward pass (graph)");
            if (s->n_tok == 1 && n_nodes)
                gs->report.decode_kernels = n_nodes;
            return BRIGADE_OK;
        }
        /* graphs unavailable: run eagerly below */
    }
    for (uint32_t il = from; il < hp->n_layers; il++)
        if (enqueue_layer(gs, s, il))
            return gpu_fail(gs, err, "the forward pass");
    return BRIGADE_OK;
}

brigade_status bg_gpu_head(bg_gpu_session *gs, brigade_session *s, const uint32_t *rows,
                           uint32_t n_rows, float *logits, brigade_error *err)
{
    const bg_hparams *hp = s->hp;
    const brigade_model *m = s->model;
    const uint32_t E = hp->n_embd;
    const brigade_tensor_info *head = m->global.t[BG_ROLE_OUTPUT];
    float *x = buf(gs, BG_BUF_X), *xn = buf(gs, BG_BUF_XN), *d_logits = at(gs, gs->layout.logits_off);
    const float *d_norm = at(gs, gs->layout.head_norm_off);
    /* consecutive rows the last layer normed (a decode step's, a prompt's
     * last) are read where they are, with their codes; others are normed
     * into xn's first rows */
    bool in_place = gs->xn_final;
    for (uint32_t r = 1; r < n_rows; r++)
        in_place = in_place && rows[r] == rows[0] + r;
    int rc = put_x(gs, s);
    for (uint32_t r = 0; r < n_rows && !rc && !in_place; r++)
        rc = gs->api->rmsnorm(gs->g, xn + (size_t)r * E, E, x + (size_t)rows[r] * E, E, d_norm, E,
                              1, hp->rms_eps, NULL);
    const uint32_t first = in_place && n_rows ? rows[0] : 0;
    for (uint32_t r0 = 0; r0 < n_rows && !rc; r0 += BG_GPU_LOGITS_ROWS) {
        uint32_t n = n_rows - r0 < BG_GPU_LOGITS_ROWS ? n_rows - r0 : BG_GPU_LOGITS_ROWS;
        const uint8_t *codes = in_place && gs->xn_codes
                                   ? gs->xn_codes + (size_t)(first + r0) * BG_GPU_ACT_CODE_BYTES(E)
                                   : NULL;
        rc = gs->api->matmul(gs->g, head->type, at(gs, gs->layout.head_off), head->ne[0],
                             head->ne[1], xn + (size_t)(first + r0) * E, E, codes, d_logits,
                             hp->n_vocab, n);
        rc = rc ? rc
                : gs->api->download(gs->g, logits + (size_t)r0 * hp->n_vocab, d_logits,
                                    (uint64_t)n * hp->n_vocab * sizeof(float));
    }
    if (rc)
        return gpu_fail(gs, err, "the output head");
    return BRIGADE_OK;
}

/* ------------------------------------------------------ sequence state */

brigade_status bg_gpu_seq_clear(bg_gpu_session *gs, const brigade_session *s, uint32_t seq)
{
    for (uint32_t il = 0; il < s->hp->n_layers; il++) {
        const bg_gpu_layer_layout *LL = &gs->layout.layers[il];
        if (LL->conv_off == BG_GPU_NONE)
            continue;
        if (gs->api->zero(gs->g, gs->base + LL->conv_off + seq * gs->plan.conv_layer_bytes,
                          gs->plan.conv_layer_bytes) ||
            gs->api->zero(gs->g, gs->base + LL->ssm_off + seq * gs->plan.ssm_layer_bytes,
                          gs->plan.ssm_layer_bytes))
            return BRIGADE_ERR_IO;
    }
    return BRIGADE_OK;
}

brigade_status bg_gpu_seq_copy(bg_gpu_session *gs, const brigade_session *s, uint32_t il,
                               uint32_t seq, uint8_t *host, bool save, brigade_error *err)
{
    (void)s;
    const bg_gpu_layer_layout *LL = &gs->layout.layers[il];
    uint8_t *parts[2] = {gs->base + LL->conv_off + seq * gs->plan.conv_layer_bytes,
                         gs->base + LL->ssm_off + seq * gs->plan.ssm_layer_bytes};
    uint64_t sizes[2] = {gs->plan.conv_layer_bytes, gs->plan.ssm_layer_bytes};
    for (int k = 0; k < 2; k++) {
        int rc = save ? gs->api->download(gs->g, host, parts[k], sizes[k])
                      : gs->api->upload(gs->g, parts[k], host, sizes[k]);
        if (rc)
            return gpu_fail(gs, err, save ? "saving a checkpoint" : "restoring a checkpoint");
        host += sizes[k];
    }
    /* the caller may reuse or free its buffer on return, page-locked or not */
    if (!save && gs->api->wait_uploads(gs->g))
        return gpu_fail(gs, err, "restoring a checkpoint");
    return BRIGADE_OK;
}
