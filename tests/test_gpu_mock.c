/* The GPU backend's host side end to end, without a GPU: a stand-in
 * device whose memory is host memory and whose "kernels" are plain C with
 * the CUDA kernels' contracts (src/gpu.h) runs the session's GPU path
 * (src/gpu_backend.c: the split, the arena, uploads, every buffer offset
 * and stride, the hidden state crossing for CPU experts, the head, the
 * recurrent state on the device, checkpoints, and decode steps captured
 * once and replayed as CUDA graphs are), and its logits must match the CPU
 * session's. Built with BG_TEST_DEVICE and the CUDA emulation
 * (build/tests/emu_gpu_session), the same sessions run on the CUDA kernels
 * themselves, compiled for the host (tests/cuda_emu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "error.h"
#include "gpu_backend.h"
#include "model.h"

#include "gpu_reference.h"


/* ------------------------------------------- the stand-in with graphs */

/* As the CUDA backend's graphs: between graph_begin and graph_end the
 * operations are recorded, not run; end runs the recording, and a later
 * step with the same key runs it again instead of new calls. If a step's
 * operations depended on anything but device memory (a position passed by
 * value, say), the replayed steps would compute something else than the
 * CPU and the logits would differ. Copies in or out of the device while
 * capturing are errors, as they would break a real capture. */
enum { OP_MATMUL, OP_RMSNORM, OP_SILU_MUL, OP_EXPERT_SUM, OP_ATTN, OP_DN, OP_ROUTE,
       OP_MOE, OP_MATMUL_SWIGLU, OP_ADD_RMSNORM, OP_MATMUL_MULTI, OP_MATMUL_ADD_RMSNORM };
typedef struct rec {
    int op;
    uint32_t type, n, rows;
    uint64_t n_in, n_out, len;
    size_t s1, s2;
    float eps;
    void *p[12];
    bg_gpu_attn_args attn;
    bg_gpu_deltanet_args dn;
    bg_gpu_moe_args moe;
    bg_gpu_proj proj[BG_GPU_MAX_PROJ];
    bg_gpu_ffn_end end;
    bool has_end;
} rec;

enum { MAX_RECS = 4096, MAX_KEYS = 32 };
static rec recs[MAX_KEYS][MAX_RECS];
static int n_recs[MAX_KEYS];
static uint64_t keys[MAX_KEYS];
static int n_keys, capturing = -1, captures, replays, capture_violations;

static int record(const rec *r)
{
    if (n_recs[capturing] == MAX_RECS)
        return -1;
    recs[capturing][n_recs[capturing]++] = *r;
    return 0;
}

