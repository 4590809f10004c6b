/* Hostile and broken GGUF files, one per class of the threat list, built
 * byte by byte here (not with the writer). Each must be rejected with the
 * right status and a message that names the file, the item (key or tensor)
 * and, where the reader knows it, the byte offset. Every case is opened from
 * an exactly-sized heap copy, so a read past the end shows under ASan or
 * valgrind. Valid controls next to the bad cases prove that each rejection
 * comes from the one defect put in. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"

/* ---------------------------------------------------------------- builder */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) {
            perror("realloc");
            exit(1);
        }
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void le(buf *b, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    put(b, t, (size_t)n);
}

static void u8_(buf *b, uint8_t v) { le(b, v, 1); }
static void u32_(buf *b, uint32_t v) { le(b, v, 4); }
static void u64_(buf *b, uint64_t v) { le(b, v, 8); }
static void str_(buf *b, const char *s)
{
    u64_(b, strlen(s));
    put(b, s, strlen(s));
}
static void fill(buf *b, size_t n, uint8_t byte)
{
    for (size_t i = 0; i < n; i++)
        put(b, &byte, 1);
}
static void pad(buf *b, size_t align) { fill(b, (align - b->n % align) % align, 0); }

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32_(b, version);
    u64_(b, n_tensors);
    u64_(b, n_kv);
}

/* Key and type tag; returns the offset of the key. */
static size_t kv(buf *b, const char *key, uint32_t type)
{
    size_t at = b->n;
    str_(b, key);
    u32_(b, type);
    return at;
}
static size_t kv_u32(buf *b, const char *key, uint32_t v)
{
    size_t at = kv(b, key, T_U32);
    u32_(b, v);
    return at;
}
static size_t kv_str(buf *b, const char *key, const char *v)
{
    size_t at = kv(b, key, T_STR);
    str_(b, v);
    return at;
}
/* Array header; returns its offset (the element type field). */
static size_t arr(buf *b, uint32_t elem_type, uint64_t count)
{
    size_t at = b->n;
    u32_(b, elem_type);
    u64_(b, count);
    return at;
}

