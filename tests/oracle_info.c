/* `brigade info` against the oracle: for synthetic models and llama.cpp's
 * vocabulary fixtures, every figure `info --json` prints (format fields,
 * metadata keys and values, tensor names, types, shapes, offsets and bytes,
 * tokenizer counts and special ids, parameter count and weight bytes) must
 * equal what ggml's GGUF reader and llama.cpp's loader report. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

static const char *brigade_bin(void)
{
    const char *b = getenv("BRIGADE");
    return b ? b : "build/brigade";
}

static char *run_capture(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (cap - n < 2) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    int rc = pclose(p);
    if (buf)
        buf[n] = 0;
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static json_t *info_json(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s info --json '%s'", brigade_bin(), path);
    char *out = run_capture(cmd);
    if (!out)
        return NULL;
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    free(out);
    return j;
}

static int64_t jint(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

/* Scalar metadata values must match ggml's reading of the same key. */
static void compare_kv(const char *what, struct gguf_context *g, int64_t id, const json_t *v)
{
    const char *key = gguf_get_key(g, id);
    enum gguf_type t = gguf_get_kv_type(g, id);
    switch (t) {
    case GGUF_TYPE_UINT32:
        CHECK(json_integer_value(v) == gguf_get_val_u32(g, id), "%s: key %s", what, key);
        break;
    case GGUF_TYPE_INT32:
        CHECK(json_integer_value(v) == gguf_get_val_i32(g, id), "%s: key %s", what, key);
        break;
    case GGUF_TYPE_FLOAT32:
        CHECK((float)json_real_value(v) == gguf_get_val_f32(g, id), "%s: key %s", what, key);
        break;
    case GGUF_TYPE_BOOL:
        CHECK(json_is_boolean(v) && json_boolean_value(v) == gguf_get_val_bool(g, id),
              "%s: key %s", what, key);
        break;
    case GGUF_TYPE_STRING:
        CHECK(json_is_string(v) && strcmp(json_string_value(v), gguf_get_val_str(g, id)) == 0,
              "%s: key %s", what, key);
        break;
    case GGUF_TYPE_ARRAY: {
        size_t n = gguf_get_arr_n(g, id);
        size_t mine = json_is_array(v) ? json_array_size(v) : (size_t)jint(v, "count");
        CHECK(mine == n, "%s: key %s: %zu elements, ggml %zu", what, key, mine, n);
        break;
    }
    default:
        break;
    }
}