static int g_matmul(bg_gpu *g, uint32_t type, const void *w, uint64_t n_in, uint64_t n_out,
                    const float *x, size_t xs, const uint8_t *xq, float *y, size_t ys,
                    uint32_t n_tok)
{
    (void)xq; /* the reference works from the floats */
    if (capturing < 0)
        return m_matmul(g, type, w, n_in, n_out, x, xs, y, ys, n_tok);
    return record(&(rec){.op = OP_MATMUL, .type = type, .n_in = n_in, .n_out = n_out, .s1 = xs,
                         .s2 = ys, .n = n_tok, .p = {(void *)w, (void *)x, y}});
}
static int g_rmsnorm(bg_gpu *g, float *y, size_t ys, const float *x, size_t xs, const float *w,
                     uint32_t n, uint32_t rows, float eps, uint8_t *yq)
{
    if (capturing < 0)
        return m_rmsnorm(g, y, ys, x, xs, w, n, rows, eps, yq);
    return record(&(rec){.op = OP_RMSNORM, .s1 = ys, .s2 = xs, .n = n, .rows = rows, .eps = eps,
                         .p = {y, (void *)x, (void *)w, yq}});
}
static int g_matmul_multi(bg_gpu *g, const bg_gpu_proj *proj, uint32_t n_proj, uint64_t n_in,
                          const float *x, size_t xs, const uint8_t *xq, uint32_t n_tok)
{
    if (capturing < 0)
        return m_matmul_multi(g, proj, n_proj, n_in, x, xs, xq, n_tok);
    if (n_proj > BG_GPU_MAX_PROJ)
        return -1;
    rec r = {.op = OP_MATMUL_MULTI, .n_in = n_in, .s1 = xs, .n = n_tok, .rows = n_proj,
             .p = {(void *)x, (void *)xq}};
    memcpy(r.proj, proj, n_proj * sizeof *proj);
    return record(&r);
}
static int g_matmul_swiglu(bg_gpu *g, uint32_t type, const void *wg, const void *wu,
                           uint64_t n_in, uint64_t n_out, const float *x, size_t xs, float *h,
                           size_t hs, uint32_t n_tok)
{
    if (capturing < 0)
        return m_matmul_swiglu(g, type, wg, wu, n_in, n_out, x, xs, h, hs, n_tok);
    return record(&(rec){.op = OP_MATMUL_SWIGLU, .type = type, .n_in = n_in, .n_out = n_out,
                         .s1 = xs, .s2 = hs, .n = n_tok,
                         .p = {(void *)wg, (void *)wu, (void *)x, h}});
}
static int g_add_rmsnorm(bg_gpu *g, float *x, const float *y, float *xn, const float *w,
                         uint32_t n, uint32_t rows, float eps, uint8_t *xq)
{
    if (capturing < 0)
        return m_add_rmsnorm(g, x, y, xn, w, n, rows, eps, xq);
    return record(&(rec){.op = OP_ADD_RMSNORM, .n = n, .rows = rows, .eps = eps,
                         .p = {x, (void *)y, xn, (void *)w, xq}});
}
static int g_silu_mul(bg_gpu *g, float *gate, const float *up, uint32_t n, size_t stride,
                      uint32_t rows)
{
    if (capturing < 0)
        return m_silu_mul(g, gate, up, n, stride, rows);
    return record(&(rec){.op = OP_SILU_MUL, .n = n, .s1 = stride, .rows = rows,
                         .p = {gate, (void *)up}});
}
static int g_matmul_add_rmsnorm(bg_gpu *g, const bg_gpu_proj *pr, uint64_t n_in, const float *a,
                                size_t as, const uint8_t *aq, uint32_t n_tok, float *x,
                                float *xn, const float *norm_w, float eps, uint8_t *xq)
{
    if (capturing < 0)
        return m_matmul_add_rmsnorm(g, pr, n_in, a, as, aq, n_tok, x, xn, norm_w, eps, xq);
    return record(&(rec){.op = OP_MATMUL_ADD_RMSNORM, .n_in = n_in, .s1 = as, .n = n_tok,
                         .eps = eps, .proj = {*pr},
                         .p = {(void *)a, (void *)aq, x, xn, (void *)norm_w, xq}});
}
static int g_expert_sum(bg_gpu *g, const bg_gpu_ffn_end *e, const float *slot, uint32_t k,
                        uint32_t n, uint32_t n_tok)
{
    if (capturing < 0)
        return m_expert_sum(g, e, slot, k, n, n_tok);
    return record(&(rec){.op = OP_EXPERT_SUM, .n = n, .rows = n_tok, .len = k, .end = *e,
                         .p = {(void *)slot}});
}
static int g_attention(bg_gpu *g, const bg_gpu_attn_args *a, float *q, float *kv, float *gate,
                       float *attn, const float *qn, const float *kn, uint8_t *kc, uint8_t *vc,
                       const uint32_t *ts, const uint32_t *tp, uint8_t *aq, void *split)
{
    (void)aq;
    if (capturing < 0)
        return m_attention(g, a, q, kv, gate, attn, qn, kn, kc, vc, ts, tp, NULL, split);
    return record(&(rec){.op = OP_ATTN, .attn = *a,
                         .p = {q, kv, gate, attn, (void *)qn, (void *)kn, kc, vc, (void *)ts,
                               (void *)tp, split}});
}
static int g_deltanet(bg_gpu *g, const bg_gpu_deltanet_args *a, float *qkv, const float *z,
                      float *heads, const float *dt, const float *A, const float *cw,
                      const float *nw, float *conv, float *ssm, float *attn, uint8_t *aq,
                      const uint32_t *ts)
{
    (void)aq;
    if (capturing < 0)
        return m_deltanet(g, a, qkv, z, heads, dt, A, cw, nw, conv, ssm, attn, NULL, ts);
    return record(&(rec){.op = OP_DN, .dn = *a,
                         .p = {qkv, (void *)z, heads, (void *)dt, (void *)A, (void *)cw,
                               (void *)nw, conv, ssm, attn, (void *)ts}});
}
static int g_route(bg_gpu *g, const bg_gpu_proj *router, uint64_t n_in, const float *x,
                   const uint8_t *xq, uint32_t n_tok, uint32_t k, int32_t *chosen, float *cw,
                   int32_t *groups)
{
    if (capturing < 0)
        return m_route(g, router, n_in, x, xq, n_tok, k, chosen, cw, groups);
    return record(&(rec){.op = OP_ROUTE, .n = n_tok, .n_in = n_in, .n_out = k,
                         .proj = {*router}, .p = {(void *)x, (void *)xq, chosen, cw, groups}});
}
static int g_moe(bg_gpu *g, const bg_gpu_moe_args *a, const float *xn, const uint8_t *xq,
                 const void *wg, const void *wu, const void *wd, const int32_t *groups, float *h,
                 float *so, const bg_gpu_ffn_end *end)
{
    if (capturing < 0)
        return m_moe(g, a, xn, xq, wg, wu, wd, groups, h, so, end);
    return record(&(rec){.op = OP_MOE, .moe = *a, .end = end ? *end : (bg_gpu_ffn_end){0},
                         .has_end = end != NULL,
                         .p = {(void *)xn, (void *)xq, (void *)wg, (void *)wu, (void *)wd,
                               (void *)groups, h, so}});
}

static void run_recs(bg_gpu *g, int k)
{
    for (int i = 0; i < n_recs[k]; i++) {
        const rec *r = &recs[k][i];
        void *const *p = r->p;
        switch (r->op) {
        case OP_MATMUL:
            m_matmul(g, r->type, p[0], r->n_in, r->n_out, p[1], r->s1, p[2], r->s2, r->n);
            break;
        case OP_RMSNORM:
            m_rmsnorm(g, p[0], r->s1, p[1], r->s2, p[2], r->n, r->rows, r->eps, p[3]);
            break;
        case OP_SILU_MUL: m_silu_mul(g, p[0], p[1], r->n, r->s1, r->rows); break;
        case OP_EXPERT_SUM: m_expert_sum(g, &r->end, p[0], (uint32_t)r->len, r->n, r->rows); break;
        case OP_MATMUL_ADD_RMSNORM:
            m_matmul_add_rmsnorm(g, &r->proj[0], r->n_in, p[0], r->s1, p[1], r->n, p[2], p[3],
                                 p[4], r->eps, p[5]);
            break;
        case OP_ATTN:
            m_attention(g, &r->attn, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9],
                        NULL, p[10]);
            break;
        case OP_DN:
            m_deltanet(g, &r->dn, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9],
                       NULL, p[10]);
            break;
        case OP_MATMUL_SWIGLU:
            m_matmul_swiglu(g, r->type, p[0], p[1], r->n_in, r->n_out, p[2], r->s1, p[3], r->s2,
                            r->n);
            break;
        case OP_MATMUL_MULTI:
            m_matmul_multi(g, r->proj, r->rows, r->n_in, p[0], r->s1, p[1], r->n);
            break;
        case OP_ADD_RMSNORM:
            m_add_rmsnorm(g, p[0], p[1], p[2], p[3], r->n, r->rows, r->eps, p[4]);
            break;
        case OP_ROUTE:
            m_route(g, &r->proj[0], r->n_in, p[0], p[1], r->n, (uint32_t)r->n_out, p[2], p[3],
                    p[4]);
            break;
        case OP_MOE:
            m_moe(g, &r->moe, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                  r->has_end ? &r->end : NULL);
            break;
        }
    }
}

