/* Quantization mixes and the catalogue against llama.cpp's quantizer.
 *
 * For every catalogue geometry (full size, as a sparse BF16 file that costs
 * no disk) and two tiny presets, llama_model_quantize in dry-run mode says
 * which type it would give each tensor for each file type. brigade must give
 * the same types (bg_mix through `synth --mix`, and the catalogue model),
 * and the same total size (llama.cpp prints it in MiB to two decimals). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"

/* ---------------------------------------------------- llama.cpp's log */

typedef struct decided {
    char name[96];
    char type[16];
} decided;

static char line[1024];
static size_t line_len;
static decided *seen;
static size_t n_seen, cap_seen;
static double quant_mib;

/* "[  12/ 733] blk.0.attn_qkv.weight - [ 2048, 8192, 1, 1], type = bf16, size = 32.000 MiB
 *  -> 13.125 MiB (q6_K)" or, unchanged, "... type = f32, size = 0.008 MiB". */
static void parse_line(const char *l)
{
    const char *p;
    if ((p = strstr(l, "quant size  =")) != NULL) {
        sscanf(p, "quant size  = %lf", &quant_mib);
        return;
    }
    const char *close = strchr(l, ']'), *dash = strstr(l, " - [");
    const char *type = strstr(l, "type = ");
    if (l[0] != '[' || !close || !dash || !type || dash < close)
        return;
    if (n_seen == cap_seen) {
        cap_seen = cap_seen ? 2 * cap_seen : 1024;
        seen = realloc(seen, cap_seen * sizeof *seen);
    }
    decided *d = &seen[n_seen++];
    const char *name = close + 1;
    while (*name == ' ')
        name++;
    size_t len = (size_t)(dash - name);
    while (len && name[len - 1] == ' ')
        len--;
    snprintf(d->name, sizeof d->name, "%.*s", (int)len, name);
    const char *arrow = strstr(l, "-> ");
    const char *paren = arrow ? strchr(arrow, '(') : NULL;
    if (paren)
        sscanf(paren + 1, "%15[^)]", d->type);
    else
        sscanf(type + 7, " %15[^,]", d->type);
}

static void capture(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)user;
    for (const char *c = text; *c; c++) {
        if (*c == '\n') {
            line[line_len] = 0;
            parse_line(line);
            line_len = 0;
        } else if (line_len + 1 < sizeof line) {
            line[line_len++] = *c;
        }
    }
}

static bool oracle_dry_run(const char *path, brigade_ftype ftype)
{
    n_seen = 0;
    line_len = 0;
    quant_mib = -1;
    llama_log_set(capture, NULL);
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = (enum llama_ftype)ftype;
    qp.nthread = 1;
    qp.dry_run = true;
    uint32_t rc = llama_model_quantize(path, "/dev/null", &qp);
    oracle_init(); /* back to the quiet log */
    return rc == 0;
}

static const decided *oracle_type(const char *name)
{
    for (size_t i = 0; i < n_seen; i++)
        if (strcmp(seen[i].name, name) == 0)
            return &seen[i];
    return NULL;
}

/* --------------------------------------------------------- comparisons */

/* Every tensor of a brigade file has the type llama.cpp chose; returns the
 * data bytes. */
static uint64_t compare_file(const brigade_gguf *f, const char *what)
{
    uint64_t total = 0;
    int64_t n = brigade_gguf_tensor_count(f), wrong = 0;
    CHECK((size_t)n == n_seen, "%s: %lld tensors, llama.cpp listed %zu", what, (long long)n,
          n_seen);
    for (int64_t i = 0; i < n; i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        const decided *d = oracle_type(t->name);
        bool same = d && strcmp(d->type, brigade_type_name(t->type)) == 0;
        if (!same && wrong++ < 5)
            CHECK(same, "%s: %s is %s, llama.cpp makes it %s", what, t->name,
                  brigade_type_name(t->type), d ? d->type : "(not listed)");
        total += t->n_bytes;
    }
    CHECK(wrong == 0, "%s: %lld tensors of another type than llama.cpp's", what, (long long)wrong);
    double mib = (double)total / 1048576.0;
    CHECK(fabs(mib - quant_mib) <= 0.0051, "%s: %.4f MiB of tensors, llama.cpp %.2f MiB", what, mib,
          quant_mib);
    return total;
}

static const brigade_ftype ftypes[] = {
    BRIGADE_FTYPE_Q4_0,   BRIGADE_FTYPE_Q4_1,   BRIGADE_FTYPE_Q5_0,   BRIGADE_FTYPE_Q5_1,
    BRIGADE_FTYPE_Q8_0,   BRIGADE_FTYPE_Q2_K,   BRIGADE_FTYPE_Q3_K_S, BRIGADE_FTYPE_Q3_K_M,
    BRIGADE_FTYPE_Q3_K_L, BRIGADE_FTYPE_Q4_K_S, BRIGADE_FTYPE_Q4_K_M, BRIGADE_FTYPE_Q5_K_S,
    BRIGADE_FTYPE_Q5_K_M, BRIGADE_FTYPE_Q6_K,   BRIGADE_FTYPE_F16,
};

