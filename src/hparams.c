#include "hparams.h"

#include <stdio.h>
#include <string.h>

#include "error.h"
#include "keys.h"

const char *bg_arch_name(bg_arch arch)
{
    return arch == BG_ARCH_QWEN35MOE ? "qwen35moe" : "qwen3moe";
}

uint32_t bg_hparams_gqa(const bg_hparams *hp)
{
    return hp->n_head_kv ? hp->n_head / hp->n_head_kv : 0;
}

bool bg_hparams_is_recurrent(const bg_hparams *hp, uint32_t il)
{
    return hp->arch == BG_ARCH_QWEN35MOE && (il + 1) % hp->full_attention_interval != 0;
}

/* One "<arch>.<suffix>" key bound to a field. */
typedef struct key_field {
    const char *suffix;
    size_t offset; /* of a uint32_t or float in bg_hparams */
    bool is_float, required, qwen35_only;
} key_field;

#define U32(s, f, req, q35) {s, offsetof(bg_hparams, f), false, req, q35}
#define F32(s, f, req, q35) {s, offsetof(bg_hparams, f), true, req, q35}

static const key_field fields[] = {
    U32(AKEY_BLOCK_COUNT, n_layers, true, false),
    U32(AKEY_CONTEXT_LENGTH, n_ctx_train, true, false),
    U32(AKEY_EMBEDDING_LENGTH, n_embd, true, false),
    U32(AKEY_FF_LENGTH, n_ff, false, false),
    U32(AKEY_HEAD_COUNT, n_head, true, false),
    U32(AKEY_HEAD_COUNT_KV, n_head_kv, false, false),
    U32(AKEY_KEY_LENGTH, head_dim, false, false),
    F32(AKEY_ROPE_FREQ_BASE, rope_freq_base, false, false),
    F32(AKEY_RMS_EPS, rms_eps, true, false),
    U32(AKEY_EXPERT_COUNT, n_expert, true, false),
    U32(AKEY_EXPERT_USED_COUNT, n_expert_used, true, false),
    U32(AKEY_EXPERT_FF_LENGTH, n_ff_exp, true, false),
    U32(AKEY_ROPE_DIM_COUNT, rope_dims, false, false),
    U32(AKEY_EXPERT_SHARED_FF_LENGTH, n_ff_shexp, false, true),
    U32(AKEY_SSM_CONV_KERNEL, ssm_conv_kernel, true, true),
    U32(AKEY_SSM_STATE_SIZE, ssm_state_size, true, true),
    U32(AKEY_SSM_GROUP_COUNT, ssm_group_count, true, true),
    U32(AKEY_SSM_TIME_STEP_RANK, ssm_time_step_rank, true, true),
    U32(AKEY_SSM_INNER_SIZE, ssm_inner_size, true, true),
    U32(AKEY_FULL_ATTN_INTERVAL, full_attention_interval, false, true),
};

enum { N_FIELDS = sizeof fields / sizeof *fields };

static void key_name(char *buf, size_t size, bg_arch arch, const char *suffix)
{
    snprintf(buf, size, "%s.%s", bg_arch_name(arch), suffix);
}

static brigade_status read_sections(const brigade_gguf *f, bg_hparams *hp, brigade_error *err)
{
    char key[128];
    key_name(key, sizeof key, hp->arch, AKEY_ROPE_SECTIONS);
    const brigade_value *v = brigade_gguf_get(f, key);
    if (!v)
        return hp->arch == BG_ARCH_QWEN35MOE
                   ? bg_fail(err, BRIGADE_ERR_FORMAT, "required key '%s' is missing", key)
                   : BRIGADE_OK;
    /* keys.c has already checked it is an integer array */
    if (v->count > 4)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "key '%s' has %llu elements, at most 4 allowed",
                       key, (unsigned long long)v->count);
    unsigned es = brigade_value_type_size(v->elem_type);
    for (uint64_t i = 0; i < v->count; i++) {
        int64_t x = 0;
        memcpy(&x, (const uint8_t *)v->as.numbers + i * es, es);
        if (es < 8 && (v->elem_type == BRIGADE_VALUE_I8 || v->elem_type == BRIGADE_VALUE_I16 ||
                       v->elem_type == BRIGADE_VALUE_I32))
            x = (x << (64 - 8 * es)) >> (64 - 8 * es); /* sign-extend */
        if (x < 0 || x > (int64_t)BG_MAX_DIM)
            return bg_fail(err, BRIGADE_ERR_FORMAT, "key '%s': section %llu is %lld", key,
                           (unsigned long long)i, (long long)x);
        hp->rope_sections[i] = (int32_t)x;
    }
    return BRIGADE_OK;
}

