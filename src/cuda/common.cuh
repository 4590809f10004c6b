// Shared by the CUDA backend's translation units: the device context, error
// reporting, and the dequantization of every weight format brigade reads.
//
// The formats mirror src/quant.h / src/quant.c (the CPU reference): the
// same block layouts, the same value formulas (d * q, d * q + m, K-quant
// group scales and mins, the IQ4 codebook). Written without a GPU to run
// on: scripts/gpu-check.sh is the parity check against the CPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu.h"

// Kernel launches, kernel entries and dynamic shared memory go through
// these macros, so that the tests' CUDA emulation
// (tests/cuda_emu/cuda_runtime.h, which defines them first) can run the
// kernels on the host:
//   BG_LAUNCH(grid, block, shmem, stream, kernel)(args...)
//
// Programmatic dependent launch (sm_90 and later): each kernel is launched
// so that its blocks may be scheduled while the kernel before it drains,
// which hides a launch's latency between the small kernels of a decode
// step. Every kernel's first statement is BG_KERNEL_ENTRY() (only a
// prefetch of bytes no kernel writes may come before it, bg_prefetch_l2):
// it waits until the kernel before has completed and its writes are
// visible (griddepcontrol.wait), so no kernel reads early, then lets the
// next kernel's launch begin. Without the launch attribute (older cards,
// BRIGADE_CUDA_PDL=0, or a runtime that refuses it) both are no-ops.
extern bool bg_pdl; // launches carry the attribute (backend.cu sets it)
// Blocks prefetch their weight rows before the wait (bg_prefetch_l2):
// with bg_pdl, unless BRIGADE_CUDA_PREFETCH=0.
extern bool bg_prefetch;

// The timeline (BRIGADE_CUDA_TIMELINE, backend.cu) names each launch of a
// timed graph by its site, the kernel and where it is launched: while
// bg_launch_logging is set (a capture), every launch passes it to
// bg_launch_note.
extern bool bg_launch_logging;
void bg_launch_note(const char *site);
#define BG_STR2(x) #x
#define BG_STR(x) BG_STR2(x)
#define BG_LAUNCH_SITE(...) #__VA_ARGS__ " @ " __FILE__ ":" BG_STR(__LINE__)
#ifndef BG_LAUNCH

template <typename... P> struct bg_launcher {
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    const char *site;
    template <typename... A> void operator()(A &&...args) const
    {
        if (bg_launch_logging)
            bg_launch_note(site);
        if (bg_pdl) {
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[0].val.programmaticStreamSerializationAllowed = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = shmem;
            cfg.stream = stream, cfg.attrs = attr, cfg.numAttrs = 1;
            cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...);
            return;
        }
        kernel<<<grid, block, shmem, stream>>>(static_cast<P>(args)...);
    }
};
template <typename... P>
bg_launcher<P...> bg_make_launcher(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem,
                                   cudaStream_t stream, const char *site)
{
    return bg_launcher<P...>{kernel, grid, block, shmem, stream, site};
}
#define BG_LAUNCH(grid, block, shmem, stream, ...)                                           \
    bg_make_launcher(__VA_ARGS__, grid, block, shmem, stream, BG_LAUNCH_SITE(__VA_ARGS__))
#define BG_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

// Waits until the kernel before has completed and its writes are visible
// (griddepcontrol.wait), then lets the next kernel's launch begin.
__device__ __forceinline__ void bg_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void bg_pdl_release(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define BG_KERNEL_WAIT() bg_pdl_wait()
#define BG_KERNEL_RELEASE() bg_pdl_release()

// Asks L2 for the size bytes at the global address a (16-byte aligned, size
// a multiple of 16): sm_90's bulk prefetch, a hint that nothing waits for;
// elsewhere nothing (older cards launch without the attribute, so there is
// no wait for it to overlap).
__device__ __forceinline__ void bg_prefetch_bulk(size_t a, uint32_t size)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(size) : "memory");
#else
    (void)a, (void)size;
#endif
}
#define BG_PREFETCH_BULK(a, size) bg_prefetch_bulk(a, size)

// The device's clock in nanoseconds, one for all SMs.
__device__ __forceinline__ unsigned long long bg_globaltimer(void)
{
    unsigned long long t = 0;
#ifdef __CUDA_ARCH__
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#endif
    return t;
}
#endif

// The timeline's records: when block 0 of each launch passed its wait, in
// launch order (a launch's wait passes only once the launch before has
// completed, so t[i + 1] - t[i] is launch i's time on the device, with
// the gap to the next).
enum { BG_TIMELINE_CAP = 1 << 16, BG_TIMELINE_TAIL = 64 };
struct bg_timeline {
    unsigned long long n;
    unsigned long long t[BG_TIMELINE_CAP];
};

