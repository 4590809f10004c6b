/* Cross-check of brigade's GGUF reader and writer against ggml's own GGUF
 * code (llama.cpp's prebuilt libggml-base).
 *
 * (a) A file written by brigade's writer (every scalar and array type,
 *     strings with NUL bytes, empty arrays, tensors of many types and
 *     shapes, alignment 64) is read by gguf_init_from_file with identical
 *     keys, types, values, tensor names, types, shapes, offsets and data.
 *     ggml has no arrays of arrays, so a brigade file with nested arrays
 *     must be rejected by ggml (documented difference, checked).
 * (b) A file written by ggml (gguf_set_*, gguf_set_arr_*, tensors from a
 *     ggml context, gguf_write_to_file), with the default alignment and
 *     with 64, is read by brigade identically, and matches the inputs.
 * (c) A few thousand mutations (byte flips, interesting integers, inserted
 *     and deleted bytes, truncations; fixed seed) of two valid files: brigade
 *     never crashes, always fails with a message, agrees with ggml where
 *     both accept, and when ggml accepts a file brigade rejects, brigade's
 *     reason must be one of these deliberate, stricter rules:
 *       n_dims 0          ggml takes a 0-dimension tensor as a scalar; GGUF
 *                         tensors have 1..4 dimensions in brigade
 *       zero dimension    ggml allows empty tensors; brigade wants ne >= 1
 *       known key type    brigade checks the type of keys it will use
 *                         (general.architecture, tokenizer.*, <arch>.*)
 *       bool byte         ggml reads any non-zero byte as true; brigade
 *                         wants 0 or 1
 *       NUL in a name     ggml silently cuts a key or tensor name at a NUL
 *       alignment > 2^30  ggml accepts any power of two
 *     Anything else fails the test. The reverse (brigade accepts, ggml does
 *     not) is reported by ggml's reason, e.g. ggml requires tensors to be
 *     stored contiguously in directory order and the padding after the last
 *     one to be present; brigade only requires them not to overlap.
 * Also: brigade's tensor type table against ggml's (names, block sizes). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ggml.h"
#include "gguf.h"

#include "brigade.h"
#include "check.h"
#include "gguf_writer.h"

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 256, "%s/%s", g_dir, name);
    return p;
}

/* ggml's first error message since the last reset. */
static char g_ggml_err[512];
static bool g_ggml_err_set;

static void on_ggml_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR && !g_ggml_err_set) {
        snprintf(g_ggml_err, sizeof g_ggml_err, "%s", text);
        g_ggml_err_set = true;
    }
}

static void ggml_err_reset(void)
{
    g_ggml_err[0] = 0;
    g_ggml_err_set = false;
}

