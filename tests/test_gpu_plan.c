/* The GPU backend's host-side decisions, without a GPU: SIZE parsing
 * (--gpu-budget), the split of layers from -ngl / --n-cpu-moe / -ngl auto,
 * the device arena's layout (aligned, disjoint, inside the arena, the
 * right tensors on the device), its agreement with the planner's GPU
 * figure, and the "built without CUDA" refusal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "gpu.h"
#include "gpu_plan.h"
#include "presets.h"
#include "placement.h"
#include "session.h"

static void sizes(void)
{
    static const struct {
        const char *text;
        bool ok;
        uint64_t bytes;
    } cases[] = {
        {"24G", true, 24ull << 30},       {"24GiB", true, 24ull << 30},
        {"24gb", true, 24ull << 30},      {"16384M", true, 16384ull << 20},
        {"512MiB", true, 512ull << 20},   {"1.5G", true, 3ull << 29},
        {"1T", true, 1ull << 40},         {"4096", true, 4096},
        {"4096B", true, 4096},            {"2k", true, 2048},
        {"", false, 0},                   {"G", false, 0},
        {"-1G", false, 0},                {"24X", false, 0},
        {"24G ", false, 0},               {"24GiBs", false, 0},
        {"1.5", false, 0},                {"99999999999T", false, 0},
        {"nanG", false, 0},               {"inf", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t v = 12345;
        bool ok = brigade_parse_size(cases[i].text, &v);
        CHECK(ok == cases[i].ok && (!ok || v == cases[i].bytes), "size '%s': ok %d value %llu",
              cases[i].text, ok, (unsigned long long)v);
    }
}

static void splits(void)
{
    bg_gpu_split s;
    brigade_error err;
    /* explicit: the last ngl layers, clamped */
    CHECK(!bg_gpu_split_from(10, 0, 40, NULL, &s, &err), "%s", err.message);
    CHECK(s.n_gpu_layers == 10 && s.first_gpu_layer == 30 && s.head_on_gpu, "ngl 10: %u %u",
          s.n_gpu_layers, s.first_gpu_layer);
    CHECK(!bg_gpu_layer_on(&s, 29) && bg_gpu_layer_on(&s, 30) && bg_gpu_layer_on(&s, 39),
          "ngl 10: layers on");
    CHECK(!bg_gpu_split_from(999, 50, 40, NULL, &s, &err), "%s", err.message);
    CHECK(s.n_gpu_layers == 40 && s.first_gpu_layer == 0 && s.n_cpu_moe == 40,
          "ngl 999: clamped to %u, n_cpu_moe %u", s.n_gpu_layers, s.n_cpu_moe);
    CHECK(!bg_gpu_split_from(0, 0, 40, NULL, &s, &err), "%s", err.message);
    CHECK(s.n_gpu_layers == 0 && !s.head_on_gpu && !bg_gpu_layer_on(&s, 39), "ngl 0");
    /* --n-cpu-moe: experts of the first N layers stay on the CPU */
    CHECK(!bg_gpu_split_from(40, 5, 40, NULL, &s, &err), "%s", err.message);
    CHECK(!bg_gpu_experts_on(&s, 4) && bg_gpu_experts_on(&s, 5) && bg_gpu_layer_on(&s, 4),
          "n_cpu_moe 5");
    /* auto: the planner's choice, an explicit larger --n-cpu-moe kept */
    brigade_placement p = {BRIGADE_PLACE_EXPERTS_CPU, 12, 40, 0, 0};
    CHECK(!bg_gpu_split_from(BRIGADE_NGL_AUTO, 0, 40, &p, &s, &err), "%s", err.message);
    CHECK(s.n_gpu_layers == 40 && s.n_cpu_moe == 12, "auto: %u %u", s.n_gpu_layers, s.n_cpu_moe);
    CHECK(!bg_gpu_split_from(BRIGADE_NGL_AUTO, 20, 40, &p, &s, &err), "%s", err.message);
    CHECK(s.n_cpu_moe == 20, "auto with --n-cpu-moe 20: %u", s.n_cpu_moe);
    p = (brigade_placement){BRIGADE_PLACE_LAYERS_CPU, 40, 7, 0, 0};
    CHECK(!bg_gpu_split_from(BRIGADE_NGL_AUTO, 0, 40, &p, &s, &err), "%s", err.message);
    CHECK(s.n_gpu_layers == 7 && s.first_gpu_layer == 33 && s.n_cpu_moe == 40, "auto layers");
    p = (brigade_placement){BRIGADE_PLACE_NONE, 0, 0, 5ull << 30, 0};
    CHECK(bg_gpu_split_from(BRIGADE_NGL_AUTO, 0, 40, &p, &s, &err) &&
              strstr(err.message, "not even the output head"),
          "auto none: %s", err.message);
}

