// The CUDA emulation's runtime (see cuda_runtime.h): memory, streams,
// graphs, and the scheduler that runs a block's threads as fibers.
#include "cuda_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <vector>

#ifdef BG_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "the CUDA emulation switches fibers with x86-64 code"
#endif

// Saves the callee-saved registers on the running stack, stores its
// pointer in *save, and continues on the stack `load` (as saved by an
// earlier switch, or prepared by start_fiber). A few instructions: the
// kernels switch at every shuffle, and ucontext's system calls made the
// tests minutes long.
extern "C" void bg_emu_switch(void **save, void *load);
asm(".text\n"
    ".globl bg_emu_switch\n"
    ".type bg_emu_switch, @function\n"
    "bg_emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size bg_emu_switch, .-bg_emu_switch\n");

namespace {

// ------------------------------------------------------------- fibers

enum state { READY, AT_WARP_BARRIER, AT_BLOCK_BARRIER, DONE };

struct fiber {
    void *sp; // saved stack pointer while switched out
    bg_emu::ids ids;
    state st;
    const char *file; // the barrier or shuffle it waits at
    unsigned line;
    int from;                       // the lane that shuffle reads, or -1
    unsigned block_bars, warp_bars; // barriers passed in this block
    bool fenced;                    // a __threadfence since its last atomic
    void *last_atomic;              // where that atomic was, or NULL
};

// Two sets of threads, each with its own stacks, take blocks in turn: to
// the race check a block's threads are never the previous block's.
enum { MAX_THREADS = 1024, STACK_BYTES = 128 << 10, SETS = 2, MAX_SHARED = 48 * 1024 };

void *scheduler_sp;
fiber thread_sets[SETS][MAX_THREADS];
fiber *fibers = thread_sets[0]; // the set of the block running
unsigned set, n_fibers, running;
uint8_t *stacks;                       // SETS * MAX_THREADS stacks, mapped once
const std::function<void()> *body;     // the kernel of the block running
uint64_t slots[MAX_THREADS / 32][2][32]; // each warp's shuffle exchange, two buffers
uint8_t *dyn_shared;                   // MAX_SHARED bytes, mapped once, then a page unmapped
size_t dyn_shared_bytes;

[[noreturn]] void die(const char *what);

// ThreadSanitizer's view of the threads (BG_EMU_TSAN; see cuda_runtime.h):
// each CUDA thread of each set is a fiber of its own, switched to and from
// without synchronizing, so that only what orders threads on the device
// orders them here: a barrier's arrivals before its departures (a token
// per set and barrier, by the parity of its count: no thread arrives at
// the next but one before every thread has left this one), a release
// (__threadfence, then an atomic) before an acquire (an atomic, then
// __threadfence) on the same address, and a grid before the next (the
// scheduler waits for each grid's end; each block starts from the
// scheduler's view, not the previous block's). Each block starts on fresh
// pages of shared memory, static and dynamic, so that one block's shared
// memory is not another's to the check. This file itself is not
// instrumented: its bookkeeping is not the kernels' memory.
namespace race {
#ifdef BG_EMU_TSAN
void *scheduler, *threads[SETS][MAX_THREADS];
char block_begin, grid_end, block_bar[SETS][2], warp_bar[SETS][MAX_THREADS / 32][2];
void to_thread(unsigned i)
{
    if (!threads[set][i])
        threads[set][i] = __tsan_create_fiber(0);
    __tsan_switch_to_fiber(threads[set][i], __tsan_switch_to_fiber_no_sync);
}
void to_scheduler(void) { __tsan_switch_to_fiber(scheduler, __tsan_switch_to_fiber_no_sync); }
void begin_grid(void) { scheduler = __tsan_get_current_fiber(); }
void release(void *token) { __tsan_release(token); }
void acquire(void *token) { __tsan_acquire(token); }

// The kernels' static __shared__ variables (cuda_runtime.h puts them in
// this section, page-aligned; this pad, linked last, ends it on a page).
extern "C" char __start_bg_emu_shared[], __stop_bg_emu_shared[];
static char shared_end_pad[4096] __attribute__((section("bg_emu_shared"), aligned(4096), used));

// Fresh zero pages over [p, p + bytes): ThreadSanitizer forgets who
// touched them (its mmap interceptor), and the scheduler wrote them.
void remap(void *p, size_t bytes)
{
    if ((uintptr_t)p % 4096 || bytes % 4096)
        die("shared memory not on whole pages (the section bg_emu_shared must end with "
            "emu.cpp's pad: link emu.o after the kernels)");
    if (bytes && mmap(p, bytes, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0) == MAP_FAILED)
        die("cannot remap shared memory");
}
void fresh_shared(void)
{
    remap(__start_bg_emu_shared, (size_t)(__stop_bg_emu_shared - __start_bg_emu_shared));
    remap(dyn_shared, MAX_SHARED);
}
#else
char block_begin, grid_end, block_bar[SETS][2], warp_bar[SETS][MAX_THREADS / 32][2];
inline void to_thread(unsigned) {}
inline void to_scheduler(void) {}
inline void begin_grid(void) {}
inline void release(void *) {}
inline void acquire(void *) {}
// The kernels' static __shared__ variables (cuda_runtime.h puts them in
// this section) as NaN bytes: the device leaves whatever the SM's last
// block had there.
extern "C" char __start_bg_emu_shared[], __stop_bg_emu_shared[];
inline void fresh_shared(void)
{
    memset(__start_bg_emu_shared, 0xFF, (size_t)(__stop_bg_emu_shared - __start_bg_emu_shared));
}
#endif
} // namespace race

// A thread's life: a block's kernel, then done until the next block that
// has this thread, on the same stack.
void fiber_main(void)
{
    for (;;) {
        race::acquire(&race::block_begin);
        (*body)();
        if (!fibers[running].ids.entered)
            die("a kernel returned without BG_KERNEL_ENTRY() (see src/cuda/common.cuh)");
        race::release(&race::grid_end);
        fibers[running].st = DONE;
        race::to_scheduler();
        bg_emu_switch(&fibers[running].sp, scheduler_sp);
    }
}

// A fresh stack whose first switch "returns" into fiber_main, entered as
// a call would enter it (rsp = 8 mod 16).
void *start_fiber(uint8_t *stack)
{
    uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;                     // fiber_main's return address: none
    *--sp = (void *)fiber_main;       // where the switch's ret goes
    for (int r = 0; r < 6; r++)       // rbp, rbx, r12..r15
        *--sp = NULL;
    return sp;
}

[[noreturn]] void die(const char *what)
{
    fprintf(stderr, "cuda emulation: %s\n", what);
    abort();
}

bool same_site(const fiber &a, const fiber &b)
{
    return a.line == b.line && strcmp(a.file, b.file) == 0;
}

// Threads i and j (of one scope) released together wait at different
// barriers or shuffles: on the device that is undefined (a hang, or values
// from the wrong exchange).
[[noreturn]] void diverged(const char *scope, unsigned i, unsigned j)
{
    fprintf(stderr,
            "cuda emulation: the threads of a %s wait at different barriers or shuffles: "
            "thread %u at %s:%u, thread %u at %s:%u\n",
            scope, i, fibers[i].file, fibers[i].line, j, fibers[j].file, fibers[j].line);
    abort();
}

// Releases the threads waiting at a barrier every live thread of their
// scope (warp or block) has reached; returns how many.
unsigned release(void)
{
    unsigned freed = 0;
    bool all_block = true;
    for (unsigned i = 0; i < n_fibers; i++)
        if (fibers[i].st != DONE && fibers[i].st != AT_BLOCK_BARRIER)
            all_block = false;
    if (all_block) {
        int first = -1;
        for (unsigned i = 0; i < n_fibers; i++) {
            if (fibers[i].st != AT_BLOCK_BARRIER)
                continue;
            if (first < 0)
                first = (int)i;
            else if (!same_site(fibers[first], fibers[i]))
                diverged("block", (unsigned)first, i);
            fibers[i].st = READY, freed++;
        }
        return freed;
    }
    for (unsigned w0 = 0; w0 < n_fibers; w0 += 32) {
        const unsigned w1 = w0 + 32 < n_fibers ? w0 + 32 : n_fibers;
        bool all_warp = true;
        int first = -1;
        for (unsigned i = w0; i < w1; i++) {
            if (fibers[i].st == AT_WARP_BARRIER) {
                if (first < 0)
                    first = (int)i;
                else if (!same_site(fibers[first], fibers[i]))
                    diverged("warp", (unsigned)first, i);
            } else if (fibers[i].st != DONE) {
                all_warp = false;
            }
        }
        if (first < 0 || !all_warp)
            continue;
        for (unsigned i = w0; i < w1; i++) {
            const fiber &f = fibers[i];
            if (f.st != AT_WARP_BARRIER || f.from < 0)
                continue;
            const unsigned src = w0 + (unsigned)f.from;
            if (src >= w1 || fibers[src].st != AT_WARP_BARRIER) {
                fprintf(stderr,
                        "cuda emulation: %s:%u: thread %u shuffles from lane %d of its warp, which %s "
                        "(on the device the value is undefined)\n",
                        f.file, f.line, i, f.from,
                        src >= w1 ? "the block does not have" : "has exited");
                abort();
            }
        }
        for (unsigned i = w0; i < w1; i++)
            if (fibers[i].st == AT_WARP_BARRIER)
                fibers[i].st = READY, freed++;
    }
    return freed;
}

void run_block(dim3 grid, dim3 block, uint3 bid)
{
    n_fibers = block.x * block.y * block.z;
    race::fresh_shared();
    memset(bg_emu::dynamic_shared(), 0xFF, dyn_shared_bytes); // NaN until written
    for (unsigned i = 0; i < n_fibers; i++) {
        fiber *f = &fibers[i];
        f->ids.thread = uint3{i % block.x, i / block.x % block.y, i / (block.x * block.y)};
        f->ids.block = bid;
        f->ids.block_dim = block;
        f->ids.grid_dim = grid;
        f->ids.shuffles = 0;
        f->ids.entered = false;
        f->st = READY;
        f->block_bars = f->warp_bars = 0;
        f->fenced = false;
        f->last_atomic = NULL;
        if (!f->sp) // started once, then resumed for each block
            f->sp = start_fiber(stacks + ((size_t)set * MAX_THREADS + i) * STACK_BYTES);
    }
    race::release(&race::block_begin);
    /* odd blocks run their threads last to first: a read of shared memory
     * that lacks the barrier after another thread's write then sees the
     * NaN the block started with (in even blocks, the earlier thread's
     * write) */
    const bool reverse = (bid.x + bid.y + bid.z) & 1;
    for (;;) {
        bool ran = false, live = false;
        for (unsigned k = 0; k < n_fibers; k++) {
            const unsigned i = reverse ? n_fibers - 1 - k : k;
            if (fibers[i].st == READY) {
                running = i;
                bg_emu::current = &fibers[i].ids;
                race::to_thread(i);
                bg_emu_switch(&scheduler_sp, fibers[i].sp);
                ran = true;
            }
            live |= fibers[i].st != DONE;
        }
        if (!live)
            return;
        if (!release() && !ran)
            die("threads wait at different barriers (a barrier some threads of a warp or "
                "block skip)");
    }
}

// ------------------------------------------------------ streams, graphs

uint64_t allocated;
const uint64_t TOTAL = 80ull << 30;
cudaError_t last_error = cudaSuccess;

} // namespace

