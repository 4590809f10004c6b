// The CUDA implementation of the device interface (src/gpu.h): the
// context and stream, the one arena, copies, CUDA graphs, and the small
// element-wise kernels. The heavy kernels are in matmul.cu and
// attention.cu. Run on an H200 by scripts/gpu-check.sh (README, "CUDA").
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rows.cuh"

static int bg_check(bg_gpu *g, cudaError_t e, const char *what)
{
    return e == cudaSuccess ? 0 : bg_cuda_fail(g, e, what);
}

#ifndef BG_CUDA_ARCHS // the Makefile's CUDA_ARCHS
#define BG_CUDA_ARCHS "unknown"
#endif

// common.cuh's switches, set by gpu_init
bool bg_pdl = false;
bool bg_prefetch = false;
bool bg_debug = false;
bool bg_mma = false;
bool bg_mma_stage = true;
// Whether a kernel's last block may finish the work after it (the tails,
// and a decode step's attention and DeltaNet in one launch each): off with
// BRIGADE_CUDA_FUSE=0, which runs that work as launches of its own, for
// measuring what the fused tails cost or save.
static bool bg_fuse = true;

// Whether an environment switch is set to 0.
static bool env_zero(const char *name)
{
    const char *v = getenv(name);
    return v && !strcmp(v, "0");
}

// ------------------------------------------------------------- timeline

// BRIGADE_CUDA_TIMELINE=FILE: the steps that replay a graph for the
// TIMELINE_WARM + 1-th to TIMELINE_WARM + TIMELINE_REPLAYS-th time (of
// the first graph to get there; then of the next) note when each launch
// passed its wait (common.cuh): the graph's, then those the step makes
// before the host waits (the output head). FILE gets each launch's mean
// time, as the step runs, with programmatic dependent launch, where a
// profiler would take the kernels apart.
enum { TIMELINE_WARM = 4, TIMELINE_REPLAYS = 16, TIMELINE_SETTERS = 8 };

static bg_timeline_setter timeline_setters[TIMELINE_SETTERS];
static int n_timeline_setters;

// Called once by each translation unit as the program starts (common.cuh).
bool bg_timeline_register(bg_timeline_setter set)
{
    if (n_timeline_setters == TIMELINE_SETTERS)
        return false;
    timeline_setters[n_timeline_setters++] = set;
    return true;
}

// The sites of the launches while a capture is logged. Like the kernels'
// pointers to the records, one for the process: the timeline is for one
// session at a time (a bench, a run).
bool bg_launch_logging = false;
static const char **launch_log;
static uint32_t launch_log_n, launch_log_cap;
static bool launch_log_lost; // out of memory: the capture goes untimed

void bg_launch_note(const char *site)
{
    if (launch_log_n == launch_log_cap) {
        const uint32_t cap = launch_log_cap ? 2 * launch_log_cap : 256;
        const char **p = (const char **)realloc(launch_log, cap * sizeof *p);
        if (!p) {
            launch_log_lost = true;
            return;
        }
        launch_log = p, launch_log_cap = cap;
    }
    launch_log[launch_log_n++] = site;
}

// Points every translation unit's kernels at tl (NULL: off).
static void timeline_point(bg_gpu *g, bg_timeline *tl)
{
    for (int i = 0; i < n_timeline_setters; i++)
        timeline_setters[i](g->stream, tl);
}

// Marks the end of a timed replay's last launch.
__global__ void k_timeline_mark(void) { BG_KERNEL_ENTRY(); }

