#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "error.h"
#include "gguf_format.h"
#include "gguf_writer.h"
#include "types.h"

typedef struct out_kv {
    const char *key;
    brigade_value value;
} out_kv;

typedef struct out_tensor {
    const char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t offset, n_bytes; /* offset within the data section */
} out_tensor;

struct bg_gguf_writer {
    uint32_t alignment;
    bg_arena arena;
    out_kv *kv;
    int64_t n_kv, cap_kv;
    out_tensor *tensors;
    int64_t n_tensors, cap_tensors;
    uint64_t data_bytes; /* data section size, padded */
    /* streaming state */
    FILE *fp;
    char *path;
    int64_t cur;          /* tensor receiving data */
    uint64_t cur_written; /* bytes of it written so far */
    uint64_t pos;         /* bytes written to the file */
    bool skipped;         /* holes were left: the length is set at the end */
};

bg_gguf_writer *bg_gguf_writer_new(uint32_t alignment)
{
    if ((alignment & (alignment - 1)) || alignment > (1u << 30))
        return NULL; /* the reader accepts powers of two up to 2^30 */
    bg_gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->alignment = alignment ? alignment : GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void bg_gguf_writer_free(bg_gguf_writer *w)
{
    if (!w)
        return;
    if (w->fp)
        fclose(w->fp);
    free(w->kv);
    free(w->tensors);
    free(w->path);
    bg_arena_free(&w->arena);
    free(w);
}

static bool grow(void **items, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap)
        return true;
    int64_t n = *cap ? *cap * 2 : 64;
    void *p = realloc(*items, (size_t)n * size);
    if (!p)
        return false;
    *items = p;
    *cap = n;
    return true;
}

/* ------------------------------------------------------------------ values */

static bool copy_value(bg_arena *a, brigade_value *dst, const brigade_value *src, int depth)
{
    *dst = *src;
    if (src->type == BRIGADE_VALUE_STRING) {
        dst->as.str.ptr = bg_arena_strndup(a, src->as.str.ptr, (size_t)src->as.str.len);
        return dst->as.str.ptr != NULL;
    }
    if (src->type != BRIGADE_VALUE_ARRAY)
        return gguf_scalar_size(src->type) != 0; /* unknown type ids are refused */
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return false;
    uint64_t n = src->count;
    if (gguf_scalar_size(src->elem_type)) {
        size_t bytes = (size_t)n * gguf_scalar_size(src->elem_type);
        void *p = bg_arena_alloc(a, bytes ? bytes : 1);
        if (!p)
            return false;
        if (bytes)
            memcpy(p, src->as.numbers, bytes);
        dst->as.numbers = p;
    } else if (src->elem_type == BRIGADE_VALUE_STRING) {
        brigade_string *s = bg_arena_alloc(a, n ? (size_t)n * sizeof *s : 1);
        if (!s)
            return false;
        for (uint64_t i = 0; i < n; i++) {
            s[i].len = src->as.strings[i].len;
            s[i].ptr = bg_arena_strndup(a, src->as.strings[i].ptr, (size_t)s[i].len);
            if (!s[i].ptr)
                return false;
        }
        dst->as.strings = s;
    } else if (src->elem_type == BRIGADE_VALUE_ARRAY) {
        brigade_value *items = bg_arena_alloc(a, n ? (size_t)n * sizeof *items : 1);
        if (!items)
            return false;
        for (uint64_t i = 0; i < n; i++)
            if (!copy_value(a, &items[i], &src->as.items[i], depth + 1))
                return false;
        dst->as.items = items;
    } else {
        return false;
    }
    return true;
}

/* Adds or replaces key with an already-copied value; false when out of
 * memory. */
static bool store_kv(bg_gguf_writer *w, const char *key, const brigade_value *copied)
{
    int64_t i = 0;
    while (i < w->n_kv && strcmp(w->kv[i].key, key) != 0)
        i++;
    if (i == w->n_kv) {
        const char *k = bg_arena_strndup(&w->arena, key, strlen(key));
        if (!k || !grow((void **)&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv))
            return false;
        w->kv[i].key = k;
        w->n_kv++;
    }
    w->kv[i].value = *copied;
    return true;
}

