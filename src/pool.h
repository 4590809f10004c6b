/* One worker pool for the process: a parallel-for over task indices. The
 * calling thread works too; workers sleep between jobs, and no thread is
 * created per token. */
#ifndef BG_POOL_H
#define BG_POOL_H

#include <stdint.h>

typedef struct bg_pool bg_pool;

/* fn(ctx, task, worker) for task in [0, n_tasks); worker < n_threads. */
typedef void (*bg_pool_fn)(void *ctx, int64_t task, unsigned worker);

/* The process's pool of n_threads (counting the caller; 1 means no extra
 * threads), shared by every session and quantization that asks for the
 * same count, created on first use and ended with its last holder. Jobs of
 * callers on different threads take turns. NULL on failure. */
bg_pool *bg_pool_acquire(unsigned n_threads);
void bg_pool_release(bg_pool *pool);

unsigned bg_pool_threads(const bg_pool *pool);
void bg_pool_run(bg_pool *pool, int64_t n_tasks, bg_pool_fn fn, void *ctx);

#endif