// Writes the timed steps (t: when each launch passed its wait, the
// step's n_sites launches and its end mark, TIMELINE_REPLAYS times; the
// launches named by sites) to the timeline's file: each launch's mean
// time, and the same summed by site.
static int timeline_write(bg_gpu *g, uint64_t key, const char *const *sites, uint32_t n_sites,
                          const unsigned long long *t)
{
    const uint32_t per = n_sites + 1;
    double *us = (double *)calloc(n_sites, sizeof *us);
    FILE *f = us ? fopen(g->timeline_path, "a") : NULL;
    if (!f) {
        snprintf(g->err, sizeof g->err, "BRIGADE_CUDA_TIMELINE: cannot write %s: %s",
                 g->timeline_path, us ? strerror(errno) : "out of memory");
        free(us);
        return -1;
    }
    double step = 0;
    for (uint32_t i = 0; i < n_sites; i++) {
        for (int r = 0; r < TIMELINE_REPLAYS; r++)
            us[i] += 1e-3 * (double)(t[(size_t)r * per + i + 1] - t[(size_t)r * per + i]);
        us[i] /= TIMELINE_REPLAYS;
        step += us[i];
    }
    fprintf(f, "## Timeline of a step of %u tokens: %u launches, %.1f us\n\n", (uint32_t)key,
            n_sites, step);
    fprintf(f, "Mean of %d steps after %d; a launch's time runs from when its first block "
               "passed its wait to when the next launch's did (the step: its graph's "
               "launches, then those until the host waits).\n\n",
            TIMELINE_REPLAYS, TIMELINE_WARM);
    fprintf(f, "| kernel @ site | launches | us | share |\n| --- | ---: | ---: | ---: |\n");
    for (uint32_t i = 0; i < n_sites; i++) {
        bool first = true; // the site's first launch: its row sums them all
        for (uint32_t j = 0; j < i && first; j++)
            first = strcmp(sites[j], sites[i]) != 0;
        if (!first)
            continue;
        uint32_t count = 0;
        double sum = 0;
        for (uint32_t j = i; j < n_sites; j++)
            if (!strcmp(sites[j], sites[i]))
                count++, sum += us[j];
        fprintf(f, "| %s | %u | %.1f | %.1f%% |\n", sites[i], count, sum,
                step > 0 ? 100 * sum / step : 0.0);
    }
    fprintf(f, "\n| # | kernel @ site | us |\n| ---: | --- | ---: |\n");
    for (uint32_t i = 0; i < n_sites; i++)
        fprintf(f, "| %u | %s | %.1f |\n", i, sites[i], us[i]);
    fprintf(f, "\n");
    free(us);
    if (fclose(f)) {
        snprintf(g->err, sizeof g->err, "BRIGADE_CUDA_TIMELINE: writing %s: %s",
                 g->timeline_path, strerror(errno));
        return -1;
    }
    return 0;
}

// Reads the records and writes the file, the step's sites being graph gr's
// launches, then the tail's.
static int timeline_finish(bg_gpu *g, const bg_gpu_graph *gr)
{
    unsigned long long n = 0;
    if (bg_check(g, cudaMemcpyAsync(&n, &g->timeline->n, sizeof n, cudaMemcpyDeviceToHost,
                                    g->stream),
                 "reading the timeline") ||
        bg_check(g, cudaStreamSynchronize(g->stream), "reading the timeline"))
        return -1;
    const uint32_t n_sites = gr->n_sites + g->timeline_n_tail;
    const uint64_t want = (uint64_t)(n_sites + 1) * TIMELINE_REPLAYS; // and the end marks
    if (n != want || want > BG_TIMELINE_CAP) {
        snprintf(g->err, sizeof g->err,
                 "BRIGADE_CUDA_TIMELINE: %llu launches noted in %d steps of %u (at most %d)",
                 n, TIMELINE_REPLAYS, n_sites, (int)BG_TIMELINE_CAP);
        return -1;
    }
    unsigned long long *t = (unsigned long long *)malloc(n * sizeof *t);
    const char **sites = (const char **)malloc(n_sites * sizeof *sites);
    int rc = 0;
    if (!t || !sites) {
        snprintf(g->err, sizeof g->err, "BRIGADE_CUDA_TIMELINE: out of memory");
        rc = -1;
    }
    rc = rc ? rc
            : bg_check(g, cudaMemcpyAsync(t, g->timeline->t, n * sizeof *t,
                                          cudaMemcpyDeviceToHost, g->stream),
                       "reading the timeline");
    rc = rc ? rc : bg_check(g, cudaStreamSynchronize(g->stream), "reading the timeline");
    if (!rc) {
        memcpy(sites, gr->sites, gr->n_sites * sizeof *sites);
        memcpy(sites + gr->n_sites, g->timeline_tail, g->timeline_n_tail * sizeof *sites);
        rc = timeline_write(g, gr->key, sites, n_sites, t);
    }
    free(t);
    free(sites);
    return rc;
}