/* Every region of the layout: aligned, inside the arena, disjoint. */
typedef struct region {
    uint64_t off, bytes;
} region;

static int by_offset(const void *a, const void *b)
{
    const region *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static void check_layout(const brigade_model *m, const bg_session_plan *plan,
                         const bg_gpu_split *split, const bg_gpu_layout *l, const char *what)
{
    const bg_hparams *hp = &m->hp;
    size_t cap = (size_t)hp->n_layers * (BG_ROLE_COUNT + 4) + BG_BUF_COUNT + 3, n = 0;
    region *r = calloc(cap, sizeof *r);
    uint32_t n_tensors = 0;
    bool roles_ok = true;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        const bg_gpu_layer_layout *L = &l->layers[il];
        for (int k = 0; k < BG_ROLE_COUNT; k++) {
            const brigade_tensor_info *t = m->layers[il].t[k];
            bool expert = k == BG_ROLE_FFN_GATE_EXPS || k == BG_ROLE_FFN_UP_EXPS ||
                          k == BG_ROLE_FFN_DOWN_EXPS;
            bool want = t && bg_gpu_layer_on(split, il) && (!expert || bg_gpu_experts_on(split, il));
            roles_ok &= want == (L->t_off[k] != BG_GPU_NONE);
            if (L->t_off[k] != BG_GPU_NONE && t) {
                r[n++] = (region){L->t_off[k], t->n_bytes};
                n_tensors++;
            }
        }
        bool rec = bg_hparams_is_recurrent(hp, il), on = bg_gpu_layer_on(split, il);
        roles_ok &= (L->conv_off != BG_GPU_NONE) == (on && rec);
        roles_ok &= (L->k_off != BG_GPU_NONE) == (on && !rec);
        if (L->conv_off != BG_GPU_NONE) {
            r[n++] = (region){L->conv_off, plan->n_seq * plan->conv_layer_bytes};
            r[n++] = (region){L->ssm_off, plan->n_seq * plan->ssm_layer_bytes};
        }
        if (L->k_off != BG_GPU_NONE) {
            r[n++] = (region){L->k_off, plan->n_seq * plan->k_layer_bytes};
            r[n++] = (region){L->v_off, plan->n_seq * plan->v_layer_bytes};
        }
    }
    CHECK(roles_ok, "%s: tensors or state on the wrong side", what);
    if (split->head_on_gpu) {
        r[n++] = (region){l->head_norm_off, m->global.t[BG_ROLE_OUTPUT_NORM]->n_bytes};
        r[n++] = (region){l->head_off, m->global.t[BG_ROLE_OUTPUT]->n_bytes};
        r[n++] = (region){l->logits_off, (uint64_t)BG_GPU_LOGITS_ROWS * hp->n_vocab * 4};
        n_tensors += 2;
        for (int b = 0; b < BG_BUF_COUNT; b++)
            r[n++] = (region){l->buf_off[b], plan->buf_bytes[b]};
    }
    CHECK(n_tensors == l->n_tensors, "%s: %u tensors counted, layout says %u", what, n_tensors,
          l->n_tensors);
    qsort(r, n, sizeof *r, by_offset);
    bool aligned = true, inside = true, disjoint = true;
    for (size_t i = 0; i < n; i++) {
        aligned &= r[i].off % BG_GPU_ALIGN == 0;
        inside &= r[i].off + r[i].bytes <= l->total_bytes;
        if (i)
            disjoint &= r[i - 1].off + r[i - 1].bytes <= r[i].off;
    }
    CHECK(aligned && inside && disjoint, "%s: aligned %d inside %d disjoint %d", what, aligned,
          inside, disjoint);
    CHECK(l->weights_bytes + l->state_bytes + l->scratch_bytes == l->total_bytes,
          "%s: parts do not add up", what);
    free(r);
}