// Each translation unit's own pointer to the records (device code is
// compiled without -rdc, so a __device__ variable is not shared): NULL
// unless a timed graph runs. k_timeline_set sets it, launched for every
// translation unit by the setter each registers (backend.cu).
static __device__ bg_timeline *bg_timeline_here;
typedef void (*bg_timeline_setter)(cudaStream_t stream, bg_timeline *tl);
bool bg_timeline_register(bg_timeline_setter set);

__device__ __forceinline__ void bg_timeline_note(void)
{
    if (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z)
        return;
    bg_timeline *const tl = bg_timeline_here;
    if (!tl)
        return;
    const unsigned long long t = bg_globaltimer(), i = atomicAdd(&tl->n, 1ull);
    if (i < BG_TIMELINE_CAP)
        tl->t[i] = t;
}

// Every kernel's first statement (after bg_prefetch_l2 at most).
#define BG_KERNEL_ENTRY() (BG_KERNEL_WAIT(), bg_timeline_note(), BG_KERNEL_RELEASE())

// Before its wait (BG_KERNEL_ENTRY), a block may ask L2 for bytes it will
// read that no kernel writes, its weight rows: a block launched early then
// fetches them while the kernel before finishes, often one block's norm
// with the memory idle, and reads them from L2 once the wait passes. The
// range [p, p + n) is trimmed to the 16-byte bounds inside it, in pieces
// of BG_PREFETCH_PIECE, by the calling thread. Only where the launches
// overlap (the host's bg_prefetch: BRIGADE_CUDA_PREFETCH=0 turns it off).
enum { BG_PREFETCH_PIECE = 1 << 16 };
__device__ __forceinline__ void bg_prefetch_l2(const void *p, uint64_t n)
{
    const size_t at = (size_t)__cvta_generic_to_global(p);
    const size_t end = (at + n) & ~(size_t)15;
    for (size_t a = (at + 15) & ~(size_t)15; a < end; a += BG_PREFETCH_PIECE)
        BG_PREFETCH_BULK(a, (uint32_t)(end - a < BG_PREFETCH_PIECE ? end - a : BG_PREFETCH_PIECE));
}

// Sets this translation unit's pointer; not noted itself.
static __global__ void k_timeline_set(bg_timeline *tl)
{
    BG_KERNEL_WAIT();
    BG_KERNEL_RELEASE();
    bg_timeline_here = tl;
}
static void bg_timeline_set_here(cudaStream_t stream, bg_timeline *tl)
{
    BG_LAUNCH(1, 1, 0, stream, k_timeline_set)(tl);
}
[[maybe_unused]] static const bool bg_timeline_registered =
    bg_timeline_register(bg_timeline_set_here);

// A cast to a pointer for a wide load or store (float4, uint4, uint16_t):
// a misaligned one faults on the device, and the emulation checks each.
#ifndef BG_ALIGNED
#define BG_ALIGNED(type, p) ((type)(p))
#endif

// GGUF type ids (src/types.h, which is C-only because of its _Static_asserts
// elsewhere; the numbers are the file format's).
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8,
    T_Q2_K = 10, T_Q3_K = 11, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_IQ4_NL = 20,
    T_IQ4_XS = 23, T_BF16 = 30,
};

struct bg_gpu_graph {
    uint64_t key;
    cudaGraphExec_t exec;
    const char **sites; // its launches' sites, in order (timeline on); owned
    uint32_t n_sites;
    uint32_t replays;
};

enum { BG_GPU_MAX_GRAPHS = 32 };

struct bg_gpu {
    int device;
    cudaStream_t stream;
    cudaEvent_t uploaded; // recorded after each upload (wait_uploads)
    void *arena;
    int *counters;    // BG_GPU_COUNTER_BYTES (set_scratch)
    uint8_t *scratch; // coded activations (set_scratch)
    uint64_t scratch_bytes;
    bool capturing;
    uint64_t capture_key;
    int n_graphs;
    bg_gpu_graph graphs[BG_GPU_MAX_GRAPHS];
    // BRIGADE_CUDA_TIMELINE (backend.cu): the file (NULL: off), the
    // records (allocated when a graph is first timed), and the key of the
    // graph being timed (or UINT64_MAX)
    const char *timeline_path;
    bg_timeline *timeline;
    uint64_t timeline_key;
    bg_gpu_graph *timeline_open; // the graph of the step being timed
    const char *timeline_tail[BG_TIMELINE_TAIL]; // launches after it
    uint32_t timeline_n_tail;
    char err[256];
};