static uint8_t pattern(size_t tensor, uint64_t i)
{
    return (uint8_t)(i * 11 + tensor * 29 + (i >> 8) + 3);
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static unsigned scalar_size(int t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* ggml's C API gives strings as C strings: equal if ggml's is brigade's up
 * to its first NUL. */
static bool str_matches(const char *g, brigade_string b)
{
    size_t n = strlen(g);
    return n <= b.len && memcmp(g, b.ptr, n) == 0 && (n == b.len || b.ptr[n] == '\0');
}

/* ------------------------------------------------- ggml vs brigade, deep */

/* Compares everything both readers report; the first difference goes to
 * why. */
static bool same_file(const struct gguf_context *g, const brigade_gguf *f, char *why, size_t n_why)
{
#define DIFF(...) return snprintf(why, n_why, __VA_ARGS__), false
    if (gguf_get_version(g) != brigade_gguf_version(f))
        DIFF("version %u vs %u", gguf_get_version(g), brigade_gguf_version(f));
    if (gguf_get_alignment(g) != brigade_gguf_alignment(f))
        DIFF("alignment %zu vs %u", gguf_get_alignment(g), brigade_gguf_alignment(f));
    if (gguf_get_n_kv(g) != brigade_gguf_kv_count(f))
        DIFF("%lld keys vs %lld", (long long)gguf_get_n_kv(g), (long long)brigade_gguf_kv_count(f));
    for (int64_t i = 0; i < gguf_get_n_kv(g); i++) {
        const char *key = gguf_get_key(g, i);
        const brigade_value *v = brigade_gguf_kv_value(f, i);
        if (strcmp(key, brigade_gguf_kv_key(f, i)) != 0)
            DIFF("key %lld: '%s' vs '%s'", (long long)i, key, brigade_gguf_kv_key(f, i));
        enum gguf_type t = gguf_get_kv_type(g, i);
        if ((int)t != (int)v->type)
            DIFF("key '%s': type %d vs %d", key, t, v->type);
        bool eq = true;
        switch (t) {
        case GGUF_TYPE_UINT8: eq = gguf_get_val_u8(g, i) == v->as.u64; break;
        case GGUF_TYPE_INT8: eq = gguf_get_val_i8(g, i) == v->as.i64; break;
        case GGUF_TYPE_UINT16: eq = gguf_get_val_u16(g, i) == v->as.u64; break;
        case GGUF_TYPE_INT16: eq = gguf_get_val_i16(g, i) == v->as.i64; break;
        case GGUF_TYPE_UINT32: eq = gguf_get_val_u32(g, i) == v->as.u64; break;
        case GGUF_TYPE_INT32: eq = gguf_get_val_i32(g, i) == v->as.i64; break;
        case GGUF_TYPE_UINT64: eq = gguf_get_val_u64(g, i) == v->as.u64; break;
        case GGUF_TYPE_INT64: eq = gguf_get_val_i64(g, i) == v->as.i64; break;
        case GGUF_TYPE_BOOL: eq = gguf_get_val_bool(g, i) == v->as.b; break;
        case GGUF_TYPE_FLOAT32: {
            double d = gguf_get_val_f32(g, i);
            eq = memcmp(&d, &v->as.f64, sizeof d) == 0;
            break;
        }
        case GGUF_TYPE_FLOAT64: {
            double d = gguf_get_val_f64(g, i);
            eq = memcmp(&d, &v->as.f64, sizeof d) == 0;
            break;
        }
        case GGUF_TYPE_STRING: eq = str_matches(gguf_get_val_str(g, i), v->as.str); break;
        case GGUF_TYPE_ARRAY: {
            enum gguf_type et = gguf_get_arr_type(g, i);
            size_t n = gguf_get_arr_n(g, i);
            if ((int)et != (int)v->elem_type || n != v->count)
                DIFF("key '%s': array of %zu x %d vs %llu x %d", key, n, et,
                     (unsigned long long)v->count, v->elem_type);
            if (et == GGUF_TYPE_STRING) {
                for (size_t j = 0; j < n && eq; j++)
                    eq = str_matches(gguf_get_arr_str(g, i, j), v->as.strings[j]);
            } else if (scalar_size(et)) {
                eq = n == 0 || memcmp(gguf_get_arr_data(g, i), v->as.numbers, n * scalar_size(et)) == 0;
            } else {
                eq = false;
            }
            break;
        }
        default: eq = false;
        }
        if (!eq)
            DIFF("key '%s': values differ", key);
    }
    if (gguf_get_n_tensors(g) != brigade_gguf_tensor_count(f))
        DIFF("%lld tensors vs %lld", (long long)gguf_get_n_tensors(g),
             (long long)brigade_gguf_tensor_count(f));
    if (gguf_get_n_tensors(g) > 0 && gguf_get_data_offset(g) != brigade_gguf_data_offset(f))
        DIFF("data offset %zu vs %llu", gguf_get_data_offset(g),
             (unsigned long long)brigade_gguf_data_offset(f));
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        const char *name = gguf_get_tensor_name(g, i);
        if (strcmp(name, t->name) != 0)
            DIFF("tensor %lld: '%s' vs '%s'", (long long)i, name, t->name);
        if ((uint32_t)gguf_get_tensor_type(g, i) != t->type)
            DIFF("tensor '%s': type %d vs %u", name, gguf_get_tensor_type(g, i), t->type);
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        for (int d = 0; d < 4; d++)
            if ((uint64_t)ne[d] != t->ne[d])
                DIFF("tensor '%s': ne[%d] %lld vs %llu", name, d, (long long)ne[d],
                     (unsigned long long)t->ne[d]);
        if (gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i) != t->offset)
            DIFF("tensor '%s': offset %zu+%zu vs %llu", name, gguf_get_data_offset(g),
                 gguf_get_tensor_offset(g, i), (unsigned long long)t->offset);
        if (gguf_get_tensor_size(g, i) != t->n_bytes)
            DIFF("tensor '%s': %zu bytes vs %llu", name, gguf_get_tensor_size(g, i),
                 (unsigned long long)t->n_bytes);
    }
    return true;
#undef DIFF
}

/* ------------------------------------------------------ (a) brigade -> ggml */

typedef struct tspec {
    const char *name;
    uint32_t type, n_dims;
    uint64_t ne[4];
} tspec;

static const tspec A_TENSORS[] = {
    {"token_embd.weight", GGML_TYPE_F32, 2, {8, 3}},
    {"blk.0.attn_norm.weight", GGML_TYPE_F16, 1, {5}},
    {"blk.0.attn_q.weight", GGML_TYPE_Q8_0, 2, {64, 3}},
    {"blk.0.ffn_gate_exps.weight", GGML_TYPE_Q4_K, 3, {256, 2, 2}},
    {"blk.0.ffn_down_exps.weight", GGML_TYPE_Q6_K, 4, {256, 1, 2, 2}},
    {"blk.0.ssm_a", GGML_TYPE_BF16, 2, {3, 3}},
    {"blk.0.q4_0", GGML_TYPE_Q4_0, 1, {96}},
    {"blk.0.mxfp4", GGML_TYPE_MXFP4, 2, {32, 2}},
    {"blk.0.iq4_xs", GGML_TYPE_IQ4_XS, 1, {256}},
    {"i32", GGML_TYPE_I32, 1, {7}},
    {"f64", GGML_TYPE_F64, 3, {2, 1, 2}},
};
#define N_A_TENSORS (sizeof A_TENSORS / sizeof *A_TENSORS)

static bool set(bg_gguf_writer *w, const char *key, brigade_value v)
{
    brigade_error err = {0};
    brigade_status st = bg_gguf_set(w, key, &v, &err);
    CHECK(st == BRIGADE_OK, "set %s: %s", key, err.message);
    return st == BRIGADE_OK;
}

#define ARRV(et, a, n) ((brigade_value){.type = BRIGADE_VALUE_ARRAY, .elem_type = (et), .count = (n), .as.numbers = (a)})

