/* GGUF writer -> reader round trip.
 *
 * Every value type, arrays of each, string arrays, nested arrays, empty
 * arrays and strings, strings with NUL bytes, several alignments and tensors
 * of many types and shapes are written with the writer and read back three
 * ways (mmap, --no-mmap with progress, memory). Expectations come from the
 * inputs and from this file's own size/layout arithmetic, never from the
 * code under test. A tiny file is compared byte for byte with bytes written
 * out by hand, and misuse of the writer must fail. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *size = (size_t)n;
    return buf;
}

/* ----------------------------------------------------------- expectations */

/* The test's own copy of GGUF block geometry for the types it uses. */
typedef struct tinfo {
    uint32_t id;
    const char *name;
    uint32_t block_elems, block_bytes;
} tinfo;

static const tinfo TYPES[] = {
    {0, "f32", 1, 4},       {1, "f16", 1, 2},        {2, "q4_0", 32, 18},
    {8, "q8_0", 32, 34},    {12, "q4_K", 256, 144},  {14, "q6_K", 256, 210},
    {24, "i8", 1, 1},       {26, "i32", 1, 4},       {28, "f64", 1, 8},
    {30, "bf16", 1, 2},     {39, "mxfp4", 32, 17},   {23, "iq4_xs", 256, 136},
    {3, "q4_1", 32, 20},    {10, "q2_K", 256, 84},   {27, "i64", 1, 8},
};

static const tinfo *tinfo_of(uint32_t id)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++)
        if (TYPES[i].id == id)
            return &TYPES[i];
    return NULL;
}

typedef struct tspec {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
} tspec;

#define NAME63 "blk.0.a_tensor_name_that_is_exactly_sixty_three_bytes_long_xxxx"

static const tspec TENSORS[] = {
    {"token_embd.weight", 0, 1, {7}},
    {"blk.0.attn_norm.weight", 1, 2, {3, 5}},
    {"blk.0.q40", 2, 2, {64, 3}},
    {"blk.0.q80", 8, 3, {32, 2, 3}},
    {"blk.0.ffn_down_exps.weight", 12, 4, {256, 2, 1, 3}},
    {"blk.1.q6k", 14, 1, {512}},
    {"i8", 24, 4, {5, 1, 1, 2}},
    {"i32", 26, 2, {4, 4}},
    {"f64", 28, 1, {3}},
    {"bf16", 30, 3, {2, 2, 2}},
    {"mxfp4", 39, 2, {32, 1}},
    {"iq4_xs", 23, 3, {256, 1, 2}},
    {"q4_1", 3, 1, {96}},
    {"q2_K", 10, 2, {256, 2}},
    {"i64", 27, 1, {1}},
    {NAME63, 0, 1, {1}},
};
#define N_TENSORS (sizeof TENSORS / sizeof *TENSORS)

static uint64_t spec_elements(const tspec *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        n *= t->ne[d];
    return n;
}

static uint64_t spec_bytes(const tspec *t)
{
    const tinfo *ti = tinfo_of(t->type);
    return spec_elements(t) / ti->block_elems * ti->block_bytes;
}

