/* Metadata keys brigade knows, with the kind of value each must hold.
 * Architecture keys are written without their "<arch>." prefix. */
#ifndef BG_KEYS_H
#define BG_KEYS_H

#include <stddef.h>

#include "brigade.h"

#define KEY_ARCHITECTURE "general.architecture"
#define KEY_NAME "general.name"
#define KEY_FILE_TYPE "general.file_type"
#define KEY_QUANT_VERSION "general.quantization_version"

#define KEY_TOK_MODEL "tokenizer.ggml.model"
#define KEY_TOK_PRE "tokenizer.ggml.pre"
#define KEY_TOK_TOKENS "tokenizer.ggml.tokens"
#define KEY_TOK_TYPES "tokenizer.ggml.token_type"
#define KEY_TOK_SCORES "tokenizer.ggml.scores"
#define KEY_TOK_MERGES "tokenizer.ggml.merges"
#define KEY_TOK_BOS "tokenizer.ggml.bos_token_id"
#define KEY_TOK_EOS "tokenizer.ggml.eos_token_id"
#define KEY_TOK_EOT "tokenizer.ggml.eot_token_id"
#define KEY_TOK_UNK "tokenizer.ggml.unknown_token_id"
#define KEY_TOK_PAD "tokenizer.ggml.padding_token_id"
#define KEY_TOK_ADD_BOS "tokenizer.ggml.add_bos_token"
#define KEY_TOK_ADD_EOS "tokenizer.ggml.add_eos_token"
#define KEY_CHAT_TEMPLATE "tokenizer.chat_template"

/* Suffixes of "<arch>.<suffix>" keys. */
#define AKEY_CONTEXT_LENGTH "context_length"
#define AKEY_EMBEDDING_LENGTH "embedding_length"
#define AKEY_BLOCK_COUNT "block_count"
#define AKEY_FF_LENGTH "feed_forward_length"
#define AKEY_EXPERT_FF_LENGTH "expert_feed_forward_length"
#define AKEY_EXPERT_SHARED_FF_LENGTH "expert_shared_feed_forward_length"
#define AKEY_EXPERT_COUNT "expert_count"
#define AKEY_EXPERT_USED_COUNT "expert_used_count"
#define AKEY_HEAD_COUNT "attention.head_count"
#define AKEY_HEAD_COUNT_KV "attention.head_count_kv"
#define AKEY_KEY_LENGTH "attention.key_length"
#define AKEY_VALUE_LENGTH "attention.value_length"
#define AKEY_RMS_EPS "attention.layer_norm_rms_epsilon"
#define AKEY_ROPE_FREQ_BASE "rope.freq_base"
#define AKEY_ROPE_DIM_COUNT "rope.dimension_count"
#define AKEY_ROPE_SECTIONS "rope.dimension_sections"
#define AKEY_SSM_CONV_KERNEL "ssm.conv_kernel"
#define AKEY_SSM_STATE_SIZE "ssm.state_size"
#define AKEY_SSM_GROUP_COUNT "ssm.group_count"
#define AKEY_SSM_TIME_STEP_RANK "ssm.time_step_rank"
#define AKEY_SSM_INNER_SIZE "ssm.inner_size"
#define AKEY_FULL_ATTN_INTERVAL "full_attention_interval"
#define AKEY_NEXTN_LAYERS "nextn_predict_layers"

/* Checks that a known key holds the kind of value it must; unknown keys
 * pass. On a mismatch, writes what was expected into `expected` and returns
 * false. arch may be NULL (then only general keys are checked). */
bool bg_key_value_ok(const char *arch, const char *key, const brigade_value *value,
                     char *expected, size_t expected_size);

#endif