// Ends a timed step (if one is open) before the host waits or copies: the
// end mark, the kernels pointed away, the launches since the graph kept
// as the step's tail (the same each step), and after the last timed step
// the file written.
static int timeline_close(bg_gpu *g)
{
    bg_gpu_graph *const gr = g->timeline_open;
    if (!gr)
        return 0;
    g->timeline_open = NULL;
    bg_launch_logging = false;
    BG_LAUNCH(1, 32, 0, g->stream, k_timeline_mark)();
    timeline_point(g, NULL);
    if (bg_cuda_launched(g, "the timeline's end mark"))
        return -1;
    const bool first = gr->replays == TIMELINE_WARM + 1;
    if (launch_log_lost) {
        snprintf(g->err, sizeof g->err, "BRIGADE_CUDA_TIMELINE: out of memory");
        return -1;
    }
    if ((first && launch_log_n > BG_TIMELINE_TAIL) ||
        (!first && launch_log_n != g->timeline_n_tail)) {
        snprintf(g->err, sizeof g->err,
                 "BRIGADE_CUDA_TIMELINE: %u launches after the graph, where the first "
                 "timed step had %u (at most %d)",
                 launch_log_n, g->timeline_n_tail, BG_TIMELINE_TAIL);
        return -1;
    }
    if (first) {
        memcpy(g->timeline_tail, launch_log, launch_log_n * sizeof *launch_log);
        g->timeline_n_tail = launch_log_n;
    }
    if (gr->replays < TIMELINE_WARM + TIMELINE_REPLAYS)
        return 0;
    g->timeline_key = UINT64_MAX; // the next graph may be timed
    return timeline_finish(g, gr);
}

// Launches replay gr; where the timeline is on and gr's turn has come,
// opens a timed step that timeline_close ends.
static int timeline_replay(bg_gpu *g, bg_gpu_graph *gr)
{
    const bool timed = gr->sites &&
                       (g->timeline_key == UINT64_MAX || g->timeline_key == gr->key) &&
                       gr->replays >= TIMELINE_WARM &&
                       gr->replays < TIMELINE_WARM + TIMELINE_REPLAYS;
    if (timed && g->timeline_key == UINT64_MAX) {
        g->timeline_key = gr->key;
        // the records' memory once a graph is timed, not at start
        if (!g->timeline && bg_check(g, cudaMalloc((void **)&g->timeline, sizeof *g->timeline),
                                     "allocating the timeline (BRIGADE_CUDA_TIMELINE)"))
            return -1;
        if (bg_check(g, cudaMemsetAsync(&g->timeline->n, 0, sizeof g->timeline->n, g->stream),
                     "clearing the timeline"))
            return -1;
    }
    gr->replays++;
    if (timed)
        timeline_point(g, g->timeline);
    if (bg_check(g, cudaGraphLaunch(gr->exec, g->stream), "launching a graph"))
        return -1;
    if (timed) {
        g->timeline_open = gr;
        bg_launch_logging = true;
        launch_log_n = 0, launch_log_lost = false;
    }
    return 0;
}

// Programmatic dependent launch is used when the card has it (sm_90 and
// later), BRIGADE_CUDA_PDL is not 0, and this runtime runs two such
// kernels in order, eagerly and inside a captured graph: the probe counts
// to 4 on a device int. Any error turns it off (and is cleared).
__global__ void k_pdl_probe(int *n)
{
    BG_KERNEL_ENTRY();
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *n += 1;
}

