#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brigade.h"

bool cli_parse_u64(const char *flag, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-') {
        fprintf(stderr, "%s: '%s' is not a non-negative integer\n", flag, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_u32(const char *flag, const char *text, uint32_t *out)
{
    uint64_t v;
    if (!cli_parse_u64(flag, text, &v))
        return false;
    if (v > UINT32_MAX) {
        fprintf(stderr, "%s: %s is too large\n", flag, text);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

bool cli_type_from_name(const char *text, uint32_t *out)
{
    for (uint32_t t = 0; t < 256; t++) {
        const char *name = brigade_type_name(t);
        if (!name)
            continue;
        const char *a = name, *b = text;
        while (*a && *b && ((*a | 32) == (*b | 32)))
            a++, b++;
        if (!*a && !*b) {
            *out = t;
            return true;
        }
    }
    return false;
}

bool cli_parse_type(const char *text, uint32_t *out)
{
    if (cli_type_from_name(text, out))
        return true;
    fprintf(stderr, "unknown tensor type '%s'\n", text);
    return false;
}

bool cli_parse_cache_type(const char *flag, const char *text, brigade_cache_type *out)
{
    if (brigade_cache_type_from_name(text, out))
        return true;
    fprintf(stderr, "%s: unknown cache type '%s' (f16, f32, q8_0, q4_0)\n", flag, text);
    return false;
}

uint32_t cli_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

const char *cli_format_bytes(uint64_t bytes, char *buf, unsigned size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, size, "%.2f %s", v, units[u]);
    return buf;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total)
{
    double t = now_seconds();
    if (p->start == 0)
        p->start = t;
    double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    bool tty = isatty(STDERR_FILENO);
    /* A terminal gets one redrawn line; a log gets a line per 10%. */
    if (tty ? (t - p->last_draw < 0.2 && done < total) : (int)(pct / 10) <= p->last_decile)
        return;
    p->last_draw = t;
    p->last_decile = (int)(pct / 10);
    char a[32], b[32];
    fprintf(stderr, "%s%s: %5.1f%%  %s / %s  %.0fs%s", tty ? "\r" : "", p->label, pct,
            cli_format_bytes(done, a, sizeof a), cli_format_bytes(total, b, sizeof b),
            t - p->start, tty ? "" : "\n");
    p->drawn = tty;
}

void cli_progress_end(cli_progress *p)
{
    if (p->drawn)
        fputc('\n', stderr);
    p->drawn = false;
}

char *cli_read_file(const char *path, size_t *len, bool *not_opened)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (not_opened)
        *not_opened = f == NULL;
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
        n += got;
        if (n == cap - 1) {
            char *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap *= 2) : NULL;
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    int read_errno = ferror(f) ? errno : 0;
    if (f != stdin)
        fclose(f);
    if (!buf || read_errno) {
        free(buf);
        errno = buf ? read_errno : ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int cli_parse_gpu_flag(const char *flag, const char *value, brigade_session_options *so)
{
    if (!strcmp(flag, "-ngl") || !strcmp(flag, "--n-gpu-layers") || !strcmp(flag, "--gpu-layers")) {
        if (!value)
            return 0;
        if (!strcmp(value, "auto")) {
            so->n_gpu_layers = BRIGADE_NGL_AUTO;
            return 1;
        }
        uint32_t n;
        if (!cli_parse_u32(flag, value, &n) || n > INT32_MAX)
            return -1;
        so->n_gpu_layers = (int32_t)n;
        return 1;
    }
    if (!strcmp(flag, "--n-cpu-moe") || !strcmp(flag, "-ncmoe")) {
        if (!value)
            return 0;
        return cli_parse_u32(flag, value, &so->n_cpu_moe) ? 1 : -1;
    }
    if (!strcmp(flag, "--gpu-budget")) {
        if (!value)
            return 0;
        if (!brigade_parse_size(value, &so->gpu_budget) || !so->gpu_budget) {
            fprintf(stderr, "%s: '%s' is not a size (e.g. 24G, 16384M)\n", flag, value);
            return -1;
        }
        return 1;
    }
    return 0;
}

void cli_print_gpu(const brigade_session *session)
{
    brigade_gpu_report r;
    brigade_session_gpu(session, &r);
    if (!r.active)
        return;
    const double G = 1073741824.0;
    fprintf(stderr,
            "gpu: %s: %u layers on the GPU, routed experts of %u on the CPU, %u tensors; "
            "arena %.3f GiB (weights %.3f, caches %.3f, scratch %.3f); planned %.3f GiB "
            "(%.3f GiB of it runtime overhead), measured %.3f GiB, runtime %.3f GiB, "
            "free %.2f of %.2f GiB before",
            r.device, r.n_gpu_layers, r.n_cpu_moe_layers, r.n_tensors, r.arena_bytes / G,
            r.weights_bytes / G, r.state_bytes / G, r.scratch_bytes / G, r.planned_bytes / G,
            r.overhead_bytes / G, r.measured_bytes / G, r.runtime_bytes / G,
            r.free_before / G, r.total / G);
    if (r.decode_kernels)
        fprintf(stderr, "; a decode step's graph: %u kernels", r.decode_kernels);
    fprintf(stderr, "\n");
}
