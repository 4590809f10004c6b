/* Starting the llama.cpp oracle in tests and benchmarks: errors only in the
 * log, no progress dots, CPU backends loaded from the pinned build. */
#ifndef BG_ORACLE_H
#define BG_ORACLE_H

#include <stdbool.h>
#include <stdio.h>

#include "ggml-backend.h"
#include "llama.h"

static inline bool oracle_no_progress(float progress, void *user)
{
    (void)progress;
    (void)user;
    return true;
}

static inline void oracle_quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static inline void oracle_init(void)
{
    llama_log_set(oracle_quiet_log, NULL);
    llama_backend_init();
    ggml_backend_load_all_from_path(ORACLE_LIB_DIR);
}

#endif
