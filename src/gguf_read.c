/* GGUF reader: parses and validates the container. Every count, length,
 * offset and size product is checked against the bytes that are there
 * before it is used, and every error names the file, the item and the byte
 * offset where the problem starts. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "error.h"
#include "gguf_format.h"
#include "gguf_reader.h"
#include "keys.h"
#include "types.h"

typedef struct kv_entry {
    const char *key;
    brigade_value value;
} kv_entry;

struct brigade_gguf {
    char *label; /* the path, for messages */
    const uint8_t *bytes;
    uint64_t size;
    uint64_t header_only; /* nonzero: only this many bytes exist, and no tensor data */
    bool mapped; /* bytes came from mmap (else malloc, or caller memory) */
    bool owned;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    kv_entry *kv;
    int64_t n_tensors;
    brigade_tensor_info *tensors;
    uint32_t *kv_index;     /* hash slots: entry index + 1, 0 = empty */
    uint32_t *tensor_index;
    uint64_t index_mask_kv, index_mask_tensors;
    bg_arena arena;
};

/* ------------------------------------------------------------ byte cursor */

typedef struct cursor {
    const uint8_t *bytes;
    uint64_t size, pos;
    const char *label;
    brigade_error *err;
    bg_arena *arena;
} cursor;

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

static brigade_status truncated(cursor *c, const char *what, uint64_t need)
{
    return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                   "%s: truncated at byte %llu: %s needs %llu bytes, %llu left in the file",
                   c->label, (unsigned long long)c->pos, what, (unsigned long long)need,
                   (unsigned long long)remaining(c));
}

/* Little-endian loads: the format is little-endian whatever the host. */
static uint64_t load_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static brigade_status read_uint(cursor *c, unsigned n, const char *what, uint64_t *out)
{
    *out = 0;
    if (remaining(c) < n)
        return truncated(c, what, n);
    *out = load_le(c->bytes + c->pos, n);
    c->pos += n;
    return BRIGADE_OK;
}

static brigade_status read_u32(cursor *c, const char *what, uint32_t *out)
{
    uint64_t v = 0;
    brigade_status st = read_uint(c, 4, what, &v);
    *out = (uint32_t)v;
    return st;
}

/* A GGUF string: u64 length, then that many bytes (no terminator). */
static brigade_status read_string(cursor *c, const char *what, brigade_string *out)
{
    uint64_t at = c->pos, len = 0;
    brigade_status st = read_uint(c, 8, what, &len);
    if (st)
        return st;
    if (len > remaining(c)) {
        c->pos = at;
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: %s at byte %llu has length %llu, beyond the end of the file "
                       "(%llu bytes left)",
                       c->label, what, (unsigned long long)at, (unsigned long long)len,
                       (unsigned long long)(remaining(c) - 8));
    }
    char *s = bg_arena_strndup(c->arena, (const char *)c->bytes + c->pos, (size_t)len);
    if (!s)
        return bg_fail(c->err, BRIGADE_ERR_NOMEM, "%s: out of memory for %s of %llu bytes",
                       c->label, what, (unsigned long long)len);
    out->ptr = s;
    out->len = len;
    c->pos += len;
    return BRIGADE_OK;
}

/* ------------------------------------------------------------------ values */

static brigade_status read_value(cursor *c, uint32_t type, const char *key, int depth,
                                 brigade_value *out);

static brigade_status read_scalar(cursor *c, uint32_t type, const char *key, brigade_value *out)
{
    uint64_t at = c->pos, raw = 0;
    unsigned n = gguf_scalar_size(type);
    brigade_status st = read_uint(c, n, key, &raw);
    if (st)
        return st;
    switch (type) {
    case BRIGADE_VALUE_I8: out->as.i64 = (int8_t)raw; break;
    case BRIGADE_VALUE_I16: out->as.i64 = (int16_t)raw; break;
    case BRIGADE_VALUE_I32: out->as.i64 = (int32_t)raw; break;
    case BRIGADE_VALUE_I64: out->as.i64 = (int64_t)raw; break;
    case BRIGADE_VALUE_F32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, 4);
        out->as.f64 = f;
        break;
    }
    case BRIGADE_VALUE_F64: memcpy(&out->as.f64, &raw, 8); break;
    case BRIGADE_VALUE_BOOL:
        if (raw > 1)
            return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                           "%s: key '%s': bool at byte %llu holds %llu, not 0 or 1", c->label,
                           key, (unsigned long long)at, (unsigned long long)raw);
        out->as.b = raw != 0;
        break;
    default: out->as.u64 = raw; break;
    }
    return BRIGADE_OK;
}