struct bg_emu_graph {
    std::vector<std::function<void()>> launches;
};
// The work enqueued and not yet run: it runs when the host waits for it
// (the latest the device may run it), counted so that an event can wait
// for the work before its record only.
struct bg_emu_stream {
    bool capturing;
    bg_emu_graph *graph;
    std::deque<std::function<void()>> queue;
    uint64_t enqueued, done;
};
struct bg_emu_event {
    bg_emu_stream *stream; // where it was last recorded, or NULL
    uint64_t at;           // the stream's work before it
};

namespace {
bg_emu_stream legacy_stream; // stream 0
std::vector<bg_emu_stream *> streams{&legacy_stream};
std::map<uintptr_t, size_t> page_locked; // cudaMallocHost's blocks by address

bg_emu_stream *stream_of(cudaStream_t s) { return s ? s : &legacy_stream; }
void enqueue(cudaStream_t s, std::function<void()> work)
{
    bg_emu_stream *st = stream_of(s);
    st->queue.push_back(std::move(work));
    st->enqueued++;
}
void run_until(bg_emu_stream *st, uint64_t n)
{
    while (st->done < n) {
        std::function<void()> work = std::move(st->queue.front());
        st->queue.pop_front();
        work();
        st->done++;
    }
}
void drain(bg_emu_stream *st) { run_until(st, st->enqueued); }
void drain_all(void)
{
    for (bg_emu_stream *st : streams)
        drain(st);
}
bool is_page_locked(const void *p, size_t bytes)
{
    const uintptr_t a = (uintptr_t)p;
    auto it = page_locked.upper_bound(a);
    if (it == page_locked.begin())
        return false;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second;
}
} // namespace