brigade_status bg_hparams_read(const brigade_gguf *f, bg_hparams *hp, brigade_error *err)
{
    memset(hp, 0, sizeof *hp);
    brigade_string arch;
    arch.ptr = NULL;
    brigade_status st = brigade_gguf_get_str(f, KEY_ARCHITECTURE, true, &arch, err);
    if (st)
        return st;
    if (strcmp(arch.ptr, "qwen35moe") == 0)
        hp->arch = BG_ARCH_QWEN35MOE;
    else if (strcmp(arch.ptr, "qwen3moe") == 0)
        hp->arch = BG_ARCH_QWEN3MOE;
    else
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "architecture '%s' is not supported (supported: qwen35moe, qwen3moe)",
                       arch.ptr);
    hp->rope_freq_base = 10000.0f;
    hp->full_attention_interval = 4;
    for (size_t i = 0; i < N_FIELDS && !st; i++) {
        const key_field *k = &fields[i];
        if (k->qwen35_only && hp->arch != BG_ARCH_QWEN35MOE)
            continue;
        char key[128];
        key_name(key, sizeof key, hp->arch, k->suffix);
        void *field = (char *)hp + k->offset;
        st = k->is_float ? brigade_gguf_get_f32(f, key, k->required, field, err)
                         : brigade_gguf_get_u32(f, key, k->required, field, err);
    }
    if (st)
        return st;
    /* llama.cpp's defaults for the optional ones */
    if (!hp->n_head_kv)
        hp->n_head_kv = hp->n_head;
    if (!hp->head_dim && hp->n_head)
        hp->head_dim = hp->n_embd / hp->n_head;
    if (!hp->rope_dims)
        hp->rope_dims = hp->head_dim;
    st = read_sections(f, hp, err);
    if (st)
        return st;
    char vkey[128];
    key_name(vkey, sizeof vkey, hp->arch, AKEY_VALUE_LENGTH);
    uint32_t value_length = hp->head_dim;
    st = brigade_gguf_get_u32(f, vkey, false, &value_length, err);
    if (!st && value_length != hp->head_dim)
        st = bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                     "key '%s' is %u but the key length is %u; brigade needs them equal", vkey,
                     value_length, hp->head_dim);
    return st ? st : bg_hparams_check(hp, err);
}

#define REQUIRE(cond, ...)                                                                   \
    do {                                                                                     \
        if (!(cond))                                                                         \
            return bg_fail(err, BRIGADE_ERR_FORMAT, __VA_ARGS__);                            \
    } while (0)