/* A tensor directory entry; returns its offset. */
static size_t tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t offset)
{
    size_t at = b->n;
    str_(b, name);
    u32_(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        u64_(b, ne[d]);
    u32_(b, type);
    u64_(b, offset);
    return at;
}

/* -------------------------------------------------------------- checking */

static const char *S(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *S(const char *fmt, ...)
{
    static char pool[64][192];
    static unsigned k;
    char *p = pool[k++ % 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof pool[0], fmt, ap);
    va_end(ap);
    return p;
}

#define LABEL "bad.gguf"

/* Opens n bytes from an exactly-sized copy. */
static brigade_status open_bytes(const uint8_t *p, size_t n, brigade_gguf **f, brigade_error *err)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    memset(err, 0, sizeof *err);
    brigade_status st = brigade_gguf_open_memory(copy, n, LABEL, f, err);
    if (*f) {
        /* Touch what the reader says is there while the bytes still live. */
        for (int64_t i = 0; i < brigade_gguf_tensor_count(*f); i++) {
            const brigade_tensor_info *t = brigade_gguf_tensor(*f, i);
            volatile uint8_t x = ((const uint8_t *)t->data)[t->n_bytes - 1];
            (void)x;
        }
        brigade_gguf_close(*f);
        *f = (brigade_gguf *)1; /* opened */
    }
    free(copy);
    return st;
}

static bool has_all(const char *msg, const char *const *subs)
{
    for (; *subs; subs++)
        if (!strstr(msg, *subs))
            return false;
    return true;
}

static void expect_bad(int line, const uint8_t *p, size_t n, brigade_status want,
                       const char *const *subs)
{
    brigade_gguf *f = NULL;
    brigade_error err;
    brigade_status st = open_bytes(p, n, &f, &err);
    bool ok = st == want && f == NULL && err.status == want &&
              strncmp(err.message, LABEL ": ", strlen(LABEL) + 2) == 0 && has_all(err.message, subs);
    CHECK(ok, "line %d: got %s (%s), expected %s with all of:", line, brigade_status_name(st),
          st ? err.message : "opened", brigade_status_name(want));
    if (!ok)
        for (const char *const *s = subs; *s; s++)
            fprintf(stderr, "    %s '%s'\n", strstr(err.message, *s) ? "   " : "MISSING", *s);
}

static void expect_ok(int line, const buf *b)
{
    brigade_gguf *f = NULL;
    brigade_error err;
    brigade_status st = open_bytes(b->p, b->n, &f, &err);
    CHECK(st == BRIGADE_OK, "line %d: valid control rejected: %s", line, err.message);
}

#define BAD(b, st, ...) expect_bad(__LINE__, (b)->p, (b)->n, st, (const char *const[]){__VA_ARGS__, NULL})
#define BADN(b, n, st, ...) expect_bad(__LINE__, (b)->p, n, st, (const char *const[]){__VA_ARGS__, NULL})
#define OK(b) expect_ok(__LINE__, b)
#define FMT BRIGADE_ERR_FORMAT

/* ---------------------------------------------------- truncation sweeps */

/* A valid file whose every structural element has a known offset. The
 * first key is a long string so that, past it, the header's count checks
 * pass and truncation is caught where it happens. Data ends the file
 * (no padding after the last tensor), so every shorter prefix is broken. */
typedef struct base_pos {
    size_t kv_pad, kv_u32, kv_u32_type, kv_u32_val, kv_str, kv_str_val, kv_arr, kv_arr_hdr,
        kv_arr_body, kv_strs, kv_strs_hdr, kv_strs_1, kv_nest, kv_nest_inner, t0, t1, t1_dims,
        t1_ne, t1_type, t1_off, meta_end, data, t1_data;
} base_pos;

static void make_base(buf *b, base_pos *p)
{
    header(b, 3, 2, 6);
    char padv[201];
    memset(padv, 'p', 200);
    padv[200] = 0;
    p->kv_pad = kv_str(b, "k.pad", padv);
    p->kv_u32 = b->n;
    str_(b, "k.u32");
    p->kv_u32_type = b->n;
    u32_(b, T_U32);
    p->kv_u32_val = b->n;
    u32_(b, 7);
    p->kv_str = kv(b, "general.architecture", T_STR);
    p->kv_str_val = b->n;
    str_(b, "qwen35moe");
    p->kv_arr = kv(b, "k.arr", T_ARR);
    p->kv_arr_hdr = arr(b, T_U32, 3);
    p->kv_arr_body = b->n;
    u32_(b, 1), u32_(b, 2), u32_(b, 3);
    p->kv_strs = kv(b, "k.strs", T_ARR);
    p->kv_strs_hdr = arr(b, T_STR, 3);
    str_(b, "a string long enough for the count check to pass");
    p->kv_strs_1 = b->n;
    str_(b, "xyz"), str_(b, "");
    p->kv_nest = kv(b, "k.nest", T_ARR);
    arr(b, T_ARR, 2);
    arr(b, T_U8, 2), u8_(b, 1), u8_(b, 2);
    p->kv_nest_inner = arr(b, T_I16, 2);
    le(b, 0xfffe, 2), le(b, 5, 2);
    uint64_t ne0[2] = {4, 2}, ne1[1] = {32};
    p->t0 = tensor(b, "t0", 2, ne0, 0, 0); /* f32, 32 bytes */
    p->t1 = b->n;
    str_(b, "t1");
    p->t1_dims = b->n;
    u32_(b, 1);
    p->t1_ne = b->n;
    u64_(b, ne1[0]);
    p->t1_type = b->n;
    u32_(b, 8); /* q8_0: 34 bytes */
    p->t1_off = b->n;
    u64_(b, 32);
    p->meta_end = b->n;
    pad(b, 32);
    p->data = b->n;
    for (int i = 0; i < 32; i++)
        u8_(b, (uint8_t)i);
    p->t1_data = b->n;
    for (int i = 0; i < 34; i++)
        u8_(b, (uint8_t)(100 + i));
}

static void test_truncation(void)
{
    buf b = {0};
    base_pos p;
    make_base(&b, &p);
    OK(&b);

    /* Every prefix fails, cleanly, with a format error that names the file. */
    int failed = 0;
    for (size_t n = 0; n < b.n; n++) {
        brigade_gguf *f = NULL;
        brigade_error err;
        brigade_status st = open_bytes(b.p, n, &f, &err);
        if (st != FMT || f || strncmp(err.message, LABEL ": ", strlen(LABEL) + 2) != 0) {
            if (failed++ < 5)
                CHECK(0, "prefix of %zu bytes: %s (%s)", n, brigade_status_name(st), err.message);
        }
    }
    CHECK(failed == 0, "%d of %zu prefixes not rejected cleanly", failed, b.n);

    /* Specific structural points. */
    BADN(&b, 0, FMT, "0 bytes is too small");
    BADN(&b, 10, FMT, "10 bytes is too small for a GGUF header");
    BADN(&b, 23, FMT, "23 bytes");
    BADN(&b, 24, FMT, "metadata count 6 cannot fit");
    /* inside the first key's long string */
    BADN(&b, p.kv_pad + 8 + 5 + 4 + 8 + 150, FMT, S("k.pad at byte %zu", p.kv_pad + 17),
         "has length 200, beyond the end");
    /* key length, key bytes */
    BADN(&b, p.kv_u32 + 3, FMT, S("truncated at byte %zu", p.kv_u32), "metadata key needs 8 bytes");
    BADN(&b, p.kv_u32 + 8 + 2, FMT, S("metadata key at byte %zu has length 5", p.kv_u32),
         "beyond the end");
    /* value type, value */
    BADN(&b, p.kv_u32_type + 2, FMT, S("truncated at byte %zu", p.kv_u32_type), "k.u32 needs 4");
    BADN(&b, p.kv_u32_val + 1, FMT, S("truncated at byte %zu", p.kv_u32_val), "k.u32 needs 4");
    BADN(&b, p.kv_str_val + 4, FMT, S("truncated at byte %zu", p.kv_str_val),
         "general.architecture needs 8");
    BADN(&b, p.kv_str_val + 8 + 3, FMT, S("general.architecture at byte %zu has length 9", p.kv_str_val));
    /* array header: element type, then count */
    BADN(&b, p.kv_arr_hdr + 2, FMT, S("truncated at byte %zu", p.kv_arr_hdr), "needs 4 bytes",
         "k.arr");
    BADN(&b, p.kv_arr_hdr + 4 + 5, FMT, S("truncated at byte %zu", p.kv_arr_hdr + 4),
         "needs 8 bytes", "k.arr");
    /* array bodies: numbers, strings, nested */
    BADN(&b, p.kv_arr_body + 5, FMT, "key 'k.arr'", S("array at byte %zu claims 3 elements of 4 bytes",
         p.kv_arr_hdr));
    BADN(&b, p.kv_strs_1 + 8 + 1, FMT, S("k.strs at byte %zu has length 3", p.kv_strs_1));
    BADN(&b, p.kv_nest_inner + 12 + 1, FMT, "key 'k.nest'",
         S("array at byte %zu claims 2 elements of 2 bytes", p.kv_nest_inner));
    /* tensor directory: name length, name, n_dims, dims, type, offset */
    BADN(&b, p.t1 + 4, FMT, S("truncated at byte %zu", p.t1), "tensor name needs 8");
    BADN(&b, p.t1 + 8 + 1, FMT, S("tensor name at byte %zu has length 2", p.t1));
    BADN(&b, p.t1_dims + 3, FMT, S("truncated at byte %zu", p.t1_dims), "t1 needs 4");
    BADN(&b, p.t1_ne + 7, FMT, S("truncated at byte %zu", p.t1_ne), "t1 needs 8");
    BADN(&b, p.t1_type + 1, FMT, S("truncated at byte %zu", p.t1_type), "t1 needs 4");
    BADN(&b, p.t1_off + 4, FMT, S("truncated at byte %zu", p.t1_off), "t1 needs 8");
    /* the padding before the data, the data of each tensor */
    if (p.data > p.meta_end)
        BADN(&b, p.meta_end + 1, FMT, S("data section would start at byte %zu", p.data));
    BADN(&b, p.data, FMT, "tensor 't0'", "data section has 0 bytes");
    BADN(&b, p.data + 10, FMT, "tensor 't0'", "data at offset 0 with 32 bytes ends beyond the end",
         "data section has 10 bytes");
    BADN(&b, b.n - 1, FMT, "tensor 't1'", "data at offset 32 with 34 bytes ends beyond the end",
         "data section has 65 bytes");
    free(b.p);
}

/* ------------------------------------------------------------ the header */

static void test_header(void)
{
    buf b = {0};
    header(&b, 3, 0, 1);
    kv_u32(&b, "k", 1);
    OK(&b);
    header(&b, 2, 0, 1); /* version 2 is fine */
    kv_u32(&b, "k", 1);
    OK(&b);
    header(&b, 3, 0, 0);
    OK(&b);

    header(&b, 3, 0, 1);
    kv_u32(&b, "k", 1);
    b.p[3] = 'G';
    BAD(&b, FMT, "not a GGUF file", "byte 0", "47 47 55 47");
    memset(b.p, 0, 4);
    BAD(&b, FMT, "not a GGUF file", "00 00 00 00");
    uint32_t versions[] = {0, 1, 4, 0xffffffffu};
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        header(&b, versions[i], 0, 1);
        kv_u32(&b, "k", 1);
        BAD(&b, BRIGADE_ERR_UNSUPPORTED, S("version %u is not supported", versions[i]), "byte 4");
    }
    header(&b, 0x03000000u, 0, 1); /* version 3 written big-endian */
    kv_u32(&b, "k", 1);
    BAD(&b, BRIGADE_ERR_UNSUPPORTED, "big-endian", "byte 4");
    header(&b, 0x02000000u, 0, 1);
    kv_u32(&b, "k", 1);
    BAD(&b, BRIGADE_ERR_UNSUPPORTED, "big-endian");

    /* Counts that would overflow allocations, or cannot fit in the file. */
    uint64_t huge[] = {1ull << 63, 1ull << 40, UINT64_MAX, 1ull << 31};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        header(&b, 3, huge[i], 0);
        fill(&b, 64, 0);
        BAD(&b, FMT, S("%llu tensors", (unsigned long long)huge[i]), "2^31-1");
        header(&b, 3, 0, huge[i]);
        fill(&b, 64, 0);
        BAD(&b, FMT, S("%llu metadata entries", (unsigned long long)huge[i]), "2^31-1");
    }
    header(&b, 3, 0, 1000);
    kv_u32(&b, "k", 1);
    BAD(&b, FMT, "byte 16", "metadata count 1000 cannot fit");
    header(&b, 3, 0, 0x7fffffff);
    kv_u32(&b, "k", 1);
    BAD(&b, FMT, "metadata count 2147483647 cannot fit");
    header(&b, 3, 1000, 1);
    kv_u32(&b, "k", 1);
    BAD(&b, FMT, "byte 8", "tensor count 1000 cannot fit");
    /* Two keys claimed, the second made of zero bytes: an empty key. */
    header(&b, 3, 0, 2);
    kv_u32(&b, "kk", 1);
    fill(&b, 40, 0);
    BAD(&b, FMT, "metadata key 1 at byte 42 is empty");
    free(b.p);
}

