/* brigade fit -m MODEL [-c LIST] [-ctk T] [-ctv T] [-ub N] [--json]: the
 * memory a model needs with given settings, from the same plan the engine
 * allocates by: weights, KV cache, recurrent state, compute scratch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

enum { MAX_CONTEXTS = 16, MAX_GPUS = 16 };

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
    fprintf(out, "usage: brigade fit -m MODEL [-c 4096,32768] [-ctk T] [-ctv T] [-ub N] [--json]\n"
                 "  -c, --ctx-size LIST   contexts to plan for (default 4096 and the model's)\n"
                 "  --gpu LIST            GPU sizes in GiB (default 8,12,16,24,32,48,80)\n"
                 "  --gpu-overhead MIB    the GPU runtime's own memory (default 512, uncalibrated)\n"
                 "  -ctk, -ctv TYPE       KV cache types: f16 (default), f32, q8_0, q4_0\n"
                 "  -ub N                 prompt micro-batch (default 512)\n"
                 "  --json                machine-readable output\n");
}

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

int cmd_fit(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    brigade_session_options so = {.n_threads = 1};
    uint32_t contexts[MAX_CONTEXTS];
    int n_ctx = 0;
    uint32_t gpus[MAX_GPUS] = {8, 12, 16, 24, 32, 48, 80};
    int n_gpus = 7;
    uint32_t overhead_mib = BRIGADE_GPU_OVERHEAD_DEFAULT >> 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fit_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = true;
            continue;
        } else if (!v) {
            ok = false;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            path = v;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); ok && t; t = strtok_r(NULL, ",", &save))
                ok = n_ctx < MAX_CONTEXTS && cli_parse_u32(a, t, &contexts[n_ctx++]);
            free(copy);
        } else if (!strcmp(a, "--gpu")) {
            n_gpus = 0;
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); ok && t; t = strtok_r(NULL, ",", &save))
                ok = n_gpus < MAX_GPUS && cli_parse_u32(a, t, &gpus[n_gpus++]);
            free(copy);
        } else if (!strcmp(a, "--gpu-overhead")) {
            ok = cli_parse_u32(a, v, &overhead_mib);
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            ok = cli_parse_cache_type(a, v, &so.cache_type_k);
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            ok = cli_parse_cache_type(a, v, &so.cache_type_v);
        } else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) {
            ok = cli_parse_u32(a, v, &so.n_ubatch);
        } else {
            fprintf(stderr, "fit: unknown option: %s\n", a);
            fit_usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "fit: bad or missing value for %s\n", a);
            return 2;
        }
        i++;
    }
    if (!path) {
        fit_usage(stderr);
        return 2;
    }
    brigade_model *m = NULL;
    brigade_error err = {0};
    if (brigade_model_load(path, NULL, &m, &err)) {
        fprintf(stderr, "fit: %s\n", err.message);
        return 1;
    }
    if (n_ctx == 0) {
        contexts[n_ctx++] = 4096;
        uint32_t train = 0;
        /* and the training context, from the metadata */
        char key[96];
        snprintf(key, sizeof key, "%s.context_length", brigade_model_arch(m));
        if (!brigade_gguf_get_u32(brigade_model_file(m), key, false, &train, NULL) && train > 4096)
            contexts[n_ctx++] = train;
    }
    int rc = 0;
    if (json)
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"cache_type_k\": \"%s\", \"cache_type_v\": "
               "\"%s\", \"plans\": [",
               path, brigade_model_arch(m), brigade_cache_type_name(so.cache_type_k),
               brigade_cache_type_name(so.cache_type_v));
    else
        printf("%s (%s), K cache %s, V cache %s\n\n| context | weights | KV cache | recurrent | "
               "compute | total |\n|---:|---:|---:|---:|---:|---:|\n",
               path, brigade_model_arch(m), brigade_cache_type_name(so.cache_type_k),
               brigade_cache_type_name(so.cache_type_v));
    for (int c = 0; c < n_ctx; c++) {
        so.n_ctx = contexts[c];
        brigade_memory p;
        if (brigade_memory_plan(m, &so, &p, &err)) {
            fprintf(stderr, "fit: %s\n", err.message);
            rc = 1;
            break;
        }
        if (json)
            printf("%s{\"n_ctx\": %u, \"weights_bytes\": %llu, \"kv_bytes\": %llu, "
                   "\"recurrent_bytes\": %llu, \"compute_bytes\": %llu, \"host_bytes\": %llu}",
                   c ? ", " : "", p.n_ctx, (unsigned long long)p.weights_bytes,
                   (unsigned long long)p.kv_bytes, (unsigned long long)p.recurrent_bytes,
                   (unsigned long long)p.compute_bytes, (unsigned long long)p.total_bytes);
        else
            printf("| %u | %.2f GiB | %.3f GiB | %.3f GiB | %.3f GiB | %.2f GiB |\n", p.n_ctx,
                   gib(p.weights_bytes), gib(p.kv_bytes), gib(p.recurrent_bytes),
                   gib(p.compute_bytes), gib(p.total_bytes));
    }
    /* placement on each GPU size, for each context */
    if (json && !rc)
        printf("], \"gpu_overhead_bytes\": %llu, \"gpus\": [",
               (unsigned long long)overhead_mib << 20);
    else if (!rc) {
        printf("\nOn a GPU (runtime overhead %u MiB): free memory with everything on the GPU, "
               "or the placement that fits\n\n| GPU |",
               overhead_mib);
        for (int c = 0; c < n_ctx; c++)
            printf(" %u |", contexts[c]);
        printf("\n|---:|");
        for (int c = 0; c < n_ctx; c++)
            printf("---|");
        printf("\n");
    }
    for (int g = 0; g < n_gpus && !rc; g++) {
        uint64_t budget = (uint64_t)gpus[g] << 30;
        if (json)
            printf("%s{\"gpu_gib\": %u, \"cells\": [", g ? ", " : "", gpus[g]);
        else
            printf("| %u GiB |", gpus[g]);
        for (int c = 0; c < n_ctx && !rc; c++) {
            so.n_ctx = contexts[c];
            brigade_placement pl;
            if (brigade_memory_place(m, &so, budget, (uint64_t)overhead_mib << 20, &pl, &err)) {
                fprintf(stderr, "fit: %s\n", err.message);
                rc = 1;
                break;
            }
            if (json) {
                printf("%s{\"n_ctx\": %u, \"placement\": \"%s\", \"n_cpu_moe_layers\": %u, "
                       "\"n_gpu_layers\": %u, \"gpu_bytes\": %llu, \"host_bytes\": %llu}",
                       c ? ", " : "", contexts[c], place_name(pl.kind), pl.n_cpu_moe_layers,
                       pl.n_gpu_layers, (unsigned long long)pl.gpu_bytes,
                       (unsigned long long)pl.host_bytes);
            } else if (pl.kind == BRIGADE_PLACE_ALL_GPU) {
                printf(" %.2f GiB free |", gib(budget - pl.gpu_bytes));
            } else if (pl.kind == BRIGADE_PLACE_EXPERTS_CPU) {
                printf(" experts of %u layers on CPU, host %.1f GiB |", pl.n_cpu_moe_layers,
                       gib(pl.host_bytes));
            } else if (pl.kind == BRIGADE_PLACE_LAYERS_CPU) {
                printf(" -ngl %u, all experts on CPU, host %.1f GiB |", pl.n_gpu_layers,
                       gib(pl.host_bytes));
            } else {
                printf(" no |");
            }
        }
        printf(json ? "]}" : "\n");
    }
    if (json && !rc)
        printf("]}\n");
    brigade_model_free(m);
    return rc;
}