namespace bg_emu {
ids *current;

// Device allocations by address (cudaMalloc), for the prefetches' check;
// the bytes and ranges prefetched so far.
std::map<uintptr_t, size_t> device_allocations;
unsigned long long prefetched_bytes, prefetched_ranges;

void prefetch(size_t a, uint32_t size, const char *file, int line)
{
    auto it = device_allocations.upper_bound((uintptr_t)a);
    const bool inside = it != device_allocations.begin() &&
                        (--it, a + size <= it->first + it->second);
    if (a % 16 || size % 16 || !size || !inside) {
        fprintf(stderr,
                "cuda emulation: %s:%d: a bulk prefetch of %u bytes at %#zx (the device needs "
                "a 16-byte aligned address and size, inside one allocation)\n",
                file, line, size, a);
        abort();
    }
    prefetched_bytes += size;
    prefetched_ranges += 1;
}

void misaligned(const void *p, size_t align, const char *file, int line)
{
    fprintf(stderr, "cuda emulation: %s:%d: a load of %zu-byte-aligned data from %p\n", file,
            line, align, p);
    abort();
}

void barrier(bool warp, const char *file, unsigned line, int from)
{
    fiber &f = fibers[running];
    if (!f.ids.entered)
        die("a barrier or shuffle before BG_KERNEL_ENTRY() (see src/cuda/common.cuh)");
    f.file = file, f.line = line, f.from = from;
    f.st = warp ? AT_WARP_BARRIER : AT_BLOCK_BARRIER;
    // a shuffle orders no memory (the race check's tokens are barriers')
    char *token = from >= 0 ? NULL
                  : warp    ? &race::warp_bar[set][running / 32][f.warp_bars++ & 1]
                            : &race::block_bar[set][f.block_bars++ & 1];
    if (token)
        race::release(token);
    race::to_scheduler();
    bg_emu_switch(&f.sp, scheduler_sp);
    if (token)
        race::acquire(token);
}

#ifdef BG_EMU_TSAN
ids self(void) { return *current; }
void enter(void) { current->entered = true; }
unsigned next_buffer(void) { return current->shuffles++ & 1; }

void fence(void)
{
    fiber &f = fibers[running];
    if (f.last_atomic)
        race::acquire(f.last_atomic);
    f.fenced = true;
}
void atomic_done(void *p)
{
    fiber &f = fibers[running];
    if (f.fenced)
        race::release(p);
    f.fenced = false;
    f.last_atomic = p;
}
#endif

// Copies of 1, 2, 4 or 8 bytes by moves, not memcpy calls, which
// ThreadSanitizer intercepts wherever they are made.
static void copy_small(void *dst, const void *src, size_t bytes)
{
    switch (bytes) {
    case 1: { uint8_t v; memcpy(&v, src, 1); memcpy(dst, &v, 1); break; }
    case 2: { uint16_t v; memcpy(&v, src, 2); memcpy(dst, &v, 2); break; }
    case 4: { uint32_t v; memcpy(&v, src, 4); memcpy(dst, &v, 4); break; }
    case 8: { uint64_t v; memcpy(&v, src, 8); memcpy(dst, &v, 8); break; }
    default: die("a shuffle of other than 1, 2, 4 or 8 bytes");
    }
}
void put_lane(unsigned buffer, const void *v, size_t bytes)
{
    copy_small(&slots[running / 32][buffer][running % 32], v, bytes);
}
void get_lane(unsigned from, unsigned buffer, void *v, size_t bytes)
{
    copy_small(v, &slots[running / 32][buffer][from], bytes);
}

// The launch's bytes end where the mapping does: a kernel that reads or
// writes past what its launch asked for faults at the page after (sizes
// rounded up to 16, the alignment it gets).
void *dynamic_shared(void)
{
    return dyn_shared + MAX_SHARED - ((dyn_shared_bytes + 15) & ~(size_t)15);
}

// ------------------------------------------------------------ profile

// BG_EMU_PROFILE=FILE: each launch's blocks timed on the host, summed by
// launch site and grid, written to FILE at exit. Host time is not the
// device's, but two things carry over: how the work divides among the
// kernels, and how much of a launch one block holds (the slowest block
// against the mean), which no number of SMs runs faster.
struct profile_key {
    const char *site;
    unsigned gx, gy, gz, threads;
    bool operator<(const profile_key &o) const
    {
        return std::tie(site, gx, gy, gz, threads) <
               std::tie(o.site, o.gx, o.gy, o.gz, o.threads);
    }
};
struct profile_row {
    uint64_t launches = 0, blocks = 0;
    double total_s = 0, slowest_s = 0; // all blocks; each launch's slowest block
};
std::map<profile_key, profile_row> *profile;
const char *profile_path;

double now_s(void)
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void profile_write(void)
{
    FILE *f = fopen(profile_path, "w");
    if (!f) {
        fprintf(stderr, "emulation: cannot write the profile to %s\n", profile_path);
        return;
    }
    std::vector<std::pair<profile_key, profile_row>> rows(profile->begin(), profile->end());
    std::sort(rows.begin(), rows.end(),
              [](const auto &a, const auto &b) { return a.second.total_s > b.second.total_s; });
    double all = 0;
    for (const auto &r : rows)
        all += r.second.total_s;
    fprintf(f, "# host time of each launch site's blocks (BG_EMU_PROFILE); share: of all "
               "blocks' time; slowest/mean: a launch's slowest block against its mean\n");
    fprintf(f, "%-8s %-9s %-9s %-16s %-7s %-10s %-12s %s\n", "share", "total_ms", "launches",
            "grid", "threads", "slow_ms", "slowest/mean", "site");
    for (const auto &r : rows) {
        const profile_key &k = r.first;
        const profile_row &v = r.second;
        char grid[48];
        snprintf(grid, sizeof grid, "%ux%ux%u", k.gx, k.gy, k.gz);
        const double mean = v.total_s / (double)v.blocks;
        fprintf(f, "%6.2f%%  %-9.3f %-9llu %-16s %-7u %-10.3f %-12.1f %s\n",
                100 * v.total_s / all, 1e3 * v.total_s, (unsigned long long)v.launches, grid,
                k.threads, 1e3 * v.slowest_s / (double)v.launches,
                v.slowest_s / (double)v.launches / mean, k.site);
    }
    fclose(f);
}

void profile_init(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    profile_path = getenv("BG_EMU_PROFILE");
    if (profile_path && *profile_path) {
        profile = new std::map<profile_key, profile_row>;
        atexit(profile_write);
    }
}

static void run_grid(dim3 grid, dim3 block, size_t shmem, const char *site,
                     const std::function<void()> &kernel)
{
    if (!stacks) {
        void *p = mmap(NULL, (size_t)SETS * MAX_THREADS * STACK_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *d = mmap(NULL, MAX_SHARED + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || d == MAP_FAILED ||
            mprotect((uint8_t *)d + MAX_SHARED, page, PROT_NONE))
            die("no memory for the thread stacks or the shared memory");
        stacks = (uint8_t *)p;
        dyn_shared = (uint8_t *)d;
    }
    dyn_shared_bytes = shmem;
    body = &kernel;
    race::begin_grid();
    // every other grid runs its blocks last to first: a kernel whose block
    // reads what another block of the launch writes (outside the counted
    // last-block pattern) sees it unwritten in one of the two orders
    static uint64_t grids;
    const bool reverse = grids++ % 2;
    const uint64_t n = (uint64_t)grid.x * grid.y * grid.z;
    double total = 0, slowest = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t b = reverse ? n - 1 - i : i;
        set = (unsigned)(i % SETS);
        fibers = thread_sets[set];
        const double t0 = profile ? now_s() : 0;
        run_block(grid, block,
                  uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                        (unsigned)(b / ((uint64_t)grid.x * grid.y))});
        if (profile) {
            const double dt = now_s() - t0;
            total += dt;
            slowest = dt > slowest ? dt : slowest;
        }
    }
    if (profile) {
        profile_row &r = (*profile)[profile_key{site, grid.x, grid.y, grid.z,
                                                block.x * block.y * block.z}];
        r.launches++, r.blocks += n, r.total_s += total, r.slowest_s += slowest;
    }
    race::acquire(&race::grid_end);
    current = NULL;
}

void launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, const char *site,
            std::function<void()> kernel)
{
    profile_init();
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (!threads || threads > MAX_THREADS || block.z > 64 || !grid.x || !grid.y || !grid.z ||
        grid.y > 65535 || grid.z > 65535 || shmem > MAX_SHARED) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (s && s->capturing) {
        s->graph->launches.push_back([=]() { run_grid(grid, block, shmem, site, kernel); });
        return;
    }
    enqueue(s, [=]() { run_grid(grid, block, shmem, site, kernel); });
}
} // namespace bg_emu

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorNoDevice; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (device != 0)
        return cudaErrorNoDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "CUDA emulation on the host");
    prop->major = 9;
    prop->minor = 0;
    prop->totalGlobalMem = TOTAL;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = new bg_emu_stream{false, NULL, {}, 0, 0};
    streams.push_back(*s);
    return cudaSuccess;
}
// The device finishes the stream's work first, as it would.
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    drain(s);
    for (size_t i = 0; i < streams.size(); i++)
        if (streams[i] == s)
            streams.erase(streams.begin() + (long)i);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s && s->capturing)
        return cudaErrorStreamCaptureUnsupported;
    drain(stream_of(s));
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = new bg_emu_event{NULL, 0};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (s && s->capturing)
        return cudaErrorStreamCaptureUnsupported;
    e->stream = stream_of(s);
    e->at = e->stream->enqueued;
    return cudaSuccess;
}
// The work before the record, and no more: what follows it may still wait.
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (e->stream)
        run_until(e->stream, e->at);
    return cudaSuccess;
}