/* ---------------------------------------------------------------- values */

static void test_values(void)
{
    buf b = {0};
    size_t at;

    /* String lengths up to 2^64-1: keys, values, array elements, names. */
    uint64_t lens[] = {UINT64_MAX, 1ull << 63, 1ull << 32, 29};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        header(&b, 3, 0, 1);
        u64_(&b, lens[i]);
        fill(&b, 20, 'k');
        BAD(&b, FMT, S("metadata key at byte 24 has length %llu", (unsigned long long)lens[i]),
            "beyond the end");
        header(&b, 3, 0, 1);
        at = kv(&b, "my.key", T_STR);
        u64_(&b, lens[i]);
        fill(&b, 20, 'v');
        BAD(&b, FMT, S("my.key at byte %zu has length %llu", at + 18, (unsigned long long)lens[i]));
        header(&b, 3, 0, 1);
        kv(&b, "my.strs", T_ARR);
        arr(&b, T_STR, 2);
        str_(&b, "ok");
        at = b.n;
        u64_(&b, lens[i]);
        fill(&b, 20, 'v');
        BAD(&b, FMT, S("my.strs at byte %zu has length %llu", at, (unsigned long long)lens[i]));
        header(&b, 3, 1, 0);
        u64_(&b, lens[i]);
        fill(&b, 24, 'n');
        BAD(&b, FMT, S("tensor name at byte 24 has length %llu", (unsigned long long)lens[i]));
    }
    /* A string that takes exactly the rest of the file is fine as a string
     * but leaves nothing for what follows. */
    header(&b, 3, 0, 1);
    kv(&b, "s", T_STR);
    str_(&b, "exactly to the end");
    OK(&b);

    /* Unknown value types. */
    uint32_t bad_types[] = {13, 100, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_types / sizeof *bad_types; i++) {
        header(&b, 3, 0, 1);
        at = kv(&b, "k.t", bad_types[i]);
        fill(&b, 16, 0);
        BAD(&b, FMT, "key 'k.t'", S("unknown value type %u at byte %zu", bad_types[i], at + 11));
        header(&b, 3, 0, 1);
        kv(&b, "k.a", T_ARR);
        at = arr(&b, bad_types[i], 1);
        fill(&b, 16, 0);
        BAD(&b, FMT, "key 'k.a'", S("array at byte %zu has unknown element type %u", at,
                                    bad_types[i]));
    }

    /* Nesting: 8 levels of arrays are allowed, 9 are not. */
    for (int levels = 8; levels <= 9; levels++) {
        header(&b, 3, 0, 1);
        size_t first = kv(&b, "deep", T_ARR) + 16;
        for (int l = 0; l < levels - 1; l++)
            arr(&b, T_ARR, 1);
        arr(&b, T_U8, 1);
        u8_(&b, 9);
        if (levels == 8)
            OK(&b);
        else
            BAD(&b, FMT, "key 'deep'", "nested deeper than 8", S("at byte %zu", first + 8 * 12));
    }
    /* 1000 levels: must not recurse that deep. */
    header(&b, 3, 0, 1);
    kv(&b, "deeper", T_ARR);
    for (int l = 0; l < 1000; l++)
        arr(&b, T_ARR, 1);
    BAD(&b, FMT, "key 'deeper'", "nested deeper than 8");

    /* Array counts whose byte size overflows or exceeds the file. */
    struct {
        uint32_t et;
        uint64_t count;
        unsigned esize;
    } counts[] = {
        {T_U64, 1ull << 61, 8}, {T_F64, 1ull << 61, 8},  {T_U32, (1ull << 62) + 1, 4},
        {T_I16, 1ull << 63, 2}, {T_U8, UINT64_MAX, 1},    {T_BOOL, UINT64_MAX, 1},
        {T_F32, 5, 4},          {T_I64, 3, 8},
    };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        header(&b, 3, 0, 1);
        kv(&b, "k.n", T_ARR);
        at = arr(&b, counts[i].et, counts[i].count);
        fill(&b, 16, 0);
        BAD(&b, FMT, "key 'k.n'", S("array at byte %zu claims %llu elements of %u bytes", at,
                                    (unsigned long long)counts[i].count, counts[i].esize));
    }
    uint64_t big[] = {1ull << 61, UINT64_MAX, 1ull << 60, 3};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        header(&b, 3, 0, 1);
        kv(&b, "k.s", T_ARR);
        at = arr(&b, T_STR, big[i]);
        fill(&b, 16, 0);
        BAD(&b, FMT, "key 'k.s'", S("array at byte %zu claims %llu elements", at,
                                    (unsigned long long)big[i]));
        header(&b, 3, 0, 1);
        kv(&b, "k.aa", T_ARR);
        at = arr(&b, T_ARR, big[i] * 2);
        fill(&b, 16, 0);
        BAD(&b, FMT, "key 'k.aa'", S("array at byte %zu claims %llu elements", at,
                                     (unsigned long long)(big[i] * 2)));
    }

    /* Bools must be 0 or 1. */
    header(&b, 3, 0, 1);
    at = kv(&b, "b", T_BOOL) + 13;
    u8_(&b, 2);
    BAD(&b, FMT, "key 'b'", S("bool at byte %zu holds 2, not 0 or 1", at));
    header(&b, 3, 0, 1);
    kv(&b, "ba", T_ARR);
    at = arr(&b, T_BOOL, 3) + 12;
    u8_(&b, 1), u8_(&b, 0xff), u8_(&b, 0);
    BAD(&b, FMT, "key 'ba'", S("bool element 1 at byte %zu holds 255", at + 1));

    /* Keys: empty, with a NUL, duplicated. */
    header(&b, 3, 0, 2);
    kv_u32(&b, "first", 1);
    at = kv_u32(&b, "", 1);
    BAD(&b, FMT, S("metadata key 1 at byte %zu is empty", at));
    header(&b, 3, 0, 1);
    u64_(&b, 3), put(&b, "a\0b", 3), u32_(&b, T_U8), u8_(&b, 0);
    BAD(&b, FMT, "metadata key 0 at byte 24", "NUL");
    header(&b, 3, 0, 3);
    kv_u32(&b, "dup.key", 1);
    kv_u32(&b, "other", 1);
    kv_str(&b, "dup.key", "x");
    BAD(&b, FMT, "duplicate metadata key 'dup.key'", "entries 0 and 2");
    free(b.p);
}