/* Writes a brigade file; with nested: adds an array of arrays. */
static bool write_brigade(const char *path, uint32_t alignment, bool nested)
{
    static const uint8_t au8[] = {1, 255, 0};
    static const int8_t ai8[] = {-128, 127};
    static const uint16_t au16[] = {65535, 1};
    static const int16_t ai16[] = {-32768, 5};
    static const uint32_t au32[] = {UINT32_MAX, 0, 3};
    static const int32_t ai32[] = {INT32_MIN, -1, 1};
    static const float af32[] = {0.25f, -0.0f, 3.4e38f, 1e-45f};
    static const bool abool[] = {true, false, true};
    static const uint64_t au64[] = {UINT64_MAX, 1ull << 50};
    static const int64_t ai64[] = {INT64_MIN, INT64_MAX};
    static const double af64[] = {1e308, -1e-308, 0.1};
    static const brigade_string strs[] = {{"", 0}, {"<s>", 3}, {"with\0nul", 8}, {"\xe2\x96\x81the", 6}};
    static const brigade_value inner[] = {ARRV(BRIGADE_VALUE_U8, au8, 3), ARRV(BRIGADE_VALUE_F64, af64, 1)};

    bg_gguf_writer *w = bg_gguf_writer_new(alignment);
    bool ok = set(w, "general.architecture", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"qwen35moe", 9}}) &&
              set(w, "qwen35moe.block_count", (brigade_value){.type = BRIGADE_VALUE_U32, .as.u64 = 40}) &&
              set(w, "v.u8", (brigade_value){.type = BRIGADE_VALUE_U8, .as.u64 = 250}) &&
              set(w, "v.i8", (brigade_value){.type = BRIGADE_VALUE_I8, .as.i64 = -3}) &&
              set(w, "v.u16", (brigade_value){.type = BRIGADE_VALUE_U16, .as.u64 = 65534}) &&
              set(w, "v.i16", (brigade_value){.type = BRIGADE_VALUE_I16, .as.i64 = -32767}) &&
              set(w, "v.u32", (brigade_value){.type = BRIGADE_VALUE_U32, .as.u64 = 3000000000u}) &&
              set(w, "v.i32", (brigade_value){.type = BRIGADE_VALUE_I32, .as.i64 = INT32_MIN}) &&
              set(w, "v.f32", (brigade_value){.type = BRIGADE_VALUE_F32, .as.f64 = 1e-6f}) &&
              set(w, "v.bool", (brigade_value){.type = BRIGADE_VALUE_BOOL, .as.b = true}) &&
              set(w, "v.string", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"héllo", 6}}) &&
              set(w, "v.string.empty", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"", 0}}) &&
              set(w, "v.string.nul", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"ab\0cd", 5}}) &&
              set(w, "v.u64", (brigade_value){.type = BRIGADE_VALUE_U64, .as.u64 = UINT64_MAX - 1}) &&
              set(w, "v.i64", (brigade_value){.type = BRIGADE_VALUE_I64, .as.i64 = -(1ll << 40)}) &&
              set(w, "v.f64", (brigade_value){.type = BRIGADE_VALUE_F64, .as.f64 = 2.718281828459045}) &&
              set(w, "a.u8", ARRV(BRIGADE_VALUE_U8, au8, 3)) &&
              set(w, "a.i8", ARRV(BRIGADE_VALUE_I8, ai8, 2)) &&
              set(w, "a.u16", ARRV(BRIGADE_VALUE_U16, au16, 2)) &&
              set(w, "a.i16", ARRV(BRIGADE_VALUE_I16, ai16, 2)) &&
              set(w, "a.u32", ARRV(BRIGADE_VALUE_U32, au32, 3)) &&
              set(w, "a.i32", ARRV(BRIGADE_VALUE_I32, ai32, 3)) &&
              set(w, "a.f32", ARRV(BRIGADE_VALUE_F32, af32, 4)) &&
              set(w, "a.bool", ARRV(BRIGADE_VALUE_BOOL, abool, 3)) &&
              set(w, "a.u64", ARRV(BRIGADE_VALUE_U64, au64, 2)) &&
              set(w, "a.i64", ARRV(BRIGADE_VALUE_I64, ai64, 2)) &&
              set(w, "a.f64", ARRV(BRIGADE_VALUE_F64, af64, 3)) &&
              set(w, "a.empty", ARRV(BRIGADE_VALUE_I32, ai32, 0)) &&
              set(w, "tokenizer.ggml.tokens", (brigade_value){.type = BRIGADE_VALUE_ARRAY,
                  .elem_type = BRIGADE_VALUE_STRING, .count = 4, .as.strings = strs}) &&
              set(w, "a.strings.empty", (brigade_value){.type = BRIGADE_VALUE_ARRAY,
                  .elem_type = BRIGADE_VALUE_STRING, .count = 0, .as.strings = strs});
    if (ok && nested)
        ok = set(w, "a.nested", (brigade_value){.type = BRIGADE_VALUE_ARRAY,
                                                .elem_type = BRIGADE_VALUE_ARRAY, .count = 2,
                                                .as.items = inner});
    brigade_error err = {0};
    for (size_t i = 0; i < N_A_TENSORS && ok; i++) {
        const tspec *t = &A_TENSORS[i];
        ok = bg_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err) == BRIGADE_OK;
        CHECK(ok, "add %s: %s", t->name, err.message);
    }
    ok = ok && bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK;
    for (size_t i = 0; i < N_A_TENSORS && ok; i++) {
        uint64_t n = bg_gguf_writer_tensor_bytes(w, (int64_t)i);
        for (uint64_t j = 0; j < n && ok; j++) {
            uint8_t x = pattern(i, j);
            ok = bg_gguf_writer_data(w, &x, 1, &err) == BRIGADE_OK;
        }
    }
    ok = ok && bg_gguf_writer_finish(w, &err) == BRIGADE_OK;
    CHECK(ok, "writing %s: %s", path, err.message);
    bg_gguf_writer_free(w);
    return ok;
}