static void check_geometry(const char *preset, bool in_catalogue, const char *dir)
{
    char src[512], mixed[512];
    snprintf(src, sizeof src, "%s/catalogue-%s-bf16.gguf", dir, preset);
    snprintf(mixed, sizeof mixed, "%s/catalogue-%s-mix.gguf", dir, preset);
    brigade_error err;
    brigade_synth_options so = {.preset = preset, .seed = 1, .sparse = true, .mix = true,
                                .ftype = BRIGADE_FTYPE_BF16};
    CHECK(brigade_synth(src, &so, &err) == BRIGADE_OK, "%s: %s", preset, err.message);
    for (size_t k = 0; k < sizeof ftypes / sizeof *ftypes; k++) {
        const char *fname = brigade_ftype_name(ftypes[k]);
        char what[128];
        snprintf(what, sizeof what, "%s %s", preset, fname);
        if (!oracle_dry_run(src, ftypes[k])) {
            CHECK(false, "%s: llama.cpp's dry run failed", what);
            continue;
        }
        /* the mix as synth writes it */
        so.ftype = ftypes[k];
        brigade_gguf *f = NULL;
        CHECK(brigade_synth(mixed, &so, &err) == BRIGADE_OK, "%s: %s", what, err.message);
        CHECK(brigade_gguf_open(mixed, NULL, &f, &err) == BRIGADE_OK, "%s: %s", what, err.message);
        uint64_t file_total = f ? compare_file(f, what) : 0;
        brigade_gguf_close(f);
        remove(mixed);
        so.ftype = BRIGADE_FTYPE_BF16;
        /* the catalogue's model of the same file type */
        if (!in_catalogue)
            continue;
        char spec[96];
        snprintf(spec, sizeof spec, "%s:%s", preset, fname);
        brigade_model *m = NULL;
        CHECK(brigade_catalogue_model(spec, &m, &err) == BRIGADE_OK, "%s: %s", spec, err.message);
        if (!m)
            continue;
        snprintf(what, sizeof what, "catalogue %s", spec);
        compare_file(brigade_model_file(m), what);
        CHECK(brigade_model_weight_bytes(m) == file_total,
              "%s: %llu weight bytes, the synth file has %llu", spec,
              (unsigned long long)brigade_model_weight_bytes(m), (unsigned long long)file_total);
        brigade_session *s = NULL;
        CHECK(brigade_session_new(m, NULL, &s, &err) != BRIGADE_OK && !s,
              "%s: a catalogue model must not be evaluated", spec);
        brigade_model_free(m);
    }
    /* BF16 itself: the catalogue's original is the synth source, byte for byte */
    if (in_catalogue) {
        char spec[96];
        snprintf(spec, sizeof spec, "%s:BF16", preset);
        brigade_model *m = NULL, *file = NULL;
        CHECK(brigade_catalogue_model(spec, &m, &err) == BRIGADE_OK, "%s: %s", spec, err.message);
        CHECK(brigade_model_load(src, NULL, &file, &err) == BRIGADE_OK, "%s: %s", src, err.message);
        if (m && file)
            CHECK(brigade_model_weight_bytes(m) == brigade_model_weight_bytes(file) &&
                      brigade_gguf_file_size(brigade_model_file(m)) ==
                          brigade_gguf_file_size(brigade_model_file(file)),
                  "%s: catalogue and file sizes differ", spec);
        brigade_model_free(m);
        brigade_model_free(file);
    }
    remove(src);
}

int main(void)
{
    oracle_init();
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    size_t n;
    const brigade_catalogue_entry *e = brigade_catalogue(&n);
    for (size_t i = 0; i < n; i++)
        check_geometry(e[i].name, true, dir);
    check_geometry("tiny-qwen35moe", false, dir);
    check_geometry("tiny-qwen3moe", false, dir);
    /* a spec outside the catalogue is refused with the list */
    brigade_model *m = NULL;
    brigade_error err;
    CHECK(brigade_catalogue_model("qwen9-1t:Q4_K_M", &m, &err) == BRIGADE_ERR_ARG && !m &&
              strstr(err.message, "qwen3.6-35b-a3b"),
          "an unknown catalogue name must be refused with the known ones");
    CHECK(brigade_catalogue_model("qwen3.6-35b-a3b:Q3_K_XL", &m, &err) == BRIGADE_ERR_ARG && !m,
          "an unknown quantization must be refused");
    free(seen);
    return check_summary("oracle_catalogue");
}
