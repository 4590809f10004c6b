/* BRIGADE_CPU_ISA: capped at "scalar", the CPU chooses quant.c's reference
 * dots (the very functions, not another variant), no multi-row or rows
 * dots and no tiled products; a value that names no instruction set is refused where a
 * session starts, naming the value, not quietly taken as "all". */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "kernels.h"
#include "quant.h"

static void check_scalar_chosen(void)
{
    int n_dots = 0;
    for (int t = 0; t < BG_TYPE_COUNT; t++) {
        const bg_quant_ops *ops = bg_quant_ops_get((bg_type)t);
        if (!ops || !ops->dot)
            continue;
        n_dots++;
        CHECK(bg_kernel_dot((bg_type)t) == ops->dot, "type %d: not the scalar reference dot", t);
        CHECK(!bg_kernel_dot_multi((bg_type)t), "type %d: a multi-row dot under scalar", t);
        CHECK(!bg_kernel_dot_rows((bg_type)t), "type %d: a rows dot under scalar", t);
        CHECK(!bg_kernel_gemm((bg_type)t), "type %d: a tiled product under scalar", t);
        CHECK(bg_kernel_quantize_activations((bg_type)t) == ops->quantize_activations,
              "type %d: not the scalar activation coding", t);
    }
    CHECK(n_dots >= 13, "only %d types with a dot", n_dots);
}

static void check_names(void)
{
    static const struct {
        const char *value;
        bool valid;
        bg_cpu_isa cap;
    } cases[] = {
        {"scalar", true, BG_ISA_SCALAR}, {"avx2", true, BG_ISA_AVX2},
        {"avx512", true, BG_ISA_AVX512}, {"amx", true, BG_ISA_AMX},
        {"", true, BG_ISA_AMX},          {"AVX2", false, BG_ISA_AMX},
        {"avx", false, BG_ISA_AMX},      {"scalar ", false, BG_ISA_AMX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setenv("BRIGADE_CPU_ISA", cases[i].value, 1);
        bg_cpu_isa cap = BG_ISA_SCALAR;
        bool ok = bg_cpu_isa_cap(&cap);
        CHECK(ok == cases[i].valid && cap == cases[i].cap, "'%s': %s, cap %d", cases[i].value,
              ok ? "taken" : "refused", (int)cap);
    }
    unsetenv("BRIGADE_CPU_ISA");
    bg_cpu_isa cap = BG_ISA_SCALAR;
    CHECK(bg_cpu_isa_cap(&cap) && cap == BG_ISA_AMX, "unset: cap %d", (int)cap);
}

static void check_session_refuses(void)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/brigade-isa-%d.gguf", (int)getpid());
    brigade_error err;
    brigade_synth_options o = {.preset = "tiny-qwen3moe", .seed = 1};
    brigade_model *m = NULL;
    if (brigade_synth(path, &o, &err) || brigade_model_load(path, NULL, &m, &err)) {
        CHECK(0, "model: %s", err.message);
        remove(path);
        return;
    }
    setenv("BRIGADE_CPU_ISA", "avx9", 1);
    brigade_session *s = NULL;
    brigade_status st = brigade_session_new(m, NULL, &s, &err);
    CHECK(st == BRIGADE_ERR_ARG && !s, "avx9: status %d", (int)st);
    CHECK(st && strstr(err.message, "BRIGADE_CPU_ISA=avx9"), "message: %s", err.message);
    setenv("BRIGADE_CPU_ISA", "scalar", 1);
    st = brigade_session_new(m, NULL, &s, &err);
    CHECK(st == BRIGADE_OK && s, "scalar: %s", st ? err.message : "");
    brigade_session_free(s);
    brigade_model_free(m);
    remove(path);
}

int main(void)
{
    /* before the first kernel is asked for: the choice is made once */
    setenv("BRIGADE_CPU_ISA", "scalar", 1);
    check_scalar_chosen();
    check_names();
    check_session_refuses();
    return check_summary("test_cpu_isa");
}
