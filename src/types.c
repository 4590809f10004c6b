#include "types.h"

#include <strings.h>

static const bg_type_info type_table[BG_TYPE_COUNT] = {
    [BG_TYPE_F32] = {"f32", 1, 4},
    [BG_TYPE_F16] = {"f16", 1, 2},
    [BG_TYPE_Q4_0] = {"q4_0", 32, 18},
    [BG_TYPE_Q4_1] = {"q4_1", 32, 20},
    [BG_TYPE_Q5_0] = {"q5_0", 32, 22},
    [BG_TYPE_Q5_1] = {"q5_1", 32, 24},
    [BG_TYPE_Q8_0] = {"q8_0", 32, 34},
    [BG_TYPE_Q8_1] = {"q8_1", 32, 36},
    [BG_TYPE_Q2_K] = {"q2_K", 256, 84},
    [BG_TYPE_Q3_K] = {"q3_K", 256, 110},
    [BG_TYPE_Q4_K] = {"q4_K", 256, 144},
    [BG_TYPE_Q5_K] = {"q5_K", 256, 176},
    [BG_TYPE_Q6_K] = {"q6_K", 256, 210},
    [BG_TYPE_Q8_K] = {"q8_K", 256, 292},
    [BG_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [BG_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [BG_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [BG_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [BG_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [BG_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [BG_TYPE_IQ2_S] = {"iq2_s", 256, 82},
    [BG_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [BG_TYPE_I8] = {"i8", 1, 1},
    [BG_TYPE_I16] = {"i16", 1, 2},
    [BG_TYPE_I32] = {"i32", 1, 4},
    [BG_TYPE_I64] = {"i64", 1, 8},
    [BG_TYPE_F64] = {"f64", 1, 8},
    [BG_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [BG_TYPE_BF16] = {"bf16", 1, 2},
    [BG_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [BG_TYPE_TQ2_0] = {"tq2_0", 256, 66},
    [BG_TYPE_MXFP4] = {"mxfp4", 32, 17},
    [BG_TYPE_NVFP4] = {"nvfp4", 64, 36},
    [BG_TYPE_Q1_0] = {"q1_0", 128, 18},
    [BG_TYPE_Q2_0] = {"q2_0", 64, 18},
};

const bg_type_info *bg_type_get(uint32_t type)
{
    if (type >= BG_TYPE_COUNT || type_table[type].name == NULL)
        return NULL;
    return &type_table[type];
}

int bg_type_from_name(const char *name)
{
    for (int t = 0; t < BG_TYPE_COUNT; t++)
        if (type_table[t].name && strcasecmp(type_table[t].name, name) == 0)
            return t;
    return -1;
}

bool bg_type_row_bytes(bg_type type, uint64_t n, uint64_t *out)
{
    const bg_type_info *info = bg_type_get(type);
    if (!info || n % info->block_elems != 0)
        return false;
    uint64_t blocks = n / info->block_elems;
    if (blocks > UINT64_MAX / info->block_bytes)
        return false;
    *out = blocks * info->block_bytes;
    return true;
}