// Records the first error of a call; returns -1.
static inline int bg_cuda_fail(bg_gpu *g, cudaError_t e, const char *what)
{
    snprintf(g->err, sizeof g->err, "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return -1;
}

// BRIGADE_CUDA_DEBUG (backend.cu): every launch runs eagerly (no graphs,
// no programmatic dependent launch) and is waited for, so a fault inside a
// kernel (an illegal address) is reported with that kernel's name instead
// of at some later synchronization.
extern bool bg_debug;

// Prefill's integer products on the int8 tensor cores (products.cuh):
// sm_80 and later, unless BRIGADE_CUDA_MMA is 0 or bg_cuda_mma_works
// (matmul.cu: the instruction's fragments laid out as the kernels assume)
// is false; backend.cu decides at init.
extern bool bg_mma;
// The tensor cores' products through shared memory (products.cuh,
// bg_mma_rows_staged), unless BRIGADE_CUDA_MMA_STAGE=0.
extern bool bg_mma_stage;
bool bg_cuda_mma_works(cudaStream_t stream);

// After a kernel launch.
static inline int bg_cuda_launched(bg_gpu *g, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && bg_debug && !g->capturing)
        e = cudaStreamSynchronize(g->stream);
    return e == cudaSuccess ? 0 : bg_cuda_fail(g, e, what);
}

// Whether rows of n floats at stride ys (at d_y) can be coded into d_q
// (gpu.h: K-quant super-blocks, 16-byte aligned); d_q NULL: nothing to
// code. Otherwise the error names `what`.
static inline int bg_cuda_codes_ok(bg_gpu *g, const char *what, const uint8_t *d_q, uint32_t n,
                                   const void *d_y, size_t ys)
{
    if (!d_q || (n % 256 == 0 && ys % 4 == 0 && (uintptr_t)d_y % 16 == 0 &&
                 (uintptr_t)d_q % 16 == 0))
        return 0;
    snprintf(g->err, sizeof g->err, "%s: coding rows of %u (stride %zu) not handled", what, n,
             ys);
    return -1;
}

// ------------------------------------------------------------ scalars

__device__ __forceinline__ float bg_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t bg_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float bg_bf2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t bg_ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
__device__ __forceinline__ uint32_t bg_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

__device__ __forceinline__ float bg_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float bg_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float bg_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

__device__ __forceinline__ float bg_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double bg_warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float bg_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__constant__ static const int8_t bg_iq4_values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

// -------------------------------------------- activations for integer dots

// How the CPU converts activations before a dot product with weights of
// a type (quant.c's dot_type): kept as floats, rounded to f16 or bf16, or
// coded in int8 with a scale per 32 (Q8_0) or per 256 (Q8_K).
enum { ACT_F32, ACT_F16, ACT_BF16, ACT_Q8_0, ACT_Q8_K };

// A lane's 32 activations (one chunk) as the CPU's conversion codes them.
// Q8_0/Q8_1: d = amax / 127 (kept as f16), codes round(x * 127 / amax)
// ties to even (the x86 activation path; d_raw, when given, gets d before
// its f16 rounding, from which Q8_1's sum is made). Q8_K: per 256 values,
// the 8 lanes of a super-block agree on the largest magnitude (first on
// ties), d = max / -127, codes min(127, round(x / d)). Every lane of the
// warp must call it for Q8_K. q may be x (each code is written after its
// value's last read).
template <int K>
__device__ __forceinline__ void bg_code_act(const float x[32], bool active, float q[32], float *d,
                                            float *d_raw = nullptr)
{
    float amax = 0.0f, max = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (K == ACT_Q8_0) {
        if (d_raw)
            *d_raw = amax / 127.f;
        *d = bg_h2f(bg_f2h(amax / 127.f));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
#pragma unroll
        for (int j = 0; j < 32; j++)
            q[j] = rintf(x[j] * id);
        return;
    }
    // Q8_K: the super-block's 8 chunks are 8 neighbouring lanes
    if (!active)
        amax = -1.0f;
    for (int o = 1; o < 8; o <<= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
        const float om = __shfl_xor_sync(0xffffffffu, max, o);
        const bool lower = ((threadIdx.x ^ o) & 7) < (threadIdx.x & 7);
        if (oa > amax || (oa == amax && lower)) {
            amax = oa;
            max = om;
        }
    }
    if (amax <= 0.0f) {
        *d = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; j++)
            q[j] = 0.0f;
        return;
    }
    const float iscale = -127.f / max;
    *d = 1 / iscale;