static void test_brigade_to_ggml(void)
{
    const char *path = tmp_path("a.gguf");
    if (!write_brigade(path, 64, false))
        return;
    brigade_gguf *f = NULL;
    brigade_error err = {0};
    CHECK(brigade_gguf_open(path, NULL, &f, &err) == BRIGADE_OK, "brigade reads its file: %s",
          err.message);
    /* metadata only */
    ggml_err_reset();
    struct gguf_context *g = gguf_init_from_file(path, (struct gguf_init_params){.no_alloc = true});
    CHECK(g != NULL, "ggml rejects brigade's file: %s", g_ggml_err);
    if (g && f) {
        char why[256] = "";
        CHECK(same_file(g, f, why, sizeof why), "(a) ggml and brigade differ: %s", why);
        CHECK(gguf_get_alignment(g) == 64, "(a) ggml alignment %zu", gguf_get_alignment(g));
        int64_t k = gguf_find_key(g, "v.string.nul");
        CHECK(k >= 0 && strcmp(gguf_get_val_str(g, k), "ab") == 0, "(a) NUL string");
        CHECK(gguf_get_n_tensors(g) == (int64_t)N_A_TENSORS, "(a) tensor count");
    }
    gguf_free(g);
    /* with data: ggml loads the blob; the bytes must be the pattern */
    struct ggml_context *gc = NULL;
    g = gguf_init_from_file(path, (struct gguf_init_params){.no_alloc = false, .ctx = &gc});
    CHECK(g && gc, "ggml cannot load brigade's tensor data: %s", g_ggml_err);
    for (size_t i = 0; g && gc && i < N_A_TENSORS; i++) {
        struct ggml_tensor *t = ggml_get_tensor(gc, A_TENSORS[i].name);
        bool same = t != NULL;
        for (size_t j = 0; same && j < ggml_nbytes(t); j++)
            same = ((const uint8_t *)t->data)[j] == pattern(i, j);
        CHECK(same, "(a) ggml sees different data in '%s'", A_TENSORS[i].name);
        const brigade_tensor_info *bt = f ? brigade_gguf_find_tensor(f, A_TENSORS[i].name) : NULL;
        CHECK(bt && t && memcmp(bt->data, t->data, bt->n_bytes) == 0, "(a) data of '%s'",
              A_TENSORS[i].name);
    }
    if (gc)
        ggml_free(gc);
    gguf_free(g);
    brigade_gguf_close(f);
    unlink(path);

    /* Arrays of arrays: valid GGUF that brigade writes and reads, ggml not. */
    path = tmp_path("a_nested.gguf");
    if (!write_brigade(path, 0, true))
        return;
    CHECK(brigade_gguf_open(path, NULL, &f, &err) == BRIGADE_OK, "nested: %s", err.message);
    brigade_gguf_close(f);
    ggml_err_reset();
    g = gguf_init_from_file(path, (struct gguf_init_params){.no_alloc = true});
    CHECK(g == NULL && strstr(g_ggml_err, "a.nested"),
          "ggml was expected to reject arrays of arrays (%s)", g_ggml_err);
    gguf_free(g);
    unlink(path);
}

/* ------------------------------------------------------ (b) ggml -> brigade */

static const tspec B_TENSORS[] = {
    {"w.f32", GGML_TYPE_F32, 3, {4, 3, 2}},
    {"w.f16", GGML_TYPE_F16, 1, {9}},
    {"w.q4_0", GGML_TYPE_Q4_0, 2, {64, 2}},
    {"w.q5_k", GGML_TYPE_Q5_K, 1, {512}},
    {"w.q2_k", GGML_TYPE_Q2_K, 4, {256, 1, 1, 2}},
    {"w.iq2_xxs", GGML_TYPE_IQ2_XXS, 1, {256}},
    {"w.i8", GGML_TYPE_I8, 2, {3, 5}},
};
#define N_B_TENSORS (sizeof B_TENSORS / sizeof *B_TENSORS)

