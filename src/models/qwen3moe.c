/* qwen3moe (Qwen3-30B-A3B): pre-norm attention with QK-norm and NEOX rope,
 * then a pre-norm routed mixture of experts. */
#include "ops.h"
#include "session.h"

void bg_qwen3moe_layer(brigade_session *s, uint32_t il, uint32_t pos)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    bg_rmsnorm(s->xn, s->x, L->t[BG_ROLE_ATTN_NORM]->data, hp->n_embd, hp->rms_eps);
    bg_block_attention(s, il, pos, false);
    for (uint32_t i = 0; i < hp->n_embd; i++)
        s->x[i] += s->out[i];
    bg_rmsnorm(s->xn, s->x, L->t[BG_ROLE_FFN_NORM]->data, hp->n_embd, hp->rms_eps);
    bg_block_moe(s, il);
    for (uint32_t i = 0; i < hp->n_embd; i++)
        s->x[i] += s->out[i];
}