static int g_init(int device, bg_gpu **out, char *desc, size_t dc, char *msg, size_t mc)
{
    n_keys = 0;
    capturing = -1;
    memset(n_recs, 0, sizeof n_recs);
    return m_init(device, out, desc, dc, msg, mc);
}
static int g_copy(bg_gpu *g, void *dst, const void *src, uint64_t n)
{
    capture_violations += capturing >= 0;
    return m_copy(g, dst, src, n);
}
static int g_zero(bg_gpu *g, void *dst, uint64_t n)
{
    capture_violations += capturing >= 0;
    return m_zero(g, dst, n);
}
static int g_begin(bg_gpu *g, uint64_t key, bool *replay)
{
    (void)g;
    *replay = false;
    for (int k = 0; k < n_keys; k++)
        if (keys[k] == key) {
            *replay = true;
            return 0;
        }
    if (n_keys == MAX_KEYS)
        return 1;
    keys[n_keys] = key;
    n_recs[n_keys] = 0;
    capturing = n_keys++;
    return 0;
}
static int g_end(bg_gpu *g, uint64_t key, uint32_t *n_nodes)
{
    int k = capturing;
    capturing = -1;
    if (k < 0) {
        for (k = 0; k < n_keys && keys[k] != key; k++)
            ;
        if (k == n_keys)
            return -1;
        replays++;
    } else {
        captures++;
        *n_nodes = (uint32_t)n_recs[k]; /* the device calls recorded */
    }
    run_recs(g, k);
    return 0;
}

/* Host memory: the blocks the device allocated and released. */
static int host_allocs, host_frees;
static int g_host_alloc(bg_gpu *g, uint64_t bytes, void **out)
{
    host_allocs++;
    return m_host_alloc(g, bytes, out);
}
static void g_host_free(void *host)
{
    host_frees++;
    m_host_free(host);
}

static const bg_gpu_api mock_graphs = {
    .init = g_init,
    .destroy = m_destroy,
    .error = m_error,
    .mem_info = m_mem,
    .alloc = m_alloc,
    .upload = g_copy,
    .wait_uploads = m_sync,
    .download = g_copy,
    .download_async = g_copy,
    .zero = g_zero,
    .host_alloc = g_host_alloc,
    .host_free = g_host_free,
    .set_scratch = m_set_scratch,
    .sync = m_sync,
    .supports = m_supports,
    .matmul = g_matmul,
    .matmul_multi = g_matmul_multi,
    .matmul_swiglu = g_matmul_swiglu,
    .rmsnorm = g_rmsnorm,
    .add_rmsnorm = g_add_rmsnorm,
    .matmul_add_rmsnorm = g_matmul_add_rmsnorm,
    .attention = g_attention,
    .deltanet = g_deltanet,
    .route = g_route,
    .moe = g_moe,
    .expert_sum = g_expert_sum,
    .silu_mul = g_silu_mul,
    .graph_begin = g_begin,
    .graph_end = g_end,
};

/* ------------------------------------------------------------ the test */

