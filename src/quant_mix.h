/* Quantization mixes: which tensor type each tensor of a model gets for a
 * llama.cpp file type such as Q4_K_M. The rules are llama.cpp's quantizer's
 * (llama-quant.cpp) for the file types brigade writes, so a file quantized
 * by brigade has the tensor types of one quantized by llama.cpp, and the
 * catalogue's sizes are those of the files people download. */
#ifndef BG_QUANT_MIX_H
#define BG_QUANT_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

/* One tensor as the mix sees it: its name, shape and current type. */
typedef struct bg_mix_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
} bg_mix_tensor;

typedef struct bg_mix_options {
    brigade_ftype ftype;
    bool pure;               /* every quantizable tensor gets the default type */
    int32_t output_type;     /* output.weight's type; -1: the mix decides */
    int32_t token_embd_type; /* token_embd.weight's type; -1: the mix decides */
} bg_mix_options;

/* The quantizer's tensor order: tensors outside blocks first, then block by
 * block (blk.N.), by name within each. Some rules count tensors in this
 * order, and output files are written in it. perm receives n indices;
 * false when out of memory. */
bool bg_mix_order(const bg_mix_tensor *tensors, size_t n, size_t *perm);

/* Whether llama.cpp's quantizer may change a tensor's type at all (matrices
 * named *.weight, except norms, the router and the DeltaNet convolution). */
bool bg_mix_quantizable(const bg_mix_tensor *t);

/* type, or the type llama.cpp's quantizer falls back to when rows of ne0
 * elements do not hold whole blocks of it (the nearest 32-element format,
 * F16 as the last resort). */
uint32_t bg_mix_fit_row(uint32_t type, uint64_t ne0);

/* What the rules read of the model: block_count, expert_count, and the
 * query heads per KV head (head_count / head_count_kv; 0 without KV heads). */
typedef struct bg_mix_model {
    uint32_t n_layers, n_expert, n_gqa;
} bg_mix_model;

/* types[i] receives the type of tensors[i]. n_fallback (may be NULL)
 * counts tensors whose row length forced a different type than the rules
 * chose. Fails on an unsupported file type or a malformed block name. */
brigade_status bg_mix_assign(const bg_mix_tensor *tensors, size_t n, const bg_mix_model *model,
                             const bg_mix_options *opts, uint32_t *types, uint32_t *n_fallback,
                             brigade_error *err);

#endif