static void test_ggml_to_brigade(uint32_t alignment)
{
    static const uint16_t u16s[] = {1, 2, 65535};
    static const int64_t i64s[] = {-5, INT64_MAX};
    static const float f32s[] = {1.5f, -2.25f};
    static const int8_t bools[] = {1, 0, 1, 1};
    static const double f64s[] = {0.5};
    const char *toks[] = {"a", "", "long token \xc3\xa9"};

    struct gguf_context *g;
    if (alignment == 0) {
        g = gguf_init_empty();
    } else {
        /* ggml only takes its alignment from a file it read: start from a
         * header-only file that carries general.alignment. */
        uint8_t hdr[24 + 8 + 17 + 4 + 4] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        uint8_t *p = hdr + 24;
        *p = 17, p += 8, memcpy(p, "general.alignment", 17), p += 17;
        *p = GGUF_TYPE_UINT32, p += 4;
        for (int i = 0; i < 4; i++)
            *p++ = (uint8_t)(alignment >> (8 * i));
        g = gguf_init_from_buffer(hdr, sizeof hdr, (struct gguf_init_params){.no_alloc = true});
        CHECK(g && gguf_get_alignment(g) == alignment, "ggml context with alignment %u", alignment);
        if (!g)
            return;
    }
    gguf_set_val_str(g, "general.architecture", "qwen3moe");
    gguf_set_val_u32(g, "qwen3moe.expert_count", 128);
    gguf_set_val_u8(g, "g.u8", 7);
    gguf_set_val_i8(g, "g.i8", -7);
    gguf_set_val_u16(g, "g.u16", 700);
    gguf_set_val_i16(g, "g.i16", -700);
    gguf_set_val_i32(g, "g.i32", -70000);
    gguf_set_val_f32(g, "g.f32", 0.125f);
    gguf_set_val_u64(g, "g.u64", 1ull << 63);
    gguf_set_val_i64(g, "g.i64", -(1ll << 62));
    gguf_set_val_f64(g, "g.f64", -0.0);
    gguf_set_val_bool(g, "g.bool", false);
    gguf_set_val_str(g, "g.str", "ggml wrote this");
    gguf_set_arr_data(g, "g.a.u16", GGUF_TYPE_UINT16, u16s, 3);
    gguf_set_arr_data(g, "g.a.i64", GGUF_TYPE_INT64, i64s, 2);
    gguf_set_arr_data(g, "g.a.f32", GGUF_TYPE_FLOAT32, f32s, 2);
    gguf_set_arr_data(g, "g.a.bool", GGUF_TYPE_BOOL, bools, 4);
    gguf_set_arr_data(g, "g.a.f64", GGUF_TYPE_FLOAT64, f64s, 1);
    gguf_set_arr_data(g, "g.a.empty", GGUF_TYPE_UINT32, u16s, 0);
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, 3);

    struct ggml_context *gc = ggml_init((struct ggml_init_params){.mem_size = 4 << 20});
    for (size_t i = 0; i < N_B_TENSORS; i++) {
        const tspec *s = &B_TENSORS[i];
        int64_t ne[4] = {1, 1, 1, 1};
        for (uint32_t d = 0; d < s->n_dims; d++)
            ne[d] = (int64_t)s->ne[d];
        struct ggml_tensor *t = ggml_new_tensor(gc, (enum ggml_type)s->type, (int)s->n_dims, ne);
        ggml_set_name(t, s->name);
        for (size_t j = 0; j < ggml_nbytes(t); j++)
            ((uint8_t *)t->data)[j] = pattern(i + 100, j);
        gguf_add_tensor(g, t);
    }
    const char *path = tmp_path("b.gguf");
    CHECK(gguf_write_to_file(g, path, false), "ggml could not write %s", path);
    ggml_free(gc);

    struct gguf_context *g2 = gguf_init_from_file(path, (struct gguf_init_params){.no_alloc = true});
    brigade_gguf *f = NULL;
    brigade_error err = {0};
    brigade_status st = brigade_gguf_open(path, NULL, &f, &err);
    CHECK(st == BRIGADE_OK, "(b) brigade rejects ggml's file (alignment %u): %s", alignment,
          err.message);
    CHECK(g2 != NULL, "(b) ggml rejects its own file");
    if (f && g2) {
        char why[256] = "";
        CHECK(same_file(g2, f, why, sizeof why), "(b) ggml and brigade differ: %s", why);
        /* and against the inputs themselves */
        uint32_t want_align = alignment ? alignment : 32;
        CHECK(brigade_gguf_alignment(f) == want_align, "(b) alignment %u", brigade_gguf_alignment(f));
        const brigade_value *v;
        v = brigade_gguf_get(f, "g.i16");
        CHECK(v && v->type == BRIGADE_VALUE_I16 && v->as.i64 == -700, "(b) g.i16");
        v = brigade_gguf_get(f, "g.u64");
        CHECK(v && v->type == BRIGADE_VALUE_U64 && v->as.u64 == 1ull << 63, "(b) g.u64");
        v = brigade_gguf_get(f, "g.i64");
        CHECK(v && v->type == BRIGADE_VALUE_I64 && v->as.i64 == -(1ll << 62), "(b) g.i64");
        v = brigade_gguf_get(f, "g.f64");
        CHECK(v && v->type == BRIGADE_VALUE_F64 && v->as.f64 == 0 && 1 / v->as.f64 < 0, "(b) g.f64 -0");
        v = brigade_gguf_get(f, "g.f32");
        CHECK(v && v->type == BRIGADE_VALUE_F32 && v->as.f64 == 0.125, "(b) g.f32");
        v = brigade_gguf_get(f, "g.bool");
        CHECK(v && v->type == BRIGADE_VALUE_BOOL && !v->as.b, "(b) g.bool");
        v = brigade_gguf_get(f, "g.str");
        CHECK(v && v->type == BRIGADE_VALUE_STRING && v->as.str.len == 15 &&
                  memcmp(v->as.str.ptr, "ggml wrote this", 15) == 0, "(b) g.str");
        v = brigade_gguf_get(f, "g.a.u16");
        CHECK(v && v->elem_type == BRIGADE_VALUE_U16 && v->count == 3 &&
                  memcmp(v->as.numbers, u16s, sizeof u16s) == 0, "(b) g.a.u16");
        v = brigade_gguf_get(f, "g.a.bool");
        CHECK(v && v->elem_type == BRIGADE_VALUE_BOOL && v->count == 4 &&
                  memcmp(v->as.numbers, bools, 4) == 0, "(b) g.a.bool");
        v = brigade_gguf_get(f, "g.a.empty");
        CHECK(v && v->elem_type == BRIGADE_VALUE_U32 && v->count == 0, "(b) g.a.empty");
        v = brigade_gguf_get(f, "tokenizer.ggml.tokens");
        CHECK(v && v->elem_type == BRIGADE_VALUE_STRING && v->count == 3 &&
                  v->as.strings[1].len == 0 && v->as.strings[2].len == strlen(toks[2]) &&
                  memcmp(v->as.strings[2].ptr, toks[2], strlen(toks[2])) == 0, "(b) tokens");
        v = brigade_gguf_get(f, "general.alignment");
        CHECK(alignment ? v && v->type == BRIGADE_VALUE_U32 && v->as.u64 == alignment : v == NULL,
              "(b) general.alignment");
        for (size_t i = 0; i < N_B_TENSORS; i++) {
            const brigade_tensor_info *t = brigade_gguf_find_tensor(f, B_TENSORS[i].name);
            bool same = t && t->type == B_TENSORS[i].type && t->offset % want_align == 0;
            for (uint64_t j = 0; same && j < t->n_bytes; j++)
                same = ((const uint8_t *)t->data)[j] == pattern(i + 100, j);
            CHECK(same, "(b) tensor '%s' differs", B_TENSORS[i].name);
        }
    }
    brigade_gguf_close(f);
    gguf_free(g2);
    gguf_free(g);
    unlink(path);
}

