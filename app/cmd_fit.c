/* brigade fit [-m MODEL | NAME:QUANT] [options]: the memory a model needs,
 * from the same plan the engine allocates by, and the placement that fits
 * each GPU size. NAME:QUANT plans a catalogue model nobody has downloaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

enum { MAX_CONTEXTS = 16, MAX_GPUS = 16 };

typedef struct fit_args {
    const char *path, *spec;
    bool json, list;
    brigade_session_options so;
    uint32_t contexts[MAX_CONTEXTS];
    int n_ctx;
    uint32_t gpus[MAX_GPUS];
    int n_gpus;
    bool gpu_given;
    uint32_t overhead_mib;
    uint32_t n_seq; /* -np: the context is split among them, as llama.cpp does */
} fit_args;

static const char *place_name(brigade_placement_kind k)
{
    switch (k) {
    case BRIGADE_PLACE_ALL_GPU: return "gpu";
    case BRIGADE_PLACE_EXPERTS_CPU: return "experts-cpu";
    case BRIGADE_PLACE_LAYERS_CPU: return "layers-cpu";
    default: return "no";
    }
}

static void fit_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade fit -m MODEL.gguf [options]\n"
            "       brigade fit NAME:QUANT [options]   (a catalogue model, e.g. "
            "qwen3.6-35b-a3b:Q4_K_M)\n"
            "       brigade fit --list                  (the catalogue and its file sizes)\n"
            "  -c, --ctx-size LIST   contexts (default 4096, 8192, ... up to the model's)\n"
            "  --gpu LIST            GPU sizes in GiB (default 8,12,16,24,32,48,80)\n"
            "  --gpu-overhead MIB    the GPU runtime's own memory (default 512, uncalibrated)\n"
            "  -ctk, -ctv TYPE       KV cache types: f16 (default), f32, q8_0, q4_0\n"
            "  -ub N                 prompt micro-batch (default 512)\n"
            "  -np N                 parallel sequences sharing the context (default 1):\n"
            "                        KV cache as for the whole context, a recurrent state each\n"
            "  --json                machine-readable output (fields: see README)\n");
}

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }
static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static bool parse_list(const char *flag, const char *text, uint32_t *out, int cap, int *n)
{
    char *copy = strdup(text), *save = NULL;
    bool ok = copy != NULL;
    *n = 0;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; ok && t; t = strtok_r(NULL, ",", &save))
        ok = *n < cap && cli_parse_u32(flag, t, &out[(*n)++]);
    free(copy);
    return ok && *n > 0;
}

static int parse_args(int argc, char **argv, fit_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fit_usage(stdout);
            return 0;
        } else if (!strcmp(f, "--json")) {
            a->json = true;
            continue;
        } else if (!strcmp(f, "--list")) {
            a->list = true;
            continue;
        } else if (f[0] != '-') {
            if (a->spec) {
                fprintf(stderr, "fit: more than one model given ('%s', '%s')\n", a->spec, f);
                return 2;
            }
            a->spec = f;
            continue;
        } else if (!v) {
            ok = false;
        } else if (!strcmp(f, "-m") || !strcmp(f, "--model")) {
            a->path = v;
        } else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) {
            ok = parse_list(f, v, a->contexts, MAX_CONTEXTS, &a->n_ctx);
        } else if (!strcmp(f, "--gpu")) {
            ok = parse_list(f, v, a->gpus, MAX_GPUS, &a->n_gpus);
            a->gpu_given = true;
        } else if (!strcmp(f, "--gpu-overhead")) {
            ok = cli_parse_u32(f, v, &a->overhead_mib);
        } else if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k")) {
            ok = cli_parse_cache_type(f, v, &a->so.cache_type_k);
        } else if (!strcmp(f, "-ctv") || !strcmp(f, "--cache-type-v")) {
            ok = cli_parse_cache_type(f, v, &a->so.cache_type_v);
        } else if (!strcmp(f, "-ub") || !strcmp(f, "--ubatch-size")) {
            ok = cli_parse_u32(f, v, &a->so.n_ubatch);
        } else if (!strcmp(f, "-np") || !strcmp(f, "--parallel")) {
            ok = cli_parse_u32(f, v, &a->n_seq) && a->n_seq >= 1 && a->n_seq <= 256;
        } else {
            fprintf(stderr, "fit: unknown option: %s\n", f);
            fit_usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "fit: bad or missing value for %s\n", f);
            return 2;
        }
        i++;
    }
    if (!a->list && !a->path == !a->spec) {
        fit_usage(stderr);
        return 2;
    }
    return -1; /* go on */
}