static void layouts(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    brigade_synth_options so = {.preset = "tiny-qwen35moe", .type = 12 /* q4_K */, .seed = 3,
                                .fast = true};
    brigade_error err;
    CHECK(!brigade_synth(path, &so, &err), "synth: %s", err.message);
    brigade_model *m = NULL;
    CHECK(!brigade_model_load(path, NULL, &m, &err), "load: %s", err.message);
    if (!m)
        return;
    const bg_hparams *hp = &m->hp;
    bg_session_plan plan;
    bg_plan_session(hp, 256, 32, 3, 1 /* f16 */, 8 /* q8_0 */, &plan);

    /* the planner's input, as session.c builds it */
    bg_layer_bytes *lb = calloc(hp->n_layers, sizeof *lb);
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        for (int k = 0; k < BG_ROLE_COUNT; k++) {
            const brigade_tensor_info *t = m->layers[il].t[k];
            bool expert = k == BG_ROLE_FFN_GATE_EXPS || k == BG_ROLE_FFN_UP_EXPS ||
                          k == BG_ROLE_FFN_DOWN_EXPS;
            if (t)
                *(expert ? &lb[il].experts : &lb[il].other) += t->n_bytes;
        }
        lb[il].cache = plan.n_seq * (bg_hparams_is_recurrent(hp, il)
                                         ? plan.conv_layer_bytes + plan.ssm_layer_bytes
                                         : plan.k_layer_bytes + plan.v_layer_bytes);
    }
    bg_place_input in = {lb, hp->n_layers, m->global.t[BG_ROLE_TOKEN_EMBD]->n_bytes,
                         m->global.t[BG_ROLE_OUTPUT_NORM]->n_bytes +
                             m->global.t[BG_ROLE_OUTPUT]->n_bytes,
                         plan.compute_bytes, 0, 0};

    static const struct {
        int32_t ngl;
        uint32_t n_cpu_moe;
    } cases[] = {{4, 0}, {4, 2}, {4, 4}, {2, 0}, {1, 4}, {0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char what[64];
        snprintf(what, sizeof what, "ngl %d n_cpu_moe %u", cases[i].ngl, cases[i].n_cpu_moe);
        bg_gpu_split split;
        bg_gpu_layout l;
        CHECK(!bg_gpu_split_from(cases[i].ngl, cases[i].n_cpu_moe, hp->n_layers, NULL, &split,
                                 &err),
              "%s", err.message);
        CHECK(!bg_gpu_layout_build(m, &plan, &split, &l, &err), "%s", err.message);
        check_layout(m, &plan, &split, &l, what);
        /* the arena is what the planner counts for this split (overhead 0
         * here), plus alignment and the head's logits rows */
        uint64_t planned = split.n_gpu_layers
                               ? bg_place_gpu_bytes(&in, split.n_cpu_moe, split.n_gpu_layers)
                               : 0;
        uint64_t slack = (uint64_t)(l.n_tensors + 4 * hp->n_layers + BG_BUF_COUNT + 2) *
                             BG_GPU_ALIGN +
                         (split.n_gpu_layers ? (uint64_t)BG_GPU_LOGITS_ROWS * hp->n_vocab * 4 : 0);
        CHECK(l.total_bytes >= planned && l.total_bytes <= planned + slack,
              "%s: arena %llu, planned %llu (slack %llu)", what,
              (unsigned long long)l.total_bytes, (unsigned long long)planned,
              (unsigned long long)slack);
        bg_gpu_layout_free(&l);
    }
    free(lb);

    /* without CUDA, a request for GPU layers is refused and says why;
     * -ngl 0 is the CPU session */
    brigade_session *s = NULL;
    brigade_session_options o = {.n_ctx = 64, .n_threads = 1, .n_gpu_layers = 2};
    brigade_status st = brigade_session_new(m, &o, &s, &err);
    if (!brigade_gpu_built())
        CHECK(st == BRIGADE_ERR_UNSUPPORTED && strstr(err.message, "built without CUDA") &&
                  strstr(err.message, "-ngl 2"),
              "ngl 2 without CUDA: %s", st ? err.message : "accepted");
    brigade_session_free(s);
    s = NULL;
    o.n_gpu_layers = BRIGADE_NGL_AUTO;
    st = brigade_session_new(m, &o, &s, &err);
    if (!brigade_gpu_built())
        CHECK(st && strstr(err.message, "built without CUDA") && strstr(err.message, "auto"),
              "ngl auto without CUDA: %s", st ? err.message : "accepted");
    brigade_session_free(s);
    s = NULL;
    o.n_gpu_layers = 0;
    CHECK(!brigade_session_new(m, &o, &s, &err), "ngl 0: %s", err.message);
    brigade_gpu_report r;
    if (s) {
        brigade_session_gpu(s, &r);
        CHECK(!r.active, "ngl 0: a GPU report");
    }
    brigade_session_free(s);
    brigade_model_free(m);
    remove(path);
}