/* ------------------------------------------------------- type table check */

static void test_type_table(void)
{
    for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
        int64_t blck = ggml_blck_size((enum ggml_type)id);
        const char *bname = brigade_type_name(id);
        if (blck == 0) {
            CHECK(bname == NULL, "type %u: ggml retired it, brigade calls it %s", id, bname);
            continue;
        }
        double bits = 8.0 * (double)ggml_type_size((enum ggml_type)id) / (double)blck;
        CHECK(bname && strcmp(bname, ggml_type_name((enum ggml_type)id)) == 0,
              "type %u: brigade '%s', ggml '%s'", id, bname ? bname : "(null)",
              ggml_type_name((enum ggml_type)id));
        CHECK(brigade_type_bits(id) == bits, "type %u (%s): %g bits in brigade, %g in ggml", id,
              ggml_type_name((enum ggml_type)id), brigade_type_bits(id), bits);
    }
    CHECK(brigade_type_name(GGML_TYPE_COUNT) == NULL, "type %d known to brigade", GGML_TYPE_COUNT);
}

/* --------------------------------------------------- (c) mutation cross-check */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint8_t *make_base(uint32_t alignment, size_t *size)
{
    static const float scores[] = {0, -1, -2, -3.5f, -4};
    static const int32_t types[] = {3, 1, 1, 1, 4};
    static const brigade_string toks[] = {{"<unk>", 5}, {"a", 1}, {"b", 1}, {"ab", 2}, {"\n", 1}};
    static const bool flags[] = {true, false};
    static const tspec ts[] = {
        {"token_embd.weight", GGML_TYPE_F32, 2, {4, 2}},
        {"blk.0.ffn_up.weight", GGML_TYPE_Q8_0, 1, {32}},
        {"blk.0.ffn_down_exps.weight", GGML_TYPE_Q4_K, 2, {256, 1}},
        {"output_norm.weight", GGML_TYPE_F16, 1, {3}},
    };
    const char *path = tmp_path("base.gguf");
    bg_gguf_writer *w = bg_gguf_writer_new(alignment);
    brigade_error err = {0};
    bool ok =
        set(w, "general.architecture", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"qwen35moe", 9}}) &&
        set(w, "qwen35moe.block_count", (brigade_value){.type = BRIGADE_VALUE_U32, .as.u64 = 1}) &&
        set(w, "qwen35moe.attention.layer_norm_rms_epsilon", (brigade_value){.type = BRIGADE_VALUE_F32, .as.f64 = 1e-6}) &&
        set(w, "qwen35moe.expert_count", (brigade_value){.type = BRIGADE_VALUE_U64, .as.u64 = 2}) &&
        set(w, "tokenizer.ggml.model", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"gpt2", 4}}) &&
        set(w, "tokenizer.ggml.tokens", (brigade_value){.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING, .count = 5, .as.strings = toks}) &&
        set(w, "tokenizer.ggml.scores", ARRV(BRIGADE_VALUE_F32, scores, 5)) &&
        set(w, "tokenizer.ggml.token_type", ARRV(BRIGADE_VALUE_I32, types, 5)) &&
        set(w, "tokenizer.ggml.add_bos_token", (brigade_value){.type = BRIGADE_VALUE_BOOL, .as.b = false}) &&
        set(w, "x.i8", (brigade_value){.type = BRIGADE_VALUE_I8, .as.i64 = -1}) &&
        set(w, "x.i16", (brigade_value){.type = BRIGADE_VALUE_I16, .as.i64 = 300}) &&
        set(w, "x.f64", (brigade_value){.type = BRIGADE_VALUE_F64, .as.f64 = 0.5}) &&
        set(w, "x.flags", ARRV(BRIGADE_VALUE_BOOL, flags, 2)) &&
        set(w, "x.empty", (brigade_value){.type = BRIGADE_VALUE_STRING, .as.str = {"", 0}});
    for (size_t i = 0; i < sizeof ts / sizeof *ts && ok; i++)
        ok = bg_gguf_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, &err) == BRIGADE_OK;
    ok = ok && bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK;
    for (size_t i = 0; i < sizeof ts / sizeof *ts && ok; i++)
        for (uint64_t j = 0; j < bg_gguf_writer_tensor_bytes(w, (int64_t)i) && ok; j++) {
            uint8_t x = pattern(i, j);
            ok = bg_gguf_writer_data(w, &x, 1, &err) == BRIGADE_OK;
        }
    ok = ok && bg_gguf_writer_finish(w, &err) == BRIGADE_OK;
    bg_gguf_writer_free(w);
    CHECK(ok, "mutation base: %s", err.message);
    uint8_t *buf = NULL;
    FILE *fp = fopen(path, "rb");
    if (ok && fp) {
        fseek(fp, 0, SEEK_END);
        *size = (size_t)ftell(fp);
        rewind(fp);
        buf = malloc(*size);
        if (fread(buf, 1, *size, fp) != *size) {
            free(buf);
            buf = NULL;
        }
    }
    if (fp)
        fclose(fp);
    unlink(path);
    return buf;
}

