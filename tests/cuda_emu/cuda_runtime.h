// A host emulation of the part of CUDA that src/cuda/ uses, for tests: the
// .cu files compile with g++ against this header (tests/cuda_emu/ comes
// first on the include path) and their kernels run on the CPU, each CUDA
// thread a fiber. Blocks run one after another (every other grid last to
// first, so a block that reads another's writes unordered shows it); a
// block's threads switch only at barriers (__syncthreads, __syncwarp, a
// shuffle). A kernel that lacks a barrier between one thread's write to
// shared memory and another's read shows it as a wrong result (odd blocks
// run their threads last to first, so the read comes first in one of the
// two orders); one that diverges around a barrier aborts, saying so, as
// does a warp whose lanes wait at different shuffles or a shuffle that
// reads a lane that has exited (the device's rule: every live thread of a
// barrier's scope waits at the same one, and a shuffle's source lane takes
// part). Launch limits are a real GPU's: at most 1024 threads a block,
// 65535 blocks in y and z, 48 KiB of dynamic shared memory; wide loads
// (BG_ALIGNED) at the device's alignment, or an abort naming the line.
// Shared memory, static and dynamic, starts as NaN bytes in every block.
// Streams run in order, and only when the host waits for them (a stream
// or event synchronized, a copy to or from plain host memory, a free),
// as late as the device may: a copy from page-locked memory reads it
// then, so a host that changes it before waiting shows it. Captures
// record the launches and graph launches enqueue them.
//
// Built with BG_EMU_TSAN (build/tests/race_cuda_ops), ThreadSanitizer
// watches the kernels' threads as fibers that only barriers (__syncthreads,
// __syncwarp) and __threadfence around atomics order, the device's rules:
// two threads that touch the same bytes (shared or global memory), one of
// them writing, with nothing of those between them, are reported as a
// data race, whichever order the emulation ran them in; in one block, or
// in two blocks of a grid (adjacent blocks run on different thread sets,
// so a block that reads what another writes without the counted
// last-block pattern, or after counting itself, shows it; blocks two
// apart share their threads, which orders them). Each block's shared
// memory is its own there.
//
// What it cannot show: speed, register or occupancy limits, the device's own
// expf/rounding (host libm runs here). Tests only: the product never
// builds it.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fp16.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#ifdef BG_EMU_TSAN
// Page-aligned in a section of their own, which emu.cpp maps afresh for
// each block (the race check's shared memory is the block's own).
#define __shared__ static __attribute__((section("bg_emu_shared"), aligned(4096)))
#else
// In a section of their own, which emu.cpp fills with NaN bytes for each
// block: a block that reads what it did not write sees garbage, as on the
// device, not what the previous block of the same kernel left there.
#define __shared__ static __attribute__((section("bg_emu_shared")))
#endif
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct float2 {
    float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct uint2 {
    unsigned x, y;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
struct uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

// ------------------------------------------------------------ runtime

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
};
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeThreadLocal = 1 };
#define cudaStreamNonBlocking 1u

typedef struct bg_emu_stream *cudaStream_t;
typedef struct bg_emu_event *cudaEvent_t;
#define cudaEventDisableTiming 2u
typedef struct bg_emu_graph *cudaGraph_t;
typedef struct bg_emu_graph *cudaGraphExec_t;

struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
struct cudaFuncAttributes {
    int maxThreadsPerBlock, numRegs;
};
// Every kernel has device code on the emulation, unless
// BG_EMU_NO_KERNEL_IMAGE is set (a card the build has no code for).
bool bg_emu_no_kernel_image(void);
template <typename F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, F *)
{
    a->maxThreadsPerBlock = 1024, a->numRegs = 0;
    return bg_emu_no_kernel_image() ? cudaErrorNoKernelImageForDevice : cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
// Page-locked host memory: plain malloc here, remembered (a copy to or
// from it waits its turn in the stream).
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
typedef struct bg_emu_node *cudaGraphNode_t;
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// ------------------------------------------------------------ threads

namespace bg_emu {
struct ids {
    uint3 thread, block;
    dim3 block_dim, grid_dim;
    unsigned shuffles; // this thread's count, for the exchange's double buffer
    bool entered;      // BG_KERNEL_ENTRY() ran (before any barrier, and always)
};
extern ids *current; // the CUDA thread (fiber) running
// A barrier or shuffle, where the kernel calls it (file and line): every
// live thread of its scope must wait at the same one. from: the lane a
// shuffle reads (it must take part), or -1.
void barrier(bool warp, const char *file, unsigned line, int from);
// The running warp's shuffle exchange (8 bytes per lane, two buffers):
// this lane's value in, lane `from`'s out. Not memory of the kernel's: a
// shuffle orders no memory on the device, so the race check (below) does
// not see these copies, nor count a shuffle as a barrier.
void put_lane(unsigned buffer, const void *v, size_t bytes);
void get_lane(unsigned from, unsigned buffer, void *v, size_t bytes);
void *dynamic_shared(void);
// site: the kernel and where it is launched ("k_x<T> @ file:line"), for
// the block-time profile (BG_EMU_PROFILE, emu.cpp).
void launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, const char *site,
            std::function<void()> body);

// The running thread's ids, and the two it updates. Under ThreadSanitizer
// (BG_EMU_TSAN, make racecheck) they are out of line in emu.cpp, which is
// not instrumented: the scheduler rewrites them between switches, and
// those are the emulation's accesses, not the kernel's.
// fence and atomic_done tell the race check of a __threadfence and of an
// atomic at p: a fence then an atomic releases, an atomic then a fence
// acquires, as the device's memory model orders them.
#ifdef BG_EMU_TSAN
ids self(void);
void enter(void);
unsigned next_buffer(void);
void fence(void);
void atomic_done(void *p);
#else
inline ids self(void) { return *current; }
inline void enter(void) { current->entered = true; }
inline unsigned next_buffer(void) { return current->shuffles++ & 1; }
inline void fence(void) {}
inline void atomic_done(void *) {}
#endif

inline unsigned lane(void)
{
    const ids c = self();
    return (c.thread.x + c.block_dim.x * (c.thread.y + c.block_dim.y * c.thread.z)) % 32;
}

// Shuffles alternate between two exchange buffers, so one barrier each
// suffices: after it, a lane's next write goes to the other buffer, and the
// write after that waits at a barrier every lane reaches only after reading
// this one.
template <typename T> T shuffle(T v, unsigned from, const char *file, unsigned line)
{
    static_assert(sizeof(T) <= 8, "shuffles move up to 8 bytes");
    const unsigned buffer = next_buffer();
    put_lane(buffer, &v, sizeof v);
    barrier(true, file, line, (int)(from % 32));
    T r;
    get_lane(from % 32, buffer, &r, sizeof r);
    return r;
}

// k<<<grid, block, shmem, stream>>>(args) as BG_LAUNCH(...)(args): the
// arguments are converted to the kernel's parameter types and kept by
// value, as a launch does.
} // namespace bg_emu
// src/cuda/common.cuh's hook for the timeline's launch sites
extern bool bg_launch_logging;
void bg_launch_note(const char *site);
namespace bg_emu {
template <typename... P> struct launcher {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    const char *site;
    void (*kernel)(P...);
    template <typename... A> void operator()(A &&...a) const
    {
        if (bg_launch_logging)
            bg_launch_note(site);
        std::tuple<P...> args(static_cast<P>(a)...);
        void (*k)(P...) = kernel;
        launch(grid, block, shmem, stream, site, [k, args]() { std::apply(k, args); });
    }
};
template <typename... P>
launcher<P...> make_launcher(dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                             const char *site, void (*kernel)(P...))
{
    return launcher<P...>{grid, block, shmem, s, site, kernel};
}
} // namespace bg_emu

namespace bg_emu {
[[noreturn]] void misaligned(const void *p, size_t align, const char *file, int line);
// The device's alignment of a load's type: the vector types' own.
template <typename T> constexpr size_t device_align()
{
    using U = typename std::remove_cv<T>::type;
    return std::is_same<U, float4>::value || std::is_same<U, uint4>::value ? 16
           : std::is_same<U, float2>::value || std::is_same<U, uint2>::value ? 8
                                                                             : alignof(U);
}
template <typename P> P aligned(const void *p, const char *file, int line)
{
    const size_t a = device_align<typename std::remove_pointer<P>::type>();
    if ((uintptr_t)p % a)
        misaligned(p, a, file, line);
    return (P)p;
}
} // namespace bg_emu
#define BG_ALIGNED(type, p) (bg_emu::aligned<type>((p), __FILE__, __LINE__))