/* ---------------------------------------------------- known key types */

static void test_known_keys(void)
{
    buf b = {0};
    /* qwen35moe.block_count must be a non-negative integer when the file's
     * architecture is qwen35moe; the architecture may come after it. */
    header(&b, 3, 0, 2);
    kv_str(&b, "qwen35moe.block_count", "40");
    kv_str(&b, "general.architecture", "qwen35moe");
    BAD(&b, FMT, "key 'qwen35moe.block_count' holds string", "non-negative integer");
    header(&b, 3, 0, 2);
    kv_str(&b, "general.architecture", "qwen35moe");
    kv(&b, "qwen35moe.block_count", T_I32), u32_(&b, (uint32_t)-1);
    BAD(&b, FMT, "key 'qwen35moe.block_count' holds i32 (negative)");
    header(&b, 3, 0, 2);
    kv_str(&b, "general.architecture", "qwen35moe");
    kv(&b, "qwen35moe.block_count", T_I64), u64_(&b, (uint64_t)INT64_MIN);
    BAD(&b, FMT, "key 'qwen35moe.block_count' holds i64 (negative)");
    header(&b, 3, 0, 2);
    kv_str(&b, "general.architecture", "qwen35moe");
    kv(&b, "qwen35moe.block_count", T_F32), u32_(&b, 0x42200000u);
    BAD(&b, FMT, "key 'qwen35moe.block_count' holds f32");
    /* controls: positive i32, u64, and another architecture's key */
    header(&b, 3, 0, 2);
    kv_str(&b, "general.architecture", "qwen35moe");
    kv(&b, "qwen35moe.block_count", T_I32), u32_(&b, 40);
    OK(&b);
    header(&b, 3, 0, 2);
    kv_str(&b, "general.architecture", "qwen35moe");
    kv(&b, "qwen35moe.block_count", T_U64), u64_(&b, 40);
    OK(&b);
    header(&b, 3, 0, 2);
    kv_str(&b, "general.architecture", "llama");
    kv_str(&b, "qwen35moe.block_count", "not checked for llama");
    OK(&b);

    header(&b, 3, 0, 1);
    kv(&b, "tokenizer.ggml.model", T_F32), u32_(&b, 0x3f800000u);
    BAD(&b, FMT, "key 'tokenizer.ggml.model' holds f32, expected string");
    header(&b, 3, 0, 1);
    kv(&b, "tokenizer.ggml.tokens", T_ARR), arr(&b, T_I32, 2), u32_(&b, 1), u32_(&b, 2);
    BAD(&b, FMT, "key 'tokenizer.ggml.tokens' holds an array of i32", "array of strings");
    header(&b, 3, 0, 1);
    kv_str(&b, "tokenizer.ggml.tokens", "a");
    BAD(&b, FMT, "key 'tokenizer.ggml.tokens' holds string");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.architecture", 3);
    BAD(&b, FMT, "key 'general.architecture' holds u32, expected string");
    header(&b, 3, 0, 1);
    kv(&b, "tokenizer.ggml.tokens", T_ARR), arr(&b, T_STR, 2), str_(&b, "a"), str_(&b, "b");
    OK(&b);

    /* general.alignment: a u32 power of two. */
    uint32_t bad_align[] = {0, 3, 48, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_align / sizeof *bad_align; i++) {
        header(&b, 3, 0, 1);
        kv_u32(&b, "general.alignment", bad_align[i]);
        BAD(&b, FMT, S("key 'general.alignment' is %u", bad_align[i]), "power of two");
    }
    header(&b, 3, 0, 1);
    kv(&b, "general.alignment", T_U64), u64_(&b, 64);
    BAD(&b, FMT, "key 'general.alignment' holds u64, expected u32");
    header(&b, 3, 0, 1);
    kv(&b, "general.alignment", T_I32), u32_(&b, 64);
    BAD(&b, FMT, "key 'general.alignment' holds i32, expected u32");
    header(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "64");
    BAD(&b, FMT, "key 'general.alignment' holds string, expected u32");
    header(&b, 3, 0, 1);
    kv(&b, "general.alignment", T_ARR), arr(&b, T_U32, 1), u32_(&b, 64);
    BAD(&b, FMT, "key 'general.alignment' holds an array of u32, expected u32");
    uint32_t good_align[] = {1, 8, 64, 4096};
    for (size_t i = 0; i < sizeof good_align / sizeof *good_align; i++) {
        header(&b, 3, 1, 1);
        kv_u32(&b, "general.alignment", good_align[i]);
        uint64_t ne[1] = {3};
        tensor(&b, "t", 1, ne, 0, 0);
        pad(&b, good_align[i]);
        fill(&b, 12, 1);
        OK(&b);
    }
    free(b.p);
}

