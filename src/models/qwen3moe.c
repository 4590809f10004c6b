/* qwen3moe (Qwen3-30B-A3B): pre-norm attention with QK-norm and NEOX rope,
 * then a pre-norm routed mixture of experts. */
#include "ops.h"
#include "session.h"

void bg_qwen3moe_layer(brigade_session *s, uint32_t il)
{
    const bg_hparams *hp = s->hp;
    const bg_layer *L = &s->model->layers[il];
    const size_t n = hp->n_embd;
    for (uint32_t i = 0; i < s->n_tok; i++)
        bg_rmsnorm(s->xn + i * n, s->x + i * n, L->t[BG_ROLE_ATTN_NORM]->data, n, hp->rms_eps);
    bg_block_attention(s, il, false);
    bg_add_residual(s);
    for (uint32_t i = 0; i < s->n_tok; i++)
        bg_rmsnorm(s->xn + i * n, s->x + i * n, L->t[BG_ROLE_FFN_NORM]->data, n, hp->rms_eps);
    bg_block_moe(s, il);
    bg_add_residual(s);
}
