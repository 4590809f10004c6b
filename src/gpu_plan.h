/* Host-side decisions of the GPU backend, in plain C so that they are
 * tested without a GPU: the parse of SIZE arguments (--gpu-budget 24G,
 * brigade_parse_size), which layers and tensors go to the GPU from -ngl / --n-cpu-moe / -ngl
 * auto, and where each of them lives in the one device allocation. */
#ifndef BG_GPU_PLAN_H
#define BG_GPU_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade.h"
#include "model.h"
#include "planner.h"

/* Device allocations are aligned to this many bytes. */
#define BG_GPU_ALIGN 256u

/* Rows of logits the output head computes at a time on the device. */
#define BG_GPU_LOGITS_ROWS 8u

/* The margin -ngl auto leaves free on the card. */
#define BG_GPU_AUTO_MARGIN (256ull << 20)

/* Which layers run on the GPU. Layers first_gpu_layer..n_layers-1 do (the
 * last ngl, as llama.cpp's -ngl); among them, layers below n_cpu_moe keep
 * their routed experts in host memory and compute them on the CPU. The
 * output head is on the GPU whenever a layer is. */
typedef struct bg_gpu_split {
    uint32_t n_layers;
    uint32_t n_gpu_layers;
    uint32_t first_gpu_layer;
    uint32_t n_cpu_moe;
    bool head_on_gpu;
} bg_gpu_split;

/* From the options: n_gpu_layers < 0 (BRIGADE_NGL_AUTO) takes the
 * placement `automatic` (the planner's choice for the budget), refusing
 * one that does not fit; otherwise ngl is clamped to the layer count and
 * n_cpu_moe to it too. */
brigade_status bg_gpu_split_from(int32_t n_gpu_layers, uint32_t n_cpu_moe, uint32_t n_layers,
                                 const brigade_placement *automatic, bg_gpu_split *out,
                                 brigade_error *err);

static inline bool bg_gpu_layer_on(const bg_gpu_split *s, uint32_t il)
{
    return s->n_gpu_layers && il >= s->first_gpu_layer;
}
static inline bool bg_gpu_experts_on(const bg_gpu_split *s, uint32_t il)
{
    return bg_gpu_layer_on(s, il) && il >= s->n_cpu_moe;
}

/* Where a tensor lives on the device: offset into the arena. */
typedef struct bg_gpu_slot {
    const brigade_tensor_info *t;
    uint64_t offset;
} bg_gpu_slot;

/* Per GPU layer: its state and its tensors' slots by role (UINT64_MAX:
 * not on the device). */
typedef struct bg_gpu_layer_layout {
    uint64_t t_off[BG_ROLE_COUNT];
    uint64_t k_off, v_off;       /* attention: [n_seq] caches */
    uint64_t conv_off, ssm_off;  /* DeltaNet: [n_seq] states */
} bg_gpu_layer_layout;

#define BG_GPU_NONE UINT64_MAX

/* The whole device arena: weights, then caches and recurrent state, then
 * the micro-batch scratch (the CPU session's buffers, same sizes). */
typedef struct bg_gpu_layout {
    bg_gpu_layer_layout *layers; /* [n_layers]; all BG_GPU_NONE for CPU layers */
    uint64_t head_norm_off, head_off;
    uint64_t buf_off[BG_BUF_COUNT];
    uint64_t logits_off; /* [BG_GPU_LOGITS_ROWS][n_vocab] floats */
    uint64_t weights_bytes, state_bytes, scratch_bytes;
    uint64_t total_bytes; /* the arena: the sum, with alignment */
    uint32_t n_tensors;   /* tensors uploaded */
} bg_gpu_layout;

/* Lays out the arena for a split; plan is the session's memory plan. */
brigade_status bg_gpu_layout_build(const brigade_model *m, const bg_session_plan *plan,
                                   const bg_gpu_split *split, bg_gpu_layout *out,
                                   brigade_error *err);
void bg_gpu_layout_free(bg_gpu_layout *l);

#endif