/* Numeric and bool arrays are copied into aligned native storage. */
static brigade_status read_number_array(cursor *c, const char *key, uint64_t at,
                                        brigade_value *out)
{
    unsigned esize = gguf_scalar_size(out->elem_type);
    if (out->count > remaining(c) / esize)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: key '%s': array at byte %llu claims %llu elements of %u bytes, "
                       "beyond the end of the file",
                       c->label, key, (unsigned long long)at, (unsigned long long)out->count,
                       esize);
    uint64_t bytes = out->count * esize;
    uint8_t *dst = bg_arena_alloc(c->arena, bytes ? (size_t)bytes : 1);
    if (!dst)
        return bg_fail(c->err, BRIGADE_ERR_NOMEM, "%s: key '%s': out of memory for %llu bytes",
                       c->label, key, (unsigned long long)bytes);
    const uint8_t *src = c->bytes + c->pos;
    for (uint64_t i = 0; i < out->count; i++) {
        uint64_t v = load_le(src + i * esize, esize);
        if (out->elem_type == BRIGADE_VALUE_BOOL && v > 1)
            return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                           "%s: key '%s': bool element %llu at byte %llu holds %llu, not 0 or 1",
                           c->label, key, (unsigned long long)i,
                           (unsigned long long)(c->pos + i * esize), (unsigned long long)v);
        memcpy(dst + i * esize, &v, esize); /* low bytes on a little-endian host */
    }
    out->as.numbers = dst;
    c->pos += bytes;
    return BRIGADE_OK;
}

static brigade_status read_array(cursor *c, const char *key, int depth, brigade_value *out)
{
    uint64_t at = c->pos;
    uint32_t elem_type;
    brigade_status st = read_u32(c, key, &elem_type);
    if (!st)
        st = read_uint(c, 8, key, &out->count);
    if (st)
        return st;
    if (elem_type > BRIGADE_VALUE_F64)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: key '%s': array at byte %llu has unknown element type %u", c->label,
                       key, (unsigned long long)at, elem_type);
    out->elem_type = (brigade_value_type)elem_type;
    if (gguf_scalar_size(elem_type))
        return read_number_array(c, key, at, out);

    /* Strings take at least 8 bytes each, nested arrays 12: bound the count
     * by what is left before allocating for it. */
    uint64_t min_elem = elem_type == BRIGADE_VALUE_STRING ? 8 : 12;
    if (out->count > remaining(c) / min_elem)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: key '%s': array at byte %llu claims %llu elements, more than the "
                       "%llu bytes left can hold",
                       c->label, key, (unsigned long long)at, (unsigned long long)out->count,
                       (unsigned long long)remaining(c));
    size_t esize = elem_type == BRIGADE_VALUE_STRING ? sizeof(brigade_string)
                                                     : sizeof(brigade_value);
    void *items = bg_arena_alloc(c->arena, out->count ? (size_t)out->count * esize : 1);
    if (!items)
        return bg_fail(c->err, BRIGADE_ERR_NOMEM, "%s: key '%s': out of memory for %llu elements",
                       c->label, key, (unsigned long long)out->count);
    for (uint64_t i = 0; i < out->count; i++) {
        if (elem_type == BRIGADE_VALUE_STRING)
            st = read_string(c, key, (brigade_string *)items + i);
        else
            st = read_value(c, elem_type, key, depth + 1, (brigade_value *)items + i);
        if (st)
            return st;
    }
    if (elem_type == BRIGADE_VALUE_STRING)
        out->as.strings = items;
    else
        out->as.items = items;
    return BRIGADE_OK;
}

