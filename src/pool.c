#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct worker_arg {
    bg_pool *pool;
    unsigned index;
} worker_arg;

struct bg_pool {
    unsigned n_threads;
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    uint64_t generation; /* bumped for each job */
    unsigned busy;       /* workers still on the current job */
    bool stop;
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

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    bg_pool *p = a->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        work(p, a->index);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

bg_pool *bg_pool_new(unsigned n_threads)
{
    bg_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_threads = n_threads ? n_threads : 1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    unsigned extra = p->n_threads - 1;
    p->threads = calloc(extra ? extra : 1, sizeof *p->threads);
    p->args = calloc(extra ? extra : 1, sizeof *p->args);
    if (!p->threads || !p->args) {
        bg_pool_free(p);
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

void bg_pool_free(bg_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; p->threads && i + 1 < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
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
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p, 0);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