static double nmse(const float *a, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Prefill, decode, a two-sequence batch and a checkpoint round trip: the
 * logits of each, concatenated. */
static float *run(const brigade_model *m, brigade_session_options o, size_t *n_out,
                  brigade_error *err)
{
    brigade_session *s = NULL;
    if (brigade_session_new(m, &o, &s, err))
        return NULL;
    const uint32_t V = brigade_model_n_vocab(m);
    float *all = calloc((size_t)V * 16, sizeof *all);
    size_t n = 0;
    int32_t prompt[7] = {3, 14, 15, 92, 65, 35, 89};
    brigade_status st = brigade_session_eval(s, prompt, 7, false, all, err);
    n += V;
    for (int i = 0; i < 3 && !st; i++, n += V) {
        int32_t tok = 100 + i;
        st = brigade_session_eval(s, &tok, 1, false, all + n, err);
    }
    /* sequence 1 starts while sequence 0 goes on; logits of rows that do
     * not follow each other */
    int32_t toks[4] = {7, 8, 9, 200};
    uint32_t seq[4] = {1, 1, 1, 0};
    bool want[4] = {true, false, true, true};
    brigade_batch b = {toks, seq, want, 4};
    if (!st)
        st = brigade_session_eval_batch(s, &b, all + n, err);
    n += 3 * V;
    /* a checkpoint of sequence 1, two more tokens, back, the same token again */
    uint64_t cb = brigade_session_checkpoint_bytes(s);
    void *ck = malloc(cb ? cb : 1);
    if (!st)
        st = brigade_session_seq_save(s, 1, ck, cb, err);
    uint32_t past = brigade_session_seq_n_past(s, 1);
    int32_t two[2] = {50, 51};
    uint32_t s1[2] = {1, 1};
    bool w2[2] = {false, true};
    brigade_batch b2 = {two, s1, w2, 2};
    if (!st)
        st = brigade_session_eval_batch(s, &b2, all + n, err);
    n += V;
    if (!st)
        st = brigade_session_seq_restore(s, 1, ck, cb, past, err);
    brigade_batch b3 = {two, s1, w2, 2};
    if (!st)
        st = brigade_session_eval_batch(s, &b3, all + n, err);
    n += V;
    free(ck);
    brigade_session_free(s);
    if (st) {
        free(all);
        return NULL;
    }
    *n_out = n;
    return all;
}

/* A synthetic model of a preset written to path (dir/name.gguf) and
 * loaded, or NULL (the failure checked). */
static brigade_model *synth_model(char path[512], const char *dir, const char *name,
                                  const char *preset, uint32_t type, uint64_t seed)
{
    snprintf(path, 512, "%s/%s.gguf", dir, name);
    brigade_synth_options so = {.preset = preset, .type = type, .seed = seed, .fast = true};
    brigade_error err;
    brigade_model *m = NULL;
    CHECK(!brigade_synth(path, &so, &err), "synth: %s", err.message);
    CHECK(!brigade_model_load(path, NULL, &m, &err), "load: %s", err.message);
    return m;
}

/* The device test (BG_TEST_DEVICE, kernels emulated on the host) runs the
 * first two cache pairs and the first three splits: all on the GPU, the
 * last layers only, experts of some layers on the CPU. */
static bool fewer;

static void compare(const char *dir, const char *preset, uint32_t type, double bound)
{
    char path[512], name[128];
    snprintf(name, sizeof name, "%s-%s", preset, brigade_type_name(type));
    brigade_error err;
    brigade_model *m = synth_model(path, dir, name, preset, type, 11);
    if (!m)
        return;
    static const brigade_cache_type caches[][2] = {
        {BRIGADE_CACHE_F16, BRIGADE_CACHE_F16},
        {BRIGADE_CACHE_Q8_0, BRIGADE_CACHE_Q4_0},
        {BRIGADE_CACHE_F32, BRIGADE_CACHE_Q8_0},
    };
    static const struct {
        int32_t ngl;
        uint32_t n_cpu_moe;
    } splits[] = {{99, 0}, {2, 0}, {4, 2}, {3, 4}, {BRIGADE_NGL_AUTO, 0}};
    const size_t n_caches = fewer ? 2 : sizeof caches / sizeof *caches;
    const size_t n_splits = fewer ? 3 : sizeof splits / sizeof *splits;
    for (size_t c = 0; c < n_caches; c++) {
        brigade_session_options base = {.n_ctx = 64, .n_threads = 2, .n_ubatch = 4,
                                        .n_seq_max = 2, .cache_type_k = caches[c][0],
                                        .cache_type_v = caches[c][1]};
        size_t n_ref = 0;
        float *ref = run(m, base, &n_ref, &err);
        CHECK(ref, "%s %s: CPU run: %s", preset, brigade_type_name(type), err.message);
        for (size_t k = 0; ref && k < n_splits; k++) {
            brigade_session_options o = base;
            o.n_gpu_layers = splits[k].ngl;
            o.n_cpu_moe = splits[k].n_cpu_moe;
            size_t n = 0;
            float *got = run(m, o, &n, &err);
            CHECK(got && n == n_ref, "%s %s ngl %d: %s", preset, brigade_type_name(type),
                  splits[k].ngl, got ? "length" : err.message);
            double e = got ? nmse(got, ref, n) : 1;
            CHECK(e <= bound, "%s %s cache %s/%s ngl %d n_cpu_moe %u: NMSE %.3g > %.1g", preset,
                  brigade_type_name(type), brigade_cache_type_name(caches[c][0]),
                  brigade_cache_type_name(caches[c][1]), splits[k].ngl, splits[k].n_cpu_moe, e,
                  bound);
            free(got);
        }
        free(ref);
    }
    /* the report: the arena as laid out, what the stand-in's memory says;
     * a real card takes memory in pages of 2 MiB, so there the measured
     * bytes are the arena's rounded up to one */
#ifdef BG_TEST_DEVICE
    const uint64_t page = 2u << 20;
#else
    const uint64_t page = 1;
#endif
    brigade_session_options o = {.n_ctx = 64, .n_threads = 1, .n_gpu_layers = 99};
    brigade_session *s = NULL;
    CHECK(!brigade_session_new(m, &o, &s, &err), "%s", err.message);
    if (s) {
        brigade_gpu_report r;
        brigade_session_gpu(s, &r);
        CHECK(r.active && r.n_gpu_layers == brigade_model_n_layers(m) &&
                  r.measured_bytes >= r.arena_bytes &&
                  r.measured_bytes - r.arena_bytes < page && r.planned_bytes > 0 &&
                  r.arena_bytes >= r.weights_bytes + r.state_bytes,
              "report: active %d layers %u measured %llu arena %llu", r.active, r.n_gpu_layers,
              (unsigned long long)r.measured_bytes, (unsigned long long)r.arena_bytes);
    }
    brigade_session_free(s);
    /* budgets: an explicit split larger than --gpu-budget is refused with
     * the figures; -ngl auto with no room says so */
    s = NULL;
    o = (brigade_session_options){.n_ctx = 64, .n_threads = 1, .n_gpu_layers = 99,
                                  .gpu_budget = 4096};
    CHECK(brigade_session_new(m, &o, &s, &err) == BRIGADE_ERR_ARG &&
              strstr(err.message, "more than the budget"),
          "ngl 99 over budget: %s", s ? "accepted" : err.message);
    brigade_session_free(s);
    s = NULL;
    o.n_gpu_layers = BRIGADE_NGL_AUTO;
    CHECK(brigade_session_new(m, &o, &s, &err) && strstr(err.message, "not even the output head"),
          "auto, no room: %s", s ? "accepted" : err.message);
    brigade_session_free(s);
    brigade_model_free(m);
    remove(path);
}

/* Logits of 4 decode steps after a prompt of 200 tokens (prefilled 64 at
 * a time): each step attends to more than BG_GPU_ATT_SPLIT_MIN positions,
 * so the device splits them (gpu.h). */
static float *run_long(const brigade_model *m, brigade_session_options o, int n_prompt,
                       brigade_error *err)
{
    brigade_session *s = NULL;
    if (brigade_session_new(m, &o, &s, err))
        return NULL;
    const uint32_t V = brigade_model_n_vocab(m);
    float *all = calloc((size_t)V * 5, sizeof *all);
    int32_t prompt[200];
    for (int i = 0; i < n_prompt; i++)
        prompt[i] = (int32_t)((i * 7919) % 251 + 3);
    brigade_status st = brigade_session_eval(s, prompt, n_prompt, false, all, err);
    for (int i = 0; i < 4 && !st; i++) {
        int32_t tok = 100 + 17 * i;
        st = brigade_session_eval(s, &tok, 1, false, all + (size_t)(i + 1) * V, err);
    }
    brigade_session_free(s);
    if (st) {
        free(all);
        return NULL;
    }
    return all;
}

/* A long context's decode steps on the device against the CPU: the split
 * ranges' scratch (slot_out) and the merge wired in. On f32 weights the
 * only difference is the merge in f32 where the CPU's f16 accumulator
 * runs on (~1e-8 here); a range lost or misplaced moves the logits by
 * orders of magnitude more. On q4_K weights the prompt's micro-batches of
 * 64 also run the integer products (dense and experts) on the tensor
 * cores. */
static void long_decode_as(const char *dir, uint32_t type, double bound, int n_prompt,
                           uint32_t n_ubatch)
{
    char path[512];
    brigade_error err;
    brigade_model *m = synth_model(path, dir, "long", "tiny-qwen35moe", type, 5);
    if (!m)
        return;
    brigade_session_options o = {.n_ctx = 256, .n_threads = 2, .n_ubatch = n_ubatch};
    const size_t n = (size_t)brigade_model_n_vocab(m) * 5;
    float *ref = run_long(m, o, n_prompt, &err);
    CHECK(ref, "long context, CPU: %s", err.message);
    o.n_gpu_layers = 99;
    float *got = run_long(m, o, n_prompt, &err);
    CHECK(got, "long context, GPU: %s", err.message);
    double e = got && ref ? nmse(got, ref, n) : 1;
    CHECK(e <= bound, "long context (split attention), %s, %d prompt tokens by %u: NMSE %.3g > %.1g",
          brigade_type_name(type), n_prompt, n_ubatch, e, bound);
    free(ref);
    free(got);
    brigade_model_free(m);
    remove(path);
}

static void long_decode(const char *dir, uint32_t type, double bound)
{
    long_decode_as(dir, type, bound, 200, 64);
}

/* With the routed experts of the first layers on the CPU, a decode step's
 * layers after them still replay a graph: captured once per batch size,
 * the logits the CPU's. */
static void split_graphs(const char *dir)
{
    char path[512];
    brigade_error err;
    brigade_model *m = synth_model(path, dir, "split-graphs", "tiny-qwen35moe", BG_TYPE_F32, 3);
    if (!m)
        return;
    brigade_session_options o = {.n_ctx = 64, .n_threads = 2, .n_ubatch = 4, .n_seq_max = 2};
    size_t n_ref = 0, n = 0;
    float *ref = run(m, o, &n_ref, &err);
    o.n_gpu_layers = 99;
    o.n_cpu_moe = 2;
    const int captured = captures, replayed = replays;
    float *got = run(m, o, &n, &err);
    CHECK(got && ref && n == n_ref, "split graphs: %s", err.message);
    double e = got && ref && n == n_ref ? nmse(got, ref, n) : 1;
    CHECK(e <= 1e-5, "split graphs: NMSE %.3g", e);
    CHECK(captures > captured && replays > replayed,
          "split graphs: %d captured, %d replayed", captures - captured, replays - replayed);
    free(ref);
    free(got);
    brigade_model_free(m);
    remove(path);
}

/* The kernels a one-token decode step's graph holds, as the report gives
 * them, against the count the design says (want). */
static void decode_kernels(const char *dir, uint32_t type, uint32_t want)
{
    char path[512];
    brigade_error err;
    brigade_model *m = synth_model(path, dir, "kernels", "tiny-qwen35moe", type, 6);
    if (!m)
        return;
    brigade_session_options o = {.n_ctx = 32, .n_threads = 2, .n_ubatch = 8, .n_gpu_layers = 99};
    brigade_session *s = NULL;
    brigade_status st = brigade_session_new(m, &o, &s, &err);
    int32_t toks[3] = {5, 6, 7};
    for (int i = 0; i < 3 && !st; i++)
        st = brigade_session_eval(s, toks + i, 1, false, NULL, &err);
    brigade_gpu_report r = {0};
    if (!st)
        brigade_session_gpu(s, &r);
    CHECK(!st && r.decode_kernels == want, "decode step of tiny-qwen35moe %s: %u kernels, want %u%s%s",
          brigade_type_name(type), r.decode_kernels, want, st ? ": " : "", st ? err.message : "");
    brigade_session_free(s);
    brigade_model_free(m);
    remove(path);
}

/* The logits after a prompt of n_prompt tokens (5, 6, ...) in micro-batches
 * of n_ubatch, then n_decode decode steps (8, 9, ...; the last one's), in a
 * session made with the environment variable env set to value (env NULL:
 * none); NULL on an error. */
static float *session_logits(const brigade_model *m, const char *env, const char *value,
                             int n_prompt, int n_decode, uint32_t n_ubatch, brigade_error *err)
{
    brigade_session_options o = {.n_ctx = 64, .n_threads = 2, .n_ubatch = n_ubatch,
                                 .n_gpu_layers = 99};
    int32_t prompt[48];
    if (n_prompt < 1 || n_prompt > (int)(sizeof prompt / sizeof *prompt) ||
        n_prompt + n_decode > (int)o.n_ctx) {
        bg_fail(err, BRIGADE_ERR_ARG, "%d + %d tokens: more than the check holds", n_prompt,
                n_decode);
        return NULL;
    }
    if (env)
        setenv(env, value, 1);
    brigade_session *s = NULL;
    brigade_status st = brigade_session_new(m, &o, &s, err);
    if (env)
        unsetenv(env);
    float *logits = st ? NULL : malloc(brigade_model_n_vocab(m) * sizeof *logits);
    for (int i = 0; i < n_prompt; i++)
        prompt[i] = 5 + i;
    st = st       ? st
         : logits ? brigade_session_eval(s, prompt, n_prompt, false, n_decode ? NULL : logits, err)
                  : BRIGADE_ERR_NOMEM;
    for (int i = 0; i < n_decode && !st; i++) {
        const int32_t tok = 8 + i;
        st = brigade_session_eval(s, &tok, 1, false, logits, err);
    }
    brigade_session_free(s);
    if (st) {
        free(logits);
        return NULL;
    }
    return logits;
}

/* BRIGADE_CUDA_TIMELINE: the file lists a decode step's launches as the
 * design has them (the 26 of decode_kernels, then the output head), each
 * site's count, and times that add up to the step's; the logits are
 * those of a session without it. */
static void timeline(const char *dir)
{
    char path[512], file[600];
    brigade_error err;
    brigade_model *m = synth_model(path, dir, "timeline", "tiny-qwen35moe", BG_TYPE_Q4_K, 6);
    if (!m)
        return;
    snprintf(file, sizeof file, "%s/timeline.md", dir);
    remove(file);
    /* a 3-token prompt, then 24 decode steps (graphs replayed) */
    float *plain = session_logits(m, NULL, NULL, 3, 24, 8, &err);
    CHECK(plain, "timeline, without: %s", err.message);
    float *timed = session_logits(m, "BRIGADE_CUDA_TIMELINE", file, 3, 24, 8, &err);
    CHECK(timed, "timeline: %s", err.message);
    const uint32_t V = brigade_model_n_vocab(m);
    CHECK(plain && timed && !memcmp(plain, timed, V * sizeof *timed),
          "timeline: the logits differ from a session without it");
    FILE *f = fopen(file, "r");
    CHECK(f, "timeline: no file %s", file);
    char line[512];
    unsigned n_launch = 0, rows = 0, want_row = 0;
    double step = -1, sum = 0;
    int dn = -1, attn = -1, head = -1, bad = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned i, count;
        double us;
        char site[256];
        if (sscanf(line, "## Timeline of a step of 1 tokens: %u launches, %lf us", &n_launch,
                   &step) == 2)
            continue;
        if (sscanf(line, "| %u | %255[^|]| %lf |", &i, site, &us) == 3) {
            bad += i != want_row++ || us < 0;
            sum += us;
            rows++;
        } else if (sscanf(line, "| %255[^|]| %u | %lf |", site, &count, &us) == 3) {
            if (strstr(site, "k_dn_recur @"))
                dn = (int)count;
            else if (strstr(site, "k_attn @"))
                attn = (int)count;
            else if (strstr(site, "k_matmul<T, NR, TOK, INT> @"))
                head = (int)count;
        }
    }
    if (f)
        fclose(f);
    CHECK(n_launch == 27 && rows == 27 && !bad, "timeline: %u launches, %u rows (%d out of order)",
          n_launch, rows, bad);
    CHECK(dn == 3 && attn == 1 && head == 1,
          "timeline: %d DeltaNet, %d attention, %d head launches, want 3, 1, 1", dn, attn, head);
    CHECK(step >= 0 && fabs(sum - step) <= 0.1 * rows, "timeline: rows sum to %.1f us of %.1f",
          sum, step);
    free(plain);
    free(timed);
    remove(file);
    brigade_model_free(m);
    remove(path);
}