static void mutate(uint8_t *p, size_t *n, size_t cap)
{
    static const uint64_t interesting[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 31, 32, 33, 63, 64,
                                           255, 256, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                           1ull << 32, 1ull << 40, 1ull << 62, 1ull << 63,
                                           UINT64_MAX, UINT64_MAX - 31};
    int rounds = 1 + (int)(rnd() % 3);
    for (int r = 0; r < rounds && *n > 0; r++) {
        size_t at = (size_t)(rnd() % *n);
        switch (rnd() % 7) {
        case 0: /* random bytes */
        case 1: {
            int k = 1 + (int)(rnd() % 4);
            for (int i = 0; i < k; i++)
                p[rnd() % *n] = (uint8_t)rnd();
            break;
        }
        case 2: /* an interesting integer, 1/2/4/8 bytes wide */
        case 3: {
            uint64_t v = interesting[rnd() % (sizeof interesting / sizeof *interesting)];
            if (rnd() % 4 == 0)
                v = *n - at + (rnd() % 3) - 1; /* about the bytes left */
            int w = 1 << (rnd() % 4);
            for (int i = 0; i < w && at + (size_t)i < *n; i++)
                p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
            break;
        }
        case 4: /* truncate */
            *n = at;
            break;
        case 5: { /* delete bytes */
            size_t k = 1 + (size_t)(rnd() % 16);
            if (at + k > *n)
                k = *n - at;
            memmove(p + at, p + at + k, *n - at - k);
            *n -= k;
            break;
        }
        case 6: { /* insert bytes */
            size_t k = 1 + (size_t)(rnd() % 16);
            if (*n + k > cap)
                break;
            memmove(p + at + k, p + at, *n - at);
            for (size_t i = 0; i < k; i++)
                p[at + i] = (uint8_t)(rnd() % 3 == 0 ? 0 : rnd());
            *n += k;
            break;
        }
        }
    }
}

/* Why brigade rejected a file ggml accepted: one of the deliberate rules, or
 * NULL. */
static const char *justify(const char *msg, const struct gguf_context *g)
{
    if (strstr(msg, "has 0 dimensions"))
        return "n_dims 0 (ggml: scalar)";
    if (strstr(msg, "it must be positive") && strstr(msg, " is 0;"))
        return "zero dimension (ggml: empty tensor)";
    if (strstr(msg, " holds ") && strstr(msg, ", expected "))
        return "known key of the wrong type";
    if (strstr(msg, "not 0 or 1"))
        return "bool byte not 0/1";
    if (strstr(msg, "contains a NUL byte"))
        return "NUL in a key or tensor name";
    if (strstr(msg, "power of two up to 2^30")) {
        int64_t k = gguf_find_key(g, "general.alignment");
        if (k >= 0 && gguf_get_val_u32(g, k) > (1u << 30))
            return "alignment above 2^30";
    }
    return NULL;
}

#define MAX_CLASSES 32
typedef struct tally {
    const char *name[MAX_CLASSES];
    int count[MAX_CLASSES];
    int n;
} tally;

static void tally_add(tally *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) {
            t->count[i]++;
            return;
        }
    if (t->n < MAX_CLASSES) {
        t->name[t->n] = strdup(name);
        t->count[t->n++] = 1;
    }
}

static void tally_print(const tally *t, const char *title)
{
    printf("  %s:\n", title);
    if (t->n == 0)
        printf("    (none)\n");
    for (int i = 0; i < t->n; i++)
        printf("    %5d  %s\n", t->count[i], t->name[i]);
}

static void tally_free(tally *t)
{
    for (int i = 0; i < t->n; i++)
        free((void *)t->name[i]);
}