static brigade_status read_value(cursor *c, uint32_t type, const char *key, int depth,
                                 brigade_value *out)
{
    memset(out, 0, sizeof *out);
    out->type = (brigade_value_type)type;
    if (type == BRIGADE_VALUE_STRING)
        return read_string(c, key, &out->as.str);
    if (type == BRIGADE_VALUE_ARRAY) {
        if (depth >= GGUF_MAX_ARRAY_DEPTH)
            return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                           "%s: key '%s': arrays nested deeper than %d at byte %llu", c->label,
                           key, GGUF_MAX_ARRAY_DEPTH, (unsigned long long)c->pos);
        return read_array(c, key, depth, out);
    }
    if (gguf_scalar_size(type))
        return read_scalar(c, type, key, out);
    return bg_fail(c->err, BRIGADE_ERR_FORMAT, "%s: key '%s': unknown value type %u at byte %llu",
                   c->label, key, type, (unsigned long long)(c->pos - 4));
}

/* -------------------------------------------------------------- name index */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Builds an open-addressing index over n names (names(i) gives the i-th);
 * returns the index of an earlier entry with the same name via *dup. */
static brigade_status build_index(int64_t n, const char *(*name_at)(const brigade_gguf *, int64_t),
                                  brigade_gguf *f, uint32_t **slots_out, uint64_t *mask_out,
                                  int64_t *dup_first, int64_t *dup_second)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap *= 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return BRIGADE_ERR_NOMEM;
    *dup_first = *dup_second = -1;
    for (int64_t i = 0; i < n; i++) {
        const char *name = name_at(f, i);
        uint64_t s = hash_name(name) & (cap - 1);
        while (slots[s]) {
            if (strcmp(name_at(f, slots[s] - 1), name) == 0) {
                *dup_first = slots[s] - 1;
                *dup_second = i;
                free(slots);
                return BRIGADE_ERR_FORMAT;
            }
            s = (s + 1) & (cap - 1);
        }
        slots[s] = (uint32_t)(i + 1);
    }
    *slots_out = slots;
    *mask_out = cap - 1;
    return BRIGADE_OK;
}

static int64_t index_find(const uint32_t *slots, uint64_t mask, const char *name,
                          const char *(*name_at)(const brigade_gguf *, int64_t),
                          const brigade_gguf *f)
{
    if (!slots)
        return -1;
    uint64_t s = hash_name(name) & mask;
    while (slots[s]) {
        if (strcmp(name_at(f, slots[s] - 1), name) == 0)
            return slots[s] - 1;
        s = (s + 1) & mask;
    }
    return -1;
}

static const char *kv_name_at(const brigade_gguf *f, int64_t i) { return f->kv[i].key; }
static const char *tensor_name_at(const brigade_gguf *f, int64_t i) { return f->tensors[i].name; }

/* ------------------------------------------------------------------ header */

static brigade_status parse_header(brigade_gguf *f, cursor *c, uint64_t *n_tensors, uint64_t *n_kv)
{
    if (c->size < 24)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: %llu bytes is too small for a GGUF header (24 bytes)", c->label,
                       (unsigned long long)c->size);
    if (memcmp(c->bytes, GGUF_MAGIC, 4) != 0)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: not a GGUF file (magic at byte 0 is %02x %02x %02x %02x, expected "
                       "'GGUF')",
                       c->label, c->bytes[0], c->bytes[1], c->bytes[2], c->bytes[3]);
    c->pos = 4;
    read_u32(c, "version", &f->version);
    if (f->version != 2 && f->version != 3) {
        if ((f->version & 0xffff) == 0 && f->version != 0)
            return bg_fail(c->err, BRIGADE_ERR_UNSUPPORTED,
                           "%s: byte 4: big-endian GGUF files are not supported", c->label);
        return bg_fail(c->err, BRIGADE_ERR_UNSUPPORTED,
                       "%s: byte 4: GGUF version %u is not supported (only 2 and 3)", c->label,
                       f->version);
    }
    read_uint(c, 8, "tensor count", n_tensors);
    read_uint(c, 8, "metadata count", n_kv);
    if (*n_kv > INT32_MAX || *n_tensors > INT32_MAX)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: bytes 8..23: %llu tensors and %llu metadata entries exceed the "
                       "limit of 2^31-1 each",
                       c->label, (unsigned long long)*n_tensors, (unsigned long long)*n_kv);
    /* Each metadata entry takes at least 13 bytes (key length, type, one
     * byte of value); each tensor entry at least 8+4+8+4+8. */
    if (*n_kv > remaining(c) / 13)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: byte 16: metadata count %llu cannot fit in the %llu bytes of the file",
                       c->label, (unsigned long long)*n_kv, (unsigned long long)c->size);
    if (*n_tensors > remaining(c) / 32)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: byte 8: tensor count %llu cannot fit in the %llu bytes of the file",
                       c->label, (unsigned long long)*n_tensors, (unsigned long long)c->size);
    return BRIGADE_OK;
}