/* --------------------------------------------------------------- tensors */

/* The test's own block geometry for every id a GGUF file may use. */
static const struct {
    uint32_t id, elems, bytes;
} GEOM[] = {
    {0, 1, 4},       {1, 1, 2},       {2, 32, 18},     {3, 32, 20},    {6, 32, 22},
    {7, 32, 24},     {8, 32, 34},     {9, 32, 36},     {10, 256, 84},  {11, 256, 110},
    {12, 256, 144},  {13, 256, 176},  {14, 256, 210},  {15, 256, 292}, {16, 256, 66},
    {17, 256, 74},   {18, 256, 98},   {19, 256, 50},   {20, 32, 18},   {21, 256, 110},
    {22, 256, 82},   {23, 256, 136},  {24, 1, 1},      {25, 1, 2},     {26, 1, 4},
    {27, 1, 8},      {28, 1, 8},      {29, 256, 56},   {30, 1, 2},     {34, 256, 54},
    {35, 256, 66},   {39, 32, 17},    {40, 64, 36},    {41, 128, 18},  {42, 64, 18},
};

/* One tensor "t" (after one key), its data padded after it. */
static size_t one_tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                         uint32_t type, uint64_t offset, size_t data_bytes)
{
    header(b, 3, 1, 1);
    kv_u32(b, "k", 1);
    size_t at = tensor(b, name, n_dims, ne, type, offset);
    pad(b, 32);
    fill(b, data_bytes, 0x5a);
    return at;
}