brigade_status bg_hparams_check(const bg_hparams *hp, brigade_error *err)
{
    const char *a = bg_arch_name(hp->arch);
    REQUIRE(hp->n_layers >= 1 && hp->n_layers <= BG_MAX_LAYERS, "%s: block_count %u outside 1..%u",
            a, hp->n_layers, BG_MAX_LAYERS);
    REQUIRE(hp->n_embd >= 1 && hp->n_embd <= BG_MAX_DIM, "%s: embedding_length %u outside 1..%u", a,
            hp->n_embd, BG_MAX_DIM);
    REQUIRE(hp->n_head >= 1 && hp->n_head <= 4096 && hp->n_head_kv >= 1 &&
                hp->n_head % hp->n_head_kv == 0,
            "%s: head_count %u and head_count_kv %u: need 1 <= kv heads dividing the heads", a,
            hp->n_head, hp->n_head_kv);
    REQUIRE(hp->head_dim >= 2 && hp->head_dim <= 4096 && hp->head_dim % 2 == 0,
            "%s: key_length %u must be even, 2..4096", a, hp->head_dim);
    REQUIRE(hp->rope_dims <= hp->head_dim && hp->rope_dims % 2 == 0,
            "%s: rope.dimension_count %u must be even and at most key_length %u", a,
            hp->rope_dims, hp->head_dim);
    REQUIRE(hp->n_expert >= 1 && hp->n_expert <= BG_MAX_EXPERTS, "%s: expert_count %u outside 1..%u",
            a, hp->n_expert, BG_MAX_EXPERTS);
    REQUIRE(hp->n_expert_used >= 1 && hp->n_expert_used <= hp->n_expert,
            "%s: expert_used_count %u must be 1..expert_count (%u)", a, hp->n_expert_used,
            hp->n_expert);
    REQUIRE(hp->n_ff_exp >= 1 && hp->n_ff_exp <= BG_MAX_DIM && hp->n_ff_shexp <= BG_MAX_DIM &&
                hp->n_ff <= BG_MAX_DIM,
            "%s: feed-forward lengths (expert %u, shared %u, dense %u) out of range", a,
            hp->n_ff_exp, hp->n_ff_shexp, hp->n_ff);
    REQUIRE(hp->rms_eps > 0 && hp->rms_eps < 1, "%s: layer_norm_rms_epsilon %g outside (0, 1)", a,
            (double)hp->rms_eps);
    REQUIRE(hp->rope_freq_base > 0, "%s: rope.freq_base %g must be positive", a,
            (double)hp->rope_freq_base);
    if (hp->arch != BG_ARCH_QWEN35MOE)
        return BRIGADE_OK;
    int32_t sections = 0;
    for (int i = 0; i < 4; i++)
        sections += hp->rope_sections[i];
    REQUIRE((uint32_t)sections <= hp->rope_dims / 2,
            "%s: rope.dimension_sections add up to %d, more than half of rope.dimension_count %u",
            a, sections, hp->rope_dims);
    REQUIRE(hp->full_attention_interval >= 1 && hp->full_attention_interval <= hp->n_layers,
            "%s: full_attention_interval %u must be 1..block_count (%u): at least one layer "
            "must be full attention",
            a, hp->full_attention_interval, hp->n_layers);
    REQUIRE(hp->ssm_conv_kernel >= 1 && hp->ssm_conv_kernel <= 64, "%s: ssm.conv_kernel %u", a,
            hp->ssm_conv_kernel);
    REQUIRE(hp->ssm_state_size >= 1 && hp->ssm_state_size <= 4096 && hp->ssm_group_count >= 1 &&
                hp->ssm_group_count <= 4096 && hp->ssm_time_step_rank >= 1 &&
                hp->ssm_time_step_rank <= 4096 &&
                hp->ssm_time_step_rank % hp->ssm_group_count == 0,
            "%s: ssm.state_size %u, group_count %u, time_step_rank %u: need value heads a "
            "multiple of key heads",
            a, hp->ssm_state_size, hp->ssm_group_count, hp->ssm_time_step_rank);
    REQUIRE(hp->ssm_inner_size == hp->ssm_state_size * hp->ssm_time_step_rank,
            "%s: ssm.inner_size %u must equal state_size x time_step_rank (%u)", a,
            hp->ssm_inner_size, hp->ssm_state_size * hp->ssm_time_step_rank);
    return BRIGADE_OK;
}

brigade_status bg_hparams_write(bg_gguf_writer *w, const bg_hparams *hp, brigade_error *err)
{
    brigade_status st = bg_gguf_set_str(w, KEY_ARCHITECTURE, bg_arch_name(hp->arch), err);
    for (size_t i = 0; i < N_FIELDS && !st; i++) {
        const key_field *k = &fields[i];
        if (k->qwen35_only && hp->arch != BG_ARCH_QWEN35MOE)
            continue;
        const void *field = (const char *)hp + k->offset;
        if (!k->is_float && !k->required && *(const uint32_t *)field == 0)
            continue; /* optional and absent */
        char key[128];
        key_name(key, sizeof key, hp->arch, k->suffix);
        st = k->is_float ? bg_gguf_set_f32(w, key, *(const float *)field, err)
                         : bg_gguf_set_u32(w, key, *(const uint32_t *)field, err);
    }
    if (!st) {
        char key[128];
        key_name(key, sizeof key, hp->arch, AKEY_VALUE_LENGTH);
        st = bg_gguf_set_u32(w, key, hp->head_dim, err);
    }
    if (!st && hp->arch == BG_ARCH_QWEN35MOE) {
        char key[128];
        key_name(key, sizeof key, hp->arch, AKEY_ROPE_SECTIONS);
        st = bg_gguf_set_array(w, key, BRIGADE_VALUE_I32, hp->rope_sections, 4, err);
    }
    return st;
}
