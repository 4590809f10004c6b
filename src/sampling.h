/* Sampling internals: the candidate list the chain leaves before the final
 * random draw, exposed so tests can compare every transformation with
 * llama.cpp's samplers. */
#ifndef BG_SAMPLING_H
#define BG_SAMPLING_H

#include <stddef.h>

#include "brigade.h"

/* Laid out as llama.cpp's llama_token_data. */
typedef struct bg_candidate {
    int32_t id;
    float logit; /* after penalties and temperature */
    float p;     /* normalized over the surviving candidates */
} bg_candidate;

/* Runs penalties -> top-k -> top-p -> min-p -> temperature on logits
 * (n_vocab floats) and normalizes what survives, as llama.cpp's dist sampler
 * does before it draws. *out points into the sampler, valid until its next
 * call; candidates come best first when a sorting stage ran, else in id
 * order. Greedy samplers (temp <= 0) give the one most likely token with
 * p = 1 (llama.cpp keeps the others with p = 0). Ties between equal logits
 * are broken towards the lower id. Fails on a NaN or +inf logit, or when
 * every logit is -inf. */
brigade_status bg_sampler_candidates(brigade_sampler *s, const float *logits,
                                     const bg_candidate **out, size_t *n_out, brigade_error *err);

#endif
