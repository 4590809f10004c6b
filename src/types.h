/* Tensor element types as numbered in GGUF files, and their storage geometry. */
#ifndef BG_TYPES_H
#define BG_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ids are the on-disk values of GGUF's tensor type field; gaps are ids that
 * ggml retired and that no valid file may use. */
typedef enum bg_type {
    BG_TYPE_F32 = 0,
    BG_TYPE_F16 = 1,
    BG_TYPE_Q4_0 = 2,
    BG_TYPE_Q4_1 = 3,
    BG_TYPE_Q5_0 = 6,
    BG_TYPE_Q5_1 = 7,
    BG_TYPE_Q8_0 = 8,
    BG_TYPE_Q8_1 = 9,
    BG_TYPE_Q2_K = 10,
    BG_TYPE_Q3_K = 11,
    BG_TYPE_Q4_K = 12,
    BG_TYPE_Q5_K = 13,
    BG_TYPE_Q6_K = 14,
    BG_TYPE_Q8_K = 15,
    BG_TYPE_IQ2_XXS = 16,
    BG_TYPE_IQ2_XS = 17,
    BG_TYPE_IQ3_XXS = 18,
    BG_TYPE_IQ1_S = 19,
    BG_TYPE_IQ4_NL = 20,
    BG_TYPE_IQ3_S = 21,
    BG_TYPE_IQ2_S = 22,
    BG_TYPE_IQ4_XS = 23,
    BG_TYPE_I8 = 24,
    BG_TYPE_I16 = 25,
    BG_TYPE_I32 = 26,
    BG_TYPE_I64 = 27,
    BG_TYPE_F64 = 28,
    BG_TYPE_IQ1_M = 29,
    BG_TYPE_BF16 = 30,
    BG_TYPE_TQ1_0 = 34,
    BG_TYPE_TQ2_0 = 35,
    BG_TYPE_MXFP4 = 39,
    BG_TYPE_NVFP4 = 40,
    BG_TYPE_Q1_0 = 41,
    BG_TYPE_Q2_0 = 42,
    BG_TYPE_COUNT = 43, /* one past the largest id */
} bg_type;

typedef struct bg_type_info {
    const char *name;     /* lower-case ggml name, e.g. "q4_K" */
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
} bg_type_info;

/* NULL for ids outside the table or retired ids. */
const bg_type_info *bg_type_get(uint32_t type);

/* Case-insensitive lookup by name ("q4_k", "Q4_K", "bf16"); -1 if unknown. */
int bg_type_from_name(const char *name);

/* Bytes of a row of n elements; false if n is not a multiple of the block
 * size or the product overflows. */
bool bg_type_row_bytes(bg_type type, uint64_t n, uint64_t *out);

#endif
