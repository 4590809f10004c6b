/* Matrix-vector products with weights of any supported type, as llama.cpp
 * computes them: the activation vector is first converted to the weight
 * type's dot format (f16, bf16, q8_0, q8_1 or q8_K), then each row is one
 * dot product. Rows are split over the worker pool. */
#ifndef BG_MATMUL_H
#define BG_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "brigade.h"
#include "pool.h"

/* One 2-d weight matrix: n_out rows of n_in elements. */
typedef struct bg_matrix {
    const uint8_t *data;
    uint32_t type;
    uint64_t n_in, n_out, row_bytes;
} bg_matrix;

/* The matrix of tensor t, or of expert e of a 3-d expert tensor. */
bg_matrix bg_matrix_of(const brigade_tensor_info *t, uint64_t expert);

/* Bytes of scratch bg_matvec needs for inputs of up to n_in elements. */
size_t bg_matvec_scratch(uint64_t n_in);

/* y[n_out] = W x[n_in]; scratch holds the converted activations. */
void bg_matvec(bg_pool *pool, const bg_matrix *w, const float *x, float *y, void *scratch);

/* Row r of the matrix as f32 (embedding lookup). */
void bg_matrix_row(const bg_matrix *w, uint64_t r, float *out);

#endif