static brigade_status parse_kv(brigade_gguf *f, cursor *c, uint64_t n_kv)
{
    f->kv = bg_arena_alloc(&f->arena, (n_kv ? n_kv : 1) * sizeof *f->kv);
    if (!f->kv)
        return bg_fail(c->err, BRIGADE_ERR_NOMEM, "%s: out of memory for %llu metadata entries",
                       c->label, (unsigned long long)n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t at = c->pos;
        brigade_string key;
        brigade_status st = read_string(c, "metadata key", &key);
        if (st)
            return st;
        if (key.len == 0 || memchr(key.ptr, 0, key.len))
            return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                           "%s: metadata key %llu at byte %llu is empty or contains a NUL byte",
                           c->label, (unsigned long long)i, (unsigned long long)at);
        uint32_t type;
        if ((st = read_u32(c, key.ptr, &type)))
            return st;
        if ((st = read_value(c, type, key.ptr, 0, &f->kv[i].value)))
            return st;
        f->kv[i].key = key.ptr;
        f->n_kv = (int64_t)i + 1;
    }
    int64_t first, second;
    brigade_status st = build_index(f->n_kv, kv_name_at, f, &f->kv_index, &f->index_mask_kv,
                                    &first, &second);
    if (st == BRIGADE_ERR_FORMAT)
        return bg_fail(c->err, st, "%s: duplicate metadata key '%s' (entries %lld and %lld)",
                       c->label, f->kv[second].key, (long long)first, (long long)second);
    if (st)
        return bg_fail(c->err, st, "%s: out of memory indexing metadata", c->label);
    return BRIGADE_OK;
}

/* Known keys must hold the kind of value brigade will read from them. */
static brigade_status check_known_keys(brigade_gguf *f, brigade_error *err)
{
    const brigade_value *arch = brigade_gguf_get(f, KEY_ARCHITECTURE);
    const char *arch_name = arch && arch->type == BRIGADE_VALUE_STRING ? arch->as.str.ptr : NULL;
    for (int64_t i = 0; i < f->n_kv; i++) {
        char expected[64];
        const brigade_value *v = &f->kv[i].value;
        if (!bg_key_value_ok(arch_name, f->kv[i].key, v, expected, sizeof expected))
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s: key '%s' holds %s%s%s, expected %s", f->label, f->kv[i].key,
                           v->type == BRIGADE_VALUE_ARRAY ? "an array of " : "",
                           brigade_value_type_name(v->type == BRIGADE_VALUE_ARRAY ? v->elem_type
                                                                                  : v->type),
                           v->type != BRIGADE_VALUE_ARRAY && v->as.i64 < 0 &&
                                   (v->type == BRIGADE_VALUE_I8 || v->type == BRIGADE_VALUE_I16 ||
                                    v->type == BRIGADE_VALUE_I32 || v->type == BRIGADE_VALUE_I64)
                               ? " (negative)"
                               : "",
                           expected);
    }
    const brigade_value *align = brigade_gguf_get(f, GGUF_KEY_ALIGNMENT);
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (align) {
        uint64_t a = align->as.u64;
        if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 30))
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s: key '%s' is %llu; it must be a power of two up to 2^30", f->label,
                           GGUF_KEY_ALIGNMENT, (unsigned long long)a);
        f->alignment = (uint32_t)a;
    }
    return BRIGADE_OK;
}

/* ----------------------------------------------------------------- tensors */