#pragma unroll
    for (int j = 0; j < 32; j++)
        q[j] = fminf(127.f, rintf(iscale * x[j]));
}

// 32 floats from p (16-byte aligned), or zeros for an inactive lane.
__device__ __forceinline__ void bg_load32(const float *p, bool active, float v[32])
{
    if (active) {
        const float4 *q = BG_ALIGNED(const float4 *, p);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float4 f = q[j];
            v[4 * j] = f.x, v[4 * j + 1] = f.y, v[4 * j + 2] = f.z, v[4 * j + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 32; j++)
            v[j] = 0.0f;
    }
}

// Bytes of one token's coded activations for rows of n_in: the codes, then
// a float scale per 32, padded to 16 bytes (gpu.h's BG_GPU_ACT_CODE_BYTES).
__host__ __device__ constexpr uint64_t bg_code_row_bytes(uint64_t n_in)
{
    return BG_GPU_ACT_CODE_BYTES(n_in);
}

// Four codes (whole numbers in [-127, 127]) as a word of four int8, in
// order.
__device__ __forceinline__ uint32_t bg_code_word(const float q[4])
{
    return (uint32_t)(uint8_t)(int8_t)q[0] | (uint32_t)(uint8_t)(int8_t)q[1] << 8 |
           (uint32_t)(uint8_t)(int8_t)q[2] << 16 | (uint32_t)(uint8_t)(int8_t)q[3] << 24;
}

// A chunk's 32 codes as 8 words of four int8, in order.
__device__ __forceinline__ void bg_pack_codes(const float q[32], uint32_t words[8])
{
#pragma unroll
    for (int k = 0; k < 8; k++)
        words[k] = bg_code_word(q + 4 * k);
}

// Stores chunk c's 32 codes and scale into a coded row of n_in: the codes
// first (16-byte aligned), then a float scale per 32.
__device__ __forceinline__ void bg_store_codes(uint8_t *row, uint64_t n_in, uint64_t c,
                                               const float q[32], float d)
{
    uint32_t words[8];
    bg_pack_codes(q, words);
    uint4 *out = BG_ALIGNED(uint4 *, row + c * 32);
    out[0] = make_uint4(words[0], words[1], words[2], words[3]);
    out[1] = make_uint4(words[4], words[5], words[6], words[7]);
    ((float *)(row + n_in))[c] = d;
}

// Chunks [first, first + count) of a row of n values (x: the row, 16-byte
// aligned) coded for K-quant weights (Q8_K) into its coded row, by the
// calling block, a thread per 32; first and n are multiples of 8 chunks
// (super-blocks). The block's writes of x must be visible (after a
// barrier). Whole warps take part in a super-block's exchange.
__device__ __forceinline__ void bg_block_code_span(const float *x, uint32_t n, uint32_t first,
                                                   uint32_t count, uint8_t *row)
{
    for (uint32_t c0 = 0; c0 < count; c0 += blockDim.x) {
        if (c0 + threadIdx.x / 32 * 32 >= count)
            break; // the whole warp is past the end
        const uint32_t c = first + c0 + threadIdx.x;
        const bool active = c0 + threadIdx.x < count;
        float v[32], d;
        bg_load32(x + (size_t)c * 32, active, v);
        bg_code_act<ACT_Q8_K>(v, active, v, &d); // in place: fewer registers
        if (active)
            bg_store_codes(row, n, c, v, d);
    }
}

// The block's row x of n values (a multiple of 256), written by the
// block's threads, coded into row r of xq after a barrier; xq NULL:
// nothing. The whole block calls it.
__device__ __forceinline__ void bg_block_code_after(const float *x, uint32_t n, uint8_t *xq,
                                                    uint32_t r)
{
    if (!xq)
        return;
    __syncthreads();
    bg_block_code_span(x, n, 0, n / 32, xq + r * bg_code_row_bytes(n));
}

// The backend's counters (BG_GPU_COUNTER_BYTES): the first is the tails'
// (products.cuh); a kernel that counts parts of its grid apart has its own
// from BG_OWN_COUNTERS_AT on (kernels run one after another, so they share
// that range).
enum { BG_OWN_COUNTERS_AT = 16 };