static bool pdl_works(cudaStream_t stream)
{
    int *d_n = NULL, n = 0;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    bool ok = cudaMalloc((void **)&d_n, sizeof *d_n) == cudaSuccess &&
              cudaMemsetAsync(d_n, 0, sizeof *d_n, stream) == cudaSuccess;
    for (int i = 0; ok && i < 2; i++) {
        BG_LAUNCH(1, 32, 0, stream, k_pdl_probe)(d_n);
        ok = cudaGetLastError() == cudaSuccess;
    }
    ok = ok && cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        for (int i = 0; i < 2; i++)
            BG_LAUNCH(1, 32, 0, stream, k_pdl_probe)(d_n);
        ok = cudaGetLastError() == cudaSuccess;
        ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok;
    }
    ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
         cudaGraphLaunch(exec, stream) == cudaSuccess &&
         cudaMemcpyAsync(&n, d_n, sizeof n, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
         cudaStreamSynchronize(stream) == cudaSuccess && n == 4;
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaFree(d_n);
    cudaGetLastError(); // a refused attribute is not this session's error
    return ok;
}

static int gpu_init(int device, bg_gpu **out, char *desc, size_t desc_cap, char *msg,
                    size_t msg_cap)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= device) {
        snprintf(msg, msg_cap, "no CUDA device %d (%s)", device,
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return -1;
    }
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
        snprintf(msg, msg_cap, "device %d: %s", device, cudaGetErrorString(e));
        return -1;
    }
    // a card the build has no device code for (nor PTX it can compile)
    // fails every launch: say so once, here, with the way out
    cudaFuncAttributes fa;
    if ((e = cudaFuncGetAttributes(&fa, k_pdl_probe)) != cudaSuccess) {
        snprintf(msg, msg_cap,
                 "device %d (%s, sm_%d%d): this build has no device code for it (%s); "
                 "it was built for CUDA_ARCHS=\"%s\": rebuild with make CUDA=1 CUDA_ARCHS=%d%d",
                 device, prop.name, prop.major, prop.minor, cudaGetErrorString(e),
                 BG_CUDA_ARCHS, prop.major, prop.minor);
        cudaGetLastError();
        return -1;
    }
    bg_gpu *g = (bg_gpu *)calloc(1, sizeof *g);
    if (!g) {
        snprintf(msg, msg_cap, "out of memory");
        return -1;
    }
    g->device = device;
    if ((e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(msg, msg_cap, "creating a stream: %s", cudaGetErrorString(e));
        free(g);
        return -1;
    }
    if ((e = cudaEventCreateWithFlags(&g->uploaded, cudaEventDisableTiming)) != cudaSuccess) {
        snprintf(msg, msg_cap, "creating an event: %s", cudaGetErrorString(e));
        cudaStreamDestroy(g->stream);
        free(g);
        return -1;
    }
    g->timeline_key = UINT64_MAX;
    const char *timeline = getenv("BRIGADE_CUDA_TIMELINE");
    g->timeline_path = timeline && *timeline ? timeline : NULL;
    bg_debug = getenv("BRIGADE_CUDA_DEBUG") && !env_zero("BRIGADE_CUDA_DEBUG");
    bg_fuse = !env_zero("BRIGADE_CUDA_FUSE");
    bg_pdl = prop.major >= 9 && !env_zero("BRIGADE_CUDA_PDL") && !bg_debug;
    if (bg_pdl)
        bg_pdl = pdl_works(g->stream);
    bg_prefetch = bg_pdl && !env_zero("BRIGADE_CUDA_PREFETCH");
    const bool mma_wanted = prop.major >= 8 && !env_zero("BRIGADE_CUDA_MMA");
    bg_mma = mma_wanted && bg_cuda_mma_works(g->stream);
    bg_mma_stage = !env_zero("BRIGADE_CUDA_MMA_STAGE");
    snprintf(desc, desc_cap, "%s (sm_%d%d, %.1f GiB%s%s%s%s)", prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / 1073741824.0,
             bg_pdl ? bg_prefetch ? ", programmatic dependent launch, L2 prefetch"
                                  : ", programmatic dependent launch"
                    : "",
             bg_mma        ? bg_mma_stage ? ", int8 tensor cores, staged" : ", int8 tensor cores"
             : mma_wanted ? ", int8 tensor cores off: their check failed"
                          : "",
             bg_debug ? ", debug: each launch waited for" : "",
             bg_fuse ? "" : ", fused tails off");
    *out = g;
    return 0;
}