/* 4K, 8K, ... doubling up to the training context, which ends the list. */
static void default_contexts(const brigade_model *m, fit_args *a)
{
    uint32_t train = 0;
    char key[96];
    snprintf(key, sizeof key, "%s.context_length", brigade_model_arch(m));
    if (brigade_gguf_get_u32(brigade_model_file(m), key, false, &train, NULL) || train < 4096)
        train = 4096;
    for (uint32_t c = 4096; c < train && a->n_ctx < MAX_CONTEXTS - 1; c *= 2)
        a->contexts[a->n_ctx++] = c;
    a->contexts[a->n_ctx++] = train;
}

/* ------------------------------------------------------------------- list */

static int list_catalogue(bool json)
{
    size_t n_models, n_quants;
    const brigade_catalogue_entry *models = brigade_catalogue(&n_models);
    const brigade_ftype *quants = brigade_catalogue_quants(&n_quants);
    if (json)
        printf("{\"models\": [");
    else {
        printf("Weights (GiB) of the catalogue's models, tensor types as llama.cpp's quantizer "
               "writes them\n\n| model |");
        for (size_t q = 0; q < n_quants; q++)
            printf(" %s |", brigade_ftype_name(quants[q]));
        printf("\n|---|");
        for (size_t q = 0; q < n_quants; q++)
            printf("---:|");
        printf("\n");
    }
    for (size_t i = 0; i < n_models; i++) {
        if (json)
            printf("%s{\"name\": \"%s\", \"display_name\": \"%s\", \"weights_bytes\": {", i ? ", " : "",
                   models[i].name, models[i].display_name);
        else
            printf("| %s |", models[i].display_name);
        for (size_t q = 0; q < n_quants; q++) {
            char spec[96];
            snprintf(spec, sizeof spec, "%s:%s", models[i].name, brigade_ftype_name(quants[q]));
            brigade_model *m;
            brigade_error err = {0};
            if (brigade_catalogue_model(spec, &m, &err)) {
                fprintf(stderr, "fit: %s\n", err.message);
                return 1;
            }
            if (json)
                printf("%s\"%s\": %llu", q ? ", " : "", brigade_ftype_name(quants[q]),
                       (unsigned long long)brigade_model_weight_bytes(m));
            else
                printf(" %.2f |", gib(brigade_model_weight_bytes(m)));
            brigade_model_free(m);
        }
        printf(json ? "}}" : "\n");
    }
    printf(json ? "]}\n" : "\nPlan one with: brigade fit NAME:QUANT (NAME as qwen3.6-35b-a3b)\n");
    return 0;
}

/* ------------------------------------------------------------- breakdown */

static void row(const char *what, uint64_t bytes)
{
    printf("| %s | %.2f MiB | %.3f GiB |\n", what, mib(bytes), gib(bytes));
}