// Whether the calling block is the last of the n blocks that count
// themselves on *counter (zero before the first): that block sees every
// other block's writes made before they counted, and leaves the counter at
// zero for the next launch. The whole block calls it. A kernel finishes
// its work this way in its last block instead of in a launch of its own.
__device__ __forceinline__ bool bg_block_arrives_last(int *counter, int n)
{
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        // the block's writes (ordered before this thread's by the barrier)
        // visible before it is counted: one fence, as cooperative groups'
        // grid sync does, instead of one in every warp
        __threadfence();
        last = atomicAdd(counter, 1) == n - 1;
        if (last) {
            // every other block's count (and writes) seen before the plain
            // store that resets the counter: no store races their atomics
            __threadfence();
            *counter = 0;
        }
    }
    __syncthreads();
    if (last)
        __threadfence();
    return last;
}

// ------------------------------------------------------- block formats

// Bytes per block and elements per block, as src/types.c.
template <int T> struct bg_fmt;
template <> struct bg_fmt<T_F32> { enum { elems = 1, bytes = 4 }; };
template <> struct bg_fmt<T_F16> { enum { elems = 1, bytes = 2 }; };
template <> struct bg_fmt<T_BF16> { enum { elems = 1, bytes = 2 }; };
template <> struct bg_fmt<T_Q4_0> { enum { elems = 32, bytes = 18 }; };
template <> struct bg_fmt<T_Q4_1> { enum { elems = 32, bytes = 20 }; };
template <> struct bg_fmt<T_Q5_0> { enum { elems = 32, bytes = 22 }; };
template <> struct bg_fmt<T_Q5_1> { enum { elems = 32, bytes = 24 }; };
template <> struct bg_fmt<T_Q8_0> { enum { elems = 32, bytes = 34 }; };
template <> struct bg_fmt<T_IQ4_NL> { enum { elems = 32, bytes = 18 }; };
template <> struct bg_fmt<T_Q2_K> { enum { elems = 256, bytes = 84 }; };
template <> struct bg_fmt<T_Q3_K> { enum { elems = 256, bytes = 110 }; };
template <> struct bg_fmt<T_Q4_K> { enum { elems = 256, bytes = 144 }; };
template <> struct bg_fmt<T_Q5_K> { enum { elems = 256, bytes = 176 }; };
template <> struct bg_fmt<T_Q6_K> { enum { elems = 256, bytes = 210 }; };
template <> struct bg_fmt<T_IQ4_XS> { enum { elems = 256, bytes = 136 }; };

// Bytes of a row of n elements.
template <int T> __host__ __device__ constexpr uint64_t bg_row_bytes(uint64_t n)
{
    return n / bg_fmt<T>::elems * bg_fmt<T>::bytes;
}

// The 6-bit scale and min of group g of a Q4_K/Q5_K block (scales: 12 bytes).
__device__ __forceinline__ void bg_k_scale_min(const uint8_t *sc, int g, int *s, int *m)
{
    if (g < 4) {
        *s = sc[g] & 63;
        *m = sc[g + 4] & 63;
    } else {
        *s = (sc[g + 4] & 0xF) | (sc[g - 4] >> 6) << 4;
        *m = (sc[g + 4] >> 4) | (sc[g] >> 6) << 4;
    }
}

// The signed scale of group g (of 16) of a Q3_K block (scales: 12 bytes):
// six bits biased by 32, the low four in byte g % 8 (g < 8: low nibble,
// else high), the top two at bits 2 * (g / 4) of byte 8 + g % 4.
__device__ __forceinline__ int bg_q3_scale(const uint8_t *sc, int g)
{
    const int lo = (sc[g % 8] >> (g < 8 ? 0 : 4)) & 0xF;
    const int hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (lo | hi << 4) - 32;
}

// Dequantizes chunk c (elements 32c .. 32c+31) of a row into v.
template <int T> __device__ __forceinline__ void bg_deq32(const uint8_t *row, uint64_t c, float v[32]);

template <> __device__ __forceinline__ void bg_deq32<T_F32>(const uint8_t *row, uint64_t c, float v[32])
{
    const float *p = (const float *)row + c * 32;
#pragma unroll
    for (int j = 0; j < 32; j++)
        v[j] = p[j];
}
template <> __device__ __forceinline__ void bg_deq32<T_F16>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint16_t *p = BG_ALIGNED(const uint16_t *, row) + c * 32;
#pragma unroll
    for (int j = 0; j < 32; j++)
        v[j] = bg_h2f(p[j]);
}
template <> __device__ __forceinline__ void bg_deq32<T_BF16>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint16_t *p = BG_ALIGNED(const uint16_t *, row) + c * 32;
#pragma unroll
    for (int j = 0; j < 32; j++)
        v[j] = bg_bf2f(p[j]);
}
// x = d * (q - 8)
template <> __device__ __forceinline__ void bg_deq32<T_Q4_0>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + c * 18;
    const float d = bg_h2f(bg_ld16(b));