static void gpu_destroy(bg_gpu *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    g->timeline_open = NULL; // a step left open is not written
    bg_launch_logging = false;
    if (g->capturing) {
        cudaGraph_t graph;
        cudaStreamEndCapture(g->stream, &graph);
        if (graph)
            cudaGraphDestroy(graph);
    }
    for (int i = 0; i < g->n_graphs; i++) {
        cudaGraphExecDestroy(g->graphs[i].exec);
        free(g->graphs[i].sites);
    }
    cudaStreamSynchronize(g->stream);
    cudaFree(g->timeline);
    cudaFree(g->arena);
    cudaEventDestroy(g->uploaded);
    cudaStreamDestroy(g->stream);
    free(g);
}

static const char *gpu_error(const bg_gpu *g) { return g->err[0] ? g->err : "unknown error"; }

static int gpu_mem_info(bg_gpu *g, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    if (bg_check(g, cudaMemGetInfo(&f, &t), "cudaMemGetInfo"))
        return -1;
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

static int gpu_alloc(bg_gpu *g, uint64_t bytes, void **d_out)
{
    if (g->arena) {
        snprintf(g->err, sizeof g->err, "the arena is allocated once");
        return -1;
    }
    if (bg_check(g, cudaMalloc(&g->arena, bytes ? bytes : 1), "cudaMalloc"))
        return -1;
    *d_out = g->arena;
    return 0;
}

// A page-locked source is read when the stream reaches the copy, maybe
// after the caller moved on: the event marks how far wait_uploads waits.
static int gpu_upload(bg_gpu *g, void *d_dst, const void *src, uint64_t bytes)
{
    if (bg_check(g, cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, g->stream),
                 "copy to the device"))
        return -1;
    return bg_check(g, cudaEventRecord(g->uploaded, g->stream), "marking a copy");
}

static int gpu_wait_uploads(bg_gpu *g)
{
    return bg_check(g, cudaEventSynchronize(g->uploaded), "a copy to the device");
}

static int gpu_download(bg_gpu *g, void *dst, const void *d_src, uint64_t bytes)
{
    if (timeline_close(g))
        return -1;
    if (bg_check(g, cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, g->stream),
                 "copy from the device"))
        return -1;
    return bg_check(g, cudaStreamSynchronize(g->stream), "the device's work");
}

static int gpu_host_alloc(bg_gpu *g, uint64_t bytes, void **out)
{
    return bg_check(g, cudaMallocHost(out, bytes), "allocating locked host memory");
}

static void gpu_host_free(void *host) { cudaFreeHost(host); }

static int gpu_download_async(bg_gpu *g, void *dst, const void *d_src, uint64_t bytes)
{
    if (timeline_close(g))
        return -1;
    return bg_check(g, cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, g->stream),
                    "copy from the device");
}

static int gpu_zero(bg_gpu *g, void *d_dst, uint64_t bytes)
{
    return bg_check(g, cudaMemsetAsync(d_dst, 0, bytes, g->stream), "cudaMemset");
}

static int gpu_set_scratch(bg_gpu *g, void *d_scratch, uint64_t bytes)
{
    if (!d_scratch || bytes < BG_GPU_COUNTER_BYTES) {
        snprintf(g->err, sizeof g->err, "scratch of %llu bytes: the counters need %u",
                 (unsigned long long)bytes, BG_GPU_COUNTER_BYTES);
        return -1;
    }
    g->counters = bg_fuse ? (int *)d_scratch : NULL; // NULL: every fused path off
    g->scratch = (uint8_t *)d_scratch + BG_GPU_COUNTER_BYTES;
    g->scratch_bytes = bytes - BG_GPU_COUNTER_BYTES;
    return bg_check(g, cudaMemsetAsync(d_scratch, 0, BG_GPU_COUNTER_BYTES, g->stream),
                    "clearing the counters");
}

static int gpu_sync(bg_gpu *g)
{
    if (timeline_close(g))
        return -1;
    return bg_check(g, cudaStreamSynchronize(g->stream), "the device's work");
}

