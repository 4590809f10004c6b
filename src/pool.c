#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

/* Between jobs a worker spins this many times before it sleeps: a decode
 * step hands out hundreds of small jobs, and waking a sleeping thread costs
 * more than most of them. */
enum { SPIN_LIMIT = 1 << 15 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct worker_arg {
    bg_pool *pool;
    unsigned index;
} worker_arg;

struct bg_pool {
    unsigned n_threads;
    unsigned refs;         /* holders of a shared pool (bg_pool_acquire) */
    bg_pool *next_shared;  /* the process's list of shared pools */
    pthread_mutex_t run;   /* one job at a time: callers on other threads wait */
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    atomic_uint_fast64_t generation; /* bumped for each job, after it is set up */
    atomic_uint busy;                /* workers still on the current job */
    atomic_bool stop;
    /* the current job */
    bg_pool_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_int_fast64_t next;
};

static void work(bg_pool *p, unsigned worker)
{
    for (;;) {
        int64_t t = atomic_fetch_add(&p->next, 1);
        if (t >= p->n_tasks)
            return;
        p->fn(p->ctx, t, worker);
    }
}

/* Waits until the generation moves past seen (spinning first), or stop. */
static void wait_for_job(bg_pool *p, uint64_t seen)
{
    for (int spins = 0; spins < SPIN_LIMIT; spins++) {
        if (atomic_load(&p->generation) != seen || atomic_load(&p->stop))
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->wake, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    bg_pool *p = a->pool;
    uint64_t seen = 0;
    for (;;) {
        wait_for_job(p, seen);
        if (atomic_load(&p->stop))
            break;
        seen = atomic_load(&p->generation);
        work(p, a->index);
        if (atomic_fetch_sub(&p->busy, 1) == 1) {
            /* the last one out wakes the caller if it went to sleep */
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

static void pool_free(bg_pool *p);

static bg_pool *pool_new(unsigned n_threads)
{
    bg_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_threads = n_threads ? n_threads : 1;
    pthread_mutex_init(&p->run, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->busy, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->next, 0);
    unsigned extra = p->n_threads - 1;
    p->threads = calloc(extra ? extra : 1, sizeof *p->threads);
    p->args = calloc(extra ? extra : 1, sizeof *p->args);
    if (!p->threads || !p->args) {
        p->n_threads = 1;
        pool_free(p);
        return NULL;
    }
    for (unsigned i = 0; i < extra; i++) {
        p->args[i] = (worker_arg){p, i + 1};
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
            p->n_threads = i + 1; /* run with the threads we got */
            break;
        }
    }
    return p;
}

static void pool_free(bg_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; p->threads && i + 1 < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->run);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->args);
    free(p);
}

unsigned bg_pool_threads(const bg_pool *p) { return p->n_threads; }

void bg_pool_run(bg_pool *p, int64_t n_tasks, bg_pool_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&p->run);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->n_threads - 1);
    /* publishing the job: workers read it after seeing the new generation */
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p, 0);
    for (int spins = 0; spins < SPIN_LIMIT && atomic_load(&p->busy) > 0; spins++)
        cpu_relax();
    if (atomic_load(&p->busy) > 0) {
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->busy) > 0)
            pthread_cond_wait(&p->done, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&p->run);
}

/* ------------------------------------------------------------ shared pools */

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static bg_pool *shared;

bg_pool *bg_pool_acquire(unsigned n_threads)
{
    n_threads = n_threads ? n_threads : 1;
    pthread_mutex_lock(&shared_lock);
    bg_pool *p = shared;
    while (p && p->n_threads != n_threads)
        p = p->next_shared;
    if (!p && (p = pool_new(n_threads)) != NULL) {
        p->next_shared = shared;
        shared = p;
    }
    if (p)
        p->refs++;
    pthread_mutex_unlock(&shared_lock);
    return p;
}

void bg_pool_release(bg_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&shared_lock);
    bool last = --p->refs == 0;
    if (last) {
        bg_pool **at = &shared;
        while (*at != p)
            at = &(*at)->next_shared;
        *at = p->next_shared;
    }
    pthread_mutex_unlock(&shared_lock);
    if (last)
        pool_free(p);
}