brigade_status bg_gguf_set(bg_gguf_writer *w, const char *key, const brigade_value *value,
                           brigade_error *err)
{
    if (w->fp)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: key '%s' set after the header was written",
                       key);
    if (!key[0])
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: empty metadata key");
    if (strcmp(key, GGUF_KEY_ALIGNMENT) == 0)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "gguf writer: '%s' follows the writer's alignment; set it when creating "
                       "the writer",
                       key);
    /* Copy first, so a failed copy leaves the writer as it was. */
    brigade_value copy;
    if (!copy_value(&w->arena, &copy, value, 0))
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "gguf writer: key '%s': value cannot be copied (out of memory, unknown "
                       "type or nesting deeper than %d)",
                       key, GGUF_MAX_ARRAY_DEPTH);
    if (!store_kv(w, key, &copy))
        return bg_fail(err, BRIGADE_ERR_NOMEM, "gguf writer: out of memory");
    return BRIGADE_OK;
}

brigade_status bg_gguf_set_u32(bg_gguf_writer *w, const char *key, uint32_t v, brigade_error *err)
{
    brigade_value val = {.type = BRIGADE_VALUE_U32, .as.u64 = v};
    return bg_gguf_set(w, key, &val, err);
}

brigade_status bg_gguf_set_f32(bg_gguf_writer *w, const char *key, float v, brigade_error *err)
{
    brigade_value val = {.type = BRIGADE_VALUE_F32, .as.f64 = v};
    return bg_gguf_set(w, key, &val, err);
}

brigade_status bg_gguf_set_bool(bg_gguf_writer *w, const char *key, bool v, brigade_error *err)
{
    brigade_value val = {.type = BRIGADE_VALUE_BOOL, .as.b = v};
    return bg_gguf_set(w, key, &val, err);
}

brigade_status bg_gguf_set_str(bg_gguf_writer *w, const char *key, const char *v,
                               brigade_error *err)
{
    brigade_value val = {.type = BRIGADE_VALUE_STRING, .as.str = {v, strlen(v)}};
    return bg_gguf_set(w, key, &val, err);
}

brigade_status bg_gguf_set_array(bg_gguf_writer *w, const char *key, brigade_value_type elem_type,
                                 const void *elems, uint64_t count, brigade_error *err)
{
    if (!gguf_scalar_size(elem_type))
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: key '%s': %s is not a numeric type",
                       key, brigade_value_type_name(elem_type));
    brigade_value val = {.type = BRIGADE_VALUE_ARRAY, .elem_type = elem_type, .count = count,
                         .as.numbers = elems};
    return bg_gguf_set(w, key, &val, err);
}

/* ----------------------------------------------------------------- tensors */

brigade_status bg_gguf_add_tensor(bg_gguf_writer *w, const char *name, uint32_t type,
                                  uint32_t n_dims, const uint64_t *ne, brigade_error *err)
{
    size_t len = strlen(name);
    if (w->fp)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: tensor '%s' added after the header", name);
    if (len == 0 || len > GGUF_MAX_NAME)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: tensor name '%s' must be 1..%u bytes",
                       name, GGUF_MAX_NAME);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: tensor '%s': %u dimensions", name, n_dims);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: duplicate tensor '%s'", name);
    out_tensor t = {.type = type, .n_dims = n_dims};
    uint64_t rows = 1;
    for (unsigned d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] == 0 || (d > 0 && rows > UINT64_MAX / t.ne[d]))
            return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: tensor '%s': bad dimension %u",
                           name, d);
        if (d > 0)
            rows *= t.ne[d];
    }
    uint64_t row_bytes;
    if (!bg_type_row_bytes((bg_type)type, t.ne[0], &row_bytes) || rows > UINT64_MAX / row_bytes)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "gguf writer: tensor '%s': type %u cannot hold rows of %llu elements",
                       name, type, (unsigned long long)t.ne[0]);
    t.n_bytes = row_bytes * rows;
    t.offset = w->data_bytes;
    uint64_t padded = gguf_align_up(t.n_bytes, w->alignment);
    if (padded < t.n_bytes || w->data_bytes > UINT64_MAX - padded)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: tensor '%s': file size overflows", name);
    if (!grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors + 1, sizeof *w->tensors) ||
        !(t.name = bg_arena_strndup(&w->arena, name, len)))
        return bg_fail(err, BRIGADE_ERR_NOMEM, "gguf writer: out of memory");
    w->tensors[w->n_tensors++] = t;
    w->data_bytes += padded;
    return BRIGADE_OK;
}

int64_t bg_gguf_writer_tensor_count(const bg_gguf_writer *w) { return w->n_tensors; }