static void test_tensors(void)
{
    buf b = {0};
    size_t at;
    /* Every known type with one block of data is accepted. */
    for (size_t i = 0; i < sizeof GEOM / sizeof *GEOM; i++) {
        uint64_t ne[2] = {GEOM[i].elems, 2};
        one_tensor(&b, "t", 2, ne, GEOM[i].id, 0, 2 * GEOM[i].bytes);
        OK(&b);
        /* one byte short */
        BADN(&b, b.n - 1, FMT, "tensor 't'",
             S("with %u bytes ends beyond the end", 2 * GEOM[i].bytes));
        if (GEOM[i].elems > 1) {
            ne[0] = GEOM[i].elems + GEOM[i].elems / 2;
            at = one_tensor(&b, "odd", 2, ne, GEOM[i].id, 0, 4 * GEOM[i].bytes);
            BAD(&b, FMT, "tensor 'odd'", S("row of %llu elements is not a whole number of",
                                           (unsigned long long)ne[0]),
                S("(%u elements each)", GEOM[i].elems));
        }
    }
    /* Unknown and retired type ids. */
    uint32_t bad_ids[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        uint64_t ne[1] = {256};
        at = one_tensor(&b, "t.bad", 1, ne, bad_ids[i], 0, 1024);
        BAD(&b, FMT, "tensor 't.bad'", S("unknown tensor type %u at byte %zu", bad_ids[i],
                                         at + 8 + 5 + 4 + 8));
    }
    /* Dimension counts 0, 5 and absurd. */
    uint32_t bad_dims[] = {0, 5, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_dims / sizeof *bad_dims; i++) {
        header(&b, 3, 1, 0);
        at = b.n;
        str_(&b, "t.dims");
        u32_(&b, bad_dims[i]);
        fill(&b, 64, 1);
        BAD(&b, FMT, S("tensor 't.dims' at byte %zu has %u dimensions", at + 14, bad_dims[i]));
    }
    /* Zero and negative dimensions. */
    uint64_t zero[3] = {4, 0, 2};
    at = one_tensor(&b, "t.zero", 3, zero, 0, 0, 64);
    BAD(&b, FMT, "tensor 't.zero'", S("dimension 1 at byte %zu is 0", at + 8 + 6 + 4 + 8));
    uint64_t neg[2] = {1ull << 63, 1};
    at = one_tensor(&b, "t.neg", 2, neg, 0, 0, 64);
    BAD(&b, FMT, "tensor 't.neg'", S("dimension 0 at byte %zu is -9223372036854775808", at + 17));
    uint64_t neg1[2] = {4, UINT64_MAX};
    at = one_tensor(&b, "t.neg", 2, neg1, 0, 0, 64);
    BAD(&b, FMT, "tensor 't.neg'", S("dimension 1 at byte %zu is -1", at + 25));
    /* Element counts that overflow int64. */
    uint64_t ov1[2] = {1ull << 32, 1ull << 32};
    at = one_tensor(&b, "t.ov", 2, ov1, 0, 0, 64);
    BAD(&b, FMT, "tensor 't.ov'", S("element count overflows at dimension 1 (byte %zu)", at + 8 + 4 + 4 + 8));
    uint64_t ov2[4] = {1ull << 20, 1ull << 20, 1ull << 20, 1ull << 10};
    at = one_tensor(&b, "t.ov", 4, ov2, 24, 0, 64);
    BAD(&b, FMT, "tensor 't.ov'", S("element count overflows at dimension 3 (byte %zu)", at + 16 + 24));
    uint64_t ov3[2] = {3, (uint64_t)INT64_MAX / 2};
    one_tensor(&b, "t.ov", 2, ov3, 24, 0, 64);
    BAD(&b, FMT, "tensor 't.ov'", "element count overflows at dimension 1");
    /* Element counts that fit but whose byte size does not. */
    uint64_t bs1[2] = {1ull << 31, 1ull << 31}; /* f64: 2^65 bytes */
    one_tensor(&b, "t.bytes", 2, bs1, 28, 0, 64);
    BAD(&b, FMT, "tensor 't.bytes'", "byte size overflows");
    uint64_t bs2[3] = {1ull << 40, 1ull << 20, 1ull << 2}; /* f32: 2^64 bytes */
    one_tensor(&b, "t.bytes", 3, bs2, 0, 0, 64);
    BAD(&b, FMT, "tensor 't.bytes'", "byte size overflows");
    uint64_t bs3[1] = {1ull << 62}; /* one row of 2^65 bytes */
    one_tensor(&b, "t.row", 1, bs3, 28, 0, 64);
    BAD(&b, FMT, "tensor 't.row'", "overflow");
    /* Big but representable: beyond the file. */
    uint64_t bs4[1] = {(uint64_t)INT64_MAX};
    one_tensor(&b, "t.max", 1, bs4, 24, 0, 64);
    BAD(&b, FMT, "tensor 't.max'", "with 9223372036854775807 bytes ends beyond the end");

    /* Offsets and sizes beyond the file. */
    uint64_t ne8[1] = {8}; /* f32: 32 bytes */
    uint64_t offs[] = {1ull << 63, UINT64_MAX - 31, 64, 96};
    for (size_t i = 0; i < sizeof offs / sizeof *offs; i++) {
        one_tensor(&b, "t.off", 1, ne8, 0, offs[i], 64);
        BAD(&b, FMT, "tensor 't.off'", S("data at offset %llu with 32 bytes ends beyond the end",
                                         (unsigned long long)offs[i]));
    }
    one_tensor(&b, "t.off", 1, ne8, 0, 0, 32);
    OK(&b);
    uint64_t ne1000[1] = {1000};
    one_tensor(&b, "t.size", 1, ne1000, 0, 0, 64);
    BAD(&b, FMT, "tensor 't.size'", "with 4000 bytes ends beyond the end",
        "data section has 64 bytes");
    /* Misaligned offsets. */
    at = one_tensor(&b, "t.mis", 1, ne8, 0, 16, 64);
    BAD(&b, FMT, "tensor 't.mis'", S("data offset 16 (byte %zu)", at + 8 + 5 + 4 + 8 + 4),
        "alignment 32");
    header(&b, 3, 1, 1);
    kv_u32(&b, "general.alignment", 64);
    at = tensor(&b, "t.mis64", 1, ne8, 0, 32);
    pad(&b, 64);
    fill(&b, 128, 0);
    BAD(&b, FMT, "tensor 't.mis64'", S("data offset 32 (byte %zu)", at + 8 + 7 + 4 + 8 + 4),
        "alignment 64");

    /* Overlaps: partial, identical offsets, listed in reverse order. */
    uint64_t ne16[1] = {16}; /* 64 bytes */
    header(&b, 3, 2, 0);
    tensor(&b, "a", 1, ne16, 0, 0);
    tensor(&b, "b", 1, ne8, 0, 32);
    pad(&b, 32);
    size_t data = b.n;
    fill(&b, 128, 0);
    BAD(&b, FMT, S("tensor 'a' (bytes %zu..%zu) overlaps tensor 'b' (from byte %zu)", data,
                   data + 64, data + 32));
    header(&b, 3, 2, 0);
    tensor(&b, "b", 1, ne8, 0, 32);
    tensor(&b, "a", 1, ne16, 0, 0);
    pad(&b, 32);
    fill(&b, 128, 0);
    BAD(&b, FMT, "tensor 'a'", "overlaps tensor 'b'");
    header(&b, 3, 3, 0);
    tensor(&b, "x", 1, ne8, 0, 64);
    tensor(&b, "y", 1, ne8, 0, 0);
    tensor(&b, "z", 1, ne8, 0, 64);
    pad(&b, 32);
    fill(&b, 128, 0);
    BAD(&b, FMT, "overlaps", "from byte");
    /* control: reverse order with a gap, no overlap (GGUF does not demand
     * the order; ggml does, see tests/oracle_gguf.c) */
    header(&b, 3, 2, 0);
    tensor(&b, "b", 1, ne8, 0, 64);
    tensor(&b, "a", 1, ne8, 0, 0);
    pad(&b, 32);
    fill(&b, 96, 0);
    OK(&b);

    /* Names: duplicate, too long, empty, with a NUL. */
    header(&b, 3, 2, 0);
    tensor(&b, "same", 1, ne8, 0, 0);
    tensor(&b, "same", 1, ne8, 0, 32);
    pad(&b, 32);
    fill(&b, 64, 0);
    BAD(&b, FMT, "duplicate tensor name 'same'", "tensors 0 and 1");
    char n63[64], n64[65];
    memset(n63, 'n', 63), n63[63] = 0;
    memset(n64, 'n', 64), n64[64] = 0;
    one_tensor(&b, n63, 1, ne8, 0, 0, 32);
    OK(&b);
    at = one_tensor(&b, n64, 1, ne8, 0, 0, 32);
    BAD(&b, FMT, S("tensor 0 at byte %zu: name of 64 bytes", at));
    at = one_tensor(&b, "", 1, ne8, 0, 0, 32);
    BAD(&b, FMT, S("tensor 0 at byte %zu: name of 0 bytes", at));
    header(&b, 3, 1, 0);
    u64_(&b, 3), put(&b, "a\0b", 3), u32_(&b, 1), u64_(&b, 8), u32_(&b, 0), u64_(&b, 0);
    pad(&b, 32);
    fill(&b, 32, 0);
    BAD(&b, FMT, "tensor 0 at byte 24", "NUL");
    free(b.p);
}