static void print_breakdown(const char *name, const brigade_model *m, const brigade_memory *p,
                            const fit_args *a, const brigade_placement *pl, uint32_t gpu)
{
    brigade_weight_breakdown w;
    brigade_model_weights(m, &w);
    char what[160];
    printf("%s, %s, context %u", name, brigade_model_arch(m), a->contexts[0]);
    if (a->n_seq > 1)
        printf(" (%u sequences of %u)", a->n_seq, p->n_ctx);
    printf(", K cache %s, V cache %s, micro-batch %u\n\n",
           brigade_cache_type_name(a->so.cache_type_k), brigade_cache_type_name(a->so.cache_type_v),
           a->so.n_ubatch ? a->so.n_ubatch : 512);
    printf("| part | size | |\n|---|---:|---:|\n");
    snprintf(what, sizeof what, "weights: attention (%u layers)", w.n_attention_layers);
    row(what, w.attention);
    if (w.n_deltanet_layers) {
        snprintf(what, sizeof what, "weights: DeltaNet (%u layers)", w.n_deltanet_layers);
        row(what, w.deltanet);
    }
    row("weights: routed experts", w.routed_experts);
    if (w.shared_experts)
        row("weights: shared experts", w.shared_experts);
    row("weights: router", w.router);
    row("weights: norms", w.norms);
    row("weights: token embeddings (stay in host memory)", w.token_embd);
    row("weights: output", w.output);
    row("**weights**", p->weights_bytes);
    snprintf(what, sizeof what, "KV cache (%u attention layers x %u cells)", w.n_attention_layers,
             p->n_ctx * a->n_seq);
    row(what, p->kv_bytes);
    if (w.n_deltanet_layers) {
        snprintf(what, sizeof what, "recurrent state (%u DeltaNet layers x %u sequences)",
                 w.n_deltanet_layers, a->n_seq);
        row(what, p->recurrent_bytes);
    }
    row("compute scratch (micro-batch)", p->compute_bytes);
    row("**total on a CPU**", p->total_bytes);
    row("GPU runtime overhead (--gpu-overhead)", (uint64_t)a->overhead_mib << 20);
    printf("\nOn a %u GiB GPU: ", gpu);
    switch (pl->kind) {
    case BRIGADE_PLACE_ALL_GPU:
        printf("everything on the GPU (%.2f GiB), %.2f GiB free; host %.2f GiB\n",
               gib(pl->gpu_bytes), gpu - gib(pl->gpu_bytes), gib(pl->host_bytes));
        break;
    case BRIGADE_PLACE_EXPERTS_CPU:
        printf("routed experts of %u layers on the CPU (--n-cpu-moe %u): GPU %.2f GiB, host "
               "%.2f GiB\n",
               pl->n_cpu_moe_layers, pl->n_cpu_moe_layers, gib(pl->gpu_bytes), gib(pl->host_bytes));
        break;
    case BRIGADE_PLACE_LAYERS_CPU:
        printf("-ngl %u with every routed expert on the CPU: GPU %.2f GiB, host %.2f GiB\n",
               pl->n_gpu_layers, gib(pl->gpu_bytes), gib(pl->host_bytes));
        break;
    default: printf("does not fit, even with every layer on the CPU\n"); break;
    }
}

static void print_cell(const brigade_placement *pl, uint32_t gpu)
{
    switch (pl->kind) {
    case BRIGADE_PLACE_ALL_GPU: printf(" %.2f GiB free |", gpu - gib(pl->gpu_bytes)); break;
    case BRIGADE_PLACE_EXPERTS_CPU:
        printf(" experts of %u layers on CPU, host %.1f GiB |", pl->n_cpu_moe_layers,
               gib(pl->host_bytes));
        break;
    case BRIGADE_PLACE_LAYERS_CPU:
        printf(" -ngl %u, experts on CPU, host %.1f GiB |", pl->n_gpu_layers, gib(pl->host_bytes));
        break;
    default: printf(" no |"); break;
    }
}

static void json_placement(const brigade_placement *pl)
{
    printf("\"placement\": {\"kind\": \"%s\", \"n_gpu_layers\": %u, \"n_cpu_moe_layers\": %u}, "
           "\"gpu_bytes\": %llu, \"host_bytes\": %llu",
           place_name(pl->kind), pl->n_gpu_layers, pl->n_cpu_moe_layers,
           (unsigned long long)pl->gpu_bytes, (unsigned long long)pl->host_bytes);
}

/* -c is the context of all sequences together; each gets its share. */
static void set_context(fit_args *a, uint32_t n_ctx)
{
    a->so.n_seq_max = a->n_seq;
    a->so.n_ctx = n_ctx / a->n_seq ? n_ctx / a->n_seq : 1;
}