uint64_t bg_gguf_writer_tensor_bytes(const bg_gguf_writer *w, int64_t i)
{
    return i >= 0 && i < w->n_tensors ? w->tensors[i].n_bytes : 0;
}

/* -------------------------------------------------------------- serialize */

/* Header bytes are written through put(), which counts even when fp is NULL,
 * so the same code measures and writes. */
typedef struct sink {
    FILE *fp;
    uint8_t *mem; /* or into memory, sized by a measuring pass */
    uint64_t n;
    bool failed;
} sink;

static void put(sink *s, const void *p, size_t n)
{
    if (s->fp && !s->failed && n && fwrite(p, 1, n, s->fp) != n)
        s->failed = true;
    if (s->mem && n)
        memcpy(s->mem + s->n, p, n);
    s->n += n;
}

static void put_le(sink *s, uint64_t v, unsigned n)
{
    uint8_t b[8];
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(s, b, n);
}

static void put_str(sink *s, const char *p, uint64_t len)
{
    put_le(s, len, 8);
    put(s, p, (size_t)len);
}

static void put_scalar(sink *s, brigade_value_type type, const void *native)
{
    unsigned n = gguf_scalar_size(type);
    uint64_t v = 0;
    memcpy(&v, native, n); /* native little-endian */
    put_le(s, v, n);
}

static void put_value(sink *s, const brigade_value *v, bool with_type)
{
    if (with_type)
        put_le(s, v->type, 4);
    switch (v->type) {
    case BRIGADE_VALUE_STRING: put_str(s, v->as.str.ptr, v->as.str.len); return;
    case BRIGADE_VALUE_ARRAY:
        put_le(s, v->elem_type, 4);
        put_le(s, v->count, 8);
        for (uint64_t i = 0; i < v->count; i++) {
            unsigned es = gguf_scalar_size(v->elem_type);
            if (es)
                put_scalar(s, v->elem_type, (const uint8_t *)v->as.numbers + i * es);
            else if (v->elem_type == BRIGADE_VALUE_STRING)
                put_str(s, v->as.strings[i].ptr, v->as.strings[i].len);
            else
                put_value(s, &v->as.items[i], false);
        }
        return;
    case BRIGADE_VALUE_F32: {
        float f = (float)v->as.f64;
        put_scalar(s, v->type, &f);
        return;
    }
    case BRIGADE_VALUE_F64: put_scalar(s, v->type, &v->as.f64); return;
    case BRIGADE_VALUE_BOOL: put_le(s, v->as.b ? 1 : 0, 1); return;
    default: put_le(s, v->as.u64, gguf_scalar_size(v->type)); return;
    }
}

static void put_pad(sink *s, uint64_t alignment)
{
    static const uint8_t zeros[64];
    uint64_t pad = gguf_align_up(s->n, alignment) - s->n;
    while (pad) {
        size_t k = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        put(s, zeros, k);
        pad -= k;
    }
}

static void put_header(sink *s, const bg_gguf_writer *w)
{
    put(s, GGUF_MAGIC, 4);
    put_le(s, 3, 4);
    put_le(s, (uint64_t)w->n_tensors, 8);
    /* A non-default alignment is recorded as the last key. */
    bool record_alignment = w->alignment != GGUF_DEFAULT_ALIGNMENT;
    put_le(s, (uint64_t)w->n_kv + record_alignment, 8);
    for (int64_t i = 0; i < w->n_kv; i++) {
        put_str(s, w->kv[i].key, strlen(w->kv[i].key));
        put_value(s, &w->kv[i].value, true);
    }
    if (record_alignment) {
        brigade_value a = {.type = BRIGADE_VALUE_U32, .as.u64 = w->alignment};
        put_str(s, GGUF_KEY_ALIGNMENT, strlen(GGUF_KEY_ALIGNMENT));
        put_value(s, &a, true);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const out_tensor *t = &w->tensors[i];
        put_str(s, t->name, strlen(t->name));
        put_le(s, t->n_dims, 4);
        for (unsigned d = 0; d < t->n_dims; d++)
            put_le(s, t->ne[d], 8);
        put_le(s, t->type, 4);
        put_le(s, t->offset, 8);
    }
    put_pad(s, w->alignment);
}

uint64_t bg_gguf_writer_file_size(const bg_gguf_writer *w)
{
    sink s = {0};
    put_header(&s, w);
    return s.n + w->data_bytes;
}