#pragma unroll
    for (int j = 0; j < 16; j++) {
        v[j] = (float)((b[2 + j] & 0xF) - 8) * d;
        v[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}
// x = d * q + m
template <> __device__ __forceinline__ void bg_deq32<T_Q4_1>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + c * 20;
    const float d = bg_h2f(bg_ld16(b)), m = bg_h2f(bg_ld16(b + 2));
#pragma unroll
    for (int j = 0; j < 16; j++) {
        v[j] = __fadd_rn(__fmul_rn((float)(b[4 + j] & 0xF), d), m);
        v[j + 16] = __fadd_rn(__fmul_rn((float)(b[4 + j] >> 4), d), m);
    }
}
// x = d * (q - 16), bit 4 of q[j] is bit j of qh
template <> __device__ __forceinline__ void bg_deq32<T_Q5_0>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + c * 22;
    const float d = bg_h2f(bg_ld16(b));
    const uint32_t qh = bg_ld32(b + 2);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int lo = (b[6 + j] & 0xF) | ((qh >> j) & 1) << 4;
        const int hi = (b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
        v[j] = (float)(lo - 16) * d;
        v[j + 16] = (float)(hi - 16) * d;
    }
}
template <> __device__ __forceinline__ void bg_deq32<T_Q5_1>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + c * 24;
    const float d = bg_h2f(bg_ld16(b)), m = bg_h2f(bg_ld16(b + 2));
    const uint32_t qh = bg_ld32(b + 4);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int lo = (b[8 + j] & 0xF) | ((qh >> j) & 1) << 4;
        const int hi = (b[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
        v[j] = __fadd_rn(__fmul_rn((float)lo, d), m);
        v[j + 16] = __fadd_rn(__fmul_rn((float)hi, d), m);
    }
}
template <> __device__ __forceinline__ void bg_deq32<T_Q8_0>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + c * 34;
    const float d = bg_h2f(bg_ld16(b));
#pragma unroll
    for (int j = 0; j < 32; j++)
        v[j] = (float)(int8_t)b[2 + j] * d;
}
template <> __device__ __forceinline__ void bg_deq32<T_IQ4_NL>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + c * 18;
    const float d = bg_h2f(bg_ld16(b));
#pragma unroll
    for (int j = 0; j < 16; j++) {
        v[j] = (float)bg_iq4_values[b[2 + j] & 0xF] * d;
        v[j + 16] = (float)bg_iq4_values[b[2 + j] >> 4] * d;
    }
}
// Sixteen groups of 16: x = d * (sc[g] & 15) * q - dmin * (sc[g] >> 4),
// q in 0..3; within each 128-element half, bits 2k..2k+1 of byte l of its
// 32 bytes of qs hold q[32k + l]. A chunk is one 2-bit field of 32 bytes.
template <> __device__ __forceinline__ void bg_deq32<T_Q2_K>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + (c / 8) * 84;
    const int g = 2 * (int)(c % 8); // the chunk's first group
    const float d = bg_h2f(bg_ld16(b + 80)), dmin = bg_h2f(bg_ld16(b + 82));
    const float ds0 = __fmul_rn(d, (float)(b[g] & 0xF)), dm0 = __fmul_rn(dmin, (float)(b[g] >> 4));
    const float ds1 = __fmul_rn(d, (float)(b[g + 1] & 0xF));
    const float dm1 = __fmul_rn(dmin, (float)(b[g + 1] >> 4));
    const uint8_t *qs = b + 16 + 32 * (c % 8 / 4);
    const int shift = 2 * (int)(c % 4);
#pragma unroll
    for (int j = 0; j < 32; j++)
        v[j] = __fsub_rn(__fmul_rn(j < 16 ? ds0 : ds1, (float)((qs[j] >> shift) & 3)),
                         j < 16 ? dm0 : dm1);
}
// Sixteen groups of 16: x = d * scale[g] * (q - 4), q in 0..7 (bg_q3_scale);
// the low two bits of q as in Q2_K, the third bit of q[e] is bit e / 32 of
// hmask[e % 32].
template <> __device__ __forceinline__ void bg_deq32<T_Q3_K>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + (c / 8) * 110;
    const uint8_t *hmask = b, *qs = b + 32 + 32 * (c % 8 / 4);
    const int g = 2 * (int)(c % 8);
    const float d = bg_h2f(bg_ld16(b + 108));
    const float ds0 = __fmul_rn(d, (float)bg_q3_scale(b + 96, g));
    const float ds1 = __fmul_rn(d, (float)bg_q3_scale(b + 96, g + 1));
    const int shift = 2 * (int)(c % 4), bit = (int)(c % 8);
