#include "matmul.h"

#include <stdbool.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "types.h"

bg_matrix bg_matrix_of(const brigade_tensor_info *t, uint64_t expert)
{
    bg_matrix m = {.type = t->type, .n_in = t->ne[0], .n_out = t->ne[1]};
    bg_type_row_bytes((bg_type)t->type, t->ne[0], &m.row_bytes);
    m.data = (const uint8_t *)t->data + expert * m.n_out * m.row_bytes;
    return m;
}

size_t bg_matmul_scratch(uint64_t n_in, uint64_t n_rows)
{
    /* f32 is the widest dot format: 4 bytes an element. A tiled product
     * packs its activations after the converted rows, in blocks of 16
     * rows (about 1.2 bytes an element): room for 16 rows holds that from
     * the fewest rows a tiled product takes (4) on, where n rows' room
     * did not before 7. */
    const uint64_t rows = n_rows < 16 ? 16 : n_rows;
    return (size_t)(n_in * 4 + 64) * (size_t)rows;
}

/* The rows [r0, r1) of its matrix's n_out that task task_index computes
 * in a product split tasks_per_matrix ways per matrix (matrix task_index /
 * tasks_per_matrix), rows_per_task rows each. */
static void task_rows(int64_t task_index, uint64_t tasks_per_matrix, uint64_t rows_per_task,
                      uint64_t n_out, uint64_t *r0, uint64_t *r1)
{
    *r0 = (uint64_t)task_index % tasks_per_matrix * rows_per_task;
    *r1 = *r0 + rows_per_task < n_out ? *r0 + rows_per_task : n_out;
}

/* Splits each of count matrices' n_out rows into at most `tasks` runs
 * (*rows_per_task rows, a multiple of `granule`, *tasks_per_matrix runs a
 * matrix; fn's task i is run i % tasks_per_matrix of matrix i /
 * tasks_per_matrix) and runs them all, on the pool when there is more
 * than one. */
static void run_row_tasks(bg_pool *pool, uint64_t n_out, uint64_t tasks, uint64_t granule,
                          int count, uint64_t *rows_per_task, uint64_t *tasks_per_matrix,
                          bg_pool_fn fn, void *job)
{
    *rows_per_task = ((n_out + tasks - 1) / tasks + granule - 1) / granule * granule;
    *tasks_per_matrix = (n_out + *rows_per_task - 1) / *rows_per_task;
    const int64_t all = (int64_t)(*tasks_per_matrix * (uint64_t)count);
    if (pool && all > 1)
        bg_pool_run(pool, all, fn, job);
    else
        for (int64_t t = 0; t < all; t++)
            fn(job, t, 0);
}

/* Up to two matrices with the same input, tasks_per_matrix tasks each. */
typedef struct matmul_job {
    const bg_matrix *ws[2];
    float *ys[2];
    bg_dot_fn dot;
    bg_dot_multi_fn multi; /* NULL: one dot at a time */
    bg_dot_rows_fn rows;   /* not NULL: it takes every product, row by row */
    const uint8_t *xq;
    size_t xq_row; /* bytes of one converted activation row */
    size_t y_stride;
    uint32_t n;
    uint64_t rows_per_task, tasks_per_matrix;
} matmul_job;

/* The rows dot for w's products, or NULL for one dot a row. llama.cpp
 * repacks a matrix for its rows-order product only when its row count is
 * a multiple of 8 (repack.cpp) and takes any other row by row with its
 * vec_dot, whose order the single dot has: the same choice keeps every
 * result on llama.cpp's bits (tests/oracle_kernels.c). */
static bg_dot_rows_fn rows_dot_of(const bg_matrix *w)
{
    return w->n_out % BG_DOT_ROWS ? NULL : bg_kernel_dot_rows((bg_type)w->type);
}

/* y[k * y_stride + r] for the rows [r0, r1) of w and the n converted rows
 * a + k * a_row, through the rows dot: a group of weight rows against
 * every activation row before the next group, so the group is read from
 * memory once (it stays in L1 for the other activation rows). */