static bool gpu_supports(uint32_t type)
{
    switch (type) {
    case T_F32: case T_F16: case T_BF16: case T_Q4_0: case T_Q4_1: case T_Q5_0: case T_Q5_1:
    case T_Q8_0: case T_IQ4_NL: case T_Q2_K: case T_Q3_K: case T_Q4_K: case T_Q5_K: case T_Q6_K:
    case T_IQ4_XS:
        return true;
    default:
        return false;
    }
}

// ------------------------------------------------------------ small ops

// One block per row (yq: the rows coded, or NULL).
__global__ void k_rmsnorm(float *y, size_t ys, const float *x, size_t xs, const float *w,
                          uint32_t n, float eps, uint8_t *yq)
{
    BG_KERNEL_ENTRY();
    const size_t r = blockIdx.x;
    bg_block_norm_row(x + r * xs, NULL, NULL, y + r * ys, w, n, eps,
                      yq ? yq + r * bg_code_row_bytes(n) : NULL);
}

// One block per row: x += y, then xn = rmsnorm(x) * w (xq: coded, or NULL).
__global__ void k_add_rmsnorm(float *x, const float *y, float *xn, const float *w, uint32_t n,
                              float eps, uint8_t *xq)
{
    BG_KERNEL_ENTRY();
    bg_block_add_rmsnorm(x, y, xn, w, n, eps, xq, blockIdx.x);
}

extern "C" int bg_cuda_add_rmsnorm(bg_gpu *g, float *d_x, const float *d_y, float *d_xn,
                                   const float *d_w, uint32_t n, uint32_t n_rows, float eps,
                                   uint8_t *d_xq)
{
    if (!n_rows)
        return 0;
    if (bg_cuda_codes_ok(g, "add and rmsnorm", d_xq, n, d_xn, n))
        return -1;
    BG_LAUNCH(n_rows, 256, 0, g->stream, k_add_rmsnorm)(d_x, d_y, d_xn, d_w, n, eps, d_xq);
    return bg_cuda_launched(g, "add and rmsnorm");
}

static int gpu_rmsnorm(bg_gpu *g, float *d_y, size_t y_stride, const float *d_x,
                       size_t x_stride, const float *d_w, uint32_t n, uint32_t n_rows, float eps,
                       uint8_t *d_yq)
{
    if (!n_rows)
        return 0;
    if (bg_cuda_codes_ok(g, "rmsnorm", d_yq, n, d_y, y_stride))
        return -1;
    BG_LAUNCH(n_rows, 256, 0, g->stream, k_rmsnorm)(d_y, y_stride, d_x, x_stride, d_w, n, eps,
                                                    d_yq);
    return bg_cuda_launched(g, "rmsnorm");
}

__global__ void k_silu_mul(float *gate, const float *up, uint32_t n, size_t stride,
                           uint32_t n_rows)
{
    BG_KERNEL_ENTRY();
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (uint64_t)n * n_rows)
        return;
    const size_t at = (size_t)(i / n) * stride + i % n;
    gate[at] = bg_silu(gate[at]) * up[at];
}

extern "C" int bg_cuda_silu_mul(bg_gpu *g, float *d_g, const float *d_u, uint32_t n,
                                size_t stride, uint32_t n_tok)
{
    const uint64_t total = (uint64_t)n * n_tok;
    if (!total)
        return 0;
    BG_LAUNCH((unsigned)((total + 255) / 256), 256, 0, g->stream, k_silu_mul)(d_g, d_u, n, stride, n_tok);
    return bg_cuda_launched(g, "silu");
}

// expert_sum (gpu.h), one block per token.
__global__ void k_expert_sum(const bg_gpu_ffn_end e, const float *slot, uint32_t n_used,
                             uint32_t n)
{
    BG_KERNEL_ENTRY();
    bg_block_ffn_end(e, slot, n_used, n, blockIdx.x);
}

