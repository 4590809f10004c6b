/* Tensor names of the supported architectures, as llama.cpp's converter
 * writes them; "%u" is the block (layer) number. */
#ifndef BG_TENSOR_NAMES_H
#define BG_TENSOR_NAMES_H

#define TN_TOKEN_EMBD "token_embd.weight"
#define TN_OUTPUT_NORM "output_norm.weight"
#define TN_OUTPUT "output.weight"

#define TN_ATTN_NORM "blk.%u.attn_norm.weight"
#define TN_ATTN_POST_NORM "blk.%u.post_attention_norm.weight" /* qwen35moe */
#define TN_FFN_NORM "blk.%u.ffn_norm.weight"                   /* qwen3moe */
#define TN_ATTN_Q "blk.%u.attn_q.weight"
#define TN_ATTN_K "blk.%u.attn_k.weight"
#define TN_ATTN_V "blk.%u.attn_v.weight"
#define TN_ATTN_OUT "blk.%u.attn_output.weight"
#define TN_ATTN_Q_NORM "blk.%u.attn_q_norm.weight"
#define TN_ATTN_K_NORM "blk.%u.attn_k_norm.weight"

/* Gated DeltaNet (linear attention) layers of qwen35moe. */
#define TN_ATTN_QKV "blk.%u.attn_qkv.weight"
#define TN_ATTN_GATE "blk.%u.attn_gate.weight"
#define TN_SSM_CONV1D "blk.%u.ssm_conv1d.weight"
#define TN_SSM_DT "blk.%u.ssm_dt.bias"
#define TN_SSM_A "blk.%u.ssm_a"
#define TN_SSM_BETA "blk.%u.ssm_beta.weight"
#define TN_SSM_ALPHA "blk.%u.ssm_alpha.weight"
#define TN_SSM_NORM "blk.%u.ssm_norm.weight"
#define TN_SSM_OUT "blk.%u.ssm_out.weight"

/* Mixture of experts. */
#define TN_FFN_GATE_INP "blk.%u.ffn_gate_inp.weight"
#define TN_FFN_GATE_EXPS "blk.%u.ffn_gate_exps.weight"
#define TN_FFN_UP_EXPS "blk.%u.ffn_up_exps.weight"
#define TN_FFN_DOWN_EXPS "blk.%u.ffn_down_exps.weight"
#define TN_FFN_GATE_INP_SHEXP "blk.%u.ffn_gate_inp_shexp.weight"
#define TN_FFN_GATE_SHEXP "blk.%u.ffn_gate_shexp.weight"
#define TN_FFN_UP_SHEXP "blk.%u.ffn_up_shexp.weight"
#define TN_FFN_DOWN_SHEXP "blk.%u.ffn_down_shexp.weight"

#endif