static void dot_rows(bg_dot_rows_fn rows, const bg_matrix *w, uint64_t r0, uint64_t r1,
                     const uint8_t *a, size_t a_row, uint32_t n, float *y, size_t y_stride)
{
    for (uint64_t r = r0; r < r1; r += BG_DOT_ROWS) {
        const int nr = r1 - r < BG_DOT_ROWS ? (int)(r1 - r) : BG_DOT_ROWS;
        for (uint32_t k = 0; k < n; k++)
            rows((int64_t)w->n_in, w->data + r * w->row_bytes, (size_t)w->row_bytes, nr,
                 a + k * a_row, y + k * y_stride + r);
    }
}

static void matmul_task(void *ctx, int64_t task_index, unsigned worker)
{
    (void)worker;
    const matmul_job *j = ctx;
    const uint64_t m = (uint64_t)task_index / j->tasks_per_matrix;
    const bg_matrix *w = j->ws[m];
    float *y = j->ys[m];
    uint64_t r0, r1;
    task_rows(task_index, j->tasks_per_matrix, j->rows_per_task, w->n_out, &r0, &r1);
    const int64_t n_in = (int64_t)w->n_in;
    if (j->rows) {
        dot_rows(j->rows, w, r0, r1, j->xq, j->xq_row, j->n, y, j->y_stride);
        return;
    }
    /* Groups of activation rows outside, weight rows inside: a group's
     * activations stay in L1 while the task's weight rows stream through. */
    uint32_t i = 0;
    if (j->multi)
        for (; i + 1 < j->n; i += BG_DOT_MULTI) {
            const int na = j->n - i < BG_DOT_MULTI ? (int)(j->n - i) : BG_DOT_MULTI;
            const uint8_t *a = j->xq + i * j->xq_row;
            for (uint64_t r = r0; r < r1; r++) {
                float out[BG_DOT_MULTI];
                j->multi(n_in, w->data + r * w->row_bytes, a, j->xq_row, na, out);
                for (int t = 0; t < na; t++)
                    y[(i + (uint32_t)t) * j->y_stride + r] = out[t];
            }
        }
    for (uint64_t r = r0; r < r1; r++)
        for (uint32_t k = i; k < j->n; k++)
            y[k * j->y_stride + r] = j->dot(n_in, w->data + r * w->row_bytes, j->xq + k * j->xq_row);
}

/* The tiled path: stripes of BG_GEMM_ROWS weight rows, each task a run of
 * stripes of one matrix, against activations packed once. */
typedef struct gemm_job {
    const bg_matrix *ws[2];
    float *ys[2];
    const bg_gemm_kernel *k;
    const uint8_t *xq, *packed;
    size_t xq_row, y_stride;
    uint32_t n;
    uint64_t stripes_per_task, tasks_per_matrix;
} gemm_job;

static void pack_task(void *ctx, int64_t block, unsigned worker)
{
    (void)worker;
    const gemm_job *j = ctx;
    j->k->pack((int64_t)j->ws[0]->n_in, j->xq, j->xq_row, j->n, block, (void *)j->packed);
}

static void gemm_task(void *ctx, int64_t task_index, unsigned worker)
{
    (void)worker;
    const gemm_job *j = ctx;
    const uint64_t m = (uint64_t)task_index / j->tasks_per_matrix;
    const uint64_t task = (uint64_t)task_index % j->tasks_per_matrix;
    const bg_matrix *w = j->ws[m];
    const uint64_t stripes = w->n_out / BG_GEMM_ROWS;
    const uint64_t s0 = task * j->stripes_per_task;
    const uint64_t s1 = s0 + j->stripes_per_task < stripes ? s0 + j->stripes_per_task : stripes;
    if (s1 > s0) {
        const uint64_t r = s0 * BG_GEMM_ROWS;
        j->k->gemm((int64_t)w->n_in, w->data + r * w->row_bytes, w->row_bytes,
                   (int64_t)((s1 - s0) * BG_GEMM_ROWS), j->packed, j->n, j->ys[m] + r,
                   j->y_stride);
    }
}

/* Runs the product on the tiled kernel k when the batch and the scratch
 * allow it; false leaves it to the dots. xq holds the n converted rows. */
