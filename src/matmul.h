/* Matrix products with weights of any supported type, as llama.cpp
 * computes them: each activation row is first converted to the weight
 * type's dot format (f16, bf16, q8_0, q8_1 or q8_K), then every output is
 * one dot product of a weight row with an activation row. Weight rows are
 * split over the worker pool and each is read once for all tokens of a
 * micro-batch. */
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

/* Bytes of scratch bg_matmul needs for n_rows inputs of up to n_in elements
 * (16 rows' worth at least, for the tiled products' packing). */
size_t bg_matmul_scratch(uint64_t n_in, uint64_t n_rows);

/* For each of n rows: y[i * y_stride + 0..n_out) = W x[i * x_stride + 0..n_in).
 * scratch holds the converted activations. */
void bg_matmul(bg_pool *pool, const bg_matrix *w, const float *x, size_t x_stride, float *y,
               size_t y_stride, uint32_t n, void *scratch);

/* bg_matmul for two matrices of the same type and input width over the
 * same input (an expert's gate and up), in one pass of the pool. */
void bg_matmul_pair(bg_pool *pool, const bg_matrix *w0, const bg_matrix *w1, const float *x,
                    size_t x_stride, float *y0, float *y1, size_t y_stride, uint32_t n,
                    void *scratch);

/* y[m * y_stride + 0..n_out) = W_m x_m for count matrices of one type and
 * input width, each against one activation row, x_m = x + m * x_stride
 * (x_stride 0: one row for all), in one pass of the pool: a decode step's
 * chosen experts. The same dots as bg_matmul, so the same results. scratch
 * holds count converted rows (bg_matmul_scratch(n_in, count)). */
void bg_matmul_each(bg_pool *pool, const bg_matrix *ws, int count, const float *x,
                    size_t x_stride, float *y, size_t y_stride, void *scratch);

/* Row r of the matrix as f32 (embedding lookup). */
void bg_matrix_row(const bg_matrix *w, uint64_t r, float *out);

#endif