static brigade_status parse_tensor_info(brigade_gguf *f, cursor *c, uint64_t i,
                                        brigade_tensor_info *t, uint64_t *rel_offset)
{
    uint64_t at = c->pos;
    brigade_string name;
    brigade_status st = read_string(c, "tensor name", &name);
    if (st)
        return st;
    if (name.len == 0 || name.len > GGUF_MAX_NAME || memchr(name.ptr, 0, name.len))
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: tensor %llu at byte %llu: name of %llu bytes is empty, longer than "
                       "%u bytes, or contains a NUL byte",
                       c->label, (unsigned long long)i, (unsigned long long)at,
                       (unsigned long long)name.len, GGUF_MAX_NAME);
    t->name = name.ptr;
    uint64_t dims_at = c->pos;
    if ((st = read_u32(c, t->name, &t->n_dims)))
        return st;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: tensor '%s' at byte %llu has %u dimensions; 1 to %u are allowed",
                       c->label, t->name, (unsigned long long)dims_at, t->n_dims, GGUF_MAX_DIMS);
    t->n_elements = 1;
    for (unsigned d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        uint64_t ne_at = c->pos;
        if ((st = read_uint(c, 8, t->name, &t->ne[d])))
            return st;
        if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
            return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                           "%s: tensor '%s': dimension %u at byte %llu is %lld; it must be "
                           "positive",
                           c->label, t->name, d, (unsigned long long)ne_at, (long long)t->ne[d]);
        if (t->ne[d] > (uint64_t)INT64_MAX / t->n_elements)
            return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                           "%s: tensor '%s': element count overflows at dimension %u (byte %llu)",
                           c->label, t->name, d, (unsigned long long)ne_at);
        t->n_elements *= t->ne[d];
    }
    uint64_t type_at = c->pos;
    if ((st = read_u32(c, t->name, &t->type)) || (st = read_uint(c, 8, t->name, rel_offset)))
        return st;
    const bg_type_info *ti = bg_type_get(t->type);
    if (!ti)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: tensor '%s': unknown tensor type %u at byte %llu", c->label, t->name,
                       t->type, (unsigned long long)type_at);
    uint64_t row_bytes;
    if (t->ne[0] % ti->block_elems == 0 && !bg_type_row_bytes((bg_type)t->type, t->ne[0], &row_bytes))
        return bg_fail(c->err, BRIGADE_ERR_FORMAT, "%s: tensor '%s': byte size overflows",
                       c->label, t->name);
    if (!bg_type_row_bytes((bg_type)t->type, t->ne[0], &row_bytes))
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: tensor '%s': row of %llu elements is not a whole number of %s blocks "
                       "(%u elements each)",
                       c->label, t->name, (unsigned long long)t->ne[0], ti->name,
                       ti->block_elems);
    uint64_t rows = t->n_elements / t->ne[0];
    if (rows > UINT64_MAX / row_bytes)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT, "%s: tensor '%s': byte size overflows",
                       c->label, t->name);
    t->n_bytes = row_bytes * rows;
    if (*rel_offset % f->alignment != 0)
        return bg_fail(c->err, BRIGADE_ERR_FORMAT,
                       "%s: tensor '%s': data offset %llu (byte %llu) is not a multiple of the "
                       "alignment %u",
                       c->label, t->name, (unsigned long long)*rel_offset,
                       (unsigned long long)(type_at + 4), f->alignment);
    return BRIGADE_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const brigade_tensor_info *x = *(brigade_tensor_info *const *)a;
    const brigade_tensor_info *y = *(brigade_tensor_info *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static brigade_status check_overlaps(brigade_gguf *f, brigade_error *err)
{
    if (f->n_tensors < 2)
        return BRIGADE_OK;
    brigade_tensor_info **order = malloc((size_t)f->n_tensors * sizeof *order);
    if (!order)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: out of memory checking tensor overlaps",
                       f->label);
    for (int64_t i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_offset);
    brigade_status st = BRIGADE_OK;
    for (int64_t i = 1; i < f->n_tensors && !st; i++) {
        const brigade_tensor_info *a = order[i - 1], *b = order[i];
        if (a->offset + a->n_bytes > b->offset)
            st = bg_fail(err, BRIGADE_ERR_FORMAT,
                         "%s: tensor '%s' (bytes %llu..%llu) overlaps tensor '%s' (from byte %llu)",
                         f->label, a->name, (unsigned long long)a->offset,
                         (unsigned long long)(a->offset + a->n_bytes), b->name,
                         (unsigned long long)b->offset);
    }
    free(order);
    return st;
}