brigade_status bg_gguf_writer_header(const bg_gguf_writer *w, uint8_t **out, size_t *len,
                                     brigade_error *err)
{
    sink measure = {0};
    put_header(&measure, w);
    sink s = {.mem = malloc((size_t)measure.n)};
    if (!s.mem)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "gguf writer: out of memory for the header");
    put_header(&s, w);
    *out = s.mem;
    *len = (size_t)s.n;
    return BRIGADE_OK;
}

static brigade_status io_error(bg_gguf_writer *w, brigade_error *err)
{
    return bg_fail(err, BRIGADE_ERR_IO, "%s: write failed at byte %llu: %s", w->path,
                   (unsigned long long)w->pos, strerror(errno));
}

brigade_status bg_gguf_writer_begin(bg_gguf_writer *w, const char *path, brigade_error *err)
{
    if (w->fp)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: begin called twice");
    free(w->path);
    w->path = strdup(path);
    if (!w->path)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "gguf writer: out of memory");
    w->fp = fopen(path, "wb");
    if (!w->fp)
        return bg_fail(err, BRIGADE_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    setvbuf(w->fp, NULL, _IOFBF, 1 << 20);
    sink s = {.fp = w->fp};
    put_header(&s, w);
    w->pos = s.n;
    if (s.failed)
        return io_error(w, err);
    w->cur = 0;
    w->cur_written = 0;
    return BRIGADE_OK;
}

static brigade_status pad_to(bg_gguf_writer *w, uint64_t target, brigade_error *err)
{
    static const uint8_t zeros[64];
    while (w->pos < target) {
        size_t k = target - w->pos > sizeof zeros ? sizeof zeros : (size_t)(target - w->pos);
        if (fwrite(zeros, 1, k, w->fp) != k)
            return io_error(w, err);
        w->pos += k;
    }
    return BRIGADE_OK;
}

/* Advances through the tensors by n bytes, writing them from data, or
 * seeking over them when data is NULL. */
static brigade_status advance(bg_gguf_writer *w, const uint8_t *data, uint64_t n,
                              brigade_error *err)
{
    if (!w->fp)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: data written before begin");
    while (n > 0) {
        if (w->cur >= w->n_tensors)
            return bg_fail(err, BRIGADE_ERR_ARG, "%s: %llu bytes of data beyond the last tensor",
                           w->path, (unsigned long long)n);
        const out_tensor *t = &w->tensors[w->cur];
        uint64_t k = t->n_bytes - w->cur_written;
        if (k > n)
            k = n;
        w->skipped |= data == NULL;
        if (data ? fwrite(data, 1, (size_t)k, w->fp) != k
                 : fseeko(w->fp, (off_t)k, SEEK_CUR) != 0)
            return io_error(w, err);
        w->pos += k;
        w->cur_written += k;
        if (data)
            data += k;
        n -= k;
        if (w->cur_written == t->n_bytes) {
            uint64_t end = gguf_align_up(w->pos, w->alignment);
            brigade_status st = data ? pad_to(w, end, err) : BRIGADE_OK;
            if (!data && fseeko(w->fp, (off_t)(end - w->pos), SEEK_CUR) != 0)
                return io_error(w, err);
            w->pos = end;
            if (st)
                return st;
            w->cur++;
            w->cur_written = 0;
        }
    }
    return BRIGADE_OK;
}

brigade_status bg_gguf_writer_data(bg_gguf_writer *w, const void *data, uint64_t n,
                                   brigade_error *err)
{
    return advance(w, data, n, err);
}

brigade_status bg_gguf_writer_skip(bg_gguf_writer *w, uint64_t n, brigade_error *err)
{
    return advance(w, NULL, n, err);
}

brigade_status bg_gguf_writer_finish(bg_gguf_writer *w, brigade_error *err)
{
    if (!w->fp)
        return bg_fail(err, BRIGADE_ERR_ARG, "gguf writer: finish without begin");
    if (w->cur < w->n_tensors)
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: tensor '%s' got %llu of its %llu bytes",
                       w->path, w->tensors[w->cur].name, (unsigned long long)w->cur_written,
                       (unsigned long long)w->tensors[w->cur].n_bytes);
    /* A file that ends in a skipped hole gets its full length here. */
    int rc = fflush(w->fp);
    if (rc == 0 && w->skipped)
        rc = ftruncate(fileno(w->fp), (off_t)w->pos);
    if (fclose(w->fp) != 0)
        rc = -1;
    w->fp = NULL;
    if (rc != 0)
        return io_error(w, err);
    return BRIGADE_OK;
}
