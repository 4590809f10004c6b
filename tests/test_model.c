/* Model loading: synthetic models bind completely; files edited to break one
 * thing each (a missing tensor, a wrong shape or type, an unsupported
 * architecture, inconsistent hyperparameters) are refused with an error that
 * names the tensor or key and says what was expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "gguf_writer.h"

/* One edit applied while copying a file. */
typedef struct edit {
    const char *drop_key;
    const char *set_key;      /* set to set_u32 (or set_str if given) */
    uint32_t set_u32;
    const char *set_str;
    const char *drop_tensor;
    const char *retype_tensor; /* stored as f16 instead */
    const char *reshape_tensor; /* first two dimensions swapped */
    const char *extra_tensor;   /* an additional f32 [32] tensor */
} edit;

static bool copy_with_edit(const char *src, const char *dst, const edit *e)
{
    brigade_gguf *f;
    brigade_error err;
    if (brigade_gguf_open(src, NULL, &f, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return false;
    }
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    brigade_status st = BRIGADE_OK;
    for (int64_t i = 0; i < brigade_gguf_kv_count(f) && !st; i++) {
        const char *key = brigade_gguf_kv_key(f, i);
        if (e->drop_key && !strcmp(key, e->drop_key))
            continue;
        st = bg_gguf_set(w, key, brigade_gguf_kv_value(f, i), &err);
    }
    if (!st && e->set_key)
        st = e->set_str ? bg_gguf_set_str(w, e->set_key, e->set_str, &err)
                        : bg_gguf_set_u32(w, e->set_key, e->set_u32, &err);
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f) && !st; i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        if (e->drop_tensor && !strcmp(t->name, e->drop_tensor))
            continue;
        uint64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (e->reshape_tensor && !strcmp(t->name, e->reshape_tensor)) {
            ne[0] = t->ne[1];
            ne[1] = t->ne[0];
        }
        uint32_t type = e->retype_tensor && !strcmp(t->name, e->retype_tensor) ? 1 : t->type;
        st = bg_gguf_add_tensor(w, t->name, type, t->n_dims, ne, &err);
    }
    uint64_t extra_ne[1] = {32};
    if (!st && e->extra_tensor)
        st = bg_gguf_add_tensor(w, e->extra_tensor, 0, 1, extra_ne, &err);
    if (!st)
        st = bg_gguf_writer_begin(w, dst, &err);
    /* Data: the original bytes where the size is unchanged, zeros otherwise. */
    static uint8_t zeros[1 << 16];
    int64_t out_i = 0;
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f) && !st; i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        if (e->drop_tensor && !strcmp(t->name, e->drop_tensor))
            continue;
        uint64_t n = bg_gguf_writer_tensor_bytes(w, out_i++);
        if (n == t->n_bytes)
            st = bg_gguf_writer_data(w, t->data, n, &err);
        else
            for (uint64_t k = 0; k < n && !st; k += sizeof zeros)
                st = bg_gguf_writer_data(w, zeros, n - k < sizeof zeros ? n - k : sizeof zeros, &err);
    }
    if (!st && e->extra_tensor)
        st = bg_gguf_writer_data(w, zeros, 32 * 4, &err);
    if (!st)
        st = bg_gguf_writer_finish(w, &err);
    if (st)
        fprintf(stderr, "copy: %s\n", err.message);
    bg_gguf_writer_free(w);
    brigade_gguf_close(f);
    return st == BRIGADE_OK;
}

static char good35[128], good3[128], bad[128];

/* Copies the model with one edit and expects loading to fail with status and
 * every one of the given substrings in the message. */
static void expect_refused(const char *what, const char *src, const edit *e, brigade_status want,
                           const char *s1, const char *s2)
{
    CHECK(copy_with_edit(src, bad, e), "%s: cannot write the edited file", what);
    brigade_model *m = NULL;
    brigade_error err = {0};
    brigade_status st = brigade_model_load(bad, NULL, &m, &err);
    CHECK(st == want, "%s: status %s, expected %s (%s)", what, brigade_status_name(st),
          brigade_status_name(want), err.message);
    CHECK(m == NULL, "%s: a model was returned on failure", what);
    CHECK(s1 == NULL || strstr(err.message, s1), "%s: message lacks '%s': %s", what, s1,
          err.message);
    CHECK(s2 == NULL || strstr(err.message, s2), "%s: message lacks '%s': %s", what, s2,
          err.message);
    CHECK(strstr(err.message, bad) != NULL, "%s: message does not name the file: %s", what,
          err.message);
    brigade_model_free(m);
}

static void check_loads(const char *path, const char *arch, bool no_mmap)
{
    brigade_model_options o = {.no_mmap = no_mmap};
    brigade_model *m = NULL;
    brigade_error err = {0};
    brigade_status st = brigade_model_load(path, &o, &m, &err);
    CHECK(st == BRIGADE_OK, "%s: load failed: %s", arch, err.message);
    if (st)
        return;
    CHECK(!strcmp(brigade_model_arch(m), arch), "arch %s", brigade_model_arch(m));
    CHECK(brigade_model_n_layers(m) == 4, "%s: %u layers", arch, brigade_model_n_layers(m));
    /* Every tensor of a synth file is used, so the totals are the file's. */
    const brigade_gguf *f = brigade_model_file(m);
    uint64_t params = 0, bytes = 0;
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        params += brigade_gguf_tensor(f, i)->n_elements;
        bytes += brigade_gguf_tensor(f, i)->n_bytes;
    }
    CHECK(brigade_model_n_params(m) == params, "%s: params %llu vs %llu", arch,
          (unsigned long long)brigade_model_n_params(m), (unsigned long long)params);
    CHECK(brigade_model_weight_bytes(m) == bytes, "%s: bytes", arch);
    const brigade_value *tokens = brigade_gguf_get(f, "tokenizer.ggml.tokens");
    CHECK(tokens && brigade_model_n_vocab(m) == tokens->count, "%s: vocab %u", arch,
          brigade_model_n_vocab(m));
    brigade_model_free(m);
}

