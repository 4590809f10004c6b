#include "keys.h"

#include <stdio.h>
#include <string.h>

typedef enum key_kind {
    KIND_U32_EXACT,     /* exactly a u32 (ggml insists for the alignment) */
    KIND_UINT,          /* any integer type holding a non-negative value */
    KIND_UINT_OR_ARRAY, /* per-model or per-layer: an integer or an integer array */
    KIND_FLOAT,
    KIND_BOOL,
    KIND_STRING,
    KIND_STRING_ARRAY,
    KIND_FLOAT_ARRAY,
    KIND_INT_ARRAY,
} key_kind;

typedef struct key_rule {
    const char *key;
    key_kind kind;
} key_rule;

static const key_rule general_rules[] = {
    {KEY_ARCHITECTURE, KIND_STRING},
    {"general.alignment", KIND_U32_EXACT},
    {KEY_NAME, KIND_STRING},
    {KEY_FILE_TYPE, KIND_UINT},
    {KEY_QUANT_VERSION, KIND_UINT},
    {KEY_TOK_MODEL, KIND_STRING},
    {KEY_TOK_PRE, KIND_STRING},
    {KEY_TOK_TOKENS, KIND_STRING_ARRAY},
    {KEY_TOK_TYPES, KIND_INT_ARRAY},
    {KEY_TOK_SCORES, KIND_FLOAT_ARRAY},
    {KEY_TOK_MERGES, KIND_STRING_ARRAY},
    {KEY_TOK_BOS, KIND_UINT},
    {KEY_TOK_EOS, KIND_UINT},
    {KEY_TOK_EOT, KIND_UINT},
    {KEY_TOK_UNK, KIND_UINT},
    {KEY_TOK_PAD, KIND_UINT},
    {KEY_TOK_ADD_BOS, KIND_BOOL},
    {KEY_TOK_ADD_EOS, KIND_BOOL},
    {KEY_CHAT_TEMPLATE, KIND_STRING},
};

static const key_rule arch_rules[] = {
    {AKEY_CONTEXT_LENGTH, KIND_UINT},
    {AKEY_EMBEDDING_LENGTH, KIND_UINT},
    {AKEY_BLOCK_COUNT, KIND_UINT},
    {AKEY_FF_LENGTH, KIND_UINT_OR_ARRAY},
    {AKEY_EXPERT_FF_LENGTH, KIND_UINT_OR_ARRAY},
    {AKEY_EXPERT_SHARED_FF_LENGTH, KIND_UINT},
    {AKEY_EXPERT_COUNT, KIND_UINT},
    {AKEY_EXPERT_USED_COUNT, KIND_UINT},
    {AKEY_HEAD_COUNT, KIND_UINT_OR_ARRAY},
    {AKEY_HEAD_COUNT_KV, KIND_UINT_OR_ARRAY},
    {AKEY_KEY_LENGTH, KIND_UINT},
    {AKEY_VALUE_LENGTH, KIND_UINT},
    {AKEY_RMS_EPS, KIND_FLOAT},
    {AKEY_ROPE_FREQ_BASE, KIND_FLOAT},
    {AKEY_ROPE_DIM_COUNT, KIND_UINT},
    {AKEY_ROPE_SECTIONS, KIND_INT_ARRAY},
    {AKEY_SSM_CONV_KERNEL, KIND_UINT},
    {AKEY_SSM_STATE_SIZE, KIND_UINT},
    {AKEY_SSM_GROUP_COUNT, KIND_UINT},
    {AKEY_SSM_TIME_STEP_RANK, KIND_UINT},
    {AKEY_SSM_INNER_SIZE, KIND_UINT},
    {AKEY_FULL_ATTN_INTERVAL, KIND_UINT},
    {AKEY_NEXTN_LAYERS, KIND_UINT},
};

static bool is_int_type(brigade_value_type t)
{
    switch (t) {
    case BRIGADE_VALUE_U8: case BRIGADE_VALUE_I8: case BRIGADE_VALUE_U16: case BRIGADE_VALUE_I16:
    case BRIGADE_VALUE_U32: case BRIGADE_VALUE_I32: case BRIGADE_VALUE_U64: case BRIGADE_VALUE_I64:
        return true;
    default:
        return false;
    }
}

static bool is_signed_type(brigade_value_type t)
{
    return t == BRIGADE_VALUE_I8 || t == BRIGADE_VALUE_I16 || t == BRIGADE_VALUE_I32 ||
           t == BRIGADE_VALUE_I64;
}

static bool is_array_of(const brigade_value *v, bool (*elem_ok)(brigade_value_type))
{
    return v->type == BRIGADE_VALUE_ARRAY && elem_ok(v->elem_type);
}

static bool is_float_type(brigade_value_type t)
{
    return t == BRIGADE_VALUE_F32 || t == BRIGADE_VALUE_F64;
}

static bool is_string_type(brigade_value_type t) { return t == BRIGADE_VALUE_STRING; }

static bool kind_ok(key_kind kind, const brigade_value *v)
{
    switch (kind) {
    case KIND_U32_EXACT: return v->type == BRIGADE_VALUE_U32;
    case KIND_UINT: return is_int_type(v->type) && !(is_signed_type(v->type) && v->as.i64 < 0);
    case KIND_UINT_OR_ARRAY:
        return kind_ok(KIND_UINT, v) || is_array_of(v, is_int_type);
    case KIND_FLOAT: return is_float_type(v->type);
    case KIND_BOOL: return v->type == BRIGADE_VALUE_BOOL;
    case KIND_STRING: return v->type == BRIGADE_VALUE_STRING;
    case KIND_STRING_ARRAY: return is_array_of(v, is_string_type);
    case KIND_FLOAT_ARRAY: return is_array_of(v, is_float_type);
    case KIND_INT_ARRAY: return is_array_of(v, is_int_type);
    }
    return false;
}

static const char *kind_name(key_kind kind)
{
    switch (kind) {
    case KIND_U32_EXACT: return "u32";
    case KIND_UINT: return "a non-negative integer";
    case KIND_UINT_OR_ARRAY: return "a non-negative integer or an integer array";
    case KIND_FLOAT: return "f32 or f64";
    case KIND_BOOL: return "bool";
    case KIND_STRING: return "string";
    case KIND_STRING_ARRAY: return "an array of strings";
    case KIND_FLOAT_ARRAY: return "an array of f32";
    case KIND_INT_ARRAY: return "an array of integers";
    }
    return "?";
}

static const key_rule *find_rule(const key_rule *rules, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rules[i].key, key) == 0)
            return &rules[i];
    return NULL;
}

bool bg_key_value_ok(const char *arch, const char *key, const brigade_value *value,
                     char *expected, size_t expected_size)
{
    const key_rule *rule = find_rule(general_rules, sizeof general_rules / sizeof *general_rules, key);
    if (!rule && arch) {
        size_t n = strlen(arch);
        if (strncmp(key, arch, n) == 0 && key[n] == '.')
            rule = find_rule(arch_rules, sizeof arch_rules / sizeof *arch_rules, key + n + 1);
    }
    if (!rule || kind_ok(rule->kind, value))
        return true;
    snprintf(expected, expected_size, "%s", kind_name(rule->kind));
    return false;
}
