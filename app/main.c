/* brigade <command> [options]: dispatches to the front-ends. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#define BRIGADE_VERSION "0.1.0"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "show a GGUF file: metadata, tokenizer, tensors, sizes"},
    {"synth", cmd_synth, "write a synthetic model with a real geometry and random weights"},
    {"run", cmd_run, "answer one prompt, streaming the text"},
    {"chat", cmd_chat, "an interactive conversation"},
    {"eval", cmd_eval, "evaluate token ids and write the logits of every position"},
    {"bench", cmd_bench, "prompt and generation speed, llama-bench style"},
    {"fit", cmd_fit, "the memory a model needs: weights, KV cache, recurrent state, compute"},
    {"quantize", cmd_quantize, "rewrite a model in a llama.cpp file type (Q4_K_M, Q8_0, ...)"},
    {"perplexity", cmd_perplexity, "perplexity of a text; KL divergence against a base model"},
    {"tokenize", cmd_tokenize, "print the token ids (and pieces) a model's tokenizer gives"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with parallel requests"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: brigade <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'brigade <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("brigade %s\n", BRIGADE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "brigade: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