static bool matmul_tiled(bg_pool *pool, const bg_gemm_kernel *k, const bg_matrix *const *ws,
                         float *const *ys, int count, const uint8_t *xq, size_t xq_row,
                         size_t y_stride, uint32_t n, void *scratch)
{
    const bg_matrix *w = ws[0];
    if (!k || n < k->min_act || w->n_out % BG_GEMM_ROWS || w->n_in % BG_GEMM_COLS)
        return false;
    /* packed rows after the converted ones, 64-byte aligned, within the
     * scratch bg_matmul_scratch sized for at least n rows of n_in */
    const size_t used = ((size_t)n * xq_row + 63) & ~(size_t)63;
    if (used + k->packed_bytes((int64_t)w->n_in, n) > bg_matmul_scratch(w->n_in, n))
        return false;
    gemm_job j = {{ws[0], count > 1 ? ws[1] : ws[0]},
                  {ys[0], count > 1 ? ys[1] : ys[0]},
                  k,
                  xq,
                  (const uint8_t *)scratch + used,
                  xq_row,
                  y_stride,
                  n,
                  0,
                  0};
    const int64_t blocks = ((int64_t)n + 15) / 16;
    const uint64_t stripes = w->n_out / BG_GEMM_ROWS;
    uint64_t tasks = pool ? (uint64_t)bg_pool_threads(pool) * 4 : 1;
    tasks = tasks < stripes ? tasks : stripes;
    j.stripes_per_task = (stripes + tasks - 1) / tasks;
    j.tasks_per_matrix = (stripes + j.stripes_per_task - 1) / j.stripes_per_task;
    const int64_t all = (int64_t)(j.tasks_per_matrix * (uint64_t)count);
    if (pool) {
        bg_pool_run(pool, blocks, pack_task, &j);
        bg_pool_run(pool, all, gemm_task, &j);
    } else {
        for (int64_t b = 0; b < blocks; b++)
            pack_task(&j, b, 0);
        for (int64_t t = 0; t < all; t++)
            gemm_task(&j, t, 0);
    }
    return true;
}

typedef struct convert_job {
    bg_quantize_fn quantize;
    const float *x;
    size_t x_stride;
    uint8_t *xq;
    uint64_t xq_row, n_in;
} convert_job;

static void convert_task(void *ctx, int64_t i, unsigned worker)
{
    (void)worker;
    const convert_job *c = ctx;
    c->quantize(c->x + i * c->x_stride, c->xq + i * c->xq_row, (int64_t)c->n_in);
}

/* n rows of x converted to the dot format of w's type into scratch (on
 * the pool too when there are many of them); returns the bytes of one. */
static uint64_t convert_rows(bg_pool *pool, const bg_matrix *w, const float *x,
                             size_t x_stride, uint32_t n, void *scratch)
{
    const bg_type dot_type = bg_quant_ops_get((bg_type)w->type)->dot_type;
    uint64_t xq_row = 0;
    bg_type_row_bytes(dot_type, w->n_in, &xq_row);
    convert_job c = {bg_kernel_quantize_activations(dot_type), x, x_stride, scratch, xq_row,
                     w->n_in};
    if (pool && n >= 16)
        bg_pool_run(pool, n, convert_task, &c);
    else
        for (uint32_t i = 0; i < n; i++)
            convert_task(&c, i, 0);
    return xq_row;
}

/* y_m = W_m x for the count (1 or 2) matrices, which share n_in and type. */
static void matmul_n(bg_pool *pool, const bg_matrix *const *ws, float *const *ys, int count,
                     const float *x, size_t x_stride, size_t y_stride, uint32_t n, void *scratch)
{
    const bg_matrix *w = ws[0];
    const uint8_t *xq = scratch;
    const uint64_t xq_row = convert_rows(pool, w, x, x_stride, n, scratch);
    if (matmul_tiled(pool, bg_kernel_gemm((bg_type)w->type), ws, ys, count, xq, (size_t)xq_row,
                     y_stride, n, scratch))
        return;
    matmul_job j = {{ws[0], count > 1 ? ws[1] : ws[0]},
                    {ys[0], count > 1 ? ys[1] : ys[0]},
                    bg_kernel_dot((bg_type)w->type),
                    bg_kernel_dot_multi((bg_type)w->type),
                    rows_dot_of(w),
                    xq,
                    (size_t)xq_row,
                    y_stride,
                    n,
                    0,
                    0};
    unsigned n_threads = pool ? bg_pool_threads(pool) : 1;
    /* Several tasks a thread balance uneven progress. Small products stay on
     * the calling thread: waking the pool costs more than they do. Each
     * output is one dot (or one lane of a rows dot, which does not depend
     * on the rows beside it) either way, so results do not depend on it. */
    const uint64_t work = w->n_out * w->n_in * n * (uint64_t)count;
    const uint64_t tasks = w->n_out < 64 || work < (1u << 16) ? 1 : (uint64_t)n_threads * 4;
    /* the rows dot takes BG_DOT_ROWS rows at a time: runs of whole groups */
    run_row_tasks(pool, w->n_out, tasks, j.rows ? BG_DOT_ROWS : 1, count, &j.rows_per_task,
                  &j.tasks_per_matrix, matmul_task, &j);
}