#pragma unroll
    for (int j = 0; j < 32; j++) {
        const int q = ((qs[j] >> shift) & 3) | ((hmask[j] >> bit) & 1) << 2;
        v[j] = __fmul_rn(j < 16 ? ds0 : ds1, (float)(q - 4));
    }
}
// Eight groups of 32: x = d * sc[g] * q - dmin * mn[g]; within each
// 64-element chunk byte l holds q[l] (low nibble) and q[l + 32] (high).
template <> __device__ __forceinline__ void bg_deq32<T_Q4_K>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + (c / 8) * 144;
    const int g = (int)(c % 8);
    int sc, mn;
    bg_k_scale_min(b + 4, g, &sc, &mn);
    const float ds = __fmul_rn(bg_h2f(bg_ld16(b)), (float)sc);
    const float dm = __fmul_rn(bg_h2f(bg_ld16(b + 2)), (float)mn);
    const uint8_t *qs = b + 16 + 32 * (g / 2);
    const int shift = 4 * (g % 2);
#pragma unroll
    for (int j = 0; j < 32; j++)
        v[j] = __fsub_rn(__fmul_rn(ds, (float)((qs[j] >> shift) & 0xF)), dm);
}
// As Q4_K, bit 4 of q[e] is bit e / 32 of qh[e % 32].
template <> __device__ __forceinline__ void bg_deq32<T_Q5_K>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + (c / 8) * 176;
    const int g = (int)(c % 8);
    int sc, mn;
    bg_k_scale_min(b + 4, g, &sc, &mn);
    const float ds = __fmul_rn(bg_h2f(bg_ld16(b)), (float)sc);
    const float dm = __fmul_rn(bg_h2f(bg_ld16(b + 2)), (float)mn);
    const uint8_t *qh = b + 16, *qs = b + 48 + 32 * (g / 2);
    const int shift = 4 * (g % 2);
#pragma unroll
    for (int j = 0; j < 32; j++) {
        const int q = ((qs[j] >> shift) & 0xF) | ((qh[j] >> g) & 1) << 4;
        v[j] = __fsub_rn(__fmul_rn(ds, (float)q), dm);
    }
}
// Sixteen groups of 16: x = d * scales[g] * (q - 32); per 128-element
// half: low nibbles in 64 bytes of ql (q[l] low, q[l + 64] high), the top
// two bits of q[e] at bits 2 * (e / 32) of qh[e % 32].
template <> __device__ __forceinline__ void bg_deq32<T_Q6_K>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + (c / 8) * 210;
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    const float d = bg_h2f(bg_ld16(b + 208));
    const int e0 = 32 * (int)(c % 8); // first element in the block
    const int h = e0 / 128, el0 = e0 % 128;
    const float ds0 = __fmul_rn(d, (float)scales[e0 / 16]);
    const float ds1 = __fmul_rn(d, (float)scales[e0 / 16 + 1]);
#pragma unroll
    for (int j = 0; j < 32; j++) {
        const int el = el0 + j;
        const int lo = el < 64 ? ql[64 * h + el] & 0xF : ql[64 * h + el - 64] >> 4;
        const int hi = (qh[32 * h + el % 32] >> (2 * (el / 32))) & 3;
        v[j] = __fmul_rn(j < 16 ? ds0 : ds1, (float)((lo | hi << 4) - 32));
    }
}
// Eight groups of 32: x = d * (ls[g] - 32) * kvalues[q].
template <> __device__ __forceinline__ void bg_deq32<T_IQ4_XS>(const uint8_t *row, uint64_t c, float v[32])
{
    const uint8_t *b = row + (c / 8) * 136;
    const int g = (int)(c % 8);
    const float d = bg_h2f(bg_ld16(b));
    const int lo = (b[4 + g / 2] >> (4 * (g % 2))) & 0xF;
    const int hi = (bg_ld16(b + 2) >> (2 * g)) & 3;
    const float ds = __fmul_rn(d, (float)((lo | hi << 4) - 32));
    const uint8_t *qs = b + 8 + 16 * g;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        v[j] = __fmul_rn(ds, (float)bg_iq4_values[qs[j] & 0xF]);
        v[j + 16] = __fmul_rn(ds, (float)bg_iq4_values[qs[j] >> 4]);
    }
}