/* The device's MoE keeps more per slot than the CPU's: every (token, rank)
 * slot's hidden row in gx, and the grouping by expert in members. The
 * planner's buffers must hold them, for every geometry and micro-batch. */
static void device_buffers(void)
{
    static const char *names[] = {"qwen3.6-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b",
                                  "qwen3-30b-a3b",   "qwen3-235b-a22b",   "tiny-qwen35moe",
                                  "tiny-qwen3moe"};
    static const uint32_t ubatches[] = {1, 7, 512, 2048};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (size_t u = 0; u < sizeof ubatches / sizeof *ubatches; u++) {
            const bg_preset *p = bg_preset_find(names[i]);
            CHECK(p, "preset %s", names[i]);
            if (!p)
                continue;
            const bg_hparams *hp = &p->hp;
            bg_session_plan plan;
            bg_plan_session(hp, 4096, ubatches[u], 2, 1, 1, &plan);
            /* the shared expert of the routed experts' width runs as one
             * more slot per token */
            const bool joins = hp->n_ff_shexp && hp->n_ff_shexp == hp->n_ff_exp;
            const uint64_t ub = ubatches[u], routed = ub * hp->n_expert_used;
            const uint64_t slots = routed + (joins ? ub : 0);
            const uint64_t *b = plan.buf_bytes;
            CHECK(b[BG_BUF_GX] >= slots * hp->n_ff_exp * sizeof(float) &&
                      b[BG_BUF_GX] >= ub * hp->n_embd * sizeof(float),
                  "%s ub %llu: gx %llu bytes", names[i], (unsigned long long)ub,
                  (unsigned long long)b[BG_BUF_GX]);
            CHECK(b[BG_BUF_MEMBERS] >= BG_GPU_MOE_GROUP_INTS(routed, hp->n_expert) * 4 &&
                      b[BG_BUF_MEMBERS] >= ub * 4,
                  "%s ub %llu: members %llu bytes", names[i], (unsigned long long)ub,
                  (unsigned long long)b[BG_BUF_MEMBERS]);
            /* the normed rows' codes, then a product's own */
            const uint64_t xn_codes = ub * BG_GPU_ACT_CODE_BYTES(hp->n_embd);
            uint64_t widest = hp->n_embd; /* a product's input: attention/DeltaNet out */
            if ((uint64_t)hp->n_head * hp->head_dim > widest)
                widest = (uint64_t)hp->n_head * hp->head_dim;
            if ((uint64_t)hp->ssm_state_size * hp->ssm_time_step_rank > widest)
                widest = (uint64_t)hp->ssm_state_size * hp->ssm_time_step_rank;
            CHECK(b[BG_BUF_XQ] >= xn_codes + slots * BG_GPU_ACT_CODE_BYTES(hp->n_ff_exp) &&
                      b[BG_BUF_XQ] >= xn_codes + ub * BG_GPU_ACT_CODE_BYTES(widest),
                  "%s ub %llu: xq %llu bytes", names[i], (unsigned long long)ub,
                  (unsigned long long)b[BG_BUF_XQ]);
            /* every slot's output row; the up rows wait there when gate and up
             * differ in type */
            CHECK(b[BG_BUF_SLOT_OUT] >= slots * hp->n_embd * sizeof(float) &&
                      hp->n_ff_exp <= hp->n_embd,
                  "%s ub %llu: slot_out %llu bytes", names[i], (unsigned long long)ub,
                  (unsigned long long)b[BG_BUF_SLOT_OUT]);
            /* before the experts, a decode step's split attention: a counter
             * per (token, head), then 16 ranges of head_dim + 2 floats */
            const uint64_t split_tok = ub < 16 ? ub : 16, pairs = split_tok * hp->n_head;
            const uint64_t split = (pairs * 4 + 15) / 16 * 16 + pairs * 16 * (hp->head_dim + 2) * 4;
            CHECK(b[BG_BUF_SLOT_OUT] >= split, "%s ub %llu: slot_out %llu bytes, split attention %llu",
                  names[i], (unsigned long long)ub, (unsigned long long)b[BG_BUF_SLOT_OUT],
                  (unsigned long long)split);
        }
}

int main(void)
{
    char dir[] = "/tmp/brigade_gpu_plan_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    sizes();
    splits();
    layouts(dir);
    device_buffers();
    rmdir(dir);
    return check_summary("test_gpu_plan");
}