/* ------------------------------------------------------------------ files */

static void test_files(void)
{
    char dir[] = "/tmp/brigade_test_gguf_bad_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[128];
    brigade_gguf *f = NULL;
    brigade_error err;
    brigade_gguf_options nomap = {.no_mmap = true};

    /* An empty file, both ways. */
    snprintf(path, sizeof path, "%s/empty.gguf", dir);
    FILE *fp = fopen(path, "wb");
    fclose(fp);
    brigade_status st = brigade_gguf_open(path, NULL, &f, &err);
    CHECK(st == FMT && !f && strstr(err.message, path) && strstr(err.message, "0 bytes is too small"),
          "empty file (mmap): %s", err.message);
    st = brigade_gguf_open(path, &nomap, &f, &err);
    CHECK(st == FMT && !f && strstr(err.message, "0 bytes is too small"), "empty file (no_mmap): %s",
          err.message);

    /* A bad file through the path, both ways (exercises the error paths
     * that unmap or free the bytes). */
    buf b = {0};
    base_pos p;
    make_base(&b, &p);
    b.n -= 1;
    fp = fopen(path, "wb");
    fwrite(b.p, 1, b.n, fp);
    fclose(fp);
    st = brigade_gguf_open(path, NULL, &f, &err);
    CHECK(st == FMT && !f && strstr(err.message, "'t1'"), "truncated file (mmap): %s", err.message);
    st = brigade_gguf_open(path, &nomap, &f, &err);
    CHECK(st == FMT && !f && strstr(err.message, "'t1'"), "truncated file (no_mmap): %s",
          err.message);
    unlink(path);
    free(b.p);

    /* A directory, a missing file. */
    st = brigade_gguf_open(dir, NULL, &f, &err);
    CHECK(st == BRIGADE_ERR_IO && !f && strstr(err.message, dir) && strstr(err.message, "not a regular file"),
          "directory: %s %s", brigade_status_name(st), err.message);
    st = brigade_gguf_open(dir, &nomap, &f, &err);
    CHECK(st == BRIGADE_ERR_IO && !f, "directory (no_mmap): %s", err.message);
    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    st = brigade_gguf_open(path, NULL, &f, &err);
    CHECK(st == BRIGADE_ERR_IO && !f && strstr(err.message, path) && strstr(err.message, "cannot open"),
          "missing file: %s", err.message);
    rmdir(dir);

    /* Memory: nothing at all. */
    st = brigade_gguf_open_memory(NULL, 0, NULL, &f, &err);
    CHECK(st == FMT && !f, "open_memory(NULL, 0): %s", err.message);
}

