/* libFuzzer target for the GGUF reader.
 *
 * Opens the input with brigade_gguf_open_memory. On success it walks every
 * key and value (recursively through nested arrays, touching every string
 * byte and every number), every tensor (the first and last byte of its data)
 * and the typed getters, and checks the invariants the reader promises:
 * tensor data lies inside the input, offsets are aligned, sizes match the
 * type and shape, lookups by name find the same entry. A broken invariant
 * aborts, so the fuzzer reports it like a crash. On failure the error must
 * carry the same status and a NUL-terminated, non-empty message.
 *
 * Build: make fuzz. Seeds: python3 fuzz/make_corpus.py fuzz/corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"
#include "gguf_format.h"

/* Sinks the compiler cannot drop. */
static volatile uint64_t g_sink;

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_gguf: invariant failed at line %d: %s\n", __LINE__, #cond);  \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static void touch_bytes(const void *p, uint64_t n)
{
    const volatile uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++)
        h = h * 31 + b[i];
    g_sink += h;
}

static void touch_string(const brigade_string *s)
{
    REQUIRE(s->ptr != NULL);
    touch_bytes(s->ptr, s->len);
    REQUIRE(s->ptr[s->len] == '\0'); /* the promised terminator */
}

static void walk_value(const brigade_value *v, int depth)
{
    REQUIRE(depth <= GGUF_MAX_ARRAY_DEPTH);
    REQUIRE((unsigned)v->type <= BRIGADE_VALUE_F64);
    REQUIRE(brigade_value_type_name(v->type) != NULL);
    switch (v->type) {
    case BRIGADE_VALUE_STRING: touch_string(&v->as.str); return;
    case BRIGADE_VALUE_BOOL: g_sink += v->as.b; return;
    case BRIGADE_VALUE_F32:
    case BRIGADE_VALUE_F64: {
        double d = v->as.f64;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        g_sink += bits;
        return;
    }
    case BRIGADE_VALUE_ARRAY: break;
    default: g_sink += v->as.u64; return;
    }
    REQUIRE((unsigned)v->elem_type <= BRIGADE_VALUE_F64);
    unsigned es = gguf_scalar_size(v->elem_type);
    if (es) {
        REQUIRE(v->count == 0 || v->as.numbers != NULL);
        touch_bytes(v->as.numbers, v->count * es);
        if (v->elem_type == BRIGADE_VALUE_BOOL) {
            const uint8_t *b = v->as.numbers;
            for (uint64_t i = 0; i < v->count; i++)
                REQUIRE(b[i] <= 1);
        }
    } else if (v->elem_type == BRIGADE_VALUE_STRING) {
        for (uint64_t i = 0; i < v->count; i++)
            touch_string(&v->as.strings[i]);
    } else {
        REQUIRE(v->elem_type == BRIGADE_VALUE_ARRAY);
        for (uint64_t i = 0; i < v->count; i++) {
            REQUIRE(v->as.items[i].type == BRIGADE_VALUE_ARRAY);
            walk_value(&v->as.items[i], depth + 1);
        }
    }
}

static void check_error(brigade_status st, const brigade_error *err)
{
    REQUIRE(st != BRIGADE_OK);
    REQUIRE(err->status == st);
    size_t n = strnlen(err->message, sizeof err->message);
    REQUIRE(n > 0 && n < sizeof err->message);
}

static void try_getters(const brigade_gguf *f, const char *key)
{
    brigade_error err;
    uint32_t u = 0;
    float x = 0;
    brigade_string s = {0};
    for (int required = 0; required < 2; required++) {
        memset(&err, 0, sizeof err);
        brigade_status st = brigade_gguf_get_u32(f, key, required, &u, &err);
        if (st)
            check_error(st, &err);
        memset(&err, 0, sizeof err);
        st = brigade_gguf_get_f32(f, key, required, &x, &err);
        if (st)
            check_error(st, &err);
        memset(&err, 0, sizeof err);
        st = brigade_gguf_get_str(f, key, required, &s, &err);
        if (st)
            check_error(st, &err);
        else if (s.ptr)
            touch_string(&s);
    }
    uint32_t xbits;
    memcpy(&xbits, &x, sizeof xbits);
    g_sink += u + xbits;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brigade_gguf *f = NULL;
    brigade_error err;
    memset(&err, 0, sizeof err);
    brigade_status st = brigade_gguf_open_memory(data, size, "fuzz", &f, &err);
    if (st) {
        REQUIRE(f == NULL);
        check_error(st, &err);
        return 0;
    }
    REQUIRE(f != NULL);
    REQUIRE(brigade_gguf_version(f) == 2 || brigade_gguf_version(f) == 3);
    REQUIRE(brigade_gguf_file_size(f) == size);
    uint32_t align = brigade_gguf_alignment(f);
    REQUIRE(align != 0 && (align & (align - 1)) == 0);

    int64_t n_kv = brigade_gguf_kv_count(f);
    REQUIRE(n_kv >= 0);
    for (int64_t i = 0; i < n_kv; i++) {
        const char *key = brigade_gguf_kv_key(f, i);
        const brigade_value *v = brigade_gguf_kv_value(f, i);
        REQUIRE(key != NULL && key[0] != '\0' && v != NULL);
        touch_bytes(key, strlen(key));
        REQUIRE(brigade_gguf_get(f, key) == v);
        walk_value(v, 0);
        try_getters(f, key);
    }
    REQUIRE(brigade_gguf_kv_key(f, n_kv) == NULL && brigade_gguf_kv_value(f, -1) == NULL);
    try_getters(f, "no.such.key");

    int64_t n_t = brigade_gguf_tensor_count(f);
    REQUIRE(n_t >= 0);
    uint64_t data_off = brigade_gguf_data_offset(f);
    if (n_t > 0)
        REQUIRE(data_off % align == 0 && data_off <= size);
    for (int64_t i = 0; i < n_t; i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        REQUIRE(t != NULL && t->name != NULL);
        size_t name_len = strlen(t->name);
        REQUIRE(name_len > 0 && name_len <= GGUF_MAX_NAME);
        REQUIRE(brigade_gguf_find_tensor(f, t->name) == t);
        REQUIRE(t->n_dims >= 1 && t->n_dims <= 4);
        REQUIRE(brigade_type_name(t->type) != NULL);
        double bits = brigade_type_bits(t->type);
        REQUIRE(bits > 0);
        uint64_t n = 1;
        for (unsigned d = 0; d < 4; d++) {
            REQUIRE(t->ne[d] >= 1);
            if (d >= t->n_dims)
                REQUIRE(t->ne[d] == 1);
            REQUIRE(t->ne[d] <= (uint64_t)INT64_MAX / n);
            n *= t->ne[d];
        }
        REQUIRE(n == t->n_elements);
        /* n_bytes must match bits per weight exactly: 8*bytes == bits*n. */
        REQUIRE((double)t->n_bytes * 8.0 == bits * (double)t->n_elements ||
                t->n_elements > (1ull << 40));
        REQUIRE(t->n_bytes > 0);
        REQUIRE(t->offset >= data_off && (t->offset - data_off) % align == 0);
        REQUIRE(t->offset <= size && t->n_bytes <= size - t->offset);
        REQUIRE((const uint8_t *)t->data == data + t->offset);
        const uint8_t *b = t->data;
        g_sink += b[0] + b[t->n_bytes - 1];
    }
    REQUIRE(brigade_gguf_tensor(f, n_t) == NULL && brigade_gguf_tensor(f, -1) == NULL);
    REQUIRE(brigade_gguf_find_tensor(f, "") == NULL);
    brigade_gguf_close(f);
    return 0;
}
