#include "placement.h"

/* GPU bytes when the routed experts of the first n_cpu_moe layers and all
 * of the first (n_layers - n_gpu) layers stay on the CPU. */
uint64_t bg_place_gpu_bytes(const bg_place_input *in, uint32_t n_cpu_moe, uint32_t n_gpu)
{
    uint64_t b = in->head + in->compute + in->overhead;
    for (uint32_t il = in->n_layers - n_gpu; il < in->n_layers; il++) {
        const bg_layer_bytes *l = &in->layers[il];
        b += l->other + l->cache + (il < n_cpu_moe ? 0 : l->experts);
    }
    return b;
}

static uint64_t total_bytes(const bg_place_input *in)
{
    uint64_t b = in->embeddings + in->head + in->compute;
    for (uint32_t il = 0; il < in->n_layers; il++)
        b += in->layers[il].experts + in->layers[il].other + in->layers[il].cache;
    return b;
}

static bg_placement make(const bg_place_input *in, bg_place_kind kind, uint32_t n_cpu_moe,
                         uint32_t n_gpu)
{
    bg_placement p = {.kind = kind, .n_cpu_moe_layers = n_cpu_moe, .n_gpu_layers = n_gpu};
    p.gpu_bytes = bg_place_gpu_bytes(in, n_cpu_moe, n_gpu);
    /* the host holds what the GPU does not, and a compute buffer of its own
     * whenever it computes layers; the GPU's overhead is not host memory */
    uint64_t on_gpu = p.gpu_bytes - in->overhead;
    p.host_bytes = total_bytes(in) - on_gpu + (n_cpu_moe || n_gpu < in->n_layers ? in->compute : 0);
    return p;
}

bg_placement bg_place(const bg_place_input *in)
{
    const uint32_t L = in->n_layers;
    if (bg_place_gpu_bytes(in, 0, L) <= in->gpu_budget)
        return make(in, BG_PLACE_ALL_GPU, 0, L);
    for (uint32_t n = 1; n <= L; n++)
        if (bg_place_gpu_bytes(in, n, L) <= in->gpu_budget)
            return make(in, BG_PLACE_EXPERTS_CPU, n, L);
    /* every routed expert stays on the CPU; as many layers as fit on the GPU */
    for (uint32_t n_gpu = L; n_gpu-- > 0;)
        if (bg_place_gpu_bytes(in, L, n_gpu) <= in->gpu_budget)
            return make(in, BG_PLACE_LAYERS_CPU, L, n_gpu);
    bg_placement none = make(in, BG_PLACE_NONE, 0, 0);
    return none;
}