/* ---------------------------------------------------------- typed getters */

static void test_getters(void)
{
    buf b = {0};
    header(&b, 3, 0, 9);
    kv(&b, "big", T_U64), u64_(&b, 1ull << 40);
    kv(&b, "neg", T_I32), u32_(&b, (uint32_t)-5);
    kv(&b, "min", T_I64), u64_(&b, (uint64_t)INT64_MIN);
    kv_str(&b, "s", "text");
    kv(&b, "f", T_F32), u32_(&b, 0x3fc00000u); /* 1.5 */
    kv(&b, "arr", T_ARR), arr(&b, T_U32, 1), u32_(&b, 1);
    kv(&b, "b", T_BOOL), u8_(&b, 1);
    kv(&b, "u32max", T_U64), u64_(&b, 1ull << 32);
    kv(&b, "strs", T_ARR), arr(&b, T_STR, 1), str_(&b, "x");
    brigade_gguf *f = NULL;
    brigade_error err = {0};
    brigade_status st = brigade_gguf_open_memory(b.p, b.n, LABEL, &f, &err);
    CHECK(st == BRIGADE_OK, "getter file: %s", err.message);
    if (!f) {
        free(b.p);
        return;
    }
    struct {
        const char *key;
        int which; /* 0 u32, 1 f32, 2 str */
        const char *want;
    } cases[] = {
        {"big", 0, "1099511627776"},  {"neg", 0, "-5"},      {"min", 0, "-9223372036854775808"},
        {"u32max", 0, "4294967296"},  {"s", 0, "holds string"}, {"f", 0, "holds f32"},
        {"arr", 0, "holds array"},    {"b", 0, "holds bool"},    {"s", 1, "holds string"},
        {"big", 1, "holds u64"},      {"arr", 1, "holds array"}, {"b", 1, "holds bool"},
        {"big", 2, "holds u64"},      {"f", 2, "holds f32"},     {"strs", 2, "holds array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t u = 77;
        float x = 77;
        brigade_string s = {"untouched", 9};
        memset(&err, 0, sizeof err);
        if (cases[i].which == 0)
            st = brigade_gguf_get_u32(f, cases[i].key, false, &u, &err);
        else if (cases[i].which == 1)
            st = brigade_gguf_get_f32(f, cases[i].key, false, &x, &err);
        else
            st = brigade_gguf_get_str(f, cases[i].key, false, &s, &err);
        bool named = strstr(err.message, S("'%s'", cases[i].key)) != NULL;
        CHECK(st == FMT && err.status == FMT && named && strstr(err.message, cases[i].want) &&
                  strstr(err.message, LABEL) && u == 77 && x == 77 && s.len == 9,
              "getter %d on '%s': %s %s (want '%s', output untouched)", cases[i].which,
              cases[i].key, brigade_status_name(st), err.message, cases[i].want);
    }
    st = brigade_gguf_get_str(f, "nope", true, &(brigade_string){0}, &err);
    CHECK(st == FMT && strstr(err.message, "'nope'") && strstr(err.message, "missing"),
          "required missing str: %s", err.message);
    st = brigade_gguf_get_f32(f, "nope", true, &(float){0}, &err);
    CHECK(st == FMT && strstr(err.message, "'nope'"), "required missing f32: %s", err.message);
    brigade_gguf_close(f);
    free(b.p);
}

int main(void)
{
    test_truncation();
    test_header();
    test_values();
    test_known_keys();
    test_tensors();
    test_files();
    test_getters();
    return check_summary("test_gguf_bad");
}