static brigade_status parse_tensors(brigade_gguf *f, cursor *c, uint64_t n_tensors)
{
    f->tensors = bg_arena_alloc(&f->arena, (n_tensors ? n_tensors : 1) * sizeof *f->tensors);
    uint64_t *rel = malloc((n_tensors ? n_tensors : 1) * sizeof *rel);
    if (!f->tensors || !rel) {
        free(rel);
        return bg_fail(c->err, BRIGADE_ERR_NOMEM, "%s: out of memory for %llu tensors", c->label,
                       (unsigned long long)n_tensors);
    }
    brigade_status st = BRIGADE_OK;
    for (uint64_t i = 0; i < n_tensors && !st; i++) {
        st = parse_tensor_info(f, c, i, &f->tensors[i], &rel[i]);
        if (!st)
            f->n_tensors = (int64_t)i + 1;
    }
    if (!st) {
        int64_t first, second;
        st = build_index(f->n_tensors, tensor_name_at, f, &f->tensor_index,
                         &f->index_mask_tensors, &first, &second);
        if (st == BRIGADE_ERR_FORMAT)
            bg_fail(c->err, st, "%s: duplicate tensor name '%s' (tensors %lld and %lld)",
                    c->label, f->tensors[second].name, (long long)first, (long long)second);
        else if (st)
            bg_fail(c->err, st, "%s: out of memory indexing tensors", c->label);
    }
    /* The data section starts at the next multiple of the alignment. */
    f->data_offset = gguf_align_up(c->pos, f->alignment);
    if (!st && n_tensors > 0 && f->data_offset > f->size)
        st = bg_fail(c->err, BRIGADE_ERR_FORMAT,
                     "%s: data section would start at byte %llu, past the end of the file (%llu "
                     "bytes)",
                     c->label, (unsigned long long)f->data_offset, (unsigned long long)f->size);
    for (int64_t i = 0; i < f->n_tensors && !st; i++) {
        brigade_tensor_info *t = &f->tensors[i];
        uint64_t room = f->size - f->data_offset;
        if (rel[i] > room || t->n_bytes > room - rel[i])
            st = bg_fail(c->err, BRIGADE_ERR_FORMAT,
                         "%s: tensor '%s': data at offset %llu with %llu bytes ends beyond the "
                         "end of the file (data section has %llu bytes)",
                         c->label, t->name, (unsigned long long)rel[i],
                         (unsigned long long)t->n_bytes, (unsigned long long)room);
        t->offset = f->data_offset + rel[i];
        t->data = st || f->header_only ? NULL : f->bytes + t->offset;
    }
    free(rel);
    if (!st)
        st = check_overlaps(f, c->err);
    return st;
}

/* ------------------------------------------------------------------- open */

static brigade_status parse(brigade_gguf *f, brigade_error *err)
{
    cursor c = {.bytes = f->bytes, .size = f->header_only ? f->header_only : f->size,
                .label = f->label, .err = err,
                .arena = &f->arena};
    uint64_t n_tensors = 0, n_kv = 0;
    brigade_status st = parse_header(f, &c, &n_tensors, &n_kv);
    if (!st)
        st = parse_kv(f, &c, n_kv);
    if (!st)
        st = check_known_keys(f, err);
    if (!st)
        st = parse_tensors(f, &c, n_tensors);
    return st;
}

static brigade_gguf *new_file(const char *label)
{
    brigade_gguf *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->label = strdup(label ? label : "<memory>");
    if (!f->label) {
        free(f);
        return NULL;
    }
    return f;
}

static brigade_status finish_open(brigade_gguf *f, brigade_gguf **out, brigade_error *err)
{
    brigade_status st = parse(f, err);
    if (st) {
        brigade_gguf_close(f);
        return st;
    }
    *out = f;
    return BRIGADE_OK;
}