#ifdef BG_TEST_EMU_DEVICE
/* tests/cuda_emu: the bytes and ranges the kernels' bulk prefetches asked
 * for so far (each checked there: aligned, inside an allocation) */
void bg_emu_prefetched(unsigned long long *bytes, unsigned long long *ranges);

/* The bytes a decode step of one token prefetches before its waits, from
 * the model's tensors: every weight of a product whose rows no earlier
 * launch of the step picks (the projections, the router, the shared
 * expert, the output head), the k chosen experts' down rows (picked by the
 * routing two launches before), and each DeltaNet layer's state of the
 * sequence, and each attention layer's cached K and V rows of the
 * positions before the token's, pos. The routed experts' gate/up rows are
 * not: their routing is the launch right before theirs. */
static uint64_t step_prefetch_bytes(const brigade_model *m, uint32_t pos)
{
    static const bg_role fixed[] = {
        BG_ROLE_ATTN_Q,        BG_ROLE_ATTN_K,          BG_ROLE_ATTN_V,
        BG_ROLE_ATTN_OUT,      BG_ROLE_SSM_QKV,         BG_ROLE_SSM_GATE,
        BG_ROLE_SSM_BETA,      BG_ROLE_SSM_ALPHA,       BG_ROLE_SSM_OUT,
        BG_ROLE_FFN_GATE_INP,  BG_ROLE_FFN_GATE_SHEXP,  BG_ROLE_FFN_UP_SHEXP,
        BG_ROLE_FFN_DOWN_SHEXP,
    };
    const bg_hparams *hp = &m->hp;
    uint64_t bytes = m->global.t[BG_ROLE_OUTPUT]->n_bytes;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        const bg_layer *L = &m->layers[il];
        for (size_t r = 0; r < sizeof fixed / sizeof *fixed; r++)
            bytes += L->t[fixed[r]] ? L->t[fixed[r]]->n_bytes : 0;
        bytes += L->t[BG_ROLE_FFN_DOWN_EXPS]->n_bytes / hp->n_expert * hp->n_expert_used;
        if (bg_hparams_is_recurrent(hp, il))
            bytes += (uint64_t)hp->ssm_time_step_rank * hp->ssm_state_size *
                     hp->ssm_state_size * sizeof(float);
        else /* f16 K and V rows of the positions before pos */
            bytes += 2ull * pos * hp->n_head_kv * hp->head_dim * 2;
    }
    return bytes;
}
#endif