static int report(const char *name, const brigade_model *m, fit_args *a)
{
    brigade_error err = {0};
    uint64_t overhead = (uint64_t)a->overhead_mib << 20;
    /* the chosen settings: the first context on the first GPU (24 GiB if none given) */
    uint32_t gpu = a->gpu_given ? a->gpus[0] : 24;
    set_context(a, a->contexts[0]);
    brigade_memory p;
    brigade_placement pl;
    if (brigade_memory_plan(m, &a->so, &p, &err) ||
        brigade_memory_place(m, &a->so, (uint64_t)gpu << 30, overhead, &pl, &err)) {
        fprintf(stderr, "fit: %s\n", err.message);
        return 1;
    }
    if (a->json) {
        brigade_weight_breakdown w;
        brigade_model_weights(m, &w);
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"n_ctx\": %u, \"n_seq\": %u, "
               "\"cache_type_k\": \"%s\", "
               "\"cache_type_v\": \"%s\", \"gpu_gib\": %u, \"weights_bytes\": %llu, "
               "\"weights\": {\"attention\": %llu, \"deltanet\": %llu, \"routed_experts\": %llu, "
               "\"shared_experts\": %llu, \"router\": %llu, \"norms\": %llu, \"token_embd\": %llu, "
               "\"output\": %llu}, \"kv_bytes\": %llu, \"recurrent_bytes\": %llu, "
               "\"compute_bytes\": %llu, \"overhead_bytes\": %llu, ",
               name, brigade_model_arch(m), a->contexts[0], a->n_seq,
               brigade_cache_type_name(a->so.cache_type_k),
               brigade_cache_type_name(a->so.cache_type_v), gpu,
               (unsigned long long)p.weights_bytes, (unsigned long long)w.attention,
               (unsigned long long)w.deltanet, (unsigned long long)w.routed_experts,
               (unsigned long long)w.shared_experts, (unsigned long long)w.router,
               (unsigned long long)w.norms, (unsigned long long)w.token_embd,
               (unsigned long long)w.output, (unsigned long long)p.kv_bytes,
               (unsigned long long)p.recurrent_bytes, (unsigned long long)p.compute_bytes,
               (unsigned long long)overhead);
        json_placement(&pl);
        printf(", \"cells\": [");
    } else {
        print_breakdown(name, m, &p, a, &pl, gpu);
        printf("\nTotals by context (CPU only)\n\n| context | KV cache | recurrent | compute | "
               "total |\n|---:|---:|---:|---:|---:|\n");
        for (int c = 0; c < a->n_ctx; c++) {
            set_context(a, a->contexts[c]);
            if (brigade_memory_plan(m, &a->so, &p, &err)) {
                fprintf(stderr, "fit: %s\n", err.message);
                return 1;
            }
            printf("| %u | %.3f GiB | %.3f GiB | %.3f GiB | %.2f GiB |\n", a->contexts[c], gib(p.kv_bytes),
                   gib(p.recurrent_bytes), gib(p.compute_bytes), gib(p.total_bytes));
        }
        printf("\nOn a GPU (runtime overhead %u MiB): free memory with everything on the GPU, "
               "or the placement that fits\n\n| GPU |",
               a->overhead_mib);
        for (int c = 0; c < a->n_ctx; c++)
            printf(" %u |", a->contexts[c]);
        printf("\n|---:|");
        for (int c = 0; c < a->n_ctx; c++)
            printf("---|");
        printf("\n");
    }
    for (int g = 0; g < a->n_gpus; g++) {
        if (!a->json)
            printf("| %u GiB |", a->gpus[g]);
        for (int c = 0; c < a->n_ctx; c++) {
            set_context(a, a->contexts[c]);
            if (brigade_memory_place(m, &a->so, (uint64_t)a->gpus[g] << 30, overhead, &pl, &err)) {
                fprintf(stderr, "fit: %s\n", err.message);
                return 1;
            }
            if (a->json) {
                printf("%s{\"gpu_gib\": %u, \"n_ctx\": %u, ", g || c ? ", " : "", a->gpus[g],
                       a->contexts[c]);
                json_placement(&pl);
                printf("}");
            } else {
                print_cell(&pl, a->gpus[g]);
            }
        }
        if (!a->json)
            printf("\n");
    }
    if (a->json)
        printf("]}\n");
    return 0;
}

int cmd_fit(int argc, char **argv)
{
    fit_args a = {.so = {.n_threads = 1}, .gpus = {8, 12, 16, 24, 32, 48, 80}, .n_gpus = 7,
                  .overhead_mib = BRIGADE_GPU_OVERHEAD_DEFAULT >> 20, .n_seq = 1};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.list)
        return list_catalogue(a.json);
    brigade_model *m = NULL;
    brigade_error err = {0};
    if (a.spec ? brigade_catalogue_model(a.spec, &m, &err) : brigade_model_load(a.path, NULL, &m, &err)) {
        fprintf(stderr, "fit: %s\n", err.message);
        return 1;
    }
    if (a.n_ctx == 0)
        default_contexts(m, &a);
    char name[256];
    if (a.spec) {
        brigade_ftype ft;
        const brigade_catalogue_entry *e = brigade_catalogue_find(a.spec, &ft);
        snprintf(name, sizeof name, "%s %s from the catalogue", e->display_name,
                 brigade_ftype_name(ft)); /* the catalogue accepted the spec */
    } else {
        snprintf(name, sizeof name, "%s", a.path);
    }
    rc = report(name, m, &a);
    brigade_model_free(m);
    return rc;
}