// Runs CALL(T) for the compile-time type matching a runtime id; ok is set
// false for a type without kernels.
#define BG_DISPATCH(type, ok, CALL)                                                            \
    do {                                                                                     \
        (ok) = true;                                                                         \
        switch (type) {                                                                      \
        case T_F32: CALL(T_F32); break;                                                      \
        case T_F16: CALL(T_F16); break;                                                      \
        case T_BF16: CALL(T_BF16); break;                                                    \
        case T_Q4_0: CALL(T_Q4_0); break;                                                    \
        case T_Q4_1: CALL(T_Q4_1); break;                                                    \
        case T_Q5_0: CALL(T_Q5_0); break;                                                    \
        case T_Q5_1: CALL(T_Q5_1); break;                                                    \
        case T_Q8_0: CALL(T_Q8_0); break;                                                    \
        case T_IQ4_NL: CALL(T_IQ4_NL); break;                                                \
        case T_Q2_K: CALL(T_Q2_K); break;                                                    \
        case T_Q3_K: CALL(T_Q3_K); break;                                                    \
        case T_Q4_K: CALL(T_Q4_K); break;                                                    \
        case T_Q5_K: CALL(T_Q5_K); break;                                                    \
        case T_Q6_K: CALL(T_Q6_K); break;                                                    \
        case T_IQ4_XS: CALL(T_IQ4_XS); break;                                                \
        default: (ok) = false; break;                                                        \
        }                                                                                    \
    } while (0)

// Entry points of the other translation units (one table in backend.cu).
extern "C" {
int bg_cuda_matmul(bg_gpu *g, uint32_t type, const void *d_w, uint64_t n_in, uint64_t n_out,
                   const float *d_x, size_t x_stride, const uint8_t *d_xq, float *d_y,
                   size_t y_stride, uint32_t n_tok);
int bg_cuda_matmul_multi(bg_gpu *g, const bg_gpu_proj *proj, uint32_t n_proj, uint64_t n_in,
                         const float *d_x, size_t x_stride, const uint8_t *d_xq, uint32_t n_tok);
int bg_cuda_matmul_swiglu(bg_gpu *g, uint32_t type, const void *d_wg, const void *d_wu,
                          uint64_t n_in, uint64_t n_out, const float *d_x, size_t x_stride,
                          float *d_h, size_t h_stride, uint32_t n_tok);
int bg_cuda_silu_mul(bg_gpu *g, float *d_g, const float *d_u, uint32_t n, size_t stride,
                     uint32_t n_tok);
int bg_cuda_add_rmsnorm(bg_gpu *g, float *d_x, const float *d_y, float *d_xn, const float *d_w,
                        uint32_t n, uint32_t n_rows, float eps, uint8_t *d_xq);
int bg_cuda_matmul_add_rmsnorm(bg_gpu *g, const bg_gpu_proj *p, uint64_t n_in, const float *d_a,
                               size_t a_stride, const uint8_t *d_aq, uint32_t n_tok, float *d_x,
                               float *d_xn, const float *d_norm_w, float eps, uint8_t *d_xq);
int bg_cuda_route(bg_gpu *g, const bg_gpu_proj *router, uint64_t n_in, const float *d_x,
                  const uint8_t *d_xq, uint32_t n_tok, uint32_t n_used, int32_t *d_chosen,
                  float *d_chosen_w, int32_t *d_groups);
int bg_cuda_moe(bg_gpu *g, const bg_gpu_moe_args *a, const float *d_xn, const uint8_t *d_xq,
                const void *d_gate, const void *d_up, const void *d_down,
                const int32_t *d_groups, float *d_h, float *d_slot_out,
                const bg_gpu_ffn_end *end);
int bg_cuda_expert_sum(bg_gpu *g, const bg_gpu_ffn_end *e, const float *d_slot, uint32_t n_used,
                       uint32_t n, uint32_t n_tok);
int bg_cuda_attention(bg_gpu *g, const bg_gpu_attn_args *a, float *d_q, float *d_kv,
                      float *d_gate, float *d_attn, const float *d_q_norm, const float *d_k_norm,
                      uint8_t *d_k_cache, uint8_t *d_v_cache, const uint32_t *d_tok_seq,
                      const uint32_t *d_tok_pos, uint8_t *d_attn_q, void *d_split);
int bg_cuda_deltanet(bg_gpu *g, const bg_gpu_deltanet_args *a, float *d_qkv, const float *d_z,
                     float *d_heads, const float *d_dt, const float *d_a,
                     const float *d_conv_w, const float *d_norm_w, float *d_conv, float *d_ssm,
                     float *d_attn, uint8_t *d_attn_q, const uint32_t *d_tok_seq);
}
