/* brigade synth OUT.gguf --preset P [--layers N] [--type T | --mix FTYPE] [--vocab V] [--seed S]
 *               [--sparse | --fast] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "cli.h"
#include "commands.h"

static void synth_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade synth OUT.gguf --preset P [options]\n"
            "  --preset P        model geometry:");
    for (const char *const *p = brigade_synth_presets(); *p; p++)
        fprintf(out, " %s", *p);
    fprintf(out,
            "\n"
            "  --layers N        number of layers (default: the preset's)\n"
            "  --type T          weight type: f32 (default), f16, bf16, q8_0, q4_0, q4_1,\n"
            "                    q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs\n"
            "                    (norms stay f32),\n"
            "                    or a file type below (q4_k_m, q5_k_m, ...)\n"
            "  --mix FTYPE       tensor types as llama.cpp's quantizer gives them for FTYPE:\n"
            "                    Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S\n"
            "                    Q4_K_M Q5_K_S Q5_K_M Q6_K\n"
            "                    F16 BF16 F32 (e.g. Q4_0 keeps the output in Q6_K)\n"
            "  --vocab FILE      copy the tokenizer from this GGUF (padded to the preset's\n"
            "                    vocabulary); default: a small built-in byte vocabulary\n"
            "  --experts-used K  experts per token (default: the preset's)\n"
            "  --seed S          random seed (default 1)\n"
            "  --sparse          leave tensor data as a file hole (all zeros, no disk):\n"
            "                    the exact header and size of a full model, for planning\n"
            "  --fast            build large matrices from random picks of a pool of\n"
            "                    quantized blocks (valid blocks, same distribution, many\n"
            "                    times faster; different bytes than without --fast)\n");
}

static void show_progress(void *user, uint64_t done, uint64_t total)
{
    cli_progress_update(user, done, total);
}

int cmd_synth(int argc, char **argv)
{
    brigade_synth_options o = {.type = 0, .seed = 1};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            synth_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--preset") && i + 1 < argc)
            o.preset = argv[++i];
        else if (!strcmp(a, "--layers") && i + 1 < argc) {
            if (!cli_parse_u32(a, argv[++i], &o.n_layers))
                return 2;
        } else if (!strcmp(a, "--experts-used") && i + 1 < argc) {
            if (!cli_parse_u32(a, argv[++i], &o.n_experts_used))
                return 2;
        } else if (!strcmp(a, "--type") && i + 1 < argc) {
            /* a plain type is uniform; a name only file types have is a mix */
            const char *t = argv[++i];
            uint32_t plain;
            if (brigade_ftype_from_name(t, &o.ftype) && !cli_type_from_name(t, &plain))
                o.mix = true;
            else if (!cli_parse_type(t, &o.type))
                return 2;
        } else if (!strcmp(a, "--mix") && i + 1 < argc) {
            if (!brigade_ftype_from_name(argv[++i], &o.ftype)) {
                fprintf(stderr, "synth: unknown file type '%s'\n", argv[i]);
                return 2;
            }
            o.mix = true;
        } else if (!strcmp(a, "--vocab") && i + 1 < argc)
            o.vocab_path = argv[++i];
        else if (!strcmp(a, "--sparse"))
            o.sparse = true;
        else if (!strcmp(a, "--fast"))
            o.fast = true;
        else if (!strcmp(a, "--seed") && i + 1 < argc) {
            if (!cli_parse_u64(a, argv[++i], &o.seed))
                return 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "synth: unknown option or missing value: %s\n", a);
            synth_usage(stderr);
            return 2;
        } else if (!out)
            out = a;
        else {
            fprintf(stderr, "synth: more than one output file given ('%s', '%s')\n", out, a);
            return 2;
        }
    }
    if (!out || !o.preset) {
        synth_usage(stderr);
        return 2;
    }
    cli_progress progress = {.label = "synth", .last_decile = -1};
    o.progress = show_progress;
    o.progress_user = &progress;
    brigade_error err = {0};
    if (brigade_synth(out, &o, &err) != BRIGADE_OK) {
        cli_progress_end(&progress);
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    cli_progress_end(&progress);
    fprintf(stderr, "synth: wrote %s\n", out);
    return 0;
}
