/* Helpers shared by the front-ends: argument parsing that rejects garbage
 * with a message, human-readable sizes, progress on stderr. */
#ifndef BRIGADE_CLI_H
#define BRIGADE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

bool cli_parse_u64(const char *flag, const char *text, uint64_t *out);
bool cli_parse_u32(const char *flag, const char *text, uint32_t *out);
/* A tensor type name ("q4_k", "F16"), as a GGUF type id; the parse
 * variant says on stderr when there is none. */
bool cli_type_from_name(const char *text, uint32_t *out);
bool cli_parse_type(const char *text, uint32_t *out);

/* A KV-cache type name (f16, f32, q8_0, q4_0). */
bool cli_parse_cache_type(const char *flag, const char *text, brigade_cache_type *out);

/* The GPU flags every engine command shares: -ngl N|auto (--n-gpu-layers),
 * --n-cpu-moe N, --gpu-budget SIZE. Returns 1 if flag (with value) was
 * taken, 0 if it is not a GPU flag or has no value, -1 on a bad value
 * (reported). */
int cli_parse_gpu_flag(const char *flag, const char *value, brigade_session_options *so);
#define CLI_GPU_USAGE                                                                      \
    "  -ngl, --n-gpu-layers N|auto  layers on the GPU (the last N and the output head;\n"   \
    "                            auto: as many as fit); needs a build with make CUDA=1\n"  \
    "  --n-cpu-moe N             routed experts of the first N layers stay on the CPU\n"    \
    "  --gpu-budget SIZE         plan as if the GPU had SIZE free (e.g. 24G)\n"
/* One line on stderr: what a session put on the GPU, planned and measured
 * memory; nothing for a CPU session. */
void cli_print_gpu(const brigade_session *session);

/* Online processor cores (the default thread count). */
uint32_t cli_cores(void);

/* The whole of a file ("-": standard input), NUL-terminated, in malloc'd
 * memory; *len excludes the NUL. NULL on failure with errno set, and
 * *not_opened (may be NULL) telling whether it could not even be opened. */
char *cli_read_file(const char *path, size_t *len, bool *not_opened);

/* "1.23 GiB" etc. into buf. */
const char *cli_format_bytes(uint64_t bytes, char *buf, unsigned size);

/* A progress line on stderr, redrawn at most a few times a second and only
 * when stderr is a terminal. */
typedef struct cli_progress {
    const char *label;
    double last_draw, start;
    int last_decile;
    bool drawn;
} cli_progress;

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_end(cli_progress *p);

#endif