static brigade_status read_all(int fd, brigade_gguf *f, const brigade_gguf_options *opts,
                               brigade_error *err)
{
    uint8_t *buf = malloc(f->size ? (size_t)f->size : 1);
    if (!buf)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: cannot allocate %llu bytes to read the file",
                       f->label, (unsigned long long)f->size);
    uint64_t done = 0;
    while (done < f->size) {
        size_t chunk = f->size - done > (64u << 20) ? (64u << 20) : (size_t)(f->size - done);
        ssize_t n = read(fd, buf + done, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return bg_fail(err, BRIGADE_ERR_IO, "%s: read failed at byte %llu: %s", f->label,
                           (unsigned long long)done, n < 0 ? strerror(errno) : "unexpected end");
        }
        done += (uint64_t)n;
        if (opts && opts->progress)
            opts->progress(opts->progress_user, done, f->size);
    }
    f->bytes = buf;
    f->owned = true;
    return BRIGADE_OK;
}

brigade_status brigade_gguf_open(const char *path, const brigade_gguf_options *opts,
                                 brigade_gguf **out, brigade_error *err)
{
    *out = NULL;
    brigade_gguf *f = new_file(path);
    if (!f)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        brigade_status st = bg_fail(err, BRIGADE_ERR_IO, "%s: cannot open: %s", path,
                                    strerror(errno));
        brigade_gguf_close(f);
        return st;
    }
    struct stat sb;
    brigade_status st = BRIGADE_OK;
    if (fstat(fd, &sb) != 0)
        st = bg_fail(err, BRIGADE_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = bg_fail(err, BRIGADE_ERR_IO, "%s: not a regular file", path);
    if (!st) {
        f->size = (uint64_t)sb.st_size;
        if (opts && opts->no_mmap) {
            st = read_all(fd, f, opts, err);
        } else if (f->size > 0) {
            void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED)
                st = bg_fail(err, BRIGADE_ERR_IO, "%s: cannot map %llu bytes: %s", path,
                             (unsigned long long)f->size, strerror(errno));
            else {
                f->bytes = p;
                f->mapped = true;
            }
        }
    }
    close(fd);
    if (st) {
        brigade_gguf_close(f);
        return st;
    }
    return finish_open(f, out, err);
}

brigade_status brigade_gguf_open_memory(const void *data, size_t size, const char *label,
                                        brigade_gguf **out, brigade_error *err)
{
    *out = NULL;
    brigade_gguf *f = new_file(label);
    if (!f)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    f->bytes = data;
    f->size = size;
    return finish_open(f, out, err);
}

brigade_status bg_gguf_open_header(const void *header, size_t header_len, uint64_t file_size,
                                   const char *label, brigade_gguf **out, brigade_error *err)
{
    *out = NULL;
    if (header_len == 0 || header_len > file_size)
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: header of %zu bytes for a %llu-byte file",
                       label ? label : "<memory>", header_len, (unsigned long long)file_size);
    brigade_gguf *f = new_file(label);
    if (!f)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory");
    f->bytes = header;
    f->size = file_size;
    f->header_only = header_len;
    return finish_open(f, out, err);
}

bool bg_gguf_is_header_only(const brigade_gguf *f) { return f->header_only != 0; }

void brigade_gguf_close(brigade_gguf *f)
{
    if (!f)
        return;
    if (f->mapped)
        munmap((void *)f->bytes, (size_t)f->size);
    else if (f->owned)
        free((void *)f->bytes);
    free(f->kv_index);
    free(f->tensor_index);
    bg_arena_free(&f->arena);
    free(f->label);
    free(f);
}

/* --------------------------------------------------------------- accessors */

uint32_t brigade_gguf_version(const brigade_gguf *f) { return f->version; }
uint64_t brigade_gguf_file_size(const brigade_gguf *f) { return f->size; }
uint32_t brigade_gguf_alignment(const brigade_gguf *f) { return f->alignment; }
uint64_t brigade_gguf_data_offset(const brigade_gguf *f) { return f->data_offset; }
int64_t brigade_gguf_kv_count(const brigade_gguf *f) { return f->n_kv; }
int64_t brigade_gguf_tensor_count(const brigade_gguf *f) { return f->n_tensors; }