/* The reason part of a ggml error line ("gguf_init_from_reader: x: y" -> y
 * with numbers removed), to group them. */
static const char *ggml_reason(void)
{
    static char out[160];
    const char *s = strstr(g_ggml_err, ": ");
    s = s ? s + 2 : g_ggml_err;
    size_t k = 0;
    bool quoted = false;
    for (; *s && *s != '\n' && k + 1 < sizeof out; s++) {
        if (*s == '\'') {
            quoted = !quoted;
            if (quoted)
                out[k++] = '*';
            continue;
        }
        if (quoted || (*s >= '0' && *s <= '9'))
            continue;
        out[k++] = *s;
    }
    out[k] = 0;
    return k ? out : "(no message)";
}

static void test_mutations(int iterations)
{
    size_t n_base[2];
    uint8_t *base[2] = {make_base(0, &n_base[0]), make_base(64, &n_base[1])};
    if (!base[0] || !base[1]) {
        free(base[0]);
        free(base[1]);
        return;
    }
    size_t cap = n_base[1] + 4096;
    uint8_t *work = malloc(cap);
    int both_ok = 0, both_bad = 0, only_brigade = 0, only_ggml = 0, unexplained = 0, bad_msgs = 0,
        mismatched = 0;
    tally justified = {0}, brigade_only = {0};
    for (int it = 0; it < iterations; it++) {
        int which = it & 1;
        size_t n = n_base[which];
        memcpy(work, base[which], n);
        mutate(work, &n, cap);
        /* exact-size copy: an over-read is a sanitizer error */
        uint8_t *bytes = malloc(n ? n : 1);
        memcpy(bytes, work, n);

        brigade_gguf *f = NULL;
        brigade_error err;
        memset(&err, 0, sizeof err);
        brigade_status st = brigade_gguf_open_memory(bytes, n, "mut", &f, &err);
        if (st != BRIGADE_OK && (f != NULL || err.status != st || strncmp(err.message, "mut: ", 5) != 0 ||
                                 (st != BRIGADE_ERR_FORMAT && st != BRIGADE_ERR_UNSUPPORTED))) {
            if (bad_msgs++ < 5)
                CHECK(0, "mutation %d: status %d with message '%s'", it, st, err.message);
        }

        ggml_err_reset();
        struct gguf_context *g = n ? gguf_init_from_buffer(bytes, n, (struct gguf_init_params){.no_alloc = true}) : NULL;
        bool g_ok = g != NULL;
        /* ggml with data: the blob (every tensor, padded) must be in the file */
        if (g && gguf_get_n_tensors(g) > 0) {
            int64_t last = gguf_get_n_tensors(g) - 1;
            uint64_t end = (uint64_t)gguf_get_data_offset(g) + gguf_get_tensor_offset(g, last) +
                           pad_to(gguf_get_tensor_size(g, last), gguf_get_alignment(g));
            if (end > n) {
                g_ok = false;
                snprintf(g_ggml_err, sizeof g_ggml_err,
                         "x: the data blob, padded after the last tensor, runs past the end");
            }
        }

        if (st == BRIGADE_OK && g_ok) {
            both_ok++;
            char why[256] = "";
            if (!same_file(g, f, why, sizeof why) && mismatched++ < 5)
                CHECK(0, "mutation %d: both accept, but they differ: %s", it, why);
        } else if (st != BRIGADE_OK && !g_ok) {
            both_bad++;
        } else if (st == BRIGADE_OK) {
            only_brigade++;
            tally_add(&brigade_only, ggml_reason());
        } else {
            only_ggml++;
            const char *why = justify(err.message, g);
            if (why) {
                tally_add(&justified, why);
            } else if (unexplained++ < 10) {
                CHECK(0, "mutation %d: ggml accepts, brigade says: %s", it, err.message);
            }
        }
        gguf_free(g);
        brigade_gguf_close(f);
        free(bytes);
    }
    CHECK(unexplained == 0, "%d unexplained rejections of files ggml accepts", unexplained);
    CHECK(bad_msgs == 0, "%d rejections without a proper status or message", bad_msgs);
    CHECK(mismatched == 0, "%d files read differently", mismatched);
    CHECK(both_ok > iterations / 20 && both_bad > iterations / 4,
          "mutations too mild or too wild: %d both accepted, %d both rejected", both_ok, both_bad);
    printf("oracle_gguf: %d mutations: %d accepted by both (identical), %d rejected by both,\n"
           "  %d accepted by ggml only, %d accepted by brigade only\n",
           iterations, both_ok, both_bad, only_ggml, only_brigade);
    tally_print(&justified, "ggml accepts, brigade rejects (deliberate)");
    tally_print(&brigade_only, "brigade accepts, ggml rejects (ggml's reason)");
    tally_free(&justified);
    tally_free(&brigade_only);
    free(work);
    free(base[0]);
    free(base[1]);
}

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 20000;
    snprintf(g_dir, sizeof g_dir, "/tmp/brigade_oracle_gguf_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    ggml_log_set(on_ggml_log, NULL);
    test_type_table();
    test_brigade_to_ggml();
    test_ggml_to_brigade(0);
    test_ggml_to_brigade(64);
    test_mutations(iterations);
    rmdir(g_dir);
    return check_summary("oracle_gguf");
}
