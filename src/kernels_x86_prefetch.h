/* The weight dots ask for their bytes ahead of where they read.
 *
 * A decode step streams every weight row once, each through a dot kernel
 * against one activation row. That kernel keeps the core too busy for the
 * hardware prefetcher alone to hold enough lines in flight: on a 2-core
 * Zen 3, the Q4_K and Q6_K dots read 12-15 GB/s a core out of memory where
 * a plain read gets 21. So each block step asks for the cache lines that
 * start in the same span of bytes BG_DOT_PREFETCH further on: every line
 * once, a few at a time. Asking a whole row ahead at each row start (a
 * burst of 20-30 requests) gained half as much.
 *
 * The rows a thread dots lie one after another (a matrix's rows, an
 * expert's rows, a cache's positions), so the bytes ahead are mostly the
 * next rows'. A hint: it never faults, and results do not depend on it. */
#ifndef BG_KERNELS_X86_PREFETCH_H
#define BG_KERNELS_X86_PREFETCH_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifndef BG_DOT_PREFETCH
#define BG_DOT_PREFETCH 4096
#endif

/* Asks for the lines that start in [p + skip, p + skip + bytes). Integer
 * addresses: the span may lie past the object. Always inlined: GCC
 * otherwise finds the function free of side effects and drops the call. */
static inline __attribute__((always_inline)) void bg_prefetch_span(const void *p, size_t skip,
                                                                   size_t bytes)
{
    const uintptr_t from = (uintptr_t)p + skip;
    for (uintptr_t line = (from + 63) & ~(uintptr_t)63; line < from + bytes; line += 64)
        _mm_prefetch((const char *)line, _MM_HINT_T0);
}

/* The same BG_DOT_PREFETCH bytes on: [p + D, p + D + bytes). */
static inline __attribute__((always_inline)) void bg_prefetch_ahead(const void *p, size_t bytes)
{
    bg_prefetch_span(p, BG_DOT_PREFETCH, bytes);
}

#endif