/* BRIGADE_CUDA_PREFETCH: the blocks' prefetches before their waits change
 * no result (the logits bitwise those with it off); on the emulation, a
 * decode step prefetches exactly the bytes step_prefetch_bytes counts
 * (every range here a multiple of 16 bytes at a 16-byte bound: nothing
 * trimmed) and none with it off. */
static void prefetch(const char *dir)
{
    char path[512];
    brigade_error err;
    brigade_model *m = synth_model(path, dir, "prefetch", "tiny-qwen35moe", BG_TYPE_Q4_K, 6);
    if (!m)
        return;
    float *off = session_logits(m, "BRIGADE_CUDA_PREFETCH", "0", 3, 24, 8, &err);
    CHECK(off, "prefetch off: %s", err.message);
    float *on = session_logits(m, NULL, NULL, 3, 24, 8, &err);
    CHECK(on, "prefetch: %s", err.message);
    CHECK(off && on && !memcmp(off, on, brigade_model_n_vocab(m) * sizeof *on),
          "prefetch: the logits differ from those with it off");
    free(off);
    free(on);
#ifdef BG_TEST_EMU_DEVICE
    for (int with = 0; with < 2; with++) {
        if (!with)
            setenv("BRIGADE_CUDA_PREFETCH", "0", 1);
        brigade_session_options o = {.n_ctx = 32, .n_threads = 2, .n_ubatch = 8,
                                     .n_gpu_layers = 99};
        brigade_session *s = NULL;
        brigade_status st = brigade_session_new(m, &o, &s, &err);
        unsetenv("BRIGADE_CUDA_PREFETCH");
        /* logits at each step, so each ends with the device's work (the
         * emulation runs it when the host waits) and has the head */
        float *logits = malloc(brigade_model_n_vocab(m) * sizeof *logits);
        st = st ? st : logits ? BRIGADE_OK : BRIGADE_ERR_NOMEM;
        int32_t toks[3] = {5, 6, 7};
        for (int i = 0; i < 3 && !st; i++) /* the last two replay the step's graph */
            st = brigade_session_eval(s, toks + i, 1, false, logits, &err);
        unsigned long long b0 = 0, r0 = 0, b1 = 0, r1 = 0;
        bg_emu_prefetched(&b0, &r0);
        const int32_t tok = 8;
        st = st ? st : brigade_session_eval(s, &tok, 1, false, logits, &err);
        bg_emu_prefetched(&b1, &r1);
        free(logits);
        const uint64_t want = with ? step_prefetch_bytes(m, 3) : 0;
        CHECK(!st && b1 - b0 == want,
              "prefetch %s: a decode step prefetched %llu bytes in %llu ranges, want %llu%s%s",
              with ? "on" : "off", b1 - b0, r1 - r0, (unsigned long long)want,
              st ? ": " : "", st ? err.message : "");
        brigade_session_free(s);
    }
#endif
    brigade_model_free(m);
    remove(path);
}

