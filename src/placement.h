/* Where a model goes on a GPU of a given size: a pure function of the
 * memory plan's figures. Tried in order of speed:
 *   1. everything on the GPU (token embeddings stay in host memory, as in
 *      llama.cpp: only one row per token is read);
 *   2. the routed experts of as few layers as needed on the CPU, the rest
 *      (attention, DeltaNet, router, shared experts, caches, output) on the
 *      GPU (llama.cpp's --n-cpu-moe);
 *   3. all routed experts and whole layers on the CPU, counted from the
 *      first (-ngl keeps the last n layers and the output head on the GPU);
 * or "no" with the numbers when even the output head does not fit. */
#ifndef BG_PLACEMENT_H
#define BG_PLACEMENT_H

#include <stdint.h>

typedef struct bg_layer_bytes {
    uint64_t experts; /* routed experts' weights */
    uint64_t other;   /* the layer's other weights */
    uint64_t cache;   /* its KV cache or recurrent state */
} bg_layer_bytes;

typedef struct bg_place_input {
    const bg_layer_bytes *layers;
    uint32_t n_layers;
    uint64_t embeddings; /* token_embd: host memory in every placement */
    uint64_t head;       /* output norm and output matrix */
    uint64_t compute;    /* scratch, on the GPU when anything is */
    uint64_t overhead;   /* GPU runtime: context, library workspaces */
    uint64_t gpu_budget;
} bg_place_input;

typedef enum bg_place_kind {
    BG_PLACE_ALL_GPU,
    BG_PLACE_EXPERTS_CPU,
    BG_PLACE_LAYERS_CPU,
    BG_PLACE_NONE,
} bg_place_kind;

typedef struct bg_placement {
    bg_place_kind kind;
    uint32_t n_cpu_moe_layers; /* layers whose routed experts are on the CPU */
    uint32_t n_gpu_layers;     /* layers on the GPU (-ngl) */
    uint64_t gpu_bytes, host_bytes;
} bg_placement;

bg_placement bg_place(const bg_place_input *in);

/* GPU bytes when the routed experts of the first n_cpu_moe layers and all
 * of the first (n_layers - n_gpu) layers stay on the CPU: what bg_place
 * compares with the budget, for any split (-ngl / --n-cpu-moe given). */
uint64_t bg_place_gpu_bytes(const bg_place_input *in, uint32_t n_cpu_moe, uint32_t n_gpu);

#endif
