/* The machine's memory read bandwidth, STREAM-like: T threads each sum
 * their own slice of a buffer much larger than the last-level cache, all
 * starting together; the time is the slowest thread's. Best of several
 * passes, in GB/s (1e9 bytes). Pages are first touched by the threads that
 * read them. For bench/compare's "% of the physical limit".
 *
 * usage: stream_probe [-t THREADS] [-m MIB] [-r PASSES]
 * prints: stream_probe threads T mib M gbps G */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PROBE_X86 1
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sum of n 64-bit words (n a multiple of 16), four independent chains. */
static uint64_t sum_plain(const uint64_t *p, size_t n)
{
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

#ifdef PROBE_X86
/* The same with 32-byte loads, two cache lines an iteration. */
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 16) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256((const __m256i *)(const void *)(p + i)));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256((const __m256i *)(const void *)(p + i + 4)));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256((const __m256i *)(const void *)(p + i + 8)));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256((const __m256i *)(const void *)(p + i + 12)));
    }
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)(void *)out,
                        _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return out[0] + out[1] + out[2] + out[3];
}
#endif

typedef uint64_t (*sum_fn)(const uint64_t *p, size_t n);

typedef struct worker {
    pthread_t tid;
    const uint64_t *base;
    size_t n; /* words of this thread's slice */
    int passes;
    sum_fn sum;
    pthread_barrier_t *start, *done;
    uint64_t sink;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    /* first touch: the slice's pages are placed near this thread */
    memset((void *)w->base, 1, w->n * sizeof *w->base);
    for (int p = 0; p < w->passes; p++) {
        pthread_barrier_wait(w->start);
        w->sink += w->sum(w->base, w->n);
        pthread_barrier_wait(w->done);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = n_cpu > 0 ? (int)n_cpu : 1, passes = 7;
    long mib = 2048;
    for (int i = 1; i < argc; i += 2) {
        long v = i + 1 < argc ? atol(argv[i + 1]) : 0;
        if (v <= 0) {
            fprintf(stderr, "usage: stream_probe [-t THREADS] [-m MIB] [-r PASSES]\n");
            return 2;
        }
        if (!strcmp(argv[i], "-t")) threads = (int)v;
        else if (!strcmp(argv[i], "-m")) mib = v;
        else if (!strcmp(argv[i], "-r")) passes = (int)v;
        else {
            fprintf(stderr, "stream_probe: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    sum_fn sum = sum_plain;
#ifdef PROBE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        sum = sum_avx2;
#endif
    /* each slice a multiple of 16 words (128 bytes) */
    size_t words = ((size_t)mib << 20) / sizeof(uint64_t);
    size_t per = words / (size_t)threads / 16 * 16;
    uint64_t *buf = aligned_alloc(64, per * (size_t)threads * sizeof *buf + 64);
    worker *ws = calloc((size_t)threads, sizeof *ws);
    pthread_barrier_t start, done;
    if (!buf || !ws || per == 0 || pthread_barrier_init(&start, NULL, (unsigned)threads + 1) ||
        pthread_barrier_init(&done, NULL, (unsigned)threads + 1)) {
        fprintf(stderr, "stream_probe: cannot set up %ld MiB for %d threads\n", mib, threads);
        return 1;
    }
    for (int t = 0; t < threads; t++) {
        ws[t] = (worker){.base = buf + (size_t)t * per, .n = per, .passes = passes, .sum = sum,
                         .start = &start, .done = &done};
        if (pthread_create(&ws[t].tid, NULL, work, &ws[t])) {
            fprintf(stderr, "stream_probe: cannot start thread %d\n", t);
            return 1;
        }
    }
    double best = 0;
    for (int p = 0; p < passes; p++) {
        pthread_barrier_wait(&start);
        double t0 = now();
        pthread_barrier_wait(&done);
        double gbps = (double)per * (double)threads * sizeof *buf / (now() - t0) / 1e9;
        if (gbps > best)
            best = gbps;
    }
    uint64_t sink = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ws[t].tid, NULL);
        sink += ws[t].sink;
    }
    printf("stream_probe threads %d mib %ld gbps %.2f\n", threads, mib, best);
    fprintf(stderr, "stream_probe: checksum %llu\n", (unsigned long long)sink);
    free(ws);
    free(buf);
    return 0;
}