static uint8_t pattern(size_t tensor, uint64_t i)
{
    return (uint8_t)(i * 7 + tensor * 13 + (i >> 8) + 1);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Metadata to write. Values point at static storage. */
typedef struct kspec {
    const char *key;
    brigade_value v;
} kspec;

static const uint8_t A_U8[] = {0, 1, 255, 128};
static const int8_t A_I8[] = {-128, 0, 127, -1};
static const uint16_t A_U16[] = {0, 65535, 1234};
static const int16_t A_I16[] = {-32768, 32767, -1};
static const uint32_t A_U32[] = {0, UINT32_MAX, 123456789};
static const int32_t A_I32[] = {INT32_MIN, INT32_MAX, -7, 0};
static float A_F32[] = {0.5f, -0.0f, 1e30f, 0 /* inf */, 1e-40f /* subnormal */};
static const bool A_BOOL[] = {true, false, true, true};
static const uint64_t A_U64[] = {UINT64_MAX, 0, 1ull << 40};
static const int64_t A_I64[] = {INT64_MIN, INT64_MAX, -1};
static double A_F64[] = {1e-300, -2.5, 0 /* nan */};
static const brigade_string A_STR[] = {
    {"", 0}, {"a", 1}, {"two\0nul\0", 8}, {"\xc3\xa9t\xc3\xa9", 6}, {"<|im_start|>", 12},
};
static const brigade_string A_STR_EMPTY[1] = {{"", 0}};

/* nested: [[1,2,3] (u8), ["x","","a\0b"] (string), [[-1] (i64), [] (f32)], [] (u16)] */
static const uint8_t N_U8[] = {1, 2, 3};
static const brigade_string N_STR[] = {{"x", 1}, {"", 0}, {"a\0b", 3}};
static const int64_t N_I64[] = {-1};
static const brigade_value N_INNER[] = {
    {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_I64, .count = 1, .as.numbers = N_I64},
    {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_F32, .count = 0, .as.numbers = A_F32},
};
static const brigade_value N_ITEMS[] = {
    {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_U8, .count = 3, .as.numbers = N_U8},
    {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING, .count = 3,
     .as.strings = N_STR},
    {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_ARRAY, .count = 2, .as.items = N_INNER},
    {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_U16, .count = 0, .as.numbers = A_U16},
};

/* 8 levels of arrays (the reader's limit), innermost [42] (u32). */
static const uint32_t DEEP_LEAF[] = {42};
static brigade_value DEEP[8];

static char LONG_STR[10000];
static brigade_string MANY_STR[1000];
static char MANY_BUF[1000][8];

#define ARR(et, arr, n) {.type = BRIGADE_VALUE_ARRAY, .elem_type = (et), .count = (n), .as.numbers = (arr)}
#define COUNT(a) (sizeof(a) / sizeof *(a))

static kspec KVS[] = {
    {"general.architecture", {.type = BRIGADE_VALUE_STRING, .as.str = {"qwen35moe", 9}}},
    {"qwen35moe.block_count", {.type = BRIGADE_VALUE_U32, .as.u64 = 40}},
    {"t.u8", {.type = BRIGADE_VALUE_U8, .as.u64 = 200}},
    {"t.i8", {.type = BRIGADE_VALUE_I8, .as.i64 = -100}},
    {"t.u16", {.type = BRIGADE_VALUE_U16, .as.u64 = 60000}},
    {"t.i16", {.type = BRIGADE_VALUE_I16, .as.i64 = -30000}},
    {"t.u32", {.type = BRIGADE_VALUE_U32, .as.u64 = 4000000000u}},
    {"t.i32", {.type = BRIGADE_VALUE_I32, .as.i64 = -2000000000}},
    {"t.f32", {.type = BRIGADE_VALUE_F32, .as.f64 = 0.1f}},
    {"t.bool.true", {.type = BRIGADE_VALUE_BOOL, .as.b = true}},
    {"t.bool.false", {.type = BRIGADE_VALUE_BOOL, .as.b = false}},
    {"t.string", {.type = BRIGADE_VALUE_STRING, .as.str = {"hello, gguf", 11}}},
    {"t.u64", {.type = BRIGADE_VALUE_U64, .as.u64 = 0x8000000000000005ull}},
    {"t.i64", {.type = BRIGADE_VALUE_I64, .as.i64 = INT64_MIN + 3}},
    {"t.f64", {.type = BRIGADE_VALUE_F64, .as.f64 = -1.0 / 3.0}},
    {"t.string.empty", {.type = BRIGADE_VALUE_STRING, .as.str = {"", 0}}},
    {"t.string.nul", {.type = BRIGADE_VALUE_STRING, .as.str = {"ab\0cd\0", 6}}},
    {"t.string.long", {.type = BRIGADE_VALUE_STRING, .as.str = {LONG_STR, sizeof LONG_STR}}},
    {"a.u8", ARR(BRIGADE_VALUE_U8, A_U8, COUNT(A_U8))},
    {"a.i8", ARR(BRIGADE_VALUE_I8, A_I8, COUNT(A_I8))},
    {"a.u16", ARR(BRIGADE_VALUE_U16, A_U16, COUNT(A_U16))},
    {"a.i16", ARR(BRIGADE_VALUE_I16, A_I16, COUNT(A_I16))},
    {"a.u32", ARR(BRIGADE_VALUE_U32, A_U32, COUNT(A_U32))},
    {"a.i32", ARR(BRIGADE_VALUE_I32, A_I32, COUNT(A_I32))},
    {"a.f32", ARR(BRIGADE_VALUE_F32, A_F32, COUNT(A_F32))},
    {"a.bool", ARR(BRIGADE_VALUE_BOOL, A_BOOL, COUNT(A_BOOL))},
    {"a.u64", ARR(BRIGADE_VALUE_U64, A_U64, COUNT(A_U64))},
    {"a.i64", ARR(BRIGADE_VALUE_I64, A_I64, COUNT(A_I64))},
    {"a.f64", ARR(BRIGADE_VALUE_F64, A_F64, COUNT(A_F64))},
    {"a.string", {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                  .count = COUNT(A_STR), .as.strings = A_STR}},
    {"a.string.many", {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                       .count = COUNT(MANY_STR), .as.strings = MANY_STR}},
    {"a.empty.u32", ARR(BRIGADE_VALUE_U32, A_U32, 0)},
    {"a.empty.f64", ARR(BRIGADE_VALUE_F64, A_F64, 0)},
    {"a.empty.string", {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                        .count = 0, .as.strings = A_STR_EMPTY}},
    {"a.empty.array", {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_ARRAY, .count = 0,
                       .as.items = N_ITEMS}},
    {"a.nested", {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_ARRAY,
                  .count = COUNT(N_ITEMS), .as.items = N_ITEMS}},
    {"a.deep", {0}}, /* filled with DEEP[0] */
    {"tokenizer.ggml.model", {.type = BRIGADE_VALUE_STRING, .as.str = {"gpt2", 4}}},
    {"tokenizer.ggml.tokens", {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                               .count = COUNT(A_STR), .as.strings = A_STR}},
    {"x", {.type = BRIGADE_VALUE_U8, .as.u64 = 0}}, /* one-byte key */
};
#define N_KVS (sizeof KVS / sizeof *KVS)

static void init_data(void)
{
    A_F32[3] = INFINITY;
    A_F64[2] = NAN;
    for (size_t i = 0; i < sizeof LONG_STR; i++)
        LONG_STR[i] = (char)('a' + i % 26);
    for (size_t i = 0; i < COUNT(MANY_STR); i++) {
        int n = snprintf(MANY_BUF[i], sizeof MANY_BUF[i], "t%zu", i * 37 % 100000);
        MANY_STR[i].ptr = MANY_BUF[i];
        MANY_STR[i].len = (uint64_t)n;
    }
    for (int d = 7; d >= 0; d--) {
        DEEP[d].type = BRIGADE_VALUE_ARRAY;
        DEEP[d].count = 1;
        if (d == 7) {
            DEEP[d].elem_type = BRIGADE_VALUE_U32;
            DEEP[d].as.numbers = DEEP_LEAF;
        } else {
            DEEP[d].elem_type = BRIGADE_VALUE_ARRAY;
            DEEP[d].as.items = &DEEP[d + 1];
        }
    }
    for (size_t i = 0; i < N_KVS; i++)
        if (strcmp(KVS[i].key, "a.deep") == 0)
            KVS[i].v = DEEP[0];
}

/* --------------------------------------------------- independent layout */

static uint64_t scalar_size(brigade_value_type t)
{
    switch (t) {
    case BRIGADE_VALUE_U8: case BRIGADE_VALUE_I8: case BRIGADE_VALUE_BOOL: return 1;
    case BRIGADE_VALUE_U16: case BRIGADE_VALUE_I16: return 2;
    case BRIGADE_VALUE_U32: case BRIGADE_VALUE_I32: case BRIGADE_VALUE_F32: return 4;
    case BRIGADE_VALUE_U64: case BRIGADE_VALUE_I64: case BRIGADE_VALUE_F64: return 8;
    default: return 0;
    }
}

/* Bytes a value's payload takes on disk (without its own type tag). */
static uint64_t payload_size(const brigade_value *v)
{
    if (v->type == BRIGADE_VALUE_STRING)
        return 8 + v->as.str.len;
    if (v->type != BRIGADE_VALUE_ARRAY)
        return scalar_size(v->type);
    uint64_t n = 4 + 8;
    if (scalar_size(v->elem_type))
        return n + v->count * scalar_size(v->elem_type);
    for (uint64_t i = 0; i < v->count; i++)
        n += v->elem_type == BRIGADE_VALUE_STRING ? 8 + v->as.strings[i].len
                                                  : payload_size(&v->as.items[i]);
    return n;
}

/* ------------------------------------------------------------ comparison */

static bool is_signed(brigade_value_type t)
{
    return t == BRIGADE_VALUE_I8 || t == BRIGADE_VALUE_I16 || t == BRIGADE_VALUE_I32 ||
           t == BRIGADE_VALUE_I64;
}

static bool str_eq(brigade_string a, brigade_string b)
{
    return a.len == b.len && b.ptr && memcmp(a.ptr, b.ptr, a.len) == 0 && b.ptr[b.len] == '\0';
}

/* Deep equality; for floats the bits must match (NaN, -0.0 included). */
static bool value_eq(const brigade_value *want, const brigade_value *got, const char *key)
{
    if (want->type != got->type) {
        fprintf(stderr, "  %s: type %d, expected %d\n", key, got->type, want->type);
        return false;
    }
    switch (want->type) {
    case BRIGADE_VALUE_STRING: return str_eq(want->as.str, got->as.str);
    case BRIGADE_VALUE_BOOL: return want->as.b == got->as.b;
    case BRIGADE_VALUE_F32: {
        float w = (float)want->as.f64;
        double wd = w;
        return memcmp(&wd, &got->as.f64, sizeof wd) == 0;
    }
    case BRIGADE_VALUE_F64: return memcmp(&want->as.f64, &got->as.f64, sizeof(double)) == 0;
    case BRIGADE_VALUE_ARRAY: break;
    default:
        if (is_signed(want->type))
            return want->as.i64 == got->as.i64;
        return want->as.u64 == got->as.u64;
    }
    if (want->elem_type != got->elem_type || want->count != got->count) {
        fprintf(stderr, "  %s: array of %d x %llu, expected %d x %llu\n", key, got->elem_type,
                (unsigned long long)got->count, want->elem_type, (unsigned long long)want->count);
        return false;
    }
    uint64_t es = scalar_size(want->elem_type);
    if (es)
        return want->count == 0 ||
               (got->as.numbers && memcmp(want->as.numbers, got->as.numbers, want->count * es) == 0);
    for (uint64_t i = 0; i < want->count; i++) {
        if (want->elem_type == BRIGADE_VALUE_STRING) {
            if (!str_eq(want->as.strings[i], got->as.strings[i]))
                return false;
        } else if (!value_eq(&want->as.items[i], &got->as.items[i], key)) {
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------ round trip */

typedef struct progress_log {
    int calls;
    uint64_t last_done, total;
    bool monotonic, bounded;
} progress_log;

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    progress_log *p = user;
    if (p->calls && done < p->last_done)
        p->monotonic = false;
    if (done > total)
        p->bounded = false;
    p->calls++;
    p->last_done = done;
    p->total = total;
}

/* Writes the full test file with the given alignment (0 = default). Data
 * goes in pieces of `chunk` bytes that straddle tensor boundaries. */
static bool write_full(const char *path, uint32_t alignment, size_t chunk, uint64_t *data_total)
{
    brigade_error err = {0};
    bg_gguf_writer *w = bg_gguf_writer_new(alignment);
    CHECK(w != NULL, "writer_new");
    if (!w)
        return false;
    bool ok = true;
    for (size_t i = 0; i < N_KVS && ok; i++) {
        brigade_status st = bg_gguf_set(w, KVS[i].key, &KVS[i].v, &err);
        CHECK(st == BRIGADE_OK, "set %s: %s", KVS[i].key, err.message);
        ok = st == BRIGADE_OK;
    }
    for (size_t i = 0; i < N_TENSORS && ok; i++) {
        const tspec *t = &TENSORS[i];
        brigade_status st = bg_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
        CHECK(st == BRIGADE_OK, "add_tensor %s: %s", t->name, err.message);
        ok = st == BRIGADE_OK;
        if (ok)
            CHECK(bg_gguf_writer_tensor_bytes(w, (int64_t)i) == spec_bytes(t),
                  "tensor_bytes %s = %llu, expected %llu", t->name,
                  (unsigned long long)bg_gguf_writer_tensor_bytes(w, (int64_t)i),
                  (unsigned long long)spec_bytes(t));
    }
    CHECK(bg_gguf_writer_tensor_count(w) == (int64_t)N_TENSORS, "writer tensor count");
    uint64_t predicted = bg_gguf_writer_file_size(w);
    /* The concatenated tensor data, streamed in pieces. */
    uint64_t total = 0;
    for (size_t i = 0; i < N_TENSORS; i++)
        total += spec_bytes(&TENSORS[i]);
    uint8_t *all = malloc(total);
    uint64_t at = 0;
    for (size_t i = 0; i < N_TENSORS; i++)
        for (uint64_t j = 0; j < spec_bytes(&TENSORS[i]); j++)
            all[at++] = pattern(i, j);
    *data_total = total;
    if (ok) {
        brigade_status st = bg_gguf_writer_begin(w, path, &err);
        CHECK(st == BRIGADE_OK, "begin: %s", err.message);
        ok = st == BRIGADE_OK;
    }
    for (uint64_t off = 0; ok && off < total; off += chunk) {
        uint64_t n = total - off < chunk ? total - off : chunk;
        brigade_status st = bg_gguf_writer_data(w, all + off, n, &err);
        CHECK(st == BRIGADE_OK, "data at %llu: %s", (unsigned long long)off, err.message);
        ok = st == BRIGADE_OK;
    }
    if (ok) {
        brigade_status st = bg_gguf_writer_finish(w, &err);
        CHECK(st == BRIGADE_OK, "finish: %s", err.message);
        ok = st == BRIGADE_OK;
    }
    free(all);
    bg_gguf_writer_free(w);
    struct stat sb;
    if (ok && stat(path, &sb) == 0)
        CHECK((uint64_t)sb.st_size == predicted,
              "align %u: file size %lld, but bg_gguf_writer_file_size before begin said %llu",
              alignment, (long long)sb.st_size, (unsigned long long)predicted);
    return ok;
}

/* Checks everything in an opened file against the inputs. */
static void verify(const brigade_gguf *f, uint32_t alignment, uint64_t file_size,
                   const uint8_t *raw, const char *how)
{
    uint32_t A = alignment ? alignment : 32;
    CHECK(brigade_gguf_version(f) == 3, "%s: version %u", how, brigade_gguf_version(f));
    CHECK(brigade_gguf_file_size(f) == file_size, "%s: file size", how);
    CHECK(brigade_gguf_alignment(f) == A, "%s: alignment %u, expected %u", how,
          brigade_gguf_alignment(f), A);

    /* Keys in insertion order; a non-default alignment is added last. */
    int64_t want_kv = (int64_t)N_KVS + (A != 32);
    CHECK(brigade_gguf_kv_count(f) == want_kv, "%s: %lld keys, expected %lld", how,
          (long long)brigade_gguf_kv_count(f), (long long)want_kv);
    uint64_t header = 4 + 4 + 8 + 8;
    for (size_t i = 0; i < N_KVS; i++) {
        const char *key = brigade_gguf_kv_key(f, (int64_t)i);
        const brigade_value *v = brigade_gguf_kv_value(f, (int64_t)i);
        CHECK(key && strcmp(key, KVS[i].key) == 0, "%s: key %zu is '%s', expected '%s'", how, i,
              key ? key : "(null)", KVS[i].key);
        CHECK(v && brigade_gguf_get(f, KVS[i].key) == v, "%s: get(%s)", how, KVS[i].key);
        CHECK(v && value_eq(&KVS[i].v, v, KVS[i].key), "%s: value of '%s' differs", how,
              KVS[i].key);
        header += 8 + strlen(KVS[i].key) + 4 + payload_size(&KVS[i].v);
    }
    if (A != 32) {
        const brigade_value *v = brigade_gguf_get(f, "general.alignment");
        CHECK(v && v->type == BRIGADE_VALUE_U32 && v->as.u64 == A, "%s: general.alignment", how);
        CHECK(brigade_gguf_kv_key(f, want_kv - 1) &&
                  strcmp(brigade_gguf_kv_key(f, want_kv - 1), "general.alignment") == 0,
              "%s: general.alignment is not the last key", how);
        header += 8 + strlen("general.alignment") + 4 + 4;
    }
    CHECK(brigade_gguf_get(f, "no.such.key") == NULL, "%s: absent key found", how);
    CHECK(brigade_gguf_kv_key(f, want_kv) == NULL && brigade_gguf_kv_key(f, -1) == NULL,
          "%s: kv index out of range", how);

    for (size_t i = 0; i < N_TENSORS; i++)
        header += 8 + strlen(TENSORS[i].name) + 4 + 8 * TENSORS[i].n_dims + 4 + 8;
    uint64_t data_offset = align_up(header, A);
    CHECK(brigade_gguf_data_offset(f) == data_offset, "%s: data offset %llu, expected %llu", how,
          (unsigned long long)brigade_gguf_data_offset(f), (unsigned long long)data_offset);

    CHECK(brigade_gguf_tensor_count(f) == (int64_t)N_TENSORS, "%s: tensor count", how);
    uint64_t rel = 0;
    for (size_t i = 0; i < N_TENSORS && brigade_gguf_tensor_count(f) == (int64_t)N_TENSORS; i++) {
        const tspec *s = &TENSORS[i];
        const brigade_tensor_info *t = brigade_gguf_tensor(f, (int64_t)i);
        CHECK(strcmp(t->name, s->name) == 0, "%s: tensor %zu name '%s'", how, i, t->name);
        CHECK(brigade_gguf_find_tensor(f, s->name) == t, "%s: find_tensor(%s)", how, s->name);
        CHECK(t->type == s->type, "%s: %s type %u", how, s->name, t->type);
        CHECK(brigade_type_name(t->type) && strcmp(brigade_type_name(t->type),
                                                   tinfo_of(s->type)->name) == 0,
              "%s: %s type name", how, s->name);
        CHECK(t->n_dims == s->n_dims, "%s: %s n_dims %u", how, s->name, t->n_dims);
        for (unsigned d = 0; d < 4; d++) {
            uint64_t want = d < s->n_dims ? s->ne[d] : 1;
            CHECK(t->ne[d] == want, "%s: %s ne[%u] = %llu, expected %llu", how, s->name, d,
                  (unsigned long long)t->ne[d], (unsigned long long)want);
        }
        CHECK(t->n_elements == spec_elements(s), "%s: %s n_elements", how, s->name);
        uint64_t nb = spec_bytes(s);
        CHECK(t->n_bytes == nb, "%s: %s n_bytes %llu, expected %llu", how, s->name,
              (unsigned long long)t->n_bytes, (unsigned long long)nb);
        CHECK(t->offset == data_offset + rel, "%s: %s offset %llu, expected %llu", how, s->name,
              (unsigned long long)t->offset, (unsigned long long)(data_offset + rel));
        CHECK(t->offset % A == 0, "%s: %s offset %llu not aligned to %u", how, s->name,
              (unsigned long long)t->offset, A);
        bool same = t->data != NULL;
        for (uint64_t j = 0; same && j < nb; j++)
            same = ((const uint8_t *)t->data)[j] == pattern(i, j);
        CHECK(same, "%s: %s data differs", how, s->name);
        if (raw)
            CHECK((const uint8_t *)t->data == raw + t->offset, "%s: %s data pointer", how,
                  s->name);
        /* Padding after each tensor is zero. */
        bool zero = true;
        const uint8_t *base = (const uint8_t *)t->data - t->offset;
        for (uint64_t j = t->offset + nb; zero && j < align_up(t->offset + nb, A); j++)
            zero = base[j] == 0;
        CHECK(zero, "%s: padding after %s is not zero", how, s->name);
        rel += align_up(nb, A);
    }
    CHECK(file_size == data_offset + rel, "%s: file size %llu, expected %llu", how,
          (unsigned long long)file_size, (unsigned long long)(data_offset + rel));
    CHECK(brigade_gguf_find_tensor(f, "missing") == NULL, "%s: absent tensor found", how);
    CHECK(brigade_gguf_tensor(f, (int64_t)N_TENSORS) == NULL, "%s: tensor index out of range",
          how);
}

static void test_round_trip(uint32_t alignment, size_t chunk)
{
    char name[64];
    snprintf(name, sizeof name, "rt_%u.gguf", alignment);
    const char *path = tmp_path(name);
    uint64_t data_total = 0;
    if (!write_full(path, alignment, chunk, &data_total))
        return;
    size_t size = 0;
    uint8_t *raw = read_file(path, &size);
    CHECK(raw != NULL, "read back %s", path);
    if (!raw)
        return;

    brigade_error err = {0};
    brigade_gguf *f = NULL;
    brigade_status st = brigade_gguf_open(path, NULL, &f, &err);
    CHECK(st == BRIGADE_OK, "open (mmap) align %u: %s", alignment, err.message);
    if (f) {
        verify(f, alignment, size, NULL, "mmap");
        brigade_gguf_close(f);
    }

    progress_log p = {.monotonic = true, .bounded = true};
    brigade_gguf_options opts = {.no_mmap = true, .progress = on_progress, .progress_user = &p};
    st = brigade_gguf_open(path, &opts, &f, &err);
    CHECK(st == BRIGADE_OK, "open (no_mmap) align %u: %s", alignment, err.message);
    if (f) {
        verify(f, alignment, size, NULL, "no_mmap");
        brigade_gguf_close(f);
    }
    CHECK(p.calls >= 1, "progress never called");
    CHECK(p.monotonic && p.bounded, "progress not monotonic or beyond total");
    CHECK(p.total == size && p.last_done == size, "progress ended at %llu/%llu, file has %zu",
          (unsigned long long)p.last_done, (unsigned long long)p.total, size);

    st = brigade_gguf_open_memory(raw, size, "mem", &f, &err);
    CHECK(st == BRIGADE_OK, "open_memory align %u: %s", alignment, err.message);
    if (f) {
        verify(f, alignment, size, raw, "memory");
        brigade_gguf_close(f);
    }
    free(raw);
    unlink(path);
}

/* ------------------------------------------------------ byte-exact layout */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_exact_bytes(void)
{
    /* One u32 key "a" = 0x01020304 and one f32 tensor "t" of 2 elements
     * {1.0, -2.0}, default alignment 32. Laid out by hand:
     *   0  "GGUF"  4  version 3  8  n_tensors 1  16  n_kv 1
     *   24 key len 1, 32 'a', 33 type 4 (u32), 37 value 04 03 02 01
     *   41 name len 1, 49 't', 50 n_dims 1, 54 ne0 2, 62 type 0, 66 offset 0
     *   74 zero padding to 96, 96 data (8 bytes), 104 padding to 128. */
    static const uint8_t head[74] = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0,         /* magic, version */
        1, 0, 0, 0, 0, 0, 0, 0,                 /* n_tensors */
        1, 0, 0, 0, 0, 0, 0, 0,                 /* n_kv */
        1, 0, 0, 0, 0, 0, 0, 0, 'a',            /* key */
        4, 0, 0, 0, 0x04, 0x03, 0x02, 0x01,     /* u32 value */
        1, 0, 0, 0, 0, 0, 0, 0, 't',            /* tensor name */
        1, 0, 0, 0,                             /* n_dims */
        2, 0, 0, 0, 0, 0, 0, 0,                 /* ne0 */
        0, 0, 0, 0,                             /* type f32 */
        0, 0, 0, 0, 0, 0, 0, 0,                 /* offset */
    };
    uint8_t want[128] = {0};
    memcpy(want, head, sizeof head);
    static const uint8_t data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    memcpy(want + 96, data, sizeof data);

    const char *path = tmp_path("exact.gguf");
    brigade_error err = {0};
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    uint64_t ne[1] = {2};
    float vals[2] = {1.0f, -2.0f};
    bool ok = bg_gguf_set_u32(w, "a", 0x01020304u, &err) == BRIGADE_OK &&
              bg_gguf_add_tensor(w, "t", 0, 1, ne, &err) == BRIGADE_OK &&
              bg_gguf_writer_file_size(w) == sizeof want &&
              bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK &&
              bg_gguf_writer_data(w, vals, 3, &err) == BRIGADE_OK &&
              bg_gguf_writer_data(w, (uint8_t *)vals + 3, 5, &err) == BRIGADE_OK &&
              bg_gguf_writer_finish(w, &err) == BRIGADE_OK;
    CHECK(ok, "exact: writing failed: %s", err.message);
    bg_gguf_writer_free(w);
    size_t size = 0;
    uint8_t *got = read_file(path, &size);
    CHECK(got && size == sizeof want, "exact: file has %zu bytes, expected %zu", size, sizeof want);
    if (got && size == sizeof want) {
        size_t first = 0;
        while (first < size && got[first] == want[first])
            first++;
        CHECK(first == size, "exact: first difference at byte %zu (got %02x, want %02x)", first,
              first < size ? got[first] : 0, first < size ? want[first] : 0);
    }
    free(got);
    unlink(path);

    /* No tensors, alignment 64: string key "s" = "xy", then the writer adds
     * general.alignment = 64 (u32) last; the header is padded to 64.
     *   24 len 1, 32 's', 33 type 8, 37 len 2, 45 "xy"
     *   47 len 17, 55 "general.alignment", 72 type 4, 76 value 64, 80 pad. */
    uint8_t want2[128] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    uint8_t *p = want2 + 24;
    *p = 1, p += 8, *p++ = 's', put_u32(p, 8), p += 4, *p = 2, p += 8, *p++ = 'x', *p++ = 'y';
    *p = 17, p += 8, memcpy(p, "general.alignment", 17), p += 17;
    put_u32(p, 4), p += 4, put_u32(p, 64), p += 4;
    CHECK(p - want2 == 80, "exact2: hand layout is %td bytes", p - want2);
    path = tmp_path("exact2.gguf");
    w = bg_gguf_writer_new(64);
    ok = bg_gguf_set_str(w, "s", "xy", &err) == BRIGADE_OK &&
         bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK &&
         bg_gguf_writer_finish(w, &err) == BRIGADE_OK;
    CHECK(ok, "exact2: writing failed: %s", err.message);
    bg_gguf_writer_free(w);
    got = read_file(path, &size);
    CHECK(got && size == sizeof want2 && memcmp(got, want2, size) == 0,
          "exact2: file (%zu bytes) differs from the hand layout", size);
    free(got);
    unlink(path);
}

/* ---------------------------------------------------------------- misuse */

static void test_misuse(void)
{
    brigade_error err = {0};
    uint64_t ne[4] = {32, 2, 1, 1};
    const char *path = tmp_path("misuse.gguf");

    bg_gguf_writer *w = bg_gguf_writer_new(0);
    CHECK(bg_gguf_add_tensor(w, "dup", 0, 2, ne, &err) == BRIGADE_OK, "first add");
    brigade_status st = bg_gguf_add_tensor(w, "dup", 0, 2, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'dup'"),
          "duplicate tensor: %d %s", st, err.message);
    char long_name[65];
    memset(long_name, 'n', 64);
    long_name[64] = 0;
    st = bg_gguf_add_tensor(w, long_name, 0, 1, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG, "64-byte name accepted");
    st = bg_gguf_add_tensor(w, "", 0, 1, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG, "empty name accepted");
    st = bg_gguf_add_tensor(w, "d0", 0, 0, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'d0'"), "0 dims: %s", err.message);
    st = bg_gguf_add_tensor(w, "d5", 0, 5, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'d5'"), "5 dims: %s", err.message);
    uint64_t zero[2] = {4, 0};
    st = bg_gguf_add_tensor(w, "z", 0, 2, zero, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'z'"), "zero dim: %s", err.message);
    uint64_t odd[1] = {100};
    st = bg_gguf_add_tensor(w, "q4k", 12, 1, odd, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'q4k'"), "row not whole blocks: %s",
          err.message);
    st = bg_gguf_add_tensor(w, "retired", 4, 1, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'retired'"), "retired type 4: %s",
          err.message);
    uint64_t huge[2] = {1ull << 62, 1ull << 62};
    st = bg_gguf_add_tensor(w, "huge", 0, 2, huge, &err);
    CHECK(st == BRIGADE_ERR_ARG, "overflowing tensor accepted");
    st = bg_gguf_set_u32(w, "", 1, &err);
    CHECK(st == BRIGADE_ERR_ARG, "empty key accepted");
    st = bg_gguf_set_array(w, "arr", BRIGADE_VALUE_STRING, A_STR, 2, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'arr'"), "string set_array: %s",
          err.message);
    brigade_value too_deep = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_ARRAY,
                              .count = 1, .as.items = DEEP};
    st = bg_gguf_set(w, "deep9", &too_deep, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'deep9'"), "9-deep array: %s",
          err.message);
    st = bg_gguf_writer_data(w, "x", 1, &err);
    CHECK(st == BRIGADE_ERR_ARG, "data before begin accepted");
    st = bg_gguf_writer_finish(w, &err);
    CHECK(st == BRIGADE_ERR_ARG, "finish before begin accepted");
    /* Setting a key again replaces it in place. */
    CHECK(bg_gguf_set_u32(w, "k", 1, &err) == BRIGADE_OK, "set k");
    CHECK(bg_gguf_set_str(w, "k2", "v", &err) == BRIGADE_OK, "set k2");
    CHECK(bg_gguf_set_f32(w, "k", 2.5f, &err) == BRIGADE_OK, "reset k");

    CHECK(bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK, "begin: %s", err.message);
    st = bg_gguf_writer_begin(w, path, &err);
    CHECK(st == BRIGADE_ERR_ARG, "begin twice accepted");
    st = bg_gguf_set_u32(w, "late", 1, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'late'"), "set after begin: %s",
          err.message);
    st = bg_gguf_add_tensor(w, "late", 0, 1, ne, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'late'"), "add after begin: %s",
          err.message);
    uint8_t buf[300] = {0};
    CHECK(bg_gguf_writer_data(w, buf, 100, &err) == BRIGADE_OK, "partial data");
    st = bg_gguf_writer_finish(w, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "'dup'") &&
              contains(err.message, "100 of its 256"),
          "finish with missing data: %d %s", st, err.message);
    CHECK(bg_gguf_writer_data(w, buf, 156, &err) == BRIGADE_OK, "rest of data");
    st = bg_gguf_writer_data(w, buf, 1, &err);
    CHECK(st == BRIGADE_ERR_ARG && contains(err.message, "beyond the last tensor"),
          "data beyond the last tensor: %d %s", st, err.message);
    CHECK(bg_gguf_writer_finish(w, &err) == BRIGADE_OK, "finish: %s", err.message);
    bg_gguf_writer_free(w);

    brigade_gguf *f = NULL;
    st = brigade_gguf_open(path, NULL, &f, &err);
    /* Every failed call above must have left the writer as it was. */
    CHECK(st == BRIGADE_OK, "misuse file does not open (a failed call left something behind): %s",
          err.message);
    if (f) {
        CHECK(brigade_gguf_get(f, "deep9") == NULL, "failed set left key 'deep9' behind");
        CHECK(brigade_gguf_kv_count(f) == 2 && strcmp(brigade_gguf_kv_key(f, 0), "k") == 0,
              "replaced key moved or duplicated");
        const brigade_value *v = brigade_gguf_get(f, "k");
        CHECK(v && v->type == BRIGADE_VALUE_F32 && v->as.f64 == 2.5, "replaced key value");
        CHECK(brigade_gguf_tensor_count(f) == 1, "only the valid tensor was added");
        brigade_gguf_close(f);
    }
    unlink(path);

    /* Whatever the writer accepts, the reader must be able to read. */
    struct {
        const char *what;
        uint32_t alignment;
        const char *key; /* set to value (if not NULL) */
        brigade_value value;
    } cases[] = {
        {"a value of unknown type 13", 0, "bad.type", {.type = 13, .as.u64 = 5}},
        {"an array of unknown element type 13", 0, "bad.elem",
         {.type = BRIGADE_VALUE_ARRAY, .elem_type = 13, .count = 1, .as.numbers = A_U32}},
        {"general.alignment = 64 set by hand (writer alignment 32)", 0, "general.alignment",
         {.type = BRIGADE_VALUE_U32, .as.u64 = 64}},
        {"general.alignment = 128 set by hand (writer alignment 64)", 64, "general.alignment",
         {.type = BRIGADE_VALUE_U32, .as.u64 = 128}},
        {"general.alignment as a string", 0, "general.alignment",
         {.type = BRIGADE_VALUE_STRING, .as.str = {"64", 2}}},
        {"writer alignment 48 (not a power of two)", 48, NULL, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        path = tmp_path("accepted.gguf");
        w = bg_gguf_writer_new(cases[i].alignment);
        if (!w)
            continue; /* refusing the writer is a fine answer */
        bool refused = false;
        if (cases[i].key)
            refused = bg_gguf_set(w, cases[i].key, &cases[i].value, &err) != BRIGADE_OK;
        uint64_t ne2[2] = {8, 1};
        float zeros[16] = {0};
        refused = refused || bg_gguf_add_tensor(w, "a", 0, 2, ne2, &err) != BRIGADE_OK ||
                  bg_gguf_add_tensor(w, "b", 0, 2, ne2, &err) != BRIGADE_OK ||
                  bg_gguf_writer_begin(w, path, &err) != BRIGADE_OK ||
                  bg_gguf_writer_data(w, zeros, sizeof zeros, &err) != BRIGADE_OK ||
                  bg_gguf_writer_finish(w, &err) != BRIGADE_OK;
        bg_gguf_writer_free(w);
        if (!refused) {
            st = brigade_gguf_open(path, NULL, &f, &err);
            CHECK(st == BRIGADE_OK, "writer accepted %s, but wrote a file the reader rejects: %s",
                  cases[i].what, err.message);
            brigade_gguf_close(f);
            f = NULL;
        }
        unlink(path);
    }

    /* Creating a file in a directory that does not exist. */
    w = bg_gguf_writer_new(0);
    st = bg_gguf_writer_begin(w, tmp_path("no/such/dir.gguf"), &err);
    CHECK(st == BRIGADE_ERR_IO && contains(err.message, "no/such/dir.gguf"), "begin in missing "
          "dir: %d %s", st, err.message);
    bg_gguf_writer_free(w);
}

/* ------------------------------------------------------- typed getters */

static void test_getters(void)
{
    const char *path = tmp_path("getters.gguf");
    brigade_error err = {0};
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    brigade_value u8 = {.type = BRIGADE_VALUE_U8, .as.u64 = 7};
    brigade_value i64 = {.type = BRIGADE_VALUE_I64, .as.i64 = 5};
    brigade_value u64 = {.type = BRIGADE_VALUE_U64, .as.u64 = UINT32_MAX};
    brigade_value f64 = {.type = BRIGADE_VALUE_F64, .as.f64 = 0.25};
    bool ok = bg_gguf_set(w, "u8", &u8, &err) == BRIGADE_OK &&
              bg_gguf_set(w, "i64", &i64, &err) == BRIGADE_OK &&
              bg_gguf_set(w, "u64", &u64, &err) == BRIGADE_OK &&
              bg_gguf_set(w, "f64", &f64, &err) == BRIGADE_OK &&
              bg_gguf_set_f32(w, "f32", -1.5f, &err) == BRIGADE_OK &&
              bg_gguf_set_str(w, "s", "str", &err) == BRIGADE_OK &&
              bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK &&
              bg_gguf_writer_finish(w, &err) == BRIGADE_OK;
    CHECK(ok, "getters file: %s", err.message);
    bg_gguf_writer_free(w);
    brigade_gguf *f = NULL;
    if (!ok || brigade_gguf_open(path, NULL, &f, &err) != BRIGADE_OK) {
        CHECK(0, "getters open: %s", err.message);
        return;
    }
    uint32_t u = 0;
    float x = 0;
    brigade_string s = {0};
    CHECK(brigade_gguf_get_u32(f, "u8", true, &u, &err) == BRIGADE_OK && u == 7, "u32 from u8");
    CHECK(brigade_gguf_get_u32(f, "i64", true, &u, &err) == BRIGADE_OK && u == 5, "u32 from i64");
    CHECK(brigade_gguf_get_u32(f, "u64", true, &u, &err) == BRIGADE_OK && u == UINT32_MAX,
          "u32 from u64 max");
    CHECK(brigade_gguf_get_f32(f, "f64", true, &x, &err) == BRIGADE_OK && x == 0.25f,
          "f32 from f64");
    CHECK(brigade_gguf_get_f32(f, "f32", true, &x, &err) == BRIGADE_OK && x == -1.5f, "f32");
    CHECK(brigade_gguf_get_str(f, "s", true, &s, &err) == BRIGADE_OK && s.len == 3 &&
              memcmp(s.ptr, "str", 4) == 0,
          "str");
    u = 99, x = 9, s.len = 99;
    CHECK(brigade_gguf_get_u32(f, "absent", false, &u, &err) == BRIGADE_OK && u == 99,
          "absent optional u32 changed the output");
    CHECK(brigade_gguf_get_f32(f, "absent", false, &x, &err) == BRIGADE_OK && x == 9,
          "absent optional f32 changed the output");
    CHECK(brigade_gguf_get_str(f, "absent", false, &s, &err) == BRIGADE_OK && s.len == 99,
          "absent optional str changed the output");
    brigade_status st = brigade_gguf_get_u32(f, "absent", true, &u, &err);
    CHECK(st == BRIGADE_ERR_FORMAT && contains(err.message, "'absent'") && u == 99,
          "required absent: %d %s", st, err.message);
    brigade_gguf_close(f);
    unlink(path);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/brigade_test_gguf_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    init_data();
    test_round_trip(0, 1000);
    test_round_trip(64, 7);
    test_round_trip(4096, 1 << 20);
    test_exact_bytes();
    test_misuse();
    test_getters();
    rmdir(g_dir);
    return check_summary("test_gguf");
}
