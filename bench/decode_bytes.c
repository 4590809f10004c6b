/* Bytes of weights one decoded token reads, from a GGUF file's tensor
 * directory, for bench/compare's bandwidth figures: every tensor in full,
 * except the routed experts (names with "_exps"), of which a token reads
 * expert_used_count of expert_count, and the token embeddings, of which it
 * reads one row. Shared experts and the router count in full.
 *
 * usage: decode_bytes MODEL
 * prints: decode_bytes <bytes per token> experts <used>/<count> */
#include <stdio.h>
#include <string.h>

#include "brigade.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: decode_bytes MODEL\n");
        return 2;
    }
    brigade_gguf *f = NULL;
    brigade_error err = {0};
    if (brigade_gguf_open(argv[1], NULL, &f, &err)) {
        fprintf(stderr, "decode_bytes: %s\n", err.message);
        return 1;
    }
    brigade_string arch = {0};
    uint32_t n_expert = 0, n_used = 0;
    char key[128];
    brigade_status st = brigade_gguf_get_str(f, "general.architecture", true, &arch, &err);
    if (!st) {
        snprintf(key, sizeof key, "%s.expert_count", arch.ptr);
        st = brigade_gguf_get_u32(f, key, false, &n_expert, &err);
    }
    if (!st) {
        snprintf(key, sizeof key, "%s.expert_used_count", arch.ptr);
        st = brigade_gguf_get_u32(f, key, false, &n_used, &err);
    }
    if (st) {
        fprintf(stderr, "decode_bytes: %s\n", err.message);
        brigade_gguf_close(f);
        return 1;
    }
    double bytes = 0;
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        if (strstr(t->name, "_exps") && n_expert)
            bytes += (double)t->n_bytes * n_used / n_expert;
        else if (!strcmp(t->name, "token_embd.weight"))
            bytes += (double)t->n_bytes / (double)(t->n_elements / t->ne[0]);
        else
            bytes += (double)t->n_bytes;
    }
    printf("decode_bytes %.0f experts %u/%u\n", bytes, n_used, n_expert);
    brigade_gguf_close(f);
    return 0;
}