/* BRIGADE_CUDA_MMA_STAGE: the tensor cores' products staged through shared
 * memory (the default) do the same arithmetic in the same order as read
 * straight from memory: a prompt's logits bitwise equal, in q4_K (rows of
 * 144 bytes: 16-byte copies), q2_K (rows of 84: 4-byte ones), q6_K and
 * q3_K (rows of 210 and 110: 2-byte ones). */
static void mma_staging(const char *dir)
{
    static const uint32_t types[] = {BG_TYPE_Q4_K, BG_TYPE_Q2_K, BG_TYPE_Q6_K, BG_TYPE_Q3_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char path[512];
        brigade_error err;
        brigade_model *m = synth_model(path, dir, "staging", "tiny-qwen35moe", types[i], 7);
        if (!m)
            return;
        /* 40 tokens in one micro-batch: the integer products on the
         * tensor cores, 80 expert slots on 8 experts */
        float *plain = session_logits(m, "BRIGADE_CUDA_MMA_STAGE", "0", 40, 0, 64, &err);
        CHECK(plain, "unstaged %s: %s", brigade_type_name(types[i]), err.message);
        float *staged = session_logits(m, NULL, NULL, 40, 0, 64, &err);
        CHECK(staged, "staged %s: %s", brigade_type_name(types[i]), err.message);
        const size_t bytes = brigade_model_n_vocab(m) * sizeof *plain;
        CHECK(plain && staged && !memcmp(plain, staged, bytes),
              "staged %s: a prompt's logits differ from those unstaged",
              brigade_type_name(types[i]));
        free(plain);
        free(staged);
        brigade_model_free(m);
        remove(path);
    }
}

/* Page-locked host memory from the device: a GPU session's 7 buffers that
 * cross, and a logits buffer from the session (released through the
 * device, also after the session); on the CPU plain memory. The logits in
 * them are the CPU's. */