extern "C" int bg_cuda_expert_sum(bg_gpu *g, const bg_gpu_ffn_end *e, const float *d_slot,
                                  uint32_t n_used, uint32_t n, uint32_t n_tok)
{
    if (!n_tok)
        return 0;
    if (bg_cuda_codes_ok(g, "expert sum", e->d_norm_w ? e->d_xq : NULL, n, e->d_xn, n))
        return -1;
    BG_LAUNCH(n_tok, 256, 0, g->stream, k_expert_sum)(*e, d_slot, n_used, n);
    return bg_cuda_launched(g, "expert sum");
}

// --------------------------------------------------------------- graphs

static int gpu_graph_begin(bg_gpu *g, uint64_t key, bool *replay)
{
    *replay = false;
    if (timeline_close(g))
        return -1;
    if (bg_debug)
        return 1; // eagerly, each launch checked
    for (int i = 0; i < g->n_graphs; i++)
        if (g->graphs[i].key == key) {
            *replay = true;
            return 0;
        }
    if (g->n_graphs == BG_GPU_MAX_GRAPHS)
        return 1; // no room: the caller runs eagerly
    if (bg_check(g, cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal),
                 "starting a graph capture"))
        return -1;
    g->capturing = true;
    g->capture_key = key;
    bg_launch_logging = g->timeline_path != NULL;
    launch_log_n = 0, launch_log_lost = false;
    return 0;
}

// Launches the graph for key: the one just captured (instantiated first)
// or the one replayed.
static int gpu_graph_end(bg_gpu *g, uint64_t key, uint32_t *n_nodes)
{
    if (!g->capturing) {
        for (int i = 0; i < g->n_graphs; i++)
            if (g->graphs[i].key == key)
                return timeline_replay(g, &g->graphs[i]);
        snprintf(g->err, sizeof g->err, "no graph for batch size %llu", (unsigned long long)key);
        return -1;
    }
    g->capturing = false;
    bg_launch_logging = false;
    cudaGraph_t graph = NULL;
    if (bg_check(g, cudaStreamEndCapture(g->stream, &graph), "ending a graph capture"))
        return -1;
    size_t nodes = 0;
    if (cudaGraphGetNodes(graph, NULL, &nodes) == cudaSuccess)
        *n_nodes = (uint32_t)nodes;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (bg_check(g, e, "instantiating a graph"))
        return -1;
    bg_gpu_graph gr = {key, exec, NULL, 0, 0};
    if (g->timeline_path && !launch_log_lost && launch_log_n &&
        (gr.sites = (const char **)malloc(launch_log_n * sizeof *gr.sites))) {
        memcpy(gr.sites, launch_log, launch_log_n * sizeof *gr.sites);
        gr.n_sites = launch_log_n;
    }
    g->graphs[g->n_graphs++] = gr;
    return bg_check(g, cudaGraphLaunch(exec, g->stream), "launching a graph");
}

// In gpu.h's order (C++17 has no designated initializers).
static const bg_gpu_api api = {
    gpu_init, // init
    gpu_destroy, // destroy
    gpu_error, // error
    gpu_mem_info, // mem_info
    gpu_alloc, // alloc
    gpu_upload, // upload
    gpu_wait_uploads, // wait_uploads
    gpu_download, // download
    gpu_download_async, // download_async
    gpu_zero, // zero
    gpu_host_alloc, // host_alloc
    gpu_host_free, // host_free
    gpu_set_scratch, // set_scratch
    gpu_sync, // sync
    gpu_supports, // supports
    bg_cuda_matmul, // matmul
    bg_cuda_matmul_multi, // matmul_multi
    bg_cuda_matmul_swiglu, // matmul_swiglu
    gpu_rmsnorm, // rmsnorm
    bg_cuda_add_rmsnorm, // add_rmsnorm
    bg_cuda_matmul_add_rmsnorm, // matmul_add_rmsnorm
    bg_cuda_attention, // attention
    bg_cuda_deltanet, // deltanet
    bg_cuda_route, // route
    bg_cuda_moe, // moe
    bg_cuda_expert_sum, // expert_sum
    bg_cuda_silu_mul, // silu_mul
    gpu_graph_begin, // graph_begin
    gpu_graph_end, // graph_end
};

extern "C" const bg_gpu_api *bg_gpu_api_get(void) { return &api; }