const char *brigade_gguf_kv_key(const brigade_gguf *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? f->kv[i].key : NULL;
}

const brigade_value *brigade_gguf_kv_value(const brigade_gguf *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? &f->kv[i].value : NULL;
}

const brigade_value *brigade_gguf_get(const brigade_gguf *f, const char *key)
{
    int64_t i = index_find(f->kv_index, f->index_mask_kv, key, kv_name_at, f);
    return i < 0 ? NULL : &f->kv[i].value;
}

const brigade_tensor_info *brigade_gguf_tensor(const brigade_gguf *f, int64_t i)
{
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const brigade_tensor_info *brigade_gguf_find_tensor(const brigade_gguf *f, const char *name)
{
    int64_t i = index_find(f->tensor_index, f->index_mask_tensors, name, tensor_name_at, f);
    return i < 0 ? NULL : &f->tensors[i];
}

static brigade_status missing_or_ok(const brigade_gguf *f, const char *key, bool required,
                                    brigade_error *err)
{
    if (required)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: required key '%s' is missing", f->label, key);
    return BRIGADE_OK;
}

brigade_status brigade_gguf_get_u32(const brigade_gguf *f, const char *key, bool required,
                                    uint32_t *out, brigade_error *err)
{
    const brigade_value *v = brigade_gguf_get(f, key);
    if (!v)
        return missing_or_ok(f, key, required, err);
    bool is_signed = v->type == BRIGADE_VALUE_I8 || v->type == BRIGADE_VALUE_I16 ||
                     v->type == BRIGADE_VALUE_I32 || v->type == BRIGADE_VALUE_I64;
    bool is_int = is_signed || v->type == BRIGADE_VALUE_U8 || v->type == BRIGADE_VALUE_U16 ||
                  v->type == BRIGADE_VALUE_U32 || v->type == BRIGADE_VALUE_U64;
    if (!is_int)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: key '%s' holds %s, expected an integer",
                       f->label, key, brigade_value_type_name(v->type));
    if ((is_signed && v->as.i64 < 0) || v->as.u64 > UINT32_MAX)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: key '%s' is %s%llu, outside 0..%u", f->label,
                       key, is_signed && v->as.i64 < 0 ? "-" : "",
                       is_signed && v->as.i64 < 0 ? (unsigned long long)-(v->as.i64 + 1) + 1
                                                  : (unsigned long long)v->as.u64,
                       UINT32_MAX);
    *out = (uint32_t)v->as.u64;
    return BRIGADE_OK;
}

brigade_status brigade_gguf_get_f32(const brigade_gguf *f, const char *key, bool required,
                                    float *out, brigade_error *err)
{
    const brigade_value *v = brigade_gguf_get(f, key);
    if (!v)
        return missing_or_ok(f, key, required, err);
    if (v->type != BRIGADE_VALUE_F32 && v->type != BRIGADE_VALUE_F64)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: key '%s' holds %s, expected a float",
                       f->label, key, brigade_value_type_name(v->type));
    *out = (float)v->as.f64;
    return BRIGADE_OK;
}

brigade_status brigade_gguf_get_str(const brigade_gguf *f, const char *key, bool required,
                                    brigade_string *out, brigade_error *err)
{
    const brigade_value *v = brigade_gguf_get(f, key);
    if (!v)
        return missing_or_ok(f, key, required, err);
    if (v->type != BRIGADE_VALUE_STRING)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: key '%s' holds %s, expected a string",
                       f->label, key, brigade_value_type_name(v->type));
    *out = v->as.str;
    return BRIGADE_OK;
}

const char *brigade_value_type_name(brigade_value_type type)
{
    static const char *const names[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)type < sizeof names / sizeof *names ? names[type] : "unknown";
}

const char *brigade_type_name(uint32_t type)
{
    const bg_type_info *t = bg_type_get(type);
    return t ? t->name : NULL;
}

double brigade_type_bits(uint32_t type)
{
    const bg_type_info *t = bg_type_get(type);
    return t ? 8.0 * t->block_bytes / t->block_elems : 0.0;
}

unsigned brigade_value_type_size(brigade_value_type type)
{
    return gguf_scalar_size(type);
}
