/* Quantization speed of brigade next to llama.cpp on the same input,
 * alternating runs: time, output size, bits per weight and the
 * brigade/llama.cpp speed ratio per file type, as a markdown table (best
 * of the runs; the order flips each round).
 * Not a test: `make bench && build/bench/quantize_speed IN.gguf OUTDIR
 * [-t THREADS] [-r REPS] [TYPE...]` (default types: Q4_0 Q4_K_M Q5_K_M Q6_K
 * Q8_0). Outputs stay in OUTDIR as brigade-TYPE.gguf for later use. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "oracle.h"

/* Reads the whole input so that neither engine pays for the disk: the
 * runs compare quantization, not the page cache. */
static void warm(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    while (f && fread(buf, 1, sizeof buf, f) == sizeof buf)
        ;
    if (f)
        fclose(f);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s IN.gguf OUTDIR [-t THREADS] [-r REPS] [TYPE...]\n", argv[0]);
        return 2;
    }
    const char *in = argv[1], *dir = argv[2];
    unsigned threads = 2, reps = 1;
    const char *types[32];
    int n_types = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = (unsigned)atoi(argv[++i]);
        else if (n_types < 32)
            types[n_types++] = argv[i];
    }
    static const char *defaults[] = {"Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"};
    if (!n_types)
        for (n_types = 0; n_types < 5; n_types++)
            types[n_types] = defaults[n_types];
    oracle_init();
    brigade_gguf *src;
    brigade_error err;
    if (brigade_gguf_open(in, NULL, &src, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    uint64_t n_params = 0, in_bytes = 0;
    for (int64_t i = 0; i < brigade_gguf_tensor_count(src); i++) {
        n_params += brigade_gguf_tensor(src, i)->n_elements;
        in_bytes += brigade_gguf_tensor(src, i)->n_bytes;
    }
    brigade_gguf_close(src);
    printf("input %s: %.2f GiB, %.3f B parameters; %u threads, %u run(s) each, alternating\n\n",
           in, in_bytes / 1073741824.0, n_params / 1e9, threads, reps);
    printf("| type | size | bits/weight | brigade s | llama.cpp s | speed ratio |\n"
           "|---|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < n_types; k++) {
        brigade_ftype ft;
        if (!brigade_ftype_from_name(types[k], &ft)) {
            fprintf(stderr, "unknown type %s\n", types[k]);
            return 2;
        }
        char ours[512], theirs[512];
        snprintf(ours, sizeof ours, "%s/brigade-%s.gguf", dir, brigade_ftype_name(ft));
        snprintf(theirs, sizeof theirs, "%s/llama-%s.gguf", dir, brigade_ftype_name(ft));
        double t_ours = 1e30, t_theirs = 1e30;
        brigade_quantize_report rep = {0};
        for (unsigned r = 0; r < reps; r++) {
            /* the order flips each round, and each run starts from a warm cache */
            for (int turn = 0; turn < 2; turn++) {
                bool brigade_turn = (turn == 0) == (r % 2 == 0);
                warm(in);
                double t0 = now();
                if (brigade_turn) {
                    brigade_quantize_options o = {.ftype = ft, .n_threads = threads,
                                                  .output_type = -1, .token_embd_type = -1};
                    if (brigade_quantize(in, ours, &o, &rep, &err)) {
                        fprintf(stderr, "%s\n", err.message);
                        return 1;
                    }
                } else {
                    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
                    qp.ftype = (enum llama_ftype)ft;
                    qp.nthread = (int32_t)threads;
                    if (llama_model_quantize(in, theirs, &qp) != 0) {
                        fprintf(stderr, "llama.cpp failed on %s\n", types[k]);
                        return 1;
                    }
                }
                double t = now() - t0, *best = brigade_turn ? &t_ours : &t_theirs;
                if (t < *best)
                    *best = t;
            }
        }
        remove(theirs);
        printf("| %s | %.2f GiB | %.3f | %.1f | %.1f | %.2fx |\n", brigade_ftype_name(ft),
               rep.bytes_out / 1073741824.0, rep.bytes_out * 8.0 / (double)n_params, t_ours,
               t_theirs, t_theirs / t_ours);
        fflush(stdout);
    }
    return 0;
}