static void logits_buffers(const char *dir)
{
    char path[512];
    brigade_error err;
    brigade_model *m = synth_model(path, dir, "logits", "tiny-qwen35moe", BG_TYPE_F32, 4);
    if (!m)
        return;
    const uint32_t V = brigade_model_n_vocab(m);
    brigade_session_options o = {.n_ctx = 32, .n_threads = 2, .n_ubatch = 8};
    brigade_session *cpu = NULL, *gpu = NULL;
    const int allocated = host_allocs, freed = host_frees;
    CHECK(!brigade_session_new(m, &o, &cpu, &err), "logits buffers, CPU: %s", err.message);
    o.n_gpu_layers = 99;
    CHECK(!brigade_session_new(m, &o, &gpu, &err), "logits buffers, GPU: %s", err.message);
    if (cpu && gpu) {
        CHECK(host_allocs - allocated == 7,
              "logits buffers: %d session buffers from the device, want the 7 that cross",
              host_allocs - allocated);
        float *a = brigade_logits_alloc(cpu, 2), *b = brigade_logits_alloc(gpu, 2);
        CHECK(a && b && host_allocs - allocated == 8,
              "logits buffers: %d allocated by the device", host_allocs - allocated);
        CHECK(!brigade_logits_alloc(gpu, 0), "logits buffers: 0 rows give a buffer");
        int32_t prompt[3] = {5, 6, 7};
        if (a && b) {
            b[2 * (size_t)V - 1] = 0; /* the whole size writable */
            brigade_status st = brigade_session_eval(cpu, prompt, 3, false, a, &err);
            st = st ? st : brigade_session_eval(gpu, prompt, 3, false, b, &err);
            const double e = st ? 1 : nmse(b, a, V);
            CHECK(e <= 1e-5, "logits buffers: NMSE %.3g%s%s", e, st ? ": " : "",
                  st ? err.message : "");
        }
        brigade_logits_free(a);
        brigade_session_free(gpu);
        gpu = NULL;
        brigade_logits_free(b); /* after its session */
        CHECK(host_frees - freed == 8, "logits buffers: %d released by the device",
              host_frees - freed);
    }
    brigade_session_free(cpu);
    brigade_session_free(gpu);
    brigade_model_free(m);
    remove(path);
}

int main(void)
{
    char dir[] = "/tmp/brigade_gpu_mock_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
#ifdef BG_TEST_DEVICE
    /* The build's device instead of the stand-in: linked with the CUDA
     * emulation (tests/cuda_emu), the CUDA kernels themselves run the
     * session, decode steps captured and replayed as graphs. The kernels
     * sum in other orders and use libm's exp where the CPU uses ggml's;
     * on quantized weights the NMSE is ~1.7e-4 (q4_K) and ~5e-5 (q8_0),
     * and 1e-3 catches what an f16 V accumulated in f32 did (5e-3). */
    (void)mock, (void)mock_graphs, (void)split_graphs, (void)logits_buffers;
    fewer = true;
    compare(dir, "tiny-qwen35moe", BG_TYPE_F32, 1e-5);
    compare(dir, "tiny-qwen35moe", BG_TYPE_Q4_K, 1e-3);
    compare(dir, "tiny-qwen3moe", BG_TYPE_Q8_0, 1e-3);
    long_decode(dir, BG_TYPE_F32, 1e-6);
    long_decode(dir, BG_TYPE_Q4_K, 1e-3);
    /* the same long context taken apart, for a card where it fails: the
     * prompt in one micro-batch; decode steps within 128 positions (no
     * split); micro-batches of 8 (split attention in prefill too) */
    long_decode_as(dir, BG_TYPE_F32, 1e-6, 200, 256);
    long_decode_as(dir, BG_TYPE_F32, 1e-6, 100, 64);
    long_decode_as(dir, BG_TYPE_F32, 1e-6, 120, 8);
    /* the first layer's norm, then 6 per DeltaNet layer (in-projections;
     * convolution, state and gated norm; out projection with the residual
     * and norm; router with the routing; gate/up; down with the layer's
     * end) and 7 for the attention layer (q/k/v; attention, preparing its
     * token itself; its output coded, heads of 64 not being whole K-quant
     * blocks; then as DeltaNet's last four): 1 + 3 * 6 + 7 */
    decode_kernels(dir, BG_TYPE_Q4_K, 26);
    timeline(dir);
    prefetch(dir);
    mma_staging(dir);
    rmdir(dir);
    return check_summary("test_gpu_device");
#else
    (void)decode_kernels, (void)timeline, (void)prefetch, (void)mma_staging; /* the device's */
    bg_gpu_api_override(&mock);
    /* The stand-in's arithmetic is the CPU reference's up to summation
     * order, the SIMD kernels' roundings and f16 V accumulation: float
     * weights agree to 1e-5; on quantized ones random networks amplify
     * those roundings (a near-tie in routing picks another expert) to
     * ~1e-4..3e-3 here. A wrong offset, stride or state gives NMSE ~1. */
    compare(dir, "tiny-qwen35moe", BG_TYPE_F32, 1e-5);
    compare(dir, "tiny-qwen3moe", BG_TYPE_F32, 1e-5);
    compare(dir, "tiny-qwen35moe", BG_TYPE_Q4_K, 1e-2);
    compare(dir, "tiny-qwen3moe", BG_TYPE_Q8_0, 1e-2);
    long_decode(dir, BG_TYPE_F32, 1e-6);
    /* decode steps and small batches as CUDA graphs: captured once per
     * batch size, then replayed with new positions and sequences */
    bg_gpu_api_override(&mock_graphs);
    compare(dir, "tiny-qwen35moe", BG_TYPE_F32, 1e-5);
    compare(dir, "tiny-qwen3moe", BG_TYPE_F32, 1e-5);
    split_graphs(dir);
    CHECK(captures > 0 && replays >= captures, "graphs: %d captured, %d replayed", captures,
          replays);
    CHECK(capture_violations == 0, "graphs: %d copies while capturing", capture_violations);
    logits_buffers(dir);
    bg_gpu_api_override(NULL);
    rmdir(dir);
    return check_summary("test_gpu_mock");
#endif
}