static void compare_file(const char *path, const char *what, bool is_model)
{
    json_t *j = info_json(path);
    CHECK(j != NULL, "%s: `brigade info --json` failed or printed invalid JSON", what);
    if (!j)
        return;
    struct ggml_context *gctx = NULL;
    struct gguf_init_params gp = {.no_alloc = true, .ctx = &gctx};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    CHECK(g != NULL, "%s: ggml cannot read it", what);
    if (!g) {
        json_decref(j);
        return;
    }
    struct stat sb;
    stat(path, &sb);
    CHECK(jint(j, "version") == gguf_get_version(g), "%s: version", what);
    CHECK(jint(j, "alignment") == (int64_t)gguf_get_alignment(g), "%s: alignment", what);
    CHECK(jint(j, "file_size") == (int64_t)sb.st_size, "%s: file_size", what);
    if (gguf_get_n_tensors(g) > 0)
        CHECK(jint(j, "data_offset") == (int64_t)gguf_get_data_offset(g), "%s: data_offset %lld vs %zu",
              what, (long long)jint(j, "data_offset"), gguf_get_data_offset(g));

    json_t *meta = json_object_get(j, "metadata");
    CHECK((int64_t)json_object_size(meta) == gguf_get_n_kv(g), "%s: %zu keys, ggml %lld", what,
          json_object_size(meta), (long long)gguf_get_n_kv(g));
    for (int64_t i = 0; i < gguf_get_n_kv(g); i++) {
        json_t *v = json_object_get(meta, gguf_get_key(g, i));
        CHECK(v != NULL, "%s: key %s missing", what, gguf_get_key(g, i));
        if (v)
            compare_kv(what, g, i, v);
    }

    json_t *tensors = json_object_get(j, "tensors");
    CHECK((int64_t)json_array_size(tensors) == gguf_get_n_tensors(g), "%s: tensor count", what);
    uint64_t params = 0, bytes = 0;
    int bad = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g) && i < (int64_t)json_array_size(tensors); i++) {
        json_t *t = json_array_get(tensors, (size_t)i);
        const char *name = gguf_get_tensor_name(g, i);
        struct ggml_tensor *gt = ggml_get_tensor(gctx, name);
        bool ok = gt && strcmp(json_string_value(json_object_get(t, "name")), name) == 0 &&
                  strcmp(json_string_value(json_object_get(t, "type")),
                         ggml_type_name(gguf_get_tensor_type(g, i))) == 0 &&
                  jint(t, "bytes") == (int64_t)gguf_get_tensor_size(g, i) &&
                  jint(t, "offset") ==
                      (int64_t)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i)) &&
                  jint(t, "elements") == ggml_nelements(gt);
        json_t *shape = json_object_get(t, "shape");
        for (size_t d = 0; ok && d < 4; d++) {
            int64_t want = gt->ne[d];
            int64_t got = d < json_array_size(shape) ? json_integer_value(json_array_get(shape, d)) : 1;
            ok = want == got;
        }
        if (!ok && bad++ < 5)
            CHECK(false, "%s: tensor %lld (%s) differs from ggml", what, (long long)i, name);
        params += (uint64_t)ggml_nelements(gt);
        bytes += gguf_get_tensor_size(g, i);
    }
    CHECK(bad == 0, "%s: %d tensors differ", what, bad);
    CHECK((uint64_t)jint(j, "n_params") == params, "%s: n_params", what);
    CHECK((uint64_t)jint(j, "weights_bytes") == bytes, "%s: weights_bytes", what);

    /* The loader's view: vocabulary and, for models, parameters and size. */
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = !is_model;
    mp.progress_callback = oracle_no_progress;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    CHECK(model != NULL, "%s: llama.cpp cannot load it", what);
    if (model) {
        const struct llama_vocab *vocab = llama_model_get_vocab(model);
        json_t *tok = json_object_get(j, "tokenizer");
        CHECK(jint(tok, "n_tokens") == llama_vocab_n_tokens(vocab), "%s: n_tokens %lld vs %d",
              what, (long long)jint(tok, "n_tokens"), llama_vocab_n_tokens(vocab));
        json_t *eos = json_object_get(tok, "eos_id");
        if (json_is_integer(eos))
            CHECK(json_integer_value(eos) == llama_vocab_eos(vocab), "%s: eos", what);
        json_t *bos = json_object_get(tok, "bos_id");
        if (json_is_integer(bos))
            CHECK(json_integer_value(bos) == llama_vocab_bos(vocab), "%s: bos", what);
        if (is_model) {
            CHECK((uint64_t)jint(j, "n_params") == llama_model_n_params(model), "%s: params vs llama",
                  what);
            CHECK((uint64_t)jint(j, "weights_bytes") == llama_model_size(model), "%s: size vs llama",
                  what);
        }
        llama_model_free(model);
    }
    gguf_free(g);
    ggml_free(gctx);
    json_decref(j);
}

/* The text output carries the same totals. */
static void check_text_output(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s info '%s'", brigade_bin(), path);
    char *out = run_capture(cmd);
    CHECK(out != NULL, "text info failed");
    if (!out)
        return;
    json_t *j = info_json(path);
    char want[128];
    snprintf(want, sizeof want, "params:     %lld ", (long long)jint(j, "n_params"));
    CHECK(strstr(out, want) != NULL, "text output lacks '%s'", want);
    CHECK(strstr(out, "architecture: qwen35moe") != NULL, "text output lacks the architecture");
    CHECK(strstr(out, "blk.3.attn_q.weight") != NULL, "text output lacks a tensor row");
    json_decref(j);
    free(out);
}

int main(void)
{
    oracle_init();

    char path[256];
    snprintf(path, sizeof path, "/tmp/brigade-oracle-info-%d.gguf", (int)getpid());
    const struct {
        const char *preset;
        uint32_t type;
    } models[] = {{"tiny-qwen35moe", 12}, {"tiny-qwen3moe", 14}, {"tiny-qwen35moe", 30}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        brigade_synth_options o = {.preset = models[i].preset, .type = models[i].type, .seed = 3};
        brigade_error err;
        CHECK(brigade_synth(path, &o, &err) == BRIGADE_OK, "synth: %s", err.message);
        char what[96];
        snprintf(what, sizeof what, "%s/%s", models[i].preset, brigade_type_name(models[i].type));
        compare_file(path, what, true);
        if (i == 0)
            check_text_output(path);
    }
    remove(path);

    const char *vocabs[] = {"qwen35", "qwen2", "llama-bpe", "gpt-2"};
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        char vp[512];
        snprintf(vp, sizeof vp, "%s/models/ggml-vocab-%s.gguf", ORACLE_SRC_DIR, vocabs[i]);
        compare_file(vp, vocabs[i], false);
    }
    llama_backend_free();
    return check_summary("oracle_info");
}