// The bulk prefetch to L2 (src/cuda/common.cuh): here it checks what the
// instruction needs (a 16-byte aligned address and size, inside one
// allocation of device memory) and counts the bytes, which
// bg_emu_prefetched reports; it aborts on a range the device would refuse.
namespace bg_emu {
void prefetch(size_t a, uint32_t size, const char *file, int line);
}
#define BG_PREFETCH_BULK(a, size) (bg_emu::prefetch((a), (size), __FILE__, __LINE__))
inline size_t __cvta_generic_to_global(const void *p) { return (size_t)p; }
extern "C" void bg_emu_prefetched(unsigned long long *bytes, unsigned long long *ranges);

// (BG_LAUNCH_SITE: src/cuda/common.cuh, which comes after this header)
#define BG_LAUNCH(grid, block, shmem, stream, ...)                                           \
    bg_emu::make_launcher(grid, block, shmem, stream, BG_LAUNCH_SITE(__VA_ARGS__), __VA_ARGS__)
#define BG_DYNAMIC_SHARED(type, name) type *name = (type *)bg_emu::dynamic_shared()
// The wait in every kernel's first statement (BG_KERNEL_ENTRY, programmatic
// dependent launch on the device, src/cuda/common.cuh): here it only
// records that it ran, and a kernel that reaches a barrier or returns
// without it aborts.
#define BG_KERNEL_WAIT() (bg_emu::enter())
#define BG_KERNEL_RELEASE() ((void)0)
// The device's clock in nanoseconds: the host's.
inline unsigned long long bg_globaltimer(void)
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

#define threadIdx (bg_emu::self().thread)
#define blockIdx (bg_emu::self().block)
#define blockDim (bg_emu::self().block_dim)
#define gridDim (bg_emu::self().grid_dim)

// The call site (file, line) of each barrier and shuffle, from default
// arguments, for the emulation's check that a warp or block waits at one.
#define BG_EMU_SITE const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()
inline void __syncthreads(BG_EMU_SITE) { bg_emu::barrier(false, file, line, -1); }
inline void __syncwarp(BG_EMU_SITE) { bg_emu::barrier(true, file, line, -1); }
template <typename T> T __shfl_xor_sync(unsigned, T v, int mask, BG_EMU_SITE)
{
    return bg_emu::shuffle(v, bg_emu::lane() ^ (unsigned)mask, file, line);
}
template <typename T> T __shfl_sync(unsigned, T v, int src, BG_EMU_SITE)
{
    return bg_emu::shuffle(v, (unsigned)src, file, line);
}
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned delta, BG_EMU_SITE)
{
    const unsigned lane = bg_emu::lane();
    return bg_emu::shuffle(v, lane >= delta ? lane - delta : lane, file, line);
}
#undef BG_EMU_SITE
// Blocks run one after another: every write is visible to later blocks
// (the race check still holds them to the fences the device needs).
inline void __threadfence(void) { bg_emu::fence(); }
template <typename T> T __ldcg(const T *p) { return *p; }

// Atomic as on the device: relaxed, ordered only by __threadfence around
// them (the race check's model, above).
inline int atomicAdd(int *p, int v)
{
    const int old = __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    bg_emu::atomic_done(p);
    return old;
}
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    const unsigned long long old = __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    bg_emu::atomic_done(p);
    return old;
}
inline float atomicAdd(float *p, float v)
{
    float old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do
        sum = old + v;
    while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    bg_emu::atomic_done(p);
    return old;
}

// Built with -ffp-contract=off: these round once, as on the device.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __uint_as_float(unsigned u) { return bg_f32_from_bits(u); }
// Byte i of the result: byte (s >> 4i) & 7 of y:x (x's bytes first); with
// bit 3 of that nibble set, the selected byte's sign in all eight bits.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const uint64_t both = (uint64_t)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned sel = s >> 4 * i & 0xF;
        unsigned byte = (unsigned)(both >> 8 * (sel & 7)) & 0xFF;
        if (sel & 8)
            byte = byte & 0x80 ? 0xFF : 0;
        r |= byte << 8 * i;
    }
    return r;
}
// c + the sum of the products of a's and b's four signed bytes
inline int __dp4a(int a, int b, int c)
{
    for (int k = 0; k < 4; k++)
        c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
    return c;
}

struct __half {
    uint16_t bits;
};
struct __nv_bfloat16 {
    uint16_t bits;
};
inline float __half2float(__half h) { return bg_f16_to_f32(h.bits); }
inline __half __float2half_rn(float f) { return __half{bg_f32_to_f16(f)}; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{bg_f32_to_bf16(f)}; }
inline float __bfloat162float(__nv_bfloat16 b) { return bg_bf16_to_f32(b.bits); }
