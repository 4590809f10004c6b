#include "gpu_plan.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"

bool brigade_parse_size(const char *text, uint64_t *out)
{
    if (!text || !isdigit((unsigned char)text[0]))
        return false;
    char *end;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v) || v < 0)
        return false;
    uint64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (mult > 1 && (!strcasecmp(end, "iB") || !strcasecmp(end, "B")))
        end += strlen(end);
    else if (mult == 1 && !strcasecmp(end, "B"))
        end++;
    if (*end)
        return false;
    double bytes = v * (double)mult;
    if (bytes >= 18446744073709551615.0)
        return false;
    if (mult == 1 && v != floor(v))
        return false; /* a fraction of a byte */
    *out = (uint64_t)bytes;
    return true;
}

brigade_status bg_gpu_split_from(int32_t n_gpu_layers, uint32_t n_cpu_moe, uint32_t n_layers,
                                 const brigade_placement *automatic, bg_gpu_split *out,
                                 brigade_error *err)
{
    *out = (bg_gpu_split){.n_layers = n_layers};
    uint32_t ngl;
    if (n_gpu_layers < 0) {
        if (!automatic)
            return bg_fail(err, BRIGADE_ERR_ARG, "-ngl auto: no placement was computed");
        if (automatic->kind == BRIGADE_PLACE_NONE)
            return bg_fail(err, BRIGADE_ERR_ARG,
                           "-ngl auto: not even the output head fits the GPU budget (%.2f GiB "
                           "needed at least)",
                           automatic->gpu_bytes / 1073741824.0);
        ngl = automatic->n_gpu_layers;
        /* an explicit --n-cpu-moe larger than the planner's is kept */
        if (automatic->n_cpu_moe_layers > n_cpu_moe)
            n_cpu_moe = automatic->n_cpu_moe_layers;
    } else {
        ngl = (uint32_t)n_gpu_layers > n_layers ? n_layers : (uint32_t)n_gpu_layers;
    }
    out->n_gpu_layers = ngl;
    out->first_gpu_layer = n_layers - ngl;
    out->n_cpu_moe = n_cpu_moe > n_layers ? n_layers : n_cpu_moe;
    out->head_on_gpu = ngl > 0;
    return BRIGADE_OK;
}

static uint64_t align_up(uint64_t x) { return (x + BG_GPU_ALIGN - 1) / BG_GPU_ALIGN * BG_GPU_ALIGN; }

/* Reserves n bytes at the end of the arena, aligned; returns the offset. */
static uint64_t reserve(uint64_t *end, uint64_t n)
{
    uint64_t off = align_up(*end);
    *end = off + n;
    return off;
}

static bool is_expert_role(int r)
{
    return r == BG_ROLE_FFN_GATE_EXPS || r == BG_ROLE_FFN_UP_EXPS || r == BG_ROLE_FFN_DOWN_EXPS;
}

brigade_status bg_gpu_layout_build(const brigade_model *m, const bg_session_plan *plan,
                                   const bg_gpu_split *split, bg_gpu_layout *out,
                                   brigade_error *err)
{
    const bg_hparams *hp = &m->hp;
    *out = (bg_gpu_layout){.head_norm_off = BG_GPU_NONE, .head_off = BG_GPU_NONE,
                           .logits_off = BG_GPU_NONE};
    for (int b = 0; b < BG_BUF_COUNT; b++)
        out->buf_off[b] = BG_GPU_NONE;
    out->layers = malloc((size_t)hp->n_layers * sizeof *out->layers);
    if (!out->layers)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for the GPU layout");
    uint64_t end = 0;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        bg_gpu_layer_layout *L = &out->layers[il];
        for (int r = 0; r < BG_ROLE_COUNT; r++)
            L->t_off[r] = BG_GPU_NONE;
        L->k_off = L->v_off = L->conv_off = L->ssm_off = BG_GPU_NONE;
        if (!bg_gpu_layer_on(split, il))
            continue;
        for (int r = 0; r < BG_ROLE_COUNT; r++) {
            const brigade_tensor_info *t = m->layers[il].t[r];
            if (!t || (is_expert_role(r) && !bg_gpu_experts_on(split, il)))
                continue;
            L->t_off[r] = reserve(&end, t->n_bytes);
            out->n_tensors++;
        }
    }
    if (split->head_on_gpu) {
        const brigade_tensor_info *norm = m->global.t[BG_ROLE_OUTPUT_NORM];
        const brigade_tensor_info *head = m->global.t[BG_ROLE_OUTPUT];
        out->head_norm_off = reserve(&end, norm->n_bytes);
        out->head_off = reserve(&end, head->n_bytes);
        out->n_tensors += 2;
    }
    out->weights_bytes = align_up(end);
    uint64_t state0 = out->weights_bytes;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        if (!bg_gpu_layer_on(split, il))
            continue;
        bg_gpu_layer_layout *L = &out->layers[il];
        if (bg_hparams_is_recurrent(hp, il)) {
            L->conv_off = reserve(&end, plan->n_seq * plan->conv_layer_bytes);
            L->ssm_off = reserve(&end, plan->n_seq * plan->ssm_layer_bytes);
        } else {
            L->k_off = reserve(&end, plan->n_seq * plan->k_layer_bytes);
            L->v_off = reserve(&end, plan->n_seq * plan->v_layer_bytes);
        }
    }
    out->state_bytes = align_up(end) - state0;
    uint64_t scratch0 = align_up(end);
    if (split->n_gpu_layers) {
        for (int b = 0; b < BG_BUF_COUNT; b++)
            out->buf_off[b] = reserve(&end, plan->buf_bytes[b]);
        out->logits_off = reserve(&end, (uint64_t)BG_GPU_LOGITS_ROWS * hp->n_vocab * sizeof(float));
    }
    out->scratch_bytes = align_up(end) - scratch0;
    out->total_bytes = align_up(end);
    return BRIGADE_OK;
}

void bg_gpu_layout_free(bg_gpu_layout *l)
{
    free(l->layers);
    l->layers = NULL;
}