int main(void)
{
    int pid = (int)getpid();
    snprintf(good35, sizeof good35, "/tmp/brigade-model-%d-35.gguf", pid);
    snprintf(good3, sizeof good3, "/tmp/brigade-model-%d-3.gguf", pid);
    snprintf(bad, sizeof bad, "/tmp/brigade-model-%d-bad.gguf", pid);
    brigade_error err;
    brigade_synth_options o35 = {.preset = "tiny-qwen35moe", .type = 8, .seed = 1};
    brigade_synth_options o3 = {.preset = "tiny-qwen3moe", .type = 12, .seed = 1};
    CHECK(brigade_synth(good35, &o35, &err) == BRIGADE_OK, "synth: %s", err.message);
    CHECK(brigade_synth(good3, &o3, &err) == BRIGADE_OK, "synth: %s", err.message);

    check_loads(good35, "qwen35moe", false);
    check_loads(good35, "qwen35moe", true);
    check_loads(good3, "qwen3moe", false);

    /* A tensor the architecture does not use (an MTP layer, say) is ignored. */
    edit extra = {.extra_tensor = "blk.4.nextn.eh_proj.weight"};
    CHECK(copy_with_edit(good35, bad, &extra), "extra tensor copy");
    brigade_model *m = NULL;
    CHECK(brigade_model_load(bad, NULL, &m, &err) == BRIGADE_OK, "extra tensor: %s", err.message);
    brigade_model_free(m);

    edit e1 = {.drop_tensor = "blk.2.ssm_a"};
    expect_refused("missing tensor", good35, &e1, BRIGADE_ERR_FORMAT, "'blk.2.ssm_a' is missing",
                   "qwen35moe");
    edit e2 = {.reshape_tensor = "blk.1.attn_qkv.weight"};
    expect_refused("wrong shape", good35, &e2, BRIGADE_ERR_FORMAT, "blk.1.attn_qkv.weight",
                   "expected shape [256, 512], found q8_0 [512, 256]");
    edit e3 = {.retype_tensor = "blk.0.attn_norm.weight"};
    expect_refused("norm not f32", good35, &e3, BRIGADE_ERR_UNSUPPORTED, "blk.0.attn_norm.weight",
                   "must be f32");
    edit e4 = {.set_key = "general.architecture", .set_str = "llama"};
    expect_refused("other architecture", good35, &e4, BRIGADE_ERR_UNSUPPORTED,
                   "architecture 'llama' is not supported", "qwen35moe, qwen3moe");
    edit e5 = {.set_key = "qwen3moe.expert_used_count", .set_u32 = 9};
    expect_refused("top-k above expert count", good3, &e5, BRIGADE_ERR_FORMAT, "expert_used_count 9",
                   NULL);
    edit e6 = {.set_key = "qwen35moe.block_count", .set_u32 = 5};
    expect_refused("more layers than tensors", good35, &e6, BRIGADE_ERR_FORMAT,
                   "'blk.4.attn_norm.weight' is missing", NULL);
    edit e7 = {.drop_key = "qwen35moe.ssm.state_size"};
    expect_refused("required key missing", good35, &e7, BRIGADE_ERR_FORMAT,
                   "'qwen35moe.ssm.state_size' is missing", NULL);
    edit e8 = {.set_key = "qwen35moe.full_attention_interval", .set_u32 = 5};
    expect_refused("no attention layer", good35, &e8, BRIGADE_ERR_FORMAT, "full_attention_interval 5",
                   "at least one layer");
    edit e9 = {.set_key = "qwen35moe.ssm.inner_size", .set_u32 = 100};
    expect_refused("inconsistent DeltaNet", good35, &e9, BRIGADE_ERR_FORMAT, "ssm.inner_size 100",
                   NULL);
    edit e10 = {.set_key = "qwen3moe.attention.head_count_kv", .set_u32 = 3};
    expect_refused("kv heads not dividing heads", good3, &e10, BRIGADE_ERR_FORMAT, "head_count_kv 3",
                   NULL);
    edit e11 = {.set_key = "qwen3moe.block_count", .set_str = "four"};
    expect_refused("string where a count belongs", good3, &e11, BRIGADE_ERR_FORMAT,
                   "qwen3moe.block_count", "string");
    edit e12 = {.drop_tensor = "token_embd.weight"};
    expect_refused("no embeddings", good3, &e12, BRIGADE_ERR_FORMAT, "token_embd.weight", NULL);

    /* Tied embeddings: output.weight may be absent. */
    edit tied = {.drop_tensor = "output.weight"};
    CHECK(copy_with_edit(good3, bad, &tied), "tied copy");
    m = NULL;
    CHECK(brigade_model_load(bad, NULL, &m, &err) == BRIGADE_OK, "tied: %s", err.message);
    brigade_model_free(m);

    remove(good35);
    remove(good3);
    remove(bad);
    return check_summary("test_model");
}