void bg_matmul(bg_pool *pool, const bg_matrix *w, const float *x, size_t x_stride, float *y,
               size_t y_stride, uint32_t n, void *scratch)
{
    matmul_n(pool, &w, &y, 1, x, x_stride, y_stride, n, scratch);
}

void bg_matmul_pair(bg_pool *pool, const bg_matrix *w0, const bg_matrix *w1, const float *x,
                    size_t x_stride, float *y0, float *y1, size_t y_stride, uint32_t n,
                    void *scratch)
{
    const bg_matrix *ws[2] = {w0, w1};
    float *ys[2] = {y0, y1};
    matmul_n(pool, ws, ys, 2, x, x_stride, y_stride, n, scratch);
}

/* count matrices, each against its own converted row. */
typedef struct each_job {
    const bg_matrix *ws;
    bg_dot_fn dot;
    bg_dot_rows_fn rows; /* not NULL: used instead of dot */
    const uint8_t *xq;
    size_t xq_row;  /* bytes of one converted row; 0: one row for all */
    float *y;
    size_t y_stride;
    uint64_t rows_per_task, tasks_per_matrix;
} each_job;

static void each_task(void *ctx, int64_t task_index, unsigned worker)
{
    (void)worker;
    const each_job *j = ctx;
    const uint64_t m = (uint64_t)task_index / j->tasks_per_matrix;
    const bg_matrix *w = &j->ws[m];
    uint64_t r0, r1;
    task_rows(task_index, j->tasks_per_matrix, j->rows_per_task, w->n_out, &r0, &r1);
    const uint8_t *a = j->xq + m * j->xq_row;
    float *y = j->y + m * j->y_stride;
    if (j->rows) {
        dot_rows(j->rows, w, r0, r1, a, 0, 1, y, 0);
        return;
    }
    for (uint64_t r = r0; r < r1; r++)
        y[r] = j->dot((int64_t)w->n_in, w->data + r * w->row_bytes, a);
}

void bg_matmul_each(bg_pool *pool, const bg_matrix *ws, int count, const float *x,
                    size_t x_stride, float *y, size_t y_stride, void *scratch)
{
    if (count <= 0)
        return;
    const bg_matrix *w = &ws[0];
    const uint64_t xq_row = convert_rows(pool, w, x, x_stride, x_stride ? (uint32_t)count : 1,
                                         scratch);
    each_job j = {ws,
                  bg_kernel_dot((bg_type)w->type),
                  rows_dot_of(w),
                  scratch,
                  x_stride ? (size_t)xq_row : 0,
                  y,
                  y_stride,
                  0,
                  0};
    /* a few tasks a thread per matrix, as bg_matmul splits one */
    const unsigned n_threads = pool ? bg_pool_threads(pool) : 1;
    const uint64_t tasks =
        w->n_out < 64 ? 1 : ((uint64_t)n_threads * 4 + (uint64_t)count - 1) / (uint64_t)count;
    run_row_tasks(pool, w->n_out, tasks, j.rows ? BG_DOT_ROWS : 1, count, &j.rows_per_task,
                  &j.tasks_per_matrix, each_task, &j);
}

void bg_matrix_row(const bg_matrix *w, uint64_t r, float *out)
{
    const uint8_t *row = w->data + r * w->row_bytes;
    if (w->type == BG_TYPE_F32)
        memcpy(out, row, w->n_in * sizeof(float));
    else
        bg_quant_ops_get((bg_type)w->type)->dequantize(row, out, (int64_t)w->n_in);
}
