/* Placement on hand-computed numbers: a 4-layer model whose layers each
 * hold 100 bytes of routed experts, 10 of other weights and 5 of cache,
 * with embeddings 50, head 20, compute 8 and GPU overhead 7. */
#include "check.h"
#include "placement.h"

int main(void)
{
    bg_layer_bytes layers[4] = {{100, 10, 5}, {100, 10, 5}, {100, 10, 5}, {100, 10, 5}};
    bg_place_input in = {layers, 4, 50, 20, 8, 7, 0};
    /* all on the GPU: 4 x 115 + 20 + 8 + 7 = 495 */
    in.gpu_budget = 495;
    bg_placement p = bg_place(&in);
    CHECK(p.kind == BG_PLACE_ALL_GPU && p.gpu_bytes == 495, "all: kind %d gpu %llu", p.kind,
          (unsigned long long)p.gpu_bytes);
    /* host: the embeddings only (total 538 - 488 on the GPU) */
    CHECK(p.host_bytes == 50, "all: host %llu", (unsigned long long)p.host_bytes);
    /* one byte short: the experts of one layer move (495 - 100 = 395) */
    in.gpu_budget = 494;
    p = bg_place(&in);
    CHECK(p.kind == BG_PLACE_EXPERTS_CPU && p.n_cpu_moe_layers == 1 && p.gpu_bytes == 395,
          "experts 1: kind %d n %u gpu %llu", p.kind, p.n_cpu_moe_layers,
          (unsigned long long)p.gpu_bytes);
    /* host: embeddings + 100 of experts + its own compute buffer */
    CHECK(p.host_bytes == 50 + 100 + 8, "experts 1: host %llu", (unsigned long long)p.host_bytes);
    /* all experts on the CPU: 4 x 15 + 35 = 95 */
    in.gpu_budget = 95;
    p = bg_place(&in);
    CHECK(p.kind == BG_PLACE_EXPERTS_CPU && p.n_cpu_moe_layers == 4 && p.gpu_bytes == 95,
          "experts 4: kind %d n %u", p.kind, p.n_cpu_moe_layers);
    /* less: all experts stay on the CPU and whole layers leave too; n GPU
     * layers then cost 15n + 35, so 3 fit in 94 (80) */
    in.gpu_budget = 94;
    p = bg_place(&in);
    CHECK(p.kind == BG_PLACE_LAYERS_CPU && p.n_gpu_layers == 3 && p.gpu_bytes == 80 &&
              p.n_cpu_moe_layers == 4,
          "layers: kind %d ngl %u gpu %llu", p.kind, p.n_gpu_layers,
          (unsigned long long)p.gpu_bytes);
    /* host: everything but the 45 bytes of 3 layers and the head, plus compute */
    CHECK(p.host_bytes == 538 - 45 - 20 - 8 + 8, "layers: host %llu",
          (unsigned long long)p.host_bytes);
    in.gpu_budget = 265; /* 2 x 115 + 35 */
    p = bg_place(&in);
    CHECK(p.kind == BG_PLACE_EXPERTS_CPU, "265: experts of some layers fit first (kind %d)",
          p.kind);
    /* below head, compute and overhead (35): no */
    in.gpu_budget = 34;
    p = bg_place(&in);
    CHECK(p.kind == BG_PLACE_NONE, "none: kind %d", p.kind);
    return check_summary("test_placement");
}