// Each allocation records its size before the address handed out.
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (allocated + bytes > TOTAL)
        return cudaErrorMemoryAllocation;
    void *raw = NULL;
    if (posix_memalign(&raw, 256, bytes + 256))
        return cudaErrorMemoryAllocation;
    memcpy(raw, &bytes, sizeof bytes);
    memset((uint8_t *)raw + 256, 0xA5, bytes); // garbage until written, as cudaMalloc's
    allocated += bytes;
    *p = (uint8_t *)raw + 256;
    bg_emu::device_allocations[(uintptr_t)*p] = bytes;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return cudaErrorMemoryAllocation;
    page_locked[(uintptr_t)*p] = bytes;
    return cudaSuccess;
}
// Both frees wait for the device, as CUDA's do.
cudaError_t cudaFreeHost(void *p)
{
    drain_all();
    page_locked.erase((uintptr_t)p);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    drain_all();
    if (!p)
        return cudaSuccess;
    bg_emu::device_allocations.erase((uintptr_t)p);
    uint8_t *raw = (uint8_t *)p - 256;
    size_t bytes;
    memcpy(&bytes, raw, sizeof bytes);
    allocated -= bytes;
    free(raw);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = TOTAL - allocated;
    *total_bytes = TOTAL;
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    if (s && s->capturing)
        return cudaErrorStreamCaptureUnsupported;
    // page-locked host memory is read or written when the stream gets
    // there; plain memory waits for the stream and is done on return
    const void *host = kind == cudaMemcpyHostToDevice ? src : dst;
    if (is_page_locked(host, bytes)) {
        enqueue(s, [=]() { memcpy(dst, src, bytes); });
        return cudaSuccess;
    }
    drain(stream_of(s));
    memcpy(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    if (s && s->capturing)
        return cudaErrorStreamCaptureUnsupported;
    enqueue(s, [=]() { memset(dst, value, bytes); });
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    }
    return "cudaErrorUnknown";
}
bool bg_emu_no_kernel_image(void) { return getenv("BG_EMU_NO_KERNEL_IMAGE") != NULL; }
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorNoKernelImageForDevice:
        return "no kernel image is available for execution on the device";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return cudaGetErrorName(e);
    }
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    (void)mode;
    if (s->capturing)
        return cudaErrorStreamCaptureInvalidated;
    s->capturing = true;
    s->graph = new bg_emu_graph;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    if (!s->capturing)
        return cudaErrorInvalidValue;
    s->capturing = false;
    *graph = s->graph;
    s->graph = NULL;
    return cudaSuccess;
}
// Only the count: the recorded launches (every node here is a kernel).
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *n)
{
    if (nodes)
        return cudaErrorInvalidValue;
    *n = graph->launches.size();
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long)
{
    *exec = new bg_emu_graph(*graph);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    if (s && s->capturing)
        return cudaErrorStreamCaptureUnsupported;
    for (const auto &l : exec->launches)
        enqueue(s, l);
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}

extern "C" void bg_emu_prefetched(unsigned long long *bytes, unsigned long long *ranges)
{
    *bytes = bg_emu::prefetched_bytes;
    *ranges = bg_emu::prefetched_ranges;
}
